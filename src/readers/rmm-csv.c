/* SPDX-License-Identifier: MIT */
/*
 * RMM logs: the CSV that rmm::mr::logging_resource_adaptor writes (one file per device).
 *
 *     Thread,Time,Action,Pointer,Size,Stream
 *     140573312345856,13:05:42.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020
 *     140573312345856,13:05:42.123502,free,0x7f8a40000000,1024,0x7f8a38001020
 *     140573312345856,13:05:42.125001,allocate failure,(nil),8589934592,0
 *
 * Columns are found by their names in the header line; Time, Action, Pointer, Size and Stream
 * are required, others (Thread) ignored.  Fields are trimmed of spaces; every row must have as
 * many fields as the header.
 *
 * Time: `HH:MM:SS.ffffff` (the adaptor's `%H:%M:%S.%f` pattern) has no date, so each time the
 * clock goes back by more than 12 hours the log has crossed midnight and a day is added; a
 * smaller step back (threads racing to the log) is clamped and counted.  Plain seconds
 * (`1634567890.123456`) are read too.  Times are relative to the first row.
 *
 * Events: `allocate` -> FSIM_EV_ALLOC with a fresh id (pointers are reused: the pointer is mapped
 * to the id until its free); `free` (or `deallocate`) -> FSIM_EV_FREE, completed at once; a free
 * of an unknown pointer gets a fresh id (the engine counts it as unmatched).  `allocate failure`
 * rows (pointer `(nil)`) are kept as FSIM_OUTCOME_OOM outcomes, never as inputs.  An allocation
 * of zero bytes and a free of `(nil)` are counted and skipped; so are actions this reader does
 * not know.  The stream handle (hex) is kept as the stream id; `index` is the line number.
 *
 * The reader streams: open() reads the log once to check it, count its actions and collect its
 * outcomes; each stream reads it again, holding only the live pointers.  Errors name the file
 * and line.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/trace.h"

#include "core/live-table.h"
#include "line-reader.h"
#include "readers.h"

#define RMM_BUFFER_SIZE (256 * 1024)
#define RMM_MAX_LINE    (64 * 1024)
#define RMM_MAX_FIELDS  16
#define RMM_DAY_NS      ((uint64_t)24 * 3600 * 1000000000)
#define RMM_HALF_DAY_NS (RMM_DAY_NS / 2)

typedef enum {
    RMM_ALLOCATE,
    RMM_FREE,
    RMM_DEALLOCATE,
    RMM_ALLOCATE_FAILURE,
    RMM_UNKNOWN,
} RmmAction;

#define RMM_N_ACTIONS RMM_UNKNOWN

static const char *const rmm_action_names[RMM_N_ACTIONS] = {
    [RMM_ALLOCATE] = "allocate",
    [RMM_FREE] = "free",
    [RMM_DEALLOCATE] = "deallocate",
    [RMM_ALLOCATE_FAILURE] = "allocate failure",
};

typedef enum {
    RMM_COL_TIME,
    RMM_COL_ACTION,
    RMM_COL_POINTER,
    RMM_COL_SIZE,
    RMM_COL_STREAM,
    RMM_N_COLUMNS,
} RmmColumn;

static const char *const rmm_column_names[RMM_N_COLUMNS] = {"Time", "Action", "Pointer", "Size",
                                                            "Stream"};

typedef struct {
    RmmAction action;
    const char *action_name; /* valid until the next row */
    FsimTime time;
    FsimAddr pointer;
    uint64_t size;
    uint64_t stream;
    uint64_t line;
} RmmRow;

/* Reads rows one after the other. */
typedef struct {
    FsimLineReader lines;
    gboolean in_rows;            /* the header is read: blank lines are skipped in bulk */
    guint n_fields;              /* of the header */
    guint column[RMM_N_COLUMNS]; /* field index of each column */
    /* The clock. */
    gboolean started;
    uint64_t first_ns;
    uint64_t previous_raw_ns;
    uint64_t day_offset_ns;
    FsimTime last;
    uint64_t backwards;
    uint64_t midnights;
} RmmParser;

