/* SPDX-License-Identifier: MIT */
/*
 * What `fragsim replay` writes besides its table: runs appended to a results database (--db,
 * --samples) and a simulated run exported as a PyTorch memory snapshot (--export-snapshot).
 *
 * cmd-replay.c calls these hooks and knows nothing else of the store or the exporter:
 *
 *   outputs = fsim_replay_outputs_new();
 *   fsim_replay_outputs_parse(outputs, command, parameter, entries, description, &argc, &argv);
 *   ... open the trace ...
 *   fsim_replay_outputs_open(outputs, trace, n_runs, trace_device, &error);
 *   ... for each engine created: fsim_replay_outputs_attach(outputs, engine, trace_device, config,
 *       label, &error);
 *   ... replay, then for each run: fsim_replay_outputs_result(outputs, engine, metrics, error);
 *   fsim_replay_outputs_finish(outputs, json, &error);
 *   fsim_replay_outputs_free(outputs);   (marks unfinished runs failed, removes partial exports)
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

#include "replay-runs.h"

G_BEGIN_DECLS

typedef struct FsimReplayOutputs FsimReplayOutputs;

FsimReplayOutputs *fsim_replay_outputs_new(void);
void fsim_replay_outputs_free(FsimReplayOutputs *outputs);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimReplayOutputs, fsim_replay_outputs_free)

/**
 * fsim_replay_outputs_parse:
 * @entries: the command's options; the outputs' (--db, --samples, --export-snapshot) follow
 *     them, filling @outputs.
 *
 * fsim_cli_parse_args() (@command, @parameter, @description as there) of a command that
 * replays one TRACE with these outputs.
 *
 * Returns: %FALSE after printing a usage error (the command then returns %FSIM_EXIT_USAGE).
 */
gboolean fsim_replay_outputs_parse(FsimReplayOutputs *outputs, const char *command,
                                   const char *parameter, const GOptionEntry *entries,
                                   const char *description, int *argc, char ***argv);

/**
 * fsim_replay_outputs_open:
 * @trace: the opened trace (borrowed until finish).
 * @n_runs: how many runs each device is replayed through.
 * @trace_device: the --trace-device asked for, or -1 for every device.
 *
 * Checks the options against the replay and opens the database.
 *
 * Returns: %FALSE with FSIM_ERROR_USAGE (--export-snapshot with several runs, a bad --samples)
 * or a store error.
 */
gboolean fsim_replay_outputs_open(FsimReplayOutputs *outputs, FsimTrace *trace, guint n_runs,
                                  gint trace_device, GError **error);

/* Attach the outputs to a new engine replaying @trace_device (before its first event), a run
 * with the canonical alloc conf @config and the label @label. */
gboolean fsim_replay_outputs_attach(FsimReplayOutputs *outputs, FsimEngine *engine,
                                    uint32_t trace_device, const char *config, const char *label,
                                    GError **error);

/* The run's final metrics (the engine's with needed_bytes and the trace's lower bound), or
 * @error (nullable) when it ended in error; before finish. */
void fsim_replay_outputs_result(FsimReplayOutputs *outputs, const FsimEngine *engine,
                                const FsimMetrics *metrics, const char *error);

/* The database id of @engine's run, or -1 without --db. */
/* Whether the runs go to a results database (--db). */
gboolean fsim_replay_outputs_has_db(const FsimReplayOutputs *outputs);

/* The breakdown at the peak of @engine's run, written with it. */
void fsim_replay_outputs_breakdown(FsimReplayOutputs *outputs, const FsimEngine *engine,
                                   const FsimStoredBreakdown *breakdown);

/* The memory by pool of @engine's run (FsimStoredPool), written with it. */
void fsim_replay_outputs_pools(FsimReplayOutputs *outputs, const FsimEngine *engine,
                               const GArray *pools);

int64_t fsim_replay_outputs_run_id(const FsimReplayOutputs *outputs, const FsimEngine *engine);

/* Write a run that has no engine (the `recorded` row, or a run whose engine could not be
 * created) whole, now, after its metrics are final; a no-op without --db. */
gboolean fsim_replay_outputs_add(FsimReplayOutputs *outputs, const ReplayRun *run, GError **error);

/* The database row of any run of the replay (attached or added), or -1. */
int64_t fsim_replay_outputs_row(const FsimReplayOutputs *outputs, const ReplayRun *run);

/* After the replay: write every attached run and say where (stdout, or stderr under --json). */
gboolean fsim_replay_outputs_finish(FsimReplayOutputs *outputs, gboolean json, GError **error);

G_END_DECLS
