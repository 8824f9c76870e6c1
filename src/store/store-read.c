/* SPDX-License-Identifier: MIT */
/*
 * Reading the results database back: runs with their metrics, and each run's samples, OOMs,
 * segment actions, blocks, marks and size classes.
 */
#include <glib.h>

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <string.h>

#include "fragsim/store.h"

#include "store-private.h"

/* ---- reading ------------------------------------------------------------------------------- */

void
fsim_stored_run_free(FsimStoredRun *run)
{
    if (run == NULL)
        return;
    store_row_clear(&store_run_row, run); /* every string of the run is a TEXT column */
    g_free(run);
}

gboolean
fsim_stored_run_has_data(const FsimStoredRun *run)
{
    return run->status == FSIM_STORE_COMPLETE || run->status == FSIM_STORE_OOM;
}

static FsimStoredRun *
stored_run_from_row(sqlite3_stmt *stmt)
{
    FsimStoredRun *run = g_new0(FsimStoredRun, 1);
    int i = RUN_COLUMNS;

    store_read_row(stmt, &store_run_row, run);
    if (run->config == NULL)
        run->config = g_strdup("");
    if (run->trace == NULL)
        run->trace = g_strdup("");
    if (run->policy == NULL)
        run->policy = g_strdup("");
    if (run->label == NULL || *run->label == '\0') {
        g_free(run->label);
        run->label = fsim_run_label(run->policy, run->config);
    }
#define STORE_READ_U(field)                run->metrics.field = (uint64_t)sqlite3_column_int64(stmt, i++)
#define STORE_READ_F(field)                run->metrics.field = sqlite3_column_double(stmt, i++)
#define STORE_READ_I(field)                run->metrics.field = store_column_opt_i64(stmt, i++)
#define STORE_READ_METRIC(name, kind, doc) STORE_READ_##kind(name);
    FSIM_METRICS(STORE_READ_METRIC)
#undef STORE_READ_METRIC
#undef STORE_READ_U
#undef STORE_READ_F
#undef STORE_READ_I
    return run;
}

GPtrArray *
fsim_store_runs(FsimStore *store, const int64_t *ids, gsize n_ids, GError **error)
{
    g_autoptr(GPtrArray) runs =
        g_ptr_array_new_with_free_func((GDestroyNotify)fsim_stored_run_free);
    int rc;

    g_return_val_if_fail(store != NULL, NULL);
    if (ids == NULL) {
        if (store->select_runs == NULL) {
            g_autofree char *sql = g_strconcat(store->select_runs_sql, " ORDER BY r.id", NULL);

            store->select_runs = store_prepare(store, sql, error);
            if (store->select_runs == NULL)
                return NULL;
        } else {
            (void)sqlite3_reset(store->select_runs);
        }
        while ((rc = sqlite3_step(store->select_runs)) == SQLITE_ROW)
            g_ptr_array_add(runs, stored_run_from_row(store->select_runs));
        if (rc != SQLITE_DONE) {
            store_fail(store, rc, "reading runs", error);
            return NULL;
        }
        (void)sqlite3_reset(store->select_runs);
        return g_steal_pointer(&runs);
    }
    if (store->select_run == NULL) {
        g_autofree char *sql = g_strconcat(store->select_runs_sql, " WHERE r.id = ?", NULL);

        store->select_run = store_prepare(store, sql, error);
        if (store->select_run == NULL)
            return NULL;
    }
    for (gsize i = 0; i < n_ids; i++) {
        rc = SQLITE_OK;
        (void)sqlite3_reset(store->select_run);
        bind_i64(store->select_run, 1, ids[i], &rc);
        if (rc != SQLITE_OK) {
            store_fail(store, rc, "reading runs", error);
            return NULL;
        }
        rc = sqlite3_step(store->select_run);
        if (rc == SQLITE_ROW) {
            g_ptr_array_add(runs, stored_run_from_row(store->select_run));
            continue;
        }
        if (rc != SQLITE_DONE) {
            store_fail(store, rc, "reading runs", error);
            return NULL;
        }
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NO_RUN,
                    "%s: no run %" G_GINT64_FORMAT " in this database", store->path, ids[i]);
        return NULL;
    }
    (void)sqlite3_reset(store->select_run);
    return g_steal_pointer(&runs);
}

/* Step @stmt to its end, appending each row, read with @layout, to @out.  Returns the code of
 * the last step: SQLITE_DONE when every row was read. */
static int
store_read_rows(sqlite3_stmt *stmt, const StoreRowLayout *layout, GArray *out)
{
    guint size = g_array_get_element_size(out);
    g_autofree void *row = g_malloc(size);
    int rc;

    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        memset(row, 0, size);
        store_read_row(stmt, layout, row);
        g_array_append_vals(out, row, 1);
    }
    return rc;
}

