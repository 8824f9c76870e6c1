/* SPDX-License-Identifier: MIT */
/*
 * The `caching` policy, rule by rule, as PyTorch's CUDACachingAllocator documents and implements
 * them: rounding, pools and segment sizes, best fit per stream at the low end of a block, split
 * and oversize rules, merging, the release paths before an OOM, garbage collection, seeding, and
 * the statistics.  The policy is driven directly on a simulated device whose driver calls are
 * recorded, and check() runs after every operation.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/fragsim.h"

#include "policies/pytorch.h"
#include "pytorch-harness.h"

#define KIB FSIM_KiB
#define MIB FSIM_MiB

/* ---- rounding and sizes ---------------------------------------------------------------------- */

static void
test_round_size(void)
{
    FsimAllocConf conf;
    g_autoptr(GError) error = NULL;

    fsim_alloc_conf_init(&conf);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 1), ==, 512);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 512), ==, 512);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 513), ==, 1024);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 1200), ==, 1536);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 3 * MIB + 1), ==, 3 * MIB + 512);
    /* roundup_power2_divisions:4 cuts [2^k, 2^k+1) in four: 1200 KiB lies in [1, 2) MiB, cut at
     * 1024, 1280, 1536, 1792 KiB: 1280 KiB (PyTorch's comment: 1200 -> 1280). */
    g_assert_true(fsim_alloc_conf_parse(&conf, "roundup_power2_divisions:4", &error));
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 1200 * KIB), ==, 1280 * KIB);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 1280 * KIB), ==, 1280 * KIB);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 2 * MIB), ==, 2 * MIB);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 2 * MIB + 1), ==, 2 * MIB + 512 * KIB);
    /* ... but only for sizes above 512 x divisions: 1200 B itself keeps the 512-byte rounding */
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 1200), ==, 1536);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 3000), ==, 3072);
    /* per interval: eighths up to 128 MiB (the first key fills the intervals below it), then
     * nothing */
    fsim_alloc_conf_init(&conf);
    g_assert_true(fsim_alloc_conf_parse(&conf, "roundup_power2_divisions:[64:8,128:0]", &error));
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 65 * MIB), ==, 72 * MIB);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 129 * MIB), ==, 129 * MIB);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 3 * MIB), ==, 3 * MIB);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 3 * MIB + 1), ==, 3 * MIB + 256 * KIB);
    /* 1.13's bypass: above the threshold, plain 512-byte rounding */
    fsim_alloc_conf_init(&conf);
    g_assert_true(fsim_alloc_conf_parse(
        &conf, "roundup_power2_divisions:2,roundup_bypass_threshold_mb:100", &error));
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 65 * MIB), ==, 96 * MIB);
    g_assert_cmpuint(fsim_pytorch_round_size(&conf, 130 * MIB), ==, 130 * MIB);
    g_assert_no_error(error);
}

static void
test_allocation_size(void)
{
    FsimAllocConf conf;
    g_autoptr(GError) error = NULL;

    fsim_alloc_conf_init(&conf);
    g_assert_cmpuint(fsim_pytorch_allocation_size(&conf, 512), ==, 2 * MIB);
    g_assert_cmpuint(fsim_pytorch_allocation_size(&conf, MIB), ==, 2 * MIB);
    g_assert_cmpuint(fsim_pytorch_allocation_size(&conf, MIB + 512), ==, 20 * MIB);
    g_assert_cmpuint(fsim_pytorch_allocation_size(&conf, 10 * MIB - 512), ==, 20 * MIB);
    g_assert_cmpuint(fsim_pytorch_allocation_size(&conf, 10 * MIB), ==, 10 * MIB);
    g_assert_cmpuint(fsim_pytorch_allocation_size(&conf, 11 * MIB), ==, 12 * MIB);
    g_assert_true(fsim_alloc_conf_parse(&conf, "large_segment_size_mb:40", &error));
    g_assert_cmpuint(fsim_pytorch_allocation_size(&conf, 3 * MIB), ==, 40 * MIB);
}

/* ---- pools, splitting, placement ---------------------------------------------------------------
 */

