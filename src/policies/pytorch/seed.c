/* SPDX-License-Identifier: MIT */
/*
 * Seeding PyTorch's caching allocator model with the state at trace start (a snapshot that
 * begins mid-run): every segment recorded, at its recorded address when the device can put it
 * there, cut into the recorded blocks with free gaps between them, and the memory_stats()
 * counters brought to what PyTorch would have counted.  cudaMalloc'd segments one by one;
 * expandable ranges grouped per (pool, stream) into one reservation each.
 */
#include <glib.h>

#include "fragsim/device.h"

#include "model.h"

/* A state the model cannot take. */
#define seed_fail(error, ...) fsim_pytorch_fail(error, FSIM_ERROR_UNSUPPORTED, __VA_ARGS__)

static gboolean
seed_is_small(const FsimSeedSegment *segment)
{
    if (segment->pool != FSIM_POOL_UNKNOWN)
        return segment->pool == FSIM_POOL_SMALL;
    /* Small-pool segments are kSmallBuffer; large-pool ones are larger (20 MiB, or >= 10 MiB). */
    return segment->size <= FSIM_PYTORCH_SMALL_BUFFER;
}

/* The pool a seeded segment belongs to: its private pool's (which exists with the one reference
 * the engine also counts: the graph or MemPool that owned it when recording ended), or a default
 * one. */
static Pool *
seed_pool(Pytorch *pt, const FsimSeedSegment *segment)
{
    gboolean small = seed_is_small(segment);
    PrivatePool *pp;

    if (segment->pool_id == 0)
        return small ? &pt->small : &pt->large;
    pp = fsim_pytorch_private_pool_get(pt, segment->pool_id);
    pp->use_count = 1;
    return small ? &pp->small : &pp->large;
}

/* Append a block [addr, addr+size) to the chain ending at *tail. */
static Block *
seed_block(Pytorch *pt, Segment *segment, Block **tail, uint64_t addr, uint64_t size,
           uint32_t flags)
{
    Block *block = block_new(pt, segment);

    block->addr = addr;
    block->size = size;
    block->flags |= flags;
    if (*tail == NULL)
        segment->head = block;
    else
        block_link_after(block, *tail);
    *tail = block;
    return block;
}

/* Fill [start, end) of @segment with the state's blocks from *next on, free gaps between them;
 * recorded addresses + @shift (unsigned wrap-around) are where the device put the segment. */
static void
seed_range(Pytorch *pt, Segment *segment, Block **tail, uint64_t start, uint64_t end,
           uint64_t shift, const FsimInitialState *state, gsize *next, FsimBlock *out)
{
    uint64_t at = start;

    while (*next < state->n_blocks && state->blocks[*next].addr < end) {
        const FsimSeedBlock *seed = &state->blocks[*next];
        Block *block;

        if (seed->addr > at)
            seed_block(pt, segment, tail, at + shift, seed->addr - at, 0);
        block = seed_block(pt, segment, tail, seed->addr + shift, seed->size,
                           BLOCK_ALLOCATED | (seed->pending_free ? BLOCK_PENDING : 0));
        block->requested = seed->requested;
        out[*next].addr = block->addr;
        out[*next].size = block->size;
        out[*next].cookie = (uint64_t)(uintptr_t)block;
        at = seed->addr + seed->size;
        (*next)++;
    }
    if (at < end)
        seed_block(pt, segment, tail, at + shift, end - at, 0);
}

/* Account the blocks of a seeded segment as alloc_found_block and free_block would have. */
static void
seed_account(Pytorch *pt, Segment *segment)
{
    Stats *stats = &pt->stats;

    for (Block *b = segment->head; b != NULL; b = b->next) {
        if (block_unmapped(b)) {
            fsim_pytorch_tree_insert(&segment->set->unmapped, b);
        } else if (!block_allocated(b)) {
            pool_insert_free(b);
            if (!segment->expandable && block_is_split(b)) {
                fsim_counter_add(&stats->inactive_split, 1);
                fsim_counter_add(&stats->inactive_split_bytes, (int64_t)b->size);
            }
        } else {
            if ((b->flags & BLOCK_PENDING) == 0) {
                fsim_counter_add(&stats->allocation, 1);
                fsim_counter_add(&stats->allocated_bytes, (int64_t)b->size);
                if (b->size >= pt->conf.max_split_size)
                    fsim_counter_add(&stats->oversize_allocations, 1);
            }
            fsim_counter_add(&stats->active, 1);
            fsim_counter_add(&stats->active_bytes, (int64_t)b->size);
            fsim_counter_add(&stats->requested_bytes, (int64_t)b->requested);
        }
    }
}

