/* SPDX-License-Identifier: MIT */
/*
 * `fragsim replay`'s comparison, as a table or as JSON (see replay-runs.h).
 */
#include <glib.h>

#include "cli.h"
#include "replay-runs.h"

const char *
replay_status_name(ReplayStatus status)
{
    switch (status) {
    case REPLAY_OOM:
        return "oom";
    case REPLAY_ERROR:
        return "error";
    case REPLAY_COMPLETE:
    default:
        return "complete";
    }
}

void
replay_print_json(const char *path, GPtrArray *runs,
                  int64_t (*run_id)(gpointer data, const ReplayRun *run), gpointer data)
{
    g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
    fsim_cli_json_string(builder, "trace", path);
    fsim_cli_json_begin_array(builder, "runs");
    for (guint i = 0; i < runs->len; i++) {
        const ReplayRun *run = g_ptr_array_index(runs, i);
        int64_t id = run_id != NULL ? run_id(data, run) : -1;

        fsim_json_begin_object(builder);
        fsim_cli_json_string(builder, "policy", run->policy);
        fsim_cli_json_string(builder, "config", run->config);
        fsim_cli_json_string(builder, "label", run->label);
        fsim_cli_json_string(builder, "device", run->device.name);
        fsim_cli_json_int(builder, "capacity_bytes", (gint64)run->device.capacity_bytes);
        fsim_cli_json_int(builder, "trace_device", run->trace_device);
        fsim_cli_json_string(builder, "status", replay_status_name(run->status));
        if (run->status == REPLAY_ERROR) {
            fsim_cli_json_string(builder, "error", run->error);
        }
        if (id >= 0) {
            fsim_json_set_member_name(builder, "run_id"); /* the row in --db */
            fsim_json_add_int_value(builder, id);
        }
        fsim_cli_json_add_metrics(builder, &run->metrics);
        if (run->engine != NULL) {
            g_autoptr(GArray) pools =
                fsim_needed_stored_pools(fsim_engine_policy(run->engine), run->pool_needs);

            fsim_cli_json_add_pools(builder, pools);
        }
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
    fsim_cli_json_print(builder);
}

/* When the recording itself ran out of memory, say which runs would have too. */
static void
print_recorded_ooms(GPtrArray *runs)
{
    for (guint i = 0; i < runs->len;) {
        const ReplayRun *first = g_ptr_array_index(runs, i);
        uint64_t recorded = 0;
        g_autoptr(GString) line = g_string_new(NULL);
        guint j;

        for (j = i; j < runs->len; j++) {
            const ReplayRun *run = g_ptr_array_index(runs, j);
            const FsimMetrics *m = &run->metrics;

            if (run->trace_device != first->trace_device)
                break;
            if (run->status == REPLAY_ERROR || run->engine == NULL)
                continue;
            recorded = MAX(recorded, m->recorded_ooms);
            g_string_append_printf(line, "%s%s %s", line->len ? ", " : "", run->label,
                                   m->recorded_ooms == 0              ? "did not get there"
                                   : m->recorded_ooms_reproduced == 0 ? "served it"
                                                                      : "failed too");
        }
        if (recorded > 0)
            g_print("device %u: the recording ran out of memory %" G_GUINT64_FORMAT
                    " time%s; replayed here: %s\n",
                    first->trace_device, recorded, recorded == 1 ? "" : "s", line->str);
        i = j;
    }
}

/* One row of the table. */
static void
table_add_run(FsimTable *table, const ReplayRun *run, guint n_columns)
{
    const FsimMetrics *m = &run->metrics;
    g_autofree char *reserved = fsim_format_size(m->peak_reserved_bytes);
    g_autofree char *allocated = fsim_format_size(m->peak_allocated_bytes);
    g_autofree char *lower = fsim_format_size(m->lower_bound_bytes);
    g_autofree char *excess = fsim_format_size(m->excess_over_lower_bound_bytes);
    g_autofree char *time = fsim_cli_format_time_ns(m->modelled_alloc_time_ns);

    fsim_table_add(table, run->label);
    if (run->status == REPLAY_ERROR) {
        fsim_table_add(table, "error");
        for (guint c = 2; c < n_columns; c++)
            fsim_table_add(table, "-");
        return;
    }
    if (m->needed_bytes < 0) {
        fsim_table_add(table, "-");
    } else {
        g_autofree char *needed = fsim_format_size((uint64_t)m->needed_bytes);

        fsim_table_addf(table, "%s%s", needed,
                        (uint64_t)m->needed_bytes > run->device.capacity_bytes ? " (!)" : "");
    }
    fsim_table_add(table, reserved);
    fsim_table_add(table, allocated);
    fsim_table_add(table, lower);
    fsim_table_add(table, excess);
    if (run->engine == NULL) {
        /* the recording: what its segments and blocks say, nothing of a policy's inside */
        fsim_table_add(table, "-");
        fsim_table_add(table, "-");
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, m->ooms);
        fsim_table_addf(table, "%" G_GUINT64_FORMAT,
                        m->device_mallocs + m->device_frees + m->device_maps + m->device_unmaps);
        fsim_table_add(table, "-");
        return;
    }
    fsim_table_addf(table, "%.1f%%", 100.0 * m->peak_utilization);
    fsim_table_addf(table, "%.1f%%", 100.0 * m->external_frag_at_peak);
    if (run->status == REPLAY_OOM)
        fsim_table_addf(table, "%" G_GUINT64_FORMAT " (stopped)", m->ooms);
    else
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, m->ooms);
    fsim_table_addf(table, "%" G_GUINT64_FORMAT,
                    m->device_mallocs + m->device_frees + m->device_maps + m->device_unmaps);
    fsim_table_add(table, time);
}

