/* SPDX-License-Identifier: MIT */
/*
 * buddy: a binary buddy allocator.
 *
 * Source: the buddy system of Knowlton ("A fast storage allocator", CACM 8(10), 1965) as Knuth
 * gives it in TAOCP vol. 1, section 2.5, algorithms R (reservation) and S (liberation); the same
 * scheme serves many runtimes' device pools (the "max chunk" of PaddlePaddle's BuddyAllocator,
 * MXNet's pooled storage, Linux's page allocator).  Every block has a size of min_block x 2^k
 * (order k) and starts at a multiple of its size from its region's base:
 *
 *   reserve  a request takes the smallest order whose block holds it; the lowest-addressed free
 *            block of that order is taken, else one of the next order up is split in halves
 *            (the upper half goes to the free list of the order below) until the order fits;
 *   free     a block merges with its buddy (the block whose offset differs in bit k) while the
 *            buddy is free and of the same order, up to the region's order.
 *
 * Memory comes from the device in regions of min_block x 2^max_order bytes (one cudaMalloc
 * each); when the device cannot provide that much, a region of the largest smaller order that
 * still holds the request (at least the device granularity) is taken, as BFC backs off.  A
 * request larger than a whole region bypasses the buddy system and gets its own cudaMalloc, as
 * PaddlePaddle does for chunks above its maximum.  Before an OOM, wholly free regions are
 * returned to the device and the request retried; empty_cache returns them too.
 *
 * Knobs:
 *   min_block  smallest block (default 512 bytes, a power of two)
 *   max_order  orders above min_block in a region (default 21: 1 GiB regions)
 */
#include <glib.h>

#include "core/size-set.h"
#include "policies.h"

#define BUDDY_MAX_ORDER 40

typedef struct Region Region;

struct Region {
    FsimAddr addr;
    guint order;
};

typedef struct {
    FsimAddr addr; /* first: fsim_addr_compare() sorts them */
    guint order;
} FreeBlock; /* as describe() lists them */

typedef struct {
    FsimPolicy base; /* must be first */
    uint64_t min_block;
    guint min_shift;
    guint max_order;
    GPtrArray *regions; /* Region*, owned */
    /* The free lists: free blocks by (size, address), each with its Region as the item.  The
     * lowest-addressed block of the first non-empty list of order k or above is the set's lower
     * bound at the size of order k. */
    FsimSizeSet free_set;
    uint64_t regions_bytes;
    uint64_t allocated_bytes; /* in regions */
    uint64_t oversize_bytes;  /* direct cudaMallocs, as rounded by the device */
    uint64_t oversize_blocks;
    GArray *oversize; /* their FsimBlock, for describe(): few, each larger than a region */
    uint64_t num_splits;
    uint64_t num_merges;
    uint64_t num_retries;
} Buddy;

static const FsimKnob buddy_knobs[] = {
    {"min_block", "512", "smallest block in bytes (a power of two, 256B to 2MiB)"},
    {"max_order", "21", "orders above min_block in a region (region = min_block << max_order)"},
    {NULL, NULL, NULL},
};

FSIM_POLICY_DEFINE_TYPE(Buddy, buddy)

static uint64_t
buddy_block_size(const Buddy *buddy, guint order)
{
    return buddy->min_block << order;
}

static FsimPolicy *
buddy_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    g_autofree Buddy *buddy = buddy_new(device);
    uint64_t min_block;
    uint64_t max_order;

    if (!fsim_knob_get_size(buddy->base.ops, config, "min_block", &min_block, error) ||
        !fsim_knob_get_u64(buddy->base.ops, config, "max_order", &max_order, error))
        return NULL;
    if (min_block < 256 || min_block > 2 * FSIM_MiB || (min_block & (min_block - 1)) != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "buddy.min_block: %" G_GUINT64_FORMAT
                    " is not a power of two between 256 and 2MiB",
                    min_block);
        return NULL;
    }
    if (max_order > BUDDY_MAX_ORDER || (min_block << max_order) > 1024 * FSIM_GiB) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "buddy.max_order: %" G_GUINT64_FORMAT
                    " makes regions larger than 1TiB (at most %d)",
                    max_order, BUDDY_MAX_ORDER);
        return NULL;
    }
    buddy->min_block = min_block;
    buddy->min_shift = (guint)g_bit_nth_lsf(min_block, -1);
    buddy->max_order = (guint)max_order;
    buddy->regions = g_ptr_array_new_with_free_func(g_free);
    buddy->oversize = g_array_new(FALSE, FALSE, sizeof(FsimBlock));
    fsim_size_set_init(&buddy->free_set);
    return &g_steal_pointer(&buddy)->base;
}

