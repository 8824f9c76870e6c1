/* SPDX-License-Identifier: MIT */
/*
 * fragsim cuda info [--gpu N] [--json]
 * fragsim cuda replay TRACE [-p POLICIES] [-d DEVICE] [--set POLICY.KEY=VALUE] [--trace-device N]
 *                           [--gpu N] [--no-model] [--no-touch] [--json] [--fail-on-oom]
 *                           [--paranoid] [--db FILE [--samples N]]
 * fragsim cuda native TRACE [--mode malloc|async|both] [--trace-device N] [--gpu N] [--no-touch]
 *                           [--json]
 * fragsim cuda calibrate [-o PROFILE] [--gpu N] [--max-size SIZE] [--repeat N] [--json]
 *
 * The CUDA backend's commands (src/cuda/, docs/cuda.md).  Each opens the GPU first: without a
 * driver or device it fails with "no CUDA device" and status 1, and a fragsim built without the
 * toolkit says so.  `replay --db` stores both runs of each policy as `replay --db` stores its own:
 * the GPU run under the GPU's name, the model run under "<GPU> (model)".
 */
#include <glib.h>

#include <string.h>

#include "cli.h"
#include "cuda/cuda-backend.h"
#include "replay-outputs.h"

static const struct {
    const char *name;
    const char *summary;
} cuda_commands[] = {
    {"info", "describe the GPU: memory, granularity, driver"},
    {"replay", "replay a trace through policies on the GPU and in the model, and compare"},
    {"native", "replay a trace through cudaMalloc and cudaMallocAsync themselves"},
    {"calibrate", "measure the GPU's granularity and call costs; write a device profile"},
};

static void
cuda_print_help(void)
{
    g_print("Usage: fragsim cuda COMMAND [OPTIONS...]\n\n"
            "Run allocator policies on a real GPU and calibrate the device model.\n\nCommands:\n");
    for (gsize i = 0; i < G_N_ELEMENTS(cuda_commands); i++)
        g_print("  %-10s %s\n", cuda_commands[i].name, cuda_commands[i].summary);
    g_print("\nRun 'fragsim cuda COMMAND --help' for the options of a command.\n"
            "Without an NVIDIA GPU and driver every command fails with status 1.\n");
}

static FsimCudaDriver *
cuda_open(const char *command, gint gpu, int *status)
{
    GError *error = NULL;
    FsimCudaDriver *driver = fsim_cuda_driver_open(gpu, &error);

    if (driver == NULL)
        *status = fsim_cli_fail(command, error);
    return driver;
}

static char *
format_ns(double ns)
{
    if (ns >= 1e9)
        return g_strdup_printf("%.2f s", ns / 1e9);
    if (ns >= 1e6)
        return g_strdup_printf("%.2f ms", ns / 1e6);
    if (ns >= 1e3)
        return g_strdup_printf("%.1f us", ns / 1e3);
    return g_strdup_printf("%.0f ns", ns);
}

/* "+1.50 GiB", "-20.0 MiB", "0 B" */
static char *
format_size_delta(uint64_t value, uint64_t reference)
{
    g_autofree char *size =
        fsim_format_size(value >= reference ? value - reference : reference - value);

    return g_strdup_printf("%s%s", value > reference ? "+" : value < reference ? "-" : "", size);
}

/* ---- JSON helpers -------------------------------------------------------------------------- */

static void
json_add_u64(JsonBuilder *builder, const char *name, uint64_t value)
{
    json_builder_set_member_name(builder, name);
    json_builder_add_int_value(builder, (gint64)value);
}

static void
json_add_gpu(JsonBuilder *builder, const FsimCudaDriverInfo *info)
{
    g_autofree char *capability =
        g_strdup_printf("%d.%d", info->compute_major, info->compute_minor);

    json_builder_set_member_name(builder, "gpu");
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "name");
    json_builder_add_string_value(builder, info->name);
    json_builder_set_member_name(builder, "ordinal");
    json_builder_add_int_value(builder, info->ordinal);
    json_add_u64(builder, "total_bytes", info->total_bytes);
    json_add_u64(builder, "granularity", info->granularity);
    json_add_u64(builder, "recommended_granularity", info->recommended_granularity);
    json_builder_set_member_name(builder, "compute_capability");
    json_builder_add_string_value(builder, capability);
    json_builder_set_member_name(builder, "driver_version");
    json_builder_add_int_value(builder, info->driver_version);
    json_builder_set_member_name(builder, "runtime_version");
    json_builder_add_int_value(builder, info->runtime_version);
    json_builder_set_member_name(builder, "vmm_supported");
    json_builder_add_boolean_value(builder, info->vmm_supported);
    json_builder_set_member_name(builder, "pools_supported");
    json_builder_add_boolean_value(builder, info->pools_supported);
    json_builder_end_object(builder);
}

/* A latency as {count, total_ns, min_ns, mean_ns, p50_ns, p99_ns, max_ns, histogram}, where the
 * histogram lists [floor_ns, count] of the non-empty power-of-two buckets. */
