/* SPDX-License-Identifier: MIT */
/*
 * A binary min-heap of events ordered by (time, seq), for the events the engine schedules itself.
 * seq comes from one counter per run, so ties are first-in first-out (as ROSS's tie-breaker).
 */
#pragma once

#include <glib.h>

#include "fragsim/event.h"

typedef struct {
    FsimEvent event;
    uint64_t seq;
} FsimQueuedEvent;

typedef struct {
    GArray *heap; /* of FsimQueuedEvent */
} FsimEventQueue;

void fsim_event_queue_init(FsimEventQueue *queue);
void fsim_event_queue_clear(FsimEventQueue *queue);
void fsim_event_queue_push(FsimEventQueue *queue, const FsimEvent *event, uint64_t seq);
/* The earliest event, or NULL when empty.  Valid until the next push or pop. */
const FsimQueuedEvent *fsim_event_queue_peek(const FsimEventQueue *queue);
/* Remove the earliest event into *out.  Returns FALSE when empty. */
gboolean fsim_event_queue_pop(FsimEventQueue *queue, FsimQueuedEvent *out);
static inline guint
fsim_event_queue_length(const FsimEventQueue *queue)
{
    return queue->heap->len;
}
