/* SPDX-License-Identifier: MIT */
/*
 * gmlake: GMLake's caching allocator with virtual memory stitching.
 *
 * Source: Guo et al., "GMLake: Efficient and Transparent GPU Memory Defragmentation for
 * Large-scale DNN Training with Virtual Memory Stitching", ASPLOS 2024, and its implementation,
 * intelligent-machine-learning/glake GMLake/src/CUDACachingAllocator.cpp (a fork of PyTorch 2.0's
 * allocator) with GMLake/include/cuda_vmm_allocator.h.  The rules modelled:
 *
 *   sizes      PyTorch's: below 512 B -> 512, else up to a multiple of 512; above 1 MiB up to a
 *              multiple of 2 MiB (the VMM granularity).  Requests of at most 1 MiB use PyTorch's
 *              unchanged small pool: 2 MiB cudaMalloc segments, split when 512 B or more is left.
 *   pBlocks    a primitive block is a segment of physical 2 MiB chunks mapped into one reserved
 *              virtual range: 20 MiB for requests under 10 MiB, else the request itself.  It is
 *              split like PyTorch's large blocks (when 2 MiB or more is left) and its pieces merge
 *              back with free neighbours.  Best fit on (stream, size, address).
 *   sBlocks    a stitched block is a new virtual range mapping pieces of free pBlocks: when no
 *              pBlock fits a large request of at least frag_limit (GMLake's fragLimit), the free
 *              pBlocks of the stream are taken largest first until they cover it, the last one
 *              split so that only the pieces needed are glued.  No new physical memory.
 *   reuse      a freed sBlock stays cached (its virtual range, mapping the same pieces); it is
 *              reused for a request when no pBlock fits, if all its pieces are still free, it is
 *              at least the request and at most 10 times it (reuseLimit), smallest first.
 *   order      best-fit pBlock -> cached sBlock / stitch -> a new pBlock (new physical memory) ->
 *              [release the available cached blocks: nothing while max_split_size is unset, as
 *              by default in PyTorch] -> stitch -> release every cached block (garbage collection
 *              of the cached sBlocks first, then the wholly free segments) and retry -> stitch ->
 *              OOM.
 *   empty_cache  the same release: cached sBlocks' virtual ranges, then wholly free segments.
 *
 * What the device model cannot show: an sBlock's cuMemMap calls of chunks that are already
 * backed.  Its virtual range is reserved (va_reserve) and no physical memory is added, which is
 * the point of stitching; its map calls are not charged.  GMLake's partial garbage collection of
 * sBlocks (fragmented ones first, then the oldest) happens here all at once, when everything
 * cached is released.
 *
 * Data structures: the free blocks of each (pool, stream) are kept in the PyTorch model's
 * free-block set (pytorch/free-set.h: size bins with inline keys, the best fit a bitmap word and
 * a short binary search away), blocks come from a slab, and a live stitched block keeps its
 * pieces' blocks, so the hot path allocates no host memory and walks no list.  Only stitching
 * and the reuse of a cached stitched block (requests of at least frag_limit) walk a segment's
 * blocks.
 *
 * describe() (for `explain`): a pBlock is mapped whole and released whole, so it is described as
 * a cudaMalloc'd segment: a free block is releasable when it is its whole segment, else pinned.
 * A live stitched block's pieces are blocks in use inside their segments, each naming the
 * stitched block's address (FsimBlockView.live_addr), which lies outside every segment; a cached
 * stitched block holds only address space and is not described.
 *
 * Knobs:
 *   frag_limit  smallest request that may be stitched (default 512MiB, GMLake's fragLimit)
 *   stitching   false turns GMLake back into PyTorch's allocator on VMM segments
 */
#include <glib.h>

#include "core/chunk-list.h"
#include "core/slab.h"
#include "policies.h"
#include "pytorch/free-set.h"

#define GM_MIN_BLOCK       512u
#define GM_SMALL_SIZE      FSIM_MiB
#define GM_SMALL_BUFFER    (2 * FSIM_MiB)
#define GM_LARGE_BUFFER    (20 * FSIM_MiB)
#define GM_MIN_LARGE_ALLOC (10 * FSIM_MiB)
#define GM_GRANULARITY     (2 * FSIM_MiB)
#define GM_REUSE_LIMIT     10
#define GM_SLAB_CHUNK      1024

