/* SPDX-License-Identifier: MIT */
/*
 * The engine's rules (engine.h): accounting, unmatched and double frees, OOM records and
 * --fail-on-oom, deferred and delayed frees, time and duplicate errors, seeding, observers and the
 * metrics of metrics.h on runs small enough to work out by hand.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/fragsim.h"

static FsimEngine *
engine_new(const char *policy, const char *device, gboolean fail_on_oom)
{
    FsimRunConfig config;
    g_autoptr(GError) error = NULL;
    FsimEngine *engine;

    fsim_run_config_init(&config);
    config.policy = policy;
    config.paranoid = TRUE;
    config.fail_on_oom = fail_on_oom;
    g_assert_true(fsim_device_spec_parse(device, &config.device, &error));
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    return engine;
}

static uint64_t event_counter;

static FsimEvent
ev_alloc(uint64_t time, uint64_t id, uint64_t size, uint64_t stream)
{
    FsimEvent ev = {.time = time,
                    .index = ++event_counter,
                    .kind = FSIM_EV_ALLOC,
                    .id = id,
                    .size = size,
                    .stream = stream};
    return ev;
}

static FsimEvent
ev_free(uint64_t time, uint64_t id, uint32_t flags)
{
    FsimEvent ev = {.time = time, .index = ++event_counter, .kind = FSIM_EV_FREE, .id = id};

    ev.flags = flags;
    return ev;
}

static FsimEvent
ev_kind(uint64_t time, FsimEventKind kind, uint64_t id)
{
    FsimEvent ev = {.time = time, .index = ++event_counter, .kind = kind, .id = id};

    return ev;
}

static void
process_ok(FsimEngine *engine, FsimEvent ev)
{
    g_autoptr(GError) error = NULL;

    g_assert_true(fsim_engine_process(engine, &ev, &error));
    g_assert_no_error(error);
}

static void
test_accounting(void)
{
    g_autoptr(FsimEngine) engine = engine_new("bestfit", "1GiB", FALSE);
    const FsimEngineCounters *c = fsim_engine_counters(engine);
    const FsimMetrics *m;
    g_autoptr(GError) error = NULL;

    process_ok(engine, ev_alloc(0, 1, 1000, 0));  /* 1024 with 256-byte alignment */
    process_ok(engine, ev_alloc(10, 2, 3000, 0)); /* 3072 */
    g_assert_cmpuint(c->requested_bytes, ==, 4000);
    g_assert_cmpuint(c->allocated_bytes, ==, 4096);
    g_assert_cmpuint(c->reserved_bytes, ==, 2 * FSIM_MiB);
    g_assert_cmpuint(c->live_blocks, ==, 2);
    process_ok(engine, ev_free(20, 1, 0));
    g_assert_cmpuint(c->requested_bytes, ==, 3000);
    g_assert_cmpuint(c->allocated_bytes, ==, 3072);
    process_ok(engine, ev_kind(30, FSIM_EV_MARK, 0));
    process_ok(engine, ev_kind(40, FSIM_EV_EMPTY_CACHE, 0));
    g_assert_true(fsim_engine_finish(engine, &error));
    g_assert_no_error(error);
    m = fsim_engine_metrics(engine);
    g_assert_cmpuint(m->events, ==, 5);
    g_assert_cmpuint(m->allocs, ==, 2);
    g_assert_cmpuint(m->frees, ==, 1);
    g_assert_cmpuint(m->peak_requested_bytes, ==, 4000);
    g_assert_cmpuint(m->lower_bound_bytes, ==, 4000);
    g_assert_cmpuint(m->peak_allocated_bytes, ==, 4096);
    g_assert_cmpuint(m->peak_reserved_bytes, ==, 2 * FSIM_MiB);
    g_assert_cmpuint(m->excess_over_lower_bound_bytes, ==, 2 * FSIM_MiB - 4000);
    /* requested over reserved at the peak, both blocks live */
    g_assert_cmpfloat_with_epsilon(m->peak_utilization, 4000.0 / (2 * FSIM_MiB), 1e-12);
    /* At the tightest moment (both blocks live): 96 bytes of rounding, the rest free. */
    g_assert_cmpuint(m->internal_frag_bytes_at_peak, ==, 96);
    g_assert_cmpuint(m->external_frag_bytes_at_peak, ==, 2 * FSIM_MiB - 4096);
    /* All that free memory is one block above the two: no external fragmentation. */
    g_assert_cmpfloat_with_epsilon(m->external_frag_at_peak, 0.0, 1e-12);
    g_assert_cmpint(m->first_oom_event, ==, -1);
    g_assert_cmpuint(m->device_maps, ==, 1);
}

