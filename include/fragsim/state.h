/* SPDX-License-Identifier: MIT */
/*
 * fragsim: an allocator state at the start of a trace.
 *
 * Recorded traces often start in the middle of a run (PyTorch's trace is a ring buffer, and
 * recording usually starts after the model is loaded).  Readers rebuild the state at trace start
 * (segments and the blocks alive in them) and the engine hands it to the policy, so a replay
 * starts where the recording did.  Neither side knows of the other: this header is all they
 * share.
 */
#pragma once

#include <glib.h>

#include "fragsim/types.h"

G_BEGIN_DECLS

/* Which of PyTorch's two pools a segment belongs to (other policies ignore it). */
typedef enum {
    FSIM_POOL_UNKNOWN = 0,
    FSIM_POOL_SMALL, /* blocks of at most 1 MiB, 2 MiB segments */
    FSIM_POOL_LARGE,
} FsimPool;

/**
 * FsimSeedSegment:
 * @addr: start of the segment (for an expandable segment: of one contiguous mapped range).
 * @size: bytes of device memory.
 * @stream: the stream the segment was allocated for.
 * @pool: small or large pool.
 * @expandable: a mapped range of an expandable segment rather than a cudaMalloc segment.
 * @pool_id: the private pool (a CUDA graph's or a MemPool's) that owns the segment, as the
 *     trace's POOL_* events name it; 0 = the default pools.  Policies without private pools
 *     ignore it.
 */
typedef struct {
    FsimAddr addr;
    uint64_t size;
    uint64_t stream;
    FsimPool pool;
    gboolean expandable;
    uint64_t pool_id;
} FsimSeedSegment;

/**
 * FsimSeedBlock:
 * @id: the allocation id later events use to free it.
 * @addr: where it lives, inside one of the seeded segments.
 * @size: the block size (after the allocator's rounding).
 * @requested: the bytes the program asked for (≤ @size).
 * @stream: the allocation stream.
 * @pending_free: freed by the program but not yet reusable (PyTorch `active_pending_free`).
 * @stack: the stack that allocated it (fsim_trace_stack()), 0 when unknown.
 */
typedef struct {
    uint64_t id;
    FsimAddr addr;
    uint64_t size;
    uint64_t requested;
    uint64_t stream;
    gboolean pending_free;
    uint32_t stack;
} FsimSeedBlock;

/**
 * FsimInitialState:
 *
 * Segments sorted by address; blocks sorted by address, each inside exactly one segment, never
 * overlapping.  Memory of a segment not covered by a block is free.
 */
typedef struct {
    FsimSeedSegment *segments;
    gsize n_segments;
    FsimSeedBlock *blocks;
    gsize n_blocks;
} FsimInitialState;

/**
 * fsim_initial_state_check:
 *
 * Checks the ordering and containment rules above.
 *
 * Returns: %FALSE with @error set (FSIM_TRACE_ERROR_FAILED) naming the first offending entry.
 */
gboolean fsim_initial_state_check(const FsimInitialState *state, GError **error);

G_END_DECLS
