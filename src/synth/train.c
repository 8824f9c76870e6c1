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
#include "train.h"

#include <glib.h>

/* ---- The program ------------------------------------------------------------------------- */

#define TRAIN_CHUNK 512 /* parameters per unit of the setup and optimizer phases */

/* A parameter's weight, allocated at the start: frozen weights are partitioned by ZeRO-3 just as
 * trained ones. */
static void
weight_alloc(Train *t, guint i)
{
    const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);

    t->param[i].weight = train_alloc(t, fsim_train_partition(t, numel(p), 3) * t->dims.we);
}

/* Runs @each on the next chunk of parameters (the trained ones only when @trained_only).
 * Returns: TRUE when that chunk was the last (the cursor is back at the first parameter). */
static gboolean
train_param_chunk(Train *t, void (*each)(Train *t, guint i), gboolean trained_only)
{
    guint n_params = t->params->len;
    guint end = MIN(n_params, t->cursor + TRAIN_CHUNK);

    for (; t->cursor < end; t->cursor++) {
        if (!trained_only || t->param[t->cursor].trained)
            each(t, t->cursor);
    }
    if (t->cursor < n_params)
        return FALSE;
    t->cursor = 0;
    return TRUE;
}

/* Append the next unit's events; FALSE when the trace is complete.
 *
 * Longer than ~80 lines: one case per phase of a step, each a few lines, read together as the
 * step's program. */
static gboolean
train_fill(FsimSynth *synth)
{
    Train *t = (Train *)synth;
    const FsimTrainConfig *c = &t->config;

    switch (t->phase) {
    case PHASE_WEIGHTS:
        if (train_param_chunk(t, weight_alloc, FALSE))
            t->phase = PHASE_OPT_STATE;
        return TRUE;
    case PHASE_OPT_STATE:
        if (train_param_chunk(t, fsim_train_opt_state, TRUE)) {
            t->step = 1;
            t->phase = PHASE_STEP_MARK;
        }
        return TRUE;
    case PHASE_STEP_MARK: {
        g_snprintf(t->label, sizeof t->label, "step-%" G_GUINT64_FORMAT, t->step);
        fsim_synth_queue_push(&t->base.queue, FSIM_EV_MARK, 0, 0, t->label);
        t->micro = 0;
        t->phase = PHASE_EMBED_FWD;
        return TRUE;
    }
    case PHASE_EMBED_FWD:
        t->ids = train_alloc(t, t->dims.tokens * 8);
        t->labels = train_alloc(t, t->dims.tokens * 8);
        fsim_train_embed_forward(t);
        t->layer = 0;
        t->phase = PHASE_LAYER_FWD;
        return TRUE;
    case PHASE_LAYER_FWD:
        if (c->checkpointing == FSIM_CKPT_FULL) {
            t->ckpt[t->layer] = t->x;
            t->x = fsim_train_layer_forward(t, t->layer, t->x, FWD_NOSAVE);
        } else {
            t->x = fsim_train_layer_forward(t, t->layer, t->x, FWD_SAVE);
        }
        if (++t->layer == c->model.layers)
            t->phase = PHASE_HEAD;
        return TRUE;
    case PHASE_HEAD:
        fsim_train_head_forward(t);
        fsim_train_head_backward(t);
        t->layer = c->model.layers;
        t->phase = PHASE_LAYER_BWD;
        return TRUE;
    case PHASE_LAYER_BWD:
        t->layer--;
        t->dy = fsim_train_layer_backward(t, t->layer, t->dy);
        if (t->layer == 0)
            t->phase = PHASE_EMBED_BWD;
        return TRUE;
    case PHASE_EMBED_BWD:
        fsim_train_embed_backward(t);
        train_drop(t, &t->ids);
        train_drop(t, &t->labels);
        if (++t->micro < c->grad_accum) {
            t->phase = PHASE_EMBED_FWD;
        } else {
            t->cursor = 0;
            t->phase = PHASE_OPT_STEP;
        }
        return TRUE;
    case PHASE_OPT_STEP:
        if (train_param_chunk(t, fsim_train_opt_update, TRUE))
            t->phase = t->step++ == c->steps ? PHASE_DONE : PHASE_STEP_MARK;
        return TRUE;
    case PHASE_DONE:
        return FALSE;
    }
    g_assert_not_reached();
}

/* Events are a nominal TRAIN_EVENT_NS apart; a mark takes no time. */
static void
train_stamp(FsimSynth *synth, FsimEvent *ev)
{
    Train *t = (Train *)synth;

    if (ev->kind != FSIM_EV_MARK)
        t->now += TRAIN_EVENT_NS;
    ev->time = t->now;
}

static void
train_destroy(FsimSynth *synth)
{
    Train *t = (Train *)synth;
    g_clear_pointer(&t->params, g_array_unref);
    g_free(t->param);
    g_free(t->layer_first);
    g_free(t->layer_weight_bytes);
    g_free(t->saved);
    g_free(t->ckpt);
}

static const FsimSynthClass train_class = {
    .name = "train",
    .fill = train_fill,
    .stamp = train_stamp,
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
    t->param = g_new0(TrainParam, n);
    t->layer_first = g_new0(guint, (gsize)m->layers + 1);
    t->layer_weight_bytes = g_new0(uint64_t, m->layers);
    /* parameters come as: embeddings, layer 0, ..., layer L-1, final norm, head, remainder */
    for (guint l = 0; l <= m->layers; l++)
        t->layer_first[l] = G_MAXUINT;
    for (guint i = 0; i < n; i++) {
        const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);
        t->param[i].trained = fsim_train_param_trainable(&t->config, p);
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
    fsim_synth_queue_init(&t->base.queue, 256);
    t->phase = PHASE_WEIGHTS;
    return &t->base;
}
