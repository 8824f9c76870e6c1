/* SPDX-License-Identifier: MIT */
/*
 * The reader of `fragsim-trace binary v1`, the fixed-width twin of the text format
 * (binary-format.h, docs/trace-formats.md).  The file is mapped once when the trace is opened
 * (or, gzip-compressed, decompressed into memory); the header and the stream and string tables
 * are checked there, and each stream then decodes records in place: no allocation and no copy
 * per event, a mark's label points into the mapped string table.  Each record is checked as it
 * is decoded (kind, flags, size, stream index, label offset, time), and the checksum, summed on
 * the way, is compared once the last record has been read, before the end of the stream is
 * reported.  Allocation ids are not tracked here: the engine refuses an id allocated twice,
 * naming the record.
 */
#define _DEFAULT_SOURCE /* MAP_POPULATE */

#include <glib.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fragsim/trace.h"

#include "binary-format.h"
#include "readers.h"

typedef struct {
    FsimTrace base;
    const guint8 *data; /* the whole file */
    gsize len;
    void *map; /* data, when it is an mmap() of len bytes; else bytes owns it */
    GBytes *bytes;
    const guint8 *records;
    uint64_t n_records;
    uint64_t *streams; /* decoded stream table */
    uint32_t n_streams;
    const char *strings;
    uint64_t strings_bytes;
    uint64_t checksum;
} BinaryTrace;

typedef struct {
    FsimTraceStream base;
    const BinaryTrace *trace;
    uint64_t next; /* index of the next record */
    FsimTime time;
    FsimBinarySum sum;
} BinaryStream;

static gboolean
binary_probe(const guint8 *head, gsize len)
{
    return len >= FSIM_BINARY_MAGIC_LEN &&
           memcmp(head, FSIM_BINARY_MAGIC, FSIM_BINARY_MAGIC_LEN) == 0;
}

/* Map @path, or read it whole when it is compressed (or cannot be mapped). */
static gboolean
binary_load(BinaryTrace *trace, const char *path, GError **error)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    guint8 magic[2] = {0};

    if (fd < 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", path, g_strerror(errno));
        return FALSE;
    }
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        pread(fd, magic, 2, 0) == 2 && !(magic[0] == 0x1f && magic[1] == 0x8b)) {
        int flags = MAP_PRIVATE;
        void *map;

#ifdef MAP_POPULATE
        flags |= MAP_POPULATE; /* fault the pages in now, in bulk, rather than one at a time */
#endif
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, flags, fd, 0);
        if (map != MAP_FAILED) {
            close(fd);
            (void)madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
            trace->map = map;
            trace->data = map;
            trace->len = (gsize)st.st_size;
            return TRUE;
        }
    }
    close(fd);
    if (!fsim_input_read_all(path, 0, &trace->bytes, error))
        return FALSE;
    trace->data = g_bytes_get_data(trace->bytes, &trace->len);
    return TRUE;
}

static gboolean G_GNUC_PRINTF(4, 5)
    binary_error(const char *path, GError **error, FsimTraceError code, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, FSIM_TRACE_ERROR, code, "%s: %s", path, message);
    return FALSE;
}

