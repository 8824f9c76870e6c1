/* SPDX-License-Identifier: MIT */
/*
 * PyTorch memory snapshots: the pickles of torch.cuda.memory._dump_snapshot() and of
 * torch.cuda.memory_snapshot(), read through the safe unpickler (pickle.c) and walked by the
 * fields present, never by a version number (docs/trace-formats.md has the user's view).
 *
 * Shapes accepted: a bare list of segments (the oldest form, no trace); or a dict with any of
 * `segments`, `device_traces` (one list of entries per device), `allocator_settings` and
 * `external_annotations`.  Blocks carry `address` or not (then they follow each other from the
 * segment's address), and `requested_size` or the legacy `history[0].real_size`.  Entries carry
 * `time_us` or not; `frames`, `compile_context`, `user_metadata` and other keys are ignored.
 *
 * Devices.  Every index of `device_traces` with entries, and every device that owns a segment of
 * the final state, is a device of the trace (one with a state and no events still replays: the
 * state is packed into the policy).  Device indices are limited to TORCH_MAX_DEVICES.
 *
 * Events, per device, in the order of `device_traces[device]` (`index` = position there):
 *   alloc          -> FSIM_EV_ALLOC with a fresh id; its recorded address is mapped to the id
 *                     (addresses are reused), `size` is the original request.
 *   free_requested -> FSIM_EV_FREE of the id mapped to its address, with FSIM_EVF_DEFERRED
 *                     unless the very next entry of the device is its free_completed (the block
 *                     was recordStream'ed: the memory stays in use until that entry).
 *   free_completed -> FSIM_EV_FREE_COMPLETED; the address is forgotten.
 *   An address with no id (the ring buffer dropped the alloc) gets a fresh id anyway: the engine
 *   counts the free as unmatched.
 *   segment_alloc, segment_free, segment_map, segment_unmap, oom -> FsimOutcome (ground truth for
 *   the validator, never an input), on the same index scale.
 *   A burst of consecutive segment_free / segment_unmap entries is what PyTorch's
 *   release_cached_blocks() writes; empty_cache() and the retry before an OOM both call it and
 *   the trace cannot tell them apart.  Each burst therefore *also* becomes one
 *   FSIM_EV_EMPTY_CACHE with FSIM_EVF_INFERRED, at the time and index of its first entry, so a
 *   replay releases what the recording released.  (With max_split_size_mb or a
 *   garbage_collection_threshold set, PyTorch also frees single segments on its own; those show
 *   up as bursts of one and are inferred the same way.  Consumers decide what to do with
 *   inferred events.)
 *   snapshot entries and actions this reader does not know are counted, not fatal, and skipped.
 *   external_annotations (START/END, name, device, time_us) -> FSIM_EV_MARK events labelled
 *   `STAGE NAME`, merged into their device's stream by time (an entry and a mark at the same
 *   time: the entry first).
 *
 * Time.  `time_us` x 1000, relative to the device's first entry that has one.  A clock that goes
 * backwards is clamped (and counted in the debug log); an entry without `time_us` in a trace
 * that has them keeps the previous time.  A device whose trace has no `time_us` at all gets a
 * synthetic clock of TORCH_CLOCK_STEP_NS (1 us) per entry; its annotations cannot be placed and
 * are dropped, as are annotations of devices that are not devices of the trace.
 *
 * Initial state (reference §3.5, as MemoryViz does).  Start from the final `segments` of the
 * device and undo its trace backwards: alloc -> the block was not there; free_completed -> it
 * was (pending free, if its free_requested is not in the trace either); free_requested -> it
 * was allocated; segment_alloc -> the segment was not there; segment_free -> it was;
 * segment_map / segment_unmap shrink / grow the mapped ranges of expandable segments.  Memory
 * alive before recording began therefore counts as live.  Blocks get ids 1..n in address order,
 * and later frees of their addresses resolve to them.  A block that is still in the final state
 * keeps its recorded size; a block brought back by undoing a free_completed gets round_size()
 * of its request (512-byte rounding), because the trace does not record block sizes: an unsplit
 * large block really holds up to 1 MiB more.  A trace with gaps (recording paused) can undo into
 * an impossible state; blocks and segments that would overlap or lie outside every segment are
 * then dropped (debug log) and fsim_initial_state_check() guards the result.
 *
 * Limits.  At most TORCH_MAX_BYTES once decompressed.  The memo lets a small pickle refer to one
 * container many times, so the walk is bounded by the file: every dict visited (segment, block,
 * trace entry, annotation) costs one plus its number of keys, and a file of N bytes may cost at
 * most N / 2 + TORCH_BUDGET_SLACK, beyond which the file is refused (FSIM_TRACE_ERROR_LIMIT).
 * Real snapshots cost under a tenth of that.  Work and memory stay linear in the file size.
 *
 * The whole snapshot is decoded at open (a plain file is mapped, not copied) into compact
 * per-device event arrays, and the pickle is freed; streams then only copy events out.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/trace.h"

#include "core/live-table.h"
#include "pickle.h"
#include "readers.h"
#include "torch-pools.h"

#define TORCH_MAX_BYTES     ((gsize)2 << 30)
#define TORCH_MAX_DEVICES   1024
#define TORCH_CLOCK_STEP_NS 1000
#define TORCH_BUDGET_SLACK  1024
#define TORCH_MIN_BLOCK     512
#define TORCH_SMALL_SEGMENT (2 * FSIM_MiB)
#define TORCH_LARGE_PAGE    (20 * FSIM_MiB)

#define TORCH_N_ACTIONS TORCH_UNKNOWN

static const char *const torch_action_names[TORCH_N_ACTIONS] = {
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

typedef struct {
    FsimTime time;
    uint32_t label; /* index in TorchTrace.labels */
    uint32_t seq;   /* order in external_annotations: ties keep it */
} TorchMark;

/* What a stream hands out: an FsimEvent without the device and with the label as an index. */
typedef struct {
    FsimTime time;
    uint64_t index;
    uint64_t id;
    uint64_t size;
    uint64_t stream;
    FsimAddr addr;
    uint32_t label;
    uint8_t kind;
    uint8_t flags;
} TorchEvent;

typedef struct {
    uint32_t device;
    /* While opening. */
    GArray *entries;        /* TorchEntry */
    GArray *marks;          /* TorchMark */
    GArray *final_segments; /* FsimSeedSegment */
    GArray *final_blocks;   /* FsimSeedBlock, id unset */
    gboolean timed;         /* some entry has time_us */
    int64_t base_us;        /* the first time_us */
    FsimTime last_time;
    uint64_t backwards; /* entries whose time_us went backwards */
    /* Kept. */
    GArray *events; /* TorchEvent */
    uint64_t n_entries;
    uint64_t counts[TORCH_N_ACTIONS];
    GHashTable *unknown; /* (nullable) action name -> count (a uint64_t) */
    uint64_t segments;
    uint64_t reserved_bytes;
} TorchDevice;

typedef struct {
    FsimTrace base;
    GPtrArray *devices; /* TorchDevice* by device index; NULL where there is none */
    GPtrArray *labels;  /* char*: the labels of MARK events */
    uint64_t annotations;
} TorchTrace;

typedef struct {
    FsimTraceStream base;
    const TorchTrace *trace;
    const TorchDevice *device;
    guint next;
} TorchStream;

typedef struct {
    const char *path;
    gsize len;
    uint64_t budget; /* dict visits still allowed, see the file comment */
    TorchTrace *trace;
    uint64_t dropped_annotations;
} TorchLoader;

/* Where a value sits, for messages: `list[i]`, `list[i][j]` or `list[i].sub[j]`. */
typedef struct {
    const char *list;
    gsize i;
    gsize j;
    int depth; /* 1: list[i]; 2: with j */
    const char *sub;
} TorchWhere;

#define KEY_IS(key, len, literal) \
    ((len) == sizeof(literal) - 1 && memcmp((key), (literal), sizeof(literal) - 1) == 0)

/* ---- helpers ------------------------------------------------------------------------------- */

static char *
where_text(const TorchWhere *w)
{
    if (w->depth == 1)
        return g_strdup_printf("%s[%" G_GSIZE_FORMAT "]", w->list, w->i);
    if (w->sub != NULL)
        return g_strdup_printf("%s[%" G_GSIZE_FORMAT "].%s[%" G_GSIZE_FORMAT "]", w->list, w->i,
                               w->sub, w->j);
    return g_strdup_printf("%s[%" G_GSIZE_FORMAT "][%" G_GSIZE_FORMAT "]", w->list, w->i, w->j);
}

static gboolean G_GNUC_PRINTF(5, 6)
    torch_fail(const TorchLoader *ld, GError **error, FsimTraceError code,
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
static const char *
type_name(const FsimPickleValue *v)
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
static gboolean
torch_charge(TorchLoader *ld, const FsimPickleValue *v, uint64_t cost, GError **error)
{
    if (cost > ld->budget)
        return torch_fail(ld, error, FSIM_TRACE_ERROR_LIMIT, v,
                          "more entries than a file of %" G_GSIZE_FORMAT
                          " bytes can hold (the snapshot refers to the same containers over "
                          "and over)",
                          ld->len);
    ld->budget -= cost;
    return TRUE;
}

static gboolean
torch_dict(TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w, GError **error)
{
    if (fsim_pickle_type(v) != FSIM_PICKLE_DICT) {
        g_autofree char *where = where_text(w);

        return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v, "%s is %s, expected a dict", where,
                          type_name(v));
    }
    return torch_charge(ld, v, 1 + (uint64_t)fsim_pickle_len(v), error);
}

