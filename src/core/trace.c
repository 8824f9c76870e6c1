/* SPDX-License-Identifier: MIT */
/*
 * Trace files: format detection, transparent gzip, the base of opened traces, the generic
 * description behind `fragsim info`, and the text-format writer.
 */
/* realpath(), O_CLOEXEC */
#define _XOPEN_SOURCE 700

#include "fragsim/trace.h"

#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <gio/gunixinputstream.h>
#include <gio/gunixoutputstream.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fragsim/owned.h"

#include "core/live-table.h"
#include "core/stacks.h"
#include "readers/binary-format.h"
#include "readers/readers.h"

static const FsimTraceFormat *const all_formats[] = {
    /* before text: both magics start with `fragsim-trace` */
    &fsim_trace_format_binary,
    &fsim_trace_format_text,
    &fsim_trace_format_torch,
    &fsim_trace_format_rmm,
};

const FsimTraceFormat *const *
fsim_trace_formats(gsize *n)
{
    *n = G_N_ELEMENTS(all_formats);
    return all_formats;
}

/* Events decoded at once by formats with stream_read(): small enough to stay in L1. */
#define TRACE_BATCH_EVENTS 128

/* ---- input --------------------------------------------------------------------------------- */

#define GZIP_MAGIC_0 0x1f
#define GZIP_MAGIC_1 0x8b

/* The file at @path (a file name, or a file: URI) for reading, with the message GIO's g_file_read()
 * gave when it cannot be (GFile itself would bring in GIO's virtual file systems, about half of
 * fragsim's start-up once GIO is linked statically). */
static GInputStream *
input_open_file(const char *path, GError **error)
{
    g_autofree char *filename = NULL;
    g_autofree char *display = NULL;
    struct stat st;
    int fd;
    int saved;

    if (g_str_has_prefix(path, "file:"))
        filename = g_filename_from_uri(path, NULL, NULL);
    if (filename == NULL)
        filename = g_canonicalize_filename(path, NULL);
    fd = g_open(filename, O_RDONLY | O_CLOEXEC, 0);
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)))
        return g_unix_input_stream_new(fd, TRUE);
    saved = fd < 0 ? errno : EISDIR;
    if (fd >= 0)
        (void)g_close(fd, NULL);
    display = g_filename_display_name(filename);
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: Error opening file %s: %s", path, display,
                g_strerror(saved));
    return NULL;
}

GInputStream *
fsim_input_open(const char *path, GError **error)
{
    g_autoptr(GInputStream) raw = NULL;
    g_autoptr(GBufferedInputStream) buffered = NULL;
    g_autoptr(GError) local_error = NULL;
    const guint8 *head;
    gsize head_len = 0;

    if (strcmp(path, "-") == 0) {
        raw = g_unix_input_stream_new(0, FALSE);
    } else {
        raw = input_open_file(path, error);
        if (raw == NULL)
            return NULL;
    }
    buffered = G_BUFFERED_INPUT_STREAM(g_buffered_input_stream_new_sized(raw, 1 << 16));
    if (g_buffered_input_stream_fill(buffered, 2, NULL, &local_error) < 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", path, local_error->message);
        return NULL;
    }
    head = g_buffered_input_stream_peek_buffer(buffered, &head_len);
    if (head_len >= 2 && head[0] == GZIP_MAGIC_0 && head[1] == GZIP_MAGIC_1) {
        g_autoptr(GConverter) decompressor = fsim_gzip_decompressor_new();
        g_autoptr(GInputStream) converted =
            g_converter_input_stream_new(G_INPUT_STREAM(buffered), decompressor);

        return g_buffered_input_stream_new_sized(converted, 1 << 16);
    }
    return G_INPUT_STREAM(g_steal_pointer(&buffered));
}

