/* SPDX-License-Identifier: MIT */
/*
 * The engine: one event stream through one policy on one device.  See engine.h for the rules.
 *
 * Accounting.  requested and allocated bytes drop when the program frees (PyTorch's
 * allocated_bytes drops at free_requested), even when the memory only becomes reusable later;
 * reserved bytes are the device's counter.  After every input event the engine updates the peaks,
 * the tightest moment of the run ("at peak" in metrics.h) and the minimum utilisation, then tells
 * its observers.
 */
#include "fragsim/engine.h"

#include <glib.h>

#include <string.h>

#include "engine-private.h"

void
fsim_run_config_init(FsimRunConfig *config)
{
    memset(config, 0, sizeof(*config));
    config->policy = "bestfit";
    g_assert(fsim_device_spec_parse(FSIM_DEVICE_DEFAULT, &config->device, NULL));
#ifdef FSIM_PARANOID
    config->paranoid = TRUE;
#endif
}

static void
engine_device_observer(gpointer data, FsimDeviceCall call, FsimAddr addr, uint64_t size)
{
    FsimEngine *engine = data;

    FOREACH_ENTRY(engine->observers, entry)
    {
        if (entry->ops->device_call != NULL)
            entry->ops->device_call(entry->data, engine, call, addr, size);
    }
}

FsimEngine *
fsim_engine_new(const FsimRunConfig *config, GError **error)
{
    g_autoptr(FsimDevice) device = NULL;
    FsimPolicy *policy;
    FsimEngine *engine;

    g_return_val_if_fail(config != NULL && config->policy != NULL, NULL);
    if (fsim_policy_lookup(config->policy) == NULL) {
        g_autofree char *names = fsim_policy_names();

        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "unknown policy '%s' (valid: %s)",
                    config->policy, names);
        return NULL;
    }
    if (config->device_factory != NULL)
        device = config->device_factory(config->device_factory_data, &config->device,
                                        config->config, error);
    else
        device = fsim_device_sim_new(&config->device, config->config, error);
    if (device == NULL)
        return NULL;
    policy = fsim_policy_new(config->policy, device, config->config, error);
    if (policy == NULL)
        return NULL;
    policy->paranoid = config->paranoid;
    if (config->lifetimes != NULL && policy->ops->plan != NULL &&
        !policy->ops->plan(policy, config->lifetimes, error)) {
        fsim_policy_free(policy);
        return NULL;
    }
    engine = g_new0(FsimEngine, 1);
    engine->config = *config;
    engine->config.lifetimes = NULL; /* borrowed for the creation only */
    engine->device = g_steal_pointer(&device);
    engine->policy = policy;
    fsim_live_table_init(&engine->live);
    engine->seen_ids = fsim_range_set_new();
    fsim_event_queue_init(&engine->queue);
    fsim_pool_scopes_init(&engine->pools);
    engine->observers = g_array_new(FALSE, FALSE, sizeof(ObserverEntry));
    for (guint h = 0; h < HOOKS; h++)
        engine->hooks[h] = g_array_new(FALSE, FALSE, sizeof(ObserverEntry));
    engine->ooms = g_array_new(FALSE, FALSE, sizeof(FsimOomRecord));
    engine->metrics.first_oom_event = -1;
    engine->metrics.needed_bytes = -1; /* computed by src/analysis/needed.c, not the engine */
    engine->moment_reserved = G_MAXUINT64;
    engine->device->observer = engine_device_observer;
    engine->device->observer_data = engine;
    return engine;
}

void
fsim_engine_free(FsimEngine *engine)
{
    if (engine == NULL)
        return;
    /* The policy goes before its upstream. */
    g_clear_pointer(&engine->policy, fsim_policy_free);
    g_clear_pointer(&engine->device, fsim_device_free);
    fsim_live_table_clear(&engine->live);
    g_clear_pointer(&engine->seen_ids, fsim_range_set_free);
    fsim_event_queue_clear(&engine->queue);
    fsim_pool_scopes_clear(&engine->pools);
    g_clear_pointer(&engine->observers, g_array_unref);
    for (guint h = 0; h < HOOKS; h++)
        g_clear_pointer(&engine->hooks[h], g_array_unref);
    g_clear_pointer(&engine->ooms, g_array_unref);
    g_free(engine);
}

