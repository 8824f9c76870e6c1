/* SPDX-License-Identifier: MIT */
/*
 * Buffered line reading for the line-based trace formats: see line-reader.h.  The buffer keeps
 * one spare byte past the data so that the last line of a file without a final newline can be
 * NUL-terminated in place.
 */
#include "line-reader.h"

#include <string.h>

#include "fragsim/types.h"

void
fsim_line_reader_init(FsimLineReader *r, const char *path, GInputStream *in, gsize cap,
                      gsize max_cap, guint max_line)
{
    memset(r, 0, sizeof(*r));
    r->path = g_strdup(path);
    r->in = in;
    r->cap = cap;
    r->buf = g_malloc(cap);
    r->max_cap = max_cap;
    r->max_line = max_line;
}

void
fsim_line_reader_clear(FsimLineReader *r)
{
    g_clear_object(&r->in);
    g_clear_pointer(&r->buf, g_free);
    g_clear_pointer(&r->path, g_free);
}

gboolean
fsim_line_reader_error(const FsimLineReader *r, GError **error, FsimTraceError code,
                       const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, FSIM_TRACE_ERROR, code, "%s:%" G_GUINT64_FORMAT ": %s", r->path, r->line,
                message);
    return FALSE;
}

/* Skips the blank lines (empty, or a lone CR), and with @comments the lines that start with `#`,
 * at the read position, counting them, so that a run of them reads at memory speed rather than a
 * line at a time.  A comment that does not end in the buffer is left to the caller. */
static void
skip_blank(FsimLineReader *r, gboolean comments)
{
    const char *s = r->buf + r->start;
    const char *end = r->buf + r->end;
    uint64_t lines = 0;

    /* Eight newlines at a time first: a long run of them is the only case that matters. */
    while (end - s >= 8) {
        uint64_t word;

        memcpy(&word, s, sizeof(word));
        if (word != UINT64_C(0x0a0a0a0a0a0a0a0a))
            break;
        s += 8;
        lines += 8;
    }
    for (;;) {
        if (s < end && *s == '\n') {
            s++;
        } else if (s + 1 < end && s[0] == '\r' && s[1] == '\n') {
            s += 2;
        } else if (comments && s < end && *s == '#') {
            const char *nl = memchr(s, '\n', (size_t)(end - s));

            if (nl == NULL || memchr(s, '\0', (size_t)(nl - s)) != NULL)
                break; /* partial, or a NUL byte the normal path reports */
            s = nl + 1;
        } else {
            break;
        }
        lines++;
    }
    r->start = (gsize)(s - r->buf);
    r->line += lines;
}

/* Moves the partial line to the front and reads more, growing the buffer when it is full. */
static gboolean
fill(FsimLineReader *r, GError **error)
{
    g_autoptr(GError) local_error = NULL;
    gssize n;

    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (r->end + 1 >= r->cap) {
        if (r->cap >= r->max_cap) {
            r->line++;
            return fsim_line_reader_error(r, error, FSIM_TRACE_ERROR_LIMIT,
                                          "line longer than %u bytes", r->max_line);
        }
        r->cap *= 2;
        r->buf = g_realloc(r->buf, r->cap);
    }
    n = g_input_stream_read(r->in, r->buf + r->end, r->cap - r->end - 1, NULL, &local_error);
    if (n < 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", r->path, local_error->message);
        return FALSE;
    }
    if (n == 0)
        r->eof = TRUE;
    r->end += (gsize)n;
    return TRUE;
}

gboolean
fsim_line_reader_next(FsimLineReader *r, FsimLineSkip skip, char **line, gsize *len, GError **error)
{
    for (;;) {
        char *nl;

        if (skip != FSIM_LINES_ALL)
            skip_blank(r, skip == FSIM_LINES_SKIP_COMMENTS);
        nl = r->start < r->end ? memchr(r->buf + r->start, '\n', r->end - r->start) : NULL;

        if (nl != NULL || (r->eof && r->start < r->end)) {
            char *begin = r->buf + r->start;
            gsize n = nl != NULL ? (gsize)(nl - begin) : r->end - r->start;

            r->start += n + (nl != NULL ? 1 : 0);
            if (n > 0 && begin[n - 1] == '\r')
                n--;
            begin[n] = '\0'; /* the newline, or the spare byte kept at the end of buf */
            *line = begin;
            *len = n;
            r->line++;
            return TRUE;
        }
        if (r->eof || !fill(r, error))
            return FALSE;
    }
}

gboolean
fsim_line_reader_empty(const FsimLineReader *r, GError **error)
{
    if (error != NULL && *error != NULL)
        return FALSE;
    return fsim_line_reader_error(r, error, FSIM_TRACE_ERROR_EMPTY, "the file is empty");
}
