/* SPDX-License-Identifier: MIT */
/*
 * The planner's offline plan: several placement orders, the best kept (see planner.c).
 *
 * The time order replays the lifetimes through best fit in an arena the size of the device, as
 * `bestfit` does online, in O(n log n), releasing each placed allocation when the next one starts
 * at or after its end (a heap of the placed ones by end, as large as the live set).  The greedy
 * orders (TFLite's greedy by size, XLA's spatial and temporal GlobalDecreasingSizeBestFitHeap
 * orders) place one allocation after another in the smallest gap left between the already placed
 * allocations whose lifetimes overlap its own (lowest offset on ties, an exact fit ends the
 * search), else above the highest of them.  Those neighbours are found without scanning every
 * placed one: an allocation's lifetime is the range [i, hi) of allocation indices (allocations come
 * in start order; hi is the first one starting after its end), a segment tree over the indices
 * answers "placed ranges containing index x" in O(log n + k), and a tree of placed indices gives
 * "placed ones starting inside [x, hi)".  The cost is then O(n log n + K log K) for K neighbours
 * looked at in all; an order that looks at more than the work limit is abandoned (it is reported as
 * not completed).
 */
#include <glib.h>

#include <string.h>

#include "planner.h"

typedef struct {
    const FsimLifetimes *lifetimes;
    const uint64_t *sizes;
    gsize n;
    gsize *hi;      /* per allocation: the first index starting at or after its end */
    gsize leaves;   /* a power of two >= n */
    GArray **nodes; /* the segment tree: guint32 indices of placed allocations, lazily */
    GTree *placed;  /* placed indices, as GSIZE_TO_POINTER(i + 1) */
    GArray *found;  /* of Interval, scratch */
    uint64_t work;
} Greedy;

typedef struct {
    uint64_t offset;
    uint64_t end;
} Interval;

const char *
planner_order_name(PlannerOrder order)
{
    static const char *const names[PLANNER_ORDER_COUNT] = {"time", "size", "size-lifetime",
                                                           "lifetime-size"};

    return order < PLANNER_ORDER_COUNT ? names[order] : "?";
}

/* -1, 0 or 1 as allocation @x comes before, is, or comes after @y: every order's last tie-break. */
static gint
compare_index(gsize x, gsize y)
{
    return x < y ? -1 : x > y ? 1 : 0;
}

/* The allocation indices 0..n-1 in the order of @compare (a total order: it ends on
 * compare_index()). */
static gsize *
sorted_indices(gsize n, GCompareDataFunc compare, gpointer data)
{
    gsize *indices = g_new(gsize, MAX(n, 1));

    for (gsize i = 0; i < n; i++)
        indices[i] = i;
    g_qsort_with_data(indices, (gint)n, sizeof(gsize), compare, data);
    return indices;
}

/* ---- the time order: best fit in allocation order ----------------------------------------- */

/* A placed allocation of the time order, released at @end (ties in allocation order). */
typedef struct {
    uint64_t end;
    gsize index;
    PlannerChunk *chunk;
} Placed;

static inline gboolean
placed_before(const Placed *a, const Placed *b)
{
    return a->end != b->end ? a->end < b->end : a->index < b->index;
}

/* A binary heap of Placed, the first to end on top. */
static void
heap_push(GArray *heap, const Placed *placed)
{
    Placed *items;
    gsize k = heap->len;

    g_array_set_size(heap, heap->len + 1);
    items = (Placed *)(void *)heap->data;
    while (k > 0 && placed_before(placed, &items[(k - 1) / 2])) {
        items[k] = items[(k - 1) / 2];
        k = (k - 1) / 2;
    }
    items[k] = *placed;
}

