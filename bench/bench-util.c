/* SPDX-License-Identifier: MIT */
/*
 * The reader benchmarks' shared command line and CPython timing (bench-util.h).
 */
#include "bench-util.h"

#include <glib.h>

double
bench_python_best_seconds(const char *program, const char *python, const char *script,
                          const char *path, int runs)
{
    g_autofree char *dash_c = g_strdup("-c");
    g_autofree char *script_copy = g_strdup(script);
    g_autofree char *path_copy = g_strdup(path);
    g_autofree char *runs_text = g_strdup_printf("%d", runs);
    g_autofree char *python_copy = g_strdup(python);
    char *argv[] = {python_copy, dash_c, script_copy, path_copy, runs_text, NULL};
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autoptr(GError) error = NULL;
    int status = 0;

    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error) ||
        !g_spawn_check_wait_status(status, &error)) {
        g_printerr("%s: python3 failed on %s: %s\n%s", program, path,
                   error != NULL ? error->message : "", err != NULL ? err : "");
        return -1;
    }
    return g_ascii_strtod(out, NULL);
}

int
bench_main(int argc, char **argv, const char *program, const char *summary,
           BenchFileFunc bench_file)
{
    int runs = 5;
    gboolean no_python = FALSE;
    GOptionEntry entries[] = {
        {"runs", 'n', 0, G_OPTION_ARG_INT, &runs, "Runs per file; the best counts (5)", "N"},
        {"no-python", 0, 0, G_OPTION_ARG_NONE, &no_python, "Do not time CPython", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) context = g_option_context_new(summary);
    g_autoptr(GError) error = NULL;
    g_autofree char *python = NULL;
    gboolean ok = TRUE;

    g_option_context_add_main_entries(context, entries, NULL);
    if (!g_option_context_parse(context, &argc, &argv, &error) || argc < 2 || runs < 1) {
        if (error != NULL)
            g_printerr("%s: %s\n", program, error->message);
        else
            g_printerr("%s: usage: %s [--runs N] [--no-python] FILE...\n", program, program);
        return 2;
    }
    python = no_python ? NULL : g_find_program_in_path("python3");
    if (!no_python && python == NULL)
        g_print("note: python3 not found, CPython not timed\n");
    for (int i = 1; i < argc; i++)
        ok = bench_file(argv[i], runs, python) && ok;
    return ok ? 0 : 1;
}