typedef struct {
    FsimTrace base;
    uint64_t rows;
    uint64_t counts[RMM_N_ACTIONS];
    GHashTable *unknown; /* (nullable) action name -> count (a uint64_t) */
} RmmTrace;

typedef struct {
    FsimTraceStream base;
    RmmParser parser;
    FsimLiveTable ids; /* pointer -> id (block.cookie) */
    uint64_t next_id;
} RmmStream;

/* ---- lines and fields ---------------------------------------------------------------------- */

static gboolean
rmm_read_line(RmmParser *p, char **line, gsize *len, GError **error)
{
    return fsim_line_reader_next(&p->lines, p->in_rows ? FSIM_LINES_SKIP_BLANK : FSIM_LINES_ALL,
                                 line, len, error);
}

static char *
trim(char *s)
{
    char *end;

    while (*s == ' ' || *s == '\t')
        s++;
    end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *end = '\0';
    return s;
}

/* Split @line at commas (RMM writes no quotes).  Returns the count, RMM_MAX_FIELDS + 1 when
 * there are more. */
static guint
rmm_split(char *line, char **fields)
{
    guint n = 0;
    char *p = line;

    for (;;) {
        char *comma = strchr(p, ',');

        if (n == RMM_MAX_FIELDS)
            return n + 1;
        if (comma != NULL)
            *comma = '\0';
        fields[n++] = trim(p);
        if (comma == NULL)
            return n;
        p = comma + 1;
    }
}

/* ---- numbers and times --------------------------------------------------------------------- */

/* `0x7f...`, bare hex digits, or `(nil)` (glibc's %p of NULL) for 0. */
static gboolean
parse_hex(const char *text, uint64_t *out)
{
    uint64_t value = 0;
    const char *p = text;

    if (strcmp(text, "(nil)") == 0) {
        *out = 0;
        return TRUE;
    }
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    if (*p == '\0')
        return FALSE;
    for (; *p != '\0'; p++) {
        int digit = g_ascii_xdigit_value(*p);

        if (digit < 0 || value > (G_MAXUINT64 >> 4))
            return FALSE;
        value = value << 4 | (uint64_t)digit;
    }
    *out = value;
    return TRUE;
}

/* Up to @max_digits decimal digits at *p; TRUE when at least one. */
static gboolean
parse_digits(const char **p, guint max_digits, uint64_t *out)
{
    uint64_t value = 0;
    guint n = 0;

    while (g_ascii_isdigit(**p) && n < max_digits) {
        value = value * 10 + (uint64_t)(**p - '0');
        (*p)++;
        n++;
    }
    *out = value;
    return n > 0;
}

/* `.ffffff`: a fraction of a second in ns (digits beyond the ninth are dropped). */
static gboolean
parse_fraction(const char **p, uint64_t *ns)
{
    uint64_t scale = 100000000;

    *ns = 0;
    if (**p != '.')
        return TRUE;
    (*p)++;
    if (!g_ascii_isdigit(**p))
        return FALSE;
    for (; g_ascii_isdigit(**p); (*p)++) {
        *ns += (uint64_t)(**p - '0') * scale;
        scale /= 10;
    }
    return TRUE;
}

/* `HH:MM:SS[.f]` (ns since midnight, *clock = TRUE) or `S[.f]` (ns, *clock = FALSE). */
static gboolean
parse_time(const char *text, uint64_t *ns, gboolean *clock)
{
    const char *p = text;
    uint64_t hours, minutes, seconds, fraction;

    if (strchr(text, ':') != NULL) {
        if (!parse_digits(&p, 2, &hours) || *p++ != ':' || !parse_digits(&p, 2, &minutes) ||
            *p++ != ':' || !parse_digits(&p, 2, &seconds) || !parse_fraction(&p, &fraction) ||
            *p != '\0' || hours > 23 || minutes > 59 || seconds > 60)
            return FALSE;
        *ns = ((hours * 60 + minutes) * 60 + seconds) * 1000000000 + fraction;
        *clock = TRUE;
        return TRUE;
    }
    if (!parse_digits(&p, 10, &seconds) || !parse_fraction(&p, &fraction) || *p != '\0')
        return FALSE;
    *ns = seconds * 1000000000 + fraction;
    *clock = FALSE;
    return TRUE;
}

