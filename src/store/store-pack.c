/* SPDX-License-Identifier: MIT */
/*
 * Block lifetimes and segment actions, packed: the two largest kinds of a run's data, stored
 * as a few BLOBs per run (table `run_packed`) instead of one row of a dozen 64-bit integers
 * each.  Only fragsim reads them (address maps), through fsim_store_blocks() and
 * fsim_store_segments(), so no SQL view needs to see inside.
 *
 * Each field of a row is written as a LEB128 varint of the zigzag-encoded difference from the
 * same field of the row before (rows come in allocation order, so identifiers, event indices
 * and times grow slowly; addresses of neighbouring blocks are close); a block's requested bytes
 * as what rounding added to them, its free as the distance from its allocation.  A typical
 * block takes about 20 bytes instead of about 70, a segment action about 10 instead of 40.
 * The numbers are exactly those of the rows: nothing is rounded.
 *
 * Rows are cut into chunks of STORE_PACK_CHUNK rows; each chunk starts from zero, so a chunk
 * decodes on its own.  A chunk that does not decode to its row count is an error (a damaged
 * file), never a crash.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/store.h"

#include "store-private.h"

static void
put_varint(GByteArray *out, uint64_t v)
{
    guint8 buf[10];
    guint n = 0;

    do {
        guint8 byte = v & 0x7f;

        v >>= 7;
        buf[n++] = v != 0 ? (guint8)(byte | 0x80) : byte;
    } while (v != 0);
    g_byte_array_append(out, buf, n);
}

static void
put_delta(GByteArray *out, uint64_t value, uint64_t previous)
{
    /* zigzag: small differences of either sign take few bytes */
    int64_t d = (int64_t)(value - previous);

    put_varint(out, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
}

typedef struct {
    const guint8 *p;
    const guint8 *end;
    gboolean bad;
} Reader;

static uint64_t
get_varint(Reader *r)
{
    uint64_t v = 0;

    for (guint shift = 0; shift < 64; shift += 7) {
        guint8 byte;

        if (r->p >= r->end) {
            r->bad = TRUE;
            return 0;
        }
        byte = *r->p++;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0)
            return v;
    }
    r->bad = TRUE;
    return 0;
}

static uint64_t
get_delta(Reader *r, uint64_t previous)
{
    uint64_t z = get_varint(r);
    int64_t d = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);

    return previous + (uint64_t)d;
}

/* A chunk's rows one after the other: each row's fields written (pack) or read (unpack) as
 * differences from the row before, the first from an all-zero row. */
typedef void (*PackRow)(GByteArray *out, const void *row, const void *prev);
typedef void (*UnpackRow)(Reader *r, void *row, const void *prev);

static void
pack_rows(const void *rows, guint n, gsize size, PackRow pack_row, GByteArray *out)
{
    g_autofree void *zero = g_malloc0(size);
    const void *prev = zero;

    for (guint i = 0; i < n; i++) {
        const void *row = (const guint8 *)rows + i * size;

        pack_row(out, row, prev);
        prev = row;
    }
}

/* Appends the rows to @out; TRUE when @data held exactly @rows of them. */
static gboolean
unpack_rows(const void *data, gsize len, guint rows, UnpackRow unpack_row, GArray *out)
{
    Reader r = {data, (const guint8 *)data + len, FALSE};
    gsize size = g_array_get_element_size(out);
    g_autofree void *prev = g_malloc0(size);
    g_autofree void *row = g_malloc(size);

    for (guint i = 0; i < rows && !r.bad; i++) {
        unpack_row(&r, row, prev);
        if (!r.bad)
            g_array_append_vals(out, row, 1);
        memcpy(prev, row, size);
    }
    return !r.bad && r.p == r.end;
}

static void
pack_block(GByteArray *out, const void *row, const void *previous)
{
    const FsimStoredBlock *b = row;
    const FsimStoredBlock *prev = previous;

    put_delta(out, b->id, prev->id);
    put_delta(out, b->addr, prev->addr);
    put_delta(out, b->size, prev->size);
    put_delta(out, b->size - b->requested, 0);
    put_delta(out, b->stream, prev->stream);
    put_delta(out, (uint64_t)b->alloc_event, (uint64_t)prev->alloc_event);
    put_delta(out, b->alloc_time, prev->alloc_time);
    put_delta(out, (uint64_t)b->free_event, (uint64_t)b->alloc_event);
    put_delta(out, b->free_time, b->alloc_time);
}

static void
unpack_block(Reader *r, void *row, const void *previous)
{
    FsimStoredBlock *b = row;
    const FsimStoredBlock *prev = previous;

    b->id = get_delta(r, prev->id);
    b->addr = get_delta(r, prev->addr);
    b->size = get_delta(r, prev->size);
    b->requested = b->size - get_delta(r, 0);
    b->stream = get_delta(r, prev->stream);
    b->alloc_event = (int64_t)get_delta(r, (uint64_t)prev->alloc_event);
    b->alloc_time = get_delta(r, prev->alloc_time);
    b->free_event = (int64_t)get_delta(r, (uint64_t)b->alloc_event);
    b->free_time = get_delta(r, b->alloc_time);
}

static void
pack_segment(GByteArray *out, const void *row, const void *previous)
{
    const FsimStoredSegment *s = row;
    const FsimStoredSegment *prev = previous;

    put_delta(out, (uint64_t)s->event_index, (uint64_t)prev->event_index);
    put_delta(out, s->time, prev->time);
    put_varint(out, s->action);
    put_delta(out, s->addr, prev->addr);
    put_delta(out, s->size, prev->size);
}

static void
unpack_segment(Reader *r, void *row, const void *previous)
{
    FsimStoredSegment *s = row;
    const FsimStoredSegment *prev = previous;
    uint64_t action;

    s->event_index = (int64_t)get_delta(r, (uint64_t)prev->event_index);
    s->time = get_delta(r, prev->time);
    action = get_varint(r);
    s->addr = get_delta(r, prev->addr);
    s->size = get_delta(r, prev->size);
    if (action > FSIM_STORE_ACTION_SEED)
        r->bad = TRUE;
    s->action = (guint)action;
}

struct StorePackKind {
    const char *name; /* run_packed.kind */
    gsize size;       /* of a row */
    PackRow pack_row;
    UnpackRow unpack_row;
};

const StorePackKind store_packed_blocks = {"blocks", sizeof(FsimStoredBlock), pack_block,
                                           unpack_block};
const StorePackKind store_packed_segments = {"segments", sizeof(FsimStoredSegment), pack_segment,
                                             unpack_segment};

const char *
store_pack_name(const StorePackKind *kind)
{
    return kind->name;
}

void
store_pack(const StorePackKind *kind, const void *rows, guint n, GByteArray *out)
{
    pack_rows(rows, n, kind->size, kind->pack_row, out);
}

gboolean
store_unpack(const StorePackKind *kind, const void *data, gsize len, guint rows, GArray *out)
{
    g_return_val_if_fail(g_array_get_element_size(out) == kind->size, FALSE);
    return unpack_rows(data, len, rows, kind->unpack_row, out);
}
