/* SPDX-License-Identifier: MIT */
/*
 * One run in the results database: what an engine observer collects while the run replays, in
 * bounded memory, and the one transaction that writes it at the end (see sqlite.c's notes).
 */
#include <glib.h>

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "fragsim/store.h"

#include "store-private.h"

/* ---- one run: collection ------------------------------------------------------------------- */

/* The events since the last fold into the current sample and phase (store_fold()): the
 * per-event work is these few minima and maxima; a sample or phase is updated once per fold, at
 * the end of a sample, at a mark and at the end of the run. */
typedef struct {
    /* reserved bytes may have moved since the span's last event (a device call, the only way
     * they change), or the span is new: the next event reads them; until then they stand */
    gboolean reserved_stale;
    uint64_t events;
    uint64_t requested_min, requested_max;
    uint64_t allocated_min, allocated_max;
    uint64_t reserved_min, reserved_max;     /* reserved_max: with peaks inside an event */
    uint64_t requested, allocated, reserved; /* after the last event */
} StoreSpan;

typedef struct {
    double area; /* size x lifetime in events: the heap key */
    FsimStoredBlock block;
} HeapBlock;

/* The rows a run gathers while it replays, each kind in a GArray of its own, written when the
 * run finishes and released then. */
typedef enum {
    ROWS_SAMPLES,  /* FsimStoredSample: the closed samples */
    ROWS_SEGMENTS, /* FsimStoredSegment: the first max_segment_actions device actions */
    ROWS_HEAP,     /* HeapBlock, unordered: candidates for the max_blocks kept, < 2 x max_blocks */
    ROWS_OOMS,     /* FsimOomRecord: the first max_ooms */
    ROWS_MARKS,    /* FsimStoredMark: the first max_marks */
    ROWS_PHASES,   /* FsimStoredPhase: the closed phases, up to max_marks */
    RUN_ROWS
} RunRows;

/* Each kind's element size and what clears an element (NULL: nothing to free). */
static const struct {
    guint size;
    GDestroyNotify clear;
} run_rows[RUN_ROWS] = {
    [ROWS_SAMPLES] = {sizeof(FsimStoredSample), NULL},
    [ROWS_SEGMENTS] = {sizeof(FsimStoredSegment), NULL},
    [ROWS_HEAP] = {sizeof(HeapBlock), NULL},
    [ROWS_OOMS] = {sizeof(FsimOomRecord), NULL},
    [ROWS_MARKS] = {sizeof(FsimStoredMark), store_mark_clear},
    [ROWS_PHASES] = {sizeof(FsimStoredPhase), store_phase_clear},
};

struct FsimStoreRun {
    FsimStore *store;
    FsimEngine *engine;
    int64_t id;
    FsimStoreLimits limits;
    gboolean done;
    gboolean has_metrics; /* fsim_store_run_set_metrics() */
    FsimMetrics metrics;
    GArray *rows[RUN_ROWS]; /* NULL once released */

    /* the engine's, read on every event */
    const FsimEngineCounters *counters;
    const FsimDevice *device;
    StoreSpan span;

    /* samples: the closed ones are rows[ROWS_SAMPLES] */
    FsimStoredSample current;
    gboolean has_current;
    uint64_t width;
    uint64_t seen_reserved_peak;

    /* device actions: the first max_segment_actions are rows[ROWS_SEGMENTS] */
    uint64_t segment_actions;

    /* blocks: the live ones are the engine's (fsim_engine_releasing(), at the end
     * fsim_engine_foreach_live_alloc()), not a second table */
    HeapBlock threshold; /* once has_threshold: the least kept at the last selection */
    gboolean has_threshold;
    uint64_t blocks_seen; /* counted as they go (released) or at the end (still alive) */

    /* phases between marks: the closed ones, and the one the last event belongs to */
    FsimStoredPhase phase;
    gboolean has_phase;
    gboolean any_mark;

    FsimStoredBreakdown breakdown; /* fsim_store_run_set_breakdown() */
    GArray *pools;                 /* FsimStoredPool: fsim_store_run_set_pools() */
    uint64_t size_count[STORE_SIZE_BUCKETS];
    uint64_t size_bytes[STORE_SIZE_BUCKETS];

    uint64_t last_index;
    FsimTime last_time;
};

void
store_mark_clear(gpointer data)
{
    FsimStoredMark *mark = data;

    g_clear_pointer(&mark->label, g_free);
}