static void
test_external_fragmentation_at_peak(void)
{
    g_autoptr(FsimEngine) engine = engine_new("bestfit", "1GiB", FALSE);
    const FsimMetrics *m;
    g_autoptr(GError) error = NULL;

    /* 1 MiB | 1 MiB | 1 MiB | 1 MiB, then free the 1st and 3rd: two 1 MiB holes in 4 MiB
     * reserved; then a 1.5 MiB request grows the arena to 6 MiB (5.5 used). */
    for (uint64_t i = 1; i <= 4; i++)
        process_ok(engine, ev_alloc(i, i, FSIM_MiB, 0));
    process_ok(engine, ev_free(5, 1, 0));
    process_ok(engine, ev_free(6, 3, 0));
    process_ok(engine, ev_alloc(7, 5, 3 * FSIM_MiB / 2, 0));
    g_assert_true(fsim_engine_finish(engine, &error));
    m = fsim_engine_metrics(engine);
    g_assert_cmpuint(m->peak_reserved_bytes, ==, 6 * FSIM_MiB);
    /* At peak: allocated 3.5 MiB of 6; free = two 1 MiB holes and 0.5 MiB at the top. */
    g_assert_cmpuint(m->external_frag_bytes_at_peak, ==, 5 * FSIM_MiB / 2);
    g_assert_cmpfloat_with_epsilon(m->external_frag_at_peak, 1.0 - 1.0 / 2.5, 1e-12);
    g_assert_cmpfloat_with_epsilon(m->min_utilization, 2.0 / 4.0, 1e-12);
}

/* Minimum utilisation is requested / reserved (not allocated / reserved), counted while requested
 * is at least half its running peak (requested's, not allocated's).  bestfit aligns every block
 * to 256 bytes and maps the arena in 2 MiB pages: a 4 MiB block, then 24576 one-byte requests
 * (6 MiB allocated, 24 KiB requested) fill 10 MiB.  The lowest moment is the 16385th one-byte
 * request, which maps the last two pages: 4 MiB + 16385 bytes requested of 10 MiB.  Freeing the
 * 4 MiB block leaves 6 MiB allocated but only 24 KiB requested, under half the peak: not
 * counted. */
static void
test_min_utilization(void)
{
    FsimRunConfig config;
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    const FsimMetrics *m;
    uint64_t id = 1;

    fsim_run_config_init(&config);
    config.policy = "bestfit";
    config.paranoid = FALSE; /* 24577 blocks: the O(n) check after each would take minutes */
    g_assert_true(fsim_device_spec_parse("1GiB", &config.device, &error));
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    process_ok(engine, ev_alloc(id, id, 4 * FSIM_MiB, 0));
    for (id = 2; id <= 24577; id++)
        process_ok(engine, ev_alloc(id, id, 1, 0));
    g_assert_cmpuint(fsim_engine_counters(engine)->allocated_bytes, ==, 10 * FSIM_MiB);
    g_assert_cmpuint(fsim_engine_counters(engine)->requested_bytes, ==, 4 * FSIM_MiB + 24576);
    process_ok(engine, ev_free(id, 1, 0));
    g_assert_true(fsim_engine_finish(engine, &error));
    m = fsim_engine_metrics(engine);
    g_assert_cmpuint(m->peak_reserved_bytes, ==, 10 * FSIM_MiB);
    g_assert_cmpfloat_with_epsilon(m->min_utilization, (4.0 * FSIM_MiB + 16385) / (10.0 * FSIM_MiB),
                                   1e-12);
}

