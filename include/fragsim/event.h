/* SPDX-License-Identifier: MIT */
/*
 * fragsim: trace events, the inputs of a simulation.
 *
 * An event is (time, index, kind, id, size, stream, device).  Readers turn files and generators
 * into a time-ordered stream of them; the engine replays the stream through a policy.  Decisions
 * recorded by the allocator that produced a trace (PyTorch's segment_alloc, segment_map, oom...)
 * are outcomes, not inputs: they are #FsimOutcome values kept apart for validation.
 */
#pragma once

#include <glib.h>

#include "fragsim/types.h"

G_BEGIN_DECLS

/**
 * FsimEventKind:
 * @FSIM_EV_ALLOC: allocate @size bytes for the new allocation @id on @stream.
 * @FSIM_EV_FREE: the program frees @id.  Its bytes stop counting as allocated at once.  The
 *     memory becomes reusable at once too, unless the event carries %FSIM_EVF_DEFERRED (PyTorch's
 *     `free_requested` for a block used on other streams): then it waits for the matching
 *     %FSIM_EV_FREE_COMPLETED.
 * @FSIM_EV_FREE_COMPLETED: the memory of a freed @id is reusable (PyTorch `free_completed`,
 *     stream-ordered frees).  After a free that was not deferred it is a no-op.
 * @FSIM_EV_EMPTY_CACHE: `torch.cuda.empty_cache()`: the policy returns what it caches.
 * @FSIM_EV_MARK: a phase or iteration annotation; @label names it.
 * @FSIM_EV_POOL_BEGIN: a CUDA graph capture or a `torch.cuda.use_mem_pool` scope begins on
 *     @stream: until the matching %FSIM_EV_POOL_END, allocations on that stream go to the private
 *     pool @id (PyTorch's beginAllocateToPool).  The first begin of a pool creates it; every
 *     begin takes one reference on it (the captured graph, or the scope, holds it).  A begin of
 *     a pool already open on another stream extends that scope to @stream (a side stream joined
 *     to the capture) and takes no reference.
 * @FSIM_EV_POOL_END: the scope of pool @id on @stream ends (endAllocateToPool).  The pool keeps
 *     its memory and its blocks keep their pool.
 * @FSIM_EV_POOL_RELEASE: one reference on pool @id is dropped (a graph reset or destroyed, a
 *     MemPool destroyed, a `use_mem_pool` scope left: releasePool).  At zero the pool is
 *     freeable: `empty_cache` may then return its unsplit free segments.
 *
 * Pool ids are the trace's own: nonzero 64-bit integers, 0 being the default pool.
 */
typedef enum {
    FSIM_EV_ALLOC = 1,
    FSIM_EV_FREE,
    FSIM_EV_FREE_COMPLETED,
    FSIM_EV_EMPTY_CACHE,
    FSIM_EV_MARK,
    FSIM_EV_POOL_BEGIN,
    FSIM_EV_POOL_END,
    FSIM_EV_POOL_RELEASE,
} FsimEventKind;

#define FSIM_EV_KIND_COUNT 9 /* one past the last kind, for tables indexed by kind */

/* Event flags. */
enum {
    /* FREE: the memory is reusable only at the matching FREE_COMPLETED. */
    FSIM_EVF_DEFERRED = 1u << 0,
    /* EMPTY_CACHE: not an explicit call in the program but inferred by the reader from the
     * recorded trace (a burst of segment frees, which PyTorch also does before retrying a
     * failed cudaMalloc). */
    FSIM_EVF_INFERRED = 1u << 1,
    /* ALLOC (and the FREE right after it): a request the recording allocator could not serve
     * (PyTorch's `oom` entry).  Replayed so that policies are compared on it, and freed at once
     * after it, since the program never received the memory. */
    FSIM_EVF_RECORDED_OOM = 1u << 2,
};

/**
 * FsimEvent:
 * @time: simulated nanoseconds since the start of the trace; never decreases along a stream.
 * @index: position of the event in its source (line number of a text trace, entry index of a
 *     PyTorch device trace).  Messages, OOM records and the validator refer to events by it.
 * @id: allocation identity pairing ALLOC with FREE and FREE_COMPLETED.  Readers map recorded
 *     addresses, which are reused, to fresh ids.  POOL_*: the pool id (nonzero).
 * @size: requested bytes (ALLOC only; 0 otherwise), 1 ≤ size ≤ %FSIM_MAX_SIZE.
 * @stream: the stream the memory is used on (ALLOC, FREE, FREE_COMPLETED), or the stream of a
 *     pool scope (POOL_BEGIN, POOL_END); 0 is the default.
 * @addr: the address the recording allocator gave this allocation (ALLOC from a recorded trace;
 *     0 when unknown).  Policies never see it; the validator compares against it.
 * @device: the device index the event belongs to in a multi-device trace.
 * @flags: %FSIM_EVF_DEFERRED, %FSIM_EVF_INFERRED, %FSIM_EVF_RECORDED_OOM.
 * @kind: what happens.
 * @stack: ALLOC: the stack that made it, an id of fsim_trace_stack(); 0 when the trace has none.
 * @label: (nullable): the text of a MARK; borrowed, valid until the next event is read.
 */
typedef struct {
    FsimTime time;
    uint64_t index;
    uint64_t id;
    uint64_t size;
    uint64_t stream;
    FsimAddr addr;
    uint32_t device;
    uint32_t flags;
    FsimEventKind kind;
    uint32_t stack;
    const char *label;
} FsimEvent;

/**
 * fsim_event_kind_name:
 *
 * Returns: the name of @kind as written in the text format (`alloc`, `free`, `free_completed`,
 * `empty_cache`, `mark`, `pool_begin`, `pool_end`, `pool_release`), or `"?"`.
 */
const char *fsim_event_kind_name(FsimEventKind kind);

/**
 * fsim_event_kind_from_name:
 * @name: a kind name as written in the text format.
 * @out: (out): the kind.
 *
 * Returns: %FALSE for an unknown name.
 */
gboolean fsim_event_kind_from_name(const char *name, FsimEventKind *out);

/**
 * FsimOutcomeKind:
 *
 * A decision the recording allocator made, kept as ground truth (never fed to policies).  The
 * names follow PyTorch's trace actions.
 */
typedef enum {
    FSIM_OUTCOME_SEGMENT_ALLOC = 1, /* cudaMalloc of a segment */
    FSIM_OUTCOME_SEGMENT_FREE,      /* cudaFree of a segment */
    FSIM_OUTCOME_SEGMENT_MAP,       /* pages mapped into an expandable segment */
    FSIM_OUTCOME_SEGMENT_UNMAP,     /* pages unmapped from an expandable segment */
    FSIM_OUTCOME_OOM,               /* the allocator gave up: @size is the (rounded) request */
} FsimOutcomeKind;

/**
 * FsimOutcome:
 * @index: position in the source trace, on the same scale as #FsimEvent.index; an outcome
 *     happened while the allocator served the next input event after it (PyTorch records a
 *     segment_alloc before the alloc that needed it).
 * @addr: the segment or mapped range (0 for OOM).
 * @size: bytes of device memory (OOM: the rounded request).
 * @stream: the stream the allocator recorded.
 * @device_free: OOM only: the free device memory PyTorch saw (`device_free`), else 0.
 */
typedef struct {
    uint64_t index;
    FsimAddr addr;
    uint64_t size;
    uint64_t stream;
    uint64_t device_free;
    FsimOutcomeKind kind;
} FsimOutcome;

const char *fsim_outcome_kind_name(FsimOutcomeKind kind);

G_END_DECLS
