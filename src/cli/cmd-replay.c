/* SPDX-License-Identifier: MIT */
/*
 * fragsim replay TRACE [-p POLICIES] [-d DEVICE] [--set POLICY.KEY=VALUE] [--trace-device N]
 *                      [--json] [--fail-on-oom] [--paranoid]
 *
 * Replays each device of the trace through every policy asked for, in lock step (the trace is
 * read once per device and each event is fed to every engine), and prints a comparison.
 */
#include <glib.h>

#include "cli.h"
#include "replay-outputs.h"

typedef struct {
    const char *policy;
    uint32_t trace_device;
    FsimEngine *engine;
    gboolean stopped_oom; /* stopped by --fail-on-oom */
    char *oom_message;
} Run;

static void
run_free(gpointer data)
{
    Run *run = data;

    fsim_engine_free(run->engine);
    g_free(run->oom_message);
    g_free(run);
}

/* Whether the recorded release burst that starts at entry @index (an empty_cache the reader
 * inferred) is followed at once by a segment allocation: the signature of PyTorch's retry after a
 * failed cudaMalloc, which a policy on another device does on its own if it needs to.  A burst
 * followed by anything else can only be an explicit torch.cuda.empty_cache(). */
static gboolean
release_is_retry(const FsimOutcome *outcomes, gsize n, uint64_t index)
{
    gsize lo = 0;
    gsize hi = n;

    while (lo < hi) {
        gsize mid = lo + (hi - lo) / 2;

        if (outcomes[mid].index < index)
            lo = mid + 1;
        else
            hi = mid;
    }
    while (lo < n && outcomes[lo].index == index &&
           (outcomes[lo].kind == FSIM_OUTCOME_SEGMENT_FREE ||
            outcomes[lo].kind == FSIM_OUTCOME_SEGMENT_UNMAP)) {
        lo++;
        index++;
    }
    return lo < n && outcomes[lo].index == index &&
           (outcomes[lo].kind == FSIM_OUTCOME_SEGMENT_ALLOC ||
            outcomes[lo].kind == FSIM_OUTCOME_SEGMENT_MAP);
}

/* Replay one device of the trace through every run in @runs (those of that device).  Empty_cache
 * events the reader inferred from recorded release bursts run, except those that look like
 * PyTorch's retry before an OOM (release_is_retry()) unless @inferred_releases. */
static gboolean
replay_device(FsimTrace *trace, uint32_t device, GPtrArray *runs, gboolean inferred_releases,
              GError **error)
{
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, device, error);
    g_autoptr(FsimProgress) progress = NULL;
    g_autofree char *label = NULL;
    GError *local_error = NULL;
    FsimEvent ev;
    uint64_t count = 0;
    guint active = runs->len;
    const FsimOutcome *outcomes;
    gsize n_outcomes = 0;

    if (stream == NULL)
        return FALSE;
    label = g_strdup_printf("replay device %u", device);
    progress = fsim_progress_new(label, 0);
    outcomes = fsim_trace_outcomes(trace, device, &n_outcomes);
    while (active > 0 && fsim_trace_stream_next(stream, &ev, &local_error)) {
        if (ev.kind == FSIM_EV_EMPTY_CACHE && (ev.flags & FSIM_EVF_INFERRED) != 0 &&
            !inferred_releases && release_is_retry(outcomes, n_outcomes, ev.index))
            continue;
        for (guint i = 0; i < runs->len; i++) {
            Run *run = g_ptr_array_index(runs, i);
            g_autoptr(GError) run_error = NULL;

            if (run->stopped_oom)
                continue;
            if (!fsim_engine_process(run->engine, &ev, &run_error)) {
                if (g_error_matches(run_error, FSIM_ERROR, FSIM_ERROR_OOM)) {
                    run->stopped_oom = TRUE;
                    run->oom_message = g_strdup(run_error->message);
                    active--;
                    continue;
                }
                g_set_error(error, run_error->domain, run_error->code, "%s: %s",
                            fsim_trace_path(trace), run_error->message);
                return FALSE;
            }
        }
        if ((++count & 0xffff) == 0)
            fsim_progress_update(progress, count);
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    for (guint i = 0; i < runs->len; i++) {
        Run *run = g_ptr_array_index(runs, i);

        if (!fsim_engine_finish(run->engine, error)) {
            g_prefix_error(error, "%s: ", fsim_trace_path(trace));
            return FALSE;
        }
    }
    return TRUE;
}

