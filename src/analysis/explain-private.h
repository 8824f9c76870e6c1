/* SPDX-License-Identifier: MIT */
/*
 * explain's parts: the sites of live allocations (explain-sites.c), the state at one moment
 * (explain-state.c), the replays (explain.c), the outputs (explain-output.c, explain-plot.c).
 */
#pragma once

#include <glib.h>

#include "fragsim/engine.h"
#include "fragsim/explain.h"
#include "fragsim/trace.h"

G_BEGIN_DECLS

/* Where each live allocation was made: its stack and the mark before it. */
typedef struct ExplainSites ExplainSites;

ExplainSites *explain_sites_new(const FsimTrace *trace, uint32_t device);
void explain_sites_free(ExplainSites *sites);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExplainSites, explain_sites_free)
/* Add the observer that records sites to @engine (before its first event). */
void explain_sites_attach(ExplainSites *sites, FsimEngine *engine);
/* The site of live allocation @id of @size bytes on @stream (caller frees). */
char *explain_sites_name(const ExplainSites *sites, uint64_t id, uint64_t size, uint64_t stream);

/* The request of an OOM moment, before the free blocks are classified. */
typedef struct {
    uint64_t size;
    uint64_t stream;
    gboolean simulated;
    gboolean recorded;
} ExplainRequest;

/**
 * explain_capture:
 * @sites: (nullable): for naming pins; NULL: breakdown only (no pins, no blocks kept).
 * @request: (nullable): the request of an OOM moment.
 *
 * The state of @engine now.  FALSE with FSIM_ERROR_FAILED when the breakdown does not add up to
 * the reserved bytes (the policy's describe() disagrees with the device or the live table).
 */
FsimMoment *explain_capture(const FsimEngine *engine, const ExplainSites *sites,
                            const ExplainRequest *request, GError **error);

/* Only the breakdown (for --paranoid after every event, and alternatives). */
gboolean explain_breakdown(const FsimEngine *engine, FsimBreakdown *out, uint64_t *largest_free,
                           GError **error);

/* One run: the policy, its settings, the device, the trace device. */
typedef struct {
    char *policy;
    char *conf;       /* canonical PYTORCH_CUDA_ALLOC_CONF */
    GKeyFile *config; /* the knobs */
    FsimDeviceSpec device;
    uint32_t trace_device;
} ExplainRun;

void explain_run_free(ExplainRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExplainRun, explain_run_free)
/* The run of @policy with @alloc_conf on @base's device and trace device. */
ExplainRun *explain_run_new(FsimTrace *trace, const ExplainRun *base, const char *policy,
                            const char *alloc_conf, GError **error);
FsimEngine *explain_run_engine(FsimTrace *trace, const ExplainRun *run, gboolean paranoid,
                               GError **error);
/* Feed every event of the run's trace device to @engine, as replay does, and finish. */
gboolean explain_run_feed(FsimTrace *trace, const ExplainRun *run, FsimEngine *engine,
                          GError **error);

/* Fill each moment's alternatives; @ordinals: the position of each moment in the event stream. */
gboolean explain_alternatives(FsimTrace *trace, const ExplainRun *base, FsimExplanation *e,
                              const GArray *ordinals, GError **error);

void explain_moment_free(FsimMoment *moment);
void explain_alternative_free(FsimAlternative *alternative);

G_END_DECLS
