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
 *   followed by APPENDS).  On a hit the new list shares the cached list's item array (one
 *   reference to each item for all the lists that share it: value_share_twin()), height and node
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
 *   counted against the budget like any value, as the cache's own 96 KiB are); the result is the
 *   same value graph either way, with less memory: the copies hold no item array of their own.
 */
#include <glib.h>

#include <string.h>

#include "machine.h"

/* The cache's own memory, counted against the budget. */
#define LIST_CACHE_BYTES \
    ((gssize)(LIST_CACHE_SLOTS * sizeof(ListCacheSlot) + LIST_CACHE_SLOTS / LIST_CACHE_WAYS))

struct ListCacheSlot {
    uint64_t hash;       /* run_key() */
    const guint8 *bytes; /* the run, in the input (in memory for the whole load) */
    size_t len;
    size_t items;          /* the list's length when it was built */
    uint64_t generation;   /* Loader.memo_generation when it was cached */
    FsimPickleValue *list; /* (nullable) holds a reference */
};

/* FNV-1a over 8 bytes at a time: the runs are a few hundred bytes. */
static uint64_t
run_hash(const guint8 *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325u ^ len;
    size_t i = 0;

    for (; i + 8 <= len; i += 8) {
        uint64_t w;

        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3u;
        h ^= h >> 29;
    }
    for (; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h ^ h >> 32;
}

/* The width of each memo get opcode, 0 for the others: a branch per opcode would mispredict on
 * a mix of BINGET and LONG_BINGET. */
static const guint8 get_width[256] = {['h'] = 2, ['j'] = 5};

/* The run of memo gets at @p: its length in items (0: none, or not followed by APPENDS, or too
 * long to cache) and its end (the APPENDS) in *@appends. */
static size_t
scan_run(const guint8 *p, const guint8 *end, const guint8 **appends)
{
    size_t n = 0;
    size_t width;

    while (end - p >= 5 && n <= LIST_CACHE_ITEMS && (width = get_width[p[0]]) != 0) {
        p += width;
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
static ListCacheSlot *
bucket_find(Loader *l, uint64_t hash, const guint8 *body, size_t avail, size_t len)
{
    ListCacheSlot *way =
        &l->list_cache[(hash & (LIST_CACHE_SLOTS / LIST_CACHE_WAYS - 1)) * LIST_CACHE_WAYS];

    for (int w = 0; w < LIST_CACHE_WAYS; w++, way++) {
        if (way->list != NULL && way->hash == hash && (len == 0 || way->len == len) &&
            way->len < avail && body[way->len] == 'e' && way->generation == l->memo_generation &&
            (way->list->flags & VALUE_TWIN) && way->list->u.c.len == way->items &&
            memcmp(way->bytes, body, way->len) == 0)
            return way;
    }
    return NULL;
}

/* Keeps @list, just built from the @len bytes of run at @body, in the bucket of @hash (in place
 * of its oldest way). */
static void
bucket_keep(Loader *l, uint64_t hash, const guint8 *body, size_t len, size_t n,
            FsimPickleValue *list)
{
    size_t bucket = (size_t)(hash & (LIST_CACHE_SLOTS / LIST_CACHE_WAYS - 1));
    ListCacheSlot *way = &l->list_cache[bucket * LIST_CACHE_WAYS + l->list_cache_next[bucket]];

    l->list_cache_next[bucket] = (uint8_t)((l->list_cache_next[bucket] + 1) % LIST_CACHE_WAYS);
    if (way->list != NULL)
        value_unref(l->heap, way->list);
    value_ref(list);
    *way = (ListCacheSlot){hash, body, len, n, l->memo_generation, list};
}

/* The key of a run: a hash of its first LIST_PREFIX bytes when it has that many (found without
 * decoding the run), else of all of it. */
static uint64_t
run_key(const guint8 *body, size_t len)
{
    return run_hash(body, MIN(len, (size_t)LIST_PREFIX));
}

int
run_memo_list(Loader *l)
{
    const guint8 *body = l->in.p + 1; /* after the MARK */
    size_t avail = (size_t)(l->in.end - body);
    const guint8 *appends = NULL;
    FsimPickleValue *list;
    ListCacheSlot *way = NULL;
    size_t n;
    size_t len;

    if (l->in.stream != NULL || l->in.end - l->in.start >= UINT32_MAX || l->stack_len <= l->fence ||
        l->n_marks >= l->max_depth)
        return 0;
    list = l->stack[l->stack_len - 1];
    if (list->type != FSIM_PICKLE_LIST || list->u.c.len != 0 || (list->flags & VALUE_SEALED))
        return 0;
    if (l->list_cache == NULL) {
        if (!heap_charge(l->heap, LIST_CACHE_BYTES))
            return 0;
        l->list_cache = g_new0(ListCacheSlot, LIST_CACHE_SLOTS);
        l->list_cache_next = g_new0(uint8_t, LIST_CACHE_SLOTS / LIST_CACHE_WAYS);
    }
    if (avail > LIST_PREFIX)
        way = bucket_find(l, run_key(body, LIST_PREFIX), body, avail, 0);
    if (way == NULL) {
        n = scan_run(body, l->in.end, &appends);
        if (n == 0 || l->stack_cap - l->stack_len < n)
            return 0;
        len = (size_t)(appends - body);
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
    /* A miss: push the run and append it, as MARK, the gets and APPENDS would. */
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

FsimPickleValue *
list_cached_run(Loader *l, const guint8 *body, size_t *len)
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
    return way->list;
}

void
list_cache_clear(Loader *l)
{
    if (l->list_cache == NULL)
        return;
    for (size_t i = 0; i < LIST_CACHE_SLOTS; i++) {
        if (l->list_cache[i].list != NULL)
            value_unref(l->heap, l->list_cache[i].list);
    }
    g_clear_pointer(&l->list_cache, g_free);
    g_clear_pointer(&l->list_cache_next, g_free);
    heap_charge(l->heap, -(gssize)LIST_CACHE_BYTES);
}
