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

/* The destroy() of a policy that owns nothing but its instance. */
void fsim_policy_destroy_instance(FsimPolicy *self);

/*
 * FsimTally:
 * @what: its name in a mismatch (`allocated`).
 * @counted: the figure as check() counted it afresh (the bytes of the blocks in use it walked).
 * @kept: the figure as the policy keeps it (its counter of allocated bytes).
 *
 * One figure of a policy's accounting, for fsim_policy_check_accounts().
 */
typedef struct {
    const char *what;
    uint64_t counted;
    uint64_t kept;
} FsimTally;

/*
 * fsim_policy_check_accounts:
 * @self: the policy.
 * @reserved: the device memory it holds, as it counts it.
 * @tallies: (nullable): @n figures of its own accounting.
 *
 * The end of a check(): TRUE when @reserved is the device's own count of reserved bytes and each
 * tally's two figures agree; else FALSE with @error "accounting mismatch: WHAT COUNTED/KEPT, ...,
 * reserved RESERVED/DEVICE".
 */
gboolean fsim_policy_check_accounts(const FsimPolicy *self, uint64_t reserved,
                                    const FsimTally *tallies, gsize n, GError **error);
