/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the metrics of a run.
 *
 * Fragmentation has several incompatible definitions in the field; fragsim computes each under its
 * own fixed name rather than choosing.  The names are a contract: they are the JSON keys of
 * `replay --json`, the columns of the `run_metrics` table and the labels of plots.  The list is
 * defined once, as the X-macro FSIM_METRICS, which generates the struct, the JSON writer and the
 * SQL column list; docs/metrics.md explains each.
 *
 * One table, FSIM_METRICS with each metric's unit, label and direction (fsim_metrics_list()),
 * gives the JSON keys, the database columns and the labels of tables and plots.
 *
 * "At peak" means at the moment, among those where reserved memory equals its overall peak, when
 * allocated memory was highest (the tightest moment of the run; the first such moment on ties).
 */
#pragma once

#include <glib.h>

#include "fragsim/types.h"

G_BEGIN_DECLS

/* Kinds: U = uint64_t, F = double, I = int64_t where -1 means "none" (JSON null, SQL NULL). */
/* clang-format off */
#define FSIM_METRICS(X)                                                                           \
    X(needed_bytes, I, "least capacity on which the run, and on every larger one, has no OOM")  \
    X(peak_requested_bytes, U, "max over time of live requested bytes")                         \
    X(peak_allocated_bytes, U, "max of live block bytes after the policy's rounding")          \
    X(peak_reserved_bytes, U, "max of device memory held by the policy")                       \
    X(lower_bound_bytes, U, "= peak_requested_bytes: no allocator can do better")              \
    X(excess_over_lower_bound_bytes, U, "peak_reserved - lower_bound")                        \
    X(peak_utilization, F, "requested / reserved at peak")                                     \
    X(external_frag_at_peak, F, "1 - largest_free / total_free at peak")                      \
    X(internal_frag_bytes_at_peak, U, "allocated - requested at peak: rounding inside blocks") \
    X(external_frag_bytes_at_peak, U, "reserved - allocated at peak: free bytes cached")      \
    X(min_utilization, F, "min of requested / reserved while requested >= half its peak")   \
    X(ooms, U, "simulated out-of-memory failures")                                            \
    X(first_oom_event, I, "trace index of the first OOM, or null")                            \
    X(recorded_ooms, U, "requests the recording allocator failed (replayed, then freed)")     \
    X(recorded_ooms_reproduced, U, "of those, the ones this policy failed too")               \
    X(device_mallocs, U, "cudaMalloc calls")                                                  \
    X(device_frees, U, "cudaFree calls")                                                      \
    X(device_maps, U, "map calls (cuMemCreate + cuMemMap)")                                   \
    X(device_unmaps, U, "unmap calls (cuMemUnmap + cuMemRelease)")                            \
    X(modelled_alloc_time_ns, U, "time the device cost model charges for those calls")        \
    X(unmatched_frees, U, "frees of ids never allocated (trace started late)")               \
    X(double_frees, U, "frees of ids already freed")                                          \
    X(events, U, "input events processed")                                                    \
    X(allocs, U, "allocation events")                                                         \
    X(frees, U, "free events")                                                                \
    X(wall_seconds, F, "the simulator's own run time (never in golden files)")                \
    X(events_per_second, F, "the simulator's own speed")
/* clang-format on */

#define FSIM_METRIC_TYPE_U uint64_t
#define FSIM_METRIC_TYPE_F double
#define FSIM_METRIC_TYPE_I int64_t

typedef struct {
#define FSIM_METRIC_FIELD(name, kind, doc) FSIM_METRIC_TYPE_##kind name;
    FSIM_METRICS(FSIM_METRIC_FIELD)
#undef FSIM_METRIC_FIELD
} FsimMetrics;

/**
 * FsimMetricKind:
 *
 * The storage kind of a metric, for code that walks them generically.
 */
typedef enum {
    FSIM_METRIC_U64,
    FSIM_METRIC_DOUBLE,
    FSIM_METRIC_OPTIONAL_I64,
} FsimMetricKind;

/**
 * FsimMetricInfo:
 * @name: the metric's name: JSON key, database column.
 * @summary: its definition, in one line.
 * @kind: how it is stored.
 * @offset: in #FsimMetrics.
 * @unit: `bytes`, `ratio` (0 to 1), `count`, `index`, `ns`, `s` or `1/s`; docs/metrics.md
 *     gives the same.
 * @label: the short name table headers, plot labels and reports show (`peak reserved`).
 * @direction: which way is better: -1 lower, 1 higher, 0 neither.
 */
typedef struct {
    const char *name;
    const char *summary;
    FsimMetricKind kind;
    size_t offset;
    const char *unit;
    const char *label;
    int direction;
} FsimMetricInfo;

/* Returns: (nullable) (transfer none): the metric named @name. */
const FsimMetricInfo *fsim_metric_lookup(const char *name);

/* Returns: (transfer none): the label of the metric @name (which must exist). */
const char *fsim_metric_label(const char *name);

/**
 * fsim_metrics_list:
 * @n: (out): number of metrics.
 *
 * Returns: (transfer none): every metric in FSIM_METRICS order.
 */
const FsimMetricInfo *fsim_metrics_list(gsize *n);

/* Whether a metric depends on the machine (wall time) and so never enters golden files. */
gboolean fsim_metric_is_wall_clock(const FsimMetricInfo *info);

/**
 * fsim_run_label:
 * @policy: the policy name.
 * @config: (nullable): the run's canonical PYTORCH_CUDA_ALLOC_CONF; NULL or "" = the default.
 *
 * Returns: (transfer full): how tables, JSON, the database, legends and reports name the run:
 *     the policy, then the config after a space when there is one (`caching
 * max_split_size_mb:128`).
 */
char *fsim_run_label(const char *policy, const char *config);

/* Read a metric as a double (U64 and I64 converted; an absent optional gives -1). */
double fsim_metric_get_double(const FsimMetrics *metrics, const FsimMetricInfo *info);

G_END_DECLS
