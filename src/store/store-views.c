/* SPDX-License-Identifier: MIT */
/*
 * The results database's stable SQL views, for people who read it with their own tools (pandas,
 * R, sqlite3) and for `fragsim export --csv`: one row per run with everything known about it
 * (`run_results`), the samples (`run_samples`), the OOMs (`run_ooms`), the phases between marks
 * (`phase_results`) and the private pools' memory (`pool_results`).  docs/database.md documents
 * every column.
 *
 * The tables under them may change (samples are stored compactly, see store-run.c); the views'
 * names and columns only grow.  A writer keeps the views of its database current: a view whose
 * text differs from this fragsim's (an older fragsim's, or one missing a metric added since) is
 * dropped and created again, under the write lock taken at open.
 */
#include <glib.h>

#include <sqlite3.h>
#include <string.h>

#include "fragsim/metrics.h"
#include "fragsim/store.h"

#include "store-private.h"

#define VIEW_METRIC(name, kind, doc) ", m." #name

/* clang-format off */
static const char view_phase_results[] =
    "CREATE VIEW phase_results AS\n"
    "  SELECT p.run_id, r.label AS run_label, p.seq AS phase, p.label AS mark,\n"
    "    CASE WHEN p.label IS NULL THEN 'start'\n"
    "         WHEN p.seq = (SELECT min(w.seq) FROM run_phases w\n"
    "                       WHERE w.run_id = p.run_id AND w.label IS NOT NULL) THEN 'warm-up'\n"
    "         ELSE 'steady' END AS stage,\n"
    "    p.event_index, p.event_index_last, p.events, p.time_ns, p.time_ns_last,\n"
    "    p.peak_requested_bytes, p.peak_allocated_bytes, p.peak_reserved_bytes,\n"
    "    p.reserved_bytes_end, p.driver_calls, p.ooms\n"
    "  FROM run_phases p JOIN runs r ON r.id = p.run_id";

static const char view_run_results[] =
    "CREATE VIEW run_results AS\n"
    "  SELECT r.id AS run_id, r.trace, r.trace_format, r.trace_device, r.policy, r.config,\n"
    "    r.label, r.device, r.device_description, r.capacity_bytes, r.total_bytes,\n"
    "    r.granularity_bytes, r.status, r.message, r.created_at, r.finished_at,\n"
    "    r.fragsim_version" FSIM_METRICS(VIEW_METRIC) ",\n"
    "    b.event_index AS peak_event_index,\n"
    "    b.live_requested_bytes AS live_requested_bytes_at_peak,\n"
    "    b.rounding_bytes AS rounding_bytes_at_peak,\n"
    "    b.free_releasable_bytes AS free_releasable_bytes_at_peak,\n"
    "    b.free_pinned_bytes AS free_pinned_bytes_at_peak,\n"
    "    (SELECT count(*) FROM run_phases p WHERE p.run_id = r.id) AS phases,\n"
    "    (SELECT max(p.peak_reserved_bytes) FROM phase_results p\n"
    "     WHERE p.run_id = r.id AND p.stage = 'warm-up') AS warmup_peak_reserved_bytes,\n"
    "    (SELECT max(p.peak_reserved_bytes) FROM phase_results p\n"
    "     WHERE p.run_id = r.id AND p.stage = 'steady') AS steady_peak_reserved_bytes,\n"
    "    (SELECT max(p.driver_calls) FROM phase_results p\n"
    "     WHERE p.run_id = r.id AND p.stage = 'warm-up') AS warmup_driver_calls,\n"
    "    (SELECT CAST(round(avg(p.driver_calls)) AS INTEGER) FROM phase_results p\n"
    "     WHERE p.run_id = r.id AND p.stage = 'steady') AS steady_driver_calls_per_phase\n"
    "  FROM runs r LEFT JOIN run_metrics m ON m.run_id = r.id\n"
    "  LEFT JOIN run_breakdown b ON b.run_id = r.id AND b.moment = 'peak'";

