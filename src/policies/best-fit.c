/* SPDX-License-Identifier: MIT */
/*
 * bestfit: one arena, best fit by size then lowest address, immediate coalescing.
 *
 * This is the classic coalescing heap of RMM's pool_memory_resource and of TensorFlow's BFC
 * allocator without its size bins (and of Knuth's TAOCP 2.5 with the best-fit rule), and the
 * model behind the "heap size" XLA reports.  All memory comes from one contiguous arena the size
 * of the device; blocks are kept in address order with boundary links, so a freed block merges
 * with free neighbours in O(1), and the free blocks are indexed by (size, address) so a request
 * takes the smallest block that fits, the lowest such on ties, and is carved from its low end.
 *
 * Because the arena is contiguous, fragmentation shows as its high-water mark: the reserved
 * memory of this policy is the arena's top rounded up to pages.  Pages are mapped as the
 * high-water mark rises (counted as map calls; a real pool would pre-allocate them) and never
 * released, so there are no driver calls once the arena has reached its peak.
 *
 * The block above the high-water mark (the "wilderness") is an ordinary free block that ends at
 * the arena's end.  The arena's address space is twice the device (32 TiB at least), so the
 * wilderness is always the largest free block and is chosen last, which is exactly the best-fit
 * rule, and the pool grows only when no free block fits, as RMM's does.  Its decisions depend on
 * the device's capacity only where the device refuses pages (an OOM), so `needed_bytes` is
 * simply the high-water mark of a run that did not run out.
 *
 * The arena's address space is reserved at creation.  A device too small for it is an error; a
 * reservation refused by an injected fault (device.fail_va_reserve_*) is not: like any failed
 * driver call it costs an allocation an OOM (the first one), and each later allocation tries to
 * reserve again until one succeeds.
 *
 * Knobs:
 *   alignment   block size and address alignment (default 256 bytes, as RMM and BFC)
 */
#include <glib.h>

#include "core/size-set.h"
#include "core/slab.h"
#include "policies.h"

typedef struct Block Block;
struct Block {
    uint64_t offset; /* from the arena base */
    uint64_t size;
    Block *prev; /* address-order neighbours */
    Block *next;
    gboolean free;
};

typedef struct {
    FsimPolicy base;   /* must be first */
    FsimArenaVa arena; /* the arena's address space */
    uint64_t alignment;
    uint64_t mapped_end; /* pages are mapped in [0, mapped_end) */
    uint64_t allocated_bytes;
    Block *first;
    FsimSlab blocks;         /* every Block: a split allocates nothing once warm */
    FsimSizeSet free_blocks; /* Block* by (size, offset) */
    uint64_t num_splits;
    uint64_t num_merges;
} BestFit;

static const FsimKnob best_fit_knobs[] = {
    {"alignment", "256", "block size and address alignment in bytes (a power of two)"},
    {NULL, NULL, NULL},
};

static BestFit *
best_fit_from_policy(FsimPolicy *self)
{
    return (BestFit *)self;
}

static Block *
best_fit_block_new(BestFit *bf)
{
    return fsim_slab_alloc0(&bf->blocks);
}

static void
best_fit_index(BestFit *bf, Block *block)
{
    fsim_size_set_insert(&bf->free_blocks, block->size, block->offset, block);
}

static void
best_fit_unindex(BestFit *bf, Block *block)
{
    fsim_size_set_erase(&bf->free_blocks, block->size, block->offset, block);
}

static FsimPolicy *
best_fit_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    BestFit *bf;
    uint64_t alignment;
    /* Twice the capacity, and at least 32 TiB: the untouched top of the arena is then larger than
     * any free block below it, so best fit takes it only when nothing else fits (as RMM's pool
     * grows only then), and the decisions do not depend on the capacity until the device refuses
     * a page.  needed_bytes (src/analysis/needed.c) relies on that. */
    uint64_t arena_size =
        fsim_device_round(device, MAX((uint64_t)1 << 45, 2 * device->spec.capacity_bytes));

    if (!fsim_knob_get_size(config, "bestfit", "alignment", 256, &alignment, error))
        return NULL;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 2 * FSIM_MiB) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "bestfit.alignment: %" G_GUINT64_FORMAT
                    " is not a power of two of at most 2MiB",
                    alignment);
        return NULL;
    }
    bf = g_new0(BestFit, 1);
    bf->base.ops = &fsim_policy_best_fit;
    bf->base.device = device;
    /* The arena's address space; pages are mapped into it as it fills. */
    bf->arena.size = arena_size;
    if (!fsim_arena_va_reserve(&bf->arena, device, "bestfit", error)) {
        g_free(bf);
        return NULL;
    }
    bf->alignment = alignment;
    fsim_size_set_init(&bf->free_blocks);
    fsim_slab_init(&bf->blocks, sizeof(Block), 1024);
    bf->first = best_fit_block_new(bf);
    bf->first->size = arena_size;
    bf->first->free = TRUE;
    best_fit_index(bf, bf->first);
    return &bf->base;
}

