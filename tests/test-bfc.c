/* SPDX-License-Identifier: MIT */
/*
 * The `bfc` policy against TensorFlow's BFCAllocator (bfc_allocator.cc), cases worked out by hand
 * from its rules: 256-byte rounding, best fit from the request's bin up, the split rule (split
 * only when the chunk is at least twice the request or the rest is at least 128 MiB), coalescing,
 * region growth with allow_growth (2 MiB, doubling, doubling after a success too) and without it
 * (one region of the whole limit), and DeallocateFreeRegions before an OOM.
 */
#include <glib.h>

#include "fragsim/fragsim.h"

#include "knob-harness.h"

#define KIB FSIM_KiB
#define MIB FSIM_MiB

/* allow_growth: regions of 2, 4 then 32 MiB; chunks not worth splitting are handed out whole. */
static void
test_growth(void)
{
    static const char *const sets[] = {"bfc.allow_growth=true", NULL};
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimBlock d;

    harness_init_knobs(&h, "bfc", "1GiB", sets);
    a = harness_alloc(&h, 1000, 0); /* 1024 bytes from a 2 MiB region; the region size -> 4 MiB */
    g_assert_cmpuint(a.size, ==, 1024);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->size, ==, 2 * MIB);
    g_assert_cmpuint(a.addr, ==, harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->addr);
    /* 3 MiB: a 4 MiB region (size -> 8 MiB); 4 < 2 x 3 and 1 MiB < 128 MiB: no split. */
    b = harness_alloc(&h, 3 * MIB, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 1)->size, ==, 4 * MIB);
    g_assert_cmpuint(b.size, ==, 4 * MIB);
    /* 20 MiB: the size doubles to 16 then 32 MiB (and stays there); the whole 32 MiB chunk. */
    c = harness_alloc(&h, 20 * MIB, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 2)->size, ==, 32 * MIB);
    g_assert_cmpuint(c.size, ==, 32 * MIB);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 38 * MIB);
    /* 1 MiB fits the rest of the first region (2 MiB - 1 KiB, same bin): handed out whole. */
    d = harness_alloc(&h, MIB, 0);
    g_assert_cmpuint(d.addr, ==, a.addr + 1024);
    g_assert_cmpuint(d.size, ==, 2 * MIB - 1024);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 3);
    /* The next region would be 32 MiB: 33 MiB doubles it to 64. */
    harness_free(&h, &c);
    c = harness_alloc(&h, 33 * MIB, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 3)->size, ==, 64 * MIB);
    g_assert_cmpuint(harness_stats(&h).num_splits, ==, 1);
    harness_free(&h, &a);
    harness_free(&h, &b);
    harness_free(&h, &c);
    harness_free(&h, &d);
    g_assert_cmpuint(harness_stats(&h).cached_bytes, ==, 102 * MIB);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 64 * MIB);
    harness_clear(&h);
}

/* Without allow_growth: one region of the whole limit; best fit in the bins; no split of a chunk
 * less than twice the request; coalescing with both neighbours. */
static void
run_split_rule(const char *const *sets, uint64_t want_size)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimBlock d;

    harness_init_knobs(&h, "bfc", "64MiB", sets);
    a = harness_alloc(&h, MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->size, ==, 64 * MIB);
    b = harness_alloc(&h, 600 * KIB, 0);
    c = harness_alloc(&h, MIB, 0);
    g_assert_cmpuint(b.addr, ==, a.addr + MIB);
    g_assert_cmpuint(c.addr, ==, b.addr + 600 * KIB);
    harness_free(&h, &b);
    /* 400 KiB (bin 10) takes the 600 KiB chunk of bin 11, not the big tail chunk. */
    d = harness_alloc(&h, 400 * KIB, 0);
    g_assert_cmpuint(d.addr, ==, a.addr + MIB);
    g_assert_cmpuint(d.size, ==, want_size);
    harness_free(&h, &a);
    harness_free(&h, &c);
    harness_free(&h, &d);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 64 * MIB);
    g_assert_cmpuint(harness_stats(&h).cached_bytes, ==, 64 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 0);
    harness_clear(&h);
}