typedef enum {
    GM_SMALL = 0,
    GM_LARGE = 1
} GmPool;

typedef struct Stitched Stitched;
typedef struct GmStream GmStream;

/* A block: the model's Block (links, addr, size, BLOCK_ALLOCATED and BLOCK_IN_TREE flags) and
 * the stitched block it is a piece of, when allocated as one. */
typedef struct {
    Block b; /* must be first */
    Stitched *owner;
} GmBlock;

/* The free blocks of one stream: one set per pool. */
struct GmStream {
    uint64_t stream;
    FreeSet free[2];
};

struct Segment {
    FsimAddr addr; /* first: fsim_addr_ptr_compare() sorts them */
    uint64_t size;
    GmStream *stream;
    GmPool pool;
    Block *first;
};

typedef struct {
    Segment *segment;
    uint64_t offset;
    uint64_t size;
    Block *block; /* while the stitched block is allocated: the block that is this piece */
} Piece;

struct Stitched {
    FsimAddr addr;
    uint64_t size;
    uint64_t stream;
    GArray *pieces; /* of Piece */
    gboolean allocated;
};

typedef struct {
    FsimPolicy base; /* must be first */
    uint64_t frag_limit;
    gboolean stitching;
    GPtrArray *streams;  /* GmStream*, owned, in creation order */
    GmStream *last;      /* the stream found last: most requests repeat it */
    GPtrArray *segments; /* Segment*, owned */
    GPtrArray *stitched; /* Stitched*, owned */
    FsimSlab blocks;     /* every GmBlock */
    uint64_t allocated_bytes;
    uint64_t segments_bytes;
    uint64_t num_splits;
    uint64_t num_merges;
    uint64_t num_retries;
    uint64_t stitches;
    uint64_t stitch_reuses;
} Gmlake;

static const FsimKnob gmlake_knobs[] = {
    {"frag_limit", "512MiB", "smallest request that may be stitched (GMLake's fragLimit)"},
    {"stitching", "true", "stitch free blocks into new virtual ranges (false: plain PyTorch)"},
    {NULL, NULL, NULL},
};

FSIM_POLICY_DEFINE_TYPE(Gmlake, gmlake)

static inline gboolean
gm_allocated(const Block *block)
{
    return (block->flags & BLOCK_ALLOCATED) != 0;
}

static inline Stitched *
gm_owner(const Block *block)
{
    return ((const GmBlock *)block)->owner;
}

static inline void
gm_set_owner(Block *block, Stitched *owner)
{
    ((GmBlock *)block)->owner = owner;
}

/* A zeroed block from the slab. */
static Block *
gm_block_new(Gmlake *gm)
{
    GmBlock *block = fsim_slab_alloc0(&gm->blocks);

    return &block->b;
}

static void
gm_block_free(Gmlake *gm, Block *block)
{
    fsim_slab_free(&gm->blocks, block);
}

/* The free sets of @stream, created when missing. */
static GmStream *
gm_stream(Gmlake *gm, uint64_t stream)
{
    GmStream *s;

    if (G_LIKELY(gm->last != NULL && gm->last->stream == stream))
        return gm->last;
    for (guint i = 0; i < gm->streams->len; i++) {
        s = g_ptr_array_index(gm->streams, i);
        if (s->stream == stream)
            return gm->last = s;
    }
    s = g_new0(GmStream, 1);
    s->stream = stream;
    g_ptr_array_add(gm->streams, s);
    return gm->last = s;
}

static void
gm_stream_free(gpointer data)
{
    GmStream *s = data;

    for (int pool = 0; pool < 2; pool++)
        freeset_clear(&s->free[pool]);
    g_free(s);
}

static inline FreeSet *
gm_free_set(const Block *block)
{
    return &block->segment->stream->free[block->segment->pool];
}

static void
stitched_free(gpointer data)
{
    Stitched *stitched = data;

    g_array_unref(stitched->pieces);
    g_free(stitched);
}

/* Take @segment out of the list and give its blocks back to the slab. */
static void
gm_segment_destroy(Gmlake *gm, guint index)
{
    Segment *segment = g_ptr_array_index(gm->segments, index);
    Block *block = segment->first;

    while (block != NULL) {
        Block *next = block->next;

        gm_block_free(gm, block);
        block = next;
    }
    g_ptr_array_remove_index(gm->segments, index);
}

