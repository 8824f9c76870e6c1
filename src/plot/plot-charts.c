/* SPDX-License-Identifier: MIT */
/*
 * Plots: the timeline of each run, the comparison of the runs of a group, and the histogram of
 * request sizes.
 */
#include <glib.h>

#include <string.h>

#include "plotter.h"

gboolean
fsim_plot_timelines(Plotter *p, const GroupData *g, GError **error)
{
    g_autofree char *data = fsim_plot_group_file(g, "samples", "dat");
    g_autofree char *ooms = fsim_plot_group_file(g, "ooms", "dat");
    g_autofree char *timeline = fsim_plot_image_name(p, g, "timeline");
    g_autofree char *fragmentation = fsim_plot_image_name(p, g, "fragmentation");
    g_autofree char *colours = fsim_plot_colour_list(g);
    g_autofree char *n = g_strdup_printf("%u", g->group->runs->len);
    g_autofree char *title1 = fsim_plot_title(g, "Memory over time", NULL);
    g_autofree char *title2 = fsim_plot_title(g, "Fragmentation over time", NULL);
    g_autofree char *shown1 = fsim_plot_shown_title(title1, FSIM_PLOT_TITLE_WIDTH);
    g_autofree char *shown2 = fsim_plot_shown_title(title2, FSIM_PLOT_TITLE_WIDTH);
    guint n_ooms;

    if (!fsim_plot_write_samples(p, g, data, error) ||
        !fsim_plot_write_ooms(p, g, ooms, &n_ooms, error))
        return FALSE;
    {
        const char *args[] = {shown1, g->x.label, g->unit.name, n, colours, n_ooms > 0 ? ooms : "-",
                              NULL};

        if (!fsim_plot_run_gnuplot(p, "timeline", data, timeline, title1, g, -1, args, error))
            return FALSE;
    }
    {
        const char *args[] = {shown2, g->x.label, g->unit.name, n, colours, NULL};

        return fsim_plot_run_gnuplot(p, "fragmentation", data, fragmentation, title2, g, -1, args,
                                     error);
    }
}

enum {
    BAR_NEEDS,    /* needed_bytes of a run without OOM */
    BAR_FAILED,   /* a run that ran out of memory on its device: what it needs, hatched */
    BAR_ERROR,    /* a run that could not be carried out: no bar */
    BAR_RECORDED, /* what the recording reserved */
    BAR_RESERVED, /* needed_bytes not computed (--no-needed): peak reserved */
};

typedef struct {
    const FsimStoredRun *run;
    const char *colour;
} CompareRow;

/* The group's runs, and the runs of the database for the same trace and device that ended in
 * error (they have no data, but a comparison must show them failed). */
static GArray *
compare_rows(const Plotter *p, const GroupData *g)
{
    GArray *rows = g_array_new(FALSE, FALSE, sizeof(CompareRow));
    const FsimPlotGroup *group = g->group;

    for (guint r = 0; r < group->runs->len; r++) {
        CompareRow row = {group->runs->pdata[r], GROUP_RUN(g, r)->colour};

        g_array_append_val(rows, row);
    }
    for (guint i = 0; p->all_runs != NULL && i < p->all_runs->len; i++) {
        const FsimStoredRun *run = p->all_runs->pdata[i];
        CompareRow row = {run, "#7f7f7f"};

        if ((run->status == FSIM_STORE_ERRORED || run->status == FSIM_STORE_FAILED) &&
            strcmp(run->trace, group->trace) == 0 && run->trace_device == group->trace_device &&
            strcmp(run->device, group->device) == 0 && run->capacity_bytes == group->capacity_bytes)
            g_array_append_val(rows, row);
    }
    return rows;
}

static guint
bar_kind(const FsimStoredRun *run)
{
    if (!fsim_stored_run_has_data(run) || !run->has_metrics)
        return BAR_ERROR;
    if (strcmp(run->policy, "recorded") == 0)
        return BAR_RECORDED;
    if (run->status == FSIM_STORE_OOM || run->metrics.ooms > 0)
        return BAR_FAILED;
    return run->metrics.needed_bytes >= 0 ? BAR_NEEDS : BAR_RESERVED;
}

/* The bar's length in bytes: what the run needs; a failed run without that figure reaches the
 * device's capacity (it needs more). */