static void
test_unmatched_and_double_frees(void)
{
    g_autoptr(FsimEngine) engine = engine_new("direct", "1GiB", FALSE);
    const FsimMetrics *m;
    g_autoptr(GError) error = NULL;

    process_ok(engine, ev_free(0, 42, 0)); /* never seen: the trace started late */
    process_ok(engine, ev_alloc(1, 1, 100, 0));
    process_ok(engine, ev_free(2, 1, 0));
    process_ok(engine, ev_free(3, 1, 0));                      /* freed twice */
    process_ok(engine, ev_kind(4, FSIM_EV_FREE_COMPLETED, 1)); /* harmless */
    process_ok(engine, ev_alloc(5, 1, 100, 0));                /* an id may be reused */
    g_assert_true(fsim_engine_finish(engine, &error));
    m = fsim_engine_metrics(engine);
    g_assert_cmpuint(m->unmatched_frees, ==, 1);
    g_assert_cmpuint(m->double_frees, ==, 1);
    g_assert_cmpuint(m->frees, ==, 3);
}

/* The largest id is an id like any other (a half-open range cannot hold it). */
static void
test_largest_id(void)
{
    g_autoptr(FsimEngine) engine = engine_new("direct", "1GiB", FALSE);
    const FsimMetrics *m;
    g_autoptr(GError) error = NULL;

    process_ok(engine, ev_alloc(0, G_MAXUINT64, 100, 0));
    process_ok(engine, ev_free(1, G_MAXUINT64, 0));
    process_ok(engine, ev_free(2, G_MAXUINT64, 0));
    process_ok(engine, ev_free(3, G_MAXUINT64 - 1, 0));
    g_assert_true(fsim_engine_finish(engine, &error));
    m = fsim_engine_metrics(engine);
    g_assert_cmpuint(m->double_frees, ==, 1);
    g_assert_cmpuint(m->unmatched_frees, ==, 1);
}

static void
test_duplicate_live_id(void)
{
    g_autoptr(FsimEngine) engine = engine_new("direct", "1GiB", FALSE);
    g_autoptr(GError) error = NULL;
    FsimEvent again;

    process_ok(engine, ev_alloc(0, 7, 100, 0));
    again = ev_alloc(1, 7, 100, 0);
    g_assert_false(fsim_engine_process(engine, &again, &error));
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_DUPLICATE);
}

static FsimEvent
ev_pool(FsimEventKind kind, uint64_t pool, uint64_t stream)
{
    FsimEvent ev = {.time = 1, .index = ++event_counter, .kind = kind, .id = pool};

    ev.stream = stream;
    return ev;
}

static void
process_fails(FsimEngine *engine, FsimEvent ev, const char *message_part)
{
    g_autoptr(GError) error = NULL;

    g_assert_false(fsim_engine_process(engine, &ev, &error));
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_SYNTAX);
    if (strstr(error->message, message_part) == NULL)
        g_error("expected '%s' in '%s'", message_part, error->message);
}

/* The engine checks pool scopes and references for every policy, with or without pools. */
static void
test_pool_scopes(void)
{
    static const char *const policies[] = {"direct", "caching"};

    for (gsize i = 0; i < G_N_ELEMENTS(policies); i++) {
        g_autoptr(FsimEngine) a = engine_new(policies[i], "1GiB", FALSE);
        g_autoptr(FsimEngine) b = engine_new(policies[i], "1GiB", FALSE);
        g_autoptr(FsimEngine) c = engine_new(policies[i], "1GiB", FALSE);
        g_autoptr(FsimEngine) d = engine_new(policies[i], "1GiB", FALSE);
        g_autoptr(FsimEngine) e = engine_new(policies[i], "1GiB", FALSE);

        /* Two captures into pool 1 (one joined by side stream 2), each graph then destroyed. */
        process_ok(a, ev_pool(FSIM_EV_POOL_BEGIN, 1, 0));
        process_ok(a, ev_pool(FSIM_EV_POOL_BEGIN, 1, 2));
        process_ok(a, ev_pool(FSIM_EV_POOL_END, 1, 2));
        process_ok(a, ev_pool(FSIM_EV_POOL_END, 1, 0));
        process_ok(a, ev_pool(FSIM_EV_POOL_BEGIN, 1, 0));
        process_ok(a, ev_pool(FSIM_EV_POOL_END, 1, 0));
        process_ok(a, ev_pool(FSIM_EV_POOL_RELEASE, 1, 0));
        process_ok(a, ev_pool(FSIM_EV_POOL_RELEASE, 1, 0));
        /* The side stream took no reference: a third release has nothing to drop. */
        process_fails(a, ev_pool(FSIM_EV_POOL_RELEASE, 1, 0), "no reference");

        process_fails(b, ev_pool(FSIM_EV_POOL_END, 3, 0), "no scope");
        process_ok(c, ev_pool(FSIM_EV_POOL_BEGIN, 3, 5));
        process_fails(c, ev_pool(FSIM_EV_POOL_BEGIN, 3, 5), "already open");
        process_fails(d, ev_pool(FSIM_EV_POOL_BEGIN, 0, 0), "default pool");
        process_ok(e, ev_pool(FSIM_EV_POOL_BEGIN, 4, 0));
        process_fails(e, ev_pool(FSIM_EV_POOL_RELEASE, 4, 0), "while a scope");
    }
}

