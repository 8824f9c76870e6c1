/* SPDX-License-Identifier: MIT */
/*
 * PyTorch snapshots: the final state, `segments` and the `blocks` inside them (address or not,
 * requested_size or the legacy history, expandable or not, private pool ids).
 */
#include <glib.h>

#include "torch-reader.h"

/* A MempoolId_t: a pair of non-negative integers (a tuple, or a list once through JSON). */
gboolean
fsim_torch_pool(const TorchLoader *ld, const FsimPickleValue *v, const TorchWhere *w,
                const char *field, uint64_t *out, GError **error)
{
    uint64_t first;
    uint64_t second;
    FsimPickleType type = fsim_pickle_type(v);

    if ((type != FSIM_PICKLE_TUPLE && type != FSIM_PICKLE_LIST) || fsim_pickle_len(v) != 2) {
        g_autofree char *where = fsim_torch_where_text(w);

        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, v,
                               "%s: '%s' is %s, expected a pair of integers", where, field,
                               fsim_torch_type_name(v));
    }
    if (!fsim_torch_u64(ld, fsim_pickle_item(v, 0), w, field, &first, error) ||
        !fsim_torch_u64(ld, fsim_pickle_item(v, 1), w, field, &second, error))
        return FALSE;
    if (!fsim_torch_pool_id(first, second, out)) {
        g_autofree char *where = fsim_torch_where_text(w);

        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, v,
                               "%s: '%s' (%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
                               ") is beyond 2^32 pools",
                               where, field, first, second);
    }
    return TRUE;
}

/* A block's request: `requested_size`, or in 1.13/2.0 the allocation history's. */
static gboolean
block_requested(TorchLoader *ld, const FsimPickleValue *requested_v,
                const FsimPickleValue *history_v, const TorchWhere *w, uint64_t *requested,
                gboolean *has_requested, GError **error)
{
    if (requested_v != NULL) {
        if (!fsim_torch_u64(ld, requested_v, w, "requested_size", requested, error))
            return FALSE;
        *has_requested = TRUE;
    } else if (!fsim_torch_is_none(history_v)) {
        /* 1.13/2.0: the request is in the allocation history, most recent first (MemoryViz
         * reads history[0] too). */
        const FsimPickleValue *first = fsim_pickle_item(history_v, 0);

        if (fsim_pickle_type(history_v) != FSIM_PICKLE_LIST) {
            g_autofree char *where = fsim_torch_where_text(w);

            return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, history_v,
                                   "%s: 'history' is %s, expected a list", where,
                                   fsim_torch_type_name(history_v));
        }
        if (first != NULL) {
            const FsimPickleValue *real_size;

            if (!fsim_torch_dict(ld, first, w, error))
                return FALSE;
            real_size = fsim_pickle_dict_get(first, "real_size");
            if (real_size != NULL) {
                if (!fsim_torch_u64(ld, real_size, w, "history[0].real_size", requested, error))
                    return FALSE;
                *has_requested = TRUE;
            }
        }
    }
    return TRUE;
}

/* The fields of a block and of a segment this reader looks at (NULL when absent), by name and
 * as fsim_torch_dict_fields() fills them, in the order of their keys. */
typedef union {
    struct {
        const FsimPickleValue *address, *size, *requested, *state, *history, *frames;
    } v;
    const FsimPickleValue *at[6];
} BlockFields;

static const char *const block_keys[] = {"address", "size",    "requested_size",
                                         "state",   "history", "frames"};

typedef union {
    struct {
        const FsimPickleValue *device, *address, *size, *stream, *type, *expandable, *blocks, *pool;
    } v;
    const FsimPickleValue *at[8];
} SegmentFields;

static const char *const segment_keys[] = {"device", "address",        "total_size",
                                           "stream", "segment_type",   "is_expandable",
                                           "blocks", "segment_pool_id"};

static gboolean
torch_read_block(TorchLoader *ld, TorchDevice *dev, const FsimSeedSegment *seg,
                 const FsimPickleValue *block, const TorchWhere *w, FsimAddr *cursor,
                 GError **error)
{
    BlockFields f;
    FsimSeedBlock seed = {0};
    uint64_t requested = 0;
    gboolean has_requested = FALSE;
    gboolean live = FALSE;

    if (!fsim_torch_dict(ld, block, w, error))
        return FALSE;
    fsim_torch_dict_fields(ld, block, block_keys, G_N_ELEMENTS(block_keys), f.at);
    if (f.v.size == NULL)
        return fsim_torch_missing(ld, block, w, "size", error);
    if (!fsim_torch_size(ld, f.v.size, w, "size", FALSE, &seed.size, error))
        return FALSE;
    seed.addr = *cursor;
    if (f.v.address != NULL && !fsim_torch_u64(ld, f.v.address, w, "address", &seed.addr, error))
        return FALSE;
    if (seed.addr + seed.size < seed.addr) {
        g_autofree char *where = fsim_torch_where_text(w);

        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, block,
                               "%s: the block ends beyond 2^64", where);
    }
    *cursor = seed.addr + seed.size;
    if (f.v.state != NULL) {
        gsize len;
        const char *state = fsim_torch_str(ld, f.v.state, w, "state", &len, error);

        if (state == NULL)
            return FALSE;
        if (KEY_IS(state, len, "active_allocated")) {
            live = TRUE;
        } else if (KEY_IS(state, len, "active_pending_free")) {
            live = TRUE;
            seed.pending_free = TRUE;
        }
    }
    if (!block_requested(ld, f.v.requested, f.v.history, w, &requested, &has_requested, error))
        return FALSE;
    if (!live)
        return TRUE;
    seed.requested = has_requested ? MIN(requested, seed.size) : seed.size;
    seed.stream = seg->stream;
    /* its frames; in 1.13/2.0 those of its allocation history's latest entry */
    if (f.v.frames == NULL && f.v.history != NULL &&
        fsim_pickle_type(f.v.history) == FSIM_PICKLE_LIST)
        f.v.frames = fsim_pickle_dict_get(fsim_pickle_item(f.v.history, 0), "frames");
    seed.stack = fsim_torch_frames(ld, f.v.frames);
    g_array_append_val(dev->final_blocks, seed);
    return TRUE;
}

