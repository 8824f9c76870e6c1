/* SPDX-License-Identifier: MIT */
/*
 * The unpickler's input window (input.h).  A stream is read in blocks of INPUT_BLOCK bytes into a
 * window that slides forward; it grows only for an opcode argument or a protocol 0 line longer
 * than it, and then within the heap's budget.
 */
#include "input.h"

#include <glib.h>

#include <string.h>

/* The fuzzer sets a tiny block, so that its small inputs cross many window boundaries. */
#if defined(FSIM_PICKLE_INPUT_BLOCK)
#define INPUT_BLOCK ((size_t)FSIM_PICKLE_INPUT_BLOCK)
#else
#define INPUT_BLOCK ((size_t)256 * 1024)
#endif

void
input_init_memory(Input *in, const guint8 *data, size_t len)
{
    memset(in, 0, sizeof(*in));
    in->p = in->start = data;
    in->end = data + len;
    in->eof = TRUE;
}

void
input_init_stream(Input *in, GInputStream *stream, uint64_t max_input, Heap *heap)
{
    memset(in, 0, sizeof(*in));
    in->stream = stream;
    in->max_input = max_input;
    in->heap = heap;
}

void
input_clear(Input *in)
{
    if (in->buf != NULL)
        heap_charge(in->heap, -(gssize)in->cap);
    g_free(in->buf);
    g_clear_error(&in->io_error);
    memset(in, 0, sizeof(*in));
}

/* Reads once into the free space after in->end. */
static InputStatus
input_read_more(Input *in)
{
    uint64_t have = in->base + (uint64_t)(in->end - in->start);
    size_t room = in->cap - (size_t)(in->end - in->buf);
    if (in->max_input != 0 && have >= in->max_input)
        return INPUT_LIMIT;
    if (in->max_input != 0)
        room = (size_t)MIN((uint64_t)room, in->max_input - have + 1);
    guint8 *at = in->buf + (in->end - in->buf);
    gssize n = g_input_stream_read(in->stream, at, room, NULL, &in->io_error);
    if (n < 0)
        return INPUT_ERROR;
    if (n == 0)
        in->eof = TRUE;
    in->end += n;
    if (in->max_input != 0 && have + (uint64_t)n > in->max_input)
        return INPUT_LIMIT;
    return INPUT_OK;
}

/* Moves the unread bytes to the front of the buffer, grown to hold @n of them at least. */
static InputStatus
input_make_room(Input *in, size_t n)
{
    size_t unread = (size_t)(in->end - in->p);
    size_t cap = MAX(in->cap, INPUT_BLOCK);
    while (cap < n)
        cap *= 2;
    if (cap > in->cap) {
        if (!heap_charge(in->heap, (gssize)(cap - in->cap)))
            return INPUT_BUDGET;
        guint8 *buf = g_try_malloc(cap);
        if (buf == NULL) {
            heap_charge(in->heap, -(gssize)(cap - in->cap));
            return INPUT_BUDGET;
        }
        if (unread > 0)
            memcpy(buf, in->p, unread);
        g_free(in->buf);
        in->buf = buf;
        in->cap = cap;
    } else if (unread > 0 && in->p != in->buf) {
        memmove(in->buf, in->p, unread);
    }
    in->base += (uint64_t)(in->p - in->start);
    in->start = in->p = in->buf;
    in->end = in->buf + unread;
    return INPUT_OK;
}

InputStatus
input_fill_slow(Input *in, size_t n)
{
    while ((size_t)(in->end - in->p) < n) {
        if (in->eof)
            return INPUT_EOF;
        size_t tail = in->buf != NULL ? (size_t)(in->buf + in->cap - in->end) : 0;
        if (in->buf == NULL || tail < MAX(INPUT_BLOCK / 4, (size_t)1) ||
            (size_t)(in->buf + in->cap - in->p) < n) {
            InputStatus s = input_make_room(in, n);
            if (s != INPUT_OK)
                return s;
        }
        InputStatus s = input_read_more(in);
        if (s != INPUT_OK)
            return s;
    }
    return INPUT_OK;
}

InputStatus
input_read(Input *in, void *dst, size_t n, size_t *got)
{
    size_t have = MIN(n, (size_t)(in->end - in->p));
    memcpy(dst, in->p, have);
    in->p += have;
    *got = have;
    while (*got < n) {
        /* Large arguments go through the window a block at a time. */
        InputStatus s = input_fill_slow(in, 1);
        if (s != INPUT_OK)
            return s;
        have = MIN(n - *got, (size_t)(in->end - in->p));
        memcpy((guint8 *)dst + *got, in->p, have);
        in->p += have;
        *got += have;
    }
    return INPUT_OK;
}

InputStatus
input_line(Input *in, size_t *len)
{
    size_t scanned = 0;
    for (;;) {
        const guint8 *nl = memchr(in->p + scanned, '\n', (size_t)(in->end - in->p) - scanned);
        if (nl != NULL) {
            *len = (size_t)(nl - in->p);
            return INPUT_OK;
        }
        scanned = (size_t)(in->end - in->p);
        InputStatus s = input_fill_slow(in, scanned + 1);
        if (s != INPUT_OK)
            return s;
    }
}
