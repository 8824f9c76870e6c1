/* SPDX-License-Identifier: MIT */
/*
 * fragsim's safe unpickler: the opcode machine.
 *
 * A loop over opcodes with an explicit stack, a MARK stack and a memo, shaped like CPython's
 * Modules/_pickle.c (whose stack/fence split it copies, so POP and underflow behave the same),
 * minus everything that imports or calls.  The opcode reference is Lib/pickletools.py; opcode
 * names in messages are its names.  Each opcode is one small handler in a table indexed by the
 * opcode byte; the protocol 0 text opcodes are in text.c, the values they make in value.c,
 * the failure messages in errors.c.
 *
 * Memory.  Values are reference counted (value.h): what POP, POP_MARK and replaced memo entries
 * drop is freed at once, so memory follows the live object graph (the stack, the memo and what
 * they reach), not the input.  The input is read through a window (input.c), never whole.  All
 * of it is counted against a budget.  Declared lengths are checked against the remaining input
 * (in memory) or the budget (streams) before anything is allocated.
 *
 * Cycles.  A memo GET can push a container that is still being filled, and APPEND can then put
 * it into itself.  Instead of finding cycles, containers are *sealed* when they are stored into
 * another container or pushed a second time (memo GET, DUP), and a sealed container cannot be
 * modified.  Why that forbids every cycle: the insertion that closes a cycle adds an edge
 * X -> Y where Y already reaches X.  If X == Y, X is on the stack twice, so it was sealed.
 * Otherwise X is reachable from Y, so X was stored into some container and is sealed.  Heights
 * (for the depth limit) and node counts (for the walk-size limit) are exact for the same reason:
 * an unsealed container is inside nothing, so changing them never has to propagate upwards.
 */
#include "machine.h"

#include <glib.h>

#include <string.h>

#include "fragsim/trace.h"

#define DEFAULT_MAX_DEPTH      256
#define DEFAULT_MAX_MEMO       ((gsize)1 << 24)
#define DEFAULT_MAX_STACK      ((gsize)1 << 24)
#define DEFAULT_MAX_LONG_BYTES ((gsize)1024)

/* ---- Errors -------------------------------------------------------------------------------- */

gboolean
over_budget(Loader *l)
{
    return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                     "%s: needs more than the memory budget of %" G_GSIZE_FORMAT
                     " MiB (--max-memory)",
                     op_name(l), (gsize)(l->heap->budget >> 20));
}

gboolean
input_fail(Loader *l, InputStatus status, size_t n)
{
    switch (status) {
    case INPUT_EOF:
        return load_fail(l, FSIM_TRACE_ERROR_TRUNCATED,
                         "%s: needs %" G_GSIZE_FORMAT " more bytes, the input has %" G_GSIZE_FORMAT,
                         op_name(l), (gsize)n, (gsize)(l->in.end - l->in.p));
    case INPUT_ERROR:
        g_set_error(l->error, FSIM_ERROR, FSIM_ERROR_IO, "byte %" G_GUINT64_FORMAT ": %s",
                    input_offset(&l->in), l->in.io_error->message);
        return FALSE;
    case INPUT_BUDGET:
        return over_budget(l);
    case INPUT_LIMIT:
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                         "larger than %" G_GUINT64_FORMAT " bytes once decompressed",
                         l->in.max_input);
    case INPUT_OK:
        break;
    }
    return TRUE;
}

static inline gboolean
need(Loader *l, size_t n)
{
    InputStatus s = input_need(&l->in, n);
    return G_LIKELY(s == INPUT_OK) ? TRUE : input_fail(l, s, n);
}

/* The width in bytes of each opcode's little-endian argument (pickletools' uint1, uint2, int4,
 * uint4 and uint8 arguments): a length, an integer or a memo index. */
/* clang-format off */
static const guint8 arg_widths[256] = {
    ['K'] = 1, ['M'] = 2, ['J'] = 4, [0x8a] = 1, [0x8b] = 4,           /* BININT*, LONG1, LONG4 */
    ['h'] = 1, ['j'] = 4, ['q'] = 1, ['r'] = 4,                       /* BINGET, BINPUT */
    [0x8c] = 1, ['X'] = 4, [0x8d] = 8, ['U'] = 1, ['T'] = 4,          /* str */
    ['C'] = 1, ['B'] = 4, [0x8e] = 8, [0x96] = 8,                     /* bytes */
    [0x95] = 8,                                                       /* FRAME */
};
/* clang-format on */

