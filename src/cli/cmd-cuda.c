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
#include "cmd-cuda.h"

#include <glib.h>

#include <string.h>

#include "cli.h"

static int cuda_info(int argc, char **argv);

static const FsimCommand cuda_commands[] = {
    {"info", "describe the GPU: memory, granularity, driver", cuda_info},
    {"replay", "replay a trace through policies on the GPU and in the model, and compare",
     fsim_cmd_cuda_replay},
    {"native", "replay a trace through cudaMalloc and cudaMallocAsync themselves",
     fsim_cmd_cuda_native},
    {"calibrate", "measure the GPU's granularity and call costs; write a device profile",
     fsim_cmd_cuda_calibrate},
    {NULL, NULL, NULL},
};

static void
cuda_print_help(void)
{
    g_print("Usage: fragsim cuda COMMAND [OPTIONS...]\n\n"
            "Run allocator policies on a real GPU and calibrate the device model.\n\nCommands:\n");
    fsim_cli_print_commands(cuda_commands);
    g_print("\nRun 'fragsim cuda COMMAND --help' for the options of a command.\n"
            "Without an NVIDIA GPU and driver every command fails with status 1.\n");
}

/* The devices of the trace to replay: all, or --trace-device. */
static GArray *
trace_devices(FsimTrace *trace, gint trace_device, GError **error)
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

FsimCudaDriver *
fsim_cmd_cuda_open_trace(const char *command, FsimTrace *trace, gint trace_device, gint gpu,
                         GArray **devices, int *status)
{
    GError *error = NULL;
    FsimCudaDriver *driver = NULL;

    *devices = trace_devices(trace, trace_device, &error);
    if (*devices != NULL)
        driver = fsim_cuda_driver_open(gpu, &error);
    if (driver == NULL)
        *status = fsim_cli_fail(command, error);
    return driver;
}

char *
fsim_cmd_cuda_format_ns(double ns)
{
    static const FsimCliTimeUnit units[] = {
        {1e9, 1e9, 2, "s"}, {1e6, 1e6, 2, "ms"}, {1e3, 1e3, 1, "us"},
        {0, 1, 0, "ns"},    {0, 0, 0, NULL},
    };

    return fsim_cli_format_duration(ns, units);
}

/* "+1.50 GiB", "-20.0 MiB", "0 B" */
char *
fsim_cmd_cuda_format_size_delta(uint64_t value, uint64_t reference)
{
    g_autofree char *size =
        fsim_format_size(value >= reference ? value - reference : reference - value);

    return g_strdup_printf("%s%s", value > reference ? "+" : value < reference ? "-" : "", size);
}

/* ---- JSON helpers -------------------------------------------------------------------------- */

void
fsim_cmd_cuda_json_add_u64(FsimJsonWriter *builder, const char *name, uint64_t value)
{
    fsim_cli_json_int(builder, name, (int64_t)value);
}

void
fsim_cmd_cuda_json_add_gpu(FsimJsonWriter *builder, const FsimCudaDriverInfo *info)
{
    g_autofree char *capability =
        g_strdup_printf("%d.%d", info->compute_major, info->compute_minor);

    fsim_cli_json_begin_object(builder, "gpu");
    fsim_cli_json_string(builder, "name", info->name);
    fsim_cli_json_int(builder, "ordinal", info->ordinal);
    fsim_cmd_cuda_json_add_u64(builder, "total_bytes", info->total_bytes);
    fsim_cmd_cuda_json_add_u64(builder, "granularity", info->granularity);
    fsim_cmd_cuda_json_add_u64(builder, "recommended_granularity", info->recommended_granularity);
    fsim_cli_json_string(builder, "compute_capability", capability);
    fsim_cli_json_int(builder, "driver_version", info->driver_version);
    fsim_cli_json_int(builder, "runtime_version", info->runtime_version);
    fsim_cli_json_bool(builder, "vmm_supported", info->vmm_supported);
    fsim_cli_json_bool(builder, "pools_supported", info->pools_supported);
    fsim_json_end_object(builder);
}

