/* SPDX-License-Identifier: MIT */
/*
 * PyTorch snapshots: the state at trace start (torch.c, "Initial state"): the device's final
 * segments and blocks, the trace undone backwards, and what is left kept where it is consistent.
 */
#include <glib.h>

#include "torch-reader.h"

/* The mapped ranges of expandable segments, disjoint, keyed by their start (their first member,
 * addr). */
static GTree *
ranges_new(void)
{
    return g_tree_new_full(fsim_addr_compare, NULL, g_free, NULL);
}

static void
ranges_insert(GTree *ranges, const FsimSeedSegment *range)
{
    FsimSeedSegment *copy = g_memdup2(range, sizeof(*range));

    g_tree_insert(ranges, copy, copy);
}

/* Take [start, end) out of the mapped ranges. */
static void
ranges_remove(GTree *ranges, FsimAddr start, FsimAddr end)
{
    FsimSeedSegment key = {.addr = start};
    GTreeNode *node = g_tree_lower_bound(ranges, &key);
    GTreeNode *previous = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(ranges);

    if (previous != NULL) {
        FsimSeedSegment *p = g_tree_node_key(previous);

        if (p->addr + p->size > start) {
            FsimSeedSegment tail = *p;

            p->size = start - p->addr; /* p->addr < start: the key does not move */
            if (tail.addr + tail.size > end) {
                tail.size = tail.addr + tail.size - end;
                tail.addr = end;
                ranges_insert(ranges, &tail);
                return;
            }
        }
    }
    /* Ranges starting in [start, end); looked up again after each removal, which may
     * rebalance the tree. */
    for (node = g_tree_lower_bound(ranges, &key); node != NULL;
         node = g_tree_lower_bound(ranges, &key)) {
        FsimSeedSegment *r = g_tree_node_key(node);
        FsimSeedSegment tail = *r;

        if (r->addr >= end)
            break;
        g_tree_remove(ranges, r);
        if (tail.addr + tail.size > end) {
            tail.size = tail.addr + tail.size - end;
            tail.addr = end;
            ranges_insert(ranges, &tail);
            break;
        }
    }
}

/* Add @range, merging it with neighbours of the same stream and pool. */
static void
ranges_add(GTree *ranges, FsimSeedSegment range)
{
    GTreeNode *node;

    ranges_remove(ranges, range.addr, range.addr + range.size);
    node = g_tree_lower_bound(ranges, &range);
    if (node != NULL) {
        FsimSeedSegment *next = g_tree_node_key(node);

        if (next->addr == range.addr + range.size && next->stream == range.stream &&
            next->pool == range.pool && next->pool_id == range.pool_id) {
            range.size += next->size;
            g_tree_remove(ranges, next);
        }
    }
    node = g_tree_lower_bound(ranges, &range);
    node = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(ranges);
    if (node != NULL) {
        FsimSeedSegment *previous = g_tree_node_key(node);

        if (previous->addr + previous->size == range.addr && previous->stream == range.stream &&
            previous->pool == range.pool && previous->pool_id == range.pool_id) {
            previous->size += range.size; /* its key does not move */
            return;
        }
    }
    ranges_insert(ranges, &range);
}

/* The pools of @range, unmapped before the end of the trace: those of a mapped neighbour on the
 * same stream, else guessed from the page sizes (20 MiB pages are large-pool ones) and the
 * private pool the entry names (default pool without one). */
static void
ranges_guess_pool(GTree *ranges, FsimSeedSegment *range)
{
    FsimSeedSegment key = {.addr = range->addr + range->size};
    GTreeNode *node = g_tree_lower_bound(ranges, &key);
    GTreeNode *previous;
    const FsimSeedSegment *neighbour = NULL;

    if (node != NULL) {
        const FsimSeedSegment *next = g_tree_node_key(node);

        if (next->addr == range->addr + range->size && next->stream == range->stream)
            neighbour = next;
    }
    key.addr = range->addr;
    node = g_tree_lower_bound(ranges, &key);
    previous = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(ranges);
    if (neighbour == NULL && previous != NULL) {
        const FsimSeedSegment *p = g_tree_node_key(previous);

        if (p->addr + p->size == range->addr && p->stream == range->stream)
            neighbour = p;
    }
    if (neighbour != NULL) {
        range->pool = neighbour->pool;
        range->pool_id = neighbour->pool_id;
        return;
    }
    range->pool = range->size % TORCH_LARGE_PAGE == 0 ? FSIM_POOL_LARGE : FSIM_POOL_SMALL;
}