static void
json_add_latency(JsonBuilder *builder, const char *name, const FsimLatency *latency,
                 gint64 modelled_ns)
{
    json_builder_set_member_name(builder, name);
    json_builder_begin_object(builder);
    json_add_u64(builder, "count", latency->count);
    json_add_u64(builder, "total_ns", latency->total_ns);
    if (modelled_ns >= 0)
        json_add_u64(builder, "modelled_ns", (uint64_t)modelled_ns);
    json_add_u64(builder, "min_ns", latency->count != 0 ? latency->min_ns : 0);
    json_builder_set_member_name(builder, "mean_ns");
    json_builder_add_double_value(builder, fsim_latency_mean(latency));
    json_add_u64(builder, "p50_ns", fsim_latency_quantile(latency, 0.5));
    json_add_u64(builder, "p99_ns", fsim_latency_quantile(latency, 0.99));
    json_add_u64(builder, "max_ns", latency->max_ns);
    json_builder_set_member_name(builder, "histogram");
    json_builder_begin_array(builder);
    for (guint i = 0; i < FSIM_LATENCY_BUCKETS; i++) {
        if (latency->buckets[i] == 0)
            continue;
        json_builder_begin_array(builder);
        json_builder_add_int_value(builder, (gint64)fsim_latency_bucket_floor(i));
        json_builder_add_int_value(builder, (gint64)latency->buckets[i]);
        json_builder_end_array(builder);
    }
    json_builder_end_array(builder);
    json_builder_end_object(builder);
}

/* ---- info ---------------------------------------------------------------------------------- */

static int
cuda_info(int argc, char **argv)
{
    gint gpu = 0;
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"gpu", 0, 0, G_OPTION_ARG_INT, &gpu, "CUDA device ordinal (default 0)", "N"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object on stdout", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context = g_option_context_new("- describe the GPU");
    g_autoptr(FsimCudaDriver) driver = NULL;
    const FsimCudaDriverInfo *info;
    g_autofree char *total = NULL;
    g_autofree char *granularity = NULL;
    g_autofree char *recommended = NULL;
    int status = FSIM_EXIT_OK;

    g_option_context_add_main_entries(context, entries, NULL);
    if (!fsim_cli_parse(context, "cuda info", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc != 1)
        return fsim_cli_usage_error("cuda info", "unexpected argument '%s'", argv[1]);
    driver = cuda_open("cuda info", gpu, &status);
    if (driver == NULL)
        return status;
    info = &driver->info;
    if (json) {
        g_autoptr(JsonBuilder) builder = json_builder_new();

        json_builder_begin_object(builder);
        json_add_gpu(builder, info);
        json_builder_end_object(builder);
        fsim_cli_print_json(json_builder_get_root(builder));
        return FSIM_EXIT_OK;
    }
    total = fsim_format_size(info->total_bytes);
    granularity = fsim_format_size(info->granularity);
    recommended = fsim_format_size(info->recommended_granularity);
    g_print("GPU %d: %s, compute capability %d.%d\n", info->ordinal, info->name,
            info->compute_major, info->compute_minor);
    g_print("memory: %s; granularity %s (recommended %s)\n", total, granularity, recommended);
    g_print("driver %d.%d, runtime %d.%d; virtual memory management %s; memory pools %s\n",
            info->driver_version / 1000, info->driver_version % 1000 / 10,
            info->runtime_version / 1000, info->runtime_version % 1000 / 10,
            info->vmm_supported ? "yes" : "no", info->pools_supported ? "yes" : "no");
    return FSIM_EXIT_OK;
}

/* ---- replay -------------------------------------------------------------------------------- */

/* The devices of the trace to replay: all, or --trace-device. */
static GArray *
cuda_trace_devices(FsimTrace *trace, gint trace_device, GError **error)
{
    gsize n;
    const uint32_t *devices = fsim_trace_devices(trace, &n);
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(uint32_t));

    for (gsize i = 0; i < n; i++) {
        if (trace_device < 0 || devices[i] == (uint32_t)trace_device)
            g_array_append_val(out, devices[i]);
    }
    if (trace_device >= 0 && out->len == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s has no events on device %d",
                    fsim_trace_path(trace), trace_device);
        return NULL;
    }
    return g_steal_pointer(&out);
}

/* Store each engine of a replay (--db) as replay does. */
typedef struct {
    FsimReplayOutputs *outputs;
    uint32_t trace_device;
} Attach;

