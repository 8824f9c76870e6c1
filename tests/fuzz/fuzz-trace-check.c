/* SPDX-License-Identifier: MIT */
/*
 * The checks of fuzz-trace (see fuzz-trace-check.h).  What is checked, and where it is promised:
 *
 * - Every reader error is in FSIM_TRACE_ERROR or FSIM_ERROR, with a code of that domain, and its
 *   message starts with the file's path and a colon (trace.h, types.h).
 * - The devices of a trace are ascending and unique; each initial state passes
 *   fsim_initial_state_check() (state.h), a snapshot's with block ids 1..n; the recorded
 *   outcomes have known kinds and non-decreasing indices (event.h); settings come in pairs.
 * - fsim_trace_describe() lists exactly the trace's devices, each with its actions sorted by name
 *   and none counted zero times, and agrees with a second read of every stream (streams may be
 *   re-opened and read again, one after the other or at once: trace.h).  A stream that fails
 *   fails the same way every time.
 * - Along a stream (event.h): known kinds; known flags, DEFERRED only on FREE, INFERRED only on
 *   EMPTY_CACHE, RECORDED_OOM only on ALLOC and FREE; the stream's device; non-decreasing times
 *   and indices; ALLOC sizes of 1 to FSIM_MAX_SIZE and no size elsewhere; a fresh id for every
 *   ALLOC of a format that maps addresses to ids (snapshots, RMM logs).
 * - An engine (device 1GiB, paranoid, fail_on_oom off) seeded with the initial state accepts the
 *   stream: the only engine error allowed is an initial state larger than the small device, after
 *   which the events are replayed again from an empty state.  In the text and binary formats the
 *   pool scopes are the file's own, and in the binary format the ids too: there the engine may
 *   refuse a pool event out of turn (a scope opened twice, a release of a pool nothing holds) or
 *   an id allocated twice, naming the event, and is then fed no more.  Any other engine error
 *   (time going back, a bad size, a broken policy invariant, and those for the other formats,
 *   whose readers build ids and pools themselves) is a broken promise.
 */
#include "fuzz-trace-check.h"

#include <glib.h>

#include <string.h>

#include "fragsim/fragsim.h"

#define FUZZ_DEVICE "1GiB"

typedef struct {
    const char *path;
    GError **error;
} Ctx;

static gboolean G_GNUC_PRINTF(2, 3) broken(Ctx *ctx, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(ctx->error, FSIM_ERROR, FSIM_ERROR_FAILED, "%s: broken promise: %s", ctx->path,
                message);
    return FALSE;
}

#define CHECK(ctx, cond, ...)                \
    do {                                     \
        if (!(cond))                         \
            return broken(ctx, __VA_ARGS__); \
    } while (0)

/* A reader's error: its domain, code and the path at the start of its message. */
static gboolean
check_reader_error(Ctx *ctx, const GError *error, const char *where)
{
    gsize path_len = strlen(ctx->path);

    CHECK(ctx, error != NULL, "%s failed without an error", where);
    CHECK(ctx, error->message != NULL, "%s: an error without a message", where);
    if (error->domain == FSIM_TRACE_ERROR)
        CHECK(ctx,
              error->code >= FSIM_TRACE_ERROR_FAILED && error->code <= FSIM_TRACE_ERROR_CHECKSUM,
              "%s: unknown FSIM_TRACE_ERROR code %d: %s", where, error->code, error->message);
    else if (error->domain == FSIM_ERROR)
        CHECK(ctx, error->code >= FSIM_ERROR_FAILED && error->code <= FSIM_ERROR_DIVERGED,
              "%s: unknown FSIM_ERROR code %d: %s", where, error->code, error->message);
    else
        return broken(ctx, "%s: error of domain %s (code %d): %s", where,
                      g_quark_to_string(error->domain), error->code, error->message);
    CHECK(ctx, strncmp(error->message, ctx->path, path_len) == 0 && error->message[path_len] == ':',
          "%s: the message does not start with the path: %s", where, error->message);
    return TRUE;
}

