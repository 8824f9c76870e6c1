/* SPDX-License-Identifier: MIT */
/*
 * What the test binaries share (CMake links test-util.c into each): running fragsim, either the
 * real binary CTest names in FRAGSIM_BINARY or fsim_cli_main() in the test's own process; its JSON
 * output; temporary directories; the traces of tests/data and the shared real snapshots of
 * FRAGSIM_SHARED_TRACES.
 * Every helper asserts what it relies on, so a failure fails the calling test case.
 */
#pragma once

#include <glib.h>

#include <json-glib/json-glib.h>

#include "fragsim/trace.h"

G_BEGIN_DECLS

/* What one run of fragsim did: its exit status and what it wrote on stdout and stderr. */
typedef struct {
    int status;
    char *out;
    char *err;
} FsimTestRun;

void fsim_test_run_clear(FsimTestRun *run);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(FsimTestRun, fsim_test_run_clear)

/* The fragsim binary (FRAGSIM_BINARY); aborts when it is unset (the test was not run by ctest). */
const char *fsim_test_binary(void);

/* Whether FRAGSIM_BINARY is set; when it is not, the test case is marked skipped. */
gboolean fsim_test_have_binary(void);

/**
 * fsim_test_run_argv:
 * @envp: (nullable): NAME, VALUE pairs, NULL-terminated, set in fragsim's environment on top of
 *     the test's own.
 * @args: the arguments after the program name, NULL-terminated.
 *
 * Runs the fragsim binary and waits for it.  Asserts that it could be started and that it exited
 * (rather than crashed).
 *
 * Returns: what it did; clear with fsim_test_run_clear() (or declare it g_auto(FsimTestRun)).
 */
FsimTestRun fsim_test_run_argv(const char *const *envp, const char *const *args);

/* fsim_test_run_argv() without @envp, the arguments listed and NULL-terminated. */
FsimTestRun fsim_test_run(const char *first, ...) G_GNUC_NULL_TERMINATED;

/* fsim_test_run_argv() with the arguments listed and NULL-terminated. */
FsimTestRun fsim_test_run_env(const char *const *envp, const char *first,
                              ...) G_GNUC_NULL_TERMINATED;

/**
 * fsim_test_run_main:
 * @first: the first argument after the program name; the list ends with NULL.
 *
 * Runs `fragsim ARGS...` in this process through fsim_cli_main(), with what it prints through
 * g_print() and g_printerr() captured: for the commands that must see the test's own doubles
 * (the fake CUDA driver).
 *
 * Returns: what it did, as fsim_test_run_argv() returns it.
 */
FsimTestRun fsim_test_run_main(const char *first, ...) G_GNUC_NULL_TERMINATED;

/**
 * fsim_test_parse_object:
 * @parser: the parser that keeps what it parsed.
 * @text: fragsim's --json output.
 *
 * Asserts that @text is JSON with an object at its root.
 *
 * Returns: (transfer none): the root object, owned by @parser.
 */
JsonObject *fsim_test_parse_object(JsonParser *parser, const char *text);

/* Returns: how many entries of @dev's trace have the action @name (fsim_trace_describe()), 0 for
 * an action it does not list. */
uint64_t fsim_test_action_count(const FsimTraceDeviceInfo *dev, const char *name);

/* ---- files ---------------------------------------------------------------------------------- */

/* Returns: (transfer full): a new empty directory under the system's temporary directory; remove
 * it with fsim_test_remove_tree(). */
char *fsim_test_tmp_dir(void);

/* Remove @dir and everything below it, asserting that each removal succeeds; a symbolic link is
 * removed, never followed.  Nothing happens when @dir does not exist. */
void fsim_test_remove_tree(const char *dir);

/* Returns: (transfer full): the path of tests/data/traces/@name. */
char *fsim_test_trace_path(const char *name);

/* Returns: (transfer full): tests/data/traces/@name, opened (asserted). */
FsimTrace *fsim_test_open_trace(const char *name);

/* Returns: (nullable): FRAGSIM_SHARED_TRACES, the directory of the shared real snapshots; NULL,
 * with the test case marked skipped, when it is unset or empty. */
const char *fsim_test_shared_dir(void);

/* Returns: (transfer full) (nullable): @name in fsim_test_shared_dir(); NULL (skipped) as that
 * returns it.  Aborts when the directory is given but holds no @name. */
char *fsim_test_shared_trace(const char *name);

/* Returns: (transfer full) (nullable): the paths of the snapshots (`.pickle`, `.pkl`) in
 * fsim_test_shared_dir(), sorted; NULL (skipped) as that returns it. */
GPtrArray *fsim_test_shared_snapshots(void);

/* SQL on a results database through the SQLite API directly (waiting up to 10 s for a writer):
 * the first column of the first row as text (NULL: no row), as an integer, or no result. */
char *fsim_test_sql_text(const char *path, const char *sql);
int64_t fsim_test_sql_int(const char *path, const char *sql);
void fsim_test_sql_exec(const char *path, const char *sql);

G_END_DECLS
