/* SPDX-License-Identifier: MIT */
/*
 * fragsim devices [--json]: the device presets that -d accepts.
 */
#include <glib.h>

#include "cli.h"

int
fsim_cmd_devices(int argc, char **argv)
{
    gboolean json;
    gsize n;
    const FsimDeviceSpec *presets = fsim_device_presets(&n);

    if (!fsim_cli_parse_json_only(
            "devices", "- list device presets",
            "Usable capacity is the memory as sold minus what the CUDA context keeps.\n"
            "-d also takes a size (80GiB, 24GB, plain bytes) or a calibration profile.\n"
            "The default device is " FSIM_DEVICE_DEFAULT ".",
            NULL, &argc, &argv, &json))
        return FSIM_EXIT_USAGE;
    if (json) {
        g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
        fsim_cli_json_begin_array(builder, "devices");
        for (gsize i = 0; i < n; i++) {
            fsim_json_begin_object(builder);
            fsim_cli_json_string(builder, "name", presets[i].name);
            fsim_cli_json_string(builder, "description", presets[i].description);
            fsim_cli_json_int(builder, "total_bytes", (gint64)presets[i].total_bytes);
            fsim_cli_json_int(builder, "capacity_bytes", (gint64)presets[i].capacity_bytes);
            fsim_cli_json_int(builder, "granularity_bytes", (gint64)presets[i].granularity);
            fsim_cli_json_begin_object(builder, "costs_ns");
            fsim_cli_json_members(builder, fsim_cli_device_costs_members, &presets[i].costs);
            fsim_json_end_object(builder);
            fsim_json_end_object(builder);
        }
        fsim_json_end_array(builder);
        fsim_cli_json_print(builder);
        return FSIM_EXIT_OK;
    }
    {
        static const char *const headers[] = {"name", "device", "memory", "usable"};
        g_autoptr(FsimTable) table = fsim_table_new(4, headers);

        for (gsize i = 0; i < n; i++) {
            g_autofree char *total = fsim_format_size(presets[i].total_bytes);
            g_autofree char *usable = fsim_format_size(presets[i].capacity_bytes);

            fsim_table_addf(table, "%s%s", presets[i].name,
                            g_str_equal(presets[i].name, FSIM_DEVICE_DEFAULT) ? " (default)" : "");
            fsim_table_add(table, presets[i].description);
            fsim_table_add(table, total);
            fsim_table_add(table, usable);
        }
        fsim_table_print(table);
    }
    return FSIM_EXIT_OK;
}
