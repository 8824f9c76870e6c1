/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the command-line flags that `synth train`, `estimate` and `fit` share, and their
 * resolution into an #FsimTrainConfig.
 */
#include <glib.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "fragsim/types.h"

#include "synth.h"

void
fsim_train_options_init(FsimTrainOptions *o)
{
    memset(o, 0, sizeof *o);
    o->layers = o->hidden = o->heads = o->kv_heads = o->head_dim = o->ffn = o->vocab = -1;
    o->seq = o->batch = o->steps = o->grad_accum = -1;
    o->grad_dtype = -1;
    o->zero = o->ranks = o->tp = -1;
    o->lora_rank = -1;
}

/* The entries of the flags, pointing into @o: the model and training flags, --list-models,
 * --activations, the end mark. */
#define N_ENTRIES 29

static void
options_entries(FsimTrainOptions *o, GOptionEntry out[N_ENTRIES])
{
    /* clang-format off */
    const GOptionEntry entries[N_ENTRIES] = {
        {"model", 'm', 0, G_OPTION_ARG_STRING, &o->model, "Model preset (see --list-models)", "NAME"},
        {"params", 0, 0, G_OPTION_ARG_STRING, &o->params, "Parameter count (7e9, 7B, 125M): a Llama-style shape is derived", "N"},
        {"layers", 0, 0, G_OPTION_ARG_INT, &o->layers, "Transformer layers (overrides the preset)", "N"},
        {"hidden", 0, 0, G_OPTION_ARG_INT, &o->hidden, "Hidden size", "N"},
        {"heads", 0, 0, G_OPTION_ARG_INT, &o->heads, "Attention heads", "N"},
        {"kv-heads", 0, 0, G_OPTION_ARG_INT, &o->kv_heads, "Key/value heads (default: heads)", "N"},
        {"head-dim", 0, 0, G_OPTION_ARG_INT, &o->head_dim, "Head dimension (default: hidden / heads)", "N"},
        {"ffn", 0, 0, G_OPTION_ARG_INT, &o->ffn, "MLP inner size", "N"},
        {"vocab", 0, 0, G_OPTION_ARG_INT, &o->vocab, "Vocabulary size", "N"},
        {"seq", 0, 0, G_OPTION_ARG_INT, &o->seq, "Sequence length (default 2048)", "N"},
        {"batch", 'b', 0, G_OPTION_ARG_INT, &o->batch, "Micro-batch size per rank (default 1)", "N"},
        {"steps", 0, 0, G_OPTION_ARG_INT, &o->steps, "Optimizer steps (default 2)", "N"},
        {"grad-accum", 0, 0, G_OPTION_ARG_INT, &o->grad_accum, "Micro-batches per step (default 1)", "N"},
        {"precision", 0, 0, G_OPTION_ARG_STRING, &o->precision, "fp32 or mixed (default mixed: 16-bit weights and compute, fp32 master weights)", "P"},
        {"dtype", 0, 0, G_OPTION_ARG_STRING, &o->dtype, "16-bit type of mixed precision: bf16 (default) or fp16", "T"},
        {"grad-dtype", 0, 0, G_OPTION_ARG_INT, &o->grad_dtype, "Gradient bits under mixed precision: 16 (default) or 32", "BITS"},
        {"optimizer", 0, 0, G_OPTION_ARG_STRING, &o->optimizer, "adamw (default), adam8bit, sgd (with momentum) or adafactor", "OPT"},
        {"checkpointing", 0, 0, G_OPTION_ARG_STRING, &o->checkpointing, "Activation checkpointing: none (default), full or selective", "MODE"},
        {"attention", 0, 0, G_OPTION_ARG_STRING, &o->attention, "flash (default) or eager (materialises the s² scores)", "KIND"},
        {"zero", 0, 0, G_OPTION_ARG_INT, &o->zero, "ZeRO / FSDP stage 0 (default) to 3", "STAGE"},
        {"ranks", 0, 0, G_OPTION_ARG_INT, &o->ranks, "Data-parallel ranks ZeRO partitions over (default 1)", "N"},
        {"tp", 0, 0, G_OPTION_ARG_INT, &o->tp, "Tensor-parallel degree (default 1)", "N"},
        {"sequence-parallel", 0, 0, G_OPTION_ARG_NONE, &o->sequence_parallel, "With --tp, shard norms and dropout along the sequence", NULL},
        {"lora", 0, 0, G_OPTION_ARG_NONE, &o->lora, "Train LoRA adapters only (base weights frozen)", NULL},
        {"lora-rank", 0, 0, G_OPTION_ARG_INT, &o->lora_rank, "LoRA rank (default 16)", "R"},
        {"lora-targets", 0, 0, G_OPTION_ARG_STRING, &o->lora_targets, "LoRA targets: q,k,v,o,gate,up,down or all (default q,v)", "LIST"},
        {"list-models", 0, 0, G_OPTION_ARG_NONE, &o->list_models, "List the model presets and exit", NULL},
        {"activations", 0, 0, G_OPTION_ARG_STRING, &o->activations, "A measured activation figure (20GB, 18GiB) instead of the estimate", "SIZE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    /* clang-format on */
    memcpy(out, entries, sizeof(entries));
}

void
fsim_train_options_clear(FsimTrainOptions *o)
{
    GOptionEntry entries[N_ENTRIES];

    options_entries(o, entries);
    for (guint i = 0; entries[i].long_name != NULL; i++) {
        if (entries[i].arg == G_OPTION_ARG_STRING)
            g_clear_pointer((char **)entries[i].arg_data, g_free);
    }
}

GOptionGroup *
fsim_train_options_group(FsimTrainOptions *o, guint flags)
{
    GOptionEntry entries[N_ENTRIES];

    options_entries(o, entries);
    if (flags & FSIM_TRAIN_OPTIONS_MODEL_ONLY) {
        /* the model flags come first: --model ... --vocab, then --list-models */
        guint n = 0;
        while (entries[n].long_name && g_strcmp0(entries[n].long_name, "seq") != 0)
            n++;
        entries[n] = entries[G_N_ELEMENTS(entries) - 3];
        memset(&entries[n + 1], 0, sizeof entries[0]);
    } else if (!(flags & FSIM_TRAIN_OPTIONS_ACTIVATIONS)) {
        memset(&entries[G_N_ELEMENTS(entries) - 2], 0, sizeof entries[0]);
    }
    GOptionGroup *group = g_option_group_new(
        "model", "Model and training options:", "Show the model and training options", NULL, NULL);
    g_option_group_add_entries(group, entries);
    return group;
}

const char *
fsim_train_options_help(void)
{
    return "Model: --model NAME (--list-models), --params N, or the shape flags (a Llama-style\n"
           "model: SwiGLU, RMSNorm, rotary embeddings, no biases or dropout); shape flags also\n"
           "override a preset's dimensions.  --help-model lists every model and training flag.\n"
           "Defaults: mixed precision (bf16 weights and compute, fp32 master weights), 16-bit\n"
           "gradients, AdamW, no checkpointing, flash attention, batch 1, seq 2048, 2 steps,\n"
           "no ZeRO, no tensor parallelism, no LoRA (rank 16 on q and v when enabled).\n"
           "Sizes are bytes; GB is 10^9, GiB 2^30.  docs/synth.md states every convention.";
}

/* A parameter count: 7e9, 7000000000, 7B, 1.5b, 125M, 350m, 2T. */
static gboolean
options_parse_count(const char *text, uint64_t *out, GError **error)
{
    char *end = NULL;
    errno = 0;
    double v = g_ascii_strtod(text, &end);
    double scale = 1;
    if (end != text && *end != '\0' && end[1] == '\0') {
        switch (g_ascii_tolower(*end)) {
        case 'k':
            scale = 1e3;
            end++;
            break;
        case 'm':
            scale = 1e6;
            end++;
            break;
        case 'b':
        case 'g':
            scale = 1e9;
            end++;
            break;
        case 't':
            scale = 1e12;
            end++;
            break;
        default:
            break;
        }
    }
    v *= scale;
    if (end == text || *end != '\0' || errno != 0 || !isfinite(v) || v < 1 || v > 1e15) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--params '%s' is not a parameter count (examples: 7e9, 7B, 125M)", text);
        return FALSE;
    }
    *out = (uint64_t)llround(v);
    return TRUE;
}

/* Copy a flag given as an int (-1 = absent) into a positive uint32 field. */
static gboolean
options_dim(int value, const char *flag, uint32_t *field, GError **error)
{
    if (value == -1)
        return TRUE;
    if (value <= 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--%s must be positive", flag);
        return FALSE;
    }
    *field = (uint32_t)value;
    return TRUE;
}

static gboolean
options_count(int value, const char *flag, uint64_t *field, GError **error)
{
    uint32_t v = 0;
    if (!options_dim(value, flag, &v, error))
        return FALSE;
    if (value != -1)
        *field = v;
    return TRUE;
}

static gboolean
options_enum_error(const char *flag, const char *value, const char *valid, GError **error)
{
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--%s '%s' is unknown (valid: %s)", flag,
                value, valid);
    return FALSE;
}

