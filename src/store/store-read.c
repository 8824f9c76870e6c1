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
    g_free(run->trace);
    g_free(run->trace_format);
    g_free(run->policy);
    g_free(run->device);
    g_free(run->device_description);
    g_free(run->knobs);
    g_free(run->config);
    g_free(run->label);
    g_free(run->trace_sha256);
    g_free(run->job);
    g_free(run->message);
    g_free(run->created_at);
    g_free(run->finished_at);
    g_free(run->fragsim_version);
    g_free(run);
}

gboolean
fsim_stored_run_has_data(const FsimStoredRun *run)
{
    return run->status == FSIM_STORE_COMPLETE || run->status == FSIM_STORE_OOM;
}

static char *
column_strdup(sqlite3_stmt *stmt, int column)
{
    const unsigned char *text = sqlite3_column_text(stmt, column);

    return text != NULL ? g_strdup((const char *)text) : NULL;
}

static int64_t
column_opt_i64(sqlite3_stmt *stmt, int column)
{
    return sqlite3_column_type(stmt, column) == SQLITE_NULL ? -1
                                                            : sqlite3_column_int64(stmt, column);
}

static FsimStoredRun *
stored_run_from_row(sqlite3_stmt *stmt)
{
    FsimStoredRun *run = g_new0(FsimStoredRun, 1);
    int i = RUN_COLUMNS;

    run->id = sqlite3_column_int64(stmt, 0);
    run->trace = column_strdup(stmt, 1);
    run->trace_format = column_strdup(stmt, 2);
    run->trace_device = (uint32_t)sqlite3_column_int64(stmt, 3);
    run->policy = column_strdup(stmt, 4);
    run->device = column_strdup(stmt, 5);
    run->device_description = column_strdup(stmt, 6);
    run->capacity_bytes = (uint64_t)sqlite3_column_int64(stmt, 7);
    run->total_bytes = (uint64_t)sqlite3_column_int64(stmt, 8);
    run->granularity = (uint64_t)sqlite3_column_int64(stmt, 9);
    run->knobs = column_strdup(stmt, 10);
    run->seed = column_opt_i64(stmt, 11);
    run->status = store_status_from_name((const char *)sqlite3_column_text(stmt, 12));
    run->message = column_strdup(stmt, 13);
    run->created_at = column_strdup(stmt, 14);
    run->finished_at = column_strdup(stmt, 15);
    run->fragsim_version = column_strdup(stmt, 16);
    run->segment_actions = (uint64_t)sqlite3_column_int64(stmt, 17);
    run->segment_actions_stored = (uint64_t)sqlite3_column_int64(stmt, 18);
    run->blocks = (uint64_t)sqlite3_column_int64(stmt, 19);
    run->blocks_stored = (uint64_t)sqlite3_column_int64(stmt, 20);
    run->has_metrics = sqlite3_column_type(stmt, 21) != SQLITE_NULL;
    run->config = column_strdup(stmt, 22);
    run->label = column_strdup(stmt, 23);
    run->trace_sha256 = column_strdup(stmt, 24);
    run->job = column_strdup(stmt, 25);
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
#define STORE_READ_I(field)                run->metrics.field = column_opt_i64(stmt, i++)
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

/* Run a per-run SELECT and hand each row to @row. */
static gboolean
store_select(FsimStore *store, StoreStmt which, int64_t run_id, const char *what,
             void (*row)(sqlite3_stmt *stmt, GArray *out), GArray *out, GError **error)
{
    sqlite3_stmt *stmt = store_stmt(store, which, error);
    int rc = SQLITE_OK;

    if (stmt == NULL)
        return FALSE;
    bind_i64(stmt, 1, run_id, &rc);
    if (rc != SQLITE_OK)
        return store_fail(store, rc, what, error);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
        row(stmt, out);
    if (rc != SQLITE_DONE)
        return store_fail(store, rc, what, error);
    (void)sqlite3_reset(stmt);
    return TRUE;
}

#define COL_U(i) ((uint64_t)sqlite3_column_int64(stmt, (i)))

static void
row_sample(sqlite3_stmt *stmt, GArray *out)
{
    FsimStoredSample s = {
        .event_index = COL_U(0),
        .event_index_last = COL_U(1),
        .events = COL_U(2),
        .time = COL_U(3),
        .time_last = COL_U(4),
        .requested = COL_U(5),
        .allocated = COL_U(6),
        .reserved = COL_U(7),
        .requested_min = COL_U(8),
        .requested_max = COL_U(9),
        .allocated_min = COL_U(10),
        .allocated_max = COL_U(11),
        .reserved_min = COL_U(12),
        .reserved_max = COL_U(13),
    };

    g_array_append_val(out, s);
}

GArray *
fsim_store_samples(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredSample));

    if (!store_select(store, STMT_SELECT_SAMPLES, run_id, "reading samples", row_sample, out,
                      error))
        return NULL;
    return g_steal_pointer(&out);
}