static FsimPolicy *
gmlake_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    g_autofree Gmlake *gm = gmlake_new(device);

    if (!fsim_knob_get_size(gm->base.ops, config, "frag_limit", &gm->frag_limit, error) ||
        !fsim_knob_get_bool(gm->base.ops, config, "stitching", &gm->stitching, error))
        return NULL;
    if (gm->frag_limit == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "gmlake.frag_limit: must be positive");
        return NULL;
    }
    gm->streams = g_ptr_array_new_with_free_func(gm_stream_free);
    gm->segments = g_ptr_array_new_with_free_func(g_free);
    gm->stitched = g_ptr_array_new_with_free_func(stitched_free);
    fsim_slab_init(&gm->blocks, sizeof(GmBlock), GM_SLAB_CHUNK);
    return &g_steal_pointer(&gm)->base;
}

static void
gmlake_destroy(FsimPolicy *self)
{
    Gmlake *gm = gmlake_from_policy(self);

    g_ptr_array_unref(gm->stitched);
    g_ptr_array_unref(gm->segments);
    g_ptr_array_unref(gm->streams);
    fsim_slab_clear(&gm->blocks);
    g_free(gm);
}

static uint64_t
gm_round_size(uint64_t size)
{
    if (size < GM_MIN_BLOCK)
        return GM_MIN_BLOCK;
    size = (size + GM_MIN_BLOCK - 1) / GM_MIN_BLOCK * GM_MIN_BLOCK;
    if (size > GM_SMALL_SIZE)
        size = (size + GM_GRANULARITY - 1) / GM_GRANULARITY * GM_GRANULARITY;
    return size;
}

/* Cut @block (out of the free sets) after @size bytes; the rest is free. */
static void
gm_split(Gmlake *gm, Block *block, uint64_t size)
{
    Block *rest = gm_block_new(gm);

    rest->segment = block->segment;
    rest->addr = block->addr + size;
    rest->size = block->size - size;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != NULL)
        block->next->prev = rest;
    block->next = rest;
    block->size = size;
    freeset_insert(gm_free_set(rest), rest);
    gm->num_splits++;
}

/* Mark @block (out of the free sets) handed out, as a piece of @owner or on its own. */
static void
gm_take(Gmlake *gm, Block *block, Stitched *owner)
{
    block->flags |= BLOCK_ALLOCATED;
    gm_set_owner(block, owner);
    gm->allocated_bytes += block->size;
}

/* Hand out the free @block (out of the free sets) for @size bytes, split as PyTorch would. */
static Block *
gm_use_block(Gmlake *gm, Block *block, uint64_t size)
{
    uint64_t rest = block->size - size;

    if (block->segment->pool == GM_SMALL ? rest >= GM_MIN_BLOCK : rest > GM_SMALL_SIZE)
        gm_split(gm, block, size);
    gm_take(gm, block, NULL);
    return block;
}

/* The best fit of @stream in @pool, (size, address) order, taken out of its set. */
static Block *
gm_best_fit(Gmlake *gm, GmPool pool, uint64_t stream, uint64_t size)
{
    FreeSet *set = &gm_stream(gm, stream)->free[pool];
    FreeCursor cursor;
    Block *block = freeset_lower_bound(set, size, &cursor);

    if (block != NULL)
        freeset_erase_at(set, &cursor);
    return block;
}

/* A new segment of @alloc_size bytes: a cudaMalloc (small pool) or a reserved and mapped range. */
static Block *
gm_new_segment(Gmlake *gm, GmPool pool, uint64_t stream, uint64_t alloc_size)
{
    FsimDevice *device = gm->base.device;
    Segment *segment;
    FsimAddr addr;

    if (pool == GM_SMALL) {
        if (fsim_device_mem_alloc(device, alloc_size, &addr) != FSIM_OK)
            return NULL;
    } else {
        if (alloc_size > fsim_device_free_bytes(device) ||
            fsim_device_va_reserve(device, alloc_size, GM_GRANULARITY, &addr) != FSIM_OK)
            return NULL;
        if (fsim_device_map(device, addr, alloc_size, GM_GRANULARITY) != FSIM_OK) {
            fsim_device_va_release(device, addr, alloc_size);
            return NULL;
        }
    }
    segment = g_new0(Segment, 1);
    segment->addr = addr;
    segment->size = alloc_size;
    segment->stream = gm_stream(gm, stream);
    segment->pool = pool;
    segment->first = gm_block_new(gm);
    segment->first->segment = segment;
    segment->first->addr = addr;
    segment->first->size = alloc_size;
    g_ptr_array_add(gm->segments, segment);
    gm->segments_bytes += fsim_device_round(device, alloc_size);
    return segment->first;
}