/* The model: a preset, a shape derived from a parameter count, or the shape flags alone. */
static gboolean
options_resolve_model(const FsimTrainOptions *o, const char *model, gboolean shape_flags,
                      FsimModelShape *m, GError **error)
{
    if (model && o->params) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "give either --model or --params");
        return FALSE;
    }
    if (model) {
        const FsimModelShape *preset = fsim_model_lookup(model);
        if (preset == NULL) {
            g_autofree char *names = fsim_model_names();
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "unknown model '%s' (valid: %s)",
                        model, names);
            return FALSE;
        }
        *m = *preset;
    } else if (o->params) {
        uint64_t params;
        if (shape_flags) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "--params derives the shape: give either it or the shape flags");
            return FALSE;
        }
        if (!options_parse_count(o->params, &params, error) ||
            !fsim_model_shape_from_params(params, m, error))
            return FALSE;
    } else if (shape_flags) {
        g_strlcpy(m->name, "custom", sizeof m->name);
        g_strlcpy(m->description, "explicit Llama-style shape", sizeof m->description);
        m->gated_mlp = TRUE;
        m->norm = FSIM_NORM_RMSNORM;
    } else {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "no model: give --model NAME (see --list-models), --params N or the shape "
                    "flags (--layers, --hidden, --heads, --ffn, --vocab)");
        return FALSE;
    }
    if (shape_flags && model) {
        g_autofree char *name = g_strdup_printf("%s*", m->name);
        g_strlcpy(m->name, name, sizeof m->name);
    }
    return TRUE;
}

