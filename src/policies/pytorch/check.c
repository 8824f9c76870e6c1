/* SPDX-License-Identifier: MIT */
/*
 * The invariants of PyTorch's caching allocator model, walked after every operation by the
 * conformance tests and under --paranoid: every segment's chain of blocks covers it exactly,
 * free neighbours have merged, every free block is cached in its stream's set and every unmapped
 * one in its tree, both structures are well formed, and the memory_stats() counters and the
 * device's reserved bytes agree with a recount.
 */
#include <glib.h>

#include <stdarg.h>
#include <string.h>

#include "fragsim/device.h"

#include "model.h"

gboolean
fsim_pytorch_fail(GError **error, gint code, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error_literal(error, FSIM_ERROR, code, message);
    return FALSE;
}

/* A broken invariant. */
#define check_fail(error, ...) fsim_pytorch_fail(error, FSIM_ERROR_FAILED, __VA_ARGS__)

static gboolean
check_tree(const Tree *tree, uint64_t stream, GError **error)
{
    if (!fsim_pytorch_tree_valid(tree))
        return check_fail(error, "the unmapped tree of stream %" G_GUINT64_FORMAT " is broken",
                          stream);
    return TRUE;
}

/* The set's own invariants, then each entry's key equal to its block's and the block marked as
 * cached. */
static gboolean
check_freeset(const FreeSet *set, uint64_t stream, GError **error)
{
    const char *broken = fsim_pytorch_freeset_check(set);
    FreeCursor cursor;

    if (broken != NULL)
        return check_fail(error, "stream %" G_GUINT64_FORMAT ": free set: %s", stream, broken);
    for (Block *b = freeset_first(set, &cursor); b != NULL; b = freeset_next(set, &cursor)) {
        uint64_t size;
        uint64_t key;

        freeset_key(set, &cursor, &size, &key);
        if (b->size != size || b->addr != key || (b->flags & BLOCK_IN_TREE) == 0)
            return check_fail(error,
                              "stream %" G_GUINT64_FORMAT ": free block 0x%" G_GINT64_MODIFIER
                              "x is out of place",
                              stream, key);
    }
    return TRUE;
}

static gboolean
pool_holds(const Pool *pool, const StreamSet *set)
{
    for (guint s = 0; s < pool->n_streams; s++) {
        if (pool->streams[s] == set)
            return TRUE;
    }
    return FALSE;
}

static gboolean
check_pool(const Pool *pool, gsize *free_blocks, gsize *unmapped_blocks, GError **error)
{
    for (guint s = 0; s < pool->n_streams; s++) {
        const StreamSet *set = pool->streams[s];

        if (s > 0 && pool->streams[s - 1]->stream >= set->stream)
            return check_fail(error, "streams out of order");
        if (!check_freeset(&set->free, set->stream, error) ||
            !check_tree(&set->unmapped, set->stream, error))
            return FALSE;
        *free_blocks += freeset_count(&set->free);
        *unmapped_blocks += set->unmapped.count;
    }
    return TRUE;
}

