/* SPDX-License-Identifier: MIT */
/*
 * PyTorch snapshots: each device's events (allocs, frees, inferred empty_cache bursts, marks,
 * private-pool scopes) and recorded outcomes, built from its decoded entries and its state at
 * trace start.
 */
#include <glib.h>

#include "torch-reader.h"

static int
mark_compare(gconstpointer a, gconstpointer b)
{
    const TorchMark *x = a;
    const TorchMark *y = b;

    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The next event of @dev: dev->n_events of its events array's room are used
 * (fsim_torch_build_device()). */
static inline TorchEvent *
event_next(TorchDevice *dev)
{
    if (G_UNLIKELY(dev->n_events == dev->events_room)) {
        /* doubled, short of wrapping (four billion events are far past any memory budget) */
        if (dev->events_room > G_MAXUINT / 2)
            g_error("a device of more than %u events", dev->events_room);
        fsim_torch_events_room(dev, MAX(dev->events_room * 2, 64u));
    }
    return &dev->events[dev->n_events++];
}

static void
push_event(TorchDevice *dev, FsimTime time, uint64_t index, FsimEventKind kind, uint64_t id,
           uint64_t size, uint64_t stream, FsimAddr addr, uint32_t flags)
{
    *event_next(dev) = (TorchEvent){
        .core = {.time = time, .index = index, .id = id, .size = size, .stream = stream},
        .addr = addr,
        .kind = (uint8_t)kind,
        .flags = (uint8_t)flags};
}

static void
push_outcome(GArray *outcomes, uint64_t index, FsimOutcomeKind kind, const TorchEntry *e)
{
    FsimOutcome outcome = {.index = index,
                           .addr = kind == FSIM_OUTCOME_OOM ? 0 : e->addr,
                           .size = e->size,
                           .stream = e->stream,
                           .kind = kind};

    /* PyTorch 2.0 wrote an OOM's free device memory as its `addr`; later, as `device_free`. */
    if (kind == FSIM_OUTCOME_OOM)
        outcome.device_free = e->device_free != 0 ? e->device_free : e->addr;

    g_array_append_val(outcomes, outcome);
}

/* The private pools a device's events hold a reference on (see torch_pool_scope()). */
static GHashTable *
pool_refs_new(const FsimInitialState *state)
{
    GHashTable *refs = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);

    for (gsize i = 0; state != NULL && i < state->n_segments; i++) {
        uint64_t pool = state->segments[i].pool_id;

        if (pool != 0 && !g_hash_table_contains(refs, &pool))
            g_hash_table_add(refs, g_memdup2(&pool, sizeof(pool)));
    }
    return refs;
}

/*
 * Entry @i allocates into private pool @pool (not 0): open a scope of it around the allocation
 * (@open, before it) and close it (after it, !@open).  The scope is a use_mem_pool one: its
 * reference is dropped at its end, except that the first scope of a pool the events have not
 * created yet keeps it, standing for the graph or MemPool that owns the pool until the trace
 * shows it released (torch_pool_releases()).
 */
static void
torch_pool_scope(TorchDevice *dev, GHashTable *refs, uint64_t pool, FsimTime time, guint i,
                 uint64_t stream, gboolean open)
{
    if (open) {
        push_event(dev, time, i, FSIM_EV_POOL_BEGIN, pool, 0, stream, 0, 0);
        return;
    }
    push_event(dev, time, i, FSIM_EV_POOL_END, pool, 0, stream, 0, 0);
    if (g_hash_table_contains(refs, &pool))
        push_event(dev, time, i, FSIM_EV_POOL_RELEASE, pool, 0, 0, 0, 0);
    else
        g_hash_table_add(refs, g_memdup2(&pool, sizeof(pool)));
}

/* A burst of releases starts at entry @i: a private pool it frees segments of was released
 * (its last reference dropped) before it. */
static void
torch_pool_releases(TorchDevice *dev, GHashTable *refs, const uint64_t *pools, FsimTime time,
                    guint i)
{
    for (guint j = i; pools != NULL && j < dev->entries->len; j++) {
        const TorchEntry *e = &g_array_index(dev->entries, TorchEntry, j);

        if (e->action != TORCH_SEGMENT_FREE && e->action != TORCH_SEGMENT_UNMAP)
            break;
        if (pools[j] != 0 && g_hash_table_remove(refs, &pools[j]))
            push_event(dev, time, i, FSIM_EV_POOL_RELEASE, pools[j], 0, 0, 0, 0);
    }
}