/* The shape flags over the model's dimensions. */
static gboolean
options_resolve_shape(const FsimTrainOptions *o, FsimModelShape *m, GError **error)
{
    uint32_t old_heads = m->heads, old_hidden = m->hidden;
    if (!options_dim(o->layers, "layers", &m->layers, error) ||
        !options_dim(o->hidden, "hidden", &m->hidden, error) ||
        !options_dim(o->heads, "heads", &m->heads, error) ||
        !options_dim(o->ffn, "ffn", &m->ffn, error) ||
        !options_dim(o->vocab, "vocab", &m->vocab, error))
        return FALSE;
    /* KV heads and head dim follow heads and hidden unless given */
    if (m->heads != old_heads && (old_heads == 0 || m->kv_heads == old_heads))
        m->kv_heads = m->heads;
    if ((m->heads != old_heads || m->hidden != old_hidden) && m->heads)
        m->head_dim = m->hidden / m->heads;
    return options_dim(o->kv_heads, "kv-heads", &m->kv_heads, error) &&
           options_dim(o->head_dim, "head-dim", &m->head_dim, error);
}

/* The batch, the steps and the arithmetic: precision, optimizer, checkpointing, attention. */
static gboolean
options_resolve_step(const FsimTrainOptions *o, FsimTrainConfig *config, GError **error)
{
    if (!options_count(o->seq, "seq", &config->seq, error) ||
        !options_count(o->batch, "batch", &config->batch, error) ||
        !options_count(o->steps, "steps", &config->steps, error) ||
        !options_count(o->grad_accum, "grad-accum", &config->grad_accum, error))
        return FALSE;
    if (o->precision && !fsim_precision_from_name(o->precision, &config->precision))
        return options_enum_error("precision", o->precision, "fp32, mixed", error);
    if (o->dtype && !fsim_dtype_from_name(o->dtype, &config->dtype))
        return options_enum_error("dtype", o->dtype, "bf16, fp16", error);
    if (o->grad_dtype != -1) {
        if (o->grad_dtype != 16 && o->grad_dtype != 32) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--grad-dtype must be 16 or 32");
            return FALSE;
        }
        config->grad_bits = (uint32_t)o->grad_dtype;
    }
    if (o->optimizer && !fsim_optimizer_from_name(o->optimizer, &config->optimizer))
        return options_enum_error("optimizer", o->optimizer, "adamw, adam8bit, sgd, adafactor",
                                  error);
    if (o->checkpointing && !fsim_checkpointing_from_name(o->checkpointing, &config->checkpointing))
        return options_enum_error("checkpointing", o->checkpointing, "none, full, selective",
                                  error);
    if (o->attention && !fsim_attention_from_name(o->attention, &config->attention))
        return options_enum_error("attention", o->attention, "flash, eager", error);
    return TRUE;
}

