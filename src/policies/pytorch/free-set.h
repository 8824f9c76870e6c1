/* SPDX-License-Identifier: MIT */
/*
 * The free-block set: the free blocks of one (pool, stream) in BlockComparatorSize order, (size,
 * address), in two structures:
 *
 *   small  the blocks of at most 2 MiB (the small pool's, and a large pool's few), whose sizes
 *          are multiples of 512: a class set (core/class-set.h), a class per size under a
 *          two-level bitmap, so that a best fit is the first block of the first non-empty class
 *          (no search) and a class's blocks are kept by address alone;
 *   big    the larger blocks (the large pool's, expandable segments' merged blocks, seeded
 *          ones): a size set (core/size-set.h).
 *
 * Every small block is smaller than every big one, so the set in order is the small blocks in
 * order, then the big ones.  A block of at most 2 MiB whose size is not a multiple of 512 (a
 * seeded one), or a class that would outgrow FSIM_CLASS_MAX_LEN, turns the set mixed: every
 * block moves to the size set and stays there (fsim_pytorch_freeset_mix()).  The functions below
 * keep the blocks' BLOCK_IN_TREE flag in step; walks step through freeset_first(), _last(),
 * _next(), _prev(): the blocks in (size, address) order, NULL past either end.
 */
#pragma once

#include <glib.h>

#include <stdint.h>

#include "block.h"
#include "core/class-set.h"
#include "core/size-set.h"

G_BEGIN_DECLS

typedef struct {
    FsimSizeSet big;     /* the blocks over FSIM_CLASS_MAX_SIZE; every block once mixed */
    FsimClassSet *small; /* the others, NULL before the first and once mixed */
    /* a block of size s is in @small when s - 1 < @small_below (FSIM_CLASS_MAX_SIZE with @small
     * there, else 0), in @big when (s - 1) | @mixed >= FSIM_CLASS_MAX_SIZE (@mixed all ones once
     * mixed, else 0): a comparison each, and a set of zeros is empty and not mixed */
    uint64_t small_below;
    uint64_t mixed;
} FreeSet;

/* A position: in the class set when @small.cls < FSIM_CLASS_COUNT (then @big is past the end),
 * else @big's. */
typedef struct {
    FsimClassCursor small;
    FsimSizeCursor big;
} FreeCursor;

/* The halves of a cursor that is not there: past the end (all set, for gcc's sake). */
#define FREESET_NO_BIG   ((FsimSizeCursor){.bin = FSIM_SIZE_BINS})
#define FREESET_NO_SMALL ((FsimClassCursor){.cls = FSIM_CLASS_COUNT})

/* Out of line, rare (free-set.c): an insertion the two fast paths do not take (the first small
 * block, a size not a multiple of 512, a full class); moving every block to the size set. */
void fsim_pytorch_freeset_insert_slow(FreeSet *set, Block *block);
void fsim_pytorch_freeset_mix(FreeSet *set);

static inline G_ALWAYS_INLINE void
freeset_insert(FreeSet *set, Block *block)
{
    uint64_t below = block->size - 1;

    g_assert((block->flags & BLOCK_IN_TREE) == 0);
    block->flags |= BLOCK_IN_TREE;
    if (below < set->small_below && G_LIKELY((block->size & (FSIM_CLASS_UNIT - 1)) == 0) &&
        G_LIKELY(fsim_class_set_insert(set->small, block->size, block->addr, block)))
        return;
    if ((below | set->mixed) >= FSIM_CLASS_MAX_SIZE)
        fsim_size_set_insert(&set->big, block->size, block->addr, block);
    else
        fsim_pytorch_freeset_insert_slow(set, block);
}

static inline G_ALWAYS_INLINE Block *
freeset_item(const FreeSet *set, const FreeCursor *cursor)
{
    if (cursor->small.cls < FSIM_CLASS_COUNT)
        return fsim_class_set_item(set->small, &cursor->small);
    return fsim_size_set_item(&cursor->big);
}

static inline G_ALWAYS_INLINE void
freeset_erase_at(FreeSet *set, const FreeCursor *cursor)
{
    Block *block = freeset_item(set, cursor);

    block->flags &= ~(uint32_t)BLOCK_IN_TREE;
    if (cursor->small.cls < FSIM_CLASS_COUNT)
        fsim_class_set_erase_at(set->small, &cursor->small);
    else
        fsim_size_set_erase_at(&set->big, &cursor->big);
}

