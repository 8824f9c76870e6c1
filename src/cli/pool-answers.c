/* SPDX-License-Identifier: MIT */
/*
 * The per-pool answers of a run (replay's table and JSON): reserved memory of the default pools and
 * of each private pool (CUDA graphs, MemPools), from the policy's pool_stats.  Nothing is printed
 * for a policy without private pools or a trace that has none.
 */
#include <glib.h>

#include "cli.h"

void
fsim_cli_print_pools(const char *label, const FsimEngine *engine)
{
    g_autoptr(GArray) stats = fsim_policy_pool_stats(fsim_engine_policy(engine));
    g_autoptr(GString) line = NULL;

    if (stats == NULL)
        return;
    line = g_string_new(NULL);
    g_string_append_printf(line, "%s: reserved by pool, peak (at the end):", label);
    for (guint i = 0; i < stats->len; i++) {
        const FsimPoolStats *s = &g_array_index(stats, FsimPoolStats, i);
        g_autofree char *peak = fsim_format_size(s->peak_reserved_bytes);
        g_autofree char *now = fsim_format_size(s->reserved_bytes);

        if (s->pool == 0)
            g_string_append_printf(line, " default %s (%s)", peak, now);
        else
            g_string_append_printf(
                line, "; pool %" G_GUINT64_FORMAT " %s (%s, %" G_GUINT64_FORMAT " reference%s)",
                s->pool, peak, now, s->use_count, s->use_count == 1 ? "" : "s");
    }
    g_print("%s\n", line->str);
}

void
fsim_cli_json_add_pools(JsonBuilder *builder, const FsimEngine *engine)
{
    g_autoptr(GArray) stats = fsim_policy_pool_stats(fsim_engine_policy(engine));

    if (stats == NULL)
        return;
    json_builder_set_member_name(builder, "pools");
    json_builder_begin_array(builder);
    for (guint i = 0; i < stats->len; i++) {
        const FsimPoolStats *s = &g_array_index(stats, FsimPoolStats, i);

        json_builder_begin_object(builder);
        json_builder_set_member_name(builder, "pool");
        json_builder_add_int_value(builder, (gint64)s->pool);
        json_builder_set_member_name(builder, "peak_reserved_bytes");
        json_builder_add_int_value(builder, (gint64)s->peak_reserved_bytes);
        json_builder_set_member_name(builder, "reserved_bytes");
        json_builder_add_int_value(builder, (gint64)s->reserved_bytes);
        json_builder_set_member_name(builder, "use_count");
        json_builder_add_int_value(builder, (gint64)s->use_count);
        json_builder_end_object(builder);
    }
    json_builder_end_array(builder);
}
