/* SPDX-License-Identifier: MIT */
/*
 * Golden runs: tiny traces in tests/data/traces/golden-*.trace, whose expected figures per policy
 * were worked out by hand in the traces' comments, live in expected/<trace>.txt.  A change that
 * moves a number must update the file on purpose.  Every registered policy must have a line in
 * every expected file; a missing line fails with the figures to review and add.
 */
#include <glib.h>

#include <stdlib.h>
#include <string.h>

#include "fragsim/fragsim.h"

static gboolean
next_event(gpointer data, FsimEvent *ev, GError **error)
{
    return fsim_trace_stream_next(data, ev, error);
}

static FsimMetrics
run_golden(const char *trace_path, const char *policy, const char *device)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(trace_path, &error);
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(FsimLifetimes) lifetimes = NULL;
    FsimRunConfig config;

    g_assert_no_error(error);
    stream = fsim_trace_stream_open(trace, 0, &error);
    g_assert_no_error(error);
    fsim_run_config_init(&config);
    config.policy = policy;
    if (fsim_policy_is_offline(policy)) {
        lifetimes = fsim_lifetimes_from_trace(trace, 0, &error);
        g_assert_no_error(error);
        config.lifetimes = lifetimes;
    }
    config.paranoid = TRUE;
    g_assert_true(fsim_device_spec_parse(device, &config.device, &error));
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    g_assert_true(fsim_engine_run(engine, next_event, stream, &error));
    g_assert_no_error(error);
    return *fsim_engine_metrics(engine);
}

static void
test_golden(gconstpointer data)
{
    const char *name = data; /* "golden-fragment" */
    g_autofree char *file = g_strdup_printf("%s.txt", name);
    g_autofree char *trace_file = g_strdup_printf("%s.trace", name);
    g_autofree char *expected_path =
        g_test_build_filename(G_TEST_DIST, "data", "traces", "expected", file, NULL);
    g_autofree char *trace_path =
        g_test_build_filename(G_TEST_DIST, "data", "traces", trace_file, NULL);
    g_autofree char *contents = NULL;
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) lines = NULL;
    g_autofree char *device = NULL;
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    gsize n_policies;
    const FsimPolicyOps *const *policies = fsim_policy_list(&n_policies);

    g_assert_true(g_file_get_contents(expected_path, &contents, NULL, &error));
    g_assert_no_error(error);
    lines = g_strsplit(contents, "\n", -1);
    for (gsize i = 0; lines[i] != NULL; i++) {
        g_auto(GStrv) f = NULL;
        FsimMetrics m;

        if (g_str_has_prefix(lines[i], "# device ")) {
            g_free(device);
            device = g_strdup(lines[i] + strlen("# device "));
            continue;
        }
        if (lines[i][0] == '#' || lines[i][0] == '\0')
            continue;
        f = g_strsplit_set(lines[i], " ", -1);
        g_assert_cmpuint(g_strv_length(f), ==, 10);
        g_assert_nonnull(device);
        g_assert_nonnull(fsim_policy_lookup(f[0]));
        g_hash_table_add(seen, g_strdup(f[0]));
        m = run_golden(trace_path, f[0], device);
        g_test_message("%s %s", name, f[0]);
        g_assert_cmpuint(m.peak_reserved_bytes, ==, g_ascii_strtoull(f[1], NULL, 10));
        g_assert_cmpuint(m.peak_allocated_bytes, ==, g_ascii_strtoull(f[2], NULL, 10));
        g_assert_cmpuint(m.peak_requested_bytes, ==, g_ascii_strtoull(f[3], NULL, 10));
        g_assert_cmpuint(m.lower_bound_bytes, ==, m.peak_requested_bytes);
        g_assert_cmpuint(m.ooms, ==, g_ascii_strtoull(f[4], NULL, 10));
        g_assert_cmpint(m.first_oom_event, ==, g_ascii_strtoll(f[5], NULL, 10));
        g_assert_cmpuint(m.device_mallocs, ==, g_ascii_strtoull(f[6], NULL, 10));
        g_assert_cmpuint(m.device_frees, ==, g_ascii_strtoull(f[7], NULL, 10));
        g_assert_cmpuint(m.device_maps, ==, g_ascii_strtoull(f[8], NULL, 10));
        g_assert_cmpuint(m.device_unmaps, ==, g_ascii_strtoull(f[9], NULL, 10));
    }
    for (gsize p = 0; p < n_policies; p++) {
        if (!g_hash_table_contains(seen, policies[p]->name)) {
            FsimMetrics m = run_golden(trace_path, policies[p]->name, device);

            g_error("%s has no line for policy '%s'; this run gives, to check by hand and add:\n"
                    "%s %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT
                    " %" G_GUINT64_FORMAT " %" G_GINT64_FORMAT " %" G_GUINT64_FORMAT
                    " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT,
                    expected_path, policies[p]->name, policies[p]->name, m.peak_reserved_bytes,
                    m.peak_allocated_bytes, m.peak_requested_bytes, m.ooms, m.first_oom_event,
                    m.device_mallocs, m.device_frees, m.device_maps, m.device_unmaps);
        }
    }
}

int
main(int argc, char **argv)
{
    static const char *const goldens[] = {"golden-fragment", "golden-oom"};

    g_test_init(&argc, &argv, NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(goldens); i++) {
        g_autofree char *path = g_strdup_printf("/golden/%s", goldens[i]);

        g_test_add_data_func(path, goldens[i], test_golden);
    }
    return g_test_run();
}
