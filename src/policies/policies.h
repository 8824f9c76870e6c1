/* SPDX-License-Identifier: MIT */
/*
 * The registered policies: one `const FsimPolicyOps` per file in this directory.  Adding a
 * policy means one .c file, one line here, one line in all_policies[] (src/core/registry.c) and
 * one entry in CMakeLists.txt; the conformance suite then runs it automatically.
 */
#pragma once

#include <glib.h>

#include "fragsim/policy.h"

extern const FsimPolicyOps fsim_policy_direct;
extern const FsimPolicyOps fsim_policy_best_fit;
extern const FsimPolicyOps fsim_policy_paged;
extern const FsimPolicyOps fsim_policy_caching;
extern const FsimPolicyOps fsim_policy_expandable;
extern const FsimPolicyOps fsim_policy_bfc;
extern const FsimPolicyOps fsim_policy_buddy;
extern const FsimPolicyOps fsim_policy_planner;
extern const FsimPolicyOps fsim_policy_gmlake;
extern const FsimPolicyOps fsim_policy_async;

/*
 * FSIM_POLICY_DEFINE_TYPE:
 * @Type: the policy's struct, whose first member is `FsimPolicy base`.
 * @prefix: the prefix of its functions and of its table fsim_policy_PREFIX (best_fit).
 *
 * What G_DEFINE_TYPE is to a GObject: defines `Type *PREFIX_from_policy(FsimPolicy *)`, the
 * cast, and `Type *PREFIX_new(FsimDevice *device)`, a zeroed instance of the policy on @device
 * for its create() (freed with g_free()).
 */
#define FSIM_POLICY_DEFINE_TYPE(Type, prefix)                  \
    static inline Type *prefix##_from_policy(FsimPolicy *self) \
    {                                                          \
        return (Type *)self;                                   \
    }                                                          \
    static inline Type *prefix##_new(FsimDevice *device)       \
    {                                                          \
        Type *policy = g_new0(Type, 1);                        \
                                                               \
        policy->base.ops = &fsim_policy_##prefix;              \
        policy->base.device = device;                          \
        return policy;                                         \
    }