static const char view_run_samples[] =
    "CREATE VIEW run_samples AS\n"
    "  SELECT s.run_id, r.label AS run_label, s.seq, s.event_index, s.event_index_last,\n"
    "    s.events, s.time_ns, s.time_ns_last,\n"
    "    s.requested AS requested_bytes, s.allocated AS allocated_bytes,\n"
    "    s.reserved AS reserved_bytes,\n"
    "    s.requested_min AS requested_min_bytes, s.requested_max AS requested_max_bytes,\n"
    "    s.allocated_min AS allocated_min_bytes, s.allocated_max AS allocated_max_bytes,\n"
    "    s.reserved_min AS reserved_min_bytes, s.reserved_max AS reserved_max_bytes\n"
    "  FROM samples s JOIN runs r ON r.id = s.run_id";

static const char view_run_ooms[] =
    "CREATE VIEW run_ooms AS\n"
    "  SELECT o.run_id, r.label AS run_label, o.seq, o.event_index, o.time_ns, o.alloc_id,\n"
    "    o.size AS size_bytes, o.stream, o.reserved_bytes, o.allocated_bytes,\n"
    "    o.requested_bytes, o.largest_free_block AS largest_free_block_bytes,\n"
    "    o.device_free_bytes\n"
    "  FROM ooms o JOIN runs r ON r.id = o.run_id";

static const char view_pool_results[] =
    "CREATE VIEW pool_results AS\n"
    "  SELECT p.run_id, r.label AS run_label, p.pool, p.needed_bytes, p.peak_reserved_bytes,\n"
    "    p.reserved_bytes, p.use_count\n"
    "  FROM run_pools p JOIN runs r ON r.id = p.run_id";
/* clang-format on */

/* In dependency order: run_results reads phase_results. */
static const struct {
    const char *name;
    const char *sql;
} views[] = {
    {"phase_results", view_phase_results}, {"run_results", view_run_results},
    {"run_samples", view_run_samples},     {"run_ooms", view_run_ooms},
    {"pool_results", view_pool_results},
};

const char *const *
fsim_store_view_names(gsize *n)
{
    static const char *const names[] = {"run_results",   "run_samples",  "run_ooms",
                                        "phase_results", "pool_results", NULL};

    *n = G_N_ELEMENTS(names) - 1;
    return names;
}

/* The text SQLite keeps for view @name, or NULL when there is none. */
static char *
view_text(FsimStore *store, const char *name, GError **error, gboolean *ok)
{
    sqlite3_stmt *stmt = store_prepare(
        store, "SELECT sql FROM sqlite_schema WHERE type = 'view' AND name = ?", error);
    char *text = NULL;
    int rc = SQLITE_OK;

    *ok = FALSE;
    if (stmt == NULL)
        return NULL;
    bind_text(stmt, 1, name, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
        text = g_strdup((const char *)sqlite3_column_text(stmt, 0));
        rc = SQLITE_DONE;
    }
    *ok = store_finish(store, stmt, rc, "reading the views", error);
    return text;
}

gboolean
store_ensure_views(FsimStore *store, GError **error)
{
    gboolean stale = FALSE;

    /* A view is dropped with those after it, which may read it. */
    for (gsize i = 0; i < G_N_ELEMENTS(views); i++) {
        gboolean ok;
        g_autofree char *text = view_text(store, views[i].name, error, &ok);

        if (!ok)
            return FALSE;
        stale = stale || g_strcmp0(text, views[i].sql) != 0;
        if (stale) {
            g_autofree char *drop = g_strdup_printf("DROP VIEW IF EXISTS %s", views[i].name);

            if (!store_exec(store, drop, "replacing a view", error) ||
                !store_exec(store, views[i].sql, "creating a view", error))
                return FALSE;
        }
    }
    return TRUE;
}

gboolean
store_upgrade(FsimStore *store, int64_t version, GError **error)
{
    if (!store_exec(store, store_schema_report_sql, "adding the report's tables", error) ||
        !store_ensure_views(store, error))
        return FALSE;
    if (version < FSIM_STORE_SCHEMA_VERSION) {
        g_autofree char *pragma =
            g_strdup_printf("PRAGMA user_version = %d", FSIM_STORE_SCHEMA_VERSION);

        return store_exec(store, pragma, "upgrading the schema version", error);
    }
    return TRUE;
}