static gboolean
check_trace(Ctx *ctx, const FsimTrace *trace)
{
    gsize n;
    const uint32_t *devices = fsim_trace_devices(trace, &n);
    const char *format = fsim_trace_format_name(trace);
    gsize n_formats;
    const FsimTraceFormat *const *formats = fsim_trace_formats(&n_formats);
    gboolean known = FALSE;

    for (gsize i = 0; i < n_formats; i++)
        known |= format != NULL && strcmp(formats[i]->name, format) == 0;
    CHECK(ctx, known, "unknown format name");
    CHECK(ctx, g_strcmp0(fsim_trace_path(trace), ctx->path) == 0, "the trace's path changed");
    CHECK(ctx, trace->settings == NULL || trace->settings->len % 2 == 0,
          "settings are not key, value pairs");
    for (guint i = 0; trace->settings != NULL && i < trace->settings->len; i++)
        CHECK(ctx, trace->settings->pdata[i] != NULL, "a NULL setting");
    if (fsim_trace_alloc_conf(trace) != NULL)
        (void)strlen(fsim_trace_alloc_conf(trace));
    for (gsize d = 0; d < n; d++) {
        const FsimInitialState *state = fsim_trace_initial_state(trace, devices[d]);
        gsize n_outcomes;
        const FsimOutcome *outcomes = fsim_trace_outcomes(trace, devices[d], &n_outcomes);
        g_autoptr(GError) local_error = NULL;

        CHECK(ctx, d == 0 || devices[d - 1] < devices[d], "devices not ascending and unique");
        if (state != NULL)
            CHECK(ctx, fsim_initial_state_check(state, &local_error),
                  "device %u: the initial state fails its check: %s", devices[d],
                  local_error->message);
        /* The snapshot reader numbers the blocks alive at trace start 1..n by address. */
        for (gsize i = 0; state != NULL && strcmp(format, "torch") == 0 && i < state->n_blocks; i++)
            CHECK(ctx, state->blocks[i].id == i + 1,
                  "device %u: initial block %" G_GSIZE_FORMAT " has id %" G_GUINT64_FORMAT,
                  devices[d], i, state->blocks[i].id);
        for (gsize i = 0; i < n_outcomes; i++) {
            CHECK(ctx,
                  outcomes[i].kind >= FSIM_OUTCOME_SEGMENT_ALLOC &&
                      outcomes[i].kind <= FSIM_OUTCOME_OOM,
                  "device %u: outcome %" G_GSIZE_FORMAT " has kind %d", devices[d], i,
                  (int)outcomes[i].kind);
            CHECK(ctx, i == 0 || outcomes[i - 1].index <= outcomes[i].index,
                  "device %u: outcome indices go back (%" G_GUINT64_FORMAT
                  " then %" G_GUINT64_FORMAT ")",
                  devices[d], outcomes[i - 1].index, outcomes[i].index);
        }
    }
    return TRUE;
}

static gboolean
check_info(Ctx *ctx, const FsimTrace *trace, const FsimTraceInfo *info)
{
    gsize n;
    const uint32_t *devices = fsim_trace_devices(trace, &n);

    CHECK(ctx, g_strcmp0(info->path, ctx->path) == 0, "describe: wrong path");
    CHECK(ctx, g_strcmp0(info->format, fsim_trace_format_name(trace)) == 0,
          "describe: wrong format");
    CHECK(ctx, info->devices->len == n, "describe: %u devices, the trace has %" G_GSIZE_FORMAT,
          info->devices->len, n);
    for (guint d = 0; d < info->devices->len; d++) {
        const FsimTraceDeviceInfo *dev = &g_array_index(info->devices, FsimTraceDeviceInfo, d);

        CHECK(ctx, dev->device == devices[d], "describe: device %u where the trace has %u",
              dev->device, devices[d]);
        for (guint a = 0; a < dev->actions->len; a++) {
            const FsimTraceActionCount *action =
                &g_array_index(dev->actions, FsimTraceActionCount, a);
            const FsimTraceActionCount *previous =
                a > 0 ? &g_array_index(dev->actions, FsimTraceActionCount, a - 1) : NULL;

            CHECK(ctx, action->name != NULL && action->count > 0,
                  "describe: device %u: an action without a name or count", dev->device);
            CHECK(ctx, previous == NULL || strcmp(previous->name, action->name) < 0,
                  "describe: device %u: actions not sorted by name", dev->device);
        }
    }
    return TRUE;
}

