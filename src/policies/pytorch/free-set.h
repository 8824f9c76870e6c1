/* SPDX-License-Identifier: MIT */
/*
 * The free-block set: the free blocks of one (pool, stream) in BlockComparatorSize order, (size,
 * address).  A replay spends most of its time here, so the set is built for the cache rather
 * than as a search tree: sizes fall into bins, eight per power of two (bin (e - 9) x 8 + k holds
 * sizes in [2^e + k 2^(e-3), 2^e + (k+1) 2^(e-3))), a bitmap tells the non-empty bins, and each
 * bin is an array of entries sorted by (size, address) with the key inline.  The smallest block
 * of at least a size is then one bitmap word and a binary search of a short array away, and an
 * insertion or an erasure moves a few entries of one bin.  Bins are in size order, so walking
 * them in order is walking the whole set in order.
 *
 * These functions are the hot path of a replay, so they are static inline, compiled into the
 * allocator's search and merge paths (as jemalloc keeps its ph.h and rb.h in headers).
 *
 * Why not GLib: bench/bench-structures times a lower bound, an erasure and an insertion per
 * operation on 16 to 4096 free blocks; this set took 126-191 ns, GTree (g_tree_lower_bound)
 * 2.7-3.0x as long and GSequence 4.5-5.4x (thread CPU time, gcc -O3, GLib 2.74, including the
 * random draws all three share), and both allocate a node per insertion.
 */
#pragma once

#include <glib.h>

#include <stdint.h>
#include <string.h>

#include "block.h"

G_BEGIN_DECLS

#define FREE_SUBBINS_LOG2 3 /* eight bins per power of two */
#define FREE_MIN_LOG2     9 /* 512 B: every block is a multiple */
#define FREE_BINS         ((64 - FREE_MIN_LOG2) << FREE_SUBBINS_LOG2)
#define FREE_WORDS        ((FREE_BINS + 63) / 64)

typedef struct {
    uint64_t size;
    uint64_t addr;
    Block *block;
} FreeEntry;

typedef struct {
    FreeEntry *entries; /* sorted by (size, addr) */
    uint32_t len;
    uint32_t capacity;
} FreeBin;

typedef struct {
    FreeBin bins[FREE_BINS];
    uint64_t nonempty[FREE_WORDS]; /* bit b: bins[b] has entries */
    gsize count;
} FreeSet;

/* A position in a FreeSet; bin == FREE_BINS past the end. */
typedef struct {
    guint bin;
    guint pos;
} FreeCursor;

static inline guint
free_bin(uint64_t size)
{
    guint e =
        size < ((uint64_t)1 << FREE_MIN_LOG2) ? FREE_MIN_LOG2 : 63u - (guint)__builtin_clzll(size);
    guint sub = (guint)(size >> (e - FREE_SUBBINS_LOG2)) & ((1u << FREE_SUBBINS_LOG2) - 1);

    if (size < ((uint64_t)1 << FREE_MIN_LOG2))
        sub = 0;
    return ((e - FREE_MIN_LOG2) << FREE_SUBBINS_LOG2) | sub;
}

/* The first non-empty bin at or after @bin, FREE_BINS if none. */
static inline guint
free_next_bin(const FreeSet *set, guint bin)
{
    guint w = bin >> 6;
    uint64_t word;

    if (bin >= FREE_BINS)
        return FREE_BINS;
    word = set->nonempty[w] & (~(uint64_t)0 << (bin & 63));
    while (word == 0) {
        if (++w == FREE_WORDS)
            return FREE_BINS;
        word = set->nonempty[w];
    }
    return (w << 6) + (guint)__builtin_ctzll(word);
}

/* The last non-empty bin at or before @bin, G_MAXUINT if none. */
static inline guint
free_prev_bin(const FreeSet *set, guint bin)
{
    guint w = bin >> 6;
    uint64_t word = set->nonempty[w] & (~(uint64_t)0 >> (63 - (bin & 63)));

    while (word == 0) {
        if (w == 0)
            return G_MAXUINT;
        word = set->nonempty[--w];
    }
    return (w << 6) + 63u - (guint)__builtin_clzll(word);
}

