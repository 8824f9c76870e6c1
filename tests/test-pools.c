/* SPDX-License-Identifier: MIT */
/*
 * Private pools (CUDA graphs, torch.cuda.MemPool) in the `caching` and `expandable` policies, from
 * PyTorch's documented behaviour (Note [Interaction with CUDA graph capture], the CUDA semantics
 * notes on graph memory management and MemPool): a pool's blocks never serve the default pools nor
 * the reverse; blocks are reused across captures sharing a pool; the 1 MiB boundary splits private
 * pools too; a pool's memory goes back only once nothing references it; no release-and-retry
 * while a capture is underway; the newest scope on a stream wins; MemPool's use_on_oom and
 * no_split; a state-only snapshot with private pools seeded apart; validate exact on a hand-built
 * snapshot with pools; and `synth serve --cuda-graphs` in both capture orders.
 */
#include <glib.h>

#include "fragsim/fragsim.h"

#include "synth/synth.h"
#include "test-util.h"

#define MIB FSIM_MiB

/* One input event, as a line of the text format would give it. */
typedef struct {
    FsimEventKind kind;
    uint64_t id; /* allocation or pool */
    uint64_t size;
    uint64_t stream;
} Step;

#define BEGIN(pool, stream)                 \
    {                                       \
        FSIM_EV_POOL_BEGIN, pool, 0, stream \
    }
#define END(pool, stream)                 \
    {                                     \
        FSIM_EV_POOL_END, pool, 0, stream \
    }
#define RELEASE(pool)                    \
    {                                    \
        FSIM_EV_POOL_RELEASE, pool, 0, 0 \
    }
#define ALLOC(id, size)            \
    {                              \
        FSIM_EV_ALLOC, id, size, 0 \
    }
#define FREE(id)               \
    {                          \
        FSIM_EV_FREE, id, 0, 0 \
    }
#define EMPTY_CACHE                  \
    {                                \
        FSIM_EV_EMPTY_CACHE, 0, 0, 0 \
    }

static FsimEngine *
engine_new(const char *policy, const char *device, const char *knob, const char *value,
           const FsimInitialState *state)
{
    FsimRunConfig config;
    g_autoptr(GError) error = NULL;
    static GKeyFile *keys; /* kept for the engine's lifetime: one engine at a time */
    FsimEngine *engine;

    g_clear_pointer(&keys, g_key_file_unref);
    keys = g_key_file_new();
    if (knob != NULL)
        g_key_file_set_string(keys, policy, knob, value);
    fsim_run_config_init(&config);
    config.policy = policy;
    config.config = keys;
    config.paranoid = TRUE;
    config.initial_state = state;
    g_assert_true(fsim_device_spec_parse(device, &config.device, &error));
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    return engine;
}

static uint64_t clock_ns; /* never goes backwards, across engines too */

static void
run_steps(FsimEngine *engine, const Step *steps, gsize n)
{
    for (gsize i = 0; i < n; i++) {
        FsimEvent ev = {.time = ++clock_ns,
                        .index = i + 1,
                        .kind = steps[i].kind,
                        .id = steps[i].id,
                        .size = steps[i].size,
                        .stream = steps[i].stream};
        g_autoptr(GError) error = NULL;

        if (!fsim_engine_process(engine, &ev, &error))
            g_error("step %" G_GSIZE_FORMAT ": %s", i, error->message);
    }
}

static uint64_t
reserved(FsimEngine *engine)
{
    return (uint64_t)fsim_engine_device(engine)->reserved.current;
}

/* The reserved bytes of @pool now (@peak: at most ever), from the policy's per-pool answers. */
static uint64_t
pool_reserved(const FsimEngine *engine, uint64_t pool, gboolean peak)
{
    g_autoptr(GArray) stats = fsim_policy_pool_stats(fsim_engine_policy(engine));

    g_assert_nonnull(stats);
    for (guint i = 0; i < stats->len; i++) {
        const FsimPoolStats *s = &g_array_index(stats, FsimPoolStats, i);

        if (s->pool == pool)
            return peak ? s->peak_reserved_bytes : s->reserved_bytes;
    }
    g_error("no pool %" G_GUINT64_FORMAT, pool);
}

typedef struct {
    uint64_t id;
    FsimBlock block;
} Live;

