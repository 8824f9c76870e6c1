/* SPDX-License-Identifier: MIT */
/*
 * fragsim: sweeps, grids of replays described by a spec file (`fragsim sweep SPEC --db OUT`).
 *
 * A spec (a GKeyFile, docs/sweep.md) names traces (globs), policies, PYTORCH_CUDA_ALLOC_CONF
 * strings and devices.  Every trace × policy × device, and × alloc conf for the policies that
 * read one, is a job; a job replays each device of its trace (or the one `trace-device` names)
 * and stores one run per trace device, with its needed capacity, in the results database.  Jobs
 * are listed in one deterministic order (traces as the globs list them, each glob's matches
 * sorted; then policies, alloc confs and devices in spec order), so every machine that loads the
 * same spec over the same files agrees on the list and on its shards.
 *
 *   spec.c    the spec: loading, validation (errors name the file, key and value), the job list
 *   shard.c   `--shard I/N`: a balanced, deterministic part of the job list
 *   job.c     one job, replayed in this process and written to the database
 *   pool.c    the jobs run by worker processes, N at a time, a crash isolated to its job
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

G_BEGIN_DECLS

/**
 * FsimSweepTrace:
 * @path: the trace file, as the glob found it under the spec's folder (relative to the current
 *     directory when it lies below it).
 * @job: (nullable): the name of the job (a group of ranks, `jobs=NAME:GLOB`) it belongs to.
 * @size: its size in bytes (the shard weight).
 */
typedef struct {
    char *path;
    char *job;
    uint64_t size;
} FsimSweepTrace;

/**
 * FsimSweepConfig:
 * @text: the canonical alloc conf ("" = PyTorch's default).
 * @knobs: its knobs in the `caching` and `expandable` groups.
 */
typedef struct {
    char *text;
    GKeyFile *knobs;
} FsimSweepConfig;

/* The configuration of the alloc-conf string @text (NULL: PyTorch's default); NULL with the
 * parser's error for a bad string.  `replay -c` makes its runs' configurations so too. */
FsimSweepConfig *fsim_sweep_config_new(const char *text, GError **error);
void fsim_sweep_config_free(gpointer config);
/* Add @config (transfer full) to @configs unless one of them has its canonical text already,
 * then free it: a list of configurations without duplicates, in the order given. */
void fsim_sweep_configs_add(GPtrArray *configs, FsimSweepConfig *config);

/**
 * FsimSweepJob:
 * @index: its place in the whole list, from 0 (the same on every machine).
 * @trace, @config, @device: borrowed from the spec.
 * @policy: the policy name (borrowed from the spec).
 */
typedef struct {
    guint index;
    const FsimSweepTrace *trace;
    const char *policy;
    const FsimSweepConfig *config;
    const FsimDeviceSpec *device;
} FsimSweepJob;

/**
 * FsimSweepSpec:
 * @path: the spec file.
 * @traces: (element-type FsimSweepTrace): in job order.
 * @policies: (element-type utf8).
 * @configs: (element-type FsimSweepConfig): at least one ("" when the spec names none).
 * @devices: (element-type FsimDeviceSpec).
 * @trace_device: the only trace device replayed, or -1 for every device with events.
 * @jobs: (element-type FsimSweepJob): every job, in order.
 */
typedef struct {
    char *path;
    GPtrArray *traces;
    GPtrArray *policies;
    GPtrArray *configs;
    GPtrArray *devices;
    gint trace_device;
    GPtrArray *jobs;
} FsimSweepSpec;

/**
 * fsim_sweep_spec_load:
 * @path: the spec file.
 * @error: FSIM_ERROR_INVALID_INPUT naming the file, the key and the value at fault (an unknown
 *     group or key, a policy, alloc conf or device that does not exist, a glob that matches
 *     nothing, a trace in two jobs), or a file error.
 *
 * Returns: (transfer full) (nullable): the spec with its job list.
 */
FsimSweepSpec *fsim_sweep_spec_load(const char *path, GError **error);
void fsim_sweep_spec_free(FsimSweepSpec *spec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimSweepSpec, fsim_sweep_spec_free)

/**
 * fsim_sweep_parse_shard:
 * @text: `I/N` with 1 <= I <= N.
 * @error: FSIM_ERROR_USAGE for anything else.
 */
gboolean fsim_sweep_parse_shard(const char *text, guint *index, guint *count, GError **error);

/**
 * fsim_sweep_shard:
 * @jobs: (element-type FsimSweepJob): the whole list.
 * @index, @count: shard @index (from 1) of @count.
 *
 * The jobs of one shard, in list order.  The shards partition the list: every job is in exactly
 * one.  They are balanced by weight (the trace's size plus a fixed cost, so that jobs of small
 * traces count too): jobs are dealt heaviest first, ties in list order, each to the shard with
 * the least weight so far (ties: the lowest shard), so shards differ by at most one job's weight.
 * Deterministic: the same list gives the same shards everywhere.
 *
 * Returns: (transfer container) (element-type FsimSweepJob): the shard's jobs (borrowed).
 */
GPtrArray *fsim_sweep_shard(GPtrArray *jobs, guint index, guint count);

/* Returns: (transfer full): the SHA-256 of the file @path in lowercase hex, or NULL with a file
 * error naming it. */
char *fsim_sweep_file_sha256(const char *path, GError **error);

/**
 * fsim_sweep_run_job:
 * @store: the database (opened for writing).
 * @spec: the spec (its trace_device).
 * @job: the job.
 * @sha256: (nullable): its trace's SHA-256.
 * @failed: (out): how many of its runs ended in error (recorded as such).
 * @error: a store error (nothing more can be recorded).
 *
 * Replays the job in this process: each device of its trace (or the spec's trace device),
 * with needed_bytes and the trace's lower bound, one run per device written to @store.  A job
 * that cannot be carried out (the trace cannot be read, the policy cannot be set up on the
 * device) is recorded as a run with status `error` and counted in @failed.
 *
 * Returns: %FALSE only when the database could not be written.
 */
gboolean fsim_sweep_run_job(FsimStore *store, const FsimSweepSpec *spec, const FsimSweepJob *job,
                            const char *sha256, guint *failed, GError **error);

/**
 * FsimSweepProgress:
 * @done: jobs finished (including failed ones); @failed: those with a run in error or whose
 *     worker died; @running: workers at work; @total: jobs to run.
 */
typedef struct {
    guint done;
    guint failed;
    guint running;
    guint total;
} FsimSweepProgress;

typedef void (*FsimSweepProgressFunc)(const FsimSweepProgress *progress, gpointer data);

/**
 * fsim_sweep_run:
 * @spec: the spec.
 * @jobs: (element-type FsimSweepJob): the jobs to run (all, or one shard).
 * @db_path: the database; every worker opens it itself (concurrent writers are safe).
 * @parallel: how many worker processes at a time (at least 1).
 * @progress: (nullable): called after each start and end of a job.
 * @failed: (out): jobs that failed (a run in error, or a worker that died: recorded as an error
 *     run by this process).
 * @error: a store error that stops the sweep (the database cannot be opened or written).
 *
 * Runs every job in a worker process of its own (fork), at most @parallel at a time.  A worker
 * that crashes or is killed costs only its job.
 *
 * Returns: %FALSE with @error set when the sweep could not go on.
 */
gboolean fsim_sweep_run(const FsimSweepSpec *spec, GPtrArray *jobs, const char *db_path,
                        guint parallel, FsimSweepProgressFunc progress, gpointer data,
                        guint *failed, GError **error);

G_END_DECLS
