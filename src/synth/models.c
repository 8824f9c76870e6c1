/* SPDX-License-Identifier: MIT */
/*
 * fragsim: model presets, shapes derived from a parameter count, the parameter tensors of a
 * training configuration, and the names of the training settings.
 *
 * The presets are the published configurations (the Hugging Face config.json of each model);
 * their parameter counts are checked by the tests against the published figures (GPT-2 small
 * 124,439,808; Llama-2-7B 6,738,415,616; Mistral-7B 7,241,732,096; Llama-3-8B 8,030,261,248...).
 */
#include <glib.h>

#include <string.h>

#include "fragsim/types.h"

#include "synth.h"

/* clang-format off */
#define GPT2(nm, desc, l, h, a)                                                                    \
    { .name = nm, .description = desc, .layers = l, .hidden = h, .heads = a, .kv_heads = a,       \
      .head_dim = (h) / (a), .ffn = 4 * (h), .vocab = 50257, .positions = 1024,                  \
      .gated_mlp = FALSE, .fused_qkv = TRUE, .fused_gate_up = FALSE, .tied_embeddings = TRUE,     \
      .bias = TRUE, .dropout = TRUE, .norm = FSIM_NORM_LAYERNORM }
#define LLAMA(nm, desc, l, h, a, g, f, v)                                                          \
    { .name = nm, .description = desc, .layers = l, .hidden = h, .heads = a, .kv_heads = g,       \
      .head_dim = (h) / (a), .ffn = f, .vocab = v, .positions = 0, .gated_mlp = TRUE,             \
      .fused_qkv = FALSE, .fused_gate_up = FALSE, .tied_embeddings = FALSE, .bias = FALSE,        \
      .dropout = FALSE, .norm = FSIM_NORM_RMSNORM }

static const FsimModelShape model_presets[] = {
    GPT2("gpt2-small", "GPT-2 small, 124M (Radford et al. 2019)", 12, 768, 12),
    GPT2("gpt2-medium", "GPT-2 medium, 355M", 24, 1024, 16),
    GPT2("gpt2-large", "GPT-2 large, 774M", 36, 1280, 20),
    GPT2("gpt2-xl", "GPT-2 XL, 1.5B", 48, 1600, 25),
    { .name = "phi3-mini", .description = "Phi-3-mini, 3.8B (the 4B-class preset)", .layers = 32,
      .hidden = 3072, .heads = 32, .kv_heads = 32, .head_dim = 96, .ffn = 8192, .vocab = 32064,
      .positions = 0, .gated_mlp = TRUE, .fused_qkv = TRUE, .fused_gate_up = TRUE,
      .tied_embeddings = FALSE, .bias = FALSE, .dropout = FALSE, .norm = FSIM_NORM_RMSNORM },
    LLAMA("llama2-7b", "Llama-2 7B (Touvron et al. 2023)", 32, 4096, 32, 32, 11008, 32000),
    LLAMA("llama2-13b", "Llama-2 13B", 40, 5120, 40, 40, 13824, 32000),
    LLAMA("llama2-70b", "Llama-2 70B (grouped-query attention, 8 KV heads)", 80, 8192, 64, 8,
          28672, 32000),
    LLAMA("llama3-8b", "Llama-3 8B (128K vocabulary, 8 KV heads)", 32, 4096, 32, 8, 14336,
          128256),
    LLAMA("mistral-7b", "Mistral 7B v0.1 (8 KV heads)", 32, 4096, 32, 8, 14336, 32000),
};
/* clang-format on */

const FsimModelShape *
fsim_model_presets(gsize *n)
{
    *n = G_N_ELEMENTS(model_presets);
    return model_presets;
}

const FsimModelShape *
fsim_model_lookup(const char *name)
{
    g_return_val_if_fail(name != NULL, NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(model_presets); i++) {
        if (g_ascii_strcasecmp(model_presets[i].name, name) == 0)
            return &model_presets[i];
    }
    return NULL;
}

char *
fsim_model_names(void)
{
    g_autoptr(GString) s = g_string_new(NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(model_presets); i++)
        g_string_append_printf(s, "%s%s", i ? ", " : "", model_presets[i].name);
    return g_string_free(g_steal_pointer(&s), FALSE);
}

