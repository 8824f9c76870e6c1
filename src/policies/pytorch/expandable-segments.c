/* SPDX-License-Identifier: MIT */
/*
 * Expandable segments (Note [Expandable Segments] in CUDACachingAllocator.cpp): one virtual
 * reservation of 1 1/8 x the device's memory per (pool, stream), mapped in pages of 2 MiB (small
 * pool) or large_segment_size (large pool) at the lowest address where a request fits, and
 * unmapped page by page when cached memory is released.  The address range of a reservation is
 * cut into blocks like any segment; the ranges without pages are unmapped blocks, kept by
 * address in the stream's unmapped tree.
 */
#include <glib.h>

#include "fragsim/device.h"

#include "model.h"

/* find_expandable_block(): the lowest address of the stream's reservations where @size bytes of
 * free-or-unmapped space start (an unmapped block, or the free block just before it), or a new
 * reservation as one unmapped block.  NULL when address space cannot be reserved. */
static Block *
find_expandable_block(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size)
{
    StreamSet *set = fsim_pytorch_pool_stream(pool, stream);
    FsimDevice *device = pt->base.device;
    uint64_t page = expandable_page(pt, pool->small);
    uint64_t reservation;
    FsimAddr addr;
    Segment *segment;
    Block *block;

    for (Block *u = fsim_pytorch_tree_first(&set->unmapped); u != NULL;
         u = fsim_pytorch_tree_next(u)) {
        Block *c = u->prev != NULL && !block_allocated(u->prev) ? u->prev : u;
        uint64_t bytes = 0;

        for (Block *b = c; b != NULL && bytes < size && !block_allocated(b); b = b->next)
            bytes += b->size;
        if (bytes >= size)
            return c;
    }
    reservation = expandable_reservation(pt, page);
    if (fsim_device_va_reserve(device, reservation, device->spec.granularity, &addr) != FSIM_OK)
        return NULL;
    segment = fsim_pytorch_segment_new(pt, pool, stream, addr, reservation, page);
    block = block_new(pt, segment);
    block->addr = addr;
    block->size = reservation;
    block->flags |= BLOCK_UNMAPPED;
    segment->head = block;
    fsim_pytorch_tree_insert(&set->unmapped, block);
    return block;
}

/* map_block(): map the pages covering the first @size bytes of the unmapped @block; the mapped
 * part becomes a free block merged with free neighbours.  FALSE (nothing changed) when the device
 * has no pages left. */
static gboolean
map_block(Pytorch *pt, Block *block, uint64_t size)
{
    Segment *segment = block->segment;
    uint64_t bytes = round_up(size, segment->page);

    g_assert(block_unmapped(block) && size <= block->size && bytes <= block->size);
    if (fsim_device_map(pt->base.device, block->addr, bytes, segment->page) != FSIM_OK)
        return FALSE;
    fsim_pytorch_tree_erase(&segment->set->unmapped, block);
    block->flags &= ~(uint32_t)BLOCK_UNMAPPED;
    if (bytes < block->size) {
        Block *rest = block_new(pt, segment);

        rest->addr = block->addr + bytes;
        rest->size = block->size - bytes;
        rest->flags |= BLOCK_UNMAPPED;
        block_link_after(rest, block);
        fsim_pytorch_tree_insert(&segment->set->unmapped, rest);
        block->size = bytes;
    }
    fsim_pytorch_try_merge(pt, block, block->prev);
    fsim_pytorch_try_merge(pt, block, block->next);
    pool_insert_free(block);
    pt->total_allocated_memory += bytes;
    segment->mapped += bytes;
    pool_reserved_add(pt, segment->pool, (int64_t)bytes);
    pt->stats.num_device_alloc++;
    return TRUE;
}

/* try_allocate_expandable_block(): a free block of at least @size bytes, mapping pages at the
 * lowest address that can hold it.  Pages mapped before a failure stay mapped (free), as in
 * PyTorch. */
Block *
fsim_pytorch_expandable_alloc(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size)
{
    Block *candidate = find_expandable_block(pt, pool, stream, size);

    if (candidate == NULL)
        return NULL;
    if (block_unmapped(candidate) && !map_block(pt, candidate, MIN(candidate->size, size)))
        return NULL;
    while (candidate->size < size) {
        /* free -> unmapped -> ...: map what is missing; the new pages merge with the free block
         * before them, which map_block() absorbs into @next. */
        Block *next = candidate->next;

        /* Only a new reservation smaller than the request gets here without room after it; its
         * mapping cannot succeed on a device no larger than 8/9 of it, but be safe. */
        if (next == NULL || !block_unmapped(next) ||
            !map_block(pt, next, MIN(size - candidate->size, next->size)))
            return NULL;
        candidate = next;
    }
    freeset_erase(&candidate->segment->set->free, candidate);
    return candidate;
}

/* fsim_pytorch_unmap_block(): give the whole pages inside a free expandable block back; the slivers
 * before and after them stay free blocks. */
void
fsim_pytorch_unmap_block(Pytorch *pt, Block *block)
{
    Segment *segment = block->segment;
    uint64_t page = segment->page;
    uint64_t begin = segment->addr + round_up(block->addr - segment->addr, page);
    uint64_t end = segment->addr + (block->addr + block->size - segment->addr) / page * page;
    uint64_t bytes;

    if (begin >= end)
        return;
    bytes = end - begin;
    freeset_erase(&segment->set->free, block);
    if (begin > block->addr) {
        Block *before = block_new(pt, segment);

        before->addr = block->addr;
        before->size = begin - block->addr;
        block_link_before(before, block);
        pool_insert_free(before);
    }
    if (end < block->addr + block->size) {
        Block *after = block_new(pt, segment);

        after->addr = end;
        after->size = block->addr + block->size - end;
        block_link_after(after, block);
        pool_insert_free(after);
    }
    block->addr = begin;
    block->size = bytes;
    block->flags |= BLOCK_UNMAPPED;
    fsim_device_unmap(pt->base.device, begin, bytes, page);
    fsim_pytorch_try_merge(pt, block, block->prev);
    fsim_pytorch_try_merge(pt, block, block->next);
    fsim_pytorch_tree_insert(&segment->set->unmapped, block);
    pt->total_allocated_memory -= bytes;
    segment->mapped -= bytes;
    pool_reserved_add(pt, segment->pool, -(int64_t)bytes);
    pt->stats.num_device_free++;
}

/* fsim_pytorch_release_expandable_segment(): the reservation is one unmapped block again: free it.
 */
void
fsim_pytorch_release_expandable_segment(Pytorch *pt, Block *block)
{
    Segment *segment = block->segment;

    g_assert(block_unmapped(block) && block->size == segment->size && segment->mapped == 0);
    fsim_pytorch_tree_erase(&segment->set->unmapped, block);
    fsim_device_va_release(pt->base.device, segment->addr, segment->size);
    fsim_pytorch_segment_destroy(pt, segment);
    block_free(pt, block);
}