/* The header's counts against the file's length; the tables. */
static gboolean
binary_check_layout(BinaryTrace *trace, const char *path, GError **error)
{
    const guint8 *h = trace->data;
    uint32_t header_bytes = fsim_binary_load32(h + FSIM_BINARY_OFF_HEADER_BYTES);
    uint32_t record_bytes = fsim_binary_load32(h + FSIM_BINARY_OFF_RECORD_BYTES);
    uint64_t strings_padded;
    uint64_t tables;
    uint64_t have;

    if (trace->len < FSIM_BINARY_HEADER_BYTES)
        return binary_error(path, error, FSIM_TRACE_ERROR_TRUNCATED,
                            "the header is cut short (%" G_GSIZE_FORMAT " of %d bytes)", trace->len,
                            FSIM_BINARY_HEADER_BYTES);
    if (header_bytes != FSIM_BINARY_HEADER_BYTES || record_bytes != FSIM_BINARY_RECORD_BYTES ||
        fsim_binary_load32(h + FSIM_BINARY_OFF_RESERVED) != 0)
        return binary_error(path, error, FSIM_TRACE_ERROR_HEADER,
                            "header of %u bytes with records of %u bytes: this fragsim reads "
                            "%d-byte headers and %d-byte records with the reserved field 0",
                            header_bytes, record_bytes, FSIM_BINARY_HEADER_BYTES,
                            FSIM_BINARY_RECORD_BYTES);
    trace->n_records = fsim_binary_load64(h + FSIM_BINARY_OFF_RECORDS);
    trace->n_streams = fsim_binary_load32(h + FSIM_BINARY_OFF_STREAMS);
    trace->strings_bytes = fsim_binary_load64(h + FSIM_BINARY_OFF_STRINGS_BYTES);
    trace->checksum = fsim_binary_load64(h + FSIM_BINARY_OFF_CHECKSUM);
    have = trace->len - FSIM_BINARY_HEADER_BYTES;
    if (trace->n_records > have / FSIM_BINARY_RECORD_BYTES) {
        uint64_t complete = have / FSIM_BINARY_RECORD_BYTES;

        return binary_error(path, error, FSIM_TRACE_ERROR_TRUNCATED,
                            "record %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                            " is cut short: the file ends at byte %" G_GSIZE_FORMAT,
                            complete + 1, trace->n_records, trace->len);
    }
    have -= trace->n_records * FSIM_BINARY_RECORD_BYTES;
    if (trace->strings_bytes > have)
        return binary_error(path, error, FSIM_TRACE_ERROR_TRUNCATED,
                            "the tables after the last record are cut short (%" G_GUINT64_FORMAT
                            " bytes, the header declares %u streams and %" G_GUINT64_FORMAT
                            " bytes of strings)",
                            have, trace->n_streams, trace->strings_bytes);
    strings_padded = (trace->strings_bytes + 7) & ~(uint64_t)7;
    tables = (uint64_t)trace->n_streams * 8 + strings_padded;
    if (tables != have)
        return binary_error(path, error,
                            tables > have ? FSIM_TRACE_ERROR_TRUNCATED : FSIM_TRACE_ERROR_SYNTAX,
                            "the tables after the last record take %" G_GUINT64_FORMAT
                            " bytes where the header declares %u streams and %" G_GUINT64_FORMAT
                            " bytes of strings (%" G_GUINT64_FORMAT " bytes)",
                            have, trace->n_streams, trace->strings_bytes, tables);
    trace->records = h + FSIM_BINARY_HEADER_BYTES;
    {
        const guint8 *table = trace->records + trace->n_records * FSIM_BINARY_RECORD_BYTES;

        trace->streams = g_new(uint64_t, MAX(trace->n_streams, 1));
        for (uint32_t i = 0; i < trace->n_streams; i++)
            trace->streams[i] = fsim_binary_load64(table + 8 * (gsize)i);
        trace->strings = (const char *)table + 8 * (gsize)trace->n_streams;
    }
    if (trace->strings_bytes > 0 && trace->strings[trace->strings_bytes - 1] != '\0')
        return binary_error(path, error, FSIM_TRACE_ERROR_SYNTAX,
                            "the string table does not end with a NUL byte");
    return TRUE;
}

static void
binary_close(FsimTrace *base)
{
    BinaryTrace *trace = (BinaryTrace *)base;

    if (trace->map != NULL)
        munmap(trace->map, trace->len);
    g_clear_pointer(&trace->bytes, g_bytes_unref);
    g_free(trace->streams);
    g_free(trace);
}

static FsimTrace *
binary_open(const char *path, GError **error)
{
    BinaryTrace *trace = g_new0(BinaryTrace, 1);

    fsim_trace_init(&trace->base, &fsim_trace_format_binary, path);
    if (!binary_load(trace, path, error) || !binary_check_layout(trace, path, error)) {
        fsim_trace_close(&trace->base);
        return NULL;
    }
    fsim_trace_add_device(&trace->base, 0);
    return &trace->base;
}

static FsimTraceStream *
binary_stream_open(FsimTrace *trace, uint32_t device, GError **error)
{
    BinaryStream *s = g_new0(BinaryStream, 1);

    (void)device;
    (void)error;
    s->trace = (const BinaryTrace *)trace;
    return &s->base;
}

static void
binary_stream_close(FsimTraceStream *stream)
{
    g_free(stream);
}

/* What a record of @kind carries besides its kind: an id (or label, or pool) that must be
 * nonzero, a stream index, a size. */
static gboolean
binary_kind_has_stream(unsigned kind)
{
    return kind <= FSIM_EV_FREE_COMPLETED || kind == FSIM_EV_POOL_BEGIN || kind == FSIM_EV_POOL_END;
}