void
store_phase_clear(gpointer data)
{
    FsimStoredPhase *phase = data;

    g_clear_pointer(&phase->label, g_free);
}

static void
samples_merge_pairs(FsimStoreRun *run)
{
    guint n = run->rows[ROWS_SAMPLES]->len / 2;
    FsimStoredSample *s = (FsimStoredSample *)(void *)run->rows[ROWS_SAMPLES]->data;

    for (guint i = 0; i < n; i++) {
        FsimStoredSample a = s[2 * i];
        const FsimStoredSample *b = &s[2 * i + 1];

        a.event_index_last = b->event_index_last;
        a.events += b->events;
        a.time_last = b->time_last;
        a.requested = b->requested;
        a.allocated = b->allocated;
        a.reserved = b->reserved;
        a.requested_min = MIN(a.requested_min, b->requested_min);
        a.requested_max = MAX(a.requested_max, b->requested_max);
        a.allocated_min = MIN(a.allocated_min, b->allocated_min);
        a.allocated_max = MAX(a.allocated_max, b->allocated_max);
        a.reserved_min = MIN(a.reserved_min, b->reserved_min);
        a.reserved_max = MAX(a.reserved_max, b->reserved_max);
        s[i] = a;
    }
    g_array_set_size(run->rows[ROWS_SAMPLES], n);
    run->width *= 2;
}

static void
span_reset(StoreSpan *span)
{
    span->reserved_stale = TRUE;
    span->events = 0;
    span->requested_min = span->allocated_min = span->reserved_min = G_MAXUINT64;
    span->requested_max = span->allocated_max = span->reserved_max = 0;
}

/* Close the current sample: the span must have been folded. */
static void
samples_close_bucket(FsimStoreRun *run)
{
    if (!run->has_current)
        return;
    g_array_append_val(run->rows[ROWS_SAMPLES], run->current);
    run->has_current = FALSE;
    if (run->rows[ROWS_SAMPLES]->len >= run->limits.max_samples)
        samples_merge_pairs(run);
}

/* Close the current phase and open one at @index, @time (@label NULL: before the first mark).
 * Past max_marks phases the last one goes on: the figures stay bounded. */
static void
phase_open(FsimStoreRun *run, const char *label, uint64_t index, FsimTime time)
{
    FsimStoredPhase *p = &run->phase;

    if (run->has_phase) {
        if (run->rows[ROWS_PHASES]->len >= run->limits.max_marks)
            return;
        g_array_append_val(run->rows[ROWS_PHASES], run->phase);
    }
    memset(p, 0, sizeof(*p));
    p->label = g_strdup(label);
    p->event_index = p->event_index_last = index;
    p->time = p->time_last = time;
    run->has_phase = TRUE;
}

/* Fold the span into the current sample and phase (both open when the span has events). */
static void
store_fold(FsimStoreRun *run)
{
    StoreSpan *span = &run->span;
    FsimStoredSample *s = &run->current;
    FsimStoredPhase *p = &run->phase;

    if (span->events == 0)
        return;
    s->event_index_last = p->event_index_last = run->last_index;
    s->time_last = p->time_last = run->last_time;
    s->events += span->events;
    s->requested = span->requested;
    s->allocated = span->allocated;
    s->reserved = span->reserved;
    s->requested_min = MIN(s->requested_min, span->requested_min);
    s->requested_max = MAX(s->requested_max, span->requested_max);
    s->allocated_min = MIN(s->allocated_min, span->allocated_min);
    s->allocated_max = MAX(s->allocated_max, span->allocated_max);
    s->reserved_min = MIN(s->reserved_min, span->reserved_min);
    s->reserved_max = MAX(s->reserved_max, span->reserved_max);
    p->events += span->events;
    p->peak_requested_bytes = MAX(p->peak_requested_bytes, span->requested_max);
    p->peak_allocated_bytes = MAX(p->peak_allocated_bytes, span->allocated_max);
    p->peak_reserved_bytes = MAX(p->peak_reserved_bytes, span->reserved_max);
    p->reserved_bytes_end = span->reserved;
    span_reset(span);
}

/* Before @ev joins the span: open a sample and a phase where none is, and a new phase at a mark
 * (the span so far belongs to the one before). */
