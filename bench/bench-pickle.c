/* SPDX-License-Identifier: MIT */
/*
 * Benchmark of the safe unpickler: times fsim_pickle_load() on each file (best of N runs, input
 * already in memory, freeing not timed) and, in the same run, CPython's pickle.load of the same
 * bytes through a restricted Unpickler (find_class raises; C accelerated _pickle), then prints
 * MB/s and the ratio.  Not a test: bench/bench-pickle.sh runs it on a real snapshot and on a
 * large synthetic one.
 *
 * usage: bench-pickle [--runs N] [--no-python] FILE...
 */
#include <glib.h>

#include <stdio.h>
#include <stdlib.h>

#include "fragsim/types.h"

#include "bench-util.h"
#include "readers/pickle.h"

static const char python_script[] =
    "import io, pickle, sys, time\n"
    "class R(pickle.Unpickler):\n"
    "    def find_class(self, module, name):\n"
    "        raise pickle.UnpicklingError('global ' + module + '.' + name)\n"
    "data = open(sys.argv[1], 'rb').read()\n"
    "best = float('inf')\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    f = io.BytesIO(data)\n"
    "    t0 = time.perf_counter()\n"
    "    v = R(f).load()\n"
    "    best = min(best, time.perf_counter() - t0)\n"
    "    del v\n"
    "print(repr(best))\n";

static gboolean
bench_file(const char *path, int runs, const char *python)
{
    g_autofree char *contents = NULL;
    gsize len = 0;
    g_autoptr(GError) error = NULL;
    if (!g_file_get_contents(path, &contents, &len, &error)) {
        g_printerr("bench-pickle: %s\n", error->message);
        return FALSE;
    }
    double best = G_MAXDOUBLE;
    uint64_t nodes = 0;
    gsize arena = 0;
    for (int i = 0; i < runs; i++) {
        gint64 t0 = g_get_monotonic_time();
        FsimPickle *p = fsim_pickle_load((const guint8 *)contents, len, NULL, &error);
        gint64 t1 = g_get_monotonic_time();
        if (p == NULL) {
            g_printerr("bench-pickle: %s: %s\n", path, error->message);
            return FALSE;
        }
        nodes = fsim_pickle_nodes(fsim_pickle_root(p));
        arena = fsim_pickle_arena_bytes(p);
        fsim_pickle_free(p);
        best = MIN(best, (double)(t1 - t0) / 1e6);
    }
    double mb = (double)len / 1e6;
    g_autofree char *base = g_path_get_basename(path);
    g_print("%s: %.1f MB, %" G_GUINT64_FORMAT " values in a full walk, arena %.1f MB\n", base, mb,
            nodes, (double)arena / 1e6);
    g_print("  fsim_pickle_load  %8.2f ms  %8.1f MB/s  (best of %d)\n", best * 1e3, mb / best,
            runs);
    if (python == NULL)
        return TRUE;
    double py = bench_python_best_seconds("bench-pickle", python, python_script, path, runs);
    if (py <= 0)
        return FALSE;
    g_print("  python3 pickle    %8.2f ms  %8.1f MB/s  (best of %d)\n", py * 1e3, mb / py, runs);
    g_print("  ratio             %8.1fx faster than CPython\n", py / best);
    return TRUE;
}

int
main(int argc, char **argv)
{
    return bench_main(argc, argv, "bench-pickle", "FILE... - time the unpickler", bench_file);
}
