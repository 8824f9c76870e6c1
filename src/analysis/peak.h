/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the breakdown of reserved memory at a run's peak, for `replay --db` (table
 * `run_breakdown`, the report's "where the memory goes").
 *
 * The peak is explain's: the first event after which the policy's reserved memory is at its
 * maximum.  It is known only once the run is over, so it takes two steps, both cheap: while the
 * run replays, a watch keeps the largest reserved bytes seen after any event (one comparison per
 * event); then the decoded events are replayed again only up to the first event that reaches
 * that value, where explain's breakdown is taken once.  Replays are deterministic, so that event
 * is the same in the same state: the breakdown adds up to the reserved bytes exactly.
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

#include "analysis/needed.h"

G_BEGIN_DECLS

/* The largest reserved bytes after any event of one engine (the state at its start is compared
 * again by fsim_peak_breakdown()). */
typedef struct {
    uint64_t reserved;
} FsimPeakWatch;

/* Watch @engine (before its first event); @watch must outlive it. */
void fsim_peak_watch_attach(FsimPeakWatch *watch, FsimEngine *engine);

/**
 * fsim_peak_breakdown:
 * @log: the events the watched run was fed (marks left out: they change nothing).
 * @config: the watched run's configuration (fsim_engine_config()).
 * @peak_reserved: the watch's value.
 * @out: (out): the breakdown; @out->present is FALSE when the policy cannot describe its
 *     segments and holds free memory then (it cannot be split), or the peak was not met again.
 * @error: FSIM_ERROR_FAILED when the breakdown does not add up (a policy's describe() that
 *     disagrees with the device); a replay's error other than an OOM.
 *
 * Returns: %FALSE with @error set on failure.
 */
gboolean fsim_peak_breakdown(const FsimEventLog *log, const FsimRunConfig *config,
                             uint64_t peak_reserved, FsimStoredBreakdown *out, GError **error);

/* fsim_peak_breakdown() reading the events again from @trace's @device, as `replay` feeds them
 * (@inferred_releases as there): for runs without a decoded log (`replay --no-needed`). */
gboolean fsim_peak_breakdown_trace(FsimTrace *trace, uint32_t device, gboolean inferred_releases,
                                   const FsimRunConfig *config, uint64_t peak_reserved,
                                   FsimStoredBreakdown *out, GError **error);

G_END_DECLS
