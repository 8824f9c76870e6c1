/* SPDX-License-Identifier: MIT */
/*
 * fragsim plot --db FILE [--run IDS] -o DIR [--format png|svg] [--gnuplot PATH]
 *
 * Draws the standard plots of stored runs with gnuplot: timeline, fragmentation, compare and
 * sizes per group of comparable runs, and an address map per run.  The data files, the
 * templates and plots.sh (the commands) are written next to the images.
 */
#include <glib.h>

#include "fragsim/plot.h"
#include "fragsim/store.h"

#include "cli.h"

int
fsim_cmd_plot(int argc, char **argv)
{
    g_autofree char *db_path = NULL;
    g_autofree char *run_list = NULL;
    g_autofree char *out_dir = NULL;
    g_autofree char *format = NULL;
    g_autofree char *gnuplot = NULL;
    GOptionEntry entries[] = {
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &db_path, "The results database (replay --db)", "FILE"},
        {"run", 0, 0, G_OPTION_ARG_STRING, &run_list,
         "Only these runs, e.g. 3 or 1,4,7 or 2-5 (default: every complete run)", "IDS"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &out_dir,
         "Directory for the images, their data and plots.sh (created if missing)", "DIR"},
        {"format", 0, 0, G_OPTION_ARG_STRING, &format, "png (default) or svg", "FORMAT"},
        {"gnuplot", 0, 0, G_OPTION_ARG_FILENAME, &gnuplot,
         "The gnuplot program (default: gnuplot from PATH)", "PATH"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context = g_option_context_new("- plot stored runs with gnuplot");
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GArray) ids = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) files = NULL;
    GError *error = NULL;
    FsimPlotOptions options = {0};

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context, "Plots: timeline, fragmentation, compare and sizes for each trace and device, "
                 "and an\naddress map for each run (docs/plots.md).  Templates come from "
                 "FRAGSIM_PLOTS_DIR when set.\n"
                 "Example: fragsim plot --db results.db -o plots");
    if (!fsim_cli_parse(context, "plot", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc != 1)
        return fsim_cli_usage_error("plot", "unexpected argument '%s'", argv[1]);
    if (db_path == NULL)
        return fsim_cli_usage_error("plot", "missing --db FILE");
    if (out_dir == NULL)
        return fsim_cli_usage_error("plot", "missing -o DIR");
    if (format != NULL && !fsim_plot_format_from_name(format, &options.format))
        return fsim_cli_fail("plot", g_error_new(FSIM_ERROR, FSIM_ERROR_USAGE,
                                                 "--format '%s': expected png or svg", format));
    options.gnuplot = gnuplot;
    runs = fsim_cli_select_runs(db_path, run_list, &store, &ids, &error);
    if (runs == NULL)
        return fsim_cli_fail("plot", error);
    files = fsim_plot_render(store, runs, out_dir, &options, &error);
    if (files == NULL)
        return fsim_cli_fail("plot", error);
    for (guint i = 0; i < files->len; i++) {
        const FsimPlotFile *file = files->pdata[i];
        g_autofree char *path = g_build_filename(out_dir, file->image, NULL);

        g_print("%s  %s\n", path, file->title);
    }
    g_print("%u plots of %u runs in %s (data files and plots.sh beside them)\n", files->len,
            runs->len, out_dir);
    return FSIM_EXIT_OK;
}
