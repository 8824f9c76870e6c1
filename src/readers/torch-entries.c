/* SPDX-License-Identifier: MIT */
/*
 * PyTorch snapshots: the entries of `device_traces` (action, address, size, stream, time_us,
 * pool ids) and `external_annotations`.
 */
#include <glib.h>

#include "torch-reader.h"

/* @time_us relative to the device's clock, in ns. */
static gboolean
torch_relative_time(const TorchLoader *ld, const TorchDevice *dev, const FsimPickleValue *at,
                    const TorchWhere *w, int64_t time_us, FsimTime *out, GError **error)
{
    uint64_t delta;

    if (time_us <= dev->base_us) {
        *out = 0;
        return TRUE;
    }
    delta = (uint64_t)time_us - (uint64_t)dev->base_us;
    if (delta > G_MAXUINT64 / 1000) {
        g_autofree char *where = fsim_torch_where_text(w);

        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, at,
                               "%s: 'time_us' %" G_GINT64_FORMAT
                               " is too far from the trace's first time (%" G_GINT64_FORMAT ")",
                               where, time_us, dev->base_us);
    }
    *out = delta * 1000;
    return TRUE;
}

/* The keys of an entry this reader looks at, in the order of fsim_torch_entry_keys; others are
 * ignored. */
enum {
    F_ACTION,
    F_ADDR,
    F_SIZE,
    F_STREAM,
    F_TIME,
    F_DEVICE_FREE,
    F_POOL,
    F_FRAMES,
};
#define F_BIT(k) (1u << (k))

/* The keys of the fields, in their order: the snapshot is loaded with them as record keys
 * (fsim_pickle_record_fields()), so that most entries come as records of these values. */
const char *const fsim_torch_entry_keys[] = {
    "action", "addr", "size", "stream", "time_us", "device_free", "pool_id", "frames", NULL,
};

G_STATIC_ASSERT(F_FRAMES + 1 == FSIM_PICKLE_RECORD_KEYS);

/* The fields of @entry, a dict built as such (not a record: an entry not written as one), found
 * by their keys, its ints and Nones told as fsim_pickle_record_fields() tells a record's. */
static void
entry_dict_fields(TorchLoader *ld, const FsimPickleValue *entry, FsimPickleFields *f)
{
    memset(f, 0, sizeof(*f));
    f->pairs = fsim_pickle_len(entry);
    fsim_torch_dict_fields(ld, entry, fsim_torch_entry_keys, FSIM_PICKLE_RECORD_KEYS, f->values);
    for (int k = 0; k < FSIM_PICKLE_RECORD_KEYS; k++) {
        if (fsim_torch_is_none(f->values[k]))
            f->is_none |= F_BIT(k);
        else if (fsim_pickle_get_uint(f->values[k], &f->uints[k]))
            f->is_uint |= F_BIT(k);
    }
}

/* The field @k of @f, a non-negative integer: fsim_torch_u64() where it is not a plain one. */
static inline gboolean
field_u64(const TorchLoader *ld, const FsimPickleFields *f, int k, const TorchWhere *w,
          uint64_t *out, GError **error)
{
    if (G_LIKELY(f->is_uint & F_BIT(k))) {
        *out = f->uints[k];
        return TRUE;
    }
    return fsim_torch_u64(ld, f->values[k], w, fsim_torch_entry_keys[k], out, error);
}

/* The action named by the str @v, the value of an entry's `action`; its name in *@name (@len
 * bytes) when it is TORCH_UNKNOWN.  An action's str is written once and referred to through the
 * memo after that: the same value each time, whose action is kept. */
static gboolean
entry_action(TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w, TorchAction *a,
             const char **name, gsize *len, GError **error)
{
    guint slot = (guint)(((uintptr_t)v >> 4) % G_N_ELEMENTS(ld->action_strs));

    if (ld->action_strs[slot] == v) {
        *a = (TorchAction)ld->actions[slot];
        if (*a == TORCH_UNKNOWN)
            *name = fsim_pickle_get_str(v, len);
        return TRUE;
    }
    *name = fsim_torch_str(ld, v, w, "action", len, error);
    if (*name == NULL)
        return FALSE;
    *a = fsim_torch_action_from_name(*name, *len);
    ld->action_strs[slot] = v;
    ld->actions[slot] = (uint8_t)*a;
    return TRUE;
}

