/* SPDX-License-Identifier: MIT */
/*
 * fragsim export --db FILE --csv DIR
 *
 * Writes the database's stable views as CSV files for pandas, R or a spreadsheet: one file per
 * view (run_results.csv, run_samples.csv, run_ooms.csv, phase_results.csv, pool_results.csv;
 * docs/database.md).
 * A database written by an older fragsim is brought up to date first when it is writable (the
 * upgrade only adds tables and views), so its views exist.
 */
#include <glib.h>

#include <unistd.h>

#include "fragsim/store.h"

#include "cli.h"

static void
export_progress(gpointer data, const char *view, uint64_t rows)
{
    const char *dir = data;
    g_autofree char *name = g_strconcat(view, ".csv", NULL);
    g_autofree char *path = g_build_filename(dir, name, NULL);

    g_print("%s  %" G_GUINT64_FORMAT " rows\n", path, rows);
}

static int
export_run(const char *db_path, char *csv_dir)
{
    g_autoptr(FsimStore) store = NULL;
    GError *error = NULL;

    if (!g_file_test(db_path, G_FILE_TEST_EXISTS)) {
        g_set_error(&error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN,
                    "%s: no such results database (write one with 'fragsim replay TRACE --db %s')",
                    db_path, db_path);
        return fsim_cli_fail("export", error);
    }
    /* Writable when possible: an older database gets its views; else read it as it is. */
    store =
        access(db_path, W_OK) == 0 ? fsim_store_open(db_path, FSIM_STORE_WRITE, NULL, NULL) : NULL;
    if (store == NULL)
        store = fsim_store_open(db_path, FSIM_STORE_READ, NULL, &error);
    if (store == NULL)
        return fsim_cli_fail("export", error);
    if (!fsim_store_export_csv(store, csv_dir, export_progress, csv_dir, &error))
        return fsim_cli_fail("export", error);
    return FSIM_EXIT_OK;
}

int
fsim_cmd_export(int argc, char **argv)
{
    g_autofree char *db_path = NULL;
    g_autofree char *csv_dir = NULL;
    const GOptionEntry entries[] = {
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &db_path, "The results database (required)", "FILE"},
        {"csv", 0, 0, G_OPTION_ARG_FILENAME, &csv_dir,
         "Directory for one CSV file per view (created if missing; required)", "DIR"},
        G_OPTION_ENTRY_NULL,
    };

    if (!fsim_cli_parse_args(
            "export", "- write the database's views as CSV files", entries,
            "Writes run_results.csv (one row per run: its configuration, label, status and\n"
            "every metric), run_samples.csv, run_ooms.csv, phase_results.csv (figures\n"
            "per phase between marks: warm-up and steady state) and pool_results.csv (the\n"
            "memory of each private pool).  RFC 4180 CSV; NULL is an empty field.\n"
            "Example, then in Python:\n"
            "  fragsim export --db results.db --csv out\n"
            "  pandas.read_csv('out/run_results.csv')",
            NULL, &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (db_path == NULL || csv_dir == NULL)
        return fsim_cli_usage_error("export", "--db FILE and --csv DIR are required");
    return export_run(db_path, csv_dir);
}
