/* SPDX-License-Identifier: MIT */
/*
 * Runs that could not be carried out at all: a sweep job whose trace cannot be read, whose policy
 * cannot be set up, or whose worker process died.  Such a run has no engine to attach, so its row
 * is written here directly, with status `error` and the reason.  A worker killed while it replayed
 * leaves its rows `running` (see sqlite.c); those are turned into the error instead of adding a
 * second row for the same run.
 */
#include <glib.h>

#include <sqlite3.h>

#include "fragsim/store.h"

#include "store-private.h"

/* The same run: trace (by content when hashed), trace device, policy, config, device, job
 * (store_bind_run_key()). */
#define STORE_SAME_RUN                                                                           \
    " WHERE status = 'running' AND (CASE WHEN ?1 IS NULL THEN trace = ?2 ELSE trace_sha256 = ?1" \
    " END) AND trace_device = ?3 AND policy = ?4 AND config = ?5 AND device = ?6 AND job IS ?7"

static const char mark_running_sql[] =
    "UPDATE runs SET status = ?8, message = ?9, finished_at = ?10" STORE_SAME_RUN;

/* Binds the parameters of mark_running_sql. */
static int
bind_error_run(sqlite3_stmt *stmt, const FsimStoreRunInfo *info, const FsimDeviceSpec *device,
               const char *status, const char *message, const char *now)
{
    int rc = SQLITE_OK;

    store_bind_run_key(stmt, info, device, &rc);
    bind_text(stmt, 8, status, &rc);
    bind_text(stmt, 9, message, &rc);
    bind_text(stmt, 10, now, &rc);
    return rc;
}

static gboolean
store_error_run_locked(FsimStore *store, const FsimStoreRunInfo *info, const FsimDeviceSpec *device,
                       const char *message, GError **error)
{
    /* A database older than status `error` records such a run as `failed`. */
    const char *status = store->has_error_status ? "error" : "failed";
    g_autofree char *now = store_now();
    sqlite3_stmt *stmt = store_prepare(store, mark_running_sql, error);
    int64_t id = 0;
    int rc;
    gboolean ok;

    if (stmt == NULL)
        return FALSE;
    rc = bind_error_run(stmt, info, device, status, message, now);
    ok = store_step_done(store, stmt, rc, "recording a run in error", error);
    (void)sqlite3_finalize(stmt);
    if (!ok || sqlite3_changes(store->db) > 0)
        return ok;

    /* none: a new row (store-run.c's), its status and message set at once */
    if (!store_insert_run_row(store, device, info, 0, &id, error))
        return FALSE;
    stmt = store_stmt(store, STMT_FAIL_RUN, error);
    if (stmt == NULL)
        return FALSE;
    rc = SQLITE_OK;
    bind_text(stmt, 1, status, &rc);
    bind_text(stmt, 2, message, &rc);
    bind_text(stmt, 3, now, &rc);
    bind_i64(stmt, 4, id, &rc);
    return store_step_done(store, stmt, rc, "recording a run in error", error);
}

gboolean
fsim_store_record_error_run(FsimStore *store, const FsimStoreRunInfo *info,
                            const FsimDeviceSpec *device, const char *message, GError **error)
{
    g_return_val_if_fail(store != NULL && info != NULL && device != NULL, FALSE);
    g_return_val_if_fail(info->trace != NULL && info->policy != NULL, FALSE);
    if (!store->writable) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_READ_ONLY,
                    "%s: opened for reading only", store->path);
        return FALSE;
    }
    if (!store_run_simple(store, STMT_BEGIN, "recording a run in error", error))
        return FALSE;
    if (!store_error_run_locked(store, info, device, message, error) ||
        !store_run_simple(store, STMT_COMMIT, "recording a run in error", error)) {
        (void)sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
        return FALSE;
    }
    return TRUE;
}
