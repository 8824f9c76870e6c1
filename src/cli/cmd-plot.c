/* SPDX-License-Identifier: MIT */
/*
 * fragsim plot --db FILE [--run IDS] -o DIR [--format png|svg] [--gnuplot PATH]
 *
 * Draws the standard plots of stored runs with gnuplot: timeline, fragmentation, compare and
 * sizes per group of comparable runs, and address maps per run (at its peak and its OOMs).  The
 * data files, the templates, plots.sh (the commands) and plots.json (the list of images) are
 * written next to the images.  A progress bar shows on a terminal.
 */
#include <glib.h>

#include "fragsim/plot.h"
#include "fragsim/store.h"

#include "cli.h"

static int
plot_run(FsimCliPlotArgs *args)
{
    g_autoptr(FsimProgress) progress = NULL;
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GArray) ids = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) files = NULL;
    GError *error = NULL;

    runs = fsim_cli_select_runs(args->db_path, args->run_list, &store, &ids, &error);
    if (runs == NULL)
        return fsim_cli_fail("plot", error);
    args->options.progress = fsim_cli_plot_progress;
    args->options.progress_data = &progress;
    files = fsim_plot_render(store, runs, args->out_dir, &args->options, &error);
    g_clear_pointer(&progress, fsim_progress_free);
    if (files == NULL)
        return fsim_cli_fail("plot", error);
    for (guint i = 0; i < files->len; i++) {
        const FsimPlotFile *file = files->pdata[i];
        g_autofree char *path = g_build_filename(args->out_dir, file->image, NULL);

        g_print("%s  %s\n", path, file->title);
    }
    g_print("%u plots of %u runs in %s (data files and plots.sh beside them)\n", files->len,
            runs->len, args->out_dir);
    return FSIM_EXIT_OK;
}

int
fsim_cmd_plot(int argc, char **argv)
{
    g_autoptr(GOptionContext) context = g_option_context_new("- plot stored runs with gnuplot");
    FsimCliPlotArgs args;
    int status;

    fsim_cli_plot_args_add(
        context, &args, "Directory for the images, their data and plots.sh (created if missing)");
    g_option_context_set_description(
        context, "Plots: timeline, fragmentation, compare and sizes for each trace and device, "
                 "and an\naddress map for each run (docs/plots.md).  Templates come from "
                 "FRAGSIM_PLOTS_DIR when set.\n"
                 "Example: fragsim plot --db results.db -o plots");
    status = fsim_cli_plot_args_parse(context, "plot", &args, &argc, &argv);
    if (status == FSIM_EXIT_OK)
        status = plot_run(&args);
    fsim_cli_plot_args_clear(&args);
    return status;
}
