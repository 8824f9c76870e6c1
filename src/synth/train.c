/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the synthetic trace of transformer training steps.
 *
 * The generator replays, allocation by allocation, what PyTorch's autograd and optimizer ask of
 * the caching allocator during training, from a model shape and a training configuration.  The
 * model of the step (docs/synth.md has it with its references) is:
 *
 *   - setup: every weight (16-bit under mixed precision, fp32 otherwise; a 1/N partition under
 *     ZeRO-3), then for every trained parameter the fp32 master copy (mixed precision) and the
 *     optimizer state (a 1/N partition under ZeRO-1 and up);
 *   - per step: a `step-N` mark; per micro-batch: the input ids and labels; the forward, layer by
 *     layer, allocating every intermediate tensor, freeing the short-lived ones (score matrices
 *     before softmax, projection outputs before dropout and the residual add, rotary inputs) at
 *     once and keeping the ones autograd saves for backward (by activation checkpointing mode);
 *     the loss head (16-bit logits, their fp32 copy, log-softmax kept); the backward in reverse,
 *     allocating each activation gradient and freeing saved tensors as soon as the last gradient
 *     that needs them is computed; the weight gradients as each module's backward produces them;
 *   - the optimizer step, tensor by tensor, with its temporaries.
 *
 * Gradients: the first backward produces each parameter's gradient, which becomes its `.grad`
 * and stays (zero_grad(set_to_none=False), or a framework's persistent gradient buffer); later
 * backwards produce a temporary of the same size and accumulate it.  So from the second step on,
 * the peak of the step holds the whole model state plus the activations, which is what the
 * closed-form estimate computes.
 *
 * The generator streams: it produces one unit (a layer's forward, a layer's backward, a slice of
 * the optimizer step...) at a time into a small buffer, and keeps only the ids of live tensors
 * (saved activations per layer, weights, gradients), so memory grows with the model's depth,
 * never with the number of steps.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/event.h"
#include "fragsim/types.h"

#include "synth.h"

/* Saved-tensor slots of one layer. */
enum {
    SLOT_XIN,       /* the layer's input (LayerNorm 1 input; the checkpoint under full) */
    SLOT_LN1,       /* LayerNorm 1 output: the QKV projections' input */
    SLOT_QKV,       /* fused QKV output (its q, k, v are views) */
    SLOT_Q,         /* queries (after rotary embedding) */
    SLOT_K,         /* keys (after rotary embedding) */
    SLOT_V,         /* values */
    SLOT_PROBS,     /* eager: softmax output */
    SLOT_MASK,      /* eager with dropout: attention dropout mask */
    SLOT_PDROP,     /* eager with dropout: dropped probabilities */
    SLOT_LSE,       /* flash: softmax log-sum-exp */
    SLOT_ATTN_OUT,  /* attention context, the output projection's input */
    SLOT_ATTN_MASK, /* dropout mask after the output projection */
    SLOT_XMID,      /* residual after attention: LayerNorm 2 input */
    SLOT_LN2,       /* LayerNorm 2 output: the MLP's input */
    SLOT_FC1,       /* GELU input */
    SLOT_GATE,      /* SwiGLU gate output (SiLU input) */
    SLOT_UP,        /* SwiGLU up output */
    SLOT_GATE_UP,   /* fused gate+up output */
    SLOT_ACT,       /* activation output */
    SLOT_PROD,      /* SwiGLU product: the down projection's input */
    SLOT_MLP_MASK,  /* dropout mask after the MLP */
    SLOT_LORA,      /* LoRA A outputs, one per module: SLOT_LORA + module */
    SLOT_COUNT = SLOT_LORA + FSIM_MOD_COUNT,
};

typedef enum {
    PHASE_WEIGHTS,
    PHASE_OPT_STATE,
    PHASE_STEP_MARK,
    PHASE_INPUTS,
    PHASE_EMBED_FWD,
    PHASE_LAYER_FWD,
    PHASE_HEAD_FWD,
    PHASE_HEAD_BWD,
    PHASE_LAYER_BWD,
    PHASE_EMBED_BWD,
    PHASE_MICRO_END,
    PHASE_OPT_STEP,
    PHASE_DONE,
} Phase;

typedef enum {
    FWD_SAVE,      /* a normal forward: keep what autograd saves */
    FWD_NOSAVE,    /* full checkpointing's forward: keep nothing but the output */
    FWD_RECOMPUTE, /* full checkpointing's recomputation in backward: keep, drop the output */
} FwdMode;

typedef struct {
    FsimEventKind kind;
    uint64_t id;
    uint64_t size;
} Pending;

/* Tensor sizes of one micro-batch, in bytes unless named otherwise. */
typedef struct {
    uint64_t e;      /* bytes per activation element: 2 (mixed) or 4 (fp32) */
    uint64_t we;     /* bytes per weight element */
    uint64_t gb;     /* bytes per persistent gradient element */
    uint64_t tokens; /* s · b */
    uint64_t rtok; /* tokens of the replicated regions: s·b, or s·b / t with sequence parallelism */
    uint64_t h, q, kv, f, v, heads, s, b, r;
    uint64_t scores; /* elements of one layer's score matrices: b · heads · s² */
    gboolean rotary, dropout;
} Dims;

typedef struct {
    FsimSynth base;
    FsimTrainConfig config;
    Dims dims;

    GArray *params;     /* FsimParamTensor */
    uint64_t *weight;   /* id per parameter */
    uint64_t *grad;     /* id per parameter, 0 until the first backward produced it */
    gboolean *trained;  /* per parameter */
    guint *layer_first; /* first parameter index of each layer; [layers] = past the last */
    guint globals_first;
    uint64_t *layer_weight_bytes; /* unpartitioned weight bytes per layer (ZeRO-3 gathers) */
    uint64_t embed_weight_bytes, head_weight_bytes;

    uint64_t *saved; /* layers × SLOT_COUNT ids, 0 = none */
    uint64_t *ckpt;  /* full checkpointing: each layer's input */
    uint64_t lnf_in, lnf_out, logp, emb_mask, ids, labels;
    uint64_t x;        /* forward: the residual stream between layers */
    uint64_t dy;       /* backward: its gradient */
    uint64_t gathered; /* ZeRO-3: the gathered weights in use */

    Phase phase;
    uint64_t step;  /* 1-based */
    uint64_t micro; /* 0-based */
    uint32_t layer;
    guint cursor; /* parameter cursor of chunked phases */

    GArray *pending; /* Pending */
    guint pending_pos;
    uint64_t next_id;
    FsimTime now;
    char label[32];
} Train;

/* Time advances by a nominal microsecond per event: the trace's order matters, its clock only
 * spaces the events for plots. */
#define TRAIN_EVENT_NS 1000

static uint64_t
numel(const FsimParamTensor *p)
{
    return p->rows * p->cols;
}

static uint64_t
train_alloc(Train *t, uint64_t size)
{
    Pending p = {.kind = FSIM_EV_ALLOC, .id = ++t->next_id, .size = size};
    g_assert(size > 0);
    g_array_append_val(t->pending, p);
    return p.id;
}

static void
train_free(Train *t, uint64_t id)
{
    g_assert(id != 0);
    Pending p = {.kind = FSIM_EV_FREE, .id = id};
    g_array_append_val(t->pending, p);
}

/* Free *id when set, and clear it. */
static void
train_drop(Train *t, uint64_t *id)
{
    if (*id) {
        train_free(t, *id);
        *id = 0;
    }
}

static uint64_t *
train_slot(Train *t, uint32_t layer, guint slot)
{
    return &t->saved[(gsize)layer * SLOT_COUNT + slot];
}

/* ---- Parameters and gradients ------------------------------------------------------------ */

static uint64_t
train_partition(const Train *t, uint64_t n, uint32_t stage)
{
    return t->config.zero_stage >= stage ? fsim_div_ceil(n, t->config.ranks) : n;
}

/*
 * A module's backward produced the gradient of parameter i: a tensor of its size in the compute
 * type (cast to fp32 first when gradients are kept in fp32 under mixed precision).  The first
 * one becomes the parameter's .grad; later ones are accumulated into it and freed.  Under ZeRO-2
 * and up the full gradient is reduce-scattered into the rank's partition and freed.
 */
static void
train_grad(Train *t, guint i)
{
    const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);
    const Dims *d = &t->dims;

    if (!t->trained[i])
        return;
    uint64_t n = numel(p);
    uint64_t tmp = train_alloc(t, n * d->e);
    if (d->e == 2 && d->gb == 4) {
        uint64_t wide = train_alloc(t, n * 4);
        train_free(t, tmp);
        tmp = wide;
    }
    if (t->config.zero_stage >= 2) {
        if (!t->grad[i])
            t->grad[i] = train_alloc(t, train_partition(t, n, 2) * d->gb);
        train_free(t, tmp);
    } else if (!t->grad[i]) {
        t->grad[i] = tmp;
    } else {
        train_free(t, tmp);
    }
}

