/* SPDX-License-Identifier: MIT */
/*
 * fragsim: synthetic traces (private to the library, the CLI and the tests).
 *
 * Three generators produce the input events of a run without a recorded trace:
 *
 *   - train: the allocations of transformer training steps, from a model shape (a preset, an
 *     explicit shape or a parameter count) and a training configuration (#FsimTrainConfig);
 *   - serve: an LLM inference server's weights and KV cache under Poisson arrivals and
 *     continuous batching (#FsimServeConfig);
 *   - random: seeded size and lifetime distributions for stress tests (#FsimRandomConfig).
 *
 * Every generator is an #FsimSynth: a pull iterator of #FsimEvent in time order, which never
 * holds the trace in memory (its state grows with the model's depth or the number of live
 * requests, not with the number of steps or events).  fsim_synth_write() streams one into a text
 * trace; `fragsim fit` pushes the events straight into engines.
 *
 * The closed-form estimate of the same training configuration (fsim_estimate_train()) is
 * independent of the generator: the tests check one against the other.  docs/synth.md states
 * every convention and formula.
 */
#pragma once

#include <glib.h>

#include "fragsim/event.h"
#include "fragsim/types.h"

#include "core/heap.h"

G_BEGIN_DECLS

/* ⌈@a / @b⌉, for @b > 0: shards, tiles and the like, where the last one may be partial. */
static inline uint64_t
fsim_div_ceil(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

/* bitsandbytes' 8-bit Adam (blockwise Optimizer2State): a tensor of at least
 * FSIM_ADAM8BIT_MIN_NUMEL elements keeps uint8 states, each with one fp32 absmax per block of
 * FSIM_ADAM8BIT_BLOCK elements; a smaller one keeps fp32 states.  The generator and the estimate
 * both use these. */
#define FSIM_ADAM8BIT_BLOCK     2048
#define FSIM_ADAM8BIT_MIN_NUMEL 4096

/* ---- Model shapes ------------------------------------------------------------------------ */

typedef enum {
    FSIM_NORM_LAYERNORM = 0, /* weight and bias; saves its input */
    FSIM_NORM_RMSNORM,       /* weight only */
} FsimNormKind;

/**
 * FsimModelShape:
 * @name: preset name (`llama2-7b`), `custom` for explicit shapes, `params` for a shape derived
 *     from a parameter count.
 * @description: a human description with the source of the shape.
 * @layers, @hidden, @heads, @kv_heads, @head_dim, @ffn, @vocab: the transformer's dimensions
 *     (@kv_heads < @heads is grouped-query attention; @head_dim is usually @hidden / @heads).
 * @positions: learned position embeddings (GPT-2) of this many positions; 0 for rotary ones.
 * @gated_mlp: SwiGLU MLP (gate, up, down: three matrices) instead of fc1, GELU, fc2.
 * @fused_qkv: one QKV projection (GPT-2's c_attn, Phi-3's qkv_proj) instead of three.
 * @fused_gate_up: one gate+up projection (Phi-3's gate_up_proj).
 * @tied_embeddings: the output projection is the input embedding.
 * @bias: linear layers have biases.
 * @dropout: dropout after attention probabilities, the attention output, the MLP output and the
 *     embeddings (GPT-2 trains with 0.1; Llama-family models have none).
 * @norm: LayerNorm or RMSNorm.
 * @extra_params: parameters outside the transformer's tensors; only a shape derived from
 *     `--params N` has some, so that its count is exactly N.
 */
typedef struct {
    char name[32];
    char description[96];
    uint32_t layers;
    uint32_t hidden;
    uint32_t heads;
    uint32_t kv_heads;
    uint32_t head_dim;
    uint32_t ffn;
    uint32_t vocab;
    uint32_t positions;
    gboolean gated_mlp;
    gboolean fused_qkv;
    gboolean fused_gate_up;
    gboolean tied_embeddings;
    gboolean bias;
    gboolean dropout;
    FsimNormKind norm;
    uint64_t extra_params;
} FsimModelShape;

/**
 * fsim_model_presets:
 * @n: (out): number of presets.
 *
 * Returns: (transfer none): the preset table (GPT-2 small to XL, Llama-2 7B/13B/70B, Llama-3 8B,
 * Mistral 7B, Phi-3-mini), in static storage, in the order `--list-models` prints them.
 */
const FsimModelShape *fsim_model_presets(gsize *n);

/* Returns: (nullable) (transfer none): the preset named @name (case-insensitive). */
const FsimModelShape *fsim_model_lookup(const char *name);

/* Returns: (transfer full): the preset names joined by ", ", for messages. */
char *fsim_model_names(void);

/**
 * fsim_model_shape_from_params:
 * @params: a parameter count, e.g. 7e9.
 * @out: (out): a Llama-style shape (head dim 128, hidden = 128 · layers, SwiGLU, RMSNorm, a 32000
 *     vocabulary, untied) whose parameter count is exactly @params: the largest such shape whose
 *     FFN is at least 8/3 of the hidden size, its FFN then widened to use the parameters left,
 *     and the last few (fewer than 3 · layers · hidden) kept as @extra_params.
 * @error: FSIM_ERROR_USAGE when @params is too small for any such shape.
 */
gboolean fsim_model_shape_from_params(uint64_t params, FsimModelShape *out, GError **error);

/* Checks that the dimensions are non-zero and consistent (heads divisible by KV heads...). */
gboolean fsim_model_shape_check(const FsimModelShape *shape, GError **error);

/* Returns: the number of parameters of @shape (all of them, before any partitioning). */
uint64_t fsim_model_params(const FsimModelShape *shape);

/* Returns: (element-type FsimParamTensor): every parameter tensor of @shape, whole (no tensor
 * parallelism) and without adapters, in fsim_train_params()' order. */
GArray *fsim_model_tensors(const FsimModelShape *shape);

/**
 * FsimModule:
 *
 * The module a parameter belongs to: where its gradient is produced in backward, and what LoRA
 * can target.
 */
typedef enum {
    FSIM_MOD_EMBED = 0,
    FSIM_MOD_POS,
    FSIM_MOD_NORM1,
    FSIM_MOD_Q,
    FSIM_MOD_K,
    FSIM_MOD_V,
    FSIM_MOD_QKV, /* fused */
    FSIM_MOD_O,
    FSIM_MOD_NORM2,
    FSIM_MOD_FC1,     /* GELU MLP */
    FSIM_MOD_FC2,     /* GELU MLP */
    FSIM_MOD_GATE,    /* SwiGLU */
    FSIM_MOD_UP,      /* SwiGLU */
    FSIM_MOD_GATE_UP, /* SwiGLU, fused */
    FSIM_MOD_DOWN,    /* SwiGLU */
    FSIM_MOD_NORM_FINAL,
    FSIM_MOD_HEAD,  /* untied output projection */
    FSIM_MOD_EXTRA, /* --params remainder */
    FSIM_MOD_COUNT,
} FsimModule;

/**
 * FsimParamTensor:
 * @module: its module.
 * @layer: the layer, or %FSIM_NO_LAYER for embeddings, the final norm, the head, the remainder.
 * @rows, @cols: its shape (a vector has @cols 1); numel = rows · cols after tensor-parallel
 *     sharding.
 * @is_bias: a bias (or a norm's bias) rather than a weight.
 * @lora: a LoRA adapter matrix (A when @rows is the rank, B otherwise), trainable under LoRA.
 */
typedef struct {
    FsimModule module;
    uint32_t layer;
    uint64_t rows;
    uint64_t cols;
    gboolean is_bias;
    gboolean lora;
} FsimParamTensor;

#define FSIM_NO_LAYER G_MAXUINT32

/* ---- Training configuration -------------------------------------------------------------- */

typedef enum {
    FSIM_PRECISION_MIXED = 0, /* 16-bit compute and weights, fp32 master weights */
    FSIM_PRECISION_FP32,
} FsimPrecision;

typedef enum {
    FSIM_DTYPE_BF16 = 0,
    FSIM_DTYPE_FP16,
} FsimDtype;

typedef enum {
    FSIM_OPTIMIZER_ADAMW = 0,
    FSIM_OPTIMIZER_ADAM8BIT, /* bitsandbytes' blockwise 8-bit Adam */
    FSIM_OPTIMIZER_SGD,      /* with momentum */
    FSIM_OPTIMIZER_ADAFACTOR,
} FsimOptimizer;

typedef enum {
    FSIM_CKPT_NONE = 0,
    FSIM_CKPT_FULL,      /* every layer's input kept; the layer recomputed in backward */
    FSIM_CKPT_SELECTIVE, /* the attention core (s² tensors) recomputed (Korthikanti et al.) */
} FsimCheckpointing;

typedef enum {
    FSIM_ATTENTION_FLASH = 0, /* no s² score matrix is materialised */
    FSIM_ATTENTION_EAGER,     /* scores, probabilities (and their dropout) are */
} FsimAttention;

/* LoRA targets: a bit per module, FSIM_LORA_TARGET(FSIM_MOD_Q) | ... */
#define FSIM_LORA_TARGET(module)  (1u << (module))
#define FSIM_LORA_DEFAULT_TARGETS (FSIM_LORA_TARGET(FSIM_MOD_Q) | FSIM_LORA_TARGET(FSIM_MOD_V))

/**
 * FsimTrainConfig:
 * @model: the shape.
 * @seq: tokens per sequence.
 * @batch: sequences per micro-batch (per rank).
 * @steps: optimizer steps.
 * @grad_accum: micro-batches per step.
 * @precision: fp32, or mixed (16-bit weights, activations and compute, fp32 master weights).
 * @dtype: the 16-bit type of mixed precision (the same size either way).
 * @grad_bits: 16 or 32: the type of the persistent gradients under mixed precision (under fp32
 *     they are 32 bits either way).
 * @optimizer: the optimizer.
 * @checkpointing: activation checkpointing.
 * @attention: eager or flash attention.
 * @zero_stage: 0 (none) to 3; 1 partitions the optimizer state (master weights included),
 *     2 also the gradients, 3 also the 16-bit weights (FSDP full sharding) over @ranks.
 * @ranks: data-parallel ranks for ZeRO; the trace is that of one rank.
 * @tp: tensor-parallel degree (Megatron-style), 1 = none.
 * @sequence_parallel: with @tp, shard the LayerNorm and dropout regions along the sequence too.
 * @lora: train LoRA adapters only; the base weights are frozen.
 * @lora_rank: the adapters' rank.
 * @lora_targets: FSIM_LORA_TARGET() bits.
 * @activations_bytes: when non-zero, a measured activation figure that replaces the estimated
 *     activations and temporaries (fsim_estimate_train() only; the generator ignores it).
 */
typedef struct {
    FsimModelShape model;
    uint64_t seq;
    uint64_t batch;
    uint64_t steps;
    uint64_t grad_accum;
    FsimPrecision precision;
    FsimDtype dtype;
    uint32_t grad_bits;
    FsimOptimizer optimizer;
    FsimCheckpointing checkpointing;
    FsimAttention attention;
    uint32_t zero_stage;
    uint32_t ranks;
    uint32_t tp;
    gboolean sequence_parallel;
    gboolean lora;
    uint32_t lora_rank;
    uint32_t lora_targets;
    uint64_t activations_bytes;
} FsimTrainConfig;

/* The defaults: no model (set one), seq 2048, batch 1, 2 steps, no accumulation, mixed bf16,
 * 16-bit gradients, AdamW, no checkpointing, flash attention, no ZeRO, one rank, no tensor
 * parallelism, no LoRA (rank 16, targets q and v when enabled). */
void fsim_train_config_init(FsimTrainConfig *config);

/* Checks the configuration (FSIM_ERROR_USAGE naming the bad setting). */
gboolean fsim_train_config_check(const FsimTrainConfig *config, GError **error);

/* Returns: (transfer full): two or three lines describing the model and the training setup. */
char *fsim_train_config_describe(const FsimTrainConfig *config);

/* Names for the enums, as the command line spells them; and back (FALSE for an unknown one). */
const char *fsim_precision_name(FsimPrecision precision);
const char *fsim_dtype_name(FsimDtype dtype);
const char *fsim_optimizer_name(FsimOptimizer optimizer);
const char *fsim_checkpointing_name(FsimCheckpointing checkpointing);
const char *fsim_attention_name(FsimAttention attention);
const char *fsim_module_name(FsimModule module);
gboolean fsim_precision_from_name(const char *name, FsimPrecision *out);
gboolean fsim_dtype_from_name(const char *name, FsimDtype *out);
gboolean fsim_optimizer_from_name(const char *name, FsimOptimizer *out);
gboolean fsim_checkpointing_from_name(const char *name, FsimCheckpointing *out);
gboolean fsim_attention_from_name(const char *name, FsimAttention *out);
/* Parses a comma-separated target list (q,k,v,o,gate,up,down,fc1,fc2, or `all`). */
gboolean fsim_lora_targets_parse(const char *text, uint32_t *out, GError **error);

/**
 * fsim_train_params:
 * @config: a checked configuration.
 * @out: (out) (element-type FsimParamTensor): every parameter tensor of one rank, in creation
 *     order (embeddings, then layer by layer, then the final norm, the head, LoRA adapters after
 *     their layer's base tensors), tensor-parallel sharding applied, ZeRO partitioning not.
 *
 * Both the generator and the estimate enumerate parameters through this function.
 */
void fsim_train_params(const FsimTrainConfig *config, GArray *out);

/* Whether @p is trained (has a gradient and optimizer state) under @config. */
gboolean fsim_train_param_trainable(const FsimTrainConfig *config, const FsimParamTensor *p);

/* ---- Closed-form estimate ---------------------------------------------------------------- */

/**
 * FsimEstimate:
 * @params: all parameters of the model (before tensor-parallel sharding).
 * @trainable_params: those that are trained (the adapters only under LoRA).
 * @rank_params: parameters of one tensor-parallel rank.
 * @bytes_per_param: (weights + gradients + optimizer) / @rank_params.
 * @weights_bytes: the 16-bit (or fp32) weights one rank holds.
 * @gradients_bytes: the persistent gradients.
 * @optimizer_bytes: the optimizer's state, the fp32 master weights included (the convention of
 *     the ZeRO paper's K and of EleutherAI's "Transformer Math 101").
 * @master_bytes: the fp32 master weights (part of @optimizer_bytes).
 * @activations_bytes: the saved activations at their peak (the start of backward), with the
 *     recomputation working set under checkpointing; or the measured figure given.
 * @layer_activations_bytes: the activations one layer saves for backward.
 * @temporaries_bytes: the transient memory the peak holds beyond model state and saved
 *     activations (0 with a measured activation figure).
 * @total_bytes: the peak: weights + gradients + optimizer + activations + temporaries.
 * @peak_phase: where the peak falls: `loss backward`, `loss forward` (ZeRO-3), `output layer
 *     backward`, `recomputation`, `MLP backward`, `attention backward`, `optimizer step`, or
 *     `measured activations`; static.
 */
typedef struct {
    uint64_t params;
    uint64_t trainable_params;
    uint64_t rank_params;
    double bytes_per_param;
    uint64_t weights_bytes;
    uint64_t gradients_bytes;
    uint64_t optimizer_bytes;
    uint64_t master_bytes;
    uint64_t activations_bytes;
    uint64_t layer_activations_bytes;
    uint64_t temporaries_bytes;
    uint64_t total_bytes;
    const char *peak_phase;
} FsimEstimate;

/**
 * fsim_estimate_train:
 * @config: the configuration.
 * @out: (out): the estimate.
 * @error: FSIM_ERROR_USAGE for a bad configuration.
 *
 * Returns: %TRUE on success.
 */
gboolean fsim_estimate_train(const FsimTrainConfig *config, FsimEstimate *out, GError **error);

/**
 * fsim_estimate_layer_activations:
 *
 * The bytes one transformer layer saves for backward under @config's checkpointing, attention,
 * dropout and tensor parallelism: for a GPT-3-style layer in 16 bits without recomputation,
 * s·b·h·(34 + 5·a·s/h) (Korthikanti et al. 2022, eq. 1).
 */
uint64_t fsim_estimate_layer_activations(const FsimTrainConfig *config);

/* ---- Generators -------------------------------------------------------------------------- */

typedef struct FsimSynth FsimSynth;

/**
 * fsim_synth_next:
 * @synth: a generator.
 * @ev: (out): the next event; a MARK's label stays valid until the next call.
 * @error: set on failure.
 *
 * Returns: %TRUE with *ev filled; %FALSE at the end (error unset) or on failure (error set).
 */
gboolean fsim_synth_next(FsimSynth *synth, FsimEvent *ev, GError **error);

/* Events produced so far. */
uint64_t fsim_synth_events(const FsimSynth *synth);

/* Free a generator (NULL-safe). */
void fsim_synth_free(FsimSynth *synth);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimSynth, fsim_synth_free)

