/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend without a GPU: latency histograms, the least-squares fit, device profiles read
 * back by fsim_device_spec_parse(), and the device, replay, native replay and calibration over the
 * fake driver of cuda-fake.c, whose clock advances by known costs: durations are exact, nothing
 * depends on the wall clock, and calibration must recover the fake's costs to the nanosecond.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>

#include "fragsim/fragsim.h"
#include "fragsim/store.h"

#include "cuda-fake.h"
#include "cuda/cuda-backend.h"
#include "test-util.h"

static FsimDevice *
fake_device(FakeDriver *fake, GKeyFile *config)
{
    g_autoptr(GError) error = NULL;
    FsimDeviceSpec spec;
    FsimDevice *device;

    g_assert_true(fsim_cuda_spec_for_gpu(&fake->base, NULL, &spec, &error));
    g_assert_no_error(error);
    device = fsim_cuda_device_new(&fake->base, &spec, config, NULL, &error);
    g_assert_no_error(error);
    g_assert_nonnull(device);
    return device;
}

/* ---- latency ------------------------------------------------------------------------------- */

static void
test_latency_buckets(void)
{
    g_assert_cmpuint(fsim_latency_bucket(0), ==, 0);
    g_assert_cmpuint(fsim_latency_bucket(1), ==, 0);
    g_assert_cmpuint(fsim_latency_bucket(2), ==, 1);
    g_assert_cmpuint(fsim_latency_bucket(3), ==, 1);
    g_assert_cmpuint(fsim_latency_bucket(1023), ==, 9);
    g_assert_cmpuint(fsim_latency_bucket(1024), ==, 10);
    g_assert_cmpuint(fsim_latency_bucket(G_MAXUINT64), ==, FSIM_LATENCY_BUCKETS - 1);
    g_assert_cmpuint(fsim_latency_bucket_floor(0), ==, 0);
    g_assert_cmpuint(fsim_latency_bucket_floor(1), ==, 2);
    g_assert_cmpuint(fsim_latency_bucket_floor(10), ==, 1024);
    for (guint b = 1; b < FSIM_LATENCY_BUCKETS; b++)
        g_assert_cmpuint(fsim_latency_bucket(fsim_latency_bucket_floor(b)), ==, b);
}

static void
test_latency_stats(void)
{
    FsimLatency a = {0};
    FsimLatency b = {0};
    FsimLatency empty = {0};

    g_assert_cmpuint(fsim_latency_quantile(&a, 0.5), ==, 0);
    g_assert_cmpfloat(fsim_latency_mean(&a), ==, 0.0);
    /* 100 samples: 1000 ns x 90, 50000 ns x 10 */
    for (int i = 0; i < 90; i++)
        fsim_latency_add(&a, 1000);
    for (int i = 0; i < 10; i++)
        fsim_latency_add(&a, 50000);
    g_assert_cmpuint(a.count, ==, 100);
    g_assert_cmpuint(a.total_ns, ==, 90 * 1000 + 10 * 50000);
    g_assert_cmpuint(a.min_ns, ==, 1000);
    g_assert_cmpuint(a.max_ns, ==, 50000);
    g_assert_cmpfloat(fsim_latency_mean(&a), ==, 5900.0);
    g_assert_cmpuint(a.buckets[9], ==, 90);  /* [512, 1024) */
    g_assert_cmpuint(a.buckets[15], ==, 10); /* [32768, 65536) */
    /* the median is in [512, 1024): the estimate is the top of that bucket */
    g_assert_cmpuint(fsim_latency_quantile(&a, 0.5), ==, 1023);
    g_assert_cmpuint(fsim_latency_quantile(&a, 0.9), ==, 1023);
    /* the 91st sample is in [32768, 65536): its top clamped to the maximum */
    g_assert_cmpuint(fsim_latency_quantile(&a, 0.91), ==, 50000);
    g_assert_cmpuint(fsim_latency_quantile(&a, 1.0), ==, 50000);
    g_assert_cmpuint(fsim_latency_quantile(&a, 0.0), ==, 1023);

    fsim_latency_add(&b, 10);
    fsim_latency_add(&b, 3000);
    fsim_latency_merge(&b, &a);
    fsim_latency_merge(&b, &empty);
    g_assert_cmpuint(b.count, ==, 102);
    g_assert_cmpuint(b.min_ns, ==, 10);
    g_assert_cmpuint(b.max_ns, ==, 50000);
    g_assert_cmpuint(b.total_ns, ==, a.total_ns + 3010);
    g_assert_cmpuint(b.buckets[3], ==, 1);
    g_assert_cmpuint(b.buckets[11], ==, 1);
    fsim_latency_merge(&empty, &b);
    g_assert_cmpuint(empty.min_ns, ==, 10);
    g_assert_cmpuint(empty.count, ==, 102);
}

/* ---- least squares ------------------------------------------------------------------------- */

static void
test_fit_exact(void)
{
    const double x[] = {0.001953125, 0.0078125, 0.5, 1, 4};
    double y[G_N_ELEMENTS(x)];
    FsimLinearFit fit;

    for (gsize i = 0; i < G_N_ELEMENTS(x); i++)
        y[i] = 20000.0 + 150000.0 * x[i];
    g_assert_true(fsim_fit_linear(x, y, G_N_ELEMENTS(x), &fit));
    g_assert_cmpfloat_with_epsilon(fit.base, 20000.0, 1e-6);
    g_assert_cmpfloat_with_epsilon(fit.slope, 150000.0, 1e-6);
    g_assert_cmpfloat_with_epsilon(fit.r2, 1.0, 1e-12);
    g_assert_cmpuint(fit.n, ==, G_N_ELEMENTS(x));
}

static void
test_fit_noisy(void)
{
    /* y = 1 + 2x with residuals +1, -1, -1, +1 at x = 0..3: mean x 1.5, sxx 5, sxy 10, so the
     * slope is 2 and the base 1; ss_res = 4, syy = 24, r2 = 1 - 4/24 */
    const double x[] = {0, 1, 2, 3};
    const double y[] = {2, 2, 4, 8};
    FsimLinearFit fit;

    g_assert_true(fsim_fit_linear(x, y, 4, &fit));
    g_assert_cmpfloat_with_epsilon(fit.slope, 2.0, 1e-12);
    g_assert_cmpfloat_with_epsilon(fit.base, 1.0, 1e-12);
    g_assert_cmpfloat_with_epsilon(fit.r2, 1.0 - 4.0 / 24.0, 1e-12);
}