/* The gradients of the tensors [@first, @last) of @module, base (@lora FALSE) or adapters. */
static void
train_wgrad_range(Train *t, guint first, guint last, FsimModule module, gboolean lora)
{
    for (guint i = first; i < last; i++) {
        const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);
        if (p->module == module && p->lora == lora)
            train_grad(t, i);
    }
}

/* The gradients of @module's base tensors (@lora FALSE) or adapters (@lora TRUE) in @layer. */
static void
train_wgrad(Train *t, uint32_t layer, FsimModule module, gboolean lora)
{
    if (layer == FSIM_NO_LAYER) {
        /* the globals before the layers (embeddings), then those after them */
        train_wgrad_range(t, 0, t->layer_first[0], module, lora);
        train_wgrad_range(t, t->globals_first, t->params->len, module, lora);
    } else {
        train_wgrad_range(t, t->layer_first[layer], t->layer_first[layer + 1], module, lora);
    }
}

/* Whether @layer's @module carries a LoRA adapter. */
static gboolean
train_has_lora(const Train *t, uint32_t layer, FsimModule module)
{
    if (!t->config.lora)
        return FALSE;
    for (guint i = t->layer_first[layer]; i < t->layer_first[layer + 1]; i++) {
        const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);
        if (p->lora && p->module == module)
            return TRUE;
    }
    return FALSE;
}

/* ---- Forward ----------------------------------------------------------------------------- */

/*
 * A linear layer's LoRA branch in forward: A·x (rank wide), kept for B's gradient; B·(A·x), added
 * to the base output in place and freed.
 */
static void
train_lora_fwd(Train *t, uint32_t layer, FsimModule module, uint64_t out_width, gboolean save)
{
    const Dims *d = &t->dims;
    if (!train_has_lora(t, layer, module))
        return;
    uint64_t ax = train_alloc(t, d->tokens * d->r * d->e);
    uint64_t bax = train_alloc(t, d->tokens * out_width * d->e);
    train_free(t, bax);
    if (save)
        *train_slot(t, layer, SLOT_LORA + module) = ax;
    else
        train_free(t, ax);
}

/* The LoRA branch in backward: the gradient of A·x, both adapters' gradients, the extra input
 * gradient (accumulated into the base one). */
