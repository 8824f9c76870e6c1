/* SPDX-License-Identifier: MIT */
/*
 * Plots: the address map of a run: segments and blocks over time, their addresses compacted
 * so that the gaps between segments take no room.
 */
#include <glib.h>

#include "plotter.h"

typedef struct {
    double x0, x1;
    FsimAddr a0, a1;
    guint32 colour;
} Rect;

typedef struct {
    FsimAddr start, end;
    double x0;
    guint32 mapped; /* a range mapped into a reservation, not a cudaMalloc segment */
} Piece;

static gint
addr_compare(gconstpointer a, gconstpointer b, gpointer unused)
{
    const FsimAddr *x = a;
    const FsimAddr *y = b;

    (void)unused;
    return *x < *y ? -1 : *x > *y ? 1 : 0;
}

static void
piece_open(GTree *pieces, FsimAddr start, FsimAddr end, double x0, guint32 mapped)
{
    Piece *piece = g_new(Piece, 1);

    piece->start = start;
    piece->end = end;
    piece->x0 = x0;
    piece->mapped = mapped;
    g_tree_replace(pieces, &piece->start, piece);
}

/* Close the parts of open pieces inside [start, end) at @x, as rectangles; remainders stay open
 * with their original start. */
static void
pieces_close(GTree *pieces, GArray *rects, FsimAddr start, FsimAddr end, double x)
{
    g_autoptr(GPtrArray) hit = g_ptr_array_new();
    GTreeNode *node = g_tree_lower_bound(pieces, &start);
    GTreeNode *prev = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(pieces);

    if (prev != NULL && ((Piece *)g_tree_node_value(prev))->end > start)
        g_ptr_array_add(hit, g_tree_node_value(prev));
    for (; node != NULL && ((Piece *)g_tree_node_value(node))->start < end;
         node = g_tree_node_next(node))
        g_ptr_array_add(hit, g_tree_node_value(node));
    for (guint i = 0; i < hit->len; i++) {
        Piece piece = *(Piece *)hit->pdata[i];
        Rect rect = {piece.x0, x, MAX(piece.start, start), MIN(piece.end, end), piece.mapped};

        g_array_append_val(rects, rect);
        g_tree_remove(pieces, &piece.start);
        if (piece.start < start)
            piece_open(pieces, piece.start, start, piece.x0, piece.mapped);
        if (piece.end > end)
            piece_open(pieces, end, piece.end, piece.x0, piece.mapped);
    }
}

static gboolean
collect_open_piece(gpointer key, gpointer value, gpointer data)
{
    const Piece *piece = value;
    GArray *rects = ((gpointer *)data)[0];
    const double *x_end = ((gpointer *)data)[1];
    Rect rect = {piece->x0, *x_end, piece->start, piece->end, piece->mapped};

    (void)key;
    g_array_append_val(rects, rect);
    return FALSE;
}

/* Segment lifetimes as rectangles, from the segment-level device actions; their colour field
 * says 1 for mapped ranges, 0 for cudaMalloc (and seeded) segments. */
static GArray *
segment_rects(GArray *actions, const XAxis *axis)
{
    GArray *rects = g_array_new(FALSE, FALSE, sizeof(Rect));
    g_autoptr(GTree) pieces = g_tree_new_full(addr_compare, NULL, NULL, g_free);
    double x_end = axis->end;
    gpointer data[2] = {rects, &x_end};

    for (guint i = 0; i < actions->len; i++) {
        const FsimStoredSegment *s = &g_array_index(actions, FsimStoredSegment, i);
        double x = s->action == FSIM_STORE_ACTION_SEED
                       ? axis->start
                       : fsim_plot_x_of(axis, s->time, s->event_index);

        switch (s->action) {
        case FSIM_STORE_ACTION_SEED:
        case FSIM_CALL_MEM_ALLOC:
        case FSIM_CALL_MAP:
            pieces_close(pieces, rects, s->addr, s->addr + s->size, x);
            piece_open(pieces, s->addr, s->addr + s->size, x, s->action == FSIM_CALL_MAP);
            break;
        case FSIM_CALL_MEM_FREE:
        case FSIM_CALL_UNMAP:
            pieces_close(pieces, rects, s->addr, s->addr + s->size, x);
            break;
        default:
            /* Address reservations hold no memory. */
            break;
        }
    }
    g_tree_foreach(pieces, collect_open_piece, data);
    return rects;
}