gboolean
fsim_input_read_all(const char *path, gsize max_bytes, GBytes **out, GError **error)
{
    g_autoptr(GInputStream) in = fsim_input_open(path, error);
    g_autoptr(GByteArray) data = NULL;
    g_autoptr(GError) local_error = NULL;

    if (in == NULL)
        return FALSE;
    data = g_byte_array_new();
    for (;;) {
        guint8 chunk[1 << 16];
        gssize n = g_input_stream_read(in, chunk, sizeof(chunk), NULL, &local_error);

        if (n < 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", path, local_error->message);
            return FALSE;
        }
        if (n == 0)
            break;
        if (max_bytes != 0 && data->len + (gsize)n > max_bytes) {
            g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT,
                        "%s: larger than %" G_GSIZE_FORMAT " bytes once decompressed", path,
                        max_bytes);
            return FALSE;
        }
        g_byte_array_append(data, chunk, (guint)n);
    }
    *out = g_byte_array_free_to_bytes(g_steal_pointer(&data));
    return TRUE;
}

/* ---- the base ------------------------------------------------------------------------------ */

static void
initial_state_free(gpointer data)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimInitialState, segments, g_free),
                                      FSIM_OWNED(FsimInitialState, blocks, g_free)};

    fsim_owned_free(data, owned, G_N_ELEMENTS(owned));
}

static void
outcomes_free(gpointer data)
{
    if (data != NULL)
        g_array_unref(data);
}

void
fsim_trace_init(FsimTrace *trace, const FsimTraceFormat *format, const char *path)
{
    trace->format = format;
    trace->path = g_strdup(path);
    trace->devices = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    trace->states = g_ptr_array_new_with_free_func(initial_state_free);
    trace->outcomes = g_ptr_array_new_with_free_func(outcomes_free);
}

void
fsim_trace_add_device(FsimTrace *trace, uint32_t device)
{
    guint i;

    for (i = 0; i < trace->devices->len; i++) {
        uint32_t d = g_array_index(trace->devices, uint32_t, i);

        if (d == device)
            return;
        if (d > device)
            break;
    }
    g_array_insert_val(trace->devices, i, device);
}

static void
ptr_array_ensure(GPtrArray *array, guint len)
{
    if (array->len < len)
        g_ptr_array_set_size(array, (gint)len);
}

void
fsim_trace_set_initial_state(FsimTrace *trace, uint32_t device, FsimInitialState *state)
{
    ptr_array_ensure(trace->states, device + 1);
    initial_state_free(trace->states->pdata[device]);
    trace->states->pdata[device] = state;
}

void
fsim_trace_set_outcomes(FsimTrace *trace, uint32_t device, GArray *outcomes)
{
    ptr_array_ensure(trace->outcomes, device + 1);
    outcomes_free(trace->outcomes->pdata[device]);
    trace->outcomes->pdata[device] = outcomes;
}

/* The first bytes of the regular file at @path into @head (@size bytes of room), their number
 * in *@len, read straight from the file; FALSE where they must come through fsim_input_open()
 * instead: a gzip-compressed file (whose head is its decompressed bytes'), or any failure (its
 * message is fsim_input_open()'s).  (A stream with its 64 KiB buffer, for the few hundred bytes
 * the formats' probes look at, cost a fresh buffer's pages and a copy of them at each start.) */
static gboolean
head_read_plain(const char *path, guint8 *head, gsize size, gsize *len)
{
    int fd = g_open(path, O_RDONLY | O_CLOEXEC, 0);
    gboolean failed = FALSE;
    gsize n = 0;

    if (fd < 0)
        return FALSE;
    while (n < size) {
        ssize_t got = read(fd, head + n, size - n);

        if (got < 0 && errno == EINTR)
            continue;
        failed = got < 0; /* (the stream reports it) */
        if (got <= 0)
            break;
        n += (gsize)got;
    }
    (void)g_close(fd, NULL);
    if (failed || (n >= 2 && head[0] == GZIP_MAGIC_0 && head[1] == GZIP_MAGIC_1))
        return FALSE;
    *len = n;
    return TRUE;
}

