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
 *
 * A plain (uncompressed) regular file is mapped rather than read, and the common lines (`TIME
 * alloc ID SIZE [STREAM]`, `TIME free|free_requested|free_completed ID [STREAM]`) are parsed in
 * one scan straight from the mapping, integers included, with no copy and no search for the
 * newline first (text_fast_lines()), a batch of events at a time (the format's stream_read).
 * Anything else, and any line the fast scan would have to refuse, goes to the general parser on
 * a NUL-terminated copy of the line, so both paths give the same events and the same errors.
 * The live ids are a set of their own (id-set.h), not the engine's live table.
 */
#define _DEFAULT_SOURCE /* madvise() */

#include <glib.h>

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fragsim/trace.h"

#include "id-set.h"
#include "line-reader.h"
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
    FsimLineReader lines; /* with no input stream over a mapped file: buf holds a line's copy */
    FsimTime last_time;
    FsimIdSet live; /* ids allocated and not yet freed (or freed and pending) */
    char *label;    /* the current mark's label */
    GError *error;  /* an error found after the events of a batch, for the next read */
    /* A mapped plain file: */
    const char *map;
    gsize map_len;
    gsize map_pos;      /* start of the next line */
    gsize map_released; /* the pages before it were handed back (MADV_DONTNEED) */
} TextStream;

/* Read this far past the last release, the pages behind are handed back: the mapped file's
 * pages would otherwise stay resident, and the process's memory would grow with the trace. */
#define TEXT_RELEASE_STEP (8u << 20)

/* The fast scan stops this many bytes before the end of a mapped file: every field it reads
 * starts before, so that it reads eight bytes at a time past the field without a bounds check.
 * The last lines go through the general parser. */
#define TEXT_FAST_MARGIN 64

static gboolean
text_probe(const guint8 *head, gsize len)
{
    return len >= strlen(TEXT_MAGIC) && memcmp(head, TEXT_MAGIC, strlen(TEXT_MAGIC)) == 0;
}

/* The mapped file's next line, copied into buf and NUL-terminated, for the general parser. */
static gboolean
text_map_read_line(TextStream *s, char **line, gsize *len, GError **error)
{
    const char *begin = s->map + s->map_pos;
    gsize left = s->map_len - s->map_pos;
    const char *nl;
    gsize n;

    if (left == 0)
        return FALSE;
    nl = memchr(begin, '\n', left);
    n = nl != NULL ? (gsize)(nl - begin) : left;
    s->lines.line++;
    if (n >= TEXT_MAX_LINE)
        return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_LIMIT,
                                      "line longer than %d bytes", TEXT_MAX_LINE);
    s->map_pos += n + (nl != NULL ? 1 : 0);
    if (n > 0 && begin[n - 1] == '\r')
        n--;
    if (n + 1 > s->lines.cap) {
        s->lines.cap = n + 1;
        s->lines.buf = g_realloc(s->lines.buf, s->lines.cap);
    }
    memcpy(s->lines.buf, begin, n);
    s->lines.buf[n] = '\0';
    *line = s->lines.buf;
    *len = n;
    return TRUE;
}

/* Read the next line into [*line, *line + *len), without its newline.  FALSE at the end of the
 * input (error unset) or on failure.  Blank and comment lines after the header are skipped. */
static gboolean
text_read_line(TextStream *s, char **line, gsize *len, GError **error)
{
    if (s->map != NULL)
        return text_map_read_line(s, line, len, error);
    return fsim_line_reader_next(
        &s->lines, s->lines.line > 0 ? FSIM_LINES_SKIP_COMMENTS : FSIM_LINES_ALL, line, len, error);
}

/* Map @path when it is a non-empty regular file that is not gzip-compressed; NULL otherwise (the
 * caller then reads it as a stream, which reports any error). */
static const char *
text_map(const char *path, gsize *len)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    unsigned char magic[2] = {0};
    void *map = MAP_FAILED;

    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 2 &&
        pread(fd, magic, 2, 0) == 2 && !(magic[0] == 0x1f && magic[1] == 0x8b)) {
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    close(fd);
    if (map == MAP_FAILED)
        return NULL;
    (void)madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
    *len = (gsize)st.st_size;
    return map;
}

