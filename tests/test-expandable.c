/* SPDX-License-Identifier: MIT */
/*
 * The `expandable` policy: PyTorch's caching allocator with expandable segments (Note [Expandable
 * Segments] in CUDACachingAllocator.cpp), rule by rule: one reservation per (pool, stream), pages
 * of 2 MiB / 20 MiB mapped at the lowest address where a request fits, the frontier block used
 * last, 512-byte splits in both pools, whole free pages unmapped on release, the OOM path, and
 * `caching` with expandable_segments:True being the same allocator.
 */
#include <glib.h>

#include "fragsim/fragsim.h"

#include "policies/pytorch.h"
#include "pytorch-harness.h"

#define KIB FSIM_KiB
#define MIB FSIM_MiB

/* Eight 16 MiB tensors map seven 20 MiB pages (remainders of 4, 8, 12 and 16 MiB; the fifth needs
 * no page); freed, they are one 140 MiB block, unmapped at once by empty_cache. */
static void
run_eight_16mib(const char *policy, const char *conf, GArray **calls_out)
{
    Harness h;
    FsimBlock blocks[8];
    FsimAddr base;

    harness_init(&h, policy, "1GiB", conf);
    for (int i = 0; i < 8; i++)
        blocks[i] = harness_alloc(&h, 16 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RESERVE), ==, 1);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MAP), ==, 7);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 0);
    base = harness_nth(&h, FSIM_CALL_VA_RESERVE, 0)->addr;
    for (guint i = 0; i < 7; i++) {
        g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, i)->addr, ==, base + i * 20 * MIB);
        g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, i)->size, ==, 20 * MIB);
    }
    for (int i = 0; i < 8; i++) {
        g_assert_cmpuint(blocks[i].addr, ==, base + (uint64_t)i * 16 * MIB);
        g_assert_cmpuint(blocks[i].size, ==, 16 * MIB);
    }
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 140 * MIB);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 12 * MIB);
    for (int i = 0; i < 8; i++)
        harness_free(&h, &blocks[(i * 3) % 8]);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 140 * MIB);
    g_assert_cmpuint(harness_stat(&h, "inactive_split.all.current"), ==, 0); /* not counted */
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_UNMAP), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_UNMAP, 0)->addr, ==, base);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_UNMAP, 0)->size, ==, 140 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RELEASE), ==, 1);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 0);
    *calls_out = g_array_ref(h.calls);
    harness_clear(&h);
}

static void
test_eight_16mib(void)
{
    g_autoptr(GArray) expandable = NULL;
    g_autoptr(GArray) caching = NULL;

    run_eight_16mib("expandable", NULL, &expandable);
    /* expandable_segments:True makes `caching` the same allocator, call for call */
    run_eight_16mib("caching", "expandable_segments:True", &caching);
    harness_assert_calls_equal(expandable, caching);
}

/* The small pool maps 2 MiB pages and splits at 512 B; each pool and stream has a reservation. */
static void
test_small_pool_and_streams(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimBlock d;
    FsimBlock e;
    FsimBlock f;
    FsimAddr base;

    harness_init(&h, "expandable", "1GiB", NULL);
    a = harness_alloc(&h, MIB, 0);
    b = harness_alloc(&h, MIB - 512, 0);
    base = harness_nth(&h, FSIM_CALL_VA_RESERVE, 0)->addr;
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MAP), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 0)->size, ==, 2 * MIB);
    g_assert_cmpuint(a.addr, ==, base);
    g_assert_cmpuint(b.addr, ==, base + MIB);
    g_assert_cmpuint(b.size, ==, MIB - 512); /* 512 B left: split off */
    c = harness_alloc(&h, 100, 0);           /* exactly the 512 B left */
    g_assert_cmpuint(c.addr, ==, base + 2 * MIB - 512);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MAP), ==, 1);
    d = harness_alloc(&h, 100, 0); /* a second page, right after the first */
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MAP), ==, 2);
    g_assert_cmpuint(d.addr, ==, base + 2 * MIB);
    /* the large pool and another stream get reservations of their own */
    e = harness_alloc(&h, 3 * MIB, 0);
    f = harness_alloc(&h, 100, 1);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RESERVE), ==, 3);
    g_assert_cmpuint(e.addr, ==, harness_nth(&h, FSIM_CALL_VA_RESERVE, 1)->addr);
    g_assert_cmpuint(f.addr, ==, harness_nth(&h, FSIM_CALL_VA_RESERVE, 2)->addr);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 2)->size, ==, 20 * MIB);
    harness_free(&h, &a);
    harness_free(&h, &b);
    harness_free(&h, &c);
    harness_free(&h, &d);
    harness_free(&h, &e);
    harness_free(&h, &f);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RELEASE), ==, 3);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 0);
    harness_clear(&h);
}

