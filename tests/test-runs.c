/* SPDX-License-Identifier: MIT */
/*
 * The runs of a comparison as users see them: each (policy, -c configuration) is a run with a
 * canonical config and a label, the same in JSON and in the database; a run that fails for a
 * reason other than memory is an error row and the others complete (exit 6); the lower bound is
 * the trace's in every row; validate with nothing to check exits 5; --db makes its folder.
 */
#include <glib.h>

#include <json-glib/json-glib.h>
#include <string.h>

#include "fragsim/fragsim.h"
#include "fragsim/store.h"

#include "test-util.h"

static char *
source_path(const char *relative)
{
    const char *dir = g_getenv("FRAGSIM_SOURCE_DIR");

    g_assert_nonnull(dir);
    return g_build_filename(dir, relative, NULL);
}

static JsonArray *
replay_runs(JsonParser *parser, const FsimTestRun *r)
{
    return json_object_get_array_member(fsim_test_parse_object(parser, r->out), "runs");
}

/* Three configurations of one policy are three runs, named alike in JSON and in the database. */
static void
test_configs(void)
{
    static const char *const configs[] = {"", "expandable_segments:True", "max_split_size_mb:128"};
    static const char *const labels[] = {"caching", "caching expandable_segments:True",
                                         "caching max_split_size_mb:128"};
    g_autofree char *trace = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GPtrArray) stored = NULL;
    g_autoptr(GError) error = NULL;
    JsonArray *runs;

    if (!fsim_test_have_binary())
        return;
    trace = source_path("traces/fragmenting.trace");
    dir = fsim_test_tmp_dir();
    db = g_build_filename(dir, "not", "yet", "results.db", NULL); /* folders made on the way */
    g_auto(FsimTestRun) r =
        fsim_test_run("replay", trace, "-p", "caching", "-c", "", "-c", "expandable_segments:True",
                      "-c", "max_split_size_mb:128", "--no-needed", "--json", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 0);
    runs = replay_runs(parser, &r);
    g_assert_cmpuint(json_array_get_length(runs), ==, 3);
    store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_assert_no_error(error);
    stored = fsim_store_runs(store, NULL, 0, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(stored->len, ==, 3);
    for (guint i = 0; i < 3; i++) {
        JsonObject *run = json_array_get_object_element(runs, i);
        const FsimStoredRun *row = g_ptr_array_index(stored, i);

        g_assert_cmpstr(json_object_get_string_member(run, "policy"), ==, "caching");
        g_assert_cmpstr(json_object_get_string_member(run, "config"), ==, configs[i]);
        g_assert_cmpstr(json_object_get_string_member(run, "label"), ==, labels[i]);
        g_assert_cmpstr(row->config, ==, configs[i]);
        g_assert_cmpstr(row->label, ==, labels[i]);
    }
    g_clear_pointer(&stored, g_ptr_array_unref);
    g_clear_pointer(&store, fsim_store_close);
    fsim_test_remove_tree(dir);
}

/* The config is canonical: keys in a fixed order, values as a user writes them. */
static void
test_config_canonical(void)
{
    g_autofree char *trace = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *run;

    if (!fsim_test_have_binary())
        return;
    trace = source_path("traces/fragmenting.trace");
    g_auto(FsimTestRun) r = fsim_test_run(
        "replay", trace, "-p", "caching", "-c",
        "per_process_memory_fraction:0.60, garbage_collection_threshold:0.6,max_split_size_mb:128",
        "--no-needed", "--json", NULL);
    g_assert_cmpint(r.status, ==, 0);
    run = json_array_get_object_element(replay_runs(parser, &r), 0);
    g_assert_cmpstr(json_object_get_string_member(run, "config"), ==,
                    "max_split_size_mb:128,garbage_collection_threshold:0.6,"
                    "per_process_memory_fraction:0.6");
}

/* A policy that cannot be set up on the device is an error row, in the database too; the others
 * complete; exit 6. */
