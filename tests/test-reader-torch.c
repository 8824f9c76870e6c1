/* SPDX-License-Identifier: MIT */
/*
 * The PyTorch snapshot reader (src/readers/torch*.c): hand-made snapshots of every generation
 * (tests/data/traces/gen-torch.py) checked event by event, hostile and broken pickles, a
 * snapshot truncated at every byte, and the real snapshots of FRAGSIM_SHARED_TRACES (a
 * directory; the tests skip when it is unset and fail when it is set and a file is missing),
 * pinned against figures computed independently with CPython (tests/data/traces/
 * torch-expected.py).  The CLI binary that CTest names in FRAGSIM_BINARY runs `info --json`,
 * `convert` and `replay` on them.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <json-glib/json-glib.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "readers/torch-reader.h"
#include "test-util.h"

#define MiB ((uint64_t)1 << 20)

/* ---- helpers ------------------------------------------------------------------------------- */

static FsimTrace *
open_ok(const char *name)
{
    g_autofree char *path = fsim_test_trace_path(name);
    g_autoptr(GError) error = NULL;
    FsimTrace *trace = fsim_trace_open(path, &error);

    g_assert_no_error(error);
    g_assert_nonnull(trace);
    g_assert_cmpstr(fsim_trace_format_name(trace), ==, "torch");
    return trace;
}

typedef struct {
    GArray *events; /* FsimEvent, labels replaced by indices into labels (as pointers) */
    GPtrArray *labels;
} Events;

static void
events_clear(Events *e)
{
    g_clear_pointer(&e->events, g_array_unref);
    g_clear_pointer(&e->labels, g_ptr_array_unref);
}

static void
read_events(FsimTrace *trace, uint32_t device, Events *out)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, device, &error);
    FsimEvent ev;

    g_assert_no_error(error);
    out->events = g_array_new(FALSE, FALSE, sizeof(FsimEvent));
    out->labels = g_ptr_array_new_with_free_func(g_free);
    while (fsim_trace_stream_next(stream, &ev, &error)) {
        g_assert_cmpuint(ev.device, ==, device);
        if (ev.kind == FSIM_EV_MARK) {
            g_assert_nonnull(ev.label);
            g_ptr_array_add(out->labels, g_strdup(ev.label));
        } else {
            g_assert_null(ev.label);
            g_ptr_array_add(out->labels, NULL);
        }
        ev.label = NULL;
        g_array_append_val(out->events, ev);
    }
    g_assert_no_error(error);
}

typedef struct {
    FsimTime time;
    uint64_t index;
    FsimEventKind kind;
    uint64_t id;
    uint64_t size;
    uint64_t stream;
    FsimAddr addr;
    uint32_t flags;
    const char *label;
} Expected;

static void
check_events(const Events *got, const Expected *expected, gsize n)
{
    g_assert_cmpuint(got->events->len, ==, n);
    for (gsize i = 0; i < n; i++) {
        const FsimEvent *ev = &g_array_index(got->events, FsimEvent, i);

        g_test_message("event %" G_GSIZE_FORMAT, i);
        g_assert_cmpuint(ev->time, ==, expected[i].time);
        g_assert_cmpuint(ev->index, ==, expected[i].index);
        g_assert_cmpint(ev->kind, ==, expected[i].kind);
        g_assert_cmpuint(ev->id, ==, expected[i].id);
        g_assert_cmpuint(ev->size, ==, expected[i].size);
        g_assert_cmpuint(ev->stream, ==, expected[i].stream);
        g_assert_cmpuint(ev->addr, ==, expected[i].addr);
        g_assert_cmpuint(ev->flags, ==, expected[i].flags);
        g_assert_cmpstr(g_ptr_array_index(got->labels, i), ==, expected[i].label);
    }
}

static void
check_segment(const FsimSeedSegment *seg, FsimAddr addr, uint64_t size, uint64_t stream,
              FsimPool pool, gboolean expandable)
{
    g_assert_cmpuint(seg->addr, ==, addr);
    g_assert_cmpuint(seg->size, ==, size);
    g_assert_cmpuint(seg->stream, ==, stream);
    g_assert_cmpint(seg->pool, ==, pool);
    g_assert_cmpint(seg->expandable, ==, expandable);
}

static void
check_block(const FsimSeedBlock *block, uint64_t id, FsimAddr addr, uint64_t size,
            uint64_t requested, uint64_t stream, gboolean pending)
{
    g_assert_cmpuint(block->id, ==, id);
    g_assert_cmpuint(block->addr, ==, addr);
    g_assert_cmpuint(block->size, ==, size);
    g_assert_cmpuint(block->requested, ==, requested);
    g_assert_cmpuint(block->stream, ==, stream);
    g_assert_cmpint(block->pending_free, ==, pending);
}

static void
check_outcome(const FsimOutcome *o, uint64_t index, FsimOutcomeKind kind, FsimAddr addr,
              uint64_t size, uint64_t stream, uint64_t device_free)
{
    g_assert_cmpuint(o->index, ==, index);
    g_assert_cmpint(o->kind, ==, kind);
    g_assert_cmpuint(o->addr, ==, addr);
    g_assert_cmpuint(o->size, ==, size);
    g_assert_cmpuint(o->stream, ==, stream);
    g_assert_cmpuint(o->device_free, ==, device_free);
}

static void
check_devices(FsimTrace *trace, const uint32_t *expected, gsize n)
{
    gsize got_n;
    const uint32_t *got = fsim_trace_devices(trace, &got_n);

    g_assert_cmpuint(got_n, ==, n);
    for (gsize i = 0; i < n; i++)
        g_assert_cmpuint(got[i], ==, expected[i]);
}

/* ---- hand-made snapshots ------------------------------------------------------------------- */

#define A ((uint64_t)0x7F0000000000)
#define B ((uint64_t)0x7F0002000000)
#define C ((uint64_t)0x7F0004000000)

static const Expected minimal_device0[] = {
    {0, 0, FSIM_EV_ALLOC, 5, 1000, 0, A + 6 * MiB, 0, NULL},
    {10000, 1, FSIM_EV_FREE, 2, 0, 0, 0, 0, NULL},
    {10000, 2, FSIM_EV_FREE_COMPLETED, 2, 0, 0, 0, 0, NULL},
    /* an annotation at the time of entries 1 and 2: after them */
    {10000, 3, FSIM_EV_MARK, 0, 0, 0, 0, 0, "START tie"},
    /* a block pending free before recording began: seeded, its free_completed resolves */
    {20000, 3, FSIM_EV_FREE_COMPLETED, 3, 0, 0, 0, 0, NULL},
    /* the next entry is not its free_completed: a record_stream free */
    {30000, 4, FSIM_EV_FREE, 5, 0, 0, 0, FSIM_EVF_DEFERRED, NULL},
    {35000, 5, FSIM_EV_MARK, 0, 0, 0, 0, 0, "START Optimizer.step#AdamW.step"},
    {40000, 5, FSIM_EV_ALLOC, 6, 4096, 0, A + 7 * MiB, 0, NULL},
    {50000, 6, FSIM_EV_FREE_COMPLETED, 5, 0, 0, 0, 0, NULL},
    /* a burst of segment_free: release_cached_blocks */
    {60000, 7, FSIM_EV_EMPTY_CACHE, 0, 0, 0, 0, FSIM_EVF_INFERRED, NULL},
    {80000, 9, FSIM_EV_ALLOC, 7, 3 * MiB, 7, C, 0, NULL},
    /* entries 10 (unknown action) and 11 (snapshot) are skipped; 12 is an OOM: an outcome, and
     * the failed request replayed then freed at once */
    {90000, 12, FSIM_EV_ALLOC, 8, 1u << 30, 7, 0, FSIM_EVF_RECORDED_OOM, NULL},
    {90000, 12, FSIM_EV_FREE, 8, 0, 7, 0, FSIM_EVF_RECORDED_OOM, NULL},
    /* entry 13 goes back in time: clamped */
    {90000, 13, FSIM_EV_ALLOC, 9, 512, 7, C + 3 * MiB, 0, NULL},
    {100000, 14, FSIM_EV_FREE, 9, 0, 7, 0, 0, NULL},
    {100000, 15, FSIM_EV_FREE_COMPLETED, 9, 0, 7, 0, 0, NULL},
    /* a block outside every segment (dropped from the state): a fresh id, unmatched */
    {110000, 16, FSIM_EV_FREE, 10, 0, 0, 0, 0, NULL},
    {110000, 17, FSIM_EV_FREE_COMPLETED, 10, 0, 0, 0, 0, NULL},
    {120000, 18, FSIM_EV_EMPTY_CACHE, 0, 0, 0, 0, FSIM_EVF_INFERRED, NULL},
    {200000, 20, FSIM_EV_MARK, 0, 0, 0, 0, 0, "END Optimizer.step#AdamW.step"},
};

