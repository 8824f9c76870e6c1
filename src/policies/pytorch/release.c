/* SPDX-License-Identifier: MIT */
/*
 * Giving cached memory back to the device in PyTorch's caching allocator: release_cached_blocks
 * (empty_cache, and the last resort before an OOM), release_available_cached_blocks (oversize
 * blocks, with max_split_size set) and garbage_collect_cached_blocks (old blocks, above the
 * garbage_collection_threshold).  Walks that free blocks go over a copy of the pool taken first,
 * in PyTorch's (stream, size, address) order.
 */
#include <glib.h>

#include "model.h"

/* release_blocks(): every unsplit cudaMalloc'd block of the pool in (stream, size, address)
 * order, then the free pages of every expandable block, gathered first in the same order because
 * unmapping reshapes the pool. */
static void
release_blocks(Pytorch *pt, Pool *pool)
{
    GPtrArray *blocks = pt->scratch;
    GPtrArray *to_unmap = pt->scratch2;

    g_ptr_array_set_size(blocks, 0);
    g_ptr_array_set_size(to_unmap, 0);
    for (guint s = 0; s < pool->n_streams; s++)
        freeset_snapshot(&pool->streams[s]->free, blocks);
    for (guint i = 0; i < blocks->len; i++) {
        Block *block = g_ptr_array_index(blocks, i);

        if (block_expandable(block))
            g_ptr_array_add(to_unmap, block);
        else if (!block_is_split(block))
            fsim_pytorch_release_block(pt, block);
    }
    for (guint i = 0; i < to_unmap->len; i++) {
        Block *block = g_ptr_array_index(to_unmap, i);

        fsim_pytorch_unmap_block(pt, block);
        if (!block_is_split(block))
            fsim_pytorch_release_expandable_segment(pt, block);
    }
    g_ptr_array_set_size(blocks, 0);
    g_ptr_array_set_size(to_unmap, 0);
}

/* fsim_pytorch_release_cached_blocks() = empty_cache(): the large pool, then the small one, then
 * each freeable private pool (no reference left) in pool id order, small then large.  Pools still
 * referenced keep everything. */
gboolean
fsim_pytorch_release_cached_blocks(Pytorch *pt)
{
    pt->stats.num_sync_all_streams++;
    release_blocks(pt, &pt->large);
    release_blocks(pt, &pt->small);
    for (guint i = 0; i < pt->private_pools->len; i++) {
        PrivatePool *pp = g_ptr_array_index(pt->private_pools, i);

        if (pp->use_count == 0 && pp->n_segments > 0) {
            release_blocks(pt, &pp->small);
            release_blocks(pt, &pp->large);
        }
    }
    return TRUE;
}

static inline gboolean
releasable(const Block *block)
{
    return !block_expandable(block) && !block_is_split(block);
}

/* fsim_pytorch_release_available_cached_blocks(): with max_split_size set, cudaFree one oversize
 * block large enough for the request, or else the largest oversize blocks of the stream until
 * enough is freed.  Expandable blocks are skipped (since PR #134338); so are split ones, which
 * cannot be oversize outside expandable segments. */
gboolean
fsim_pytorch_release_available_cached_blocks(Pytorch *pt, Pool *pool, uint64_t stream,
                                             uint64_t size)
{
    uint64_t max_split = pt->conf.max_split_size;
    uint64_t key = MAX(size, max_split);
    GPtrArray *candidates = pt->scratch;
    StreamSet *set;
    Block *block;
    FreeCursor cursor;
    uint64_t released = 0;

    if (max_split == G_MAXUINT64)
        return FALSE;
    set = pool_find(pool, stream);
    if (set == NULL)
        return FALSE;
    block = freeset_lower_bound(&set->free, key, &cursor);
    if (block != NULL && releasable(block)) {
        fsim_pytorch_release_block(pt, block);
        return TRUE;
    }
    /* Largest first, down to max_split_size, until enough is freed. */
    g_ptr_array_set_size(candidates, 0);
    block = block != NULL ? freeset_prev(&set->free, &cursor) : freeset_last(&set->free, &cursor);
    for (; block != NULL && block->size >= max_split; block = freeset_prev(&set->free, &cursor))
        g_ptr_array_add(candidates, block);
    for (guint i = 0; i < candidates->len && released < key; i++) {
        block = g_ptr_array_index(candidates, i);
        if (releasable(block)) {
            released += block->size;
            fsim_pytorch_release_block(pt, block);
        }
    }
    g_ptr_array_set_size(candidates, 0);
    return released >= key;
}

/* Blocks' age for the garbage collector: searches of their pool since they were cached. */
static inline uint64_t
gc_age(const Block *block)
{
    /* the int of the difference: its low 32 bits, all the block keeps of the clock */
    return (uint64_t)(int64_t)(int32_t)((uint32_t)block->segment->pool->clock -
                                        block->gc_count_base);
}

/* garbage_collect_cached_blocks(): above garbage_collection_threshold x the allowed memory, free
 * unsplit large-pool blocks at least as old as the average, round after round, until the excess
 * is reclaimed (a round does not stop at the target: PyTorch wants GC to run rarely). */
void
fsim_pytorch_garbage_collect(Pytorch *pt)
{
    Pool *pool = &pt->large;
    GPtrArray *blocks = pt->scratch;
    uint64_t threshold =
        (uint64_t)(pt->conf.garbage_collection_threshold * (double)pt->allowed_memory_maximum);
    uint64_t target;
    uint64_t reclaimed = 0;
    uint64_t total_age = 0;
    int64_t freeable = 0;
    gboolean freed = TRUE;

    if (pt->total_allocated_memory <= threshold)
        return;
    target = pt->total_allocated_memory - threshold;
    for (guint s = 0; s < pool->n_streams; s++) {
        const FreeSet *set = &pool->streams[s]->free;
        FreeCursor cursor;

        for (Block *b = freeset_first(set, &cursor); b != NULL; b = freeset_next(set, &cursor)) {
            if (!block_is_split(b)) {
                total_age += gc_age(b);
                freeable++;
            }
        }
    }
    while (reclaimed < target && freed && freeable > 0) {
        double age_threshold = (double)total_age / (double)freeable;

        freed = FALSE;
        g_ptr_array_set_size(blocks, 0);
        for (guint s = 0; s < pool->n_streams; s++)
            freeset_snapshot(&pool->streams[s]->free, blocks);
        for (guint i = 0; i < blocks->len; i++) {
            Block *b = g_ptr_array_index(blocks, i);

            if (releasable(b) && (double)gc_age(b) >= age_threshold) {
                freed = TRUE;
                reclaimed += b->size;
                total_age -= gc_age(b);
                freeable--;
                fsim_pytorch_release_block(pt, b);
            }
        }
    }
    g_ptr_array_set_size(blocks, 0);
}

void
fsim_pytorch_empty_cache(FsimPolicy *self, FsimTime now)
{
    (void)now;
    fsim_pytorch_release_cached_blocks(pytorch_from_policy(self));
}