/**
 * fsim_synth_write:
 * @synth: a generator, drained by the call.
 * @path: the output trace (`fragsim-trace v1`; gzip-compressed when it ends in `.gz`).
 * @comment: (nullable): a comment for the header (may hold newlines: one comment line each).
 * @events: (out) (optional): the number of events written.
 *
 * Returns: %FALSE with @error when generating or writing fails (no partial file is left).
 */
gboolean fsim_synth_write(FsimSynth *synth, const char *path, const char *comment, uint64_t *events,
                          GError **error);

/* Returns: (transfer full) (nullable): the training generator for @config. */
FsimSynth *fsim_synth_train_new(const FsimTrainConfig *config, GError **error);

/* The length distributions of the serving generator. */
typedef enum {
    FSIM_DIST_FIXED = 0, /* a */
    FSIM_DIST_UNIFORM,   /* integers in [a, b] */
    FSIM_DIST_LOGNORMAL, /* median a, sigma b (of the underlying normal) */
    FSIM_DIST_HISTOGRAM, /* weighted values read from a file */
} FsimDistKind;

/**
 * FsimDist:
 *
 * A distribution of positive integers.  Parse with fsim_dist_parse(); free the histogram with
 * fsim_dist_clear().
 */
typedef struct {
    FsimDistKind kind;
    double a;
    double b;
    GArray *values;  /* histogram: uint64_t values */
    GArray *weights; /* histogram: double cumulative weights */
} FsimDist;