/* Small requests share a 2 MiB segment, packed from its low end. */
static void
test_small_pool(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;

    harness_init(&h, "caching", "1GiB", NULL);
    a = harness_alloc(&h, 1000, 0);
    b = harness_alloc(&h, 100, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->size, ==, 2 * MIB);
    g_assert_cmpuint(a.addr, ==, harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->addr);
    g_assert_cmpuint(a.size, ==, 1024);
    g_assert_cmpuint(b.addr, ==, a.addr + 1024);
    g_assert_cmpuint(b.size, ==, 512);
    /* a 1 MiB request is small too: it fits the same segment, and what remains (>= 512 B) is
     * split off again */
    c = harness_alloc(&h, MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 1);
    g_assert_cmpuint(c.addr, ==, a.addr + 1536);
    g_assert_cmpuint(c.size, ==, MIB);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, MIB - 1536);
    harness_free(&h, &b);
    harness_free(&h, &a);
    harness_free(&h, &c);
    g_assert_cmpuint(harness_stat(&h, "inactive_split.all.current"), ==, 0);
    harness_clear(&h);
}

/* A 3 MiB request creates a 20 MiB segment, split into 3 + 17; the next one takes the low end of
 * the 17. */
static void
test_large_segment_split(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimAddr base;

    harness_init(&h, "caching", "1GiB", NULL);
    a = harness_alloc(&h, 3 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 1);
    base = harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->addr;
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_ALLOC, 0)->size, ==, 20 * MIB);
    g_assert_cmpuint(a.addr, ==, base);
    g_assert_cmpuint(a.size, ==, 3 * MIB);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 17 * MIB);
    g_assert_cmpuint(harness_stat(&h, "inactive_split_bytes.all.current"), ==, 17 * MIB);
    g_assert_cmpuint(harness_stat(&h, "inactive_split.all.current"), ==, 1);
    b = harness_alloc(&h, 5 * MIB, 0);
    g_assert_cmpuint(b.addr, ==, base + 3 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 1);
    g_assert_cmpuint(harness_stat(&h, "inactive_split_bytes.all.current"), ==, 12 * MIB);
    harness_free(&h, &a);
    harness_free(&h, &b);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 20 * MIB);
    g_assert_cmpuint(harness_stat(&h, "inactive_split.all.current"), ==, 0);
    harness_clear(&h);
}

/* A large block is split only when more than 1 MiB would remain: a remainder of up to 1 MiB stays
 * in the allocation (internal fragmentation). */
static void
test_large_remainder(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;

    harness_init(&h, "caching", "1GiB", NULL);
    /* 19 MiB: a segment of 20 MiB, 1 MiB left: not split */
    a = harness_alloc(&h, 19 * MIB, 0);
    g_assert_cmpuint(a.size, ==, 20 * MIB);
    g_assert_cmpuint(harness_stat(&h, "requested_bytes.all.current"), ==, 19 * MIB);
    g_assert_cmpuint(harness_stat(&h, "allocated_bytes.all.current"), ==, 20 * MIB);
    /* 18.5 MiB: 1.5 MiB left: split */
    b = harness_alloc(&h, 18 * MIB + 512 * KIB, 0);
    g_assert_cmpuint(b.size, ==, 18 * MIB + 512 * KIB);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, MIB + 512 * KIB);
    harness_free(&h, &a);
    harness_free(&h, &b);
    harness_clear(&h);
}

/* Best fit on (stream, size, address): the smallest free block that fits, the lowest address
 * among equal sizes, never a block of another stream. */
static void
test_best_fit_and_streams(void)
{
    Harness h;
    FsimBlock x = {0};
    FsimBlock y = {0};
    FsimBlock z = {0};
    FsimBlock w = {0};
    FsimBlock got;
    FsimBlock other;

    harness_init(&h, "caching", "1GiB", NULL);
    x = harness_alloc(&h, 12 * MIB, 0);
    y = harness_alloc(&h, 16 * MIB, 0);
    z = harness_alloc(&h, 14 * MIB, 0);
    w = harness_alloc(&h, 14 * MIB, 0);
    harness_free(&h, &w);
    harness_free(&h, &x);
    harness_free(&h, &y);
    harness_free(&h, &z);
    /* 13 MiB: x (12) is too small, z and w (14) fit best, z has the lower address */
    got = harness_alloc(&h, 13 * MIB, 0);
    g_assert_cmpuint(got.addr, ==, MIN(z.addr, w.addr));
    g_assert_cmpuint(got.size, ==, 14 * MIB); /* 1 MiB left: not split */
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 4);
    /* stream 1 sees none of stream 0's cached blocks */
    other = harness_alloc(&h, 12 * MIB, 1);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 5);
    g_assert_cmpuint(other.addr, !=, x.addr);
    harness_free(&h, &other);
    /* and stream 0 none of stream 1's */
    w = harness_alloc(&h, 12 * MIB, 0);
    g_assert_cmpuint(w.addr, ==, x.addr);
    harness_free(&h, &w);
    harness_free(&h, &got);
    harness_clear(&h);
}

