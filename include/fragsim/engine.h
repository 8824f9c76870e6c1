/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the engine runs one event stream through one policy on one device.
 *
 * The engine is discrete-event and single-threaded.  It owns, in this order of creation, the
 * device, the policy and the run's accounting; the policy is destroyed before the device, as in
 * RMM the upstream outlives the resource.  It keeps the live-allocation table keyed by trace id,
 * counts requested and allocated bytes, records OOMs, computes the metrics of metrics.h and tells
 * its observers (the results store, the sampler, the validator, the snapshot exporter) what
 * happens.
 *
 * Events are pushed (fsim_engine_process()), so one reader can feed several engines in lock step
 * and the validator can check outcomes between events; fsim_engine_run() pulls a whole stream.
 * Events the engine schedules itself (frees completed after `free_delay`) live in a binary heap
 * ordered by (time, seq) and are merged with the pushed stream: before an event at time t is
 * handled, every scheduled event due at or before t runs (scheduled first on equal times, then
 * first-in first-out).
 *
 * RULES
 * - Time is integer nanoseconds and never goes backwards (an event earlier than the previous one
 *   is an error, FSIM_TRACE_ERROR_TIME).  Same inputs, same outputs, always.
 * - ALLOC of an id that is live is an error (FSIM_TRACE_ERROR_DUPLICATE).
 * - FREE of an id never seen is counted in `unmatched_frees` (a ring-buffer trace started late);
 *   FREE of an id already freed is counted in `double_frees` and reported once per event with
 *   its index through g_info(); neither stops the run.
 * - An ALLOC the policy cannot satisfy is an OOM: recorded (#FsimOomRecord), then the run goes on
 *   without that allocation (its later free is ignored), or stops with FSIM_ERROR_OOM when
 *   `fail_on_oom` is set.
 */
#pragma once

#include <glib.h>

#include "fragsim/device.h"
#include "fragsim/event.h"
#include "fragsim/metrics.h"
#include "fragsim/policy.h"
#include "fragsim/state.h"
#include "fragsim/types.h"

G_BEGIN_DECLS

typedef struct FsimEngine FsimEngine;

/**
 * FsimRunConfig:
 * @policy: a registered policy name.
 * @config: (nullable): knobs: the group named after the policy, and `[device]` fault injection.
 *     Borrowed for the engine's lifetime.
 * @device: the modelled GPU (copied).
 * @initial_state: (nullable): the allocator state at trace start (borrowed until the first
 *     event is processed).
 * @fail_on_oom: stop at the first OOM with FSIM_ERROR_OOM.
 * @paranoid: call the policy's check() after every operation (on by default in Debug builds).
 * @free_delay_ns: when non-zero, a FREE not followed by its FREE_COMPLETED becomes reusable only
 *     this many nanoseconds later (models stream-ordered frees); 0 = at once.
 * @device_factory: (nullable): creates the device instead of the simulated one (the CUDA backend
 *     passes a real GPU).  It receives the engine's copy of @device and @config and returns a
 *     device the engine then owns (freed with fsim_device_free() after the policy), or NULL with
 *     @error set.  NULL = fsim_device_sim_new().
 * @device_factory_data: for @device_factory.
 * @lifetimes: (nullable): the run's allocation lifetimes (fsim_lifetimes_from_trace()), borrowed
 *     for fsim_engine_new(): handed to an offline policy's plan() operation.  Others ignore them.
 */
typedef struct {
    const char *policy;
    GKeyFile *config;
    FsimDeviceSpec device;
    const FsimInitialState *initial_state;
    gboolean fail_on_oom;
    gboolean paranoid;
    FsimTime free_delay_ns;
    FsimDevice *(*device_factory)(gpointer data, const FsimDeviceSpec *spec, GKeyFile *config,
                                  GError **error);
    gpointer device_factory_data;
    const FsimLifetimes *lifetimes;
} FsimRunConfig;

/* Fill @config with the defaults: policy "bestfit", the default device, paranoid iff
 * FSIM_PARANOID was defined at build time. */
void fsim_run_config_init(FsimRunConfig *config);

/**
 * FsimOomRecord:
 *
 * One simulated OOM: the event that failed and the state when it did.
 */
typedef struct {
    uint64_t event_index; /* FsimEvent.index of the failing ALLOC */
    FsimTime time;
    uint64_t id;
    uint64_t size;
    uint64_t stream;
    uint64_t reserved_bytes;
    uint64_t allocated_bytes;
    uint64_t requested_bytes;
    uint64_t largest_free_block;
    uint64_t device_free_bytes;
    uint32_t stack; /* the failing allocation's stack (fsim_trace_stack()), 0 = none */
} FsimOomRecord;

/**
 * FsimEngineCounters:
 *
 * The live accounting, readable by observers at any time.
 */
typedef struct {
    uint64_t events;          /* input events processed */
    uint64_t event_index;     /* index of the event being (or last) processed */
    FsimTime now;             /* its time */
    uint64_t requested_bytes; /* live requested bytes */
    uint64_t allocated_bytes; /* live block bytes */
    uint64_t reserved_bytes;  /* device memory held */
    uint64_t live_blocks;
} FsimEngineCounters;

/**
 * FsimObserver:
 *
 * Callbacks an observer may set (any may be NULL).  They are called synchronously and must not
 * call back into the engine except through the const accessors.
 *
 * @event: after each input event has been handled (also scheduled ones).
 * @alloc: after a successful allocation (@ev NULL for a seeded block).
 * @release: when a block's memory returns to the policy (@requested is what the program asked for).
 * @oom: after an OOM was recorded.
 * @device_call: after each successful driver call (not while seeding).
 * @seed_segment: for each segment of the initial state, before any event.
 */
typedef struct {
    void (*event)(gpointer data, const FsimEngine *engine, const FsimEvent *ev);
    void (*alloc)(gpointer data, const FsimEngine *engine, const FsimEvent *ev, uint64_t id,
                  const FsimBlock *block, uint64_t requested);
    void (*release)(gpointer data, const FsimEngine *engine, uint64_t id, const FsimBlock *block,
                    uint64_t requested);
    void (*oom)(gpointer data, const FsimEngine *engine, const FsimOomRecord *oom);
    void (*device_call)(gpointer data, const FsimEngine *engine, FsimDeviceCall call, FsimAddr addr,
                        uint64_t size);
    void (*seed_segment)(gpointer data, const FsimEngine *engine, const FsimSeedSegment *segment);
} FsimObserver;

/**
 * fsim_engine_new:
 * @config: the run; copied (the key file and initial state are borrowed).
 * @error: FSIM_ERROR_USAGE for an unknown policy or knob; a policy's own create() error.
 *
 * Creates the device and the policy.  The initial state is seeded when the first event is
 * processed (or by fsim_engine_start()), after observers have been added.
 *
 * Returns: (transfer full) (nullable): the engine; free with fsim_engine_free().
 */
FsimEngine *fsim_engine_new(const FsimRunConfig *config, GError **error);
void fsim_engine_free(FsimEngine *engine);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimEngine, fsim_engine_free)

