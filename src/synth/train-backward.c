/* SPDX-License-Identifier: MIT */
/*
 * Training steps: the backward in reverse -- the loss head, each layer (saved tensors freed as
 * soon as the last gradient that needs them is computed, weight gradients as each module
 * produces them), the embeddings.
 */
#include <glib.h>

#include "train.h"

/* The MLP's output projection backward (fc2, or down) from @g, the gradient of its output: the
 * gradient of its input (returned), then its saved input *@saved and the gathered sequence
 * dropped, and @g freed unless it is @dy itself. */
static uint64_t
mlp_out_backward(Train *t, uint32_t layer, FsimModule module, uint64_t *saved, uint64_t dy,
                 uint64_t g, uint64_t *gath)
{
    const Dims *d = &t->dims;
    uint64_t d_in = train_alloc(t, d->tokens * d->f * d->e);

    fsim_train_linear_bwd(t, layer, module, d->f);
    train_drop(t, saved);
    train_drop(t, gath);
    if (g != dy)
        train_free(t, g);
    return d_in;
}

/* A plain MLP's backward, from @g (the gradient of its output; @dy's dropout copy or @dy
 * itself): fc2, the activation, fc1.  Returns the gradient of its input norm's output. */
static uint64_t
mlp_plain_backward(Train *t, uint32_t layer, uint64_t dy, uint64_t g, uint64_t *gath)
{
    const Dims *d = &t->dims;
    uint64_t *slot = train_slot(t, layer, 0);
    uint64_t d_ln2;

    uint64_t d_act = mlp_out_backward(t, layer, FSIM_MOD_FC2, &slot[SLOT_ACT], dy, g, gath);
    uint64_t d_fc1 = train_alloc(t, d->tokens * d->f * d->e);
    train_free(t, d_act);
    train_drop(t, &slot[SLOT_FC1]);
    d_ln2 = train_alloc(t, d->rtok * d->h * d->e);
    *gath = fsim_train_gather_seq(t);
    fsim_train_linear_bwd(t, layer, FSIM_MOD_FC1, d->h);
    train_drop(t, gath);
    train_free(t, d_fc1);
    return d_ln2;
}

/* A gated MLP's backward, from @g: down, the product, the activation, gate and up (fused or not).
 * Returns the gradient of its input norm's output. */
static uint64_t
mlp_gated_backward(Train *t, uint32_t layer, uint64_t dy, uint64_t g, uint64_t *gath)
{
    const Dims *d = &t->dims;
    const FsimModelShape *m = &t->config.model;
    uint64_t *slot = train_slot(t, layer, 0);
    uint64_t d_ln2;

    uint64_t d_prod = mlp_out_backward(t, layer, FSIM_MOD_DOWN, &slot[SLOT_PROD], dy, g, gath);
    uint64_t d_up = train_alloc(t, d->tokens * d->f * d->e);
    uint64_t d_act = train_alloc(t, d->tokens * d->f * d->e);
    train_free(t, d_prod);
    uint64_t d_gate = train_alloc(t, d->tokens * d->f * d->e);
    train_free(t, d_act);
    train_drop(t, &slot[SLOT_ACT]);
    *gath = fsim_train_gather_seq(t);
    if (m->fused_gate_up) {
        /* chunk's backward concatenates the two halves */
        uint64_t d_gate_up = train_alloc(t, d->tokens * 2 * d->f * d->e);
        train_free(t, d_gate);
        train_free(t, d_up);
        train_drop(t, &slot[SLOT_GATE_UP]);
        d_ln2 = train_alloc(t, d->rtok * d->h * d->e);
        fsim_train_linear_bwd(t, layer, FSIM_MOD_GATE_UP, d->h);
        train_free(t, d_gate_up);
    } else {
        train_drop(t, &slot[SLOT_GATE]);
        train_drop(t, &slot[SLOT_UP]);
        d_ln2 = train_alloc(t, d->rtok * d->h * d->e);
        fsim_train_linear_bwd(t, layer, FSIM_MOD_GATE, d->h);
        fsim_train_linear_bwd(t, layer, FSIM_MOD_UP, d->h);
        train_free(t, d_gate);
        train_free(t, d_up);
    }
    train_drop(t, gath);
    return d_ln2;
}

/* A layer's MLP block backward from @dy, the gradient of the layer's output (freed).  Returns the
 * gradient of the residual stream between the blocks. */
static uint64_t
mlp_backward(Train *t, uint32_t layer, uint64_t dy)
{
    const Dims *d = &t->dims;
    const FsimModelShape *m = &t->config.model;
    uint64_t *slot = train_slot(t, layer, 0);

    uint64_t g = dy;
    if (d->dropout) {
        g = train_alloc(t, d->rtok * d->h * d->e);
        train_drop(t, &slot[SLOT_MLP_MASK]);
    }
    uint64_t gath = fsim_train_gather_seq(t);
    uint64_t d_ln2;
    if (!m->gated_mlp)
        d_ln2 = mlp_plain_backward(t, layer, dy, g, &gath);
    else
        d_ln2 = mlp_gated_backward(t, layer, dy, g, &gath);
    train_drop(t, &slot[SLOT_LN2]);
    uint64_t d_xmid = train_alloc(t, d->rtok * d->h * d->e);
    fsim_train_wgrad(t, layer, FSIM_MOD_NORM2, FALSE);
    train_free(t, d_ln2);
    train_drop(t, &slot[SLOT_XMID]);
    /* the residual branch's gradient is accumulated into it in place */
    train_free(t, dy);
    return d_xmid;
}