/* Parameters of a Llama-style shape of k layers, hidden 128k, FFN f, vocabulary v. */
static uint64_t
models_llama_params(uint64_t k, uint64_t f, uint64_t v)
{
    uint64_t h = 128 * k;
    return 2 * v * h + h + k * (4 * h * h + 3 * h * f + 2 * h);
}

gboolean
fsim_model_shape_from_params(uint64_t params, FsimModelShape *out, GError **error)
{
    const uint64_t vocab = 32000;
    uint64_t k = 0;

    /* The largest k whose shape with the usual FFN (8/3 of hidden) fits in the count.  k stays
     * small (a 1e15-parameter model is k ~ 1600), so a linear scan is fine. */
    while (k < 100000 && models_llama_params(k + 1, 8 * 128 * (k + 1) / 3, vocab) <= params)
        k++;
    if (k == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "%" G_GUINT64_FORMAT " parameters are too few to derive a shape from (the "
                    "smallest has %" G_GUINT64_FORMAT "); give the shape flags instead",
                    params, models_llama_params(1, 8 * 128 / 3, vocab));
        return FALSE;
    }
    uint64_t h = 128 * k;
    uint64_t fixed = 2 * vocab * h + h + k * (4 * h * h + 2 * h);
    uint64_t ffn = (params - fixed) / (3 * k * h);
    if (ffn > G_MAXUINT32 || h > G_MAXUINT32) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "%" G_GUINT64_FORMAT " parameters are too many to derive a shape from", params);
        return FALSE;
    }

    memset(out, 0, sizeof *out);
    g_strlcpy(out->name, "params", sizeof out->name);
    g_snprintf(out->description, sizeof out->description,
               "Llama-style shape derived from %" G_GUINT64_FORMAT " parameters", params);
    out->layers = (uint32_t)k;
    out->hidden = (uint32_t)h;
    out->heads = (uint32_t)k;
    out->kv_heads = (uint32_t)k;
    out->head_dim = 128;
    out->ffn = (uint32_t)ffn;
    out->vocab = (uint32_t)vocab;
    out->gated_mlp = TRUE;
    out->norm = FSIM_NORM_RMSNORM;
    out->extra_params = params - models_llama_params(k, ffn, vocab);
    return TRUE;
}

gboolean
fsim_model_shape_check(const FsimModelShape *shape, GError **error)
{
    if (shape->layers == 0 || shape->hidden == 0 || shape->heads == 0 || shape->kv_heads == 0 ||
        shape->head_dim == 0 || shape->ffn == 0 || shape->vocab == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "the model shape is incomplete: layers, hidden, heads, KV heads, head dim, FFN "
                    "size and vocabulary must all be positive (give --model, --params or the "
                    "shape flags)");
        return FALSE;
    }
    if (shape->heads % shape->kv_heads != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "%u attention heads are not a multiple of %u KV heads", shape->heads,
                    shape->kv_heads);
        return FALSE;
    }
    /* Keep every product of dimensions far below 2^64. */
    if (shape->layers > 100000 || shape->hidden > 1000000 || shape->ffn > 10000000 ||
        shape->vocab > 100000000 || (uint64_t)shape->heads * shape->head_dim > 1000000) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "the model shape is absurdly large");
        return FALSE;
    }
    return TRUE;
}

static const char *const module_names[FSIM_MOD_COUNT] = {
    [FSIM_MOD_EMBED] = "embed", [FSIM_MOD_POS] = "pos",
    [FSIM_MOD_NORM1] = "norm1", [FSIM_MOD_Q] = "q",
    [FSIM_MOD_K] = "k",         [FSIM_MOD_V] = "v",
    [FSIM_MOD_QKV] = "qkv",     [FSIM_MOD_O] = "o",
    [FSIM_MOD_NORM2] = "norm2", [FSIM_MOD_FC1] = "fc1",
    [FSIM_MOD_FC2] = "fc2",     [FSIM_MOD_GATE] = "gate",
    [FSIM_MOD_UP] = "up",       [FSIM_MOD_GATE_UP] = "gate_up",
    [FSIM_MOD_DOWN] = "down",   [FSIM_MOD_NORM_FINAL] = "norm_final",
    [FSIM_MOD_HEAD] = "head",   [FSIM_MOD_EXTRA] = "extra",
};

const char *
fsim_module_name(FsimModule module)
{
    return fsim_enum_name(module_names, FSIM_MOD_COUNT, (int)module);
}

