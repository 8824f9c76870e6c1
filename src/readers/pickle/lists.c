/* SPDX-License-Identifier: MIT */
/*
 * The unpickler's hot paths (machine.h): the opcodes that make up most of a real snapshot, run
 * without the generic dispatch when the whole input is in memory.
 *
 * A snapshot's bulk is its stacks: every trace entry carries `frames`, a fresh list of memo
 * references to shared frame dicts, written as
 *
 *     EMPTY_LIST MEMOIZE MARK BINGET i1 BINGET i2 ... BINGET in APPENDS
 *
 * and a few hundred distinct stacks recur thousands of times.  Two paths take them:
 *
 * * run_memo_gets(): runs of BINGET / LONG_BINGET pushed in line, each a load, a reference and a
 *   store, until another opcode (or anything unusual: an unset entry, a full stack) hands back
 *   to the generic handlers, which then do the same work and report any error.
 *
 * * run_memo_list(): at a MARK above an empty, unshared list, when what follows is a run of memo
 *   gets and APPENDS, the run's bytes are looked up in a small cache of lists built from the same
 *   bytes (LIST_CACHE_WAYS-way buckets keyed by the run's first LIST_PREFIX bytes, so that a
 *   long run is found without decoding it first: a hit is a cached run whose bytes are there,
 *   followed by APPENDS; a bucket's ways are found by 16-bit tags of their hashes, half a cache
 *   line a bucket, so that a lookup reads only the ways whose tag is the run's, and a hit points
 *   its way at the run just read, whose bytes are the likelier in cache next time).  On a hit the
 *   new list shares the cached list's item array (one reference to
 *   each item for all the lists that share it: value_share_twin()), height and node
 *   count, without pushing, checking and adopting each item: equal bytes name the same memo
 *   entries, and the entries are the same values as long as no memo entry was *replaced* since
 *   (Loader.memo_generation, which PUT over a set entry bumps; picklers never do it) and the
 *   cached list has not grown since.  The limits hold as on the generic path: the cached list
 *   passed the depth and node limits at an earlier offset, and the node limit only grows with the
 *   offset.  On a miss the run is pushed and appended as the generic path would, and the list is
 *   cached.  Lists that share an array carry its twin number (fsim_pickle_list_twin()), by which
 *   a reader knows them for lists of the same items without comparing them; a list modified
 *   later gets an array of its own first.  The cache holds a reference to each list it keeps
 *   (LIST_CACHE_SLOTS lists of at most LIST_CACHE_ITEMS items: at most 5.2 MiB of item arrays,
 *   counted against the budget like any value, as the cache's own 120 KiB are); the result is the
 *   same value graph either way, with less memory: the copies hold no item array of their own.
 */
#include <glib.h>

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "machine.h"

/* The cache's own memory, counted against the budget: the ways, their tags and lengths, the
 * buckets' next way to replace. */
#define LIST_CACHE_BYTES                                                          \
    ((gssize)(LIST_CACHE_SLOTS * (sizeof(ListCacheSlot) + 2 * sizeof(uint16_t)) + \
              LIST_CACHE_SLOTS / LIST_CACHE_WAYS))
#define LIST_CACHE_BUCKETS (LIST_CACHE_SLOTS / LIST_CACHE_WAYS)

struct ListCacheSlot {
    uint64_t hash;       /* run_key() */
    const guint8 *bytes; /* the run, in the input (in memory for the whole load) */
    size_t len;
    size_t items;          /* the list's length when it was built */
    uint64_t generation;   /* Loader.memo_generation when it was cached */
    FsimPickleValue *list; /* (nullable) holds a reference */
    /* (nullable) holds a reference: the list records share in place of copies of @list
     * (list_standin()) */
    FsimPickleValue *standin;
};

/* Each way's tag (Loader.list_cache_tags): 16 bits of its hash, never 0 (0: an empty way), and
 * its run's length.  A bucket's 16 tags, then its 16 lengths, are one cache line: the tags are
 * looked at all at once, so that a lookup reads only the ways whose tag is the run's (the ways
 * themselves are 12 lines), and the byte after the run (APPENDS) is read before the way's line
 * is there, or not at all for a way of the same prefix and another length. */
