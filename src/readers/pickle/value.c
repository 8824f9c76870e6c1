/* SPDX-License-Identifier: MIT */
/*
 * The unpickler's object model: creating values, reference counting, container item arrays, and
 * the public accessors of pickle.h.  See value.h for the memory rules.
 */
#include "value.h"

#include <glib.h>

#include <string.h>

/* A blob's header and bytes are one block: the bytes follow the header. */
static inline size_t
blob_block(size_t len)
{
    return sizeof(FsimPickleValue) + len + 1;
}

FsimPickleValue *
value_new_blob(Heap *heap, FsimPickleType type, uint64_t offset, const void *src, size_t len)
{
    if (len > G_MAXSSIZE / 2)
        return NULL;
    FsimPickleValue *v = heap_alloc(heap, blob_block(len));
    if (v == NULL)
        return NULL;
    v->type = (uint8_t)type;
    v->flags = 0;
    v->height = 0;
    v->refs = 0;
    v->offset = offset;
    v->u.s.data = (char *)(v + 1);
    v->u.s.len = len;
    if (src != NULL)
        memcpy(v->u.s.data, src, len);
    v->u.s.data[len] = '\0';
    return v;
}

static inline size_t
items_used(const FsimPickleValue *c)
{
    return c->type == FSIM_PICKLE_DICT ? 2 * (size_t)c->u.c.len : c->u.c.len;
}

/* A twin list's item array (VALUE_TWIN) is shared by the lists of the same twin number and
 * preceded by two words: the twin number and the number of lists sharing the array.  The array
 * holds one reference to each item, however many lists share it. */
#define TWIN_HEADER 2

static inline uintptr_t *
twin_header(const FsimPickleValue *c)
{
    return (uintptr_t *)(void *)(c->u.c.items - TWIN_HEADER);
}

/* Frees a container's item array (a twin's, once no other list shares it). */
static void
items_free(Heap *heap, FsimPickleValue *c)
{
    if (c->u.c.items == NULL)
        return;
    if (c->flags & VALUE_TWIN)
        heap_free(heap, twin_header(c), ((size_t)c->u.c.cap + TWIN_HEADER) * sizeof(void *));
    else
        heap_free(heap, c->u.c.items, c->u.c.cap * sizeof(void *));
}

gboolean
value_make_twin(Heap *heap, FsimPickleValue *list, uint64_t twin)
{
    size_t n = list->u.c.len;
    FsimPickleValue **block;

    if (list->type != FSIM_PICKLE_LIST || (list->flags & VALUE_TWIN) || n > UINT32_MAX - 2)
        return FALSE;
    block = heap_alloc(heap, (n + TWIN_HEADER) * sizeof(void *));
    if (block == NULL)
        return FALSE;
    if (n > 0)
        memcpy(block + TWIN_HEADER, list->u.c.items, n * sizeof(void *));
    items_free(heap, list);
    list->u.c.items = block + TWIN_HEADER;
    list->u.c.cap = (uint32_t)n;
    list->flags |= VALUE_TWIN;
    /* Numbers, never dereferenced; the twin number fits: each costs bytes of an input held in
     * memory. */
    twin_header(list)[0] = (uintptr_t)twin;
    twin_header(list)[1] = 1;
    return TRUE;
}

void
value_share_twin(FsimPickleValue *list, const FsimPickleValue *twin)
{
    g_assert(list->type == FSIM_PICKLE_LIST && list->u.c.len == 0 && list->u.c.items == NULL);
    g_assert(twin->flags & VALUE_TWIN);
    list->u.c.items = twin->u.c.items;
    list->u.c.len = twin->u.c.len;
    list->u.c.cap = twin->u.c.cap;
    list->height = twin->height;
    list->u.c.nodes = twin->u.c.nodes;
    list->flags |= VALUE_TWIN;
    twin_header(list)[1]++;
}

/* The twin list @c gives up its share of the array: from now on it has an array of @cap items
 * of its own (with a reference to each item) or, when @keep_items is FALSE and other lists share
 * the array, none at all.  FALSE over the budget, nothing changed. */
