/* SPDX-License-Identifier: MIT */
/*
 * The HTML report: one self-contained page (inline CSS, no script, no fonts or anything else
 * from the network) that references only the images it wrote beside it.  See plot.h.
 *
 * Per group of comparable runs (one trace on one device): the trace and the device, the policy
 * table with a one-line verdict, the plots, and every metric in a collapsed table.  Runs without
 * data are listed at the end, so an interrupted replay is visible rather than silently missing.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <string.h>

#include "fragsim/metrics.h"
#include "fragsim/plot.h"

static const char report_css[] =
    ":root{--fg:#1d2330;--muted:#5f6b7a;--line:#dfe3e8;--bg:#f6f7f9;--card:#fff;"
    "--accent:#2f5d9e;--good:#e7f5ec;--good-fg:#1e6b3a;--bad:#fdecec;--bad-fg:#a12626}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 -apple-system,"
    "'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}\n"
    "header.top{background:#1d2330;color:#fff;padding:28px 0 22px}\n"
    "header.top h1{margin:0;font-size:26px;font-weight:600;letter-spacing:.2px}\n"
    "header.top p{margin:6px 0 0;color:#c5cbd6;font-size:14px}\n"
    ".wrap{max-width:1240px;margin:0 auto;padding:0 28px}\n"
    "nav.toc{margin:18px 0 0;font-size:14px}\n"
    "nav.toc a{color:#9fc1f2;text-decoration:none;margin-right:18px}\n"
    "section.group{background:var(--card);border:1px solid var(--line);border-radius:10px;"
    "margin:26px 0;padding:26px 30px;box-shadow:0 1px 2px rgba(0,0,0,.04)}\n"
    "h2{margin:0 0 4px;font-size:21px;font-weight:600}\n"
    "h2 .path{font-weight:400;color:var(--muted);font-size:14px;display:block;"
    "word-break:break-all}\n"
    "h3{font-size:16px;margin:26px 0 10px;font-weight:600}\n"
    ".verdict{margin:14px 0 4px;padding:12px 16px;background:#eef3fb;border-left:4px solid "
    "var(--accent);border-radius:4px}\n"
    ".facts{display:grid;grid-template-columns:1fr 1fr;gap:18px;margin-top:18px}\n"
    ".card{border:1px solid var(--line);border-radius:8px;padding:14px 18px}\n"
    ".card h4{margin:0 0 8px;font-size:13px;text-transform:uppercase;letter-spacing:.6px;"
    "color:var(--muted)}\n"
    "dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 18px;margin:0;"
    "font-size:14px}\n"
    "dt{color:var(--muted)}dd{margin:0;font-variant-numeric:tabular-nums;word-break:break-all}\n"
    "table{border-collapse:collapse;width:100%;font-size:14px}\n"
    "th,td{padding:7px 10px;border-bottom:1px solid var(--line);text-align:left;"
    "vertical-align:top}\n"
    "th{background:#f0f2f5;font-weight:600;font-size:13px;color:#3b4452}\n"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n"
    "tr.best td{background:var(--good)}tr.best td:first-child{color:var(--good-fg);"
    "font-weight:600}\n"
    "tr.oom td{background:var(--bad)}\n"
    ".tag{display:inline-block;font-size:12px;padding:1px 7px;border-radius:9px;"
    "background:#e9ecf1;color:#3b4452;margin-left:6px}\n"
    ".tag.bad{background:var(--bad);color:var(--bad-fg)}\n"
    ".tag.good{background:var(--good);color:var(--good-fg)}\n"
    "figure{margin:18px 0;text-align:center}\n"
    "figure img{max-width:100%;height:auto;border:1px solid var(--line);border-radius:6px;"
    "background:#fff}\n"
    "figcaption{color:var(--muted);font-size:13px;margin-top:6px}\n"
    ".maps{display:grid;grid-template-columns:1fr 1fr;gap:6px 22px}\n"
    "details{margin-top:18px}summary{cursor:pointer;color:var(--accent);font-weight:600}\n"
    "details table{margin-top:10px}\n"
    "td.metric{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;"
    "font-size:13px}\n"
    "td.doc{color:var(--muted);font-size:13px}\n"
    ".notice{padding:12px 16px;border-radius:6px;background:#fff7e0;border:1px solid "
    "#f0d58c;margin:22px 0}\n"
    "p.note{color:var(--muted);font-size:13px;margin:8px 0 0}\n"
    "footer{color:var(--muted);font-size:13px;padding:10px 0 40px}\n"
    "code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;"
    "background:#eef0f3;padding:1px 5px;border-radius:4px}\n"
    "@media (max-width:900px){.facts,.maps{grid-template-columns:1fr}}\n";

static void
esc(GString *out, const char *text)
{
    g_autofree char *escaped = g_markup_escape_text(text != NULL ? text : "", -1);

    g_string_append(out, escaped);
}

static void G_GNUC_PRINTF(2, 3) escf(GString *out, const char *format, ...)
{
    g_autofree char *text = NULL;
    va_list args;

    va_start(args, format);
    text = g_strdup_vprintf(format, args);
    va_end(args);
    esc(out, text);
}

static char *
format_time_ns(uint64_t ns)
{
    if (ns >= 1000000000)
        return g_strdup_printf("%.2f s", (double)ns / 1e9);
    if (ns >= 1000000)
        return g_strdup_printf("%.1f ms", (double)ns / 1e6);
    if (ns >= 1000)
        return g_strdup_printf("%.1f µs", (double)ns / 1e3);
    return g_strdup_printf("%" G_GUINT64_FORMAT " ns", ns);
}

static void
dl_item(GString *out, const char *term, const char *value)
{
    g_string_append(out, "<dt>");
    esc(out, term);
    g_string_append(out, "</dt><dd>");
    esc(out, value);
    g_string_append(out, "</dd>\n");
}

static void
td_num(GString *out, const char *text)
{
    g_string_append(out, "<td class=\"n\">");
    esc(out, text);
    g_string_append(out, "</td>");
}

static double
excess_ratio(const FsimMetrics *m)
{
    return m->lower_bound_bytes > 0
               ? (double)m->excess_over_lower_bound_bytes / (double)m->lower_bound_bytes
               : 0.0;
}

/* What runs are ranked by: the capacity they need, or their peak reserved memory where the
 * database has no needed_bytes (replay --no-needed, or an older fragsim). */