/* What one read of a stream saw, to compare reads. */
typedef struct {
    uint64_t events;
    uint64_t allocs;
    uint64_t recorded_oom_allocs;
    FsimTime first_time;
    FsimTime last_time;
    GHashTable *streams; /* of ALLOC and FREE events, as describe counts them */
    GError *error;       /* how the stream ended, NULL at its end */
} StreamSummary;

static void
stream_summary_clear(StreamSummary *summary)
{
    g_clear_pointer(&summary->streams, g_hash_table_unref);
    g_clear_error(&summary->error);
}

static gboolean
check_event(Ctx *ctx, uint32_t device, const FsimEvent *ev, const FsimEvent *previous)
{
    const uint32_t known_flags = FSIM_EVF_DEFERRED | FSIM_EVF_INFERRED | FSIM_EVF_RECORDED_OOM;

    CHECK(ctx, ev->kind >= FSIM_EV_ALLOC && ev->kind < FSIM_EV_KIND_COUNT,
          "device %u: event %" G_GUINT64_FORMAT " has kind %d", device, ev->index, (int)ev->kind);
    CHECK(ctx, ev->device == device, "device %u: event %" G_GUINT64_FORMAT " of device %u", device,
          ev->index, ev->device);
    CHECK(ctx, previous == NULL || previous->time <= ev->time,
          "device %u: event %" G_GUINT64_FORMAT " at %" G_GUINT64_FORMAT
          " ns goes back from %" G_GUINT64_FORMAT " ns",
          device, ev->index, ev->time, previous->time);
    CHECK(ctx, previous == NULL || previous->index <= ev->index,
          "device %u: index %" G_GUINT64_FORMAT " after %" G_GUINT64_FORMAT, device, ev->index,
          previous->index);
    CHECK(ctx, (ev->flags & ~known_flags) == 0, "device %u: event %" G_GUINT64_FORMAT " flags %#x",
          device, ev->index, ev->flags);
    CHECK(ctx, (ev->flags & FSIM_EVF_DEFERRED) == 0 || ev->kind == FSIM_EV_FREE,
          "device %u: event %" G_GUINT64_FORMAT ": DEFERRED on a %s", device, ev->index,
          fsim_event_kind_name(ev->kind));
    CHECK(ctx, (ev->flags & FSIM_EVF_INFERRED) == 0 || ev->kind == FSIM_EV_EMPTY_CACHE,
          "device %u: event %" G_GUINT64_FORMAT ": INFERRED on a %s", device, ev->index,
          fsim_event_kind_name(ev->kind));
    CHECK(ctx,
          (ev->flags & FSIM_EVF_RECORDED_OOM) == 0 || ev->kind == FSIM_EV_ALLOC ||
              ev->kind == FSIM_EV_FREE,
          "device %u: event %" G_GUINT64_FORMAT ": RECORDED_OOM on a %s", device, ev->index,
          fsim_event_kind_name(ev->kind));
    if (ev->kind >= FSIM_EV_POOL_BEGIN)
        CHECK(ctx, ev->id != 0, "device %u: event %" G_GUINT64_FORMAT ": a %s of pool 0", device,
              ev->index, fsim_event_kind_name(ev->kind));
    if (ev->kind == FSIM_EV_ALLOC)
        CHECK(ctx, ev->size >= 1 && ev->size <= FSIM_MAX_SIZE,
              "device %u: event %" G_GUINT64_FORMAT ": alloc of %" G_GUINT64_FORMAT " bytes",
              device, ev->index, ev->size);
    else
        CHECK(ctx, ev->size == 0,
              "device %u: event %" G_GUINT64_FORMAT ": a %s with size %" G_GUINT64_FORMAT, device,
              ev->index, fsim_event_kind_name(ev->kind), ev->size);
    if (ev->label != NULL)
        (void)strlen(ev->label); /* readable: the sanitizers see to it */
    return TRUE;
}

/* An engine error: only an initial state too large for the small device is acceptable. */
static gboolean
engine_error_is_capacity(const GError *error)
{
    return g_error_matches(error, FSIM_ERROR, FSIM_ERROR_FAILED) &&
           strstr(error->message, "does not fit the device") != NULL;
}

/* Watches an engine through its observer callbacks: the live blocks it reports must match its
 * own count, and every block holds its request.  (Registering an observer also keeps the engine
 * off a NULL observer array, see tests/fuzz/README.md.) */
