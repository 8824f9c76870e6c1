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
 * Knobs:
 *   frag_limit  smallest request that may be stitched (default 512MiB, GMLake's fragLimit)
 *   stitching   false turns GMLake back into PyTorch's allocator on VMM segments
 */
#include <glib.h>

#include "policies.h"

#define GM_MIN_BLOCK       512u
#define GM_SMALL_SIZE      FSIM_MiB
#define GM_SMALL_BUFFER    (2 * FSIM_MiB)
#define GM_LARGE_BUFFER    (20 * FSIM_MiB)
#define GM_MIN_LARGE_ALLOC (10 * FSIM_MiB)
#define GM_GRANULARITY     (2 * FSIM_MiB)
#define GM_REUSE_LIMIT     10

typedef enum {
    GM_SMALL = 0,
    GM_LARGE = 1
} GmPool;

typedef struct Segment Segment;
typedef struct Block Block;
typedef struct Stitched Stitched;

struct Block {
    Segment *segment;
    uint64_t offset; /* from the segment's start */
    uint64_t size;
    Block *prev; /* address-order neighbours in the segment */
    Block *next;
    gboolean allocated;
    Stitched *owner; /* when allocated as a piece of a stitched block */
};

struct Segment {
    FsimAddr addr;
    uint64_t size;
    uint64_t stream;
    GmPool pool;
    Block *first;
};

typedef struct {
    Segment *segment;
    uint64_t offset;
    uint64_t size;
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
    GTree *free_blocks[2]; /* Block* by (stream, size, address) */
    GTree *free_by_size;   /* every free Block* by (size, address), for statistics */
    GPtrArray *segments;   /* Segment*, owned */
    GPtrArray *stitched;   /* Stitched*, owned */
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

static Gmlake *
gmlake_from_policy(FsimPolicy *self)
{
    return (Gmlake *)self;
}

static FsimAddr
block_addr(const Block *block)
{
    return block->segment->addr + block->offset;
}

static gint
block_by_stream_size(gconstpointer a, gconstpointer b, gpointer data)
{
    const Block *x = a;
    const Block *y = b;

    (void)data;
    if (x->segment->stream != y->segment->stream)
        return x->segment->stream < y->segment->stream ? -1 : 1;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return block_addr(x) < block_addr(y) ? -1 : block_addr(x) > block_addr(y) ? 1 : 0;
}

static gint
block_by_size(gconstpointer a, gconstpointer b, gpointer data)
{
    const Block *x = a;
    const Block *y = b;

    (void)data;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return block_addr(x) < block_addr(y) ? -1 : block_addr(x) > block_addr(y) ? 1 : 0;
}

static void
gm_insert_free(Gmlake *gm, Block *block)
{
    g_tree_insert(gm->free_blocks[block->segment->pool], block, block);
    g_tree_insert(gm->free_by_size, block, block);
}

static void
gm_remove_free(Gmlake *gm, Block *block)
{
    g_tree_remove(gm->free_blocks[block->segment->pool], block);
    g_tree_remove(gm->free_by_size, block);
}

static void
stitched_free(gpointer data)
{
    Stitched *stitched = data;

    g_array_unref(stitched->pieces);
    g_free(stitched);
}

static void
segment_free(gpointer data)
{
    Segment *segment = data;
    Block *block = segment->first;

    while (block != NULL) {
        Block *next = block->next;

        g_free(block);
        block = next;
    }
    g_free(segment);
}

static FsimPolicy *
gmlake_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    Gmlake *gm;
    uint64_t frag_limit;
    gboolean stitching;

    if (!fsim_knob_get_size(config, "gmlake", "frag_limit", 512 * FSIM_MiB, &frag_limit, error) ||
        !fsim_knob_get_bool(config, "gmlake", "stitching", TRUE, &stitching, error))
        return NULL;
    if (frag_limit == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "gmlake.frag_limit: must be positive");
        return NULL;
    }
    gm = g_new0(Gmlake, 1);
    gm->base.ops = &fsim_policy_gmlake;
    gm->base.device = device;
    gm->frag_limit = frag_limit;
    gm->stitching = stitching;
    for (int pool = 0; pool < 2; pool++)
        gm->free_blocks[pool] = g_tree_new_full(block_by_stream_size, NULL, NULL, NULL);
    gm->free_by_size = g_tree_new_full(block_by_size, NULL, NULL, NULL);
    gm->segments = g_ptr_array_new_with_free_func(segment_free);
    gm->stitched = g_ptr_array_new_with_free_func(stitched_free);
    return &gm->base;
}

static void
gmlake_destroy(FsimPolicy *self)
{
    Gmlake *gm = gmlake_from_policy(self);

    for (int pool = 0; pool < 2; pool++)
        g_tree_destroy(gm->free_blocks[pool]);
    g_tree_destroy(gm->free_by_size);
    g_ptr_array_unref(gm->stitched);
    g_ptr_array_unref(gm->segments);
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
    Block *rest = g_new0(Block, 1);

    rest->segment = block->segment;
    rest->offset = block->offset + size;
    rest->size = block->size - size;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != NULL)
        block->next->prev = rest;
    block->next = rest;
    block->size = size;
    gm_insert_free(gm, rest);
    gm->num_splits++;
}

