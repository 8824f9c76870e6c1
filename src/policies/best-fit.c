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

#include "core/chunk-list.h"
#include "policies.h"

typedef struct {
    FsimPolicy base;   /* must be first */
    FsimArenaVa arena; /* the arena's address space */
    uint64_t alignment;
    uint64_t mapped_end; /* pages are mapped in [0, mapped_end) */
    uint64_t allocated_bytes;
    FsimChunkList blocks; /* by offset from the arena base: one run, the arena */
    FsimChunk *first;
} BestFit;

static const FsimKnob best_fit_knobs[] = {
    {"alignment", "256", "block size and address alignment in bytes (a power of two)"},
    {NULL, NULL, NULL},
};

FSIM_POLICY_DEFINE_TYPE(BestFit, best_fit)

static FsimPolicy *
best_fit_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    g_autofree BestFit *bf = best_fit_new(device);
    uint64_t alignment;
    uint64_t arena_size =
        fsim_chunk_arena_bytes(device->spec.capacity_bytes, device->spec.granularity);

    if (!fsim_knob_get_size(bf->base.ops, config, "alignment", &alignment, error))
        return NULL;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 2 * FSIM_MiB) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "bestfit.alignment: %" G_GUINT64_FORMAT
                    " is not a power of two of at most 2MiB",
                    alignment);
        return NULL;
    }
    /* The arena's address space; pages are mapped into it as it fills. */
    bf->arena.size = arena_size;
    if (!fsim_arena_va_reserve(&bf->arena, device, "bestfit", error))
        return NULL;
    bf->alignment = alignment;
    fsim_chunk_list_init(&bf->blocks, sizeof(FsimChunk));
    bf->first = fsim_chunk_list_add_run(&bf->blocks, 0, arena_size);
    return &g_steal_pointer(&bf)->base;
}

static void
best_fit_destroy(FsimPolicy *self)
{
    BestFit *bf = best_fit_from_policy(self);

    fsim_chunk_list_clear(&bf->blocks);
    g_free(bf);
}

static FsimStatus
best_fit_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    BestFit *bf = best_fit_from_policy(self);
    uint64_t size = (req->size + bf->alignment - 1) & ~(bf->alignment - 1);
    FsimSizeCursor cursor;
    FsimChunk *block;

    if (size < req->size) /* overflow near 2^64 cannot happen below FSIM_MAX_SIZE, but be sure */
        return FSIM_OOM;
    /* a reservation an injected fault refused: this allocation is its OOM, or it tries again */
    if (fsim_arena_va_ready(&bf->arena, self->device) != FSIM_OK)
        return FSIM_OOM;
    block = fsim_chunk_list_best_fit(&bf->blocks, size, &cursor);
    if (block == NULL || !fsim_chunk_arena_map_to(self->device, bf->arena.base, &bf->mapped_end,
                                                  block->start + size))
        return FSIM_OOM;
    fsim_chunk_list_take(&bf->blocks, block, &cursor, size);
    bf->allocated_bytes += block->size;
    fsim_chunk_hand_out(block, bf->arena.base, out);
    return FSIM_OK;
}

static void
best_fit_dealloc(FsimPolicy *self, const FsimBlock *fblock, FsimTime now)
{
    BestFit *bf = best_fit_from_policy(self);
    FsimChunk *block = fsim_chunk_handed_back(fblock);

    (void)now;
    bf->allocated_bytes -= block->size;
    fsim_chunk_list_release(&bf->blocks, block);
}

static void
best_fit_get_stats(const FsimPolicy *self, FsimPolicyStats *out)
{
    const BestFit *bf = (const BestFit *)self;

    fsim_chunk_list_arena_stats(&bf->blocks, bf->mapped_end, bf->allocated_bytes, out);
}

static gboolean
best_fit_check(const FsimPolicy *self, GError **error)
{
    const BestFit *bf = (const BestFit *)self;
    uint64_t allocated = 0;
    gsize n_free = 0;

    if (!fsim_chunk_list_check_run(&bf->blocks, bf->first, 0, bf->arena.size, &allocated, &n_free,
                                   error) ||
        !fsim_chunk_list_check_index(&bf->blocks, n_free, error))
        return FALSE;
    for (const FsimChunk *block = bf->first; block != NULL; block = block->next) {
        if (!block->free && block->start + block->size > bf->mapped_end) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "allocated block at offset %" G_GUINT64_FORMAT " beyond mapped pages",
                        block->start);
            return FALSE;
        }
    }
    FsimTally tally = {"allocated", allocated, bf->allocated_bytes};

    return fsim_policy_check_accounts(self, bf->mapped_end, &tally, 1, error);
}

/* One segment, the mapped part of the arena; nothing is ever unmapped, so nothing is
 * releasable.  The wilderness is cut at the mapped end. */
static void
best_fit_describe(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data)
{
    const BestFit *bf = (const BestFit *)self;

    fsim_chunk_list_describe_arena(bf->first, bf->arena.base, bf->mapped_end,
                                   self->device->spec.granularity, visitor, data);
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
