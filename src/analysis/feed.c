/* SPDX-License-Identifier: MIT */
/*
 * Feeding a trace's events to a policy as `replay` does (feed.h).
 */
#include "analysis/feed.h"

#include <string.h>

gboolean
fsim_replay_feed_open(FsimReplayFeed *feed, FsimTrace *trace, uint32_t device,
                      gboolean inferred_releases, GError **error)
{
    memset(feed, 0, sizeof(*feed));
    feed->inferred_releases = inferred_releases;
    feed->outcomes = fsim_trace_outcomes(trace, device, &feed->n_outcomes);
    feed->stream = fsim_trace_stream_open(trace, device, error);
    return feed->stream != NULL;
}

/* Whether @ev is left out of the feed: an inferred release burst that looks like a retry. */
static inline gboolean
feed_skips(const FsimReplayFeed *feed, const FsimEvent *ev)
{
    return ev->kind == FSIM_EV_EMPTY_CACHE && (ev->flags & FSIM_EVF_INFERRED) != 0 &&
           !feed->inferred_releases &&
           fsim_release_is_retry(feed->outcomes, feed->n_outcomes, ev->index);
}

/* The events fed, appended to the feed's log if it has one. */
static inline void
feed_log(FsimReplayFeed *feed, const FsimEvent *evs, gsize n)
{
    for (gsize i = 0; feed->log != NULL && i < n; i++)
        fsim_event_log_append(feed->log, &evs[i]);
}

gboolean
fsim_replay_feed_next(gpointer data, FsimEvent *ev, GError **error)
{
    FsimReplayFeed *feed = data;

    while (fsim_trace_stream_next(feed->stream, ev, error)) {
        if (feed_skips(feed, ev))
            continue;
        if (feed->log != NULL)
            fsim_event_log_append(feed->log, ev);
        return TRUE;
    }
    return FALSE;
}

gsize
fsim_replay_feed_batch(FsimReplayFeed *feed, const FsimEvent **evs, GError **error)
{
    gsize n = 0;

    /* Nothing to leave out (retries fed, or no recorded outcomes to be one: a trace of another
     * format): the stream's batch whole, without a test per event. */
    if (feed->inferred_releases || feed->n_outcomes == 0) {
        if (feed->n_rest == 0)
            feed->n_rest = fsim_trace_stream_batch(feed->stream, &feed->rest, error);
        n = feed->n_rest;
        *evs = feed->rest;
        feed->rest += n;
        feed->n_rest = 0;
        feed_log(feed, *evs, n);
        return n;
    }
    while (feed->n_rest == 0 || feed_skips(feed, feed->rest)) {
        if (feed->n_rest != 0) {
            feed->rest++;
            feed->n_rest--;
            continue;
        }
        feed->n_rest = fsim_trace_stream_batch(feed->stream, &feed->rest, error);
        if (feed->n_rest == 0)
            return 0;
    }
    while (n < feed->n_rest && !feed_skips(feed, &feed->rest[n]))
        n++;
    *evs = feed->rest;
    feed->rest += n;
    feed->n_rest -= n;
    feed_log(feed, *evs, n);
    return n;
}

void
fsim_replay_feed_clear(FsimReplayFeed *feed)
{
    g_clear_pointer(&feed->stream, fsim_trace_stream_close);
}

gboolean
fsim_replay_feed_run(FsimTrace *trace, uint32_t device, gboolean inferred_releases,
                     FsimEngine *engine, FsimEventLog *log, GError **error)
{
    FsimReplayFeed feed;
    gboolean ok = fsim_replay_feed_open(&feed, trace, device, inferred_releases, error);
    const FsimEvent *evs;
    GError *read_error = NULL;
    gsize n;

    feed.log = log;
    while (ok && (n = fsim_replay_feed_batch(&feed, &evs, &read_error)) > 0)
        ok = fsim_engine_process_batch(engine, evs, n, error);
    fsim_replay_feed_clear(&feed);
    if (read_error != NULL) {
        g_propagate_error(error, read_error);
        return FALSE;
    }
    return ok && fsim_engine_finish(engine, error);
}