/* The block of @segment holding @offset. */
static Block *
gm_block_at(const Segment *segment, uint64_t offset)
{
    Block *block = segment->first;
    FsimAddr addr = segment->addr + offset;

    while (block != NULL && block->addr + block->size <= addr)
        block = block->next;
    return block;
}

/* Whether every piece of @stitched lies in a free block. */
static gboolean
gm_stitched_complete(const Stitched *stitched)
{
    for (guint i = 0; i < stitched->pieces->len; i++) {
        const Piece *piece = &g_array_index(stitched->pieces, Piece, i);
        const Block *block = gm_block_at(piece->segment, piece->offset);
        FsimAddr addr = piece->segment->addr + piece->offset;

        if (block == NULL || gm_allocated(block) || block->addr + block->size < addr + piece->size)
            return FALSE;
    }
    return TRUE;
}

/* Take the piece's range out of the free block holding it, for @owner. */
static void
gm_carve_piece(Gmlake *gm, Piece *piece, Stitched *owner)
{
    Block *block = gm_block_at(piece->segment, piece->offset);
    FsimAddr addr = piece->segment->addr + piece->offset;

    g_assert(block != NULL && !gm_allocated(block));
    freeset_erase(gm_free_set(block), block);
    if (block->addr < addr) {
        /* the block merged with a free neighbour below the piece: that front stays free */
        gm_split(gm, block, addr - block->addr);
        freeset_insert(gm_free_set(block), block);
        block = block->next;
        freeset_erase(gm_free_set(block), block);
    }
    if (block->size > piece->size)
        gm_split(gm, block, piece->size);
    gm_take(gm, block, owner);
    piece->block = block;
}

/* Merge @next, the block after @block, into @block. */
static inline void
gm_merge(Gmlake *gm, Block *block, Block *next)
{
    block->size += next->size;
    block->next = next->next;
    if (next->next != NULL)
        next->next->prev = block;
    gm_block_free(gm, next);
    gm->num_merges++;
}

/* Mark a freed block free, merge it with free neighbours, index it. */
static void
gm_release_block(Gmlake *gm, Block *block)
{
    FreeSet *set = gm_free_set(block);

    gm->allocated_bytes -= block->size;
    block->flags &= ~(uint32_t)BLOCK_ALLOCATED;
    gm_set_owner(block, NULL);
    if (block->next != NULL && !gm_allocated(block->next)) {
        Block *next = block->next;

        freeset_erase(set, next);
        gm_merge(gm, block, next);
    }
    if (block->prev != NULL && !gm_allocated(block->prev)) {
        Block *prev = block->prev;

        freeset_erase(set, prev);
        gm_merge(gm, prev, block);
        block = prev;
    }
    freeset_insert(set, block);
}

/* A cached stitched block for @size on @stream: complete, within the reuse limit, smallest. */
static Stitched *
gm_reuse_stitched(Gmlake *gm, uint64_t stream, uint64_t size)
{
    Stitched *best = NULL;

    for (guint i = 0; i < gm->stitched->len; i++) {
        Stitched *stitched = g_ptr_array_index(gm->stitched, i);

        if (stitched->allocated || stitched->stream != stream || stitched->size < size ||
            stitched->size / GM_REUSE_LIMIT > size ||
            (best != NULL && stitched->size >= best->size) || !gm_stitched_complete(stitched))
            continue;
        best = stitched;
    }
    if (best == NULL)
        return NULL;
    for (guint i = 0; i < best->pieces->len; i++)
        gm_carve_piece(gm, &g_array_index(best->pieces, Piece, i), best);
    best->allocated = TRUE;
    gm->stitch_reuses++;
    return best;
}

