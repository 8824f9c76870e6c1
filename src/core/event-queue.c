/* SPDX-License-Identifier: MIT */
#include "event-queue.h"

#include <glib.h>

static inline gboolean
queued_before(const FsimQueuedEvent *a, const FsimQueuedEvent *b)
{
    if (a->event.time != b->event.time)
        return a->event.time < b->event.time;
    return a->seq < b->seq;
}

void
fsim_event_queue_init(FsimEventQueue *queue)
{
    queue->heap = g_array_new(FALSE, FALSE, sizeof(FsimQueuedEvent));
}

void
fsim_event_queue_clear(FsimEventQueue *queue)
{
    g_clear_pointer(&queue->heap, g_array_unref);
}

void
fsim_event_queue_push(FsimEventQueue *queue, const FsimEvent *event, uint64_t seq)
{
    FsimQueuedEvent item = {.event = *event, .seq = seq};
    FsimQueuedEvent *heap;
    guint i;

    item.event.label = NULL; /* labels are borrowed from readers: never kept */
    g_array_append_val(queue->heap, item);
    heap = (FsimQueuedEvent *)(void *)queue->heap->data;
    i = queue->heap->len - 1;
    while (i > 0) {
        guint parent = (i - 1) / 2;

        if (!queued_before(&item, &heap[parent]))
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = item;
}

const FsimQueuedEvent *
fsim_event_queue_peek(const FsimEventQueue *queue)
{
    if (queue->heap->len == 0)
        return NULL;
    return &g_array_index(queue->heap, FsimQueuedEvent, 0);
}

gboolean
fsim_event_queue_pop(FsimEventQueue *queue, FsimQueuedEvent *out)
{
    FsimQueuedEvent *heap;
    FsimQueuedEvent last;
    guint n;
    guint i = 0;

    if (queue->heap->len == 0)
        return FALSE;
    heap = (FsimQueuedEvent *)(void *)queue->heap->data;
    *out = heap[0];
    n = queue->heap->len - 1;
    last = heap[n];
    g_array_set_size(queue->heap, n);
    if (n == 0)
        return TRUE;
    heap = (FsimQueuedEvent *)(void *)queue->heap->data;
    for (;;) {
        guint child = 2 * i + 1;

        if (child >= n)
            break;
        if (child + 1 < n && queued_before(&heap[child + 1], &heap[child]))
            child++;
        if (!queued_before(&heap[child], &last))
            break;
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = last;
    return TRUE;
}
