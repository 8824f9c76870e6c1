/* SPDX-License-Identifier: MIT */
/*
 * The training-step generator's private header: the state of a generator and what its files
 * share.  train.c says what the generator models; the files are
 *
 *   train.c           the program: the phases of a step, one unit at a time, and the stream
 *   train-params.c    parameters, gradients and the optimizer's state and step
 *   train-forward.c   the forward: embeddings, each layer, the loss head
 *   train-backward.c  the backward: the head, each layer in reverse, the embeddings
 */
#pragma once

#include <glib.h>

#include <string.h>

#include "fragsim/event.h"
#include "fragsim/types.h"

#include "synth.h"

G_BEGIN_DECLS

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
    PHASE_EMBED_FWD, /* a micro-batch's inputs, then the embeddings' forward */
    PHASE_LAYER_FWD,
    PHASE_HEAD, /* the loss head's forward, then its backward */
    PHASE_LAYER_BWD,
    PHASE_EMBED_BWD, /* the embeddings' backward, then the end of the micro-batch */
    PHASE_OPT_STEP,
    PHASE_DONE,
} Phase;

typedef enum {
    FWD_SAVE,      /* a normal forward: keep what autograd saves */
    FWD_NOSAVE,    /* full checkpointing's forward: keep nothing but the output */
    FWD_RECOMPUTE, /* full checkpointing's recomputation in backward: keep, drop the output */
} FwdMode;

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

/* The state of one parameter tensor in the trace. */
typedef struct {
    uint64_t weight;  /* its weight's id */
    uint64_t grad;    /* its gradient's id, 0 until the first backward produced it */
    gboolean trained; /* has a gradient and optimizer state */
} TrainParam;

typedef struct {
    FsimSynth base;
    FsimTrainConfig config;
    Dims dims;

    GArray *params;     /* FsimParamTensor */
    TrainParam *param;  /* the state of each */
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

    uint64_t next_id;
    FsimTime now;
    char label[32];
} Train;

/* Time advances by a nominal microsecond per event: the trace's order matters, its clock only
 * spaces the events for plots. */
#define TRAIN_EVENT_NS 1000

static inline uint64_t
numel(const FsimParamTensor *p)
{
    return p->rows * p->cols;
}

static inline uint64_t
train_alloc(Train *t, uint64_t size)
{
    g_assert(size > 0);
    fsim_synth_queue_push(&t->base.queue, FSIM_EV_ALLOC, ++t->next_id, size, NULL);
    return t->next_id;
}

static inline void
train_free(Train *t, uint64_t id)
{
    g_assert(id != 0);
    fsim_synth_queue_push(&t->base.queue, FSIM_EV_FREE, id, 0, NULL);
}

/* Free *id when set, and clear it. */
static inline void
train_drop(Train *t, uint64_t *id)
{
    if (*id) {
        train_free(t, *id);
        *id = 0;
    }
}

static inline uint64_t *
train_slot(Train *t, uint32_t layer, guint slot)
{
    return &t->saved[(gsize)layer * SLOT_COUNT + slot];
}

/* ---- train-params.c -------------------------------------------------------------------------- */

/* The gradients of @module's base tensors (@lora FALSE) or adapters (@lora TRUE) in @layer. */
void fsim_train_wgrad(Train *t, uint32_t layer, FsimModule module, gboolean lora);

/* The optimizer state of trained parameter @i (a partition under ZeRO-1 and up). */
void fsim_train_opt_state(Train *t, guint i);

/* The share of @n bytes one rank holds when ZeRO partitions at @stage or above. */
uint64_t fsim_train_partition(const Train *t, uint64_t n, uint32_t stage);

/* Whether @layer's @module carries a LoRA adapter. */
gboolean fsim_train_has_lora(const Train *t, uint32_t layer, FsimModule module);

/* The update of one tensor (fused, in place), with the temporaries it needs: the fp32 copy of a
 * 16-bit gradient, and Adafactor's squared gradient and update. */
void fsim_train_opt_update(Train *t, guint i);

/* ---- train-forward.c ------------------------------------------------------------------------- */

/* The attention core (eager): scores, softmax, dropout, context.  Keeps probabilities, mask and
 * dropped probabilities in @layer's slots when @keep, else frees them once the context exists. */
void fsim_train_eager_core(Train *t, uint32_t layer, gboolean keep, uint64_t *ctx_out);

/*
 * One layer's forward from the residual stream @x_in.  Returns the output (0 under
 * FWD_RECOMPUTE, which frees it).  Under FWD_SAVE and FWD_RECOMPUTE the tensors autograd keeps go
 * to the layer's slots; under FWD_NOSAVE each is freed after its last use in forward.
 */
uint64_t fsim_train_layer_forward(Train *t, uint32_t layer, uint64_t x_in, FwdMode mode);

/* The final norm, the logits and the loss (log-softmax kept for backward). */
void fsim_train_head_forward(Train *t);

/* The embedding lookup (and its dropout): the residual stream's first value. */
void fsim_train_embed_forward(Train *t);

/* A linear layer's weight gradients in backward: the base weight's, then its LoRA branch's. */
void fsim_train_linear_bwd(Train *t, uint32_t layer, FsimModule module, uint64_t in_width);

/* Sequence parallelism all-gathers a sequence-sharded input before a column-parallel matmul. */
uint64_t fsim_train_gather_seq(Train *t);

/* ---- train-backward.c ------------------------------------------------------------------------ */

/* One layer's backward from @dy, the gradient of its output.  Returns the gradient of its
 * input; frees @dy and every tensor the layer saved. */
uint64_t fsim_train_layer_backward(Train *t, uint32_t layer, uint64_t dy);

/* The embedding's backward: its weight gradient; the stream's gradient is freed. */
void fsim_train_embed_backward(Train *t);

/* The loss head's backward: from the logits' gradient to the stream's. */
void fsim_train_head_backward(Train *t);

G_END_DECLS
