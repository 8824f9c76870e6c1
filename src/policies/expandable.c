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

static FsimPolicy *
expandable_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    return fsim_pytorch_create(&fsim_policy_expandable, device, config, TRUE, error);
}

const FsimPolicyOps fsim_policy_expandable = {
    .name = "expandable",
    .summary = "PyTorch's allocator with expandable segments: pages mapped into growing segments "
               "(one per pool and stream, private pools too)",
    .knobs = fsim_pytorch_expandable_knobs,
    .create = expandable_create,
    .destroy = fsim_pytorch_destroy,
    .alloc = fsim_pytorch_alloc,
    .dealloc = fsim_pytorch_dealloc,
    .empty_cache = fsim_pytorch_empty_cache,
    .get_stats = fsim_pytorch_get_stats,
    .check = fsim_pytorch_check,
    .seed = fsim_pytorch_seed,
    .describe = fsim_pytorch_describe,
    .pool_begin = fsim_pytorch_pool_begin,
    .pool_end = fsim_pytorch_pool_end,
    .pool_release = fsim_pytorch_pool_release,
    .pool_stats = fsim_pytorch_pool_stats,
};
