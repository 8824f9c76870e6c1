/* SPDX-License-Identifier: MIT */
/*
 * The test binaries' shared helpers (test-util.h).
 */
#include "test-util.h"

#include <glib.h>
#include <glib/gstdio.h>

#include <sqlite3.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"

void
fsim_test_run_clear(FsimTestRun *run)
{
    g_clear_pointer(&run->out, g_free);
    g_clear_pointer(&run->err, g_free);
}

const char *
fsim_test_binary(void)
{
    const char *path = g_getenv("FRAGSIM_BINARY");

    if (path == NULL)
        g_error("FRAGSIM_BINARY is not set (run through ctest)");
    return path;
}

gboolean
fsim_test_have_binary(void)
{
    const char *path = g_getenv("FRAGSIM_BINARY");

    if (path == NULL || *path == '\0') {
        g_test_skip("FRAGSIM_BINARY is not set");
        return FALSE;
    }
    return TRUE;
}

FsimTestRun
fsim_test_run_argv(const char *const *envp, const char *const *args)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) env = g_get_environ();
    FsimTestRun run = {0};
    int wait_status = 0;

    for (gsize i = 0; envp != NULL && envp[i] != NULL; i += 2)
        env = g_environ_setenv(env, envp[i], envp[i + 1], TRUE);
    g_ptr_array_add(argv, g_strdup(fsim_test_binary()));
    for (gsize i = 0; args[i] != NULL; i++)
        g_ptr_array_add(argv, g_strdup(args[i]));
    g_ptr_array_add(argv, NULL);
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, env, G_SPAWN_DEFAULT, NULL, NULL,
                               &run.out, &run.err, &wait_status, &error));
    g_assert_no_error(error);
    g_assert_true(WIFEXITED(wait_status));
    run.status = WEXITSTATUS(wait_status);
    if (run.status != 0 && g_test_verbose())
        g_test_message("fragsim exited with %d; stderr: %s", run.status, run.err);
    return run;
}

/* The NULL-terminated arguments from @first on, copied into a NULL-terminated array. */
static GPtrArray *
run_collect(const char *first, va_list args)
{
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);

    for (const char *a = first; a != NULL; a = va_arg(args, const char *))
        g_ptr_array_add(argv, g_strdup(a));
    g_ptr_array_add(argv, NULL);
    return argv;
}

FsimTestRun
fsim_test_run(const char *first, ...)
{
    g_autoptr(GPtrArray) argv = NULL;
    va_list args;

    va_start(args, first);
    argv = run_collect(first, args);
    va_end(args);
    return fsim_test_run_argv(NULL, (const char *const *)argv->pdata);
}

FsimTestRun
fsim_test_run_env(const char *const *envp, const char *first, ...)
{
    g_autoptr(GPtrArray) argv = NULL;
    va_list args;

    va_start(args, first);
    argv = run_collect(first, args);
    va_end(args);
    return fsim_test_run_argv(envp, (const char *const *)argv->pdata);
}

static GString *captured_out;
static GString *captured_err;

static void
capture_out(const char *text)
{
    g_string_append(captured_out, text);
}

static void
capture_err(const char *text)
{
    g_string_append(captured_err, text);
}

FsimTestRun
fsim_test_run_main(const char *first, ...)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
    g_autofree char **argv = NULL;
    FsimTestRun run = {0};
    GPrintFunc old_out;
    GPrintFunc old_err;
    va_list ap;

    g_ptr_array_add(args, g_strdup("fragsim"));
    va_start(ap, first);
    for (const char *a = first; a != NULL; a = va_arg(ap, const char *))
        g_ptr_array_add(args, g_strdup(a));
    va_end(ap);
    /* The strings belong to @args: option parsing removes the ones it consumes from argv. */
    argv = g_new0(char *, args->len + 1);
    memcpy(argv, args->pdata, sizeof(char *) * args->len);
    captured_out = g_string_new(NULL);
    captured_err = g_string_new(NULL);
    old_out = g_set_print_handler(capture_out);
    old_err = g_set_printerr_handler(capture_err);
    run.status = fsim_cli_main((int)args->len, argv);
    g_set_print_handler(old_out);
    g_set_printerr_handler(old_err);
    run.out = g_string_free(g_steal_pointer(&captured_out), FALSE);
    run.err = g_string_free(g_steal_pointer(&captured_err), FALSE);
    return run;
}