/* Building one device's events: the state of the walk over its entries. */
typedef struct {
    TorchDevice *dev;
    FsimAddrMap ids;  /* address -> id */
    GArray *outcomes; /* FsimOutcome */
    uint64_t next_id;
    const uint64_t *pools; /* (nullable) the private pool of each entry */
    GHashTable *refs;      /* see torch_pool_scope() */
    gboolean in_release;   /* the previous entry was a segment_free or segment_unmap */
} Builder;

/* The marks before @time, as events of index @i. */
static void
push_marks(TorchDevice *dev, guint *m, gboolean all, FsimTime time, guint i)
{
    for (; *m < dev->marks->len && (all || g_array_index(dev->marks, TorchMark, *m).time < time);
         (*m)++) {
        const TorchMark *mark = &g_array_index(dev->marks, TorchMark, *m);

        push_event(dev, mark->time, i, FSIM_EV_MARK, 0, 0, 0, 0, 0);
        dev->events[dev->n_events - 1].label = mark->label;
    }
}

/* An allocation of entry @i as id @id, inside a scope of its private pool when it has one. */
static inline void
push_alloc(Builder *b, const TorchEntry *e, guint i, FsimTime time, uint64_t id, FsimAddr addr,
           uint32_t flags)
{
    uint64_t pool = b->pools != NULL ? b->pools[i] : 0;

    if (pool != 0)
        torch_pool_scope(b->dev, b->refs, pool, time, i, e->stream, TRUE);
    *event_next(b->dev) = (TorchEvent){
        .core = {.time = time, .index = i, .id = id, .size = e->size, .stream = e->stream},
        .addr = addr,
        .stack = e->stack,
        .kind = FSIM_EV_ALLOC,
        .flags = (uint8_t)flags};
    if (pool != 0)
        torch_pool_scope(b->dev, b->refs, pool, time, i, e->stream, FALSE);
}

/* free_requested: deferred unless the very next entry is its free_completed. */
static void
push_free_requested(Builder *b, const TorchEntry *e, guint i, FsimTime time)
{
    GArray *entries = b->dev->entries;
    const TorchEntry *next =
        i + 1 < entries->len ? &g_array_index(entries, TorchEntry, i + 1) : NULL;
    gboolean deferred =
        next == NULL || next->action != TORCH_FREE_COMPLETED || next->addr != e->addr;
    FsimAddrSlot *slot = fsim_addr_map_insert_or_find(&b->ids, e->addr);

    if (slot->value == 0)
        slot->value = b->next_id++;
    push_event(b->dev, time, i, FSIM_EV_FREE, slot->value, 0, e->stream, 0,
               deferred ? FSIM_EVF_DEFERRED : 0);
}

