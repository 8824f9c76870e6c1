/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the capacity a run needs (`needed_bytes`), shared by `replay` and `fit`.
 *
 * needed_bytes is the least device capacity C, a multiple of the device's granularity, such that
 * the run (its policy, knobs, initial state and events) replays without an OOM on every capacity
 * of at least C: "any card with at least this much works".  A capacity here means a card whose
 * usable and total memory are both C (what `replay -d C` models), with the chosen device's
 * granularity and costs.  So `replay -d needed_bytes` has no OOM and `replay -d needed_bytes -
 * granularity` has one, even where OOMs are not monotone in the capacity.
 *
 * The search replays a decoded copy of one device's events (#FsimEventLog: decoded once, replayed
 * many times) and relies on one property of the policies: their decisions depend on the capacity
 * only through the device refusing memory.  A run on capacity X that ran out of nothing, peaked
 * at P reserved bytes and whose smallest refused call would have taken the reservation to R
 * bytes (none: infinite) makes exactly the same decisions on every capacity in [P, R - 1], so one
 * replay proves a whole interval.  The search then (1) finds a capacity that fits without any
 * refusal (the chosen device, or doubling it), which proves everything above it, (2) bisects
 * between the trace's lower bound and the lowest proven capacity, jumping down to each fitting
 * run's own peak, and (3) replays the lowest capacity at or above the candidate that no run has
 * proven yet, until the proven intervals cover everything from the candidate up; a capacity that
 * fails there raises the candidate past it.  So the answer always fits and one granule less never
 * does.  Step 3 stops after %FSIM_NEEDED_MAX_REPLAYS replays in all: a policy that releases its
 * cache and retries when the device refuses (PyTorch's) takes a different path at almost every
 * capacity where it has to, so proving every one of them can take hundreds of replays; what the
 * budget did not reach is assumed to fit (OOMs monotone there), and @proven says whether it was
 * needed.  PyTorch's
 * per_process_memory_fraction (and the garbage collection it enables) scales with the card, and
 * expandable segments reserve address space in proportion to it, so for those settings each
 * replay proves only its own capacity: the answer still fits and the capacity one granule below
 * it does not, but larger capacities are assumed to fit (OOMs monotone above the answer).
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

G_BEGIN_DECLS

/* The events of one device, decoded once and replayed any number of times (marks left out). */
typedef struct FsimEventLog FsimEventLog;

FsimEventLog *fsim_event_log_new(uint32_t device);
void fsim_event_log_free(FsimEventLog *log);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimEventLog, fsim_event_log_free)

/* Append @ev (a MARK is skipped: no policy sees it). */
void fsim_event_log_append(FsimEventLog *log, const FsimEvent *ev);
/**
 * fsim_event_log_read:
 *
 * Appends the events of the log's device in @trace, as `replay` feeds them: empty_cache events
 * the reader inferred from a release burst that looks like PyTorch's retry before an OOM
 * (fsim_release_is_retry()) are left out unless @inferred_releases.
 */
gboolean fsim_event_log_read(FsimEventLog *log, FsimTrace *trace, gboolean inferred_releases,
                             GError **error);

/* Whether the recorded release burst that starts at entry @index (an empty_cache the reader
 * inferred) is followed at once by a segment allocation: PyTorch's retry after a failed cudaMalloc,
 * which a policy on another device does on its own if it needs to.  @outcomes: the device's
 * recorded outcomes, in trace order. */
gboolean fsim_release_is_retry(const FsimOutcome *outcomes, gsize n, uint64_t index);

/* The number of events kept. */
gsize fsim_event_log_length(const FsimEventLog *log);

/* Sets *@ev to event @i (< fsim_event_log_length()) as fsim_event_log_replay() feeds it. */
void fsim_event_log_get(const FsimEventLog *log, gsize i, FsimEvent *ev);
/* Call @func with the requested size of every ALLOC of @log, in order (what `tune` draws its
 * candidate settings from). */
void fsim_event_log_foreach_alloc(const FsimEventLog *log,
                                  void (*func)(uint64_t size, gpointer data), gpointer data);

/**
 * fsim_event_log_replay:
 *
 * Feeds every event of @log to @engine, in order, then finishes it.
 *
 * Returns: %FALSE at the first error of fsim_engine_process() (FSIM_ERROR_OOM under
 * fail_on_oom, the engine then finished so its metrics cover the run until the OOM).
 */