JsonObject *
fsim_test_parse_object(JsonParser *parser, const char *text)
{
    g_autoptr(GError) error = NULL;
    JsonNode *root;

    g_assert_nonnull(text);
    g_assert_true(json_parser_load_from_data(parser, text, -1, &error));
    g_assert_no_error(error);
    root = json_parser_get_root(parser);
    g_assert_nonnull(root);
    g_assert_true(JSON_NODE_HOLDS_OBJECT(root));
    return json_node_get_object(root);
}

uint64_t
fsim_test_action_count(const FsimTraceDeviceInfo *dev, const char *name)
{
    for (guint i = 0; i < dev->actions->len; i++) {
        const FsimTraceActionCount *a = &g_array_index(dev->actions, FsimTraceActionCount, i);

        if (strcmp(a->name, name) == 0)
            return a->count;
    }
    return 0;
}

char *
fsim_test_tmp_dir(void)
{
    g_autoptr(GError) error = NULL;
    char *dir = g_dir_make_tmp("fragsim-test-XXXXXX", &error);

    g_assert_no_error(error);
    return dir;
}

void
fsim_test_remove_tree(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;

    if (d == NULL)
        return;
    while ((name = g_dir_read_name(d)) != NULL) {
        g_autofree char *path = g_build_filename(dir, name, NULL);

        if (g_file_test(path, G_FILE_TEST_IS_DIR) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK))
            fsim_test_remove_tree(path);
        else
            g_assert_cmpint(g_unlink(path), ==, 0);
    }
    g_assert_cmpint(g_rmdir(dir), ==, 0);
}

char *
fsim_test_trace_path(const char *name)
{
    return g_test_build_filename(G_TEST_DIST, "data", "traces", name, NULL);
}

FsimTrace *
fsim_test_open_trace(const char *name)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = fsim_test_trace_path(name);
    FsimTrace *trace = fsim_trace_open(path, &error);

    g_assert_no_error(error);
    return trace;
}

const char *
fsim_test_shared_dir(void)
{
    const char *dir = g_getenv("FRAGSIM_SHARED_TRACES");

    if (dir == NULL || *dir == '\0') {
        g_test_skip("FRAGSIM_SHARED_TRACES is not set");
        return NULL;
    }
    return dir;
}

char *
fsim_test_shared_trace(const char *name)
{
    const char *dir = fsim_test_shared_dir();
    char *path;

    if (dir == NULL)
        return NULL;
    path = g_build_filename(dir, name, NULL);
    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
        g_error("FRAGSIM_SHARED_TRACES is set but %s is missing", path);
    return path;
}

static int
compare_paths(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

GPtrArray *
fsim_test_shared_snapshots(void)
{
    const char *dir = fsim_test_shared_dir();
    g_autoptr(GDir) listing = NULL;
    GPtrArray *paths;
    const char *name;

    if (dir == NULL)
        return NULL;
    listing = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(listing);
    paths = g_ptr_array_new_with_free_func(g_free);
    while ((name = g_dir_read_name(listing)) != NULL) {
        if (g_str_has_suffix(name, ".pickle") || g_str_has_suffix(name, ".pkl"))
            g_ptr_array_add(paths, g_build_filename(dir, name, NULL));
    }
    g_ptr_array_sort(paths, compare_paths);
    return paths;
}

char *
fsim_test_sql_text(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    char *result = NULL;

    g_assert_cmpint(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_busy_timeout(db, 10000), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), ==, SQLITE_OK);
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != NULL)
        result = g_strdup((const char *)sqlite3_column_text(stmt, 0));
    g_assert_cmpint(sqlite3_finalize(stmt), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_close(db), ==, SQLITE_OK);
    return result;
}

int64_t
fsim_test_sql_int(const char *path, const char *sql)
{
    g_autofree char *text = fsim_test_sql_text(path, sql);

    g_assert_nonnull(text);
    return g_ascii_strtoll(text, NULL, 10);
}

void
fsim_test_sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;

    g_assert_cmpint(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                    ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_busy_timeout(db, 10000), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_exec(db, sql, NULL, NULL, NULL), ==, SQLITE_OK);
    g_assert_cmpint(sqlite3_close(db), ==, SQLITE_OK);
}