/**
 * fsim_dist_parse:
 * @text: `fixed:N`, `uniform:MIN:MAX`, `lognormal:MEDIAN:SIGMA` or `hist:FILE`; sizes in the
 *     first three accept size suffixes when @sizes is set.  A histogram file has one `VALUE
 *     WEIGHT` pair per line (`#` comments, blank lines).
 * @out: (out): the distribution.
 */
gboolean fsim_dist_parse(const char *text, gboolean sizes, FsimDist *out, GError **error);
void fsim_dist_clear(FsimDist *dist);
/* Draw from @dist (at least 1), clamped to [1, @max] when @max is non-zero. */
uint64_t fsim_dist_sample(const FsimDist *dist, GRand *rand, uint64_t max);

typedef enum {
    FSIM_KV_CONTIGUOUS_MAX = 0, /* reserved at the maximum length when admitted */
    FSIM_KV_CONTIGUOUS_GROW,    /* grown on demand, doubling, copied on each growth */
    FSIM_KV_PAGED,              /* blocks of block_tokens, allocated as needed (vLLM) */
} FsimKvLayout;

const char *fsim_kv_layout_name(FsimKvLayout layout);
gboolean fsim_kv_layout_from_name(const char *name, FsimKvLayout *out);

/**
 * FsimServeConfig:
 * @model: the shape; weights in 16 bits.
 * @requests: requests to serve.
 * @rate: Poisson arrival rate, requests per second.
 * @prompt, @output: length distributions (tokens; borrowed).
 * @max_len: the context limit: prompt + output is clamped to it; contiguous-max reserves it.
 * @max_batch: the most requests in one iteration (continuous batching).
 * @kv_budget_bytes: when non-zero, admit a request only while its KV reservation fits in it.
 * @layout: the KV layout.
 * @block_tokens: tokens per block (paged) or the growth granule (contiguous-grow).
 * @seed: the GRand seed.
 * @iteration_ns, @prefill_token_ns, @decode_seq_ns: the time model of one iteration:
 *     iteration_ns + prefill_token_ns · prompt tokens prefilled + decode_seq_ns · sequences.
 * @graph_batches: (nullable): CUDA graphs to capture after loading the weights, one per batch
 *     size, in this order, all into one shared private pool (pool 1) on stream 0, as vLLM and
 *     SGLang do: each capture runs a decode step of that many sequences whose workspace is freed
 *     inside the pool, except its output (the logits), which the graph keeps.  A decode
 *     iteration of at most the largest captured batch then replays a graph and allocates
 *     nothing; prefills and larger batches run eagerly in the default pool.  Borrowed.
 * @n_graph_batches: their number (0: no graphs).
 */
