/* SPDX-License-Identifier: MIT */
/*
 * fragsim info TRACE [--json]: what a trace holds, per device.
 */
#include <glib.h>

#include "cli.h"

static void
info_print_json(const FsimTraceInfo *info)
{
    g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
    fsim_cli_json_string(builder, "path", info->path);
    fsim_cli_json_string(builder, "format", info->format);
    fsim_cli_json_begin_array(builder, "devices");
    for (guint i = 0; i < info->devices->len; i++) {
        const FsimTraceDeviceInfo *dev = &g_array_index(info->devices, FsimTraceDeviceInfo, i);

        fsim_json_begin_object(builder);
        fsim_cli_json_int(builder, "device", dev->device);
        fsim_cli_json_int(builder, "events", (gint64)dev->events);
        fsim_cli_json_begin_object(builder, "actions");
        for (guint a = 0; a < dev->actions->len; a++) {
            const FsimTraceActionCount *action =
                &g_array_index(dev->actions, FsimTraceActionCount, a);

            fsim_cli_json_int(builder, action->name, (gint64)action->count);
        }
        fsim_json_end_object(builder);
        fsim_cli_json_members(builder, fsim_cli_trace_device_members, dev);
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
    fsim_json_set_member_name(builder, "allocator_settings");
    if (info->settings == NULL) {
        fsim_json_add_null_value(builder);
    } else {
        fsim_json_begin_object(builder);
        for (guint i = 0; i + 1 < info->settings->len; i += 2) {
            fsim_cli_json_string(builder, g_ptr_array_index(info->settings, i),
                                 g_ptr_array_index(info->settings, i + 1));
        }
        fsim_json_end_object(builder);
    }
    fsim_cli_json_string(builder, "alloc_conf", info->alloc_conf);
    fsim_cli_json_int(builder, "annotations", (gint64)info->annotations);
    fsim_cli_json_print(builder);
}

static void
info_print_text(const FsimTraceInfo *info)
{
    g_print("%s: %s trace, %u device%s with events\n", info->path, info->format, info->devices->len,
            info->devices->len == 1 ? "" : "s");
    if (info->alloc_conf != NULL && *info->alloc_conf != '\0')
        g_print("allocator settings: %s\n", info->alloc_conf);
    if (info->annotations != 0)
        g_print("annotations: %" G_GUINT64_FORMAT "\n", info->annotations);
    for (guint i = 0; i < info->devices->len; i++) {
        const FsimTraceDeviceInfo *dev = &g_array_index(info->devices, FsimTraceDeviceInfo, i);
        g_autofree char *reserved = fsim_format_size(dev->reserved_bytes);
        g_autofree char *peak = fsim_format_size(dev->peak_requested_bytes);

        g_print("device %u: %" G_GUINT64_FORMAT " events, %" G_GUINT64_FORMAT
                " streams, peak requested %s",
                dev->device, dev->events, dev->streams, peak);
        if (dev->segments != 0)
            g_print(", final state %" G_GUINT64_FORMAT " segments (%s reserved)", dev->segments,
                    reserved);
        g_print("\n");
        for (guint a = 0; a < dev->actions->len; a++) {
            const FsimTraceActionCount *action =
                &g_array_index(dev->actions, FsimTraceActionCount, a);

            g_print("  %-16s %" G_GUINT64_FORMAT "\n", action->name, action->count);
        }
    }
}

int
fsim_cmd_info(int argc, char **argv)
{
    gboolean json;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceInfo) info = NULL;
    GError *error = NULL;

    if (!fsim_cli_parse_json_only(
            "info", "TRACE - describe a trace",
            "Per device: events, counts per action, streams, and for snapshots the\n"
            "segments and reserved bytes of the final state.",
            "TRACE", &argc, &argv, &json))
        return FSIM_EXIT_USAGE;
    trace = fsim_trace_open_without_stacks(argv[1], &error);
    if (trace == NULL)
        return fsim_cli_fail("info", error);
    info = fsim_trace_describe(trace, &error);
    if (info == NULL)
        return fsim_cli_fail("info", error);
    if (json)
        info_print_json(info);
    else
        info_print_text(info);
    return FSIM_EXIT_OK;
}
