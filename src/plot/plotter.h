/* SPDX-License-Identifier: MIT */
/*
 * The plotter's private header: what the files of src/plot/ that draw with gnuplot share.
 *
 *   gnuplot.c           finding gnuplot and the templates, writing files, the entry point
 *                       fsim_plot_render()
 *   plot-batch.c        the queue of plots drawn by a few gnuplot processes, plots.sh, plots.json
 *   plot-runs.c         selecting stored runs and grouping them (one group per trace and device)
 *   plot-data.c         axes and units, colours, titles, a group's samples and OOMs, data files
 *   plot-charts.c       the timeline, comparison and size-histogram plots
 *   plot-moment.c       a run's memory at one moment, classified (live, releasable, pinned)
 *   plot-address-map.c  the address maps of each run, at its peak and at its OOMs
 *
 * Plots are queued while their data files are written, then drawn together: each gnuplot
 * process runs a script of `call "KIND.gp" ARGS...` lines (one process start instead of one per
 * plot), several processes at once.  plots.sh keeps one `gnuplot -c KIND.gp ARGS...` line per
 * plot, which draws the same image.
 */
#pragma once

#include <glib.h>

#include "fragsim/plot.h"
#include "fragsim/store.h"

G_BEGIN_DECLS

typedef struct {
    gboolean use_time; /* else event index */
    FsimTime origin;   /* the trace's first time: x = 0 */
    double divisor;    /* ns per unit */
    const char *label;
    const char *unit;  /* "s", "ms", "µs" or "" for event indices */
    double start, end; /* in axis units */
} XAxis;

typedef struct {
    double divisor;
    const char *name;
} MemUnit;

/* A plot waiting to be drawn: the file it becomes (title on one line), and the template's
 * arguments after DATA OUT FORMAT. */
typedef struct {
    FsimPlotFile *file; /* NULL once fsim_plot_draw() has handed it over */
    char **args;
} PlotJob;

typedef struct {
    FsimStore *store;
    const char *out_dir;
    char *gnuplot;
    char *templates;
    FsimPlotFormat format;
    const FsimPlotOptions *options; /* nullable */
    GHashTable *copied;
    GArray *jobs;        /* PlotJob */
    GPtrArray *all_runs; /* every run of the database (for failed runs of a group), nullable */
} Plotter;

/* What a group's data holds of one of its runs. */
typedef struct {
    GArray *samples;    /* FsimStoredSample */
    GArray *ooms;       /* FsimOomRecord */
    const char *colour; /* "#rrggbb" */
} GroupRun;

typedef struct {
    const FsimPlotGroup *group;
    const char *suffix; /* "" or "-N" */
    GArray *runs;       /* GroupRun, one per run of the group, in its order */
    XAxis x;
    MemUnit unit;
    char *where;           /* "TRACE, trace device N, on DEVICE (CAPACITY)" */
    gboolean multi_device; /* other groups plot other devices of the same trace */
} GroupData;

#define GROUP_RUN(g, r) (&g_array_index((g)->runs, GroupRun, (r)))

/* ---- plot-data.c: units, colours, a group's data and its data files -------------------------- */

/* The image of plot @stem of the group, in the plotter's format. */
char *fsim_plot_image_name(const Plotter *p, const GroupData *g, const char *stem);

/* ooms.dat: x, reserved at the OOM, the run's colour; "" when there is none. */
gboolean fsim_plot_write_ooms(const Plotter *p, const GroupData *g, const char *name, guint *count,
                              GError **error);

/* "#rrggbb" as 0xrrggbb. */
guint32 fsim_plot_colour_value(const char *colour);

/* The x of an event at @time (@event_index) on @axis. */
double fsim_plot_x_of(const XAxis *axis, FsimTime time, int64_t event_index);

/* "STEM-SUFFIX.EXT": a file of the group. */
char *fsim_plot_group_file(const GroupData *g, const char *stem, const char *ext);

/* The legend label of @run: its label (policy and config), and its id when that repeats in the
 * group. */
char *fsim_plot_run_label(const FsimPlotGroup *group, const FsimStoredRun *run);

/* samples.dat: one block per run, used by the timeline and the fragmentation plots. */
gboolean fsim_plot_write_samples(const Plotter *p, const GroupData *g, const char *name,
                                 GError **error);

/* Load the samples and OOMs of @group's runs, choose its axes, units and colours. */
gboolean fsim_plot_group_data_load(Plotter *p, const FsimPlotGroup *group, GroupData *g,
                                   GError **error);

/* A string for a data file: double-quoted, with gnuplot's backslash escapes. */
void fsim_plot_quoted(GString *out, const char *text);

/* The runs' colours as a gnuplot argument: "#rrggbb #rrggbb ...". */
char *fsim_plot_colour_list(const GroupData *g);

/* Free what fsim_plot_group_data_load() loaded. */
void fsim_plot_group_data_clear(GroupData *g);

/* Append @value to a data file (C locale, 7 significant digits). */
void fsim_plot_num(GString *out, double value);

