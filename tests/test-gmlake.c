/* SPDX-License-Identifier: MIT */
/*
 * The `gmlake` policy against GMLake's documented behaviour (ASPLOS'24 and its allocator): eight
 * 16 MiB tensors freed, then four 32 MiB ones: with gmlake.frag_limit=16MiB each 32 MiB request
 * stitches two free 16 MiB blocks into a new virtual range and the device holds 128 MiB; with the
 * default 512 MiB limit none may be stitched and 256 MiB is reserved.  Then the cache of stitched
 * blocks: reused when complete and within 10x, garbage-collected by empty_cache.
 */
#include <glib.h>

#include "fragsim/fragsim.h"

#include "knob-harness.h"

#define MIB FSIM_MiB

static void
run_eight_then_four(const char *const *sets, uint64_t want_reserved, uint64_t want_stitches)
{
    Harness h;
    FsimBlock small[8];
    FsimBlock big[4];

    harness_init_knobs(&h, "gmlake", "1GiB", sets);
    for (int i = 0; i < 8; i++) {
        small[i] = harness_alloc(&h, 16 * MIB, 0);
        g_assert_cmpuint(small[i].size, ==, 16 * MIB);
    }
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MAP), ==, 8);
    for (int i = 0; i < 8; i++)
        harness_free(&h, &small[i]);
    for (int i = 0; i < 4; i++) {
        big[i] = harness_alloc(&h, 32 * MIB, 0);
        g_assert_cmpuint(big[i].size, ==, 32 * MIB);
    }
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, want_reserved);
    g_assert_cmpuint(harness_stat(&h, "stitches"), ==, want_stitches);
    for (int i = 0; i < 4; i++)
        harness_free(&h, &big[i]);
    harness_clear(&h);
}

static void
test_stitch_16mib(void)
{
    static const char *const sets[] = {"gmlake.frag_limit=16MiB", NULL};

    run_eight_then_four(sets, 128 * MIB, 4);
}

static void
test_default_limit(void)
{
    run_eight_then_four(NULL, 256 * MIB, 0);
}

static void
test_stitching_off(void)
{
    static const char *const sets[] = {"gmlake.frag_limit=16MiB", "gmlake.stitching=false", NULL};

    run_eight_then_four(sets, 256 * MIB, 0);
}

/* Stitched blocks are cached: the four pieces of a freed 64 MiB block are reused for 48 MiB
 * (within 10x, all pieces free) without a new virtual range; once a piece is taken by an ordinary
 * block the cached one is incomplete and a new stitch is made instead; empty_cache releases the
 * cached ranges and then the free segments. */
static void
test_stitched_cache(void)
{
    static const char *const sets[] = {"gmlake.frag_limit=16MiB", NULL};
    Harness h;
    FsimBlock blocks[4];
    FsimBlock big;
    FsimBlock again;
    FsimBlock piece;
    FsimBlock third;

    harness_init_knobs(&h, "gmlake", "1GiB", sets);
    for (int i = 0; i < 4; i++)
        blocks[i] = harness_alloc(&h, 16 * MIB, 0);
    for (int i = 0; i < 4; i++)
        harness_free(&h, &blocks[i]);
    big = harness_alloc(&h, 64 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RESERVE), ==, 5);
    g_assert_cmpuint(harness_stats(&h).cached_bytes, ==, 0);
    harness_free(&h, &big);
    g_assert_cmpuint(harness_stat(&h, "stitched_blocks_cached"), ==, 1);
    again = harness_alloc(&h, 48 * MIB, 0);
    g_assert_cmpuint(again.addr, ==, big.addr);
    g_assert_cmpuint(again.size, ==, 64 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RESERVE), ==, 5);
    g_assert_cmpuint(harness_stat(&h, "stitch_reuses"), ==, 1);
    harness_free(&h, &again);
    /* an ordinary 16 MiB block takes one piece: the cached 64 MiB range is incomplete */
    piece = harness_alloc(&h, 16 * MIB, 0);
    third = harness_alloc(&h, 32 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RESERVE), ==, 6);
    g_assert_cmpuint(harness_stat(&h, "stitches"), ==, 2);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 64 * MIB);
    harness_free(&h, &third);
    harness_free(&h, &piece);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_VA_RELEASE), ==, 2 + 4);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_UNMAP), ==, 4);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 0);
    harness_clear(&h);
}