/* A freed block merges with free neighbours in its segment, and only there. */
static void
test_merge(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimBlock d;
    FsimPolicyStats stats;

    harness_init(&h, "caching", "1GiB", NULL);
    a = harness_alloc(&h, 3 * MIB, 0);
    b = harness_alloc(&h, 3 * MIB, 0);
    c = harness_alloc(&h, 3 * MIB, 0);
    harness_free(&h, &b);
    g_assert_cmpuint(harness_stat(&h, "inactive_split.all.current"), ==, 2);
    harness_free(&h, &a); /* merges with b's block */
    g_assert_cmpuint(harness_stat(&h, "inactive_split.all.current"), ==, 2);
    g_assert_cmpuint(harness_stat(&h, "inactive_split_bytes.all.current"), ==, 17 * MIB);
    stats = harness_stats(&h);
    g_assert_cmpuint(stats.largest_free_block, ==, 11 * MIB);
    /* 6 MiB fits the merged block at the segment's start */
    d = harness_alloc(&h, 6 * MIB, 0);
    g_assert_cmpuint(d.addr, ==, a.addr);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 1);
    harness_free(&h, &d);
    harness_free(&h, &c); /* everything merges back into one unsplit 20 MiB block */
    stats = harness_stats(&h);
    g_assert_cmpuint(stats.largest_free_block, ==, 20 * MIB);
    g_assert_cmpuint(stats.num_merges, >=, 3);
    g_assert_cmpuint(harness_stat(&h, "inactive_split.all.current"), ==, 0);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 1);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 0);
    harness_clear(&h);
}

/* ---- oversize blocks ------------------------------------------------------------------------- */

static void
test_oversize(void)
{
    Harness h;
    FsimBlock big;
    FsimBlock mid;
    FsimBlock near;
    FsimBlock huge;
    FsimBlock far;

    harness_init(&h, "caching", "4GiB", "max_split_size_mb:40");
    big = harness_alloc(&h, 50 * MIB, 0);
    g_assert_cmpuint(harness_stat(&h, "oversize_segments.current"), ==, 1);
    g_assert_cmpuint(harness_stat(&h, "oversize_allocations.current"), ==, 1);
    harness_free(&h, &big);
    /* a normal request never gets an oversize block: a new segment */
    mid = harness_alloc(&h, 30 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 2);
    g_assert_cmpuint(mid.addr, !=, big.addr);
    /* an oversize request takes a cached oversize block less than 20 MiB larger, whole */
    near = harness_alloc(&h, 45 * MIB, 0);
    g_assert_cmpuint(near.addr, ==, big.addr);
    g_assert_cmpuint(near.size, ==, 50 * MIB);
    harness_free(&h, &near);
    /* ... but not one 20 MiB larger or more (max_non_split_rounding_mb) */
    huge = harness_alloc(&h, 90 * MIB, 0);
    harness_free(&h, &huge);
    far = harness_alloc(&h, 60 * MIB, 0);
    g_assert_cmpuint(far.addr, !=, huge.addr);
    g_assert_cmpuint(far.size, ==, 60 * MIB); /* best fit skipped 50: too small */
    harness_free(&h, &far);
    harness_free(&h, &mid);
    harness_clear(&h);
    /* with max_non_split_rounding_mb:40 the 90 MiB block serves a 60 MiB request */
    harness_init(&h, "caching", "4GiB", "max_split_size_mb:40,max_non_split_rounding_mb:40");
    huge = harness_alloc(&h, 90 * MIB, 0);
    harness_free(&h, &huge);
    far = harness_alloc(&h, 60 * MIB, 0);
    g_assert_cmpuint(far.addr, ==, huge.addr);
    g_assert_cmpuint(far.size, ==, 90 * MIB);
    harness_free(&h, &far);
    harness_clear(&h);
    /* the boundary: a 70 MiB block is exactly 20 MiB larger than a 50 MiB request, so it is not
     * a near fit; one 512 bytes larger is */
    harness_init(&h, "caching", "4GiB", "max_split_size_mb:40");
    huge = harness_alloc(&h, 70 * MIB, 0);
    harness_free(&h, &huge);
    far = harness_alloc(&h, 50 * MIB, 0);
    g_assert_cmpuint(far.addr, !=, huge.addr);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 2);
    near = harness_alloc(&h, 50 * MIB + 512, 0);
    g_assert_cmpuint(near.addr, ==, huge.addr);
    g_assert_cmpuint(near.size, ==, 70 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 2);
    harness_free(&h, &near);
    harness_free(&h, &far);
    harness_clear(&h);
}

