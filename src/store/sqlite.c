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

#define STORE_DEFAULT_BLOCKS          20000
#define STORE_DEFAULT_SEGMENT_ACTIONS 250000
#define STORE_DEFAULT_OOMS            10000
#define STORE_DEFAULT_MARKS           10000
#define STORE_DEFAULT_BUSY_MS         10000
#define STORE_SIZE_BUCKETS            64

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
/* clang-format on */

/* ---- statements ---------------------------------------------------------------------------- */

typedef enum {
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_ROLLBACK,
    STMT_INSERT_RUN,
    STMT_FINISH_RUN,
    STMT_FAIL_RUN,
    STMT_INSERT_METRICS,
    STMT_INSERT_SAMPLE,
    STMT_INSERT_OOM,
    STMT_INSERT_SEGMENT,
    STMT_INSERT_BLOCK,
    STMT_INSERT_MARK,
    STMT_INSERT_SIZE,
    STMT_SELECT_SAMPLES,
    STMT_SELECT_OOMS,
    STMT_SELECT_SEGMENTS,
    STMT_SELECT_BLOCKS,
    STMT_SELECT_MARKS,
    STMT_SELECT_SIZES,
    STMT_COUNT,
} StoreStmt;

/* clang-format off */
static const char *const stmt_sql[STMT_COUNT] = {
    [STMT_BEGIN] = "BEGIN IMMEDIATE",
    [STMT_COMMIT] = "COMMIT",
    [STMT_ROLLBACK] = "ROLLBACK",
    [STMT_INSERT_RUN] =
        "INSERT INTO runs (trace, trace_format, trace_device, policy, device, device_description,"
        " capacity_bytes, total_bytes, granularity_bytes, knobs, seed, status, created_at,"
        " fragsim_version, max_samples, config, label)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)",
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
};
/* clang-format on */

struct FsimStore {
    sqlite3 *db;
    char *path;
    gboolean writable;
    sqlite3_stmt *stmts[STMT_COUNT];
    char *select_runs_sql; /* built at open: metric columns the file has, NULL for the others */
    sqlite3_stmt *select_runs;
    sqlite3_stmt *select_run;
    guint attached;            /* runs not yet freed */
    gboolean has_error_status; /* the runs table accepts status `error` */
};

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
static gboolean
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

/* Run SQL without parameters or results (schema, pragmas). */
static gboolean
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

static sqlite3_stmt *
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
static sqlite3_stmt *
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

/* Bind helpers: each keeps the first failing code in *rc and does nothing once it is set. */
static void
bind_i64(sqlite3_stmt *stmt, int index, int64_t value, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int64(stmt, index, value);
}

static void
bind_u64(sqlite3_stmt *stmt, int index, uint64_t value, int *rc)
{
    /* SQLite integers are signed 64-bit: addresses above 2^63 are stored two's complement. */
    bind_i64(stmt, index, (int64_t)value, rc);
}

static void
bind_opt_i64(sqlite3_stmt *stmt, int index, int64_t value, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = value < 0 ? sqlite3_bind_null(stmt, index) : sqlite3_bind_int64(stmt, index, value);
}

static void
bind_double(sqlite3_stmt *stmt, int index, double value, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = isfinite(value) ? sqlite3_bind_double(stmt, index, value)
                              : sqlite3_bind_null(stmt, index);
}

static void
bind_text(sqlite3_stmt *stmt, int index, const char *value, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = value == NULL ? sqlite3_bind_null(stmt, index)
                            : sqlite3_bind_text(stmt, index, value, -1, SQLITE_TRANSIENT);
}

/* Step a bound write statement to completion. */
static gboolean
store_step_done(FsimStore *store, sqlite3_stmt *stmt, int rc, const char *what, GError **error)
{
    if (rc != SQLITE_OK)
        return store_fail(store, rc, what, error);
    rc = sqlite3_step(stmt);
    if (rc != SQLITE_DONE)
        return store_fail(store, rc, what, error);
    return TRUE;
}

static gboolean
store_run_simple(FsimStore *store, StoreStmt which, const char *what, GError **error)
{
    sqlite3_stmt *stmt = store_stmt(store, which, error);

    return stmt != NULL && store_step_done(store, stmt, SQLITE_OK, what, error);
}

static char *
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
    if (rc != SQLITE_DONE) {
        store_fail(store, rc, "reading a table's columns", error);
        (void)sqlite3_finalize(stmt);
        return NULL;
    }
    rc = sqlite3_finalize(stmt);
    if (rc != SQLITE_OK) {
        store_fail(store, rc, "reading a table's columns", error);
        return NULL;
    }
    return g_steal_pointer(&columns);
}