static void
test_time_backwards(void)
{
    g_autoptr(FsimEngine) engine = engine_new("direct", "1GiB", FALSE);
    g_autoptr(GError) error = NULL;
    FsimEvent late;

    process_ok(engine, ev_alloc(100, 1, 100, 0));
    late = ev_alloc(99, 2, 100, 0);
    g_assert_false(fsim_engine_process(engine, &late, &error));
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_TIME);
}

typedef struct {
    GArray *ooms;
    guint events;
    guint allocs;
    guint releases;
    guint calls;
} Seen;

static void
seen_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    Seen *seen = data;

    (void)engine;
    (void)ev;
    seen->events++;
}

static void
seen_alloc(gpointer data, const FsimEngine *engine, const FsimEvent *ev, uint64_t id,
           const FsimBlock *block, uint64_t requested)
{
    Seen *seen = data;

    (void)engine;
    (void)ev;
    (void)id;
    (void)block;
    (void)requested;
    seen->allocs++;
}

static void
seen_release(gpointer data, const FsimEngine *engine, uint64_t id, const FsimBlock *block,
             uint64_t requested)
{
    Seen *seen = data;

    (void)engine;
    (void)id;
    (void)block;
    (void)requested;
    seen->releases++;
}

static void
seen_oom(gpointer data, const FsimEngine *engine, const FsimOomRecord *oom)
{
    Seen *seen = data;

    (void)engine;
    g_array_append_val(seen->ooms, *oom);
}

static void
seen_call(gpointer data, const FsimEngine *engine, FsimDeviceCall call, FsimAddr addr,
          uint64_t size)
{
    Seen *seen = data;

    (void)engine;
    (void)call;
    (void)addr;
    (void)size;
    seen->calls++;
}

static const FsimObserver seen_observer = {
    .event = seen_event,
    .alloc = seen_alloc,
    .release = seen_release,
    .oom = seen_oom,
    .device_call = seen_call,
};