static gboolean
check_segment(const Segment *segment, Stats *sum, gsize *free_blocks, gsize *unmapped_blocks,
              GError **error)
{
    uint64_t at = segment->addr;
    uint64_t mapped = 0;

    if (segment->head == NULL || segment->head->prev != NULL)
        return check_fail(error, "segment 0x%" G_GINT64_MODIFIER "x has no head", segment->addr);
    for (const Block *b = segment->head; b != NULL; b = b->next) {
        gboolean in_free = (b->flags & BLOCK_IN_TREE) != 0 && !block_unmapped(b);

        if (b->segment != segment || b->set != segment->set || b->addr != at || b->size == 0 ||
            block_expandable(b) != segment->expandable)
            return check_fail(error,
                              "segment 0x%" G_GINT64_MODIFIER "x: block 0x%" G_GINT64_MODIFIER
                              "x breaks the address chain",
                              segment->addr, b->addr);
        if (b->next != NULL && b->next->prev != b)
            return check_fail(error, "block 0x%" G_GINT64_MODIFIER "x: broken links", b->addr);
        if (block_unmapped(b)) {
            if (!segment->expandable || block_allocated(b) ||
                (b->addr - segment->addr) % segment->page != 0 || b->size % segment->page != 0)
                return check_fail(error, "unmapped block 0x%" G_GINT64_MODIFIER "x is misplaced",
                                  b->addr);
            if (!fsim_pytorch_tree_contains(&segment->set->unmapped, b))
                return check_fail(
                    error, "unmapped block 0x%" G_GINT64_MODIFIER "x is not in its set", b->addr);
            (*unmapped_blocks)++;
        } else {
            mapped += b->size;
        }
        if (!block_allocated(b) && !block_unmapped(b)) {
            FreeCursor cursor;

            if (!in_free || !freeset_find(&segment->set->free, b, &cursor))
                return check_fail(error, "free block 0x%" G_GINT64_MODIFIER "x is not cached",
                                  b->addr);
            (*free_blocks)++;
            if (!segment->expandable && block_is_split(b)) {
                sum->inactive_split.current++;
                sum->inactive_split_bytes.current += (int64_t)b->size;
            }
        }
        if (block_allocated(b)) {
            if ((b->flags & BLOCK_IN_TREE) != 0)
                return check_fail(error, "allocated block 0x%" G_GINT64_MODIFIER "x is cached",
                                  b->addr);
            if ((b->flags & BLOCK_PENDING) == 0) {
                sum->allocated_bytes.current += (int64_t)b->size;
                sum->allocation.current++;
            }
            sum->active_bytes.current += (int64_t)b->size;
            sum->requested_bytes.current += (int64_t)b->requested;
        }
        if (b->next != NULL && !block_allocated(b) && !block_allocated(b->next) &&
            block_unmapped(b) == block_unmapped(b->next))
            return check_fail(error,
                              "blocks 0x%" G_GINT64_MODIFIER "x and 0x%" G_GINT64_MODIFIER
                              "x should have merged",
                              b->addr, b->next->addr);
        at += b->size;
    }
    if (at != segment->addr + segment->size)
        return check_fail(error,
                          "segment 0x%" G_GINT64_MODIFIER "x: blocks cover %" G_GUINT64_FORMAT
                          " of %" G_GUINT64_FORMAT " bytes",
                          segment->addr, at - segment->addr, segment->size);
    if (segment->expandable && mapped != segment->mapped)
        return check_fail(error,
                          "expandable segment 0x%" G_GINT64_MODIFIER "x: %" G_GUINT64_FORMAT
                          " bytes mapped, %" G_GUINT64_FORMAT " counted",
                          segment->addr, mapped, segment->mapped);
    if (!pool_holds(segment->pool, segment->set))
        return check_fail(error, "segment 0x%" G_GINT64_MODIFIER "x: lost stream", segment->addr);
    sum->reserved_bytes.current += (int64_t)(segment->expandable ? mapped : segment->size);
    if (!segment->expandable)
        sum->segment.current++;
    return TRUE;
}

/* Each private pool: its trees, its segment count, its reserved bytes; all pools' reserved bytes
 * add up to PyTorch's count. */
