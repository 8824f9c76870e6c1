/* SPDX-License-Identifier: MIT */
/*
 * Allocation lifetimes (the pre-pass an offline policy needs) and the placement checker.  See
 * fragsim/plan.h.
 *
 * The pre-pass keeps its live ids in an address map (core/addr-map.h: open addressing, a
 * removal shifting the run back) and the lifetimes in a plain array: a GHashTable entry and a
 * g_new() per allocation were most of its cost.  The checker walks the allocations in order
 * with the live ones in a heap by end (the next to be freed on top) and in a size set
 * (core/size-set.h) ordered by (offset, index), which the sorted array of every lifetime by end
 * (a qsort with a callback) and a GTree were before: each new allocation is checked against its
 * neighbours there, so the first overlap found, and its message, are the same.
 */
#include <glib.h>

#include "fragsim/owned.h"
#include "fragsim/plan.h"
#include "fragsim/types.h"

#include "core/addr-map.h"
#include "core/heap.h"
#include "core/size-set.h"

/* ---- the pre-pass ---------------------------------------------------------------------------- */

typedef struct {
    FsimLifetime *items;
    gsize n;
    gsize capacity;
    gsize *ends; /* the lifetimes ended, in order */
    gsize n_ends;
    /* the live ids: (index + 1) x 2 + pending (freed, waiting for its FREE_COMPLETED) */
    FsimAddrMap live;
} Collect;

static void
lifetimes_start(Collect *collect, uint64_t id, uint64_t size, uint64_t stream, uint64_t step,
                gboolean pending)
{
    if (G_UNLIKELY(collect->n == collect->capacity)) {
        collect->capacity = MAX(collect->capacity * 2, 1024);
        collect->items = g_renew(FsimLifetime, collect->items, collect->capacity);
        collect->ends = g_renew(gsize, collect->ends, collect->capacity);
    }
    collect->items[collect->n] =
        (FsimLifetime){.size = size, .stream = stream, .start = step, .end = FSIM_LIFETIME_FOREVER};
    /* An id allocated again while alive: its entry is the new lifetime's (the engine rejects
     * it). */
    fsim_addr_map_insert_or_find(&collect->live, id)->value =
        (uint64_t)(collect->n + 1) * 2 + (pending ? 1 : 0);
    collect->n++;
}

static void
lifetimes_end(Collect *collect, FsimAddrSlot *slot, uint64_t step)
{
    gsize index = (gsize)(slot->value / 2 - 1);

    /* never more ends than lifetimes: the array grows with theirs */
    collect->ends[collect->n_ends++] = index;
    collect->items[index].end = step;
    fsim_addr_map_remove(&collect->live, slot);
}

static void
lifetimes_event(Collect *collect, const FsimEvent *ev, uint64_t step)
{
    FsimAddrSlot *slot;

    switch (ev->kind) {
    case FSIM_EV_ALLOC:
        lifetimes_start(collect, ev->id, ev->size, ev->stream, step, FALSE);
        break;
    case FSIM_EV_FREE:
        slot = fsim_addr_map_lookup(&collect->live, ev->id);
        if (slot == NULL || (slot->value & 1) != 0)
            break;
        if ((ev->flags & FSIM_EVF_DEFERRED) != 0)
            slot->value |= 1;
        else
            lifetimes_end(collect, slot, step);
        break;
    case FSIM_EV_FREE_COMPLETED:
        slot = fsim_addr_map_lookup(&collect->live, ev->id);
        if (slot != NULL && (slot->value & 1) != 0)
            lifetimes_end(collect, slot, step);
        break;
    default:
        break;
    }
}

FsimLifetimes *
fsim_lifetimes_from_trace(FsimTrace *trace, uint32_t device, GError **error)
{
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, device, error);
    Collect collect = {NULL, 0, 0, NULL, 0, {NULL, 0, 0}};
    GError *local_error = NULL;
    FsimLifetimes *lifetimes;
    const FsimEvent *evs;
    gsize got;
    uint64_t step = 0;

    if (stream == NULL)
        return NULL;
    fsim_addr_map_init(&collect.live, 10);
    for (gsize i = 0; state != NULL && i < state->n_blocks; i++) {
        const FsimSeedBlock *seed = &state->blocks[i];

        lifetimes_start(&collect, seed->id, seed->size, seed->stream, 0, seed->pending_free);
    }
    /* the events in the reader's batches, not copied out one by one */
    while ((got = fsim_trace_stream_batch(stream, &evs, &local_error)) > 0) {
        for (gsize k = 0; k < got; k++)
            lifetimes_event(&collect, &evs[k], ++step);
    }
    fsim_addr_map_clear(&collect.live);
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        g_free(collect.items);
        g_free(collect.ends);
        return NULL;
    }
    lifetimes = g_new0(FsimLifetimes, 1);
    lifetimes->n = collect.n;
    lifetimes->steps = step;
    lifetimes->items = collect.items;
    lifetimes->ends = collect.ends;
    lifetimes->n_ends = collect.n_ends;
    return lifetimes;
}