static void
test_oom_continues(void)
{
    g_autoptr(FsimEngine) engine = engine_new("direct", "10MiB", FALSE);
    Seen seen = {.ooms = g_array_new(FALSE, FALSE, sizeof(FsimOomRecord))};
    const FsimMetrics *m;
    const FsimOomRecord *oom;
    gsize n;
    g_autoptr(GError) error = NULL;

    fsim_engine_add_observer(engine, &seen_observer, &seen);
    process_ok(engine, ev_alloc(0, 1, 6 * FSIM_MiB, 3));
    process_ok(engine, ev_alloc(5, 2, 6 * FSIM_MiB, 3)); /* does not fit: OOM, run goes on */
    process_ok(engine, ev_free(6, 2, 0));                /* the failed one: ignored */
    process_ok(engine, ev_free(7, 1, 0));
    process_ok(engine, ev_alloc(8, 3, 6 * FSIM_MiB, 0)); /* fits now */
    g_assert_true(fsim_engine_finish(engine, &error));
    m = fsim_engine_metrics(engine);
    g_assert_cmpuint(m->ooms, ==, 1);
    g_assert_cmpint(m->first_oom_event, ==, (int64_t)event_counter - 3);
    g_assert_cmpuint(m->unmatched_frees, ==, 0);
    g_assert_cmpuint(m->double_frees, ==, 0);
    oom = fsim_engine_ooms(engine, &n);
    g_assert_cmpuint(n, ==, 1);
    g_assert_cmpuint(oom->size, ==, 6 * FSIM_MiB);
    g_assert_cmpuint(oom->stream, ==, 3);
    g_assert_cmpuint(oom->time, ==, 5);
    g_assert_cmpuint(oom->reserved_bytes, ==, 6 * FSIM_MiB);
    g_assert_cmpuint(oom->allocated_bytes, ==, 6 * FSIM_MiB);
    g_assert_cmpuint(oom->device_free_bytes, ==, 4 * FSIM_MiB);
    g_assert_cmpuint(seen.ooms->len, ==, 1);
    g_assert_cmpuint(seen.events, ==, 5);
    g_assert_cmpuint(seen.allocs, ==, 2);
    g_assert_cmpuint(seen.releases, ==, 1);
    g_assert_cmpuint(seen.calls, ==, 3); /* malloc, free, malloc */
    g_array_unref(seen.ooms);
}

static void
test_fail_on_oom(void)
{
    g_autoptr(FsimEngine) engine = engine_new("paged", "10MiB", TRUE);
    g_autoptr(GError) error = NULL;
    FsimEvent big;

    process_ok(engine, ev_alloc(0, 1, 6 * FSIM_MiB, 0));
    big = ev_alloc(1, 2, 6 * FSIM_MiB, 0);
    g_assert_false(fsim_engine_process(engine, &big, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_OOM);
    /* The message names the failing event. */
    g_assert_nonnull(strstr(error->message, "event"));
    g_assert_nonnull(strstr(error->message, "6291456 bytes"));
}

static void
test_deferred_free(void)
{
    g_autoptr(FsimEngine) engine = engine_new("direct", "1GiB", FALSE);
    const FsimEngineCounters *c = fsim_engine_counters(engine);

    process_ok(engine, ev_alloc(0, 1, 4 * FSIM_MiB, 0));
    process_ok(engine, ev_free(1, 1, FSIM_EVF_DEFERRED));
    /* No longer allocated, but the memory is not back yet. */
    g_assert_cmpuint(c->allocated_bytes, ==, 0);
    g_assert_cmpuint(c->reserved_bytes, ==, 4 * FSIM_MiB);
    process_ok(engine, ev_alloc(2, 2, 2 * FSIM_MiB, 0));
    g_assert_cmpuint(c->reserved_bytes, ==, 6 * FSIM_MiB);
    process_ok(engine, ev_kind(3, FSIM_EV_FREE_COMPLETED, 1));
    g_assert_cmpuint(c->reserved_bytes, ==, 2 * FSIM_MiB);
}

static void
test_free_delay(void)
{
    FsimRunConfig config;
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    const FsimEngineCounters *c;

    fsim_run_config_init(&config);
    config.policy = "direct";
    config.free_delay_ns = 100;
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    c = fsim_engine_counters(engine);
    process_ok(engine, ev_alloc(0, 1, 4 * FSIM_MiB, 0));
    process_ok(engine, ev_free(10, 1, 0));
    process_ok(engine, ev_alloc(109, 2, 2 * FSIM_MiB, 0)); /* before the completion at 110 */
    g_assert_cmpuint(c->reserved_bytes, ==, 6 * FSIM_MiB);
    process_ok(engine, ev_alloc(110, 3, 2 * FSIM_MiB, 0)); /* completion runs first */
    g_assert_cmpuint(c->reserved_bytes, ==, 4 * FSIM_MiB);
    g_assert_true(fsim_engine_finish(engine, &error));
    g_assert_cmpuint(fsim_engine_metrics(engine)->events, ==, 4 + 1);
}

static void
test_seeding_without_seed_op(void)
{
    FsimSeedSegment segments[] = {
        {.addr = 0x1000000, .size = 20 * FSIM_MiB, .pool = FSIM_POOL_LARGE},
    };
    FsimSeedBlock blocks[] = {
        {.id = 5, .addr = 0x1000000, .size = 3 * FSIM_MiB, .requested = 3 * FSIM_MiB - 7},
        {.id = 6,
         .addr = 0x1000000 + 3 * FSIM_MiB,
         .size = FSIM_MiB,
         .requested = FSIM_MiB,
         .pending_free = TRUE},
    };
    FsimInitialState state = {segments, 1, blocks, 2};
    FsimRunConfig config;
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    const FsimEngineCounters *c;
    const FsimMetrics *m;

    fsim_run_config_init(&config);
    config.policy = "paged";
    config.initial_state = &state;
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    g_assert_true(fsim_engine_start(engine, &error));
    g_assert_no_error(error);
    c = fsim_engine_counters(engine);
    /* The pending block holds memory but is not allocated any more. */
    g_assert_cmpuint(c->live_blocks, ==, 2);
    g_assert_cmpuint(c->requested_bytes, ==, 3 * FSIM_MiB - 7);
    g_assert_cmpuint(c->allocated_bytes, ==, 4 * FSIM_MiB);
    g_assert_cmpuint(c->reserved_bytes, ==, 6 * FSIM_MiB);
    process_ok(engine, ev_free(0, 5, 0));
    process_ok(engine, ev_kind(1, FSIM_EV_FREE_COMPLETED, 6));
    g_assert_true(fsim_engine_finish(engine, &error));
    m = fsim_engine_metrics(engine);
    /* Seeding made no driver calls; the trace's frees made one unmap each. */
    g_assert_cmpuint(m->device_maps, ==, 0);
    g_assert_cmpuint(m->device_unmaps, ==, 2);
    g_assert_cmpuint(m->unmatched_frees, ==, 0);
    g_assert_cmpuint(c->reserved_bytes, ==, 0);
}

static void
test_bad_initial_state(void)
{
    FsimSeedSegment segments[] = {{.addr = 0x1000000, .size = 2 * FSIM_MiB}};
    FsimSeedBlock blocks[] = {
        {.id = 1, .addr = 0x1000000 + FSIM_MiB, .size = 2 * FSIM_MiB, .requested = 1},
    };
    FsimInitialState state = {segments, 1, blocks, 1};
    FsimRunConfig config;
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimEngine) engine = NULL;

    fsim_run_config_init(&config);
    config.policy = "direct";
    config.initial_state = &state;
    engine = fsim_engine_new(&config, &error);
    g_assert_false(fsim_engine_start(engine, &error));
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_FAILED);
}

