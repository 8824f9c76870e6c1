/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the closed-form memory estimate of a training configuration.
 *
 * Model state is summed per parameter tensor (fsim_train_params()), with the conventions of the
 * ZeRO paper (Rajbhandari et al. 2020, §3.1): under mixed precision a parameter costs 2 bytes of
 * 16-bit weight, 2 (or 4) bytes of gradient and K bytes of optimizer state, where K counts the
 * fp32 master copy: 12 for Adam (4 + 4 + 4), 8 for SGD with momentum (4 + 4), 6 for bitsandbytes'
 * 8-bit Adam (4 + 1 + 1, plus its block statistics).  ZeRO-1 divides K by the ranks, ZeRO-2 also
 * the gradients, ZeRO-3 also the weights.
 *
 * Activations are those of Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
 * Transformer Models", §4, eq. 1-3): per layer, in 16 bits and without recomputation,
 * s·b·h·(34 + 5·a·s/h) bytes for a GPT-3 layer, generalised here to grouped-query attention,
 * SwiGLU, models without dropout, rotary embeddings, flash attention (no s² term, an fp32
 * log-sum-exp instead), selective and full recomputation, and tensor/sequence parallelism; plus
 * the output layer's 4·s·b·h + 4·s·b·v and the input ids.
 *
 * The peak (total) is the largest of a few closed-form candidates: the loss backward, the
 * output layer's weight gradient, the first layer's backward (MLP and attention, with the
 * recomputed layer under checkpointing), and the optimizer step.  Every formula is in
 * docs/synth.md; the tests compare the total with the peak of the generated trace.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/types.h"

#include "synth.h"

/* The dimensions of one rank's micro-batch (the same as the generator's, computed here on their
 * own so that the estimate stays independent). */
typedef struct {
    uint64_t e, we, gb;
    uint64_t T, Tr; /* tokens; tokens of the replicated regions */
    uint64_t s, b, h, q, kv, f, v, heads, r;
    uint64_t scores; /* b · heads · s² */
    gboolean dropout, rotary, eager, mixed;
} Est;

static void
est_init(const FsimTrainConfig *c, Est *x)
{
    const FsimModelShape *m = &c->model;
    uint64_t t = c->tp ? c->tp : 1;
    memset(x, 0, sizeof *x);
    x->mixed = c->precision == FSIM_PRECISION_MIXED;
    x->e = x->mixed ? 2 : 4;
    x->we = x->e;
    x->gb = x->mixed ? c->grad_bits / 8 : 4;
    x->s = c->seq;
    x->b = c->batch;
    x->T = x->s * x->b;
    x->Tr = c->sequence_parallel ? fsim_div_ceil(x->T, t) : x->T;
    x->h = m->hidden;
    x->heads = m->heads / t;
    x->q = x->heads * m->head_dim;
    x->kv = m->kv_heads / t * m->head_dim;
    x->f = m->ffn / t;
    x->v = fsim_div_ceil(m->vocab, t);
    x->r = c->lora_rank;
    x->scores = x->b * x->heads * x->s * x->s;
    x->dropout = m->dropout;
    x->rotary = m->positions == 0;
    x->eager = c->attention == FSIM_ATTENTION_EAGER;
}

/* Bytes of the attention core's saved s² tensors (eager): probabilities, and with dropout its
 * mask (1 byte) and the dropped probabilities. */
static uint64_t
est_core(const Est *x)
{
    if (!x->eager)
        return 0;
    return x->scores * x->e + (x->dropout ? x->scores * (1 + x->e) : 0);
}

/* LoRA: A·x outputs one layer saves, and the widest adapter input. */
static uint64_t
est_lora_saved(const FsimTrainConfig *c, const Est *x, const GArray *params)
{
    uint64_t n = 0;
    if (!c->lora)
        return 0;
    for (guint i = 0; i < params->len; i++) {
        const FsimParamTensor *p = &g_array_index(params, FsimParamTensor, i);
        if (p->layer == 0 && p->lora && p->rows == c->lora_rank)
            n += x->T * x->r * x->e;
    }
    return n;
}

/* Per layer, without recomputation: the attention half and the MLP half. */
static uint64_t
est_layer_attn(const Est *x, const FsimModelShape *m)
{
    uint64_t n = 2 * x->Tr * x->h * x->e;  /* layer input, LayerNorm 1 output */
    n += x->T * (x->q + 2 * x->kv) * x->e; /* q, k, v */
    if (m->fused_qkv && x->rotary)
        n += x->T * (x->q + x->kv) * x->e; /* rotated q, k beside the fused output */
    n += x->eager ? est_core(x) : x->b * x->heads * x->s * 4; /* s² tensors, or the log-sum-exp */
    n += x->T * x->q * x->e; /* context: the output projection's input */
    if (x->dropout)
        n += x->Tr * x->h; /* dropout mask */
    return n;
}