/* Oversize blocks are never split, even with room to spare. */
static void
test_oversize_no_split(void)
{
    Harness h;
    FsimBlock a;

    harness_init(&h, "caching", "4GiB", "max_split_size_mb:20");
    /* 25 MiB + 1 B rounds to 25 MiB + 512 B in a 26 MiB segment: 1.5 MiB would remain, but a
     * request at or above max_split_size is never split */
    a = harness_alloc(&h, 25 * MIB + 1, 0);
    g_assert_cmpuint(a.size, ==, 26 * MIB);
    harness_free(&h, &a);
    harness_clear(&h);
}

/* ---- release paths -----------------------------------------------------------------------------
 */

/* empty_cache = release_cached_blocks: every unsplit free block, large pool first, each pool in
 * (stream, size, address) order; split segments stay. */
static void
test_release_order(void)
{
    Harness h;
    FsimBlock blocks[6];
    FsimBlock pinned;
    FsimBlock tail;
    static const struct {
        uint64_t size;
        uint64_t stream;
    } plan[6] = {
        {30 * MIB, 1}, {12 * MIB, 0}, {100, 0}, {16 * MIB, 0}, {12 * MIB, 0}, {200, 1},
    };
    uint64_t expected[6];
    guint frees_before;

    harness_init(&h, "caching", "4GiB", NULL);
    for (int i = 0; i < 6; i++)
        blocks[i] = harness_alloc(&h, plan[i].size, plan[i].stream);
    /* a split segment: one block of it stays allocated */
    pinned = harness_alloc(&h, 2 * MIB, 0);
    tail = harness_alloc(&h, 2 * MIB, 0);
    harness_free(&h, &tail);
    for (int i = 0; i < 6; i++)
        harness_free(&h, &blocks[i]);
    /* large pool: stream 0 by (size, address): the 12 MiB ones by address, then 16; then
     * stream 1's 30; then the small pool: stream 0's, then stream 1's */
    expected[0] = MIN(blocks[1].addr, blocks[4].addr);
    expected[1] = MAX(blocks[1].addr, blocks[4].addr);
    expected[2] = blocks[3].addr;
    expected[3] = blocks[0].addr;
    expected[4] = blocks[2].addr;
    expected[5] = blocks[5].addr;
    frees_before = harness_count(&h, FSIM_CALL_MEM_FREE);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE) - frees_before, ==, 6);
    for (guint i = 0; i < 6; i++)
        g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_FREE, i)->addr, ==, expected[i]);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 20 * MIB);
    harness_free(&h, &pinned);
    harness_empty_cache(&h);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 0);
    g_assert_cmpuint(harness_stat(&h, "num_sync_all_streams"), ==, 2);
    harness_clear(&h);
}

/* When cudaMalloc fails, every cached unsplit block is released and the allocation retried; an
 * OOM only when that fails too, with nothing handed out disturbed. */
static void
test_retry_before_oom(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;
    FsimBlock out;
    FsimBlock sentinel;

    harness_init(&h, "caching", "100MiB", NULL);
    a = harness_alloc(&h, 40 * MIB, 0);
    b = harness_alloc(&h, 40 * MIB, 0);
    harness_free(&h, &a);
    harness_free(&h, &b);
    c = harness_alloc(&h, 60 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 2);
    g_assert_cmpuint(harness_stats(&h).num_alloc_retries, ==, 1);
    g_assert_cmpuint(harness_stat(&h, "num_alloc_retries"), ==, 1);
    g_assert_cmpuint(harness_stat(&h, "num_ooms"), ==, 0);
    /* calls: 2 mallocs, 2 frees, the malloc of the retry */
    g_assert_cmpint(g_array_index(h.calls, Call, 4).call, ==, FSIM_CALL_MEM_ALLOC);
    g_assert_cmpuint(g_array_index(h.calls, Call, 4).size, ==, 60 * MIB);
    memset(&out, 0x5a, sizeof(out));
    sentinel = out;
    g_assert_false(harness_try_alloc(&h, 50 * MIB, 0, &out));
    g_assert_cmpmem(&out, sizeof(out), &sentinel, sizeof(sentinel));
    g_assert_cmpuint(harness_stat(&h, "num_ooms"), ==, 1);
    g_assert_cmpuint(harness_stat(&h, "num_alloc_retries"), ==, 2);
    harness_free(&h, &c);
    harness_clear(&h);
}

