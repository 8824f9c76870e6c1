/* SPDX-License-Identifier: MIT */
/*
 * fragsim convert IN OUT [--trace-device N]: any trace to fragsim's text format (gzip when OUT
 * ends in .gz).  The allocations alive at trace start (rebuilt from a snapshot's final state)
 * are written first, at the first event's time, so the text trace frees what it allocates.
 */
#include <glib.h>

#include "cli.h"

static gboolean
convert_device(FsimTrace *trace, uint32_t device, FsimTraceWriter *writer, GError **error)
{
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, device, error);
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    gboolean seeded = state == NULL || state->n_blocks == 0;
    GError *local_error = NULL;
    FsimEvent ev;

    if (stream == NULL)
        return FALSE;
    while (fsim_trace_stream_next(stream, &ev, &local_error)) {
        if (!seeded) {
            g_autofree char *note = g_strdup_printf(
                "%" G_GSIZE_FORMAT " allocations alive when recording began", state->n_blocks);

            if (!fsim_trace_writer_comment(writer, note, error))
                return FALSE;
            for (gsize i = 0; i < state->n_blocks; i++) {
                FsimEvent seed = {0};

                seed.time = ev.time;
                seed.kind = FSIM_EV_ALLOC;
                seed.id = state->blocks[i].id;
                seed.size = MAX(state->blocks[i].requested, 1);
                seed.stream = state->blocks[i].stream;
                if (!fsim_trace_writer_write(writer, &seed, error))
                    return FALSE;
                if (state->blocks[i].pending_free) {
                    seed.kind = FSIM_EV_FREE;
                    seed.flags = FSIM_EVF_DEFERRED;
                    if (!fsim_trace_writer_write(writer, &seed, error))
                        return FALSE;
                }
            }
            if (!fsim_trace_writer_comment(writer, "the recorded trace", error))
                return FALSE;
            seeded = TRUE;
        }
        if (!fsim_trace_writer_write(writer, &ev, error))
            return FALSE;
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    return TRUE;
}

int
fsim_cmd_convert(int argc, char **argv)
{
    gint trace_device = -1;
    GOptionEntry entries[] = {
        {"trace-device", 0, 0, G_OPTION_ARG_INT, &trace_device,
         "Device to convert when the trace has several", "N"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("IN OUT - convert a trace to fragsim's text format");
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceWriter) writer = NULL;
    g_autofree char *header = NULL;
    GError *error = NULL;
    const uint32_t *devices;
    gsize n_devices;
    uint32_t device;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context, "IN: any trace fragsim reads (text, PyTorch snapshot, RMM log, .gz).\n"
                 "OUT: a fragsim-trace v1 text file, gzip-compressed when it ends in .gz.\n"
                 "Stack frames and recorded allocator decisions are not written.");
    if (!fsim_cli_parse(context, "convert", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc != 3)
        return fsim_cli_usage_error("convert", "expected IN and OUT");
    trace = fsim_trace_open(argv[1], &error);
    if (trace == NULL)
        return fsim_cli_fail("convert", error);
    devices = fsim_trace_devices(trace, &n_devices);
    if (trace_device >= 0) {
        if (!fsim_cli_trace_has_device(trace, (uint32_t)trace_device))
            return fsim_cli_usage_error("convert", "%s has no events on device %d", argv[1],
                                        trace_device);
        device = (uint32_t)trace_device;
    } else if (n_devices > 1) {
        g_autoptr(GString) list = g_string_new(NULL);

        for (gsize i = 0; i < n_devices; i++)
            g_string_append_printf(list, "%s%u", i ? ", " : "", devices[i]);
        return fsim_cli_usage_error("convert",
                                    "%s has events on several devices (%s): choose one with "
                                    "--trace-device",
                                    argv[1], list->str);
    } else if (n_devices == 1) {
        device = devices[0];
    } else {
        return fsim_cli_fail("convert", g_error_new(FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_EMPTY,
                                                    "%s: the trace has no events", argv[1]));
    }
    writer = fsim_trace_writer_open(argv[2], &error);
    if (writer == NULL)
        return fsim_cli_fail("convert", error);
    header = g_strdup_printf("converted by fragsim %s from %s (%s), device %u", FSIM_VERSION,
                             argv[1], fsim_trace_format_name(trace), device);
    if (!fsim_trace_writer_comment(writer, header, &error) ||
        !convert_device(trace, device, writer, &error) ||
        !fsim_trace_writer_close(g_steal_pointer(&writer), &error))
        return fsim_cli_fail("convert", error);
    return FSIM_EXIT_OK;
}
