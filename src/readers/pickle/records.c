/* SPDX-License-Identifier: MIT */
/*
 * Records (FsimPickleLimits.record_keys, fsim_pickle_record()): small dicts read straight from
 * the input into the values of a few keys, without building the dict.
 *
 * The entries of a snapshot's `device_traces` are most of its dicts, and a reader looks at a
 * handful of their keys.  CPython's pickler writes each as
 *
 *     EMPTY_DICT MEMOIZE MARK key value key value ... SETITEMS
 *
 * with each key a str (SHORT_BINUNICODE MEMOIZE the first time, a memo get after) and each value
 * an int (BININT1, BININT2, BININT, LONG1), None, a bool, a str (new, or a memo get), a memo
 * get of anything, or a list of memo gets (`frames`: EMPTY_LIST MEMOIZE, then MARK gets APPENDS,
 * a get and APPEND, or nothing).  run_record() reads a dict written so, whose first key is the
 * first record key, in one pass over its bytes, making only what the generic path would have
 * made of it that anyone could see again: the memo entries (the dict's, new strs, the lists, at
 * the indices the MEMOIZEs give them), the sealing of what memo gets name, the lists (shared
 * from run_memo_list()'s cache, or built by it, so that they are twins as on the generic path;
 * with FsimPickleLimits.shared_record_lists, a list the cache holds is the one its repeats all
 * refer to: list_standin()) and, in place of the dict, a record: a dict value flagged VALUE_RECORD,
 * empty to every accessor but fsim_pickle_record(), with the height and node count of the dict it
 * stands for and the limits checked on them as SETITEMS checks them.  Ints, None and bools are kept
 * in the record's block, not made values of their own.  At the first opcode of another form (a memo
 * get of a value set inside the dict, a MEMOIZE over a set entry, a list holding anything but
 * memo gets, any other opcode), what it made is undone (the memo entries it set are unset, the
 * references it took dropped; what it sealed, the generic path seals too when it runs the same
 * opcodes) and the generic path reads the dict.
 *
 * Most pairs are a memo get of a key str met before (its record key kept in its height: key_tag())
 * and an int, a memo get, a list (`frames`) or a new str: scan_pairs_fast() reads runs of those
 * with its state in locals (the lists and strs out of line, by scan_value_at(), with the state put
 * back around the call); the first pair of another form (a new key, None, the end of the input
 * near) goes through scan_pair(), which checks everything again.  The records of a snapshot have
 * the same keys in the same order, written as the same memo gets: Loader.key_template keeps the
 * key bytes of the records read last, pair by pair, with their record keys, and a pair whose key
 * bytes are the template's, after keys that were all the template's, has that record key, without
 * looking at the memo nor for a key set twice (the template's keys were checked in that order,
 * and memo entries set before a record are not replaced while the template lives: a replaced one
 * bumps Loader.memo_generation, which empties the template).
 *
 * A record is never shared, nor a container that holds one (VALUE_HAS_RECORD, set as containers
 * adopt items), nor modified: pushing one a second time (memo GET, DUP) or SETITEMS into one
 * fails the load (record_shared(), record_modified() in errors.c), so
 * that each record has one place in the result, which is where its reader finds it; a reader
 * that finds fewer records than the pickle holds (fsim_pickle_records()), or fails, loads the
 * input again without records.
 */
#include <glib.h>

#include <stddef.h>
#include <string.h>

#include "machine.h"

#define OP_MEMOIZE          0x94
#define OP_SHORT_BINUNICODE 0x8c
#define OP_LONG1            0x8a
#define OP_NEWTRUE          0x88
#define OP_NEWFALSE         0x89
#define RECORD_MAX_PAIRS    32 /* the most setitems_fresh() takes: 64 items */

typedef struct {
    Loader *l;
    const guint8 *p;
    const guint8 *end;
    const guint8 *at;   /* the EMPTY_DICT */
    uint64_t at_offset; /* its input offset */
    size_t memo_base;   /* the dict's memo index; the MEMOIZEs inside take the next ones */
    size_t puts;        /* MEMOIZEs inside so far (their entries are set) */
    size_t pairs;
    uint32_t height;
    uint64_t nodes;
    /* per record key, a byte (key k's at bits 8k to 8k + 7, so that the record's header takes the
     * word as it is): 0 (not met), 1 + a ref's index, or 0x80 | a scalar's index.  A word, set by
     * shifts, not a byte array: a byte stored, then the eight loaded at once (as the state is put
     * back around a call, or the record committed), stalled the load until the store was done. */
    uint64_t slots;
    size_t n_refs;
    size_t n_scalars;
    gboolean on_template; /* the pairs so far are Loader.key_template's first ones */
    FsimPickleValue *refs[FSIM_PICKLE_RECORD_KEYS];
    FsimPickleValue scalars[FSIM_PICKLE_RECORD_KEYS + 1]; /* (the last: another key's) */
} Scan;