static void
find_live(gpointer data, uint64_t id, const FsimBlock *block, uint64_t requested, uint64_t stream)
{
    Live *live = data;

    (void)requested;
    (void)stream;
    if (id == live->id)
        live->block = *block;
}

static FsimBlock
live_block(const FsimEngine *engine, uint64_t id)
{
    Live live = {.id = id};

    fsim_engine_foreach_live(engine, find_live, &live);
    g_assert_cmpuint(live.block.size, >, 0);
    return live.block;
}

static const char *const both[] = {"caching", "expandable"};

/* 16 MiB allocated and freed in a pool, then 16 MiB outside it: 32 MiB reserved (40 MiB of 20 MiB
 * pages with expandable segments); and the reverse.  Without pools, 16 MiB. */
static void
test_isolation(void)
{
    const Step pool_first[] = {BEGIN(1, 0), ALLOC(1, 16 * MIB), FREE(1), END(1, 0),
                               ALLOC(2, 16 * MIB)};
    const Step default_first[] = {ALLOC(1, 16 * MIB), FREE(1), BEGIN(1, 0), ALLOC(2, 16 * MIB),
                                  END(1, 0)};
    const uint64_t expected[] = {32 * MIB, 40 * MIB};

    for (gsize p = 0; p < G_N_ELEMENTS(both); p++) {
        g_autoptr(FsimEngine) a = engine_new(both[p], "1GiB", NULL, NULL, NULL);
        g_autoptr(FsimEngine) b = engine_new(both[p], "1GiB", NULL, NULL, NULL);
        g_autoptr(FsimEngine) c = engine_new("bestfit", "1GiB", NULL, NULL, NULL);

        run_steps(a, pool_first, G_N_ELEMENTS(pool_first));
        g_assert_cmpuint(reserved(a), ==, expected[p]);
        g_assert_cmpuint(pool_reserved(a, 1, FALSE), ==, expected[p] / 2);
        g_assert_cmpuint(pool_reserved(a, 0, FALSE), ==, expected[p] / 2);
        run_steps(b, default_first, G_N_ELEMENTS(default_first));
        g_assert_cmpuint(reserved(b), ==, expected[p]);
        /* a policy without private pools ignores the scopes */
        run_steps(c, pool_first, G_N_ELEMENTS(pool_first));
        g_assert_cmpuint(reserved(c), ==, 16 * MIB);
    }
}

/* Graphs sharing a pool reuse each other's freed blocks; a graph with a pool of its own does
 * not. */
static void
test_shared_pool_reuse(void)
{
    const Step shared[] = {BEGIN(1, 0), ALLOC(1, 16 * MIB), FREE(1),  END(1, 0),
                           BEGIN(1, 0), ALLOC(2, 16 * MIB), END(1, 0)};
    const Step separate[] = {BEGIN(1, 0), ALLOC(1, 16 * MIB), FREE(1),  END(1, 0),
                             BEGIN(2, 0), ALLOC(2, 16 * MIB), END(2, 0)};

    for (gsize p = 0; p < G_N_ELEMENTS(both); p++) {
        g_autoptr(FsimEngine) a = engine_new(both[p], "1GiB", NULL, NULL, NULL);
        g_autoptr(FsimEngine) b = engine_new(both[p], "1GiB", NULL, NULL, NULL);

        run_steps(a, shared, G_N_ELEMENTS(shared));
        run_steps(b, separate, G_N_ELEMENTS(separate));
        g_assert_cmpuint(reserved(b), ==, 2 * reserved(a));
        g_assert_cmpuint(pool_reserved(b, 2, FALSE), ==, reserved(a));
    }
}

/* The 1 MiB boundary splits a private pool into small and large pools too: a freed 1 MiB block
 * (2 MiB segment) does not serve a request of 1 MiB + 512 B in the same pool. */
static void
test_small_large_split(void)
{
    const Step steps[] = {BEGIN(1, 0), ALLOC(1, MIB), FREE(1), ALLOC(2, MIB + 512), END(1, 0)};
    g_autoptr(FsimEngine) engine = engine_new("caching", "1GiB", NULL, NULL, NULL);

    run_steps(engine, steps, G_N_ELEMENTS(steps));
    g_assert_cmpuint(reserved(engine), ==, 22 * MIB);
    g_assert_cmpuint(pool_reserved(engine, 1, FALSE), ==, 22 * MIB);
    g_assert_cmpuint(pool_reserved(engine, 0, FALSE), ==, 0);
}

