/* SPDX-License-Identifier: MIT */
/*
 * Chunk lists: the coalescing heap that bestfit, bfc, async and the planner's arena each keep.
 * A run of memory (an arena, a region) is cut into chunks kept in address order with boundary
 * links, so a released chunk merges with free neighbours in O(1); the free chunks of every run
 * of a list are indexed together by (size, start) in a size set (size-set.h), so a best fit is
 * its lower bound: the smallest chunk that fits, the lowest start on ties.  A chunk is taken
 * from its low end; what is left stays free and takes the chunk's place in the index, in place
 * when its order allows (a free chunk shrunk or grown a little keeps its neighbours in the
 * index).  Records come from a slab, so a split or a merge allocates nothing once warm.
 *
 * A policy's chunk record begins with an FsimChunk and may carry more after it (bfc its
 * region, async its stream): a split copies the whole record into the new chunk.  Chunks never
 * merge across runs: each run's list begins at its own first chunk, which no split or merge
 * replaces.  A list may also index its free chunks by start alone (the planner places a chunk at
 * a planned offset): fsim_chunk_list_init_by_start().
 */
#pragma once

#include <glib.h>

#include <stdint.h>

#include "fragsim/policy.h"
#include "fragsim/types.h"

#include "size-set.h"
#include "slab.h"

G_BEGIN_DECLS

typedef struct FsimChunk FsimChunk;
struct FsimChunk {
    uint64_t start; /* an address or an offset */
    uint64_t size;
    FsimChunk *prev; /* address-order neighbours in the run */
    FsimChunk *next;
    gboolean free; /* free and indexed */
};

typedef struct {
    FsimSizeSet free;      /* free chunks by (size, start) */
    FsimSizeSet *by_start; /* free chunks by start (size 0), or NULL */
    FsimSlab records;
    uint64_t num_splits;
    uint64_t num_merges;
} FsimChunkList;

/* A list of records of @record_size bytes (at least an FsimChunk's). */
void fsim_chunk_list_init(FsimChunkList *list, gsize record_size);
/* The same, with the free chunks also indexed by start (fsim_chunk_list_carve()). */
void fsim_chunk_list_init_by_start(FsimChunkList *list, gsize record_size);
/* Free every record and the indexes. */
void fsim_chunk_list_clear(FsimChunkList *list);

/* A new run [start, start + size): its one chunk, free and indexed (the rest of the record 0). */
FsimChunk *fsim_chunk_list_add_run(FsimChunkList *list, uint64_t start, uint64_t size);
/* Drop the run whose only chunk is the free @first (out of the index, its record freed). */
void fsim_chunk_list_drop_run(FsimChunkList *list, FsimChunk *first);
/* Give back every record of the run beginning at @first (for a policy destroying a run whose
 * chunks are not indexed any more, or the whole list: fsim_chunk_list_clear() does that). */
void fsim_chunk_list_free_run(FsimChunkList *list, FsimChunk *first);

/* The best fit for @size: the smallest free chunk of at least @size bytes, the lowest start on
 * ties, and its place in the index (@cursor, for fsim_chunk_list_take()); NULL when none. */
static inline FsimChunk *
fsim_chunk_list_best_fit(const FsimChunkList *list, uint64_t size, FsimSizeCursor *cursor)
{
    return fsim_size_set_lower_bound(&list->free, size, 0, cursor);
}

/* Cut @chunk after @size bytes (less than its size): the new chunk after it, a copy of its record
 * for the rest, is returned, not indexed. */
FsimChunk *fsim_chunk_list_split(FsimChunkList *list, FsimChunk *chunk, uint64_t size);
/* Merge @right, @left's successor and out of the index, into @left: @right's record is freed. */
void fsim_chunk_list_merge(FsimChunkList *list, FsimChunk *left, FsimChunk *right);
/* Take the first @size bytes of the free @chunk found at @cursor: it leaves the index, and the
 * rest, when there is one, stays free and indexed. */
void fsim_chunk_list_take(FsimChunkList *list, FsimChunk *chunk, const FsimSizeCursor *cursor,
                          uint64_t size);
/* Take [@start, @start + @size) out of the free @chunk found at @cursor, which holds it: the
 * chunk taken; free parts on either side stay free and indexed. */
FsimChunk *fsim_chunk_list_take_at(FsimChunkList *list, FsimChunk *chunk,
                                   const FsimSizeCursor *cursor, uint64_t start, uint64_t size);
/* Take [start, start + size) when it lies in one free chunk (by_start lists): that chunk, or NULL.
 * Free parts on either side stay free. */
