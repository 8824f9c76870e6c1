/* SPDX-License-Identifier: MIT */
/*
 * PyTorch snapshots: checked access to the values of the pickle.  Every field is read through
 * these, so a value of the wrong type or out of range is an error naming the file, the byte
 * offset, where the value sits (`segments[3].blocks[2]`) and what was expected; and every dict
 * visited is paid for out of the walk's budget (torch.c says why).
 */
/* madvise() is POSIX/BSD, hidden by -std=c11 unless asked for. */
#define _DEFAULT_SOURCE 1

#include <glib.h>

#include <stdarg.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "torch-reader.h"

const char *const fsim_torch_action_names[TORCH_N_ACTIONS] = {
    [TORCH_ALLOC] = "alloc",
    [TORCH_FREE_REQUESTED] = "free_requested",
    [TORCH_FREE_COMPLETED] = "free_completed",
    [TORCH_SEGMENT_ALLOC] = "segment_alloc",
    [TORCH_SEGMENT_FREE] = "segment_free",
    [TORCH_SEGMENT_MAP] = "segment_map",
    [TORCH_SEGMENT_UNMAP] = "segment_unmap",
    [TORCH_SNAPSHOT] = "snapshot",
    [TORCH_OOM] = "oom",
};

char *
fsim_torch_where_text(const TorchWhere *w)
{
    if (w->depth == 1)
        return g_strdup_printf("%s[%" G_GSIZE_FORMAT "]", w->list, w->i);
    if (w->sub != NULL)
        return g_strdup_printf("%s[%" G_GSIZE_FORMAT "].%s[%" G_GSIZE_FORMAT "]", w->list, w->i,
                               w->sub, w->j);
    return g_strdup_printf("%s[%" G_GSIZE_FORMAT "][%" G_GSIZE_FORMAT "]", w->list, w->i, w->j);
}

gboolean G_GNUC_PRINTF(5, 6)
    fsim_torch_fail(const TorchLoader *ld, GError **error, FsimTraceError code,
                    const FsimPickleValue *at, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, FSIM_TRACE_ERROR, code, "%s: byte %" G_GSIZE_FORMAT ": %s", ld->path,
                fsim_pickle_offset(at), message);
    return FALSE;
}

/* "an int", "a str", "None"...: what @v is, for messages. */
const char *
fsim_torch_type_name(const FsimPickleValue *v)
{
    switch (fsim_pickle_type(v)) {
    case FSIM_PICKLE_NONE:
        return "None";
    case FSIM_PICKLE_BOOL:
        return "a bool";
    case FSIM_PICKLE_INT:
    case FSIM_PICKLE_BIGINT:
        return "an int";
    case FSIM_PICKLE_FLOAT:
        return "a float";
    case FSIM_PICKLE_STR:
        return "a str";
    case FSIM_PICKLE_BYTES:
        return "a bytes object";
    case FSIM_PICKLE_LIST:
        return "a list";
    case FSIM_PICKLE_TUPLE:
        return "a tuple";
    case FSIM_PICKLE_DICT:
        return "a dict";
    default:
        return "an unknown value";
    }
}

/* Pay for visiting @v at @cost; refuse once the file's budget is spent. */
gboolean
fsim_torch_charge(TorchLoader *ld, const FsimPickleValue *v, uint64_t cost, GError **error)
{
    if (cost > ld->budget)
        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_LIMIT, v,
                               "more entries than a file of %" G_GSIZE_FORMAT
                               " bytes can hold (the snapshot refers to the same containers over "
                               "and over)",
                               ld->len);
    ld->budget -= cost;
    return TRUE;
}

gboolean
fsim_torch_list(const TorchLoader *ld, const FsimPickleValue *v, const char *name, GError **error)
{
    if (fsim_pickle_type(v) == FSIM_PICKLE_LIST)
        return TRUE;
    return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v, "%s is %s, expected a list", name,
                           fsim_torch_type_name(v));
}