typedef struct {
    uint64_t live_blocks;
    uint64_t undersized; /* blocks smaller than their request */
} EngineWatch;

static void
watch_alloc(gpointer data, const FsimEngine *engine, const FsimEvent *ev, uint64_t id,
            const FsimBlock *block, uint64_t requested)
{
    EngineWatch *watch = data;

    (void)engine;
    (void)ev;
    (void)id;
    watch->live_blocks++;
    watch->undersized += block->size < requested;
}

static void
watch_release(gpointer data, const FsimEngine *engine, uint64_t id, const FsimBlock *block,
              uint64_t requested)
{
    EngineWatch *watch = data;

    (void)engine;
    (void)id;
    (void)block;
    (void)requested;
    watch->live_blocks--;
}

static const FsimObserver watch_observer = {
    .alloc = watch_alloc,
    .release = watch_release,
};

static FsimEngine *
engine_new(Ctx *ctx, const char *policy, const FsimInitialState *state, EngineWatch *watch,
           gboolean *ok)
{
    FsimRunConfig config;
    g_autoptr(GError) local_error = NULL;
    FsimEngine *engine;

    *ok = TRUE;
    fsim_run_config_init(&config);
    config.policy = policy;
    g_assert_true(fsim_device_spec_parse(FUZZ_DEVICE, &config.device, NULL));
    config.initial_state = state;
    config.paranoid = TRUE;
    config.fail_on_oom = FALSE;
    engine = fsim_engine_new(&config, &local_error);
    if (engine == NULL) {
        *ok = broken(ctx, "engine '%s' not created: %s", policy, local_error->message);
        return NULL;
    }
    memset(watch, 0, sizeof(*watch));
    fsim_engine_add_observer(engine, &watch_observer, watch);
    if (!fsim_engine_start(engine, &local_error)) {
        fsim_engine_free(engine);
        if (!engine_error_is_capacity(local_error)) {
            *ok = broken(ctx, "engine '%s' refuses the initial state: %s", policy,
                         local_error->message);
            return NULL;
        }
        /* Too large for 1GiB: replay from an empty state instead. */
        return engine_new(ctx, policy, NULL, watch, ok);
    }
    return engine;
}

/*
 * Read the stream of @device once.  When @policy is set, feed the first events to an engine with
 * that policy.  Fills @summary, whose error is the stream's own (checked here).
 */
