/* SPDX-License-Identifier: MIT */
/*
 * fragsim merge OUT IN...
 *
 * Joins results databases (the shards of a sweep run on many machines, or any others) into OUT:
 * every run with everything stored under it, new ids, one transaction (src/store/store-merge.c).
 * An input that is not a fragsim database, or comes from a newer fragsim, is refused before OUT
 * is touched.
 */
#include <glib.h>

#include "fragsim/store.h"

#include "cli.h"

int
fsim_cmd_merge(int argc, char **argv)
{
    GError *error = NULL;
    FsimStoreMergeStats stats;

    if (!fsim_cli_parse_args(
            "merge", "OUT IN... - merge results databases into OUT", NULL,
            "OUT is created when missing, appended to otherwise.  A run OUT already has (the same\n"
            "trace content, trace device, policy, config, device and fragsim version: the same "
            "job\n"
            "merged twice) is kept once.  Runs still marked running are left out.\n"
            "Exit status: 0 success, 1 an input or OUT is not a fragsim database, comes from a "
            "newer\n"
            "fragsim, or cannot be read or written (OUT is then left as it was), 2 usage error.",
            FSIM_CLI_OPERANDS, &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc < 3)
        return fsim_cli_usage_error("merge", argc < 2 ? "missing the OUT and IN arguments"
                                                      : "missing the IN arguments");
    if (!fsim_store_merge(argv[1], (const char *const *)argv + 2, (gsize)argc - 2, &stats, &error))
        return fsim_cli_fail("merge", error);
    g_print("%s: merged %" G_GUINT64_FORMAT " runs (%" G_GUINT64_FORMAT
            " rows under them) from %d databases",
            argv[1], stats.runs_copied, stats.rows_copied, argc - 2);
    if (stats.runs_skipped > 0)
        g_print("; %" G_GUINT64_FORMAT " runs it already had were left out", stats.runs_skipped);
    g_print("\n");
    return FSIM_EXIT_OK;
}
