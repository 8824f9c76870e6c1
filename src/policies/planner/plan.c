/* SPDX-License-Identifier: MIT */
/*
 * The planner's offline plan: several placement orders, the best kept (see planner.c).
 *
 * The time order replays the lifetimes through best fit in an arena the size of the device, as
 * `bestfit` does online, in O(n log n), releasing each placed allocation when the next one starts
 * at or after its end (in the order of the pre-pass's ends, or for lifetimes without them from a
 * heap of the placed ones by end, as large as the live set).  The greedy orders are greedy.c's,
 * run only when they can complete within the work limit.
 */
#include <glib.h>

#include <string.h>

#include "core/heap.h"
#include "planner.h"

const char *
planner_order_name(PlannerOrder order)
{
    static const char *const names[PLANNER_ORDER_COUNT] = {"time", "size", "size-lifetime",
                                                           "lifetime-size"};

    return order < PLANNER_ORDER_COUNT ? names[order] : "?";
}

/* ---- the time order: best fit in allocation order ----------------------------------------- */

/* The time order's arena: bestfit's, its pages mapped as its top rises. */
typedef struct {
    PlannerArena arena;
    uint64_t capacity;
    uint64_t granularity;
    uint64_t mapped_end;
} TimeArena;

/* Best fit for @size: the chunk taken, or NULL when none fits or the device has no pages left
 * for it (bestfit's OOM). */
static inline PlannerChunk *
time_place(TimeArena *t, uint64_t size)
{
    FsimSizeCursor cursor;
    PlannerChunk *chunk = planner_arena_find(&t->arena, size, &cursor);

    if (chunk == NULL)
        return NULL;
    if (chunk->start + size > t->mapped_end) {
        uint64_t new_end =
            (chunk->start + size + t->granularity - 1) / t->granularity * t->granularity;

        if (new_end > t->capacity)
            return NULL;
        t->mapped_end = new_end;
    }
    return planner_arena_take(&t->arena, chunk, &cursor, size);
}

/* A placed allocation of the time order, released at @end (ties in allocation order). */
typedef struct {
    uint64_t end;
    gsize index;
    PlannerChunk *chunk;
} Placed;

static inline gboolean
placed_before(const Placed *a, const Placed *b)
{
    return a->end != b->end ? a->end < b->end : a->index < b->index;
}

/* The placed allocations, the first to end on top. */
FSIM_HEAP_DEFINE(PlacedHeap, placed_heap, Placed, placed_before)

/* Lifetimes without their ends in order: the placed ones in a heap by end. */
static void
time_by_heap(TimeArena *t, const FsimLifetimes *lifetimes, const uint64_t *sizes, uint64_t *offsets)
{
    PlacedHeap heap = {0};

    for (gsize i = 0; i < lifetimes->n; i++) {
        const FsimLifetime *lifetime = &lifetimes->items[i];
        PlannerChunk *chunk;

        while (heap.len > 0 && heap.items[0].end <= lifetime->start) {
            planner_arena_release(&t->arena, heap.items[0].chunk);
            placed_heap_pop(&heap, NULL);
        }
        chunk = time_place(t, sizes[i]);
        offsets[i] = chunk != NULL ? chunk->start : FSIM_PLAN_UNPLACED;
        if (chunk != NULL && lifetime->end != FSIM_LIFETIME_FOREVER) {
            Placed placed = {lifetime->end, i, chunk};

            placed_heap_push(&heap, &placed);
        }
    }
    placed_heap_clear(&heap);
}

/* Lifetimes with their ends in order (fsim_lifetimes_from_trace()'s): each released as the next
 * start passes its end, in that order, which the heap would give (ends are distinct steps, and
 * the frees between two allocations leave the same free chunks in any order).  While placed, an
 * allocation's offset holds its chunk. */
static void
time_by_ends(TimeArena *t, const FsimLifetimes *lifetimes, const uint64_t *sizes, uint64_t *offsets)
{
    const FsimLifetime *items = lifetimes->items;
    gsize e = 0;

    for (gsize i = 0; i < lifetimes->n; i++) {
        PlannerChunk *chunk;

        for (; e < lifetimes->n_ends && items[lifetimes->ends[e]].end <= items[i].start; e++) {
            gsize k = lifetimes->ends[e];

            g_assert(k < i);
            if (offsets[k] == FSIM_PLAN_UNPLACED)
                continue;
            chunk = (PlannerChunk *)(uintptr_t)offsets[k];
            offsets[k] = chunk->start;
            planner_arena_release(&t->arena, chunk);
        }
        chunk = time_place(t, sizes[i]);
        offsets[i] = chunk != NULL ? (uint64_t)(uintptr_t)chunk : FSIM_PLAN_UNPLACED;
    }
    /* the placed ones left: those ending after the last start, and those never ending */
    for (; e < lifetimes->n_ends; e++) {
        gsize k = lifetimes->ends[e];

        if (offsets[k] != FSIM_PLAN_UNPLACED)
            offsets[k] = ((PlannerChunk *)(uintptr_t)offsets[k])->start;
    }
    for (gsize i = 0; i < lifetimes->n; i++) {
        if (items[i].end == FSIM_LIFETIME_FOREVER && offsets[i] != FSIM_PLAN_UNPLACED)
            offsets[i] = ((PlannerChunk *)(uintptr_t)offsets[i])->start;
    }
}

