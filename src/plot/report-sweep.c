/* SPDX-License-Identifier: MIT */
/*
 * The report's sweep section: what a grid of runs says at a glance.
 *
 * Runs written by `fragsim sweep` carry their trace's hash; only those are shown here.  They are
 * arranged per device as a table: one row per job, one column per setting (the run's label:
 * policy and alloc conf), each cell the needed capacity.  A job is a `jobs=NAME:GLOB` group of
 * traces, or else one trace; its ranks are its traces and their trace devices.  A job fits only
 * if every rank fits, so a cell of a job with several ranks is the worst rank's needed capacity,
 * with that rank named and the spread (worst minus best rank) beside it.  The best setting of a
 * job is the one with the least needed capacity (ties: the first setting in sweep order).  A plot
 * draws each job as a line over the settings.
 */
#include "report-sweep.h"

#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <string.h>

#include "plotter.h"

/* One cell: the runs of one job under one setting, one per rank. */
typedef struct {
    gboolean any;         /* a run exists */
    gboolean error;       /* a rank has no figure: error, or no needed capacity */
    uint64_t worst;       /* the largest needed capacity over the ranks */
    uint64_t best;        /* the smallest */
    const char *worst_at; /* the rank that needs @worst: its trace */
    uint32_t worst_device;
    guint ranks;
} SweepCell;

/* A device's table: rows (jobs) × columns (settings), in order of first appearance. */
typedef struct {
    const char *device;
    GPtrArray *jobs;     /* char *, borrowed from the runs */
    GPtrArray *settings; /* char *, borrowed from the runs */
    GHashTable *cells;   /* "job\nsetting" → SweepCell */
} SweepTable;

static void
sweep_table_free(gpointer data)
{
    SweepTable *table = data;

    g_ptr_array_unref(table->jobs);
    g_ptr_array_unref(table->settings);
    g_hash_table_unref(table->cells);
    g_free(table);
}

static void
html(GString *out, const char *text)
{
    g_autofree char *escaped = g_markup_escape_text(text, -1);

    g_string_append(out, escaped);
}

static char *
run_job(FsimStoredRun *run)
{
    return run->job != NULL ? run->job : run->trace;
}

static guint
index_of(GPtrArray *names, char *name)
{
    guint i;

    if (!g_ptr_array_find_with_equal_func(names, name, g_str_equal, &i)) {
        g_ptr_array_add(names, name);
        i = names->len - 1;
    }
    return i;
}

static void
cell_add(SweepCell *cell, const FsimStoredRun *run)
{
    gboolean has =
        fsim_stored_run_has_data(run) && run->has_metrics && run->metrics.needed_bytes >= 0;
    uint64_t needed = has ? (uint64_t)run->metrics.needed_bytes : 0;

    cell->ranks++;
    if (!has) {
        cell->error = TRUE;
        return;
    }
    if (!cell->any || needed > cell->worst) {
        cell->worst = needed;
        cell->worst_at = run->trace;
        cell->worst_device = run->trace_device;
    }
    if (!cell->any || needed < cell->best)
        cell->best = needed;
    cell->any = TRUE;
}

/* The sweep's runs arranged in one table per device; NULL when there are none.  Of two runs of
 * the same rank, job, setting and device (a sweep run twice into one database), the later one
 * counts. */
