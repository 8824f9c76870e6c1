/* SPDX-License-Identifier: MIT */
/*
 * The unpickler's input (private to src/readers/pickle/): a window over the bytes, either all of
 * them in memory (a mapped file, a test's buffer) or a stream read as the opcodes need it
 * (decompression included), so that no reader holds a whole decompressed file.  The window's
 * buffer is counted against the heap's budget.
 */
#pragma once

#include <glib.h>

#include <gio/gio.h>
#include <stdint.h>

#include "value.h"

typedef enum {
    INPUT_OK,
    INPUT_EOF,    /* the input ended first */
    INPUT_ERROR,  /* a read failed: Input.io_error */
    INPUT_BUDGET, /* the window would take the heap past its budget */
    INPUT_LIMIT,  /* more than Input.max_input bytes */
} InputStatus;

typedef struct {
    const guint8 *p;     /* the next byte */
    const guint8 *end;   /* the end of the bytes available now */
    const guint8 *start; /* the window's first byte, at input offset base */
    uint64_t base;
    GInputStream *stream; /* NULL when all the input is in memory */
    guint8 *buf;          /* the window's buffer when streaming */
    size_t cap;
    gboolean eof;
    uint64_t max_input; /* the most bytes read from a stream; 0: no limit */
    GError *io_error;
    Heap *heap;
} Input;

void input_init_memory(Input *in, const guint8 *data, size_t len);
void input_init_stream(Input *in, GInputStream *stream, uint64_t max_input, Heap *heap);
void input_clear(Input *in);

/* The input offset of the next byte. */
static inline uint64_t
input_offset(const Input *in)
{
    return in->base + (uint64_t)(in->p - in->start);
}

/* Makes at least @n bytes available at in->p, reading and growing the window as needed. */
InputStatus input_fill_slow(Input *in, size_t n);

static inline InputStatus
input_need(Input *in, size_t n)
{
    if (G_LIKELY((size_t)(in->end - in->p) >= n))
        return INPUT_OK;
    return input_fill_slow(in, n);
}

/* Copies the next @n bytes to @dst; on INPUT_EOF, *got says how many there were. */
InputStatus input_read(Input *in, void *dst, size_t n, size_t *got);

/* Finds the next newline: on INPUT_OK, the line is [in->p, in->p + *len) and the newline
 * follows it (still unread). */
InputStatus input_line(Input *in, size_t *len);

/* Whether the whole input is in memory, and then how many bytes remain after in->p. */
static inline gboolean
input_remaining(const Input *in, uint64_t *remaining)
{
    *remaining = (uint64_t)(in->end - in->p);
    return in->stream == NULL;
}