/* Hand out the free @block (out of the free sets) for @size bytes, split as PyTorch would. */
static Block *
gm_use_block(Gmlake *gm, Block *block, uint64_t size, Stitched *owner)
{
    uint64_t rest = block->size - size;

    if (block->segment->pool == GM_SMALL ? rest >= GM_MIN_BLOCK : rest > GM_SMALL_SIZE)
        gm_split(gm, block, size);
    block->allocated = TRUE;
    block->owner = owner;
    gm->allocated_bytes += block->size;
    return block;
}

static Block *
gm_best_fit(Gmlake *gm, GmPool pool, uint64_t stream, uint64_t size)
{
    Segment key_segment = {.stream = stream};
    Block key = {.segment = &key_segment, .offset = 0, .size = size};
    GTreeNode *node = g_tree_lower_bound(gm->free_blocks[pool], &key);
    Block *block;

    if (node == NULL)
        return NULL;
    block = g_tree_node_key(node);
    if (block->segment->stream != stream)
        return NULL;
    gm_remove_free(gm, block);
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
    segment->stream = stream;
    segment->pool = pool;
    segment->first = g_new0(Block, 1);
    segment->first->segment = segment;
    segment->first->size = alloc_size;
    g_ptr_array_add(gm->segments, segment);
    gm->segments_bytes += fsim_device_round(device, alloc_size);
    return segment->first;
}

/* The block of @segment holding @offset. */
static Block *
gm_block_at(Segment *segment, uint64_t offset)
{
    Block *block = segment->first;

    while (block != NULL && block->offset + block->size <= offset)
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

        if (block == NULL || block->allocated ||
            block->offset + block->size < piece->offset + piece->size)
            return FALSE;
    }
    return TRUE;
}

/* Take the piece's range out of the free block holding it, for @owner. */
static void
gm_carve_piece(Gmlake *gm, const Piece *piece, Stitched *owner)
{
    Block *block = gm_block_at(piece->segment, piece->offset);

    g_assert(block != NULL && !block->allocated);
    gm_remove_free(gm, block);
    if (block->offset < piece->offset) {
        gm_split(gm, block, piece->offset - block->offset);
        block = block->next;
        gm_remove_free(gm, block);
    }
    if (block->size > piece->size)
        gm_split(gm, block, piece->size);
    block->allocated = TRUE;
    block->owner = owner;
    gm->allocated_bytes += block->size;
}

/* Mark a freed block free, merge it with free neighbours, index it. */
static void
gm_release_block(Gmlake *gm, Block *block)
{
    gm->allocated_bytes -= block->size;
    block->allocated = FALSE;
    block->owner = NULL;
    if (block->next != NULL && !block->next->allocated) {
        Block *next = block->next;

        gm_remove_free(gm, next);
        block->size += next->size;
        block->next = next->next;
        if (next->next != NULL)
            next->next->prev = block;
        g_free(next);
        gm->num_merges++;
    }
    if (block->prev != NULL && !block->prev->allocated) {
        Block *prev = block->prev;

        gm_remove_free(gm, prev);
        prev->size += block->size;
        prev->next = block->next;
        if (block->next != NULL)
            block->next->prev = prev;
        g_free(block);
        block = prev;
        gm->num_merges++;
    }
    gm_insert_free(gm, block);
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
    Segment key_segment = {.stream = stream};
    Block key = {.segment = &key_segment, .offset = 0, .size = G_MAXUINT64};
    GTreeNode *node = g_tree_upper_bound(gm->free_blocks[GM_LARGE], &key);
    uint64_t covered = 0;
    Stitched *stitched;
    FsimAddr addr;

    node = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(gm->free_blocks[GM_LARGE]);
    for (; node != NULL && covered < size; node = g_tree_node_previous(node)) {
        Block *block = g_tree_node_key(node);
        Piece piece;

        if (block->segment->stream != stream)
            break;
        piece.segment = block->segment;
        piece.offset = block->offset;
        piece.size = MIN(block->size, size - covered);
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

        if (segment->first->allocated || segment->first->next != NULL)
            continue;
        gm_remove_free(gm, segment->first);
        if (segment->pool == GM_SMALL) {
            fsim_device_mem_free(device, segment->addr, segment->size);
        } else {
            fsim_device_unmap(device, segment->addr, segment->size, GM_GRANULARITY);
            fsim_device_va_release(device, segment->addr, segment->size);
        }
        gm->segments_bytes -= fsim_device_round(device, segment->size);
        g_ptr_array_remove_index(gm->segments, i);
        released = TRUE;
    }
    return released;
}