/* A newer (or older) action: count it, keep its place, never look inside. */
static void
entry_count_unknown(TorchDevice *dev, const char *action, gsize action_len)
{
    /* Named by all its bytes, a NUL inside written \x00: cut at the NUL, `segment_unmap\0...`
     * would be counted under the name of an action this reader knows. */
    GString *name = g_string_sized_new(action_len);
    uint64_t *count;

    for (gsize i = 0; i < action_len; i++) {
        if (action[i] == '\0')
            g_string_append(name, "\\x00");
        else
            g_string_append_c(name, action[i]);
    }
    if (dev->unknown == NULL)
        dev->unknown = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    count = g_hash_table_lookup(dev->unknown, name->str);
    if (count == NULL) {
        count = g_new0(uint64_t, 1);
        g_hash_table_insert(dev->unknown, g_string_free(name, FALSE), count);
    } else {
        g_string_free(name, TRUE);
    }
    (*count)++;
}

/* The values of the fields, checked, into @e. */
static gboolean
entry_values(TorchLoader *ld, const FsimPickleFields *f, const TorchWhere *w, TorchEntry *e,
             GError **error)
{
    TorchAction a = (TorchAction)e->action;

    if (!(f->is_none & F_BIT(F_ADDR))) {
        if (!field_u64(ld, f, F_ADDR, w, &e->addr, error))
            return FALSE;
        e->flags |= ENTRY_HAS_ADDR;
    }
    if (f->values[F_SIZE] != NULL) {
        uint64_t size = f->uints[F_SIZE];

        if ((f->is_uint & F_BIT(F_SIZE)) && size - 1 < FSIM_MAX_SIZE) {
            e->size = size; /* 1 to FSIM_MAX_SIZE: right for every action */
        } else {
            /* alloc and segment sizes are at least a byte; a free carries the block's request. */
            gboolean zero_ok = a != TORCH_ALLOC && a != TORCH_SEGMENT_ALLOC &&
                               a != TORCH_SEGMENT_FREE && a != TORCH_SEGMENT_MAP &&
                               a != TORCH_SEGMENT_UNMAP;

            if ((f->is_uint & F_BIT(F_SIZE)) && size == 0 && zero_ok)
                e->size = 0;
            else if (!fsim_torch_size(ld, f->values[F_SIZE], w, "size", zero_ok, &e->size, error))
                return FALSE;
        }
        e->flags |= ENTRY_HAS_SIZE;
    }
    if (!(f->is_none & F_BIT(F_STREAM)) && !field_u64(ld, f, F_STREAM, w, &e->stream, error))
        return FALSE;
    if (!(f->is_none & F_BIT(F_DEVICE_FREE)) &&
        !field_u64(ld, f, F_DEVICE_FREE, w, &e->device_free, error))
        return FALSE;
    if (!(f->is_none & F_BIT(F_POOL))) {
        if (!fsim_torch_pool(ld, f->values[F_POOL], w, "pool_id", &e->pool, error))
            return FALSE;
        e->flags |= ENTRY_HAS_POOL;
    }
    return TRUE;
}

/* The fields action @e->action requires. */
static gboolean
entry_required(TorchLoader *ld, const FsimPickleValue *entry, const TorchWhere *w,
               const TorchEntry *e, GError **error)
{
    switch ((TorchAction)e->action) {
    case TORCH_ALLOC:
    case TORCH_FREE_REQUESTED:
    case TORCH_FREE_COMPLETED:
    case TORCH_SEGMENT_ALLOC:
    case TORCH_SEGMENT_FREE:
    case TORCH_SEGMENT_MAP:
    case TORCH_SEGMENT_UNMAP:
        if ((e->flags & ENTRY_HAS_ADDR) == 0)
            return fsim_torch_missing(ld, entry, w, "addr", error);
        if ((e->flags & ENTRY_HAS_SIZE) == 0)
            return fsim_torch_missing(ld, entry, w, "size", error);
        if (e->addr + e->size < e->addr) {
            g_autofree char *where = fsim_torch_where_text(w);

            return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, entry,
                                   "%s: the range ends beyond 2^64", where);
        }
        break;
    case TORCH_OOM:
        if ((e->flags & ENTRY_HAS_SIZE) == 0)
            return fsim_torch_missing(ld, entry, w, "size", error);
        break;
    default:
        break;
    }
    return TRUE;
}

/* The common entry: an action on an address range (alloc, the frees, the segments' actions) with
 * `addr`, `size` and `stream` plain ints, a size of 1 byte to FSIM_MAX_SIZE whose range ends
 * below 2^64, no `device_free` nor `pool_id`: its values into @e without entry_values()'s and
 * entry_required()'s questions, whose answers are known.  FALSE for any other entry (then asked).
 */
