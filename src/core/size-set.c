/* SPDX-License-Identifier: MIT */
/*
 * The rare changes to a size set's chunks (the hot path is inline in size-set.h): growing a
 * chunk, splitting a full one, dropping an empty one, merging a sparse one with a neighbour.
 */
#include "size-set.h"

#include <glib.h>

#include <string.h>

/* A chunk of @capacity entries (and the slack), uninitialised, on a cache line: a search of a
 * short chunk reads its first two lines, where a chunk at any 16-byte boundary met three as
 * often as not. */
static FsimSizeChunk *
chunk_alloc(uint32_t capacity)
{
    gsize bytes = sizeof(FsimSizeChunk) + (capacity + FSIM_SIZE_SLACK) * sizeof(FsimSizeEntry);

    return g_aligned_alloc(1, (bytes + 63) & ~(gsize)63, 64);
}

FsimSizeChunk *
fsim_size_chunk_grow(FsimSizeChunk *chunk)
{
    gboolean fresh = chunk == NULL;
    uint32_t capacity = fresh ? FSIM_SIZE_MIN_CAPACITY : MIN(chunk->capacity * 2, FSIM_SIZE_CHUNK);
    uint32_t old_slots = fresh ? 0 : chunk->capacity + FSIM_SIZE_SLACK;
    FsimSizeChunk *grown = chunk_alloc(capacity);

    if (fresh) {
        grown->len = 0;
    } else {
        memcpy(grown, chunk, sizeof(FsimSizeChunk) + old_slots * sizeof(FsimSizeEntry));
        g_aligned_free(chunk);
    }
    chunk = grown;
    /* the new slots are past the entries (the old slots past them hold sentinels already) */
    memset(&chunk->entries[old_slots], FSIM_SIZE_SENTINEL_BYTE,
           (capacity + FSIM_SIZE_SLACK - old_slots) * sizeof(FsimSizeEntry));
    chunk->capacity = capacity;
    return chunk;
}

/* Make room for a chunk pointer at @at in @bin's list (which becomes a list of many). */
static void
bin_open(FsimSizeBin *bin, guint at, FsimSizeChunk *chunk)
{
    if (bin->n_chunks == 1) {
        FsimSizeChunk *single = bin->u.single;

        bin->capacity = 4;
        bin->u.many = g_new(FsimSizeChunk *, bin->capacity);
        bin->u.many[0] = single;
    } else if (bin->n_chunks == bin->capacity) {
        bin->capacity *= 2;
        bin->u.many = g_renew(FsimSizeChunk *, bin->u.many, bin->capacity);
    }
    memmove(&bin->u.many[at + 1], &bin->u.many[at], (bin->n_chunks - at) * sizeof(FsimSizeChunk *));
    bin->u.many[at] = chunk;
    bin->n_chunks++;
}

/* Take the chunk pointer at @at out of @bin's list of many (not freeing the chunk). */
static void
bin_close(FsimSizeBin *bin, guint at)
{
    g_assert(bin->n_chunks > 1);
    memmove(&bin->u.many[at], &bin->u.many[at + 1],
            (bin->n_chunks - at - 1) * sizeof(FsimSizeChunk *));
    bin->n_chunks--;
    if (bin->n_chunks == 1) {
        FsimSizeChunk *single = bin->u.many[0];

        g_free(bin->u.many);
        bin->u.single = single;
        bin->capacity = 0;
    }
}

void
fsim_size_bin_split(FsimSizeBin *bin, guint chunk)
{
    FsimSizeChunk *left = fsim_size_bin_chunks_mut(bin)[chunk];
    FsimSizeChunk *right = chunk_alloc(FSIM_SIZE_CHUNK);
    guint half = left->len / 2;

    right->capacity = FSIM_SIZE_CHUNK;
    right->len = left->len - half;
    memcpy(right->entries, &left->entries[half], right->len * sizeof(FsimSizeEntry));
    memset(&right->entries[right->len], FSIM_SIZE_SENTINEL_BYTE,
           (FSIM_SIZE_CHUNK + FSIM_SIZE_SLACK - right->len) * sizeof(FsimSizeEntry));
    memset(&left->entries[half], FSIM_SIZE_SENTINEL_BYTE,
           (left->len - half) * sizeof(FsimSizeEntry));
    left->len = half;
    bin_open(bin, chunk + 1, right);
}