static void
models_push(GArray *out, FsimModule module, uint32_t layer, uint64_t rows, uint64_t cols,
            gboolean is_bias, gboolean lora)
{
    FsimParamTensor p = {
        .module = module,
        .layer = layer,
        .rows = rows,
        .cols = cols,
        .is_bias = is_bias,
        .lora = lora,
    };
    g_array_append_val(out, p);
}

/* A linear layer: weight (out × in) and, with biases, its bias (out). */
static void
models_push_linear(GArray *out, FsimModule module, uint32_t layer, uint64_t rows, uint64_t cols,
                   gboolean bias)
{
    models_push(out, module, layer, rows, cols, FALSE, FALSE);
    if (bias)
        models_push(out, module, layer, rows, 1, TRUE, FALSE);
}

static void
models_push_norm(GArray *out, const FsimModelShape *m, FsimModule module, uint32_t layer)
{
    models_push(out, module, layer, m->hidden, 1, FALSE, FALSE);
    if (m->norm == FSIM_NORM_LAYERNORM)
        models_push(out, module, layer, m->hidden, 1, TRUE, FALSE);
}

/* Whether a LoRA adapter sits on @module under @targets (a fused module is targeted when one of
 * its parts is). */
static gboolean
models_lora_targets(uint32_t targets, FsimModule module)
{
    switch (module) {
    case FSIM_MOD_QKV:
        return (targets & (FSIM_LORA_TARGET(FSIM_MOD_Q) | FSIM_LORA_TARGET(FSIM_MOD_K) |
                           FSIM_LORA_TARGET(FSIM_MOD_V))) != 0;
    case FSIM_MOD_GATE_UP:
        return (targets & (FSIM_LORA_TARGET(FSIM_MOD_GATE) | FSIM_LORA_TARGET(FSIM_MOD_UP))) != 0;
    default:
        return (targets & FSIM_LORA_TARGET(module)) != 0;
    }
}

void
fsim_train_params(const FsimTrainConfig *config, GArray *out)
{
    const FsimModelShape *m = &config->model;
    uint64_t t = config->tp ? config->tp : 1;
    uint64_t h = m->hidden;
    uint64_t d = m->head_dim;
    uint64_t q = (uint64_t)m->heads / t * d;     /* query width of one rank */
    uint64_t kv = (uint64_t)m->kv_heads / t * d; /* key / value width of one rank */
    uint64_t f = m->ffn / t;
    uint64_t v = fsim_div_ceil(m->vocab, t); /* vocabulary-parallel embedding */

    models_push(out, FSIM_MOD_EMBED, FSIM_NO_LAYER, v, h, FALSE, FALSE);
    if (m->positions)
        models_push(out, FSIM_MOD_POS, FSIM_NO_LAYER, m->positions, h, FALSE, FALSE);

    for (uint32_t layer = 0; layer < m->layers; layer++) {
        guint first = out->len;
        models_push_norm(out, m, FSIM_MOD_NORM1, layer);
        if (m->fused_qkv) {
            models_push_linear(out, FSIM_MOD_QKV, layer, q + 2 * kv, h, m->bias);
        } else {
            models_push_linear(out, FSIM_MOD_Q, layer, q, h, m->bias);
            models_push_linear(out, FSIM_MOD_K, layer, kv, h, m->bias);
            models_push_linear(out, FSIM_MOD_V, layer, kv, h, m->bias);
        }
        /* Row-parallel layers keep their bias whole (added after the all-reduce). */
        models_push(out, FSIM_MOD_O, layer, h, q, FALSE, FALSE);
        if (m->bias)
            models_push(out, FSIM_MOD_O, layer, h, 1, TRUE, FALSE);
        models_push_norm(out, m, FSIM_MOD_NORM2, layer);
        if (!m->gated_mlp) {
            models_push_linear(out, FSIM_MOD_FC1, layer, f, h, m->bias);
            models_push(out, FSIM_MOD_FC2, layer, h, f, FALSE, FALSE);
            if (m->bias)
                models_push(out, FSIM_MOD_FC2, layer, h, 1, TRUE, FALSE);
        } else {
            if (m->fused_gate_up) {
                models_push_linear(out, FSIM_MOD_GATE_UP, layer, 2 * f, h, m->bias);
            } else {
                models_push_linear(out, FSIM_MOD_GATE, layer, f, h, m->bias);
                models_push_linear(out, FSIM_MOD_UP, layer, f, h, m->bias);
            }
            models_push(out, FSIM_MOD_DOWN, layer, h, f, FALSE, FALSE);
            if (m->bias)
                models_push(out, FSIM_MOD_DOWN, layer, h, 1, TRUE, FALSE);
        }
        if (!config->lora)
            continue;
        /* Adapters: A (rank × in) and B (out × rank) for each targeted weight of the layer. */
        guint last = out->len;
        for (guint i = first; i < last; i++) {
            FsimParamTensor p = g_array_index(out, FsimParamTensor, i);
            if (p.is_bias || p.cols == 1 || !models_lora_targets(config->lora_targets, p.module))
                continue;
            models_push(out, p.module, layer, config->lora_rank, p.cols, FALSE, TRUE);
            models_push(out, p.module, layer, p.rows, config->lora_rank, FALSE, TRUE);
        }
    }

    models_push_norm(out, m, FSIM_MOD_NORM_FINAL, FSIM_NO_LAYER);
    if (!m->tied_embeddings)
        models_push(out, FSIM_MOD_HEAD, FSIM_NO_LAYER, v, h, FALSE, FALSE);
    if (m->extra_params)
        models_push(out, FSIM_MOD_EXTRA, FSIM_NO_LAYER, m->extra_params, 1, FALSE, FALSE);
}

