/* SPDX-License-Identifier: MIT */
/*
 * PyTorch memory snapshots: the pickles of torch.cuda.memory._dump_snapshot() and of
 * torch.cuda.memory_snapshot(), read through the safe unpickler (pickle/) and walked by the
 * fields present, never by a version number (docs/trace-formats.md has the user's view).
 *
 * Shapes accepted: a bare list of segments (the oldest form, no trace); or a dict with any of
 * `segments`, `device_traces` (one list of entries per device), `allocator_settings` and
 * `external_annotations`.  Blocks carry `address` or not (then they follow each other from the
 * segment's address), and `requested_size` or the legacy `history[0].real_size`.  Entries carry
 * `time_us` or not; `frames` become the stacks of allocations (fsim_trace_stack());
 * `compile_context`, `user_metadata` and other keys are ignored.
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
 * The whole snapshot is decoded at open (a plain file is mapped, not copied; a compressed one
 * is unpickled as it is decompressed, never held whole) into compact per-device event arrays,
 * and the pickle is freed; streams then only copy events out.  The unpickler's memory is bounded
 * by the live object graph and the memory budget (fsim_memory_budget()).
 */
/* madvise() is POSIX/BSD, hidden by -std=c11 unless asked for. */
#define _DEFAULT_SOURCE 1

#include <glib.h>

#include <stdint.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "readers.h"
#include "torch-reader.h"

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
        if (!fsim_torch_charge(ld, root, 1 + (uint64_t)fsim_pickle_len(root), error))
            return FALSE;
        segments = fsim_pickle_dict_get(root, "segments");
        traces = fsim_pickle_dict_get(root, "device_traces");
        settings = fsim_pickle_dict_get(root, "allocator_settings");
        annotations = fsim_pickle_dict_get(root, "external_annotations");
        break;
    default:
        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, root,
                               "the snapshot is %s, expected a dict or a list of segments",
                               fsim_torch_type_name(root));
    }
    /* Traces before annotations: those are placed on their device's clock. */
    if (!fsim_torch_is_none(segments) && !fsim_torch_read_segments(ld, segments, error))
        return FALSE;
    if (!fsim_torch_is_none(traces) && !fsim_torch_read_traces(ld, traces, error))
        return FALSE;
    if (!fsim_torch_is_none(annotations) && !fsim_torch_read_annotations(ld, annotations, error))
        return FALSE;
    if (!fsim_torch_is_none(settings) && !fsim_torch_read_settings(ld, settings, error))
        return FALSE;
    return TRUE;
}

/* Loads the pickle: from the mapped file when it is a plain one (the copy through a stream
 * costs as much as unpickling), else (compressed, not a regular file) streamed through the
 * decompressor, never held whole.  *@npu_frames is FALSE when no str of the pickle can name a
 * file of torch_npu: no str read by a binary opcode holds "torch_npu/" (the unpickler looks as it
 * reads them: FsimPickleLimits.watch_str) and none came from a text opcode
 * (fsim_pickle_text_strings()); then no frame needs looking at for it. */
static FsimPickle *
torch_load_pickle(const char *path, gboolean records, gboolean *npu_frames, GError **error)
{
    g_autoptr(GMappedFile) mapped = NULL;
    g_autoptr(GInputStream) in = NULL;
    g_autoptr(GError) local_error = NULL;
    FsimPickleLimits limits = {.max_input = TORCH_MAX_BYTES, .watch_str = "torch_npu/"};
    FsimPickle *pickle = NULL;

    if (strcmp(path, "-") != 0 && g_file_test(path, G_FILE_TEST_IS_REGULAR))
        mapped = g_mapped_file_new(path, FALSE, NULL);
    if (mapped != NULL) {
        const guint8 *data = (const guint8 *)g_mapped_file_get_contents(mapped);
        gsize len = g_mapped_file_get_length(mapped);

#if defined(MADV_POPULATE_READ)
        /* All of it is read: its pages mapped at once rather than fault by fault (where the
         * kernel refuses, they fault in as they are read). */
        if (data != NULL && len > 0) {
            uintptr_t page = (uintptr_t)data & ~(uintptr_t)4095;
            (void)madvise((void *)page, len + ((uintptr_t)data - page), MADV_POPULATE_READ);
        }
#endif

        if (len > TORCH_MAX_BYTES) {
            g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT,
                        "%s: larger than %" G_GSIZE_FORMAT " bytes", path, TORCH_MAX_BYTES);
            return NULL;
        }
        if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
            g_clear_pointer(&mapped, g_mapped_file_unref); /* compressed: streamed below */
        } else {
            /* Everything a snapshot holds is memoized, so alive to the end: 2 to 4 values of
             * 40 bytes per 10 bytes of pickle. */
            FsimPickleLimits whole = {
                .expect_memory = 2 * len,
                .record_keys = records ? fsim_torch_entry_keys : NULL,
                /* the frames lists are read by their items and twin numbers only */
                .shared_record_lists = records,
                .watch_str = "torch_npu/",
            };

            pickle = fsim_pickle_load(data, len, &whole, &local_error);
            *npu_frames = pickle == NULL || fsim_pickle_text_strings(pickle) ||
                          fsim_pickle_watched_str_seen(pickle);
        }
    }
    if (mapped == NULL) {
        in = fsim_input_open(path, error);
        if (in == NULL)
            return NULL;
        pickle = fsim_pickle_load_stream(in, &limits, &local_error);
        *npu_frames = pickle == NULL || fsim_pickle_text_strings(pickle) ||
                      fsim_pickle_watched_str_seen(pickle);
    }
    if (pickle == NULL)
        g_propagate_prefixed_error(error, g_steal_pointer(&local_error), "%s: ", path);
    return pickle;
}