/* The notes under a table: runs that need more than the device, errors, unknown frees. */
static void
print_notes(GPtrArray *runs)
{
    gboolean unmatched_said = FALSE;

    for (guint i = 0; i < runs->len; i++) {
        const ReplayRun *run = g_ptr_array_index(runs, i);
        const FsimMetrics *m = &run->metrics;

        if (run->status == REPLAY_ERROR) {
            g_print("error: %s: %s\n", run->label, run->error);
            continue;
        }
        if (run->engine == NULL) {
            g_autofree char *capacity = fsim_format_size(run->device.capacity_bytes);

            g_print("recorded: what the recording itself reserved (over its state at the trace's "
                    "start), allocated, its driver calls and OOMs%s%s; %s %s\n",
                    *run->config != '\0' ? ", with " : "", run->config,
                    run->recorded_capacity ? "its OOM implies a device of"
                                           : "the model was validated on its peak,",
                    capacity);
            continue;
        }
        if (m->needed_bytes >= 0 && (uint64_t)m->needed_bytes > run->device.capacity_bytes) {
            g_autofree char *needed = fsim_format_size((uint64_t)m->needed_bytes);
            g_autofree char *capacity = fsim_format_size(run->device.capacity_bytes);

            g_print("(!) %s needs %s, more than %s has (%s): it runs out of memory there\n",
                    run->label, needed, run->device.name, capacity);
        }
        if (run->needed_note != NULL)
            g_print("note: %s: no needed capacity: %s\n", run->label, run->needed_note);
        if (!unmatched_said && (m->unmatched_frees != 0 || m->double_frees != 0)) {
            g_print("note: %s: %" G_GUINT64_FORMAT " frees of unknown ids (trace started late), "
                    "%" G_GUINT64_FORMAT " double frees\n",
                    run->label, m->unmatched_frees, m->double_frees);
            unmatched_said = TRUE;
        }
    }
}

void
replay_print_table(FsimTrace *trace, GPtrArray *runs)
{
    /* the metrics' own labels (metrics.c), and two columns that are not metrics */
    const char *const headers[] = {
        "run",
        fsim_metric_label("needed_bytes"),
        fsim_metric_label("peak_reserved_bytes"),
        fsim_metric_label("peak_allocated_bytes"),
        fsim_metric_label("lower_bound_bytes"),
        fsim_metric_label("excess_over_lower_bound_bytes"),
        fsim_metric_label("peak_utilization"),
        fsim_metric_label("external_frag_at_peak"),
        fsim_metric_label("ooms"),
        "driver calls",
        fsim_metric_label("modelled_alloc_time_ns"),
    };
    guint32 shown_device = G_MAXUINT32;
    g_autoptr(FsimTable) table = NULL;

    for (guint i = 0; i < runs->len; i++) {
        const ReplayRun *run = g_ptr_array_index(runs, i);

        if (run->trace_device != shown_device) {
            const ReplayRun *model = run; /* the header names the chosen device */
            g_autofree char *capacity = NULL;
            uint64_t events = 0;

            /* Runs stopped by an OOM saw fewer events than the trace has. */
            for (guint j = i; j < runs->len; j++) {
                const ReplayRun *other = g_ptr_array_index(runs, j);

                if (other->trace_device != run->trace_device)
                    continue;
                events = MAX(events, other->metrics.events);
                if (model->engine == NULL && other->engine != NULL)
                    model = other;
            }
            capacity = fsim_format_size(model->device.capacity_bytes);
            if (table != NULL) {
                fsim_table_print(table);
                g_print("\n");
            }
            g_clear_pointer(&table, fsim_table_free);
            shown_device = run->trace_device;
            g_print("%s (%s), trace device %u, %" G_GUINT64_FORMAT " events, on %s (%s usable)\n",
                    fsim_trace_path(trace), fsim_trace_format_name(trace), run->trace_device,
                    events, model->device.name, capacity);
            table = fsim_table_new(G_N_ELEMENTS(headers), headers);
        }
        table_add_run(table, run, G_N_ELEMENTS(headers));
    }
    if (table != NULL)
        fsim_table_print(table);
    for (guint i = 0; i < runs->len; i++) {
        const ReplayRun *run = g_ptr_array_index(runs, i);

        if (run->engine != NULL) {
            g_autoptr(GArray) pools =
                fsim_needed_stored_pools(fsim_engine_policy(run->engine), run->pool_needs);

            fsim_cli_print_pools(run->label, pools, run->pool_needs_peak);
        }
    }
    print_notes(runs);
    print_recorded_ooms(runs);
}
