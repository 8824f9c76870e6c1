/* SPDX-License-Identifier: MIT */
/*
 * fragsim: what a recording itself did, beside the model (`replay`'s `recorded` row).
 *
 * A PyTorch snapshot keeps the allocator's own decisions (segment_alloc, segment_free,
 * segment_map, segment_unmap, oom) apart from the events.  Summed over the seeded state at trace
 * start they give the memory the recording reserved, its driver calls and its OOMs; its alloc and
 * free entries give what it allocated.  Nothing here runs a policy.
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

G_BEGIN_DECLS

/**
 * FsimRecorded:
 * @has_segments: the device's trace has segment events (else there is nothing to show).
 * @metrics: peak_reserved_bytes (over the seeded start state), peak_allocated_bytes and
 *     peak_requested_bytes (PyTorch's block sizes: the trace knows no other), ooms (recorded
 *     `oom` entries) and first_oom_event, device_mallocs / device_frees / device_maps /
 *     device_unmaps (segment actions), events, allocs, frees; the rest zero, needed_bytes null.
 * @capacity_bytes: the device capacity the recording implies: at its first OOM, what it reserved
 *     plus the free memory PyTorch saw (`device_free`); 0 when it implies none.
 */
typedef struct {
    gboolean has_segments;
    FsimMetrics metrics;
    uint64_t capacity_bytes;
} FsimRecorded;

/* Sum up device @device of @trace.  Returns: %FALSE with @error when its stream cannot be
 * read. */
gboolean fsim_recorded_summary(FsimTrace *trace, uint32_t device, FsimRecorded *out,
                               GError **error);

G_END_DECLS
