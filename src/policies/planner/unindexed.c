/* SPDX-License-Identifier: MIT */
/*
 * The planner's arena unindexed, to follow the time order's plan (see planner.h).
 *
 * That plan is best fit in allocation order: every planned offset is the start of a free chunk,
 * whose predecessor, when it has one, is a taken chunk ending there (free neighbours are always
 * merged).  A map from the taken chunks' ends to them finds it in O(1), so a run that follows the
 * plan keeps no index of its free chunks by size: a take is a split and a release merges, as in
 * the indexed arena, without the index's searches, insertions and erasures.
 *
 * What the index gave besides is the largest free chunk, for get_stats() (at each new peak and
 * each OOM: rare against the takes and releases).  The last chunk, free up to the arena's end
 * (taken chunks end below the mapped end, and the arena runs far beyond it), is counted apart,
 * as fsim_chunk_list_largest_below() counts only its part below the limit; every other free
 * chunk ends below a taken one.  The largest of those is kept as a bound that is exact until a
 * free chunk of its size is taken or merged away and none as large comes; a query then walks the
 * chunks once.  Should the walks come to cost more than the index would have (a budget per take
 * and release), the arena is indexed again.
 */
#include <glib.h>

#include <string.h>

#include "planner.h"

/* Chunks a query may walk per take or release before the arena is indexed again, and to begin
 * with. */
#define WALK_PER_OP 16
#define WALK_FREE   ((uint64_t)1 << 16)

/* A free chunk with a successor came (or grew): the largest is exact again if it is at least it. */
static inline void
free_came(PlannerArena *arena, PlannerChunk *chunk)
{
    PlannerLargest *largest = arena->largest;

    if (chunk->next == NULL) {
        arena->last = chunk;
    } else if (chunk->size >= largest->size) {
        largest->size = chunk->size;
        largest->stale = FALSE;
    }
}

/* A free chunk with a successor goes (taken, merged away, about to grow): when it was as large
 * as the largest, the largest is only a bound now. */
static inline void
free_went(PlannerArena *arena, const PlannerChunk *chunk)
{
    if (chunk->next != NULL && chunk->size == arena->largest->size)
        arena->largest->stale = TRUE;
}

void
planner_arena_unindex(PlannerArena *arena)
{
    FsimChunkList *list = &arena->chunks;

    g_assert(!arena->unindexed && list->by_start == NULL);
    fsim_addr_map_init(&arena->taken_ends, 10);
    arena->largest = g_new0(PlannerLargest, 1);
    arena->unindexed = TRUE;
    for (PlannerChunk *chunk = arena->first; chunk != NULL; chunk = chunk->next) {
        if (!chunk->free) {
            fsim_addr_map_insert(&arena->taken_ends, chunk->start + chunk->size,
                                 (uint64_t)(uintptr_t)chunk);
            if (chunk->next == NULL)
                arena->last = chunk;
            continue;
        }
        fsim_chunk_list_unindex(list, chunk);
        chunk->free = TRUE;
        free_came(arena, chunk);
    }
}

void
planner_arena_reindex(PlannerArena *arena)
{
    g_assert(arena->unindexed);
    for (PlannerChunk *chunk = arena->first; chunk != NULL; chunk = chunk->next) {
        if (chunk->free)
            fsim_chunk_list_index(&arena->chunks, chunk);
    }
    fsim_addr_map_clear(&arena->taken_ends);
    g_clear_pointer(&arena->largest, g_free);
    arena->last = NULL;
    arena->unindexed = FALSE;
}

PlannerChunk *
planner_unindexed_take(PlannerArena *arena, uint64_t offset, uint64_t size)
{
    PlannerChunk *chunk = arena->first;

    if (G_UNLIKELY(arena->largest->over_budget))
        return NULL;
    if (offset != 0) {
        const FsimAddrSlot *slot = fsim_addr_map_lookup(&arena->taken_ends, offset);

        chunk = slot != NULL ? ((PlannerChunk *)(uintptr_t)slot->value)->next : NULL;
    }
    if (chunk == NULL || !chunk->free || chunk->start != offset || chunk->size < size)
        return NULL;
    free_went(arena, chunk);
    chunk->free = FALSE;
    if (chunk->size > size) {
        PlannerChunk *rest = fsim_chunk_list_split(&arena->chunks, chunk, size);

        rest->free = TRUE;
        free_came(arena, rest);
    }
    arena->used_bytes += chunk->size;
    arena->largest->ops++;
    fsim_addr_map_insert(&arena->taken_ends, chunk->start + chunk->size,
                         (uint64_t)(uintptr_t)chunk);
    return chunk;
}

