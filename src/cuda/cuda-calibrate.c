/* SPDX-License-Identifier: MIT */
/*
 * Calibration: measure what the device model assumes, on the GPU at hand, and write it as a
 * device profile (`-d PROFILE`).
 *
 * Granularity.  The driver's minimum granularity (cuMemGetAllocationGranularity) is what mappings
 * must be multiples of; the used-memory step is what cudaMalloc really takes: a few allocations of
 * sizes around the granularity are made at once and the growth of cudaMemGetInfo's used memory is
 * recorded.  The largest power of two dividing every growth is the observed step (2 MiB on
 * current NVIDIA GPUs; small cudaMallocs share 2 MiB blocks, so their growth can be 0).
 *
 * Costs.  Each call is timed at sizes doubling from the granularity up to the largest probed size,
 * a warm-up call first and then @repeat timed calls; the median at each size is kept (a single
 * slow call, a page-table allocation say, must not tilt the line), and a least-squares line
 * through the medians gives base + per-GiB.  The device is idle meanwhile, so cudaFree's implicit
 * synchronisation costs what an idle cudaDeviceSynchronize costs; the profile carries that as
 * sync_ns and the rest as free_ns.  In a training loop a synchronisation waits for the queued
 * kernels as well, which no calibration can know: sync_ns is then a lower bound.
 */
#include <glib.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fragsim/device.h"

#include "cuda-backend.h"

/* clang-format off */
static const struct {
    const char *name; /* for messages and tables */
    const char *key;  /* for the profile's [calibration] group */
} series_names[FSIM_CUDA_SERIES_COUNT] = {
    [FSIM_CUDA_SERIES_MALLOC] = {"cudaMalloc", "malloc"},
    [FSIM_CUDA_SERIES_FREE] = {"cudaFree", "free"},
    [FSIM_CUDA_SERIES_RESERVE] = {"cuMemAddressReserve", "reserve"},
    [FSIM_CUDA_SERIES_RELEASE] = {"cuMemAddressFree", "release"},
    [FSIM_CUDA_SERIES_MAP] = {"cuMemCreate+cuMemMap+cuMemSetAccess", "map"},
    [FSIM_CUDA_SERIES_UNMAP] = {"cuMemUnmap+cuMemRelease", "unmap"},
    [FSIM_CUDA_SERIES_SYNC] = {"cudaDeviceSynchronize", "sync"},
};
/* clang-format on */

/* Allocations per used-memory probe: an odd number, so the largest power of two dividing the
 * growth is that of one allocation's step. */
#define STEP_COUNT 5

void
fsim_cuda_calibrate_options_init(FsimCudaCalibrateOptions *options)
{
    options->max_size = 4 * FSIM_GiB;
    options->repeat = 5;
}

void
fsim_cuda_calibration_clear(FsimCudaCalibration *calibration)
{
    g_clear_pointer(&calibration->steps, g_array_unref);
    for (int i = 0; i < FSIM_CUDA_SERIES_COUNT; i++) {
        g_clear_pointer(&calibration->series[i].sizes, g_array_unref);
        g_clear_pointer(&calibration->series[i].median_ns, g_array_unref);
    }
}

static int
compare_u64(gconstpointer a, gconstpointer b)
{
    return fsim_compare_u64(*(const uint64_t *)a, *(const uint64_t *)b);
}

static double
median_ns(uint64_t *samples, guint n)
{
    qsort(samples, n, sizeof(*samples), compare_u64);
    if (n % 2 == 1)
        return (double)samples[n / 2];
    return ((double)samples[n / 2 - 1] + (double)samples[n / 2]) / 2.0;
}

static void
series_add(FsimCudaSeries *series, uint64_t size, uint64_t *samples, guint n)
{
    double median = median_ns(samples, n);

    g_array_append_val(series->sizes, size);
    g_array_append_val(series->median_ns, median);
}

