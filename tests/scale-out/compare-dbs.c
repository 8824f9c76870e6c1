/* SPDX-License-Identifier: MIT */
/*
 * compare-dbs: are two sets of results databases the same runs?  The scale-out tests run a sweep
 * sharded (Slurm job array, GNU parallel) and unsharded and check with this tool that the merged
 * database holds exactly the runs of the local one, every metric equal.
 *
 * A run is its `runs` row plus its rows in every table that has a `run_id` column (run_metrics,
 * samples, ooms, segments, blocks, marks, sizes, and whatever later schemas add), found from
 * the schema itself so that new tables are compared without a change here.  Columns that differ
 * between two honest runs of the same job are left out: ids (`id`, `run_id`), timestamps
 * (`created_at`, `finished_at`) and the simulator's own speed (`wall_seconds`,
 * `events_per_second`), plus any named with --ignore.  Each run becomes one canonical text (its
 * rows sorted), and the two sides are compared as multisets of those texts: the same runs, each
 * as often, in any order and under any ids.  Tables without `run_id` (bookkeeping of a sweep or
 * a merge) are not compared.
 *
 * usage: compare-dbs [--ignore COLUMN]... A.db [A.db...] -- B.db [B.db...]
 * Exit status: 0 the same runs, 1 they differ (the differences are printed), 2 usage error or
 * a database that cannot be read.  Comparing two empty sides is an error, not a success.
 */
#include <glib.h>

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

static const char *const default_ignored[] = {
    "id", "run_id", "created_at", "finished_at", "wall_seconds", "events_per_second", NULL};

#define MAX_IGNORED 64

typedef struct {
    const char *ignored[MAX_IGNORED]; /* column names left out (borrowed strings) */
    guint n_ignored;
} Options;

static gboolean
is_ignored(const Options *opts, const char *column)
{
    for (guint i = 0; i < opts->n_ignored; i++) {
        if (strcmp(opts->ignored[i], column) == 0)
            return TRUE;
    }
    return FALSE;
}

/* Append column @i of @stmt's current row to @out as NAME=VALUE, unambiguously typed. */
static void
append_value(GString *out, sqlite3_stmt *stmt, int i)
{
    g_string_append_printf(out, " %s=", sqlite3_column_name(stmt, i));
    switch (sqlite3_column_type(stmt, i)) {
    case SQLITE_NULL:
        g_string_append(out, "NULL");
        break;
    case SQLITE_INTEGER:
        g_string_append_printf(out, "%lld", (long long)sqlite3_column_int64(stmt, i));
        break;
    case SQLITE_FLOAT:
        g_string_append_printf(out, "%.17g", sqlite3_column_double(stmt, i));
        break;
    case SQLITE_TEXT: {
        g_autofree char *escaped = g_strescape((const char *)sqlite3_column_text(stmt, i), NULL);
        g_string_append_printf(out, "\"%s\"", escaped);
        break;
    }
    default: {
        const guchar *blob = sqlite3_column_blob(stmt, i);
        int n = sqlite3_column_bytes(stmt, i);

        g_string_append(out, "x'");
        for (int k = 0; k < n; k++)
            g_string_append_printf(out, "%02x", blob[k]);
        g_string_append_c(out, '\'');
        break;
    }
    }
}

/* The current row of @stmt as one line: TABLE{ col=value ...}, ignored columns left out. */
static char *
row_text(const Options *opts, const char *table, sqlite3_stmt *stmt)
{
    GString *out = g_string_new(table);

    g_string_append_c(out, '{');
    for (int i = 0; i < sqlite3_column_count(stmt); i++) {
        if (!is_ignored(opts, sqlite3_column_name(stmt, i)))
            append_value(out, stmt, i);
    }
    g_string_append(out, " }");
    return g_string_free(out, FALSE);
}