static void
store_open(FsimStoreRun *run, const FsimEvent *ev)
{
    if (ev->kind == FSIM_EV_MARK) {
        store_fold(run);
        run->any_mark = TRUE;
        phase_open(run, ev->label != NULL ? ev->label : "", ev->index, ev->time);
    } else if (!run->has_phase) {
        phase_open(run, NULL, ev->index, ev->time);
    }
    if (!run->has_current) {
        FsimStoredSample *s = &run->current;

        memset(s, 0, sizeof(*s));
        s->event_index = ev->index;
        s->time = ev->time;
        s->requested_min = s->allocated_min = s->reserved_min = G_MAXUINT64;
        run->has_current = TRUE;
    }
}

static gboolean
heap_less(const HeapBlock *a, const HeapBlock *b)
{
    if (a->area != b->area)
        return a->area < b->area;
    /* Deterministic ties: the later allocation is the smaller. */
    if (a->block.alloc_event != b->block.alloc_event)
        return a->block.alloc_event > b->block.alloc_event;
    return a->block.id > b->block.id;
}

static inline void
heap_swap(HeapBlock *a, HeapBlock *b)
{
    HeapBlock tmp = *a;

    *a = *b;
    *b = tmp;
}

/* Put the @k greatest of @h[0..n) (by heap_less, a total order) first, in no order:
 * quickselect on the k-th greatest. */
static void
blocks_select(HeapBlock *h, guint n, guint k)
{
    guint lo = 0;
    guint hi = n;

    if (k == 0 || k >= n)
        return;
    while (hi - lo > 1) {
        guint last = hi - 1;
        guint store = lo;

        heap_swap(&h[lo + (hi - lo) / 2], &h[last]); /* the pivot, at the end */
        for (guint i = lo; i < last; i++) {
            if (heap_less(&h[last], &h[i]))
                heap_swap(&h[i], &h[store++]);
        }
        heap_swap(&h[store], &h[last]);
        if (store == k - 1)
            return;
        if (store > k - 1)
            hi = store;
        else
            lo = store + 1;
    }
}

/* Keep only the max_blocks greatest candidates; the least of them is the new threshold. */
static void
blocks_settle(FsimStoreRun *run)
{
    guint max = run->limits.max_blocks;
    HeapBlock *h = (HeapBlock *)(void *)run->rows[ROWS_HEAP]->data;

    if (run->rows[ROWS_HEAP]->len <= max)
        return;
    blocks_select(h, run->rows[ROWS_HEAP]->len, max);
    g_array_set_size(run->rows[ROWS_HEAP], max);
    run->threshold = h[0];
    for (guint i = 1; i < max; i++) {
        if (heap_less(&h[i], &run->threshold))
            run->threshold = h[i];
    }
    run->has_threshold = TRUE;
}

/* A block's key among the blocks kept: its size x its lifetime in events, from its allocation
 * (event 0 for a block alive at trace start) to @end_index.  Through signed conversions, which
 * are one instruction each: sizes and indexes stay far below 2^63. */
static inline double
block_area(uint64_t size, int64_t alloc_event, uint64_t end_index)
{
    uint64_t start = alloc_event < 0 ? 0 : (uint64_t)alloc_event;

    return (double)(int64_t)size * (double)(int64_t)(end_index - MIN(start, end_index) + 1);
}

/* Keep @block if it may be among the max_blocks largest (by size x lifetime): candidates
 * gather unordered and are cut down to max_blocks by a selection when they reach twice that,
 * so an offer costs a comparison and a copy, not a heap's sift. */
static void
blocks_offer(FsimStoreRun *run, const FsimStoredBlock *block, uint64_t end_index)
{
    HeapBlock item;

    item.block = *block;
    item.area = block_area(block->size, block->alloc_event, end_index);
    if (run->limits.max_blocks == 0 || (run->has_threshold && heap_less(&item, &run->threshold)))
        return;
    g_array_append_val(run->rows[ROWS_HEAP], item);
    if (run->rows[ROWS_HEAP]->len >= 2 * run->limits.max_blocks)
        blocks_settle(run);
}

/* The end of a sample (out of line: once per sample). */
G_GNUC_NO_INLINE static void
store_close(FsimStoreRun *run)
{
    store_fold(run);
    samples_close_bucket(run);
}

