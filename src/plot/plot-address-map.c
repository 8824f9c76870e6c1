/* SPDX-License-Identifier: MIT */
/*
 * Plots: the address maps of a run.  At the run's peak (the moment it held the most memory) and
 * at each of its first OOMs, one horizontal bar per segment (or per page of mapped memory), to
 * scale, coloured by what its bytes are (plot-moment.c): live, rounding, free releasable, free
 * pinned; the live blocks that pin the most free memory are outlined.
 *
 * Beyond MAX_ROWS rows, those with the most free memory (pinned first) are drawn, in address
 * order, and the title says how many are left out.
 */
#include <glib.h>

#include <string.h>

#include "plotter.h"

#define MAX_ROWS     80
#define MAX_LABELLED 40 /* rows named on the y axis, beyond which the names would collide */
#define MAX_OOM_MAPS 4
#define MAX_PINS     8

/* A row drawn: consecutive rows of the moment (one segment, or up to `pages` contiguous
 * pages of mapped memory). */
typedef struct {
    guint first, count;
    FsimAddr addr;
    uint64_t size, pinned, releasable;
} Drawn;

static gint
drawn_by_waste(gconstpointer a, gconstpointer b)
{
    const Drawn *x = a;
    const Drawn *y = b;
    /* most pinned first, then most releasable, then in address order */
    int order = fsim_compare_u64(y->pinned, x->pinned);

    if (order == 0)
        order = fsim_compare_u64(y->releasable, x->releasable);
    return order != 0 ? order : fsim_compare_u64(x->first, y->first);
}

static gint
drawn_by_address(gconstpointer a, gconstpointer b)
{
    return fsim_compare_u64(((const Drawn *)a)->first, ((const Drawn *)b)->first);
}

/* How many rows the pages take, @per to a row (a row never spans two mappings). */
static guint
page_rows(const FsimPlotMoment *m, guint per)
{
    guint rows = 0, in_row = 0;
    FsimAddr end = 0;

    for (guint r = 0; r < m->rows->len; r++) {
        const FsimMapRow *row = &g_array_index(m->rows, FsimMapRow, r);

        if (!row->page)
            continue;
        if (in_row == 0 || in_row == per || row->addr != end) {
            rows++;
            in_row = 0;
        }
        in_row++;
        end = row->addr + row->size;
    }
    return rows;
}

/* The pages a drawn row holds: 1, or as many as it takes for the pages to fit in what MAX_ROWS
 * leaves to the segments (at least half of it). */
static guint
pages_per_row(const FsimPlotMoment *m)
{
    guint pages = 0, segments, room, per = 1;

    for (guint r = 0; r < m->rows->len; r++)
        pages += g_array_index(m->rows, FsimMapRow, r).page;
    segments = m->rows->len - pages;
    room = MAX(MAX_ROWS / 2, MAX_ROWS - MIN(segments, MAX_ROWS));
    if (pages == 0 || segments + pages <= MAX_ROWS)
        return 1;
    per = MAX(1, pages / room);
    while (per < pages && page_rows(m, per) > room)
        per += MAX(1, per / 8);
    return per;
}

/* The rows drawn, in address order: every segment, pages packed @per to a row; beyond MAX_ROWS
 * those with the most free memory. */
static GArray *
drawn_rows(const FsimPlotMoment *m, guint per, guint *total)
{
    GArray *drawn = g_array_new(FALSE, FALSE, sizeof(Drawn));

    for (guint r = 0; r < m->rows->len; r++) {
        const FsimMapRow *row = &g_array_index(m->rows, FsimMapRow, r);
        Drawn *last = drawn->len > 0 ? &g_array_index(drawn, Drawn, drawn->len - 1) : NULL;

        if (last != NULL && row->page && last->count < per &&
            g_array_index(m->rows, FsimMapRow, last->first).page &&
            last->addr + last->size == row->addr) {
            last->count++;
        } else {
            Drawn d = {r, 1, row->addr, 0, 0, 0};

            g_array_append_val(drawn, d);
            last = &g_array_index(drawn, Drawn, drawn->len - 1);
        }
        last->size += row->size;
        last->pinned += row->pinned;
        last->releasable += row->releasable;
    }
    *total = drawn->len;
    if (drawn->len > MAX_ROWS) {
        g_array_sort(drawn, drawn_by_waste);
        g_array_set_size(drawn, MAX_ROWS);
        g_array_sort(drawn, drawn_by_address);
    }
    return drawn;
}