G_STATIC_ASSERT(LIST_CACHE_WAYS == 16);
G_STATIC_ASSERT(LIST_CACHE_ITEMS * 5 <= UINT16_MAX); /* (a run's length fits) */
#define BUCKET_TAGS (2 * LIST_CACHE_WAYS)            /* uint16_t a bucket: tags, lengths */
#define TAG_LANES   UINT64_C(0x0001000100010001)

static inline uint16_t
run_tag(uint64_t hash)
{
    return (uint16_t)(hash >> 48 | 1);
}

/* A bit per way of the bucket at @tags whose tag is @tag (and perhaps, without SSE2, a few
 * more: the ways are checked after). */
static inline uint32_t
tag_matches(const uint16_t *tags, uint16_t tag)
{
#ifdef __SSE2__
    __m128i t = _mm_set1_epi16((short)tag);
    __m128i lo = _mm_cmpeq_epi16(_mm_load_si128((const __m128i *)tags), t);
    __m128i hi = _mm_cmpeq_epi16(_mm_load_si128((const __m128i *)(tags + 8)), t);
    return (uint32_t)_mm_movemask_epi8(_mm_packs_epi16(lo, hi));
#else
    uint32_t match = 0;

    for (int i = 0; i < 4; i++) {
        uint64_t w;

        memcpy(&w, tags + 4 * i, 8);
        w ^= tag * TAG_LANES;
        /* a lane's top bit where the lane is 0 (or just above one that is) */
        uint64_t zero = (w - TAG_LANES) & ~w & (TAG_LANES << 15);
        /* the four top bits to bits 0..3: lane k's bit 16k + 15 to bit 48 + k, then down */
        match |= (uint32_t)(((zero >> 15) * (UINT64_C(1) << 48 | UINT64_C(1) << 33 |
                                             UINT64_C(1) << 18 | UINT64_C(1) << 3)) >>
                            48)
                 << (4 * i);
    }
    return match;
#endif
}

/* A hash of the run's bytes: 16 bytes a 128-bit product, the products' halves folded and added
 * (the multiplications are independent of each other, where a chain of them would wait on the
 * one before: the runs' 128-byte prefixes are most lookups). */
static inline uint64_t
fold_mul(uint64_t a, uint64_t b)
{
#ifdef __SIZEOF_INT128__
    __extension__ typedef unsigned __int128 Product;
    Product m = (Product)a * b;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
#else
    uint64_t m = a * (b | 1);
    return m ^ m >> 29;
#endif
}

static inline uint64_t
load64(const guint8 *p)
{
    uint64_t w;

    memcpy(&w, p, 8);
    return w;
}

static inline uint64_t
run_hash(const guint8 *p, size_t len)
{
    const uint64_t k0 = 0xa0761d6478bd642fu;
    const uint64_t k1 = 0xe7037ed1a0b428dbu;
    uint64_t h = 0;
    size_t i = 0;

    for (; i + 16 <= len; i += 16)
        h += fold_mul(load64(p + i) ^ k0, load64(p + i + 8) ^ k1 ^ i);
    if (i < len) {
        uint64_t tail[2] = {0, 0};

        memcpy(tail, p + i, len - i);
        h += fold_mul(tail[0] ^ k0, tail[1] ^ k1 ^ i);
    }
    return fold_mul(h ^ len, 0x8ebc6af09c88c6e3u);
}

/* The run of memo gets at @p: its length in items (0: none, or not followed by APPENDS, or too
 * long to cache) and its end (the APPENDS) in *@appends.  A branch per get (not a table of
 * widths, which made each step wait on the load of the one before: the branches mispredict
 * where BINGET and LONG_BINGET alternate, and cost less than that wait). */
static size_t
scan_run(const guint8 *p, const guint8 *end, const guint8 **appends)
{
    size_t n = 0;

    while (end - p >= 5 && n <= LIST_CACHE_ITEMS) {
        if (p[0] == 'j')
            p += 5;
        else if (p[0] == 'h')
            p += 2;
        else
            break;
        n++;
    }
    if (p >= end || p[0] != 'e' || n == 0 || n > LIST_CACHE_ITEMS)
        return 0;
    *appends = p;
    return n;
}

/* The cached list that was built from the run at @body (@avail bytes of input from there on):
 * one of the bucket's ways whose bytes are those at @body, followed by APPENDS.  Equal bytes
 * parse alike, so the run need not be decoded first.  @len is the run's length when known, else
 * 0 (then the way's must be at least LIST_PREFIX). */