static gboolean
torch_u64(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w, const char *field,
          uint64_t *out, GError **error)
{
    g_autofree char *where = NULL;
    int64_t negative;

    if (fsim_pickle_get_uint(v, out))
        return TRUE;
    where = where_text(w);
    if (fsim_pickle_get_int(v, &negative))
        return torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, v,
                          "%s: '%s' is negative (%" G_GINT64_FORMAT ")", where, field, negative);
    if (fsim_pickle_type(v) == FSIM_PICKLE_BIGINT)
        return torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, v, "%s: '%s' does not fit 64 bits",
                          where, field);
    return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v, "%s: '%s' is %s, expected an int", where,
                      field, type_name(v));
}

static gboolean
torch_i64(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w, const char *field,
          int64_t *out, GError **error)
{
    g_autofree char *where = NULL;

    if (fsim_pickle_get_int(v, out))
        return TRUE;
    where = where_text(w);
    if (fsim_pickle_type(v) == FSIM_PICKLE_INT || fsim_pickle_type(v) == FSIM_PICKLE_BIGINT)
        return torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, v,
                          "%s: '%s' does not fit a signed 64-bit integer", where, field);
    return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v, "%s: '%s' is %s, expected an int", where,
                      field, type_name(v));
}

/* A size: 1 to FSIM_MAX_SIZE bytes (0 allowed when @zero_ok). */
static gboolean
torch_size(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w, const char *field,
           gboolean zero_ok, uint64_t *out, GError **error)
{
    if (!torch_u64(ld, v, w, field, out, error))
        return FALSE;
    if ((*out == 0 && !zero_ok) || *out > FSIM_MAX_SIZE) {
        g_autofree char *where = where_text(w);

        return torch_fail(ld, error, FSIM_TRACE_ERROR_SIZE, v,
                          "%s: '%s' of %" G_GUINT64_FORMAT " bytes is %s", where, field, *out,
                          *out == 0 ? "empty" : "absurd (above 2^60 bytes)");
    }
    return TRUE;
}

static const char *
torch_str(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w, const char *field,
          gsize *len, GError **error)
{
    const char *s = fsim_pickle_get_str(v, len);

    if (s == NULL) {
        g_autofree char *where = where_text(w);

        torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v, "%s: '%s' is %s, expected a str", where,
                   field, type_name(v));
    }
    return s;
}

static gboolean
torch_missing(const TorchLoader *ld, const FsimPickleValue *dict, const TorchWhere *w,
              const char *field, GError **error)
{
    g_autofree char *where = where_text(w);

    return torch_fail(ld, error, FSIM_TRACE_ERROR_SYNTAX, dict, "%s has no '%s'", where, field);
}

static gboolean
is_none(const FsimPickleValue *v)
{
    return v == NULL || fsim_pickle_type(v) == FSIM_PICKLE_NONE;
}

static uint64_t
add_saturated(uint64_t a, uint64_t b)
{
    return a + b < a ? G_MAXUINT64 : a + b;
}

/* PyTorch's 512-byte rounding of a request (reference §2.4, without roundup_power2_divisions). */
static uint64_t
round_size(uint64_t size)
{
    if (size < TORCH_MIN_BLOCK)
        return TORCH_MIN_BLOCK;
    return (size + TORCH_MIN_BLOCK - 1) / TORCH_MIN_BLOCK * TORCH_MIN_BLOCK;
}

static TorchAction
action_from_name(const char *name, gsize len)
{
    for (int a = 0; a < TORCH_N_ACTIONS; a++) {
        if (strlen(torch_action_names[a]) == len && memcmp(torch_action_names[a], name, len) == 0)
            return (TorchAction)a;
    }
    return TORCH_UNKNOWN;
}

static void
torch_device_free(gpointer data)
{
    TorchDevice *dev = data;

    if (dev == NULL)
        return;
    g_clear_pointer(&dev->entries, g_array_unref);
    g_clear_pointer(&dev->marks, g_array_unref);
    g_clear_pointer(&dev->final_segments, g_array_unref);
    g_clear_pointer(&dev->final_blocks, g_array_unref);
    g_clear_pointer(&dev->events, g_array_unref);
    g_clear_pointer(&dev->unknown, g_hash_table_unref);
    g_free(dev);
}

/* The device @device of the trace, created on first use. */
static TorchDevice *
torch_device(TorchLoader *ld, const FsimPickleValue *at, uint64_t device, GError **error)
{
    GPtrArray *devices = ld->trace->devices;
    TorchDevice *dev;

    if (device >= TORCH_MAX_DEVICES) {
        torch_fail(ld, error, FSIM_TRACE_ERROR_LIMIT, at,
                   "device %" G_GUINT64_FORMAT " is beyond the %d devices fragsim reads", device,
                   TORCH_MAX_DEVICES);
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

/* ---- final segments ------------------------------------------------------------------------ */

/* A MempoolId_t: a pair of non-negative integers (a tuple, or a list once through JSON). */
static gboolean
torch_pool(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w, const char *field,
           uint64_t *out, GError **error)
{
    uint64_t first;
    uint64_t second;
    FsimPickleType type = fsim_pickle_type(v);

    if ((type != FSIM_PICKLE_TUPLE && type != FSIM_PICKLE_LIST) || fsim_pickle_len(v) != 2) {
        g_autofree char *where = where_text(w);

        return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v,
                          "%s: '%s' is %s, expected a pair of integers", where, field,
                          type_name(v));
    }
    if (!torch_u64(ld, fsim_pickle_item(v, 0), w, field, &first, error) ||
        !torch_u64(ld, fsim_pickle_item(v, 1), w, field, &second, error))
        return FALSE;
    if (!fsim_torch_pool_id(first, second, out)) {
        g_autofree char *where = where_text(w);

        return torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, v,
                          "%s: '%s' (%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
                          ") is beyond 2^32 pools",
                          where, field, first, second);
    }
    return TRUE;
}

static gboolean
torch_read_block(TorchLoader *ld, TorchDevice *dev, const FsimSeedSegment *seg,
                 const FsimPickleValue *block, const TorchWhere *w, FsimAddr *cursor,
                 GError **error)
{
    const FsimPickleValue *address_v = NULL;
    const FsimPickleValue *size_v = NULL;
    const FsimPickleValue *requested_v = NULL;
    const FsimPickleValue *state_v = NULL;
    const FsimPickleValue *history_v = NULL;
    gsize n = fsim_pickle_len(block);
    FsimSeedBlock seed = {0};
    uint64_t requested = 0;
    gboolean has_requested = FALSE;
    gboolean live = FALSE;

    if (!torch_dict(ld, block, w, error))
        return FALSE;
    for (gsize k = 0; k < n; k++) {
        gsize len;
        const char *key = fsim_pickle_get_str(fsim_pickle_dict_key(block, k), &len);
        const FsimPickleValue *value = fsim_pickle_dict_value(block, k);

        if (key == NULL)
            continue;
        if (KEY_IS(key, len, "address"))
            address_v = value;
        else if (KEY_IS(key, len, "size"))
            size_v = value;
        else if (KEY_IS(key, len, "requested_size"))
            requested_v = value;
        else if (KEY_IS(key, len, "state"))
            state_v = value;
        else if (KEY_IS(key, len, "history"))
            history_v = value;
    }
    if (size_v == NULL)
        return torch_missing(ld, block, w, "size", error);
    if (!torch_size(ld, size_v, w, "size", FALSE, &seed.size, error))
        return FALSE;
    seed.addr = *cursor;
    if (address_v != NULL && !torch_u64(ld, address_v, w, "address", &seed.addr, error))
        return FALSE;
    if (seed.addr + seed.size < seed.addr) {
        g_autofree char *where = where_text(w);

        return torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, block,
                          "%s: the block ends beyond 2^64", where);
    }
    *cursor = seed.addr + seed.size;
    if (state_v != NULL) {
        gsize len;
        const char *state = torch_str(ld, state_v, w, "state", &len, error);

        if (state == NULL)
            return FALSE;
        if (KEY_IS(state, len, "active_allocated")) {
            live = TRUE;
        } else if (KEY_IS(state, len, "active_pending_free")) {
            live = TRUE;
            seed.pending_free = TRUE;
        }
    }
    if (requested_v != NULL) {
        if (!torch_u64(ld, requested_v, w, "requested_size", &requested, error))
            return FALSE;
        has_requested = TRUE;
    } else if (!is_none(history_v)) {
        /* 1.13/2.0: the request is in the allocation history, most recent first (MemoryViz
         * reads history[0] too). */
        const FsimPickleValue *first = fsim_pickle_item(history_v, 0);

        if (fsim_pickle_type(history_v) != FSIM_PICKLE_LIST) {
            g_autofree char *where = where_text(w);

            return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, history_v,
                              "%s: 'history' is %s, expected a list", where, type_name(history_v));
        }
        if (first != NULL) {
            const FsimPickleValue *real_size;

            if (!torch_dict(ld, first, w, error))
                return FALSE;
            real_size = fsim_pickle_dict_get(first, "real_size");
            if (real_size != NULL) {
                if (!torch_u64(ld, real_size, w, "history[0].real_size", &requested, error))
                    return FALSE;
                has_requested = TRUE;
            }
        }
    }
    if (!live)
        return TRUE;
    seed.requested = has_requested ? MIN(requested, seed.size) : seed.size;
    seed.stream = seg->stream;
    g_array_append_val(dev->final_blocks, seed);
    return TRUE;
}

