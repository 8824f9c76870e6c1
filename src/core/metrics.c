/* SPDX-License-Identifier: MIT */
/*
 * The metric table generated from FSIM_METRICS, and the event and outcome names.
 */
#include "fragsim/metrics.h"

#include <glib.h>

#include <string.h>

#include "fragsim/event.h"
#include "fragsim/state.h"

#define FSIM_METRIC_KIND_U FSIM_METRIC_U64
#define FSIM_METRIC_KIND_F FSIM_METRIC_DOUBLE
#define FSIM_METRIC_KIND_I FSIM_METRIC_OPTIONAL_I64

/* Each metric's unit, the short label tables and plots show, and which way is better (-1: lower,
 * 1: higher, 0: neither).  A metric added to FSIM_METRICS without a line here does not compile;
 * docs/metrics.md lists the same names and units (test-runs checks it). */
/* clang-format off */
#define PRESENT_needed_bytes                  "bytes", "needs", -1
#define PRESENT_peak_requested_bytes          "bytes", "peak requested", 0
#define PRESENT_peak_allocated_bytes          "bytes", "peak allocated", -1
#define PRESENT_peak_reserved_bytes           "bytes", "peak reserved", -1
#define PRESENT_lower_bound_bytes             "bytes", "lower bound", 0
#define PRESENT_excess_over_lower_bound_bytes "bytes", "excess", -1
#define PRESENT_peak_utilization              "ratio", "utilization", 1
#define PRESENT_external_frag_at_peak         "ratio", "ext. frag", -1
#define PRESENT_internal_frag_bytes_at_peak   "bytes", "int. frag bytes", -1
#define PRESENT_external_frag_bytes_at_peak   "bytes", "ext. frag bytes", -1
#define PRESENT_min_utilization               "ratio", "min utilization", 1
#define PRESENT_ooms                          "count", "OOMs", -1
#define PRESENT_first_oom_event               "index", "first OOM", 0
#define PRESENT_recorded_ooms                 "count", "recorded OOMs", 0
#define PRESENT_recorded_ooms_reproduced      "count", "OOMs reproduced", -1
#define PRESENT_device_mallocs                "count", "cudaMalloc", -1
#define PRESENT_device_frees                  "count", "cudaFree", -1
#define PRESENT_device_maps                   "count", "maps", -1
#define PRESENT_device_unmaps                 "count", "unmaps", -1
#define PRESENT_modelled_alloc_time_ns        "ns", "modelled time", -1
#define PRESENT_unmatched_frees               "count", "unmatched frees", 0
#define PRESENT_double_frees                  "count", "double frees", 0
#define PRESENT_events                        "count", "events", 0
#define PRESENT_allocs                        "count", "allocs", 0
#define PRESENT_frees                         "count", "frees", 0
#define PRESENT_wall_seconds                  "s", "wall time", -1
#define PRESENT_events_per_second             "1/s", "events/s", 1
/* clang-format on */

