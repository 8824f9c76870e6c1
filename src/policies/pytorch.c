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
 * NOT MODELLED: CUDA graphs and private pools (MemPool), trigger_free_memory_callbacks, IPC,
 * toggling expandable_segments at run time (seeded expandable blocks are honoured as PyTorch
 * honours blocks made before it was switched off), the synchronisation release_cached_blocks does
 * on pending events (the engine decides when a free completes).
 *
 * Data structures: intrusive red-black trees (no allocation per node) over blocks taken from a
 * slab, so the hot path of a replay allocates no host memory once the slab has grown.
 *
 * Knobs (group `caching` or `expandable`): the PYTORCH_CUDA_ALLOC_CONF keys, see alloc-conf.h.
 */
#include "pytorch.h"

#include <glib.h>

#include <string.h>

/* ---- blocks, segments, pools --------------------------------------------------------------- */

enum {
    BLOCK_RED = 1u << 0,       /* red node of the tree it is in */
    BLOCK_ALLOCATED = 1u << 1, /* handed out (or pending free): not mergeable, not in a tree */
    BLOCK_UNMAPPED = 1u << 2,  /* address space of an expandable segment without pages */
    BLOCK_PENDING = 1u << 3,   /* seeded active_pending_free: active but no longer allocated */
    BLOCK_IN_TREE = 1u << 4,   /* in its stream's free or unmapped tree */
};

typedef struct Block Block;
typedef struct Segment Segment;
typedef struct StreamSet StreamSet;

struct Block {
    Block *left; /* tree links */
    Block *right;
    Block *parent;
    Block *prev; /* neighbours in the segment, by address */
    Block *next;
    Segment *segment;
    uint64_t addr;
    uint64_t size;
    uint64_t requested;    /* the request an allocated block serves */
    int64_t gc_count_base; /* the pool's GC clock when the block was last cached */
    uint32_t flags;
};

/* A red-black tree of blocks by address: the unmapped blocks of expandable segments. */
typedef struct {
    Block *root;
    gsize count;
} Tree;

/* The free blocks of one stream in one pool, by (size, address): see "the free-block set". */
#define FREE_SUBBINS_LOG2 3 /* eight bins per power of two */
#define FREE_MIN_LOG2     9 /* 512 B: every block is a multiple */
#define FREE_BINS         ((64 - FREE_MIN_LOG2) << FREE_SUBBINS_LOG2)
#define FREE_WORDS        ((FREE_BINS + 63) / 64)

typedef struct {
    uint64_t size;
    uint64_t addr;
    Block *block;
} FreeEntry;

typedef struct {
    FreeEntry *entries; /* sorted by (size, addr) */
    uint32_t len;
    uint32_t capacity;
} FreeBin;

typedef struct {
    FreeBin bins[FREE_BINS];
    uint64_t nonempty[FREE_WORDS]; /* bit b: bins[b] has entries */
    gsize count;
} FreeSet;

/* A position in a FreeSet; bin == FREE_BINS past the end. */
typedef struct {
    guint bin;
    guint pos;
} FreeCursor;

/* The blocks of one stream in one pool. */
struct StreamSet {
    uint64_t stream;
    FreeSet free;  /* pool.blocks restricted to this stream */
    Tree unmapped; /* pool.unmapped restricted to this stream */
};

typedef struct {
    gboolean small;
    StreamSet **streams; /* sorted by stream id */
    guint n_streams;
    guint capacity;
    guint last; /* the stream found last: most requests repeat it */
    /* get_free_blocks_call_count: the garbage collector's clock, advanced by every search while
     * GC is active. */
    int64_t clock;
} Pool;

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

/* PyTorch's DeviceStats, aggregate over both pools (the names are those of memory_stats()). */
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

#define SLAB_CHUNK 1024

typedef struct {
    FsimPolicy base; /* must be first */
    FsimAllocConf conf;
    gboolean expandable; /* expandable segments are on */
    gboolean gc_active;  /* a memory fraction and a GC threshold are both set */
    uint64_t allowed_memory_maximum;
    uint64_t total_allocated_memory; /* cudaMalloc'd plus mapped bytes, as PyTorch counts */
    Pool small;
    Pool large;
    Segment *segments;
    Segment *last_segment;
    guint n_segments;
    Block *spare;       /* the slab's free list, linked by @next */
    GPtrArray *slabs;   /* chunks of SLAB_CHUNK blocks */
    GPtrArray *scratch; /* lists of blocks for the walks that free blocks, kept between calls */
    GPtrArray *scratch2;
    Stats stats;
} Pytorch;

static Pytorch *
pytorch_from_policy(FsimPolicy *self)
{
    return (Pytorch *)self;
}

static const Pytorch *
pytorch_from_const_policy(const FsimPolicy *self)
{
    return (const Pytorch *)self;
}

/* ---- the slab -------------------------------------------------------------------------------- */

static Block *
block_new(Pytorch *pt)
{
    Block *block;

    if (G_UNLIKELY(pt->spare == NULL)) {
        Block *chunk = g_new(Block, SLAB_CHUNK);

        g_ptr_array_add(pt->slabs, chunk);
        for (gsize i = 0; i < SLAB_CHUNK; i++) {
            chunk[i].next = pt->spare;
            pt->spare = &chunk[i];
        }
    }
    block = pt->spare;
    pt->spare = block->next;
    memset(block, 0, sizeof(*block));
    return block;
}

static void
block_free(Pytorch *pt, Block *block)
{
#ifdef FSIM_PARANOID
    memset(block, 0x5a, sizeof(*block)); /* a dangling use shows at once */
#endif
    block->next = pt->spare;
    pt->spare = block;
}

/* ---- the red-black tree ---------------------------------------------------------------------- */
/* Cormen et al., Introduction to Algorithms, ch. 13, with parent pointers and NULL leaves. */

static inline gboolean
tree_less(const Block *a, const Block *b)
{
    return a->addr < b->addr;
}

static inline gboolean
is_red(const Block *block)
{
    return block != NULL && (block->flags & BLOCK_RED) != 0;
}

static inline void
set_red(Block *block, gboolean red)
{
    if (red)
        block->flags |= BLOCK_RED;
    else
        block->flags &= ~(uint32_t)BLOCK_RED;
}

static void
tree_replace_child(Tree *tree, Block *parent, Block *old, Block *new_child)
{
    if (parent == NULL)
        tree->root = new_child;
    else if (parent->left == old)
        parent->left = new_child;
    else
        parent->right = new_child;
}

static void
tree_rotate_left(Tree *tree, Block *x)
{
    Block *y = x->right;

    x->right = y->left;
    if (y->left != NULL)
        y->left->parent = x;
    y->parent = x->parent;
    tree_replace_child(tree, x->parent, x, y);
    y->left = x;
    x->parent = y;
}

static void
tree_rotate_right(Tree *tree, Block *x)
{
    Block *y = x->left;

    x->left = y->right;
    if (y->right != NULL)
        y->right->parent = x;
    y->parent = x->parent;
    tree_replace_child(tree, x->parent, x, y);
    y->right = x;
    x->parent = y;
}

static void
tree_insert(Tree *tree, Block *z)
{
    Block *parent = NULL;
    Block **link = &tree->root;

    g_assert((z->flags & BLOCK_IN_TREE) == 0);
    while (*link != NULL) {
        parent = *link;
        link = tree_less(z, parent) ? &parent->left : &parent->right;
    }
    z->parent = parent;
    z->left = z->right = NULL;
    z->flags |= BLOCK_RED | BLOCK_IN_TREE;
    *link = z;
    tree->count++;
    while (is_red(z->parent)) {
        Block *p = z->parent;
        Block *g = p->parent; /* exists: a red node is never the root */

        if (p == g->left) {
            Block *uncle = g->right;

            if (is_red(uncle)) {
                set_red(p, FALSE);
                set_red(uncle, FALSE);
                set_red(g, TRUE);
                z = g;
                continue;
            }
            if (z == p->right) {
                z = p;
                tree_rotate_left(tree, z);
                p = z->parent;
            }
            set_red(p, FALSE);
            set_red(g, TRUE);
            tree_rotate_right(tree, g);
        } else {
            Block *uncle = g->left;

            if (is_red(uncle)) {
                set_red(p, FALSE);
                set_red(uncle, FALSE);
                set_red(g, TRUE);
                z = g;
                continue;
            }
            if (z == p->left) {
                z = p;
                tree_rotate_right(tree, z);
                p = z->parent;
            }
            set_red(p, FALSE);
            set_red(g, TRUE);
            tree_rotate_left(tree, g);
        }
    }
    set_red(tree->root, FALSE);
}

static Block *
tree_min(Block *node)
{
    while (node->left != NULL)
        node = node->left;
    return node;
}

static void
tree_transplant(Tree *tree, Block *u, Block *v)
{
    tree_replace_child(tree, u->parent, u, v);
    if (v != NULL)
        v->parent = u->parent;
}

static void
tree_erase_fixup(Tree *tree, Block *x, Block *parent)
{
    while (x != tree->root && !is_red(x)) {
        /* x may be NULL; its sibling is not (the removed black node left a black debt). */
        if (x == parent->left) {
            Block *w = parent->right;

            if (is_red(w)) {
                set_red(w, FALSE);
                set_red(parent, TRUE);
                tree_rotate_left(tree, parent);
                w = parent->right;
            }
            if (!is_red(w->left) && !is_red(w->right)) {
                set_red(w, TRUE);
                x = parent;
                parent = x->parent;
            } else {
                if (!is_red(w->right)) {
                    set_red(w->left, FALSE);
                    set_red(w, TRUE);
                    tree_rotate_right(tree, w);
                    w = parent->right;
                }
                set_red(w, is_red(parent));
                set_red(parent, FALSE);
                if (w->right != NULL)
                    set_red(w->right, FALSE);
                tree_rotate_left(tree, parent);
                x = tree->root;
                parent = NULL;
            }
        } else {
            Block *w = parent->left;

            if (is_red(w)) {
                set_red(w, FALSE);
                set_red(parent, TRUE);
                tree_rotate_right(tree, parent);
                w = parent->left;
            }
            if (!is_red(w->left) && !is_red(w->right)) {
                set_red(w, TRUE);
                x = parent;
                parent = x->parent;
            } else {
                if (!is_red(w->left)) {
                    set_red(w->right, FALSE);
                    set_red(w, TRUE);
                    tree_rotate_left(tree, w);
                    w = parent->left;
                }
                set_red(w, is_red(parent));
                set_red(parent, FALSE);
                if (w->left != NULL)
                    set_red(w->left, FALSE);
                tree_rotate_right(tree, parent);
                x = tree->root;
                parent = NULL;
            }
        }
    }
    if (x != NULL)
        set_red(x, FALSE);
}