static void
rect(GString *out, uint64_t x0, uint64_t x1, double y, double unit, int cls)
{
    fsim_plot_num(out, (double)x0 / unit);
    g_string_append_c(out, ' ');
    fsim_plot_num(out, (double)x1 / unit);
    g_string_append_printf(out, " %.2f %.2f %d\n", y - 0.4, y + 0.4, cls);
}

static void
write_pins(GString *out, const FsimPlotMoment *m, const GArray *drawn, double unit)
{
    guint n = drawn->len, written = 0;

    for (guint k = 0; k < MIN(m->pins->len, MAX_PINS); k++) {
        const FsimMapPin *pin = &g_array_index(m->pins, FsimMapPin, k);

        for (guint i = 0; i < n; i++) {
            const Drawn *d = &g_array_index(drawn, Drawn, i);
            FsimAddr a0 = MAX(pin->addr, d->addr);
            FsimAddr a1 = MIN(pin->addr + pin->size, d->addr + d->size);

            if (a1 > a0) {
                rect(out, a0 - d->addr, a1 - d->addr, (double)(n - 1 - i), unit, 0);
                written++;
            }
        }
    }
    if (written == 0)
        g_string_append(out, "0 0 0 0 0\n");
}

/* The data file: block 0 the pieces, block 1 the outlines of the biggest pins, block 2 the row
 * names (y label). */
/* Rectangles of one row, adjacent ones of a class merged (no seams between pages). */
typedef struct {
    GString *out;
    double y, unit;
    uint64_t x0, x1;
    int cls;
    guint written;
} Strip;

static void
strip_flush(Strip *s)
{
    if (s->x1 > s->x0) {
        rect(s->out, s->x0, s->x1, s->y, s->unit, s->cls);
        s->written++;
    }
    s->x0 = s->x1 = 0;
}

static void
strip_add(Strip *s, uint64_t x0, uint64_t x1, int cls)
{
    if (s->x1 > s->x0 && (s->x1 != x0 || s->cls != cls))
        strip_flush(s);
    if (s->x1 <= s->x0) {
        s->x0 = x0;
        s->cls = cls;
    }
    s->x1 = x1;
}

/* The data file: block 0 the pieces, block 1 the outlines of the biggest pins, block 2 the row
 * names (y label). */
static void
write_moment(GString *out, const FsimPlotMoment *m, const GArray *drawn, double unit)
{
    guint n = drawn->len;
    Strip strip = {out, 0, unit, 0, 0, 0, 0};

    for (guint i = 0; i < n; i++) {
        const Drawn *d = &g_array_index(drawn, Drawn, i);

        strip.y = (double)(n - 1 - i);
        for (guint r = d->first; r < d->first + d->count; r++) {
            const FsimMapRow *row = &g_array_index(m->rows, FsimMapRow, r);
            uint64_t shift = row->addr - d->addr;

            for (guint k = 0; k < row->n_pieces; k++) {
                const FsimMapPiece *piece =
                    &g_array_index(m->pieces, FsimMapPiece, row->first_piece + k);

                strip_add(&strip, shift + piece->offset, shift + piece->offset + piece->size,
                          (int)piece->cls);
            }
        }
        strip_flush(&strip);
    }
    if (strip.written == 0)
        g_string_append(out, "0 0 0 0 0\n");
    g_string_append(out, "\n\n");
    write_pins(out, m, drawn, unit);
    g_string_append(out, "\n\n");
    for (guint i = 0; i < n; i++) {
        const Drawn *d = &g_array_index(drawn, Drawn, i);
        gboolean page = g_array_index(m->rows, FsimMapRow, d->first).page;
        g_autofree char *size = fsim_format_size(d->size);
        g_autofree char *name = !page          ? g_strdup_printf("segment %s", size)
                                : d->count > 1 ? g_strdup_printf("%u pages, %s", d->count, size)
                                               : g_strdup_printf("page %s", size);

        g_string_append_printf(out, "%u ", n - 1 - i);
        fsim_plot_quoted(out, name);
        g_string_append_c(out, '\n');
    }
    if (n == 0)
        g_string_append(out, "0 \"\"\n");
}

