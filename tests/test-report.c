/* SPDX-License-Identifier: MIT */
/*
 * The HTML report's content: it leads with the answer (one sentence per comparison at the top
 * and in the comparison: which setting to use and why), the capacity each run needs beside the
 * lower bound and the recording, the breakdown at the peak per run, warm-up against steady state
 * for traces with marks, and tune's recommendation when there is one.  Every table has rows.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <sqlite3.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "test-util.h"

static void
run_ok(const char *const *args)
{
    g_auto(FsimTestRun) r = fsim_test_run_argv(NULL, args);

    if (r.status != 0)
        g_test_message("fragsim %s: %s", args[0], r.err);
    g_assert_cmpint(r.status, ==, 0);
}

static char *
read_report(const char *db, const char *out, gboolean gnuplot)
{
    g_autofree char *index = g_build_filename(out, "index.html", NULL);
    char *html = NULL;

    run_ok(gnuplot ? (const char *const[]){"report", "--db", db, "-o", out, NULL}
                   : (const char *const[]){"report", "--db", db, "-o", out, "--gnuplot",
                                           "/nonexistent/gnuplot", NULL});
    g_assert_true(g_file_get_contents(index, &html, NULL, NULL));
    return html;
}

/* Every <table> has a <tbody> with at least one row. */
static void
check_tables(const char *html)
{
    guint tables = 0;

    for (const char *p = strstr(html, "<table"); p != NULL; p = strstr(p + 1, "<table")) {
        const char *end = strstr(p, "</table>");
        const char *body = strstr(p, "<tbody>");

        g_assert_nonnull(end);
        g_assert_nonnull(body);
        g_assert_true(body < end);
        g_assert_true(g_str_has_prefix(body + strlen("<tbody>\n"), "<tr"));
        tables++;
    }
    g_assert_cmpuint(tables, >, 0);
}