/* (Scan.slots: the record's slots word, a byte per key) */
G_STATIC_ASSERT(FSIM_PICKLE_RECORD_KEYS == sizeof(uint64_t));

static inline uint64_t
offset_of(const Scan *s, const guint8 *p)
{
    return s->at_offset + (uint64_t)(p - s->at);
}

/* The index of the memo get at *@p (BINGET or LONG_BINGET, checked by the caller), moving *@p
 * past it; FALSE when its argument runs past @end. */
static inline gboolean
read_get(const guint8 **p, const guint8 *end, size_t *index)
{
    const guint8 *q = *p;
    if (q[0] == 'h') {
        if (end - q < 2)
            return FALSE;
        *index = q[1];
        *p = q + 2;
        return TRUE;
    }
    if (end - q < 5)
        return FALSE;
    *index = (size_t)q[1] | (size_t)q[2] << 8 | (size_t)q[3] << 16 | (size_t)q[4] << 24;
    *p = q + 5;
    return TRUE;
}

/* The value the memo get at s->p names, moving past it: NULL when it is not one set before the
 * dict, or a record, or one that cannot take more references. */
static inline FsimPickleValue *
scan_get(Scan *s)
{
    size_t index;
    if (!read_get(&s->p, s->end, &index) || index >= s->memo_base)
        return NULL;
    FsimPickleValue *v = s->l->memo[index]; /* (memo_base <= memo_cap) */
    if (v == NULL || (v->flags & (VALUE_RECORD | VALUE_HAS_RECORD)) || v->refs >= UINT32_MAX - 8)
        return NULL;
    v->flags |= VALUE_SEALED; /* pushed a second time, as memo_get() does */
    return v;
}

/* Whether a MEMOIZE at s->p would set a fresh entry (the next inside the dict). */
static inline gboolean
fresh_memo(const Scan *s)
{
    size_t index = s->memo_base + 1 + s->puts;
    return index < s->l->memo_bound && (index >= s->l->memo_cap || s->l->memo[index] == NULL);
}

/* Stores @v (no reference of the caller's taken) at the next memo index inside the dict. */
static gboolean
memo_keep(Scan *s, FsimPickleValue *v)
{
    Loader *l = s->l;
    if (!push(l, v))
        return FALSE;
    gboolean ok = memo_put_fresh(l, s->memo_base + 1 + s->puts);
    l->stack_len--;
    v->refs--;
    s->puts += ok;
    return ok;
}

/* @slots with record key @key's byte set to @slot (its byte was 0: a key is met once). */
static inline uint64_t
slot_set(uint64_t slots, int key, unsigned slot)
{
    return slots | (uint64_t)slot << (8 * key);
}

static inline unsigned
slot_of(uint64_t slots, int key)
{
    return (unsigned)(slots >> (8 * key)) & 0xffu;
}

static inline void
keep_ref(Scan *s, int key, FsimPickleValue *v)
{
    s->refs[s->n_refs++] = v;
    s->slots = slot_set(s->slots, key, (unsigned)s->n_refs);
}

/* Counts @v, an item of the dict, into its height and node count. */
static inline void
count_value(Scan *s, const FsimPickleValue *v)
{
    s->nodes += value_nodes(v);
    if (value_is_container(v))
        s->height = MAX(s->height, v->height + 1u);
}

/* Undoes what the scan made: the record is not one after all. */
static void
rollback(Scan *s)
{
    Loader *l = s->l;
    for (size_t i = 0; i < s->n_refs; i++)
        value_unref(l->heap, s->refs[i]);
    for (size_t k = 1; k <= s->puts; k++) {
        FsimPickleValue *v = l->memo[s->memo_base + k];
        l->memo[s->memo_base + k] = NULL;
        l->memo_count--;
        value_unref(l->heap, v);
    }
}

/* A str at s->p (after its opcode @op), perhaps memoized; its bytes in *@data, *@len.  1, 0 (not
 * a record's form), -1 (an error). */
static int
scan_str(Scan *s, guint8 op, int key, const guint8 **data, size_t *len)
{
    const guint8 *q = s->p;
    const guint8 *op_at = q - 1;
    if (op == OP_SHORT_BINUNICODE) {
        if (s->end - q < 1)
            return 0;
        *len = q[0];
        q += 1;
    } else {
        if (s->end - q < 4)
            return 0;
        *len = (size_t)q[0] | (size_t)q[1] << 8 | (size_t)q[2] << 16 | (size_t)q[3] << 24;
        q += 4;
    }
    if ((size_t)(s->end - q) < *len)
        return 0;
    *data = q;
    watch_str_check(s->l, q, *len); /* (a str made on the generic path is checked again: no harm) */
    s->p = q + *len;
    gboolean memoized = s->p < s->end && *s->p == OP_MEMOIZE;
    s->nodes++;
    if (memoized) {
        if (!fresh_memo(s))
            return 0;
        s->p++;
    } else if (key < 0) {
        return 1; /* nobody can see it again */
    }
    Loader *l = s->l;
    FsimPickleValue *v = value_new_blob(l->heap, FSIM_PICKLE_STR, offset_of(s, op_at), *data, *len);
    if (v == NULL) {
        over_budget(l);
        return -1;
    }
    l->op_offset = offset_of(s, s->p - 1);
    if (memoized && !memo_keep(s, v))
        return -1;
    if (key >= 0) {
        value_ref(v);
        keep_ref(s, key, v);
    }
    return 1;
}