GArray *
fsim_model_tensors(const FsimModelShape *shape)
{
    FsimTrainConfig config;
    fsim_train_config_init(&config);
    config.model = *shape;
    GArray *params = g_array_new(FALSE, FALSE, sizeof(FsimParamTensor));
    fsim_train_params(&config, params);
    return params;
}

uint64_t
fsim_model_params(const FsimModelShape *shape)
{
    g_autoptr(GArray) params = fsim_model_tensors(shape);
    uint64_t n = 0;
    for (guint i = 0; i < params->len; i++) {
        const FsimParamTensor *p = &g_array_index(params, FsimParamTensor, i);
        n += p->rows * p->cols;
    }
    return n;
}

gboolean
fsim_train_param_trainable(const FsimTrainConfig *config, const FsimParamTensor *p)
{
    return config->lora ? p->lora : TRUE;
}

void
fsim_train_config_init(FsimTrainConfig *config)
{
    memset(config, 0, sizeof *config);
    config->seq = 2048;
    config->batch = 1;
    config->steps = 2;
    config->grad_accum = 1;
    config->precision = FSIM_PRECISION_MIXED;
    config->dtype = FSIM_DTYPE_BF16;
    config->grad_bits = 16;
    config->optimizer = FSIM_OPTIMIZER_ADAMW;
    config->checkpointing = FSIM_CKPT_NONE;
    config->attention = FSIM_ATTENTION_FLASH;
    config->zero_stage = 0;
    config->ranks = 1;
    config->tp = 1;
    config->lora_rank = 16;
    config->lora_targets = FSIM_LORA_DEFAULT_TARGETS;
}