static void
test_split_rule(void)
{
    /* 600 KiB < 2 x 400 KiB and the 200 KiB rest < 128 MiB: the whole chunk. */
    run_split_rule(NULL, 600 * KIB);
}

static void
test_fragmentation_fraction(void)
{
    /* 0.001 x 64 MiB = 67108 bytes <= 200 KiB: now the chunk is split. */
    static const char *const sets[] = {"bfc.fragmentation_fraction=0.001", NULL};

    run_split_rule(sets, 400 * KIB);
}

/* Regions of 2, 4, 8, 16 and 32 MiB fill 62 MiB of a 64 MiB device; once all are free, 40 MiB
 * fits only after DeallocateFreeRegions cudaFrees all five, and then takes one 64 MiB region. */
static void
run_regions(gboolean garbage_collection)
{
    const char *sets[] = {
        "bfc.allow_growth=true",
        garbage_collection ? "bfc.garbage_collection=true" : "bfc.garbage_collection=false", NULL};
    static const uint64_t sizes[] = {MIB, 3 * MIB, 7 * MIB, 15 * MIB, 31 * MIB};
    Harness h;
    FsimBlock blocks[G_N_ELEMENTS(sizes)];
    FsimBlock big;

    harness_init_knobs(&h, "bfc", "64MiB", (const char *const *)sets);
    for (gsize i = 0; i < G_N_ELEMENTS(sizes); i++) {
        blocks[i] = harness_alloc(&h, sizes[i], 0);
        g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, (guint)i)->size, ==, (2 * MIB) << i);
    }
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 62 * MIB);
    for (gsize i = 0; i < G_N_ELEMENTS(sizes); i++)
        harness_free(&h, &blocks[i]);
    if (!garbage_collection) {
        g_assert_false(harness_try_alloc(&h, 40 * MIB, 0, &big));
        g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 62 * MIB);
        g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 0);
        harness_clear(&h);
        return;
    }
    big = harness_alloc(&h, 40 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 5);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 5)->size, ==, 64 * MIB);
    g_assert_cmpuint(big.size, ==, 64 * MIB); /* 64 < 80 and 24 MiB < 128 MiB: not split */
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 64 * MIB);
    g_assert_cmpuint(harness_stats(&h).num_alloc_retries, ==, 1);
    g_assert_cmpuint(harness_stat(&h, "regions_freed"), ==, 5);
    harness_free(&h, &big);
    harness_clear(&h);
}

static void
test_garbage_collection(void)
{
    run_regions(TRUE);
}

static void
test_no_garbage_collection(void)
{
    run_regions(FALSE);
}

static void
test_bad_knob(void)
{
    FsimDeviceSpec spec;
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimDevice) device = NULL;
    g_autoptr(FsimPolicy) policy = NULL;

    g_assert_true(fsim_device_spec_parse("1GiB", &spec, &error));
    device = fsim_device_sim_new(&spec, NULL, &error);
    g_key_file_set_string(config, "bfc", "fragmentation_fraction", "2");
    policy = fsim_policy_new("bfc", device, config, &error);
    g_assert_null(policy);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_assert_nonnull(strstr(error->message, "bfc.fragmentation_fraction"));
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/bfc/growth", test_growth);
    g_test_add_func("/bfc/split-rule", test_split_rule);
    g_test_add_func("/bfc/fragmentation-fraction", test_fragmentation_fraction);
    g_test_add_func("/bfc/garbage-collection", test_garbage_collection);
    g_test_add_func("/bfc/no-garbage-collection", test_no_garbage_collection);
    g_test_add_func("/bfc/bad-knob", test_bad_knob);
    return g_test_run();
}