/* Reserved bytes after an event that may have moved them (span->reserved_stale). */
static inline void
span_add_reserved(FsimStoreRun *run)
{
    StoreSpan *span = &run->span;
    uint64_t reserved = run->counters->reserved_bytes;
    uint64_t reserved_high = reserved;
    uint64_t peak = (uint64_t)run->device->reserved.peak;

    /* A peak reached inside the event (memory taken then given back, as in a release-and-retry)
     * is not visible in the counters after it: the device's running peak catches it. */
    if (peak > run->seen_reserved_peak) {
        run->seen_reserved_peak = peak;
        reserved_high = MAX(reserved_high, peak);
    }
    span->reserved = reserved;
    span->reserved_min = MIN(span->reserved_min, reserved);
    span->reserved_max = MAX(span->reserved_max, reserved_high);
    span->reserved_stale = FALSE;
}

/* The state after @ev joins the span (the hot path of a run with a database). */
static inline void
span_add(FsimStoreRun *run, const FsimEvent *ev)
{
    const FsimEngineCounters *c = run->counters;
    StoreSpan *span = &run->span;
    uint64_t requested = c->requested_bytes;
    uint64_t allocated = c->allocated_bytes;

    if (G_UNLIKELY(span->reserved_stale))
        span_add_reserved(run);
    run->last_index = ev->index;
    run->last_time = ev->time;
    span->events++;
    span->requested = requested;
    span->allocated = allocated;
    span->requested_min = MIN(span->requested_min, requested);
    span->requested_max = MAX(span->requested_max, requested);
    span->allocated_min = MIN(span->allocated_min, allocated);
    span->allocated_max = MAX(span->allocated_max, allocated);
    if (ev->kind == FSIM_EV_ALLOC && ev->size > 0) {
        guint log2 = (guint)g_bit_storage(ev->size) - 1;

        log2 = MIN(log2, STORE_SIZE_BUCKETS - 1);
        run->size_count[log2]++;
        run->size_bytes[log2] += ev->size;
    }
    if (G_UNLIKELY(run->current.events + span->events >= run->width))
        store_close(run);
}

/* An event that opens a sample or a phase, or a mark (kept up to max_marks). */
G_GNUC_NO_INLINE static void
observe_event_opening(FsimStoreRun *run, const FsimEvent *ev)
{
    store_open(run, ev);
    if (ev->kind == FSIM_EV_MARK && run->rows[ROWS_MARKS]->len < run->limits.max_marks) {
        FsimStoredMark mark = {ev->index, ev->time, g_strdup(ev->label != NULL ? ev->label : "")};

        g_array_append_val(run->rows[ROWS_MARKS], mark);
    }
    span_add(run, ev);
}

/* Every event.  No call on the common path: the rest is out of line. */
static void
observe_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    FsimStoreRun *run = data;

    (void)engine;
    if (G_UNLIKELY(run->done))
        return;
    if (G_UNLIKELY(!run->has_current || ev->kind == FSIM_EV_MARK))
        observe_event_opening(run, ev);
    else
        span_add(run, ev);
}

/* A block of the engine's as the database stores it; @free_event -1 while it lives. */
static FsimStoredBlock
stored_block(const FsimLiveAlloc *alloc, int64_t free_event, FsimTime free_time)
{
    FsimStoredBlock block = {0};

    block.id = alloc->id;
    block.addr = alloc->block.addr;
    block.size = alloc->block.size;
    block.requested = alloc->requested;
    block.stream = alloc->stream;
    block.alloc_event = alloc->alloc_event;
    block.alloc_time = alloc->alloc_time;
    block.free_event = free_event;
    block.free_time = free_time;
    return block;
}

static void
observe_release(gpointer data, const FsimEngine *engine, uint64_t id, const FsimBlock *block,
                uint64_t requested)
{
    FsimStoreRun *run = data;
    const FsimLiveAlloc *alloc;
    uint64_t index = run->counters->event_index;
    FsimStoredBlock stored;

    (void)id;
    (void)requested;
    if (G_UNLIKELY(run->done))
        return;
    run->blocks_seen++;
    alloc = fsim_engine_releasing(engine);
    /* Most blocks are small and short-lived: refuse them before building the record. */
    if (alloc == NULL || (run->has_threshold &&
                          block_area(block->size, alloc->alloc_event, index) < run->threshold.area))
        return;
    stored = stored_block(alloc, (int64_t)index, run->counters->now);
    blocks_offer(run, &stored, index);
}

