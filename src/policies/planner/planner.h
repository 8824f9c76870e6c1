/* SPDX-License-Identifier: MIT */
/*
 * The planner's private parts: its arena (free space of one contiguous range, indexed by size and
 * by offset, with immediate coalescing) and the offline plan built from the run's lifetimes.
 */
#pragma once

#include <glib.h>

#include "fragsim/plan.h"
#include "fragsim/types.h"

#include "core/addr-map.h"
#include "core/chunk-list.h"

/* ---- arena.c -------------------------------------------------------------------------------- */

/* The planner's arena: a chunk list (core/chunk-list.h) of one run, its chunks by offset.  The
 * rules are those of `bestfit` (best-fit.c), whose list it is: smallest fit, lowest offset on ties,
 * taken from the chunk's low end, immediate coalescing.  A chunk is placed at a planned offset by
 * best fit while the best fit lands there (always, when the plan is the time order's and the run
 * follows it); from the first planned offset it does not, the free chunks are indexed by offset
 * too, to carve the chunk holding it.
 *
 * Following the time order's plan, the arena may also run unindexed (unindexed.c): the free
 * chunks in no index, each planned offset found as the start of the free chunk after the taken
 * one that ends there, and the largest free chunk kept apart.  Whatever it cannot do that
 * way (a planned offset not at such a chunk's start, a best fit) indexes the free chunks again
 * first and is done as above, so the arena's chunks are the same either way. */
typedef FsimChunk PlannerChunk;

/* Unindexed, the largest free chunk but the last (unindexed.c), kept apart from the arena so
 * that a query through a const arena may walk and keep it. */
typedef struct {
    uint64_t size;        /* the largest, or when stale a bound on it */
    gboolean stale;       /* a chunk of that size went */
    gboolean over_budget; /* the walks cost too much: index again */
    uint64_t walked;      /* chunks walked by the queries */
    uint64_t ops;         /* takes and releases */
} PlannerLargest;

typedef struct {
    FsimChunkList chunks;
    uint64_t size;
    PlannerChunk *first;
    uint64_t used_bytes;
    /* unindexed only */
    gboolean unindexed;
    FsimAddrMap taken_ends;  /* the taken chunks by end offset */
    PlannerLargest *largest; /* the largest free chunk but the last */
    PlannerChunk *last;      /* the arena's last chunk */
} PlannerArena;

void planner_arena_init(PlannerArena *arena, uint64_t size);
void planner_arena_clear(PlannerArena *arena);
/* The smallest free chunk of at least @size bytes, lowest offset on ties (@cursor: its place, for
 * planner_arena_take()); NULL when none.  An unindexed arena is indexed first. */
PlannerChunk *planner_arena_find(PlannerArena *arena, uint64_t size, FsimSizeCursor *cursor);
/* Take @size bytes from the low end of the free chunk @chunk found at @cursor. */
PlannerChunk *planner_arena_take(PlannerArena *arena, PlannerChunk *chunk,
                                 const FsimSizeCursor *cursor, uint64_t size);
/* Take [@offset, @offset + @size) when it lies in one free chunk; NULL otherwise. */
PlannerChunk *planner_arena_carve(PlannerArena *arena, uint64_t offset, uint64_t size);
/* Give a taken chunk back, merging it with free neighbours. */
void planner_arena_release(PlannerArena *arena, PlannerChunk *chunk);
/* The largest free chunk below @limit, as fsim_chunk_list_largest_below(). */
uint64_t planner_arena_largest_below(const PlannerArena *arena, uint64_t limit);
gboolean planner_arena_check(const PlannerArena *arena, GError **error);

/* ---- unindexed.c ---------------------------------------------------------------------------- */

/* Take the free chunks out of the index (the arena's chunks may all be taken). */
void planner_arena_unindex(PlannerArena *arena);
/* Index them again. */
void planner_arena_reindex(PlannerArena *arena);
/* Unindexed: take [@offset, @offset + @size) from the low end of the free chunk starting at
 * @offset after a taken chunk ending there (or the arena's first); NULL when there is none, or
 * when the arena should be indexed again. */
