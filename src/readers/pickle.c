/* SPDX-License-Identifier: MIT */
/*
 * fragsim: a safe unpickler for plain data, and a small streaming pickle writer.
 *
 * The unpickler is a loop over opcodes with an explicit stack, a MARK stack and a memo, shaped
 * like CPython's Modules/_pickle.c (whose stack/fence split it copies, so POP and underflow
 * behave the same), minus everything that imports or calls.  The opcode reference is
 * Lib/pickletools.py; opcode names in messages are its names.
 *
 * Memory.  Every value lives in one bump arena freed at once; a str is allocated together with
 * its value header.  Each opcode creates at most one value and container item arrays at most
 * double, so the arena stays within a constant times the input length.  Declared lengths are
 * checked against the remaining input before anything is allocated; memo indices are bounded by
 * the input length, so the memo costs at most a pointer per input byte.
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
/* madvise() and mmap() are POSIX/BSD, hidden by -std=c11 unless asked for. */
#define _DEFAULT_SOURCE 1

#include "pickle.h"

#include <glib.h>

#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "fragsim/types.h"

/* Under AddressSanitizer the arena leaves a poisoned gap after every allocation, so that reads
 * past a value or an item array are caught as they would be with malloc(). */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#if defined(ARENA_ASAN)
#include <sanitizer/asan_interface.h>
#define ARENA_REDZONE 16
#else
#define ARENA_REDZONE                           0
#define ASAN_POISON_MEMORY_REGION(addr, size)   ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

/* ---- Values and the arena ------------------------------------------------------------------ */

enum {
    VALUE_SEALED = 1 << 0,   /* container: can no longer be modified (see the file comment) */
    VALUE_UNSIGNED = 1 << 1, /* int: above INT64_MAX, held in u.u */
};

struct FsimPickleValue {
    uint8_t type;    /* FsimPickleType */
    uint8_t flags;   /* VALUE_* */
    uint32_t height; /* 0 for scalars; 1 + the highest item for containers (empty: 1) */
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

typedef struct Chunk Chunk;
struct Chunk {
    Chunk *next;
    size_t size;   /* bytes after the header */
    size_t mapped; /* bytes mmap()ed for the chunk, header included; 0: from g_malloc() */
};

/* A bump allocator.  Small allocations come from the current chunk; large ones get a chunk of
 * their own, linked behind the current one so the current chunk's free tail stays in use. */
typedef struct {
    Chunk *head;
    char *pos;
    char *end;
    size_t next_size;
    size_t total;
} Arena;

#define ARENA_ALIGN     8
#define ARENA_MIN_CHUNK ((size_t)16 * 1024)
#define ARENA_MAX_CHUNK ((size_t)4 * 1024 * 1024)
#define CHUNK_HEADER    ((sizeof(Chunk) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))

static void
arena_init(Arena *arena, size_t input_len)
{
    memset(arena, 0, sizeof(*arena));
    /* Snapshots take 3 to 4 arena bytes per input byte; chunks double up to the maximum. */
    arena->next_size = CLAMP(input_len, ARENA_MIN_CHUNK, ARENA_MAX_CHUNK);
}

#define HUGE_PAGE ((size_t)2 * 1024 * 1024)

/* A chunk of @size usable bytes.  Big chunks are mapped on huge-page boundaries and marked for
 * transparent huge pages where Linux offers them: a fresh arena is written once, front to back,
 * and faulting it in 4 KiB pages costs about as much as the parsing itself. */
static Chunk *
chunk_new(size_t size)
{
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
            Chunk *c = (Chunk *)aligned;
            c->size = want - CHUNK_HEADER;
            c->mapped = want;
            return c;
        }
    }
#endif
    Chunk *c = g_malloc(CHUNK_HEADER + size);
    c->size = size;
    c->mapped = 0;
    return c;
}

static void
chunk_free(Chunk *c)
{
    ASAN_UNPOISON_MEMORY_REGION((char *)c + CHUNK_HEADER, c->size);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (c->mapped != 0) {
        munmap(c, c->mapped);
        return;
    }
#endif
    g_free(c);
}

static void
arena_clear(Arena *arena)
{
    Chunk *c = arena->head;
    while (c != NULL) {
        Chunk *next = c->next;
        chunk_free(c);
        c = next;
    }
    memset(arena, 0, sizeof(*arena));
}

static G_GNUC_NO_INLINE void *
arena_alloc_slow(Arena *arena, size_t n)
{
    if (n > arena->next_size / 4) {
        Chunk *c = chunk_new(n);
        ASAN_POISON_MEMORY_REGION((char *)c + CHUNK_HEADER, c->size);
        arena->total += CHUNK_HEADER + c->size;
        if (arena->head != NULL) {
            c->next = arena->head->next;
            arena->head->next = c;
        } else {
            c->next = NULL;
            arena->head = c;
            arena->pos = arena->end = (char *)c + CHUNK_HEADER + c->size;
        }
        return (char *)c + CHUNK_HEADER;
    }
    Chunk *c = chunk_new(arena->next_size);
    ASAN_POISON_MEMORY_REGION((char *)c + CHUNK_HEADER, c->size);
    c->next = arena->head;
    arena->head = c;
    arena->total += CHUNK_HEADER + c->size;
    arena->pos = (char *)c + CHUNK_HEADER;
    arena->end = arena->pos + c->size;
    arena->next_size = MIN(arena->next_size * 2, ARENA_MAX_CHUNK);
    void *p = arena->pos;
    arena->pos += n;
    return p;
}

static inline void *
arena_alloc(Arena *arena, size_t size)
{
    size_t n = ((size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1)) + ARENA_REDZONE;
    void *p;
    if ((size_t)(arena->end - arena->pos) >= n) {
        p = arena->pos;
        arena->pos += n;
    } else {
        p = arena_alloc_slow(arena, n);
    }
    ASAN_UNPOISON_MEMORY_REGION(p, size);
    return p;
}

/* Grows the last allocation in place when it ends at the bump pointer.  Returns FALSE, changing
 * nothing, otherwise. */
