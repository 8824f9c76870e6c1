/* SPDX-License-Identifier: MIT */
/*
 * Plots: the timeline of each run, the comparison of the runs of a group, and the histogram of
 * request sizes.
 */
#include <glib.h>

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
    g_autofree char *title1 =
        g_strdup_printf("Memory over time: %s on %s", g->trace_name, g->device_name);
    g_autofree char *title2 =
        g_strdup_printf("Fragmentation over time: %s on %s", g->trace_name, g->device_name);
    guint n_ooms;

    if (!fsim_plot_write_samples(p, g, data, error) ||
        !fsim_plot_write_ooms(p, g, ooms, &n_ooms, error))
        return FALSE;
    {
        const char *args[] = {title1, g->x.label, g->unit.name, n, colours, n_ooms > 0 ? ooms : "-",
                              NULL};

        if (!fsim_plot_run_gnuplot(p, "timeline", data, timeline,
                                   "Allocated and reserved memory over time", g->group->number, -1,
                                   args, error))
            return FALSE;
    }
    {
        const char *args[] = {title2, g->x.label, g->unit.name, n, colours, NULL};

        return fsim_plot_run_gnuplot(p, "fragmentation", data, fragmentation,
                                     "Fragmentation over time", g->group->number, -1, args, error);
    }
}

gboolean
fsim_plot_compare(Plotter *p, const GroupData *g, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *data = fsim_plot_group_file(g, "compare", "dat");
    g_autofree char *image = fsim_plot_image_name(p, g, "compare");
    g_autofree char *title =
        g_strdup_printf("Peak reserved memory per policy: %s on %s", g->trace_name, g->device_name);
    guint n = g->group->runs->len;
    uint64_t lower = 0, peak = 0;
    char lower_text[G_ASCII_DTOSTR_BUF_SIZE];
    char capacity_text[G_ASCII_DTOSTR_BUF_SIZE];
    MemUnit unit;
    gboolean any_oom = FALSE;

    for (guint r = 0; r < n; r++) {
        const FsimStoredRun *run = g->group->runs->pdata[r];

        lower = MAX(lower, run->metrics.lower_bound_bytes);
        peak = MAX(peak, run->metrics.peak_reserved_bytes);
        any_oom |= run->metrics.ooms > 0;
    }
    unit = fsim_plot_mem_unit_for(MAX(peak, lower));
    g_string_append_printf(out,
                           "# fragsim plot data: peak reserved memory per run (%s), as the lower "
                           "bound (the part no\n# allocator can avoid) plus the excess over it.\n"
                           "# y label up_to_lower_bound peak_reserved ooms colour value_label "
                           "oom_label\n",
                           unit.name);
    for (guint r = 0; r < n; r++) {
        const FsimStoredRun *run = g->group->runs->pdata[r];
        const FsimMetrics *m = &run->metrics;
        g_autofree char *label = fsim_plot_run_label(g->group, run);
        g_autofree char *size = fsim_format_size(m->peak_reserved_bytes);
        g_autofree char *value = NULL;
        g_autofree char *oom = NULL;

        if (lower > 0)
            value = g_strdup_printf("%s (%+.1f%% over the trace's lower bound)", size,
                                    100.0 * ((double)m->peak_reserved_bytes - (double)lower) /
                                        (double)lower);
        else
            value = g_strdup(size);
        if (run->status == FSIM_STORE_OOM)
            oom = g_strdup("stopped at its first OOM");
        else if (m->ooms > 0)
            oom = g_strdup_printf("%" G_GUINT64_FORMAT " simulated OOM%s", m->ooms,
                                  m->ooms > 1 ? "s" : "");
        else
            oom = g_strdup("");
        /* The first run at the top. */
        g_string_append_printf(out, "%u ", n - 1 - r);
        fsim_plot_quoted(out, label);
        g_string_append_c(out, ' ');
        fsim_plot_num(out, (double)MIN(m->peak_reserved_bytes, lower) / unit.divisor);
        g_string_append_c(out, ' ');
        fsim_plot_num(out, (double)m->peak_reserved_bytes / unit.divisor);
        g_string_append_printf(out, " %" G_GUINT64_FORMAT " %u ", m->ooms,
                               fsim_plot_colour_value(RUN_COLOUR(g, r)));
        fsim_plot_quoted(out, value);
        g_string_append_c(out, ' ');
        fsim_plot_quoted(out, oom);
        g_string_append_c(out, '\n');
    }
    if (!fsim_plot_write_file(p, data, out, error))
        return FALSE;
    g_ascii_formatd(lower_text, sizeof(lower_text), "%.7g", (double)lower / unit.divisor);
    /* The capacity line only when it matters: runs near it, or OOMs. */
    if (any_oom || (double)peak >= 0.5 * (double)g->group->capacity_bytes)
        g_ascii_formatd(capacity_text, sizeof(capacity_text), "%.7g",
                        (double)g->group->capacity_bytes / unit.divisor);
    else
        strcpy(capacity_text, "-");
    {
        const char *args[] = {title, unit.name, lower_text, capacity_text, NULL};

        return fsim_plot_run_gnuplot(p, "compare", data, image,
                                     "Peak reserved memory against the lower bound",
                                     g->group->number, -1, args, error);
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
    g_autofree char *title = g_strdup_printf("Request sizes: %s", g->trace_name);
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
        const char *args[] = {title, NULL};

        return fsim_plot_write_file(p, data, out, error) &&
               fsim_plot_run_gnuplot(p, "sizes", data, image, "Request size histogram",
                                     g->group->number, -1, args, error);
    }
}