FsimTrace *
fsim_trace_open(const char *path, GError **error)
{
    g_autoptr(GInputStream) in = NULL;
    g_autoptr(GError) local_error = NULL;
    guint8 head[512];
    gsize head_len = 0;
    GStatBuf st;
    gboolean stat_ok;

    g_return_val_if_fail(path != NULL, NULL);
    if (strcmp(path, "-") == 0) {
        /* Streams are re-opened (one pass per device or per command), which a pipe cannot. */
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "reading a trace from standard input is not supported: give a file "
                    "(gzip-compressed files are read directly)");
        return NULL;
    }
    if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: is a directory", path);
        return NULL;
    }
    stat_ok = g_stat(path, &st) == 0;
    if (stat_ok && !S_ISREG(st.st_mode)) {
        /* a pipe (/dev/stdin, a process substitution), a socket or a device: the first pass
         * would consume what the next one needs */
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "%s: not a regular file (a pipe?): a trace is read more than once, so give a "
                    "file (gzip-compressed files are read directly)",
                    path);
        return NULL;
    }
    if (!(stat_ok && head_read_plain(path, head, sizeof(head), &head_len))) {
        in = fsim_input_open(path, error);
        if (in == NULL)
            return NULL;
        if (!g_input_stream_read_all(in, head, sizeof(head), &head_len, NULL, &local_error)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", path, local_error->message);
            return NULL;
        }
        g_clear_object(&in);
    }
    if (head_len == 0) {
        g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_EMPTY, "%s: the file is empty", path);
        return NULL;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(all_formats); i++) {
        if (all_formats[i]->probe(head, head_len))
            return all_formats[i]->open(path, error);
    }
    g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_HEADER,
                "%s:1: not a trace fragsim can read (expected a 'fragsim-trace v1' text trace, a "
                "'fragsim-trace binary v1' trace, a PyTorch memory snapshot pickle or an RMM log)",
                path);
    return NULL;
}

/* Set while fsim_trace_open_without_stacks() opens a trace in this thread. */
static _Thread_local gboolean opening_without_stacks;

FsimTrace *
fsim_trace_open_without_stacks(const char *path, GError **error)
{
    FsimTrace *trace;

    opening_without_stacks = TRUE;
    trace = fsim_trace_open(path, error);
    opening_without_stacks = FALSE;
    return trace;
}

gboolean
fsim_trace_opening_wants_stacks(void)
{
    return !opening_without_stacks;
}

void
fsim_trace_close(FsimTrace *trace)
{
    static const FsimOwned owned[] = {
        FSIM_OWNED(FsimTrace, path, g_free),
        FSIM_OWNED(FsimTrace, devices, g_array_unref),
        FSIM_OWNED(FsimTrace, states, g_ptr_array_unref),
        FSIM_OWNED(FsimTrace, outcomes, g_ptr_array_unref),
        FSIM_OWNED(FsimTrace, settings, g_ptr_array_unref),
        FSIM_OWNED(FsimTrace, alloc_conf, g_free),
        FSIM_OWNED(FsimTrace, stacks, fsim_stack_table_free),
    };

    if (trace == NULL)
        return;
    fsim_owned_clear(trace, owned, G_N_ELEMENTS(owned));
    trace->format->close(trace);
}

const char *
fsim_trace_path(const FsimTrace *trace)
{
    return trace->path;
}

const char *
fsim_trace_format_name(const FsimTrace *trace)
{
    return trace->format->name;
}

const uint32_t *
fsim_trace_devices(const FsimTrace *trace, gsize *n)
{
    *n = trace->devices->len;
    return (const uint32_t *)(void *)trace->devices->data;
}

const FsimInitialState *
fsim_trace_initial_state(const FsimTrace *trace, uint32_t device)
{
    if (device >= trace->states->len)
        return NULL;
    return trace->states->pdata[device];
}

const FsimOutcome *
fsim_trace_outcomes(const FsimTrace *trace, uint32_t device, gsize *n)
{
    GArray *outcomes = device < trace->outcomes->len ? trace->outcomes->pdata[device] : NULL;

    *n = outcomes != NULL ? outcomes->len : 0;
    return outcomes != NULL ? (const FsimOutcome *)(void *)outcomes->data : NULL;
}