FsimChunk *fsim_chunk_list_carve(FsimChunkList *list, uint64_t start, uint64_t size);
/* Make the taken @chunk free, merge it with its free neighbours and index it: the chunk it
 * became part of. */
FsimChunk *fsim_chunk_list_release(FsimChunkList *list, FsimChunk *chunk);

/* Index the free @chunk / take it out of the index (for a policy's own states, async's pending
 * chunks: a chunk out of the index is not free). */
void fsim_chunk_list_index(FsimChunkList *list, FsimChunk *chunk);
void fsim_chunk_list_unindex(FsimChunkList *list, FsimChunk *chunk);

/* The largest free chunk below @limit, counting only its part below @limit (an arena mapped up to
 * @limit, whose top chunk runs beyond it). */
uint64_t fsim_chunk_list_largest_below(const FsimChunkList *list, uint64_t limit);

/* The size of the largest free chunk, 0 when none. */
static inline uint64_t
fsim_chunk_list_largest(const FsimChunkList *list)
{
    FsimSizeCursor cursor;
    const FsimChunk *last = fsim_size_set_last(&list->free, &cursor);

    return last != NULL ? last->size : 0;
}

/* Check the run beginning at @first: chunks consecutive from @start and ending at @end, none
 * empty, linked both ways, the free ones coalesced and indexed.  Adds the bytes of the chunks
 * not free to @used and counts the free ones in @n_free. */
gboolean fsim_chunk_list_check_run(const FsimChunkList *list, const FsimChunk *first,
                                   uint64_t start, uint64_t end, uint64_t *used, gsize *n_free,
                                   GError **error);
/* Check the index: its own invariants, and @n_free entries (the free chunks of every run). */
gboolean fsim_chunk_list_check_index(const FsimChunkList *list, gsize n_free, GError **error);

/* Hand @chunk out as the block @out, at @base + its start (@base 0 for a list by address). */
static inline void
fsim_chunk_hand_out(FsimChunk *chunk, FsimAddr base, FsimBlock *out)
{
    out->addr = base + chunk->start;
    out->size = chunk->size;
    out->cookie = (uint64_t)(uintptr_t)chunk;
}

/* The chunk a block handed out by fsim_chunk_hand_out() comes back as: taken, of its size. */
static inline FsimChunk *
fsim_chunk_handed_back(const FsimBlock *block)
{
    FsimChunk *chunk = (FsimChunk *)(uintptr_t)block->cookie;

    g_assert(chunk != NULL && !chunk->free && chunk->size == block->size);
    return chunk;
}

/* The address space of an arena of one run whose pages are mapped from its start up to a
 * mapped end as its top rises and never unmapped (bestfit, the planner): twice the device's
 * @capacity and at least 32 TiB, in whole pages of @granularity.  The untouched top of the arena
 * is then larger than any free chunk below it, so a best fit takes it only when nothing else fits
 * (as RMM's pool grows only then), and the decisions do not depend on the capacity until the
 * device refuses a page: needed_bytes (src/analysis/needed.c) relies on that. */
static inline uint64_t
fsim_chunk_arena_bytes(uint64_t capacity, uint64_t granularity)
{
    uint64_t size = MAX((uint64_t)1 << 45, 2 * capacity);

    return (size + granularity - 1) / granularity * granularity;
}

gboolean fsim_chunk_arena_grow(FsimDevice *device, FsimAddr base, uint64_t *mapped_end,
                               uint64_t end);

/* Map the pages of such an arena at @base that lie below @end and not below *@mapped_end, and
 * move *@mapped_end up to them.  FALSE (nothing mapped) when the device refuses them. */
static inline gboolean
fsim_chunk_arena_map_to(FsimDevice *device, FsimAddr base, uint64_t *mapped_end, uint64_t end)
{
    return end <= *mapped_end || fsim_chunk_arena_grow(device, base, mapped_end, end);
}

/* Such an arena's statistics, @used bytes of it taken... */
void fsim_chunk_list_arena_stats(const FsimChunkList *list, uint64_t mapped_end, uint64_t used,
                                 FsimPolicyStats *out);
/* ... and what explain sees of it: one segment at @base, the mapped part, in pages of
 * @page_size, and the chunks from @first cut at the mapped end; nothing releasable. */
void fsim_chunk_list_describe_arena(const FsimChunk *first, FsimAddr base, uint64_t mapped_end,
                                    uint64_t page_size, const FsimPolicyVisitor *visitor,
                                    gpointer data);

/* A failed invariant check: @error set to "@noun at @at " and the formatted rest; FALSE. */
gboolean fsim_check_fail(GError **error, const char *noun, uint64_t at, const char *format, ...)
    G_GNUC_PRINTF(4, 5);

G_END_DECLS
