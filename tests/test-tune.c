/* SPDX-License-Identifier: MIT */
/*
 * `fragsim tune`: it finds the setting that provably lowers the capacity of a trace built to
 * fragment (and says "keep the default" where nothing can), its recommendation replays through
 * `fit` to the figure it claims, it is deterministic, its JSON has the documented shape, several
 * traces are one job decided by the worst rank (for `fit` too), --db stores the two runs and the
 * recommendation (also into a database written before that table existed), and the candidate
 * values come from the trace's sizes.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <json-glib/json-glib.h>
#include <sqlite3.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "analysis/tune.h"
#include "test-util.h"

#define MIB ((int64_t)1 << 20)

/* Run `fragsim tune ARGS... --json` (NULL-terminated, at most 8) and parse its object. */
static JsonObject *
tune_json(JsonParser *parser, const char *first, ...)
{
    const char *args[12] = {"tune"};
    guint n = 1;
    va_list ap;

    va_start(ap, first);
    for (const char *a = first; a != NULL; a = va_arg(ap, const char *)) {
        g_assert_cmpuint(n, <, G_N_ELEMENTS(args) - 2);
        args[n++] = a;
    }
    va_end(ap);
    args[n++] = "--json";
    args[n] = NULL;
    g_auto(FsimTestRun) run = fsim_test_run_argv(NULL, args);
    if (run.status != 0)
        g_printerr("%s", run.err);
    g_assert_cmpint(run.status, ==, 0);
    return fsim_test_parse_object(parser, run.out);
}

/* `fit -p caching -c CONFIG TRACE [--trace-device N] --json`: the needed capacity. */
static int64_t
fit_needed(const char *trace, const char *config, int64_t trace_device)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *device = g_strdup_printf("%" G_GINT64_FORMAT, trace_device);
    g_auto(FsimTestRun) run = fsim_test_run("fit", "-p", "caching", "-c", config, "--trace-device",
                                            device, trace, "--json", NULL);
    JsonArray *results;

    g_assert_cmpint(run.status, ==, 0);
    results = json_object_get_array_member(fsim_test_parse_object(parser, run.out), "results");
    g_assert_cmpuint(json_array_get_length(results), ==, 1);
    return json_object_get_int_member(json_array_get_object_element(results, 0), "needed_bytes");
}

/* Every rank of the recommendation replays through `fit` to the figure tune claims for it. */
static void
assert_replays(JsonObject *tuned)
{
    JsonObject *rec = json_object_get_object_member(tuned, "recommended");
    JsonArray *ranks = json_object_get_array_member(rec, "ranks");
    int64_t worst = 0;

    for (guint i = 0; i < json_array_get_length(ranks); i++) {
        JsonObject *rank = json_array_get_object_element(ranks, i);
        int64_t needed = json_object_get_int_member(rank, "needed_bytes");

        g_assert_cmpint(fit_needed(json_object_get_string_member(rank, "trace"),
                                   json_object_get_string_member(rec, "config"),
                                   json_object_get_int_member(rank, "trace_device")),
                        ==, needed);
        worst = MAX(worst, needed);
    }
    g_assert_cmpint(json_object_get_int_member(rec, "needed_bytes"), ==, worst);
}

/* Two 40 MiB tensors carved from freed 64 MiB blocks pin 24 MiB each: by default a 48 MiB request
 * then needs a new segment (176 MiB in all); with max_split_size_mb the 64 MiB blocks are never
 * split and the job fits in its 128 MiB of live tensors, which no allocator can beat. */
static void
test_finds_max_split(void)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *path = fsim_test_trace_path("tune-pinned.trace");
    JsonObject *o, *def, *rec;

    if (!fsim_test_have_binary())
        return;
    o = tune_json(parser, path, NULL);
    def = json_object_get_object_member(o, "default");
    rec = json_object_get_object_member(o, "recommended");
    g_assert_cmpint(json_object_get_int_member(def, "needed_bytes"), ==, 176 * MIB);
    g_assert_cmpint(fit_needed(path, "", 0), ==, 176 * MIB);
    g_assert_cmpint(fit_needed(path, "max_split_size_mb:64", 0), ==, 128 * MIB);
    g_assert_cmpint(json_object_get_int_member(rec, "needed_bytes"), ==, 128 * MIB);
    g_assert_cmpint(json_object_get_int_member(rec, "saving_bytes"), ==, 48 * MIB);
    g_assert_false(json_object_get_boolean_member(rec, "keep_default"));
    g_assert_true(
        g_str_has_prefix(json_object_get_string_member(rec, "config"), "max_split_size_mb:"));
    g_autofree char *env =
        g_strconcat("PYTORCH_CUDA_ALLOC_CONF=", json_object_get_string_member(rec, "config"), NULL);
    g_assert_cmpstr(json_object_get_string_member(rec, "env"), ==, env);
    assert_replays(o);
}

