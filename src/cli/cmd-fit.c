/* SPDX-License-Identifier: MIT */
/*
 * fragsim fit TRACE... [-p POLICIES] [-d DEVICE] [--trace-device N] [--json]
 * fragsim fit MODEL|--model NAME|--params N [MODEL OPTIONS] [--target batch|seq|device]
 *             [-p POLICIES] [-d DEVICE] [--json]
 *
 * For a trace (or a model with --target device): the smallest device capacity on which each
 * policy replays it without an OOM, found by binary search to the device granularity (2 MiB).
 * For a model: the largest micro-batch (--target batch) or sequence length (--target seq, to 64
 * tokens) whose synthetic training trace replays on DEVICE without an OOM under each policy.  The
 * model's trace is generated in memory and pushed straight into the engines; nothing is written.
 *
 * Several TRACEs (the ranks of one distributed job), or a trace of several devices, are one job:
 * it fits only where every rank fits, so its answer is the largest of its ranks' (the worst rank),
 * reported with that rank and the spread across ranks.
 *
 * Every search assumes that fitting is monotonic (more memory or a smaller batch never turns a
 * fit into an OOM), which holds for the policies fragsim models up to their rounding.
 */
#include <glib.h>

#include <string.h>

#include "analysis/needed.h"
#include "cli.h"
#include "configs.h"
#include "synth/synth.h"

/* Sequence lengths are searched in steps of this many tokens. */
#define FIT_SEQ_STEP 64
/* Neither batch nor sequence search goes past this. */
#define FIT_MAX_BATCH 65536
#define FIT_MAX_SEQ   (1024 * 1024)

typedef enum {
    TARGET_DEVICE,
    TARGET_BATCH,
    TARGET_SEQ,
} Target;

static const char *const target_names[] = {"device", "batch", "seq"};

typedef struct {
    FsimTrace *trace; /* trace mode, or NULL */
    uint32_t trace_device;
    GKeyFile *knobs;       /* the configuration's */
    FsimTrainConfig train; /* model mode */
    gboolean paranoid;
    FsimLifetimes *lifetimes; /* trace mode, for offline policies, or NULL */
} Source;

typedef struct {
    gboolean fits;
    FsimMetrics metrics;
} Trial;

/* One rank of a job: a trace and one of its devices. */
typedef struct {
    const char *path;
    FsimTrace *trace; /* borrowed from the job's list */
    uint32_t trace_device;
    FsimLifetimes *lifetimes; /* for offline policies, or NULL */
} Rank;

typedef struct {
    const char *policy;
    const char *config; /* canonical alloc conf, "" = default */
    char *label;
    GKeyFile *knobs;
    uint64_t answer;
    Trial trial; /* the run at the answer (or the failing one when nothing fits) */
    uint64_t runs;
    uint64_t *rank_answers; /* a job of several ranks: each one's answer, else NULL */
    guint worst;            /* the rank whose answer is the job's */
    uint64_t spread;        /* the largest answer less the smallest */
} Result;

static void
result_clear(gpointer data)
{
    g_free(((Result *)data)->label);
    g_free(((Result *)data)->rank_answers);
}

static void
rank_clear(gpointer data)
{
    g_clear_pointer(&((Rank *)data)->lifetimes, fsim_lifetimes_free);
}