static void
replay_print_json(const char *path, GPtrArray *runs, const FsimReplayOutputs *outputs)
{
    g_autoptr(JsonBuilder) builder = json_builder_new();

    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "trace");
    json_builder_add_string_value(builder, path);
    json_builder_set_member_name(builder, "runs");
    json_builder_begin_array(builder);
    for (guint i = 0; i < runs->len; i++) {
        Run *run = g_ptr_array_index(runs, i);
        const FsimRunConfig *config = fsim_engine_config(run->engine);

        json_builder_begin_object(builder);
        json_builder_set_member_name(builder, "policy");
        json_builder_add_string_value(builder, run->policy);
        json_builder_set_member_name(builder, "device");
        json_builder_add_string_value(builder, config->device.name);
        json_builder_set_member_name(builder, "capacity_bytes");
        json_builder_add_int_value(builder, (gint64)config->device.capacity_bytes);
        json_builder_set_member_name(builder, "trace_device");
        json_builder_add_int_value(builder, run->trace_device);
        json_builder_set_member_name(builder, "status");
        json_builder_add_string_value(builder, run->stopped_oom ? "oom" : "complete");
        if (fsim_replay_outputs_run_id(outputs, run->engine) >= 0) {
            json_builder_set_member_name(builder, "run_id"); /* the row in --db */
            json_builder_add_int_value(builder, fsim_replay_outputs_run_id(outputs, run->engine));
        }
        fsim_cli_json_add_metrics(builder, fsim_engine_metrics(run->engine));
        json_builder_end_object(builder);
    }
    json_builder_end_array(builder);
    json_builder_end_object(builder);
    fsim_cli_print_json(json_builder_get_root(builder));
}

static char *
format_time_ns(uint64_t ns)
{
    if (ns >= 1000000000)
        return g_strdup_printf("%.2f s", (double)ns / 1e9);
    if (ns >= 1000000)
        return g_strdup_printf("%.1f ms", (double)ns / 1e6);
    return g_strdup_printf("%.1f us", (double)ns / 1e3);
}

/* When the recording itself ran out of memory, say which policies would have too. */
static void
replay_print_recorded_ooms(GPtrArray *runs)
{
    for (guint i = 0; i < runs->len;) {
        Run *first = g_ptr_array_index(runs, i);
        uint64_t recorded = fsim_engine_metrics(first->engine)->recorded_ooms;
        g_autoptr(GString) line = g_string_new(NULL);
        guint j;

        for (j = i; j < runs->len; j++) {
            Run *run = g_ptr_array_index(runs, j);
            const FsimMetrics *m = fsim_engine_metrics(run->engine);

            if (run->trace_device != first->trace_device)
                break;
            recorded = MAX(recorded, m->recorded_ooms);
            g_string_append_printf(line, "%s%s %s", line->len ? ", " : "", run->policy,
                                   m->recorded_ooms == 0              ? "did not get there"
                                   : m->recorded_ooms_reproduced == 0 ? "served it"
                                                                      : "failed too");
        }
        if (recorded > 0)
            g_print("device %u: the recording ran out of memory %" G_GUINT64_FORMAT
                    " time%s; replayed here: %s\n",
                    first->trace_device, recorded, recorded == 1 ? "" : "s", line->str);
        i = j;
    }
}