/* The text output: the default's figure, the line to paste. */
static void
test_text(void)
{
    g_autofree char *path = fsim_test_trace_path("tune-pinned.trace");
    g_autofree char *plain = fsim_test_trace_path("tune-plain.trace");

    if (!fsim_test_have_binary())
        return;
    g_auto(FsimTestRun) run = fsim_test_run("tune", path, NULL);
    g_assert_cmpint(run.status, ==, 0);
    g_assert_nonnull(strstr(run.out, "PyTorch's default needs 176 MiB"));
    g_assert_nonnull(strstr(run.out, "\nPYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:"));
    g_assert_nonnull(strstr(run.out, "never split"));
    g_assert_null(strstr(run.out, "Keep the default"));
    g_assert_cmpstr(run.err, ==, "");
    g_auto(FsimTestRun) keep = fsim_test_run("tune", plain, NULL);
    g_assert_cmpint(keep.status, ==, 0);
    g_assert_nonnull(strstr(keep.out, "Keep the default"));
    g_assert_null(strstr(keep.out, "\nPYTORCH_CUDA_ALLOC_CONF="));
}

/* Whole, reused 100 MiB blocks: nothing beats the default by more than a granule. */
static void
test_keep_default(void)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *path = fsim_test_trace_path("tune-plain.trace");
    JsonObject *o, *rec;

    if (!fsim_test_have_binary())
        return;
    o = tune_json(parser, path, NULL);
    rec = json_object_get_object_member(o, "recommended");
    g_assert_true(json_object_get_boolean_member(rec, "keep_default"));
    g_assert_cmpstr(json_object_get_string_member(rec, "config"), ==, "");
    g_assert_cmpint(json_object_get_int_member(rec, "saving_bytes"), ==, 0);
    g_assert_cmpint(json_object_get_int_member(rec, "needed_bytes"), ==, 100 * MIB);
    g_assert_cmpint(json_object_get_int_member(o, "searched"), >, 1);
}

/* Two runs give the same answer, to the byte and the order of the candidates. */
static void
test_deterministic(void)
{
    g_autoptr(JsonParser) a_parser = json_parser_new();
    g_autoptr(JsonParser) b_parser = json_parser_new();
    g_autofree char *path = fsim_test_trace_path("tune-pinned.trace");
    g_autofree char *multi =
        g_build_filename(g_getenv("FRAGSIM_SOURCE_DIR"), "traces", "multi-stream.trace", NULL);
    JsonObject *a, *b;
    g_autoptr(JsonGenerator) generator = json_generator_new();

    if (!fsim_test_have_binary())
        return;
    a = tune_json(a_parser, path, multi, NULL);
    b = tune_json(b_parser, path, multi, NULL);
    json_object_remove_member(a, "seconds");
    json_object_remove_member(b, "seconds");
    g_autoptr(JsonNode) an = json_node_init_object(json_node_alloc(), a);
    g_autoptr(JsonNode) bn = json_node_init_object(json_node_alloc(), b);
    json_generator_set_root(generator, an);
    g_autofree char *at = json_generator_to_data(generator, NULL);
    json_generator_set_root(generator, bn);
    g_autofree char *bt = json_generator_to_data(generator, NULL);
    g_assert_cmpstr(at, ==, bt);
    g_assert_cmpint(json_object_get_int_member(a, "searched"), >, 3);
}

static void
assert_setting_shape(JsonObject *c)
{
    static const char *const members[] = {"config",
                                          "label",
                                          "env",
                                          "changes",
                                          "origin",
                                          "needed_bytes",
                                          "saving_bytes",
                                          "proven",
                                          "worst_rank",
                                          "spread_bytes",
                                          "modelled_alloc_time_ns",
                                          "driver_calls",
                                          "ranks"};

    for (gsize i = 0; i < G_N_ELEMENTS(members); i++) {
        if (!json_object_has_member(c, members[i]))
            g_error("a setting lacks '%s'", members[i]);
    }
}

