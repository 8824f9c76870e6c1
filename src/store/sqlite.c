/* SPDX-License-Identifier: MIT */
/*
 * The results database: SQLite, written by an engine observer, read by plots and reports.
 *
 * The contract is in store.h and the schema in docs/metrics.md.  How it is kept here:
 *
 * - Crash safety.  A run's row is committed on its own (status `running`) when the run is
 *   attached; everything else is collected in bounded memory and written, with the final status,
 *   in one IMMEDIATE transaction at the end.  WAL journalling with synchronous=NORMAL makes a
 *   committed transaction survive a killed process (not a power cut, which is fine: results can
 *   be regenerated).  So a SIGKILL at any moment leaves a run either `running` without data, or
 *   complete.  Collecting in memory is also what lets several runs replayed in lock step share
 *   one connection, which has one transaction at a time.
 *
 * - Bounded data.  Samples are buckets of consecutive events whose width doubles whenever
 *   max_samples buckets are full (pairs are merged), keeping each bucket's min and max: memory
 *   and rows stay below max_samples + 1 whatever the trace length, and no peak is lost.  Block
 *   lifetimes (for address maps) are kept in a min-heap on size x lifetime, so the blocks an
 *   address map can show survive.  Segment actions, OOM records and marks keep the first N.
 *
 * - Errors.  Every sqlite3_* return code is checked.  Binds go through helpers that keep the
 *   first failing code, checked once before the step.  The message always names the file.
 *
 * - Identity.  `PRAGMA application_id` marks the file as fragsim's and `user_version` holds the
 *   schema version; anything else is refused before it is touched (WAL is only switched on
 *   after the check).  New metrics (FSIM_METRICS grows) are added to `run_metrics` as columns on
 *   open, so older databases keep working; readers use NULL for missing columns.
 *
 * - Concurrent writers.  Any number of processes may write to one database, new or not.  A new
 *   database is built complete under a private name and linked into place, so no process ever
 *   sees it half made, and of two creators the second simply uses the first one's file.  The
 *   identity check, the schema of an empty file and new metric columns are read and written
 *   under the write lock (BEGIN IMMEDIATE), so what was checked cannot change before it is
 *   acted on.  No file but a process's own private one is ever removed.  Waits for the lock
 *   end after the busy timeout with FSIM_STORE_ERROR_BUSY.
 */
/* link(), close(), O_CLOEXEC */
#define _XOPEN_SOURCE 700

#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

#include "fragsim/store.h"

#include "store-private.h"

GQuark
fsim_store_error_quark(void)
{
    return g_quark_from_static_string("fsim-store-error-quark");
}

/* ---- schema -------------------------------------------------------------------------------- */

#define STORE_SQL_TYPE_U                     "INTEGER"
#define STORE_SQL_TYPE_F                     "REAL"
#define STORE_SQL_TYPE_I                     "INTEGER"
#define STORE_METRIC_COLUMN(name, kind, doc) ",\n  " #name " " STORE_SQL_TYPE_##kind
#define STORE_METRIC_NAME(name, kind, doc)   ", " #name
#define STORE_METRIC_PARAM(name, kind, doc)  ", ?"

/* clang-format off */
static const char schema_sql[] =
    "CREATE TABLE runs (\n"
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  trace TEXT NOT NULL,\n"
    "  trace_format TEXT NOT NULL,\n"
    "  trace_device INTEGER NOT NULL,\n"
    "  policy TEXT NOT NULL,\n"
    "  device TEXT NOT NULL,\n"
    "  device_description TEXT NOT NULL,\n"
    "  capacity_bytes INTEGER NOT NULL,\n"
    "  total_bytes INTEGER NOT NULL,\n"
    "  granularity_bytes INTEGER NOT NULL,\n"
    "  knobs TEXT NOT NULL,\n"
    "  seed INTEGER,\n"
    "  status TEXT NOT NULL\n"
    "    CHECK (status IN ('running', 'complete', 'oom', 'error', 'failed')),\n"
    "  message TEXT,\n"
    "  created_at TEXT NOT NULL,\n"
    "  finished_at TEXT,\n"
    "  fragsim_version TEXT NOT NULL,\n"
    "  max_samples INTEGER NOT NULL,\n"
    "  segment_actions INTEGER,\n"
    "  segment_actions_stored INTEGER,\n"
    "  blocks INTEGER,\n"
    "  blocks_stored INTEGER,\n"
    "  config TEXT NOT NULL DEFAULT '',\n"
    "  label TEXT NOT NULL DEFAULT ''\n"
    ");\n";
