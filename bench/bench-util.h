/* SPDX-License-Identifier: MIT */
/*
 * What the reader benchmarks (bench-pickle, bench-read) share: the command line
 * `[--runs N] [--no-python] [--fragsim PROGRAM] [--json] FILE...`, CPU-time measurement, CPython's
 * time on the same file, and the report (text or JSON, per file and in aggregate).
 *
 * Times are CPU times, never wall-clock times: the benchmark thread's for code run in process
 * (CLOCK_THREAD_CPUTIME_ID; CPython's time.thread_time()), the child's user + system time for a
 * whole process.  On a machine shared with other work, wall-clock time measures the scheduler.
 */
#pragma once

#include <glib.h>

#include <stdint.h>

typedef struct {
    int runs;
    const char *python;  /* (nullable) python3, to time CPython */
    const char *fragsim; /* (nullable) the fragsim program, to time a whole `fragsim info` */
} BenchOptions;

/* The minimum and the median of several runs, in seconds; negative when not measured. */
typedef struct {
    double min;
    double median;
} BenchTimes;

/* One file's figures. */
typedef struct {
    uint64_t bytes;
    uint64_t events;    /* what the benchmark reads out: events, or values */
    BenchTimes fragsim; /* in process */
    BenchTimes python;  /* CPython's pickle.load, in process */
    BenchTimes process; /* a whole `fragsim info FILE` process */
} BenchResult;

/* Time one file into @result (its times start unmeasured).  Returns: %FALSE after printing why it
 * failed. */
typedef gboolean (*BenchFileFunc)(const char *path, const BenchOptions *options,
                                  BenchResult *result);

/**
 * bench_main:
 * @program: the benchmark's name, for messages.
 * @summary: the parameter string of --help, e.g. "FILE... - time the unpickler".
 * @what: what BenchResult.events counts ("events", "values").
 * @bench_file: called for each FILE.
 *
 * Parses the command line, finds python3 on PATH unless --no-python, runs @bench_file on each
 * FILE and prints each file's figures and the aggregate (the sums of the minimums and of the
 * medians, and their ratios), as text or, with --json, as
 * `{"files": [{"file", "bytes", WHAT, "fragsim_seconds", "pickle_seconds", ...}], "aggregate"}`
 * (the `_seconds` keys are minimums; `_median` keys beside them).
 *
 * Returns: the exit status: 0, 1 when a file failed, 2 for a usage error.
 */
int bench_main(int argc, char **argv, const char *program, const char *summary, const char *what,
               BenchFileFunc bench_file);

/* The calling thread's CPU time, in seconds. */
double bench_thread_seconds(void);

/* The minimum and median of @n times (sorted in place). */
BenchTimes bench_times(double *times, int n);

/**
 * bench_python_seconds:
 * @program: the benchmark's name, for messages.
 * @python: the python3 program.
 * @script: Python source run as `python3 -c SCRIPT FILE RUNS`; it prints the minimum and the
 *     median of its times in seconds, on one line.
 *
 * Returns: CPython's times; negative (after a message) when it could not be run.
 */
BenchTimes bench_python_seconds(const char *program, const char *python, const char *script,
                                const char *path, int runs);

/**
 * bench_process_seconds:
 * @argv: a command line, run @runs times with its output discarded.
 *
 * Returns: the CPU times (user + system) of the whole processes; negative (after a message)
 * when one failed.
 */
BenchTimes bench_process_seconds(const char *program, char *const *argv, int runs);

/* The Python helper the scripts share: a restricted Unpickler (find_class raises; the C
 * accelerated _pickle) and the loop that prints the minimum and median thread time of
 * `work()` over RUNS runs. */
#define BENCH_PYTHON_PRELUDE                    \
    "import io, pickle, sys, time\n"            \
    "class R(pickle.Unpickler):\n"              \
    "    def find_class(self, module, name):\n" \
    "        raise pickle.UnpicklingError('global ' + module + '.' + name)\n"
#define BENCH_PYTHON_LOOP                         \
    "times = []\n"                                \
    "for _ in range(int(sys.argv[2])):\n"         \
    "    t0 = time.thread_time()\n"               \
    "    v = work()\n"                            \
    "    times.append(time.thread_time() - t0)\n" \
    "    del v\n"                                 \
    "times.sort()\n"                              \
    "print(repr(times[0]), repr(times[len(times) // 2]))\n"