static gboolean
torch_read_segment(TorchLoader *ld, const FsimPickleValue *segment, gsize i, GError **error)
{
    const FsimPickleValue *device_v = NULL;
    const FsimPickleValue *address_v = NULL;
    const FsimPickleValue *size_v = NULL;
    const FsimPickleValue *stream_v = NULL;
    const FsimPickleValue *type_v = NULL;
    const FsimPickleValue *expandable_v = NULL;
    const FsimPickleValue *blocks_v = NULL;
    const FsimPickleValue *pool_v = NULL;
    TorchWhere w = {.list = "segments", .i = i, .depth = 1};
    gsize n = fsim_pickle_len(segment);
    FsimSeedSegment seg = {0};
    uint64_t device = 0;
    TorchDevice *dev;
    FsimAddr cursor;

    if (!torch_dict(ld, segment, &w, error))
        return FALSE;
    for (gsize k = 0; k < n; k++) {
        gsize len;
        const char *key = fsim_pickle_get_str(fsim_pickle_dict_key(segment, k), &len);
        const FsimPickleValue *value = fsim_pickle_dict_value(segment, k);

        if (key == NULL)
            continue;
        if (KEY_IS(key, len, "device"))
            device_v = value;
        else if (KEY_IS(key, len, "address"))
            address_v = value;
        else if (KEY_IS(key, len, "total_size"))
            size_v = value;
        else if (KEY_IS(key, len, "stream"))
            stream_v = value;
        else if (KEY_IS(key, len, "segment_type"))
            type_v = value;
        else if (KEY_IS(key, len, "is_expandable"))
            expandable_v = value;
        else if (KEY_IS(key, len, "blocks"))
            blocks_v = value;
        else if (KEY_IS(key, len, "segment_pool_id"))
            pool_v = value;
    }
    if (address_v == NULL)
        return torch_missing(ld, segment, &w, "address", error);
    if (size_v == NULL)
        return torch_missing(ld, segment, &w, "total_size", error);
    if (!torch_u64(ld, address_v, &w, "address", &seg.addr, error) ||
        !torch_size(ld, size_v, &w, "total_size", FALSE, &seg.size, error))
        return FALSE;
    if (seg.addr + seg.size < seg.addr)
        return torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, segment,
                          "segments[%" G_GSIZE_FORMAT "]: the segment ends beyond 2^64", i);
    if (device_v != NULL && !torch_u64(ld, device_v, &w, "device", &device, error))
        return FALSE;
    if (stream_v != NULL && !torch_u64(ld, stream_v, &w, "stream", &seg.stream, error))
        return FALSE;
    if (!is_none(pool_v) && !torch_pool(ld, pool_v, &w, "segment_pool_id", &seg.pool_id, error))
        return FALSE;
    seg.pool = seg.size <= TORCH_SMALL_SEGMENT ? FSIM_POOL_SMALL : FSIM_POOL_LARGE;
    if (!is_none(type_v)) {
        gsize len;
        const char *type = torch_str(ld, type_v, &w, "segment_type", &len, error);

        if (type == NULL)
            return FALSE;
        if (KEY_IS(type, len, "small"))
            seg.pool = FSIM_POOL_SMALL;
        else if (KEY_IS(type, len, "large"))
            seg.pool = FSIM_POOL_LARGE;
    }
    if (!is_none(expandable_v) && !fsim_pickle_get_bool(expandable_v, &seg.expandable))
        return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, expandable_v,
                          "segments[%" G_GSIZE_FORMAT "]: 'is_expandable' is %s, expected a bool",
                          i, type_name(expandable_v));
    dev = torch_device(ld, device_v != NULL ? device_v : segment, device, error);
    if (dev == NULL)
        return FALSE;
    dev->segments++;
    dev->reserved_bytes = add_saturated(dev->reserved_bytes, seg.size);
    g_array_append_val(dev->final_segments, seg);
    if (is_none(blocks_v))
        return TRUE;
    if (fsim_pickle_type(blocks_v) != FSIM_PICKLE_LIST)
        return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, blocks_v,
                          "segments[%" G_GSIZE_FORMAT "]: 'blocks' is %s, expected a list", i,
                          type_name(blocks_v));
    cursor = seg.addr;
    w.depth = 2;
    w.sub = "blocks";
    for (gsize j = 0; j < fsim_pickle_len(blocks_v); j++) {
        w.j = j;
        if (!torch_read_block(ld, dev, &seg, fsim_pickle_item(blocks_v, j), &w, &cursor, error))
            return FALSE;
    }
    return TRUE;
}

static gboolean
torch_read_segments(TorchLoader *ld, const FsimPickleValue *segments, GError **error)
{
    if (fsim_pickle_type(segments) != FSIM_PICKLE_LIST)
        return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, segments,
                          "'segments' is %s, expected a list", type_name(segments));
    for (gsize i = 0; i < fsim_pickle_len(segments); i++) {
        if (!torch_read_segment(ld, fsim_pickle_item(segments, i), i, error))
            return FALSE;
    }
    return TRUE;
}

/* ---- device traces ------------------------------------------------------------------------- */

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
        g_autofree char *where = where_text(w);

        return torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, at,
                          "%s: 'time_us' %" G_GINT64_FORMAT
                          " is too far from the trace's first time (%" G_GINT64_FORMAT ")",
                          where, time_us, dev->base_us);
    }
    *out = delta * 1000;
    return TRUE;
}

static gboolean
torch_read_entry(TorchLoader *ld, TorchDevice *dev, const FsimPickleValue *entry,
                 const TorchWhere *w, GError **error)
{
    const FsimPickleValue *action_v = NULL;
    const FsimPickleValue *addr_v = NULL;
    const FsimPickleValue *size_v = NULL;
    const FsimPickleValue *stream_v = NULL;
    const FsimPickleValue *time_v = NULL;
    const FsimPickleValue *free_v = NULL;
    const FsimPickleValue *pool_v = NULL;
    gsize n = fsim_pickle_len(entry);
    TorchEntry e = {0};
    const char *action;
    gsize action_len;
    TorchAction a;

    if (!torch_dict(ld, entry, w, error))
        return FALSE;
    for (gsize k = 0; k < n; k++) {
        gsize len;
        const char *key = fsim_pickle_get_str(fsim_pickle_dict_key(entry, k), &len);
        const FsimPickleValue *value = fsim_pickle_dict_value(entry, k);

        if (key == NULL)
            continue;
        switch (len) {
        case 4:
            if (memcmp(key, "addr", 4) == 0)
                addr_v = value;
            else if (memcmp(key, "size", 4) == 0)
                size_v = value;
            break;
        case 6:
            if (memcmp(key, "action", 6) == 0)
                action_v = value;
            else if (memcmp(key, "stream", 6) == 0)
                stream_v = value;
            break;
        case 7:
            if (memcmp(key, "time_us", 7) == 0)
                time_v = value;
            else if (memcmp(key, "pool_id", 7) == 0)
                pool_v = value;
            break;
        case 11:
            if (memcmp(key, "device_free", 11) == 0)
                free_v = value;
            break;
        default:
            break;
        }
    }
    if (action_v == NULL)
        return torch_missing(ld, entry, w, "action", error);
    action = torch_str(ld, action_v, w, "action", &action_len, error);
    if (action == NULL)
        return FALSE;
    a = action_from_name(action, action_len);
    e.action = (uint8_t)a;
    dev->n_entries++;
    if (a == TORCH_UNKNOWN) {
        /* A newer (or older) action: count it, keep its place, never look inside. */
        uint64_t *count;

        if (dev->unknown == NULL)
            dev->unknown = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
        count = g_hash_table_lookup(dev->unknown, action);
        if (count == NULL) {
            count = g_new0(uint64_t, 1);
            g_hash_table_insert(dev->unknown, g_strndup(action, action_len), count);
        }
        (*count)++;
        e.time = dev->last_time;
        g_array_append_val(dev->entries, e);
        return TRUE;
    }
    dev->counts[a]++;
    if (addr_v != NULL && !is_none(addr_v)) {
        if (!torch_u64(ld, addr_v, w, "addr", &e.addr, error))
            return FALSE;
        e.flags |= ENTRY_HAS_ADDR;
    }
    if (size_v != NULL) {
        /* alloc and segment sizes are at least a byte; a free carries the block's request. */
        gboolean zero_ok = a != TORCH_ALLOC && a != TORCH_SEGMENT_ALLOC &&
                           a != TORCH_SEGMENT_FREE && a != TORCH_SEGMENT_MAP &&
                           a != TORCH_SEGMENT_UNMAP;

        if (!torch_size(ld, size_v, w, "size", zero_ok, &e.size, error))
            return FALSE;
        e.flags |= ENTRY_HAS_SIZE;
    }
    if (stream_v != NULL && !is_none(stream_v) &&
        !torch_u64(ld, stream_v, w, "stream", &e.stream, error))
        return FALSE;
    if (free_v != NULL && !is_none(free_v) &&
        !torch_u64(ld, free_v, w, "device_free", &e.device_free, error))
        return FALSE;
    if (!is_none(pool_v)) {
        if (!torch_pool(ld, pool_v, w, "pool_id", &e.pool, error))
            return FALSE;
        e.flags |= ENTRY_HAS_POOL;
    }
    switch (a) {
    case TORCH_ALLOC:
    case TORCH_FREE_REQUESTED:
    case TORCH_FREE_COMPLETED:
    case TORCH_SEGMENT_ALLOC:
    case TORCH_SEGMENT_FREE:
    case TORCH_SEGMENT_MAP:
    case TORCH_SEGMENT_UNMAP:
        if ((e.flags & ENTRY_HAS_ADDR) == 0)
            return torch_missing(ld, entry, w, "addr", error);
        if ((e.flags & ENTRY_HAS_SIZE) == 0)
            return torch_missing(ld, entry, w, "size", error);
        if (e.addr + e.size < e.addr) {
            g_autofree char *where = where_text(w);

            return torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, entry,
                              "%s: the range ends beyond 2^64", where);
        }
        break;
    case TORCH_OOM:
        if ((e.flags & ENTRY_HAS_SIZE) == 0)
            return torch_missing(ld, entry, w, "size", error);
        break;
    default:
        break;
    }
    if (!is_none(time_v)) {
        int64_t time_us;
        FsimTime time = 0;

        if (!torch_i64(ld, time_v, w, "time_us", &time_us, error))
            return FALSE;
        if (!dev->timed) {
            dev->timed = TRUE;
            dev->base_us = time_us;
        }
        if (!torch_relative_time(ld, dev, time_v, w, time_us, &time, error))
            return FALSE;
        if (time < dev->last_time) {
            dev->backwards++;
            time = dev->last_time;
        }
        dev->last_time = time;
    }
    e.time = dev->last_time;
    g_array_append_val(dev->entries, e);
    return TRUE;
}