/* Replay @src (with @batch and @seq in model mode) through @policy on @spec. */
static gboolean
fit_try(const Source *src, const char *policy, const FsimDeviceSpec *spec, uint64_t batch,
        uint64_t seq, Trial *out, GError **error)
{
    FsimRunConfig rc;
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(FsimSynth) synth = NULL;
    g_autoptr(GError) local_error = NULL;
    FsimEvent ev;

    fsim_run_config_init(&rc);
    rc.policy = policy;
    rc.config = src->knobs;
    rc.device = *spec;
    rc.fail_on_oom = TRUE;
    rc.paranoid = src->paranoid;
    if (src->trace) {
        rc.initial_state = fsim_trace_initial_state(src->trace, src->trace_device);
        rc.lifetimes = src->lifetimes;
        stream = fsim_trace_stream_open(src->trace, src->trace_device, error);
        if (stream == NULL)
            return FALSE;
    } else {
        FsimTrainConfig config = src->train;
        config.batch = batch;
        config.seq = seq;
        synth = fsim_synth_train_new(&config, error);
        if (synth == NULL)
            return FALSE;
    }
    engine = fsim_engine_new(&rc, error);
    if (engine == NULL)
        return FALSE;

    out->fits = TRUE;
    if (!fsim_engine_start(engine, &local_error)) {
        /* the memory alive at trace start does not fit this capacity: a larger one may */
        g_clear_error(&local_error);
        out->fits = FALSE;
        memset(&out->metrics, 0, sizeof(out->metrics));
        return TRUE;
    }
    for (;;) {
        gboolean more = stream ? fsim_trace_stream_next(stream, &ev, &local_error)
                               : fsim_synth_next(synth, &ev, &local_error);
        if (!more)
            break;
        if (!fsim_engine_process(engine, &ev, &local_error)) {
            if (g_error_matches(local_error, FSIM_ERROR, FSIM_ERROR_OOM)) {
                g_clear_error(&local_error);
                out->fits = FALSE;
                break;
            }
            break;
        }
    }
    if (local_error) {
        g_propagate_error(error, g_steal_pointer(&local_error));
        return FALSE;
    }
    /* after an OOM too: the metrics then cover what happened up to it */
    if (!fsim_engine_finish(engine, error))
        return FALSE;
    out->metrics = *fsim_engine_metrics(engine);
    return TRUE;
}

/* needed_bytes of @src under the policy (src/analysis/needed.c, the computation replay makes):
 * the events are decoded once, then replayed by the search. */
static gboolean
fit_device(const Source *src, const FsimDeviceSpec *spec, Result *r, GError **error)
{
    g_autoptr(FsimEventLog) log = fsim_event_log_new(src->trace ? src->trace_device : 0);
    FsimNeededQuery query = {0};
    FsimNeededResult result;

    if (src->trace != NULL) {
        if (!fsim_event_log_read(log, src->trace, FALSE, error))
            return FALSE;
        query.initial_state = fsim_trace_initial_state(src->trace, src->trace_device);
        query.lifetimes = src->lifetimes;
    } else {
        g_autoptr(FsimSynth) synth = fsim_synth_train_new(&src->train, error);
        g_autoptr(GError) local_error = NULL;
        FsimEvent ev;

        if (synth == NULL)
            return FALSE;
        while (fsim_synth_next(synth, &ev, &local_error))
            fsim_event_log_append(log, &ev);
        if (local_error != NULL) {
            g_propagate_error(error, g_steal_pointer(&local_error));
            return FALSE;
        }
    }
    query.policy = r->policy;
    query.config = src->knobs;
    query.device = *spec;
    query.paranoid = src->paranoid;
    if (!fsim_needed_search(log, &query, &result, error))
        return FALSE;
    r->answer = result.needed_bytes;
    r->trial.fits = TRUE;
    r->trial.metrics = result.metrics;
    r->runs = result.replays;
    return TRUE;
}

/* needed_bytes of a job: the worst of its ranks' (each found by fit_device()). */
static gboolean
fit_job(Source *src, GArray *ranks, const FsimDeviceSpec *spec, Result *r, GError **error)
{
    uint64_t least = G_MAXUINT64;

    if (ranks->len > 1)
        r->rank_answers = g_new0(uint64_t, ranks->len);
    for (guint i = 0; i < ranks->len; i++) {
        const Rank *rank = &g_array_index(ranks, Rank, i);
        Result one = *r;

        src->trace = rank->trace;
        src->trace_device = rank->trace_device;
        src->lifetimes = rank->lifetimes;
        one.runs = 0;
        if (!fit_device(src, spec, &one, error)) {
            if (ranks->len > 1)
                g_prefix_error(error, "%s device %u: ", rank->path, rank->trace_device);
            return FALSE;
        }
        if (r->rank_answers != NULL)
            r->rank_answers[i] = one.answer;
        r->runs += one.runs;
        least = MIN(least, one.answer);
        if (i == 0 || one.answer > r->answer) {
            r->answer = one.answer;
            r->trial = one.trial;
            r->worst = i;
        }
    }
    r->spread = r->answer - least;
    return TRUE;
}

