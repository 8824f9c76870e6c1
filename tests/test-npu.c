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

/* base_addr_aligned_kb (npu-allocator.md rule 5), worked by hand.  expandable, npu: a 1 MiB + 1
 * request (1 MiB + 512 once padded) takes the low end of the first 20 MiB page at R.  A 4 MiB
 * request (>= 2 MiB) finds the free block at R + 1 MiB + 512, which is 512 bytes past a 16 KiB
 * boundary: it moves up by 15,872 bytes to R + 1 MiB + 16 KiB, and the skipped head stays a free
 * block (freeing the first block merges with it: a second 1 MiB + 1 request, best fit, gets R
 * again rather than the frontier).  A 1.5 MiB request (< 2 MiB) is not moved.  With
 * base_addr_aligned_kb=4 the move is 3,584 bytes; with 0, none; on CUDA, none. */
static void
alignment_case(const char *const *knobs, uint64_t expect_offset)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimBlock a2;
    uint64_t r;

    harness_init_knobs(&h, "expandable", "8GiB", knobs);
    a = harness_alloc(&h, MIB + 1, 0);
    r = a.addr;
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 0)->addr, ==, r);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 0)->size, ==, 20 * MIB);
    b = harness_alloc(&h, 4 * MIB, 0);
    g_assert_cmpuint(b.addr, ==, r + a.size + expect_offset);
    c = harness_alloc(&h, 3 * MIB / 2, 0);
    g_assert_cmpuint(c.addr, ==, b.addr + b.size);
    harness_free(&h, &a);
    a2 = harness_alloc(&h, MIB + 1, 0);
    g_assert_cmpuint(a2.addr, ==, r);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MAP), ==, 1);
    harness_free(&h, &a2);
    harness_free(&h, &b);
    harness_free(&h, &c);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_UNMAP, 0)->size, ==, 20 * MIB);
    harness_clear(&h);
}

static void
test_alignment(void)
{
    static const char *const npu[] = {"expandable.platform=npu", NULL};
    static const char *const npu4[] = {"expandable.platform=npu",
                                       "expandable.base_addr_aligned_kb=4", NULL};
    static const char *const npu0[] = {"expandable.platform=npu",
                                       "expandable.base_addr_aligned_kb=0", NULL};
    static const char *const cuda[] = {"expandable.platform=cuda", NULL};
    static const char *const native[] = {"caching.platform=npu", NULL};
    Harness h;
    FsimBlock a;
    FsimBlock b;

    alignment_case(npu, 16384 - 512);
    alignment_case(npu4, 4096 - 512);
    alignment_case(npu0, 0);
    alignment_case(cuda, 0); /* CUDA pads nothing: 1 MiB + 512 B rounds to 1 MiB + 512 too */

    /* Without expandable segments nothing moves: b right after a in a's 20 MiB segment. */
    harness_init_knobs(&h, "caching", "8GiB", native);
    a = harness_alloc(&h, MIB + 1, 0);
    b = harness_alloc(&h, 4 * MIB, 0);
    g_assert_cmpuint(b.addr, ==, a.addr + a.size);
    harness_clear(&h);
}

/* Reservations and pages (rules 3 and 6), worked by hand on a 10 GiB device: the reservation is
 * 1 1/8 x 10 GiB = 11.25 GiB in whole pages.  20 MiB pages: 576 of them, 11.25 GiB, and a 100 MiB
 * request (100 MiB + 512 once padded) maps 6 pages, 120 MiB.  segment_size_mb=34: ceil(11,520 / 34)
 * = 339 pages = 11,526 MiB, and 100 MiB maps 3 pages = 102 MiB.  page_size:1g: 12 pages of 1 GiB, a
 * 1 GiB map; the small pool keeps 2 MiB pages.  Native (caching) with page_size:1g: a 5 MiB request
 * gets a 1 GiB segment instead of 20 MiB, a 1000-byte one still 2 MiB. */
