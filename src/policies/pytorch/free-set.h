/* SPDX-License-Identifier: MIT */
/*
 * The free-block set: the free blocks of one (pool, stream) in BlockComparatorSize order, (size,
 * address), as a size set (core/size-set.h: binned by size, each bin a list of short sorted
 * arrays with the key inline), the smallest block of at least a size one bitmap word and a short
 * binary search away.  The functions below only keep the blocks' BLOCK_IN_TREE flag in step;
 * walks step through the set itself (fsim_size_set_first(), _last(), _next(), _prev(): the
 * blocks in (size, address) order, NULL past either end).
 */
#pragma once

#include <glib.h>

#include <stdint.h>

#include "block.h"
#include "core/size-set.h"

G_BEGIN_DECLS

typedef FsimSizeSet FreeSet;
typedef FsimSizeCursor FreeCursor;

static inline G_ALWAYS_INLINE void
freeset_insert(FreeSet *set, Block *block)
{
    g_assert((block->flags & BLOCK_IN_TREE) == 0);
    fsim_size_set_insert(set, block->size, block->addr, block);
    block->flags |= BLOCK_IN_TREE;
}

static inline G_ALWAYS_INLINE void
freeset_erase_at(FreeSet *set, const FreeCursor *cursor)
{
    Block *block = fsim_size_set_item(cursor);

    block->flags &= ~(uint32_t)BLOCK_IN_TREE;
    fsim_size_set_erase_at(set, cursor);
}

static inline G_ALWAYS_INLINE gboolean
freeset_find(const FreeSet *set, const Block *block, FreeCursor *cursor)
{
    return fsim_size_set_find(set, block->size, block->addr, block, cursor);
}

static inline G_ALWAYS_INLINE void
freeset_erase(FreeSet *set, Block *block)
{
    fsim_size_set_erase(set, block->size, block->addr, block);
    block->flags &= ~(uint32_t)BLOCK_IN_TREE;
}

/* The first block of size >= @size, the lowest address among equal sizes (std::set::lower_bound
 * with AllocParams' search key, whose address is 0), or NULL.  Without the size set's early
 * answers: a request's bin is as often empty as not. */
static inline G_ALWAYS_INLINE Block *
freeset_lower_bound(const FreeSet *set, uint64_t size, FreeCursor *cursor)
{
    return fsim_size_set_lower_bound_searched(set, size, 0, cursor);
}

/* Append every block of @set to @out, in order: loops that free blocks walk such a copy, which
 * is what PyTorch's walks see too (freeing one block never changes another). */
static inline void
freeset_snapshot(const FreeSet *set, GPtrArray *out)
{
    FreeCursor cursor;

    for (Block *b = fsim_size_set_first(set, &cursor); b != NULL;
         b = fsim_size_set_next(set, &cursor))
        g_ptr_array_add(out, b);
}

static inline void
freeset_clear(FreeSet *set)
{
    fsim_size_set_clear(set);
}

G_END_DECLS
