/* SPDX-License-Identifier: MIT */
/*
 * fragsim tune TRACE... [-d DEVICE] [--trace-device N] [--budget SECONDS] [--json] [--db FILE]
 *
 * Searches PYTORCH_CUDA_ALLOC_CONF for the setting on which the job (every TRACE, every device
 * of each, or --trace-device N of each) needs the least device capacity (src/analysis/tune.c),
 * and prints the default's figures, the best settings and the line to paste.  Each trace is read
 * and decoded once; every setting replays the decoded events.  With --db the default and the
 * recommended run are stored as ordinary runs, and the recommendation in `recommendations`.
 */
#include <glib.h>

#include <string.h>
#include <unistd.h>

#include "fragsim/alloc-conf.h"

#include "analysis/tune.h"
#include "cli.h"
#include "configs.h"
#include "tune-print.h"

/* The default --budget, in seconds. */
#define TUNE_DEFAULT_BUDGET 60.0

typedef struct {
    GPtrArray *traces; /* FsimTrace */
    GPtrArray *logs;   /* FsimEventLog */
    TuneJob job;
    FsimPlatform platform;
    char *recorded; /* the first trace's recorded settings, canonical, or NULL */
} Tune;

static void
tune_clear(Tune *t)
{
    g_clear_pointer(&t->logs, g_ptr_array_unref);
    g_clear_pointer(&t->traces, g_ptr_array_unref);
    g_clear_pointer(&t->job.paths, g_ptr_array_unref);
    g_clear_pointer(&t->job.ranks, g_array_unref);
    g_clear_pointer(&t->recorded, g_free);
}

/* Open @path and add its ranks: --trace-device @only (when >= 0), else every device it has. */
static gboolean
tune_add_trace(Tune *t, const char *path, gint only, gboolean quiet, GError **error)
{
    FsimTrace *trace = fsim_trace_open(path, error);
    const uint32_t *devices;
    gsize n_devices;
    const char *platform;

    if (trace == NULL)
        return FALSE;
    g_ptr_array_add(t->traces, trace);
    g_ptr_array_add(t->job.paths, g_strdup(path));
    devices = fsim_trace_devices(trace, &n_devices);
    if (n_devices == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s has no events", path);
        return FALSE;
    }
    if (only >= 0 && !fsim_cli_trace_has_device(trace, (uint32_t)only)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s has no events on device %d", path,
                    only);
        return FALSE;
    }
    if (!fsim_cli_trace_platform(trace, NULL, "tune", quiet, &platform, error))
        return FALSE;
    if (t->traces->len > 1 && strcmp(platform, fsim_platform_name(t->platform)) != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "%s was recorded on %s, %s on %s: tune the ranks of one platform together",
                    path, platform, (const char *)g_ptr_array_index(t->job.paths, 0),
                    fsim_platform_name(t->platform));
        return FALSE;
    }
    (void)fsim_platform_from_name(platform, &t->platform);
    t->job.platform = t->platform;
    if (t->traces->len == 1 && fsim_trace_alloc_conf(trace) != NULL) {
        FsimAllocConf conf;

        fsim_alloc_conf_init(&conf);
        if (fsim_alloc_conf_parse(&conf, fsim_trace_alloc_conf(trace), NULL))
            t->recorded = fsim_alloc_conf_to_string(&conf);
    }
    for (gsize d = 0; d < n_devices; d++) {
        FsimEventLog *log;
        FsimTuneRank rank = {.trace = g_ptr_array_index(t->job.paths, t->job.paths->len - 1),
                             .trace_device = devices[d]};

        if (only >= 0 && devices[d] != (uint32_t)only)
            continue;
        log = fsim_event_log_new(devices[d]);
        g_ptr_array_add(t->logs, log);
        if (!fsim_event_log_read(log, trace, FALSE, error)) {
            if (error != NULL && *error != NULL && !g_str_has_prefix((*error)->message, path))
                g_prefix_error(error, "%s: ", path);
            return FALSE;
        }
        rank.log = log;
        rank.initial_state = fsim_trace_initial_state(trace, devices[d]);
        g_array_append_val(t->job.ranks, rank);
    }
    return TRUE;
}

/* Replay the worst rank of @c on the chosen device into @store, as `replay` would store it, with
 * the search's needed capacity. */
