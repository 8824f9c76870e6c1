/* SPDX-License-Identifier: MIT */
/*
 * Native replay: a trace through the driver's own allocators, no policy in between, as the
 * baselines policies are compared with.
 *
 *   cudaMalloc       one cudaMalloc / cudaFree per tensor: no caching, no fragmentation beyond
 *                    the driver's own rounding, and every free synchronises the device.
 *   cudaMallocAsync  cudaMallocFromPoolAsync / cudaFreeAsync on one stream from a pool whose
 *                    release threshold is the maximum, so it keeps what it reserved as a caching
 *                    allocator does; empty_cache trims it to nothing.  Every stream of the trace
 *                    is served on that one stream, so reuse across the trace's streams is more
 *                    generous than PyTorch's per-stream pools.
 *
 * The allocations alive at trace start (a snapshot's initial state) are made first.  A FREE
 * marked deferred waits for its FREE_COMPLETED; requested bytes drop at the FREE, as the engine
 * counts them.  An allocation the driver refuses is an OOM: counted, and its later free ignored.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/trace.h"

#include "cuda-backend.h"

typedef struct {
    uint64_t id; /* the key: first, so &block->id is the hash key */
    FsimAddr addr;
    uint64_t requested;
    gboolean pending; /* freed by the program, waiting for FREE_COMPLETED */
} NativeBlock;

typedef struct {
    FsimCudaDriver *driver;
    FsimCudaNativeMode mode;
    gboolean touch;
    GHashTable *live;   /* &NativeBlock.id -> NativeBlock */
    GHashTable *failed; /* ids whose allocation was refused (uint64_t* keys) */
    uint64_t requested;
    uint64_t baseline_used;
    FsimCudaNativeResult *out;
} Native;

const char *
fsim_cuda_native_mode_name(FsimCudaNativeMode mode)
{
    return mode == FSIM_CUDA_NATIVE_ASYNC ? "cudaMallocAsync" : "cudaMalloc";
}

static gboolean
native_sample(Native *native, GError **error)
{
    uint64_t free_bytes;
    uint64_t total_bytes;
    uint64_t used;

    if (!native->driver->ops->mem_get_info(native->driver, &free_bytes, &total_bytes, error))
        return FALSE;
    used = total_bytes > free_bytes ? total_bytes - free_bytes : 0;
    if (used > native->baseline_used)
        native->out->peak_used_bytes =
            MAX(native->out->peak_used_bytes, used - native->baseline_used);
    return TRUE;
}

static gboolean
native_alloc(Native *native, const FsimEvent *ev, uint64_t id, uint64_t size, gboolean pending,
             GError **error)
{
    FsimCudaDriver *driver = native->driver;
    GError *local_error = NULL;
    FsimAddr addr = 0;
    uint64_t start = driver->ops->now_ns(driver);
    gboolean ok;
    NativeBlock *block;

    if (g_hash_table_contains(native->live, &id)) {
        g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_DUPLICATE,
                    "event %" G_GUINT64_FORMAT ": id %" G_GUINT64_FORMAT
                    " is allocated again while it is still live",
                    ev != NULL ? ev->index : 0, id);
        return FALSE;
    }
    if (native->mode == FSIM_CUDA_NATIVE_ASYNC)
        ok = driver->ops->pool_alloc(driver, size, &addr, &local_error);
    else
        ok = driver->ops->mem_alloc(driver, size, &addr, &local_error);
    if (!ok) {
        uint64_t *key;

        if (!g_error_matches(local_error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_OUT_OF_MEMORY)) {
            g_propagate_error(error, local_error);
            return FALSE;
        }
        g_error_free(local_error);
        native->out->ooms++;
        if (native->out->first_oom_event < 0 && ev != NULL)
            native->out->first_oom_event = (int64_t)ev->index;
        key = g_new(uint64_t, 1);
        *key = id;
        g_hash_table_add(native->failed, key);
        return TRUE;
    }
    fsim_latency_add(&native->out->alloc, driver->ops->now_ns(driver) - start);
    block = g_new0(NativeBlock, 1);
    block->id = id;
    block->addr = addr;
    block->requested = size;
    block->pending = pending;
    g_hash_table_insert(native->live, &block->id, block);
    if (!pending) {
        native->requested += size;
        native->out->peak_requested_bytes =
            MAX(native->out->peak_requested_bytes, native->requested);
    }
    if (native->touch) {
        start = driver->ops->now_ns(driver);
        if (!driver->ops->touch(driver, addr, size, error))
            return FALSE;
        fsim_latency_add(&native->out->touch, driver->ops->now_ns(driver) - start);
    }
    return native_sample(native, error);
}

static gboolean
native_release(Native *native, NativeBlock *block, GError **error)
{
    FsimCudaDriver *driver = native->driver;
    uint64_t start = driver->ops->now_ns(driver);
    uint64_t id = block->id;
    gboolean ok;

    if (native->mode == FSIM_CUDA_NATIVE_ASYNC)
        ok = driver->ops->pool_free(driver, block->addr, error);
    else
        ok = driver->ops->mem_free(driver, block->addr, error);
    if (!ok)
        return FALSE;
    fsim_latency_add(&native->out->dealloc, driver->ops->now_ns(driver) - start);
    g_hash_table_remove(native->live, &id);
    return TRUE;
}

