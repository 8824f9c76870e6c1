/* SPDX-License-Identifier: MIT */
/*
 * The unpickler's opcode machine (private to src/readers/pickle/): the loader state that
 * machine.c (the stack, the memo, containers and the binary opcodes) and text.c (the protocol 0
 * text opcodes) share.
 */
#pragma once

#include <glib.h>

#include <stdint.h>

#include "fragsim/types.h"

#include "input.h"
#include "value.h"

/* The lists run_memo_list() keeps for reuse (lists.c): a power of two, and their longest.  16
 * ways: a snapshot's stacks begin alike (the allocator's own frames), so that many runs share
 * the first LIST_PREFIX bytes that pick their bucket (with 8 ways, 512 lists, a bucket over
 * full missed a tenth of MercuryB1's stacks again and again). */
#define LIST_CACHE_SLOTS 2048
#define LIST_CACHE_WAYS  16
#define LIST_CACHE_ITEMS 320
#define LIST_PREFIX      128 /* bytes of a run that key its bucket */

typedef struct ListCacheSlot ListCacheSlot;

/* The keys of the records read last, pair by pair (records.c): a record whose keys are the same
 * memo gets, in the same order, has the same keys, checked once. */
#define KEY_TEMPLATE_PAIRS 16
typedef struct {
    uint64_t bytes[KEY_TEMPLATE_PAIRS]; /* the memo get's opcode and argument, little-endian */
    uint64_t mask[KEY_TEMPLATE_PAIRS];  /* its bytes */
    uint8_t width[KEY_TEMPLATE_PAIRS];  /* 2 or 5 */
    int8_t key[KEY_TEMPLATE_PAIRS];     /* its record key, -1 for none */
    size_t n;                           /* pairs known */
    uint64_t generation;                /* Loader.memo_generation they were checked at */
} KeyTemplate;

typedef struct {
    Input in;
    uint64_t op_offset; /* of the opcode being executed */
    guint8 op;          /* that opcode */
    Heap *heap;

    FsimPickleValue **stack; /* each slot holds a reference */
    size_t stack_len;
    size_t stack_cap;
    size_t fence; /* stack index of the innermost MARK; items below it are out of reach */

    size_t *marks;
    size_t n_marks;
    size_t marks_cap;

    FsimPickleValue **memo; /* NULL = unset; each set slot holds a reference */
    size_t memo_cap;
    size_t memo_count;         /* set entries: MEMOIZE's next index, as in CPython */
    size_t memo_bound;         /* indices must be below it */
    uint64_t memo_generation;  /* bumped when a set memo entry is replaced */
    ListCacheSlot *list_cache; /* (nullable) lists.c */
    uint16_t *list_cache_tags; /* per bucket: its ways' tags, then their lengths (lists.c) */
    uint8_t *list_cache_next;  /* per bucket: the way to replace next */
    uint64_t twins;            /* twin numbers given so far (lists.c) */
    gboolean text_strings;     /* a str came from STRING or UNICODE (fsim_pickle_text_strings) */
    const char *watch_str;     /* (nullable) FsimPickleLimits.watch_str */
    size_t watch_str_len;
    gboolean watched_str_seen;      /* a str held it (watch_str_check()) */
    const char *const *record_keys; /* (nullable) FsimPickleLimits.record_keys (records.c) */
    gboolean shared_record_lists;   /* FsimPickleLimits.shared_record_lists (records.c) */
    size_t n_record_keys;
    size_t record_key_len[FSIM_PICKLE_RECORD_KEYS];
    uint64_t records; /* records made */
    KeyTemplate key_template;

    guint max_depth;
    size_t max_stack;
    size_t max_long_bytes;
    uint64_t max_nodes; /* 0: DEFAULT_NODES_BASE + DEFAULT_NODES_PER_BYTE per byte read */

    GError **error;
} Loader;

/* Whether the @len bytes at @p hold the @n bytes of @needle (n >= 1, len >= n). */
gboolean bytes_hold(const guint8 *p, size_t len, const char *needle, size_t n);

/* Notes whether the str of @len bytes at @data holds FsimPickleLimits.watch_str. */
static inline void
watch_str_check(Loader *l, const guint8 *data, size_t len)
{
    if (G_UNLIKELY(l->watch_str != NULL) && len >= l->watch_str_len && !l->watched_str_seen)
        l->watched_str_seen = bytes_hold(data, len, l->watch_str, l->watch_str_len);
}

#define DEFAULT_NODES_BASE     ((uint64_t)1 << 20)
#define DEFAULT_NODES_PER_BYTE 64 /* real snapshots: 2 to 4 */

/* FsimPickleLimits.max_nodes at the opcode being executed. */
static inline uint64_t
max_nodes(const Loader *l)
{
    if (l->max_nodes != 0)
        return l->max_nodes;
    return DEFAULT_NODES_BASE + DEFAULT_NODES_PER_BYTE * (l->op_offset + 1);
}

gboolean load_fail(Loader *l, FsimTraceError code, const char *format, ...) G_GNUC_PRINTF(3, 4);

/* The name of the opcode being executed, as pickletools spells it. */
const char *op_name(const Loader *l);

/* Fails for a value the budget cannot hold (a NULL from value_new*()). */
gboolean over_budget(Loader *l);

/* Fails for what input_*() reported (not INPUT_OK); @n is the bytes the opcode needed. */
gboolean input_fail(Loader *l, InputStatus status, size_t n);

