/* SPDX-License-Identifier: MIT */
/*
 * `fragsim sweep` and `fragsim merge`, run as the binary (FRAGSIM_BINARY): spec validation, the
 * job list and its shards, sharded-then-merged equal to unsharded in every stored value, merge's
 * refusals and its duplicate detection, failing and dying jobs recorded as runs in error, jobs of
 * several ranks.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <sqlite3.h>
#include <string.h>

#include "fragsim/store.h"

#include "test-util.h"

/* ---- helpers -------------------------------------------------------------------------------- */

/* Writes a spec into @dir whose traces are the files @globs names in tests/data/traces. */
static char *
write_spec(const char *dir, const char *name, const char *body)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autofree char *data_dir = fsim_test_trace_path("");
    g_autofree char *text = NULL;
    g_autoptr(GString) expanded = g_string_new(body);

    g_string_replace(expanded, "@DATA@", data_dir, 0);
    text = g_strdup_printf("[sweep]\n%s", expanded->str);
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    return g_steal_pointer(&path);
}

/* Columns that legitimately differ between two runs of the same job. */
static gboolean
volatile_column(const char *name)
{
    static const char *const names[] = {"id",          "run_id",       "created_at",
                                        "finished_at", "wall_seconds", "events_per_second"};

    for (gsize i = 0; i < G_N_ELEMENTS(names); i++)
        if (strcmp(name, names[i]) == 0)
            return TRUE;
    return FALSE;
}

/* Every row of @table (joined to its run's job identity), as sorted text lines. */
static void
dump_table(sqlite3 *db, const char *table, GPtrArray *lines)
{
    g_autofree char *sql =
        strcmp(table, "runs") == 0
            ? g_strdup("SELECT * FROM runs")
            : g_strdup_printf("SELECT r.trace_sha256, r.trace_device, r.policy, r.config,"
                              " r.device, t.* FROM %s t JOIN runs r ON r.id = t.run_id",
                              table);
    sqlite3_stmt *stmt = NULL;

    g_assert_cmpint(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), ==, SQLITE_OK);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
        g_autoptr(GString) line = g_string_new(table);

        for (int c = 0; c < sqlite3_column_count(stmt); c++) {
            const char *text = (const char *)sqlite3_column_text(stmt, c);

            if (volatile_column(sqlite3_column_name(stmt, c)))
                continue;
            g_string_append_printf(line, "|%s=%s", sqlite3_column_name(stmt, c),
                                   text != NULL ? text : "NULL");
        }
        g_ptr_array_add(lines, g_string_free(g_steal_pointer(&line), FALSE));
    }
    g_assert_cmpint(sqlite3_finalize(stmt), ==, SQLITE_OK);
}

static int
compare_lines(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Everything a database stores about its runs, ids and timestamps left out, in sorted order. */
static char *
dump_db(const char *path)
{
    static const char *const tables[] = {"runs",          "run_metrics", "samples",   "ooms",
                                         "segments",      "blocks",      "marks",     "sizes",
                                         "run_breakdown", "run_phases",  "run_packed"};
    g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func(g_free);
    sqlite3 *db = NULL;

    g_assert_cmpint(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), ==, SQLITE_OK);
    for (gsize i = 0; i < G_N_ELEMENTS(tables); i++)
        dump_table(db, tables[i], lines);
    g_assert_cmpint(sqlite3_close(db), ==, SQLITE_OK);
    g_ptr_array_sort(lines, compare_lines);
    g_ptr_array_add(lines, NULL);
    return g_strjoinv("\n", (char **)lines->pdata);
}

static const char grid[] = "traces=@DATA@/golden-*.trace;@DATA@/ok-design-example.trace\n"
                           "policies=caching;bestfit;paged\n"
                           "alloc-confs=;max_split_size_mb:128\n"
                           "devices=t4-16gb;2GiB\n";

/* ---- spec ----------------------------------------------------------------------------------- */

static void
check_spec_error(const char *dir, const char *body, const char *expected)
{
    g_autofree char *spec = write_spec(dir, "bad.ini", body);
    g_auto(FsimTestRun) run = fsim_test_run("sweep", spec, "--list", NULL);

    g_assert_cmpint(run.status, ==, 1);
    g_assert_nonnull(strstr(run.err, spec));
    if (strstr(run.err, expected) == NULL)
        g_error("expected '%s' in: %s", expected, run.err);
}

