/* SPDX-License-Identifier: MIT */
/*
 * async: CUDA's stream-ordered allocator, cudaMallocAsync on the device's default memory pool.
 *
 * Source: the CUDA Runtime API reference (cudaMallocAsync, cudaFreeAsync, cudaMemPoolSetAttribute,
 * cudaMemPoolTrimTo) and the CUDA C++ Programming Guide's "Stream Ordered Memory Allocator"
 * chapter; PyTorch's backend:cudaMallocAsync (c10/cuda/CUDAMallocAsyncAllocator.cpp) for how a
 * framework drives it.
 *
 * What CUDA documents, and this policy does:
 *   - the release threshold (cudaMemPoolAttrReleaseThreshold, default 0): memory the pool holds
 *     above it is returned to the system at the next synchronisation.  Synchronisations are the
 *     policy's stream_sync and empty_cache (PyTorch's empty_cache on this backend is a device
 *     synchronisation and a trim to 0); traces record no others, so between them the pool keeps
 *     what it holds, as with PyTorch's threshold of UINT64_MAX;
 *   - reuse: memory freed on a stream is reusable by later allocations on that stream at once.
 *     With the default reuse policies (cudaMemPoolReuseAllowOpportunistic among them) memory
 *     whose free has completed is reusable by any stream; the engine hands a block back only when
 *     the trace says its memory is reusable, so `opportunistic=true` reuses across streams at
 *     once.  With `opportunistic=false` (only cudaMemPoolReuseFollowEventDependencies, of which a
 *     trace shows nothing) a block freed on one stream serves that stream only until a
 *     synchronisation;
 *   - cudaMemPoolTrimTo cannot release the backing of allocations alive, and the pool's physical
 *     memory comes in the device's granularity (2 MiB), which need not be the allocations'.
 *
 * What CUDA does not document, and this policy assumes (to be calibrated with `fragsim cuda
 * native --mode async` on a GPU; none was measured for it yet):
 *   - the pool is one virtual range four times the device, backed by 2 MiB physical pages mapped
 *     on demand: an allocation maps the pages of its range not mapped yet, and a trim unmaps the
 *     pages no allocation touches, highest address first, while the pool holds more than the
 *     threshold;
 *   - placement is best fit over the free ranges by size, lowest address on ties, from the
 *     range's low end, with sizes rounded up to 512 bytes; freed neighbours merge;
 *   - when the device has no page left for an allocation the pool first trims every unused page
 *     and retries once (a driver that fails while holding unused memory would be a surprise).
 *
 * Knobs:
 *   release_threshold  bytes kept at a synchronisation (default 0; `max` keeps everything)
 *   opportunistic      reuse across streams once a free completed (default true)
 */
#include <glib.h>

#include <string.h>

#include "core/chunk-list.h"
#include "policies.h"

#define ASYNC_ALIGNMENT 512u

/* A chunk of the pool, by offset: free (in the chunk list's index), allocated, or pending. */
typedef struct {
    FsimChunk c;      /* must be first */
    gboolean pending; /* freed, reusable by @stream only until a synchronisation */
    uint64_t stream;
} Chunk;

typedef struct {
    FsimPolicy base; /* must be first */
    uint64_t release_threshold;
    gboolean opportunistic;
    FsimArenaVa va; /* the pool's address space */
    uint64_t page_size;
    guint page_shift; /* log2(page_size): the granularity is a power of two */
    guint8 *page_mapped;
    guint8 *page_busy; /* scratch for a trim: pages a chunk in use touches */
    gsize n_pages;
    uint64_t mapped_bytes;
    uint64_t allocated_bytes;
    FsimChunkList chunks; /* one run, the pool's range; the free chunks indexed */
    Chunk *first;
    GTree *pending; /* pending Chunk* by (stream, size, offset) */
    uint64_t num_retries;
    uint64_t trims;
} Async;