static gboolean
check_private_pools(const Pytorch *pt, gsize *tree_free, gsize *tree_unmapped, GError **error)
{
    int64_t reserved = pt->default_reserved_bytes.current;

    for (guint i = 0; i < pt->private_pools->len; i++) {
        const PrivatePool *pp = g_ptr_array_index(pt->private_pools, i);
        guint segments = 0;
        int64_t bytes = 0;

        if (i > 0 &&
            ((const PrivatePool *)g_ptr_array_index(pt->private_pools, i - 1))->id >= pp->id)
            return check_fail(error, "private pools out of order at %" G_GUINT64_FORMAT, pp->id);
        if (pp->small.owner != pp || pp->large.owner != pp || !pp->small.small || pp->large.small)
            return check_fail(error, "private pool %" G_GUINT64_FORMAT " miswired", pp->id);
        if (!check_pool(&pp->small, tree_free, tree_unmapped, error) ||
            !check_pool(&pp->large, tree_free, tree_unmapped, error))
            return FALSE;
        for (const Segment *s = pt->segments; s != NULL; s = s->next_segment) {
            if (s->pool->owner == pp) {
                segments++;
                bytes += (int64_t)(s->expandable ? s->mapped : s->size);
            }
        }
        if (segments != pp->n_segments || bytes != pp->reserved_bytes.current)
            return check_fail(error,
                              "private pool %" G_GUINT64_FORMAT
                              ": %u segments of %u counted, %" G_GINT64_FORMAT
                              " bytes of %" G_GINT64_FORMAT " counted",
                              pp->id, segments, pp->n_segments, bytes, pp->reserved_bytes.current);
        reserved += pp->reserved_bytes.current;
    }
    if (reserved != pt->stats.reserved_bytes.current)
        return check_fail(
            error, "reserved bytes by pool add up to %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT,
            reserved, pt->stats.reserved_bytes.current);
    return TRUE;
}

gboolean
fsim_pytorch_check(const FsimPolicy *self, GError **error)
{
    const Pytorch *pt = pytorch_from_const_policy(self);
    const Stats *s = &pt->stats;
    Stats sum;
    gsize tree_free = 0;
    gsize tree_unmapped = 0;
    gsize chain_free = 0;
    gsize chain_unmapped = 0;
    guint n_segments = 0;
    uint64_t device_bytes = 0;

    memset(&sum, 0, sizeof(sum));
    if (!check_pool(&pt->small, &tree_free, &tree_unmapped, error) ||
        !check_pool(&pt->large, &tree_free, &tree_unmapped, error))
        return FALSE;
    if (!check_private_pools(pt, &tree_free, &tree_unmapped, error))
        return FALSE;
    for (const Segment *segment = pt->segments; segment != NULL; segment = segment->next_segment) {
        if (!check_segment(segment, &sum, &chain_free, &chain_unmapped, error))
            return FALSE;
        device_bytes +=
            segment->expandable ? segment->mapped : fsim_device_round(self->device, segment->size);
        n_segments++;
    }
    if (n_segments != pt->n_segments || tree_free != chain_free || tree_unmapped != chain_unmapped)
        return check_fail(
            error,
            "%u segments listed of %u; %" G_GSIZE_FORMAT " free blocks cached of %" G_GSIZE_FORMAT
            "; %" G_GSIZE_FORMAT " unmapped of %" G_GSIZE_FORMAT,
            n_segments, pt->n_segments, tree_free, chain_free, tree_unmapped, chain_unmapped);
    if (device_bytes != (uint64_t)self->device->reserved.current ||
        (uint64_t)sum.reserved_bytes.current != pt->total_allocated_memory)
        return check_fail(error,
                          "reserved: device %" G_GINT64_FORMAT ", segments %" G_GUINT64_FORMAT
                          ", PyTorch's count %" G_GUINT64_FORMAT,
                          self->device->reserved.current, device_bytes, pt->total_allocated_memory);
    if (sum.reserved_bytes.current != s->reserved_bytes.current ||
        sum.segment.current != s->segment.current ||
        sum.allocated_bytes.current != s->allocated_bytes.current ||
        sum.allocation.current != s->allocation.current ||
        sum.active_bytes.current != s->active_bytes.current ||
        sum.requested_bytes.current != s->requested_bytes.current ||
        sum.inactive_split.current != s->inactive_split.current ||
        sum.inactive_split_bytes.current != s->inactive_split_bytes.current)
        return check_fail(
            error,
            "statistics drifted: reserved %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT
            ", allocated %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT ", active %" G_GINT64_FORMAT
            "/%" G_GINT64_FORMAT ", inactive split %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT,
            sum.reserved_bytes.current, s->reserved_bytes.current, sum.allocated_bytes.current,
            s->allocated_bytes.current, sum.active_bytes.current, s->active_bytes.current,
            sum.inactive_split_bytes.current, s->inactive_split_bytes.current);
    return TRUE;
}
