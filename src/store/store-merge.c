/* SPDX-License-Identifier: MIT */
/*
 * Merging results databases (`fragsim merge OUT IN...`): the shards of a sweep run on many
 * machines, or any databases, into one.
 *
 * Generic by design: the tables copied are `runs` and every table that refers to it (a column
 * named `run_id` or ending in `_run_id`, such as the recommendations' `default_run_id`, or a
 * foreign key to `runs`), found in each input's own schema, so tables other
 * parts of fragsim add later are carried along without a change here.  Columns are those the input
 * and the output share (a column only the output has takes its default, so an older input merges
 * into a newer output); a table's own INTEGER PRIMARY KEY, when it is not the reference to the
 * run, is left for the output to assign.  References to runs are rewritten to the new ids.
 *
 * Safety: every input is opened and identified (fsim_store_open() refuses a file that is not
 * fragsim's or comes from a newer schema) before the output is touched, and the whole merge is one
 * IMMEDIATE transaction on the output: a failure rolls everything back.  Inputs are only read.
 * Values travel between the two connections as sqlite3_value objects, so every type (REAL,
 * INTEGER, NULL, BLOB) is copied exactly.
 */
/* struct stat's st_ino */
#define _XOPEN_SOURCE 700

#include <glib.h>
#include <glib/gstdio.h>

#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>

#include "fragsim/store.h"

#include "store-private.h"

/* A column both sides have: its name as stored, and whether it holds a run id to rewrite. */
typedef struct {
    char *name;
    gboolean is_ref;
} MergeColumn;

/* One table to copy: its name and its columns (MergeColumn). */
typedef struct {
    char *name;
    GArray *columns;
} MergeTable;

static void
merge_column_clear(gpointer data)
{
    g_free(((MergeColumn *)data)->name);
}

static void
merge_table_free(MergeTable *table)
{
    g_free(table->name);
    g_array_unref(table->columns);
    g_free(table);
}

#define MERGE_COLUMN(table, i) (&g_array_index((table)->columns, MergeColumn, (i)))

static char *
quote_name(const char *name)
{
    g_autoptr(GString) text = g_string_new("\"");

    for (const char *p = name; *p != '\0'; p++) {
        if (*p == '"')
            g_string_append_c(text, '"');
        g_string_append_c(text, *p);
    }
    g_string_append_c(text, '"');
    return g_string_free(g_steal_pointer(&text), FALSE);
}

/* Runs @sql (one text column per row) on @store and returns the column's values. */
static GPtrArray *
merge_strings(FsimStore *store, const char *sql, const char *arg, GError **error)
{
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func(g_free);
    sqlite3_stmt *stmt = store_prepare(store, sql, error);
    int rc = SQLITE_OK;

    if (stmt == NULL)
        return NULL;
    if (arg != NULL)
        bind_text(stmt, 1, arg, &rc);
    while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        g_ptr_array_add(out, g_strdup((const char *)sqlite3_column_text(stmt, 0)));
    }
    if (!store_finish(store, stmt, rc, "reading the schema", error))
        return NULL;
    return g_steal_pointer(&out);
}

static gboolean
str_in(GPtrArray *array, const char *value)
{
    for (guint i = 0; i < array->len; i++)
        if (strcmp(g_ptr_array_index(array, i), value) == 0)
            return TRUE;
    return FALSE;
}

static gboolean
has_column(const MergeTable *table, const char *name)
{
    for (guint i = 0; i < table->columns->len; i++)
        if (strcmp(MERGE_COLUMN(table, i)->name, name) == 0)
            return TRUE;
    return FALSE;
}

/* The table @name as copied from @in to @out; NULL with no error when there is nothing to copy
 * (the output has no such table, or it does not refer to runs). */