static FsimTime
rmm_clock(RmmParser *p, uint64_t raw, gboolean clock)
{
    uint64_t absolute;
    FsimTime time;

    if (!p->started) {
        p->started = TRUE;
        p->first_ns = raw;
        p->previous_raw_ns = raw;
    }
    /* A wall clock without a date: back by more than 12 h means the log went past midnight. */
    if (clock && raw + RMM_HALF_DAY_NS < p->previous_raw_ns) {
        p->day_offset_ns += RMM_DAY_NS;
        p->midnights++;
    }
    p->previous_raw_ns = raw;
    absolute = raw + p->day_offset_ns;
    time = absolute > p->first_ns ? absolute - p->first_ns : 0;
    return fsim_trace_clock_advance(&p->last, &p->backwards, time);
}

/* ---- the parser ---------------------------------------------------------------------------- */

static void
rmm_parser_clear(RmmParser *p)
{
    fsim_line_reader_clear(&p->lines);
}

static gboolean
rmm_parser_open(RmmParser *p, const char *path, GError **error)
{
    char *line;
    gsize len;
    char *fields[RMM_MAX_FIELDS];
    guint n;

    memset(p, 0, sizeof(*p));
    fsim_line_reader_init(&p->lines, path, fsim_input_open(path, error), RMM_BUFFER_SIZE,
                          RMM_MAX_LINE + RMM_BUFFER_SIZE, RMM_MAX_LINE);
    if (p->lines.in == NULL)
        return FALSE;
    if (!rmm_read_line(p, &line, &len, error))
        return fsim_line_reader_empty(&p->lines, error);
    /* A UTF-8 byte order mark, if an editor added one. */
    if (len >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0)
        line += 3;
    n = rmm_split(line, fields);
    if (n > RMM_MAX_FIELDS)
        return fsim_line_reader_error(&p->lines, error, FSIM_TRACE_ERROR_HEADER,
                                      "more than %d columns", RMM_MAX_FIELDS);
    p->n_fields = n;
    for (int c = 0; c < RMM_N_COLUMNS; c++) {
        guint i;

        for (i = 0; i < n && strcmp(fields[i], rmm_column_names[c]) != 0; i++)
            ;
        if (i == n)
            return fsim_line_reader_error(&p->lines, error, FSIM_TRACE_ERROR_HEADER,
                                          "missing column '%s' (an RMM log starts with "
                                          "'Thread,Time,Action,Pointer,Size,Stream')",
                                          rmm_column_names[c]);
        p->column[c] = i;
    }
    p->in_rows = TRUE;
    return TRUE;
}

static RmmAction
rmm_action(const char *name)
{
    for (int a = 0; a < RMM_N_ACTIONS; a++) {
        if (strcmp(name, rmm_action_names[a]) == 0)
            return (RmmAction)a;
    }
    return RMM_UNKNOWN;
}

