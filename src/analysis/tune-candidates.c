/* SPDX-License-Identifier: MIT */
/*
 * The values `tune` tries for each knob, drawn from the job's own request sizes (see tune.h and
 * docs/tune.md).  Two values of a knob that would treat every observed request alike would give
 * the same run, so only values that change something for an observed size are kept, and a long
 * list is thinned to evenly spaced entries.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/owned.h"

#include "analysis/tune.h"

/* At most this many values per knob. */
#define MAX_SPLIT_VALUES     8
#define MAX_NON_SPLIT_VALUES 4

#define MIB FSIM_MiB

/* kLargeBuffer: the least value of max_split_size_mb and max_non_split_rounding_mb, in bytes. */
#define LARGE_BUFFER (20 * MIB)

static const uint32_t division_values[] = {2, 4, 8, 16};
static const double gc_values[] = {0.5, 0.7, 0.9};

typedef struct {
    GHashTable *counts; /* requested size -> number of requests */
} Collect;

static void
collect_size(uint64_t size, gpointer data)
{
    Collect *c = data;
    gpointer key = GSIZE_TO_POINTER((gsize)size);

    g_hash_table_insert(
        c->counts, key,
        GSIZE_TO_POINTER(GPOINTER_TO_SIZE(g_hash_table_lookup(c->counts, key)) + 1));
}

/* Keep at most @max values of the sorted @values, evenly spaced, the first and last among them. */
static void
thin(GArray *values, guint max)
{
    g_autoptr(GArray) kept = NULL;
    guint n = values->len;

    if (n <= max)
        return;
    kept = g_array_new(FALSE, FALSE, g_array_get_element_size(values));
    for (guint i = 0; i < max; i++) {
        guint index = (guint)((uint64_t)i * (n - 1) / (max - 1));

        g_array_append_vals(kept, values->data + (gsize)index * g_array_get_element_size(values),
                            1);
    }
    g_array_set_size(values, 0);
    g_array_append_vals(values, kept->data, kept->len);
}

static void
append_unique_u64(GArray *values, uint64_t value)
{
    for (guint i = 0; i < values->len; i++) {
        if (g_array_index(values, uint64_t, i) == value)
            return;
    }
    g_array_append_val(values, value);
}

/* max_split_size values: for each observed large block size, the least whole MiB (at least
 * @least: 20 MiB, 21 for torch_npu) above the next smaller size, so that this size and every
 * larger one are "oversize" (never split, served only by blocks at most max_non_split_rounding
 * larger) and the smaller ones are not. */
static void
values_max_split(FsimTuneValues *v, const uint64_t *rounded, guint n, uint64_t least)
{
    for (guint k = 0; k < n; k++) {
        uint64_t below = k > 0 ? (rounded[k - 1] / MIB + 1) * MIB : 0;
        uint64_t threshold = MAX(below, least);

        if (threshold <= rounded[k])
            append_unique_u64(v->max_split, threshold);
    }
    g_array_sort(v->max_split, fsim_u64_compare);
    thin(v->max_split, MAX_SPLIT_VALUES);
}

/* max_non_split_rounding values: the steps between neighbouring oversize-capable sizes, in whole
 * MiB, above the default 20 MiB: with one, a request may take a cached block of the next size. */
static void
values_max_non_split(FsimTuneValues *v, const uint64_t *rounded, guint n)
{
    for (guint k = 0; k + 1 < n; k++) {
        uint64_t step;

        if (rounded[k] < LARGE_BUFFER)
            continue;
        step = (rounded[k + 1] - rounded[k] + MIB - 1) / MIB * MIB;
        if (step > LARGE_BUFFER)
            append_unique_u64(v->max_non_split, step);
    }
    g_array_sort(v->max_non_split, fsim_u64_compare);
    thin(v->max_non_split, MAX_NON_SPLIT_VALUES);
}

/* Whether @conf rounds the sizes (of interval @interval only, or all when -1) as @other does. */
static gboolean
same_rounding(const FsimAllocConf *conf, const FsimAllocConf *other, const uint64_t *sizes,
              const int *intervals, guint n, int interval)
{
    for (guint i = 0; i < n; i++) {
        if (interval >= 0 && intervals[i] != interval)
            continue;
        if (fsim_pytorch_round_size(conf, sizes[i]) != fsim_pytorch_round_size(other, sizes[i]))
            return FALSE;
    }
    return TRUE;
}

/* The division values for interval @interval (-1: every interval) that round some observed size
 * differently from no rounding and from every value kept before. */
static GArray *
values_divisions(const uint64_t *sizes, const int *intervals, guint n, int interval,
                 FsimPlatform platform)
{
    GArray *kept = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    FsimAllocConf off;

    fsim_alloc_conf_init(&off);
    off.platform = platform;
    for (gsize d = 0; d < G_N_ELEMENTS(division_values); d++) {
        FsimAllocConf conf = off;
        gboolean distinct;

        for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++) {
            if (interval < 0 || (int)i == interval)
                conf.roundup_power2_divisions[i] = division_values[d];
        }
        distinct = !same_rounding(&conf, &off, sizes, intervals, n, interval);
        for (guint k = 0; k < kept->len && distinct; k++) {
            FsimAllocConf before = off;

            for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++) {
                if (interval < 0 || (int)i == interval)
                    before.roundup_power2_divisions[i] = g_array_index(kept, uint32_t, k);
            }
            distinct = !same_rounding(&conf, &before, sizes, intervals, n, interval);
        }
        if (distinct)
            g_array_append_val(kept, division_values[d]);
    }
    return kept;
}