/* Best fit measures a block by what it can grow to: the free block at the frontier (8 MiB, then
 * the whole unmapped rest) comes after a 10 MiB hole that fits as it is. */
static void
test_frontier_last(void)
{
    Harness h;
    FsimBlock x1;
    FsimBlock x2;
    FsimBlock x3;
    FsimBlock y;
    FsimAddr base;

    harness_init(&h, "expandable", "1GiB", NULL);
    x1 = harness_alloc(&h, 10 * MIB, 0);
    x2 = harness_alloc(&h, 10 * MIB, 0);
    x3 = harness_alloc(&h, 12 * MIB, 0);
    base = harness_nth(&h, FSIM_CALL_VA_RESERVE, 0)->addr;
    g_assert_cmpuint(x3.addr, ==, base + 20 * MIB);
    harness_free(&h, &x1);
    y = harness_alloc(&h, 6 * MIB, 0);
    g_assert_cmpuint(y.addr, ==, base);
    harness_free(&h, &y);
    harness_free(&h, &x2);
    harness_free(&h, &x3);
    harness_clear(&h);
}

/* New pages go to the lowest address that can hold the request: first into a hole left by an
 * unmap, then at the end. */
static void
test_lowest_address(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimBlock d;
    FsimBlock e;
    FsimAddr base;

    harness_init(&h, "expandable", "1GiB", NULL);
    a = harness_alloc(&h, 20 * MIB, 0);
    b = harness_alloc(&h, 20 * MIB, 0);
    c = harness_alloc(&h, 20 * MIB, 0);
    base = harness_nth(&h, FSIM_CALL_VA_RESERVE, 0)->addr;
    harness_free(&h, &b);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_UNMAP), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_UNMAP, 0)->addr, ==, base + 20 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RELEASE), ==, 0);
    /* 30 MiB does not fit the 20 MiB hole: pages at the end */
    d = harness_alloc(&h, 30 * MIB, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 3)->addr, ==, base + 60 * MIB);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 3)->size, ==, 40 * MIB);
    g_assert_cmpuint(d.addr, ==, base + 60 * MIB);
    /* 20 MiB fits the hole (the 10 MiB free at the end is smaller than 20 MiB) */
    e = harness_alloc(&h, 20 * MIB, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 4)->addr, ==, base + 20 * MIB);
    g_assert_cmpuint(e.addr, ==, base + 20 * MIB);
    harness_free(&h, &a);
    harness_free(&h, &c);
    harness_free(&h, &d);
    harness_free(&h, &e);
    harness_clear(&h);
}

