/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the synthetic trace of an LLM inference server.
 *
 * A discrete-event simulation of continuous batching (Yu et al., "Orca", OSDI 2022; Kwon et
 * al., "Efficient Memory Management for Large Language Model Serving with PagedAttention", SOSP
 * 2023): requests arrive as a Poisson process; each iteration admits waiting requests up to the
 * maximum batch (and, when set, while the KV budget holds), prefills the new ones, decodes one
 * token for every running one, and retires the finished ones.  The trace holds what the server
 * allocates:
 *
 *   - the weights, in 16 bits, once;
 *   - the KV cache, 2 · layers · KV heads · head dim · 2 bytes per token, in one of three layouts:
 *     contiguous-max: a K and a V tensor per layer and request, reserved at the maximum length
 *       when the request is admitted (the systems before paging: FasterTransformer, Orca);
 *     contiguous-grow: the same tensors grown on demand, to the prompt rounded up to the growth
 *       granule at admission and by doubling afterwards, each growth a new tensor, a copy and a
 *       free (a dynamic cache that does not reallocate at every token);
 *     paged: blocks of block_tokens tokens (all layers' K and V of those tokens), one allocation
 *       per block as vLLM's block manager hands it out;
 *   - each iteration's activation workspace: the hidden states and MLP intermediate of every
 *     token processed, and the last position's fp32 logits per sequence.
 *
 * With CUDA graphs (FsimServeConfig.graph_batches), one graph per batch size is captured after the
 * weights are loaded, in the order given, into one private pool shared by all graphs
 * (pool_begin / pool_end around each capture): a decode step's hidden states and MLP
 * intermediate, freed inside the pool, and its logits, which the graph keeps as its static
 * output.  Decode iterations that fit a captured batch replay a graph and allocate nothing.
 *
 * KV waste is the share of reserved token slots that hold no token, integrated over time.  Future
 * events (arrivals, the next iteration) wait in a heap of the generator's own, so the output is in
 * time order and the generator streams: its memory grows with the running requests, not with the
 * trace.  Randomness comes from a GRand seeded explicitly.
 */
#include <glib.h>

#include <math.h>
#include <string.h>

#include "fragsim/event.h"
#include "fragsim/owned.h"
#include "fragsim/types.h"

#include "synth.h"

enum {
    EV_ARRIVAL = 1,
    EV_ITERATION,
};

typedef struct {
    uint64_t prompt;
    uint64_t output;
    uint64_t generated;
    uint64_t capacity; /* reserved token slots */
    GArray *ids;       /* uint64_t: the KV allocations (2 per layer, or one per block) */
} Request;

typedef struct {
    FsimSynth base;
    FsimServeConfig config;
    FsimDist prompt, output; /* copies of the caller's (histograms borrowed) */
    GQueue waiting;          /* Request* */
    GPtrArray *active;       /* Request* */
    GArray *weights;         /* uint64_t weight sizes, allocated at start */
    GArray *graphs;          /* uint64_t: the batch sizes to capture, in order (a copy) */
    uint64_t largest_graph;
    uint64_t arrived;
    gboolean iteration_scheduled;
    gboolean started;
    uint64_t iterations;

    uint64_t kv_per_token;       /* bytes */
    uint64_t layer_kv_per_token; /* bytes of one layer's K (or V) per token */
    uint64_t reserved_slots, used_slots;
    FsimTime stats_time;
    FsimServeStats stats;

    FsimTime event_time;
    uint64_t next_id;
} Serve;

static void
request_free(gpointer data)
{
    static const FsimOwned owned[] = {FSIM_OWNED(Request, ids, g_array_unref)};

    fsim_owned_free(data, owned, G_N_ELEMENTS(owned));
}

static void
serve_emit(Serve *s, FsimEventKind kind, uint64_t id, uint64_t size)
{
    fsim_synth_queue_push(&s->base.queue, kind, id, size, NULL);
}

static void
serve_mark(Serve *s, const char *label)
{
    fsim_synth_queue_push(&s->base.queue, FSIM_EV_MARK, 0, 0, label);
}

static uint64_t
serve_alloc(Serve *s, uint64_t size)
{
    uint64_t id = ++s->next_id;
    serve_emit(s, FSIM_EV_ALLOC, id, size);
    return id;
}

/* Account the slots of the interval since the last change, then move the clock to @now. */
static void
serve_integrate(Serve *s, FsimTime now)
{
    double dt = (double)(now - s->stats_time) / 1e9;
    s->stats.kv_reserved_token_seconds += dt * (double)s->reserved_slots;
    s->stats.kv_used_token_seconds += dt * (double)s->used_slots;
    s->stats_time = now;
}

static void
serve_note_peak(Serve *s)
{
    uint64_t bytes = s->reserved_slots * s->kv_per_token;
    if (bytes > s->stats.peak_kv_reserved_bytes) {
        s->stats.peak_kv_reserved_bytes = bytes;
        s->stats.kv_waste_at_peak =
            s->reserved_slots ? 1.0 - (double)s->used_slots / (double)s->reserved_slots : 0;
    }
}

/* Token slots a request of @tokens needs reserved under the layout, at least. */
static uint64_t
serve_capacity_for(const Serve *s, const Request *r, uint64_t tokens)
{
    uint64_t bt = s->config.block_tokens;
    switch (s->config.layout) {
    case FSIM_KV_CONTIGUOUS_MAX:
        return s->config.max_len;
    case FSIM_KV_CONTIGUOUS_GROW:
        if (tokens <= r->capacity)
            return r->capacity;
        if (r->capacity == 0)
            return MIN(fsim_div_ceil(tokens, bt) * bt, s->config.max_len);
        return MIN(MAX(2 * r->capacity, fsim_div_ceil(tokens, bt) * bt), s->config.max_len);
    case FSIM_KV_PAGED:
        return fsim_div_ceil(tokens, bt) * bt;
    }
    g_assert_not_reached();
}

/* Make @r's reservation hold @tokens tokens. */
static void
serve_reserve(Serve *s, Request *r, uint64_t tokens)
{
    uint64_t want = serve_capacity_for(s, r, tokens);
    uint64_t layers = s->config.model.layers;

    if (want <= r->capacity)
        return;
    switch (s->config.layout) {
    case FSIM_KV_CONTIGUOUS_MAX:
    case FSIM_KV_CONTIGUOUS_GROW: {
        /* a new K and V per layer; the old ones are copied over and freed */
        g_autoptr(GArray) old = r->ids;
        r->ids = g_array_sized_new(FALSE, FALSE, sizeof(uint64_t), (guint)(2 * layers));
        for (uint64_t l = 0; l < 2 * layers; l++) {
            uint64_t id = serve_alloc(s, want * s->layer_kv_per_token);
            g_array_append_val(r->ids, id);
            if (old)
                serve_emit(s, FSIM_EV_FREE, g_array_index(old, uint64_t, l), 0);
        }
        break;
    }
    case FSIM_KV_PAGED: {
        uint64_t bt = s->config.block_tokens;
        if (r->ids == NULL)
            r->ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        for (uint64_t have = r->capacity; have < want; have += bt) {
            uint64_t id = serve_alloc(s, bt * s->kv_per_token);
            g_array_append_val(r->ids, id);
        }
        break;
    }
    }
    s->reserved_slots += want - r->capacity;
    r->capacity = want;
}

static void
serve_release(Serve *s, Request *r)
{
    for (guint i = 0; r->ids && i < r->ids->len; i++)
        serve_emit(s, FSIM_EV_FREE, g_array_index(r->ids, uint64_t, i), 0);
    s->reserved_slots -= r->capacity;
    s->used_slots -= r->prompt + r->generated;
    r->capacity = 0;
}

/* The reservation @r needs at admission (for the KV budget). */
static uint64_t
serve_admission_bytes(const Serve *s, const Request *r)
{
    Request probe = *r;
    probe.capacity = 0;
    return serve_capacity_for(s, &probe, r->prompt + 1) * s->kv_per_token;
}

static void
serve_arrival(Serve *s, FsimTime now)
{
    Request *r = g_new0(Request, 1);
    uint64_t max_len = s->config.max_len;
    r->prompt = fsim_dist_sample(&s->prompt, s->base.rand, max_len - 1);
    r->output = fsim_dist_sample(&s->output, s->base.rand, max_len - r->prompt);
    g_queue_push_tail(&s->waiting, r);
    s->arrived++;
    if (s->arrived < s->config.requests) {
        /* exponential inter-arrival times: a Poisson process at the rate */
        double u = g_rand_double(s->base.rand);
        double gap = -log1p(-u) / s->config.rate;
        FsimTime dt = (FsimTime)llround(MIN(gap, 1e6) * 1e9);
        fsim_synth_heap_push(&s->base.heap, now + dt, EV_ARRIVAL, 0);
    }
    if (!s->iteration_scheduled) {
        fsim_synth_heap_push(&s->base.heap, now, EV_ITERATION, 0);
        s->iteration_scheduled = TRUE;
    }
}

static void
serve_iteration(Serve *s, FsimTime now)
{
    const FsimServeConfig *c = &s->config;
    const FsimModelShape *m = &c->model;
    uint64_t prefill = 0;

    s->iteration_scheduled = FALSE;
    serve_integrate(s, now);

    /* admission */
    while (!g_queue_is_empty(&s->waiting) && s->active->len < c->max_batch) {
        Request *r = g_queue_peek_head(&s->waiting);
        if (c->kv_budget_bytes && s->active->len > 0 &&
            s->reserved_slots * s->kv_per_token + serve_admission_bytes(s, r) > c->kv_budget_bytes)
            break;
        g_queue_pop_head(&s->waiting);
        g_ptr_array_add(s->active, r);
        serve_reserve(s, r, r->prompt + 1);
        s->used_slots += r->prompt;
        prefill += r->prompt;
    }
    if (s->active->len == 0)
        return;
    s->stats.peak_batch = MAX(s->stats.peak_batch, s->active->len);

    /* decode: every running request stores one more token (the prefilled ones their first) */
    for (guint i = 0; i < s->active->len; i++) {
        Request *r = g_ptr_array_index(s->active, i);
        serve_reserve(s, r, r->prompt + r->generated + 1);
    }
    uint64_t seqs = s->active->len;
    uint64_t tokens = prefill + seqs;
    if (prefill > 0 || seqs > s->largest_graph) {
        /* eager; a decode step that fits a captured graph replays it instead */
        uint64_t x = serve_alloc(s, tokens * m->hidden * 2);
        uint64_t mlp = serve_alloc(s, tokens * m->ffn * 2 * (m->gated_mlp ? 2 : 1));
        serve_emit(s, FSIM_EV_FREE, mlp, 0);
        uint64_t logits = serve_alloc(s, seqs * m->vocab * 4);
        serve_emit(s, FSIM_EV_FREE, logits, 0);
        serve_emit(s, FSIM_EV_FREE, x, 0);
    }
    for (guint i = 0; i < s->active->len; i++) {
        Request *r = g_ptr_array_index(s->active, i);
        r->generated++;
        s->used_slots++;
    }
    serve_note_peak(s);

    /* retire the finished ones */
    for (guint i = 0; i < s->active->len;) {
        Request *r = g_ptr_array_index(s->active, i);
        if (r->generated >= r->output) {
            serve_release(s, r);
            g_ptr_array_remove_index(s->active, i);
            s->stats.requests_done++;
        } else {
            i++;
        }
    }
    s->iterations++;

    FsimTime duration = c->iteration_ns + c->prefill_token_ns * prefill + c->decode_seq_ns * seqs;
    /* the interval until the next iteration is charged at the state after this one */
    if (s->active->len > 0 || !g_queue_is_empty(&s->waiting)) {
        fsim_synth_heap_push(&s->base.heap, now + duration, EV_ITERATION, 0);
        s->iteration_scheduled = TRUE;
    }
}

#define SERVE_GRAPH_POOL 1 /* the private pool the graphs share */

/* Capture the decode step of @batch sequences into the graphs' shared pool. */
static void
serve_capture(Serve *s, uint64_t batch)
{
    const FsimModelShape *m = &s->config.model;

    serve_emit(s, FSIM_EV_POOL_BEGIN, SERVE_GRAPH_POOL, 0);
    uint64_t x = serve_alloc(s, batch * m->hidden * 2);
    uint64_t mlp = serve_alloc(s, batch * m->ffn * 2 * (m->gated_mlp ? 2 : 1));
    serve_emit(s, FSIM_EV_FREE, mlp, 0);
    serve_alloc(s, batch * m->vocab * 4); /* the logits: the graph's output, kept */
    serve_emit(s, FSIM_EV_FREE, x, 0);
    serve_emit(s, FSIM_EV_POOL_END, SERVE_GRAPH_POOL, 0);
}

/* Run the simulation until it produced events or ended. */
static gboolean
serve_fill(FsimSynth *synth)
{
    Serve *s = (Serve *)synth;

    if (!s->started) {
        s->started = TRUE;
        serve_mark(s, "load");
        for (guint i = 0; i < s->weights->len; i++)
            serve_alloc(s, g_array_index(s->weights, uint64_t, i));
        if (s->graphs->len > 0) {
            serve_mark(s, "capture");
        }
        for (guint i = 0; i < s->graphs->len; i++)
            serve_capture(s, g_array_index(s->graphs, uint64_t, i));
        s->event_time = 0;
        if (s->config.requests > 0)
            fsim_synth_heap_push(&s->base.heap, 0, EV_ARRIVAL, 0);
        return TRUE;
    }
    FsimSynthHeapItem item;
    while (s->base.queue.items->len == 0 && fsim_synth_heap_pop(&s->base.heap, &item)) {
        s->event_time = item.time;
        if (item.kind == EV_ARRIVAL)
            serve_arrival(s, item.time);
        else
            serve_iteration(s, item.time);
    }
    if (s->base.queue.items->len == 0) {
        serve_integrate(s, s->stats_time);
        return FALSE;
    }
    return TRUE;
}

/* Every event is at its iteration's time, on the default stream (the graphs' captures included). */
static void
serve_stamp(FsimSynth *synth, FsimEvent *ev)
{
    ev->time = ((Serve *)synth)->event_time;
}

static void
serve_destroy(FsimSynth *synth)
{
    Serve *s = (Serve *)synth;
    g_queue_clear_full(&s->waiting, request_free);
    g_clear_pointer(&s->active, g_ptr_array_unref);
    g_clear_pointer(&s->weights, g_array_unref);
    g_clear_pointer(&s->graphs, g_array_unref);
}

static const FsimSynthClass serve_class = {
    .name = "serve",
    .fill = serve_fill,
    .stamp = serve_stamp,
    .destroy = serve_destroy,
};

void
fsim_serve_config_init(FsimServeConfig *config)
{
    memset(config, 0, sizeof *config);
    config->requests = 200;
    config->rate = 5;
    config->max_len = 2048;
    config->max_batch = 32;
    config->layout = FSIM_KV_PAGED;
    config->block_tokens = 16;
    config->seed = 1;
    config->iteration_ns = 10000000;
    config->prefill_token_ns = 20000;
    config->decode_seq_ns = 50000;
}

static const char *const kv_layout_names[] = {
    [FSIM_KV_CONTIGUOUS_MAX] = "contiguous-max",
    [FSIM_KV_CONTIGUOUS_GROW] = "contiguous-grow",
    [FSIM_KV_PAGED] = "paged",
};

const char *
fsim_kv_layout_name(FsimKvLayout layout)
{
    return fsim_enum_name(kv_layout_names, G_N_ELEMENTS(kv_layout_names), (int)layout);
}

gboolean
fsim_kv_layout_from_name(const char *name, FsimKvLayout *out)
{
    int layout;

    if (!fsim_enum_from_name(kv_layout_names, G_N_ELEMENTS(kv_layout_names), name, &layout))
        return FALSE;
    *out = (FsimKvLayout)layout;
    return TRUE;
}

/* The model, the length distributions and the settings' ranges. */
static gboolean
serve_settings_check(const FsimServeConfig *config, GError **error)
{
    if (!fsim_model_shape_check(&config->model, error))
        return FALSE;
    if (config->prompt == NULL || config->output == NULL) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "the serving generator needs prompt and output length distributions");
        return FALSE;
    }
    if (!(config->rate > 0 && config->rate <= 1e6) || config->max_len < 2 ||
        config->max_len > 100000000 || config->max_batch == 0 || config->block_tokens == 0 ||
        config->block_tokens > config->max_len || config->requests > 1000000000) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "bad serving settings: the rate must be in (0, 1e6], --max-len at least 2, "
                    "--max-batch and --block-tokens positive, --block-tokens at most --max-len");
        return FALSE;
    }
    return TRUE;
}

