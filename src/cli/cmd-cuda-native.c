/* SPDX-License-Identifier: MIT */
/*
 * fragsim cuda native: a trace through cudaMalloc and cudaMallocAsync themselves.
 */
#include <glib.h>

#include <string.h>

#include "cli.h"
#include "cmd-cuda.h"

/* Run @i of @data (a GArray of FsimCudaNativeResult) as JSON. */
static void
native_json_run(FsimJsonWriter *builder, guint i, gpointer data)
{
    const FsimCudaNativeResult *r = &g_array_index((GArray *)data, FsimCudaNativeResult, i);

    fsim_json_begin_object(builder);
    fsim_cli_json_string(builder, "mode", fsim_cuda_native_mode_name(r->mode));
    fsim_cli_json_members(builder, fsim_cmd_cuda_native_members, r);
    fsim_cmd_cuda_json_add_latency(builder, "alloc", &r->alloc, -1);
    fsim_cmd_cuda_json_add_latency(builder, "free", &r->dealloc, -1);
    fsim_cmd_cuda_json_add_latency(builder, "touch", &r->touch, -1);
    fsim_json_end_object(builder);
}

/* --mode: the modes to run, into @modes; FALSE for a text that names none. */
static gboolean
native_modes(const char *text, FsimCudaNativeMode modes[2], guint *n_modes)
{
    *n_modes = 0;
    if (text == NULL || strcmp(text, "both") == 0) {
        modes[(*n_modes)++] = FSIM_CUDA_NATIVE_MALLOC;
        modes[(*n_modes)++] = FSIM_CUDA_NATIVE_ASYNC;
    } else if (strcmp(text, "malloc") == 0) {
        modes[(*n_modes)++] = FSIM_CUDA_NATIVE_MALLOC;
    } else if (strcmp(text, "async") == 0) {
        modes[(*n_modes)++] = FSIM_CUDA_NATIVE_ASYNC;
    } else {
        return FALSE;
    }
    return TRUE;
}

/* The @results of @trace on @driver's GPU as text: one table per trace device. */
static void
native_print_text(FsimTrace *trace, const FsimCudaDriver *driver, GArray *results)
{
    static const char *const headers[] = {
        "mode",       "peak requested", "peak reserved", "GPU used", "OOMs",
        "alloc time", "free time",      "alloc p50",     "free p50",
    };
    g_autoptr(FsimTable) table = NULL;

    g_print("%s (%s) on %s\n", fsim_trace_path(trace), fsim_trace_format_name(trace),
            driver->info.name);
    for (guint i = 0; i < results->len; i++) {
        const FsimCudaNativeResult *r = &g_array_index(results, FsimCudaNativeResult, i);
        g_autofree char *requested = fsim_format_size(r->peak_requested_bytes);
        g_autofree char *reserved = fsim_format_size(r->peak_reserved_bytes);
        g_autofree char *used = fsim_format_size(r->peak_used_bytes);
        g_autofree char *alloc = fsim_cmd_cuda_format_ns((double)r->alloc.total_ns);
        g_autofree char *dealloc = fsim_cmd_cuda_format_ns((double)r->dealloc.total_ns);
        g_autofree char *alloc_p50 =
            fsim_cmd_cuda_format_ns((double)fsim_latency_quantile(&r->alloc, 0.5));
        g_autofree char *free_p50 =
            fsim_cmd_cuda_format_ns((double)fsim_latency_quantile(&r->dealloc, 0.5));

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
}

int
fsim_cmd_cuda_native(int argc, char **argv)
{
    g_autofree char *mode_text = NULL;
    gint trace_device = -1;
    gint gpu = 0;
    gboolean no_touch = FALSE;
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"mode", 0, 0, G_OPTION_ARG_STRING, &mode_text,
         "malloc (cudaMalloc per tensor), async (cudaMallocAsync pool) or both (default)", "MODE"},
        FSIM_CLI_REPLAY_DEVICE_ENTRY(&trace_device),
        {"gpu", 0, 0, G_OPTION_ARG_INT, &gpu, "CUDA device ordinal to run on (default 0)", "N"},
        {"no-touch", 0, 0, G_OPTION_ARG_NONE, &no_touch,
         "Do not write each allocation (cudaMemset)", NULL},
        FSIM_CLI_JSON_ENTRY(&json),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GArray) devices = NULL;
    g_autoptr(FsimCudaDriver) driver = NULL;
    g_autoptr(GArray) results = g_array_new(FALSE, TRUE, sizeof(FsimCudaNativeResult));
    FsimCudaNativeMode modes[2];
    guint n_modes;
    GError *error = NULL;
    int status = FSIM_EXIT_OK;

    if (!fsim_cli_parse_args(
            "cuda native", "TRACE - replay a trace through the CUDA driver's allocators", entries,
            "Every stream of the trace is served on one CUDA stream.  Memory held at trace\n"
            "start is allocated first.  Peaks: requested (the program), reserved (the pool's\n"
            "high-water mark; for cudaMalloc, the used memory), GPU used (cudaMemGetInfo).",
            "TRACE", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (!native_modes(mode_text, modes, &n_modes))
        return fsim_cli_usage_error("cuda native", "--mode '%s': expected malloc, async or both",
                                    mode_text);
    trace = fsim_trace_open(argv[1], &error);
    if (trace == NULL)
        return fsim_cli_fail("cuda native", error);
    driver = fsim_cmd_cuda_open_trace("cuda native", trace, trace_device, gpu, &devices, &status);
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
        fsim_cmd_cuda_print_runs(trace, &driver->info, results->len, native_json_run, results);
        return FSIM_EXIT_OK;
    }
    native_print_text(trace, driver, results);
    return FSIM_EXIT_OK;
}
