/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the results database.
 *
 * A SQLite file that any number of runs append to (many traces, policies and devices in one
 * file) and that every later command reads: `plot`, `report`, users' own queries.  The schema is
 * documented in docs/metrics.md; its version is `PRAGMA user_version` and the file is marked as
 * fragsim's by `PRAGMA application_id`, so a database from a newer fragsim, or a file that is not
 * a fragsim database, is refused with a clear error instead of being modified.
 *
 * WRITING.  The store is an observer of the engine (fsim_store_attach()): the engine knows
 * nothing of SQLite.  The life of a run in the database:
 *   1. fsim_store_attach() commits the run's row with status `running`, in its own transaction,
 *      before the first event;
 *   2. while the engine runs, the store collects the run's data in bounded memory: samples
 *      (bucketed, see #FsimStoreLimits), segment-level device actions, block lifetimes for
 *      address maps, OOMs, marks and the request-size histogram;
 *   3. fsim_store_run_finish() writes all of it, the metrics, and the final status in one
 *      transaction.
 * A process killed at any moment therefore leaves a readable database in which its run is still
 * marked `running` and has no data, never a torn run.  Runs replayed in lock step (one trace,
 * several policies) are independent: each has its own transaction at its own finish.
 *
 * READING.  fsim_store_runs() lists runs with their metrics; the other readers return one run's
 * rows in order.  Only runs whose status is `complete` or `oom` have data.
 *
 * Every SQLite call is checked; failures are #FSIM_STORE_ERROR errors whose message names the
 * database file.  Statements are prepared once and take bound parameters only.
 */
#pragma once

#include <glib.h>

#include "fragsim/device.h"
#include "fragsim/engine.h"
#include "fragsim/metrics.h"
#include "fragsim/types.h"

G_BEGIN_DECLS

/* The schema version written to `PRAGMA user_version`. */
#define FSIM_STORE_SCHEMA_VERSION 2

/* `PRAGMA application_id` of a fragsim database: "FSIM" in ASCII. */
#define FSIM_STORE_APPLICATION_ID 0x4653494d

/**
 * FSIM_STORE_ERROR:
 *
 * Errors of the results database.  Codes are #FsimStoreError.
 */
#define FSIM_STORE_ERROR (fsim_store_error_quark())
GQuark fsim_store_error_quark(void);

/**
 * FsimStoreError:
 * @FSIM_STORE_ERROR_FAILED: any other SQLite failure; the message has SQLite's own.
 * @FSIM_STORE_ERROR_OPEN: the file cannot be opened or created (missing directory, read-only
 *     location, permissions), or does not exist when reading.
 * @FSIM_STORE_ERROR_NOT_FRAGSIM: the file is not a SQLite database, or one that fragsim did not
 *     create.
 * @FSIM_STORE_ERROR_NEWER: the database was written by a newer fragsim (higher schema version).
 * @FSIM_STORE_ERROR_READ_ONLY: a write was refused: the file or its directory is read-only.
 * @FSIM_STORE_ERROR_FULL: the disk (or the database's size limit) is full.
 * @FSIM_STORE_ERROR_BUSY: another process holds the database locked for too long.
 * @FSIM_STORE_ERROR_NO_RUN: a run id that is not in the database.
 * @FSIM_STORE_ERROR_INCOMPLETE: a run asked for by id has no data (status `running` or `failed`).
 */
typedef enum {
    FSIM_STORE_ERROR_FAILED,
    FSIM_STORE_ERROR_OPEN,
    FSIM_STORE_ERROR_NOT_FRAGSIM,
    FSIM_STORE_ERROR_NEWER,
    FSIM_STORE_ERROR_READ_ONLY,
    FSIM_STORE_ERROR_FULL,
    FSIM_STORE_ERROR_BUSY,
    FSIM_STORE_ERROR_NO_RUN,
    FSIM_STORE_ERROR_INCOMPLETE,
} FsimStoreError;

/**
 * FsimStoreStatus:
 * @FSIM_STORE_RUNNING: the run started and has not finished: still in progress, or its process
 *     was killed (the row is all that is left; there is no data).
 * @FSIM_STORE_COMPLETE: the run went through the whole trace (it may have had OOMs).
 * @FSIM_STORE_OOM: the run stopped at its first OOM (`--fail-on-oom`); its data up to there is
 *     stored.
 * @FSIM_STORE_ERRORED: the run could not be carried out, for a reason other than running out of
 *     memory (the policy cannot be set up on the device, an internal error of the policy), while
 *     the other runs of its comparison went on; `message` says why; there is no data.  A
 *     database created before this status existed records such a run as `failed`.
 * @FSIM_STORE_FAILED: the run was interrupted while it was written (a broken trace, a failed
 *     write); `message` says why; there is no data.
 */
typedef enum {
    FSIM_STORE_RUNNING,
    FSIM_STORE_COMPLETE,
    FSIM_STORE_OOM,
    FSIM_STORE_FAILED,
    FSIM_STORE_ERRORED,
} FsimStoreStatus;

/* Returns: the status as stored: `running`, `complete`, `oom`, `error`, `failed`. */
const char *fsim_store_status_name(FsimStoreStatus status);

typedef struct FsimStore FsimStore;
typedef struct FsimStoreRun FsimStoreRun;

/**
 * FsimStoreFlags:
 * @FSIM_STORE_READ: open an existing database for reading only.
 * @FSIM_STORE_WRITE: open for appending runs, creating the file (and the schema) if missing.
 */
typedef enum {
    FSIM_STORE_READ = 0,
    FSIM_STORE_WRITE = 1 << 0,
} FsimStoreFlags;

/**
 * FsimStoreOptions:
 * @max_page_count: when non-zero, `PRAGMA max_page_count` for this connection: writes that would
 *     grow the file beyond it fail with %FSIM_STORE_ERROR_FULL, exactly as on a full disk (tests
 *     use it to simulate one).
 * @busy_timeout_ms: how long to wait for another writer; 0 means the default, 10 seconds.
 */
typedef struct {
    uint64_t max_page_count;
    guint busy_timeout_ms;
} FsimStoreOptions;

/**
 * fsim_store_open:
 * @path: the database file; `:memory:` for a private in-memory database (tests).
 * @flags: %FSIM_STORE_READ or %FSIM_STORE_WRITE.
 * @options: (nullable): options; %NULL for the defaults.
 * @error: %FSIM_STORE_ERROR_OPEN, %FSIM_STORE_ERROR_NOT_FRAGSIM, %FSIM_STORE_ERROR_NEWER,
 *     %FSIM_STORE_ERROR_FULL, or another store error.
 *
 * Opens (for %FSIM_STORE_WRITE: creates) a results database.  A new file gets the schema, WAL
 * journalling and `synchronous=NORMAL`.  A file that is not fragsim's is never modified.  When
 * the file did not exist and creating the schema fails, the file is removed again, so a failed
 * open leaves nothing behind.
 *
 * Returns: (transfer full) (nullable): the store; close with fsim_store_close().
 */
FsimStore *fsim_store_open(const char *path, FsimStoreFlags flags, const FsimStoreOptions *options,
                           GError **error);

/* Close (NULL is a no-op).  Every run attached to the store must have been freed first. */
void fsim_store_close(FsimStore *store);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimStore, fsim_store_close)

