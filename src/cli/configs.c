/* SPDX-License-Identifier: MIT */
/*
 * The configurations of a comparison (see configs.h).
 */
#include "configs.h"

#include <glib.h>

#include <string.h>

#include "fragsim/validate.h"

#include "cli.h"

/* One configuration from the alloc-conf string @text (NULL: the default), then @sets. */
static FsimCliConfig *
config_new(const char *text, const char *const *sets, const char *set_example,
           const char *device_note, GError **error)
{
    FsimCliConfig *config = fsim_sweep_config_new(text, error);

    if (config != NULL &&
        !fsim_cli_apply_sets(config->knobs, sets, set_example, device_note, error))
        g_clear_pointer(&config, fsim_sweep_config_free);
    return config;
}

GPtrArray *
fsim_cli_configs(const char *const *alloc_confs, const char *const *sets, const char *set_example,
                 const char *device_note, GError **error)
{
    g_autoptr(GPtrArray) configs = g_ptr_array_new_with_free_func(fsim_sweep_config_free);
    gsize n = 0;

    while (alloc_confs != NULL && alloc_confs[n] != NULL)
        n++;

    for (gsize i = 0; i < MAX(n, 1); i++) {
        FsimCliConfig *config =
            config_new(n > 0 ? alloc_confs[i] : NULL, sets, set_example, device_note, error);

        if (config == NULL)
            return NULL;
        fsim_sweep_configs_add(configs, config);
    }
    return g_steal_pointer(&configs);
}

guint
fsim_cli_policy_runs(const char *policy, const GPtrArray *configs)
{
    return fsim_policy_takes_alloc_conf(policy) ? configs->len : 1;
}

guint
fsim_cli_count_runs(const GPtrArray *policies, const GPtrArray *configs)
{
    guint n = 0;

    for (guint p = 0; p < policies->len; p++)
        n += fsim_cli_policy_runs(g_ptr_array_index(policies, p), configs);
    return n;
}

void
fsim_cli_run_args_clear(FsimCliRunArgs *args)
{
    g_clear_pointer(&args->policy_list, g_free);
    g_clear_pointer(&args->alloc_confs, g_strfreev);
    g_clear_pointer(&args->sets, g_strfreev);
}

gboolean
fsim_cli_open_runs(const char *path, const FsimCliRunArgs *args, const char *set_example,
                   const char *device_note, GPtrArray **configs, GPtrArray **policies,
                   guint *n_runs, FsimTrace **trace, GError **error)
{
    *configs = fsim_cli_configs((const char *const *)args->alloc_confs,
                                (const char *const *)args->sets, set_example, device_note, error);
    if (*configs == NULL)
        return FALSE;
    *policies = fsim_cli_policies(args->policy_list, error);
    if (*policies == NULL)
        return FALSE;
    *n_runs = fsim_cli_count_runs(*policies, *configs);
    *trace = fsim_trace_open(path, error);
    return *trace != NULL;
}

const char *
fsim_cli_run_config(const char *policy, const GPtrArray *configs, guint c)
{
    const FsimCliConfig *config = g_ptr_array_index(configs, c);

    return fsim_cli_policy_runs(policy, configs) > 1 || configs->len == 1 ? config->text : "";
}

gboolean
fsim_cli_trace_platform(FsimTrace *trace, const char *forced, const char *command, gboolean quiet,
                        const char **out, GError **error)
{
    const char *platform;
    const char *why = NULL;

    *out = "cuda";
    if (forced != NULL) {
        if (g_ascii_strcasecmp(forced, "cuda") != 0 && g_ascii_strcasecmp(forced, "npu") != 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "--platform: '%s' is neither cuda nor npu", forced);
            return FALSE;
        }
        *out = g_ascii_strcasecmp(forced, "npu") == 0 ? "npu" : "cuda";
        return TRUE;
    }
    if (strcmp(fsim_trace_format_name(trace), "torch") != 0)
        return TRUE;
    platform = fsim_trace_detect_platform_why(trace, &why, error);
    if (platform == NULL)
        return FALSE;
    if (strcmp(platform, "npu") != 0)
        return TRUE;
    if (!quiet)
        g_printerr("fragsim %s: %s: recorded by torch_npu's allocator (%s): caching and expandable "
                   "model it (--platform cuda to override)\n",
                   command, fsim_trace_path(trace), why);
    *out = "npu";
    return TRUE;
}

gboolean
fsim_cli_choose_platform(FsimTrace *trace, GPtrArray *configs, const char *forced,
                         const char *command, gboolean quiet, GError **error)
{
    static const char *const groups[] = {"caching", "expandable"};
    const char *platform;

    if (!fsim_cli_trace_platform(trace, forced, command, quiet, &platform, error))
        return FALSE;
    if (forced == NULL && strcmp(platform, "cuda") == 0)
        return TRUE;
    for (guint c = 0; c < configs->len; c++) {
        FsimCliConfig *config = g_ptr_array_index(configs, c);

        for (gsize g = 0; g < G_N_ELEMENTS(groups); g++) {
            /* --set POLICY.platform wins over what the trace shows */
            if (forced != NULL || !g_key_file_has_key(config->knobs, groups[g], "platform", NULL))
                g_key_file_set_string(config->knobs, groups[g], "platform", platform);
        }
    }
    return TRUE;
}
