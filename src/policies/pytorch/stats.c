/* SPDX-License-Identifier: MIT */
/*
 * What only PyTorch's allocator model knows, reported through get_stats: the counters of
 * torch.cuda.memory_stats() (DeviceStats, aggregate over both pools) kept as the model runs,
 * and the largest cached block.
 */
#include <glib.h>

#include "model.h"

static uint64_t
pool_largest_free(const Pool *pool)
{
    uint64_t largest = 0;

    for (guint s = 0; s < pool->n_streams; s++) {
        FreeCursor cursor;
        const Block *last = freeset_last(&pool->streams[s]->free, &cursor);

        if (last != NULL && last->size > largest)
            largest = last->size;
    }
    return largest;
}

void
fsim_pytorch_get_stats(const FsimPolicy *self, FsimPolicyStats *out)
{
    const Pytorch *pt = pytorch_from_const_policy(self);
    const Stats *s = &pt->stats;

    out->cached_bytes = (uint64_t)(s->reserved_bytes.current - s->active_bytes.current);
    out->largest_free_block = MAX(pool_largest_free(&pt->small), pool_largest_free(&pt->large));
    out->num_splits = s->num_splits;
    out->num_merges = s->num_merges;
    out->num_alloc_retries = s->num_alloc_retries;
    out->n_extra = 0;
    /* torch.cuda.memory_stats() names, aggregate over both pools. */
    fsim_policy_stats_extra(out, "allocated_bytes.all.current",
                            (uint64_t)s->allocated_bytes.current);
    fsim_policy_stats_extra(out, "allocated_bytes.all.peak", (uint64_t)s->allocated_bytes.peak);
    fsim_policy_stats_extra(out, "reserved_bytes.all.current", (uint64_t)s->reserved_bytes.current);
    fsim_policy_stats_extra(out, "reserved_bytes.all.peak", (uint64_t)s->reserved_bytes.peak);
    fsim_policy_stats_extra(out, "active_bytes.all.current", (uint64_t)s->active_bytes.current);
    fsim_policy_stats_extra(out, "requested_bytes.all.current",
                            (uint64_t)s->requested_bytes.current);
    fsim_policy_stats_extra(out, "inactive_split_bytes.all.current",
                            (uint64_t)s->inactive_split_bytes.current);
    fsim_policy_stats_extra(out, "inactive_split.all.current", (uint64_t)s->inactive_split.current);
    fsim_policy_stats_extra(out, "segment.all.current", (uint64_t)s->segment.current);
    fsim_policy_stats_extra(out, "num_alloc_retries", s->num_alloc_retries);
    fsim_policy_stats_extra(out, "num_ooms", s->num_ooms);
    fsim_policy_stats_extra(out, "num_sync_all_streams", s->num_sync_all_streams);
    fsim_policy_stats_extra(out, "num_device_alloc", s->num_device_alloc);
    fsim_policy_stats_extra(out, "num_device_free", s->num_device_free);
    fsim_policy_stats_extra(out, "oversize_allocations.current",
                            (uint64_t)s->oversize_allocations.current);
    fsim_policy_stats_extra(out, "oversize_segments.current",
                            (uint64_t)s->oversize_segments.current);
}
