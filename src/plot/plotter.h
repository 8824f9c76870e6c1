/* SPDX-License-Identifier: MIT */
/*
 * The plotter's private header: what the files of src/plot/ that draw with gnuplot share.
 *
 *   gnuplot.c           finding gnuplot and the templates, writing files, running gnuplot,
 *                       plots.sh, the entry point fsim_plot_render()
 *   plot-runs.c         selecting stored runs and grouping them (one group per trace and device)
 *   plot-data.c         axes and units, colours, a group's samples and OOMs, its data files
 *   plot-charts.c       the timeline, comparison and size-histogram plots
 *   plot-address-map.c  the address map of each run
 */
#pragma once

#include <glib.h>

#include "fragsim/plot.h"
#include "fragsim/store.h"

G_BEGIN_DECLS

typedef struct {
    gboolean use_time; /* else event index */
    double divisor;    /* ns per unit */
    const char *label;
    double start, end; /* in axis units */
} XAxis;

typedef struct {
    double divisor;
    const char *name;
} MemUnit;

typedef struct {
    FsimStore *store;
    const char *out_dir;
    char *gnuplot;
    char *templates;
    FsimPlotFormat format;
    GString *script; /* plots.sh */
    GHashTable *copied;
    GPtrArray *files;
} Plotter;

typedef struct {
    const FsimPlotGroup *group;
    const char *suffix; /* "" or "-N" */
    GPtrArray *samples; /* GArray of FsimStoredSample per run */
    GPtrArray *ooms;    /* GArray of FsimOomRecord per run */
    GArray *colours;    /* const char * per run */
    XAxis x;
    MemUnit unit;
    char *trace_name;  /* basename, escaped */
    char *device_name; /* escaped */
} GroupData;

#define RUN_COLOUR(g, r) g_array_index((g)->colours, const char *, (r))

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

/* ---- plot-charts.c: the timeline, comparison and size plots ---------------------------------- */

gboolean fsim_plot_timelines(Plotter *p, const GroupData *g, GError **error);

/* The plots of a group: timelines of each run, the comparison of all, the request sizes. */
gboolean fsim_plot_compare(Plotter *p, const GroupData *g, GError **error);

gboolean fsim_plot_sizes(Plotter *p, const GroupData *g, GError **error);

/* ---- plot-address-map.c: address maps -------------------------------------------------------- */

/* The address map of run @index of the group. */
gboolean fsim_plot_address_map(Plotter *p, const GroupData *g, guint index, GError **error);

/* ---- gnuplot.c: files and gnuplot runs ------------------------------------------------------- */

/*
 * Run `gnuplot -c KIND.gp DATA IMAGE FORMAT ARGS...` in the output directory and record the
 * command in plots.sh and the image in the result.
 */
gboolean fsim_plot_run_gnuplot(Plotter *p, const char *kind, const char *data, const char *image,
                               const char *title, guint group, int64_t run, const char *const *args,
                               GError **error);

/* Write @contents to @name in the output directory. */
gboolean fsim_plot_write_file(const Plotter *p, const char *name, const GString *contents,
                              GError **error);

G_END_DECLS