/* Add an observer (borrowed; must outlive the engine or be removed by freeing the engine). */
void fsim_engine_add_observer(FsimEngine *engine, const FsimObserver *observer, gpointer data);

/* Seed the initial state now.  Called implicitly by the first fsim_engine_process(). */
gboolean fsim_engine_start(FsimEngine *engine, GError **error);

/**
 * fsim_engine_process:
 * @engine: the engine.
 * @ev: the next input event.
 * @error: FSIM_TRACE_ERROR_TIME / _DUPLICATE for broken input (message names the event index);
 *     FSIM_ERROR_OOM under fail_on_oom; FSIM_ERROR_FAILED when a paranoid check fails.
 *
 * Returns: %FALSE with @error set when the run must stop.
 */
gboolean fsim_engine_process(FsimEngine *engine, const FsimEvent *ev, GError **error);

/**
 * fsim_engine_process_batch:
 * @engine: the engine.
 * @evs: (array length=n): the next input events, in trace order.
 * @n: how many.
 * @error: as for fsim_engine_process().
 *
 * fsim_engine_process() on each event of @evs in turn, stopping at the first that fails; the
 * same results, without a call per event.
 *
 * Returns: %FALSE with @error set when the run must stop (the events after the one that
 * failed are not processed).
 */
gboolean fsim_engine_process_batch(FsimEngine *engine, const FsimEvent *evs, gsize n,
                                   GError **error);

/**
 * fsim_engine_finish:
 *
 * Runs the scheduled events still pending and computes the final metrics.  Live allocations
 * stay live (a trace need not free everything).  Call once, after the last event, or after
 * fsim_engine_process() failed, to get the metrics of what ran until then.
 */
gboolean fsim_engine_finish(FsimEngine *engine, GError **error);

/**
 * fsim_engine_run:
 * @engine: a new engine.
 * @next: pulls the next event: TRUE with *ev, FALSE at the end or on error (error set).
 * @data: for @next.
 *
 * Pulls every event, processes it, then finishes.  A convenience over process/finish.
 */
gboolean fsim_engine_run(FsimEngine *engine,
                         gboolean (*next)(gpointer data, FsimEvent *ev, GError **error),
                         gpointer data, GError **error);

/* Accessors. */
const FsimRunConfig *fsim_engine_config(const FsimEngine *engine);
const FsimEngineCounters *fsim_engine_counters(const FsimEngine *engine);
/* The metrics so far; final after fsim_engine_finish(). */
const FsimMetrics *fsim_engine_metrics(const FsimEngine *engine);
const FsimOomRecord *fsim_engine_ooms(const FsimEngine *engine, gsize *n);
FsimDevice *fsim_engine_device(const FsimEngine *engine);
FsimPolicy *fsim_engine_policy(const FsimEngine *engine);
/* The policy's statistics now (zeroes when it has no get_stats). */
void fsim_engine_policy_stats(const FsimEngine *engine, FsimPolicyStats *out);

/**
 * FsimLiveAlloc:
 * @alloc_event: the index of its ALLOC event; -1 for a block of the initial state.
 * @alloc_time: the time of that event (0 for the initial state).
 *
 * A live allocation as the engine keeps it, for observers that follow block lifetimes (the
 * results database) without a table of their own.
 */
typedef struct {
    uint64_t id;
    FsimBlock block;
    uint64_t requested;
    uint64_t stream;
    int64_t alloc_event;
    FsimTime alloc_time;
} FsimLiveAlloc;

/* During an observer's release callback: the allocation being released; NULL at other times. */
const FsimLiveAlloc *fsim_engine_releasing(const FsimEngine *engine);

/* Calls @func for every live allocation (allocated, or freed with its memory pending), in no
 * particular order. */
void fsim_engine_foreach_live_alloc(const FsimEngine *engine,
                                    void (*func)(gpointer data, const FsimLiveAlloc *alloc),
                                    gpointer data);

/**
 * fsim_engine_foreach_live:
 *
 * Calls @func for every live allocation, in increasing address order.
 */
void fsim_engine_foreach_live(const FsimEngine *engine,
                              void (*func)(gpointer data, uint64_t id, const FsimBlock *block,
                                           uint64_t requested, uint64_t stream),
                              gpointer data);

G_END_DECLS
