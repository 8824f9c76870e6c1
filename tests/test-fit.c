/* SPDX-License-Identifier: MIT */
/*
 * `fragsim fit`: a 7B full fine-tune does not fit an 80 GB card, a 7B LoRA fine-tune fits a 24 GB
 * one; the smallest device for a trace is exact to the granularity (the run at the answer fits,
 * one page less does not); the largest sequence is a multiple of the search step.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <json-glib/json-glib.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "synth/synth.h"
#include "test-util.h"

/* Run `fragsim fit ARGS --json` and return its results array (owned by @parser). */
static JsonArray *
fit_json(JsonParser *parser, const char *const *args, const char *want_target)
{
    g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(all, g_strdup("fit"));
    for (const char *const *a = args; *a; a++)
        g_ptr_array_add(all, g_strdup(*a));
    g_ptr_array_add(all, g_strdup("--json"));
    g_ptr_array_add(all, NULL);
    g_auto(FsimTestRun) run = fsim_test_run_argv(NULL, (const char *const *)(void *)all->pdata);
    g_assert_cmpint(run.status, ==, 0);
    JsonObject *o = fsim_test_parse_object(parser, run.out);
    g_assert_cmpstr(json_object_get_string_member(o, "target"), ==, want_target);
    JsonArray *results = json_object_get_array_member(o, "results");
    gsize n_policies;
    fsim_policy_list(&n_policies);
    g_assert_cmpuint(json_array_get_length(results), ==, n_policies);
    for (guint i = 0; i < json_array_get_length(results); i++) {
        JsonObject *r = json_array_get_object_element(results, i);
        g_assert_true(json_object_has_member(r, "policy"));
        g_assert_true(json_object_has_member(r, "answer"));
        g_assert_true(json_object_has_member(r, "peak_reserved_bytes"));
        g_assert_true(json_object_has_member(r, "peak_utilization"));
    }
    return results;
}

static void
test_full_7b_80gb(void)
{
    static const char *const args[] = {"llama2-7b", "-d", "a100-80gb", NULL};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *results = fit_json(parser, args, "batch");
    for (guint i = 0; i < json_array_get_length(results); i++) {
        JsonObject *r = json_array_get_object_element(results, i);
        g_assert_cmpint(json_object_get_int_member(r, "answer"), ==, 0);
    }
}

static void
test_lora_7b_24gb(void)
{
    static const char *const args[] = {"--model", "llama2-7b", "--lora",       "--checkpointing",
                                       "full",    "-d",        "rtx4090-24gb", NULL};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *results = fit_json(parser, args, "batch");
    for (guint i = 0; i < json_array_get_length(results); i++) {
        JsonObject *r = json_array_get_object_element(results, i);
        g_assert_cmpint(json_object_get_int_member(r, "answer"), >=, 1);
        g_assert_cmpint(json_object_get_int_member(r, "peak_reserved_bytes"), <=,
                        (gint64)(23.5 * FSIM_GiB));
    }
}

/* An engine for @policy on the default device cut to @capacity bytes, stopping at an OOM; an
 * offline policy plans from @lifetimes. */
static FsimEngine *
fit_engine_planned(const char *policy, uint64_t capacity, const FsimLifetimes *lifetimes)
{
    g_autoptr(GError) error = NULL;
    FsimRunConfig rc;
    fsim_run_config_init(&rc);
    rc.policy = policy;
    rc.lifetimes = lifetimes;
    rc.fail_on_oom = TRUE;
    g_assert_true(fsim_device_spec_parse(FSIM_DEVICE_DEFAULT, &rc.device, &error));
    rc.device.capacity_bytes = capacity;
    FsimEngine *engine = fsim_engine_new(&rc, &error);
    g_assert_no_error(error);
    return engine;
}

static FsimEngine *
fit_engine(const char *policy, uint64_t capacity)
{
    return fit_engine_planned(policy, capacity, NULL);
}

/* Replay the training trace of @c through @policy on a device of @capacity: TRUE when no OOM. */
static gboolean
model_replays(const FsimTrainConfig *c, const char *policy, uint64_t capacity)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimSynth) synth = fsim_synth_train_new(c, &error);
    g_assert_no_error(error);
    g_autoptr(FsimEngine) engine = fit_engine(policy, capacity);
    FsimEvent ev;
    while (fsim_synth_next(synth, &ev, &error)) {
        if (!fsim_engine_process(engine, &ev, &error)) {
            g_assert_error(error, FSIM_ERROR, FSIM_ERROR_OOM);
            return FALSE;
        }
    }
    g_assert_no_error(error);
    return TRUE;
}