static void
replay_print_table(FsimTrace *trace, GPtrArray *runs)
{
    static const char *const headers[] = {
        "policy",      "peak reserved", "peak allocated", "lower bound",  "excess",
        "utilization", "ext. frag",     "OOMs",           "driver calls", "modelled time",
    };
    guint32 shown_device = G_MAXUINT32;
    g_autoptr(FsimTable) table = NULL;

    for (guint i = 0; i < runs->len; i++) {
        Run *run = g_ptr_array_index(runs, i);
        const FsimMetrics *m = fsim_engine_metrics(run->engine);
        const FsimRunConfig *config = fsim_engine_config(run->engine);
        g_autofree char *reserved = fsim_format_size(m->peak_reserved_bytes);
        g_autofree char *allocated = fsim_format_size(m->peak_allocated_bytes);
        g_autofree char *lower = fsim_format_size(m->lower_bound_bytes);
        g_autofree char *excess = fsim_format_size(m->excess_over_lower_bound_bytes);
        g_autofree char *time = format_time_ns(m->modelled_alloc_time_ns);

        if (run->trace_device != shown_device) {
            g_autofree char *capacity = fsim_format_size(config->device.capacity_bytes);
            uint64_t events = 0;

            /* Runs stopped by an OOM saw fewer events than the trace has. */
            for (guint j = i; j < runs->len; j++) {
                Run *other = g_ptr_array_index(runs, j);

                if (other->trace_device == run->trace_device)
                    events = MAX(events, fsim_engine_metrics(other->engine)->events);
            }

            if (table != NULL) {
                fsim_table_print(table);
                g_print("\n");
            }
            g_clear_pointer(&table, fsim_table_free);
            shown_device = run->trace_device;
            g_print("%s (%s), trace device %u, %" G_GUINT64_FORMAT " events, on %s (%s usable)\n",
                    fsim_trace_path(trace), fsim_trace_format_name(trace), run->trace_device,
                    events, config->device.name, capacity);
            table = fsim_table_new(G_N_ELEMENTS(headers), headers);
        }
        fsim_table_add(table, run->policy);
        fsim_table_add(table, reserved);
        fsim_table_add(table, allocated);
        fsim_table_add(table, lower);
        fsim_table_add(table, excess);
        fsim_table_addf(table, "%.1f%%", 100.0 * m->peak_utilization);
        fsim_table_addf(table, "%.1f%%", 100.0 * m->external_frag_at_peak);
        if (run->stopped_oom)
            fsim_table_addf(table, "%" G_GUINT64_FORMAT " (stopped)", m->ooms);
        else
            fsim_table_addf(table, "%" G_GUINT64_FORMAT, m->ooms);
        fsim_table_addf(table, "%" G_GUINT64_FORMAT,
                        m->device_mallocs + m->device_frees + m->device_maps + m->device_unmaps);
        fsim_table_add(table, time);
    }
    if (table != NULL)
        fsim_table_print(table);
    for (guint i = 0; i < runs->len; i++) {
        Run *run = g_ptr_array_index(runs, i);
        const FsimMetrics *m = fsim_engine_metrics(run->engine);

        if (m->unmatched_frees != 0 || m->double_frees != 0) {
            g_print("note: %s: %" G_GUINT64_FORMAT " frees of unknown ids (trace started late), "
                    "%" G_GUINT64_FORMAT " double frees\n",
                    run->policy, m->unmatched_frees, m->double_frees);
            break;
        }
    }
    replay_print_recorded_ooms(runs);
}