static inline gboolean
arena_extend(Arena *arena, void *p, size_t old_n, size_t new_n)
{
    if (ARENA_REDZONE != 0)
        return FALSE;
    old_n = (old_n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    new_n = (new_n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if ((char *)p + old_n != arena->pos || (size_t)(arena->end - (char *)p) < new_n)
        return FALSE;
    arena->pos = (char *)p + new_n;
    return TRUE;
}

struct FsimPickle {
    Arena arena;
    FsimPickleValue *root;
};

/* ---- Opcodes ------------------------------------------------------------------------------- */

/* clang-format off */
static const char *const opcode_names[256] = {
    ['('] = "MARK", ['.'] = "STOP", ['0'] = "POP", ['1'] = "POP_MARK", ['2'] = "DUP",
    ['F'] = "FLOAT", ['I'] = "INT", ['J'] = "BININT", ['K'] = "BININT1", ['L'] = "LONG",
    ['M'] = "BININT2", ['N'] = "NONE", ['P'] = "PERSID", ['Q'] = "BINPERSID", ['R'] = "REDUCE",
    ['S'] = "STRING", ['T'] = "BINSTRING", ['U'] = "SHORT_BINSTRING", ['V'] = "UNICODE",
    ['X'] = "BINUNICODE", ['a'] = "APPEND", ['b'] = "BUILD", ['c'] = "GLOBAL", ['d'] = "DICT",
    ['}'] = "EMPTY_DICT", ['e'] = "APPENDS", ['g'] = "GET", ['h'] = "BINGET", ['i'] = "INST",
    ['j'] = "LONG_BINGET", ['l'] = "LIST", [']'] = "EMPTY_LIST", ['o'] = "OBJ", ['p'] = "PUT",
    ['q'] = "BINPUT", ['r'] = "LONG_BINPUT", ['s'] = "SETITEM", ['t'] = "TUPLE",
    [')'] = "EMPTY_TUPLE", ['u'] = "SETITEMS", ['G'] = "BINFLOAT", ['B'] = "BINBYTES",
    ['C'] = "SHORT_BINBYTES",
    [0x80] = "PROTO", [0x81] = "NEWOBJ", [0x82] = "EXT1", [0x83] = "EXT2", [0x84] = "EXT4",
    [0x85] = "TUPLE1", [0x86] = "TUPLE2", [0x87] = "TUPLE3", [0x88] = "NEWTRUE",
    [0x89] = "NEWFALSE", [0x8a] = "LONG1", [0x8b] = "LONG4", [0x8c] = "SHORT_BINUNICODE",
    [0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8", [0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS",
    [0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX", [0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE",
    [0x95] = "FRAME", [0x96] = "BYTEARRAY8", [0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};
/* clang-format on */

#define DEFAULT_MAX_DEPTH      256
#define DEFAULT_MAX_MEMO       ((gsize)1 << 24)
#define DEFAULT_MAX_STACK      ((gsize)1 << 24)
#define DEFAULT_MAX_LONG_BYTES ((gsize)1024)
#define DEFAULT_NODES_BASE     ((uint64_t)1 << 20)
#define DEFAULT_NODES_PER_BYTE 64 /* real snapshots: 2 to 4 */

/* ---- The loader ---------------------------------------------------------------------------- */

typedef struct {
    const guint8 *data;
    const guint8 *p;
    const guint8 *end;
    size_t op_offset; /* of the opcode being executed */
    Arena *arena;

    FsimPickleValue **stack;
    size_t stack_len;
    size_t stack_cap;
    size_t fence; /* stack index of the innermost MARK; items below it are out of reach */

    size_t *marks;
    size_t n_marks;
    size_t marks_cap;

    FsimPickleValue **memo; /* NULL = unset */
    size_t memo_cap;
    size_t memo_count; /* set entries: MEMOIZE's next index, as in CPython */
    size_t memo_bound; /* indices must be below it */

    guint max_depth;
    size_t max_stack;
    size_t max_long_bytes;
    uint64_t max_nodes;

    GError **error;
} Loader;

static gboolean load_fail(Loader *l, FsimTraceError code, const char *format, ...)
    G_GNUC_PRINTF(3, 4);

static gboolean
load_fail(Loader *l, FsimTraceError code, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    g_autofree char *message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(l->error, FSIM_TRACE_ERROR, code, "byte %" G_GSIZE_FORMAT ": %s", l->op_offset,
                message);
    return FALSE;
}

static const char *
op_name(Loader *l)
{
    const char *name = opcode_names[l->data[l->op_offset]];
    return name != NULL ? name : "?";
}

static G_GNUC_NO_INLINE gboolean
truncated(Loader *l, size_t n)
{
    return load_fail(l, FSIM_TRACE_ERROR_TRUNCATED,
                     "%s: needs %" G_GSIZE_FORMAT " more bytes, the input has %" G_GSIZE_FORMAT,
                     op_name(l), (gsize)n, (gsize)(l->end - l->p));
}

static inline gboolean
need(Loader *l, size_t n)
{
    if (G_LIKELY((size_t)(l->end - l->p) >= n))
        return TRUE;
    return truncated(l, n);
}

static inline uint32_t
read_le32(const guint8 *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline int64_t
read_le32s(const guint8 *p)
{
    uint32_t u = read_le32(p);
    return (u & 0x80000000u) ? (int64_t)u - ((int64_t)1 << 32) : (int64_t)u;
}

static inline uint64_t
read_le64(const guint8 *p)
{
    return (uint64_t)read_le32(p) | (uint64_t)read_le32(p + 4) << 32;
}

/* Reads the text argument of a protocol 0 opcode: the bytes up to the next newline, which is
 * consumed but not returned. */
static gboolean
read_line(Loader *l, const char **line, size_t *len)
{
    const guint8 *nl = memchr(l->p, '\n', (size_t)(l->end - l->p));
    if (nl == NULL)
        return load_fail(l, FSIM_TRACE_ERROR_TRUNCATED, "%s: the input ends before its newline",
                         op_name(l));
    *line = (const char *)l->p;
    *len = (size_t)(nl - l->p);
    l->p = nl + 1;
    return TRUE;
}

static inline FsimPickleValue *
new_value(Loader *l, FsimPickleType type)
{
    FsimPickleValue *v = arena_alloc(l->arena, sizeof(*v));
    v->type = (uint8_t)type;
    v->flags = 0;
    v->height = type >= FSIM_PICKLE_LIST ? 1 : 0;
    v->offset = l->op_offset;
    return v;
}

/* A str, bytes or bigint value with a copy of @len bytes at @src (NULL: left for the caller to
 * fill) and a NUL after them, in one allocation. */
static FsimPickleValue *
new_blob(Loader *l, FsimPickleType type, const void *src, size_t len)
{
    FsimPickleValue *v = arena_alloc(l->arena, sizeof(*v) + len + 1);
    v->type = (uint8_t)type;
    v->flags = 0;
    v->height = 0;
    v->offset = l->op_offset;
    v->u.s.data = (char *)(v + 1);
    v->u.s.len = len;
    if (src != NULL)
        memcpy(v->u.s.data, src, len);
    v->u.s.data[len] = '\0';
    return v;
}

static inline FsimPickleValue *
new_int(Loader *l, int64_t i)
{
    FsimPickleValue *v = new_value(l, FSIM_PICKLE_INT);
    v->u.i = i;
    return v;
}

static G_GNUC_NO_INLINE gboolean
grow_stack(Loader *l)
{
    if (l->stack_len >= l->max_stack)
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                         "%s: more than %" G_GSIZE_FORMAT " values on the stack", op_name(l),
                         (gsize)l->max_stack);
    size_t cap = MIN(MAX(l->stack_cap * 2, (size_t)256), l->max_stack);
    l->stack = g_renew(FsimPickleValue *, l->stack, cap);
    l->stack_cap = cap;
    return TRUE;
}

static inline gboolean
push(Loader *l, FsimPickleValue *v)
{
    if (G_UNLIKELY(l->stack_len == l->stack_cap) && !grow_stack(l))
        return FALSE;
    l->stack[l->stack_len++] = v;
    return TRUE;
}

static gboolean
underflow(Loader *l)
{
    return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: unpickling stack underflow", op_name(l));
}

static inline FsimPickleValue *
pop(Loader *l)
{
    if (G_UNLIKELY(l->stack_len <= l->fence)) {
        underflow(l);
        return NULL;
    }
    return l->stack[--l->stack_len];
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

static inline gboolean
is_container(const FsimPickleValue *v)
{
    return v->type >= FSIM_PICKLE_LIST;
}

static inline uint64_t
value_nodes(const FsimPickleValue *v)
{
    return is_container(v) ? v->u.c.nodes : 1;
}

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
                     op_name(l), l->max_nodes);
}

/* Stores @n values from @items into the container @target, after its @target->u.c.len items
 * (dict: entries) and room made by reserve_items(): seals the containers among them, raises
 * @target's height and adds to its node count. */
static inline gboolean
adopt(Loader *l, FsimPickleValue *target, FsimPickleValue *const *items, size_t n)
{
    uint32_t height = target->height;
    uint64_t nodes = target->u.c.nodes;
    for (size_t i = 0; i < n; i++) {
        FsimPickleValue *item = items[i];
        uint64_t add = 1;
        if (is_container(item)) {
            item->flags |= VALUE_SEALED;
            add = item->u.c.nodes;
            if (item->height >= height) {
                if (G_UNLIKELY(item->height >= l->max_depth))
                    return too_deep(l);
                height = item->height + 1;
            }
        }
        if (G_UNLIKELY(add > l->max_nodes - nodes))
            return too_many_nodes(l);
        nodes += add;
    }
    target->height = height;
    target->u.c.nodes = nodes;
    size_t used = target->type == FSIM_PICKLE_DICT ? 2 * (size_t)target->u.c.len : target->u.c.len;
    if (n > 0)
        memcpy(target->u.c.items + used, items, n * sizeof(void *));
    target->u.c.len += (uint32_t)(target->type == FSIM_PICKLE_DICT ? n / 2 : n);
    return TRUE;
}

/* Makes room for @extra more pointers in a container's item array. */
static gboolean
reserve_items(Loader *l, FsimPickleValue *c, size_t extra)
{
    size_t used = c->type == FSIM_PICKLE_DICT ? 2 * (size_t)c->u.c.len : c->u.c.len;
    if (c->u.c.cap - used >= extra)
        return TRUE;
    if (extra > UINT32_MAX - used)
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT, "%s: more than %u items in one container",
                         op_name(l), UINT32_MAX / 2);
    size_t cap = used + extra;
    if (used > 0)
        cap = MIN(MAX(cap, 2 * (size_t)c->u.c.cap), (size_t)UINT32_MAX);
    if (c->u.c.items != NULL &&
        arena_extend(l->arena, c->u.c.items, c->u.c.cap * sizeof(void *), cap * sizeof(void *))) {
        c->u.c.cap = (uint32_t)cap;
        return TRUE;
    }
    FsimPickleValue **items = arena_alloc(l->arena, cap * sizeof(void *));
    if (used > 0)
        memcpy(items, c->u.c.items, used * sizeof(void *));
    c->u.c.items = items;
    c->u.c.cap = (uint32_t)cap;
    return TRUE;
}

static gboolean
check_modifiable(Loader *l, FsimPickleValue *target, FsimPickleType want)
{
    if (target->type != want)
        return load_fail(l, FSIM_TRACE_ERROR_TYPE, "%s: the target is a %s, not a %s", op_name(l),
                         fsim_pickle_type_name(target->type), fsim_pickle_type_name(want));
    if (target->flags & VALUE_SEALED)
        return load_fail(l, FSIM_TRACE_ERROR_FORBIDDEN,
                         "%s: recursive structure (the %s was already shared or stored)",
                         op_name(l), fsim_pickle_type_name(target->type));
    return TRUE;
}

/* APPEND, APPENDS: appends stack[base..stack_len) to the list at stack[base - 1]. */
static gboolean
do_append(Loader *l, size_t base)
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

static gboolean
check_key(Loader *l, const FsimPickleValue *key)
{
    if (key->type == FSIM_PICKLE_LIST || key->type == FSIM_PICKLE_DICT)
        return load_fail(l, FSIM_TRACE_ERROR_TYPE, "%s: unhashable dict key of type %s", op_name(l),
                         fsim_pickle_type_name(key->type));
    return TRUE;
}

/* SETITEM, SETITEMS: sets key/value pairs stack[base..stack_len) in the dict at
 * stack[base - 1]. */
static gboolean
do_setitems(Loader *l, size_t base)
{
    if (base == 0 || base - 1 < l->fence)
        return underflow(l);
    FsimPickleValue *dict = l->stack[base - 1];
    size_t n = l->stack_len - base;
    if (n % 2 != 0)
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: odd number of items", op_name(l));
    if (!check_modifiable(l, dict, FSIM_PICKLE_DICT))
        return FALSE;
    for (size_t i = 0; i < n; i += 2)
        if (!check_key(l, l->stack[base + i]))
            return FALSE;
    if (!reserve_items(l, dict, n) || !adopt(l, dict, l->stack + base, n))
        return FALSE;
    l->stack_len = base;
    return TRUE;
}

static inline FsimPickleValue *
new_container(Loader *l, FsimPickleType type)
{
    FsimPickleValue *c = new_value(l, type);
    c->u.c.items = NULL;
    c->u.c.len = 0;
    c->u.c.cap = 0;
    c->u.c.nodes = 1;
    return c;
}

/* TUPLE, TUPLE1-3, LIST, DICT: a new container from stack[base..stack_len), pushed in their
 * place. */
static gboolean
build_container(Loader *l, FsimPickleType type, size_t base)
{
    FsimPickleValue *c = new_container(l, type);
    size_t n = l->stack_len - base;
    if (type == FSIM_PICKLE_DICT) {
        if (!push(l, c))
            return FALSE;
        /* do_setitems wants the dict below the items: move it there. */
        memmove(l->stack + base + 1, l->stack + base, n * sizeof(void *));
        l->stack[base] = c;
        return do_setitems(l, base + 1);
    }
    if (!reserve_items(l, c, n) || !adopt(l, c, l->stack + base, n))
        return FALSE;
    l->stack_len = base;
    return push(l, c);
}

/* ---- Memo ---------------------------------------------------------------------------------- */

static gboolean
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
        l->memo = g_renew(FsimPickleValue *, l->memo, cap);
        memset(l->memo + l->memo_cap, 0, (cap - l->memo_cap) * sizeof(void *));
        l->memo_cap = cap;
    }
    if (l->memo[index] == NULL)
        l->memo_count++;
    l->memo[index] = l->stack[l->stack_len - 1];
    return TRUE;
}

static inline gboolean
memo_get(Loader *l, uint64_t index)
{
    if (G_UNLIKELY(index >= l->memo_cap || l->memo[index] == NULL))
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX,
                         "%s: memo entry %" G_GUINT64_FORMAT " was never set", op_name(l), index);
    FsimPickleValue *v = l->memo[index];
    /* A second reference: from now on the value is shared, so it must not change. */
    v->flags |= VALUE_SEALED;
    return push(l, v);
}

