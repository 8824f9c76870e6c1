/* SPDX-License-Identifier: MIT */
/*
 * free of PyTorch's caching allocator (free and free_block): the block is cached again, merged
 * with its free neighbours (try_merge_blocks, also used when pages are mapped or unmapped), and
 * the memory_stats() counters follow.  The engine calls dealloc when the memory is reusable
 * (PyTorch's free_completed), so stream-ordered frees are the engine's business.
 */
#include <glib.h>

#include "model.h"

/* try_merge_blocks() with @set, the (pool, stream) of @dst's segment, which is @src's: neighbours
 * never cross a segment. */
static inline uint64_t
try_merge_in(Pytorch *pt, StreamSet *set, Block *dst, Block *src)
{
    uint64_t subsumed;

    if (src == NULL || block_allocated(src) || block_unmapped(src) != block_unmapped(dst))
        return 0;
    if (G_UNLIKELY(block_unmapped(src)))
        fsim_pytorch_tree_erase(&set->unmapped, src);
    else
        freeset_erase(&set->free, src);
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev != NULL)
            dst->prev->next = dst;
        else
            dst->segment->head = dst;
    } else {
        dst->next = src->next;
        if (dst->next != NULL)
            dst->next->prev = dst;
    }
    subsumed = src->size;
    dst->size += subsumed;
    block_free(pt, src);
    pt->stats.num_merges++;
    return subsumed;
}

uint64_t
fsim_pytorch_try_merge(Pytorch *pt, Block *dst, Block *src)
{
    return try_merge_in(pt, dst->segment->set, dst, src);
}

/* free() and free_block(): the block is cached again, merged with free neighbours. */
void
fsim_pytorch_dealloc(FsimPolicy *self, const FsimBlock *fblock, FsimTime now)
{
    Pytorch *pt = pytorch_from_policy(self);
    Block *block = (Block *)(uintptr_t)fblock->cookie;
    Stats *stats = &pt->stats;
    StreamSet *set = block->segment->set;
    uint64_t size = block->size;
    uint64_t requested = block->requested;
    Block *candidates[2];
    int64_t net_blocks = 0;
    int64_t net_bytes = 0;

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
    candidates[0] = block->prev;
    candidates[1] = block->next;
    for (int i = 0; i < 2; i++) {
        uint64_t subsumed = try_merge_in(pt, set, block, candidates[i]);

        if (subsumed > 0) {
            net_blocks--;
            net_bytes -= (int64_t)subsumed;
        }
    }
    pool_insert_free(block);
    if (block_is_split(block)) {
        net_blocks++;
        net_bytes += (int64_t)block->size;
    }
    if (!block_expandable(block)) {
        /* inactive_split leaves expandable segments out: their free pages can always go */
        fsim_counter_add(&stats->inactive_split, net_blocks);
        fsim_counter_add(&stats->inactive_split_bytes, net_bytes);
    }
    stat_down(&stats->active, 1);
    stat_down(&stats->active_bytes, size);
    stat_down(&stats->requested_bytes, requested);
}
