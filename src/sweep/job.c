/* SPDX-License-Identifier: MIT */
/*
 * One sweep job, replayed in this process (a worker of pool.c) and written to the database.
 *
 * A job is what `fragsim replay TRACE -p POLICY -c CONF -d DEVICE --db OUT` does for one run,
 * and gives the same figures: each trace device's events are fed to the engine (the store
 * observing it) and kept decoded for the needed-capacity search (src/analysis/needed.c); the
 * trace's lower bound is the peak of requested bytes with every request served.  Inferred releases
 * that look like PyTorch's retry before an OOM are skipped and a torch_npu snapshot gets the npu
 * platform, as in replay.  The run also records the trace file's SHA-256 and the spec's job name:
 * the job's identity across machines, for `merge` and the report.
 */
#include <glib.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fragsim/store.h"
#include "fragsim/validate.h"

#include "analysis/feed.h"
#include "analysis/needed.h"
#include "sweep.h"

/* Plain stdio, not GIO: the sweep's parent process hashes traces between forks, and GIO may
 * start threads a forked child must not inherit. */
char *
fsim_sweep_file_sha256(const char *path, GError **error)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree guchar *buffer = g_malloc(1 << 20);
    FILE *file = fopen(path, "rb");
    size_t n;
    int saved;

    if (file == NULL) {
        saved = errno;
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: %s", path, g_strerror(saved));
        return NULL;
    }
    while ((n = fread(buffer, 1, 1 << 20, file)) > 0)
        g_checksum_update(sum, buffer, (gssize)n);
    saved = ferror(file) ? errno : 0;
    (void)fclose(file);
    if (saved != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: cannot read it: %s", path,
                    g_strerror(saved));
        return NULL;
    }
    return g_strdup(g_checksum_get_string(sum));
}

/* The job's knobs: its alloc conf's, with the npu platform for a torch_npu snapshot. */
static GKeyFile *
job_knobs(const FsimSweepJob *job, FsimTrace *trace, GError **error)
{
    g_autoptr(GKeyFile) knobs = g_key_file_new();
    const char *platform;

    if (job->config != NULL) {
        g_autofree char *data = g_key_file_to_data(job->config->knobs, NULL, NULL);

        if (!g_key_file_load_from_data(knobs, data, (gsize)-1, G_KEY_FILE_NONE, error))
            return NULL;
    }
    if (strcmp(fsim_trace_format_name(trace), "torch") != 0 ||
        !fsim_policy_takes_alloc_conf(job->policy))
        return g_steal_pointer(&knobs);
    platform = fsim_trace_detect_platform(trace, error);
    if (platform == NULL)
        return NULL;
    if (strcmp(platform, "npu") == 0)
        g_key_file_set_string(knobs, job->policy, "platform", platform);
    return g_steal_pointer(&knobs);
}

/* A run with private pools: each pool's memory and share of @needed, for run_pools. */
static void
job_pools(const FsimEventLog *log, const FsimNeededQuery *query, uint64_t needed,
          const FsimEngine *engine, FsimStoreRun *run)
{
    const FsimPolicy *policy = fsim_engine_policy(engine);
    g_autoptr(GArray) stats = fsim_policy_pool_stats(policy);
    g_autoptr(GArray) needs = NULL;
    g_autoptr(GArray) pools = NULL;
    g_autoptr(GError) error = NULL;
    uint64_t peak = 0;

    if (stats == NULL)
        return;
    needs = fsim_needed_pools(log, query, needed, &peak, &error);
    if (error != NULL)
        g_debug("no needs by pool: %s", error->message);
    pools = fsim_needed_stored_pools(policy, needs);
    if (pools != NULL)
        fsim_store_run_set_pools(run, (const FsimStoredPool *)(const void *)pools->data,
                                 pools->len);
}

/* needed_bytes and the lower bound of a run that went through, as replay computes them for a
 * run of its own, and the memory by pool of one with private pools. */
static void
job_needed(const FsimEventLog *log, FsimEngine *engine, FsimTrace *trace, uint32_t device,
           const FsimLifetimes *lifetimes, FsimMetrics *m, FsimStoreRun *run)
{
    const FsimRunConfig *config = fsim_engine_config(engine);
    FsimNeededQuery query = {0};
    FsimNeededResult result;
    g_autoptr(GError) error = NULL;
    uint64_t served = 0;

    query.policy = config->policy;
    query.config = config->config;
    query.device = config->device;
    query.initial_state = fsim_trace_initial_state(trace, device);
    query.lifetimes = lifetimes;
    query.paranoid = config->paranoid;
    query.free_delay_ns = config->free_delay_ns;
    query.known = m;
    query.known_refused = fsim_engine_device(engine)->least_refused_demand;
    if (fsim_needed_search(log, &query, &result, &error)) {
        m->needed_bytes = (int64_t)result.needed_bytes;
        served = result.metrics.peak_requested_bytes;
        job_pools(log, &query, result.needed_bytes, engine, run);
    } else {
        g_debug("%s: %s: no needed capacity: %s", fsim_trace_path(trace), config->policy,
                error->message);
    }
    if (m->ooms == 0)
        served = m->peak_requested_bytes;
    m->lower_bound_bytes = served != 0 ? served : m->peak_requested_bytes;
    m->excess_over_lower_bound_bytes = m->peak_reserved_bytes > m->lower_bound_bytes
                                           ? m->peak_reserved_bytes - m->lower_bound_bytes
                                           : 0;
}