static void
test_spec_errors(void)
{
    g_autofree char *dir = NULL;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    check_spec_error(dir, "traces=@DATA@/golden-*.trace\npolicy=caching\n",
                     "[sweep] policy: unknown key");
    check_spec_error(dir, "traces=@DATA@/golden-*.trace\npolicies=caching;nosuch\n",
                     "policies: unknown policy 'nosuch'");
    check_spec_error(dir, "traces=@DATA@/golden-*.trace\nalloc-confs=max_split_size_mb:x\n",
                     "alloc-confs: 'max_split_size_mb:x'");
    check_spec_error(dir, "traces=@DATA@/golden-*.trace\ndevices=h100-80gb;nosuchcard\n",
                     "devices: 'nosuchcard'");
    check_spec_error(dir, "traces=@DATA@/nothing-*.trace\n", "matches no file");
    check_spec_error(dir, "jobs=@DATA@/golden-*.trace\n", "is not NAME:GLOB");
    check_spec_error(dir, "jobs=a:@DATA@/golden-*.trace;b:@DATA@/golden-oom.trace\n",
                     "is in two jobs");
    check_spec_error(dir, "trace-device=x\ntraces=@DATA@/golden-*.trace\n", "trace-device: 'x'");
    fsim_test_remove_tree(dir);
}

/* The shards of --list partition the job list, and their sizes differ by at most one job (the
 * traces here are all of similar size). */
static void
test_shards(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *spec = NULL;
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    guint total = 0, smallest = G_MAXUINT, largest = 0;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    spec = write_spec(dir, "grid.ini", grid);
    {
        g_auto(FsimTestRun) all = fsim_test_run("sweep", spec, "--list", NULL);
        g_auto(GStrv) lines = g_strsplit(all.out, "\n", -1);

        g_assert_cmpint(all.status, ==, 0);
        /* 3 traces x (caching x 2 confs + bestfit + paged) x 2 devices, and the header */
        total = g_strv_length(lines) - 2;
        g_assert_cmpuint(total, ==, 3 * 4 * 2);
    }
    for (guint i = 1; i <= 3; i++) {
        g_autofree char *shard = g_strdup_printf("%u/3", i);
        g_auto(FsimTestRun) run = fsim_test_run("sweep", spec, "--list", "--shard", shard, NULL);
        g_auto(GStrv) lines = g_strsplit(run.out, "\n", -1);
        guint n = 0;

        g_assert_cmpint(run.status, ==, 0);
        for (gsize l = 1; lines[l] != NULL && *lines[l] != '\0'; l++, n++)
            g_assert_true(g_hash_table_add(seen, g_strdup(lines[l])));
        smallest = MIN(smallest, n);
        largest = MAX(largest, n);
    }
    g_assert_cmpuint(g_hash_table_size(seen), ==, total);
    g_assert_cmpuint(largest - smallest, <=, 1);
    {
        g_auto(FsimTestRun) bad = fsim_test_run("sweep", spec, "--list", "--shard", "4/3", NULL);

        g_assert_cmpint(bad.status, ==, 2);
    }
    fsim_test_remove_tree(dir);
}

/* ---- sweep and merge ------------------------------------------------------------------------ */