/* Returns: (transfer none): the path the store was opened with. */
const char *fsim_store_path(const FsimStore *store);

/**
 * FsimStoreLimits:
 * @max_samples: samples kept per run (0: the default, 1,000).  Events are grouped into
 *     consecutive buckets of equal event count, doubled as the run grows so that there are
 *     between @max_samples / 2 and @max_samples + 1 of them; each bucket keeps the minimum and
 *     the maximum of requested, allocated and reserved bytes within it, so every peak survives
 *     exactly.
 * @max_blocks: block lifetimes kept per run for address maps (0: the default, 20,000): those
 *     with the largest size × lifetime, the ones an address map can show.
 * @max_segment_actions: segment-level device actions kept per run (0: the default, 250,000);
 *     the first ones are kept and the rest counted.
 * @max_ooms: OOM records kept per run (0: the default, 10,000); the metrics count all.
 * @max_marks: marks kept per run (0: the default, 10,000).
 */
typedef struct {
    guint max_samples;
    guint max_blocks;
    guint max_segment_actions;
    guint max_ooms;
    guint max_marks;
} FsimStoreLimits;

#define FSIM_STORE_DEFAULT_SAMPLES 1000

/**
 * FsimStoreRunInfo:
 * @trace: the trace as the user named it.
 * @trace_format: its format name.
 * @trace_device: the device index of the trace this run replays.
 * @policy: the policy name.
 * @knobs: (nullable): the knobs in effect, as text (`key=value` lines); %NULL for none.
 * @config: (nullable): the canonical PYTORCH_CUDA_ALLOC_CONF of the run (`""` = default).
 * @label: (nullable): the run's label (policy and config); %NULL = fsim_run_label().
 * @seed: the random seed of a generated trace, or -1 for none.
 * @limits: (nullable): the data limits; %NULL for the defaults.
 * @trace_sha256: (nullable): the SHA-256 of the trace file in lowercase hex (sweeps set it),
 *     how `merge` knows the same job wherever its trace lay; %NULL: not computed.
 * @job: (nullable): the name of the sweep job (a group of ranks) the trace belongs to.
 *
 * What the `runs` row records besides the device, which is taken from the engine.
 */
