/* SPDX-License-Identifier: MIT */
/*
 * Plots: the memory of a stored run at one moment, rebuilt from the database alone (the
 * `segments` and `blocks` tables), classified as `explain` does (docs/explain.md):
 *
 *   live        the bytes a live block asked for;
 *   rounding    the rest of a live block (the policy's rounding);
 *   releasable  free memory in a row that holds no live byte: a whole free cudaMalloc'd
 *               segment, or a whole free page of mapped memory (expandable segments, pages);
 *   pinned      free memory sharing its row with a live block: it cannot be given back.
 *
 * A row is one cudaMalloc'd (or seeded) segment, or one page of mapped memory.  The page size of
 * mapped memory is the largest size that divides every map and unmap of its address
 * reservation, and their offsets in it (2 MiB in PyTorch's small pool, 20 MiB in its large pool).
 * A policy that never gives memory back (`bestfit`) has nothing releasable: its free bytes are
 * all pinned, as `explain` counts them.
 *
 * The pinned bytes of each free range are charged to the live blocks next to it in its row, half
 * to each neighbour (a side without one passes its share to the other), so the blocks that pin
 * the most can be outlined.  The state is the one after the moment's event.
 */
#include <glib.h>

#include <stdlib.h>
#include <string.h>

#include "plotter.h"

typedef struct {
    FsimAddr start, end;
} Range;

typedef struct {
    FsimAddr start, end;
    uint64_t page_size;
} Reservation;

static gint
range_compare(gconstpointer a, gconstpointer b)
{
    return fsim_compare_u64(((const Range *)a)->start, ((const Range *)b)->start);
}

/* Remove [start, end) from the ranges. */
static void
ranges_cut(GArray *ranges, FsimAddr start, FsimAddr end)
{
    for (guint i = 0; i < ranges->len; i++) {
        Range *r = &g_array_index(ranges, Range, i);
        Range tail = {end, r->end};

        if (r->end <= start || r->start >= end)
            continue;
        if (r->start < start && r->end > end) {
            r->end = start;
            g_array_insert_val(ranges, i + 1, tail);
            return;
        }
        if (r->start >= start && r->end <= end) {
            g_array_remove_index(ranges, i);
            i--;
        } else if (r->start < start) {
            r->end = start;
        } else {
            r->start = end;
        }
    }
}

static uint64_t
gcd64(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;

        a = b;
        b = t;
    }
    return a;
}

/* The address reservations of the run, each with its page size (see the file comment). */
static GArray *
reservations_of(const GArray *actions, uint64_t granularity)
{
    GArray *out = g_array_new(FALSE, FALSE, sizeof(Reservation));

    for (guint i = 0; i < actions->len; i++) {
        const FsimStoredSegment *s = &g_array_index(actions, FsimStoredSegment, i);
        Reservation r = {s->addr, s->addr + s->size, 0};

        if (s->action == FSIM_CALL_VA_RESERVE)
            g_array_append_val(out, r);
    }
    for (guint i = 0; i < actions->len; i++) {
        const FsimStoredSegment *s = &g_array_index(actions, FsimStoredSegment, i);

        if (s->action != FSIM_CALL_MAP && s->action != FSIM_CALL_UNMAP)
            continue;
        for (guint r = 0; r < out->len; r++) {
            Reservation *res = &g_array_index(out, Reservation, r);

            if (s->addr >= res->start && s->addr < res->end) {
                res->page_size = gcd64(res->page_size, gcd64(s->size, s->addr - res->start));
                break;
            }
        }
    }
    for (guint r = 0; r < out->len; r++) {
        Reservation *res = &g_array_index(out, Reservation, r);

        if (res->page_size == 0)
            res->page_size = MAX(granularity, 1);
    }
    return out;
}

static uint64_t
page_size_at(const GArray *reservations, FsimAddr addr, FsimAddr *base, uint64_t granularity)
{
    for (guint r = 0; r < reservations->len; r++) {
        const Reservation *res = &g_array_index(reservations, Reservation, r);

        if (addr >= res->start && addr < res->end) {
            *base = res->start;
            return res->page_size;
        }
    }
    *base = 0;
    return MAX(granularity, 1);
}

/* The segments and mapped ranges held after @event. */
static void
held_after(const GArray *actions, int64_t event, GArray *segments, GArray *mapped)
{
    for (guint i = 0; i < actions->len; i++) {
        const FsimStoredSegment *s = &g_array_index(actions, FsimStoredSegment, i);
        Range r = {s->addr, s->addr + s->size};

        GArray *held;

        if (s->action != FSIM_STORE_ACTION_SEED && s->event_index > event)
            break;
        switch (s->action) {
        case FSIM_STORE_ACTION_SEED:
        case FSIM_CALL_MEM_ALLOC:
        case FSIM_CALL_MEM_FREE:
            held = segments;
            break;
        case FSIM_CALL_MAP:
        case FSIM_CALL_UNMAP:
            held = mapped;
            break;
        default:
            continue;
        }
        /* what the range held before is gone; an allocation or a map holds it anew */
        ranges_cut(held, r.start, r.end);
        if (s->action != FSIM_CALL_MEM_FREE && s->action != FSIM_CALL_UNMAP)
            g_array_append_val(held, r);
    }
    g_array_sort(segments, range_compare);
    g_array_sort(mapped, range_compare);
}

