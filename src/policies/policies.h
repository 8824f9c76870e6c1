/* SPDX-License-Identifier: MIT */
/*
 * The registered policies: one `const FsimPolicyOps` per file in this directory.  Adding a
 * policy means one .c file, one line here, one line in all_policies[] (src/core/registry.c) and
 * one entry in CMakeLists.txt; the conformance suite then runs it automatically.
 */
#pragma once

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