typedef struct {
    const char *trace;
    const char *trace_format;
    uint32_t trace_device;
    const char *policy;
    const char *knobs;
    const char *config;
    const char *label;
    int64_t seed;
    const FsimStoreLimits *limits;
    const char *trace_sha256;
    const char *job;
} FsimStoreRunInfo;

/**
 * fsim_store_knobs_text:
 * @config: (nullable): a run's key file.
 *
 * The knobs column of a run of @policy: the `group.key=value` lines of @config's groups
 * @policy and `device` (the fault injection), keys sorted in each.
 *
 * Returns: (transfer full): the text; "" for a %NULL @config.
 */
char *fsim_store_knobs_text(GKeyFile *config, const char *policy);

/**
 * fsim_store_attach:
 * @store: a store opened with %FSIM_STORE_WRITE.
 * @engine: a new engine that has not processed any event; borrowed, it must stay alive until
 *     fsim_store_run_finish() or fsim_store_run_free().
 * @info: the run's description (copied).
 * @error: a store error when the row cannot be written.
 *
 * Commits the run's row with status `running` and adds the store as an observer of @engine.
 *
 * Returns: (transfer full) (nullable): the run; free with fsim_store_run_free().
 */
FsimStoreRun *fsim_store_attach(FsimStore *store, FsimEngine *engine, const FsimStoreRunInfo *info,
                                GError **error);

/* Returns: the run's id (the `runs.id` column). */
int64_t fsim_store_run_id(const FsimStoreRun *run);

/**
 * fsim_store_run_finish:
 * @run: an attached run.
 * @status: %FSIM_STORE_COMPLETE or %FSIM_STORE_OOM (its engine may then be unfinished).
 * @error: a store error (the disk is full...).
 *
 * Writes the run's data, metrics and @status in one transaction.  On failure the transaction is
 * rolled back and the run marked `failed` when that is still possible; it never looks complete.
 * Call it at most once; the observer stays attached but ignores later events.
 *
 * Returns: %FALSE with @error set on failure.
 */
gboolean fsim_store_run_finish(FsimStoreRun *run, FsimStoreStatus status, GError **error);

/**
 * fsim_store_run_fail:
 * @run: an attached run.
 * @message: (nullable): why.
 *
 * Marks the run `failed` (best effort: errors are logged, not returned).  Its data is dropped.
 */
void fsim_store_run_fail(FsimStoreRun *run, const char *message);

/* Marks the run `error` (it could not be carried out; see %FSIM_STORE_ERRORED), best effort. */
void fsim_store_run_error(FsimStoreRun *run, const char *message);

/* The metrics fsim_store_run_finish() writes instead of the engine's (copied): the engine's with
 * what later analysis added (needed_bytes, the trace's lower bound). */
void fsim_store_run_set_metrics(FsimStoreRun *run, const FsimMetrics *metrics);

/**
 * FsimStoredBreakdown:
 * @present: whether the run has one (a run replayed by an older fragsim, the `recorded` run of
 *     a snapshot, a policy that cannot describe its segments: none).
 * @event_index: the event after which reserved memory first reached its maximum (the peak as
 *     `fragsim explain` finds it); -1 for the state at trace start.
 * @time: that event's time.
 * @reserved_bytes: reserved memory then: the four parts add up to it exactly.
 * @live_requested_bytes, @rounding_bytes, @free_releasable_bytes, @free_pinned_bytes: the parts,
 *     as explain.h's #FsimBreakdown defines them.
 *
 * The breakdown of reserved memory at the peak of a run (table `run_breakdown`, moment `peak`).
 */
