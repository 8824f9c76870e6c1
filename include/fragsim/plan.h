/* SPDX-License-Identifier: MIT */
/*
 * fragsim: allocation lifetimes and offline placement plans.
 *
 * An offline policy (the `planner`) places every allocation knowing when each one is freed.  It
 * never sees the trace: before the first event the engine hands it the run's lifetimes, one per
 * allocation in the order alloc() will be called (the blocks of the initial state first, in
 * address order, then each ALLOC event), on a clock of steps that counts the events of the stream
 * (the initial state is step 0, the first event step 1).  A lifetime ends at the step that makes
 * the memory reusable: the FREE, or for a deferred free its FREE_COMPLETED.
 *
 * fsim_lifetimes_from_trace() is the pre-pass that collects them from a trace device, and
 * fsim_plan_check() the placement checker: no two allocations alive at the same step may overlap.
 */
#pragma once

#include <glib.h>

#include "fragsim/trace.h"
#include "fragsim/types.h"

G_BEGIN_DECLS

#define FSIM_LIFETIME_FOREVER G_MAXUINT64
/* The offset of an allocation a plan leaves out (it would not fit the device: an OOM). */
#define FSIM_PLAN_UNPLACED G_MAXUINT64

/**
 * FsimLifetime:
 * @size: bytes requested by alloc() (for a block of the initial state: its block size).
 * @stream: the allocation's stream.
 * @start: the step of the allocation.
 * @end: the first step at which its memory is reusable (> @start), or %FSIM_LIFETIME_FOREVER.
 */
typedef struct {
    uint64_t size;
    uint64_t stream;
    uint64_t start;
    uint64_t end;
} FsimLifetime;

/**
 * FsimLifetimes:
 * @items: one per allocation, in the order alloc() receives them.
 * @n: how many.
 * @steps: steps of the stream (the last event's step).
 * @ends: (nullable): the index of every lifetime that ends, once each, in the order of their ends
 *     (each at its own step), as the pre-pass meets them; NULL when not known.  With the items'
 *     starts in order, every lifetime ending at or before a start comes before it.
 * @n_ends: how many.
 */
typedef struct {
    FsimLifetime *items;
    gsize n;
    uint64_t steps;
    gsize *ends;
    gsize n_ends;
} FsimLifetimes;

/**
 * fsim_lifetimes_from_trace:
 * @trace: an open trace.
 * @device: one of fsim_trace_devices().
 * @error: the stream's read errors.
 *
 * Reads the whole stream of @device once (and its initial state).
 *
 * Returns: (transfer full) (nullable): the lifetimes; free with fsim_lifetimes_free().
 */
FsimLifetimes *fsim_lifetimes_from_trace(FsimTrace *trace, uint32_t device, GError **error);
void fsim_lifetimes_free(FsimLifetimes *lifetimes);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimLifetimes, fsim_lifetimes_free)

/**
 * fsim_plan_check:
 * @lifetimes: the allocations.
 * @offsets: one per lifetime: where the plan places it, or %FSIM_PLAN_UNPLACED.
 * @sizes: one per lifetime: the bytes it occupies there (>= the lifetime's size).
 * @error: FSIM_ERROR_FAILED naming the first two allocations that overlap in time and space.
 *
 * The placement checker, O(n log n): a sweep over the steps with the live allocations ordered by
 * offset.
 *
 * Returns: %TRUE when the placement is valid.
 */
gboolean fsim_plan_check(const FsimLifetimes *lifetimes, const uint64_t *offsets,
                         const uint64_t *sizes, GError **error);

/**
 * fsim_plan_check_lifetimes:
 * @lifetimes: the allocations.
 * @sizes: one per lifetime, as for fsim_plan_check().
 * @error: FSIM_ERROR_FAILED, as fsim_plan_check() for the same fault.
 *
 * The checker's first part alone, O(n): each allocation has at least its bytes, and the
 * lifetimes start in order and end after they start.  For a plan whose places cannot overlap by
 * construction (each carved from the free space of one arena, given back at the end of its
 * lifetime, as the checker's sweep frees it).
 *
 * Returns: %TRUE when the sizes and lifetimes are valid.
 */
gboolean fsim_plan_check_lifetimes(const FsimLifetimes *lifetimes, const uint64_t *sizes,
                                   GError **error);

G_END_DECLS
