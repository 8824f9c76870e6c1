/* SPDX-License-Identifier: MIT */
/*
 * The unpickler's object model (private to src/readers/pickle/): values, their reference counts,
 * and the heap they live in.
 *
 * Every value is reference counted: a reference is a slot on the unpickling stack, in the memo,
 * or in a container.  A value whose count drops to zero (POP, POP_MARK, a memo entry replaced, a
 * container freed) is freed at once and its memory reused, so the heap holds the *live* object
 * graph, not everything the input ever created: `(NONE POP) x 1e9` costs one value, not 1e9.
 *
 * The heap hands out small blocks (up to HEAP_MAX_SMALL bytes) from chunks, in size classes of 8
 * bytes with a free list each; larger blocks (long strings, item arrays) come from g_malloc()
 * and are linked into a list so that the whole heap can be freed at once.  Freed chunks go back
 * to a small process-wide cache for the next heap (the next file opened): a fresh chunk's pages
 * cost the kernel as much to fault in and zero as the parsing that fills them.  Every byte the
 * heap, the stack, the memo and the input window hold is counted against a budget (the memory
 * budget of the process unless the caller gives one); crossing it is an error, never an abort.
 */
#pragma once

#include <glib.h>

#include <stddef.h>
#include <stdint.h>

#include "readers/pickle.h"

enum {
    VALUE_SEALED = 1 << 0,     /* container: can no longer be modified (see machine.c) */
    VALUE_UNSIGNED = 1 << 1,   /* int: above INT64_MAX, held in u.u */
    VALUE_TWIN = 1 << 2,       /* list: its item array is shared with its twins (value.c) */
    VALUE_RECORD = 1 << 3,     /* dict: a record (records.c); u.c.items is its block */
    VALUE_HAS_RECORD = 1 << 4, /* container: holds a record, or a container that does */
};

/* A record's block (records.c): u.c.cap words, u.c.len 0 (an empty dict to the accessors).
 * First the values it holds a reference to (strs, lists, memo references), then its scalars
 * (RECORD_SCALAR_WORDS each: a FsimPickleValue up to and with u.i, all that an int, None or bool
 * has: a record's entries are most of a snapshot's memory), then two words: the slot of each
 * record key (0: absent, 1 + k: the k-th referenced value, 0x80 | k: the k-th scalar) and
 * RECORD_INFO (pairs, referenced values).  (A scalar is read through a FsimPickleValue pointer;
 * the words after it, the header's at least, keep a read of the whole struct in the block.) */
#define RECORD_SCALAR_WORDS 3
#define RECORD_HEADER_WORDS 2
#define RECORD_REFS(info)   ((size_t)((info) >> 32))
#define RECORD_PAIRS(info)  ((size_t)((info)&0xffffffffu))

/* The deepest nesting a value can record (height is 16 bits). */
#define VALUE_MAX_HEIGHT 65535u

struct FsimPickleValue {
    uint8_t type;    /* FsimPickleType */
    uint8_t flags;   /* VALUE_* */
    uint16_t height; /* containers: 1 + the highest item (empty: 1); 0 for scalars, but a str
                      * that was a record's key keeps its record key here (records.c) */
    uint32_t refs;   /* references from the stack, the memo and containers */
    uint64_t offset; /* of the opcode that created the value */
    union {
        gboolean b;
        int64_t i;
        uint64_t u;
        double d;
        struct {
            char *data; /* NUL-terminated; str, bytes and bigint bytes */
            size_t len;
        } s;
        struct {
            FsimPickleValue **items; /* dict: key, value, key, value, ... */
            uint32_t len;            /* items; dict: entries */
            uint32_t cap;            /* pointers allocated at items */
            uint64_t nodes;          /* values a full walk visits: 1 + the items' nodes */
        } c;
    } u;
};

G_STATIC_ASSERT(offsetof(FsimPickleValue, u) + sizeof(int64_t) ==
                RECORD_SCALAR_WORDS * sizeof(void *));
G_STATIC_ASSERT(sizeof(FsimPickleValue) <=
                (RECORD_SCALAR_WORDS + RECORD_HEADER_WORDS) * sizeof(void *));

/* Record scalar @k of the record whose block is @words, holding @n_refs referenced values. */
static inline const FsimPickleValue *
record_scalar(const void *words, size_t n_refs, size_t k)
{
    return (const FsimPickleValue *)(const void *)((const uint64_t *)words + n_refs +
                                                   k * RECORD_SCALAR_WORDS);
}

/* The values a record holds references to (value_unref()). */
static inline size_t
record_refs(const FsimPickleValue *v)
{
    const uint64_t *words = (const uint64_t *)(const void *)v->u.c.items;
    return RECORD_REFS(words[v->u.c.cap - 1]);
}

/* Under AddressSanitizer every block is followed by a poisoned gap (heap.c): no inline fast
 * path then. */
#if defined(__SANITIZE_ADDRESS__)
#define HEAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_ASAN 1
#endif
#endif

#define HEAP_ALIGN     8
#define HEAP_MAX_SMALL 1024 /* a list of 120 items: the frames of most stacks */
#define HEAP_CLASSES   (HEAP_MAX_SMALL / HEAP_ALIGN)

