/* SPDX-License-Identifier: MIT */
/*
 * fragsim convert IN OUT [--format text|binary] [--trace-device N]: any trace to fragsim's text
 * format (gzip when OUT ends in .gz) or its binary format (the default when OUT ends in .fsb).  The
 * allocations alive at trace start (rebuilt from a snapshot's final state) are written first, at
 * the first event's time, so the trace frees what it allocates.  Private pools of that state are
 * created first (an empty scope holds the reference the pool had), and each allocation alive in
 * one is written inside a scope of it that is released at once, so the pools end with the
 * references they had.
 */
#include <glib.h>

#include "cli.h"

static gboolean
convert_write(FsimTraceWriter *writer, FsimEvent *ev, FsimEventKind kind, uint64_t id,
              uint64_t stream, GError **error)
{
    ev->kind = kind;
    ev->id = id;
    ev->stream = stream;
    return fsim_trace_writer_write(writer, ev, error);
}

/* The private pool of the segment holding @block (0 = default). */
static uint64_t
convert_block_pool(const FsimInitialState *state, const FsimSeedBlock *block)
{
    for (gsize i = 0; i < state->n_segments; i++) {
        const FsimSeedSegment *seg = &state->segments[i];

        if (seg->addr <= block->addr && block->addr < seg->addr + seg->size)
            return seg->pool_id;
    }
    return 0;
}

static gboolean
convert_has_pools(const FsimInitialState *state)
{
    for (gsize i = 0; i < state->n_segments; i++) {
        if (state->segments[i].pool_id != 0)
            return TRUE;
    }
    return FALSE;
}

/* The state's private pools, each opened and closed once on its first segment's stream. */
static gboolean
convert_seed_pools(const FsimInitialState *state, FsimTime time, FsimTraceWriter *writer,
                   GError **error)
{
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);

    for (gsize i = 0; i < state->n_segments; i++) {
        const FsimSeedSegment *seg = &state->segments[i];
        FsimEvent ev = {.time = time};

        if (seg->pool_id == 0 || g_hash_table_contains(seen, &seg->pool_id))
            continue;
        g_hash_table_add(seen, g_memdup2(&seg->pool_id, sizeof(seg->pool_id)));
        if (!convert_write(writer, &ev, FSIM_EV_POOL_BEGIN, seg->pool_id, seg->stream, error) ||
            !convert_write(writer, &ev, FSIM_EV_POOL_END, seg->pool_id, seg->stream, error))
            return FALSE;
    }
    return TRUE;
}

static gboolean
convert_seed(const FsimInitialState *state, FsimTime time, FsimTraceWriter *writer, GError **error)
{
    g_autofree char *note = g_strdup_printf(
        "%" G_GSIZE_FORMAT " allocations alive when recording began", state->n_blocks);

    if (!fsim_trace_writer_comment(writer, note, error) ||
        !convert_seed_pools(state, time, writer, error))
        return FALSE;
    for (gsize i = 0; i < state->n_blocks; i++) {
        const FsimSeedBlock *block = &state->blocks[i];
        uint64_t pool = convert_block_pool(state, block);
        FsimEvent seed = {0};

        seed.time = time;
        if (pool != 0 &&
            !convert_write(writer, &seed, FSIM_EV_POOL_BEGIN, pool, block->stream, error))
            return FALSE;
        seed.size = MAX(block->requested, 1);
        if (!convert_write(writer, &seed, FSIM_EV_ALLOC, block->id, block->stream, error))
            return FALSE;
        seed.size = 0;
        if (pool != 0 &&
            (!convert_write(writer, &seed, FSIM_EV_POOL_END, pool, block->stream, error) ||
             !convert_write(writer, &seed, FSIM_EV_POOL_RELEASE, pool, 0, error)))
            return FALSE;
        if (block->pending_free) {
            seed.flags = FSIM_EVF_DEFERRED;
            if (!convert_write(writer, &seed, FSIM_EV_FREE, block->id, block->stream, error))
                return FALSE;
            seed.flags = 0;
        }
    }
    return fsim_trace_writer_comment(writer, "the recorded trace", error);
}

static gboolean
convert_device(FsimTrace *trace, uint32_t device, FsimTraceWriter *writer, GError **error)
{
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, device, error);
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    gboolean seeded = state == NULL || (state->n_blocks == 0 && !convert_has_pools(state));
    GError *local_error = NULL;
    FsimEvent ev;

    if (stream == NULL)
        return FALSE;
    while (fsim_trace_stream_next(stream, &ev, &local_error)) {
        if (!seeded) {
            if (!convert_seed(state, ev.time, writer, error))
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
    g_autofree char *format = NULL;
    FsimTraceWriteFormat write_format = FSIM_TRACE_WRITE_AUTO;
    GOptionEntry entries[] = {
        {"format", 0, 0, G_OPTION_ARG_STRING, &format,
         "Output format: text or binary (default: binary when OUT ends in .fsb, else text)",
         "FORMAT"},
        {"trace-device", 0, 0, G_OPTION_ARG_INT, &trace_device,
         "Device to convert when the trace has several", "N"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceWriter) writer = NULL;
    g_autofree char *header = NULL;
    GError *error = NULL;
    const uint32_t *devices;
    gsize n_devices;
    uint32_t device;

    if (!fsim_cli_parse_args(
            "convert", "IN OUT - convert a trace to fragsim's text or binary format", entries,
            "IN: any trace fragsim reads (text, PyTorch snapshot, RMM log, .gz).\n"
            "OUT: a fragsim-trace v1 text file, gzip-compressed when it ends in .gz, or\n"
            "a fragsim-trace binary v1 file (--format binary, or OUT ending in .fsb).\n"
            "Stack frames and recorded allocator decisions are not written.",
            FSIM_CLI_OPERANDS, &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc != 3)
        return fsim_cli_usage_error("convert", "expected IN and OUT");
    if (g_strcmp0(format, "text") == 0)
        write_format = FSIM_TRACE_WRITE_TEXT;
    else if (g_strcmp0(format, "binary") == 0)
        write_format = FSIM_TRACE_WRITE_BINARY;
    else if (format != NULL)
        return fsim_cli_usage_error("convert", "unknown --format '%s' (valid: text, binary)",
                                    format);
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
    writer = fsim_trace_writer_open_format(argv[2], write_format, &error);
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
