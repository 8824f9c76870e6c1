/* SPDX-License-Identifier: MIT */
/*
 * Benchmark of the snapshot reader: times fsim_trace_open() plus streaming every event of every
 * device (what a replay reads) in process, N runs, and in the same run CPython's pickle.load of
 * the same file through a restricted Unpickler (find_class raises; the C accelerated _pickle),
 * which builds the objects and does nothing else.  Both sides read the file from the page cache
 * and are timed in thread CPU time.  With --fragsim, also the CPU time of whole `fragsim info
 * FILE` processes (start-up included), against the same in-process pickle.load.  Prints the
 * minimum and median of each, per file and in aggregate, and the ratios; --json prints them as
 * `{"files": [{"file", "bytes", "events", "fragsim_seconds", "pickle_seconds", ...}]}`.
 * Not a test: bench/bench-read.sh runs it.
 *
 * usage: bench-read [--runs N] [--no-python] [--fragsim PROGRAM] [--json] FILE...
 */
#include <glib.h>
#include <glib/gstdio.h>

#include "fragsim/fragsim.h"

#include "bench-util.h"

static const char python_script[] =
    BENCH_PYTHON_PRELUDE "def work():\n"
                         "    with open(sys.argv[1], 'rb') as f:\n"
                         "        return R(f).load()\n" BENCH_PYTHON_LOOP;

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
bench_file(const char *path, const BenchOptions *options, BenchResult *result)
{
    g_autoptr(GError) error = NULL;
    g_autofree double *times = g_new(double, options->runs);
    GStatBuf st;

    if (g_stat(path, &st) != 0) {
        g_printerr("bench-read: %s: cannot stat\n", path);
        return FALSE;
    }
    result->bytes = (uint64_t)st.st_size;
    for (int i = 0; i < options->runs; i++) {
        double t0 = bench_thread_seconds();

        if (!read_once(path, &result->events, &error)) {
            g_printerr("bench-read: %s\n", error->message);
            return FALSE;
        }
        times[i] = bench_thread_seconds() - t0;
    }
    result->fragsim = bench_times(times, options->runs);
    if (options->python != NULL) {
        result->python =
            bench_python_seconds("bench-read", options->python, python_script, path, options->runs);
        if (result->python.min < 0)
            return FALSE;
    }
    if (options->fragsim != NULL) {
        g_autofree char *program = g_strdup(options->fragsim);
        g_autofree char *info = g_strdup("info");
        g_autofree char *file = g_strdup(path);
        char *argv[] = {program, info, file, NULL};

        result->process = bench_process_seconds("bench-read", argv, options->runs);
        if (result->process.min < 0)
            return FALSE;
    }
    return TRUE;
}

int
main(int argc, char **argv)
{
    return bench_main(argc, argv, "bench-read", "FILE... - time reading PyTorch snapshots",
                      "events", bench_file);
}