static int
block_compare(gconstpointer a, gconstpointer b)
{
    const FsimSeedBlock *x = a;
    const FsimSeedBlock *y = b;

    return fsim_compare_u64(x->addr, y->addr);
}

static gboolean
collect_range(gpointer key, gpointer value, gpointer data)
{
    (void)value;
    g_array_append_vals(data, key, 1);
    return FALSE;
}

/* The state being undone: live blocks and cudaMalloc'd segments by address, and the mapped ranges
 * of expandable segments. */
typedef struct {
    FsimAddr addr;
    uint64_t size;
    uint64_t requested;
    uint64_t stream;
    uint32_t stack;
    uint32_t state; /* FSIM_LIVE_ALLOCATED, FSIM_LIVE_PENDING, 0: no longer there */
} UndoBlock;

typedef struct {
    FsimAddrMap live;  /* address -> 1 + the index of its UndoBlock in blocks */
    UndoBlock *blocks; /* each block made (the live ones: state != 0) */
    gsize n_blocks;
    gsize blocks_room;
    FsimLiveTable segments; /* address -> cudaMalloc segment: block.size, stream, cookie = pool,
                             * requested = private pool id */
    GTree *ranges;          /* expandable segments: mapped ranges */
} Undo;

/* The block at @addr, made (zeroed but for its address) when there is none. */
static inline UndoBlock *
block_at(Undo *undo, FsimAddr addr)
{
    FsimAddrSlot *slot = fsim_addr_map_insert_or_find(&undo->live, addr);

    if (slot->value == 0) {
        if (G_UNLIKELY(undo->n_blocks == undo->blocks_room)) {
            undo->blocks_room = MAX(2 * undo->blocks_room, (gsize)64);
            undo->blocks = g_renew(UndoBlock, undo->blocks, undo->blocks_room);
        }
        undo->blocks[undo->n_blocks++] = (UndoBlock){.addr = addr};
        slot->value = undo->n_blocks;
    }
    return &undo->blocks[slot->value - 1];
}

/* The block at @addr, or NULL. */
static inline UndoBlock *
block_find(Undo *undo, FsimAddr addr, FsimAddrSlot **slot)
{
    *slot = fsim_addr_map_lookup(&undo->live, addr);
    return *slot != NULL ? &undo->blocks[(*slot)->value - 1] : NULL;
}

/* Start from the device's final state. */
/* The entry at @addr, inserted when absent (one probe of the table either way). */
static inline FsimLiveEntry *
entry_at(FsimLiveTable *table, FsimAddr addr)
{
    gboolean inserted;

    return fsim_live_table_insert_or_find(table, addr, &inserted);
}

static void
undo_init(Undo *undo, const TorchDevice *dev)
{
    fsim_addr_map_init(&undo->live, 10);
    undo->n_blocks = 0;
    /* (one per final block and per free_completed at most) */
    undo->blocks_room = (gsize)dev->final_blocks->len + dev->counts[TORCH_FREE_COMPLETED] + 1;
    undo->blocks = g_new(UndoBlock, undo->blocks_room);
    fsim_live_table_init(&undo->segments);
    undo->ranges = ranges_new();
    for (guint i = 0; i < dev->final_segments->len; i++) {
        const FsimSeedSegment *seg = &g_array_index(dev->final_segments, FsimSeedSegment, i);

        if (seg->expandable) {
            ranges_add(undo->ranges, *seg);
        } else {
            FsimLiveEntry *entry = entry_at(&undo->segments, seg->addr);

            entry->block.size = seg->size;
            entry->stream = seg->stream;
            entry->block.cookie = seg->pool;
            entry->requested = seg->pool_id;
        }
    }
    for (guint i = 0; i < dev->final_blocks->len; i++) {
        const FsimSeedBlock *block = &g_array_index(dev->final_blocks, FsimSeedBlock, i);
        UndoBlock *undone = block_at(undo, block->addr);

        undone->size = block->size;
        undone->requested = block->requested;
        undone->stream = block->stream;
        undone->stack = block->stack; /* blocks freed during the trace have none */
        undone->state = block->pending_free ? FSIM_LIVE_PENDING : FSIM_LIVE_ALLOCATED;
    }
}

