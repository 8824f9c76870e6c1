/* SPDX-License-Identifier: MIT */
/*
 * malloc of PyTorch's caching allocator (DeviceCachingAllocator::malloc): the request rounded
 * (round_size), its pool chosen, the best fit of its stream taken (get_free_block); else garbage
 * collection, new memory (alloc_block), release_available_cached_blocks and new memory again,
 * release_cached_blocks and a last try counted as a retry; else OOM.  The block found is split
 * when should_split says so, the allocation taking its low end.
 */
#include <glib.h>

#include "model.h"

/* roundup_power2_next_division(): e.g. 1200 with 4 divisions lies in [1024, 2048), cut into
 * 1024, 1280, 1536, 1792: 1280. */
static uint64_t
roundup_power2_next_division(uint64_t size, uint64_t divisions)
{
    uint64_t floor;
    uint64_t step;
    uint64_t low;

    if ((size & (size - 1)) == 0)
        return size;
    floor = (uint64_t)1 << (63 - __builtin_clzll(size));
    step = floor >> (63 - __builtin_clzll(divisions));
    if (step == 0)
        return floor << 1;
    low = size & ~(step - 1);
    return low == size ? size : low + step;
}

uint64_t
fsim_pytorch_round_size(const FsimAllocConf *conf, uint64_t size)
{
    uint64_t divisions;

    /* torch_npu's round_size(): the pad first; the pool and the segment follow the padded,
     * rounded size (npu-allocator.md rules 1-3) */
    if (conf->platform == FSIM_PLATFORM_NPU)
        size += FSIM_NPU_REQUEST_PAD;
    if (size < FSIM_PYTORCH_MIN_BLOCK)
        return FSIM_PYTORCH_MIN_BLOCK;
    divisions = size > conf->roundup_bypass_threshold ? 0 : fsim_alloc_conf_divisions(conf, size);
    if (divisions > 1 && size > FSIM_PYTORCH_MIN_BLOCK * divisions)
        return roundup_power2_next_division(size, divisions);
    return round_up(size, FSIM_PYTORCH_MIN_BLOCK);
}

uint64_t
fsim_pytorch_allocation_size(const FsimAllocConf *conf, uint64_t size)
{
    if (size <= FSIM_PYTORCH_SMALL_SIZE)
        return FSIM_PYTORCH_SMALL_BUFFER;
    if (conf->platform == FSIM_PLATFORM_NPU && conf->npu_page_1g)
        return round_up(size, FSIM_NPU_PAGE_1G); /* torch_npu's malloc(), page_size:1g */
    if (size < FSIM_PYTORCH_MIN_LARGE_ALLOC) {
        /* large_segment_size (kLargeBuffer, 20 MiB): a shared segment for 1-10 MiB requests.  A
         * large_segment_size_mb below the request would make a segment too small to hold it; we
         * take the request's own 2 MiB rounding then. */
        return MAX(conf->large_segment_size, round_up(size, FSIM_PYTORCH_ROUND_LARGE));
    }
    return round_up(size, FSIM_PYTORCH_ROUND_LARGE);
}

/* should_split() of @block, a block of @pool: small pool (and every pool under expandable
 * segments) whenever at least 512 B remain; large pool only below max_split_size and when more than
 * 1 MiB remains -- a remainder of at most 1 MiB stays inside the allocation as internal
 * fragmentation; never in a MemPool(no_split=True).  The pool's two bounds say it
 * (fsim_pytorch_pool_init()): the pool is as random as the sizes, so no branch on it. */
static inline gboolean
should_split(const Pool *pool, const Block *block, uint64_t size)
{
    return (block->size - size >= pool->split_rest_min) & (size < pool->split_size_below);
}

/* The size a free block can grow to: itself and the unmapped range after it. */
static inline uint64_t
expandable_size(const Block *block)
{
    return block->size +
           (block->next != NULL && block_unmapped(block->next) ? block->next->size : 0);
}

/* get_free_block(): the best fit on this stream, or NULL.  The block is taken out of the pool.
 * Inline: a call's prologue and epilogue (six saved registers, the cursor's frame) cost as much
 * as the search in a bin of a few blocks. */