/* With max_split_size set, release_available_cached_blocks frees just enough oversize blocks
 * (largest first) before the full release is tried. */
static void
test_release_available(void)
{
    Harness h;
    FsimBlock blocks[3];
    FsimBlock got;

    harness_init(&h, "caching", "200MiB", "max_split_size_mb:40");
    blocks[0] = harness_alloc(&h, 50 * MIB, 0);
    blocks[1] = harness_alloc(&h, 60 * MIB, 0);
    blocks[2] = harness_alloc(&h, 3 * MIB, 0); /* a 20 MiB segment, never released here */
    harness_free(&h, &blocks[0]);
    harness_free(&h, &blocks[1]);
    /* 100 MiB: nothing cached fits; 130 reserved + 100 > 200; free 60 then 50 (>= 100) */
    got = harness_alloc(&h, 100 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 2);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_FREE, 0)->addr, ==, blocks[1].addr);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_FREE, 1)->addr, ==, blocks[0].addr);
    g_assert_cmpuint(harness_stat(&h, "num_alloc_retries"), ==, 0);
    harness_free(&h, &got);
    harness_free(&h, &blocks[2]);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 4);
    /* one cached oversize block at least as large as the request is freed alone: 130 MiB and a
     * 20 MiB segment cached; 100 MiB: 130 >= 100 + 20 is no near fit, 150 + 100 > 200 */
    blocks[0] = harness_alloc(&h, 130 * MIB, 0);
    blocks[1] = harness_alloc(&h, 3 * MIB, 0);
    harness_free(&h, &blocks[0]);
    harness_free(&h, &blocks[1]);
    got = harness_alloc(&h, 100 * MIB, 0);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 5);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_FREE, 4)->size, ==, 130 * MIB);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 120 * MIB);
    harness_free(&h, &got);
    harness_clear(&h);
}

/* garbage_collection_threshold with a memory fraction: above threshold x allowed memory, unsplit
 * large blocks at least as old as the average (in searches of their pool) are freed first. */
static void
test_garbage_collection(void)
{
    Harness h;
    FsimBlock x1;
    FsimBlock x2;
    FsimBlock s;
    FsimBlock t;

    /* allowed = 0.5 x 1 GiB = 512 MiB; GC above 0.5 x 512 = 256 MiB */
    harness_init(&h, "caching", "1GiB",
                 "per_process_memory_fraction:0.5,garbage_collection_threshold:0.5");
    x1 = harness_alloc(&h, 120 * MIB, 0); /* clock 1 */
    x2 = harness_alloc(&h, 120 * MIB, 0); /* clock 2 */
    harness_free(&h, &x1);                /* cached at 2 */
    s = harness_alloc(&h, 30 * MIB, 7);   /* clock 3: a miss; 240 <= 256: no GC */
    harness_free(&h, &x2);                /* cached at 3 */
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 0);
    /* clock 4, a miss with 270 MiB held: ages 2 (x1) and 1 (x2), average 1.5: x1 goes, and the
     * 120 MiB it frees covers the 14 MiB excess, so x2 stays */
    t = harness_alloc(&h, 30 * MIB, 7);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 1);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_FREE, 0)->addr, ==, x1.addr);
    g_assert_cmpuint(harness_stat(&h, "num_alloc_retries"), ==, 0);
    harness_free(&h, &s);
    harness_free(&h, &t);
    harness_clear(&h);
    /* without a memory fraction the threshold does nothing */
    harness_init(&h, "caching", "1GiB", "garbage_collection_threshold:0.5");
    x1 = harness_alloc(&h, 120 * MIB, 0);
    x2 = harness_alloc(&h, 120 * MIB, 0);
    harness_free(&h, &x1);
    s = harness_alloc(&h, 30 * MIB, 7);
    harness_free(&h, &x2);
    t = harness_alloc(&h, 30 * MIB, 7);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 0);
    harness_free(&h, &s);
    harness_free(&h, &t);
    harness_clear(&h);
}

