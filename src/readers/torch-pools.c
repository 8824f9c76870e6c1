/* SPDX-License-Identifier: MIT */
/*
 * Which private pool each recorded allocation of a PyTorch snapshot went to.
 *
 * PyTorch main writes `pool_id` on every trace entry; released versions (up to ~2.11) write it
 * only on the final segments (`segment_pool_id`).  The rules, in this order:
 *
 * 1. An entry's own `pool_id` wins.
 * 2. A cudaMalloc segment is one *incarnation* from its segment_alloc (or from trace start) to its
 *    segment_free (or the end).  An incarnation alive at the end has the final segment's
 *    `segment_pool_id`; one alive at trace start has the seeded segment's (itself the final one,
 *    or that of the segment_free that ended it); one freed during the trace has the pool its
 *    segment_free names (rule 1), else the default pool.  This last case is the ambiguous one: a
 *    live private pool never frees, so a freed incarnation belonged to the default pools or to a
 *    pool already released, and without `pool_id` nothing recorded tells which; the default pool
 *    is chosen because it is by far the more common, and because a released pool takes no new
 *    allocations unless a new capture begins it again.
 * 3. An allocation belongs to the incarnation holding its address when it happened (not to the
 *    final segment at that address, as the browser viewer labels them: addresses are reused).
 * 4. Expandable segments are one virtual reservation per (pool, stream), far apart, and never
 *    change pool: an allocation, map or unmap takes the pool of the mapped range of the final
 *    (or seeded) state that contains its address, else of the nearest one on the same stream,
 *    else the default pool.
 * 5. An OOM entry without `pool_id` is taken as a default-pool request (which capture was active
 *    is never recorded).
 */
#include "torch-pools.h"

#include <string.h>

#define TORCH_POOL_HALF ((uint64_t)1 << 32)

gboolean
fsim_torch_pool_id(uint64_t first, uint64_t second, uint64_t *out)
{
    if (first >= TORCH_POOL_HALF || second >= TORCH_POOL_HALF)
        return FALSE;
    *out = first * TORCH_POOL_HALF + second;
    return TRUE;
}

/* A cudaMalloc segment incarnation or a mapped expandable range. */
typedef struct {
    FsimAddr addr; /* first: fsim_addr_compare() orders them */
    uint64_t size;
    uint64_t stream;
    uint64_t pool;
} Incarnation;

static void
live_insert(GTree *live, FsimAddr addr, uint64_t size, uint64_t stream, uint64_t pool)
{
    Incarnation key = {.addr = addr};
    Incarnation *inc = g_tree_lookup(live, &key);

    if (inc == NULL) {
        inc = g_new0(Incarnation, 1);
        inc->addr = addr;
        g_tree_insert(live, inc, inc);
    }
    inc->size = size;
    inc->stream = stream;
    inc->pool = pool;
}

/* The incarnation holding @addr, or NULL. */
static const Incarnation *
live_find(GTree *live, FsimAddr addr)
{
    Incarnation key = {.addr = addr};
    GTreeNode *node = g_tree_upper_bound(live, &key); /* first start > addr */
    const Incarnation *inc;

    node = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(live);
    if (node == NULL)
        return NULL;
    inc = g_tree_node_key(node);
    return addr - inc->addr < inc->size ? inc : NULL;
}

/* Rule 4: the pool of an expandable range holding @addr, else the nearest on @stream. */
static uint64_t
ranges_pool(const GArray *ranges, FsimAddr addr, uint64_t stream)
{
    uint64_t best_pool = 0;
    uint64_t best_distance = G_MAXUINT64;

    for (guint i = 0; i < ranges->len; i++) {
        const Incarnation *r = &g_array_index(ranges, Incarnation, i);
        uint64_t distance;

        if (addr - r->addr < r->size)
            return r->pool;
        if (r->stream != stream)
            continue;
        distance = addr < r->addr ? r->addr - addr : addr - (r->addr + r->size) + 1;
        if (distance < best_distance) {
            best_distance = distance;
            best_pool = r->pool;
        }
    }
    return best_pool;
}

static gboolean
any_private_pool(gboolean entries_name_pools, const FsimInitialState *state,
                 const GArray *final_segments)
{
    if (entries_name_pools)
        return TRUE;
    for (guint i = 0; i < final_segments->len; i++) {
        if (g_array_index(final_segments, FsimSeedSegment, i).pool_id != 0)
            return TRUE;
    }
    for (gsize i = 0; state != NULL && i < state->n_segments; i++) {
        if (state->segments[i].pool_id != 0)
            return TRUE;
    }
    return FALSE;
}