static void
observe_oom(gpointer data, const FsimEngine *engine, const FsimOomRecord *oom)
{
    FsimStoreRun *run = data;

    (void)engine;
    if (run->done)
        return;
    if (!run->has_phase)
        phase_open(run, NULL, oom->event_index, oom->time);
    run->phase.ooms++;
    if (run->rows[ROWS_OOMS]->len < run->limits.max_ooms)
        g_array_append_val(run->rows[ROWS_OOMS], *oom);
}

static void
segments_add(FsimStoreRun *run, int64_t event_index, FsimTime time, guint action, FsimAddr addr,
             uint64_t size)
{
    FsimStoredSegment segment = {event_index, time, action, addr, size};

    run->segment_actions++;
    if (run->rows[ROWS_SEGMENTS]->len < run->limits.max_segment_actions)
        g_array_append_val(run->rows[ROWS_SEGMENTS], segment);
}

static void
observe_device_call(gpointer data, const FsimEngine *engine, FsimDeviceCall call, FsimAddr addr,
                    uint64_t size)
{
    FsimStoreRun *run = data;
    const FsimEngineCounters *c = fsim_engine_counters(engine);

    run->span.reserved_stale = TRUE;
    if (run->done)
        return;
    /* cudaMalloc reserves whole pages: record the memory the device holds. */
    if (call == FSIM_CALL_MEM_ALLOC || call == FSIM_CALL_MEM_FREE)
        size = fsim_device_round(fsim_engine_device(engine), size);
    if (!run->has_phase)
        phase_open(run, NULL, c->event_index, c->now);
    /* the calls the metrics count (device_mallocs ... device_unmaps), not address reservations */
    if (call != FSIM_CALL_VA_RESERVE && call != FSIM_CALL_VA_RELEASE)
        run->phase.driver_calls++;
    segments_add(run, (int64_t)c->event_index, c->now, call, addr, size);
}

static void
observe_seed_segment(gpointer data, const FsimEngine *engine, const FsimSeedSegment *segment)
{
    FsimStoreRun *run = data;

    (void)engine;
    if (!run->done)
        segments_add(run, -1, 0, FSIM_STORE_ACTION_SEED, segment->addr, segment->size);
}

static const FsimObserver store_observer = {
    .event = observe_event,
    .release = observe_release,
    .oom = observe_oom,
    .device_call = observe_device_call,
    .seed_segment = observe_seed_segment,
};

FsimStoreRun *
fsim_store_attach(FsimStore *store, FsimEngine *engine, const FsimStoreRunInfo *info,
                  GError **error)
{
    FsimStoreRun *run;

    g_return_val_if_fail(store != NULL && engine != NULL && info != NULL, NULL);
    g_return_val_if_fail(info->trace != NULL && info->policy != NULL, NULL);
    run = g_new0(FsimStoreRun, 1);
    if (info->limits != NULL)
        run->limits = *info->limits;
    if (run->limits.max_samples == 0)
        run->limits.max_samples = FSIM_STORE_DEFAULT_SAMPLES;
    /* Pairs are merged when the array is full: keep it even, and at least one pair. */
    run->limits.max_samples = MAX(2, run->limits.max_samples + (run->limits.max_samples & 1));
    if (run->limits.max_blocks == 0)
        run->limits.max_blocks = STORE_DEFAULT_BLOCKS;
    if (run->limits.max_segment_actions == 0)
        run->limits.max_segment_actions = STORE_DEFAULT_SEGMENT_ACTIONS;
    if (run->limits.max_ooms == 0)
        run->limits.max_ooms = STORE_DEFAULT_OOMS;
    if (run->limits.max_marks == 0)
        run->limits.max_marks = STORE_DEFAULT_MARKS;

    if (!store_insert_run_row(store, &fsim_engine_config(engine)->device, info,
                              run->limits.max_samples, &run->id, error)) {
        g_free(run);
        return NULL;
    }
    run->store = store;

    run->engine = engine;
    run->counters = fsim_engine_counters(engine);
    run->device = fsim_engine_device(engine);
    span_reset(&run->span);
    run->width = 1;
    for (guint i = 0; i < RUN_ROWS; i++) {
        run->rows[i] = g_array_new(FALSE, FALSE, run_rows[i].size);
        if (run_rows[i].clear != NULL)
            g_array_set_clear_func(run->rows[i], run_rows[i].clear);
    }
    store->attached++;
    fsim_engine_add_observer(engine, &store_observer, run);
    return run;
}

int64_t
fsim_store_run_id(const FsimStoreRun *run)
{
    return run->id;
}

/* ---- one run: writing ---------------------------------------------------------------------- */

