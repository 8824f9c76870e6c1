/* SPDX-License-Identifier: MIT */
/*
 * PyTorch's CUDA caching allocator, the model behind the `caching` and `expandable` policies.
 *
 * Reference: c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator and ExpandableSegment),
 * read in its 2.x versions and on main, with the notes in docs/policies.md.  Every rule below is
 * PyTorch's; the code is ours.  Names of PyTorch functions are given where a function here plays
 * the same part, so the two can be read side by side.
 *
 * BLOCKS AND SEGMENTS.  A segment is a range of device memory: one cudaMalloc (the classic mode)
 * or one virtual reservation of an expandable segment.  It is cut into blocks chained by
 * prev/next in address order; a block is allocated (handed out), free (cached, reusable), or, in
 * an expandable segment, unmapped (address space without physical pages).  Two free blocks are
 * never neighbours, nor are two unmapped ones: a block freed or mapped merges at once with
 * neighbours in the same state (try_merge_blocks).  Blocks of different segments never merge.
 *
 * POOLS.  Requests are rounded (round_size: 512 B, or a power-of-two division with
 * roundup_power2_divisions) and go to the small pool (<= 1 MiB) or the large pool.  Each pool
 * keeps its free blocks ordered by (stream, size, address) -- BlockComparatorSize -- so a request
 * takes the smallest free block of its own stream that fits, the lowest address on ties, and
 * blocks are never shared between streams.  Here each (pool, stream) has its own tree ordered by
 * (size, address), which is the same order, and the streams of a pool are kept sorted by id so
 * that walks over a whole pool (release, garbage collection) visit blocks in PyTorch's order.
 * Unmapped blocks are kept per (pool, stream) by address (BlockComparatorAddress).
 *
 * MALLOC (DeviceCachingAllocator::malloc).  get_free_block; else garbage collection (when a memory
 * fraction and a threshold are set), then alloc_block (a new segment, or pages mapped into an
 * expandable segment); else release_available_cached_blocks (oversize blocks, when
 * max_split_size is set) and alloc_block again; else release_cached_blocks (every unsplit free
 * block, large pool then small, = empty_cache) and a last alloc_block, counted as a retry; else
 * OOM.  The block found is split when should_split says so, the allocation taking its LOW end
 * and the remainder going back to the pool.
 *
 * FREE (free + free_block).  The engine calls dealloc when the memory is reusable (PyTorch's
 * free_completed: at once for ordinary frees, after the events of record_stream'ed blocks), so
 * stream-ordered frees are the engine's business and dealloc is PyTorch's free_block.
 *
 * EXPANDABLE SEGMENTS (Note [Expandable Segments]).  One reservation of 1 1/8 x the device's
 * memory per (pool, stream), mapped in pages of 2 MiB (small pool) or large_segment_size (20 MiB,
 * large pool) at the lowest address where the request fits; the best-fit search treats the free
 * block at the growth frontier as being as large as it can grow, so it is used last; blocks of
 * both pools split at 512 B; release unmaps the whole free pages of free blocks.
 *
 * PRIVATE POOLS (CUDA graphs, MemPool): see private-pools.c.
 *
 * NOT MODELLED: trigger_free_memory_callbacks, IPC,
 * toggling expandable_segments at run time (seeded expandable blocks are honoured as PyTorch
 * honours blocks made before it was switched off), the synchronisation release_cached_blocks does
 * on pending events (the engine decides when a free completes).
 *
 * Data structures: blocks come from a slab and are cached in sorted structures (exact size
 * classes and a binned sorted set for the free blocks, a red-black tree of unmapped ones), so the
 * hot path of a replay allocates no host memory once the slab and the classes have grown.
 *
 * THE FILES (this header is the model's private interface; pytorch.h is its public one):
 *   block.h               a block: links, flags
 *   free-set.[ch]         the free blocks of a (pool, stream) by (size, address): the hot path
 *   unmapped-tree.[ch]    the unmapped blocks of a (pool, stream) by address: a red-black tree
 *   block-pool.c          the slab of blocks, pools and their per-stream sets
 *   segments.c            the segment list, cudaMalloc'd segments (alloc and cudaFree)
 *   expandable-segments.c reservations: finding room, mapping and unmapping pages
 *   alloc.c               malloc: rounding, best fit, split, new memory, the retry ladder
 *   dealloc.c             free_block: merging with free neighbours
 *   release.c             empty_cache, release_available_cached_blocks, garbage collection
 *   create.c              the knobs, creation and destruction
 *   stats.c               memory_stats() counters reported through get_stats
 *   private-pools.c       CUDA graphs' and MemPools' pools: scopes, references, routing
 *   seed.c                the state at trace start (a snapshot's segments and blocks)
 *   check.c               the invariants walked after every operation under --paranoid
 *   describe.c            segments, blocks and what is releasable, for explain
 *
 * Knobs (group `caching` or `expandable`): the PYTORCH_CUDA_ALLOC_CONF keys, see
 * fragsim/alloc-conf.h.
 */