/* A record that failed its checks: say which and why. */
static gboolean
binary_bad_record(const BinaryStream *s, const guint8 *p, GError **error)
{
    uint64_t w[4];
    const char *path = s->trace->base.path;
    uint64_t n = s->next + 1;
    unsigned kind;
    unsigned flags;
    uint32_t stream_index;
    const char *name;

    for (int i = 0; i < 4; i++)
        w[i] = fsim_binary_load64(p + 8 * i);
    kind = (unsigned)(w[3] >> 32) & 0xff;
    flags = (unsigned)(w[3] >> 40) & 0xff;
    stream_index = (uint32_t)w[3];
    if ((w[3] >> 48) != 0)
        return binary_error(path, error, FSIM_TRACE_ERROR_SYNTAX,
                            "record %" G_GUINT64_FORMAT ": reserved bits are set", n);
    if (kind < FSIM_EV_ALLOC || kind > FSIM_BINARY_KIND_LAST)
        return binary_error(path, error, FSIM_TRACE_ERROR_KIND,
                            "record %" G_GUINT64_FORMAT ": unknown kind %u", n, kind);
    name = fsim_event_kind_name((FsimEventKind)kind);
    if ((flags & ~(unsigned)FSIM_BINARY_FLAGS_KNOWN) != 0)
        return binary_error(path, error, FSIM_TRACE_ERROR_SYNTAX,
                            "record %" G_GUINT64_FORMAT ": unknown flags 0x%x", n, flags);
    if (s->time + w[0] < s->time)
        return binary_error(path, error, FSIM_TRACE_ERROR_TIME,
                            "record %" G_GUINT64_FORMAT ": the time passes 2^64 ns", n);
    if (kind == FSIM_EV_ALLOC && (w[2] == 0 || w[2] > FSIM_MAX_SIZE))
        return binary_error(path, error, FSIM_TRACE_ERROR_SIZE,
                            "record %" G_GUINT64_FORMAT ": alloc of %" G_GUINT64_FORMAT
                            " bytes (sizes must be 1 to 2^60)",
                            n, w[2]);
    if (kind != FSIM_EV_ALLOC && w[2] != 0)
        return binary_error(path, error, FSIM_TRACE_ERROR_SYNTAX,
                            "record %" G_GUINT64_FORMAT ": a %s with a size", n, name);
    if (kind == FSIM_EV_MARK && w[1] >= s->trace->strings_bytes)
        return binary_error(path, error, FSIM_TRACE_ERROR_NUMBER,
                            "record %" G_GUINT64_FORMAT ": label offset %" G_GUINT64_FORMAT
                            " is outside the string table (%" G_GUINT64_FORMAT " bytes)",
                            n, w[1], s->trace->strings_bytes);
    if (kind == FSIM_EV_EMPTY_CACHE && w[1] != 0)
        return binary_error(path, error, FSIM_TRACE_ERROR_SYNTAX,
                            "record %" G_GUINT64_FORMAT ": an empty_cache with an id", n);
    if (!binary_kind_has_stream(kind) && stream_index != 0)
        return binary_error(path, error, FSIM_TRACE_ERROR_SYNTAX,
                            "record %" G_GUINT64_FORMAT ": a %s with a stream", n, name);
    if (kind >= FSIM_EV_POOL_BEGIN && w[1] == 0)
        return binary_error(path, error, FSIM_TRACE_ERROR_NUMBER,
                            "record %" G_GUINT64_FORMAT
                            ": pool 0 is the default pool: private pools are numbered from 1",
                            n);
    return binary_error(path, error, FSIM_TRACE_ERROR_NUMBER,
                        "record %" G_GUINT64_FORMAT ": stream index %u is outside the stream "
                        "table (%u streams)",
                        n, stream_index, s->trace->n_streams);
}

/* After the last record: the tables complete the checksum, which must match the header's. */
static gboolean
binary_check_sum(BinaryStream *s, GError **error)
{
    const BinaryTrace *t = s->trace;
    const guint8 *tables = t->records + t->n_records * FSIM_BINARY_RECORD_BYTES;
    gsize tables_len = t->len - FSIM_BINARY_HEADER_BYTES - t->n_records * FSIM_BINARY_RECORD_BYTES;
    FsimBinarySum sum = s->sum;

    fsim_binary_sum_bytes(&sum, tables, tables_len);
    if (fsim_binary_sum_value(&sum) == t->checksum)
        return TRUE;
    return binary_error(t->base.path, error, FSIM_TRACE_ERROR_CHECKSUM,
                        "checksum mismatch over the %" G_GUINT64_FORMAT
                        " records and the tables (the header says 0x%016" G_GINT64_MODIFIER
                        "x, the contents give 0x%016" G_GINT64_MODIFIER "x): the file is damaged",
                        t->n_records, t->checksum, fsim_binary_sum_value(&sum));
}

/* What decoding reads of the trace, copied into locals: stores into the events could alias the
 * trace's own fields, which the compiler would then load again for every record. */
typedef struct {
    const uint64_t *streams;
    uint32_t n_streams;
    const char *strings;
    uint64_t strings_bytes;
} BinaryTables;