static void
test_json_shape(void)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *path = fsim_test_trace_path("tune-pinned.trace");
    JsonObject *o;
    JsonArray *candidates;

    if (!fsim_test_have_binary())
        return;
    o = tune_json(parser, path, "-d", "a100-40gb", NULL);
    g_assert_cmpstr(json_object_get_string_member(o, "trace"), ==, path);
    g_assert_cmpstr(json_object_get_string_member(o, "device"), ==, "a100-40gb");
    g_assert_cmpint(json_object_get_int_member(o, "granularity_bytes"), ==, 2 * MIB);
    g_assert_false(json_object_get_boolean_member(o, "budget_exhausted"));
    g_assert_true(json_object_get_null_member(o, "recorded"));
    assert_setting_shape(json_object_get_object_member(o, "default"));
    assert_setting_shape(json_object_get_object_member(o, "recommended"));
    g_assert_cmpstr(
        json_object_get_string_member(json_object_get_object_member(o, "default"), "config"), ==,
        "");
    candidates = json_object_get_array_member(o, "candidates");
    g_assert_cmpuint(json_array_get_length(candidates), >=, 2);
    for (guint i = 0; i < json_array_get_length(candidates); i++)
        assert_setting_shape(json_array_get_object_element(candidates, i));
    /* the recommendation leads the list */
    g_assert_cmpstr(
        json_object_get_string_member(json_array_get_object_element(candidates, 0), "config"), ==,
        json_object_get_string_member(json_object_get_object_member(o, "recommended"), "config"));
}

/* Two traces are one job: its capacity is the worst rank's, for tune and fit alike. */
static void
test_worst_rank(void)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(JsonParser) fit_parser = json_parser_new();
    g_autofree char *small = fsim_test_trace_path("tune-plain.trace");
    g_autofree char *large = fsim_test_trace_path("tune-pinned.trace");
    JsonObject *o, *def, *fit;
    JsonArray *ranks;

    if (!fsim_test_have_binary())
        return;
    o = tune_json(parser, small, large, NULL);
    def = json_object_get_object_member(o, "default");
    ranks = json_object_get_array_member(def, "ranks");
    g_assert_cmpuint(json_array_get_length(ranks), ==, 2);
    g_assert_cmpint(json_object_get_int_member(def, "worst_rank"), ==, 1);
    g_assert_cmpint(json_object_get_int_member(def, "needed_bytes"), ==, 176 * MIB);
    g_assert_cmpint(json_object_get_int_member(def, "spread_bytes"), ==, 76 * MIB);
    g_assert_cmpint(
        json_object_get_int_member(json_object_get_object_member(o, "recommended"), "needed_bytes"),
        ==, 128 * MIB);
    assert_replays(o);

    g_auto(FsimTestRun) run = fsim_test_run("fit", "-p", "caching", small, large, "--json", NULL);
    g_assert_cmpint(run.status, ==, 0);
    fit = json_array_get_object_element(
        json_object_get_array_member(fsim_test_parse_object(fit_parser, run.out), "results"), 0);
    g_assert_cmpint(json_object_get_int_member(fit, "needed_bytes"), ==, 176 * MIB);
    g_assert_cmpint(json_object_get_int_member(fit, "worst_rank"), ==, 1);
    g_assert_cmpint(json_object_get_int_member(fit, "spread_bytes"), ==, 76 * MIB);
    g_assert_cmpuint(json_array_get_length(json_object_get_array_member(fit, "ranks")), ==, 2);
    g_auto(FsimTestRun) text = fsim_test_run("fit", "-p", "caching", small, large, NULL);
    g_assert_nonnull(strstr(text.out, "device 0 needs; its 2 ranks spread over 76.0 MiB"));
}

/* --db: the default and recommended runs with their needed capacity, and the recommendation. */
static void
test_db(void)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "sub", "results.db", NULL);
    g_autofree char *path = fsim_test_trace_path("tune-pinned.trace");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GArray) rows = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    const FsimStoredRecommendation *r;
    JsonObject *rec;

    if (!fsim_test_have_binary())
        return;
    rec = json_object_get_object_member(tune_json(parser, path, "--db", db, NULL), "recommended");
    store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_assert_no_error(error);
    rows = fsim_store_recommendations(store, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(rows->len, ==, 1);
    r = &g_array_index(rows, FsimStoredRecommendation, 0);
    g_assert_cmpstr(r->trace, ==, path);
    g_assert_cmpstr(r->device, ==, FSIM_DEVICE_DEFAULT);
    g_assert_cmpstr(r->config, ==, json_object_get_string_member(rec, "config"));
    g_assert_cmpint(r->needed_bytes, ==, 128 * MIB);
    g_assert_cmpint(r->saving_bytes, ==, 48 * MIB);
    g_assert_cmpint(r->run_id, ==, json_object_get_int_member(rec, "run_id"));
    g_assert_cmpint(r->default_run_id, ==, json_object_get_int_member(rec, "default_run_id"));
    g_assert_cmpint(r->default_run_id, !=, r->run_id);
    g_assert_true(g_str_has_prefix(r->env, "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:"));
    runs = fsim_store_runs(store, (const int64_t[]){r->default_run_id, r->run_id}, 2, &error);
    g_assert_no_error(error);
    g_assert_cmpint(((FsimStoredRun *)g_ptr_array_index(runs, 0))->metrics.needed_bytes, ==,
                    176 * MIB);
    g_assert_cmpint(((FsimStoredRun *)g_ptr_array_index(runs, 1))->metrics.needed_bytes, ==,
                    128 * MIB);
    g_assert_cmpstr(((FsimStoredRun *)g_ptr_array_index(runs, 1))->config, ==, r->config);
    g_clear_pointer(&store, fsim_store_close);
    fsim_test_remove_tree(dir);
}