static void
train_lora_bwd(Train *t, uint32_t layer, FsimModule module, uint64_t in_width)
{
    const Dims *d = &t->dims;
    if (!train_has_lora(t, layer, module))
        return;
    uint64_t dax = train_alloc(t, d->tokens * d->r * d->e);
    train_wgrad(t, layer, module, TRUE);
    uint64_t dx = train_alloc(t, d->tokens * in_width * d->e);
    train_free(t, dx);
    train_free(t, dax);
    train_drop(t, train_slot(t, layer, SLOT_LORA + module));
}

/* A linear layer's weight gradients in backward: the base weight's, then its LoRA branch's. */
static void
train_linear_bwd(Train *t, uint32_t layer, FsimModule module, uint64_t in_width)
{
    train_wgrad(t, layer, module, FALSE);
    train_lora_bwd(t, layer, module, in_width);
}

/* Sequence parallelism all-gathers a sequence-sharded input before a column-parallel matmul. */
static uint64_t
train_gather_seq(Train *t)
{
    const Dims *d = &t->dims;
    return t->config.sequence_parallel ? train_alloc(t, d->tokens * d->h * d->e) : 0;
}

/* The attention core (eager): scores, softmax, dropout, context.  Keeps probabilities, mask and
 * dropped probabilities in @layer's slots when @keep, else frees them once the context exists. */
static void
train_eager_core(Train *t, uint32_t layer, gboolean keep, uint64_t *ctx_out)
{
    const Dims *d = &t->dims;
    uint64_t scores = train_alloc(t, d->scores * d->e);
    uint64_t probs = train_alloc(t, d->scores * d->e);
    train_free(t, scores);
    uint64_t mask = 0, pdrop = 0;
    if (d->dropout) {
        mask = train_alloc(t, d->scores);
        pdrop = train_alloc(t, d->scores * d->e);
    }
    /* probabilities · V, in the heads layout, then merged into tokens × width */
    uint64_t ctx_heads = train_alloc(t, d->tokens * d->q * d->e);
    uint64_t ctx = ctx_out ? train_alloc(t, d->tokens * d->q * d->e) : 0;
    train_free(t, ctx_heads);
    if (keep) {
        *train_slot(t, layer, SLOT_PROBS) = probs;
        *train_slot(t, layer, SLOT_MASK) = mask;
        *train_slot(t, layer, SLOT_PDROP) = pdrop;
    } else {
        train_drop(t, &probs);
        train_drop(t, &mask);
        train_drop(t, &pdrop);
    }
    if (ctx_out)
        *ctx_out = ctx;
}

/*
 * One layer's forward from the residual stream @x_in.  Returns the output (0 under
 * FWD_RECOMPUTE, which frees it).  Under FWD_SAVE and FWD_RECOMPUTE the tensors autograd keeps go
 * to the layer's slots; under FWD_NOSAVE each is freed after its last use in forward.
 */
