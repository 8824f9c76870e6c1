/* SPDX-License-Identifier: MIT */
/*
 * fragsim: `tune`, the PYTORCH_CUDA_ALLOC_CONF on which a job needs the least device capacity.
 *
 * A job is one or more ranks (a distributed job's snapshots, or the devices of one multi-device
 * snapshot); each rank is one device's decoded events (#FsimEventLog), replayed any number of
 * times.  A setting's figure is the job's needed capacity: the largest needed_bytes of its ranks
 * (src/analysis/needed.c, the same search `fit` and `replay` make, so `fit -p caching -c CONFIG`
 * reports the same figure for each rank), since the job fits only if every rank fits.
 *
 * The search (docs/tune.md): candidate values for each knob are drawn from the ranks' own request
 * sizes (tune-candidates.c): max_split_size_mb thresholds between the observed size classes,
 * max_non_split_rounding_mb steps between neighbouring classes, roundup_power2_divisions values
 * (for every size and for the busiest size intervals) that change how an observed size is
 * rounded, garbage_collection_threshold with the memory fraction it needs, expandable segments.
 * Each value is tried alone, the best values of every knob together, then coordinate descent from
 * the best setting so far changes one knob at a time while that lowers the figure, so that values
 * that help alone but hurt together are never kept together.  A setting is first screened with
 * one replay per rank on the best figure so far plus one granule: one that runs out of memory
 * there cannot win and is not searched further.  Settings are compared by needed capacity, then
 * by the modelled cost on the chosen device (the time the cost model charges for driver calls,
 * which includes the synchronising frees of release-and-retry and garbage collection), then by
 * their text.  Everything is deterministic; a time budget stops the search early.
 */
#pragma once

#include <glib.h>

#include "fragsim/alloc-conf.h"
#include "fragsim/fragsim.h"

#include "analysis/needed.h"

G_BEGIN_DECLS

/**
 * FsimTuneRank:
 * @trace: the trace file, as the user named it.
 * @trace_device: the device of the trace this rank is.
 * @log: its events (borrowed).
 * @initial_state: (nullable): the allocator state at trace start (borrowed).
 */
typedef struct {
    const char *trace;
    uint32_t trace_device;
    const FsimEventLog *log;
    const FsimInitialState *initial_state;
} FsimTuneRank;

/**
 * FsimTuneOptions:
 * @device: the chosen device: its granularity and costs for every search, its capacity for the
 *     modelled cost.
 * @platform: the platform of the PyTorch model (torch_npu's pads requests).
 * @budget_seconds: stop searching after this long (the default is always evaluated); 0 = none.
 * @recorded: (nullable): the settings the trace was recorded with (a canonical alloc conf), tried
 *     too and a starting point of the descent.
 * @progress: (nullable): called after each evaluated setting with the number evaluated so far.
 */
typedef struct {
    FsimDeviceSpec device;
    FsimPlatform platform;
    double budget_seconds;
    const char *recorded;
    void (*progress)(gpointer data, guint evaluated);
    gpointer progress_data;
} FsimTuneOptions;

/**
 * FsimTuneRankResult:
 * @needed_bytes: the rank's needed capacity under the setting.
 * @metrics: the metrics of its replay at @needed_bytes.
 * @cost: the metrics of its replay on the chosen device (at @needed_bytes when it does not fit
 *     the chosen device).
 * @proven: every capacity from @needed_bytes up was proven to fit (#FsimNeededResult).
 * @replays: replays of its search.
 */
typedef struct {
    uint64_t needed_bytes;
    FsimMetrics metrics;
    FsimMetrics cost;
    gboolean proven;
    uint64_t replays;
} FsimTuneRankResult;

/**
 * FsimTuneCandidate:
 * @config: the canonical alloc conf ("" = PyTorch's default).
 * @conf: the same, parsed.
 * @ranks: one result per rank.
 * @worst: the rank that needs the most (the first of equals).
 * @needed_bytes: the job's needed capacity: @ranks[@worst].needed_bytes.
 * @spread_bytes: the most any rank needs less the least.
 * @cost_ns: the largest modelled allocator time of the ranks on the chosen device.
 * @driver_calls: cudaMalloc, cudaFree, map and unmap calls of that rank.
 * @origin: how the search came to it: `default`, `recorded`, `single`, `combined`, `descent`.
 */