gboolean
fsim_torch_read_list(TorchLoader *ld, const FsimPickleValue *list, const char *name,
                     TorchItemReader read, GError **error)
{
    if (!fsim_torch_list(ld, list, name, error))
        return FALSE;
    for (gsize i = 0; i < fsim_pickle_len(list); i++) {
        if (!read(ld, fsim_pickle_item(list, i), i, error))
            return FALSE;
    }
    return TRUE;
}

gboolean
fsim_torch_dict(TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w, GError **error)
{
    if (fsim_pickle_type(v) != FSIM_PICKLE_DICT) {
        g_autofree char *where = fsim_torch_where_text(w);

        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v, "%s is %s, expected a dict",
                               where, fsim_torch_type_name(v));
    }
    return fsim_torch_charge(ld, v, 1 + (uint64_t)fsim_pickle_len(v), error);
}

/* Why @v is not a 64-bit integer (@is_signed: an int64 was wanted, else a uint64): negative (for
 * a uint64), out of range, or not an int at all. */
static gboolean
int_fail(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w, const char *field,
         gboolean is_signed, GError **error)
{
    g_autofree char *where = fsim_torch_where_text(w);
    FsimPickleType type = fsim_pickle_type(v);
    int64_t negative;

    if (!is_signed && fsim_pickle_get_int(v, &negative))
        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, v,
                               "%s: '%s' is negative (%" G_GINT64_FORMAT ")", where, field,
                               negative);
    if (type == FSIM_PICKLE_BIGINT || (is_signed && type == FSIM_PICKLE_INT))
        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, v,
                               is_signed ? "%s: '%s' does not fit a signed 64-bit integer"
                                         : "%s: '%s' does not fit 64 bits",
                               where, field);
    return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v, "%s: '%s' is %s, expected an int",
                           where, field, fsim_torch_type_name(v));
}

gboolean
fsim_torch_u64(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
               const char *field, uint64_t *out, GError **error)
{
    return fsim_pickle_get_uint(v, out) || int_fail(ld, v, w, field, FALSE, error);
}

gboolean
fsim_torch_i64(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
               const char *field, int64_t *out, GError **error)
{
    return fsim_pickle_get_int(v, out) || int_fail(ld, v, w, field, TRUE, error);
}

/* A size: 1 to FSIM_MAX_SIZE bytes (0 allowed when @zero_ok). */
gboolean
fsim_torch_size(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
                const char *field, gboolean zero_ok, uint64_t *out, GError **error)
{
    if (!fsim_torch_u64(ld, v, w, field, out, error))
        return FALSE;
    if ((*out == 0 && !zero_ok) || *out > FSIM_MAX_SIZE) {
        g_autofree char *where = fsim_torch_where_text(w);

        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_SIZE, v,
                               "%s: '%s' of %" G_GUINT64_FORMAT " bytes is %s", where, field, *out,
                               *out == 0 ? "empty" : "absurd (above 2^60 bytes)");
    }
    return TRUE;
}

const char *
fsim_torch_str(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
               const char *field, gsize *len, GError **error)
{
    const char *s = fsim_pickle_get_str(v, len);

    if (s == NULL) {
        g_autofree char *where = fsim_torch_where_text(w);

        fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v, "%s: '%s' is %s, expected a str",
                        where, field, fsim_torch_type_name(v));
    }
    return s;
}

gboolean
fsim_torch_missing(const TorchLoader *ld, const FsimPickleValue *dict, const TorchWhere *w,
                   const char *field, GError **error)
{
    g_autofree char *where = fsim_torch_where_text(w);

    return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_SYNTAX, dict, "%s has no '%s'", where,
                           field);
}

/* The index of @key among @keys[0..@n_keys), -1 when it is none of them (or no str). */
static int
dict_key_index(const FsimPickleValue *key, const char *const *keys, gsize n_keys)
{
    gsize len;
    const char *name = fsim_pickle_get_str(key, &len);

    for (gsize i = 0; name != NULL && i < n_keys; i++) {
        if (len > 0 && name[0] == keys[i][0] && strlen(keys[i]) == len &&
            memcmp(name, keys[i], len) == 0)
            return (int)i;
    }
    return -1;
}