typedef struct {
    gboolean present;
    int64_t event_index;
    FsimTime time;
    uint64_t reserved_bytes;
    uint64_t live_requested_bytes;
    uint64_t rounding_bytes;
    uint64_t free_releasable_bytes;
    uint64_t free_pinned_bytes;
} FsimStoredBreakdown;

/* The breakdown at the peak that fsim_store_run_finish() writes (copied). */
void fsim_store_run_set_breakdown(FsimStoreRun *run, const FsimStoredBreakdown *breakdown);

/**
 * FsimStoredPool:
 * @pool: 0 for the default pools, else a private pool's id (a CUDA graph's, a MemPool's).
 * @needed_bytes: its share of the run's needed_bytes (what it reserves at the peak of a replay
 *     on that capacity, analysis/needed.h); -1 when not computed.
 * @peak_reserved_bytes: the most it reserved at once.
 * @reserved_bytes: what it reserves at the end of the run.
 * @use_count: references on it at the end (0 for the default pools).
 *
 * The memory of one pool of a run with private pools (table `run_pools`).
 */
typedef struct {
    uint64_t pool;
    int64_t needed_bytes;
    uint64_t peak_reserved_bytes;
    uint64_t reserved_bytes;
    uint64_t use_count;
} FsimStoredPool;

/* The memory by pool that fsim_store_run_finish() writes (@n entries, copied). */
void fsim_store_run_set_pools(FsimStoreRun *run, const FsimStoredPool *pools, guint n);

/* Free a run (NULL is a no-op).  A run neither finished nor failed is marked `failed`. */
void fsim_store_run_free(FsimStoreRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimStoreRun, fsim_store_run_free)

/**
 * fsim_store_add_run:
 * @store: a store opened with %FSIM_STORE_WRITE.
 * @device: the device the run is for.
 * @info: the run's description (its limits are ignored: such a run has no samples).
 * @status: %FSIM_STORE_COMPLETE or %FSIM_STORE_OOM with @metrics (a `recorded` row), or
 *     %FSIM_STORE_ERRORED with @message (a run that could not be carried out).
 * @metrics: (nullable): its metrics; required unless @status is %FSIM_STORE_ERRORED.
 * @message: (nullable): why the run ended in error.
 * @id: (out) (optional): the new run's id.
 * @error: a store error.
 *
 * Writes a run that has no replay to observe, whole, in one transaction.
 *
 * Returns: %FALSE with @error set on failure (nothing is written then).
 */
gboolean fsim_store_add_run(FsimStore *store, const FsimDeviceSpec *device,
                            const FsimStoreRunInfo *info, FsimStoreStatus status,
                            const FsimMetrics *metrics, const char *message, int64_t *id,
                            GError **error);

/**
 * fsim_store_record_error_run:
 * @store: a store opened with %FSIM_STORE_WRITE.
 * @info: the run as fsim_store_attach() would record it.
 * @device: the device the run was to use.
 * @message: why it could not be carried out.
 * @error: a store error.
 *
 * Records a run that could not be carried out at all, so that no engine could be attached (the
 * trace cannot be read, the policy cannot be set up on the device, the sweep worker running it
 * died): status `error`, @message, no data.  When rows of the same run (trace_sha256, or the
 * trace when that is %NULL; trace device, policy, config, device name and job) are still
 * `running`, which is what a worker killed in the middle leaves, those rows are marked `error`
 * instead of adding one (fsim_store_add_run() always adds one).  One transaction.
 *
 * Returns: %FALSE with @error set on failure.
 */
gboolean fsim_store_record_error_run(FsimStore *store, const FsimStoreRunInfo *info,
                                     const FsimDeviceSpec *device, const char *message,
                                     GError **error);

/**
 * FsimStoreMergeStats:
 * @runs_copied: runs copied into the output, with everything keyed by their id.
 * @runs_skipped: runs left out because the output already had the same run (see
 *     fsim_store_merge()).
 * @rows_copied: rows copied from the tables under `runs`, over all tables.
 */
typedef struct {
    uint64_t runs_copied;
    uint64_t runs_skipped;
    uint64_t rows_copied;
} FsimStoreMergeStats;

