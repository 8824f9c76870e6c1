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

gboolean
fsim_replay_feed_next(gpointer data, FsimEvent *ev, GError **error)
{
    FsimReplayFeed *feed = data;

    while (fsim_trace_stream_next(feed->stream, ev, error)) {
        if (ev->kind == FSIM_EV_EMPTY_CACHE && (ev->flags & FSIM_EVF_INFERRED) != 0 &&
            !feed->inferred_releases &&
            fsim_release_is_retry(feed->outcomes, feed->n_outcomes, ev->index))
            continue;
        if (feed->log != NULL)
            fsim_event_log_append(feed->log, ev);
        return TRUE;
    }
    return FALSE;
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

    feed.log = log;
    ok = ok && fsim_engine_run(engine, fsim_replay_feed_next, &feed, error);
    fsim_replay_feed_clear(&feed);
    return ok;
}