void
fsim_engine_add_observer(FsimEngine *engine, const FsimObserver *observer, gpointer data)
{
    ObserverEntry entry = {observer, data};
    const gboolean hooked[HOOKS] = {observer->event != NULL, observer->alloc != NULL,
                                    observer->release != NULL};

    g_return_if_fail(engine != NULL && observer != NULL);
    g_array_append_val(engine->observers, entry);
    for (guint h = 0; h < HOOKS; h++) {
        if (hooked[h])
            g_array_append_val(engine->hooks[h], entry);
    }
    engine->n_observers = engine->observers->len;
    engine->plain = FALSE;
    engine->observed = FALSE;
}

/* The engine runs or stops: the hot paths' flags follow. */
static void
engine_set_running(FsimEngine *engine, gboolean running)
{
    gboolean fast = running && !engine->config.paranoid && engine->config.free_delay_ns == 0;

    engine->plain = fast && engine->n_observers == 0;
    engine->observed = fast && engine->n_observers != 0;
}

static inline void
engine_see_id(FsimEngine *engine, uint64_t id)
{
    if (id != G_MAXUINT64 && id >= engine->id_bound)
        engine->id_bound = id + 1;
    if (G_LIKELY(id == engine->seen_end && id != G_MAXUINT64)) {
        engine->seen_end++;
        return;
    }
    if (id == G_MAXUINT64) {
        engine->seen_max_id = TRUE;
        return;
    }
    if (engine->seen_end > engine->seen_start)
        fsim_range_set_add(engine->seen_ids, engine->seen_start, engine->seen_end);
    engine->seen_start = id;
    engine->seen_end = id + 1;
}

static gboolean
engine_has_seen_id(const FsimEngine *engine, uint64_t id)
{
    if (id == G_MAXUINT64)
        return engine->seen_max_id;
    return (id >= engine->seen_start && id < engine->seen_end) ||
           fsim_range_set_contains(engine->seen_ids, id);
}

static gboolean
engine_check_policy(FsimEngine *engine, const char *what, GError **error)
{
    g_autoptr(GError) local_error = NULL;

    if (engine->policy->ops->check == NULL)
        return TRUE;
    if (engine->policy->ops->check(engine->policy, &local_error))
        return TRUE;
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                "policy '%s': invariant broken after %s (event %" G_GUINT64_FORMAT "): %s",
                engine->policy->ops->name, what, engine->counters.event_index,
                local_error->message);
    return FALSE;
}

/* The policy's invariants after an operation, under --paranoid only (the hot path's test is
 * inline). */
static inline gboolean
engine_check(FsimEngine *engine, const char *what, GError **error)
{
    return G_LIKELY(!engine->config.paranoid) || engine_check_policy(engine, what, error);
}

static void
engine_policy_stats(const FsimEngine *engine, FsimPolicyStats *out)
{
    memset(out, 0, sizeof(*out));
    if (engine->policy->ops->get_stats != NULL)
        engine->policy->ops->get_stats(engine->policy, out);
}

/* A new tightest moment: reserved at a new peak, or as high with more allocated. */
static G_NO_INLINE void
engine_update_at_peak(FsimEngine *engine, uint64_t reserved)
{
    const FsimEngineCounters *c = &engine->counters;
    FsimPolicyStats stats;

    engine_policy_stats(engine, &stats);
    engine->at_peak_seen = TRUE;
    engine->at_peak_reserved = reserved;
    engine->at_peak_allocated = c->allocated_bytes;
    engine->at_peak_requested = c->requested_bytes;
    engine->at_peak_largest_free = stats.largest_free_block;
}

/* Reserved memory changed (or the first event): the tightest moment and the least
 * utilisation tested in full, as engine_update_moment() describes, and the thresholds they
 * reduce to at this reserved value worked out for the events to come. */
static G_NO_INLINE void
engine_moment_reserved(FsimEngine *engine, uint64_t reserved)
{
    const FsimEngineCounters *c = &engine->counters;

    if (reserved > engine->at_peak_reserved ||
        (reserved == engine->at_peak_reserved && c->allocated_bytes > engine->at_peak_allocated) ||
        !engine->at_peak_seen)
        engine_update_at_peak(engine, reserved);
    /* now reserved <= at_peak_reserved: only more allocated at the same reserved is new */
    engine->moment_allocated =
        reserved == engine->at_peak_reserved ? engine->at_peak_allocated : G_MAXUINT64;
    /* used / reserved < min_requested / min_reserved, for an integer used, is used <
     * ceil(min_requested x reserved / min_reserved); nothing while reserved is 0, anything
     * before a first measure */
    if (reserved == 0)
        engine->moment_used = 0;
    else if (engine->min_reserved == 0)
        engine->moment_used = G_MAXUINT64;
    else
        engine->moment_used =
            (uint64_t)(((EngineU128)engine->min_requested * reserved + engine->min_reserved - 1) /
                       engine->min_reserved);
    engine->moment_reserved = reserved;
}