/* The rest of the schema (a second string: ISO C caps one at 4095 characters). */
static const char schema_more_sql[] =
    "CREATE TABLE run_metrics (\n"
    "  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE"
    FSIM_METRICS(STORE_METRIC_COLUMN) "\n"
    ");\n"
    "CREATE TABLE samples (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL,\n"
    "  event_index INTEGER NOT NULL,\n"
    "  event_index_last INTEGER NOT NULL,\n"
    "  events INTEGER NOT NULL,\n"
    "  time_ns INTEGER NOT NULL,\n"
    "  time_ns_last INTEGER NOT NULL,\n"
    "  requested INTEGER NOT NULL,\n"
    "  allocated INTEGER NOT NULL,\n"
    "  reserved INTEGER NOT NULL,\n"
    "  requested_min INTEGER NOT NULL,\n"
    "  requested_max INTEGER NOT NULL,\n"
    "  allocated_min INTEGER NOT NULL,\n"
    "  allocated_max INTEGER NOT NULL,\n"
    "  reserved_min INTEGER NOT NULL,\n"
    "  reserved_max INTEGER NOT NULL,\n"
    "  PRIMARY KEY (run_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE ooms (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL,\n"
    "  event_index INTEGER NOT NULL,\n"
    "  time_ns INTEGER NOT NULL,\n"
    "  alloc_id INTEGER NOT NULL,\n"
    "  size INTEGER NOT NULL,\n"
    "  stream INTEGER NOT NULL,\n"
    "  reserved_bytes INTEGER NOT NULL,\n"
    "  allocated_bytes INTEGER NOT NULL,\n"
    "  requested_bytes INTEGER NOT NULL,\n"
    "  largest_free_block INTEGER NOT NULL,\n"
    "  device_free_bytes INTEGER NOT NULL,\n"
    "  PRIMARY KEY (run_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE segments (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL,\n"
    "  event_index INTEGER,\n"
    "  time_ns INTEGER NOT NULL,\n"
    "  action TEXT NOT NULL,\n"
    "  address INTEGER NOT NULL,\n"
    "  size INTEGER NOT NULL,\n"
    "  PRIMARY KEY (run_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE blocks (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL,\n"
    "  alloc_id INTEGER NOT NULL,\n"
    "  address INTEGER NOT NULL,\n"
    "  size INTEGER NOT NULL,\n"
    "  requested INTEGER NOT NULL,\n"
    "  stream INTEGER NOT NULL,\n"
    "  alloc_event INTEGER,\n"
    "  alloc_time_ns INTEGER NOT NULL,\n"
    "  free_event INTEGER,\n"
    "  free_time_ns INTEGER NOT NULL,\n"
    "  PRIMARY KEY (run_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE marks (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL,\n"
    "  event_index INTEGER NOT NULL,\n"
    "  time_ns INTEGER NOT NULL,\n"
    "  label TEXT NOT NULL,\n"
    "  PRIMARY KEY (run_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE sizes (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  log2 INTEGER NOT NULL,\n"
    "  count INTEGER NOT NULL,\n"
    "  bytes INTEGER NOT NULL,\n"
    "  PRIMARY KEY (run_id, log2)\n"
    ") WITHOUT ROWID;\n"
    "CREATE VIEW run_summary AS\n"
    "  SELECT r.id, r.trace, r.trace_device, r.label, r.policy, r.config, r.device,\n"
    "         r.capacity_bytes, r.status, m.needed_bytes, m.peak_requested_bytes, m.peak_allocated_bytes, m.peak_reserved_bytes,\n"
    "         m.excess_over_lower_bound_bytes, m.peak_utilization, m.external_frag_at_peak,\n"
    "         m.ooms, r.created_at\n"
    "  FROM runs r LEFT JOIN run_metrics m ON m.run_id = r.id;\n";
/* The report's tables (schema version 2): the breakdown of reserved memory at the peak and the
 * figures of each phase between marks.  IF NOT EXISTS: the same text upgrades a version 1 file. */
const char store_schema_report_sql[] =
    "CREATE TABLE IF NOT EXISTS run_breakdown (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  moment TEXT NOT NULL,\n"
    "  event_index INTEGER,\n"
    "  time_ns INTEGER NOT NULL,\n"
    "  reserved_bytes INTEGER NOT NULL,\n"
    "  live_requested_bytes INTEGER NOT NULL,\n"
    "  rounding_bytes INTEGER NOT NULL,\n"
    "  free_releasable_bytes INTEGER NOT NULL,\n"
    "  free_pinned_bytes INTEGER NOT NULL,\n"
    "  PRIMARY KEY (run_id, moment)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE IF NOT EXISTS run_phases (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  seq INTEGER NOT NULL,\n"
    "  label TEXT,\n"
    "  event_index INTEGER NOT NULL,\n"
    "  event_index_last INTEGER NOT NULL,\n"
    "  events INTEGER NOT NULL,\n"
    "  time_ns INTEGER NOT NULL,\n"
    "  time_ns_last INTEGER NOT NULL,\n"
    "  peak_requested_bytes INTEGER NOT NULL,\n"
    "  peak_allocated_bytes INTEGER NOT NULL,\n"
    "  peak_reserved_bytes INTEGER NOT NULL,\n"
    "  reserved_bytes_end INTEGER NOT NULL,\n"
    "  driver_calls INTEGER NOT NULL,\n"
    "  ooms INTEGER NOT NULL,\n"
    "  PRIMARY KEY (run_id, seq)\n"
    ") WITHOUT ROWID;\n"
    "CREATE TABLE IF NOT EXISTS run_packed (\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  kind TEXT NOT NULL CHECK (kind IN ('blocks', 'segments')),\n"
    "  seq INTEGER NOT NULL,\n"
    "  rows INTEGER NOT NULL,\n"
    "  data BLOB NOT NULL,\n"
    "  PRIMARY KEY (run_id, kind, seq)\n"
    ");\n";