static gboolean
torch_read_traces(TorchLoader *ld, const FsimPickleValue *traces, GError **error)
{
    if (fsim_pickle_type(traces) != FSIM_PICKLE_LIST)
        return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, traces,
                          "'device_traces' is %s, expected a list", type_name(traces));
    for (gsize d = 0; d < fsim_pickle_len(traces); d++) {
        const FsimPickleValue *trace = fsim_pickle_item(traces, d);
        TorchWhere w = {.list = "device_traces", .i = d, .depth = 1};
        gsize n = fsim_pickle_len(trace);
        TorchDevice *dev;

        if (fsim_pickle_type(trace) != FSIM_PICKLE_LIST)
            return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, trace,
                              "device_traces[%" G_GSIZE_FORMAT "] is %s, expected a list", d,
                              type_name(trace));
        if (!torch_charge(ld, trace, 1, error))
            return FALSE;
        if (n == 0)
            continue;
        dev = torch_device(ld, trace, d, error);
        if (dev == NULL)
            return FALSE;
        /* The list's length is bounded by the input, and each entry costs budget. */
        g_array_unref(dev->entries);
        dev->entries =
            g_array_sized_new(FALSE, FALSE, sizeof(TorchEntry), (guint)MIN(n, ld->budget));
        w.depth = 2;
        for (gsize i = 0; i < n; i++) {
            w.j = i;
            if (!torch_read_entry(ld, dev, fsim_pickle_item(trace, i), &w, error))
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

    if (!torch_dict(ld, annotation, &w, error))
        return FALSE;
    stage_v = fsim_pickle_dict_get(annotation, "stage");
    name_v = fsim_pickle_dict_get(annotation, "name");
    device_v = fsim_pickle_dict_get(annotation, "device");
    time_v = fsim_pickle_dict_get(annotation, "time_us");
    trace->annotations++;
    if (!is_none(stage_v) && (stage = torch_str(ld, stage_v, &w, "stage", NULL, error)) == NULL)
        return FALSE;
    if (!is_none(name_v) && (name = torch_str(ld, name_v, &w, "name", NULL, error)) == NULL)
        return FALSE;
    if (!is_none(device_v) && !torch_u64(ld, device_v, &w, "device", &device, error))
        return FALSE;
    if (is_none(time_v)) {
        ld->dropped_annotations++;
        return TRUE;
    }
    if (!torch_i64(ld, time_v, &w, "time_us", &time_us, error))
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

static gboolean
torch_read_annotations(TorchLoader *ld, const FsimPickleValue *annotations, GError **error)
{
    if (fsim_pickle_type(annotations) != FSIM_PICKLE_LIST)
        return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, annotations,
                          "'external_annotations' is %s, expected a list", type_name(annotations));
    for (gsize i = 0; i < fsim_pickle_len(annotations); i++) {
        if (!torch_read_annotation(ld, fsim_pickle_item(annotations, i), i, error))
            return FALSE;
    }
    return TRUE;
}

/* ---- allocator settings -------------------------------------------------------------------- */

/* The shortest text that reads back as @value, as Python's repr() writes floats. */
static void
append_double(GString *out, double value)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    for (int precision = 1; precision <= 17; precision++) {
        char format[8];

        g_snprintf(format, sizeof(format), "%%.%dg", precision);
        g_ascii_formatd(buf, sizeof(buf), format, value);
        if (precision == 17 || g_ascii_strtod(buf, NULL) == value)
            break;
    }
    g_string_append(out, buf);
    if (strpbrk(buf, ".eninf") == NULL)
        g_string_append(out, ".0");
}

/* @v as Python would print it (top-level strings unquoted).  The depth is bounded by the
 * unpickler; every value visited costs budget, so shared containers cannot blow the walk up. */
static gboolean
append_value(TorchLoader *ld, GString *out, const FsimPickleValue *v, gboolean nested,
             GError **error)
{
    int64_t i;
    uint64_t u;
    double d;
    gboolean b;
    gsize n = fsim_pickle_len(v);
    gboolean ok = TRUE;

    if (!torch_charge(ld, v, 1, error))
        return FALSE;
    switch (fsim_pickle_type(v)) {
    case FSIM_PICKLE_NONE:
        g_string_append(out, "None");
        break;
    case FSIM_PICKLE_BOOL:
        fsim_pickle_get_bool(v, &b);
        g_string_append(out, b ? "True" : "False");
        break;
    case FSIM_PICKLE_INT:
        if (fsim_pickle_get_int(v, &i))
            g_string_append_printf(out, "%" G_GINT64_FORMAT, i);
        else if (fsim_pickle_get_uint(v, &u))
            g_string_append_printf(out, "%" G_GUINT64_FORMAT, u);
        break;
    case FSIM_PICKLE_BIGINT:
    case FSIM_PICKLE_FLOAT:
        fsim_pickle_get_double(v, &d);
        append_double(out, d);
        break;
    case FSIM_PICKLE_STR:
        if (nested)
            g_string_append_printf(out, "'%s'", fsim_pickle_get_str(v, NULL));
        else
            g_string_append(out, fsim_pickle_get_str(v, NULL));
        break;
    case FSIM_PICKLE_BYTES:
        g_string_append_printf(out, "<%" G_GSIZE_FORMAT " bytes>", n);
        break;
    case FSIM_PICKLE_LIST:
    case FSIM_PICKLE_TUPLE:
        g_string_append_c(out, fsim_pickle_type(v) == FSIM_PICKLE_LIST ? '[' : '(');
        for (gsize k = 0; ok && k < n; k++) {
            if (k > 0)
                g_string_append(out, ", ");
            ok = append_value(ld, out, fsim_pickle_item(v, k), TRUE, error);
        }
        g_string_append_c(out, fsim_pickle_type(v) == FSIM_PICKLE_LIST ? ']' : ')');
        break;
    case FSIM_PICKLE_DICT:
        g_string_append_c(out, '{');
        for (gsize k = 0; ok && k < n; k++) {
            if (k > 0)
                g_string_append(out, ", ");
            ok = append_value(ld, out, fsim_pickle_dict_key(v, k), TRUE, error) &&
                 (g_string_append(out, ": "),
                  append_value(ld, out, fsim_pickle_dict_value(v, k), TRUE, error));
        }
        g_string_append_c(out, '}');
        break;
    default:
        g_string_append_c(out, '?');
        break;
    }
    return ok;
}

typedef struct {
    uint64_t interval_mb;
    int64_t divisions;
} TorchRoundup;

static int
roundup_compare(gconstpointer a, gconstpointer b)
{
    const TorchRoundup *x = a;
    const TorchRoundup *y = b;

    return x->interval_mb < y->interval_mb ? -1 : x->interval_mb > y->interval_mb;
}

/* roundup_power2_divisions as PYTORCH_CUDA_ALLOC_CONF writes it: the scalar form, or the list
 * form `[1:4,2:4,...]` with every interval the snapshot lists (PyTorch leaves unlisted intervals
 * between listed ones at 0, so all of them are written).  Nothing when all are 0. */