static uint64_t
run_key(const FsimStoredRun *run)
{
    return run->metrics.needed_bytes >= 0 ? (uint64_t)run->metrics.needed_bytes
                                          : run->metrics.peak_reserved_bytes;
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
        if (b == NULL || run_key(run) < run_key(b))
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
           run_key(run) == run_key(b);
}

/* How far @key lies above @m's lower bound, as a fraction. */
static double
above_lower(const FsimMetrics *m, uint64_t key)
{
    return m->lower_bound_bytes > 0 && key > m->lower_bound_bytes
               ? (double)(key - m->lower_bound_bytes) / (double)m->lower_bound_bytes
               : 0.0;
}

static void
write_verdict(GString *out, const FsimPlotGroup *group)
{
    gint best = best_run(group);
    const FsimStoredRun *worst = NULL;
    guint with_ooms = 0;

    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];

        with_ooms += run->metrics.ooms > 0;
        if (worst == NULL || run_key(run) > run_key(worst))
            worst = run;
    }
    g_string_append(out, "<p class=\"verdict\">");
    if (best >= 0) {
        const FsimStoredRun *b = group->runs->pdata[best];
        g_autofree char *size = fsim_format_size(run_key(b));

        g_string_append(out, b->metrics.needed_bytes >= 0
                                 ? "Needs the least memory: <strong>"
                                 : "Lowest peak reserved memory: <strong>");
        for (guint i = 0, shown = 0; i < group->runs->len; i++) {
            if (!is_best(group, best, i))
                continue;
            if (shown++ > 0)
                g_string_append(out, ", ");
            esc(out, ((const FsimStoredRun *)group->runs->pdata[i])->label);
        }
        g_string_append(out, "</strong> ");
        escf(out, "(%s, %.1f%% above the lower bound)", size,
             100.0 * above_lower(&b->metrics, run_key(b)));
        if (worst != NULL && run_key(worst) > run_key(b)) {
            g_autofree char *wsize = fsim_format_size(run_key(worst));

            g_string_append(out, "; the most: <strong>");
            esc(out, worst->label);
            g_string_append(out, "</strong> ");
            escf(out, "(%s, %.1f%% above)", wsize,
                 100.0 * above_lower(&worst->metrics, run_key(worst)));
        }
        g_string_append(out, ".");
    } else {
        g_string_append(out, "Every policy ran out of memory on this device.");
    }
    if (with_ooms > 0)
        escf(out, " %u of %u runs had simulated OOMs.", with_ooms, group->runs->len);
    g_string_append(out, "</p>\n");
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
    time = duration > 0 ? format_time_ns(duration) : g_strdup("no timestamps");
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

    g_string_append(out, "<table>\n<thead><tr><th>run</th>");
    for (gsize i = 0; i < G_N_ELEMENTS(headers); i++)
        g_string_append_printf(out, "<th class=\"n\">%s</th>", headers[i]);
    g_string_append(out, "</tr></thead>\n<tbody>\n");
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        const FsimMetrics *m = &run->metrics;
        g_autofree char *needed =
            m->needed_bytes >= 0 ? fsim_format_size((uint64_t)m->needed_bytes) : g_strdup("-");
        g_autofree char *reserved = fsim_format_size(m->peak_reserved_bytes);
        g_autofree char *excess = fsim_format_size(m->excess_over_lower_bound_bytes);
        g_autofree char *allocated = fsim_format_size(m->peak_allocated_bytes);
        g_autofree char *excess_text =
            g_strdup_printf("%s (%.1f%%)", excess, 100.0 * excess_ratio(m));
        g_autofree char *util = g_strdup_printf("%.1f%%", 100.0 * m->peak_utilization);
        g_autofree char *ext = g_strdup_printf("%.1f%%", 100.0 * m->external_frag_at_peak);
        g_autofree char *minu = g_strdup_printf("%.1f%%", 100.0 * m->min_utilization);
        g_autofree char *ooms = fsim_format_count(m->ooms);
        g_autofree char *calls = fsim_format_count(m->device_mallocs + m->device_frees +
                                                   m->device_maps + m->device_unmaps);
        g_autofree char *time = format_time_ns(m->modelled_alloc_time_ns);
        gboolean lowest = is_best(group, best, i);
        const char *class = lowest ? " class=\"best\"" : m->ooms > 0 ? " class=\"oom\"" : "";

        g_string_append_printf(out, "<tr%s><td>", class);
        esc(out, run->label);
        g_string_append_printf(out, " <span class=\"tag\">run %" G_GINT64_FORMAT "</span>",
                               run->id);
        if (run->status == FSIM_STORE_OOM)
            g_string_append(out, " <span class=\"tag bad\">stopped at first OOM</span>");
        if (lowest && group->runs->len > 1)
            g_string_append(out, " <span class=\"tag good\">lowest</span>");
        if (run->knobs != NULL && *run->knobs != '\0') {
            g_autofree char *knobs = g_strdup(run->knobs);

            g_strdelimit(knobs, "\n", ' ');
            g_string_append(out, "<br><code>");
            esc(out, g_strstrip(knobs));
            g_string_append(out, "</code>");
        }
        g_string_append(out, "</td>");
        td_num(out, needed);
        td_num(out, reserved);
        td_num(out, excess_text);
        td_num(out, allocated);
        td_num(out, util);
        td_num(out, ext);
        td_num(out, minu);
        td_num(out, ooms);
        td_num(out, calls);
        td_num(out, time);
        g_string_append(out, "</tr>\n");
    }
    g_string_append(out, "</tbody></table>\n");
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
    td_num(out, text);
}

