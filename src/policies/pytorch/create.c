/* SPDX-License-Identifier: MIT */
/*
 * Creation and destruction of PyTorch's caching allocator model, and its knobs: the
 * PYTORCH_CUDA_ALLOC_CONF keys with an effect on placement (parsed by alloc-conf.c), in the
 * key-file group of the policy (`caching` or `expandable`).
 */
#include <glib.h>

#include "model.h"

/* clang-format off */
#define PYTORCH_COMMON_KNOBS                                                                       \
    {"max_split_size_mb", "unlimited",                                                          \
     "blocks of this many MiB or more are never split and serve only near-fit requests (>= 20)"}, \
    {"max_non_split_rounding_mb", "20",                                                         \
     "how many MiB an oversize cached block may exceed an oversize request by (>= 20)"},          \
    {"roundup_power2_divisions", "0",                                                           \
     "round requests up to 1/N of their power-of-two interval: N or [MIB:N,...,>:N] (0 = off)"},  \
    {"roundup_bypass_threshold_mb", "unlimited",                                                \
     "PyTorch 1.13/2.0: requests above this many MiB skip the power-of-two rounding"},           \
    {"garbage_collection_threshold", "0",                                                       \
     "free old cached blocks above this fraction of the allowed memory (needs a fraction)"},     \
    {"per_process_memory_fraction", "unset",                                                    \
     "the fraction of the device's memory the process may hold (set_per_process_memory_fraction)"}, \
    {"large_segment_size_mb", "20",                                                             \
     "MiB of the segment for 1-10 MiB requests and of a large-pool expandable page"},            \
    {"platform", "cuda",                                                                        \
     "cuda, or npu: torch_npu's allocator (Ascend): each request padded by 32 bytes, the "        \
     "PYTORCH_NPU_ALLOC_CONF keys below, no max_non_split_rounding_mb"},                         \
    {"base_addr_aligned_kb", "16",                                                              \
     "npu, expandable segments: requests of 2 MiB or more start on this KiB boundary (0-16)"},  \
    {"page_size", "2m",                                                                         \
     "npu: 1g makes large-pool segments and expandable large-pool pages whole GiB"},            \
    {"segment_size_mb", "unset",                                                                \
     "npu, expandable segments: MiB of a large-pool page (20-512; default large_segment_size_mb)"}

#define PYTORCH_POOL_KNOBS                                                                         \
    {"mempool_use_on_oom", "",                                                                  \
     "private pools (ids, comma-separated) made with MemPool(use_on_oom=True): their cached "    \
     "blocks serve default-pool requests that would fail"},                                     \
    {"mempool_no_split", "",                                                                    \
     "private pools (ids, comma-separated) made with MemPool(no_split=True): blocks never split"}

const FsimKnob fsim_pytorch_caching_knobs[] = {
    PYTORCH_COMMON_KNOBS,
    PYTORCH_POOL_KNOBS,
    {"expandable_segments", "False", "True: map pages into one growing segment per pool and stream"},
    {NULL, NULL, NULL},
};

const FsimKnob fsim_pytorch_expandable_knobs[] = {
    PYTORCH_COMMON_KNOBS,
    PYTORCH_POOL_KNOBS,
    {NULL, NULL, NULL},
};
/* clang-format on */

/* A page size of expandable segments (the knob @key) must be whole device pages. */
static gboolean
check_page(const FsimPolicyOps *ops, const char *key, uint64_t page, const FsimDevice *device,
           GError **error)
{
    if (page % device->spec.granularity == 0)
        return TRUE;
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                "%s.%s: %" G_GUINT64_FORMAT " MiB is not a whole number of %" G_GUINT64_FORMAT
                "-byte device pages, which expandable segments map",
                ops->name, key, page / FSIM_MiB, device->spec.granularity);
    return FALSE;
}