static uint64_t
est_layer_mlp(const Est *x, const FsimModelShape *m)
{
    uint64_t n = 2 * x->Tr * x->h * x->e; /* residual (LayerNorm 2 input), its output */
    n += (m->gated_mlp ? 4 : 2) * x->T * x->f * x->e;
    if (x->dropout)
        n += x->Tr * x->h;
    return n;
}

uint64_t
fsim_estimate_layer_activations(const FsimTrainConfig *config)
{
    Est x;
    est_init(config, &x);
    if (config->checkpointing == FSIM_CKPT_FULL)
        return x.Tr * x.h * x.e;
    uint64_t n = est_layer_attn(&x, &config->model) + est_layer_mlp(&x, &config->model);
    if (config->checkpointing == FSIM_CKPT_SELECTIVE)
        n -= est_core(&x);
    if (config->lora) {
        g_autoptr(GArray) params = g_array_new(FALSE, FALSE, sizeof(FsimParamTensor));
        fsim_train_params(config, params);
        n += est_lora_saved(config, &x, params);
    }
    return n;
}

/* The peak of a weight gradient's temporaries: the gradient in the compute type, and its fp32
 * copy when gradients are kept in fp32 under mixed precision (both live for a moment). */
static uint64_t
est_grad_tmp(const Est *x, uint64_t n)
{
    return n * x->e + (x->mixed && x->gb == 4 ? n * 4 : 0);
}

typedef struct {
    uint64_t weights, grads, optimizer, master;
    uint64_t step_tmp;                    /* largest optimizer-step temporary */
    uint64_t grad_tmp[FSIM_MOD_COUNT];    /* largest weight-gradient temporary per module */
    uint64_t lora_tmp[FSIM_MOD_COUNT];    /* LoRA backward temporaries per module */
    uint64_t layer_weights, head_weights; /* unpartitioned (ZeRO-3 gathers) */
} State;

static void
est_state(const FsimTrainConfig *c, const Est *x, const GArray *params, State *st)
{
    uint64_t ranks = c->ranks;
    memset(st, 0, sizeof *st);
    for (guint i = 0; i < params->len; i++) {
        const FsimParamTensor *p = &g_array_index(params, FsimParamTensor, i);
        uint64_t n = p->rows * p->cols;
        uint64_t n1 = c->zero_stage >= 1 ? fsim_div_ceil(n, ranks) : n;
        uint64_t n2 = c->zero_stage >= 2 ? fsim_div_ceil(n, ranks) : n;
        uint64_t n3 = c->zero_stage >= 3 ? fsim_div_ceil(n, ranks) : n;

        st->weights += n3 * x->we;
        if (p->layer == 0)
            st->layer_weights += n * x->we;
        else if (p->layer == FSIM_NO_LAYER &&
                 (p->module == FSIM_MOD_NORM_FINAL || p->module == FSIM_MOD_HEAD ||
                  (p->module == FSIM_MOD_EMBED && c->model.tied_embeddings)))
            st->head_weights += n * x->we;
        if (!fsim_train_param_trainable(c, p))
            continue;

        st->grads += n2 * x->gb;
        if (p->lora) {
            /* the adapter input's width: A is rank × in */
            if (p->layer == 0 && p->rows == c->lora_rank)
                st->lora_tmp[p->module] = x->T * x->r * x->e + x->T * p->cols * x->e;
        } else if (p->layer == 0 || p->layer == FSIM_NO_LAYER) {
            st->grad_tmp[p->module] = MAX(st->grad_tmp[p->module], est_grad_tmp(x, n));
        }
        if (x->mixed)
            st->master += n1 * 4;
        uint64_t state = 0, tmp = 0;
        switch (c->optimizer) {
        case FSIM_OPTIMIZER_ADAMW:
            state = 8 * n1;
            break;
        case FSIM_OPTIMIZER_ADAM8BIT:
            state = n >= FSIM_ADAM8BIT_MIN_NUMEL
                        ? 2 * n1 + 8 * fsim_div_ceil(n1, FSIM_ADAM8BIT_BLOCK)
                        : 8 * n1;
            break;
        case FSIM_OPTIMIZER_SGD:
            state = 4 * n1;
            break;
        case FSIM_OPTIMIZER_ADAFACTOR:
            state = p->rows > 1 && p->cols > 1 ? 4 * (p->rows + p->cols) : 4 * n1;
            tmp = 8 * n1;
            break;
        }
        if (x->mixed && x->gb == 2 && c->optimizer != FSIM_OPTIMIZER_ADAM8BIT)
            tmp += 4 * n1;
        st->optimizer += state;
        st->step_tmp = MAX(st->step_tmp, tmp);
    }
    st->optimizer += st->master;
}

