/* SPDX-License-Identifier: MIT */
/*
 * A sweep spec: a key file with one group, [sweep] (docs/sweep.md):
 *
 *   traces=traces/big-*.trace;more.pickle    globs, relative to the spec's folder
 *   jobs=llama:runs/rank*.pickle;...         NAME:GLOB: the traces are the ranks of job NAME
 *   policies=caching;expandable;bestfit      default: every policy
 *   alloc-confs=;max_split_size_mb:128       for caching and expandable; "" is the default
 *   devices=t4-16gb;a100-40gb;24GiB          default: h100-80gb
 *   trace-device=0                           default: every device with events
 *
 * Everything is checked before any job runs; an error names the file, the key and the value.
 * The job list is built here in its one order (see sweep.h).
 */
/* glob() */
#define _XOPEN_SOURCE 700

#include <glib.h>
#include <glib/gstdio.h>

#include <glob.h>
#include <string.h>

#include "fragsim/alloc-conf.h"

#include "sweep.h"

#define SWEEP_GROUP "sweep"

static void
sweep_trace_free(gpointer data)
{
    FsimSweepTrace *trace = data;

    g_free(trace->path);
    g_free(trace->job);
    g_free(trace);
}

void
fsim_sweep_config_free(gpointer data)
{
    FsimSweepConfig *config = data;

    g_free(config->text);
    g_key_file_unref(config->knobs);
    g_free(config);
}

FsimSweepConfig *
fsim_sweep_config_new(const char *text, GError **error)
{
    g_autoptr(GKeyFile) knobs = g_key_file_new();
    FsimAllocConf conf;
    FsimSweepConfig *config;

    fsim_alloc_conf_init(&conf);
    if (text != NULL &&
        (!fsim_alloc_conf_parse(&conf, text, error) || !fsim_alloc_conf_apply(knobs, text, error)))
        return NULL;
    config = g_new0(FsimSweepConfig, 1);
    config->text = fsim_alloc_conf_to_string(&conf);
    config->knobs = g_steal_pointer(&knobs);
    return config;
}

void
fsim_sweep_configs_add(GPtrArray *configs, FsimSweepConfig *config)
{
    for (guint j = 0; j < configs->len; j++) {
        if (strcmp(((FsimSweepConfig *)g_ptr_array_index(configs, j))->text, config->text) == 0) {
            fsim_sweep_config_free(config);
            return;
        }
    }
    g_ptr_array_add(configs, config);
}

void
fsim_sweep_spec_free(FsimSweepSpec *spec)
{
    if (spec == NULL)
        return;
    g_free(spec->path);
    g_clear_pointer(&spec->jobs, g_ptr_array_unref);
    g_clear_pointer(&spec->traces, g_ptr_array_unref);
    g_clear_pointer(&spec->policies, g_ptr_array_unref);
    g_clear_pointer(&spec->configs, g_ptr_array_unref);
    g_clear_pointer(&spec->devices, g_ptr_array_unref);
    g_free(spec);
}

static gboolean G_GNUC_PRINTF(4, 5)
    spec_fail(const FsimSweepSpec *spec, const char *key, GError **error, const char *format, ...)
{
    g_autofree char *message = NULL;
    va_list args;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "%s: [" SWEEP_GROUP "] %s: %s", spec->path,
                key, message);
    return FALSE;
}

/* What a loader ends with: FALSE (the @key's error @message) when it found nothing for @list. */
static gboolean
spec_require(const FsimSweepSpec *spec, const GPtrArray *list, const char *key, const char *message,
             GError **error)
{
    return list->len > 0 || spec_fail(spec, key, error, "%s", message);
}

/* The list under @key, items stripped and empty ones dropped unless @keep_empty; NULL with no
 * error when the key is absent. */