uint64_t
fsim_trace_recorded_capacity(const FsimTrace *trace, uint32_t device, gboolean *from_oom)
{
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    gsize n = 0;
    const FsimOutcome *outcomes = fsim_trace_outcomes(trace, device, &n);
    uint64_t reserved = 0;
    uint64_t peak;

    for (gsize i = 0; state != NULL && i < state->n_segments; i++)
        reserved += state->segments[i].size;
    peak = reserved;
    if (from_oom != NULL)
        *from_oom = FALSE;
    for (gsize i = 0; i < n; i++) {
        switch (outcomes[i].kind) {
        case FSIM_OUTCOME_SEGMENT_ALLOC:
        case FSIM_OUTCOME_SEGMENT_MAP:
            reserved += outcomes[i].size;
            break;
        case FSIM_OUTCOME_SEGMENT_FREE:
        case FSIM_OUTCOME_SEGMENT_UNMAP:
            reserved -= MIN(reserved, outcomes[i].size);
            break;
        case FSIM_OUTCOME_OOM:
        default:
            if (from_oom != NULL)
                *from_oom = TRUE;
            return reserved + outcomes[i].device_free;
        }
        peak = MAX(peak, reserved);
    }
    return peak;
}

const char *
fsim_trace_alloc_conf(const FsimTrace *trace)
{
    return trace->alloc_conf;
}

FsimTraceStream *
fsim_trace_stream_open(FsimTrace *trace, uint32_t device, GError **error)
{
    FsimTraceStream *stream;
    gboolean known = FALSE;

    for (guint i = 0; i < trace->devices->len; i++)
        known |= g_array_index(trace->devices, uint32_t, i) == device;
    if (!known) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s: the trace has no device %u",
                    trace->path, device);
        return NULL;
    }
    stream = trace->format->stream_open(trace, device, error);
    if (stream != NULL) {
        stream->trace = trace;
        stream->device = device;
        if (trace->format->stream_read != NULL)
            stream->batch = g_new(FsimEvent, TRACE_BATCH_EVENTS);
    }
    return stream;
}

gboolean
fsim_trace_stream_refill(FsimTraceStream *stream, FsimEvent *ev, GError **error)
{
    if (stream->batch == NULL)
        return stream->trace->format->stream_next(stream, ev, error);
    stream->batch_pos = 0;
    stream->batch_len =
        stream->trace->format->stream_read(stream, stream->batch, TRACE_BATCH_EVENTS, error);
    if (stream->batch_len == 0)
        return FALSE;
    *ev = stream->batch[stream->batch_pos++];
    return TRUE;
}

gsize
fsim_trace_stream_batch(FsimTraceStream *stream, const FsimEvent **evs, GError **error)
{
    gsize n;

    if (stream->batch == NULL) {
        if (!stream->trace->format->stream_next(stream, &stream->single, error))
            return 0;
        *evs = &stream->single;
        return 1;
    }
    if (stream->batch_pos == stream->batch_len) {
        stream->batch_pos = 0;
        stream->batch_len =
            stream->trace->format->stream_read(stream, stream->batch, TRACE_BATCH_EVENTS, error);
    }
    *evs = stream->batch + stream->batch_pos;
    n = stream->batch_len - stream->batch_pos;
    stream->batch_pos = stream->batch_len;
    return n;
}

void
fsim_trace_stream_close(FsimTraceStream *stream)
{
    if (stream == NULL)
        return;
    g_clear_pointer(&stream->batch, g_free);
    stream->trace->format->stream_close(stream);
}

/* ---- description --------------------------------------------------------------------------- */

static void
device_info_clear(gpointer data)
{
    FsimTraceDeviceInfo *dev = data;

    g_clear_pointer(&dev->actions, g_array_unref);
}

static void
action_count_clear(gpointer data)
{
    FsimTraceActionCount *action = data;

    g_clear_pointer(&action->name, g_free);
}

