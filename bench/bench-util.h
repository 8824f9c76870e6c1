/* SPDX-License-Identifier: MIT */
/*
 * What the reader benchmarks (bench-pickle, bench-read) share: the command line
 * `[--runs N] [--no-python] FILE...`, and CPython's time on the same file for comparison.
 */
#pragma once

#include <glib.h>

/* Time one file: @runs runs, the best counts; @python (nullable) is python3 to compare with.
 * Returns: %FALSE after printing why it failed. */
typedef gboolean (*BenchFileFunc)(const char *path, int runs, const char *python);

/**
 * bench_main:
 * @program: the benchmark's name, for messages.
 * @summary: the parameter string of --help, e.g. "FILE... - time the unpickler".
 * @bench_file: called for each FILE.
 *
 * Parses `[--runs N] [--no-python] FILE...`, finds python3 on PATH unless --no-python, and runs
 * @bench_file on each FILE.
 *
 * Returns: the exit status: 0, 1 when a file failed, 2 for a usage error.
 */
int bench_main(int argc, char **argv, const char *program, const char *summary,
               BenchFileFunc bench_file);

/**
 * bench_python_best_seconds:
 * @program: the benchmark's name, for messages.
 * @python: the python3 program.
 * @script: Python source run as `python3 -c SCRIPT FILE RUNS`; it prints its best time in
 *     seconds.
 *
 * Returns: CPython's best time in seconds, or a negative number (after a message) when it could
 * not be run.
 */
double bench_python_best_seconds(const char *program, const char *python, const char *script,
                                 const char *path, int runs);
