/* SPDX-License-Identifier: MIT */
/*
 * fragsim cuda replay: a trace through policies on the GPU and in the model, side by side.
 */
#include <glib.h>

#include "cli.h"
#include "cmd-cuda.h"
#include "configs.h"
#include "replay-outputs.h"

/* Store each engine of a replay (--db) as replay does. */
typedef struct {
    FsimReplayOutputs *outputs;
    uint32_t trace_device;
    const char *config; /* the run's canonical alloc conf */
    const char *label;  /* policy and config */
} Attach;

static gboolean
replay_attach(gpointer data, FsimEngine *engine, gboolean on_gpu, GError **error)
{
    Attach *attach = data;

    (void)on_gpu;
    return fsim_replay_outputs_attach(attach->outputs, engine, attach->trace_device, attach->config,
                                      attach->label, error);
}

static void
replay_result_free(gpointer data)
{
    FsimCudaReplayResult *result = data;

    fsim_cuda_replay_result_clear(result);
    g_free(result);
}

static uint64_t
metrics_calls(const FsimMetrics *m)
{
    return m->device_mallocs + m->device_frees + m->device_maps + m->device_unmaps;
}

/* The results of `cuda replay` and each one's config text, for replay_json_run(). */
typedef struct {
    GPtrArray *results;     /* FsimCudaReplayResult */
    GPtrArray *run_configs; /* char * */
} ReplayRuns;

/* Run @i of @data (ReplayRuns) as JSON. */
static void
replay_json_run(FsimJsonWriter *builder, guint i, gpointer data)
{
    const ReplayRuns *runs = data;
    const FsimCudaReplayResult *r = g_ptr_array_index(runs->results, i);
    const char *config = g_ptr_array_index(runs->run_configs, i);
    const FsimCudaMeasurements *measured = &r->measured;
    g_autofree char *label = fsim_run_label(r->policy, config);

    fsim_json_begin_object(builder);
    fsim_cli_json_string(builder, "policy", r->policy);
    fsim_cli_json_string(builder, "config", config);
    fsim_cli_json_string(builder, "label", label);
    fsim_cli_json_string(builder, "device", r->gpu_spec.name);
    fsim_cmd_cuda_json_add_u64(builder, "capacity_bytes", r->gpu_spec.capacity_bytes);
    fsim_cli_json_int(builder, "trace_device", r->trace_device);
    fsim_cli_json_string(builder, "status", r->gpu_oom_stopped ? "oom" : "complete");
    fsim_cli_json_add_metrics(builder, &r->gpu);
    fsim_cli_json_begin_object(builder, "measured");
    fsim_cli_json_members(builder, fsim_cmd_cuda_measured_members, measured);
    fsim_cli_json_begin_object(builder, "calls");
    for (int c = 0; c < FSIM_CALL_COUNT; c++)
        fsim_cmd_cuda_json_add_latency(builder, fsim_device_call_name((FsimDeviceCall)c),
                                       &measured->calls[c], (gint64)measured->modelled_ns[c]);
    fsim_json_end_object(builder);
    fsim_cmd_cuda_json_add_latency(builder, "failed", &measured->failed, -1);
    fsim_cmd_cuda_json_add_latency(builder, "touch", &measured->touch, -1);
    fsim_json_end_object(builder);
    if (r->has_model) {
        fsim_cli_json_begin_object(builder, "model");
        fsim_cli_json_string(builder, "device", r->model_spec.name);
        fsim_cli_json_string(builder, "status", r->model_oom_stopped ? "oom" : "complete");
        fsim_cli_json_add_metrics(builder, &r->model);
        fsim_json_end_object(builder);
    }
    fsim_json_end_object(builder);
}