/* Stitch free large blocks of @stream, largest first, into a new range of @size bytes. */
static Stitched *
gm_stitch(Gmlake *gm, uint64_t stream, uint64_t size)
{
    g_autoptr(GArray) pieces = g_array_new(FALSE, FALSE, sizeof(Piece));
    const FreeSet *set = &gm_stream(gm, stream)->free[GM_LARGE];
    FreeCursor cursor;
    uint64_t covered = 0;
    Stitched *stitched;
    FsimAddr addr;

    for (Block *block = freeset_last(set, &cursor); block != NULL && covered < size;
         block = freeset_prev(set, &cursor)) {
        Piece piece = {
            .segment = block->segment,
            .offset = block->addr - block->segment->addr,
            .size = MIN(block->size, size - covered),
        };

        covered += piece.size;
        g_array_append_val(pieces, piece);
    }
    if (covered < size || pieces->len < 2)
        return NULL;
    if (fsim_device_va_reserve(gm->base.device, size, GM_GRANULARITY, &addr) != FSIM_OK)
        return NULL;
    stitched = g_new0(Stitched, 1);
    stitched->addr = addr;
    stitched->size = size;
    stitched->stream = stream;
    stitched->pieces = g_steal_pointer(&pieces);
    stitched->allocated = TRUE;
    for (guint i = 0; i < stitched->pieces->len; i++)
        gm_carve_piece(gm, &g_array_index(stitched->pieces, Piece, i), stitched);
    g_ptr_array_add(gm->stitched, stitched);
    gm->stitches++;
    return stitched;
}

static Stitched *
gm_try_stitched(Gmlake *gm, uint64_t stream, uint64_t size)
{
    Stitched *stitched;

    if (!gm->stitching || size < gm->frag_limit)
        return NULL;
    stitched = gm_reuse_stitched(gm, stream, size);
    return stitched != NULL ? stitched : gm_stitch(gm, stream, size);
}

/* Garbage-collect every cached stitched block, then free every wholly free segment. */
static gboolean
gm_release_cached(Gmlake *gm)
{
    FsimDevice *device = gm->base.device;
    gboolean released = FALSE;

    for (guint i = gm->stitched->len; i-- > 0;) {
        Stitched *stitched = g_ptr_array_index(gm->stitched, i);

        if (stitched->allocated)
            continue;
        fsim_device_va_release(device, stitched->addr, stitched->size);
        g_ptr_array_remove_index(gm->stitched, i);
    }
    for (guint i = gm->segments->len; i-- > 0;) {
        Segment *segment = g_ptr_array_index(gm->segments, i);

        if (gm_allocated(segment->first) || segment->first->next != NULL)
            continue;
        freeset_erase(gm_free_set(segment->first), segment->first);
        if (segment->pool == GM_SMALL) {
            fsim_device_mem_free(device, segment->addr, segment->size);
        } else {
            fsim_device_unmap(device, segment->addr, segment->size, GM_GRANULARITY);
            fsim_device_va_release(device, segment->addr, segment->size);
        }
        gm->segments_bytes -= fsim_device_round(device, segment->size);
        gm_segment_destroy(gm, i);
        released = TRUE;
    }
    return released;
}

static void
gm_fill_block(FsimBlock *out, Block *block)
{
    out->addr = block->addr;
    out->size = block->size;
    out->cookie = (uint64_t)(uintptr_t)block;
}

static void
gm_fill_stitched(FsimBlock *out, Stitched *stitched)
{
    out->addr = stitched->addr;
    out->size = stitched->size;
    out->cookie = (uint64_t)(uintptr_t)stitched | 1u; /* tagged: a stitched block */
}