static const FsimKnob async_knobs[] = {
    {"release_threshold", "0", "bytes the pool keeps at a synchronisation (`max`: all)"},
    {"opportunistic", "true", "reuse freed memory across streams at once (AllowOpportunistic)"},
    {NULL, NULL, NULL},
};

FSIM_POLICY_DEFINE_TYPE(Async, async)

static gint
chunk_by_size(gconstpointer a, gconstpointer b, gpointer data)
{
    const Chunk *x = a;
    const Chunk *y = b;
    int c = fsim_compare_u64(x->c.size, y->c.size);

    (void)data;
    return c != 0 ? c : fsim_compare_u64(x->c.start, y->c.start);
}

static gint
chunk_by_stream_size(gconstpointer a, gconstpointer b, gpointer data)
{
    const Chunk *x = a;
    const Chunk *y = b;

    if (x->stream != y->stream)
        return x->stream < y->stream ? -1 : 1;
    return chunk_by_size(a, b, data);
}

static FsimPolicy *
async_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    g_autofree Async *pool = async_new(device);
    g_autofree char *text = NULL;
    /* address space is cheap: four times the device, so free holes seldom block a request */
    uint64_t va_size = 4 * fsim_device_round(device, device->spec.capacity_bytes);

    text =
        config != NULL ? g_key_file_get_string(config, "async", "release_threshold", NULL) : NULL;
    if (text != NULL && g_ascii_strcasecmp(g_strstrip(text), "max") == 0)
        pool->release_threshold = G_MAXUINT64;
    else if (!fsim_knob_get_size(pool->base.ops, config, "release_threshold",
                                 &pool->release_threshold, error))
        return NULL;
    if (!fsim_knob_get_bool(pool->base.ops, config, "opportunistic", &pool->opportunistic, error))
        return NULL;
    pool->va.size = va_size;
    if (!fsim_arena_va_reserve(&pool->va, device, "async", error))
        return NULL;
    pool->page_size = device->spec.granularity;
    pool->page_shift = (guint)g_bit_storage(pool->page_size) - 1;
    pool->n_pages = va_size / pool->page_size;
    pool->page_busy = g_new0(guint8, pool->n_pages);
    pool->page_mapped = g_new0(guint8, pool->n_pages);
    pool->pending = g_tree_new_full(chunk_by_stream_size, NULL, NULL, NULL);
    fsim_chunk_list_init(&pool->chunks, sizeof(Chunk));
    pool->first = (Chunk *)fsim_chunk_list_add_run(&pool->chunks, 0, va_size);
    return &g_steal_pointer(&pool)->base;
}

static void
async_destroy(FsimPolicy *self)
{
    Async *pool = async_from_policy(self);

    fsim_chunk_list_clear(&pool->chunks);
    g_tree_destroy(pool->pending);
    g_free(pool->page_busy);
    g_free(pool->page_mapped);
    g_free(pool);
}

/* Mark in page_busy the pages that chunks in use (allocated, or pending for their stream) touch:
 * the pages a trim keeps.  Worked out at a trim, not kept per operation: a trim walks every page
 * anyway, and allocations and frees are far more frequent. */
static void
async_mark_busy(Async *pool)
{
    memset(pool->page_busy, 0, pool->n_pages);
    for (const FsimChunk *chunk = &pool->first->c; chunk != NULL; chunk = chunk->next) {
        if (!chunk->free) {
            gsize first = chunk->start / pool->page_size;
            gsize last = (chunk->start + chunk->size - 1) / pool->page_size;

            memset(pool->page_busy + first, 1, last - first + 1);
        }
    }
}