static gboolean
replay_attach(gpointer data, FsimEngine *engine, gboolean on_gpu, GError **error)
{
    Attach *attach = data;

    (void)on_gpu;
    return fsim_replay_outputs_attach(attach->outputs, engine, attach->trace_device, "",
                                      fsim_engine_policy(engine)->ops->name, error);
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

static void
replay_json_run(JsonBuilder *builder, const FsimCudaReplayResult *r)
{
    const FsimCudaMeasurements *measured = &r->measured;

    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "policy");
    json_builder_add_string_value(builder, r->policy);
    json_builder_set_member_name(builder, "device");
    json_builder_add_string_value(builder, r->gpu_spec.name);
    json_add_u64(builder, "capacity_bytes", r->gpu_spec.capacity_bytes);
    json_builder_set_member_name(builder, "trace_device");
    json_builder_add_int_value(builder, r->trace_device);
    json_builder_set_member_name(builder, "status");
    json_builder_add_string_value(builder, r->gpu_oom_stopped ? "oom" : "complete");
    fsim_cli_json_add_metrics(builder, &r->gpu);
    json_builder_set_member_name(builder, "measured");
    json_builder_begin_object(builder);
    json_add_u64(builder, "alloc_time_ns", measured->measured_time_ns);
    json_add_u64(builder, "peak_used_bytes", measured->peak_used_bytes);
    json_add_u64(builder, "baseline_used_bytes", measured->baseline_used_bytes);
    json_add_u64(builder, "usage_samples", measured->usage_samples);
    json_add_u64(builder, "handles_created", measured->handles_created);
    json_add_u64(builder, "peak_handles", measured->peak_handles);
    json_builder_set_member_name(builder, "calls");
    json_builder_begin_object(builder);
    for (int c = 0; c < FSIM_CALL_COUNT; c++)
        json_add_latency(builder, fsim_device_call_name((FsimDeviceCall)c), &measured->calls[c],
                         (gint64)measured->modelled_ns[c]);
    json_builder_end_object(builder);
    json_add_latency(builder, "failed", &measured->failed, -1);
    json_add_latency(builder, "touch", &measured->touch, -1);
    json_builder_end_object(builder);
    if (r->has_model) {
        json_builder_set_member_name(builder, "model");
        json_builder_begin_object(builder);
        json_builder_set_member_name(builder, "device");
        json_builder_add_string_value(builder, r->model_spec.name);
        json_builder_set_member_name(builder, "status");
        json_builder_add_string_value(builder, r->model_oom_stopped ? "oom" : "complete");
        fsim_cli_json_add_metrics(builder, &r->model);
        json_builder_end_object(builder);
    }
    json_builder_end_object(builder);
}

static void
replay_print_result(const FsimCudaReplayResult *r)
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
    g_autofree char *gpu_reserved = fsim_format_size(r->gpu.peak_reserved_bytes);
    g_autofree char *gpu_used = fsim_format_size(measured->peak_used_bytes);
    g_autofree char *gpu_modelled = format_ns((double)r->gpu.modelled_alloc_time_ns);
    g_autofree char *gpu_measured = format_ns((double)measured->measured_time_ns);

    g_print("policy %s, trace device %u\n", r->policy, r->trace_device);
    if (r->has_model) {
        g_autofree char *reserved = fsim_format_size(r->model.peak_reserved_bytes);
        g_autofree char *modelled = format_ns((double)r->model.modelled_alloc_time_ns);

        fsim_table_add(table, "model");
        fsim_table_add(table, reserved);
        fsim_table_add(table, "-");
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, metrics_calls(&r->model));
        fsim_table_add(table, modelled);
        fsim_table_add(table, "-");
        fsim_table_addf(table, "%" G_GUINT64_FORMAT "%s", r->model.ooms,
                        r->model_oom_stopped ? " (stopped)" : "");
    }
    fsim_table_add(table, "GPU");
    fsim_table_add(table, gpu_reserved);
    fsim_table_add(table, gpu_used);
    fsim_table_addf(table, "%" G_GUINT64_FORMAT, metrics_calls(&r->gpu));
    fsim_table_add(table, gpu_modelled);
    fsim_table_add(table, gpu_measured);
    fsim_table_addf(table, "%" G_GUINT64_FORMAT "%s", r->gpu.ooms,
                    r->gpu_oom_stopped ? " (stopped)" : "");
    fsim_table_print(table);
    for (int c = 0; c < FSIM_CALL_COUNT; c++) {
        const FsimLatency *l = &measured->calls[c];
        g_autofree char *modelled = NULL;
        g_autofree char *total = NULL;
        g_autofree char *mean = NULL;
        g_autofree char *p50 = NULL;
        g_autofree char *p99 = NULL;
        g_autofree char *max = NULL;

        if (l->count == 0)
            continue;
        modelled = format_ns((double)measured->modelled_ns[c]);
        total = format_ns((double)l->total_ns);
        mean = format_ns(fsim_latency_mean(l));
        p50 = format_ns((double)fsim_latency_quantile(l, 0.5));
        p99 = format_ns((double)fsim_latency_quantile(l, 0.99));
        max = format_ns((double)l->max_ns);
        fsim_table_add(calls, fsim_device_call_name((FsimDeviceCall)c));
        fsim_table_addf(calls, "%" G_GUINT64_FORMAT, l->count);
        fsim_table_add(calls, modelled);
        fsim_table_add(calls, total);
        fsim_table_add(calls, mean);
        fsim_table_add(calls, p50);
        fsim_table_add(calls, p99);
        fsim_table_add(calls, max);
    }
    if (measured->measured_time_ns != 0) {
        g_print("\n");
        fsim_table_print(calls);
    }
    if (r->has_model) {
        g_autofree char *reserved_delta =
            format_size_delta(r->gpu.peak_reserved_bytes, r->model.peak_reserved_bytes);
        g_autofree char *used_delta =
            format_size_delta(measured->peak_used_bytes, r->gpu.peak_reserved_bytes);
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
        g_autofree char *touch = format_ns((double)measured->touch.total_ns);

        g_print("memory written after %" G_GUINT64_FORMAT " calls in %s (not in the times above)\n",
                measured->touch.count, touch);
    }
    g_print("\n");
}

