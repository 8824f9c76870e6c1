/* SPDX-License-Identifier: MIT */
/*
 * The report's memory by pool: for a comparison whose runs have private pools (CUDA graphs,
 * MemPools; table run_pools), one row per run and pool: what the pool needs (its share of the
 * run's needed capacity: what it reserves at the peak of a replay on that capacity), its own
 * peak, what it holds at the end and its references.  For a serving trace, how much the CUDA
 * graphs hold; the pools' shares add up to what the run needs (or a little less), their peaks
 * need not.  Nothing for a comparison without private pools.
 */
#include <glib.h>

#include "report-private.h"

/* One run's rows. */
static void
write_run_rows(GString *out, const FsimStoredRun *run, const GArray *pools)
{
    g_autofree char *name = report_run_name(run);

    for (guint i = 0; i < pools->len; i++) {
        /* the pool's name, then its four figures */
        g_auto(GStrv) cells = fsim_stored_pool_cells(&g_array_index(pools, FsimStoredPool, i));

        g_string_append(out, "<tr><td>");
        if (i == 0)
            report_esc(out, name);
        g_string_append(out, "</td><td>");
        report_esc(out, cells[0]);
        g_string_append(out, "</td>");
        for (guint c = 1; cells[c] != NULL; c++)
            report_td_num(out, cells[c]);
        g_string_append(out, "</tr>\n");
    }
}

gboolean
report_write_pools(GString *out, const ReportContext *ctx, const FsimPlotGroup *group,
                   GError **error)
{
    gboolean any = FALSE;

    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        g_autoptr(GArray) pools = fsim_store_pools(ctx->store, run->id, error);

        if (pools == NULL)
            return FALSE;
        if (pools->len == 0)
            continue;
        if (!any)
            g_string_append(out, "<h3>Memory by pool</h3>\n<p>The default pools and each private "
                                 "pool (a CUDA graph's, a MemPool's). <em>Needs</em>: the pool's "
                                 "share of what the run needs, what it reserves at the peak of a "
                                 "replay on that capacity; the shares add up to that peak. Each "
                                 "pool's own peak can come at another moment.</p>\n"
                                 "<table class=\"pools\"><thead><tr><th>run</th><th>pool</th>"
                                 "<th>needs</th><th>peak reserved</th><th>at the end</th>"
                                 "<th>references</th></tr></thead>\n<tbody>\n");
        any = TRUE;
        write_run_rows(out, run, pools);
    }
    if (any)
        g_string_append(out, "</tbody></table>\n");
    return TRUE;
}
