/* SPDX-License-Identifier: MIT */
/*
 * paged: every request is served by whole pages mapped into a fresh virtual range, in the manner
 * of vLLM's PagedAttention block tables and of vAttention (Prabhu et al., ASPLOS 2025), which maps
 * physical pages on demand behind contiguous virtual buffers.  Because physical pages are
 * fungible and each allocation gets its own virtual range, there is no external fragmentation at
 * all: the price is internal waste (the last page of each allocation is partly unused) and a map
 * and an unmap call per allocation.
 *
 * Knobs:
 *   page_size  bytes per page (default 2MiB, the CUDA VMM granularity; 64KiB models the small
 *              pages vAttention obtains through a driver extension).  A power of two, >= 4KiB.
 */
#include <glib.h>

#include "policies.h"

typedef struct {
    FsimPolicy base; /* must be first */
    uint64_t page_size;
    uint64_t live_blocks;
    uint64_t mapped_bytes;
} Paged;

static const FsimKnob paged_knobs[] = {
    {"page_size", "2MiB", "bytes per physical page (a power of two, at least 4KiB)"},
    {NULL, NULL, NULL},
};

FSIM_POLICY_DEFINE_TYPE(Paged, paged)

static FsimPolicy *
paged_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    g_autofree Paged *paged = paged_new(device);
    uint64_t page_size;

    if (!fsim_knob_get_size(paged->base.ops, config, "page_size", &page_size, error))
        return NULL;
    if (page_size < 4 * FSIM_KiB || (page_size & (page_size - 1)) != 0 || page_size > FSIM_GiB) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "paged.page_size: %" G_GUINT64_FORMAT
                    " bytes is not a power of two between 4KiB and 1GiB",
                    page_size);
        return NULL;
    }
    paged->page_size = page_size;
    return &g_steal_pointer(&paged)->base;
}

static FsimStatus
paged_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    Paged *paged = paged_from_policy(self);
    uint64_t size = (req->size + paged->page_size - 1) / paged->page_size * paged->page_size;
    FsimAddr addr;

    /* Fail early, before reserving address space, when the pages cannot exist. */
    if (size > fsim_device_free_bytes(self->device))
        return FSIM_OOM;
    if (fsim_device_va_reserve(self->device, size, paged->page_size, &addr) != FSIM_OK)
        return FSIM_OOM;
    if (fsim_device_map(self->device, addr, size, paged->page_size) != FSIM_OK) {
        fsim_device_va_release(self->device, addr, size);
        return FSIM_OOM;
    }
    out->addr = addr;
    out->size = size;
    out->cookie = 0;
    paged->live_blocks++;
    paged->mapped_bytes += size;
    return FSIM_OK;
}

static void
paged_dealloc(FsimPolicy *self, const FsimBlock *block, FsimTime now)
{
    Paged *paged = paged_from_policy(self);

    (void)now;
    fsim_device_unmap(self->device, block->addr, block->size, paged->page_size);
    fsim_device_va_release(self->device, block->addr, block->size);
    paged->live_blocks--;
    paged->mapped_bytes -= block->size;
}

static gboolean
paged_check(const FsimPolicy *self, GError **error)
{
    const Paged *paged = (const Paged *)self;

    if (paged->live_blocks == 0 && paged->mapped_bytes != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "pages mapped without live blocks");
        return FALSE;
    }
    /* the device holds the pages of the live blocks, no more */
    return fsim_policy_check_accounts(self, paged->mapped_bytes, NULL, 0, error);
}

const FsimPolicyOps fsim_policy_paged = {
    .name = "paged",
    .summary = "whole pages mapped per request into fresh virtual ranges (vLLM/vAttention style)",
    .knobs = paged_knobs,
    .create = paged_create,
    .destroy = fsim_policy_destroy_instance,
    .alloc = paged_alloc,
    .dealloc = paged_dealloc,
    .check = paged_check,
};