static void
test_unknown_policy_and_knob(void)
{
    FsimRunConfig config;
    g_autoptr(GError) error = NULL;
    g_autoptr(GKeyFile) knobs = g_key_file_new();
    FsimEngine *engine;

    fsim_run_config_init(&config);
    config.policy = "nosuch";
    engine = fsim_engine_new(&config, &error);
    g_assert_null(engine);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_assert_nonnull(strstr(error->message, "bestfit"));
    g_clear_error(&error);
    g_key_file_set_value(knobs, "paged", "pagesize", "4KiB");
    config.policy = "paged";
    config.config = knobs;
    engine = fsim_engine_new(&config, &error);
    g_assert_null(engine);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_assert_nonnull(strstr(error->message, "page_size"));
    g_clear_error(&error);
    g_key_file_remove_key(knobs, "paged", "pagesize", NULL);
    g_key_file_set_value(knobs, "paged", "page_size", "3KiB");
    engine = fsim_engine_new(&config, &error);
    g_assert_null(engine);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
}

static void
test_paged_small_pages(void)
{
    FsimRunConfig config;
    g_autoptr(GError) error = NULL;
    g_autoptr(GKeyFile) knobs = g_key_file_new();
    g_autoptr(FsimEngine) engine = NULL;
    const FsimMetrics *m;

    fsim_run_config_init(&config);
    config.policy = "paged";
    config.config = knobs;
    g_key_file_set_value(knobs, "paged", "page_size", "64KiB");
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    process_ok(engine, ev_alloc(0, 1, 100 * FSIM_KiB, 0)); /* two 64 KiB pages */
    g_assert_true(fsim_engine_finish(engine, &error));
    m = fsim_engine_metrics(engine);
    g_assert_cmpuint(m->peak_reserved_bytes, ==, 128 * FSIM_KiB);
    g_assert_cmpuint(m->internal_frag_bytes_at_peak, ==, 28 * FSIM_KiB);
    g_assert_cmpuint(m->device_maps, ==, 1);
}