static uint64_t
bar_bytes(const FsimStoredRun *run, guint kind)
{
    const FsimMetrics *m = &run->metrics;

    switch (kind) {
    case BAR_NEEDS:
        return (uint64_t)m->needed_bytes;
    case BAR_FAILED:
        return m->needed_bytes >= 0 ? MAX((uint64_t)m->needed_bytes, run->capacity_bytes)
                                    : run->capacity_bytes;
    case BAR_RECORDED:
    case BAR_RESERVED:
        return m->peak_reserved_bytes;
    default:
        return 0;
    }
}

/* The text beside a bar. */
static char *
bar_text(const FsimStoredRun *run, guint kind, uint64_t lower)
{
    const FsimMetrics *m = &run->metrics;
    g_autofree char *size = fsim_format_size(bar_bytes(run, kind));
    g_autofree char *over = NULL;

    if (lower > 0 && kind != BAR_ERROR)
        over = g_strdup_printf(
            " (%+.1f%%)", 100.0 * ((double)bar_bytes(run, kind) - (double)lower) / (double)lower);
    else
        over = g_strdup("");
    switch (kind) {
    case BAR_NEEDS:
        return g_strdup_printf("needs %s%s", size, over);
    case BAR_RESERVED:
        return g_strdup_printf("reserved %s%s\n(needs: not computed)", size, over);
    case BAR_RECORDED:
        return g_strdup_printf("recorded: %s reserved%s%s", size, over,
                               m->ooms > 0 ? "\nand the recording ran out of memory" : "");
    case BAR_FAILED: {
        g_autofree char *cap = fsim_format_size(run->capacity_bytes);
        g_autofree char *when =
            m->first_oom_event >= 0
                ? g_strdup_printf(" at event %" G_GINT64_FORMAT, m->first_oom_event)
                : g_strdup("");

        if (m->needed_bytes >= 0)
            return g_strdup_printf("FAILED on %s: OOM%s\nneeds %s%s", cap, when, size, over);
        return g_strdup_printf("FAILED on %s: OOM%s\nneeds more", cap, when);
    }
    default: {
        g_autofree char *why = g_strdup_printf(
            "ERROR: %s", run->message != NULL ? run->message : fsim_store_status_name(run->status));

        return fsim_plot_wrap(why, 40);
    }
    }
}

gboolean
fsim_plot_compare(Plotter *p, const GroupData *g, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);
    g_autoptr(GArray) rows = compare_rows(p, g);
    g_autofree char *data = fsim_plot_group_file(g, "compare", "dat");
    g_autofree char *image = fsim_plot_image_name(p, g, "compare");
    g_autofree char *title = fsim_plot_title(
        g, "The capacity each run needs (needed_bytes), against the lower bound", NULL);
    g_autofree char *shown = fsim_plot_shown_title(title, FSIM_PLOT_TITLE_WIDTH);
    uint64_t lower = 0, right = 0;
    char lower_text[G_ASCII_DTOSTR_BUF_SIZE];
    char capacity_text[G_ASCII_DTOSTR_BUF_SIZE];
    MemUnit unit;
    gboolean any_failed = FALSE, any_recorded = FALSE, any_error = FALSE;

    for (guint r = 0; r < rows->len; r++) {
        const FsimStoredRun *run = g_array_index(rows, CompareRow, r).run;
        guint kind = bar_kind(run);

        if (kind != BAR_ERROR)
            lower = MAX(lower, run->metrics.lower_bound_bytes);
        right = MAX(right, bar_bytes(run, kind));
        any_failed |= kind == BAR_FAILED;
        any_recorded |= kind == BAR_RECORDED;
        any_error |= kind == BAR_ERROR;
    }
    unit = fsim_plot_mem_unit_for(MAX(MAX(right, lower), g->group->capacity_bytes / 4));
    g_string_append_printf(out,
                           "# fragsim plot data: the capacity each run needs (%s): needed_bytes, "
                           "the least device capacity\n# on which it has no OOM.  kind: 0 needs, "
                           "1 failed (out of memory on its device: hatched), 2 error (no bar),\n"
                           "# 3 the recording's own peak, 4 peak reserved (needs not computed).\n"
                           "# y label bar kind colour text\n",
                           unit.name);
    for (guint r = 0; r < rows->len; r++) {
        const CompareRow *row = &g_array_index(rows, CompareRow, r);
        guint kind = bar_kind(row->run);
        g_autofree char *full = fsim_plot_run_label(g->group, row->run);
        /* A long configuration on a few short lines, not a margin that squeezes the bars. */
        g_autofree char *label = fsim_plot_wrap(full, 32);
        g_autofree char *text = bar_text(row->run, kind, lower);

        /* The first run at the top. */
        g_string_append_printf(out, "%u ", rows->len - 1 - r);
        fsim_plot_quoted(out, label);
        g_string_append_c(out, ' ');
        fsim_plot_num(out, (double)bar_bytes(row->run, kind) / unit.divisor);
        g_string_append_printf(out, " %u %u ", kind, fsim_plot_colour_value(row->colour));
        fsim_plot_quoted(out, text);
        g_string_append_c(out, '\n');
    }
    if (!fsim_plot_write_file(p, data, out, error))
        return FALSE;
    g_ascii_formatd(lower_text, sizeof(lower_text), "%.7g", (double)lower / unit.divisor);
    /* The capacity line only when it matters: failed runs, or runs near it. */
    if (any_failed || (double)right >= 0.5 * (double)g->group->capacity_bytes)
        g_ascii_formatd(capacity_text, sizeof(capacity_text), "%.7g",
                        (double)g->group->capacity_bytes / unit.divisor);
    else
        strcpy(capacity_text, "-");
    {
        g_autofree char *device = fsim_plot_escape(g->group->device);
        g_autofree char *kinds = g_strdup_printf("%d %d %d", any_failed, any_recorded, any_error);
        const char *args[] = {shown, unit.name, lower_text, capacity_text, device, kinds, NULL};

        return fsim_plot_run_gnuplot(p, "compare", data, image, title, g, -1, args, error);
    }
}