static inline uint32_t
read_le32(const guint8 *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads the opcode's argument (arg_widths) into *@out. */
static inline gboolean
read_arg(Loader *l, uint64_t *out)
{
    size_t width = arg_widths[l->op];
    if (!need(l, width))
        return FALSE;
    const guint8 *p = l->in.p;
    l->in.p += width;
    if (G_LIKELY(width == 1))
        *out = p[0];
    else if (width == 2)
        *out = (uint32_t)p[0] | (uint32_t)p[1] << 8;
    else if (width == 4)
        *out = read_le32(p);
    else
        *out = read_le32(p) | (uint64_t)read_le32(p + 4) << 32;
    return TRUE;
}

/* ---- The stack ----------------------------------------------------------------------------- */

G_GNUC_NO_INLINE gboolean
grow_stack(Loader *l)
{
    if (l->stack_len >= l->max_stack)
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                         "%s: more than %" G_GSIZE_FORMAT " values on the stack", op_name(l),
                         (gsize)l->max_stack);
    size_t cap = MIN(MAX(l->stack_cap * 2, (size_t)256), l->max_stack);
    if (!heap_charge(l->heap, (gssize)((cap - l->stack_cap) * sizeof(void *))))
        return over_budget(l);
    l->stack = g_renew(FsimPickleValue *, l->stack, cap);
    l->stack_cap = cap;
    return TRUE;
}

static gboolean
underflow(Loader *l)
{
    return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: unpickling stack underflow", op_name(l));
}

/* Drops the stack's references to stack[base..stack_len). */
static void
stack_drop(Loader *l, size_t base)
{
    while (l->stack_len > base)
        value_unref(l->heap, l->stack[--l->stack_len]);
}

/* Pops the innermost MARK; *base is the stack index of the first item above it.  The items stay
 * in place (callers consume them, then set stack_len = *base). */
static gboolean
pop_mark(Loader *l, size_t *base)
{
    if (l->n_marks == 0)
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: could not find MARK", op_name(l));
    *base = l->marks[--l->n_marks];
    l->fence = l->n_marks > 0 ? l->marks[l->n_marks - 1] : 0;
    return TRUE;
}

/* ---- Containers ---------------------------------------------------------------------------- */

static G_GNUC_NO_INLINE gboolean
too_deep(Loader *l)
{
    return load_fail(l, FSIM_TRACE_ERROR_LIMIT, "%s: containers nested deeper than %u", op_name(l),
                     l->max_depth);
}

static G_GNUC_NO_INLINE gboolean
too_many_nodes(Loader *l)
{
    /* Sharing makes a walk longer than the input: [x, x] nested 64 deep is 2^64 values. */
    return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                     "%s: a full walk would visit more than %" G_GUINT64_FORMAT
                     " values (shared values count once per reference)",
                     op_name(l), max_nodes(l));
}

/* Moves @n values (and the stack's references to them) from @items into the container @target,
 * after its items and room made by value_reserve_items(): seals the containers among them,
 * raises @target's height and adds to its node count. */
static inline gboolean
adopt(Loader *l, FsimPickleValue *target, FsimPickleValue *const *items, size_t n)
{
    uint32_t height = target->height;
    uint64_t limit = max_nodes(l);
    const uint64_t room0 = limit - MIN(target->u.c.nodes, limit); /* nodes the walk may add */
    uint64_t room = room0;
    unsigned flags = 0; /* the containers' among the items, or'd */
    for (size_t i = 0; i < n; i++) {
        FsimPickleValue *item = items[i];
        uint64_t add = 1;
        if (value_is_container(item)) {
            flags |= item->flags;
            item->flags |= VALUE_SEALED;
            add = item->u.c.nodes;
            if (item->height >= height) {
                if (G_UNLIKELY(item->height >= l->max_depth))
                    return too_deep(l);
                height = item->height + 1u;
            }
        }
        if (G_UNLIKELY(add > room))
            return too_many_nodes(l);
        room -= add;
    }
    if (flags & (VALUE_RECORD | VALUE_HAS_RECORD))
        target->flags |= VALUE_HAS_RECORD;
    target->height = (uint16_t)height;
    target->u.c.nodes += room0 - room;
    size_t used = target->type == FSIM_PICKLE_DICT ? 2 * (size_t)target->u.c.len : target->u.c.len;
    if (n > 0)
        memcpy(target->u.c.items + used, items, n * sizeof(void *));
    target->u.c.len += (uint32_t)(target->type == FSIM_PICKLE_DICT ? n / 2 : n);
    return TRUE;
}

