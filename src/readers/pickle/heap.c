/* SPDX-License-Identifier: MIT */
/*
 * The unpickler's heap: size-classed free lists over bump-allocated chunks for small blocks,
 * g_malloc() for large ones, and a byte budget over both (see value.h).
 *
 * Chunks grow from 16 KiB to 4 MiB as the live graph grows; a freed small block goes back to its
 * size class and is reused before any new chunk is taken, so the chunks never hold more than the
 * most small blocks ever live at once.  A cleared heap's chunks are kept, up to CACHE_MAX bytes in
 * all, for the next heap that asks for a chunk of the same size: opening one file after another
 * (a sweep, a benchmark, a test suite) then reuses pages already faulted in.  Under
 * AddressSanitizer every block is followed by a poisoned gap and freed blocks are poisoned, so
 * reads past a value or after its release are caught as they would be with malloc().
 */
/* madvise() and mmap() are POSIX/BSD, hidden by -std=c11 unless asked for. */
#define _DEFAULT_SOURCE 1

#include <glib.h>

#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "value.h"

#if defined(HEAP_ASAN) /* (value.h) */
#include <sanitizer/asan_interface.h>
#define HEAP_REDZONE 16
#else
#define HEAP_REDZONE                            0
#define ASAN_POISON_MEMORY_REGION(addr, size)   ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

struct HeapChunk {
    HeapChunk *next;
    size_t size;   /* bytes after the header */
    size_t mapped; /* bytes mmap()ed, header included; 0: from g_malloc() */
    size_t asked;  /* the size asked for: the cache's key */
};

struct HeapBig {
    HeapBig *prev;
    HeapBig *next;
    size_t size; /* bytes after the header */
};

#define CHUNK_MIN    ((size_t)16 * 1024)
#define CHUNK_MAX    ((size_t)4 * 1024 * 1024)
#define CHUNK_HEADER ((sizeof(HeapChunk) + HEAP_ALIGN - 1) & ~(size_t)(HEAP_ALIGN - 1))
#define BIG_HEADER   ((sizeof(HeapBig) + HEAP_ALIGN - 1) & ~(size_t)(HEAP_ALIGN - 1))
#define HUGE_PAGE    ((size_t)2 * 1024 * 1024)

/* The cache of free chunks, by size: CHUNK_MIN << k for k in 0..CACHE_SIZES-1 (huge-page
 * mapped ones have the size they were asked for; see chunk_new()). */
#define CACHE_SIZES 9 /* 16 KiB .. 4 MiB */
#define CACHE_MAX   ((size_t)32 * 1024 * 1024)

static struct {
    GMutex lock;
    HeapChunk *free[CACHE_SIZES];
    size_t bytes;
} chunk_cache;

/* The cache slot of chunks of @size usable bytes asked for, or -1. */
static int
cache_slot(size_t asked)
{
    for (int k = 0; k < CACHE_SIZES; k++) {
        if (asked == CHUNK_MIN << k)
            return k;
    }
    return -1;
}

void
heap_init(Heap *heap, size_t budget)
{
    memset(heap, 0, sizeof(*heap));
    heap->next_chunk = CHUNK_MIN;
    heap->budget = budget;
}

/* A chunk of @size usable bytes.  Big chunks are mapped on huge-page boundaries and marked for
 * transparent huge pages where Linux offers them: faulting a fresh chunk in 4 KiB pages costs
 * about as much as the parsing that fills it. */
