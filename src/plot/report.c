/* SPDX-License-Identifier: MIT */
/*
 * The HTML report: one self-contained page (inline CSS, no script, no fonts or anything else
 * from the network) that references only the images it wrote beside it.  See plot.h.
 *
 * The page answers first: at the top one sentence per comparison (one trace device on one
 * device) says which setting to use and why; each comparison then leads with that sentence, the
 * capacity each run needs with where its memory goes at the peak (report-answer.c), and keeps
 * the trace, the device, every metric and the plots in its details (report-details.c).  Runs
 * without data are listed at the end, so an interrupted replay is visible rather than silently
 * missing.  The page is made of the sections listed in `sections` below, in order; another part
 * of fragsim adds its own section there.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <string.h>

#include "fragsim/metrics.h"
#include "fragsim/plot.h"

#include "report-private.h"
#include "report-sweep.h"

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
    "h2{margin:0 0 4px;font-size:21px;font-weight:600;overflow-wrap:anywhere}\n"
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
    ".scroll{overflow-x:auto;max-width:100%}\n"
    "ul.answers{margin:18px 0 0;padding:0;list-style:none}\n"
    "ul.answers li{margin:8px 0;padding:10px 14px;background:#fff;color:var(--fg);"
    "border-radius:6px;font-size:14px;overflow-wrap:anywhere}\n"
    "ul.answers a{color:var(--accent);font-weight:600;text-decoration:none}\n"
    "table.needs td.barcell{min-width:220px;width:30%}\n"
    ".bar{display:flex;height:14px;border-radius:3px;overflow:hidden;background:#eee;"
    "min-width:2px}\n"
    ".bar span{display:block;height:100%}\n"
    ".live,.key.live{background:#4a7fc1}.round,.key.round{background:#f2b134}"
    ".free,.key.free{background:#7cc47f}.pin,.key.pin{background:#d9534f}"
    ".none{background:#c8ccd2}\n"
    ".key{display:inline-block;width:10px;height:10px;border-radius:2px;margin:0 3px 0 8px}\n"
    "details.more{margin-top:24px;border-top:1px solid var(--line);padding-top:10px}\n"
    "details.more>summary{font-size:15px}\n"
    "@media (max-width:900px){.facts,.maps{grid-template-columns:1fr}}\n";

void
report_esc(GString *out, const char *text)
{
    g_autofree char *escaped = g_markup_escape_text(text != NULL ? text : "", -1);

    g_string_append(out, escaped);
}

void
report_escf(GString *out, const char *format, ...)
{
    g_autofree char *text = NULL;
    va_list args;

    va_start(args, format);
    text = g_strdup_vprintf(format, args);
    va_end(args);
    report_esc(out, text);
}

char *
report_format_time_ns(uint64_t ns)
{
    if (ns >= 1000000000)
        return g_strdup_printf("%.2f s", (double)ns / 1e9);
    if (ns >= 1000000)
        return g_strdup_printf("%.1f ms", (double)ns / 1e6);
    if (ns >= 1000)
        return g_strdup_printf("%.1f µs", (double)ns / 1e3);
    return g_strdup_printf("%" G_GUINT64_FORMAT " ns", ns);
}

void
report_begin_section(GString *out, const char *id, const char *title, const char *note_class,
                     const char *note)
{
    g_string_append_printf(out, "<section class=\"group\" id=\"%s\">\n<h2>%s</h2>\n<p", id, title);
    if (note_class != NULL)
        g_string_append_printf(out, " class=\"%s\"", note_class);
    g_string_append_printf(out, ">%s</p>\n", note);
}

void
report_td_num(GString *out, const char *text)
{
    g_string_append(out, "<td class=\"n\">");
    report_esc(out, text);
    g_string_append(out, "</td>");
}

uint64_t
report_run_key(const FsimStoredRun *run)
{
    return run->metrics.needed_bytes >= 0 ? (uint64_t)run->metrics.needed_bytes
                                          : run->metrics.peak_reserved_bytes;
}

gboolean
report_is_recorded(const FsimStoredRun *run)
{
    return g_strcmp0(run->policy, "recorded") == 0;
}

char *
report_run_name(const FsimStoredRun *run)
{
    if (run->label != NULL && *run->label != '\0')
        return g_strdup(run->label);
    return fsim_run_label(run->policy, run->config);
}

/* ---- the sections --------------------------------------------------------------------------- */