static void
series_fit(FsimCudaSeries *series)
{
    g_autofree double *x = g_new(double, MAX(series->sizes->len, 1));

    for (guint i = 0; i < series->sizes->len; i++)
        x[i] = (double)g_array_index(series->sizes, uint64_t, i) / (double)FSIM_GiB;
    fsim_fit_linear(x, (const double *)(const void *)series->median_ns->data, series->sizes->len,
                    &series->fit);
}

/* A lack of memory ends a series early (the larger sizes do not fit); other failures stop. */
static gboolean
calibrate_out_of_memory(GError **local_error)
{
    if (g_error_matches(*local_error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_OUT_OF_MEMORY)) {
        g_clear_error(local_error);
        return TRUE;
    }
    return FALSE;
}

static gboolean
calibrate_used(FsimCudaDriver *driver, uint64_t *used, GError **error)
{
    uint64_t free_bytes;
    uint64_t total_bytes;

    if (!driver->ops->mem_get_info(driver, &free_bytes, &total_bytes, error))
        return FALSE;
    *used = total_bytes > free_bytes ? total_bytes - free_bytes : 0;
    return TRUE;
}

/* The used-memory step of cudaMalloc at sizes around the granularity. */
static gboolean
calibrate_steps(FsimCudaDriver *driver, FsimCudaCalibration *out, GError **error)
{
    uint64_t g = driver->info.granularity;
    const uint64_t sizes[] = {g / 4, g / 2, g, g + 1, g + g / 2, 2 * g, 2 * g + 1, 5 * g};
    uint64_t all_growth = 0;

    for (gsize s = 0; s < G_N_ELEMENTS(sizes); s++) {
        FsimAddr addrs[STEP_COUNT];
        FsimCudaUsageStep step = {MAX(sizes[s], 1), 0, 0};
        uint64_t before;
        uint64_t after = 0;
        GError *local_error = NULL;
        gboolean ok = TRUE;

        if (!calibrate_used(driver, &before, error))
            return FALSE;
        for (; step.count < STEP_COUNT; step.count++) {
            if (!driver->ops->mem_alloc(driver, step.size, &addrs[step.count], &local_error)) {
                ok = FALSE;
                break;
            }
        }
        if (ok)
            ok = calibrate_used(driver, &after, &local_error);
        for (uint64_t i = 0; i < step.count; i++) {
            if (!driver->ops->mem_free(driver, addrs[i], local_error == NULL ? &local_error : NULL))
                ok = FALSE;
        }
        if (!ok) {
            if (local_error != NULL && calibrate_out_of_memory(&local_error))
                continue;
            g_propagate_error(error, local_error);
            return FALSE;
        }
        step.used_bytes = after > before ? after - before : 0;
        all_growth |= step.used_bytes;
        g_array_append_val(out->steps, step);
    }
    /* the largest power of two dividing every growth: the lowest bit set in any of them */
    out->observed_step = all_growth & (~all_growth + 1);
    return TRUE;
}

typedef enum {
    PROBE_MALLOC,
    PROBE_RESERVE,
    PROBE_MAP,
} Probe;