/* The id, stream and label of the rarer kinds (empty_cache, mark, the pool events). */
static gboolean
binary_decode_rare(BinaryTables t, unsigned kind, uint64_t id, uint32_t stream_index, FsimEvent *ev)
{
    if (binary_kind_has_stream(kind)) {
        if (stream_index >= t.n_streams)
            return FALSE;
        ev->stream = t.streams[stream_index];
    } else {
        if (stream_index != 0)
            return FALSE;
        ev->stream = 0;
    }
    ev->label = NULL;
    ev->id = id;
    switch (kind) {
    case FSIM_EV_MARK:
        if (id >= t.strings_bytes)
            return FALSE;
        ev->label = t.strings + id;
        ev->id = 0;
        return TRUE;
    case FSIM_EV_EMPTY_CACHE:
        return id == 0;
    default: /* the pool events */
        return id != 0;
    }
}

/* Decode the record at @p into @ev; FALSE when it fails its checks.  One test covers the
 * common records: a known kind and flags, no reserved bits, a stream index in the table, an
 * alloc's size in range, no size on the others, no time overflow. */
static inline gboolean
binary_decode(BinaryTables t, const guint8 *p, FsimTime *time, FsimBinarySum *sum, FsimEvent *ev)
{
    uint64_t delta = fsim_binary_load64(p);
    uint64_t id = fsim_binary_load64(p + 8);
    uint64_t size = fsim_binary_load64(p + 16);
    uint64_t word3 = fsim_binary_load64(p + 24);
    unsigned kind = (unsigned)(word3 >> 32) & 0xff;
    uint32_t stream_index = (uint32_t)word3;
    unsigned is_alloc = kind == FSIM_EV_ALLOC;
    unsigned bad;

    /* Without branches on the kind, which a mix of allocs and frees would mispredict. */
    bad = ((word3 >> 40) & ~(uint64_t)FSIM_BINARY_FLAGS_KNOWN) != 0;
    bad |= kind - FSIM_EV_ALLOC > FSIM_BINARY_KIND_LAST - FSIM_EV_ALLOC;
    bad |= *time + delta < *time;
    bad |= is_alloc & (size - 1 >= FSIM_MAX_SIZE);
    bad |= !is_alloc & (size != 0);
    if (G_LIKELY(kind <= FSIM_EV_FREE_COMPLETED)) {
        bad |= stream_index >= t.n_streams;
        if (G_UNLIKELY(bad))
            return FALSE;
        ev->stream = t.streams[stream_index];
        ev->label = NULL;
        ev->id = id;
    } else {
        if (G_UNLIKELY(bad) || !binary_decode_rare(t, kind, id, stream_index, ev))
            return FALSE;
    }
    fsim_binary_sum4(sum, delta, id, size, word3);
    *time += delta;
    ev->time = *time;
    ev->size = size;
    ev->addr = 0;
    ev->device = 0;
    ev->stack = 0; /* the binary format keeps no stacks */
    ev->flags = (uint32_t)(word3 >> 40);
    ev->kind = (FsimEventKind)kind;
    return TRUE;
}

static gsize
binary_stream_read(FsimTraceStream *stream, FsimEvent *evs, gsize max, GError **error)
{
    BinaryStream *s = (BinaryStream *)stream;
    const BinaryTrace *t = s->trace;
    uint64_t next = s->next;
    uint64_t n;
    FsimTime time = s->time;
    FsimBinarySum sum = s->sum;
    BinaryTables tables = {t->streams, t->n_streams, t->strings, t->strings_bytes};
    const guint8 *p;

    if (G_UNLIKELY(next >= t->n_records)) {
        if (next == t->n_records) {
            s->next++;
            (void)binary_check_sum(s, error);
        }
        return 0;
    }
    n = MIN((uint64_t)max, t->n_records - next);
    p = t->records + next * FSIM_BINARY_RECORD_BYTES;
    for (uint64_t i = 0; i < n; i++, p += FSIM_BINARY_RECORD_BYTES) {
        /* A few cache lines ahead: the hardware prefetcher alone leaves the loop waiting. */
        __builtin_prefetch(p + 16 * FSIM_BINARY_RECORD_BYTES);
        if (G_UNLIKELY(!binary_decode(tables, p, &time, &sum, &evs[i]))) {
            s->next = next + i;
            s->time = time;
            binary_bad_record(s, p, error);
            return 0;
        }
        evs[i].index = next + i + 1;
    }
    s->next = next + n;
    s->time = time;
    s->sum = sum;
    return (gsize)n;
}

const FsimTraceFormat fsim_trace_format_binary = {
    .name = "binary",
    .summary = "fragsim's binary trace (fragsim-trace binary v1): fixed-size records, mapped",
    .probe = binary_probe,
    .open = binary_open,
    .close = binary_close,
    .stream_open = binary_stream_open,
    .stream_read = binary_stream_read,
    .stream_close = binary_stream_close,
};