typedef struct {
    FsimModelShape model;
    uint64_t requests;
    double rate;
    const FsimDist *prompt;
    const FsimDist *output;
    uint64_t max_len;
    uint64_t max_batch;
    uint64_t kv_budget_bytes;
    FsimKvLayout layout;
    uint64_t block_tokens;
    uint64_t seed;
    uint64_t iteration_ns;
    uint64_t prefill_token_ns;
    uint64_t decode_seq_ns;
    const uint64_t *graph_batches;
    gsize n_graph_batches;
} FsimServeConfig;

/* Defaults: 200 requests at 5/s, max_len 2048, max_batch 32, paged in blocks of 16, seed 1,
 * 10 ms + 20 µs per prompt token + 50 µs per sequence an iteration.  @model, @prompt and
 * @output stay unset. */
void fsim_serve_config_init(FsimServeConfig *config);

/**
 * FsimServeStats:
 * @kv_bytes_per_token: 2 · layers · KV heads · head dim · 2 bytes.
 * @kv_reserved_token_seconds, @kv_used_token_seconds: the integrals over time of the token slots
 *     reserved and of those holding a token; waste = 1 − used / reserved.
 * @kv_waste: that fraction.
 * @peak_kv_reserved_bytes: the most KV memory reserved at once.
 * @kv_waste_at_peak: the waste when the reservation peaked.
 * @requests_done: requests completed.
 * @peak_batch: the largest batch.
 * @duration_ns: simulated time.
 */
