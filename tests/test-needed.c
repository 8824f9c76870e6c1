/* SPDX-License-Identifier: MIT */
/*
 * needed_bytes (src/analysis/needed.c): on the answer the run has no OOM, one granule below it has
 * one, capacities above it fit too, fit and replay agree to the byte, and a recording that ran out
 * of memory is predicted.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/alloc-conf.h"
#include "fragsim/fragsim.h"
#include "fragsim/validate.h"

#include "analysis/needed.h"
#include "analysis/recorded.h"
#include "test-util.h"

#define GRANULE (2 * FSIM_MiB)

static const char *const all_policies[] = {"direct", "bestfit", "caching", "expandable", "paged"};

static char *
source_trace(const char *name)
{
    const char *dir = g_getenv("FRAGSIM_SOURCE_DIR");

    g_assert_nonnull(dir);
    return g_build_filename(dir, "traces", name, NULL);
}

/* The OOMs of @log under @policy on a device given as `-d CAPACITY` gives it. */
static uint64_t
ooms_on(const FsimEventLog *log, const FsimInitialState *state, const char *policy, GKeyFile *knobs,
        uint64_t capacity)
{
    g_autofree char *text = g_strdup_printf("%" G_GUINT64_FORMAT, capacity);
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(GError) error = NULL;
    FsimRunConfig rc;

    fsim_run_config_init(&rc);
    rc.policy = policy;
    rc.config = knobs;
    rc.initial_state = state;
    rc.paranoid = FALSE;
    g_assert_true(fsim_device_spec_parse(text, &rc.device, &error));
    engine = fsim_engine_new(&rc, &error);
    g_assert_no_error(error);
    if (!fsim_engine_start(engine, &error)) {
        /* the state at trace start does not even fit */
        g_assert_nonnull(state);
        return G_MAXUINT64;
    }
    g_assert_true(fsim_event_log_replay(log, engine, &error));
    g_assert_no_error(error);
    return fsim_engine_metrics(engine)->ooms;
}

/* needed_bytes of @policy on @trace's first device, checked: no OOM there, one a granule below,
 * and none on the next @above granules. */
static uint64_t
check_needed(FsimTrace *trace, uint32_t device, const char *policy, GKeyFile *knobs, guint above)
{
    g_autoptr(FsimEventLog) log = fsim_event_log_new(device);
    g_autoptr(GError) error = NULL;
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    FsimNeededQuery query = {.policy = policy, .config = knobs};
    FsimNeededResult result;

    g_assert_true(fsim_event_log_read(log, trace, FALSE, &error));
    g_assert_no_error(error);
    g_assert_true(fsim_device_spec_parse(FSIM_DEVICE_DEFAULT, &query.device, &error));
    query.initial_state = state;
    (void)fsim_needed_search(log, &query, &result, &error);
    g_assert_no_error(error);
    if (g_test_verbose())
        g_printerr("%s %s: needed %" G_GUINT64_FORMAT " (%" G_GUINT64_FORMAT " replays)\n",
                   fsim_trace_path(trace), policy, result.needed_bytes, result.replays);
    g_assert_cmpuint(result.needed_bytes % GRANULE, ==, 0);
    g_assert_cmpuint(result.needed_bytes, >=, result.metrics.peak_requested_bytes);
    g_assert_cmpuint(ooms_on(log, state, policy, knobs, result.needed_bytes), ==, 0);
    if (result.needed_bytes >= GRANULE)
        g_assert_cmpuint(ooms_on(log, state, policy, knobs, result.needed_bytes - GRANULE), >, 0);
    for (guint i = 1; i <= above; i++)
        g_assert_cmpuint(ooms_on(log, state, policy, knobs, result.needed_bytes + i * GRANULE), ==,
                         0);
    return result.needed_bytes;
}

/* Every policy on the bundled fragmenting trace, and the capacities just above the answer. */
static void
test_fragmenting(void)
{
    g_autofree char *path = source_trace("fragmenting.trace");
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GError) error = NULL;

    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    for (gsize p = 0; p < G_N_ELEMENTS(all_policies); p++)
        check_needed(trace, 0, all_policies[p], NULL, 8);
}

/* 8 x 16 MiB allocated and freed, then 4 x 32 MiB: caching reserves 256 MiB on a large card but
 * its release-and-retry makes it fit on 128 MiB; expandable segments need 20 MiB pages. */