static const Expected minimal_device1[] = {
    /* no time_us: 1 us per entry */
    {0, 0, FSIM_EV_ALLOC, 1, 700, 0, 0x7E0000000000, 0, NULL},
    {1000, 1, FSIM_EV_FREE, 1, 0, 0, 0, 0, NULL},
    {2000, 2, FSIM_EV_FREE_COMPLETED, 1, 0, 0, 0, 0, NULL},
};

static void
check_minimal(const char *name)
{
    g_autoptr(FsimTrace) trace = open_ok(name);
    const uint32_t devices[] = {0, 1};
    const FsimInitialState *state;
    const FsimOutcome *outcomes;
    gsize n;
    Events events = {0};

    check_devices(trace, devices, G_N_ELEMENTS(devices));

    read_events(trace, 0, &events);
    check_events(&events, minimal_device0, G_N_ELEMENTS(minimal_device0));
    events_clear(&events);
    read_events(trace, 1, &events);
    check_events(&events, minimal_device1, G_N_ELEMENTS(minimal_device1));
    events_clear(&events);

    /* Segment C was allocated in the trace; B and two more were freed by it. */
    state = fsim_trace_initial_state(trace, 0);
    g_assert_nonnull(state);
    g_assert_cmpuint(state->n_segments, ==, 4);
    check_segment(&state->segments[0], A, 20 * MiB, 0, FSIM_POOL_LARGE, FALSE);
    check_segment(&state->segments[1], B, 2 * MiB, 0, FSIM_POOL_SMALL, FALSE);
    check_segment(&state->segments[2], B + 4 * MiB, 2 * MiB, 0, FSIM_POOL_SMALL, FALSE);
    check_segment(&state->segments[3], B + 6 * MiB, 2 * MiB, 0, FSIM_POOL_SMALL, FALSE);
    g_assert_cmpuint(state->n_blocks, ==, 4);
    /* alive throughout: the final size */
    check_block(&state->blocks[0], 1, A, 2 * MiB, 2 * MiB - 100, 0, FALSE);
    /* freed in the trace: round_size of the request */
    check_block(&state->blocks[1], 2, A + 2 * MiB, MiB, MiB, 0, FALSE);
    check_block(&state->blocks[2], 3, A + 4 * MiB, 512, 100, 0, TRUE);
    /* pending free in the final state, never in the trace */
    check_block(&state->blocks[3], 4, A + 8 * MiB, 512, 300, 0, TRUE);

    state = fsim_trace_initial_state(trace, 1);
    g_assert_nonnull(state);
    g_assert_cmpuint(state->n_segments, ==, 1);
    check_segment(&state->segments[0], 0x7E0000000000, 2 * MiB, 0, FSIM_POOL_SMALL, FALSE);
    g_assert_cmpuint(state->n_blocks, ==, 0);

    outcomes = fsim_trace_outcomes(trace, 0, &n);
    g_assert_cmpuint(n, ==, 5);
    check_outcome(&outcomes[0], 7, FSIM_OUTCOME_SEGMENT_FREE, B, 2 * MiB, 0, 0);
    check_outcome(&outcomes[1], 8, FSIM_OUTCOME_SEGMENT_ALLOC, C, 20 * MiB, 7, 0);
    check_outcome(&outcomes[2], 12, FSIM_OUTCOME_OOM, 0, (uint64_t)1 << 30, 7, 123456);
    check_outcome(&outcomes[3], 18, FSIM_OUTCOME_SEGMENT_FREE, B + 4 * MiB, 2 * MiB, 0, 0);
    check_outcome(&outcomes[4], 19, FSIM_OUTCOME_SEGMENT_FREE, B + 6 * MiB, 2 * MiB, 0, 0);
    fsim_trace_outcomes(trace, 1, &n);
    g_assert_cmpuint(n, ==, 0);
}

static void
test_minimal(void)
{
    check_minimal("ok-torch-minimal.pickle");
}

static void
test_gzip(void)
{
    check_minimal("ok-torch-minimal.pickle.gz");
}

static void
test_minimal_info(void)
{
    g_autoptr(FsimTrace) trace = open_ok("ok-torch-minimal.pickle");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTraceInfo) info = fsim_trace_describe(trace, &error);
    const FsimTraceDeviceInfo *dev;
    static const char *const settings[] = {
        "PYTORCH_CUDA_ALLOC_CONF",
        "",
        "expandable_segments",
        "False",
        "garbage_collection_threshold",
        "0.6",
        "max_split_size",
        "268435456",
        "release_lock_on_cudamalloc",
        "False",
        "roundup_power2_divisions",
        ("{'1': 4, '2': 4, '4': 0, '8': 0, '16': 0, '32': 0, '64': 0, '128': 0, '256': 0, '512': "
         "0, '1024': 0, '2048': 0, '4096': 0, '8192': 0, '16384': 0, '32768': 0}"),
    };

    g_assert_no_error(error);
    g_assert_cmpstr(info->format, ==, "torch");
    g_assert_cmpuint(info->annotations, ==, 5);
    g_assert_cmpuint(info->devices->len, ==, 2);
    dev = &g_array_index(info->devices, FsimTraceDeviceInfo, 0);
    g_assert_cmpuint(dev->device, ==, 0);
    g_assert_cmpuint(dev->events, ==, 20);
    g_assert_cmpuint(dev->actions->len, ==, 8);
    g_assert_cmpuint(fsim_test_action_count(dev, "alloc"), ==, 4);
    g_assert_cmpuint(fsim_test_action_count(dev, "free_requested"), ==, 4);
    g_assert_cmpuint(fsim_test_action_count(dev, "free_completed"), ==, 5);
    g_assert_cmpuint(fsim_test_action_count(dev, "segment_alloc"), ==, 1);
    g_assert_cmpuint(fsim_test_action_count(dev, "segment_free"), ==, 3);
    g_assert_cmpuint(fsim_test_action_count(dev, "snapshot"), ==, 1);
    g_assert_cmpuint(fsim_test_action_count(dev, "oom"), ==, 1);
    g_assert_cmpuint(fsim_test_action_count(dev, "annotate"), ==, 1); /* unknown: counted */
    g_assert_cmpuint(dev->segments, ==, 2);
    g_assert_cmpuint(dev->reserved_bytes, ==, 40 * MiB);
    g_assert_cmpuint(dev->streams, ==, 2);
    dev = &g_array_index(info->devices, FsimTraceDeviceInfo, 1);
    g_assert_cmpuint(dev->device, ==, 1);
    g_assert_cmpuint(dev->events, ==, 3);
    g_assert_cmpuint(dev->segments, ==, 1);
    g_assert_cmpuint(dev->reserved_bytes, ==, 2 * MiB);

    g_assert_nonnull(info->settings);
    g_assert_cmpuint(info->settings->len, ==, G_N_ELEMENTS(settings));
    for (guint i = 0; i < info->settings->len; i++)
        g_assert_cmpstr(g_ptr_array_index(info->settings, i), ==, settings[i]);
    g_assert_cmpstr(fsim_trace_alloc_conf(trace), ==,
                    "max_split_size_mb:256,garbage_collection_threshold:0.6,"
                    "roundup_power2_divisions:[1:4,2:4,4:0,8:0,16:0,32:0,64:0,128:0,256:0,512:0,"
                    "1024:0,2048:0,4096:0,8192:0,16384:0,32768:0]");
}

