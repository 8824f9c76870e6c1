/* SPDX-License-Identifier: MIT */
/*
 * bench-structures: the PyTorch model's hand-written ordered structures against GLib's.
 *
 *   bench-structures [--ops N] [--live K]...
 *
 * Two workloads, each run on the same seeded sequence of operations by every implementation:
 *
 *   free set     the free blocks of a (pool, stream) by (size, address), as get_free_block and
 *                free_block use them: find the smallest block of at least a size (lower bound),
 *                take it out, cache another one.  Hand-written: the size set of
 *                src/core/size-set.h (bins of short sorted arrays), which
 *                src/policies/pytorch/free-set.h wraps.
 *   unmapped     the unmapped blocks of an expandable segment by address, as
 *                find_expandable_block and map/unmap use them: walk a few blocks from the
 *                lowest, take one out, put another in.  Hand-written: the intrusive red-black
 *                tree of src/policies/pytorch/unmapped-tree.c.
 *
 * against GTree (g_tree_lower_bound, g_tree_node_first/next: GLib >= 2.68) and GSequence
 * (g_sequence_search, g_sequence_insert_sorted), with the same comparison function.  Each figure
 * is the best of 3 runs in nanoseconds of the thread's CPU time per operation (CPU time, so that
 * other work on a shared machine counts less); a checksum of what every lookup found
 * shows that the implementations did the same work.  A benchmark, never a test.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <glib.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fragsim/types.h"

#include "policies/pytorch/free-set.h"
#include "policies/pytorch/unmapped-tree.h"

typedef struct {
    uint64_t checksum;
    double ns_per_op;
} Result;

typedef struct {
    guint live;    /* blocks held at any time */
    guint64 n_ops; /* operations timed */
    guint32 seed;  /* same sequence for every implementation */
    Block *blocks; /* live + n_ops blocks: every insertion takes a fresh one */
} Workload;

/* A PyTorch-like mix of block sizes, multiples of 512 B. */
static uint64_t
bench_size(GRand *rand)
{
    int r = g_rand_int_range(rand, 0, 100);
    uint64_t size;

    if (r < 60)
        size = (uint64_t)g_rand_int_range(rand, 1, 1 << 20);
    else if (r < 90)
        size = (uint64_t)g_rand_int_range(rand, 1 << 20, 20 << 20);
    else
        size = (uint64_t)g_rand_int_range(rand, 20 << 20, 1 << 30);
    return (size + 511) / 512 * 512;
}

static void
workload_reset(Workload *w)
{
    GRand *rand = g_rand_new_with_seed(w->seed);
    guint64 n = w->live + w->n_ops;

    memset(w->blocks, 0, n * sizeof(Block));
    for (guint64 i = 0; i < n; i++) {
        w->blocks[i].size = bench_size(rand);
        w->blocks[i].addr = (i + 1) * 4096; /* unique: the tie-breaker of equal sizes */
    }
    g_rand_free(rand);
}

/* The thread's CPU time in nanoseconds. */
static gint64
cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (gint64)ts.tv_sec * G_GINT64_CONSTANT(1000000000) + ts.tv_nsec;
}

static int
by_size_addr(gconstpointer a, gconstpointer b, gpointer unused)
{
    const Block *x = a;
    const Block *y = b;
    int c = fsim_compare_u64(x->size, y->size);

    (void)unused;
    return c != 0 ? c : fsim_compare_u64(x->addr, y->addr);
}

