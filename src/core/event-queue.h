/* SPDX-License-Identifier: MIT */
/*
 * A binary min-heap of events ordered by (time, seq), for the events the engine schedules itself.
 * seq comes from one counter per run, so ties are first-in first-out (as ROSS's tie-breaker).
 */
#pragma once

#include <glib.h>

#include "fragsim/event.h"

#include "heap.h"

typedef struct {
    FsimEvent event;
    uint64_t seq;
} FsimQueuedEvent;

static inline gboolean
fsim_queued_before(const FsimQueuedEvent *a, const FsimQueuedEvent *b)
{
    if (a->event.time != b->event.time)
        return a->event.time < b->event.time;
    return a->seq < b->seq;
}

FSIM_HEAP_DEFINE(FsimEventHeap, fsim_event_heap, FsimQueuedEvent, fsim_queued_before)

typedef struct {
    FsimEventHeap heap;
} FsimEventQueue;

void fsim_event_queue_init(FsimEventQueue *queue);
void fsim_event_queue_clear(FsimEventQueue *queue);
void fsim_event_queue_push(FsimEventQueue *queue, const FsimEvent *event, uint64_t seq);

/* The earliest event, or NULL when empty.  Valid until the next push or pop. */
static inline const FsimQueuedEvent *
fsim_event_queue_peek(const FsimEventQueue *queue)
{
    return fsim_event_heap_top(&queue->heap);
}

/* Remove the earliest event into *out.  Returns FALSE when empty. */
static inline gboolean
fsim_event_queue_pop(FsimEventQueue *queue, FsimQueuedEvent *out)
{
    return fsim_event_heap_pop(&queue->heap, out);
}

static inline guint
fsim_event_queue_length(const FsimEventQueue *queue)
{
    return (guint)queue->heap.len;
}