static void
test_fit_degenerate(void)
{
    const double x[] = {2, 2, 2};
    const double y[] = {10, 20, 30};
    FsimLinearFit fit;

    g_assert_false(fsim_fit_linear(x, y, 0, &fit));
    g_assert_cmpuint(fit.n, ==, 0);
    g_assert_cmpfloat(fit.base, ==, 0.0);
    g_assert_false(fsim_fit_linear(x, y, 1, &fit));
    g_assert_cmpfloat(fit.base, ==, 10.0);
    g_assert_cmpfloat(fit.slope, ==, 0.0);
    /* no spread in x: the mean, no slope */
    g_assert_false(fsim_fit_linear(x, y, 3, &fit));
    g_assert_cmpfloat(fit.base, ==, 20.0);
    g_assert_cmpfloat(fit.slope, ==, 0.0);
}

/* ---- profiles ------------------------------------------------------------------------------ */

static void
assert_spec_equal(const FsimDeviceSpec *a, const FsimDeviceSpec *b)
{
    g_assert_cmpstr(a->name, ==, b->name);
    g_assert_cmpstr(a->description, ==, b->description);
    g_assert_cmpuint(a->total_bytes, ==, b->total_bytes);
    g_assert_cmpuint(a->capacity_bytes, ==, b->capacity_bytes);
    g_assert_cmpuint(a->granularity, ==, b->granularity);
    g_assert_cmpuint(a->costs.malloc_ns, ==, b->costs.malloc_ns);
    g_assert_cmpuint(a->costs.malloc_per_gib_ns, ==, b->costs.malloc_per_gib_ns);
    g_assert_cmpuint(a->costs.free_ns, ==, b->costs.free_ns);
    g_assert_cmpuint(a->costs.free_per_gib_ns, ==, b->costs.free_per_gib_ns);
    g_assert_cmpuint(a->costs.sync_ns, ==, b->costs.sync_ns);
    g_assert_cmpuint(a->costs.reserve_ns, ==, b->costs.reserve_ns);
    g_assert_cmpuint(a->costs.map_ns, ==, b->costs.map_ns);
    g_assert_cmpuint(a->costs.map_per_gib_ns, ==, b->costs.map_per_gib_ns);
    g_assert_cmpuint(a->costs.unmap_ns, ==, b->costs.unmap_ns);
    g_assert_cmpuint(a->costs.unmap_per_gib_ns, ==, b->costs.unmap_per_gib_ns);
}

static void
test_profile_round_trip(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "gpu.ini", NULL);
    FsimDeviceSpec spec;
    FsimDeviceSpec back;

    memset(&spec, 0, sizeof(spec));
    /* characters a key file must escape, and values no default has */
    g_strlcpy(spec.name, "NVIDIA Test; GPU = #1", sizeof(spec.name));
    g_strlcpy(spec.description, "line one\tand a tab, [brackets]", sizeof(spec.description));
    spec.total_bytes = 150754820096;
    spec.capacity_bytes = 149935357952;
    spec.granularity = 2 * FSIM_MiB;
    spec.costs = (FsimDeviceCosts){.malloc_ns = 1,
                                   .malloc_per_gib_ns = 2,
                                   .free_ns = 3,
                                   .free_per_gib_ns = 4,
                                   .sync_ns = 5,
                                   .reserve_ns = 6,
                                   .map_ns = 7,
                                   .map_per_gib_ns = 8,
                                   .unmap_ns = G_MAXUINT32 + (uint64_t)9,
                                   .unmap_per_gib_ns = 10};
    g_assert_true(fsim_cuda_profile_write(path, &spec, NULL, &error));
    g_assert_no_error(error);
    g_assert_true(fsim_device_spec_parse(path, &back, &error));
    g_assert_no_error(error);
    assert_spec_equal(&spec, &back);
    fsim_test_remove_tree(dir);
}