/* The end of the run of memo gets at @q, their number in *@n; NULL for one whose index is not
 * below @memo_base.  A branch per get, not a table of widths: the next get's place is then known
 * before this one's opcode is loaded, where a table lookup made each step wait on the one before
 * (and out of line: in scan_list() the count was kept on the stack). */
static G_GNUC_NO_INLINE const guint8 *
scan_gets(const guint8 *q, const guint8 *end, size_t memo_base, size_t *n)
{
    size_t gets = 0;
    while (end - q >= 5) {
        size_t index;
        if (q[0] == 'j') {
            index = (size_t)q[1] | (size_t)q[2] << 8 | (size_t)q[3] << 16 | (size_t)q[4] << 24;
            q += 5;
        } else if (q[0] == 'h') {
            index = q[1];
            q += 2;
        } else {
            break;
        }
        if (index >= memo_base)
            return NULL;
        gets++;
    }
    *n = gets;
    return q;
}

/* The run of memo gets at @q (after a MARK), up to its APPENDS: the list run_memo_list()'s cache
 * built from the same bytes in *@cached (NULL: none; then only the indices are checked here, the
 * values being looked at as run_memo_list() fills the list: an unset entry or a record among
 * them fails the load then; the gets counted in *@n).  NULL when the run is not one. */
static const guint8 *
scan_run(Scan *s, const guint8 *q, FsimPickleValue **cached, ListCacheSlot **way, size_t *n)
{
    const guint8 *body = q;
    size_t len = 0;
    *cached = list_cached_run(s->l, body, &len, way);
    if (*cached != NULL)
        return body + len;
    if ((q = scan_gets(body, s->end, s->memo_base, n)) == NULL)
        return NULL;
    len = (size_t)(q - body);
    if (len > 0 && len < LIST_PREFIX)
        *cached = list_cached_run(s->l, body, &len, way); /* a short run, known by all its bytes */
    return q;
}

/* The list on top of the stack (@list, memoized), read up to @end: taken off the stack (its
 * reference becomes the record's, or goes), sealed as stored into the dict, counted into it, kept
 * as record key @key's value (-1: another key's, which only the memo holds). */
static int
list_done(Scan *s, int key, FsimPickleValue *list, const guint8 *end)
{
    s->p = end;
    s->l->stack_len--;
    list->flags |= VALUE_SEALED;
    count_value(s, list);
    if (key >= 0)
        keep_ref(s, key, list);
    else
        list->refs--;
    return 1;
}

/* The list at s->p (after its EMPTY_LIST at @op_at), a run of memo gets from @items to @end
 * that the cache built before (at @way): the list the records share in its place
 * (list_standin()), memoized, instead of a twin of the cached one made for this record alone.
 * (FsimPickleLimits.shared_record_lists; the caller checked the MEMOIZE.)  0 where it cannot
 * take another reference (the caller makes the twin), -1 on an error. */
static int
scan_shared_list(Scan *s, int key, const guint8 *op_at, const guint8 *items, const guint8 *end,
                 ListCacheSlot *way)
{
    Loader *l = s->l;
    l->op_offset = offset_of(s, op_at);
    l->op = ']';
    FsimPickleValue *list = list_standin(l, way);
    if (list == NULL) {
        over_budget(l);
        return -1;
    }
    if (list->refs >= UINT32_MAX - 8)
        return 0;
    if (!push(l, list))
        return -1;
    l->op_offset = offset_of(s, items - 1);
    l->op = OP_MEMOIZE;
    if (!memo_put_fresh(l, s->memo_base + 1 + s->puts))
        return -1;
    s->puts++;
    return list_done(s, key, list, end);
}

/* A list at s->p (after its EMPTY_LIST at @op_at): MEMOIZE, then MARK, memo gets and APPENDS,
 * or a memo get and APPEND, or nothing; filled as the generic path fills it, then taken off the
 * stack. */
