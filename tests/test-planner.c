/* SPDX-License-Identifier: MIT */
/*
 * The offline `planner`: lifetimes from a trace (the pre-pass), the placement checker failing
 * loudly on a broken plan, a case worked out by hand where greedy by size beats best fit, and on
 * every sample trace and shared snapshot: the plan passes the checker, is followed allocation by
 * allocation, and its reserved memory is never above bestfit's nor below the lower bound.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/fragsim.h"

#include "policies/planner/planner.h"
#include "test-util.h"

#define MIB FSIM_MiB

static char *
write_trace(const char *dir, const char *text)
{
    char *path = g_build_filename(dir, "t.trace", NULL);

    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    return path;
}

/* A 1 MiB tensor freed before a second 2 MiB one comes: best fit in time order leaves its hole
 * below the 2 MiB tensors (top 5 MiB); greedy by size puts the two 2 MiB ones at 0 and 2 MiB and
 * the 1 MiB one above the first (it never meets the second): 4 MiB, the lower bound. */
static const char hole_trace[] = "fragsim-trace v1\n"
                                 "1 alloc 1 1048576 0\n"
                                 "2 alloc 2 2097152 0\n"
                                 "3 free 1 0\n"
                                 "4 alloc 3 2097152 0\n"
                                 "5 free 2 0\n"
                                 "6 free 3 0\n";

static void
test_lifetimes_and_orders(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = write_trace(dir, hole_trace);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);
    g_autoptr(FsimLifetimes) lifetimes = NULL;
    PlannerPlan plan;

    g_assert_no_error(error);
    lifetimes = fsim_lifetimes_from_trace(trace, 0, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(lifetimes->n, ==, 3);
    g_assert_cmpuint(lifetimes->steps, ==, 6);
    g_assert_cmpuint(lifetimes->items[0].start, ==, 1);
    g_assert_cmpuint(lifetimes->items[0].end, ==, 3);
    g_assert_cmpuint(lifetimes->items[1].end, ==, 5);
    g_assert_cmpuint(lifetimes->items[2].start, ==, 4);
    g_assert_cmpuint(lifetimes->items[2].size, ==, 2 * MIB);
    planner_plan_build(lifetimes, 256, 80 * FSIM_GiB, 2 * MIB, 1000, &plan);
    g_assert_cmpuint(plan.arena_by_order[PLANNER_ORDER_TIME], ==, 5 * MIB);
    g_assert_cmpuint(plan.arena_by_order[PLANNER_ORDER_SIZE], ==, 4 * MIB);
    g_assert_cmpint(plan.order, ==, PLANNER_ORDER_SIZE);
    g_assert_cmpuint(plan.offsets[1], ==, 0);
    g_assert_cmpuint(plan.offsets[2], ==, 2 * MIB);
    g_assert_cmpuint(plan.offsets[0], ==, 2 * MIB);
    g_assert_true(fsim_plan_check(lifetimes, plan.offsets, plan.sizes, &error));
    g_assert_no_error(error);
    planner_plan_clear(&plan);
    /* A work limit of 1 neighbour stops every greedy order: the time order is kept. */
    planner_plan_build(lifetimes, 256, 80 * FSIM_GiB, 2 * MIB, 1, &plan);
    g_assert_cmpint(plan.order, ==, PLANNER_ORDER_TIME);
    g_assert_cmpuint(plan.arena_by_order[PLANNER_ORDER_SIZE], ==, 0);
    g_assert_cmpuint(plan.arena_bytes, ==, 5 * MIB);
    planner_plan_clear(&plan);
    fsim_test_remove_tree(dir);
}