#pragma once

#include <glib.h>

#include <stdint.h>
#include <string.h>

#include "fragsim/device.h"
#include "fragsim/policy.h"

#include "block.h"
#include "free-set.h"
#include "policies/pytorch.h"
#include "unmapped-tree.h"

G_BEGIN_DECLS

typedef struct StreamSet StreamSet;
typedef struct PrivatePool PrivatePool;
typedef struct Pool Pool;

/* The blocks of one stream in one pool. */
struct StreamSet {
    uint64_t stream;
    Pool *pool;    /* the pool it is part of */
    FreeSet free;  /* pool.blocks restricted to this stream */
    Tree unmapped; /* pool.unmapped restricted to this stream */
};

#define POOL_DIRECT 4 /* stream sets found by the stream's low bits (Pool.direct) */

struct Pool {
    gboolean small;
    PrivatePool *owner;  /* owner_PrivatePool: NULL for the default pools */
    StreamSet **streams; /* sorted by stream id */
    guint n_streams;
    guint capacity;
    guint last; /* the stream found last: most requests repeat it */
    /* the first set made of each stream whose low bits are i, at direct[i]: a lookup of a stream
     * there is a load and a comparison (a trace has a few streams, in random turns) */
    StreamSet *direct[POOL_DIRECT];
    /* should_split() as two bounds: a found block is split when the rest is at least
     * @split_rest_min and the request below @split_size_below (fsim_pytorch_pool_init()) */
    uint64_t split_rest_min;
    uint64_t split_size_below;
    /* get_free_blocks_call_count: the garbage collector's clock, advanced by every search while
     * GC is active. */
    int64_t clock;
};

struct Segment {
    Segment *prev_segment; /* every segment, in creation order */
    Segment *next_segment;
    Block *head;    /* the block at @addr */
    StreamSet *set; /* its (pool, stream) */
    Pool *pool;
    uint64_t addr; /* cudaMalloc'd range, or the reservation */
    uint64_t size;
    uint64_t page;   /* expandable: the page size (segment_size_); 0 for cudaMalloc */
    uint64_t mapped; /* expandable: bytes mapped */
    gboolean expandable;
};

/* PyTorch's DeviceStats, aggregate over both pools (the names are those of memory_stats()).  The
 * hot path keeps the peak and the total only of the counters get_stats reports them for
 * (allocated_bytes, reserved_bytes); of the others, through stat_up_current(), the current
 * value only. */
typedef struct {
    FsimCounter allocation;
    FsimCounter segment;
    FsimCounter active;
    FsimCounter inactive_split;
    FsimCounter allocated_bytes;
    FsimCounter reserved_bytes;
    FsimCounter active_bytes;
    FsimCounter inactive_split_bytes;
    FsimCounter requested_bytes;
    FsimCounter oversize_allocations;
    FsimCounter oversize_segments;
    uint64_t num_alloc_retries;
    uint64_t num_ooms;
    uint64_t num_sync_all_streams;
    uint64_t num_device_alloc;
    uint64_t num_device_free;
    uint64_t num_splits;
    uint64_t num_merges;
} Stats;

/* A CUDA graph's or MemPool's pool (PrivatePool): its own small and large pools. */
struct PrivatePool {
    uint64_t id;        /* as the trace's POOL_* events name it */
    uint64_t use_count; /* references: captures, use_mem_pool scopes, the seeded state */
    guint n_segments;   /* segments (cudaMalloc'd, or reservations) it holds */
    gboolean use_on_oom;
    gboolean no_split;
    Pool small;
    Pool large;
    FsimCounter reserved_bytes; /* device memory of its segments */
};