/* One run: the job on one trace device.  FALSE only for a store error. */
static gboolean
job_run_device(FsimStore *store, FsimTrace *trace, uint32_t device, const FsimSweepJob *job,
               GKeyFile *knobs, FsimStoreRunInfo *info, guint *failed, GError **error)
{
    g_autoptr(FsimLifetimes) lifetimes = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(FsimStoreRun) run = NULL;
    g_autoptr(FsimEventLog) log = fsim_event_log_new(device);
    g_autoptr(GError) local_error = NULL;
    FsimRunConfig rc;
    FsimMetrics metrics;

    info->trace_device = device;
    fsim_run_config_init(&rc);
    rc.policy = job->policy;
    rc.config = knobs;
    rc.device = *job->device;
    rc.initial_state = fsim_trace_initial_state(trace, device);
    if (fsim_policy_is_offline(job->policy)) {
        lifetimes = fsim_lifetimes_from_trace(trace, device, &local_error);
        if (lifetimes == NULL)
            goto failed;
    }
    rc.lifetimes = lifetimes;
    engine = fsim_engine_new(&rc, &local_error);
    if (engine == NULL)
        goto failed;
    run = fsim_store_attach(store, engine, info, error);
    if (run == NULL)
        return FALSE;
    if (!fsim_replay_feed_run(trace, device, FALSE, engine, log, &local_error)) {
        (*failed)++;
        fsim_store_run_error(run, local_error->message);
        return TRUE;
    }
    metrics = *fsim_engine_metrics(engine);
    job_needed(log, engine, trace, device, lifetimes, &metrics, run);
    fsim_store_run_set_metrics(run, &metrics);
    return fsim_store_run_finish(run, FSIM_STORE_COMPLETE, error);

failed:
    (*failed)++;
    return fsim_store_record_error_run(store, info, job->device, local_error->message, error);
}

gboolean
fsim_sweep_run_job(FsimStore *store, const FsimSweepSpec *spec, const FsimSweepJob *job,
                   const char *sha256, guint *failed, GError **error)
{
    g_autoptr(GError) local_error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(job->trace->path, &local_error);
    g_autoptr(GKeyFile) knobs = trace != NULL ? job_knobs(job, trace, &local_error) : NULL;
    g_autofree char *knobs_text = knobs != NULL ? fsim_store_knobs_text(knobs, job->policy) : NULL;
    g_autofree char *label = NULL;
    const uint32_t *devices = NULL;
    gsize n_devices = 0;
    FsimStoreRunInfo info = {
        .trace = job->trace->path,
        .trace_format = trace != NULL ? fsim_trace_format_name(trace) : NULL,
        .trace_device = spec->trace_device >= 0 ? (uint32_t)spec->trace_device : 0,
        .policy = job->policy,
        .knobs = knobs_text,
        .config = job->config != NULL ? job->config->text : "",
        .seed = -1,
        .trace_sha256 = sha256,
        .job = job->trace->job,
    };

    *failed = 0;
    label = fsim_run_label(info.policy, info.config);
    info.label = label;
    if (knobs == NULL) {
        *failed = 1;
        return fsim_store_record_error_run(store, &info, job->device, local_error->message, error);
    }
    devices = fsim_trace_devices(trace, &n_devices);
    if (spec->trace_device >= 0) {
        for (gsize d = 0; d < n_devices; d++)
            if (devices[d] == (uint32_t)spec->trace_device)
                return job_run_device(store, trace, devices[d], job, knobs, &info, failed, error);
        *failed = 1;
        local_error = g_error_new(FSIM_ERROR, FSIM_ERROR_FAILED,
                                  "%s has no events on device %d (trace-device)", job->trace->path,
                                  spec->trace_device);
        return fsim_store_record_error_run(store, &info, job->device, local_error->message, error);
    }
    for (gsize d = 0; d < n_devices; d++)
        if (!job_run_device(store, trace, devices[d], job, knobs, &info, failed, error))
            return FALSE;
    return TRUE;
}