static MergeTable *
merge_table(FsimStore *in, FsimStore *out, const char *name, GError **error)
{
    g_autoptr(GPtrArray) in_cols =
        merge_strings(in, "SELECT name FROM pragma_table_info(?1) ORDER BY cid", name, error);
    g_autoptr(GPtrArray) out_cols = NULL;
    g_autoptr(GPtrArray) refs = NULL;
    g_autoptr(GPtrArray) own_key = NULL;
    MergeTable *table;
    gboolean is_runs = strcmp(name, "runs") == 0;

    if (in_cols == NULL)
        return NULL;
    out_cols =
        merge_strings(out, "SELECT name FROM pragma_table_info(?1) ORDER BY cid", name, error);
    if (out_cols == NULL)
        return NULL;
    refs = merge_strings(in,
                         "SELECT \"from\" FROM pragma_foreign_key_list(?1) WHERE \"table\" = 'runs'"
                         " UNION SELECT name FROM pragma_table_info(?1) WHERE name = 'run_id'"
                         " OR name LIKE '%\\_run\\_id' ESCAPE '\\'",
                         name, error);
    /* A rowid alias the output assigns itself: an INTEGER PRIMARY KEY alone. */
    own_key = refs == NULL ? NULL
                           : merge_strings(out,
                                           "SELECT name FROM pragma_table_info(?1) WHERE pk = 1"
                                           " AND upper(type) = 'INTEGER' AND (SELECT count(*)"
                                           " FROM pragma_table_info(?1) WHERE pk > 0) = 1",
                                           name, error);
    if (own_key == NULL)
        return NULL;
    if (out_cols->len == 0 || (!is_runs && refs->len == 0))
        return NULL;
    table = g_new0(MergeTable, 1);
    table->name = g_strdup(name);
    table->columns = g_array_new(FALSE, FALSE, sizeof(MergeColumn));
    g_array_set_clear_func(table->columns, merge_column_clear);
    for (guint i = 0; i < in_cols->len; i++) {
        const char *col = g_ptr_array_index(in_cols, i);
        MergeColumn column = {NULL, !is_runs && str_in(refs, col)};

        if (!str_in(out_cols, col) || (!column.is_ref && str_in(own_key, col)))
            continue;
        column.name = g_strdup(col);
        g_array_append_val(table->columns, column);
    }
    return table;
}

/* "SELECT cols FROM name" and "INSERT INTO name (cols) VALUES (?, ...)" for @table; the runs
 * select also gives the old id first. */
static void
merge_sql(const MergeTable *table, char **select, char **insert)
{
    g_autoptr(GString) cols = g_string_new(NULL);
    g_autoptr(GString) params = g_string_new(NULL);
    g_autofree char *quoted = quote_name(table->name);

    for (guint i = 0; i < table->columns->len; i++) {
        g_autofree char *col = quote_name(MERGE_COLUMN(table, i)->name);

        g_string_append_printf(cols, "%s%s", i > 0 ? ", " : "", col);
        g_string_append(params, i > 0 ? ", ?" : "?");
    }
    if (strcmp(table->name, "runs") == 0)
        *select = g_strdup_printf("SELECT id, status, %s FROM runs ORDER BY id", cols->str);
    else
        *select = g_strdup_printf("SELECT %s FROM %s", cols->str, quoted);
    *insert = g_strdup_printf("INSERT INTO %s (%s) VALUES (%s)", quoted, cols->str, params->str);
}

/* The key columns of a run as the input has them (NULL for those it lacks). */
static char *
merge_key_sql(const MergeTable *runs)
{
    static const char *const key[] = {"trace_sha256", "trace",  "trace_device",   "policy",
                                      "config",       "device", "fragsim_version"};
    g_autoptr(GString) sql = g_string_new("SELECT id");

    for (gsize i = 0; i < G_N_ELEMENTS(key); i++)
        g_string_append_printf(sql, has_column(runs, key[i]) ? ", %s" : ", NULL AS %s", key[i]);
    g_string_append(sql, " FROM runs ORDER BY id");
    return g_string_free(g_steal_pointer(&sql), FALSE);
}