typedef struct {
    uint64_t kv_bytes_per_token;
    double kv_reserved_token_seconds;
    double kv_used_token_seconds;
    double kv_waste;
    uint64_t peak_kv_reserved_bytes;
    double kv_waste_at_peak;
    uint64_t requests_done;
    uint64_t peak_batch;
    FsimTime duration_ns;
} FsimServeStats;

/* Returns: (transfer full) (nullable): the serving generator for @config. */
FsimSynth *fsim_synth_serve_new(const FsimServeConfig *config, GError **error);
/* The statistics so far (final once the generator has ended).  @synth must be a serve one. */
void fsim_synth_serve_stats(const FsimSynth *synth, FsimServeStats *out);

/**
 * FsimRandomConfig:
 * @events: total events, frees included (every allocation is freed by the end).
 * @seed: the GRand seed.
 * @sizes: the size distribution (bytes; borrowed).
 * @lifetimes: the lifetime distribution, in events (borrowed).
 * @max_live: the most allocations live at once; the oldest-expiring is freed early to admit one
 *     more (0 = no limit).
 * @streams: allocations are spread over streams 0 .. @streams - 1.
 */
typedef struct {
    uint64_t events;
    uint64_t seed;
    const FsimDist *sizes;
    const FsimDist *lifetimes;
    uint64_t max_live;
    uint32_t streams;
} FsimRandomConfig;