/* The largest allocations of the settings, each below FSIM_MAX_SIZE: a request's KV at the
 * maximum length, an iteration's workspace, a captured graph's decode step. */
static gboolean
serve_sizes_check(const FsimServeConfig *config, GError **error)
{
    const FsimModelShape *shape = &config->model;
    double kv_token = 4.0 * shape->layers * shape->kv_heads * shape->head_dim;
    double tokens = (double)config->max_batch * (double)config->max_len;
    for (gsize i = 0; i < config->n_graph_batches; i++) {
        uint64_t b = config->graph_batches[i];

        if (b == 0 || (double)b * shape->ffn * 4 > (double)FSIM_MAX_SIZE ||
            (double)b * shape->vocab * 4 > (double)FSIM_MAX_SIZE) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "--cuda-graphs: batch size %" G_GUINT64_FORMAT
                        " must be positive and its decode step below %" G_GUINT64_FORMAT
                        " bytes an allocation",
                        b, FSIM_MAX_SIZE);
            return FALSE;
        }
    }
    if (kv_token * (double)config->max_len > (double)FSIM_MAX_SIZE ||
        tokens * shape->ffn * 4 > (double)FSIM_MAX_SIZE ||
        (double)config->max_batch * shape->vocab * 4 > (double)FSIM_MAX_SIZE) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "an allocation of this configuration would exceed %" G_GUINT64_FORMAT
                    " bytes: reduce --max-len or --max-batch",
                    FSIM_MAX_SIZE);
        return FALSE;
    }
    return TRUE;
}