/* A database written before the recommendations table existed gets it on the next write. */
static void
test_db_upgrade(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "old.db", NULL);
    g_autofree char *path = fsim_test_trace_path("tune-plain.trace");
    g_autofree char *count = NULL;
    g_autofree char *version = NULL;
    sqlite3 *handle = NULL;

    if (!fsim_test_have_binary())
        return;
    g_auto(FsimTestRun) replay = fsim_test_run("replay", path, "-p", "caching", "--db", db, NULL);
    g_assert_cmpint(replay.status, ==, 0);
    /* make it what schema version 1 wrote */
    g_assert_cmpint(sqlite3_open_v2(db, &handle, SQLITE_OPEN_READWRITE, NULL), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_exec(handle, "DROP TABLE recommendations; PRAGMA user_version = 1",
                                 NULL, NULL, NULL),
                    ==, SQLITE_OK);
    sqlite3_close(handle);
    g_auto(FsimTestRun) tune = fsim_test_run("tune", path, "--db", db, NULL);
    g_assert_cmpint(tune.status, ==, 0);
    count = fsim_test_sql_text(db, "SELECT count(*) FROM recommendations");
    g_assert_cmpstr(count, ==, "1");
    version = fsim_test_sql_text(db, "PRAGMA user_version");
    g_assert_cmpstr(version, ==, G_STRINGIFY(FSIM_STORE_SCHEMA_VERSION));
    g_free(count);
    count = fsim_test_sql_text(db, "SELECT count(*) FROM runs");
    g_assert_cmpstr(count, ==, "2"); /* replay's run and tune's default (kept: one run) */
    fsim_test_remove_tree(dir);
}

static void
test_errors(void)
{
    g_autofree char *path = fsim_test_trace_path("tune-plain.trace");

    if (!fsim_test_have_binary())
        return;
    g_auto(FsimTestRun) missing = fsim_test_run("tune", path, "no-such.trace", NULL);
    g_assert_cmpint(missing.status, ==, 1);
    g_assert_nonnull(strstr(missing.err, "no-such.trace"));
    g_auto(FsimTestRun) none = fsim_test_run("tune", NULL);
    g_assert_cmpint(none.status, ==, 2);
    g_auto(FsimTestRun) budget = fsim_test_run("tune", path, "--budget", "0", NULL);
    g_assert_cmpint(budget.status, ==, 2);
    g_auto(FsimTestRun) device = fsim_test_run("tune", path, "--trace-device", "3", NULL);
    g_assert_cmpint(device.status, ==, 2);
    g_assert_nonnull(strstr(device.err, "tune-plain.trace has no events on device 3"));
    g_auto(FsimTestRun) help = fsim_test_run("tune", "--help", NULL);
    g_assert_cmpint(help.status, ==, 0);
    g_assert_nonnull(strstr(help.out, "--budget"));
    g_assert_nonnull(strstr(help.out, "docs/tune.md"));
}

/* A budget too short for anything but the default stops there and says so. */
static void
test_budget(void)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *path = fsim_test_trace_path("tune-pinned.trace");
    JsonObject *o;

    if (!fsim_test_have_binary())
        return;
    o = tune_json(parser, path, "--budget", "1e-9", NULL);
    g_assert_true(json_object_get_boolean_member(o, "budget_exhausted"));
    g_assert_cmpint(json_object_get_int_member(o, "searched"), ==, 1);
    g_assert_true(json_object_get_boolean_member(json_object_get_object_member(o, "recommended"),
                                                 "keep_default"));
    g_auto(FsimTestRun) text = fsim_test_run("tune", path, "--budget", "1e-9", NULL);
    g_assert_nonnull(strstr(text.out, "time budget ran out"));
}

/* The candidate values come from the sizes: 40, 48 and 64 MiB give max_split_size_mb thresholds
 * of 20 (everything oversize), 41 (48 and 64) and 49 MiB (64 only). */
