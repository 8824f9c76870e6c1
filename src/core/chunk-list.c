/* SPDX-License-Identifier: MIT */
#include "chunk-list.h"

#include <glib.h>

#include <string.h>

void
fsim_chunk_list_init(FsimChunkList *list, gsize record_size)
{
    g_return_if_fail(record_size >= sizeof(FsimChunk));
    memset(list, 0, sizeof(*list));
    fsim_size_set_init(&list->free);
    fsim_slab_init(&list->records, record_size, 1024);
}

void
fsim_chunk_list_init_by_start(FsimChunkList *list, gsize record_size)
{
    fsim_chunk_list_init(list, record_size);
    list->by_start = g_new0(FsimSizeSet, 1);
    fsim_size_set_init(list->by_start);
}

void
fsim_chunk_list_clear(FsimChunkList *list)
{
    fsim_slab_clear(&list->records);
    fsim_size_set_clear(&list->free);
    if (list->by_start != NULL) {
        fsim_size_set_clear(list->by_start);
        g_clear_pointer(&list->by_start, g_free);
    }
}

void
fsim_chunk_list_index(FsimChunkList *list, FsimChunk *chunk)
{
    chunk->free = TRUE;
    fsim_size_set_insert(&list->free, chunk->size, chunk->start, chunk);
    if (list->by_start != NULL)
        fsim_size_set_insert(list->by_start, 0, chunk->start, chunk);
}

void
fsim_chunk_list_unindex(FsimChunkList *list, FsimChunk *chunk)
{
    fsim_size_set_erase(&list->free, chunk->size, chunk->start, chunk);
    if (list->by_start != NULL)
        fsim_size_set_erase(list->by_start, 0, chunk->start, chunk);
    chunk->free = FALSE;
}

FsimChunk *
fsim_chunk_list_add_run(FsimChunkList *list, uint64_t start, uint64_t size)
{
    FsimChunk *chunk = fsim_slab_alloc0(&list->records);

    chunk->start = start;
    chunk->size = size;
    fsim_chunk_list_index(list, chunk);
    return chunk;
}

void
fsim_chunk_list_drop_run(FsimChunkList *list, FsimChunk *first)
{
    g_assert(first->free && first->prev == NULL && first->next == NULL);
    fsim_chunk_list_unindex(list, first);
    fsim_slab_free(&list->records, first);
}

void
fsim_chunk_list_free_run(FsimChunkList *list, FsimChunk *first)
{
    while (first != NULL) {
        FsimChunk *next = first->next;

        fsim_slab_free(&list->records, first);
        first = next;
    }
}

/* Out of line only for the policies: the list's own splits inline it. */
static inline FsimChunk *
chunk_split(FsimChunkList *list, FsimChunk *chunk, uint64_t size)
{
    FsimChunk *rest = fsim_slab_alloc(&list->records);
    gsize extra = list->records.record_size - sizeof(FsimChunk);

    g_assert(size < chunk->size);
    /* a copy of the record: the chunk by assignment (inline, its next link with it), a
     * policy's fields after it */
    *rest = *chunk;
    if (extra > 0)
        memcpy(rest + 1, chunk + 1, extra);
    rest->start = chunk->start + size;
    rest->size = chunk->size - size;
    rest->prev = chunk;
    if (chunk->next != NULL)
        chunk->next->prev = rest;
    chunk->next = rest;
    chunk->size = size;
    list->num_splits++;
    return rest;
}

FsimChunk *
fsim_chunk_list_split(FsimChunkList *list, FsimChunk *chunk, uint64_t size)
{
    return chunk_split(list, chunk, size);
}

void
fsim_chunk_list_take(FsimChunkList *list, FsimChunk *chunk, const FsimSizeCursor *cursor,
                     uint64_t size)
{
    chunk->free = FALSE;
    if (list->by_start != NULL)
        fsim_size_set_erase(list->by_start, 0, chunk->start, chunk);
    if (chunk->size > size) {
        FsimChunk *rest = chunk_split(list, chunk, size);

        /* the rest takes the chunk's place in the index, in place where it keeps it */
        rest->free = TRUE;
        fsim_size_set_replace_at(&list->free, cursor, rest->size, rest->start, rest);
        if (list->by_start != NULL)
            fsim_size_set_insert(list->by_start, 0, rest->start, rest);
    } else {
        fsim_size_set_erase_at(&list->free, cursor);
    }
}