/* The weight-gradient temporaries of a module's backward (its base weight, or its adapter). */
static uint64_t
est_module_tmp(const State *st, FsimModule module)
{
    return MAX(st->grad_tmp[module], st->lora_tmp[module]);
}

/* Model state into out: parameter counts and the bytes of weights, gradients and optimizer;
 * returns their sum. */
static uint64_t
est_report_state(const FsimTrainConfig *c, const GArray *params, const State *st, FsimEstimate *out)
{
    for (guint i = 0; i < params->len; i++) {
        const FsimParamTensor *p = &g_array_index(params, FsimParamTensor, i);
        out->rank_params += p->rows * p->cols;
        if (fsim_train_param_trainable(c, p))
            out->trainable_params += p->rows * p->cols;
    }
    out->params = fsim_model_params(&c->model);
    out->weights_bytes = st->weights;
    out->gradients_bytes = st->grads;
    out->optimizer_bytes = st->optimizer;
    out->master_bytes = st->master;
    uint64_t state = st->weights + st->grads + st->optimizer;
    out->bytes_per_param = out->rank_params ? (double)state / (double)out->rank_params : 0;
    return state;
}

/* The backward's candidates for the peak, as bytes beyond model state, and what they share. */
typedef struct {
    const FsimTrainConfig *c;
    const Est *x;
    const State *st;
    uint64_t a0;          /* activations at the start of backward */
    uint64_t lnf;         /* one of: final norm input, its output, dy, dx... */
    uint64_t logp;        /* the log-softmax */
    uint64_t sp_gather;   /* a sequence-parallel all-gather */
    uint64_t zero3_layer; /* a layer's gathered weights under ZeRO-3 */
    uint64_t drop_grad;   /* a dropout's gradient */
    uint64_t peak;
    const char *phase;
} Bwd;

/* Makes cand the peak if it is larger than the peak so far. */
static void
bwd_offer(Bwd *w, uint64_t cand, const char *phase)
{
    if (cand > w->peak) {
        w->peak = cand;
        w->phase = phase;
    }
}

/* The loss and the output layer. */
static void
bwd_head(Bwd *w)
{
    const Est *x = w->x;
    uint64_t zero3_head = w->c->zero_stage >= 3 ? w->st->head_weights : 0;

    /* 1. The loss backward: the log-softmax's gradient and the logits' one beside the kept
     * log-softmax. */
    w->peak = w->a0 + 2 * w->logp;
    w->phase = "loss backward";

    /* 1b. Under ZeRO-3 the loss forward holds the gathered output layer: with the log-softmax
     * and the fp32 logits it is made from (or the 16-bit logits and the gathered input). */
    if (zero3_head)
        bwd_offer(
            w, w->a0 - w->logp + zero3_head + MAX(2 * w->logp, w->sp_gather + x->T * x->v * x->e),
            "loss forward");

    /* 2. The output layer's weight gradient: logits' gradient (in the compute type), the final
     * norm output's gradient, the weight gradient temporaries; the log-softmax is gone. */
    FsimModule head_module = w->c->model.tied_embeddings ? FSIM_MOD_EMBED : FSIM_MOD_HEAD;
    bwd_offer(w,
              w->a0 - w->logp + x->T * x->v * x->e + zero3_head + w->sp_gather + w->lnf +
                  est_module_tmp(w->st, head_module),
              "output layer backward");
}

/* The first layer's backward starts from a0 without the head (log-softmax, final norm input
 * and output) but with dy, and the gathered weights under ZeRO-3; under full checkpointing the
 * layer is recomputed first.  Returns the bytes the layer's backward starts from. */
static uint64_t
bwd_layer_base(Bwd *w)
{
    const Est *x = w->x;
    const FsimModelShape *m = &w->c->model;
    uint64_t base = w->a0 - w->logp - w->lnf + w->zero3_layer;
    if (w->c->checkpointing != FSIM_CKPT_FULL)
        return base;
    /* the layer's saved tensors, recomputed (its input is the checkpoint, already in a0),
     * and at the end of the recomputation the MLP output and the discarded layer output */
    FsimTrainConfig none = *w->c;
    none.checkpointing = FSIM_CKPT_NONE;
    base += fsim_estimate_layer_activations(&none) - w->lnf;
    uint64_t cand = base + 2 * w->lnf;
    /* with sequence parallelism, the MLP input's all-gather while the MLP's first
     * projection output is made: the rest of the MLP half does not exist yet */
    uint64_t rest = (m->gated_mlp ? 2 : 1) * x->T * x->f * x->e + (x->dropout ? x->Tr * x->h : 0);
    cand = MAX(cand, base - rest + w->sp_gather);
    bwd_offer(w, cand, "recomputation");
    return base;
}

/* 3. MLP backward: the output's dropout gradient, the gathered input, the gradient of the
 * last projection's input and its weight gradient; a SwiGLU keeps two T·f gradients at
 * once a moment later. */