void fsim_random_config_init(FsimRandomConfig *config);
FsimSynth *fsim_synth_random_new(const FsimRandomConfig *config, GError **error);

/* ---- Internals shared by the generators -------------------------------------------------- */

/**
 * FsimSynthHeap:
 *
 * A binary min-heap of future events ordered by (time, seq), for generators that schedule ahead
 * (arrivals, completions, expiring lifetimes).  @seq is assigned on push, so equal times pop
 * first-in first-out.
 */
typedef struct {
    FsimTime time;
    uint64_t seq;
    uint64_t kind;
    uint64_t value;
} FsimSynthHeapItem;

static inline gboolean
fsim_synth_heap_before(const FsimSynthHeapItem *a, const FsimSynthHeapItem *b)
{
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

FSIM_HEAP_DEFINE(FsimSynthHeapItems, fsim_synth_heap_items, FsimSynthHeapItem,
                 fsim_synth_heap_before)

typedef struct {
    FsimSynthHeapItems items;
    uint64_t next_seq;
} FsimSynthHeap;

void fsim_synth_heap_init(FsimSynthHeap *heap);
void fsim_synth_heap_clear(FsimSynthHeap *heap);
void fsim_synth_heap_push(FsimSynthHeap *heap, FsimTime time, uint64_t kind, uint64_t value);
/* Returns: FALSE when empty; else the earliest item, removed. */
gboolean fsim_synth_heap_pop(FsimSynthHeap *heap, FsimSynthHeapItem *out);
/* Returns: (nullable): the earliest item, not removed. */
const FsimSynthHeapItem *fsim_synth_heap_peek(const FsimSynthHeap *heap);

/**
 * FsimSynthQueue:
 *
 * The events a generator has made but not handed out yet, in order.  A generator that makes
 * several events at a time (a layer's tensors, an iteration's frees) appends them with
 * fsim_synth_queue_push(); fsim_synth_next() takes them one at a time with
 * fsim_synth_queue_next(), which calls the generator's fill function whenever the queue runs dry.
 */
typedef struct {
    FsimEventKind kind;
    uint64_t id;
    uint64_t size;
    const char *label; /* a MARK's: static, or kept by the generator until the event is out */
} FsimSynthPending;

typedef struct {
    GArray *items; /* FsimSynthPending */
    guint pos;     /* the next one to hand out */
} FsimSynthQueue;

/* Makes the next events into the (empty) queue; FALSE when the generator has no more. */
typedef gboolean (*FsimSynthFill)(FsimSynth *synth);

/**
 * FsimSynthClass:
 *
 * A generator implementation.  One that makes its events one at a time sets @next, which fills
 * the next event (FALSE at the end or on error).  One that makes several at a time sets @fill
 * instead, which appends them to the base's queue (FsimSynth.queue, with fsim_synth_queue_push()),
 * and @stamp, which sets the time (and the stream if not 0) of each event handed out from it.
 * @destroy, where set, frees the generator's own state (not the base).
 */
typedef struct {
    const char *name;
    gboolean (*next)(FsimSynth *synth, FsimEvent *ev, GError **error);
    FsimSynthFill fill;
    void (*stamp)(FsimSynth *synth, FsimEvent *ev);
    void (*destroy)(FsimSynth *synth);
} FsimSynthClass;

struct FsimSynth {
    const FsimSynthClass *klass;
    uint64_t events;
    FsimSynthQueue queue; /* with @fill: made, not handed out yet (fsim_synth_queue_init()) */
    GRand *rand;          /* a seeded generator's random numbers (fsim_synth_seed()) */
    FsimSynthHeap heap;   /* and its future events */
};

/* Seeds @synth's random numbers and starts its heap of future events; both go with @synth. */
void fsim_synth_seed(FsimSynth *synth, uint64_t seed);

void fsim_synth_queue_init(FsimSynthQueue *queue, guint reserve);
void fsim_synth_queue_clear(FsimSynthQueue *queue);

static inline void
fsim_synth_queue_push(FsimSynthQueue *queue, FsimEventKind kind, uint64_t id, uint64_t size,
                      const char *label)
{
    FsimSynthPending p = {.kind = kind, .id = id, .size = size, .label = label};
    g_array_append_val(queue->items, p);
}

/* Hands out the next event into @ev: zeroed, then its kind, id, size, label and index (the
 * caller sets the time, and the stream if not 0), calling @fill(@synth) while the queue is empty.
 * Returns: FALSE when @fill makes no more. */
gboolean fsim_synth_queue_next(FsimSynthQueue *queue, FsimSynth *synth, FsimSynthFill fill,
                               FsimEvent *ev);

/* ---- Command-line options shared by `synth train`, `estimate` and `fit` ------------------ */

/**
 * FsimTrainOptions:
 *
 * The text of the shared flags, as GOptionContext fills it; resolve into an #FsimTrainConfig
 * with fsim_train_options_resolve().  fsim_train_options_init(), add the group, parse, resolve,
 * then fsim_train_options_clear().
 */
typedef struct FsimTrainOptions {
    char *model;
    char *params;
    int layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
    int seq, batch, steps, grad_accum;
    char *precision;
    char *dtype;
    int grad_dtype;
    char *optimizer;
    char *checkpointing;
    char *attention;
    int zero, ranks, tp;
    gboolean sequence_parallel;
    gboolean lora;
    int lora_rank;
    char *lora_targets;
    char *activations;
    gboolean list_models;
} FsimTrainOptions;

/* Mark every flag as not given. */
void fsim_train_options_init(FsimTrainOptions *options);

enum {
    FSIM_TRAIN_OPTIONS_ACTIVATIONS = 1 << 0, /* add --activations (estimate) */
    FSIM_TRAIN_OPTIONS_MODEL_ONLY = 1 << 1,  /* only the model flags (synth serve) */
};

/**
 * fsim_train_options_group:
 * @options: where the parsed values go; must outlive the group.
 * @flags: FSIM_TRAIN_OPTIONS_* bits.
 *
 * Returns: (transfer full): an option group of the shared flags, to add to a context.
 */
GOptionGroup *fsim_train_options_group(FsimTrainOptions *options, guint flags);

/* The shared flags' conventions and defaults, for a context's description. */
const char *fsim_train_options_help(void);

/**
 * fsim_train_options_resolve:
 * @options: parsed flags.
 * @model_arg: (nullable): a model named positionally (`fragsim fit llama2-7b`), used when
 *     --model is absent.
 * @config: (out): the configuration.
 * @error: FSIM_ERROR_USAGE for a bad or missing setting.
 */
gboolean fsim_train_options_resolve(const FsimTrainOptions *options, const char *model_arg,
                                    FsimTrainConfig *config, GError **error);
void fsim_train_options_clear(FsimTrainOptions *options);

G_END_DECLS