static uint64_t
train_layer_forward(Train *t, uint32_t layer, uint64_t x_in, FwdMode mode)
{
    const Dims *d = &t->dims;
    const FsimModelShape *m = &t->config.model;
    gboolean save = mode != FWD_NOSAVE;
    gboolean eager = t->config.attention == FSIM_ATTENTION_EAGER;
    uint64_t *slot = train_slot(t, layer, 0);

    if (t->config.zero_stage >= 3 && mode != FWD_RECOMPUTE)
        t->gathered = train_alloc(t, t->layer_weight_bytes[layer]);
    if (save)
        slot[SLOT_XIN] = x_in;

    /* attention block */
    uint64_t ln1 = train_alloc(t, d->rtok * d->h * d->e);
    uint64_t gath = train_gather_seq(t);
    uint64_t qkv = 0, q = 0, k = 0, v = 0;
    if (m->fused_qkv) {
        qkv = train_alloc(t, d->tokens * (d->q + 2 * d->kv) * d->e);
        train_lora_fwd(t, layer, FSIM_MOD_QKV, d->q + 2 * d->kv, save);
    } else {
        q = train_alloc(t, d->tokens * d->q * d->e);
        train_lora_fwd(t, layer, FSIM_MOD_Q, d->q, save);
        k = train_alloc(t, d->tokens * d->kv * d->e);
        train_lora_fwd(t, layer, FSIM_MOD_K, d->kv, save);
        v = train_alloc(t, d->tokens * d->kv * d->e);
        train_lora_fwd(t, layer, FSIM_MOD_V, d->kv, save);
    }
    train_drop(t, &gath);
    if (d->rotary) {
        /* rotary embedding makes new q and k; its backward needs only cos and sin, so the
         * inputs die here, except a fused output, which its v view keeps alive */
        uint64_t qr = train_alloc(t, d->tokens * d->q * d->e);
        uint64_t kr = train_alloc(t, d->tokens * d->kv * d->e);
        if (!m->fused_qkv) {
            train_free(t, q);
            train_free(t, k);
        }
        q = qr;
        k = kr;
    }
    if (!save)
        train_drop(t, &ln1);

    uint64_t out = 0, lse = 0;
    if (eager) {
        train_eager_core(t, layer, save && t->config.checkpointing != FSIM_CKPT_SELECTIVE, &out);
    } else {
        out = train_alloc(t, d->tokens * d->q * d->e);
        lse = train_alloc(t, d->b * d->heads * d->s * 4);
    }
    if (save) {
        slot[SLOT_LN1] = ln1;
        slot[SLOT_QKV] = qkv;
        slot[SLOT_Q] = q;
        slot[SLOT_K] = k;
        slot[SLOT_V] = v;
        slot[SLOT_LSE] = lse;
    } else {
        train_drop(t, &lse);
        train_drop(t, &qkv);
        train_drop(t, &q);
        train_drop(t, &k);
        train_drop(t, &v);
    }

    uint64_t proj = train_alloc(t, d->rtok * d->h * d->e);
    train_lora_fwd(t, layer, FSIM_MOD_O, d->h, save);
    if (save)
        slot[SLOT_ATTN_OUT] = out;
    else
        train_drop(t, &out);
    if (d->dropout) {
        uint64_t mask = train_alloc(t, d->rtok * d->h);
        uint64_t dropped = train_alloc(t, d->rtok * d->h * d->e);
        train_free(t, proj);
        proj = dropped;
        if (save)
            slot[SLOT_ATTN_MASK] = mask;
        else
            train_free(t, mask);
    }
    uint64_t x_mid = train_alloc(t, d->rtok * d->h * d->e);
    train_free(t, proj);

    /* MLP block */
    uint64_t ln2 = train_alloc(t, d->rtok * d->h * d->e);
    gath = train_gather_seq(t);
    uint64_t mlp_out;
    if (!m->gated_mlp) {
        uint64_t fc1 = train_alloc(t, d->tokens * d->f * d->e);
        train_lora_fwd(t, layer, FSIM_MOD_FC1, d->f, save);
        train_drop(t, &gath);
        if (!save)
            train_drop(t, &ln2);
        uint64_t act = train_alloc(t, d->tokens * d->f * d->e);
        if (!save)
            train_drop(t, &fc1);
        mlp_out = train_alloc(t, d->rtok * d->h * d->e);
        train_lora_fwd(t, layer, FSIM_MOD_FC2, d->h, save);
        if (save) {
            slot[SLOT_FC1] = fc1;
            slot[SLOT_ACT] = act;
        } else {
            train_free(t, act);
        }
    } else {
        uint64_t gate = 0, up = 0, gate_up = 0;
        if (m->fused_gate_up) {
            gate_up = train_alloc(t, d->tokens * 2 * d->f * d->e);
            train_lora_fwd(t, layer, FSIM_MOD_GATE_UP, 2 * d->f, save);
        } else {
            gate = train_alloc(t, d->tokens * d->f * d->e);
            train_lora_fwd(t, layer, FSIM_MOD_GATE, d->f, save);
            up = train_alloc(t, d->tokens * d->f * d->e);
            train_lora_fwd(t, layer, FSIM_MOD_UP, d->f, save);
        }
        train_drop(t, &gath);
        if (!save)
            train_drop(t, &ln2);
        uint64_t act = train_alloc(t, d->tokens * d->f * d->e);
        if (!save)
            train_drop(t, &gate);
        uint64_t prod = train_alloc(t, d->tokens * d->f * d->e);
        if (!save) {
            train_drop(t, &act);
            train_drop(t, &up);
            train_drop(t, &gate_up);
        }
        mlp_out = train_alloc(t, d->rtok * d->h * d->e);
        train_lora_fwd(t, layer, FSIM_MOD_DOWN, d->h, save);
        if (save) {
            slot[SLOT_GATE] = gate;
            slot[SLOT_UP] = up;
            slot[SLOT_GATE_UP] = gate_up;
            slot[SLOT_ACT] = act;
            slot[SLOT_PROD] = prod;
        } else {
            train_free(t, prod);
        }
    }
    if (save)
        slot[SLOT_LN2] = ln2;
    if (d->dropout) {
        uint64_t mask = train_alloc(t, d->rtok * d->h);
        uint64_t dropped = train_alloc(t, d->rtok * d->h * d->e);
        train_free(t, mlp_out);
        mlp_out = dropped;
        if (save)
            slot[SLOT_MLP_MASK] = mask;
        else
            train_free(t, mask);
    }
    uint64_t x_out = train_alloc(t, d->rtok * d->h * d->e);
    train_free(t, mlp_out);
    if (save)
        slot[SLOT_XMID] = x_mid;
    else
        train_free(t, x_mid);

    if (t->config.zero_stage >= 3 && mode != FWD_RECOMPUTE)
        train_drop(t, &t->gathered);
    if (mode == FWD_RECOMPUTE) {
        train_free(t, x_out);
        return 0;
    }
    return x_out;
}

/* ---- Backward ---------------------------------------------------------------------------- */

/* One layer's backward from @dy, the gradient of its output.  Returns the gradient of its
 * input; frees @dy and every tensor the layer saved. */