/* A request the recording failed is replayed: counted, and reproduced only when it fails here. */
static void
test_recorded_oom(void)
{
    g_autoptr(FsimEngine) engine = engine_new("direct", "10MiB", FALSE);
    g_autoptr(GError) error = NULL;
    const FsimMetrics *m;
    FsimEvent ev;

    ev = ev_alloc(0, 1, 8 * FSIM_MiB, 0);
    ev.flags = FSIM_EVF_RECORDED_OOM; /* fits here: served */
    process_ok(engine, ev);
    process_ok(engine, ev_free(1, 1, FSIM_EVF_RECORDED_OOM));
    process_ok(engine, ev_alloc(2, 2, 4 * FSIM_MiB, 0));
    ev = ev_alloc(3, 3, 8 * FSIM_MiB, 0);
    ev.flags = FSIM_EVF_RECORDED_OOM; /* does not fit next to id 2: reproduced */
    process_ok(engine, ev);
    process_ok(engine, ev_free(4, 3, FSIM_EVF_RECORDED_OOM));
    g_assert_true(fsim_engine_finish(engine, &error));
    m = fsim_engine_metrics(engine);
    g_assert_cmpuint(m->recorded_ooms, ==, 2);
    g_assert_cmpuint(m->recorded_ooms_reproduced, ==, 1);
    g_assert_cmpuint(m->ooms, ==, 1);
    g_assert_cmpuint(m->unmatched_frees, ==, 0);
}

/* What an observer saw: a running checksum of the calls, in order. */
static void
batch_seen_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    uint64_t *sum = data;

    *sum = *sum * 31 + ev->index + fsim_engine_counters(engine)->allocated_bytes;
}

static void
batch_seen_release(gpointer data, const FsimEngine *engine, uint64_t id, const FsimBlock *block,
                   uint64_t requested)
{
    uint64_t *sum = data;

    (void)engine;
    *sum = *sum * 37 + id + block->addr + requested;
}

static const FsimObserver batch_observer = {.event = batch_seen_event,
                                            .release = batch_seen_release};

/* @mode 0: plain, 1: observed, 2: paranoid (general).  The engine, its observer's sum in *@sum. */
static FsimEngine *
batch_engine(int mode, gboolean fail_on_oom, uint64_t *sum)
{
    FsimRunConfig config;
    g_autoptr(GError) error = NULL;
    FsimEngine *engine;

    fsim_run_config_init(&config);
    config.policy = "caching";
    config.paranoid = mode == 2;
    config.fail_on_oom = fail_on_oom;
    g_assert_true(fsim_device_spec_parse("64MiB", &config.device, &error));
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    *sum = 0;
    if (mode != 0)
        fsim_engine_add_observer(engine, &batch_observer, sum);
    return engine;
}

/* fsim_engine_process_batch() is fsim_engine_process() on each event: the same metrics and
 * observer calls in every mode, the same stop at an OOM under fail_on_oom, and an event out of
 * order inside a batch is the same error. */