/* One round of a probe at @size: the durations of its two halves (allocate, give back). */
static gboolean
calibrate_probe(FsimCudaDriver *driver, Probe probe, uint64_t size, uint64_t *first_ns,
                uint64_t *second_ns, GError **error)
{
    const FsimCudaDriverOps *ops = driver->ops;
    FsimAddr addr = 0;
    uint64_t handle = 0;
    uint64_t t0;
    uint64_t t1;
    uint64_t t2;

    switch (probe) {
    case PROBE_MALLOC:
        t0 = ops->now_ns(driver);
        if (!ops->mem_alloc(driver, size, &addr, error))
            return FALSE;
        t1 = ops->now_ns(driver);
        if (!ops->mem_free(driver, addr, error))
            return FALSE;
        t2 = ops->now_ns(driver);
        break;
    case PROBE_RESERVE:
        t0 = ops->now_ns(driver);
        if (!ops->address_reserve(driver, size, driver->info.granularity, &addr, error))
            return FALSE;
        t1 = ops->now_ns(driver);
        if (!ops->address_free(driver, addr, size, error))
            return FALSE;
        t2 = ops->now_ns(driver);
        break;
    case PROBE_MAP:
    default: {
        gboolean ok;

        if (!ops->address_reserve(driver, size, driver->info.granularity, &addr, error))
            return FALSE;
        t0 = ops->now_ns(driver);
        ok = ops->create(driver, size, &handle, error);
        if (ok && !ops->map(driver, addr, size, handle, error)) {
            ops->release(driver, handle, NULL);
            ok = FALSE;
        }
        if (ok && !ops->set_access(driver, addr, size, error)) {
            ops->unmap(driver, addr, size, NULL);
            ops->release(driver, handle, NULL);
            ok = FALSE;
        }
        t1 = ops->now_ns(driver);
        if (ok && !(ops->unmap(driver, addr, size, error) && ops->release(driver, handle, error)))
            ok = FALSE;
        t2 = ops->now_ns(driver);
        if (!ops->address_free(driver, addr, size, ok ? error : NULL))
            ok = FALSE;
        if (!ok)
            return FALSE;
        break;
    }
    }
    *first_ns = t1 - t0;
    *second_ns = t2 - t1;
    return TRUE;
}

/* Time @probe at every size into the two series; a lack of memory ends them. */
static gboolean
calibrate_series(FsimCudaDriver *driver, Probe probe, const GArray *sizes, guint repeat,
                 FsimCudaSeries *first, FsimCudaSeries *second, GError **error)
{
    g_autofree uint64_t *a = g_new(uint64_t, repeat);
    g_autofree uint64_t *b = g_new(uint64_t, repeat);

    for (guint s = 0; s < sizes->len; s++) {
        uint64_t size = g_array_index(sizes, uint64_t, s);
        GError *local_error = NULL;
        uint64_t ignored_a;
        uint64_t ignored_b;
        gboolean ok;

        /* a warm-up round, then the timed ones */
        ok = calibrate_probe(driver, probe, size, &ignored_a, &ignored_b, &local_error);
        for (guint r = 0; ok && r < repeat; r++)
            ok = calibrate_probe(driver, probe, size, &a[r], &b[r], &local_error);
        if (!ok) {
            if (calibrate_out_of_memory(&local_error))
                break;
            g_prefix_error(&local_error,
                           "calibrating %s at %" G_GUINT64_FORMAT " bytes: ", first->name, size);
            g_propagate_error(error, local_error);
            return FALSE;
        }
        series_add(first, size, a, repeat);
        series_add(second, size, b, repeat);
    }
    series_fit(first);
    series_fit(second);
    return TRUE;
}

