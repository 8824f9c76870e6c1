// SPDX-License-Identifier: MIT
/*
 * Runs that have no replay of their own to observe: the `recorded` row of a snapshot (what the
 * recording itself reserved) and a run that could not be carried out (its engine could not be
 * created).  Each is written whole, row, metrics and status, in one transaction, so it is never
 * seen `running`.
 */
#include <glib.h>

#include <sqlite3.h>

#include "fragsim/store.h"

#include "store-private.h"

static gboolean
summary_set_status(FsimStore *store, int64_t id, FsimStoreStatus status, const char *message,
                   GError **error)
{
    g_autofree char *now = store_now();
    sqlite3_stmt *stmt;
    int rc = SQLITE_OK;

    if (status == FSIM_STORE_ERRORED || message != NULL) {
        const char *name = status != FSIM_STORE_ERRORED ? fsim_store_status_name(status)
                           : store->has_error_status    ? "error"
                                                        : "failed";
        stmt = store_stmt(store, STMT_FAIL_RUN, error);
        if (stmt == NULL)
            return FALSE;
        bind_text(stmt, 1, name, &rc);
        bind_text(stmt, 2, message, &rc);
        bind_text(stmt, 3, now, &rc);
        bind_i64(stmt, 4, id, &rc);
        return store_step_done(store, stmt, rc, "recording the run's status", error);
    }
    stmt = store_stmt(store, STMT_FINISH_RUN, error);
    if (stmt == NULL)
        return FALSE;
    bind_text(stmt, 1, fsim_store_status_name(status), &rc);
    bind_text(stmt, 2, now, &rc);
    for (int i = 3; i <= 6; i++)
        bind_i64(stmt, i, 0, &rc);
    bind_i64(stmt, 7, id, &rc);
    return store_step_done(store, stmt, rc, "recording the run's status", error);
}

gboolean
fsim_store_add_run(FsimStore *store, const FsimDeviceSpec *device, const FsimStoreRunInfo *info,
                   FsimStoreStatus status, const FsimMetrics *metrics, const char *message,
                   int64_t *id, GError **error)
{
    g_autoptr(GError) local_error = NULL;
    int64_t run_id = 0;
    gboolean ok;

    g_return_val_if_fail(store != NULL && device != NULL && info != NULL, FALSE);
    g_return_val_if_fail(info->trace != NULL && info->policy != NULL, FALSE);
    g_return_val_if_fail(status == FSIM_STORE_COMPLETE || status == FSIM_STORE_OOM ||
                             status == FSIM_STORE_ERRORED,
                         FALSE);
    g_return_val_if_fail(metrics != NULL || status == FSIM_STORE_ERRORED, FALSE);
    if (!store_run_simple(store, STMT_BEGIN, "starting the run's transaction", error))
        return FALSE;
    ok = store_insert_run_row(store, device, info, 0, &run_id, &local_error) &&
         (metrics == NULL || store_write_metrics(store, run_id, metrics, &local_error)) &&
         summary_set_status(store, run_id, status, message, &local_error) &&
         store_run_simple(store, STMT_COMMIT, "committing the run", &local_error);
    if (!ok) {
        if (!sqlite3_get_autocommit(store->db))
            (void)store_run_simple(store, STMT_ROLLBACK, "rolling back", NULL);
        g_propagate_error(error, g_steal_pointer(&local_error));
        return FALSE;
    }
    if (id != NULL)
        *id = run_id;
    return TRUE;
}