static gboolean
reserve_items(Loader *l, FsimPickleValue *c, size_t extra)
{
    size_t used = c->type == FSIM_PICKLE_DICT ? 2 * (size_t)c->u.c.len : c->u.c.len;
    if (extra > UINT32_MAX - used)
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT, "%s: more than %u items in one container",
                         op_name(l), UINT32_MAX / 2);
    return value_reserve_items(l->heap, c, extra) || over_budget(l);
}

static gboolean
check_modifiable(Loader *l, FsimPickleValue *target, FsimPickleType want)
{
    if (target->type != want)
        return load_fail(l, FSIM_TRACE_ERROR_TYPE, "%s: the target is a %s, not a %s", op_name(l),
                         fsim_pickle_type_name(target->type), fsim_pickle_type_name(want));
    if (G_UNLIKELY(target->flags & VALUE_RECORD))
        return record_modified(l);
    if (target->flags & VALUE_SEALED)
        return load_fail(l, FSIM_TRACE_ERROR_FORBIDDEN,
                         "%s: recursive structure (the %s was already shared or stored)",
                         op_name(l), fsim_pickle_type_name(target->type));
    return TRUE;
}

gboolean
append_items(Loader *l, size_t base)
{
    if (base == 0 || base - 1 < l->fence)
        return underflow(l);
    FsimPickleValue *list = l->stack[base - 1];
    if (!check_modifiable(l, list, FSIM_PICKLE_LIST))
        return FALSE;
    size_t n = l->stack_len - base;
    if (!reserve_items(l, list, n) || !adopt(l, list, l->stack + base, n))
        return FALSE;
    l->stack_len = base;
    return TRUE;
}

/* SETITEM, SETITEMS: sets key/value pairs stack[base..stack_len) in the dict at
 * stack[base - 1]. */
/* SETITEMS into a fresh dict (the common case: `EMPTY_DICT MEMOIZE MARK k v k v ... SETITEMS`):
 * one pass over the pairs, into an array of the exact size.  FALSE, changing nothing that
 * matters, wherever the general path has something to check or report (then it runs: it seals
 * the same items, or the load fails). */
static inline gboolean
setitems_fresh(Loader *l, FsimPickleValue *dict, FsimPickleValue *const *items, size_t n)
{
    uint32_t height = 1;
    uint64_t nodes = 1;
    if (dict->type != FSIM_PICKLE_DICT || (dict->flags & VALUE_SEALED) || dict->u.c.len != 0 ||
        dict->u.c.items != NULL || n == 0 || n % 2 != 0 || n > 64)
        return FALSE;
    FsimPickleValue **array = heap_alloc(l->heap, n * sizeof(void *));
    if (array == NULL)
        return FALSE;
    for (size_t i = 0; i < n; i++) {
        FsimPickleValue *item = items[i];
        array[i] = item;
        if (!value_is_container(item)) {
            nodes++;
            continue;
        }
        if ((i % 2 == 0 && item->type != FSIM_PICKLE_TUPLE) || item->height >= l->max_depth) {
            heap_free(l->heap, array, n * sizeof(void *));
            return FALSE;
        }
        item->flags |= VALUE_SEALED;
        if (item->flags & (VALUE_RECORD | VALUE_HAS_RECORD))
            dict->flags |= VALUE_HAS_RECORD;
        height = MAX(height, item->height + 1u);
        nodes += item->u.c.nodes;
    }
    if (nodes > max_nodes(l)) {
        heap_free(l->heap, array, n * sizeof(void *));
        return FALSE;
    }
    dict->u.c.items = array;
    dict->u.c.cap = (uint32_t)n;
    dict->u.c.len = (uint32_t)(n / 2);
    dict->height = (uint16_t)height;
    dict->u.c.nodes = nodes;
    return TRUE;
}

static gboolean
do_setitems(Loader *l, size_t base)
{
    if (base == 0 || base - 1 < l->fence)
        return underflow(l);
    FsimPickleValue *dict = l->stack[base - 1];
    size_t n = l->stack_len - base;
    if (setitems_fresh(l, dict, l->stack + base, n)) {
        l->stack_len = base;
        return TRUE;
    }
    if (n % 2 != 0)
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: odd number of items", op_name(l));
    if (!check_modifiable(l, dict, FSIM_PICKLE_DICT))
        return FALSE;
    for (size_t i = 0; i < n; i += 2) {
        FsimPickleValue *key = l->stack[base + i];
        if (key->type == FSIM_PICKLE_LIST || key->type == FSIM_PICKLE_DICT)
            return load_fail(l, FSIM_TRACE_ERROR_TYPE, "%s: unhashable dict key of type %s",
                             op_name(l), fsim_pickle_type_name(key->type));
    }
    if (!reserve_items(l, dict, n) || !adopt(l, dict, l->stack + base, n))
        return FALSE;
    l->stack_len = base;
    return TRUE;
}

