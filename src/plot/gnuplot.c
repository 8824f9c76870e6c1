/* SPDX-License-Identifier: MIT */
/*
 * Plots of stored runs, drawn by gnuplot.  See plot.h for the contract and docs/plots.md for
 * what each plot shows.
 *
 * The division of labour: this file reads the database, turns bytes and nanoseconds into the
 * units of the axes (GiB or MiB, s/ms/µs or event index), lays out address maps, and writes one
 * plain data file per plot; the templates in plots/ only draw.  gnuplot runs in the output
 * directory with relative paths, so `plots.sh` there can run the very same commands again.
 *
 * User text (trace names, device names given as sizes) reaches gnuplot only as `-c` argument
 * values, escaped for enhanced text (fsim_plot_escape()), or in data files drawn `noenhanced`;
 * it is never part of a script, so it cannot inject gnuplot commands.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <string.h>

#include "fragsim/plot.h"

#include "plotter.h"

#ifndef FSIM_PLOTS_SOURCE_DIR
#define FSIM_PLOTS_SOURCE_DIR ""
#endif
#ifndef FSIM_PLOTS_INSTALL_DIR
#define FSIM_PLOTS_INSTALL_DIR ""
#endif

GQuark
fsim_plot_error_quark(void)
{
    return g_quark_from_static_string("fsim-plot-error-quark");
}

/* The formats' names, both ways. */
static const char *const format_names[] = {
    [FSIM_PLOT_PNG] = "png",
    [FSIM_PLOT_SVG] = "svg",
};

const char *
fsim_plot_format_name(FsimPlotFormat format)
{
    return format_names[format == FSIM_PLOT_SVG ? FSIM_PLOT_SVG : FSIM_PLOT_PNG];
}

gboolean
fsim_plot_format_from_name(const char *name, FsimPlotFormat *out)
{
    for (guint i = 0; i < G_N_ELEMENTS(format_names); i++) {
        if (strcmp(name, format_names[i]) == 0) {
            *out = (FsimPlotFormat)i;
            return TRUE;
        }
    }
    return FALSE;
}

char *
fsim_plot_escape(const char *text)
{
    GString *out = g_string_sized_new(strlen(text) + 8);

    for (const char *p = text; *p != '\0'; p++) {
        if (strchr("\\^_@&~{}", *p) != NULL)
            g_string_append_c(out, '\\');
        g_string_append_c(out, *p);
    }
    return g_string_free(out, FALSE);
}

/* ---- finding gnuplot and the templates ----------------------------------------------------- */

char *
fsim_plot_find_gnuplot(const char *override, GError **error)
{
    char *path;

    if (override != NULL && *override != '\0') {
        if (strchr(override, G_DIR_SEPARATOR) != NULL) {
            /* Absolute: gnuplot runs in the output directory. */
            if (g_file_test(override, G_FILE_TEST_IS_EXECUTABLE) &&
                !g_file_test(override, G_FILE_TEST_IS_DIR))
                return g_canonicalize_filename(override, NULL);
            path = NULL;
        } else {
            path = g_find_program_in_path(override);
        }
        if (path == NULL)
            g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_GNUPLOT,
                        "--gnuplot '%s': no such program", override);
        return path;
    }
    path = g_find_program_in_path("gnuplot");
    if (path == NULL)
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_GNUPLOT,
                    "gnuplot is not installed (Debian: apt-get install gnuplot-nox), or not in "
                    "PATH; name it with --gnuplot PATH");
    return path;
}

static gboolean
templates_in(const char *dir)
{
    g_autofree char *probe = NULL;

    if (dir == NULL || *dir == '\0')
        return FALSE;
    probe = g_build_filename(dir, "timeline.gp", NULL);
    return g_file_test(probe, G_FILE_TEST_IS_REGULAR);
}

char *
fsim_plot_find_templates(const char *override, GError **error)
{
    g_autoptr(GPtrArray) tried = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    g_autofree char *joined = NULL;
    const char *env = g_getenv("FRAGSIM_PLOTS_DIR");

    if (override != NULL) {
        if (templates_in(override))
            return g_strdup(override);
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_TEMPLATES,
                    "%s: no gnuplot templates there (timeline.gp...)", override);
        return NULL;
    }
    if (env != NULL && *env != '\0') {
        if (templates_in(env))
            return g_strdup(env);
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_TEMPLATES,
                    "FRAGSIM_PLOTS_DIR=%s: no gnuplot templates there (timeline.gp...)", env);
        return NULL;
    }
    if (exe != NULL) {
        g_autofree char *bin = g_path_get_dirname(exe);

        g_ptr_array_add(tried, g_build_filename(bin, "..", "share", "fragsim", "plots", NULL));
    }
    g_ptr_array_add(tried, g_strdup(FSIM_PLOTS_INSTALL_DIR));
    g_ptr_array_add(tried, g_strdup(FSIM_PLOTS_SOURCE_DIR));
    for (guint i = 0; i < tried->len; i++) {
        if (templates_in(tried->pdata[i]))
            return g_strdup(tried->pdata[i]);
    }
    g_ptr_array_add(tried, NULL);
    joined = g_strjoinv(", ", (char **)tried->pdata);
    g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_TEMPLATES,
                "cannot find the gnuplot templates (timeline.gp...) in %s; set FRAGSIM_PLOTS_DIR",
                joined);
    return NULL;
}
/* ---- the plotter --------------------------------------------------------------------------- */