/* The rows: every segment, and every page of mapped memory, in address order. */
static void
add_rows(FsimPlotMoment *m, const GArray *segments, const GArray *mapped,
         const GArray *reservations, uint64_t granularity)
{
    for (guint i = 0; i < segments->len; i++) {
        const Range *r = &g_array_index(segments, Range, i);
        FsimMapRow row = {.addr = r->start, .size = r->end - r->start};

        g_array_append_val(m->rows, row);
    }
    for (guint i = 0; i < mapped->len; i++) {
        const Range *r = &g_array_index(mapped, Range, i);
        FsimAddr base;
        uint64_t page = page_size_at(reservations, r->start, &base, granularity);

        for (FsimAddr a = r->start; a < r->end;) {
            FsimAddr next = base + ((a - base) / page + 1) * page;
            FsimMapRow row = {.addr = a, .size = MIN(next, r->end) - a, .page = TRUE};

            g_array_append_val(m->rows, row);
            a = MIN(next, r->end);
        }
    }
}

static gint
row_compare(gconstpointer a, gconstpointer b)
{
    return fsim_compare_u64(((const FsimMapRow *)a)->addr, ((const FsimMapRow *)b)->addr);
}

static gint
live_compare(gconstpointer a, gconstpointer b)
{
    return fsim_compare_u64(((const FsimStoredBlock *)a)->addr, ((const FsimStoredBlock *)b)->addr);
}

static int
piece_compare(const void *a, const void *b)
{
    return fsim_compare_u64(((const FsimMapPiece *)a)->offset, ((const FsimMapPiece *)b)->offset);
}

static void
piece_add(FsimPlotMoment *m, FsimMapRow *row, uint64_t x0, uint64_t x1, FsimMapClass cls)
{
    FsimMapPiece piece = {x0, x1 - x0, cls};
    uint64_t *total[] = {&row->live, &row->rounding, &row->releasable, &row->pinned};

    if (x1 <= x0)
        return;
    g_array_append_val(m->pieces, piece);
    row->n_pieces++;
    *total[cls] += x1 - x0;
}

/* Charge @bytes of a free range to the blocks before (@prev) and after (@next) it. */
static void
charge(GHashTable *pins, FsimStoredBlock *prev, FsimStoredBlock *next, uint64_t bytes)
{
    uint64_t to_prev = prev == NULL ? 0 : next == NULL ? bytes : bytes - bytes / 2;
    FsimStoredBlock *who[2] = {prev, next};
    uint64_t share[2] = {to_prev, bytes - to_prev};

    for (int k = 0; k < 2; k++) {
        if (who[k] == NULL || share[k] == 0)
            continue;
        g_hash_table_insert(
            pins, who[k],
            GSIZE_TO_POINTER(GPOINTER_TO_SIZE(g_hash_table_lookup(pins, who[k])) + share[k]));
    }
}

/* Cut row @r into pieces with the live blocks @live (by address) from index *@first on. */
static void
fill_row(FsimPlotMoment *m, guint r, GArray *live, guint *first, gboolean never_releases,
         GHashTable *pins)
{
    FsimMapRow *row = &g_array_index(m->rows, FsimMapRow, r);
    FsimAddr end = row->addr + row->size;
    FsimAddr at = row->addr;
    FsimStoredBlock *prev = NULL;
    guint i = *first;
    gboolean any_live = FALSE;
    g_autoptr(GArray) gaps = g_array_new(FALSE, FALSE, sizeof(Range));

    while (i < live->len && g_array_index(live, FsimStoredBlock, i).addr +
                                    g_array_index(live, FsimStoredBlock, i).size <=
                                row->addr)
        i++;
    *first = i;
    row->first_piece = m->pieces->len;
    for (guint k = i; k < live->len; k++) {
        const FsimStoredBlock *b = &g_array_index(live, FsimStoredBlock, k);
        FsimAddr b0 = MAX(b->addr, row->addr), b1 = MIN(b->addr + b->size, end);
        FsimAddr req = MIN(MAX(b->addr + b->requested, b0), b1);

        if (b->addr >= end)
            break;
        if (b1 <= b0)
            continue;
        if (b0 > at) {
            Range gap = {at, b0};

            g_array_append_val(gaps, gap);
        }
        any_live = TRUE;
        piece_add(m, row, b0 - row->addr, req - row->addr, FSIM_MAP_LIVE);
        piece_add(m, row, req - row->addr, b1 - row->addr, FSIM_MAP_ROUNDING);
        at = MAX(at, b1);
    }
    if (at < end) {
        Range gap = {at, end};

        g_array_append_val(gaps, gap);
    }
    for (guint g = 0; g < gaps->len; g++) {
        const Range *gap = &g_array_index(gaps, Range, g);
        gboolean pinned = any_live || never_releases;
        FsimStoredBlock *next = NULL;

        prev = NULL;
        piece_add(m, row, gap->start - row->addr, gap->end - row->addr,
                  pinned ? FSIM_MAP_PINNED : FSIM_MAP_RELEASABLE);
        if (!any_live)
            continue;
        for (guint k = i; k < live->len; k++) {
            FsimStoredBlock *b = &g_array_index(live, FsimStoredBlock, k);

            if (b->addr >= end)
                break;
            if (b->addr + b->size <= gap->start && b->addr + b->size > row->addr)
                prev = b;
            if (b->addr >= gap->end) {
                next = b;
                break;
            }
        }
        charge(pins, prev, next, gap->end - gap->start);
    }
    if (row->n_pieces > 1)
        qsort(&g_array_index(m->pieces, FsimMapPiece, row->first_piece), row->n_pieces,
              sizeof(FsimMapPiece), piece_compare);
}