/* One trial of fit_dimension() at a batch or sequence of @value; a configuration too large to
 * exist (fsim_train_config_check() refuses it) does not fit. */
static gboolean
fit_try_dimension(const Source *src, const FsimDeviceSpec *spec, Target target, Result *r,
                  uint64_t value, Trial *probe, GError **error)
{
    FsimTrainConfig config = src->train;
    if (target == TARGET_BATCH)
        config.batch = value;
    else
        config.seq = value;
    if (!fsim_train_config_check(&config, NULL)) {
        memset(probe, 0, sizeof *probe);
        return TRUE;
    }
    r->runs++;
    return fit_try(src, r->policy, spec, config.batch, config.seq, probe, error);
}

/* The largest batch or sequence length (in units of @step) on @spec under the policy. */
static gboolean
fit_dimension(const Source *src, const FsimDeviceSpec *spec, Target target, Result *r,
              GError **error)
{
    const uint64_t step = target == TARGET_SEQ ? FIT_SEQ_STEP : 1;
    const uint64_t limit = target == TARGET_SEQ ? FIT_MAX_SEQ / step : FIT_MAX_BATCH;
    uint64_t lo = 0, hi = 0; /* lo fits (0: nothing does), hi does not (0: not found yet) */
    Trial probe;

#define TRY(units) fit_try_dimension(src, spec, target, r, (units)*step, &probe, error)

    /* double until it no longer fits */
    for (uint64_t n = 1; n <= limit; n *= 2) {
        if (!TRY(n))
            return FALSE;
        if (!probe.fits) {
            hi = n;
            if (lo == 0)
                r->trial = probe;
            break;
        }
        lo = n;
        r->trial = probe;
    }
    if (hi == 0)
        hi = limit + 1;
    while (lo > 0 && hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (!TRY(mid))
            return FALSE;
        if (probe.fits) {
            lo = mid;
            r->trial = probe;
        } else {
            hi = mid;
        }
    }
#undef TRY
    r->answer = lo * step;
    return TRUE;
}

/* The estimate's own answer (no fragmentation): the largest batch or sequence whose closed-form
 * total fits the capacity. */
static uint64_t
fit_estimate(const FsimTrainConfig *train, const FsimDeviceSpec *spec, Target target)
{
    const uint64_t step = target == TARGET_SEQ ? FIT_SEQ_STEP : 1;
    const uint64_t limit = target == TARGET_SEQ ? FIT_MAX_SEQ / step : FIT_MAX_BATCH;
    uint64_t lo = 0, hi = limit + 1;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        FsimTrainConfig c = *train;
        FsimEstimate est;
        if (target == TARGET_BATCH)
            c.batch = mid;
        else
            c.seq = mid * step;
        if (fsim_estimate_train(&c, &est, NULL) && est.total_bytes <= spec->capacity_bytes)
            lo = mid;
        else
            hi = mid;
    }
    return lo * step;
}

static char *
fit_format_answer(Target target, uint64_t answer)
{
    if (target == TARGET_DEVICE) {
        g_autofree char *size = fsim_format_size(answer);
        return g_strdup_printf("%s (%.2f GB)", size, (double)answer / 1e9);
    }
    if (answer == 0)
        return g_strdup("does not fit");
    return g_strdup_printf("%" G_GUINT64_FORMAT, answer);
}