/* Map every unmapped page of [offset, offset + size), run by run; all or nothing. */
static gboolean
async_map(Async *pool, uint64_t offset, uint64_t size)
{
    FsimDevice *device = pool->base.device;
    gsize first = offset >> pool->page_shift;
    gsize last = (offset + size - 1) >> pool->page_shift;
    gsize need = 0;

    /* the common case: every page mapped already (mostly a single page) */
    if (first == last ? pool->page_mapped[first]
                      : memchr(pool->page_mapped + first, 0, last - first + 1) == NULL)
        return TRUE;
    for (gsize p = first; p <= last; p++)
        need += !pool->page_mapped[p];
    if (need * pool->page_size > fsim_device_free_bytes(device))
        return FALSE;
    for (gsize p = first; p <= last;) {
        gsize run = p;

        if (pool->page_mapped[p]) {
            p++;
            continue;
        }
        while (run <= last && !pool->page_mapped[run])
            run++;
        if (fsim_device_map(device, pool->va.base + p * pool->page_size,
                            (run - p) * pool->page_size, pool->page_size) != FSIM_OK)
            return FALSE; /* the runs mapped so far stay mapped, unused: a later trim frees them */
        memset(pool->page_mapped + p, 1, run - p);
        pool->mapped_bytes += (run - p) * pool->page_size;
        p = run;
    }
    return TRUE;
}

/* Unmap unused pages, highest first, while the pool holds more than @keep bytes. */
static gboolean
async_trim(Async *pool, uint64_t keep)
{
    FsimDevice *device = pool->base.device;
    gboolean trimmed = FALSE;

    if (pool->mapped_bytes <= keep)
        return FALSE;
    async_mark_busy(pool);
    for (gsize p = pool->n_pages; p-- > 0 && pool->mapped_bytes > keep;) {
        gsize low = p;

        if (!pool->page_mapped[p] || pool->page_busy[p])
            continue;
        while (low > 0 && pool->page_mapped[low - 1] && !pool->page_busy[low - 1] &&
               pool->mapped_bytes - (p - low + 1) * pool->page_size > keep)
            low--;
        fsim_device_unmap(device, pool->va.base + low * pool->page_size,
                          (p - low + 1) * pool->page_size, pool->page_size);
        memset(pool->page_mapped + low, 0, p - low + 1);
        pool->mapped_bytes -= (p - low + 1) * pool->page_size;
        p = low;
        trimmed = TRUE;
    }
    if (trimmed)
        pool->trims++;
    return trimmed;
}

/* The best candidate for @size on @stream: the free set (@cursor is its place there), or the
 * stream's own pending chunks. */
static Chunk *
async_find(Async *pool, uint64_t size, uint64_t stream, FsimSizeCursor *cursor)
{
    Chunk probe = {.c = {.start = 0, .size = size}, .stream = stream};
    Chunk *best = (Chunk *)fsim_chunk_list_best_fit(&pool->chunks, size, cursor);
    GTreeNode *node =
        g_tree_nnodes(pool->pending) > 0 ? g_tree_lower_bound(pool->pending, &probe) : NULL;

    if (node != NULL) {
        Chunk *own = g_tree_node_key(node);

        if (own->stream == stream && (best == NULL || chunk_by_size(own, best, NULL) < 0))
            best = own;
    }
    return best;
}

/* Take @size bytes from the low end of the free or pending @chunk (@cursor: its place in the free
 * set when free). */
static Chunk *
async_take(Async *pool, Chunk *chunk, uint64_t size, const FsimSizeCursor *cursor)
{
    if (!chunk->pending) {
        fsim_chunk_list_take(&pool->chunks, &chunk->c, cursor, size);
        return chunk;
    }
    g_tree_remove(pool->pending, chunk);
    if (chunk->c.size > size) { /* the rest stays pending for its stream */
        Chunk *rest = (Chunk *)fsim_chunk_list_split(&pool->chunks, &chunk->c, size);

        g_tree_insert(pool->pending, rest, rest);
    }
    chunk->pending = FALSE;
    return chunk;
}

/* Give a used chunk back to the free set. */
static void
async_release(Async *pool, Chunk *chunk)
{
    chunk->pending = FALSE;
    fsim_chunk_list_release(&pool->chunks, &chunk->c);
}