static void
test_error_row(void)
{
    g_autofree char *trace = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GPtrArray) stored = NULL;
    g_autoptr(GError) error = NULL;
    const FsimStoredRun *row;
    JsonArray *runs;
    JsonObject *bestfit, *direct;

    if (!fsim_test_have_binary())
        return;
    trace = source_path("traces/fragmenting.trace");
    dir = fsim_test_tmp_dir();
    db = g_build_filename(dir, "results.db", NULL);
    g_auto(FsimTestRun) r = fsim_test_run("replay", trace, "-p", "bestfit,direct", "-d", "1000TB",
                                          "--json", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 6);
    store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_assert_no_error(error);
    stored = fsim_store_runs(store, NULL, 0, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(stored->len, ==, 2);
    row = g_ptr_array_index(stored, 0); /* direct: attached first, bestfit written after */
    g_assert_cmpstr(row->policy, ==, "direct");
    g_assert_cmpint(row->status, ==, FSIM_STORE_COMPLETE);
    row = g_ptr_array_index(stored, 1);
    g_assert_cmpstr(row->policy, ==, "bestfit");
    g_assert_cmpint(row->status, ==, FSIM_STORE_ERRORED);
    g_assert_cmpuint(row->capacity_bytes, ==, 1000000000000000);
    g_assert_nonnull(strstr(row->message, "address space"));
    g_assert_false(g_str_has_prefix(row->message, "bestfit:"));
    g_assert_false(fsim_stored_run_has_data(row));
    g_clear_pointer(&stored, g_ptr_array_unref);
    g_clear_pointer(&store, fsim_store_close);
    fsim_test_remove_tree(dir);
    runs = replay_runs(parser, &r);
    g_assert_cmpuint(json_array_get_length(runs), ==, 2);
    bestfit = json_array_get_object_element(runs, 0);
    direct = json_array_get_object_element(runs, 1);
    g_assert_cmpstr(json_object_get_string_member(bestfit, "status"), ==, "error");
    g_assert_nonnull(strstr(json_object_get_string_member(bestfit, "error"), "address space"));
    g_assert_cmpstr(json_object_get_string_member(direct, "status"), ==, "complete");
    g_assert_false(json_object_has_member(direct, "error"));
    g_assert_cmpint(json_object_get_int_member(direct, "needed_bytes"), >, 0);

    /* the table shows it too */
    g_auto(FsimTestRun) t =
        fsim_test_run("replay", trace, "-p", "bestfit,direct", "-d", "1000TB", "--no-needed", NULL);
    g_assert_cmpint(t.status, ==, 6);
    g_assert_nonnull(strstr(t.out, "error: bestfit: "));
    g_assert_null(strstr(t.out, "bestfit: bestfit:"));
}

/* validate -c replaces the recorded settings: the recorded ones given explicitly stay exact,
 * others diverge (exit 4), a bad string is a usage error. */
static void
test_validate_conf(void)
{
    g_autofree char *trace =
        fsim_test_shared_trace("MercuryB1__SQAttn__cuda_memory_snapshot.pickle");

    if (trace == NULL || !fsim_test_have_binary())
        return;
    g_auto(FsimTestRun) same = fsim_test_run("validate", trace, "-c", "", NULL);
    g_assert_cmpint(same.status, ==, 0);
    g_assert_nonnull(strstr(same.out, "given with -c"));
    g_auto(FsimTestRun) other =
        fsim_test_run("validate", trace, "-c", "max_split_size_mb:64", NULL);
    g_assert_cmpint(other.status, ==, 4);
    g_auto(FsimTestRun) bad = fsim_test_run("validate", trace, "-c", "bogus:1", NULL);
    g_assert_cmpint(bad.status, ==, 2);
    g_assert_nonnull(strstr(bad.err, "bogus"));
}

