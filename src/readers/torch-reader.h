/* SPDX-License-Identifier: MIT */
/*
 * The PyTorch snapshot reader's private header: what its files share.  torch.c says what the
 * reader does (the user's view is docs/trace-formats.md); the files are
 *
 *   torch.c           the format: probe, open (read, walk the root, build), streams, describe
 *   torch-fields.c    checked access to the pickle's values: types, sizes, the walk's budget
 *   torch-segments.c  the schema of the final state: `segments` and their `blocks`
 *   torch-entries.c   the schema of `device_traces` entries and `external_annotations`
 *   torch-settings.c  `allocator_settings`, turned into a PYTORCH_CUDA_ALLOC_CONF string
 *   torch-state.c     the state at trace start, rebuilt by undoing the trace from the final state
 *   torch-events.c    each device's events and recorded outcomes, built from its entries
 *   torch-pools.c     which private pool each entry went to
 */
#pragma once

#include <glib.h>

#include <string.h>

#include "fragsim/state.h"
#include "fragsim/trace.h"

#include "core/addr-map.h"
#include "core/event-core.h"
#include "core/live-table.h"
#include "pickle.h"
#include "torch-pools.h"

G_BEGIN_DECLS

#define TORCH_MAX_BYTES     ((gsize)2 << 30)
#define TORCH_MAX_DEVICES   1024
#define TORCH_CLOCK_STEP_NS 1000
#define TORCH_BUDGET_SLACK  1024
#define TORCH_MIN_BLOCK     512
#define TORCH_SMALL_SEGMENT (2 * FSIM_MiB)
#define TORCH_LARGE_PAGE    (20 * FSIM_MiB)

typedef struct {
    FsimTime time;
    uint32_t label; /* index in TorchTrace.labels */
    uint32_t seq;   /* order in external_annotations: ties keep it */
} TorchMark;