static gboolean
seed_check_blocks(const FsimInitialState *state, gsize first, gsize next, uint64_t start,
                  uint64_t end, GError **error)
{
    for (gsize i = first; i < next; i++) {
        const FsimSeedBlock *seed = &state->blocks[i];

        if (seed->addr < start || seed->addr + seed->size > end || seed->size == 0)
            return seed_fail(error,
                             "block 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT
                             " bytes) is not inside a segment",
                             seed->addr, seed->size);
    }
    return TRUE;
}

/* Fill [start, end) with the state's blocks there, free gaps between them; returns how many
 * blocks it placed. */
static gsize
seed_fill(Pytorch *pt, Segment *segment, Block **tail, uint64_t start, uint64_t end, uint64_t shift,
          const FsimInitialState *state, FsimBlock *out, GError **error)
{
    gsize first = FSIM_LOWER_BOUND(state->blocks, state->n_blocks, FsimSeedBlock, addr, start);
    gsize next = first;

    seed_range(pt, segment, tail, start, end, shift, state, &next, out);
    if (!seed_check_blocks(state, first, next, start, end, error))
        return G_MAXSIZE;
    return next - first;
}

/* A cudaMalloc'd segment of the initial state, at its recorded address when the device can put
 * it there (always, with a device that has nothing else), elsewhere with its blocks moved along
 * otherwise: PyTorch's decisions depend on addresses only within a segment. */
static gboolean
seed_malloc_segment(Pytorch *pt, const FsimSeedSegment *seed, const FsimInitialState *state,
                    gsize *placed, FsimBlock *out, GError **error)
{
    FsimDevice *device = pt->base.device;
    Pool *pool = seed_pool(pt, seed);
    Segment *segment;
    Block *tail = NULL;
    FsimAddr addr = 0;
    gsize n;

    fsim_device_set_next_address(device, seed->addr);
    if (fsim_device_mem_alloc(device, seed->size, &addr) != FSIM_OK) {
        fsim_device_clear_next_address(device);
        return seed_fail(error,
                         "the device cannot hold the segment at 0x%" G_GINT64_MODIFIER
                         "x (%" G_GUINT64_FORMAT " bytes)",
                         seed->addr, seed->size);
    }
    segment = fsim_pytorch_segment_new(pt, pool, seed->stream, addr, seed->size, 0);
    pt->total_allocated_memory += seed->size;
    fsim_counter_add(&pt->stats.segment, 1);
    pool_reserved_add(pt, segment->pool, (int64_t)seed->size);
    if (seed->size >= pt->conf.max_split_size)
        fsim_counter_add(&pt->stats.oversize_segments, 1);
    if (addr != seed->addr)
        g_debug("seed: segment 0x%" G_GINT64_MODIFIER "x placed at 0x%" G_GINT64_MODIFIER "x",
                seed->addr, addr);
    n = seed_fill(pt, segment, &tail, seed->addr, seed->addr + seed->size, addr - seed->addr, state,
                  out, error);
    seed_account(pt, segment);
    if (n == G_MAXSIZE)
        return FALSE;
    *placed += n;
    return TRUE;
}

/* The mapped ranges of one (pool, stream) of expandable segments, in address order: one
 * reservation starting at the lowest range (the part of the real reservation below it is unknown;
 * PyTorch maps from the start, so it is usually empty), each range mapped, unmapped gaps between
 * them and after the last.  Moved along with the reservation when the device puts it elsewhere.
 *
 * Longer than ~80 lines: the ranges of one reservation placed, mapped and filled in address
 * order; most of its length is the error messages of the checks. */