void
fsim_size_bin_drop(FsimSizeBin *bin, guint chunk)
{
    g_aligned_free(fsim_size_bin_chunks(bin)[chunk]);
    bin_close(bin, chunk);
}

void
fsim_size_bin_merge(FsimSizeBin *bin, guint chunk)
{
    FsimSizeChunk *const *chunks = fsim_size_bin_chunks(bin);
    guint left;
    FsimSizeChunk *l;
    FsimSizeChunk *r;

    if (chunk + 1 < bin->n_chunks &&
        chunks[chunk]->len + chunks[chunk + 1]->len <= FSIM_SIZE_CHUNK / 2)
        left = chunk;
    else if (chunk > 0 && chunks[chunk - 1]->len + chunks[chunk]->len <= FSIM_SIZE_CHUNK / 2)
        left = chunk - 1;
    else
        return;
    l = chunks[left];
    r = chunks[left + 1];
    g_assert(l->capacity >= l->len + r->len);
    memcpy(&l->entries[l->len], r->entries, r->len * sizeof(FsimSizeEntry));
    l->len += r->len;
    g_aligned_free(r);
    bin_close(bin, left + 1);
}

void
fsim_size_set_clear(FsimSizeSet *set)
{
    for (guint b = 0; b < FSIM_SIZE_BINS; b++) {
        FsimSizeBin *bin = &set->bins[b];
        FsimSizeChunk *const *chunks = fsim_size_bin_chunks(bin);

        for (guint c = 0; c < bin->n_chunks; c++)
            g_aligned_free(chunks[c]);
        if (bin->n_chunks > 1)
            g_free(bin->u.many);
        else if (bin->n_chunks == 0)
            g_aligned_free(bin->u.single); /* the empty chunk kept, if any */
    }
    memset(set, 0, sizeof(*set));
}

/* The slots past @chunk's entries all hold sentinels. */
static gboolean
chunk_tail_clear(const FsimSizeChunk *chunk)
{
    for (guint i = chunk->len; i < chunk->capacity + FSIM_SIZE_SLACK; i++) {
        if (chunk->entries[i].size != FSIM_SIZE_SENTINEL ||
            chunk->entries[i].key != FSIM_SIZE_SENTINEL)
            return FALSE;
    }
    return TRUE;
}

const char *
fsim_size_set_check(const FsimSizeSet *set)
{
    const FsimSizeEntry *previous = NULL;
    gsize count = 0;

    for (guint b = 0; b < FSIM_SIZE_BINS; b++) {
        const FsimSizeBin *bin = &set->bins[b];
        FsimSizeChunk *const *chunks = fsim_size_bin_chunks(bin);
        gboolean marked = (set->nonempty[b >> 6] >> (b & 63)) & 1;

        if (marked != (bin->n_chunks > 0))
            return "the bitmap of non-empty bins is wrong";
        if (bin->n_chunks > 1 && bin->capacity < bin->n_chunks)
            return "a bin's list of chunks overflows";
        for (guint c = 0; c < bin->n_chunks; c++) {
            const FsimSizeChunk *chunk = chunks[c];

            if (chunk->len == 0 || chunk->len > chunk->capacity ||
                chunk->capacity > FSIM_SIZE_CHUNK)
                return "a chunk is empty or overfull";
            if (!chunk_tail_clear(chunk))
                return "a slot past a chunk's entries is not a sentinel";
            for (guint i = 0; i < chunk->len; i++) {
                const FsimSizeEntry *e = &chunk->entries[i];

                if (fsim_size_set_bin(e->size) != b)
                    return "an entry is in the wrong bin";
                if (previous != NULL && (previous->size > e->size ||
                                         (previous->size == e->size && previous->key >= e->key)))
                    return "entries are out of order";
                previous = e;
                count++;
            }
        }
    }
    return count == set->count ? NULL : "the count of entries is wrong";
}
