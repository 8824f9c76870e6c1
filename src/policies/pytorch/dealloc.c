/* SPDX-License-Identifier: MIT */
/*
 * free of PyTorch's caching allocator (free and free_block): the block is cached again, merged
 * with its free neighbours (try_merge_blocks, also used when pages are mapped or unmapped), and
 * the memory_stats() counters follow.  The engine calls dealloc when the memory is reusable
 * (PyTorch's free_completed), so stream-ordered frees are the engine's business.
 */
#include <glib.h>

#include "model.h"

/* try_merge_blocks() of @dst with @src = dst->prev, out of its set already: the chain. */
static inline void
link_merged_prev(Block *dst, Block *src)
{
    dst->addr = src->addr;
    dst->prev = src->prev;
    *block_link_to(dst) = dst;
}

/* The same with @src = dst->next. */
static inline void
link_merged_next(Block *dst, Block *src)
{
    Block *sink;

    dst->next = src->next;
    /* a store to a local when there is no next block: selected, not branched on */
    *(dst->next != NULL ? &dst->next->prev : &sink) = dst;
}

/* @dst absorbs @src, unlinked: its bytes, and its record goes back to the slab. */
static inline void
absorb(Pytorch *pt, Block *dst, Block *src)
{
    dst->size += src->size;
    block_free(pt, src);
    pt->stats.num_merges++;
}

uint64_t
fsim_pytorch_try_merge(Pytorch *pt, Block *dst, Block *src)
{
    uint64_t subsumed;

    if (src == NULL || block_allocated(src) || block_unmapped(src) != block_unmapped(dst))
        return 0;
    /* the set of @dst's segment, which is @src's: neighbours never cross a segment */
    if (block_unmapped(src))
        fsim_pytorch_tree_erase(&dst->segment->set->unmapped, src);
    else
        freeset_erase(&dst->segment->set->free, src);
    subsumed = src->size;
    if (dst->prev == src)
        link_merged_prev(dst, src);
    else
        link_merged_next(dst, src);
    absorb(pt, dst, src);
    return subsumed;
}

/* What a missing neighbour reads as: not one to merge with. */
static const Block no_neighbour = {.flags = BLOCK_ALLOCATED};

/* A neighbour a freed block merges with: there, mapped, not handed out.  One branch, on the
 * answer: a missing neighbour is no_neighbour (a select of two pointers, no branch). */
static inline gboolean
free_neighbour(const Block *block)
{
    block = (const Block *)((uintptr_t)block |
                            ((uintptr_t)&no_neighbour & -(uintptr_t)(block == NULL)));
    return (block->flags & (BLOCK_ALLOCATED | BLOCK_UNMAPPED)) == 0;
}

/* @block, being freed, absorbs @neighbour, its free predecessor when @is_prev (a constant), else
 * its free successor (cached in @set), which counts as one inactive split block and its bytes
 * fewer in @net.  Inline in each of its two places, so that the side is known there. */
static inline G_ALWAYS_INLINE void
merge_free_neighbour(Pytorch *pt, StreamSet *set, Block *block, Block *neighbour, gboolean is_prev,
                     int64_t net[2])
{
    net[0]--;
    net[1] -= (int64_t)neighbour->size;
    freeset_erase(&set->free, neighbour);
    if (is_prev)
        link_merged_prev(block, neighbour);
    else
        link_merged_next(block, neighbour);
    absorb(pt, block, neighbour);
}

/* free() and free_block(): the block is cached again, merged with free neighbours. */
void
fsim_pytorch_dealloc(FsimPolicy *self, const FsimBlock *fblock, FsimTime now)
{
    Pytorch *pt = pytorch_from_policy(self);
    Block *block = (Block *)(uintptr_t)fblock->cookie;
    Stats *stats = &pt->stats;
    StreamSet *set = block->set;
    Block *prev = block->prev;
    Block *next = block->next;
    uint64_t size = block->size;
    uint64_t requested = block->requested;
    int64_t net[2] = {0, 0}; /* inactive split blocks, their bytes */
    gboolean split;

    (void)now;
    g_assert(block_allocated(block) && block->addr == fblock->addr && size == fblock->size);
    if ((block->flags & BLOCK_PENDING) == 0) {
        /* free(): the allocation ends (a seeded pending block's ended before the trace) */
        stat_down(&stats->allocation, 1);
        stat_down(&stats->allocated_bytes, size);
        if (size >= pt->conf.max_split_size)
            stat_down(&stats->oversize_allocations, 1);
    }
    block->flags &= ~(uint32_t)(BLOCK_ALLOCATED | BLOCK_PENDING);
    if (free_neighbour(prev))
        merge_free_neighbour(pt, set, block, prev, TRUE, net);
    if (free_neighbour(next))
        merge_free_neighbour(pt, set, block, next, FALSE, net);
    pool_insert_free(block);
    /* the free block left is an inactive split one when it has a neighbour (no branch) */
    split = block_is_split(block);
    net[0] += split;
    net[1] += (int64_t)(block->size & -(uint64_t)split);
    if (!block_expandable(block)) {
        /* inactive_split leaves expandable segments out: their free pages can always go */
        stat_add_current(&stats->inactive_split, net[0]);
        stat_add_current(&stats->inactive_split_bytes, net[1]);
    }
    stat_down(&stats->active, 1);
    stat_down(&stats->active_bytes, size);
    stat_down(&stats->requested_bytes, requested);
}
