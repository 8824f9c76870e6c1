/* SPDX-License-Identifier: MIT */
/*
 * PyTorch snapshots: what torch.c shares with torch-pools.c, the private-pool inference (which
 * pool each recorded allocation went to, docs/trace-formats.md).
 */
#pragma once

#include <glib.h>

#include "fragsim/state.h"
#include "fragsim/types.h"

typedef enum {
    TORCH_ALLOC,
    TORCH_FREE_REQUESTED,
    TORCH_FREE_COMPLETED,
    TORCH_SEGMENT_ALLOC,
    TORCH_SEGMENT_FREE,
    TORCH_SEGMENT_MAP,
    TORCH_SEGMENT_UNMAP,
    TORCH_SNAPSHOT,
    TORCH_OOM,
    TORCH_UNKNOWN,
} TorchAction;

#define TORCH_N_ACTIONS TORCH_UNKNOWN

/* One trace entry, decoded; kept only while the trace is opened. */
enum {
    ENTRY_HAS_ADDR = 1 << 0,
    ENTRY_HAS_SIZE = 1 << 1,
    ENTRY_HAS_POOL = 1 << 2, /* the entry's own `pool_id` (PyTorch main) */
};

typedef struct {
    FsimTime time; /* ns since the device's first time_us, clamped; 0 in an untimed trace */
    FsimAddr addr;
    uint64_t size;
    uint64_t stream;
    uint64_t device_free;
    uint64_t pool;  /* with ENTRY_HAS_POOL: the pool, as fsim_torch_pool_id() numbers it */
    uint32_t stack; /* alloc and oom: the allocation's frames (fsim_trace_stack()) */
    uint8_t action; /* TorchAction */
    uint8_t flags;  /* ENTRY_HAS_* */
} TorchEntry;

/**
 * fsim_torch_pool_id:
 * @first, @second: PyTorch's MempoolId_t; (0, 0) is the default pool, a graph's own pool is
 *     (k, 0), a graph_pool_handle() or MemPool one (0, k).
 * @out: (out): the pool as POOL_* events name it: @first * 2^32 + @second.
 *
 * Returns: %FALSE when either half is 2^32 or more (no process counts that many pools).
 */
gboolean fsim_torch_pool_id(uint64_t first, uint64_t second, uint64_t *out);

/**
 * fsim_torch_pools_assign:
 * @entries: the device's TorchEntry array, in trace order.
 * @state: (nullable): the state at trace start, with each segment's pool_id.
 * @final_segments: the FsimSeedSegment array of the final state, with each segment's pool_id.
 * @entries_name_pools: whether some entry has a `pool_id` of its own other than (0, 0) (told
 *     while the entries are read, so that they are not walked again to find out).
 *
 * Decides which pool each entry allocated into or released from: ALLOC and OOM entries (the pool
 * allocated into), SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP and SEGMENT_UNMAP entries (the pool
 * owning the segment).  See torch-pools.c for the rules.
 *
 * Returns: (transfer full) (nullable): one pool per entry (0 = default), or %NULL when the
 * device shows no private pool at all.
 */
uint64_t *fsim_torch_pools_assign(const GArray *entries, const FsimInitialState *state,
                                  const GArray *final_segments, gboolean entries_name_pools);