static int
scan_list(Scan *s, int key, const guint8 *op_at)
{
    Loader *l = s->l;
    FsimPickleValue *cached = NULL;
    ListCacheSlot *way = NULL;
    const guint8 *items = s->p + 1;
    const guint8 *end = items;
    size_t gets = 0;

    if (s->p >= s->end || *s->p != OP_MEMOIZE || !fresh_memo(s))
        return 0;
    if (items < s->end && *items == '(') {
        end = scan_run(s, items + 1, &cached, &way, &gets);
        if (end == NULL || end >= s->end || *end != 'e')
            return 0;
        end++;
        if (cached != NULL && l->shared_record_lists) {
            int done = scan_shared_list(s, key, op_at, items, end, way);
            if (done != 0)
                return done;
        }
    } else if (items < s->end && (*items == 'h' || *items == 'j')) {
        s->p = items;
        if (scan_get(s) == NULL || s->p >= s->end || *s->p != 'a')
            return 0;
        end = s->p + 1;
    }
    l->op_offset = offset_of(s, op_at);
    l->op = ']';
    if (!push(l, new_value(l, FSIM_PICKLE_LIST)))
        return -1;
    FsimPickleValue *list = l->stack[l->stack_len - 1];
    l->op_offset = offset_of(s, items - 1);
    l->op = OP_MEMOIZE;
    if (!memo_put_fresh(l, s->memo_base + 1 + s->puts))
        return -1;
    s->puts++;
    if (cached != NULL) {
        value_share_twin(list, cached); /* as run_memo_list() does on a hit */
    } else if (items < end) {
        l->in.p = items;
        int done = *items == '(' ? run_memo_list_missed(l, end - 1, gets) : 0;
        if (done < 0)
            return -1;
        if (done == 0) {
            size_t base = l->stack_len;
            for (const guint8 *q = items + (*items == '('); q < end - 1;) {
                size_t index = 0;
                l->op_offset = offset_of(s, q);
                l->op = *q;
                if (!read_get(&q, end, &index) || !memo_get(l, index))
                    return -1;
            }
            l->op_offset = offset_of(s, end - 1);
            l->op = end[-1];
            if (!append_items(l, base))
                return -1;
        }
        l->in.p = s->at;
    }
    return list_done(s, key, list, end);
}

/* A LONG1 of at most 8 bytes into @v, as new_long() reads it. */
static inline gboolean
scan_long1(Scan *s, FsimPickleValue *v)
{
    if (s->end - s->p < 1)
        return FALSE;
    size_t n = s->p[0];
    if (n > 8 || n > s->l->max_long_bytes || (size_t)(s->end - s->p) < 1 + n)
        return FALSE;
    const guint8 *bytes = s->p + 1;
    uint64_t u = 0;
    if (s->end - bytes >= 8) {
        /* (all 8 bytes there: one load, the ones past the int masked off) */
        memcpy(&u, bytes, 8);
        u = GUINT64_FROM_LE(u);
        if (n < 8)
            u &= ((uint64_t)1 << (8 * n)) - 1;
    } else {
        for (size_t i = n; i-- > 0;)
            u = u << 8 | bytes[i];
    }
    if (n > 0 && n < 8 && (bytes[n - 1] & 0x80))
        u |= ~(uint64_t)0 << (8 * n);
    v->u.u = u;
    s->p += 1 + n;
    return TRUE;
}