#define POOL_GRAPH   ((uint64_t)1 << 32) /* MempoolId_t (1, 0) */
#define POOL_MEMPOOL ((uint64_t)1)       /* (0, 1) */

/* Private-pool segments of a state-only snapshot keep their pools. */
static void
test_pools_state(void)
{
    const uint64_t D = 0x7F4000000000;
    g_autoptr(FsimTrace) trace = open_ok("ok-torch-pools-state.pickle");
    const FsimInitialState *state = fsim_trace_initial_state(trace, 0);
    static const uint64_t pools[] = {0, POOL_GRAPH, POOL_MEMPOOL, POOL_GRAPH};

    g_assert_nonnull(state);
    g_assert_cmpuint(state->n_segments, ==, 4);
    for (gsize i = 0; i < 4; i++) {
        check_segment(&state->segments[i], D + i * 32 * MiB, i < 2 ? 20 * MiB : 2 * MiB, 0,
                      i < 2 ? FSIM_POOL_LARGE : FSIM_POOL_SMALL, FALSE);
        g_assert_cmpuint(state->segments[i].pool_id, ==, pools[i]);
    }
    g_assert_cmpuint(state->n_blocks, ==, 4);
    check_block(&state->blocks[2], 3, D + 64 * MiB, MiB, MiB, 0, FALSE);
}

/* Each allocation goes to the pool of the segment incarnation holding its address then, or to
 * the pool its entry names; a released pool's reference is dropped before its burst. */
static void
test_pools_trace(void)
{
    const uint64_t D = 0x7F4000000000;
    const uint64_t X = D + 32 * MiB;
    const uint64_t Y = D + 64 * MiB;
    const uint64_t G = POOL_GRAPH;
    const uint64_t M = 2; /* (0, 2) */
    const Expected expected[] = {
        {1000, 1, FSIM_EV_ALLOC, 2, 8 * MiB, 0, X, 0, NULL},
        {2000, 2, FSIM_EV_FREE, 2, 0, 0, 0, 0, NULL},
        {3000, 3, FSIM_EV_FREE_COMPLETED, 2, 0, 0, 0, 0, NULL},
        {4000, 4, FSIM_EV_EMPTY_CACHE, 0, 0, 0, 0, FSIM_EVF_INFERRED, NULL},
        {6000, 6, FSIM_EV_POOL_BEGIN, G, 0, 0, 0, 0, NULL},
        {6000, 6, FSIM_EV_ALLOC, 3, 8 * MiB, 0, X, 0, NULL},
        {6000, 6, FSIM_EV_POOL_END, G, 0, 0, 0, 0, NULL},
        {7000, 7, FSIM_EV_POOL_BEGIN, G, 0, 0, 0, 0, NULL},
        {7000, 7, FSIM_EV_ALLOC, 4, 4 * MiB, 0, X + 8 * MiB, 0, NULL},
        {7000, 7, FSIM_EV_POOL_END, G, 0, 0, 0, 0, NULL},
        {7000, 7, FSIM_EV_POOL_RELEASE, G, 0, 0, 0, 0, NULL},
        {8000, 8, FSIM_EV_FREE, 4, 0, 0, 0, 0, NULL},
        {9000, 9, FSIM_EV_FREE_COMPLETED, 4, 0, 0, 0, 0, NULL},
        {11000, 11, FSIM_EV_POOL_BEGIN, M, 0, 0, 0, 0, NULL},
        {11000, 11, FSIM_EV_ALLOC, 5, 4096, 0, Y, 0, NULL},
        {11000, 11, FSIM_EV_POOL_END, M, 0, 0, 0, 0, NULL},
        {12000, 12, FSIM_EV_FREE, 5, 0, 0, 0, 0, NULL},
        {13000, 13, FSIM_EV_FREE_COMPLETED, 5, 0, 0, 0, 0, NULL},
        {14000, 14, FSIM_EV_POOL_RELEASE, M, 0, 0, 0, 0, NULL},
        {14000, 14, FSIM_EV_EMPTY_CACHE, 0, 0, 0, 0, FSIM_EVF_INFERRED, NULL},
    };
    g_autoptr(FsimTrace) trace = open_ok("ok-torch-pools-trace.pickle");
    const FsimInitialState *state = fsim_trace_initial_state(trace, 0);
    Events got = {0};

    g_assert_nonnull(state);
    g_assert_cmpuint(state->n_segments, ==, 1);
    g_assert_cmpuint(state->segments[0].pool_id, ==, 0);
    read_events(trace, 0, &got);
    check_events(&got, expected, G_N_ELEMENTS(expected));
    events_clear(&got);
}

/* convert keeps the scopes and releases: the text trace replays through the engine's checks. */
static void
test_pools_convert(void)
{
    g_autofree char *path = fsim_test_trace_path("ok-torch-pools-trace.pickle");
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-torch-XXXXXX", &error);
    g_autofree char *text = g_build_filename(dir, "pools.trace", NULL);
    g_autofree char *contents = NULL;
    g_auto(FsimTestRun) cli = {0};

    g_assert_no_error(error);
    if (!fsim_test_have_binary())
        return;
    cli = fsim_test_run("convert", path, text, NULL);
    g_assert_cmpint(cli.status, ==, 0);
    g_assert_true(g_file_get_contents(text, &contents, NULL, &error));
    g_assert_nonnull(strstr(contents, "6000 pool_begin 4294967296 0\n"
                                      "6000 alloc 3 8388608 0\n"
                                      "6000 pool_end 4294967296 0\n"));
    g_assert_nonnull(strstr(contents, "14000 pool_release 2\n14000 empty_cache inferred\n"));
    fsim_test_run_clear(&cli);
    cli = fsim_test_run("replay", text, "-p", "caching", NULL);
    g_assert_cmpint(cli.status, ==, 0);
    g_unlink(text);
    g_rmdir(dir);
}