static inline gboolean
entry_plain(const FsimPickleFields *f, TorchAction a, TorchEntry *e)
{
    const guint plain = F_BIT(F_ADDR) | F_BIT(F_SIZE) | F_BIT(F_STREAM);
    const guint absent = F_BIT(F_DEVICE_FREE) | F_BIT(F_POOL);
    uint64_t addr = f->uints[F_ADDR];
    uint64_t size = f->uints[F_SIZE];

    if ((f->is_uint & plain) != plain || (f->is_none & absent) != absent ||
        a > TORCH_SEGMENT_UNMAP || size - 1 >= FSIM_MAX_SIZE || addr + size < addr)
        return FALSE;
    e->addr = addr;
    e->size = size;
    e->stream = f->uints[F_STREAM];
    e->flags = ENTRY_HAS_ADDR | ENTRY_HAS_SIZE;
    return TRUE;
}

/* Advance the device's clock to the entry's `time_us` (clamped when it goes backwards). */
static gboolean
entry_time(TorchLoader *ld, TorchDevice *dev, const FsimPickleFields *f, const TorchWhere *w,
           GError **error)
{
    const FsimPickleValue *time_v = f->values[F_TIME];
    int64_t time_us;
    FsimTime time = 0;

    if ((f->is_uint & F_BIT(F_TIME)) && f->uints[F_TIME] <= (uint64_t)G_MAXINT64)
        time_us = (int64_t)f->uints[F_TIME];
    else if (!fsim_torch_i64(ld, time_v, w, "time_us", &time_us, error))
        return FALSE;
    if (!dev->timed) {
        dev->timed = TRUE;
        dev->base_us = time_us;
    }
    if (!torch_relative_time(ld, dev, time_v, w, time_us, &time, error))
        return FALSE;
    (void)fsim_trace_clock_advance(&dev->last_time, &dev->backwards, time);
    return TRUE;
}

static gboolean
torch_read_entry(TorchLoader *ld, TorchDevice *dev, const FsimPickleValue *entry,
                 const TorchWhere *w, TorchEntry *out, GError **error)
{
    FsimPickleFields f;
    TorchEntry *e = out; /* written in place (its array's slot) */
    const char *action = NULL;
    gsize action_len = 0;
    TorchAction a;

    if (fsim_pickle_record_fields(entry, &f))
        ld->records++;
    else if (fsim_pickle_type(entry) != FSIM_PICKLE_DICT)
        return fsim_torch_dict(ld, entry, w, error); /* the error */
    else
        entry_dict_fields(ld, entry, &f);
    if (G_UNLIKELY(1 + (uint64_t)f.pairs > ld->budget))
        return fsim_torch_charge(ld, entry, 1 + (uint64_t)f.pairs, error); /* the error */
    ld->budget -= 1 + (uint64_t)f.pairs;
    if (f.values[F_ACTION] == NULL)
        return fsim_torch_missing(ld, entry, w, "action", error);
    if (!entry_action(ld, f.values[F_ACTION], w, &a, &action, &action_len, error))
        return FALSE;
    *e = (TorchEntry){.action = (uint8_t)a};
    dev->n_entries++;
    if (a == TORCH_UNKNOWN) {
        entry_count_unknown(dev, action, action_len);
        e->time = dev->last_time;
        return TRUE;
    }
    dev->counts[a]++;
    if (!entry_plain(&f, a, e)) {
        if (!entry_values(ld, &f, w, e, error) || !entry_required(ld, entry, w, e, error))
            return FALSE;
        if ((e->flags & ENTRY_HAS_POOL) != 0 && e->pool != 0)
            dev->pooled = TRUE;
    }
    if (!(f.is_none & F_BIT(F_TIME)) && !entry_time(ld, dev, &f, w, error))
        return FALSE;
    if (a == TORCH_ALLOC || a == TORCH_OOM)
        e->stack = fsim_torch_frames(ld, f.values[F_FRAMES]);
    else if (ld->npu_frames)
        fsim_torch_frames_scan(ld, f.values[F_FRAMES]); /* kept for allocations only; looked at
                                                         * for torch_npu */
    e->time = dev->last_time;
    return TRUE;
}

