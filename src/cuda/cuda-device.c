/* SPDX-License-Identifier: MIT */
/*
 * The device on a real GPU: an #FsimDeviceOps whose calls the driver carries out, so the policies
 * run unchanged and only the device differs from a simulated replay.
 *
 *   mem_alloc / mem_free     cudaMalloc / cudaFree
 *   va_reserve / va_release  cuMemAddressReserve / cuMemAddressFree
 *   map                      per handle: cuMemCreate + cuMemMap; then one cuMemSetAccess over the
 *                            range (what PyTorch's expandable segments do)
 *   unmap                    cudaDeviceSynchronize (PyTorch synchronises before it unmaps), then
 *                            per handle: cuMemUnmap + cuMemRelease
 *
 * Bookkeeping.  The device keeps every cudaMalloc'd range and reservation, and the handle mapped
 * at each page, so unmap releases exactly the handles map created (a policy may unmap part of
 * what it mapped in one call, page by page, as expandable segments do) and destroy gives back
 * whatever a run still holds: a trace need not free everything, and the next run starts on a
 * clean GPU.  A call naming a range the device never handed out is a policy bug; on a real GPU it
 * is reported as the device's error instead of being passed on to the driver.
 *
 * Measurements.  Each call is timed as the cost model charges it (see #FsimCudaMeasurements);
 * writing the new memory (cudaMemset, so the pages are committed, not merely promised) and reading
 * cudaMemGetInfo happen after the timed part.  Calls made while the engine seeds a trace's initial
 * state change the GPU's memory but are not timed, as the wrappers do not count them.
 *
 * Errors.  Device operations cannot fail except by %FSIM_OOM, so a driver failure other than a
 * lack of memory is kept (the first one) for the caller to find with fsim_cuda_device_error();
 * the operation answers %FSIM_OOM or does nothing meanwhile.
 */
#include <glib.h>

#include <stdarg.h>
#include <string.h>

#include "fragsim/device.h"

#include "cuda-backend.h"

/* A cudaMalloc'd range, a reservation, or a mapped page and its handle. */
typedef struct {
    FsimAddr addr; /* the key: first, so &range->addr is the hash key */
    uint64_t size;
    uint64_t handle;
} Range;

typedef struct {
    FsimDevice base;
    FsimCudaDriver *driver;
    FsimCudaDeviceOptions options;
    GHashTable *allocations;  /* &Range.addr -> Range: cudaMalloc'd */
    GHashTable *reservations; /* &Range.addr -> Range */
    GHashTable *pages;        /* &Range.addr -> Range: page start -> its handle */
    FsimCudaMeasurements measured;
    GError *error;   /* the first driver failure other than a lack of memory */
    gboolean closed; /* fsim_cuda_device_close() gave everything back */
    /* the last successful call, whose modelled cost the wrapper adds after it returns */
    int charged_call; /* an FsimDeviceCall, or -1 */
    uint64_t charged_mark_ns;
} CudaDevice;

void
fsim_cuda_device_options_init(FsimCudaDeviceOptions *options)
{
    options->touch = TRUE;
    options->sample_usage = TRUE;
}

void
fsim_cuda_driver_free(FsimCudaDriver *driver)
{
    if (driver != NULL)
        driver->ops->destroy(driver);
}

static CudaDevice *
cuda_from_device(FsimDevice *device)
{
    return (CudaDevice *)device;
}

static GHashTable *
range_table_new(void)
{
    return g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
}

static Range *
range_insert(GHashTable *table, FsimAddr addr, uint64_t size, uint64_t handle)
{
    Range *range = g_new(Range, 1);

    range->addr = addr;
    range->size = size;
    range->handle = handle;
    g_hash_table_insert(table, &range->addr, range);
    return range;
}

static Range *
range_lookup(GHashTable *table, FsimAddr addr)
{
    return g_hash_table_lookup(table, &addr);
}

