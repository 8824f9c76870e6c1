/* SPDX-License-Identifier: MIT */
/*
 * `fragsim cuda ...` end to end without a GPU: this binary defines fsim_cuda_driver_open() and
 * fsim_cuda_backend_built() itself, so the linker never takes the real driver from the library and
 * every command runs on the fake GPU of cuda-fake.c.  Output is captured through GLib's print
 * handlers, JSON is parsed, databases and profiles are read back.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <json-glib/json-glib.h>
#include <string.h>

#include "fragsim/fragsim.h"
#include "fragsim/store.h"

#include "cli.h"
#include "cuda-fake.h"
#include "cuda/cuda-backend.h"
#include "test-util.h"

/* ---- the driver the CLI opens -------------------------------------------------------------- */

gboolean
fsim_cuda_backend_built(void)
{
    return TRUE;
}

/* GPU 0 is a fresh fake; there is no other. */
FsimCudaDriver *
fsim_cuda_driver_open(int ordinal, GError **error)
{
    if (ordinal != 0) {
        g_set_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_NO_DEVICE,
                    "no CUDA device %d: cudaGetDeviceCount found 1", ordinal);
        return NULL;
    }
    return &fake_new(64 * FSIM_GiB)->base;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static JsonObject *
json_path_object(JsonObject *object, const char *const *path)
{
    for (gsize i = 0; path[i] != NULL; i++) {
        g_assert_true(json_object_has_member(object, path[i]));
        object = json_object_get_object_member(object, path[i]);
    }
    return object;
}

/* ---- tests --------------------------------------------------------------------------------- */

static void
test_help_and_usage(void)
{
    g_auto(FsimTestRun) cli = {0};

    cli = fsim_test_run_main("cuda", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_USAGE);
    g_assert_nonnull(strstr(cli.out, "calibrate"));
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "--help", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "bogus", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_USAGE);
    g_assert_nonnull(strstr(cli.err, "unknown command 'bogus'"));
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "replay", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_USAGE);
    g_assert_nonnull(strstr(cli.err, "missing the TRACE"));
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "native", "x", "--mode", "bogus", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_USAGE);
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "calibrate", "--repeat", "0", "--max-size", "x", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_USAGE);
    g_assert_nonnull(strstr(cli.err, "--max-size"));
}

static void
test_info(void)
{
    g_auto(FsimTestRun) cli = {0};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root;
    const char *const gpu[] = {"gpu", NULL};

    cli = fsim_test_run_main("cuda", "info", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    g_assert_nonnull(strstr(cli.out, "Fake GPU 64GB"));
    g_assert_nonnull(strstr(cli.out, "granularity 2.00 MiB"));
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "info", "--json", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    root = fsim_test_parse_object(parser, cli.out);
    g_assert_cmpstr(json_object_get_string_member(json_path_object(root, gpu), "name"), ==,
                    "Fake GPU 64GB");
    g_assert_cmpint(json_object_get_int_member(json_path_object(root, gpu), "granularity"), ==,
                    2 * FSIM_MiB);
    fsim_test_run_clear(&cli);
    /* no such GPU: status 1, the message says so */
    cli = fsim_test_run_main("cuda", "info", "--gpu", "1", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_ERROR);
    g_assert_true(g_str_has_prefix(cli.err, "fragsim cuda info: no CUDA device 1"));
}

static void
test_replay_text(void)
{
    g_autofree char *trace = fsim_test_trace_path("golden-fragment.trace");
    g_auto(FsimTestRun) cli = {0};

    cli = fsim_test_run_main("cuda", "replay", trace, "-p", "direct,paged", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    g_assert_cmpstr(cli.err, ==, "");
    g_assert_nonnull(strstr(cli.out, "on Fake GPU 64GB"));
    g_assert_nonnull(strstr(cli.out, "run direct, trace device 0"));
    g_assert_nonnull(strstr(cli.out, "run paged, trace device 0"));
    g_assert_nonnull(strstr(cli.out, "mem_alloc"));
    g_assert_nonnull(strstr(cli.out, "unmap"));
    g_assert_nonnull(strstr(cli.out, "differences: peak reserved GPU - model 0 B"));
    g_assert_nonnull(strstr(cli.out, "driver calls +0"));
    g_assert_nonnull(strstr(cli.out, "memory written after"));
    g_test_message("%s", cli.out);
}

static void
test_replay_json(void)
{
    g_autofree char *trace = fsim_test_trace_path("golden-fragment.trace");
    g_auto(FsimTestRun) cli = {0};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root;
    JsonArray *runs;
    JsonObject *run;
    JsonObject *measured;
    JsonObject *map;

    cli = fsim_test_run_main("cuda", "replay", trace, "-p", "paged", "--json", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    root = fsim_test_parse_object(parser, cli.out);
    runs = json_object_get_array_member(root, "runs");
    g_assert_cmpuint(json_array_get_length(runs), ==, 1);
    run = json_array_get_object_element(runs, 0);
    g_assert_cmpstr(json_object_get_string_member(run, "policy"), ==, "paged");
    g_assert_cmpstr(json_object_get_string_member(run, "device"), ==, "Fake GPU 64GB");
    g_assert_cmpstr(json_object_get_string_member(run, "status"), ==, "complete");
    g_assert_cmpint(json_object_get_int_member(run, "peak_reserved_bytes"), ==, 44040192);
    g_assert_cmpint(json_object_get_int_member(run, "device_maps"), ==, 7);
    measured = json_object_get_object_member(run, "measured");
    map = json_object_get_object_member(json_object_get_object_member(measured, "calls"), "map");
    g_assert_cmpint(json_object_get_int_member(map, "count"), ==, 7);
    g_assert_cmpint(json_object_get_int_member(map, "modelled_ns"), >, 0);
    g_assert_cmpint(json_object_get_int_member(map, "total_ns"), >, 0);
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(map, "histogram")), >, 0);
    g_assert_cmpint(json_object_get_int_member(measured, "peak_used_bytes"), >=, 44040192);
    g_assert_cmpstr(
        json_object_get_string_member(json_object_get_object_member(run, "model"), "device"), ==,
        "Fake GPU 64GB (model)");
    g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(run, "model"),
                                               "peak_reserved_bytes"),
                    ==, 44040192);
}