static char *
group_title(const FsimPlotGroup *group)
{
    g_autofree char *base = g_path_get_basename(group->trace);
    g_autofree char *capacity = fsim_format_size(group->capacity_bytes);

    return g_strdup_printf("%s, trace device %u, on %s (%s)", base, group->trace_device,
                           group->device, capacity);
}

/* The answers first: one sentence per comparison, linked to it. */
static gboolean
write_answers(GString *out, const ReportContext *ctx, GError **error)
{
    g_string_append(out, "<ul class=\"answers\">\n");
    for (guint i = 0; i < ctx->groups->len; i++) {
        const FsimPlotGroup *group = ctx->groups->pdata[i];
        g_autofree char *title = group_title(group);
        g_autofree char *sentence = report_answer_sentence(ctx, group, error);

        if (sentence == NULL)
            return FALSE;
        g_string_append_printf(out, "<li><a href=\"#group-%u\">", group->number);
        report_esc(out, title);
        g_string_append(out, "</a>: ");
        report_esc(out, sentence);
        g_string_append(out, "</li>\n");
    }
    g_string_append(out, "</ul>\n");
    return TRUE;
}

static gboolean
write_groups(GString *out, const ReportContext *ctx, GError **error)
{
    for (guint i = 0; i < ctx->groups->len; i++) {
        const FsimPlotGroup *group = ctx->groups->pdata[i];
        g_autofree char *base = g_path_get_basename(group->trace);
        g_autofree char *capacity = fsim_format_size(group->capacity_bytes);

        g_string_append_printf(out, "<section class=\"group\" id=\"group-%u\">\n<h2>",
                               group->number);
        report_esc(out, base);
        report_escf(out, ", trace device %u, on %s (%s)", group->trace_device, group->device,
                    capacity);
        g_string_append(out, "<span class=\"path\">");
        report_esc(out, group->trace);
        g_string_append(out, "</span></h2>\n");
        if (!report_write_answer(out, ctx, group, error) ||
            !report_write_details(out, ctx, group, error))
            return FALSE;
        g_string_append(out, "</section>\n");
    }
    return TRUE;
}

/* The sections of the page's main part, in order. */
static const ReportSection sections[] = {
    report_write_sweep,
    write_groups,
    report_write_incomplete,
};

/* ---- the page ------------------------------------------------------------------------------- */

static void
write_head(GString *out, const ReportContext *ctx, const char *db_name)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *stamp = g_date_time_format(now, "%Y-%m-%d %H:%M UTC");

    g_string_append(out,
                    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                    "<title>fragsim report: ");
    report_esc(out, db_name);
    g_string_append(out, "</title>\n<style>\n");
    g_string_append(out, report_css);
    g_string_append(out, "</style>\n</head>\n<body>\n<header class=\"top\"><div class=\"wrap\">\n"
                         "<h1>fragsim report</h1>\n<p>");
    report_escf(out, "%u runs of %s in %u comparison%s · generated %s by fragsim %s",
                ctx->runs->len, db_name, ctx->groups->len, ctx->groups->len == 1 ? "" : "s", stamp,
                FSIM_VERSION);
    g_string_append(out, "</p>\n");
}

static void
write_foot(GString *out, const char *db_name, gboolean plots)
{
    g_string_append(out, "<footer>Every number comes from the results database <code>");
    report_esc(out, db_name);
    g_string_append(out, "</code>: <code>sqlite3 ");
    report_esc(out, db_name);
    g_string_append(out, " 'SELECT * FROM run_results'</code>, or <code>fragsim export --db ");
    report_esc(out, db_name);
    g_string_append(out, " --csv DIR</code> for CSV files. ");
    if (plots)
        g_string_append(out, "The plots' data files (<code>*.dat</code>) and gnuplot templates "
                             "(<code>*.gp</code>) are beside this page; edit them and run "
                             "<code>plots.sh</code> to draw the plots again. ");
    g_string_append(out, "Metrics: docs/metrics.md; the database: docs/database.md in the "
                         "fragsim sources.</footer>\n</main>\n</body>\n</html>\n");
}