typedef struct {
    FsimAddr start, end;
    uint64_t offset; /* of start in the compacted axis */
} Span;

static gint
rect_by_start(gconstpointer a, gconstpointer b)
{
    const Rect *x = a;
    const Rect *y = b;

    return x->a0 < y->a0 ? -1 : x->a0 > y->a0 ? 1 : 0;
}

/* The union of every range drawn, in address order, each placed right after the previous: the
 * y axis of an address map with the gaps between segments removed. */
static GArray *
compact_axis(GArray *segs, GArray *blocks, uint64_t *total)
{
    g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(Rect));
    GArray *spans = g_array_new(FALSE, FALSE, sizeof(Span));

    g_array_append_vals(all, segs->data, segs->len);
    g_array_append_vals(all, blocks->data, blocks->len);
    g_array_sort(all, rect_by_start);
    *total = 0;
    for (guint i = 0; i < all->len; i++) {
        const Rect *r = &g_array_index(all, Rect, i);
        Span *last = spans->len > 0 ? &g_array_index(spans, Span, spans->len - 1) : NULL;

        if (r->a1 <= r->a0)
            continue;
        if (last != NULL && r->a0 <= last->end) {
            if (r->a1 > last->end) {
                *total += r->a1 - last->end;
                last->end = r->a1;
            }
            continue;
        }
        {
            Span span = {r->a0, r->a1, *total};

            *total += r->a1 - r->a0;
            g_array_append_val(spans, span);
        }
    }
    return spans;
}

static uint64_t
compact(const GArray *spans, FsimAddr addr)
{
    guint lo = 0, hi = spans->len;

    /* The last span starting at or before addr. */
    while (lo + 1 < hi) {
        guint mid = (lo + hi) / 2;

        if (g_array_index(spans, Span, mid).start <= addr)
            lo = mid;
        else
            hi = mid;
    }
    if (spans->len == 0)
        return 0;
    {
        const Span *s = &g_array_index(spans, Span, lo);

        return s->offset + (addr > s->start ? MIN(addr, s->end) - s->start : 0);
    }
}

static const guint32 block_colours[] = {
    0x4e79a7, 0xf28e2b, 0x59a14f, 0xb07aa1, 0x76b7b2, 0xedc948,
    0xff9da7, 0x9c755f, 0xe15759, 0x86bcb6, 0x8cd17d, 0xbab0ac,
};

/* Write the rectangles (only those whose colour is @only, unless it is -1); returns how many. */
static guint
write_rects(GString *out, const GArray *rects, const GArray *spans, double unit, gint64 only)
{
    guint written = 0;

    for (guint i = 0; i < rects->len; i++) {
        const Rect *r = &g_array_index(rects, Rect, i);

        if (only >= 0 && r->colour != (guint32)only)
            continue;
        written++;
        fsim_plot_num(out, r->x0);
        g_string_append_c(out, ' ');
        fsim_plot_num(out, MAX(r->x1, r->x0));
        g_string_append_c(out, ' ');
        fsim_plot_num(out, (double)compact(spans, r->a0) / unit);
        g_string_append_c(out, ' ');
        fsim_plot_num(out, (double)(compact(spans, r->a0) + (r->a1 - r->a0)) / unit);
        g_string_append_printf(out, " %u\n", r->colour);
    }
    if (written == 0)
        g_string_append(out, "0 0 0 0 0\n");
    return written;
}

/* Longer than ~80 lines: loads the run's segments and blocks, compacts the address axis and
 * writes the data and the command in one pass over the same locals. */