static FsimStatus
async_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    Async *pool = async_from_policy(self);
    uint64_t size = (req->size + ASYNC_ALIGNMENT - 1) / ASYNC_ALIGNMENT * ASYNC_ALIGNMENT;
    FsimSizeCursor cursor = {0};
    Chunk *chunk;
    gboolean pending;

    /* a reservation an injected fault refused: this allocation is its OOM, or it tries again */
    if (fsim_arena_va_ready(&pool->va, self->device) != FSIM_OK)
        return FSIM_OOM;
    chunk = async_find(pool, size, req->stream, &cursor);
    if (chunk == NULL)
        return FSIM_OOM;
    pending = chunk->pending;
    chunk = async_take(pool, chunk, size, &cursor);
    if (!async_map(pool, chunk->c.start, chunk->c.size) &&
        !(async_trim(pool, 0) && (pool->num_retries++, async_map(pool, chunk->c.start, size)))) {
        if (pending) {
            /* back to its stream's pending set, as it was */
            chunk->pending = TRUE;
            g_tree_insert(pool->pending, chunk, chunk);
        } else {
            async_release(pool, chunk);
        }
        return FSIM_OOM;
    }
    chunk->stream = req->stream;
    pool->allocated_bytes += chunk->c.size;
    fsim_chunk_hand_out(&chunk->c, pool->va.base, out);
    return FSIM_OK;
}

static void
async_dealloc(FsimPolicy *self, const FsimBlock *block, FsimTime now)
{
    Async *pool = async_from_policy(self);
    Chunk *chunk = (Chunk *)fsim_chunk_handed_back(block);

    (void)now;
    g_assert(!chunk->pending);
    pool->allocated_bytes -= chunk->c.size;
    if (pool->opportunistic) {
        async_release(pool, chunk);
        return;
    }
    /* reusable by its own stream only, until a synchronisation; its pages stay in use */
    chunk->pending = TRUE;
    g_tree_insert(pool->pending, chunk, chunk);
}

typedef struct {
    gboolean all;
    uint64_t stream;
    GPtrArray *chunks;
} PendingPick;

static gboolean
async_pick_pending(gpointer key, gpointer value, gpointer data)
{
    PendingPick *pick = data;
    Chunk *chunk = key;

    (void)value;
    if (pick->all || chunk->stream == pick->stream)
        g_ptr_array_add(pick->chunks, chunk);
    return FALSE;
}

/* A synchronisation: pending frees of @stream (or all) become free; trim to the threshold. */
static void
async_synchronize(Async *pool, gboolean all, uint64_t stream, uint64_t keep)
{
    g_autoptr(GPtrArray) chunks = g_ptr_array_new();
    PendingPick pick = {all, stream, chunks};

    g_tree_foreach(pool->pending, async_pick_pending, &pick);
    for (guint i = 0; i < chunks->len; i++) {
        Chunk *chunk = g_ptr_array_index(chunks, i);

        g_tree_remove(pool->pending, chunk);
        async_release(pool, chunk);
    }
    async_trim(pool, keep);
}

static void
async_stream_sync(FsimPolicy *self, uint64_t stream, FsimTime now)
{
    Async *pool = async_from_policy(self);

    (void)now;
    async_synchronize(pool, FALSE, stream, pool->release_threshold);
}

static void
async_empty_cache(FsimPolicy *self, FsimTime now)
{
    (void)now;
    async_synchronize(async_from_policy(self), TRUE, 0, 0);
}

static void
async_get_stats(const FsimPolicy *self, FsimPolicyStats *out)
{
    const Async *pool = (const Async *)self;

    out->cached_bytes = pool->mapped_bytes - MIN(pool->mapped_bytes, pool->allocated_bytes);
    /* which free ranges are wholly backed is not indexed: unknown (0), as policy.h allows */
    out->largest_free_block = 0;
    out->num_splits = pool->chunks.num_splits;
    out->num_merges = pool->chunks.num_merges;
    out->num_alloc_retries = pool->num_retries;
    fsim_policy_stats_extra(out, "trims", pool->trims);
}