/* A pool returns its memory only when its last reference is released, and then at the next
 * empty_cache, like the default pools' cache; a tensor still alive in it keeps its segment. */
static void
test_release(void)
{
    const Step steps[] = {
        BEGIN(1, 0), ALLOC(1, 16 * MIB), FREE(1), ALLOC(2, 12 * MIB), END(1, 0), /* graph A */
        BEGIN(1, 0), ALLOC(3, 16 * MIB), FREE(3), END(1, 0),                     /* graph B */
        EMPTY_CACHE,
    };
    const Step release_a[] = {RELEASE(1), EMPTY_CACHE};
    const Step release_b[] = {RELEASE(1), EMPTY_CACHE};
    const Step free_output[] = {FREE(2), EMPTY_CACHE};

    for (gsize p = 0; p < G_N_ELEMENTS(both); p++) {
        g_autoptr(FsimEngine) engine = engine_new(both[p], "1GiB", NULL, NULL, NULL);
        uint64_t held;

        run_steps(engine, steps, G_N_ELEMENTS(steps));
        held = reserved(engine);
        g_assert_cmpuint(held, >=, 28 * MIB); /* live pool: nothing returned */
        run_steps(engine, release_a, G_N_ELEMENTS(release_a));
        g_assert_cmpuint(reserved(engine), ==, held); /* graph B still references it */
        run_steps(engine, release_b, G_N_ELEMENTS(release_b));
        /* freeable: what is free goes, the segment of the live 12 MiB output stays */
        g_assert_cmpuint(reserved(engine), <, held);
        g_assert_cmpuint(reserved(engine), >, 0);
        run_steps(engine, free_output, G_N_ELEMENTS(free_output));
        g_assert_cmpuint(reserved(engine), ==, 0);
        g_assert_cmpuint(pool_reserved(engine, 1, TRUE), ==, held);
    }
}

/* PyTorch never releases cached memory while a capture is underway: a request that would need
 * the default pool's cache freed fails inside a capture and succeeds outside. */
static void
test_no_release_during_capture(void)
{
    const Step steps[] = {ALLOC(1, 40 * MIB), FREE(1),   BEGIN(1, 0),
                          ALLOC(2, 40 * MIB), END(1, 0), ALLOC(3, 40 * MIB)};
    g_autoptr(FsimEngine) engine = engine_new("caching", "64MiB", NULL, NULL, NULL);
    gsize n_ooms;
    const FsimOomRecord *ooms;

    run_steps(engine, steps, G_N_ELEMENTS(steps));
    ooms = fsim_engine_ooms(engine, &n_ooms);
    g_assert_cmpuint(n_ooms, ==, 1);
    g_assert_cmpuint(ooms[0].id, ==, 2);
    g_assert_cmpuint(live_block(engine, 3).size, ==, 40 * MIB);
}

/* The newest scope open on a stream wins; other streams are not routed. */
static void
test_newest_scope(void)
{
    const Step steps[] = {BEGIN(1, 0), BEGIN(2, 0),        ALLOC(1, 16 * MIB),
                          END(2, 0),   ALLOC(2, 16 * MIB), {FSIM_EV_ALLOC, 3, 16 * MIB, 5},
                          END(1, 0)};
    g_autoptr(FsimEngine) engine = engine_new("caching", "1GiB", NULL, NULL, NULL);

    run_steps(engine, steps, G_N_ELEMENTS(steps));
    g_assert_cmpuint(pool_reserved(engine, 2, FALSE), ==, 16 * MIB);
    g_assert_cmpuint(pool_reserved(engine, 1, FALSE), ==, 16 * MIB);
    g_assert_cmpuint(pool_reserved(engine, 0, FALSE), ==, 16 * MIB);
}

/* MemPool(no_split=True): a block of the pool is handed out whole. */
static void
test_no_split(void)
{
    const Step steps[] = {BEGIN(7, 0), ALLOC(1, 3 * MIB), ALLOC(2, 3 * MIB), END(7, 0)};
    g_autoptr(FsimEngine) split = engine_new("caching", "1GiB", NULL, NULL, NULL);
    g_autoptr(FsimEngine) whole = engine_new("caching", "1GiB", "mempool_no_split", "7", NULL);

    run_steps(split, steps, G_N_ELEMENTS(steps));
    run_steps(whole, steps, G_N_ELEMENTS(steps));
    g_assert_cmpuint(live_block(split, 1).size, ==, 3 * MIB);
    g_assert_cmpuint(reserved(split), ==, 20 * MIB);
    g_assert_cmpuint(live_block(whole, 1).size, ==, 20 * MIB);
    g_assert_cmpuint(reserved(whole), ==, 40 * MIB);
}