static gint
pin_compare(gconstpointer a, gconstpointer b)
{
    const FsimMapPin *x = a;
    const FsimMapPin *y = b;
    /* most pinned first, then in address order */
    int order = fsim_compare_u64(y->pinned, x->pinned);

    return order != 0 ? order : fsim_compare_u64(x->addr, y->addr);
}

FsimPlotMoment *
fsim_plot_moment_new(const GArray *actions, const GArray *blocks, int64_t event,
                     uint64_t granularity, gboolean never_releases)
{
    FsimPlotMoment *m = g_new0(FsimPlotMoment, 1);
    g_autoptr(GArray) segments = g_array_new(FALSE, FALSE, sizeof(Range));
    g_autoptr(GArray) mapped = g_array_new(FALSE, FALSE, sizeof(Range));
    g_autoptr(GArray) reservations = reservations_of(actions, granularity);
    g_autoptr(GArray) live = g_array_new(FALSE, FALSE, sizeof(FsimStoredBlock));
    g_autoptr(GHashTable) pins = g_hash_table_new(NULL, NULL);
    GHashTableIter iter;
    gpointer key, value;
    guint first = 0;

    m->event = event;
    m->rows = g_array_new(FALSE, FALSE, sizeof(FsimMapRow));
    m->pieces = g_array_new(FALSE, FALSE, sizeof(FsimMapPiece));
    m->pins = g_array_new(FALSE, FALSE, sizeof(FsimMapPin));
    held_after(actions, event, segments, mapped);
    add_rows(m, segments, mapped, reservations, granularity);
    g_array_sort(m->rows, row_compare);
    for (guint i = 0; i < blocks->len; i++) {
        const FsimStoredBlock *b = &g_array_index(blocks, FsimStoredBlock, i);

        if (b->alloc_event <= event && (b->free_event < 0 || b->free_event > event))
            g_array_append_val(live, *b);
    }
    g_array_sort(live, live_compare);
    for (guint r = 0; r < m->rows->len; r++) {
        const FsimMapRow *row;

        fill_row(m, r, live, &first, never_releases, pins);
        row = &g_array_index(m->rows, FsimMapRow, r);
        m->live += row->live;
        m->rounding += row->rounding;
        m->releasable += row->releasable;
        m->pinned += row->pinned;
        m->reserved += row->size;
    }
    g_hash_table_iter_init(&iter, pins);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        const FsimStoredBlock *b = key;
        FsimMapPin pin = {b->addr, b->size, GPOINTER_TO_SIZE(value)};

        g_array_append_val(m->pins, pin);
    }
    g_array_sort(m->pins, pin_compare);
    return m;
}

void
fsim_plot_moment_free(FsimPlotMoment *m)
{
    if (m == NULL)
        return;
    g_array_unref(m->rows);
    g_array_unref(m->pieces);
    g_array_unref(m->pins);
    g_free(m);
}

int64_t
fsim_plot_peak_event(const GArray *actions, const GArray *samples)
{
    uint64_t reserved = 0, best = 0;
    int64_t best_event = -1;
    gboolean any = FALSE;

    for (guint i = 0; i < actions->len; i++) {
        const FsimStoredSegment *s = &g_array_index(actions, FsimStoredSegment, i);
        gboolean last_of_event;

        if (s->action == FSIM_STORE_ACTION_SEED || s->action == FSIM_CALL_MEM_ALLOC ||
            s->action == FSIM_CALL_MAP) {
            reserved += s->size;
            any = TRUE;
        } else if (s->action == FSIM_CALL_MEM_FREE || s->action == FSIM_CALL_UNMAP) {
            reserved -= MIN(reserved, s->size);
        }
        last_of_event =
            i + 1 == actions->len ||
            g_array_index(actions, FsimStoredSegment, i + 1).event_index != s->event_index;
        if (last_of_event && reserved > best) {
            best = reserved;
            best_event = s->event_index;
        }
    }
    if (!any && samples != NULL) {
        /* No device action (a policy without segments): the bucket of the highest reserved. */
        for (guint i = 0; i < samples->len; i++) {
            const FsimStoredSample *x = &g_array_index(samples, FsimStoredSample, i);

            if (x->reserved_max > best) {
                best = x->reserved_max;
                best_event = (int64_t)x->event_index_last;
            }
        }
    }
    return best_event;
}