static gboolean
read_stream(Ctx *ctx, FsimTrace *trace, uint32_t device, const char *policy,
            const FuzzTraceOptions *options, StreamSummary *summary)
{
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    FsimEvent ev;
    FsimEvent previous = {0};
    gboolean have_previous = FALSE;
    EngineWatch watch;
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    /* Formats that map recorded addresses to ids hand out a fresh id to every alloc (trace.h);
     * in the text and binary formats the ids are the file's own.  The binary reader leaves ids
     * to the engine, which refuses one allocated twice (then stops being fed). */
    gboolean binary = strcmp(fsim_trace_format_name(trace), "binary") == 0;
    gboolean text = strcmp(fsim_trace_format_name(trace), "text") == 0;
    gboolean fresh_ids = !text && !binary;
    g_autoptr(GHashTable) ids = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);

    memset(summary, 0, sizeof(*summary));
    summary->streams = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    stream = fsim_trace_stream_open(trace, device, &summary->error);
    if (stream == NULL)
        return check_reader_error(ctx, summary->error, "stream_open");
    for (gsize i = 0; fresh_ids && state != NULL && i < state->n_blocks; i++)
        g_hash_table_add(ids, g_memdup2(&state->blocks[i].id, sizeof(uint64_t)));
    if (policy != NULL) {
        gboolean ok;

        engine = engine_new(ctx, policy, state, &watch, &ok);
        if (!ok)
            return FALSE;
    }
    while (fsim_trace_stream_next(stream, &ev, &summary->error)) {
        if (!check_event(ctx, device, &ev, have_previous ? &previous : NULL))
            return FALSE;
        if (!have_previous)
            summary->first_time = ev.time;
        summary->last_time = ev.time;
        summary->events++;
        if (ev.kind == FSIM_EV_ALLOC)
            summary->allocs++;
        if (ev.kind == FSIM_EV_ALLOC && (ev.flags & FSIM_EVF_RECORDED_OOM) != 0)
            summary->recorded_oom_allocs++;
        if (fresh_ids && ev.kind == FSIM_EV_ALLOC)
            CHECK(ctx, !g_hash_table_contains(ids, &ev.id),
                  "device %u: event %" G_GUINT64_FORMAT ": alloc of id %" G_GUINT64_FORMAT
                  ", which is not fresh",
                  device, ev.index, ev.id);
        if (fresh_ids && (ev.kind == FSIM_EV_ALLOC || ev.kind == FSIM_EV_FREE ||
                          ev.kind == FSIM_EV_FREE_COMPLETED))
            g_hash_table_add(ids, g_memdup2(&ev.id, sizeof(ev.id)));
        if ((ev.kind == FSIM_EV_ALLOC || ev.kind == FSIM_EV_FREE) &&
            !g_hash_table_contains(summary->streams, &ev.stream))
            g_hash_table_add(summary->streams, g_memdup2(&ev.stream, sizeof(ev.stream)));
        if (engine != NULL &&
            (options->max_engine_events == 0 || summary->events <= options->max_engine_events)) {
            g_autoptr(GError) local_error = NULL;
            gboolean ok = fsim_engine_process(engine, &ev, &local_error);

            if (!ok && ((binary && g_error_matches(local_error, FSIM_TRACE_ERROR,
                                                   FSIM_TRACE_ERROR_DUPLICATE)) ||
                        ((binary || text) && ev.kind >= FSIM_EV_POOL_BEGIN &&
                         g_error_matches(local_error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_SYNTAX))))
                g_clear_pointer(&engine, fsim_engine_free);
            else
                CHECK(ctx, ok, "device %u: engine '%s' stops at event %" G_GUINT64_FORMAT ": %s",
                      device, policy, ev.index, local_error->message);
        }
        previous = ev;
        previous.label = NULL; /* valid only until the next event */
        have_previous = TRUE;
    }
    if (summary->error != NULL && !check_reader_error(ctx, summary->error, "stream_next"))
        return FALSE;
    if (engine != NULL) {
        g_autoptr(GError) local_error = NULL;
        const FsimMetrics *metrics;

        CHECK(ctx, fsim_engine_finish(engine, &local_error), "device %u: engine '%s' finish: %s",
              device, policy, local_error->message);
        metrics = fsim_engine_metrics(engine);
        CHECK(ctx, watch.live_blocks == fsim_engine_counters(engine)->live_blocks,
              "device %u: engine '%s' counts %" G_GUINT64_FORMAT
              " live blocks, its observer %" G_GUINT64_FORMAT,
              device, policy, fsim_engine_counters(engine)->live_blocks, watch.live_blocks);
        CHECK(ctx, watch.undersized == 0, "device %u: engine '%s': a block below its request",
              device, policy);
        CHECK(ctx, metrics->peak_requested_bytes <= metrics->peak_allocated_bytes,
              "device %u: engine '%s': peak requested %" G_GUINT64_FORMAT
              " above peak allocated %" G_GUINT64_FORMAT,
              device, policy, metrics->peak_requested_bytes, metrics->peak_allocated_bytes);
    }
    return TRUE;
}

/* Two reads of one stream must agree. */
static gboolean
check_same(Ctx *ctx, uint32_t device, const StreamSummary *a, const StreamSummary *b)
{
    CHECK(ctx, a->events == b->events && a->allocs == b->allocs,
          "device %u: two reads disagree: %" G_GUINT64_FORMAT " then %" G_GUINT64_FORMAT " events",
          device, a->events, b->events);
    CHECK(ctx, (a->error == NULL) == (b->error == NULL),
          "device %u: one read fails and the other does not", device);
    if (a->error != NULL)
        CHECK(ctx,
              a->error->domain == b->error->domain && a->error->code == b->error->code &&
                  strcmp(a->error->message, b->error->message) == 0,
              "device %u: two reads fail differently: '%s' then '%s'", device, a->error->message,
              b->error->message);
    return TRUE;
}

static uint64_t
action_count(const FsimTraceDeviceInfo *dev, const char *name)
{
    for (guint a = 0; a < dev->actions->len; a++) {
        const FsimTraceActionCount *action = &g_array_index(dev->actions, FsimTraceActionCount, a);

        if (strcmp(action->name, name) == 0)
            return action->count;
    }
    return 0;
}