/* ---- Integers ------------------------------------------------------------------------------ */

/* LONG1, LONG4: @n little-endian two's-complement bytes. */
static FsimPickleValue *
new_long(Loader *l, const guint8 *bytes, size_t n)
{
    if (n == 0)
        return new_int(l, 0);
    gboolean negative = (bytes[n - 1] & 0x80) != 0;
    /* Drop redundant sign bytes to find the significant length. */
    size_t sig = n;
    guint8 fill = negative ? 0xff : 0x00;
    while (sig > 1 && bytes[sig - 1] == fill && ((bytes[sig - 2] & 0x80) != 0) == negative)
        sig--;
    /* A non-negative value may need a ninth byte (0x00) only to keep its sign bit clear. */
    if (sig <= 8 || (!negative && sig == 9 && bytes[8] == 0)) {
        uint64_t u = 0;
        for (size_t i = 0; i < MIN(sig, (size_t)8); i++)
            u |= (uint64_t)bytes[i] << (8 * i);
        if (sig < 8 && negative)
            u |= ~(uint64_t)0 << (8 * sig);
        FsimPickleValue *v = new_value(l, FSIM_PICKLE_INT);
        v->u.u = u;
        if (sig == 9)
            v->flags |= VALUE_UNSIGNED;
        return v;
    }
    return new_blob(l, FSIM_PICKLE_BIGINT, bytes, sig);
}

/* Parses a protocol 0 decimal integer (optional sign, digits, nothing else). */
static gboolean
parse_decimal(const char *s, size_t len, int64_t *i, uint64_t *u, gboolean *is_unsigned)
{
    gboolean negative = FALSE;
    size_t k = 0;
    if (k < len && (s[k] == '-' || s[k] == '+')) {
        negative = s[k] == '-';
        k++;
    }
    if (k == len)
        return FALSE;
    uint64_t value = 0;
    for (; k < len; k++) {
        if (s[k] < '0' || s[k] > '9')
            return FALSE;
        unsigned digit = (unsigned)(s[k] - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return FALSE;
        value = value * 10 + digit;
    }
    if (negative) {
        if (value > (uint64_t)INT64_MAX + 1)
            return FALSE;
        *i = value == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)value;
        *is_unsigned = FALSE;
    } else if (value > (uint64_t)INT64_MAX) {
        *u = value;
        *is_unsigned = TRUE;
    } else {
        *i = (int64_t)value;
        *is_unsigned = FALSE;
    }
    return TRUE;
}

/* A decimal integer of more than 64 bits (digits only, already checked) as a LONG1-style value:
 * the magnitude is built base 256 by multiply-and-add, then negated in two's complement. */
static FsimPickleValue *
new_decimal_long(Loader *l, const char *digits, size_t n, gboolean negative)
{
    /* 10^n < 256^(n / 2 + 1), plus a byte for the sign. */
    size_t cap = n / 2 + 2;
    g_autofree guint8 *bytes = g_malloc0(cap);
    size_t used = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned carry = (unsigned)(digits[k] - '0');
        for (size_t i = 0; i < used; i++) {
            unsigned t = bytes[i] * 10u + carry;
            bytes[i] = (guint8)t;
            carry = t >> 8;
        }
        while (carry != 0) {
            bytes[used++] = (guint8)carry;
            carry >>= 8;
        }
    }
    used++; /* the sign byte, 0 */
    if (negative) {
        unsigned carry = 1;
        for (size_t i = 0; i < used; i++) {
            unsigned t = (guint8)~bytes[i] + carry;
            bytes[i] = (guint8)t;
            carry = t >> 8;
        }
    }
    return new_long(l, bytes, used);
}

