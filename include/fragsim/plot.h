/* SPDX-License-Identifier: MIT */
/*
 * fragsim: plots of stored runs with gnuplot, and the HTML report.
 *
 * Plots are drawn by gnuplot, found at run time (never linked): each plot is a template from
 * the templates in `plots/` run as `gnuplot -c TEMPLATE DATA OUT FORMAT ...` with an argument
 * vector, never through a shell.  The data files, a copy of each template and `plots.sh` (the exact
 * commands) are written next to the images, so any plot can be tweaked and drawn again by hand.
 *
 * Runs are plotted in groups: runs of the same trace, trace device and device are compared in
 * one `timeline`, `fragmentation`, `compare` and `sizes` plot; every run gets its own
 * `address-map`.  With one group the files are `timeline.png`...; with several, the group number
 * is appended (`timeline-2.png`).  docs/plots.md describes each plot.
 *
 * The templates are looked for, in this order, in: the directory named by the environment
 * variable FRAGSIM_PLOTS_DIR; `../share/fragsim/plots` next to the running binary (an
 * installation, wherever it was moved); the compiled-in installation directory; the source tree
 * the binary was built from.
 */
#pragma once

#include <glib.h>

#include "fragsim/store.h"
#include "fragsim/types.h"

G_BEGIN_DECLS

/**
 * FSIM_PLOT_ERROR:
 *
 * Errors of plotting.  Codes are #FsimPlotError.
 */
#define FSIM_PLOT_ERROR (fsim_plot_error_quark())
GQuark fsim_plot_error_quark(void);

/**
 * FsimPlotError:
 * @FSIM_PLOT_ERROR_FAILED: gnuplot failed; the message has its own.
 * @FSIM_PLOT_ERROR_NO_GNUPLOT: gnuplot is not installed (or --gnuplot names no program).
 * @FSIM_PLOT_ERROR_NO_TEMPLATES: the plot templates cannot be found.
 * @FSIM_PLOT_ERROR_NO_RUNS: nothing to plot: no run with data.
 * @FSIM_PLOT_ERROR_IO: the output directory or a file in it cannot be written.
 */
typedef enum {
    FSIM_PLOT_ERROR_FAILED,
    FSIM_PLOT_ERROR_NO_GNUPLOT,
    FSIM_PLOT_ERROR_NO_TEMPLATES,
    FSIM_PLOT_ERROR_NO_RUNS,
    FSIM_PLOT_ERROR_IO,
} FsimPlotError;

typedef enum {
    FSIM_PLOT_PNG,
    FSIM_PLOT_SVG,
} FsimPlotFormat;

/* Returns: `png` or `svg`. */
const char *fsim_plot_format_name(FsimPlotFormat format);

/* Sets *@out to the format named @name (`png` or `svg`, as fsim_plot_format_name() writes it).
 * Returns: %FALSE, leaving *@out alone, for any other name. */
gboolean fsim_plot_format_from_name(const char *name, FsimPlotFormat *out);

/**
 * FsimPlotOptions:
 * @gnuplot: (nullable): the gnuplot program to run; %NULL to look for `gnuplot` in PATH.
 * @templates_dir: (nullable): where the templates are; %NULL for the search described above.
 * @format: image format.
 * @progress: (nullable): called from the calling thread as plots are drawn (@done of @total).
 * @progress_data: its data.
 * @max_address_maps: when non-zero, at most this many runs of a group of comparable runs get
 *     address maps: those that need the least capacity, and PyTorch's default (`caching` with no
 *     settings) when the group has it.  A sweep's report sets it, where a map per run would cost
 *     minutes and say little.
 */
typedef struct {
    const char *gnuplot;
    const char *templates_dir;
    FsimPlotFormat format;
    void (*progress)(gpointer data, guint done, guint total);
    gpointer progress_data;
    guint max_address_maps;
} FsimPlotOptions;

/**
 * FsimPlotGroup:
 *
 * Runs compared in one plot: same trace, trace device and device; a snapshot's `recorded` run
 * (what the recording did, on the recording's own device) joins every group of its trace device.
 * @runs are borrowed from the array given to fsim_plot_group_runs().
 */
typedef struct {
    guint number; /* 1, 2, ... */
    const char *trace;
    const char *trace_format;
    uint32_t trace_device;
    const char *device;
    uint64_t capacity_bytes;
    GPtrArray *runs; /* FsimStoredRun*, by id */
} FsimPlotGroup;

void fsim_plot_group_free(FsimPlotGroup *group);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimPlotGroup, fsim_plot_group_free)

/**
 * fsim_plot_group_runs:
 * @runs: (element-type FsimStoredRun): runs with data.
 *
 * Returns: (transfer full) (element-type FsimPlotGroup): the groups, in the order of their first
 * run.
 */