/*
 * What describe said of @device against a read of its stream (@read), which describe's success
 * says must have ended without an error; and, per format, its action counts against the events
 * and outcomes they become (docs/trace-formats.md).
 */
static gboolean
check_described(Ctx *ctx, const FsimTrace *trace, uint32_t device, const FsimTraceInfo *info,
                const StreamSummary *read)
{
    const FsimTraceDeviceInfo *dev = NULL;
    gsize n_outcomes;
    const FsimOutcome *outcomes = fsim_trace_outcomes(trace, device, &n_outcomes);
    uint64_t by_kind[FSIM_OUTCOME_OOM + 1] = {0};

    for (guint d = 0; d < info->devices->len; d++) {
        if (g_array_index(info->devices, FsimTraceDeviceInfo, d).device == device)
            dev = &g_array_index(info->devices, FsimTraceDeviceInfo, d);
    }
    CHECK(ctx, dev != NULL, "device %u: not described", device);
    CHECK(ctx, read->error == NULL, "device %u: describe read the stream, a second read fails: %s",
          device, read->error->message);
    CHECK(ctx, dev->allocs == read->allocs,
          "device %u: describe counts %" G_GUINT64_FORMAT " allocs, a read %" G_GUINT64_FORMAT,
          device, dev->allocs, read->allocs);
    CHECK(ctx, dev->duration_ns == read->last_time - read->first_time,
          "device %u: describe's duration disagrees with a read", device);
    CHECK(ctx, dev->streams == g_hash_table_size(read->streams),
          "device %u: describe's stream count disagrees with a read", device);
    for (gsize i = 0; i < n_outcomes; i++)
        by_kind[outcomes[i].kind]++; /* kinds checked by check_trace() */
    if (strcmp(info->format, "text") == 0) {
        CHECK(ctx, dev->events == read->events,
              "device %u: describe counts %" G_GUINT64_FORMAT " events, a read %" G_GUINT64_FORMAT,
              device, dev->events, read->events);
    } else if (strcmp(info->format, "torch") == 0) {
        CHECK(ctx, action_count(dev, "alloc") == read->allocs - read->recorded_oom_allocs,
              "device %u: %" G_GUINT64_FORMAT " alloc entries but %" G_GUINT64_FORMAT
              " alloc events",
              device, action_count(dev, "alloc"), read->allocs - read->recorded_oom_allocs);
        CHECK(ctx, action_count(dev, "oom") >= read->recorded_oom_allocs,
              "device %u: more recorded OOMs replayed than oom entries", device);
        CHECK(ctx,
              action_count(dev, "segment_alloc") == by_kind[FSIM_OUTCOME_SEGMENT_ALLOC] &&
                  action_count(dev, "segment_free") == by_kind[FSIM_OUTCOME_SEGMENT_FREE] &&
                  action_count(dev, "segment_map") == by_kind[FSIM_OUTCOME_SEGMENT_MAP] &&
                  action_count(dev, "segment_unmap") == by_kind[FSIM_OUTCOME_SEGMENT_UNMAP] &&
                  action_count(dev, "oom") == by_kind[FSIM_OUTCOME_OOM],
              "device %u: the segment and oom entries disagree with the outcomes", device);
    } else if (strcmp(info->format, "rmm") == 0) {
        CHECK(ctx,
              action_count(dev, "allocate failure") == by_kind[FSIM_OUTCOME_OOM] &&
                  n_outcomes == by_kind[FSIM_OUTCOME_OOM],
              "device %u: %" G_GUINT64_FORMAT " 'allocate failure' rows but %" G_GSIZE_FORMAT
              " outcomes",
              device, action_count(dev, "allocate failure"), n_outcomes);
        CHECK(ctx, read->allocs <= action_count(dev, "allocate"),
              "device %u: more alloc events than 'allocate' rows", device);
    }
    return TRUE;
}