static void
write_all_metrics(GString *out, const FsimPlotGroup *group)
{
    gsize n;
    const FsimMetricInfo *info = fsim_metrics_list(&n);

    g_string_append(out, "<details><summary>Every metric (docs/metrics.md)</summary>\n<table>\n"
                         "<thead><tr><th>metric</th>");
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];

        g_string_append(out, "<th class=\"n\">");
        esc(out, run->label);
        g_string_append_printf(out, " (run %" G_GINT64_FORMAT ")</th>", run->id);
    }
    g_string_append(out, "<th>meaning</th></tr></thead>\n<tbody>\n");
    for (gsize k = 0; k < n; k++) {
        g_string_append(out, "<tr><td class=\"metric\">");
        esc(out, info[k].name);
        g_string_append(out, "</td>");
        for (guint i = 0; i < group->runs->len; i++)
            write_metric_cell(out, &((const FsimStoredRun *)group->runs->pdata[i])->metrics,
                              &info[k]);
        g_string_append(out, "<td class=\"doc\">");
        esc(out, info[k].summary);
        g_string_append(out, "</td></tr>\n");
    }
    g_string_append(out, "</tbody></table></details>\n");
}

static const FsimPlotFile *
find_plot(GPtrArray *files, guint group, const char *kind, int64_t run)
{
    for (guint i = 0; files != NULL && i < files->len; i++) {
        const FsimPlotFile *file = files->pdata[i];

        if (file->group == group && strcmp(file->kind, kind) == 0 && file->run == run)
            return file;
    }
    return NULL;
}