/**
 * fsim_store_merge:
 * @out: the database to merge into; created when missing.
 * @inputs: (array length=n_inputs): the databases to merge from.
 * @n_inputs: their number.
 * @stats: (out) (optional): what was copied.
 * @error: %FSIM_STORE_ERROR_NOT_FRAGSIM or %FSIM_STORE_ERROR_NEWER naming an input that is not a
 *     fragsim database or was written by a newer fragsim, %FSIM_STORE_ERROR_OPEN for a missing
 *     one, or another store error.
 *
 * Appends every run of every input to @out, in input order and then by id, with new ids, and
 * every row of every table that refers to `runs` (a column `run_id`, or a foreign key to
 * `runs`), the tables' common columns copied whatever other programs or later versions added.
 * A run whose job @out already has (the same trace_sha256, or trace path when the run has no
 * hash, trace device, policy, config, device and fragsim version: the same input twice, or an
 * overlapping shard) is skipped, as are runs still `running`.  Every input is checked before
 * @out is opened, and everything is written in one transaction: on any failure @out is left as
 * it was (not even created).
 *
 * Returns: %FALSE with @error set on failure.
 */
gboolean fsim_store_merge(const char *out, const char *const *inputs, gsize n_inputs,
                          FsimStoreMergeStats *stats, GError **error);

/* ---- reading ------------------------------------------------------------------------------ */

/**
 * FsimStoredRun:
 *
 * One row of `runs` with its `run_metrics` (when @has_metrics).  Strings are owned by the
 * struct; free it with fsim_stored_run_free().
 */
typedef struct {
    int64_t id;
    char *trace;
    char *trace_format;
    uint32_t trace_device;
    char *policy;
    char *device;             /* preset or size, as given */
    char *device_description; /* e.g. `NVIDIA H100 80GB HBM3` */
    uint64_t capacity_bytes;
    uint64_t total_bytes;
    uint64_t granularity;
    char *knobs;
    char *config;       /* canonical PYTORCH_CUDA_ALLOC_CONF, "" = default */
    char *label;        /* policy and config, as tables and legends show the run */
    char *trace_sha256; /* nullable: the trace file's SHA-256 (hex), set by sweeps */
    char *job;          /* nullable: the sweep job (group of ranks) of the trace */
    int64_t seed;       /* -1: none */
    FsimStoreStatus status;
    char *message; /* nullable */
    char *created_at;
    char *finished_at; /* nullable */
    char *fragsim_version;
    uint64_t segment_actions;        /* device actions seen */
    uint64_t segment_actions_stored; /* rows in `segments` */
    uint64_t blocks;                 /* allocations seen */
    uint64_t blocks_stored;          /* rows in `blocks` */
    gboolean has_metrics;
    FsimMetrics metrics;
} FsimStoredRun;

void fsim_stored_run_free(FsimStoredRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimStoredRun, fsim_stored_run_free)

/* Whether a stored run has data (status complete or oom). */
gboolean fsim_stored_run_has_data(const FsimStoredRun *run);

/**
 * fsim_store_runs:
 * @store: a store.
 * @ids: (array length=n_ids) (nullable): the runs wanted, in the order wanted; %NULL for all.
 * @n_ids: their number.
 * @error: %FSIM_STORE_ERROR_NO_RUN naming the first id not in the database.
 *
 * Returns: (transfer full) (element-type FsimStoredRun) (nullable): the runs, ordered by id when
 * @ids is %NULL.
 */
GPtrArray *fsim_store_runs(FsimStore *store, const int64_t *ids, gsize n_ids, GError **error);

/**
 * FsimStoredSample:
 *
 * One bucket of consecutive events (see #FsimStoreLimits).  @requested, @allocated and @reserved
 * are the values after the bucket's last event; the _min/_max fields their extremes over the
 * bucket (reserved includes peaks reached inside an event, e.g. before a release-and-retry).
 */
typedef struct {
    uint64_t event_index;      /* first event of the bucket */
    uint64_t event_index_last; /* last event */
    uint64_t events;           /* events in the bucket */
    FsimTime time;             /* of the first event */
    FsimTime time_last;
    uint64_t requested;
    uint64_t allocated;
    uint64_t reserved;
    uint64_t requested_min, requested_max;
    uint64_t allocated_min, allocated_max;
    uint64_t reserved_min, reserved_max;
} FsimStoredSample;

/* Returns: (transfer full) (element-type FsimStoredSample) (nullable): the run's samples in
 * event order. */
GArray *fsim_store_samples(FsimStore *store, int64_t run_id, GError **error);