static void
test_sharded_merged_equals_unsharded(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *spec = NULL;
    g_autofree char *whole = NULL;
    g_autofree char *merged = NULL;
    g_autofree char *dump_whole = NULL;
    g_autofree char *dump_merged = NULL;
    char *shards[3] = {NULL, NULL, NULL};

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    spec = write_spec(dir, "grid.ini", grid);
    whole = g_build_filename(dir, "whole.db", NULL);
    merged = g_build_filename(dir, "merged.db", NULL);
    {
        g_auto(FsimTestRun) run = fsim_test_run("sweep", spec, "--db", whole, "-j", "2", NULL);

        g_assert_cmpint(run.status, ==, 0);
    }
    for (guint i = 0; i < 3; i++) {
        g_autofree char *shard = g_strdup_printf("%u/3", i + 1);
        g_autofree char *path = g_strdup_printf("%s/shard-%u.db", dir, i + 1);
        g_auto(FsimTestRun) run =
            fsim_test_run("sweep", spec, "--db", path, "--shard", shard, "-j", "1", NULL);

        g_assert_cmpint(run.status, ==, 0);
        shards[i] = g_steal_pointer(&path);
    }
    {
        g_auto(FsimTestRun) run =
            fsim_test_run("merge", merged, shards[0], shards[1], shards[2], NULL);

        g_assert_cmpint(run.status, ==, 0);
    }
    g_assert_cmpint(fsim_test_sql_int(whole, "SELECT count(*) FROM runs"), ==, 24);
    g_assert_cmpint(fsim_test_sql_int(whole, "SELECT count(*) FROM runs WHERE status = 'complete'"
                                             " AND trace_sha256 IS NOT NULL"),
                    ==, 24);
    g_assert_cmpint(
        fsim_test_sql_int(whole, "SELECT count(*) FROM run_metrics WHERE needed_bytes > 0"), ==,
        24);
    dump_whole = dump_db(whole);
    dump_merged = dump_db(merged);
    g_assert_cmpstr(dump_merged, ==, dump_whole);

    /* merging a shard again changes nothing: the same jobs are kept once */
    g_assert_nonnull(shards[1]);
    {
        g_auto(FsimTestRun) run = fsim_test_run("merge", merged, shards[1], NULL);
        g_autofree char *again = NULL;

        g_assert_cmpint(run.status, ==, 0);
        g_assert_nonnull(strstr(run.out, "left out"));
        again = dump_db(merged);
        g_assert_cmpstr(again, ==, dump_whole);
    }
    for (guint i = 0; i < 3; i++)
        g_free(shards[i]);
    fsim_test_remove_tree(dir);
}

/* The same figures as `replay` for the same run. */
static void
test_sweep_matches_replay(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *spec = NULL;
    g_autofree char *db = NULL;
    g_autofree char *trace = fsim_test_trace_path("golden-fragment.trace");
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *replayed;
    int64_t needed;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    spec = write_spec(dir, "one.ini",
                      "traces=@DATA@/golden-fragment.trace\npolicies=caching\n"
                      "alloc-confs=max_split_size_mb:128\ndevices=2GiB\n");
    db = g_build_filename(dir, "one.db", NULL);
    {
        g_auto(FsimTestRun) run = fsim_test_run("sweep", spec, "--db", db, NULL);
        g_auto(FsimTestRun) replay =
            fsim_test_run("replay", trace, "-p", "caching", "-c", "max_split_size_mb:128", "-d",
                          "2GiB", "--json", NULL);

        g_assert_cmpint(run.status, ==, 0);
        g_assert_cmpint(replay.status, ==, 0);
        replayed = json_array_get_object_element(
            json_object_get_array_member(fsim_test_parse_object(parser, replay.out), "runs"), 0);
    }
    needed = fsim_test_sql_int(db, "SELECT needed_bytes FROM run_metrics");
    g_assert_cmpint(needed, ==, json_object_get_int_member(replayed, "needed_bytes"));
    g_assert_cmpint(fsim_test_sql_int(db, "SELECT peak_reserved_bytes FROM run_metrics"), ==,
                    json_object_get_int_member(replayed, "peak_reserved_bytes"));
    g_assert_cmpint(fsim_test_sql_int(db, "SELECT lower_bound_bytes FROM run_metrics"), ==,
                    json_object_get_int_member(replayed, "lower_bound_bytes"));
    fsim_test_remove_tree(dir);
}

static gboolean
file_checksum_equal(const char *path, const char *expected)
{
    g_autofree char *data = NULL;
    gsize n = 0;
    g_autofree char *sum = NULL;

    g_assert_true(g_file_get_contents(path, &data, &n, NULL));
    sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)data, n);
    return strcmp(sum, expected) == 0;
}