static void
bwd_mlp(Bwd *w, uint64_t base)
{
    const FsimModelShape *m = &w->c->model;
    FsimModule last = m->gated_mlp ? FSIM_MOD_DOWN : FSIM_MOD_FC2;
    uint64_t tf = w->x->T * w->x->f * w->x->e;
    uint64_t cand = base + w->drop_grad + w->sp_gather + tf + est_module_tmp(w->st, last);
    if (m->gated_mlp && m->fused_gate_up) {
        /* the gate's and up's gradients, their concatenation and its gathered input */
        cand = MAX(cand, base + 2 * tf + w->sp_gather);
    } else if (m->gated_mlp) {
        cand = MAX(cand, base + 2 * tf);
        /* the input's gradient and the gate's weight gradient, the gathered input */
        cand = MAX(cand, base + w->sp_gather + w->lnf + est_module_tmp(w->st, FSIM_MOD_GATE));
    }
    bwd_offer(w, cand, "MLP backward");
}

/* 4. Attention backward: the MLP half of the layer is gone. */
static void
bwd_attention(Bwd *w, uint64_t base)
{
    const Est *x = w->x;
    uint64_t abase = base - est_layer_mlp(x, &w->c->model);
    uint64_t tq = x->T * x->q * x->e;
    uint64_t tkv = x->T * x->kv * x->e;
    uint64_t attn = w->drop_grad + w->sp_gather + tq + est_module_tmp(w->st, FSIM_MOD_O);
    if (x->eager) {
        uint64_t se = x->scores * x->e;
        uint64_t recomputed = w->c->checkpointing == FSIM_CKPT_SELECTIVE ? est_core(x) : 0;
        /* the gradients of the probabilities and of V while the context's is alive (the
         * context itself is gone); then, without dropout (whose dropped probabilities die
         * first), the softmax's input gradient beside its output's while the probabilities live,
         * the context's gradient gone */
        attn = MAX(attn, recomputed + se + tkv);
        if (!x->dropout && 2 * se + tkv > tq)
            attn = MAX(attn, recomputed + 2 * se + tkv - tq);
        if (recomputed)
            attn = MAX(attn, MAX(2 * se, recomputed + tq));
    } else {
        /* the context's gradient, dQ, dK, dV and FlashAttention-2's fp32 accumulator and sums */
        attn = MAX(attn, 2 * tq + 2 * tkv + x->T * x->q * 4 + x->b * x->heads * x->s * 4);
    }
    bwd_offer(w, abase + attn, "attention backward");
}

gboolean
fsim_estimate_train(const FsimTrainConfig *config, FsimEstimate *out, GError **error)
{
    const FsimTrainConfig *c = config;
    Est x;
    State st;

    memset(out, 0, sizeof *out);
    if (!fsim_train_config_check(config, error))
        return FALSE;
    est_init(config, &x);
    g_autoptr(GArray) params = g_array_new(FALSE, FALSE, sizeof(FsimParamTensor));
    fsim_train_params(config, params);
    est_state(config, &x, params, &st);
    uint64_t state = est_report_state(config, params, &st, out);

    /* Activations at the start of backward. */
    uint64_t layer = fsim_estimate_layer_activations(config);
    uint64_t lnf = x.Tr * x.h * x.e;
    uint64_t logp = x.T * x.v * 4;
    uint64_t head = 2 * lnf + logp;
    uint64_t inputs = 2 * x.T * 8;
    uint64_t emb_mask = x.dropout ? x.Tr * x.h : 0;
    uint64_t a0 = c->model.layers * layer + head + inputs + emb_mask;
    out->layer_activations_bytes = layer;

    if (config->activations_bytes) {
        /* a measured figure stands for activations and temporaries together */
        out->activations_bytes = config->activations_bytes;
        out->temporaries_bytes = 0;
        out->total_bytes = state + config->activations_bytes;
        out->peak_phase = "measured activations";
        return TRUE;
    }

    Bwd w = {
        .c = c,
        .x = &x,
        .st = &st,
        .a0 = a0,
        .lnf = lnf,
        .logp = logp,
        .sp_gather = c->sequence_parallel ? x.T * x.h * x.e : 0,
        .zero3_layer = c->zero_stage >= 3 ? st.layer_weights : 0,
        .drop_grad = x.dropout ? lnf : 0,
    };
    bwd_head(&w);
    uint64_t base = bwd_layer_base(&w);
    bwd_mlp(&w, base);
    bwd_attention(&w, base);
    /* 5. The optimizer step: no activations, the largest tensor's temporaries. */
    bwd_offer(&w, st.step_tmp, "optimizer step");

    out->activations_bytes = a0;
    out->temporaries_bytes = w.peak - a0;
    out->total_bytes = state + w.peak;
    out->peak_phase = w.phase;
    return TRUE;
}