/* Removes the entry at @addr, if any. */
static void
entry_forget(FsimLiveTable *table, FsimAddr addr)
{
    FsimLiveEntry *entry = fsim_live_table_lookup(table, addr);

    if (entry != NULL)
        fsim_live_table_remove(table, entry);
}

/* Undo one entry of the trace (walked backwards). */
static void
undo_entry(Undo *undo, const TorchEntry *e)
{
    FsimLiveEntry *entry;
    UndoBlock *block;
    FsimAddrSlot *slot;

    switch ((TorchAction)e->action) {
    case TORCH_ALLOC:
        block = block_find(undo, e->addr, &slot);
        if (block != NULL) {
            block->state = 0;
            fsim_addr_map_remove(&undo->live, slot);
        }
        break;
    case TORCH_FREE_REQUESTED:
        block = block_find(undo, e->addr, &slot);
        if (block != NULL)
            block->state = FSIM_LIVE_ALLOCATED;
        break;
    case TORCH_FREE_COMPLETED:
        block = block_at(undo, e->addr);
        /* The trace has the request, not the block size: see the file comment. */
        block->size = round_size(e->size);
        block->requested = e->size;
        block->stream = e->stream;
        block->state = FSIM_LIVE_PENDING;
        break;
    case TORCH_SEGMENT_ALLOC:
        entry_forget(&undo->segments, e->addr);
        break;
    case TORCH_SEGMENT_FREE:
        entry = entry_at(&undo->segments, e->addr);
        entry->block.size = e->size;
        entry->stream = e->stream;
        entry->block.cookie = e->size <= TORCH_SMALL_SEGMENT ? FSIM_POOL_SMALL : FSIM_POOL_LARGE;
        entry->requested = (e->flags & ENTRY_HAS_POOL) != 0 ? e->pool : 0;
        break;
    case TORCH_SEGMENT_MAP:
        ranges_remove(undo->ranges, e->addr, e->addr + e->size);
        break;
    case TORCH_SEGMENT_UNMAP: {
        FsimSeedSegment range = {.addr = e->addr,
                                 .size = e->size,
                                 .stream = e->stream,
                                 .expandable = TRUE,
                                 .pool_id = (e->flags & ENTRY_HAS_POOL) != 0 ? e->pool : 0};

        ranges_guess_pool(undo->ranges, &range);
        ranges_add(undo->ranges, range);
        break;
    }
    default:
        break;
    }
}

/* What is left, in address order, into @segments and @blocks; @undo is cleared. */
static void
undo_collect(Undo *undo, GArray *all_segments, GArray *all_blocks)
{
    for (gsize i = 0; i < fsim_live_table_extent(&undo->segments); i++) {
        const FsimLiveEntry *entry = fsim_live_table_nth(&undo->segments, i);
        FsimSeedSegment seg = {.addr = entry->id,
                               .size = entry->block.size,
                               .stream = entry->stream,
                               .pool = (FsimPool)entry->block.cookie,
                               .pool_id = entry->requested};

        if (entry->state != 0)
            g_array_append_val(all_segments, seg);
    }
    g_tree_foreach(undo->ranges, collect_range, all_segments);
    for (gsize i = 0; i < undo->n_blocks; i++) {
        const UndoBlock *undone = &undo->blocks[i];
        FsimSeedBlock block = {.addr = undone->addr,
                               .size = undone->size,
                               .requested = MIN(undone->requested, undone->size),
                               .stream = undone->stream,
                               .pending_free = undone->state == FSIM_LIVE_PENDING,
                               .stack = undone->stack};

        if (undone->state != 0)
            g_array_append_val(all_blocks, block);
    }
    fsim_addr_map_clear(&undo->live);
    g_free(undo->blocks);
    fsim_live_table_clear(&undo->segments);
    g_tree_destroy(undo->ranges);
    g_array_sort_with_data(all_segments, fsim_addr_compare, NULL); /* by their first member */
    g_array_sort(all_blocks, block_compare);
}

/* Keep what is consistent: segments that overlap no earlier one, blocks inside one segment that
 * overlap no earlier block (ids 1..n in address order).  Counts what was dropped. */
