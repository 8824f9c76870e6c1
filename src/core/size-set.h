/* SPDX-License-Identifier: MIT */
/*
 * An ordered set of (size, key) pairs, each with an item: the free blocks of a best-fit
 * allocator, ordered by size then address.  Policies spend most of a replay here (best fit is a
 * lower bound, a split an erase and an insert, a free two erases and an insert), so the set is
 * built for the cache rather than as a search tree:
 *
 *   bins     sizes fall into bins, sixteen per power of two (bin (e - 9) x 16 + k holds sizes
 *            in [2^e + k 2^(e-4), 2^e + (k+1) 2^(e-4)); below 544 bytes, bin 0), and a bitmap
 *            tells the non-empty ones: the first bin that can hold a size is a bitmap word or
 *            two away, and walking the bins in order walks the set in order;
 *   chunks   a bin is a list of chunks, each a sorted array of at most FSIM_SIZE_CHUNK entries
 *            with the pair inline.  A bin of a few entries is one short array (one binary
 *            search, a few entries moved per change); a bin of millions (a huge live set of
 *            equal sizes) is a two-level tree, the chunk found by a binary search over the
 *            chunks' last entries, so no change moves more than one chunk's entries and a few
 *            chunk pointers.  A chunk that empties goes (a bin keeps its last one for the next
 *            insertion); one that falls to a quarter full merges with a neighbour when the two
 *            fit in half a chunk, so chunks stay about a quarter full at the least.  The slots
 *            past a chunk's entries hold a sentinel pair greater than any other, so a search
 *            needs no test for an empty chunk.
 *
 * The functions are static inline: they are the hot path of a replay, compiled into each
 * policy's search and merge paths (as jemalloc keeps its ph.h and rb.h in headers).
 *
 * Why not GLib: bench/bench-structures times a lower bound, an erasure and an insertion per
 * operation (thread CPU time, gcc -O3, GLib 2.74, including the random draws all share, on the
 * project's loaded 2-core machine): with 64 and 4,096 free blocks this set took 139-176 ns,
 * GTree (g_tree_lower_bound) 2.3-2.6x as long and GSequence 4.7-5.3x; with 262,144 it took
 * 1.5 us, GTree 3.7x and GSequence 5.4x (the single sorted array per bin it replaced took 3.0 us
 * there, 1.8x faster than GTree, and grew linearly).  Both GLib structures also allocate a node
 * per insertion.
 */
#pragma once

#include <glib.h>

#include <stdint.h>
#include <string.h>

G_BEGIN_DECLS

#define FSIM_SIZE_SUBBINS_LOG2 4 /* sixteen bins per power of two */
#define FSIM_SIZE_MIN_LOG2     9
#define FSIM_SIZE_MIN          ((uint64_t)1 << FSIM_SIZE_MIN_LOG2)
#define FSIM_SIZE_BINS         ((64 - FSIM_SIZE_MIN_LOG2) << FSIM_SIZE_SUBBINS_LOG2)
#define FSIM_SIZE_WORDS        ((FSIM_SIZE_BINS + 63) / 64)
#define FSIM_SIZE_CHUNK        64u /* entries per chunk at most */
#define FSIM_SIZE_SLACK        4u  /* spare entries after a chunk's capacity */
#define FSIM_SIZE_MIN_CAPACITY 4u  /* of a chunk, which only grows */
/* the slots every chunk has, searched in three fixed steps (fsim_size_chunk_search()) */
#define FSIM_SIZE_WINDOW (FSIM_SIZE_MIN_CAPACITY + FSIM_SIZE_SLACK)
G_STATIC_ASSERT(FSIM_SIZE_WINDOW == 8);

typedef struct {
    uint64_t size;
    uint64_t key;
    gpointer item;
} FsimSizeEntry;

typedef struct {
    uint32_t len;
    uint32_t capacity;
    FsimSizeEntry entries[]; /* sorted by (size, key); capacity + FSIM_SIZE_SLACK long, the
                              * slots past @len FSIM_SIZE_SENTINEL */
} FsimSizeChunk;

/* What a slot past a chunk's entries holds as its size and key (its item is left as it is): all
 * ones, so that no search finds it less than a pair. */
#define FSIM_SIZE_SENTINEL      UINT64_MAX
#define FSIM_SIZE_SENTINEL_BYTE 0xff