/* Two streams of one device open at once yield the same events and end the same way. */
static gboolean
check_lockstep(Ctx *ctx, FsimTrace *trace, uint32_t device)
{
    g_autoptr(GError) error_a = NULL;
    g_autoptr(GError) error_b = NULL;
    g_autoptr(FsimTraceStream) a = fsim_trace_stream_open(trace, device, &error_a);
    g_autoptr(FsimTraceStream) b = fsim_trace_stream_open(trace, device, &error_b);
    FsimEvent ea;
    FsimEvent eb;
    uint64_t n = 0;

    CHECK(ctx, (a == NULL) == (b == NULL), "device %u: one of two streams fails to open", device);
    if (a == NULL)
        return TRUE;
    for (;;) {
        gboolean more_a = fsim_trace_stream_next(a, &ea, &error_a);
        gboolean more_b = fsim_trace_stream_next(b, &eb, &error_b);

        CHECK(ctx, more_a == more_b, "device %u: two streams open at once differ in length",
              device);
        if (!more_a)
            break;
        CHECK(ctx,
              ea.time == eb.time && ea.index == eb.index && ea.id == eb.id && ea.size == eb.size &&
                  ea.stream == eb.stream && ea.addr == eb.addr && ea.device == eb.device &&
                  ea.flags == eb.flags && ea.kind == eb.kind && g_strcmp0(ea.label, eb.label) == 0,
              "device %u: two streams open at once differ at their event %" G_GUINT64_FORMAT,
              device, n);
        n++;
    }
    CHECK(ctx,
          (error_a == NULL && error_b == NULL) || (error_a != NULL && error_b != NULL &&
                                                   strcmp(error_a->message, error_b->message) == 0),
          "device %u: two streams open at once end differently", device);
    return TRUE;
}

static gboolean
check_device(Ctx *ctx, FsimTrace *trace, uint32_t device, const FsimTraceInfo *info,
             const FuzzTraceOptions *options, FuzzTraceResult *result)
{
    static const struct {
        guint flag;
        const char *name;
    } policies[] = {{FUZZ_TRACE_BESTFIT, "bestfit"}, {FUZZ_TRACE_DIRECT, "direct"}};
    StreamSummary first = {0};
    gboolean ok = TRUE;

    for (gsize p = 0; ok && p < G_N_ELEMENTS(policies); p++) {
        StreamSummary summary;

        if ((options->policies & policies[p].flag) == 0)
            continue;
        ok = read_stream(ctx, trace, device, policies[p].name, options, &summary);
        result->engine_runs++;
        if (ok && first.streams != NULL)
            ok = check_same(ctx, device, &first, &summary);
        if (first.streams == NULL) {
            first = summary;
        } else {
            stream_summary_clear(&summary);
        }
    }
    if (ok && first.streams == NULL)
        ok = read_stream(ctx, trace, device, NULL, options, &first);
    ok = ok && check_lockstep(ctx, trace, device);
    if (!ok) {
        stream_summary_clear(&first);
        return FALSE;
    }
    result->events += first.events;
    if (first.error != NULL)
        result->complete = FALSE;
    if (info != NULL)
        ok = check_described(ctx, trace, device, info, &first);
    stream_summary_clear(&first);
    return ok;
}

gboolean
fuzz_trace_check(const char *path, const FuzzTraceOptions *options, FuzzTraceResult *result,
                 GError **error)
{
    Ctx ctx = {.path = path, .error = error};
    FuzzTraceResult local_result;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceInfo) info = NULL;
    g_autoptr(GError) local_error = NULL;
    const uint32_t *devices;
    gsize n;

    if (result == NULL)
        result = &local_result;
    memset(result, 0, sizeof(*result));
    trace = fsim_trace_open(path, &local_error);
    if (trace == NULL)
        return check_reader_error(&ctx, local_error, "open");
    result->opened = TRUE;
    result->complete = TRUE;
    g_strlcpy(result->format, fsim_trace_format_name(trace), sizeof(result->format));
    if (!check_trace(&ctx, trace))
        return FALSE;
    info = fsim_trace_describe(trace, &local_error);
    if (info == NULL) {
        if (!check_reader_error(&ctx, local_error, "describe"))
            return FALSE;
    } else if (!check_info(&ctx, trace, info)) {
        return FALSE;
    }
    devices = fsim_trace_devices(trace, &n);
    result->devices = n;
    for (gsize d = 0; d < n; d++) {
        if (!check_device(&ctx, trace, devices[d], info, options, result))
            return FALSE;
    }
    return TRUE;
}