static void
test_merge_refuses(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *spec = NULL;
    g_autofree char *good = NULL;
    g_autofree char *foreign = NULL;
    g_autofree char *newer = NULL;
    g_autofree char *out = NULL;
    g_autofree char *fresh = NULL;
    g_autofree char *data = NULL;
    g_autofree char *sum = NULL;
    gsize n;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    spec = write_spec(dir, "one.ini",
                      "traces=@DATA@/golden-oom.trace\npolicies=bestfit\ndevices=2GiB\n");
    good = g_build_filename(dir, "good.db", NULL);
    foreign = g_build_filename(dir, "foreign.db", NULL);
    newer = g_build_filename(dir, "newer.db", NULL);
    out = g_build_filename(dir, "out.db", NULL);
    fresh = g_build_filename(dir, "fresh.db", NULL);
    {
        g_auto(FsimTestRun) a = fsim_test_run("sweep", spec, "--db", good, NULL);
        g_auto(FsimTestRun) b = fsim_test_run("sweep", spec, "--db", newer, NULL);
        g_auto(FsimTestRun) c = fsim_test_run("merge", out, good, NULL);

        g_assert_cmpint(a.status, ==, 0);
        g_assert_cmpint(b.status, ==, 0);
        g_assert_cmpint(c.status, ==, 0);
    }
    fsim_test_sql_exec(foreign, "CREATE TABLE runs (id INTEGER PRIMARY KEY, trace TEXT)");
    fsim_test_sql_exec(newer, "PRAGMA user_version = 99");
    g_assert_true(g_file_get_contents(out, &data, &n, NULL));
    sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)data, n);
    {
        g_auto(FsimTestRun) a = fsim_test_run("merge", out, good, foreign, NULL);
        g_auto(FsimTestRun) b = fsim_test_run("merge", out, newer, NULL);
        g_auto(FsimTestRun) c = fsim_test_run("merge", fresh, good, newer, NULL);
        g_auto(FsimTestRun) d = fsim_test_run("merge", out, out, NULL);

        g_assert_cmpint(a.status, ==, 1);
        g_assert_nonnull(strstr(a.err, "foreign.db: not a fragsim results database"));
        g_assert_cmpint(b.status, ==, 1);
        g_assert_nonnull(strstr(b.err, "newer fragsim"));
        g_assert_cmpint(c.status, ==, 1);
        g_assert_cmpint(d.status, ==, 1);
    }
    g_assert_true(file_checksum_equal(out, sum));
    g_assert_false(g_file_test(fresh, G_FILE_TEST_EXISTS));
    g_assert_cmpint(fsim_test_sql_int(out, "SELECT count(*) FROM runs"), ==, 1);
    fsim_test_remove_tree(dir);
}

/* A job whose trace is broken, and one whose worker is killed: each becomes a run in error, the
 * others complete, exit status 6. */
static void
test_failing_jobs(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *spec = NULL;
    g_autofree char *db = NULL;
    const char *const env[] = {"FRAGSIM_SWEEP_KILL_JOB", "1", NULL};

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    spec = write_spec(dir, "fail.ini",
                      "traces=@DATA@/golden-oom.trace;@DATA@/bad-kind.trace\n"
                      "policies=bestfit;paged\ndevices=2GiB\n");
    db = g_build_filename(dir, "fail.db", NULL);
    {
        /* jobs: golden-oom x bestfit (0), x paged (1, killed), bad-kind x bestfit, x paged */
        g_auto(FsimTestRun) run =
            fsim_test_run_env(env, "sweep", spec, "--db", db, "-j", "2", NULL);

        g_assert_cmpint(run.status, ==, 6);
        g_assert_nonnull(strstr(run.out, "3 failed"));
        g_assert_nonnull(strstr(run.err, "signal 9"));
    }
    g_assert_cmpint(fsim_test_sql_int(db, "SELECT count(*) FROM runs"), ==, 4);
    g_assert_cmpint(fsim_test_sql_int(db, "SELECT count(*) FROM runs WHERE status = 'complete'"),
                    ==, 1);
    g_assert_cmpint(fsim_test_sql_int(db, "SELECT count(*) FROM runs WHERE status = 'error'"
                                          " AND message LIKE '%bad-kind.trace%'"),
                    ==, 2);
    g_assert_cmpint(fsim_test_sql_int(db, "SELECT count(*) FROM runs WHERE status = 'error'"
                                          " AND policy = 'paged' AND message LIKE '%signal 9%'"
                                          " AND trace LIKE '%golden-oom.trace'"),
                    ==, 1);
    fsim_test_remove_tree(dir);
}