/* TUPLE, TUPLE1-3, LIST, DICT: a new container from stack[base..stack_len), pushed in their
 * place. */
static gboolean
build_container(Loader *l, FsimPickleType type, size_t base)
{
    FsimPickleValue *c = new_value(l, type);
    size_t n = l->stack_len - base;
    if (c == NULL)
        return over_budget(l);
    if (type == FSIM_PICKLE_DICT) {
        if (!push(l, c))
            return FALSE;
        /* do_setitems wants the dict below the items: move it there. */
        memmove(l->stack + base + 1, l->stack + base, n * sizeof(void *));
        l->stack[base] = c;
        return do_setitems(l, base + 1);
    }
    if (!reserve_items(l, c, n) || !adopt(l, c, l->stack + base, n)) {
        value_ref(c);
        value_unref(l->heap, c);
        return FALSE;
    }
    l->stack_len = base;
    return push(l, c);
}

/* ---- The memo ------------------------------------------------------------------------------ */

gboolean
memo_put(Loader *l, uint64_t index)
{
    if (l->stack_len <= l->fence)
        return underflow(l);
    if (index >= l->memo_bound)
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                         "%s: memo index %" G_GUINT64_FORMAT
                         " beyond the limit of %" G_GSIZE_FORMAT,
                         op_name(l), index, (gsize)l->memo_bound);
    if (index >= l->memo_cap) {
        size_t cap = MIN(MAX(MAX(l->memo_cap * 2, (size_t)index + 1), (size_t)1024), l->memo_bound);
        if (!heap_charge(l->heap, (gssize)((cap - l->memo_cap) * sizeof(void *))))
            return over_budget(l);
        l->memo = g_renew(FsimPickleValue *, l->memo, cap);
        memset(l->memo + l->memo_cap, 0, (cap - l->memo_cap) * sizeof(void *));
        l->memo_cap = cap;
    }
    FsimPickleValue *v = l->stack[l->stack_len - 1];
    FsimPickleValue *old = l->memo[index];
    value_ref(v);
    l->memo[index] = v;
    if (old == NULL) {
        l->memo_count++;
    } else {
        l->memo_generation++; /* the lists cached from this entry are stale (lists.c) */
        value_unref(l->heap, old);
    }
    return TRUE;
}

/* Pushes a second reference to @v (memo GET, DUP): from now on it is shared, so it must not
 * change. */
static gboolean
push_shared(Loader *l, FsimPickleValue *v)
{
    if (G_UNLIKELY(v->refs == UINT32_MAX))
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT, "%s: more than %u references to one value",
                         op_name(l), UINT32_MAX);
    if (G_UNLIKELY(v->flags & (VALUE_RECORD | VALUE_HAS_RECORD)))
        return record_shared(l);
    v->flags |= VALUE_SEALED;
    return push(l, v);
}

gboolean
memo_get(Loader *l, uint64_t index)
{
    if (G_UNLIKELY(index >= l->memo_cap || l->memo[index] == NULL))
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX,
                         "%s: memo entry %" G_GUINT64_FORMAT " was never set", op_name(l), index);
    return push_shared(l, l->memo[index]);
}

/* ---- Integers ------------------------------------------------------------------------------ */

static gboolean
push_int(Loader *l, int64_t i)
{
    FsimPickleValue *v = new_value(l, FSIM_PICKLE_INT);
    if (v != NULL)
        v->u.i = i;
    return push(l, v);
}

/* ---- Opcodes with a binary argument -------------------------------------------------------- */

/* Reads the opcode's length argument; in memory, checks that the data it announces is there (a
 * stream's length is checked as the data is read).  BINSTRING's and LONG4's length is signed, and
 * must not be negative. */
static inline gboolean
read_length(Loader *l, uint64_t *len)
{
    uint64_t n = 0;
    uint64_t remaining;
    if (!read_arg(l, &n))
        return FALSE;
    if (G_UNLIKELY(n & 0x80000000u) && (l->op == 'T' || l->op == 0x8b))
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: negative byte count", op_name(l));
    if (input_remaining(&l->in, &remaining) && n > remaining)
        return load_fail(l, FSIM_TRACE_ERROR_TRUNCATED,
                         "%s: declares %" G_GUINT64_FORMAT
                         " bytes, the input has %" G_GUINT64_FORMAT,
                         op_name(l), n, remaining);
    *len = n;
    return TRUE;
}