/* Keep @error as the device's failure (the first one wins); consumes it. */
static void
cuda_fail(CudaDevice *cuda, GError *error)
{
    if (cuda->error == NULL)
        cuda->error = error;
    else
        g_error_free(error);
}

static void cuda_failf(CudaDevice *cuda, FsimCudaError code, const char *format, ...)
    G_GNUC_PRINTF(3, 4);

static void
cuda_failf(CudaDevice *cuda, FsimCudaError code, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    cuda_fail(cuda, g_error_new_literal(FSIM_CUDA_ERROR, code, message));
}

/* A failed call that should have obtained memory: a lack of memory is the policy's OOM, anything
 * else the device's failure.  Consumes @error. */
static FsimStatus
cuda_refused(CudaDevice *cuda, GError *error, uint64_t elapsed_ns)
{
    if (g_error_matches(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_OUT_OF_MEMORY)) {
        if (!cuda->base.seeding)
            fsim_latency_add(&cuda->measured.failed, elapsed_ns);
        g_error_free(error);
    } else {
        cuda_fail(cuda, error);
    }
    return FSIM_OOM;
}

static uint64_t
cuda_now(CudaDevice *cuda)
{
    return cuda->driver->ops->now_ns(cuda->driver);
}

/* Attribute the modelled cost of the previous successful call, which its wrapper has added to the
 * device's modelled time by now.  Every operation starts with this. */
static void
cuda_settle(CudaDevice *cuda)
{
    if (cuda->charged_call >= 0)
        cuda->measured.modelled_ns[cuda->charged_call] +=
            cuda->base.modelled_time_ns - cuda->charged_mark_ns;
    cuda->charged_call = -1;
}

/* Every device call begins so: the previous call's modelled time settled.  FALSE once the device
 * is closed: the call then does nothing. */
static gboolean
cuda_begin(CudaDevice *cuda)
{
    cuda_settle(cuda);
    return !cuda->closed;
}

/* A call succeeded after @elapsed_ns. */
static void
cuda_record(CudaDevice *cuda, FsimDeviceCall call, uint64_t elapsed_ns)
{
    cuda->charged_call = (int)call;
    cuda->charged_mark_ns = cuda->base.modelled_time_ns;
    if (cuda->base.seeding)
        return;
    fsim_latency_add(&cuda->measured.calls[call], elapsed_ns);
    cuda->measured.measured_time_ns += elapsed_ns;
}

/* Write new memory so it is committed, outside the timed call. */
static void
cuda_touch(CudaDevice *cuda, FsimAddr addr, uint64_t size)
{
    GError *error = NULL;
    uint64_t start;

    if (!cuda->options.touch)
        return;
    start = cuda_now(cuda);
    if (!cuda->driver->ops->touch(cuda->driver, addr, size, &error)) {
        cuda_fail(cuda, error);
        return;
    }
    fsim_latency_add(&cuda->measured.touch, cuda_now(cuda) - start);
}

static void
cuda_sample_usage(CudaDevice *cuda)
{
    GError *error = NULL;
    uint64_t free_bytes;
    uint64_t total_bytes;
    uint64_t used;

    if (!cuda->options.sample_usage)
        return;
    if (!cuda->driver->ops->mem_get_info(cuda->driver, &free_bytes, &total_bytes, &error)) {
        cuda_fail(cuda, error);
        return;
    }
    cuda->measured.usage_samples++;
    used = total_bytes > free_bytes ? total_bytes - free_bytes : 0;
    if (used > cuda->measured.baseline_used_bytes &&
        used - cuda->measured.baseline_used_bytes > cuda->measured.peak_used_bytes)
        cuda->measured.peak_used_bytes = used - cuda->measured.baseline_used_bytes;
}

