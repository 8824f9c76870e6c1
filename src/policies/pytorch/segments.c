/* SPDX-License-Identifier: MIT */
/*
 * Segments of PyTorch's caching allocator: the list of every segment in creation order, and the
 * cudaMalloc'd ones -- made by alloc_block() when a request finds no cached block, given back by
 * fsim_pytorch_release_block() (cudaFree) when they are entirely free and unsplit.  Expandable
 * segments, one reservation per (pool, stream) mapped page by page, are in expandable-segments.c.
 */
#include <glib.h>

#include "fragsim/device.h"

#include "model.h"

Segment *
fsim_pytorch_segment_new(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t addr, uint64_t size,
                         uint64_t page)
{
    Segment *segment = g_new0(Segment, 1);

    segment->pool = pool;
    segment->set = fsim_pytorch_pool_stream(pool, stream);
    segment->addr = addr;
    segment->size = size;
    segment->page = page;
    segment->expandable = page != 0;
    segment->prev_segment = pt->last_segment;
    if (pt->last_segment != NULL)
        pt->last_segment->next_segment = segment;
    else
        pt->segments = segment;
    pt->last_segment = segment;
    pt->n_segments++;
    if (pool->owner != NULL)
        pool->owner->n_segments++; /* cudaMalloc_count */
    return segment;
}

void
fsim_pytorch_segment_destroy(Pytorch *pt, Segment *segment)
{
    if (segment->prev_segment != NULL)
        segment->prev_segment->next_segment = segment->next_segment;
    else
        pt->segments = segment->next_segment;
    if (segment->next_segment != NULL)
        segment->next_segment->prev_segment = segment->prev_segment;
    else
        pt->last_segment = segment->prev_segment;
    pt->n_segments--;
    if (segment->pool->owner != NULL)
        segment->pool->owner->n_segments--;
    g_free(segment);
}

Block *
fsim_pytorch_malloc_segment(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t alloc_size)
{
    FsimAddr addr;
    Segment *segment;
    Block *block;

    if (fsim_device_mem_alloc(pt->base.device, alloc_size, &addr) != FSIM_OK)
        return NULL;
    segment = fsim_pytorch_segment_new(pt, pool, stream, addr, alloc_size, 0);
    block = block_new(pt, segment);
    block->addr = addr;
    block->size = alloc_size;
    segment->head = block;
    pt->total_allocated_memory += alloc_size;
    fsim_counter_add(&pt->stats.segment, 1);
    pool_reserved_add(pt, pool, (int64_t)alloc_size);
    if (alloc_size >= pt->conf.max_split_size)
        fsim_counter_add(&pt->stats.oversize_segments, 1);
    pt->stats.num_device_alloc++;
    return block;
}

void
fsim_pytorch_release_block(Pytorch *pt, Block *block)
{
    Segment *segment = block->segment;

    g_assert(!segment->expandable && !block_is_split(block) && !block_allocated(block));
    pt->stats.num_device_free++;
    freeset_erase(&segment->set->free, block);
    fsim_device_mem_free(pt->base.device, block->addr, block->size);
    pt->total_allocated_memory -= block->size;
    fsim_counter_add(&pt->stats.segment, -1);
    pool_reserved_add(pt, segment->pool, -(int64_t)block->size);
    if (block->size >= pt->conf.max_split_size)
        fsim_counter_add(&pt->stats.oversize_segments, -1);
    fsim_pytorch_segment_destroy(pt, segment);
    block_free(pt, block);
}
