/* SPDX-License-Identifier: MIT */
/*
 * replay's outputs: the results database and the memory_viz export.  See replay-outputs.h.
 *
 * Every run gets its database row before the replay starts (status `running`) and its data at
 * the end; if the replay fails half way, freeing the outputs marks the runs `failed`, and a
 * process killed half way leaves them `running`.  Either way nothing looks complete that is not.
 */
#include "replay-outputs.h"

#include <glib.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fragsim/memviz.h"
#include "fragsim/store.h"

#include "cli.h"

typedef struct {
    FsimEngine *engine;   /* borrowed; NULL for a run written whole (recorded, or in error) */
    const ReplayRun *key; /* that run */
    int64_t id;           /* its row, when written whole */
    FsimStoreRun *run;
    gboolean has_result;
    FsimMetrics metrics;
    char *error; /* the run ended in error */
} OutputRun;

struct FsimReplayOutputs {
    /* options */
    char *db_path;
    gint samples;
    char *export_path;

    GOptionEntry entries[4];
    FsimTrace *trace; /* borrowed */
    FsimStore *store;
    GArray *runs; /* OutputRun */
    FsimMemvizExport *exporter;
};

static void
output_run_clear(gpointer data)
{
    OutputRun *run = data;

    g_clear_pointer(&run->run, fsim_store_run_free);
    g_clear_pointer(&run->error, g_free);
}

FsimReplayOutputs *
fsim_replay_outputs_new(void)
{
    FsimReplayOutputs *outputs = g_new0(FsimReplayOutputs, 1);
    const GOptionEntry entries[] = {
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &outputs->db_path,
         "Append the runs to this results database (created if missing)", "FILE"},
        {"samples", 0, 0, G_OPTION_ARG_INT, &outputs->samples,
         "Samples kept per run in the database (default 1000; peaks are always exact)", "N"},
        {"export-snapshot", 0, 0, G_OPTION_ARG_FILENAME, &outputs->export_path,
         "Write the run as a PyTorch memory snapshot for pytorch.org/memory_viz (one policy, one "
         "trace device)",
         "FILE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };

    G_STATIC_ASSERT(G_N_ELEMENTS(entries) == G_N_ELEMENTS(outputs->entries));
    memcpy(outputs->entries, entries, sizeof(entries));
    outputs->runs = g_array_new(FALSE, TRUE, sizeof(OutputRun));
    g_array_set_clear_func(outputs->runs, output_run_clear);
    return outputs;
}

void
fsim_replay_outputs_free(FsimReplayOutputs *outputs)
{
    if (outputs == NULL)
        return;
    /* Runs first: unfinished ones are marked failed through the still open store.  An
     * unfinished export removes its temporary file. */
    g_clear_pointer(&outputs->exporter, fsim_memviz_export_free);
    g_clear_pointer(&outputs->runs, g_array_unref);
    g_clear_pointer(&outputs->store, fsim_store_close);
    g_free(outputs->db_path);
    g_free(outputs->export_path);
    g_free(outputs);
}

gboolean
fsim_replay_outputs_parse(FsimReplayOutputs *outputs, const char *command, const char *parameter,
                          const GOptionEntry *entries, const char *description, int *argc,
                          char ***argv)
{
    g_autoptr(GOptionContext) context = g_option_context_new(parameter);

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_add_main_entries(context, outputs->entries, NULL);
    return fsim_cli_parse_command(context, NULL, description, command, argc, argv, "TRACE") ==
           FSIM_EXIT_OK;
}

gboolean
fsim_replay_outputs_open(FsimReplayOutputs *outputs, FsimTrace *trace, guint n_runs,
                         gint trace_device, GError **error)
{
    FsimStoreOptions options = {0};
    const char *max_pages = g_getenv("FRAGSIM_DB_MAX_PAGES");
    g_autofree char *parent = NULL;
    gsize n_devices;

    outputs->trace = trace;
    if (outputs->samples < 0 || (outputs->samples != 0 && outputs->db_path == NULL)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    outputs->samples < 0 ? "--samples must be positive"
                                         : "--samples needs --db FILE");
        return FALSE;
    }
    (void)fsim_trace_devices(trace, &n_devices);
    if (outputs->export_path != NULL && (n_runs != 1 || (trace_device < 0 && n_devices != 1))) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--export-snapshot writes one run: name one policy with -p (and one -c)%s",
                    trace_device < 0 && n_devices > 1 ? " and one device with --trace-device" : "");
        return FALSE;
    }
    if (outputs->db_path == NULL)
        return TRUE;
    /* A size limit in pages, documented for tests: it makes the database behave as on a full
     * disk once it would grow past it. */
    if (max_pages != NULL && !fsim_parse_u64(max_pages, &options.max_page_count)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "FRAGSIM_DB_MAX_PAGES='%s' is not a number of pages", max_pages);
        return FALSE;
    }
    /* a database in a folder that does not exist yet: make the folder */
    parent = g_path_get_dirname(outputs->db_path);
    if (g_mkdir_with_parents(parent, 0777) != 0) {
        int saved = errno;

        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                    "%s: cannot create the folder %s: %s", outputs->db_path, parent,
                    g_strerror(saved));
        return FALSE;
    }
    outputs->store = fsim_store_open(outputs->db_path, FSIM_STORE_WRITE, &options, error);
    return outputs->store != NULL;
}