/* -- tune: the setting `fragsim tune --db` recommends (runs.id of its default and of the setting) */
static const char schema_tune_sql[] =
    "CREATE TABLE IF NOT EXISTS recommendations (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  trace TEXT,\n"
    "  trace_device INTEGER,\n"
    "  device TEXT,\n"
    "  default_run_id INTEGER,\n"
    "  run_id INTEGER,\n"
    "  config TEXT,\n"
    "  env TEXT,\n"
    "  needed_bytes INTEGER,\n"
    "  saving_bytes INTEGER,\n"
    "  candidates INTEGER,\n"
    "  created_at TEXT\n"
    ");\n";
/* -- end of tune */
/* Schema version 2, sweeps: each run's job identity.  trace_sha256 is the SHA-256 of the trace
 * file (hex), what `merge` recognises a job by wherever the file lay; job is the name of the
 * sweep job the trace is a rank of (`jobs=NAME:GLOB`), NULL outside one.  Added to an older
 * database on open, like the metric columns (store_prepare_runs()). */
static const char schema_sweep_sql[] =
    "ALTER TABLE runs ADD COLUMN trace_sha256 TEXT;\n"
    "ALTER TABLE runs ADD COLUMN job TEXT;\n";
/* clang-format on */

/* ---- statements ---------------------------------------------------------------------------- */

/* clang-format off */
static const char *const stmt_sql[STMT_COUNT] = {
    [STMT_BEGIN] = "BEGIN IMMEDIATE",
    [STMT_COMMIT] = "COMMIT",
    [STMT_ROLLBACK] = "ROLLBACK",
    [STMT_INSERT_RUN] =
        "INSERT INTO runs (trace, trace_format, trace_device, policy, device, device_description,"
        " capacity_bytes, total_bytes, granularity_bytes, knobs, seed, status, created_at,"
        " fragsim_version, max_samples, config, label, trace_sha256, job)"
        " VALUES (?2, ?8, ?3, ?4, ?6, ?9, ?10, ?11, ?12, ?13, ?14, 'running', ?15, ?16, ?17, ?5,"
        " ?18, ?1, ?7)", /* ?1-?7: store_bind_run_key() */
    [STMT_FINISH_RUN] =
        "UPDATE runs SET status = ?, finished_at = ?, segment_actions = ?,"
        " segment_actions_stored = ?, blocks = ?, blocks_stored = ? WHERE id = ?",
    [STMT_FAIL_RUN] =
        "UPDATE runs SET status = ?, message = ?, finished_at = ? WHERE id = ?",
    [STMT_INSERT_METRICS] =
        "INSERT INTO run_metrics (run_id" FSIM_METRICS(STORE_METRIC_NAME) ") VALUES (?"
        FSIM_METRICS(STORE_METRIC_PARAM) ")",
    [STMT_INSERT_SAMPLE] =
        "INSERT INTO samples (run_id, seq, event_index, event_index_last, events, time_ns,"
        " time_ns_last, requested, allocated, reserved, requested_min, requested_max,"
        " allocated_min, allocated_max, reserved_min, reserved_max)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    [STMT_INSERT_OOM] =
        "INSERT INTO ooms (run_id, seq, event_index, time_ns, alloc_id, size, stream,"
        " reserved_bytes, allocated_bytes, requested_bytes, largest_free_block,"
        " device_free_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    [STMT_INSERT_SEGMENT] =
        "INSERT INTO segments (run_id, seq, event_index, time_ns, action, address, size)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
    [STMT_INSERT_BLOCK] =
        "INSERT INTO blocks (run_id, seq, alloc_id, address, size, requested, stream,"
        " alloc_event, alloc_time_ns, free_event, free_time_ns)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    [STMT_INSERT_MARK] =
        "INSERT INTO marks (run_id, seq, event_index, time_ns, label) VALUES (?, ?, ?, ?, ?)",
    [STMT_INSERT_SIZE] =
        "INSERT INTO sizes (run_id, log2, count, bytes) VALUES (?, ?, ?, ?)",
    [STMT_SELECT_SAMPLES] =
        "SELECT event_index, event_index_last, events, time_ns, time_ns_last, requested,"
        " allocated, reserved, requested_min, requested_max, allocated_min, allocated_max,"
        " reserved_min, reserved_max FROM samples WHERE run_id = ? ORDER BY seq",
    [STMT_SELECT_OOMS] =
        "SELECT event_index, time_ns, alloc_id, size, stream, reserved_bytes, allocated_bytes,"
        " requested_bytes, largest_free_block, device_free_bytes FROM ooms WHERE run_id = ?"
        " ORDER BY seq",
    [STMT_SELECT_SEGMENTS] =
        "SELECT event_index, time_ns, action, address, size FROM segments WHERE run_id = ?"
        " ORDER BY seq",
    [STMT_SELECT_BLOCKS] =
        "SELECT alloc_id, address, size, requested, stream, alloc_event, alloc_time_ns,"
        " free_event, free_time_ns FROM blocks WHERE run_id = ? ORDER BY seq",
    [STMT_SELECT_MARKS] =
        "SELECT event_index, time_ns, label FROM marks WHERE run_id = ? ORDER BY seq",
    [STMT_SELECT_SIZES] =
        "SELECT log2, count, bytes FROM sizes WHERE run_id = ? ORDER BY log2",
    [STMT_INSERT_BREAKDOWN] =
        "INSERT INTO run_breakdown (run_id, moment, event_index, time_ns, reserved_bytes,"
        " live_requested_bytes, rounding_bytes, free_releasable_bytes, free_pinned_bytes)"
        " VALUES (?, 'peak', ?, ?, ?, ?, ?, ?, ?)",
    [STMT_INSERT_PHASE] =
        "INSERT INTO run_phases (run_id, seq, label, event_index, event_index_last, events,"
        " time_ns, time_ns_last, peak_requested_bytes, peak_allocated_bytes, peak_reserved_bytes,"
        " reserved_bytes_end, driver_calls, ooms)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    [STMT_SELECT_BREAKDOWN] =
        "SELECT event_index, time_ns, reserved_bytes, live_requested_bytes, rounding_bytes,"
        " free_releasable_bytes, free_pinned_bytes FROM run_breakdown"
        " WHERE run_id = ? AND moment = 'peak'",
    [STMT_INSERT_PACKED] =
        "INSERT INTO run_packed (run_id, kind, seq, rows, data) VALUES (?, ?, ?, ?, ?)",
    [STMT_SELECT_PACKED] =
        "SELECT rows, data FROM run_packed WHERE run_id = ? AND kind = ? ORDER BY seq",
    [STMT_SELECT_PHASES] =
        "SELECT label, event_index, event_index_last, events, time_ns, time_ns_last,"
        " peak_requested_bytes, peak_allocated_bytes, peak_reserved_bytes, reserved_bytes_end,"
        " driver_calls, ooms FROM run_phases WHERE run_id = ? ORDER BY seq",
};
/* clang-format on */