gboolean
fsim_plot_write_file(const Plotter *p, const char *name, const GString *contents, GError **error)
{
    g_autofree char *path = g_build_filename(p->out_dir, name, NULL);
    g_autoptr(GError) local_error = NULL;

    if (!g_file_set_contents(path, contents->str, (gssize)contents->len, &local_error)) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO, "%s", local_error->message);
        return FALSE;
    }
    return TRUE;
}

/* ---- entry point --------------------------------------------------------------------------- */

static void
plotter_clear(Plotter *p)
{
    g_clear_pointer(&p->gnuplot, g_free);
    g_clear_pointer(&p->templates, g_free);
    g_clear_pointer(&p->copied, g_hash_table_unref);
    g_clear_pointer(&p->jobs, g_array_unref);
    g_clear_pointer(&p->all_runs, g_ptr_array_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Plotter, plotter_clear)

/* Whether run @index of @group gets address maps under options->max_address_maps: the runs
 * that need the least (then by id), and PyTorch's default settings. */
static gboolean
address_map_wanted(const FsimPlotGroup *group, guint index, const FsimPlotOptions *options)
{
    const FsimStoredRun *run = group->runs->pdata[index];
    guint better = 0;

    if (options == NULL || options->max_address_maps == 0 ||
        group->runs->len <= options->max_address_maps)
        return TRUE;
    if (strcmp(run->policy, "caching") == 0 && *run->config == '\0')
        return TRUE;
    if (!run->has_metrics || run->metrics.needed_bytes < 0)
        return FALSE;
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *other = group->runs->pdata[i];

        if (i == index || !other->has_metrics || other->metrics.needed_bytes < 0)
            continue;
        if (other->metrics.needed_bytes < run->metrics.needed_bytes ||
            (other->metrics.needed_bytes == run->metrics.needed_bytes && other->id < run->id))
            better++;
    }
    return better < options->max_address_maps;
}

GPtrArray *
fsim_plot_render(FsimStore *store, GPtrArray *runs, const char *out_dir,
                 const FsimPlotOptions *options, GError **error)
{
    g_auto(Plotter) p = {0};
    g_autoptr(GPtrArray) groups = NULL;
    guint prepared = 0;

    g_return_val_if_fail(store != NULL && runs != NULL && out_dir != NULL, NULL);
    if (runs->len == 0) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_RUNS, "no run to plot");
        return NULL;
    }
    p.store = store;
    p.out_dir = out_dir;
    p.format = options != NULL ? options->format : FSIM_PLOT_PNG;
    p.gnuplot = fsim_plot_find_gnuplot(options != NULL ? options->gnuplot : NULL, error);
    if (p.gnuplot == NULL)
        return NULL;
    p.templates = fsim_plot_find_templates(options != NULL ? options->templates_dir : NULL, error);
    if (p.templates == NULL)
        return NULL;
    if (g_mkdir_with_parents(out_dir, 0755) != 0) {
        int saved = errno;

        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO,
                    "%s: cannot create the output directory: %s", out_dir, g_strerror(saved));
        return NULL;
    }
    p.options = options;
    p.copied = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    p.jobs = g_array_new(FALSE, TRUE, sizeof(PlotJob));
    g_array_set_clear_func(p.jobs, fsim_plot_job_clear);
    p.all_runs = fsim_store_runs(store, NULL, 0, error);
    if (p.all_runs == NULL)
        return NULL;
    groups = fsim_plot_group_runs(runs);
    for (guint i = 0; i < groups->len; i++) {
        const FsimPlotGroup *group = groups->pdata[i];
        g_autofree char *suffix =
            groups->len > 1 ? g_strdup_printf("-%u", group->number) : g_strdup("");
        GroupData g = {0};
        gboolean ok;

        g.suffix = suffix;
        for (guint j = 0; j < groups->len; j++) {
            const FsimPlotGroup *other = groups->pdata[j];

            g.multi_device |= other->trace_device != group->trace_device &&
                              strcmp(other->trace, group->trace) == 0;
        }
        ok = fsim_plot_group_data_load(&p, group, &g, error) &&
             fsim_plot_timelines(&p, &g, error) && fsim_plot_compare(&p, &g, error) &&
             fsim_plot_sizes(&p, &g, error);
        for (guint r = 0; ok && r < group->runs->len; r++) {
            ok = !address_map_wanted(group, r, options) || fsim_plot_address_map(&p, &g, r, error);
            /* Preparing is the first half of the work (drawing the second). */
            fsim_plot_progress(&p, ++prepared, 2 * runs->len);
        }
        fsim_plot_group_data_clear(&g);
        if (!ok)
            return NULL;
    }
    return fsim_plot_draw(&p, error);
}