/* per_process_memory_fraction caps what alloc_block may hold, before the device does. */
static void
test_memory_fraction(void)
{
    Harness h;
    FsimBlock a;
    FsimBlock out;

    harness_init(&h, "caching", "1GiB", "per_process_memory_fraction:0.25");
    a = harness_alloc(&h, 200 * MIB, 0);
    g_assert_false(harness_try_alloc(&h, 100 * MIB, 0, &out));
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 1);
    harness_free(&h, &a);
    a = harness_alloc(&h, 250 * MIB, 0); /* after releasing the cached 200 MiB */
    harness_free(&h, &a);
    harness_clear(&h);
}

/* roundup_power2_divisions through the policy. */
static void
test_roundup_policy(void)
{
    Harness h;
    FsimBlock a;

    harness_init(&h, "caching", "1GiB", "roundup_power2_divisions:4");
    a = harness_alloc(&h, 1200 * KIB, 0);
    g_assert_cmpuint(a.size, ==, 1280 * KIB);
    g_assert_cmpuint(harness_stat(&h, "requested_bytes.all.current"), ==, 1200 * KIB);
    harness_free(&h, &a);
    harness_clear(&h);
}

/* ---- seeding and statistics --------------------------------------------------------------------
 */

static void
test_seed(void)
{
    Harness h;
    FsimSeedSegment segments[] = {
        {.addr = 0x7f1000000000, .size = 20 * MIB, .stream = 0, .pool = FSIM_POOL_LARGE},
        {.addr = 0x7f1002000000, .size = 2 * MIB, .stream = 0, .pool = FSIM_POOL_SMALL},
    };
    FsimSeedBlock seeds[] = {
        {.id = 1, .addr = 0x7f1000000000, .size = 3 * MIB, .requested = 3 * MIB - 100},
        {.id = 2, .addr = 0x7f1000000000 + 5 * MIB, .size = MIB + 512, .requested = MIB + 1},
        {.id = 3, .addr = 0x7f1002000000 + 4096, .size = 512, .requested = 8, .pending_free = TRUE},
    };
    FsimInitialState state = {segments, 2, seeds, 3};
    FsimBlock blocks[3];
    FsimBlock a;
    g_autoptr(GError) error = NULL;

    harness_init(&h, "caching", "1GiB", NULL);
    h.device->seeding = TRUE;
    g_assert_true(h.policy->ops->seed(h.policy, &state, blocks, &error));
    h.device->seeding = FALSE;
    g_assert_no_error(error);
    harness_check(&h);
    g_assert_cmpuint(h.calls->len, ==, 0); /* seeding is not observed */
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 22 * MIB);
    for (int i = 0; i < 3; i++) {
        g_assert_cmpuint(blocks[i].addr, ==, seeds[i].addr);
        g_assert_cmpuint(blocks[i].size, ==, seeds[i].size);
    }
    /* the pending block is active but no longer allocated */
    g_assert_cmpuint(harness_stat(&h, "allocated_bytes.all.current"), ==, 4 * MIB + 512);
    g_assert_cmpuint(harness_stat(&h, "active_bytes.all.current"), ==, 4 * MIB + 1024);
    g_assert_cmpuint(harness_stat(&h, "reserved_bytes.all.current"), ==, 22 * MIB);
    /* free gaps: [3, 5) MiB fits 2 MiB best, at its low end */
    a = harness_alloc(&h, 2 * MIB, 0);
    g_assert_cmpuint(a.addr, ==, 0x7f1000000000 + 3 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_ALLOC), ==, 0);
    harness_free(&h, &a);
    for (int i = 0; i < 3; i++)
        harness_free(&h, &blocks[i]);
    g_assert_cmpuint(harness_stats(&h).largest_free_block, ==, 20 * MIB);
    harness_empty_cache(&h);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MEM_FREE), ==, 2);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MEM_FREE, 0)->addr, ==, segments[0].addr);
    harness_clear(&h);
}