/* MemPool(use_on_oom=True): a default-pool request that gets no new memory takes a cached block
 * of the pool (try_mempool_fallback); without the flag the live pool's cache is out of reach. */
static void
test_use_on_oom(void)
{
    const Step steps[] = {BEGIN(3, 0), ALLOC(1, 40 * MIB), FREE(1), END(3, 0), ALLOC(2, 30 * MIB)};
    g_autoptr(FsimEngine) plain = engine_new("caching", "64MiB", NULL, NULL, NULL);
    g_autoptr(FsimEngine) fallback =
        engine_new("caching", "64MiB", "mempool_use_on_oom", "2,3", NULL);
    gsize n_ooms;

    run_steps(plain, steps, G_N_ELEMENTS(steps));
    (void)fsim_engine_ooms(plain, &n_ooms);
    g_assert_cmpuint(n_ooms, ==, 1);
    run_steps(fallback, steps, G_N_ELEMENTS(steps));
    (void)fsim_engine_ooms(fallback, &n_ooms);
    g_assert_cmpuint(n_ooms, ==, 0);
    g_assert_cmpuint(live_block(fallback, 2).size, ==, 30 * MIB);
    g_assert_cmpuint(reserved(fallback), ==, 40 * MIB);
    g_assert_cmpuint(pool_reserved(fallback, 3, FALSE), ==, 40 * MIB);
}

/* A state-only snapshot with a graph pool and a MemPool (tests/data/traces/gen-torch.py,
 * pools_state): each pool's segments stay private after seeding. */
static void
test_seed_state_only(void)
{
    const uint64_t D = 0x7F4000000000;
    const uint64_t graph = (uint64_t)1 << 32;
    g_autofree char *path = fsim_test_trace_path("ok-torch-pools-state.pickle");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);
    const FsimInitialState *state;
    /* ids 1-4 are the seeded blocks */
    const Step outside[] = {ALLOC(11, 12 * MIB), ALLOC(12, 512 * 1024)};
    const Step inside[] = {BEGIN(graph, 0), ALLOC(11, 12 * MIB), ALLOC(12, 512 * 1024),
                           END(graph, 0)};

    g_assert_no_error(error);
    state = fsim_trace_initial_state(trace, 0);
    g_assert_nonnull(state);
    for (gsize p = 0; p < G_N_ELEMENTS(both); p++) {
        g_autoptr(FsimEngine) a = engine_new("caching", "1GiB", NULL, NULL, state);
        g_autoptr(FsimEngine) b = engine_new("caching", "1GiB", NULL, NULL, state);

        if (p == 1)
            break; /* the state has cudaMalloc'd segments: seeded the same by both */
        run_steps(a, outside, G_N_ELEMENTS(outside));
        /* the default pool's free 16 MiB, not the graph pool's free 12 MiB (a better fit) */
        g_assert_cmpuint(live_block(a, 11).addr, ==, D + 4 * MIB);
        /* no default small segment: a new one, not the MemPool's or graph pool's free space */
        g_assert_cmpuint(reserved(a), ==, 44 * MIB + 2 * MIB);
        g_assert_cmpuint(pool_reserved(a, 0, FALSE), ==, 22 * MIB);
        run_steps(b, inside, G_N_ELEMENTS(inside));
        g_assert_cmpuint(live_block(b, 11).addr, ==, D + 32 * MIB + 8 * MIB);
        g_assert_cmpuint(live_block(b, 12).addr, ==, D + 96 * MIB + 512 * 1024);
        g_assert_cmpuint(reserved(b), ==, 44 * MIB);
        g_assert_cmpuint(pool_reserved(b, graph, FALSE), ==, 22 * MIB);
        g_assert_cmpuint(pool_reserved(b, 1, FALSE), ==, 2 * MIB);
    }
}

/* A snapshot whose trace allocates into a graph pool and a released MemPool validates exactly. */
static void
test_validate_exact(void)
{
    g_autofree char *path = fsim_test_trace_path("ok-torch-pools-trace.pickle");
    g_auto(FsimTestRun) run = {0};

    if (!fsim_test_have_binary())
        return;
    run = fsim_test_run("validate", path, NULL);
    g_assert_cmpint(run.status, ==, 0);
    g_assert_nonnull(strstr(run.out, "exact"));
}

