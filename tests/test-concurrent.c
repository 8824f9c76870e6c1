/* SPDX-License-Identifier: MIT */
/*
 * Concurrent writers: eight `fragsim replay --db` processes started together on a database that
 * does not exist yet, fifty times over.  Every run must be stored, the file must never be gone,
 * and SQLite's integrity check must pass.  The rounds also start from an empty file (created by
 * someone else, e.g. `touch`), whose schema the writers must create exactly once.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <gio/gio.h>
#include <sqlite3.h>
#include <string.h>

#include "test-util.h"

#define WRITERS 8
#define ROUNDS  50

/* Starts WRITERS replays of @trace into @db at once and waits for them all; each must succeed. */
static void
run_writers(const char *trace, const char *db)
{
    GSubprocess *children[WRITERS];
    g_autoptr(GError) error = NULL;

    for (int i = 0; i < WRITERS; i++) {
        children[i] =
            g_subprocess_new(G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE,
                             &error, fsim_test_binary(), "replay", trace, "-p",
                             i % 2 == 0 ? "direct" : "bestfit", "--db", db, NULL);
        g_assert_no_error(error);
    }
    for (int i = 0; i < WRITERS; i++) {
        g_autofree char *err = NULL;

        g_assert_true(g_subprocess_communicate_utf8(children[i], NULL, NULL, NULL, &err, &error));
        g_assert_no_error(error);
        if (!g_subprocess_get_if_exited(children[i]) || g_subprocess_get_exit_status(children[i]))
            g_error("writer %d of %s failed: %s", i, db, err);
        g_object_unref(children[i]);
    }
}

/* Nothing but the database and its WAL companions is left in @dir (no private files). */
static void
assert_only_database(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;

    g_assert_nonnull(d);
    while ((name = g_dir_read_name(d)) != NULL) {
        if (strcmp(name, "trace") == 0 || strcmp(name, "results.db") == 0 ||
            strcmp(name, "results.db-wal") == 0 || strcmp(name, "results.db-shm") == 0)
            continue;
        g_error("left behind in the database's directory: %s", name);
    }
}

static void
test_writers(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *trace = NULL;
    g_autofree char *db = NULL;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    trace = g_build_filename(dir, "trace", NULL);
    db = g_build_filename(dir, "results.db", NULL);
    g_assert_true(g_file_set_contents(trace,
                                      "fragsim-trace v1\n0 alloc 1 1048576 0\n10 alloc 2 4096 0\n"
                                      "20 free 1 0\n30 free 2 0\n",
                                      -1, NULL));
    for (int round = 0; round < ROUNDS; round++) {
        g_autofree char *count = NULL;
        g_autofree char *check = NULL;

        /* A new database each round; every fifth round, an empty file somebody made. */
        g_assert_true(g_remove(db) == 0 || round == 0);
        if (round % 5 == 4)
            g_assert_true(g_file_set_contents(db, "", 0, NULL));
        run_writers(trace, db);
        g_assert_true(g_file_test(db, G_FILE_TEST_IS_REGULAR));
        count = fsim_test_sql_text(db, "SELECT count(*) FROM runs WHERE status = 'complete'");
        g_assert_cmpstr(count, ==, G_STRINGIFY(WRITERS));
        check = fsim_test_sql_text(db, "PRAGMA integrity_check");
        g_assert_cmpstr(check, ==, "ok");
        assert_only_database(dir);
    }
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/store/concurrent/writers", test_writers);
    return g_test_run();
}