gboolean fsim_event_log_replay(const FsimEventLog *log, FsimEngine *engine, GError **error);

/**
 * FsimNeededQuery:
 * @policy, @config, @initial_state, @lifetimes, @paranoid, @free_delay_ns: the run (as
 *     #FsimRunConfig).
 * @device: the chosen device: its granularity and costs are used, its capacity is the first
 *     one tried.
 * @known: (nullable): the metrics of a run the caller made on @device with the same settings,
 *     and @known_refused that run's device's least_refused_demand: a run without an OOM there
 *     saves a replay.
 */
typedef struct {
    const char *policy;
    GKeyFile *config;
    FsimDeviceSpec device;
    const FsimInitialState *initial_state;
    const FsimLifetimes *lifetimes;
    gboolean paranoid;
    FsimTime free_delay_ns;
    const FsimMetrics *known;
    uint64_t known_refused;
} FsimNeededQuery;

/**
 * FsimNeededResult:
 * @needed_bytes: the answer (see above).
 * @metrics: the metrics of a replay on needed_bytes (or of one with the same decisions).
 * @replays: how many replays the search made.
 * @proven: every capacity from needed_bytes up was proven to fit (otherwise the replay budget
 *     ran out first, or the policy's decisions depend on the capacity; see above).
 */
typedef struct {
    uint64_t needed_bytes;
    FsimMetrics metrics;
    uint64_t replays;
    gboolean proven;
} FsimNeededResult;

/* The replays one search may make to prove the capacities above its answer (it makes fewer
 * when the proofs are done sooner, a few more when finding the answer takes them). */
#define FSIM_NEEDED_MAX_REPLAYS 20

/* The largest capacity the search tries (16 TiB) before it gives up. */
#define FSIM_NEEDED_LIMIT ((uint64_t)1 << 44)

/**
 * fsim_needed_search:
 * @log: the device's events.
 * @query: the run.
 * @out: (out): the answer.
 * @error: FSIM_ERROR_FAILED when the run runs out of memory even on %FSIM_NEEDED_LIMIT bytes;
 *     any error of a replay other than an OOM.
 *
 * Returns: %TRUE with @out filled.
 */
gboolean fsim_needed_search(const FsimEventLog *log, const FsimNeededQuery *query,
                            FsimNeededResult *out, GError **error);

/* The capacity each pool needs (#FsimPoolNeed, fragsim/explain.h): a pool's share of the run's
 * needed_bytes is what the run holds in that pool when the card is as small as the run allows.
 * That is the honest per-pool figure: replaying one pool's events alone would not show how pools
 * compete (a release of the cache frees every pool's free segments, a capture forbids it), and
 * the pools' own peaks do not add up to what the run needs. */

/**
 * fsim_needed_pools:
 * @log: the device's events.
 * @query: the run.
 * @needed_bytes: the run's needed_bytes (fsim_needed_search()).
 * @peak: (out): the reservation at the peak of the replay on @needed_bytes.
 * @error: a replay's error (an OOM included: @needed_bytes must fit).
 *
 * Replays the run once more on @needed_bytes and takes each pool's share at its peak.
 *
 * Returns: (transfer full) (nullable): #FsimPoolNeed per pool, the default pools first, then the
 *     private pools by id; %NULL with @error unset when the run has no private pools.
 */
GArray *fsim_needed_pools(const FsimEventLog *log, const FsimNeededQuery *query,
                          uint64_t needed_bytes, uint64_t *peak, GError **error);

/**
 * fsim_needed_stored_pools:
 * @policy: a run's policy (at the end of the run).
 * @needs: (nullable): the run's #FsimPoolNeed (fsim_needed_pools()).
 *
 * Returns: (transfer full) (nullable): the run's memory by pool as #FsimStoredPool (table
 *     run_pools): the policy's pool_stats with each pool's share of needed_bytes (-1 without
 *     @needs); %NULL when the run has no private pools.
 */
GArray *fsim_needed_stored_pools(const FsimPolicy *policy, const GArray *needs);

/* A device like @spec (granularity, costs) with @capacity bytes, usable and total. */
FsimDeviceSpec fsim_needed_device(const FsimDeviceSpec *spec, uint64_t capacity);

G_END_DECLS