void
planner_unindexed_release(PlannerArena *arena, PlannerChunk *chunk)
{
    FsimChunkList *list = &arena->chunks;
    PlannerChunk *next = chunk->next;
    PlannerChunk *prev = chunk->prev;

    g_assert(!chunk->free);
    fsim_addr_map_erase(&arena->taken_ends, chunk->start + chunk->size);
    arena->used_bytes -= chunk->size;
    arena->largest->ops++;
    if (next != NULL && next->free) {
        free_went(arena, next);
        fsim_chunk_list_merge(list, chunk, next);
    }
    if (prev != NULL && prev->free) {
        free_went(arena, prev);
        fsim_chunk_list_merge(list, prev, chunk);
        chunk = prev;
    }
    chunk->free = TRUE;
    free_came(arena, chunk);
}

uint64_t
planner_unindexed_largest_below(const PlannerArena *arena, uint64_t limit)
{
    PlannerLargest *largest = arena->largest;
    const PlannerChunk *last = arena->last;
    uint64_t size;

    if (largest->stale) {
        largest->size = 0;
        for (const PlannerChunk *chunk = arena->first; chunk != NULL; chunk = chunk->next) {
            if (chunk->free && chunk->next != NULL)
                largest->size = MAX(largest->size, chunk->size);
            largest->walked++;
        }
        largest->stale = FALSE;
        largest->over_budget = largest->walked > WALK_FREE + WALK_PER_OP * largest->ops;
    }
    size = largest->size;
    if (last->free && last->start < limit)
        size = MAX(size, MIN(last->start + last->size, limit) - last->start);
    return size;
}

/* The chain, as fsim_chunk_list_check_run() checks it, and the unindexed state: every taken
 * chunk in the map by its end, nothing in the index, and the largest free chunk no larger than
 * the bound (equal to it unless stale). */
gboolean
planner_unindexed_check(const PlannerArena *arena, GError **error)
{
    uint64_t at = 0;
    uint64_t used = 0;
    uint64_t largest = 0;
    gsize n_taken = 0;

    for (const PlannerChunk *chunk = arena->first; chunk != NULL; chunk = chunk->next) {
        const FsimAddrSlot *slot;

        if (chunk->start != at || chunk->size == 0 ||
            (chunk->next != NULL && chunk->next->prev != chunk) ||
            (chunk->next == NULL && chunk != arena->last))
            return fsim_check_fail(error, "chunk", chunk->start, "breaks its run's chain");
        at += chunk->size;
        if (!chunk->free) {
            slot = fsim_addr_map_lookup(&arena->taken_ends, at);
            if (slot == NULL || slot->value != (uint64_t)(uintptr_t)chunk)
                return fsim_check_fail(error, "chunk", chunk->start, "is taken but not mapped");
            used += chunk->size;
            n_taken++;
        } else if (chunk->next != NULL && chunk->next->free) {
            return fsim_check_fail(error, "chunk", chunk->start, "is free but not coalesced");
        } else if (chunk->next != NULL) {
            largest = MAX(largest, chunk->size);
        }
    }
    if (at != arena->size || used != arena->used_bytes || n_taken != arena->taken_ends.count ||
        arena->chunks.free.count != 0 || largest > arena->largest->size ||
        (!arena->largest->stale && largest != arena->largest->size)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "unindexed arena: %" G_GUINT64_FORMAT " bytes covered, %" G_GUINT64_FORMAT
                    " used, %" G_GSIZE_FORMAT " taken, largest free %" G_GUINT64_FORMAT
                    " (kept %" G_GUINT64_FORMAT ")",
                    at, used, n_taken, largest, arena->largest->size);
        return FALSE;
    }
    return TRUE;
}
