/* SPDX-License-Identifier: MIT */
/*
 * fragsim report --db FILE -o DIR [--run IDS] [--format png|svg] [--gnuplot PATH]
 *
 * Writes DIR/index.html, a self-contained page with the plots (drawn beside it), the metric
 * table per policy, the trace and the device of every group of comparable runs.  Without
 * gnuplot the page is written without plots, with a warning.
 */
#include <glib.h>

#include "fragsim/plot.h"
#include "fragsim/store.h"

#include "cli.h"

int
fsim_cmd_report(int argc, char **argv)
{
    g_autofree char *db_path = NULL;
    g_autofree char *run_list = NULL;
    g_autofree char *out_dir = NULL;
    g_autofree char *format = NULL;
    g_autofree char *gnuplot = NULL;
    GOptionEntry entries[] = {
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &db_path, "The results database (replay --db)", "FILE"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &out_dir,
         "Directory for index.html and its plots (created if missing)", "DIR"},
        {"run", 0, 0, G_OPTION_ARG_STRING, &run_list,
         "Only these runs, e.g. 3 or 1,4,7 or 2-5 (default: every complete run)", "IDS"},
        {"format", 0, 0, G_OPTION_ARG_STRING, &format, "Plot images: png (default) or svg",
         "FORMAT"},
        {"gnuplot", 0, 0, G_OPTION_ARG_FILENAME, &gnuplot,
         "The gnuplot program (default: gnuplot from PATH)", "PATH"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("- write an HTML report of stored runs");
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GArray) ids = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) all_runs = NULL;
    g_autofree char *warning = NULL;
    g_autofree char *index = NULL;
    GError *error = NULL;
    FsimPlotOptions options = {0};

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context, "The page has no script and loads nothing from the network; it references only "
                 "the\nimages written beside it.  Example: fragsim report --db results.db -o "
                 "report");
    if (!fsim_cli_parse(context, "report", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc != 1)
        return fsim_cli_usage_error("report", "unexpected argument '%s'", argv[1]);
    if (db_path == NULL)
        return fsim_cli_usage_error("report", "missing --db FILE");
    if (out_dir == NULL)
        return fsim_cli_usage_error("report", "missing -o DIR");
    if (format != NULL && !fsim_plot_format_from_name(format, &options.format))
        return fsim_cli_usage_error("report", "--format '%s': expected png or svg", format);
    options.gnuplot = gnuplot;
    runs = fsim_cli_select_runs(db_path, run_list, &store, &ids, &error);
    if (runs == NULL)
        return fsim_cli_fail("report", error);
    all_runs = fsim_store_runs(store, NULL, 0, &error);
    if (all_runs == NULL)
        return fsim_cli_fail("report", error);
    if (!fsim_report_write(store, runs, ids == NULL ? all_runs : NULL, out_dir, &options, &warning,
                           &error))
        return fsim_cli_fail("report", error);
    if (warning != NULL)
        g_printerr("fragsim report: warning: the report has no plots: %s\n", warning);
    index = g_build_filename(out_dir, "index.html", NULL);
    g_print("%s  report of %u runs (open it in a browser)\n", index, runs->len);
    return FSIM_EXIT_OK;
}