/* Release unmaps only whole pages inside free blocks; the slivers stay free. */
static void
test_unmap_whole_pages(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimAddr base;

    harness_init(&h, "expandable", "1GiB", NULL);
    a = harness_alloc(&h, 16 * MIB, 0); /* [0, 16), free [16, 20) */
    b = harness_alloc(&h, 30 * MIB, 0); /* maps [20, 60): [16, 46), free [46, 60) */
    base = harness_nth(&h, FSIM_CALL_VA_RESERVE, 0)->addr;
    g_assert_cmpuint(b.addr, ==, base + 16 * MIB);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 1)->size, ==, 40 * MIB);
    harness_free(&h, &a);
    /* [0, 16) and [46, 60) hold no whole page */
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_UNMAP), ==, 0);
    /* 10 MiB: the frontier block [46, 60) is smaller, but it can grow: [0, 16) is used */
    c = harness_alloc(&h, 10 * MIB, 0);
    g_assert_cmpuint(c.addr, ==, base);
    harness_free(&h, &c);
    harness_free(&h, &b); /* everything merges: [0, 60) */
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 60 * MIB);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_UNMAP), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_UNMAP, 0)->size, ==, 60 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RELEASE), ==, 1);
    harness_clear(&h);
    /* a free block across a page keeps its head and tail */
    harness_init(&h, "expandable", "1GiB", NULL);
    a = harness_alloc(&h, 16 * MIB, 0); /* [0, 16) */
    b = harness_alloc(&h, 30 * MIB, 0); /* [16, 46) */
    c = harness_alloc(&h, 10 * MIB, 0); /* [46, 56) */
    base = harness_nth(&h, FSIM_CALL_VA_RESERVE, 0)->addr;
    harness_free(&h, &b);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_UNMAP), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_UNMAP, 0)->addr, ==, base + 20 * MIB);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_UNMAP, 0)->size, ==, 20 * MIB);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 6 * MIB); /* [40, 46) */
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 40 * MIB);
    harness_free(&h, &a);
    harness_free(&h, &c);
    harness_empty_cache(&h);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RELEASE), ==, 1);
    harness_clear(&h);
}

/* When pages run out, free pages of every stream are unmapped and the mapping retried; an OOM
 * only after that. */
static void
test_oom_path(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock out;
    FsimBlock sentinel;
    static const FsimDeviceCall expected[] = {
        FSIM_CALL_VA_RESERVE, FSIM_CALL_MAP,        FSIM_CALL_VA_RESERVE,
        FSIM_CALL_UNMAP,      FSIM_CALL_VA_RELEASE, FSIM_CALL_MAP,
    };

    harness_init(&h, "expandable", "100MiB", NULL);
    a = harness_alloc(&h, 60 * MIB, 0);
    harness_free(&h, &a);
    /* stream 1 needs 60 MiB more than the 40 MiB left: stream 0's pages go first */
    b = harness_alloc(&h, 50 * MIB, 1);
    g_assert_cmpuint(h.calls->len, ==, G_N_ELEMENTS(expected));
    for (guint i = 0; i < G_N_ELEMENTS(expected); i++)
        g_assert_cmpint(g_array_index(h.calls, Call, i).call, ==, expected[i]);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_UNMAP, 0)->size, ==, 60 * MIB);
    g_assert_cmpuint(harness_stat(&h, "num_alloc_retries"), ==, 1);
    memset(&out, 0x5a, sizeof(out));
    sentinel = out;
    g_assert_false(harness_try_alloc(&h, 200 * MIB, 1, &out));
    g_assert_cmpmem(&out, sizeof(out), &sentinel, sizeof(sentinel));
    g_assert_cmpuint(harness_stat(&h, "num_ooms"), ==, 1);
    harness_free(&h, &b);
    harness_clear(&h);
}

/* Under expandable segments large blocks split at 512 B too, max_split_size_mb or not. */
static void
test_split_large(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;

    harness_init(&h, "expandable", "1GiB", "max_split_size_mb:20");
    a = harness_alloc(&h, 30 * MIB, 0);
    g_assert_cmpuint(a.size, ==, 30 * MIB);
    /* a page more, merged with the 10 MiB left: 30 MiB of which 19.5 are handed out */
    b = harness_alloc(&h, 19 * MIB + 512 * KIB, 0);
    g_assert_cmpuint(b.size, ==, 19 * MIB + 512 * KIB);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 10 * MIB + 512 * KIB);
    harness_free(&h, &a);
    harness_free(&h, &b);
    harness_clear(&h);
}

