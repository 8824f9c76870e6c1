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

/* Column helpers: a text column copied (NULL for NULL), an integer column with NULL as -1. */
static inline char *
store_column_strdup(sqlite3_stmt *stmt, int column)
{
    const unsigned char *text = sqlite3_column_text(stmt, column);

    return text != NULL ? g_strdup((const char *)text) : NULL;
}

static inline int64_t
store_column_opt_i64(sqlite3_stmt *stmt, int column)
{
    return sqlite3_column_type(stmt, column) == SQLITE_NULL ? -1
                                                            : sqlite3_column_int64(stmt, column);
}

/* store-rows.c: a stored struct's columns in its statements' order (sqlite.c), each a field of
 * the struct: store_bind_row() binds them to the parameters from @first on,
 * store_read_row() fills them (a TEXT field with a copy) from the row's columns from 0 on. */
typedef enum {
    STORE_U64,     /* uint64_t (FsimAddr, FsimTime) */
    STORE_OPT_I64, /* int64_t; a negative value is NULL */
    STORE_UINT,    /* guint */
    STORE_TEXT,    /* char *, NULL is NULL */
    STORE_ACTION,  /* guint, stored by name (fsim_store_action_name()) */
    STORE_STATUS,  /* FsimStoreStatus, stored by name (fsim_store_status_name()) */
    STORE_PRESENT, /* gboolean: whether the column is not NULL (read only) */
} StoreColumnKind;

typedef struct {
    StoreColumnKind kind;
    gsize offset;
} StoreColumn;

typedef struct {
    const StoreColumn *columns;
    guint n_columns;
} StoreRowLayout;

extern const StoreRowLayout store_run_row;                 /* FsimStoredRun, up to its metrics */
extern const StoreRowLayout store_sample_row;              /* FsimStoredSample */
extern const StoreRowLayout store_oom_row;                 /* FsimOomRecord */
extern const StoreRowLayout store_mark_row;                /* FsimStoredMark */
extern const StoreRowLayout store_phase_row;               /* FsimStoredPhase */
extern const StoreRowLayout store_breakdown_row;           /* FsimStoredBreakdown */
extern const StoreRowLayout store_size_row;                /* FsimStoredSizeBucket */
extern const StoreRowLayout store_segment_row;             /* FsimStoredSegment */
extern const StoreRowLayout store_block_row;               /* FsimStoredBlock */
extern const StoreRowLayout store_recommendation_row;      /* FsimStoredRecommendation */
extern const StoreRowLayout store_recommendation_info_row; /* FsimStoreRecommendationInfo */

void store_bind_row(sqlite3_stmt *stmt, int first, const StoreRowLayout *layout, const void *row,
                    int *rc);
void store_read_row(sqlite3_stmt *stmt, const StoreRowLayout *layout, void *row);
/* Free the TEXT fields of @row (a row store_read_row() filled). */
void store_row_clear(const StoreRowLayout *layout, void *row);

gboolean store_fail(FsimStore *store, int rc, const char *what, GError **error);
sqlite3_stmt *store_prepare(FsimStore *store, const char *sql, GError **error);
sqlite3_stmt *store_stmt(FsimStore *store, StoreStmt which, GError **error);
gboolean store_step_done(FsimStore *store, sqlite3_stmt *stmt, int rc, const char *what,
                         GError **error);
gboolean store_exec(FsimStore *store, const char *sql, const char *what, GError **error);
gboolean store_finish(FsimStore *store, sqlite3_stmt *stmt, int rc, const char *what,
                      GError **error);
gboolean store_run_simple(FsimStore *store, StoreStmt which, const char *what, GError **error);
char *store_now(void);
FsimStoreStatus store_status_from_name(const char *name);
guint store_action_from_name(const char *name);
void store_mark_clear(gpointer data);
void store_bind_run_key(sqlite3_stmt *stmt, const FsimStoreRunInfo *info,
                        const FsimDeviceSpec *device, int *rc);
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
/* store-pack.c: blocks (FsimStoredBlock) and segment actions (FsimStoredSegment) as varints of
 * differences (run_packed, whose `kind` is store_pack_name()).  store_pack() appends @n rows to
 * @out; store_unpack() appends the @rows rows of @data to @out, FALSE when @data does not hold
 * exactly them (a damaged chunk). */
typedef struct StorePackKind StorePackKind;
extern const StorePackKind store_packed_blocks;
extern const StorePackKind store_packed_segments;
const char *store_pack_name(const StorePackKind *kind);
void store_pack(const StorePackKind *kind, const void *rows, guint n, GByteArray *out);
gboolean store_unpack(const StorePackKind *kind, const void *data, gsize len, guint rows,
                      GArray *out);

/* store-pools.c: a writer adds the run_pools table (IF NOT EXISTS); both note whether it is
 * there.  store_write_pools() writes a run's rows (FsimStoredPool), inside its transaction. */
gboolean store_pools_setup(FsimStore *store, GError **error);
gboolean store_write_pools(FsimStore *store, int64_t run_id, const GArray *pools, GError **error);

/* Bring a writable database of schema @version up to this fragsim's: tables, views, version. */
gboolean store_upgrade(FsimStore *store, int64_t version, GError **error);

#endif /* FSIM_STORE_PRIVATE_H */
