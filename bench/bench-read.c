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

/* CPython's best time in seconds, or a negative number when it could not be run. */
static double
python_best_seconds(const char *python, const char *path, int runs)
{
    g_autofree char *dash_c = g_strdup("-c");
    g_autofree char *script = g_strdup(python_script);
    g_autofree char *path_copy = g_strdup(path);
    g_autofree char *runs_text = g_strdup_printf("%d", runs);
    g_autofree char *python_copy = g_strdup(python);
    char *argv[] = {python_copy, dash_c, script, path_copy, runs_text, NULL};
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autoptr(GError) error = NULL;
    int status = 0;

    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error) ||
        !g_spawn_check_wait_status(status, &error)) {
        g_printerr("bench-read: python3 failed on %s: %s\n%s", path,
                   error != NULL ? error->message : "", err != NULL ? err : "");
        return -1;
    }
    return g_ascii_strtod(out, NULL);
}

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
    py = python_best_seconds(python, path, runs);
    if (py <= 0)
        return FALSE;
    g_print("  python3 pickle.load %8.2f ms  %8.1f MB/s  (best of %d)\n", py * 1e3, mb / py, runs);
    g_print("  ratio               %8.2fx faster than CPython\n", py / best);
    return TRUE;
}

int
main(int argc, char **argv)
{
    int runs = 5;
    gboolean no_python = FALSE;
    GOptionEntry entries[] = {
        {"runs", 'n', 0, G_OPTION_ARG_INT, &runs, "Runs per file; the best counts (5)", "N"},
        {"no-python", 0, 0, G_OPTION_ARG_NONE, &no_python, "Do not time CPython", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("FILE... - time reading PyTorch snapshots");
    g_autoptr(GError) error = NULL;
    g_autofree char *python = NULL;
    gboolean ok = TRUE;

    g_option_context_add_main_entries(context, entries, NULL);
    if (!g_option_context_parse(context, &argc, &argv, &error) || argc < 2 || runs < 1) {
        g_printerr("bench-read: %s\n", error != NULL
                                           ? error->message
                                           : "usage: bench-read [--runs N] [--no-python] FILE...");
        return 2;
    }
    python = no_python ? NULL : g_find_program_in_path("python3");
    if (!no_python && python == NULL)
        g_print("note: python3 not found, CPython not timed\n");
    for (int i = 1; i < argc; i++)
        ok = bench_file(argv[i], runs, python) && ok;
    return ok ? 0 : 1;
}