static int
cuda_replay(int argc, char **argv)
{
    g_autofree char *policy_list = NULL;
    g_autofree char *device_name = NULL;
    g_auto(GStrv) sets = NULL;
    gint trace_device = -1;
    gint gpu = 0;
    gboolean no_model = FALSE;
    gboolean no_touch = FALSE;
    gboolean json = FALSE;
    gboolean fail_on_oom = FALSE;
    gboolean paranoid = FALSE;
    GOptionEntry entries[] = {
        {"policies", 'p', 0, G_OPTION_ARG_STRING, &policy_list,
         "Comma-separated policies (default: all; see 'fragsim policies')", "LIST"},
        {"device", 'd', 0, G_OPTION_ARG_STRING, &device_name,
         "Cost model and capacity cap: a preset, a size or a profile from 'fragsim cuda "
         "calibrate' (default: the GPU's free memory, the default costs)",
         "DEVICE"},
        {"set", 0, 0, G_OPTION_ARG_STRING_ARRAY, &sets, "Set a policy knob (repeatable)",
         "POLICY.KEY=VALUE"},
        {"trace-device", 0, 0, G_OPTION_ARG_INT, &trace_device,
         "Replay only this device of a multi-GPU trace (default: every device with events)", "N"},
        {"gpu", 0, 0, G_OPTION_ARG_INT, &gpu, "CUDA device ordinal to run on (default 0)", "N"},
        {"no-model", 0, 0, G_OPTION_ARG_NONE, &no_model,
         "Do not run the simulated device alongside", NULL},
        {"no-touch", 0, 0, G_OPTION_ARG_NONE, &no_touch,
         "Do not write new memory (cudaMemset) after each call", NULL},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object on stdout", NULL},
        {"fail-on-oom", 0, 0, G_OPTION_ARG_NONE, &fail_on_oom,
         "Stop a run at its first OOM and exit with status 3", NULL},
        {"paranoid", 0, 0, G_OPTION_ARG_NONE, &paranoid,
         "Check the policy's invariants after every operation (slow)", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("TRACE - replay a trace through policies on the GPU");
    /* Freed in reverse order: the outputs (whose runs observe the engines), then the results
     * (whose engines' devices use the driver), then the driver. */
    g_autoptr(FsimCudaDriver) driver = NULL;
    g_autoptr(GPtrArray) results = g_ptr_array_new_with_free_func(replay_result_free);
    g_autoptr(FsimReplayOutputs) outputs = fsim_replay_outputs_new();
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GPtrArray) policies = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GArray) devices = NULL;
    FsimDeviceSpec model;
    Attach attach = {outputs, 0};
    GError *error = NULL;
    int status = FSIM_EXIT_OK;
    gboolean any_oom = FALSE;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_add_main_entries(context, fsim_replay_outputs_entries(outputs), NULL);
    g_option_context_set_description(
        context, "Each policy runs on the GPU, its device calls carried out for real, and on the\n"
                 "simulated device in lock step; the table compares them (docs/cuda.md).\n"
                 "Example: fragsim cuda replay snapshot.pickle -p caching,expandable -d gpu.ini");
    if (!fsim_cli_parse(context, "cuda replay", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc != 2)
        return fsim_cli_usage_error("cuda replay", argc < 2 ? "missing the TRACE argument"
                                                            : "expected exactly one TRACE");
    if (device_name != NULL && !fsim_device_spec_parse(device_name, &model, &error))
        return fsim_cli_fail("cuda replay", error);
    if (!fsim_cli_apply_sets(config, (const char *const *)sets, "paged.page_size=20MiB", "device",
                             &error))
        return fsim_cli_fail("cuda replay", error);
    policies = fsim_cli_policies(policy_list, &error);
    if (policies == NULL)
        return fsim_cli_fail("cuda replay", error);
    trace = fsim_trace_open(argv[1], &error);
    if (trace == NULL)
        return fsim_cli_fail("cuda replay", error);
    devices = cuda_trace_devices(trace, trace_device, &error);
    if (devices == NULL)
        return fsim_cli_fail("cuda replay", error);
    driver = cuda_open("cuda replay", gpu, &status);
    if (driver == NULL)
        return status;
    /* each policy is two runs: on the GPU and in the model */
    if (!fsim_replay_outputs_open(outputs, trace, policies->len * (no_model ? 1 : 2), trace_device,
                                  &error))
        return fsim_cli_fail("cuda replay", error);
    if (!json)
        g_print("%s (%s) on %s\n\n", fsim_trace_path(trace), fsim_trace_format_name(trace),
                driver->info.name);
    for (guint d = 0; d < devices->len; d++) {
        for (guint p = 0; p < policies->len; p++) {
            FsimCudaReplayResult *result = g_new0(FsimCudaReplayResult, 1);
            FsimCudaReplayOptions options;

            fsim_cuda_replay_options_init(&options);
            options.policy = g_ptr_array_index(policies, p);
            options.config = config;
            options.model = device_name != NULL ? &model : NULL;
            options.fail_on_oom = fail_on_oom;
            options.paranoid = paranoid;
            options.with_model = !no_model;
            options.device.touch = !no_touch;
            options.attach = replay_attach;
            options.attach_data = &attach;
            attach.trace_device = g_array_index(devices, uint32_t, d);
            g_ptr_array_add(results, result);
            if (!fsim_cuda_replay(driver, trace, g_array_index(devices, uint32_t, d), &options,
                                  result, &error))
                return fsim_cli_fail("cuda replay", error);
            if (result->oom_message != NULL) {
                g_printerr("fragsim cuda replay: %s: %s\n", fsim_trace_path(trace),
                           result->oom_message);
                any_oom = TRUE;
            }
            if (!json)
                replay_print_result(result);
        }
    }
    if (json) {
        g_autoptr(JsonBuilder) builder = json_builder_new();

        json_builder_begin_object(builder);
        json_builder_set_member_name(builder, "trace");
        json_builder_add_string_value(builder, fsim_trace_path(trace));
        json_add_gpu(builder, &driver->info);
        json_builder_set_member_name(builder, "runs");
        json_builder_begin_array(builder);
        for (guint i = 0; i < results->len; i++)
            replay_json_run(builder, g_ptr_array_index(results, i));
        json_builder_end_array(builder);
        json_builder_end_object(builder);
        fsim_cli_print_json(json_builder_get_root(builder));
    }
    if (!fsim_replay_outputs_finish(outputs, json, &error))
        return fsim_cli_fail("cuda replay", error);
    return any_oom ? FSIM_EXIT_OOM : FSIM_EXIT_OK;
}

/* ---- native -------------------------------------------------------------------------------- */

static void
native_json_run(JsonBuilder *builder, const FsimCudaNativeResult *r)
{
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "mode");
    json_builder_add_string_value(builder, fsim_cuda_native_mode_name(r->mode));
    json_builder_set_member_name(builder, "trace_device");
    json_builder_add_int_value(builder, r->trace_device);
    json_add_u64(builder, "events", r->events);
    json_add_u64(builder, "allocs", r->allocs);
    json_add_u64(builder, "frees", r->frees);
    json_add_u64(builder, "ooms", r->ooms);
    json_builder_set_member_name(builder, "first_oom_event");
    if (r->first_oom_event < 0)
        json_builder_add_null_value(builder);
    else
        json_builder_add_int_value(builder, r->first_oom_event);
    json_add_u64(builder, "unmatched_frees", r->unmatched_frees);
    json_add_u64(builder, "empty_caches", r->empty_caches);
    json_add_u64(builder, "peak_requested_bytes", r->peak_requested_bytes);
    json_add_u64(builder, "peak_used_bytes", r->peak_used_bytes);
    json_add_u64(builder, "peak_reserved_bytes", r->peak_reserved_bytes);
    json_add_u64(builder, "pool_used_high_bytes", r->pool_used_high_bytes);
    json_add_latency(builder, "alloc", &r->alloc, -1);
    json_add_latency(builder, "free", &r->dealloc, -1);
    json_add_latency(builder, "touch", &r->touch, -1);
    json_builder_end_object(builder);
}