static void
test_checker_fails(void)
{
    FsimLifetime items[] = {{.size = 100, .start = 1, .end = 4},
                            {.size = 100, .start = 2, .end = 3},
                            {.size = 100, .start = 4, .end = FSIM_LIFETIME_FOREVER}};
    FsimLifetimes lifetimes = {items, G_N_ELEMENTS(items), 4, NULL, 0};
    uint64_t sizes[] = {256, 256, 256};
    uint64_t good[] = {0, 256, 0}; /* the third reuses the first's place after its end */
    uint64_t bad[] = {0, 128, 0};  /* the second overlaps the first while both live */
    uint64_t small[] = {0, 256, 0};
    uint64_t short_sizes[] = {256, 64, 256};
    g_autoptr(GError) error = NULL;

    g_assert_true(fsim_plan_check(&lifetimes, good, sizes, &error));
    g_assert_no_error(error);
    g_assert_false(fsim_plan_check(&lifetimes, bad, sizes, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_FAILED);
    g_assert_nonnull(strstr(error->message, "allocations 0 [0, 256) and 1 [128, 384)"));
    g_clear_error(&error);
    g_assert_false(fsim_plan_check(&lifetimes, small, short_sizes, &error));
    g_clear_error(&error);
    items[2].end = 4; /* ends where it starts: not a lifetime */
    g_assert_false(fsim_plan_check(&lifetimes, good, sizes, &error));
}

/* The pre-pass's ends: every lifetime that ends, once, by end ascending. */
static void
assert_ends_in_order(const FsimLifetimes *lifetimes)
{
    g_autofree guint8 *seen = g_new0(guint8, MAX(lifetimes->n, 1));
    gsize finite = 0;

    for (gsize i = 0; i < lifetimes->n; i++)
        finite += lifetimes->items[i].end != FSIM_LIFETIME_FOREVER;
    g_assert_cmpuint(lifetimes->n_ends, ==, finite);
    for (gsize e = 0; e < lifetimes->n_ends; e++) {
        gsize k = lifetimes->ends[e];

        g_assert_cmpuint(k, <, lifetimes->n);
        g_assert_false(seen[k]);
        seen[k] = 1;
        if (e > 0)
            g_assert_cmpuint(lifetimes->items[lifetimes->ends[e - 1]].end, <,
                             lifetimes->items[k].end);
    }
}

/* Many ids, freed in a shuffled order, some deferred (their end the free_completed), some
 * allocated again after their free: the pre-pass's lifetimes against a table kept here. */
static void
test_lifetimes_many(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autoptr(GString) text = g_string_new("fragsim-trace v1\n");
    g_autoptr(GRand) rand = g_rand_new_with_seed(14);
    g_autoptr(GArray) live = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autoptr(GArray) ends = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autoptr(GHashTable) index_of = g_hash_table_new(g_int64_hash, g_int64_equal);
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimLifetimes) lifetimes = NULL;
    g_autofree char *path = NULL;
    uint64_t step = 0;
    uint64_t next_id = 1;

    g_array_set_size(ids, 20000);
    for (guint e = 0; e < 20000; e++) {
        uint64_t forever = FSIM_LIFETIME_FOREVER;

        step++;
        if (live->len == 0 || g_rand_int_range(rand, 0, 2) == 0) {
            /* a freed id again now and then */
            uint64_t id = g_rand_int_range(rand, 0, 8) == 0 ? next_id / 2 + 1 : next_id++;

            if (g_hash_table_contains(index_of, &id)) /* still live: a new one instead */
                id = next_id++;
            g_string_append_printf(
                text, "%" G_GUINT64_FORMAT " alloc %" G_GUINT64_FORMAT " 512 0\n", step * 10, id);
            g_array_index(ids, uint64_t, ends->len) = id;
            g_hash_table_insert(index_of, &g_array_index(ids, uint64_t, ends->len),
                                GSIZE_TO_POINTER(ends->len + 1));
            g_array_append_val(ends, forever);
            g_array_append_val(live, id);
        } else {
            guint k = (guint)g_rand_int_range(rand, 0, (gint32)live->len);
            uint64_t id = g_array_index(live, uint64_t, k);
            gsize index = GPOINTER_TO_SIZE(g_hash_table_lookup(index_of, &id)) - 1;

            g_array_remove_index_fast(live, k);
            if (g_rand_int_range(rand, 0, 4) == 0) {
                g_string_append_printf(
                    text, "%" G_GUINT64_FORMAT " free_requested %" G_GUINT64_FORMAT " 0\n",
                    step * 10, id);
                step++;
                g_string_append_printf(
                    text, "%" G_GUINT64_FORMAT " free_completed %" G_GUINT64_FORMAT " 0\n",
                    step * 10, id);
            } else {
                g_string_append_printf(text, "%" G_GUINT64_FORMAT " free %" G_GUINT64_FORMAT " 0\n",
                                       step * 10, id);
            }
            g_array_index(ends, uint64_t, index) = step;
            g_hash_table_remove(index_of, &id);
        }
    }
    path = write_trace(dir, text->str);
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    lifetimes = fsim_lifetimes_from_trace(trace, 0, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(lifetimes->n, ==, ends->len);
    assert_ends_in_order(lifetimes);
    g_assert_cmpuint(lifetimes->steps, ==, step);
    for (gsize i = 0; i < lifetimes->n; i++)
        g_assert_cmpuint(lifetimes->items[i].end, ==, g_array_index(ends, uint64_t, i));
    fsim_test_remove_tree(dir);
}

/* Whether some two placed allocations alive at once overlap, the slow way. */
static gboolean
plan_overlaps(const FsimLifetimes *lifetimes, const uint64_t *offsets, const uint64_t *sizes)
{
    for (gsize a = 0; a < lifetimes->n; a++)
        for (gsize b = a + 1; b < lifetimes->n; b++)
            if (offsets[a] != FSIM_PLAN_UNPLACED && offsets[b] != FSIM_PLAN_UNPLACED &&
                lifetimes->items[b].start < lifetimes->items[a].end &&
                offsets[a] < offsets[b] + sizes[b] && offsets[b] < offsets[a] + sizes[a])
                return TRUE;
    return FALSE;
}

/* Random plans, some valid, some not: the checker's verdict against plan_overlaps(), and an
 * overlap with the allocation above (the neighbour after it by offset) named in order. */
static void
test_checker_random(void)
{
    FsimLifetime items[] = {{.size = 100, .start = 1, .end = 9},
                            {.size = 100, .start = 2, .end = 3},
                            {.size = 100, .start = 3, .end = 9}};
    FsimLifetimes above = {items, G_N_ELEMENTS(items), 9, NULL, 0};
    uint64_t sizes[] = {256, 256, 256};
    uint64_t offsets[] = {512, 0, 300}; /* the third meets the first above it, not the second */
    g_autoptr(GRand) rand = g_rand_new_with_seed(7);
    g_autoptr(GError) error = NULL;
    guint failed = 0;

    g_assert_false(fsim_plan_check(&above, offsets, sizes, &error));
    g_assert_nonnull(strstr(error->message, "allocations 2 [300, 556) and 0 [512, 768)"));
    g_clear_error(&error);
    for (guint round = 0; round < 2000; round++) {
        FsimLifetime random_items[40];
        uint64_t random_offsets[40];
        uint64_t random_sizes[40];
        FsimLifetimes lifetimes = {random_items, 1 + round % 40, 0, NULL, 0};
        uint64_t start = 0;

        for (gsize i = 0; i < lifetimes.n; i++) {
            start += (uint64_t)g_rand_int_range(rand, 0, 3);
            random_items[i] = (FsimLifetime){.size = 1, .start = start};
            random_items[i].end = g_rand_int_range(rand, 0, 10) == 0
                                      ? FSIM_LIFETIME_FOREVER
                                      : start + 1 + (uint64_t)g_rand_int_range(rand, 0, 12);
            random_offsets[i] = g_rand_int_range(rand, 0, 12) == 0
                                    ? FSIM_PLAN_UNPLACED
                                    : (uint64_t)g_rand_int_range(rand, 0, 64) * 4096;
            random_sizes[i] = (uint64_t)g_rand_int_range(rand, 1, 9) * 4096;
        }
        lifetimes.steps = start;
        g_assert_cmpint(fsim_plan_check(&lifetimes, random_offsets, random_sizes, &error), ==,
                        !plan_overlaps(&lifetimes, random_offsets, random_sizes));
        failed += error != NULL;
        g_clear_error(&error);
    }
    g_assert_cmpuint(failed, >, 100);
    g_assert_cmpuint(failed, <, 1900);
}

/* A broken plan: every order's is checked, but the time order's only under paranoid (its places
 * cannot overlap); short sizes are found in every order. */
static void
test_plan_check(void)
{
    FsimLifetime items[] = {{.size = 100, .start = 1, .end = 4},
                            {.size = 100, .start = 2, .end = 3}};
    FsimLifetimes lifetimes = {items, G_N_ELEMENTS(items), 4, NULL, 0};
    uint64_t sizes[] = {256, 256};
    uint64_t offsets[] = {0, 128};
    uint64_t short_sizes[] = {256, 64};
    PlannerPlan plan = {.offsets = offsets, .sizes = sizes, .n = 2, .order = PLANNER_ORDER_SIZE};
    g_autoptr(GError) error = NULL;

    g_assert_false(planner_plan_check(&lifetimes, &plan, FALSE, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_FAILED);
    g_assert_true(g_str_has_prefix(error->message, "planner: the size order's plan is broken: "
                                                   "placement check failed: allocations 0"));
    g_clear_error(&error);
    plan.order = PLANNER_ORDER_TIME;
    g_assert_false(planner_plan_check(&lifetimes, &plan, TRUE, &error));
    g_assert_true(g_str_has_prefix(error->message, "planner: the time order's plan is broken: "));
    g_clear_error(&error);
    g_assert_true(planner_plan_check(&lifetimes, &plan, FALSE, &error));
    g_assert_no_error(error);
    plan.sizes = short_sizes;
    g_assert_false(planner_plan_check(&lifetimes, &plan, FALSE, &error));
    g_assert_nonnull(strstr(error->message, "allocation 1 has 64 bytes for 100"));
}

/* The time order's plan, which is not swept by the checker but under paranoid, passes it: random
 * lifetimes on devices from a few pages (many left out) to a large one. */
static void
test_time_order_valid(void)
{
    g_autoptr(GRand) rand = g_rand_new_with_seed(13);
    guint checked = 0;
    guint left_out = 0;

    for (guint round = 0; round < 400; round++) {
        FsimLifetime items[80];
        FsimLifetimes lifetimes = {items, 1 + round % 80, 0, NULL, 0};
        uint64_t capacity = (uint64_t)(1 + round % 7) * 64 * 1024;
        uint64_t start = 0;
        g_autoptr(GError) error = NULL;
        PlannerPlan plan;

        for (gsize i = 0; i < lifetimes.n; i++) {
            start += (uint64_t)g_rand_int_range(rand, 0, 3);
            items[i] = (FsimLifetime){.size = (uint64_t)g_rand_int_range(rand, 1, 40) * 1000,
                                      .start = start};
            items[i].end = g_rand_int_range(rand, 0, 10) == 0
                               ? FSIM_LIFETIME_FOREVER
                               : start + 1 + (uint64_t)g_rand_int_range(rand, 0, 20);
        }
        lifetimes.steps = start + 1;
        planner_plan_build(&lifetimes, 256, capacity, 4096, 0, &plan);
        if (plan.arena_by_order[PLANNER_ORDER_SIZE] == 0) { /* the time order's offsets */
            g_assert_cmpint(plan.order, ==, PLANNER_ORDER_TIME);
            g_assert_true(planner_plan_check(&lifetimes, &plan, TRUE, &error));
            g_assert_no_error(error);
            checked++;
            left_out += plan.unplaced > 0;
        }
        planner_plan_clear(&plan);
    }
    g_assert_cmpuint(checked, >, 300);
    g_assert_cmpuint(left_out, >, 50);
}

/* Random lifetimes (some starting together, some forever, in a few rounds not in start order):
 * every greedy order completes at a work limit of exactly planner_greedy_work() and gives up one
 * below it, and the plan runs them (the orders' high-water marks set) at that limit only. */
static void
test_greedy_work(void)
{
    g_autoptr(GRand) rand = g_rand_new_with_seed(11);

    for (guint round = 0; round < 600; round++) {
        FsimLifetime items[60];
        uint64_t sizes[60];
        uint64_t offsets[60];
        FsimLifetimes lifetimes = {items, 1 + round % 60, 0, NULL, 0};
        uint64_t start = 0;
        uint64_t work;

        for (gsize i = 0; i < lifetimes.n; i++) {
            start += (uint64_t)g_rand_int_range(rand, 0, 3);
            items[i] = (FsimLifetime){.size = (uint64_t)g_rand_int_range(rand, 1, 9) * 1000,
                                      .start = start};
            items[i].end = g_rand_int_range(rand, 0, 10) == 0
                               ? FSIM_LIFETIME_FOREVER
                               : start + 1 + (uint64_t)g_rand_int_range(rand, 0, 2 + round % 30);
            sizes[i] = (items[i].size + 255) & ~(uint64_t)255;
        }
        if (round % 10 == 9 && lifetimes.n > 2) {
            FsimLifetime t = items[0];

            items[0] = items[lifetimes.n / 2];
            items[lifetimes.n / 2] = t;
        }
        lifetimes.steps = start + 1;
        work = planner_greedy_work(&lifetimes, G_MAXUINT64);
        g_assert_cmpuint(planner_greedy_work(&lifetimes, work), ==, work);
        for (int order = PLANNER_ORDER_SIZE; order < PLANNER_ORDER_COUNT; order++) {
            g_assert_true(planner_plan_greedy(&lifetimes, sizes, order, work, offsets));
            if (work == 0)
                continue;
            g_assert_cmpuint(planner_greedy_work(&lifetimes, work - 1), >, work - 1);
            g_assert_false(planner_plan_greedy(&lifetimes, sizes, order, work - 1, offsets));
        }
        for (uint64_t limit = work > 0 ? work - 1 : 0; limit <= work; limit++) {
            PlannerPlan plan;

            planner_plan_build(&lifetimes, 256, 80 * FSIM_GiB, 2 * MIB, limit, &plan);
            for (int order = PLANNER_ORDER_SIZE; order < PLANNER_ORDER_COUNT; order++)
                g_assert_cmpint(plan.arena_by_order[order] != 0, ==, limit == work);
            planner_plan_clear(&plan);
        }
    }
}

/* Lifetimes as a trace makes them (one event a step: an allocation, or the end of a live one at
 * random), with their ends in order: the time order released in that order places every
 * allocation where the heap by end places it, on devices from a few pages to a large one. */
static void
test_time_order_ends(void)
{
    g_autoptr(GRand) rand = g_rand_new_with_seed(19);

    for (guint round = 0; round < 300; round++) {
        FsimLifetime items[120];
        gsize ends[120];
        gsize live[120];
        gsize n_live = 0;
        FsimLifetimes with = {items, 0, 0, ends, 0};
        FsimLifetimes without;
        uint64_t capacity = round % 3 == 0 ? 80 * FSIM_GiB : (uint64_t)(1 + round % 5) * 64 * 1024;
        PlannerPlan a;
        PlannerPlan b;

        for (uint64_t step = 1; with.n < G_N_ELEMENTS(items); step++) {
            if (n_live > 0 && g_rand_int_range(rand, 0, 100) < 45) {
                gsize k = (gsize)g_rand_int_range(rand, 0, (gint32)n_live);

                items[live[k]].end = step;
                ends[with.n_ends++] = live[k];
                live[k] = live[--n_live];
            } else {
                items[with.n] =
                    (FsimLifetime){.size = (uint64_t)g_rand_int_range(rand, 1, 40) * 1000,
                                   .start = step,
                                   .end = FSIM_LIFETIME_FOREVER};
                live[n_live++] = with.n++;
            }
            with.steps = step;
        }
        without = with;
        without.ends = NULL;
        without.n_ends = 0;
        planner_plan_build(&with, 256, capacity, 4096, 0, &a);
        planner_plan_build(&without, 256, capacity, 4096, 0, &b);
        g_assert_cmpint(a.order, ==, PLANNER_ORDER_TIME);
        g_assert_cmpmem(a.offsets, a.n * sizeof(uint64_t), b.offsets, b.n * sizeof(uint64_t));
        g_assert_cmpuint(a.arena_bytes, ==, b.arena_bytes);
        g_assert_cmpuint(a.unplaced, ==, b.unplaced);
        planner_plan_clear(&a);
        planner_plan_clear(&b);
    }
}

/* The chunks of @a and @b, one after the other, the same. */
static void
assert_same_chunks(const PlannerArena *a, const PlannerArena *b)
{
    const PlannerChunk *x = a->first;
    const PlannerChunk *y = b->first;

    for (; x != NULL && y != NULL; x = x->next, y = y->next) {
        g_assert_cmpuint(x->start, ==, y->start);
        g_assert_cmpuint(x->size, ==, y->size);
        g_assert_cmpint(x->free, ==, y->free);
    }
    g_assert_true(x == NULL && y == NULL);
    g_assert_cmpuint(a->used_bytes, ==, b->used_bytes);
}

/* A free chunk of @a of at least @size bytes after its first 256 (a place no best fit takes), at
 * random; G_MAXUINT64 when none. */
static uint64_t
inner_offset(const PlannerArena *a, uint64_t size, GRand *rand)
{
    uint64_t found = G_MAXUINT64;

    for (const PlannerChunk *c = a->first; c != NULL && c->next != NULL; c = c->next) {
        if (c->free && c->size >= size + 256 && (found == G_MAXUINT64 || g_rand_boolean(rand)))
            found = c->start + 256;
    }
    return found;
}

/* The arena unindexed against the arena indexed, given the same takes and releases: the takes
 * at the best fit of the indexed one (the time order's plan), in some rounds now and then at a
 * place inside a free chunk (the run leaving the plan: the arena is indexed again); after each
 * operation the same chunks, the same largest free chunk below the top of the taken ones, and
 * the unindexed arena's own check.  Queried after every operation, the largest free chunk is
 * walked for often enough that some rounds go over the walks' budget and index again. */
static void
test_unindexed_arena(void)
{
    g_autoptr(GRand) rand = g_rand_new_with_seed(17);
    guint left_plan = 0;
    guint over_budget = 0;
    guint stayed = 0;

    for (guint round = 0; round < 40; round++) {
        PlannerArena a;
        PlannerArena b;
        g_autoptr(GPtrArray) live_a = g_ptr_array_new();
        g_autoptr(GPtrArray) live_b = g_ptr_array_new();
        uint64_t top = 0;
        gboolean leaves = round % 4 == 3;
        gboolean grows = round % 4 == 1; /* larger and larger: the largest free chunk taken */
        gboolean left = FALSE;
        g_autoptr(GError) error = NULL;

        planner_arena_init(&a, 1 << 30);
        planner_arena_init(&b, 1 << 30);
        planner_arena_unindex(&b);
        for (guint op = 0; op < 4000; op++) {
            if (live_a->len == 0 || g_rand_int_range(rand, 0, 100) < (grows ? 60 : 52)) {
                uint64_t size = (uint64_t)g_rand_int_range(rand, 1, grows ? 8 + op / 8 : 64) * 256;
                uint64_t offset = leaves && g_rand_int_range(rand, 0, 200) == 0
                                      ? inner_offset(&a, size, rand)
                                      : G_MAXUINT64;
                PlannerChunk *x;
                PlannerChunk *y;

                if (offset == G_MAXUINT64) {
                    FsimSizeCursor cursor;

                    x = planner_arena_find(&a, size, &cursor);
                    g_assert_nonnull(x);
                    x = planner_arena_take(&a, x, &cursor, size);
                } else {
                    x = planner_arena_carve(&a, offset, size);
                    left = TRUE;
                }
                y = planner_arena_carve(&b, x->start, size);
                g_assert_nonnull(y);
                g_assert_cmpuint(y->start, ==, x->start);
                g_ptr_array_add(live_a, x);
                g_ptr_array_add(live_b, y);
                top = MAX(top, x->start + size);
            } else {
                guint k = (guint)g_rand_int_range(rand, 0, (gint32)live_a->len);

                planner_arena_release(&a, g_ptr_array_steal_index_fast(live_a, k));
                planner_arena_release(&b, g_ptr_array_steal_index_fast(live_b, k));
            }
            g_assert_cmpuint(planner_arena_largest_below(&b, top), ==,
                             planner_arena_largest_below(&a, top));
            g_assert_true(planner_arena_check(&b, &error));
            g_assert_no_error(error);
            assert_same_chunks(&a, &b);
        }
        if (left)
            left_plan += !b.unindexed;
        else if (!b.unindexed)
            over_budget++;
        else
            stayed++;
        planner_arena_clear(&a);
        planner_arena_clear(&b);
    }
    g_test_message("left the plan %u, over the budget %u, unindexed throughout %u", left_plan,
                   over_budget, stayed);
    g_assert_cmpuint(left_plan, >=, 5);
    g_assert_cmpuint(over_budget, >=, 3);
    g_assert_cmpuint(stayed, >=, 3);
}

typedef struct {
    FsimMetrics metrics;
    FsimPolicyStats stats;
} RunResult;

static gboolean
next_event(gpointer data, FsimEvent *ev, GError **error)
{
    return fsim_trace_stream_next(data, ev, error);
}

static RunResult
replay_checked(FsimTrace *trace, uint32_t device, const char *policy,
               const FsimLifetimes *lifetimes, gboolean paranoid)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, device, &error);
    g_autoptr(FsimEngine) engine = NULL;
    FsimRunConfig config;
    RunResult result;

    g_assert_no_error(error);
    fsim_run_config_init(&config);
    config.policy = policy;
    config.initial_state = fsim_trace_initial_state(trace, device);
    config.lifetimes = lifetimes;
    config.paranoid = paranoid;
    g_assert_true(fsim_device_spec_parse(FSIM_DEVICE_DEFAULT, &config.device, &error));
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    g_assert_cmpint(fsim_engine_policy(engine)->paranoid, ==, paranoid);
    g_assert_true(fsim_engine_run(engine, next_event, stream, &error));
    g_assert_no_error(error);
    result.metrics = *fsim_engine_metrics(engine);
    fsim_engine_policy_stats(engine, &result.stats);
    return result;
}