/* A scalar opcode at s->p (after its opcode @op) into @v; FALSE for any other opcode. */
static inline gboolean
scan_scalar(Scan *s, guint8 op, FsimPickleValue *v)
{
    const guint8 *q = s->p;
    switch (op) {
    case 'K':
        if (s->end - q < 1)
            return FALSE;
        v->u.i = q[0];
        s->p += 1;
        return TRUE;
    case 'M':
        if (s->end - q < 2)
            return FALSE;
        v->u.i = q[0] | q[1] << 8;
        s->p += 2;
        return TRUE;
    case 'J': {
        if (s->end - q < 4)
            return FALSE;
        uint32_t u =
            (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
        v->u.i = (u & 0x80000000u) ? (int64_t)u - ((int64_t)1 << 32) : (int64_t)u;
        s->p += 4;
        return TRUE;
    }
    case OP_LONG1:
        return scan_long1(s, v);
    case 'N':
        v->type = FSIM_PICKLE_NONE;
        return TRUE;
    case OP_NEWTRUE:
    case OP_NEWFALSE:
        v->type = FSIM_PICKLE_BOOL;
        v->u.b = op == OP_NEWTRUE;
        return TRUE;
    default:
        return FALSE;
    }
}

/* The scalar whose opcode is at @op_at (s->p after it), of record key @key (-1: another key),
 * kept in the record. */
static inline int
scan_scalar_value(Scan *s, int key, const guint8 *op_at)
{
    FsimPickleValue *scalar = &s->scalars[s->n_scalars];
    scalar->type = FSIM_PICKLE_INT;
    scalar->flags = 0;
    scalar->height = 0;
    scalar->refs = 1;
    scalar->offset = offset_of(s, op_at);
    if (!scan_scalar(s, *op_at, scalar))
        return 0;
    s->nodes++;
    if (key >= 0)
        s->slots = slot_set(s->slots, key, (unsigned)(0x80u | s->n_scalars++));
    return 1;
}

/* The memo get at s->p, a value of record key @key (-1: another key), kept in the record. */
static inline int
scan_get_value(Scan *s, int key)
{
    FsimPickleValue *v = scan_get(s);
    if (v == NULL)
        return 0;
    count_value(s, v);
    if (key >= 0) {
        value_ref(v);
        keep_ref(s, key, v);
    }
    return 1;
}

/* A str or a list whose opcode is at @op_at (s->p after it), of record key @key (-1: another
 * key). */
static int
scan_value_at(Scan *s, int key, const guint8 *op_at)
{
    guint8 op = *op_at;
    if (op == OP_SHORT_BINUNICODE || op == 'X') {
        const guint8 *data;
        size_t len;
        return scan_str(s, op, key, &data, &len);
    }
    return scan_list(s, key, op_at);
}

/* The value at s->p, of record key @key (-1: another key). */
static int
scan_value(Scan *s, int key)
{
    if (s->p >= s->end)
        return 0;
    const guint8 *op_at = s->p;
    guint8 op = *s->p++;
    if (op == 'h' || op == 'j') {
        s->p = op_at;
        return scan_get_value(s, key);
    }
    if (op == OP_SHORT_BINUNICODE || op == 'X') {
        const guint8 *data;
        size_t len;
        return scan_str(s, op, key, &data, &len);
    }
    if (op == ']')
        return scan_list(s, key, op_at);
    return scan_scalar_value(s, key, op_at);
}

/* The record key of the str @data (@len bytes), -1 for none. */
static int
key_slot(const Loader *l, const guint8 *data, size_t len)
{
    for (size_t k = 0; k < l->n_record_keys; k++) {
        if (len == l->record_key_len[k] && memcmp(data, l->record_keys[k], len) == 0)
            return (int)k;
    }
    return -1;
}

/* The record key of @str, a str value: kept in its height (0 for a str elsewhere) as 1 + 1 + the
 * key, or 1 for none, the first time it is a key here (most keys are memo gets of the same few
 * strs). */
static inline int
key_tag(const Loader *l, FsimPickleValue *str)
{
    if (G_UNLIKELY(str->height == 0))
        str->height = (uint16_t)(2 + key_slot(l, (const guint8 *)str->u.s.data, str->u.s.len));
    return (int)str->height - 2;
}

/* Whether @key (-1: none) may be the record's next key. */
static inline gboolean
key_ok(Scan *s, int key)
{
    /* (not a record, or a key set twice: a key met has its slot set with its value) */
    return s->pairs == 0 ? key == 0 : key < 0 || slot_of(s->slots, key) == 0;
}

/* One key at s->p, a new str.  Its record key in *@key (-1: none). */
static int
scan_new_key(Scan *s, int *key)
{
    const guint8 *data;
    size_t len;
    if (s->p >= s->end || (*s->p != OP_SHORT_BINUNICODE && *s->p != 'X'))
        return 0;
    guint8 op = *s->p++;
    int done = scan_str(s, op, -1, &data, &len);
    if (done <= 0)
        return done;
    *key = key_slot(s->l, data, len);
    return key_ok(s, *key) ? 1 : 0;
}

/* The value of a pair at s->p, of record key @key (-1: another key), at least 10 bytes before
 * the end of the input: a memo get and an int (most values: addresses, sizes, streams, times)
 * are read here. */
static inline int
scan_pair_value(Scan *s, int key)
{
    const guint8 *p = s->p;
    if (*p == 'h' || *p == 'j')
        return scan_get_value(s, key);
    if (*p == 'J' || *p == OP_LONG1 || *p == 'K' || *p == 'M') {
        s->p = p + 1;
        return scan_scalar_value(s, key, p);
    }
    return scan_value(s, key);
}

/* One pair at s->p near the end of the input (fewer than 16 bytes left), every opcode's length
 * checked. */
static int
scan_pair_tail(Scan *s)
{
    FsimPickleValue *v;
    int key;
    int done;

    if (s->pairs == RECORD_MAX_PAIRS)
        return 0;
    done = (s->p < s->end && (*s->p == 'h' || *s->p == 'j')) ? 2 : scan_new_key(s, &key);
    if (done == 2) {
        if ((v = scan_get(s)) == NULL || v->type != FSIM_PICKLE_STR)
            return 0;
        s->nodes++;
        done = key_ok(s, key = key_tag(s->l, v));
    }
    if (done > 0)
        done = scan_value(s, key);
    return done;
}

/* One pair at s->p, or the SETITEMS that ends the dict (2).  The key is a memo get or a new str,
 * the value anything scan_value() reads. */
static int
scan_pair(Scan *s)
{
    Loader *l = s->l;
    const guint8 *const end = s->end;
    const guint8 *p = s->p;
    FsimPickleValue *v;
    size_t index;
    int key;
    int done;

    /* the longest opcodes read here are 10 bytes (a get, LONG1 of 8): shorter tails (the end of
     * the input) go the slow way */
    if (end - p < 16) {
        if (p < end && *p == 'u')
            return s->pairs > 0 ? 2 : 0; /* (an empty dict: no first key, no record) */
        return scan_pair_tail(s);
    }
    if (*p == 'u')
        return s->pairs > 0 ? 2 : 0;
    if (s->pairs == RECORD_MAX_PAIRS)
        return 0;
    /* the key */
    if (*p == 'h' || *p == 'j') {
        if (*p == 'h') {
            index = p[1];
            p += 2;
        } else {
            index = (size_t)p[1] | (size_t)p[2] << 8 | (size_t)p[3] << 16 | (size_t)p[4] << 24;
            p += 5;
        }
        /* (l->memo, not a copy: a MEMOIZE inside may have moved it) */
        if (index >= s->memo_base || (v = l->memo[index]) == NULL || v->type != FSIM_PICKLE_STR)
            return 0;
        s->nodes++;
        key = key_tag(l, v);
        if (!key_ok(s, key))
            return 0;
    } else {
        done = scan_new_key(s, &key);
        if (done <= 0)
            return done;
        p = s->p;
        if (end - p < 10)
            return scan_value(s, key);
    }
    /* the value */
    s->p = p;
    return scan_pair_value(s, key);
}

/* The int at @q (BININT, BININT1, BININT2, LONG1 of at most 8 bytes; at least 10 bytes there)
 * into *@i: past it, or NULL for another opcode. */
static inline const guint8 *
fast_int(const guint8 *q, size_t max_long, int64_t *i)
{
    switch (q[0]) {
    case 'J':
        *i = (int32_t)((uint32_t)q[1] | (uint32_t)q[2] << 8 | (uint32_t)q[3] << 16 |
                       (uint32_t)q[4] << 24);
        return q + 5;
    case 'K':
        *i = q[1];
        return q + 2;
    case 'M':
        *i = q[1] | q[2] << 8;
        return q + 3;
    case OP_LONG1: {
        size_t n = q[1];
        if (n > 8 || n > max_long)
            return NULL;
        uint64_t u;
        memcpy(&u, q + 2, 8); /* (16 bytes there: the ones past the int masked off) */
        u = GUINT64_FROM_LE(u);
        if (G_UNLIKELY(n == 0)) {
            u = 0;
        } else {
            /* the n bytes, their top bit extended: (u ^ m) - m with m that bit */
            unsigned bits = 8 * (unsigned)n;
            uint64_t m = (uint64_t)1 << (bits - 1);
            u = ((u & (~(uint64_t)0 >> (64 - bits))) ^ m) - m;
        }
        *i = (int64_t)u;
        return q + 2 + n;
    }
    default:
        return NULL;
    }
}

/* The memo get at @p (at least 10 bytes there) of a str set before the dict whose record key
 * is known (key_tag()), the @pairs-th key of the dict (@slots: the keys met): its record key in
 * *@key; past it, or NULL for anything else. */
static inline const guint8 *
memo_key(const guint8 *p, FsimPickleValue *const *memo, size_t memo_base, size_t pairs,
         uint64_t slots, int *key)
{
    size_t index;
    const guint8 *q;
    FsimPickleValue *v;
    if (p[0] == 'h') {
        index = p[1];
        q = p + 2;
    } else if (p[0] == 'j') {
        index = (size_t)p[1] | (size_t)p[2] << 8 | (size_t)p[3] << 16 | (size_t)p[4] << 24;
        q = p + 5;
    } else {
        return NULL;
    }
    if (index >= memo_base || (v = memo[index]) == NULL || v->type != FSIM_PICKLE_STR ||
        v->height == 0)
        return NULL;
    *key = (int)v->height - 2;
    if (pairs == 0 ? *key != 0 : *key >= 0 && slot_of(slots, *key) != 0)
        return NULL; /* not a record, or a key set twice */
    return q;
}

/* Keeps the @pairs-th key (@width bytes, little-endian in @word), record key @key, in the
 * template, after its first @pairs (this record's). */
static inline void
template_keep(KeyTemplate *t, size_t pairs, uint64_t word, size_t width, int key)
{
    uint64_t mask = width == 2 ? 0xffffu : 0xffffffffffu;
    t->bytes[pairs] = word & mask;
    t->mask[pairs] = mask;
    t->width[pairs] = (uint8_t)width;
    t->key[pairs] = (int8_t)key;
    t->n = pairs + 1;
}

/* The memo get at @q, a value of record key @key (-1: another key): the value, or NULL when it
 * is not one set before the dict, or a record, or one that cannot take more references. */
static inline FsimPickleValue *
memo_value(const guint8 *q, FsimPickleValue *const *memo, size_t memo_base)
{
    size_t index = q[0] == 'h'
                       ? q[1]
                       : (size_t)q[1] | (size_t)q[2] << 8 | (size_t)q[3] << 16 | (size_t)q[4] << 24;
    FsimPickleValue *v;
    if (index >= memo_base || (v = memo[index]) == NULL ||
        (v->flags & (VALUE_RECORD | VALUE_HAS_RECORD)) || v->refs >= UINT32_MAX - 8)
        return NULL;
    v->flags |= VALUE_SEALED; /* pushed a second time, as memo_get() does */
    return v;
}

/* Puts scan_pairs_fast()'s state back into @s. */
static inline void
put_back(Scan *s, const guint8 *p, size_t pairs, uint64_t nodes, uint32_t height, uint64_t slots,
         size_t n_refs, size_t n_scalars)
{
    s->p = p;
    s->pairs = pairs;
    s->nodes = nodes;
    s->height = height;
    s->slots = slots;
    s->n_refs = n_refs;
    s->n_scalars = n_scalars;
}

/* The pairs of the dict read without a call (most of them: a key that is a memo get of a str
 * known as a key, a value that is an int or a memo get; a list or a new str read out of line),
 * from s->p on: their state kept in locals, put back in @s when a pair of another form (or the
 * dict's end) is met, at s->p.  -1 on an error. */
static int
scan_pairs_fast(Scan *s)
{
    Loader *l = s->l;
    FsimPickleValue *const *memo = l->memo; /* (reloaded after a MEMOIZE: it may move) */
    const size_t memo_base = s->memo_base;
    const size_t max_long = l->max_long_bytes;
    const guint8 *const end = s->end;
    const guint8 *p = s->p;
    size_t pairs = s->pairs;
    uint64_t nodes = s->nodes;
    uint32_t height = s->height;
    uint64_t slots = s->slots;
    size_t n_refs = s->n_refs;
    size_t n_scalars = s->n_scalars;
    KeyTemplate *const t = &l->key_template;
    const uint64_t offset_base = s->at_offset - (uint64_t)(uintptr_t)s->at; /* (offset_of()) */
    static const FsimPickleValue int_head = {.type = FSIM_PICKLE_INT, .refs = 1};
    gboolean on_template = s->on_template;
    size_t known = on_template ? t->n : 0; /* the template's pairs that may match */

    while (end - p >= 16 && pairs < RECORD_MAX_PAIRS) {
        const guint8 *q;
        int key;
        int64_t i;

        /* the key: the template's (the same memo get after the same keys: a key checked in
         * that place before), or a memo get of a str whose record key is known */
        uint64_t word;
        memcpy(&word, p, 8); /* (16 bytes there) */
        word = GUINT64_FROM_LE(word);
        if (pairs < known && (word & t->mask[pairs]) == t->bytes[pairs]) {
            key = t->key[pairs];
            q = p + t->width[pairs];
        } else {
            if ((q = memo_key(p, memo, memo_base, pairs, slots, &key)) == NULL)
                break;
            if (on_template && pairs < KEY_TEMPLATE_PAIRS) {
                /* the template's first pairs are this record's: this one follows them */
                template_keep(t, pairs, word, (size_t)(q - p), key);
                known = 0; /* (the pairs after it are not known yet) */
            } else {
                on_template = FALSE;
            }
        }
        /* the value: an int, a memo get of a value set before the dict, a list or a new str */
        const guint8 *const op_at = q;
        if ((q = fast_int(op_at, max_long, &i)) != NULL) {
            nodes++;
            if (key >= 0) {
                FsimPickleValue *scalar = &s->scalars[n_scalars];
                memcpy(scalar, &int_head, offsetof(FsimPickleValue, offset)); /* (one store) */
                scalar->offset = offset_base + (uint64_t)(uintptr_t)op_at;
                scalar->u.i = i;
                slots = slot_set(slots, key, (unsigned)(0x80u | n_scalars++));
            }
        } else if (op_at[0] == 'h' || op_at[0] == 'j') {
            FsimPickleValue *v = memo_value(op_at, memo, memo_base);
            if (v == NULL)
                break;
            q = op_at + (op_at[0] == 'h' ? 2 : 5);
            nodes += value_nodes(v);
            if (value_is_container(v))
                height = MAX(height, v->height + 1u);
            if (key >= 0) {
                value_ref(v);
                s->refs[n_refs++] = v;
                slots = slot_set(slots, key, (unsigned)n_refs);
            }
        } else if (op_at[0] == ']' || op_at[0] == OP_SHORT_BINUNICODE) {
            /* out of line, the state put back around the call (the key counted) */
            put_back(s, op_at + 1, pairs, nodes + 1, height, slots, n_refs, n_scalars);
            int done = scan_value_at(s, key, op_at);
            if (done < 0)
                return -1;
            if (done == 0)
                break; /* (the state put back below: the generic path reads the pair again) */
            memo = l->memo;
            q = s->p;
            nodes = s->nodes - 1;
            height = s->height;
            slots = s->slots;
            n_refs = s->n_refs;
            n_scalars = s->n_scalars;
        } else {
            break;
        }
        nodes++; /* the key */
        pairs++;
        p = q;
    }
    put_back(s, p, pairs, nodes, height, slots, n_refs, n_scalars);
    s->on_template = on_template;
    return 1;
}

/* The dict's entries, up to its SETITEMS: the common pairs by scan_pairs_fast(), the others by
 * scan_pair(). */
static int
scan_dict(Scan *s)
{
    const guint8 *p = s->at + 1;

    /* the dict's own MEMOIZE (at memo_base, checked by the caller), then MARK */
    if (s->end - p < 2 || p[0] != OP_MEMOIZE || p[1] != '(')
        return 0;
    s->p = p + 2;
    for (;; s->pairs++) {
        if (scan_pairs_fast(s) < 0)
            return -1;
        int done = scan_pair(s);
        if (done == 2)
            break;
        if (done <= 0)
            return done;
        s->on_template = FALSE; /* a pair the template does not have */
    }
    s->p++;
    return 1;
}

/* The record in place of the dict, as SETITEMS would have checked the dict; memoized. */
static gboolean
commit_record(Scan *s)
{
    Loader *l = s->l;
    l->op_offset = offset_of(s, s->p - 1); /* the SETITEMS */
    l->op = 'u';
    if (s->height > l->max_depth)
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT, "%s: containers nested deeper than %u",
                         op_name(l), l->max_depth);
    if (s->nodes > max_nodes(l))
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT, "%s: too many values for a full walk",
                         op_name(l));
    size_t words = s->n_refs + s->n_scalars * RECORD_SCALAR_WORDS + RECORD_HEADER_WORDS;
    FsimPickleValue **block = heap_alloc(l->heap, words * sizeof(void *));
    if (block == NULL)
        return over_budget(l);
    memcpy(block, s->refs, s->n_refs * sizeof(void *));
    for (size_t k = 0; k < s->n_scalars; k++) /* (each scalar's first words: record_scalar()) */
        memcpy(block + s->n_refs + k * RECORD_SCALAR_WORDS, &s->scalars[k],
               RECORD_SCALAR_WORDS * sizeof(void *));
    uint64_t *header = (uint64_t *)(void *)(block + words - RECORD_HEADER_WORDS);
    header[0] = s->slots; /* (byte k, bits 8k to 8k + 7: record key k's) */
    header[1] = (uint64_t)s->n_refs << 32 | s->pairs;
    l->op_offset = s->at_offset;
    l->op = '}';
    FsimPickleValue *record = new_value(l, FSIM_PICKLE_DICT);
    if (record == NULL) {
        heap_free(l->heap, block, words * sizeof(void *));
        return over_budget(l);
    }
    record->flags = VALUE_RECORD | VALUE_SEALED;
    record->height = (uint16_t)s->height;
    record->u.c.items = block;
    record->u.c.cap = (uint32_t)words;
    record->u.c.nodes = s->nodes;
    s->n_refs = 0; /* the record holds them now */
    l->in.p = s->p;
    if (!push(l, record) || !memo_put_fresh(l, s->memo_base))
        return FALSE;
    l->records++;
    return TRUE;
}