/* After every event: the tightest moment and the minimum utilisation (the peaks of requested
 * and allocated bytes are engine_update_peaks()'s, or an alloc's: no other event raises them).
 * The tightest moment is the highest allocated while reserved is at its peak.  Utilisation (of
 * what the program asked for, so that rounding counts as waste) counts only while requested
 * memory is at least half its running peak: at start-up and tear-down a few bytes sit in memory
 * a caching policy keeps, which says nothing about fragmentation.  The least utilisation,
 * MIN(requested, reserved) / reserved, is stored as its fraction (0 / 0 until one is measured)
 * and compared exactly.  Reserved memory changes seldom (a policy's device calls): while it
 * stays, both tests are one comparison each with thresholds engine_moment_reserved() works
 * out (with a division, not two 128-bit products per event). */
static inline void
engine_update_moment(FsimEngine *engine)
{
    FsimEngineCounters *c = &engine->counters;
    uint64_t reserved = (uint64_t)engine->device->reserved.current;
    uint64_t requested = c->requested_bytes;

    c->reserved_bytes = reserved;
    if (G_UNLIKELY(reserved != engine->moment_reserved))
        engine_moment_reserved(engine, reserved);
    if (G_UNLIKELY(c->allocated_bytes > engine->moment_allocated)) {
        engine_update_at_peak(engine, reserved);
        engine->moment_allocated = c->allocated_bytes;
    }
    if (requested * 2 >= engine->peak_requested) {
        uint64_t used = MIN(requested, reserved);

        if (G_UNLIKELY(used < engine->moment_used)) {
            engine->min_requested = used;
            engine->min_reserved = reserved;
            engine->moment_used = used;
        }
    }
}

/* The peaks of requested and allocated bytes, after an event that may have raised them. */
static inline void
engine_raise_peaks(FsimEngine *engine)
{
    engine->peak_requested = MAX(engine->peak_requested, engine->counters.requested_bytes);
    engine->peak_allocated = MAX(engine->peak_allocated, engine->counters.allocated_bytes);
}

/* After any event: peaks, the tightest moment, minimum utilisation. */
static inline void
engine_update_peaks(FsimEngine *engine)
{
    engine_raise_peaks(engine);
    engine_update_moment(engine);
}

/* @mode: see EngineMode. */
static inline G_ALWAYS_INLINE void
engine_release(FsimEngine *engine, FsimLiveEntry *entry, EngineMode mode)
{
    FsimLiveAlloc alloc;

    engine->counters.live_blocks--;
    if (G_LIKELY(mode == ENGINE_PLAIN || engine->n_observers == 0)) {
        /* the policy never touches the table: its block is read in place */
        engine->policy->ops->dealloc(engine->policy, &entry->block, engine->counters.now);
        fsim_live_table_remove(&engine->live, entry);
        return;
    }
    alloc = (FsimLiveAlloc){entry->id,     entry->block,       entry->requested,
                            entry->stream, entry->alloc_event, entry->alloc_time};
    fsim_live_table_remove(&engine->live, entry);
    engine->policy->ops->dealloc(engine->policy, &alloc.block, engine->counters.now);
    engine->releasing = &alloc;
    FOREACH_ENTRY(engine->hooks[HOOK_RELEASE], obs)
    {
        obs->ops->release(obs->data, engine, alloc.id, &alloc.block, alloc.requested);
    }
    engine->releasing = NULL;
}

