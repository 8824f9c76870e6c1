/* SPDX-License-Identifier: MIT */
/*
 * A run's row in `runs`: what tells a run from another (its key, shared by the rows store-job.c
 * and store-summary.c write), the row a new run starts with (status `running`), and the text of
 * the knobs it ran with.
 */

#include <glib.h>

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "fragsim/store.h"

#include "store-private.h"

/* Binds what tells a run from another (the parameters ?1 to ?7 of a statement on `runs`): the
 * trace's SHA-256 and its path, trace device, policy, config ("" for none), device and job. */
void
store_bind_run_key(sqlite3_stmt *stmt, const FsimStoreRunInfo *info, const FsimDeviceSpec *device,
                   int *rc)
{
    bind_text(stmt, 1, info->trace_sha256, rc);
    bind_text(stmt, 2, info->trace, rc);
    bind_i64(stmt, 3, info->trace_device, rc);
    bind_text(stmt, 4, info->policy, rc);
    bind_text(stmt, 5, info->config != NULL ? info->config : "", rc);
    bind_text(stmt, 6, device->name, rc);
    bind_text(stmt, 7, info->job, rc);
}

/* Inserts the `runs` row of a new run (status `running`) for @device and @info; its id in @id. */
gboolean
store_insert_run_row(FsimStore *store, const FsimDeviceSpec *device, const FsimStoreRunInfo *info,
                     guint max_samples, int64_t *id, GError **error)
{
    g_autofree char *now = store_now();
    sqlite3_stmt *stmt;
    int rc = SQLITE_OK;

    if (!store->writable) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_READ_ONLY,
                    "%s: opened for reading only", store->path);
        return FALSE;
    }
    stmt = store_stmt(store, STMT_INSERT_RUN, error);
    if (stmt == NULL)
        return FALSE;
    store_bind_run_key(stmt, info, device, &rc);
    bind_text(stmt, 8, info->trace_format != NULL ? info->trace_format : "unknown", &rc);
    bind_text(stmt, 9, device->description, &rc);
    bind_u64(stmt, 10, device->capacity_bytes, &rc);
    bind_u64(stmt, 11, device->total_bytes, &rc);
    bind_u64(stmt, 12, device->granularity, &rc);
    bind_text(stmt, 13, info->knobs != NULL ? info->knobs : "", &rc);
    bind_opt_i64(stmt, 14, info->seed, &rc);
    bind_text(stmt, 15, now, &rc);
    bind_text(stmt, 16, FSIM_VERSION, &rc);
    bind_i64(stmt, 17, max_samples, &rc);
    bind_text(stmt, 18, info->label != NULL ? info->label : info->policy, &rc);
    if (!store_step_done(store, stmt, rc, "recording a new run", error))
        return FALSE;
    *id = sqlite3_last_insert_rowid(store->db);
    return TRUE;
}

static int
knobs_compare_keys(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *
fsim_store_knobs_text(GKeyFile *config, const char *policy)
{
    g_autoptr(GString) text = g_string_new(NULL);
    const char *groups[2] = {policy, "device"};

    if (config == NULL)
        return g_strdup("");
    for (gsize g = 0; g < G_N_ELEMENTS(groups); g++) {
        g_auto(GStrv) keys = g_key_file_get_keys(config, groups[g], NULL, NULL);

        if (keys == NULL)
            continue;
        qsort(keys, g_strv_length(keys), sizeof(char *), knobs_compare_keys);
        for (gsize k = 0; keys[k] != NULL; k++) {
            g_autofree char *value = g_key_file_get_value(config, groups[g], keys[k], NULL);

            g_string_append_printf(text, "%s.%s=%s\n", groups[g], keys[k],
                                   value != NULL ? value : "");
        }
    }
    return g_string_free(g_steal_pointer(&text), FALSE);
}