gboolean
fsim_replay_outputs_attach(FsimReplayOutputs *outputs, FsimEngine *engine, uint32_t trace_device,
                           const char *config, const char *label, GError **error)
{
    OutputRun run = {.engine = engine};

    if (outputs->store != NULL) {
        const char *policy = fsim_engine_policy(engine)->ops->name;
        g_autofree char *knobs = fsim_store_knobs_text(fsim_engine_config(engine)->config, policy);
        FsimStoreLimits limits = {.max_samples = (guint)outputs->samples};
        FsimStoreRunInfo info = {
            .trace = fsim_trace_path(outputs->trace),
            .trace_format = fsim_trace_format_name(outputs->trace),
            .trace_device = trace_device,
            .policy = policy,
            .knobs = knobs,
            .config = config,
            .label = label,
            .seed = -1,
            .limits = &limits,
        };

        run.run = fsim_store_attach(outputs->store, engine, &info, error);
        if (run.run == NULL)
            return FALSE;
    }
    g_array_append_val(outputs->runs, run);
    if (outputs->export_path != NULL) {
        g_return_val_if_fail(outputs->exporter == NULL, FALSE);
        outputs->exporter =
            fsim_memviz_export_new(outputs->export_path, engine, trace_device, error);
        if (outputs->exporter == NULL)
            return FALSE;
        fsim_memviz_export_set_trace(outputs->exporter, outputs->trace);
    }
    return TRUE;
}

gboolean
fsim_replay_outputs_add(FsimReplayOutputs *outputs, const ReplayRun *run, GError **error)
{
    OutputRun out = {.key = run};
    FsimStoreRunInfo info = {
        .trace = fsim_trace_path(outputs->trace),
        .trace_format = fsim_trace_format_name(outputs->trace),
        .trace_device = run->trace_device,
        .policy = run->policy,
        .knobs = "",
        .config = run->config,
        .label = run->label,
        .seed = -1,
    };
    gboolean errored = run->status == REPLAY_ERROR;

    g_return_val_if_fail(run->engine == NULL, FALSE);
    if (outputs->store == NULL)
        return TRUE;
    if (!fsim_store_add_run(
            outputs->store, &run->device, &info, errored ? FSIM_STORE_ERRORED : FSIM_STORE_COMPLETE,
            errored ? NULL : &run->metrics, errored ? run->error : NULL, &out.id, error))
        return FALSE;
    g_array_append_val(outputs->runs, out);
    return TRUE;
}

int64_t
fsim_replay_outputs_row(const FsimReplayOutputs *outputs, const ReplayRun *run)
{
    for (guint i = 0; i < outputs->runs->len; i++) {
        const OutputRun *out = &g_array_index(outputs->runs, OutputRun, i);

        if (out->key == run && out->key != NULL)
            return out->id;
    }
    return run->engine != NULL ? fsim_replay_outputs_run_id(outputs, run->engine) : -1;
}

gboolean
fsim_replay_outputs_has_db(const FsimReplayOutputs *outputs)
{
    return outputs->db_path != NULL;
}