/* Makes room for one more value on the stack; FALSE (with the error set) at its limit. */
gboolean grow_stack(Loader *l);

/* Pushes @v (a reference is taken); a NULL @v is a budget failure.  Inline: most opcodes end
 * here. */
static inline gboolean
push(Loader *l, FsimPickleValue *v)
{
    if (G_UNLIKELY(v == NULL))
        return over_budget(l);
    if (G_UNLIKELY(l->stack_len == l->stack_cap) && !grow_stack(l))
        return FALSE;
    value_ref(v);
    l->stack[l->stack_len++] = v;
    return TRUE;
}

static inline FsimPickleValue *
new_value(Loader *l, FsimPickleType type)
{
    return value_new(l->heap, type, l->op_offset);
}

/* LONG1-style little-endian two's-complement bytes as an int or a bigint value. */
FsimPickleValue *new_long(Loader *l, const guint8 *bytes, size_t n);

gboolean memo_get(Loader *l, uint64_t index);
gboolean memo_put(Loader *l, uint64_t index);
/* memo_put() of an entry not set yet, within the memo's room (MEMOIZE, nearly always): in line,
 * the general path for anything else. */
static inline gboolean
memo_put_fresh(Loader *l, uint64_t index)
{
    if (G_LIKELY(index < l->memo_cap && l->memo[index] == NULL && l->stack_len > l->fence)) {
        FsimPickleValue *v = l->stack[l->stack_len - 1];
        value_ref(v);
        l->memo[index] = v;
        l->memo_count++;
        return TRUE;
    }
    return memo_put(l, index);
}
/* GET, BINGET, LONG_BINGET: memo_get(); PUT, BINPUT, LONG_BINPUT: memo_put(). */
gboolean memo_access(Loader *l, uint64_t index);

/* APPENDS: appends stack[base..stack_len) to the list at stack[base - 1]. */
gboolean append_items(Loader *l, size_t base);

/* The hot paths.  run_memo_gets() pushes the memo gets at in.p while each is a plain push (inline:
 * the opcode loop runs it before most opcodes).  run_memo_list() (lists.c), at a MARK, takes
 * MARK, a run of memo gets and APPENDS into the empty list on top of the stack at once: 1 when it
 * did, 0 when it consumed nothing (the generic path runs), -1 on an error.  list_cache_clear()
 * drops the cache's references. */
static inline void
run_memo_gets(Loader *l)
{
    const guint8 *p = l->in.p;
    const guint8 *end = l->in.end;
    FsimPickleValue **stack = l->stack;
    FsimPickleValue *const *memo = l->memo;
    size_t len = l->stack_len;
    size_t cap = l->stack_cap;
    size_t memo_cap = l->memo_cap;

    while (end - p >= 5) {
        size_t width = p[0] == 'h' ? 2 : p[0] == 'j' ? 5 : 0;
        size_t index = width == 2 ? p[1]
                                  : (uint32_t)p[1] | (uint32_t)p[2] << 8 | (uint32_t)p[3] << 16 |
                                        (uint32_t)p[4] << 24;
        FsimPickleValue *v;

        if (width == 0 || index >= memo_cap || len == cap)
            break;
        v = memo[index];
        if (v == NULL || v->refs == UINT32_MAX || (v->flags & (VALUE_RECORD | VALUE_HAS_RECORD)))
            break;
        v->flags |= VALUE_SEALED; /* shared from now on, as push_shared() does */
        v->refs++;
        stack[len++] = v;
        p += width;
    }
    l->in.p = p;
    l->stack_len = len;
}

int run_memo_list(Loader *l);
/* run_memo_list() for a run that list_cached_run() found in no way of the cache, whose @n memo
 * gets (all of them: n counts them) end at the APPENDS at @appends: not looked up nor scanned
 * again. */
int run_memo_list_missed(Loader *l, const guint8 *appends, size_t n);

/* At an EMPTY_DICT (in.p on it) whose dict is written as a record (records.c): reads the dict
 * into a record pushed in its place; 1 when it did, 0 when it consumed nothing (the generic
 * path runs), -1 on an error. */
int run_record(Loader *l);

/* The failures for a record (or a container holding one) pushed a second time, and for a
 * record modified (SETITEMS into it: only a dict of more than a thousand entries is written in
 * two batches by CPython, and records hold fewer). */
gboolean record_shared(Loader *l);
gboolean record_modified(Loader *l);
void list_cache_clear(Loader *l);

/* The list the cache built from the run of memo gets at @body (after a MARK; its length in bytes
 * in *@len, followed by APPENDS), for value_share_twin(), its way in *@found; NULL when it has
 * none.  *@len is 0 or, when known, the run's length: a run shorter than LIST_PREFIX is found
 * only so. */
FsimPickleValue *list_cached_run(Loader *l, const guint8 *body, size_t *len, ListCacheSlot **found);

/* The list that records share in place of copies of the list cached at @way, made at the first
 * call (at l->op_offset: the offset of its first copy) and kept with the way: a twin of it,
 * sealed and flagged VALUE_HAS_RECORD, so that pushing it (a memo get of an entry that holds it)
 * fails the load as for a record (FsimPickleLimits.shared_record_lists).  NULL over the
 * budget. */
FsimPickleValue *list_standin(Loader *l, ListCacheSlot *way);

/* The protocol 0 opcodes, whose argument is a line of text (text.c): INT, LONG, GET, PUT, FLOAT,
 * STRING, UNICODE. */
gboolean load_text(Loader *l);