gboolean
fsim_torch_read_traces(TorchLoader *ld, const FsimPickleValue *traces, GError **error)
{
    if (!fsim_torch_list(ld, traces, "'device_traces'", error))
        return FALSE;
    for (gsize d = 0; d < fsim_pickle_len(traces); d++) {
        const FsimPickleValue *trace = fsim_pickle_item(traces, d);
        TorchWhere w = {.list = "device_traces", .i = d, .depth = 1};
        gsize n = fsim_pickle_len(trace);
        const FsimPickleValue *const *entries;
        TorchDevice *dev;

        if (fsim_pickle_type(trace) != FSIM_PICKLE_LIST)
            return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, trace,
                                   "device_traces[%" G_GSIZE_FORMAT "] is %s, expected a list", d,
                                   fsim_torch_type_name(trace));
        if (!fsim_torch_charge(ld, trace, 1, error))
            return FALSE;
        if (n == 0)
            continue;
        dev = fsim_torch_device(ld, trace, d, error);
        if (dev == NULL)
            return FALSE;
        /* The list's length is bounded by the input, and each entry costs budget. */
        fsim_torch_array_give(TORCH_SPARE_ENTRIES, dev->entries);
        dev->entries = fsim_torch_array_take(TORCH_SPARE_ENTRIES, sizeof(TorchEntry),
                                             (guint)MIN(n, ld->budget));
        w.depth = 2;
        entries = fsim_pickle_items(trace, &n);
        /* One entry each, or the open fails: each costs budget, so no more than it allows are
         * made room for at once. */
        g_array_set_size(dev->entries, (guint)MIN(n, ld->budget));
        for (gsize i = 0; i < n; i++) {
            /* The entries were built long before: fetch the next ones' dicts and entry arrays
             * while this one is read (two steps, the array's address being in the dict). */
            if (i + 16 < n)
                __builtin_prefetch(entries[i + 16]);
            if (i + 8 < n)
                fsim_pickle_prefetch_items(entries[i + 8]);
            w.j = i;
            if (i == dev->entries->len)
                g_array_set_size(dev->entries, (guint)i + 1);
            if (!torch_read_entry(ld, dev, entries[i], &w,
                                  &g_array_index(dev->entries, TorchEntry, i), error))
                return FALSE;
        }
    }
    return TRUE;
}

/* ---- annotations --------------------------------------------------------------------------- */

static gboolean
torch_read_annotation(TorchLoader *ld, const FsimPickleValue *annotation, gsize i, GError **error)
{
    TorchTrace *trace = ld->trace;
    TorchWhere w = {.list = "external_annotations", .i = i, .depth = 1};
    const FsimPickleValue *stage_v;
    const FsimPickleValue *name_v;
    const FsimPickleValue *device_v;
    const FsimPickleValue *time_v;
    const char *stage = "";
    const char *name = "";
    uint64_t device = 0;
    int64_t time_us;
    TorchDevice *dev;
    TorchMark mark;

    if (!fsim_torch_dict(ld, annotation, &w, error))
        return FALSE;
    stage_v = fsim_pickle_dict_get(annotation, "stage");
    name_v = fsim_pickle_dict_get(annotation, "name");
    device_v = fsim_pickle_dict_get(annotation, "device");
    time_v = fsim_pickle_dict_get(annotation, "time_us");
    trace->annotations++;
    if (!fsim_torch_is_none(stage_v) &&
        (stage = fsim_torch_str(ld, stage_v, &w, "stage", NULL, error)) == NULL)
        return FALSE;
    if (!fsim_torch_is_none(name_v) &&
        (name = fsim_torch_str(ld, name_v, &w, "name", NULL, error)) == NULL)
        return FALSE;
    if (!fsim_torch_is_none(device_v) &&
        !fsim_torch_u64(ld, device_v, &w, "device", &device, error))
        return FALSE;
    if (fsim_torch_is_none(time_v)) {
        ld->dropped_annotations++;
        return TRUE;
    }
    if (!fsim_torch_i64(ld, time_v, &w, "time_us", &time_us, error))
        return FALSE;
    dev = device < trace->devices->len ? trace->devices->pdata[device] : NULL;
    if (dev == NULL || !dev->timed) {
        ld->dropped_annotations++;
        return TRUE;
    }
    if (!torch_relative_time(ld, dev, time_v, &w, time_us, &mark.time, error))
        return FALSE;
    mark.label = trace->labels->len;
    mark.seq = dev->marks->len;
    g_ptr_array_add(trace->labels, g_strdup_printf("%s %s", stage, name));
    g_array_append_val(dev->marks, mark);
    return TRUE;
}

gboolean
fsim_torch_read_annotations(TorchLoader *ld, const FsimPickleValue *annotations, GError **error)
{
    return fsim_torch_read_list(ld, annotations, "'external_annotations'", torch_read_annotation,
                                error);
}