static void
heap_pop(GArray *heap)
{
    Placed *items = (Placed *)(void *)heap->data;
    gsize n = heap->len - 1;
    Placed last = items[n];
    gsize k = 0;

    for (;;) {
        gsize child = 2 * k + 1;

        if (child >= n)
            break;
        if (child + 1 < n && placed_before(&items[child + 1], &items[child]))
            child++;
        if (!placed_before(&items[child], &last))
            break;
        items[k] = items[child];
        k = child;
    }
    items[k] = last;
    g_array_set_size(heap, n);
}

static void
plan_time(const FsimLifetimes *lifetimes, const uint64_t *sizes, uint64_t capacity,
          uint64_t granularity, uint64_t *offsets)
{
    gsize n = lifetimes->n;
    g_autoptr(GArray) heap = g_array_new(FALSE, FALSE, sizeof(Placed));
    uint64_t arena_size = fsim_chunk_arena_bytes(capacity, granularity);
    uint64_t mapped_end = 0;
    PlannerArena arena;

    planner_arena_init(&arena, arena_size, FALSE);
    for (gsize i = 0; i < n; i++) {
        const FsimLifetime *lifetime = &lifetimes->items[i];
        PlannerChunk *chunk;
        FsimSizeCursor cursor;

        while (heap->len > 0 && g_array_index(heap, Placed, 0).end <= lifetime->start) {
            planner_arena_release(&arena, g_array_index(heap, Placed, 0).chunk);
            heap_pop(heap);
        }
        offsets[i] = FSIM_PLAN_UNPLACED;
        chunk = planner_arena_find(&arena, sizes[i], &cursor);
        if (chunk == NULL)
            continue;
        if (chunk->start + sizes[i] > mapped_end) {
            uint64_t new_end =
                (chunk->start + sizes[i] + granularity - 1) / granularity * granularity;

            if (new_end > capacity)
                continue; /* the device has no pages left for it: bestfit's OOM */
            mapped_end = new_end;
        }
        chunk = planner_arena_take(&arena, chunk, &cursor, sizes[i]);
        offsets[i] = chunk->start;
        if (lifetime->end != FSIM_LIFETIME_FOREVER) {
            Placed placed = {lifetime->end, i, chunk};

            heap_push(heap, &placed);
        }
    }
    planner_arena_clear(&arena);
}

/* ---- the greedy orders ---------------------------------------------------------------------- */

static gint
index_cmp(gconstpointer a, gconstpointer b, gpointer data)
{
    gsize x = GPOINTER_TO_SIZE(a);
    gsize y = GPOINTER_TO_SIZE(b);

    (void)data;
    return compare_index(x, y);
}

static void
greedy_init(Greedy *g, const FsimLifetimes *lifetimes, const uint64_t *sizes)
{
    gsize n = lifetimes->n;

    memset(g, 0, sizeof(*g));
    g->lifetimes = lifetimes;
    g->sizes = sizes;
    g->n = n;
    g->hi = g_new(gsize, MAX(n, 1));
    for (gsize i = 0; i < n; i++) {
        uint64_t end = lifetimes->items[i].end;
        gsize lo = i + 1;
        gsize hi = n;

        while (lo < hi) {
            gsize mid = lo + (hi - lo) / 2;

            if (lifetimes->items[mid].start < end)
                lo = mid + 1;
            else
                hi = mid;
        }
        g->hi[i] = lo;
    }
    g->leaves = 1;
    while (g->leaves < MAX(n, 1))
        g->leaves *= 2;
    g->nodes = g_new0(GArray *, 2 * g->leaves);
    g->placed = g_tree_new_full(index_cmp, NULL, NULL, NULL);
    g->found = g_array_new(FALSE, FALSE, sizeof(Interval));
}

static void
greedy_clear(Greedy *g)
{
    for (gsize i = 0; i < 2 * g->leaves; i++) {
        if (g->nodes[i] != NULL)
            g_array_unref(g->nodes[i]);
    }
    g_free(g->nodes);
    g_free(g->hi);
    g_tree_destroy(g->placed);
    g_array_unref(g->found);
}

