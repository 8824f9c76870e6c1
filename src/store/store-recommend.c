/* SPDX-License-Identifier: MIT */
/*
 * The `recommendations` table: what `fragsim tune --db` recommends, beside the two runs it stores
 * (the default settings and the recommended ones).  See fragsim/store.h.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/store.h"

#include "store-private.h"

void
fsim_store_recommendation_free(FsimStoreRecommendation *recommendation)
{
    if (recommendation == NULL)
        return;
    g_free(recommendation->trace);
    g_free(recommendation->device);
    g_free(recommendation->config);
    g_free(recommendation->env);
    g_free(recommendation->created_at);
    g_free(recommendation);
}

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

static char *
column_text(sqlite3_stmt *stmt, int column)
{
    const unsigned char *text = sqlite3_column_text(stmt, column);

    return g_strdup(text != NULL ? (const char *)text : "");
}

GPtrArray *
fsim_store_recommendations(FsimStore *store, GError **error)
{
    g_autoptr(GPtrArray) rows =
        g_ptr_array_new_with_free_func((GDestroyNotify)fsim_store_recommendation_free);
    sqlite3_stmt *stmt;
    int rc;

    stmt = store_prepare(store,
                         "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"
                         " AND name = 'recommendations'",
                         error);
    if (stmt == NULL)
        return NULL;
    rc = sqlite3_step(stmt);
    if (rc != SQLITE_ROW || sqlite3_column_int(stmt, 0) == 0) {
        (void)sqlite3_finalize(stmt);
        if (rc != SQLITE_ROW) {
            store_fail(store, rc, "reading the recommendations", error);
            return NULL;
        }
        return g_steal_pointer(&rows); /* an older database */
    }
    (void)sqlite3_finalize(stmt);
    stmt = store_prepare(store,
                         "SELECT id, trace, trace_device, device, default_run_id, run_id, config,"
                         " env, needed_bytes, saving_bytes, candidates, created_at"
                         " FROM recommendations ORDER BY id",
                         error);
    if (stmt == NULL)
        return NULL;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        FsimStoreRecommendation *r = g_new0(FsimStoreRecommendation, 1);

        r->id = sqlite3_column_int64(stmt, 0);
        r->trace = column_text(stmt, 1);
        r->trace_device = (uint32_t)sqlite3_column_int64(stmt, 2);
        r->device = column_text(stmt, 3);
        r->default_run_id =
            sqlite3_column_type(stmt, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(stmt, 4);
        r->run_id =
            sqlite3_column_type(stmt, 5) == SQLITE_NULL ? -1 : sqlite3_column_int64(stmt, 5);
        r->config = column_text(stmt, 6);
        r->env = column_text(stmt, 7);
        r->needed_bytes = (uint64_t)sqlite3_column_int64(stmt, 8);
        r->saving_bytes = (uint64_t)sqlite3_column_int64(stmt, 9);
        r->candidates = (uint64_t)sqlite3_column_int64(stmt, 10);
        r->created_at = column_text(stmt, 11);
        g_ptr_array_add(rows, r);
    }
    (void)sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        store_fail(store, rc, "reading the recommendations", error);
        return NULL;
    }
    return g_steal_pointer(&rows);
}
