/* SPDX-License-Identifier: MIT */
/*
 * The report's section on sweeps (report-sweep.c), called by report.c.
 */
#pragma once

#include <glib.h>

#include "fragsim/plot.h"
#include "fragsim/store.h"

#include "report-private.h"

G_BEGIN_DECLS

/**
 * report_write_sweep:
 * @out: the page being written.
 * @ctx: the report: its runs (every run of the database when it lists them all), its directory
 *     (the plots go there) and plot options (the plots are left out when gnuplot is missing or
 *     fails).
 *
 * A section of the page (#ReportSection): when the runs include runs written by `fragsim sweep`
 * (they carry a trace hash), per device, a table of job (a trace, or the ranks of a `jobs=`
 * group) × setting with the needed capacity (for several ranks: the worst rank's, which rank,
 * and the spread), the best setting of each job, and a plot of needed capacity per setting, one
 * line per job.  Nothing otherwise.
 *
 * Returns: %TRUE (a plot that fails is a notice on the page, not an error).
 */
gboolean report_write_sweep(GString *out, const ReportContext *ctx, GError **error);

G_END_DECLS
