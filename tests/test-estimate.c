/* SPDX-License-Identifier: MIT */
/*
 * The closed-form estimate: the published figures it must reproduce (each with the convention
 * docs/synth.md states), the activation formulas of Korthikanti et al. 2022, the presets'
 * parameter counts, and `fragsim estimate --json`.
 */
#include <glib.h>

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "synth/synth.h"
#include "test-util.h"

#define GB 1000000000.0 /* the published figures' GB is 10^9 bytes */

static FsimTrainConfig
config_for(const char *model)
{
    FsimTrainConfig c;
    fsim_train_config_init(&c);
    const FsimModelShape *m = fsim_model_lookup(model);
    g_assert_nonnull(m);
    c.model = *m;
    return c;
}

static FsimTrainConfig
config_params(uint64_t params)
{
    FsimTrainConfig c;
    g_autoptr(GError) error = NULL;
    fsim_train_config_init(&c);
    g_assert_true(fsim_model_shape_from_params(params, &c.model, &error));
    g_assert_no_error(error);
    return c;
}

static FsimEstimate
estimate(const FsimTrainConfig *c)
{
    FsimEstimate est;
    g_autoptr(GError) error = NULL;
    g_assert_true(fsim_estimate_train(c, &est, &error));
    g_assert_no_error(error);
    return est;
}

static uint64_t
model_state(const FsimEstimate *e)
{
    return e->weights_bytes + e->gradients_bytes + e->optimizer_bytes;
}

static void
test_presets(void)
{
    static const struct {
        const char *name;
        uint64_t params;
    } published[] = {
        {"gpt2-small", 124439808},   {"gpt2-medium", 354823168},  {"gpt2-large", 774030080},
        {"gpt2-xl", 1557611200},     {"phi3-mini", 3821079552},   {"llama2-7b", 6738415616},
        {"llama2-13b", 13015864320}, {"llama2-70b", 68976648192}, {"llama3-8b", 8030261248},
        {"mistral-7b", 7241732096},
    };
    gsize n;
    fsim_model_presets(&n);
    g_assert_cmpuint(n, ==, G_N_ELEMENTS(published));
    for (gsize i = 0; i < G_N_ELEMENTS(published); i++) {
        const FsimModelShape *m = fsim_model_lookup(published[i].name);
        g_assert_nonnull(m);
        g_assert_cmpuint(fsim_model_params(m), ==, published[i].params);
    }
    g_assert_null(fsim_model_lookup("gpt5"));
    g_assert_nonnull(fsim_model_lookup("LLAMA2-7B"));
}