static const char run_columns_sql[] =
    "r.id, r.trace, r.trace_format, r.trace_device, r.policy, r.device, r.device_description,"
    " r.capacity_bytes, r.total_bytes, r.granularity_bytes, r.knobs, r.seed, r.status, r.message,"
    " r.created_at, r.finished_at, r.fragsim_version, r.segment_actions,"
    " r.segment_actions_stored, r.blocks, r.blocks_stored, m.run_id";
#define RUN_COLUMNS 24 /* the metric columns follow */

/* The runs columns added after schema version 1 (config, label): added when writable, read as
 * '' otherwise; and whether the status check allows `error`. */
static gboolean
store_prepare_runs(FsimStore *store, GString *sql, GError **error)
{
    static const char *const added[] = {"config", "label"};
    g_autoptr(GHashTable) columns = store_table_columns(store, "runs", error);
    sqlite3_stmt *stmt;

    if (columns == NULL)
        return FALSE;
    for (gsize i = 0; i < G_N_ELEMENTS(added); i++) {
        gboolean present = g_hash_table_contains(columns, added[i]);

        if (!present && store->writable) {
            g_autofree char *alter = g_strdup_printf(
                "ALTER TABLE runs ADD COLUMN %s TEXT NOT NULL DEFAULT ''", added[i]);

            if (!store_exec(store, alter, "adding a runs column", error))
                return FALSE;
            present = TRUE;
        }
        g_string_append_printf(sql, present ? ", r.%s" : ", '' AS %s", added[i]);
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
           store_exec(store, pragmas, "creating the schema", error);
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
    rc = sqlite3_extended_result_codes(store->db, 1);
    if (rc == SQLITE_OK)
        rc = sqlite3_busy_timeout(store->db, options != NULL && options->busy_timeout_ms != 0
                                                 ? (int)options->busy_timeout_ms
                                                 : STORE_DEFAULT_BUSY_MS);
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

/* Runs @sql (PRAGMA journal_mode = ...), which answers with one row. */
static gboolean
store_journal_mode(FsimStore *store, const char *sql, GError **error)
{
    sqlite3_stmt *stmt = store_prepare(store, sql, error);
    int rc;

    if (stmt == NULL)
        return FALSE;
    rc = sqlite3_step(stmt);
    if (rc != SQLITE_ROW) {
        store_fail(store, rc, "switching to WAL journalling", error);
        (void)sqlite3_finalize(stmt);
        return FALSE;
    }
    if (g_ascii_strcasecmp((const char *)sqlite3_column_text(stmt, 0), "wal") != 0)
        g_debug("%s: journal mode %s, not wal", store->path, sqlite3_column_text(stmt, 0));
    rc = sqlite3_finalize(stmt);
    if (rc != SQLITE_OK)
        return store_fail(store, rc, "switching to WAL journalling", error);
    return TRUE;
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

/* With the write lock held: the identity, the schema of an empty file, new metric columns. */
static gboolean
store_setup_locked(FsimStore *store, GError **error)
{
    if (!store->writable)
        return store_check_identity(store, error) && store_prepare_metrics(store, error);
    if (!store_exec(store, "BEGIN IMMEDIATE", "locking the database", error))
        return FALSE;
    if (!store_check_identity(store, error) || !store_prepare_metrics(store, error) ||
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

static FsimStoreStatus
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

static guint
store_action_from_name(const char *name)
{
    for (guint i = 0; i < FSIM_CALL_COUNT; i++)
        if (g_strcmp0(name, fsim_device_call_name(i)) == 0)
            return i;
    return FSIM_STORE_ACTION_SEED;
}

/* ---- one run: collection ------------------------------------------------------------------- */

typedef struct {
    double area; /* size x lifetime in events: the heap key */
    FsimStoredBlock block;
} HeapBlock;

struct FsimStoreRun {
    FsimStore *store;
    FsimEngine *engine;
    int64_t id;
    FsimStoreLimits limits;
    gboolean done;
    gboolean has_metrics; /* fsim_store_run_set_metrics() */
    FsimMetrics metrics;

    /* samples */
    GArray *buckets; /* FsimStoredSample, closed */
    FsimStoredSample current;
    gboolean has_current;
    uint64_t width;
    uint64_t seen_reserved_peak;

    /* device actions */
    GArray *segments; /* FsimStoredSegment */
    uint64_t segment_actions;

    /* blocks: the live ones are the engine's (fsim_engine_releasing(), at the end
     * fsim_engine_foreach_live_alloc()), not a second table */
    GArray *heap; /* HeapBlock, min-heap on area */
    uint64_t blocks_seen;

    GArray *ooms;  /* FsimOomRecord */
    GArray *marks; /* FsimStoredMark */
    uint64_t size_count[STORE_SIZE_BUCKETS];
    uint64_t size_bytes[STORE_SIZE_BUCKETS];

    uint64_t last_index;
    FsimTime last_time;
    gboolean any_event;
};

static void
mark_clear(gpointer data)
{
    FsimStoredMark *mark = data;

    g_clear_pointer(&mark->label, g_free);
}

static void
samples_merge_pairs(FsimStoreRun *run)
{
    guint n = run->buckets->len / 2;
    FsimStoredSample *s = (FsimStoredSample *)(void *)run->buckets->data;

    for (guint i = 0; i < n; i++) {
        FsimStoredSample a = s[2 * i];
        const FsimStoredSample *b = &s[2 * i + 1];

        a.event_index_last = b->event_index_last;
        a.events += b->events;
        a.time_last = b->time_last;
        a.requested = b->requested;
        a.allocated = b->allocated;
        a.reserved = b->reserved;
        a.requested_min = MIN(a.requested_min, b->requested_min);
        a.requested_max = MAX(a.requested_max, b->requested_max);
        a.allocated_min = MIN(a.allocated_min, b->allocated_min);
        a.allocated_max = MAX(a.allocated_max, b->allocated_max);
        a.reserved_min = MIN(a.reserved_min, b->reserved_min);
        a.reserved_max = MAX(a.reserved_max, b->reserved_max);
        s[i] = a;
    }
    g_array_set_size(run->buckets, n);
    run->width *= 2;
}

static void
samples_close_bucket(FsimStoreRun *run)
{
    if (!run->has_current)
        return;
    g_array_append_val(run->buckets, run->current);
    run->has_current = FALSE;
    if (run->buckets->len >= run->limits.max_samples)
        samples_merge_pairs(run);
}

static void
samples_add(FsimStoreRun *run, const FsimEngine *engine, const FsimEvent *ev)
{
    const FsimEngineCounters *c = fsim_engine_counters(engine);
    const FsimDevice *device = fsim_engine_device(engine);
    FsimStoredSample *s = &run->current;
    uint64_t peak = (uint64_t)device->reserved.peak;
    uint64_t reserved_high = c->reserved_bytes;

    /* A peak reached inside the event (memory taken then given back, as in a release-and-retry)
     * is not visible in the counters after it: the device's running peak catches it. */
    if (peak > run->seen_reserved_peak) {
        run->seen_reserved_peak = peak;
        reserved_high = MAX(reserved_high, peak);
    }
    if (!run->has_current) {
        memset(s, 0, sizeof(*s));
        s->event_index = ev->index;
        s->time = ev->time;
        s->requested_min = s->allocated_min = s->reserved_min = G_MAXUINT64;
        run->has_current = TRUE;
    }
    s->event_index_last = ev->index;
    s->time_last = ev->time;
    s->events++;
    s->requested = c->requested_bytes;
    s->allocated = c->allocated_bytes;
    s->reserved = c->reserved_bytes;
    s->requested_min = MIN(s->requested_min, c->requested_bytes);
    s->requested_max = MAX(s->requested_max, c->requested_bytes);
    s->allocated_min = MIN(s->allocated_min, c->allocated_bytes);
    s->allocated_max = MAX(s->allocated_max, c->allocated_bytes);
    s->reserved_min = MIN(s->reserved_min, c->reserved_bytes);
    s->reserved_max = MAX(s->reserved_max, reserved_high);
    if (s->events >= run->width)
        samples_close_bucket(run);
}

static gboolean
heap_less(const HeapBlock *a, const HeapBlock *b)
{
    if (a->area != b->area)
        return a->area < b->area;
    /* Deterministic ties: the later allocation is the smaller. */
    if (a->block.alloc_event != b->block.alloc_event)
        return a->block.alloc_event > b->block.alloc_event;
    return a->block.id > b->block.id;
}

static void
heap_sift_down(HeapBlock *h, guint n, guint i)
{
    for (;;) {
        guint l = 2 * i + 1, r = l + 1, m = i;
        HeapBlock tmp;

        if (l < n && heap_less(&h[l], &h[m]))
            m = l;
        if (r < n && heap_less(&h[r], &h[m]))
            m = r;
        if (m == i)
            return;
        tmp = h[i];
        h[i] = h[m];
        h[m] = tmp;
        i = m;
    }
}

/* Keep @block if it is among the max_blocks largest (by size x lifetime) seen so far. */
static void
blocks_offer(FsimStoreRun *run, const FsimStoredBlock *block, uint64_t end_index)
{
    HeapBlock item;
    HeapBlock *h;
    uint64_t start = block->alloc_event < 0 ? 0 : (uint64_t)block->alloc_event;

    item.block = *block;
    item.area = (double)block->size * (double)(end_index - MIN(start, end_index) + 1);
    if (run->heap->len < run->limits.max_blocks) {
        guint i;

        g_array_append_val(run->heap, item);
        h = (HeapBlock *)(void *)run->heap->data;
        for (i = run->heap->len - 1; i > 0 && heap_less(&h[i], &h[(i - 1) / 2]); i = (i - 1) / 2) {
            HeapBlock tmp = h[i];

            h[i] = h[(i - 1) / 2];
            h[(i - 1) / 2] = tmp;
        }
        return;
    }
    h = (HeapBlock *)(void *)run->heap->data;
    if (run->heap->len == 0 || !heap_less(&h[0], &item))
        return;
    h[0] = item;
    heap_sift_down(h, run->heap->len, 0);
}

static void
observe_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    FsimStoreRun *run = data;

    if (run->done)
        return;
    run->any_event = TRUE;
    run->last_index = ev->index;
    run->last_time = ev->time;
    samples_add(run, engine, ev);
    if (ev->kind == FSIM_EV_ALLOC && ev->size > 0) {
        guint log2 = (guint)g_bit_storage(ev->size) - 1;

        log2 = MIN(log2, STORE_SIZE_BUCKETS - 1);
        run->size_count[log2]++;
        run->size_bytes[log2] += ev->size;
    } else if (ev->kind == FSIM_EV_MARK && run->marks->len < run->limits.max_marks) {
        FsimStoredMark mark = {ev->index, ev->time, g_strdup(ev->label != NULL ? ev->label : "")};

        g_array_append_val(run->marks, mark);
    }
}

/* A block of the engine's as the database stores it; @free_event -1 while it lives. */
static FsimStoredBlock
stored_block(const FsimLiveAlloc *alloc, int64_t free_event, FsimTime free_time)
{
    FsimStoredBlock block = {0};

    block.id = alloc->id;
    block.addr = alloc->block.addr;
    block.size = alloc->block.size;
    block.requested = alloc->requested;
    block.stream = alloc->stream;
    block.alloc_event = alloc->alloc_event;
    block.alloc_time = alloc->alloc_time;
    block.free_event = free_event;
    block.free_time = free_time;
    return block;
}

static void
observe_alloc(gpointer data, const FsimEngine *engine, const FsimEvent *ev, uint64_t id,
              const FsimBlock *block, uint64_t requested)
{
    FsimStoreRun *run = data;

    (void)engine;
    (void)ev;
    (void)id;
    (void)block;
    (void)requested;
    if (!run->done)
        run->blocks_seen++;
}

static void
observe_release(gpointer data, const FsimEngine *engine, uint64_t id, const FsimBlock *block,
                uint64_t requested)
{
    FsimStoreRun *run = data;
    const FsimEngineCounters *c = fsim_engine_counters(engine);
    const FsimLiveAlloc *alloc = fsim_engine_releasing(engine);
    FsimStoredBlock stored;

    (void)id;
    (void)block;
    (void)requested;
    if (run->done || alloc == NULL)
        return;
    /* Most blocks are small and short-lived: refuse them before building the record. */
    if (run->heap->len == run->limits.max_blocks && run->heap->len > 0) {
        uint64_t start = alloc->alloc_event < 0 ? 0 : (uint64_t)alloc->alloc_event;
        double area =
            (double)alloc->block.size * (double)(c->event_index - MIN(start, c->event_index) + 1);

        if (area < g_array_index(run->heap, HeapBlock, 0).area)
            return;
    }
    stored = stored_block(alloc, (int64_t)c->event_index, c->now);
    blocks_offer(run, &stored, c->event_index);
}

static void
observe_oom(gpointer data, const FsimEngine *engine, const FsimOomRecord *oom)
{
    FsimStoreRun *run = data;

    (void)engine;
    if (!run->done && run->ooms->len < run->limits.max_ooms)
        g_array_append_val(run->ooms, *oom);
}

static void
segments_add(FsimStoreRun *run, int64_t event_index, FsimTime time, guint action, FsimAddr addr,
             uint64_t size)
{
    FsimStoredSegment segment = {event_index, time, action, addr, size};

    run->segment_actions++;
    if (run->segments->len < run->limits.max_segment_actions)
        g_array_append_val(run->segments, segment);
}

static void
observe_device_call(gpointer data, const FsimEngine *engine, FsimDeviceCall call, FsimAddr addr,
                    uint64_t size)
{
    FsimStoreRun *run = data;
    const FsimEngineCounters *c = fsim_engine_counters(engine);

    if (run->done)
        return;
    /* cudaMalloc reserves whole pages: record the memory the device holds. */
    if (call == FSIM_CALL_MEM_ALLOC || call == FSIM_CALL_MEM_FREE)
        size = fsim_device_round(fsim_engine_device(engine), size);
    segments_add(run, (int64_t)c->event_index, c->now, call, addr, size);
}

static void
observe_seed_segment(gpointer data, const FsimEngine *engine, const FsimSeedSegment *segment)
{
    FsimStoreRun *run = data;

    (void)engine;
    if (!run->done)
        segments_add(run, -1, 0, FSIM_STORE_ACTION_SEED, segment->addr, segment->size);
}

static const FsimObserver store_observer = {
    .event = observe_event,
    .alloc = observe_alloc,
    .release = observe_release,
    .oom = observe_oom,
    .device_call = observe_device_call,
    .seed_segment = observe_seed_segment,
};

FsimStoreRun *
fsim_store_attach(FsimStore *store, FsimEngine *engine, const FsimStoreRunInfo *info,
                  GError **error)
{
    const FsimRunConfig *config;
    FsimStoreRun *run;
    sqlite3_stmt *stmt;
    g_autofree char *now = store_now();
    int rc = SQLITE_OK;

    g_return_val_if_fail(store != NULL && engine != NULL && info != NULL, NULL);
    g_return_val_if_fail(info->trace != NULL && info->policy != NULL, NULL);
    if (!store->writable) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_READ_ONLY,
                    "%s: opened for reading only", store->path);
        return NULL;
    }
    run = g_new0(FsimStoreRun, 1);
    if (info->limits != NULL)
        run->limits = *info->limits;
    if (run->limits.max_samples == 0)
        run->limits.max_samples = FSIM_STORE_DEFAULT_SAMPLES;
    /* Pairs are merged when the array is full: keep it even, and at least one pair. */
    run->limits.max_samples = MAX(2, run->limits.max_samples + (run->limits.max_samples & 1));
    if (run->limits.max_blocks == 0)
        run->limits.max_blocks = STORE_DEFAULT_BLOCKS;
    if (run->limits.max_segment_actions == 0)
        run->limits.max_segment_actions = STORE_DEFAULT_SEGMENT_ACTIONS;
    if (run->limits.max_ooms == 0)
        run->limits.max_ooms = STORE_DEFAULT_OOMS;
    if (run->limits.max_marks == 0)
        run->limits.max_marks = STORE_DEFAULT_MARKS;

    config = fsim_engine_config(engine);
    stmt = store_stmt(store, STMT_INSERT_RUN, error);
    if (stmt == NULL) {
        g_free(run);
        return NULL;
    }
    bind_text(stmt, 1, info->trace, &rc);
    bind_text(stmt, 2, info->trace_format != NULL ? info->trace_format : "unknown", &rc);
    bind_i64(stmt, 3, info->trace_device, &rc);
    bind_text(stmt, 4, info->policy, &rc);
    bind_text(stmt, 5, config->device.name, &rc);
    bind_text(stmt, 6, config->device.description, &rc);
    bind_u64(stmt, 7, config->device.capacity_bytes, &rc);
    bind_u64(stmt, 8, config->device.total_bytes, &rc);
    bind_u64(stmt, 9, config->device.granularity, &rc);
    bind_text(stmt, 10, info->knobs != NULL ? info->knobs : "", &rc);
    bind_opt_i64(stmt, 11, info->seed, &rc);
    bind_text(stmt, 12, now, &rc);
    bind_text(stmt, 13, FSIM_VERSION, &rc);
    bind_i64(stmt, 14, run->limits.max_samples, &rc);
    bind_text(stmt, 15, info->config != NULL ? info->config : "", &rc);
    bind_text(stmt, 16, info->label != NULL ? info->label : info->policy, &rc);
    if (!store_step_done(store, stmt, rc, "recording a new run", error)) {
        g_free(run);
        return NULL;
    }
    run->id = sqlite3_last_insert_rowid(store->db);
    run->store = store;
    run->engine = engine;
    run->width = 1;
    run->buckets = g_array_new(FALSE, FALSE, sizeof(FsimStoredSample));
    run->segments = g_array_new(FALSE, FALSE, sizeof(FsimStoredSegment));
    run->heap = g_array_new(FALSE, FALSE, sizeof(HeapBlock));
    run->ooms = g_array_new(FALSE, FALSE, sizeof(FsimOomRecord));
    run->marks = g_array_new(FALSE, FALSE, sizeof(FsimStoredMark));
    g_array_set_clear_func(run->marks, mark_clear);
    store->attached++;
    fsim_engine_add_observer(engine, &store_observer, run);
    return run;
}

int64_t
fsim_store_run_id(const FsimStoreRun *run)
{
    return run->id;
}

/* ---- one run: writing ---------------------------------------------------------------------- */

static gboolean
write_metrics(FsimStoreRun *run, GError **error)
{
    FsimStore *store = run->store;
    const FsimMetrics *m = run->has_metrics ? &run->metrics : fsim_engine_metrics(run->engine);
    sqlite3_stmt *stmt = store_stmt(store, STMT_INSERT_METRICS, error);
    int rc = SQLITE_OK;
    int i = 1;

    if (stmt == NULL)
        return FALSE;
    bind_i64(stmt, i++, run->id, &rc);
#define STORE_BIND_U(field)                bind_u64(stmt, i++, m->field, &rc)
#define STORE_BIND_F(field)                bind_double(stmt, i++, m->field, &rc)
#define STORE_BIND_I(field)                bind_opt_i64(stmt, i++, m->field, &rc)
#define STORE_BIND_METRIC(name, kind, doc) STORE_BIND_##kind(name);
    FSIM_METRICS(STORE_BIND_METRIC)
#undef STORE_BIND_METRIC
#undef STORE_BIND_U
#undef STORE_BIND_F
#undef STORE_BIND_I
    return store_step_done(store, stmt, rc, "writing the run's metrics", error);
}

static gboolean
write_samples(FsimStoreRun *run, GError **error)
{
    FsimStore *store = run->store;

    for (guint i = 0; i < run->buckets->len; i++) {
        const FsimStoredSample *s = &g_array_index(run->buckets, FsimStoredSample, i);
        sqlite3_stmt *stmt = store_stmt(store, STMT_INSERT_SAMPLE, error);
        int rc = SQLITE_OK;

        if (stmt == NULL)
            return FALSE;
        bind_i64(stmt, 1, run->id, &rc);
        bind_i64(stmt, 2, i, &rc);
        bind_u64(stmt, 3, s->event_index, &rc);
        bind_u64(stmt, 4, s->event_index_last, &rc);
        bind_u64(stmt, 5, s->events, &rc);
        bind_u64(stmt, 6, s->time, &rc);
        bind_u64(stmt, 7, s->time_last, &rc);
        bind_u64(stmt, 8, s->requested, &rc);
        bind_u64(stmt, 9, s->allocated, &rc);
        bind_u64(stmt, 10, s->reserved, &rc);
        bind_u64(stmt, 11, s->requested_min, &rc);
        bind_u64(stmt, 12, s->requested_max, &rc);
        bind_u64(stmt, 13, s->allocated_min, &rc);
        bind_u64(stmt, 14, s->allocated_max, &rc);
        bind_u64(stmt, 15, s->reserved_min, &rc);
        bind_u64(stmt, 16, s->reserved_max, &rc);
        if (!store_step_done(store, stmt, rc, "writing samples", error))
            return FALSE;
    }
    return TRUE;
}

static gboolean
write_ooms(FsimStoreRun *run, GError **error)
{
    FsimStore *store = run->store;

    for (guint i = 0; i < run->ooms->len; i++) {
        const FsimOomRecord *o = &g_array_index(run->ooms, FsimOomRecord, i);
        sqlite3_stmt *stmt = store_stmt(store, STMT_INSERT_OOM, error);
        int rc = SQLITE_OK;

        if (stmt == NULL)
            return FALSE;
        bind_i64(stmt, 1, run->id, &rc);
        bind_i64(stmt, 2, i, &rc);
        bind_u64(stmt, 3, o->event_index, &rc);
        bind_u64(stmt, 4, o->time, &rc);
        bind_u64(stmt, 5, o->id, &rc);
        bind_u64(stmt, 6, o->size, &rc);
        bind_u64(stmt, 7, o->stream, &rc);
        bind_u64(stmt, 8, o->reserved_bytes, &rc);
        bind_u64(stmt, 9, o->allocated_bytes, &rc);
        bind_u64(stmt, 10, o->requested_bytes, &rc);
        bind_u64(stmt, 11, o->largest_free_block, &rc);
        bind_u64(stmt, 12, o->device_free_bytes, &rc);
        if (!store_step_done(store, stmt, rc, "writing OOM records", error))
            return FALSE;
    }
    return TRUE;
}

static gboolean
write_segments(FsimStoreRun *run, GError **error)
{
    FsimStore *store = run->store;

    for (guint i = 0; i < run->segments->len; i++) {
        const FsimStoredSegment *s = &g_array_index(run->segments, FsimStoredSegment, i);
        sqlite3_stmt *stmt = store_stmt(store, STMT_INSERT_SEGMENT, error);
        int rc = SQLITE_OK;

        if (stmt == NULL)
            return FALSE;
        bind_i64(stmt, 1, run->id, &rc);
        bind_i64(stmt, 2, i, &rc);
        bind_opt_i64(stmt, 3, s->event_index, &rc);
        bind_u64(stmt, 4, s->time, &rc);
        bind_text(stmt, 5, fsim_store_action_name(s->action), &rc);
        bind_u64(stmt, 6, s->addr, &rc);
        bind_u64(stmt, 7, s->size, &rc);
        if (!store_step_done(store, stmt, rc, "writing segment actions", error))
            return FALSE;
    }
    return TRUE;
}

static gint
heap_by_alloc(gconstpointer a, gconstpointer b)
{
    const HeapBlock *x = a;
    const HeapBlock *y = b;

    if (x->block.alloc_event != y->block.alloc_event)
        return x->block.alloc_event < y->block.alloc_event ? -1 : 1;
    return x->block.id < y->block.id ? -1 : x->block.id > y->block.id ? 1 : 0;
}

static void
offer_live(gpointer data, const FsimLiveAlloc *alloc)
{
    FsimStoreRun *run = data;
    FsimStoredBlock stored = stored_block(alloc, -1, run->last_time);

    blocks_offer(run, &stored, run->last_index);
}

static gboolean
write_blocks(FsimStoreRun *run, GError **error)
{
    FsimStore *store = run->store;

    /* Blocks still alive compete with the others, their lifetime running to the end. */
    fsim_engine_foreach_live_alloc(run->engine, offer_live, run);
    g_array_sort(run->heap, heap_by_alloc);
    for (guint i = 0; i < run->heap->len; i++) {
        const FsimStoredBlock *b = &g_array_index(run->heap, HeapBlock, i).block;
        sqlite3_stmt *stmt = store_stmt(store, STMT_INSERT_BLOCK, error);
        int rc = SQLITE_OK;

        if (stmt == NULL)
            return FALSE;
        bind_i64(stmt, 1, run->id, &rc);
        bind_i64(stmt, 2, i, &rc);
        bind_u64(stmt, 3, b->id, &rc);
        bind_u64(stmt, 4, b->addr, &rc);
        bind_u64(stmt, 5, b->size, &rc);
        bind_u64(stmt, 6, b->requested, &rc);
        bind_u64(stmt, 7, b->stream, &rc);
        bind_opt_i64(stmt, 8, b->alloc_event, &rc);
        bind_u64(stmt, 9, b->alloc_time, &rc);
        bind_opt_i64(stmt, 10, b->free_event, &rc);
        bind_u64(stmt, 11, b->free_time, &rc);
        if (!store_step_done(store, stmt, rc, "writing block lifetimes", error))
            return FALSE;
    }
    return TRUE;
}

static gboolean
write_marks_and_sizes(FsimStoreRun *run, GError **error)
{
    FsimStore *store = run->store;

    for (guint i = 0; i < run->marks->len; i++) {
        const FsimStoredMark *mark = &g_array_index(run->marks, FsimStoredMark, i);
        sqlite3_stmt *stmt = store_stmt(store, STMT_INSERT_MARK, error);
        int rc = SQLITE_OK;

        if (stmt == NULL)
            return FALSE;
        bind_i64(stmt, 1, run->id, &rc);
        bind_i64(stmt, 2, i, &rc);
        bind_u64(stmt, 3, mark->event_index, &rc);
        bind_u64(stmt, 4, mark->time, &rc);
        bind_text(stmt, 5, mark->label, &rc);
        if (!store_step_done(store, stmt, rc, "writing marks", error))
            return FALSE;
    }
    for (guint i = 0; i < STORE_SIZE_BUCKETS; i++) {
        sqlite3_stmt *stmt;
        int rc = SQLITE_OK;

        if (run->size_count[i] == 0)
            continue;
        stmt = store_stmt(store, STMT_INSERT_SIZE, error);
        if (stmt == NULL)
            return FALSE;
        bind_i64(stmt, 1, run->id, &rc);
        bind_i64(stmt, 2, i, &rc);
        bind_u64(stmt, 3, run->size_count[i], &rc);
        bind_u64(stmt, 4, run->size_bytes[i], &rc);
        if (!store_step_done(store, stmt, rc, "writing the size histogram", error))
            return FALSE;
    }
    return TRUE;
}

static gboolean
write_status(FsimStoreRun *run, FsimStoreStatus status, GError **error)
{
    FsimStore *store = run->store;
    sqlite3_stmt *stmt = store_stmt(store, STMT_FINISH_RUN, error);
    g_autofree char *now = store_now();
    int rc = SQLITE_OK;

    if (stmt == NULL)
        return FALSE;
    bind_text(stmt, 1, fsim_store_status_name(status), &rc);
    bind_text(stmt, 2, now, &rc);
    bind_u64(stmt, 3, run->segment_actions, &rc);
    bind_u64(stmt, 4, run->segments->len, &rc);
    bind_u64(stmt, 5, run->blocks_seen, &rc);
    bind_u64(stmt, 6, run->heap->len, &rc);
    bind_i64(stmt, 7, run->id, &rc);
    return store_step_done(store, stmt, rc, "recording the run's status", error);
}

static void
run_release_data(FsimStoreRun *run)
{
    g_clear_pointer(&run->buckets, g_array_unref);
    g_clear_pointer(&run->segments, g_array_unref);
    g_clear_pointer(&run->heap, g_array_unref);
    g_clear_pointer(&run->ooms, g_array_unref);
    g_clear_pointer(&run->marks, g_array_unref);
}

gboolean
fsim_store_run_finish(FsimStoreRun *run, FsimStoreStatus status, GError **error)
{
    g_autoptr(GError) local_error = NULL;
    FsimStore *store;
    gboolean ok;

    g_return_val_if_fail(run != NULL, FALSE);
    g_return_val_if_fail(status == FSIM_STORE_COMPLETE || status == FSIM_STORE_OOM, FALSE);
    if (run->done) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_FAILED,
                    "%s: run %" G_GINT64_FORMAT " was already finished", run->store->path, run->id);
        return FALSE;
    }
    store = run->store;
    run->done = TRUE;
    samples_close_bucket(run);
    ok = store_run_simple(store, STMT_BEGIN, "starting the run's transaction", &local_error);
    if (ok) {
        ok = write_metrics(run, &local_error) && write_samples(run, &local_error) &&
             write_ooms(run, &local_error) && write_segments(run, &local_error) &&
             write_blocks(run, &local_error) && write_marks_and_sizes(run, &local_error) &&
             write_status(run, status, &local_error) &&
             store_run_simple(store, STMT_COMMIT, "committing the run", &local_error);
        /* A failed statement or COMMIT may leave the transaction open (SQLITE_FULL does). */
        if (!ok && !sqlite3_get_autocommit(store->db))
            (void)store_run_simple(store, STMT_ROLLBACK, "rolling back", NULL);
    }
    if (!ok) {
        fsim_store_run_fail(run, local_error->message);
        g_propagate_error(error, g_steal_pointer(&local_error));
    }
    run_release_data(run);
    return ok;
}

