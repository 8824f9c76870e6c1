/* SPDX-License-Identifier: MIT */
/*
 * The block pool of PyTorch's caching allocator: the slab every block comes from, and the small
 * and large pools, each a list of per-stream sets kept sorted by stream id so that walks over a
 * whole pool (release, garbage collection) visit blocks in PyTorch's (stream, size, address)
 * order.  The hot lookups (block_new, pool_find, pool_insert_free) are inline in model.h.
 */
#include <glib.h>

#include <string.h>

#include "model.h"

void
fsim_pytorch_slab_grow(Pytorch *pt)
{
    /* a run of blocks, then their tree links (block_links()) */
    Block *chunk = g_aligned_alloc0(1, BLOCK_SLAB_BYTES, BLOCK_SLAB_ALIGN);

    g_ptr_array_add(pt->slabs, chunk);
    for (gsize i = 0; i < BLOCK_SLAB_RUN; i++) {
        chunk[i].next = pt->spare;
        pt->spare = &chunk[i];
    }
}

StreamSet *
fsim_pytorch_pool_stream(Pool *pool, uint64_t stream)
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
    set->pool = pool;
    pool->streams[at] = set;
    pool->n_streams++;
    pool->last = at;
    if (pool->direct[stream & (POOL_DIRECT - 1)] == NULL)
        pool->direct[stream & (POOL_DIRECT - 1)] = set;
    return set;
}

void
fsim_pytorch_pool_init(const Pytorch *pt, Pool *pool, gboolean small, PrivatePool *owner)
{
    memset(pool, 0, sizeof(*pool));
    pool->small = small;
    pool->owner = owner;
    if (owner != NULL && owner->no_split) {
        /* MemPool(no_split=True), PyTorch main: never */
        pool->split_rest_min = G_MAXUINT64;
        pool->split_size_below = 0;
    } else if (small || pt->expandable) {
        /* the small pool, and every pool under expandable segments: whenever 512 B remain */
        pool->split_rest_min = FSIM_PYTORCH_MIN_BLOCK;
        pool->split_size_below = G_MAXUINT64;
    } else {
        /* the large pool: below max_split_size, and more than 1 MiB remaining */
        pool->split_rest_min = FSIM_PYTORCH_SMALL_SIZE + 1;
        pool->split_size_below = pt->conf.max_split_size;
    }
}

void
fsim_pytorch_pool_clear(Pool *pool)
{
    for (guint s = 0; s < pool->n_streams; s++) {
        freeset_clear(&pool->streams[s]->free);
        g_free(pool->streams[s]);
    }
    g_free(pool->streams);
}