gboolean
fsim_cuda_calibrate(FsimCudaDriver *driver, const FsimCudaCalibrateOptions *options,
                    FsimCudaCalibration *out, GError **error)
{
    FsimCudaCalibrateOptions defaults;
    uint64_t g = driver->info.granularity;
    g_autoptr(GArray) sizes = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autofree uint64_t *samples = NULL;
    uint64_t total_bytes;
    uint64_t max_size;
    guint repeat;

    memset(out, 0, sizeof(*out));
    out->info = driver->info;
    out->steps = g_array_new(FALSE, FALSE, sizeof(FsimCudaUsageStep));
    for (int i = 0; i < FSIM_CUDA_SERIES_COUNT; i++) {
        out->series[i].name = series_names[i].name;
        out->series[i].sizes = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        out->series[i].median_ns = g_array_new(FALSE, FALSE, sizeof(double));
    }
    out->costs = fsim_device_costs_default();
    if (options == NULL) {
        fsim_cuda_calibrate_options_init(&defaults);
        options = &defaults;
    }
    repeat = MAX(options->repeat, 1);
    if (g == 0 || (g & (g - 1)) != 0) {
        g_set_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_FAILED,
                    "the driver reports a granularity of %" G_GUINT64_FORMAT
                    " bytes, not a power of two",
                    g);
        return FALSE;
    }
    if (!driver->ops->mem_get_info(driver, &out->free_bytes, &total_bytes, error))
        return FALSE;

    /* Sizes doubling from the granularity, up to a quarter of the free memory. */
    max_size = MIN(options->max_size, out->free_bytes / 4) / g * g;
    for (uint64_t size = g; size <= MAX(max_size, g); size *= 2)
        g_array_append_val(sizes, size);

    if (!calibrate_steps(driver, out, error))
        return FALSE;
    if (!calibrate_series(driver, PROBE_MALLOC, sizes, repeat,
                          &out->series[FSIM_CUDA_SERIES_MALLOC],
                          &out->series[FSIM_CUDA_SERIES_FREE], error))
        return FALSE;
    if (driver->info.vmm_supported) {
        if (!calibrate_series(driver, PROBE_RESERVE, sizes, repeat,
                              &out->series[FSIM_CUDA_SERIES_RESERVE],
                              &out->series[FSIM_CUDA_SERIES_RELEASE], error))
            return FALSE;
        if (!calibrate_series(driver, PROBE_MAP, sizes, repeat, &out->series[FSIM_CUDA_SERIES_MAP],
                              &out->series[FSIM_CUDA_SERIES_UNMAP], error))
            return FALSE;
    }
    samples = g_new(uint64_t, repeat);
    for (guint r = 0; r < repeat; r++) {
        uint64_t start = driver->ops->now_ns(driver);

        if (!driver->ops->synchronize(driver, error))
            return FALSE;
        samples[r] = driver->ops->now_ns(driver) - start;
    }
    series_add(&out->series[FSIM_CUDA_SERIES_SYNC], 0, samples, repeat);
    series_fit(&out->series[FSIM_CUDA_SERIES_SYNC]);
    out->costs = fsim_cuda_calibration_costs(out);
    return TRUE;
}

static uint64_t
to_ns(double value)
{
    return value > 0.0 ? (uint64_t)llround(value) : 0;
}

static double
series_mean(const FsimCudaSeries *series)
{
    double sum = 0.0;

    for (guint i = 0; i < series->median_ns->len; i++)
        sum += g_array_index(series->median_ns, double, i);
    return series->median_ns->len != 0 ? sum / series->median_ns->len : 0.0;
}

static gboolean
series_has(const FsimCudaSeries *series)
{
    return series->median_ns != NULL && series->median_ns->len != 0;
}

FsimDeviceCosts
fsim_cuda_calibration_costs(const FsimCudaCalibration *calibration)
{
    const FsimCudaSeries *s = calibration->series;
    FsimDeviceCosts costs = fsim_device_costs_default();

    if (series_has(&s[FSIM_CUDA_SERIES_SYNC]))
        costs.sync_ns = to_ns(series_mean(&s[FSIM_CUDA_SERIES_SYNC]));
    if (series_has(&s[FSIM_CUDA_SERIES_MALLOC])) {
        costs.malloc_ns = to_ns(s[FSIM_CUDA_SERIES_MALLOC].fit.base);
        costs.malloc_per_gib_ns = to_ns(s[FSIM_CUDA_SERIES_MALLOC].fit.slope);
    }
    if (series_has(&s[FSIM_CUDA_SERIES_FREE])) {
        /* the model adds sync_ns to every cudaFree */
        costs.free_ns = to_ns(s[FSIM_CUDA_SERIES_FREE].fit.base - (double)costs.sync_ns);
        costs.free_per_gib_ns = to_ns(s[FSIM_CUDA_SERIES_FREE].fit.slope);
    }
    if (series_has(&s[FSIM_CUDA_SERIES_RESERVE]) && series_has(&s[FSIM_CUDA_SERIES_RELEASE]))
        costs.reserve_ns = to_ns((series_mean(&s[FSIM_CUDA_SERIES_RESERVE]) +
                                  series_mean(&s[FSIM_CUDA_SERIES_RELEASE])) /
                                 2.0);
    if (series_has(&s[FSIM_CUDA_SERIES_MAP])) {
        costs.map_ns = to_ns(s[FSIM_CUDA_SERIES_MAP].fit.base);
        costs.map_per_gib_ns = to_ns(s[FSIM_CUDA_SERIES_MAP].fit.slope);
    }
    if (series_has(&s[FSIM_CUDA_SERIES_UNMAP])) {
        costs.unmap_ns = to_ns(s[FSIM_CUDA_SERIES_UNMAP].fit.base);
        costs.unmap_per_gib_ns = to_ns(s[FSIM_CUDA_SERIES_UNMAP].fit.slope);
    }
    return costs;
}

