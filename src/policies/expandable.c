/* SPDX-License-Identifier: MIT */
/*
 * expandable: PyTorch's caching allocator with expandable segments (PYTORCH_CUDA_ALLOC_CONF
 * `expandable_segments:True`, Note [Expandable Segments] in CUDACachingAllocator.cpp).
 *
 * One virtual reservation of 1 1/8 x the device's memory per (pool, stream), pages of 2 MiB (small
 * pool) or large_segment_size (20 MiB, large pool) mapped on demand at the lowest address where
 * the request fits, best fit that uses the block at the growth frontier last, 512-byte splitting
 * in both pools, and release (before an OOM, or empty_cache) that unmaps the whole free pages of
 * free blocks.
 *
 * It is the same allocator as `caching` (pytorch/) with expandable segments forced on.  Knobs
 * (group `expandable`): those of `caching` but `expandable_segments`.
 */
#include <glib.h>

#include "policies.h"
#include "pytorch.h"

FSIM_PYTORCH_DEFINE_POLICY(
    expandable, TRUE,
    "PyTorch's allocator with expandable segments: pages mapped into growing segments "
    "(one per pool and stream, private pools too)");
