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
    store_bind_row(stmt, 1, &store_recommendation_info_row, r, &rc);
    bind_text(stmt, 11, now, &rc);
    ok = store_step_done(store, stmt, rc, "writing a recommendation", error);
    (void)sqlite3_finalize(stmt);
    if (ok && id != NULL)
        *id = sqlite3_last_insert_rowid(store->db);
    return ok;
}