void
fsim_cuda_calibration_spec(const FsimCudaCalibration *calibration, FsimDeviceSpec *out)
{
    const FsimCudaDriverInfo *info = &calibration->info;

    memset(out, 0, sizeof(*out));
    g_strlcpy(out->name, info->name, sizeof(out->name));
    g_snprintf(out->description, sizeof(out->description),
               "%s, calibrated (compute %d.%d, driver %d.%d)", info->name, info->compute_major,
               info->compute_minor, info->driver_version / 1000, info->driver_version % 1000 / 10);
    out->total_bytes = info->total_bytes;
    out->capacity_bytes = calibration->free_bytes;
    out->granularity = info->granularity;
    out->costs = calibration->costs;
}

/* ---- the profile --------------------------------------------------------------------------- */

static void
set_u64_list(GKeyFile *key_file, const char *key, const uint64_t *values, gsize n)
{
    g_autoptr(GString) text = g_string_new(NULL);

    for (gsize i = 0; i < n; i++)
        g_string_append_printf(text, "%s%" G_GUINT64_FORMAT, i ? ";" : "", values[i]);
    g_key_file_set_value(key_file, "calibration", key, text->str);
}

static void
profile_add_calibration(GKeyFile *key_file, const FsimCudaCalibration *calibration)
{
    const FsimCudaDriverInfo *info = &calibration->info;
    g_autofree char *capability =
        g_strdup_printf("%d.%d", info->compute_major, info->compute_minor);

    g_key_file_set_integer(key_file, "calibration", "driver_version", info->driver_version);
    g_key_file_set_integer(key_file, "calibration", "runtime_version", info->runtime_version);
    g_key_file_set_string(key_file, "calibration", "compute_capability", capability);
    g_key_file_set_uint64(key_file, "calibration", "recommended_granularity",
                          info->recommended_granularity);
    g_key_file_set_uint64(key_file, "calibration", "free_bytes", calibration->free_bytes);
    g_key_file_set_uint64(key_file, "calibration", "observed_step", calibration->observed_step);
    g_key_file_set_comment(key_file, "calibration", "observed_step",
                           " growth of cudaMemGetInfo used memory: its largest power-of-two "
                           "divisor, and per probe (size, allocations, bytes)",
                           NULL);
    if (calibration->steps != NULL && calibration->steps->len != 0) {
        guint n = calibration->steps->len;
        g_autofree uint64_t *sizes = g_new(uint64_t, n);
        g_autofree uint64_t *counts = g_new(uint64_t, n);
        g_autofree uint64_t *used = g_new(uint64_t, n);

        for (guint i = 0; i < n; i++) {
            const FsimCudaUsageStep *step =
                &g_array_index(calibration->steps, FsimCudaUsageStep, i);

            sizes[i] = step->size;
            counts[i] = step->count;
            used[i] = step->used_bytes;
        }
        set_u64_list(key_file, "step_sizes", sizes, n);
        set_u64_list(key_file, "step_counts", counts, n);
        set_u64_list(key_file, "step_used_bytes", used, n);
    }
    for (int i = 0; i < FSIM_CUDA_SERIES_COUNT; i++) {
        const FsimCudaSeries *series = &calibration->series[i];
        g_autofree char *sizes_key = NULL;
        g_autofree char *median_key = NULL;
        g_autofree char *fit_key = NULL;
        g_autofree uint64_t *medians = NULL;
        g_autofree char *fit = NULL;
        g_autofree char *comment = NULL;

        if (!series_has(series))
            continue;
        sizes_key = g_strdup_printf("%s_sizes", series_names[i].key);
        median_key = g_strdup_printf("%s_median_ns", series_names[i].key);
        fit_key = g_strdup_printf("%s_fit", series_names[i].key);
        medians = g_new(uint64_t, series->median_ns->len);
        for (guint k = 0; k < series->median_ns->len; k++)
            medians[k] = to_ns(g_array_index(series->median_ns, double, k));
        set_u64_list(key_file, sizes_key, (const uint64_t *)(const void *)series->sizes->data,
                     series->sizes->len);
        set_u64_list(key_file, median_key, medians, series->median_ns->len);
        fit =
            g_strdup_printf("%.0f;%.0f;%.4f", series->fit.base, series->fit.slope, series->fit.r2);
        g_key_file_set_value(key_file, "calibration", fit_key, fit);
        comment =
            g_strdup_printf(" %s: median ns per size; fit = base ns; ns per GiB; r2", series->name);
        g_key_file_set_comment(key_file, "calibration", sizes_key, comment, NULL);
    }
}

