/* SPDX-License-Identifier: MIT */
/*
 * Benchmark of the safe unpickler: times fsim_pickle_load() on each file (N runs in thread CPU
 * time, input already in memory, freeing not timed) and, in the same run, CPython's pickle.load of
 * the same bytes through a restricted Unpickler (find_class raises; C accelerated _pickle), then
 * prints MB/s and the ratio.  Not a test: bench/bench-pickle.sh runs it on a real snapshot and on a
 * large synthetic one.
 *
 * usage: bench-pickle [--runs N] [--no-python] [--json] FILE...
 */
#include <glib.h>

#include <stdio.h>
#include <stdlib.h>

#include "fragsim/types.h"

#include "bench-util.h"
#include "readers/pickle.h"

static const char python_script[] =
    BENCH_PYTHON_PRELUDE "data = open(sys.argv[1], 'rb').read()\n"
                         "def work():\n"
                         "    return R(io.BytesIO(data)).load()\n" BENCH_PYTHON_LOOP;

static gboolean
bench_file(const char *path, const BenchOptions *options, BenchResult *result)
{
    g_autofree char *contents = NULL;
    g_autofree double *times = g_new(double, options->runs);
    gsize len = 0;
    g_autoptr(GError) error = NULL;
    gsize arena = 0;

    if (!g_file_get_contents(path, &contents, &len, &error)) {
        g_printerr("bench-pickle: %s\n", error->message);
        return FALSE;
    }
    result->bytes = len;
    for (int i = 0; i < options->runs; i++) {
        double t0 = bench_thread_seconds();
        FsimPickle *p = fsim_pickle_load((const guint8 *)contents, len, NULL, &error);

        times[i] = bench_thread_seconds() - t0;
        if (p == NULL) {
            g_printerr("bench-pickle: %s: %s\n", path, error->message);
            return FALSE;
        }
        result->events = fsim_pickle_nodes(fsim_pickle_root(p));
        arena = fsim_pickle_arena_bytes(p);
        fsim_pickle_free(p);
    }
    result->fragsim = bench_times(times, options->runs);
    g_printerr("%s: arena %.1f MB\n", path, (double)arena / 1e6);
    if (options->python != NULL) {
        result->python = bench_python_seconds("bench-pickle", options->python, python_script, path,
                                              options->runs);
        if (result->python.min < 0)
            return FALSE;
    }
    return TRUE;
}

int
main(int argc, char **argv)
{
    return bench_main(argc, argv, "bench-pickle", "FILE... - time the unpickler", "values",
                      bench_file);
}
