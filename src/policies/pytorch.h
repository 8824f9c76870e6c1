/* SPDX-License-Identifier: MIT */
/*
 * PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), the one model behind two
 * registered policies: `caching` (cudaMalloc'd segments unless its expandable_segments knob says
 * otherwise, as PYTORCH_CUDA_ALLOC_CONF does) and `expandable` (expandable segments always).
 * PyTorch has one allocator with an expandable-segments mode; so does fragsim.  caching.c and
 * expandable.c only define the two ops tables (FSIM_PYTORCH_DEFINE_POLICY); the model is in
 * pytorch/, whose private header pytorch/model.h says which file holds which part.
 */
#pragma once

#include <glib.h>

#include "fragsim/alloc-conf.h"
#include "fragsim/policy.h"

G_BEGIN_DECLS

/**
 * fsim_pytorch_create:
 * @ops: the ops table of the policy being created; its name is the key-file group of the knobs.
 * @device: the device (borrowed).
 * @config: (nullable): the run's knobs.
 * @force_expandable: expandable segments regardless of the `expandable_segments` knob.
 * @error: FSIM_ERROR_USAGE for a bad knob.
 *
 * Returns: (transfer full) (nullable): the policy.
 */
FsimPolicy *fsim_pytorch_create(const FsimPolicyOps *ops, FsimDevice *device, GKeyFile *config,
                                gboolean force_expandable, GError **error);

/* The operations, shared by both ops tables (see policy.h for their contracts). */
void fsim_pytorch_destroy(FsimPolicy *self);
FsimStatus fsim_pytorch_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out);
void fsim_pytorch_dealloc(FsimPolicy *self, const FsimBlock *block, FsimTime now);
void fsim_pytorch_empty_cache(FsimPolicy *self, FsimTime now);
void fsim_pytorch_get_stats(const FsimPolicy *self, FsimPolicyStats *out);
gboolean fsim_pytorch_check(const FsimPolicy *self, GError **error);
gboolean fsim_pytorch_seed(FsimPolicy *self, const FsimInitialState *state, FsimBlock *blocks,
                           GError **error);
void fsim_pytorch_describe(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data);
void fsim_pytorch_pool_begin(FsimPolicy *self, uint64_t pool, uint64_t stream, FsimTime now);
void fsim_pytorch_pool_end(FsimPolicy *self, uint64_t pool, uint64_t stream, FsimTime now);
void fsim_pytorch_pool_release(FsimPolicy *self, uint64_t pool, FsimTime now);
gsize fsim_pytorch_pool_stats(const FsimPolicy *self, FsimPoolStats *out, gsize max);

/*
 * FSIM_PYTORCH_DEFINE_POLICY:
 * @NAME: caching or expandable (a bare word): the policy's name and key-file group.
 * @FORCE_EXPANDABLE: expandable segments regardless of the `expandable_segments` knob.
 * @SUMMARY: the one-line summary `fragsim policies` prints.
 *
 * Defines `const FsimPolicyOps fsim_policy_NAME`, with the knobs fsim_pytorch_NAME_knobs, a
 * create function that calls fsim_pytorch_create() and every other operation the model's: the
 * whole of caching.c and expandable.c but their documentation.
 */
#define FSIM_PYTORCH_DEFINE_POLICY(NAME, FORCE_EXPANDABLE, SUMMARY)                               \
    static FsimPolicy *NAME##_create(FsimDevice *device, GKeyFile *config, GError **error)        \
    {                                                                                             \
        return fsim_pytorch_create(&fsim_policy_##NAME, device, config, FORCE_EXPANDABLE, error); \
    }                                                                                             \
    const FsimPolicyOps fsim_policy_##NAME = {                                                    \
        .name = #NAME,                                                                            \
        .summary = SUMMARY,                                                                       \
        .knobs = fsim_pytorch_##NAME##_knobs,                                                     \
        .create = NAME##_create,                                                                  \
        .destroy = fsim_pytorch_destroy,                                                          \
        .alloc = fsim_pytorch_alloc,                                                              \
        .dealloc = fsim_pytorch_dealloc,                                                          \
        .empty_cache = fsim_pytorch_empty_cache,                                                  \
        .get_stats = fsim_pytorch_get_stats,                                                      \
        .check = fsim_pytorch_check,                                                              \
        .seed = fsim_pytorch_seed,                                                                \
        .describe = fsim_pytorch_describe,                                                        \
        .pool_begin = fsim_pytorch_pool_begin,                                                    \
        .pool_end = fsim_pytorch_pool_end,                                                        \
        .pool_release = fsim_pytorch_pool_release,                                                \
        .pool_stats = fsim_pytorch_pool_stats,                                                    \
    }

/* The knob tables: every PYTORCH_CUDA_ALLOC_CONF key with an effect on placement; the expandable
 * one lacks `expandable_segments`. */
extern const FsimKnob fsim_pytorch_caching_knobs[];
extern const FsimKnob fsim_pytorch_expandable_knobs[];

/* The settings a `caching` or `expandable` policy runs with (its expandable_segments field says
 * which mode it is in). */
const FsimAllocConf *fsim_pytorch_conf(const FsimPolicy *self);

G_END_DECLS