static gboolean
tune_store_run(Tune *t, FsimStore *store, const FsimTuneCandidate *c, int64_t *id, GError **error)
{
    const FsimTuneRank *rank = &g_array_index(t->job.ranks, FsimTuneRank, c->worst);
    g_autoptr(GKeyFile) knobs = fsim_tune_knobs(c->config, t->platform, error);
    g_autofree char *label = fsim_run_label("caching", c->config);
    g_autofree char *knob_text = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(FsimStoreRun) run = NULL;
    FsimRunConfig rc;
    FsimMetrics m;
    gsize n_keys = 0;
    g_auto(GStrv) keys = NULL;
    g_autoptr(GString) text = g_string_new(NULL);

    if (knobs == NULL)
        return FALSE;
    keys = g_key_file_get_keys(knobs, "caching", &n_keys, NULL);
    for (gsize k = 0; keys != NULL && keys[k] != NULL; k++) {
        g_autofree char *value = g_key_file_get_value(knobs, "caching", keys[k], NULL);

        g_string_append_printf(text, "caching.%s=%s\n", keys[k], value != NULL ? value : "");
    }
    knob_text = g_string_free(g_steal_pointer(&text), FALSE);
    fsim_run_config_init(&rc);
    rc.policy = "caching";
    rc.config = knobs;
    rc.device = t->job.device;
    rc.initial_state = rank->initial_state;
    engine = fsim_engine_new(&rc, error);
    if (engine == NULL)
        return FALSE;
    FsimStoreRunInfo info = {
        .trace = rank->trace,
        .trace_format = fsim_trace_format_name(g_ptr_array_index(t->traces, 0)),
        .trace_device = rank->trace_device,
        .policy = "caching",
        .knobs = knob_text,
        .config = c->config,
        .label = label,
        .seed = -1,
    };
    for (guint i = 0; i < t->job.paths->len; i++) {
        if (strcmp(g_ptr_array_index(t->job.paths, i), rank->trace) == 0)
            info.trace_format = fsim_trace_format_name(g_ptr_array_index(t->traces, i));
    }
    run = fsim_store_attach(store, engine, &info, error);
    if (run == NULL || !fsim_engine_start(engine, error) ||
        !fsim_event_log_replay(rank->log, engine, error))
        return FALSE;
    m = *fsim_engine_metrics(engine);
    m.needed_bytes = (int64_t)c->needed_bytes;
    m.lower_bound_bytes = c->ranks[c->worst].metrics.peak_requested_bytes;
    m.excess_over_lower_bound_bytes = m.peak_reserved_bytes > m.lower_bound_bytes
                                          ? m.peak_reserved_bytes - m.lower_bound_bytes
                                          : 0;
    fsim_store_run_set_metrics(run, &m);
    if (!fsim_store_run_finish(run, FSIM_STORE_COMPLETE, error))
        return FALSE;
    *id = fsim_store_run_id(run);
    return TRUE;
}

/* --db: the two runs and the recommendation's row. */
static gboolean
tune_store(Tune *t, const char *db_path, const FsimTuneResult *result, GError **error)
{
    g_autoptr(FsimStore) store = NULL;
    g_autofree char *parent = g_path_get_dirname(db_path);
    const FsimTuneCandidate *r =
        result->recommended != NULL ? result->recommended : result->default_candidate;
    const FsimTuneRank *rank = &g_array_index(t->job.ranks, FsimTuneRank, r->worst);
    g_autofree char *env = tune_env_line(&t->job, r->config, FALSE);
    FsimStoreRecommendationInfo row = {0};

    if (g_mkdir_with_parents(parent, 0755) != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "%s: cannot create the folder %s: %s",
                    db_path, parent, g_strerror(errno));
        return FALSE;
    }
    store = fsim_store_open(db_path, FSIM_STORE_WRITE, NULL, error);
    if (store == NULL ||
        !tune_store_run(t, store, result->default_candidate, &t->job.default_run_id, error))
        return FALSE;
    t->job.run_id = t->job.default_run_id;
    if (result->recommended != NULL && !tune_store_run(t, store, r, &t->job.run_id, error))
        return FALSE;
    row.trace = rank->trace;
    row.trace_device = rank->trace_device;
    row.device = t->job.device.name;
    row.default_run_id = t->job.default_run_id;
    row.run_id = t->job.run_id;
    row.config = r->config;
    row.env = env;
    row.needed_bytes = r->needed_bytes;
    row.saving_bytes = result->default_candidate->needed_bytes - r->needed_bytes;
    row.candidates = result->candidates->len;
    return fsim_store_add_recommendation(store, &row, NULL, error);
}