void
fsim_torch_dict_fields(TorchLoader *ld, const FsimPickleValue *dict, const char *const *keys,
                       gsize n_keys, const FsimPickleValue **values)
{
    gsize n;
    const FsimPickleValue *const *items = fsim_pickle_dict_items(dict, &n);

    memset(values, 0, n_keys * sizeof(*values));
    for (gsize k = 0; k < n; k++) {
        const FsimPickleValue *key = items[2 * k];
        /* The values are alive as long as the loader: the same pointer, the same str. */
        TorchKeySeen *seen = &ld->keys_seen[((uintptr_t)key >> 4) % G_N_ELEMENTS(ld->keys_seen)];

        if (seen->key != key || seen->keys != keys) {
            seen->key = key;
            seen->keys = keys;
            seen->index = dict_key_index(key, keys, n_keys);
        }
        if (seen->index >= 0)
            values[seen->index] = items[2 * k + 1];
    }
}

gboolean
fsim_torch_is_none(const FsimPickleValue *v)
{
    return v == NULL || fsim_pickle_type(v) == FSIM_PICKLE_NONE;
}

/* Whether @filename is in torch_npu's package: the snapshot was recorded by torch_npu. */
static gboolean
frame_in_torch_npu(const char *filename)
{
    return filename != NULL &&
           (g_str_has_prefix(filename, "torch_npu/") || strstr(filename, "/torch_npu/") != NULL);
}

/* A `frames` list by its items: memo-shared frame dicts are the same pointers in every list. */
typedef struct {
    const FsimPickleValue *const *items;
    gsize n;
} TorchFramesKey;

static guint
frames_key_hash(gconstpointer p)
{
    const TorchFramesKey *key = p;
    uint64_t h = 5381 + key->n;
    gsize step = key->n / 16 + 1;

    /* At most 16 items: lists that differ mostly differ in many places; equality checks all. */
    for (gsize i = 0; i < key->n; i += step)
        h = (h ^ (uint64_t)(uintptr_t)key->items[i]) * 0x100000001b3u;
    return (guint)(h ^ h >> 32);
}

static gboolean
frames_key_equal(gconstpointer a, gconstpointer b)
{
    const TorchFramesKey *x = a;
    const TorchFramesKey *y = b;

    return x->n == y->n && memcmp(x->items, y->items, x->n * sizeof(*x->items)) == 0;
}

/* The slot of @item in the frame index: its own, or the empty one where it would go. */
static inline gsize
frame_slot(const TorchFrameIndex *index, const FsimPickleValue *item)
{
    gsize mask = index->slots - 1;
    gsize i = (gsize)(((uintptr_t)item >> 3) * UINT64_C(0x9E3779B97F4A7C15) >> 32) & mask;

    while (index->keys[i] != NULL && index->keys[i] != item)
        i = (i + 1) & mask;
    return i;
}

/* Makes room in the frame index for one more dict. */
static void
frame_index_grow(TorchFrameIndex *index)
{
    const FsimPickleValue **keys = index->keys;
    uint32_t *ids = index->ids;
    gsize n = index->slots;

    if (2 * (index->count + 1) <= n)
        return;
    index->slots = MAX(2 * n, (gsize)1024);
    index->keys = g_new0(const FsimPickleValue *, index->slots);
    index->ids = g_new(uint32_t, index->slots);
    for (gsize i = 0; i < n; i++) {
        if (keys[i] != NULL) {
            gsize slot = frame_slot(index, keys[i]);

            index->keys[slot] = keys[i];
            index->ids[slot] = ids[i];
        }
    }
    g_free(keys);
    g_free(ids);
}

static void
frame_index_clear(TorchFrameIndex *index)
{
    g_clear_pointer(&index->keys, g_free);
    g_clear_pointer(&index->ids, g_free);
    g_clear_pointer(&index->frames, g_array_unref);
    index->slots = 0;
    index->count = 0;
}

/* The keys of a frame dict read (frame_new()). */
static const char *const frame_keys[] = {"filename", "name", "line"};