/* A stream over @path, mapped when @map_ok and the file allows it. */
static FsimTraceStream *
text_stream_new(const char *path, gboolean map_ok, GError **error)
{
    TextStream *s;
    g_autoptr(GInputStream) in = NULL;
    gsize map_len = 0;
    const char *map = map_ok ? text_map(path, &map_len) : NULL;

    if (map == NULL) {
        in = fsim_input_open(path, error);
        if (in == NULL)
            return NULL;
    }
    s = g_new0(TextStream, 1);
    fsim_line_reader_init(&s->lines, path, g_steal_pointer(&in),
                          map != NULL ? 256 : TEXT_BUFFER_SIZE, TEXT_MAX_LINE, TEXT_MAX_LINE);
    s->map = map;
    s->map_len = map_len;
    fsim_id_set_init(&s->live);
    return &s->base;
}

static void
text_stream_close(FsimTraceStream *stream)
{
    TextStream *s = (TextStream *)stream;

    if (s->map != NULL)
        munmap((void *)(uintptr_t)s->map, s->map_len);
    fsim_line_reader_clear(&s->lines);
    g_free(s->label);
    fsim_id_set_clear(&s->live);
    g_clear_error(&s->error);
    g_free(s);
}

static gboolean
text_read_header(TextStream *s, GError **error)
{
    char *line;
    gsize len;

    if (!text_read_line(s, &line, &len, error))
        return fsim_line_reader_empty(&s->lines, error);
    if (strcmp(line, TEXT_HEADER) != 0) {
        if (g_str_has_prefix(line, TEXT_MAGIC " "))
            return fsim_line_reader_error(
                &s->lines, error, FSIM_TRACE_ERROR_HEADER,
                "unsupported version '%s' (this fragsim reads '" TEXT_HEADER "')",
                line + strlen(TEXT_MAGIC) + 1);
        return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_HEADER,
                                      "the first line must be exactly '" TEXT_HEADER "'");
    }
    return TRUE;
}

static FsimTraceStream *
text_stream_open(FsimTrace *trace, uint32_t device, GError **error)
{
    FsimTraceStream *stream = text_stream_new(trace->path, TRUE, error);

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

/* The event kinds a line may name, `mark` apart: the word, the event and its flags, how many
 * fields its line has (the time and the kind included), what the missing ones are, and the
 * optional last word that flags the event (`alloc ID SIZE STREAM recorded_oom`, `free ID STREAM
 * recorded_oom`, `empty_cache inferred`: see event.h). */
typedef struct {
    const char *word;
    FsimEventKind kind;
    uint32_t flags;
    guint min_fields, max_fields;
    const char *needs;
    const char *flag_word;
    uint32_t flag;
} TextKind;

/* clang-format off */
static const TextKind text_kinds[] = {
    {"alloc", FSIM_EV_ALLOC, 0, 4, 5, "an id and a size (then a stream)", "recorded_oom", FSIM_EVF_RECORDED_OOM},
    {"free", FSIM_EV_FREE, 0, 3, 4, "an id (then a stream)", "recorded_oom", FSIM_EVF_RECORDED_OOM},
    {"free_requested", FSIM_EV_FREE, FSIM_EVF_DEFERRED, 3, 4, "an id (then a stream)", "recorded_oom", FSIM_EVF_RECORDED_OOM},
    {"free_completed", FSIM_EV_FREE_COMPLETED, 0, 3, 4, "an id (then a stream)", NULL, 0},
    {"pool_begin", FSIM_EV_POOL_BEGIN, 0, 3, 4, "a pool (then a stream)", NULL, 0},
    {"pool_end", FSIM_EV_POOL_END, 0, 3, 4, "a pool (then a stream)", NULL, 0},
    {"pool_release", FSIM_EV_POOL_RELEASE, 0, 3, 3, "a pool", NULL, 0},
    {"empty_cache", FSIM_EV_EMPTY_CACHE, 0, 2, 2, "", "inferred", FSIM_EVF_INFERRED},
};
/* clang-format on */

static const TextKind *
text_kind(const Field *word)
{
    for (gsize i = 0; i < G_N_ELEMENTS(text_kinds); i++) {
        if (field_is(word, text_kinds[i].word, strlen(text_kinds[i].word)))
            return &text_kinds[i];
    }
    return NULL;
}

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
        return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_NUMBER,
                                      "%s '%s' is negative", what, text);
    return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_NUMBER,
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

/* The live-id bookkeeping of an alloc or free whose id is at @slot of the set (FSIM_ID_NONE
 * when not live), once the event is known to be valid. */
