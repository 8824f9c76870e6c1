/* SPDX-License-Identifier: MIT */
/*
 * Disjoint coalesced ranges in a GTree keyed by start.  The last range touched is cached, so the
 * common pattern of a dense, increasing sequence (ids 1, 2, 3...) extends it in O(1).
 */
#include "range-set.h"

#include <glib.h>

#include "fragsim/owned.h"
#include "fragsim/types.h"

struct FsimRangeSet {
    GTree *tree; /* start (uint64_t, in the key pointer's target) -> Range */
    uint64_t *last_end;
    uint64_t last_start;
    gboolean has_last;
};

typedef struct {
    uint64_t start;
    uint64_t end;
} Range;

static gint
range_compare(gconstpointer a, gconstpointer b, gpointer data)
{
    (void)data;
    return fsim_compare_u64(((const Range *)a)->start, ((const Range *)b)->start);
}

FsimRangeSet *
fsim_range_set_new(void)
{
    FsimRangeSet *set = g_new0(FsimRangeSet, 1);

    set->tree = g_tree_new_full(range_compare, NULL, g_free, NULL);
    return set;
}

void
fsim_range_set_free(FsimRangeSet *set)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimRangeSet, tree, g_tree_destroy)};

    fsim_owned_free(set, owned, G_N_ELEMENTS(owned));
}

/* The range with the greatest start <= value, or NULL. */
static Range *
range_floor(const FsimRangeSet *set, uint64_t value)
{
    Range probe = {value, value};
    GTreeNode *node = g_tree_upper_bound(set->tree, &probe); /* first start > value */

    if (node == NULL)
        node = g_tree_node_last(set->tree);
    else
        node = g_tree_node_previous(node);
    return node != NULL ? g_tree_node_key(node) : NULL;
}

/* The range with the smallest start >= value, or NULL. */
static Range *
range_ceil(const FsimRangeSet *set, uint64_t value)
{
    Range probe = {value, value};
    GTreeNode *node = g_tree_lower_bound(set->tree, &probe);

    return node != NULL ? g_tree_node_key(node) : NULL;
}

void
fsim_range_set_add(FsimRangeSet *set, uint64_t start, uint64_t end)
{
    Range *floor;
    Range *next;

    g_return_if_fail(start < end);
    if (set->has_last && start == *set->last_end) {
        /* Fast path: extending the last range touched, if no range starts in the way. */
        Range *following = range_ceil(set, start);

        if (following == NULL || following->start > end) {
            *set->last_end = end;
            return;
        }
    }
    floor = range_floor(set, start);
    if (floor != NULL && floor->end >= start) {
        if (floor->end < end)
            floor->end = end;
    } else {
        floor = g_new(Range, 1);
        floor->start = start;
        floor->end = end;
        g_tree_insert(set->tree, floor, floor);
    }
    /* Swallow the ranges that now overlap or touch. */
    while ((next = range_ceil(set, floor->start + 1)) != NULL && next->start <= floor->end) {
        if (next->end > floor->end)
            floor->end = next->end;
        g_tree_remove(set->tree, next);
    }
    set->has_last = TRUE;
    set->last_start = floor->start;
    set->last_end = &floor->end;
}

void
fsim_range_set_remove(FsimRangeSet *set, uint64_t start, uint64_t end)
{
    Range *range;

    g_return_if_fail(start < end);
    set->has_last = FALSE;
    range = range_floor(set, start);
    if (range == NULL || range->end <= start)
        range = range_ceil(set, start);
    while (range != NULL && range->start < end) {
        Range *next = range_ceil(set, range->start + 1);

        if (range->start < start && range->end > end) {
            /* Split in two. */
            Range *tail = g_new(Range, 1);

            tail->start = end;
            tail->end = range->end;
            range->end = start;
            g_tree_insert(set->tree, tail, tail);
            return;
        }
        if (range->start < start) {
            range->end = start;
        } else if (range->end > end) {
            /* Keep the tail; the key changes, so re-insert. */
            Range *tail = g_new(Range, 1);

            tail->start = end;
            tail->end = range->end;
            g_tree_remove(set->tree, range);
            g_tree_insert(set->tree, tail, tail);
            return;
        } else {
            g_tree_remove(set->tree, range);
        }
        range = next;
    }
}

gboolean
fsim_range_set_covers(const FsimRangeSet *set, uint64_t start, uint64_t end)
{
    const Range *range = range_floor(set, start);

    return range != NULL && range->start <= start && range->end >= end;
}

gboolean
fsim_range_set_overlaps(const FsimRangeSet *set, uint64_t start, uint64_t end)
{
    const Range *range = range_floor(set, start);

    if (range != NULL && range->end > start)
        return TRUE;
    range = range_ceil(set, start);
    return range != NULL && range->start < end;
}

gboolean
fsim_range_set_contains(const FsimRangeSet *set, uint64_t value)
{
    const Range *range;

    if (set->has_last && value >= set->last_start && value < *set->last_end)
        return TRUE;
    range = range_floor(set, value);
    return range != NULL && value < range->end;
}

guint
fsim_range_set_count(const FsimRangeSet *set)
{
    return (guint)g_tree_nnodes(set->tree);
}
