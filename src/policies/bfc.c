/* SPDX-License-Identifier: MIT */
/*
 * bfc: TensorFlow's (and JAX/XLA's) best-fit with coalescing allocator, BFCAllocator.
 *
 * Source: tensorflow/core/common_runtime/bfc_allocator.{h,cc} (the classic version) and its
 * successor openxla/xla xla/tsl/framework/bfc_allocator.{h,cc}; the rules modelled here are
 * theirs, function by function:
 *
 *   RoundedBytes     requests are rounded up to 256-byte units (kMinAllocationSize).
 *   BinNumForSize    21 bins; bin i holds free chunks of [256 * 2^i, 256 * 2^(i+1)) bytes, the
 *                    last one everything from 256 MiB up; a bin is ordered by (size, address).
 *   FindChunkPtr     from the request's bin upward, the first chunk of at least the rounded size:
 *                    best fit within the first bin that has a fit, lowest address on ties.
 *   SplitChunk       the chunk is split when it is at least twice the rounded request, or when
 *                    what would be left over is at least the maximum internal fragmentation
 *                    (128 MiB, or fragmentation_fraction x memory limit when that is set);
 *                    otherwise the whole chunk is handed out and counts as in use.
 *   TryToCoalesce    a freed chunk merges with the next chunk, then the previous one, when free.
 *                    Chunks never merge across regions (the GPU sub-allocator does not support
 *                    region coalescing).
 *   Extend           a new region: its size starts at min(limit, 2 MiB) with allow_growth, else
 *                    the whole memory limit; it doubles while the request exceeds it; the region
 *                    is min(that size, what the limit has left); when the device refuses, back
 *                    off to 90% (rounded to 256 B) while that still covers the request; after a
 *                    success that needed no doubling the size doubles anyway for next time.
 *   AllocateRawInternal  find, else extend and find, else (garbage collection on, as TF's GPU
 *                    allocator sets it by default) DeallocateFreeRegions (cudaFree every region
 *                    with nothing in use, when that could make room) then extend and find, else
 *                    OOM.  TF's 10-second wait for frees from other threads is a plain failure in
 *                    a single-threaded replay; timestamped frees are off by default and not
 *                    modelled.
 *
 * Each region is one cudaMalloc (mem_alloc) of the device; the memory limit is the device's
 * usable capacity.  TensorFlow has no empty_cache, so this policy ignores it.
 *
 * Knobs:
 *   allow_growth            regions doubling from 2 MiB (true) or one region of the whole limit
 *                           (false, TensorFlow's default)
 *   garbage_collection      free unused regions and retry before an OOM (default true)
 *   fragmentation_fraction  split threshold as a fraction of the limit (default 0: 128 MiB)
 */
#include <glib.h>

#include "core/chunk-list.h"
#include "policies.h"

#define BFC_MIN_ALLOCATION             256u
#define BFC_MAX_INTERNAL_FRAGMENTATION (128 * FSIM_MiB)
#define BFC_INITIAL_GROWTH             (2 * FSIM_MiB)

typedef struct Region Region;

/* A chunk, by address: each region is a run of the chunk list. */
typedef struct {
    FsimChunk c; /* must be first */
    Region *region;
} Chunk;

struct Region {
    FsimAddr addr; /* first: fsim_addr_ptr_compare() sorts them */
    uint64_t size;
    Chunk *first;
    Region *next; /* in creation order */
};

typedef struct {
    FsimPolicy base; /* must be first */
    gboolean allow_growth;
    gboolean garbage_collection;
    uint64_t memory_limit;
    uint64_t max_internal_fragmentation;
    uint64_t region_size; /* curr_region_allocation_bytes_ */
    uint64_t regions_bytes;
    uint64_t in_use_bytes;
    Region *regions;
    /* Free chunks by (size, address).  TensorFlow's 21 bins of [256 x 2^i, 256 x 2^(i+1)) bytes
     * each ordered by (size, address), searched from the request's bin upward, are this order
     * cut in 21: the first chunk of the first bin with a fit is the index's lower bound. */
    FsimChunkList chunks;
    uint64_t num_retries;
    uint64_t regions_freed;
} Bfc;

static const FsimKnob bfc_knobs[] = {
    {"allow_growth", "false", "regions doubling from 2MiB (true) or one region of the whole limit"},
    {"garbage_collection", "true", "free unused regions and retry before an OOM"},
    {"fragmentation_fraction", "0",
     "split when the rest is at least this fraction of the limit (0: 128MiB)"},
    {NULL, NULL, NULL},
};

FSIM_POLICY_DEFINE_TYPE(Bfc, bfc)

static uint64_t
bfc_rounded_bytes(uint64_t bytes)
{
    return (bytes + BFC_MIN_ALLOCATION - 1) / BFC_MIN_ALLOCATION * BFC_MIN_ALLOCATION;
}

