/* SPDX-License-Identifier: MIT */
/*
 * Allocation lifetimes (the pre-pass an offline policy needs) and the placement checker.  See
 * fragsim/plan.h.
 */
#include <glib.h>

#include "fragsim/owned.h"
#include "fragsim/plan.h"
#include "fragsim/types.h"

typedef struct {
    uint64_t id;
    gsize index;
    gboolean pending; /* freed, waiting for its FREE_COMPLETED */
} LiveEntry;

static void
lifetimes_start(GArray *items, GHashTable *live, uint64_t id, uint64_t size, uint64_t stream,
                uint64_t step, gboolean pending)
{
    FsimLifetime lifetime = {
        .size = size, .stream = stream, .start = step, .end = FSIM_LIFETIME_FOREVER};
    LiveEntry *entry = g_new(LiveEntry, 1);

    entry->id = id;
    entry->index = items->len;
    entry->pending = pending;
    g_array_append_val(items, lifetime);
    /* An id allocated again while alive (the engine rejects it) keeps its first lifetime. */
    g_hash_table_replace(live, &entry->id, entry);
}

static void
lifetimes_end(GArray *items, GHashTable *live, LiveEntry *entry, uint64_t step)
{
    g_array_index(items, FsimLifetime, entry->index).end = step;
    g_hash_table_remove(live, &entry->id);
}

FsimLifetimes *
fsim_lifetimes_from_trace(FsimTrace *trace, uint32_t device, GError **error)
{
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, device, error);
    g_autoptr(GHashTable) live = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, g_free);
    GArray *items;
    GError *local_error = NULL;
    FsimLifetimes *lifetimes;
    FsimEvent ev;
    uint64_t step = 0;

    if (stream == NULL)
        return NULL;
    items = g_array_new(FALSE, FALSE, sizeof(FsimLifetime));
    for (gsize i = 0; state != NULL && i < state->n_blocks; i++) {
        const FsimSeedBlock *seed = &state->blocks[i];

        lifetimes_start(items, live, seed->id, seed->size, seed->stream, 0, seed->pending_free);
    }
    while (fsim_trace_stream_next(stream, &ev, &local_error)) {
        LiveEntry *entry;

        step++;
        switch (ev.kind) {
        case FSIM_EV_ALLOC:
            lifetimes_start(items, live, ev.id, ev.size, ev.stream, step, FALSE);
            break;
        case FSIM_EV_FREE:
            entry = g_hash_table_lookup(live, &ev.id);
            if (entry == NULL || entry->pending)
                break;
            if ((ev.flags & FSIM_EVF_DEFERRED) != 0)
                entry->pending = TRUE;
            else
                lifetimes_end(items, live, entry, step);
            break;
        case FSIM_EV_FREE_COMPLETED:
            entry = g_hash_table_lookup(live, &ev.id);
            if (entry != NULL && entry->pending)
                lifetimes_end(items, live, entry, step);
            break;
        default:
            break;
        }
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        g_array_unref(items);
        return NULL;
    }
    lifetimes = g_new0(FsimLifetimes, 1);
    lifetimes->n = items->len;
    lifetimes->steps = step;
    lifetimes->items = (FsimLifetime *)(void *)g_array_free(items, FALSE);
    return lifetimes;
}

void
fsim_lifetimes_free(FsimLifetimes *lifetimes)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimLifetimes, items, g_free)};

    fsim_owned_free(lifetimes, owned, G_N_ELEMENTS(owned));
}

/* ---- the placement checker ---------------------------------------------------------------- */

typedef struct {
    const FsimLifetimes *lifetimes;
    const uint64_t *offsets;
    const uint64_t *sizes;
} CheckData;

static gint
check_by_offset(gconstpointer a, gconstpointer b, gpointer data)
{
    const CheckData *check = data;
    gsize x = GPOINTER_TO_SIZE(a) - 1;
    gsize y = GPOINTER_TO_SIZE(b) - 1;

    if (check->offsets[x] != check->offsets[y])
        return check->offsets[x] < check->offsets[y] ? -1 : 1;
    return fsim_compare_u64(x, y);
}

