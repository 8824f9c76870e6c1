/* SPDX-License-Identifier: MIT */
/*
 * The reader of `fragsim-trace binary v1`, the fixed-width twin of the text format
 * (binary-format.h, docs/trace-formats.md).  It streams with bounded memory: opening a trace
 * reads its header and the stream and string tables after the records (the only part held in
 * memory, bounded by the memory budget), and each stream then goes through the records a window
 * at a time: a plain file is mapped a window at a time (8 MiB, so resident memory does not grow
 * with the trace), and a gzip-compressed one is decompressed into a buffer of the same size by
 * each stream (opening decompresses it once to reach the tables).  Records are decoded in
 * place: no allocation and no copy per event, a mark's label points into the string table.  Each
 * record is checked as it is decoded (kind, flags, size, stream index, label offset, time), and
 * the checksum, summed on the way, is compared once the last record has been read, before the
 * end of the stream is reported.  Allocation ids are not tracked here: the engine refuses an id
 * allocated twice, naming the record.
 *
 * Records are decoded 128 at a time by a loop for the common ones (alloc, free, free_completed)
 * that pass their checks: no call, one branch that leaves it (its checks fold into one test),
 * and no store of the fields no such record sets (address, device, stack, label), which an
 * earlier read of the same batch left as they are.  The loop stops at any other record (a
 * rarer kind, a bad one), which is then decoded with every check and field set, the first bad
 * one named as before, and the loop resumes after it.
 */
#define _DEFAULT_SOURCE /* MAP_POPULATE, pread(), posix_fadvise() */

#include <glib.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fragsim/trace.h"

#include "binary-format.h"
#include "readers.h"

/* The records a stream maps or buffers at once: 8 MiB (tests make it smaller; the fuzz build
 * defines FSIM_BINARY_WINDOW_BYTES, two records, so that small inputs cross many windows). */
#ifdef FSIM_BINARY_WINDOW_BYTES
#define BINARY_WINDOW_DEFAULT ((gsize)FSIM_BINARY_WINDOW_BYTES)
#else
#define BINARY_WINDOW_DEFAULT ((gsize)8 << 20)
#endif

/* How many records ahead decoding prefetches. */
#ifndef BINARY_PREFETCH
#define BINARY_PREFETCH 128
#endif
/* The most records binary_stream_read() decodes at once: the stream's batch. */
#define BINARY_CHUNK 128

static gsize binary_window_bytes = BINARY_WINDOW_DEFAULT;

/* What opening a gzip-compressed trace decompresses at once, on its way to the tables. */
#define BINARY_GZIP_CHUNK ((gsize)1 << 16)

void
fsim_binary_set_window(gsize bytes)
{
    bytes = bytes == 0 ? BINARY_WINDOW_DEFAULT : bytes;
    binary_window_bytes = MAX(bytes / FSIM_BINARY_RECORD_BYTES, 1) * FSIM_BINARY_RECORD_BYTES;
}

typedef struct {
    FsimTrace base;
    int fd;        /* a plain file, kept open for the streams; -1 when gzip-compressed */
    gboolean gzip; /* streams decompress the file again */
    guint8 header[FSIM_BINARY_HEADER_BYTES];
    uint64_t len; /* of the file (decompressed) */
    uint64_t n_records;
    uint64_t *streams; /* decoded stream table */
    uint32_t n_streams;
    guint8 *tables; /* the stream and string tables, as in the file */
    uint64_t tables_len;
    const char *strings; /* in tables */
    uint64_t strings_bytes;
    uint64_t checksum;
} BinaryTrace;

typedef struct {
    FsimTraceStream base;
    const BinaryTrace *trace;
    GInputStream *in; /* gzip: this stream's own decompression, past the records read */
    void *map;        /* plain: the mapped window (map_len bytes), or NULL */
    gsize map_len;
    guint8 *buf;          /* gzip, or a plain file that cannot be mapped: records read */
    const guint8 *window; /* records window_first .. window_first + window_count - 1 */
    uint64_t window_first;
    uint64_t window_count;
    uint64_t next; /* index of the next record */
    FsimTime time;
    FsimBinarySum sum;
    /* The events of the last read (the stream's batch), whose fields that no common record
     * changes hold their values already: no address, device 0, no stack, no label.  NULL when
     * a read wrote a label (or a failed read left them unknown). */
    FsimEvent *prepared;
    gsize prepared_len;
} BinaryStream;