static int
compare_strings(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The tables of @db that hang off a run (a `run_id` column), sorted by name. */
static GPtrArray *
child_tables(sqlite3 *db, const char *path)
{
    GPtrArray *tables = g_ptr_array_new_with_free_func(g_free);
    sqlite3_stmt *stmt = NULL;

    if (sqlite3_prepare_v2(db,
                           "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) c"
                           " WHERE m.type = 'table' AND m.name <> 'runs' AND c.name = 'run_id'"
                           " ORDER BY m.name",
                           -1, &stmt, NULL) != SQLITE_OK) {
        fprintf(stderr, "compare-dbs: %s: %s\n", path, sqlite3_errmsg(db));
        g_ptr_array_unref(tables);
        return NULL;
    }
    while (sqlite3_step(stmt) == SQLITE_ROW)
        g_ptr_array_add(tables, g_strdup((const char *)sqlite3_column_text(stmt, 0)));
    sqlite3_finalize(stmt);
    return tables;
}

/* Append to @text the rows of @table that belong to run @run_id, sorted. */
static gboolean
append_child_rows(const Options *opts, sqlite3 *db, const char *path, const char *table,
                  sqlite3_int64 run_id, GString *text)
{
    g_autofree char *sql = g_strdup_printf("SELECT * FROM \"%s\" WHERE run_id = ?", table);
    g_autoptr(GPtrArray) rows = g_ptr_array_new_with_free_func(g_free);
    sqlite3_stmt *stmt = NULL;
    int rc;

    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        fprintf(stderr, "compare-dbs: %s: %s: %s\n", path, table, sqlite3_errmsg(db));
        return FALSE;
    }
    sqlite3_bind_int64(stmt, 1, run_id);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
        g_ptr_array_add(rows, row_text(opts, table, stmt));
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        fprintf(stderr, "compare-dbs: %s: %s: %s\n", path, table, sqlite3_errmsg(db));
        return FALSE;
    }
    g_ptr_array_sort(rows, compare_strings);
    for (guint i = 0; i < rows->len; i++)
        g_string_append_printf(text, "\n  %s", (const char *)g_ptr_array_index(rows, i));
    return TRUE;
}