PlannerChunk *planner_unindexed_take(PlannerArena *arena, uint64_t offset, uint64_t size);
void planner_unindexed_release(PlannerArena *arena, PlannerChunk *chunk);
uint64_t planner_unindexed_largest_below(const PlannerArena *arena, uint64_t limit);
gboolean planner_unindexed_check(const PlannerArena *arena, GError **error);

/* ---- plan.c --------------------------------------------------------------------------------- */

typedef enum {
    PLANNER_ORDER_TIME,          /* allocation order, best fit: what `bestfit` does online */
    PLANNER_ORDER_SIZE,          /* TFLite greedy by size: whole-run first, size desc, first use */
    PLANNER_ORDER_SIZE_LIFETIME, /* XLA spatial: size desc, longer lifetime first, then order */
    PLANNER_ORDER_LIFETIME_SIZE, /* XLA temporal: lifetime desc, then size desc */
    PLANNER_ORDER_COUNT,
} PlannerOrder;

/**
 * PlannerPlan:
 * @offsets: per lifetime, where it goes, or %FSIM_PLAN_UNPLACED (it would not fit: an OOM).
 * @sizes: per lifetime, its size rounded to the alignment.
 * @arena_bytes: the plan's high-water mark.
 * @unplaced: how many it leaves out.
 * @order: the order kept.
 * @arena_by_order: each order's high-water mark, 0 when it was not completed (work limit).
 */
typedef struct {
    uint64_t *offsets;
    uint64_t *sizes;
    gsize n;
    uint64_t arena_bytes;
    uint64_t unplaced;
    PlannerOrder order;
    uint64_t arena_by_order[PLANNER_ORDER_COUNT];
    uint64_t unplaced_by_order[PLANNER_ORDER_COUNT];
} PlannerPlan;

/**
 * planner_plan_build:
 * @lifetimes: the run's allocations.
 * @alignment: sizes are rounded up to it (a power of two).
 * @capacity: the device's capacity: the time-order plan is best fit in bestfit's arena
 *     (fsim_chunk_arena_bytes()), with pages of @granularity mapped as its top rises and refused
 *     beyond @capacity, exactly as `bestfit` runs; an allocation of another order placed beyond
 *     @capacity is left out.
 * @granularity: the device's page size.
 * @work_limit: the greedy orders give up after looking at this many placed neighbours.
 * @plan: (out caller-allocates): the best plan: fewest allocations left out, then smallest
 *     high-water mark, then the first order.
 */
void planner_plan_build(const FsimLifetimes *lifetimes, uint64_t alignment, uint64_t capacity,
                        uint64_t granularity, uint64_t work_limit, PlannerPlan *plan);
void planner_plan_clear(PlannerPlan *plan);
/* The placement checker on @plan, its error prefixed with the order's name (the time order's
 * places only under @paranoid: they cannot overlap). */
gboolean planner_plan_check(const FsimLifetimes *lifetimes, const PlannerPlan *plan,
                            gboolean paranoid, GError **error);

/* ---- greedy.c ------------------------------------------------------------------------------- */

/* Place every lifetime in @order (not the time order) in @offsets; FALSE, with @offsets partly
 * written, when the work limit was reached. */
gboolean planner_plan_greedy(const FsimLifetimes *lifetimes, const uint64_t *sizes,
                             PlannerOrder order, uint64_t work_limit, uint64_t *offsets);
/* The neighbours every greedy order looks at when it completes (the same in each: the pairs of
 * overlapping lifetimes), counted until they pass @limit: above @limit, every greedy order would
 * give up at the work limit @limit. */
uint64_t planner_greedy_work(const FsimLifetimes *lifetimes, uint64_t limit);
const char *planner_order_name(PlannerOrder order);