static void
tree_erase(Tree *tree, Block *z)
{
    Block *y = z;
    Block *x;
    Block *x_parent;
    gboolean removed_red = is_red(y);

    g_assert((z->flags & BLOCK_IN_TREE) != 0);
    if (z->left == NULL) {
        x = z->right;
        x_parent = z->parent;
        tree_transplant(tree, z, z->right);
    } else if (z->right == NULL) {
        x = z->left;
        x_parent = z->parent;
        tree_transplant(tree, z, z->left);
    } else {
        y = tree_min(z->right);
        removed_red = is_red(y);
        x = y->right;
        if (y->parent == z) {
            x_parent = y;
        } else {
            x_parent = y->parent;
            tree_transplant(tree, y, y->right);
            y->right = z->right;
            y->right->parent = y;
        }
        tree_transplant(tree, z, y);
        y->left = z->left;
        y->left->parent = y;
        set_red(y, is_red(z));
    }
    if (!removed_red)
        tree_erase_fixup(tree, x, x_parent);
    z->flags &= ~(uint32_t)(BLOCK_IN_TREE | BLOCK_RED);
    z->left = z->right = z->parent = NULL;
    tree->count--;
}

static Block *
tree_first(const Tree *tree)
{
    return tree->root != NULL ? tree_min(tree->root) : NULL;
}

static Block *
tree_next(Block *node)
{
    Block *parent;

    if (node->right != NULL)
        return tree_min(node->right);
    parent = node->parent;
    while (parent != NULL && node == parent->right) {
        node = parent;
        parent = parent->parent;
    }
    return parent;
}

/* ---- the free-block set --------------------------------------------------------------------- */
/*
 * The free blocks of one (pool, stream) in BlockComparatorSize order, (size, address).  A replay
 * spends most of its time here, so the set is built for the cache rather than as a search tree:
 * sizes fall into bins, eight per power of two (bin (e - 9) x 8 + k holds sizes in
 * [2^e + k 2^(e-3), 2^e + (k+1) 2^(e-3))), a bitmap tells the non-empty bins, and each bin is an
 * array of entries sorted by (size, address) with the key inline.  The smallest block of at least
 * a size is then one bitmap word and a binary search of a short array away, and an insertion or
 * an erasure moves a few entries of one bin.  Bins are in size order, so walking them in order is
 * walking the whole set in order.
 */

static inline guint
free_bin(uint64_t size)
{
    guint e =
        size < ((uint64_t)1 << FREE_MIN_LOG2) ? FREE_MIN_LOG2 : 63u - (guint)__builtin_clzll(size);
    guint sub = (guint)(size >> (e - FREE_SUBBINS_LOG2)) & ((1u << FREE_SUBBINS_LOG2) - 1);

    if (size < ((uint64_t)1 << FREE_MIN_LOG2))
        sub = 0;
    return ((e - FREE_MIN_LOG2) << FREE_SUBBINS_LOG2) | sub;
}

/* The first non-empty bin at or after @bin, FREE_BINS if none. */
static inline guint
free_next_bin(const FreeSet *set, guint bin)
{
    guint w = bin >> 6;
    uint64_t word;

    if (bin >= FREE_BINS)
        return FREE_BINS;
    word = set->nonempty[w] & (~(uint64_t)0 << (bin & 63));
    while (word == 0) {
        if (++w == FREE_WORDS)
            return FREE_BINS;
        word = set->nonempty[w];
    }
    return (w << 6) + (guint)__builtin_ctzll(word);
}

/* The last non-empty bin at or before @bin, G_MAXUINT if none. */
static inline guint
free_prev_bin(const FreeSet *set, guint bin)
{
    guint w = bin >> 6;
    uint64_t word = set->nonempty[w] & (~(uint64_t)0 >> (63 - (bin & 63)));

    while (word == 0) {
        if (w == 0)
            return G_MAXUINT;
        word = set->nonempty[--w];
    }
    return (w << 6) + 63u - (guint)__builtin_clzll(word);
}