/* Whether @out already has the run whose key @key_row holds (the same job). */
static gboolean
merge_seen(FsimStore *out, sqlite3_stmt *key_row, gboolean *seen, GError **error)
{
    static const char sql[] =
        "SELECT 1 FROM runs WHERE (CASE WHEN ?1 IS NULL THEN trace_sha256 IS NULL AND trace = ?2"
        " ELSE trace_sha256 = ?1 END) AND trace_device = ?3 AND policy = ?4"
        " AND config = coalesce(?5, '') AND device = ?6 AND fragsim_version = ?7 LIMIT 1";
    sqlite3_stmt *stmt = store_prepare(out, sql, error);
    int rc = SQLITE_OK;

    if (stmt == NULL)
        return FALSE;
    for (int i = 1; i <= 7 && rc == SQLITE_OK; i++)
        rc = sqlite3_bind_value(stmt, i, sqlite3_column_value(key_row, i));
    if (rc == SQLITE_OK)
        rc = sqlite3_step(stmt);
    *seen = rc == SQLITE_ROW;
    return store_finish(out, stmt, *seen ? SQLITE_DONE : rc, "comparing runs", error);
}

/* The statements copying one table: its SELECT on the input, its INSERT on the output and, for
 * the runs, the key columns of each run on the input (merge_key_sql()). */
typedef struct {
    sqlite3_stmt *read;
    sqlite3_stmt *write;
    sqlite3_stmt *keys;
} MergeCopy;