/* -c as in replay: each (policy, configuration) is a run with its config and label. */
static void
test_replay_configs(void)
{
    g_autofree char *trace = fsim_test_trace_path("golden-fragment.trace");
    g_auto(FsimTestRun) cli = {0};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *runs;

    cli = fsim_test_run_main("cuda", "replay", trace, "-p", "caching,paged", "-c", "", "-c",
                             "expandable_segments:True", "--json", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    runs = json_object_get_array_member(fsim_test_parse_object(parser, cli.out), "runs");
    g_assert_cmpuint(json_array_get_length(runs), ==, 3); /* paged takes no alloc conf */
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(runs, 0), "label"),
                    ==, "caching");
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(runs, 1), "label"),
                    ==, "caching expandable_segments:True");
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(runs, 1), "config"),
                    ==, "expandable_segments:True");
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(runs, 2), "label"),
                    ==, "paged");
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "replay", trace, "-c", "bogus:1", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_USAGE);
}

static void
test_replay_db(void)
{
    g_autofree char *trace = fsim_test_trace_path("golden-fragment.trace");
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "results.db", NULL);
    g_auto(FsimTestRun) cli = {0};
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    static const char *const expected[][2] = {
        {"direct", "Fake GPU 64GB"},
        {"direct", "Fake GPU 64GB (model)"},
        {"paged", "Fake GPU 64GB"},
        {"paged", "Fake GPU 64GB (model)"},
    };

    cli = fsim_test_run_main("cuda", "replay", trace, "-p", "direct,paged", "--db", db, NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    g_assert_nonnull(strstr(cli.out, "runs 1-4 written to"));
    store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_assert_no_error(error);
    runs = fsim_store_runs(store, NULL, 0, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(runs->len, ==, G_N_ELEMENTS(expected));
    for (guint i = 0; i < runs->len; i++) {
        const FsimStoredRun *run = g_ptr_array_index(runs, i);

        g_assert_cmpstr(run->policy, ==, expected[i][0]);
        g_assert_cmpstr(run->device, ==, expected[i][1]);
        g_assert_cmpint(run->status, ==, FSIM_STORE_COMPLETE);
        g_assert_cmpuint(run->metrics.peak_reserved_bytes, ==, 44040192);
    }
    g_clear_pointer(&store, fsim_store_close);
    fsim_test_remove_tree(dir);
}

static void
test_replay_errors(void)
{
    g_autofree char *trace = fsim_test_trace_path("golden-fragment.trace");
    g_auto(FsimTestRun) cli = {0};

    cli = fsim_test_run_main("cuda", "replay", trace, "-p", "nosuch", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_USAGE);
    g_assert_nonnull(strstr(cli.err, "unknown policy 'nosuch'"));
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "replay", trace, "--trace-device", "3", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_USAGE);
    fsim_test_run_clear(&cli);
    /* a knob the GPU cannot honour */
    cli = fsim_test_run_main("cuda", "replay", trace, "-p", "paged", "--set",
                             "paged.page_size=64KiB", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_ERROR);
    g_assert_nonnull(strstr(cli.err, "granularity"));
    g_assert_nonnull(strstr(cli.err, "event 16"));
    fsim_test_run_clear(&cli);
    /* -d caps the capacity: a 32 MiB GPU, and --fail-on-oom */
    cli = fsim_test_run_main("cuda", "replay", trace, "-p", "direct", "-d", "32MiB",
                             "--fail-on-oom", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OOM);
    g_assert_nonnull(strstr(cli.err, "out of memory"));
}