/* A cached stitched block whose piece now lies inside a larger free block (its lower neighbour
 * was freed and merged with it): reusing it carves the piece out of that block, and the free
 * front left below the piece stays a free, indexed block (the policy's check runs after each
 * operation).  Two 20 MiB segments of [8 MiB | 12 MiB]; the two 12 MiB blocks are stitched into
 * 24 MiB, the 8 MiB in front of one piece is freed, then the stitched block, and 24 MiB again
 * reuses the cached range. */
static void
test_stitched_reuse_inside(void)
{
    static const char *const sets[] = {"gmlake.frag_limit=2MiB", NULL};
    Harness h;
    FsimBlock a, b, d, e, x, again, front;

    harness_init_knobs(&h, "gmlake", "1GiB", sets);
    a = harness_alloc(&h, 8 * MIB, 0);
    b = harness_alloc(&h, 12 * MIB, 0);
    d = harness_alloc(&h, 8 * MIB, 0);
    e = harness_alloc(&h, 12 * MIB, 0);
    g_assert_cmpuint(b.addr, ==, a.addr + 8 * MIB);
    g_assert_cmpuint(e.addr, ==, d.addr + 8 * MIB);
    harness_free(&h, &b);
    harness_free(&h, &e);
    x = harness_alloc(&h, 24 * MIB, 0);
    g_assert_cmpuint(harness_stat(&h, "stitches"), ==, 1);
    harness_free(&h, &a);
    harness_free(&h, &x);
    again = harness_alloc(&h, 24 * MIB, 0);
    g_assert_cmpuint(again.addr, ==, x.addr);
    g_assert_cmpuint(harness_stat(&h, "stitch_reuses"), ==, 1);
    /* the 8 MiB front is free and found by best fit */
    front = harness_alloc(&h, 8 * MIB, 0);
    g_assert_cmpuint(front.addr, ==, a.addr);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 40 * MIB);
    harness_free(&h, &front);
    harness_free(&h, &again);
    harness_free(&h, &d);
    harness_clear(&h);
}

/* Small requests use PyTorch's small pool: a 2 MiB cudaMalloc, split into 512-byte units. */
static void
test_small_pool(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;

    harness_init_knobs(&h, "gmlake", "1GiB", NULL);
    a = harness_alloc(&h, 100, 0);
    b = harness_alloc(&h, 1000, 0);
    g_assert_cmpuint(a.size, ==, 512);
    g_assert_cmpuint(b.size, ==, 1024);
    g_assert_cmpuint(b.addr, ==, a.addr + 512);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->size, ==, 2 * MIB);
    harness_free(&h, &a);
    harness_free(&h, &b);
    /* 3 MiB: a 20 MiB pBlock, split (17 MiB left) */
    a = harness_alloc(&h, 3 * MIB - 5, 0);
    g_assert_cmpuint(a.size, ==, 4 * MIB);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 0)->size, ==, 20 * MIB);
    harness_free(&h, &a);
    harness_clear(&h);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/gmlake/stitch-16mib", test_stitch_16mib);
    g_test_add_func("/gmlake/default-limit", test_default_limit);
    g_test_add_func("/gmlake/stitching-off", test_stitching_off);
    g_test_add_func("/gmlake/stitched-cache", test_stitched_cache);
    g_test_add_func("/gmlake/stitched-reuse-inside", test_stitched_reuse_inside);
    g_test_add_func("/gmlake/small-pool", test_small_pool);
    return g_test_run();
}