static void
test_profile_unwritable(void)
{
    g_autoptr(GError) error = NULL;
    FsimDeviceSpec spec;

    g_assert_true(fsim_device_spec_parse("h100-80gb", &spec, NULL));
    g_assert_false(fsim_cuda_profile_write("/nonexistent-dir/gpu.ini", &spec, NULL, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_IO);
}

/* ---- the device ---------------------------------------------------------------------------- */

static void
test_device_malloc(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    FsimDevice *device = fake_device(fake, NULL);
    const FsimCudaMeasurements *m;
    FsimAddr a = 0;
    FsimAddr b = 0;
    uint64_t size = 20 * FSIM_MiB;

    g_assert_cmpstr(device->spec.name, ==, "Fake GPU 64GB");
    g_assert_cmpuint(device->spec.capacity_bytes, ==, 64 * FSIM_GiB);
    g_assert_cmpuint(device->spec.total_bytes, ==, 64 * FSIM_GiB + 512 * FSIM_MiB);
    g_assert_cmpint(fsim_device_mem_alloc(device, size, &a), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_mem_alloc(device, 1, &b), ==, FSIM_OK);
    g_assert_cmpuint(a, !=, b);
    g_assert_cmpuint(fake->calls[OP_TOUCH], ==, 2);
    fsim_device_mem_free(device, a, size);
    m = fsim_cuda_device_measurements(device);
    g_assert_nonnull(m);
    g_assert_cmpuint(m->calls[FSIM_CALL_MEM_ALLOC].count, ==, 2);
    /* the fake clock: 20 MiB costs 20000 + 153600 * 20 / 1024 = 23000 ns; 1 byte 20000 ns */
    g_assert_cmpuint(m->calls[FSIM_CALL_MEM_ALLOC].max_ns, ==, 23000);
    g_assert_cmpuint(m->calls[FSIM_CALL_MEM_ALLOC].min_ns, ==, 20000);
    g_assert_cmpuint(m->calls[FSIM_CALL_MEM_FREE].total_ns, ==, 30000 + 51200 * 20 / 1024);
    g_assert_cmpuint(m->measured_time_ns, ==, 43000 + 30000 + 51200 * 20 / 1024);
    g_assert_cmpuint(m->touch.count, ==, 2);
    g_assert_cmpuint(m->touch.total_ns, ==, 2 * FAKE_TOUCH_NS);
    g_assert_cmpuint(m->baseline_used_bytes, ==, 512 * FSIM_MiB);
    g_assert_cmpuint(m->peak_used_bytes, ==, 22 * FSIM_MiB);
    g_assert_cmpuint(m->usage_samples, ==, 2);
    /* the model's charge per kind, as the wrappers computed it */
    g_assert_cmpuint(m->modelled_ns[FSIM_CALL_MEM_ALLOC] + m->modelled_ns[FSIM_CALL_MEM_FREE], ==,
                     device->modelled_time_ns);
    g_assert_cmpuint(m->modelled_ns[FSIM_CALL_MEM_FREE], ==,
                     device->spec.costs.free_ns + device->spec.costs.sync_ns +
                         (uint64_t)((double)device->spec.costs.free_per_gib_ns * 20.0 / 1024.0));
    g_assert_cmpuint(device->calls[FSIM_CALL_MEM_ALLOC], ==, 2);
    g_assert_cmpuint((uint64_t)device->reserved.current, ==, 2 * FSIM_MiB);
    g_assert_null(fsim_cuda_device_error(device));
    /* b is still allocated: freeing the device gives it back */
    fsim_device_free(device);
    fake_assert_clean(fake);
    fsim_cuda_driver_free(&fake->base);
}

static void
test_device_map_handles(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    FsimDevice *device = fake_device(fake, NULL);
    const FsimCudaMeasurements *m;
    uint64_t page = 2 * FSIM_MiB;
    FsimAddr base = 0;

    g_assert_cmpint(fsim_device_va_reserve(device, 64 * FSIM_MiB, page, &base), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_map(device, base, 3 * page, page), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_map(device, base + 4 * page, 2 * 20 * FSIM_MiB, 20 * FSIM_MiB), ==,
                    FSIM_OK);
    g_assert_cmpuint(fsim_cuda_device_handles(device), ==, 5);
    g_assert_cmpuint(fake->calls[OP_CREATE], ==, 5);
    g_assert_cmpuint(fake->calls[OP_MAP], ==, 5);
    g_assert_cmpuint(fake->calls[OP_SET_ACCESS], ==, 2);
    g_assert_cmpuint(fake->used, ==, 3 * page + 40 * FSIM_MiB);
    /* unmap the middle page of the first map, then the rest of it page by page */
    fsim_device_unmap(device, base + page, page, page);
    g_assert_cmpuint(fsim_cuda_device_handles(device), ==, 4);
    g_assert_cmpuint(fake->calls[OP_RELEASE], ==, 1);
    fsim_device_unmap(device, base, page, page);
    fsim_device_unmap(device, base + 2 * page, page, page);
    /* both 20 MiB handles in one call */
    fsim_device_unmap(device, base + 4 * page, 40 * FSIM_MiB, 20 * FSIM_MiB);
    g_assert_cmpuint(fsim_cuda_device_handles(device), ==, 0);
    fsim_device_va_release(device, base, 64 * FSIM_MiB);
    g_assert_null(fsim_cuda_device_error(device));
    fake_assert_clean(fake);
    m = fsim_cuda_device_measurements(device);
    g_assert_cmpuint(m->handles_created, ==, 5);
    g_assert_cmpuint(m->peak_handles, ==, 5);
    g_assert_cmpuint(m->calls[FSIM_CALL_MAP].count, ==, 2);
    /* map of 3 x 2 MiB: 3 creates (2000 + 200 each), 3 maps, one set_access */
    g_assert_cmpuint(m->calls[FSIM_CALL_MAP].min_ns, ==, 3 * 2200 + 3 * 1000 + 500);
    /* unmap: a synchronisation, then unmap + release per handle */
    g_assert_cmpuint(m->calls[FSIM_CALL_UNMAP].count, ==, 4);
    g_assert_cmpuint(m->calls[FSIM_CALL_UNMAP].min_ns, ==, FAKE_SYNC_NS + 2000);
    g_assert_cmpuint(m->calls[FSIM_CALL_UNMAP].max_ns, ==, FAKE_SYNC_NS + 2 * 2000);
    g_assert_cmpuint(m->calls[FSIM_CALL_VA_RESERVE].total_ns, ==, FAKE_RESERVE_NS);
    g_assert_cmpuint(m->calls[FSIM_CALL_VA_RELEASE].total_ns, ==, FAKE_ADDRESS_FREE_NS);
    g_assert_cmpuint(m->peak_used_bytes, ==, 3 * page + 40 * FSIM_MiB);
    fsim_device_free(device);
    fsim_cuda_driver_free(&fake->base);
}

static void
test_device_map_rollback(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    FsimDevice *device = fake_device(fake, NULL);
    const FsimCudaMeasurements *m;
    uint64_t page = 2 * FSIM_MiB;
    FsimAddr base = 0;

    g_assert_cmpint(fsim_device_va_reserve(device, 16 * page, page, &base), ==, FSIM_OK);
    fake->fail_op = OP_CREATE;
    fake->fail_at = 3;
    fake->fail_code = FSIM_CUDA_ERROR_OUT_OF_MEMORY;
    g_assert_cmpint(fsim_device_map(device, base, 4 * page, page), ==, FSIM_OOM);
    /* all or nothing: the two handles made were unmapped and released */
    g_assert_cmpuint(fsim_cuda_device_handles(device), ==, 0);
    g_assert_cmpuint(g_hash_table_size(fake->handles), ==, 0);
    g_assert_cmpuint(g_hash_table_size(fake->mappings), ==, 0);
    g_assert_cmpuint(fake->calls[OP_RELEASE], ==, 2);
    g_assert_null(fsim_cuda_device_error(device));
    g_assert_cmpuint(device->calls[FSIM_CALL_MAP], ==, 0);
    g_assert_cmpuint(device->attempts[FSIM_CALL_MAP], ==, 1);
    g_assert_cmpuint((uint64_t)device->reserved.current, ==, 0);
    m = fsim_cuda_device_measurements(device);
    g_assert_cmpuint(m->failed.count, ==, 1);
    g_assert_cmpuint(m->calls[FSIM_CALL_MAP].count, ==, 0);
    /* the next map works */
    g_assert_cmpint(fsim_device_map(device, base, 4 * page, page), ==, FSIM_OK);
    g_assert_cmpuint(fsim_cuda_device_handles(device), ==, 4);
    fsim_device_free(device);
    fake_assert_clean(fake);
    fsim_cuda_driver_free(&fake->base);
}

static void
test_device_failure(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    FsimDevice *device = fake_device(fake, NULL);
    FsimAddr addr = 0;
    const GError *failure;

    fake->fail_op = OP_MEM_ALLOC;
    fake->fail_at = 2;
    fake->fail_code = FSIM_CUDA_ERROR_FAILED;
    g_assert_cmpint(fsim_device_mem_alloc(device, FSIM_MiB, &addr), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_mem_alloc(device, FSIM_MiB, &addr), ==, FSIM_OOM);
    failure = fsim_cuda_device_error(device);
    g_assert_nonnull(failure);
    g_assert_true(g_error_matches(failure, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_FAILED));
    g_assert_nonnull(strstr(failure->message, "cudaMalloc"));
    /* the first failure is kept */
    fsim_device_mem_free(device, 0x1234, FSIM_MiB);
    g_assert_true(fsim_cuda_device_error(device) == failure);
    fsim_device_free(device);
    fake_assert_clean(fake);
    fsim_cuda_driver_free(&fake->base);
}

static void
test_device_policy_bug(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    FsimDevice *device = fake_device(fake, NULL);
    FsimAddr base = 0;

    fsim_device_mem_free(device, 0x1234, FSIM_MiB);
    g_assert_nonnull(fsim_cuda_device_error(device));
    g_assert_nonnull(strstr(fsim_cuda_device_error(device)->message, "policy bug"));
    g_assert_cmpuint(fake->calls[OP_MEM_FREE], ==, 0);
    fsim_device_free(device);

    /* unmap of a range that is not a run of mapped pages: nothing reaches the driver */
    device = fake_device(fake, NULL);
    g_assert_cmpint(fsim_device_va_reserve(device, 8 * FSIM_MiB, 0, &base), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_map(device, base, 2 * FSIM_MiB, 2 * FSIM_MiB), ==, FSIM_OK);
    fsim_device_unmap(device, base, 4 * FSIM_MiB, 2 * FSIM_MiB);
    g_assert_nonnull(fsim_cuda_device_error(device));
    g_assert_cmpuint(fake->calls[OP_UNMAP], ==, 0);
    fsim_device_free(device);
    fake_assert_clean(fake);
    fsim_cuda_driver_free(&fake->base);
}

static void
test_device_small_handles(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    FsimDevice *device = fake_device(fake, NULL);
    FsimAddr base = 0;
    const GError *failure;

    g_assert_cmpint(fsim_device_va_reserve(device, 2 * FSIM_MiB, 0, &base), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_map(device, base, 128 * FSIM_KiB, 64 * FSIM_KiB), ==, FSIM_OOM);
    failure = fsim_cuda_device_error(device);
    g_assert_true(g_error_matches(failure, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_UNSUPPORTED));
    g_assert_nonnull(strstr(failure->message, "granularity"));
    g_assert_cmpuint(fake->calls[OP_CREATE], ==, 0);
    fsim_device_free(device);
    fake_assert_clean(fake);
    fsim_cuda_driver_free(&fake->base);
}

static void
test_device_capacity_and_faults(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) error = NULL;
    FsimDeviceSpec model;
    FsimDeviceSpec spec;
    FsimDevice *device;
    FsimAddr addr = 0;

    /* -d 16MiB caps the GPU's 64 GiB: the device refuses before the driver is asked */
    g_assert_true(fsim_device_spec_parse("16MiB", &model, NULL));
    g_assert_true(fsim_cuda_spec_for_gpu(&fake->base, &model, &spec, &error));
    g_assert_cmpuint(spec.capacity_bytes, ==, 16 * FSIM_MiB);
    g_assert_cmpstr(spec.name, ==, "Fake GPU 64GB");
    g_key_file_set_value(config, "device", "fail_mem_alloc_at", "2");
    device = fsim_cuda_device_new(&fake->base, &spec, config, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpint(fsim_device_mem_alloc(device, 8 * FSIM_MiB, &addr), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_mem_alloc(device, 2 * FSIM_MiB, &addr), ==, FSIM_OOM);  /* fault */
    g_assert_cmpint(fsim_device_mem_alloc(device, 10 * FSIM_MiB, &addr), ==, FSIM_OOM); /* cap */
    g_assert_cmpint(fsim_device_mem_alloc(device, 8 * FSIM_MiB, &addr), ==, FSIM_OK);
    g_assert_cmpuint(fake->calls[OP_MEM_ALLOC], ==, 2);
    g_assert_null(fsim_cuda_device_error(device));
    /* a closed device gives everything back and refuses further calls */
    fsim_cuda_device_close(device);
    fake_assert_clean(fake);
    g_assert_cmpint(fsim_device_mem_alloc(device, 2 * FSIM_MiB, &addr), ==, FSIM_OOM);
    fsim_device_mem_free(device, addr, 8 * FSIM_MiB);
    g_assert_cmpuint(fake->calls[OP_MEM_ALLOC], ==, 2);
    g_assert_null(fsim_cuda_device_error(device));
    fsim_device_free(device);

    /* a device granularity that is not a multiple of the GPU's is refused */
    spec.granularity = 64 * FSIM_KiB;
    g_assert_null(fsim_cuda_device_new(&fake->base, &spec, NULL, NULL, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    fsim_cuda_driver_free(&fake->base);
}

/* ---- replay -------------------------------------------------------------------------------- */

/* Every registered policy: the GPU run makes the same calls as the model run and reaches the
 * same peak (the fake driver refuses nothing and only addresses differ), the measured calls are
 * those the engine counted, and the GPU is clean afterwards. */
static void
test_replay_policy(gconstpointer data)
{
    const FsimPolicyOps *ops = data;
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    g_autoptr(FsimTrace) trace = fsim_test_open_trace("golden-fragment.trace");
    g_autoptr(GError) error = NULL;
    FsimCudaReplayOptions options;
    FsimCudaReplayResult result;
    const FsimMetrics *gpu = &result.gpu;
    const FsimCudaMeasurements *m = &result.measured;
    uint64_t measured_calls = 0;
    uint64_t modelled = 0;

    fsim_cuda_replay_options_init(&options);
    options.policy = ops->name;
    g_assert_true(fsim_cuda_replay(&fake->base, trace, 0, &options, &result, &error));
    g_assert_no_error(error);
    g_assert_cmpstr(result.policy, ==, ops->name);
    g_assert_cmpstr(result.gpu_spec.name, ==, "Fake GPU 64GB");
    g_assert_cmpstr(result.model_spec.name, ==, "Fake GPU 64GB (model)");
    g_assert_true(result.has_model);
    g_assert_cmpuint(gpu->events, ==, result.model.events);
    g_assert_cmpuint(gpu->peak_requested_bytes, ==, 41943041);
    g_assert_cmpuint(gpu->ooms, ==, 0);
    /* Policies that never compare addresses of different segments decide exactly as in the
     * model; others may choose differently among equal blocks, a difference the GPU run exists
     * to show. */
    if (strcmp(ops->name, "direct") == 0 || strcmp(ops->name, "bestfit") == 0 ||
        strcmp(ops->name, "paged") == 0) {
        g_assert_cmpuint(gpu->peak_reserved_bytes, ==, result.model.peak_reserved_bytes);
        g_assert_cmpuint(gpu->peak_allocated_bytes, ==, result.model.peak_allocated_bytes);
        g_assert_cmpuint(gpu->device_mallocs, ==, result.model.device_mallocs);
        g_assert_cmpuint(gpu->device_frees, ==, result.model.device_frees);
        g_assert_cmpuint(gpu->device_maps, ==, result.model.device_maps);
        g_assert_cmpuint(gpu->device_unmaps, ==, result.model.device_unmaps);
        g_assert_cmpuint(gpu->modelled_alloc_time_ns, ==, result.model.modelled_alloc_time_ns);
    }
    g_assert_cmpuint(m->calls[FSIM_CALL_MEM_ALLOC].count, ==, gpu->device_mallocs);
    g_assert_cmpuint(m->calls[FSIM_CALL_MEM_FREE].count, ==, gpu->device_frees);
    g_assert_cmpuint(m->calls[FSIM_CALL_MAP].count, ==, gpu->device_maps);
    g_assert_cmpuint(m->calls[FSIM_CALL_UNMAP].count, ==, gpu->device_unmaps);
    for (int c = 0; c < FSIM_CALL_COUNT; c++) {
        measured_calls += m->calls[c].total_ns;
        modelled += m->modelled_ns[c];
    }
    g_assert_cmpuint(measured_calls, ==, m->measured_time_ns);
    g_assert_cmpuint(modelled, ==, gpu->modelled_alloc_time_ns);
    g_assert_cmpuint(m->peak_used_bytes, >=, gpu->peak_reserved_bytes);
    g_assert_nonnull(result.gpu_engine);
    g_assert_nonnull(result.model_engine);
    /* the run's memory went back when it ended, before the result is cleared */
    fake_assert_clean(fake);
    fsim_cuda_replay_result_clear(&result);
    fake_assert_clean(fake);
    fsim_cuda_driver_free(&fake->base);
}

/* The golden numbers of tests/data/traces/expected/golden-fragment.txt hold on the GPU too. */
static void
test_replay_golden(void)
{
    static const struct {
        const char *policy;
        uint64_t peak_reserved, mallocs, frees, maps, unmaps;
    } expected[] = {
        {"direct", 44040192, 7, 3, 0, 0},
        {"bestfit", 46137344, 0, 0, 5, 0},
        {"paged", 44040192, 0, 0, 7, 3},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(expected); i++) {
        FakeDriver *fake = fake_new(64 * FSIM_GiB);
        g_autoptr(FsimTrace) trace = fsim_test_open_trace("golden-fragment.trace");
        g_autoptr(GError) error = NULL;
        FsimCudaReplayOptions options;
        FsimCudaReplayResult result;

        fsim_cuda_replay_options_init(&options);
        options.policy = expected[i].policy;
        options.with_model = FALSE;
        g_assert_true(fsim_cuda_replay(&fake->base, trace, 0, &options, &result, &error));
        g_assert_no_error(error);
        g_assert_false(result.has_model);
        g_assert_null(result.model_engine);
        g_assert_cmpuint(result.gpu.peak_reserved_bytes, ==, expected[i].peak_reserved);
        g_assert_cmpuint(result.gpu.device_mallocs, ==, expected[i].mallocs);
        g_assert_cmpuint(result.gpu.device_frees, ==, expected[i].frees);
        g_assert_cmpuint(result.gpu.device_maps, ==, expected[i].maps);
        g_assert_cmpuint(result.gpu.device_unmaps, ==, expected[i].unmaps);
        g_assert_cmpuint(fake->calls[OP_MEM_ALLOC], ==, expected[i].mallocs);
        fsim_cuda_replay_result_clear(&result);
        fake_assert_clean(fake);
        fsim_cuda_driver_free(&fake->base);
    }
}

/* The driver takes more than the model thinks (2 MiB of overhead per cudaMalloc): the GPU run
 * meets OOMs the model does not. */
static void
test_replay_driver_refuses(void)
{
    FakeDriver *fake = fake_new(48 * FSIM_MiB);
    g_autoptr(FsimTrace) trace = fsim_test_open_trace("golden-fragment.trace");
    g_autoptr(GError) error = NULL;
    FsimCudaReplayOptions options;
    FsimCudaReplayResult result;

    fake->malloc_overhead = 2 * FSIM_MiB;
    fsim_cuda_replay_options_init(&options);
    options.policy = "direct";
    g_assert_true(fsim_cuda_replay(&fake->base, trace, 0, &options, &result, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(result.model.ooms, ==, 0);
    g_assert_cmpuint(result.gpu.ooms, >, 0);
    g_assert_cmpint(result.gpu.first_oom_event, >=, 0);
    g_assert_cmpuint(result.measured.failed.count, ==, result.gpu.ooms);
    fsim_cuda_replay_result_clear(&result);
    fake_assert_clean(fake);

    /* --fail-on-oom stops the GPU side only; the model side finishes */
    fsim_cuda_replay_options_init(&options);
    options.policy = "direct";
    options.fail_on_oom = TRUE;
    g_assert_true(fsim_cuda_replay(&fake->base, trace, 0, &options, &result, &error));
    g_assert_no_error(error);
    g_assert_true(result.gpu_oom_stopped);
    g_assert_false(result.model_oom_stopped);
    g_assert_nonnull(result.oom_message);
    g_assert_cmpuint(result.model.events, ==, 10);
    fsim_cuda_replay_result_clear(&result);
    fake_assert_clean(fake);
    fsim_cuda_driver_free(&fake->base);
}

/* A driver failure stops the replay with an error naming the event and the call. */
static void
test_replay_driver_fails(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    g_autoptr(FsimTrace) trace = fsim_test_open_trace("golden-fragment.trace");
    g_autoptr(GError) error = NULL;
    g_autoptr(GKeyFile) config = g_key_file_new();
    FsimCudaReplayOptions options;
    FsimCudaReplayResult result;

    fake->fail_op = OP_MEM_FREE;
    fake->fail_at = 1;
    fake->fail_code = FSIM_CUDA_ERROR_FAILED;
    fsim_cuda_replay_options_init(&options);
    options.policy = "direct";
    g_assert_false(fsim_cuda_replay(&fake->base, trace, 0, &options, &result, &error));
    g_assert_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_FAILED);
    g_assert_nonnull(strstr(error->message, "event 20"));
    g_assert_nonnull(strstr(error->message, "cudaFree"));
    fsim_cuda_replay_result_clear(&result);
    fake_assert_clean(fake);
    g_clear_error(&error);

    /* 64 KiB pages cannot be mapped on a GPU of 2 MiB granularity */
    fake->fail_op = -1;
    g_key_file_set_value(config, "paged", "page_size", "64KiB");
    fsim_cuda_replay_options_init(&options);
    options.policy = "paged";
    options.config = config;
    g_assert_false(fsim_cuda_replay(&fake->base, trace, 0, &options, &result, &error));
    g_assert_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, "event 16"));
    fsim_cuda_replay_result_clear(&result);
    fake_assert_clean(fake);
    fsim_cuda_driver_free(&fake->base);
}

static gboolean
count_attach(gpointer data, FsimEngine *engine, gboolean on_gpu, GError **error)
{
    guint *counts = data;

    (void)error;
    g_assert_nonnull(engine);
    counts[on_gpu ? 0 : 1]++;
    return TRUE;
}

static void
test_replay_attach(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    g_autoptr(FsimTrace) trace = fsim_test_open_trace("golden-fragment.trace");
    g_autoptr(GError) error = NULL;
    FsimCudaReplayOptions options;
    FsimCudaReplayResult result;
    guint counts[2] = {0, 0};

    fsim_cuda_replay_options_init(&options);
    options.attach = count_attach;
    options.attach_data = counts;
    g_assert_true(fsim_cuda_replay(&fake->base, trace, 0, &options, &result, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(counts[0], ==, 1);
    g_assert_cmpuint(counts[1], ==, 1);
    fsim_cuda_replay_result_clear(&result);
    fsim_cuda_driver_free(&fake->base);
}

/* Both runs of a replay go to the results database as replay's runs do: the GPU run named after
 * the GPU, the model run after "<GPU> (model)". */
typedef struct {
    FsimStore *store;
    FsimTrace *trace;
    GPtrArray *runs; /* FsimStoreRun */
} StoreAttach;

static gboolean
store_attach(gpointer data, FsimEngine *engine, gboolean on_gpu, GError **error)
{
    StoreAttach *attach = data;
    FsimStoreRunInfo info = {
        .trace = fsim_trace_path(attach->trace),
        .trace_format = fsim_trace_format_name(attach->trace),
        .trace_device = 0,
        .policy = fsim_engine_policy(engine)->ops->name,
        .seed = -1,
    };
    FsimStoreRun *run = fsim_store_attach(attach->store, engine, &info, error);

    (void)on_gpu;
    if (run == NULL)
        return FALSE;
    g_ptr_array_add(attach->runs, run);
    return TRUE;
}

static void
test_replay_store(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    g_autoptr(FsimTrace) trace = fsim_test_open_trace("golden-fragment.trace");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(":memory:", FSIM_STORE_WRITE, NULL, &error);
    g_autoptr(GPtrArray) runs = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_store_run_free);
    g_autoptr(GPtrArray) stored = NULL;
    StoreAttach attach = {store, trace, runs};
    FsimCudaReplayOptions options;
    FsimCudaReplayResult result;

    g_assert_no_error(error);
    fsim_cuda_replay_options_init(&options);
    options.policy = "paged";
    options.attach = store_attach;
    options.attach_data = &attach;
    g_assert_true(fsim_cuda_replay(&fake->base, trace, 0, &options, &result, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(runs->len, ==, 2);
    /* after the replay: the GPU is clean, the engines still readable */
    fake_assert_clean(fake);
    for (guint i = 0; i < runs->len; i++) {
        g_assert_true(
            fsim_store_run_finish(g_ptr_array_index(runs, i), FSIM_STORE_COMPLETE, &error));
        g_assert_no_error(error);
    }
    stored = fsim_store_runs(store, NULL, 0, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(stored->len, ==, 2);
    for (guint i = 0; i < stored->len; i++) {
        const FsimStoredRun *run = g_ptr_array_index(stored, i);

        g_assert_cmpstr(run->policy, ==, "paged");
        g_assert_cmpint(run->status, ==, FSIM_STORE_COMPLETE);
        g_assert_true(run->has_metrics);
        g_assert_cmpuint(run->metrics.peak_reserved_bytes, ==, 44040192);
        g_assert_cmpuint(run->metrics.device_maps, ==, 7);
        g_assert_cmpuint(run->capacity_bytes, ==, 64 * FSIM_GiB);
    }
    g_assert_cmpstr(((FsimStoredRun *)g_ptr_array_index(stored, 0))->device, ==, "Fake GPU 64GB");
    g_assert_cmpstr(((FsimStoredRun *)g_ptr_array_index(stored, 1))->device, ==,
                    "Fake GPU 64GB (model)");
    /* the store's runs observe the engines: free them first */
    g_clear_pointer(&runs, g_ptr_array_unref);
    fsim_cuda_replay_result_clear(&result);
    fsim_cuda_driver_free(&fake->base);
}

/* ---- native -------------------------------------------------------------------------------- */

static const char native_trace[] = "fragsim-trace v1\n"
                                   "0 alloc 1 3145728 0\n" /* 3 MiB -> 4 MiB */
                                   "1 alloc 2 1048576 0\n" /* 1 MiB -> 2 MiB */
                                   "2 free 1 0\n"
                                   "3 alloc 3 2097152 0\n" /* 2 MiB */
                                   "4 free 99 0\n"         /* unknown */
                                   "5 empty_cache\n"
                                   "6 alloc 4 8388608 0\n" /* 8 MiB */
                                   "7 free 2 0\n"
                                   "8 mark end\n";

static void
test_native(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "native.trace", NULL);
    g_autoptr(FsimTrace) trace = NULL;
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    FsimCudaNativeResult r;

    g_assert_true(g_file_set_contents(path, native_trace, -1, &error));
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);

    g_assert_true(
        fsim_cuda_native(&fake->base, trace, 0, FSIM_CUDA_NATIVE_MALLOC, TRUE, &r, &error));
    g_assert_no_error(error);
    g_assert_cmpint(r.mode, ==, FSIM_CUDA_NATIVE_MALLOC);
    g_assert_cmpuint(r.events, ==, 9);
    g_assert_cmpuint(r.allocs, ==, 4);
    g_assert_cmpuint(r.frees, ==, 3);
    g_assert_cmpuint(r.unmatched_frees, ==, 1);
    g_assert_cmpuint(r.empty_caches, ==, 1);
    g_assert_cmpuint(r.ooms, ==, 0);
    g_assert_cmpint(r.first_oom_event, ==, -1);
    g_assert_cmpuint(r.peak_requested_bytes, ==, 11 * FSIM_MiB);
    /* 4+2 MiB, then 2+2 MiB, then 2+2+8 MiB */
    g_assert_cmpuint(r.peak_used_bytes, ==, 12 * FSIM_MiB);
    g_assert_cmpuint(r.peak_reserved_bytes, ==, 12 * FSIM_MiB);
    g_assert_cmpuint(r.alloc.count, ==, 4);
    g_assert_cmpuint(r.dealloc.count, ==, 2);
    g_assert_cmpuint(r.touch.count, ==, 4);
    fake_assert_clean(fake);

    g_assert_true(
        fsim_cuda_native(&fake->base, trace, 0, FSIM_CUDA_NATIVE_ASYNC, FALSE, &r, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(r.allocs, ==, 4);
    g_assert_cmpuint(r.touch.count, ==, 0);
    /* the pool grows to 6 MiB, reuses 4 MiB for the 2 MiB block, is trimmed to 4 MiB, grows to
     * 12 MiB */
    g_assert_cmpuint(r.pool_used_high_bytes, ==, 12 * FSIM_MiB);
    g_assert_cmpuint(r.peak_reserved_bytes, ==, 12 * FSIM_MiB);
    g_assert_cmpuint(r.peak_used_bytes, ==, 12 * FSIM_MiB);
    g_assert_cmpuint(fake->calls[OP_POOL_ALLOC], ==, 4);
    fake_assert_clean(fake);

    /* a pool-less GPU */
    fake->base.info.pools_supported = FALSE;
    g_assert_false(
        fsim_cuda_native(&fake->base, trace, 0, FSIM_CUDA_NATIVE_ASYNC, FALSE, &r, &error));
    g_assert_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_UNSUPPORTED);
    g_clear_error(&error);

    /* refused allocations are OOMs; their frees are ignored */
    fake->capacity = 5 * FSIM_MiB;
    g_assert_true(
        fsim_cuda_native(&fake->base, trace, 0, FSIM_CUDA_NATIVE_MALLOC, TRUE, &r, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(r.ooms, ==, 2);
    g_assert_cmpint(r.first_oom_event, ==, 3);
    g_assert_cmpuint(r.unmatched_frees, ==, 1);
    fake_assert_clean(fake);
    fsim_cuda_driver_free(&fake->base);
    trace = (fsim_trace_close(trace), NULL);
    fsim_test_remove_tree(dir);
}

/* ---- calibration --------------------------------------------------------------------------- */

static void
test_calibrate(void)
{
    FakeDriver *fake = fake_new(64 * FSIM_GiB);
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "calibrated.ini", NULL);
    g_autoptr(GKeyFile) key_file = g_key_file_new();
    FsimCudaCalibrateOptions options;
    FsimCudaCalibration cal;
    FsimDeviceSpec spec;
    FsimDeviceSpec back;
    const FsimCudaSeries *malloc_series;

    fsim_cuda_calibrate_options_init(&options);
    options.repeat = 3;
    g_assert_true(fsim_cuda_calibrate(&fake->base, &options, &cal, &error));
    g_assert_no_error(error);
    fake_assert_clean(fake);

    /* sizes 2 MiB .. 4 GiB, doubling */
    malloc_series = &cal.series[FSIM_CUDA_SERIES_MALLOC];
    g_assert_cmpuint(malloc_series->sizes->len, ==, 12);
    g_assert_cmpuint(g_array_index(malloc_series->sizes, uint64_t, 11), ==, 4 * FSIM_GiB);
    g_assert_cmpfloat_with_epsilon(malloc_series->fit.r2, 1.0, 1e-9);
    g_assert_cmpuint(cal.series[FSIM_CUDA_SERIES_SYNC].sizes->len, ==, 1);

    /* the fake's cudaMalloc rounds every allocation to 2 MiB */
    g_assert_cmpuint(cal.observed_step, ==, 2 * FSIM_MiB);
    g_assert_cmpuint(cal.steps->len, ==, 8);
    g_assert_cmpuint(g_array_index(cal.steps, FsimCudaUsageStep, 0).count, ==, 5);
    g_assert_cmpuint(g_array_index(cal.steps, FsimCudaUsageStep, 0).used_bytes, ==,
                     5 * 2 * FSIM_MiB);
    g_assert_cmpuint(g_array_index(cal.steps, FsimCudaUsageStep, 3).size, ==, 2 * FSIM_MiB + 1);
    g_assert_cmpuint(g_array_index(cal.steps, FsimCudaUsageStep, 3).used_bytes, ==,
                     5 * 4 * FSIM_MiB);

    /* the fake's costs, to the nanosecond */
    g_assert_cmpuint(cal.costs.malloc_ns, ==, FAKE_MALLOC_NS);
    g_assert_cmpuint(cal.costs.malloc_per_gib_ns, ==, FAKE_MALLOC_PER_GIB_NS);
    g_assert_cmpuint(cal.costs.sync_ns, ==, FAKE_SYNC_NS);
    g_assert_cmpuint(cal.costs.free_ns, ==, FAKE_FREE_NS - FAKE_SYNC_NS);
    g_assert_cmpuint(cal.costs.free_per_gib_ns, ==, FAKE_FREE_PER_GIB_NS);
    g_assert_cmpuint(cal.costs.reserve_ns, ==, (FAKE_RESERVE_NS + FAKE_ADDRESS_FREE_NS) / 2);
    g_assert_cmpuint(cal.costs.map_ns, ==, FAKE_CREATE_NS + FAKE_MAP_NS + FAKE_SET_ACCESS_NS);
    g_assert_cmpuint(cal.costs.map_per_gib_ns, ==, FAKE_CREATE_PER_GIB_NS);
    g_assert_cmpuint(cal.costs.unmap_ns, ==, FAKE_UNMAP_NS + FAKE_RELEASE_NS);

    /* the profile: -d reads it back as the calibrated spec */
    fsim_cuda_calibration_spec(&cal, &spec);
    g_assert_cmpstr(spec.name, ==, "Fake GPU 64GB");
    g_assert_cmpuint(spec.capacity_bytes, ==, 64 * FSIM_GiB);
    g_assert_cmpuint(spec.total_bytes, ==, 64 * FSIM_GiB + 512 * FSIM_MiB);
    g_assert_true(fsim_cuda_profile_write(path, &spec, &cal, &error));
    g_assert_no_error(error);
    g_assert_true(fsim_device_spec_parse(path, &back, &error));
    g_assert_no_error(error);
    assert_spec_equal(&spec, &back);
    g_assert_true(g_key_file_load_from_file(key_file, path, G_KEY_FILE_NONE, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(g_key_file_get_uint64(key_file, "calibration", "observed_step", NULL), ==,
                     2 * FSIM_MiB);
    g_assert_true(g_key_file_has_key(key_file, "calibration", "map_median_ns", NULL));
    g_assert_true(g_key_file_has_key(key_file, "calibration", "malloc_fit", NULL));
    fsim_cuda_calibration_clear(&cal);

    /* small free memory: the sizes stop at a quarter of it; a GPU without VMM has no map series */
    fake->capacity = 64 * FSIM_MiB;
    fake->base.info.vmm_supported = FALSE;
    g_assert_true(fsim_cuda_calibrate(&fake->base, &options, &cal, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(cal.series[FSIM_CUDA_SERIES_MALLOC].sizes->len, ==, 4); /* 2..16 MiB */
    g_assert_cmpuint(cal.series[FSIM_CUDA_SERIES_MAP].sizes->len, ==, 0);
    g_assert_cmpuint(cal.costs.map_ns, ==, fsim_device_costs_default().map_ns);
    fsim_cuda_calibration_clear(&cal);
    fake_assert_clean(fake);

    /* a failure other than a lack of memory stops calibration */
    fake->fail_op = OP_MEM_FREE;
    fake->fail_at = fake->calls[OP_MEM_FREE] + 20;
    fake->fail_code = FSIM_CUDA_ERROR_FAILED;
    g_assert_false(fsim_cuda_calibrate(&fake->base, &options, &cal, &error));
    g_assert_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_FAILED);
    fsim_cuda_calibration_clear(&cal);
    fsim_cuda_driver_free(&fake->base);
    fsim_test_remove_tree(dir);
}

/* ---- the real driver ----------------------------------------------------------------------- */

/* Here (no GPU, or no toolkit) opening fails with a clear message; with a GPU it works. */
static void
test_driver_open(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimCudaDriver) driver = fsim_cuda_driver_open(0, &error);

    if (driver != NULL) {
        g_assert_no_error(error);
        g_assert_cmpuint(driver->info.granularity, >, 0);
        return;
    }
    if (fsim_cuda_backend_built()) {
        g_assert_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_NO_DEVICE);
        g_assert_true(g_str_has_prefix(error->message, "no CUDA device"));
    } else {
        g_assert_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_UNSUPPORTED);
    }
    g_assert_null(fsim_cuda_driver_open(-1, NULL));
}

int
main(int argc, char **argv)
{
    gsize n;
    const FsimPolicyOps *const *policies;

    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cuda/latency/buckets", test_latency_buckets);
    g_test_add_func("/cuda/latency/stats", test_latency_stats);
    g_test_add_func("/cuda/fit/exact", test_fit_exact);
    g_test_add_func("/cuda/fit/noisy", test_fit_noisy);
    g_test_add_func("/cuda/fit/degenerate", test_fit_degenerate);
    g_test_add_func("/cuda/profile/round-trip", test_profile_round_trip);
    g_test_add_func("/cuda/profile/unwritable", test_profile_unwritable);
    g_test_add_func("/cuda/device/malloc", test_device_malloc);
    g_test_add_func("/cuda/device/map-handles", test_device_map_handles);
    g_test_add_func("/cuda/device/map-rollback", test_device_map_rollback);
    g_test_add_func("/cuda/device/failure", test_device_failure);
    g_test_add_func("/cuda/device/policy-bug", test_device_policy_bug);
    g_test_add_func("/cuda/device/small-handles", test_device_small_handles);
    g_test_add_func("/cuda/device/capacity-and-faults", test_device_capacity_and_faults);
    policies = fsim_policy_list(&n);
    for (gsize i = 0; i < n; i++) {
        g_autofree char *name = g_strdup_printf("/cuda/replay/policy/%s", policies[i]->name);

        g_test_add_data_func(name, policies[i], test_replay_policy);
    }
    g_test_add_func("/cuda/replay/golden", test_replay_golden);
    g_test_add_func("/cuda/replay/driver-refuses", test_replay_driver_refuses);
    g_test_add_func("/cuda/replay/driver-fails", test_replay_driver_fails);
    g_test_add_func("/cuda/replay/attach", test_replay_attach);
    g_test_add_func("/cuda/replay/store", test_replay_store);
    g_test_add_func("/cuda/native", test_native);
    g_test_add_func("/cuda/calibrate", test_calibrate);
    g_test_add_func("/cuda/driver/open", test_driver_open);
    return g_test_run();
}