/* The index of the first entry of @bin at or after (size, addr). */
static inline guint
free_bin_search(const FreeBin *bin, uint64_t size, uint64_t addr)
{
    guint lo = 0;
    guint hi = bin->len;

    while (lo < hi) {
        guint mid = (lo + hi) / 2;
        const FreeEntry *e = &bin->entries[mid];

        if (e->size < size || (e->size == size && e->addr < addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static inline void
freeset_insert(FreeSet *set, Block *block)
{
    guint b = free_bin(block->size);
    FreeBin *bin = &set->bins[b];
    guint at;

    g_assert((block->flags & BLOCK_IN_TREE) == 0);
    if (G_UNLIKELY(bin->len == bin->capacity)) {
        bin->capacity = MAX(8, bin->capacity * 2);
        bin->entries = g_renew(FreeEntry, bin->entries, bin->capacity);
    }
    at = free_bin_search(bin, block->size, block->addr);
    memmove(&bin->entries[at + 1], &bin->entries[at], (bin->len - at) * sizeof(FreeEntry));
    bin->entries[at].size = block->size;
    bin->entries[at].addr = block->addr;
    bin->entries[at].block = block;
    bin->len++;
    set->nonempty[b >> 6] |= (uint64_t)1 << (b & 63);
    set->count++;
    block->flags |= BLOCK_IN_TREE;
}

static inline void
freeset_erase_at(FreeSet *set, const FreeCursor *cursor)
{
    FreeBin *bin = &set->bins[cursor->bin];

    bin->entries[cursor->pos].block->flags &= ~(uint32_t)BLOCK_IN_TREE;
    bin->len--;
    memmove(&bin->entries[cursor->pos], &bin->entries[cursor->pos + 1],
            (bin->len - cursor->pos) * sizeof(FreeEntry));
    if (bin->len == 0)
        set->nonempty[cursor->bin >> 6] &= ~((uint64_t)1 << (cursor->bin & 63));
    set->count--;
}

static inline gboolean
freeset_find(const FreeSet *set, const Block *block, FreeCursor *cursor)
{
    const FreeBin *bin;

    cursor->bin = free_bin(block->size);
    bin = &set->bins[cursor->bin];
    cursor->pos = free_bin_search(bin, block->size, block->addr);
    return cursor->pos < bin->len && bin->entries[cursor->pos].block == block;
}

static inline void
freeset_erase(FreeSet *set, Block *block)
{
    FreeCursor cursor;
    gboolean found = freeset_find(set, block, &cursor);

    g_assert(found);
    freeset_erase_at(set, &cursor);
}

static inline Block *
freeset_at(const FreeSet *set, const FreeCursor *cursor)
{
    return cursor->bin < FREE_BINS ? set->bins[cursor->bin].entries[cursor->pos].block : NULL;
}

/* The first block of size >= @size, the lowest address among equal sizes (std::set::lower_bound
 * with AllocParams' search key, whose address is 0), or NULL. */
static inline Block *
freeset_lower_bound(const FreeSet *set, uint64_t size, FreeCursor *cursor)
{
    guint b = free_bin(size);

    if ((set->nonempty[b >> 6] >> (b & 63)) & 1) {
        const FreeBin *bin = &set->bins[b];
        guint pos = free_bin_search(bin, size, 0);

        if (pos < bin->len) {
            cursor->bin = b;
            cursor->pos = pos;
            return bin->entries[pos].block;
        }
    }
    cursor->bin = free_next_bin(set, b + 1);
    cursor->pos = 0;
    return freeset_at(set, cursor);
}

static inline Block *
freeset_first(const FreeSet *set, FreeCursor *cursor)
{
    cursor->bin = free_next_bin(set, 0);
    cursor->pos = 0;
    return freeset_at(set, cursor);
}

/* The last block of bin @b, found by free_prev_bin(): G_MAXUINT (none) leaves @cursor past the
 * end and returns NULL. */
static inline Block *
freeset_last_of(const FreeSet *set, guint b, FreeCursor *cursor)
{
    if (b == G_MAXUINT) {
        cursor->bin = FREE_BINS;
        return NULL;
    }
    cursor->bin = b;
    cursor->pos = set->bins[b].len - 1;
    return freeset_at(set, cursor);
}

static inline Block *
freeset_last(const FreeSet *set, FreeCursor *cursor)
{
    return freeset_last_of(set, free_prev_bin(set, FREE_BINS - 1), cursor);
}

/* Step @cursor to the next block in order (NULL at the end). */
static inline Block *
freeset_next(const FreeSet *set, FreeCursor *cursor)
{
    if (cursor->bin >= FREE_BINS)
        return NULL;
    if (++cursor->pos >= set->bins[cursor->bin].len) {
        cursor->bin = free_next_bin(set, cursor->bin + 1);
        cursor->pos = 0;
    }
    return freeset_at(set, cursor);
}

/* Step @cursor to the previous block in order (NULL before the first). */
static inline Block *
freeset_prev(const FreeSet *set, FreeCursor *cursor)
{
    if (cursor->bin >= FREE_BINS)
        return NULL;
    if (cursor->pos > 0) {
        cursor->pos--;
        return freeset_at(set, cursor);
    }
    return freeset_last_of(set, cursor->bin == 0 ? G_MAXUINT : free_prev_bin(set, cursor->bin - 1),
                           cursor);
}

/* Append every block of @set to @out, in order: loops that free blocks walk such a copy, which
 * is what PyTorch's walks see too (freeing one block never changes another). */
static inline void
freeset_snapshot(const FreeSet *set, GPtrArray *out)
{
    FreeCursor cursor;

    for (Block *b = freeset_first(set, &cursor); b != NULL; b = freeset_next(set, &cursor))
        g_ptr_array_add(out, b);
}

static inline void
freeset_clear(FreeSet *set)
{
    for (guint b = 0; b < FREE_BINS; b++)
        g_free(set->bins[b].entries);
}

G_END_DECLS
