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

static gboolean
plot_draw(FsimCliPlotArgs *args, GError **error)
{
    g_autoptr(GPtrArray) files =
        fsim_plot_render(args->store, args->runs, args->out_dir, &args->options, error);

    fsim_cli_plot_progress_end(args);
    if (files == NULL)
        return FALSE;
    for (guint i = 0; i < files->len; i++) {
        const FsimPlotFile *file = files->pdata[i];
        g_autofree char *path = g_build_filename(args->out_dir, file->image, NULL);

        g_print("%s  %s\n", path, file->title);
    }
    g_print("%u plots of %u runs in %s (data files and plots.sh beside them)\n", files->len,
            args->runs->len, args->out_dir);
    return TRUE;
}

int
fsim_cmd_plot(int argc, char **argv)
{
    static const FsimCliPlotCommand command = {
        .name = "plot",
        .parameter = "- plot stored runs with gnuplot",
        .out_help = "Directory for the images, their data and plots.sh (created if missing)",
        .description = "Plots: timeline, fragmentation, compare and sizes for each trace and "
                       "device, and an\naddress map for each run (docs/plots.md).  Templates "
                       "come from FRAGSIM_PLOTS_DIR when set.\n"
                       "Example: fragsim plot --db results.db -o plots",
        .draw = plot_draw,
    };

    return fsim_cli_plot_main(&command, argc, argv);
}
