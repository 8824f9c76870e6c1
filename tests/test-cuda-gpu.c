/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend on a real GPU.  Exits 77 (CTest: skipped, label `gpu`) when there is no CUDA
 * device or driver, so CI without a GPU shows it as not run, never as passed.
 *
 * Checks what only hardware can tell: that the driver entry points load and work, errors map to
 * the right codes (a refused cudaMalloc is an OOM and does not poison later calls), the device
 * gives everything back, and replays, native replays and calibration complete.  No assertion
 * depends on how long anything takes.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>

#include "fragsim/fragsim.h"

#include "cuda/cuda-backend.h"
#include "test-util.h"

static FsimCudaDriver *driver;

static uint64_t
gpu_used(void)
{
    g_autoptr(GError) error = NULL;
    uint64_t free_bytes = 0;
    uint64_t total_bytes = 0;

    g_assert_true(driver->ops->mem_get_info(driver, &free_bytes, &total_bytes, &error));
    g_assert_no_error(error);
    return total_bytes - free_bytes;
}

static void
test_info(void)
{
    const FsimCudaDriverInfo *info = &driver->info;

    g_test_message("%s: %" G_GUINT64_FORMAT " bytes, granularity %" G_GUINT64_FORMAT
                   ", driver %d, runtime %d",
                   info->name, info->total_bytes, info->granularity, info->driver_version,
                   info->runtime_version);
    g_assert_cmpuint(strlen(info->name), >, 0);
    g_assert_cmpuint(info->total_bytes, >, 0);
    g_assert_cmpuint(info->granularity, >, 0);
    g_assert_cmpuint(info->granularity & (info->granularity - 1), ==, 0);
    g_assert_cmpuint(info->recommended_granularity % info->granularity, ==, 0);
}

static void
test_errors(void)
{
    g_autoptr(GError) error = NULL;
    FsimAddr addr = 0;

    /* more than the GPU has: an OOM naming the call, and the next call is not blamed for it */
    g_assert_false(driver->ops->mem_alloc(driver, driver->info.total_bytes * 2, &addr, &error));
    g_assert_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_OUT_OF_MEMORY);
    g_assert_nonnull(strstr(error->message, "cudaMalloc"));
    g_clear_error(&error);
    g_assert_true(driver->ops->mem_alloc(driver, FSIM_MiB, &addr, &error));
    g_assert_no_error(error);
    g_assert_true(driver->ops->mem_free(driver, addr, &error));
    g_assert_no_error(error);
}