static inline void
text_track(FsimIdSet *live, const FsimEvent *ev, gsize slot)
{
    switch (ev->kind) {
    case FSIM_EV_ALLOC:
        fsim_id_set_add(live, ev->id);
        break;
    case FSIM_EV_FREE:
        if (fsim_id_set_state(live, slot) == FSIM_ID_LIVE) {
            if ((ev->flags & FSIM_EVF_DEFERRED) != 0)
                fsim_id_set_set_pending(live, slot);
            else
                fsim_id_set_remove(live, slot);
        }
        break;
    case FSIM_EV_FREE_COMPLETED:
        if (fsim_id_set_state(live, slot) == FSIM_ID_PENDING)
            fsim_id_set_remove(live, slot);
        break;
    default:
        break;
    }
}

/* The field count of an event of @type, once a trailing flag word (e.g. `deferred`) is taken
 * off *n and set in @ev. */
static gboolean
text_check_fields(TextStream *s, const Field *f, guint *n, const TextKind *type, FsimEvent *ev,
                  GError **error)
{
    const Field *kind = &f[1];

    if (type->flag_word != NULL && *n == type->max_fields + 1 &&
        field_is(&f[type->max_fields], type->flag_word, strlen(type->flag_word))) {
        ev->flags |= type->flag;
        (*n)--;
    }
    if (*n < type->min_fields) {
        g_autofree char *name = g_strndup(kind->ptr, kind->len);

        return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_SYNTAX, "'%s' needs %s",
                                      name, type->needs);
    }
    if (*n > type->max_fields) {
        g_autofree char *name = g_strndup(kind->ptr, kind->len);
        g_autofree char *extra = g_strndup(f[type->max_fields].ptr, f[type->max_fields].len);

        return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_SYNTAX,
                                      "unexpected field '%s' after '%s'", extra, name);
    }
    return TRUE;
}

/* The fields after the kind of an event whose kind and field count are checked: a pool, or an
 * id with its size and stream; then the live-id bookkeeping. */
static gboolean
text_parse_operands(TextStream *s, const Field *f, guint n, FsimEvent *ev, GError **error)
{
    gsize slot;

    if (ev->kind == FSIM_EV_EMPTY_CACHE)
        return TRUE;
    if (ev->kind >= FSIM_EV_POOL_BEGIN) {
        if (!text_field_u64(s, &f[2], "pool", &ev->id, error))
            return FALSE;
        if (ev->id == 0)
            return fsim_line_reader_error(
                &s->lines, error, FSIM_TRACE_ERROR_NUMBER,
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
            return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_SIZE,
                                          "alloc of zero bytes");
        if (ev->size > FSIM_MAX_SIZE)
            return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_SIZE,
                                          "size %" G_GUINT64_FORMAT " is absurd (above 2^60 bytes)",
                                          ev->size);
        if (n == 5 && !text_field_u64(s, &f[4], "stream", &ev->stream, error))
            return FALSE;
    } else if (n == 4 && !text_field_u64(s, &f[3], "stream", &ev->stream, error)) {
        return FALSE;
    }
    slot = fsim_id_set_find(&s->live, ev->id);
    if (ev->kind == FSIM_EV_ALLOC && slot != FSIM_ID_NONE)
        return fsim_line_reader_error(
            &s->lines, error, FSIM_TRACE_ERROR_DUPLICATE,
            "id %" G_GUINT64_FORMAT " is allocated again while %s", ev->id,
            fsim_id_set_state(&s->live, slot) == FSIM_ID_PENDING ? "its free is pending"
                                                                 : "it is still live");
    text_track(&s->live, ev, slot);
    return TRUE;
}

/* The general parser: one NUL-terminated line of @len bytes.  FALSE on error; *skip when the
 * line holds no event (blank, or a comment). */