static void
append_roundup(GString *conf, const FsimPickleValue *v)
{
    g_autoptr(GArray) entries = g_array_new(FALSE, FALSE, sizeof(TorchRoundup));
    gboolean any = FALSE;
    int64_t scalar;

    if (fsim_pickle_get_int(v, &scalar)) {
        if (scalar > 0)
            g_string_append_printf(conf, "%sroundup_power2_divisions:%" G_GINT64_FORMAT,
                                   conf->len > 0 ? "," : "", scalar);
        return;
    }
    for (gsize k = 0; k < fsim_pickle_len(v) && fsim_pickle_type(v) == FSIM_PICKLE_DICT; k++) {
        const char *key = fsim_pickle_get_str(fsim_pickle_dict_key(v, k), NULL);
        TorchRoundup entry;

        if (key == NULL || !fsim_parse_u64(key, &entry.interval_mb) ||
            !fsim_pickle_get_int(fsim_pickle_dict_value(v, k), &entry.divisions))
            continue;
        any |= entry.divisions != 0;
        g_array_append_val(entries, entry);
    }
    if (!any)
        return;
    g_array_sort(entries, roundup_compare);
    g_string_append_printf(conf, "%sroundup_power2_divisions:[", conf->len > 0 ? "," : "");
    for (guint k = 0; k < entries->len; k++) {
        const TorchRoundup *entry = &g_array_index(entries, TorchRoundup, k);

        g_string_append_printf(conf, "%s%" G_GUINT64_FORMAT ":%" G_GINT64_FORMAT, k ? "," : "",
                               entry->interval_mb, entry->divisions);
    }
    g_string_append_c(conf, ']');
}

/* PYTORCH_CUDA_ALLOC_CONF rebuilt from the settings that change placement. */
static char *
torch_alloc_conf(const FsimPickleValue *settings)
{
    const FsimPickleValue *conf_v = fsim_pickle_dict_get(settings, "PYTORCH_CUDA_ALLOC_CONF");
    const char *recorded = fsim_pickle_get_str(conf_v, NULL);
    GString *conf;
    gboolean expandable;
    int64_t max_split;
    double threshold;
    const FsimPickleValue *roundup;

    if (recorded != NULL && *recorded != '\0')
        return g_strdup(recorded);
    conf = g_string_new(NULL);
    if (fsim_pickle_get_bool(fsim_pickle_dict_get(settings, "expandable_segments"), &expandable) &&
        expandable)
        g_string_append(conf, "expandable_segments:True");
    /* -1 (and SIZE_MAX, which does not fit int64_t) mean unset. */
    if (fsim_pickle_get_int(fsim_pickle_dict_get(settings, "max_split_size"), &max_split) &&
        max_split >= 0)
        g_string_append_printf(conf, "%smax_split_size_mb:%" G_GINT64_FORMAT,
                               conf->len > 0 ? "," : "", max_split / (int64_t)FSIM_MiB);
    if (fsim_pickle_get_double(fsim_pickle_dict_get(settings, "garbage_collection_threshold"),
                               &threshold) &&
        threshold > 0) {
        g_string_append_printf(conf, "%sgarbage_collection_threshold:", conf->len > 0 ? "," : "");
        append_double(conf, threshold);
    }
    roundup = fsim_pickle_dict_get(settings, "roundup_power2_divisions");
    if (roundup != NULL)
        append_roundup(conf, roundup);
    return g_string_free(conf, FALSE);
}

static int
key_compare(gconstpointer a, gconstpointer b, gpointer data)
{
    (void)data;
    return strcmp(a, b);
}

static gboolean
torch_read_settings(TorchLoader *ld, const FsimPickleValue *settings, GError **error)
{
    TorchTrace *trace = ld->trace;
    g_autoptr(GTree) sorted = NULL;
    gsize n = fsim_pickle_len(settings);

    if (fsim_pickle_type(settings) != FSIM_PICKLE_DICT)
        return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, settings,
                          "'allocator_settings' is %s, expected a dict", type_name(settings));
    if (!torch_charge(ld, settings, 1 + (uint64_t)n, error))
        return FALSE;
    /* Sorted by key; a key set twice keeps its last value, as in Python. */
    sorted = g_tree_new_full(key_compare, NULL, g_free, g_free);
    for (gsize k = 0; k < n; k++) {
        const char *key = fsim_pickle_get_str(fsim_pickle_dict_key(settings, k), NULL);
        GString *value;

        if (key == NULL)
            continue;
        value = g_string_new(NULL);
        if (!append_value(ld, value, fsim_pickle_dict_value(settings, k), FALSE, error)) {
            g_string_free(value, TRUE);
            return FALSE;
        }
        g_tree_replace(sorted, g_strdup(key), g_string_free(value, FALSE));
    }
    trace->base.settings = g_ptr_array_new_with_free_func(g_free);
    for (GTreeNode *node = g_tree_node_first(sorted); node != NULL; node = g_tree_node_next(node)) {
        g_ptr_array_add(trace->base.settings, g_strdup(g_tree_node_key(node)));
        g_ptr_array_add(trace->base.settings, g_strdup(g_tree_node_value(node)));
    }
    trace->base.alloc_conf = torch_alloc_conf(settings);
    return TRUE;
}

/* ---- the state at trace start -------------------------------------------------------------- */

