/* SPDX-License-Identifier: MIT */
/*
 * The planner's arena over a chunk list (core/chunk-list.h), with the bytes in use counted.
 */
#include <glib.h>

#include <string.h>

#include "planner.h"

void
planner_arena_init(PlannerArena *arena, uint64_t size)
{
    memset(arena, 0, sizeof(*arena));
    arena->size = size;
    fsim_chunk_list_init(&arena->chunks, sizeof(PlannerChunk));
    arena->first = fsim_chunk_list_add_run(&arena->chunks, 0, size);
}

void
planner_arena_clear(PlannerArena *arena)
{
    if (arena->unindexed) {
        fsim_addr_map_clear(&arena->taken_ends);
        g_free(arena->largest);
    }
    fsim_chunk_list_clear(&arena->chunks);
    memset(arena, 0, sizeof(*arena));
}

PlannerChunk *
planner_arena_find(PlannerArena *arena, uint64_t size, FsimSizeCursor *cursor)
{
    if (G_UNLIKELY(arena->unindexed))
        planner_arena_reindex(arena);
    return fsim_chunk_list_best_fit(&arena->chunks, size, cursor);
}

PlannerChunk *
planner_arena_take(PlannerArena *arena, PlannerChunk *chunk, const FsimSizeCursor *cursor,
                   uint64_t size)
{
    g_assert(chunk->free && chunk->size >= size);
    fsim_chunk_list_take(&arena->chunks, chunk, cursor, size);
    arena->used_bytes += chunk->size;
    return chunk;
}

/* Index the free chunks by offset from now on (as fsim_chunk_list_init_by_start() does from the
 * start). */
static void
planner_arena_index_by_start(PlannerArena *arena)
{
    FsimChunkList *list = &arena->chunks;

    list->by_start = g_new0(FsimSizeSet, 1);
    fsim_size_set_init(list->by_start);
    for (PlannerChunk *chunk = arena->first; chunk != NULL; chunk = chunk->next) {
        if (chunk->free)
            fsim_size_set_insert(list->by_start, 0, chunk->start, chunk);
    }
}

PlannerChunk *
planner_arena_carve(PlannerArena *arena, uint64_t offset, uint64_t size)
{
    PlannerChunk *chunk;

    if (arena->unindexed) {
        chunk = planner_unindexed_take(arena, offset, size);
        if (chunk != NULL)
            return chunk;
        planner_arena_reindex(arena); /* the run left the plan */
    }
    if (arena->chunks.by_start == NULL) {
        FsimSizeCursor cursor;

        /* the best fit starts there: the chunk that holds it, taken from its low end as a carve
         * takes it */
        chunk = planner_arena_find(arena, size, &cursor);
        if (chunk != NULL && chunk->start == offset)
            return planner_arena_take(arena, chunk, &cursor, size);
        planner_arena_index_by_start(arena);
    }
    chunk = fsim_chunk_list_carve(&arena->chunks, offset, size);

    if (chunk != NULL)
        arena->used_bytes += chunk->size;
    return chunk;
}

void
planner_arena_release(PlannerArena *arena, PlannerChunk *chunk)
{
    if (arena->unindexed) {
        planner_unindexed_release(arena, chunk);
        return;
    }
    arena->used_bytes -= chunk->size;
    fsim_chunk_list_release(&arena->chunks, chunk);
}

uint64_t
planner_arena_largest_below(const PlannerArena *arena, uint64_t limit)
{
    return arena->unindexed ? planner_unindexed_largest_below(arena, limit)
                            : fsim_chunk_list_largest_below(&arena->chunks, limit);
}

gboolean
planner_arena_check(const PlannerArena *arena, GError **error)
{
    uint64_t used = 0;
    gsize n_free = 0;

    if (arena->unindexed)
        return planner_unindexed_check(arena, error);

    if (!fsim_chunk_list_check_run(&arena->chunks, arena->first, 0, arena->size, &used, &n_free,
                                   error) ||
        !fsim_chunk_list_check_index(&arena->chunks, n_free, error))
        return FALSE;
    if (used != arena->used_bytes) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "arena accounting mismatch: %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
                    " bytes used",
                    used, arena->used_bytes);
        return FALSE;
    }
    return TRUE;
}