/* Run a per-run SELECT and append each row, read with @layout, to @out. */
static gboolean
store_select(FsimStore *store, StoreStmt which, int64_t run_id, const char *what,
             const StoreRowLayout *layout, GArray *out, GError **error)
{
    sqlite3_stmt *stmt = store_stmt(store, which, error);
    int rc = SQLITE_OK;

    if (stmt == NULL)
        return FALSE;
    bind_i64(stmt, 1, run_id, &rc);
    if (rc != SQLITE_OK)
        return store_fail(store, rc, what, error);
    rc = store_read_rows(stmt, layout, out);
    if (rc != SQLITE_DONE)
        return store_fail(store, rc, what, error);
    (void)sqlite3_reset(stmt);
    return TRUE;
}

/* store_select() into a new array of @size-byte elements (@clear frees what a row owns);
 * NULL on failure. */
static GArray *
store_select_new(FsimStore *store, StoreStmt which, int64_t run_id, const char *what,
                 const StoreRowLayout *layout, guint size, GDestroyNotify clear, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, size);

    g_array_set_clear_func(out, clear);
    if (!store_select(store, which, run_id, what, layout, out, error))
        return NULL;
    return g_steal_pointer(&out);
}

GArray *
fsim_store_samples(FsimStore *store, int64_t run_id, GError **error)
{
    return store_select_new(store, STMT_SELECT_SAMPLES, run_id, "reading samples",
                            &store_sample_row, sizeof(FsimStoredSample), NULL, error);
}

GArray *
fsim_store_ooms(FsimStore *store, int64_t run_id, GError **error)
{
    return store_select_new(store, STMT_SELECT_OOMS, run_id, "reading OOM records", &store_oom_row,
                            sizeof(FsimOomRecord), NULL, error);
}

GArray *
fsim_store_sizes(FsimStore *store, int64_t run_id, GError **error)
{
    return store_select_new(store, STMT_SELECT_SIZES, run_id, "reading the size histogram",
                            &store_size_row, sizeof(FsimStoredSizeBucket), NULL, error);
}

/* Append the packed rows of @kind of run @run_id (none in a database of schema version 1). */
static gboolean
read_packed(FsimStore *store, int64_t run_id, const StorePackKind *kind, GArray *out,
            GError **error)
{
    sqlite3_stmt *stmt;
    int rc = SQLITE_OK;

    if (!store->has_report_tables)
        return TRUE;
    stmt = store_stmt(store, STMT_SELECT_PACKED, error);
    if (stmt == NULL)
        return FALSE;
    bind_i64(stmt, 1, run_id, &rc);
    bind_text(stmt, 2, store_pack_name(kind), &rc);
    if (rc != SQLITE_OK)
        return store_fail(store, rc, "reading packed data", error);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const void *data = sqlite3_column_blob(stmt, 1);
        gsize len = (gsize)sqlite3_column_bytes(stmt, 1);
        int64_t rows = sqlite3_column_int64(stmt, 0);

        if (rows < 0 || rows > STORE_PACK_CHUNK ||
            !store_unpack(kind, data, len, (guint)rows, out)) {
            (void)sqlite3_reset(stmt);
            g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_FAILED,
                        "%s: run %" G_GINT64_FORMAT ": its %s are damaged (run_packed)",
                        store->path, run_id, store_pack_name(kind));
            return FALSE;
        }
    }
    if (rc != SQLITE_DONE)
        return store_fail(store, rc, "reading packed data", error);
    (void)sqlite3_reset(stmt);
    return TRUE;
}

/* The rows of a table that schema version 1 stored one per row (@which) and version 2 packs
 * (@kind): both, in that order. */
static GArray *
read_rows_and_packed(FsimStore *store, int64_t run_id, StoreStmt which, const char *what,
                     const StoreRowLayout *layout, const StorePackKind *kind, guint size,
                     GError **error)
{
    g_autoptr(GArray) out = store_select_new(store, which, run_id, what, layout, size, NULL, error);

    if (out == NULL || !read_packed(store, run_id, kind, out, error))
        return NULL;
    return g_steal_pointer(&out);
}

GArray *
fsim_store_segments(FsimStore *store, int64_t run_id, GError **error)
{
    return read_rows_and_packed(store, run_id, STMT_SELECT_SEGMENTS, "reading segment actions",
                                &store_segment_row, &store_packed_segments,
                                sizeof(FsimStoredSegment), error);
}