static gboolean
twin_leave(Heap *heap, FsimPickleValue *c, size_t cap, gboolean keep_items)
{
    size_t n = c->u.c.len;
    FsimPickleValue **items;

    if (twin_header(c)[1] > 1 && !keep_items) {
        twin_header(c)[1]--;
        c->u.c.items = NULL;
        c->u.c.len = 0;
        c->u.c.cap = 0;
        c->flags &= (uint8_t)~VALUE_TWIN;
        return TRUE;
    }
    items = heap_alloc(heap, cap * sizeof(void *));
    if (items == NULL)
        return FALSE;
    if (n > 0)
        memcpy(items, c->u.c.items, n * sizeof(void *));
    if (twin_header(c)[1] > 1) {
        twin_header(c)[1]--; /* the others keep the array and its references */
        for (size_t i = 0; i < n; i++)
            items[i]->refs++;
    } else {
        items_free(heap, c); /* the last one: its references move to the new array */
    }
    c->u.c.items = items;
    c->u.c.cap = (uint32_t)cap;
    c->flags &= (uint8_t)~VALUE_TWIN;
    return TRUE;
}

gboolean
value_reserve_items(Heap *heap, FsimPickleValue *c, size_t extra)
{
    size_t used = items_used(c);
    if (c->flags & VALUE_TWIN) {
        if (extra == 0)
            return TRUE;
        if (extra > UINT32_MAX - used)
            return FALSE;
        return twin_leave(heap, c, MIN(MAX(used + extra, 2 * used), (size_t)UINT32_MAX), TRUE);
    }
    if (c->u.c.cap - used >= extra)
        return TRUE;
    if (extra > UINT32_MAX - used)
        return FALSE;
    size_t cap = used + extra;
    if (used > 0)
        cap = MIN(MAX(cap, 2 * (size_t)c->u.c.cap), (size_t)UINT32_MAX);
    FsimPickleValue **items = heap_alloc(heap, cap * sizeof(void *));
    if (items == NULL)
        return FALSE;
    if (used > 0)
        memcpy(items, c->u.c.items, used * sizeof(void *));
    items_free(heap, c);
    c->u.c.items = items;
    c->u.c.cap = (uint32_t)cap;
    return TRUE;
}

/* Frees a value whose last reference is gone, without looking at its items. */
static void
value_release(Heap *heap, FsimPickleValue *v)
{
    switch ((FsimPickleType)v->type) {
    case FSIM_PICKLE_STR:
    case FSIM_PICKLE_BYTES:
    case FSIM_PICKLE_BIGINT:
        heap_free(heap, v, blob_block(v->u.s.len));
        return;
    case FSIM_PICKLE_LIST:
    case FSIM_PICKLE_TUPLE:
    case FSIM_PICKLE_DICT:
        items_free(heap, v);
        heap_free(heap, v, sizeof(*v));
        return;
    default:
        heap_free(heap, v, sizeof(*v));
        return;
    }
}

void
value_unref(Heap *heap, FsimPickleValue *v)
{
    g_assert(v->refs > 0);
    if (--v->refs > 0)
        return;
    /* Dead containers whose items are still to be dropped, linked through their offset field:
     * no recursion, whatever the depth.  A dead container becomes a flat list of its items
     * (a dict's keys and values alike), dropped from the end. */
    FsimPickleValue *pending = NULL;
    while (v != NULL) {
        /* A twin list whose array other lists still share drops its share, not the items. */
        if ((v->flags & VALUE_TWIN) && twin_header(v)[1] > 1)
            twin_leave(heap, v, 0, FALSE);
        if (value_is_container(v)) {
            /* (a record's items are the values it refers to: records.c) */
            v->u.c.len = (uint32_t)((v->flags & VALUE_RECORD) ? record_refs(v) : items_used(v));
            v->type = FSIM_PICKLE_LIST;
            v->offset = (uint64_t)(uintptr_t)pending;
            pending = v;
        } else {
            value_release(heap, v);
        }
        v = NULL;
        while (v == NULL && pending != NULL) {
            FsimPickleValue *c = pending;
            while (c->u.c.len > 0) {
                FsimPickleValue *item = c->u.c.items[--c->u.c.len];
                if (--item->refs == 0) {
                    v = item;
                    break;
                }
            }
            if (v == NULL) {
                pending = (FsimPickleValue *)(uintptr_t)c->offset;
                value_release(heap, c);
            }
        }
    }
}

/* ---- The loaded pickle -------------------------------------------------------------------- */

