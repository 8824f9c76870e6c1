/* SPDX-License-Identifier: MIT */
/*
 * Private pools of PyTorch's caching allocator: CUDA graphs and torch.cuda.MemPool
 * (beginAllocateToPool, endAllocateToPool, releasePool, get_pool; Note [Interaction with CUDA
 * graph capture]).
 *
 * A private pool has its own small and large pools, so its blocks are never handed to a request
 * of the default pools or of another private pool, nor the reverse; everything else (best fit,
 * splitting, merging, segment sizes, expandable segments, one per (pool, stream)) runs unchanged
 * on it.  A scope (a capture, or a use_mem_pool block) routes the allocations of its stream to
 * the pool until it ends; the newest scope matching a stream wins, as on PyTorch main.  The first
 * scope of a pool creates it; each scope takes a reference (create_or_incref_pool), except one
 * that extends an open scope of the pool to another stream (a side stream joined to the capture).
 * pool_release drops a reference: at zero the pool is freeable, and release_cached_blocks (empty
 * cache, the last try before an OOM) returns its unsplit free segments after the default pools';
 * a freeable pool that holds no segment is forgotten by PyTorch (graph_pools.erase), which here
 * keeps it, unreferenced and empty: it behaves as a pool never seen, and keeps its peak for the
 * per-pool answers.  A live pool never returns memory.
 *
 * The knobs `mempool_use_on_oom` and `mempool_no_split` (lists of pool ids) model MemPool's
 * use_on_oom and no_split flags (PyTorch main): a default-pool request that finds no cached block
 * and no new memory tries the cached blocks of each use_on_oom pool before releasing anything
 * (try_mempool_fallback); blocks of a no_split pool are never split.
 */
#include <glib.h>

#include "model.h"

/* The position of pool @id in the sorted list, or where it would go. */
static guint
private_pool_position(const Pytorch *pt, uint64_t id, gboolean *found)
{
    guint lo = 0;
    guint hi = pt->private_pools->len;

    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        const PrivatePool *pp = g_ptr_array_index(pt->private_pools, mid);

        if (pp->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < pt->private_pools->len &&
             ((const PrivatePool *)g_ptr_array_index(pt->private_pools, lo))->id == id;
    return lo;
}

PrivatePool *
fsim_pytorch_private_pool_find(const Pytorch *pt, uint64_t id)
{
    gboolean found;
    guint at = private_pool_position(pt, id, &found);

    return found ? g_ptr_array_index(pt->private_pools, at) : NULL;
}

static gboolean
id_listed(const GArray *ids, uint64_t id)
{
    for (guint i = 0; ids != NULL && i < ids->len; i++) {
        if (g_array_index(ids, uint64_t, i) == id)
            return TRUE;
    }
    return FALSE;
}

PrivatePool *
fsim_pytorch_private_pool_get(Pytorch *pt, uint64_t id)
{
    gboolean found;
    guint at = private_pool_position(pt, id, &found);
    PrivatePool *pp;

    if (found)
        return g_ptr_array_index(pt->private_pools, at);
    pp = g_new0(PrivatePool, 1);
    pp->id = id;
    pp->use_on_oom = id_listed(pt->use_on_oom_ids, id);
    pp->no_split = id_listed(pt->no_split_ids, id);
    fsim_pytorch_pool_init(pt, &pp->small, TRUE, pp);
    fsim_pytorch_pool_init(pt, &pp->large, FALSE, pp);
    g_ptr_array_insert(pt->private_pools, (gint)at, pp);
    return pp;
}

void
fsim_pytorch_private_pool_free(gpointer data)
{
    PrivatePool *pp = data;

    fsim_pytorch_pool_clear(&pp->small);
    fsim_pytorch_pool_clear(&pp->large);
    g_free(pp);
}

static gboolean
capture_open(const Pytorch *pt, const PrivatePool *pp)
{
    for (guint i = 0; i < pt->captures->len; i++) {
        if (g_array_index(pt->captures, Capture, i).pool == pp)
            return TRUE;
    }
    return FALSE;
}

void
fsim_pytorch_pool_begin(FsimPolicy *self, uint64_t pool, uint64_t stream, FsimTime now)
{
    Pytorch *pt = pytorch_from_policy(self);
    PrivatePool *pp = fsim_pytorch_private_pool_get(pt, pool);
    Capture capture = {pp, stream};

    (void)now;
    if (!capture_open(pt, pp))
        pp->use_count++;
    g_array_append_val(pt->captures, capture);
}

void
fsim_pytorch_pool_end(FsimPolicy *self, uint64_t pool, uint64_t stream, FsimTime now)
{
    Pytorch *pt = pytorch_from_policy(self);

    (void)now;
    for (guint i = 0; i < pt->captures->len; i++) {
        const Capture *capture = &g_array_index(pt->captures, Capture, i);

        if (capture->pool->id == pool && capture->stream == stream) {
            g_array_remove_index(pt->captures, i);
            return;
        }
    }
    g_assert_not_reached(); /* the engine checked the scope */
}

void
fsim_pytorch_pool_release(FsimPolicy *self, uint64_t pool, FsimTime now)
{
    Pytorch *pt = pytorch_from_policy(self);
    PrivatePool *pp = fsim_pytorch_private_pool_find(pt, pool);

    (void)now;
    g_assert(pp != NULL && pp->use_count > 0); /* the engine checked the reference */
    pp->use_count--;
}

PrivatePool *
fsim_pytorch_capture_pool(const Pytorch *pt, uint64_t stream)
{
    for (guint i = pt->captures->len; i-- > 0;) {
        const Capture *capture = &g_array_index(pt->captures, Capture, i);

        if (capture->stream == stream)
            return capture->pool;
    }
    return NULL;
}

gsize
fsim_pytorch_pool_stats(const FsimPolicy *self, FsimPoolStats *out, gsize max)
{
    const Pytorch *pt = pytorch_from_const_policy(self);
    gsize n = 1 + pt->private_pools->len;

    for (gsize i = 0; i < MIN(n, max); i++) {
        const PrivatePool *pp = i > 0 ? g_ptr_array_index(pt->private_pools, i - 1) : NULL;
        const FsimCounter *c = pp != NULL ? &pp->reserved_bytes : &pt->default_reserved_bytes;

        out[i].pool = pp != NULL ? pp->id : 0;
        out[i].reserved_bytes = (uint64_t)c->current;
        out[i].peak_reserved_bytes = (uint64_t)c->peak;
        out[i].use_count = pp != NULL ? pp->use_count : 0;
    }
    return n;
}

gboolean
fsim_pytorch_parse_pool_ids(const char *text, const char *knob, GArray **out, GError **error)
{
    g_auto(GStrv) parts = NULL;

    *out = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    if (text == NULL)
        return TRUE;
    parts = g_strsplit(text, ",", -1);
    for (guint i = 0; parts[i] != NULL; i++) {
        guint64 id;
        g_autofree char *word = g_strstrip(g_strdup(parts[i]));

        if (*word == '\0')
            continue;
        if (!g_ascii_string_to_unsigned(word, 10, 1, G_MAXUINT64, &id, NULL)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "%s: '%s' is not a private pool id (a positive integer; pools are listed "
                        "separated by commas)",
                        knob, word);
            g_clear_pointer(out, g_array_unref);
            return FALSE;
        }
        g_array_append_val(*out, id);
    }
    return TRUE;
}