gboolean
fsim_train_config_check(const FsimTrainConfig *config, GError **error)
{
    const FsimModelShape *m = &config->model;

    if (!fsim_model_shape_check(m, error))
        return FALSE;
    if (config->seq == 0 || config->batch == 0 || config->steps == 0 || config->grad_accum == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--seq, --batch, --steps and --grad-accum must be positive");
        return FALSE;
    }
    /* Keep s²·b·heads and tokens·vocab products far below 2^64. */
    if (config->seq > 10000000 || config->batch > 1000000 ||
        config->seq * config->batch > 100000000 || config->steps > 1000000000 ||
        config->grad_accum > 1000000) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--seq, --batch, --steps or --grad-accum is absurdly large");
        return FALSE;
    }
    if (config->grad_bits != 16 && config->grad_bits != 32) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--grad-dtype must be 16 or 32");
        return FALSE;
    }
    if (config->zero_stage > 3) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--zero must be 0, 1, 2 or 3");
        return FALSE;
    }
    if (config->ranks == 0 || config->ranks > 1000000) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--ranks must be between 1 and 1000000");
        return FALSE;
    }
    if (config->zero_stage > 0 && config->optimizer == FSIM_OPTIMIZER_ADAFACTOR) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_UNSUPPORTED,
                    "Adafactor's factored state is not partitioned by ZeRO; use --zero 0");
        return FALSE;
    }
    uint32_t t = config->tp;
    if (t == 0 || m->heads % t != 0 || m->kv_heads % t != 0 || m->ffn % t != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--tp %u must divide the heads (%u), the KV heads (%u) and the FFN size (%u)",
                    t, m->heads, m->kv_heads, m->ffn);
        return FALSE;
    }
    if (config->sequence_parallel && t == 1) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--sequence-parallel needs tensor parallelism (--tp 2 or more)");
        return FALSE;
    }
    /* The largest tensors (fp32, before any sharding) must stay below FSIM_MAX_SIZE: score
     * matrices, logits, MLP intermediates, embeddings.  Computed in floating point, which cannot
     * overflow here. */
    double tokens = (double)config->seq * (double)config->batch;
    double largest =
        MAX(MAX((double)config->batch * m->heads * (double)config->seq * (double)config->seq,
                tokens * m->vocab),
            MAX(tokens * 2 * m->ffn, (double)m->vocab * m->hidden));
    /* ... and their sum over every layer far below 2^64 (an activation estimate adds a few
     * dozen tensors per layer) */
    if (largest * 4 > (double)FSIM_MAX_SIZE || largest * 4 * 64 * (m->layers + 2.0) > 9e18) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "this configuration is absurdly large: a tensor, or the activations of all "
                    "layers, would exceed %" G_GUINT64_FORMAT " bytes; reduce --seq or --batch",
                    FSIM_MAX_SIZE);
        return FALSE;
    }
    if (config->lora) {
        if (config->lora_rank == 0 || config->lora_rank > 65536) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "--lora-rank must be between 1 and 65536");
            return FALSE;
        }
        if (config->lora_targets == 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "LoRA needs at least one target");
            return FALSE;
        }
    }
    return TRUE;
}

char *
fsim_train_config_describe(const FsimTrainConfig *c)
{
    const FsimModelShape *m = &c->model;
    g_autofree char *params = fsim_format_count(fsim_model_params(m));
    GString *s = g_string_new(NULL);

    g_string_append_printf(s, "%s: %s\n", m->name, m->description);
    g_string_append_printf(s,
                           "  %s parameters: %u layers, hidden %u, %u heads (%u KV, dim %u), "
                           "FFN %u%s, vocabulary %u\n",
                           params, m->layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn,
                           m->gated_mlp ? " (SwiGLU)" : "", m->vocab);
    if (c->precision == FSIM_PRECISION_MIXED)
        g_string_append_printf(s, "  mixed precision (%s, fp32 master weights), %u-bit gradients",
                               fsim_dtype_name(c->dtype), c->grad_bits);
    else
        g_string_append(s, "  fp32");
    g_string_append_printf(s, ", %s; seq %" G_GUINT64_FORMAT ", batch %" G_GUINT64_FORMAT,
                           fsim_optimizer_name(c->optimizer), c->seq, c->batch);
    if (c->grad_accum > 1)
        g_string_append_printf(s, " x %" G_GUINT64_FORMAT " accumulated", c->grad_accum);
    g_string_append_printf(s, "; %s attention, %s", fsim_attention_name(c->attention),
                           c->checkpointing == FSIM_CKPT_NONE   ? "no checkpointing"
                           : c->checkpointing == FSIM_CKPT_FULL ? "full checkpointing"
                                                                : "selective recomputation");
    if (c->zero_stage)
        g_string_append_printf(s, "; ZeRO-%u over %u ranks", c->zero_stage, c->ranks);
    if (c->tp > 1)
        g_string_append_printf(s, "; tensor parallel %u%s", c->tp,
                               c->sequence_parallel ? " + sequence parallel" : "");
    if (c->lora)
        g_string_append_printf(s, "; LoRA rank %u", c->lora_rank);
    g_string_append_c(s, '\n');
    return g_string_free(s, FALSE);
}

/* ---- Names ------------------------------------------------------------------------------- */

static const char *const precision_names[] = {
    [FSIM_PRECISION_MIXED] = "mixed",
    [FSIM_PRECISION_FP32] = "fp32",
};
static const char *const dtype_names[] = {
    [FSIM_DTYPE_BF16] = "bf16",
    [FSIM_DTYPE_FP16] = "fp16",
};
static const char *const optimizer_names[] = {
    [FSIM_OPTIMIZER_ADAMW] = "adamw",
    [FSIM_OPTIMIZER_ADAM8BIT] = "adam8bit",
    [FSIM_OPTIMIZER_SGD] = "sgd",
    [FSIM_OPTIMIZER_ADAFACTOR] = "adafactor",
};
static const char *const checkpointing_names[] = {
    [FSIM_CKPT_NONE] = "none",
    [FSIM_CKPT_FULL] = "full",
    [FSIM_CKPT_SELECTIVE] = "selective",
};
static const char *const attention_names[] = {
    [FSIM_ATTENTION_FLASH] = "flash",
    [FSIM_ATTENTION_EAGER] = "eager",
};