static void
test_expandable(void)
{
    const uint64_t E = 0x7F3000000000;
    const uint64_t F = 0x7F3800000000;
    const Expected expected[] = {
        {1000, 1, FSIM_EV_ALLOC, 2, 8 * MiB, 0, E + 20 * MiB, 0, NULL},
        {2000, 2, FSIM_EV_FREE, 2, 0, 0, 0, 0, NULL},
        {2000, 3, FSIM_EV_FREE_COMPLETED, 2, 0, 0, 0, 0, NULL},
        /* segment_unmap: release_cached_blocks with expandable segments */
        {3000, 4, FSIM_EV_EMPTY_CACHE, 0, 0, 0, 0, FSIM_EVF_INFERRED, NULL},
        {5000, 6, FSIM_EV_ALLOC, 3, 30 * MiB, 0, E + 20 * MiB, 0, NULL},
    };
    g_autoptr(FsimTrace) trace = open_ok("ok-torch-expandable.pickle");
    const FsimInitialState *state = fsim_trace_initial_state(trace, 0);
    const FsimOutcome *outcomes;
    Events events = {0};
    gsize n;

    /* 60 MiB mapped at the end; the maps of the trace undone, its unmap redone. */
    g_assert_nonnull(state);
    g_assert_cmpuint(state->n_segments, ==, 2);
    check_segment(&state->segments[0], E, 20 * MiB, 0, FSIM_POOL_LARGE, TRUE);
    check_segment(&state->segments[1], F, 2 * MiB, 0, FSIM_POOL_SMALL, TRUE);
    g_assert_cmpuint(state->n_blocks, ==, 1);
    check_block(&state->blocks[0], 1, E, 5 * MiB, 5 * MiB, 0, FALSE);
    read_events(trace, 0, &events);
    check_events(&events, expected, G_N_ELEMENTS(expected));
    events_clear(&events);
    outcomes = fsim_trace_outcomes(trace, 0, &n);
    g_assert_cmpuint(n, ==, 3);
    check_outcome(&outcomes[0], 0, FSIM_OUTCOME_SEGMENT_MAP, E + 20 * MiB, 20 * MiB, 0, 0);
    check_outcome(&outcomes[1], 4, FSIM_OUTCOME_SEGMENT_UNMAP, E + 20 * MiB, 20 * MiB, 0, 0);
    check_outcome(&outcomes[2], 5, FSIM_OUTCOME_SEGMENT_MAP, E + 20 * MiB, 40 * MiB, 0, 0);
    g_assert_cmpstr(fsim_trace_alloc_conf(trace), ==, "expandable_segments:True");
}

static void
test_legacy(void)
{
    const uint64_t base = 0x7F1000000000;
    g_autoptr(FsimTrace) trace = open_ok("ok-torch-legacy.pickle");
    const FsimInitialState *state = fsim_trace_initial_state(trace, 0);
    const uint32_t devices[] = {0};
    const FsimOutcome *outcomes;
    Events events = {0};
    gsize n;

    check_devices(trace, devices, 1);
    g_assert_nonnull(state);
    g_assert_cmpuint(state->n_segments, ==, 2);
    check_segment(&state->segments[0], base, 2 * MiB, 0, FSIM_POOL_SMALL, FALSE);
    check_segment(&state->segments[1], base + 64 * MiB, 20 * MiB, 0, FSIM_POOL_LARGE, FALSE);
    g_assert_cmpuint(state->n_blocks, ==, 2);
    /* no addresses: blocks follow each other; requested_size first, else history[0] */
    check_block(&state->blocks[0], 1, base, MiB, MiB, 0, FALSE);
    check_block(&state->blocks[1], 2, base + 80 * MiB, 4 * MiB, 4 * MiB - 7, 0, FALSE);
    /* a snapshot entry (no event) and an OOM: its request replayed, then freed */
    read_events(trace, 0, &events);
    g_assert_cmpuint(events.events->len, ==, 2);
    g_assert_cmpint(g_array_index(events.events, FsimEvent, 0).kind, ==, FSIM_EV_ALLOC);
    g_assert_cmpuint(g_array_index(events.events, FsimEvent, 0).size, ==, 64 * MiB);
    g_assert_cmpuint(g_array_index(events.events, FsimEvent, 0).flags, ==, FSIM_EVF_RECORDED_OOM);
    g_assert_cmpint(g_array_index(events.events, FsimEvent, 1).kind, ==, FSIM_EV_FREE);
    g_assert_cmpuint(g_array_index(events.events, FsimEvent, 1).id, ==,
                     g_array_index(events.events, FsimEvent, 0).id);
    events_clear(&events);
    outcomes = fsim_trace_outcomes(trace, 0, &n);
    g_assert_cmpuint(n, ==, 1);
    check_outcome(&outcomes[0], 1, FSIM_OUTCOME_OOM, 0, 64 * MiB, 0, 777 * MiB);
    g_assert_null(fsim_trace_alloc_conf(trace));
}

static void
test_list(gconstpointer data)
{
    const uint64_t base = 0x7F2000000000;
    g_autoptr(FsimTrace) trace = open_ok(data);
    const FsimInitialState *state = fsim_trace_initial_state(trace, 2);
    const uint32_t devices[] = {2};
    Events events = {0};
    gsize n;

    /* A device with a state and no events is a device. */
    check_devices(trace, devices, 1);
    g_assert_nonnull(state);
    g_assert_cmpuint(state->n_segments, ==, 2);
    check_segment(&state->segments[0], base, 2 * MiB, 0, FSIM_POOL_SMALL, FALSE);
    check_segment(&state->segments[1], base + 32 * MiB, 20 * MiB, 0, FSIM_POOL_LARGE, FALSE);
    g_assert_cmpuint(state->n_blocks, ==, 3);
    check_block(&state->blocks[0], 1, base, 512, 512, 0, FALSE);
    check_block(&state->blocks[1], 2, base + 512, 512, 10, 0, TRUE);
    check_block(&state->blocks[2], 3, base + 32 * MiB, 20 * MiB, 19 * MiB, 0, FALSE);
    read_events(trace, 2, &events);
    g_assert_cmpuint(events.events->len, ==, 0);
    events_clear(&events);
    fsim_trace_outcomes(trace, 2, &n);
    g_assert_cmpuint(n, ==, 0);
    g_assert_null(fsim_trace_initial_state(trace, 0));
}

/* ---- bad input ----------------------------------------------------------------------------- */

static int
error_code(const char *name)
{
    static const struct {
        const char *name;
        FsimTraceError code;
    } codes[] = {
        {"FORBIDDEN", FSIM_TRACE_ERROR_FORBIDDEN}, {"LIMIT", FSIM_TRACE_ERROR_LIMIT},
        {"TRUNCATED", FSIM_TRACE_ERROR_TRUNCATED}, {"TYPE", FSIM_TRACE_ERROR_TYPE},
        {"NUMBER", FSIM_TRACE_ERROR_NUMBER},       {"SYNTAX", FSIM_TRACE_ERROR_SYNTAX},
        {"SIZE", FSIM_TRACE_ERROR_SIZE},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(codes); i++) {
        if (strcmp(codes[i].name, name) == 0)
            return codes[i].code;
    }
    g_assert_not_reached();
}

/* Every bad-torch-* file fails with the code (and byte offset) listed in torch-bad.txt. */
static void
test_bad(void)
{
    g_autofree char *listing = fsim_test_trace_path("torch-bad.txt");
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    g_autoptr(GError) error = NULL;
    guint checked = 0;

    g_file_get_contents(listing, &text, NULL, &error);
    g_assert_no_error(error);
    lines = g_strsplit(text, "\n", -1);
    for (gsize i = 0; lines[i] != NULL; i++) {
        g_auto(GStrv) fields = NULL;
        g_autofree char *path = NULL;
        g_autofree char *prefix = NULL;
        g_autoptr(FsimTrace) trace = NULL;

        if (lines[i][0] == '#' || lines[i][0] == '\0')
            continue;
        fields = g_strsplit(lines[i], " ", -1);
        g_assert_cmpuint(g_strv_length(fields), ==, 3);
        path = fsim_test_trace_path(fields[0]);
        g_test_message("%s", fields[0]);
        trace = fsim_trace_open(path, &error);
        g_assert_null(trace);
        g_assert_error(error, FSIM_TRACE_ERROR, error_code(fields[1]));
        /* FILE: byte N: ... */
        if (strcmp(fields[2], "-") == 0)
            prefix = g_strdup_printf("%s: byte ", path);
        else
            prefix = g_strdup_printf("%s: byte %s: ", path, fields[2]);
        g_assert_true(g_str_has_prefix(error->message, prefix));
        g_clear_error(&error);
        checked++;
    }
    g_assert_cmpuint(checked, ==, 13);
}

