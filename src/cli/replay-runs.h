/* SPDX-License-Identifier: MIT */
/*
 * The runs of `fragsim replay`, shared by cmd-replay.c (which makes them) and replay-print.c
 * (which prints them as a table or JSON).
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

#include "analysis/peak.h"

G_BEGIN_DECLS

typedef enum {
    REPLAY_COMPLETE,
    REPLAY_OOM, /* stopped at its first OOM (--fail-on-oom) */
    REPLAY_ERROR,
} ReplayStatus;

/**
 * ReplayRun:
 * @policy: the policy name, or `recorded` for what the recording itself did (no engine).
 * @config: the canonical alloc conf ("" = default); @label: policy and config.
 * @knobs: the run's key file (borrowed from the configuration).
 * @engine: (nullable): NULL when the run could not even start (status error).
 * @metrics: the final metrics: the engine's, with needed_bytes and the trace's lower bound.
 * @error: (nullable): why a run has status error.
 * @needed_note: (nullable): why needed_bytes is null although it was asked for.
 * @pool_needs: (nullable): with private pools, each pool's share of needed_bytes (FsimPoolNeed),
 *     and @pool_needs_peak what they add up to.
 */
typedef struct {
    const char *policy;
    char *config;
    char *label;
    GKeyFile *knobs;
    uint32_t trace_device;
    FsimDeviceSpec device;
    FsimEngine *engine;
    ReplayStatus status;
    char *oom_message;
    char *error;
    char *needed_note;
    FsimMetrics metrics;
    uint64_t needed_replays;
    GArray *pool_needs;
    uint64_t pool_needs_peak;
    uint64_t served_peak_requested; /* peak requested of a run without OOM, 0 = unknown */
    gboolean recorded_capacity;     /* the recorded row: its capacity is implied by an OOM */
    FsimPeakWatch peak;             /* with --db: the largest reserved bytes after an event */
} ReplayRun;

const char *replay_status_name(ReplayStatus status);

/* Print the comparison: one table per trace device, notes below it. */
void replay_print_table(FsimTrace *trace, GPtrArray *runs);

/* Print `{"trace": PATH, "runs": [...]}`; @run_id gives each run's database row (-1: none). */
void replay_print_json(const char *path, GPtrArray *runs,
                       int64_t (*run_id)(gpointer data, const ReplayRun *run), gpointer data);

G_END_DECLS