/* A version 1 database (no job identity columns) gets them, and version 2, when a sweep writes
 * into it; merged into a new database, its runs keep every value and tables other parts of
 * fragsim add (any table referring to runs) come along with new run ids. */
static void
test_upgrade_and_generic_tables(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *spec = NULL;
    g_autofree char *old = NULL;
    g_autofree char *out = NULL;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    spec = write_spec(dir, "one.ini",
                      "traces=@DATA@/golden-oom.trace\npolicies=bestfit;paged\ndevices=2GiB\n");
    old = g_build_filename(dir, "old.db", NULL);
    out = g_build_filename(dir, "out.db", NULL);
    {
        g_auto(FsimTestRun) run = fsim_test_run("sweep", spec, "--db", old, "--shard", "1/2", NULL);

        g_assert_cmpint(run.status, ==, 0);
    }
    /* what fragsim wrote before schema version 2 */
    fsim_test_sql_exec(
        old, "ALTER TABLE runs DROP COLUMN trace_sha256; ALTER TABLE runs DROP COLUMN job;"
             " PRAGMA user_version = 1");
    {
        g_auto(FsimTestRun) run = fsim_test_run("sweep", spec, "--db", old, "--shard", "2/2", NULL);

        g_assert_cmpint(run.status, ==, 0);
    }
    g_assert_cmpint(fsim_test_sql_int(old, "PRAGMA user_version"), ==, FSIM_STORE_SCHEMA_VERSION);
    g_assert_cmpint(fsim_test_sql_int(old, "SELECT count(*) FROM runs WHERE trace_sha256 IS NULL"),
                    ==, 1);
    g_assert_cmpint(
        fsim_test_sql_int(old, "SELECT count(*) FROM runs WHERE trace_sha256 IS NOT NULL"), ==, 1);
    /* a table another part of fragsim might add, in the input and in the output */
    fsim_test_sql_exec(old, "CREATE TABLE notes (run_id INTEGER REFERENCES runs(id), note TEXT);"
                            " INSERT INTO notes SELECT id, 'note of ' || policy FROM runs");
    {
        g_auto(FsimTestRun) a = fsim_test_run("merge", out, old, NULL);

        g_assert_cmpint(a.status, ==, 0);
    }
    fsim_test_sql_exec(
        out, "DELETE FROM run_metrics; DELETE FROM samples; DELETE FROM blocks;"
             " DELETE FROM segments; DELETE FROM sizes; DELETE FROM marks; DELETE FROM ooms;"
             " DELETE FROM runs;"
             " CREATE TABLE notes (run_id INTEGER REFERENCES runs(id), note TEXT)");
    {
        g_auto(FsimTestRun) b = fsim_test_run("merge", out, old, NULL);
        g_autofree char *a_dump = NULL;
        g_autofree char *b_dump = NULL;

        g_assert_cmpint(b.status, ==, 0);
        g_assert_cmpint(fsim_test_sql_int(out, "SELECT count(*) FROM notes n JOIN runs r ON r.id ="
                                               " n.run_id WHERE n.note = 'note of ' || r.policy"),
                        ==, 2);
        a_dump = dump_db(old);
        b_dump = dump_db(out);
        g_assert_cmpstr(a_dump, ==, b_dump);
    }
    fsim_test_remove_tree(dir);
}