static void
write_figure(GString *out, const FsimPlotFile *file, const char *caption)
{
    if (file == NULL)
        return;
    g_string_append(out, "<figure><a href=\"");
    esc(out, file->image);
    g_string_append(out, "\"><img src=\"");
    esc(out, file->image);
    g_string_append(out, "\" alt=\"");
    esc(out, file->title);
    g_string_append(out, "\"></a><figcaption>");
    esc(out, caption);
    g_string_append(out, " (data: ");
    esc(out, file->data);
    g_string_append(out, ")</figcaption></figure>\n");
}

static void
write_group(GString *out, FsimStore *store, const FsimPlotGroup *group, GPtrArray *files)
{
    g_autofree char *base = g_path_get_basename(group->trace);
    g_autofree char *capacity = fsim_format_size(group->capacity_bytes);

    g_string_append_printf(out, "<section class=\"group\" id=\"group-%u\">\n<h2>", group->number);
    esc(out, base);
    g_string_append(out, " on ");
    esc(out, group->device);
    escf(out, " (%s)", capacity);
    g_string_append(out, "<span class=\"path\">");
    esc(out, group->trace);
    escf(out, ", trace device %u", group->trace_device);
    g_string_append(out, "</span></h2>\n");
    write_verdict(out, group);
    write_facts(out, store, group);
    g_string_append(out, "<h3>Policies</h3>\n");
    write_policy_table(out, group);
    write_all_metrics(out, group);
    if (files != NULL) {
        g_string_append(out, "<h3>Plots</h3>\n");
        write_figure(out, find_plot(files, group->number, "compare", -1),
                     "Peak reserved memory per policy; the dashed line is the lower bound (the "
                     "peak of requested memory), which no allocator can beat.");
        write_figure(out, find_plot(files, group->number, "timeline", -1),
                     "Reserved (solid) and allocated (dotted) memory over time, one colour per "
                     "policy; grey: what the program requested.");
        write_figure(out, find_plot(files, group->number, "fragmentation", -1),
                     "Fragmentation over time: memory reserved beyond the request, and the share "
                     "of reserved memory not allocated.");
        write_figure(out, find_plot(files, group->number, "sizes", -1),
                     "Request sizes of the trace, in power-of-two classes.");
        g_string_append(out, "<h3>Address maps</h3>\n<div class=\"maps\">\n");
        for (guint i = 0; i < group->runs->len; i++) {
            const FsimStoredRun *run = group->runs->pdata[i];
            g_autofree char *caption =
                g_strdup_printf("%s (run %" G_GINT64_FORMAT "): segments in grey, allocations in "
                                "colour, OOMs in red.",
                                run->label, run->id);

            write_figure(out, find_plot(files, group->number, "address-map", run->id), caption);
        }
        g_string_append(out, "</div>\n");
    }
    g_string_append(out, "</section>\n");
}

static void
write_incomplete(GString *out, GPtrArray *all_runs)
{
    guint count = 0;

    for (guint i = 0; all_runs != NULL && i < all_runs->len; i++)
        count += !fsim_stored_run_has_data(all_runs->pdata[i]);
    if (count == 0)
        return;
    g_string_append(out, "<section class=\"group\" id=\"incomplete\">\n<h2>Runs without "
                         "results</h2>\n<p>These runs were started but never finished: their "
                         "process was interrupted or killed, or they failed. They have no data "
                         "and are left out above.</p>\n<table><thead><tr><th>run</th><th>trace"
                         "</th><th>policy</th><th>device</th><th>status</th><th>started</th>"
                         "<th>why</th></tr></thead><tbody>\n");
    for (guint i = 0; i < all_runs->len; i++) {
        const FsimStoredRun *run = all_runs->pdata[i];

        if (fsim_stored_run_has_data(run))
            continue;
        g_string_append_printf(out, "<tr><td class=\"n\">%" G_GINT64_FORMAT "</td><td>", run->id);
        esc(out, run->trace);
        g_string_append(out, "</td><td>");
        esc(out, run->label);
        g_string_append(out, "</td><td>");
        esc(out, run->device);
        g_string_append(out, "</td><td>");
        esc(out,
            run->status == FSIM_STORE_RUNNING ? "incomplete" : fsim_store_status_name(run->status));
        g_string_append(out, "</td><td>");
        esc(out, run->created_at);
        g_string_append(out, "</td><td>");
        esc(out, run->message != NULL
                     ? run->message
                     : "interrupted (or still running when the report was written)");
        g_string_append(out, "</td></tr>\n");
    }
    g_string_append(out, "</tbody></table>\n</section>\n");
}

