/* SPDX-License-Identifier: MIT */
/*
 * An ordered set of (size, key) pairs, each with an item, for sizes that are multiples of
 * FSIM_CLASS_UNIT (512) up to FSIM_CLASS_MAX_SIZE (2 MiB): the free blocks of PyTorch's small
 * pool.  Each size is a class of its own (4,096 of them), and a two-level bitmap tells the
 * non-empty ones, so
 *
 *   best fit   the first entry of the first non-empty class at or after the size's: a bitmap word
 *              or two, without a search (every entry of a class has the class's size);
 *   changes    an insertion or an erasure searches its class's keys alone: 64-bit comparisons
 *              over 16-byte entries, one array a class (most classes hold none or one entry).
 *
 * Walking the classes in order walks the set in (size, key) order.  A class's entries are a
 * sorted array with FSIM_CLASS_SLACK spare slots after its capacity, those past its entries
 * holding the key FSIM_CLASS_SENTINEL, so that a search of a short class takes fixed steps and a
 * short move is a fixed-size copy (as in core/size-set.h); an array's header and the keys of its
 * first four slots share its first cache line.  A class holds FSIM_CLASS_MAX_LEN
 * entries at most: fsim_class_set_insert() refuses one more, and the caller keeps the entry
 * elsewhere (the free-block set then moves everything to a size set: a class of thousands of
 * equal blocks is what a size set's chunk lists are for).
 *
 * The functions are static inline, the hot path of a replay (as core/size-set.h).
 */
#pragma once

#include <glib.h>

#include <stdint.h>
#include <string.h>

G_BEGIN_DECLS

#define FSIM_CLASS_UNIT_LOG2 9
#define FSIM_CLASS_UNIT      ((uint64_t)1 << FSIM_CLASS_UNIT_LOG2)
#define FSIM_CLASS_COUNT     4096u
#define FSIM_CLASS_WORDS     (FSIM_CLASS_COUNT / 64)
#define FSIM_CLASS_MAX_SIZE  ((uint64_t)FSIM_CLASS_COUNT << FSIM_CLASS_UNIT_LOG2)
#define FSIM_CLASS_SLACK     2u    /* spare entries after a class's capacity */
#define FSIM_CLASS_MIN_CAP   2u    /* of a class's array, which only grows */
#define FSIM_CLASS_MAX_LEN   1024u /* entries of one class at most */
#define FSIM_CLASS_WINDOW    (FSIM_CLASS_MIN_CAP + FSIM_CLASS_SLACK)
#define FSIM_CLASS_SENTINEL  UINT64_MAX
G_STATIC_ASSERT(FSIM_CLASS_WORDS == 64);
G_STATIC_ASSERT(FSIM_CLASS_WINDOW == 4);

typedef struct {
    uint64_t key;
    gpointer item;
} FsimClassEntry;

typedef struct {
    uint32_t len;
    uint32_t capacity;
    FsimClassEntry entries[]; /* sorted by key; capacity + FSIM_CLASS_SLACK long, the keys past
                               * @len FSIM_CLASS_SENTINEL */
} FsimClassArray;

typedef struct {
    uint64_t top;                     /* bit w: words[w] != 0 */
    uint64_t words[FSIM_CLASS_WORDS]; /* bit b of word w: class 64 w + b has entries */
    FsimClassArray *classes[FSIM_CLASS_COUNT];
    gsize count;
} FsimClassSet;

/* A position: entry @pos of class @cls, @cls == FSIM_CLASS_COUNT past the end.  Valid until the
 * set changes. */
typedef struct {
    guint cls;
    guint pos;
} FsimClassCursor;

/* The class of @size, 1 <= size <= FSIM_CLASS_MAX_SIZE: sizes (512 c, 512 (c + 1)]. */
static inline guint
fsim_class_of(uint64_t size)
{
    return (guint)((size - 1) >> FSIM_CLASS_UNIT_LOG2);
}

/* The size of every entry of class @cls. */
static inline uint64_t
fsim_class_size(guint cls)
{
    return ((uint64_t)cls + 1) << FSIM_CLASS_UNIT_LOG2;
}

/* The first non-empty class at or after @cls, FSIM_CLASS_COUNT if none.  Whether the answer
 * is in @cls's own word is as random as the requests, so both answers are worked out and one
 * selected: no branch on it. */
static inline G_ALWAYS_INLINE guint
fsim_class_set_next_class(const FsimClassSet *set, guint cls)
{
    guint w = cls >> 6;
    uint64_t word;
    uint64_t top;
    guint own;
    guint later;
    guint w2;
    guint mask;

    if (G_UNLIKELY(cls >= FSIM_CLASS_COUNT))
        return FSIM_CLASS_COUNT;
    word = set->words[w] & (~(uint64_t)0 << (cls & 63));
    /* the first class of the later words (none reads as word 63's: only selected when it is
     * the answer) */
    top = set->top & ((~(uint64_t)0 << w) << 1);
    w2 = (guint)__builtin_ctzll(top | ((uint64_t)1 << 63));
    later = (w2 << 6) + (guint)__builtin_ctzll(set->words[w2] | ((uint64_t)1 << 63));
    later = top != 0 ? later : FSIM_CLASS_COUNT;
    own = (w << 6) + (guint)__builtin_ctzll(word | ((uint64_t)1 << 63));
    mask = -(guint)(word != 0); /* a select, not a branch (gcc keeps one for ?: here) */
    return (own & mask) | (later & ~mask);
}