static FsimStoreError
store_error_code(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return FSIM_STORE_ERROR_FULL;
    case SQLITE_READONLY:
        return FSIM_STORE_ERROR_READ_ONLY;
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return FSIM_STORE_ERROR_OPEN;
    case SQLITE_NOTADB:
        return FSIM_STORE_ERROR_NOT_FRAGSIM;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return FSIM_STORE_ERROR_BUSY;
    default:
        return FSIM_STORE_ERROR_FAILED;
    }
}

/* Turn a failed SQLite call into a GError naming the file.  Call it before anything else touches
 * the connection, which would overwrite sqlite3_errmsg(). */
gboolean
store_fail(FsimStore *store, int rc, const char *what, GError **error)
{
    const char *message = store->db != NULL ? sqlite3_errmsg(store->db) : sqlite3_errstr(rc);
    FsimStoreError code = store_error_code(rc);

    if (code == FSIM_STORE_ERROR_NOT_FRAGSIM)
        g_set_error(error, FSIM_STORE_ERROR, code,
                    "%s: not a fragsim results database (not an SQLite database at all: %s)",
                    store->path, message);
    else if (code == FSIM_STORE_ERROR_FULL)
        g_set_error(error, FSIM_STORE_ERROR, code, "%s: %s: the disk is full (%s)", store->path,
                    what, message);
    else
        g_set_error(error, FSIM_STORE_ERROR, code, "%s: %s: %s", store->path, what, message);
    return FALSE;
}

/* Run SQL without parameters or results (schema, pragmas, views). */
gboolean
store_exec(FsimStore *store, const char *sql, const char *what, GError **error)
{
    char *message = NULL;
    int rc = sqlite3_exec(store->db, sql, NULL, NULL, &message);

    if (rc != SQLITE_OK) {
        g_autofree char *text = g_strdup(message != NULL ? message : sqlite3_errstr(rc));

        sqlite3_free(message);
        if (store_error_code(rc) == FSIM_STORE_ERROR_NOT_FRAGSIM)
            return store_fail(store, rc, what, error);
        g_set_error(error, FSIM_STORE_ERROR, store_error_code(rc), "%s: %s: %s%s", store->path,
                    what, text,
                    store_error_code(rc) == FSIM_STORE_ERROR_FULL ? " (the disk is full)" : "");
        return FALSE;
    }
    return TRUE;
}

sqlite3_stmt *
store_prepare(FsimStore *store, const char *sql, GError **error)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v3(store->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL);

    if (rc != SQLITE_OK) {
        store_fail(store, rc, "preparing a statement", error);
        return NULL;
    }
    return stmt;
}

/* The statement @which, prepared on first use and reset for the next. */
sqlite3_stmt *
store_stmt(FsimStore *store, StoreStmt which, GError **error)
{
    sqlite3_stmt *stmt = store->stmts[which];

    if (stmt == NULL) {
        stmt = store_prepare(store, stmt_sql[which], error);
        store->stmts[which] = stmt;
        return stmt;
    }
    /* reset returns the error of the previous step, already reported; clear_bindings only
     * fails on a NULL statement. */
    (void)sqlite3_reset(stmt);
    (void)sqlite3_clear_bindings(stmt);
    return stmt;
}

/* Step a bound write statement to completion. */
gboolean
store_step_done(FsimStore *store, sqlite3_stmt *stmt, int rc, const char *what, GError **error)
{
    if (rc != SQLITE_OK)
        return store_fail(store, rc, what, error);
    rc = sqlite3_step(stmt);
    if (rc != SQLITE_DONE)
        return store_fail(store, rc, what, error);
    return TRUE;
}