static void
test_release_and_retry(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "retry.trace", NULL);
    g_autoptr(GString) text = g_string_new("fragsim-trace v1\n");
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GError) error = NULL;
    uint64_t t = 0;

    for (int i = 1; i <= 8; i++)
        g_string_append_printf(text, "%" G_GUINT64_FORMAT " alloc %d 16777216 0\n", t++, i);
    for (int i = 1; i <= 8; i++)
        g_string_append_printf(text, "%" G_GUINT64_FORMAT " free %d 0\n", t++, i);
    for (int i = 11; i <= 14; i++)
        g_string_append_printf(text, "%" G_GUINT64_FORMAT " alloc %d 33554432 0\n", t++, i);
    g_assert_true(g_file_set_contents(path, text->str, -1, &error));
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(check_needed(trace, 0, "caching", NULL, 4), ==, 128 * FSIM_MiB);
    g_assert_cmpuint(check_needed(trace, 0, "expandable", NULL, 4), ==, 140 * FSIM_MiB);
    g_clear_pointer(&trace, fsim_trace_close);
    fsim_test_remove_tree(dir);
}

/* Every policy on every shared snapshot; the recorded settings for caching. */
static void
test_shared(void)
{
    const char *dir = fsim_test_shared_dir();
    g_autoptr(GDir) listing = NULL;
    const char *name;

    if (dir == NULL)
        return;
    listing = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(listing);
    while ((name = g_dir_read_name(listing)) != NULL) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autoptr(FsimTrace) trace = NULL;
        g_autoptr(GError) error = NULL;
        g_autoptr(GKeyFile) recorded = g_key_file_new();
        const uint32_t *devices;
        gsize n_devices;

        if (!g_str_has_suffix(name, ".pickle") && !g_str_has_suffix(name, ".pkl"))
            continue;
        trace = fsim_trace_open(path, &error);
        g_assert_no_error(error);
        devices = fsim_trace_devices(trace, &n_devices);
        if (n_devices == 0)
            continue;
        for (gsize p = 0; p < G_N_ELEMENTS(all_policies); p++)
            check_needed(trace, devices[0], all_policies[p], NULL, 2);
        if (fsim_trace_alloc_conf(trace) != NULL) {
            g_assert_true(fsim_alloc_conf_apply(recorded, fsim_trace_alloc_conf(trace), &error));
            check_needed(trace, devices[0], "caching", recorded, 0);
        }
    }
}

/* On every shared snapshot with segment events, caching with the recorded settings on the
 * recorded capacity (implied by an OOM, or the recorded peak) reserves exactly the recorded peak;
 * a recording that ran out of memory needs more than it had. */
/* The recorded row of @device against the validated model (@v: its validation, exact). */
static void
recorded_check_device(FsimTrace *trace, const FsimValidateDevice *v, guint *checked, guint *ooms)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GKeyFile) knobs = g_key_file_new();
    FsimRecorded recorded;

    g_assert_true(fsim_recorded_summary(trace, v->device, &recorded, &error));
    if (!recorded.has_segments)
        return;
    g_test_message("%s device %u: recorded peak %" G_GUINT64_FORMAT ", caching %" G_GUINT64_FORMAT,
                   fsim_trace_path(trace), v->device, recorded.metrics.peak_reserved_bytes,
                   v->peak_reserved_bytes);
    /* the capacity the recorded row names is the one the model was validated on */
    g_assert_cmpuint(recorded.capacity_bytes != 0 ? recorded.capacity_bytes
                                                  : recorded.metrics.peak_reserved_bytes,
                     ==, v->capacity_bytes);
    g_assert_cmpuint(v->peak_reserved_bytes, ==, recorded.metrics.peak_reserved_bytes);
    (*checked)++;
    if (recorded.capacity_bytes != 0) {
        /* the recording ran out of memory: the recorded capacity must be too small */
        if (fsim_trace_alloc_conf(trace) != NULL)
            g_assert_true(fsim_alloc_conf_apply(knobs, fsim_trace_alloc_conf(trace), &error));
        g_assert_cmpuint(check_needed(trace, v->device, v->policy, knobs, 0), >,
                         recorded.capacity_bytes);
        (*ooms)++;
    }
}