/* The `blocks` of segment @seg, at @w (a segment's place). */
static gboolean
segment_blocks(TorchLoader *ld, TorchDevice *dev, const FsimSeedSegment *seg,
               const FsimPickleValue *blocks_v, TorchWhere *w, GError **error)
{
    FsimAddr cursor;

    if (fsim_torch_is_none(blocks_v))
        return TRUE;
    if (fsim_pickle_type(blocks_v) != FSIM_PICKLE_LIST)
        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, blocks_v,
                               "segments[%" G_GSIZE_FORMAT "]: 'blocks' is %s, expected a list",
                               w->i, fsim_torch_type_name(blocks_v));
    cursor = seg->addr;
    w->depth = 2;
    w->sub = "blocks";
    for (gsize j = 0; j < fsim_pickle_len(blocks_v); j++) {
        w->j = j;
        if (!torch_read_block(ld, dev, seg, fsim_pickle_item(blocks_v, j), w, &cursor, error))
            return FALSE;
    }
    return TRUE;
}

/* Longer than ~80 lines: one checked field of a segment dict after another, in the schema's
 * order. */
static gboolean
torch_read_segment(TorchLoader *ld, const FsimPickleValue *segment, gsize i, GError **error)
{
    SegmentFields f;
    TorchWhere w = {.list = "segments", .i = i, .depth = 1};
    FsimSeedSegment seg = {0};
    uint64_t device = 0;
    TorchDevice *dev;

    if (!fsim_torch_dict(ld, segment, &w, error))
        return FALSE;
    fsim_torch_dict_fields(ld, segment, segment_keys, G_N_ELEMENTS(segment_keys), f.at);
    if (f.v.address == NULL)
        return fsim_torch_missing(ld, segment, &w, "address", error);
    if (f.v.size == NULL)
        return fsim_torch_missing(ld, segment, &w, "total_size", error);
    if (!fsim_torch_u64(ld, f.v.address, &w, "address", &seg.addr, error) ||
        !fsim_torch_size(ld, f.v.size, &w, "total_size", FALSE, &seg.size, error))
        return FALSE;
    if (seg.addr + seg.size < seg.addr)
        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_NUMBER, segment,
                               "segments[%" G_GSIZE_FORMAT "]: the segment ends beyond 2^64", i);
    if (f.v.device != NULL && !fsim_torch_u64(ld, f.v.device, &w, "device", &device, error))
        return FALSE;
    if (f.v.stream != NULL && !fsim_torch_u64(ld, f.v.stream, &w, "stream", &seg.stream, error))
        return FALSE;
    if (!fsim_torch_is_none(f.v.pool) &&
        !fsim_torch_pool(ld, f.v.pool, &w, "segment_pool_id", &seg.pool_id, error))
        return FALSE;
    seg.pool = seg.size <= TORCH_SMALL_SEGMENT ? FSIM_POOL_SMALL : FSIM_POOL_LARGE;
    if (!fsim_torch_is_none(f.v.type)) {
        gsize len;
        const char *type = fsim_torch_str(ld, f.v.type, &w, "segment_type", &len, error);

        if (type == NULL)
            return FALSE;
        if (KEY_IS(type, len, "small"))
            seg.pool = FSIM_POOL_SMALL;
        else if (KEY_IS(type, len, "large"))
            seg.pool = FSIM_POOL_LARGE;
    }
    if (!fsim_torch_is_none(f.v.expandable) &&
        !fsim_pickle_get_bool(f.v.expandable, &seg.expandable))
        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, f.v.expandable,
                               "segments[%" G_GSIZE_FORMAT
                               "]: 'is_expandable' is %s, expected a bool",
                               i, fsim_torch_type_name(f.v.expandable));
    dev = fsim_torch_device(ld, f.v.device != NULL ? f.v.device : segment, device, error);
    if (dev == NULL)
        return FALSE;
    dev->segments++;
    dev->reserved_bytes = add_saturated(dev->reserved_bytes, seg.size);
    g_array_append_val(dev->final_segments, seg);
    return segment_blocks(ld, dev, &seg, f.v.blocks, &w, error);
}

gboolean
fsim_torch_read_segments(TorchLoader *ld, const FsimPickleValue *segments, GError **error)
{
    return fsim_torch_read_list(ld, segments, "'segments'", torch_read_segment, error);
}