static inline G_ALWAYS_INLINE Block *
get_free_block(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size)
{
    StreamSet *set;
    Block *block;
    FreeCursor cursor;

    if (G_UNLIKELY(pt->gc_active))
        pool->clock++;
    set = pool_find(pool, stream);
    if (set == NULL)
        return NULL;
    block = freeset_lower_bound(&set->free, size, &cursor);
    if (block == NULL)
        return NULL;
    if (block_expandable(block)) {
        if (pt->expandable) {
            /* Best fit by the size a block can expand to: the frontier block, which can grow
             * over the whole unmapped rest of the reservation, comes after every block that
             * fits as it is.  Only a block that can grow gives way: a later one is at least as
             * large as it is (the set's order), so the next block is read only then. */
            FreeCursor ahead = cursor;

            while (block_expandable(block) && expandable_size(block) != block->size) {
                Block *next = freeset_next(&set->free, &ahead);

                if (next == NULL || expandable_size(next) >= expandable_size(block))
                    break;
                block = next;
                cursor = ahead;
            }
        } else {
            /* Expandable segments were switched off: only ordinary blocks qualify. */
            do
                block = freeset_next(&set->free, &cursor);
            while (block != NULL && block_expandable(block));
            if (block == NULL)
                return NULL;
        }
    }
    /* Never hand an oversize block to a normal request, and give an oversize request only a
     * near fit (max_non_split_rounding_mb; kLargeBuffer before PyTorch 2.6). */
    if (size < pt->conf.max_split_size && block->size >= pt->conf.max_split_size)
        return NULL;
    if (size >= pt->conf.max_split_size && block->size >= size + pt->conf.max_non_split_rounding)
        return NULL;
    freeset_erase_at(&set->free, &cursor);
    return block;
}

/* alloc_block(): new memory for the pool: a cudaMalloc'd segment of @alloc_size, or pages of an
 * expandable segment for @size.  NULL when the device (or the memory fraction) says no. */
static Block *
alloc_block(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size, uint64_t alloc_size,
            gboolean retry)
{
    if (retry)
        pt->stats.num_alloc_retries++;
    if (pt->conf.has_memory_fraction &&
        pt->total_allocated_memory + alloc_size > pt->allowed_memory_maximum)
        return NULL;
    if (pt->expandable)
        return fsim_pytorch_expandable_alloc(pt, pool, stream, size);
    return fsim_pytorch_malloc_segment(pt, pool, stream, alloc_size);
}

/* alloc_found_block(): hand out the low @size bytes of @block, the rest going back to the pool
 * when @split. */
static Block *
alloc_found_block(Pytorch *pt, Block *block, uint64_t size, uint64_t requested, gboolean split)
{
    Stats *stats = &pt->stats;
    gboolean already_split = block_is_split(block);
    gboolean expandable = block_expandable(block);

    if (split) {
        Block *remaining = block;

        block = block_new_like(pt, remaining);
        block->addr = remaining->addr;
        block->size = size;
        block_link_before(block, remaining);
        remaining->addr += size;
        remaining->size -= size;
        pool_insert_free(remaining);
        stats->num_splits++;
        if (already_split && !expandable) {
            /* an inactive split block shrinks by @size */
            stat_down(&stats->inactive_split_bytes, size);
        } else if (!expandable) {
            /* a new inactive split block appears */
            stat_up_current(&stats->inactive_split_bytes, remaining->size);
            stat_up_current(&stats->inactive_split, 1);
        }
    } else if (already_split && !expandable) {
        stat_down(&stats->inactive_split_bytes, block->size);
        stat_down(&stats->inactive_split, 1);
    }
    block->flags |= BLOCK_ALLOCATED;
    block->requested = requested;
    stat_up_current(&stats->allocation, 1);
    stat_up(&stats->allocated_bytes, block->size);
    stat_up_current(&stats->active, 1);
    stat_up_current(&stats->active_bytes, block->size);
    stat_up_current(&stats->requested_bytes, requested);
    if (block->size >= pt->conf.max_split_size)
        stat_up_current(&stats->oversize_allocations, 1);
    return block;
}

/* try_mempool_fallback() (PyTorch main): a default-pool request that got no new memory takes a
 * cached block of a MemPool created with use_on_oom, in pool id order, never new memory. */
static Block *
try_mempool_fallback(Pytorch *pt, const Pool *pool, uint64_t stream, uint64_t size)
{
    if (pool->owner != NULL)
        return NULL; /* already in a private pool: OOM */
    for (guint i = 0; i < pt->private_pools->len; i++) {
        PrivatePool *pp = g_ptr_array_index(pt->private_pools, i);
        Block *block;

        if (!pp->use_on_oom)
            continue;
        block = get_free_block(pt, pool->small ? &pp->small : &pp->large, stream, size);
        if (block != NULL)
            return block;
    }
    return NULL;
}