static void
plan_time(const FsimLifetimes *lifetimes, const uint64_t *sizes, uint64_t capacity,
          uint64_t granularity, uint64_t *offsets)
{
    TimeArena t = {.capacity = capacity, .granularity = granularity};

    planner_arena_init(&t.arena, fsim_chunk_arena_bytes(capacity, granularity));
    if (lifetimes->ends != NULL)
        time_by_ends(&t, lifetimes, sizes, offsets);
    else
        time_by_heap(&t, lifetimes, sizes, offsets);
    planner_arena_clear(&t.arena);
}

/* ---- choosing ------------------------------------------------------------------------------- */

/* The high-water mark; allocations beyond @capacity are left out and counted in @unplaced. */
static uint64_t
plan_extent(uint64_t *offsets, const uint64_t *sizes, gsize n, uint64_t capacity,
            uint64_t *unplaced)
{
    uint64_t top = 0;

    *unplaced = 0;
    for (gsize i = 0; i < n; i++) {
        if (offsets[i] != FSIM_PLAN_UNPLACED && offsets[i] + sizes[i] > capacity)
            offsets[i] = FSIM_PLAN_UNPLACED;
        if (offsets[i] == FSIM_PLAN_UNPLACED)
            (*unplaced)++;
        else
            top = MAX(top, offsets[i] + sizes[i]);
    }
    return top;
}

void
planner_plan_build(const FsimLifetimes *lifetimes, uint64_t alignment, uint64_t capacity,
                   uint64_t granularity, uint64_t work_limit, PlannerPlan *plan)
{
    gsize n = lifetimes->n;
    g_autofree uint64_t *offsets = NULL;

    memset(plan, 0, sizeof(*plan));
    plan->n = n;
    plan->sizes = g_new(uint64_t, MAX(n, 1));
    plan->offsets = g_new(uint64_t, MAX(n, 1));
    for (gsize i = 0; i < n; i++)
        plan->sizes[i] = (lifetimes->items[i].size + alignment - 1) & ~(alignment - 1);
    /* the time order first, kept unless another does better */
    plan_time(lifetimes, plan->sizes, capacity, granularity, plan->offsets);
    plan->arena_bytes = plan_extent(plan->offsets, plan->sizes, n, capacity, &plan->unplaced);
    plan->arena_by_order[PLANNER_ORDER_TIME] = MAX(plan->arena_bytes, 1);
    plan->unplaced_by_order[PLANNER_ORDER_TIME] = plan->unplaced;
    plan->order = PLANNER_ORDER_TIME;
    /* every greedy order would look at the same neighbours: when they are too many, none is run */
    if (planner_greedy_work(lifetimes, work_limit) > work_limit)
        return;
    offsets = g_new(uint64_t, MAX(n, 1));
    for (int order = PLANNER_ORDER_TIME + 1; order < PLANNER_ORDER_COUNT; order++) {
        uint64_t unplaced;
        uint64_t top;

        if (!planner_plan_greedy(lifetimes, plan->sizes, (PlannerOrder)order, work_limit, offsets))
            continue;
        top = plan_extent(offsets, plan->sizes, n, capacity, &unplaced);
        plan->arena_by_order[order] = MAX(top, 1);
        plan->unplaced_by_order[order] = unplaced;
        if (unplaced < plan->unplaced || (unplaced == plan->unplaced && top < plan->arena_bytes)) {
            plan->order = (PlannerOrder)order;
            plan->unplaced = unplaced;
            plan->arena_bytes = top;
            memcpy(plan->offsets, offsets, MAX(n, 1) * sizeof(uint64_t));
        }
    }
}

/* The time order's places need no sweep: each was carved from a free chunk of one arena
 * (plan_time()), whose taken chunks never overlap, and given back exactly when the checker's
 * sweep lets it go (the first allocation starting at or after its end); those the device cannot
 * hold were only taken out.  Its sizes and lifetimes are still checked, in O(n). */
gboolean
planner_plan_check(const FsimLifetimes *lifetimes, const PlannerPlan *plan, gboolean paranoid,
                   GError **error)
{
    gboolean ok = plan->order == PLANNER_ORDER_TIME && !paranoid
                      ? fsim_plan_check_lifetimes(lifetimes, plan->sizes, error)
                      : fsim_plan_check(lifetimes, plan->offsets, plan->sizes, error);

    if (!ok)
        g_prefix_error(error,
                       "planner: the %s order's plan is broken: ", planner_order_name(plan->order));
    return ok;
}

void
planner_plan_clear(PlannerPlan *plan)
{
    g_free(plan->offsets);
    g_free(plan->sizes);
    memset(plan, 0, sizeof(*plan));
}