static int
cuda_native(int argc, char **argv)
{
    g_autofree char *mode_text = NULL;
    gint trace_device = -1;
    gint gpu = 0;
    gboolean no_touch = FALSE;
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"mode", 0, 0, G_OPTION_ARG_STRING, &mode_text,
         "malloc (cudaMalloc per tensor), async (cudaMallocAsync pool) or both (default)", "MODE"},
        {"trace-device", 0, 0, G_OPTION_ARG_INT, &trace_device,
         "Replay only this device of a multi-GPU trace (default: every device with events)", "N"},
        {"gpu", 0, 0, G_OPTION_ARG_INT, &gpu, "CUDA device ordinal to run on (default 0)", "N"},
        {"no-touch", 0, 0, G_OPTION_ARG_NONE, &no_touch,
         "Do not write each allocation (cudaMemset)", NULL},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object on stdout", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    static const char *const headers[] = {
        "mode",       "peak requested", "peak reserved", "GPU used", "OOMs",
        "alloc time", "free time",      "alloc p50",     "free p50",
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("TRACE - replay a trace through the CUDA driver's allocators");
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GArray) devices = NULL;
    g_autoptr(FsimCudaDriver) driver = NULL;
    g_autoptr(GArray) results = g_array_new(FALSE, TRUE, sizeof(FsimCudaNativeResult));
    g_autoptr(FsimTable) table = NULL;
    FsimCudaNativeMode modes[2];
    guint n_modes = 0;
    GError *error = NULL;
    int status = FSIM_EXIT_OK;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context, "Every stream of the trace is served on one CUDA stream.  Memory held at trace\n"
                 "start is allocated first.  Peaks: requested (the program), reserved (the pool's\n"
                 "high-water mark; for cudaMalloc, the used memory), GPU used (cudaMemGetInfo).");
    if (!fsim_cli_parse(context, "cuda native", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc != 2)
        return fsim_cli_usage_error("cuda native", argc < 2 ? "missing the TRACE argument"
                                                            : "expected exactly one TRACE");
    if (mode_text == NULL || strcmp(mode_text, "both") == 0) {
        modes[n_modes++] = FSIM_CUDA_NATIVE_MALLOC;
        modes[n_modes++] = FSIM_CUDA_NATIVE_ASYNC;
    } else if (strcmp(mode_text, "malloc") == 0) {
        modes[n_modes++] = FSIM_CUDA_NATIVE_MALLOC;
    } else if (strcmp(mode_text, "async") == 0) {
        modes[n_modes++] = FSIM_CUDA_NATIVE_ASYNC;
    } else {
        return fsim_cli_usage_error("cuda native", "--mode '%s': expected malloc, async or both",
                                    mode_text);
    }
    trace = fsim_trace_open(argv[1], &error);
    if (trace == NULL)
        return fsim_cli_fail("cuda native", error);
    devices = cuda_trace_devices(trace, trace_device, &error);
    if (devices == NULL)
        return fsim_cli_fail("cuda native", error);
    driver = cuda_open("cuda native", gpu, &status);
    if (driver == NULL)
        return status;
    for (guint d = 0; d < devices->len; d++) {
        for (guint m = 0; m < n_modes; m++) {
            FsimCudaNativeResult result;

            if (!fsim_cuda_native(driver, trace, g_array_index(devices, uint32_t, d), modes[m],
                                  !no_touch, &result, &error))
                return fsim_cli_fail("cuda native", error);
            g_array_append_val(results, result);
        }
    }
    if (json) {
        g_autoptr(JsonBuilder) builder = json_builder_new();

        json_builder_begin_object(builder);
        json_builder_set_member_name(builder, "trace");
        json_builder_add_string_value(builder, fsim_trace_path(trace));
        json_add_gpu(builder, &driver->info);
        json_builder_set_member_name(builder, "runs");
        json_builder_begin_array(builder);
        for (guint i = 0; i < results->len; i++)
            native_json_run(builder, &g_array_index(results, FsimCudaNativeResult, i));
        json_builder_end_array(builder);
        json_builder_end_object(builder);
        fsim_cli_print_json(json_builder_get_root(builder));
        return FSIM_EXIT_OK;
    }
    g_print("%s (%s) on %s\n", fsim_trace_path(trace), fsim_trace_format_name(trace),
            driver->info.name);
    for (guint i = 0; i < results->len; i++) {
        const FsimCudaNativeResult *r = &g_array_index(results, FsimCudaNativeResult, i);
        g_autofree char *requested = fsim_format_size(r->peak_requested_bytes);
        g_autofree char *reserved = fsim_format_size(r->peak_reserved_bytes);
        g_autofree char *used = fsim_format_size(r->peak_used_bytes);
        g_autofree char *alloc = format_ns((double)r->alloc.total_ns);
        g_autofree char *dealloc = format_ns((double)r->dealloc.total_ns);
        g_autofree char *alloc_p50 = format_ns((double)fsim_latency_quantile(&r->alloc, 0.5));
        g_autofree char *free_p50 = format_ns((double)fsim_latency_quantile(&r->dealloc, 0.5));

        /* one table per trace device */
        if (i == 0 ||
            r->trace_device != g_array_index(results, FsimCudaNativeResult, i - 1).trace_device) {
            if (table != NULL)
                fsim_table_print(table);
            g_clear_pointer(&table, fsim_table_free);
            g_print("\ntrace device %u, %" G_GUINT64_FORMAT " events\n", r->trace_device,
                    r->events);
            table = fsim_table_new(G_N_ELEMENTS(headers), headers);
        }
        fsim_table_add(table, fsim_cuda_native_mode_name(r->mode));
        fsim_table_add(table, requested);
        fsim_table_add(table, reserved);
        fsim_table_add(table, used);
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, r->ooms);
        fsim_table_add(table, alloc);
        fsim_table_add(table, dealloc);
        fsim_table_add(table, alloc_p50);
        fsim_table_add(table, free_p50);
    }
    if (table != NULL)
        fsim_table_print(table);
    return FSIM_EXIT_OK;
}