/* An open scope: allocations on @stream go to @pool (captures_underway). */
typedef struct {
    PrivatePool *pool;
    uint64_t stream;
} Capture;

typedef struct {
    FsimPolicy base; /* must be first */
    FsimAllocConf conf;
    gboolean expandable;  /* expandable segments are on */
    gboolean gc_active;   /* a memory fraction and a GC threshold are both set */
    gboolean round_plain; /* CUDA without roundup_power2_divisions: round_size is to 512 B */
    uint64_t allowed_memory_maximum;
    uint64_t total_allocated_memory; /* cudaMalloc'd plus mapped bytes, as PyTorch counts */
    Pool small;
    Pool large;
    Pool *default_pools[2];             /* &large, &small */
    FsimCounter default_reserved_bytes; /* device memory of the default pools' segments */
    GPtrArray *private_pools;           /* PrivatePool*, sorted by id */
    GArray *captures;                   /* Capture, oldest first */
    GArray *use_on_oom_ids;             /* uint64_t pool ids: MemPool(use_on_oom=True) */
    GArray *no_split_ids;               /* uint64_t pool ids: MemPool(no_split=True) */
    Segment *segments;
    Segment *last_segment;
    guint n_segments;
    Block *spare;       /* the slab's free list, linked by @next */
    GPtrArray *slabs;   /* runs of BLOCK_SLAB_RUN blocks and their links */
    GPtrArray *scratch; /* lists of blocks for the walks that free blocks, kept between calls */
    GPtrArray *scratch2;
    Stats stats;
} Pytorch;

static inline Pytorch *
pytorch_from_policy(FsimPolicy *self)
{
    return (Pytorch *)self;
}

static inline const Pytorch *
pytorch_from_const_policy(const FsimPolicy *self)
{
    return (const Pytorch *)self;
}

/* The memory_stats() counters on the hot path, where the direction of a change is known: an
 * increase updates the peak without testing its sign, a decrease only the current value (it
 * moves neither the peak nor the total).  The same counts as fsim_counter_add(). */
static inline void
stat_up(FsimCounter *counter, uint64_t n)
{
    counter->current += (int64_t)n;
    counter->total += (int64_t)n;
    counter->peak = MAX(counter->peak, counter->current);
}

/* An increase of a counter whose peak and total nobody reads. */
static inline void
stat_up_current(FsimCounter *counter, uint64_t n)
{
    counter->current += (int64_t)n;
}

static inline void
stat_down(FsimCounter *counter, uint64_t n)
{
    counter->current -= (int64_t)n;
}

/* A change of either sign of a counter whose peak and total nobody reads. */
static inline void
stat_add_current(FsimCounter *counter, int64_t delta)
{
    counter->current += delta;
}

/* Reserved bytes change in @pool: PyTorch's count, and the pool's own for per-pool answers. */
static inline void
pool_reserved_add(Pytorch *pt, Pool *pool, int64_t bytes)
{
    fsim_counter_add(&pt->stats.reserved_bytes, bytes);
    fsim_counter_add(
        pool->owner != NULL ? &pool->owner->reserved_bytes : &pt->default_reserved_bytes, bytes);
}

static inline uint64_t
round_up(uint64_t value, uint64_t unit)
{
    return (value + unit - 1) / unit * unit;
}

static inline gboolean
block_expandable(const Block *block)
{
    return (block->flags & BLOCK_EXPANDABLE) != 0;
}

/* ---- block-pool.c ------------------------------------------------------------------------------
 */

/* Give the slab another BLOCK_SLAB_RUN spare blocks. */
void fsim_pytorch_slab_grow(Pytorch *pt);

/* A block of @segment (whose set is @set) from the slab, zeroed but for its segment, its set and
 * @flags (BLOCK_EXPANDABLE or 0, as the segment's).  The tree links are left as they are:
 * fsim_pytorch_tree_insert() sets them, and only a block in a tree has them read. */
static inline Block *
block_new_in(Pytorch *pt, Segment *segment, StreamSet *set, uint32_t flags)
{
    Block *block;

    if (G_UNLIKELY(pt->spare == NULL))
        fsim_pytorch_slab_grow(pt);
    block = pt->spare;
    pt->spare = block->next;
    /* field by field: a whole-struct zeroing compiles to `rep stos`, slow to start */
    block->prev = block->next = NULL;
    block->addr = block->size = block->requested = 0;
    block->gc_count_base = 0;
    block->segment = segment;
    block->set = set;
    block->flags = flags;
    return block;
}