/* Inserts the `run_metrics` row of run @id. */
gboolean
store_write_metrics(FsimStore *store, int64_t id, const FsimMetrics *m, GError **error)
{
    sqlite3_stmt *stmt = store_stmt(store, STMT_INSERT_METRICS, error);
    int rc = SQLITE_OK;
    int i = 1;

    if (stmt == NULL)
        return FALSE;
    bind_i64(stmt, i++, id, &rc);
#define STORE_BIND_U(field)                bind_u64(stmt, i++, m->field, &rc)
#define STORE_BIND_F(field)                bind_double(stmt, i++, m->field, &rc)
#define STORE_BIND_I(field)                bind_opt_i64(stmt, i++, m->field, &rc)
#define STORE_BIND_METRIC(name, kind, doc) STORE_BIND_##kind(name);
    FSIM_METRICS(STORE_BIND_METRIC)
#undef STORE_BIND_METRIC
#undef STORE_BIND_U
#undef STORE_BIND_F
#undef STORE_BIND_I
    return store_step_done(store, stmt, rc, "writing the run's metrics", error);
}

static gboolean
write_metrics(FsimStoreRun *run, GError **error)
{
    return store_write_metrics(run->store, run->id,
                               run->has_metrics ? &run->metrics : fsim_engine_metrics(run->engine),
                               error);
}

/* The statement @which of a row of the run: ready, with the run's id bound as its first
 * parameter (the first failure in *@rc); NULL with @error set. */
static sqlite3_stmt *
run_stmt(FsimStoreRun *run, StoreStmt which, int *rc, GError **error)
{
    sqlite3_stmt *stmt = store_stmt(run->store, which, error);

    if (stmt != NULL)
        bind_i64(stmt, 1, run->id, rc);
    return stmt;
}

/* The rows of @rows (of @layout), each after the run's id and its index in @rows. */
static gboolean
write_rows(FsimStoreRun *run, StoreStmt which, const StoreRowLayout *layout, GArray *rows,
           const char *what, GError **error)
{
    guint size = g_array_get_element_size(rows);

    for (guint i = 0; i < rows->len; i++) {
        int rc = SQLITE_OK;
        sqlite3_stmt *stmt = run_stmt(run, which, &rc, error);

        if (stmt == NULL)
            return FALSE;
        bind_i64(stmt, 2, i, &rc);
        store_bind_row(stmt, 3, layout, rows->data + (gsize)i * size, &rc);
        if (!store_step_done(run->store, stmt, rc, what, error))
            return FALSE;
    }
    return TRUE;
}

/* One packed chunk of @rows rows of @kind (store-pack.c). */
static gboolean
write_packed_chunk(FsimStoreRun *run, const char *kind, guint seq, guint rows,
                   const GByteArray *data, GError **error)
{
    int rc = SQLITE_OK;
    sqlite3_stmt *stmt = run_stmt(run, STMT_INSERT_PACKED, &rc, error);

    if (stmt == NULL)
        return FALSE;
    bind_text(stmt, 2, kind, &rc);
    bind_i64(stmt, 3, seq, &rc);
    bind_i64(stmt, 4, rows, &rc);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_blob(stmt, 5, data->data, (int)data->len, SQLITE_TRANSIENT);
    return store_step_done(run->store, stmt, rc, "writing packed data", error);
}

/* @rows (of @kind) in packed chunks of STORE_PACK_CHUNK rows. */
static gboolean
write_packed(FsimStoreRun *run, const StorePackKind *kind, GArray *rows, GError **error)
{
    guint size = g_array_get_element_size(rows);

    for (guint start = 0, seq = 0; start < rows->len; start += STORE_PACK_CHUNK, seq++) {
        guint count = MIN(STORE_PACK_CHUNK, rows->len - start);
        g_autoptr(GByteArray) data = g_byte_array_new();

        store_pack(kind, rows->data + (gsize)start * size, count, data);
        if (!write_packed_chunk(run, store_pack_name(kind), seq, count, data, error))
            return FALSE;
    }
    return TRUE;
}

static gint
heap_by_alloc(gconstpointer a, gconstpointer b)
{
    const HeapBlock *x = a;
    const HeapBlock *y = b;

    if (x->block.alloc_event != y->block.alloc_event)
        return x->block.alloc_event < y->block.alloc_event ? -1 : 1;
    return fsim_compare_u64(x->block.id, y->block.id);
}