/* What a stream hands out: an FsimEvent without the device and with the label as an index. */
typedef struct {
    FsimEventCore core;
    FsimAddr addr;
    uint32_t label;
    uint32_t stack; /* ALLOC: the allocation's frames (fsim_trace_stack()) */
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
    gboolean pooled;    /* some entry names a private pool (ENTRY_HAS_POOL, not (0, 0)) */
    /* Kept. */
    TorchEvent *events; /* n_events of them, room for events_room (fsim_torch_events_room()) */
    guint n_events;
    guint events_room;
    gboolean events_scratch; /* events is the pickle loader's (fsim_pickle_scratch_take()) */
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

/* `frames` lists seen (torch-fields.c), by their items and by their twin number. */
typedef struct {
    GHashTable *items; /* (nullable) TorchFramesKey* (the list's items) -> value */
    /* (nullable) by twin number (fsim_pickle_list_twin(), numbered from 1 as the load makes
     * them): 1 + the value noted, 0 where none was */
    uint32_t *twins;
    gsize n_twins; /* room at twins */
} TorchListsSeen;

/* The frames read so far (torch-fields.c): frame dict -> 1 + its index in frames, by open
 * addressing on the dict's address (NULL keys: empty), a power of two of slots, at most half of
 * them used. */
typedef struct {
    const FsimPickleValue **keys; /* (nullable) */
    uint32_t *ids;
    gsize slots;
    gsize count;
    GArray *frames; /* (nullable) FsimFrame, interned in the trace */
} TorchFrameIndex;

/* A dict key seen by fsim_torch_dict_fields(): @key, a value of the pickle, is @keys[@index] (-1:
 * none of them). */
typedef struct {
    const FsimPickleValue *key;
    const char *const *keys;
    int index;
} TorchKeySeen;

typedef struct {
    const char *path;
    gsize len;
    uint64_t budget; /* dict visits still allowed, see the file comment */
    TorchTrace *trace;
    uint64_t dropped_annotations;
    uint64_t records; /* entries read from records (fsim_pickle_record()) */
    /* The actions of the str values last seen as an entry's action (torch-entries.c). */
    const FsimPickleValue *action_strs[16];
    uint8_t actions[16];
    /* The keys of segment and block dicts last seen (fsim_torch_dict_fields()): a snapshot writes
     * each key's str once and refers to it through the memo after that. */
    TorchKeySeen keys_seen[64];
    gboolean wants_stacks; /* FALSE: frames are only looked at (fsim_trace_open_without_stacks) */
    gboolean npu_frames;   /* FALSE: no frame can name torch_npu (torch_load_pickle()) */
    /* `frames` seen so far (torch-fields.c): a snapshot repeats a few hundred stacks thousands
     * of times, each a fresh list of memo references to shared frame dicts. */
    TorchListsSeen stacks;  /* -> stack id */
    TorchListsSeen scanned; /* the lists looked at for torch_npu */
    TorchFrameIndex frames;
    GArray *stack_frames; /* (nullable) FsimFrame: room for a new stack's frames */
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

/* The keys of a device_traces entry this reader looks at, as record keys (torch-entries.c). */
extern const char *const fsim_torch_entry_keys[];

/* The names of the actions, as snapshots write them. */
extern const char *const fsim_torch_action_names[TORCH_N_ACTIONS];

static inline uint64_t
add_saturated(uint64_t a, uint64_t b)
{
    return a + b < a ? G_MAXUINT64 : a + b;
}

/* PyTorch's 512-byte rounding of a request (reference §2.4, without roundup_power2_divisions). */
static inline uint64_t
round_size(uint64_t size)
{
    if (size < TORCH_MIN_BLOCK)
        return TORCH_MIN_BLOCK;
    return (size + TORCH_MIN_BLOCK - 1) / TORCH_MIN_BLOCK * TORCH_MIN_BLOCK;
}

/* ---- torch-fields.c: checked access to values ------------------------------------------------ */

/* @w as `list[i]`, `list[i][j]` or `list[i].sub[j]` (free with g_free()). */
char *fsim_torch_where_text(const TorchWhere *w);

/* Set @error to @code with "PATH: byte OFFSET-OF-@at: MESSAGE"; returns FALSE. */
gboolean G_GNUC_PRINTF(5, 6)
    fsim_torch_fail(const TorchLoader *ld, GError **error, FsimTraceError code,
                    const FsimPickleValue *at, const char *format, ...);

/* "an int", "a str", "None"...: what @v is, for messages. */
const char *fsim_torch_type_name(const FsimPickleValue *v);

/* Pay for visiting @v at @cost; refuse once the file's budget is spent. */
gboolean fsim_torch_charge(TorchLoader *ld, const FsimPickleValue *v, uint64_t cost,
                           GError **error);

/* @v, the snapshot's list @name ('segments', ...), must be a list. */
gboolean fsim_torch_list(const TorchLoader *ld, const FsimPickleValue *v, const char *name,
                         GError **error);

/* Reads an item of a list: @item, at index @i. */
typedef gboolean (*TorchItemReader)(TorchLoader *ld, const FsimPickleValue *item, gsize i,
                                    GError **error);

/* fsim_torch_list(), then @read on each item of @list. */
gboolean fsim_torch_read_list(TorchLoader *ld, const FsimPickleValue *list, const char *name,
                              TorchItemReader read, GError **error);

/* @v, found at @w, must be a dict; pays for visiting it. */
gboolean fsim_torch_dict(TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
                         GError **error);

/* The field @field of the value at @w: a non-negative integer, a signed one, a size (1 to
 * FSIM_MAX_SIZE bytes, 0 allowed when @zero_ok), a string (its length in *@len). */
gboolean fsim_torch_u64(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
                        const char *field, uint64_t *out, GError **error);
gboolean fsim_torch_i64(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
                        const char *field, int64_t *out, GError **error);
gboolean fsim_torch_size(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
                         const char *field, gboolean zero_ok, uint64_t *out, GError **error);
const char *fsim_torch_str(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
                           const char *field, gsize *len, GError **error);

/* The error for a required @field missing from @dict; returns FALSE. */
gboolean fsim_torch_missing(const TorchLoader *ld, const FsimPickleValue *dict, const TorchWhere *w,
                            const char *field, GError **error);

/* The values of the str keys @keys[0..@n_keys) of @dict into @values (NULL where absent; a key
 * set twice: the value set last); its other keys are ignored.  Each key value is looked up by
 * its address in @ld's keys_seen first, compared with @keys only when new.  (The entries of
 * device_traces, the bulk of a snapshot, come as records: fsim_pickle_record_fields().) */
void fsim_torch_dict_fields(TorchLoader *ld, const FsimPickleValue *dict, const char *const *keys,
                            gsize n_keys, const FsimPickleValue **values);

/* Whether @v is absent (NULL) or None. */
gboolean fsim_torch_is_none(const FsimPickleValue *v);
/* `frames` of an entry or a block, interned in the trace: a stack id, 0 for none or malformed
 * ones (frames are never a reason to refuse a snapshot). */
uint32_t fsim_torch_frames(TorchLoader *ld, const FsimPickleValue *v);
/* Look at the frames of an entry whose stack is not kept, only to tell a torch_npu recording
 * (FsimTrace.frames_name_torch_npu). */
void fsim_torch_frames_scan(TorchLoader *ld, const FsimPickleValue *v);
/* Free what the loader kept while walking the pickle (the frames caches). */
void fsim_torch_loader_clear(TorchLoader *ld);

/* The action named @name (@len bytes), TORCH_UNKNOWN if none. */
TorchAction fsim_torch_action_from_name(const char *name, gsize len);

/* The arrays of a device that are as long as its trace (its entries while opening, its events)
 * are reused across opens: the last entries array dropped is kept (up to 16 MiB) for the next
 * open, whose fresh pages would cost a fault each the first time they are written (about a
 * microsecond in a virtual machine, as long as decoding what fills them); the events array, made
 * once the pickle is freed, is in the pages of its heap (fsim_torch_events_room()). */
typedef enum {
    TORCH_SPARE_ENTRIES, /* TorchEntry */
    TORCH_N_SPARES,
} TorchSpare;

/* An empty array of @element_size items (which must be that of @which), room for @reserve when
 * it is new (its pages then faulted in at once: they are about to be written). */
GArray *fsim_torch_array_take(TorchSpare which, guint element_size, guint reserve);

/* Drops @array (nullable; an array of @which's), keeping it for the next open if none is kept and
 * it held something. */
void fsim_torch_array_give(TorchSpare which, GArray *array);

/* Room for @room events in @dev's events array, its dev->n_events kept: memory the freed
 * pickle's heap left in the loader's cache where it has a chunk as large (its pages faulted in
 * already), else fresh memory, faulted in at once. */
void fsim_torch_events_room(TorchDevice *dev, guint room);

/* Free a TorchDevice (a GDestroyNotify). */
void fsim_torch_device_free(gpointer data);

/* The device @device of the trace, created on first use. */
TorchDevice *fsim_torch_device(TorchLoader *ld, const FsimPickleValue *at, uint64_t device,
                               GError **error);

/* ---- the schema walk: torch-segments.c, torch-entries.c, torch-settings.c ------------------- */

/* A MempoolId_t: a pair of non-negative integers (a tuple, or a list once through JSON). */
gboolean fsim_torch_pool(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
                         const char *field, uint64_t *out, GError **error);

/* Read `segments` (the final state), `device_traces`, `external_annotations` and
 * `allocator_settings` into the loader's trace and devices. */
gboolean fsim_torch_read_segments(TorchLoader *ld, const FsimPickleValue *segments, GError **error);
gboolean fsim_torch_read_traces(TorchLoader *ld, const FsimPickleValue *traces, GError **error);
gboolean fsim_torch_read_annotations(TorchLoader *ld, const FsimPickleValue *annotations,
                                     GError **error);
gboolean fsim_torch_read_settings(TorchLoader *ld, const FsimPickleValue *settings, GError **error);

/* ---- torch-state.c, torch-events.c ------------------------------------------------------------
 */

/* Undo the device's trace from its final state (see torch.c).  Returns the state (NULL when
 * empty) and fills @ids with address -> id of its blocks. */
gboolean fsim_torch_initial_state(TorchLoader *ld, TorchDevice *dev, FsimAddrMap *ids,
                                  FsimInitialState **out, GError **error);

/* Build the device's events and outcomes from its entries (then freed). */
gboolean fsim_torch_build_device(TorchLoader *ld, TorchDevice *dev, GError **error);

G_END_DECLS
