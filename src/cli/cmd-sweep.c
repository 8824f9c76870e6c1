/* SPDX-License-Identifier: MIT */
/*
 * fragsim sweep SPEC --db OUT [-j N] [--shard I/N] [--list]
 *
 * Runs the grid a spec describes (src/sweep/, docs/sweep.md): every job a run in OUT with its
 * needed capacity, N worker processes at a time.  --shard runs one of N balanced parts, for N
 * machines whose databases `fragsim merge` then joins.  A job that fails is recorded as a run in
 * error and the others go on; the exit status is then 6.
 */
#include <glib.h>

#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "sweep/sweep.h"

/* The progress line, on stderr when it is a terminal. */
typedef struct {
    gboolean enabled;
    gint64 last_us;
    gboolean drawn;
} SweepLine;

static void
sweep_progress(const FsimSweepProgress *progress, gpointer data)
{
    SweepLine *line = data;
    gint64 now = g_get_monotonic_time();

    if (!line->enabled || (now - line->last_us < 100000 && progress->done < progress->total))
        return;
    line->last_us = now;
    line->drawn = TRUE;
    fprintf(stderr, "\rsweep: %u/%u jobs done, %u running, %u failed ", progress->done,
            progress->total, progress->running, progress->failed);
}

static void
sweep_print_jobs(GPtrArray *jobs)
{
    static const char *const headers[] = {"job", "trace", "group", "policy", "config", "device"};
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(headers), headers);

    for (guint i = 0; i < jobs->len; i++) {
        const FsimSweepJob *job = g_ptr_array_index(jobs, i);

        fsim_table_addf(table, "%u", job->index + 1);
        fsim_table_add(table, job->trace->path);
        fsim_table_add(table, job->trace->job != NULL ? job->trace->job : "-");
        fsim_table_add(table, job->policy);
        fsim_table_add(table,
                       job->config != NULL && *job->config->text != '\0' ? job->config->text : "-");
        fsim_table_add(table, job->device->name);
    }
    fsim_table_print(table);
}

int
fsim_cmd_sweep(int argc, char **argv)
{
    g_autofree char *db_path = NULL;
    g_autofree char *shard_text = NULL;
    gint parallel = 0;
    gboolean list = FALSE;
    GOptionEntry entries[] = {
        {"db", 0, 0, G_OPTION_ARG_FILENAME, &db_path,
         "The results database the runs are written to (created if missing)", "FILE"},
        {"jobs", 'j', 0, G_OPTION_ARG_INT, &parallel,
         "Jobs run at a time, each in a worker process (default: the number of cores)", "N"},
        {"shard", 0, 0, G_OPTION_ARG_STRING, &shard_text,
         "Run only the I-th of N balanced parts of the job list (for N machines; then merge)",
         "I/N"},
        {"list", 0, 0, G_OPTION_ARG_NONE, &list,
         "Print the jobs (of the shard) and run nothing; --db is then not needed", NULL},
        {"dry-run", 'n', 0, G_OPTION_ARG_NONE, &list, "The same as --list", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(FsimSweepSpec) spec = NULL;
    g_autoptr(GPtrArray) jobs = NULL;
    GError *error = NULL;
    guint shard = 1, shards = 1, failed = 0;
    SweepLine line = {.enabled = isatty(STDERR_FILENO) && g_getenv("FRAGSIM_NO_PROGRESS") == NULL};
    gint64 start;
    gboolean ok;

    if (!fsim_cli_parse_args(
            "sweep", "SPEC - run a grid of replays: traces x policies x settings x cards", entries,
            "SPEC is a key file (docs/sweep.md):\n"
            "  [sweep]\n"
            "  traces=traces/*.trace;runs/*.pickle\n"
            "  policies=caching;expandable;bestfit\n"
            "  alloc-confs=;max_split_size_mb:128;expandable_segments:True\n"
            "  devices=t4-16gb;a100-40gb\n"
            "Every trace x policy x device, and x alloc conf for caching and expandable, is a "
            "job;\n"
            "each is a run in the database with its needed capacity (needed_bytes).\n"
            "Exit status: 0 success, 1 bad spec or database, 2 usage error,\n"
            "6 some jobs failed (recorded as runs with status error) while the others completed.",
            "SPEC", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (shard_text != NULL && !fsim_sweep_parse_shard(shard_text, &shard, &shards, &error))
        return fsim_cli_fail("sweep", error);
    if (parallel < 0)
        return fsim_cli_usage_error("sweep", "-j: %d is not a number of jobs", parallel);
    if (db_path == NULL && !list)
        return fsim_cli_usage_error("sweep", "--db FILE is required (or --list)");
    spec = fsim_sweep_spec_load(argv[1], &error);
    if (spec == NULL)
        return fsim_cli_fail("sweep", error);
    jobs = fsim_sweep_shard(spec->jobs, shard, shards);
    if (list) {
        sweep_print_jobs(jobs);
        return FSIM_EXIT_OK;
    }
    if (parallel == 0)
        parallel = (gint)g_get_num_processors();
    start = g_get_monotonic_time();
    ok = fsim_sweep_run(spec, jobs, db_path, (guint)parallel, sweep_progress, &line, &failed,
                        &error);
    if (line.drawn)
        fprintf(stderr, "\n");
    if (!ok)
        return fsim_cli_fail("sweep", error);
    g_print("%s: %u of %u jobs", spec->path, jobs->len, spec->jobs->len);
    if (shards > 1)
        g_print(" (shard %u/%u)", shard, shards);
    g_print(" run into %s by %d workers in %.1f s", db_path, parallel,
            (double)(g_get_monotonic_time() - start) / 1e6);
    if (failed > 0) {
        g_print("; %u failed (runs with status error: their message says why)\n", failed);
        return FSIM_EXIT_RUN_ERROR;
    }
    g_print("; none failed\n");
    return FSIM_EXIT_OK;
}