/* The last non-empty class at or before @cls, G_MAXUINT if none. */
static inline guint
fsim_class_set_prev_class(const FsimClassSet *set, guint cls)
{
    guint w = cls >> 6;
    uint64_t word = set->words[w] & (~(uint64_t)0 >> (63 - (cls & 63)));
    uint64_t top;

    if (word != 0)
        return (w << 6) + (63u ^ (guint)__builtin_clzll(word));
    top = set->top & (((uint64_t)1 << w) - 1);
    if (top == 0)
        return G_MAXUINT;
    w = 63u ^ (guint)__builtin_clzll(top);
    return (w << 6) + (63u ^ (guint)__builtin_clzll(set->words[w]));
}

/* The index of the first entry of @array whose key is at least @key.  An array of at most
 * FSIM_CLASS_WINDOW entries (most: classes are short) counts the keys below @key among its first
 * FSIM_CLASS_WINDOW slots, whatever its length (the sentinels past its entries are never below):
 * four independent comparisons, all on the array's first line, where three halvings of eight
 * slots (the size set's window) read two lines and wait on each other.  Longer arrays are
 * searched over their length. */
static inline G_ALWAYS_INLINE guint
fsim_class_array_search(const FsimClassArray *array, uint64_t key)
{
    const FsimClassEntry *base = array->entries;
    guint n = array->len;

    if (G_LIKELY(n <= FSIM_CLASS_WINDOW)) {
        return (guint)(base[0].key < key) + (guint)(base[1].key < key) +
               (guint)(base[2].key < key) + (guint)(base[3].key < key);
    }
    while (n > 1) {
        guint half = n / 2;

        base += half * (guint)(base[half - 1].key < key);
        n -= half;
    }
    return (guint)(base - array->entries) + (guint)(base[0].key < key);
}

/* Move @n entries from @src to @dst within one array: FSIM_CLASS_SLACK entries whatever @n when
 * @n is at most that (the slack after the capacity holds them), no call and no branch on @n. */
typedef uint64_t FsimClassVec __attribute__((vector_size(16)));

G_STATIC_ASSERT(FSIM_CLASS_SLACK * sizeof(FsimClassEntry) == 2 * sizeof(FsimClassVec));

static inline G_ALWAYS_INLINE void
fsim_class_entries_move(FsimClassEntry *dst, const FsimClassEntry *src, guint n)
{
    if (G_LIKELY(n <= FSIM_CLASS_SLACK)) {
        const char *from = (const char *)src;
        char *to = (char *)dst;
        FsimClassVec v0, v1;

        memcpy(&v0, from, 16);
        memcpy(&v1, from + 16, 16);
        memcpy(to, &v0, 16);
        memcpy(to + 16, &v1, 16);
    } else {
        memmove(dst, src, n * sizeof(FsimClassEntry));
    }
}

/* Out of line, rare (class-set.c): a class's array grown to hold one more entry, FALSE when it
 * holds FSIM_CLASS_MAX_LEN already. */
gboolean fsim_class_set_grow(FsimClassSet *set, guint cls);

static inline gpointer
fsim_class_set_item(const FsimClassSet *set, const FsimClassCursor *cursor)
{
    return set->classes[cursor->cls]->entries[cursor->pos].item;
}

static inline uint64_t
fsim_class_set_key(const FsimClassSet *set, const FsimClassCursor *cursor)
{
    return set->classes[cursor->cls]->entries[cursor->pos].key;
}

/* The first entry of the first non-empty class at or after @cls, or NULL (@cursor past the
 * end). */
static inline G_ALWAYS_INLINE gpointer
fsim_class_set_first_from(const FsimClassSet *set, guint cls, FsimClassCursor *cursor)
{
    cursor->cls = fsim_class_set_next_class(set, cls);
    cursor->pos = 0;
    if (cursor->cls >= FSIM_CLASS_COUNT)
        return NULL;
    return set->classes[cursor->cls]->entries[0].item;
}

/* The first entry of size >= @size (1 <= size <= FSIM_CLASS_MAX_SIZE) at key 0, or NULL: the
 * first entry of the first non-empty class from @size's, no search. */
static inline G_ALWAYS_INLINE gpointer
fsim_class_set_lower_bound(const FsimClassSet *set, uint64_t size, FsimClassCursor *cursor)
{
    return fsim_class_set_first_from(set, fsim_class_of(size), cursor);
}

