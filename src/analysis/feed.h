/* SPDX-License-Identifier: MIT */
/*
 * The events of one device of a trace as `replay` feeds them to a policy, for every part that
 * replays a trace (replay, explain, sweep jobs, the peak breakdown): empty_cache events the reader
 * inferred from a recorded release burst that looks like PyTorch's retry before an OOM
 * (fsim_release_is_retry(), needed.h) are left out unless asked for.
 */
#pragma once

#include <glib.h>

#include "fragsim/engine.h"
#include "fragsim/trace.h"

#include "analysis/needed.h"

typedef struct {
    FsimTraceStream *stream;
    const FsimOutcome *outcomes; /* the device's recorded outcomes */
    gsize n_outcomes;
    gboolean inferred_releases; /* feed the retries too */
    FsimEventLog *log;          /* (nullable) every event fed is appended to it */
    const FsimEvent *rest;      /* fsim_replay_feed_batch(): the stream's batch not yet fed */
    gsize n_rest;
} FsimReplayFeed;

/* Opens the stream of @device of @trace; clear with fsim_replay_feed_clear() even on failure. */
gboolean fsim_replay_feed_open(FsimReplayFeed *feed, FsimTrace *trace, uint32_t device,
                               gboolean inferred_releases, GError **error);

/* The next event to feed (a gpointer @feed, as fsim_engine_run() takes it); FALSE at the end or
 * with @error set. */
gboolean fsim_replay_feed_next(gpointer feed, FsimEvent *ev, GError **error);

/* The next events to feed at once, without copying them (valid until the next call on @feed):
 * a run of the stream's batch up to an event left out.  Returns: how many; 0 at the end or with
 * @error set.  Do not mix with fsim_replay_feed_next() on one feed. */
gsize fsim_replay_feed_batch(FsimReplayFeed *feed, const FsimEvent **evs, GError **error);

void fsim_replay_feed_clear(FsimReplayFeed *feed);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(FsimReplayFeed, fsim_replay_feed_clear)

/* Feeds @device of @trace through @engine (started) to its end, each event also appended to
 * @log (nullable), a batch at a time (fsim_replay_feed_batch()), then finishes the engine. */
gboolean fsim_replay_feed_run(FsimTrace *trace, uint32_t device, gboolean inferred_releases,
                              FsimEngine *engine, FsimEventLog *log, GError **error);
