/* SPDX-License-Identifier: MIT */
/*
 * caching: PyTorch's native CUDA caching allocator (CUDACachingAllocator), exactly.
 *
 * 512-byte rounding (or roundup_power2_divisions), a small pool (requests of at most 1 MiB, 2 MiB
 * segments) and a large pool (20 MiB segments for 1-10 MiB, 2 MiB rounding above), per-stream
 * best fit on (stream, size, address) with the allocation at the low end of the block, PyTorch's
 * split and oversize rules, merging of free neighbours, and before an OOM: garbage collection,
 * release_available_cached_blocks, release_cached_blocks and a retry.  With
 * `expandable_segments=True` it is the `expandable` policy, as PYTORCH_CUDA_ALLOC_CONF makes it.
 *
 * The model lives in pytorch/ (shared with expandable.c); docs/policies.md lists the rules, the
 * knobs and what is not modelled.  Knobs (group `caching`): the PYTORCH_CUDA_ALLOC_CONF keys with
 * an effect on placement, in PyTorch's value syntax (fragsim/alloc-conf.h).
 */
#include <glib.h>

#include "policies.h"
#include "pytorch.h"

FSIM_PYTORCH_DEFINE_POLICY(
    caching, FALSE,
    "PyTorch's CUDA caching allocator, exactly (PYTORCH_CUDA_ALLOC_CONF knobs; "
    "private pools of CUDA graphs and MemPools)");