static void
keep_consistent(const GArray *all_segments, GArray *all_blocks, GArray *kept, GArray *kept_blocks,
                guint *dropped_segments, guint *dropped_blocks)
{
    gsize s = 0;

    for (guint i = 0; i < all_segments->len; i++) {
        const FsimSeedSegment *seg = &g_array_index(all_segments, FsimSeedSegment, i);
        const FsimSeedSegment *last =
            kept->len > 0 ? &g_array_index(kept, FsimSeedSegment, kept->len - 1) : NULL;

        if (last != NULL && last->addr + last->size > seg->addr) {
            (*dropped_segments)++;
            continue;
        }
        g_array_append_val(kept, *seg);
    }
    for (guint i = 0; i < all_blocks->len; i++) {
        FsimSeedBlock *block = &g_array_index(all_blocks, FsimSeedBlock, i);
        const FsimSeedBlock *last =
            kept_blocks->len > 0 ? &g_array_index(kept_blocks, FsimSeedBlock, kept_blocks->len - 1)
                                 : NULL;
        const FsimSeedSegment *seg;

        while (s < kept->len && g_array_index(kept, FsimSeedSegment, s).addr +
                                        g_array_index(kept, FsimSeedSegment, s).size <=
                                    block->addr)
            s++;
        seg = s < kept->len ? &g_array_index(kept, FsimSeedSegment, s) : NULL;
        if ((last != NULL && last->addr + last->size > block->addr) || seg == NULL ||
            seg->addr > block->addr || block->addr + block->size > seg->addr + seg->size) {
            (*dropped_blocks)++;
            continue;
        }
        block->id = kept_blocks->len + 1;
        g_array_append_val(kept_blocks, *block);
    }
}

/*
 * Undo the device's trace from its final state (see torch.c).  Returns the state (NULL when
 * empty) and fills @ids with address -> id (block.cookie) of its blocks.
 */
gboolean
fsim_torch_initial_state(TorchLoader *ld, TorchDevice *dev, FsimAddrMap *ids,
                         FsimInitialState **out, GError **error)
{
    g_autoptr(GArray) all_segments = g_array_new(FALSE, FALSE, sizeof(FsimSeedSegment));
    g_autoptr(GArray) all_blocks = g_array_new(FALSE, FALSE, sizeof(FsimSeedBlock));
    g_autoptr(GArray) kept = g_array_new(FALSE, FALSE, sizeof(FsimSeedSegment));
    g_autoptr(GArray) kept_blocks = g_array_new(FALSE, FALSE, sizeof(FsimSeedBlock));
    FsimInitialState *state;
    Undo undo;
    guint dropped_segments = 0;
    guint dropped_blocks = 0;

    undo_init(&undo, dev);
    for (guint i = dev->entries->len; i-- > 0;)
        undo_entry(&undo, &g_array_index(dev->entries, TorchEntry, i));
    undo_collect(&undo, all_segments, all_blocks);
    keep_consistent(all_segments, all_blocks, kept, kept_blocks, &dropped_segments,
                    &dropped_blocks);
    if (dropped_segments > 0 || dropped_blocks > 0)
        g_info("%s: device %u: the state at trace start rebuilt from the final state is "
               "inconsistent (a trace with gaps?): dropped %u segments and %u blocks",
               ld->path, dev->device, dropped_segments, dropped_blocks);

    for (guint i = 0; i < kept_blocks->len; i++) {
        const FsimSeedBlock *block = &g_array_index(kept_blocks, FsimSeedBlock, i);
        FsimAddrSlot *slot = fsim_addr_map_insert_or_find(ids, block->addr);

        g_assert(slot->value == 0 && block->id != 0);
        slot->value = block->id;
    }
    *out = NULL;
    if (kept->len == 0 && kept_blocks->len == 0)
        return TRUE;
    state = g_new0(FsimInitialState, 1);
    state->n_segments = kept->len;
    state->segments = (FsimSeedSegment *)(void *)g_array_free(g_steal_pointer(&kept), FALSE);
    state->n_blocks = kept_blocks->len;
    state->blocks = (FsimSeedBlock *)(void *)g_array_free(g_steal_pointer(&kept_blocks), FALSE);
    if (!fsim_initial_state_check(state, error)) {
        g_prefix_error(error, "%s: device %u: ", ld->path, dev->device);
        g_free(state->segments);
        g_free(state->blocks);
        g_free(state);
        return FALSE;
    }
    *out = state;
    return TRUE;
}