/* The index of the first entry of @bin at or after (size, addr). */
static inline guint
free_bin_search(const FreeBin *bin, uint64_t size, uint64_t addr)
{
    guint lo = 0;
    guint hi = bin->len;

    while (lo < hi) {
        guint mid = (lo + hi) / 2;
        const FreeEntry *e = &bin->entries[mid];

        if (e->size < size || (e->size == size && e->addr < addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void
freeset_insert(FreeSet *set, Block *block)
{
    guint b = free_bin(block->size);
    FreeBin *bin = &set->bins[b];
    guint at;

    g_assert((block->flags & BLOCK_IN_TREE) == 0);
    if (G_UNLIKELY(bin->len == bin->capacity)) {
        bin->capacity = MAX(8, bin->capacity * 2);
        bin->entries = g_renew(FreeEntry, bin->entries, bin->capacity);
    }
    at = free_bin_search(bin, block->size, block->addr);
    memmove(&bin->entries[at + 1], &bin->entries[at], (bin->len - at) * sizeof(FreeEntry));
    bin->entries[at].size = block->size;
    bin->entries[at].addr = block->addr;
    bin->entries[at].block = block;
    bin->len++;
    set->nonempty[b >> 6] |= (uint64_t)1 << (b & 63);
    set->count++;
    block->flags |= BLOCK_IN_TREE;
}

static void
freeset_erase_at(FreeSet *set, const FreeCursor *cursor)
{
    FreeBin *bin = &set->bins[cursor->bin];

    bin->entries[cursor->pos].block->flags &= ~(uint32_t)BLOCK_IN_TREE;
    bin->len--;
    memmove(&bin->entries[cursor->pos], &bin->entries[cursor->pos + 1],
            (bin->len - cursor->pos) * sizeof(FreeEntry));
    if (bin->len == 0)
        set->nonempty[cursor->bin >> 6] &= ~((uint64_t)1 << (cursor->bin & 63));
    set->count--;
}

static gboolean
freeset_find(const FreeSet *set, const Block *block, FreeCursor *cursor)
{
    const FreeBin *bin;

    cursor->bin = free_bin(block->size);
    bin = &set->bins[cursor->bin];
    cursor->pos = free_bin_search(bin, block->size, block->addr);
    return cursor->pos < bin->len && bin->entries[cursor->pos].block == block;
}

static void
freeset_erase(FreeSet *set, Block *block)
{
    FreeCursor cursor;
    gboolean found = freeset_find(set, block, &cursor);

    g_assert(found);
    freeset_erase_at(set, &cursor);
}

static inline Block *
freeset_at(const FreeSet *set, const FreeCursor *cursor)
{
    return cursor->bin < FREE_BINS ? set->bins[cursor->bin].entries[cursor->pos].block : NULL;
}

/* The first block of size >= @size, the lowest address among equal sizes (std::set::lower_bound
 * with AllocParams' search key, whose address is 0), or NULL. */
static Block *
freeset_lower_bound(const FreeSet *set, uint64_t size, FreeCursor *cursor)
{
    guint b = free_bin(size);

    if ((set->nonempty[b >> 6] >> (b & 63)) & 1) {
        const FreeBin *bin = &set->bins[b];
        guint pos = free_bin_search(bin, size, 0);

        if (pos < bin->len) {
            cursor->bin = b;
            cursor->pos = pos;
            return bin->entries[pos].block;
        }
    }
    cursor->bin = free_next_bin(set, b + 1);
    cursor->pos = 0;
    return freeset_at(set, cursor);
}

static Block *
freeset_first(const FreeSet *set, FreeCursor *cursor)
{
    cursor->bin = free_next_bin(set, 0);
    cursor->pos = 0;
    return freeset_at(set, cursor);
}

/* The last block of bin @b, found by free_prev_bin(): G_MAXUINT (none) leaves @cursor past the
 * end and returns NULL. */
static Block *
freeset_last_of(const FreeSet *set, guint b, FreeCursor *cursor)
{
    if (b == G_MAXUINT) {
        cursor->bin = FREE_BINS;
        return NULL;
    }
    cursor->bin = b;
    cursor->pos = set->bins[b].len - 1;
    return freeset_at(set, cursor);
}

static Block *
freeset_last(const FreeSet *set, FreeCursor *cursor)
{
    return freeset_last_of(set, free_prev_bin(set, FREE_BINS - 1), cursor);
}

/* Step @cursor to the next block in order (NULL at the end). */
static Block *
freeset_next(const FreeSet *set, FreeCursor *cursor)
{
    if (cursor->bin >= FREE_BINS)
        return NULL;
    if (++cursor->pos >= set->bins[cursor->bin].len) {
        cursor->bin = free_next_bin(set, cursor->bin + 1);
        cursor->pos = 0;
    }
    return freeset_at(set, cursor);
}

/* Step @cursor to the previous block in order (NULL before the first). */
static Block *
freeset_prev(const FreeSet *set, FreeCursor *cursor)
{
    if (cursor->bin >= FREE_BINS)
        return NULL;
    if (cursor->pos > 0) {
        cursor->pos--;
        return freeset_at(set, cursor);
    }
    return freeset_last_of(set, cursor->bin == 0 ? G_MAXUINT : free_prev_bin(set, cursor->bin - 1),
                           cursor);
}

/* Append every block of @set to @out, in order: loops that free blocks walk such a copy, which
 * is what PyTorch's walks see too (freeing one block never changes another). */
static void
freeset_snapshot(const FreeSet *set, GPtrArray *out)
{
    FreeCursor cursor;

    for (Block *b = freeset_first(set, &cursor); b != NULL; b = freeset_next(set, &cursor))
        g_ptr_array_add(out, b);
}

static void
freeset_clear(FreeSet *set)
{
    for (guint b = 0; b < FREE_BINS; b++)
        g_free(set->bins[b].entries);
}

/* ---- pools and streams ----------------------------------------------------------------------- */

static StreamSet *
pool_find(Pool *pool, uint64_t stream)
{
    guint lo = 0;
    guint hi = pool->n_streams;

    if (G_LIKELY(pool->last < pool->n_streams && pool->streams[pool->last]->stream == stream))
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

/* The set of @stream, created (in stream order) when missing. */
static StreamSet *
pool_stream(Pool *pool, uint64_t stream)
{
    StreamSet *set = pool_find(pool, stream);
    guint at = 0;

    if (set != NULL)
        return set;
    while (at < pool->n_streams && pool->streams[at]->stream < stream)
        at++;
    if (pool->n_streams == pool->capacity) {
        pool->capacity = MAX(4, pool->capacity * 2);
        pool->streams = g_renew(StreamSet *, pool->streams, pool->capacity);
    }
    memmove(&pool->streams[at + 1], &pool->streams[at],
            (pool->n_streams - at) * sizeof(StreamSet *));
    set = g_new0(StreamSet, 1);
    set->stream = stream;
    pool->streams[at] = set;
    pool->n_streams++;
    pool->last = at;
    return set;
}

static inline gboolean
block_unmapped(const Block *block)
{
    return (block->flags & BLOCK_UNMAPPED) != 0;
}

static inline gboolean
block_allocated(const Block *block)
{
    return (block->flags & BLOCK_ALLOCATED) != 0;
}

static inline gboolean
block_is_split(const Block *block)
{
    return block->prev != NULL || block->next != NULL;
}

static inline gboolean
block_expandable(const Block *block)
{
    return block->segment->expandable;
}

/* pool.insert_into_blocks(): cache a free block, stamping the GC clock. */
static void
pool_insert_free(Block *block)
{
    block->gc_count_base = block->segment->pool->clock;
    freeset_insert(&block->segment->set->free, block);
}

/* ---- segments -------------------------------------------------------------------------------- */

static Segment *
segment_new(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t addr, uint64_t size, uint64_t page)
{
    Segment *segment = g_new0(Segment, 1);

    segment->pool = pool;
    segment->set = pool_stream(pool, stream);
    segment->addr = addr;
    segment->size = size;
    segment->page = page;
    segment->expandable = page != 0;
    segment->prev_segment = pt->last_segment;
    if (pt->last_segment != NULL)
        pt->last_segment->next_segment = segment;
    else
        pt->segments = segment;
    pt->last_segment = segment;
    pt->n_segments++;
    return segment;
}

static void
segment_destroy(Pytorch *pt, Segment *segment)
{
    if (segment->prev_segment != NULL)
        segment->prev_segment->next_segment = segment->next_segment;
    else
        pt->segments = segment->next_segment;
    if (segment->next_segment != NULL)
        segment->next_segment->prev_segment = segment->prev_segment;
    else
        pt->last_segment = segment->prev_segment;
    pt->n_segments--;
    g_free(segment);
}

/* Put @block into the chain right before @after (Block::splice). */
static void
block_link_before(Block *block, Block *after)
{
    block->prev = after->prev;
    block->next = after;
    if (after->prev != NULL)
        after->prev->next = block;
    else
        after->segment->head = block;
    after->prev = block;
}

/* Put @block into the chain right after @before. */
static void
block_link_after(Block *block, Block *before)
{
    block->prev = before;
    block->next = before->next;
    if (before->next != NULL)
        before->next->prev = block;
    before->next = block;
}

/* ---- PyTorch's helpers ----------------------------------------------------------------------- */

static inline uint64_t
round_up(uint64_t value, uint64_t unit)
{
    return (value + unit - 1) / unit * unit;
}

/* roundup_power2_next_division(): e.g. 1200 with 4 divisions lies in [1024, 2048), cut into
 * 1024, 1280, 1536, 1792: 1280. */
static uint64_t
roundup_power2_next_division(uint64_t size, uint64_t divisions)
{
    uint64_t floor;
    uint64_t step;
    uint64_t low;

    if ((size & (size - 1)) == 0)
        return size;
    floor = (uint64_t)1 << (63 - __builtin_clzll(size));
    step = floor >> (63 - __builtin_clzll(divisions));
    if (step == 0)
        return floor << 1;
    low = size & ~(step - 1);
    return low == size ? size : low + step;
}

uint64_t
fsim_pytorch_round_size(const FsimAllocConf *conf, uint64_t size)
{
    uint64_t divisions;

    if (size < FSIM_PYTORCH_MIN_BLOCK)
        return FSIM_PYTORCH_MIN_BLOCK;
    divisions = size > conf->roundup_bypass_threshold ? 0 : fsim_alloc_conf_divisions(conf, size);
    if (divisions > 1 && size > FSIM_PYTORCH_MIN_BLOCK * divisions)
        return roundup_power2_next_division(size, divisions);
    return round_up(size, FSIM_PYTORCH_MIN_BLOCK);
}

uint64_t
fsim_pytorch_allocation_size(const FsimAllocConf *conf, uint64_t size)
{
    if (size <= FSIM_PYTORCH_SMALL_SIZE)
        return FSIM_PYTORCH_SMALL_BUFFER;
    if (size < FSIM_PYTORCH_MIN_LARGE_ALLOC) {
        /* large_segment_size (kLargeBuffer, 20 MiB): a shared segment for 1-10 MiB requests.  A
         * large_segment_size_mb below the request would make a segment too small to hold it; we
         * take the request's own 2 MiB rounding then. */
        return MAX(conf->large_segment_size, round_up(size, FSIM_PYTORCH_ROUND_LARGE));
    }
    return round_up(size, FSIM_PYTORCH_ROUND_LARGE);
}

/* should_split(): small pool (and every pool under expandable segments) whenever at least 512 B
 * remain; large pool only below max_split_size and when more than 1 MiB remains -- a remainder of
 * at most 1 MiB stays inside the allocation as internal fragmentation. */
static gboolean
should_split(const Pytorch *pt, const Block *block, uint64_t size)
{
    uint64_t remaining = block->size - size;

    if (block->segment->pool->small || pt->expandable)
        return remaining >= FSIM_PYTORCH_MIN_BLOCK;
    return size < pt->conf.max_split_size && remaining > FSIM_PYTORCH_SMALL_SIZE;
}

/* The size a free block can grow to: itself and the unmapped range after it. */
static inline uint64_t
expandable_size(const Block *block)
{
    return block->size +
           (block->next != NULL && block_unmapped(block->next) ? block->next->size : 0);
}

/* get_free_block(): the best fit on this stream, or NULL.  The block is taken out of the pool. */
static Block *
get_free_block(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size)
{
    StreamSet *set;
    Block *block;
    FreeCursor cursor;

    if (G_UNLIKELY(pt->gc_active))
        pool->clock++;
    set = pool_find(pool, stream);
    if (set == NULL)
        return NULL;
    block = freeset_lower_bound(&set->free, size, &cursor);
    if (block == NULL)
        return NULL;
    if (block_expandable(block)) {
        if (pt->expandable) {
            /* Best fit by the size a block can expand to: the frontier block, which can grow
             * over the whole unmapped rest of the reservation, comes after every block that
             * fits as it is. */
            FreeCursor ahead = cursor;
            Block *next = freeset_next(&set->free, &ahead);

            while (block_expandable(block) && next != NULL &&
                   expandable_size(next) < expandable_size(block)) {
                block = next;
                cursor = ahead;
                next = freeset_next(&set->free, &ahead);
            }
        } else {
            /* Expandable segments were switched off: only ordinary blocks qualify. */
            do
                block = freeset_next(&set->free, &cursor);
            while (block != NULL && block_expandable(block));
            if (block == NULL)
                return NULL;
        }
    }
    /* Never hand an oversize block to a normal request, and give an oversize request only a
     * near fit (max_non_split_rounding_mb; kLargeBuffer before PyTorch 2.6). */
    if (size < pt->conf.max_split_size && block->size >= pt->conf.max_split_size)
        return NULL;
    if (size >= pt->conf.max_split_size && block->size >= size + pt->conf.max_non_split_rounding)
        return NULL;
    freeset_erase_at(&set->free, &cursor);
    return block;
}

/* try_merge_blocks(): absorb @src into @dst when @src is free (or unmapped) like @dst.  Returns
 * the bytes absorbed, 0 when nothing merged. */
static uint64_t
try_merge(Pytorch *pt, Block *dst, Block *src)
{
    uint64_t subsumed;

    if (src == NULL || block_allocated(src) || block_unmapped(src) != block_unmapped(dst))
        return 0;
    if (block_unmapped(src))
        tree_erase(&src->segment->set->unmapped, src);
    else
        freeset_erase(&src->segment->set->free, src);
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev != NULL)
            dst->prev->next = dst;
        else
            dst->segment->head = dst;
    } else {
        dst->next = src->next;
        if (dst->next != NULL)
            dst->next->prev = dst;
    }
    subsumed = src->size;
    dst->size += subsumed;
    block_free(pt, src);
    pt->stats.num_merges++;
    return subsumed;
}

/* release_block(): cudaFree an unsplit cudaMalloc'd segment that is entirely free and cached. */
static void
release_block(Pytorch *pt, Block *block)
{
    Segment *segment = block->segment;

    g_assert(!segment->expandable && !block_is_split(block) && !block_allocated(block));
    pt->stats.num_device_free++;
    freeset_erase(&segment->set->free, block);
    fsim_device_mem_free(pt->base.device, block->addr, block->size);
    pt->total_allocated_memory -= block->size;
    fsim_counter_add(&pt->stats.segment, -1);
    fsim_counter_add(&pt->stats.reserved_bytes, -(int64_t)block->size);
    if (block->size >= pt->conf.max_split_size)
        fsim_counter_add(&pt->stats.oversize_segments, -1);
    segment_destroy(pt, segment);
    block_free(pt, block);
}

/* unmap_block(): give the whole pages inside a free expandable block back; the slivers before
 * and after them stay free blocks. */
static void
unmap_block(Pytorch *pt, Block *block)
{
    Segment *segment = block->segment;
    uint64_t page = segment->page;
    uint64_t begin = segment->addr + round_up(block->addr - segment->addr, page);
    uint64_t end = segment->addr + (block->addr + block->size - segment->addr) / page * page;
    uint64_t bytes;

    if (begin >= end)
        return;
    bytes = end - begin;
    freeset_erase(&segment->set->free, block);
    if (begin > block->addr) {
        Block *before = block_new(pt);

        before->segment = segment;
        before->addr = block->addr;
        before->size = begin - block->addr;
        block_link_before(before, block);
        pool_insert_free(before);
    }
    if (end < block->addr + block->size) {
        Block *after = block_new(pt);

        after->segment = segment;
        after->addr = end;
        after->size = block->addr + block->size - end;
        block_link_after(after, block);
        pool_insert_free(after);
    }
    block->addr = begin;
    block->size = bytes;
    block->flags |= BLOCK_UNMAPPED;
    fsim_device_unmap(pt->base.device, begin, bytes, page);
    try_merge(pt, block, block->prev);
    try_merge(pt, block, block->next);
    tree_insert(&segment->set->unmapped, block);
    pt->total_allocated_memory -= bytes;
    segment->mapped -= bytes;
    fsim_counter_add(&pt->stats.reserved_bytes, -(int64_t)bytes);
    pt->stats.num_device_free++;
}

/* release_expandable_segment(): the reservation is one unmapped block again: free it. */
static void
release_expandable_segment(Pytorch *pt, Block *block)
{
    Segment *segment = block->segment;

    g_assert(block_unmapped(block) && block->size == segment->size && segment->mapped == 0);
    tree_erase(&segment->set->unmapped, block);
    fsim_device_va_release(pt->base.device, segment->addr, segment->size);
    segment_destroy(pt, segment);
    block_free(pt, block);
}

/* release_blocks(): every unsplit cudaMalloc'd block of the pool in (stream, size, address)
 * order, then the free pages of every expandable block, gathered first in the same order because
 * unmapping reshapes the pool. */
static void
release_blocks(Pytorch *pt, Pool *pool)
{
    GPtrArray *blocks = pt->scratch;
    GPtrArray *to_unmap = pt->scratch2;

    g_ptr_array_set_size(blocks, 0);
    g_ptr_array_set_size(to_unmap, 0);
    for (guint s = 0; s < pool->n_streams; s++)
        freeset_snapshot(&pool->streams[s]->free, blocks);
    for (guint i = 0; i < blocks->len; i++) {
        Block *block = g_ptr_array_index(blocks, i);

        if (block_expandable(block))
            g_ptr_array_add(to_unmap, block);
        else if (!block_is_split(block))
            release_block(pt, block);
    }
    for (guint i = 0; i < to_unmap->len; i++) {
        Block *block = g_ptr_array_index(to_unmap, i);

        unmap_block(pt, block);
        if (!block_is_split(block))
            release_expandable_segment(pt, block);
    }
    g_ptr_array_set_size(blocks, 0);
    g_ptr_array_set_size(to_unmap, 0);
}

/* release_cached_blocks() = empty_cache(): the large pool, then the small one. */
static gboolean
release_cached_blocks(Pytorch *pt)
{
    pt->stats.num_sync_all_streams++;
    release_blocks(pt, &pt->large);
    release_blocks(pt, &pt->small);
    return TRUE;
}

static inline gboolean
releasable(const Block *block)
{
    return !block_expandable(block) && !block_is_split(block);
}

/* release_available_cached_blocks(): with max_split_size set, cudaFree one oversize block large
 * enough for the request, or else the largest oversize blocks of the stream until enough is
 * freed.  Expandable blocks are skipped (since PR #134338); so are split ones, which cannot be
 * oversize outside expandable segments. */
static gboolean
release_available_cached_blocks(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size)
{
    uint64_t max_split = pt->conf.max_split_size;
    uint64_t key = MAX(size, max_split);
    GPtrArray *candidates = pt->scratch;
    StreamSet *set;
    Block *block;
    FreeCursor cursor;
    uint64_t released = 0;

    if (max_split == G_MAXUINT64)
        return FALSE;
    set = pool_find(pool, stream);
    if (set == NULL)
        return FALSE;
    block = freeset_lower_bound(&set->free, key, &cursor);
    if (block != NULL && releasable(block)) {
        release_block(pt, block);
        return TRUE;
    }
    /* Largest first, down to max_split_size, until enough is freed. */
    g_ptr_array_set_size(candidates, 0);
    block = block != NULL ? freeset_prev(&set->free, &cursor) : freeset_last(&set->free, &cursor);
    for (; block != NULL && block->size >= max_split; block = freeset_prev(&set->free, &cursor))
        g_ptr_array_add(candidates, block);
    for (guint i = 0; i < candidates->len && released < key; i++) {
        block = g_ptr_array_index(candidates, i);
        if (releasable(block)) {
            released += block->size;
            release_block(pt, block);
        }
    }
    g_ptr_array_set_size(candidates, 0);
    return released >= key;
}

/* Blocks' age for the garbage collector: searches of their pool since they were cached. */
static inline uint64_t
gc_age(const Block *block)
{
    return (uint64_t)(int64_t)(int)(block->segment->pool->clock - block->gc_count_base);
}

/* garbage_collect_cached_blocks(): above garbage_collection_threshold x the allowed memory, free
 * unsplit large-pool blocks at least as old as the average, round after round, until the excess
 * is reclaimed (a round does not stop at the target: PyTorch wants GC to run rarely). */
static void
garbage_collect(Pytorch *pt)
{
    Pool *pool = &pt->large;
    GPtrArray *blocks = pt->scratch;
    uint64_t threshold =
        (uint64_t)(pt->conf.garbage_collection_threshold * (double)pt->allowed_memory_maximum);
    uint64_t target;
    uint64_t reclaimed = 0;
    uint64_t total_age = 0;
    int64_t freeable = 0;
    gboolean freed = TRUE;

    if (pt->total_allocated_memory <= threshold)
        return;
    target = pt->total_allocated_memory - threshold;
    for (guint s = 0; s < pool->n_streams; s++) {
        const FreeSet *set = &pool->streams[s]->free;
        FreeCursor cursor;

        for (Block *b = freeset_first(set, &cursor); b != NULL; b = freeset_next(set, &cursor)) {
            if (!block_is_split(b)) {
                total_age += gc_age(b);
                freeable++;
            }
        }
    }
    while (reclaimed < target && freed && freeable > 0) {
        double age_threshold = (double)total_age / (double)freeable;

        freed = FALSE;
        g_ptr_array_set_size(blocks, 0);
        for (guint s = 0; s < pool->n_streams; s++)
            freeset_snapshot(&pool->streams[s]->free, blocks);
        for (guint i = 0; i < blocks->len; i++) {
            Block *b = g_ptr_array_index(blocks, i);

            if (releasable(b) && (double)gc_age(b) >= age_threshold) {
                freed = TRUE;
                reclaimed += b->size;
                total_age -= gc_age(b);
                freeable--;
                release_block(pt, b);
            }
        }
    }
    g_ptr_array_set_size(blocks, 0);
}

/* ---- expandable segments --------------------------------------------------------------------- */

/* find_expandable_block(): the lowest address of the stream's reservations where @size bytes of
 * free-or-unmapped space start (an unmapped block, or the free block just before it), or a new
 * reservation as one unmapped block.  NULL when address space cannot be reserved. */
static Block *
find_expandable_block(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size)
{
    StreamSet *set = pool_stream(pool, stream);
    FsimDevice *device = pt->base.device;
    uint64_t page = pool->small ? FSIM_PYTORCH_SMALL_BUFFER : pt->conf.large_segment_size;
    uint64_t total = device->spec.total_bytes;
    uint64_t reservation;
    FsimAddr addr;
    Segment *segment;
    Block *block;

    for (Block *u = tree_first(&set->unmapped); u != NULL; u = tree_next(u)) {
        Block *c = u->prev != NULL && !block_allocated(u->prev) ? u->prev : u;
        uint64_t bytes = 0;

        for (Block *b = c; b != NULL && bytes < size && !block_allocated(b); b = b->next)
            bytes += b->size;
        if (bytes >= size)
            return c;
    }
    /* "enough address space for 1 1/8 the total memory on the GPU", in whole pages. */
    reservation = page * ((total + total / 8 + page - 1) / page);
    if (fsim_device_va_reserve(device, reservation, device->spec.granularity, &addr) != FSIM_OK)
        return NULL;
    segment = segment_new(pt, pool, stream, addr, reservation, page);
    block = block_new(pt);
    block->segment = segment;
    block->addr = addr;
    block->size = reservation;
    block->flags = BLOCK_UNMAPPED;
    segment->head = block;
    tree_insert(&set->unmapped, block);
    return block;
}

/* map_block(): map the pages covering the first @size bytes of the unmapped @block; the mapped
 * part becomes a free block merged with free neighbours.  FALSE (nothing changed) when the device
 * has no pages left. */
static gboolean
map_block(Pytorch *pt, Block *block, uint64_t size)
{
    Segment *segment = block->segment;
    uint64_t bytes = round_up(size, segment->page);

    g_assert(block_unmapped(block) && size <= block->size && bytes <= block->size);
    if (fsim_device_map(pt->base.device, block->addr, bytes, segment->page) != FSIM_OK)
        return FALSE;
    tree_erase(&segment->set->unmapped, block);
    block->flags &= ~(uint32_t)BLOCK_UNMAPPED;
    if (bytes < block->size) {
        Block *rest = block_new(pt);

        rest->segment = segment;
        rest->addr = block->addr + bytes;
        rest->size = block->size - bytes;
        rest->flags = BLOCK_UNMAPPED;
        block_link_after(rest, block);
        tree_insert(&segment->set->unmapped, rest);
        block->size = bytes;
    }
    try_merge(pt, block, block->prev);
    try_merge(pt, block, block->next);
    pool_insert_free(block);
    pt->total_allocated_memory += bytes;
    segment->mapped += bytes;
    fsim_counter_add(&pt->stats.reserved_bytes, (int64_t)bytes);
    pt->stats.num_device_alloc++;
    return TRUE;
}

/* try_allocate_expandable_block(): a free block of at least @size bytes, mapping pages at the
 * lowest address that can hold it.  Pages mapped before a failure stay mapped (free), as in
 * PyTorch. */
static Block *
try_allocate_expandable_block(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size)
{
    Block *candidate = find_expandable_block(pt, pool, stream, size);

    if (candidate == NULL)
        return NULL;
    if (block_unmapped(candidate) && !map_block(pt, candidate, MIN(candidate->size, size)))
        return NULL;
    while (candidate->size < size) {
        /* free -> unmapped -> ...: map what is missing; the new pages merge with the free block
         * before them, which map_block() absorbs into @next. */
        Block *next = candidate->next;

        /* Only a new reservation smaller than the request gets here without room after it; its
         * mapping cannot succeed on a device no larger than 8/9 of it, but be safe. */
        if (next == NULL || !block_unmapped(next) ||
            !map_block(pt, next, MIN(size - candidate->size, next->size)))
            return NULL;
        candidate = next;
    }
    freeset_erase(&candidate->segment->set->free, candidate);
    return candidate;
}

/* ---- allocation ------------------------------------------------------------------------------ */

/* alloc_block(): new memory for the pool: a cudaMalloc'd segment of @alloc_size, or pages of an
 * expandable segment for @size.  NULL when the device (or the memory fraction) says no. */
static Block *
alloc_block(Pytorch *pt, Pool *pool, uint64_t stream, uint64_t size, uint64_t alloc_size,
            gboolean retry)
{
    FsimAddr addr;
    Segment *segment;
    Block *block;

    if (retry)
        pt->stats.num_alloc_retries++;
    if (pt->conf.has_memory_fraction &&
        pt->total_allocated_memory + alloc_size > pt->allowed_memory_maximum)
        return NULL;
    if (pt->expandable)
        return try_allocate_expandable_block(pt, pool, stream, size);
    if (fsim_device_mem_alloc(pt->base.device, alloc_size, &addr) != FSIM_OK)
        return NULL;
    segment = segment_new(pt, pool, stream, addr, alloc_size, 0);
    block = block_new(pt);
    block->segment = segment;
    block->addr = addr;
    block->size = alloc_size;
    segment->head = block;
    pt->total_allocated_memory += alloc_size;
    fsim_counter_add(&pt->stats.segment, 1);
    fsim_counter_add(&pt->stats.reserved_bytes, (int64_t)alloc_size);
    if (alloc_size >= pt->conf.max_split_size)
        fsim_counter_add(&pt->stats.oversize_segments, 1);
    pt->stats.num_device_alloc++;
    return block;
}

/* alloc_found_block(): hand out the low @size bytes of @block, the rest going back to the pool
 * when @split. */
static Block *
alloc_found_block(Pytorch *pt, Block *block, uint64_t size, uint64_t requested, gboolean split)
{
    Stats *stats = &pt->stats;
    gboolean already_split = block_is_split(block);
    gboolean expandable = block_expandable(block);

    if (split) {
        Block *remaining = block;

        block = block_new(pt);
        block->segment = remaining->segment;
        block->addr = remaining->addr;
        block->size = size;
        block_link_before(block, remaining);
        remaining->addr += size;
        remaining->size -= size;
        pool_insert_free(remaining);
        stats->num_splits++;
        if (already_split && !expandable) {
            /* an inactive split block shrinks by @size */
            fsim_counter_add(&stats->inactive_split_bytes, -(int64_t)size);
        } else if (!expandable) {
            /* a new inactive split block appears */
            fsim_counter_add(&stats->inactive_split_bytes, (int64_t)remaining->size);
            fsim_counter_add(&stats->inactive_split, 1);
        }
    } else if (already_split && !expandable) {
        fsim_counter_add(&stats->inactive_split_bytes, -(int64_t)block->size);
        fsim_counter_add(&stats->inactive_split, -1);
    }
    block->flags |= BLOCK_ALLOCATED;
    block->requested = requested;
    fsim_counter_add(&stats->allocation, 1);
    fsim_counter_add(&stats->allocated_bytes, (int64_t)block->size);
    fsim_counter_add(&stats->active, 1);
    fsim_counter_add(&stats->active_bytes, (int64_t)block->size);
    fsim_counter_add(&stats->requested_bytes, (int64_t)requested);
    if (block->size >= pt->conf.max_split_size)
        fsim_counter_add(&stats->oversize_allocations, 1);
    return block;
}

FsimStatus
fsim_pytorch_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    Pytorch *pt = pytorch_from_policy(self);
    uint64_t size = fsim_pytorch_round_size(&pt->conf, req->size);
    Pool *pool = size <= FSIM_PYTORCH_SMALL_SIZE ? &pt->small : &pt->large;
    uint64_t alloc_size = fsim_pytorch_allocation_size(&pt->conf, size);
    Block *block = get_free_block(pt, pool, req->stream, size);

    if (block == NULL) {
        if (pt->gc_active)
            garbage_collect(pt);
        block = alloc_block(pt, pool, req->stream, size, alloc_size, FALSE);
        if (block == NULL && release_available_cached_blocks(pt, pool, req->stream, size))
            block = alloc_block(pt, pool, req->stream, size, alloc_size, FALSE);
        if (block == NULL && release_cached_blocks(pt))
            block = alloc_block(pt, pool, req->stream, size, alloc_size, TRUE);
        if (block == NULL) {
            pt->stats.num_ooms++;
            return FSIM_OOM;
        }
    }
    block = alloc_found_block(pt, block, size, req->size, should_split(pt, block, size));
    out->addr = block->addr;
    out->size = block->size;
    out->cookie = (uint64_t)(uintptr_t)block;
    return FSIM_OK;
}

/* free() and free_block(): the block is cached again, merged with free neighbours. */
void
fsim_pytorch_dealloc(FsimPolicy *self, const FsimBlock *fblock, FsimTime now)
{
    Pytorch *pt = pytorch_from_policy(self);
    Block *block = (Block *)(uintptr_t)fblock->cookie;
    Stats *stats = &pt->stats;
    uint64_t size = block->size;
    uint64_t requested = block->requested;
    Block *candidates[2];
    int64_t net_blocks = 0;
    int64_t net_bytes = 0;

    (void)now;
    g_assert(block_allocated(block) && block->addr == fblock->addr && size == fblock->size);
    if ((block->flags & BLOCK_PENDING) == 0) {
        /* free(): the allocation ends (a seeded pending block's ended before the trace) */
        fsim_counter_add(&stats->allocation, -1);
        fsim_counter_add(&stats->allocated_bytes, -(int64_t)size);
        if (size >= pt->conf.max_split_size)
            fsim_counter_add(&stats->oversize_allocations, -1);
    }
    block->flags &= ~(uint32_t)(BLOCK_ALLOCATED | BLOCK_PENDING);
    candidates[0] = block->prev;
    candidates[1] = block->next;
    for (int i = 0; i < 2; i++) {
        uint64_t subsumed = try_merge(pt, block, candidates[i]);

        if (subsumed > 0) {
            net_blocks--;
            net_bytes -= (int64_t)subsumed;
        }
    }
    pool_insert_free(block);
    if (block_is_split(block)) {
        net_blocks++;
        net_bytes += (int64_t)block->size;
    }
    if (!block_expandable(block)) {
        /* inactive_split leaves expandable segments out: their free pages can always go */
        fsim_counter_add(&stats->inactive_split, net_blocks);
        fsim_counter_add(&stats->inactive_split_bytes, net_bytes);
    }
    fsim_counter_add(&stats->active, -1);
    fsim_counter_add(&stats->active_bytes, -(int64_t)size);
    fsim_counter_add(&stats->requested_bytes, -(int64_t)requested);
}

void
fsim_pytorch_empty_cache(FsimPolicy *self, FsimTime now)
{
    (void)now;
    release_cached_blocks(pytorch_from_policy(self));
}

/* ---- creation and destruction ---------------------------------------------------------------- */

/* clang-format off */
#define PYTORCH_COMMON_KNOBS                                                                       \
    {"max_split_size_mb", "unlimited",                                                          \
     "blocks of this many MiB or more are never split and serve only near-fit requests (>= 20)"}, \
    {"max_non_split_rounding_mb", "20",                                                         \
     "how many MiB an oversize cached block may exceed an oversize request by (>= 20)"},          \
    {"roundup_power2_divisions", "0",                                                           \
     "round requests up to 1/N of their power-of-two interval: N or [MIB:N,...,>:N] (0 = off)"},  \
    {"roundup_bypass_threshold_mb", "unlimited",                                                \
     "PyTorch 1.13/2.0: requests above this many MiB skip the power-of-two rounding"},           \
    {"garbage_collection_threshold", "0",                                                       \
     "free old cached blocks above this fraction of the allowed memory (needs a fraction)"},     \
    {"per_process_memory_fraction", "unset",                                                    \
     "the fraction of the device's memory the process may hold (set_per_process_memory_fraction)"}, \
    {"large_segment_size_mb", "20",                                                             \
     "MiB of the segment for 1-10 MiB requests and of a large-pool expandable page"}

const FsimKnob fsim_pytorch_caching_knobs[] = {
    PYTORCH_COMMON_KNOBS,
    {"expandable_segments", "False", "True: map pages into one growing segment per pool and stream"},
    {NULL, NULL, NULL},
};

const FsimKnob fsim_pytorch_expandable_knobs[] = {
    PYTORCH_COMMON_KNOBS,
    {NULL, NULL, NULL},
};
/* clang-format on */

FsimPolicy *
fsim_pytorch_create(const FsimPolicyOps *ops, FsimDevice *device, GKeyFile *config,
                    gboolean force_expandable, GError **error)
{
    Pytorch *pt;
    FsimAllocConf conf;

    if (!fsim_alloc_conf_load(&conf, config, ops->name, error))
        return NULL;
    if (force_expandable)
        conf.expandable_segments = TRUE;
    if (conf.expandable_segments && conf.large_segment_size % device->spec.granularity != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "%s.large_segment_size_mb: %" G_GUINT64_FORMAT
                    " MiB is not a whole number of %" G_GUINT64_FORMAT
                    "-byte device pages, which expandable segments map",
                    ops->name, conf.large_segment_size / FSIM_MiB, device->spec.granularity);
        return NULL;
    }
    pt = g_new0(Pytorch, 1);
    pt->base.ops = ops;
    pt->base.device = device;
    pt->conf = conf;
    pt->expandable = conf.expandable_segments;
    pt->gc_active = conf.has_memory_fraction && conf.garbage_collection_threshold > 0.0;
    /* setMemoryFraction(): fraction x the total cudaMemGetInfo reports */
    pt->allowed_memory_maximum =
        (uint64_t)(conf.per_process_memory_fraction * (double)device->spec.total_bytes);
    pt->small.small = TRUE;
    pt->slabs = g_ptr_array_new_with_free_func(g_free);
    pt->scratch = g_ptr_array_new();
    pt->scratch2 = g_ptr_array_new();
    return &pt->base;
}

static void
pool_clear(Pool *pool)
{
    for (guint s = 0; s < pool->n_streams; s++) {
        freeset_clear(&pool->streams[s]->free);
        g_free(pool->streams[s]);
    }
    g_free(pool->streams);
}

void
fsim_pytorch_destroy(FsimPolicy *self)
{
    Pytorch *pt = pytorch_from_policy(self);

    /* The device forgets what is left; the blocks live in the slabs. */
    while (pt->segments != NULL)
        segment_destroy(pt, pt->segments);
    pool_clear(&pt->small);
    pool_clear(&pt->large);
    g_ptr_array_unref(pt->slabs);
    g_ptr_array_unref(pt->scratch);
    g_ptr_array_unref(pt->scratch2);
    g_free(pt);
}

const FsimAllocConf *
fsim_pytorch_conf(const FsimPolicy *self)
{
    return &pytorch_from_const_policy(self)->conf;
}

/* ---- statistics ------------------------------------------------------------------------------ */

static void
stats_extra(FsimPolicyStats *out, const char *name, uint64_t value)
{
    g_assert(out->n_extra < G_N_ELEMENTS(out->extra));
    out->extra[out->n_extra].name = name;
    out->extra[out->n_extra].value = value;
    out->n_extra++;
}

static uint64_t
pool_largest_free(const Pool *pool)
{
    uint64_t largest = 0;

    for (guint s = 0; s < pool->n_streams; s++) {
        FreeCursor cursor;
        const Block *last = freeset_last(&pool->streams[s]->free, &cursor);

        if (last != NULL && last->size > largest)
            largest = last->size;
    }
    return largest;
}

void
fsim_pytorch_get_stats(const FsimPolicy *self, FsimPolicyStats *out)
{
    const Pytorch *pt = pytorch_from_const_policy(self);
    const Stats *s = &pt->stats;

    out->cached_bytes = (uint64_t)(s->reserved_bytes.current - s->active_bytes.current);
    out->largest_free_block = MAX(pool_largest_free(&pt->small), pool_largest_free(&pt->large));
    out->num_splits = s->num_splits;
    out->num_merges = s->num_merges;
    out->num_alloc_retries = s->num_alloc_retries;
    out->n_extra = 0;
    /* torch.cuda.memory_stats() names, aggregate over both pools. */
    stats_extra(out, "allocated_bytes.all.current", (uint64_t)s->allocated_bytes.current);
    stats_extra(out, "allocated_bytes.all.peak", (uint64_t)s->allocated_bytes.peak);
    stats_extra(out, "reserved_bytes.all.current", (uint64_t)s->reserved_bytes.current);
    stats_extra(out, "reserved_bytes.all.peak", (uint64_t)s->reserved_bytes.peak);
    stats_extra(out, "active_bytes.all.current", (uint64_t)s->active_bytes.current);
    stats_extra(out, "requested_bytes.all.current", (uint64_t)s->requested_bytes.current);
    stats_extra(out, "inactive_split_bytes.all.current", (uint64_t)s->inactive_split_bytes.current);
    stats_extra(out, "inactive_split.all.current", (uint64_t)s->inactive_split.current);
    stats_extra(out, "segment.all.current", (uint64_t)s->segment.current);
    stats_extra(out, "num_alloc_retries", s->num_alloc_retries);
    stats_extra(out, "num_ooms", s->num_ooms);
    stats_extra(out, "num_sync_all_streams", s->num_sync_all_streams);
    stats_extra(out, "num_device_alloc", s->num_device_alloc);
    stats_extra(out, "num_device_free", s->num_device_free);
    stats_extra(out, "oversize_allocations.current", (uint64_t)s->oversize_allocations.current);
    stats_extra(out, "oversize_segments.current", (uint64_t)s->oversize_segments.current);
}

/* ---- seeding the state at trace start -------------------------------------------------------- */

static gboolean G_GNUC_PRINTF(2, 3) seed_fail(GError **error, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error_literal(error, FSIM_ERROR, FSIM_ERROR_UNSUPPORTED, message);
    return FALSE;
}

static gboolean
seed_is_small(const FsimSeedSegment *segment)
{
    if (segment->pool != FSIM_POOL_UNKNOWN)
        return segment->pool == FSIM_POOL_SMALL;
    /* Small-pool segments are kSmallBuffer; large-pool ones are larger (20 MiB, or >= 10 MiB). */
    return segment->size <= FSIM_PYTORCH_SMALL_BUFFER;
}

/* Append a block [addr, addr+size) to the chain ending at *tail. */
static Block *
seed_block(Pytorch *pt, Segment *segment, Block **tail, uint64_t addr, uint64_t size,
           uint32_t flags)
{
    Block *block = block_new(pt);

    block->segment = segment;
    block->addr = addr;
    block->size = size;
    block->flags = flags;
    if (*tail == NULL)
        segment->head = block;
    else
        block_link_after(block, *tail);
    *tail = block;
    return block;
}

/* Fill [start, end) of @segment with the state's blocks from *next on, free gaps between them;
 * recorded addresses + @shift (unsigned wrap-around) are where the device put the segment. */
static void
seed_range(Pytorch *pt, Segment *segment, Block **tail, uint64_t start, uint64_t end,
           uint64_t shift, const FsimInitialState *state, gsize *next, FsimBlock *out)
{
    uint64_t at = start;

    while (*next < state->n_blocks && state->blocks[*next].addr < end) {
        const FsimSeedBlock *seed = &state->blocks[*next];
        Block *block;

        if (seed->addr > at)
            seed_block(pt, segment, tail, at + shift, seed->addr - at, 0);
        block = seed_block(pt, segment, tail, seed->addr + shift, seed->size,
                           BLOCK_ALLOCATED | (seed->pending_free ? BLOCK_PENDING : 0));
        block->requested = seed->requested;
        out[*next].addr = block->addr;
        out[*next].size = block->size;
        out[*next].cookie = (uint64_t)(uintptr_t)block;
        at = seed->addr + seed->size;
        (*next)++;
    }
    if (at < end)
        seed_block(pt, segment, tail, at + shift, end - at, 0);
}

/* Account the blocks of a seeded segment as alloc_found_block and free_block would have. */
static void
seed_account(Pytorch *pt, Segment *segment)
{
    Stats *stats = &pt->stats;

    for (Block *b = segment->head; b != NULL; b = b->next) {
        if (block_unmapped(b)) {
            tree_insert(&segment->set->unmapped, b);
        } else if (!block_allocated(b)) {
            pool_insert_free(b);
            if (!segment->expandable && block_is_split(b)) {
                fsim_counter_add(&stats->inactive_split, 1);
                fsim_counter_add(&stats->inactive_split_bytes, (int64_t)b->size);
            }
        } else {
            if ((b->flags & BLOCK_PENDING) == 0) {
                fsim_counter_add(&stats->allocation, 1);
                fsim_counter_add(&stats->allocated_bytes, (int64_t)b->size);
                if (b->size >= pt->conf.max_split_size)
                    fsim_counter_add(&stats->oversize_allocations, 1);
            }
            fsim_counter_add(&stats->active, 1);
            fsim_counter_add(&stats->active_bytes, (int64_t)b->size);
            fsim_counter_add(&stats->requested_bytes, (int64_t)b->requested);
        }
    }
}

static gboolean
seed_check_blocks(const FsimInitialState *state, gsize first, gsize next, uint64_t start,
                  uint64_t end, GError **error)
{
    for (gsize i = first; i < next; i++) {
        const FsimSeedBlock *seed = &state->blocks[i];

        if (seed->addr < start || seed->addr + seed->size > end || seed->size == 0)
            return seed_fail(error,
                             "block 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT
                             " bytes) is not inside a segment",
                             seed->addr, seed->size);
    }
    return TRUE;
}

/* The index of the first block of the state at or above @addr. */
static gsize
seed_lower_bound(const FsimInitialState *state, uint64_t addr)
{
    gsize lo = 0;
    gsize hi = state->n_blocks;

    while (lo < hi) {
        gsize mid = lo + (hi - lo) / 2;

        if (state->blocks[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Fill [start, end) with the state's blocks there, free gaps between them; returns how many
 * blocks it placed. */
static gsize
seed_fill(Pytorch *pt, Segment *segment, Block **tail, uint64_t start, uint64_t end, uint64_t shift,
          const FsimInitialState *state, FsimBlock *out, GError **error)
{
    gsize first = seed_lower_bound(state, start);
    gsize next = first;

    seed_range(pt, segment, tail, start, end, shift, state, &next, out);
    if (!seed_check_blocks(state, first, next, start, end, error))
        return G_MAXSIZE;
    return next - first;
}

/* A cudaMalloc'd segment of the initial state, at its recorded address when the device can put
 * it there (always, with a device that has nothing else), elsewhere with its blocks moved along
 * otherwise: PyTorch's decisions depend on addresses only within a segment. */
static gboolean
seed_malloc_segment(Pytorch *pt, const FsimSeedSegment *seed, const FsimInitialState *state,
                    gsize *placed, FsimBlock *out, GError **error)
{
    FsimDevice *device = pt->base.device;
    Pool *pool = seed_is_small(seed) ? &pt->small : &pt->large;
    Segment *segment;
    Block *tail = NULL;
    FsimAddr addr = 0;
    gsize n;

    fsim_device_set_next_address(device, seed->addr);
    if (fsim_device_mem_alloc(device, seed->size, &addr) != FSIM_OK) {
        fsim_device_clear_next_address(device);
        return seed_fail(error,
                         "the device cannot hold the segment at 0x%" G_GINT64_MODIFIER
                         "x (%" G_GUINT64_FORMAT " bytes)",
                         seed->addr, seed->size);
    }
    segment = segment_new(pt, pool, seed->stream, addr, seed->size, 0);
    pt->total_allocated_memory += seed->size;
    fsim_counter_add(&pt->stats.segment, 1);
    fsim_counter_add(&pt->stats.reserved_bytes, (int64_t)seed->size);
    if (seed->size >= pt->conf.max_split_size)
        fsim_counter_add(&pt->stats.oversize_segments, 1);
    if (addr != seed->addr)
        g_debug("seed: segment 0x%" G_GINT64_MODIFIER "x placed at 0x%" G_GINT64_MODIFIER "x",
                seed->addr, addr);
    n = seed_fill(pt, segment, &tail, seed->addr, seed->addr + seed->size, addr - seed->addr, state,
                  out, error);
    seed_account(pt, segment);
    if (n == G_MAXSIZE)
        return FALSE;
    *placed += n;
    return TRUE;
}

/* The mapped ranges of one (pool, stream) of expandable segments, in address order: one
 * reservation starting at the lowest range (the part of the real reservation below it is unknown;
 * PyTorch maps from the start, so it is usually empty), each range mapped, unmapped gaps between
 * them and after the last.  Moved along with the reservation when the device puts it elsewhere. */
static gboolean
seed_expandable_group(Pytorch *pt, const FsimInitialState *state, const guint *ranges,
                      guint n_ranges, gsize *placed, FsimBlock *out, GError **error)
{
    FsimDevice *device = pt->base.device;
    const FsimSeedSegment *first = &state->segments[ranges[0]];
    gboolean small = seed_is_small(first);
    Pool *pool = small ? &pt->small : &pt->large;
    uint64_t page = small ? FSIM_PYTORCH_SMALL_BUFFER : pt->conf.large_segment_size;
    uint64_t total = device->spec.total_bytes;
    uint64_t reservation = page * ((total + total / 8 + page - 1) / page);
    Segment *segment;
    Block *tail = NULL;
    uint64_t at;
    uint64_t shift;
    FsimAddr addr = 0;
    gboolean ok = TRUE;

    fsim_device_set_next_address(device, first->addr);
    if (fsim_device_va_reserve(device, reservation, device->spec.granularity, &addr) != FSIM_OK) {
        fsim_device_clear_next_address(device);
        return seed_fail(error, "the device cannot reserve an expandable segment");
    }
    segment = segment_new(pt, pool, first->stream, addr, reservation, page);
    shift = addr - first->addr;
    at = addr;
    if (addr != first->addr)
        g_debug("seed: expandable segment 0x%" G_GINT64_MODIFIER "x placed at 0x%" G_GINT64_MODIFIER
                "x",
                first->addr, addr);
    for (guint r = 0; ok && r < n_ranges; r++) {
        const FsimSeedSegment *seed = &state->segments[ranges[r]];
        uint64_t start = seed->addr + shift;
        gsize n;

        if ((start - addr) % page != 0 || seed->size % page != 0 || start < at ||
            start + seed->size > addr + reservation) {
            ok = seed_fail(error,
                           "the expandable range 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT
                           " bytes) is not made of %" G_GUINT64_FORMAT
                           "-byte pages of one reservation",
                           seed->addr, seed->size, page);
            break;
        }
        if (fsim_device_map(device, start, seed->size, page) != FSIM_OK) {
            ok = seed_fail(error,
                           "the device cannot map the expandable range 0x%" G_GINT64_MODIFIER "x",
                           seed->addr);
            break;
        }
        if (start > at)
            seed_block(pt, segment, &tail, at, start - at, BLOCK_UNMAPPED);
        pt->total_allocated_memory += seed->size;
        segment->mapped += seed->size;
        fsim_counter_add(&pt->stats.reserved_bytes, (int64_t)seed->size);
        n = seed_fill(pt, segment, &tail, seed->addr, seed->addr + seed->size, shift, state, out,
                      error);
        at = start + seed->size;
        if (n == G_MAXSIZE) {
            ok = FALSE;
            break;
        }
        *placed += n;
    }
    if (at < addr + reservation)
        seed_block(pt, segment, &tail, at, addr + reservation - at, BLOCK_UNMAPPED);
    /* Free blocks of adjacent ranges are one block in PyTorch. */
    for (Block *b = segment->head; b != NULL && b->next != NULL;) {
        if (!block_allocated(b) && !block_allocated(b->next) &&
            block_unmapped(b) == block_unmapped(b->next)) {
            Block *gone = b->next;

            b->size += gone->size;
            b->next = gone->next;
            if (b->next != NULL)
                b->next->prev = b;
            block_free(pt, gone);
        } else {
            b = b->next;
        }
    }
    seed_account(pt, segment);
    return ok;
}

gboolean
fsim_pytorch_seed(FsimPolicy *self, const FsimInitialState *state, FsimBlock *blocks,
                  GError **error)
{
    Pytorch *pt = pytorch_from_policy(self);
    g_autofree guint *expandable = g_new(guint, MAX(state->n_segments, 1));
    g_autofree guint *group = g_new(guint, MAX(state->n_segments, 1));
    g_autofree gboolean *done = g_new0(gboolean, MAX(state->n_segments, 1));
    guint n_expandable = 0;
    gsize placed = 0;

    if (pt->n_segments != 0)
        return seed_fail(error, "the policy already holds memory");
    /* cudaMalloc'd segments, in address order, each with the blocks inside it; expandable
     * ranges are seeded per (pool, stream) afterwards. */
    for (gsize i = 0; i < state->n_segments; i++) {
        if (state->segments[i].expandable)
            expandable[n_expandable++] = (guint)i;
        else if (!seed_malloc_segment(pt, &state->segments[i], state, &placed, blocks, error))
            return FALSE;
    }
    for (guint i = 0; i < n_expandable; i++) {
        const FsimSeedSegment *lead = &state->segments[expandable[i]];
        guint n = 0;

        if (done[i])
            continue;
        for (guint j = i; j < n_expandable; j++) {
            const FsimSeedSegment *other = &state->segments[expandable[j]];

            if (!done[j] && other->stream == lead->stream &&
                seed_is_small(other) == seed_is_small(lead)) {
                group[n++] = expandable[j];
                done[j] = TRUE;
            }
        }
        if (!seed_expandable_group(pt, state, group, n, &placed, blocks, error))
            return FALSE;
    }
    if (placed != state->n_blocks)
        return seed_fail(error,
                         "%" G_GSIZE_FORMAT " of the %" G_GSIZE_FORMAT
                         " blocks alive at trace start lie outside every segment",
                         state->n_blocks - placed, state->n_blocks);
    return TRUE;
}

/* ---- invariants ------------------------------------------------------------------------------ */

static gboolean G_GNUC_PRINTF(2, 3) check_fail(GError **error, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error_literal(error, FSIM_ERROR, FSIM_ERROR_FAILED, message);
    return FALSE;
}

/* Red-black rules, order and parent links of a subtree; returns its black height, -1 if broken. */
static int
check_subtree(const Tree *tree, const Block *node, const Block *parent, const Block *low,
              const Block *high)
{
    int left;
    int right;

    if (node == NULL)
        return 1;
    if (node->parent != parent || (node->flags & BLOCK_IN_TREE) == 0)
        return -1;
    if ((low != NULL && !tree_less(low, node)) || (high != NULL && !tree_less(node, high)))
        return -1;
    if (is_red(node) && (is_red(node->left) || is_red(node->right)))
        return -1;
    left = check_subtree(tree, node->left, node, low, node);
    right = check_subtree(tree, node->right, node, node, high);
    if (left < 0 || left != right)
        return -1;
    return left + (is_red(node) ? 0 : 1);
}

static gboolean
check_tree(const Tree *tree, uint64_t stream, GError **error)
{
    if (is_red(tree->root) || check_subtree(tree, tree->root, NULL, NULL, NULL) < 0)
        return check_fail(error, "the unmapped tree of stream %" G_GUINT64_FORMAT " is broken",
                          stream);
    return TRUE;
}

/* Bins in order, entries sorted and in the right bin, keys equal to their blocks', the bitmap
 * and the count right. */
static gboolean
check_freeset(const FreeSet *set, uint64_t stream, GError **error)
{
    gsize count = 0;
    const FreeEntry *previous = NULL;

    for (guint b = 0; b < FREE_BINS; b++) {
        const FreeBin *bin = &set->bins[b];
        gboolean marked = (set->nonempty[b >> 6] >> (b & 63)) & 1;

        if (marked != (bin->len > 0))
            return check_fail(error, "stream %" G_GUINT64_FORMAT ": bin %u: bitmap is wrong",
                              stream, b);
        for (guint i = 0; i < bin->len; i++) {
            const FreeEntry *e = &bin->entries[i];

            if (e->block->size != e->size || e->block->addr != e->addr || free_bin(e->size) != b ||
                (e->block->flags & BLOCK_IN_TREE) == 0 ||
                (previous != NULL && (previous->size > e->size ||
                                      (previous->size == e->size && previous->addr >= e->addr))))
                return check_fail(error,
                                  "stream %" G_GUINT64_FORMAT ": free block 0x%" G_GINT64_MODIFIER
                                  "x is out of place",
                                  stream, e->addr);
            previous = e;
            count++;
        }
    }
    if (count != set->count)
        return check_fail(error,
                          "stream %" G_GUINT64_FORMAT ": %" G_GSIZE_FORMAT
                          " free blocks counted, %" G_GSIZE_FORMAT " held",
                          stream, set->count, count);
    return TRUE;
}

static gboolean
pool_holds(const Pool *pool, const StreamSet *set)
{
    for (guint s = 0; s < pool->n_streams; s++) {
        if (pool->streams[s] == set)
            return TRUE;
    }
    return FALSE;
}

static gboolean
check_pool(const Pool *pool, gsize *free_blocks, gsize *unmapped_blocks, GError **error)
{
    for (guint s = 0; s < pool->n_streams; s++) {
        const StreamSet *set = pool->streams[s];

        if (s > 0 && pool->streams[s - 1]->stream >= set->stream)
            return check_fail(error, "streams out of order");
        if (!check_freeset(&set->free, set->stream, error) ||
            !check_tree(&set->unmapped, set->stream, error))
            return FALSE;
        *free_blocks += set->free.count;
        *unmapped_blocks += set->unmapped.count;
    }
    return TRUE;
}

/* Whether @block is reachable in @tree (by a search on its own key). */
static gboolean
tree_contains(const Tree *tree, const Block *block)
{
    const Block *node = tree->root;

    while (node != NULL && node != block)
        node = tree_less(block, node) ? node->left : node->right;
    return node == block;
}

static gboolean
check_segment(const Segment *segment, Stats *sum, gsize *free_blocks, gsize *unmapped_blocks,
              GError **error)
{
    uint64_t at = segment->addr;
    uint64_t mapped = 0;

    if (segment->head == NULL || segment->head->prev != NULL)
        return check_fail(error, "segment 0x%" G_GINT64_MODIFIER "x has no head", segment->addr);
    for (const Block *b = segment->head; b != NULL; b = b->next) {
        gboolean in_free = (b->flags & BLOCK_IN_TREE) != 0 && !block_unmapped(b);

        if (b->segment != segment || b->addr != at || b->size == 0)
            return check_fail(error,
                              "segment 0x%" G_GINT64_MODIFIER "x: block 0x%" G_GINT64_MODIFIER
                              "x breaks the address chain",
                              segment->addr, b->addr);
        if (b->next != NULL && b->next->prev != b)
            return check_fail(error, "block 0x%" G_GINT64_MODIFIER "x: broken links", b->addr);
        if (block_unmapped(b)) {
            if (!segment->expandable || block_allocated(b) ||
                (b->addr - segment->addr) % segment->page != 0 || b->size % segment->page != 0)
                return check_fail(error, "unmapped block 0x%" G_GINT64_MODIFIER "x is misplaced",
                                  b->addr);
            if (!tree_contains(&segment->set->unmapped, b))
                return check_fail(
                    error, "unmapped block 0x%" G_GINT64_MODIFIER "x is not in its set", b->addr);
            (*unmapped_blocks)++;
        } else {
            mapped += b->size;
        }
        if (!block_allocated(b) && !block_unmapped(b)) {
            FreeCursor cursor;

            if (!in_free || !freeset_find(&segment->set->free, b, &cursor))
                return check_fail(error, "free block 0x%" G_GINT64_MODIFIER "x is not cached",
                                  b->addr);
            (*free_blocks)++;
            if (!segment->expandable && block_is_split(b)) {
                sum->inactive_split.current++;
                sum->inactive_split_bytes.current += (int64_t)b->size;
            }
        }
        if (block_allocated(b)) {
            if ((b->flags & BLOCK_IN_TREE) != 0)
                return check_fail(error, "allocated block 0x%" G_GINT64_MODIFIER "x is cached",
                                  b->addr);
            if ((b->flags & BLOCK_PENDING) == 0) {
                sum->allocated_bytes.current += (int64_t)b->size;
                sum->allocation.current++;
            }
            sum->active_bytes.current += (int64_t)b->size;
            sum->requested_bytes.current += (int64_t)b->requested;
        }
        if (b->next != NULL && !block_allocated(b) && !block_allocated(b->next) &&
            block_unmapped(b) == block_unmapped(b->next))
            return check_fail(error,
                              "blocks 0x%" G_GINT64_MODIFIER "x and 0x%" G_GINT64_MODIFIER
                              "x should have merged",
                              b->addr, b->next->addr);
        at += b->size;
    }
    if (at != segment->addr + segment->size)
        return check_fail(error,
                          "segment 0x%" G_GINT64_MODIFIER "x: blocks cover %" G_GUINT64_FORMAT
                          " of %" G_GUINT64_FORMAT " bytes",
                          segment->addr, at - segment->addr, segment->size);
    if (segment->expandable && mapped != segment->mapped)
        return check_fail(error,
                          "expandable segment 0x%" G_GINT64_MODIFIER "x: %" G_GUINT64_FORMAT
                          " bytes mapped, %" G_GUINT64_FORMAT " counted",
                          segment->addr, mapped, segment->mapped);
    if (!pool_holds(segment->pool, segment->set))
        return check_fail(error, "segment 0x%" G_GINT64_MODIFIER "x: lost stream", segment->addr);
    sum->reserved_bytes.current += (int64_t)(segment->expandable ? mapped : segment->size);
    if (!segment->expandable)
        sum->segment.current++;
    return TRUE;
}

gboolean
fsim_pytorch_check(const FsimPolicy *self, GError **error)
{
    const Pytorch *pt = pytorch_from_const_policy(self);
    const Stats *s = &pt->stats;
    Stats sum;
    gsize tree_free = 0;
    gsize tree_unmapped = 0;
    gsize chain_free = 0;
    gsize chain_unmapped = 0;
    guint n_segments = 0;
    uint64_t device_bytes = 0;

    memset(&sum, 0, sizeof(sum));
    if (!check_pool(&pt->small, &tree_free, &tree_unmapped, error) ||
        !check_pool(&pt->large, &tree_free, &tree_unmapped, error))
        return FALSE;
    for (const Segment *segment = pt->segments; segment != NULL; segment = segment->next_segment) {
        if (!check_segment(segment, &sum, &chain_free, &chain_unmapped, error))
            return FALSE;
        device_bytes +=
            segment->expandable ? segment->mapped : fsim_device_round(self->device, segment->size);
        n_segments++;
    }
    if (n_segments != pt->n_segments || tree_free != chain_free || tree_unmapped != chain_unmapped)
        return check_fail(
            error,
            "%u segments listed of %u; %" G_GSIZE_FORMAT " free blocks cached of %" G_GSIZE_FORMAT
            "; %" G_GSIZE_FORMAT " unmapped of %" G_GSIZE_FORMAT,
            n_segments, pt->n_segments, tree_free, chain_free, tree_unmapped, chain_unmapped);
    if (device_bytes != (uint64_t)self->device->reserved.current ||
        (uint64_t)sum.reserved_bytes.current != pt->total_allocated_memory)
        return check_fail(error,
                          "reserved: device %" G_GINT64_FORMAT ", segments %" G_GUINT64_FORMAT
                          ", PyTorch's count %" G_GUINT64_FORMAT,
                          self->device->reserved.current, device_bytes, pt->total_allocated_memory);
    if (sum.reserved_bytes.current != s->reserved_bytes.current ||
        sum.segment.current != s->segment.current ||
        sum.allocated_bytes.current != s->allocated_bytes.current ||
        sum.allocation.current != s->allocation.current ||
        sum.active_bytes.current != s->active_bytes.current ||
        sum.requested_bytes.current != s->requested_bytes.current ||
        sum.inactive_split.current != s->inactive_split.current ||
        sum.inactive_split_bytes.current != s->inactive_split_bytes.current)
        return check_fail(
            error,
            "statistics drifted: reserved %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT
            ", allocated %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT ", active %" G_GINT64_FORMAT
            "/%" G_GINT64_FORMAT ", inactive split %" G_GINT64_FORMAT "/%" G_GINT64_FORMAT,
            sum.reserved_bytes.current, s->reserved_bytes.current, sum.allocated_bytes.current,
            s->allocated_bytes.current, sum.active_bytes.current, s->active_bytes.current,
            sum.inactive_split_bytes.current, s->inactive_split_bytes.current);
    return TRUE;
}
