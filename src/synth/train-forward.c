/* SPDX-License-Identifier: MIT */
/*
 * Training steps: the forward -- the embeddings, each transformer layer with every intermediate
 * tensor (freed at once or saved for backward, by activation checkpointing mode), the loss head.
 */
#include <glib.h>

#include "train.h"

/*
 * A linear layer's LoRA branch in forward: A·x (rank wide), kept for B's gradient; B·(A·x), added
 * to the base output in place and freed.
 */
static void
train_lora_fwd(Train *t, uint32_t layer, FsimModule module, uint64_t out_width, gboolean save)
{
    const Dims *d = &t->dims;
    if (!fsim_train_has_lora(t, layer, module))
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
    if (!fsim_train_has_lora(t, layer, module))
        return;
    uint64_t dax = train_alloc(t, d->tokens * d->r * d->e);
    fsim_train_wgrad(t, layer, module, TRUE);
    uint64_t dx = train_alloc(t, d->tokens * in_width * d->e);
    train_free(t, dx);
    train_free(t, dax);
    train_drop(t, train_slot(t, layer, SLOT_LORA + module));
}

/* A linear layer's weight gradients in backward: the base weight's, then its LoRA branch's. */
void
fsim_train_linear_bwd(Train *t, uint32_t layer, FsimModule module, uint64_t in_width)
{
    fsim_train_wgrad(t, layer, module, FALSE);
    train_lora_bwd(t, layer, module, in_width);
}

/* Sequence parallelism all-gathers a sequence-sharded input before a column-parallel matmul. */
uint64_t
fsim_train_gather_seq(Train *t)
{
    const Dims *d = &t->dims;
    return t->config.sequence_parallel ? train_alloc(t, d->tokens * d->h * d->e) : 0;
}

/* A tensor autograd may keep for backward: its slot in the layer's, and its id (0: none). */
typedef struct {
    guint slot;
    uint64_t id;
} Kept;

/* Under @keep, the @n tensors go to their slots of a layer's @slot; else each that exists is
 * freed, in this order. */
static void
keep_or_free(Train *t, gboolean keep, uint64_t *slot, const Kept *kept, guint n)
{
    for (guint i = 0; i < n; i++) {
        if (keep)
            slot[kept[i].slot] = kept[i].id;
        else if (kept[i].id != 0)
            train_free(t, kept[i].id);
    }
}

/* The attention core (eager): scores, softmax, dropout, context.  Keeps probabilities, mask and
 * dropped probabilities in @layer's slots when @keep, else frees them once the context exists. */
void
fsim_train_eager_core(Train *t, uint32_t layer, gboolean keep, uint64_t *ctx_out)
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
    const Kept kept[] = {{SLOT_PROBS, probs}, {SLOT_MASK, mask}, {SLOT_PDROP, pdrop}};
    keep_or_free(t, keep, train_slot(t, layer, 0), kept, G_N_ELEMENTS(kept));
    if (ctx_out)
        *ctx_out = ctx;
}

/* Dropout after a projection: the mask (saved, or freed at once) and the dropped copy; @x is
 * freed.  Returns the copy. */
static uint64_t
dropout_forward(Train *t, uint64_t x, gboolean save, uint64_t *mask_slot)
{
    const Dims *d = &t->dims;
    uint64_t mask = train_alloc(t, d->rtok * d->h);
    uint64_t dropped = train_alloc(t, d->rtok * d->h * d->e);

    train_free(t, x);
    if (save)
        *mask_slot = mask;
    else
        train_free(t, mask);
    return dropped;
}

/* A layer's attention block: norm, q/k/v (with LoRA), rotary, the attention core, the output
 * projection and its dropout.  Returns the residual stream after it. */
static uint64_t
attention_forward(Train *t, uint32_t layer, gboolean save, uint64_t *slot)
{
    const Dims *d = &t->dims;
    const FsimModelShape *m = &t->config.model;
    gboolean eager = t->config.attention == FSIM_ATTENTION_EAGER;
    uint64_t x_mid;

    uint64_t ln1 = train_alloc(t, d->rtok * d->h * d->e);
    uint64_t gath = fsim_train_gather_seq(t);
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
        fsim_train_eager_core(t, layer, save && t->config.checkpointing != FSIM_CKPT_SELECTIVE,
                              &out);
    } else {
        out = train_alloc(t, d->tokens * d->q * d->e);
        lse = train_alloc(t, d->b * d->heads * d->s * 4);
    }
    /* without saving, the norm's output is gone already */
    const Kept kept[] = {{SLOT_LSE, lse}, {SLOT_QKV, qkv}, {SLOT_Q, q},
                         {SLOT_K, k},     {SLOT_V, v},     {SLOT_LN1, ln1}};
    keep_or_free(t, save, slot, kept, G_N_ELEMENTS(kept));

    uint64_t proj = train_alloc(t, d->rtok * d->h * d->e);
    train_lora_fwd(t, layer, FSIM_MOD_O, d->h, save);
    if (save)
        slot[SLOT_ATTN_OUT] = out;
    else
        train_drop(t, &out);
    if (d->dropout)
        proj = dropout_forward(t, proj, save, &slot[SLOT_ATTN_MASK]);
    x_mid = train_alloc(t, d->rtok * d->h * d->e);
    train_free(t, proj);
    return x_mid;
}