static GPtrArray *
sweep_tables(GPtrArray *runs)
{
    g_autoptr(GPtrArray) tables = g_ptr_array_new_with_free_func(sweep_table_free);
    g_autoptr(GHashTable) latest = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    for (guint i = 0; i < runs->len; i++) {
        FsimStoredRun *run = runs->pdata[i];

        if (run->trace_sha256 != NULL && run->status != FSIM_STORE_RUNNING)
            g_hash_table_insert(latest,
                                g_strdup_printf("%s\n%s\n%u\n%s\n%s", run_job(run), run->trace,
                                                run->trace_device, run->label, run->device),
                                run);
    }
    for (guint i = 0; i < runs->len; i++) {
        FsimStoredRun *run = runs->pdata[i];
        g_autofree char *rank = NULL;
        g_autofree char *key = NULL;
        SweepTable *table = NULL;
        SweepCell *cell;

        if (run->trace_sha256 == NULL || run->status == FSIM_STORE_RUNNING)
            continue;
        rank = g_strdup_printf("%s\n%s\n%u\n%s\n%s", run_job(run), run->trace, run->trace_device,
                               run->label, run->device);
        if (g_hash_table_lookup(latest, rank) != run)
            continue;
        for (guint t = 0; t < tables->len && table == NULL; t++)
            if (strcmp(((SweepTable *)tables->pdata[t])->device, run->device) == 0)
                table = tables->pdata[t];
        if (table == NULL) {
            table = g_new0(SweepTable, 1);
            table->device = run->device;
            table->jobs = g_ptr_array_new();
            table->settings = g_ptr_array_new();
            table->cells = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
            g_ptr_array_add(tables, table);
        }
        (void)index_of(table->jobs, run_job(run));
        (void)index_of(table->settings, run->label);
        key = g_strdup_printf("%s\n%s", run_job(run), run->label);
        cell = g_hash_table_lookup(table->cells, key);
        if (cell == NULL) {
            cell = g_new0(SweepCell, 1);
            g_hash_table_insert(table->cells, g_steal_pointer(&key), cell);
        }
        cell_add(cell, run);
    }
    return tables->len > 0 ? g_steal_pointer(&tables) : NULL;
}

static const SweepCell *
table_cell(const SweepTable *table, guint job, guint setting)
{
    g_autofree char *key = g_strdup_printf("%s\n%s", (const char *)table->jobs->pdata[job],
                                           (const char *)table->settings->pdata[setting]);

    return g_hash_table_lookup(table->cells, key);
}

/* The setting with the least needed capacity for @job, or -1 when none has a figure for every
 * rank. */
static gint
best_setting(const SweepTable *table, guint job)
{
    gint best = -1;
    uint64_t least = 0;

    for (guint s = 0; s < table->settings->len; s++) {
        const SweepCell *cell = table_cell(table, job, s);

        if (cell == NULL || !cell->any || cell->error)
            continue;
        if (best < 0 || cell->worst < least) {
            best = (gint)s;
            least = cell->worst;
        }
    }
    return best;
}

/* A cell of job @job. */
static void
write_cell(GString *out, const char *job, const SweepCell *cell, gboolean best)
{
    g_autofree char *worst = NULL;

    g_string_append(out, "<td class=\"n\">");
    if (cell == NULL) {
        g_string_append(out, "–</td>");
        return;
    }
    if (!cell->any || cell->error) {
        g_string_append(out, "<span class=\"tag bad\">error</span></td>");
        return;
    }
    worst = fsim_format_size(cell->worst);
    g_string_append(out, best ? "<span class=\"tag good\">" : "");
    html(out, worst);
    g_string_append(out, best ? "</span>" : "");
    if (cell->ranks > 1) {
        g_autofree char *base = g_path_get_basename(cell->worst_at);
        g_autofree char *spread = fsim_format_size(cell->worst - cell->best);

        /* the ranks of a trace of its own are its devices; those of a group, its files */
        g_string_append(out, "<br><small>worst rank: ");
        if (strcmp(job, cell->worst_at) != 0) {
            html(out, base);
            g_string_append_c(out, ' ');
        }
        g_string_append_printf(out, "device %u; spread ", cell->worst_device);
        html(out, spread);
        g_string_append(out, "</small>");
    }
    g_string_append(out, "</td>");
}

static void
write_table(GString *out, const SweepTable *table)
{
    g_string_append(out, "<table><thead><tr><th>job</th>");
    for (guint s = 0; s < table->settings->len; s++) {
        g_string_append(out, "<th class=\"n\">");
        html(out, table->settings->pdata[s]);
        g_string_append(out, "</th>");
    }
    g_string_append(out, "<th>best setting</th></tr></thead><tbody>\n");
    for (guint j = 0; j < table->jobs->len; j++) {
        gint best = best_setting(table, j);

        const char *job = table->jobs->pdata[j];
        g_autofree char *base = g_path_get_basename(job);

        /* a trace by its file name, its path in the tooltip */
        g_string_append(out, "<tr><td title=\"");
        html(out, job);
        g_string_append(out, "\">");
        html(out, base);
        g_string_append(out, "</td>");
        for (guint s = 0; s < table->settings->len; s++)
            write_cell(out, job, table_cell(table, j, s), (gint)s == best);
        g_string_append(out, "<td>");
        html(out, best >= 0 ? (const char *)table->settings->pdata[best] : "–");
        g_string_append(out, "</td></tr>\n");
    }
    g_string_append(out, "</tbody></table>\n");
}