static void
buddy_destroy(FsimPolicy *self)
{
    Buddy *buddy = buddy_from_policy(self);

    fsim_size_set_clear(&buddy->free_set);
    g_ptr_array_unref(buddy->regions);
    g_array_unref(buddy->oversize);
    g_free(buddy);
}

static void
buddy_insert_free(Buddy *buddy, FsimAddr addr, guint order, Region *region)
{
    fsim_size_set_insert(&buddy->free_set, buddy_block_size(buddy, order), addr, region);
}

/* The order of a block of @size bytes. */
static guint
buddy_order_of(const Buddy *buddy, uint64_t size)
{
    return (guint)__builtin_ctzll(size) - buddy->min_shift;
}

/* Find the free block of @order at @addr in @region: its cursor, FALSE when not free. */
static gboolean
buddy_find_free(const Buddy *buddy, FsimAddr addr, guint order, const Region *region,
                FsimSizeCursor *cursor)
{
    return fsim_size_set_find(&buddy->free_set, buddy_block_size(buddy, order), addr, region,
                              cursor);
}

/* The smallest order whose block holds @size, or max_order + 1 when none does. */
static guint
buddy_order_for(const Buddy *buddy, uint64_t size)
{
    guint order;

    if (size <= buddy->min_block)
        return 0;
    /* ceil(log2(size)) - log2(min_block) */
    order = 64u - (guint)__builtin_clzll(size - 1) - buddy->min_shift;
    return MIN(order, buddy->max_order + 1);
}

/* A new region of order max_order, or smaller down to @order when the device refuses. */
static gboolean
buddy_grow(Buddy *buddy, guint order)
{
    FsimDevice *device = buddy->base.device;
    uint64_t granularity = device->spec.granularity;

    for (guint k = buddy->max_order; k + 1 > order; k--) {
        uint64_t size = buddy_block_size(buddy, k);
        FsimAddr addr;
        Region *region;

        if (k < buddy->max_order && size < granularity)
            break;
        if (fsim_device_mem_alloc(device, size, &addr) != FSIM_OK)
            continue;
        region = g_new(Region, 1);
        region->addr = addr;
        region->order = k;
        g_ptr_array_add(buddy->regions, region);
        buddy->regions_bytes += size;
        buddy_insert_free(buddy, addr, k, region);
        return TRUE;
    }
    return FALSE;
}

/* Take a block of @order from the free lists, splitting a larger one; FALSE when none. */
static gboolean
buddy_take(Buddy *buddy, guint order, FsimAddr *addr, Region **region)
{
    FsimSizeCursor cursor;
    const FsimSizeEntry *block;
    guint k;

    *region =
        fsim_size_set_lower_bound(&buddy->free_set, buddy_block_size(buddy, order), 0, &cursor);
    if (*region == NULL)
        return FALSE;
    block = fsim_size_set_entry(&cursor);
    *addr = block->key;
    k = buddy_order_of(buddy, block->size);
    fsim_size_set_erase_at(&buddy->free_set, &cursor);
    while (k > order) {
        k--;
        buddy_insert_free(buddy, *addr + buddy_block_size(buddy, k), k, *region);
        buddy->num_splits++;
    }
    return TRUE;
}

/* Return every wholly free region to the device; TRUE when one was. */
static gboolean
buddy_release_free_regions(Buddy *buddy)
{
    gboolean released = FALSE;

    for (guint i = buddy->regions->len; i-- > 0;) {
        Region *region = g_ptr_array_index(buddy->regions, i);
        FsimSizeCursor cursor;

        if (!buddy_find_free(buddy, region->addr, region->order, region, &cursor))
            continue;
        fsim_size_set_erase_at(&buddy->free_set, &cursor);
        fsim_device_mem_free(buddy->base.device, region->addr,
                             buddy_block_size(buddy, region->order));
        buddy->regions_bytes -= buddy_block_size(buddy, region->order);
        g_ptr_array_remove_index(buddy->regions, i);
        released = TRUE;
    }
    return released;
}

static FsimStatus
buddy_alloc_oversize(Buddy *buddy, const FsimAllocRequest *req, FsimBlock *out)
{
    FsimDevice *device = buddy->base.device;
    FsimAddr addr;

    if (fsim_device_mem_alloc(device, req->size, &addr) != FSIM_OK) {
        if (!buddy_release_free_regions(buddy) ||
            fsim_device_mem_alloc(device, req->size, &addr) != FSIM_OK)
            return FSIM_OOM;
        buddy->num_retries++;
    }
    out->addr = addr;
    out->size = fsim_device_round(device, req->size);
    out->cookie = 0;
    buddy->oversize_bytes += out->size;
    buddy->oversize_blocks++;
    g_array_append_val(buddy->oversize, *out);
    return FSIM_OK;
}