gboolean
fsim_engine_start(FsimEngine *engine, GError **error)
{
    const FsimInitialState *state = engine->config.initial_state;
    g_autofree FsimBlock *blocks = NULL;

    if (engine->started)
        return TRUE;
    engine->started = TRUE;
    engine->wall_start_us = g_get_monotonic_time();
    if (state == NULL || (state->n_segments == 0 && state->n_blocks == 0))
        return TRUE;
    if (!fsim_initial_state_check(state, error))
        return FALSE;
    for (gsize i = 0; i < state->n_segments; i++)
        fsim_pool_scopes_seed(&engine->pools, state->segments[i].pool_id);
    blocks = g_new0(FsimBlock, MAX(state->n_blocks, 1));
    engine->device->seeding = TRUE;
    if (engine->policy->ops->seed != NULL) {
        if (!engine->policy->ops->seed(engine->policy, state, blocks, error)) {
            engine->device->seeding = FALSE;
            g_prefix_error(error, "policy '%s': cannot rebuild the trace's initial state: ",
                           engine->policy->ops->name);
            return FALSE;
        }
    } else {
        /* Without a seed operation the policy receives the live blocks as ordinary allocations,
         * in address order; the free space of the recorded segments is not modelled. */
        for (gsize i = 0; i < state->n_blocks; i++) {
            FsimAllocRequest req = {.size = state->blocks[i].size,
                                    .stream = state->blocks[i].stream};

            if (engine->policy->ops->alloc(engine->policy, &req, &blocks[i]) != FSIM_OK) {
                engine->device->seeding = FALSE;
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                            "policy '%s': the memory alive at trace start does not fit the "
                            "device (%s)",
                            engine->policy->ops->name, engine->device->spec.name);
                return FALSE;
            }
        }
    }
    engine->device->seeding = FALSE;
    for (gsize i = 0; i < state->n_segments; i++) {
        FOREACH_ENTRY(engine->observers, obs)
        {
            if (obs->ops->seed_segment != NULL)
                obs->ops->seed_segment(obs->data, engine, &state->segments[i]);
        }
    }
    for (gsize i = 0; i < state->n_blocks; i++) {
        const FsimSeedBlock *seed = &state->blocks[i];
        FsimLiveEntry *entry;

        if (fsim_live_table_lookup(&engine->live, seed->id) != NULL) {
            g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_DUPLICATE,
                        "initial state: id %" G_GUINT64_FORMAT " appears twice", seed->id);
            return FALSE;
        }
        entry = fsim_live_table_insert(&engine->live, seed->id);
        entry->block = blocks[i];
        entry->requested = seed->requested;
        entry->stream = seed->stream;
        entry->alloc_event = -1;
        engine->counters.live_blocks++;
        engine_see_id(engine, seed->id);
        if (seed->pending_free) {
            entry->state = FSIM_LIVE_PENDING;
        } else {
            engine->counters.requested_bytes += seed->requested;
            engine->counters.allocated_bytes += blocks[i].size;
        }
        FOREACH_ENTRY(engine->observers, obs)
        {
            if (obs->ops->alloc != NULL)
                obs->ops->alloc(obs->data, engine, NULL, seed->id, &blocks[i], seed->requested);
        }
    }
    engine_update_peaks(engine);
    return engine_check(engine, "seeding", error);
}

static gboolean
engine_oom(FsimEngine *engine, const FsimEvent *ev, GError **error)
{
    FsimOomRecord oom = {0};
    FsimPolicyStats stats;

    engine_policy_stats(engine, &stats);
    oom.event_index = ev->index;
    oom.time = ev->time;
    oom.id = ev->id;
    oom.size = ev->size;
    oom.stream = ev->stream;
    oom.reserved_bytes = (uint64_t)engine->device->reserved.current;
    oom.allocated_bytes = engine->counters.allocated_bytes;
    oom.requested_bytes = engine->counters.requested_bytes;
    oom.largest_free_block = stats.largest_free_block;
    oom.device_free_bytes = fsim_device_free_bytes(engine->device);
    oom.stack = ev->stack;
    g_array_append_val(engine->ooms, oom);
    if (engine->metrics.first_oom_event < 0)
        engine->metrics.first_oom_event = (int64_t)ev->index;
    FOREACH_ENTRY(engine->observers, obs)
    {
        if (obs->ops->oom != NULL)
            obs->ops->oom(obs->data, engine, &oom);
    }
    if (engine->config.fail_on_oom) {
        g_autofree char *size = fsim_format_size(ev->size);
        g_autofree char *reserved = fsim_format_size(oom.reserved_bytes);
        g_autofree char *allocated = fsim_format_size(oom.allocated_bytes);
        g_autofree char *largest = fsim_format_size(oom.largest_free_block);
        g_autofree char *capacity = fsim_format_size(engine->device->spec.capacity_bytes);

        g_set_error(error, FSIM_ERROR, FSIM_ERROR_OOM,
                    "policy '%s' on %s (%s): out of memory at event %" G_GUINT64_FORMAT
                    " (time %" G_GUINT64_FORMAT " ns): alloc id %" G_GUINT64_FORMAT
                    " of %" G_GUINT64_FORMAT " bytes (%s) on stream %" G_GUINT64_FORMAT
                    ": reserved %s, allocated %s, largest free block %s",
                    engine->policy->ops->name, engine->device->spec.name, capacity, ev->index,
                    ev->time, ev->id, ev->size, size, ev->stream, reserved, allocated, largest);
        return FALSE;
    }
    return TRUE;
}