static inline ListCacheSlot *
bucket_find(Loader *l, uint64_t hash, const guint8 *body, size_t avail, size_t len)
{
    size_t bucket = (size_t)(hash & (LIST_CACHE_BUCKETS - 1));
    const uint16_t *tags = l->list_cache_tags + bucket * BUCKET_TAGS;
    uint32_t match = tag_matches(tags, run_tag(hash));

    while (match != 0) {
        size_t w = (size_t)__builtin_ctz(match);
        size_t way_len = tags[LIST_CACHE_WAYS + w];

        match &= match - 1;
        if ((len != 0 && way_len != len) || way_len >= avail || body[way_len] != 'e')
            continue;
        ListCacheSlot *way = &l->list_cache[bucket * LIST_CACHE_WAYS + w];
        if (way->list != NULL && way->hash == hash && way->len == way_len &&
            way->generation == l->memo_generation && (way->list->flags & VALUE_TWIN) &&
            way->list->u.c.len == way->items && memcmp(way->bytes, body, way->len) == 0) {
            way->bytes = body; /* the same bytes, read last: the likelier in cache next time */
            return way;
        }
    }
    return NULL;
}

/* Keeps @list, just built from the @len bytes of run at @body, in the bucket of @hash (in place
 * of its oldest way). */
static void
bucket_keep(Loader *l, uint64_t hash, const guint8 *body, size_t len, size_t n,
            FsimPickleValue *list)
{
    size_t bucket = (size_t)(hash & (LIST_CACHE_BUCKETS - 1));
    size_t w = l->list_cache_next[bucket];
    uint16_t *tags = l->list_cache_tags + bucket * BUCKET_TAGS;
    ListCacheSlot *way = &l->list_cache[bucket * LIST_CACHE_WAYS + w];

    l->list_cache_next[bucket] = (uint8_t)((w + 1) % LIST_CACHE_WAYS);
    tags[w] = run_tag(hash);
    tags[LIST_CACHE_WAYS + w] = (uint16_t)len;
    if (way->list != NULL)
        value_unref(l->heap, way->list);
    if (way->standin != NULL)
        value_unref(l->heap, way->standin);
    value_ref(list);
    *way = (ListCacheSlot){hash, body, len, n, l->memo_generation, list, NULL};
}

/* The key of a run: a hash of its first LIST_PREFIX bytes when it has that many (found without
 * decoding the run), else of all of it. */
static uint64_t
run_key(const guint8 *body, size_t len)
{
    if (len >= LIST_PREFIX)
        return run_hash(body, LIST_PREFIX); /* (a constant: the loop unrolled) */
    return run_hash(body, len);
}

/* The empty, unshared list on top of the stack that the run of memo gets at @body (after a MARK)
 * may fill, with the cache ready; NULL when none (the generic path runs). */
static FsimPickleValue *
run_target(Loader *l, const guint8 *body)
{
    size_t avail = (size_t)(l->in.end - body);
    FsimPickleValue *list;

    if (l->in.stream != NULL || l->in.end - l->in.start >= UINT32_MAX || l->stack_len <= l->fence ||
        l->n_marks >= l->max_depth)
        return NULL;
    list = l->stack[l->stack_len - 1];
    if (list->type != FSIM_PICKLE_LIST || list->u.c.len != 0 || (list->flags & VALUE_SEALED) ||
        avail == 0 || (body[0] != 'h' && body[0] != 'j'))
        return NULL; /* (not a run of memo gets: no lookup) */
    if (l->list_cache == NULL) {
        if (!heap_charge(l->heap, LIST_CACHE_BYTES))
            return NULL;
        l->list_cache = g_new0(ListCacheSlot, LIST_CACHE_SLOTS);
        l->list_cache_tags =
            g_aligned_alloc0(LIST_CACHE_BUCKETS * BUCKET_TAGS, sizeof(uint16_t), 64);
        l->list_cache_next = g_new0(uint8_t, LIST_CACHE_BUCKETS);
    }
    return list;
}

/* A miss: pushes the run of @n memo gets at @body (up to its APPENDS at @appends) and appends it
 * to @list, as MARK, the gets and APPENDS would, then caches the list. */