/* torch_npu's malloc() under expandable segments (base_addr_aligned_kb): a request of 2 MiB or
 * more whose block does not start on the boundary moves up to it when it still fits; the skipped
 * head stays a free block of the pool.  Before the split decision, on whichever block was found.
 * torch_npu leaves the inactive-split counters alone here; we count the head and the rest as
 * split blocks so that memory_stats() stays the sum of its blocks (no effect on placement). */
static Block *
npu_align_block(Pytorch *pt, Block *block, uint64_t size)
{
    uint64_t align = pt->conf.npu_base_addr_aligned;
    uint64_t offset;
    Block *rest;

    if (pt->conf.platform != FSIM_PLATFORM_NPU || !pt->expandable || align == 0 ||
        size < FSIM_PYTORCH_ROUND_LARGE || block->addr % align == 0)
        return block;
    offset = align - block->addr % align;
    if (offset + size > block->size)
        return block;
    if (!block_expandable(block)) {
        Stats *stats = &pt->stats;

        fsim_counter_add(&stats->inactive_split, block_is_split(block) ? 1 : 2);
        if (!block_is_split(block))
            fsim_counter_add(&stats->inactive_split_bytes, (int64_t)block->size);
    }
    rest = block_new(pt, block->segment);
    rest->addr = block->addr + offset;
    rest->size = block->size - offset;
    block_link_after(rest, block);
    block->size = offset;
    pool_insert_free(block);
    return rest;
}

/* get_pool(): the pool of the newest scope open on @stream, else a default one. */
static Pool *
get_pool(Pytorch *pt, uint64_t size, uint64_t stream)
{
    gboolean small = size <= FSIM_PYTORCH_SMALL_SIZE;
    PrivatePool *pp = pt->captures->len > 0 ? fsim_pytorch_capture_pool(pt, stream) : NULL;

    if (pp != NULL)
        return small ? &pp->small : &pp->large;
    return pt->default_pools[small]; /* a load, not a branch on a random size */
}

/* malloc() after get_free_block() found nothing: garbage collection, new memory, the MemPool
 * fallback, release_available_cached_blocks and new memory, release_cached_blocks and a retry.
 * NULL: out of memory.  Out of line: the hot path is the cached block. */
static G_NO_INLINE Block *
alloc_new_memory(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size)
{
    uint64_t alloc_size = fsim_pytorch_allocation_size(&pt->conf, size);
    Block *block;

    if (pt->gc_active)
        fsim_pytorch_garbage_collect(pt);
    block = alloc_block(pt, pool, stream, size, alloc_size, FALSE);
    if (block == NULL && pt->use_on_oom_ids->len > 0)
        block = try_mempool_fallback(pt, pool, stream, size);
    if (block == NULL && fsim_pytorch_release_available_cached_blocks(pt, pool, stream, size))
        block = alloc_block(pt, pool, stream, size, alloc_size, FALSE);
    /* Never while a capture is underway: it would free memory a graph may use. */
    if (block == NULL && pt->captures->len == 0 && fsim_pytorch_release_cached_blocks(pt))
        block = alloc_block(pt, pool, stream, size, alloc_size, TRUE);
    if (block == NULL)
        pt->stats.num_ooms++;
    return block;
}

FsimStatus
fsim_pytorch_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    Pytorch *pt = pytorch_from_policy(self);
    uint64_t size = G_LIKELY(pt->round_plain)
                        ? round_up(MAX(req->size, FSIM_PYTORCH_MIN_BLOCK), FSIM_PYTORCH_MIN_BLOCK)
                        : fsim_pytorch_round_size(&pt->conf, req->size);
    Pool *pool = get_pool(pt, size, req->stream);
    Block *block = get_free_block(pt, pool, req->stream, size);

    if (G_UNLIKELY(block == NULL)) {
        block = alloc_new_memory(pt, pool, req->stream, size);
        if (block == NULL)
            return FSIM_OOM;
        pool = block->set->pool; /* new memory's, or a MemPool's (try_mempool_fallback()) */
    }
    block = npu_align_block(pt, block, size); /* the same pool */
    block = alloc_found_block(pt, block, size, req->size, should_split(pool, block, size));
    out->addr = block->addr;
    out->size = block->size;
    out->cookie = (uint64_t)(uintptr_t)block;
    return FSIM_OK;
}