/* ---- calibrate ----------------------------------------------------------------------------- */

static void
calibrate_json(const FsimCudaCalibration *cal, const FsimDeviceSpec *spec, const char *output)
{
    g_autoptr(JsonBuilder) builder = json_builder_new();
    const FsimDeviceCosts *c = &spec->costs;
    const struct {
        const char *name;
        uint64_t value;
    } costs[] = {
        {"malloc_ns", c->malloc_ns}, {"malloc_per_gib_ns", c->malloc_per_gib_ns},
        {"free_ns", c->free_ns},     {"free_per_gib_ns", c->free_per_gib_ns},
        {"sync_ns", c->sync_ns},     {"reserve_ns", c->reserve_ns},
        {"map_ns", c->map_ns},       {"map_per_gib_ns", c->map_per_gib_ns},
        {"unmap_ns", c->unmap_ns},   {"unmap_per_gib_ns", c->unmap_per_gib_ns},
    };

    json_builder_begin_object(builder);
    json_add_gpu(builder, &cal->info);
    json_builder_set_member_name(builder, "profile");
    if (output != NULL)
        json_builder_add_string_value(builder, output);
    else
        json_builder_add_null_value(builder);
    json_add_u64(builder, "free_bytes", cal->free_bytes);
    json_add_u64(builder, "observed_step", cal->observed_step);
    json_builder_set_member_name(builder, "steps");
    json_builder_begin_array(builder);
    for (guint i = 0; i < cal->steps->len; i++) {
        const FsimCudaUsageStep *step = &g_array_index(cal->steps, FsimCudaUsageStep, i);

        json_builder_begin_object(builder);
        json_add_u64(builder, "size", step->size);
        json_add_u64(builder, "count", step->count);
        json_add_u64(builder, "used_bytes", step->used_bytes);
        json_builder_end_object(builder);
    }
    json_builder_end_array(builder);
    json_builder_set_member_name(builder, "series");
    json_builder_begin_array(builder);
    for (int s = 0; s < FSIM_CUDA_SERIES_COUNT; s++) {
        const FsimCudaSeries *series = &cal->series[s];

        json_builder_begin_object(builder);
        json_builder_set_member_name(builder, "name");
        json_builder_add_string_value(builder, series->name);
        json_builder_set_member_name(builder, "points");
        json_builder_begin_array(builder);
        for (guint i = 0; i < series->sizes->len; i++) {
            json_builder_begin_array(builder);
            json_builder_add_int_value(builder, (gint64)g_array_index(series->sizes, uint64_t, i));
            json_builder_add_double_value(builder, g_array_index(series->median_ns, double, i));
            json_builder_end_array(builder);
        }
        json_builder_end_array(builder);
        json_builder_set_member_name(builder, "base_ns");
        json_builder_add_double_value(builder, series->fit.base);
        json_builder_set_member_name(builder, "per_gib_ns");
        json_builder_add_double_value(builder, series->fit.slope);
        json_builder_set_member_name(builder, "r2");
        json_builder_add_double_value(builder, series->fit.r2);
        json_builder_end_object(builder);
    }
    json_builder_end_array(builder);
    json_builder_set_member_name(builder, "costs");
    json_builder_begin_object(builder);
    for (gsize i = 0; i < G_N_ELEMENTS(costs); i++)
        json_add_u64(builder, costs[i].name, costs[i].value);
    json_builder_end_object(builder);
    json_builder_end_object(builder);
    fsim_cli_print_json(json_builder_get_root(builder));
}

