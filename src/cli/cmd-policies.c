/* SPDX-License-Identifier: MIT */
/*
 * fragsim policies [--json]: the registered allocator policies and their knobs.
 */
#include <glib.h>

#include "cli.h"

#define POLICIES_POOLS                                                                             \
    "Private pools (CUDA graphs, torch.cuda.MemPool; pool_begin, pool_end, pool_release in a\n"    \
    "trace, pool ids in a snapshot): the policies marked [private pools] give each pool its own\n" \
    "small and large pools, never shared with the default pools or another pool; route a\n"        \
    "stream's allocations to the newest scope open on it; keep a pool's memory until its last\n"   \
    "reference is released, then return it at the next empty_cache; skip the release-and-retry\n"  \
    "before an OOM while a capture is underway (docs/policies.md).  The others ignore scopes.\n"   \
    "replay, explain and the report give each pool's needs (its share of the run's needed\n"       \
    "capacity: what it reserves at the peak of a replay on that capacity), its own peak and\n"     \
    "what it holds at the end.\n"

/* A policy as a JSON object: its name, summary, whether it has private pools, its knobs. */
static void
policy_json_add(FsimJsonWriter *builder, const FsimPolicyOps *policy)
{
    fsim_json_begin_object(builder);
    fsim_cli_json_string(builder, "name", policy->name);
    fsim_cli_json_string(builder, "summary", policy->summary);
    fsim_cli_json_bool(builder, "private_pools", policy->pool_begin != NULL);
    fsim_cli_json_begin_array(builder, "knobs");
    for (const FsimKnob *k = policy->knobs; k != NULL && k->name != NULL; k++) {
        fsim_json_begin_object(builder);
        fsim_cli_json_string(builder, "name", k->name);
        fsim_cli_json_string(builder, "default", k->default_value);
        fsim_cli_json_string(builder, "summary", k->summary);
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
    fsim_json_end_object(builder);
}

int
fsim_cmd_policies(int argc, char **argv)
{
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    gsize n;
    const FsimPolicyOps *const *policies = fsim_policy_list(&n);

    if (!fsim_cli_parse_args(
            "policies", "- list allocator policies", entries,
            "Knobs are set with 'fragsim replay --set POLICY.KEY=VALUE'.\n\n" POLICIES_POOLS, NULL,
            &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (json) {
        g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
        fsim_cli_json_begin_array(builder, "policies");
        for (gsize i = 0; i < n; i++)
            policy_json_add(builder, policies[i]);
        fsim_json_end_array(builder);
        fsim_cli_json_print(builder);
        return FSIM_EXIT_OK;
    }
    for (gsize i = 0; i < n; i++) {
        g_print("%-11s %s%s\n", policies[i]->name, policies[i]->summary,
                policies[i]->pool_begin != NULL ? " [private pools]" : "");
        for (const FsimKnob *k = policies[i]->knobs; k != NULL && k->name != NULL; k++)
            g_print("    %s.%s=%s  %s\n", policies[i]->name, k->name, k->default_value, k->summary);
    }
    g_print("\n%s", POLICIES_POOLS);
    return FSIM_EXIT_OK;
}
