/* SPDX-License-Identifier: MIT */
/*
 * Benchmark of the snapshot reader: times fsim_trace_open() plus streaming every event of every
 * device (what a replay reads), best of N runs, and in the same run CPython's pickle.load of the
 * same file through a restricted Unpickler (find_class raises; the C accelerated _pickle), which
 * builds the objects and does nothing else.  Both sides read the file from the page cache.
 * Prints MB/s and the ratio.  Not a test: bench/bench-read.sh runs it.
 *
 * usage: bench-read [--runs N] [--no-python] FILE...
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <stdio.h>

#include "fragsim/fragsim.h"

#include "bench-util.h"

static const char python_script[] =
    "import pickle, sys, time\n"
    "class R(pickle.Unpickler):\n"
    "    def find_class(self, module, name):\n"
    "        raise pickle.UnpicklingError('global ' + module + '.' + name)\n"
    "best = float('inf')\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    t0 = time.perf_counter()\n"
    "    with open(sys.argv[1], 'rb') as f:\n"
    "        v = R(f).load()\n"
    "    best = min(best, time.perf_counter() - t0)\n"
    "    del v\n"
    "print(repr(best))\n";

/* Open @path and read every event of every device; the number of events in *events. */
static gboolean
read_once(const char *path, uint64_t *events, GError **error)
{
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, error);
    const uint32_t *devices;
    gsize n;

    if (trace == NULL)
        return FALSE;
    *events = 0;
    devices = fsim_trace_devices(trace, &n);
    for (gsize d = 0; d < n; d++) {
        g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, devices[d], error);
        FsimEvent ev;

        if (stream == NULL)
            return FALSE;
        while (fsim_trace_stream_next(stream, &ev, error))
            (*events)++;
        if (error != NULL && *error != NULL)
            return FALSE;
    }
    return TRUE;
}

static gboolean
bench_file(const char *path, int runs, const char *python)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *base = g_path_get_basename(path);
    double best = G_MAXDOUBLE;
    uint64_t events = 0;
    double mb;
    double py;
    GStatBuf st;

    if (g_stat(path, &st) != 0) {
        g_printerr("bench-read: %s: cannot stat\n", path);
        return FALSE;
    }
    mb = (double)st.st_size / 1e6;
    for (int i = 0; i < runs; i++) {
        gint64 t0 = g_get_monotonic_time();

        if (!read_once(path, &events, &error)) {
            g_printerr("bench-read: %s\n", error->message);
            return FALSE;
        }
        best = MIN(best, (double)(g_get_monotonic_time() - t0) / 1e6);
    }
    g_print("%s: %.1f MB, %" G_GUINT64_FORMAT " events\n", base, mb, events);
    g_print("  fragsim open+stream %8.2f ms  %8.1f MB/s  (best of %d)\n", best * 1e3, mb / best,
            runs);
    if (python == NULL)
        return TRUE;
    py = bench_python_best_seconds("bench-read", python, python_script, path, runs);
    if (py <= 0)
        return FALSE;
    g_print("  python3 pickle.load %8.2f ms  %8.1f MB/s  (best of %d)\n", py * 1e3, mb / py, runs);
    g_print("  ratio               %8.2fx faster than CPython\n", py / best);
    return TRUE;
}

int
main(int argc, char **argv)
{
    return bench_main(argc, argv, "bench-read", "FILE... - time reading PyTorch snapshots",
                      bench_file);
}