static uint64_t
train_layer_backward(Train *t, uint32_t layer, uint64_t dy)
{
    const Dims *d = &t->dims;
    const FsimModelShape *m = &t->config.model;
    gboolean eager = t->config.attention == FSIM_ATTENTION_EAGER;
    uint64_t *slot = train_slot(t, layer, 0);

    if (t->config.zero_stage >= 3)
        t->gathered = train_alloc(t, t->layer_weight_bytes[layer]);
    if (t->config.checkpointing == FSIM_CKPT_FULL)
        train_layer_forward(t, layer, t->ckpt[layer], FWD_RECOMPUTE);

    /* MLP */
    uint64_t g = dy;
    if (d->dropout) {
        g = train_alloc(t, d->rtok * d->h * d->e);
        train_drop(t, &slot[SLOT_MLP_MASK]);
    }
    uint64_t gath = train_gather_seq(t);
    uint64_t d_ln2;
    if (!m->gated_mlp) {
        uint64_t d_act = train_alloc(t, d->tokens * d->f * d->e);
        train_linear_bwd(t, layer, FSIM_MOD_FC2, d->f);
        train_drop(t, &slot[SLOT_ACT]);
        train_drop(t, &gath);
        if (g != dy)
            train_free(t, g);
        uint64_t d_fc1 = train_alloc(t, d->tokens * d->f * d->e);
        train_free(t, d_act);
        train_drop(t, &slot[SLOT_FC1]);
        d_ln2 = train_alloc(t, d->rtok * d->h * d->e);
        gath = train_gather_seq(t);
        train_linear_bwd(t, layer, FSIM_MOD_FC1, d->h);
        train_drop(t, &gath);
        train_free(t, d_fc1);
    } else {
        uint64_t d_prod = train_alloc(t, d->tokens * d->f * d->e);
        train_linear_bwd(t, layer, FSIM_MOD_DOWN, d->f);
        train_drop(t, &slot[SLOT_PROD]);
        train_drop(t, &gath);
        if (g != dy)
            train_free(t, g);
        uint64_t d_up = train_alloc(t, d->tokens * d->f * d->e);
        uint64_t d_act = train_alloc(t, d->tokens * d->f * d->e);
        train_free(t, d_prod);
        uint64_t d_gate = train_alloc(t, d->tokens * d->f * d->e);
        train_free(t, d_act);
        train_drop(t, &slot[SLOT_ACT]);
        gath = train_gather_seq(t);
        if (m->fused_gate_up) {
            /* chunk's backward concatenates the two halves */
            uint64_t d_gate_up = train_alloc(t, d->tokens * 2 * d->f * d->e);
            train_free(t, d_gate);
            train_free(t, d_up);
            train_drop(t, &slot[SLOT_GATE_UP]);
            d_ln2 = train_alloc(t, d->rtok * d->h * d->e);
            train_linear_bwd(t, layer, FSIM_MOD_GATE_UP, d->h);
            train_free(t, d_gate_up);
        } else {
            train_drop(t, &slot[SLOT_GATE]);
            train_drop(t, &slot[SLOT_UP]);
            d_ln2 = train_alloc(t, d->rtok * d->h * d->e);
            train_linear_bwd(t, layer, FSIM_MOD_GATE, d->h);
            train_linear_bwd(t, layer, FSIM_MOD_UP, d->h);
            train_free(t, d_gate);
            train_free(t, d_up);
        }
        train_drop(t, &gath);
    }
    train_drop(t, &slot[SLOT_LN2]);
    uint64_t d_xmid = train_alloc(t, d->rtok * d->h * d->e);
    train_wgrad(t, layer, FSIM_MOD_NORM2, FALSE);
    train_free(t, d_ln2);
    train_drop(t, &slot[SLOT_XMID]);
    /* the residual branch's gradient is accumulated into it in place */
    train_free(t, dy);

    /* attention */
    g = d_xmid;
    if (d->dropout) {
        g = train_alloc(t, d->rtok * d->h * d->e);
        train_drop(t, &slot[SLOT_ATTN_MASK]);
    }
    gath = train_gather_seq(t);
    uint64_t d_ctx = train_alloc(t, d->tokens * d->q * d->e);
    train_linear_bwd(t, layer, FSIM_MOD_O, d->q);
    train_drop(t, &gath);
    if (g != d_xmid)
        train_free(t, g);

    uint64_t dq, dk, dv;
    if (eager) {
        train_drop(t, &slot[SLOT_ATTN_OUT]);
        if (t->config.checkpointing == FSIM_CKPT_SELECTIVE)
            train_eager_core(t, layer, TRUE, NULL);
        uint64_t d_pdrop = train_alloc(t, d->scores * d->e);
        dv = train_alloc(t, d->tokens * d->kv * d->e);
        train_free(t, d_ctx);
        train_drop(t, &slot[SLOT_PDROP]);
        uint64_t d_probs = d_pdrop;
        if (d->dropout) {
            d_probs = train_alloc(t, d->scores * d->e);
            train_free(t, d_pdrop);
            train_drop(t, &slot[SLOT_MASK]);
        }
        uint64_t d_scores = train_alloc(t, d->scores * d->e);
        train_free(t, d_probs);
        train_drop(t, &slot[SLOT_PROBS]);
        dq = train_alloc(t, d->tokens * d->q * d->e);
        dk = train_alloc(t, d->tokens * d->kv * d->e);
        train_free(t, d_scores);
    } else {
        dq = train_alloc(t, d->tokens * d->q * d->e);
        dk = train_alloc(t, d->tokens * d->kv * d->e);
        dv = train_alloc(t, d->tokens * d->kv * d->e);
        /* FlashAttention-2's backward workspace: an fp32 dQ accumulator and the row sums */
        uint64_t acc = train_alloc(t, d->tokens * d->q * 4);
        uint64_t dsum = train_alloc(t, d->b * d->heads * d->s * 4);
        train_free(t, acc);
        train_free(t, dsum);
        train_free(t, d_ctx);
        train_drop(t, &slot[SLOT_ATTN_OUT]);
        train_drop(t, &slot[SLOT_LSE]);
    }
    if (d->rotary) {
        uint64_t dq_pre = train_alloc(t, d->tokens * d->q * d->e);
        train_free(t, dq);
        dq = dq_pre;
        uint64_t dk_pre = train_alloc(t, d->tokens * d->kv * d->e);
        train_free(t, dk);
        dk = dk_pre;
    }
    train_drop(t, &slot[SLOT_Q]);
    train_drop(t, &slot[SLOT_K]);
    train_drop(t, &slot[SLOT_V]);
    train_drop(t, &slot[SLOT_QKV]);
    gath = train_gather_seq(t);
    uint64_t d_ln1;
    if (m->fused_qkv) {
        uint64_t d_qkv = train_alloc(t, d->tokens * (d->q + 2 * d->kv) * d->e);
        train_free(t, dq);
        train_free(t, dk);
        train_free(t, dv);
        d_ln1 = train_alloc(t, d->rtok * d->h * d->e);
        train_linear_bwd(t, layer, FSIM_MOD_QKV, d->h);
        train_free(t, d_qkv);
    } else {
        d_ln1 = train_alloc(t, d->rtok * d->h * d->e);
        train_linear_bwd(t, layer, FSIM_MOD_Q, d->h);
        train_linear_bwd(t, layer, FSIM_MOD_K, d->h);
        train_linear_bwd(t, layer, FSIM_MOD_V, d->h);
        train_free(t, dq);
        train_free(t, dk);
        train_free(t, dv);
    }
    train_drop(t, &gath);
    train_drop(t, &slot[SLOT_LN1]);
    uint64_t d_xin = train_alloc(t, d->rtok * d->h * d->e);
    train_wgrad(t, layer, FSIM_MOD_NORM1, FALSE);
    train_free(t, d_ln1);
    if (t->config.checkpointing == FSIM_CKPT_FULL) {
        train_drop(t, &t->ckpt[layer]);
        slot[SLOT_XIN] = 0;
    } else {
        train_drop(t, &slot[SLOT_XIN]);
    }
    train_free(t, d_xmid);

    if (t->config.zero_stage >= 3)
        train_drop(t, &t->gathered);
    for (guint i = 0; i < SLOT_COUNT; i++)
        g_assert(slot[i] == 0); /* every saved tensor was freed */
    return d_xin;
}

