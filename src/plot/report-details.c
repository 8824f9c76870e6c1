/* SPDX-License-Identifier: MIT */
/*
 * The report's details of a comparison, after its answer (report-answer.c): the trace and the
 * device, every policy's figures and every metric, the plots; and the runs without results.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/metrics.h"

#include "report-private.h"

static double
excess_ratio(const FsimMetrics *m)
{
    return m->lower_bound_bytes > 0
               ? (double)m->excess_over_lower_bound_bytes / (double)m->lower_bound_bytes
               : 0.0;
}

/* The index of the first run that needs the least memory among those without OOMs. */
static gint
best_run(const FsimPlotGroup *group)
{
    gint best = -1;

    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        const FsimStoredRun *b = best >= 0 ? group->runs->pdata[best] : NULL;

        if (run->metrics.ooms > 0 || run->status != FSIM_STORE_COMPLETE)
            continue;
        if (b == NULL || report_run_key(run) < report_run_key(b))
            best = (gint)i;
    }
    return best;
}

/* Whether run @i ties with the best one (several policies often reach the same peak). */
static gboolean
is_best(const FsimPlotGroup *group, gint best, guint i)
{
    const FsimStoredRun *run = group->runs->pdata[i];
    const FsimStoredRun *b;

    if (best < 0)
        return FALSE;
    b = group->runs->pdata[best];
    return run->metrics.ooms == 0 && run->status == FSIM_STORE_COMPLETE &&
           report_run_key(run) == report_run_key(b);
}

static void
dl_item(GString *out, const char *term, const char *value)
{
    g_string_append(out, "<dt>");
    report_esc(out, term);
    g_string_append(out, "</dt><dd>");
    report_esc(out, value);
    g_string_append(out, "</dd>\n");
}

static void
write_facts(GString *out, FsimStore *store, const FsimPlotGroup *group)
{
    const FsimStoredRun *first = group->runs->pdata[0];
    const FsimMetrics *m = &first->metrics;
    g_autoptr(GArray) samples = fsim_store_samples(store, first->id, NULL);
    FsimTime duration = 0;
    g_autofree char *events = fsim_format_count(m->events);
    g_autofree char *allocs = fsim_format_count(m->allocs);
    g_autofree char *frees = fsim_format_count(m->frees);
    g_autofree char *lower = fsim_format_size(m->lower_bound_bytes);
    g_autofree char *capacity = fsim_format_size(first->capacity_bytes);
    g_autofree char *total = fsim_format_size(first->total_bytes);
    g_autofree char *page = fsim_format_size(first->granularity);
    g_autofree char *device_index = g_strdup_printf("%u", first->trace_device);
    g_autofree char *time = NULL;

    if (samples != NULL && samples->len > 0)
        duration = g_array_index(samples, FsimStoredSample, samples->len - 1).time_last;
    time = duration > 0 ? report_format_time_ns(duration) : g_strdup("no timestamps");
    g_string_append(out, "<div class=\"facts\">\n<div class=\"card\"><h4>Trace</h4><dl>\n");
    dl_item(out, "file", first->trace);
    dl_item(out, "format", first->trace_format);
    dl_item(out, "device in the trace", device_index);
    dl_item(out, "events", events);
    dl_item(out, "allocations", allocs);
    dl_item(out, "frees", frees);
    dl_item(out, "peak requested (lower bound)", lower);
    dl_item(out, "duration", time);
    if (m->unmatched_frees > 0) {
        g_autofree char *unmatched = fsim_format_count(m->unmatched_frees);

        dl_item(out, "frees of unknown blocks", unmatched);
    }
    g_string_append(out, "</dl></div>\n<div class=\"card\"><h4>Device</h4><dl>\n");
    dl_item(out, "device", first->device);
    if (first->device_description != NULL && *first->device_description != '\0')
        dl_item(out, "model", first->device_description);
    dl_item(out, "usable memory", capacity);
    dl_item(out, "memory as sold", total);
    dl_item(out, "page size", page);
    g_string_append(out, "</dl></div>\n</div>\n");
}

/* A row's first cell: the run's name and id, its tags and its knobs. */
static void
write_run_cell(GString *out, const FsimStoredRun *run, gboolean lowest)
{
    g_autofree char *name = report_run_name(run);

    g_string_append(out, "<td>");
    report_esc(out, name);
    g_string_append_printf(out, " <span class=\"tag\">run %" G_GINT64_FORMAT "</span>", run->id);
    if (run->status == FSIM_STORE_OOM)
        g_string_append(out, " <span class=\"tag bad\">stopped at first OOM</span>");
    if (lowest)
        g_string_append(out, " <span class=\"tag good\">lowest</span>");
    if (run->knobs != NULL && *run->knobs != '\0') {
        g_autofree char *knobs = g_strdup(run->knobs);

        g_strdelimit(knobs, "\n", ' ');
        g_string_append(out, "<br><code>");
        report_esc(out, g_strstrip(knobs));
        g_string_append(out, "</code>");
    }
    g_string_append(out, "</td>");
}