static FsimStatus
buddy_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    Buddy *buddy = buddy_from_policy(self);
    guint order = buddy_order_for(buddy, req->size);
    FsimAddr addr;
    Region *region;

    if (order > buddy->max_order)
        return buddy_alloc_oversize(buddy, req, out);
    if (!buddy_take(buddy, order, &addr, &region)) {
        if (!buddy_grow(buddy, order)) {
            if (!buddy_release_free_regions(buddy) || !buddy_grow(buddy, order))
                return FSIM_OOM;
            buddy->num_retries++;
        }
        if (!buddy_take(buddy, order, &addr, &region))
            g_assert_not_reached();
    }
    out->addr = addr;
    out->size = buddy_block_size(buddy, order);
    out->cookie = (uint64_t)(uintptr_t)region;
    buddy->allocated_bytes += out->size;
    return FSIM_OK;
}

static void
buddy_dealloc(FsimPolicy *self, const FsimBlock *block, FsimTime now)
{
    Buddy *buddy = buddy_from_policy(self);
    Region *region = (Region *)(uintptr_t)block->cookie;
    FsimAddr addr = block->addr;
    guint order;

    (void)now;
    if (region == NULL) {
        fsim_device_mem_free(self->device, block->addr, block->size);
        buddy->oversize_bytes -= block->size;
        buddy->oversize_blocks--;
        for (guint i = 0; i < buddy->oversize->len; i++) {
            if (g_array_index(buddy->oversize, FsimBlock, i).addr == block->addr) {
                g_array_remove_index_fast(buddy->oversize, i);
                break;
            }
        }
        return;
    }
    order = buddy_order_of(buddy, block->size);
    g_assert(buddy_block_size(buddy, order) == block->size && order <= region->order);
    buddy->allocated_bytes -= block->size;
    while (order < region->order) {
        FsimAddr other = region->addr + ((addr - region->addr) ^ buddy_block_size(buddy, order));
        FsimSizeCursor cursor;

        if (!buddy_find_free(buddy, other, order, region, &cursor))
            break;
        fsim_size_set_erase_at(&buddy->free_set, &cursor);
        addr = MIN(addr, other);
        order++;
        buddy->num_merges++;
    }
    buddy_insert_free(buddy, addr, order, region);
}

static void
buddy_empty_cache(FsimPolicy *self, FsimTime now)
{
    (void)now;
    buddy_release_free_regions(buddy_from_policy(self));
}

static void
buddy_get_stats(const FsimPolicy *self, FsimPolicyStats *out)
{
    const Buddy *buddy = (const Buddy *)self;
    FsimSizeCursor cursor;

    out->cached_bytes = buddy->regions_bytes - buddy->allocated_bytes;
    out->largest_free_block = fsim_size_set_last(&buddy->free_set, &cursor) != NULL
                                  ? fsim_size_set_entry(&cursor)->size
                                  : 0;
    out->num_splits = buddy->num_splits;
    out->num_merges = buddy->num_merges;
    out->num_alloc_retries = buddy->num_retries;
    fsim_policy_stats_extra(out, "oversize_blocks", buddy->oversize_blocks);
}

/* One free block's invariants: a block of its order at a multiple of its size in its region, and
 * not merged with a free buddy.  NULL when they hold. */
static const char *
buddy_check_free_block(const Buddy *buddy, const FsimSizeEntry *block)
{
    const Region *region = block->item;
    guint order = buddy_order_of(buddy, block->size);
    uint64_t offset = block->key - region->addr;
    FsimSizeCursor cursor;

    if (buddy_block_size(buddy, order) != block->size || order > region->order ||
        offset % block->size != 0 || offset + block->size > buddy_block_size(buddy, region->order))
        return "is misplaced";
    if (order < region->order &&
        buddy_find_free(buddy, region->addr + (offset ^ block->size), order, region, &cursor))
        return "and its buddy are free, not merged";
    return NULL;
}