/* The last entry of class @cls (G_MAXUINT: none, NULL and @cursor past the end). */
static inline gpointer
fsim_class_set_last_of(const FsimClassSet *set, guint cls, FsimClassCursor *cursor)
{
    if (cls == G_MAXUINT) {
        cursor->cls = FSIM_CLASS_COUNT;
        cursor->pos = 0;
        return NULL;
    }
    cursor->cls = cls;
    cursor->pos = set->classes[cls]->len - 1;
    return set->classes[cls]->entries[cursor->pos].item;
}

static inline gpointer
fsim_class_set_last(const FsimClassSet *set, FsimClassCursor *cursor)
{
    return fsim_class_set_last_of(set, fsim_class_set_prev_class(set, FSIM_CLASS_COUNT - 1),
                                  cursor);
}

/* Step @cursor to the next entry in (size, key) order (NULL at the end). */
static inline gpointer
fsim_class_set_next(const FsimClassSet *set, FsimClassCursor *cursor)
{
    if (cursor->cls >= FSIM_CLASS_COUNT)
        return NULL;
    if (++cursor->pos < set->classes[cursor->cls]->len)
        return set->classes[cursor->cls]->entries[cursor->pos].item;
    return fsim_class_set_first_from(set, cursor->cls + 1, cursor);
}

/* Step @cursor to the previous entry (NULL before the first). */
static inline gpointer
fsim_class_set_prev(const FsimClassSet *set, FsimClassCursor *cursor)
{
    if (cursor->cls >= FSIM_CLASS_COUNT)
        return NULL;
    if (cursor->pos > 0) {
        cursor->pos--;
        return set->classes[cursor->cls]->entries[cursor->pos].item;
    }
    return fsim_class_set_last_of(
        set, cursor->cls == 0 ? G_MAXUINT : fsim_class_set_prev_class(set, cursor->cls - 1),
        cursor);
}

/* The cursor of (size, key, item), FALSE when absent. */
static inline G_ALWAYS_INLINE gboolean
fsim_class_set_find(const FsimClassSet *set, uint64_t size, uint64_t key, gconstpointer item,
                    FsimClassCursor *cursor)
{
    const FsimClassArray *array;

    cursor->cls = fsim_class_of(size);
    array = set->classes[cursor->cls];
    if (array == NULL || fsim_class_size(cursor->cls) != size)
        return FALSE;
    cursor->pos = fsim_class_array_search(array, key);
    return cursor->pos < array->len && array->entries[cursor->pos].key == key &&
           array->entries[cursor->pos].item == item;
}

/* Insert (size, key, item), size a multiple of FSIM_CLASS_UNIT in [FSIM_CLASS_UNIT,
 * FSIM_CLASS_MAX_SIZE]; FALSE (the set unchanged) when its class is full. */
static inline G_ALWAYS_INLINE gboolean
fsim_class_set_insert(FsimClassSet *set, uint64_t size, uint64_t key, gpointer item)
{
    guint cls = fsim_class_of(size);
    FsimClassArray *array = set->classes[cls];
    guint pos;

    if (G_UNLIKELY(array == NULL || array->len == array->capacity)) {
        if (!fsim_class_set_grow(set, cls))
            return FALSE;
        array = set->classes[cls];
    }
    pos = fsim_class_array_search(array, key);
    fsim_class_entries_move(&array->entries[pos + 1], &array->entries[pos], array->len - pos);
    array->entries[pos].key = key;
    array->entries[pos].item = item;
    array->len++;
    set->words[cls >> 6] |= (uint64_t)1 << (cls & 63);
    set->top |= (uint64_t)1 << (cls >> 6);
    set->count++;
    return TRUE;
}

static inline G_ALWAYS_INLINE void
fsim_class_set_erase_at(FsimClassSet *set, const FsimClassCursor *cursor)
{
    guint cls = cursor->cls;
    FsimClassArray *array = set->classes[cls];
    uint64_t *word = &set->words[cls >> 6];

    array->len--;
    fsim_class_entries_move(&array->entries[cursor->pos], &array->entries[cursor->pos + 1],
                            array->len - cursor->pos);
    array->entries[array->len].key = FSIM_CLASS_SENTINEL;
    set->count--;
    /* the class's bit goes when it empties, the word's when that was its last (no branch) */
    *word &= ~((uint64_t)(array->len == 0) << (cls & 63));
    set->top &= ~((uint64_t)(*word == 0) << (cls >> 6));
}

/* Move every entry to @each, in order, and empty the set (its arrays kept). */
void fsim_class_set_drain(FsimClassSet *set,
                          void (*each)(uint64_t size, uint64_t key, gpointer item, gpointer data),
                          gpointer data);

/* The set's own invariants: keys in order in each class, the bitmaps and the count right.  NULL
 * when they hold, else what is wrong. */
const char *fsim_class_set_check(const FsimClassSet *set);

/* A new, empty set; free it with fsim_class_set_free(). */
FsimClassSet *fsim_class_set_new(void);
void fsim_class_set_free(FsimClassSet *set);

G_END_DECLS