/* Finalize a prepared statement after its last step, @rc; FALSE (@what failed) unless it was
 * SQLITE_DONE.  The error is read before the statement goes. */
gboolean
store_finish(FsimStore *store, sqlite3_stmt *stmt, int rc, const char *what, GError **error)
{
    gboolean done = rc == SQLITE_DONE || store_fail(store, rc, what, error);

    (void)sqlite3_finalize(stmt);
    return done;
}

gboolean
store_run_simple(FsimStore *store, StoreStmt which, const char *what, GError **error)
{
    sqlite3_stmt *stmt = store_stmt(store, which, error);

    return stmt != NULL && store_step_done(store, stmt, SQLITE_OK, what, error);
}

char *
store_now(void)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();

    return g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
}

/* ---- open ---------------------------------------------------------------------------------- */

static gboolean
store_pragma_int(FsimStore *store, const char *sql, int64_t *out, GError **error)
{
    g_autofree char *what = g_strdup_printf("reading %s", sql);
    sqlite3_stmt *stmt = store_prepare(store, sql, error);
    int rc;

    if (stmt == NULL)
        return FALSE;
    rc = sqlite3_step(stmt);
    if (rc != SQLITE_ROW) {
        store_fail(store, rc, what, error);
        (void)sqlite3_finalize(stmt);
        return FALSE;
    }
    *out = sqlite3_column_int64(stmt, 0);
    rc = sqlite3_finalize(stmt);
    if (rc != SQLITE_OK)
        return store_fail(store, rc, what, error);
    return TRUE;
}

/* The metric columns run_metrics has, to build the reader's column list and add new ones. */
static GHashTable *
store_table_columns(FsimStore *store, const char *table, GError **error)
{
    g_autoptr(GHashTable) columns = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autofree char *sql = g_strdup_printf("SELECT name FROM pragma_table_info('%s')", table);
    sqlite3_stmt *stmt = store_prepare(store, sql, error);
    int rc;

    if (stmt == NULL)
        return NULL;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
        g_hash_table_add(columns, g_strdup((const char *)sqlite3_column_text(stmt, 0)));
    if (!store_finish(store, stmt, rc, "reading a table's columns", error))
        return NULL;
    return g_steal_pointer(&columns);
}

static const char run_columns_sql[] =
    "r.id, r.trace, r.trace_format, r.trace_device, r.policy, r.device, r.device_description,"
    " r.capacity_bytes, r.total_bytes, r.granularity_bytes, r.knobs, r.seed, r.status, r.message,"
    " r.created_at, r.finished_at, r.fragsim_version, r.segment_actions,"
    " r.segment_actions_stored, r.blocks, r.blocks_stored, m.run_id";

/* The runs columns added to version 1 (config, label: read as '' when missing) and by version 2
 * (trace_sha256, job: NULL when missing; schema_sweep_sql): added when writable, and the file
 * then marked version 2; and whether the status check allows `error`. */
static gboolean
store_prepare_runs(FsimStore *store, GString *sql, GError **error)
{
    static const struct {
        const char *name;
        const char *type;
        const char *missing;
    } added[] = {
        {"config", "TEXT NOT NULL DEFAULT ''", "''"},
        {"label", "TEXT NOT NULL DEFAULT ''", "''"},
        {"trace_sha256", "TEXT", "NULL"},
        {"job", "TEXT", "NULL"},
    };
    g_autoptr(GHashTable) columns = store_table_columns(store, "runs", error);
    sqlite3_stmt *stmt;
    gboolean upgraded = FALSE;

    if (columns == NULL)
        return FALSE;
    for (gsize i = 0; i < G_N_ELEMENTS(added); i++) {
        gboolean present = g_hash_table_contains(columns, added[i].name);

        if (!present && store->writable) {
            g_autofree char *alter =
                g_strdup_printf("ALTER TABLE runs ADD COLUMN %s %s", added[i].name, added[i].type);

            if (!store_exec(store, alter, "adding a runs column", error))
                return FALSE;
            present = upgraded = TRUE;
        }
        if (present)
            g_string_append_printf(sql, ", r.%s", added[i].name);
        else
            g_string_append_printf(sql, ", %s AS %s", added[i].missing, added[i].name);
    }
    if (upgraded) {
        g_autofree char *version =
            g_strdup_printf("PRAGMA user_version = %d", FSIM_STORE_SCHEMA_VERSION);

        if (!store_exec(store, version, "upgrading the schema", error))
            return FALSE;
    }
    stmt = store_prepare(store,
                         "SELECT count(*) FROM sqlite_schema WHERE name = 'runs'"
                         " AND sql LIKE '%''error''%'",
                         error);
    if (stmt == NULL)
        return FALSE;
    store->has_error_status = sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_int(stmt, 0) > 0;
    (void)sqlite3_finalize(stmt);
    return TRUE;
}