gboolean
bytes_hold(const guint8 *p, size_t len, const char *needle, size_t n)
{
    const guint8 *last = p + (len - n); /* the last place it can begin */

    while (p <= last) {
        p = memchr(p, (guint8)needle[0], (size_t)(last - p) + 1);
        if (p == NULL)
            return FALSE;
        if (p[n - 1] == (guint8)needle[n - 1] && memcmp(p, needle, n) == 0)
            return TRUE;
        p++;
    }
    return FALSE;
}

/* A str (SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, SHORT_BINSTRING, BINSTRING) or bytes
 * (SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8) of a declared length: allocated first (within
 * the budget), then read. */
static gboolean
op_blob(Loader *l)
{
    FsimPickleType type =
        l->op == 'C' || l->op == 'B' || l->op >= 0x8e ? FSIM_PICKLE_BYTES : FSIM_PICKLE_STR;
    uint64_t len = 0;
    if (!read_length(l, &len))
        return FALSE;
    if (len > G_MAXSIZE / 2)
        return over_budget(l);
    FsimPickleValue *v = value_new_blob(l->heap, type, l->op_offset, NULL, (size_t)len);
    if (v == NULL)
        return over_budget(l);
    size_t got = 0;
    InputStatus s = input_read(&l->in, v->u.s.data, (size_t)len, &got);
    if (s != INPUT_OK) {
        value_ref(v);
        value_unref(l->heap, v);
        if (s == INPUT_EOF)
            return load_fail(l, FSIM_TRACE_ERROR_TRUNCATED,
                             "%s: declares %" G_GUINT64_FORMAT
                             " bytes, the input has %" G_GSIZE_FORMAT,
                             op_name(l), len, (gsize)got);
        return input_fail(l, s, (size_t)len);
    }
    if (type == FSIM_PICKLE_STR)
        watch_str_check(l, (const guint8 *)v->u.s.data, (size_t)len);
    return push(l, v);
}

/* LONG1, LONG4. */
static gboolean
op_long(Loader *l)
{
    uint64_t len = 0;
    if (!read_length(l, &len))
        return FALSE;
    if (len > l->max_long_bytes)
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                         "%s: a %" G_GUINT64_FORMAT
                         "-byte integer, above the limit of %" G_GSIZE_FORMAT,
                         op_name(l), len, (gsize)l->max_long_bytes);
    if (!need(l, (size_t)len))
        return FALSE;
    FsimPickleValue *v = new_long(l, l->in.p, (size_t)len);
    l->in.p += len;
    return push(l, v);
}

/* BININT1, the most frequent, without a look at arg_widths. */
static gboolean
op_binint1(Loader *l)
{
    return need(l, 1) && push_int(l, *l->in.p++);
}

/* BININT2 (unsigned), BININT (signed). */
static gboolean
op_binint(Loader *l)
{
    uint64_t u = 0;
    return read_arg(l, &u) &&
           push_int(l, (u & 0x80000000u) ? (int64_t)u - ((int64_t)1 << 32) : (int64_t)u);
}

static gboolean
op_binfloat(Loader *l)
{
    if (!need(l, 8))
        return FALSE;
    uint64_t bits = 0;
    for (int k = 0; k < 8; k++)
        bits = bits << 8 | l->in.p[k];
    l->in.p += 8;
    FsimPickleValue *v = new_value(l, FSIM_PICKLE_FLOAT);
    if (v != NULL)
        memcpy(&v->u.d, &bits, sizeof(double));
    return push(l, v);
}

static gboolean
op_bool(Loader *l)
{
    FsimPickleValue *v = new_value(l, FSIM_PICKLE_BOOL);
    if (v != NULL)
        v->u.b = l->op == 0x88; /* NEWTRUE */
    return push(l, v);
}

static gboolean
op_none(Loader *l)
{
    return push(l, new_value(l, FSIM_PICKLE_NONE));
}

/* FRAME: a length prefix for buffered readers; checked in memory, skipped on a stream. */
static gboolean
op_frame(Loader *l)
{
    uint64_t n = 0;
    return read_length(l, &n);
}

static gboolean
op_proto(Loader *l)
{
    if (!need(l, 1))
        return FALSE;
    guint8 proto = *l->in.p++;
    if (proto > 5)
        return load_fail(l, FSIM_TRACE_ERROR_HEADER, "PROTO: unsupported pickle protocol %u",
                         proto);
    return TRUE;
}

