/* SPDX-License-Identifier: MIT */
/*
 * A binary min-heap of values of one type, its functions generated for that type (as jemalloc's
 * ph.h and Linux's min_heap.h do): the events the engine schedules itself, a synthetic
 * generator's future events, the planner's placed allocations by end, the placement checker's
 * live ones.
 *
 *     FSIM_HEAP_DEFINE(EndHeap, end_heap, EndEntry, end_before)
 *
 * defines the type EndHeap (a growable array: @items, @len, @capacity; all zero is an empty heap)
 * and, static inline:
 *
 *     void            end_heap_push(EndHeap *heap, const EndEntry *item);
 *     const EndEntry *end_heap_top(const EndHeap *heap);             NULL when empty
 *     gboolean        end_heap_pop(EndHeap *heap, EndEntry *out);    FALSE when empty; @out
 * nullable void            end_heap_clear(EndHeap *heap);                 frees the array, empties
 * the heap
 *
 * @before(const Item *a, const Item *b) is a strict order: TRUE when @a leaves before @b.  Items
 * it calls equal leave in an order set by the sifts; a heap that needs them first in, first out
 * breaks its ties with a sequence number (the engine's queue and the generators' heaps do).  The
 * sifts move a hole rather than swap, so an item is copied once per level.
 */
#pragma once

#include <glib.h>

#define FSIM_HEAP_MIN_CAPACITY 64

#define FSIM_HEAP_DEFINE(Heap, prefix, Item, before)                                 \
    typedef struct {                                                                 \
        Item *items;                                                                 \
        gsize len;                                                                   \
        gsize capacity;                                                              \
    } Heap;                                                                          \
                                                                                     \
    static inline G_GNUC_UNUSED void prefix##_push(Heap *heap, const Item *item)     \
    {                                                                                \
        gsize at = heap->len++;                                                      \
                                                                                     \
        if (G_UNLIKELY(heap->len > heap->capacity)) {                                \
            heap->capacity = MAX(2 * heap->capacity, (gsize)FSIM_HEAP_MIN_CAPACITY); \
            heap->items = g_renew(Item, heap->items, heap->capacity);                \
        }                                                                            \
        while (at > 0 && before(item, &heap->items[(at - 1) / 2])) {                 \
            heap->items[at] = heap->items[(at - 1) / 2];                             \
            at = (at - 1) / 2;                                                       \
        }                                                                            \
        heap->items[at] = *item;                                                     \
    }                                                                                \
                                                                                     \
    static inline G_GNUC_UNUSED const Item *prefix##_top(const Heap *heap)           \
    {                                                                                \
        return heap->len > 0 ? &heap->items[0] : NULL;                               \
    }                                                                                \
                                                                                     \
    static inline G_GNUC_UNUSED gboolean prefix##_pop(Heap *heap, Item *out)         \
    {                                                                                \
        Item *items = heap->items;                                                   \
        gsize at = 0;                                                                \
        gsize n;                                                                     \
        Item last;                                                                   \
                                                                                     \
        if (heap->len == 0)                                                          \
            return FALSE;                                                            \
        if (out != NULL)                                                             \
            *out = items[0];                                                         \
        n = --heap->len;                                                             \
        last = items[n];                                                             \
        for (;;) {                                                                   \
            gsize child = 2 * at + 1;                                                \
                                                                                     \
            if (child >= n)                                                          \
                break;                                                               \
            if (child + 1 < n && before(&items[child + 1], &items[child]))           \
                child++;                                                             \
            if (!before(&items[child], &last))                                       \
                break;                                                               \
            items[at] = items[child];                                                \
            at = child;                                                              \
        }                                                                            \
        if (n > 0)                                                                   \
            items[at] = last;                                                        \
        return TRUE;                                                                 \
    }                                                                                \
                                                                                     \
    static inline G_GNUC_UNUSED void prefix##_clear(Heap *heap)                      \
    {                                                                                \
        g_clear_pointer(&heap->items, g_free);                                       \
        heap->len = 0;                                                               \
        heap->capacity = 0;                                                          \
    }