static void
row_oom(sqlite3_stmt *stmt, GArray *out)
{
    FsimOomRecord o = {
        .event_index = COL_U(0),
        .time = COL_U(1),
        .id = COL_U(2),
        .size = COL_U(3),
        .stream = COL_U(4),
        .reserved_bytes = COL_U(5),
        .allocated_bytes = COL_U(6),
        .requested_bytes = COL_U(7),
        .largest_free_block = COL_U(8),
        .device_free_bytes = COL_U(9),
    };

    g_array_append_val(out, o);
}

GArray *
fsim_store_ooms(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimOomRecord));

    if (!store_select(store, STMT_SELECT_OOMS, run_id, "reading OOM records", row_oom, out, error))
        return NULL;
    return g_steal_pointer(&out);
}

static void
row_segment(sqlite3_stmt *stmt, GArray *out)
{
    FsimStoredSegment s = {
        .event_index = column_opt_i64(stmt, 0),
        .time = COL_U(1),
        .action = store_action_from_name((const char *)sqlite3_column_text(stmt, 2)),
        .addr = COL_U(3),
        .size = COL_U(4),
    };

    g_array_append_val(out, s);
}

/* Append the packed rows of @kind of run @run_id (none in a database of schema version 1). */
static gboolean
read_packed(FsimStore *store, int64_t run_id, const char *kind,
            gboolean (*unpack)(const void *data, gsize len, guint rows, GArray *out), GArray *out,
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
    bind_text(stmt, 2, kind, &rc);
    if (rc != SQLITE_OK)
        return store_fail(store, rc, "reading packed data", error);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const void *data = sqlite3_column_blob(stmt, 1);
        gsize len = (gsize)sqlite3_column_bytes(stmt, 1);
        int64_t rows = sqlite3_column_int64(stmt, 0);

        if (rows < 0 || rows > STORE_PACK_CHUNK || !unpack(data, len, (guint)rows, out)) {
            (void)sqlite3_reset(stmt);
            g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_FAILED,
                        "%s: run %" G_GINT64_FORMAT ": its %s are damaged (run_packed)",
                        store->path, run_id, kind);
            return FALSE;
        }
    }
    if (rc != SQLITE_DONE)
        return store_fail(store, rc, "reading packed data", error);
    (void)sqlite3_reset(stmt);
    return TRUE;
}

GArray *
fsim_store_segments(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredSegment));

    if (!store_select(store, STMT_SELECT_SEGMENTS, run_id, "reading segment actions", row_segment,
                      out, error) ||
        !read_packed(store, run_id, "segments", store_unpack_segments, out, error))
        return NULL;
    return g_steal_pointer(&out);
}

static void
row_block(sqlite3_stmt *stmt, GArray *out)
{
    FsimStoredBlock b = {
        .id = COL_U(0),
        .addr = COL_U(1),
        .size = COL_U(2),
        .requested = COL_U(3),
        .stream = COL_U(4),
        .alloc_event = column_opt_i64(stmt, 5),
        .alloc_time = COL_U(6),
        .free_event = column_opt_i64(stmt, 7),
        .free_time = COL_U(8),
    };

    g_array_append_val(out, b);
}

GArray *
fsim_store_blocks(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredBlock));

    if (!store_select(store, STMT_SELECT_BLOCKS, run_id, "reading block lifetimes", row_block, out,
                      error) ||
        !read_packed(store, run_id, "blocks", store_unpack_blocks, out, error))
        return NULL;
    return g_steal_pointer(&out);
}

static void
row_mark(sqlite3_stmt *stmt, GArray *out)
{
    FsimStoredMark m = {COL_U(0), COL_U(1), column_strdup(stmt, 2)};

    if (m.label == NULL)
        m.label = g_strdup("");
    g_array_append_val(out, m);
}