gboolean
fsim_report_write(FsimStore *store, GPtrArray *runs, GPtrArray *all_runs, const char *out_dir,
                  const FsimPlotOptions *options, char **warning, GError **error)
{
    g_autoptr(GPtrArray) groups = NULL;
    g_autoptr(GPtrArray) files = NULL;
    g_autoptr(GError) plot_error = NULL;
    g_autoptr(GString) out = g_string_new(NULL);
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *stamp = g_date_time_format(now, "%Y-%m-%d %H:%M UTC");
    g_autofree char *db_name = g_path_get_basename(fsim_store_path(store));
    g_autofree char *index = g_build_filename(out_dir, "index.html", NULL);
    g_autoptr(GError) local_error = NULL;

    g_return_val_if_fail(store != NULL && runs != NULL && out_dir != NULL, FALSE);
    if (g_mkdir_with_parents(out_dir, 0755) != 0) {
        int saved = errno;

        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO,
                    "%s: cannot create the output directory: %s", out_dir, g_strerror(saved));
        return FALSE;
    }
    files = fsim_plot_render(store, runs, out_dir, options, &plot_error);
    if (files == NULL) {
        /* Without gnuplot (or when it fails) the tables are still worth having. */
        if (plot_error->domain != FSIM_PLOT_ERROR || plot_error->code == FSIM_PLOT_ERROR_IO) {
            g_propagate_error(error, g_steal_pointer(&plot_error));
            return FALSE;
        }
        if (warning != NULL)
            *warning = g_strdup(plot_error->message);
    }
    groups = fsim_plot_group_runs(runs);
    g_string_append(out,
                    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                    "<title>fragsim report: ");
    esc(out, db_name);
    g_string_append(out, "</title>\n<style>\n");
    g_string_append(out, report_css);
    g_string_append(out, "</style>\n</head>\n<body>\n<header class=\"top\"><div class=\"wrap\">\n"
                         "<h1>fragsim report</h1>\n<p>");
    escf(out, "%u runs of %s in %u comparison%s · generated %s by fragsim %s", runs->len, db_name,
         groups->len, groups->len == 1 ? "" : "s", stamp, FSIM_VERSION);
    g_string_append(out, "</p>\n<nav class=\"toc\">");
    for (guint i = 0; i < groups->len; i++) {
        const FsimPlotGroup *group = groups->pdata[i];
        g_autofree char *base = g_path_get_basename(group->trace);

        g_string_append_printf(out, "<a href=\"#group-%u\">", group->number);
        esc(out, base);
        g_string_append(out, " · ");
        esc(out, group->device);
        g_string_append(out, "</a>");
    }
    g_string_append(out, "</nav>\n</div></header>\n<main class=\"wrap\">\n");
    if (files == NULL) {
        g_string_append(out, "<div class=\"notice\"><strong>No plots:</strong> ");
        esc(out, plot_error->message);
        g_string_append(out, "</div>\n");
    }
    for (guint i = 0; i < groups->len; i++)
        write_group(out, store, groups->pdata[i], files);
    write_incomplete(out, all_runs);
    g_string_append(out, "<footer>Every number comes from the results database <code>");
    esc(out, db_name);
    g_string_append(out, "</code> (<code>sqlite3 ");
    esc(out, db_name);
    g_string_append(out, " 'SELECT * FROM run_summary'</code>). ");
    if (files != NULL)
        g_string_append(out, "The plots' data files (<code>*.dat</code>) and gnuplot templates "
                             "(<code>*.gp</code>) are beside this page; edit them and run "
                             "<code>plots.sh</code> to draw the plots again. ");
    g_string_append(out, "Metrics: docs/metrics.md in the fragsim sources.</footer>\n</main>\n"
                         "</body>\n</html>\n");
    /* g_file_set_contents writes a temporary file and renames it into place. */
    if (!g_file_set_contents(index, out->str, (gssize)out->len, &local_error)) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO, "%s", local_error->message);
        return FALSE;
    }
    return TRUE;
}
