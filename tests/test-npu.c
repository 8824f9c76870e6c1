/* SPDX-License-Identifier: MIT */
/*
 * The Ascend NPU variant of the PyTorch model (`caching.platform=npu`, torch_npu's
 * NPUCachingAllocator): requests padded by 32 bytes before the 512-byte rounding, the pool and the
 * segment chosen on the padded size; the platform told from a snapshot's addresses; the shared NPU
 * snapshot validated exactly, and every CUDA one still told CUDA.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/fragsim.h"

#include "knob-harness.h"
#include "test-util.h"

#define MIB FSIM_MiB

static const char npu_snapshot[] =
    "codeasier__MemSnapDump__tests__test_data__snapshot_with_empty_cache.pkl";

/* An exact 40 MiB request: 40 MiB + 512 B on the NPU, in a 42 MiB segment; an exact 1 MiB
 * request goes to the large pool (a 20 MiB segment) instead of a 2 MiB small one; 480 bytes
 * round to 512 on both, 481 to 1024 on the NPU only. */
static void
test_padding(void)
{
    static const char *const npu[] = {"caching.platform=npu", NULL};
    static const char *const cuda[] = {"caching.platform=cuda", NULL};
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimBlock d;

    harness_init_knobs(&h, "caching", "1GiB", npu);
    b = harness_alloc(&h, MIB, 0);
    g_assert_cmpuint(b.size, ==, MIB + 512);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->size, ==, 20 * MIB);
    a = harness_alloc(&h, 40 * MIB, 0);
    g_assert_cmpuint(a.size, ==, 40 * MIB + 512);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 1)->size, ==, 42 * MIB);
    c = harness_alloc(&h, 480, 0);
    d = harness_alloc(&h, 481, 0);
    g_assert_cmpuint(c.size, ==, 512);
    g_assert_cmpuint(d.size, ==, 1024);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 2)->size, ==, 2 * MIB);
    harness_clear(&h);

    harness_init_knobs(&h, "caching", "1GiB", cuda);
    b = harness_alloc(&h, MIB, 0);
    a = harness_alloc(&h, 40 * MIB, 0);
    d = harness_alloc(&h, 481, 0);
    g_assert_cmpuint(b.size, ==, MIB);
    g_assert_cmpuint(a.size, ==, 40 * MIB);
    g_assert_cmpuint(d.size, ==, 512);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->size, ==, 2 * MIB);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 1)->size, ==, 40 * MIB);
    harness_clear(&h);
}

static void
test_bad_platform(void)
{
    FsimDeviceSpec spec;
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimDevice) device = NULL;
    g_autoptr(FsimPolicy) policy = NULL;

    g_assert_true(fsim_device_spec_parse("1GiB", &spec, &error));
    device = fsim_device_sim_new(&spec, NULL, &error);
    g_key_file_set_string(config, "expandable", "platform", "rocm");
    policy = fsim_policy_new("expandable", device, config, &error);
    g_assert_null(policy);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_assert_nonnull(strstr(error->message, "expandable.platform"));
}

/* The shared NPU snapshot: told NPU by its frames (a stack through torch_npu's memory.py), and by
 * its addresses alone when the frames say nothing; exact; forced to CUDA it diverges at once (its
 * first segment is 42 MiB, not 40). */
static void
test_npu_snapshot(void)
{
    g_autofree char *path = fsim_test_shared_trace(npu_snapshot);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimValidateReport) report = NULL;
    g_autoptr(FsimValidateReport) forced = NULL;

    if (path == NULL)
        return;
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    g_assert_true(trace->frames_name_torch_npu);
    {
        const char *why = NULL;

        g_assert_cmpstr(fsim_trace_detect_platform_why(trace, &why, &error), ==, "npu");
        g_assert_cmpstr(why, ==, "its frames name torch_npu");
        trace->frames_name_torch_npu = FALSE; /* the addresses tell as much */
        g_assert_cmpstr(fsim_trace_detect_platform_why(trace, &why, &error), ==, "npu");
        g_assert_no_error(error);
        g_assert_nonnull(strstr(why, "32-byte padding"));
        trace->frames_name_torch_npu = TRUE;
    }
    report = fsim_validate_trace(trace, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(report->platform, ==, "npu");
    g_assert_true(report->platform_detected);
    g_assert_true(report->exact);
    forced = fsim_validate_trace_on(trace, "cuda", &error);
    g_assert_no_error(error);
    g_assert_false(forced->platform_detected);
    g_assert_false(forced->exact);
}

/* Every other shared snapshot is told CUDA. */
static void
test_cuda_snapshots(void)
{
    const char *dir = fsim_test_shared_dir();
    g_autoptr(GDir) listing = NULL;
    const char *name;
    guint n = 0;

    if (dir == NULL)
        return;
    listing = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(listing);
    while ((name = g_dir_read_name(listing)) != NULL) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimTrace) trace = NULL;

        if (strcmp(name, npu_snapshot) == 0 ||
            (!g_str_has_suffix(name, ".pickle") && !g_str_has_suffix(name, ".pkl")))
            continue;
        trace = fsim_trace_open(path, &error);
        g_assert_no_error(error);
        g_assert_cmpstr(fsim_trace_detect_platform(trace, &error), ==, "cuda");
        g_assert_false(trace->frames_name_torch_npu);
        n++;
    }
    g_assert_cmpuint(n, >=, 1);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/npu/padding", test_padding);
    g_test_add_func("/npu/bad-platform", test_bad_platform);
    g_test_add_func("/npu/npu-snapshot", test_npu_snapshot);
    g_test_add_func("/npu/cuda-snapshots", test_cuda_snapshots);
    return g_test_run();
}