#define NAME_FUNCS(type, table, to_name, from_name)                     \
    const char *to_name(type v)                                         \
    {                                                                   \
        return fsim_enum_name(table, G_N_ELEMENTS(table), (int)v);      \
    }                                                                   \
    gboolean from_name(const char *name, type *out)                     \
    {                                                                   \
        int v;                                                          \
        if (!fsim_enum_from_name(table, G_N_ELEMENTS(table), name, &v)) \
            return FALSE;                                               \
        *out = (type)v;                                                 \
        return TRUE;                                                    \
    }

NAME_FUNCS(FsimPrecision, precision_names, fsim_precision_name, fsim_precision_from_name)
NAME_FUNCS(FsimDtype, dtype_names, fsim_dtype_name, fsim_dtype_from_name)
NAME_FUNCS(FsimOptimizer, optimizer_names, fsim_optimizer_name, fsim_optimizer_from_name)
NAME_FUNCS(FsimCheckpointing, checkpointing_names, fsim_checkpointing_name,
           fsim_checkpointing_from_name)
NAME_FUNCS(FsimAttention, attention_names, fsim_attention_name, fsim_attention_from_name)

gboolean
fsim_lora_targets_parse(const char *text, uint32_t *out, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(text, ",", -1);
    uint32_t targets = 0;

    for (char **p = parts; *p; p++) {
        const char *s = g_strstrip(*p);
        if (*s == '\0')
            continue;
        if (g_ascii_strcasecmp(s, "all") == 0) {
            targets |= FSIM_LORA_TARGET(FSIM_MOD_Q) | FSIM_LORA_TARGET(FSIM_MOD_K) |
                       FSIM_LORA_TARGET(FSIM_MOD_V) | FSIM_LORA_TARGET(FSIM_MOD_O) |
                       FSIM_LORA_TARGET(FSIM_MOD_GATE) | FSIM_LORA_TARGET(FSIM_MOD_UP) |
                       FSIM_LORA_TARGET(FSIM_MOD_DOWN) | FSIM_LORA_TARGET(FSIM_MOD_FC1) |
                       FSIM_LORA_TARGET(FSIM_MOD_FC2);
        } else if (g_ascii_strcasecmp(s, "q") == 0) {
            targets |= FSIM_LORA_TARGET(FSIM_MOD_Q);
        } else if (g_ascii_strcasecmp(s, "k") == 0) {
            targets |= FSIM_LORA_TARGET(FSIM_MOD_K);
        } else if (g_ascii_strcasecmp(s, "v") == 0) {
            targets |= FSIM_LORA_TARGET(FSIM_MOD_V);
        } else if (g_ascii_strcasecmp(s, "o") == 0) {
            targets |= FSIM_LORA_TARGET(FSIM_MOD_O);
        } else if (g_ascii_strcasecmp(s, "gate") == 0) {
            targets |= FSIM_LORA_TARGET(FSIM_MOD_GATE);
        } else if (g_ascii_strcasecmp(s, "up") == 0 || g_ascii_strcasecmp(s, "fc1") == 0) {
            /* the MLP's first projection, whatever the model calls it */
            targets |= FSIM_LORA_TARGET(FSIM_MOD_UP) | FSIM_LORA_TARGET(FSIM_MOD_FC1);
        } else if (g_ascii_strcasecmp(s, "down") == 0 || g_ascii_strcasecmp(s, "fc2") == 0) {
            targets |= FSIM_LORA_TARGET(FSIM_MOD_DOWN) | FSIM_LORA_TARGET(FSIM_MOD_FC2);
        } else {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "unknown LoRA target '%s' (valid: q, k, v, o, gate, up, down, fc1, fc2, "
                        "all)",
                        s);
            return FALSE;
        }
    }
    if (targets == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "no LoRA target in '%s'", text);
        return FALSE;
    }
    *out = targets;
    return TRUE;
}