/* A row of the run table: @m's figures, with the GPU's @used and @measured ("-" for the model). */
static void
add_run_row(FsimTable *table, const char *run, const FsimMetrics *m, const char *used,
            const char *measured, gboolean stopped)
{
    g_autofree char *reserved = fsim_format_size(m->peak_reserved_bytes);
    g_autofree char *modelled = fsim_cmd_cuda_format_ns((double)m->modelled_alloc_time_ns);

    fsim_table_add(table, run);
    fsim_table_add(table, reserved);
    fsim_table_add(table, used);
    fsim_table_addf(table, "%" G_GUINT64_FORMAT, metrics_calls(m));
    fsim_table_add(table, modelled);
    fsim_table_add(table, measured);
    fsim_table_addf(table, "%" G_GUINT64_FORMAT "%s", m->ooms, stopped ? " (stopped)" : "");
}

/* A row of the calls table: the modelled and measured time of call @c, and its latencies. */
static void
add_call_row(FsimTable *calls, const FsimCudaMeasurements *measured, int c)
{
    const FsimLatency *l = &measured->calls[c];
    const double times_ns[] = {
        (double)measured->modelled_ns[c],
        (double)l->total_ns,
        fsim_latency_mean(l),
        (double)fsim_latency_quantile(l, 0.5),
        (double)fsim_latency_quantile(l, 0.99),
        (double)l->max_ns,
    };

    fsim_table_add(calls, fsim_device_call_name((FsimDeviceCall)c));
    fsim_table_addf(calls, "%" G_GUINT64_FORMAT, l->count);
    for (gsize i = 0; i < G_N_ELEMENTS(times_ns); i++) {
        g_autofree char *text = fsim_cmd_cuda_format_ns(times_ns[i]);

        fsim_table_add(calls, text);
    }
}

static void
replay_print_result(const FsimCudaReplayResult *r, const char *label)
{
    static const char *const headers[] = {
        "run",           "peak reserved", "GPU used", "driver calls",
        "modelled time", "measured time", "OOMs",
    };
    static const char *const call_headers[] = {
        "call", "count", "modelled", "measured", "mean", "p50", "p99", "max",
    };
    const FsimCudaMeasurements *measured = &r->measured;
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(headers), headers);
    g_autoptr(FsimTable) calls = fsim_table_new(G_N_ELEMENTS(call_headers), call_headers);
    g_autofree char *gpu_used = fsim_format_size(measured->peak_used_bytes);
    g_autofree char *gpu_measured = fsim_cmd_cuda_format_ns((double)measured->measured_time_ns);

    g_print("run %s, trace device %u\n", label, r->trace_device);
    if (r->has_model)
        add_run_row(table, "model", &r->model, "-", "-", r->model_oom_stopped);
    add_run_row(table, "GPU", &r->gpu, gpu_used, gpu_measured, r->gpu_oom_stopped);
    fsim_table_print(table);
    for (int c = 0; c < FSIM_CALL_COUNT; c++) {
        if (measured->calls[c].count != 0)
            add_call_row(calls, measured, c);
    }
    if (measured->measured_time_ns != 0) {
        g_print("\n");
        fsim_table_print(calls);
    }
    if (r->has_model) {
        g_autofree char *reserved_delta = fsim_cmd_cuda_format_size_delta(
            r->gpu.peak_reserved_bytes, r->model.peak_reserved_bytes);
        g_autofree char *used_delta =
            fsim_cmd_cuda_format_size_delta(measured->peak_used_bytes, r->gpu.peak_reserved_bytes);
        gint64 calls_delta = (gint64)metrics_calls(&r->gpu) - (gint64)metrics_calls(&r->model);

        g_print("\ndifferences: peak reserved GPU - model %s; GPU used - GPU reserved %s; "
                "driver calls %+" G_GINT64_FORMAT "; measured / modelled time ",
                reserved_delta, used_delta, calls_delta);
        if (r->gpu.modelled_alloc_time_ns != 0)
            g_print("%.2f\n",
                    (double)measured->measured_time_ns / (double)r->gpu.modelled_alloc_time_ns);
        else
            g_print("-\n");
    }
    if (measured->touch.count != 0) {
        g_autofree char *touch = fsim_cmd_cuda_format_ns((double)measured->touch.total_ns);

        g_print("memory written after %" G_GUINT64_FORMAT " calls in %s (not in the times above)\n",
                measured->touch.count, touch);
    }
    g_print("\n");
}