/* ---- Memo and stack opcodes ---------------------------------------------------------------- */

gboolean
memo_access(Loader *l, uint64_t index)
{
    return l->op == 'h' || l->op == 'j' || l->op == 'g' ? memo_get(l, index) : memo_put(l, index);
}

/* BINGET, LONG_BINGET, BINPUT, LONG_BINPUT. */
static gboolean
op_memo(Loader *l)
{
    uint64_t index = 0;
    return read_arg(l, &index) && memo_access(l, index);
}

static gboolean
op_memoize(Loader *l)
{
    return memo_put_fresh(l, l->memo_count);
}

static gboolean
op_mark(Loader *l)
{
    if (l->n_marks >= l->max_depth)
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT, "MARK: more than %u MARKs open", l->max_depth);
    if (l->n_marks == l->marks_cap) {
        l->marks_cap = MAX(l->marks_cap * 2, (size_t)16);
        l->marks = g_renew(size_t, l->marks, l->marks_cap);
    }
    l->marks[l->n_marks++] = l->stack_len;
    l->fence = l->stack_len;
    return TRUE;
}

static gboolean
op_pop(Loader *l)
{
    /* As CPython: POP on an empty frame discards the MARK instead. */
    if (l->n_marks > 0 && l->marks[l->n_marks - 1] == l->stack_len) {
        size_t base = 0;
        return pop_mark(l, &base);
    }
    if (G_UNLIKELY(l->stack_len <= l->fence))
        return underflow(l);
    stack_drop(l, l->stack_len - 1);
    return TRUE;
}

static gboolean
op_pop_mark(Loader *l)
{
    size_t base = 0;
    if (!pop_mark(l, &base))
        return FALSE;
    stack_drop(l, base);
    return TRUE;
}

static gboolean
op_dup(Loader *l)
{
    if (l->stack_len <= l->fence)
        return underflow(l);
    return push_shared(l, l->stack[l->stack_len - 1]);
}

/* ---- Container opcodes --------------------------------------------------------------------- */

static gboolean
op_empty(Loader *l)
{
    FsimPickleType type = l->op == '}'   ? FSIM_PICKLE_DICT
                          : l->op == ']' ? FSIM_PICKLE_LIST
                                         : FSIM_PICKLE_TUPLE;
    return push(l, new_value(l, type));
}

/* SETITEMS, APPENDS: the items above the innermost MARK into the dict or list below them;
 * SETITEM, APPEND: the top pair or item. */
static gboolean
op_add_items(Loader *l)
{
    gboolean dict = l->op == 'u' || l->op == 's';
    size_t base = 0;
    if (l->op == 'u' || l->op == 'e') {
        if (!pop_mark(l, &base))
            return FALSE;
    } else {
        size_t n = dict ? 2 : 1;
        if (l->stack_len < n || l->stack_len - n <= l->fence)
            return underflow(l);
        base = l->stack_len - n;
    }
    return dict ? do_setitems(l, base) : append_items(l, base);
}

/* TUPLE, LIST, DICT: the items above the innermost MARK. */
static gboolean
op_build_marked(Loader *l)
{
    FsimPickleType type = l->op == 't'   ? FSIM_PICKLE_TUPLE
                          : l->op == 'l' ? FSIM_PICKLE_LIST
                                         : FSIM_PICKLE_DICT;
    size_t base = 0;
    return pop_mark(l, &base) && build_container(l, type, base);
}

static gboolean
op_tuple_n(Loader *l)
{
    size_t n = (size_t)(l->op - 0x84); /* TUPLE1 is 0x85 */
    if (l->stack_len - l->fence < n)
        return underflow(l);
    return build_container(l, FSIM_PICKLE_TUPLE, l->stack_len - n);
}

/* ---- Refused opcodes ----------------------------------------------------------------------- */

/* GLOBAL, STACK_GLOBAL; REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX; EXT1, EXT2, EXT4; PERSID,
 * BINPERSID; NEXT_BUFFER, READONLY_BUFFER. */
static gboolean
op_refused(Loader *l)
{
    guint8 op = l->op;
    const char *why = op == 'c' || op == 0x93    ? "it would import a module attribute"
                      : op >= 0x82 && op <= 0x84 ? "it would look up the copyreg extension registry"
                      : op == 'P' || op == 'Q'   ? "persistent ids need a persistent_load callback"
                      : op == 0x97 || op == 0x98 ? "out-of-band buffers are not supported"
                                                 : "it would call a Python object";
    return load_fail(l, FSIM_TRACE_ERROR_FORBIDDEN, "%s: opcode refused (%s)", op_name(l), why);
}

