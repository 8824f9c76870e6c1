/* SPDX-License-Identifier: MIT */
/*
 * fragsim replay TRACE [-p POLICIES] [-d DEVICE] [-c ALLOC_CONF]... [--set POLICY.KEY=VALUE]
 *                      [--trace-device N] [--no-needed] [--json] [--fail-on-oom] [--paranoid]
 *                      [--platform cuda|npu]
 *
 * Replays each device of the trace through every run asked for (a policy under a configuration),
 * in lock step (the trace is read once per device and each event is fed to every engine), keeps
 * the decoded events in memory for the needed-capacity search of each run (src/analysis/), and
 * prints a comparison.  A run that fails for a reason other than memory ends in error; the others
 * go on.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/alloc-conf.h"
#include "fragsim/validate.h"

#include "analysis/feed.h"
#include "analysis/needed.h"
#include "analysis/peak.h"
#include "analysis/recorded.h"
#include "cli.h"
#include "configs.h"
#include "replay-outputs.h"
#include "replay-runs.h"

static void
run_free(gpointer data)
{
    ReplayRun *run = data;

    fsim_engine_free(run->engine);
    g_free(run->config);
    g_free(run->label);
    g_free(run->oom_message);
    g_free(run->error);
    g_free(run->needed_note);
    g_clear_pointer(&run->pool_needs, g_array_unref);
    g_free(run);
}

/* The run ends in error (for a reason other than running out of memory); the others go on. */
static void
run_set_error(ReplayRun *run, const GError *error)
{
    const char *message = error->message;
    gsize n = strlen(run->policy);

    /* the row and the note name the run already: drop the policy's own "bestfit: " */
    if (strncmp(message, run->policy, n) == 0 && strncmp(message + n, ": ", 2) == 0)
        message += n + 2;
    run->status = REPLAY_ERROR;
    g_free(run->error);
    run->error = g_strdup(message);
}

/* Replay one device of the trace through every run in @runs (those of that device), keeping
 * the events in @log (nullable) for the needed-capacity searches.  Empty_cache events the reader
 * inferred from recorded release bursts run, except those that look like PyTorch's retry before
 * an OOM (fsim_release_is_retry()) unless @inferred_releases.  A run whose policy fails ends in
 * error and the others go on; a broken trace stops them all (FALSE). */