/* Check the metric columns: add the missing ones when writable; build the reader's SELECT. */
static gboolean
store_prepare_metrics(FsimStore *store, GError **error)
{
    g_autoptr(GHashTable) columns = store_table_columns(store, "run_metrics", error);
    g_autoptr(GString) sql = g_string_new("SELECT ");
    gsize n;
    const FsimMetricInfo *info = fsim_metrics_list(&n);

    if (columns == NULL)
        return FALSE;
    g_string_append(sql, run_columns_sql);
    if (!store_prepare_runs(store, sql, error))
        return FALSE;
    for (gsize i = 0; i < n; i++) {
        gboolean present = g_hash_table_contains(columns, info[i].name);

        if (!present && store->writable) {
            /* Names come from the compiled-in metric table, never from input. */
            g_autofree char *alter =
                g_strdup_printf("ALTER TABLE run_metrics ADD COLUMN %s %s", info[i].name,
                                info[i].kind == FSIM_METRIC_DOUBLE ? "REAL" : "INTEGER");

            if (!store_exec(store, alter, "adding a metric column", error))
                return FALSE;
            present = TRUE;
        }
        g_string_append_printf(sql, present ? ", m.%s" : ", NULL AS %s", info[i].name);
    }
    g_string_append(sql, " FROM runs r LEFT JOIN run_metrics m ON m.run_id = r.id");
    store->select_runs_sql = g_string_free(g_steal_pointer(&sql), FALSE);
    return TRUE;
}

/* Writes the schema and the identity into an empty database, inside the caller's transaction. */
static gboolean
store_create_schema(FsimStore *store, GError **error)
{
    g_autofree char *pragmas =
        g_strdup_printf("PRAGMA application_id = %d; PRAGMA user_version = %d;",
                        FSIM_STORE_APPLICATION_ID, FSIM_STORE_SCHEMA_VERSION);

    return store_exec(store, schema_sql, "creating the schema", error) &&
           store_exec(store, schema_more_sql, "creating the schema", error) &&
           store_exec(store, store_schema_report_sql, "creating the schema", error) &&
           store_exec(store, schema_tune_sql, "creating the schema", error) &&
           store_exec(store, schema_sweep_sql, "creating the schema", error) &&
           store_ensure_views(store, error) &&
           store_exec(store, pragmas, "creating the schema", error);
}

/* -- tune: a writer adds the recommendations table to an older database (store_upgrade() then
 * marks it with this version). */
static gboolean
store_upgrade_tune(FsimStore *store, GError **error)
{
    return store_exec(store, schema_tune_sql, "adding the recommendations table", error);
}

/* Decides whether the file is a fragsim database; creates the schema in an empty one when
 * writable.  A writer calls it with the write lock held (BEGIN IMMEDIATE), so that what it reads
 * cannot change before it acts: of two processes finding the same empty file, the second sees
 * the first one's schema. */
static gboolean
store_check_identity(FsimStore *store, GError **error)
{
    int64_t application_id = 0;
    int64_t version = 0;
    int64_t objects = 0;

    if (!store_pragma_int(store, "PRAGMA application_id", &application_id, error) ||
        !store_pragma_int(store, "PRAGMA user_version", &version, error) ||
        !store_pragma_int(store, "SELECT count(*) FROM sqlite_schema", &objects, error))
        return FALSE;
    if (application_id == FSIM_STORE_APPLICATION_ID) {
        if (version > FSIM_STORE_SCHEMA_VERSION) {
            g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NEWER,
                        "%s: written by a newer fragsim (schema version %" G_GINT64_FORMAT
                        "; this fragsim %s reads up to version %d): upgrade fragsim",
                        store->path, version, FSIM_VERSION, FSIM_STORE_SCHEMA_VERSION);
            return FALSE;
        }
        if (version < 1) {
            g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NOT_FRAGSIM,
                        "%s: a fragsim database with an invalid schema version %" G_GINT64_FORMAT,
                        store->path, version);
            return FALSE;
        }
        return TRUE;
    }
    if (application_id != 0 || objects != 0) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NOT_FRAGSIM,
                    "%s: not a fragsim results database (a SQLite database of another program: "
                    "application_id %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                    " tables and indexes); use another file",
                    store->path, application_id, objects);
        return FALSE;
    }
    if (!store->writable) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NOT_FRAGSIM,
                    "%s: not a fragsim results database (it is empty); write one with "
                    "'fragsim replay TRACE --db %s'",
                    store->path, store->path);
        return FALSE;
    }
    return store_create_schema(store, error);
}

/* Opens the connection of @store to @file (@store->path is the name shown in messages) and sets
 * it up: extended result codes, the busy timeout, the page limit. */
static gboolean
store_connect(FsimStore *store, const char *file, int open_flags, const FsimStoreOptions *options,
              GError **error)
{
    int rc = sqlite3_open_v2(file, &store->db, open_flags | SQLITE_OPEN_NOMUTEX, NULL);

    if (rc != SQLITE_OK) {
        const char *reason = store->db != NULL ? sqlite3_errmsg(store->db) : sqlite3_errstr(rc);

        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN,
                    "%s: cannot %s the results database: %s", store->path,
                    (open_flags & SQLITE_OPEN_CREATE) ? "create" : "open", reason);
        return FALSE;
    }
    store->busy_timeout_ms = options != NULL && options->busy_timeout_ms != 0
                                 ? options->busy_timeout_ms
                                 : STORE_DEFAULT_BUSY_MS;
    rc = sqlite3_extended_result_codes(store->db, 1);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(store->db, (int)store->busy_timeout_ms);
    if (rc != SQLITE_OK)
        return store_fail(store, rc, "configuring the connection", error);
    if (options != NULL && options->max_page_count != 0) {
        g_autofree char *sql =
            g_strdup_printf("PRAGMA max_page_count = %" G_GUINT64_FORMAT, options->max_page_count);

        if (!store_exec(store, sql, "limiting the database size", error))
            return FALSE;
    }
    return TRUE;
}