/* PyTorch's devlog: 8 x 16 MiB then 4 x 32 MiB captured into one pool, everything freed in
 * between, end at 256 MiB; the reverse at 128 MiB; expandable segments: the same both ways. */
static uint64_t
devlog_captures(const char *policy, gboolean small_first)
{
    g_autoptr(FsimEngine) engine = engine_new(policy, "1GiB", NULL, NULL, NULL);
    const uint64_t sizes[2] = {small_first ? 16 * MIB : 32 * MIB,
                               small_first ? 32 * MIB : 16 * MIB};
    const uint64_t counts[2] = {small_first ? 8 : 4, small_first ? 4 : 8};
    uint64_t id = 1;

    for (int graph = 0; graph < 2; graph++) {
        const Step begin[] = {BEGIN(9, 0)};
        const Step end[] = {END(9, 0)};

        run_steps(engine, begin, 1);
        for (uint64_t i = 0; i < counts[graph]; i++) {
            const Step alloc[] = {ALLOC(id + i, sizes[graph])};

            run_steps(engine, alloc, 1);
        }
        for (uint64_t i = 0; i < counts[graph]; i++) {
            const Step free_step[] = {FREE(id + i)};

            run_steps(engine, free_step, 1);
        }
        id += counts[graph];
        run_steps(engine, end, 1);
    }
    return pool_reserved(engine, 9, TRUE);
}

static void
test_devlog_capture_order(void)
{
    g_assert_cmpuint(devlog_captures("caching", TRUE), ==, 256 * MIB);
    g_assert_cmpuint(devlog_captures("caching", FALSE), ==, 128 * MIB);
    g_assert_cmpuint(devlog_captures("expandable", TRUE), ==, 140 * MIB);
    g_assert_cmpuint(devlog_captures("expandable", FALSE), ==, 140 * MIB);
}

/* `synth serve --cuda-graphs`: the shared pool the graphs end with, by capture order. */
static uint64_t
graph_pool_peak(const char *policy, const char *order)
{
    FsimServeConfig config;
    const FsimModelShape *model = fsim_model_lookup("llama2-7b");
    FsimDist prompt = {0}, output = {0};
    g_auto(GStrv) parts = g_strsplit(order, ",", -1);
    guint n = g_strv_length(parts);
    g_autofree uint64_t *batches = g_new(uint64_t, n);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimEngine) engine = engine_new(policy, "80GiB", NULL, NULL, NULL);
    FsimSynth *synth;
    FsimEvent ev;
    uint64_t peak;

    for (guint i = 0; i < n; i++)
        batches[i] = g_ascii_strtoull(parts[i], NULL, 10);
    g_assert_nonnull(model);
    fsim_serve_config_init(&config);
    config.model = *model;
    config.requests = 0; /* the captures alone */
    g_assert_true(fsim_dist_parse("fixed:100", FALSE, &prompt, &error));
    g_assert_true(fsim_dist_parse("fixed:100", FALSE, &output, &error));
    config.prompt = &prompt;
    config.output = &output;
    config.graph_batches = batches;
    config.n_graph_batches = n;
    synth = fsim_synth_serve_new(&config, &error);
    g_assert_no_error(error);
    while (fsim_synth_next(synth, &ev, &error))
        g_assert_true(fsim_engine_process(engine, &ev, &error));
    g_assert_no_error(error);
    fsim_synth_free(synth);
    fsim_dist_clear(&prompt);
    fsim_dist_clear(&output);
    peak = pool_reserved(engine, 1, TRUE);
    g_test_message("%s %s: graph pool %" G_GUINT64_FORMAT " MiB", policy, order, peak / MIB);
    return peak;
}

static void
test_serve_capture_order(void)
{
    const char *increasing = "1,2,4,8,16,32,64,128,256,512";
    const char *decreasing = "512,256,128,64,32,16,8,4,2,1";
    uint64_t up = graph_pool_peak("caching", increasing);
    uint64_t down = graph_pool_peak("caching", decreasing);
    uint64_t es_up = graph_pool_peak("expandable", increasing);
    uint64_t es_down = graph_pool_peak("expandable", decreasing);

    /* increasing order fragments the shared pool, decreasing does not (170 and 140 MiB, of which
     * 125 MiB are the graphs' outputs, kept) */
    g_assert_cmpuint(up, >, down + down / 8);
    /* expandable segments: order hardly matters (144 and 142 MiB) */
    g_assert_cmpuint(MAX(es_up, es_down) - MIN(es_up, es_down), <=, down / 20);
    g_assert_cmpuint(es_up, <, up);
}