static gboolean
binary_probe(const guint8 *head, gsize len)
{
    return len >= FSIM_BINARY_MAGIC_LEN &&
           memcmp(head, FSIM_BINARY_MAGIC, FSIM_BINARY_MAGIC_LEN) == 0;
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

/* The header's counts against the file's length (trace->len). */
static gboolean
binary_check_layout(BinaryTrace *trace, const char *path, GError **error)
{
    const guint8 *h = trace->header;
    uint32_t header_bytes = fsim_binary_load32(h + FSIM_BINARY_OFF_HEADER_BYTES);
    uint32_t record_bytes = fsim_binary_load32(h + FSIM_BINARY_OFF_RECORD_BYTES);
    uint64_t strings_padded;
    uint64_t tables;
    uint64_t have;

    if (trace->len < FSIM_BINARY_HEADER_BYTES)
        return binary_error(path, error, FSIM_TRACE_ERROR_TRUNCATED,
                            "the header is cut short (%" G_GUINT64_FORMAT " of %d bytes)",
                            trace->len, FSIM_BINARY_HEADER_BYTES);
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
                            " is cut short: the file ends at byte %" G_GUINT64_FORMAT,
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
    trace->tables_len = have;
    return TRUE;
}

/* The tables, once in memory (trace->tables): decode the streams, check the strings. */
static gboolean
binary_check_tables(BinaryTrace *trace, const char *path, GError **error)
{
    trace->streams = g_new0(uint64_t, MAX(trace->n_streams, 1));
    for (uint32_t i = 0; i < trace->n_streams; i++)
        trace->streams[i] = fsim_binary_load64(trace->tables + 8 * (gsize)i);
    trace->strings = (const char *)trace->tables + 8 * (gsize)trace->n_streams;
    if (trace->strings_bytes > 0 && trace->strings[trace->strings_bytes - 1] != '\0')
        return binary_error(path, error, FSIM_TRACE_ERROR_SYNTAX,
                            "the string table does not end with a NUL byte");
    return TRUE;
}

/* The tables are the one part of a trace held in memory: within the memory budget. */
static gboolean
binary_check_budget(const char *path, uint64_t bytes, GError **error)
{
    if (bytes <= fsim_memory_budget())
        return TRUE;
    return binary_error(path, error, FSIM_TRACE_ERROR_LIMIT,
                        "the stream and string tables take more than the memory budget of "
                        "%" G_GSIZE_FORMAT " MiB (--max-memory)",
                        fsim_memory_budget() >> 20);
}

/* Read @len bytes at @offset of @fd into @buf; the number read (less at the end of the file),
 * or -1 with errno. */
static gssize
binary_pread(int fd, guint8 *buf, gsize len, uint64_t offset)
{
    gsize done = 0;

    while (done < len) {
        ssize_t n = pread(fd, buf + done, len - done, (off_t)(offset + done));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        done += (gsize)n;
    }
    return (gssize)done;
}

static gboolean
binary_io_error(const char *path, GError **error)
{
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", path, g_strerror(errno));
    return FALSE;
}

/* A plain file: its length, header and tables, read where they lie. */
static gboolean
binary_open_plain(BinaryTrace *trace, const char *path, GError **error)
{
    struct stat st;
    gssize n;

    if (fstat(trace->fd, &st) != 0)
        return binary_io_error(path, error);
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO,
                    "%s: not a regular file (a binary trace is read where its parts lie, and "
                    "once per stream)",
                    path);
        return FALSE;
    }
    (void)posix_fadvise(trace->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    n = binary_pread(trace->fd, trace->header, sizeof(trace->header), 0);
    if (n < 0)
        return binary_io_error(path, error);
    trace->len = (uint64_t)st.st_size;
    if (!binary_check_layout(trace, path, error) ||
        !binary_check_budget(path, trace->tables_len, error))
        return FALSE;
    trace->tables = g_malloc(MAX(trace->tables_len, 1));
    n = binary_pread(trace->fd, trace->tables, trace->tables_len,
                     FSIM_BINARY_HEADER_BYTES + trace->n_records * FSIM_BINARY_RECORD_BYTES);
    if (n < 0)
        return binary_io_error(path, error);
    if ((uint64_t)n != trace->tables_len)
        return binary_error(path, error, FSIM_TRACE_ERROR_TRUNCATED,
                            "the tables after the last record are cut short (the file shrank "
                            "while it was opened)");
    return binary_check_tables(trace, path, error);
}