/* What every run of the command shares. */
typedef struct {
    const FsimDeviceSpec *model;
    gboolean fail_on_oom;
    gboolean paranoid;
    gboolean with_model;
    gboolean touch;
    gboolean json; /* print only the JSON object at the end */
} CudaRunCommon;

/* One (policy, configuration) on the GPU (and in the model): a new result in @results. */
static gboolean
cuda_replay_one(FsimCudaDriver *driver, FsimTrace *trace, const char *policy, GKeyFile *knobs,
                Attach *attach, GPtrArray *results, const CudaRunCommon *common, GError **error)
{
    FsimCudaReplayResult *result = g_new0(FsimCudaReplayResult, 1);
    FsimCudaReplayOptions options;

    fsim_cuda_replay_options_init(&options);
    options.policy = policy;
    options.config = knobs;
    options.model = common->model;
    options.fail_on_oom = common->fail_on_oom;
    options.paranoid = common->paranoid;
    options.with_model = common->with_model;
    options.device.touch = common->touch;
    options.attach = replay_attach;
    options.attach_data = attach;
    g_ptr_array_add(results, result);
    return fsim_cuda_replay(driver, trace, attach->trace_device, &options, result, error);
}

/* Say what a run found (its OOM on stderr, its tables unless --json); whether it ran out. */
static gboolean
cuda_replay_report(FsimTrace *trace, const FsimCudaReplayResult *result, const char *label,
                   gboolean json)
{
    if (result->oom_message != NULL)
        g_printerr("fragsim cuda replay: %s: %s: %s\n", fsim_trace_path(trace), label,
                   result->oom_message);
    if (!json)
        replay_print_result(result, label);
    return result->oom_message != NULL;
}

/* Every run, each (policy, configuration) on each trace device of @devices, into @runs, under a
 * heading unless --json; *@any_oom when one ran out of memory. */
static gboolean
cuda_replay_runs(FsimCudaDriver *driver, FsimTrace *trace, GArray *devices, GPtrArray *policies,
                 GPtrArray *configs, const CudaRunCommon *common, Attach *attach, ReplayRuns *runs,
                 gboolean *any_oom, GError **error)
{
    if (!common->json)
        g_print("%s (%s) on %s\n\n", fsim_trace_path(trace), fsim_trace_format_name(trace),
                driver->info.name);
    for (guint d = 0; d < devices->len; d++) {
        for (guint p = 0; p < policies->len; p++) {
            const char *policy = g_ptr_array_index(policies, p);
            guint n = fsim_cli_policy_runs(policy, configs);

            for (guint c = 0; c < n; c++) {
                const FsimCliConfig *config = g_ptr_array_index(configs, c);
                const char *text = fsim_cli_run_config(policy, configs, c);
                g_autofree char *label = fsim_run_label(policy, text);

                attach->trace_device = g_array_index(devices, uint32_t, d);
                attach->config = text;
                attach->label = label;
                if (!cuda_replay_one(driver, trace, policy, config->knobs, attach, runs->results,
                                     common, error))
                    return FALSE;
                g_ptr_array_add(runs->run_configs, g_strdup(text));
                *any_oom |= cuda_replay_report(
                    trace, g_ptr_array_index(runs->results, runs->results->len - 1), label,
                    common->json);
            }
        }
    }
    return TRUE;
}

