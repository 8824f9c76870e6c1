/* SPDX-License-Identifier: MIT */
/*
 * The HTML report's parts, shared by its files: report.c (the page, its style, its sections),
 * report-answer.c (what each comparison leads with: the setting to use and why, the capacity
 * each run needs, where the memory goes at the peak, warm-up against steady state) and
 * report-details.c (the trace, the device, every metric, the plots).
 */
#pragma once

#include <glib.h>

#include "fragsim/plot.h"
#include "fragsim/store.h"

G_BEGIN_DECLS

/* What every section may read: the database, the runs, the plots drawn, tune's advice. */
typedef struct {
    FsimStore *store;
    GPtrArray *runs;         /* FsimStoredRun: the runs reported */
    GPtrArray *all_runs;     /* FsimStoredRun (nullable): every run, to list the incomplete ones */
    GPtrArray *groups;       /* FsimPlotGroup */
    GPtrArray *files;        /* FsimPlotFile (nullable): no plots */
    GArray *recommendations; /* FsimStoredRecommendation: `tune`'s, empty when it never ran */
    const char *out_dir;     /* where the page and its plots go */
    const FsimPlotOptions *options; /* nullable: the plot options */
} ReportContext;

/* One section of the page, in order; a part of fragsim adds its own with a line in report.c. */
typedef gboolean (*ReportSection)(GString *out, const ReportContext *ctx, GError **error);

/* HTML-escaped text. */
void report_esc(GString *out, const char *text);
void report_escf(GString *out, const char *format, ...) G_GNUC_PRINTF(2, 3);
char *report_format_time_ns(uint64_t ns);
/* Opens a section of the page: <section class="group" id="@id">, its heading @title and a
 * paragraph @note (of class @note_class when not NULL); all three are HTML already. */
void report_begin_section(GString *out, const char *id, const char *title, const char *note_class,
                          const char *note);
/* A right-aligned numeric cell. */
void report_td_num(GString *out, const char *text);

/* What runs are ranked by: needed_bytes, or peak reserved where it is unknown. */
uint64_t report_run_key(const FsimStoredRun *run);
/* Whether a run is the recording itself (a snapshot's `recorded` run). */
gboolean report_is_recorded(const FsimStoredRun *run);
/* The run's label, with its config when the label does not show it. */
char *report_run_name(const FsimStoredRun *run);

/* report-answer.c: the lead of a comparison. */
gboolean report_write_answer(GString *out, const ReportContext *ctx, const FsimPlotGroup *group,
                             GError **error);
/* The one sentence at the top of the page for @group (plain text, not escaped). */
char *report_answer_sentence(const ReportContext *ctx, const FsimPlotGroup *group, GError **error);

/* report-pools.c: the memory by pool of runs with private pools (nothing without). */
gboolean report_write_pools(GString *out, const ReportContext *ctx, const FsimPlotGroup *group,
                            GError **error);

/* report-details.c: the rest of a comparison, and the runs without results. */
gboolean report_write_details(GString *out, const ReportContext *ctx, const FsimPlotGroup *group,
                              GError **error);
void report_write_figure(GString *out, const FsimPlotFile *file, const char *caption);
const FsimPlotFile *report_find_plot(GPtrArray *files, guint group, const char *kind, int64_t run);
gboolean report_write_incomplete(GString *out, const ReportContext *ctx, GError **error);

G_END_DECLS