static void
best_fit_destroy(FsimPolicy *self)
{
    BestFit *bf = best_fit_from_policy(self);

    fsim_slab_clear(&bf->blocks);
    fsim_size_set_clear(&bf->free_blocks);
    g_free(bf);
}

static FsimStatus
best_fit_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    BestFit *bf = best_fit_from_policy(self);
    uint64_t size = (req->size + bf->alignment - 1) & ~(bf->alignment - 1);
    FsimSizeCursor cursor;
    Block *block;
    uint64_t end;

    if (size < req->size) /* overflow near 2^64 cannot happen below FSIM_MAX_SIZE, but be sure */
        return FSIM_OOM;
    /* a reservation an injected fault refused: this allocation is its OOM, or it tries again */
    if (fsim_arena_va_ready(&bf->arena, self->device) != FSIM_OK)
        return FSIM_OOM;
    block = fsim_size_set_lower_bound(&bf->free_blocks, size, 0, &cursor);
    if (block == NULL)
        return FSIM_OOM;
    end = block->offset + size;
    if (end > bf->mapped_end) {
        uint64_t granularity = self->device->spec.granularity;
        uint64_t new_end = (end + granularity - 1) / granularity * granularity;

        /* The arena is a multiple of the granularity, so new_end stays inside it. */
        if (fsim_device_map(self->device, bf->arena.base + bf->mapped_end, new_end - bf->mapped_end,
                            granularity) != FSIM_OK)
            return FSIM_OOM;
        bf->mapped_end = new_end;
    }
    fsim_size_set_erase_at(&bf->free_blocks, &cursor);
    if (block->size > size) {
        Block *rest = best_fit_block_new(bf);

        rest->offset = block->offset + size;
        rest->size = block->size - size;
        rest->free = TRUE;
        rest->prev = block;
        rest->next = block->next;
        if (block->next != NULL)
            block->next->prev = rest;
        block->next = rest;
        block->size = size;
        best_fit_index(bf, rest);
        bf->num_splits++;
    }
    block->free = FALSE;
    bf->allocated_bytes += block->size;
    out->addr = bf->arena.base + block->offset;
    out->size = block->size;
    out->cookie = (uint64_t)(uintptr_t)block;
    return FSIM_OK;
}

/* Merge @right into @left; both free, adjacent, and already out of the free index. */
static void
best_fit_merge(BestFit *bf, Block *left, Block *right)
{
    left->size += right->size;
    left->next = right->next;
    if (right->next != NULL)
        right->next->prev = left;
    fsim_slab_free(&bf->blocks, right);
    bf->num_merges++;
}

static void
best_fit_dealloc(FsimPolicy *self, const FsimBlock *fblock, FsimTime now)
{
    BestFit *bf = best_fit_from_policy(self);
    Block *block = (Block *)(uintptr_t)fblock->cookie;

    (void)now;
    g_assert(block != NULL && !block->free && block->size == fblock->size);
    bf->allocated_bytes -= block->size;
    block->free = TRUE;
    if (block->next != NULL && block->next->free) {
        best_fit_unindex(bf, block->next);
        best_fit_merge(bf, block, block->next);
    }
    if (block->prev != NULL && block->prev->free) {
        Block *prev = block->prev;

        best_fit_unindex(bf, prev);
        best_fit_merge(bf, prev, block);
        block = prev;
    }
    best_fit_index(bf, block);
}

