/* SPDX-License-Identifier: MIT */
/*
 * The command line as users and scripts see it: the real binary (CTest passes its path in
 * FRAGSIM_BINARY) run with an argv array, its exit statuses, and the JSON contracts of DESIGN.md.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <json-glib/json-glib.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "test-util.h"

static char *
source_path(const char *relative)
{
    const char *dir = g_getenv("FRAGSIM_SOURCE_DIR");

    g_assert_nonnull(dir);
    return g_build_filename(dir, relative, NULL);
}

static void
test_help(void)
{
    static const char *const commands[] = {"replay", "info", "convert", "policies", "devices"};
    FsimTestRun r = fsim_test_run("--help", NULL);

    g_assert_cmpint(r.status, ==, 0);
    g_assert_nonnull(strstr(r.out, "replay"));
    fsim_test_run_clear(&r);
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        r = fsim_test_run(commands[i], "--help", NULL);
        g_assert_cmpint(r.status, ==, 0);
        g_assert_nonnull(strstr(r.out, "Usage:"));
        fsim_test_run_clear(&r);
    }
    r = fsim_test_run("frobnicate", NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run(NULL, NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
}

static void
test_replay_json(void)
{
    g_autofree char *trace = source_path("traces/fragmenting.trace");
    FsimTestRun r = fsim_test_run("replay", trace, "--json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root;
    JsonArray *runs;
    gsize n_metrics;
    const FsimMetricInfo *metrics = fsim_metrics_list(&n_metrics);
    gsize n_policies;

    fsim_policy_list(&n_policies);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_cmpstr(r.err, ==, "");
    root = fsim_test_parse_object(parser, r.out);
    g_assert_cmpstr(json_object_get_string_member(root, "trace"), ==, trace);
    runs = json_object_get_array_member(root, "runs");
    /* By default every registered policy runs. */
    g_assert_cmpuint(json_array_get_length(runs), ==, n_policies);
    for (guint i = 0; i < json_array_get_length(runs); i++) {
        JsonObject *run_object = json_array_get_object_element(runs, i);

        g_assert_true(json_object_has_member(run_object, "policy"));
        g_assert_cmpstr(json_object_get_string_member(run_object, "device"), ==,
                        FSIM_DEVICE_DEFAULT);
        g_assert_cmpint(json_object_get_int_member(run_object, "capacity_bytes"), >, 0);
        g_assert_cmpint(json_object_get_int_member(run_object, "trace_device"), ==, 0);
        for (gsize m = 0; m < n_metrics; m++) {
            if (!json_object_has_member(run_object, metrics[m].name))
                g_error("run %u lacks the metric '%s'", i, metrics[m].name);
        }
        g_assert_cmpint(json_object_get_int_member(run_object, "events"), ==, 5399);
        g_assert_true(json_object_get_null_member(run_object, "first_oom_event"));
    }
    fsim_test_run_clear(&r);
}

/* With --db, each run in the JSON names its row in the database. */
static void
test_replay_json_run_ids(void)
{
    g_autofree char *trace = source_path("traces/multi-stream.trace");
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "results.db", NULL);
    g_auto(FsimTestRun) r =
        fsim_test_run("replay", trace, "-p", "caching,paged", "--db", db, "--json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *runs;

    g_assert_cmpint(r.status, ==, 0);
    runs = json_object_get_array_member(fsim_test_parse_object(parser, r.out), "runs");
    g_assert_cmpuint(json_array_get_length(runs), ==, 2);
    g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(runs, 0), "run_id"),
                    ==, 1);
    g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(runs, 1), "run_id"),
                    ==, 2);
    fsim_test_remove_tree(dir);
}

static void
test_replay_fail_on_oom(void)
{
    g_autofree char *trace = source_path("traces/small-device-oom.trace");
    FsimTestRun r = fsim_test_run("replay", trace, "-p", "bestfit,paged", "-d", "t4-16gb",
                                  "--fail-on-oom", "--json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root;
    JsonArray *runs;

    g_assert_cmpint(r.status, ==, 3);
    /* The failing event is printed on stderr; stdout stays one JSON object. */
    g_assert_nonnull(strstr(r.err, "out of memory at event"));
    root = fsim_test_parse_object(parser, r.out);
    runs = json_object_get_array_member(root, "runs");
    g_assert_cmpuint(json_array_get_length(runs), ==, 2);
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(runs, 0), "status"),
                    ==, "oom");
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(runs, 1), "status"),
                    ==, "complete");
    fsim_test_run_clear(&r);
    /* Without --fail-on-oom the run completes, counting OOMs. */
    r = fsim_test_run("replay", trace, "-p", "bestfit", "-d", "t4-16gb", NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
}

static void
test_replay_usage_errors(void)
{
    g_autofree char *trace = source_path("traces/fragmenting.trace");
    FsimTestRun r = fsim_test_run("replay", trace, "-p", "bestfit,nosuch", NULL);

    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, "nosuch"));
    g_assert_nonnull(strstr(r.err, "paged")); /* names the valid ones */
    fsim_test_run_clear(&r);
    r = fsim_test_run("replay", trace, "--set", "paged.pagesize=4KiB", NULL);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, "page_size"));
    fsim_test_run_clear(&r);
    r = fsim_test_run("replay", trace, "--set", "paged.page_size=banana", NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run("replay", trace, "-d", "h100", NULL);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, "h100-80gb"));
    fsim_test_run_clear(&r);
    r = fsim_test_run("replay", NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run("replay", trace, "--no-such-option", NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run("replay", trace, "-p", "paged", "--set", "paged.page_size=64KiB", "--json",
                      NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
}

static void
test_replay_bad_input(void)
{
    g_autofree char *bad = source_path("tests/data/traces/bad-duplicate.trace");
    FsimTestRun r = fsim_test_run("replay", "/nonexistent/x.trace", NULL);

    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "/nonexistent/x.trace"));
    fsim_test_run_clear(&r);
    r = fsim_test_run("replay", bad, NULL);
    g_assert_cmpint(r.status, ==, 1);
    {
        g_autofree char *where = g_strdup_printf("%s:4:", bad);

        g_assert_nonnull(strstr(r.err, where));
    }
    fsim_test_run_clear(&r);
}