static FsimPolicy *
bfc_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    g_autofree Bfc *bfc = bfc_new(device);
    const FsimPolicyOps *ops = bfc->base.ops;
    double fraction;

    if (!fsim_knob_get_bool(ops, config, "allow_growth", &bfc->allow_growth, error) ||
        !fsim_knob_get_bool(ops, config, "garbage_collection", &bfc->garbage_collection, error) ||
        !fsim_knob_get_double(ops, config, "fragmentation_fraction", &fraction, error))
        return NULL;
    if (!(fraction >= 0.0 && fraction <= 1.0)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "bfc.fragmentation_fraction: %g is not between 0 and 1", fraction);
        return NULL;
    }
    bfc->memory_limit = device->spec.capacity_bytes;
    bfc->max_internal_fragmentation = fraction > 0.0
                                          ? (uint64_t)(fraction * (double)bfc->memory_limit)
                                          : BFC_MAX_INTERNAL_FRAGMENTATION;
    bfc->region_size = bfc_rounded_bytes(
        bfc->allow_growth ? MIN(bfc->memory_limit, BFC_INITIAL_GROWTH) : bfc->memory_limit);
    fsim_chunk_list_init(&bfc->chunks, sizeof(Chunk));
    return &g_steal_pointer(&bfc)->base;
}

static void
bfc_destroy(FsimPolicy *self)
{
    Bfc *bfc = bfc_from_policy(self);
    Region *region = bfc->regions;

    while (region != NULL) {
        Region *next = region->next;

        g_free(region);
        region = next;
    }
    fsim_chunk_list_clear(&bfc->chunks);
    g_free(bfc);
}

/* FindChunkPtr, and SplitChunk when the chunk is at least twice the request or the rest at least
 * the maximum internal fragmentation. */
static Chunk *
bfc_find(Bfc *bfc, uint64_t rounded)
{
    FsimSizeCursor cursor;
    Chunk *chunk = (Chunk *)fsim_chunk_list_best_fit(&bfc->chunks, rounded, &cursor);
    uint64_t size;

    if (chunk == NULL)
        return NULL;
    size = chunk->c.size;
    if (size >= rounded * 2 || size - rounded >= bfc->max_internal_fragmentation)
        size = rounded;
    fsim_chunk_list_take(&bfc->chunks, &chunk->c, &cursor, size);
    bfc->in_use_bytes += chunk->c.size;
    return chunk;
}

/* Extend: add a region big enough for @rounded bytes. */
static gboolean
bfc_extend(Bfc *bfc, uint64_t rounded)
{
    FsimDevice *device = bfc->base.device;
    uint64_t available = bfc->memory_limit - bfc->regions_bytes;
    gboolean increased = FALSE;
    uint64_t bytes;
    FsimAddr addr;
    Region *region;
    Region **tail;

    available = available / BFC_MIN_ALLOCATION * BFC_MIN_ALLOCATION;
    if (rounded > available)
        return FALSE;
    while (rounded > bfc->region_size) {
        bfc->region_size *= 2;
        increased = TRUE;
    }
    bytes = MIN(bfc->region_size, available);
    while (fsim_device_mem_alloc(device, bytes, &addr) != FSIM_OK) {
        uint64_t less = bfc_rounded_bytes((uint64_t)((double)bytes * 0.9));

        if (less < rounded || less >= bytes)
            return FALSE;
        bytes = less;
    }
    if (!increased)
        bfc->region_size *= 2;
    region = g_new0(Region, 1);
    region->addr = addr;
    region->size = bytes;
    region->first = (Chunk *)fsim_chunk_list_add_run(&bfc->chunks, addr, bytes);
    region->first->region = region;
    for (tail = &bfc->regions; *tail != NULL; tail = &(*tail)->next)
        ;
    *tail = region;
    bfc->regions_bytes += bytes;
    return TRUE;
}

/* DeallocateFreeRegions: cudaFree every region with nothing in use, when that could help. */
static gboolean
bfc_deallocate_free_regions(Bfc *bfc, uint64_t rounded)
{
    uint64_t free_bytes = 0;
    Region **link;

    if (!bfc->garbage_collection)
        return FALSE;
    for (Region *region = bfc->regions; region != NULL; region = region->next) {
        if (region->first->c.free && region->first->c.next == NULL)
            free_bytes += region->size;
    }
    if (free_bytes == 0 || rounded > bfc->memory_limit - bfc->regions_bytes + free_bytes)
        return FALSE;
    link = &bfc->regions;
    while (*link != NULL) {
        Region *region = *link;

        if (region->first->c.free && region->first->c.next == NULL) {
            *link = region->next;
            fsim_chunk_list_drop_run(&bfc->chunks, &region->first->c);
            fsim_device_mem_free(bfc->base.device, region->addr, region->size);
            bfc->regions_bytes -= region->size;
            bfc->regions_freed++;
            g_free(region);
        } else {
            link = &region->next;
        }
    }
    bfc->num_retries++;
    return TRUE;
}