/* The members of a job's result: its worst rank, the spread and each rank's answer. */
static void
fit_json_ranks(FsimJsonWriter *builder, const Result *r, GArray *ranks)
{
    fsim_cli_json_int(builder, "worst_rank", r->worst);
    fsim_cli_json_int(builder, "spread_bytes", (int64_t)r->spread);
    fsim_cli_json_begin_array(builder, "ranks");
    for (guint i = 0; i < ranks->len; i++) {
        const Rank *rank = &g_array_index(ranks, Rank, i);

        fsim_json_begin_object(builder);
        fsim_cli_json_string(builder, "trace", rank->path);
        fsim_cli_json_int(builder, "trace_device", rank->trace_device);
        fsim_cli_json_int(builder, "needed_bytes", (int64_t)r->rank_answers[i]);
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
}

static void
fit_print_json(Target target, const Result *results, guint n, GArray *ranks)
{
    g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
    fsim_cli_json_string(builder, "target", target_names[target]);
    fsim_cli_json_begin_array(builder, "results");
    for (guint i = 0; i < n; i++) {
        const Result *r = &results[i];
        fsim_json_begin_object(builder);
        fsim_cli_json_string(builder, "policy", r->policy);
        fsim_cli_json_string(builder, "config", r->config);
        fsim_cli_json_string(builder, "label", r->label);
        fsim_cli_json_int(builder, "answer", (gint64)r->answer);
        if (target == TARGET_DEVICE) {
            fsim_cli_json_int(builder, "needed_bytes", (gint64)r->answer);
        }
        fsim_cli_json_int(builder, "peak_reserved_bytes",
                          (gint64)r->trial.metrics.peak_reserved_bytes);
        fsim_cli_json_double(builder, "peak_utilization", r->trial.metrics.peak_utilization);
        fsim_cli_json_int(builder, "peak_requested_bytes",
                          (gint64)r->trial.metrics.peak_requested_bytes);
        fsim_cli_json_int(builder, "runs", (gint64)r->runs);
        if (r->rank_answers != NULL)
            fit_json_ranks(builder, r, ranks);
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
    fsim_cli_json_print(builder);
}

static void
fit_print_table(Target target, const Result *results, guint n)
{
    /* The second column says what the answer is: the capacity the run needs, or the largest
     * batch or sequence that fits. */
    static const char *const answer_headers[] = {
        [TARGET_DEVICE] = "needs", [TARGET_BATCH] = "largest batch", [TARGET_SEQ] = "longest seq"};
    const char *headers[] = {
        "run", answer_headers[target], "peak reserved", "peak requested", "utilization", "excess",
        "runs"};
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(headers), headers);
    for (guint i = 0; i < n; i++) {
        const Result *r = &results[i];
        const FsimMetrics *m = &r->trial.metrics;
        g_autofree char *answer = fit_format_answer(target, r->answer);
        g_autofree char *reserved = fsim_format_size(m->peak_reserved_bytes);
        g_autofree char *requested = fsim_format_size(m->peak_requested_bytes);
        g_autofree char *excess =
            fsim_format_size(m->peak_reserved_bytes > m->peak_requested_bytes
                                 ? m->peak_reserved_bytes - m->peak_requested_bytes
                                 : 0);
        fsim_table_add(table, r->label);
        fsim_table_add(table, answer);
        fsim_table_add(table, reserved);
        fsim_table_add(table, requested);
        fsim_table_addf(table, "%.1f%%", 100.0 * m->peak_utilization);
        fsim_table_add(table, excess);
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, r->runs);
    }
    fsim_table_print(table);
}

/* Under the table of a job: which rank decides each run's answer, and the spread. */
static void
fit_print_ranks(const Result *results, guint n, GArray *ranks)
{
    for (guint i = 0; i < n; i++) {
        const Result *r = &results[i];
        const Rank *worst = &g_array_index(ranks, Rank, r->worst);
        g_autofree char *answer = fsim_format_size(r->answer);
        g_autofree char *spread = fsim_format_size(r->spread);

        g_print("%s: the job needs %s, what %s device %u needs; its %u ranks spread over %s\n",
                r->label, answer, worst->path, worst->trace_device, ranks->len, spread);
    }
}

/* Open the job's traces (@paths, @n of them) and list their ranks: --trace-device @only of each
 * when >= 0, else every device with events.  The PyTorch models take the platform the traces
 * show (torch_npu's or CUDA's), as `replay` does. */