/* Cheap enough to run after every operation: the chain, the indexes, the counters; each used
 * chunk's end pages mapped (the page array itself is kept by async_map() and async_trim()). */
static gboolean
async_check(const FsimPolicy *self, GError **error)
{
    const Async *pool = (const Async *)self;
    uint64_t used = 0;
    uint64_t allocated = 0;
    gsize n_free = 0;
    guint n_pending = 0;

    if (!fsim_chunk_list_check_run(&pool->chunks, &pool->first->c, 0, pool->va.size, &used, &n_free,
                                   error) ||
        !fsim_chunk_list_check_index(&pool->chunks, n_free, error))
        return FALSE;
    for (const FsimChunk *c = &pool->first->c; c != NULL; c = c->next) {
        gsize first = c->start / pool->page_size;
        gsize last = (c->start + c->size - 1) / pool->page_size;

        if (c->free)
            continue;
        if (!pool->page_mapped[first] || !pool->page_mapped[last]) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "chunk at %" G_GUINT64_FORMAT " on an unmapped page", c->start);
            return FALSE;
        }
        if (((const Chunk *)c)->pending)
            n_pending++;
        else
            allocated += c->size;
    }
    FsimTally tallies[] = {
        {"allocated", allocated, pool->allocated_bytes},
        {"pending", n_pending, (guint)g_tree_nnodes(pool->pending)},
    };

    return fsim_policy_check_accounts(self, pool->mapped_bytes, tallies, G_N_ELEMENTS(tallies),
                                      error);
}

/* Each run of mapped pages is a segment (mapped in pages, like an expandable segment); the chunks
 * in it, a free chunk cut at the run's ends.  A trim unmaps the pages no chunk in use touches, so
 * a free chunk's whole pages are releasable and its partial pages pinned by the neighbours in
 * use.  A freed chunk still reserved for its stream (pending) is free to the program but cannot
 * be trimmed: pinned.  Walks every page: for explain's moments, not per event. */
static void
async_describe(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data)
{
    const Async *pool = (const Async *)self;
    const uint64_t page = pool->page_size;
    const FsimChunk *chunk = &pool->first->c;

    for (gsize p = 0; p < pool->n_pages;) {
        gsize run = p;
        uint64_t lo, hi;
        FsimSegmentView segment = {.expandable = TRUE, .page_size = page};

        if (!pool->page_mapped[p]) {
            p++;
            continue;
        }
        while (run < pool->n_pages && pool->page_mapped[run])
            run++;
        lo = p * page;
        hi = run * page;
        segment.addr = pool->va.base + lo;
        segment.size = hi - lo;
        visitor->segment(data, &segment);
        while (chunk != NULL && chunk->start + chunk->size <= lo)
            chunk = chunk->next;
        for (const FsimChunk *c = chunk; c != NULL && c->start < hi; c = c->next) {
            uint64_t begin = MAX(c->start, lo);
            uint64_t end = MIN(c->start + c->size, hi);
            FsimBlockView block = {.addr = pool->va.base + begin,
                                   .size = end - begin,
                                   .free = c->free || ((const Chunk *)c)->pending};

            if (c->free) {
                uint64_t first = (begin + page - 1) / page * page;
                uint64_t last = end / page * page;

                block.releasable = last > first ? last - first : 0;
            }
            visitor->block(data, &block);
        }
        p = run;
    }
}

const FsimPolicyOps fsim_policy_async = {
    .name = "async",
    .summary = "cudaMallocAsync's default pool: stream-ordered reuse, trimmed at synchronisation",
    .knobs = async_knobs,
    .create = async_create,
    .destroy = async_destroy,
    .alloc = async_alloc,
    .dealloc = async_dealloc,
    .stream_sync = async_stream_sync,
    .empty_cache = async_empty_cache,
    .get_stats = async_get_stats,
    .check = async_check,
    .describe = async_describe,
};