/* The reader's own budget, not the unpickler's limit, refuses the shared-container bomb. */
static void
test_shared_containers(void)
{
    g_autofree char *path = fsim_test_trace_path("bad-torch-shared.pickle");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);

    g_assert_null(trace);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT);
    g_assert_nonnull(strstr(error->message, "more entries than a file of"));
}

/* A snapshot cut at every byte offset fails cleanly (ASan/UBSan builds watch for the rest). */
static void
test_truncated(void)
{
    g_autofree char *path = fsim_test_trace_path("ok-torch-minimal.pickle");
    g_autofree char *contents = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-torch-XXXXXX", &error);
    g_autofree char *cut = NULL;
    gsize len;

    g_assert_no_error(error);
    cut = g_build_filename(dir, "cut.pickle", NULL);
    g_file_get_contents(path, &contents, &len, &error);
    g_assert_no_error(error);
    for (gsize n = 0; n < len; n++) {
        g_autoptr(FsimTrace) trace = NULL;

        g_file_set_contents(cut, contents, (gssize)n, &error);
        g_assert_no_error(error);
        trace = fsim_trace_open(cut, &error);
        g_assert_null(trace);
        g_assert_nonnull(error);
        g_assert_true(error->domain == FSIM_TRACE_ERROR);
        g_clear_error(&error);
    }
    g_unlink(cut);
    g_rmdir(dir);
}

/* torch_npu is told by the frames' file names even where no "torch_npu/" is in the file's bytes:
 * a protocol 0 pickle spells it with an escape (the reader skips the frames only when the bytes
 * rule it out), with or without stacks. */
static void
test_npu_frames_escaped(void)
{
    static const char escaped[] = "(dp0\nVdevice_traces\np1\n(lp2\n(lp3\n(dp4\nVaction\np5\n"
                                  "Valloc\np6\nsVaddr\np7\nI1024\nsVsize\np8\nI512\nsVstream\n"
                                  "p9\nI0\nsVframes\np10\n(lp11\n(dp12\nVfilename\np13\n"
                                  "V/x/torch\\u005fnpu/npu/memory.py\np14\nsVline\np15\nI3\n"
                                  "sVname\np16\nVf\np17\nsasaas.";
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-torch-XXXXXX", &error);
    g_autofree char *path = NULL;
    g_autofree char *other = g_strdup(escaped);

    g_assert_no_error(error);
    path = g_build_filename(dir, "npu.pickle", NULL);
    memcpy(strstr(other, "\\u005fnpu"), "\\u005fgpu", 9); /* torch_gpu: no torch_npu */
    for (int k = 0; k < 4; k++) {
        g_autoptr(FsimTrace) trace = NULL;

        g_file_set_contents(path, k < 2 ? escaped : other, -1, &error);
        g_assert_no_error(error);
        trace = k % 2 == 0 ? fsim_trace_open(path, &error)
                           : fsim_trace_open_without_stacks(path, &error);
        g_assert_no_error(error);
        g_assert_cmpint(trace->frames_name_torch_npu, ==, k < 2);
    }
    g_unlink(path);
    g_rmdir(dir);
}

/* ---- the shared snapshots ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    uint64_t count;
} PinAction;

typedef struct {
    uint32_t device;
    uint64_t entries;
    PinAction actions[8];
    uint64_t final_segments;
    uint64_t final_reserved;
    uint64_t start_segments;
    uint64_t start_reserved;
    uint64_t start_blocks;
    uint64_t start_block_bytes;
    uint64_t start_pending;
    uint64_t bursts; /* inferred empty_cache events */
    uint64_t marks;
} PinDevice;

typedef struct {
    const char *file;
    uint64_t annotations;
    const char *alloc_conf; /* NULL: none */
    guint n_devices;
    PinDevice devices[3];
} Pin;

/* From `python3 tests/data/traces/torch-expected.py $FRAGSIM_SHARED_TRACES`. */
static const Pin shared_pins[] = {
    {"Constructor-Sun__code_location__memory_snapshot.pickle",
     4,
     "expandable_segments:True",
     3,
     {{0,
       6445,
       {{"alloc", 2434}, {"free_completed", 1918}, {"free_requested", 1918}, {"segment_map", 175}},
       2,
       8541700096,
       0,
       0,
       0,
       0,
       0,
       0,
       4},
      {1,
       596,
       {{"alloc", 199},
        {"free_completed", 175},
        {"free_requested", 175},
        {"oom", 1},
        {"segment_map", 40},
        {"segment_unmap", 6}},
       8,
       84202749952,
       0,
       0,
       0,
       0,
       0,
       1,
       0},
      {2,
       882,
       {{"alloc", 392}, {"free_completed", 206}, {"free_requested", 206}, {"segment_map", 78}},
       2,
       21883781120,
       0,
       0,
       0,
       0,
       0,
       0,
       0}}},
    {"Maphsge4__select_n__snapshot.ec5be11.pickle",
     0,
     NULL,
     1,
     {{0,
       10327,
       {{"alloc", 3058},
        {"free_completed", 3053},
        {"free_requested", 3053},
        {"segment_alloc", 584},
        {"segment_free", 579}},
       136,
       18566086656,
       131,
       14036238336,
       195,
       14034690048,
       0,
       39,
       0}}},
    {"MercuryB1__SQAttn__cuda_memory_snapshot.pickle",
     0,
     "",
     1,
     {{0,
       9576,
       {{"alloc", 2912},
        {"free_completed", 2912},
        {"free_requested", 2912},
        {"segment_alloc", 420},
        {"segment_free", 420}},
       4,
       230686720,
       4,
       230686720,
       5,
       215105536,
       0,
       28,
       0}}},
    {"Muduard__LayoutEditing__memory_snapshot.pkl",
     0,
     NULL,
     1,
     {{1, 0, {{NULL, 0}}, 255, 3649044480, 255, 3649044480, 1938, 3353639424, 0, 0, 0}}},
    {"Yiyi-philosophy__LLM-inference__oom_snapshot.pickle",
     0,
     NULL,
     1,
     {{0, 1, {{"snapshot", 1}}, 176, 11844714496, 176, 11844714496, 460, 11840159744, 0, 0, 0}}},
    {"albi2__thesis-text-to-SQL__dump_snapshot.27df9f5.pickle",
     0,
     "expandable_segments:True,max_split_size_mb:128",
     2,
     {{0, 0, {{NULL, 0}}, 2, 44040192, 2, 44040192, 3, 8529920, 0, 0, 0},
      {1, 0, {{NULL, 0}}, 1, 41943040, 1, 41943040, 1, 8519680, 0, 0, 0}}},
    {"bcrafton__assignment2-systems__memory_snapshot.06f51ae.pickle",
     2,
     "",
     1,
     {{0,
       6486,
       {{"alloc", 2162}, {"free_completed", 2162}, {"free_requested", 2162}},
       96,
       4238344192,
       96,
       4238344192,
       447,
       3068886016,
       0,
       0,
       2}}},
    {"kkaitlyn111__cs336-a2-systems__memory_files__memory_ctx128_forward.pickle",
     0,
     "",
     1,
     {{0,
       4657,
       {{"alloc", 2058},
        {"free_completed", 1155},
        {"free_requested", 1155},
        {"segment_alloc", 289}},
       516,
       19667091456,
       227,
       13763608576,
       324,
       13763491840,
       0,
       0,
       0}}},
    {"silmont2000__assignment2-systems__mem_snapshot.pickle",
     0,
     "",
     1,
     {{0,
       97,
       {{"alloc", 36}, {"free_completed", 26}, {"free_requested", 26}, {"segment_alloc", 9}},
       9,
       3781165056,
       0,
       0,
       0,
       0,
       0,
       0,
       0}}},
};