void
fsim_trace_info_free(FsimTraceInfo *info)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimTraceInfo, path, g_free),
                                      FSIM_OWNED(FsimTraceInfo, format, g_free),
                                      FSIM_OWNED(FsimTraceInfo, devices, g_array_unref),
                                      FSIM_OWNED(FsimTraceInfo, settings, g_ptr_array_unref),
                                      FSIM_OWNED(FsimTraceInfo, alloc_conf, g_free)};

    fsim_owned_free(info, owned, G_N_ELEMENTS(owned));
}

FsimTraceDeviceInfo *
fsim_trace_info_device(FsimTraceInfo *info, uint32_t device)
{
    FsimTraceDeviceInfo fresh = {0};
    guint i;

    for (i = 0; i < info->devices->len; i++) {
        FsimTraceDeviceInfo *dev = &g_array_index(info->devices, FsimTraceDeviceInfo, i);

        if (dev->device == device)
            return dev;
        if (dev->device > device)
            break;
    }
    fresh.device = device;
    fresh.actions = g_array_new(FALSE, FALSE, sizeof(FsimTraceActionCount));
    g_array_set_clear_func(fresh.actions, action_count_clear);
    g_array_insert_val(info->devices, i, fresh);
    return &g_array_index(info->devices, FsimTraceDeviceInfo, i);
}

void
fsim_trace_info_count(FsimTraceDeviceInfo *dev, const char *name, uint64_t count)
{
    FsimTraceActionCount fresh;
    guint i;

    for (i = 0; i < dev->actions->len; i++) {
        FsimTraceActionCount *action = &g_array_index(dev->actions, FsimTraceActionCount, i);
        int cmp = strcmp(action->name, name);

        if (cmp == 0) {
            action->count += count;
            return;
        }
        if (cmp > 0)
            break;
    }
    fresh.name = g_strdup(name);
    fresh.count = count;
    g_array_insert_val(dev->actions, i, fresh);
}

/* The generic part: read every stream once and count.  When the format described itself,
 * its own counts of events and actions (in its own vocabulary) are kept. */
/* Notes @id as live with a request of @size (replacing what an id allocated twice had). */
static void
describe_set_live(FsimLiveTable *live, uint64_t id, uint64_t size)
{
    gboolean inserted;

    fsim_live_table_insert_or_find(live, id, &inserted)->requested = size;
}

static gboolean
describe_streams(FsimTrace *trace, FsimTraceInfo *info, gboolean format_counts, GError **error)
{
    for (guint d = 0; d < trace->devices->len; d++) {
        uint32_t device = g_array_index(trace->devices, uint32_t, d);
        FsimTraceDeviceInfo *dev = fsim_trace_info_device(info, device);
        g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, device, error);
        g_autoptr(GHashTable) streams =
            g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
        FsimLiveTable live; /* id -> its request (FsimLiveEntry.requested) */
        uint64_t counts[FSIM_EV_KIND_COUNT] = {0};
        const FsimInitialState *state = fsim_trace_initial_state(trace, device);
        uint64_t requested = 0;
        gboolean first = TRUE;
        FsimTime first_time = 0;
        FsimTime last_time = 0;
        FsimEvent ev;
        GError *local_error = NULL;

        if (stream == NULL)
            return FALSE;
        fsim_live_table_init(&live);
        /* What was alive when recording began counts towards the peak. */
        for (gsize i = 0; state != NULL && i < state->n_blocks; i++) {
            if (!state->blocks[i].pending_free) {
                requested += state->blocks[i].requested;
                describe_set_live(&live, state->blocks[i].id, state->blocks[i].requested);
            }
        }
        dev->peak_requested_bytes = requested;
        while (fsim_trace_stream_next(stream, &ev, &local_error)) {
            if (first) {
                first_time = ev.time;
                first = FALSE;
            }
            last_time = ev.time;
            if (!format_counts)
                dev->events++;
            if ((unsigned)ev.kind < FSIM_EV_KIND_COUNT)
                counts[ev.kind]++;
            if (ev.kind == FSIM_EV_ALLOC || ev.kind == FSIM_EV_FREE) {
                if (!g_hash_table_contains(streams, &ev.stream))
                    g_hash_table_add(streams, g_memdup2(&ev.stream, sizeof(ev.stream)));
            }
            if (ev.kind == FSIM_EV_ALLOC) {
                dev->allocs++;
                requested += ev.size;
                describe_set_live(&live, ev.id, ev.size);
                if (requested > dev->peak_requested_bytes)
                    dev->peak_requested_bytes = requested;
            } else if (ev.kind == FSIM_EV_FREE) {
                FsimLiveEntry *entry = fsim_live_table_lookup(&live, ev.id);

                if (entry != NULL) {
                    requested -= entry->requested;
                    fsim_live_table_remove(&live, entry);
                }
            }
        }
        fsim_live_table_clear(&live);
        if (local_error != NULL) {
            g_propagate_error(error, local_error);
            return FALSE;
        }
        dev->duration_ns = last_time - first_time;
        dev->streams = g_hash_table_size(streams);
        if (!format_counts) {
            for (int k = 1; k < FSIM_EV_KIND_COUNT; k++) {
                if (counts[k] != 0)
                    fsim_trace_info_count(dev, fsim_event_kind_name((FsimEventKind)k), counts[k]);
            }
        }
    }
    return TRUE;
}