static gboolean
op_set(Loader *l)
{
    return load_fail(l, FSIM_TRACE_ERROR_TYPE, "%s: sets are not supported", op_name(l));
}

typedef gboolean (*OpHandler)(Loader *l);

/* clang-format off */
static const OpHandler handlers[256] = {
    ['h'] = op_memo, ['j'] = op_memo, ['g'] = load_text, [0x94] = op_memoize,
    ['q'] = op_memo, ['r'] = op_memo, ['p'] = load_text,
    ['('] = op_mark, ['0'] = op_pop, ['1'] = op_pop_mark, ['2'] = op_dup,
    ['}'] = op_empty, [']'] = op_empty, [')'] = op_empty,
    ['u'] = op_add_items, ['s'] = op_add_items, ['e'] = op_add_items, ['a'] = op_add_items,
    ['t'] = op_build_marked, ['l'] = op_build_marked, ['d'] = op_build_marked,
    [0x85] = op_tuple_n, [0x86] = op_tuple_n, [0x87] = op_tuple_n,
    [0x8c] = op_blob, ['X'] = op_blob, [0x8d] = op_blob, ['U'] = op_blob, ['T'] = op_blob,
    ['C'] = op_blob, ['B'] = op_blob, [0x8e] = op_blob, [0x96] = op_blob,
    ['V'] = load_text, ['S'] = load_text,
    ['K'] = op_binint1, ['M'] = op_binint, ['J'] = op_binint, [0x8a] = op_long, [0x8b] = op_long,
    ['I'] = load_text, ['L'] = load_text,
    ['G'] = op_binfloat, ['F'] = load_text, [0x88] = op_bool, [0x89] = op_bool,
    ['N'] = op_none, [0x95] = op_frame, [0x80] = op_proto,
    ['c'] = op_refused, [0x93] = op_refused,
    ['R'] = op_refused, ['b'] = op_refused, ['i'] = op_refused, ['o'] = op_refused,
    [0x81] = op_refused, [0x92] = op_refused,
    [0x82] = op_refused, [0x83] = op_refused, [0x84] = op_refused,
    ['P'] = op_refused, ['Q'] = op_refused, [0x97] = op_refused, [0x98] = op_refused,
    [0x8f] = op_set, [0x90] = op_set, [0x91] = op_set,
};
/* clang-format on */

/* ---- The loop ------------------------------------------------------------------------------ */

static gboolean
load_stop(Loader *l, FsimPickleValue **root)
{
    if (l->stack_len == 0)
        return underflow(l);
    if (l->stack_len != 1 || l->n_marks != 0)
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX,
                         "STOP: %" G_GSIZE_FORMAT " values and %" G_GSIZE_FORMAT
                         " MARKs left on the stack",
                         (gsize)l->stack_len - 1, (gsize)l->n_marks);
    /* The stack's reference becomes the pickle's. */
    *root = l->stack[0];
    l->stack_len = 0;
    return TRUE;
}

static gboolean
load_run(Loader *l, FsimPickleValue **root)
{
    for (;;) {
        if (l->in.p < l->in.end) {
            guint8 next = *l->in.p;
            if (next == 'h' || next == 'j') {
                run_memo_gets(l);
            } else if (next == '(' || (next == '}' && l->record_keys != NULL)) {
                int done = next == '(' ? run_memo_list(l) : run_record(l);
                if (done < 0)
                    return FALSE;
                if (done > 0)
                    continue;
            }
        }
        InputStatus s = input_need(&l->in, 1);
        l->op_offset = input_offset(&l->in);
        if (G_UNLIKELY(s != INPUT_OK)) {
            if (s != INPUT_EOF)
                return input_fail(l, s, 1);
            if (l->op_offset == 0) {
                g_set_error_literal(l->error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_EMPTY,
                                    "byte 0: the pickle is empty");
                return FALSE;
            }
            return load_fail(l, FSIM_TRACE_ERROR_TRUNCATED, "the pickle ends without STOP");
        }
        guint8 op = *l->in.p++;
        l->op = op;
        if (op == '.')
            return load_stop(l, root);
        OpHandler handler = handlers[op];
        if (G_UNLIKELY(handler == NULL))
            return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "unknown opcode 0x%02x", op);
        if (G_UNLIKELY(!handler(l)))
            return FALSE;
    }
}