void
fsim_replay_outputs_breakdown(FsimReplayOutputs *outputs, const FsimEngine *engine,
                              const FsimStoredBreakdown *breakdown)
{
    for (guint i = 0; i < outputs->runs->len; i++) {
        OutputRun *run = &g_array_index(outputs->runs, OutputRun, i);

        if (run->engine == engine && run->run != NULL)
            fsim_store_run_set_breakdown(run->run, breakdown);
    }
}

void
fsim_replay_outputs_pools(FsimReplayOutputs *outputs, const FsimEngine *engine, const GArray *pools)
{
    for (guint i = 0; i < outputs->runs->len; i++) {
        OutputRun *run = &g_array_index(outputs->runs, OutputRun, i);

        if (run->engine == engine && run->run != NULL)
            fsim_store_run_set_pools(run->run, (const FsimStoredPool *)(const void *)pools->data,
                                     pools->len);
    }
}

int64_t
fsim_replay_outputs_run_id(const FsimReplayOutputs *outputs, const FsimEngine *engine)
{
    for (guint i = 0; i < outputs->runs->len; i++) {
        const OutputRun *run = &g_array_index(outputs->runs, OutputRun, i);

        if (run->engine == engine && run->run != NULL)
            return fsim_store_run_id(run->run);
    }
    return -1;
}

void
fsim_replay_outputs_result(FsimReplayOutputs *outputs, const FsimEngine *engine,
                           const FsimMetrics *metrics, const char *error)
{
    for (guint i = 0; i < outputs->runs->len; i++) {
        OutputRun *run = &g_array_index(outputs->runs, OutputRun, i);

        if (run->engine == engine) {
            run->has_result = TRUE;
            run->metrics = *metrics;
            g_free(run->error);
            run->error = g_strdup(error);
        }
    }
}

gboolean
fsim_replay_outputs_finish(FsimReplayOutputs *outputs, gboolean json, GError **error)
{
    int64_t first = 0, last = 0;

    for (guint i = 0; i < outputs->runs->len; i++) {
        OutputRun *run = &g_array_index(outputs->runs, OutputRun, i);
        gboolean stopped;

        if (run->engine == NULL && run->id > 0) {
            /* written whole when it was added */
            first = first == 0 ? run->id : MIN(first, run->id);
            last = MAX(last, run->id);
            continue;
        }
        if (run->run == NULL)
            continue;
        /* A run stopped by --fail-on-oom never reached its end. */
        stopped = fsim_engine_config(run->engine)->fail_on_oom &&
                  fsim_engine_metrics(run->engine)->ooms > 0;
        if (run->error != NULL) {
            fsim_store_run_error(run->run, run->error);
        } else {
            if (run->has_result)
                fsim_store_run_set_metrics(run->run, &run->metrics);
            if (!fsim_store_run_finish(run->run, stopped ? FSIM_STORE_OOM : FSIM_STORE_COMPLETE,
                                       error))
                return FALSE;
        }
        first = first == 0 ? fsim_store_run_id(run->run) : MIN(first, fsim_store_run_id(run->run));
        last = MAX(last, fsim_store_run_id(run->run));
    }
    if (outputs->exporter != NULL) {
        if (!fsim_memviz_export_finish(outputs->exporter, error))
            return FALSE;
        if (json)
            g_printerr("snapshot written to %s (open it at pytorch.org/memory_viz)\n",
                       outputs->export_path);
        else
            g_print("snapshot written to %s (open it at pytorch.org/memory_viz)\n",
                    outputs->export_path);
    }
    if (outputs->store != NULL && first != 0) {
        const char *path = fsim_store_path(outputs->store);
        g_autofree char *quoted = fsim_format_shell_word(path);
        g_autofree char *ids =
            first == last
                ? g_strdup_printf("run %" G_GINT64_FORMAT, first)
                : g_strdup_printf("runs %" G_GINT64_FORMAT "-%" G_GINT64_FORMAT, first, last);
        g_autofree char *message = g_strdup_printf(
            "%s written to %s (plots: fragsim plot --db %s -o plots; report: fragsim report --db "
            "%s -o report)\n",
            ids, path, quoted, quoted);

        if (json)
            g_printerr("%s", message);
        else
            g_print("%s", message);
    }
    return TRUE;
}
