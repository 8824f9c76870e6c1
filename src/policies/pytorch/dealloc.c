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
    if (dst->prev != NULL)
        dst->prev->next = dst;
    else
        dst->segment->head = dst;
}

/* The same with @src = dst->next. */
static inline void
link_merged_next(Block *dst, Block *src)
{
    dst->next = src->next;
    if (dst->next != NULL)
        dst->next->prev = dst;
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

/* A neighbour a freed block merges with: there, mapped, not handed out. */
static inline gboolean
free_neighbour(const Block *block)
{
    return block != NULL && (block->flags & (BLOCK_ALLOCATED | BLOCK_UNMAPPED)) == 0;
}

/* @block, being freed, absorbs @neighbour, one of its free neighbours (cached in @set), which
 * counts as one inactive split block and its bytes fewer in @net. */
static inline void
merge_free_neighbour(Pytorch *pt, StreamSet *set, Block *block, Block *neighbour, int64_t net[2])
{
    net[0]--;
    net[1] -= (int64_t)neighbour->size;
    freeset_erase(&set->free, neighbour);
    if (neighbour == block->prev)
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
    StreamSet *set = block->segment->set;
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
        merge_free_neighbour(pt, set, block, prev, net);
    if (free_neighbour(next))
        merge_free_neighbour(pt, set, block, next, net);
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
