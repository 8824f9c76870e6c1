/* SPDX-License-Identifier: MIT */
/*
 * The checks of fuzz-trace, shared with tests/test-fuzz-regressions.c so that the seed corpus and
 * every input that once crashed are replayed by every build, not only by fuzzing runs.
 *
 * fuzz_trace_check() opens a file with fsim_trace_open(), describes it, then streams every
 * device through real engines, and checks what the readers promise (include/fragsim/trace.h,
 * event.h, state.h).  A file that a reader refuses is fine as long as the error keeps the
 * contract; only a broken promise is a failure.
 */
#pragma once

#include <glib.h>

#include <stdint.h>

G_BEGIN_DECLS

/* The policies the events are replayed through. */
enum {
    FUZZ_TRACE_BESTFIT = 1u << 0,
    FUZZ_TRACE_DIRECT = 1u << 1,
};

/**
 * FuzzTraceOptions:
 * @policies: FUZZ_TRACE_BESTFIT and/or FUZZ_TRACE_DIRECT.
 * @max_engine_events: per device and policy, the events fed to the engine (with its paranoid
 *     check after every operation, which costs as much as the live blocks); later events are
 *     still read and checked.  0 = all.
 */
typedef struct {
    guint policies;
    uint64_t max_engine_events;
} FuzzTraceOptions;

/**
 * FuzzTraceResult:
 * @format: the detected format, or "" when the file was refused at open.
 * @opened: fsim_trace_open() succeeded.
 * @complete: every stream was read to its end without an error.
 * @devices: devices of the trace.
 * @events: events read over all devices (one pass).
 * @engine_runs: engine runs (device x policy).
 */
typedef struct {
    char format[16];
    gboolean opened;
    gboolean complete;
    uint64_t devices;
    uint64_t events;
    uint64_t engine_runs;
} FuzzTraceResult;

/**
 * fuzz_trace_check:
 * @path: the file.
 * @options: what to replay.
 * @result: (out) (optional): what was seen.
 * @error: FSIM_ERROR_FAILED, `PATH: broken promise: ...`, when a check fails.
 *
 * Returns: %FALSE when a promise of the readers or of the engine was broken.
 */
gboolean fuzz_trace_check(const char *path, const FuzzTraceOptions *options,
                          FuzzTraceResult *result, GError **error);

G_END_DECLS
