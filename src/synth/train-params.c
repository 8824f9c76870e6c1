/* SPDX-License-Identifier: MIT */
/*
 * Training steps: the model state -- each parameter's partition under ZeRO, its gradient (made
 * by the first backward, accumulated by later ones), LoRA's modules -- and the optimizer's state
 * and step.
 */
#include <glib.h>

#include "train.h"

uint64_t
fsim_train_partition(const Train *t, uint64_t n, uint32_t stage)
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

    if (!t->param[i].trained)
        return;
    uint64_t n = numel(p);
    uint64_t tmp = train_alloc(t, n * d->e);
    if (d->e == 2 && d->gb == 4) {
        uint64_t wide = train_alloc(t, n * 4);
        train_free(t, tmp);
        tmp = wide;
    }
    if (t->config.zero_stage >= 2) {
        if (!t->param[i].grad)
            t->param[i].grad = train_alloc(t, fsim_train_partition(t, n, 2) * d->gb);
        train_free(t, tmp);
    } else if (!t->param[i].grad) {
        t->param[i].grad = tmp;
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
void
fsim_train_wgrad(Train *t, uint32_t layer, FsimModule module, gboolean lora)
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
gboolean
fsim_train_has_lora(const Train *t, uint32_t layer, FsimModule module)
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

/* ---- Optimizer --------------------------------------------------------------------------- */

void
fsim_train_opt_state(Train *t, guint i)
{
    const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);
    uint64_t n = fsim_train_partition(t, numel(p), 1);

    if (t->config.precision == FSIM_PRECISION_MIXED)
        train_alloc(t, n * 4); /* master weights */
    switch (t->config.optimizer) {
    case FSIM_OPTIMIZER_ADAMW:
        train_alloc(t, n * 4);
        train_alloc(t, n * 4);
        break;
    case FSIM_OPTIMIZER_ADAM8BIT:
        if (numel(p) >= FSIM_ADAM8BIT_MIN_NUMEL) {
            train_alloc(t, n);
            train_alloc(t, n);
            train_alloc(t, fsim_div_ceil(n, FSIM_ADAM8BIT_BLOCK) * 4);
            train_alloc(t, fsim_div_ceil(n, FSIM_ADAM8BIT_BLOCK) * 4);
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
void
fsim_train_opt_update(Train *t, guint i)
{
    const FsimParamTensor *p = &g_array_index(t->params, FsimParamTensor, i);
    uint64_t n = fsim_train_partition(t, numel(p), 1);
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