/* The MLP's input projections are computed: the gathered sequence goes, and without saving the
 * norm's output *@ln2 too. */
static void
mlp_in_done(Train *t, gboolean save, uint64_t *ln2, uint64_t *gath)
{
    train_drop(t, gath);
    if (!save)
        train_drop(t, ln2);
}

/* The MLP's output projection (fc2, or down, with LoRA); returns its output. */
static uint64_t
mlp_out_forward(Train *t, uint32_t layer, FsimModule module, gboolean save)
{
    const Dims *d = &t->dims;
    uint64_t out = train_alloc(t, d->rtok * d->h * d->e);

    train_lora_fwd(t, layer, module, d->h, save);
    return out;
}

/* A plain MLP: fc1, the activation, fc2 (with LoRA).  Frees *@ln2 and *@gath when they are no
 * longer needed.  Returns fc2's output. */
static uint64_t
mlp_plain_forward(Train *t, uint32_t layer, gboolean save, uint64_t *slot, uint64_t *ln2,
                  uint64_t *gath)
{
    const Dims *d = &t->dims;
    uint64_t mlp_out;

    uint64_t fc1 = train_alloc(t, d->tokens * d->f * d->e);
    train_lora_fwd(t, layer, FSIM_MOD_FC1, d->f, save);
    mlp_in_done(t, save, ln2, gath);
    uint64_t act = train_alloc(t, d->tokens * d->f * d->e);
    if (!save)
        train_drop(t, &fc1);
    mlp_out = mlp_out_forward(t, layer, FSIM_MOD_FC2, save);
    const Kept kept[] = {{SLOT_FC1, fc1}, {SLOT_ACT, act}}; /* without saving, fc1 is gone */
    keep_or_free(t, save, slot, kept, G_N_ELEMENTS(kept));
    return mlp_out;
}

/* A gated MLP (SwiGLU): gate and up (fused or not), the activation, their product, down (with
 * LoRA).  Frees *@ln2 and *@gath when they are no longer needed.  Returns down's output. */
static uint64_t
mlp_gated_forward(Train *t, uint32_t layer, gboolean save, uint64_t *slot, uint64_t *ln2,
                  uint64_t *gath)
{
    const Dims *d = &t->dims;
    const FsimModelShape *m = &t->config.model;
    uint64_t mlp_out;

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
    mlp_in_done(t, save, ln2, gath);
    uint64_t act = train_alloc(t, d->tokens * d->f * d->e);
    if (!save)
        train_drop(t, &gate);
    uint64_t prod = train_alloc(t, d->tokens * d->f * d->e);
    if (!save) {
        train_drop(t, &act);
        train_drop(t, &up);
        train_drop(t, &gate_up);
    }
    mlp_out = mlp_out_forward(t, layer, FSIM_MOD_DOWN, save);
    /* without saving, only the product is left */
    const Kept kept[] = {{SLOT_GATE, gate},
                         {SLOT_UP, up},
                         {SLOT_GATE_UP, gate_up},
                         {SLOT_ACT, act},
                         {SLOT_PROD, prod}};
    keep_or_free(t, save, slot, kept, G_N_ELEMENTS(kept));
    return mlp_out;
}

/*
 * One layer's forward from the residual stream @x_in.  Returns the output (0 under
 * FWD_RECOMPUTE, which frees it).  Under FWD_SAVE and FWD_RECOMPUTE the tensors autograd keeps go
 * to the layer's slots; under FWD_NOSAVE each is freed after its last use in forward.
 */
uint64_t
fsim_train_layer_forward(Train *t, uint32_t layer, uint64_t x_in, FwdMode mode)
{
    const Dims *d = &t->dims;
    const FsimModelShape *m = &t->config.model;
    gboolean save = mode != FWD_NOSAVE;
    uint64_t *slot = train_slot(t, layer, 0);

    if (t->config.zero_stage >= 3 && mode != FWD_RECOMPUTE)
        t->gathered = train_alloc(t, t->layer_weight_bytes[layer]);
    if (save)
        slot[SLOT_XIN] = x_in;

    /* attention block */
    uint64_t x_mid = attention_forward(t, layer, save, slot);

    /* MLP block */
    uint64_t ln2 = train_alloc(t, d->rtok * d->h * d->e);
    uint64_t gath = fsim_train_gather_seq(t);
    uint64_t mlp_out = m->gated_mlp ? mlp_gated_forward(t, layer, save, slot, &ln2, &gath)
                                    : mlp_plain_forward(t, layer, save, slot, &ln2, &gath);
    if (save)
        slot[SLOT_LN2] = ln2;
    if (d->dropout)
        mlp_out = dropout_forward(t, mlp_out, save, &slot[SLOT_MLP_MASK]);
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

void
fsim_train_embed_forward(Train *t)
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

void
fsim_train_head_forward(Train *t)
{
    const Dims *d = &t->dims;
    if (t->config.zero_stage >= 3)
        t->gathered = train_alloc(t, t->head_weight_bytes);
    t->lnf_in = t->x;
    t->x = 0;
    t->lnf_out = train_alloc(t, d->rtok * d->h * d->e);
    uint64_t gath = fsim_train_gather_seq(t);
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
