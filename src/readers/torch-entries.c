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

/* The fields of an entry this reader looks at (NULL when absent); others are ignored. */
typedef struct {
    const FsimPickleValue *action;
    const FsimPickleValue *addr;
    const FsimPickleValue *size;
    const FsimPickleValue *stream;
    const FsimPickleValue *time;
    const FsimPickleValue *device_free;
    const FsimPickleValue *pool;
    const FsimPickleValue *frames;
} EntryFields;

/* The keys of EntryFields, in its order: the snapshot is loaded with them as record keys
 * (fsim_pickle_record()), so that most entries come as records of these values. */
const char *const fsim_torch_entry_keys[] = {
    "action", "addr", "size", "stream", "time_us", "device_free", "pool_id", "frames", NULL,
};

G_STATIC_ASSERT(sizeof(EntryFields) == FSIM_PICKLE_RECORD_KEYS * sizeof(const FsimPickleValue *));

/* The fields of @entry, a dict (its entries in *@pairs); TRUE when it is a record. */
static gboolean
entry_fields(const FsimPickleValue *entry, EntryFields *f, gsize *pairs)
{
    const FsimPickleValue **slots =
        (const FsimPickleValue **)f; /* in fsim_torch_entry_keys' order */
    gsize n;
    const FsimPickleValue *const *items;

    if (fsim_pickle_record(entry, pairs, slots))
        return TRUE;
    *pairs = fsim_pickle_len(entry);
    items = fsim_pickle_dict_items(entry, &n);
    memset(f, 0, sizeof(*f));
    for (gsize k = 0; k < n; k++) {
        gsize len;
        const char *key = fsim_pickle_get_str(items[2 * k], &len);

        for (gsize j = 0; key != NULL && fsim_torch_entry_keys[j] != NULL; j++) {
            if (strlen(fsim_torch_entry_keys[j]) == len &&
                memcmp(key, fsim_torch_entry_keys[j], len) == 0) {
                slots[j] = items[2 * k + 1];
                break;
            }
        }
    }
    return FALSE;
}

/* The action named by the str value @v (@name, @len bytes).  An action's str is written once and
 * referred to through the memo after that: the same value each time, whose action is kept. */
static TorchAction
entry_action(TorchLoader *ld, const FsimPickleValue *v, const char *name, gsize len)
{
    guint slot = (guint)(((uintptr_t)v >> 4) % G_N_ELEMENTS(ld->action_strs));

    if (ld->action_strs[slot] != v) {
        ld->action_strs[slot] = v;
        ld->actions[slot] = (uint8_t)fsim_torch_action_from_name(name, len);
    }
    return (TorchAction)ld->actions[slot];
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
entry_values(TorchLoader *ld, const EntryFields *f, const TorchWhere *w, TorchEntry *e,
             GError **error)
{
    TorchAction a = (TorchAction)e->action;

    if (f->addr != NULL && !fsim_torch_is_none(f->addr)) {
        if (!fsim_torch_u64(ld, f->addr, w, "addr", &e->addr, error))
            return FALSE;
        e->flags |= ENTRY_HAS_ADDR;
    }
    if (f->size != NULL) {
        /* alloc and segment sizes are at least a byte; a free carries the block's request. */
        gboolean zero_ok = a != TORCH_ALLOC && a != TORCH_SEGMENT_ALLOC &&
                           a != TORCH_SEGMENT_FREE && a != TORCH_SEGMENT_MAP &&
                           a != TORCH_SEGMENT_UNMAP;

        if (!fsim_torch_size(ld, f->size, w, "size", zero_ok, &e->size, error))
            return FALSE;
        e->flags |= ENTRY_HAS_SIZE;
    }
    if (f->stream != NULL && !fsim_torch_is_none(f->stream) &&
        !fsim_torch_u64(ld, f->stream, w, "stream", &e->stream, error))
        return FALSE;
    if (f->device_free != NULL && !fsim_torch_is_none(f->device_free) &&
        !fsim_torch_u64(ld, f->device_free, w, "device_free", &e->device_free, error))
        return FALSE;
    if (!fsim_torch_is_none(f->pool)) {
        if (!fsim_torch_pool(ld, f->pool, w, "pool_id", &e->pool, error))
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

/* Advance the device's clock to @time_v (clamped when it goes backwards). */
static gboolean
entry_time(TorchLoader *ld, TorchDevice *dev, const FsimPickleValue *time_v, const TorchWhere *w,
           GError **error)
{
    int64_t time_us;
    FsimTime time = 0;

    if (!fsim_torch_i64(ld, time_v, w, "time_us", &time_us, error))
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
    EntryFields f;
    TorchEntry e = {0};
    const char *action;
    gsize action_len;
    gsize pairs;
    TorchAction a;

    if (fsim_pickle_type(entry) != FSIM_PICKLE_DICT)
        return fsim_torch_dict(ld, entry, w, error); /* the error */
    if (entry_fields(entry, &f, &pairs))
        ld->records++;
    if (!fsim_torch_charge(ld, entry, 1 + (uint64_t)pairs, error))
        return FALSE;
    if (f.action == NULL)
        return fsim_torch_missing(ld, entry, w, "action", error);
    action = fsim_torch_str(ld, f.action, w, "action", &action_len, error);
    if (action == NULL)
        return FALSE;
    a = entry_action(ld, f.action, action, action_len);
    e.action = (uint8_t)a;
    dev->n_entries++;
    if (a == TORCH_UNKNOWN) {
        entry_count_unknown(dev, action, action_len);
        e.time = dev->last_time;
        *out = e;
        return TRUE;
    }
    dev->counts[a]++;
    if (!entry_values(ld, &f, w, &e, error) || !entry_required(ld, entry, w, &e, error))
        return FALSE;
    if (!fsim_torch_is_none(f.time) && !entry_time(ld, dev, f.time, w, error))
        return FALSE;
    if (a == TORCH_ALLOC || a == TORCH_OOM)
        e.stack = fsim_torch_frames(ld, f.frames);
    else
        fsim_torch_frames_scan(ld,
                               f.frames); /* kept for allocations only; looked at for torch_npu */
    e.time = dev->last_time;
    *out = e;
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