static void
greedy_node_add(Greedy *g, gsize node, guint32 item)
{
    if (g->nodes[node] == NULL)
        g->nodes[node] = g_array_new(FALSE, FALSE, sizeof(guint32));
    g_array_append_val(g->nodes[node], item);
}

static void
greedy_mark_placed(Greedy *g, gsize i)
{
    gsize l = i + g->leaves;
    gsize r = g->hi[i] + g->leaves;

    while (l < r) {
        if (l & 1)
            greedy_node_add(g, l++, (guint32)i);
        if (r & 1)
            greedy_node_add(g, --r, (guint32)i);
        l >>= 1;
        r >>= 1;
    }
    g_tree_insert(g->placed, GSIZE_TO_POINTER(i + 1), GSIZE_TO_POINTER(i + 1));
}

static void
greedy_found(Greedy *g, const uint64_t *offsets, gsize i)
{
    Interval interval = {offsets[i], offsets[i] + g->sizes[i]};

    g_array_append_val(g->found, interval);
}

/* Collect in g->found the placed allocations whose lifetimes overlap @x's. */
static void
greedy_neighbours(Greedy *g, const uint64_t *offsets, gsize x)
{
    GTreeNode *node;

    g_array_set_size(g->found, 0);
    for (gsize p = x + g->leaves; p >= 1; p >>= 1) {
        GArray *items = g->nodes[p];

        for (guint k = 0; items != NULL && k < items->len; k++)
            greedy_found(g, offsets, g_array_index(items, guint32, k));
    }
    node = g_tree_lower_bound(g->placed, GSIZE_TO_POINTER(x + 2));
    for (; node != NULL; node = g_tree_node_next(node)) {
        gsize i = GPOINTER_TO_SIZE(g_tree_node_key(node)) - 1;

        if (i >= g->hi[x])
            break;
        greedy_found(g, offsets, i);
    }
    g->work += g->found->len;
}