/* Runs the machine over @l->in into @pickle. */
static FsimPickle *
load(Loader *l, FsimPickle *pickle, const FsimPickleLimits *limits, uint64_t memo_bound)
{
    l->heap = &pickle->heap;
    l->max_depth =
        MIN(limits->max_depth != 0 ? limits->max_depth : DEFAULT_MAX_DEPTH, VALUE_MAX_HEIGHT - 1);
    l->max_stack = limits->max_stack != 0 ? limits->max_stack : DEFAULT_MAX_STACK;
    l->max_long_bytes =
        limits->max_long_bytes != 0 ? limits->max_long_bytes : DEFAULT_MAX_LONG_BYTES;
    l->max_nodes = limits->max_nodes;
    l->memo_bound =
        (size_t)MIN(limits->max_memo != 0 ? limits->max_memo : DEFAULT_MAX_MEMO, memo_bound);
    /* Never NULL, so that `stack + base` is defined even for an empty stack. */
    l->stack_cap = MIN(l->max_stack, (size_t)256);
    l->stack = g_new(FsimPickleValue *, l->stack_cap);
    heap_charge(l->heap, (gssize)(l->stack_cap * sizeof(void *)));

    gboolean ok = load_run(l, &pickle->root);
    pickle->input_bytes = input_offset(&l->in);
    pickle->text_strings = l->text_strings;
    pickle->watched_str_seen = l->watched_str_seen;
    pickle->records = l->records;
    list_cache_clear(l);
    /* Values only the memo kept are garbage now; a caller that expects everything to stay
     * alive (expect_memory) frees them with the rest, without a walk over the memo. */
    if (ok && limits->expect_memory == 0) {
        for (size_t i = 0; i < l->memo_cap; i++) {
            /* the values are scattered over the heap: fetch ahead */
            if (i + 8 < l->memo_cap && l->memo[i + 8] != NULL)
                __builtin_prefetch(l->memo[i + 8], 1);
            if (l->memo[i] != NULL)
                value_unref(l->heap, l->memo[i]);
        }
    }
    heap_charge(l->heap, -(gssize)((l->stack_cap + l->memo_cap) * sizeof(void *)));
    g_free(l->stack);
    g_free(l->marks);
    g_free(l->memo);
    input_clear(&l->in);
    if (!ok) {
        fsim_pickle_free(pickle);
        return NULL;
    }
    return pickle;
}

static FsimPickle *
pickle_new(const FsimPickleLimits *limits)
{
    FsimPickle *pickle = g_new0(FsimPickle, 1);
    heap_init(&pickle->heap, limits->max_memory != 0 ? limits->max_memory : fsim_memory_budget());
    return pickle;
}

FsimPickle *
fsim_pickle_load(const guint8 *data, gsize len, const FsimPickleLimits *limits, GError **error)
{
    g_return_val_if_fail(data != NULL || len == 0, NULL);
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);

    FsimPickleLimits defaults = {0};
    if (limits == NULL)
        limits = &defaults;
    Loader l = {.error = error,
                .record_keys = limits->record_keys,
                .shared_record_lists = limits->shared_record_lists,
                .watch_str = limits->watch_str,
                .watch_str_len = limits->watch_str != NULL ? strlen(limits->watch_str) : 0};
    while (l.record_keys != NULL && l.record_keys[l.n_record_keys] != NULL)
        l.n_record_keys++;
    g_return_val_if_fail(l.n_record_keys <= FSIM_PICKLE_RECORD_KEYS, NULL);
    for (size_t k = 0; k < l.n_record_keys; k++)
        l.record_key_len[k] = strlen(l.record_keys[k]);
    if (l.n_record_keys == 0)
        l.record_keys = NULL;
    FsimPickle *pickle = pickle_new(limits);
    input_init_memory(&l.in, data, len);
    heap_expect(&pickle->heap, limits->expect_memory);
    /* A pickler numbers its memo entries 0, 1, 2, ... and each costs at least a byte. */
    return load(&l, pickle, limits, len);
}

FsimPickle *
fsim_pickle_load_stream(GInputStream *in, const FsimPickleLimits *limits, GError **error)
{
    g_return_val_if_fail(G_IS_INPUT_STREAM(in), NULL);
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);

    FsimPickleLimits defaults = {0};
    if (limits == NULL)
        limits = &defaults;
    Loader l = {.error = error,
                .watch_str = limits->watch_str,
                .watch_str_len = limits->watch_str != NULL ? strlen(limits->watch_str) : 0};
    FsimPickle *pickle = pickle_new(limits);
    input_init_stream(&l.in, in, limits->max_input, &pickle->heap);
    return load(&l, pickle, limits, G_MAXUINT64);
}
