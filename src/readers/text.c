/* SPDX-License-Identifier: MIT */
/*
 * The native text format, `fragsim-trace v1` (docs/trace-formats.md):
 *
 *     fragsim-trace v1
 *     # time_ns  kind            id     size      stream
 *     0          alloc           1      1048576   0
 *     2000       free            1                0
 *     9000       mark            step-1
 *
 * One event per line, fields separated by spaces or tabs, `#` starting a comment where a field
 * would start, blank lines ignored, `.gz` read transparently.  The reader streams: it holds one
 * buffer of input and the set of live ids (to refuse an id allocated twice with its line number),
 * so memory grows with live allocations, not with the length of the trace.  Lines are split by
 * hand rather than with GDataInputStream, which allocates a string per line: this reader is the
 * harness limit of every replay benchmark.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/trace.h"

#include "core/live-table.h"
#include "readers.h"

#define TEXT_HEADER      "fragsim-trace v1"
#define TEXT_MAGIC       "fragsim-trace"
#define TEXT_BUFFER_SIZE (256 * 1024)
#define TEXT_MAX_LINE    (1024 * 1024)
#define TEXT_MAX_FIELDS  8

typedef struct {
    FsimTrace base;
} TextTrace;

typedef struct {
    FsimTraceStream base;
    char *path;
    GInputStream *in;
    char *buf;
    gsize cap;
    gsize start; /* first unread byte */
    gsize end;   /* one past the last byte read */
    gboolean eof;
    uint64_t line;
    FsimTime last_time;
    FsimLiveTable live; /* ids allocated and not yet freed (or freed and pending) */
    char *label;        /* the current mark's label */
} TextStream;

static gboolean
text_probe(const guint8 *head, gsize len)
{
    return len >= strlen(TEXT_MAGIC) && memcmp(head, TEXT_MAGIC, strlen(TEXT_MAGIC)) == 0;
}

static gboolean G_GNUC_PRINTF(4, 5)
    text_error(TextStream *s, GError **error, FsimTraceError code, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, FSIM_TRACE_ERROR, code, "%s:%" G_GUINT64_FORMAT ": %s", s->path, s->line,
                message);
    return FALSE;
}

/* Read the next line into [*line, *line + *len), without its newline.  FALSE at the end of the
 * input (error unset) or on failure. */
static gboolean
text_read_line(TextStream *s, char **line, gsize *len, GError **error)
{
    for (;;) {
        char *nl = s->start < s->end ? memchr(s->buf + s->start, '\n', s->end - s->start) : NULL;

        if (nl != NULL || (s->eof && s->start < s->end)) {
            char *begin = s->buf + s->start;
            gsize n = nl != NULL ? (gsize)(nl - begin) : s->end - s->start;

            s->start += n + (nl != NULL ? 1 : 0);
            if (n > 0 && begin[n - 1] == '\r')
                n--;
            begin[n] = '\0'; /* the newline, or the spare byte kept at the end of buf */
            *line = begin;
            *len = n;
            s->line++;
            return TRUE;
        }
        if (s->eof)
            return FALSE;
        /* Move the partial line to the front and read more. */
        if (s->start > 0) {
            memmove(s->buf, s->buf + s->start, s->end - s->start);
            s->end -= s->start;
            s->start = 0;
        }
        if (s->end + 1 >= s->cap) {
            if (s->cap >= TEXT_MAX_LINE) {
                s->line++;
                return text_error(s, error, FSIM_TRACE_ERROR_LIMIT, "line longer than %d bytes",
                                  TEXT_MAX_LINE);
            }
            s->cap *= 2;
            s->buf = g_realloc(s->buf, s->cap);
        }
        {
            g_autoptr(GError) local_error = NULL;
            gssize n = g_input_stream_read(s->in, s->buf + s->end, s->cap - s->end - 1, NULL,
                                           &local_error);

            if (n < 0) {
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", s->path,
                            local_error->message);
                return FALSE;
            }
            if (n == 0)
                s->eof = TRUE;
            s->end += (gsize)n;
        }
    }
}

static FsimTraceStream *
text_stream_new(const char *path, GError **error)
{
    TextStream *s;
    g_autoptr(GInputStream) in = fsim_input_open(path, error);

    if (in == NULL)
        return NULL;
    s = g_new0(TextStream, 1);
    s->path = g_strdup(path);
    s->in = g_steal_pointer(&in);
    s->cap = TEXT_BUFFER_SIZE;
    s->buf = g_malloc(s->cap);
    fsim_live_table_init(&s->live);
    return &s->base;
}

