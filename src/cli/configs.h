/* SPDX-License-Identifier: MIT */
/*
 * The configurations of a comparison: each `-c ALLOC_CONF` is one, and each (policy,
 * configuration) pair is one run.  Shared by every command that takes `-c`.
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

#include "sweep/sweep.h"

G_BEGIN_DECLS

/**
 * FsimCliConfig:
 *
 * A sweep's configuration (#FsimSweepConfig): @text, the canonical PYTORCH_CUDA_ALLOC_CONF
 * (the settings that differ from PyTorch's defaults, keys in a fixed order, values as a user
 * writes them; "" for the default); @knobs, the run's key file: @text's knobs in the `caching`
 * and `expandable` groups, then the `--set` knobs.
 */
typedef FsimSweepConfig FsimCliConfig;

/**
 * fsim_cli_configs:
 * @alloc_confs: (nullable): the `-c` arguments, NULL-terminated; none = one default config.
 * @sets: (nullable): the `--set` arguments, applied to every config.
 * @set_example, @device_note: for fsim_cli_apply_sets().
 * @error: FSIM_ERROR_USAGE for a bad string or knob.
 *
 * Returns: (transfer full) (element-type FsimCliConfig) (nullable): the configurations, in the
 *     order given, duplicates (same canonical text) dropped.
 */
GPtrArray *fsim_cli_configs(const char *const *alloc_confs, const char *const *sets,
                            const char *set_example, const char *device_note, GError **error);

/* How many runs @policy makes with @configs: one per configuration when it reads
 * PYTORCH_CUDA_ALLOC_CONF (fsim_policy_takes_alloc_conf()), else one. */
guint fsim_cli_policy_runs(const char *policy, const GPtrArray *configs);

/* The runs of every policy of @policies with @configs. */
guint fsim_cli_count_runs(const GPtrArray *policies, const GPtrArray *configs);

/**
 * FsimCliRunArgs:
 * @policy_list: (nullable): the `-p` argument (fsim_cli_policies()).
 * @alloc_confs, @sets: (nullable): the `-c` and `--set` arguments (fsim_cli_configs()).
 *
 * The arguments that choose a comparison's runs, as FSIM_CLI_POLICIES_ENTRY(),
 * FSIM_CLI_ALLOC_CONFS_ENTRY() and FSIM_CLI_SET_ENTRY() fill them; g_auto() clears them.
 */
typedef struct {
    char *policy_list;
    char **alloc_confs;
    char **sets;
} FsimCliRunArgs;

void fsim_cli_run_args_clear(FsimCliRunArgs *args);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(FsimCliRunArgs, fsim_cli_run_args_clear)

/**
 * fsim_cli_open_runs:
 * @path: the TRACE argument.
 * @args: the `-p`, `-c` and `--set` arguments.
 * @configs, @policies: (out) (transfer full): what fsim_cli_configs() and fsim_cli_policies()
 *     return; set before a later step fails, for the caller to free.
 * @n_runs: (out): fsim_cli_count_runs() of them.
 * @trace: (out) (transfer full): the opened trace.
 *
 * What `replay` and `cuda replay` build from their arguments before they run, in the order
 * that decides which error a command with several bad arguments reports.
 */
gboolean fsim_cli_open_runs(const char *path, const FsimCliRunArgs *args, const char *set_example,
                            const char *device_note, GPtrArray **configs, GPtrArray **policies,
                            guint *n_runs, FsimTrace **trace, GError **error);

/* The config text of @policy's run @c (0 <= @c < fsim_cli_policy_runs()): the configuration's
 * canonical text, "" for a policy that ignores the configurations (unless only one was given). */
const char *fsim_cli_run_config(const char *policy, const GPtrArray *configs, guint c);

/**
 * fsim_cli_trace_platform:
 * @forced: (nullable): `--platform`, when given.
 * @command: the command, for the note.
 * @quiet: print no note (under --json).
 * @out: (out): "cuda" or "npu".
 * @error: FSIM_ERROR_USAGE for a @forced that is neither; an error of reading @trace.
 *
 * The platform of the PyTorch models for @trace: @forced, else `npu` for a PyTorch snapshot
 * recorded by torch_npu (told from its addresses, with a note on stderr), else `cuda`.
 */
gboolean fsim_cli_trace_platform(FsimTrace *trace, const char *forced, const char *command,
                                 gboolean quiet, const char **out, GError **error);

/**
 * fsim_cli_choose_platform:
 *
 * fsim_cli_trace_platform(), written into every configuration of @configs that is not `cuda`
 * (a `--set POLICY.platform` is kept unless @forced is given).
 */
gboolean fsim_cli_choose_platform(FsimTrace *trace, GPtrArray *configs, const char *forced,
                                  const char *command, gboolean quiet, GError **error);

G_END_DECLS