/* `fit` and `tune` work on a serving trace with CUDA graphs, and `replay` gives the graphs'
 * pool its share of the capacity the run needs: 20 requests, graphs for batches 1-64 captured
 * smallest first.  fit: expandable segments need less than caching; tune recommends them; the
 * graph pool (7 references, one per graph) holds part of caching's needed capacity. */
static void
test_serve_fit_tune(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *trace = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *results;
    JsonArray *pools;
    JsonObject *graphs;
    int64_t caching, expandable;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    trace = g_build_filename(dir, "serve.trace", NULL);
    {
        g_auto(FsimTestRun) synth = fsim_test_run(
            "synth", "serve", "--model", "llama2-7b", "--max-batch", "64", "--requests", "20",
            "--cuda-graphs", "1,2,4,8,16,32,64", "-o", trace, NULL);
        g_assert_cmpint(synth.status, ==, 0);
    }
    {
        g_auto(FsimTestRun) fit =
            fsim_test_run("fit", trace, "-p", "caching,expandable", "--json", NULL);

        g_assert_cmpint(fit.status, ==, 0);
        results = json_object_get_array_member(fsim_test_parse_object(parser, fit.out), "results");
        caching =
            json_object_get_int_member(json_array_get_object_element(results, 0), "needed_bytes");
        expandable =
            json_object_get_int_member(json_array_get_object_element(results, 1), "needed_bytes");
        g_assert_cmpint(expandable, <, caching);
    }
    {
        g_auto(FsimTestRun) tune = fsim_test_run("tune", trace, "--json", NULL);

        g_assert_cmpint(tune.status, ==, 0);
        g_assert_cmpstr(json_object_get_string_member(
                            json_object_get_object_member(fsim_test_parse_object(parser, tune.out),
                                                          "recommended"),
                            "config"),
                        ==, "expandable_segments:True");
    }
    {
        g_auto(FsimTestRun) replay =
            fsim_test_run("replay", trace, "-p", "caching", "--json", NULL);
        JsonObject *run;
        int64_t share;

        g_assert_cmpint(replay.status, ==, 0);
        run = json_array_get_object_element(
            json_object_get_array_member(fsim_test_parse_object(parser, replay.out), "runs"), 0);
        g_assert_cmpint(json_object_get_int_member(run, "needed_bytes"), ==, caching);
        pools = json_object_get_array_member(run, "pools");
        g_assert_cmpuint(json_array_get_length(pools), ==, 2);
        graphs = json_array_get_object_element(pools, 1);
        g_assert_cmpint(json_object_get_int_member(graphs, "pool"), ==, 1);
        g_assert_cmpint(json_object_get_int_member(graphs, "use_count"), ==, 7);
        share = json_object_get_int_member(graphs, "needed_bytes");
        g_assert_cmpint(share, >, 0);
        g_assert_cmpint(share + json_object_get_int_member(json_array_get_object_element(pools, 0),
                                                           "needed_bytes"),
                        <=, caching);
    }
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pools/isolation", test_isolation);
    g_test_add_func("/pools/shared-pool-reuse", test_shared_pool_reuse);
    g_test_add_func("/pools/small-large-split", test_small_large_split);
    g_test_add_func("/pools/release", test_release);
    g_test_add_func("/pools/no-release-during-capture", test_no_release_during_capture);
    g_test_add_func("/pools/newest-scope", test_newest_scope);
    g_test_add_func("/pools/no-split", test_no_split);
    g_test_add_func("/pools/use-on-oom", test_use_on_oom);
    g_test_add_func("/pools/seed-state-only", test_seed_state_only);
    g_test_add_func("/pools/validate-exact", test_validate_exact);
    g_test_add_func("/pools/devlog-capture-order", test_devlog_capture_order);
    g_test_add_func("/pools/serve-capture-order", test_serve_capture_order);
    g_test_add_func("/pools/serve-fit-tune", test_serve_fit_tune);
    return g_test_run();
}