static guint
pin_actions(const PinDevice *pin)
{
    guint n = 0;

    while (n < G_N_ELEMENTS(pin->actions) && pin->actions[n].name != NULL)
        n++;
    return n;
}

static void
test_shared_info(gconstpointer data)
{
    const Pin *pin = data;
    g_autofree char *path = fsim_test_shared_trace(pin->file);
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceInfo) info = NULL;
    g_autoptr(GError) error = NULL;

    if (path == NULL)
        return;
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(fsim_trace_format_name(trace), ==, "torch");
    info = fsim_trace_describe(trace, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(info->annotations, ==, pin->annotations);
    g_assert_cmpstr(info->alloc_conf, ==, pin->alloc_conf);
    g_assert_cmpuint(info->devices->len, ==, pin->n_devices);
    for (guint d = 0; d < pin->n_devices; d++) {
        const PinDevice *want = &pin->devices[d];
        const FsimTraceDeviceInfo *dev = &g_array_index(info->devices, FsimTraceDeviceInfo, d);
        guint n = pin_actions(want);

        g_assert_cmpuint(dev->device, ==, want->device);
        g_assert_cmpuint(dev->events, ==, want->entries);
        g_assert_cmpuint(dev->actions->len, ==, n);
        for (guint a = 0; a < n; a++)
            g_assert_cmpuint(fsim_test_action_count(dev, want->actions[a].name), ==,
                             want->actions[a].count);
        g_assert_cmpuint(dev->segments, ==, want->final_segments);
        g_assert_cmpuint(dev->reserved_bytes, ==, want->final_reserved);
    }
}

static uint64_t
action_count_pin(const PinDevice *pin, const char *name)
{
    for (guint a = 0; a < pin_actions(pin); a++) {
        if (strcmp(pin->actions[a].name, name) == 0)
            return pin->actions[a].count;
    }
    return 0;
}

/* The state at trace start, and what the streams carry. */
static void
test_shared_state(gconstpointer data)
{
    const Pin *pin = data;
    g_autofree char *path = fsim_test_shared_trace(pin->file);
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GError) error = NULL;

    if (path == NULL)
        return;
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    for (guint d = 0; d < pin->n_devices; d++) {
        const PinDevice *want = &pin->devices[d];
        const FsimInitialState *state = fsim_trace_initial_state(trace, want->device);
        g_autoptr(GHashTable) known = g_hash_table_new(g_int64_hash, g_int64_equal);
        g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        uint64_t reserved = 0;
        uint64_t block_bytes = 0;
        uint64_t pending = 0;
        uint64_t bursts = 0;
        uint64_t marks = 0;
        uint64_t deferred = 0;
        uint64_t unmatched = 0;
        uint64_t allocs = 0;
        uint64_t recorded_ooms = 0;
        uint64_t outcome_count = 0;
        FsimTime last = 0;
        Events events = {0};
        gsize n_outcomes;

        g_test_message("device %u", want->device);
        if (state != NULL) {
            for (gsize i = 0; i < state->n_segments; i++)
                reserved += state->segments[i].size;
            for (gsize i = 0; i < state->n_blocks; i++) {
                block_bytes += state->blocks[i].size;
                pending += state->blocks[i].pending_free;
                g_array_append_val(ids, state->blocks[i].id);
            }
        }
        g_assert_cmpuint(state != NULL ? state->n_segments : 0, ==, want->start_segments);
        g_assert_cmpuint(reserved, ==, want->start_reserved);
        g_assert_cmpuint(state != NULL ? state->n_blocks : 0, ==, want->start_blocks);
        g_assert_cmpuint(block_bytes, ==, want->start_block_bytes);
        g_assert_cmpuint(pending, ==, want->start_pending);

        read_events(trace, want->device, &events);
        for (guint i = 0; i < ids->len; i++)
            g_hash_table_add(known, &g_array_index(ids, uint64_t, i));
        for (guint i = 0; i < events.events->len; i++) {
            FsimEvent *ev = &g_array_index(events.events, FsimEvent, i);

            g_assert_cmpuint(ev->time, >=, last);
            last = ev->time;
            switch (ev->kind) {
            case FSIM_EV_ALLOC:
                g_assert_false(g_hash_table_contains(known, &ev->id));
                g_assert_cmpuint(ev->size, >=, 1);
                g_hash_table_add(known, &ev->id);
                if ((ev->flags & FSIM_EVF_RECORDED_OOM) != 0)
                    recorded_ooms++;
                else
                    allocs++;
                break;
            case FSIM_EV_FREE:
                unmatched += !g_hash_table_contains(known, &ev->id);
                deferred += (ev->flags & FSIM_EVF_DEFERRED) != 0;
                break;
            case FSIM_EV_FREE_COMPLETED:
                unmatched += !g_hash_table_contains(known, &ev->id);
                break;
            case FSIM_EV_EMPTY_CACHE:
                g_assert_cmpuint(ev->flags, ==, FSIM_EVF_INFERRED);
                bursts++;
                break;
            case FSIM_EV_MARK:
                marks++;
                break;
            default:
                g_assert_not_reached();
            }
        }
        /* Seeded from the final state, every free resolves: no unmatched frees. */
        g_assert_cmpuint(unmatched, ==, 0);
        /* None of the real traces has a record_stream free. */
        g_assert_cmpuint(deferred, ==, 0);
        g_assert_cmpuint(allocs, ==, action_count_pin(want, "alloc"));
        g_assert_cmpuint(recorded_ooms, ==, action_count_pin(want, "oom"));
        g_assert_cmpuint(bursts, ==, want->bursts);
        g_assert_cmpuint(marks, ==, want->marks);
        fsim_trace_outcomes(trace, want->device, &n_outcomes);
        outcome_count = action_count_pin(want, "segment_alloc") +
                        action_count_pin(want, "segment_free") +
                        action_count_pin(want, "segment_map") +
                        action_count_pin(want, "segment_unmap") + action_count_pin(want, "oom");
        g_assert_cmpuint(n_outcomes, ==, outcome_count);
        events_clear(&events);
    }
}

/* ---- through the CLI ----------------------------------------------------------------------- */

