/* SPDX-License-Identifier: MIT */
/*
 * `--shard I/N`: one of N balanced, deterministic parts of a sweep's job list, so that N
 * machines (a Slurm array, GNU parallel over hosts) each run one and `fragsim merge` joins them.
 *
 * Balance is by weight, not by count: a job's weight is its trace's size plus a fixed cost (a job
 * on a tiny trace still costs a process, a trace read and its needed-capacity search).  Jobs are
 * dealt heaviest first, each to the lightest shard so far: the classic longest-processing-time
 * rule, within 4/3 of the best possible makespan and, with many similar jobs, as even as a round
 * robin.  Every tie is broken by list order and shard number, so the partition depends only on
 * the list (and the traces' sizes), never on the machine.
 */
#include <glib.h>

#include <stdlib.h>
#include <string.h>

#include "sweep.h"

/* The fixed part of a job's weight, in trace bytes. */
#define SHARD_JOB_COST ((uint64_t)256 * 1024)

gboolean
fsim_sweep_parse_shard(const char *text, guint *index, guint *count, GError **error)
{
    const char *slash = text != NULL ? strchr(text, '/') : NULL;
    g_autofree char *first = slash != NULL ? g_strndup(text, slash - text) : NULL;
    guint64 i, n;

    if (slash == NULL || !g_ascii_string_to_unsigned(first, 10, 1, G_MAXUINT, &i, NULL) ||
        !g_ascii_string_to_unsigned(slash + 1, 10, 1, G_MAXUINT, &n, NULL) || i > n) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--shard: '%s' is not I/N with 1 <= I <= N (e.g. 2/8)", text);
        return FALSE;
    }
    *index = (guint)i;
    *count = (guint)n;
    return TRUE;
}

static uint64_t
job_weight(const FsimSweepJob *job)
{
    return job->trace->size + SHARD_JOB_COST;
}

/* Heaviest first; equal weights in list order. */
static int
compare_jobs(gconstpointer a, gconstpointer b)
{
    const FsimSweepJob *ja = *(FsimSweepJob *const *)a;
    const FsimSweepJob *jb = *(FsimSweepJob *const *)b;
    uint64_t wa = job_weight(ja), wb = job_weight(jb);

    if (wa != wb)
        return wa > wb ? -1 : 1;
    return fsim_compare_u64(ja->index, jb->index);
}

static int
compare_index(gconstpointer a, gconstpointer b)
{
    return fsim_compare_u64((*(FsimSweepJob *const *)a)->index, (*(FsimSweepJob *const *)b)->index);
}

GPtrArray *
fsim_sweep_shard(GPtrArray *jobs, guint index, guint count)
{
    g_autoptr(GPtrArray) order = g_ptr_array_sized_new(jobs->len); /* borrows the jobs */
    g_autofree uint64_t *load = g_new0(uint64_t, count);
    GPtrArray *out = g_ptr_array_new();

    g_return_val_if_fail(index >= 1 && index <= count, out);
    g_ptr_array_extend(order, jobs, NULL, NULL);
    g_ptr_array_sort(order, compare_jobs);
    for (guint j = 0; j < order->len; j++) {
        FsimSweepJob *job = g_ptr_array_index(order, j);
        guint lightest = 0;

        for (guint s = 1; s < count; s++)
            if (load[s] < load[lightest])
                lightest = s;
        load[lightest] += job_weight(job);
        if (lightest == index - 1)
            g_ptr_array_add(out, job);
    }
    g_ptr_array_sort(out, compare_index);
    return out;
}