static FsimStatus
cuda_mem_alloc(FsimDevice *device, uint64_t size, FsimAddr *out)
{
    CudaDevice *cuda = cuda_from_device(device);
    FsimCudaDriver *driver = cuda->driver;
    GError *error = NULL;
    FsimAddr addr = 0;
    uint64_t start;
    gboolean ok;

    if (!cuda_begin(cuda))
        return FSIM_OOM;
    if (fsim_device_round(device, size) > fsim_device_free_bytes(device))
        return FSIM_OOM;
    start = cuda_now(cuda);
    ok = driver->ops->mem_alloc(driver, size, &addr, &error);
    if (!ok)
        return cuda_refused(cuda, error, cuda_now(cuda) - start);
    cuda_record(cuda, FSIM_CALL_MEM_ALLOC, cuda_now(cuda) - start);
    range_insert(cuda->allocations, addr, size, 0);
    cuda_touch(cuda, addr, size);
    cuda_sample_usage(cuda);
    *out = addr;
    return FSIM_OK;
}

/* A call the policy should not have made (@why, after the call): the device's failure. */
static void
cuda_policy_bug(CudaDevice *cuda, const char *call, FsimAddr addr, uint64_t size, const char *why)
{
    cuda_failf(cuda, FSIM_CUDA_ERROR_FAILED,
               "policy bug: %s of 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT " bytes)%s", call,
               addr, size, why);
}

/* cudaFree (@call FSIM_CALL_MEM_FREE, of an allocation) or cuMemAddressFree (of a reservation)
 * of @addr, which must be a range of @table (else @why names the policy's bug); timed, and the
 * range forgotten. */
static void
cuda_free_range(FsimDevice *device, GHashTable *table, FsimAddr addr, uint64_t size,
                FsimDeviceCall call, const char *name, const char *why)
{
    CudaDevice *cuda = cuda_from_device(device);
    FsimCudaDriver *driver = cuda->driver;
    Range *range = range_lookup(table, addr);
    GError *error = NULL;
    uint64_t start;
    gboolean ok;

    if (!cuda_begin(cuda))
        return;
    if (range == NULL) {
        cuda_policy_bug(cuda, name, addr, size, why);
        return;
    }
    start = cuda_now(cuda);
    ok = call == FSIM_CALL_MEM_FREE ? driver->ops->mem_free(driver, addr, &error)
                                    : driver->ops->address_free(driver, addr, range->size, &error);
    if (!ok) {
        cuda_fail(cuda, error);
        return;
    }
    cuda_record(cuda, call, cuda_now(cuda) - start);
    g_hash_table_remove(table, &addr);
}

static void
cuda_mem_free(FsimDevice *device, FsimAddr addr, uint64_t size)
{
    cuda_free_range(device, cuda_from_device(device)->allocations, addr, size, FSIM_CALL_MEM_FREE,
                    "cudaFree", ", which cudaMalloc did not return");
}

static FsimStatus
cuda_va_reserve(FsimDevice *device, uint64_t size, uint64_t alignment, FsimAddr *out)
{
    CudaDevice *cuda = cuda_from_device(device);
    FsimCudaDriver *driver = cuda->driver;
    uint64_t rounded = fsim_device_round(device, size);
    GError *error = NULL;
    FsimAddr addr = 0;
    uint64_t start;

    if (!cuda_begin(cuda))
        return FSIM_OOM;
    alignment = MAX(alignment, device->spec.granularity);
    if ((alignment & (alignment - 1)) != 0) {
        cuda_failf(cuda, FSIM_CUDA_ERROR_FAILED,
                   "policy bug: reservation alignment %" G_GUINT64_FORMAT " is not a power of two",
                   alignment);
        return FSIM_OOM;
    }
    start = cuda_now(cuda);
    if (!driver->ops->address_reserve(driver, rounded, alignment, &addr, &error))
        return cuda_refused(cuda, error, cuda_now(cuda) - start);
    cuda_record(cuda, FSIM_CALL_VA_RESERVE, cuda_now(cuda) - start);
    range_insert(cuda->reservations, addr, rounded, 0);
    *out = addr;
    return FSIM_OK;
}