/* ---- Embeddings and head ----------------------------------------------------------------- */

static void
train_embed_forward(Train *t)
{
    const Dims *d = &t->dims;
    if (t->config.zero_stage >= 3)
        t->gathered = train_alloc(t, t->embed_weight_bytes);
    uint64_t x = train_alloc(t, d->rtok * d->h * d->e);
    if (t->config.model.positions) {
        uint64_t pos = train_alloc(t, d->s * d->h * d->e);
        uint64_t sum = train_alloc(t, d->rtok * d->h * d->e);
        train_free(t, x);
        train_free(t, pos);
        x = sum;
    }
    if (d->dropout) {
        t->emb_mask = train_alloc(t, d->rtok * d->h);
        uint64_t dropped = train_alloc(t, d->rtok * d->h * d->e);
        train_free(t, x);
        x = dropped;
    }
    if (t->config.zero_stage >= 3)
        train_drop(t, &t->gathered);
    t->x = x;
}

static void
train_embed_backward(Train *t)
{
    const Dims *d = &t->dims;
    uint64_t g = t->dy;
    if (d->dropout) {
        g = train_alloc(t, d->rtok * d->h * d->e);
        train_drop(t, &t->emb_mask);
        train_free(t, t->dy);
    }
    /* the embedding's backward scatters into a dense gradient of the whole table */
    train_wgrad(t, FSIM_NO_LAYER, FSIM_MOD_EMBED, FALSE);
    train_wgrad(t, FSIM_NO_LAYER, FSIM_MOD_POS, FALSE);
    train_free(t, g);
    t->dy = 0;
}

static void
train_head_forward(Train *t)
{
    const Dims *d = &t->dims;
    if (t->config.zero_stage >= 3)
        t->gathered = train_alloc(t, t->head_weight_bytes);
    t->lnf_in = t->x;
    t->x = 0;
    t->lnf_out = train_alloc(t, d->rtok * d->h * d->e);
    uint64_t gath = train_gather_seq(t);
    /* cross-entropy in fp32 (vocabulary-parallel under tensor parallelism): the 16-bit logits,
     * their fp32 copy, and the log-softmax, which its backward keeps */
    uint64_t logits = train_alloc(t, d->tokens * d->v * d->e);
    train_drop(t, &gath);
    if (d->e != 4) {
        uint64_t wide = train_alloc(t, d->tokens * d->v * 4);
        train_free(t, logits);
        logits = wide;
    }
    t->logp = train_alloc(t, d->tokens * d->v * 4);
    train_free(t, logits);
    if (t->config.zero_stage >= 3)
        train_drop(t, &t->gathered);
}

static void
train_head_backward(Train *t)
{
    const Dims *d = &t->dims;
    uint64_t dlogp = train_alloc(t, d->tokens * d->v * 4);
    uint64_t dlogits = train_alloc(t, d->tokens * d->v * 4);
    train_free(t, dlogp);
    train_drop(t, &t->logp);
    if (d->e != 4) {
        uint64_t narrow = train_alloc(t, d->tokens * d->v * d->e);
        train_free(t, dlogits);
        dlogits = narrow;
    }
    if (t->config.zero_stage >= 3)
        t->gathered = train_alloc(t, t->head_weight_bytes);
    uint64_t gath = train_gather_seq(t);
    uint64_t d_lnf = train_alloc(t, d->rtok * d->h * d->e);
    train_wgrad(t, FSIM_NO_LAYER, t->config.model.tied_embeddings ? FSIM_MOD_EMBED : FSIM_MOD_HEAD,
                FALSE);
    train_drop(t, &gath);
    train_free(t, dlogits);
    train_drop(t, &t->lnf_out);
    t->dy = train_alloc(t, d->rtok * d->h * d->e);
    train_wgrad(t, FSIM_NO_LAYER, FSIM_MOD_NORM_FINAL, FALSE);
    train_free(t, d_lnf);
    train_drop(t, &t->lnf_in);
    if (t->config.zero_stage >= 3)
        train_drop(t, &t->gathered);
}