static gint
interval_cmp(gconstpointer a, gconstpointer b)
{
    const Interval *x = a;
    const Interval *y = b;

    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* The smallest gap of at least @size between the intervals found, else the top of them. */
static uint64_t
greedy_best_gap(Greedy *g, uint64_t size)
{
    uint64_t cursor = 0;
    uint64_t best = FSIM_PLAN_UNPLACED;
    uint64_t best_gap = G_MAXUINT64;

    g_array_sort(g->found, interval_cmp);
    for (guint k = 0; k < g->found->len; k++) {
        const Interval *interval = &g_array_index(g->found, Interval, k);

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

typedef struct {
    const FsimLifetimes *lifetimes;
    const uint64_t *sizes;
    PlannerOrder order;
} OrderData;

static uint64_t
lifetime_length(const FsimLifetime *lifetime, uint64_t steps)
{
    uint64_t end = lifetime->end == FSIM_LIFETIME_FOREVER ? steps + 1 : lifetime->end;

    return end - lifetime->start;
}

static gint
by_order(gconstpointer a, gconstpointer b, gpointer data)
{
    const OrderData *d = data;
    gsize x = *(const gsize *)a;
    gsize y = *(const gsize *)b;
    const FsimLifetime *lx = &d->lifetimes->items[x];
    const FsimLifetime *ly = &d->lifetimes->items[y];
    uint64_t length_x = lifetime_length(lx, d->lifetimes->steps);
    uint64_t length_y = lifetime_length(ly, d->lifetimes->steps);
    gboolean whole_x = lx->start == 0 && lx->end == FSIM_LIFETIME_FOREVER;
    gboolean whole_y = ly->start == 0 && ly->end == FSIM_LIFETIME_FOREVER;

    switch (d->order) {
    case PLANNER_ORDER_SIZE:
        if (whole_x != whole_y)
            return whole_x ? -1 : 1;
        break;
    case PLANNER_ORDER_LIFETIME_SIZE:
        if (length_x != length_y)
            return length_x > length_y ? -1 : 1;
        break;
    default:
        break;
    }
    if (d->sizes[x] != d->sizes[y])
        return d->sizes[x] > d->sizes[y] ? -1 : 1;
    if (d->order == PLANNER_ORDER_SIZE_LIFETIME && length_x != length_y)
        return length_x > length_y ? -1 : 1;
    return compare_index(x, y);
}

/* FALSE when the work limit was reached. */
static gboolean
plan_greedy(const FsimLifetimes *lifetimes, const uint64_t *sizes, PlannerOrder order,
            uint64_t work_limit, uint64_t *offsets)
{
    gsize n = lifetimes->n;
    OrderData data = {lifetimes, sizes, order};
    g_autofree gsize *sequence = sorted_indices(n, by_order, &data);
    Greedy g;
    gboolean complete = TRUE;

    greedy_init(&g, lifetimes, sizes);
    for (gsize k = 0; k < n; k++) {
        gsize i = sequence[k];

        greedy_neighbours(&g, offsets, i);
        if (g.work > work_limit) {
            complete = FALSE;
            break;
        }
        offsets[i] = greedy_best_gap(&g, sizes[i]);
        greedy_mark_placed(&g, i);
    }
    greedy_clear(&g);
    return complete;
}

/* ---- choosing ------------------------------------------------------------------------------- */

/* The high-water mark; allocations beyond @capacity are left out and counted in @unplaced. */
static uint64_t
plan_extent(uint64_t *offsets, const uint64_t *sizes, gsize n, uint64_t capacity,
            uint64_t *unplaced)
{
    uint64_t top = 0;

    *unplaced = 0;
    for (gsize i = 0; i < n; i++) {
        if (offsets[i] != FSIM_PLAN_UNPLACED && offsets[i] + sizes[i] > capacity)
            offsets[i] = FSIM_PLAN_UNPLACED;
        if (offsets[i] == FSIM_PLAN_UNPLACED)
            (*unplaced)++;
        else
            top = MAX(top, offsets[i] + sizes[i]);
    }
    return top;
}

void
planner_plan_build(const FsimLifetimes *lifetimes, uint64_t alignment, uint64_t capacity,
                   uint64_t granularity, uint64_t work_limit, PlannerPlan *plan)
{
    gsize n = lifetimes->n;
    g_autofree uint64_t *offsets = g_new(uint64_t, MAX(n, 1));

    memset(plan, 0, sizeof(*plan));
    plan->n = n;
    plan->sizes = g_new(uint64_t, MAX(n, 1));
    plan->offsets = g_new(uint64_t, MAX(n, 1));
    for (gsize i = 0; i < n; i++)
        plan->sizes[i] = (lifetimes->items[i].size + alignment - 1) & ~(alignment - 1);
    for (int order = 0; order < PLANNER_ORDER_COUNT; order++) {
        uint64_t unplaced;
        uint64_t top;

        if (order == PLANNER_ORDER_TIME)
            plan_time(lifetimes, plan->sizes, capacity, granularity, offsets);
        else if (!plan_greedy(lifetimes, plan->sizes, (PlannerOrder)order, work_limit, offsets))
            continue;
        top = plan_extent(offsets, plan->sizes, n, capacity, &unplaced);
        plan->arena_by_order[order] = MAX(top, 1);
        plan->unplaced_by_order[order] = unplaced;
        if (order == PLANNER_ORDER_TIME || unplaced < plan->unplaced ||
            (unplaced == plan->unplaced && top < plan->arena_bytes)) {
            plan->order = (PlannerOrder)order;
            plan->unplaced = unplaced;
            plan->arena_bytes = top;
            memcpy(plan->offsets, offsets, MAX(n, 1) * sizeof(uint64_t));
        }
    }
}

void
planner_plan_clear(PlannerPlan *plan)
{
    g_free(plan->offsets);
    g_free(plan->sizes);
    memset(plan, 0, sizeof(*plan));
}
