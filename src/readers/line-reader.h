/* SPDX-License-Identifier: MIT */
/*
 * Buffered line reading for the line-based trace formats (text, RMM CSV): one growing buffer over
 * a GInputStream, lines split by hand (GDataInputStream allocates a string per line), blank lines
 * (and comments, where the format has them) skipped in bulk, a line longer than the limit refused
 * with its file and line number.
 */
#pragma once

#include <glib.h>

#include <gio/gio.h>
#include <stdint.h>

#include "fragsim/trace.h"

typedef struct {
    char *path;
    GInputStream *in; /* (nullable): a reader that fills buf itself (a mapped file) has none */
    char *buf;
    gsize cap;
    gsize start; /* first unread byte */
    gsize end;   /* one past the last byte read */
    gboolean eof;
    uint64_t line;  /* the number of the last line read */
    gsize max_cap;  /* the buffer grows up to this; a line that does not fit is refused */
    guint max_line; /* the length named in that error */
} FsimLineReader;

/* What fsim_line_reader_next() passes over before the next line. */
typedef enum {
    FSIM_LINES_ALL,           /* nothing: every line is returned */
    FSIM_LINES_SKIP_BLANK,    /* empty lines and lone CRs */
    FSIM_LINES_SKIP_COMMENTS, /* those, and lines that start with `#` */
} FsimLineSkip;

/* Starts @r on @path read from @in (taken; NULL: none), with a buffer of @cap bytes that may grow
 * to @max_cap for a line of up to @max_line bytes. */
void fsim_line_reader_init(FsimLineReader *r, const char *path, GInputStream *in, gsize cap,
                           gsize max_cap, guint max_line);

void fsim_line_reader_clear(FsimLineReader *r);

/* Reads the next line into [*line, *line + *len), NUL-terminated, without its newline (nor a CR
 * before it).  FALSE at the end of the input (error unset) or on failure. */
gboolean fsim_line_reader_next(FsimLineReader *r, FsimLineSkip skip, char **line, gsize *len,
                               GError **error);

/* For a header line that fsim_line_reader_next() did not read: sets @error, unless a failure
 * set it already, to "the file is empty".  Returns FALSE. */
gboolean fsim_line_reader_empty(const FsimLineReader *r, GError **error);

/* Sets @error to "PATH:LINE: message" in FSIM_TRACE_ERROR with @code; returns FALSE. */
gboolean fsim_line_reader_error(const FsimLineReader *r, GError **error, FsimTraceError code,
                                const char *format, ...) G_GNUC_PRINTF(4, 5);