static gboolean
text_parse_line(TextStream *s, char *line, gsize len, FsimEvent *ev, gboolean *skip, GError **error)
{
    Field f[TEXT_MAX_FIELDS];
    guint n;
    const Field *kind;
    const TextKind *type;
    gboolean nul;

    n = text_split(line, len, f, &nul);
    if (nul)
        return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_SYNTAX,
                                      "NUL byte in the line");
    if (n == 0) {
        *skip = TRUE;
        return TRUE;
    }
    *skip = FALSE;
    memset(ev, 0, sizeof(*ev));
    ev->index = s->lines.line;
    if (!text_field_u64(s, &f[0], "time", &ev->time, error))
        return FALSE;
    if (ev->time < s->last_time)
        return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_TIME,
                                      "time %" G_GUINT64_FORMAT
                                      " ns goes backwards (previous event at %" G_GUINT64_FORMAT
                                      " ns)",
                                      ev->time, s->last_time);
    s->last_time = ev->time;
    if (n < 2)
        return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_SYNTAX,
                                      "missing the event kind");
    kind = &f[1];
    if (FIELD_IS(kind, "mark")) {
        g_free(s->label);
        s->label = text_mark_label(kind->ptr + kind->len, line + len);
        ev->kind = FSIM_EV_MARK;
        ev->label = s->label;
        return TRUE;
    }
    if (n > TEXT_MAX_FIELDS)
        return fsim_line_reader_error(&s->lines, error, FSIM_TRACE_ERROR_SYNTAX, "too many fields");
    type = text_kind(kind);
    if (type == NULL) {
        g_autofree char *name = g_strndup(kind->ptr, kind->len);

        return fsim_line_reader_error(
            &s->lines, error, FSIM_TRACE_ERROR_KIND,
            "unknown event kind '%s' (valid: alloc, free, free_requested, "
            "free_completed, empty_cache, mark, pool_begin, pool_end, "
            "pool_release)",
            name);
    }
    ev->kind = type->kind;
    ev->flags |= type->flags;
    return text_check_fields(s, f, &n, type, ev, error) && text_parse_operands(s, f, n, ev, error);
}

/* ---- the fast scan of common lines ------------------------------------------------------- */

/* The leading decimal digits of the 8 bytes in @chunk (little-endian, first byte lowest): their
 * count (0 to 8) and, in *value, the number they spell.  SWAR: no branch per digit. */
static inline unsigned
swar_digits(uint64_t chunk, uint64_t *value)
{
    uint64_t x = chunk - UINT64_C(0x3030303030303030);
    /* High bit of each byte that is not a digit: below '0' wraps, above '9' passes 0x80. */
    uint64_t not_digit = (x | (x + UINT64_C(0x7676767676767676))) & UINT64_C(0x8080808080808080);
    unsigned n = not_digit != 0 ? (unsigned)__builtin_ctzll(not_digit) / 8 : 8;

    if (n == 0)
        return 0;
    /* Keep the n digits, moved to the top bytes: the bytes below read as leading zeros. */
    x <<= 8 * (8 - n);
    x = (x * 10) + (x >> 8);
    x = (((x & UINT64_C(0x000000FF000000FF)) * (100 + (UINT64_C(1000000) << 32))) +
         (((x >> 16) & UINT64_C(0x000000FF000000FF)) * (1 + (UINT64_C(10000) << 32)))) >>
        32;
    *value = x;
    return n;
}

static inline uint64_t
load_le64(const char *p)
{
    uint64_t chunk;

    memcpy(&chunk, p, sizeof(chunk));
    return GUINT64_FROM_LE(chunk);
}

static const uint64_t pow10_table[9] = {1,      10,      100,      1000,     10000,
                                        100000, 1000000, 10000000, 100000000};

/* A decimal integer of 1 to 19 digits (which cannot overflow) at @p, with 24 bytes readable
 * there: its end, where the byte is not a digit; NULL for anything else (no digit, 20 or more,
 * which the general parser judges).  Eight digits at a time. */
static inline const char *
fast_u64(const char *p, uint64_t *out)
{
    uint64_t value = 0;
    uint64_t part = 0;
    unsigned n = swar_digits(load_le64(p), &value);

    if (G_LIKELY(n < 8)) {
        *out = value;
        return n != 0 ? p + n : NULL;
    }
    n = swar_digits(load_le64(p + 8), &part);
    value = value * pow10_table[n] + part;
    if (n < 8) {
        *out = value;
        return p + 8 + n;
    }
    part = 0;
    n = swar_digits(load_le64(p + 16), &part);
    if (n > 3)
        return NULL;
    *out = value * pow10_table[n] + part;
    return p + 16 + n;
}

static inline gboolean
is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The blanks at @p (< @end), one at least, skipped; NULL when there is none. */
static inline const char *
fast_blanks(const char *p, const char *end)
{
    if (!is_blank(*p))
        return NULL;
    p++;
    while (G_UNLIKELY(p < end && is_blank(*p)))
        p++;
    return p;
}

/* The blanks between two fields at @p (< @end): the start of the next field, or NULL when there
 * is no blank.  A single space, the common case, costs one test; @p + 1 must be readable. */
static inline const char *
fast_sep(const char *p, const char *end)
{
    if (G_LIKELY(p[0] == ' ' && p[1] > ' '))
        return p + 1;
    return fast_blanks(p, end);
}