/* The interval of roundup_power2_divisions that decides how @size is rounded. */
static int
size_interval(uint64_t size, FsimPlatform platform)
{
    int index;

    if (platform == FSIM_PLATFORM_NPU)
        size += FSIM_NPU_REQUEST_PAD;
    index = size == 0 ? 0 : g_bit_nth_msf(size, -1) - 20;
    return CLAMP(index, 0, FSIM_ALLOC_CONF_INTERVALS - 1);
}

/* The busiest intervals (most requests) whose rounding some division value changes. */
static void
values_intervals(FsimTuneValues *v, const uint64_t *sizes, const uint64_t *counts,
                 const int *intervals, guint n, FsimPlatform platform)
{
    uint64_t requests[FSIM_ALLOC_CONF_INTERVALS] = {0};

    for (guint i = 0; i < n; i++)
        requests[intervals[i]] += counts[i];
    while (v->n_intervals < FSIM_TUNE_INTERVALS) {
        int best = -1;

        for (int i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++) {
            if (requests[i] > 0 && (best < 0 || requests[i] > requests[best]))
                best = i;
        }
        if (best < 0)
            break;
        requests[best] = 0;
        GArray *values = values_divisions(sizes, intervals, n, best, platform);
        if (values->len == 0) {
            g_array_unref(values);
            continue;
        }
        v->intervals[v->n_intervals] = (guint)best;
        v->interval_divisions[v->n_intervals++] = values;
    }
}

FsimTuneValues *
fsim_tune_values_new(const FsimTuneRank *ranks, guint n_ranks, FsimPlatform platform)
{
    FsimTuneValues *v = g_new0(FsimTuneValues, 1);
    g_autoptr(GHashTable) counts = g_hash_table_new(g_direct_hash, g_direct_equal);
    Collect collect = {.counts = counts};
    g_autoptr(GArray) sizes = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autoptr(GArray) rounded = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autofree uint64_t *size_counts = NULL;
    g_autofree int *intervals = NULL;
    GHashTableIter iter;
    gpointer key;
    FsimAllocConf defaults;

    v->max_split = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    v->max_non_split = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    v->gc = g_array_new(FALSE, FALSE, sizeof(double));
    for (guint r = 0; r < n_ranks; r++)
        fsim_event_log_foreach_alloc(ranks[r].log, collect_size, &collect);
    g_hash_table_iter_init(&iter, counts);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        uint64_t size = (uint64_t)GPOINTER_TO_SIZE(key);

        g_array_append_val(sizes, size);
    }
    g_array_sort(sizes, fsim_u64_compare);
    size_counts = g_new0(uint64_t, MAX(sizes->len, 1));
    intervals = g_new0(int, MAX(sizes->len, 1));
    fsim_alloc_conf_init(&defaults);
    defaults.platform = platform;
    for (guint i = 0; i < sizes->len; i++) {
        uint64_t size = g_array_index(sizes, uint64_t, i);

        size_counts[i] = GPOINTER_TO_SIZE(g_hash_table_lookup(counts, GSIZE_TO_POINTER(size)));
        intervals[i] = size_interval(size, platform);
        size = fsim_pytorch_round_size(&defaults, size);
        if (size > FSIM_PYTORCH_SMALL_SIZE)
            append_unique_u64(rounded, size);
    }
    g_array_sort(rounded, fsim_u64_compare);
    values_max_split(v, (const uint64_t *)(const void *)rounded->data, rounded->len,
                     platform == FSIM_PLATFORM_NPU ? LARGE_BUFFER + MIB : LARGE_BUFFER);
    if (platform != FSIM_PLATFORM_NPU) /* torch_npu has no max_non_split_rounding_mb */
        values_max_non_split(v, (const uint64_t *)(const void *)rounded->data, rounded->len);
    v->divisions = values_divisions((const uint64_t *)(const void *)sizes->data, intervals,
                                    sizes->len, -1, platform);
    values_intervals(v, (const uint64_t *)(const void *)sizes->data, size_counts, intervals,
                     sizes->len, platform);
    if (rounded->len > 0)
        g_array_append_vals(v->gc, gc_values, G_N_ELEMENTS(gc_values));
    return v;
}

void
fsim_tune_values_free(FsimTuneValues *values)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimTuneValues, max_split, g_array_unref),
                                      FSIM_OWNED(FsimTuneValues, max_non_split, g_array_unref),
                                      FSIM_OWNED(FsimTuneValues, divisions, g_array_unref),
                                      FSIM_OWNED(FsimTuneValues, gc, g_array_unref)};

    for (guint i = 0; values != NULL && i < values->n_intervals; i++)
        g_array_unref(values->interval_divisions[i]);
    fsim_owned_free(values, owned, G_N_ELEMENTS(owned));
}