typedef struct HeapChunk HeapChunk;
typedef struct HeapBig HeapBig;

typedef struct {
    HeapChunk *chunks; /* small blocks are carved from these */
    char *pos;
    char *end;
    void *free_small[HEAP_CLASSES]; /* free lists, linked through the blocks' first word */
    HeapBig *big;                   /* large blocks, doubly linked */
    size_t next_chunk;
    size_t used;   /* bytes held now: chunks, large blocks, and what heap_charge() added */
    size_t peak;   /* the most bytes held at once */
    size_t budget; /* used may not exceed it */
} Heap;

/* Sets up an empty heap with a budget of @budget bytes. */
void heap_init(Heap *heap, size_t budget);

/* The heap will likely grow to about @bytes (FsimPickleLimits.expect_memory; 0: no hint): its
 * first chunk is taken that large (up to a huge page) rather than grown to from 16 KiB. */
void heap_expect(Heap *heap, size_t bytes);

/* Frees every block at once. */
void heap_clear(Heap *heap);

/* heap_alloc() when the fast path cannot serve. */
void *heap_alloc_slow(Heap *heap, size_t size);

/* A block of @size bytes, or NULL when it would take the heap past its budget.  Inline: a value
 * is allocated for most opcodes, and the common case is a pop from a free list or a bump. */
static inline void *
heap_alloc(Heap *heap, size_t size)
{
#if !defined(HEAP_ASAN)
    size_t n = (MAX(size, (size_t)1) + HEAP_ALIGN - 1) & ~(size_t)(HEAP_ALIGN - 1);
    if (G_LIKELY(n <= HEAP_MAX_SMALL)) {
        void **list = &heap->free_small[n / HEAP_ALIGN - 1];
        void *p = *list;
        if (p != NULL) {
            *list = *(void **)p;
            return p;
        }
        if ((size_t)(heap->end - heap->pos) >= n) {
            p = heap->pos;
            heap->pos += n;
            return p;
        }
    }
#endif
    return heap_alloc_slow(heap, size);
}

/* Gives back a block of @size bytes from heap_alloc(). */
void heap_free(Heap *heap, void *p, size_t size);

/* Counts @delta bytes (held outside the heap: the stack, the memo, the input window) against the
 * budget.  Returns FALSE, changing nothing, when an increase would go past it. */
gboolean heap_charge(Heap *heap, gssize delta);

static inline gboolean
value_is_container(const FsimPickleValue *v)
{
    return v->type >= FSIM_PICKLE_LIST;
}

static inline uint64_t
value_nodes(const FsimPickleValue *v)
{
    return value_is_container(v) ? v->u.c.nodes : 1;
}

/* A new value of @type with no references, or NULL over the budget.  Containers start empty. */
static inline FsimPickleValue *
value_new(Heap *heap, FsimPickleType type, uint64_t offset)
{
    FsimPickleValue *v = heap_alloc(heap, sizeof(*v));
    if (v == NULL)
        return NULL;
    v->type = (uint8_t)type;
    v->flags = 0;
    v->height = type >= FSIM_PICKLE_LIST ? 1 : 0;
    v->refs = 0;
    v->offset = offset;
    if (type >= FSIM_PICKLE_LIST) {
        v->u.c.items = NULL;
        v->u.c.len = 0;
        v->u.c.cap = 0;
        v->u.c.nodes = 1;
    }
    return v;
}

/* A new str, bytes or bigint value of @len bytes (copied from @src unless it is NULL: the caller
 * fills them, all @len of them) and a NUL, or NULL over the budget. */
FsimPickleValue *value_new_blob(Heap *heap, FsimPickleType type, uint64_t offset, const void *src,
                                size_t len);

/* Makes room for @extra more pointers in a container's item array.  FALSE over the budget.  A
 * twin list (VALUE_TWIN) that gets room for more gets an array of its own and is a twin no
 * longer. */
gboolean value_reserve_items(Heap *heap, FsimPickleValue *c, size_t extra);

/* Makes the list @list (no twin yet) the first of the twins numbered @twin: its items move to an
 * array that later twins share (value_share_twin()); lists with the same twin number have the
 * same items (fsim_pickle_list_twin()).  FALSE over the budget, nothing changed. */
gboolean value_make_twin(Heap *heap, FsimPickleValue *list, uint64_t twin);

/* Makes the empty list @list a twin of @twin: the same items (the same array: no reference to
 * the items is taken), height and node count.  Modifying either afterwards gives it an array of
 * its own first (value_reserve_items()); a twin freed drops its share of the array, the last one
 * the array's references. */
void value_share_twin(FsimPickleValue *list, const FsimPickleValue *twin);

static inline void
value_ref(FsimPickleValue *v)
{
    v->refs++;
}

/* Drops a reference; frees @v, and what only it referred to, when it was the last. */
void value_unref(Heap *heap, FsimPickleValue *v);

struct FsimPickle {
    Heap heap;
    FsimPickleValue *root;
    uint64_t input_bytes;
    uint64_t records;
    gboolean text_strings;
    gboolean watched_str_seen;
};