static RunResult
replay(FsimTrace *trace, uint32_t device, const char *policy, const FsimLifetimes *lifetimes)
{
    return replay_checked(trace, device, policy, lifetimes, TRUE);
}

static uint64_t
stat_value(const FsimPolicyStats *stats, const char *name)
{
    for (guint i = 0; i < stats->n_extra; i++) {
        if (strcmp(stats->extra[i].name, name) == 0)
            return stats->extra[i].value;
    }
    g_error("no statistic %s", name);
    return 0;
}

/* The plan of every device of @path: checked, followed, between the lower bound and bestfit. */
static void
check_trace(const char *path)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);
    const uint32_t *devices;
    gsize n_devices;

    g_assert_no_error(error);
    devices = fsim_trace_devices(trace, &n_devices);
    for (gsize d = 0; d < n_devices; d++) {
        g_autoptr(FsimLifetimes) lifetimes = fsim_lifetimes_from_trace(trace, devices[d], &error);
        RunResult planner;
        RunResult quick;
        RunResult bestfit;
        RunResult unplanned;

        g_assert_no_error(error);
        assert_ends_in_order(lifetimes);
        /* fsim_engine_new() runs the checker on the plan (an error fails the run). */
        planner = replay(trace, devices[d], "planner", lifetimes);
        bestfit = replay(trace, devices[d], "bestfit", NULL);
        g_test_message("%s device %u: %zu allocations, planner %" G_GUINT64_FORMAT
                       ", bestfit %" G_GUINT64_FORMAT ", lower bound %" G_GUINT64_FORMAT,
                       path, devices[d], lifetimes->n, planner.metrics.peak_reserved_bytes,
                       bestfit.metrics.peak_reserved_bytes, planner.metrics.lower_bound_bytes);
        g_assert_cmpuint(stat_value(&planner.stats, "unplanned_allocations"), ==, 0);
        /* every allocation at its planned place, but those the device cannot hold */
        g_assert_cmpuint(stat_value(&planner.stats, "planned_allocations") + planner.metrics.ooms,
                         ==, lifetimes->n);
        /* never an OOM more than bestfit, and when as many, never more memory */
        g_assert_cmpuint(planner.metrics.ooms, <=, bestfit.metrics.ooms);
        if (planner.metrics.ooms == bestfit.metrics.ooms)
            g_assert_cmpuint(planner.metrics.peak_reserved_bytes, <=,
                             bestfit.metrics.peak_reserved_bytes);
        g_assert_cmpuint(planner.metrics.peak_reserved_bytes, >=,
                         planner.metrics.lower_bound_bytes);
        /* Not paranoid (the time order's plan not swept, and followed unindexed): the same run,
         * metrics and statistics. */
        quick = replay_checked(trace, devices[d], "planner", lifetimes, FALSE);
        quick.metrics.wall_seconds = planner.metrics.wall_seconds;
        quick.metrics.events_per_second = planner.metrics.events_per_second;
        g_assert_cmpmem(&quick.metrics, sizeof(quick.metrics), &planner.metrics,
                        sizeof(planner.metrics));
        g_assert_cmpuint(quick.stats.largest_free_block, ==, planner.stats.largest_free_block);
        g_assert_cmpuint(quick.stats.num_splits, ==, planner.stats.num_splits);
        g_assert_cmpuint(quick.stats.num_merges, ==, planner.stats.num_merges);
        g_assert_cmpuint(stat_value(&quick.stats, "planned_allocations"), ==,
                         stat_value(&planner.stats, "planned_allocations"));
        g_assert_cmpuint(stat_value(&quick.stats, "plan_bytes"), ==,
                         stat_value(&planner.stats, "plan_bytes"));
        /* Without lifetimes it is best fit, block for block. */
        unplanned = replay(trace, devices[d], "planner", NULL);
        g_assert_cmpuint(unplanned.metrics.peak_reserved_bytes, ==,
                         bestfit.metrics.peak_reserved_bytes);
    }
}