/* INT and LONG: a decimal line; INT's "00" and "01" are False and True. */
static gboolean
load_text_int(Loader *l, gboolean is_long)
{
    const char *line = NULL;
    size_t len = 0;
    if (!read_line(l, &line, &len))
        return FALSE;
    if (!is_long && len == 2 && line[0] == '0' && (line[1] == '0' || line[1] == '1')) {
        FsimPickleValue *v = new_value(l, FSIM_PICKLE_BOOL);
        v->u.b = line[1] == '1';
        return push(l, v);
    }
    if (is_long && len > 0 && line[len - 1] == 'L')
        len--;
    int64_t i = 0;
    uint64_t u = 0;
    gboolean is_unsigned = FALSE;
    if (!parse_decimal(line, len, &i, &u, &is_unsigned)) {
        /* Too big, or malformed. */
        size_t sign = len > 0 && (line[0] == '-' || line[0] == '+') ? 1 : 0;
        size_t k = sign;
        while (k < len && line[k] >= '0' && line[k] <= '9')
            k++;
        if (k != len || k == sign)
            return load_fail(l, FSIM_TRACE_ERROR_NUMBER, "%s: not a decimal integer: \"%.*s\"",
                             op_name(l), (int)MIN(len, (size_t)40), line);
        /* 256^b > 10^(2.4 b): b bytes hold 2.4 b digits. */
        if ((len - sign) / 12 * 5 > l->max_long_bytes)
            return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                             "%s: a %" G_GSIZE_FORMAT
                             "-digit integer, above the limit of %" G_GSIZE_FORMAT " bytes",
                             op_name(l), (gsize)(len - sign), (gsize)l->max_long_bytes);
        return push(l, new_decimal_long(l, line + sign, len - sign, line[0] == '-'));
    }
    FsimPickleValue *v = new_value(l, FSIM_PICKLE_INT);
    if (is_unsigned) {
        v->u.u = u;
        v->flags |= VALUE_UNSIGNED;
    } else {
        v->u.i = i;
    }
    return push(l, v);
}

/* PUT, GET: a decimal memo index line. */
static gboolean
read_text_index(Loader *l, uint64_t *index)
{
    const char *line = NULL;
    size_t len = 0;
    int64_t i = 0;
    uint64_t u = 0;
    gboolean is_unsigned = FALSE;
    if (!read_line(l, &line, &len))
        return FALSE;
    if (!parse_decimal(line, len, &i, &u, &is_unsigned) || (!is_unsigned && i < 0))
        return load_fail(l, FSIM_TRACE_ERROR_NUMBER, "%s: bad memo index \"%.*s\"", op_name(l),
                         (int)MIN(len, (size_t)40), line);
    *index = is_unsigned ? u : (uint64_t)i;
    return TRUE;
}

static gboolean
load_text_float(Loader *l)
{
    const char *line = NULL;
    size_t len = 0;
    if (!read_line(l, &line, &len))
        return FALSE;
    char buffer[128];
    if (len == 0 || len >= sizeof(buffer))
        return load_fail(l, FSIM_TRACE_ERROR_NUMBER, "%s: bad float", op_name(l));
    memcpy(buffer, line, len);
    buffer[len] = '\0';
    char *end = NULL;
    double d = g_ascii_strtod(buffer, &end);
    if (end != buffer + len)
        return load_fail(l, FSIM_TRACE_ERROR_NUMBER, "%s: bad float \"%s\"", op_name(l), buffer);
    FsimPickleValue *v = new_value(l, FSIM_PICKLE_FLOAT);
    v->u.d = d;
    return push(l, v);
}

/* ---- Protocol 0 strings -------------------------------------------------------------------- */

static int
hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t
utf8_put(char *out, uint32_t cp)
{
    /* Lone surrogates are encoded like any other code point, as CPython's "surrogatepass". */
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* STRING: a quoted Python 2 repr, decoded as codecs.escape_decode() does. */
static gboolean
load_string(Loader *l)
{
    const char *line = NULL;
    size_t len = 0;
    if (!read_line(l, &line, &len))
        return FALSE;
    if (len < 2 || (line[0] != '\'' && line[0] != '"') || line[len - 1] != line[0])
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: the argument must be quoted", op_name(l));
    const char *s = line + 1;
    const char *end = line + len - 1;
    FsimPickleValue *v = new_blob(l, FSIM_PICKLE_STR, NULL, (size_t)(end - s));
    char *out = v->u.s.data;
    while (s < end) {
        if (*s != '\\') {
            *out++ = *s++;
            continue;
        }
        if (s + 1 == end)
            return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: trailing \\ in string", op_name(l));
        s++;
        char c = *s++;
        switch (c) {
        case '\n':
            break;
        case '\\':
        case '\'':
        case '"':
            *out++ = c;
            break;
        case 'a':
            *out++ = '\a';
            break;
        case 'b':
            *out++ = '\b';
            break;
        case 'f':
            *out++ = '\f';
            break;
        case 'n':
            *out++ = '\n';
            break;
        case 'r':
            *out++ = '\r';
            break;
        case 't':
            *out++ = '\t';
            break;
        case 'v':
            *out++ = '\v';
            break;
        case 'x': {
            int hi = s < end ? hex_value(s[0]) : -1;
            int lo = s + 1 < end ? hex_value(s[1]) : -1;
            if (hi < 0 || lo < 0)
                return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: invalid \\x escape", op_name(l));
            *out++ = (char)(hi * 16 + lo);
            s += 2;
            break;
        }
        default:
            if (c >= '0' && c <= '7') {
                unsigned value = (unsigned)(c - '0');
                for (int k = 0; k < 2 && s < end && *s >= '0' && *s <= '7'; k++)
                    value = value * 8 + (unsigned)(*s++ - '0');
                *out++ = (char)(value & 0xff);
            } else {
                *out++ = '\\';
                *out++ = c;
            }
            break;
        }
    }
    *out = '\0';
    v->u.s.len = (size_t)(out - v->u.s.data);
    return push(l, v);
}

/* UNICODE: raw-unicode-escape text.  Bytes are Latin-1 code points; \uXXXX and \UXXXXXXXX are
 * escapes only after an odd number of backslashes (CPython's rule). */
static gboolean
load_unicode(Loader *l)
{
    const char *line = NULL;
    size_t len = 0;
    if (!read_line(l, &line, &len))
        return FALSE;
    /* A byte becomes at most 2 UTF-8 bytes; an escape of 6 or 10 bytes at most 4. */
    FsimPickleValue *v = new_blob(l, FSIM_PICKLE_STR, NULL, 2 * len);
    char *out = v->u.s.data;
    const char *s = line;
    const char *end = line + len;
    while (s < end) {
        if (*s != '\\') {
            out += utf8_put(out, (guint8)*s++);
            continue;
        }
        const char *run = s;
        while (s < end && *s == '\\')
            *out++ = *s++;
        if (((s - run) & 1) == 0 || s == end || (*s != 'u' && *s != 'U'))
            continue;
        out--;
        int count = *s == 'u' ? 4 : 8;
        s++;
        uint32_t cp = 0;
        for (int k = 0; k < count; k++) {
            int h = s < end ? hex_value(*s) : -1;
            if (h < 0)
                return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: truncated \\%c escape",
                                 op_name(l), count == 4 ? 'u' : 'U');
            cp = cp * 16 + (uint32_t)h;
            s++;
        }
        if (cp > 0x10ffff)
            return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: \\U escape out of range", op_name(l));
        out += utf8_put(out, cp);
    }
    *out = '\0';
    v->u.s.len = (size_t)(out - v->u.s.data);
    return push(l, v);
}

/* ---- The main loop ------------------------------------------------------------------------- */

/* Reads a length of @width bytes (1, 4 or 8, little-endian) and checks that the data it
 * announces is there. */
static gboolean
read_length(Loader *l, int width, size_t *len)
{
    if (!need(l, (size_t)width))
        return FALSE;
    uint64_t n;
    if (width == 1)
        n = l->p[0];
    else if (width == 4)
        n = read_le32(l->p);
    else
        n = read_le64(l->p);
    l->p += width;
    if (n > (uint64_t)(l->end - l->p))
        return load_fail(l, FSIM_TRACE_ERROR_TRUNCATED,
                         "%s: declares %" G_GUINT64_FORMAT " bytes, the input has %" G_GSIZE_FORMAT,
                         op_name(l), n, (gsize)(l->end - l->p));
    *len = (size_t)n;
    return TRUE;
}