/* engine_alloc()'s refusals and its OOM: out of line, the hot path is a block found. */
static G_NO_INLINE gboolean
engine_alloc_refused(const FsimEvent *ev, gboolean duplicate, GError **error)
{
    if (duplicate)
        g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_DUPLICATE,
                    "event %" G_GUINT64_FORMAT ": id %" G_GUINT64_FORMAT
                    " is allocated again while it is still live",
                    ev->index, ev->id);
    else
        g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_SIZE,
                    "event %" G_GUINT64_FORMAT ": alloc of %" G_GUINT64_FORMAT
                    " bytes (sizes must be 1 to 2^60)",
                    ev->index, ev->size);
    return FALSE;
}

static G_NO_INLINE gboolean
engine_alloc_failed(FsimEngine *engine, const FsimEvent *ev, FsimLiveEntry *entry, GError **error)
{
    entry->state = FSIM_LIVE_FAILED;
    entry->block = (FsimBlock){0};
    entry->requested = 0;
    entry->stream = ev->stream;
    entry->alloc_event = 0;
    entry->alloc_time = 0;
    engine->metrics.ooms++;
    if ((ev->flags & FSIM_EVF_RECORDED_OOM) != 0)
        engine->metrics.recorded_ooms_reproduced++;
    if (!engine_oom(engine, ev, error))
        return FALSE;
    return engine_check(engine, "an OOM", error);
}

/* @mode: see EngineMode. */
static inline G_ALWAYS_INLINE gboolean
engine_alloc(FsimEngine *engine, const FsimEvent *ev, EngineMode mode, GError **error)
{
    FsimLiveEntry *entry;
    FsimAllocRequest req;
    FsimBlock block;
    gboolean inserted;

    engine->metrics.allocs++;
    if (G_UNLIKELY(ev->size == 0 || ev->size > FSIM_MAX_SIZE))
        return engine_alloc_refused(ev, FALSE, error);
    /* The entry goes in now (one probe): the policy never touches the table.  The next id of
     * the run, past every id seen, cannot be live: no lookup for a duplicate (ids mostly come
     * in order).  Its fields are set below, after the policy's call: only a plain engine, which
     * no observer reads the table of meanwhile (a device call's), leaves them unset until then.
     */
    if (mode == ENGINE_PLAIN && G_LIKELY(ev->id == engine->seen_end && ev->id == engine->id_bound &&
                                         ev->id != G_MAXUINT64)) {
        entry = fsim_live_table_insert_absent(&engine->live, ev->id);
        engine->seen_end++;
        engine->id_bound++;
    } else {
        entry = fsim_live_table_insert_or_find(&engine->live, ev->id, &inserted);
        if (G_UNLIKELY(!inserted))
            return engine_alloc_refused(ev, TRUE, error);
        engine_see_id(engine, ev->id);
    }
    req.size = ev->size;
    req.stream = ev->stream;
    req.now = ev->time;
    engine->metrics.recorded_ooms += (ev->flags & FSIM_EVF_RECORDED_OOM) != 0;
    if (G_UNLIKELY(engine->policy->ops->alloc(engine->policy, &req, &block) != FSIM_OK))
        return engine_alloc_failed(engine, ev, entry, error);
    g_assert(block.size >= ev->size);
    entry->block = block;
    entry->requested = ev->size;
    entry->stream = ev->stream;
    entry->alloc_event = (int64_t)ev->index;
    entry->alloc_time = ev->time;
    engine->counters.live_blocks++;
    engine->counters.requested_bytes += ev->size;
    engine->counters.allocated_bytes += block.size;
    if (mode != ENGINE_PLAIN) {
        FOREACH_ENTRY(engine->hooks[HOOK_ALLOC], obs)
        {
            obs->ops->alloc(obs->data, engine, ev, ev->id, &block, ev->size);
        }
        if (mode == ENGINE_GENERAL && !engine_check(engine, "an alloc", error))
            return FALSE;
    }
    engine_raise_peaks(engine);
    return TRUE;
}