static FsimStatus
gmlake_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    Gmlake *gm = gmlake_from_policy(self);
    uint64_t size = gm_round_size(req->size);
    GmPool pool = size <= GM_SMALL_SIZE ? GM_SMALL : GM_LARGE;
    uint64_t alloc_size = pool == GM_SMALL            ? GM_SMALL_BUFFER
                          : size < GM_MIN_LARGE_ALLOC ? GM_LARGE_BUFFER
                                                      : size;
    Block *block = gm_best_fit(gm, pool, req->stream, size);
    Stitched *stitched = NULL;

    if (block == NULL && pool == GM_LARGE)
        stitched = gm_try_stitched(gm, req->stream, size); /* attempt 0 */
    if (block == NULL && stitched == NULL)
        block = gm_new_segment(gm, pool, req->stream, alloc_size);
    if (block == NULL && stitched == NULL && pool == GM_LARGE)
        stitched = gm_try_stitched(gm, req->stream, size); /* attempt 1 */
    if (block == NULL && stitched == NULL && gm_release_cached(gm)) {
        gm->num_retries++;
        block = gm_new_segment(gm, pool, req->stream, alloc_size);
        if (block == NULL && pool == GM_LARGE)
            stitched = gm_try_stitched(gm, req->stream, size); /* attempt 2 */
    }
    if (stitched != NULL) {
        gm_fill_stitched(out, stitched);
        return FSIM_OK;
    }
    if (block == NULL)
        return FSIM_OOM;
    gm_fill_block(out, gm_use_block(gm, block, size));
    return FSIM_OK;
}

static void
gmlake_dealloc(FsimPolicy *self, const FsimBlock *fblock, FsimTime now)
{
    Gmlake *gm = gmlake_from_policy(self);

    (void)now;
    if ((fblock->cookie & 1u) != 0) {
        Stitched *stitched = (Stitched *)(uintptr_t)(fblock->cookie & ~(uint64_t)1u);

        g_assert(stitched->allocated && stitched->size == fblock->size);
        for (guint i = 0; i < stitched->pieces->len; i++) {
            Piece *piece = &g_array_index(stitched->pieces, Piece, i);
            Block *block = piece->block;

            g_assert(gm_allocated(block) && gm_owner(block) == stitched &&
                     block->size == piece->size);
            piece->block = NULL;
            gm_release_block(gm, block);
        }
        stitched->allocated = FALSE;
        return;
    }
    {
        Block *block = (Block *)(uintptr_t)fblock->cookie;

        g_assert(gm_allocated(block) && gm_owner(block) == NULL && block->size == fblock->size);
        gm_release_block(gm, block);
    }
}

static void
gmlake_empty_cache(FsimPolicy *self, FsimTime now)
{
    (void)now;
    gm_release_cached(gmlake_from_policy(self));
}

static void
gmlake_get_stats(const FsimPolicy *self, FsimPolicyStats *out)
{
    const Gmlake *gm = (const Gmlake *)self;
    uint64_t largest = 0;
    guint cached = 0;

    for (guint i = 0; i < gm->streams->len; i++) {
        const GmStream *s = g_ptr_array_index(gm->streams, i);

        for (int pool = 0; pool < 2; pool++) {
            FreeCursor cursor;
            const Block *last = freeset_last(&s->free[pool], &cursor);

            largest = MAX(largest, last != NULL ? last->size : 0);
        }
    }
    for (guint i = 0; i < gm->stitched->len; i++)
        cached += !((const Stitched *)g_ptr_array_index(gm->stitched, i))->allocated;
    out->cached_bytes = gm->segments_bytes - gm->allocated_bytes;
    out->largest_free_block = largest;
    out->num_splits = gm->num_splits;
    out->num_merges = gm->num_merges;
    out->num_alloc_retries = gm->num_retries;
    fsim_policy_stats_extra(out, "stitches", gm->stitches);
    fsim_policy_stats_extra(out, "stitch_reuses", gm->stitch_reuses);
    fsim_policy_stats_extra(out, "stitched_blocks_cached", cached);
}

/* The segments in address order, then each block: see the header comment. */
static void
gmlake_describe(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data)
{
    const Gmlake *gm = (const Gmlake *)self;
    g_autoptr(GPtrArray) order = g_ptr_array_sized_new(gm->segments->len);

    for (guint i = 0; i < gm->segments->len; i++)
        g_ptr_array_add(order, g_ptr_array_index(gm->segments, i));
    g_ptr_array_sort(order, fsim_addr_ptr_compare); /* by their first member, addr */
    for (guint i = 0; i < order->len; i++) {
        const Segment *segment = g_ptr_array_index(order, i);
        FsimSegmentView view = {
            .addr = segment->addr,
            .size = fsim_device_round(self->device, segment->size),
            .stream = segment->stream->stream,
            .pool = segment->pool == GM_SMALL ? FSIM_POOL_SMALL : FSIM_POOL_LARGE,
        };
        gboolean whole = segment->first->next == NULL;

        visitor->segment(data, &view);
        for (const Block *block = segment->first; block != NULL; block = block->next) {
            FsimBlockView b = {
                .addr = block->addr,
                .size = block->size,
                .free = !gm_allocated(block),
                .releasable = whole && !gm_allocated(block) ? block->size : 0,
                .live_addr = gm_owner(block) != NULL ? gm_owner(block)->addr : 0,
            };

            visitor->block(data, &b);
        }
    }
}