static gboolean
load_blob(Loader *l, FsimPickleType type, int width)
{
    size_t len = 0;
    if (!read_length(l, width, &len))
        return FALSE;
    FsimPickleValue *v = new_blob(l, type, l->p, len);
    l->p += len;
    return push(l, v);
}

static gboolean
load_binstring(Loader *l)
{
    if (!need(l, 4))
        return FALSE;
    if (read_le32(l->p) & 0x80000000u)
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: negative byte count", op_name(l));
    return load_blob(l, FSIM_PICKLE_STR, 4);
}

static gboolean
load_long(Loader *l, int width)
{
    size_t len = 0;
    if (width == 4) {
        if (!need(l, 4))
            return FALSE;
        if (read_le32(l->p) & 0x80000000u)
            return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: negative byte count", op_name(l));
    }
    if (!read_length(l, width, &len))
        return FALSE;
    if (len > l->max_long_bytes)
        return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                         "%s: a %" G_GSIZE_FORMAT
                         "-byte integer, above the limit of %" G_GSIZE_FORMAT,
                         op_name(l), (gsize)len, (gsize)l->max_long_bytes);
    FsimPickleValue *v = new_long(l, l->p, len);
    l->p += len;
    return push(l, v);
}

static gboolean
load_tuple_n(Loader *l, size_t n)
{
    if (l->stack_len - l->fence < n)
        return underflow(l);
    return build_container(l, FSIM_PICKLE_TUPLE, l->stack_len - n);
}

static gboolean
load_mark(Loader *l)
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
load_pop(Loader *l)
{
    /* As CPython: POP on an empty frame discards the MARK instead. */
    if (l->n_marks > 0 && l->marks[l->n_marks - 1] == l->stack_len) {
        size_t base = 0;
        return pop_mark(l, &base);
    }
    return pop(l) != NULL;
}

static gboolean
forbidden(Loader *l, const char *why)
{
    return load_fail(l, FSIM_TRACE_ERROR_FORBIDDEN, "%s: opcode refused (%s)", op_name(l), why);
}

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
    *root = l->stack[0];
    return TRUE;
}

static gboolean
load_run(Loader *l, FsimPickleValue **root)
{
    while (l->p < l->end) {
        l->op_offset = (size_t)(l->p - l->data);
        guint8 op = *l->p++;
        gboolean ok;
        size_t base = 0;
        switch (op) {
        case 'h': /* BINGET */
            ok = need(l, 1) && memo_get(l, *l->p++);
            break;
        case 'j': /* LONG_BINGET */
            ok = need(l, 4) && memo_get(l, read_le32(l->p));
            l->p += ok ? 4 : 0;
            break;
        case 'g': { /* GET */
            uint64_t index;
            ok = read_text_index(l, &index) && memo_get(l, index);
            break;
        }
        case 0x94: /* MEMOIZE */
            ok = memo_put(l, l->memo_count);
            break;
        case 'q': /* BINPUT */
            ok = need(l, 1) && memo_put(l, *l->p++);
            break;
        case 'r': /* LONG_BINPUT */
            ok = need(l, 4) && memo_put(l, read_le32(l->p));
            l->p += ok ? 4 : 0;
            break;
        case 'p': { /* PUT */
            uint64_t index;
            ok = read_text_index(l, &index) && memo_put(l, index);
            break;
        }
        case '(': /* MARK */
            ok = load_mark(l);
            break;
        case '}': /* EMPTY_DICT */
            ok = push(l, new_container(l, FSIM_PICKLE_DICT));
            break;
        case ']': /* EMPTY_LIST */
            ok = push(l, new_container(l, FSIM_PICKLE_LIST));
            break;
        case ')': /* EMPTY_TUPLE */
            ok = push(l, new_container(l, FSIM_PICKLE_TUPLE));
            break;
        case 'u': /* SETITEMS */
            ok = pop_mark(l, &base) && do_setitems(l, base);
            break;
        case 's': /* SETITEM */
            ok = l->stack_len >= 2 && l->stack_len - 2 > l->fence ? do_setitems(l, l->stack_len - 2)
                                                                  : underflow(l);
            break;
        case 'e': /* APPENDS */
            ok = pop_mark(l, &base) && do_append(l, base);
            break;
        case 'a': /* APPEND */
            ok = l->stack_len >= 1 && l->stack_len - 1 > l->fence ? do_append(l, l->stack_len - 1)
                                                                  : underflow(l);
            break;
        case 't': /* TUPLE */
            ok = pop_mark(l, &base) && build_container(l, FSIM_PICKLE_TUPLE, base);
            break;
        case 'l': /* LIST */
            ok = pop_mark(l, &base) && build_container(l, FSIM_PICKLE_LIST, base);
            break;
        case 'd': /* DICT */
            ok = pop_mark(l, &base) && build_container(l, FSIM_PICKLE_DICT, base);
            break;
        case 0x85: /* TUPLE1 */
        case 0x86: /* TUPLE2 */
        case 0x87: /* TUPLE3 */
            ok = load_tuple_n(l, (size_t)(op - 0x84));
            break;
        case '0': /* POP */
            ok = load_pop(l);
            break;
        case '1': /* POP_MARK */
            ok = pop_mark(l, &base);
            l->stack_len = ok ? base : l->stack_len;
            break;
        case '2': { /* DUP */
            FsimPickleValue *top = l->stack_len > l->fence ? l->stack[l->stack_len - 1] : NULL;
            if (top == NULL) {
                ok = underflow(l);
                break;
            }
            top->flags |= VALUE_SEALED;
            ok = push(l, top);
            break;
        }
        case 0x8c: /* SHORT_BINUNICODE */
            ok = load_blob(l, FSIM_PICKLE_STR, 1);
            break;
        case 'X': /* BINUNICODE */
            ok = load_blob(l, FSIM_PICKLE_STR, 4);
            break;
        case 0x8d: /* BINUNICODE8 */
            ok = load_blob(l, FSIM_PICKLE_STR, 8);
            break;
        case 'V': /* UNICODE */
            ok = load_unicode(l);
            break;
        case 'S': /* STRING */
            ok = load_string(l);
            break;
        case 'T': /* BINSTRING */
            ok = load_binstring(l);
            break;
        case 'U': /* SHORT_BINSTRING */
            ok = load_blob(l, FSIM_PICKLE_STR, 1);
            break;
        case 'C': /* SHORT_BINBYTES */
            ok = load_blob(l, FSIM_PICKLE_BYTES, 1);
            break;
        case 'B': /* BINBYTES */
            ok = load_blob(l, FSIM_PICKLE_BYTES, 4);
            break;
        case 0x8e: /* BINBYTES8 */
        case 0x96: /* BYTEARRAY8 */
            ok = load_blob(l, FSIM_PICKLE_BYTES, 8);
            break;
        case 'K': /* BININT1 */
            ok = need(l, 1) && push(l, new_int(l, *l->p++));
            break;
        case 'M': /* BININT2 */
            ok = need(l, 2) && push(l, new_int(l, l->p[0] | l->p[1] << 8));
            l->p += ok ? 2 : 0;
            break;
        case 'J': /* BININT */
            ok = need(l, 4) && push(l, new_int(l, read_le32s(l->p)));
            l->p += ok ? 4 : 0;
            break;
        case 0x8a: /* LONG1 */
            ok = load_long(l, 1);
            break;
        case 0x8b: /* LONG4 */
            ok = load_long(l, 4);
            break;
        case 'I': /* INT */
            ok = load_text_int(l, FALSE);
            break;
        case 'L': /* LONG */
            ok = load_text_int(l, TRUE);
            break;
        case 'G': /* BINFLOAT */
            if ((ok = need(l, 8))) {
                uint64_t bits = 0;
                for (int k = 0; k < 8; k++)
                    bits = bits << 8 | l->p[k];
                l->p += 8;
                FsimPickleValue *v = new_value(l, FSIM_PICKLE_FLOAT);
                memcpy(&v->u.d, &bits, sizeof(double));
                ok = push(l, v);
            }
            break;
        case 'F': /* FLOAT */
            ok = load_text_float(l);
            break;
        case 0x88: /* NEWTRUE */
        case 0x89: /* NEWFALSE */ {
            FsimPickleValue *v = new_value(l, FSIM_PICKLE_BOOL);
            v->u.b = op == 0x88;
            ok = push(l, v);
            break;
        }
        case 'N': /* NONE */
            ok = push(l, new_value(l, FSIM_PICKLE_NONE));
            break;
        case 0x95: /* FRAME: a length prefix for buffered readers; only checked */
            if ((ok = need(l, 8))) {
                uint64_t n = read_le64(l->p);
                l->p += 8;
                if (n > (uint64_t)(l->end - l->p))
                    ok = load_fail(l, FSIM_TRACE_ERROR_TRUNCATED,
                                   "FRAME: declares %" G_GUINT64_FORMAT
                                   " bytes, the input has %" G_GSIZE_FORMAT,
                                   n, (gsize)(l->end - l->p));
            }
            break;
        case 0x80: /* PROTO */
            if ((ok = need(l, 1))) {
                guint8 proto = *l->p++;
                if (proto > 5)
                    ok = load_fail(l, FSIM_TRACE_ERROR_HEADER,
                                   "PROTO: unsupported pickle protocol %u", proto);
            }
            break;
        case '.': /* STOP */
            return load_stop(l, root);
        case 'c':  /* GLOBAL */
        case 0x93: /* STACK_GLOBAL */
            ok = forbidden(l, "it would import a module attribute");
            break;
        case 'R':  /* REDUCE */
        case 'b':  /* BUILD */
        case 'i':  /* INST */
        case 'o':  /* OBJ */
        case 0x81: /* NEWOBJ */
        case 0x92: /* NEWOBJ_EX */
            ok = forbidden(l, "it would call a Python object");
            break;
        case 0x82: /* EXT1 */
        case 0x83: /* EXT2 */
        case 0x84: /* EXT4 */
            ok = forbidden(l, "it would look up the copyreg extension registry");
            break;
        case 'P': /* PERSID */
        case 'Q': /* BINPERSID */
            ok = forbidden(l, "persistent ids need a persistent_load callback");
            break;
        case 0x97: /* NEXT_BUFFER */
        case 0x98: /* READONLY_BUFFER */
            ok = forbidden(l, "out-of-band buffers are not supported");
            break;
        case 0x8f: /* EMPTY_SET */
        case 0x90: /* ADDITEMS */
        case 0x91: /* FROZENSET */
            ok = load_fail(l, FSIM_TRACE_ERROR_TYPE, "%s: sets are not supported", op_name(l));
            break;
        default:
            ok = load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "unknown opcode 0x%02x", op);
            break;
        }
        if (G_UNLIKELY(!ok))
            return FALSE;
    }
    l->op_offset = (size_t)(l->end - l->data);
    return load_fail(l, FSIM_TRACE_ERROR_TRUNCATED, "the pickle ends without STOP");
}