FsimPolicy *
fsim_pytorch_create(const FsimPolicyOps *ops, FsimDevice *device, GKeyFile *config,
                    gboolean force_expandable, GError **error)
{
    Pytorch *pt;
    FsimAllocConf conf;
    g_autoptr(GArray) use_on_oom = NULL;
    g_autoptr(GArray) no_split = NULL;
    g_autofree char *use_on_oom_text =
        config != NULL ? g_key_file_get_string(config, ops->name, "mempool_use_on_oom", NULL)
                       : NULL;
    g_autofree char *no_split_text =
        config != NULL ? g_key_file_get_string(config, ops->name, "mempool_no_split", NULL) : NULL;
    g_autofree char *use_on_oom_knob = g_strdup_printf("%s.mempool_use_on_oom", ops->name);
    g_autofree char *no_split_knob = g_strdup_printf("%s.mempool_no_split", ops->name);

    if (!fsim_alloc_conf_load(&conf, config, ops->name, error))
        return NULL;
    if (!fsim_pytorch_parse_pool_ids(use_on_oom_text, use_on_oom_knob, &use_on_oom, error) ||
        !fsim_pytorch_parse_pool_ids(no_split_text, no_split_knob, &no_split, error))
        return NULL;
    if (force_expandable)
        conf.expandable_segments = TRUE;
    if (conf.expandable_segments &&
        (!check_page(ops, "large_segment_size_mb", conf.large_segment_size, device, error) ||
         !check_page(ops, "segment_size_mb", conf.npu_segment_size, device, error)))
        return NULL;
    pt = g_new0(Pytorch, 1);
    pt->base.ops = ops;
    pt->base.device = device;
    pt->conf = conf;
    pt->expandable = conf.expandable_segments;
    pt->gc_active = conf.has_memory_fraction && conf.garbage_collection_threshold > 0.0;
    pt->round_plain = conf.platform != FSIM_PLATFORM_NPU;
    for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++)
        pt->round_plain = pt->round_plain && conf.roundup_power2_divisions[i] <= 1;
    /* setMemoryFraction(): fraction x the total cudaMemGetInfo reports */
    pt->allowed_memory_maximum =
        (uint64_t)(conf.per_process_memory_fraction * (double)device->spec.total_bytes);
    fsim_pytorch_pool_init(pt, &pt->small, TRUE, NULL);
    fsim_pytorch_pool_init(pt, &pt->large, FALSE, NULL);
    pt->default_pools[0] = &pt->large;
    pt->default_pools[1] = &pt->small;
    pt->private_pools = g_ptr_array_new_with_free_func(fsim_pytorch_private_pool_free);
    pt->captures = g_array_new(FALSE, FALSE, sizeof(Capture));
    pt->use_on_oom_ids = g_steal_pointer(&use_on_oom);
    pt->no_split_ids = g_steal_pointer(&no_split);
    pt->slabs = g_ptr_array_new_with_free_func(g_aligned_free);
    pt->scratch = g_ptr_array_new();
    pt->scratch2 = g_ptr_array_new();
    return &pt->base;
}

void
fsim_pytorch_destroy(FsimPolicy *self)
{
    Pytorch *pt = pytorch_from_policy(self);

    /* The device forgets what is left; the blocks live in the slabs. */
    while (pt->segments != NULL)
        fsim_pytorch_segment_destroy(pt, pt->segments);
    fsim_pytorch_pool_clear(&pt->small);
    fsim_pytorch_pool_clear(&pt->large);
    g_ptr_array_unref(pt->private_pools);
    g_array_unref(pt->captures);
    g_array_unref(pt->use_on_oom_ids);
    g_array_unref(pt->no_split_ids);
    g_ptr_array_unref(pt->slabs);
    g_ptr_array_unref(pt->scratch);
    g_ptr_array_unref(pt->scratch2);
    g_free(pt);
}

const FsimAllocConf *
fsim_pytorch_conf(const FsimPolicy *self)
{
    return &pytorch_from_const_policy(self)->conf;
}