/* jobs=NAME:GLOB: the runs of those traces carry the job's name. */
static void
test_job_groups(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *spec = NULL;
    g_autofree char *db = NULL;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    spec = write_spec(dir, "ranks.ini",
                      "traces=@DATA@/ok-design-example.trace\n"
                      "jobs=train:@DATA@/golden-*.trace\npolicies=bestfit\ndevices=2GiB\n");
    db = g_build_filename(dir, "ranks.db", NULL);
    {
        g_auto(FsimTestRun) run = fsim_test_run("sweep", spec, "--db", db, NULL);

        g_assert_cmpint(run.status, ==, 0);
    }
    g_assert_cmpint(fsim_test_sql_int(db, "SELECT count(*) FROM runs WHERE job = 'train'"), ==, 2);
    /* the report's grid: the job's worst rank, and the plain trace as a job of its own */
    {
        g_autofree char *out = g_build_filename(dir, "report", NULL);
        g_autofree char *index = g_build_filename(out, "index.html", NULL);
        g_autofree char *html = NULL;
        g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
        g_auto(FsimTestRun) run = fsim_test_run("report", "--db", db, "-o", out, NULL);

        g_assert_cmpint(run.status, ==, 0);
        g_assert_true(g_file_get_contents(index, &html, NULL, NULL));
        g_assert_nonnull(strstr(html, "<h2>Sweep: the capacity each job needs"));
        g_assert_nonnull(strstr(html, "<tr><td title=\"train\">train</td>"));
        g_assert_nonnull(strstr(html, "worst rank: golden-"));
        g_assert_nonnull(strstr(html, ".trace device 0; spread"));
        g_assert_nonnull(strstr(html, "ok-design-example.trace</td>"));
        g_assert_nonnull(strstr(html, "<th>best setting</th>"));
        if (gnuplot != NULL) {
            g_autofree char *plot = g_build_filename(out, "sweep-needed-1.png", NULL);

            g_assert_true(g_file_test(plot, G_FILE_TEST_IS_REGULAR));
        }
    }
    g_assert_cmpint(fsim_test_sql_int(db,
                                      "SELECT count(*) FROM runs WHERE job IS NULL AND trace LIKE "
                                      "'%ok-design-example.trace'"),
                    ==, 1);
    fsim_test_remove_tree(dir);
}

/* tune's recommendations refer to two runs, `run_id` and `default_run_id`: a merge rewrites
 * both to the runs' new ids. */
static void
test_merge_recommendations(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *tuned = NULL;
    g_autofree char *out = NULL;
    g_autofree char *golden = NULL;
    g_autofree char *pinned = NULL;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    tuned = g_build_filename(dir, "tuned.db", NULL);
    out = g_build_filename(dir, "out.db", NULL);
    golden = fsim_test_trace_path("golden-oom.trace");
    pinned = fsim_test_trace_path("tune-pinned.trace");
    {
        /* OUT holds two runs already, so that the merged ones get other ids */
        g_auto(FsimTestRun) replay =
            fsim_test_run("replay", golden, "-p", "direct,bestfit", "--db", out, NULL);
        g_auto(FsimTestRun) tune = fsim_test_run("tune", pinned, "--db", tuned, NULL);

        g_assert_cmpint(replay.status, ==, 0);
        g_assert_cmpint(tune.status, ==, 0);
    }
    {
        g_auto(FsimTestRun) merge = fsim_test_run("merge", out, tuned, NULL);

        g_assert_cmpint(merge.status, ==, 0);
    }
    g_assert_cmpint(fsim_test_sql_int(out, "SELECT count(*) FROM recommendations"), ==, 1);
    g_assert_cmpint(fsim_test_sql_int(out, "SELECT count(*) FROM recommendations r"
                                           " JOIN runs d ON d.id = r.default_run_id"
                                           " JOIN runs k ON k.id = r.run_id"
                                           " WHERE d.trace = r.trace AND k.trace = r.trace"
                                           " AND k.config = r.config AND d.id <> k.id"),
                    ==, 1);
    g_assert_cmpint(fsim_test_sql_int(out, "SELECT default_run_id FROM recommendations"), ==,
                    fsim_test_sql_int(tuned, "SELECT default_run_id FROM recommendations") + 2);
    g_assert_cmpint(fsim_test_sql_int(out, "SELECT run_id FROM recommendations"), ==,
                    fsim_test_sql_int(tuned, "SELECT run_id FROM recommendations") + 2);
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/sweep/spec/errors", test_spec_errors);
    g_test_add_func("/sweep/shards", test_shards);
    g_test_add_func("/sweep/matches-replay", test_sweep_matches_replay);
    g_test_add_func("/sweep/sharded-merged-equals-unsharded", test_sharded_merged_equals_unsharded);
    g_test_add_func("/sweep/failing-jobs", test_failing_jobs);
    g_test_add_func("/sweep/job-groups", test_job_groups);
    g_test_add_func("/merge/refuses", test_merge_refuses);
    g_test_add_func("/merge/upgrade-and-generic-tables", test_upgrade_and_generic_tables);
    g_test_add_func("/merge/recommendations", test_merge_recommendations);
    return g_test_run();
}