/* A common line's fields after its time, as the fast scan reads them. */
typedef struct {
    uint64_t id, size, stream;
    FsimEventKind kind;
    uint32_t flags;
} FastLine;

/* fast_tail()'s general case: blanks, an optional stream, blanks, then the newline or the end of
 * the input. */
static const char *
fast_tail_blanks(const char *p, const char *safe, const char *end, FastLine *f)
{
    if (is_blank(*p)) {
        const char *q = fast_blanks(p, end);

        if (q < end && (unsigned)(*q - '0') <= 9) {
            if (q >= safe || (q = fast_u64(q, &f->stream)) == NULL)
                return NULL;
        }
        p = q;
        while (p < end && is_blank(*p))
            p++;
    }
    if (p == end)
        return p;
    return *p == '\n' ? p + 1 : NULL;
}

/* The end of a common line after its last required number, at @p (at most 19 bytes past a field
 * that starts before @safe): an optional stream into f->stream, blanks, then the newline or the
 * end of the input.  Returns the start of the next line, or NULL. */
static inline const char *
fast_tail(const char *p, const char *safe, const char *end, FastLine *f)
{
    f->stream = 0;
    if (G_LIKELY(*p == '\n'))
        return p + 1;
    /* ` STREAM\n`: the stream starts at most 21 bytes past @safe, where 24 bytes are readable */
    if (G_LIKELY(p[0] == ' ' && (unsigned)(p[1] - '0') <= 9)) {
        const char *q = fast_u64(p + 1, &f->stream);

        if (G_LIKELY(q != NULL && *q == '\n'))
            return q + 1;
        f->stream = 0;
    }
    return fast_tail_blanks(p, safe, end, f);
}

/* The rest of `TIME alloc ID SIZE [STREAM]` after `alloc`, at @p. */
static inline const char *
fast_alloc(const char *p, const char *safe, const char *end, FastLine *f)
{
    f->kind = FSIM_EV_ALLOC;
    f->flags = 0;
    if ((p = fast_sep(p, end)) == NULL || p >= safe || (p = fast_u64(p, &f->id)) == NULL ||
        (p = fast_sep(p, end)) == NULL || p >= safe || (p = fast_u64(p, &f->size)) == NULL)
        return NULL;
    return fast_tail(p, safe, end, f);
}

/* `TIME free|free_requested|free_completed ID [STREAM]` from the kind word at @p (16 bytes
 * readable). */
static inline const char *
fast_free(const char *p, const char *safe, const char *end, FastLine *f)
{
    f->flags = 0;
    f->size = 0;
    if (memcmp(p, "free", 4) != 0)
        return NULL;
    if (p[4] != '_') {
        f->kind = FSIM_EV_FREE;
        p += 4;
    } else if (memcmp(p + 5, "requested", 9) == 0) {
        f->kind = FSIM_EV_FREE;
        f->flags = FSIM_EVF_DEFERRED;
        p += 14;
    } else if (memcmp(p + 5, "completed", 9) == 0) {
        f->kind = FSIM_EV_FREE_COMPLETED;
        p += 14;
    } else {
        return NULL;
    }
    if ((p = fast_sep(p, end)) == NULL || p >= safe || (p = fast_u64(p, &f->id)) == NULL)
        return NULL;
    return fast_tail(p, safe, end, f);
}

/* A common line at @p whose time is known to be @time and whose kind word starts at @q: the
 * start of the next line with the event in @ev and the id set updated, or NULL (nothing
 * changed) when the general parser must judge the line.  The kind is tested once, and the id
 * set's lookup is apart for allocs and frees, so that its branches follow the kind. */
static inline const char *
fast_event(FsimIdSet *live, const char *q, const char *safe, const char *end, FsimEvent *ev)
{
    FastLine f;

    if (memcmp(q, "alloc", 5) == 0) {
        q = fast_alloc(q + 5, safe, end, &f);
        if (q == NULL || f.size == 0 || f.size > FSIM_MAX_SIZE ||
            fsim_id_set_find(live, f.id) != FSIM_ID_NONE)
            return NULL;
        fsim_id_set_add(live, f.id);
    } else {
        gsize slot;
        FsimIdState state;

        q = fast_free(q, safe, end, &f);
        if (q == NULL)
            return NULL;
        slot = fsim_id_set_find(live, f.id);
        state = fsim_id_set_state(live, slot);
        if (state == FSIM_ID_LIVE && (f.flags & FSIM_EVF_DEFERRED) != 0)
            fsim_id_set_set_pending(live, slot);
        else if (state == (f.kind == FSIM_EV_FREE ? FSIM_ID_LIVE : FSIM_ID_PENDING))
            fsim_id_set_remove(live, slot);
    }
    ev->id = f.id;
    ev->size = f.size;
    ev->stream = f.stream;
    ev->addr = 0;
    ev->device = 0;
    ev->flags = f.flags;
    ev->kind = f.kind;
    ev->stack = 0;
    ev->label = NULL;
    return q;
}