static int
by_addr(gconstpointer a, gconstpointer b, gpointer unused)
{
    const Block *x = a;
    const Block *y = b;

    (void)unused;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* ---- the free set --------------------------------------------------------------------------- */

static Result
free_set_hand(Workload *w)
{
    FreeSet *set = g_new0(FreeSet, 1);
    GRand *rand = g_rand_new_with_seed(w->seed + 1);
    Result result = {0};
    gint64 start;
    guint64 next = w->live;

    for (guint i = 0; i < w->live; i++)
        freeset_insert(set, &w->blocks[i]);
    start = cpu_ns();
    for (guint64 i = 0; i < w->n_ops; i++) {
        FreeCursor cursor;
        Block *found = freeset_lower_bound(set, bench_size(rand), &cursor);

        if (found != NULL) {
            result.checksum = result.checksum * 31 + found->addr;
            freeset_erase_at(set, &cursor);
        }
        freeset_insert(set, &w->blocks[next++]);
    }
    result.ns_per_op = (double)(cpu_ns() - start) / (double)w->n_ops;
    freeset_clear(set);
    g_free(set);
    g_rand_free(rand);
    return result;
}

static Result
free_set_gtree(Workload *w)
{
    GTree *tree = g_tree_new_full(by_size_addr, NULL, NULL, NULL);
    GRand *rand = g_rand_new_with_seed(w->seed + 1);
    Result result = {0};
    gint64 start;
    guint64 next = w->live;

    for (guint i = 0; i < w->live; i++)
        g_tree_insert(tree, &w->blocks[i], &w->blocks[i]);
    start = cpu_ns();
    for (guint64 i = 0; i < w->n_ops; i++) {
        Block key = {.size = bench_size(rand), .addr = 0};
        GTreeNode *node = g_tree_lower_bound(tree, &key);

        if (node != NULL) {
            Block *found = g_tree_node_key(node);

            result.checksum = result.checksum * 31 + found->addr;
            g_tree_remove(tree, found);
        }
        g_tree_insert(tree, &w->blocks[next], &w->blocks[next]);
        next++;
    }
    result.ns_per_op = (double)(cpu_ns() - start) / (double)w->n_ops;
    g_tree_destroy(tree);
    g_rand_free(rand);
    return result;
}

static Result
free_set_gsequence(Workload *w)
{
    GSequence *seq = g_sequence_new(NULL);
    GRand *rand = g_rand_new_with_seed(w->seed + 1);
    Result result = {0};
    gint64 start;
    guint64 next = w->live;

    for (guint i = 0; i < w->live; i++)
        g_sequence_insert_sorted(seq, &w->blocks[i], by_size_addr, NULL);
    start = cpu_ns();
    for (guint64 i = 0; i < w->n_ops; i++) {
        Block key = {.size = bench_size(rand), .addr = 0};
        /* No block has address 0, so the insertion point of the key is the lower bound. */
        GSequenceIter *it = g_sequence_search(seq, &key, by_size_addr, NULL);

        if (!g_sequence_iter_is_end(it)) {
            Block *found = g_sequence_get(it);

            result.checksum = result.checksum * 31 + found->addr;
            g_sequence_remove(it);
        }
        g_sequence_insert_sorted(seq, &w->blocks[next++], by_size_addr, NULL);
    }
    result.ns_per_op = (double)(cpu_ns() - start) / (double)w->n_ops;
    g_sequence_free(seq);
    g_rand_free(rand);
    return result;
}

/* ---- the unmapped tree ---------------------------------------------------------------------- */
/* Each operation walks up to 8 blocks from the lowest address, takes out a random live block and
 * puts in a fresh one. */

static Result
unmapped_hand(Workload *w)
{
    Tree tree = {0};
    GRand *rand = g_rand_new_with_seed(w->seed + 2);
    Result result = {0};
    gint64 start;
    guint64 next = w->live;
    g_autofree Block **live = g_new(Block *, w->live);

    for (guint i = 0; i < w->live; i++) {
        live[i] = &w->blocks[i];
        fsim_pytorch_tree_insert(&tree, live[i]);
    }
    start = cpu_ns();
    for (guint64 i = 0; i < w->n_ops; i++) {
        guint steps = (guint)g_rand_int_range(rand, 1, 9);
        guint victim = (guint)g_rand_int_range(rand, 0, (gint32)w->live);
        Block *b = fsim_pytorch_tree_first(&tree);

        for (guint s = 0; s < steps && b != NULL; s++, b = fsim_pytorch_tree_next(b))
            result.checksum = result.checksum * 31 + b->addr;
        fsim_pytorch_tree_erase(&tree, live[victim]);
        live[victim] = &w->blocks[next++];
        fsim_pytorch_tree_insert(&tree, live[victim]);
    }
    result.ns_per_op = (double)(cpu_ns() - start) / (double)w->n_ops;
    g_rand_free(rand);
    return result;
}

static Result
unmapped_gtree(Workload *w)
{
    GTree *tree = g_tree_new_full(by_addr, NULL, NULL, NULL);
    GRand *rand = g_rand_new_with_seed(w->seed + 2);
    Result result = {0};
    gint64 start;
    guint64 next = w->live;
    g_autofree Block **live = g_new(Block *, w->live);

    for (guint i = 0; i < w->live; i++) {
        live[i] = &w->blocks[i];
        g_tree_insert(tree, live[i], live[i]);
    }
    start = cpu_ns();
    for (guint64 i = 0; i < w->n_ops; i++) {
        guint steps = (guint)g_rand_int_range(rand, 1, 9);
        guint victim = (guint)g_rand_int_range(rand, 0, (gint32)w->live);
        GTreeNode *node = g_tree_node_first(tree);

        for (guint s = 0; s < steps && node != NULL; s++, node = g_tree_node_next(node))
            result.checksum = result.checksum * 31 + ((Block *)g_tree_node_key(node))->addr;
        g_tree_remove(tree, live[victim]);
        live[victim] = &w->blocks[next++];
        g_tree_insert(tree, live[victim], live[victim]);
    }
    result.ns_per_op = (double)(cpu_ns() - start) / (double)w->n_ops;
    g_tree_destroy(tree);
    g_rand_free(rand);
    return result;
}

static Result
unmapped_gsequence(Workload *w)
{
    GSequence *seq = g_sequence_new(NULL);
    GRand *rand = g_rand_new_with_seed(w->seed + 2);
    Result result = {0};
    gint64 start;
    guint64 next = w->live;
    g_autofree GSequenceIter **live = g_new(GSequenceIter *, w->live);

    for (guint i = 0; i < w->live; i++)
        live[i] = g_sequence_insert_sorted(seq, &w->blocks[i], by_addr, NULL);
    start = cpu_ns();
    for (guint64 i = 0; i < w->n_ops; i++) {
        guint steps = (guint)g_rand_int_range(rand, 1, 9);
        guint victim = (guint)g_rand_int_range(rand, 0, (gint32)w->live);
        GSequenceIter *it = g_sequence_get_begin_iter(seq);

        for (guint s = 0; s < steps && !g_sequence_iter_is_end(it);
             s++, it = g_sequence_iter_next(it))
            result.checksum = result.checksum * 31 + ((Block *)g_sequence_get(it))->addr;
        g_sequence_remove(live[victim]);
        live[victim] = g_sequence_insert_sorted(seq, &w->blocks[next++], by_addr, NULL);
    }
    result.ns_per_op = (double)(cpu_ns() - start) / (double)w->n_ops;
    g_sequence_free(seq);
    g_rand_free(rand);
    return result;
}

/* ---- driver --------------------------------------------------------------------------------- */

typedef Result (*BenchFunc)(Workload *w);

static void
run(const char *workload, const char *name, BenchFunc func, Workload *w, double *hand_ns)
{
    Result best = {0};

    for (int r = 0; r < 3; r++) {
        Result result;

        workload_reset(w);
        result = func(w);
        if (r == 0 || result.ns_per_op < best.ns_per_op)
            best = result;
    }
    if (hand_ns != NULL && *hand_ns == 0.0)
        *hand_ns = best.ns_per_op;
    printf("%-10s %-12s %8u %10.1f %9.2fx   %016" PRIx64 "\n", workload, name, w->live,
           best.ns_per_op, hand_ns != NULL ? best.ns_per_op / *hand_ns : 1.0, best.checksum);
}

int
main(int argc, char **argv)
{
    gint64 n_ops = 1000000;
    g_auto(GStrv) live_args = NULL;
    GOptionEntry entries[] = {
        {"ops", 0, 0, G_OPTION_ARG_INT64, &n_ops, "operations per run (default 1000000)", "N"},
        {"live", 0, 0, G_OPTION_ARG_STRING_ARRAY, &live_args,
         "blocks held (repeatable; default 64 and 4096)", "K"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context = g_option_context_new("- GLib vs hand-written structures");
    g_autoptr(GError) error = NULL;
    guint sizes[8] = {64, 4096};
    guint n_sizes = 2;

    g_option_context_add_main_entries(context, entries, NULL);
    if (!g_option_context_parse(context, &argc, &argv, &error) || n_ops <= 0) {
        g_printerr("bench-structures: %s\n", error != NULL ? error->message : "--ops must be > 0");
        return 2;
    }
    if (live_args != NULL) {
        n_sizes = 0;
        for (guint i = 0; live_args[i] != NULL && n_sizes < G_N_ELEMENTS(sizes); i++)
            sizes[n_sizes++] = (guint)MAX(1, atoi(live_args[i]));
    }
    printf("%-10s %-12s %8s %10s %10s   %s\n", "workload", "structure", "live", "ns/op", "vs hand",
           "checksum");
    for (guint s = 0; s < n_sizes; s++) {
        Workload w = {.live = sizes[s], .n_ops = (guint64)n_ops, .seed = 20261201};
        double hand = 0.0;

        w.blocks = g_new(Block, w.live + w.n_ops);
        run("free set", "hand", free_set_hand, &w, &hand);
        run("free set", "GTree", free_set_gtree, &w, &hand);
        run("free set", "GSequence", free_set_gsequence, &w, &hand);
        hand = 0.0;
        run("unmapped", "hand", unmapped_hand, &w, &hand);
        run("unmapped", "GTree", unmapped_gtree, &w, &hand);
        run("unmapped", "GSequence", unmapped_gsequence, &w, &hand);
        g_free(w.blocks);
    }
    return 0;
}
