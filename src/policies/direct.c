/* SPDX-License-Identifier: MIT */
/*
 * direct: no caching at all.  Every allocation is its own cudaMalloc and every free its own
 * cudaFree, as with PYTORCH_NO_CUDA_MEMORY_CACHING=1.  The device rounds each call up to whole
 * pages, and the block is the whole pages: there is no fragmentation beyond that rounding (shown
 * as internal fragmentation), but a driver call, and for cudaFree a device synchronisation, per
 * operation.  The baseline that shows what caching buys.
 *
 * Knobs: none.
 */
#include <glib.h>

#include "policies.h"

typedef struct {
    FsimPolicy base;     /* must be first */
    uint64_t live_bytes; /* the live blocks' sizes, each rounded as the device reserves it */
} Direct;

FSIM_POLICY_DEFINE_TYPE(Direct, direct)

static FsimPolicy *
direct_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    (void)config;
    (void)error;
    return &direct_new(device)->base;
}

static FsimStatus
direct_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    Direct *direct = direct_from_policy(self);
    FsimAddr addr;

    if (fsim_device_mem_alloc(self->device, req->size, &addr) != FSIM_OK)
        return FSIM_OOM;
    out->addr = addr;
    out->size = fsim_device_round(self->device, req->size);
    out->cookie = 0;
    direct->live_bytes += out->size;
    return FSIM_OK;
}

static void
direct_dealloc(FsimPolicy *self, const FsimBlock *block, FsimTime now)
{
    Direct *direct = direct_from_policy(self);

    (void)now;
    fsim_device_mem_free(self->device, block->addr, block->size);
    direct->live_bytes -= block->size;
}

static gboolean
direct_check(const FsimPolicy *self, GError **error)
{
    /* Every reserved byte belongs to a live block: nothing is ever cached. */
    return fsim_policy_check_accounts(self, ((const Direct *)self)->live_bytes, NULL, 0, error);
}

const FsimPolicyOps fsim_policy_direct = {
    .name = "direct",
    .summary = "no caching: one cudaMalloc and one cudaFree per tensor",
    .knobs = NULL,
    .create = direct_create,
    .destroy = fsim_policy_destroy_instance,
    .alloc = direct_alloc,
    .dealloc = direct_dealloc,
    .check = direct_check,
};