/* A row's figures, in the order of write_policy_table()'s headers. */
static void
write_run_figures(GString *out, const FsimMetrics *m)
{
    g_autofree char *needed =
        m->needed_bytes >= 0 ? fsim_format_size((uint64_t)m->needed_bytes) : g_strdup("-");
    g_autofree char *reserved = fsim_format_size(m->peak_reserved_bytes);
    g_autofree char *excess = fsim_format_size(m->excess_over_lower_bound_bytes);
    g_autofree char *allocated = fsim_format_size(m->peak_allocated_bytes);
    g_autofree char *excess_text = g_strdup_printf("%s (%.1f%%)", excess, 100.0 * excess_ratio(m));
    g_autofree char *util = g_strdup_printf("%.1f%%", 100.0 * m->peak_utilization);
    g_autofree char *ext = g_strdup_printf("%.1f%%", 100.0 * m->external_frag_at_peak);
    g_autofree char *minu = g_strdup_printf("%.1f%%", 100.0 * m->min_utilization);
    g_autofree char *ooms = fsim_format_count(m->ooms);
    g_autofree char *calls =
        fsim_format_count(m->device_mallocs + m->device_frees + m->device_maps + m->device_unmaps);
    g_autofree char *time = report_format_time_ns(m->modelled_alloc_time_ns);

    report_td_num(out, needed);
    report_td_num(out, reserved);
    report_td_num(out, excess_text);
    report_td_num(out, allocated);
    report_td_num(out, util);
    report_td_num(out, ext);
    report_td_num(out, minu);
    report_td_num(out, ooms);
    report_td_num(out, calls);
    report_td_num(out, time);
}

static void
write_policy_table(GString *out, const FsimPlotGroup *group)
{
    /* the metrics' own labels (src/core/metrics.c), and one column that is not a metric */
    const char *const headers[] = {
        fsim_metric_label("needed_bytes"),
        fsim_metric_label("peak_reserved_bytes"),
        fsim_metric_label("excess_over_lower_bound_bytes"),
        fsim_metric_label("peak_allocated_bytes"),
        fsim_metric_label("peak_utilization"),
        fsim_metric_label("external_frag_at_peak"),
        fsim_metric_label("min_utilization"),
        fsim_metric_label("ooms"),
        "driver calls",
        fsim_metric_label("modelled_alloc_time_ns"),
    };
    gint best = best_run(group);

    g_string_append(out, "<div class=\"scroll\"><table>\n<thead><tr><th>run</th>");
    for (gsize i = 0; i < G_N_ELEMENTS(headers); i++)
        g_string_append_printf(out, "<th class=\"n\">%s</th>", headers[i]);
    g_string_append(out, "</tr></thead>\n<tbody>\n");
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        gboolean lowest = is_best(group, best, i);
        const char *class = lowest                  ? " class=\"best\""
                            : run->metrics.ooms > 0 ? " class=\"oom\""
                                                    : "";

        g_string_append_printf(out, "<tr%s>", class);
        write_run_cell(out, run, lowest && group->runs->len > 1);
        write_run_figures(out, &run->metrics);
        g_string_append(out, "</tr>\n");
    }
    g_string_append(out, "</tbody></table></div>\n");
    for (guint i = 0; i < group->runs->len; i++) {
        if (((const FsimStoredRun *)group->runs->pdata[i])->metrics.ooms == 0)
            continue;
        g_string_append(out, "<p class=\"note\">A run with OOMs needs more than its device has "
                             "(needs); the lower bound is the trace's, the same for every "
                             "run.</p>\n");
        break;
    }
}

static void
write_metric_cell(GString *out, const FsimMetrics *m, const FsimMetricInfo *info)
{
    double value = fsim_metric_get_double(m, info);
    g_autofree char *text = NULL;

    if (info->kind == FSIM_METRIC_DOUBLE)
        text = g_strdup_printf("%.4g", value);
    else if (info->kind == FSIM_METRIC_OPTIONAL_I64 && value < 0)
        text = g_strdup("none");
    else if (g_str_has_suffix(info->name, "_bytes") || strcmp(info->name, "lower_bound_bytes") == 0)
        text = g_strdup_printf("%.0f", value);
    else
        text = g_strdup_printf("%.0f", value);
    report_td_num(out, text);
}

static void
write_all_metrics(GString *out, const FsimPlotGroup *group)
{
    gsize n;
    const FsimMetricInfo *info = fsim_metrics_list(&n);

    g_string_append(out, "<details><summary>Every metric (docs/metrics.md)</summary>\n<div "
                         "class=\"scroll\"><table>\n"
                         "<thead><tr><th>metric</th>");
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];

        g_string_append(out, "<th class=\"n\">");
        report_esc(out, run->label);
        g_string_append_printf(out, " (run %" G_GINT64_FORMAT ")</th>", run->id);
    }
    g_string_append(out, "<th>meaning</th></tr></thead>\n<tbody>\n");
    for (gsize k = 0; k < n; k++) {
        g_string_append(out, "<tr><td class=\"metric\">");
        report_esc(out, info[k].name);
        g_string_append(out, "</td>");
        for (guint i = 0; i < group->runs->len; i++)
            write_metric_cell(out, &((const FsimStoredRun *)group->runs->pdata[i])->metrics,
                              &info[k]);
        g_string_append(out, "<td class=\"doc\">");
        report_esc(out, info[k].summary);
        g_string_append(out, "</td></tr>\n");
    }
    g_string_append(out, "</tbody></table></div></details>\n");
}

