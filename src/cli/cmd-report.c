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

static gboolean
report_draw(FsimCliPlotArgs *args, GError **error)
{
    g_autoptr(GPtrArray) all_runs = fsim_store_runs(args->store, NULL, 0, error);
    g_autofree char *warning = NULL;
    g_autofree char *index = NULL;
    gboolean ok;

    if (all_runs == NULL)
        return FALSE;
    ok = fsim_report_write(args->store, args->runs, args->ids == NULL ? all_runs : NULL,
                           args->out_dir, &args->options, &warning, error);
    fsim_cli_plot_progress_end(args);
    if (!ok)
        return FALSE;
    if (warning != NULL)
        g_printerr("fragsim report: warning: the report has no plots: %s\n", warning);
    index = g_build_filename(args->out_dir, "index.html", NULL);
    g_print("%s  report of %u runs (open it in a browser)\n", index, args->runs->len);
    return TRUE;
}

int
fsim_cmd_report(int argc, char **argv)
{
    static const FsimCliPlotCommand command = {
        .name = "report",
        .parameter = "- write an HTML report of stored runs",
        .out_help = "Directory for index.html and its plots (created if missing)",
        .description = "The page has no script and loads nothing from the network; it references "
                       "only the\nimages written beside it.  Example: fragsim report --db "
                       "results.db -o report",
        .draw = report_draw,
    };

    return fsim_cli_plot_main(&command, argc, argv);
}