/* sweep-needed-N.dat: settings down, jobs across, in @unit. */
static GString *
plot_data(const SweepTable *table, MemUnit unit)
{
    GString *data = g_string_new("setting");

    for (guint j = 0; j < table->jobs->len; j++) {
        g_autofree char *base = g_path_get_basename(table->jobs->pdata[j]);

        g_string_append_c(data, ' ');
        fsim_plot_quoted(data, base);
    }
    g_string_append_c(data, '\n');
    for (guint s = 0; s < table->settings->len; s++) {
        fsim_plot_quoted(data, table->settings->pdata[s]);
        for (guint j = 0; j < table->jobs->len; j++) {
            const SweepCell *cell = table_cell(table, j, s);

            g_string_append_c(data, ' ');
            if (cell == NULL || !cell->any || cell->error)
                g_string_append_c(data, '?');
            else
                fsim_plot_num(data, (double)cell->worst / unit.divisor);
        }
        g_string_append_c(data, '\n');
    }
    return data;
}

/* What the section's plots need: gnuplot, the template, the output directory and format, and
 * the commands run (added to the report's plots.sh).  The section draws its plots itself, one
 * gnuplot run each, after the report's own plots are drawn. */
typedef struct {
    const char *out_dir;
    char *gnuplot;
    char *templates;
    FsimPlotFormat format;
    GString *script;
} SweepPlotter;

/* Runs `gnuplot -c sweep-needed.gp DATA IMAGE FORMAT ARGS...` in the output directory. */
static gboolean
run_gnuplot(SweepPlotter *p, const char *data, const char *image, const char *const *args,
            GError **error)
{
    g_autofree char *source = g_build_filename(p->templates, "sweep-needed.gp", NULL);
    g_autofree char *copy = g_build_filename(p->out_dir, "sweep-needed.gp", NULL);
    g_autofree char *template = NULL;
    g_autofree char *image_path = g_build_filename(p->out_dir, image, NULL);
    g_autofree char *err = NULL;
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GString) command = g_string_new(NULL);
    gsize length = 0;
    int status = 0;

    /* the template beside the plot, so plots.sh can draw it again */
    if (!g_file_get_contents(source, &template, &length, error) ||
        !g_file_set_contents(copy, template, (gssize)length, error))
        return FALSE;
    g_ptr_array_add(argv, g_strdup(p->gnuplot));
    g_ptr_array_add(argv, g_strdup("-c"));
    g_ptr_array_add(argv, g_strdup("sweep-needed.gp"));
    g_ptr_array_add(argv, g_strdup(data));
    g_ptr_array_add(argv, g_strdup(image));
    g_ptr_array_add(argv, g_strdup(fsim_plot_format_name(p->format)));
    for (gsize i = 0; args[i] != NULL; i++)
        g_ptr_array_add(argv, g_strdup(args[i]));
    for (guint i = 0; i < argv->len; i++) {
        g_autofree char *word = fsim_format_shell_word(i == 0 ? "gnuplot" : argv->pdata[i]);

        g_string_append_printf(command, "%s%s", i > 0 ? " " : "", word);
    }
    g_string_append_printf(p->script, "%s\n", command->str);
    g_ptr_array_add(argv, NULL);
    (void)g_unlink(image_path);
    if (!g_spawn_sync(p->out_dir, (char **)argv->pdata, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                      NULL, NULL, &err, &status, error) ||
        !g_spawn_check_wait_status(status, error))
        return FALSE;
    if (!g_file_test(image_path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_FAILED, "gnuplot wrote no %s: %s",
                    image, err != NULL ? err : "");
        return FALSE;
    }
    return TRUE;
}