static void
test_process_batch(void)
{
    g_autoptr(GArray) evs = g_array_new(FALSE, FALSE, sizeof(FsimEvent));
    GRand *rand = g_rand_new_with_seed(7);
    uint64_t live[64] = {0};

    for (uint64_t i = 0, id = 1; i < 3000; i++) {
        guint slot = (guint)g_rand_int_range(rand, 0, G_N_ELEMENTS(live));
        FsimEvent ev;

        if (live[slot] != 0) {
            ev = ev_free(i, live[slot], 0);
            live[slot] = 0;
        } else {
            ev = ev_alloc(i, id, (uint64_t)g_rand_int_range(rand, 1, 4 << 20), i % 2);
            live[slot] = id++;
        }
        g_array_append_val(evs, ev);
    }
    g_rand_free(rand);
    for (int mode = 0; mode < 3; mode++) {
        for (int fail = 0; fail < 2; fail++) {
            uint64_t sum_one, sum_batch;
            g_autoptr(FsimEngine) one = batch_engine(mode, fail, &sum_one);
            g_autoptr(FsimEngine) batch = batch_engine(mode, fail, &sum_batch);
            g_autoptr(GError) error_one = NULL;
            g_autoptr(GError) error_batch = NULL;
            gboolean ok_one = TRUE, ok_batch = TRUE;
            FsimMetrics a, b;

            for (guint i = 0; ok_one && i < evs->len; i++)
                ok_one = fsim_engine_process(one, &g_array_index(evs, FsimEvent, i), &error_one);
            for (guint i = 0; ok_batch && i < evs->len; i += 100)
                ok_batch = fsim_engine_process_batch(batch, &g_array_index(evs, FsimEvent, i),
                                                     MIN(100, evs->len - i), &error_batch);
            g_assert_cmpint(ok_one, ==, ok_batch);
            g_assert_cmpint(ok_one, ==, !fail); /* 64 MiB is too small for 32 live blocks */
            if (!ok_one)
                g_assert_error(error_batch, FSIM_ERROR, FSIM_ERROR_OOM);
            a = *fsim_engine_metrics(one);
            b = *fsim_engine_metrics(batch);
            g_assert_cmpuint(a.events, >, 0);
            g_assert_cmpuint(a.events, ==, b.events);
            g_assert_cmpuint(a.ooms, ==, b.ooms);
            g_assert_cmpuint(a.peak_reserved_bytes, ==, b.peak_reserved_bytes);
            g_assert_cmpuint(a.peak_allocated_bytes, ==, b.peak_allocated_bytes);
            g_assert_cmpuint(sum_one, ==, sum_batch);
            g_assert_cmpmem(fsim_engine_counters(one), sizeof(FsimEngineCounters),
                            fsim_engine_counters(batch), sizeof(FsimEngineCounters));
        }
    }
    {
        uint64_t sum;
        g_autoptr(FsimEngine) engine = batch_engine(0, FALSE, &sum);
        g_autoptr(GError) error = NULL;
        FsimEvent late[3] = {ev_alloc(10, 1, 512, 0), ev_alloc(20, 2, 512, 0),
                             ev_alloc(15, 3, 512, 0)};

        g_assert_false(fsim_engine_process_batch(engine, late, G_N_ELEMENTS(late), &error));
        g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_TIME);
        g_assert_cmpuint(fsim_engine_counters(engine)->live_blocks, ==, 2);
    }
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/engine/accounting", test_accounting);
    g_test_add_func("/engine/external-fragmentation-at-peak", test_external_fragmentation_at_peak);
    g_test_add_func("/engine/min-utilization", test_min_utilization);
    g_test_add_func("/engine/unmatched-and-double-frees", test_unmatched_and_double_frees);
    g_test_add_func("/engine/bad/duplicate-live-id", test_duplicate_live_id);
    g_test_add_func("/engine/largest-id", test_largest_id);
    g_test_add_func("/engine/bad/time-backwards", test_time_backwards);
    g_test_add_func("/engine/pool-scopes", test_pool_scopes);
    g_test_add_func("/engine/oom/continues", test_oom_continues);
    g_test_add_func("/engine/oom/fail-on-oom", test_fail_on_oom);
    g_test_add_func("/engine/free/deferred", test_deferred_free);
    g_test_add_func("/engine/free/delay", test_free_delay);
    g_test_add_func("/engine/seed/without-seed-op", test_seeding_without_seed_op);
    g_test_add_func("/engine/seed/bad-state", test_bad_initial_state);
    g_test_add_func("/engine/config/unknown-policy-and-knob", test_unknown_policy_and_knob);
    g_test_add_func("/engine/paged/small-pages", test_paged_small_pages);
    g_test_add_func("/engine/oom/recorded", test_recorded_oom);
    g_test_add_func("/engine/process-batch", test_process_batch);
    return g_test_run();
}