FsimTraceInfo *
fsim_trace_describe(FsimTrace *trace, GError **error)
{
    g_autoptr(FsimTraceInfo) info = g_new0(FsimTraceInfo, 1);

    info->path = g_strdup(trace->path);
    info->format = g_strdup(trace->format->name);
    info->devices = g_array_new(FALSE, TRUE, sizeof(FsimTraceDeviceInfo));
    g_array_set_clear_func(info->devices, device_info_clear);
    if (trace->settings != NULL)
        info->settings = g_ptr_array_ref(trace->settings);
    info->alloc_conf = g_strdup(trace->alloc_conf);
    /* The format first: it may fill actions with its own names, which the scan then keeps. */
    if (trace->format->describe != NULL && !trace->format->describe(trace, info, error))
        return NULL;
    if (!describe_streams(trace, info, trace->format->describe != NULL, error))
        return NULL;
    return g_steal_pointer(&info);
}

/* ---- the text writer ----------------------------------------------------------------------- */

struct FsimTraceWriter {
    char *path;
    char *tmp_path;
    GOutputStream *file; /* the temporary file */
    GOutputStream *out;  /* what we write to: the file, or a compressor over it */
    GString *line;
    FsimBinaryWriter *binary; /* the binary format's writer, or NULL for text */
    gboolean failed;
};

FsimTraceWriter *
fsim_trace_writer_open(const char *path, GError **error)
{
    return fsim_trace_writer_open_format(path, FSIM_TRACE_WRITE_AUTO, error);
}