/* The attention core's backward from @d_ctx (freed): eager (through the saved probabilities) or
 * FlashAttention-2 (recomputing them).  Returns the gradients of q, k and v. */
static void
core_backward(Train *t, uint32_t layer, uint64_t d_ctx, uint64_t *dq_out, uint64_t *dk_out,
              uint64_t *dv_out)
{
    const Dims *d = &t->dims;
    gboolean eager = t->config.attention == FSIM_ATTENTION_EAGER;
    uint64_t *slot = train_slot(t, layer, 0);
    uint64_t dq, dk, dv;

    if (eager) {
        train_drop(t, &slot[SLOT_ATTN_OUT]);
        if (t->config.checkpointing == FSIM_CKPT_SELECTIVE)
            fsim_train_eager_core(t, layer, TRUE, NULL);
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
    *dq_out = dq;
    *dk_out = dk;
    *dv_out = dv;
}

/* One layer's backward from @dy, the gradient of its output.  Returns the gradient of its
 * input; frees @dy and every tensor the layer saved. */
uint64_t
fsim_train_layer_backward(Train *t, uint32_t layer, uint64_t dy)
{
    const Dims *d = &t->dims;
    const FsimModelShape *m = &t->config.model;
    uint64_t *slot = train_slot(t, layer, 0);

    if (t->config.zero_stage >= 3)
        t->gathered = train_alloc(t, t->layer_weight_bytes[layer]);
    if (t->config.checkpointing == FSIM_CKPT_FULL)
        fsim_train_layer_forward(t, layer, t->ckpt[layer], FWD_RECOMPUTE);

    uint64_t d_xmid = mlp_backward(t, layer, dy);

    /* attention */
    uint64_t g = d_xmid;
    if (d->dropout) {
        g = train_alloc(t, d->rtok * d->h * d->e);
        train_drop(t, &slot[SLOT_ATTN_MASK]);
    }
    uint64_t gath = fsim_train_gather_seq(t);
    uint64_t d_ctx = train_alloc(t, d->tokens * d->q * d->e);
    fsim_train_linear_bwd(t, layer, FSIM_MOD_O, d->q);
    train_drop(t, &gath);
    if (g != d_xmid)
        train_free(t, g);

    uint64_t dq, dk, dv;
    core_backward(t, layer, d_ctx, &dq, &dk, &dv);
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
    gath = fsim_train_gather_seq(t);
    uint64_t d_ln1;
    if (m->fused_qkv) {
        uint64_t d_qkv = train_alloc(t, d->tokens * (d->q + 2 * d->kv) * d->e);
        train_free(t, dq);
        train_free(t, dk);
        train_free(t, dv);
        d_ln1 = train_alloc(t, d->rtok * d->h * d->e);
        fsim_train_linear_bwd(t, layer, FSIM_MOD_QKV, d->h);
        train_free(t, d_qkv);
    } else {
        d_ln1 = train_alloc(t, d->rtok * d->h * d->e);
        fsim_train_linear_bwd(t, layer, FSIM_MOD_Q, d->h);
        fsim_train_linear_bwd(t, layer, FSIM_MOD_K, d->h);
        fsim_train_linear_bwd(t, layer, FSIM_MOD_V, d->h);
        train_free(t, dq);
        train_free(t, dk);
        train_free(t, dv);
    }
    train_drop(t, &gath);
    train_drop(t, &slot[SLOT_LN1]);
    uint64_t d_xin = train_alloc(t, d->rtok * d->h * d->e);
    fsim_train_wgrad(t, layer, FSIM_MOD_NORM1, FALSE);
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

void
fsim_train_embed_backward(Train *t)
{
    const Dims *d = &t->dims;
    uint64_t g = t->dy;
    if (d->dropout) {
        g = train_alloc(t, d->rtok * d->h * d->e);
        train_drop(t, &t->emb_mask);
        train_free(t, t->dy);
    }
    /* the embedding's backward scatters into a dense gradient of the whole table */
    fsim_train_wgrad(t, FSIM_NO_LAYER, FSIM_MOD_EMBED, FALSE);
    fsim_train_wgrad(t, FSIM_NO_LAYER, FSIM_MOD_POS, FALSE);
    train_free(t, g);
    t->dy = 0;
}

void
fsim_train_head_backward(Train *t)
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
    uint64_t gath = fsim_train_gather_seq(t);
    uint64_t d_lnf = train_alloc(t, d->rtok * d->h * d->e);
    fsim_train_wgrad(t, FSIM_NO_LAYER,
                     t->config.model.tied_embeddings ? FSIM_MOD_EMBED : FSIM_MOD_HEAD, FALSE);
    train_drop(t, &gath);
    train_free(t, dlogits);
    train_drop(t, &t->lnf_out);
    t->dy = train_alloc(t, d->rtok * d->h * d->e);
    fsim_train_wgrad(t, FSIM_NO_LAYER, FSIM_MOD_NORM_FINAL, FALSE);
    train_free(t, d_lnf);
    train_drop(t, &t->lnf_in);
    if (t->config.zero_stage >= 3)
        train_drop(t, &t->gathered);
}