static void
pages_case(const char *policy, const char *const *knobs, uint64_t reservation, uint64_t map)
{
    Harness h;

    harness_init_knobs(&h, policy, "10GiB", knobs);
    harness_alloc(&h, 100 * MIB, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_VA_RESERVE, 0)->size, ==, reservation);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 0)->size, ==, map);
    harness_alloc(&h, 1000, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 1)->size, ==, 2 * MIB);
    harness_clear(&h);
}

static void
test_pages(void)
{
    static const char *const npu[] = {"expandable.platform=npu", NULL};
    static const char *const seg34[] = {"expandable.platform=npu", "expandable.segment_size_mb=34",
                                        NULL};
    static const char *const page1g[] = {"expandable.platform=npu", "expandable.page_size=1g",
                                         NULL};
    static const char *const native1g[] = {"caching.platform=npu", "caching.page_size=1g", NULL};
    Harness h;

    pages_case("expandable", npu, 11520 * MIB, 120 * MIB);
    pages_case("expandable", seg34, 339 * 34 * MIB, 102 * MIB);
    pages_case("expandable", page1g, 12 * FSIM_GiB, FSIM_GiB);

    harness_init_knobs(&h, "caching", "10GiB", native1g);
    harness_alloc(&h, 5 * MIB, 0);
    harness_alloc(&h, 1000, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->size, ==, FSIM_GiB);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 1)->size, ==, 2 * MIB);
    harness_clear(&h);
}

/* A @group policy with @platform and @key=@value (when not NULL) is refused with a usage error
 * naming @key and saying @message. */
static void
assert_refused(const char *group, const char *platform, const char *key, const char *value,
               const char *message)
{
    FsimDeviceSpec spec;
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimDevice) device = NULL;
    g_autoptr(FsimPolicy) policy = NULL;

    g_assert_true(fsim_device_spec_parse("1GiB", &spec, &error));
    device = fsim_device_sim_new(&spec, NULL, &error);
    g_key_file_set_string(config, group, "platform", platform);
    if (key != NULL)
        g_key_file_set_string(config, group, key, value);
    policy = fsim_policy_new(group, device, config, &error);
    g_assert_null(policy);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    if ((key != NULL && strstr(error->message, key) == NULL) ||
        strstr(error->message, message) == NULL)
        g_error("%s=%s: %s", key, value, error->message);
}

/* torch_npu's keys are checked as torch_npu checks them, and need platform=npu; torch_npu has no
 * max_non_split_rounding_mb and wants max_split_size_mb above 20. */
static void
test_npu_keys(void)
{
    static const struct {
        const char *platform;
        const char *key;
        const char *value;
        const char *message;
    } cases[] = {
        {"npu", "base_addr_aligned_kb", "17", "outside [0, 16]"},
        {"npu", "segment_size_mb", "513", "outside [20, 512]"},
        {"npu", "segment_size_mb", "19", "outside [20, 512]"},
        {"npu", "page_size", "2g", "1g"},
        {"npu", "max_non_split_rounding_mb", "64", "no such setting"},
        {"npu", "max_split_size_mb", "20", "more than 20"},
        {"cuda", "page_size", "1g", "platform=npu"},
        {"cuda", "segment_size_mb", "64", "platform=npu"},
        {"cuda", "base_addr_aligned_kb", "4", "platform=npu"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++)
        assert_refused("caching", cases[i].platform, cases[i].key, cases[i].value,
                       cases[i].message);
}

static void
test_bad_platform(void)
{
    assert_refused("expandable", "rocm", NULL, NULL, "expandable.platform");
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
    g_test_add_func("/npu/alignment", test_alignment);
    g_test_add_func("/npu/pages", test_pages);
    g_test_add_func("/npu/npu-keys", test_npu_keys);
    g_test_add_func("/npu/npu-snapshot", test_npu_snapshot);
    g_test_add_func("/npu/cuda-snapshots", test_cuda_snapshots);
    return g_test_run();
}