static const FsimMetricInfo metric_table[] = {
#define FSIM_METRIC_ENTRY(name, kind, doc) \
    {#name, doc, FSIM_METRIC_KIND_##kind, G_STRUCT_OFFSET(FsimMetrics, name), PRESENT_##name},
    FSIM_METRICS(FSIM_METRIC_ENTRY)
#undef FSIM_METRIC_ENTRY
};

const FsimMetricInfo *
fsim_metric_lookup(const char *name)
{
    for (gsize i = 0; i < G_N_ELEMENTS(metric_table); i++)
        if (strcmp(metric_table[i].name, name) == 0)
            return &metric_table[i];
    return NULL;
}

const char *
fsim_metric_label(const char *name)
{
    const FsimMetricInfo *info = fsim_metric_lookup(name);

    g_return_val_if_fail(info != NULL, name);
    return info->label;
}

const FsimMetricInfo *
fsim_metrics_list(gsize *n)
{
    *n = G_N_ELEMENTS(metric_table);
    return metric_table;
}

gboolean
fsim_metric_is_wall_clock(const FsimMetricInfo *info)
{
    return strcmp(info->name, "wall_seconds") == 0 || strcmp(info->name, "events_per_second") == 0;
}

char *
fsim_run_label(const char *policy, const char *config)
{
    if (config == NULL || *config == '\0')
        return g_strdup(policy);
    return g_strdup_printf("%s %s", policy, config);
}

double
fsim_metric_get_double(const FsimMetrics *metrics, const FsimMetricInfo *info)
{
    const char *base = (const char *)metrics + info->offset;

    switch (info->kind) {
    case FSIM_METRIC_U64: {
        uint64_t value;

        memcpy(&value, base, sizeof(value));
        return (double)value;
    }
    case FSIM_METRIC_DOUBLE: {
        double value;

        memcpy(&value, base, sizeof(value));
        return value;
    }
    case FSIM_METRIC_OPTIONAL_I64:
    default: {
        int64_t value;

        memcpy(&value, base, sizeof(value));
        return (double)value;
    }
    }
}

/* ---- events -------------------------------------------------------------------------------- */

static const char *const kind_names[FSIM_EV_KIND_COUNT] = {
    [FSIM_EV_ALLOC] = "alloc",
    [FSIM_EV_FREE] = "free",
    [FSIM_EV_FREE_COMPLETED] = "free_completed",
    [FSIM_EV_EMPTY_CACHE] = "empty_cache",
    [FSIM_EV_MARK] = "mark",
    [FSIM_EV_POOL_BEGIN] = "pool_begin",
    [FSIM_EV_POOL_END] = "pool_end",
    [FSIM_EV_POOL_RELEASE] = "pool_release",
};

const char *
fsim_event_kind_name(FsimEventKind kind)
{
    return fsim_enum_name(kind_names, FSIM_EV_KIND_COUNT, (int)kind);
}

gboolean
fsim_event_kind_from_name(const char *name, FsimEventKind *out)
{
    for (int k = 1; k < FSIM_EV_KIND_COUNT; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (FsimEventKind)k;
            return TRUE;
        }
    }
    return FALSE;
}

const char *
fsim_outcome_kind_name(FsimOutcomeKind kind)
{
    switch (kind) {
    case FSIM_OUTCOME_SEGMENT_ALLOC:
        return "segment_alloc";
    case FSIM_OUTCOME_SEGMENT_FREE:
        return "segment_free";
    case FSIM_OUTCOME_SEGMENT_MAP:
        return "segment_map";
    case FSIM_OUTCOME_SEGMENT_UNMAP:
        return "segment_unmap";
    case FSIM_OUTCOME_OOM:
        return "oom";
    default:
        return "?";
    }
}

/* ---- initial states ------------------------------------------------------------------------ */

gboolean
fsim_initial_state_check(const FsimInitialState *state, GError **error)
{
    gsize s = 0;

    for (gsize i = 0; i < state->n_segments; i++) {
        const FsimSeedSegment *seg = &state->segments[i];

        if (seg->size == 0 || seg->size > FSIM_MAX_SIZE || seg->addr + seg->size < seg->addr) {
            g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_FAILED,
                        "initial state: segment %" G_GSIZE_FORMAT " has an invalid size", i);
            return FALSE;
        }
        if (i > 0 && state->segments[i - 1].addr + state->segments[i - 1].size > seg->addr) {
            g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_FAILED,
                        "initial state: segments %" G_GSIZE_FORMAT " and %" G_GSIZE_FORMAT
                        " overlap or are not sorted by address",
                        i - 1, i);
            return FALSE;
        }
    }
    for (gsize i = 0; i < state->n_blocks; i++) {
        const FsimSeedBlock *block = &state->blocks[i];

        if (block->size == 0 || block->requested > block->size) {
            g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_FAILED,
                        "initial state: block %" G_GSIZE_FORMAT " at 0x%" G_GINT64_MODIFIER
                        "x has an invalid size",
                        i, block->addr);
            return FALSE;
        }
        if (i > 0 && state->blocks[i - 1].addr + state->blocks[i - 1].size > block->addr) {
            g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_FAILED,
                        "initial state: blocks at 0x%" G_GINT64_MODIFIER
                        "x and 0x%" G_GINT64_MODIFIER "x overlap or are not sorted",
                        state->blocks[i - 1].addr, block->addr);
            return FALSE;
        }
        while (s < state->n_segments &&
               state->segments[s].addr + state->segments[s].size <= block->addr)
            s++;
        if (s == state->n_segments || state->segments[s].addr > block->addr ||
            block->addr + block->size > state->segments[s].addr + state->segments[s].size) {
            g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_FAILED,
                        "initial state: block at 0x%" G_GINT64_MODIFIER
                        "x is not inside one segment",
                        block->addr);
            return FALSE;
        }
    }
    return TRUE;
}