/* A free the live table cannot match to a live allocation: a double free or an unmatched one. */
static G_NO_INLINE void
engine_free_unmatched(FsimEngine *engine, const FsimEvent *ev, gboolean pending)
{
    if (pending || engine_has_seen_id(engine, ev->id)) {
        engine->metrics.double_frees++;
        g_info("event %" G_GUINT64_FORMAT ": id %" G_GUINT64_FORMAT " freed twice", ev->index,
               ev->id);
    } else {
        engine->metrics.unmatched_frees++;
    }
}

/* @mode: see EngineMode; only the general one has a free delay. */
static inline G_ALWAYS_INLINE gboolean
engine_free(FsimEngine *engine, const FsimEvent *ev, EngineMode mode, GError **error)
{
    FsimLiveEntry *entry = fsim_live_table_lookup(&engine->live, ev->id);

    engine->metrics.frees++;
    if (G_UNLIKELY(entry == NULL || entry->state != FSIM_LIVE_ALLOCATED)) {
        if (entry != NULL && entry->state == FSIM_LIVE_FAILED) {
            /* Its allocation failed: nothing to give back. */
            fsim_live_table_remove(&engine->live, entry);
            return TRUE;
        }
        engine_free_unmatched(engine, ev, entry != NULL);
        return TRUE;
    }
    engine->counters.requested_bytes -= entry->requested;
    engine->counters.allocated_bytes -= entry->block.size;
    if (G_UNLIKELY((ev->flags & FSIM_EVF_DEFERRED) != 0)) {
        entry->state = FSIM_LIVE_PENDING;
        return TRUE;
    }
    if (mode == ENGINE_GENERAL && engine->config.free_delay_ns != 0) {
        FsimEvent completion = *ev;

        entry->state = FSIM_LIVE_PENDING;
        completion.kind = FSIM_EV_FREE_COMPLETED;
        completion.time = ev->time + engine->config.free_delay_ns;
        completion.flags = 0;
        fsim_event_queue_push(&engine->queue, &completion, engine->seq++);
        return TRUE;
    }
    engine_release(engine, entry, mode);
    return mode != ENGINE_GENERAL || engine_check(engine, "a free", error);
}

static gboolean
engine_free_completed(FsimEngine *engine, const FsimEvent *ev, GError **error)
{
    FsimLiveEntry *entry = fsim_live_table_lookup(&engine->live, ev->id);

    /* After an immediate free, or for an id the trace never showed, there is nothing to do. */
    if (entry == NULL || entry->state != FSIM_LIVE_PENDING)
        return TRUE;
    engine_release(engine, entry, ENGINE_GENERAL);
    return engine_check(engine, "a free_completed", error);
}

/* A private-pool event: checked, then handed to the policy if it has private pools. */
static gboolean
engine_pool_event(FsimEngine *engine, const FsimEvent *ev, GError **error)
{
    const FsimPolicyOps *ops = engine->policy->ops;

    if (!fsim_pool_scopes_apply(&engine->pools, ev, error))
        return FALSE;
    if (ev->kind == FSIM_EV_POOL_BEGIN && ops->pool_begin != NULL)
        ops->pool_begin(engine->policy, ev->id, ev->stream, ev->time);
    else if (ev->kind == FSIM_EV_POOL_END && ops->pool_end != NULL)
        ops->pool_end(engine->policy, ev->id, ev->stream, ev->time);
    else if (ev->kind == FSIM_EV_POOL_RELEASE && ops->pool_release != NULL)
        ops->pool_release(engine->policy, ev->id, ev->time);
    return engine_check(engine, fsim_event_kind_name(ev->kind), error);
}

/* The kinds other than alloc and free. */
static gboolean
engine_handle_other(FsimEngine *engine, const FsimEvent *ev, GError **error)
{
    gboolean ok = TRUE;

    switch (ev->kind) {
    case FSIM_EV_FREE_COMPLETED:
        ok = engine_free_completed(engine, ev, error);
        break;
    case FSIM_EV_EMPTY_CACHE:
        if (engine->policy->ops->empty_cache != NULL) {
            engine->policy->ops->empty_cache(engine->policy, ev->time);
            ok = engine_check(engine, "empty_cache", error);
        }
        break;
    case FSIM_EV_MARK:
        break;
    case FSIM_EV_POOL_BEGIN:
    case FSIM_EV_POOL_END:
    case FSIM_EV_POOL_RELEASE:
        ok = engine_pool_event(engine, ev, error);
        break;
    default:
        g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_KIND,
                    "event %" G_GUINT64_FORMAT ": unknown kind %d", ev->index, (int)ev->kind);
        return FALSE;
    }
    return ok;
}