/* The bytes of each 16-bit weight tensor of the model, in the training generator's order. */
static GArray *
serve_weights(const FsimModelShape *m)
{
    g_autoptr(GArray) params = fsim_model_tensors(m);
    GArray *weights = g_array_sized_new(FALSE, FALSE, sizeof(uint64_t), params->len);
    for (guint i = 0; i < params->len; i++) {
        const FsimParamTensor *p = &g_array_index(params, FsimParamTensor, i);
        uint64_t bytes = p->rows * p->cols * 2;
        g_array_append_val(weights, bytes);
    }
    return weights;
}

FsimSynth *
fsim_synth_serve_new(const FsimServeConfig *config, GError **error)
{
    g_return_val_if_fail(config != NULL, NULL);
    if (!serve_settings_check(config, error) || !serve_sizes_check(config, error))
        return NULL;

    Serve *s = g_new0(Serve, 1);
    s->base.klass = &serve_class;
    s->config = *config;
    s->prompt = *config->prompt;
    s->output = *config->output;
    s->config.prompt = &s->prompt;
    s->config.output = &s->output;
    fsim_synth_seed(&s->base, config->seed);
    g_queue_init(&s->waiting);
    s->active = g_ptr_array_new_with_free_func(request_free);
    fsim_synth_queue_init(&s->base.queue, 0);
    s->graphs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    if (config->n_graph_batches > 0)
        g_array_append_vals(s->graphs, config->graph_batches, (guint)config->n_graph_batches);
    for (guint i = 0; i < s->graphs->len; i++)
        s->largest_graph = MAX(s->largest_graph, g_array_index(s->graphs, uint64_t, i));
    s->config.graph_batches = NULL;

    const FsimModelShape *m = &config->model;
    s->layer_kv_per_token = (uint64_t)m->kv_heads * m->head_dim * 2;
    s->kv_per_token = 2 * m->layers * s->layer_kv_per_token;
    s->stats.kv_bytes_per_token = s->kv_per_token;
    s->weights = serve_weights(m);
    return &s->base;
}

void
fsim_synth_serve_stats(const FsimSynth *synth, FsimServeStats *out)
{
    g_return_if_fail(synth != NULL && synth->klass == &serve_class);
    const Serve *s = (const Serve *)synth;
    *out = s->stats;
    out->duration_ns = s->stats_time;
    out->kv_waste = out->kv_reserved_token_seconds > 0
                        ? 1.0 - out->kv_used_token_seconds / out->kv_reserved_token_seconds
                        : 0;
}