static gboolean
fit_open_ranks(char **paths, int n, gint only, GPtrArray *configs, gboolean json, GPtrArray *traces,
               GArray *ranks, GError **error)
{
    const char *platform = NULL;

    for (int i = 0; i < n; i++) {
        FsimTrace *trace = fsim_trace_open(paths[i], error);
        const char *this_platform;
        const uint32_t *devices;
        gsize n_devices;

        if (trace == NULL)
            return FALSE;
        g_ptr_array_add(traces, trace);
        devices = fsim_trace_devices(trace, &n_devices);
        if (n_devices == 0 || (only >= 0 && !fsim_cli_trace_has_device(trace, (uint32_t)only))) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s has no events%s", paths[i],
                        only >= 0 ? " on that --trace-device" : "");
            return FALSE;
        }
        if (!fsim_cli_trace_platform(trace, NULL, "fit", json, &this_platform, error))
            return FALSE;
        if (platform != NULL && strcmp(platform, this_platform) != 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "%s was recorded on %s, %s on %s: fit the ranks of one platform together",
                        paths[i], this_platform, paths[0], platform);
            return FALSE;
        }
        platform = this_platform;
        for (gsize d = 0; d < n_devices; d++) {
            Rank rank = {.path = paths[i], .trace = trace, .trace_device = devices[d]};

            if (only < 0 || devices[d] == (uint32_t)only)
                g_array_append_val(ranks, rank);
        }
    }
    if (strcmp(platform, "npu") == 0)
        return fsim_cli_choose_platform(g_ptr_array_index(traces, 0), configs, platform, "fit",
                                        TRUE, error);
    return TRUE;
}

/* A fit's command line, resolved: what the flags and operands ask for. */
typedef struct {
    gint trace_device;
    gboolean json;
    gboolean paranoid;
    char **operands; /* argv + 1: the job's traces, or the model */
    int n_operands;
    gboolean is_trace;
    Target target;
    FsimDeviceSpec spec;
} FitArgs;

/* The operands (@argc, @argv, as parsed) and the model flags of @options, which it clears: a
 * job's traces, or a model into @src->train.  FALSE with *@status the exit status on an error. */
static gboolean
fit_operands(int argc, char **argv, FsimTrainOptions *options, FitArgs *a, Source *src, int *status)
{
    GError *error = NULL;

    for (int i = 2; i < argc; i++) {
        /* more than one operand: the traces of one job */
        if (!g_file_test(argv[i], G_FILE_TEST_EXISTS) ||
            !g_file_test(argv[1], G_FILE_TEST_EXISTS)) {
            fsim_train_options_clear(options);
            *status = fsim_cli_usage_error("fit", "expected one MODEL or TRACE files, got '%s' too",
                                           argv[i]);
            return FALSE;
        }
    }
    a->operands = argv + 1;
    a->n_operands = argc - 1;
    const char *what = argc >= 2 ? argv[1] : NULL;
    a->is_trace = what && g_file_test(what, G_FILE_TEST_EXISTS) && fsim_model_lookup(what) == NULL;
    gboolean ok = a->is_trace || fsim_train_options_resolve(options, what, &src->train, &error);
    gboolean model_flags = options->model || options->params || options->layers != -1;
    fsim_train_options_clear(options);
    if (!ok)
        *status = fsim_cli_fail("fit", error);
    else if (a->is_trace && model_flags)
        *status = fsim_cli_usage_error("fit", "give either a TRACE or a model, not both");
    return ok && !(a->is_trace && model_flags);
}

/* The target (@target_name) and the device (@device_name) into @a, the @policies and @configs
 * of @runs; FALSE with *@status the exit status on an error. */
static gboolean
fit_resolve(const char *target_name, const char *device_name, const FsimCliRunArgs *runs,
            FitArgs *a, GPtrArray **policies, GPtrArray **configs, int *status)
{
    GError *error = NULL;

    if (target_name == NULL)
        a->target = a->is_trace ? TARGET_DEVICE : TARGET_BATCH;
    else if (strcmp(target_name, "device") == 0)
        a->target = TARGET_DEVICE;
    else if (strcmp(target_name, "batch") == 0)
        a->target = TARGET_BATCH;
    else if (strcmp(target_name, "seq") == 0)
        a->target = TARGET_SEQ;
    else {
        *status = fsim_cli_usage_error(
            "fit", "--target '%s' is unknown (valid: device, batch, seq)", target_name);
        return FALSE;
    }
    if (a->is_trace && a->target != TARGET_DEVICE) {
        *status = fsim_cli_usage_error("fit", "a trace has a fixed batch: use --target device");
        return FALSE;
    }
    if (!fsim_device_spec_parse(device_name ? device_name : FSIM_DEVICE_DEFAULT, &a->spec,
                                &error) ||
        (*policies = fsim_cli_policies(runs->policy_list, &error)) == NULL ||
        (*configs = fsim_cli_configs((const char *const *)runs->alloc_confs, NULL, NULL, NULL,
                                     &error)) == NULL) {
        *status = fsim_cli_fail("fit", error);
        return FALSE;
    }
    return TRUE;
}