static void
text_stream_close(FsimTraceStream *stream)
{
    TextStream *s = (TextStream *)stream;

    g_clear_object(&s->in);
    g_free(s->buf);
    g_free(s->path);
    g_free(s->label);
    fsim_live_table_clear(&s->live);
    g_free(s);
}

static gboolean
text_read_header(TextStream *s, GError **error)
{
    char *line;
    gsize len;

    if (!text_read_line(s, &line, &len, error)) {
        if (error != NULL && *error != NULL)
            return FALSE;
        return text_error(s, error, FSIM_TRACE_ERROR_EMPTY, "the file is empty");
    }
    if (strcmp(line, TEXT_HEADER) != 0) {
        if (g_str_has_prefix(line, TEXT_MAGIC " "))
            return text_error(s, error, FSIM_TRACE_ERROR_HEADER,
                              "unsupported version '%s' (this fragsim reads '" TEXT_HEADER "')",
                              line + strlen(TEXT_MAGIC) + 1);
        return text_error(s, error, FSIM_TRACE_ERROR_HEADER,
                          "the first line must be exactly '" TEXT_HEADER "'");
    }
    return TRUE;
}

static FsimTraceStream *
text_stream_open(FsimTrace *trace, uint32_t device, GError **error)
{
    FsimTraceStream *stream = text_stream_new(trace->path, error);

    (void)device;
    if (stream == NULL)
        return NULL;
    if (!text_read_header((TextStream *)stream, error)) {
        text_stream_close(stream);
        return NULL;
    }
    return stream;
}

/* A field of the current line: [ptr, ptr + len), not NUL-terminated. */
typedef struct {
    const char *ptr;
    gsize len;
} Field;

/* Split @line at spaces and tabs into at most TEXT_MAX_FIELDS fields, stopping at a field that
 * starts with '#'.  The line is not modified (a mark's label is its raw rest).  Returns the
 * count, or TEXT_MAX_FIELDS + 1 when there are more; *nul tells whether a NUL byte ended the
 * scan before the end of the line. */
static guint
text_split(const char *line, gsize len, Field *fields, gboolean *nul)
{
    guint n = 0;
    const char *p = line;

    *nul = FALSE;
    for (;;) {
        const char *start;

        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#')
            return n;
        if (*p == '\0') {
            *nul = p != line + len; /* a NUL byte before the end of the line */
            return n;
        }
        if (n == TEXT_MAX_FIELDS)
            return n + 1;
        start = p;
        while (*p != '\0' && *p != ' ' && *p != '\t')
            p++;
        fields[n].ptr = start;
        fields[n].len = (gsize)(p - start);
        n++;
    }
}

static gboolean
field_is(const Field *f, const char *word, gsize word_len)
{
    return f->len == word_len && memcmp(f->ptr, word, word_len) == 0;
}

#define FIELD_IS(f, literal) field_is((f), literal, sizeof(literal) - 1)

/* A decimal u64 field; FALSE on anything else (sign, non-digit, overflow). */
static gboolean
field_u64(const Field *f, uint64_t *out)
{
    uint64_t value = 0;

    if (f->len == 0 || f->len > 20)
        return FALSE;
    /* Up to 19 digits cannot overflow; only the 20th needs the check. */
    for (gsize i = 0; i < MIN(f->len, (gsize)19); i++) {
        unsigned digit = (unsigned)(f->ptr[i] - '0');

        if (digit > 9)
            return FALSE;
        value = value * 10 + digit;
    }
    if (f->len == 20) {
        unsigned digit = (unsigned)(f->ptr[19] - '0');

        if (digit > 9 || value > (UINT64_MAX - digit) / 10)
            return FALSE;
        value = value * 10 + digit;
    }
    *out = value;
    return TRUE;
}

static gboolean
text_field_u64(TextStream *s, const Field *f, const char *what, uint64_t *out, GError **error)
{
    g_autofree char *text = NULL;

    if (field_u64(f, out))
        return TRUE;
    text = g_strndup(f->ptr, f->len);
    if (text[0] == '-')
        return text_error(s, error, FSIM_TRACE_ERROR_NUMBER, "%s '%s' is negative", what, text);
    return text_error(s, error, FSIM_TRACE_ERROR_NUMBER,
                      "%s '%s' is not a non-negative 64-bit integer", what, text);
}