/* ---- Optimizer --------------------------------------------------------------------------- */

static void
train_opt_state(Train *t, guint i)
{
    const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);
    uint64_t n = train_partition(t, numel(p), 1);

    if (t->config.precision == FSIM_PRECISION_MIXED)
        train_alloc(t, n * 4); /* master weights */
    switch (t->config.optimizer) {
    case FSIM_OPTIMIZER_ADAMW:
        train_alloc(t, n * 4);
        train_alloc(t, n * 4);
        break;
    case FSIM_OPTIMIZER_ADAM8BIT:
        /* bitsandbytes keeps tensors under 4096 elements in 32-bit state */
        if (numel(p) >= 4096) {
            train_alloc(t, n);
            train_alloc(t, n);
            train_alloc(t, fsim_div_ceil(n, 2048) * 4);
            train_alloc(t, fsim_div_ceil(n, 2048) * 4);
        } else {
            train_alloc(t, n * 4);
            train_alloc(t, n * 4);
        }
        break;
    case FSIM_OPTIMIZER_SGD:
        train_alloc(t, n * 4);
        break;
    case FSIM_OPTIMIZER_ADAFACTOR:
        if (p->rows > 1 && p->cols > 1) {
            train_alloc(t, p->rows * 4);
            train_alloc(t, p->cols * 4);
        } else {
            train_alloc(t, n * 4);
        }
        break;
    }
}

/* The update of one tensor (fused, in place), with the temporaries it needs: the fp32 copy of a
 * 16-bit gradient, and Adafactor's squared gradient and update. */
static void
train_opt_update(Train *t, guint i)
{
    const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);
    uint64_t n = train_partition(t, numel(p), 1);
    uint64_t wide = 0;

    if (t->dims.e == 2 && t->dims.gb == 2 && t->config.optimizer != FSIM_OPTIMIZER_ADAM8BIT)
        wide = train_alloc(t, n * 4);
    if (t->config.optimizer == FSIM_OPTIMIZER_ADAFACTOR) {
        uint64_t sq = train_alloc(t, n * 4);
        uint64_t update = train_alloc(t, n * 4);
        train_free(t, sq);
        uint64_t scaled = train_alloc(t, n * 4);
        train_free(t, scaled);
        train_free(t, update);
    }
    train_drop(t, &wide);
}

/* ---- The program ------------------------------------------------------------------------- */

#define TRAIN_CHUNK 512 /* parameters per unit of the setup and optimizer phases */

/* Append the next unit's events; FALSE when the trace is complete. */
static gboolean
train_fill(Train *t)
{
    const FsimTrainConfig *c = &t->config;
    guint n_params = t->params->len;

    switch (t->phase) {
    case PHASE_WEIGHTS: {
        guint end = MIN(n_params, t->cursor + TRAIN_CHUNK);
        for (; t->cursor < end; t->cursor++) {
            const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, t->cursor);
            /* frozen weights are partitioned by ZeRO-3 just as trained ones */
            t->weight[t->cursor] = train_alloc(t, train_partition(t, numel(p), 3) * t->dims.we);
        }
        if (t->cursor == n_params) {
            t->cursor = 0;
            t->phase = PHASE_OPT_STATE;
        }
        return TRUE;
    }
    case PHASE_OPT_STATE: {
        guint end = MIN(n_params, t->cursor + TRAIN_CHUNK);
        for (; t->cursor < end; t->cursor++) {
            if (t->trained[t->cursor])
                train_opt_state(t, t->cursor);
        }
        if (t->cursor == n_params) {
            t->cursor = 0;
            t->step = 1;
            t->phase = PHASE_STEP_MARK;
        }
        return TRUE;
    }
    case PHASE_STEP_MARK: {
        g_snprintf(t->label, sizeof t->label, "step-%" G_GUINT64_FORMAT, t->step);
        Pending p = {.kind = FSIM_EV_MARK};
        g_array_append_val(t->pending, p);
        t->micro = 0;
        t->phase = PHASE_INPUTS;
        return TRUE;
    }
    case PHASE_INPUTS:
        t->ids = train_alloc(t, t->dims.tokens * 8);
        t->labels = train_alloc(t, t->dims.tokens * 8);
        t->phase = PHASE_EMBED_FWD;
        return TRUE;
    case PHASE_EMBED_FWD:
        train_embed_forward(t);
        t->layer = 0;
        t->phase = PHASE_LAYER_FWD;
        return TRUE;
    case PHASE_LAYER_FWD:
        if (c->checkpointing == FSIM_CKPT_FULL) {
            t->ckpt[t->layer] = t->x;
            t->x = train_layer_forward(t, t->layer, t->x, FWD_NOSAVE);
        } else {
            t->x = train_layer_forward(t, t->layer, t->x, FWD_SAVE);
        }
        if (++t->layer == c->model.layers)
            t->phase = PHASE_HEAD_FWD;
        return TRUE;
    case PHASE_HEAD_FWD:
        train_head_forward(t);
        t->phase = PHASE_HEAD_BWD;
        return TRUE;
    case PHASE_HEAD_BWD:
        train_head_backward(t);
        t->layer = c->model.layers;
        t->phase = PHASE_LAYER_BWD;
        return TRUE;
    case PHASE_LAYER_BWD:
        t->layer--;
        t->dy = train_layer_backward(t, t->layer, t->dy);
        if (t->layer == 0)
            t->phase = PHASE_EMBED_BWD;
        return TRUE;
    case PHASE_EMBED_BWD:
        train_embed_backward(t);
        t->phase = PHASE_MICRO_END;
        return TRUE;
    case PHASE_MICRO_END:
        train_drop(t, &t->ids);
        train_drop(t, &t->labels);
        if (++t->micro < c->grad_accum) {
            t->phase = PHASE_INPUTS;
        } else {
            t->cursor = 0;
            t->phase = PHASE_OPT_STEP;
        }
        return TRUE;
    case PHASE_OPT_STEP: {
        guint end = MIN(n_params, t->cursor + TRAIN_CHUNK);
        for (; t->cursor < end; t->cursor++) {
            if (t->trained[t->cursor])
                train_opt_update(t, t->cursor);
        }
        if (t->cursor == n_params) {
            t->cursor = 0;
            if (t->step++ == c->steps)
                t->phase = PHASE_DONE;
            else
                t->phase = PHASE_STEP_MARK;
        }
        return TRUE;
    }
    case PHASE_DONE:
        return FALSE;
    }
    g_assert_not_reached();
}