void
fsim_pickle_free(FsimPickle *pickle)
{
    if (pickle == NULL)
        return;
    heap_clear(&pickle->heap);
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
    return pickle->heap.peak;
}

guint64
fsim_pickle_input_bytes(const FsimPickle *pickle)
{
    g_return_val_if_fail(pickle != NULL, 0);
    return pickle->input_bytes;
}

gboolean
fsim_pickle_text_strings(const FsimPickle *pickle)
{
    g_return_val_if_fail(pickle != NULL, FALSE);
    return pickle->text_strings;
}

gboolean
fsim_pickle_watched_str_seen(const FsimPickle *pickle)
{
    g_return_val_if_fail(pickle != NULL, FALSE);
    return pickle->watched_str_seen;
}

guint64
fsim_pickle_records(const FsimPickle *pickle)
{
    g_return_val_if_fail(pickle != NULL, 0);
    return pickle->records;
}

/* ---- Accessors ----------------------------------------------------------------------------- */

gboolean
fsim_pickle_record_fields(const FsimPickleValue *v, FsimPickleFields *fields)
{
    if (v == NULL || !(v->flags & VALUE_RECORD))
        return FALSE;
    FsimPickleValue *const *refs = v->u.c.items;
    const uint64_t *words = (const uint64_t *)(const void *)refs;
    uint64_t slots = words[v->u.c.cap - 2];
    size_t n_refs = RECORD_REFS(words[v->u.c.cap - 1]);
    guint is_uint = 0;
    guint is_none = 0;
    fields->pairs = RECORD_PAIRS(words[v->u.c.cap - 1]);
    for (int k = 0; k < FSIM_PICKLE_RECORD_KEYS; k++) {
        unsigned slot = (unsigned)(slots >> (8 * k)) & 0xffu;
        if (slot == 0) {
            fields->values[k] = NULL;
            is_none |= 1u << k;
            continue;
        }
        /* (a referenced value is never NULL: records.c keeps only values it made or found) */
        const FsimPickleValue *value =
            (slot & 0x80u) ? record_scalar(refs, n_refs, slot & 0x7fu) : refs[slot - 1];
        fields->values[k] = value;
        if (value->type == FSIM_PICKLE_INT) {
            if ((value->flags & VALUE_UNSIGNED) || value->u.i >= 0) {
                is_uint |= 1u << k;
                fields->uints[k] = value->u.u;
            }
        } else if (value->type == FSIM_PICKLE_NONE) {
            is_none |= 1u << k;
        }
    }
    fields->is_uint = is_uint;
    fields->is_none = is_none;
    return TRUE;
}

gboolean
fsim_pickle_record(const FsimPickleValue *v, gsize *pairs, const FsimPickleValue **values)
{
    FsimPickleFields fields;
    if (!fsim_pickle_record_fields(v, &fields))
        return FALSE;
    if (pairs != NULL)
        *pairs = fields.pairs;
    memcpy(values, fields.values, sizeof(fields.values));
    return TRUE;
}

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

const FsimPickleValue *const *
fsim_pickle_items(const FsimPickleValue *v, gsize *n)
{
    *n = 0;
    if (v == NULL || (v->type != FSIM_PICKLE_LIST && v->type != FSIM_PICKLE_TUPLE) ||
        v->u.c.len == 0)
        return NULL;
    *n = v->u.c.len;
    return (const FsimPickleValue *const *)v->u.c.items;
}

const FsimPickleValue *const *
fsim_pickle_dict_items(const FsimPickleValue *v, gsize *n)
{
    *n = 0;
    if (v == NULL || v->type != FSIM_PICKLE_DICT || v->u.c.len == 0)
        return NULL;
    *n = v->u.c.len;
    return (const FsimPickleValue *const *)v->u.c.items;
}

void
fsim_pickle_prefetch_items(const FsimPickleValue *v)
{
    if (v != NULL && value_is_container(v) && v->u.c.items != NULL)
        __builtin_prefetch(v->u.c.items);
}

uint64_t
fsim_pickle_list_twin(const FsimPickleValue *v)
{
    if (v == NULL || v->type != FSIM_PICKLE_LIST || !(v->flags & VALUE_TWIN))
        return 0;
    return (uint64_t)twin_header(v)[0];
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