static void
gm_fill_block(FsimBlock *out, Block *block)
{
    out->addr = block_addr(block);
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
    gm_fill_block(out, gm_use_block(gm, block, size, NULL));
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
            const Piece *piece = &g_array_index(stitched->pieces, Piece, i);
            Block *block = gm_block_at(piece->segment, piece->offset);

            g_assert(block->allocated && block->owner == stitched &&
                     block->offset == piece->offset && block->size == piece->size);
            gm_release_block(gm, block);
        }
        stitched->allocated = FALSE;
        return;
    }
    {
        Block *block = (Block *)(uintptr_t)fblock->cookie;

        g_assert(block->allocated && block->owner == NULL && block->size == fblock->size);
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
    GTreeNode *last = g_tree_node_last(gm->free_by_size);
    guint cached = 0;

    for (guint i = 0; i < gm->stitched->len; i++)
        cached += !((const Stitched *)g_ptr_array_index(gm->stitched, i))->allocated;
    out->cached_bytes = gm->segments_bytes - gm->allocated_bytes;
    out->largest_free_block = last != NULL ? ((const Block *)g_tree_node_key(last))->size : 0;
    out->num_splits = gm->num_splits;
    out->num_merges = gm->num_merges;
    out->num_alloc_retries = gm->num_retries;
    out->extra[0].name = "stitches";
    out->extra[0].value = gm->stitches;
    out->extra[1].name = "stitch_reuses";
    out->extra[1].value = gm->stitch_reuses;
    out->extra[2].name = "stitched_blocks_cached";
    out->extra[2].value = cached;
    out->n_extra = 3;
}

static gboolean
gm_check_segment(const Gmlake *gm, const Segment *segment, uint64_t *allocated, guint *n_free,
                 GError **error)
{
    uint64_t offset = 0;

    for (const Block *block = segment->first; block != NULL; block = block->next) {
        if (block->offset != offset || block->size == 0 || block->segment != segment ||
            (block->next != NULL && block->next->prev != block)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "block at %#" G_GINT64_MODIFIER "x breaks its segment's chain",
                        block_addr(block));
            return FALSE;
        }
        if (block->allocated) {
            *allocated += block->size;
            if (block->owner != NULL && !block->owner->allocated) {
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                            "block at %#" G_GINT64_MODIFIER "x held by a free stitched block",
                            block_addr(block));
                return FALSE;
            }
        } else {
            (*n_free)++;
            if ((block->next != NULL && !block->next->allocated) ||
                g_tree_lookup(gm->free_blocks[segment->pool], block) != block ||
                g_tree_lookup(gm->free_by_size, block) != block) {
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                            "free block at %#" G_GINT64_MODIFIER "x not merged or not indexed",
                            block_addr(block));
                return FALSE;
            }
        }
        offset += block->size;
    }
    if (offset != segment->size) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "blocks of segment %#" G_GINT64_MODIFIER "x do not cover it", segment->addr);
        return FALSE;
    }
    return TRUE;
}

static gboolean
gmlake_check(const FsimPolicy *self, GError **error)
{
    const Gmlake *gm = (const Gmlake *)self;
    uint64_t allocated = 0;
    uint64_t reserved = 0;
    guint n_free = 0;

    for (guint i = 0; i < gm->segments->len; i++) {
        const Segment *segment = g_ptr_array_index(gm->segments, i);

        if (!gm_check_segment(gm, segment, &allocated, &n_free, error))
            return FALSE;
        reserved += fsim_device_round(self->device, segment->size);
    }
    for (guint i = 0; i < gm->stitched->len; i++) {
        const Stitched *stitched = g_ptr_array_index(gm->stitched, i);
        uint64_t covered = 0;

        for (guint k = 0; k < stitched->pieces->len; k++) {
            const Piece *piece = &g_array_index(stitched->pieces, Piece, k);
            const Block *block = gm_block_at(piece->segment, piece->offset);

            covered += piece->size;
            if (stitched->allocated &&
                (block == NULL || block->owner != stitched || block->offset != piece->offset ||
                 block->size != piece->size)) {
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                            "stitched block at %#" G_GINT64_MODIFIER "x lost a piece",
                            stitched->addr);
                return FALSE;
            }
        }
        if (covered != stitched->size) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "stitched block at %#" G_GINT64_MODIFIER "x: pieces of %" G_GUINT64_FORMAT
                        " bytes for %" G_GUINT64_FORMAT,
                        stitched->addr, covered, stitched->size);
            return FALSE;
        }
    }
    if (allocated != gm->allocated_bytes || reserved != gm->segments_bytes ||
        n_free != (guint)g_tree_nnodes(gm->free_by_size) ||
        n_free != (guint)(g_tree_nnodes(gm->free_blocks[0]) + g_tree_nnodes(gm->free_blocks[1])) ||
        reserved != (uint64_t)self->device->reserved.current) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "accounting mismatch: allocated %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
                    ", reserved %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT "/%" G_GINT64_FORMAT
                    ", free blocks %u",
                    allocated, gm->allocated_bytes, reserved, gm->segments_bytes,
                    self->device->reserved.current, n_free);
        return FALSE;
    }
    return TRUE;
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
};
