/* SPDX-License-Identifier: MIT */
/*
 * The per-pool answers of a run (replay's table, JSON and database rows): for the default pools
 * and each private pool (CUDA graphs, MemPools), what it needs (its share of needed_bytes: what
 * it reserves at the peak of the replay on the run's needed capacity, analysis/needed.h), its own
 * peak of reserved memory, what it holds at the end, and its references.  Nothing for a policy
 * without private pools or a trace that has none.
 */
#include <glib.h>

#include "analysis/needed.h"
#include "cli.h"

void
fsim_cli_print_pools(const char *label, const GArray *pools, uint64_t needs_peak)
{
    static const char *const headers[] = {"pool", "needs", "peak reserved", "at the end",
                                          "references"};
    g_autoptr(FsimTable) table = NULL;
    g_autofree char *peak = fsim_format_size(needs_peak);
    gboolean needs = FALSE;

    if (pools == NULL)
        return;
    for (guint i = 0; i < pools->len; i++)
        needs |= g_array_index(pools, FsimStoredPool, i).needed_bytes >= 0;
    if (needs)
        g_print("%s: memory by pool (needs: each pool's share of the peak, %s, of the replay on "
                "the run's needed capacity)\n",
                label, peak);
    else
        g_print("%s: memory by pool\n", label);
    table = fsim_table_new(G_N_ELEMENTS(headers), headers);
    for (guint i = 0; i < pools->len; i++) {
        g_auto(GStrv) cells = fsim_stored_pool_cells(&g_array_index(pools, FsimStoredPool, i));

        for (guint c = 0; cells[c] != NULL; c++)
            fsim_table_add(table, cells[c]);
    }
    fsim_table_print(table);
}

void
fsim_cli_json_add_pools(FsimJsonWriter *builder, const GArray *pools)
{
    if (pools == NULL)
        return;
    fsim_cli_json_begin_array(builder, "pools");
    for (guint i = 0; i < pools->len; i++) {
        const FsimStoredPool *p = &g_array_index(pools, FsimStoredPool, i);

        fsim_json_begin_object(builder);
        fsim_cli_json_int(builder, "pool", (gint64)p->pool);
        fsim_json_set_member_name(builder, "needed_bytes");
        if (p->needed_bytes >= 0)
            fsim_json_add_int_value(builder, p->needed_bytes);
        else
            fsim_json_add_null_value(builder);
        fsim_cli_json_int(builder, "peak_reserved_bytes", (gint64)p->peak_reserved_bytes);
        fsim_cli_json_int(builder, "reserved_bytes", (gint64)p->reserved_bytes);
        fsim_cli_json_int(builder, "use_count", (gint64)p->use_count);
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
}
