/* SPDX-License-Identifier: MIT */
/*
 * fragsim report --db FILE -o DIR [--run IDS] [--format png|svg] [--gnuplot PATH]
 *
 * Writes DIR/index.html, a self-contained page with the plots (drawn beside it), the metric
 * table per policy, the trace and the device of every group of comparable runs.  Without
 * gnuplot the page is written without plots, with a warning.  A progress bar shows on a
 * terminal while the plots are drawn.
 */
#include <glib.h>

#include "fragsim/plot.h"
#include "fragsim/store.h"

#include "cli.h"

static int
report_run(FsimCliPlotArgs *args)
{
    g_autoptr(FsimProgress) progress = NULL;
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GArray) ids = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) all_runs = NULL;
    g_autofree char *warning = NULL;
    g_autofree char *index = NULL;
    GError *error = NULL;
    gboolean ok;

    runs = fsim_cli_select_runs(args->db_path, args->run_list, &store, &ids, &error);
    if (runs == NULL)
        return fsim_cli_fail("report", error);
    all_runs = fsim_store_runs(store, NULL, 0, &error);
    if (all_runs == NULL)
        return fsim_cli_fail("report", error);
    args->options.progress = fsim_cli_plot_progress;
    args->options.progress_data = &progress;
    ok = fsim_report_write(store, runs, ids == NULL ? all_runs : NULL, args->out_dir,
                           &args->options, &warning, &error);
    g_clear_pointer(&progress, fsim_progress_free);
    if (!ok)
        return fsim_cli_fail("report", error);
    if (warning != NULL)
        g_printerr("fragsim report: warning: the report has no plots: %s\n", warning);
    index = g_build_filename(args->out_dir, "index.html", NULL);
    g_print("%s  report of %u runs (open it in a browser)\n", index, runs->len);
    return FSIM_EXIT_OK;
}

int
fsim_cmd_report(int argc, char **argv)
{
    g_autoptr(GOptionContext) context =
        g_option_context_new("- write an HTML report of stored runs");
    FsimCliPlotArgs args;
    int status;

    fsim_cli_plot_args_add(context, &args,
                           "Directory for index.html and its plots (created if missing)");
    g_option_context_set_description(
        context, "The page has no script and loads nothing from the network; it references only "
                 "the\nimages written beside it.  Example: fragsim report --db results.db -o "
                 "report");
    status = fsim_cli_plot_args_parse(context, "report", &args, &argc, &argv);
    if (status == FSIM_EXIT_OK)
        status = report_run(&args);
    fsim_cli_plot_args_clear(&args);
    return status;
}