void
fsim_cmd_cuda_print_runs(const FsimTrace *trace, const FsimCudaDriverInfo *info, guint n,
                         void (*add_run)(FsimJsonWriter *builder, guint i, gpointer data),
                         gpointer data)
{
    g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
    fsim_cli_json_string(builder, "trace", fsim_trace_path(trace));
    fsim_cmd_cuda_json_add_gpu(builder, info);
    fsim_cli_json_begin_array(builder, "runs");
    for (guint i = 0; i < n; i++)
        add_run(builder, i, data);
    fsim_json_end_array(builder);
    fsim_cli_json_print(builder);
}

/* A latency as {count, total_ns, min_ns, mean_ns, p50_ns, p99_ns, max_ns, histogram}, where the
 * histogram lists [floor_ns, count] of the non-empty power-of-two buckets. */
void
fsim_cmd_cuda_json_add_latency(FsimJsonWriter *builder, const char *name,
                               const FsimLatency *latency, gint64 modelled_ns)
{
    fsim_cli_json_begin_object(builder, name);
    fsim_cmd_cuda_json_add_u64(builder, "count", latency->count);
    fsim_cmd_cuda_json_add_u64(builder, "total_ns", latency->total_ns);
    if (modelled_ns >= 0)
        fsim_cmd_cuda_json_add_u64(builder, "modelled_ns", (uint64_t)modelled_ns);
    fsim_cmd_cuda_json_add_u64(builder, "min_ns", latency->count != 0 ? latency->min_ns : 0);
    fsim_cli_json_double(builder, "mean_ns", fsim_latency_mean(latency));
    fsim_cmd_cuda_json_add_u64(builder, "p50_ns", fsim_latency_quantile(latency, 0.5));
    fsim_cmd_cuda_json_add_u64(builder, "p99_ns", fsim_latency_quantile(latency, 0.99));
    fsim_cmd_cuda_json_add_u64(builder, "max_ns", latency->max_ns);
    fsim_cli_json_begin_array(builder, "histogram");
    for (guint i = 0; i < FSIM_LATENCY_BUCKETS; i++) {
        if (latency->buckets[i] == 0)
            continue;
        fsim_json_begin_array(builder);
        fsim_json_add_int_value(builder, (gint64)fsim_latency_bucket_floor(i));
        fsim_json_add_int_value(builder, (gint64)latency->buckets[i]);
        fsim_json_end_array(builder);
    }
    fsim_json_end_array(builder);
    fsim_json_end_object(builder);
}
/* ---- info ---------------------------------------------------------------------------------- */

static int
cuda_info(int argc, char **argv)
{
    gint gpu = 0;
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"gpu", 0, 0, G_OPTION_ARG_INT, &gpu, "CUDA device ordinal (default 0)", "N"},
        FSIM_CLI_JSON_ENTRY(&json),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(FsimCudaDriver) driver = NULL;
    const FsimCudaDriverInfo *info;
    g_autofree char *total = NULL;
    g_autofree char *granularity = NULL;
    g_autofree char *recommended = NULL;
    GError *error = NULL;

    if (!fsim_cli_parse_args("cuda info", "- describe the GPU", entries, NULL, NULL, &argc, &argv))
        return FSIM_EXIT_USAGE;
    driver = fsim_cuda_driver_open(gpu, &error);
    if (driver == NULL)
        return fsim_cli_fail("cuda info", error);
    info = &driver->info;
    if (json) {
        g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
        fsim_cmd_cuda_json_add_gpu(builder, info);
        fsim_cli_json_print(builder);
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
/* ---- dispatch ------------------------------------------------------------------------------ */

int
fsim_cmd_cuda(int argc, char **argv)
{
    int status = fsim_cli_dispatch(cuda_commands, cuda_print_help, argc, argv);

    if (status >= 0)
        return status;
    return fsim_cli_usage_error("cuda", "unknown command '%s' (info, replay, native, calibrate)",
                                argv[1]);
}
