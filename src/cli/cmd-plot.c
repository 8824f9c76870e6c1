/* SPDX-License-Identifier: MIT */
/*
 * fragsim plot --db FILE [--run IDS] -o DIR [--format png|svg] [--gnuplot PATH]
 * fragsim report --db FILE -o DIR [--run IDS] [--format png|svg] [--gnuplot PATH]
 *
 * The commands that draw stored runs with gnuplot; a progress bar shows on a terminal while the
 * plots are drawn.
 *
 * plot draws the standard plots: timeline, fragmentation, compare and sizes per group of
 * comparable runs, and address maps per run (at its peak and its OOMs).  The data files, the
 * templates, plots.sh (the commands) and plots.json (the list of images) are written next to the
 * images.
 *
 * report writes DIR/index.html, a self-contained page with the plots (drawn beside it), the
 * metric table per policy, the trace and the device of every group of comparable runs.  Without
 * gnuplot the page is written without plots, with a warning.
 */
#include <glib.h>

#include "fragsim/plot.h"
#include "fragsim/store.h"

#include "cli.h"

/* The options both commands take: `--db FILE` (required), `--run IDS`, `-o DIR` (required),
 * `--format png|svg` and `--gnuplot PATH`; @options is what the last two set.  Then what
 * plot_main() opened from them: the database, the runs selected (select_runs()) and, once
 * drawing reports progress, the progress bar. */
typedef struct {
    char *db_path;
    char *run_list;
    char *out_dir;
    char *format;
    char *gnuplot;
    FsimPlotOptions options;
    FsimStore *store;
    GPtrArray *runs; /* FsimStoredRun */
    GArray *ids;     /* the ids of --run; NULL without it */
    FsimProgress *progress;
} PlotArgs;

/* A command: its name, the usage line's parameter text, what `-o DIR` receives, the text after
 * the options in --help, and @draw: draws the selected runs with @args->options (whose progress
 * callback is set) and prints what it wrote, after plot_progress_end(); %FALSE with @error set. */
typedef struct {
    const char *name;
    const char *parameter;
    const char *out_help;
    const char *description;
    gboolean (*draw)(PlotArgs *args, GError **error);
} PlotCommand;

/* What the commands select (fsim_plot_select_runs()): the runs of @run_list (`--run`), or every
 * run with data, from the database @db_path, opened for reading into *@store; *@ids: the ids of
 * @run_list, NULL without it.  NULL with a usage error for a malformed @run_list, a store error,
 * or fsim_plot_select_runs()'s error. */
static GPtrArray *
select_runs(const char *db_path, const char *run_list, FsimStore **store, GArray **ids,
            GError **error)
{
    g_autoptr(GArray) selected = NULL;
    g_autoptr(FsimStore) opened = NULL;
    GPtrArray *runs;

    if (run_list != NULL && !fsim_store_parse_run_ids(run_list, &selected, error))
        return NULL;
    opened = fsim_store_open(db_path, FSIM_STORE_READ, NULL, error);
    if (opened == NULL)
        return NULL;
    runs = fsim_plot_select_runs(opened, selected, error);
    if (runs == NULL)
        return NULL;
    *store = g_steal_pointer(&opened);
    *ids = g_steal_pointer(&selected);
    return runs;
}

/* The bar counts thousandths: the work's total changes once the plots are known. */
/* FsimPlotOptions.progress: the bar appears on a terminal only (fsim_progress_new()). */
static void
plot_progress(gpointer data, guint done, guint total)
{
    PlotArgs *args = data;

    if (args->progress == NULL)
        args->progress = fsim_progress_new("plot", 1000);
    fsim_progress_update(args->progress, (uint64_t)done * 1000 / MAX(total, 1));
}

/* Erase the progress bar of @args, if any. */
static void
plot_progress_end(PlotArgs *args)
{
    g_clear_pointer(&args->progress, fsim_progress_free);
}