static void
test_recorded(void)
{
    const char *dir = fsim_test_shared_dir();
    g_autoptr(GDir) listing = NULL;
    const char *name;
    guint checked = 0, ooms = 0;

    if (dir == NULL)
        return;
    listing = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(listing);
    while ((name = g_dir_read_name(listing)) != NULL) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autoptr(FsimTrace) trace = NULL;
        g_autoptr(FsimValidateReport) report = NULL;
        g_autoptr(GError) error = NULL;
        const uint32_t *devices;
        gsize n_devices;

        if (!g_str_has_suffix(name, ".pickle") && !g_str_has_suffix(name, ".pkl"))
            continue;
        trace = fsim_trace_open(path, &error);
        g_assert_no_error(error);
        report = fsim_validate_file(path, &error);
        g_assert_no_error(error);
        devices = fsim_trace_devices(trace, &n_devices);
        for (gsize d = 0; d < n_devices; d++) {
            /* where the model itself is not exact (validate says so) the figures may differ */
            for (guint r = 0; r < report->devices->len; r++) {
                const FsimValidateDevice *v =
                    &g_array_index(report->devices, FsimValidateDevice, r);

                if (v->device == devices[d] && v->exact)
                    recorded_check_device(trace, v, &checked, &ooms);
            }
        }
    }
    g_assert_cmpuint(checked, >, 0);
    g_assert_cmpuint(ooms, >, 0);
}

/* fit and replay report the same needed_bytes for every run. */
static void
test_fit_agrees(void)
{
    g_autofree char *path = NULL;
    g_autoptr(JsonParser) fit_parser = json_parser_new();
    g_autoptr(JsonParser) replay_parser = json_parser_new();
    JsonArray *fit_results, *replay_runs;
    gsize n_policies;

    if (!fsim_test_have_binary())
        return;
    path = source_trace("fragmenting.trace");
    g_auto(FsimTestRun) fit =
        fsim_test_run("fit", path, "-c", "", "-c", "expandable_segments:True", "--json", NULL);
    g_auto(FsimTestRun) replay =
        fsim_test_run("replay", path, "-c", "", "-c", "expandable_segments:True", "--json", NULL);

    g_assert_cmpint(fit.status, ==, 0);
    g_assert_cmpint(replay.status, ==, 0);
    fit_results =
        json_object_get_array_member(fsim_test_parse_object(fit_parser, fit.out), "results");
    replay_runs =
        json_object_get_array_member(fsim_test_parse_object(replay_parser, replay.out), "runs");
    /* every policy once, caching and expandable once more (two configurations) */
    fsim_policy_list(&n_policies);
    g_assert_cmpuint(json_array_get_length(fit_results), ==, n_policies + 2);
    g_assert_cmpuint(json_array_get_length(replay_runs), ==, n_policies + 2);
    for (guint i = 0; i < json_array_get_length(replay_runs); i++) {
        JsonObject *f = json_array_get_object_element(fit_results, i);
        JsonObject *r = json_array_get_object_element(replay_runs, i);

        g_assert_cmpstr(json_object_get_string_member(f, "label"), ==,
                        json_object_get_string_member(r, "label"));
        g_assert_cmpint(json_object_get_int_member(f, "needed_bytes"), ==,
                        json_object_get_int_member(r, "needed_bytes"));
        g_assert_cmpint(json_object_get_int_member(r, "needed_bytes"), >, 0);
    }
}

/* --no-needed leaves needed_bytes null. */
static void
test_no_needed(void)
{
    g_autofree char *path = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *runs;

    if (!fsim_test_have_binary())
        return;
    path = source_trace("fragmenting.trace");
    g_auto(FsimTestRun) replay =
        fsim_test_run("replay", path, "-p", "bestfit", "--no-needed", "--json", NULL);
    g_assert_cmpint(replay.status, ==, 0);
    runs = json_object_get_array_member(fsim_test_parse_object(parser, replay.out), "runs");
    g_assert_true(
        json_object_get_null_member(json_array_get_object_element(runs, 0), "needed_bytes"));
}