/* Draws the plot of table @number; returns its image name, or NULL (the reason in @error). */
static char *
plot_table(SweepPlotter *p, const SweepTable *table, guint number, GError **error)
{
    uint64_t max = 1, min = G_MAXUINT64;
    MemUnit unit;
    g_autoptr(GString) data = NULL;
    g_autofree char *data_name = g_strdup_printf("sweep-needed-%u.dat", number);
    g_autofree char *data_path = g_build_filename(p->out_dir, data_name, NULL);
    g_autofree char *image =
        g_strdup_printf("sweep-needed-%u.%s", number, fsim_plot_format_name(p->format));
    g_autofree char *title = NULL;
    g_autofree char *escaped = fsim_plot_escape(table->device);
    g_autofree char *jobs = g_strdup_printf("%u", table->jobs->len);
    g_autofree char *settings = g_strdup_printf("%u", table->settings->len);
    const char *args[6];
    GHashTableIter it;
    gpointer value;

    g_hash_table_iter_init(&it, table->cells);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        const SweepCell *cell = value;

        if (cell->any && !cell->error) {
            max = MAX(max, cell->worst);
            min = MIN(min, MAX(cell->worst, 1));
        }
    }
    unit = fsim_plot_mem_unit_for(max);
    data = plot_data(table, unit);
    if (!g_file_set_contents(data_path, data->str, (gssize)data->len, error))
        return NULL;
    title = g_strdup_printf("Needed capacity per setting on %s", escaped);
    args[0] = title;
    args[1] = unit.name;
    args[2] = jobs;
    args[3] = settings;
    /* jobs of very different sizes share the plot on a logarithmic axis */
    args[4] = min != G_MAXUINT64 && max / min >= 8 ? "1" : "0";
    args[5] = NULL;
    if (!run_gnuplot(p, data_name, image, args, error))
        return NULL;
    return g_steal_pointer(&image);
}

/* Adds the section's gnuplot commands to the report's plots.sh, when there is one. */
static void
append_script(const SweepPlotter *p)
{
    g_autofree char *path = g_build_filename(p->out_dir, "plots.sh", NULL);
    g_autofree char *text = NULL;
    g_autoptr(GString) contents = NULL;

    if (p->script->len == 0 || !g_file_get_contents(path, &text, NULL, NULL))
        return;
    contents = g_string_new(text);
    g_string_append(contents, p->script->str);
    (void)g_file_set_contents(path, contents->str, (gssize)contents->len, NULL);
}

gboolean
report_write_sweep(GString *out, const ReportContext *ctx, GError **error)
{
    GPtrArray *runs = ctx->all_runs != NULL ? ctx->all_runs : ctx->runs;
    g_autoptr(GPtrArray) tables = runs != NULL ? sweep_tables(runs) : NULL;
    const FsimPlotOptions *options = ctx->options;
    g_autoptr(GError) plot_error = NULL;
    SweepPlotter p = {0};

    (void)error;
    if (tables == NULL)
        return TRUE;
    p.out_dir = ctx->out_dir;
    p.format = options != NULL ? options->format : FSIM_PLOT_PNG;
    p.gnuplot = fsim_plot_find_gnuplot(options != NULL ? options->gnuplot : NULL, &plot_error);
    if (p.gnuplot != NULL)
        p.templates =
            fsim_plot_find_templates(options != NULL ? options->templates_dir : NULL, &plot_error);
    p.script = g_string_new(NULL);
    report_begin_section(out, "sweep", "Sweep: the capacity each job needs under each setting",
                         "note",
                         "Each cell is the least device capacity on which the job runs without "
                         "an OOM (needed_bytes); for a job of several ranks, the worst rank's, "
                         "since the job fits only if every rank does. The best setting of each "
                         "job is marked.");
    for (guint t = 0; t < tables->len; t++) {
        const SweepTable *table = tables->pdata[t];
        g_autofree char *image = NULL;

        g_string_append(out, "<h3>On ");
        html(out, table->device);
        g_string_append(out, "</h3>\n");
        write_table(out, table);
        if (p.templates == NULL)
            continue;
        image = plot_table(&p, table, t + 1, &plot_error);
        if (image == NULL) {
            g_string_append(out, "<div class=\"notice\"><strong>No plot:</strong> ");
            html(out, plot_error->message);
            g_string_append(out, "</div>\n");
            g_clear_error(&plot_error);
            continue;
        }
        g_string_append(out, "<figure><img src=\"");
        html(out, image);
        g_string_append(out, "\" alt=\"needed capacity per setting\"><figcaption>Needed capacity "
                             "per setting, one line per job.</figcaption></figure>\n");
    }
    g_string_append(out, "</section>\n");
    append_script(&p);
    g_free(p.gnuplot);
    g_free(p.templates);
    g_string_free(p.script, TRUE);
    return TRUE;
}
