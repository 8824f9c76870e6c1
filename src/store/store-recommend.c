/* SPDX-License-Identifier: MIT */
/*
 * Writing the `recommendations` table: what `fragsim tune --db` recommends, beside the two runs it
 * stores (the default settings and the recommended ones).  Read back by
 * fsim_store_recommendations() (store-read.c).  See fragsim/store.h.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/store.h"

#include "store-private.h"

gboolean
fsim_store_add_recommendation(FsimStore *store, const FsimStoreRecommendationInfo *recommendation,
                              int64_t *id, GError **error)
{
    const FsimStoreRecommendationInfo *r = recommendation;
    g_autofree char *now = store_now();
    sqlite3_stmt *stmt = store_prepare(
        store,
        "INSERT INTO recommendations (trace, trace_device, device, default_run_id, run_id, config,"
        " env, needed_bytes, saving_bytes, candidates, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        error);
    int rc = SQLITE_OK;
    gboolean ok;

    if (stmt == NULL)
        return FALSE;
    bind_text(stmt, 1, r->trace, &rc);
    bind_i64(stmt, 2, r->trace_device, &rc);
    bind_text(stmt, 3, r->device, &rc);
    bind_opt_i64(stmt, 4, r->default_run_id, &rc);
    bind_opt_i64(stmt, 5, r->run_id, &rc);
    bind_text(stmt, 6, r->config, &rc);
    bind_text(stmt, 7, r->env, &rc);
    bind_u64(stmt, 8, r->needed_bytes, &rc);
    bind_u64(stmt, 9, r->saving_bytes, &rc);
    bind_u64(stmt, 10, r->candidates, &rc);
    bind_text(stmt, 11, now, &rc);
    ok = store_step_done(store, stmt, rc, "writing a recommendation", error);
    (void)sqlite3_finalize(stmt);
    if (ok && id != NULL)
        *id = sqlite3_last_insert_rowid(store->db);
    return ok;
}