/* Read up to @len bytes of @in into @buf (all of them unless the input ends); FALSE with an
 * I/O error naming @path. */
static gboolean
binary_read_input(GInputStream *in, const char *path, guint8 *buf, gsize len, gsize *got,
                  GError **error)
{
    g_autoptr(GError) local_error = NULL;

    if (g_input_stream_read_all(in, buf, len, got, NULL, &local_error))
        return TRUE;
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", path, local_error->message);
    return FALSE;
}

/* A gzip-compressed file: one pass of decompression to learn its length and keep its tables
 * (what follows the records the header declares), holding one buffer of the rest. */
static gboolean
binary_open_gzip(BinaryTrace *trace, const char *path, GError **error)
{
    g_autoptr(GInputStream) in = fsim_input_open(path, error);
    g_autoptr(GByteArray) tail = g_byte_array_new();
    g_autofree guint8 *chunk = g_malloc(BINARY_GZIP_CHUNK);
    uint64_t n_records, records_end;
    gsize got;

    if (in == NULL ||
        !binary_read_input(in, path, trace->header, sizeof(trace->header), &got, error))
        return FALSE;
    trace->len = got;
    n_records = fsim_binary_load64(trace->header + FSIM_BINARY_OFF_RECORDS);
    records_end = n_records <= (G_MAXUINT64 - FSIM_BINARY_HEADER_BYTES) / FSIM_BINARY_RECORD_BYTES
                      ? FSIM_BINARY_HEADER_BYTES + n_records * FSIM_BINARY_RECORD_BYTES
                      : G_MAXUINT64;
    /* Through the records without keeping them (a chunk never crosses their end), then the
     * tables kept. */
    while (got == sizeof(trace->header) || got == BINARY_GZIP_CHUNK) {
        gsize want = BINARY_GZIP_CHUNK;

        if (trace->len < records_end && records_end - trace->len < want)
            want = (gsize)(records_end - trace->len);
        if (!binary_read_input(in, path, chunk, want, &got, error))
            return FALSE;
        if (trace->len >= records_end) {
            if (!binary_check_budget(path, (uint64_t)tail->len + got, error))
                return FALSE;
            g_byte_array_append(tail, chunk, (guint)got);
        }
        trace->len += got;
        if (got < want)
            break; /* the end of the input */
        got = BINARY_GZIP_CHUNK;
    }
    if (!binary_check_layout(trace, path, error))
        return FALSE;
    if (tail->len != trace->tables_len)
        return binary_error(path, error, FSIM_TRACE_ERROR_TRUNCATED,
                            "the tables after the last record are cut short");
    trace->tables = g_byte_array_free(g_steal_pointer(&tail), FALSE);
    return binary_check_tables(trace, path, error);
}

static void
binary_close(FsimTrace *base)
{
    BinaryTrace *trace = (BinaryTrace *)base;

    if (trace->fd >= 0)
        close(trace->fd);
    g_free(trace->streams);
    g_free(trace->tables);
    g_free(trace);
}