static GStrv
spec_list(GKeyFile *file, const char *key, gboolean keep_empty)
{
    g_auto(GStrv) items = g_key_file_get_string_list(file, SWEEP_GROUP, key, NULL, NULL);
    g_autoptr(GStrvBuilder) out = g_strv_builder_new();

    if (items == NULL)
        return NULL;
    for (gsize i = 0; items[i] != NULL; i++) {
        char *item = g_strstrip(items[i]);

        if (*item != '\0' || keep_empty)
            g_strv_builder_add(out, item);
    }
    return g_strv_builder_end(out);
}

/* @path as shown: relative to the current directory when below it, with `.` and `..` resolved
 * as text (so `spec-dir/../traces/a.trace` reads `traces/a.trace`). */
static char *
spec_display_path(const char *path)
{
    g_autofree char *cwd = g_get_current_dir();
    g_autofree char *full = g_canonicalize_filename(path, cwd);
    gsize n = strlen(cwd);

    if (strncmp(full, cwd, n) == 0 && full[n] == G_DIR_SEPARATOR)
        return g_strdup(full + n + 1);
    return g_steal_pointer(&full);
}

static int
compare_paths(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the files @pattern matches (relative to the spec's folder) to the traces, in sorted
 * order, skipping those already listed; sets their job to @job (nullable). */
static gboolean
spec_add_glob(FsimSweepSpec *spec, GHashTable *seen, const char *key, const char *pattern,
              const char *job, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(spec->path);
    g_autofree char *full =
        g_path_is_absolute(pattern) ? g_strdup(pattern) : g_build_filename(dir, pattern, NULL);
    g_autoptr(GPtrArray) found = g_ptr_array_new_with_free_func(g_free);
    glob_t matches;
    int rc = glob(full, GLOB_ERR, NULL, &matches);

    if (rc == 0)
        for (size_t i = 0; i < matches.gl_pathc; i++)
            if (g_file_test(matches.gl_pathv[i], G_FILE_TEST_IS_REGULAR))
                g_ptr_array_add(found, spec_display_path(matches.gl_pathv[i]));
    globfree(&matches);
    if (rc != 0 && rc != GLOB_NOMATCH)
        return spec_fail(spec, key, error, "'%s': cannot read the folders it names", pattern);
    if (found->len == 0)
        return spec_fail(spec, key, error, "'%s' matches no file (globs are relative to %s)",
                         pattern, dir);
    g_ptr_array_sort(found, compare_paths);
    for (guint i = 0; i < found->len; i++) {
        const char *path = g_ptr_array_index(found, i);
        FsimSweepTrace *trace = g_hash_table_lookup(seen, path);
        GStatBuf st;

        if (trace != NULL) {
            if (job != NULL && trace->job != NULL && strcmp(trace->job, job) != 0)
                return spec_fail(spec, key, error, "%s is in two jobs, '%s' and '%s'", path,
                                 trace->job, job);
            if (job != NULL && trace->job == NULL)
                trace->job = g_strdup(job);
            continue;
        }
        trace = g_new0(FsimSweepTrace, 1);
        trace->path = g_strdup(path);
        trace->job = g_strdup(job);
        trace->size = g_stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
        g_ptr_array_add(spec->traces, trace);
        g_hash_table_insert(seen, trace->path, trace);
    }
    return TRUE;
}

/* traces= and jobs=: the trace list, in the order the keys and their globs give. */
static gboolean
spec_load_traces(FsimSweepSpec *spec, GKeyFile *file, GError **error)
{
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    g_auto(GStrv) globs = spec_list(file, "traces", FALSE);
    g_auto(GStrv) jobs = spec_list(file, "jobs", FALSE);

    for (gsize i = 0; globs != NULL && globs[i] != NULL; i++)
        if (!spec_add_glob(spec, seen, "traces", globs[i], NULL, error))
            return FALSE;
    for (gsize i = 0; jobs != NULL && jobs[i] != NULL; i++) {
        const char *colon = strchr(jobs[i], ':');
        g_autofree char *name = colon != NULL ? g_strndup(jobs[i], colon - jobs[i]) : NULL;

        if (colon == NULL || *g_strstrip(name) == '\0' || colon[1] == '\0')
            return spec_fail(spec, "jobs", error, "'%s' is not NAME:GLOB", jobs[i]);
        if (!spec_add_glob(spec, seen, "jobs", colon + 1, name, error))
            return FALSE;
    }
    return spec_require(spec, spec->traces, "traces", "the spec names no trace (traces= or jobs=)",
                        error);
}

static gboolean
spec_load_policies(FsimSweepSpec *spec, GKeyFile *file, GError **error)
{
    g_auto(GStrv) names = spec_list(file, "policies", FALSE);
    g_autoptr(GError) local_error = NULL;
    GPtrArray *policies = fsim_policy_select((const char *const *)names, TRUE, &local_error);

    if (policies == NULL)
        return spec_fail(spec, "policies", error, "%s", local_error->message);
    g_ptr_array_extend_and_steal(spec->policies, policies);
    return spec_require(spec, spec->policies, "policies", "names no policy", error);
}

/* alloc-confs=: canonical, duplicates (same canonical text) dropped; "" when absent. */
static gboolean
spec_load_configs(FsimSweepSpec *spec, GKeyFile *file, GError **error)
{
    g_auto(GStrv) texts = spec_list(file, "alloc-confs", TRUE);
    gsize n = texts != NULL ? g_strv_length(texts) : 0;

    for (gsize i = 0; i < MAX(n, 1); i++) {
        const char *text = n > 0 ? texts[i] : "";
        g_autoptr(GError) local_error = NULL;
        FsimSweepConfig *config = fsim_sweep_config_new(*text != '\0' ? text : NULL, &local_error);

        if (config == NULL)
            return spec_fail(spec, "alloc-confs", error, "'%s': %s", text, local_error->message);
        fsim_sweep_configs_add(spec->configs, config);
    }
    return TRUE;
}

static gboolean
spec_load_devices(FsimSweepSpec *spec, GKeyFile *file, GError **error)
{
    g_auto(GStrv) names = spec_list(file, "devices", FALSE);
    const char *const fallback[] = {FSIM_DEVICE_DEFAULT, NULL};
    const char *const *list = names != NULL ? (const char *const *)names : fallback;

    for (gsize i = 0; list[i] != NULL; i++) {
        g_autoptr(GError) local_error = NULL;
        FsimDeviceSpec device;
        gboolean seen = FALSE;

        if (!fsim_device_spec_parse(list[i], &device, &local_error))
            return spec_fail(spec, "devices", error, "'%s': %s", list[i], local_error->message);
        for (guint j = 0; j < spec->devices->len && !seen; j++)
            seen = strcmp(((FsimDeviceSpec *)g_ptr_array_index(spec->devices, j))->name,
                          device.name) == 0;
        if (!seen)
            g_ptr_array_add(spec->devices, g_memdup2(&device, sizeof(device)));
    }
    return spec_require(spec, spec->devices, "devices", "names no device", error);
}

/* Refuse groups and keys the spec format does not have (a typo must not be ignored). */
static gboolean
spec_check_keys(FsimSweepSpec *spec, GKeyFile *file, GError **error)
{
    static const char *const known[] = {"traces",  "jobs",        "policies",
                                        "devices", "alloc-confs", "trace-device"};
    g_auto(GStrv) groups = g_key_file_get_groups(file, NULL);
    g_auto(GStrv) keys = NULL;

    for (gsize i = 0; groups[i] != NULL; i++)
        if (strcmp(groups[i], SWEEP_GROUP) != 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "%s: [%s]: unknown group (a spec has one, [" SWEEP_GROUP "])", spec->path,
                        groups[i]);
            return FALSE;
        }
    keys = g_key_file_get_keys(file, SWEEP_GROUP, NULL, NULL);
    if (keys == NULL) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "%s: no [" SWEEP_GROUP "] group: see docs/sweep.md", spec->path);
        return FALSE;
    }
    for (gsize i = 0; keys[i] != NULL; i++) {
        gboolean ok = FALSE;

        for (gsize k = 0; k < G_N_ELEMENTS(known) && !ok; k++)
            ok = strcmp(keys[i], known[k]) == 0;
        if (!ok)
            return spec_fail(spec, keys[i], error,
                             "unknown key (valid: traces, jobs, policies, alloc-confs, devices, "
                             "trace-device)");
    }
    return TRUE;
}