/* GiB, MiB or KiB: the unit of an axis up to @max_bytes. */
MemUnit fsim_plot_mem_unit_for(uint64_t max_bytes);

/* Characters per title line on the standard canvas (1200 pixels). */
#define FSIM_PLOT_TITLE_WIDTH 120

/*
 * A plot title, plain text: @what on the first line, then the group's trace, trace device (when
 * it matters) and device, then @run's id and label (or, for a group plot, the runs' labels when
 * they fit on two lines).  Templates get it wrapped and escaped (plot-charts.c).
 */
char *fsim_plot_title(const GroupData *g, const char *what, const FsimStoredRun *run);

/* @title wrapped to @width characters a line and escaped for enhanced text. */
char *fsim_plot_shown_title(const char *title, guint width);

/* Wrap @text (one line) at spaces and ", " to lines of at most @width characters. */
char *fsim_plot_wrap(const char *text, guint width);

/* ---- plot-charts.c: the timeline, comparison and size plots ---------------------------------- */

gboolean fsim_plot_timelines(Plotter *p, const GroupData *g, GError **error);

/* The plots of a group: timelines of each run, the comparison of all, the request sizes. */
gboolean fsim_plot_compare(Plotter *p, const GroupData *g, GError **error);

gboolean fsim_plot_sizes(Plotter *p, const GroupData *g, GError **error);

/* ---- plot-moment.c: the memory of a run at one moment ---------------------------------------- */

typedef enum {
    FSIM_MAP_LIVE,       /* requested by a live block */
    FSIM_MAP_ROUNDING,   /* the rest of a live block */
    FSIM_MAP_RELEASABLE, /* free, in a row without live bytes */
    FSIM_MAP_PINNED,     /* free, sharing its row with a live block */
} FsimMapClass;

typedef struct {
    uint64_t offset; /* from the row's start */
    uint64_t size;
    FsimMapClass cls;
} FsimMapPiece;

/* A segment, or a page of mapped memory (@page). */
typedef struct {
    FsimAddr addr;
    uint64_t size;
    gboolean page;
    uint64_t live, rounding, releasable, pinned;
    guint first_piece, n_pieces; /* in FsimPlotMoment.pieces, by offset */
} FsimMapRow;

/* A live block and the free bytes charged to it. */
typedef struct {
    FsimAddr addr;
    uint64_t size;
    uint64_t pinned;
} FsimMapPin;

typedef struct {
    int64_t event;  /* the state after this event; -1: at trace start */
    GArray *rows;   /* FsimMapRow, by address */
    GArray *pieces; /* FsimMapPiece */
    GArray *pins;   /* FsimMapPin, the most pinned first; only blocks that pin something */
    uint64_t reserved, live, rounding, releasable, pinned;
} FsimPlotMoment;

/*
 * The memory held after @event, from a run's stored segment actions (fsim_store_segments()) and
 * block lifetimes (fsim_store_blocks()), classified (see plot-moment.c).  @granularity is the
 * device's page size, for mapped memory outside a known reservation; @never_releases counts
 * every free byte as pinned.
 */
FsimPlotMoment *fsim_plot_moment_new(const GArray *actions, const GArray *blocks, int64_t event,
                                     uint64_t granularity, gboolean never_releases);
void fsim_plot_moment_free(FsimPlotMoment *moment);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimPlotMoment, fsim_plot_moment_free)

/* The first event after which the run held the most memory (from its device actions; from its
 * @samples when it has none); -1 when that is the trace's start. */
int64_t fsim_plot_peak_event(const GArray *actions, const GArray *samples);

/* ---- plot-address-map.c: address maps -------------------------------------------------------- */

/* The address maps of run @index of the group: at its peak and at its first OOMs. */
gboolean fsim_plot_address_map(Plotter *p, const GroupData *g, guint index, GError **error);

/* ---- plot-batch.c: drawing the queued plots -------------------------------------------------- */

/*
 * Queue `gnuplot -c KIND.gp DATA IMAGE FORMAT ARGS...` (drawn by fsim_plot_draw()).  @run is the
 * run of a per-run plot (-1 for a group plot, which draws the group's runs).
 */
gboolean fsim_plot_run_gnuplot(Plotter *p, const char *kind, const char *data, const char *image,
                               const char *title, const GroupData *g, int64_t run,
                               const char *const *args, GError **error);

/* Draw every queued plot, write plots.sh and plots.json; returns the images (FsimPlotFile). */
GPtrArray *fsim_plot_draw(Plotter *p, GError **error);

/* Free what a queued plot holds (a clear function of Plotter.jobs). */
void fsim_plot_job_clear(gpointer data);

/* Tell the caller's progress callback, if any. */
void fsim_plot_progress(const Plotter *p, guint done, guint total);

/* Write @contents to @name in the output directory. */
gboolean fsim_plot_write_file(const Plotter *p, const char *name, const GString *contents,
                              GError **error);

G_END_DECLS
