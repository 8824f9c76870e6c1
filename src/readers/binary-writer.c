/* SPDX-License-Identifier: MIT */
/*
 * The writer of `fragsim-trace binary v1` (binary-format.h): records go out through one buffer
 * as events arrive, the stream and string tables are collected on the way (a few entries: the
 * distinct streams and mark labels), and the header, which counts them and holds the checksum,
 * is written last over the placeholder at the start of the file.
 */
#define _XOPEN_SOURCE 700 /* pwrite() */

#include <glib.h>

#include <errno.h>
#include <unistd.h>

#include "fragsim/owned.h"

#include "binary-format.h"

#define WRITER_BUFFER_BYTES (1 << 20)

struct FsimBinaryWriter {
    int fd;
    char *path;
    guint8 *buf;
    gsize used;
    uint64_t records;
    FsimTime last_time;
    FsimBinarySum sum;
    GHashTable *stream_index; /* uint64_t* stream -> index + 1 */
    GArray *streams;          /* uint64_t, by index */
    GHashTable *label_offset; /* label -> offset + 1 */
    GByteArray *strings;
};

static gboolean
writer_io_error(FsimBinaryWriter *writer, int saved_errno, GError **error)
{
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", writer->path, g_strerror(saved_errno));
    return FALSE;
}

static gboolean
writer_put(FsimBinaryWriter *writer, const guint8 *data, gsize len, GError **error)
{
    while (len > 0) {
        ssize_t n = write(writer->fd, data, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return writer_io_error(writer, errno, error);
        data += n;
        len -= (gsize)n;
    }
    return TRUE;
}

static gboolean
writer_flush(FsimBinaryWriter *writer, GError **error)
{
    gboolean ok = writer_put(writer, writer->buf, writer->used, error);

    writer->used = 0;
    return ok;
}

FsimBinaryWriter *
fsim_binary_writer_new(int fd, const char *path, GError **error)
{
    FsimBinaryWriter *writer = g_new0(FsimBinaryWriter, 1);
    guint8 placeholder[FSIM_BINARY_HEADER_BYTES] = {0};

    writer->fd = fd;
    writer->path = g_strdup(path);
    writer->buf = g_malloc(WRITER_BUFFER_BYTES);
    writer->stream_index = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    writer->streams = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    writer->label_offset = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    writer->strings = g_byte_array_new();
    /* The header is written last; a file cut short before that has no magic and is refused. */
    if (!writer_put(writer, placeholder, sizeof(placeholder), error)) {
        fsim_binary_writer_free(writer);
        return NULL;
    }
    return writer;
}

static uint32_t
writer_stream(FsimBinaryWriter *writer, uint64_t stream)
{
    gpointer found = g_hash_table_lookup(writer->stream_index, &stream);

    if (found == NULL) {
        found = GUINT_TO_POINTER(writer->streams->len + 1);
        g_array_append_val(writer->streams, stream);
        g_hash_table_insert(writer->stream_index, g_memdup2(&stream, sizeof(stream)), found);
    }
    return GPOINTER_TO_UINT(found) - 1;
}

static uint64_t
writer_label(FsimBinaryWriter *writer, const char *label)
{
    gpointer found = g_hash_table_lookup(writer->label_offset, label);

    if (found == NULL) {
        found = GSIZE_TO_POINTER(writer->strings->len + 1);
        g_byte_array_append(writer->strings, (const guint8 *)label, (guint)strlen(label) + 1);
        g_hash_table_insert(writer->label_offset, g_strdup(label), found);
    }
    return GPOINTER_TO_SIZE(found) - 1;
}

gboolean
fsim_binary_writer_write(FsimBinaryWriter *writer, const FsimEvent *ev, GError **error)
{
    uint64_t w[4] = {0};
    uint32_t stream_index = 0;
    guint8 *p;

    if (ev->time < writer->last_time) {
        g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_TIME,
                    "%s: record %" G_GUINT64_FORMAT ": time %" G_GUINT64_FORMAT
                    " ns goes backwards (previous event at %" G_GUINT64_FORMAT " ns)",
                    writer->path, writer->records + 1, ev->time, writer->last_time);
        return FALSE;
    }
    switch (ev->kind) {
    case FSIM_EV_ALLOC:
    case FSIM_EV_FREE:
    case FSIM_EV_FREE_COMPLETED:
        w[1] = ev->id;
        w[2] = ev->kind == FSIM_EV_ALLOC ? ev->size : 0;
        stream_index = writer_stream(writer, ev->stream);
        break;
    case FSIM_EV_MARK:
        w[1] = writer_label(writer, ev->label != NULL ? ev->label : "");
        break;
    case FSIM_EV_EMPTY_CACHE:
        break;
    case FSIM_EV_POOL_BEGIN:
    case FSIM_EV_POOL_END:
        w[1] = ev->id;
        stream_index = writer_stream(writer, ev->stream);
        break;
    case FSIM_EV_POOL_RELEASE:
        w[1] = ev->id;
        break;
    default:
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "%s: cannot write event kind %d",
                    writer->path, (int)ev->kind);
        return FALSE;
    }
    if (writer->streams->len > G_MAXUINT32) {
        g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT, "%s: more than 2^32 streams",
                    writer->path);
        return FALSE;
    }
    w[0] = ev->time - writer->last_time;
    w[3] = FSIM_BINARY_WORD3(stream_index, ev->kind, ev->flags & FSIM_BINARY_FLAGS_KNOWN);
    writer->last_time = ev->time;
    if (writer->used + FSIM_BINARY_RECORD_BYTES > WRITER_BUFFER_BYTES &&
        !writer_flush(writer, error))
        return FALSE;
    p = writer->buf + writer->used;
    for (int i = 0; i < 4; i++)
        fsim_binary_store64(p + 8 * i, w[i]);
    writer->used += FSIM_BINARY_RECORD_BYTES;
    fsim_binary_sum4(&writer->sum, w[0], w[1], w[2], w[3]);
    writer->records++;
    return TRUE;
}

