/* SPDX-License-Identifier: MIT */
/*
 * The reader benchmarks' shared command line, timing and report (bench-util.h).
 */
#define _GNU_SOURCE 1 /* wait4() */

#include "bench-util.h"

#include <glib.h>

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

double
bench_thread_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

BenchTimes
bench_times(double *times, int n)
{
    BenchTimes t = {-1, -1};

    if (n <= 0)
        return t;
    qsort(times, (size_t)n, sizeof(double), compare_doubles);
    t.min = times[0];
    t.median = times[n / 2];
    return t;
}

BenchTimes
bench_python_seconds(const char *program, const char *python, const char *script, const char *path,
                     int runs)
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
    BenchTimes t = {-1, -1};
    char *end = NULL;
    int status = 0;

    if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error) ||
        !g_spawn_check_wait_status(status, &error)) {
        g_printerr("%s: python3 failed on %s: %s\n%s", program, path,
                   error != NULL ? error->message : "", err != NULL ? err : "");
        return t;
    }
    t.min = g_ascii_strtod(out, &end);
    t.median = g_ascii_strtod(end, NULL);
    return t;
}

BenchTimes
bench_process_seconds(const char *program, char *const *argv, int runs)
{
    g_autofree double *times = g_new(double, runs);
    posix_spawn_file_actions_t actions;
    BenchTimes failed = {-1, -1};

    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    for (int i = 0; i < runs; i++) {
        struct rusage usage;
        pid_t pid;
        int status;

        if (posix_spawn(&pid, argv[0], &actions, NULL, argv, environ) != 0 ||
            wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            g_printerr("%s: %s failed\n", program, argv[0]);
            posix_spawn_file_actions_destroy(&actions);
            return failed;
        }
        times[i] = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
                   (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
    }
    posix_spawn_file_actions_destroy(&actions);
    return bench_times(times, runs);
}

/* ---- The report ---------------------------------------------------------------------------- */

typedef struct {
    double min;
    double median;
    gboolean measured;
} Sum;

static void
sum_add(Sum *sum, BenchTimes t)
{
    if (t.min < 0)
        return;
    sum->min += t.min;
    sum->median += t.median;
    sum->measured = TRUE;
}

static void
print_times(const char *label, BenchTimes t, uint64_t bytes)
{
    if (t.min < 0)
        return;
    g_print("  %-28s %9.3f ms min %9.3f ms median  %8.1f MB/s\n", label, t.min * 1e3,
            t.median * 1e3, (double)bytes / 1e6 / t.min);
}

static void
print_ratio(const char *label, BenchTimes slow, BenchTimes fast)
{
    if (slow.min < 0 || fast.min < 0)
        return;
    g_print("  %-28s %9.2fx min     %9.2fx median\n", label, slow.min / fast.min,
            slow.median / fast.median);
}

static void
json_times(GString *out, const char *key, BenchTimes t)
{
    if (t.min < 0)
        return;
    g_string_append_printf(out, ", \"%s_seconds\": %.9g, \"%s_median\": %.9g", key, t.min, key,
                           t.median);
}

static void
report_text(const char *const *files, const BenchResult *results, int n, const char *what)
{
    Sum fragsim = {0}, python = {0}, process = {0};
    uint64_t bytes = 0;

    for (int i = 0; i < n; i++) {
        const BenchResult *r = &results[i];
        g_autofree char *base = g_path_get_basename(files[i]);

        g_print("%s: %.2f MB, %" G_GUINT64_FORMAT " %s\n", base, (double)r->bytes / 1e6, r->events,
                what);
        print_times("fragsim (in process)", r->fragsim, r->bytes);
        print_times("CPython pickle.load", r->python, r->bytes);
        print_times("fragsim info (process)", r->process, r->bytes);
        print_ratio("ratio: pickle.load / fragsim", r->python, r->fragsim);
        print_ratio("ratio: pickle.load / info", r->python, r->process);
        sum_add(&fragsim, r->fragsim);
        sum_add(&python, r->python);
        sum_add(&process, r->process);
        bytes += r->bytes;
    }
    if (n < 2)
        return;
    g_print("aggregate over %d files, %.2f MB (sums of the minimums, of the medians):\n", n,
            (double)bytes / 1e6);
    BenchTimes f = {fragsim.min, fragsim.median}, p = {python.min, python.median};
    BenchTimes q = {process.min, process.median};
    if (!fragsim.measured)
        f.min = -1;
    if (!python.measured)
        p.min = -1;
    if (!process.measured)
        q.min = -1;
    print_times("fragsim (in process)", f, bytes);
    print_times("CPython pickle.load", p, bytes);
    print_times("fragsim info (process)", q, bytes);
    print_ratio("ratio: pickle.load / fragsim", p, f);
    print_ratio("ratio: pickle.load / info", p, q);
}

static void
report_json(const char *const *files, const BenchResult *results, int n, const char *what)
{
    g_autoptr(GString) out = g_string_new("{\"files\": [");
    Sum fragsim = {0}, python = {0}, process = {0};
    uint64_t bytes = 0;

    for (int i = 0; i < n; i++) {
        const BenchResult *r = &results[i];
        g_autofree char *base = g_path_get_basename(files[i]);
        g_autofree char *escaped = g_strescape(base, NULL);

        g_string_append_printf(out,
                               "%s\n  {\"file\": \"%s\", \"bytes\": %" G_GUINT64_FORMAT
                               ", \"%s\": %" G_GUINT64_FORMAT,
                               i > 0 ? "," : "", escaped, r->bytes, what, r->events);
        json_times(out, "fragsim", r->fragsim);
        json_times(out, "pickle", r->python);
        json_times(out, "info_process", r->process);
        g_string_append(out, "}");
        sum_add(&fragsim, r->fragsim);
        sum_add(&python, r->python);
        sum_add(&process, r->process);
        bytes += r->bytes;
    }
    g_string_append_printf(out, "],\n \"aggregate\": {\"files\": %d, \"bytes\": %" G_GUINT64_FORMAT,
                           n, bytes);
    if (fragsim.measured)
        json_times(out, "fragsim", (BenchTimes){fragsim.min, fragsim.median});
    if (python.measured)
        json_times(out, "pickle", (BenchTimes){python.min, python.median});
    if (process.measured)
        json_times(out, "info_process", (BenchTimes){process.min, process.median});
    g_string_append(out, "}}\n");
    fputs(out->str, stdout);
}

int
bench_main(int argc, char **argv, const char *program, const char *summary, const char *what,
           BenchFileFunc bench_file)
{
    BenchOptions options = {.runs = 5};
    gboolean no_python = FALSE;
    gboolean json = FALSE;
    g_autofree char *fragsim = NULL;
    GOptionEntry entries[] = {
        {"runs", 'n', 0, G_OPTION_ARG_INT, &options.runs, "Runs per file (5)", "N"},
        {"no-python", 0, 0, G_OPTION_ARG_NONE, &no_python, "Do not time CPython", NULL},
        {"fragsim", 0, 0, G_OPTION_ARG_FILENAME, &fragsim,
         "Also time whole `PROGRAM info FILE` processes", "PROGRAM"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print the figures as JSON", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) context = g_option_context_new(summary);
    g_autoptr(GError) error = NULL;
    g_autofree char *python = NULL;
    g_autofree BenchResult *results = NULL;
    gboolean ok = TRUE;

    g_option_context_add_main_entries(context, entries, NULL);
    if (!g_option_context_parse(context, &argc, &argv, &error) || argc < 2 || options.runs < 1) {
        if (error != NULL)
            g_printerr("%s: %s\n", program, error->message);
        else
            g_printerr("%s: usage: %s [--runs N] [--no-python] [--fragsim PROGRAM] [--json] "
                       "FILE...\n",
                       program, program);
        return 2;
    }
    python = no_python ? NULL : g_find_program_in_path("python3");
    if (!no_python && python == NULL)
        g_printerr("note: python3 not found, CPython not timed\n");
    options.python = python;
    options.fragsim = fragsim;
    results = g_new(BenchResult, argc - 1);
    for (int i = 1; i < argc; i++) {
        BenchResult *r = &results[i - 1];

        *r = (BenchResult){.fragsim = {-1, -1}, .python = {-1, -1}, .process = {-1, -1}};
        ok = bench_file(argv[i], &options, r) && ok;
    }
    if (!ok)
        return 1;
    if (json)
        report_json((const char *const *)argv + 1, results, argc - 1, what);
    else
        report_text((const char *const *)argv + 1, results, argc - 1, what);
    return 0;
}