static gboolean
replay_device(FsimTrace *trace, uint32_t device, GPtrArray *runs, gboolean inferred_releases,
              FsimEventLog *log, GError **error)
{
    g_auto(FsimReplayFeed) feed = {0};
    g_autoptr(FsimProgress) progress = NULL;
    g_autofree char *label = NULL;
    GError *local_error = NULL;
    const FsimEvent *evs;
    gsize n;
    uint64_t count = 0;

    if (!fsim_replay_feed_open(&feed, trace, device, inferred_releases, error))
        return FALSE;
    feed.log = log;
    label = g_strdup_printf("replay device %u", device);
    progress = fsim_progress_new(label, 0);
    while ((n = fsim_replay_feed_batch(&feed, &evs, &local_error)) > 0) {
        for (guint i = 0; i < runs->len; i++) {
            ReplayRun *run = g_ptr_array_index(runs, i);
            g_autoptr(GError) run_error = NULL;

            if (run->status != REPLAY_COMPLETE)
                continue;
            if (!fsim_engine_process_batch(run->engine, evs, n, &run_error)) {
                if (g_error_matches(run_error, FSIM_ERROR, FSIM_ERROR_OOM)) {
                    run->status = REPLAY_OOM;
                    run->oom_message = g_strdup(run_error->message);
                    continue;
                }
                if (run_error->domain == FSIM_TRACE_ERROR) {
                    g_set_error(error, run_error->domain, run_error->code, "%s: %s",
                                fsim_trace_path(trace), run_error->message);
                    return FALSE;
                }
                run_set_error(run, run_error);
            }
        }
        if ((count >> 16) != ((count + n) >> 16))
            fsim_progress_update(progress, count + n);
        count += n;
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    for (guint i = 0; i < runs->len; i++) {
        ReplayRun *run = g_ptr_array_index(runs, i);
        g_autoptr(GError) run_error = NULL;

        if (run->status != REPLAY_ERROR && !fsim_engine_finish(run->engine, &run_error))
            run_set_error(run, run_error);
        if (run->status != REPLAY_ERROR)
            run->metrics = *fsim_engine_metrics(run->engine);
    }
    return TRUE;
}

/* With private pools: each pool's share of @needed (one more replay, on that capacity). */
static void
replay_pool_needs(ReplayRun *run, const FsimEventLog *log, const FsimNeededQuery *query,
                  uint64_t needed)
{
    g_autoptr(GArray) stats = fsim_policy_pool_stats(fsim_engine_policy(run->engine));
    g_autoptr(GError) error = NULL;

    if (stats == NULL)
        return;
    run->pool_needs = fsim_needed_pools(log, query, needed, &run->pool_needs_peak, &error);
    if (run->pool_needs == NULL && error != NULL)
        g_printerr("fragsim replay: warning: %s: no needs by pool: %s\n", run->label,
                   error->message);
}

/* needed_bytes of every run of one device that did not end in error (@log: its events). */
static void
replay_needed(GPtrArray *runs, const FsimEventLog *log, const FsimInitialState *state,
              const FsimLifetimes *lifetimes, gboolean paranoid)
{
    for (guint i = 0; i < runs->len; i++) {
        ReplayRun *run = g_ptr_array_index(runs, i);
        const FsimRunConfig *config;
        FsimNeededQuery query = {0};
        FsimNeededResult result;
        g_autoptr(GError) error = NULL;

        if (run->status == REPLAY_ERROR)
            continue;
        config = fsim_engine_config(run->engine);
        query.policy = run->policy;
        query.config = run->knobs;
        query.device = run->device;
        query.initial_state = state;
        query.lifetimes = lifetimes;
        query.paranoid = paranoid;
        query.free_delay_ns = config->free_delay_ns;
        query.known = run->status == REPLAY_COMPLETE ? &run->metrics : NULL;
        query.known_refused = fsim_engine_device(run->engine)->least_refused_demand;
        if (!fsim_needed_search(log, &query, &result, &error)) {
            run->needed_note = g_strdup(error->message);
            continue;
        }
        run->metrics.needed_bytes = (int64_t)result.needed_bytes;
        run->needed_replays = result.replays;
        run->served_peak_requested = result.metrics.peak_requested_bytes;
        replay_pool_needs(run, log, &query, result.needed_bytes);
    }
}

/* The breakdown of reserved memory at each run's peak, for the database (analysis/peak.h): a
 * partial replay of @log per run.  A breakdown that cannot be taken is left out with a warning:
 * the run's other results stand. */
static void
replay_breakdowns(GPtrArray *runs, const FsimEventLog *log, FsimTrace *trace, uint32_t device,
                  gboolean inferred_releases, FsimReplayOutputs *outputs)
{
    for (guint i = 0; i < runs->len; i++) {
        ReplayRun *run = g_ptr_array_index(runs, i);
        FsimStoredBreakdown breakdown;
        g_autoptr(GError) error = NULL;

        if (run->status == REPLAY_ERROR || run->engine == NULL)
            continue;
        if (log != NULL ? !fsim_peak_breakdown(log, fsim_engine_config(run->engine),
                                               run->peak.reserved, &breakdown, &error)
                        : !fsim_peak_breakdown_trace(trace, device, inferred_releases,
                                                     fsim_engine_config(run->engine),
                                                     run->peak.reserved, &breakdown, &error)) {
            g_printerr("fragsim replay: warning: %s: no breakdown at the peak: %s\n", run->label,
                       error->message);
            continue;
        }
        if (breakdown.present)
            fsim_replay_outputs_breakdown(outputs, run->engine, &breakdown);
    }
}

/* The memory by pool of each run with private pools, for the database (table run_pools). */
static void
replay_pools_to_db(GPtrArray *runs, FsimReplayOutputs *outputs)
{
    for (guint i = 0; i < runs->len; i++) {
        ReplayRun *run = g_ptr_array_index(runs, i);
        g_autoptr(GArray) pools = NULL;

        if (run->status == REPLAY_ERROR || run->engine == NULL)
            continue;
        pools = fsim_needed_stored_pools(fsim_engine_policy(run->engine), run->pool_needs);
        if (pools != NULL)
            fsim_replay_outputs_pools(outputs, run->engine, pools);
    }
}

/* The lower bound is the trace's: the peak of live requested bytes with every request served,
 * the same for every run (a run with OOMs served fewer). */
static void
replay_lower_bound(GPtrArray *runs)
{
    uint64_t lower = 0;
    gboolean exact = FALSE;

    for (guint i = 0; i < runs->len; i++) {
        const ReplayRun *run = g_ptr_array_index(runs, i);
        uint64_t served =
            run->metrics.ooms == 0 ? run->metrics.peak_requested_bytes : run->served_peak_requested;

        if (run->status == REPLAY_ERROR || run->engine == NULL)
            continue;
        if (served != 0 || run->metrics.ooms == 0) {
            lower = exact ? MAX(lower, served) : served;
            exact = TRUE;
        } else if (!exact) {
            lower = MAX(lower, run->metrics.peak_requested_bytes);
        }
    }
    for (guint i = 0; i < runs->len; i++) {
        ReplayRun *run = g_ptr_array_index(runs, i);
        FsimMetrics *m = &run->metrics;

        if (run->status == REPLAY_ERROR)
            continue;
        m->lower_bound_bytes = lower;
        m->excess_over_lower_bound_bytes =
            m->peak_reserved_bytes > lower ? m->peak_reserved_bytes - lower : 0;
    }
}

/* The `recorded` row of a device whose trace has segment events: what the recording reserved,
 * allocated, its driver calls and OOMs, on the capacity it implies (or its own peak). */
static gboolean
replay_recorded(FsimTrace *trace, uint32_t device, GPtrArray *runs, GError **error)
{
    FsimRecorded recorded;
    ReplayRun *run;
    FsimAllocConf conf;

    if (!fsim_recorded_summary(trace, device, &recorded, error))
        return FALSE;
    if (!recorded.has_segments)
        return TRUE;
    run = g_new0(ReplayRun, 1);
    fsim_alloc_conf_init(&conf);
    if (fsim_trace_alloc_conf(trace) != NULL)
        (void)fsim_alloc_conf_parse(&conf, fsim_trace_alloc_conf(trace), NULL);
    run->policy = "recorded";
    run->config = fsim_alloc_conf_to_string(&conf);
    run->label = g_strdup("recorded");
    run->trace_device = device;
    run->recorded_capacity = recorded.capacity_bytes != 0;
    run->device = fsim_needed_device(&run->device, recorded.capacity_bytes != 0
                                                       ? recorded.capacity_bytes
                                                       : recorded.metrics.peak_reserved_bytes);
    g_snprintf(run->device.name, sizeof(run->device.name), "%s",
               run->recorded_capacity ? "recorded (implied by its OOM)" : "recorded (its peak)");
    run->metrics = recorded.metrics;
    g_ptr_array_add(runs, run);
    return TRUE;
}

static int64_t
replay_run_id(gpointer data, const ReplayRun *run)
{
    return fsim_replay_outputs_row(data, run);
}

/* The runs of one trace device: every policy under every configuration that applies to it. */
static gboolean
replay_make_runs(FsimTrace *trace, uint32_t device, GPtrArray *policies, GPtrArray *configs,
                 const FsimDeviceSpec *spec, const FsimLifetimes *lifetimes, gboolean fail_on_oom,
                 gboolean paranoid, FsimReplayOutputs *outputs, GPtrArray *runs,
                 GPtrArray *device_runs, GError **error)
{
    for (guint p = 0; p < policies->len; p++) {
        const char *policy = g_ptr_array_index(policies, p);
        guint n = fsim_cli_policy_runs(policy, configs);

        for (guint c = 0; c < n; c++) {
            const FsimCliConfig *config = g_ptr_array_index(configs, c);
            ReplayRun *run = g_new0(ReplayRun, 1);
            FsimRunConfig rc;
            g_autoptr(GError) local_error = NULL;

            fsim_run_config_init(&rc);
            rc.policy = policy;
            rc.config = config->knobs;
            rc.device = *spec;
            rc.initial_state = fsim_trace_initial_state(trace, device);
            rc.lifetimes = lifetimes;
            rc.fail_on_oom = fail_on_oom;
            rc.paranoid = rc.paranoid || paranoid;
            run->policy = policy;
            run->config = g_strdup(fsim_cli_run_config(policy, configs, c));
            run->label = fsim_run_label(policy, run->config);
            run->knobs = config->knobs;
            run->trace_device = device;
            run->device = *spec;
            run->metrics.needed_bytes = -1;
            run->metrics.first_oom_event = -1;
            g_ptr_array_add(runs, run);
            run->engine = fsim_engine_new(&rc, &local_error);
            if (run->engine == NULL) {
                /* a bad knob is the user's error; a device that cannot hold the policy's set-up
                 * is this run's */
                if (g_error_matches(local_error, FSIM_ERROR, FSIM_ERROR_USAGE)) {
                    g_propagate_error(error, g_steal_pointer(&local_error));
                    return FALSE;
                }
                run_set_error(run, local_error);
                continue;
            }
            if (!fsim_replay_outputs_attach(outputs, run->engine, device, run->config, run->label,
                                            error))
                return FALSE;
            if (fsim_replay_outputs_has_db(outputs))
                fsim_peak_watch_attach(&run->peak, run->engine);
            g_ptr_array_add(device_runs, run);
        }
    }
    return TRUE;
}

/* Replay's flags, as parsed (the outputs' go to its #FsimReplayOutputs).  g_auto() clears it. */
typedef struct {
    FsimCliRunArgs runs; /* -p, -c, --set */
    char *device_name;
    char *platform;
    gboolean inferred_releases;
    gint trace_device;
    gboolean json;
    gboolean fail_on_oom;
    gboolean paranoid;
    gboolean no_needed;
} ReplayArgs;

static void
replay_args_clear(ReplayArgs *a)
{
    fsim_cli_run_args_clear(&a->runs);
    g_clear_pointer(&a->device_name, g_free);
    g_clear_pointer(&a->platform, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ReplayArgs, replay_args_clear)

/* Parse the command line into @a and @outputs; FALSE on a usage error (or --help). */
static gboolean
replay_parse(ReplayArgs *a, FsimReplayOutputs *outputs, int *argc, char ***argv)
{
    GOptionEntry entries[] = {
        FSIM_CLI_POLICIES_ENTRY(&a->runs.policy_list),
        {"device", 'd', 0, G_OPTION_ARG_STRING, &a->device_name,
         "Modelled GPU: a preset, a size (80GiB) or a profile (default " FSIM_DEVICE_DEFAULT ")",
         "DEVICE"},
        FSIM_CLI_ALLOC_CONFS_ENTRY(&a->runs.alloc_confs),
        FSIM_CLI_SET_ENTRY(&a->runs.sets),
        {"no-needed", 0, 0, G_OPTION_ARG_NONE, &a->no_needed,
         "Skip the capacity each run needs (needed_bytes: more replays of the trace)", NULL},
        {"inferred-releases", 0, 0, G_OPTION_ARG_NONE, &a->inferred_releases,
         "Also replay recorded releases that look like PyTorch's retry before an OOM", NULL},
        FSIM_CLI_REPLAY_DEVICE_ENTRY(&a->trace_device),
        FSIM_CLI_JSON_ENTRY(&a->json),
        {"fail-on-oom", 0, 0, G_OPTION_ARG_NONE, &a->fail_on_oom,
         "Stop a run at its first simulated OOM and exit with status 3", NULL},
        FSIM_CLI_PARANOID_ENTRY(&a->paranoid),
        {"platform", 0, 0, G_OPTION_ARG_STRING, &a->platform,
         "cuda or npu: caching and expandable model PyTorch's or torch_npu's allocator "
         "(default: cuda, npu for a snapshot whose addresses show torch_npu's padding)",
         "PLATFORM"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };

    a->trace_device = -1;
    return fsim_replay_outputs_parse(
        outputs, "replay", "TRACE - replay a trace through allocator policies", entries,
        "Formats: fragsim text traces (.gz too), PyTorch memory snapshots, RMM logs.\n"
        "Each (policy, -c configuration) pair is a run.  'needs' is needed_bytes: the least\n"
        "capacity on which the run, and on every larger one, has no OOM (docs/metrics.md).\n"
        "Example: fragsim replay traces/fragmenting.trace -p caching -c '' -c "
        "expandable_segments:True\n"
        "Exit status: 0 success, 1 bad input, 2 usage error, 3 OOM under --fail-on-oom,\n"
        "6 some runs ended in error (their rows say why) while the others completed.",
        argc, argv);
}

/* Replay trace device @device through every run of @policies and @configs, the runs appended to
 * @runs: the recorded run, the replay, then what each run needs and its lower bound. */
static gboolean
replay_trace_device(const ReplayArgs *a, FsimTrace *trace, uint32_t device, GPtrArray *policies,
                    GPtrArray *configs, const FsimDeviceSpec *spec, FsimReplayOutputs *outputs,
                    GPtrArray *runs, GError **error)
{
    g_autoptr(GPtrArray) device_runs = g_ptr_array_new();
    g_autoptr(FsimLifetimes) lifetimes = NULL;
    g_autoptr(FsimEventLog) log = a->no_needed ? NULL : fsim_event_log_new(device);
    guint first = runs->len;

    for (guint p = 0; p < policies->len && lifetimes == NULL; p++) {
        if (fsim_policy_is_offline(g_ptr_array_index(policies, p))) {
            /* an offline policy: read the whole device's stream once first */
            lifetimes = fsim_lifetimes_from_trace(trace, device, error);
            if (lifetimes == NULL)
                return FALSE;
        }
    }
    if (!replay_recorded(trace, device, runs, error) ||
        !replay_make_runs(trace, device, policies, configs, spec, lifetimes, a->fail_on_oom,
                          a->paranoid, outputs, runs, device_runs, error) ||
        !replay_device(trace, device, device_runs, a->inferred_releases, log, error))
        return FALSE;
    if (!a->no_needed)
        replay_needed(device_runs, log, fsim_trace_initial_state(trace, device), lifetimes,
                      a->paranoid);
    if (fsim_replay_outputs_has_db(outputs)) {
        replay_breakdowns(device_runs, log, trace, device, a->inferred_releases, outputs);
        replay_pools_to_db(device_runs, outputs);
    }
    g_ptr_array_remove_range(device_runs, 0, device_runs->len);
    for (guint i = first; i < runs->len; i++)
        g_ptr_array_add(device_runs, g_ptr_array_index(runs, i));
    replay_lower_bound(device_runs);
    return TRUE;
}

/* Report each run's OOM or error on stderr and hand its result to @outputs; *@any_oom and
 * *@any_error say whether a run ended so. */
static gboolean
replay_report_runs(FsimTrace *trace, GPtrArray *runs, FsimReplayOutputs *outputs, gboolean *any_oom,
                   gboolean *any_error, GError **error)
{
    for (guint i = 0; i < runs->len; i++) {
        ReplayRun *run = g_ptr_array_index(runs, i);

        if (run->status == REPLAY_OOM) {
            gsize n_ooms = 0;
            const FsimOomRecord *ooms =
                run->engine != NULL ? fsim_engine_ooms(run->engine, &n_ooms) : NULL;
            g_autofree char *site =
                n_ooms > 0 ? fsim_trace_stack_site(trace, ooms[n_ooms - 1].stack) : NULL;

            /* the program's line that asked, when the snapshot recorded its frames */
            g_printerr("fragsim replay: %s: %s%s%s\n", fsim_trace_path(trace), run->oom_message,
                       site != NULL ? "; allocated at " : "", site != NULL ? site : "");
            *any_oom = TRUE;
        }
        if (run->status == REPLAY_ERROR) {
            g_printerr("fragsim replay: %s: %s: %s\n", fsim_trace_path(trace), run->label,
                       run->error);
            *any_error = TRUE;
        }
        if (run->engine != NULL)
            fsim_replay_outputs_result(outputs, run->engine, &run->metrics,
                                       run->status == REPLAY_ERROR ? run->error : NULL);
        else if (!fsim_replay_outputs_add(outputs, run, error))
            return FALSE;
    }
    return TRUE;
}

int
fsim_cmd_replay(int argc, char **argv)
{
    g_auto(ReplayArgs) a = {0};
    g_autoptr(GPtrArray) policies = NULL;
    g_autoptr(GPtrArray) configs = NULL;
    g_autoptr(GPtrArray) runs = g_ptr_array_new_with_free_func(run_free);
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimReplayOutputs) outputs = fsim_replay_outputs_new();
    GError *error = NULL;
    FsimDeviceSpec spec;
    const uint32_t *devices;
    gsize n_devices;
    guint n_runs = 0;
    gboolean any_oom = FALSE, any_error = FALSE;

    if (!replay_parse(&a, outputs, &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (!fsim_device_spec_parse(a.device_name != NULL ? a.device_name : FSIM_DEVICE_DEFAULT, &spec,
                                &error) ||
        !fsim_cli_open_runs(argv[1], &a.runs, "paged.page_size=64KiB", "device for fault injection",
                            &configs, &policies, &n_runs, &trace, &error) ||
        !fsim_cli_choose_platform(trace, configs, a.platform, "replay", a.json, &error))
        return fsim_cli_fail("replay", error);
    devices = fsim_trace_devices(trace, &n_devices);
    if (a.trace_device >= 0 && !fsim_cli_trace_has_device(trace, (uint32_t)a.trace_device))
        return fsim_cli_usage_error("replay", "%s has no events on device %d",
                                    fsim_trace_path(trace), a.trace_device);
    if (!fsim_replay_outputs_open(outputs, trace, n_runs, a.trace_device, &error))
        return fsim_cli_fail("replay", error);
    if (n_devices == 0 && !a.json)
        g_print("%s: the trace has no events to replay\n", fsim_trace_path(trace));
    for (gsize d = 0; d < n_devices; d++) {
        if ((a.trace_device < 0 || devices[d] == (uint32_t)a.trace_device) &&
            !replay_trace_device(&a, trace, devices[d], policies, configs, &spec, outputs, runs,
                                 &error))
            return fsim_cli_fail("replay", error);
    }
    if (!replay_report_runs(trace, runs, outputs, &any_oom, &any_error, &error))
        return fsim_cli_fail("replay", error);
    if (a.json)
        replay_print_json(fsim_trace_path(trace), runs, replay_run_id, outputs);
    else
        replay_print_table(trace, runs);
    if (!fsim_replay_outputs_finish(outputs, a.json, &error))
        return fsim_cli_fail("replay", error);
    return any_error ? FSIM_EXIT_RUN_ERROR : any_oom ? FSIM_EXIT_OOM : FSIM_EXIT_OK;
}