/* The events and outcomes of entry @i. */
static void
build_entry(Builder *b, guint i, FsimTime time)
{
    const TorchEntry *e = &g_array_index(b->dev->entries, TorchEntry, i);
    gboolean release = FALSE;
    FsimAddrSlot *slot;
    uint64_t id;

    switch ((TorchAction)e->action) {
    case TORCH_ALLOC:
        id = b->next_id++;
        fsim_addr_map_insert_or_find(&b->ids, e->addr)->value = id;
        push_alloc(b, e, i, time, id, e->addr, 0);
        break;
    case TORCH_FREE_REQUESTED:
        push_free_requested(b, e, i, time);
        break;
    case TORCH_FREE_COMPLETED:
        slot = fsim_addr_map_lookup(&b->ids, e->addr);
        if (slot != NULL) {
            id = slot->value;
            fsim_addr_map_remove(&b->ids, slot);
        } else {
            id = b->next_id++;
        }
        push_event(b->dev, time, i, FSIM_EV_FREE_COMPLETED, id, 0, e->stream, 0, 0);
        break;
    case TORCH_SEGMENT_ALLOC:
        push_outcome(b->outcomes, i, FSIM_OUTCOME_SEGMENT_ALLOC, e);
        break;
    case TORCH_SEGMENT_MAP:
        push_outcome(b->outcomes, i, FSIM_OUTCOME_SEGMENT_MAP, e);
        break;
    case TORCH_SEGMENT_FREE:
    case TORCH_SEGMENT_UNMAP:
        /* release_cached_blocks(): see torch.c. */
        if (!b->in_release) {
            torch_pool_releases(b->dev, b->refs, b->pools, time, i);
            push_event(b->dev, time, i, FSIM_EV_EMPTY_CACHE, 0, 0, 0, 0, FSIM_EVF_INFERRED);
        }
        release = TRUE;
        push_outcome(b->outcomes, i,
                     e->action == TORCH_SEGMENT_FREE ? FSIM_OUTCOME_SEGMENT_FREE
                                                     : FSIM_OUTCOME_SEGMENT_UNMAP,
                     e);
        break;
    case TORCH_OOM:
        push_outcome(b->outcomes, i, FSIM_OUTCOME_OOM, e);
        /* The request that failed, replayed so that policies are compared on it (validate
         * expects it to fail again; another policy or a larger device may serve it), then
         * freed at once: the program never received the memory. */
        if (e->size > 0 && e->size <= FSIM_MAX_SIZE) {
            id = b->next_id++;
            push_alloc(b, e, i, time, id, 0, FSIM_EVF_RECORDED_OOM);
            push_event(b->dev, time, i, FSIM_EV_FREE, id, 0, e->stream, 0, FSIM_EVF_RECORDED_OOM);
        }
        break;
    default:
        break;
    }
    b->in_release = release;
}

gboolean
fsim_torch_build_device(TorchLoader *ld, TorchDevice *dev, GError **error)
{
    FsimInitialState *state = NULL;
    g_autofree uint64_t *pools = NULL;
    g_autoptr(GHashTable) refs = NULL;
    Builder b = {.dev = dev};
    guint n = dev->entries->len;
    guint m = 0;

    fsim_addr_map_init(&b.ids, 10);
    if (!fsim_torch_initial_state(ld, dev, &b.ids, &state, error)) {
        fsim_addr_map_clear(&b.ids);
        return FALSE;
    }
    pools = fsim_torch_pools_assign(dev->entries, state, dev->final_segments, dev->pooled);
    refs = pool_refs_new(state);
    b.pools = pools;
    b.refs = refs;
    b.outcomes = g_array_new(FALSE, FALSE, sizeof(FsimOutcome));
    b.next_id = (state != NULL ? state->n_blocks : 0) + 1;
    if (state != NULL)
        fsim_trace_set_initial_state(&ld->trace->base, dev->device, state);
    if (dev->backwards > 0)
        g_info("%s: device %u: time went backwards %" G_GUINT64_FORMAT " times (clamped)", ld->path,
               dev->device, dev->backwards);

    g_array_sort(dev->marks, mark_compare);
    /* (room for an event per entry and mark, and some: pool scopes, inferred releases) */
    dev->n_events = 0;
    fsim_torch_events_room(dev, n + dev->marks->len + 64);
    for (guint i = 0; i < n; i++) {
        const TorchEntry *e = &g_array_index(dev->entries, TorchEntry, i);
        FsimTime time = dev->timed ? e->time : (FsimTime)i * TORCH_CLOCK_STEP_NS;

        push_marks(dev, &m, FALSE, time, i);
        build_entry(&b, i, time);
    }
    push_marks(dev, &m, TRUE, 0, n);
    fsim_addr_map_clear(&b.ids);
    if (n > 0)
        fsim_trace_set_outcomes(&ld->trace->base, dev->device, b.outcomes);
    else
        g_array_unref(b.outcomes);
    fsim_trace_add_device(&ld->trace->base, dev->device);
    fsim_torch_array_give(TORCH_SPARE_ENTRIES, g_steal_pointer(&dev->entries));
    g_clear_pointer(&dev->marks, g_array_unref);
    g_clear_pointer(&dev->final_segments, g_array_unref);
    g_clear_pointer(&dev->final_blocks, g_array_unref);
    return TRUE;
}