/**
 * FsimStoredSegment:
 *
 * One segment-level device action.  @action is FSIM_CALL_* for driver calls, or
 * %FSIM_STORE_ACTION_SEED for a segment of the trace's initial state (then @event_index is -1).
 * @size is device memory in bytes: a cudaMalloc/cudaFree is rounded up to the device granularity,
 * as the device reserves it.
 */
#define FSIM_STORE_ACTION_SEED FSIM_CALL_COUNT
typedef struct {
    int64_t event_index;
    FsimTime time;
    guint action;
    FsimAddr addr;
    uint64_t size;
} FsimStoredSegment;

/* The name of a stored action: fsim_device_call_name() or `seed`. */
const char *fsim_store_action_name(guint action);

GArray *fsim_store_segments(FsimStore *store, int64_t run_id, GError **error);

/**
 * FsimStoredBlock:
 *
 * The lifetime of one allocation (among the run's largest, see #FsimStoreLimits).
 * @alloc_event is -1 for a block alive at trace start; @free_event is -1 for one still alive at
 * the end (its @free_time is then the run's last time).
 */
typedef struct {
    uint64_t id;
    FsimAddr addr;
    uint64_t size;
    uint64_t requested;
    uint64_t stream;
    int64_t alloc_event;
    FsimTime alloc_time;
    int64_t free_event;
    FsimTime free_time;
} FsimStoredBlock;

/* Ordered by allocation event. */
GArray *fsim_store_blocks(FsimStore *store, int64_t run_id, GError **error);

/* Returns: (element-type FsimOomRecord): the run's OOMs in event order. */
GArray *fsim_store_ooms(FsimStore *store, int64_t run_id, GError **error);

typedef struct {
    uint64_t event_index;
    FsimTime time;
    char *label;
} FsimStoredMark;

/* Returns: (element-type FsimStoredMark): the marks; the array frees the labels. */
GArray *fsim_store_marks(FsimStore *store, int64_t run_id, GError **error);

/**
 * FsimStoredSizeBucket:
 *
 * Requests (ALLOC events, OOMs included) of @log2 = floor(log2(size)): sizes in
 * [2^log2, 2^(log2+1)).
 */
typedef struct {
    guint log2;
    uint64_t count;
    uint64_t bytes;
} FsimStoredSizeBucket;

/* Returns: (element-type FsimStoredSizeBucket): the non-empty buckets, ascending. */
GArray *fsim_store_sizes(FsimStore *store, int64_t run_id, GError **error);

/**
 * fsim_store_pools:
 *
 * Returns: (transfer full) (nullable): the run's #FsimStoredPool rows by pool (empty for a run
 *     without private pools, or a database without the table); %NULL with @error on failure.
 */
GArray *fsim_store_pools(FsimStore *store, int64_t run_id, GError **error);

/**
 * fsim_stored_pool_cells:
 *
 * A pool's row as replay's table and the report show it: its name (`default`, `private N`),
 * what it needs (`-` when unknown), its peak, what it holds at the end (sizes as
 * fsim_format_size() writes them) and its references (empty for the default pools).
 *
 * Returns: (transfer full): the five cells, NULL-terminated.
 */
GStrv fsim_stored_pool_cells(const FsimStoredPool *pool);

/**
 * fsim_store_breakdown:
 * @out: (out): the run's breakdown at the peak; @out->present is %FALSE when it has none.
 *
 * Returns: %FALSE with @error set when the database cannot be read.
 */
gboolean fsim_store_breakdown(FsimStore *store, int64_t run_id, FsimStoredBreakdown *out,
                              GError **error);

/**
 * FsimStoredPhase:
 *
 * The figures of one phase of a run: the events from one `mark` to the next (table
 * `run_phases`).  @label is the mark that opens it, %NULL for the events before the first mark.
 * Peaks are maxima over the phase's events (reserved includes peaks inside an event);
 * @reserved_bytes_end is what the policy held after its last event; @driver_calls counts
 * cudaMalloc, cudaFree, map and unmap calls (as the metrics device_mallocs to device_unmaps do);
 * @ooms the simulated OOMs.  A trace without marks has
 * no phases.  In `phase_results` the first phase opened by a mark is the `warm-up`, the later
 * ones `steady`.
 */