/* The next row: TRUE with *row filled, FALSE at the end (error unset) or on failure. */
static gboolean
rmm_parser_next(RmmParser *p, RmmRow *row, GError **error)
{
    char *line;
    gsize len;

    while (rmm_read_line(p, &line, &len, error)) {
        char *fields[RMM_MAX_FIELDS];
        const char *text;
        uint64_t raw;
        gboolean clock;
        guint n;

        if (memchr(line, '\0', len) != NULL)
            return fsim_line_reader_error(&p->lines, error, FSIM_TRACE_ERROR_SYNTAX,
                                          "NUL byte in the line");
        if (*trim(line) == '\0')
            continue;
        n = rmm_split(line, fields);
        if (n != p->n_fields)
            return fsim_line_reader_error(&p->lines, error, FSIM_TRACE_ERROR_SYNTAX,
                                          "%s fields where the header has %u",
                                          n > RMM_MAX_FIELDS ? "too many"
                                          : n < p->n_fields  ? "too few"
                                                             : "?",
                                          p->n_fields);
        memset(row, 0, sizeof(*row));
        row->line = p->lines.line;
        row->action_name = fields[p->column[RMM_COL_ACTION]];
        row->action = rmm_action(row->action_name);
        if (row->action == RMM_UNKNOWN)
            return TRUE;
        text = fields[p->column[RMM_COL_TIME]];
        if (!parse_time(text, &raw, &clock))
            return fsim_line_reader_error(&p->lines, error, FSIM_TRACE_ERROR_NUMBER,
                                          "bad time '%s' (expected HH:MM:SS.ffffff)", text);
        text = fields[p->column[RMM_COL_POINTER]];
        if (!parse_hex(text, &row->pointer))
            return fsim_line_reader_error(
                &p->lines, error, FSIM_TRACE_ERROR_NUMBER,
                "bad pointer '%s' (expected hex such as 0x7f8a40000000, or (nil))", text);
        text = fields[p->column[RMM_COL_SIZE]];
        if (!fsim_parse_u64(text, &row->size))
            return fsim_line_reader_error(&p->lines, error, FSIM_TRACE_ERROR_NUMBER,
                                          "bad size '%s' (expected a number of bytes)", text);
        if (row->size > FSIM_MAX_SIZE)
            return fsim_line_reader_error(&p->lines, error, FSIM_TRACE_ERROR_SIZE,
                                          "size %" G_GUINT64_FORMAT " is absurd (above 2^60 bytes)",
                                          row->size);
        text = fields[p->column[RMM_COL_STREAM]];
        if (!parse_hex(text, &row->stream))
            return fsim_line_reader_error(
                &p->lines, error, FSIM_TRACE_ERROR_NUMBER,
                "bad stream '%s' (expected a hex handle such as 0x5612a8c0)", text);
        row->time = rmm_clock(p, raw, clock);
        return TRUE;
    }
    return FALSE;
}

/* ---- the format ---------------------------------------------------------------------------- */

static gboolean
rmm_probe(const guint8 *head, gsize len)
{
    const guint8 *nl = memchr(head, '\n', len);
    g_autofree char *first = g_strndup((const char *)head, nl != NULL ? (gsize)(nl - head) : len);
    char *fields[RMM_MAX_FIELDS];
    guint n;
    guint known = 0;

    if (g_str_has_prefix(first, "\xef\xbb\xbf"))
        memmove(first, first + 3, strlen(first + 3) + 1);
    if (g_str_has_prefix(first, "Thread,"))
        return TRUE;
    /* Columns in another order, or some missing: still an RMM log, with a clear error. */
    n = rmm_split(first, fields);
    n = MIN(n, RMM_MAX_FIELDS);
    for (guint i = 0; i < n; i++) {
        for (int c = 0; c < RMM_N_COLUMNS; c++)
            known += strcmp(fields[i], rmm_column_names[c]) == 0;
    }
    return known >= 3;
}

static void
rmm_close(FsimTrace *base)
{
    RmmTrace *trace = (RmmTrace *)base;

    g_clear_pointer(&trace->unknown, g_hash_table_unref);
    g_free(trace);
}

static void
count_unknown(GHashTable **table, const char *name)
{
    uint64_t *count;

    if (*table == NULL)
        *table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    count = g_hash_table_lookup(*table, name);
    if (count == NULL) {
        count = g_new0(uint64_t, 1);
        g_hash_table_insert(*table, g_strdup(name), count);
    }
    (*count)++;
}

static FsimTrace *
rmm_open(const char *path, GError **error)
{
    RmmParser parser;
    RmmTrace *trace = g_new0(RmmTrace, 1);
    GArray *outcomes = g_array_new(FALSE, FALSE, sizeof(FsimOutcome));
    GError *local_error = NULL;
    RmmRow row;

    fsim_trace_init(&trace->base, &fsim_trace_format_rmm, path);
    fsim_trace_set_outcomes(&trace->base, 0, outcomes);
    fsim_trace_add_device(&trace->base, 0);
    if (!rmm_parser_open(&parser, path, error)) {
        rmm_parser_clear(&parser);
        fsim_trace_close(&trace->base);
        return NULL;
    }
    while (rmm_parser_next(&parser, &row, &local_error)) {
        trace->rows++;
        if (row.action == RMM_UNKNOWN) {
            count_unknown(&trace->unknown, row.action_name);
            continue;
        }
        trace->counts[row.action]++;
        if (row.action == RMM_ALLOCATE_FAILURE) {
            FsimOutcome oom = {.index = row.line,
                               .size = row.size,
                               .stream = row.stream,
                               .kind = FSIM_OUTCOME_OOM};

            g_array_append_val(outcomes, oom);
        }
    }
    if (parser.backwards > 0 || parser.midnights > 0)
        g_info("%s: the clock passed midnight %" G_GUINT64_FORMAT
               " times and went backwards %" G_GUINT64_FORMAT " times (clamped)",
               path, parser.midnights, parser.backwards);
    rmm_parser_clear(&parser);
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        fsim_trace_close(&trace->base);
        return NULL;
    }
    return &trace->base;
}