static void
test_device(void)
{
    g_autoptr(GError) error = NULL;
    uint64_t g = driver->info.granularity;
    FsimDeviceSpec spec;
    FsimDevice *device;
    const FsimCudaMeasurements *m;
    FsimAddr addr = 0;
    FsimAddr base = 0;

    if (!driver->info.vmm_supported) {
        g_test_skip("no virtual memory management on this GPU");
        return;
    }
    g_assert_true(fsim_cuda_spec_for_gpu(driver, NULL, &spec, &error));
    g_assert_no_error(error);
    device = fsim_cuda_device_new(driver, &spec, NULL, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpint(fsim_device_mem_alloc(device, 20 * FSIM_MiB, &addr), ==, FSIM_OK);
    g_assert_cmpuint(addr % g, ==, 0);
    fsim_device_mem_free(device, addr, 20 * FSIM_MiB);
    g_assert_cmpint(fsim_device_va_reserve(device, 64 * g, g, &base), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_map(device, base, 3 * g, g), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_map(device, base + 4 * g, 10 * g, 10 * g), ==, FSIM_OK);
    g_assert_cmpuint(fsim_cuda_device_handles(device), ==, 4);
    fsim_device_unmap(device, base + g, g, g);
    fsim_device_unmap(device, base, g, g);
    fsim_device_unmap(device, base + 2 * g, g, g);
    /* the 10-granule handle stays mapped, and so does the reservation: destroy gives them back */
    g_assert_null(fsim_cuda_device_error(device));
    m = fsim_cuda_device_measurements(device);
    g_assert_cmpuint(m->calls[FSIM_CALL_MEM_ALLOC].count, ==, 1);
    g_assert_cmpuint(m->calls[FSIM_CALL_MAP].count, ==, 2);
    g_assert_cmpuint(m->calls[FSIM_CALL_UNMAP].count, ==, 3);
    g_assert_cmpuint(m->handles_created, ==, 4);
    g_assert_cmpuint(m->touch.count, ==, 3);
    g_assert_cmpuint(m->usage_samples, ==, 3);
    g_assert_cmpuint(m->peak_used_bytes, >, 0);
    g_test_message("peak used %" G_GUINT64_FORMAT " bytes for 13 granules mapped",
                   m->peak_used_bytes);
    fsim_device_free(device);
}

static void
test_replay(void)
{
    static const struct {
        const char *policy;
        uint64_t peak_reserved, mallocs, frees, maps, unmaps;
    } expected[] = {
        {"direct", 44040192, 7, 3, 0, 0},
        {"bestfit", 46137344, 0, 0, 5, 0},
        {"paged", 44040192, 0, 0, 7, 3},
    };
    g_autoptr(FsimTrace) trace = fsim_test_open_trace("golden-fragment.trace");

    if (driver->info.granularity != 2 * FSIM_MiB) {
        g_test_skip("the golden numbers assume a 2 MiB granularity");
        return;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(expected); i++) {
        g_autoptr(GError) error = NULL;
        FsimCudaReplayOptions options;
        FsimCudaReplayResult result;

        fsim_cuda_replay_options_init(&options);
        options.policy = expected[i].policy;
        g_assert_true(fsim_cuda_replay(driver, trace, 0, &options, &result, &error));
        g_assert_no_error(error);
        g_assert_cmpstr(result.gpu_spec.name, ==, driver->info.name);
        g_assert_cmpuint(result.gpu.peak_reserved_bytes, ==, expected[i].peak_reserved);
        g_assert_cmpuint(result.model.peak_reserved_bytes, ==, expected[i].peak_reserved);
        g_assert_cmpuint(result.gpu.device_mallocs, ==, expected[i].mallocs);
        g_assert_cmpuint(result.gpu.device_frees, ==, expected[i].frees);
        g_assert_cmpuint(result.gpu.device_maps, ==, expected[i].maps);
        g_assert_cmpuint(result.gpu.device_unmaps, ==, expected[i].unmaps);
        /* what the driver really takes is the measurement, not an invariant: small
         * allocations may come out of blocks it already holds */
        g_assert_cmpuint(result.measured.peak_used_bytes, >, 0);
        g_test_message("%s: peak used %" G_GUINT64_FORMAT ", measured %" G_GUINT64_FORMAT
                       " ns, modelled %" G_GUINT64_FORMAT " ns",
                       expected[i].policy, result.measured.peak_used_bytes,
                       result.measured.measured_time_ns, result.gpu.modelled_alloc_time_ns);
        fsim_cuda_replay_result_clear(&result);
    }
}

static void
test_native(void)
{
    g_autoptr(FsimTrace) trace = fsim_test_open_trace("golden-fragment.trace");
    FsimCudaNativeMode modes[] = {FSIM_CUDA_NATIVE_MALLOC, FSIM_CUDA_NATIVE_ASYNC};
    uint64_t before = gpu_used();

    for (gsize i = 0; i < G_N_ELEMENTS(modes); i++) {
        g_autoptr(GError) error = NULL;
        FsimCudaNativeResult r;

        if (modes[i] == FSIM_CUDA_NATIVE_ASYNC && !driver->info.pools_supported)
            continue;
        g_assert_true(fsim_cuda_native(driver, trace, 0, modes[i], TRUE, &r, &error));
        g_assert_no_error(error);
        g_assert_cmpuint(r.allocs, ==, 7);
        g_assert_cmpuint(r.frees, ==, 3);
        g_assert_cmpuint(r.ooms, ==, 0);
        g_assert_cmpuint(r.peak_requested_bytes, ==, 41943041);
        /* the 1-byte tensor may share a block the driver already holds */
        g_assert_cmpuint(r.peak_reserved_bytes, >=, 40 * FSIM_MiB);
        g_assert_cmpuint(r.alloc.count, ==, 7);
    }
    /* everything given back (the driver may keep a little for itself: allow 64 MiB) */
    g_assert_cmpuint(gpu_used(), <=, before + 64 * FSIM_MiB);
}

static void
test_calibrate(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-cuda-gpu-XXXXXX", &error);
    g_autofree char *path = g_build_filename(dir, "gpu.ini", NULL);
    FsimCudaCalibrateOptions options;
    FsimCudaCalibration cal;
    FsimDeviceSpec spec;
    FsimDeviceSpec back;

    g_assert_no_error(error);
    fsim_cuda_calibrate_options_init(&options);
    options.max_size = 64 * FSIM_MiB;
    options.repeat = 3;
    g_assert_true(fsim_cuda_calibrate(driver, &options, &cal, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(cal.series[FSIM_CUDA_SERIES_MALLOC].sizes->len, >, 1);
    g_assert_cmpuint(cal.observed_step, >, 0);
    g_test_message("observed step %" G_GUINT64_FORMAT ", malloc %" G_GUINT64_FORMAT
                   " ns + %" G_GUINT64_FORMAT " ns/GiB, map %" G_GUINT64_FORMAT " ns/handle",
                   cal.observed_step, cal.costs.malloc_ns, cal.costs.malloc_per_gib_ns,
                   cal.costs.map_ns);
    fsim_cuda_calibration_spec(&cal, &spec);
    g_assert_true(fsim_cuda_profile_write(path, &spec, &cal, &error));
    g_assert_no_error(error);
    g_assert_true(fsim_device_spec_parse(path, &back, &error));
    g_assert_no_error(error);
    g_assert_cmpstr(back.name, ==, spec.name);
    g_assert_cmpuint(back.costs.malloc_ns, ==, spec.costs.malloc_ns);
    g_assert_cmpuint(back.granularity, ==, driver->info.granularity);
    fsim_cuda_calibration_clear(&cal);
    g_remove(path);
    g_rmdir(dir);
}

int
main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    int status;

    driver = fsim_cuda_driver_open(0, &error);
    if (driver == NULL) {
        g_printerr("test-cuda-gpu: skipped: %s\n", error->message);
        return 77;
    }
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cuda-gpu/info", test_info);
    g_test_add_func("/cuda-gpu/errors", test_errors);
    g_test_add_func("/cuda-gpu/device", test_device);
    g_test_add_func("/cuda-gpu/replay", test_replay);
    g_test_add_func("/cuda-gpu/native", test_native);
    g_test_add_func("/cuda-gpu/calibrate", test_calibrate);
    status = g_test_run();
    fsim_cuda_driver_free(driver);
    return status;
}