static guint
count(const char *html, const char *needle)
{
    guint n = 0;

    for (const char *p = strstr(html, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void
test_answer(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "r.db", NULL);
    g_autofree char *out = g_build_filename(dir, "report", NULL);
    g_autofree char *trace =
        g_build_filename(g_getenv("FRAGSIM_SOURCE_DIR"), "traces", "fragmenting.trace", NULL);
    g_autofree char *html = NULL;
    const char *top_end;
    const char *sentence;

    run_ok((const char *const[]){"replay", trace, "-p", "caching,bestfit,paged", "-c", "", "-c",
                                 "expandable_segments:True", "--db", db, NULL});
    html = read_report(db, out, FALSE);
    check_tables(html);
    /* the sentence is at the top, before the first comparison, and again in it */
    top_end = strstr(html, "<section");
    g_assert_nonnull(top_end);
    sentence = strstr(html, "<ul class=\"answers\">");
    g_assert_nonnull(sentence);
    g_assert_true(sentence < top_end);
    /* README: on the H100 the default settings need the least of PyTorch's (1.18 GiB), paged
     * less still, within page rounding of the 1.12 GiB bound */
    g_assert_cmpuint(count(html, "Keep PyTorch&apos;s default settings: they need 1.18 GiB"), ==,
                     2);
    g_assert_cmpuint(count(html, "another allocator, paged, would need 1.13 GiB"), ==, 2);
    g_assert_cmpuint(count(html, "No allocator can do with less than 1.12 GiB"), ==, 2);
    /* the table of needs: every run labelled with its settings, the default marked */
    g_assert_nonnull(strstr(html, "What each run needs"));
    g_assert_nonnull(strstr(html, "caching expandable_segments:True"));
    g_assert_cmpuint(count(html, "PyTorch default</span>"), ==, 1);
    g_assert_cmpuint(count(html, "use this</span>"), ==, 1);
    /* the breakdown at the peak as a bar per run: caching pins free memory (README) */
    g_assert_cmpuint(count(html, "<div class=\"bar\""), ==, 4);
    g_assert_cmpuint(count(html, "<span class=\"pin\""), >=, 1);
    g_assert_cmpuint(count(html, "<span class=\"live\""), ==, 4);
    /* marks: warm-up against steady state, one row per run */
    g_assert_nonnull(strstr(html, "Warm-up and steady state"));
    g_assert_null(strstr(html, "<script"));
    g_assert_null(strstr(html, "Memory by pool")); /* no private pools */
    fsim_test_remove_tree(dir);
}

/* The report of a shared snapshot (only its device 0 where @device0) replayed by caching with
 * PyTorch's default settings and with expandable segments; %NULL where the snapshot is missing. */
static char *
report_default_vs_expandable(const char *name, gboolean device0)
{
    g_autofree char *trace = fsim_test_shared_trace(name);
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autofree char *out = NULL;
    char *html;

    if (trace == NULL)
        return NULL;
    dir = fsim_test_tmp_dir();
    db = g_build_filename(dir, "r.db", NULL);
    out = g_build_filename(dir, "report", NULL);
    run_ok((const char *const[]){"replay", trace, "-p", "caching", "-c", "", "-c",
                                 "expandable_segments:True", "--db", db,
                                 /* the list ends here unless @device0 */
                                 device0 ? "--trace-device" : NULL, "0", NULL});
    html = read_report(db, out, FALSE);
    fsim_test_remove_tree(dir);
    return html;
}

/* A setting to change: the sentence names it, what it saves, and why (the pinned memory). */
static void
test_answer_change(void)
{
    g_autofree char *html = report_default_vs_expandable(
        "Constructor-Sun__code_location__memory_snapshot.pickle", TRUE);

    if (html == NULL)
        return;
    check_tables(html);
    g_assert_cmpuint(count(html, "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (run "
                                 "caching expandable_segments:True): it needs"),
                     ==, 2);
    g_assert_cmpuint(count(html, "of free memory that live blocks pin"), ==, 2);
    /* the recording itself, beside the models */
    g_assert_cmpuint(count(html, "the recording itself reserved"), ==, 2);
    g_assert_cmpuint(count(html, "what the recording did</span>"), ==, 1);
}

/* On a snapshot recorded with torch_npu the setting is torch_npu's variable. */
static void
test_answer_npu(void)
{
    g_autofree char *html = report_default_vs_expandable(
        "codeasier__MemSnapDump__tests__test_data__snapshot_with_empty_cache.pkl", FALSE);

    if (html == NULL)
        return;
    g_assert_cmpuint(count(html, "Set PYTORCH_NPU_ALLOC_CONF=expandable_segments:True (run "), ==,
                     2);
    g_assert_cmpuint(count(html, "PYTORCH_CUDA_ALLOC_CONF="), ==, 0);
}

/* tune's recommendation, when the database has one, is the answer. */
static void
test_answer_tune(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "r.db", NULL);
    g_autofree char *out = g_build_filename(dir, "report", NULL);
    g_autofree char *trace =
        g_build_filename(g_getenv("FRAGSIM_SOURCE_DIR"), "traces", "fragmenting.trace", NULL);
    g_autofree char *html = NULL;
    g_autofree char *sql = NULL;
    sqlite3 *s = NULL;

    run_ok((const char *const[]){"replay", trace, "-p", "caching", "-c", "", "-c",
                                 "garbage_collection_threshold:0.6", "--db", db, NULL});
    /* as `tune --db` writes it */
    sql = g_strdup_printf(
        "CREATE TABLE IF NOT EXISTS recommendations (id INTEGER PRIMARY KEY, trace TEXT, "
        "trace_device INTEGER, "
        "device TEXT, default_run_id INTEGER, run_id INTEGER, config TEXT, env TEXT, needed_bytes "
        "INTEGER, saving_bytes INTEGER, candidates INTEGER, created_at TEXT); INSERT INTO "
        "recommendations VALUES (1, '%s', 0, 'h100-80gb', 1, 2, "
        "'garbage_collection_threshold:0.6', "
        "'PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6', 1073741824, 104857600, 7, "
        "'2026-01-01T00:00:00Z')",
        trace);
    g_assert_cmpint(sqlite3_open(db, &s), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_exec(s, sql, NULL, NULL, NULL), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_close(s), ==, SQLITE_OK);
    html = read_report(db, out, FALSE);
    g_assert_cmpuint(count(html, "Set PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6 "
                                 "(fragsim tune&apos;s recommendation): it needs 1.00 GiB, 100 MiB "
                                 "less"),
                     ==, 2);
    g_assert_cmpuint(count(html, "tune recommends</span>"), ==, 1);
    fsim_test_remove_tree(dir);
}

/* Memory by pool (worked by hand in tests/test-needed.c, /needed/pools): 16 MiB captured into
 * pool 7 and freed there, 64 MiB outside, freed, empty_cache, 48 MiB captured into pool 7.  The
 * caching run needs 80 MiB: 64 MiB of the default pools and 16 MiB of pool 7, which peaks later
 * at 64 MiB and holds 64 MiB at the end, with two references (one per capture: the graphs are
 * never destroyed).  bestfit has no private pools:
 * no rows.  The database has the same figures in run_pools, from replay and from a sweep. */
static void
test_pools(void)
{
    static const char pools_trace[] = "fragsim-trace v1\n"
                                      "0 pool_begin 7 0\n1 alloc 1 16777216 0\n2 free 1 0\n"
                                      "3 pool_end 7 0\n4 alloc 2 67108864 0\n5 free 2 0\n"
                                      "6 empty_cache\n7 pool_begin 7 0\n8 alloc 3 50331648 0\n"
                                      "9 pool_end 7 0\n";
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "r.db", NULL);
    g_autofree char *out = g_build_filename(dir, "report", NULL);
    g_autofree char *trace = g_build_filename(dir, "pools.trace", NULL);
    g_autofree char *html = NULL;
    g_autofree char *table = NULL;
    const char *start;
    const char *row;
    sqlite3 *s = NULL;
    sqlite3_stmt *stmt = NULL;

    g_assert_true(g_file_set_contents(trace, pools_trace, -1, NULL));
    run_ok((const char *const[]){"replay", trace, "-p", "caching,bestfit", "--db", db, NULL});
    html = read_report(db, out, FALSE);
    check_tables(html);
    g_assert_cmpuint(count(html, "<h3>Memory by pool</h3>"), ==, 1);
    start = strstr(html, "<table class=\"pools\">");
    g_assert_nonnull(start);
    g_assert_nonnull(strstr(start, "</table>"));
    table = g_strndup(start, (gsize)(strstr(start, "</table>") - start));
    g_assert_cmpuint(count(table, "<td>default</td>"), ==, 1);
    g_assert_cmpuint(count(table, "<td>private 7</td>"), ==, 1);
    g_assert_null(strstr(table, "bestfit"));
    row = strstr(table, "<td>default</td>");
    g_assert_true(g_str_has_prefix(row + strlen("<td>default</td>"),
                                   "<td class=\"n\">64.0 MiB</td><td class=\"n\">64.0 MiB</td>"
                                   "<td class=\"n\">0 B</td><td class=\"n\"></td>"));
    row = strstr(table, "<td>private 7</td>");
    g_assert_true(g_str_has_prefix(row + strlen("<td>private 7</td>"),
                                   "<td class=\"n\">16.0 MiB</td><td class=\"n\">64.0 MiB</td>"
                                   "<td class=\"n\">64.0 MiB</td><td class=\"n\">2</td>"));
    g_assert_cmpint(sqlite3_open(db, &s), ==, SQLITE_OK);
    g_assert_cmpint(
        sqlite3_prepare_v2(s,
                           "SELECT count(*), sum(needed_bytes), max(peak_reserved_bytes)"
                           " FROM run_pools p JOIN runs r ON r.id = p.run_id"
                           " WHERE r.policy = 'caching'",
                           -1, &stmt, NULL),
        ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_step(stmt), ==, SQLITE_ROW);
    g_assert_cmpint(sqlite3_column_int64(stmt, 0), ==, 2);
    g_assert_cmpint(sqlite3_column_int64(stmt, 1), ==, 80 * FSIM_MiB);
    g_assert_cmpint(sqlite3_column_int64(stmt, 2), ==, 64 * FSIM_MiB);
    sqlite3_finalize(stmt);
    g_assert_cmpint(sqlite3_close(s), ==, SQLITE_OK);
    /* a sweep writes the same rows for its runs (read through the pool_results view) */
    {
        g_autofree char *spec = g_build_filename(dir, "pools.ini", NULL);
        g_autofree char *sweep_db = g_build_filename(dir, "sweep.db", NULL);

        g_assert_true(
            g_file_set_contents(spec, "[sweep]\ntraces=pools.trace\npolicies=caching\n", -1, NULL));
        run_ok((const char *const[]){"sweep", spec, "--db", sweep_db, NULL});
        g_assert_cmpint(sqlite3_open(sweep_db, &s), ==, SQLITE_OK);
        g_assert_cmpint(sqlite3_prepare_v2(s,
                                           "SELECT count(*), sum(needed_bytes) FROM pool_results"
                                           " WHERE pool = 7 AND needed_bytes = 16777216"
                                           " AND run_label = 'caching'"
                                           " AND peak_reserved_bytes = 67108864",
                                           -1, &stmt, NULL),
                        ==, SQLITE_OK);
        g_assert_cmpint(sqlite3_step(stmt), ==, SQLITE_ROW);
        g_assert_cmpint(sqlite3_column_int64(stmt, 0), ==, 1);
        sqlite3_finalize(stmt);
        g_assert_cmpint(sqlite3_close(s), ==, SQLITE_OK);
    }
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/report/answer/keep-default", test_answer);
    g_test_add_func("/report/answer/change", test_answer_change);
    g_test_add_func("/report/answer/npu", test_answer_npu);
    g_test_add_func("/report/answer/tune", test_answer_tune);
    g_test_add_func("/report/pools", test_pools);
    return g_test_run();
}