/* A block of @segment from the slab (block_new_in()). */
static inline Block *
block_new(Pytorch *pt, Segment *segment)
{
    return block_new_in(pt, segment, segment->set, segment->expandable ? BLOCK_EXPANDABLE : 0);
}

/* A block of @like's segment, without reading the segment: malloc's split. */
static inline Block *
block_new_like(Pytorch *pt, const Block *like)
{
    return block_new_in(pt, like->segment, like->set, like->flags & BLOCK_EXPANDABLE);
}

/* Give @block back to the slab. */
static inline void
block_free(Pytorch *pt, Block *block)
{
#ifdef FSIM_PARANOID
    memset(block, 0x5a, sizeof(*block)); /* a dangling use shows at once */
#endif
    block->next = pt->spare;
    pt->spare = block;
}

/* The set of @stream in @pool, or NULL. */
static inline StreamSet *
pool_find(Pool *pool, uint64_t stream)
{
    StreamSet *direct = pool->direct[stream & (POOL_DIRECT - 1)];
    guint lo = 0;
    guint hi = pool->n_streams;

    if (G_LIKELY(direct != NULL && direct->stream == stream))
        return direct;
    if (G_LIKELY(pool->n_streams <= 4)) {
        /* a few streams, in random turns: a scan that selects without a branch on the data
         * (its length changes only when a stream appears) */
        StreamSet *found = NULL;

        for (guint i = 0; i < pool->n_streams; i++)
            found = block_select(pool->streams[i]->stream == stream, pool->streams[i], found);
        return found;
    }
    if (pool->last < pool->n_streams && pool->streams[pool->last]->stream == stream)
        return pool->streams[pool->last];
    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;

        if (pool->streams[mid]->stream < stream)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < pool->n_streams && pool->streams[lo]->stream == stream) {
        pool->last = lo;
        return pool->streams[lo];
    }
    return NULL;
}

/* The set of @stream in @pool, created (in stream order) when missing. */
StreamSet *fsim_pytorch_pool_stream(Pool *pool, uint64_t stream);

/* Set up @pool, empty: small or large, of @owner (NULL: a default pool), its split rule from
 * @pt's knobs. */
void fsim_pytorch_pool_init(const Pytorch *pt, Pool *pool, gboolean small, PrivatePool *owner);

/* Free every stream set of @pool (the blocks live in the slab). */
void fsim_pytorch_pool_clear(Pool *pool);

/* pool.insert_into_blocks(): cache a free block, stamping the GC clock.  Through the block's set,
 * not its segment: the segment is one more cache miss on the path of a free's decisions. */
static inline G_ALWAYS_INLINE void
pool_insert_free(Block *block)
{
    block->gc_count_base = (uint32_t)block->set->pool->clock;
    freeset_insert(&block->set->free, block);
}

/* Where the chain points to @block from before: its predecessor's next, or its segment's head
 * when it is the first.  Selected, not branched on: whether a block has a predecessor is as random
 * as the trace. */
static inline Block **
block_link_to(Block *block)
{
    /* the address of the predecessor's link as a number: no pointer into a block that is not there
     */
    uintptr_t prev_next = (uintptr_t)block->prev + offsetof(Block, next);

    return block_select(block->prev != NULL, (gpointer)prev_next, &block->segment->head);
}

/* Put @block into the chain right before @after (Block::splice). */
static inline void
block_link_before(Block *block, Block *after)
{
    block->prev = after->prev;
    block->next = after;
    *block_link_to(after) = block;
    after->prev = block;
}

/* Put @block into the chain right after @before. */
static inline void
block_link_after(Block *block, Block *before)
{
    block->prev = before;
    block->next = before->next;
    if (before->next != NULL)
        before->next->prev = block;
    before->next = block;
}

/* ---- segments.c --------------------------------------------------------------------------------
 */

/* A segment of @pool and @stream over [addr, addr+size), appended to the segment list; @page is
 * the page size of an expandable segment, 0 for a cudaMalloc'd one.  Its blocks are the
 * caller's to make. */
Segment *fsim_pytorch_segment_new(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t addr,
                                  uint64_t size, uint64_t page);