FsimChunk *
fsim_chunk_list_take_at(FsimChunkList *list, FsimChunk *chunk, const FsimSizeCursor *cursor,
                        uint64_t start, uint64_t size)
{
    FsimChunk *taken;

    g_assert(chunk->free && start >= chunk->start && start + size <= chunk->start + chunk->size);
    if (start == chunk->start) {
        fsim_chunk_list_take(list, chunk, cursor, size);
        return chunk;
    }
    /* the front stays free and keeps its start: only its size changes in the index */
    taken = chunk_split(list, chunk, start - chunk->start);
    fsim_size_set_replace_at(&list->free, cursor, chunk->size, chunk->start, chunk);
    taken->free = FALSE;
    if (taken->size > size) {
        FsimChunk *rest = chunk_split(list, taken, size);

        fsim_chunk_list_index(list, rest);
    }
    return taken;
}

FsimChunk *
fsim_chunk_list_carve(FsimChunkList *list, uint64_t start, uint64_t size)
{
    FsimSizeCursor cursor;
    FsimChunk *chunk;
    gboolean found;

    g_return_val_if_fail(list->by_start != NULL, NULL);
    /* the last free chunk starting at or below @start */
    if (fsim_size_set_lower_bound(list->by_start, 0, start + 1, &cursor) != NULL)
        chunk = fsim_size_set_prev(list->by_start, &cursor);
    else
        chunk = fsim_size_set_last(list->by_start, &cursor);
    if (chunk == NULL || start + size > chunk->start + chunk->size)
        return NULL;
    found = fsim_size_set_find(&list->free, chunk->size, chunk->start, chunk, &cursor);
    g_assert(found);
    return fsim_chunk_list_take_at(list, chunk, &cursor, start, size);
}

/* Merge @right into @left: both in the same run, @right out of the index. */
static void
chunk_merge(FsimChunkList *list, FsimChunk *left, FsimChunk *right)
{
    left->size += right->size;
    left->next = right->next;
    if (right->next != NULL)
        right->next->prev = left;
    fsim_slab_free(&list->records, right);
    list->num_merges++;
}

void
fsim_chunk_list_merge(FsimChunkList *list, FsimChunk *left, FsimChunk *right)
{
    g_assert(left->next == right);
    chunk_merge(list, left, right);
}

FsimChunk *
fsim_chunk_list_release(FsimChunkList *list, FsimChunk *chunk)
{
    FsimChunk *prev = chunk->prev;

    g_assert(!chunk->free);
    if (chunk->next != NULL && chunk->next->free) {
        fsim_chunk_list_unindex(list, chunk->next);
        chunk_merge(list, chunk, chunk->next);
    }
    if (prev != NULL && prev->free) {
        FsimSizeCursor cursor;
        gboolean found = fsim_size_set_find(&list->free, prev->size, prev->start, prev, &cursor);

        g_assert(found);
        chunk_merge(list, prev, chunk);
        /* prev grows and keeps its start: its entry is replaced, in place where it keeps its
         * place */
        fsim_size_set_replace_at(&list->free, &cursor, prev->size, prev->start, prev);
        return prev;
    }
    fsim_chunk_list_index(list, chunk);
    return chunk;
}

uint64_t
fsim_chunk_list_largest_below(const FsimChunkList *list, uint64_t limit)
{
    FsimSizeCursor cursor;
    uint64_t largest = 0;

    for (const FsimChunk *chunk = fsim_size_set_last(&list->free, &cursor); chunk != NULL;
         chunk = fsim_size_set_prev(&list->free, &cursor)) {
        if (chunk->start < limit)
            largest = MAX(largest, MIN(chunk->start + chunk->size, limit) - chunk->start);
        if (chunk->start + chunk->size <= limit || chunk->size <= largest)
            break; /* every later candidate is smaller */
    }
    return largest;
}