typedef struct {
    char *config;
    FsimAllocConf conf;
    FsimTuneRankResult *ranks;
    guint worst;
    uint64_t needed_bytes;
    uint64_t spread_bytes;
    uint64_t cost_ns;
    uint64_t driver_calls;
    const char *origin;
} FsimTuneCandidate;

/**
 * FsimTuneResult:
 * @candidates: (element-type FsimTuneCandidate): every setting searched in full, best first
 *     (needed capacity, then cost, then text); the default among them.
 * @default_candidate: PyTorch's default settings.
 * @recorded: (nullable): the recorded settings, when given and not the default.
 * @recommended: (nullable): the setting to use, or %NULL to keep the default: the cheapest of
 *     those within one granule of the least needed capacity that save more than one granule.
 * @screened_out: settings dropped after the one-replay screen (they need more than the best).
 * @failed: settings whose search failed (e.g. no capacity up to the search limit fits).
 * @budget_exhausted: the time budget ran out before the search was done.
 * @seconds: the search's wall time.
 */
typedef struct {
    GPtrArray *candidates;
    const FsimTuneCandidate *default_candidate;
    const FsimTuneCandidate *recorded;
    const FsimTuneCandidate *recommended;
    guint n_ranks;
    uint64_t granularity;
    guint screened_out;
    guint failed;
    gboolean budget_exhausted;
    double seconds;
} FsimTuneResult;

void fsim_tune_result_free(FsimTuneResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimTuneResult, fsim_tune_result_free)

/**
 * fsim_tune_knobs:
 * @config: a canonical alloc conf.
 * @platform: the PyTorch model's platform.
 *
 * Returns: (transfer full): the run key file of @config for the `caching` policy (as `fit -p
 * caching -c CONFIG` builds it), or %NULL with a usage error.
 */
GKeyFile *fsim_tune_knobs(const char *config, FsimPlatform platform, GError **error);

/**
 * fsim_tune_search:
 * @ranks: (array length=n_ranks): the job's ranks, at least one.
 * @options: the device, budget and the rest.
 * @error: the error of the default's search (the others' are counted in @failed).
 *
 * Returns: (transfer full) (nullable): the result.
 */
FsimTuneResult *fsim_tune_search(const FsimTuneRank *ranks, guint n_ranks,
                                 const FsimTuneOptions *options, GError **error);

/* Returns: (transfer full): what @conf changes from PyTorch's default, in words ("" for none). */
char *fsim_tune_describe(const FsimAllocConf *conf);

/* ---- tune-candidates.c ---------------------------------------------------------------------- */

/* The number of roundup_power2_divisions intervals tried one by one. */
#define FSIM_TUNE_INTERVALS 3

/**
 * FsimTuneValues:
 * The candidate values of each knob, drawn from the observed request sizes.
 * @max_split: max_split_size values in bytes (each a whole MiB, at least 20 MiB).
 * @max_non_split: max_non_split_rounding values in bytes (more than the default 20 MiB).
 * @divisions: scalar roundup_power2_divisions values that change the rounding of an observed size.
 * @intervals: the busiest size intervals (indices into FsimAllocConf.roundup_power2_divisions),
 *     @n_intervals of them, and @interval_divisions[i] the values worth trying for each.
 * @gc: garbage_collection_threshold values (each with per_process_memory_fraction 1).
 */
typedef struct {
    GArray *max_split;     /* uint64_t */
    GArray *max_non_split; /* uint64_t */
    GArray *divisions;     /* uint32_t */
    guint intervals[FSIM_TUNE_INTERVALS];
    guint n_intervals;
    GArray *interval_divisions[FSIM_TUNE_INTERVALS]; /* uint32_t */
    GArray *gc;                                      /* double */
} FsimTuneValues;

/* The candidate values for the ranks' requests under @platform's rounding. */
FsimTuneValues *fsim_tune_values_new(const FsimTuneRank *ranks, guint n_ranks,
                                     FsimPlatform platform);
void fsim_tune_values_free(FsimTuneValues *values);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimTuneValues, fsim_tune_values_free)

G_END_DECLS