/* The mapped ranges of expandable segments, disjoint, keyed by their start. */
static int
range_compare(gconstpointer a, gconstpointer b, gpointer data)
{
    const FsimSeedSegment *x = a;
    const FsimSeedSegment *y = b;

    (void)data;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static GTree *
ranges_new(void)
{
    return g_tree_new_full(range_compare, NULL, g_free, NULL);
}

static void
ranges_insert(GTree *ranges, const FsimSeedSegment *range)
{
    FsimSeedSegment *copy = g_memdup2(range, sizeof(*range));

    g_tree_insert(ranges, copy, copy);
}

/* Take [start, end) out of the mapped ranges. */
static void
ranges_remove(GTree *ranges, FsimAddr start, FsimAddr end)
{
    FsimSeedSegment key = {.addr = start};
    GTreeNode *node = g_tree_lower_bound(ranges, &key);
    GTreeNode *previous = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(ranges);

    if (previous != NULL) {
        FsimSeedSegment *p = g_tree_node_key(previous);

        if (p->addr + p->size > start) {
            FsimSeedSegment tail = *p;

            p->size = start - p->addr; /* p->addr < start: the key does not move */
            if (tail.addr + tail.size > end) {
                tail.size = tail.addr + tail.size - end;
                tail.addr = end;
                ranges_insert(ranges, &tail);
                return;
            }
        }
    }
    /* Ranges starting in [start, end); looked up again after each removal, which may
     * rebalance the tree. */
    for (node = g_tree_lower_bound(ranges, &key); node != NULL;
         node = g_tree_lower_bound(ranges, &key)) {
        FsimSeedSegment *r = g_tree_node_key(node);
        FsimSeedSegment tail = *r;

        if (r->addr >= end)
            break;
        g_tree_remove(ranges, r);
        if (tail.addr + tail.size > end) {
            tail.size = tail.addr + tail.size - end;
            tail.addr = end;
            ranges_insert(ranges, &tail);
            break;
        }
    }
}

/* Add @range, merging it with neighbours of the same stream and pool. */
static void
ranges_add(GTree *ranges, FsimSeedSegment range)
{
    GTreeNode *node;

    ranges_remove(ranges, range.addr, range.addr + range.size);
    node = g_tree_lower_bound(ranges, &range);
    if (node != NULL) {
        FsimSeedSegment *next = g_tree_node_key(node);

        if (next->addr == range.addr + range.size && next->stream == range.stream &&
            next->pool == range.pool && next->pool_id == range.pool_id) {
            range.size += next->size;
            g_tree_remove(ranges, next);
        }
    }
    node = g_tree_lower_bound(ranges, &range);
    node = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(ranges);
    if (node != NULL) {
        FsimSeedSegment *previous = g_tree_node_key(node);

        if (previous->addr + previous->size == range.addr && previous->stream == range.stream &&
            previous->pool == range.pool && previous->pool_id == range.pool_id) {
            previous->size += range.size; /* its key does not move */
            return;
        }
    }
    ranges_insert(ranges, &range);
}

/* The pools of @range, unmapped before the end of the trace: those of a mapped neighbour on the
 * same stream, else guessed from the page sizes (20 MiB pages are large-pool ones) and the
 * private pool the entry names (default pool without one). */
static void
ranges_guess_pool(GTree *ranges, FsimSeedSegment *range)
{
    FsimSeedSegment key = {.addr = range->addr + range->size};
    GTreeNode *node = g_tree_lower_bound(ranges, &key);
    GTreeNode *previous;
    const FsimSeedSegment *neighbour = NULL;

    if (node != NULL) {
        const FsimSeedSegment *next = g_tree_node_key(node);

        if (next->addr == range->addr + range->size && next->stream == range->stream)
            neighbour = next;
    }
    key.addr = range->addr;
    node = g_tree_lower_bound(ranges, &key);
    previous = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(ranges);
    if (neighbour == NULL && previous != NULL) {
        const FsimSeedSegment *p = g_tree_node_key(previous);

        if (p->addr + p->size == range->addr && p->stream == range->stream)
            neighbour = p;
    }
    if (neighbour != NULL) {
        range->pool = neighbour->pool;
        range->pool_id = neighbour->pool_id;
        return;
    }
    range->pool = range->size % TORCH_LARGE_PAGE == 0 ? FSIM_POOL_LARGE : FSIM_POOL_SMALL;
}

static int
segment_compare(gconstpointer a, gconstpointer b)
{
    const FsimSeedSegment *x = a;
    const FsimSeedSegment *y = b;

    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int
block_compare(gconstpointer a, gconstpointer b)
{
    const FsimSeedBlock *x = a;
    const FsimSeedBlock *y = b;

    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static gboolean
collect_range(gpointer key, gpointer value, gpointer data)
{
    (void)value;
    g_array_append_vals(data, key, 1);
    return FALSE;
}

/*
 * Undo the device's trace from its final state (see the file comment).  Returns the state (NULL
 * when empty) and fills @ids with address -> id (block.cookie) of its blocks.
 */
static gboolean
torch_initial_state(TorchLoader *ld, TorchDevice *dev, FsimLiveTable *ids, FsimInitialState **out,
                    GError **error)
{
    FsimLiveTable live;     /* address -> block: size, requested, stream, state */
    FsimLiveTable segments; /* address -> cudaMalloc segment: block.size, stream, cookie = pool,
                             * requested = private pool id */
    g_autoptr(GTree) ranges = ranges_new(); /* expandable segments: mapped ranges */
    g_autoptr(GArray) all_segments = g_array_new(FALSE, FALSE, sizeof(FsimSeedSegment));
    g_autoptr(GArray) all_blocks = g_array_new(FALSE, FALSE, sizeof(FsimSeedBlock));
    g_autoptr(GArray) kept = g_array_new(FALSE, FALSE, sizeof(FsimSeedSegment));
    g_autoptr(GArray) kept_blocks = g_array_new(FALSE, FALSE, sizeof(FsimSeedBlock));
    FsimInitialState *state;
    guint dropped_segments = 0;
    guint dropped_blocks = 0;
    gsize s = 0;

    fsim_live_table_init(&live);
    fsim_live_table_init(&segments);
    for (guint i = 0; i < dev->final_segments->len; i++) {
        const FsimSeedSegment *seg = &g_array_index(dev->final_segments, FsimSeedSegment, i);

        if (seg->expandable) {
            ranges_add(ranges, *seg);
        } else {
            FsimLiveEntry *entry = fsim_live_table_lookup(&segments, seg->addr);

            if (entry == NULL)
                entry = fsim_live_table_insert(&segments, seg->addr);
            entry->block.size = seg->size;
            entry->stream = seg->stream;
            entry->block.cookie = seg->pool;
            entry->requested = seg->pool_id;
        }
    }
    for (guint i = 0; i < dev->final_blocks->len; i++) {
        const FsimSeedBlock *block = &g_array_index(dev->final_blocks, FsimSeedBlock, i);
        FsimLiveEntry *entry = fsim_live_table_lookup(&live, block->addr);

        if (entry == NULL)
            entry = fsim_live_table_insert(&live, block->addr);
        entry->block.size = block->size;
        entry->requested = block->requested;
        entry->stream = block->stream;
        entry->state = block->pending_free ? FSIM_LIVE_PENDING : FSIM_LIVE_ALLOCATED;
    }
    for (guint i = dev->entries->len; i-- > 0;) {
        const TorchEntry *e = &g_array_index(dev->entries, TorchEntry, i);
        FsimLiveEntry *entry;

        switch ((TorchAction)e->action) {
        case TORCH_ALLOC:
            entry = fsim_live_table_lookup(&live, e->addr);
            if (entry != NULL)
                fsim_live_table_remove(&live, entry);
            break;
        case TORCH_FREE_REQUESTED:
            entry = fsim_live_table_lookup(&live, e->addr);
            if (entry != NULL)
                entry->state = FSIM_LIVE_ALLOCATED;
            break;
        case TORCH_FREE_COMPLETED:
            entry = fsim_live_table_lookup(&live, e->addr);
            if (entry == NULL)
                entry = fsim_live_table_insert(&live, e->addr);
            /* The trace has the request, not the block size: see the file comment. */
            entry->block.size = round_size(e->size);
            entry->requested = e->size;
            entry->stream = e->stream;
            entry->state = FSIM_LIVE_PENDING;
            break;
        case TORCH_SEGMENT_ALLOC:
            entry = fsim_live_table_lookup(&segments, e->addr);
            if (entry != NULL)
                fsim_live_table_remove(&segments, entry);
            break;
        case TORCH_SEGMENT_FREE:
            entry = fsim_live_table_lookup(&segments, e->addr);
            if (entry == NULL)
                entry = fsim_live_table_insert(&segments, e->addr);
            entry->block.size = e->size;
            entry->stream = e->stream;
            entry->block.cookie =
                e->size <= TORCH_SMALL_SEGMENT ? FSIM_POOL_SMALL : FSIM_POOL_LARGE;
            entry->requested = (e->flags & ENTRY_HAS_POOL) != 0 ? e->pool : 0;
            break;
        case TORCH_SEGMENT_MAP:
            ranges_remove(ranges, e->addr, e->addr + e->size);
            break;
        case TORCH_SEGMENT_UNMAP: {
            FsimSeedSegment range = {.addr = e->addr,
                                     .size = e->size,
                                     .stream = e->stream,
                                     .expandable = TRUE,
                                     .pool_id = (e->flags & ENTRY_HAS_POOL) != 0 ? e->pool : 0};

            ranges_guess_pool(ranges, &range);
            ranges_add(ranges, range);
            break;
        }
        default:
            break;
        }
    }
    for (gsize i = 0; i < segments.capacity; i++) {
        const FsimLiveEntry *entry = &segments.slots[i];
        FsimSeedSegment seg = {.addr = entry->id,
                               .size = entry->block.size,
                               .stream = entry->stream,
                               .pool = (FsimPool)entry->block.cookie,
                               .pool_id = entry->requested};

        if (entry->state != 0)
            g_array_append_val(all_segments, seg);
    }
    g_tree_foreach(ranges, collect_range, all_segments);
    for (gsize i = 0; i < live.capacity; i++) {
        const FsimLiveEntry *entry = &live.slots[i];
        FsimSeedBlock block = {.addr = entry->id,
                               .size = entry->block.size,
                               .requested = MIN(entry->requested, entry->block.size),
                               .stream = entry->stream,
                               .pending_free = entry->state == FSIM_LIVE_PENDING};

        if (entry->state != 0)
            g_array_append_val(all_blocks, block);
    }
    fsim_live_table_clear(&live);
    fsim_live_table_clear(&segments);
    g_array_sort(all_segments, segment_compare);
    g_array_sort(all_blocks, block_compare);

    /* Keep what is consistent: segments that overlap no earlier one, blocks inside one segment
     * that overlap no earlier block. */
    for (guint i = 0; i < all_segments->len; i++) {
        const FsimSeedSegment *seg = &g_array_index(all_segments, FsimSeedSegment, i);
        const FsimSeedSegment *last =
            kept->len > 0 ? &g_array_index(kept, FsimSeedSegment, kept->len - 1) : NULL;

        if (last != NULL && last->addr + last->size > seg->addr) {
            dropped_segments++;
            continue;
        }
        g_array_append_val(kept, *seg);
    }
    for (guint i = 0; i < all_blocks->len; i++) {
        FsimSeedBlock *block = &g_array_index(all_blocks, FsimSeedBlock, i);
        const FsimSeedBlock *last =
            kept_blocks->len > 0 ? &g_array_index(kept_blocks, FsimSeedBlock, kept_blocks->len - 1)
                                 : NULL;
        const FsimSeedSegment *seg;

        while (s < kept->len && g_array_index(kept, FsimSeedSegment, s).addr +
                                        g_array_index(kept, FsimSeedSegment, s).size <=
                                    block->addr)
            s++;
        seg = s < kept->len ? &g_array_index(kept, FsimSeedSegment, s) : NULL;
        if ((last != NULL && last->addr + last->size > block->addr) || seg == NULL ||
            seg->addr > block->addr || block->addr + block->size > seg->addr + seg->size) {
            dropped_blocks++;
            continue;
        }
        block->id = kept_blocks->len + 1;
        g_array_append_val(kept_blocks, *block);
    }
    if (dropped_segments > 0 || dropped_blocks > 0)
        g_info("%s: device %u: the state at trace start rebuilt from the final state is "
               "inconsistent (a trace with gaps?): dropped %u segments and %u blocks",
               ld->path, dev->device, dropped_segments, dropped_blocks);

    for (guint i = 0; i < kept_blocks->len; i++) {
        const FsimSeedBlock *block = &g_array_index(kept_blocks, FsimSeedBlock, i);
        FsimLiveEntry *entry = fsim_live_table_insert(ids, block->addr);

        entry->block.cookie = block->id;
    }
    *out = NULL;
    if (kept->len == 0 && kept_blocks->len == 0)
        return TRUE;
    state = g_new0(FsimInitialState, 1);
    state->n_segments = kept->len;
    state->segments = (FsimSeedSegment *)(void *)g_array_free(g_steal_pointer(&kept), FALSE);
    state->n_blocks = kept_blocks->len;
    state->blocks = (FsimSeedBlock *)(void *)g_array_free(g_steal_pointer(&kept_blocks), FALSE);
    if (!fsim_initial_state_check(state, error)) {
        g_prefix_error(error, "%s: device %u: ", ld->path, dev->device);
        g_free(state->segments);
        g_free(state->blocks);
        g_free(state);
        return FALSE;
    }
    *out = state;
    return TRUE;
}

/* ---- events -------------------------------------------------------------------------------- */

static int
mark_compare(gconstpointer a, gconstpointer b)
{
    const TorchMark *x = a;
    const TorchMark *y = b;

    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void
push_event(GArray *events, FsimTime time, uint64_t index, FsimEventKind kind, uint64_t id,
           uint64_t size, uint64_t stream, FsimAddr addr, uint32_t flags)
{
    TorchEvent ev = {.time = time,
                     .index = index,
                     .id = id,
                     .size = size,
                     .stream = stream,
                     .addr = addr,
                     .kind = (uint8_t)kind,
                     .flags = (uint8_t)flags};

    g_array_append_val(events, ev);
}

static void
push_outcome(GArray *outcomes, uint64_t index, FsimOutcomeKind kind, const TorchEntry *e)
{
    FsimOutcome outcome = {.index = index,
                           .addr = kind == FSIM_OUTCOME_OOM ? 0 : e->addr,
                           .size = e->size,
                           .stream = e->stream,
                           .kind = kind};

    /* PyTorch 2.0 wrote an OOM's free device memory as its `addr`; later, as `device_free`. */
    if (kind == FSIM_OUTCOME_OOM)
        outcome.device_free = e->device_free != 0 ? e->device_free : e->addr;

    g_array_append_val(outcomes, outcome);
}

/* The private pools a device's events hold a reference on (see torch_pool_scope()). */
static GHashTable *
pool_refs_new(const FsimInitialState *state)
{
    GHashTable *refs = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);

    for (gsize i = 0; state != NULL && i < state->n_segments; i++) {
        uint64_t pool = state->segments[i].pool_id;

        if (pool != 0 && !g_hash_table_contains(refs, &pool))
            g_hash_table_add(refs, g_memdup2(&pool, sizeof(pool)));
    }
    return refs;
}

/*
 * Entry @i allocates into private pool @pool (not 0): open a scope of it around the allocation
 * (@open, before it) and close it (after it, !@open).  The scope is a use_mem_pool one: its
 * reference is dropped at its end, except that the first scope of a pool the events have not
 * created yet keeps it, standing for the graph or MemPool that owns the pool until the trace
 * shows it released (torch_pool_releases()).
 */
static void
torch_pool_scope(TorchDevice *dev, GHashTable *refs, uint64_t pool, FsimTime time, guint i,
                 uint64_t stream, gboolean open)
{
    if (open) {
        push_event(dev->events, time, i, FSIM_EV_POOL_BEGIN, pool, 0, stream, 0, 0);
        return;
    }
    push_event(dev->events, time, i, FSIM_EV_POOL_END, pool, 0, stream, 0, 0);
    if (g_hash_table_contains(refs, &pool))
        push_event(dev->events, time, i, FSIM_EV_POOL_RELEASE, pool, 0, 0, 0, 0);
    else
        g_hash_table_add(refs, g_memdup2(&pool, sizeof(pool)));
}

/* A burst of releases starts at entry @i: a private pool it frees segments of was released
 * (its last reference dropped) before it. */
static void
torch_pool_releases(TorchDevice *dev, GHashTable *refs, const uint64_t *pools, FsimTime time,
                    guint i)
{
    for (guint j = i; pools != NULL && j < dev->entries->len; j++) {
        const TorchEntry *e = &g_array_index(dev->entries, TorchEntry, j);

        if (e->action != TORCH_SEGMENT_FREE && e->action != TORCH_SEGMENT_UNMAP)
            break;
        if (pools[j] != 0 && g_hash_table_remove(refs, &pools[j]))
            push_event(dev->events, time, i, FSIM_EV_POOL_RELEASE, pools[j], 0, 0, 0, 0);
    }
}

static gboolean
torch_build_device(TorchLoader *ld, TorchDevice *dev, GError **error)
{
    FsimLiveTable ids; /* address -> id (block.cookie) */
    FsimInitialState *state = NULL;
    GArray *outcomes = g_array_new(FALSE, FALSE, sizeof(FsimOutcome));
    guint n = dev->entries->len;
    guint m = 0;
    uint64_t next_id;
    gboolean in_release = FALSE;
    g_autofree uint64_t *pools = NULL;
    g_autoptr(GHashTable) refs = NULL;

    fsim_live_table_init(&ids);
    if (!torch_initial_state(ld, dev, &ids, &state, error)) {
        fsim_live_table_clear(&ids);
        g_array_unref(outcomes);
        return FALSE;
    }
    pools = fsim_torch_pools_assign(dev->entries, state, dev->final_segments);
    refs = pool_refs_new(state);
    next_id = (state != NULL ? state->n_blocks : 0) + 1;
    if (state != NULL)
        fsim_trace_set_initial_state(&ld->trace->base, dev->device, state);
    if (dev->backwards > 0)
        g_info("%s: device %u: time went backwards %" G_GUINT64_FORMAT " times (clamped)", ld->path,
               dev->device, dev->backwards);

    g_array_sort(dev->marks, mark_compare);
    dev->events = g_array_sized_new(FALSE, FALSE, sizeof(TorchEvent), n + dev->marks->len);
    for (guint i = 0; i < n; i++) {
        const TorchEntry *e = &g_array_index(dev->entries, TorchEntry, i);
        FsimTime time = dev->timed ? e->time : (FsimTime)i * TORCH_CLOCK_STEP_NS;
        gboolean release = FALSE;
        uint64_t pool = pools != NULL ? pools[i] : 0;
        FsimLiveEntry *entry;
        uint64_t id;

        for (; m < dev->marks->len && g_array_index(dev->marks, TorchMark, m).time < time; m++) {
            const TorchMark *mark = &g_array_index(dev->marks, TorchMark, m);

            push_event(dev->events, mark->time, i, FSIM_EV_MARK, 0, 0, 0, 0, 0);
            g_array_index(dev->events, TorchEvent, dev->events->len - 1).label = mark->label;
        }
        switch ((TorchAction)e->action) {
        case TORCH_ALLOC:
            id = next_id++;
            entry = fsim_live_table_lookup(&ids, e->addr);
            if (entry == NULL)
                entry = fsim_live_table_insert(&ids, e->addr);
            entry->block.cookie = id;
            if (pool != 0)
                torch_pool_scope(dev, refs, pool, time, i, e->stream, TRUE);
            push_event(dev->events, time, i, FSIM_EV_ALLOC, id, e->size, e->stream, e->addr, 0);
            if (pool != 0)
                torch_pool_scope(dev, refs, pool, time, i, e->stream, FALSE);
            break;
        case TORCH_FREE_REQUESTED: {
            const TorchEntry *next =
                i + 1 < n ? &g_array_index(dev->entries, TorchEntry, i + 1) : NULL;
            gboolean deferred =
                next == NULL || next->action != TORCH_FREE_COMPLETED || next->addr != e->addr;

            entry = fsim_live_table_lookup(&ids, e->addr);
            if (entry == NULL) {
                entry = fsim_live_table_insert(&ids, e->addr);
                entry->block.cookie = next_id++;
            }
            push_event(dev->events, time, i, FSIM_EV_FREE, entry->block.cookie, 0, e->stream, 0,
                       deferred ? FSIM_EVF_DEFERRED : 0);
            break;
        }
        case TORCH_FREE_COMPLETED:
            entry = fsim_live_table_lookup(&ids, e->addr);
            if (entry != NULL) {
                id = entry->block.cookie;
                fsim_live_table_remove(&ids, entry);
            } else {
                id = next_id++;
            }
            push_event(dev->events, time, i, FSIM_EV_FREE_COMPLETED, id, 0, e->stream, 0, 0);
            break;
        case TORCH_SEGMENT_ALLOC:
            push_outcome(outcomes, i, FSIM_OUTCOME_SEGMENT_ALLOC, e);
            break;
        case TORCH_SEGMENT_MAP:
            push_outcome(outcomes, i, FSIM_OUTCOME_SEGMENT_MAP, e);
            break;
        case TORCH_SEGMENT_FREE:
        case TORCH_SEGMENT_UNMAP:
            /* release_cached_blocks(): see the file comment. */
            if (!in_release) {
                torch_pool_releases(dev, refs, pools, time, i);
                push_event(dev->events, time, i, FSIM_EV_EMPTY_CACHE, 0, 0, 0, 0,
                           FSIM_EVF_INFERRED);
            }
            release = TRUE;
            push_outcome(outcomes, i,
                         e->action == TORCH_SEGMENT_FREE ? FSIM_OUTCOME_SEGMENT_FREE
                                                         : FSIM_OUTCOME_SEGMENT_UNMAP,
                         e);
            break;
        case TORCH_OOM:
            push_outcome(outcomes, i, FSIM_OUTCOME_OOM, e);
            /* The request that failed, replayed so that policies are compared on it (validate
             * expects it to fail again; another policy or a larger device may serve it), then
             * freed at once: the program never received the memory. */
            if (e->size > 0 && e->size <= FSIM_MAX_SIZE) {
                id = next_id++;
                if (pool != 0)
                    torch_pool_scope(dev, refs, pool, time, i, e->stream, TRUE);
                push_event(dev->events, time, i, FSIM_EV_ALLOC, id, e->size, e->stream, 0,
                           FSIM_EVF_RECORDED_OOM);
                if (pool != 0)
                    torch_pool_scope(dev, refs, pool, time, i, e->stream, FALSE);
                push_event(dev->events, time, i, FSIM_EV_FREE, id, 0, e->stream, 0,
                           FSIM_EVF_RECORDED_OOM);
            }
            break;
        default:
            break;
        }
        in_release = release;
    }
    for (; m < dev->marks->len; m++) {
        const TorchMark *mark = &g_array_index(dev->marks, TorchMark, m);

        push_event(dev->events, mark->time, n, FSIM_EV_MARK, 0, 0, 0, 0, 0);
        g_array_index(dev->events, TorchEvent, dev->events->len - 1).label = mark->label;
    }
    fsim_live_table_clear(&ids);
    if (n > 0)
        fsim_trace_set_outcomes(&ld->trace->base, dev->device, outcomes);
    else
        g_array_unref(outcomes);
    fsim_trace_add_device(&ld->trace->base, dev->device);
    g_clear_pointer(&dev->entries, g_array_unref);
    g_clear_pointer(&dev->marks, g_array_unref);
    g_clear_pointer(&dev->final_segments, g_array_unref);
    g_clear_pointer(&dev->final_blocks, g_array_unref);
    return TRUE;
}

/* ---- the format ---------------------------------------------------------------------------- */

static gboolean
torch_probe(const guint8 *head, gsize len)
{
    if (len < 2)
        return FALSE;
    /* Protocol 2 and later start with PROTO.  (Protocols above 5 are let through so that the
     * unpickler can say what is wrong.) */
    if (head[0] == 0x80)
        return head[1] >= 2;
    /* Protocol 1: EMPTY_DICT or EMPTY_LIST, then a memo PUT, a MARK or STOP. */
    if (head[0] == '}' || head[0] == ']')
        return head[1] == 'q' || head[1] == 'r' || head[1] == '(' || head[1] == '.';
    /* Protocol 0: MARK, then DICT or LIST. */
    return head[0] == '(' && (head[1] == 'd' || head[1] == 'l');
}

static void
torch_close(FsimTrace *base)
{
    TorchTrace *trace = (TorchTrace *)base;

    g_clear_pointer(&trace->devices, g_ptr_array_unref);
    g_clear_pointer(&trace->labels, g_ptr_array_unref);
    g_free(trace);
}

static gboolean
torch_read_root(TorchLoader *ld, const FsimPickleValue *root, GError **error)
{
    const FsimPickleValue *segments = NULL;
    const FsimPickleValue *traces = NULL;
    const FsimPickleValue *settings = NULL;
    const FsimPickleValue *annotations = NULL;

    switch (fsim_pickle_type(root)) {
    case FSIM_PICKLE_LIST:
        segments = root; /* torch.cuda.memory_snapshot(): the segments alone */
        break;
    case FSIM_PICKLE_DICT:
        if (!torch_charge(ld, root, 1 + (uint64_t)fsim_pickle_len(root), error))
            return FALSE;
        segments = fsim_pickle_dict_get(root, "segments");
        traces = fsim_pickle_dict_get(root, "device_traces");
        settings = fsim_pickle_dict_get(root, "allocator_settings");
        annotations = fsim_pickle_dict_get(root, "external_annotations");
        break;
    default:
        return torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, root,
                          "the snapshot is %s, expected a dict or a list of segments",
                          type_name(root));
    }
    /* Traces before annotations: those are placed on their device's clock. */
    if (!is_none(segments) && !torch_read_segments(ld, segments, error))
        return FALSE;
    if (!is_none(traces) && !torch_read_traces(ld, traces, error))
        return FALSE;
    if (!is_none(annotations) && !torch_read_annotations(ld, annotations, error))
        return FALSE;
    if (!is_none(settings) && !torch_read_settings(ld, settings, error))
        return FALSE;
    return TRUE;
}

/* The file's bytes: mapped when it is a plain file (the copy through a stream costs as much as
 * unpickling), read through fsim_input_read_all() when compressed or not a regular file. */
static GBytes *
torch_read_input(const char *path, GError **error)
{
    g_autoptr(GMappedFile) mapped = NULL;
    GBytes *bytes = NULL;

    if (strcmp(path, "-") != 0 && g_file_test(path, G_FILE_TEST_IS_REGULAR))
        mapped = g_mapped_file_new(path, FALSE, NULL);
    if (mapped != NULL) {
        const guint8 *data = (const guint8 *)g_mapped_file_get_contents(mapped);
        gsize len = g_mapped_file_get_length(mapped);

        if (len > TORCH_MAX_BYTES) {
            g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT,
                        "%s: larger than %" G_GSIZE_FORMAT " bytes", path, TORCH_MAX_BYTES);
            return NULL;
        }
        if (len < 2 || data[0] != 0x1f || data[1] != 0x8b)
            return g_mapped_file_get_bytes(mapped);
    }
    if (!fsim_input_read_all(path, TORCH_MAX_BYTES, &bytes, error))
        return NULL;
    return bytes;
}

static FsimTrace *
torch_open(const char *path, GError **error)
{
    g_autoptr(GBytes) bytes = NULL;
    g_autoptr(FsimPickle) pickle = NULL;
    g_autoptr(GError) local_error = NULL;
    TorchTrace *trace;
    TorchLoader ld = {.path = path};
    const guint8 *data;
    gsize len;

    bytes = torch_read_input(path, error);
    if (bytes == NULL)
        return NULL;
    data = g_bytes_get_data(bytes, &len);
    pickle = fsim_pickle_load(data, len, NULL, &local_error);
    if (pickle == NULL) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local_error), "%s: ", path);
        return NULL;
    }
    g_clear_pointer(&bytes, g_bytes_unref);

    trace = g_new0(TorchTrace, 1);
    fsim_trace_init(&trace->base, &fsim_trace_format_torch, path);
    trace->devices = g_ptr_array_new_with_free_func(torch_device_free);
    trace->labels = g_ptr_array_new_with_free_func(g_free);
    ld.len = len;
    ld.budget = len / 2 + TORCH_BUDGET_SLACK;
    ld.trace = trace;
    if (!torch_read_root(&ld, fsim_pickle_root(pickle), error)) {
        fsim_trace_close(&trace->base);
        return NULL;
    }
    g_clear_pointer(&pickle, fsim_pickle_free);
    if (ld.dropped_annotations > 0)
        g_info("%s: %" G_GUINT64_FORMAT " annotations could not be placed on a device's clock",
               path, ld.dropped_annotations);
    for (guint d = 0; d < trace->devices->len; d++) {
        TorchDevice *dev = trace->devices->pdata[d];

        if (dev != NULL && !torch_build_device(&ld, dev, error)) {
            fsim_trace_close(&trace->base);
            return NULL;
        }
    }
    return &trace->base;
}