FsimTraceWriter *
fsim_trace_writer_open_format(const char *path, FsimTraceWriteFormat format, GError **error)
{
    g_autoptr(FsimTraceWriter) writer = g_new0(FsimTraceWriter, 1);
    g_autofree char *target = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *base = NULL;
    g_autofree char *template = NULL;
    g_autoptr(GError) local_error = NULL;
    int fd;

    writer->path = g_strdup(path);
    if (format == FSIM_TRACE_WRITE_AUTO)
        format = g_str_has_suffix(path, FSIM_TRACE_BINARY_SUFFIX) ? FSIM_TRACE_WRITE_BINARY
                                                                  : FSIM_TRACE_WRITE_TEXT;
    if (format == FSIM_TRACE_WRITE_BINARY && g_str_has_suffix(path, ".gz")) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "%s: binary traces are not compressed (drop the .gz)", path);
        return NULL;
    }
    if (g_file_test(path, G_FILE_TEST_EXISTS) && !g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        if (format == FSIM_TRACE_WRITE_BINARY) {
            /* The header, written last, goes at the start of the file. */
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "%s: a binary trace is written to a regular file, not a device or pipe",
                        path);
            return NULL;
        }
        /* A device, a FIFO or a terminal (-o /dev/stdout): write straight to it, never
         * replace it. */
        fd = g_open(path, O_WRONLY | O_CLOEXEC, 0);
        if (fd < 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", path, g_strerror(errno));
            return NULL;
        }
    } else {
        /* Replace the file a symbolic link names, not the link. */
        target = g_file_test(path, G_FILE_TEST_IS_SYMLINK) ? realpath(path, NULL) : NULL;
        if (target == NULL)
            target = g_strdup(path);
        dir = g_path_get_dirname(target);
        base = g_path_get_basename(target);
        template = g_strdup_printf(".%s.XXXXXX", base);
        g_free(writer->path);
        writer->path = g_strdup(target);
        writer->tmp_path = g_build_filename(dir, template, NULL);
        fd = g_mkstemp_full(writer->tmp_path, O_RDWR | O_CLOEXEC, 0666);
        if (fd < 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: cannot create a file in %s: %s",
                        path, dir, g_strerror(errno));
            g_clear_pointer(&writer->tmp_path, g_free);
            return NULL;
        }
    }
    if (format == FSIM_TRACE_WRITE_BINARY) {
        writer->binary = fsim_binary_writer_new(fd, writer->path, error);
        return writer->binary != NULL ? g_steal_pointer(&writer) : NULL;
    }
    writer->file = g_unix_output_stream_new(fd, TRUE);
    if (g_str_has_suffix(path, ".gz")) {
        g_autoptr(GConverter) compressor = fsim_gzip_compressor_new(6);

        writer->out = g_converter_output_stream_new(writer->file, compressor);
    } else {
        writer->out = g_object_ref(writer->file);
    }
    {
        GOutputStream *buffered = g_buffered_output_stream_new_sized(writer->out, 1 << 16);

        g_object_unref(writer->out);
        writer->out = buffered;
    }
    writer->line = g_string_sized_new(128);
    if (!g_output_stream_write_all(writer->out, "fragsim-trace v1\n", 17, NULL, NULL,
                                   &local_error)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", path, local_error->message);
        return NULL;
    }
    return g_steal_pointer(&writer);
}

/* FALSE, with @error set, once a write has failed: the writer writes nothing more. */
static gboolean
writer_usable(const FsimTraceWriter *writer, GError **error)
{
    if (writer->failed)
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: an earlier write failed", writer->path);
    return !writer->failed;
}

static gboolean
writer_put(FsimTraceWriter *writer, GError **error)
{
    g_autoptr(GError) local_error = NULL;

    if (!writer_usable(writer, error))
        return FALSE;
    if (!g_output_stream_write_all(writer->out, writer->line->str, writer->line->len, NULL, NULL,
                                   &local_error)) {
        writer->failed = TRUE;
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", writer->path, local_error->message);
        return FALSE;
    }
    return TRUE;
}

gboolean
fsim_trace_writer_comment(FsimTraceWriter *writer, const char *text, GError **error)
{
    g_auto(GStrv) lines = NULL;

    if (writer->binary != NULL)
        return TRUE; /* the binary format keeps no comments */
    lines = g_strsplit(text, "\n", -1);
    g_string_truncate(writer->line, 0);
    for (gsize i = 0; lines[i] != NULL; i++)
        g_string_append_printf(writer->line, "# %s\n", lines[i]);
    return writer_put(writer, error);
}

/* Append @value in decimal; faster than printf on the hot path of `convert` and `synth`. */
static void
append_u64(GString *line, uint64_t value)
{
    char digits[24];
    int n = 0;

    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    while (n > 0)
        g_string_append_c(line, digits[--n]);
}

/* Append a space and @value: the next field of an event's line. */
static void
append_field(GString *line, uint64_t value)
{
    g_string_append_c(line, ' ');
    append_u64(line, value);
}