/* Needs by pool, worked by hand (caching): 16 MiB captured into pool 7 and freed there (pool 7
 * keeps its 16 MiB segment: referenced), then 64 MiB outside (a 64 MiB segment of the default
 * large pool): 80 MiB reserved, the run's peak.  Then the 64 MiB freed and the cache emptied
 * (pool 7 keeps its segment), and 48 MiB captured into pool 7 (its free 16 MiB cannot serve it:
 * a new 48 MiB segment), 64 MiB.  The run needs 80 MiB (on less, the 64 MiB request finds
 * nothing to release); at that peak the default pools hold 64 MiB and pool 7 16 MiB, although
 * pool 7's own peak comes later, at 64 MiB.  `replay --json` gives the same shares. */
static const char pools_trace[] = "fragsim-trace v1\n"
                                  "0 pool_begin 7 0\n1 alloc 1 16777216 0\n2 free 1 0\n"
                                  "3 pool_end 7 0\n4 alloc 2 67108864 0\n5 free 2 0\n"
                                  "6 empty_cache\n7 pool_begin 7 0\n8 alloc 3 50331648 0\n"
                                  "9 pool_end 7 0\n";

static void
test_pools(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "pools.trace", NULL);
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimEventLog) log = fsim_event_log_new(0);
    g_autoptr(GError) error = NULL;
    g_autoptr(GArray) needs = NULL;
    FsimNeededQuery query = {.policy = "caching"};
    FsimNeededResult result;
    const FsimPoolNeed *need;
    uint64_t peak = 0;

    g_assert_true(g_file_set_contents(path, pools_trace, -1, &error));
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    g_assert_true(fsim_event_log_read(log, trace, FALSE, &error));
    g_assert_true(fsim_device_spec_parse(FSIM_DEVICE_DEFAULT, &query.device, &error));
    g_assert_true(fsim_needed_search(log, &query, &result, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(result.needed_bytes, ==, 80 * FSIM_MiB);
    needs = fsim_needed_pools(log, &query, result.needed_bytes, &peak, &error);
    g_assert_no_error(error);
    g_assert_nonnull(needs);
    g_assert_cmpuint(peak, ==, 80 * FSIM_MiB);
    g_assert_cmpuint(needs->len, ==, 2);
    need = &g_array_index(needs, FsimPoolNeed, 0);
    g_assert_cmpuint(need->pool, ==, 0);
    g_assert_cmpuint(need->needed_bytes, ==, 64 * FSIM_MiB);
    g_assert_cmpuint(need->peak_reserved_bytes, ==, 64 * FSIM_MiB);
    need = &g_array_index(needs, FsimPoolNeed, 1);
    g_assert_cmpuint(need->pool, ==, 7);
    g_assert_cmpuint(need->needed_bytes, ==, 16 * FSIM_MiB);
    g_assert_cmpuint(need->peak_reserved_bytes, ==, 64 * FSIM_MiB);
    /* a run without private pools has no shares */
    query.policy = "bestfit";
    g_clear_pointer(&needs, g_array_unref);
    needs = fsim_needed_pools(log, &query, 80 * FSIM_MiB, &peak, &error);
    g_assert_no_error(error);
    g_assert_null(needs);
    if (fsim_test_have_binary()) {
        g_autoptr(JsonParser) parser = json_parser_new();
        g_auto(FsimTestRun) replay = fsim_test_run("replay", path, "-p", "caching", "--json", NULL);
        JsonArray *pools;

        g_assert_cmpint(replay.status, ==, 0);
        pools = json_object_get_array_member(
            json_array_get_object_element(
                json_object_get_array_member(fsim_test_parse_object(parser, replay.out), "runs"),
                0),
            "pools");
        g_assert_cmpint(
            json_object_get_int_member(json_array_get_object_element(pools, 0), "needed_bytes"), ==,
            64 * FSIM_MiB);
        g_assert_cmpint(
            json_object_get_int_member(json_array_get_object_element(pools, 1), "needed_bytes"), ==,
            16 * FSIM_MiB);
        g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(pools, 1),
                                                   "peak_reserved_bytes"),
                        ==, 64 * FSIM_MiB);
    }
    g_clear_pointer(&trace, fsim_trace_close);
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/needed/fragmenting", test_fragmenting);
    g_test_add_func("/needed/release-and-retry", test_release_and_retry);
    g_test_add_func("/needed/shared", test_shared);
    g_test_add_func("/needed/recorded", test_recorded);
    g_test_add_func("/needed/fit-agrees", test_fit_agrees);
    g_test_add_func("/needed/no-needed", test_no_needed);
    g_test_add_func("/needed/pools", test_pools);
    return g_test_run();
}