static void
offer_live(gpointer data, const FsimLiveAlloc *alloc)
{
    FsimStoreRun *run = data;
    FsimStoredBlock stored = stored_block(alloc, -1, run->last_time);

    run->blocks_seen++;
    blocks_offer(run, &stored, run->last_index);
}

static gboolean
write_blocks(FsimStoreRun *run, GError **error)
{
    g_autoptr(GArray) blocks = NULL;

    /* Blocks still alive compete with the others, their lifetime running to the end. */
    fsim_engine_foreach_live_alloc(run->engine, offer_live, run);
    blocks_settle(run);
    g_array_sort(run->rows[ROWS_HEAP], heap_by_alloc);
    blocks = g_array_sized_new(FALSE, FALSE, sizeof(FsimStoredBlock), run->rows[ROWS_HEAP]->len);
    for (guint i = 0; i < run->rows[ROWS_HEAP]->len; i++)
        g_array_append_val(blocks, g_array_index(run->rows[ROWS_HEAP], HeapBlock, i).block);
    return write_packed(run, &store_packed_blocks, blocks, error);
}

static gboolean
write_marks_and_sizes(FsimStoreRun *run, GError **error)
{
    FsimStore *store = run->store;

    if (!write_rows(run, STMT_INSERT_MARK, &store_mark_row, run->rows[ROWS_MARKS], "writing marks",
                    error))
        return FALSE;
    for (guint i = 0; i < STORE_SIZE_BUCKETS; i++) {
        sqlite3_stmt *stmt;
        int rc = SQLITE_OK;

        if (run->size_count[i] == 0)
            continue;
        stmt = run_stmt(run, STMT_INSERT_SIZE, &rc, error);
        if (stmt == NULL)
            return FALSE;
        bind_i64(stmt, 2, i, &rc);
        bind_u64(stmt, 3, run->size_count[i], &rc);
        bind_u64(stmt, 4, run->size_bytes[i], &rc);
        if (!store_step_done(store, stmt, rc, "writing the size histogram", error))
            return FALSE;
    }
    return TRUE;
}

/* The phases, when the run met a mark (a trace without marks has none). */
static gboolean
write_phases(FsimStoreRun *run, GError **error)
{
    if (!run->any_mark)
        return TRUE;
    if (run->has_phase) {
        g_array_append_val(run->rows[ROWS_PHASES], run->phase);
        run->has_phase = FALSE; /* the array owns its label now */
    }
    return write_rows(run, STMT_INSERT_PHASE, &store_phase_row, run->rows[ROWS_PHASES],
                      "writing phases", error);
}

static gboolean
write_breakdown(FsimStoreRun *run, GError **error)
{
    const FsimStoredBreakdown *b = &run->breakdown;
    sqlite3_stmt *stmt;
    int rc = SQLITE_OK;

    if (!b->present)
        return TRUE;
    stmt = run_stmt(run, STMT_INSERT_BREAKDOWN, &rc, error);
    if (stmt == NULL)
        return FALSE;
    store_bind_row(stmt, 2, &store_breakdown_row, b, &rc);
    return store_step_done(run->store, stmt, rc, "writing the breakdown at the peak", error);
}

static gboolean
write_status(FsimStoreRun *run, FsimStoreStatus status, GError **error)
{
    FsimStore *store = run->store;
    sqlite3_stmt *stmt = store_stmt(store, STMT_FINISH_RUN, error);
    g_autofree char *now = store_now();
    int rc = SQLITE_OK;

    if (stmt == NULL)
        return FALSE;
    bind_text(stmt, 1, fsim_store_status_name(status), &rc);
    bind_text(stmt, 2, now, &rc);
    bind_u64(stmt, 3, run->segment_actions, &rc);
    bind_u64(stmt, 4, run->rows[ROWS_SEGMENTS]->len, &rc);
    bind_u64(stmt, 5, run->blocks_seen, &rc);
    bind_u64(stmt, 6, run->rows[ROWS_HEAP]->len, &rc);
    bind_i64(stmt, 7, run->id, &rc);
    return store_step_done(store, stmt, rc, "recording the run's status", error);
}

static void
run_release_data(FsimStoreRun *run)
{
    for (guint i = 0; i < RUN_ROWS; i++)
        g_clear_pointer(&run->rows[i], g_array_unref);
    g_clear_pointer(&run->pools, g_array_unref);
    if (run->has_phase)
        store_phase_clear(&run->phase);
    run->has_phase = FALSE;
}