static inline G_ALWAYS_INLINE gboolean
freeset_find(const FreeSet *set, const Block *block, FreeCursor *cursor)
{
    if (block->size - 1 < set->small_below) {
        cursor->big = FREESET_NO_BIG;
        return fsim_class_set_find(set->small, block->size, block->addr, block, &cursor->small);
    }
    cursor->small = FREESET_NO_SMALL;
    return fsim_size_set_find(&set->big, block->size, block->addr, block, &cursor->big);
}

static inline G_ALWAYS_INLINE void
freeset_erase(FreeSet *set, Block *block)
{
    FreeCursor cursor;
    gboolean found = freeset_find(set, block, &cursor);

    g_assert(found);
    freeset_erase_at(set, &cursor);
}

/* The first block of size >= @size, the lowest address among equal sizes (std::set::lower_bound
 * with AllocParams' search key, whose address is 0), or NULL: for a size of at most 2 MiB the
 * first block of the first non-empty class from its own, else the first big block; for a larger
 * one the size set's search (without its early answers: a request's bin is as often empty as
 * not). */
static inline G_ALWAYS_INLINE Block *
freeset_lower_bound(const FreeSet *set, uint64_t size, FreeCursor *cursor)
{
    Block *block;

    cursor->big = FREESET_NO_BIG;
    if (size - 1 < set->small_below) {
        block = fsim_class_set_lower_bound(set->small, size, &cursor->small);
        if (G_LIKELY(block != NULL))
            return block;
        return fsim_size_set_first(&set->big, &cursor->big); /* all larger than @size */
    }
    cursor->small = FREESET_NO_SMALL;
    return fsim_size_set_lower_bound_searched(&set->big, size, 0, &cursor->big);
}

static inline Block *
freeset_first(const FreeSet *set, FreeCursor *cursor)
{
    Block *block;

    cursor->big = FREESET_NO_BIG;
    if (set->small != NULL) {
        block = fsim_class_set_first_from(set->small, 0, &cursor->small);
        if (block != NULL)
            return block;
    }
    cursor->small = FREESET_NO_SMALL;
    return fsim_size_set_first(&set->big, &cursor->big);
}

static inline Block *
freeset_last(const FreeSet *set, FreeCursor *cursor)
{
    Block *block;

    cursor->small = FREESET_NO_SMALL;
    block = fsim_size_set_last(&set->big, &cursor->big);
    if (block != NULL)
        return block;
    cursor->big = FREESET_NO_BIG;
    return set->small != NULL ? fsim_class_set_last(set->small, &cursor->small) : NULL;
}

/* Step @cursor to the next block in order (NULL at the end). */
static inline Block *
freeset_next(const FreeSet *set, FreeCursor *cursor)
{
    Block *block;

    if (cursor->small.cls >= FSIM_CLASS_COUNT)
        return fsim_size_set_next(&set->big, &cursor->big);
    block = fsim_class_set_next(set->small, &cursor->small);
    if (block != NULL)
        return block;
    return fsim_size_set_first(&set->big, &cursor->big);
}

/* Step @cursor to the previous block in order (NULL before the first). */
static inline Block *
freeset_prev(const FreeSet *set, FreeCursor *cursor)
{
    Block *block;

    if (cursor->small.cls < FSIM_CLASS_COUNT)
        return fsim_class_set_prev(set->small, &cursor->small);
    if (cursor->big.bin >= FSIM_SIZE_BINS)
        return NULL; /* before the first, or past the end */
    block = fsim_size_set_prev(&set->big, &cursor->big);
    if (block != NULL || set->small == NULL)
        return block;
    return fsim_class_set_last(set->small, &cursor->small);
}

/* The (size, key) the set keeps for the block at @cursor. */
static inline void
freeset_key(const FreeSet *set, const FreeCursor *cursor, uint64_t *size, uint64_t *key)
{
    if (cursor->small.cls < FSIM_CLASS_COUNT) {
        *size = fsim_class_size(cursor->small.cls);
        *key = fsim_class_set_key(set->small, &cursor->small);
    } else {
        *size = fsim_size_set_entry(&cursor->big)->size;
        *key = fsim_size_set_entry(&cursor->big)->key;
    }
}

static inline gsize
freeset_count(const FreeSet *set)
{
    return set->big.count + (set->small != NULL ? set->small->count : 0);
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

/* The set's own invariants (both structures', every big block over 2 MiB unless mixed): NULL
 * when they hold, else what is wrong. */
const char *fsim_pytorch_freeset_check(const FreeSet *set);

/* Free the set's memory (not the blocks); the set is empty, and no longer mixed. */
void fsim_pytorch_freeset_clear(FreeSet *set);

static inline void
freeset_clear(FreeSet *set)
{
    fsim_pytorch_freeset_clear(set);
}

G_END_DECLS