static FsimTraceStream *
rmm_stream_open(FsimTrace *trace, uint32_t device, GError **error)
{
    RmmStream *stream = g_new0(RmmStream, 1);

    (void)device;
    if (!rmm_parser_open(&stream->parser, trace->path, error)) {
        rmm_parser_clear(&stream->parser);
        g_free(stream);
        return NULL;
    }
    fsim_live_table_init(&stream->ids);
    stream->next_id = 1;
    return &stream->base;
}

static gboolean
rmm_stream_next(FsimTraceStream *base, FsimEvent *ev, GError **error)
{
    RmmStream *stream = (RmmStream *)base;
    RmmRow row;

    while (rmm_parser_next(&stream->parser, &row, error)) {
        FsimLiveEntry *entry;

        memset(ev, 0, sizeof(*ev));
        ev->time = row.time;
        ev->index = row.line;
        ev->stream = row.stream;
        switch (row.action) {
        case RMM_ALLOCATE:
            if (row.size == 0)
                continue;
            ev->kind = FSIM_EV_ALLOC;
            ev->id = stream->next_id++;
            ev->size = row.size;
            ev->addr = row.pointer;
            entry = fsim_live_table_lookup(&stream->ids, row.pointer);
            if (entry == NULL)
                entry = fsim_live_table_insert(&stream->ids, row.pointer);
            entry->block.cookie = ev->id;
            return TRUE;
        case RMM_FREE:
        case RMM_DEALLOCATE:
            if (row.pointer == 0)
                continue;
            ev->kind = FSIM_EV_FREE;
            entry = fsim_live_table_lookup(&stream->ids, row.pointer);
            if (entry != NULL) {
                ev->id = entry->block.cookie;
                fsim_live_table_remove(&stream->ids, entry);
            } else {
                ev->id = stream->next_id++;
            }
            return TRUE;
        default:
            continue;
        }
    }
    return FALSE;
}

static void
rmm_stream_close(FsimTraceStream *base)
{
    RmmStream *stream = (RmmStream *)base;

    rmm_parser_clear(&stream->parser);
    fsim_live_table_clear(&stream->ids);
    g_free(stream);
}

static gboolean
rmm_describe(FsimTrace *base, FsimTraceInfo *info, GError **error)
{
    RmmTrace *trace = (RmmTrace *)base;
    FsimTraceDeviceInfo *dev = fsim_trace_info_device(info, 0);
    GHashTableIter iter;
    gpointer name;
    gpointer count;

    (void)error;
    dev->events = trace->rows;
    for (int a = 0; a < RMM_N_ACTIONS; a++) {
        if (trace->counts[a] != 0)
            fsim_trace_info_count(dev, rmm_action_names[a], trace->counts[a]);
    }
    if (trace->unknown == NULL)
        return TRUE;
    g_hash_table_iter_init(&iter, trace->unknown);
    while (g_hash_table_iter_next(&iter, &name, &count))
        fsim_trace_info_count(dev, name, *(uint64_t *)count);
    return TRUE;
}

const FsimTraceFormat fsim_trace_format_rmm = {
    .name = "rmm",
    .summary = "RMM logging_resource_adaptor CSV log, optionally gzip-compressed",
    .probe = rmm_probe,
    .open = rmm_open,
    .close = rmm_close,
    .stream_open = rmm_stream_open,
    .stream_next = rmm_stream_next,
    .stream_close = rmm_stream_close,
    .describe = rmm_describe,
};