void
fsim_lifetimes_free(FsimLifetimes *lifetimes)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimLifetimes, items, g_free),
                                      FSIM_OWNED(FsimLifetimes, ends, g_free)};

    fsim_owned_free(lifetimes, owned, G_N_ELEMENTS(owned));
}

/* ---- the placement checker ------------------------------------------------------------------- */

typedef struct {
    uint64_t end;
    gsize index;
} EndEntry;

static inline gboolean
end_before(const EndEntry *a, const EndEntry *b)
{
    return a->end < b->end;
}

/* The live allocations that end, the next to end on top. */
FSIM_HEAP_DEFINE(EndHeap, end_heap, EndEntry, end_before)

typedef struct {
    const FsimLifetimes *lifetimes;
    const uint64_t *offsets;
    const uint64_t *sizes;
    FsimSizeSet live; /* by (offset, index); an item is its index + 1 */
    EndHeap ends;
} CheckData;

static gboolean
check_overlap(const CheckData *check, gsize a, gsize b, GError **error)
{
    uint64_t a_end = check->offsets[a] + check->sizes[a];
    uint64_t b_end = check->offsets[b] + check->sizes[b];

    if (check->offsets[a] < b_end && check->offsets[b] < a_end) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "placement check failed: allocations %" G_GSIZE_FORMAT " [%" G_GUINT64_FORMAT
                    ", %" G_GUINT64_FORMAT ") and %" G_GSIZE_FORMAT " [%" G_GUINT64_FORMAT
                    ", %" G_GUINT64_FORMAT ") are alive at once and overlap",
                    a, check->offsets[a], a_end, b, check->offsets[b], b_end);
        return FALSE;
    }
    return TRUE;
}

/* Check @i against its neighbours by offset in the live set, then insert it there. */
static gboolean
check_insert(CheckData *check, gsize i, GError **error)
{
    FsimSizeCursor before;
    FsimSizeCursor after;
    gpointer next = fsim_size_set_lower_bound(&check->live, check->offsets[i], i, &after);
    gpointer prev;
    EndEntry ending = {check->lifetimes->items[i].end, i};

    before = after;
    prev = next != NULL ? fsim_size_set_prev(&check->live, &before)
                        : fsim_size_set_last(&check->live, &before);
    if (prev != NULL && !check_overlap(check, GPOINTER_TO_SIZE(prev) - 1, i, error))
        return FALSE;
    if (next != NULL && !check_overlap(check, i, GPOINTER_TO_SIZE(next) - 1, error))
        return FALSE;
    fsim_size_set_insert(&check->live, check->offsets[i], i, GSIZE_TO_POINTER(i + 1));
    if (ending.end != FSIM_LIFETIME_FOREVER)
        end_heap_push(&check->ends, &ending);
    return TRUE;
}

/* Each lifetime's bytes and its place in the order. */
gboolean
fsim_plan_check_lifetimes(const FsimLifetimes *lifetimes, const uint64_t *sizes, GError **error)
{
    for (gsize i = 0; i < lifetimes->n; i++) {
        const FsimLifetime *lifetime = &lifetimes->items[i];

        if (sizes[i] < lifetime->size || lifetime->end <= lifetime->start ||
            (i > 0 && lifetime->start < lifetimes->items[i - 1].start)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "placement check failed: allocation %" G_GSIZE_FORMAT
                        " has %" G_GUINT64_FORMAT " bytes for %" G_GUINT64_FORMAT
                        " or a lifetime out of order",
                        i, sizes[i], lifetime->size);
            return FALSE;
        }
    }
    return TRUE;
}

/* The allocations checked in order (their starts never decrease, and a lifetime ends after it
 * starts): before each one, those whose memory is reusable at its start leave the live set. */
static gboolean
check_sweep(CheckData *check, GError **error)
{
    const FsimLifetimes *lifetimes = check->lifetimes;

    for (gsize i = 0; i < lifetimes->n; i++) {
        /* Memory freed at or before this step is reusable now. */
        while (check->ends.len > 0 && check->ends.items[0].end <= lifetimes->items[i].start) {
            gsize k = check->ends.items[0].index;

            end_heap_pop(&check->ends, NULL);
            fsim_size_set_erase(&check->live, check->offsets[k], k, GSIZE_TO_POINTER(k + 1));
        }
        if (check->offsets[i] != FSIM_PLAN_UNPLACED && !check_insert(check, i, error))
            return FALSE;
    }
    return TRUE;
}

gboolean
fsim_plan_check(const FsimLifetimes *lifetimes, const uint64_t *offsets, const uint64_t *sizes,
                GError **error)
{
    CheckData check = {.lifetimes = lifetimes, .offsets = offsets, .sizes = sizes};
    gboolean ok;

    if (!fsim_plan_check_lifetimes(lifetimes, sizes, error))
        return FALSE;
    fsim_size_set_init(&check.live);
    ok = check_sweep(&check, error);
    fsim_size_set_clear(&check.live);
    end_heap_clear(&check.ends);
    return ok;
}