/* Runs @sql (PRAGMA journal_mode = ...), which answers with one row.  Switching a file to WAL
 * needs a moment with no other connection reading it, and SQLite answers SQLITE_BUSY at once,
 * without its busy handler, when waiting could deadlock (another connection of a concurrent
 * writer holds a lock it is about to upgrade): the switch is retried here, with short sleeps,
 * for as long as the busy timeout allows. */
static gboolean
store_journal_mode(FsimStore *store, const char *sql, GError **error)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)store->busy_timeout_ms * 1000;
    guint sleep_us = 1000;
    int rc;

    for (;;) {
        sqlite3_stmt *stmt = store_prepare(store, sql, error);

        if (stmt == NULL)
            return FALSE;
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
            if (g_ascii_strcasecmp((const char *)sqlite3_column_text(stmt, 0), "wal") != 0)
                g_debug("%s: journal mode %s, not wal", store->path, sqlite3_column_text(stmt, 0));
            rc = sqlite3_finalize(stmt);
            if (rc != SQLITE_OK)
                return store_fail(store, rc, "switching to WAL journalling", error);
            return TRUE;
        }
        (void)sqlite3_finalize(stmt);
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            break;
        if (g_get_monotonic_time() >= deadline)
            break;
        g_usleep(sleep_us);
        sleep_us = MIN(sleep_us * 2, 50000);
    }
    return store_fail(store, rc, "switching to WAL journalling", error);
}

/* Removes a database file this process created under a private name, with its companions. */
static void
store_remove_private(const char *file)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};

    for (gsize i = 0; i < G_N_ELEMENTS(suffixes); i++) {
        g_autofree char *name = g_strconcat(file, suffixes[i], NULL);

        (void)g_unlink(name);
    }
}

/* A new, empty file beside @path under a private name: *@file is its name. */
static gboolean
store_private_file(const char *path, char **file, GError **error)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        g_autofree char *name = g_strdup_printf("%s.%08x.new", path, g_random_int());
        int fd = g_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);

        if (fd >= 0) {
            (void)close(fd);
            *file = g_steal_pointer(&name);
            return TRUE;
        }
        if (errno != EEXIST) {
            int saved = errno;

            g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN,
                        "%s: cannot create the results database: %s", path, g_strerror(saved));
            return FALSE;
        }
    }
    g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN,
                "%s: cannot create the results database: no free temporary name", path);
    return FALSE;
}

/* Creates the database @path complete (schema, identity, WAL) without ever letting anyone see
 * it half made: it is built under a private name and linked into place, which fails harmlessly
 * when another process got there first (theirs is then used).  Nothing but the private file is
 * ever removed, so a database another process created and wrote to is never deleted.
 * *@linked is FALSE when the file system cannot link (the caller then creates in place). */
static gboolean
store_create_file(const char *path, const FsimStoreOptions *options, gboolean *linked,
                  GError **error)
{
    g_autofree char *file = NULL;
    g_autofree char *name = g_strdup(path);
    FsimStore tmp = {.path = name, .writable = TRUE};
    gboolean ok;

    *linked = FALSE;
    if (!store_private_file(path, &file, error))
        return FALSE;
    ok = store_connect(&tmp, file, SQLITE_OPEN_READWRITE, options, error) &&
         store_exec(&tmp, "BEGIN IMMEDIATE", "creating the schema", error) &&
         store_create_schema(&tmp, error) &&
         store_exec(&tmp, "COMMIT", "creating the schema", error) &&
         store_journal_mode(&tmp, "PRAGMA journal_mode = WAL", error);
    if (tmp.db != NULL && sqlite3_close(tmp.db) != SQLITE_OK && ok) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_FAILED,
                    "%s: creating the schema: cannot close the new database", path);
        ok = FALSE;
    }
    if (ok && link(file, path) == 0)
        *linked = TRUE;
    else if (ok && errno == EEXIST)
        *linked = TRUE; /* another process created it meanwhile: use theirs */
    store_remove_private(file);
    return ok;
}

/* Which of the tables added after schema version 1 the file has (a version 1 file opened for
 * reading has none of them: readers then find no breakdowns and no phases). */
static gboolean
store_check_tables(FsimStore *store, GError **error)
{
    int64_t count = 0;

    if (!store_pragma_int(store,
                          "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
                          "('run_breakdown', 'run_phases', 'run_packed')",
                          &count, error))
        return FALSE;
    store->has_report_tables = count == 3;
    return TRUE;
}

/* With the write lock held: the identity, the schema of an empty file, new metric columns, the
 * tables and views of later schema versions. */