/* One event, inlined once for each EngineMode: into engine_batch()'s loop for a plain engine
 * (the tests for observers, --paranoid and a free delay compiled out) and for an observed one
 * (only the observers' calls added), into engine_process_slow() for the rest. */
static inline G_ALWAYS_INLINE gboolean
engine_handle(FsimEngine *engine, const FsimEvent *ev, EngineMode mode, GError **error)
{
    gboolean ok;

    engine->counters.event_index = ev->index;
    engine->counters.now = ev->time;
    /* the two common kinds first: a branch instead of the switch's indirect jump; only an
     * alloc raises the peaks of requested and allocated bytes (engine_alloc() does) */
    if (G_LIKELY(ev->kind == FSIM_EV_ALLOC)) {
        ok = engine_alloc(engine, ev, mode, error);
    } else if (G_LIKELY(ev->kind == FSIM_EV_FREE)) {
        ok = engine_free(engine, ev, mode, error);
    } else {
        ok = engine_handle_other(engine, ev, error);
        if (ok)
            engine_raise_peaks(engine);
    }
    if (G_UNLIKELY(!ok))
        return FALSE;
    engine->counters.events++;
    engine->metrics.events++;
    engine_update_moment(engine);
    if (mode == ENGINE_PLAIN)
        return TRUE;
    FOREACH_ENTRY(engine->hooks[HOOK_EVENT], obs)
    {
        obs->ops->event(obs->data, engine, ev);
    }
    return TRUE;
}

/* Run the scheduled events due at or before @time. */
static gboolean
engine_run_queue(FsimEngine *engine, FsimTime time, GError **error)
{
    const FsimQueuedEvent *next;

    while ((next = fsim_event_queue_peek(&engine->queue)) != NULL && next->event.time <= time) {
        FsimQueuedEvent item;

        fsim_event_queue_pop(&engine->queue, &item);
        if (!engine_handle(engine, &item.event, ENGINE_GENERAL, error))
            return FALSE;
    }
    return TRUE;
}

/* An event the hot paths do not take (engine_batch()): the engine is not running yet, or has
 * --paranoid or a free delay, or the event is out of order.  The checks and the queue. */
static G_NO_INLINE gboolean
engine_process_slow(FsimEngine *engine, const FsimEvent *ev, GError **error)
{
    g_return_val_if_fail(!engine->finished, FALSE);
    if (engine->failed) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "the run already stopped on an error");
        return FALSE;
    }
    if (!engine->started && !fsim_engine_start(engine, error)) {
        engine->failed = TRUE;
        return FALSE;
    }
    engine_set_running(engine, TRUE);
    if (ev->time < engine->last_time) {
        g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_TIME,
                    "event %" G_GUINT64_FORMAT ": time %" G_GUINT64_FORMAT
                    " ns is before the previous event's %" G_GUINT64_FORMAT " ns",
                    ev->index, ev->time, engine->last_time);
        engine->failed = TRUE;
        engine_set_running(engine, FALSE);
        return FALSE;
    }
    engine->last_time = ev->time;
    engine->seq++;
    if (fsim_event_queue_length(&engine->queue) != 0 &&
        !engine_run_queue(engine, ev->time, error)) {
        engine->failed = TRUE;
        engine_set_running(engine, FALSE);
        return FALSE;
    }
    if (!engine_handle(engine, ev, ENGINE_GENERAL, error)) {
        engine->failed = TRUE;
        engine_set_running(engine, FALSE);
        return FALSE;
    }
    return TRUE;
}

/* The events from @evs[@i] while they come in order, through the hot path of @mode (plain or
 * observed), as one loop.  Returns: the index of the first
 * event not handled; *@failed when the run stopped on it. */