int
fsim_cmd_cuda_replay(int argc, char **argv)
{
    g_auto(FsimCliRunArgs) run_args = {0};
    g_autofree char *device_name = NULL;
    gint trace_device = -1;
    gint gpu = 0;
    gboolean no_model = FALSE;
    gboolean no_touch = FALSE;
    CudaRunCommon common = {0};
    GOptionEntry entries[] = {
        FSIM_CLI_POLICIES_ENTRY(&run_args.policy_list),
        {"device", 'd', 0, G_OPTION_ARG_STRING, &device_name,
         "Cost model and capacity cap: a preset, a size or a profile from 'fragsim cuda "
         "calibrate' (default: the GPU's free memory, the default costs)",
         "DEVICE"},
        FSIM_CLI_ALLOC_CONFS_ENTRY(&run_args.alloc_confs),
        FSIM_CLI_SET_ENTRY(&run_args.sets),
        FSIM_CLI_REPLAY_DEVICE_ENTRY(&trace_device),
        {"gpu", 0, 0, G_OPTION_ARG_INT, &gpu, "CUDA device ordinal to run on (default 0)", "N"},
        {"no-model", 0, 0, G_OPTION_ARG_NONE, &no_model,
         "Do not run the simulated device alongside", NULL},
        {"no-touch", 0, 0, G_OPTION_ARG_NONE, &no_touch,
         "Do not write new memory (cudaMemset) after each call", NULL},
        FSIM_CLI_JSON_ENTRY(&common.json),
        {"fail-on-oom", 0, 0, G_OPTION_ARG_NONE, &common.fail_on_oom,
         "Stop a run at its first OOM and exit with status 3", NULL},
        FSIM_CLI_PARANOID_ENTRY(&common.paranoid),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    /* Freed in reverse order: the outputs (whose runs observe the engines), then the results
     * (whose engines' devices use the driver), then the driver. */
    g_autoptr(FsimCudaDriver) driver = NULL;
    g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func(replay_result_free);
    g_autoptr(FsimReplayOutputs) outputs = fsim_replay_outputs_new();
    g_autoptr(GPtrArray) configs = NULL;
    g_autoptr(GPtrArray) run_configs = g_ptr_array_new_with_free_func(g_free); /* per result */
    g_autoptr(GPtrArray) policies = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GArray) devices = NULL;
    FsimDeviceSpec model;
    Attach attach = {outputs, 0, NULL, NULL};
    ReplayRuns runs = {results, run_configs};
    guint n_runs = 0;
    GError *error = NULL;
    int status = FSIM_EXIT_OK;
    gboolean any_oom = FALSE;

    if (!fsim_replay_outputs_parse(
            outputs, "cuda replay", "TRACE - replay a trace through policies on the GPU", entries,
            "Each policy runs on the GPU, its device calls carried out for real, and on the\n"
            "simulated device in lock step; the table compares them (docs/cuda.md).\n"
            "Example: fragsim cuda replay snapshot.pickle -p caching,expandable -d gpu.ini",
            &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (device_name != NULL && !fsim_device_spec_parse(device_name, &model, &error))
        return fsim_cli_fail("cuda replay", error);
    if (!fsim_cli_open_runs(argv[1], &run_args, "paged.page_size=20MiB", "device", &configs,
                            &policies, &n_runs, &trace, &error))
        return fsim_cli_fail("cuda replay", error);
    driver = fsim_cmd_cuda_open_trace("cuda replay", trace, trace_device, gpu, &devices, &status);
    if (driver == NULL)
        return status;
    common.model = device_name != NULL ? &model : NULL;
    common.with_model = !no_model;
    common.touch = !no_touch;
    /* each (policy, configuration) is two runs: on the GPU and in the model */
    if (!fsim_replay_outputs_open(outputs, trace, n_runs * (no_model ? 1 : 2), trace_device,
                                  &error) ||
        !cuda_replay_runs(driver, trace, devices, policies, configs, &common, &attach, &runs,
                          &any_oom, &error))
        return fsim_cli_fail("cuda replay", error);
    if (common.json)
        fsim_cmd_cuda_print_runs(trace, &driver->info, results->len, replay_json_run, &runs);
    if (!fsim_replay_outputs_finish(outputs, common.json, &error))
        return fsim_cli_fail("cuda replay", error);
    return any_oom ? FSIM_EXIT_OOM : FSIM_EXIT_OK;
}