static FsimTrace *
binary_open(const char *path, GError **error)
{
    BinaryTrace *trace = g_new0(BinaryTrace, 1);
    guint8 magic[2] = {0};
    gboolean ok;

    fsim_trace_init(&trace->base, &fsim_trace_format_binary, path);
    trace->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (trace->fd < 0) {
        ok = binary_io_error(path, error);
    } else if (binary_pread(trace->fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        close(trace->fd);
        trace->fd = -1;
        trace->gzip = TRUE;
        ok = binary_open_gzip(trace, path, error);
    } else {
        ok = binary_open_plain(trace, path, error);
    }
    if (!ok) {
        fsim_trace_close(&trace->base);
        return NULL;
    }
    fsim_trace_add_device(&trace->base, 0);
    return &trace->base;
}

static FsimTraceStream *
binary_stream_open(FsimTrace *base, uint32_t device, GError **error)
{
    const BinaryTrace *trace = (const BinaryTrace *)base;
    g_autofree BinaryStream *s = g_new0(BinaryStream, 1);

    (void)device;
    s->trace = trace;
    if (trace->gzip) {
        guint8 header[FSIM_BINARY_HEADER_BYTES];
        gsize got;

        s->in = fsim_input_open(base->path, error);
        if (s->in == NULL ||
            !binary_read_input(s->in, base->path, header, sizeof(header), &got, error)) {
            g_clear_object(&s->in);
            return NULL;
        }
        if (got != sizeof(header) || memcmp(header, trace->header, sizeof(header)) != 0) {
            g_clear_object(&s->in);
            binary_error(base->path, error, FSIM_TRACE_ERROR_HEADER,
                         "the header changed since the file was opened");
            return NULL;
        }
    }
    return &g_steal_pointer(&s)->base;
}

static void
binary_stream_close(FsimTraceStream *stream)
{
    BinaryStream *s = (BinaryStream *)stream;

    if (s->map != NULL)
        munmap(s->map, s->map_len);
    g_clear_object(&s->in);
    g_free(s->buf);
    g_free(s);
}

typedef enum {
    WINDOW_MAPPED,
    WINDOW_UNMAPPABLE, /* mmap() refused: read the records instead */
    WINDOW_SHRUNK,     /* the file no longer holds the records */
} WindowMapping;

/* Map the window of @count records from s->next. */
static WindowMapping
binary_map_window(BinaryStream *s, uint64_t count)
{
    const BinaryTrace *t = s->trace;
    uint64_t start = FSIM_BINARY_HEADER_BYTES + s->next * FSIM_BINARY_RECORD_BYTES;
    uint64_t end = start + count * FSIM_BINARY_RECORD_BYTES;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t offset = start / page * page;
    struct stat st;
    int flags = MAP_PRIVATE;
    void *map;

    /* Touching a page past the end of a file that shrank would be SIGBUS, not an error. */
    if (fstat(t->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return WINDOW_UNMAPPABLE;
    if ((uint64_t)st.st_size < end)
        return WINDOW_SHRUNK;
#ifdef MAP_POPULATE
    flags |= MAP_POPULATE; /* fault the window's pages in now, in bulk, not one at a time */
#endif
    map = mmap(NULL, (size_t)(end - offset), PROT_READ, flags, t->fd, (off_t)offset);
    if (map == MAP_FAILED)
        return WINDOW_UNMAPPABLE;
    if (s->map != NULL)
        munmap(s->map, s->map_len);
    s->map = map;
    s->map_len = (gsize)(end - offset);
    s->window = (const guint8 *)map + (start - offset);
    return WINDOW_MAPPED;
}

/* The next window of records, from s->next: mapped, or read into s->buf. */
static gboolean
binary_next_window(BinaryStream *s, GError **error)
{
    const BinaryTrace *t = s->trace;
    const char *path = t->base.path;
    uint64_t count = MIN(binary_window_bytes / FSIM_BINARY_RECORD_BYTES, t->n_records - s->next);
    gsize len = (gsize)(count * FSIM_BINARY_RECORD_BYTES);
    gsize got = 0;
    WindowMapping mapping = t->gzip ? WINDOW_UNMAPPABLE : binary_map_window(s, count);

    if (mapping == WINDOW_UNMAPPABLE) {
        if (s->buf == NULL)
            s->buf = g_malloc(binary_window_bytes);
        if (t->gzip) {
            if (!binary_read_input(s->in, path, s->buf, len, &got, error))
                return FALSE;
        } else {
            gssize n = binary_pread(t->fd, s->buf, len,
                                    FSIM_BINARY_HEADER_BYTES + s->next * FSIM_BINARY_RECORD_BYTES);

            if (n < 0)
                return binary_io_error(path, error);
            got = (gsize)n;
        }
        s->window = s->buf;
    } else if (mapping == WINDOW_MAPPED) {
        got = len;
    }
    if (got != len)
        return binary_error(path, error, FSIM_TRACE_ERROR_TRUNCATED,
                            "record %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                            " is cut short: the file changed since it was opened",
                            s->next + got / FSIM_BINARY_RECORD_BYTES + 1, t->n_records);
    s->window_first = s->next;
    s->window_count = count;
    return TRUE;
}

/* Per kind byte: BINARY_KIND_KNOWN for a known kind, and the flags it may carry, as in the text
 * format: `free_requested` (deferred) on a free, `recorded_oom` on an alloc or a free,
 * `inferred` on an empty_cache.  Unknown kinds carry none. */
#define BINARY_KIND_KNOWN ((uint64_t)1 << 32)
static const uint64_t binary_kind_ok[256] = {
    [FSIM_EV_ALLOC] = BINARY_KIND_KNOWN | FSIM_EVF_RECORDED_OOM,
    [FSIM_EV_FREE] = BINARY_KIND_KNOWN | FSIM_EVF_DEFERRED | FSIM_EVF_RECORDED_OOM,
    [FSIM_EV_FREE_COMPLETED] = BINARY_KIND_KNOWN,
    [FSIM_EV_EMPTY_CACHE] = BINARY_KIND_KNOWN | FSIM_EVF_INFERRED,
    [FSIM_EV_MARK] = BINARY_KIND_KNOWN,
    [FSIM_EV_POOL_BEGIN] = BINARY_KIND_KNOWN,
    [FSIM_EV_POOL_END] = BINARY_KIND_KNOWN,
    [FSIM_EV_POOL_RELEASE] = BINARY_KIND_KNOWN,
};

/* The flags a record of @kind may carry. */
static unsigned
binary_kind_flags(unsigned kind)
{
    return (unsigned)(binary_kind_ok[kind & 0xff] & 0xff);
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
    if ((flags & ~binary_kind_flags(kind)) != 0)
        return binary_error(path, error, FSIM_TRACE_ERROR_SYNTAX,
                            "record %" G_GUINT64_FORMAT
                            ": flags 0x%x on a record of kind %s (deferred goes only on free, "
                            "inferred on empty_cache, recorded OOM on alloc and free)",
                            n, flags & ~binary_kind_flags(kind), name);
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
    FsimBinarySum sum = s->sum;

    fsim_binary_sum_bytes(&sum, t->tables, t->tables_len);
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

/* The checks every record passes, without branches on the kind (which a mix of allocs and frees
 * would mispredict): TRUE when one fails.  One test covers an unknown kind, flags the kind may
 * not carry and the reserved bits: word 3's bits above the kind (flags, reserved), with
 * BINARY_KIND_KNOWN added, within the kind's entry of binary_kind_ok. */
static inline gboolean
binary_bad(FsimTime time, uint64_t delta, uint64_t size, uint64_t word3)
{
    unsigned kind = (unsigned)(word3 >> 32) & 0xff;
    unsigned is_alloc = kind == FSIM_EV_ALLOC;
    gboolean bad = (((word3 >> 40) | BINARY_KIND_KNOWN) & ~binary_kind_ok[kind]) != 0;

    bad |= time + delta < time;
    /* an alloc's size is 1 to FSIM_MAX_SIZE, the others' 0 */
    bad |= size - is_alloc >= (is_alloc ? FSIM_MAX_SIZE : 1);
    return bad;
}

/* binary_decode()'s checks and kind-specific fields (id, stream, label) for the rarer kinds and
 * a record that fails a check; FALSE when it does.  Out of line, and given values only, so that
 * the decoding loop keeps its time and sum in registers. */
static G_NO_INLINE gboolean
binary_decode_other(BinaryTables t, const guint8 *p, FsimTime time, FsimEvent *ev)
{
    uint64_t id = fsim_binary_load64(p + 8);
    uint64_t word3 = fsim_binary_load64(p + 24);
    unsigned kind = (unsigned)(word3 >> 32) & 0xff;
    uint32_t stream_index = (uint32_t)word3;

    if (binary_bad(time, fsim_binary_load64(p), fsim_binary_load64(p + 16), word3))
        return FALSE;
    if (kind > FSIM_EV_FREE_COMPLETED)
        return binary_decode_rare(t, kind, id, stream_index, ev);
    if (stream_index >= t.n_streams)
        return FALSE;
    ev->stream = t.streams[stream_index];
    ev->label = NULL;
    ev->id = id;
    return TRUE;
}

/* Decode the record at @p into @ev; FALSE when it fails its checks.  One test covers the
 * common records (alloc, free, free_completed): a known kind and flags, no reserved bits, a
 * stream index in the table, an alloc's size in range, no size on the others, no time
 * overflow. */
static inline gboolean
binary_decode(BinaryTables t, const guint8 *p, FsimTime *time, FsimBinarySum *sum, FsimEvent *ev)
{
    uint64_t delta = fsim_binary_load64(p);
    uint64_t id = fsim_binary_load64(p + 8);
    uint64_t size = fsim_binary_load64(p + 16);
    uint64_t word3 = fsim_binary_load64(p + 24);
    unsigned kind = (unsigned)(word3 >> 32) & 0xff;
    uint32_t stream_index = (uint32_t)word3;

    if (G_UNLIKELY(binary_bad(*time, delta, size, word3) | (kind > FSIM_EV_FREE_COMPLETED) |
                   (stream_index >= t.n_streams))) {
        if (!binary_decode_other(t, p, *time, ev))
            return FALSE;
    } else {
        ev->stream = t.streams[stream_index];
        ev->label = NULL;
        ev->id = id;
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

/* Two 64-bit lanes: a GNU C vector, which the compiler lowers to the target's vector instructions
 * (SSE2 on any x86-64, NEON) or to scalar code. */
typedef uint64_t BinaryPair __attribute__((vector_size(16)));

/* What binary_decode_common() accepts of a record of each kind byte, as masks that leave zero
 * for a record it may decode and a nonzero value for any other: the common kinds (alloc, free,
 * free_completed) with the flags they may carry (as in binary_kind_ok) and their sizes; zero
 * masks (no bit accepted) for the other kinds, which then go to the record-by-record path. */
typedef struct {
    /* Bits of word 3's upper half less one (kind less one, then the flags and reserved bits) a
     * record may have set: the kind 1 to 3 leaves 0 to 2 in the low byte, kind 0 borrows. */
    uint64_t tag_bits;
    /* The size less this (1 for an alloc), within ~size_bits: 1 to 2^60, or 0. */
    uint64_t size_offset;
    uint64_t size_bits;
    uint64_t padding; /* a power of two in size: no multiplication by 3 */
} BinaryCommonRule;

#define BINARY_COMMON_RULE(kind, flags, offset, max) \
    [kind] = {((uint64_t)(flags) << 8) | 3, offset, ~(uint64_t)(max), 0}
static const BinaryCommonRule binary_common_rules[256] = {
    BINARY_COMMON_RULE(FSIM_EV_ALLOC, FSIM_EVF_RECORDED_OOM, 1, FSIM_MAX_SIZE - 1),
    BINARY_COMMON_RULE(FSIM_EV_FREE, FSIM_EVF_DEFERRED | FSIM_EVF_RECORDED_OOM, 0, 0),
    BINARY_COMMON_RULE(FSIM_EV_FREE_COMPLETED, 0, 0, 0),
};
G_STATIC_ASSERT(FSIM_MAX_SIZE - 1 == ((uint64_t)1 << 60) - 1); /* a mask: a power of two less 1 */

/* Decode records at @p (at most @n) into @evs at full speed and add them to @sum, as long as they
 * are common ones (alloc, free, free_completed) that pass their checks: one loop with no call
 * and one branch that leaves it, and no store of the fields binary_prepare() set.  Returns how
 * many it decoded (@time and @sum then include them): fewer than @n when the next record is a
 * rarer kind, a record to refuse, or passes 2^64 ns, for the caller to decode record by record.
 * @index is the index of the record at @p, from 0.
 *
 * The sum is kept in four lanes, two vectors of two: the sums of each record's word j, and the
 * sums of those as they grow.  Word j of record r (from 0) of k adds 4(k - r) - j to B. */
static G_NO_INLINE uint64_t
binary_decode_common(BinaryTables t, const guint8 *p, uint64_t n, uint64_t index, FsimTime *time,
                     FsimBinarySum *sum, FsimEvent *evs)
{
    const guint8 *end = p + n * FSIM_BINARY_RECORD_BYTES;
    FsimTime now = *time;
    BinaryPair lane01 = {0, 0}, lane23 = {0, 0};
    BinaryPair grown01 = {0, 0}, grown23 = {0, 0};
    FsimEvent *ev = evs;
    uint64_t k;

    for (; p < end; p += FSIM_BINARY_RECORD_BYTES, ev++) {
        uint64_t delta = fsim_binary_load64(p);
        uint64_t id = fsim_binary_load64(p + 8);
        uint64_t size = fsim_binary_load64(p + 16);
        uint64_t word3 = fsim_binary_load64(p + 24);
        uint64_t tag = word3 >> 32; /* kind, flags, reserved */
        unsigned kind = (unsigned)tag & 0xff;
        const BinaryCommonRule *rule = &binary_common_rules[kind];
        uint32_t stream_index = (uint32_t)word3;
        BinaryPair w01, w23;

        /* A page ahead: the hardware prefetcher stops at page boundaries, and the pages of a
         * mapping are scattered. */
        __builtin_prefetch(p + BINARY_PREFETCH * FSIM_BINARY_RECORD_BYTES);
        if (G_UNLIKELY((((tag - 1) & ~rule->tag_bits) |
                        ((size - rule->size_offset) & rule->size_bits)) != 0))
            break;
        if (G_UNLIKELY(stream_index >= t.n_streams || now + delta < now))
            break;
        memcpy(&w01, p, sizeof(w01));
        memcpy(&w23, p + 16, sizeof(w23));
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
        w01 = (BinaryPair){delta, id};
        w23 = (BinaryPair){size, word3};
#endif
        lane01 += w01;
        lane23 += w23;
        grown01 += lane01;
        grown23 += lane23;
        now += delta;
        ev->time = now;
        ev->index = ++index;
        ev->id = id;
        ev->size = size;
        ev->stream = t.streams[stream_index];
        ev->flags = (uint32_t)(tag >> 8);
        ev->kind = (FsimEventKind)kind;
    }
    k = (uint64_t)(ev - evs);
    *time = now;
    sum->b += 4 * k * sum->a + 4 * (grown01[0] + grown01[1] + grown23[0] + grown23[1]) -
              (lane01[1] + 2 * lane23[0] + 3 * lane23[1]);
    sum->a += lane01[0] + lane01[1] + lane23[0] + lane23[1];
    return k;
}

/* Set the fields of @evs that no common record changes (binary_decode() sets every field). */
static void
binary_prepare(BinaryStream *s, FsimEvent *evs, gsize n)
{
    for (gsize i = 0; i < n; i++) {
        evs[i].addr = 0;
        evs[i].device = 0;
        evs[i].stack = 0; /* the binary format keeps no stacks */
        evs[i].label = NULL;
    }
    s->prepared = evs;
    s->prepared_len = n;
}

/* Decode the record at @p, s->next, with every check and field: the rarer kinds, and the records
 * binary_decode_common() stops at.  FALSE when it fails its checks, which @error names. */
static gboolean
binary_decode_careful(BinaryStream *s, BinaryTables tables, const guint8 *p, FsimEvent *ev,
                      GError **error)
{
    if (!binary_decode(tables, p, &s->time, &s->sum, ev))
        return binary_bad_record(s, p, error);
    ev->index = s->next + 1;
    return TRUE;
}

static gsize
binary_stream_read(FsimTraceStream *stream, FsimEvent *evs, gsize max, GError **error)
{
    BinaryStream *s = (BinaryStream *)stream;
    const BinaryTrace *t = s->trace;
    uint64_t next = s->next;
    uint64_t n;
    BinaryTables tables = {t->streams, t->n_streams, t->strings, t->strings_bytes};
    const guint8 *p;

    if (G_UNLIKELY(next >= t->n_records)) {
        if (next == t->n_records) {
            s->next++;
            (void)binary_check_sum(s, error);
        }
        return 0;
    }
    if (next >= s->window_first + s->window_count) {
        if (!binary_next_window(s, error))
            return 0;
    }
    n = MIN((uint64_t)MIN(max, BINARY_CHUNK), s->window_first + s->window_count - next);
    p = s->window + (next - s->window_first) * FSIM_BINARY_RECORD_BYTES;
    if (G_UNLIKELY(evs != s->prepared || n > s->prepared_len))
        binary_prepare(s, evs, n);
    for (uint64_t done = 0;;) {
        done += binary_decode_common(tables, p + done * FSIM_BINARY_RECORD_BYTES, n - done,
                                     next + done, &s->time, &s->sum, evs + done);
        if (G_LIKELY(done == n))
            break;
        /* A rarer kind, or a record to refuse, which this names. */
        s->next = next + done;
        if (!binary_decode_careful(s, tables, p + done * FSIM_BINARY_RECORD_BYTES, evs + done,
                                   error))
            return 0;
        if (evs[done].label != NULL)
            s->prepared = NULL; /* a mark: labels to clear */
        done++;
    }
    s->next = next + n;
    return (gsize)n;
}

const FsimTraceFormat fsim_trace_format_binary = {
    .name = "binary",
    .summary = "fragsim's binary trace (fragsim-trace binary v1): fixed-size records, streamed",
    .probe = binary_probe,
    .open = binary_open,
    .close = binary_close,
    .stream_open = binary_stream_open,
    .stream_read = binary_stream_read,
    .stream_close = binary_stream_close,
};
