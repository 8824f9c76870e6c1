/* SPDX-License-Identifier: MIT */
/*
 * The planner's greedy orders (TFLite's greedy by size, XLA's spatial and temporal
 * GlobalDecreasingSizeBestFitHeap orders): one allocation after another, each in the smallest gap
 * left between the already placed allocations whose lifetimes overlap its own (lowest offset on
 * ties, an exact fit ends the search), else above the highest of them.
 *
 * Those neighbours are found without scanning every placed one.  An allocation's lifetime is the
 * range [i, hi) of allocation indices (allocations come in start order; hi is the first one
 * starting at or after its end).  A segment tree over the indices keeps each placed range, with
 * its place in the arena, in the O(log n) nodes that cover it, so the nodes from @x's leaf to the
 * root hold exactly the placed ranges containing @x; a bitmap of placed indices (with a summary
 * bit per word) gives the placed ones starting inside (x, hi).  The cost is then O(n + K log K)
 * for K neighbours looked at in all, and an order that looks at more than the work limit is
 * abandoned (it is reported as not completed).
 *
 * The order itself is sorted lazily (an incremental quicksort over keys computed once): an
 * abandoned order sorts only the prefix it placed, in O(n + k log k) for k placed.
 */
#include <glib.h>

#include <string.h>

#include "planner.h"

typedef struct {
    uint64_t offset;
    uint64_t end;
} Interval;

/* A node of the segment tree: the placed ranges that cover it. */
typedef struct {
    guint32 len;
    guint32 cap;
    Interval items[];
} Node;

typedef struct {
    const FsimLifetimes *lifetimes;
    const uint64_t *sizes;
    const uint64_t *offsets;
    gsize n;
    gboolean starts_in_order;
    gsize leaves;    /* a power of two >= n */
    Node **nodes;    /* 2 * leaves, allocated as they are used */
    GArray *used;    /* of gsize: the nodes allocated */
    uint64_t *bits;  /* placed indices */
    uint64_t *words; /* a bit per word of @bits: not zero */
    Interval *found; /* the neighbours of the allocation being placed */
    gsize n_found;
    gsize found_cap;
    uint64_t work;
} Greedy;

/* ---- the order: keys sorted incrementally --------------------------------------------------- */

/* An allocation's place in an order: (k1, k2, index), ascending. */
typedef struct {
    uint64_t k1;
    uint64_t k2;
    uint64_t index;
} OrderKey;

typedef struct {
    OrderKey *keys;
    gsize next;    /* keys[0, next) are handed out */
    gsize sorted;  /* keys[next, sorted) are in their final places */
    GArray *tops;  /* of gsize, a stack: every key before a top is below every key from it on */
    uint64_t seed; /* the pivots' positions */
} OrderQueue;

static inline gboolean
key_less(const OrderKey *a, const OrderKey *b)
{
    if (a->k1 != b->k1)
        return a->k1 < b->k1;
    if (a->k2 != b->k2)
        return a->k2 < b->k2;
    return a->index < b->index;
}

static inline void
key_swap(OrderKey *a, OrderKey *b)
{
    OrderKey t = *a;

    *a = *b;
    *b = t;
}

static uint64_t
lifetime_length(const FsimLifetime *lifetime, uint64_t steps)
{
    uint64_t end = lifetime->end == FSIM_LIFETIME_FOREVER ? steps + 1 : lifetime->end;

    return end - lifetime->start;
}

/* The keys of the orders: TFLite's whole-run allocations first, then size descending; XLA's
 * spatial size then lifetime descending; XLA's temporal lifetime then size descending; each
 * ending on the allocation order. */
static OrderKey *
order_keys(const FsimLifetimes *lifetimes, const uint64_t *sizes, PlannerOrder order)
{
    OrderKey *keys = g_new(OrderKey, MAX(lifetimes->n, 1));

    for (gsize i = 0; i < lifetimes->n; i++) {
        const FsimLifetime *lifetime = &lifetimes->items[i];
        uint64_t length = lifetime_length(lifetime, lifetimes->steps);
        gboolean whole = lifetime->start == 0 && lifetime->end == FSIM_LIFETIME_FOREVER;

        keys[i].index = i;
        switch (order) {
        case PLANNER_ORDER_SIZE:
            keys[i].k1 = whole ? 0 : 1;
            keys[i].k2 = ~sizes[i];
            break;
        case PLANNER_ORDER_SIZE_LIFETIME:
            keys[i].k1 = ~sizes[i];
            keys[i].k2 = ~length;
            break;
        default:
            keys[i].k1 = ~length;
            keys[i].k2 = ~sizes[i];
            break;
        }
    }
    return keys;
}