/* Opens the snapshot at @path; with @records, its entries are loaded as records (torch-entries.c)
 * and *@again is set, with no error, where the result may differ from a load without them (the
 * load or the walk failed, or some record was not found where the entries are): then the caller
 * opens it again without. */
static FsimTrace *
torch_open_with(const char *path, gboolean records, gboolean *again, GError **error)
{
    g_autoptr(FsimPickle) pickle = NULL;
    g_autoptr(GError) local_error = NULL;
    TorchTrace *trace;
    TorchLoader ld = {.path = path, .wants_stacks = fsim_trace_opening_wants_stacks()};
    gsize len;
    gboolean read;

    pickle = torch_load_pickle(path, records, &ld.npu_frames, &local_error);
    if (pickle == NULL) {
        *again = records;
        if (!records)
            g_propagate_error(error, g_steal_pointer(&local_error));
        return NULL;
    }
    len = (gsize)fsim_pickle_input_bytes(pickle);

    trace = g_new0(TorchTrace, 1);
    fsim_trace_init(&trace->base, &fsim_trace_format_torch, path);
    trace->devices = g_ptr_array_new_with_free_func(fsim_torch_device_free);
    trace->labels = g_ptr_array_new_with_free_func(g_free);
    ld.len = len;
    ld.budget = len / 2 + TORCH_BUDGET_SLACK;
    ld.trace = trace;
    read = torch_read_root(&ld, fsim_pickle_root(pickle), &local_error);
    fsim_torch_loader_clear(&ld);
    if (fsim_pickle_records(pickle) > 0 && (!read || ld.records != fsim_pickle_records(pickle))) {
        *again = TRUE;
        fsim_trace_close(&trace->base);
        return NULL;
    }
    if (!read) {
        g_propagate_error(error, g_steal_pointer(&local_error));
        fsim_trace_close(&trace->base);
        return NULL;
    }
    g_clear_pointer(&pickle, fsim_pickle_free);
    if (ld.dropped_annotations > 0)
        g_info("%s: %" G_GUINT64_FORMAT " annotations could not be placed on a device's clock",
               path, ld.dropped_annotations);
    for (guint d = 0; d < trace->devices->len; d++) {
        TorchDevice *dev = trace->devices->pdata[d];

        if (dev != NULL && !fsim_torch_build_device(&ld, dev, error)) {
            fsim_trace_close(&trace->base);
            return NULL;
        }
    }
    return &trace->base;
}

static FsimTrace *
torch_open(const char *path, GError **error)
{
    gboolean again = FALSE;
    FsimTrace *trace = torch_open_with(path, TRUE, &again, error);

    if (trace == NULL && again)
        trace = torch_open_with(path, FALSE, &again, error);
    return trace;
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

/* Up to @max events of the stream into @evs: the number copied, 0 at the end. */
static gsize
torch_stream_read(FsimTraceStream *base, FsimEvent *evs, gsize max, GError **error)
{
    TorchStream *stream = (TorchStream *)base;
    const TorchDevice *dev = stream->device;
    const TorchEvent *e = dev->events + stream->next;
    gsize n = MIN(max, (gsize)(dev->n_events - stream->next));
    uint32_t device = stream->device->device;

    (void)error;
    for (gsize i = 0; i < n; i++, e++) {
        FsimEvent *ev = &evs[i];

        fsim_event_core_get(&e->core, ev);
        ev->addr = e->addr;
        ev->device = device;
        ev->flags = e->flags;
        ev->kind = (FsimEventKind)e->kind;
        ev->stack = e->stack;
        ev->label = ev->kind == FSIM_EV_MARK ? stream->trace->labels->pdata[e->label] : NULL;
    }
    stream->next += (guint)n;
    return n;
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
                fsim_trace_info_count(out, fsim_torch_action_names[a], dev->counts[a]);
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
    .stream_read = torch_stream_read,
    .stream_close = torch_stream_close,
    .describe = torch_describe,
};