FsimPickle *
fsim_pickle_load(const guint8 *data, gsize len, const FsimPickleLimits *limits, GError **error)
{
    g_return_val_if_fail(data != NULL || len == 0, NULL);
    g_return_val_if_fail(error == NULL || *error == NULL, NULL);

    if (len == 0) {
        g_set_error_literal(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_EMPTY,
                            "byte 0: the pickle is empty");
        return NULL;
    }

    FsimPickleLimits defaults = {0};
    if (limits == NULL)
        limits = &defaults;

    g_autoptr(FsimPickle) pickle = g_new0(FsimPickle, 1);
    arena_init(&pickle->arena, len);

    Loader l = {
        .data = data,
        .p = data,
        .end = data + len,
        .arena = &pickle->arena,
        .max_depth = limits->max_depth != 0 ? limits->max_depth : DEFAULT_MAX_DEPTH,
        .max_stack = limits->max_stack != 0 ? limits->max_stack : DEFAULT_MAX_STACK,
        .max_long_bytes =
            limits->max_long_bytes != 0 ? limits->max_long_bytes : DEFAULT_MAX_LONG_BYTES,
        .error = error,
    };
    l.max_nodes = limits->max_nodes != 0
                      ? limits->max_nodes
                      : DEFAULT_NODES_BASE + DEFAULT_NODES_PER_BYTE * (uint64_t)len;
    /* Never NULL, so that `stack + base` is defined even for an empty stack. */
    l.stack_cap = MIN(l.max_stack, (size_t)256);
    l.stack = g_new(FsimPickleValue *, l.stack_cap);
    l.memo_bound = MIN(limits->max_memo != 0 ? limits->max_memo : DEFAULT_MAX_MEMO, len);

    gboolean ok = load_run(&l, &pickle->root);
    g_free(l.stack);
    g_free(l.marks);
    g_free(l.memo);
    if (!ok)
        return NULL;
    return g_steal_pointer(&pickle);
}

void
fsim_pickle_free(FsimPickle *pickle)
{
    if (pickle == NULL)
        return;
    arena_clear(&pickle->arena);
    g_free(pickle);
}

const FsimPickleValue *
fsim_pickle_root(const FsimPickle *pickle)
{
    g_return_val_if_fail(pickle != NULL, NULL);
    return pickle->root;
}

gsize
fsim_pickle_arena_bytes(const FsimPickle *pickle)
{
    g_return_val_if_fail(pickle != NULL, 0);
    return pickle->arena.total;
}

/* ---- Accessors ----------------------------------------------------------------------------- */

FsimPickleType
fsim_pickle_type(const FsimPickleValue *v)
{
    g_return_val_if_fail(v != NULL, FSIM_PICKLE_NONE);
    return (FsimPickleType)v->type;
}

const char *
fsim_pickle_type_name(FsimPickleType type)
{
    switch (type) {
    case FSIM_PICKLE_NONE:
        return "NoneType";
    case FSIM_PICKLE_BOOL:
        return "bool";
    case FSIM_PICKLE_INT:
    case FSIM_PICKLE_BIGINT:
        return "int";
    case FSIM_PICKLE_FLOAT:
        return "float";
    case FSIM_PICKLE_STR:
        return "str";
    case FSIM_PICKLE_BYTES:
        return "bytes";
    case FSIM_PICKLE_LIST:
        return "list";
    case FSIM_PICKLE_TUPLE:
        return "tuple";
    case FSIM_PICKLE_DICT:
        return "dict";
    }
    return "?";
}

gsize
fsim_pickle_len(const FsimPickleValue *v)
{
    g_return_val_if_fail(v != NULL, 0);
    switch ((FsimPickleType)v->type) {
    case FSIM_PICKLE_STR:
    case FSIM_PICKLE_BYTES:
    case FSIM_PICKLE_BIGINT:
        return v->u.s.len;
    case FSIM_PICKLE_LIST:
    case FSIM_PICKLE_TUPLE:
    case FSIM_PICKLE_DICT:
        return v->u.c.len;
    default:
        return 0;
    }
}

const FsimPickleValue *
fsim_pickle_item(const FsimPickleValue *v, gsize i)
{
    if (v == NULL || (v->type != FSIM_PICKLE_LIST && v->type != FSIM_PICKLE_TUPLE) ||
        i >= v->u.c.len)
        return NULL;
    return v->u.c.items[i];
}

const FsimPickleValue *
fsim_pickle_dict_key(const FsimPickleValue *v, gsize i)
{
    if (v == NULL || v->type != FSIM_PICKLE_DICT || i >= v->u.c.len)
        return NULL;
    return v->u.c.items[2 * i];
}

const FsimPickleValue *
fsim_pickle_dict_value(const FsimPickleValue *v, gsize i)
{
    if (v == NULL || v->type != FSIM_PICKLE_DICT || i >= v->u.c.len)
        return NULL;
    return v->u.c.items[2 * i + 1];
}

const FsimPickleValue *
fsim_pickle_dict_get(const FsimPickleValue *dict, const char *key)
{
    g_return_val_if_fail(key != NULL, NULL);
    if (dict == NULL || dict->type != FSIM_PICKLE_DICT)
        return NULL;
    size_t len = strlen(key);
    for (size_t i = dict->u.c.len; i-- > 0;) {
        const FsimPickleValue *k = dict->u.c.items[2 * i];
        if (k->type == FSIM_PICKLE_STR && k->u.s.len == len && memcmp(k->u.s.data, key, len) == 0)
            return dict->u.c.items[2 * i + 1];
    }
    return NULL;
}