static void
cuda_va_release(FsimDevice *device, FsimAddr addr, uint64_t size)
{
    cuda_free_range(device, cuda_from_device(device)->reservations, addr, size,
                    FSIM_CALL_VA_RELEASE, "cuMemAddressFree", ", which was not reserved");
}

/* Unmap and release the page at @addr and forget it.  FALSE (error kept) on failure. */
static gboolean
cuda_page_drop(CudaDevice *cuda, Range *page)
{
    FsimCudaDriver *driver = cuda->driver;
    FsimAddr addr = page->addr;
    GError *error = NULL;

    if (!driver->ops->unmap(driver, page->addr, page->size, &error) ||
        !driver->ops->release(driver, page->handle, &error)) {
        cuda_fail(cuda, error);
        return FALSE;
    }
    g_hash_table_remove(cuda->pages, &addr);
    return TRUE;
}

static FsimStatus
cuda_map(FsimDevice *device, FsimAddr addr, uint64_t size, uint64_t handle_size)
{
    CudaDevice *cuda = cuda_from_device(device);
    FsimCudaDriver *driver = cuda->driver;
    uint64_t granularity = driver->info.granularity;
    GError *error = NULL;
    uint64_t n_handles;
    uint64_t done = 0;
    uint64_t start;

    if (!cuda_begin(cuda))
        return FSIM_OOM;
    if (handle_size == 0 || size % handle_size != 0) {
        cuda_failf(cuda, FSIM_CUDA_ERROR_FAILED,
                   "policy bug: map of %" G_GUINT64_FORMAT " bytes in handles of %" G_GUINT64_FORMAT
                   " bytes",
                   size, handle_size);
        return FSIM_OOM;
    }
    if (handle_size % granularity != 0 || addr % granularity != 0) {
        g_autofree char *handle_text = fsim_format_size(handle_size);
        g_autofree char *granularity_text = fsim_format_size(granularity);

        cuda_failf(cuda, FSIM_CUDA_ERROR_UNSUPPORTED,
                   "cannot map handles of %s at 0x%" G_GINT64_MODIFIER
                   "x on %s: the GPU maps whole multiples of its granularity, %s",
                   handle_text, addr, driver->info.name, granularity_text);
        return FSIM_OOM;
    }
    if (size > fsim_device_free_bytes(device))
        return FSIM_OOM;
    n_handles = size / handle_size;
    for (uint64_t i = 0; i < n_handles; i++) {
        if (range_lookup(cuda->pages, addr + i * handle_size) != NULL) {
            cuda_policy_bug(cuda, "map", addr, size, " overlaps mapped pages");
            return FSIM_OOM;
        }
    }
    start = cuda_now(cuda);
    for (; done < n_handles; done++) {
        FsimAddr page = addr + done * handle_size;
        uint64_t handle = 0;

        if (!driver->ops->create(driver, handle_size, &handle, &error))
            break;
        if (!driver->ops->map(driver, page, handle_size, handle, &error)) {
            GError *release_error = NULL;

            if (!driver->ops->release(driver, handle, &release_error))
                cuda_fail(cuda, release_error);
            break;
        }
        range_insert(cuda->pages, page, handle_size, handle);
    }
    if (done == n_handles && driver->ops->set_access(driver, addr, size, &error)) {
        uint64_t held = g_hash_table_size(cuda->pages);

        cuda_record(cuda, FSIM_CALL_MAP, cuda_now(cuda) - start);
        if (!device->seeding)
            cuda->measured.handles_created += n_handles;
        cuda->measured.peak_handles = MAX(cuda->measured.peak_handles, held);
        cuda_touch(cuda, addr, size);
        cuda_sample_usage(cuda);
        return FSIM_OK;
    }
    /* All or nothing: give back the handles mapped so far. */
    {
        uint64_t elapsed = cuda_now(cuda) - start;

        for (uint64_t i = 0; i < done; i++)
            cuda_page_drop(cuda, range_lookup(cuda->pages, addr + i * handle_size));
        return cuda_refused(cuda, error, elapsed);
    }
}