/* Rule 2, backwards: the pool of the incarnation each SEGMENT_ALLOC starts. */
static void
assign_segment_allocs(const GArray *entries, const GArray *final_segments, uint64_t *pools)
{
    g_autoptr(GHashTable) current =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free); /* addr -> pool */

    for (guint i = 0; i < final_segments->len; i++) {
        const FsimSeedSegment *seg = &g_array_index(final_segments, FsimSeedSegment, i);

        if (!seg->expandable)
            g_hash_table_insert(current, g_memdup2(&seg->addr, sizeof(seg->addr)),
                                g_memdup2(&seg->pool_id, sizeof(seg->pool_id)));
    }
    for (guint i = entries->len; i-- > 0;) {
        const TorchEntry *e = &g_array_index(entries, TorchEntry, i);
        const uint64_t *pool;

        if (e->action == TORCH_SEGMENT_FREE) {
            uint64_t freed = (e->flags & ENTRY_HAS_POOL) != 0 ? e->pool : 0;

            g_hash_table_insert(current, g_memdup2(&e->addr, sizeof(e->addr)),
                                g_memdup2(&freed, sizeof(freed)));
        } else if (e->action == TORCH_SEGMENT_ALLOC) {
            pool = g_hash_table_lookup(current, &e->addr);
            pools[i] = (e->flags & ENTRY_HAS_POOL) != 0 ? e->pool : pool != NULL ? *pool : 0;
            g_hash_table_remove(current, &e->addr);
        }
    }
}

static GArray *
expandable_ranges(const FsimInitialState *state, const GArray *final_segments)
{
    GArray *ranges = g_array_new(FALSE, FALSE, sizeof(Incarnation));

    for (guint i = 0; i < final_segments->len; i++) {
        const FsimSeedSegment *seg = &g_array_index(final_segments, FsimSeedSegment, i);
        Incarnation r = {seg->addr, seg->size, seg->stream, seg->pool_id};

        if (seg->expandable)
            g_array_append_val(ranges, r);
    }
    for (gsize i = 0; state != NULL && i < state->n_segments; i++) {
        const FsimSeedSegment *seg = &state->segments[i];
        Incarnation r = {seg->addr, seg->size, seg->stream, seg->pool_id};

        if (seg->expandable)
            g_array_append_val(ranges, r);
    }
    g_array_sort_with_data(ranges, fsim_addr_compare, NULL);
    return ranges;
}

uint64_t *
fsim_torch_pools_assign(const GArray *entries, const FsimInitialState *state,
                        const GArray *final_segments, gboolean entries_name_pools)
{
    g_autoptr(GTree) live = NULL;
    g_autoptr(GArray) ranges = NULL;
    uint64_t *pools;

    if (!any_private_pool(entries_name_pools, state, final_segments))
        return NULL;
    pools = g_new0(uint64_t, MAX(entries->len, 1));
    assign_segment_allocs(entries, final_segments, pools);
    live = g_tree_new_full(fsim_addr_compare, NULL, g_free, NULL);
    ranges = expandable_ranges(state, final_segments);
    for (gsize i = 0; state != NULL && i < state->n_segments; i++) {
        const FsimSeedSegment *seg = &state->segments[i];

        if (!seg->expandable)
            live_insert(live, seg->addr, seg->size, seg->stream, seg->pool_id);
    }
    for (guint i = 0; i < entries->len; i++) {
        const TorchEntry *e = &g_array_index(entries, TorchEntry, i);
        const Incarnation *inc;

        switch ((TorchAction)e->action) {
        case TORCH_SEGMENT_ALLOC:
            live_insert(live, e->addr, e->size, e->stream, pools[i]);
            break;
        case TORCH_SEGMENT_FREE:
            inc = live_find(live, e->addr);
            pools[i] = (e->flags & ENTRY_HAS_POOL) != 0 ? e->pool : inc != NULL ? inc->pool : 0;
            if (inc != NULL)
                g_tree_remove(live, inc);
            break;
        case TORCH_ALLOC:
        case TORCH_SEGMENT_MAP:
        case TORCH_SEGMENT_UNMAP:
            if ((e->flags & ENTRY_HAS_POOL) != 0) {
                pools[i] = e->pool;
                break;
            }
            inc = e->action == TORCH_ALLOC ? live_find(live, e->addr) : NULL;
            pools[i] = inc != NULL ? inc->pool : ranges_pool(ranges, e->addr, e->stream);
            break;
        case TORCH_OOM:
            pools[i] = (e->flags & ENTRY_HAS_POOL) != 0 ? e->pool : 0;
            break;
        default:
            break;
        }
    }
    return pools;
}