gboolean
fsim_store_run_finish(FsimStoreRun *run, FsimStoreStatus status, GError **error)
{
    g_autoptr(GError) local_error = NULL;
    FsimStore *store;
    gboolean ok;

    g_return_val_if_fail(run != NULL, FALSE);
    g_return_val_if_fail(status == FSIM_STORE_COMPLETE || status == FSIM_STORE_OOM, FALSE);
    if (run->done) {
        g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_FAILED,
                    "%s: run %" G_GINT64_FORMAT " was already finished", run->store->path, run->id);
        return FALSE;
    }
    store = run->store;
    run->done = TRUE;
    store_fold(run);
    samples_close_bucket(run);
    ok = store_run_simple(store, STMT_BEGIN, "starting the run's transaction", &local_error);
    if (ok) {
        ok = write_metrics(run, &local_error) &&
             write_rows(run, STMT_INSERT_SAMPLE, &store_sample_row, run->rows[ROWS_SAMPLES],
                        "writing samples", &local_error) &&
             write_rows(run, STMT_INSERT_OOM, &store_oom_row, run->rows[ROWS_OOMS],
                        "writing OOM records", &local_error) &&
             write_packed(run, &store_packed_segments, run->rows[ROWS_SEGMENTS], &local_error) &&
             write_blocks(run, &local_error) && write_marks_and_sizes(run, &local_error) &&
             write_phases(run, &local_error) && write_breakdown(run, &local_error) &&
             store_write_pools(store, run->id, run->pools, &local_error) &&
             write_status(run, status, &local_error) &&
             store_run_simple(store, STMT_COMMIT, "committing the run", &local_error);
        /* A failed statement or COMMIT may leave the transaction open (SQLITE_FULL does). */
        if (!ok && !sqlite3_get_autocommit(store->db))
            (void)store_run_simple(store, STMT_ROLLBACK, "rolling back", NULL);
    }
    if (!ok) {
        fsim_store_run_fail(run, local_error->message);
        g_propagate_error(error, g_steal_pointer(&local_error));
    }
    run_release_data(run);
    return ok;
}

/* Mark @run finished without data, with @status (`failed` or `error`) and @message. */
static void
store_run_end_without_data(FsimStoreRun *run, const char *status, const char *message)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *now = store_now();
    sqlite3_stmt *stmt;
    int rc = SQLITE_OK;

    g_return_if_fail(run != NULL);
    run->done = TRUE;
    run_release_data(run);
    stmt = store_stmt(run->store, STMT_FAIL_RUN, &error);
    if (stmt != NULL) {
        bind_text(stmt, 1, status, &rc);
        bind_text(stmt, 2, message, &rc);
        bind_text(stmt, 3, now, &rc);
        bind_i64(stmt, 4, run->id, &rc);
        if (store_step_done(run->store, stmt, rc, "marking the run failed", &error))
            return;
    }
    /* The row stays `running`, which readers also treat as incomplete. */
    g_info("%s", error->message);
}

void
fsim_store_run_fail(FsimStoreRun *run, const char *message)
{
    store_run_end_without_data(run, "failed", message);
}

void
fsim_store_run_error(FsimStoreRun *run, const char *message)
{
    /* A database created before the `error` status refuses it: `failed` says as much there. */
    store_run_end_without_data(run, run->store->has_error_status ? "error" : "failed", message);
}

void
fsim_store_run_set_metrics(FsimStoreRun *run, const FsimMetrics *metrics)
{
    run->metrics = *metrics;
    run->has_metrics = TRUE;
}

void
fsim_store_run_set_breakdown(FsimStoreRun *run, const FsimStoredBreakdown *breakdown)
{
    run->breakdown = *breakdown;
}

void
fsim_store_run_set_pools(FsimStoreRun *run, const FsimStoredPool *pools, guint n)
{
    if (run->pools == NULL)
        run->pools = g_array_new(FALSE, FALSE, sizeof(FsimStoredPool));
    g_array_set_size(run->pools, 0);
    g_array_append_vals(run->pools, pools, n);
}

void
fsim_store_run_free(FsimStoreRun *run)
{
    if (run == NULL)
        return;
    if (!run->done)
        fsim_store_run_fail(run, "the replay stopped before this run was written");
    run_release_data(run);
    run->store->attached--;
    g_free(run);
}