static void
test_native(void)
{
    g_autofree char *trace = fsim_test_trace_path("golden-fragment.trace");
    g_auto(FsimTestRun) cli = {0};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root;
    JsonArray *runs;

    cli = fsim_test_run_main("cuda", "native", trace, NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    g_assert_nonnull(strstr(cli.out, "cudaMallocAsync"));
    g_assert_nonnull(strstr(cli.out, "trace device 0, 10 events"));
    g_test_message("%s", cli.out);
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "native", trace, "--mode", "malloc", "--json", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    root = fsim_test_parse_object(parser, cli.out);
    runs = json_object_get_array_member(root, "runs");
    g_assert_cmpuint(json_array_get_length(runs), ==, 1);
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(runs, 0), "mode"),
                    ==, "cudaMalloc");
    g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(runs, 0), "allocs"),
                    ==, 7);
    g_assert_cmpint(
        json_object_get_int_member(json_array_get_object_element(runs, 0), "peak_requested_bytes"),
        ==, 41943041);
}

/* calibrate -o PROFILE, then -d PROFILE in replay and cuda replay */
static void
test_calibrate_profile(void)
{
    g_autofree char *trace = fsim_test_trace_path("golden-fragment.trace");
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *profile = g_build_filename(dir, "gpu.ini", NULL);
    g_auto(FsimTestRun) cli = {0};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root;
    g_autoptr(JsonParser) replay_parser = json_parser_new();
    const char *const costs[] = {"costs", NULL};
    JsonObject *run;

    cli = fsim_test_run_main("cuda", "calibrate", "-o", profile, NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    g_assert_nonnull(strstr(cli.out, "wrote "));
    g_assert_nonnull(strstr(cli.out, "cudaMalloc takes memory in steps of 2.00 MiB"));
    g_assert_true(g_file_test(profile, G_FILE_TEST_IS_REGULAR));
    fsim_test_run_clear(&cli);
    cli = fsim_test_run_main("cuda", "calibrate", "--json", "--repeat", "3", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    root = fsim_test_parse_object(parser, cli.out);
    g_assert_cmpint(json_object_get_int_member(json_path_object(root, costs), "malloc_ns"), ==,
                    FAKE_MALLOC_NS);
    g_assert_cmpint(json_object_get_int_member(json_path_object(root, costs), "map_per_gib_ns"), ==,
                    FAKE_CREATE_PER_GIB_NS);
    fsim_test_run_clear(&cli);
    /* without -o the profile is printed */
    cli = fsim_test_run_main("cuda", "calibrate", "--max-size", "8MiB", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    g_assert_nonnull(strstr(cli.out, "[device]\nname=Fake GPU 64GB\n"));
    fsim_test_run_clear(&cli);

    /* the model takes the profile */
    cli = fsim_test_run_main("replay", trace, "-p", "direct", "-d", profile, "--json", NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    run = json_array_get_object_element(
        json_object_get_array_member(fsim_test_parse_object(replay_parser, cli.out), "runs"), 0);
    g_assert_cmpstr(json_object_get_string_member(run, "device"), ==, "Fake GPU 64GB");
    g_assert_cmpint(json_object_get_int_member(run, "capacity_bytes"), ==, 64 * FSIM_GiB);
    fsim_test_run_clear(&cli);
    /* and so does the GPU run: the fake's own costs, so modelled = measured for cudaMalloc */
    cli = fsim_test_run_main("cuda", "replay", trace, "-p", "direct", "-d", profile, "--no-touch",
                             NULL);
    g_assert_cmpint(cli.status, ==, FSIM_EXIT_OK);
    g_assert_nonnull(strstr(cli.out, "differences:"));
    g_test_message("%s", cli.out);
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cuda-cli/help-and-usage", test_help_and_usage);
    g_test_add_func("/cuda-cli/info", test_info);
    g_test_add_func("/cuda-cli/replay/text", test_replay_text);
    g_test_add_func("/cuda-cli/replay/json", test_replay_json);
    g_test_add_func("/cuda-cli/replay/configs", test_replay_configs);
    g_test_add_func("/cuda-cli/replay/db", test_replay_db);
    g_test_add_func("/cuda-cli/replay/errors", test_replay_errors);
    g_test_add_func("/cuda-cli/native", test_native);
    g_test_add_func("/cuda-cli/calibrate-profile", test_calibrate_profile);
    return g_test_run();
}