/* Mark @run finished without data, with @status (`failed` or `error`) and @message. */
static void
store_run_end_without_data(FsimStoreRun *run, const char *status, const char *message)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *now = store_now();
    sqlite3_stmt *stmt;
    int rc = SQLITE_OK;

    g_return_if_fail(run != NULL);
    run->done = TRUE;
    run_release_data(run);
    stmt = store_stmt(run->store, STMT_FAIL_RUN, &error);
    if (stmt != NULL) {
        bind_text(stmt, 1, status, &rc);
        bind_text(stmt, 2, message, &rc);
        bind_text(stmt, 3, now, &rc);
        bind_i64(stmt, 4, run->id, &rc);
        if (store_step_done(run->store, stmt, rc, "marking the run failed", &error))
            return;
    }
    /* The row stays `running`, which readers also treat as incomplete. */
    g_info("%s", error->message);
}

void
fsim_store_run_fail(FsimStoreRun *run, const char *message)
{
    store_run_end_without_data(run, "failed", message);
}

void
fsim_store_run_error(FsimStoreRun *run, const char *message)
{
    /* A database created before the `error` status refuses it: `failed` says as much there. */
    store_run_end_without_data(run, run->store->has_error_status ? "error" : "failed", message);
}

void
fsim_store_run_set_metrics(FsimStoreRun *run, const FsimMetrics *metrics)
{
    run->metrics = *metrics;
    run->has_metrics = TRUE;
}

void
fsim_store_run_free(FsimStoreRun *run)
{
    if (run == NULL)
        return;
    if (!run->done)
        fsim_store_run_fail(run, "the replay stopped before this run was written");
    run_release_data(run);
    run->store->attached--;
    g_free(run);
}

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

GArray *
fsim_store_segments(FsimStore *store, int64_t run_id, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(FsimStoredSegment));

    if (!store_select(store, STMT_SELECT_SEGMENTS, run_id, "reading segment actions", row_segment,
                      out, error))
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
                      error))
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

    g_array_set_clear_func(out, mark_clear);
    if (!store_select(store, STMT_SELECT_MARKS, run_id, "reading marks", row_mark, out, error))
        return NULL;
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