typedef struct {
    union {
        FsimSizeChunk *single; /* n_chunks <= 1 */
        FsimSizeChunk **many;  /* n_chunks > 1: in order */
    } u;
    uint32_t n_chunks;
    uint32_t capacity; /* of u.many */
} FsimSizeBin;

typedef struct {
    FsimSizeBin bins[FSIM_SIZE_BINS];
    uint64_t nonempty[FSIM_SIZE_WORDS]; /* bit b: bins[b] has entries */
    gsize count;
} FsimSizeSet;

/* A position in a set: @bin == FSIM_SIZE_BINS past the end, else entry @pos of chunk number
 * @chunk (@at) of bin @bin.  Valid until the set changes. */
typedef struct {
    guint bin;
    guint chunk;
    guint pos;
    FsimSizeChunk *at;
} FsimSizeCursor;

static inline guint
fsim_size_set_bin(uint64_t size)
{
    /* sizes below 2^FSIM_SIZE_MIN_LOG2 count as that size (a select, not a branch): bin 0 */
    uint64_t s = size < FSIM_SIZE_MIN ? FSIM_SIZE_MIN : size;
    /* the highest bit set: 63 - clz, written as 63 ^ clz so that gcc emits one bsr (63 - clz
     * compiled to bsr, a xor with 63 and the subtraction undoing it) */
    guint e = 63u ^ (guint)__builtin_clzll(s);

    /* s >> (e - 3) is 8 + the sub-bin */
    return (guint)(s >> (e - FSIM_SIZE_SUBBINS_LOG2)) + (e << FSIM_SIZE_SUBBINS_LOG2) -
           ((FSIM_SIZE_MIN_LOG2 + 1) << FSIM_SIZE_SUBBINS_LOG2);
}

static inline FsimSizeChunk *const *
fsim_size_bin_chunks(const FsimSizeBin *bin)
{
    return bin->n_chunks <= 1 ? &bin->u.single : bin->u.many;
}

static inline FsimSizeChunk **
fsim_size_bin_chunks_mut(FsimSizeBin *bin)
{
    return bin->n_chunks <= 1 ? &bin->u.single : bin->u.many;
}

/* The first non-empty bin at or after @bin, FSIM_SIZE_BINS if none. */
static inline guint
fsim_size_set_next_bin(const FsimSizeSet *set, guint bin)
{
    guint w = bin >> 6;
    uint64_t word;

    if (bin >= FSIM_SIZE_BINS)
        return FSIM_SIZE_BINS;
    word = set->nonempty[w] & (~(uint64_t)0 << (bin & 63));
    while (word == 0) {
        if (++w == FSIM_SIZE_WORDS)
            return FSIM_SIZE_BINS;
        word = set->nonempty[w];
    }
    return (w << 6) + (guint)__builtin_ctzll(word);
}

/* The last non-empty bin at or before @bin, G_MAXUINT if none. */
static inline guint
fsim_size_set_prev_bin(const FsimSizeSet *set, guint bin)
{
    guint w = bin >> 6;
    uint64_t word = set->nonempty[w] & (~(uint64_t)0 >> (63 - (bin & 63)));

    while (word == 0) {
        if (w == 0)
            return G_MAXUINT;
        word = set->nonempty[--w];
    }
    return (w << 6) + 63u - (guint)__builtin_clzll(word);
}

__extension__ typedef unsigned __int128 FsimSizeU128;

static inline G_ALWAYS_INLINE gboolean
fsim_size_entry_less(const FsimSizeEntry *e, uint64_t size, uint64_t key)
{
    /* a lower bound at key 0 (the least of a size): the size alone decides */
    if (__builtin_constant_p(key) && key == 0)
        return e->size < size;
    /* one 128-bit comparison: a compare and a subtract with borrow, no branch */
    return (((FsimSizeU128)e->size << 64) | e->key) < (((FsimSizeU128)size << 64) | key);
}

/* The index of the first entry of @chunk at or after (size, key): a binary search that selects
 * by arithmetic, not by a branch on each comparison (they are unpredictable, the loads cheap).
 * A chunk of at most FSIM_SIZE_WINDOW entries (nine searches in ten on a random trace, most of
 * them of 0 to 2) is searched over its first FSIM_SIZE_WINDOW slots, in three steps whatever its
 * length: the slots past the entries hold FSIM_SIZE_SENTINEL, never less than a pair, so the
 * answer is the same, and there is no loop whose exit follows the length (the exit of a search
 * over the length mispredicted about 0.6 times a search).  Longer chunks are searched over their
 * length. */
