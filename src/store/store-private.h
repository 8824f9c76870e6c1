/* SPDX-License-Identifier: MIT */
/*
 * The results database's private parts, shared by its three files: sqlite.c (schema, opening,
 * identity, statements and their helpers), store-run.c (a run: collected by an engine observer,
 * written at its end) and store-read.c (runs and their data read back).  The design notes are
 * at the top of sqlite.c.
 */
#ifndef FSIM_STORE_PRIVATE_H
#define FSIM_STORE_PRIVATE_H

#include <glib.h>

#include <math.h>
#include <sqlite3.h>
#include <stdint.h>

#include "fragsim/store.h"

#define STORE_DEFAULT_BLOCKS          20000
#define STORE_DEFAULT_SEGMENT_ACTIONS 250000
#define STORE_DEFAULT_OOMS            10000
#define STORE_DEFAULT_MARKS           10000
#define STORE_DEFAULT_BUSY_MS         10000
#define STORE_SIZE_BUCKETS            64
#define RUN_COLUMNS                   26   /* the metric columns follow */
#define STORE_PACK_CHUNK              4096 /* rows per packed BLOB */

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
    STMT_INSERT_BREAKDOWN,
    STMT_INSERT_PHASE,
    STMT_SELECT_BREAKDOWN,
    STMT_SELECT_PHASES,
    STMT_INSERT_PACKED,
    STMT_SELECT_PACKED,
    STMT_COUNT,
} StoreStmt;

struct FsimStore {
    sqlite3 *db;
    char *path;
    gboolean writable;
    sqlite3_stmt *stmts[STMT_COUNT];
    char *select_runs_sql; /* built at open: metric columns the file has, NULL for the others */
    sqlite3_stmt *select_runs;
    sqlite3_stmt *select_run;
    guint attached;             /* runs not yet freed */
    gboolean has_error_status;  /* the runs table accepts status `error` */
    guint busy_timeout_ms;      /* how long to wait for another writer */
    gboolean has_report_tables; /* run_breakdown, run_phases, run_packed (schema version 2) */
    gboolean has_pool_table;    /* run_pools */
};

/* Bind helpers: each keeps the first failing code in *rc and does nothing once it is set. */
static inline void
bind_i64(sqlite3_stmt *stmt, int index, int64_t value, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int64(stmt, index, value);
}

static inline void
bind_u64(sqlite3_stmt *stmt, int index, uint64_t value, int *rc)
{
    /* SQLite integers are signed 64-bit: addresses above 2^63 are stored two's complement. */
    bind_i64(stmt, index, (int64_t)value, rc);
}

static inline void
bind_opt_i64(sqlite3_stmt *stmt, int index, int64_t value, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = value < 0 ? sqlite3_bind_null(stmt, index) : sqlite3_bind_int64(stmt, index, value);
}

static inline void
bind_double(sqlite3_stmt *stmt, int index, double value, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = isfinite(value) ? sqlite3_bind_double(stmt, index, value)
                              : sqlite3_bind_null(stmt, index);
}

static inline void
bind_text(sqlite3_stmt *stmt, int index, const char *value, int *rc)
{
    if (*rc == SQLITE_OK)
        *rc = value == NULL ? sqlite3_bind_null(stmt, index)
                            : sqlite3_bind_text(stmt, index, value, -1, SQLITE_TRANSIENT);
}

gboolean store_fail(FsimStore *store, int rc, const char *what, GError **error);
sqlite3_stmt *store_prepare(FsimStore *store, const char *sql, GError **error);
sqlite3_stmt *store_stmt(FsimStore *store, StoreStmt which, GError **error);
gboolean store_step_done(FsimStore *store, sqlite3_stmt *stmt, int rc, const char *what,
                         GError **error);
gboolean store_run_simple(FsimStore *store, StoreStmt which, const char *what, GError **error);
char *store_now(void);
FsimStoreStatus store_status_from_name(const char *name);
guint store_action_from_name(const char *name);
void store_mark_clear(gpointer data);
gboolean store_insert_run_row(FsimStore *store, const FsimDeviceSpec *device,
                              const FsimStoreRunInfo *info, guint max_samples, int64_t *id,
                              GError **error);
gboolean store_write_metrics(FsimStore *store, int64_t id, const FsimMetrics *metrics,
                             GError **error);
void store_phase_clear(gpointer data);

/* The tables of schema version 2 (sqlite.c), CREATE ... IF NOT EXISTS. */
extern const char store_schema_report_sql[];
/* store-views.c: (re)create the views whose text differs from this fragsim's. */
gboolean store_ensure_views(FsimStore *store, GError **error);
/* store-pack.c: blocks and segment actions as varints of differences (run_packed). */
void store_pack_blocks(const FsimStoredBlock *blocks, guint n, GByteArray *out);
gboolean store_unpack_blocks(const void *data, gsize len, guint rows, GArray *out);
void store_pack_segments(const FsimStoredSegment *segments, guint n, GByteArray *out);
gboolean store_unpack_segments(const void *data, gsize len, guint rows, GArray *out);

/* store-pools.c: a writer adds the run_pools table (IF NOT EXISTS); both note whether it is
 * there.  store_write_pools() writes a run's rows (FsimStoredPool), inside its transaction. */
gboolean store_pools_setup(FsimStore *store, GError **error);
gboolean store_write_pools(FsimStore *store, int64_t run_id, const GArray *pools, GError **error);

/* Bring a writable database of schema @version up to this fragsim's: tables, views, version. */
gboolean store_upgrade(FsimStore *store, int64_t version, GError **error);

#endif /* FSIM_STORE_PRIVATE_H */
