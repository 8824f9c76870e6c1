/* SPDX-License-Identifier: MIT */
/*
 * The engine's state, shared by its event path (engine.c) and its read-only views
 * (engine-access.c).  Private to src/core.
 */
#ifndef FSIM_ENGINE_PRIVATE_H
#define FSIM_ENGINE_PRIVATE_H

#include <glib.h>

#include "fragsim/engine.h"

#include "event-queue.h"
#include "live-table.h"
#include "pool-scopes.h"
#include "range-set.h"

/* For exact comparisons of two fractions of 64-bit byte counts (gcc and clang have it). */
__extension__ typedef unsigned __int128 EngineU128;

typedef struct {
    const FsimObserver *ops;
    gpointer data;
} ObserverEntry;

/* Each ObserverEntry of @array as @entry, the array and its length read once (observers do
 * not add observers); by index: the array's data is NULL while it is empty, and NULL + 0 is
 * undefined. */
#define FOREACH_ENTRY(array, entry)                                                                \
    for (const GArray *entry##_a = (array); entry##_a != NULL; entry##_a = NULL)                   \
        for (guint entry##_n = entry##_a->len, entry##_i = 0; entry##_i < entry##_n; entry##_i++)  \
            for (const ObserverEntry *entry = &g_array_index(entry##_a, ObserverEntry, entry##_i); \
                 entry != NULL; entry = NULL)

/* The callbacks called on every event: the observers that set each, in the order added, so
 * that the loops of the hot path call without testing for NULL. */
typedef enum {
    HOOK_EVENT,
    HOOK_ALLOC,
    HOOK_RELEASE,
    HOOKS
} EngineHook;

/* How engine_handle() and what it calls are compiled, a constant where they are inlined. */
typedef enum {
    ENGINE_GENERAL,  /* every test: not running yet, --paranoid, a free delay, a scheduled event */
    ENGINE_OBSERVED, /* running, with observers, no --paranoid, no free delay: only the calls */
    ENGINE_PLAIN,    /* running, none of those: the policy alone */
} EngineMode;

struct FsimEngine {
    FsimRunConfig config;
    FsimDevice *device;
    FsimPolicy *policy;
    FsimLiveTable live;
    FsimRangeSet *seen_ids; /* every id ever allocated: tells a double free from an unmatched */
    gboolean seen_max_id;   /* G_MAXUINT64, which a half-open range cannot hold */
    /* the run of ids seen last, [seen_start, seen_end), not yet in seen_ids: ids mostly come in
     * order, and extending a run is cheaper than a search of the set */
    uint64_t seen_start;
    uint64_t seen_end;
    /* every id ever seen is below it, or G_MAXUINT64: an alloc of this id, when it extends the
     * run, cannot be of a live id, and goes into the live table without a lookup */
    uint64_t id_bound;
    FsimEventQueue queue;
    FsimPoolScopes pools; /* private-pool scopes and references, checked before the policy */
    uint64_t seq;
    GArray *observers;    /* of ObserverEntry */
    guint n_observers;    /* observers->len, read once per event on the hot path */
    GArray *hooks[HOOKS]; /* of ObserverEntry: those with that callback */
    GArray *ooms;         /* of FsimOomRecord */
    FsimEngineCounters counters;
    FsimMetrics metrics;
    uint64_t peak_requested;
    uint64_t peak_allocated;
    /* the tightest moment: highest allocated while reserved is at its peak */
    uint64_t at_peak_reserved;
    uint64_t at_peak_allocated;
    uint64_t at_peak_requested;
    uint64_t at_peak_largest_free;
    gboolean at_peak_seen;
    /* the least utilisation so far, min_requested / min_reserved (0 / 0 until measured), kept
     * as a fraction so that each event compares it by two multiplications, not a division */
    uint64_t min_requested;
    uint64_t min_reserved;
    /* What the two tests after each event reduce to while reserved stays at moment_reserved
     * (set by engine_moment_reserved(); G_MAXUINT64 before the first event): a new tightest
     * moment when allocated exceeds moment_allocated, a new least utilisation when
     * MIN(requested, reserved) is below moment_used (requested at least half its peak). */
    uint64_t moment_reserved;
    uint64_t moment_allocated;
    uint64_t moment_used;
    FsimTime last_time;
    gboolean started;
    gboolean finished;
    gboolean failed;
    /* started, neither finished nor failed, and no observer, no --paranoid, no free delay (so
     * no scheduled event): the hot path's case, whose alloc and free are compiled without
     * those tests */
    gboolean plain;
    /* started, neither finished nor failed, with observers but no --paranoid and no free delay:
     * the hot path with only the observers' calls added (ENGINE_OBSERVED) */
    gboolean observed;
    gint64 wall_start_us;
    const FsimLiveAlloc *releasing; /* during release callbacks */
};

#endif /* FSIM_ENGINE_PRIVATE_H */