/* How the work is spread and what is trained: ZeRO, tensor and sequence parallelism, LoRA. */
static gboolean
options_resolve_parallel(const FsimTrainOptions *o, FsimTrainConfig *config, GError **error)
{
    if (o->zero != -1) {
        if (o->zero < 0 || o->zero > 3) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--zero must be 0, 1, 2 or 3");
            return FALSE;
        }
        config->zero_stage = (uint32_t)o->zero;
    }
    if (!options_dim(o->ranks, "ranks", &config->ranks, error) ||
        !options_dim(o->tp, "tp", &config->tp, error) ||
        !options_dim(o->lora_rank, "lora-rank", &config->lora_rank, error))
        return FALSE;
    if (config->zero_stage > 0 && config->ranks == 1 && o->ranks == -1) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--zero %u partitions over ranks: give --ranks N", config->zero_stage);
        return FALSE;
    }
    config->sequence_parallel = o->sequence_parallel;
    config->lora = o->lora;
    if ((o->lora_rank != -1 || o->lora_targets) && !o->lora) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--lora-rank and --lora-targets need --lora");
        return FALSE;
    }
    return !o->lora_targets ||
           fsim_lora_targets_parse(o->lora_targets, &config->lora_targets, error);
}

gboolean
fsim_train_options_resolve(const FsimTrainOptions *o, const char *model_arg,
                           FsimTrainConfig *config, GError **error)
{
    const char *model = o->model ? o->model : model_arg;
    gboolean shape_flags = o->layers != -1 || o->hidden != -1 || o->heads != -1 ||
                           o->kv_heads != -1 || o->head_dim != -1 || o->ffn != -1 || o->vocab != -1;

    fsim_train_config_init(config);
    if (!options_resolve_model(o, model, shape_flags, &config->model, error) ||
        !options_resolve_shape(o, &config->model, error) ||
        !options_resolve_step(o, config, error) || !options_resolve_parallel(o, config, error))
        return FALSE;
    if (o->activations) {
        if (!fsim_parse_size(o->activations, &config->activations_bytes, error))
            return FALSE;
        if (config->activations_bytes == 0) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--activations must be positive");
            return FALSE;
        }
    }
    return fsim_train_config_check(config, error);
}
