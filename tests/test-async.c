/* SPDX-License-Identifier: MIT */
/*
 * The `async` policy (cudaMallocAsync's default pool), cases worked out by hand from what CUDA
 * documents and what the policy's header says it assumes: pages mapped on demand and kept until
 * a synchronisation, trimmed to the release threshold there; reuse across streams only with the
 * opportunistic policy; unused pages trimmed before an OOM.
 */
#include <glib.h>

#include "fragsim/fragsim.h"

#include "knob-harness.h"

#define MIB FSIM_MiB

static void
run_threshold(const char *const *sets, uint64_t want_after_sync)
{
    Harness h;
    FsimBlock a;
    FsimBlock b;
    FsimBlock c;

    harness_init_knobs(&h, "async", "1GiB", sets);
    a = harness_alloc(&h, MIB, 0);
    b = harness_alloc(&h, MIB, 0);
    c = harness_alloc(&h, 3 * MIB, 0);
    g_assert_cmpuint(b.addr, ==, a.addr + MIB);
    g_assert_cmpuint(c.addr, ==, a.addr + 2 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_MAP), ==, 2);
    g_assert_cmpuint(harness_nth(&h, FSIM_CALL_MAP, 1)->size, ==, 4 * MIB);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 6 * MIB);
    harness_free(&h, &b);
    harness_free(&h, &c);
    /* no synchronisation yet: the pool keeps its pages */
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 6 * MIB);
    h.policy->ops->stream_sync(h.policy, 0, 0);
    harness_check(&h);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, want_after_sync);
    harness_free(&h, &a);
    harness_empty_cache(&h);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 0);
    harness_clear(&h);
}

static void
test_threshold_zero(void)
{
    /* pages 1 and 2 hold nothing: unmapped at the synchronisation; page 0 holds a */
    run_threshold(NULL, 2 * MIB);
}

static void
test_threshold_max(void)
{
    static const char *const sets[] = {"async.release_threshold=max", NULL};

    run_threshold(sets, 6 * MIB);
}

static void
test_threshold_4mib(void)
{
    static const char *const sets[] = {"async.release_threshold=4MiB", NULL};

    run_threshold(sets, 4 * MIB);
}

static void
run_streams(const char *const *sets, gboolean want_reuse)
{
    Harness h;
    FsimBlock a;
    FsimBlock other;
    FsimBlock same;

    harness_init_knobs(&h, "async", "1GiB", sets);
    a = harness_alloc(&h, MIB, 0);
    harness_free(&h, &a);
    other = harness_alloc(&h, MIB, 1);
    g_assert_cmpuint(other.addr == a.addr, ==, want_reuse);
    same = harness_alloc(&h, MIB, 0);
    g_assert_cmpuint(same.addr, ==, want_reuse ? a.addr + MIB : a.addr);
    harness_free(&h, &other);
    harness_free(&h, &same);
    harness_clear(&h);
}

static void
test_opportunistic(void)
{
    run_streams(NULL, TRUE);
}

static void
test_follow_events_only(void)
{
    static const char *const sets[] = {"async.opportunistic=false", NULL};

    run_streams(sets, FALSE);
}

/* An 8 MiB device full of 2 MiB blocks; two freed leave holes too small for 4 MiB, which goes
 * above them: the device has no page left until the unused pages are trimmed. */
static void
test_trim_before_oom(void)
{
    Harness h;
    FsimBlock blocks[4];
    FsimBlock big;

    harness_init_knobs(&h, "async", "8MiB", NULL);
    for (int i = 0; i < 4; i++)
        blocks[i] = harness_alloc(&h, 2 * MIB, 0);
    harness_free(&h, &blocks[0]);
    harness_free(&h, &blocks[2]);
    big = harness_alloc(&h, 4 * MIB, 0);
    g_assert_cmpuint(big.addr, ==, blocks[3].addr + 2 * MIB);
    g_assert_cmpuint(harness_count(&h, FSIM_CALL_UNMAP), ==, 2);
    g_assert_cmpuint(harness_stats(&h).num_alloc_retries, ==, 1);
    g_assert_cmpuint((uint64_t)h.device->reserved.current, ==, 8 * MIB);
    harness_free(&h, &big);
    harness_free(&h, &blocks[1]);
    harness_free(&h, &blocks[3]);
    harness_clear(&h);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/async/threshold-zero", test_threshold_zero);
    g_test_add_func("/async/threshold-max", test_threshold_max);
    g_test_add_func("/async/threshold-4mib", test_threshold_4mib);
    g_test_add_func("/async/opportunistic", test_opportunistic);
    g_test_add_func("/async/follow-events-only", test_follow_events_only);
    g_test_add_func("/async/trim-before-oom", test_trim_before_oom);
    return g_test_run();
}
