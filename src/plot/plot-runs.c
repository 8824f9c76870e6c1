/* SPDX-License-Identifier: MIT */
/*
 * Plots: the stored runs to draw (fsim_plot_select_runs()) and their grouping, one group per
 * trace and device (fsim_plot_group_runs()).
 */
#include <glib.h>

#include <string.h>

#include "plotter.h"

void
fsim_plot_group_free(FsimPlotGroup *group)
{
    if (group == NULL)
        return;
    g_ptr_array_unref(group->runs);
    g_free(group);
}

void
fsim_plot_file_free(FsimPlotFile *file)
{
    if (file == NULL)
        return;
    g_free(file->kind);
    g_free(file->image);
    g_free(file->data);
    g_free(file->title);
    g_free(file->moment);
    if (file->runs != NULL)
        g_array_unref(file->runs);
    g_free(file);
}

/* Adds @run to the group of its trace, trace device and device, made when it is the first. */
static void
group_add(GPtrArray *groups, GHashTable *index, FsimStoredRun *run)
{
    /* Lengths first, so that no trace or device name can collide with another pair. */
    g_autofree char *printable = g_strdup_printf(
        "%" G_GSIZE_FORMAT ":%s|%u|%" G_GSIZE_FORMAT ":%s|%" G_GUINT64_FORMAT, strlen(run->trace),
        run->trace, run->trace_device, strlen(run->device), run->device, run->capacity_bytes);
    gpointer found;
    FsimPlotGroup *group;

    if (g_hash_table_lookup_extended(index, printable, NULL, &found)) {
        group = groups->pdata[GPOINTER_TO_UINT(found)];
    } else {
        group = g_new0(FsimPlotGroup, 1);
        group->number = groups->len + 1;
        group->trace = run->trace;
        group->trace_format = run->trace_format;
        group->trace_device = run->trace_device;
        group->device = run->device;
        group->capacity_bytes = run->capacity_bytes;
        group->runs = g_ptr_array_new();
        g_hash_table_insert(index, g_steal_pointer(&printable), GUINT_TO_POINTER(groups->len));
        g_ptr_array_add(groups, group);
    }
    g_ptr_array_add(group->runs, run);
}

GPtrArray *
fsim_plot_group_runs(GPtrArray *runs)
{
    GPtrArray *groups = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_plot_group_free);
    g_autoptr(GHashTable) index = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    for (guint i = 0; i < runs->len; i++) {
        FsimStoredRun *run = runs->pdata[i];
        gboolean joined = FALSE;

        /* What a snapshot's recording did (`recorded`: its device is the recording's) belongs
         * beside the models' runs of the same trace device, on whichever device they ran. */
        for (guint g = 0; g_strcmp0(run->policy, "recorded") == 0 && g < groups->len; g++) {
            FsimPlotGroup *group = groups->pdata[g];

            if (strcmp(group->trace, run->trace) == 0 && group->trace_device == run->trace_device) {
                g_ptr_array_add(group->runs, run);
                joined = TRUE;
            }
        }
        if (!joined)
            group_add(groups, index, run);
    }
    return groups;
}

GPtrArray *
fsim_plot_select_runs(FsimStore *store, GArray *ids, GError **error)
{
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) selected = NULL;

    runs = fsim_store_runs(store, ids != NULL ? (const int64_t *)(void *)ids->data : NULL,
                           ids != NULL ? ids->len : 0, error);
    if (runs == NULL)
        return NULL;
    selected = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_stored_run_free);
    for (guint i = 0; i < runs->len; i++) {
        FsimStoredRun *run = runs->pdata[i];

        if (fsim_stored_run_has_data(run)) {
            g_ptr_array_add(selected, g_ptr_array_steal_index(runs, i));
            i--;
            continue;
        }
        if (ids != NULL) {
            g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_INCOMPLETE,
                        "%s: run %" G_GINT64_FORMAT " has no data: its status is '%s' (%s)",
                        fsim_store_path(store), run->id, fsim_store_status_name(run->status),
                        run->status == FSIM_STORE_RUNNING
                            ? "still being written, or its process was killed"
                            : (run->message != NULL ? run->message : "it failed"));
            return NULL;
        }
    }
    if (selected->len == 0) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_RUNS,
                    "%s: no complete run to plot (%u runs, none complete); write some with "
                    "'fragsim replay TRACE --db %s'",
                    fsim_store_path(store), runs->len, fsim_store_path(store));
        return NULL;
    }
    return g_steal_pointer(&selected);
}