static void
tune_progress(gpointer data, guint evaluated)
{
    fsim_progress_update(data, evaluated);
}

static const char tune_description[] =
    "Searches PYTORCH_CUDA_ALLOC_CONF (expandable_segments, max_split_size_mb,\n"
    "max_non_split_rounding_mb, roundup_power2_divisions, garbage_collection_threshold) for the\n"
    "setting on which the job needs the least device capacity (needed_bytes, to the device\n"
    "granularity; 'fit -p caching -c SETTING' reports the same figure).  Candidate values come\n"
    "from the trace's own request sizes; each knob alone, the best together, then coordinate\n"
    "descent.  Near-ties (within one granule) go to the least modelled allocator time on DEVICE.\n"
    "Several TRACEs (or a multi-device snapshot) are one distributed job: it needs what its\n"
    "worst rank needs.  'Keep the default' when nothing saves more than one granule.\n"
    "Method: docs/tune.md.\n\n"
    "Example: fragsim tune snapshot.pickle\n"
    "         fragsim tune rank0.pickle rank1.pickle --json\n"
    "Exit status: 0 success, 1 bad input, 2 usage error.";

int
fsim_cmd_tune(int argc, char **argv)
{
    g_autofree char *device_name = NULL;
    g_autofree char *db_path = NULL;
    gint trace_device = -1;
    double budget = TUNE_DEFAULT_BUDGET;
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"device", 'd', 0, G_OPTION_ARG_STRING, &device_name,
         "The GPU whose granularity and costs to use (default " FSIM_DEVICE_DEFAULT ")", "DEVICE"},
        {"trace-device", 0, 0, G_OPTION_ARG_INT, &trace_device,
         "Tune only this device of each trace (default: every device with events)", "N"},
        {"budget", 0, 0, G_OPTION_ARG_DOUBLE, &budget,
         "Stop searching after this many seconds and report the best so far (default 60)",
         "SECONDS"},
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &db_path,
         "Store the default and the recommended run, and the recommendation, in this results "
         "database",
         "FILE"},
        FSIM_CLI_JSON_ENTRY(&json),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(FsimTuneResult) result = NULL;
    g_autoptr(FsimProgress) progress = NULL;
    GError *error = NULL;
    Tune t = {0};
    FsimTuneOptions options = {0};
    int status = FSIM_EXIT_OK;

    if (!fsim_cli_parse_args("tune",
                             "TRACE... - the PYTORCH_CUDA_ALLOC_CONF that needs the least memory",
                             entries, tune_description, FSIM_CLI_OPERANDS, &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc < 2)
        return fsim_cli_usage_error("tune", "missing the TRACE argument");
    if (!(budget > 0))
        return fsim_cli_usage_error("tune", "--budget must be a positive number of seconds");
    t.traces = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_trace_close);
    t.logs = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_event_log_free);
    t.job.paths = g_ptr_array_new_with_free_func(g_free);
    t.job.ranks = g_array_new(FALSE, FALSE, sizeof(FsimTuneRank));
    t.job.default_run_id = t.job.run_id = -1;
    if (!fsim_device_spec_parse(device_name != NULL ? device_name : FSIM_DEVICE_DEFAULT,
                                &t.job.device, &error))
        goto fail;
    for (int i = 1; i < argc; i++) {
        if (!tune_add_trace(&t, argv[i], trace_device, json, &error))
            goto fail;
    }
    progress = fsim_progress_new("tune: settings searched", 0);
    options.device = t.job.device;
    options.platform = t.platform;
    options.budget_seconds = budget;
    options.recorded = t.recorded;
    options.progress = tune_progress;
    options.progress_data = progress;
    result = fsim_tune_search((const FsimTuneRank *)(const void *)t.job.ranks->data,
                              t.job.ranks->len, &options, &error);
    g_clear_pointer(&progress, fsim_progress_free);
    if (result == NULL || (db_path != NULL && !tune_store(&t, db_path, result, &error)))
        goto fail;
    if (json)
        tune_print_json(&t.job, result);
    else
        tune_print_text(&t.job, result);
    tune_clear(&t);
    return FSIM_EXIT_OK;
fail:
    status = fsim_cli_fail("tune", error);
    tune_clear(&t);
    return status;
}