static void
keys_insertion_sort(OrderKey *keys, gsize n)
{
    for (gsize i = 1; i < n; i++) {
        OrderKey key = keys[i];
        gsize j = i;

        for (; j > 0 && key_less(&key, &keys[j - 1]); j--)
            keys[j] = keys[j - 1];
        keys[j] = key;
    }
}

static gsize
queue_random(OrderQueue *q, gsize lo, gsize hi)
{
    q->seed ^= q->seed << 13;
    q->seed ^= q->seed >> 7;
    q->seed ^= q->seed << 17;
    return lo + (gsize)(q->seed % (hi - lo));
}

/* Partition keys[lo, hi) (more than two) around the median of three of them: its place. */
static gsize
queue_partition(OrderQueue *q, gsize lo, gsize hi)
{
    OrderKey *k = q->keys;
    gsize a = queue_random(q, lo, hi);
    gsize b = queue_random(q, lo, hi);
    gsize c = queue_random(q, lo, hi);
    gsize m = key_less(&k[a], &k[b])
                  ? (key_less(&k[b], &k[c]) ? b : (key_less(&k[a], &k[c]) ? c : a))
                  : (key_less(&k[a], &k[c]) ? a : (key_less(&k[b], &k[c]) ? c : b));
    OrderKey pivot;
    gsize i = lo;
    gsize j = hi;

    key_swap(&k[lo], &k[m]);
    pivot = k[lo];
    for (;;) {
        do
            i++;
        while (i < hi && key_less(&k[i], &pivot));
        do
            j--;
        while (key_less(&pivot, &k[j]));
        if (i >= j)
            break;
        key_swap(&k[i], &k[j]);
    }
    key_swap(&k[lo], &k[j]);
    return j;
}

static void
queue_init(OrderQueue *q, OrderKey *keys, gsize n)
{
    memset(q, 0, sizeof(*q));
    q->keys = keys;
    q->tops = g_array_new(FALSE, FALSE, sizeof(gsize));
    q->seed = 0x9e3779b97f4a7c15u;
    g_array_append_val(q->tops, n);
}

static void
queue_clear(OrderQueue *q)
{
    g_array_unref(q->tops);
    g_free(q->keys);
}

/* The next allocation of the order (there must be one). */
static gsize
queue_next(OrderQueue *q)
{
    while (q->next >= q->sorted) {
        gsize top = g_array_index(q->tops, gsize, q->tops->len - 1);

        if (top - q->next <= 16) {
            keys_insertion_sort(q->keys + q->next, top - q->next);
            q->sorted = top;
            g_array_set_size(q->tops, q->tops->len - 1);
        } else {
            gsize p = queue_partition(q, q->next, top);
            gsize after = p + 1;

            g_array_append_val(q->tops, after);
            if (p > q->next)
                g_array_append_val(q->tops, p);
        }
    }
    return (gsize)q->keys[q->next++].index;
}

/* ---- the neighbours ------------------------------------------------------------------------- */

static gboolean
starts_in_order(const FsimLifetimes *lifetimes)
{
    for (gsize i = 1; i < lifetimes->n; i++) {
        if (lifetimes->items[i].start < lifetimes->items[i - 1].start)
            return FALSE;
    }
    return TRUE;
}

static void
greedy_init(Greedy *g, const FsimLifetimes *lifetimes, const uint64_t *sizes,
            const uint64_t *offsets)
{
    gsize n = lifetimes->n;

    memset(g, 0, sizeof(*g));
    g->lifetimes = lifetimes;
    g->sizes = sizes;
    g->offsets = offsets;
    g->n = n;
    g->starts_in_order = starts_in_order(lifetimes);
    g->leaves = 1;
    while (g->leaves < MAX(n, 1))
        g->leaves *= 2;
    g->nodes = g_new0(Node *, 2 * g->leaves);
    g->used = g_array_new(FALSE, FALSE, sizeof(gsize));
    g->bits = g_new0(uint64_t, g->leaves / 64 + 1);
    g->words = g_new0(uint64_t, g->leaves / 64 / 64 + 1);
}