static gboolean
native_event(Native *native, const FsimEvent *ev, GError **error)
{
    NativeBlock *block;

    switch (ev->kind) {
    case FSIM_EV_ALLOC:
        native->out->allocs++;
        return native_alloc(native, ev, ev->id, ev->size, FALSE, error);
    case FSIM_EV_FREE:
        native->out->frees++;
        block = g_hash_table_lookup(native->live, &ev->id);
        if (block == NULL || block->pending) {
            if (!g_hash_table_remove(native->failed, &ev->id))
                native->out->unmatched_frees++;
            return TRUE;
        }
        native->requested -= block->requested;
        if ((ev->flags & FSIM_EVF_DEFERRED) != 0) {
            block->pending = TRUE;
            return TRUE;
        }
        return native_release(native, block, error);
    case FSIM_EV_FREE_COMPLETED:
        block = g_hash_table_lookup(native->live, &ev->id);
        if (block == NULL || !block->pending)
            return TRUE;
        return native_release(native, block, error);
    case FSIM_EV_EMPTY_CACHE:
        native->out->empty_caches++;
        if (native->mode == FSIM_CUDA_NATIVE_ASYNC)
            return native->driver->ops->pool_trim(native->driver, error);
        return TRUE;
    case FSIM_EV_MARK:
    default:
        return TRUE;
    }
}

/* Free what is still live (without timing). */
static gboolean
native_release_all(Native *native, GError **error)
{
    g_autoptr(GList) blocks = g_hash_table_get_values(native->live);
    gboolean ok = TRUE;

    for (GList *l = blocks; l != NULL; l = l->next) {
        NativeBlock *block = l->data;
        GError *local_error = NULL;
        gboolean freed;

        if (native->mode == FSIM_CUDA_NATIVE_ASYNC)
            freed = native->driver->ops->pool_free(native->driver, block->addr, &local_error);
        else
            freed = native->driver->ops->mem_free(native->driver, block->addr, &local_error);
        if (!freed) {
            if (ok)
                g_propagate_error(error, local_error);
            else
                g_error_free(local_error);
            ok = FALSE;
        }
    }
    g_hash_table_remove_all(native->live);
    return ok;
}

gboolean
fsim_cuda_native(FsimCudaDriver *driver, FsimTrace *trace, uint32_t trace_device,
                 FsimCudaNativeMode mode, gboolean touch, FsimCudaNativeResult *out, GError **error)
{
    const FsimInitialState *state = fsim_trace_initial_state(trace, trace_device);
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(GHashTable) live = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
    g_autoptr(GHashTable) failed = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    Native native = {driver, mode, touch, live, failed, 0, 0, out};
    GError *local_error = NULL;
    uint64_t free_bytes;
    uint64_t total_bytes;
    gboolean ok = FALSE;
    gboolean pool_open = FALSE;
    FsimEvent ev;

    memset(out, 0, sizeof(*out));
    out->mode = mode;
    out->trace_device = trace_device;
    out->first_oom_event = -1;
    if (mode == FSIM_CUDA_NATIVE_ASYNC && !driver->info.pools_supported) {
        g_set_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_UNSUPPORTED,
                    "%s does not support memory pools (cudaMallocAsync)", driver->info.name);
        return FALSE;
    }
    if (!driver->ops->mem_get_info(driver, &free_bytes, &total_bytes, error))
        return FALSE;
    native.baseline_used = total_bytes > free_bytes ? total_bytes - free_bytes : 0;
    if (mode == FSIM_CUDA_NATIVE_ASYNC) {
        if (!driver->ops->pool_open(driver, error))
            return FALSE;
        pool_open = TRUE;
    }
    for (gsize i = 0; state != NULL && i < state->n_blocks; i++) {
        const FsimSeedBlock *seed = &state->blocks[i];

        if (!native_alloc(&native, NULL, seed->id, MAX(seed->requested, 1), seed->pending_free,
                          error)) {
            g_prefix_error(error, "%s: the memory alive at trace start: ", fsim_trace_path(trace));
            goto out;
        }
    }
    stream = fsim_trace_stream_open(trace, trace_device, error);
    if (stream == NULL)
        goto out;
    while (fsim_trace_stream_next(stream, &ev, &local_error)) {
        if (!native_event(&native, &ev, error)) {
            g_prefix_error(error, "%s: event %" G_GUINT64_FORMAT ": ", fsim_trace_path(trace),
                           ev.index);
            goto out;
        }
        out->events++;
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        goto out;
    }
    if (mode == FSIM_CUDA_NATIVE_ASYNC) {
        uint64_t reserved;

        if (!driver->ops->synchronize(driver, error) ||
            !driver->ops->pool_usage(driver, &reserved, &out->peak_reserved_bytes,
                                     &out->pool_used_high_bytes, error))
            goto out;
    } else {
        out->peak_reserved_bytes = out->peak_used_bytes;
    }
    ok = TRUE;

out:
    if (!native_release_all(&native, ok ? error : NULL))
        ok = FALSE;
    if (pool_open)
        driver->ops->pool_close(driver);
    return ok;
}