int
run_record(Loader *l)
{
    Scan s;
    /* (the limits the generic path would meet first: MARKs, the stack, which it fills with up
     * to 64 items and a list's 320 (LIST_CACHE_ITEMS; longer runs are pushed here too) */
    if (l->in.stream != NULL || l->in.end - l->in.start >= UINT32_MAX ||
        l->n_marks + 2 > l->max_depth || l->stack_len + 1024 > l->max_stack ||
        l->memo_count >= l->memo_bound || l->memo_count > l->memo_cap ||
        (l->memo_count < l->memo_cap && l->memo[l->memo_count]))
        return 0;
    s.l = l;
    s.at = l->in.p;
    s.end = l->in.end;
    s.at_offset = input_offset(&l->in);
    s.memo_base = l->memo_count;
    s.puts = 0;
    s.pairs = 0;
    s.slots = 0;
    s.height = 1;
    s.nodes = 1;
    s.n_refs = 0;
    s.n_scalars = 0;
    s.on_template = TRUE;
    if (l->key_template.generation != l->memo_generation) {
        /* a memo entry replaced: the template's keys may name other values now */
        l->key_template.n = 0;
        l->key_template.generation = l->memo_generation;
    }
    int done = scan_dict(&s);
    if (done > 0 && commit_record(&s))
        return 1;
    rollback(&s);
    l->in.p = s.at;
    return done == 0 ? 0 : -1;
}