static void
calibrate_print(const FsimCudaCalibration *cal, const FsimDeviceSpec *spec)
{
    static const char *const step_headers[] = {"cudaMalloc size", "count", "used growth",
                                               "per allocation"};
    static const char *const series_headers[] = {"call", "sizes", "base", "per GiB", "r2"};
    static const char *const cost_headers[] = {"cost", "calibrated", "default"};
    FsimDeviceCosts defaults = fsim_device_costs_default();
    const FsimDeviceCosts *c = &spec->costs;
    const struct {
        const char *name;
        uint64_t value;
        uint64_t default_value;
    } costs[] = {
        {"malloc_ns", c->malloc_ns, defaults.malloc_ns},
        {"malloc_per_gib_ns", c->malloc_per_gib_ns, defaults.malloc_per_gib_ns},
        {"free_ns", c->free_ns, defaults.free_ns},
        {"free_per_gib_ns", c->free_per_gib_ns, defaults.free_per_gib_ns},
        {"sync_ns", c->sync_ns, defaults.sync_ns},
        {"reserve_ns", c->reserve_ns, defaults.reserve_ns},
        {"map_ns", c->map_ns, defaults.map_ns},
        {"map_per_gib_ns", c->map_per_gib_ns, defaults.map_per_gib_ns},
        {"unmap_ns", c->unmap_ns, defaults.unmap_ns},
        {"unmap_per_gib_ns", c->unmap_per_gib_ns, defaults.unmap_per_gib_ns},
    };
    g_autoptr(FsimTable) steps = fsim_table_new(G_N_ELEMENTS(step_headers), step_headers);
    g_autoptr(FsimTable) series = fsim_table_new(G_N_ELEMENTS(series_headers), series_headers);
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(cost_headers), cost_headers);
    g_autofree char *granularity = fsim_format_size(cal->info.granularity);
    g_autofree char *recommended = fsim_format_size(cal->info.recommended_granularity);
    g_autofree char *step = fsim_format_size(cal->observed_step);
    g_autofree char *free_text = fsim_format_size(cal->free_bytes);
    g_autofree char *total = fsim_format_size(cal->info.total_bytes);

    g_print("%s: %s of %s free; granularity %s (recommended %s); cudaMalloc takes memory in "
            "steps of %s\n\n",
            cal->info.name, free_text, total, granularity, recommended, step);
    for (guint i = 0; i < cal->steps->len; i++) {
        const FsimCudaUsageStep *s = &g_array_index(cal->steps, FsimCudaUsageStep, i);
        g_autofree char *growth = fsim_format_size(s->used_bytes);
        g_autofree char *per = fsim_format_size(s->count != 0 ? s->used_bytes / s->count : 0);

        fsim_table_addf(steps, "%" G_GUINT64_FORMAT, s->size);
        fsim_table_addf(steps, "%" G_GUINT64_FORMAT, s->count);
        fsim_table_add(steps, growth);
        fsim_table_add(steps, per);
    }
    fsim_table_print(steps);
    g_print("\n");
    for (int i = 0; i < FSIM_CUDA_SERIES_COUNT; i++) {
        const FsimCudaSeries *s = &cal->series[i];
        g_autofree char *base = NULL;
        g_autofree char *slope = NULL;

        if (s->sizes->len == 0)
            continue;
        base = format_ns(s->fit.base);
        slope = format_ns(s->fit.slope);
        fsim_table_add(series, s->name);
        fsim_table_addf(series, "%u", s->sizes->len);
        fsim_table_add(series, base);
        fsim_table_add(series, slope);
        fsim_table_addf(series, "%.3f", s->fit.r2);
    }
    fsim_table_print(series);
    g_print("\n");
    for (gsize i = 0; i < G_N_ELEMENTS(costs); i++) {
        fsim_table_add(table, costs[i].name);
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, costs[i].value);
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, costs[i].default_value);
    }
    fsim_table_print(table);
}