gboolean
fsim_trace_writer_write(FsimTraceWriter *writer, const FsimEvent *ev, GError **error)
{
    GString *line = writer->line;

    if (writer->binary != NULL) {
        if (!writer_usable(writer, error))
            return FALSE;
        writer->failed = !fsim_binary_writer_write(writer->binary, ev, error);
        return !writer->failed;
    }
    g_string_truncate(line, 0);
    append_u64(line, ev->time);
    g_string_append_c(line, ' ');
    switch (ev->kind) {
    case FSIM_EV_ALLOC:
    case FSIM_EV_FREE:
    case FSIM_EV_FREE_COMPLETED:
        if (ev->kind == FSIM_EV_FREE && (ev->flags & FSIM_EVF_DEFERRED) != 0)
            g_string_append(line, "free_requested");
        else
            g_string_append(line, fsim_event_kind_name(ev->kind));
        append_field(line, ev->id);
        if (ev->kind == FSIM_EV_ALLOC)
            append_field(line, ev->size);
        append_field(line, ev->stream);
        if (ev->kind != FSIM_EV_FREE_COMPLETED && (ev->flags & FSIM_EVF_RECORDED_OOM) != 0)
            g_string_append(line, " recorded_oom");
        break;
    case FSIM_EV_EMPTY_CACHE:
        g_string_append(line, (ev->flags & FSIM_EVF_INFERRED) != 0 ? "empty_cache inferred"
                                                                   : "empty_cache");
        break;
    case FSIM_EV_POOL_BEGIN:
    case FSIM_EV_POOL_END:
    case FSIM_EV_POOL_RELEASE:
        g_string_append(line, fsim_event_kind_name(ev->kind));
        append_field(line, ev->id);
        if (ev->kind != FSIM_EV_POOL_RELEASE)
            append_field(line, ev->stream);
        break;
    case FSIM_EV_MARK: {
        const char *label = ev->label != NULL && *ev->label != '\0' ? ev->label : "mark";

        g_string_append(line, "mark ");
        /* A label is the rest of one line: newlines would end it. */
        for (const char *p = label; *p != '\0'; p++)
            g_string_append_c(line, *p == '\n' || *p == '\r' ? ' ' : *p);
        break;
    }
    default:
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "%s: cannot write event kind %d",
                    writer->path, (int)ev->kind);
        return FALSE;
    }
    g_string_append_c(line, '\n');
    return writer_put(writer, error);
}

gboolean
fsim_trace_writer_close(FsimTraceWriter *writer, GError **error)
{
    g_autoptr(GError) local_error = NULL;
    gboolean ok;

    if (writer->binary != NULL)
        ok = !writer->failed && fsim_binary_writer_finish(writer->binary, &local_error);
    else
        ok = !writer->failed && g_output_stream_close(writer->out, NULL, &local_error) &&
             g_output_stream_close(writer->file, NULL, &local_error);
    if (ok && writer->tmp_path != NULL && g_rename(writer->tmp_path, writer->path) != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", writer->path, g_strerror(errno));
        fsim_trace_writer_abort(writer);
        return FALSE;
    }
    if (!ok) {
        if (local_error != NULL)
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", writer->path,
                        local_error->message);
        else
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: an earlier write failed",
                        writer->path);
        fsim_trace_writer_abort(writer);
        return FALSE;
    }
    g_clear_pointer(&writer->tmp_path, g_free);
    fsim_trace_writer_abort(writer);
    return TRUE;
}

void
fsim_trace_writer_abort(FsimTraceWriter *writer)
{
    if (writer == NULL)
        return;
    g_clear_object(&writer->out);
    g_clear_object(&writer->file);
    g_clear_pointer(&writer->binary, fsim_binary_writer_free);
    if (writer->tmp_path != NULL) {
        g_unlink(writer->tmp_path);
        g_free(writer->tmp_path);
    }
    if (writer->line != NULL)
        g_string_free(writer->line, TRUE);
    g_free(writer->path);
    g_free(writer);
}