static void
cuda_unmap(FsimDevice *device, FsimAddr addr, uint64_t size, uint64_t handle_size)
{
    CudaDevice *cuda = cuda_from_device(device);
    FsimCudaDriver *driver = cuda->driver;
    GError *error = NULL;
    uint64_t start;
    FsimAddr page;

    if (!cuda_begin(cuda))
        return;
    (void)handle_size; /* pages keep their own sizes: a range may be unmapped page by page */
    for (page = addr; page < addr + size;) {
        Range *range = range_lookup(cuda->pages, page);

        if (range == NULL)
            break;
        page += range->size;
    }
    if (page != addr + size) {
        cuda_policy_bug(cuda, "unmap", addr, size, ", which is not a run of mapped pages");
        return;
    }
    start = cuda_now(cuda);
    if (!driver->ops->synchronize(driver, &error)) {
        cuda_fail(cuda, error);
        return;
    }
    for (page = addr; page < addr + size;) {
        Range *range = range_lookup(cuda->pages, page);

        page += range->size;
        if (!cuda_page_drop(cuda, range))
            return;
    }
    cuda_record(cuda, FSIM_CALL_UNMAP, cuda_now(cuda) - start);
}

/* Give back, without timing, whatever the run still holds: mapped pages before the reservations
 * they live in, then cudaMalloc'd ranges. */
static void
cuda_release_all(CudaDevice *cuda)
{
    FsimCudaDriver *driver = cuda->driver;
    g_autoptr(GList) pages = g_hash_table_get_values(cuda->pages);
    g_autoptr(GList) reservations = g_hash_table_get_values(cuda->reservations);
    g_autoptr(GList) allocations = g_hash_table_get_values(cuda->allocations);
    GError *error = NULL;

    if (pages != NULL && !driver->ops->synchronize(driver, &error))
        cuda_fail(cuda, g_steal_pointer(&error));
    for (GList *l = pages; l != NULL; l = l->next)
        cuda_page_drop(cuda, l->data);
    for (GList *l = reservations; l != NULL; l = l->next) {
        Range *range = l->data;

        if (!driver->ops->address_free(driver, range->addr, range->size, &error))
            cuda_fail(cuda, g_steal_pointer(&error));
    }
    for (GList *l = allocations; l != NULL; l = l->next) {
        Range *range = l->data;

        if (!driver->ops->mem_free(driver, range->addr, &error))
            cuda_fail(cuda, g_steal_pointer(&error));
    }
    g_hash_table_remove_all(cuda->pages);
    g_hash_table_remove_all(cuda->reservations);
    g_hash_table_remove_all(cuda->allocations);
}

void
fsim_cuda_device_close(FsimDevice *device)
{
    CudaDevice *cuda;

    g_return_if_fail(fsim_cuda_device_measurements(device) != NULL);
    cuda = cuda_from_device(device);
    if (!cuda_begin(cuda))
        return;
    cuda_release_all(cuda);
    cuda->closed = TRUE;
}

static void
cuda_destroy(FsimDevice *device)
{
    CudaDevice *cuda = cuda_from_device(device);
    gboolean had_error = cuda->error != NULL;

    /* Nobody is left to report a failure to but the log. */
    fsim_cuda_device_close(device);
    if (!had_error && cuda->error != NULL)
        g_warning("CUDA device: giving back what the run still held: %s", cuda->error->message);
    g_clear_pointer(&cuda->pages, g_hash_table_unref);
    g_clear_pointer(&cuda->reservations, g_hash_table_unref);
    g_clear_pointer(&cuda->allocations, g_hash_table_unref);
    g_clear_error(&cuda->error);
    g_free(cuda);
}