static FsimStatus
bfc_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    Bfc *bfc = bfc_from_policy(self);
    uint64_t rounded = bfc_rounded_bytes(req->size);
    Chunk *chunk = bfc_find(bfc, rounded);

    if (chunk == NULL && bfc_extend(bfc, rounded))
        chunk = bfc_find(bfc, rounded);
    if (chunk == NULL && bfc_deallocate_free_regions(bfc, rounded) && bfc_extend(bfc, rounded))
        chunk = bfc_find(bfc, rounded);
    if (chunk == NULL)
        return FSIM_OOM;
    fsim_chunk_hand_out(&chunk->c, 0, out);
    return FSIM_OK;
}

static void
bfc_dealloc(FsimPolicy *self, const FsimBlock *block, FsimTime now)
{
    Bfc *bfc = bfc_from_policy(self);
    FsimChunk *chunk = fsim_chunk_handed_back(block);

    (void)now;
    bfc->in_use_bytes -= chunk->size;
    fsim_chunk_list_release(&bfc->chunks, chunk);
}

static void
bfc_get_stats(const FsimPolicy *self, FsimPolicyStats *out)
{
    const Bfc *bfc = (const Bfc *)self;

    out->cached_bytes = bfc->regions_bytes - bfc->in_use_bytes;
    out->largest_free_block = fsim_chunk_list_largest(&bfc->chunks);
    out->num_splits = bfc->chunks.num_splits;
    out->num_merges = bfc->chunks.num_merges;
    out->num_alloc_retries = bfc->num_retries;
    fsim_policy_stats_extra(out, "regions_freed", bfc->regions_freed);
}

static gboolean
bfc_check_region(const Bfc *bfc, const Region *region, uint64_t *in_use, gsize *n_free,
                 GError **error)
{
    if (!fsim_chunk_list_check_run(&bfc->chunks, &region->first->c, region->addr,
                                   region->addr + region->size, in_use, n_free, error))
        return FALSE;
    for (const Chunk *chunk = region->first; chunk != NULL; chunk = (Chunk *)chunk->c.next) {
        if (chunk->region != region || chunk->c.size % BFC_MIN_ALLOCATION != 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "chunk at %#" G_GINT64_MODIFIER "x breaks its region's chain",
                        chunk->c.start);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean
bfc_check(const FsimPolicy *self, GError **error)
{
    const Bfc *bfc = (const Bfc *)self;
    uint64_t in_use = 0;
    uint64_t regions = 0;
    uint64_t reserved = 0;
    gsize n_free = 0;

    for (const Region *region = bfc->regions; region != NULL; region = region->next) {
        if (!bfc_check_region(bfc, region, &in_use, &n_free, error))
            return FALSE;
        regions += region->size;
        reserved += fsim_device_round(self->device, region->size);
    }
    if (!fsim_chunk_list_check_index(&bfc->chunks, n_free, error))
        return FALSE;
    if (regions > bfc->memory_limit) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "regions of %" G_GUINT64_FORMAT " bytes beyond the memory limit", regions);
        return FALSE;
    }
    FsimTally tallies[] = {
        {"in use", in_use, bfc->in_use_bytes},
        {"regions", regions, bfc->regions_bytes},
    };

    return fsim_policy_check_accounts(self, reserved, tallies, G_N_ELEMENTS(tallies), error);
}

/* Each region is a segment (its size rounded to the device's granularity: the tail is the
 * rounding no chunk covers).  A region goes back to the device only whole, when nothing in it is
 * in use and garbage collection is on (DeallocateFreeRegions): a free chunk is releasable when
 * it is its region's only chunk; any other free chunk is pinned by the chunks in use beside it. */
static void
bfc_describe(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data)
{
    const Bfc *bfc = (const Bfc *)self;
    g_autoptr(GPtrArray) regions = g_ptr_array_new();

    for (Region *region = bfc->regions; region != NULL; region = region->next)
        g_ptr_array_add(regions, region);
    g_ptr_array_sort(regions, fsim_addr_ptr_compare); /* by their first member, addr */
    for (guint i = 0; i < regions->len; i++) {
        const Region *region = g_ptr_array_index(regions, i);
        FsimSegmentView segment = {.addr = region->addr,
                                   .size = fsim_device_round(self->device, region->size),
                                   .pool = FSIM_POOL_UNKNOWN};

        visitor->segment(data, &segment);
        for (const FsimChunk *chunk = &region->first->c; chunk != NULL; chunk = chunk->next) {
            gboolean whole = chunk->prev == NULL && chunk->next == NULL;
            FsimBlockView block = {.addr = chunk->start, .size = chunk->size, .free = chunk->free};

            block.releasable = block.free && whole && bfc->garbage_collection ? chunk->size : 0;
            visitor->block(data, &block);
        }
    }
}

const FsimPolicyOps fsim_policy_bfc = {
    .name = "bfc",
    .summary = "TensorFlow's BFC: 256 B units, power-of-two bins, best fit, regions that grow",
    .knobs = bfc_knobs,
    .create = bfc_create,
    .destroy = bfc_destroy,
    .alloc = bfc_alloc,
    .dealloc = bfc_dealloc,
    .get_stats = bfc_get_stats,
    .check = bfc_check,
    .describe = bfc_describe,
};