static void
merge_copy_clear(MergeCopy *copy)
{
    /* sqlite3_finalize(NULL) is a harmless no-op */
    (void)sqlite3_finalize(copy->read);
    (void)sqlite3_finalize(copy->keys);
    (void)sqlite3_finalize(copy->write);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(MergeCopy, merge_copy_clear)

static gboolean
merge_copy_prepare(FsimStore *in, FsimStore *out, const MergeTable *table, MergeCopy *copy,
                   GError **error)
{
    g_autofree char *select = NULL;
    g_autofree char *insert = NULL;

    merge_sql(table, &select, &insert);
    if ((copy->read = store_prepare(in, select, error)) == NULL)
        return FALSE;
    if (strcmp(table->name, "runs") == 0) {
        g_autofree char *key_sql = merge_key_sql(table);

        if ((copy->keys = store_prepare(in, key_sql, error)) == NULL)
            return FALSE;
    }
    return (copy->write = store_prepare(out, insert, error)) != NULL;
}

/* Copy the runs of @in that @out does not have; @ids maps each old id to its new one. */
static gboolean
merge_runs(FsimStore *in, FsimStore *out, const MergeTable *runs, GHashTable *ids,
           FsimStoreMergeStats *stats, GError **error)
{
    g_auto(MergeCopy) copy = {0};
    int rc;

    if (!merge_copy_prepare(in, out, runs, &copy, error))
        return FALSE;
    while ((rc = sqlite3_step(copy.read)) == SQLITE_ROW) {
        int64_t old_id = sqlite3_column_int64(copy.read, 0);
        gboolean seen = FALSE;

        if (sqlite3_step(copy.keys) != SQLITE_ROW)
            return store_fail(in, sqlite3_errcode(in->db), "reading runs", error);
        if (g_strcmp0((const char *)sqlite3_column_text(copy.read, 1), "running") == 0)
            continue;
        if (!merge_seen(out, copy.keys, &seen, error))
            return FALSE;
        if (seen) {
            stats->runs_skipped++;
            continue;
        }
        (void)sqlite3_reset(copy.write);
        rc = SQLITE_OK;
        for (guint i = 0; i < runs->columns->len && rc == SQLITE_OK; i++)
            rc = sqlite3_bind_value(copy.write, (int)i + 1,
                                    sqlite3_column_value(copy.read, (int)i + 2));
        if (!store_step_done(out, copy.write, rc, "copying a run", error))
            return FALSE;
        g_hash_table_insert(
            ids, g_memdup2(&old_id, sizeof(old_id)),
            g_memdup2(&(int64_t){sqlite3_last_insert_rowid(out->db)}, sizeof(int64_t)));
        stats->runs_copied++;
    }
    return rc == SQLITE_DONE || store_fail(in, rc, "reading runs", error);
}

/* Copy the rows of @table that belong to copied runs, their run ids rewritten. */
static gboolean
merge_rows(FsimStore *in, FsimStore *out, const MergeTable *table, GHashTable *ids,
           FsimStoreMergeStats *stats, GError **error)
{
    g_autofree char *what = g_strdup_printf("copying %s", table->name);
    g_auto(MergeCopy) copy = {0};
    int rc;

    if (!merge_copy_prepare(in, out, table, &copy, error))
        return FALSE;
    while ((rc = sqlite3_step(copy.read)) == SQLITE_ROW) {
        gboolean keep = TRUE;

        (void)sqlite3_reset(copy.write);
        rc = SQLITE_OK;
        for (guint i = 0; i < table->columns->len && rc == SQLITE_OK && keep; i++) {
            if (MERGE_COLUMN(table, i)->is_ref &&
                sqlite3_column_type(copy.read, (int)i) != SQLITE_NULL) {
                int64_t old_id = sqlite3_column_int64(copy.read, (int)i);
                const int64_t *new_id = g_hash_table_lookup(ids, &old_id);

                keep = new_id != NULL;
                if (keep)
                    rc = sqlite3_bind_int64(copy.write, (int)i + 1, *new_id);
            } else {
                rc = sqlite3_bind_value(copy.write, (int)i + 1,
                                        sqlite3_column_value(copy.read, (int)i));
            }
        }
        if (!keep)
            continue;
        if (!store_step_done(out, copy.write, rc, what, error))
            return FALSE;
        stats->rows_copied++;
    }
    return rc == SQLITE_DONE || store_fail(in, rc, what, error);
}

/* Copy everything of @in into @out, inside the caller's transaction. */
static gboolean
merge_one(FsimStore *in, FsimStore *out, FsimStoreMergeStats *stats, GError **error)
{
    g_autoptr(GHashTable) ids = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    g_autoptr(GPtrArray) names =
        merge_strings(in,
                      "SELECT name FROM sqlite_schema WHERE type = 'table' AND name <> 'runs'"
                      " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
                      NULL, error);
    MergeTable *runs;
    gboolean ok;

    if (names == NULL)
        return FALSE;
    runs = merge_table(in, out, "runs", error);
    if (runs == NULL)
        return FALSE;
    ok = merge_runs(in, out, runs, ids, stats, error);
    merge_table_free(runs);
    for (guint i = 0; ok && i < names->len; i++) {
        GError *local_error = NULL;
        MergeTable *table = merge_table(in, out, g_ptr_array_index(names, i), &local_error);

        if (table == NULL) {
            if (local_error != NULL) {
                g_propagate_error(error, local_error);
                ok = FALSE;
            }
            continue;
        }
        ok = merge_rows(in, out, table, ids, stats, error);
        merge_table_free(table);
    }
    return ok;
}

/* Whether @a and @b are the same file (so that a database is never merged into itself). */
static gboolean
same_file(const char *a, const char *b)
{
    GStatBuf sa, sb;

    return g_stat(a, &sa) == 0 && g_stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

gboolean
fsim_store_merge(const char *out_path, const char *const *inputs, gsize n_inputs,
                 FsimStoreMergeStats *stats, GError **error)
{
    g_autoptr(GPtrArray) stores = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_store_close);
    g_autoptr(FsimStore) out = NULL;
    FsimStoreMergeStats local = {0};
    gboolean ok = TRUE;

    g_return_val_if_fail(out_path != NULL && (inputs != NULL || n_inputs == 0), FALSE);
    for (gsize i = 0; i < n_inputs; i++) {
        FsimStore *in;

        if (same_file(inputs[i], out_path)) {
            g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN,
                        "%s: is the output database itself: it cannot be merged into itself",
                        inputs[i]);
            return FALSE;
        }
        in = fsim_store_open(inputs[i], FSIM_STORE_READ, NULL, error);
        if (in == NULL)
            return FALSE;
        g_ptr_array_add(stores, in);
    }
    out = fsim_store_open(out_path, FSIM_STORE_WRITE, NULL, error);
    if (out == NULL)
        return FALSE;
    if (!store_run_simple(out, STMT_BEGIN, "starting the merge", error))
        return FALSE;
    for (guint i = 0; ok && i < stores->len; i++)
        ok = merge_one(g_ptr_array_index(stores, i), out, &local, error);
    if (!ok || !store_run_simple(out, STMT_COMMIT, "committing the merge", error)) {
        (void)sqlite3_exec(out->db, "ROLLBACK", NULL, NULL, NULL);
        return FALSE;
    }
    if (stats != NULL)
        *stats = local;
    return TRUE;
}
