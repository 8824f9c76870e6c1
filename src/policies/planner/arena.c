/* SPDX-License-Identifier: MIT */
/*
 * The planner's arena: one contiguous range of offsets split into chunks kept in address order
 * with boundary links (so a released chunk merges with free neighbours in O(1)), the free ones
 * indexed by (size, offset) for best fit and by offset for placing a chunk at a planned offset.
 * The rules are those of `bestfit` (best-fit.c): smallest fit, lowest offset on ties, taken from
 * the chunk's low end, immediate coalescing.
 */
#include <glib.h>

#include <string.h>

#include "planner.h"

static gint
chunk_by_size(gconstpointer a, gconstpointer b, gpointer data)
{
    const PlannerChunk *x = a;
    const PlannerChunk *y = b;
    int c = fsim_compare_u64(x->size, y->size);

    (void)data;
    return c != 0 ? c : fsim_compare_u64(x->offset, y->offset);
}

static void
arena_index(PlannerArena *arena, PlannerChunk *chunk)
{
    g_tree_insert(arena->by_size, chunk, chunk);
    g_tree_insert(arena->by_offset, chunk, chunk);
}

static void
arena_unindex(PlannerArena *arena, PlannerChunk *chunk)
{
    g_tree_remove(arena->by_size, chunk);
    g_tree_remove(arena->by_offset, chunk);
}

void
planner_arena_init(PlannerArena *arena, uint64_t size)
{
    memset(arena, 0, sizeof(*arena));
    arena->size = size;
    arena->by_size = g_tree_new_full(chunk_by_size, NULL, NULL, NULL);
    /* by the chunk's first member, its offset */
    arena->by_offset = g_tree_new_full(fsim_addr_compare, NULL, NULL, NULL);
    arena->first = g_new0(PlannerChunk, 1);
    arena->first->size = size;
    arena->first->free = TRUE;
    arena_index(arena, arena->first);
}

void
planner_arena_clear(PlannerArena *arena)
{
    PlannerChunk *chunk = arena->first;

    while (chunk != NULL) {
        PlannerChunk *next = chunk->next;

        g_free(chunk);
        chunk = next;
    }
    g_tree_destroy(arena->by_size);
    g_tree_destroy(arena->by_offset);
    memset(arena, 0, sizeof(*arena));
}

PlannerChunk *
planner_arena_find(const PlannerArena *arena, uint64_t size)
{
    PlannerChunk probe = {.offset = 0, .size = size};
    GTreeNode *node = g_tree_lower_bound(arena->by_size, &probe);

    return node != NULL ? g_tree_node_key(node) : NULL;
}

/* Split @chunk (out of the indexes) after @size bytes; the rest is free and indexed. */
static void
arena_split(PlannerArena *arena, PlannerChunk *chunk, uint64_t size)
{
    PlannerChunk *rest = g_new0(PlannerChunk, 1);

    rest->offset = chunk->offset + size;
    rest->size = chunk->size - size;
    rest->free = TRUE;
    rest->prev = chunk;
    rest->next = chunk->next;
    if (chunk->next != NULL)
        chunk->next->prev = rest;
    chunk->next = rest;
    chunk->size = size;
    arena_index(arena, rest);
    arena->num_splits++;
}

PlannerChunk *
planner_arena_take(PlannerArena *arena, PlannerChunk *chunk, uint64_t size)
{
    g_assert(chunk->free && chunk->size >= size);
    arena_unindex(arena, chunk);
    if (chunk->size > size)
        arena_split(arena, chunk, size);
    chunk->free = FALSE;
    arena->used_bytes += chunk->size;
    return chunk;
}

PlannerChunk *
planner_arena_carve(PlannerArena *arena, uint64_t offset, uint64_t size)
{
    PlannerChunk probe = {.offset = offset};
    GTreeNode *node = g_tree_upper_bound(arena->by_offset, &probe);
    PlannerChunk *chunk;

    /* the last free chunk starting at or below @offset */
    node = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(arena->by_offset);
    if (node == NULL)
        return NULL;
    chunk = g_tree_node_key(node);
    if (offset + size > chunk->offset + chunk->size)
        return NULL;
    if (chunk->offset < offset) {
        arena_unindex(arena, chunk);
        arena_split(arena, chunk, offset - chunk->offset);
        arena_index(arena, chunk);
        chunk = chunk->next;
    }
    return planner_arena_take(arena, chunk, size);
}

static void
arena_merge(PlannerArena *arena, PlannerChunk *left, PlannerChunk *right)
{
    left->size += right->size;
    left->next = right->next;
    if (right->next != NULL)
        right->next->prev = left;
    g_free(right);
    arena->num_merges++;
}

void
planner_arena_release(PlannerArena *arena, PlannerChunk *chunk)
{
    g_assert(!chunk->free);
    arena->used_bytes -= chunk->size;
    chunk->free = TRUE;
    if (chunk->next != NULL && chunk->next->free) {
        arena_unindex(arena, chunk->next);
        arena_merge(arena, chunk, chunk->next);
    }
    if (chunk->prev != NULL && chunk->prev->free) {
        PlannerChunk *prev = chunk->prev;

        arena_unindex(arena, prev);
        arena_merge(arena, prev, chunk);
        chunk = prev;
    }
    arena_index(arena, chunk);
}

uint64_t
planner_arena_largest_free(const PlannerArena *arena, uint64_t limit)
{
    uint64_t largest = 0;

    for (GTreeNode *node = g_tree_node_last(arena->by_size); node != NULL;
         node = g_tree_node_previous(node)) {
        const PlannerChunk *chunk = g_tree_node_key(node);

        if (chunk->offset < limit)
            largest = MAX(largest, MIN(chunk->offset + chunk->size, limit) - chunk->offset);
        if (chunk->offset + chunk->size <= limit || chunk->size <= largest)
            break; /* every later candidate is smaller */
    }
    return largest;
}

gboolean
planner_arena_check(const PlannerArena *arena, GError **error)
{
    uint64_t offset = 0;
    uint64_t used = 0;
    guint n_free = 0;

    for (const PlannerChunk *chunk = arena->first; chunk != NULL; chunk = chunk->next) {
        if (chunk->offset != offset || chunk->size == 0 ||
            (chunk->next != NULL && chunk->next->prev != chunk)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "chunk at offset %" G_GUINT64_FORMAT " breaks the arena's chain",
                        chunk->offset);
            return FALSE;
        }
        if (chunk->free) {
            n_free++;
            if ((chunk->next != NULL && chunk->next->free) ||
                g_tree_lookup(arena->by_size, chunk) != chunk ||
                g_tree_lookup(arena->by_offset, chunk) != chunk) {
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                            "free chunk at offset %" G_GUINT64_FORMAT
                            " not coalesced or not indexed",
                            chunk->offset);
                return FALSE;
            }
        } else {
            used += chunk->size;
        }
        offset += chunk->size;
    }
    if (offset != arena->size || used != arena->used_bytes ||
        n_free != (guint)g_tree_nnodes(arena->by_size) ||
        n_free != (guint)g_tree_nnodes(arena->by_offset)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "arena accounting mismatch: %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
                    " bytes, %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT " used, %u free chunks",
                    offset, arena->size, used, arena->used_bytes, n_free);
        return FALSE;
    }
    return TRUE;
}