GPtrArray *fsim_plot_group_runs(GPtrArray *runs);

/**
 * FsimPlotFile:
 *
 * One image written by fsim_plot_render(), with its data file; paths relative to the output
 * directory.
 */
typedef struct {
    char *kind;   /* `timeline`, `fragmentation`, `compare`, `address-map`, `sizes` */
    char *image;  /* `timeline.png` */
    char *data;   /* `samples.dat` */
    char *title;  /* a caption for humans */
    guint group;  /* FsimPlotGroup.number */
    int64_t run;  /* the run of an address map, else -1 */
    GArray *runs; /* int64_t: the runs it draws */
    char *moment; /* an address map's moment: `peak`, `oom-1`...; else NULL */
} FsimPlotFile;

void fsim_plot_file_free(FsimPlotFile *file);

/**
 * fsim_plot_select_runs:
 * @store: a store.
 * @ids: (nullable): run ids asked for (`--run`); %NULL for every run with data.
 * @error: %FSIM_STORE_ERROR_NO_RUN for an id not in the database, %FSIM_STORE_ERROR_INCOMPLETE
 *     for one without data (it names its status), %FSIM_PLOT_ERROR_NO_RUNS when nothing is left.
 *
 * Returns: (transfer full) (element-type FsimStoredRun): the runs to plot.
 */
GPtrArray *fsim_plot_select_runs(FsimStore *store, GArray *ids, GError **error);

/**
 * fsim_plot_render:
 * @store: the database the runs come from.
 * @runs: (element-type FsimStoredRun): runs with data (fsim_plot_select_runs()).
 * @out_dir: the output directory (created if missing).
 * @options: (nullable): options; %NULL for PNG and gnuplot from PATH.
 * @error: a plot or store error.
 *
 * Writes every plot of @runs into @out_dir, with `plots.sh` (the gnuplot commands that draw
 * them again) and `plots.json` (`[{"file", "kind", "runs": [ids], "title"}]`, one entry per
 * image).  An image is kept only once gnuplot succeeded; when it fails, the error carries
 * gnuplot's message and the command to rerun it.  An address map is drawn at each run's peak
 * (listed first) and at its first OOMs.
 *
 * Returns: (transfer full) (element-type FsimPlotFile) (nullable): the images written.
 */
GPtrArray *fsim_plot_render(FsimStore *store, GPtrArray *runs, const char *out_dir,
                            const FsimPlotOptions *options, GError **error);

/**
 * fsim_plot_find_gnuplot:
 * @override: (nullable): a program path or name given by the user.
 * @error: %FSIM_PLOT_ERROR_NO_GNUPLOT with an installation hint.
 *
 * Returns: (transfer full) (nullable): the absolute path of gnuplot.
 */
char *fsim_plot_find_gnuplot(const char *override, GError **error);

/**
 * fsim_plot_find_templates:
 * @override: (nullable): a directory given by the user.
 * @error: %FSIM_PLOT_ERROR_NO_TEMPLATES listing the places searched.
 *
 * Returns: (transfer full) (nullable): the directory holding `timeline.gp` and the others.
 */
char *fsim_plot_find_templates(const char *override, GError **error);

/**
 * fsim_plot_escape:
 * @text: user text (a trace name, a label).
 *
 * Escapes @text for gnuplot's enhanced text mode, where `^ _ @ & ~ { }` and `\` are markup:
 * each is preceded by a backslash, so `select_n` prints as written instead of subscripting `n`.
 * For strings that reach gnuplot as values (`-c` arguments), not as quoted literals in a script.
 *
 * Returns: (transfer full): the escaped text.
 */
char *fsim_plot_escape(const char *text);

/**
 * fsim_report_write:
 * @store: the database.
 * @runs: (element-type FsimStoredRun): the runs to report (fsim_plot_select_runs()).
 * @all_runs: (element-type FsimStoredRun) (nullable): every run of the database, to list the
 *     incomplete ones; %NULL to list none.
 * @out_dir: the output directory (created if missing).
 * @options: (nullable): plot options.
 * @warning: (out) (optional) (transfer full): set when the plots could not be drawn (gnuplot
 *     missing or failing); the report is then written without them.
 * @error: a store error, or %FSIM_PLOT_ERROR_IO.
 *
 * Writes `index.html` (a self-contained page: inline CSS, no script, no network) with, per
 * group, the trace summary, the device, the metric table per policy and the plots, which are
 * written next to it.  The page is written to a temporary file and renamed into place, so an
 * interrupted report never leaves a partial `index.html`.
 *
 * Returns: %FALSE with @error set on failure.
 */
gboolean fsim_report_write(FsimStore *store, GPtrArray *runs, GPtrArray *all_runs,
                           const char *out_dir, const FsimPlotOptions *options, char **warning,
                           GError **error);

G_END_DECLS