GArray *
fsim_store_blocks(FsimStore *store, int64_t run_id, GError **error)
{
    return read_rows_and_packed(store, run_id, STMT_SELECT_BLOCKS, "reading block lifetimes",
                                &store_block_row, &store_packed_blocks, sizeof(FsimStoredBlock),
                                error);
}

GArray *
fsim_store_marks(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out =
        store_select_new(store, STMT_SELECT_MARKS, run_id, "reading marks", &store_mark_row,
                         sizeof(FsimStoredMark), store_mark_clear, error);

    if (out == NULL)
        return NULL;
    for (guint i = 0; i < out->len; i++) {
        FsimStoredMark *mark = &g_array_index(out, FsimStoredMark, i);

        if (mark->label == NULL)
            mark->label = g_strdup("");
    }
    return g_steal_pointer(&out);
}

gboolean
fsim_store_breakdown(FsimStore *store, int64_t run_id, FsimStoredBreakdown *out, GError **error)
{
    g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(FsimStoredBreakdown));

    memset(out, 0, sizeof(*out));
    if (!store->has_report_tables)
        return TRUE;
    if (!store_select(store, STMT_SELECT_BREAKDOWN, run_id, "reading the breakdown at the peak",
                      &store_breakdown_row, rows, error))
        return FALSE;
    if (rows->len > 0) {
        *out = g_array_index(rows, FsimStoredBreakdown, 0);
        out->present = TRUE;
    }
    return TRUE;
}

GArray *
fsim_store_phases(FsimStore *store, int64_t run_id, GError **error)
{
    GArray *out;

    if (store->has_report_tables)
        return store_select_new(store, STMT_SELECT_PHASES, run_id, "reading phases",
                                &store_phase_row, sizeof(FsimStoredPhase), store_phase_clear,
                                error);
    out = g_array_new(FALSE, FALSE, sizeof(FsimStoredPhase));
    g_array_set_clear_func(out, store_phase_clear);
    return out;
}

static void
recommendation_clear(gpointer data)
{
    store_row_clear(&store_recommendation_row, data);
}

GArray *
fsim_store_recommendations(FsimStore *store, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredRecommendation));
    sqlite3_stmt *stmt;
    gboolean present;

    g_array_set_clear_func(out, recommendation_clear);
    /* The table is tune's: present only once tune wrote to this database. */
    stmt = store_prepare(store,
                         "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = "
                         "'recommendations'",
                         error);
    if (stmt == NULL)
        return NULL;
    present = sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_int(stmt, 0) > 0;
    (void)sqlite3_finalize(stmt);
    if (!present)
        return g_steal_pointer(&out);
    stmt = store_prepare(store,
                         "SELECT id, trace, trace_device, device, default_run_id, run_id, config,"
                         " env, needed_bytes, saving_bytes, candidates, created_at"
                         " FROM recommendations ORDER BY id",
                         error);
    if (stmt == NULL ||
        !store_finish(store, stmt, store_read_rows(stmt, &store_recommendation_row, out),
                      "reading tune's recommendations", error))
        return NULL;
    return g_steal_pointer(&out);
}

/* One item of a run list: `N` or `N-M`. */
static gboolean
parse_run_range(char *part, uint64_t *first, uint64_t *last)
{
    char *dash = strchr(part, '-');

    if (dash != NULL) {
        *dash = '\0';
        if (!fsim_parse_u64(g_strstrip(part), first) || !fsim_parse_u64(g_strstrip(dash + 1), last))
            return FALSE;
    } else {
        if (!fsim_parse_u64(g_strstrip(part), first))
            return FALSE;
        *last = *first;
    }
    return *first >= 1 && *first <= *last && *last <= G_MAXINT64 && *last - *first <= 1000000;
}

gboolean
fsim_store_parse_run_ids(const char *text, GArray **out, GError **error)
{
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int64_t));
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    g_auto(GStrv) parts = NULL;

    g_return_val_if_fail(text != NULL && out != NULL, FALSE);
    parts = g_strsplit(text, ",", -1);
    for (gsize i = 0; parts[i] != NULL; i++) {
        uint64_t first, last;

        if (!parse_run_range(parts[i], &first, &last)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "--run '%s': expected run ids such as 3, 1,4,7 or 2-5", text);
            return FALSE;
        }
        for (uint64_t id = first; id <= last; id++) {
            int64_t value = (int64_t)id;

            if (g_hash_table_contains(seen, &value))
                continue;
            g_array_append_val(ids, value);
            g_hash_table_add(seen, g_memdup2(&value, sizeof(value)));
        }
    }
    if (ids->len == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--run names no run");
        return FALSE;
    }
    *out = g_steal_pointer(&ids);
    return TRUE;
}