/* frames_item() for an item not seen before. */
static G_GNUC_NO_INLINE const FsimFrame *
frame_new(TorchLoader *ld, const FsimPickleValue *item)
{
    TorchFrameIndex *index = &ld->frames;
    FsimFrame frame = {0};
    int64_t line;
    gsize slot;

    if (index->frames == NULL)
        index->frames = g_array_new(FALSE, FALSE, sizeof(FsimFrame));
    if (fsim_pickle_type(item) == FSIM_PICKLE_DICT) {
        const FsimPickleValue *values[G_N_ELEMENTS(frame_keys)];

        fsim_torch_dict_fields(ld, item, frame_keys, G_N_ELEMENTS(frame_keys), values);
        frame.filename = fsim_pickle_get_str(values[0], NULL);
        frame.name = fsim_pickle_get_str(values[1], NULL);
        if (fsim_pickle_get_int(values[2], &line) && line > 0 && line <= G_MAXUINT32)
            frame.line = (uint32_t)line;
        ld->trace->base.frames_name_torch_npu |= frame_in_torch_npu(frame.filename);
        if (frame.filename != NULL || frame.name != NULL)
            fsim_trace_intern_frame(&ld->trace->base, &frame, &frame);
    }
    g_array_append_val(index->frames, frame);
    frame_index_grow(index);
    slot = frame_slot(index, item);
    index->keys[slot] = item;
    index->ids[slot] = index->frames->len;
    index->count++;
    return &g_array_index(index->frames, FsimFrame, index->frames->len - 1);
}

/* The frame of one item of a `frames` list, interned in the trace (both strings NULL when it is
 * no frame), read once per distinct item (frame_new()); whether it names torch_npu is noted
 * then.  Most items are frames seen before: found in the index, in line. */
static inline const FsimFrame *
frames_item(TorchLoader *ld, const FsimPickleValue *item)
{
    const TorchFrameIndex *index = &ld->frames;

    if (G_LIKELY(index->slots != 0)) {
        gsize slot = frame_slot(index, item);

        if (index->keys[slot] == item)
            return &g_array_index(index->frames, FsimFrame, index->ids[slot] - 1);
    }
    return frame_new(ld, item);
}

/* Whether the list of items @probe was seen before; it is remembered in @set (created on first
 * use) from now on. */
static gboolean
frames_seen(GHashTable **set, const TorchFramesKey *probe, gpointer *value)
{
    if (*set == NULL)
        *set = g_hash_table_new_full(frames_key_hash, frames_key_equal, g_free, NULL);
    return g_hash_table_lookup_extended(*set, probe, NULL, value);
}

/* The value noted with twin number @twin in @seen (0: none, or no twin), 1 + the value. */
static inline uint32_t
twin_find(const TorchListsSeen *seen, uint64_t twin)
{
    return twin < seen->n_twins ? seen->twins[twin] : 0;
}

/* Notes @value with twin number @twin (0: none) in @seen.  Twin numbers count the lists the load
 * made twins of, so the array stays as short as the input allows. */
static void
twin_note(TorchListsSeen *seen, uint64_t twin, uint32_t value)
{
    if (twin == 0)
        return;
    if (twin >= seen->n_twins) {
        gsize n = MAX(MAX((gsize)twin + 1, 2 * seen->n_twins), (gsize)256);

        seen->twins = g_renew(uint32_t, seen->twins, n);
        memset(seen->twins + seen->n_twins, 0, (n - seen->n_twins) * sizeof(uint32_t));
        seen->n_twins = n;
    }
    seen->twins[twin] = value + 1;
}

static void
lists_seen_clear(TorchListsSeen *seen)
{
    g_clear_pointer(&seen->items, g_hash_table_unref);
    g_clear_pointer(&seen->twins, g_free);
    seen->n_twins = 0;
}