static int
fill_missed(Loader *l, FsimPickleValue *list, const guint8 *body, const guint8 *appends, size_t n)
{
    size_t len = (size_t)(appends - body);
    size_t base = l->stack_len;

    l->in.p = body;
    run_memo_gets(l);
    if (l->in.p != appends) {
        /* an unset entry or a shared value with too many references: undo, go generic */
        while (l->stack_len > base)
            l->stack[--l->stack_len]->refs--;
        l->in.p = body - 1;
        return 0;
    }
    l->op_offset = input_offset(&l->in);
    l->op = 'e';
    l->in.p = appends + 1;
    if (!append_items(l, base))
        return -1;
    if (!value_make_twin(l->heap, list, ++l->twins))
        return 1; /* over the budget: the list stays as built, uncached */
    bucket_keep(l, run_key(body, len), body, len, n, list);
    return 1;
}

int
run_memo_list(Loader *l)
{
    const guint8 *body = l->in.p + 1; /* after the MARK */
    size_t avail = (size_t)(l->in.end - body);
    const guint8 *appends = NULL;
    FsimPickleValue *list = run_target(l, body);
    ListCacheSlot *way = NULL;
    size_t n = 0;

    if (list == NULL)
        return 0;
    if (avail > LIST_PREFIX)
        way = bucket_find(l, run_key(body, LIST_PREFIX), body, avail, 0);
    if (way == NULL) {
        n = scan_run(body, l->in.end, &appends);
        if (n == 0 || l->stack_cap - l->stack_len < n)
            return 0;
        size_t len = (size_t)(appends - body);
        if (len < LIST_PREFIX)
            way = bucket_find(l, run_key(body, len), body, avail, len);
    }
    if (way != NULL) {
        /* No count can overflow: twins share one reference to each item, and each twin costs
         * bytes of an input shorter than 2^32 bytes (checked above). */
        value_share_twin(list, way->list);
        l->in.p = body + way->len + 1;
        return 1;
    }
    return fill_missed(l, list, body, appends, n);
}

int
run_memo_list_missed(Loader *l, const guint8 *appends, size_t n)
{
    const guint8 *body = l->in.p + 1; /* after the MARK */
    FsimPickleValue *list;

    if (l->in.end - body <= LIST_PREFIX)
        return run_memo_list(l); /* (list_cached_run() did not look there) */
    list = run_target(l, body);
    if (list == NULL || n == 0 || n > LIST_CACHE_ITEMS || l->stack_cap - l->stack_len < n)
        return 0;
    return fill_missed(l, list, body, appends, n);
}

FsimPickleValue *
list_cached_run(Loader *l, const guint8 *body, size_t *len, ListCacheSlot **found)
{
    size_t avail = (size_t)(l->in.end - body);
    ListCacheSlot *way;

    if (l->list_cache == NULL || avail <= LIST_PREFIX)
        return NULL;
    if (*len != 0 && *len < LIST_PREFIX) /* a short run: keyed by all of it */
        way = bucket_find(l, run_key(body, *len), body, avail, *len);
    else
        way = bucket_find(l, run_key(body, LIST_PREFIX), body, avail, 0);
    if (way == NULL)
        return NULL;
    *len = way->len;
    *found = way;
    return way->list;
}

FsimPickleValue *
list_standin(Loader *l, ListCacheSlot *way)
{
    FsimPickleValue *standin = way->standin;

    if (standin == NULL) {
        standin = new_value(l, FSIM_PICKLE_LIST);
        if (standin == NULL)
            return NULL;
        value_share_twin(standin, way->list);
        standin->flags |= VALUE_SEALED; /* stored in a record, as each copy was */
        value_ref(standin);
        way->standin = standin;
    }
    return standin;
}

void
list_cache_clear(Loader *l)
{
    if (l->list_cache == NULL)
        return;
    for (size_t i = 0; i < LIST_CACHE_SLOTS; i++) {
        if (l->list_cache[i].list != NULL)
            value_unref(l->heap, l->list_cache[i].list);
        if (l->list_cache[i].standin != NULL)
            value_unref(l->heap, l->list_cache[i].standin);
    }
    g_clear_pointer(&l->list_cache, g_free);
    g_clear_pointer(&l->list_cache_tags, g_aligned_free);
    g_clear_pointer(&l->list_cache_next, g_free);
    heap_charge(l->heap, -(gssize)LIST_CACHE_BYTES);
}
