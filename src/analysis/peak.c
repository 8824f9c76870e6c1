/* SPDX-License-Identifier: MIT */
/*
 * The breakdown of reserved memory at a run's peak, taken cheaply for `replay --db`.  See peak.h.
 *
 * Taking explain's breakdown at every new maximum during the run would cost a walk of every
 * segment and block each time reserved memory grows (thousands of times for a policy that calls
 * cudaMalloc per tensor); replaying the decoded events up to the peak costs at most one replay
 * without a database, and usually less, since peaks tend to come before the end.
 */
#include "analysis/peak.h"

#include <glib.h>

#include <string.h>

#include "explain-private.h"
#include "feed.h"

static void
watch_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    FsimPeakWatch *watch = data;
    uint64_t reserved = (uint64_t)fsim_engine_device(engine)->reserved.current;

    (void)ev;
    if (reserved > watch->reserved)
        watch->reserved = reserved;
}

static const FsimObserver watch_observer = {.event = watch_event};

void
fsim_peak_watch_attach(FsimPeakWatch *watch, FsimEngine *engine)
{
    memset(watch, 0, sizeof(*watch));
    fsim_engine_add_observer(engine, &watch_observer, watch);
}

/* The breakdown of @engine's state now, after event @ev (NULL: at trace start). */
static gboolean
capture(const FsimEngine *engine, const FsimEvent *ev, FsimStoredBreakdown *out, GError **error)
{
    FsimBreakdown b;
    uint64_t largest = 0;

    if (!explain_breakdown(engine, &b, &largest, error))
        return FALSE;
    /* A policy that cannot describe its segments has its free memory counted as pinned: exact
     * only when there is none (direct, paged: memory goes back with each block). */
    if (fsim_engine_policy(engine)->ops->describe == NULL && b.free_pinned_bytes > 0)
        return TRUE;
    out->present = TRUE;
    out->event_index = ev != NULL ? (int64_t)ev->index : -1;
    out->time = ev != NULL ? ev->time : 0;
    out->reserved_bytes = (uint64_t)fsim_engine_device(engine)->reserved.current;
    out->live_requested_bytes = b.live_requested_bytes;
    out->rounding_bytes = b.rounding_bytes;
    out->free_releasable_bytes = b.free_releasable_bytes;
    out->free_pinned_bytes = b.free_pinned_bytes;
    if (fsim_breakdown_total(&b) != out->reserved_bytes) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "the breakdown at the peak adds up to %" G_GUINT64_FORMAT
                    " bytes, not the %" G_GUINT64_FORMAT " reserved",
                    fsim_breakdown_total(&b), out->reserved_bytes);
        return FALSE;
    }
    return TRUE;
}

/* The events to replay: from a decoded log, or read again from the trace. */
typedef struct {
    const FsimEventLog *log;
    gsize next;
    FsimReplayFeed feed;
} Source;

/* The next event as `replay` feeds it; FALSE at the end (or with @error set). */
static gboolean
source_next(Source *s, FsimEvent *ev, GError **error)
{
    if (s->log == NULL)
        return fsim_replay_feed_next(&s->feed, ev, error);
    if (s->next >= fsim_event_log_length(s->log))
        return FALSE;
    fsim_event_log_get(s->log, s->next++, ev);
    return TRUE;
}

static gboolean
peak_breakdown(Source *source, const FsimRunConfig *config, uint64_t peak_reserved,
               FsimStoredBreakdown *out, GError **error)
{
    g_autoptr(FsimEngine) engine = NULL;
    GError *read_error = NULL;
    FsimEvent ev;

    memset(out, 0, sizeof(*out));
    engine = fsim_engine_new(config, error);
    if (engine == NULL || !fsim_engine_start(engine, error))
        return FALSE;
    if ((uint64_t)fsim_engine_device(engine)->reserved.current >= peak_reserved)
        return capture(engine, NULL, out, error);
    while (source_next(source, &ev, &read_error)) {
        g_autoptr(GError) local_error = NULL;

        if (!fsim_engine_process(engine, &ev, &local_error)) {
            if (g_error_matches(local_error, FSIM_ERROR, FSIM_ERROR_OOM))
                return TRUE; /* stopped at an OOM before the peak: it cannot be met again */
            g_propagate_error(error, g_steal_pointer(&local_error));
            return FALSE;
        }
        if ((uint64_t)fsim_engine_device(engine)->reserved.current >= peak_reserved)
            return capture(engine, &ev, out, error);
    }
    if (read_error != NULL) {
        g_propagate_error(error, read_error);
        return FALSE;
    }
    return TRUE;
}

gboolean
fsim_peak_breakdown(const FsimEventLog *log, const FsimRunConfig *config, uint64_t peak_reserved,
                    FsimStoredBreakdown *out, GError **error)
{
    Source source = {.log = log};

    return peak_breakdown(&source, config, peak_reserved, out, error);
}

gboolean
fsim_peak_breakdown_trace(FsimTrace *trace, uint32_t device, gboolean inferred_releases,
                          const FsimRunConfig *config, uint64_t peak_reserved,
                          FsimStoredBreakdown *out, GError **error)
{
    Source source = {0};
    gboolean ok = fsim_replay_feed_open(&source.feed, trace, device, inferred_releases, error) &&
                  peak_breakdown(&source, config, peak_reserved, out, error);

    fsim_replay_feed_clear(&source.feed);
    return ok;
}