static HeapChunk *
chunk_new(size_t size)
{
    int slot = cache_slot(size);

    if (slot >= 0) {
        HeapChunk *c;

        g_mutex_lock(&chunk_cache.lock);
        c = chunk_cache.free[slot];
        if (c != NULL) {
            chunk_cache.free[slot] = c->next;
            chunk_cache.bytes -= c->size;
        }
        g_mutex_unlock(&chunk_cache.lock);
        if (c != NULL)
            return c;
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (size + CHUNK_HEADER >= HUGE_PAGE) {
        size_t want = (size + CHUNK_HEADER + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        char *p = mmap(NULL, want + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (p != MAP_FAILED) {
            char *aligned = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
            if (aligned > p)
                munmap(p, (size_t)(aligned - p));
            size_t tail = (size_t)(p + want + HUGE_PAGE - (aligned + want));
            if (tail > 0)
                munmap(aligned + want, tail);
            madvise(aligned, want, MADV_HUGEPAGE);
            HeapChunk *c = (HeapChunk *)aligned;
            c->size = want - CHUNK_HEADER;
            c->mapped = want;
            c->asked = size;
            return c;
        }
    }
#endif
    HeapChunk *c = g_malloc(CHUNK_HEADER + size);
    c->size = size;
    c->mapped = 0;
    c->asked = size;
    return c;
}

/* Frees chunk @c: into the cache while it has room. */
static void
chunk_free(HeapChunk *c)
{
    int slot = cache_slot(c->asked);

    ASAN_POISON_MEMORY_REGION((char *)c + CHUNK_HEADER, c->size);
    if (slot >= 0) {
        gboolean kept = FALSE;

        g_mutex_lock(&chunk_cache.lock);
        if (chunk_cache.bytes + c->size <= CACHE_MAX) {
            c->next = chunk_cache.free[slot];
            chunk_cache.free[slot] = c;
            chunk_cache.bytes += c->size;
            kept = TRUE;
        }
        g_mutex_unlock(&chunk_cache.lock);
        if (kept)
            return;
    }
    ASAN_UNPOISON_MEMORY_REGION((char *)c + CHUNK_HEADER, c->size);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (c->mapped != 0) {
        munmap(c, c->mapped);
        return;
    }
#endif
    g_free(c);
}

void *
fsim_pickle_scratch_take(gsize bytes, gsize *room)
{
    HeapChunk *c = NULL;

    g_mutex_lock(&chunk_cache.lock);
    for (int k = 0; k < CACHE_SIZES && c == NULL; k++) {
        for (HeapChunk **at = &chunk_cache.free[k]; *at != NULL; at = &(*at)->next) {
            if ((*at)->size >= bytes) {
                c = *at;
                *at = c->next;
                chunk_cache.bytes -= c->size;
                break;
            }
        }
    }
    g_mutex_unlock(&chunk_cache.lock);
    if (c == NULL)
        return NULL;
    ASAN_UNPOISON_MEMORY_REGION((char *)c + CHUNK_HEADER, c->size);
    *room = c->size;
    return (char *)c + CHUNK_HEADER;
}

void
fsim_pickle_scratch_give(void *p)
{
    chunk_free((HeapChunk *)(void *)((char *)p - CHUNK_HEADER));
}

void
heap_clear(Heap *heap)
{
    for (HeapChunk *c = heap->chunks; c != NULL;) {
        HeapChunk *next = c->next;
        chunk_free(c);
        c = next;
    }
    for (HeapBig *b = heap->big; b != NULL;) {
        HeapBig *next = b->next;
        ASAN_UNPOISON_MEMORY_REGION((char *)b + BIG_HEADER, b->size);
        g_free(b);
        b = next;
    }
    size_t budget = heap->budget;
    heap_init(heap, budget);
}

void
heap_expect(Heap *heap, size_t bytes)
{
    /* The first chunk as large as the expected graph allows, up to a huge page: fresh 4 KiB
     * pages cost a fault each (about a microsecond in a virtual machine) where a huge page costs
     * one.  Only while the budget has room for many such chunks: a tight budget keeps the
     * growth from CHUNK_MIN, so that what fits in it still loads. */
    if (heap->chunks != NULL || heap->budget / 16 < HUGE_PAGE)
        return;
    while (heap->next_chunk < MIN(bytes, HUGE_PAGE))
        heap->next_chunk *= 2;
}

gboolean
heap_charge(Heap *heap, gssize delta)
{
    if (delta > 0 && (size_t)delta > heap->budget - MIN(heap->used, heap->budget))
        return FALSE;
    heap->used = (size_t)((gssize)heap->used + delta);
    heap->peak = MAX(heap->peak, heap->used);
    return TRUE;
}

/* Bytes a block of @size takes: rounded up, plus the redzone. */
static inline size_t
block_bytes(size_t size)
{
    size = MAX(size, (size_t)1);
    return ((size + HEAP_ALIGN - 1) & ~(size_t)(HEAP_ALIGN - 1)) + HEAP_REDZONE;
}

static G_GNUC_NO_INLINE void *
small_from_new_chunk(Heap *heap, size_t n)
{
    size_t size = heap->next_chunk;
    if (!heap_charge(heap, (gssize)(CHUNK_HEADER + size)))
        return NULL;
    HeapChunk *c = chunk_new(size);
    if (c->size > size)
        heap_charge(heap, (gssize)(c->size - size)); /* huge-page rounding: counted, not refused */
    ASAN_POISON_MEMORY_REGION((char *)c + CHUNK_HEADER, c->size);
    c->next = heap->chunks;
    heap->chunks = c;
    heap->pos = (char *)c + CHUNK_HEADER;
    heap->end = heap->pos + c->size;
    heap->next_chunk = MIN(heap->next_chunk * 2, CHUNK_MAX);
    void *p = heap->pos;
    heap->pos += n;
    return p;
}

static G_GNUC_NO_INLINE void *
big_alloc(Heap *heap, size_t n)
{
    if (n > G_MAXSSIZE - BIG_HEADER || !heap_charge(heap, (gssize)(BIG_HEADER + n)))
        return NULL;
    HeapBig *b = g_try_malloc(BIG_HEADER + n);
    if (b == NULL) {
        heap_charge(heap, -(gssize)(BIG_HEADER + n));
        return NULL;
    }
    b->size = n;
    b->prev = NULL;
    b->next = heap->big;
    if (heap->big != NULL)
        heap->big->prev = b;
    heap->big = b;
    ASAN_POISON_MEMORY_REGION((char *)b + BIG_HEADER, n);
    return (char *)b + BIG_HEADER;
}

void *
heap_alloc_slow(Heap *heap, size_t size)
{
    if (size > G_MAXSSIZE / 2)
        return NULL;
    size_t n = block_bytes(size);
    void *p;
    if (n <= HEAP_MAX_SMALL) {
        void **list = &heap->free_small[n / HEAP_ALIGN - 1];
        if (*list != NULL) {
            p = *list;
            ASAN_UNPOISON_MEMORY_REGION(p, sizeof(void *));
            *list = *(void **)p;
        } else if ((size_t)(heap->end - heap->pos) >= n) {
            p = heap->pos;
            heap->pos += n;
        } else {
            p = small_from_new_chunk(heap, n);
        }
    } else {
        p = big_alloc(heap, n);
    }
    if (p != NULL)
        ASAN_UNPOISON_MEMORY_REGION(p, size);
    return p;
}

void
heap_free(Heap *heap, void *p, size_t size)
{
    size_t n = block_bytes(size);
    if (n <= HEAP_MAX_SMALL) {
        void **list = &heap->free_small[n / HEAP_ALIGN - 1];
        ASAN_POISON_MEMORY_REGION(p, n);
        ASAN_UNPOISON_MEMORY_REGION(p, sizeof(void *));
        *(void **)p = *list;
        ASAN_POISON_MEMORY_REGION(p, sizeof(void *));
        *list = p;
        return;
    }
    HeapBig *b = (HeapBig *)(void *)((char *)p - BIG_HEADER);
    if (b->prev != NULL)
        b->prev->next = b->next;
    else
        heap->big = b->next;
    if (b->next != NULL)
        b->next->prev = b->prev;
    heap_charge(heap, -(gssize)(BIG_HEADER + b->size));
    ASAN_UNPOISON_MEMORY_REGION(p, b->size);
    g_free(b);
}