/* Add one canonical text per run of the database @path to @runs. */
static gboolean
read_runs(const Options *opts, const char *path, GPtrArray *runs)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    g_autoptr(GPtrArray) tables = NULL;
    gboolean ok = TRUE;
    int rc;

    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fprintf(stderr, "compare-dbs: %s: %s\n", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return FALSE;
    }
    tables = child_tables(db, path);
    if (tables == NULL ||
        sqlite3_prepare_v2(db, "SELECT * FROM runs ORDER BY id", -1, &stmt, NULL) != SQLITE_OK) {
        if (tables != NULL)
            fprintf(stderr, "compare-dbs: %s: %s\n", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return FALSE;
    }
    while (ok && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        g_autofree char *head = row_text(opts, "runs", stmt);
        GString *text = g_string_new(head);
        sqlite3_int64 run_id = sqlite3_column_int64(stmt, 0);

        for (guint t = 0; ok && t < tables->len; t++)
            ok = append_child_rows(opts, db, path, g_ptr_array_index(tables, t), run_id, text);
        g_ptr_array_add(runs, g_string_free(text, FALSE));
    }
    if (ok && rc != SQLITE_DONE) {
        fprintf(stderr, "compare-dbs: %s: %s\n", path, sqlite3_errmsg(db));
        ok = FALSE;
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return ok;
}

/* The first line of @text (the runs row), for messages. */
static char *
first_line(const char *text)
{
    const char *nl = strchr(text, '\n');

    return nl ? g_strndup(text, (gsize)(nl - text)) : g_strdup(text);
}

/* Print where @a and @b, two runs with the same runs row, first differ. */
static void
print_first_difference(const char *a, const char *b)
{
    g_auto(GStrv) la = g_strsplit(a, "\n", -1);
    g_auto(GStrv) lb = g_strsplit(b, "\n", -1);
    guint i = 0;

    while (la[i] != NULL && lb[i] != NULL && strcmp(la[i], lb[i]) == 0)
        i++;
    printf("  first difference, row %u:\n    A: %s\n    B: %s\n", i,
           la[i] ? g_strstrip(la[i]) : "(no more rows)",
           lb[i] ? g_strstrip(lb[i]) : "(no more rows)");
}

/* Compare the sorted multisets @a and @b; print what differs.  Returns the number of runs
 * that have no equal on the other side. */
static guint
compare_runs(GPtrArray *a, GPtrArray *b)
{
    guint i = 0, j = 0, unmatched = 0;
    g_autoptr(GPtrArray) only_a = g_ptr_array_new();
    g_autoptr(GPtrArray) only_b = g_ptr_array_new();

    while (i < a->len || j < b->len) {
        int c = i == a->len   ? 1
                : j == b->len ? -1
                              : strcmp(g_ptr_array_index(a, i), g_ptr_array_index(b, j));

        if (c == 0) {
            i++;
            j++;
        } else if (c < 0) {
            g_ptr_array_add(only_a, g_ptr_array_index(a, i++));
        } else {
            g_ptr_array_add(only_b, g_ptr_array_index(b, j++));
        }
    }
    unmatched = only_a->len + only_b->len;
    for (guint k = 0; k < only_a->len; k++) {
        const char *ra = g_ptr_array_index(only_a, k);
        g_autofree char *head = first_line(ra);
        const char *twin = NULL;

        for (guint m = 0; twin == NULL && m < only_b->len; m++) {
            g_autofree char *hb = first_line(g_ptr_array_index(only_b, m));

            if (strcmp(head, hb) == 0)
                twin = g_ptr_array_index(only_b, m);
        }
        printf("run only in A%s: %s\n", twin ? " (B has it with other rows)" : "", head);
        if (twin != NULL)
            print_first_difference(ra, twin);
    }
    for (guint k = 0; k < only_b->len; k++) {
        g_autofree char *head = first_line(g_ptr_array_index(only_b, k));

        printf("run only in B: %s\n", head);
    }
    return unmatched;
}

int
main(int argc, char **argv)
{
    Options opts = {.n_ignored = 0};
    g_autoptr(GPtrArray) side_a = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) side_b = g_ptr_array_new_with_free_func(g_free);
    GPtrArray *sides[2] = {side_a, side_b};
    guint files[2] = {0, 0};
    int side = 0;
    guint unmatched;

    for (guint k = 0; default_ignored[k] != NULL; k++)
        opts.ignored[opts.n_ignored++] = default_ignored[k];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ignore") == 0 && i + 1 < argc && side == 0 && files[0] == 0 &&
            opts.n_ignored < MAX_IGNORED) {
            opts.ignored[opts.n_ignored++] = argv[++i];
        } else if (strcmp(argv[i], "--") == 0 && side == 0) {
            side = 1;
        } else if (!read_runs(&opts, argv[i], sides[side])) {
            return 2;
        } else {
            files[side]++;
        }
    }
    if (files[0] == 0 || files[1] == 0) {
        fprintf(stderr, "usage: compare-dbs [--ignore COLUMN]... A.db... -- B.db...\n");
        return 2;
    }
    if (sides[0]->len == 0 && sides[1]->len == 0) {
        fprintf(stderr, "compare-dbs: no runs on either side: nothing was compared\n");
        return 2;
    }
    g_ptr_array_sort(sides[0], compare_strings);
    g_ptr_array_sort(sides[1], compare_strings);
    unmatched = compare_runs(sides[0], sides[1]);
    if (unmatched != 0) {
        printf("compare-dbs: A has %u runs, B %u; %u without an equal on the other side\n",
               sides[0]->len, sides[1]->len, unmatched);
        return 1;
    }
    printf("compare-dbs: the same %u runs on both sides\n", sides[0]->len);
    return 0;
}