void
fsim_torch_frames_scan(TorchLoader *ld, const FsimPickleValue *v)
{
    TorchFramesKey probe;
    uint64_t twin;

    if (!ld->npu_frames || ld->trace->base.frames_name_torch_npu)
        return;
    twin = fsim_pickle_list_twin(v);
    if (twin_find(&ld->scanned, twin) != 0)
        return;
    twin_note(&ld->scanned, twin, 0);
    probe.items = fsim_pickle_items(v, &probe.n);
    if (probe.n == 0 || frames_seen(&ld->scanned.items, &probe, NULL))
        return;
    g_hash_table_add(ld->scanned.items, g_memdup2(&probe, sizeof(probe)));
    for (gsize i = 0; i < probe.n && !ld->trace->base.frames_name_torch_npu; i++)
        frames_item(ld, probe.items[i]);
}

/* A list of dicts of filename, line and name, innermost first (see torch-reader.h).  Each
 * distinct list of items is read and interned once. */
uint32_t
fsim_torch_frames(TorchLoader *ld, const FsimPickleValue *v)
{
    GArray *frames;
    TorchFramesKey probe;
    TorchFramesKey *key;
    gpointer found;
    uint32_t stack;
    uint64_t twin;
    gsize kept = 0;

    probe.items = fsim_pickle_items(v, &probe.n);
    if (probe.n == 0 || probe.n > ld->budget)
        return 0;
    ld->budget -= probe.n;
    if (!ld->wants_stacks) {
        fsim_torch_frames_scan(ld, v); /* for the platform evidence only */
        return 0;
    }
    twin = fsim_pickle_list_twin(v);
    stack = twin_find(&ld->stacks, twin);
    if (stack != 0)
        return stack - 1;
    if (frames_seen(&ld->stacks.items, &probe, &found)) {
        twin_note(&ld->stacks, twin, GPOINTER_TO_UINT(found));
        return GPOINTER_TO_UINT(found);
    }
    if (ld->stack_frames == NULL)
        ld->stack_frames = g_array_new(FALSE, FALSE, sizeof(FsimFrame));
    frames = ld->stack_frames;
    g_array_set_size(frames, (guint)probe.n);
    for (gsize i = 0; i < probe.n; i++) {
        const FsimFrame *frame = frames_item(ld, probe.items[i]);

        if (frame->filename != NULL || frame->name != NULL)
            g_array_index(frames, FsimFrame, kept++) = *frame;
    }
    stack = fsim_trace_add_interned_stack(&ld->trace->base, (const FsimFrame *)(void *)frames->data,
                                          (gsize)kept);
    key = g_memdup2(&probe, sizeof(probe));
    g_hash_table_insert(ld->stacks.items, key, GUINT_TO_POINTER(stack));
    twin_note(&ld->stacks, twin, stack);
    return stack;
}

void
fsim_torch_loader_clear(TorchLoader *ld)
{
    lists_seen_clear(&ld->stacks);
    lists_seen_clear(&ld->scanned);
    frame_index_clear(&ld->frames);
    g_clear_pointer(&ld->stack_frames, g_array_unref);
}

TorchAction
fsim_torch_action_from_name(const char *name, gsize len)
{
    for (int a = 0; a < TORCH_N_ACTIONS; a++) {
        if (strlen(fsim_torch_action_names[a]) == len &&
            memcmp(fsim_torch_action_names[a], name, len) == 0)
            return (TorchAction)a;
    }
    return TORCH_UNKNOWN;
}

/* ---- Arrays reused across opens ------------------------------------------------------------ */

/* The largest array kept for the next open. */
#define TORCH_SPARE_MAX_BYTES ((gsize)16 << 20)

static struct {
    GMutex lock;
    GArray *arrays[TORCH_N_SPARES];
} spares;

/* The smallest array whose pages are faulted in at once (torch_populate()). */
#define TORCH_POPULATE_MIN ((gsize)64 << 10)

/* Fault in the whole pages of the @bytes at @data now, in one call: they are all about to be
 * written, and a fresh page written first costs a fault (about a microsecond in a virtual
 * machine), more than twice what the kernel takes to map it among many.  (Where the kernel
 * refuses, they fault in as they are written.) */
static void
torch_populate(void *data, gsize bytes)
{
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t)data + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)data + bytes) & ~(page - 1);

    if (bytes >= TORCH_POPULATE_MIN && end > start)
        (void)madvise((void *)start, end - start, MADV_POPULATE_WRITE);
#else
    (void)data;
    (void)bytes;
