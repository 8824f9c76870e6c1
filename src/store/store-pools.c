/* SPDX-License-Identifier: MIT */
/*
 * Table `run_pools`: the memory of each pool of a run with private pools (CUDA graphs, MemPools;
 * `replay` writes it, the report reads it): the default pools (pool 0) and each private pool by
 * id, with its share of the run's needed capacity (analysis/needed.h: what it reserves at the
 * peak of a replay on that capacity; NULL when not computed), its own peak of reserved bytes,
 * what it holds at the end and its references then.  A table of its own, created IF NOT EXISTS
 * by every writer, so older databases gain it and older fragsims ignore it; `merge` copies it
 * like every table that refers to runs.
 */
#include <glib.h>

#include <sqlite3.h>

#include "fragsim/store.h"

#include "store-private.h"

static const char schema_pools_sql[] =
    "CREATE TABLE IF NOT EXISTS run_pools (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  pool INTEGER NOT NULL,\n"
    "  needed_bytes INTEGER,\n"
    "  peak_reserved_bytes INTEGER NOT NULL,\n"
    "  reserved_bytes INTEGER NOT NULL,\n"
    "  use_count INTEGER NOT NULL,\n"
    "  PRIMARY KEY (run_id, pool)\n"
    ") WITHOUT ROWID;\n";

gboolean
store_pools_setup(FsimStore *store, GError **error)
{
    sqlite3_stmt *stmt = NULL;
    int rc;

    if (store->writable) {
        rc = sqlite3_exec(store->db, schema_pools_sql, NULL, NULL, NULL);
        if (rc != SQLITE_OK)
            return store_fail(store, rc, "adding the run_pools table", error);
    }
    stmt = store_prepare(store,
                         "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = "
                         "'run_pools'",
                         error);
    if (stmt == NULL)
        return FALSE;
    rc = sqlite3_step(stmt);
    store->has_pool_table = rc == SQLITE_ROW && sqlite3_column_int64(stmt, 0) == 1;
    (void)sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW)
        return store_fail(store, rc, "looking for the run_pools table", error);
    return TRUE;
}

gboolean
store_write_pools(FsimStore *store, int64_t run_id, const GArray *pools, GError **error)
{
    sqlite3_stmt *stmt;
    gboolean ok = TRUE;

    if (pools == NULL || pools->len == 0)
        return TRUE;
    stmt = store_prepare(store,
                         "INSERT INTO run_pools (run_id, pool, needed_bytes, peak_reserved_bytes,"
                         " reserved_bytes, use_count) VALUES (?, ?, ?, ?, ?, ?)",
                         error);
    if (stmt == NULL)
        return FALSE;
    for (guint i = 0; ok && i < pools->len; i++) {
        const FsimStoredPool *p = &g_array_index(pools, FsimStoredPool, i);
        int rc = SQLITE_OK;

        bind_i64(stmt, 1, run_id, &rc);
        bind_u64(stmt, 2, p->pool, &rc);
        bind_opt_i64(stmt, 3, p->needed_bytes, &rc);
        bind_u64(stmt, 4, p->peak_reserved_bytes, &rc);
        bind_u64(stmt, 5, p->reserved_bytes, &rc);
        bind_u64(stmt, 6, p->use_count, &rc);
        ok = store_step_done(store, stmt, rc, "writing the memory by pool", error);
        (void)sqlite3_reset(stmt);
        (void)sqlite3_clear_bindings(stmt);
    }
    (void)sqlite3_finalize(stmt);
    return ok;
}

GArray *
fsim_store_pools(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredPool));
    sqlite3_stmt *stmt;
    int rc = SQLITE_OK;

    if (!store->has_pool_table)
        return g_steal_pointer(&out);
    stmt = store_prepare(store,
                         "SELECT pool, needed_bytes, peak_reserved_bytes, reserved_bytes, use_count"
                         " FROM run_pools WHERE run_id = ? ORDER BY pool",
                         error);
    if (stmt == NULL)
        return NULL;
    bind_i64(stmt, 1, run_id, &rc);
    while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        FsimStoredPool p = {
            .pool = (uint64_t)sqlite3_column_int64(stmt, 0),
            .needed_bytes = store_column_opt_i64(stmt, 1),
            .peak_reserved_bytes = (uint64_t)sqlite3_column_int64(stmt, 2),
            .reserved_bytes = (uint64_t)sqlite3_column_int64(stmt, 3),
            .use_count = (uint64_t)sqlite3_column_int64(stmt, 4),
        };

        g_array_append_val(out, p);
        rc = SQLITE_OK;
    }
    (void)sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        store_fail(store, rc, "reading the memory by pool", error);
        return NULL;
    }
    return g_steal_pointer(&out);
}

GStrv
fsim_stored_pool_cells(const FsimStoredPool *pool)
{
    GPtrArray *cells = g_ptr_array_new();

    g_ptr_array_add(cells, pool->pool == 0
                               ? g_strdup("default")
                               : g_strdup_printf("private %" G_GUINT64_FORMAT, pool->pool));
    g_ptr_array_add(cells, pool->needed_bytes >= 0 ? fsim_format_size((uint64_t)pool->needed_bytes)
                                                   : g_strdup("-"));
    g_ptr_array_add(cells, fsim_format_size(pool->peak_reserved_bytes));
    g_ptr_array_add(cells, fsim_format_size(pool->reserved_bytes));
    g_ptr_array_add(cells, pool->pool == 0
                               ? g_strdup("")
                               : g_strdup_printf("%" G_GUINT64_FORMAT, pool->use_count));
    g_ptr_array_add(cells, NULL);
    return (GStrv)g_ptr_array_free(cells, FALSE);
}