static int
plot_args_parse(const PlotCommand *command, PlotArgs *args, int *argc, char ***argv)
{
    GOptionEntry entries[] = {
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &args->db_path, "The results database (replay --db)",
         "FILE"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &args->out_dir, command->out_help, "DIR"},
        {"run", 0, 0, G_OPTION_ARG_STRING, &args->run_list,
         "Only these runs, e.g. 3 or 1,4,7 or 2-5 (default: every complete run)", "IDS"},
        {"format", 0, 0, G_OPTION_ARG_STRING, &args->format, "Images: png (default) or svg",
         "FORMAT"},
        {"gnuplot", 0, 0, G_OPTION_ARG_FILENAME, &args->gnuplot,
         "The gnuplot program (default: gnuplot from PATH)", "PATH"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };

    if (!fsim_cli_parse_args(command->name, command->parameter, entries, command->description, NULL,
                             argc, argv))
        return FSIM_EXIT_USAGE;
    if (args->db_path == NULL)
        return fsim_cli_usage_error(command->name, "missing --db FILE");
    if (args->out_dir == NULL)
        return fsim_cli_usage_error(command->name, "missing -o DIR");
    if (args->format != NULL && !fsim_plot_format_from_name(args->format, &args->options.format))
        return fsim_cli_usage_error(command->name, "--format '%s': expected png or svg",
                                    args->format);
    args->options.gnuplot = args->gnuplot;
    return FSIM_EXIT_OK;
}

static void
plot_args_clear(PlotArgs *args)
{
    char **strings[] = {&args->db_path, &args->run_list, &args->out_dir, &args->format,
                        &args->gnuplot};

    for (gsize i = 0; i < G_N_ELEMENTS(strings); i++)
        g_clear_pointer(strings[i], g_free);
    args->options.gnuplot = NULL;
    plot_progress_end(args);
    g_clear_pointer(&args->runs, g_ptr_array_unref);
    g_clear_pointer(&args->ids, g_array_unref);
    g_clear_pointer(&args->store, fsim_store_close);
}

static int
plot_run(const PlotCommand *command, PlotArgs *args)
{
    GError *error = NULL;

    args->runs = select_runs(args->db_path, args->run_list, &args->store, &args->ids, &error);
    if (args->runs == NULL)
        return fsim_cli_fail(command->name, error);
    args->options.progress = plot_progress;
    args->options.progress_data = args;
    if (!command->draw(args, &error)) {
        plot_progress_end(args);
        return fsim_cli_fail(command->name, error);
    }
    return FSIM_EXIT_OK;
}

/* Parses the command's options, selects the runs and calls @command->draw.  Returns: the exit
 * status. */
static int
plot_main(const PlotCommand *command, int argc, char **argv)
{
    PlotArgs args = {0};
    int status = plot_args_parse(command, &args, &argc, &argv);

    if (status == FSIM_EXIT_OK)
        status = plot_run(command, &args);
    plot_args_clear(&args);
    return status;
}

static gboolean
plot_draw(PlotArgs *args, GError **error)
{
    g_autoptr(GPtrArray) files =
        fsim_plot_render(args->store, args->runs, args->out_dir, &args->options, error);

    plot_progress_end(args);
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

static gboolean
report_draw(PlotArgs *args, GError **error)
{
    g_autoptr(GPtrArray) all_runs = fsim_store_runs(args->store, NULL, 0, error);
    g_autofree char *warning = NULL;
    g_autofree char *index = NULL;
    gboolean ok;

    if (all_runs == NULL)
        return FALSE;
    ok = fsim_report_write(args->store, args->runs, args->ids == NULL ? all_runs : NULL,
                           args->out_dir, &args->options, &warning, error);
    plot_progress_end(args);
    if (!ok)
        return FALSE;
    if (warning != NULL)
        g_printerr("fragsim report: warning: the report has no plots: %s\n", warning);
    index = g_build_filename(args->out_dir, "index.html", NULL);
    g_print("%s  report of %u runs (open it in a browser)\n", index, args->runs->len);
    return TRUE;
}

/* clang-format off */
static const PlotCommand commands[] = {
    {"plot", "- plot stored runs with gnuplot",
     "Directory for the images, their data and plots.sh (created if missing)",
     "Plots: timeline, fragmentation, compare and sizes for each trace and device, and an\n"
     "address map for each run (docs/plots.md).  Templates come from FRAGSIM_PLOTS_DIR when set.\n"
     "Example: fragsim plot --db results.db -o plots",
     plot_draw},
    {"report", "- write an HTML report of stored runs",
     "Directory for index.html and its plots (created if missing)",
     "The page has no script and loads nothing from the network; it references only the\n"
     "images written beside it.  Example: fragsim report --db results.db -o report",
     report_draw},
};
/* clang-format on */

int
fsim_cmd_plot(int argc, char **argv)
{
    return plot_main(&commands[0], argc, argv);
}

int
fsim_cmd_report(int argc, char **argv)
{
    return plot_main(&commands[1], argc, argv);
}