int
fsim_cmd_replay(int argc, char **argv)
{
    g_autofree char *policy_list = NULL;
    g_autofree char *device_name = NULL;
    g_auto(GStrv) sets = NULL;
    g_autofree char *alloc_conf = NULL;
    gboolean inferred_releases = FALSE;
    gint trace_device = -1;
    gboolean json = FALSE;
    gboolean fail_on_oom = FALSE;
    gboolean paranoid = FALSE;
    GOptionEntry entries[] = {
        {"policies", 'p', 0, G_OPTION_ARG_STRING, &policy_list,
         "Comma-separated policies (default: all; see 'fragsim policies')", "LIST"},
        {"device", 'd', 0, G_OPTION_ARG_STRING, &device_name,
         "Modelled GPU: a preset, a size (80GiB) or a profile (default " FSIM_DEVICE_DEFAULT ")",
         "DEVICE"},
        {"set", 0, 0, G_OPTION_ARG_STRING_ARRAY, &sets, "Set a policy knob (repeatable)",
         "POLICY.KEY=VALUE"},
        {"alloc-conf", 'c', 0, G_OPTION_ARG_STRING, &alloc_conf,
         "PYTORCH_CUDA_ALLOC_CONF for caching and expandable (before --set)", "STRING"},
        {"inferred-releases", 0, 0, G_OPTION_ARG_NONE, &inferred_releases,
         "Also replay recorded releases that look like PyTorch's retry before an OOM", NULL},
        {"trace-device", 0, 0, G_OPTION_ARG_INT, &trace_device,
         "Replay only this device of a multi-GPU trace (default: every device with events)", "N"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print one JSON object on stdout", NULL},
        {"fail-on-oom", 0, 0, G_OPTION_ARG_NONE, &fail_on_oom,
         "Stop a run at its first simulated OOM and exit with status 3", NULL},
        {"paranoid", 0, 0, G_OPTION_ARG_NONE, &paranoid,
         "Check the policy's invariants after every operation (slow)", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("TRACE - replay a trace through allocator policies");
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GPtrArray) policies = NULL;
    g_autoptr(GPtrArray) runs = g_ptr_array_new_with_free_func(run_free);
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimReplayOutputs) outputs = fsim_replay_outputs_new();
    GError *error = NULL;
    FsimDeviceSpec spec;
    const uint32_t *devices;
    gsize n_devices;
    gboolean any_oom = FALSE;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_add_main_entries(context, fsim_replay_outputs_entries(outputs), NULL);
    g_option_context_set_description(
        context, "Formats: fragsim text traces (.gz too), PyTorch memory snapshots, RMM logs.\n"
                 "Example: fragsim replay traces/fragmenting.trace -p bestfit,paged -d 24GB\n"
                 "Exit status: 0 success, 1 bad input, 2 usage error, 3 OOM under --fail-on-oom.");
    if (!fsim_cli_parse(context, "replay", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (argc != 2)
        return fsim_cli_usage_error("replay", argc < 2 ? "missing the TRACE argument"
                                                       : "expected exactly one TRACE");
    if (!fsim_device_spec_parse(device_name != NULL ? device_name : FSIM_DEVICE_DEFAULT, &spec,
                                &error))
        return fsim_cli_fail("replay", error);
    if (alloc_conf != NULL && !fsim_alloc_conf_apply(config, alloc_conf, &error))
        return fsim_cli_fail("replay", error);
    if (!fsim_cli_apply_sets(config, (const char *const *)sets, "paged.page_size=64KiB",
                             "device for fault injection", &error))
        return fsim_cli_fail("replay", error);
    policies = fsim_cli_policies(policy_list, &error);
    if (policies == NULL)
        return fsim_cli_fail("replay", error);
    trace = fsim_trace_open(argv[1], &error);
    if (trace == NULL)
        return fsim_cli_fail("replay", error);
    devices = fsim_trace_devices(trace, &n_devices);
    if (trace_device >= 0 && !fsim_cli_trace_has_device(trace, (uint32_t)trace_device))
        return fsim_cli_usage_error("replay", "%s has no events on device %d",
                                    fsim_trace_path(trace), trace_device);
    if (!fsim_replay_outputs_open(outputs, trace, config, policies->len, trace_device, &error))
        return fsim_cli_fail("replay", error);
    if (n_devices == 0 && !json)
        g_print("%s: the trace has no events to replay\n", fsim_trace_path(trace));
    for (gsize d = 0; d < n_devices; d++) {
        g_autoptr(GPtrArray) device_runs = g_ptr_array_new();

        if (trace_device >= 0 && devices[d] != (uint32_t)trace_device)
            continue;
        for (guint p = 0; p < policies->len; p++) {
            Run *run = g_new0(Run, 1);
            FsimRunConfig run_config;

            fsim_run_config_init(&run_config);
            run_config.policy = g_ptr_array_index(policies, p);
            run_config.config = config;
            run_config.device = spec;
            run_config.initial_state = fsim_trace_initial_state(trace, devices[d]);
            run_config.fail_on_oom = fail_on_oom;
            run_config.paranoid = run_config.paranoid || paranoid;
            run->policy = run_config.policy;
            run->trace_device = devices[d];
            g_ptr_array_add(runs, run);
            run->engine = fsim_engine_new(&run_config, &error);
            if (run->engine == NULL ||
                !fsim_replay_outputs_attach(outputs, run->engine, devices[d], &error))
                return fsim_cli_fail("replay", error);
            g_ptr_array_add(device_runs, run);
        }
        if (!replay_device(trace, devices[d], device_runs, inferred_releases, &error))
            return fsim_cli_fail("replay", error);
    }
    for (guint i = 0; i < runs->len; i++) {
        Run *run = g_ptr_array_index(runs, i);

        if (run->stopped_oom) {
            g_printerr("fragsim replay: %s: %s\n", fsim_trace_path(trace), run->oom_message);
            any_oom = TRUE;
        }
    }
    if (json)
        replay_print_json(fsim_trace_path(trace), runs, outputs);
    else
        replay_print_table(trace, runs);
    if (!fsim_replay_outputs_finish(outputs, json, &error))
        return fsim_cli_fail("replay", error);
    return any_oom ? FSIM_EXIT_OOM : FSIM_EXIT_OK;
}