GArray *
fsim_store_marks(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredMark));

    g_array_set_clear_func(out, store_mark_clear);
    if (!store_select(store, STMT_SELECT_MARKS, run_id, "reading marks", row_mark, out, error))
        return NULL;
    return g_steal_pointer(&out);
}

static void
row_breakdown(sqlite3_stmt *stmt, GArray *out)
{
    FsimStoredBreakdown b = {
        .present = TRUE,
        .event_index = column_opt_i64(stmt, 0),
        .time = COL_U(1),
        .reserved_bytes = COL_U(2),
        .live_requested_bytes = COL_U(3),
        .rounding_bytes = COL_U(4),
        .free_releasable_bytes = COL_U(5),
        .free_pinned_bytes = COL_U(6),
    };

    g_array_append_val(out, b);
}

gboolean
fsim_store_breakdown(FsimStore *store, int64_t run_id, FsimStoredBreakdown *out, GError **error)
{
    g_autoptr(GArray) rows = g_array_new(FALSE, FALSE, sizeof(FsimStoredBreakdown));

    memset(out, 0, sizeof(*out));
    if (!store->has_report_tables)
        return TRUE;
    if (!store_select(store, STMT_SELECT_BREAKDOWN, run_id, "reading the breakdown at the peak",
                      row_breakdown, rows, error))
        return FALSE;
    if (rows->len > 0)
        *out = g_array_index(rows, FsimStoredBreakdown, 0);
    return TRUE;
}

static void
row_phase(sqlite3_stmt *stmt, GArray *out)
{
    FsimStoredPhase p = {
        .label = column_strdup(stmt, 0),
        .event_index = COL_U(1),
        .event_index_last = COL_U(2),
        .events = COL_U(3),
        .time = COL_U(4),
        .time_last = COL_U(5),
        .peak_requested_bytes = COL_U(6),
        .peak_allocated_bytes = COL_U(7),
        .peak_reserved_bytes = COL_U(8),
        .reserved_bytes_end = COL_U(9),
        .driver_calls = COL_U(10),
        .ooms = COL_U(11),
    };

    g_array_append_val(out, p);
}

GArray *
fsim_store_phases(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredPhase));

    g_array_set_clear_func(out, store_phase_clear);
    if (store->has_report_tables &&
        !store_select(store, STMT_SELECT_PHASES, run_id, "reading phases", row_phase, out, error))
        return NULL;
    return g_steal_pointer(&out);
}

static void
recommendation_clear(gpointer data)
{
    FsimStoredRecommendation *r = data;

    g_free(r->trace);
    g_free(r->device);
    g_free(r->config);
    g_free(r->env);
    g_free(r->created_at);
}

GArray *
fsim_store_recommendations(FsimStore *store, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredRecommendation));
    sqlite3_stmt *stmt;
    gboolean present;
    int rc;

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
    if (stmt == NULL)
        return NULL;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        FsimStoredRecommendation r = {
            .id = sqlite3_column_int64(stmt, 0),
            .trace = column_strdup(stmt, 1),
            .trace_device = (uint32_t)sqlite3_column_int64(stmt, 2),
            .device = column_strdup(stmt, 3),
            .default_run_id = column_opt_i64(stmt, 4),
            .run_id = column_opt_i64(stmt, 5),
            .config = column_strdup(stmt, 6),
            .env = column_strdup(stmt, 7),
            .needed_bytes = column_opt_i64(stmt, 8),
            .saving_bytes =
                sqlite3_column_type(stmt, 9) == SQLITE_NULL ? -1 : sqlite3_column_int64(stmt, 9),
            .candidates = column_opt_i64(stmt, 10),
            .created_at = column_strdup(stmt, 11),
        };

        g_array_append_val(out, r);
    }
    if (rc != SQLITE_DONE) {
        store_fail(store, rc, "reading tune's recommendations", error);
        (void)sqlite3_finalize(stmt);
        return NULL;
    }
    (void)sqlite3_finalize(stmt);
    return g_steal_pointer(&out);
}

static void
row_size(sqlite3_stmt *stmt, GArray *out)
{
    FsimStoredSizeBucket b = {(guint)sqlite3_column_int64(stmt, 0), COL_U(1), COL_U(2)};

    g_array_append_val(out, b);
}

GArray *
fsim_store_sizes(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredSizeBucket));

    if (!store_select(store, STMT_SELECT_SIZES, run_id, "reading the size histogram", row_size, out,
                      error))
        return NULL;
    return g_steal_pointer(&out);
}

#undef COL_U

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