static void
test_seq(void)
{
    static const char *const all[] = {"fit",     "--model", "gpt2-small", "--layers", "2",
                                      "-d",      "2GiB",    "--target",   "seq",      "-p",
                                      "bestfit", "--json",  NULL};
    g_auto(FsimTestRun) run = fsim_test_run_argv(NULL, all);
    g_assert_cmpint(run.status, ==, 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *o = fsim_test_parse_object(parser, run.out);
    g_assert_cmpstr(json_object_get_string_member(o, "target"), ==, "seq");
    JsonArray *results = json_object_get_array_member(o, "results");
    g_assert_cmpuint(json_array_get_length(results), ==, 1);
    gint64 seq = json_object_get_int_member(json_array_get_object_element(results, 0), "answer");
    g_assert_cmpint(seq, >, 0);
    g_assert_cmpint(seq % 64, ==, 0);

    /* the answer replays on the device, one step of 64 tokens more does not */
    FsimTrainConfig c;
    fsim_train_config_init(&c);
    c.model = *fsim_model_lookup("gpt2-small");
    c.model.layers = 2;
    c.seq = (uint64_t)seq;
    g_assert_true(model_replays(&c, "bestfit", 2 * FSIM_GiB));
    c.seq = (uint64_t)seq + 64;
    g_assert_false(model_replays(&c, "bestfit", 2 * FSIM_GiB));
}

/* Replay @path through @policy on a device of @capacity bytes: TRUE when no OOM. */
static gboolean
replays(const char *path, const char *policy, uint64_t capacity)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, 0, &error);
    /* an offline policy plans from the trace's lifetimes, as fit gives them */
    g_autoptr(FsimLifetimes) lifetimes =
        fsim_policy_is_offline(policy) ? fsim_lifetimes_from_trace(trace, 0, &error) : NULL;
    g_autoptr(FsimEngine) engine = fit_engine_planned(policy, capacity, lifetimes);
    FsimEvent ev;
    while (fsim_trace_stream_next(stream, &ev, &error)) {
        if (!fsim_engine_process(engine, &ev, &error)) {
            g_assert_error(error, FSIM_ERROR, FSIM_ERROR_OOM);
            return FALSE;
        }
    }
    g_assert_no_error(error);
    return TRUE;
}

static void
test_trace_device(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-fit-XXXXXX", &error);
    g_assert_no_error(error);
    g_autofree char *path = g_build_filename(dir, "train.trace", NULL);
    FsimTrainConfig c;
    fsim_train_config_init(&c);
    c.model = *fsim_model_lookup("gpt2-small");
    c.model.layers = 3;
    c.seq = 256;
    c.attention = FSIM_ATTENTION_EAGER;
    g_autoptr(FsimSynth) synth = fsim_synth_train_new(&c, &error);
    g_assert_true(fsim_synth_write(synth, path, NULL, NULL, &error));
    g_assert_no_error(error);

    const char *const args[] = {path, NULL};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *results = fit_json(parser, args, "device");
    for (guint i = 0; i < json_array_get_length(results); i++) {
        JsonObject *r = json_array_get_object_element(results, i);
        const char *policy = json_object_get_string_member(r, "policy");
        uint64_t answer = (uint64_t)json_object_get_int_member(r, "answer");
        g_assert_cmpuint(answer % (2 * FSIM_MiB), ==, 0);
        g_assert_cmpuint(answer, >=,
                         (uint64_t)json_object_get_int_member(r, "peak_requested_bytes"));
        g_assert_true(replays(path, policy, answer));
        g_assert_false(replays(path, policy, answer - 2 * FSIM_MiB));
    }
    g_assert_cmpint(g_unlink(path), ==, 0);
    g_assert_cmpint(g_rmdir(dir), ==, 0);
}

static void
test_usage(void)
{
    static const char *const bad_target[] = {"fit", "llama2-7b", "--target", "width", NULL};
    static const char *const no_model[] = {"fit", NULL};
    static const char *const bad_policy[] = {"fit", "llama2-7b", "-p", "nope", NULL};
    static const char *const *const cases[] = {bad_target, no_model, bad_policy};
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_auto(FsimTestRun) run = fsim_test_run_argv(NULL, cases[i]);
        g_assert_cmpint(run.status, ==, 2);
    }
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/fit/model/7b-full-does-not-fit-80gb", test_full_7b_80gb);
    g_test_add_func("/fit/model/7b-lora-fits-24gb", test_lora_7b_24gb);
    g_test_add_func("/fit/model/seq", test_seq);
    g_test_add_func("/fit/trace/device", test_trace_device);
    g_test_add_func("/fit/usage", test_usage);
    return g_test_run();
}