static int
cuda_calibrate(int argc, char **argv)
{
    g_autofree char *output = NULL;
    g_autofree char *max_size_text = NULL;
    gint gpu = 0;
    gint repeat = 0;
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
         "Write the device profile here (default: print it after the summary)", "PROFILE"},
        {"gpu", 0, 0, G_OPTION_ARG_INT, &gpu, "CUDA device ordinal (default 0)", "N"},
        {"max-size", 0, 0, G_OPTION_ARG_STRING, &max_size_text,
         "Largest size probed (default 4GiB, at most a quarter of the free memory)", "SIZE"},
        {"repeat", 0, 0, G_OPTION_ARG_INT, &repeat, "Timed samples per size (default 5)", "N"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object on stdout", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("- measure the GPU and write a device profile for -d");
    g_autoptr(FsimCudaDriver) driver = NULL;
    FsimCudaCalibrateOptions options;
    FsimCudaCalibration calibration;
    FsimDeviceSpec spec;
    GError *error = NULL;
    int status = FSIM_EXIT_OK;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context, "Measures cuMemGetAllocationGranularity, the used-memory step of cudaMalloc,\n"
                 "and the cost of cudaMalloc, cudaFree, reserve, map and unmap across sizes;\n"
                 "fits base + per-GiB costs by least squares (docs/cuda.md).\n"
                 "Example: fragsim cuda calibrate -o gpu.ini && fragsim replay T -d gpu.ini");
    if (!fsim_cli_parse(context, "cuda calibrate", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc != 1)
        return fsim_cli_usage_error("cuda calibrate", "unexpected argument '%s'", argv[1]);
    fsim_cuda_calibrate_options_init(&options);
    if (max_size_text != NULL && !fsim_parse_size(max_size_text, &options.max_size, NULL))
        return fsim_cli_usage_error("cuda calibrate", "--max-size '%s' is not a size",
                                    max_size_text);
    if (repeat < 0 || repeat > 1000)
        return fsim_cli_usage_error("cuda calibrate", "--repeat %d: expected 1 to 1000", repeat);
    if (repeat > 0)
        options.repeat = (guint)repeat;
    driver = cuda_open("cuda calibrate", gpu, &status);
    if (driver == NULL)
        return status;
    if (!fsim_cuda_calibrate(driver, &options, &calibration, &error)) {
        fsim_cuda_calibration_clear(&calibration);
        return fsim_cli_fail("cuda calibrate", error);
    }
    fsim_cuda_calibration_spec(&calibration, &spec);
    if (output != NULL && !fsim_cuda_profile_write(output, &spec, &calibration, &error)) {
        fsim_cuda_calibration_clear(&calibration);
        return fsim_cli_fail("cuda calibrate", error);
    }
    if (json) {
        calibrate_json(&calibration, &spec, output);
    } else {
        calibrate_print(&calibration, &spec);
        if (output != NULL) {
            g_print("\nwrote %s (use it with -d %s)\n", output, output);
        } else {
            g_autofree char *data = fsim_cuda_profile_to_data(&spec, &calibration);

            g_print("\n%s", data);
        }
    }
    fsim_cuda_calibration_clear(&calibration);
    return FSIM_EXIT_OK;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

int
fsim_cmd_cuda(int argc, char **argv)
{
    if (argc < 2) {
        cuda_print_help();
        return FSIM_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        cuda_print_help();
        return FSIM_EXIT_OK;
    }
    if (strcmp(argv[1], "info") == 0)
        return cuda_info(argc - 1, argv + 1);
    if (strcmp(argv[1], "replay") == 0)
        return cuda_replay(argc - 1, argv + 1);
    if (strcmp(argv[1], "native") == 0)
        return cuda_native(argc - 1, argv + 1);
    if (strcmp(argv[1], "calibrate") == 0)
        return cuda_calibrate(argc - 1, argv + 1);
    return fsim_cli_usage_error("cuda", "unknown command '%s' (info, replay, native, calibrate)",
                                argv[1]);
}