char *
fsim_cuda_profile_to_data(const FsimDeviceSpec *spec, const FsimCudaCalibration *calibration)
{
    g_autoptr(GKeyFile) key_file = g_key_file_new();
    const FsimDeviceCosts *c = &spec->costs;
    const struct {
        const char *key;
        uint64_t value;
        const char *comment;
    } costs[] = {
        {"malloc_ns", c->malloc_ns, " cudaMalloc: base ns + ns per GiB"},
        {"malloc_per_gib_ns", c->malloc_per_gib_ns, NULL},
        {"free_ns", c->free_ns, " cudaFree: base ns (without the sync) + ns per GiB"},
        {"free_per_gib_ns", c->free_per_gib_ns, NULL},
        {"sync_ns", c->sync_ns, " the synchronisation cudaFree and unmap imply (idle device)"},
        {"reserve_ns", c->reserve_ns, " cuMemAddressReserve or cuMemAddressFree"},
        {"map_ns", c->map_ns, " cuMemCreate + cuMemMap (+ cuMemSetAccess) per handle, per GiB"},
        {"map_per_gib_ns", c->map_per_gib_ns, NULL},
        {"unmap_ns", c->unmap_ns, " cuMemUnmap + cuMemRelease per handle, per GiB"},
        {"unmap_per_gib_ns", c->unmap_per_gib_ns, NULL},
    };
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *when = g_date_time_format_iso8601(now);
    g_autofree char *header = NULL;

    header =
        g_strdup_printf(" fragsim device profile%s, %s.\n"
                        " Use it with -d PATH; every [device] and [costs] key is read back.",
                        calibration != NULL ? " written by 'fragsim cuda calibrate'" : "", when);
    g_key_file_set_string(key_file, "device", "name", spec->name);
    g_key_file_set_string(key_file, "device", "description", spec->description);
    g_key_file_set_uint64(key_file, "device", "total_bytes", spec->total_bytes);
    g_key_file_set_uint64(key_file, "device", "capacity_bytes", spec->capacity_bytes);
    g_key_file_set_uint64(key_file, "device", "granularity", spec->granularity);
    g_key_file_set_comment(key_file, NULL, NULL, header, NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(costs); i++) {
        g_key_file_set_uint64(key_file, "costs", costs[i].key, costs[i].value);
        if (costs[i].comment != NULL)
            g_key_file_set_comment(key_file, "costs", costs[i].key, costs[i].comment, NULL);
    }
    if (calibration != NULL)
        profile_add_calibration(key_file, calibration);
    return g_key_file_to_data(key_file, NULL, NULL);
}

gboolean
fsim_cuda_profile_write(const char *path, const FsimDeviceSpec *spec,
                        const FsimCudaCalibration *calibration, GError **error)
{
    g_autofree char *data = fsim_cuda_profile_to_data(spec, calibration);
    g_autoptr(GError) local_error = NULL;

    if (!g_file_set_contents(path, data, -1, &local_error)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "cannot write the profile %s: %s", path,
                    local_error->message);
        return FALSE;
    }
    return TRUE;
}
