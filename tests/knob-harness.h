/* SPDX-License-Identifier: MIT */
/*
 * The white-box harness of pytorch-harness.h for policies configured by knobs rather than by
 * PYTORCH_CUDA_ALLOC_CONF (test-bfc.c, test-buddy.c, ...): harness_init_knobs() takes the knobs
 * as `--set` does, `POLICY.KEY=VALUE`.
 */
#pragma once

#include <glib.h>

#include <string.h>

#include "fragsim/fragsim.h"

#include "pytorch-harness.h"

/* A @policy on a device of @capacity with the knobs @sets (NULL-terminated, may be NULL). */
static inline void
harness_init_knobs(Harness *h, const char *policy, const char *capacity, const char *const *sets)
{
    FsimDeviceSpec spec;
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) error = NULL;

    memset(h, 0, sizeof(*h));
    g_assert_true(fsim_device_spec_parse(capacity, &spec, &error));
    h->device = fsim_device_sim_new(&spec, NULL, &error);
    g_assert_no_error(error);
    h->device->observer = harness_observer;
    h->device->observer_data = h;
    h->calls = g_array_new(FALSE, FALSE, sizeof(Call));
    for (const char *const *set = sets; set != NULL && *set != NULL; set++) {
        const char *dot = strchr(*set, '.');
        const char *eq = strchr(*set, '=');
        g_autofree char *group = NULL;
        g_autofree char *key = NULL;

        g_assert_true(dot != NULL && eq != NULL && dot < eq);
        group = g_strndup(*set, (gsize)(dot - *set));
        key = g_strndup(dot + 1, (gsize)(eq - dot - 1));
        g_key_file_set_string(config, group, key, eq + 1);
    }
    h->policy = fsim_policy_new(policy, h->device, config, &error);
    g_assert_no_error(error);
}
