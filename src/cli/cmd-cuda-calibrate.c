/* SPDX-License-Identifier: MIT */
/*
 * fragsim cuda calibrate: measure the driver calls' costs and write a device profile.
 */
#include <glib.h>

#include "cli.h"
#include "cmd-cuda.h"

static void
calibrate_json(const FsimCudaCalibration *cal, const FsimDeviceSpec *spec, const char *output)
{
    g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();

    fsim_cmd_cuda_json_add_gpu(builder, &cal->info);
    fsim_cli_json_string(builder, "profile", output);
    fsim_cmd_cuda_json_add_u64(builder, "free_bytes", cal->free_bytes);
    fsim_cmd_cuda_json_add_u64(builder, "observed_step", cal->observed_step);
    fsim_cli_json_member_array(builder, "steps", fsim_cmd_cuda_usage_step_members, cal->steps);
    fsim_cli_json_begin_array(builder, "series");
    for (int s = 0; s < FSIM_CUDA_SERIES_COUNT; s++) {
        const FsimCudaSeries *series = &cal->series[s];

        fsim_json_begin_object(builder);
        fsim_cli_json_string(builder, "name", series->name);
        fsim_cli_json_begin_array(builder, "points");
        for (guint i = 0; i < series->sizes->len; i++) {
            fsim_json_begin_array(builder);
            fsim_json_add_int_value(builder, (gint64)g_array_index(series->sizes, uint64_t, i));
            fsim_json_add_double_value(builder, g_array_index(series->median_ns, double, i));
            fsim_json_end_array(builder);
        }
        fsim_json_end_array(builder);
        fsim_cli_json_double(builder, "base_ns", series->fit.base);
        fsim_cli_json_double(builder, "per_gib_ns", series->fit.slope);
        fsim_cli_json_double(builder, "r2", series->fit.r2);
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
    fsim_cli_json_begin_object(builder, "costs");
    fsim_cli_json_members(builder, fsim_cli_device_costs_members, &spec->costs);
    fsim_json_end_object(builder);
    fsim_cli_json_print(builder);
}

static void
calibrate_print(const FsimCudaCalibration *cal, const FsimDeviceSpec *spec)
{
    static const char *const step_headers[] = {"cudaMalloc size", "count", "used growth",
                                               "per allocation"};
    static const char *const series_headers[] = {"call", "sizes", "base", "per GiB", "r2"};
    static const char *const cost_headers[] = {"cost", "calibrated", "default"};
    FsimDeviceCosts defaults = fsim_device_costs_default();
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
        base = fsim_cmd_cuda_format_ns(s->fit.base);
        slope = fsim_cmd_cuda_format_ns(s->fit.slope);
        fsim_table_add(series, s->name);
        fsim_table_addf(series, "%u", s->sizes->len);
        fsim_table_add(series, base);
        fsim_table_add(series, slope);
        fsim_table_addf(series, "%.3f", s->fit.r2);
    }
    fsim_table_print(series);
    g_print("\n");
    for (const FsimCliMember *cost = fsim_cli_device_costs_members; cost->name != NULL; cost++) {
        fsim_table_add(table, cost->name);
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, fsim_cli_member_u64(cost, &spec->costs));
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, fsim_cli_member_u64(cost, &defaults));
    }
    fsim_table_print(table);
}

int
fsim_cmd_cuda_calibrate(int argc, char **argv)
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
        FSIM_CLI_JSON_ENTRY(&json),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(FsimCudaDriver) driver = NULL;
    FsimCudaCalibrateOptions options;
    FsimCudaCalibration calibration;
    FsimDeviceSpec spec;
    GError *error = NULL;

    if (!fsim_cli_parse_args(
            "cuda calibrate", "- measure the GPU and write a device profile for -d", entries,
            "Measures cuMemGetAllocationGranularity, the used-memory step of cudaMalloc,\n"
            "and the cost of cudaMalloc, cudaFree, reserve, map and unmap across sizes;\n"
            "fits base + per-GiB costs by least squares (docs/cuda.md).\n"
            "Example: fragsim cuda calibrate -o gpu.ini && fragsim replay T -d gpu.ini",
            NULL, &argc, &argv))
        return FSIM_EXIT_USAGE;
    fsim_cuda_calibrate_options_init(&options);
    if (max_size_text != NULL && !fsim_parse_size(max_size_text, &options.max_size, NULL))
        return fsim_cli_usage_error("cuda calibrate", "--max-size '%s' is not a size",
                                    max_size_text);
    if (repeat < 0 || repeat > 1000)
        return fsim_cli_usage_error("cuda calibrate", "--repeat %d: expected 1 to 1000", repeat);
    if (repeat > 0)
        options.repeat = (guint)repeat;
    driver = fsim_cuda_driver_open(gpu, &error);
    if (driver == NULL)
        return fsim_cli_fail("cuda calibrate", error);
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