static void
test_hole_replay(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = write_trace(dir, hole_trace);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);
    g_autoptr(FsimLifetimes) lifetimes = fsim_lifetimes_from_trace(trace, 0, &error);
    RunResult planner = replay(trace, 0, "planner", lifetimes);
    RunResult bestfit = replay(trace, 0, "bestfit", NULL);

    g_assert_cmpuint(planner.metrics.peak_reserved_bytes, ==, 4 * MIB);
    g_assert_cmpuint(bestfit.metrics.peak_reserved_bytes, ==, 6 * MIB); /* 5 MiB in 2 MiB pages */
    g_assert_cmpuint(stat_value(&planner.stats, "plan_bytes"), ==, 4 * MIB);
    fsim_test_remove_tree(dir);
}

static void
test_sample_traces(void)
{
    const char *source = g_getenv("FRAGSIM_SOURCE_DIR");
    g_autofree char *dir = NULL;
    g_autoptr(GDir) listing = NULL;
    const char *name;
    guint n = 0;

    g_assert_nonnull(source);
    dir = g_build_filename(source, "traces", NULL);
    listing = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(listing);
    while ((name = g_dir_read_name(listing)) != NULL) {
        g_autofree char *path = g_build_filename(dir, name, NULL);

        if (!g_str_has_suffix(name, ".trace") && !g_str_has_suffix(name, ".csv"))
            continue;
        check_trace(path);
        n++;
    }
    g_assert_cmpuint(n, >=, 3);
}

static void
test_shared_traces(void)
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

        if (!g_str_has_suffix(name, ".pickle") && !g_str_has_suffix(name, ".pkl"))
            continue;
        check_trace(path);
        n++;
    }
    g_assert_cmpuint(n, >=, 1);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/planner/lifetimes-and-orders", test_lifetimes_and_orders);
    g_test_add_func("/planner/checker-fails", test_checker_fails);
    g_test_add_func("/planner/lifetimes-many", test_lifetimes_many);
    g_test_add_func("/planner/checker-random", test_checker_random);
    g_test_add_func("/planner/greedy-work", test_greedy_work);
    g_test_add_func("/planner/plan-check", test_plan_check);
    g_test_add_func("/planner/time-order-valid", test_time_order_valid);
    g_test_add_func("/planner/time-order-ends", test_time_order_ends);
    g_test_add_func("/planner/unindexed-arena", test_unindexed_arena);
    g_test_add_func("/planner/hole-replay", test_hole_replay);
    g_test_add_func("/planner/sample-traces", test_sample_traces);
    g_test_add_func("/planner/shared-traces", test_shared_traces);
    return g_test_run();
}