static inline G_ALWAYS_INLINE guint
fsim_size_chunk_search(const FsimSizeChunk *chunk, uint64_t size, uint64_t key)
{
    const FsimSizeEntry *base = chunk->entries;
    guint n = chunk->len;

    if (G_LIKELY(n <= FSIM_SIZE_WINDOW)) {
        /* three fixed halvings of the first eight slots, whatever the length */
        base += 4 * (guint)fsim_size_entry_less(&base[3], size, key);
        base += 2 * (guint)fsim_size_entry_less(&base[1], size, key);
        base += (guint)fsim_size_entry_less(&base[0], size, key);
        return (guint)(base - chunk->entries) + (guint)fsim_size_entry_less(base, size, key);
    }
    while (n > 1) {
        guint half = n / 2;

        base += half * (guint)fsim_size_entry_less(&base[half - 1], size, key);
        n -= half;
    }
    return (guint)(base - chunk->entries) + (guint)fsim_size_entry_less(base, size, key);
}

/* The chunk of @bin (with more than one) where (size, key) belongs: the first whose last entry
 * is at or after it, else the last one. */
static inline guint
fsim_size_bin_find_chunk(const FsimSizeBin *bin, uint64_t size, uint64_t key)
{
    FsimSizeChunk *const *chunks = bin->u.many;
    guint lo = 0;
    guint hi = bin->n_chunks - 1;

    while (lo < hi) {
        guint mid = (lo + hi) / 2;
        const FsimSizeChunk *c = chunks[mid];

        if (fsim_size_entry_less(&c->entries[c->len - 1], size, key))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Where (size, key) is or would go in its bin: @cursor's chunk and position (possibly one past
 * the chunk's end); @cursor->at NULL, or an empty chunk, when the bin is empty. */
static inline void
fsim_size_set_locate(const FsimSizeSet *set, uint64_t size, uint64_t key, FsimSizeCursor *cursor)
{
    const FsimSizeBin *bin;

    cursor->bin = fsim_size_set_bin(size);
    bin = &set->bins[cursor->bin];
    if (G_LIKELY(bin->n_chunks <= 1)) {
        /* one chunk, or the empty one an emptied bin keeps */
        cursor->chunk = 0;
        cursor->at = bin->u.single;
        if (G_UNLIKELY(cursor->at == NULL)) {
            cursor->pos = 0;
            return;
        }
    } else {
        cursor->chunk = fsim_size_bin_find_chunk(bin, size, key);
        cursor->at = bin->u.many[cursor->chunk];
    }
    cursor->pos = fsim_size_chunk_search(cursor->at, size, key);
}

static inline const FsimSizeEntry *
fsim_size_set_entry(const FsimSizeCursor *cursor)
{
    return cursor->bin < FSIM_SIZE_BINS ? &cursor->at->entries[cursor->pos] : NULL;
}

static inline gpointer
fsim_size_set_item(const FsimSizeCursor *cursor)
{
    return cursor->bin < FSIM_SIZE_BINS ? cursor->at->entries[cursor->pos].item : NULL;
}

/* Move @cursor to the first entry of the first non-empty bin at or after @bin. */
static inline gpointer
fsim_size_set_first_from(const FsimSizeSet *set, guint bin, FsimSizeCursor *cursor)
{
    cursor->bin = fsim_size_set_next_bin(set, bin);
    cursor->chunk = 0;
    cursor->pos = 0;
    if (cursor->bin >= FSIM_SIZE_BINS) {
        cursor->at = NULL; /* never read past the end, but gcc -O2 cannot tell */
        return NULL;
    }
    cursor->at = fsim_size_bin_chunks(&set->bins[cursor->bin])[0];
    return cursor->at->entries[0].item;
}

/* The first entry at or after (size, key), or NULL (and @cursor past the end). */
static inline gpointer
fsim_size_set_lower_bound(const FsimSizeSet *set, uint64_t size, uint64_t key,
                          FsimSizeCursor *cursor)
{
    guint b = fsim_size_set_bin(size);

    /* an empty bin is one bit of the bitmap: its kept chunk is not read */
    if (((set->nonempty[b >> 6] >> (b & 63)) & 1) == 0)
        return fsim_size_set_first_from(set, b + 1, cursor);
    /* the bin's first entry when it is the bound, without a search (a best fit in a bin of many
     * equal sizes: the lowest key of the size asked for) */
    cursor->at = fsim_size_bin_chunks(&set->bins[b])[0];
    if (!fsim_size_entry_less(&cursor->at->entries[0], size, key)) {
        cursor->bin = b;
        cursor->chunk = 0;
        cursor->pos = 0;
        return cursor->at->entries[0].item;
    }
    fsim_size_set_locate(set, size, key, cursor);
    if (cursor->pos < cursor->at->len)
        return cursor->at->entries[cursor->pos].item;
    /* past the end of its chunk: that is the end of the bin (the chunk's last entry is less) */
    return fsim_size_set_first_from(set, cursor->bin + 1, cursor);
}

/* fsim_size_set_lower_bound() without its two early answers: the first non-empty bin at or
 * after the size's is searched whichever it is (a later bin's entries are all at least the
 * bound, so its search answers 0), so the only test on the data is whether the answer is past
 * the end of the size's bin.  Whether the size's bin is empty and whether its first entry is
 * the bound are as random as the requests on a random trace (0.3 mispredicted branches a lower
 * bound there), and a few instructions more cost less than that; the device's bins of many
 * equal sizes, which the early answers serve, want fsim_size_set_lower_bound(). */
static inline G_ALWAYS_INLINE gpointer
fsim_size_set_lower_bound_searched(const FsimSizeSet *set, uint64_t size, uint64_t key,
                                   FsimSizeCursor *cursor)
{
    const FsimSizeBin *bin;

    cursor->bin = fsim_size_set_next_bin(set, fsim_size_set_bin(size));
    if (G_UNLIKELY(cursor->bin >= FSIM_SIZE_BINS)) {
        cursor->at = NULL;
        return NULL;
    }
    bin = &set->bins[cursor->bin];
    if (G_LIKELY(bin->n_chunks == 1)) {
        cursor->chunk = 0;
        cursor->at = bin->u.single;
    } else {
        cursor->chunk = fsim_size_bin_find_chunk(bin, size, key);
        cursor->at = bin->u.many[cursor->chunk];
    }
    cursor->pos = fsim_size_chunk_search(cursor->at, size, key);
    if (G_LIKELY(cursor->pos < cursor->at->len))
        return cursor->at->entries[cursor->pos].item;
    /* past the end of its chunk: that is the end of the bin (the chunk's last entry is less) */
    return fsim_size_set_first_from(set, cursor->bin + 1, cursor);
}

static inline gpointer
fsim_size_set_first(const FsimSizeSet *set, FsimSizeCursor *cursor)
{
    return fsim_size_set_first_from(set, 0, cursor);
}

/* The last entry of bin @b, found by fsim_size_set_prev_bin(): G_MAXUINT (none) leaves @cursor
 * past the end and returns NULL. */
static inline gpointer
fsim_size_set_last_of(const FsimSizeSet *set, guint b, FsimSizeCursor *cursor)
{
    const FsimSizeBin *bin;

    if (b == G_MAXUINT) {
        cursor->bin = FSIM_SIZE_BINS;
        return NULL;
    }
    bin = &set->bins[b];
    cursor->bin = b;
    cursor->chunk = bin->n_chunks - 1;
    cursor->at = fsim_size_bin_chunks(bin)[cursor->chunk];
    cursor->pos = cursor->at->len - 1;
    return cursor->at->entries[cursor->pos].item;
}

static inline gpointer
fsim_size_set_last(const FsimSizeSet *set, FsimSizeCursor *cursor)
{
    return fsim_size_set_last_of(set, fsim_size_set_prev_bin(set, FSIM_SIZE_BINS - 1), cursor);
}

/* Step @cursor to the next entry in order (NULL at the end). */
static inline gpointer
fsim_size_set_next(const FsimSizeSet *set, FsimSizeCursor *cursor)
{
    const FsimSizeBin *bin;

    if (cursor->bin >= FSIM_SIZE_BINS)
        return NULL;
    if (++cursor->pos < cursor->at->len)
        return cursor->at->entries[cursor->pos].item;
    bin = &set->bins[cursor->bin];
    if (cursor->chunk + 1 < bin->n_chunks) {
        cursor->at = bin->u.many[++cursor->chunk];
        cursor->pos = 0;
        return cursor->at->entries[0].item;
    }
    return fsim_size_set_first_from(set, cursor->bin + 1, cursor);
}

/* Step @cursor to the previous entry in order (NULL before the first). */
static inline gpointer
fsim_size_set_prev(const FsimSizeSet *set, FsimSizeCursor *cursor)
{
    if (cursor->bin >= FSIM_SIZE_BINS)
        return NULL;
    if (cursor->pos > 0) {
        cursor->pos--;
        return cursor->at->entries[cursor->pos].item;
    }
    if (cursor->chunk > 0) {
        cursor->at = set->bins[cursor->bin].u.many[--cursor->chunk];
        cursor->pos = cursor->at->len - 1;
        return cursor->at->entries[cursor->pos].item;
    }
    return fsim_size_set_last_of(
        set, cursor->bin == 0 ? G_MAXUINT : fsim_size_set_prev_bin(set, cursor->bin - 1), cursor);
}

/* The cursor of the entry (size, key, item), FALSE when absent. */
static inline gboolean
fsim_size_set_find(const FsimSizeSet *set, uint64_t size, uint64_t key, gconstpointer item,
                   FsimSizeCursor *cursor)
{
    const FsimSizeEntry *entry;

    fsim_size_set_locate(set, size, key, cursor);
    if (cursor->at == NULL || cursor->pos >= cursor->at->len)
        return FALSE;
    entry = &cursor->at->entries[cursor->pos];
    return entry->item == item && entry->size == size && entry->key == key;
}

/* Move @n entries from @src to @dst within one chunk.  Chunks have FSIM_SIZE_SLACK spare
 * entries after their capacity, so a short move is a fixed FSIM_SIZE_SLACK entries, which
 * compiles to a few loads and stores without a branch on @n (libc's memmove branches on the
 * length, and the lengths here vary at random). */
typedef uint64_t FsimSizeVec __attribute__((vector_size(16)));

G_STATIC_ASSERT(FSIM_SIZE_SLACK * sizeof(FsimSizeEntry) == 6 * sizeof(FsimSizeVec));

static inline void
fsim_size_entries_move(FsimSizeEntry *dst, const FsimSizeEntry *src, guint n)
{
    if (G_LIKELY(n <= FSIM_SIZE_SLACK)) {
        const char *from = (const char *)src;
        char *to = (char *)dst;
        FsimSizeVec v0, v1, v2, v3, v4, v5;

        /* FSIM_SIZE_SLACK entries, six 16-byte loads, then six stores: no call, and held in
         * registers (a buffer of entries was stored to the stack on the way) */
        memcpy(&v0, from, 16);
        memcpy(&v1, from + 16, 16);
        memcpy(&v2, from + 32, 16);
        memcpy(&v3, from + 48, 16);
        memcpy(&v4, from + 64, 16);
        memcpy(&v5, from + 80, 16);
        memcpy(to, &v0, 16);
        memcpy(to + 16, &v1, 16);
        memcpy(to + 32, &v2, 16);
        memcpy(to + 48, &v3, 16);
        memcpy(to + 64, &v4, 16);
        memcpy(to + 80, &v5, 16);
    } else {
        memmove(dst, src, n * sizeof(FsimSizeEntry));
    }
}

/* Out-of-line, rare: the changes to a bin's list of chunks (size-set.c). */
void fsim_size_bin_split(FsimSizeBin *bin, guint chunk);
void fsim_size_bin_drop(FsimSizeBin *bin, guint chunk);
void fsim_size_bin_merge(FsimSizeBin *bin, guint chunk);
FsimSizeChunk *fsim_size_chunk_grow(FsimSizeChunk *chunk);

static inline void
fsim_size_set_insert(FsimSizeSet *set, uint64_t size, uint64_t key, gpointer item)
{
    FsimSizeCursor at;
    FsimSizeBin *bin;
    FsimSizeChunk *chunk;

    fsim_size_set_locate(set, size, key, &at);
    bin = &set->bins[at.bin];
    chunk = at.at;
    if (G_UNLIKELY(chunk == NULL))
        chunk = bin->u.single = fsim_size_chunk_grow(NULL);
    if (G_UNLIKELY(chunk->len == chunk->capacity)) {
        FsimSizeChunk **chunks = fsim_size_bin_chunks_mut(bin);

        if (chunk->capacity < FSIM_SIZE_CHUNK) {
            chunk = chunks[at.chunk] = fsim_size_chunk_grow(chunk);
        } else {
            fsim_size_bin_split(bin, at.chunk);
            if (at.pos > chunk->len) {
                at.pos -= chunk->len;
                chunk = bin->u.many[at.chunk + 1];
            }
        }
    }
    /* an empty chunk is an empty bin's: it has one chunk now (no branch) */
    bin->n_chunks += chunk->len == 0;
    set->nonempty[at.bin >> 6] |= (uint64_t)1 << (at.bin & 63);
    fsim_size_entries_move(&chunk->entries[at.pos + 1], &chunk->entries[at.pos],
                           chunk->len - at.pos);
    chunk->entries[at.pos].size = size;
    chunk->entries[at.pos].key = key;
    chunk->entries[at.pos].item = item;
    chunk->len++;
    set->count++;
}

static inline void
fsim_size_set_erase_at(FsimSizeSet *set, const FsimSizeCursor *cursor)
{
    FsimSizeChunk *chunk = cursor->at;
    FsimSizeBin *bin = &set->bins[cursor->bin];

    chunk->len--;
    fsim_size_entries_move(&chunk->entries[cursor->pos], &chunk->entries[cursor->pos + 1],
                           chunk->len - cursor->pos);
    /* the slot of the last entry is past the end now */
    chunk->entries[chunk->len].size = FSIM_SIZE_SENTINEL;
    chunk->entries[chunk->len].key = FSIM_SIZE_SENTINEL;
    set->count--;
    if (G_LIKELY(bin->n_chunks == 1)) {
        /* the bin empties when its chunk does; the chunk stays for the next insertion */
        bin->n_chunks = chunk->len != 0;
        set->nonempty[cursor->bin >> 6] &= ~((uint64_t)(chunk->len == 0) << (cursor->bin & 63));
    } else if (chunk->len == 0) {
        fsim_size_bin_drop(bin, cursor->chunk);
    } else if (chunk->len <= FSIM_SIZE_CHUNK / 4) {
        fsim_size_bin_merge(bin, cursor->chunk);
    }
}

/* Replace the entry at @cursor by (size, key, item): in place when the new pair keeps its bin
 * and its place between its neighbours in the chunk (a free range shrunk or grown a little),
 * else an erasure and an insertion.  @cursor is spent. */
static inline void
fsim_size_set_replace_at(FsimSizeSet *set, const FsimSizeCursor *cursor, uint64_t size,
                         uint64_t key, gpointer item)
{
    FsimSizeChunk *chunk = cursor->at;
    guint pos = cursor->pos;

    if (fsim_size_set_bin(size) == cursor->bin &&
        (pos == 0 ? cursor->chunk == 0
                  : fsim_size_entry_less(&chunk->entries[pos - 1], size, key)) &&
        (pos + 1 == chunk->len ? cursor->chunk + 1 == set->bins[cursor->bin].n_chunks
                               : !fsim_size_entry_less(&chunk->entries[pos + 1], size, key + 1))) {
        chunk->entries[pos].size = size;
        chunk->entries[pos].key = key;
        chunk->entries[pos].item = item;
        return;
    }
    fsim_size_set_erase_at(set, cursor);
    fsim_size_set_insert(set, size, key, item);
}

/* Erase (size, key, item), which must be in the set. */
static inline void
fsim_size_set_erase(FsimSizeSet *set, uint64_t size, uint64_t key, gconstpointer item)
{
    FsimSizeCursor cursor;
    gboolean found = fsim_size_set_find(set, size, key, item, &cursor);

    g_assert(found);
    fsim_size_set_erase_at(set, &cursor);
}

static inline void
fsim_size_set_init(FsimSizeSet *set)
{
    memset(set, 0, sizeof(*set));
}

/* The set's own invariants: entries in order and in their bins, no chunk empty or overfull, the
 * bitmap and the count right.  NULL when they hold, else what is wrong. */
const char *fsim_size_set_check(const FsimSizeSet *set);

/* Free the set's memory (not the items). */
void fsim_size_set_clear(FsimSizeSet *set);

G_END_DECLS
