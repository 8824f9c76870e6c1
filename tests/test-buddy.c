/* SPDX-License-Identifier: MIT */
/*
 * The `buddy` policy against the binary buddy system (Knuth, TAOCP 2.5, algorithms R and S),
 * cases worked out by hand: with 4 KiB minimum blocks and order 10 (4 MiB regions), which block
 * each request takes, the halves a split leaves, merging back with the buddy up to the region,
 * empty_cache returning the wholly free region, and requests above a region bypassing it.
 */
#include <glib.h>

#include "fragsim/fragsim.h"

#include "knob-harness.h"

#define KIB FSIM_KiB
#define MIB FSIM_MiB

static const char *const small_regions[] = {"buddy.min_block=4KiB", "buddy.max_order=10", NULL};

static void
test_split_and_merge(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimBlock d;
    FsimAddr base;

    harness_init_knobs(&h, "buddy", "1GiB", small_regions);
    /* 5000 bytes: order 1 (8 KiB); the 4 MiB region splits 9 times, leaving free blocks of
     * 2 MiB, 1 MiB, ..., 8 KiB above it. */
    a = harness_alloc(&h, 5000, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->size, ==, 4 * MIB);
    base = harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->addr;
    g_assert_cmpuint(a.addr, ==, base);
    g_assert_cmpuint(a.size, ==, 8 * KIB);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 2 * MIB);
    /* 4 KiB: the 8 KiB block at +8 KiB splits; the lower half is taken. */
    b = harness_alloc(&h, 4 * KIB, 0);
    g_assert_cmpuint(b.addr, ==, base + 8 * KIB);
    g_assert_cmpuint(b.size, ==, 4 * KIB);
    /* 12 KiB: order 2 (16 KiB), the free one at +16 KiB. */
    d = harness_alloc(&h, 12 * KIB, 0);
    g_assert_cmpuint(d.addr, ==, base + 16 * KIB);
    g_assert_cmpuint(d.size, ==, 16 * KIB);
    /* 3 MiB: order 10, a whole new region (1 MiB of it wasted inside the block). */
    c = harness_alloc(&h, 3 * MIB, 0);
    g_assert_cmpuint(c.size, ==, 4 * MIB);
    g_assert_cmpuint(c.addr, ==, harness_nth(&h, FSIM_CALL_MEM_ALLOC, 1)->addr);
    g_assert_cmpuint(harness_stats(&h).num_splits, ==, 10);
    /* b merges with its free buddy at +12 KiB; not further (a is in use). */
    harness_free(&h, &b);
    g_assert_cmpuint(harness_stats(&h).num_merges, ==, 1);
    /* d's buddy (+0, 16 KiB) is not free: no merge. */
    harness_free(&h, &d);
    g_assert_cmpuint(harness_stats(&h).num_merges, ==, 1);
    /* a merges all the way up: 8+8, 16+16, ..., 2+2 MiB: 9 merges, the region is whole. */
    harness_free(&h, &a);
    g_assert_cmpuint(harness_stats(&h).num_merges, ==, 10);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 4 * MIB);
    g_assert_cmpuint(harness_stats(&h).cached_bytes, ==, 4 * MIB);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_FREE, 0)->addr, ==, base);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 4 * MIB);
    harness_free(&h, &c);
    harness_clear(&h);
}

/* A request above a region gets its own cudaMalloc, rounded to the device's 2 MiB pages. */
static void
test_oversize(void)
{
    Harness h;
    FsimBlock a;

    harness_init_knobs(&h, "buddy", "1GiB", small_regions);
    a = harness_alloc(&h, 5 * MIB, 0);
    g_assert_cmpuint(a.size, ==, 6 * MIB);
    g_assert_cmpuint(harness_stat(&h, "oversize_blocks"), ==, 1);
    g_assert_cmpuint(harness_stats(&h).cached_bytes, ==, 0);
    harness_free(&h, &a);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 1);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 0);
    harness_clear(&h);
}

/* On a 6 MiB device the second 4 MiB region cannot exist: a smaller one (2 MiB, the
 * granularity) holds a 1 MiB request; a 3 MiB one fails until the first region is released. */
static void
test_small_device(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;

    harness_init_knobs(&h, "buddy", "6MiB", small_regions);
    a = harness_alloc(&h, 3 * MIB, 0);
    b = harness_alloc(&h, MIB, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 1)->size, ==, 2 * MIB);
    g_assert_cmpuint(b.size, ==, MIB);
    g_assert_false(harness_try_alloc(&h, 3 * MIB, 0, &c));
    harness_free(&h, &a);
    /* the free 4 MiB region is reused as it is, without a device call */
    c = harness_alloc(&h, 3 * MIB, 0);
    g_assert_cmpuint(c.addr, ==, a.addr);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 2);
    harness_free(&h, &c);
    harness_free(&h, &b);
    /* 5 MiB: oversize; it fits only once both free regions are returned */
    c = harness_alloc(&h, 5 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 2);
    g_assert_cmpuint(harness_stats(&h).num_alloc_retries, ==, 1);
    harness_free(&h, &c);
    harness_clear(&h);
}

static void
test_bad_knobs(void)
{
    static const char *const bad[][2] = {{"min_block", "3000"}, {"max_order", "41"}};

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        FsimDeviceSpec spec;
        g_autoptr(GKeyFile) config = g_key_file_new();
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimDevice) device = NULL;
        g_autoptr(FsimPolicy) policy = NULL;
        g_autofree char *name = g_strdup_printf("buddy.%s", bad[i][0]);

        g_assert_true(fsim_device_spec_parse("1GiB", &spec, &error));
        device = fsim_device_sim_new(&spec, NULL, &error);
        g_key_file_set_string(config, "buddy", bad[i][0], bad[i][1]);
        policy = fsim_policy_new("buddy", device, config, &error);
        g_assert_null(policy);
        g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
        g_assert_nonnull(strstr(error->message, name));
    }
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/buddy/split-and-merge", test_split_and_merge);
    g_test_add_func("/buddy/oversize", test_oversize);
    g_test_add_func("/buddy/small-device", test_small_device);
    g_test_add_func("/buddy/bad-knobs", test_bad_knobs);
    return g_test_run();
}