/* The next lines of a mapped file, up to @max, as long as they are common lines (`TIME alloc ID
 * SIZE [STREAM]`, `TIME free|free_requested|free_completed ID [STREAM]`, every number of at most
 * 19 digits) that the general parser would accept as they are: their events in @evs, the
 * stream's state updated.  One pass over each line, integers read eight digits at a time.
 * Stops (nothing changed for that line) at the first other line, and TEXT_FAST_MARGIN bytes
 * before the end of the file: every field starts before @safe, so that it can be read eight
 * bytes at a time without a bounds check.  Returns how many. */
static gsize
text_fast_lines(TextStream *s, FsimEvent *evs, gsize max)
{
    const char *p = s->map + s->map_pos;
    const char *end = s->map + s->map_len;
    const char *safe = s->map_len > TEXT_FAST_MARGIN ? end - TEXT_FAST_MARGIN : s->map;
    FsimTime last = s->last_time;
    uint64_t line = s->lines.line;
    gsize n = 0;

    for (; n < max && p < safe; n++) {
        FsimTime time;
        const char *q = fast_u64(p, &time);

        if (q == NULL || time < last || (q = fast_sep(q, end)) == NULL || q >= safe ||
            (q = fast_event(&s->live, q, safe, end, &evs[n])) == NULL)
            break;
        evs[n].time = time;
        evs[n].index = ++line;
        last = time;
        p = q;
    }
    s->map_pos = (gsize)(p - s->map);
    s->last_time = last;
    s->lines.line = line;
    return n;
}

/* The next event through the general parser: TRUE with *ev; FALSE at the end of the input
 * (error unset) or on failure. */
static gboolean
text_general_next(TextStream *s, FsimEvent *ev, GError **error)
{
    char *line;
    gsize len;
    gboolean skip = TRUE;

    while (skip) {
        if (!text_read_line(s, &line, &len, error) ||
            !text_parse_line(s, line, len, ev, &skip, error))
            return FALSE;
    }
    return TRUE;
}

/* Hands back the pages of a mapped file behind the reader, every TEXT_RELEASE_STEP bytes. */
static void
text_release_behind(TextStream *s)
{
    if (s->map != NULL && s->map_pos - s->map_released >= TEXT_RELEASE_STEP) {
        gsize page = (gsize)sysconf(_SC_PAGESIZE);
        gsize upto = s->map_pos / page * page;

        (void)madvise((void *)(uintptr_t)(s->map + s->map_released), upto - s->map_released,
                      MADV_DONTNEED);
        s->map_released = upto;
    }
}

/* Up to @max events: the common lines of a mapped file by the fast scan, the others by the
 * general parser.  A batch ends after a mark, whose label lives until the next read.  An error
 * after some events of a batch is kept for the next read, so that every event before it is
 * delivered first, as one read at a time would. */
static gsize
text_stream_read(FsimTraceStream *stream, FsimEvent *evs, gsize max, GError **error)
{
    TextStream *s = (TextStream *)stream;
    gsize n = 0;

    if (s->error != NULL) {
        g_propagate_error(error, g_steal_pointer(&s->error));
        return 0;
    }
    text_release_behind(s);
    while (n < max) {
        GError *local_error = NULL;

        if (s->map != NULL) {
            n += text_fast_lines(s, evs + n, max - n);
            if (n == max)
                break;
        }
        if (!text_general_next(s, &evs[n], &local_error)) {
            if (local_error != NULL && n == 0)
                g_propagate_error(error, local_error);
            else
                s->error = local_error;
            break;
        }
        if (evs[n++].kind == FSIM_EV_MARK)
            break;
    }
    return n;
}

static FsimTrace *
text_open(const char *path, GError **error)
{
    TextTrace *trace;
    FsimTraceStream *probe = text_stream_new(path, FALSE, error);

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
    .stream_read = text_stream_read,
    .stream_close = text_stream_close,
};