gboolean
fsim_plot_address_map(Plotter *p, const GroupData *g, guint index, GError **error)
{
    const FsimStoredRun *run = g->group->runs->pdata[index];
    g_autoptr(GArray) actions = fsim_store_segments(p->store, run->id, error);
    g_autoptr(GArray) blocks = NULL;
    g_autoptr(GArray) segs = NULL;
    g_autoptr(GArray) block_rects = NULL;
    g_autoptr(GArray) spans = NULL;
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *stem = g_strdup_printf("address-map-run%" G_GINT64_FORMAT, run->id);
    g_autofree char *data = g_strconcat(stem, ".dat", NULL);
    g_autofree char *image = g_strdup_printf("%s.%s", stem, fsim_plot_format_name(p->format));
    g_autofree char *policy = fsim_plot_escape(run->policy);
    g_autofree char *title = NULL;
    g_autofree char *counts = NULL;
    g_autofree char *caption = NULL;
    char top[G_ASCII_DTOSTR_BUF_SIZE];
    GArray *ooms = g->ooms->pdata[index];
    uint64_t total;
    guint n_malloc, n_mapped;
    MemUnit unit;

    if (actions == NULL)
        return FALSE;
    blocks = fsim_store_blocks(p->store, run->id, error);
    if (blocks == NULL)
        return FALSE;
    segs = segment_rects(actions, &g->x);
    block_rects = g_array_new(FALSE, FALSE, sizeof(Rect));
    for (guint i = 0; i < blocks->len; i++) {
        const FsimStoredBlock *b = &g_array_index(blocks, FsimStoredBlock, i);
        Rect rect = {
            b->alloc_event < 0 ? g->x.start : fsim_plot_x_of(&g->x, b->alloc_time, b->alloc_event),
            b->free_event < 0 ? g->x.end : fsim_plot_x_of(&g->x, b->free_time, b->free_event),
            b->addr,
            b->addr + b->size,
            block_colours[b->id % G_N_ELEMENTS(block_colours)],
        };

        g_array_append_val(block_rects, rect);
    }
    spans = compact_axis(segs, block_rects, &total);
    unit = fsim_plot_mem_unit_for(total);
    g_string_append_printf(
        out,
        "# fragsim plot data: address map of run %" G_GINT64_FORMAT " (%s).\n# x: %s; y: device "
        "address in %s, with the gaps between segments removed.\n# block 0: cudaMalloc "
        "segments (x0 x1 y0 y1 0); block 1: mapped ranges (x0 x1 y0 y1 1);\n# block 2: the "
        "%" G_GUINT64_FORMAT " largest of %" G_GUINT64_FORMAT " allocations (x0 x1 y0 y1 colour); "
        "block 3: OOMs (x).\n",
        run->id, run->policy, g->x.label, unit.name, run->blocks_stored, run->blocks);
    n_malloc = write_rects(out, segs, spans, unit.divisor, 0);
    g_string_append(out, "\n\n");
    n_mapped = write_rects(out, segs, spans, unit.divisor, 1);
    g_string_append(out, "\n\n");
    write_rects(out, block_rects, spans, unit.divisor, -1);
    g_string_append(out, "\n\n");
    for (guint i = 0; i < ooms->len; i++) {
        const FsimOomRecord *o = &g_array_index(ooms, FsimOomRecord, i);

        fsim_plot_num(out, fsim_plot_x_of(&g->x, o->time, (int64_t)o->event_index));
        g_string_append_c(out, '\n');
    }
    if (ooms->len == 0)
        g_string_append(out, "0\n");
    if (!fsim_plot_write_file(p, data, out, error))
        return FALSE;
    if (run->blocks_stored < run->blocks)
        caption = g_strdup_printf("the %" G_GUINT64_FORMAT " largest of %" G_GUINT64_FORMAT
                                  " allocations; gaps between segments removed",
                                  run->blocks_stored, run->blocks);
    else
        caption = g_strdup_printf("%" G_GUINT64_FORMAT " allocations; gaps between segments "
                                  "removed",
                                  run->blocks);
    title = g_strdup_printf("Address map: run %" G_GINT64_FORMAT " (%s), %s on %s\n%s", run->id,
                            policy, g->trace_name, g->device_name, caption);
    counts = g_strdup_printf("%u %u %u %u", n_malloc, n_mapped, block_rects->len, ooms->len);
    g_ascii_formatd(top, sizeof(top), "%.7g", (double)total / unit.divisor);
    {
        const char *args[] = {title, g->x.label, unit.name, counts, top, NULL};
        g_autofree char *human =
            g_strdup_printf("Address map of run %" G_GINT64_FORMAT " (%s)", run->id, run->policy);

        return fsim_plot_run_gnuplot(p, "address-map", data, image, human, g->group->number,
                                     run->id, args, error);
    }
}