static char *
size_label(guint log2)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

    return g_strdup_printf("%" G_GUINT64_FORMAT " %s", (uint64_t)1 << (log2 % 10),
                           units[MIN(log2 / 10, G_N_ELEMENTS(units) - 1)]);
}

gboolean
fsim_plot_sizes(Plotter *p, const GroupData *g, GError **error)
{
    const FsimStoredRun *run = g->group->runs->pdata[0];
    g_autoptr(GArray) sizes = fsim_store_sizes(p->store, run->id, error);
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *data = fsim_plot_group_file(g, "sizes", "dat");
    g_autofree char *image = fsim_plot_image_name(p, g, "sizes");
    g_autofree char *title = fsim_plot_title(g, "Request sizes of the trace", NULL);
    g_autofree char *shown = fsim_plot_shown_title(title, FSIM_PLOT_TITLE_WIDTH);
    uint64_t total_bytes = 0;
    guint lo, hi;

    if (sizes == NULL)
        return FALSE;
    for (guint i = 0; i < sizes->len; i++)
        total_bytes += g_array_index(sizes, FsimStoredSizeBucket, i).bytes;
    g_string_append(out, "# fragsim plot data: requests per size class [2^k, 2^(k+1)) bytes.\n"
                         "# k label requests percent_of_bytes\n");
    /* Every class between the smallest and the largest, empty ones too: an honest x axis. */
    lo = sizes->len > 0 ? g_array_index(sizes, FsimStoredSizeBucket, 0).log2 : 0;
    hi = sizes->len > 0 ? g_array_index(sizes, FsimStoredSizeBucket, sizes->len - 1).log2 : 0;
    for (guint k = lo, i = 0; k <= hi; k++) {
        uint64_t count = 0, bytes = 0;
        g_autofree char *label = size_label(k);

        if (i < sizes->len && g_array_index(sizes, FsimStoredSizeBucket, i).log2 == k) {
            count = g_array_index(sizes, FsimStoredSizeBucket, i).count;
            bytes = g_array_index(sizes, FsimStoredSizeBucket, i).bytes;
            i++;
        }
        g_string_append_printf(out, "%u ", k);
        fsim_plot_quoted(out, label);
        g_string_append_printf(out, " %" G_GUINT64_FORMAT " ", count);
        fsim_plot_num(out, total_bytes > 0 ? 100.0 * (double)bytes / (double)total_bytes : 0.0);
        g_string_append_c(out, '\n');
    }
    {
        const char *args[] = {shown, NULL};

        return fsim_plot_write_file(p, data, out, error) &&
               fsim_plot_run_gnuplot(p, "sizes", data, image, title, g, -1, args, error);
    }
}