static void
greedy_clear(Greedy *g)
{
    for (guint k = 0; k < g->used->len; k++)
        g_free(g->nodes[g_array_index(g->used, gsize, k)]);
    g_array_unref(g->used);
    g_free(g->nodes);
    g_free(g->bits);
    g_free(g->words);
    g_free(g->found);
}

/* The first allocation starting at or after the end of @i's lifetime: usually a few lifetimes
 * away, so found by galloping from @i first, then by binary search (the search alone when the
 * starts are not in order, as checked allocations are: it finds then what it always found). */
static gsize
greedy_hi(const Greedy *g, gsize i)
{
    const FsimLifetime *items = g->lifetimes->items;
    uint64_t end = items[i].end;
    gsize lo = i + 1;
    gsize hi = g->n;

    for (gsize step = 1; g->starts_in_order && lo + step - 1 < hi; step *= 2) {
        gsize probe = lo + step - 1;

        if (items[probe].start >= end) {
            hi = probe;
            break;
        }
        lo = probe + 1;
    }
    while (lo < hi) {
        gsize mid = lo + (hi - lo) / 2;

        if (items[mid].start < end)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void
greedy_node_add(Greedy *g, gsize p, Interval interval)
{
    Node *node = g->nodes[p];

    if (node == NULL) {
        node = g_malloc(sizeof(Node) + 4 * sizeof(Interval));
        node->len = 0;
        node->cap = 4;
        g->nodes[p] = node;
        g_array_append_val(g->used, p);
    } else if (node->len == node->cap) {
        node->cap *= 2;
        node = g_realloc(node, sizeof(Node) + node->cap * sizeof(Interval));
        g->nodes[p] = node;
    }
    node->items[node->len++] = interval;
}

/* Place @i, whose lifetime is [i, @hi), in the tree and the bitmap. */
static void
greedy_mark_placed(Greedy *g, gsize i, gsize hi)
{
    Interval interval = {g->offsets[i], g->offsets[i] + g->sizes[i]};
    gsize l = i + g->leaves;
    gsize r = hi + g->leaves;

    while (l < r) {
        if (l & 1)
            greedy_node_add(g, l++, interval);
        if (r & 1)
            greedy_node_add(g, --r, interval);
        l >>= 1;
        r >>= 1;
    }
    g->bits[i / 64] |= (uint64_t)1 << (i % 64);
    g->words[i / 4096] |= (uint64_t)1 << (i / 64 % 64);
}

static void
greedy_reserve(Greedy *g, gsize more)
{
    if (g->n_found + more > g->found_cap) {
        g->found_cap = MAX(2 * g->found_cap, g->n_found + more);
        g->found = g_renew(Interval, g->found, g->found_cap);
    }
}

/* Add to the neighbours the placed allocations of [@lo, @hi) (@lo < @hi). */
static void
greedy_placed_between(Greedy *g, gsize lo, gsize hi)
{
    gsize w = lo / 64;
    gsize last = (hi - 1) / 64;

    while (w <= last) {
        uint64_t nonzero = g->words[w / 64] >> (w % 64);
        uint64_t bits;

        if (nonzero == 0) {
            w = (w / 64 + 1) * 64;
            continue;
        }
        w += (gsize)__builtin_ctzll(nonzero);
        if (w > last)
            break;
        bits = g->bits[w];
        if (w == lo / 64)
            bits &= ~(uint64_t)0 << (lo % 64);
        if (w == last && (hi - 1) % 64 != 63)
            bits &= ((uint64_t)1 << ((hi - 1) % 64 + 1)) - 1;
        greedy_reserve(g, 64);
        for (; bits != 0; bits &= bits - 1) {
            gsize i = w * 64 + (gsize)__builtin_ctzll(bits);

            g->found[g->n_found].offset = g->offsets[i];
            g->found[g->n_found].end = g->offsets[i] + g->sizes[i];
            g->n_found++;
        }
        w++;
    }
}

/* Collect in g->found the placed allocations whose lifetimes overlap @x's, [x, @hi). */
static void
greedy_neighbours(Greedy *g, gsize x, gsize hi)
{
    g->n_found = 0;
    for (gsize p = x + g->leaves; p >= 1; p >>= 1) {
        const Node *node = g->nodes[p];

        if (node != NULL) {
            greedy_reserve(g, node->len);
            memcpy(g->found + g->n_found, node->items, node->len * sizeof(Interval));
            g->n_found += node->len;
        }
    }
    if (x + 1 < hi)
        greedy_placed_between(g, x + 1, hi);
    g->work += g->n_found;
}

/* ---- the gap -------------------------------------------------------------------------------- */

static void
intervals_sort(Interval *items, gsize n)
{
    while (n > 16) {
        uint64_t a = items[0].offset;
        uint64_t b = items[n / 2].offset;
        uint64_t c = items[n - 1].offset;
        uint64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        gsize i = 0;
        gsize j = n - 1;

        /* Hoare's partition: [0, j] at most the pivot, [j + 1, n) at least */
        for (;;) {
            Interval t;

            while (items[i].offset < pivot)
                i++;
            while (items[j].offset > pivot)
                j--;
            if (i >= j)
                break;
            t = items[i];
            items[i++] = items[j];
            items[j--] = t;
        }
        /* the smaller side by recursion, the larger by the loop */
        if (j + 1 < n - j - 1) {
            intervals_sort(items, j + 1);
            items += j + 1;
            n -= j + 1;
        } else {
            intervals_sort(items + j + 1, n - j - 1);
            n = j + 1;
        }
    }
    for (gsize i = 1; i < n; i++) {
        Interval item = items[i];
        gsize j = i;

        for (; j > 0 && item.offset < items[j - 1].offset; j--)
            items[j] = items[j - 1];
        items[j] = item;
    }
}

/* The smallest gap of at least @size between the neighbours, else the top of them.  Neighbours
 * of equal offsets may come in any order: the gap before them is read at the first of them. */
static uint64_t
greedy_best_gap(Greedy *g, uint64_t size)
{
    uint64_t cursor = 0;
    uint64_t best = FSIM_PLAN_UNPLACED;
    uint64_t best_gap = G_MAXUINT64;

    intervals_sort(g->found, g->n_found);
    for (gsize k = 0; k < g->n_found; k++) {
        const Interval *interval = &g->found[k];

        if (interval->offset > cursor) {
            uint64_t gap = interval->offset - cursor;

            if (gap >= size && gap < best_gap) {
                best = cursor;
                best_gap = gap;
                if (gap == size)
                    break;
            }
        }
        cursor = MAX(cursor, interval->end);
    }
    return best != FSIM_PLAN_UNPLACED ? best : cursor;
}

/* The work a greedy order does when it completes, whatever the order: placing @x it looks at
 * each placed @y whose lifetime overlaps its own, the tree giving those with y < x (y <= x < hi
 * of y) and the bitmap those with x < y < hi of x, so each pair a < b with b < hi of a is looked
 * at once, by the later of the two placed, and the others never.  Counted up to @limit + 1. */
uint64_t
planner_greedy_work(const FsimLifetimes *lifetimes, uint64_t limit)
{
    Greedy g = {.lifetimes = lifetimes, .n = lifetimes->n};
    uint64_t work = 0;

    g.starts_in_order = starts_in_order(lifetimes);
    for (gsize a = 0; a < g.n && work <= limit; a++)
        work += greedy_hi(&g, a) - a - 1;
    return MIN(work, limit == G_MAXUINT64 ? limit : limit + 1);
}

gboolean
planner_plan_greedy(const FsimLifetimes *lifetimes, const uint64_t *sizes, PlannerOrder order,
                    uint64_t work_limit, uint64_t *offsets)
{
    gsize n = lifetimes->n;
    OrderQueue queue;
    Greedy g;
    gboolean complete = TRUE;

    queue_init(&queue, order_keys(lifetimes, sizes, order), n);
    greedy_init(&g, lifetimes, sizes, offsets);
    for (gsize k = 0; k < n; k++) {
        gsize i = queue_next(&queue);
        gsize hi = greedy_hi(&g, i);

        greedy_neighbours(&g, i, hi);
        if (g.work > work_limit) {
            complete = FALSE;
            break;
        }
        offsets[i] = greedy_best_gap(&g, sizes[i]);
        greedy_mark_placed(&g, i, hi);
    }
    greedy_clear(&g);
    queue_clear(&queue);
    return complete;
}