/* Parse the command line and resolve it: @a, the model into @src->train, the @policies and
 * @configs.  FALSE with *@status the exit status when the command ends here (an error, --help,
 * --list-models). */
static gboolean
fit_read_args(int argc, char **argv, FitArgs *a, Source *src, GPtrArray **policies,
              GPtrArray **configs, int *status)
{
    g_auto(FsimCliRunArgs) runs = {0};
    g_autofree char *device_name = NULL;
    g_autofree char *target_name = NULL;
    FsimTrainOptions options;
    GOptionEntry entries[] = {
        {"target", 't', 0, G_OPTION_ARG_STRING, &target_name,
         "device (smallest capacity; the default for a trace), batch (the default for a model) "
         "or seq",
         "WHAT"},
        FSIM_CLI_POLICIES_ENTRY(&runs.policy_list),
        {"device", 'd', 0, G_OPTION_ARG_STRING, &device_name,
         "The GPU to fit (batch, seq) or whose granularity and costs to use (device); default "
         "" FSIM_DEVICE_DEFAULT,
         "DEVICE"},
        FSIM_CLI_ALLOC_CONFS_ENTRY(&runs.alloc_confs),
        {"trace-device", 0, 0, G_OPTION_ARG_INT, &a->trace_device,
         "Fit only this device of each trace (default: every device with events, the ranks "
         "of one job)",
         "N"},
        FSIM_CLI_JSON_ENTRY(&a->json),
        FSIM_CLI_PARANOID_ENTRY(&a->paranoid),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autofree char *description = g_strconcat(
        "A trace: needed_bytes, the least capacity (to the device granularity, 2 MiB) on which\n"
        "the run, and on every larger one, has no OOM: what 'replay' reports (docs/metrics.md).\n"
        "A model: the largest micro-batch (or sequence, to 64 tokens) whose synthetic training\n"
        "trace replays without an OOM, generated in memory (two steps at least).\n"
        "Several TRACEs (a distributed job's ranks) or a trace of several devices: the job fits\n"
        "where every rank fits, so it needs what its worst rank needs.\n\n",
        fsim_train_options_help(),
        "\n\nExamples: fragsim fit traces/fragmenting.trace\n"
        "          fragsim fit llama2-7b --lora --checkpointing full -d rtx4090-24gb\n",
        NULL);

    a->trace_device = -1;
    return fsim_cli_parse_train(
               "fit", "TRACE...|MODEL - the smallest device, or the largest batch or sequence",
               entries, 0, description, &options, &a->json, &argc, &argv, status) &&
           fit_operands(argc, argv, &options, a, src, status) &&
           fit_resolve(target_name, device_name, &runs, a, policies, configs, status);
}

/* Each rank's lifetimes, when an offline policy (which plans from them) is among @policies: one
 * pass over its trace first. */
static gboolean
fit_rank_lifetimes(GArray *ranks, GPtrArray *policies, GError **error)
{
    for (guint r = 0; r < ranks->len; r++) {
        Rank *rank = &g_array_index(ranks, Rank, r);

        for (guint i = 0; i < policies->len && rank->lifetimes == NULL; i++) {
            if (fsim_policy_is_offline(g_ptr_array_index(policies, i))) {
                rank->lifetimes = fsim_lifetimes_from_trace(rank->trace, rank->trace_device, error);
                if (rank->lifetimes == NULL)
                    return FALSE;
            }
        }
    }
    return TRUE;
}

/* Fit every run, (policy, configuration), of @policies and @configs: a #Result each, appended to
 * @results. */
static gboolean
fit_runs(const FitArgs *a, GPtrArray *policies, GPtrArray *configs, Source *src, GArray *ranks,
         GArray *results, GError **error)
{
    for (guint p = 0; p < policies->len; p++) {
        const char *policy = g_ptr_array_index(policies, p);
        guint n = fsim_cli_policy_runs(policy, configs);

        for (guint c = 0; c < n; c++) {
            const FsimCliConfig *config = g_ptr_array_index(configs, c);
            Result r = {.policy = policy, .config = fsim_cli_run_config(policy, configs, c)};
            gboolean ok;

            r.label = fsim_run_label(policy, r.config);
            src->knobs = config->knobs;
            g_array_append_val(results, r);
            Result *at = &g_array_index(results, Result, results->len - 1);
            ok = a->is_trace                  ? fit_job(src, ranks, &a->spec, at, error)
                 : a->target == TARGET_DEVICE ? fit_device(src, &a->spec, at, error)
                                              : fit_dimension(src, &a->spec, a->target, at, error);
            if (!ok)
                return FALSE;
        }
    }
    return TRUE;
}

/* The text answer: what was fitted, the table, the ranks of a job, a model's estimate. */
static void
fit_print_text(const FitArgs *a, const Source *src, const Result *results, guint n, GArray *ranks)
{
    g_autofree char *granularity = fsim_format_size(a->spec.granularity);

    if (a->is_trace) {
        if (ranks->len > 1)
            g_print("A job of %u ranks (%d traces): the smallest device on which each policy "
                    "replays every rank without an OOM (to %s)\n",
                    ranks->len, a->n_operands, granularity);
        else
            g_print("%s: the smallest device each policy replays it on without an OOM (to %s)\n",
                    a->operands[0], granularity);
    } else {
        g_autofree char *about = fsim_train_config_describe(&src->train);
        g_autofree char *capacity = fsim_format_size(a->spec.capacity_bytes);
        g_print("%s", about);
        if (a->target == TARGET_DEVICE)
            g_print("The smallest device for it under each policy (to %s):\n", granularity);
        else
            g_print("The largest %s that fits %s (%s usable, %.2f GB) under each policy:\n",
                    a->target == TARGET_BATCH ? "micro-batch" : "sequence length", a->spec.name,
                    capacity, (double)a->spec.capacity_bytes / 1e9);
    }
    fit_print_table(a->target, results, n);
    if (ranks->len > 1)
        fit_print_ranks(results, n, ranks);
    if (!a->is_trace && a->target != TARGET_DEVICE) {
        uint64_t est = fit_estimate(&src->train, &a->spec, a->target);
        g_autofree char *answer = fit_format_answer(a->target, est);
        g_print("The closed-form estimate (no fragmentation) says: %s.\n", answer);
    }
}

int
fsim_cmd_fit(int argc, char **argv)
{
    FitArgs a = {0};
    g_autoptr(GPtrArray) policies = NULL;
    g_autoptr(GPtrArray) configs = NULL;
    g_autoptr(GArray) results = g_array_new(FALSE, TRUE, sizeof(Result));
    g_autoptr(GPtrArray) traces = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_trace_close);
    g_autoptr(GArray) ranks = g_array_new(FALSE, TRUE, sizeof(Rank));
    GError *error = NULL;
    Source src = {0};
    int status;

    if (!fit_read_args(argc, argv, &a, &src, &policies, &configs, &status))
        return status;
    src.paranoid = a.paranoid;
    /* the first step peaks lower (its gradients do not exist yet during its forward): fit the
     * steady state of the second step on */
    if (src.train.steps < 2)
        src.train.steps = 2;
    g_array_set_clear_func(ranks, rank_clear);
    g_array_set_clear_func(results, result_clear);
    if ((a.is_trace && !fit_open_ranks(a.operands, a.n_operands, a.trace_device, configs, a.json,
                                       traces, ranks, &error)) ||
        !fit_rank_lifetimes(ranks, policies, &error) ||
        !fit_runs(&a, policies, configs, &src, ranks, results, &error))
        return fsim_cli_fail("fit", error);
    if (a.json)
        fit_print_json(a.target, (const Result *)(const void *)results->data, results->len, ranks);
    else
        fit_print_text(&a, &src, (const Result *)(const void *)results->data, results->len, ranks);
    return FSIM_EXIT_OK;
}