static const FsimDeviceOps cuda_ops = {
    .name = "cuda",
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .va_reserve = cuda_va_reserve,
    .va_release = cuda_va_release,
    .map = cuda_map,
    .unmap = cuda_unmap,
    .destroy = cuda_destroy,
};

FsimDevice *
fsim_cuda_device_new(FsimCudaDriver *driver, const FsimDeviceSpec *spec, GKeyFile *config,
                     const FsimCudaDeviceOptions *options, GError **error)
{
    CudaDevice *cuda;
    FsimDeviceFaults faults;
    uint64_t free_bytes;
    uint64_t total_bytes;

    g_return_val_if_fail(driver != NULL && spec != NULL, NULL);
    if (spec->granularity == 0 || driver->info.granularity == 0 ||
        spec->granularity % driver->info.granularity != 0 ||
        (spec->granularity & (spec->granularity - 1)) != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "device granularity %" G_GUINT64_FORMAT
                    " is not a power-of-two multiple of the GPU's, %" G_GUINT64_FORMAT,
                    spec->granularity, driver->info.granularity);
        return NULL;
    }
    if (!fsim_device_faults_parse(config, &faults, error))
        return NULL;
    if (!driver->ops->mem_get_info(driver, &free_bytes, &total_bytes, error))
        return NULL;
    cuda = g_new0(CudaDevice, 1);
    cuda->base.ops = &cuda_ops;
    cuda->base.spec = *spec;
    cuda->base.faults = faults;
    cuda->driver = driver;
    if (options != NULL)
        cuda->options = *options;
    else
        fsim_cuda_device_options_init(&cuda->options);
    cuda->allocations = range_table_new();
    cuda->reservations = range_table_new();
    cuda->pages = range_table_new();
    cuda->measured.baseline_used_bytes = total_bytes > free_bytes ? total_bytes - free_bytes : 0;
    cuda->charged_call = -1;
    return &cuda->base;
}

const FsimCudaMeasurements *
fsim_cuda_device_measurements(FsimDevice *device)
{
    if (device == NULL || device->ops != &cuda_ops)
        return NULL;
    cuda_settle(cuda_from_device(device));
    return &cuda_from_device(device)->measured;
}

const GError *
fsim_cuda_device_error(const FsimDevice *device)
{
    if (device == NULL || device->ops != &cuda_ops)
        return NULL;
    return ((const CudaDevice *)device)->error;
}

guint
fsim_cuda_device_handles(const FsimDevice *device)
{
    if (device == NULL || device->ops != &cuda_ops)
        return 0;
    return g_hash_table_size(((const CudaDevice *)device)->pages);
}

gboolean
fsim_cuda_spec_for_gpu(FsimCudaDriver *driver, const FsimDeviceSpec *model, FsimDeviceSpec *out,
                       GError **error)
{
    const FsimCudaDriverInfo *info = &driver->info;
    uint64_t free_bytes;
    uint64_t total_bytes;

    if (!driver->ops->mem_get_info(driver, &free_bytes, &total_bytes, error))
        return FALSE;
    memset(out, 0, sizeof(*out));
    g_strlcpy(out->name, info->name, sizeof(out->name));
    g_snprintf(out->description, sizeof(out->description),
               "%s (CUDA device %d, compute %d.%d, driver %d.%d)", info->name, info->ordinal,
               info->compute_major, info->compute_minor, info->driver_version / 1000,
               info->driver_version % 1000 / 10);
    out->total_bytes = MAX(total_bytes, info->total_bytes);
    out->capacity_bytes = free_bytes;
    if (model != NULL && model->capacity_bytes < out->capacity_bytes)
        out->capacity_bytes = model->capacity_bytes;
    out->granularity = info->granularity;
    out->costs = model != NULL ? model->costs : fsim_device_costs_default();
    return TRUE;
}