static gboolean
train_next(FsimSynth *synth, FsimEvent *ev, GError **error)
{
    Train *t = (Train *)synth;
    (void)error;

    while (t->pending_pos == t->pending->len) {
        g_array_set_size(t->pending, 0);
        t->pending_pos = 0;
        if (!train_fill(t))
            return FALSE;
    }
    const Pending *p = &g_array_index(t->pending, Pending, t->pending_pos++);
    memset(ev, 0, sizeof *ev);
    ev->kind = p->kind;
    ev->id = p->id;
    ev->size = p->size;
    ev->index = synth->events + 1;
    if (p->kind == FSIM_EV_MARK) {
        ev->label = t->label;
    } else {
        t->now += TRAIN_EVENT_NS;
    }
    ev->time = t->now;
    return TRUE;
}

static void
train_destroy(FsimSynth *synth)
{
    Train *t = (Train *)synth;
    g_clear_pointer(&t->params, g_array_unref);
    g_clear_pointer(&t->pending, g_array_unref);
    g_free(t->weight);
    g_free(t->grad);
    g_free(t->trained);
    g_free(t->layer_first);
    g_free(t->layer_weight_bytes);
    g_free(t->saved);
    g_free(t->ckpt);
}

static const FsimSynthClass train_class = {
    .name = "train",
    .next = train_next,
    .destroy = train_destroy,
};

FsimSynth *
fsim_synth_train_new(const FsimTrainConfig *config, GError **error)
{
    g_return_val_if_fail(config != NULL, NULL);
    if (!fsim_train_config_check(config, error))
        return NULL;

    Train *t = g_new0(Train, 1);
    const FsimModelShape *m = &config->model;
    uint64_t tp = config->tp;
    t->base.klass = &train_class;
    t->config = *config;

    Dims *d = &t->dims;
    gboolean mixed = config->precision == FSIM_PRECISION_MIXED;
    d->e = mixed ? 2 : 4;
    d->we = d->e;
    d->gb = mixed ? config->grad_bits / 8 : 4;
    d->s = config->seq;
    d->b = config->batch;
    d->tokens = d->s * d->b;
    d->rtok = config->sequence_parallel ? fsim_div_ceil(d->tokens, tp) : d->tokens;
    d->h = m->hidden;
    d->heads = m->heads / tp;
    d->q = d->heads * m->head_dim;
    d->kv = m->kv_heads / tp * m->head_dim;
    d->f = m->ffn / tp;
    d->v = fsim_div_ceil(m->vocab, tp);
    d->r = config->lora_rank;
    d->scores = d->b * d->heads * d->s * d->s;
    d->rotary = m->positions == 0;
    d->dropout = m->dropout;

    t->params = g_array_new(FALSE, FALSE, sizeof(FsimParamTensor));
    fsim_train_params(&t->config, t->params);
    guint n = t->params->len;
    t->weight = g_new0(uint64_t, n);
    t->grad = g_new0(uint64_t, n);
    t->trained = g_new0(gboolean, n);
    t->layer_first = g_new0(guint, (gsize)m->layers + 1);
    t->layer_weight_bytes = g_new0(uint64_t, m->layers);
    /* parameters come as: embeddings, layer 0, ..., layer L-1, final norm, head, remainder */
    for (guint l = 0; l <= m->layers; l++)
        t->layer_first[l] = G_MAXUINT;
    for (guint i = 0; i < n; i++) {
        const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);
        t->trained[i] = fsim_train_param_trainable(&t->config, p);
        uint64_t bytes = numel(p) * d->we;
        if (p->layer != FSIM_NO_LAYER) {
            if (t->layer_first[p->layer] == G_MAXUINT)
                t->layer_first[p->layer] = i;
            t->layer_first[p->layer + 1] = i + 1;
            t->layer_weight_bytes[p->layer] += bytes;
        } else if (p->module == FSIM_MOD_EMBED || p->module == FSIM_MOD_POS) {
            t->embed_weight_bytes += bytes;
            if (p->module == FSIM_MOD_EMBED && m->tied_embeddings)
                t->head_weight_bytes += bytes;
        } else if (p->module != FSIM_MOD_EXTRA) {
            t->head_weight_bytes += bytes;
        }
    }
    t->globals_first = t->layer_first[m->layers];
    t->saved = g_new0(uint64_t, (gsize)m->layers * SLOT_COUNT);
    t->ckpt = g_new0(uint64_t, m->layers);
    t->pending = g_array_sized_new(FALSE, FALSE, sizeof(Pending), 256);
    t->phase = PHASE_WEIGHTS;
    return &t->base;
}