/* The recorded row of a snapshot is a run in the database, with the figures the table shows. */
static void
test_recorded_stored(void)
{
    g_autofree char *trace =
        fsim_test_shared_trace("MercuryB1__SQAttn__cuda_memory_snapshot.pickle");
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GPtrArray) stored = NULL;
    g_autoptr(GError) error = NULL;
    JsonArray *runs;
    gboolean found = FALSE;

    if (trace == NULL || !fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    db = g_build_filename(dir, "results.db", NULL);
    g_auto(FsimTestRun) r =
        fsim_test_run("replay", trace, "-p", "caching", "--no-needed", "--json", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 0);
    runs = replay_runs(parser, &r);
    store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_assert_no_error(error);
    stored = fsim_store_runs(store, NULL, 0, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(stored->len, ==, json_array_get_length(runs));
    for (guint i = 0; i < json_array_get_length(runs); i++) {
        JsonObject *run = json_array_get_object_element(runs, i);
        int64_t id = json_object_get_int_member(run, "run_id");

        if (g_strcmp0(json_object_get_string_member(run, "policy"), "recorded") != 0)
            continue;
        for (guint k = 0; k < stored->len; k++) {
            const FsimStoredRun *row = g_ptr_array_index(stored, k);

            if (row->id != id)
                continue;
            found = TRUE;
            g_assert_cmpstr(row->policy, ==, "recorded");
            g_assert_cmpint(row->status, ==, FSIM_STORE_COMPLETE);
            g_assert_true(row->has_metrics);
            g_assert_cmpint((gint64)row->metrics.peak_reserved_bytes, ==,
                            json_object_get_int_member(run, "peak_reserved_bytes"));
            g_assert_cmpint((gint64)row->metrics.peak_reserved_bytes, ==, 5802819584);
        }
    }
    g_assert_true(found);
    g_clear_pointer(&stored, g_ptr_array_unref);
    g_clear_pointer(&store, fsim_store_close);
    fsim_test_remove_tree(dir);
}

/* Runs that ran out of memory served fewer requests: the lower bound is still the trace's. */
static void
test_lower_bound_same(void)
{
    g_autofree char *trace = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *runs;
    int64_t lower = -1;
    gboolean some_oom = FALSE;

    if (!fsim_test_have_binary())
        return;
    trace = source_path("traces/fragmenting.trace");
    g_auto(FsimTestRun) r = fsim_test_run("replay", trace, "-d", "1200MiB", "--json", NULL);
    g_assert_cmpint(r.status, ==, 0);
    runs = replay_runs(parser, &r);
    for (guint i = 0; i < json_array_get_length(runs); i++) {
        JsonObject *run = json_array_get_object_element(runs, i);

        some_oom |= json_object_get_int_member(run, "ooms") > 0;
        if (lower < 0)
            lower = json_object_get_int_member(run, "lower_bound_bytes");
        g_assert_cmpint(json_object_get_int_member(run, "lower_bound_bytes"), ==, lower);
        if (json_object_get_int_member(run, "ooms") == 0)
            g_assert_cmpint(json_object_get_int_member(run, "peak_requested_bytes"), ==, lower);
    }
    g_assert_true(some_oom);
}

/* Nothing recorded, nothing to validate: exit 5, never "exact" on 0/0. */
static void
test_validate_nothing(void)
{
    g_autofree char *trace = NULL;

    if (!fsim_test_have_binary())
        return;
    trace = source_path("traces/fragmenting.trace");
    g_auto(FsimTestRun) r = fsim_test_run("validate", trace, NULL);
    g_assert_cmpint(r.status, ==, 5);
    g_assert_nonnull(strstr(r.err, "nothing to validate"));
    g_assert_nonnull(strstr(r.err, "has no recorded allocator decisions"));
    g_assert_null(strstr(r.out, "exact"));
}

/* docs/metrics.md lists exactly the metrics of the code's table, each with its unit. */
static void
test_metrics_doc(void)
{
    g_autofree char *path = source_path("docs/metrics.md");
    g_autofree char *text = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GHashTable) units = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_auto(GStrv) lines = NULL;
    gboolean in_table = FALSE;
    gsize n;
    const FsimMetricInfo *info = fsim_metrics_list(&n);

    g_assert_true(g_file_get_contents(path, &text, NULL, &error));
    lines = g_strsplit(text, "\n", -1);
    for (gsize i = 0; lines[i] != NULL; i++) {
        g_auto(GStrv) cells = NULL;
        g_auto(GStrv) names = NULL;

        if (g_str_has_prefix(lines[i], "| metric | unit | meaning |")) {
            in_table = TRUE;
            continue;
        }
        if (!in_table || g_str_has_prefix(lines[i], "|---"))
            continue;
        if (!g_str_has_prefix(lines[i], "| `"))
            break; /* the end of the table */
        cells = g_strsplit(lines[i], "|", -1);
        g_assert_cmpuint(g_strv_length(cells), >=, 4);
        names = g_strsplit(cells[1], ",", -1);
        for (gsize k = 0; names[k] != NULL; k++) {
            char *name = g_strstrip(g_strdelimit(names[k], "`", ' '));

            g_assert_false(g_hash_table_contains(units, name)); /* one definition per name */
            g_hash_table_insert(units, g_strdup(name), g_strdup(g_strstrip(cells[2])));
        }
    }
    g_assert_true(in_table);
    for (gsize i = 0; i < n; i++) {
        const char *unit = g_hash_table_lookup(units, info[i].name);

        g_test_message("%s: code %s, docs %s", info[i].name, info[i].unit, unit);
        g_assert_nonnull(unit);
        g_assert_cmpstr(unit, ==, info[i].unit);
        g_assert_nonnull(info[i].label);
        g_assert_cmpint(ABS(info[i].direction), <=, 1);
    }
    g_assert_cmpuint(g_hash_table_size(units), ==, n);
}