static gint
check_by_end(gconstpointer a, gconstpointer b, gpointer data)
{
    const CheckData *check = data;
    gsize x = *(const gsize *)a;
    gsize y = *(const gsize *)b;
    uint64_t ex = check->lifetimes->items[x].end;
    uint64_t ey = check->lifetimes->items[y].end;

    if (ex != ey)
        return ex < ey ? -1 : 1;
    return fsim_compare_u64(x, y);
}

static gboolean
check_overlap(const CheckData *check, gsize a, gsize b, GError **error)
{
    uint64_t a_end = check->offsets[a] + check->sizes[a];
    uint64_t b_end = check->offsets[b] + check->sizes[b];

    if (check->offsets[a] < b_end && check->offsets[b] < a_end) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "placement check failed: allocations %" G_GSIZE_FORMAT " [%" G_GUINT64_FORMAT
                    ", %" G_GUINT64_FORMAT ") and %" G_GSIZE_FORMAT " [%" G_GUINT64_FORMAT
                    ", %" G_GUINT64_FORMAT ") are alive at once and overlap",
                    a, check->offsets[a], a_end, b, check->offsets[b], b_end);
        return FALSE;
    }
    return TRUE;
}

/* Insert @i into the live set after checking it against its neighbours by offset. */
static gboolean
check_insert(const CheckData *check, GTree *live, gsize i, GError **error)
{
    gpointer key = GSIZE_TO_POINTER(i + 1);
    GTreeNode *node;

    g_tree_insert(live, key, key);
    node = g_tree_lookup_node(live, key);
    if (g_tree_node_previous(node) != NULL &&
        !check_overlap(check, GPOINTER_TO_SIZE(g_tree_node_key(g_tree_node_previous(node))) - 1, i,
                       error))
        return FALSE;
    if (g_tree_node_next(node) != NULL &&
        !check_overlap(check, i, GPOINTER_TO_SIZE(g_tree_node_key(g_tree_node_next(node))) - 1,
                       error))
        return FALSE;
    return TRUE;
}

gboolean
fsim_plan_check(const FsimLifetimes *lifetimes, const uint64_t *offsets, const uint64_t *sizes,
                GError **error)
{
    CheckData check = {lifetimes, offsets, sizes};
    g_autofree gsize *by_end = g_new(gsize, MAX(lifetimes->n, 1));
    g_autoptr(GTree) live = g_tree_new_full(check_by_offset, &check, NULL, NULL);
    gsize j = 0;

    for (gsize i = 0; i < lifetimes->n; i++) {
        const FsimLifetime *lifetime = &lifetimes->items[i];

        if (sizes[i] < lifetime->size || lifetime->end <= lifetime->start ||
            (i > 0 && lifetime->start < lifetimes->items[i - 1].start)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "placement check failed: allocation %" G_GSIZE_FORMAT
                        " has %" G_GUINT64_FORMAT " bytes for %" G_GUINT64_FORMAT
                        " or a lifetime out of order",
                        i, sizes[i], lifetime->size);
            return FALSE;
        }
        by_end[i] = i;
    }
    g_qsort_with_data(by_end, (gint)lifetimes->n, sizeof(gsize), check_by_end, &check);
    for (gsize i = 0; i < lifetimes->n; i++) {
        /* Memory freed at or before this step is reusable now. */
        while (j < lifetimes->n && lifetimes->items[by_end[j]].end <= lifetimes->items[i].start) {
            g_tree_remove(live, GSIZE_TO_POINTER(by_end[j] + 1));
            j++;
        }
        if (offsets[i] != FSIM_PLAN_UNPLACED && !check_insert(&check, live, i, error))
            return FALSE;
    }
    return TRUE;
}
