/* SPDX-License-Identifier: MIT */
/*
 * The trace fuzzer's checks (tests/fuzz/fuzz-trace-check.c) over its seed corpus
 * (tests/fuzz/corpus-trace/) and over every input that once broke a reader
 * (tests/fuzz/regressions-trace/), through both policies, so that builds without libFuzzer
 * still replay them.  One test case per file: /fuzz-regressions/<directory>/<file>.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/fragsim.h"

#include "fuzz/fuzz-trace-check.h"

static void
test_file(gconstpointer data)
{
    const char *path = data;
    FuzzTraceOptions options = {.policies = FUZZ_TRACE_BESTFIT | FUZZ_TRACE_DIRECT};
    FuzzTraceResult result;
    g_autoptr(GError) error = NULL;

    fuzz_trace_check(path, &options, &result, &error);
    g_assert_no_error(error);
    if (!result.opened) {
        g_test_message("%s: refused at open", path);
        return;
    }
    g_test_message("%s: %s, %s, %" G_GUINT64_FORMAT " devices, %" G_GUINT64_FORMAT
                   " events, %" G_GUINT64_FORMAT " engine runs",
                   path, result.format,
                   result.complete ? "read to the end" : "refused while streaming", result.devices,
                   result.events, result.engine_runs);
}

static int
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Registers one case per file of tests/fuzz/@dir; returns how many. */
static guint
add_directory(const char *dir, GPtrArray *paths)
{
    g_autofree char *path = g_test_build_filename(G_TEST_DIST, "fuzz", dir, NULL);
    g_autoptr(GDir) handle = g_dir_open(path, 0, NULL);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *name;

    if (handle == NULL)
        return 0;
    while ((name = g_dir_read_name(handle)) != NULL)
        g_ptr_array_add(names, g_strdup(name));
    g_ptr_array_sort(names, compare_names);
    for (guint i = 0; i < names->len; i++) {
        const char *file = names->pdata[i];
        char *test_path = g_strdup_printf("/fuzz-regressions/%s/%s", dir, file);
        char *file_path = g_build_filename(path, file, NULL);

        /* Test paths are split at '/'; corpus file names never contain one. */
        g_test_add_data_func(test_path, file_path, test_file);
        g_ptr_array_add(paths, file_path);
        g_free(test_path);
    }
    return names->len;
}

int
main(int argc, char **argv)
{
    g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
    int status;

    g_test_init(&argc, &argv, NULL);
    if (add_directory("corpus-trace", paths) == 0)
        g_error("no seed corpus in tests/fuzz/corpus-trace");
    add_directory("regressions-trace", paths);
    status = g_test_run();
    return status;
}