static gboolean
spec_load_trace_device(FsimSweepSpec *spec, GKeyFile *file, GError **error)
{
    g_autofree char *text = g_key_file_get_string(file, SWEEP_GROUP, "trace-device", NULL);
    guint64 value;

    spec->trace_device = -1;
    if (text == NULL)
        return TRUE;
    if (!g_ascii_string_to_unsigned(g_strstrip(text), 10, 0, G_MAXINT, &value, NULL))
        return spec_fail(spec, "trace-device", error, "'%s' is not a device index", text);
    spec->trace_device = (gint)value;
    return TRUE;
}

/* The job list: trace, then policy, then alloc conf (for the policies that read one), then
 * device. */
static void
spec_make_jobs(FsimSweepSpec *spec)
{
    for (guint t = 0; t < spec->traces->len; t++)
        for (guint p = 0; p < spec->policies->len; p++) {
            const char *policy = g_ptr_array_index(spec->policies, p);
            guint n_configs = fsim_policy_takes_alloc_conf(policy) ? spec->configs->len : 1;

            for (guint c = 0; c < n_configs; c++)
                for (guint d = 0; d < spec->devices->len; d++) {
                    FsimSweepJob *job = g_new0(FsimSweepJob, 1);

                    job->index = spec->jobs->len;
                    job->trace = g_ptr_array_index(spec->traces, t);
                    job->policy = policy;
                    /* a policy without an alloc conf runs under the default one, "" */
                    job->config = n_configs > 1 || spec->configs->len == 1
                                      ? g_ptr_array_index(spec->configs, c)
                                      : NULL;
                    job->device = g_ptr_array_index(spec->devices, d);
                    g_ptr_array_add(spec->jobs, job);
                }
        }
}