/* The stream table, then the string table padded to 8 bytes, through the buffer. */
static gboolean
writer_tables(FsimBinaryWriter *writer, GError **error)
{
    guint8 *strings;
    gsize padded = (writer->strings->len + 7) & ~(gsize)7;

    for (guint i = 0; i < writer->streams->len; i++) {
        if (writer->used + 8 > WRITER_BUFFER_BYTES && !writer_flush(writer, error))
            return FALSE;
        fsim_binary_store64(writer->buf + writer->used,
                            g_array_index(writer->streams, uint64_t, i));
        fsim_binary_sum_bytes(&writer->sum, writer->buf + writer->used, 8);
        writer->used += 8;
    }
    if (!writer_flush(writer, error))
        return FALSE;
    strings = g_malloc0(MAX(padded, 1));
    if (writer->strings->len > 0)
        memcpy(strings, writer->strings->data, writer->strings->len);
    fsim_binary_sum_bytes(&writer->sum, strings, padded);
    if (!writer_put(writer, strings, padded, error)) {
        g_free(strings);
        return FALSE;
    }
    g_free(strings);
    return TRUE;
}

gboolean
fsim_binary_writer_finish(FsimBinaryWriter *writer, GError **error)
{
    guint8 header[FSIM_BINARY_HEADER_BYTES] = {0};

    if (!writer_flush(writer, error) || !writer_tables(writer, error))
        return FALSE;
    memcpy(header, FSIM_BINARY_MAGIC, FSIM_BINARY_MAGIC_LEN);
    fsim_binary_store32(header + FSIM_BINARY_OFF_HEADER_BYTES, FSIM_BINARY_HEADER_BYTES);
    fsim_binary_store32(header + FSIM_BINARY_OFF_RECORD_BYTES, FSIM_BINARY_RECORD_BYTES);
    fsim_binary_store64(header + FSIM_BINARY_OFF_RECORDS, writer->records);
    fsim_binary_store32(header + FSIM_BINARY_OFF_STREAMS, writer->streams->len);
    fsim_binary_store64(header + FSIM_BINARY_OFF_STRINGS_BYTES, writer->strings->len);
    fsim_binary_store64(header + FSIM_BINARY_OFF_CHECKSUM, fsim_binary_sum_value(&writer->sum));
    if (pwrite(writer->fd, header, sizeof(header), 0) != (ssize_t)sizeof(header))
        return writer_io_error(writer, errno, error);
    if (close(writer->fd) != 0) {
        writer->fd = -1;
        return writer_io_error(writer, errno, error);
    }
    writer->fd = -1;
    return TRUE;
}

void
fsim_binary_writer_free(FsimBinaryWriter *writer)
{
    static const FsimOwned owned[] = {
        FSIM_OWNED(FsimBinaryWriter, buf, g_free),
        FSIM_OWNED(FsimBinaryWriter, path, g_free),
        FSIM_OWNED(FsimBinaryWriter, stream_index, g_hash_table_unref),
        FSIM_OWNED(FsimBinaryWriter, streams, g_array_unref),
        FSIM_OWNED(FsimBinaryWriter, label_offset, g_hash_table_unref),
        FSIM_OWNED(FsimBinaryWriter, strings, g_byte_array_unref)};

    if (writer == NULL)
        return;
    if (writer->fd >= 0)
        close(writer->fd);
    fsim_owned_free(writer, owned, G_N_ELEMENTS(owned));
}
