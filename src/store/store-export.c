/* SPDX-License-Identifier: MIT */
/*
 * The stable views as CSV files (`fragsim export --csv DIR`), for pandas, R or a spreadsheet.
 *
 * RFC 4180: a header line of column names, one line per row, CRLF line ends, a field quoted
 * (with its quotes doubled) when it holds a comma, a quote, a CR or a LF.  NULL is an empty field;
 * integers are written exactly; reals with 17 significant digits, enough to read back the same
 * double.  Each file is written under a temporary name and renamed into place, so a failed export
 * never leaves a truncated file that looks complete.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <sqlite3.h>
#include <string.h>

#include "fragsim/store.h"

#include "store-private.h"

static void
csv_field(GString *out, const char *text)
{
    if (strpbrk(text, ",\"\r\n") == NULL) {
        g_string_append(out, text);
        return;
    }
    g_string_append_c(out, '"');
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '"')
            g_string_append_c(out, '"');
        g_string_append_c(out, *p);
    }
    g_string_append_c(out, '"');
}

static void
csv_value(GString *out, sqlite3_stmt *stmt, int column)
{
    switch (sqlite3_column_type(stmt, column)) {
    case SQLITE_NULL:
        break;
    case SQLITE_INTEGER:
        g_string_append_printf(out, "%" G_GINT64_FORMAT,
                               (gint64)sqlite3_column_int64(stmt, column));
        break;
    case SQLITE_FLOAT: {
        char buffer[G_ASCII_DTOSTR_BUF_SIZE];

        g_string_append(out, g_ascii_formatd(buffer, sizeof(buffer), "%.17g",
                                             sqlite3_column_double(stmt, column)));
        break;
    }
    default:
        csv_field(out, (const char *)sqlite3_column_text(stmt, column));
        break;
    }
}

/* Writes @view into @path.  *@rows: the rows written. */
static gboolean
export_view(FsimStore *store, const char *view, const char *path, uint64_t *rows, GError **error)
{
    g_autofree char *sql = g_strdup_printf("SELECT * FROM %s", view);
    g_autoptr(GString) out = g_string_new(NULL);
    g_autoptr(GError) local_error = NULL;
    sqlite3_stmt *stmt = store_prepare(store, sql, error);
    int columns;
    int rc;

    if (stmt == NULL) {
        if (error != NULL && *error != NULL)
            g_prefix_error(error,
                           "exporting %s (a database of an older fragsim, opened read-only, "
                           "has no views: open it once for writing): ",
                           view);
        return FALSE;
    }
    columns = sqlite3_column_count(stmt);
    for (int c = 0; c < columns; c++) {
        if (c > 0)
            g_string_append_c(out, ',');
        csv_field(out, sqlite3_column_name(stmt, c));
    }
    g_string_append(out, "\r\n");
    *rows = 0;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        for (int c = 0; c < columns; c++) {
            if (c > 0)
                g_string_append_c(out, ',');
            csv_value(out, stmt, c);
        }
        g_string_append(out, "\r\n");
        (*rows)++;
    }
    if (!store_finish(store, stmt, rc, "exporting a view", error))
        return FALSE;
    if (!g_file_set_contents(path, out->str, (gssize)out->len, &local_error)) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN, "%s", local_error->message);
        return FALSE;
    }
    return TRUE;
}

gboolean
fsim_store_export_csv(FsimStore *store, const char *dir,
                      void (*progress)(gpointer data, const char *view, uint64_t rows),
                      gpointer data, GError **error)
{
    gsize n;
    const char *const *views = fsim_store_view_names(&n);

    g_return_val_if_fail(store != NULL && dir != NULL, FALSE);
    if (g_mkdir_with_parents(dir, 0777) != 0) {
        int saved = errno;

        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN,
                    "%s: cannot create the directory: %s", dir, g_strerror(saved));
        return FALSE;
    }
    for (gsize i = 0; i < n; i++) {
        g_autofree char *name = g_strconcat(views[i], ".csv", NULL);
        g_autofree char *path = g_build_filename(dir, name, NULL);
        uint64_t rows = 0;

        if (!export_view(store, views[i], path, &rows, error))
            return FALSE;
        if (progress != NULL)
            progress(data, views[i], rows);
    }
    return TRUE;
}