static void
best_fit_get_stats(const FsimPolicy *self, FsimPolicyStats *out)
{
    const BestFit *bf = (const BestFit *)self;
    FsimSizeCursor cursor;
    uint64_t largest = 0;

    out->cached_bytes = bf->mapped_end - bf->allocated_bytes;
    /* Only mapped memory counts: the wilderness beyond mapped_end is not held yet. */
    for (const Block *block = fsim_size_set_last(&bf->free_blocks, &cursor); block != NULL;
         block = fsim_size_set_prev(&bf->free_blocks, &cursor)) {
        uint64_t mapped = 0;

        if (block->offset < bf->mapped_end)
            mapped = MIN(block->offset + block->size, bf->mapped_end) - block->offset;
        largest = MAX(largest, mapped);
        if (block->offset + block->size <= bf->mapped_end)
            break; /* entirely mapped, and every later candidate is smaller */
    }
    out->largest_free_block = largest;
    out->num_splits = bf->num_splits;
    out->num_merges = bf->num_merges;
}

static gboolean
best_fit_check(const FsimPolicy *self, GError **error)
{
    const BestFit *bf = (const BestFit *)self;
    uint64_t offset = 0;
    uint64_t allocated = 0;
    guint free_count = 0;

    for (const Block *block = bf->first; block != NULL; block = block->next) {
        if (block->offset != offset || block->size == 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "block at offset %" G_GUINT64_FORMAT " breaks the address chain",
                        block->offset);
            return FALSE;
        }
        if (block->next != NULL && block->next->prev != block) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "broken prev link");
            return FALSE;
        }
        if (block->free) {
            free_count++;
            if (block->next != NULL && block->next->free) {
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                            "adjacent free blocks at %" G_GUINT64_FORMAT " not coalesced",
                            block->offset);
                return FALSE;
            }
            FsimSizeCursor cursor;

            if (!fsim_size_set_find(&bf->free_blocks, block->size, block->offset, block, &cursor)) {
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                            "free block at %" G_GUINT64_FORMAT " missing from the index",
                            block->offset);
                return FALSE;
            }
        } else {
            allocated += block->size;
            if (block->offset + block->size > bf->mapped_end) {
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                            "allocated block at %" G_GUINT64_FORMAT " beyond mapped pages",
                            block->offset);
                return FALSE;
            }
        }
        offset += block->size;
    }
    if (fsim_size_set_check(&bf->free_blocks) != NULL) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "free index: %s",
                    fsim_size_set_check(&bf->free_blocks));
        return FALSE;
    }
    if (offset != bf->arena.size || allocated != bf->allocated_bytes ||
        free_count != bf->free_blocks.count ||
        bf->mapped_end != (uint64_t)self->device->reserved.current) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "accounting mismatch: arena %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
                    ", allocated %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
                    ", free blocks %u/%" G_GSIZE_FORMAT ", mapped %" G_GUINT64_FORMAT
                    "/%" G_GINT64_FORMAT,
                    offset, bf->arena.size, allocated, bf->allocated_bytes, free_count,
                    bf->free_blocks.count, bf->mapped_end, self->device->reserved.current);
        return FALSE;
    }
    return TRUE;
}

/* One segment, the mapped part of the arena; nothing is ever unmapped, so nothing is
 * releasable.  The wilderness is cut at the mapped end. */
static void
best_fit_describe(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data)
{
    const BestFit *bf = (const BestFit *)self;
    FsimSegmentView segment = {.addr = bf->arena.base,
                               .size = bf->mapped_end,
                               .expandable = TRUE,
                               .page_size = self->device->spec.granularity};

    if (bf->mapped_end == 0)
        return;
    visitor->segment(data, &segment);
    for (const Block *b = bf->first; b != NULL && b->offset < bf->mapped_end; b = b->next) {
        FsimBlockView view = {.addr = bf->arena.base + b->offset,
                              .size = MIN(b->size, bf->mapped_end - b->offset),
                              .free = b->free};

        visitor->block(data, &view);
    }
}

const FsimPolicyOps fsim_policy_best_fit = {
    .name = "bestfit",
    .summary = "one arena, best fit by size then address, immediate coalescing (RMM pool, BFC)",
    .knobs = best_fit_knobs,
    .create = best_fit_create,
    .destroy = best_fit_destroy,
    .alloc = best_fit_alloc,
    .dealloc = best_fit_dealloc,
    .get_stats = best_fit_get_stats,
    .check = best_fit_check,
    .describe = best_fit_describe,
};