static gboolean
buddy_check(const FsimPolicy *self, GError **error)
{
    const Buddy *buddy = (const Buddy *)self;
    uint64_t free_bytes = 0;
    uint64_t regions = 0;
    uint64_t reserved;
    FsimSizeCursor cursor;

    for (fsim_size_set_first(&buddy->free_set, &cursor); fsim_size_set_entry(&cursor) != NULL;
         fsim_size_set_next(&buddy->free_set, &cursor)) {
        const FsimSizeEntry *block = fsim_size_set_entry(&cursor);
        const char *wrong = buddy_check_free_block(buddy, block);

        if (wrong != NULL) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "free block at %#" G_GINT64_MODIFIER "x of %" G_GUINT64_FORMAT " bytes %s",
                        block->key, block->size, wrong);
            return FALSE;
        }
        free_bytes += block->size;
    }
    reserved = buddy->oversize_bytes;
    for (guint i = 0; i < buddy->regions->len; i++) {
        const Region *region = g_ptr_array_index(buddy->regions, i);

        regions += buddy_block_size(buddy, region->order);
        reserved += fsim_device_round(self->device, buddy_block_size(buddy, region->order));
    }
    FsimTally tallies[] = {
        {"regions", regions, buddy->regions_bytes},
        {"free and allocated", free_bytes + buddy->allocated_bytes, buddy->regions_bytes},
    };

    return fsim_policy_check_accounts(self, reserved, tallies, G_N_ELEMENTS(tallies), error);
}

/* The free blocks of @region, in address order, into @blocks. */
static void
buddy_region_free_blocks(const Buddy *buddy, const Region *region, GArray *blocks)
{
    FsimSizeCursor cursor;

    g_array_set_size(blocks, 0);
    for (fsim_size_set_first(&buddy->free_set, &cursor); fsim_size_set_entry(&cursor) != NULL;
         fsim_size_set_next(&buddy->free_set, &cursor)) {
        const FsimSizeEntry *entry = fsim_size_set_entry(&cursor);
        FreeBlock block = {.addr = entry->key, .order = buddy_order_of(buddy, entry->size)};

        if (entry->item == region)
            g_array_append_val(blocks, block);
    }
    g_array_sort_with_data(blocks, fsim_addr_compare, NULL); /* by their first member, addr */
}

/* A region is a segment, an oversize block one of its own.  The buddy system keeps only its
 * free blocks; the blocks in use are the run's live allocations inside (free_blocks_only).  A
 * region goes back to the device only when wholly free (before an OOM, or empty_cache): its one
 * free block of the region's order is releasable, every other free block is pinned by the blocks
 * in use beside it.  Walks every free list per region: for explain's moments, not per event. */
static void
buddy_describe(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data)
{
    const Buddy *buddy = (const Buddy *)self;
    g_autoptr(GArray) segments = g_array_new(FALSE, FALSE, sizeof(FsimSegmentView));
    g_autoptr(GArray) blocks = g_array_new(FALSE, FALSE, sizeof(FreeBlock));

    for (guint i = 0; i < buddy->regions->len; i++) {
        const Region *region = g_ptr_array_index(buddy->regions, i);
        FsimSegmentView view = {
            .addr = region->addr,
            .size = fsim_device_round(self->device, buddy_block_size(buddy, region->order)),
            .free_blocks_only = TRUE,
        };

        g_array_append_val(segments, view);
    }
    for (guint i = 0; i < buddy->oversize->len; i++) {
        const FsimBlock *block = &g_array_index(buddy->oversize, FsimBlock, i);
        FsimSegmentView view = {.addr = block->addr, .size = block->size, .free_blocks_only = TRUE};

        g_array_append_val(segments, view);
    }
    g_array_sort_with_data(segments, fsim_addr_compare, NULL); /* by their first member, addr */
    for (guint i = 0; i < segments->len; i++) {
        const FsimSegmentView *view = &g_array_index(segments, FsimSegmentView, i);
        const Region *region = NULL;

        visitor->segment(data, view);
        for (guint r = 0; r < buddy->regions->len && region == NULL; r++) {
            const Region *candidate = g_ptr_array_index(buddy->regions, r);

            if (candidate->addr == view->addr)
                region = candidate;
        }
        if (region == NULL)
            continue; /* an oversize block: in use */
        buddy_region_free_blocks(buddy, region, blocks);
        for (guint b = 0; b < blocks->len; b++) {
            const FreeBlock *free_block = &g_array_index(blocks, FreeBlock, b);
            FsimBlockView block = {.addr = free_block->addr,
                                   .size = buddy_block_size(buddy, free_block->order),
                                   .free = TRUE};

            block.releasable = free_block->order == region->order ? block.size : 0;
            visitor->block(data, &block);
        }
    }
}

const FsimPolicyOps fsim_policy_buddy = {
    .name = "buddy",
    .summary = "binary buddy system: power-of-two blocks, split and merge with the buddy",
    .knobs = buddy_knobs,
    .create = buddy_create,
    .destroy = buddy_destroy,
    .alloc = buddy_alloc,
    .dealloc = buddy_dealloc,
    .empty_cache = buddy_empty_cache,
    .get_stats = buddy_get_stats,
    .check = buddy_check,
    .describe = buddy_describe,
};