/* The label of a mark: the rest of the line after the kind field, trimmed. */
static char *
text_mark_label(const char *after_kind, const char *line_end)
{
    const char *p = after_kind;
    const char *end = line_end;

    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return g_strndup(p, (gsize)(end - p));
}

static gboolean
text_stream_next(FsimTraceStream *stream, FsimEvent *ev, GError **error)
{
    TextStream *s = (TextStream *)stream;
    char *line;
    gsize len;

    while (text_read_line(s, &line, &len, error)) {
        Field f[TEXT_MAX_FIELDS];
        guint n;
        const Field *kind;
        guint expect_min;
        guint expect_max;
        FsimLiveEntry *entry;

        gboolean nul;

        n = text_split(line, len, f, &nul);
        if (nul)
            return text_error(s, error, FSIM_TRACE_ERROR_SYNTAX, "NUL byte in the line");
        if (n == 0)
            continue;
        memset(ev, 0, sizeof(*ev));
        ev->index = s->line;
        if (!text_field_u64(s, &f[0], "time", &ev->time, error))
            return FALSE;
        if (ev->time < s->last_time)
            return text_error(s, error, FSIM_TRACE_ERROR_TIME,
                              "time %" G_GUINT64_FORMAT
                              " ns goes backwards (previous event at %" G_GUINT64_FORMAT " ns)",
                              ev->time, s->last_time);
        s->last_time = ev->time;
        if (n < 2)
            return text_error(s, error, FSIM_TRACE_ERROR_SYNTAX, "missing the event kind");
        kind = &f[1];
        if (FIELD_IS(kind, "mark")) {
            g_free(s->label);
            s->label = text_mark_label(kind->ptr + kind->len, line + len);
            ev->kind = FSIM_EV_MARK;
            ev->label = s->label;
            return TRUE;
        }
        if (n > TEXT_MAX_FIELDS)
            return text_error(s, error, FSIM_TRACE_ERROR_SYNTAX, "too many fields");
        /* An optional last word flags an event: `alloc ID SIZE STREAM recorded_oom`, `free ID
         * STREAM recorded_oom`, `empty_cache inferred` (see event.h). */
        if (FIELD_IS(kind, "alloc")) {
            ev->kind = FSIM_EV_ALLOC;
            expect_min = 4;
            expect_max = 5;
            if (n == 6 && FIELD_IS(&f[5], "recorded_oom")) {
                ev->flags |= FSIM_EVF_RECORDED_OOM;
                n--;
            }
        } else if (FIELD_IS(kind, "free") || FIELD_IS(kind, "free_requested")) {
            ev->kind = FSIM_EV_FREE;
            if (kind->len > 4)
                ev->flags |= FSIM_EVF_DEFERRED;
            expect_min = 3;
            expect_max = 4;
            if (n == 5 && FIELD_IS(&f[4], "recorded_oom")) {
                ev->flags |= FSIM_EVF_RECORDED_OOM;
                n--;
            }
        } else if (FIELD_IS(kind, "free_completed")) {
            ev->kind = FSIM_EV_FREE_COMPLETED;
            expect_min = 3;
            expect_max = 4;
        } else if (FIELD_IS(kind, "pool_begin") || FIELD_IS(kind, "pool_end")) {
            ev->kind = kind->len == 10 ? FSIM_EV_POOL_BEGIN : FSIM_EV_POOL_END;
            expect_min = 3;
            expect_max = 4;
        } else if (FIELD_IS(kind, "pool_release")) {
            ev->kind = FSIM_EV_POOL_RELEASE;
            expect_min = 3;
            expect_max = 3;
        } else if (FIELD_IS(kind, "empty_cache")) {
            ev->kind = FSIM_EV_EMPTY_CACHE;
            expect_min = 2;
            expect_max = 2;
            if (n == 3 && FIELD_IS(&f[2], "inferred")) {
                ev->flags |= FSIM_EVF_INFERRED;
                n--;
            }
        } else {
            g_autofree char *name = g_strndup(kind->ptr, kind->len);

            return text_error(s, error, FSIM_TRACE_ERROR_KIND,
                              "unknown event kind '%s' (valid: alloc, free, free_requested, "
                              "free_completed, empty_cache, mark, pool_begin, pool_end, "
                              "pool_release)",
                              name);
        }
        if (n < expect_min) {
            g_autofree char *name = g_strndup(kind->ptr, kind->len);

            return text_error(s, error, FSIM_TRACE_ERROR_SYNTAX, "'%s' needs %s", name,
                              ev->kind == FSIM_EV_ALLOC ? "an id and a size (then a stream)"
                              : ev->kind == FSIM_EV_POOL_RELEASE ? "a pool"
                              : ev->kind >= FSIM_EV_POOL_BEGIN   ? "a pool (then a stream)"
                                                                 : "an id (then a stream)");
        }
        if (n > expect_max) {
            g_autofree char *name = g_strndup(kind->ptr, kind->len);
            g_autofree char *extra = g_strndup(f[expect_max].ptr, f[expect_max].len);

            return text_error(s, error, FSIM_TRACE_ERROR_SYNTAX, "unexpected field '%s' after '%s'",
                              extra, name);
        }
        if (ev->kind == FSIM_EV_EMPTY_CACHE)
            return TRUE;
        if (ev->kind >= FSIM_EV_POOL_BEGIN) {
            if (!text_field_u64(s, &f[2], "pool", &ev->id, error))
                return FALSE;
            if (ev->id == 0)
                return text_error(s, error, FSIM_TRACE_ERROR_NUMBER,
                                  "pool 0 is the default pool: private pools are numbered from 1");
            if (n == 4 && !text_field_u64(s, &f[3], "stream", &ev->stream, error))
                return FALSE;
            return TRUE;
        }
        if (!text_field_u64(s, &f[2], "id", &ev->id, error))
            return FALSE;
        if (ev->kind == FSIM_EV_ALLOC) {
            if (!text_field_u64(s, &f[3], "size", &ev->size, error))
                return FALSE;
            if (ev->size == 0)
                return text_error(s, error, FSIM_TRACE_ERROR_SIZE, "alloc of zero bytes");
            if (ev->size > FSIM_MAX_SIZE)
                return text_error(s, error, FSIM_TRACE_ERROR_SIZE,
                                  "size %" G_GUINT64_FORMAT " is absurd (above 2^60 bytes)",
                                  ev->size);
            if (n == 5 && !text_field_u64(s, &f[4], "stream", &ev->stream, error))
                return FALSE;
        } else if (n == 4 && !text_field_u64(s, &f[3], "stream", &ev->stream, error)) {
            return FALSE;
        }
        entry = fsim_live_table_lookup(&s->live, ev->id);
        switch (ev->kind) {
        case FSIM_EV_ALLOC:
            if (entry != NULL)
                return text_error(s, error, FSIM_TRACE_ERROR_DUPLICATE,
                                  "id %" G_GUINT64_FORMAT " is allocated again while %s", ev->id,
                                  entry->state == FSIM_LIVE_PENDING ? "its free is pending"
                                                                    : "it is still live");
            fsim_live_table_insert(&s->live, ev->id);
            break;
        case FSIM_EV_FREE:
            if (entry != NULL && entry->state == FSIM_LIVE_ALLOCATED) {
                if ((ev->flags & FSIM_EVF_DEFERRED) != 0)
                    entry->state = FSIM_LIVE_PENDING;
                else
                    fsim_live_table_remove(&s->live, entry);
            }
            break;
        case FSIM_EV_FREE_COMPLETED:
            if (entry != NULL && entry->state == FSIM_LIVE_PENDING)
                fsim_live_table_remove(&s->live, entry);
            break;
        default:
            break;
        }
        return TRUE;
    }
    return FALSE;
}

static FsimTrace *
text_open(const char *path, GError **error)
{
    TextTrace *trace;
    FsimTraceStream *probe = text_stream_new(path, error);

    if (probe == NULL)
        return NULL;
    if (!text_read_header((TextStream *)probe, error)) {
        text_stream_close(probe);
        return NULL;
    }
    text_stream_close(probe);
    trace = g_new0(TextTrace, 1);
    fsim_trace_init(&trace->base, &fsim_trace_format_text, path);
    fsim_trace_add_device(&trace->base, 0);
    return &trace->base;
}

static void
text_close(FsimTrace *trace)
{
    g_free(trace);
}

const FsimTraceFormat fsim_trace_format_text = {
    .name = "text",
    .summary = "fragsim's native text trace (fragsim-trace v1), optionally gzip-compressed",
    .probe = text_probe,
    .open = text_open,
    .close = text_close,
    .stream_open = text_stream_open,
    .stream_next = text_stream_next,
    .stream_close = text_stream_close,
};
