/* SPDX-License-Identifier: MIT */
/*
 * The configurations of a comparison: each `-c ALLOC_CONF` is one, and each (policy,
 * configuration) pair is one run.  Shared by every command that takes `-c`.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/**
 * FsimCliConfig:
 * @text: the canonical PYTORCH_CUDA_ALLOC_CONF: the settings that differ from PyTorch's
 *     defaults, keys in a fixed order, values as a user writes them; "" for the default.
 * @knobs: the run's key file: @text's knobs in the `caching` and `expandable` groups, then the
 *     `--set` knobs.
 */
typedef struct {
    char *text;
    GKeyFile *knobs;
} FsimCliConfig;

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

/* Whether @policy reads PYTORCH_CUDA_ALLOC_CONF (caching, expandable): other policies make one
 * run, with config "", whatever the `-c` list. */
gboolean fsim_cli_policy_takes_alloc_conf(const char *policy);

G_END_DECLS