const FsimPlotFile *
report_find_plot(GPtrArray *files, guint group, const char *kind, int64_t run)
{
    for (guint i = 0; files != NULL && i < files->len; i++) {
        const FsimPlotFile *file = files->pdata[i];

        if (file->group == group && strcmp(file->kind, kind) == 0 && file->run == run)
            return file;
    }
    return NULL;
}

void
report_write_figure(GString *out, const FsimPlotFile *file, const char *caption)
{
    if (file == NULL)
        return;
    g_string_append(out, "<figure><a href=\"");
    report_esc(out, file->image);
    g_string_append(out, "\"><img src=\"");
    report_esc(out, file->image);
    g_string_append(out, "\" alt=\"");
    report_esc(out, file->title);
    g_string_append(out, "\"></a><figcaption>");
    report_esc(out, caption);
    g_string_append(out, " (data: ");
    report_esc(out, file->data);
    g_string_append(out, ")</figcaption></figure>\n");
}

gboolean
report_write_details(GString *out, const ReportContext *ctx, const FsimPlotGroup *group,
                     GError **error)
{
    GPtrArray *files = ctx->files;

    (void)error;
    g_string_append(out, "<details class=\"more\"><summary>Details: the trace, the device, "
                         "every metric, the plots</summary>\n");
    write_facts(out, ctx->store, group);
    g_string_append(out, "<h3>Policies</h3>\n");
    write_policy_table(out, group);
    write_all_metrics(out, group);
    if (files != NULL) {
        g_string_append(out, "<h3>Plots</h3>\n");
        report_write_figure(out, report_find_plot(files, group->number, "timeline", -1),
                            "Reserved (solid) and allocated (dotted) memory over time, one colour "
                            "per run; grey: what the program requested.");
        report_write_figure(out, report_find_plot(files, group->number, "fragmentation", -1),
                            "Fragmentation over time: memory reserved beyond the request, and "
                            "the share of reserved memory not allocated.");
        report_write_figure(out, report_find_plot(files, group->number, "sizes", -1),
                            "Request sizes of the trace, in power-of-two classes.");
        g_string_append(out, "<h3>Address maps</h3>\n<div class=\"maps\">\n");
        for (guint i = 0; i < group->runs->len; i++) {
            const FsimStoredRun *run = group->runs->pdata[i];
            g_autofree char *name = report_run_name(run);
            g_autofree char *caption =
                g_strdup_printf("%s (run %" G_GINT64_FORMAT "): at its peak, one bar per segment "
                                "or page: live in blue, free releasable in green, free pinned in "
                                "red.",
                                name, run->id);

            report_write_figure(out, report_find_plot(files, group->number, "address-map", run->id),
                                caption);
        }
        g_string_append(out, "</div>\n");
    }
    g_string_append(out, "</details>\n");
    return TRUE;
}

gboolean
report_write_incomplete(GString *out, const ReportContext *ctx, GError **error)
{
    GPtrArray *all_runs = ctx->all_runs;
    guint count = 0;

    (void)error;
    for (guint i = 0; all_runs != NULL && i < all_runs->len; i++)
        count += !fsim_stored_run_has_data(all_runs->pdata[i]);
    if (count == 0)
        return TRUE;
    report_begin_section(out, "incomplete", "Runs without results", NULL,
                         "These runs were started but never finished: their process was "
                         "interrupted or killed, or they failed. They have no data and are left "
                         "out above.");
    g_string_append(out, "<div class=\"scroll\"><table><thead><tr><th>run</th><th>trace</th>"
                         "<th>policy</th><th>device</th><th>status</th><th>started</th>"
                         "<th>why</th></tr></thead><tbody>\n");
    for (guint i = 0; i < all_runs->len; i++) {
        const FsimStoredRun *run = all_runs->pdata[i];

        if (fsim_stored_run_has_data(run))
            continue;
        const char *cells[] = {
            run->trace,
            run->label,
            run->device,
            run->status == FSIM_STORE_RUNNING ? "incomplete" : fsim_store_status_name(run->status),
            run->created_at,
            run->message != NULL ? run->message
                                 : "interrupted (or still running when the report was written)",
        };

        g_string_append_printf(out, "<tr><td class=\"n\">%" G_GINT64_FORMAT "</td>", run->id);
        for (gsize c = 0; c < G_N_ELEMENTS(cells); c++) {
            g_string_append(out, "<td>");
            report_esc(out, cells[c]);
            g_string_append(out, "</td>");
        }
        g_string_append(out, "</tr>\n");
    }
    g_string_append(out, "</tbody></table></div>\n</section>\n");
    return TRUE;
}