static gboolean
gm_check_segment(const Segment *segment, uint64_t *allocated, gsize *n_free, GError **error)
{
    FsimAddr addr = segment->addr;

    for (const Block *block = segment->first; block != NULL; block = block->next) {
        if (block->addr != addr || block->size == 0 || block->segment != segment ||
            (block->next != NULL && block->next->prev != block))
            return fsim_check_fail(error, "block", block->addr, "breaks its segment's chain");
        if (gm_allocated(block)) {
            *allocated += block->size;
            if (gm_owner(block) != NULL && !gm_owner(block)->allocated)
                return fsim_check_fail(error, "block", block->addr,
                                       "held by a free stitched block");
        } else {
            FreeCursor cursor;

            (*n_free)++;
            if ((block->next != NULL && !gm_allocated(block->next)) ||
                !freeset_find(gm_free_set(block), block, &cursor))
                return fsim_check_fail(error, "block", block->addr,
                                       "is free but not merged or not indexed");
        }
        addr += block->size;
    }
    if (addr != segment->addr + segment->size)
        return fsim_check_fail(error, "block", segment->addr,
                               "starts a segment its blocks do not cover");
    return TRUE;
}

static gboolean
gm_check_stitched(const Stitched *stitched, GError **error)
{
    uint64_t covered = 0;

    for (guint k = 0; k < stitched->pieces->len; k++) {
        const Piece *piece = &g_array_index(stitched->pieces, Piece, k);
        const Block *block = piece->block;

        covered += piece->size;
        if (stitched->allocated &&
            (block == NULL || gm_owner(block) != stitched ||
             block->addr != piece->segment->addr + piece->offset || block->size != piece->size))
            return fsim_check_fail(error, "block", stitched->addr, "(stitched) lost a piece");
    }
    if (covered != stitched->size)
        return fsim_check_fail(error, "block", stitched->addr,
                               "(stitched): pieces of %" G_GUINT64_FORMAT
                               " bytes for %" G_GUINT64_FORMAT,
                               covered, stitched->size);
    return TRUE;
}

static gboolean
gmlake_check(const FsimPolicy *self, GError **error)
{
    const Gmlake *gm = (const Gmlake *)self;
    uint64_t allocated = 0;
    uint64_t reserved = 0;
    gsize n_free = 0;
    gsize indexed = 0;

    for (guint i = 0; i < gm->segments->len; i++) {
        const Segment *segment = g_ptr_array_index(gm->segments, i);

        if (!gm_check_segment(segment, &allocated, &n_free, error))
            return FALSE;
        reserved += fsim_device_round(self->device, segment->size);
    }
    for (guint i = 0; i < gm->stitched->len; i++)
        if (!gm_check_stitched(g_ptr_array_index(gm->stitched, i), error))
            return FALSE;
    for (guint i = 0; i < gm->streams->len; i++) {
        const GmStream *s = g_ptr_array_index(gm->streams, i);

        indexed += freeset_count(&s->free[GM_SMALL]) + freeset_count(&s->free[GM_LARGE]);
    }
    FsimTally tallies[] = {
        {"allocated", allocated, gm->allocated_bytes},
        {"segments", reserved, gm->segments_bytes},
        {"free blocks", n_free, indexed},
    };

    return fsim_policy_check_accounts(self, reserved, tallies, G_N_ELEMENTS(tallies), error);
}

const FsimPolicyOps fsim_policy_gmlake = {
    .name = "gmlake",
    .summary = "GMLake: PyTorch's allocator on VMM with stitching of free blocks (ASPLOS'24)",
    .knobs = gmlake_knobs,
    .create = gmlake_create,
    .destroy = gmlake_destroy,
    .alloc = gmlake_alloc,
    .dealloc = gmlake_dealloc,
    .empty_cache = gmlake_empty_cache,
    .get_stats = gmlake_get_stats,
    .check = gmlake_check,
    .describe = gmlake_describe,
};
