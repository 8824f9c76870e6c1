/* SPDX-License-Identifier: MIT */
#include "event-queue.h"

#include <glib.h>

void
fsim_event_queue_init(FsimEventQueue *queue)
{
    queue->heap = (FsimEventHeap){0};
}

void
fsim_event_queue_clear(FsimEventQueue *queue)
{
    fsim_event_heap_clear(&queue->heap);
}

void
fsim_event_queue_push(FsimEventQueue *queue, const FsimEvent *event, uint64_t seq)
{
    FsimQueuedEvent item = {.event = *event, .seq = seq};

    item.event.label = NULL; /* labels are borrowed from readers: never kept */
    fsim_event_heap_push(&queue->heap, &item);
}