static gboolean
store_setup_locked(FsimStore *store, GError **error)
{
    int64_t version = 0;

    if (!store->writable)
        return store_check_identity(store, error) && store_prepare_metrics(store, error) &&
               store_check_tables(store, error) && store_pools_setup(store, error);
    if (!store_exec(store, "BEGIN IMMEDIATE", "locking the database", error))
        return FALSE;
    if (!store_check_identity(store, error) || !store_prepare_metrics(store, error) ||
        !store_pragma_int(store, "PRAGMA user_version", &version, error) ||
        !store_upgrade_tune(store, error) || !store_upgrade(store, version, error) ||
        !store_check_tables(store, error) || !store_pools_setup(store, error) ||
        !store_exec(store, "COMMIT", "creating the schema", error)) {
        /* The rollback fails harmlessly when the transaction is already gone. */
        (void)sqlite3_exec(store->db, "ROLLBACK", NULL, NULL, NULL);
        return FALSE;
    }
    return TRUE;
}

static gboolean
store_is_memory(const char *path)
{
    return strcmp(path, ":memory:") == 0 || path[0] == '\0';
}

FsimStore *
fsim_store_open(const char *path, FsimStoreFlags flags, const FsimStoreOptions *options,
                GError **error)
{
    g_autoptr(FsimStore) store = NULL;
    gboolean writable = (flags & FSIM_STORE_WRITE) != 0;
    gboolean memory;
    gboolean existed;
    gboolean linked = FALSE;
    int open_flags;

    g_return_val_if_fail(path != NULL, NULL);
    memory = store_is_memory(path);
    existed = memory || g_file_test(path, G_FILE_TEST_EXISTS);
    if (!memory && existed && g_file_test(path, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN,
                    "%s: is a directory, not a results database", path);
        return NULL;
    }
    if (!writable && !existed) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN,
                    "%s: no such results database (write one with 'fragsim replay TRACE --db "
                    "%s')",
                    path, path);
        return NULL;
    }
    if (writable && !existed && !store_create_file(path, options, &linked, error))
        return NULL;
    store = g_new0(FsimStore, 1);
    store->path = g_strdup(path);
    store->writable = writable;
    /* Readers open read-write too (without creating), so that when the last connection closes
     * SQLite checkpoints and removes the -wal and -shm files; a read-only connection would leave
     * them beside the database.  SQLite falls back to read-only on a write-protected file, and
     * nothing here writes unless @writable.  A writer creates in place only where the file
     * system cannot link; the schema is then written under the lock like any empty file's. */
    open_flags = SQLITE_OPEN_READWRITE;
    if (writable && (memory || (!existed && !linked)))
        open_flags |= SQLITE_OPEN_CREATE;
    if (!store_connect(store, path, open_flags, options, error) ||
        !store_setup_locked(store, error))
        return NULL;
    /* Only now, with the file known to be ours, may it be changed.  A no-op on a file created
     * above; old databases in rollback mode are switched. */
    if (writable && !memory && !store_journal_mode(store, "PRAGMA journal_mode = WAL", error))
        return NULL;
    if (writable && !store_exec(store, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON",
                                "configuring the connection", error))
        return NULL;
    return g_steal_pointer(&store);
}

void
fsim_store_close(FsimStore *store)
{
    int rc;

    if (store == NULL)
        return;
    if (store->attached != 0)
        g_critical("fsim_store_close: %u runs of %s are still attached", store->attached,
                   store->path);
    for (guint i = 0; i < STMT_COUNT; i++)
        /* finalize returns the last step's error, already reported */
        (void)sqlite3_finalize(store->stmts[i]);
    (void)sqlite3_finalize(store->select_runs);
    (void)sqlite3_finalize(store->select_run);
    rc = sqlite3_close(store->db);
    if (rc != SQLITE_OK)
        g_warning("%s: closing the database: %s", store->path, sqlite3_errstr(rc));
    g_free(store->select_runs_sql);
    g_free(store->path);
    g_free(store);
}

const char *
fsim_store_path(const FsimStore *store)
{
    return store->path;
}

const char *
fsim_store_status_name(FsimStoreStatus status)
{
    switch (status) {
    case FSIM_STORE_RUNNING:
        return "running";
    case FSIM_STORE_COMPLETE:
        return "complete";
    case FSIM_STORE_OOM:
        return "oom";
    case FSIM_STORE_ERRORED:
        return "error";
    case FSIM_STORE_FAILED:
    default:
        return "failed";
    }
}

FsimStoreStatus
store_status_from_name(const char *name)
{
    if (g_strcmp0(name, "complete") == 0)
        return FSIM_STORE_COMPLETE;
    if (g_strcmp0(name, "oom") == 0)
        return FSIM_STORE_OOM;
    if (g_strcmp0(name, "running") == 0)
        return FSIM_STORE_RUNNING;
    if (g_strcmp0(name, "error") == 0)
        return FSIM_STORE_ERRORED;
    return FSIM_STORE_FAILED;
}

const char *
fsim_store_action_name(guint action)
{
    return action == FSIM_STORE_ACTION_SEED ? "seed" : fsim_device_call_name(action);
}

guint
store_action_from_name(const char *name)
{
    for (guint i = 0; i < FSIM_CALL_COUNT; i++)
        if (g_strcmp0(name, fsim_device_call_name(i)) == 0)
            return i;
    return FSIM_STORE_ACTION_SEED;
}