/* An initial state with expandable ranges: one reservation from the lowest range, the gap
 * between ranges unmapped, growth at the lowest address that fits. */
static void
test_seed(void)
{
    Harness h;
    const FsimAddr base = 0x602000000;
    FsimSeedSegment segments[] = {
        {.addr = base, .size = 40 * MIB, .pool = FSIM_POOL_LARGE, .expandable = TRUE},
        {.addr = base + 60 * MIB, .size = 20 * MIB, .pool = FSIM_POOL_LARGE, .expandable = TRUE},
    };
    FsimSeedBlock seeds[] = {
        {.id = 1, .addr = base, .size = 16 * MIB, .requested = 16 * MIB},
        {.id = 2, .addr = base + 60 * MIB, .size = 10 * MIB, .requested = 10 * MIB},
    };
    FsimInitialState state = {segments, 2, seeds, 2};
    FsimBlock blocks[2];
    FsimBlock a;
    FsimBlock b;
    g_autoptr(GError) error = NULL;

    harness_init(&h, "expandable", "4GiB", NULL);
    h.device->seeding = TRUE;
    g_assert_true(h.policy->ops->seed(h.policy, &state, blocks, &error));
    h.device->seeding = FALSE;
    g_assert_no_error(error);
    harness_check(&h);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 60 * MIB);
    g_assert_cmpuint(blocks[1].addr, ==, base + 60 * MIB);
    /* 20 MiB: best fit is the 24 MiB free block after the first tensor */
    a = harness_alloc(&h, 20 * MIB, 0);
    g_assert_cmpuint(a.addr, ==, base + 16 * MIB);
    g_assert_cmpuint(h.calls->len, ==, 0);
    /* 30 MiB: 4 MiB free + the 20 MiB gap is too little before the second range; it grows
     * after it: [70, 80) free plus a page at 80 */
    b = harness_alloc(&h, 30 * MIB, 0);
    g_assert_cmpuint(b.addr, ==, base + 70 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MAP), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 0)->addr, ==, base + 80 * MIB);
    harness_free(&h, &a);
    harness_free(&h, &b);
    harness_free(&h, &blocks[0]);
    harness_free(&h, &blocks[1]);
    harness_empty_cache(&h);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RELEASE), ==, 1);
    harness_clear(&h);
}

/* large_segment_size_mb sets the large page; it must be a whole number of device pages. */
static void
test_large_page(void)
{
    Harness h;
    FsimBlock a;
    FsimDeviceSpec spec;
    g_autoptr(FsimDevice) device = NULL;
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimPolicy) policy = NULL;

    harness_init(&h, "expandable", "1GiB", "large_segment_size_mb:12");
    a = harness_alloc(&h, 13 * MIB, 0);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 0)->size, ==, 24 * MIB);
    harness_free(&h, &a);
    harness_clear(&h);
    g_assert_true(fsim_device_spec_parse("1GiB", &spec, NULL));
    device = fsim_device_sim_new(&spec, NULL, NULL);
    g_key_file_set_value(config, "expandable", "large_segment_size_mb", "3");
    policy = fsim_policy_new("expandable", device, config, &error);
    g_assert_null(policy);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/expandable/eight-16mib", test_eight_16mib);
    g_test_add_func("/expandable/small-pool-and-streams", test_small_pool_and_streams);
    g_test_add_func("/expandable/frontier-last", test_frontier_last);
    g_test_add_func("/expandable/lowest-address", test_lowest_address);
    g_test_add_func("/expandable/unmap-whole-pages", test_unmap_whole_pages);
    g_test_add_func("/expandable/oom-path", test_oom_path);
    g_test_add_func("/expandable/split-large", test_split_large);
    g_test_add_func("/expandable/seed", test_seed);
    g_test_add_func("/expandable/large-page", test_large_page);
    return g_test_run();
}