#endif
}

GArray *
fsim_torch_array_take(TorchSpare which, guint element_size, guint reserve)
{
    GArray *array;

    g_mutex_lock(&spares.lock);
    array = g_steal_pointer(&spares.arrays[which]);
    g_mutex_unlock(&spares.lock);
    if (array == NULL) {
        array = g_array_sized_new(FALSE, FALSE, element_size, reserve);
        torch_populate(array->data, (gsize)reserve * element_size);
        return array;
    }
    g_assert(g_array_get_element_size(array) == element_size);
    g_array_set_size(array, 0);
    return array;
}

void
fsim_torch_array_give(TorchSpare which, GArray *array)
{
    if (array == NULL)
        return;
    /* (an empty one may never have held anything: a fresh array does as well) */
    if (array->len > 0 &&
        (gsize)array->len * g_array_get_element_size(array) <= TORCH_SPARE_MAX_BYTES) {
        g_mutex_lock(&spares.lock);
        if (spares.arrays[which] == NULL)
            spares.arrays[which] = g_steal_pointer(&array);
        g_mutex_unlock(&spares.lock);
    }
    if (array != NULL)
        g_array_unref(array);
}

static void
events_free(TorchDevice *dev)
{
    if (dev->events_scratch)
        fsim_pickle_scratch_give(dev->events);
    else
        g_free(dev->events);
    dev->events = NULL;
    dev->events_room = 0;
    dev->events_scratch = FALSE;
}

void
fsim_torch_events_room(TorchDevice *dev, guint room)
{
    gsize bytes = (gsize)room * sizeof(TorchEvent);
    gsize got = 0;
    TorchEvent *events;
    gboolean scratch;

    if (room <= dev->events_room)
        return;
    events = fsim_pickle_scratch_take(bytes, &got);
    scratch = events != NULL;
    if (events == NULL) {
        events = g_new(TorchEvent, room);
        torch_populate(events, bytes);
        got = bytes;
    }
    if (dev->n_events > 0)
        memcpy(events, dev->events, (gsize)dev->n_events * sizeof(TorchEvent));
    events_free(dev);
    dev->events = events;
    dev->events_room = (guint)MIN(got / sizeof(TorchEvent), (gsize)G_MAXUINT);
    dev->events_scratch = scratch;
}

void
fsim_torch_device_free(gpointer data)
{
    TorchDevice *dev = data;

    if (dev == NULL)
        return;
    fsim_torch_array_give(TORCH_SPARE_ENTRIES, g_steal_pointer(&dev->entries));
    g_clear_pointer(&dev->marks, g_array_unref);
    g_clear_pointer(&dev->final_segments, g_array_unref);
    g_clear_pointer(&dev->final_blocks, g_array_unref);
    events_free(dev);
    g_clear_pointer(&dev->unknown, g_hash_table_unref);
    g_free(dev);
}

/* The device @device of the trace, created on first use. */
TorchDevice *
fsim_torch_device(TorchLoader *ld, const FsimPickleValue *at, uint64_t device, GError **error)
{
    GPtrArray *devices = ld->trace->devices;
    TorchDevice *dev;

    if (device >= TORCH_MAX_DEVICES) {
        fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_LIMIT, at,
                        "device %" G_GUINT64_FORMAT " is beyond the %d devices fragsim reads",
                        device, TORCH_MAX_DEVICES);
        return NULL;
    }
    if (devices->len <= device)
        g_ptr_array_set_size(devices, (gint)device + 1);
    dev = devices->pdata[device];
    if (dev == NULL) {
        dev = g_new0(TorchDevice, 1);
        dev->device = (uint32_t)device;
        dev->entries = g_array_new(FALSE, FALSE, sizeof(TorchEntry));
        dev->marks = g_array_new(FALSE, FALSE, sizeof(TorchMark));
        dev->final_segments = g_array_new(FALSE, FALSE, sizeof(FsimSeedSegment));
        dev->final_blocks = g_array_new(FALSE, FALSE, sizeof(FsimSeedBlock));
        devices->pdata[device] = dev;
    }
    return dev;
}