static void
test_values(void)
{
    g_autoptr(FsimTrace) trace = fsim_test_open_trace("tune-pinned.trace");
    g_autoptr(FsimEventLog) log = fsim_event_log_new(0);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTuneValues) values = NULL;
    FsimTuneRank rank = {.trace = "tune-pinned.trace", .log = log};

    g_assert_true(fsim_event_log_read(log, trace, FALSE, &error));
    values = fsim_tune_values_new(&rank, 1, FSIM_PLATFORM_CUDA);
    g_assert_cmpuint(values->max_split->len, ==, 3);
    g_assert_cmpuint(g_array_index(values->max_split, uint64_t, 0), ==, 20 * MIB);
    g_assert_cmpuint(g_array_index(values->max_split, uint64_t, 1), ==, 41 * MIB);
    g_assert_cmpuint(g_array_index(values->max_split, uint64_t, 2), ==, 49 * MIB);
    /* 64 - 48 = 16 MiB: no step above the default 20 MiB */
    g_assert_cmpuint(values->max_non_split->len, ==, 0);
    /* 40 and 48 MiB round differently with 4, 8 or 16 divisions (2 keeps 48 MiB) */
    g_assert_cmpuint(values->divisions->len, >, 0);
    g_assert_cmpuint(values->gc->len, >, 0);
    /* torch_npu wants max_split_size_mb above 20 (and has no max_non_split_rounding_mb): 21 */
    {
        g_autoptr(FsimTuneValues) npu = fsim_tune_values_new(&rank, 1, FSIM_PLATFORM_NPU);

        g_assert_cmpuint(npu->max_split->len, ==, 3);
        g_assert_cmpuint(g_array_index(npu->max_split, uint64_t, 0), ==, 21 * MIB);
        g_assert_cmpuint(npu->max_non_split->len, ==, 0);
    }
}

/* Real snapshots: the recommendation replays to its figure (the npu snapshot through fit's
 * platform detection too), and a multi-device snapshot is a job of its devices. */
static void
test_shared(void)
{
    static const char *const names[] = {
        "MercuryB1__SQAttn__cuda_memory_snapshot.pickle",
        "silmont2000__assignment2-systems__mem_snapshot.pickle",
        "codeasier__MemSnapDump__tests__test_data__snapshot_with_empty_cache.pkl",
        "Constructor-Sun__code_location__memory_snapshot.pickle",
    };

    if (!fsim_test_have_binary())
        return;
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *path = fsim_test_shared_trace(names[i]);
        g_autoptr(JsonParser) parser = json_parser_new();
        JsonObject *o, *def;

        if (path == NULL)
            return;
        /* a short budget keeps the sanitizer builds quick: whatever was searched must replay */
        o = tune_json(parser, path, "--budget", i == 1 ? "60" : "2", NULL);
        assert_replays(o);
        def = json_object_get_object_member(o, "default");
        /* the line to paste names the platform's variable: torch_npu reads its own */
        g_assert_true(g_str_has_prefix(
            json_object_get_string_member(json_object_get_object_member(o, "recommended"), "env"),
            strstr(names[i], "codeasier") != NULL ? "PYTORCH_NPU_ALLOC_CONF="
                                                  : "PYTORCH_CUDA_ALLOC_CONF="));
        g_assert_cmpint(json_object_get_int_member(json_object_get_object_member(o, "recommended"),
                                                   "needed_bytes"),
                        <=, json_object_get_int_member(def, "needed_bytes"));
        if (strstr(names[i], "Constructor-Sun") != NULL) {
            /* three devices; device 1 holds 83 GiB of live tensors */
            g_assert_cmpuint(json_array_get_length(json_object_get_array_member(def, "ranks")), ==,
                             3);
            g_assert_cmpint(json_object_get_int_member(def, "worst_rank"), ==, 1);
            g_assert_false(json_object_get_null_member(o, "recorded"));
        }
    }
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/tune/finds-max-split", test_finds_max_split);
    g_test_add_func("/tune/text", test_text);
    g_test_add_func("/tune/keep-default", test_keep_default);
    g_test_add_func("/tune/deterministic", test_deterministic);
    g_test_add_func("/tune/json-shape", test_json_shape);
    g_test_add_func("/tune/worst-rank", test_worst_rank);
    g_test_add_func("/tune/db", test_db);
    g_test_add_func("/tune/db-upgrade", test_db_upgrade);
    g_test_add_func("/tune/errors", test_errors);
    g_test_add_func("/tune/budget", test_budget);
    g_test_add_func("/tune/values", test_values);
    g_test_add_func("/tune/shared", test_shared);
    return g_test_run();
}