gboolean
fsim_pickle_get_int(const FsimPickleValue *v, int64_t *out)
{
    g_return_val_if_fail(out != NULL, FALSE);
    if (v == NULL || v->type != FSIM_PICKLE_INT || (v->flags & VALUE_UNSIGNED))
        return FALSE;
    *out = v->u.i;
    return TRUE;
}

gboolean
fsim_pickle_get_uint(const FsimPickleValue *v, uint64_t *out)
{
    g_return_val_if_fail(out != NULL, FALSE);
    if (v == NULL || v->type != FSIM_PICKLE_INT)
        return FALSE;
    if (!(v->flags & VALUE_UNSIGNED) && v->u.i < 0)
        return FALSE;
    *out = v->u.u;
    return TRUE;
}

gboolean
fsim_pickle_get_double(const FsimPickleValue *v, double *out)
{
    g_return_val_if_fail(out != NULL, FALSE);
    if (v == NULL)
        return FALSE;
    switch ((FsimPickleType)v->type) {
    case FSIM_PICKLE_FLOAT:
        *out = v->u.d;
        return TRUE;
    case FSIM_PICKLE_INT:
        *out = (v->flags & VALUE_UNSIGNED) ? (double)v->u.u : (double)v->u.i;
        return TRUE;
    case FSIM_PICKLE_BIGINT: {
        /* Two's complement: the top byte is signed, the others are not.  Past DBL_MAX this
         * gives +-inf where Python's float() raises OverflowError. */
        const guint8 *b = (const guint8 *)v->u.s.data;
        size_t n = v->u.s.len;
        double d = (double)(int8_t)b[n - 1];
        for (size_t i = n - 1; i-- > 0;)
            d = d * 256.0 + b[i];
        *out = d;
        return TRUE;
    }
    default:
        return FALSE;
    }
}

gboolean
fsim_pickle_get_bool(const FsimPickleValue *v, gboolean *out)
{
    g_return_val_if_fail(out != NULL, FALSE);
    if (v == NULL || v->type != FSIM_PICKLE_BOOL)
        return FALSE;
    *out = v->u.b;
    return TRUE;
}

const char *
fsim_pickle_get_str(const FsimPickleValue *v, gsize *len)
{
    if (v == NULL || v->type != FSIM_PICKLE_STR)
        return NULL;
    if (len != NULL)
        *len = v->u.s.len;
    return v->u.s.data;
}

const guint8 *
fsim_pickle_get_bytes(const FsimPickleValue *v, gsize *len)
{
    if (v == NULL || v->type != FSIM_PICKLE_BYTES)
        return NULL;
    if (len != NULL)
        *len = v->u.s.len;
    return (const guint8 *)v->u.s.data;
}

const guint8 *
fsim_pickle_get_bigint(const FsimPickleValue *v, gsize *len)
{
    if (v == NULL || v->type != FSIM_PICKLE_BIGINT)
        return NULL;
    if (len != NULL)
        *len = v->u.s.len;
    return (const guint8 *)v->u.s.data;
}

gboolean
fsim_pickle_str_equal(const FsimPickleValue *v, const char *s)
{
    g_return_val_if_fail(s != NULL, FALSE);
    if (v == NULL || v->type != FSIM_PICKLE_STR)
        return FALSE;
    size_t len = strlen(s);
    return v->u.s.len == len && memcmp(v->u.s.data, s, len) == 0;
}

uint64_t
fsim_pickle_nodes(const FsimPickleValue *v)
{
    g_return_val_if_fail(v != NULL, 0);
    return value_nodes(v);
}

gsize
fsim_pickle_offset(const FsimPickleValue *v)
{
    g_return_val_if_fail(v != NULL, 0);
    return (gsize)v->offset;
}

/* ---- The writer ---------------------------------------------------------------------------- */

#define WRITER_BUFFER_SIZE  ((size_t)64 * 1024)
#define WRITER_BATCH        1000 /* items per APPENDS/SETITEMS, as CPython's pickler */
#define WRITER_MEMO_MAX_STR ((size_t)1024)
#define WRITER_MEMO_MAX     ((guint)1 << 20)

typedef enum {
    FRAME_LIST,
    FRAME_DICT,
    FRAME_TUPLE,
} FrameKind;

typedef struct {
    FrameKind kind;
    guint batch;          /* items (dict: entries) since the batch's MARK */
    gboolean pending_key; /* dict: a key was written, its value not yet */
} Frame;

typedef struct {
    size_t len;
    const char *data;
} MemoKey;

struct FsimPickleWriter {
    GOutputStream *out; /* borrowed */
    guint8 *buffer;
    size_t len;
    GError *error;    /* the first write error or misuse */
    GArray *frames;   /* of Frame */
    GHashTable *memo; /* MemoKey* (owned, data after it) -> memo index + 1 */
    guint memo_next;
    gboolean root_done;
};

static guint
memo_key_hash(gconstpointer p)
{
    const MemoKey *k = p;
    guint h = 5381;
    for (size_t i = 0; i < k->len; i++)
        h = h * 33 + (guint8)k->data[i];
    return h;
}

static gboolean
memo_key_equal(gconstpointer a, gconstpointer b)
{
    const MemoKey *x = a;
    const MemoKey *y = b;
    return x->len == y->len && memcmp(x->data, y->data, x->len) == 0;
}

static void
writer_flush(FsimPickleWriter *w)
{
    if (w->len > 0 && w->error == NULL)
        g_output_stream_write_all(w->out, w->buffer, w->len, NULL, NULL, &w->error);
    w->len = 0;
}

static void
writer_put(FsimPickleWriter *w, const void *bytes, size_t n)
{
    if (w->error != NULL)
        return;
    if (WRITER_BUFFER_SIZE - w->len < n) {
        writer_flush(w);
        if (n >= WRITER_BUFFER_SIZE) {
            if (w->error == NULL)
                g_output_stream_write_all(w->out, bytes, n, NULL, NULL, &w->error);
            return;
        }
    }
    memcpy(w->buffer + w->len, bytes, n);
    w->len += n;
}

static inline void
writer_byte(FsimPickleWriter *w, guint8 b)
{
    writer_put(w, &b, 1);
}

static void
writer_le32(FsimPickleWriter *w, guint8 op, uint32_t x)
{
    guint8 b[5] = {op, (guint8)x, (guint8)(x >> 8), (guint8)(x >> 16), (guint8)(x >> 24)};
    writer_put(w, b, sizeof(b));
}

static void writer_misuse(FsimPickleWriter *w, const char *format, ...) G_GNUC_PRINTF(2, 3);

static void
writer_misuse(FsimPickleWriter *w, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    g_autofree char *message = g_strdup_vprintf(format, args);
    va_end(args);
    g_critical("pickle writer: %s", message);
    if (w->error == NULL)
        g_set_error(&w->error, FSIM_ERROR, FSIM_ERROR_FAILED, "pickle writer misused: %s", message);
}

static Frame *
writer_top(FsimPickleWriter *w)
{
    return w->frames->len > 0 ? &g_array_index(w->frames, Frame, w->frames->len - 1) : NULL;
}

/* Called before every value: opens a batch where one is due. */
static gboolean
writer_before_value(FsimPickleWriter *w)
{
    Frame *f = writer_top(w);
    if (f == NULL) {
        if (w->root_done) {
            writer_misuse(w, "a second value at the top level");
            return FALSE;
        }
        return TRUE;
    }
    if (f->batch == 0 && (f->kind == FRAME_LIST || (f->kind == FRAME_DICT && !f->pending_key)))
        writer_byte(w, '(');
    return TRUE;
}

/* Called after every value: counts it and closes a full batch. */
static void
writer_after_value(FsimPickleWriter *w)
{
    Frame *f = writer_top(w);
    if (f == NULL) {
        w->root_done = TRUE;
        return;
    }
    switch (f->kind) {
    case FRAME_LIST:
        if (++f->batch == WRITER_BATCH) {
            writer_byte(w, 'e');
            f->batch = 0;
        }
        break;
    case FRAME_DICT:
        if (!f->pending_key) {
            f->pending_key = TRUE;
            break;
        }
        f->pending_key = FALSE;
        if (++f->batch == WRITER_BATCH) {
            writer_byte(w, 'u');
            f->batch = 0;
        }
        break;
    case FRAME_TUPLE:
        break;
    }
}