static FsimTraceStream *
torch_stream_open(FsimTrace *base, uint32_t device, GError **error)
{
    TorchTrace *trace = (TorchTrace *)base;
    TorchStream *stream;

    (void)error;
    g_return_val_if_fail(device < trace->devices->len && trace->devices->pdata[device] != NULL,
                         NULL);
    stream = g_new0(TorchStream, 1);
    stream->trace = trace;
    stream->device = trace->devices->pdata[device];
    return &stream->base;
}

static gboolean
torch_stream_next(FsimTraceStream *base, FsimEvent *ev, GError **error)
{
    TorchStream *stream = (TorchStream *)base;
    const GArray *events = stream->device->events;
    const TorchEvent *e;

    (void)error;
    if (stream->next >= events->len)
        return FALSE;
    e = &g_array_index(events, TorchEvent, stream->next++);
    ev->time = e->time;
    ev->index = e->index;
    ev->id = e->id;
    ev->size = e->size;
    ev->stream = e->stream;
    ev->addr = e->addr;
    ev->device = stream->device->device;
    ev->flags = e->flags;
    ev->kind = (FsimEventKind)e->kind;
    ev->label = ev->kind == FSIM_EV_MARK ? stream->trace->labels->pdata[e->label] : NULL;
    return TRUE;
}