static void
test_shared_info_json(gconstpointer data)
{
    const Pin *pin = data;
    g_autofree char *path = fsim_test_shared_trace(pin->file);
    g_auto(FsimTestRun) cli = {0};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root;
    JsonArray *devices;

    if (path == NULL || !fsim_test_have_binary())
        return;
    cli = fsim_test_run("info", "--json", path, NULL);
    g_assert_cmpint(cli.status, ==, 0);
    root = fsim_test_parse_object(parser, cli.out);
    g_assert_cmpstr(json_object_get_string_member(root, "format"), ==, "torch");
    g_assert_cmpint(json_object_get_int_member(root, "annotations"), ==, (gint64)pin->annotations);
    devices = json_object_get_array_member(root, "devices");
    g_assert_cmpuint(json_array_get_length(devices), ==, pin->n_devices);
    for (guint d = 0; d < pin->n_devices; d++) {
        const PinDevice *want = &pin->devices[d];
        JsonObject *dev = json_array_get_object_element(devices, d);
        JsonObject *actions = json_object_get_object_member(dev, "actions");
        guint n = pin_actions(want);

        g_assert_cmpint(json_object_get_int_member(dev, "device"), ==, want->device);
        g_assert_cmpint(json_object_get_int_member(dev, "events"), ==, (gint64)want->entries);
        g_assert_cmpuint(json_object_get_size(actions), ==, n);
        for (guint a = 0; a < n; a++)
            g_assert_cmpint(json_object_get_int_member(actions, want->actions[a].name), ==,
                            (gint64)want->actions[a].count);
        g_assert_cmpint(json_object_get_int_member(dev, "segments"), ==,
                        (gint64)want->final_segments);
        g_assert_cmpint(json_object_get_int_member(dev, "reserved_bytes"), ==,
                        (gint64)want->final_reserved);
    }
}

/* The figures `replay --json` gives on the default device for PyTorch's two models, which
 * reproduce these recordings exactly (fragsim validate): peak reserved and requested memory,
 * simulated OOMs, the recorded OOMs and how many of them the simulation reproduced. */
static const struct {
    const char *file;
    gint64 trace_device;
    const char *policy;
    gint64 peak_reserved, peak_requested, ooms, recorded_ooms, reproduced;
} replay_pins[] = {
    {"Constructor-Sun__code_location__memory_snapshot.pickle", 0, "caching", 9252634624, 8456473388,
     0, 0, 0},
    {"Constructor-Sun__code_location__memory_snapshot.pickle", 0, "expandable", 8541700096,
     8456473388, 0, 0, 0},
    {"Constructor-Sun__code_location__memory_snapshot.pickle", 1, "caching", 84875935744,
     82073008544, 2, 1, 1},
    {"Constructor-Sun__code_location__memory_snapshot.pickle", 1, "expandable", 84202749952,
     84063351764, 1, 1, 1},
    {"Constructor-Sun__code_location__memory_snapshot.pickle", 2, "caching", 22445817856,
     21564645800, 0, 0, 0},
    {"Constructor-Sun__code_location__memory_snapshot.pickle", 2, "expandable", 21883781120,
     21564645800, 0, 0, 0},
    {"Maphsge4__select_n__snapshot.ec5be11.pickle", 0, "caching", 30853300224, 20802383104, 0, 0,
     0},
    {"Maphsge4__select_n__snapshot.ec5be11.pickle", 0, "expandable", 30261903360, 20802383104, 0, 0,
     0},
    {"MercuryB1__SQAttn__cuda_memory_snapshot.pickle", 0, "caching", 6213861376, 4351237120, 0, 0,
     0},
    {"MercuryB1__SQAttn__cuda_memory_snapshot.pickle", 0, "expandable", 4781506560, 4351237120, 0,
     0, 0},
    {"Muduard__LayoutEditing__memory_snapshot.pkl", 1, "caching", 3649044480, 3308174782, 0, 0, 0},
    {"Muduard__LayoutEditing__memory_snapshot.pkl", 1, "expandable", 3649044480, 3308174782, 0, 0,
     0},
    {"Yiyi-philosophy__LLM-inference__oom_snapshot.pickle", 0, "caching", 11844714496, 11840159744,
     0, 0, 0},
    {"Yiyi-philosophy__LLM-inference__oom_snapshot.pickle", 0, "expandable", 11844714496,
     11840159744, 0, 0, 0},
    {"albi2__thesis-text-to-SQL__dump_snapshot.27df9f5.pickle", 0, "caching", 44040192, 8529088, 0,
     0, 0},
    {"albi2__thesis-text-to-SQL__dump_snapshot.27df9f5.pickle", 0, "expandable", 44040192, 8529088,
     0, 0, 0},
    {"albi2__thesis-text-to-SQL__dump_snapshot.27df9f5.pickle", 1, "caching", 41943040, 8519680, 0,
     0, 0},
    {"albi2__thesis-text-to-SQL__dump_snapshot.27df9f5.pickle", 1, "expandable", 41943040, 8519680,
     0, 0, 0},
    {"bcrafton__assignment2-systems__memory_snapshot.06f51ae.pickle", 0, "caching", 4238344192,
     3849232640, 0, 0, 0},
    {"bcrafton__assignment2-systems__memory_snapshot.06f51ae.pickle", 0, "expandable", 4238344192,
     3849232640, 0, 0, 0},
    {"kkaitlyn111__cs336-a2-systems__memory_files__memory_ctx128_forward.pickle", 0, "caching",
     19667091456, 19352504320, 0, 0, 0},
    {"kkaitlyn111__cs336-a2-systems__memory_files__memory_ctx128_forward.pickle", 0, "expandable",
     19528679424, 19352504320, 0, 0, 0},
    {"silmont2000__assignment2-systems__mem_snapshot.pickle", 0, "caching", 3781165056, 3249143816,
     0, 0, 0},
    {"silmont2000__assignment2-systems__mem_snapshot.pickle", 0, "expandable", 3797942272,
     3249143816, 0, 0, 0},
};

static void
check_replay_pins(const char *file, JsonArray *runs)
{
    guint found = 0, expected = 0;

    for (gsize p = 0; p < G_N_ELEMENTS(replay_pins); p++) {
        if (strcmp(replay_pins[p].file, file) != 0)
            continue;
        expected++;
        for (guint i = 0; i < json_array_get_length(runs); i++) {
            JsonObject *run = json_array_get_object_element(runs, i);

            if (strcmp(json_object_get_string_member(run, "policy"), replay_pins[p].policy) != 0 ||
                json_object_get_int_member(run, "trace_device") != replay_pins[p].trace_device)
                continue;
            found++;
            g_assert_cmpstr(json_object_get_string_member(run, "device"), ==, "h100-80gb");
            g_assert_cmpstr(json_object_get_string_member(run, "status"), ==, "complete");
            g_assert_cmpint(json_object_get_int_member(run, "peak_reserved_bytes"), ==,
                            replay_pins[p].peak_reserved);
            g_assert_cmpint(json_object_get_int_member(run, "peak_requested_bytes"), ==,
                            replay_pins[p].peak_requested);
            g_assert_cmpint(json_object_get_int_member(run, "ooms"), ==, replay_pins[p].ooms);
            g_assert_cmpint(json_object_get_int_member(run, "recorded_ooms"), ==,
                            replay_pins[p].recorded_ooms);
            g_assert_cmpint(json_object_get_int_member(run, "recorded_ooms_reproduced"), ==,
                            replay_pins[p].reproduced);
        }
    }
    g_assert_cmpuint(expected, >, 0);
    g_assert_cmpuint(found, ==, expected);
}

static void
test_shared_replay(gconstpointer data)
{
    const Pin *pin = data;
    g_autofree char *path = fsim_test_shared_trace(pin->file);
    g_auto(FsimTestRun) cli = {0};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *runs;

    if (path == NULL || !fsim_test_have_binary())
        return;
    cli = fsim_test_run("replay", "--json", path, NULL);
    g_assert_cmpint(cli.status, ==, 0);
    runs = json_object_get_array_member(fsim_test_parse_object(parser, cli.out), "runs");
    /* one run per policy and device */
    g_assert_cmpuint(json_array_get_length(runs) % pin->n_devices, ==, 0);
    g_assert_cmpuint(json_array_get_length(runs), >=, pin->n_devices);
    for (guint i = 0; i < json_array_get_length(runs); i++) {
        JsonObject *run = json_array_get_object_element(runs, i);

        g_assert_cmpint(json_object_get_int_member(run, "unmatched_frees"), ==, 0);
    }
    check_replay_pins(pin->file, runs);
}