/* A state the device cannot hold is refused with a message. */
static void
test_seed_refused(void)
{
    Harness h;
    FsimSeedSegment segments[] = {
        {.addr = 0x7f1000000000, .size = 40 * MIB, .stream = 0, .pool = FSIM_POOL_LARGE},
    };
    FsimSeedBlock seeds[] = {
        {.id = 1, .addr = 0x7f1000000000 + 39 * MIB, .size = 2 * MIB, .requested = 2 * MIB},
    };
    FsimInitialState state = {segments, 1, seeds, 1};
    FsimBlock blocks[1];
    g_autoptr(GError) error = NULL;

    harness_init(&h, "caching", "1GiB", NULL);
    h.device->seeding = TRUE;
    g_assert_false(h.policy->ops->seed(h.policy, &state, blocks, &error));
    g_assert_nonnull(error);
    g_clear_error(&error);
    harness_clear(&h);
    harness_init(&h, "caching", "32MiB", NULL);
    h.device->seeding = TRUE;
    state.n_blocks = 0;
    g_assert_false(h.policy->ops->seed(h.policy, &state, blocks, &error));
    g_assert_nonnull(error);
    harness_clear(&h);
}

/* Through the engine: PyTorch's names, allocated bytes as the engine counts them. */
static void
test_stats_names(void)
{
    static const char *const names[] = {
        "allocated_bytes.all.current",
        "allocated_bytes.all.peak",
        "reserved_bytes.all.current",
        "reserved_bytes.all.peak",
        "active_bytes.all.current",
        "requested_bytes.all.current",
        "inactive_split_bytes.all.current",
        "inactive_split.all.current",
        "segment.all.current",
        "num_alloc_retries",
        "num_ooms",
        "num_sync_all_streams",
        "num_device_alloc",
        "num_device_free",
        "oversize_allocations.current",
        "oversize_segments.current",
    };
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimPolicyStats stats;

    harness_init(&h, "caching", "1GiB", NULL);
    a = harness_alloc(&h, 5000, 0);
    b = harness_alloc(&h, 30 * MIB, 1);
    stats = harness_stats(&h);
    g_assert_cmpuint(stats.n_extra, ==, G_N_ELEMENTS(names));
    for (guint i = 0; i < stats.n_extra; i++)
        g_assert_cmpstr(stats.extra[i].name, ==, names[i]);
    g_assert_cmpuint(harness_stat(&h, "allocated_bytes.all.current"), ==, 5120 + 30 * MIB);
    g_assert_cmpuint(harness_stat(&h, "reserved_bytes.all.current"), ==, 32 * MIB);
    g_assert_cmpuint(harness_stat(&h, "segment.all.current"), ==, 2);
    g_assert_cmpuint(harness_stat(&h, "num_device_alloc"), ==, 2);
    g_assert_cmpuint(stats.cached_bytes, ==, 2 * MIB - 5120);
    harness_free(&h, &a);
    harness_free(&h, &b);
    g_assert_cmpuint(harness_stat(&h, "allocated_bytes.all.peak"), ==, 5120 + 30 * MIB);
    g_assert_cmpuint(harness_stats(&h).cached_bytes, ==, 32 * MIB);
    harness_clear(&h);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/caching/round-size", test_round_size);
    g_test_add_func("/caching/allocation-size", test_allocation_size);
    g_test_add_func("/caching/small-pool", test_small_pool);
    g_test_add_func("/caching/large-segment-split", test_large_segment_split);
    g_test_add_func("/caching/large-remainder", test_large_remainder);
    g_test_add_func("/caching/best-fit-and-streams", test_best_fit_and_streams);
    g_test_add_func("/caching/merge", test_merge);
    g_test_add_func("/caching/oversize", test_oversize);
    g_test_add_func("/caching/oversize-no-split", test_oversize_no_split);
    g_test_add_func("/caching/release-order", test_release_order);
    g_test_add_func("/caching/retry-before-oom", test_retry_before_oom);
    g_test_add_func("/caching/release-available", test_release_available);
    g_test_add_func("/caching/garbage-collection", test_garbage_collection);
    g_test_add_func("/caching/memory-fraction", test_memory_fraction);
    g_test_add_func("/caching/roundup", test_roundup_policy);
    g_test_add_func("/caching/seed", test_seed);
    g_test_add_func("/caching/seed-refused", test_seed_refused);
    g_test_add_func("/caching/stats", test_stats_names);
    return g_test_run();
}