static inline G_ALWAYS_INLINE gsize
engine_batch(FsimEngine *engine, const FsimEvent *evs, gsize i, gsize n, EngineMode mode,
             gboolean *failed, GError **error)
{
    for (; i < n && evs[i].time >= engine->last_time; i++) {
        engine->last_time = evs[i].time;
        engine->seq++;
        if (G_UNLIKELY(!engine_handle(engine, &evs[i], mode, error))) {
            engine->failed = TRUE;
            engine_set_running(engine, FALSE);
            *failed = TRUE;
            break;
        }
    }
    return i;
}

gboolean
fsim_engine_process_batch(FsimEngine *engine, const FsimEvent *evs, gsize n, GError **error)
{
    gboolean failed = FALSE;
    gsize i = 0;

    g_return_val_if_fail(engine != NULL && (evs != NULL || n == 0), FALSE);
    while (i < n) {
        if (engine->plain)
            i = engine_batch(engine, evs, i, n, ENGINE_PLAIN, &failed, error);
        else if (engine->observed)
            i = engine_batch(engine, evs, i, n, ENGINE_OBSERVED, &failed, error);
        if (failed)
            return FALSE;
        /* not running yet, a general engine, or an event out of order */
        if (i < n && !engine_process_slow(engine, &evs[i++], error))
            return FALSE;
    }
    return TRUE;
}

gboolean
fsim_engine_process(FsimEngine *engine, const FsimEvent *ev, GError **error)
{
    g_return_val_if_fail(ev != NULL, FALSE);
    return fsim_engine_process_batch(engine, ev, 1, error);
}

gboolean
fsim_engine_finish(FsimEngine *engine, GError **error)
{
    FsimMetrics *m = &engine->metrics;
    double wall;

    g_return_val_if_fail(!engine->finished, FALSE);
    if (!engine->started && !fsim_engine_start(engine, error))
        return FALSE;
    /* After a run stopped (an OOM under fail_on_oom), the metrics cover what happened. */
    if (!engine->failed && !engine_run_queue(engine, G_MAXUINT64, error))
        return FALSE;
    engine->finished = TRUE;
    engine_set_running(engine, FALSE);
    m->peak_requested_bytes = engine->peak_requested;
    m->peak_allocated_bytes = engine->peak_allocated;
    m->peak_reserved_bytes = (uint64_t)engine->device->reserved.peak;
    m->lower_bound_bytes = engine->peak_requested;
    m->excess_over_lower_bound_bytes = fsim_sub_sat(m->peak_reserved_bytes, m->lower_bound_bytes);
    /* requested, not allocated: 1 KiB tensors in 2 MiB pages use 0.05% of them, not 100% */
    m->peak_utilization = fsim_ratio(engine->at_peak_requested, engine->at_peak_reserved);
    m->internal_frag_bytes_at_peak = engine->at_peak_allocated - engine->at_peak_requested;
    m->external_frag_bytes_at_peak =
        fsim_sub_sat(engine->at_peak_reserved, engine->at_peak_allocated);
    /* the share of the free bytes at the peak outside its largest free block */
    m->external_frag_at_peak =
        m->external_frag_bytes_at_peak != 0
            ? 1.0 - (double)MIN(engine->at_peak_largest_free, m->external_frag_bytes_at_peak) /
                        (double)m->external_frag_bytes_at_peak
            : 0.0;
    m->min_utilization = fsim_ratio(engine->min_requested, engine->min_reserved);
    m->device_mallocs = engine->device->calls[FSIM_CALL_MEM_ALLOC];
    m->device_frees = engine->device->calls[FSIM_CALL_MEM_FREE];
    m->device_maps = engine->device->calls[FSIM_CALL_MAP];
    m->device_unmaps = engine->device->calls[FSIM_CALL_UNMAP];
    m->modelled_alloc_time_ns = engine->device->modelled_time_ns;
    wall = (double)(g_get_monotonic_time() - engine->wall_start_us) / 1e6;
    m->wall_seconds = wall;
    m->events_per_second = wall > 0 ? (double)m->events / wall : 0.0;
    return TRUE;
}

gboolean
fsim_engine_run(FsimEngine *engine, gboolean (*next)(gpointer data, FsimEvent *ev, GError **error),
                gpointer data, GError **error)
{
    FsimEvent ev;
    GError *local_error = NULL;

    while (next(data, &ev, &local_error)) {
        if (!fsim_engine_process(engine, &ev, error))
            return FALSE;
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    return fsim_engine_finish(engine, error);
}

void
fsim_engine_policy_stats(const FsimEngine *engine, FsimPolicyStats *out)
{
    engine_policy_stats(engine, out);
}