static void
test_params_shape(void)
{
    static const uint64_t counts[] = {125000000,  1000000000,  4000000000,
                                      7000000000, 70000000000, 1000000000000};
    for (gsize i = 0; i < G_N_ELEMENTS(counts); i++) {
        FsimModelShape m;
        g_autoptr(GError) error = NULL;
        g_assert_true(fsim_model_shape_from_params(counts[i], &m, &error));
        g_assert_no_error(error);
        g_assert_cmpuint(fsim_model_params(&m), ==, counts[i]);
        g_assert_cmpuint(m.extra_params, <, 3 * (uint64_t)m.layers * m.hidden);
        g_assert_cmpuint(m.hidden, ==, 128 * m.layers);
        g_assert_cmpuint(m.ffn * 3, >=, m.hidden * 8 - 3);
    }
    /* 7e9 gives the Llama-2-7B depth and width */
    FsimModelShape m;
    g_assert_true(fsim_model_shape_from_params(7000000000, &m, NULL));
    g_assert_cmpuint(m.layers, ==, 32);
    g_assert_cmpuint(m.hidden, ==, 4096);
    g_autoptr(GError) error = NULL;
    g_assert_false(fsim_model_shape_from_params(1000, &m, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
}

/* Mixed precision with Adam: 2 + 2 + 4 + 4 + 4 = 16 bytes per parameter; 7B → 112 GB of model
 * state; with 20 GB of activations 132 GB, more than an 80 GB accelerator. */
static void
test_adam_16_bytes(void)
{
    FsimTrainConfig c = config_params(7000000000);
    FsimEstimate e = estimate(&c);
    g_assert_cmpuint(e.params, ==, 7000000000);
    g_assert_cmpuint(e.weights_bytes, ==, 14000000000);
    g_assert_cmpuint(e.gradients_bytes, ==, 14000000000);
    g_assert_cmpuint(e.master_bytes, ==, 28000000000);
    g_assert_cmpuint(e.optimizer_bytes, ==, 84000000000);
    g_assert_cmpuint(model_state(&e), ==, 112000000000);
    g_assert_cmpfloat(e.bytes_per_param, ==, 16.0);

    c.activations_bytes = 20000000000;
    e = estimate(&c);
    g_assert_cmpuint(e.activations_bytes, ==, 20000000000);
    g_assert_cmpuint(e.temporaries_bytes, ==, 0);
    g_assert_cmpuint(e.total_bytes, ==, 132000000000);
    g_assert_cmpuint(e.total_bytes, >, 80000000000);
}

/* The other breakdown: weights 6 (fp16 + fp32 master), Adam 8, fp32 gradients 4 = 18. */
static void
test_18_bytes(void)
{
    FsimTrainConfig c = config_params(7000000000);
    c.grad_bits = 32;
    FsimEstimate e = estimate(&c);
    g_assert_cmpfloat(e.bytes_per_param, ==, 18.0);
    g_assert_cmpuint(e.weights_bytes + e.master_bytes, ==, 6 * e.params);
    g_assert_cmpuint(e.optimizer_bytes - e.master_bytes, ==, 8 * e.params);
    g_assert_cmpuint(e.gradients_bytes, ==, 4 * e.params);
}

/* bitsandbytes' 8-bit Adam: 2 bytes per parameter of state, about 12 in all (with fp32
 * gradients and the master copy: 2 + 4 + 4 + 2). */
static void
test_adam8bit(void)
{
    FsimTrainConfig c = config_params(7000000000);
    c.optimizer = FSIM_OPTIMIZER_ADAM8BIT;
    c.grad_bits = 32;
    FsimEstimate e = estimate(&c);
    double state = (double)(e.optimizer_bytes - e.master_bytes) / (double)e.params;
    g_assert_cmpfloat(state, >=, 2.0);
    g_assert_cmpfloat(state, <, 2.01);
    g_assert_cmpfloat(fabs(e.bytes_per_param - 12.0), <, 0.05);
}

/* SGD with momentum: 8 bytes per parameter of optimizer state (fp32 master + momentum, the
 * ZeRO paper's K). */
static void
test_sgd(void)
{
    FsimTrainConfig c = config_params(7000000000);
    c.optimizer = FSIM_OPTIMIZER_SGD;
    FsimEstimate e = estimate(&c);
    g_assert_cmpuint(e.optimizer_bytes, ==, 8 * e.params);
    g_assert_cmpfloat(e.bytes_per_param, ==, 12.0);
    /* fp32 training: 4 + 4 + 4 */
    c.precision = FSIM_PRECISION_FP32;
    e = estimate(&c);
    g_assert_cmpfloat(e.bytes_per_param, ==, 12.0);
    g_assert_cmpuint(e.master_bytes, ==, 0);
}

/* A 4B-class model (Phi-3-mini, 3.8B) in mixed precision with fp32 gradients (18 bytes per
 * parameter) at micro-batch 16 and sequence 256: about 85 GB. */
static void
test_4b_batch16(void)
{
    FsimTrainConfig c = config_for("phi3-mini");
    c.batch = 16;
    c.seq = 256;
    c.grad_bits = 32;
    FsimEstimate e = estimate(&c);
    g_assert_cmpfloat(e.bytes_per_param, ==, 18.0);
    g_assert_cmpfloat(fabs((double)e.total_bytes / GB - 85.0), <, 0.05 * 85.0);
}

/* LoRA keeps gradients and optimizer state for the adapters only: the 7B model that needs 132 GB
 * to fine-tune fully fits a 24 GB card (with activation checkpointing, as LoRA recipes use). */
static void
test_lora(void)
{
    FsimTrainConfig c = config_params(7000000000);
    c.lora = TRUE;
    c.checkpointing = FSIM_CKPT_FULL;
    FsimEstimate e = estimate(&c);
    g_assert_cmpuint(e.trainable_params, <, e.params / 100);
    g_assert_cmpuint(e.weights_bytes, >=, 14000000000);
    g_assert_cmpuint(e.gradients_bytes, ==, 2 * e.trainable_params);
    g_assert_cmpuint(e.optimizer_bytes, ==, 12 * e.trainable_params);
    g_assert_cmpuint(e.total_bytes, <, 24000000000);

    /* the same for the llama2-7b preset; a full fine-tune does not fit 80 GB */
    c = config_for("llama2-7b");
    c.lora = TRUE;
    c.checkpointing = FSIM_CKPT_FULL;
    e = estimate(&c);
    g_assert_cmpuint(e.total_bytes, <, 24000000000);
    c.lora = FALSE;
    c.checkpointing = FSIM_CKPT_NONE;
    e = estimate(&c);
    g_assert_cmpuint(e.total_bytes, >, 80000000000);
}

/* Korthikanti et al. 2022: per layer, 16-bit, a GPT-3-style layer (GPT-2's shapes: MHA, GELU MLP
 * of 4h, dropout).  The results are exact: the formulas have integer coefficients here. */
static void
test_korthikanti(void)
{
    FsimTrainConfig c = config_for("gpt2-medium");
    const uint64_t s = 1024, b = 4, h = 1024, a = 16;
    c.seq = s;
    c.batch = b;
    c.attention = FSIM_ATTENTION_EAGER;

    /* no recomputation: s·b·h·(34 + 5·a·s/h) */
    g_assert_cmpuint(fsim_estimate_layer_activations(&c), ==, s * b * h * 34 + 5 * a * s * s * b);
    /* selective: the attention core is recomputed, 34·s·b·h */
    c.checkpointing = FSIM_CKPT_SELECTIVE;
    g_assert_cmpuint(fsim_estimate_layer_activations(&c), ==, 34 * s * b * h);
    /* full: only the layer input, 2·s·b·h */
    c.checkpointing = FSIM_CKPT_FULL;
    g_assert_cmpuint(fsim_estimate_layer_activations(&c), ==, 2 * s * b * h);
    /* flash attention: no s² term, an fp32 log-sum-exp per head and position */
    c.checkpointing = FSIM_CKPT_NONE;
    c.attention = FSIM_ATTENTION_FLASH;
    g_assert_cmpuint(fsim_estimate_layer_activations(&c), ==, 34 * s * b * h + 4 * a * s * b);

    /* tensor parallelism t: s·b·h·(10 + 24/t + 5·a·s/(h·t)) */
    const uint64_t t = 4;
    c.attention = FSIM_ATTENTION_EAGER;
    c.tp = t;
    g_assert_cmpuint(fsim_estimate_layer_activations(&c), ==,
                     s * b * h * 10 + s * b * h * 24 / t + 5 * a * s * s * b / t);
    /* with sequence parallelism: s·b·h/t·(34 + 5·a·s/h) */
    c.sequence_parallel = TRUE;
    g_assert_cmpuint(fsim_estimate_layer_activations(&c), ==,
                     (s * b * h * 34 + 5 * a * s * s * b) / t);

    /* the whole model: L layers plus the output layer's 4·s·b·h + 4·s·b·v, the embedding
     * dropout mask s·b·h and the int64 input ids and labels */
    c = config_for("gpt2-medium");
    c.seq = s;
    c.batch = b;
    c.attention = FSIM_ATTENTION_EAGER;
    FsimEstimate e = estimate(&c);
    const uint64_t v = 50257;
    g_assert_cmpuint(e.activations_bytes, ==,
                     24 * (s * b * h * 34 + 5 * a * s * s * b) + 4 * s * b * h + 4 * s * b * v +
                         s * b * h + 16 * s * b);
}

/* The estimate is the peak, not a loose bound: what the peak holds beyond model state and the
 * saved activations is small for a large model at a usual setting. */
static void
test_total(void)
{
    FsimTrainConfig c = config_for("llama2-7b");
    FsimEstimate e = estimate(&c);
    g_assert_cmpuint(e.total_bytes, ==,
                     model_state(&e) + e.activations_bytes + e.temporaries_bytes);
    g_assert_cmpuint(e.temporaries_bytes, <, e.activations_bytes);
    g_assert_nonnull(e.peak_phase);
    /* ZeRO-3 over 8 ranks divides model state by 8 */
    c.zero_stage = 3;
    c.ranks = 8;
    FsimEstimate z = estimate(&c);
    g_assert_cmpuint(model_state(&z), <=, model_state(&e) / 8 + 8 * 1000 * 16);
    g_assert_cmpuint(model_state(&z), >=, model_state(&e) / 8);
}

static void
test_bad_config(void)
{
    FsimTrainConfig c = config_for("llama2-7b");
    FsimEstimate e;
    g_autoptr(GError) error = NULL;
    c.tp = 3;
    g_assert_false(fsim_estimate_train(&c, &e, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_clear_error(&error);
    c = config_for("llama2-7b");
    c.seq = 0;
    g_assert_false(fsim_estimate_train(&c, &e, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
}

/* ---- the command line -------------------------------------------------------------------- */

static void
test_cli_json(void)
{
    static const char *const keys[] = {
        "params",
        "bytes_per_param",
        "weights_bytes",
        "gradients_bytes",
        "optimizer_bytes",
        "activations_bytes",
        "temporaries_bytes",
        "total_bytes",
        "device",
        "capacity_bytes",
        "fits",
    };
    g_auto(FsimTestRun) r = fsim_test_run("estimate", "--params", "7e9", "--activations", "20GB",
                                          "-d", "80GB", "--json", NULL);
    g_assert_cmpint(r.status, ==, 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *o = fsim_test_parse_object(parser, r.out);
    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++)
        g_assert_true(json_object_has_member(o, keys[i]));
    g_assert_cmpint(json_object_get_int_member(o, "params"), ==, 7000000000);
    g_assert_cmpfloat(json_object_get_double_member(o, "bytes_per_param"), ==, 16.0);
    g_assert_cmpint(json_object_get_int_member(o, "total_bytes"), ==, 132000000000);
    g_assert_cmpint(json_object_get_int_member(o, "capacity_bytes"), ==, 80000000000);
    g_assert_false(json_object_get_boolean_member(o, "fits"));

    /* without -d, no device keys */
    fsim_test_run_clear(&r);
    r = fsim_test_run("estimate", "--model", "gpt2-small", "--json", NULL);
    g_assert_cmpint(r.status, ==, 0);
    o = fsim_test_parse_object(parser, r.out);
    g_assert_false(json_object_has_member(o, "fits"));
    g_assert_cmpint(json_object_get_int_member(o, "params"), ==, 124439808);

    /* usage errors exit with 2 */
    fsim_test_run_clear(&r);
    r = fsim_test_run("estimate", "--model", "nope", NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run("estimate", NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run("estimate", "--model", "llama2-7b", "--optimizer", "lion", NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run("estimate", "--list-models", NULL);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_nonnull(strstr(r.out, "llama2-7b"));
    fsim_test_run_clear(&r);
    r = fsim_test_run("estimate", "--help-model", NULL);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_nonnull(strstr(r.out, "--checkpointing"));
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/estimate/presets/params", test_presets);
    g_test_add_func("/estimate/params/derived-shape", test_params_shape);
    g_test_add_func("/estimate/published/adam-16-bytes", test_adam_16_bytes);
    g_test_add_func("/estimate/published/18-bytes", test_18_bytes);
    g_test_add_func("/estimate/published/adam8bit", test_adam8bit);
    g_test_add_func("/estimate/published/sgd-momentum", test_sgd);
    g_test_add_func("/estimate/published/4b-batch16", test_4b_batch16);
    g_test_add_func("/estimate/published/lora-7b", test_lora);
    g_test_add_func("/estimate/activations/korthikanti", test_korthikanti);
    g_test_add_func("/estimate/total", test_total);
    g_test_add_func("/estimate/bad-config", test_bad_config);
    g_test_add_func("/estimate/cli/json", test_cli_json);
    return g_test_run();
}