gboolean
fsim_chunk_arena_grow(FsimDevice *device, FsimAddr base, uint64_t *mapped_end, uint64_t end)
{
    uint64_t granularity = device->spec.granularity;
    uint64_t new_end = (end + granularity - 1) / granularity * granularity;

    /* The arena is a multiple of the granularity, so new_end stays inside it. */
    if (fsim_device_map(device, base + *mapped_end, new_end - *mapped_end, granularity) != FSIM_OK)
        return FALSE;
    *mapped_end = new_end;
    return TRUE;
}

void
fsim_chunk_list_arena_stats(const FsimChunkList *list, uint64_t mapped_end, uint64_t used,
                            FsimPolicyStats *out)
{
    out->cached_bytes = mapped_end - used;
    /* Only mapped memory counts: the top chunk beyond mapped_end is not held yet. */
    out->largest_free_block = fsim_chunk_list_largest_below(list, mapped_end);
    out->num_splits = list->num_splits;
    out->num_merges = list->num_merges;
}

void
fsim_chunk_list_describe_arena(const FsimChunk *first, FsimAddr base, uint64_t mapped_end,
                               uint64_t page_size, const FsimPolicyVisitor *visitor, gpointer data)
{
    FsimSegmentView segment = {
        .addr = base, .size = mapped_end, .expandable = TRUE, .page_size = page_size};

    if (mapped_end == 0)
        return;
    visitor->segment(data, &segment);
    for (const FsimChunk *c = first; c != NULL && c->start < mapped_end; c = c->next) {
        FsimBlockView block = {
            .addr = base + c->start, .size = MIN(c->size, mapped_end - c->start), .free = c->free};

        visitor->block(data, &block);
    }
}

gboolean
fsim_check_fail(GError **error, const char *noun, uint64_t at, const char *format, ...)
{
    va_list args;
    g_autofree char *what = NULL;

    va_start(args, format);
    what = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "%s at %#" G_GINT64_MODIFIER "x %s", noun, at,
                what);
    return FALSE;
}

gboolean
fsim_chunk_list_check_run(const FsimChunkList *list, const FsimChunk *first, uint64_t start,
                          uint64_t end, uint64_t *used, gsize *n_free, GError **error)
{
    uint64_t at = start;

    if (first == NULL || first->prev != NULL)
        return fsim_check_fail(error, "chunk", start, "begins a run with a broken chain");
    for (const FsimChunk *chunk = first; chunk != NULL; chunk = chunk->next) {
        FsimSizeCursor cursor;

        if (chunk->start != at || chunk->size == 0 ||
            (chunk->next != NULL && chunk->next->prev != chunk))
            return fsim_check_fail(error, "chunk", chunk->start, "breaks its run's chain");
        if (!chunk->free) {
            *used += chunk->size;
        } else if ((chunk->next != NULL && chunk->next->free) ||
                   !fsim_size_set_find(&list->free, chunk->size, chunk->start, chunk, &cursor) ||
                   (list->by_start != NULL &&
                    !fsim_size_set_find(list->by_start, 0, chunk->start, chunk, &cursor))) {
            return fsim_check_fail(error, "chunk", chunk->start,
                                   "is free but not coalesced or not indexed");
        } else {
            (*n_free)++;
        }
        at += chunk->size;
    }
    if (at != end)
        return fsim_check_fail(
            error, "chunk", start,
            "begins a run its chunks do not cover (they end at %#" G_GINT64_MODIFIER "x)", at);
    return TRUE;
}

gboolean
fsim_chunk_list_check_index(const FsimChunkList *list, gsize n_free, GError **error)
{
    const char *broken = fsim_size_set_check(&list->free);

    if (broken == NULL && list->by_start != NULL)
        broken = fsim_size_set_check(list->by_start);
    if (broken != NULL) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "free index: %s", broken);
        return FALSE;
    }
    if (list->free.count != n_free || (list->by_start != NULL && list->by_start->count != n_free)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "%" G_GSIZE_FORMAT " free chunks, %" G_GSIZE_FORMAT " indexed", n_free,
                    list->free.count);
        return FALSE;
    }
    return TRUE;
}