FsimSweepSpec *
fsim_sweep_spec_load(const char *path, GError **error)
{
    g_autoptr(FsimSweepSpec) spec = g_new0(FsimSweepSpec, 1);
    g_autoptr(GKeyFile) file = g_key_file_new();
    g_autoptr(GError) local_error = NULL;

    spec->path = g_strdup(path);
    spec->traces = g_ptr_array_new_with_free_func(sweep_trace_free);
    spec->policies = g_ptr_array_new_with_free_func(g_free);
    spec->configs = g_ptr_array_new_with_free_func(fsim_sweep_config_free);
    spec->devices = g_ptr_array_new_with_free_func(g_free);
    spec->jobs = g_ptr_array_new_with_free_func(g_free);
    if (!g_key_file_load_from_file(file, path, G_KEY_FILE_NONE, &local_error)) {
        g_set_error(error, FSIM_ERROR,
                    local_error->domain == G_FILE_ERROR ? FSIM_ERROR_IO : FSIM_ERROR_FAILED,
                    "%s: %s", path, local_error->message);
        return NULL;
    }
    if (!spec_check_keys(spec, file, error) || !spec_load_policies(spec, file, error) ||
        !spec_load_configs(spec, file, error) || !spec_load_devices(spec, file, error) ||
        !spec_load_trace_device(spec, file, error) || !spec_load_traces(spec, file, error))
        return NULL;
    spec_make_jobs(spec);
    return g_steal_pointer(&spec);
}
