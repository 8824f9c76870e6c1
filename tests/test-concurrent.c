/* SPDX-License-Identifier: MIT */
/*
 * Concurrent writers: eight `fragsim replay --db` processes started together on a database that
 * does not exist yet, fifty times over.  Every run must be stored, the file must never be gone,
 * and SQLite's integrity check must pass.  The rounds also start from an empty file (created by
 * someone else, e.g. `touch`), whose schema the writers must create exactly once.  The same for
 * eight `fragsim merge` processes merging eight databases into one new one, and for four sharded
 * `fragsim sweep` processes (each with two worker processes) writing one database.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <gio/gio.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <string.h>

#include "test-util.h"

#define WRITERS 8
#define ROUNDS  50
/* merge and sweep rounds: each costs several processes more than a replay round */
#define MERGE_ROUNDS 20
#define SHARDS       4

/* Starts one process per command line of @argvs (NULL-terminated each) at once and waits for
 * them all; each must succeed. */
static void
run_together(char **const *argvs, int n, const char *db)
{
    g_autofree GSubprocess **children = g_new0(GSubprocess *, n);
    g_autoptr(GError) error = NULL;

    for (int i = 0; i < n; i++) {
        children[i] = g_subprocess_newv(
            (const char *const *)argvs[i],
            G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
        g_assert_no_error(error);
    }
    for (int i = 0; i < n; i++) {
        g_autofree char *err = NULL;

        g_assert_true(g_subprocess_communicate_utf8(children[i], NULL, NULL, NULL, &err, &error));
        g_assert_no_error(error);
        if (!g_subprocess_get_if_exited(children[i]) || g_subprocess_get_exit_status(children[i]))
            g_error("%s %d of %s failed: %s", argvs[i][1], i, db, err);
        g_object_unref(children[i]);
    }
}

/* A command line of fragsim itself: @first and what follows, up to NULL, copied. */
static char **G_GNUC_NULL_TERMINATED
fragsim_argv(const char *first, ...)
{
    GPtrArray *argv = g_ptr_array_new();
    va_list args;

    g_ptr_array_add(argv, g_strdup(fsim_test_binary()));
    va_start(args, first);
    for (const char *arg = first; arg != NULL; arg = va_arg(args, const char *))
        g_ptr_array_add(argv, g_strdup(arg));
    va_end(args);
    g_ptr_array_add(argv, NULL);
    return (char **)g_ptr_array_free(argv, FALSE);
}

/* Nothing but the database and its WAL companions is left in @dir (no private files); the
 * inputs of a test are "trace", "spec" and "inputs". */
static void
assert_only_database(const char *dir)
{
    static const char *const allowed[] = {
        "trace", "spec", "inputs", "results.db", "results.db-wal", "results.db-shm", NULL};
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;

    g_assert_nonnull(d);
    while ((name = g_dir_read_name(d)) != NULL) {
        if (!g_strv_contains(allowed, name))
            g_error("left behind in the database's directory: %s", name);
    }
}

/* Before round @round: no database, or every fifth round an empty file somebody made. */
static void
new_database(const char *db, int round)
{
    g_assert_true(g_remove(db) == 0 || round == 0);
    if (round % 5 == 4)
        g_assert_true(g_file_set_contents(db, "", 0, NULL));
}

/* After a round: the file is there, holds @runs complete runs, and is intact. */
static void
check_database(const char *dir, const char *db, int runs)
{
    g_autofree char *count = NULL;
    g_autofree char *check = NULL;
    g_autofree char *expected = g_strdup_printf("%d", runs);

    g_assert_true(g_file_test(db, G_FILE_TEST_IS_REGULAR));
    count = fsim_test_sql_text(db, "SELECT count(*) FROM runs WHERE status = 'complete'");
    g_assert_cmpstr(count, ==, expected);
    check = fsim_test_sql_text(db, "PRAGMA integrity_check");
    g_assert_cmpstr(check, ==, "ok");
    assert_only_database(dir);
}

/* @rounds rounds of @n processes (@argvs, freed after) started at once on a new @db in @dir,
 * each round checked to leave @runs complete runs. */
static void
run_rounds(const char *dir, const char *db, char **argvs[], int n, int rounds, int runs)
{
    for (int round = 0; round < rounds; round++) {
        new_database(db, round);
        run_together(argvs, n, db);
        check_database(dir, db, runs);
    }
    for (int i = 0; i < n; i++)
        g_strfreev(argvs[i]);
}

/* A new temporary folder holding the small trace every test replays (*@trace) and the path of
 * the database the processes share (*@db, not created). */
static char *
setup(char **trace, char **db)
{
    char *dir = fsim_test_tmp_dir();

    *trace = g_build_filename(dir, "trace", NULL);
    g_assert_true(g_file_set_contents(*trace,
                                      "fragsim-trace v1\n0 alloc 1 1048576 0\n10 alloc 2 4096 0\n"
                                      "20 free 1 0\n30 free 2 0\n",
                                      -1, NULL));
    *db = g_build_filename(dir, "results.db", NULL);
    return dir;
}

static void
test_writers(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *trace = NULL;
    g_autofree char *db = NULL;
    char **argvs[WRITERS];

    if (!fsim_test_have_binary())
        return;
    dir = setup(&trace, &db);
    for (int i = 0; i < WRITERS; i++)
        argvs[i] = fragsim_argv("replay", trace, "-p", i % 2 == 0 ? "direct" : "bestfit", "--db",
                                db, NULL);
    run_rounds(dir, db, argvs, WRITERS, ROUNDS, WRITERS);
    fsim_test_remove_tree(dir);
}

/* Eight `fragsim merge` processes at once, each merging its own database of two runs (distinct
 * jobs: one card size per input) into the same new database: all sixteen runs are stored. */
static void
test_merges(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *trace = NULL;
    g_autofree char *inputs = NULL;
    g_autofree char *db = NULL;
    char **argvs[WRITERS];

    if (!fsim_test_have_binary())
        return;
    dir = setup(&trace, &db);
    inputs = g_build_filename(dir, "inputs", NULL);
    g_assert_cmpint(g_mkdir(inputs, 0700), ==, 0);
    for (int i = 0; i < WRITERS; i++) {
        g_autofree char *name = g_strdup_printf("in%d.db", i);
        g_autofree char *in = g_build_filename(inputs, name, NULL);
        g_autofree char *card = g_strdup_printf("%dGiB", i + 1);
        g_auto(FsimTestRun) run =
            fsim_test_run("replay", trace, "-p", "direct,bestfit", "-d", card, "--db", in, NULL);

        g_assert_cmpint(run.status, ==, 0);
        argvs[i] = fragsim_argv("merge", db, in, NULL);
    }
    run_rounds(dir, db, argvs, WRITERS, MERGE_ROUNDS, 2 * WRITERS);
    g_assert_cmpint(fsim_test_sql_int(db, "SELECT count(DISTINCT device) FROM runs"), ==, WRITERS);
    fsim_test_remove_tree(dir);
}

/* Four shards of one sweep started at once, each with two worker processes, on the same new
 * database: the 16 jobs' runs are all stored. */
static void
test_sweeps(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *trace = NULL;
    g_autofree char *spec = NULL;
    g_autofree char *text = NULL;
    g_autofree char *db = NULL;
    char **argvs[SHARDS];

    if (!fsim_test_have_binary())
        return;
    dir = setup(&trace, &db);
    spec = g_build_filename(dir, "spec", NULL);
    text = g_strdup_printf("[sweep]\ntraces=%s\npolicies=direct;bestfit\n"
                           "devices=1GiB;2GiB;3GiB;4GiB;5GiB;6GiB;7GiB;8GiB\n",
                           trace);
    g_assert_true(g_file_set_contents(spec, text, -1, NULL));
    for (int i = 0; i < SHARDS; i++) {
        g_autofree char *shard = g_strdup_printf("%d/%d", i + 1, SHARDS);

        argvs[i] = fragsim_argv("sweep", spec, "--db", db, "-j", "2", "--shard", shard, NULL);
    }
    run_rounds(dir, db, argvs, SHARDS, MERGE_ROUNDS, 16);
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/store/concurrent/writers", test_writers);
    g_test_add_func("/store/concurrent/merges", test_merges);
    g_test_add_func("/store/concurrent/sweeps", test_sweeps);
    return g_test_run();
}