/* "3 segments and 40 pages" */
static char *
rows_text(const FsimPlotMoment *m)
{
    guint pages = 0, segments;

    for (guint r = 0; r < m->rows->len; r++)
        pages += g_array_index(m->rows, FsimMapRow, r).page;
    segments = m->rows->len - pages;
    if (pages == 0)
        return g_strdup_printf("%u segment%s", segments, segments == 1 ? "" : "s");
    if (segments == 0)
        return g_strdup_printf("%u page%s", pages, pages == 1 ? "" : "s");
    return g_strdup_printf("%u segment%s and %u page%s", segments, segments == 1 ? "" : "s", pages,
                           pages == 1 ? "" : "s");
}

/* The time of @event: that of its last device action, else of its sample bucket. */
static FsimTime
event_time(const GArray *actions, const GArray *samples, int64_t event)
{
    for (guint i = actions->len; i > 0; i--) {
        const FsimStoredSegment *s = &g_array_index(actions, FsimStoredSegment, i - 1);

        if (s->event_index == event && s->action != FSIM_STORE_ACTION_SEED)
            return s->time;
    }
    for (guint i = 0; i < samples->len; i++) {
        const FsimStoredSample *x = &g_array_index(samples, FsimStoredSample, i);

        if (event >= 0 && (uint64_t)event <= x->event_index_last)
            return x->time_last;
    }
    return 0;
}

static char *
moment_when(const GroupData *g, int64_t event, FsimTime time)
{
    if (event < 0)
        return g_strdup("at the trace's start");
    if (!g->x.use_time)
        return g_strdup_printf("after event %" G_GINT64_FORMAT, event);
    return g_strdup_printf("after event %" G_GINT64_FORMAT ", %.4g %s from the start", event,
                           fsim_plot_x_of(&g->x, time, event), g->x.unit);
}

typedef struct {
    const GArray *actions;
    const GArray *blocks;
    const GArray *samples;
    const FsimStoredRun *run;
    gboolean never_releases;
} RunData;

/* Draw the map of @d at @event; @what names the moment (`at the peak`...), @slug the file. */
static gboolean
map_at(Plotter *p, const GroupData *g, const RunData *d, int64_t event, const char *what,
       const char *slug, GError **error)
{
    const FsimStoredRun *run = d->run;
    g_autoptr(FsimPlotMoment) m =
        fsim_plot_moment_new(d->actions, d->blocks, event, run->granularity, d->never_releases);
    guint per = pages_per_row(m), total;
    g_autoptr(GArray) drawn = drawn_rows(m, per, &total);
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *stem =
        g_strdup_printf("address-map-run%" G_GINT64_FORMAT "-%s", run->id, slug);
    g_autofree char *data = g_strconcat(stem, ".dat", NULL);
    g_autofree char *image = g_strdup_printf("%s.%s", stem, fsim_plot_format_name(p->format));
    g_autofree char *when = moment_when(g, event, event_time(d->actions, d->samples, event));
    g_autofree char *reserved = fsim_format_size(m->reserved);
    g_autofree char *heading = NULL, *title = NULL, *shown = NULL, *legend = NULL;
    g_autofree char *left_out = NULL, *approx = NULL, *rows = NULL;
    uint64_t widest = 1;
    MemUnit unit;
    char xmax[G_ASCII_DTOSTR_BUF_SIZE];
    g_autofree char *counts = NULL;

    for (guint i = 0; i < drawn->len; i++)
        widest = MAX(widest, g_array_index(drawn, Drawn, i).size);
    unit = fsim_plot_mem_unit_for(widest);
    g_string_append_printf(out,
                           "# fragsim plot data: address map of run %" G_GINT64_FORMAT " (%s) %s "
                           "(%s): one row per segment or page.\n# block 0: x0 x1 y0 y1 class "
                           "(offset in the row in %s; 0 live, 1 rounding, 2 free releasable, 3 "
                           "free pinned);\n# block 1: the live blocks that pin the most free "
                           "memory; block 2: y and the row's name.\n",
                           run->id, run->label, what, when, unit.name);
    write_moment(out, m, drawn, unit.divisor);
    if (!fsim_plot_write_file(p, data, out, error))
        return FALSE;
    if (total > drawn->len)
        left_out = g_strdup_printf("%s; the %u rows of %u with the most free memory",
                                   per > 1 ? "; pages packed in rows" : "", drawn->len, total);
    else if (per > 1)
        left_out = g_strdup_printf("; up to %u pages a row", per);
    if (run->blocks_stored < run->blocks)
        approx = g_strdup_printf("; from the %" G_GUINT64_FORMAT " largest of %" G_GUINT64_FORMAT
                                 " allocations",
                                 run->blocks_stored, run->blocks);
    else if (run->segment_actions_stored < run->segment_actions)
        approx = g_strdup_printf("; from the first %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                                 " device actions",
                                 run->segment_actions_stored, run->segment_actions);
    rows = rows_text(m);
    heading = g_strdup_printf("Address map %s (%s): %s reserved in %s%s%s", what, when, reserved,
                              rows, left_out != NULL ? left_out : "", approx != NULL ? approx : "");
    title = fsim_plot_title(g, heading, run);
    shown = fsim_plot_shown_title(title, FSIM_PLOT_TITLE_WIDTH);
    {
        g_autofree char *live = fsim_format_size(m->live);
        g_autofree char *rounding = fsim_format_size(m->rounding);
        g_autofree char *releasable = fsim_format_size(m->releasable);
        g_autofree char *pinned = fsim_format_size(m->pinned);

        legend = g_strdup_printf("\"live (requested): %s\" \"rounding: %s\" \"free, releasable: "
                                 "%s\" \"free, pinned: %s\" \"the %u live blocks that pin the "
                                 "most (outlined)\"",
                                 live, rounding, releasable, pinned, MIN(m->pins->len, MAX_PINS));
    }
    g_ascii_formatd(xmax, sizeof(xmax), "%.7g", (double)widest / unit.divisor);
    counts = g_strdup_printf("%u %u", drawn->len, drawn->len <= MAX_LABELLED ? 1 : 0);
    {
        const char *args[] = {shown, unit.name, counts, xmax, legend, NULL};

        if (!fsim_plot_run_gnuplot(p, "address-map", data, image, title, g, run->id, args, error))
            return FALSE;
        g_array_index(p->jobs, PlotJob, p->jobs->len - 1).file->moment = g_strdup(slug);
        return TRUE;
    }
}