/* convert: a snapshot device to the text format, which reads back with the same inputs. */
static void
test_convert(void)
{
    g_autofree char *path = fsim_test_trace_path("ok-torch-minimal.pickle");
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-torch-XXXXXX", &error);
    g_autofree char *text = g_build_filename(dir, "minimal.trace.gz", NULL);
    g_auto(FsimTestRun) cli = {0};
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceStream) stream = NULL;
    uint64_t counts[FSIM_EV_KIND_COUNT] = {0};
    FsimEvent ev;

    g_assert_no_error(error);
    if (!fsim_test_have_binary())
        return;
    /* Two devices: one must be chosen. */
    cli = fsim_test_run("convert", path, text, NULL);
    g_assert_cmpint(cli.status, !=, 0);
    fsim_test_run_clear(&cli);
    cli = fsim_test_run("convert", "--trace-device", "0", path, text, NULL);
    g_assert_cmpint(cli.status, ==, 0);
    trace = fsim_trace_open(text, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(fsim_trace_format_name(trace), ==, "text");
    stream = fsim_trace_stream_open(trace, 0, &error);
    g_assert_no_error(error);
    while (fsim_trace_stream_next(stream, &ev, &error))
        counts[ev.kind]++;
    g_assert_no_error(error);
    /* 4 seeded allocations (2 of them pending) and the 20 events of the snapshot (the OOM's
     * request and its free among them) */
    g_assert_cmpuint(counts[FSIM_EV_ALLOC], ==, 4 + 4 + 1);
    g_assert_cmpuint(counts[FSIM_EV_FREE], ==, 2 + 4 + 1);
    g_assert_cmpuint(counts[FSIM_EV_FREE_COMPLETED], ==, 5);
    g_assert_cmpuint(counts[FSIM_EV_EMPTY_CACHE], ==, 2);
    g_assert_cmpuint(counts[FSIM_EV_MARK], ==, 3);
    g_clear_pointer(&stream, fsim_trace_stream_close);
    g_clear_pointer(&trace, fsim_trace_close);
    g_unlink(text);
    g_rmdir(dir);
}

static void
test_cli_bad(void)
{
    g_autofree char *path = fsim_test_trace_path("bad-torch-global.pickle");
    g_auto(FsimTestRun) cli = {0};

    if (!fsim_test_have_binary())
        return;
    cli = fsim_test_run("info", "--json", path, NULL);
    g_assert_cmpint(cli.status, ==, 1);
    g_assert_cmpstr(cli.out, ==, "");
}

/* Every event of every device of @trace, in order. */
static GArray *
all_events(FsimTrace *trace)
{
    GArray *events = g_array_new(FALSE, FALSE, sizeof(FsimEvent));
    const uint32_t *devices;
    gsize n;

    devices = fsim_trace_devices(trace, &n);
    for (gsize d = 0; d < n; d++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, devices[d], &error);
        FsimEvent ev;

        g_assert_no_error(error);
        while (fsim_trace_stream_next(stream, &ev, &error))
            g_array_append_val(events, ev);
        g_assert_no_error(error);
    }
    return events;
}

/* fsim_trace_open_without_stacks() gives the same trace without stacks: the same events but
 * for their stack, and the same platform evidence, on every shared snapshot. */
static void
test_without_stacks(void)
{
    g_autoptr(GPtrArray) paths = fsim_test_shared_snapshots();
    guint with_stacks = 0;

    for (guint p = 0; paths != NULL && p < paths->len; p++) {
        const char *path = paths->pdata[p];
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimTrace) full = NULL;
        g_autoptr(FsimTrace) bare = NULL;
        g_autoptr(GArray) a = NULL;
        g_autoptr(GArray) b = NULL;

        full = fsim_trace_open(path, &error);
        g_assert_no_error(error);
        bare = fsim_trace_open_without_stacks(path, &error);
        g_assert_no_error(error);
        g_assert_true(fsim_trace_opening_wants_stacks());
        g_assert_cmpint(full->frames_name_torch_npu, ==, bare->frames_name_torch_npu);
        a = all_events(full);
        b = all_events(bare);
        g_assert_cmpuint(a->len, ==, b->len);
        for (guint i = 0; i < a->len; i++) {
            FsimEvent *x = &g_array_index(a, FsimEvent, i);
            FsimEvent *y = &g_array_index(b, FsimEvent, i);

            g_assert_cmpuint(y->stack, ==, 0);
            with_stacks += x->stack != 0;
            x->stack = 0;
            g_assert_cmpstr(x->label, ==, y->label);
            x->label = y->label = NULL;
            g_assert_cmpmem(x, sizeof(*x), y, sizeof(*y));
        }
    }
    if (paths != NULL)
        g_assert_cmpuint(with_stacks, >, 1000);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/reader/torch/minimal", test_minimal);
    g_test_add_func("/reader/torch/minimal/info", test_minimal_info);
    g_test_add_func("/reader/torch/gzip", test_gzip);
    g_test_add_func("/reader/torch/expandable", test_expandable);
    g_test_add_func("/reader/torch/pools/state", test_pools_state);
    g_test_add_func("/reader/torch/pools/trace", test_pools_trace);
    g_test_add_func("/reader/torch/pools/convert", test_pools_convert);
    g_test_add_func("/reader/torch/legacy", test_legacy);
    g_test_add_func("/reader/torch/npu-frames-escaped", test_npu_frames_escaped);
    g_test_add_data_func("/reader/torch/list/proto5", "ok-torch-list.pickle", test_list);
    g_test_add_data_func("/reader/torch/list/proto1", "ok-torch-list-proto1.pickle", test_list);
    g_test_add_data_func("/reader/torch/list/proto0", "ok-torch-list-proto0.pickle", test_list);
    g_test_add_func("/reader/torch/bad", test_bad);
    g_test_add_func("/reader/torch/bad/shared-containers", test_shared_containers);
    g_test_add_func("/reader/torch/bad/truncated", test_truncated);
    g_test_add_func("/reader/torch/cli/bad", test_cli_bad);
    g_test_add_func("/reader/torch/cli/convert", test_convert);
    g_test_add_func("/reader/torch/shared/without-stacks", test_without_stacks);
    for (gsize i = 0; i < G_N_ELEMENTS(shared_pins); i++) {
        const Pin *pin = &shared_pins[i];
        g_autofree char *short_name = g_strndup(pin->file, strcspn(pin->file, "_"));
        g_autofree char *info = g_strdup_printf("/reader/torch/shared/%s/info", short_name);
        g_autofree char *json = g_strdup_printf("/reader/torch/shared/%s/info-json", short_name);
        g_autofree char *state = g_strdup_printf("/reader/torch/shared/%s/state", short_name);
        g_autofree char *replay = g_strdup_printf("/reader/torch/shared/%s/replay", short_name);

        g_test_add_data_func(info, pin, test_shared_info);
        g_test_add_data_func(json, pin, test_shared_info_json);
        g_test_add_data_func(state, pin, test_shared_state);
        g_test_add_data_func(replay, pin, test_shared_replay);
    }
    return g_test_run();
}