/* The table's headers are the metrics' labels. */
static void
test_table_headers(void)
{
    static const char *const metrics[] = {"needed_bytes", "peak_reserved_bytes",
                                          "lower_bound_bytes", "external_frag_at_peak"};
    g_autofree char *trace = NULL;

    if (!fsim_test_have_binary())
        return;
    trace = source_path("traces/fragmenting.trace");
    g_auto(FsimTestRun) r = fsim_test_run("replay", trace, "-p", "direct", NULL);
    g_assert_cmpint(r.status, ==, 0);
    for (gsize i = 0; i < G_N_ELEMENTS(metrics); i++)
        g_assert_nonnull(strstr(r.out, fsim_metric_label(metrics[i])));
}

/* Utilization is of requested bytes: 1 KiB tensors in 2 MiB pages are not 100% used. */
static void
test_utilization_requested(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "small.trace", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    JsonObject *run;

    if (!fsim_test_have_binary())
        return;
    g_assert_true(g_file_set_contents(
        path, "fragsim-trace v1\n0 alloc 1 1024 0\n1 alloc 2 1024 0\n", -1, &error));
    g_auto(FsimTestRun) r = fsim_test_run("replay", path, "-p", "direct", "--json", NULL);
    g_assert_cmpint(r.status, ==, 0);
    run = json_array_get_object_element(replay_runs(parser, &r), 0);
    g_assert_cmpfloat_with_epsilon(json_object_get_double_member(run, "peak_utilization"),
                                   2048.0 / (4 * 1048576.0), 1e-12);
    fsim_test_remove_tree(dir);
}

/* The report leads with the capacity each run needs, and ranks the runs by it. */
static void
test_report_needs(void)
{
    g_autofree char *trace = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autofree char *out = NULL;
    g_autofree char *index = NULL;
    g_autofree char *html = NULL;
    g_autoptr(GError) error = NULL;

    if (!fsim_test_have_binary())
        return;
    trace = source_path("traces/fragmenting.trace");
    dir = fsim_test_tmp_dir();
    db = g_build_filename(dir, "results.db", NULL);
    out = g_build_filename(dir, "report", NULL);
    g_auto(FsimTestRun) r =
        fsim_test_run("replay", trace, "-p", "caching,expandable", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 0);
    g_auto(FsimTestRun) rep = fsim_test_run("report", "--db", db, "-o", out, NULL);
    if (rep.status != 0 && strstr(rep.err, "gnuplot") != NULL) {
        g_test_skip("gnuplot not found");
        fsim_test_remove_tree(dir);
        return;
    }
    g_assert_cmpint(rep.status, ==, 0);
    index = g_build_filename(out, "index.html", NULL);
    g_assert_true(g_file_get_contents(index, &html, NULL, &error));
    g_assert_nonnull(strstr(html, "<th class=\"n\">needs (over the lower bound)</th>"));
    /* caching needs 1.18 GiB there, expandable 1.23 GiB */
    g_assert_nonnull(strstr(html, "Keep PyTorch&apos;s default settings: they need 1.18 GiB"));
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/runs/configs", test_configs);
    g_test_add_func("/runs/config-canonical", test_config_canonical);
    g_test_add_func("/runs/error-row", test_error_row);
    g_test_add_func("/runs/recorded-stored", test_recorded_stored);
    g_test_add_func("/runs/validate-conf", test_validate_conf);
    g_test_add_func("/runs/lower-bound-same", test_lower_bound_same);
    g_test_add_func("/runs/validate-nothing", test_validate_nothing);
    g_test_add_func("/runs/metrics-doc", test_metrics_doc);
    g_test_add_func("/runs/table-headers", test_table_headers);
    g_test_add_func("/runs/utilization-requested", test_utilization_requested);
    g_test_add_func("/runs/report-needs", test_report_needs);
    return g_test_run();
}