gboolean
fsim_plot_address_map(Plotter *p, const GroupData *g, guint index, GError **error)
{
    const FsimStoredRun *run = g->group->runs->pdata[index];
    g_autoptr(GArray) actions = fsim_store_segments(p->store, run->id, error);
    g_autoptr(GArray) blocks = NULL;
    GArray *ooms = GROUP_RUN(g, index)->ooms;
    RunData d;
    int64_t last = G_MININT64, peak;
    guint drawn = 0;
    g_autoptr(GArray) empty = g_array_new(FALSE, FALSE, sizeof(FsimStoredSegment));

    if (actions == NULL)
        return FALSE;
    blocks = fsim_store_blocks(p->store, run->id, error);
    if (blocks == NULL)
        return FALSE;
    if (actions->len == 0 && blocks->len == 0)
        return TRUE; /* nothing held, ever (the recording's own row) */
    d = (RunData){actions, blocks, GROUP_RUN(g, index)->samples, run,
                  /* Only PyTorch's allocator says what it would give back (docs/explain.md). */
                  strcmp(run->policy, "caching") != 0 && strcmp(run->policy, "expandable") != 0};
    /* With only the first device actions stored, the samples know the peak better. */
    peak = fsim_plot_peak_event(
        run->segment_actions_stored < run->segment_actions ? empty : actions, d.samples);
    if (!map_at(p, g, &d, peak, "at the peak", "peak", error))
        return FALSE;
    for (guint i = 0; i < ooms->len && drawn < MAX_OOM_MAPS; i++) {
        const FsimOomRecord *o = &g_array_index(ooms, FsimOomRecord, i);
        g_autofree char *size = NULL, *what = NULL, *slug = NULL;

        if ((int64_t)o->event_index == last)
            continue;
        last = (int64_t)o->event_index;
        drawn++;
        size = fsim_format_size(o->size);
        what = g_strdup_printf("at OOM %u of %u (a request of %s failed)", drawn, ooms->len, size);
        slug = g_strdup_printf("oom-%u", drawn);
        if (!map_at(p, g, &d, (int64_t)o->event_index, what, slug, error))
            return FALSE;
    }
    return TRUE;
}