/* Take @segment off the list and free it (not its blocks). */
void fsim_pytorch_segment_destroy(Pytorch *pt, Segment *segment);

/* alloc_block() without expandable segments: cudaMalloc a segment of @alloc_size bytes, one free
 * block (not cached).  NULL when the device says no. */
Block *fsim_pytorch_malloc_segment(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t alloc_size);

/* release_block(): cudaFree an unsplit cudaMalloc'd segment that is entirely free and cached. */
void fsim_pytorch_release_block(Pytorch *pt, Block *block);

/* ---- expandable-segments.c ---------------------------------------------------------------------
 */

/* The page size of expandable segments in the small or large pool (segment_size_).  torch_npu's
 * find_expandable_block(): segment_size_mb replaces the large page, and page_size:1g makes it
 * 1 GiB. */
static inline uint64_t
expandable_page(const Pytorch *pt, gboolean small)
{
    if (small)
        return FSIM_PYTORCH_SMALL_BUFFER;
    if (pt->conf.platform == FSIM_PLATFORM_NPU) {
        if (pt->conf.npu_page_1g)
            return FSIM_NPU_PAGE_1G;
        if (pt->conf.npu_segment_size != 0)
            return pt->conf.npu_segment_size;
    }
    return pt->conf.large_segment_size;
}

/* "enough address space for 1 1/8 the total memory on the GPU", in whole pages of @page. */
static inline uint64_t
expandable_reservation(const Pytorch *pt, uint64_t page)
{
    uint64_t total = pt->base.device->spec.total_bytes;

    return page * ((total + total / 8 + page - 1) / page);
}

/* try_allocate_expandable_block(): a free block of at least @size bytes (taken out of the pool),
 * mapping pages at the lowest address that can hold it; NULL when the device says no. */
Block *fsim_pytorch_expandable_alloc(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size);

/* unmap_block(): give the whole pages inside a free expandable block back. */
void fsim_pytorch_unmap_block(Pytorch *pt, Block *block);

/* release_expandable_segment(): free a reservation that is one unmapped block again. */
void fsim_pytorch_release_expandable_segment(Pytorch *pt, Block *block);

/* ---- dealloc.c ---------------------------------------------------------------------------------
 */

/* try_merge_blocks(): absorb @src into @dst when @src is free (or unmapped) like @dst.  Returns
 * the bytes absorbed, 0 when nothing merged. */
uint64_t fsim_pytorch_try_merge(Pytorch *pt, Block *dst, Block *src);

/* ---- release.c ---------------------------------------------------------------------------------
 */

/* release_cached_blocks() = empty_cache(): the large pool, then the small one. */
gboolean fsim_pytorch_release_cached_blocks(Pytorch *pt);

/* release_available_cached_blocks(): free oversize blocks of @stream for a request of @size. */
gboolean fsim_pytorch_release_available_cached_blocks(Pytorch *pt, Pool *pool, uint64_t stream,
                                                      uint64_t size);

/* garbage_collect_cached_blocks(): free old unsplit blocks above the GC threshold. */
void fsim_pytorch_garbage_collect(Pytorch *pt);

/* ---- private-pools.c ---------------------------------------------------------------------------
 */

/* Pool @id, or NULL. */
PrivatePool *fsim_pytorch_private_pool_find(const Pytorch *pt, uint64_t id);
/* Pool @id, created (unreferenced, empty) when missing. */
PrivatePool *fsim_pytorch_private_pool_get(Pytorch *pt, uint64_t id);
/* For the pool list's free function. */
void fsim_pytorch_private_pool_free(gpointer data);
/* get_pool()'s private half: the pool of the newest scope open on @stream, or NULL. */
PrivatePool *fsim_pytorch_capture_pool(const Pytorch *pt, uint64_t stream);
/* A knob's comma-separated list of pool ids. */
gboolean fsim_pytorch_parse_pool_ids(const char *text, const char *knob, GArray **out,
                                     GError **error);

/* ---- check.c -----------------------------------------------------------------------------------
 */

/* Set @error to FSIM_ERROR @code with the printf-style message; returns FALSE (for the checks'
 * and the seeding's failures). */
gboolean fsim_pytorch_fail(GError **error, gint code, const char *format, ...) G_GNUC_PRINTF(3, 4);

G_END_DECLS