static void
torch_stream_close(FsimTraceStream *stream)
{
    g_free(stream);
}

static gboolean
torch_describe(FsimTrace *base, FsimTraceInfo *info, GError **error)
{
    TorchTrace *trace = (TorchTrace *)base;
    gsize n;
    const uint32_t *devices = fsim_trace_devices(base, &n);

    (void)error;
    for (gsize d = 0; d < n; d++) {
        const TorchDevice *dev = trace->devices->pdata[devices[d]];
        FsimTraceDeviceInfo *out = fsim_trace_info_device(info, devices[d]);
        GHashTableIter iter;
        gpointer name;
        gpointer count;

        out->events = dev->n_entries;
        out->segments = dev->segments;
        out->reserved_bytes = dev->reserved_bytes;
        for (int a = 0; a < TORCH_N_ACTIONS; a++) {
            if (dev->counts[a] != 0)
                fsim_trace_info_count(out, torch_action_names[a], dev->counts[a]);
        }
        if (dev->unknown == NULL)
            continue;
        g_hash_table_iter_init(&iter, dev->unknown);
        while (g_hash_table_iter_next(&iter, &name, &count))
            fsim_trace_info_count(out, name, *(uint64_t *)count);
    }
    info->annotations = trace->annotations;
    return TRUE;
}

const FsimTraceFormat fsim_trace_format_torch = {
    .name = "torch",
    .summary = "PyTorch memory snapshot (torch.cuda.memory._dump_snapshot), optionally gzip-"
               "compressed",
    .probe = torch_probe,
    .open = torch_open,
    .close = torch_close,
    .stream_open = torch_stream_open,
    .stream_next = torch_stream_next,
    .stream_close = torch_stream_close,
    .describe = torch_describe,
};