static void
test_info_json(void)
{
    g_autofree char *trace = source_path("traces/multi-stream.trace");
    FsimTestRun r = fsim_test_run("info", trace, "--json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root;
    JsonObject *device;
    JsonObject *actions;

    g_assert_cmpint(r.status, ==, 0);
    root = fsim_test_parse_object(parser, r.out);
    g_assert_cmpstr(json_object_get_string_member(root, "path"), ==, trace);
    g_assert_cmpstr(json_object_get_string_member(root, "format"), ==, "text");
    g_assert_true(json_object_get_null_member(root, "allocator_settings"));
    device = json_array_get_object_element(json_object_get_array_member(root, "devices"), 0);
    g_assert_cmpint(json_object_get_int_member(device, "device"), ==, 0);
    g_assert_cmpint(json_object_get_int_member(device, "events"), ==, 800);
    g_assert_cmpint(json_object_get_int_member(device, "streams"), ==, 3);
    g_assert_cmpint(json_object_get_int_member(device, "segments"), ==, 0);
    g_assert_cmpint(json_object_get_int_member(device, "reserved_bytes"), ==, 0);
    actions = json_object_get_object_member(device, "actions");
    g_assert_cmpint(json_object_get_int_member(actions, "mark"), ==, 40);
    g_assert_cmpint(json_object_get_int_member(actions, "free_completed"), ==, 40);
    g_assert_cmpint(json_object_get_int_member(actions, "alloc"), ==, 360);
    g_assert_cmpint(json_object_get_int_member(actions, "free"), ==, 360);
    fsim_test_run_clear(&r);
}

static void
test_convert(void)
{
    g_autofree char *trace = source_path("traces/multi-stream.trace");
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-XXXXXX", &error);
    g_autofree char *out = g_build_filename(dir, "copy.trace.gz", NULL);
    FsimTestRun a;
    FsimTestRun b;
    FsimTestRun r = fsim_test_run("convert", trace, out, NULL);

    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
    /* The converted trace replays to identical results. */
    a = fsim_test_run("replay", trace, "--json", "-p", "bestfit", NULL);
    b = fsim_test_run("replay", out, "--json", "-p", "bestfit", NULL);
    g_assert_cmpint(a.status, ==, 0);
    g_assert_cmpint(b.status, ==, 0);
    {
        g_autoptr(JsonParser) pa = json_parser_new();
        g_autoptr(JsonParser) pb = json_parser_new();
        JsonObject *ra = json_array_get_object_element(
            json_object_get_array_member(fsim_test_parse_object(pa, a.out), "runs"), 0);
        JsonObject *rb = json_array_get_object_element(
            json_object_get_array_member(fsim_test_parse_object(pb, b.out), "runs"), 0);

        g_assert_cmpint(json_object_get_int_member(ra, "peak_reserved_bytes"), ==,
                        json_object_get_int_member(rb, "peak_reserved_bytes"));
        g_assert_cmpint(json_object_get_int_member(ra, "events"), ==,
                        json_object_get_int_member(rb, "events"));
    }
    fsim_test_run_clear(&a);
    fsim_test_run_clear(&b);
    r = fsim_test_run("convert", trace, NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run("convert", trace, "/nonexistent/dir/out.trace", NULL);
    g_assert_cmpint(r.status, ==, 1);
    fsim_test_run_clear(&r);
    g_unlink(out);
    g_rmdir(dir);
}

static void
test_policies_and_devices_json(void)
{
    FsimTestRun r = fsim_test_run("policies", "--json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *array;
    gsize n;

    fsim_policy_list(&n);
    g_assert_cmpint(r.status, ==, 0);
    array = json_object_get_array_member(fsim_test_parse_object(parser, r.out), "policies");
    g_assert_cmpuint(json_array_get_length(array), ==, n);
    fsim_test_run_clear(&r);
    r = fsim_test_run("devices", "--json", NULL);
    g_assert_cmpint(r.status, ==, 0);
    array = json_object_get_array_member(fsim_test_parse_object(parser, r.out), "devices");
    g_assert_cmpuint(json_array_get_length(array), ==, 9);
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(array, 5), "name"),
                    ==, "h100-80gb");
    fsim_test_run_clear(&r);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cli/help", test_help);
    g_test_add_func("/cli/replay/json", test_replay_json);
    g_test_add_func("/cli/replay/fail-on-oom", test_replay_fail_on_oom);
    g_test_add_func("/cli/replay/json-run-ids", test_replay_json_run_ids);
    g_test_add_func("/cli/replay/usage-errors", test_replay_usage_errors);
    g_test_add_func("/cli/replay/bad-input", test_replay_bad_input);
    g_test_add_func("/cli/info/json", test_info_json);
    g_test_add_func("/cli/convert", test_convert);
    g_test_add_func("/cli/policies-and-devices-json", test_policies_and_devices_json);
    return g_test_run();
}
