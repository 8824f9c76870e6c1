/* SPDX-License-Identifier: MIT */
/*
 * What the CUDA backend computes from its measurements: latency histograms with power-of-two
 * buckets (HdrHistogram's idea at its coarsest: a call's cost spans six orders of magnitude, from
 * a cached map to a cudaFree that waits for the device, so equal-width buckets would be useless)
 * and the ordinary least-squares line through (size, duration) points that calibration fits.
 * Nothing here touches a GPU.
 */
#include <glib.h>

#include <math.h>

#include "cuda-backend.h"

GQuark
fsim_cuda_error_quark(void)
{
    return g_quark_from_static_string("fsim-cuda-error-quark");
}

/* ---- latency ------------------------------------------------------------------------------- */

guint
fsim_latency_bucket(uint64_t ns)
{
    guint bucket = 0;

    /* floor(log2(ns)), with 0 and 1 in bucket 0 */
    while (ns > 1 && bucket + 1 < FSIM_LATENCY_BUCKETS) {
        ns >>= 1;
        bucket++;
    }
    return bucket;
}

uint64_t
fsim_latency_bucket_floor(guint bucket)
{
    if (bucket == 0)
        return 0;
    return (uint64_t)1 << MIN(bucket, FSIM_LATENCY_BUCKETS - 1);
}

void
fsim_latency_add(FsimLatency *latency, uint64_t ns)
{
    if (latency->count == 0 || ns < latency->min_ns)
        latency->min_ns = ns;
    if (ns > latency->max_ns)
        latency->max_ns = ns;
    latency->count++;
    latency->total_ns += ns;
    latency->buckets[fsim_latency_bucket(ns)]++;
}

void
fsim_latency_merge(FsimLatency *into, const FsimLatency *from)
{
    if (from->count == 0)
        return;
    if (into->count == 0 || from->min_ns < into->min_ns)
        into->min_ns = from->min_ns;
    if (from->max_ns > into->max_ns)
        into->max_ns = from->max_ns;
    into->count += from->count;
    into->total_ns += from->total_ns;
    for (guint i = 0; i < FSIM_LATENCY_BUCKETS; i++)
        into->buckets[i] += from->buckets[i];
}

double
fsim_latency_mean(const FsimLatency *latency)
{
    return latency->count != 0 ? (double)latency->total_ns / (double)latency->count : 0.0;
}

uint64_t
fsim_latency_quantile(const FsimLatency *latency, double q)
{
    uint64_t rank;
    uint64_t seen = 0;

    if (latency->count == 0)
        return 0;
    q = CLAMP(q, 0.0, 1.0);
    /* the rank-th smallest sample, 1-based */
    rank = (uint64_t)ceil(q * (double)latency->count);
    rank = CLAMP(rank, 1, latency->count);
    for (guint i = 0; i < FSIM_LATENCY_BUCKETS; i++) {
        seen += latency->buckets[i];
        if (seen >= rank) {
            uint64_t top = i + 1 < FSIM_LATENCY_BUCKETS ? fsim_latency_bucket_floor(i + 1) - 1
                                                        : latency->max_ns;

            return CLAMP(top, latency->min_ns, latency->max_ns);
        }
    }
    return latency->max_ns;
}

/* ---- least squares ------------------------------------------------------------------------- */

/* The mean of the @n > 0 values @v. */
static double
mean_of(const double *v, gsize n)
{
    double sum = 0.0;

    for (gsize i = 0; i < n; i++)
        sum += v[i];
    return sum / (double)n;
}

gboolean
fsim_fit_linear(const double *x, const double *y, gsize n, FsimLinearFit *out)
{
    double sxx = 0.0;
    double sxy = 0.0;
    double syy = 0.0;
    double ss_res = 0.0;

    *out = (FsimLinearFit){.r2 = 1.0, .n = n};
    if (n == 0)
        return FALSE;
    /* Centred sums: sizes in GiB and durations in ns differ by orders of magnitude, and the
     * textbook n*Σxy - ΣxΣy form loses the difference to cancellation. */
    double mean_x = mean_of(x, n);
    double mean_y = mean_of(y, n);
    for (gsize i = 0; i < n; i++) {
        double dx = x[i] - mean_x;
        double dy = y[i] - mean_y;

        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    out->base = mean_y;
    if (!(sxx > 0.0))
        return FALSE;
    out->slope = sxy / sxx;
    out->base = mean_y - out->slope * mean_x;
    for (gsize i = 0; i < n; i++) {
        double r = y[i] - (out->base + out->slope * x[i]);

        ss_res += r * r;
    }
    out->r2 = syy > 0.0 ? 1.0 - ss_res / syy : 1.0;
    return TRUE;
}