static gboolean
write_page(GString *out, const ReportContext *ctx, const char *db_name, const GError *plot_error,
           GError **error)
{
    write_head(out, ctx, db_name);
    if (!write_answers(out, ctx, error))
        return FALSE;
    g_string_append(out, "</div></header>\n<main class=\"wrap\">\n");
    if (ctx->files == NULL && plot_error != NULL) {
        g_string_append(out, "<div class=\"notice\"><strong>No plots:</strong> ");
        report_esc(out, plot_error->message);
        g_string_append(out, "</div>\n");
    }
    for (gsize i = 0; i < G_N_ELEMENTS(sections); i++)
        if (!sections[i](out, ctx, error))
            return FALSE;
    write_foot(out, db_name, ctx->files != NULL);
    return TRUE;
}

/* Up to this many runs, every run gets its address maps; beyond, the best few per group. */
#define REPORT_ALL_MAPS_UP_TO 60
#define REPORT_MAPS_PER_GROUP 3

gboolean
fsim_report_write(FsimStore *store, GPtrArray *runs, GPtrArray *all_runs, const char *out_dir,
                  const FsimPlotOptions *options, char **warning, GError **error)
{
    g_autoptr(GPtrArray) groups = NULL;
    g_autoptr(GPtrArray) files = NULL;
    g_autoptr(GArray) recommendations = NULL;
    g_autoptr(GError) plot_error = NULL;
    g_autoptr(GError) local_error = NULL;
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *db_name = g_path_get_basename(fsim_store_path(store));
    g_autofree char *index = g_build_filename(out_dir, "index.html", NULL);
    ReportContext ctx = {
        .store = store, .runs = runs, .all_runs = all_runs, .out_dir = out_dir, .options = options};

    g_return_val_if_fail(store != NULL && runs != NULL && out_dir != NULL, FALSE);
    if (g_mkdir_with_parents(out_dir, 0755) != 0) {
        int saved = errno;

        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO,
                    "%s: cannot create the output directory: %s", out_dir, g_strerror(saved));
        return FALSE;
    }
    {
        /* A sweep's database holds hundreds of runs: an address map for each would cost minutes
         * and say little; the best few of each comparison and the default are drawn. */
        FsimPlotOptions opts = options != NULL ? *options : (FsimPlotOptions){0};

        if (runs->len > REPORT_ALL_MAPS_UP_TO && opts.max_address_maps == 0)
            opts.max_address_maps = REPORT_MAPS_PER_GROUP;
        files = fsim_plot_render(store, runs, out_dir, &opts, &plot_error);
    }
    if (files == NULL) {
        /* Without gnuplot (or when it fails) the tables are still worth having. */
        if (plot_error->domain != FSIM_PLOT_ERROR || plot_error->code == FSIM_PLOT_ERROR_IO) {
            g_propagate_error(error, g_steal_pointer(&plot_error));
            return FALSE;
        }
        if (warning != NULL)
            *warning = g_strdup(plot_error->message);
    }
    /* tune's table is optional: a database it never wrote to has none */
    recommendations = fsim_store_recommendations(store, &local_error);
    if (recommendations == NULL) {
        g_warning("%s: tune's recommendations left out: %s", fsim_store_path(store),
                  local_error->message);
        g_clear_error(&local_error);
    }
    groups = fsim_plot_group_runs(runs);
    ctx.groups = groups;
    ctx.files = files;
    ctx.recommendations = recommendations;
    if (!write_page(out, &ctx, db_name, plot_error, error))
        return FALSE;
    /* g_file_set_contents writes a temporary file and renames it into place. */
    if (!g_file_set_contents(index, out->str, (gssize)out->len, &local_error)) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO, "%s", local_error->message);
        return FALSE;
    }
    return TRUE;
}