static gboolean
seed_expandable_group(Pytorch *pt, const FsimInitialState *state, const guint *ranges,
                      guint n_ranges, gsize *placed, FsimBlock *out, GError **error)
{
    FsimDevice *device = pt->base.device;
    const FsimSeedSegment *first = &state->segments[ranges[0]];
    gboolean small = seed_is_small(first);
    Pool *pool = seed_pool(pt, first);
    uint64_t page = expandable_page(pt, small);
    uint64_t reservation = expandable_reservation(pt, page);
    Segment *segment;
    Block *tail = NULL;
    uint64_t at;
    uint64_t shift;
    FsimAddr addr = 0;
    gboolean ok = TRUE;

    fsim_device_set_next_address(device, first->addr);
    if (fsim_device_va_reserve(device, reservation, device->spec.granularity, &addr) != FSIM_OK) {
        fsim_device_clear_next_address(device);
        return seed_fail(error, "the device cannot reserve an expandable segment");
    }
    segment = fsim_pytorch_segment_new(pt, pool, first->stream, addr, reservation, page);
    shift = addr - first->addr;
    at = addr;
    if (addr != first->addr)
        g_debug("seed: expandable segment 0x%" G_GINT64_MODIFIER "x placed at 0x%" G_GINT64_MODIFIER
                "x",
                first->addr, addr);
    for (guint r = 0; ok && r < n_ranges; r++) {
        const FsimSeedSegment *seed = &state->segments[ranges[r]];
        uint64_t start = seed->addr + shift;
        gsize n;

        if ((start - addr) % page != 0 || seed->size % page != 0 || start < at ||
            start + seed->size > addr + reservation) {
            ok = seed_fail(error,
                           "the expandable range 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT
                           " bytes) is not made of %" G_GUINT64_FORMAT
                           "-byte pages of one reservation",
                           seed->addr, seed->size, page);
            break;
        }
        if (fsim_device_map(device, start, seed->size, page) != FSIM_OK) {
            ok = seed_fail(error,
                           "the device cannot map the expandable range 0x%" G_GINT64_MODIFIER "x",
                           seed->addr);
            break;
        }
        if (start > at)
            seed_block(pt, segment, &tail, at, start - at, BLOCK_UNMAPPED);
        pt->total_allocated_memory += seed->size;
        segment->mapped += seed->size;
        pool_reserved_add(pt, segment->pool, (int64_t)seed->size);
        n = seed_fill(pt, segment, &tail, seed->addr, seed->addr + seed->size, shift, state, out,
                      error);
        at = start + seed->size;
        if (n == G_MAXSIZE) {
            ok = FALSE;
            break;
        }
        *placed += n;
    }
    if (at < addr + reservation)
        seed_block(pt, segment, &tail, at, addr + reservation - at, BLOCK_UNMAPPED);
    /* Free blocks of adjacent ranges are one block in PyTorch. */
    for (Block *b = segment->head; b != NULL && b->next != NULL;) {
        if (!block_allocated(b) && !block_allocated(b->next) &&
            block_unmapped(b) == block_unmapped(b->next)) {
            Block *gone = b->next;

            b->size += gone->size;
            b->next = gone->next;
            if (b->next != NULL)
                b->next->prev = b;
            block_free(pt, gone);
        } else {
            b = b->next;
        }
    }
    seed_account(pt, segment);
    return ok;
}

gboolean
fsim_pytorch_seed(FsimPolicy *self, const FsimInitialState *state, FsimBlock *blocks,
                  GError **error)
{
    Pytorch *pt = pytorch_from_policy(self);
    g_autofree guint *expandable = g_new(guint, MAX(state->n_segments, 1));
    g_autofree guint *group = g_new(guint, MAX(state->n_segments, 1));
    g_autofree gboolean *done = g_new0(gboolean, MAX(state->n_segments, 1));
    guint n_expandable = 0;
    gsize placed = 0;

    if (pt->n_segments != 0)
        return seed_fail(error, "the policy already holds memory");
    /* cudaMalloc'd segments, in address order, each with the blocks inside it; expandable
     * ranges are seeded per (pool, stream) afterwards. */
    for (gsize i = 0; i < state->n_segments; i++) {
        if (state->segments[i].expandable)
            expandable[n_expandable++] = (guint)i;
        else if (!seed_malloc_segment(pt, &state->segments[i], state, &placed, blocks, error))
            return FALSE;
    }
    for (guint i = 0; i < n_expandable; i++) {
        const FsimSeedSegment *lead = &state->segments[expandable[i]];
        guint n = 0;

        if (done[i])
            continue;
        for (guint j = i; j < n_expandable; j++) {
            const FsimSeedSegment *other = &state->segments[expandable[j]];

            if (!done[j] && other->stream == lead->stream && other->pool_id == lead->pool_id &&
                seed_is_small(other) == seed_is_small(lead)) {
                group[n++] = expandable[j];
                done[j] = TRUE;
            }
        }
        if (!seed_expandable_group(pt, state, group, n, &placed, blocks, error))
            return FALSE;
    }
    if (placed != state->n_blocks)
        return seed_fail(error,
                         "%" G_GSIZE_FORMAT " of the %" G_GSIZE_FORMAT
                         " blocks alive at trace start lie outside every segment",
                         state->n_blocks - placed, state->n_blocks);
    return TRUE;
}