typedef struct {
    char *label;
    uint64_t event_index;
    uint64_t event_index_last;
    uint64_t events;
    FsimTime time;
    FsimTime time_last;
    uint64_t peak_requested_bytes;
    uint64_t peak_allocated_bytes;
    uint64_t peak_reserved_bytes;
    uint64_t reserved_bytes_end;
    uint64_t driver_calls;
    uint64_t ooms;
} FsimStoredPhase;

/* Returns: (element-type FsimStoredPhase): the run's phases in order; the array frees the
 * labels.  Empty for a run without marks (or from a database without the table). */
GArray *fsim_store_phases(FsimStore *store, int64_t run_id, GError **error);

/**
 * FsimStoredRecommendation:
 *
 * A setting `fragsim tune --db` recommends for one trace device on one device (table
 * `recommendations`): the run of its @config (@run_id) against the default settings' run
 * (@default_run_id), the capacity it needs and what it saves; @env is the line to set it
 * (`PYTORCH_CUDA_ALLOC_CONF=...`), @candidates the settings tune tried.
 */
typedef struct {
    int64_t id;
    char *trace;
    uint32_t trace_device;
    char *device;
    int64_t default_run_id; /* -1: none */
    int64_t run_id;         /* -1: none */
    char *config;
    char *env;
    int64_t needed_bytes; /* -1: unknown */
    int64_t saving_bytes; /* -1: unknown */
    int64_t candidates;   /* -1: unknown */
    char *created_at;
} FsimStoredRecommendation;

/* Returns: (element-type FsimStoredRecommendation): tune's recommendations, oldest first (empty
 * when tune never wrote to the database); the array frees the strings. */
GArray *fsim_store_recommendations(FsimStore *store, GError **error);

/**
 * fsim_store_view_names:
 * @n: (out): their number.
 *
 * The stable views of the database (docs/database.md), in the order `export` writes them:
 * `run_results`, `run_samples`, `run_ooms`, `phase_results`.
 *
 * Returns: (transfer none): the names, %NULL-terminated.
 */
const char *const *fsim_store_view_names(gsize *n);

/**
 * fsim_store_export_csv:
 * @store: a store.
 * @dir: the directory to write into (created if missing).
 * @progress: (nullable): called after each view with its name and its rows.
 * @error: a store error; FSIM_STORE_ERROR_OPEN when a file cannot be written;
 *     FSIM_STORE_ERROR_FAILED when the database has no views (written by an older fragsim and
 *     opened read-only).
 *
 * Writes each view as `DIR/VIEW.csv` (RFC 4180: a header line, comma-separated fields, fields
 * with a comma, quote or line break quoted with doubled quotes, CRLF line ends; NULL is an empty
 * field; reals with 17 significant digits).  Each file is written under a temporary name and
 * renamed into place.
 *
 * Returns: %FALSE with @error set on failure.
 */
gboolean fsim_store_export_csv(FsimStore *store, const char *dir,
                               void (*progress)(gpointer data, const char *view, uint64_t rows),
                               gpointer data, GError **error);

/**
 * fsim_store_parse_run_ids:
 * @text: a list such as `3`, `1,4,7` or `2-5,9`.
 * @out: (out) (transfer full): the ids, in the order given, duplicates removed.
 * @error: %FSIM_ERROR_USAGE for a malformed list.
 */
gboolean fsim_store_parse_run_ids(const char *text, GArray **out, GError **error);

/* ---- recommendations (`fragsim tune --db`) ------------------------------------------------ */

/**
 * FsimStoreRecommendationInfo:
 * What fsim_store_add_recommendation() writes: the members of #FsimStoredRecommendation but @id
 * and @created_at (the time of writing), borrowed.
 */
typedef struct {
    const char *trace;
    uint32_t trace_device;
    const char *device;
    int64_t default_run_id;
    int64_t run_id;
    const char *config;
    const char *env;
    uint64_t needed_bytes;
    uint64_t saving_bytes;
    uint64_t candidates;
} FsimStoreRecommendationInfo;

/**
 * fsim_store_add_recommendation:
 * @store: a store opened with %FSIM_STORE_WRITE.
 * @recommendation: the row.
 * @id: (out) (optional): the new row's id.
 *
 * Returns: %FALSE with a store error.
 */
gboolean fsim_store_add_recommendation(FsimStore *store,
                                       const FsimStoreRecommendationInfo *recommendation,
                                       int64_t *id, GError **error);

G_END_DECLS