FsimPickleWriter *
fsim_pickle_writer_new(GOutputStream *out)
{
    g_return_val_if_fail(G_IS_OUTPUT_STREAM(out), NULL);
    FsimPickleWriter *w = g_new0(FsimPickleWriter, 1);
    w->out = out;
    w->buffer = g_malloc(WRITER_BUFFER_SIZE);
    w->frames = g_array_new(FALSE, FALSE, sizeof(Frame));
    w->memo = g_hash_table_new_full(memo_key_hash, memo_key_equal, g_free, NULL);
    writer_put(w, "\x80\x02", 2);
    return w;
}

void
fsim_pickle_writer_free(FsimPickleWriter *w)
{
    if (w == NULL)
        return;
    g_clear_pointer(&w->buffer, g_free);
    g_clear_pointer(&w->frames, g_array_unref);
    g_clear_pointer(&w->memo, g_hash_table_unref);
    g_clear_error(&w->error);
    g_free(w);
}

static void
writer_begin(FsimPickleWriter *w, FrameKind kind, guint8 opcode)
{
    g_return_if_fail(w != NULL);
    if (!writer_before_value(w))
        return;
    writer_byte(w, opcode);
    Frame f = {.kind = kind};
    g_array_append_val(w->frames, f);
}

static void
writer_end(FsimPickleWriter *w, FrameKind kind, const char *what)
{
    g_return_if_fail(w != NULL);
    Frame *f = writer_top(w);
    if (f == NULL || f->kind != kind) {
        writer_misuse(w, "end_%s without a matching begin_%s", what, what);
        return;
    }
    if (f->kind == FRAME_DICT && f->pending_key) {
        writer_misuse(w, "end_dict after a key without its value");
        return;
    }
    if (f->kind == FRAME_TUPLE)
        writer_byte(w, 't');
    else if (f->batch > 0)
        writer_byte(w, f->kind == FRAME_LIST ? 'e' : 'u');
    g_array_set_size(w->frames, w->frames->len - 1);
    writer_after_value(w);
}

void
fsim_pickle_writer_begin_dict(FsimPickleWriter *w)
{
    writer_begin(w, FRAME_DICT, '}');
}

void
fsim_pickle_writer_end_dict(FsimPickleWriter *w)
{
    writer_end(w, FRAME_DICT, "dict");
}

void
fsim_pickle_writer_begin_list(FsimPickleWriter *w)
{
    writer_begin(w, FRAME_LIST, ']');
}

void
fsim_pickle_writer_end_list(FsimPickleWriter *w)
{
    writer_end(w, FRAME_LIST, "list");
}

void
fsim_pickle_writer_begin_tuple(FsimPickleWriter *w)
{
    /* MARK ... TUPLE: the item count is not known in advance. */
    writer_begin(w, FRAME_TUPLE, '(');
}

void
fsim_pickle_writer_end_tuple(FsimPickleWriter *w)
{
    writer_end(w, FRAME_TUPLE, "tuple");
}

/* LONG1 with the fewest bytes that hold @u as two's complement (@negative: @u is an int64). */
static void
writer_long1(FsimPickleWriter *w, uint64_t u, gboolean negative)
{
    guint8 b[11] = {0x8a};
    size_t n = 0;
    for (; n < 8; n++)
        b[2 + n] = (guint8)(u >> (8 * n));
    /* Trim bytes that only repeat the sign. */
    guint8 fill = negative ? 0xff : 0x00;
    while (n > 1 && b[2 + n - 1] == fill && ((b[2 + n - 2] & 0x80) != 0) == negative)
        n--;
    if (!negative && (b[2 + n - 1] & 0x80))
        b[2 + n++] = 0x00;
    b[1] = (guint8)n;
    writer_put(w, b, 2 + n);
}

void
fsim_pickle_writer_int(FsimPickleWriter *w, int64_t value)
{
    g_return_if_fail(w != NULL);
    if (!writer_before_value(w))
        return;
    if (value >= 0 && value <= 0xff) {
        guint8 b[2] = {'K', (guint8)value};
        writer_put(w, b, 2);
    } else if (value >= 0 && value <= 0xffff) {
        guint8 b[3] = {'M', (guint8)value, (guint8)(value >> 8)};
        writer_put(w, b, 3);
    } else if (value >= INT32_MIN && value <= INT32_MAX) {
        writer_le32(w, 'J', (uint32_t)(int32_t)value);
    } else {
        writer_long1(w, (uint64_t)value, value < 0);
    }
    writer_after_value(w);
}

void
fsim_pickle_writer_uint(FsimPickleWriter *w, uint64_t value)
{
    g_return_if_fail(w != NULL);
    if (value <= (uint64_t)INT64_MAX) {
        fsim_pickle_writer_int(w, (int64_t)value);
        return;
    }
    if (!writer_before_value(w))
        return;
    writer_long1(w, value, FALSE);
    writer_after_value(w);
}

void
fsim_pickle_writer_double(FsimPickleWriter *w, double value)
{
    g_return_if_fail(w != NULL);
    if (!writer_before_value(w))
        return;
    uint64_t bits;
    memcpy(&bits, &value, sizeof(bits));
    guint8 b[9] = {'G'};
    for (int k = 0; k < 8; k++)
        b[1 + k] = (guint8)(bits >> (56 - 8 * k));
    writer_put(w, b, sizeof(b));
    writer_after_value(w);
}

void
fsim_pickle_writer_bool(FsimPickleWriter *w, gboolean value)
{
    g_return_if_fail(w != NULL);
    if (!writer_before_value(w))
        return;
    writer_byte(w, value ? 0x88 : 0x89);
    writer_after_value(w);
}

void
fsim_pickle_writer_none(FsimPickleWriter *w)
{
    g_return_if_fail(w != NULL);
    if (!writer_before_value(w))
        return;
    writer_byte(w, 'N');
    writer_after_value(w);
}

void
fsim_pickle_writer_str_len(FsimPickleWriter *w, const char *s, gsize len)
{
    g_return_if_fail(w != NULL);
    g_return_if_fail(s != NULL || len == 0);
    if (!writer_before_value(w))
        return;
    gboolean memoize = len <= WRITER_MEMO_MAX_STR;
    if (memoize) {
        MemoKey key = {.len = len, .data = s};
        guint index = GPOINTER_TO_UINT(g_hash_table_lookup(w->memo, &key));
        if (index != 0) {
            index--;
            if (index < 256) {
                guint8 b[2] = {'h', (guint8)index};
                writer_put(w, b, 2);
            } else {
                writer_le32(w, 'j', index);
            }
            writer_after_value(w);
            return;
        }
        memoize = w->memo_next < WRITER_MEMO_MAX;
    }
    if (len < 256) {
        guint8 b[2] = {0x8c, (guint8)len};
        writer_put(w, b, 2);
    } else if (len <= UINT32_MAX) {
        writer_le32(w, 'X', (uint32_t)len);
    } else {
        writer_misuse(w, "a str of %" G_GSIZE_FORMAT " bytes does not fit BINUNICODE", len);
        return;
    }
    writer_put(w, s, len);
    if (memoize) {
        guint index = w->memo_next++;
        if (index < 256) {
            guint8 b[2] = {'q', (guint8)index};
            writer_put(w, b, 2);
        } else {
            writer_le32(w, 'r', index);
        }
        MemoKey *key = g_malloc(sizeof(MemoKey) + len);
        memcpy(key + 1, s, len);
        key->len = len;
        key->data = (const char *)(key + 1);
        g_hash_table_insert(w->memo, key, GUINT_TO_POINTER(index + 1));
    }
    writer_after_value(w);
}

void
fsim_pickle_writer_str(FsimPickleWriter *w, const char *s)
{
    g_return_if_fail(s != NULL);
    fsim_pickle_writer_str_len(w, s, strlen(s));
}

gboolean
fsim_pickle_writer_finish(FsimPickleWriter *w, GError **error)
{
    g_return_val_if_fail(w != NULL, FALSE);
    if (w->error == NULL && (w->frames->len > 0 || !w->root_done))
        writer_misuse(w, w->frames->len > 0 ? "finish with a container still open"
                                            : "finish before any value");
    writer_byte(w, '.');
    writer_flush(w);
    if (w->error == NULL)
        g_output_stream_flush(w->out, NULL, &w->error);
    if (w->error != NULL) {
        g_propagate_error(error, g_steal_pointer(&w->error));
        return FALSE;
    }
    return TRUE;
}
