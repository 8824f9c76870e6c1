/* SPDX-License-Identifier: MIT */
/*
 * fragsim: traces, their formats and readers.
 *
 * A trace file is opened once (fsim_trace_open()), which detects its format from its first bytes
 * (after transparent gzip decompression) and reads whatever metadata the format keeps up front.
 * Each device of the trace then yields its own event stream (fsim_trace_stream_open()), which may
 * be opened any number of times, one after the other or at once: a text trace re-reads the file
 * and streams, so memory does not grow with trace length; a PyTorch snapshot is parsed once at
 * open.
 *
 * A format is one `const FsimTraceFormat` table registered in src/core/trace.c.  Readers know
 * nothing of policies: they produce #FsimEvent inputs, the recorded #FsimOutcome ground truth and
 * the #FsimInitialState at trace start.
 *
 * ERRORS: readers report FSIM_TRACE_ERROR codes with messages that start with the file name and
 * the line (`FILE:LINE: `) or byte offset (`FILE: byte N: `).
 */
#pragma once

#include <glib.h>

#include <gio/gio.h>

#include "fragsim/event.h"
#include "fragsim/state.h"
#include "fragsim/types.h"

G_BEGIN_DECLS

typedef struct FsimTrace FsimTrace;
typedef struct FsimTraceStream FsimTraceStream;
typedef struct FsimTraceFormat FsimTraceFormat;

/**
 * FsimTraceDeviceInfo:
 *
 * What `fragsim info` prints per device.  @actions counts entries by the action names of the
 * format (PyTorch's `alloc`, `free_requested`, `segment_alloc`... for snapshots; the kind names
 * for text traces), sorted by name.  @segments and @reserved_bytes describe the final state, where
 * the format records one (0 otherwise).
 */
typedef struct {
    uint32_t device;
    uint64_t events;
    GArray *actions; /* of FsimTraceActionCount, sorted by name */
    uint64_t streams;
    uint64_t segments;
    uint64_t reserved_bytes;
    uint64_t allocs;
    uint64_t peak_requested_bytes; /* of the trace's own alloc/free stream */
    FsimTime duration_ns;
} FsimTraceDeviceInfo;

typedef struct {
    char *name;
    uint64_t count;
} FsimTraceActionCount;

/**
 * FsimTraceInfo:
 * @path, @format: the file and its format name.
 * @devices: of #FsimTraceDeviceInfo, by device index.
 * @settings: (nullable): allocator settings recorded in the trace, as (key, value-as-text) pairs
 *     sorted by key (PyTorch's `allocator_settings`).
 * @alloc_conf: (nullable): the same as a PYTORCH_CUDA_ALLOC_CONF string, when the trace has one.
 * @annotations: number of annotations (PyTorch `external_annotations`) in the file.
 */
typedef struct {
    char *path;
    char *format;
    GArray *devices;
    GPtrArray *settings; /* alternating key, value strings */
    char *alloc_conf;
    uint64_t annotations;
} FsimTraceInfo;

void fsim_trace_info_free(FsimTraceInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimTraceInfo, fsim_trace_info_free)

/**
 * FsimTraceFormat:
 * @name: `text`, `torch`, `rmm`, `binary`.
 * @summary: one line for help texts.
 * @probe: TRUE when the first @len bytes (decompressed) look like this format.
 * @open: read the metadata of @path; @trace is allocated by the format, with the base
 *     #FsimTrace first, and filled by fsim_trace_init().
 * @close: free what open() allocated (the base fields are freed by fsim_trace_close()).
 * @stream_open: an event stream of one device.
 * @stream_next: TRUE with *ev filled; FALSE at the end (error unset) or on failure (error set).
 * @stream_read: (nullable): the same for up to @max events at once: the number read, 0 at the end
 *     (error unset) or on failure (error set).  A format whose events are cheap to decode offers
 *     it (and may then leave @stream_next NULL): fsim_trace_stream_next() serves events from a
 *     batch it fills, which saves a call per event.  Labels must stay valid while the stream is
 *     open.  @evs is always the stream's own batch, which only stream_read() writes (its users
 *     read it through const pointers, or copy out of it): a format may leave fields that it set
 *     in an earlier call on the same @evs as they are, and must check that @evs is that array.
 * @stream_close: free the stream.
 * @describe: (nullable): fill the format-specific parts of an info: per device (through
 *     fsim_trace_info_device()) `events` and `actions` in the format's own vocabulary, `segments`
 *     and `reserved_bytes` of the final state; and `annotations`.  The generic scan of every
 *     stream then adds `streams`, `allocs`, `peak_requested_bytes` and `duration_ns`.  NULL means
 *     the generic scan counts events and actions too (by event kind).
 */
struct FsimTraceFormat {
    const char *name;
    const char *summary;
    gboolean (*probe)(const guint8 *head, gsize len);
    FsimTrace *(*open)(const char *path, GError **error);
    void (*close)(FsimTrace *trace);
    FsimTraceStream *(*stream_open)(FsimTrace *trace, uint32_t device, GError **error);
    gboolean (*stream_next)(FsimTraceStream *stream, FsimEvent *ev, GError **error);
    gsize (*stream_read)(FsimTraceStream *stream, FsimEvent *evs, gsize max, GError **error);
    void (*stream_close)(FsimTraceStream *stream);
    gboolean (*describe)(FsimTrace *trace, FsimTraceInfo *info, GError **error);
};

/**
 * FsimTrace:
 *
 * The base of every opened trace.  A format's open() fills these through fsim_trace_init() and
 * the setters; callers read them through the accessors.
 */
/**
 * FsimFrame:
 * @filename: the source file (`model.py`, `CUDACachingAllocator.cpp`, `??` when unknown).
 * @name: the function.
 * @line: the line, 0 when unknown.
 *
 * One frame of the stack that made an allocation, innermost first, as PyTorch records them.
 */
typedef struct {
    const char *filename;
    const char *name;
    uint32_t line;
} FsimFrame;

typedef struct FsimStackTable FsimStackTable;

struct FsimTrace {
    const FsimTraceFormat *format;
    char *path;
    GArray *devices;                /* uint32_t: device indices that have events, ascending */
    GPtrArray *states;              /* FsimInitialState* per device index, or NULL */
    GPtrArray *outcomes;            /* GArray of FsimOutcome per device index, or NULL */
    GPtrArray *settings;            /* alternating key, value strings, or NULL */
    char *alloc_conf;               /* nullable */
    FsimStackTable *stacks;         /* the allocation stacks (FsimEvent.stack), or NULL */
    gboolean frames_name_torch_npu; /* some recorded frame is in torch_npu's package */
};

struct FsimTraceStream {
    FsimTrace *trace; /* borrowed */
    uint32_t device;
    /* Set by fsim_trace_stream_open() for formats with stream_read(); written by stream_read()
     * alone: */
    FsimEvent *batch;
    gsize batch_len;
    gsize batch_pos;
    FsimEvent single; /* fsim_trace_stream_batch() of a format without stream_read() */
};

/**
 * fsim_trace_formats:
 * @n: (out): number of formats.
 *
 * Returns: (transfer none): the registered formats.
 */
const FsimTraceFormat *const *fsim_trace_formats(gsize *n);

/**
 * fsim_trace_open:
 * @path: a trace file, gzip-compressed or not.
 * @error: FSIM_ERROR_IO when the file cannot be read; FSIM_TRACE_ERROR_EMPTY for an empty file;
 *     FSIM_TRACE_ERROR_HEADER when no format recognises it; or the format's own error.
 *
 * Returns: (transfer full) (nullable): the trace; free with fsim_trace_close().
 */
FsimTrace *fsim_trace_open(const char *path, GError **error);
void fsim_trace_close(FsimTrace *trace);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimTrace, fsim_trace_close)

/* For formats: set the base fields.  @path is copied. */
void fsim_trace_init(FsimTrace *trace, const FsimTraceFormat *format, const char *path);
/* For formats: declare that @device has events (keeps the list sorted and unique). */
void fsim_trace_add_device(FsimTrace *trace, uint32_t device);
/* For formats: take ownership of @state as the initial state of @device. */
void fsim_trace_set_initial_state(FsimTrace *trace, uint32_t device, FsimInitialState *state);
/* For formats: take ownership of @outcomes (GArray of FsimOutcome) as @device's ground truth. */
void fsim_trace_set_outcomes(FsimTrace *trace, uint32_t device, GArray *outcomes);

/**
 * fsim_trace_add_stack:
 * @trace: the trace being opened.
 * @frames: the frames, innermost first; their strings are copied (interned).
 * @n: how many; 0 gives the empty stack, id 0.
 *
 * For formats: interns a stack; equal stacks get the same id.
 *
 * Returns: the stack id for #FsimEvent.stack and #FsimSeedBlock.stack (0 = none).
 */
uint32_t fsim_trace_add_stack(FsimTrace *trace, const FsimFrame *frames, gsize n);

/**
 * fsim_trace_open_without_stacks:
 * @path: as for fsim_trace_open().
 * @error: as for fsim_trace_open().
 *
 * fsim_trace_open() for callers that never look at allocation stacks (`info`, `validate`): a
 * format may skip building them (the snapshot reader then interns no frames), and
 * fsim_trace_stack() finds none.  Everything else is as fsim_trace_open() gives it, the
 * platform evidence of #FsimTrace.frames_name_torch_npu included.
 *
 * Returns: (transfer full) (nullable): the trace, or %NULL with @error set.
 */
FsimTrace *fsim_trace_open_without_stacks(const char *path, GError **error);

/* For formats, while opening: whether the caller wants allocation stacks (FALSE inside
 * fsim_trace_open_without_stacks()). */
gboolean fsim_trace_opening_wants_stacks(void);

/**
 * fsim_trace_intern_frame:
 * @trace: the trace being opened.
 * @frame: a frame; its strings (%NULL reads as "") are copied.
 * @out: (out): the same frame with interned strings, for fsim_trace_add_interned_stack().
 *
 * For formats that meet the same frames over and over: intern each once, then build stacks of
 * interned frames without hashing their strings again.
 */
void fsim_trace_intern_frame(FsimTrace *trace, const FsimFrame *frame, FsimFrame *out);

/**
 * fsim_trace_add_interned_stack:
 * @frames: frames from fsim_trace_intern_frame() of the same trace, innermost first.
 *
 * fsim_trace_add_stack() for frames already interned.
 *
 * Returns: the stack id (0 = none).
 */
uint32_t fsim_trace_add_interned_stack(FsimTrace *trace, const FsimFrame *frames, gsize n);

/**
 * fsim_trace_stack:
 * @stack: an id from fsim_trace_add_stack(), 0 for none.
 * @n: (out): how many frames.
 *
 * Returns: (transfer none) (nullable): the frames, innermost first; NULL when @n is 0.
 */
const FsimFrame *fsim_trace_stack(const FsimTrace *trace, uint32_t stack, gsize *n);

/**
 * fsim_frames_first_user:
 *
 * The first frame (innermost first) of the program's own Python code: a `.py` file that is not
 * inside torch (or torch_npu) nor Python's own library, nor a `<frozen ...>` pseudo-file.  C++
 * frames are skipped too.
 *
 * Returns: (transfer none) (nullable): that frame, or NULL when there is none.
 */
const FsimFrame *fsim_frames_first_user(const FsimFrame *frames, gsize n);

/* `file.py:LINE:function` for @frame (caller frees), the path cut after `site-packages/` (or
 * `dist-packages/`), else to its file name. */
char *fsim_frame_format(const FsimFrame *frame);

/* Returns: (transfer full) (nullable): fsim_frame_format() of the first user frame of @stack
 * (the allocation site `explain` and `replay` name), NULL when it has none. */
char *fsim_trace_stack_site(const FsimTrace *trace, uint32_t stack);

const char *fsim_trace_path(const FsimTrace *trace);
const char *fsim_trace_format_name(const FsimTrace *trace);

/* Returns: (transfer none): the device indices with something to replay (events, or a recorded
 * state), ascending; *n of them. */
const uint32_t *fsim_trace_devices(const FsimTrace *trace, gsize *n);

/* Returns: (transfer none) (nullable): the state at trace start of @device, NULL when empty. */
const FsimInitialState *fsim_trace_initial_state(const FsimTrace *trace, uint32_t device);

/* Returns: (transfer none): the recorded outcomes of @device in trace order; *n of them. */
const FsimOutcome *fsim_trace_outcomes(const FsimTrace *trace, uint32_t device, gsize *n);

/* The capacity of the GPU @device was recorded on, as far as its recorded decisions tell: the
 * reserved bytes (seeded segments plus recorded segment actions) at the first recorded OOM plus
 * what the driver reported free there, else the peak of those reserved bytes; 0 when nothing is
 * known.  @from_oom (may be NULL) says whether an OOM told it. */
uint64_t fsim_trace_recorded_capacity(const FsimTrace *trace, uint32_t device, gboolean *from_oom);

/* Returns: (transfer none) (nullable): the trace's allocator settings as a
 * PYTORCH_CUDA_ALLOC_CONF string. */
const char *fsim_trace_alloc_conf(const FsimTrace *trace);

/**
 * fsim_trace_stream_open:
 * @trace: the trace; must outlive the stream.
 * @device: one of fsim_trace_devices().
 *
 * Returns: (transfer full) (nullable): a stream of @device's input events in time order.
 */
FsimTraceStream *fsim_trace_stream_open(FsimTrace *trace, uint32_t device, GError **error);
/* The slow path of fsim_trace_stream_next(): a format without a batch, or a batch used up. */
gboolean fsim_trace_stream_refill(FsimTraceStream *stream, FsimEvent *ev, GError **error);

/**
 * fsim_trace_stream_batch:
 * @evs: (out) (transfer none): the events, valid until the next call on @stream.
 *
 * The next events at once, without copying them: as many as the format decoded in one go (one
 * for formats that decode one at a time).  Mixes with fsim_trace_stream_next().
 *
 * Returns: how many; 0 at the end (error unset) or on failure (error set).
 */
gsize fsim_trace_stream_batch(FsimTraceStream *stream, const FsimEvent **evs, GError **error);

/* Inline: a replay calls it for every event, and most come out of a batch already decoded. */
static inline gboolean
fsim_trace_stream_next(FsimTraceStream *stream, FsimEvent *ev, GError **error)
{
    if (G_LIKELY(stream->batch_pos < stream->batch_len)) {
        *ev = stream->batch[stream->batch_pos++];
        return TRUE;
    }
    return fsim_trace_stream_refill(stream, ev, error);
}
void fsim_trace_stream_close(FsimTraceStream *stream);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimTraceStream, fsim_trace_stream_close)

/*
 * For readers of recordings whose clock may step back (threads racing to a log): @time, or the
 * previous time *@last when @time is earlier, which *@backwards counts.  *@last becomes the time
 * returned, so a reader's times never decrease.
 */
static inline FsimTime
fsim_trace_clock_advance(FsimTime *last, uint64_t *backwards, FsimTime time)
{
    if (time < *last) {
        (*backwards)++;
        time = *last;
    }
    *last = time;
    return time;
}

/**
 * fsim_trace_describe:
 *
 * Counts what `fragsim info` reports.  Reads every stream once.
 *
 * Returns: (transfer full) (nullable): the info; free with fsim_trace_info_free().
 */
FsimTraceInfo *fsim_trace_describe(FsimTrace *trace, GError **error);

/* For describe() implementations: add @count to @name's count in @dev->actions. */
void fsim_trace_info_count(FsimTraceDeviceInfo *dev, const char *name, uint64_t count);
/* For describe() implementations: the entry of @device in @info, created if missing. */
FsimTraceDeviceInfo *fsim_trace_info_device(FsimTraceInfo *info, uint32_t device);

/**
 * fsim_memory_budget:
 *
 * The memory budget of the readers: the most bytes a reader may hold while reading a trace (the
 * unpickler's values, stack, memo and input window; a text or RMM reader's line buffer).  A
 * reader that would need more fails with %FSIM_TRACE_ERROR_LIMIT and a message naming the file
 * and the budget, instead of being killed by the kernel.  The default is half the physical
 * memory, and at most half the address-space limit (`ulimit -v`) when one is set, so that the
 * budget is crossed before malloc() fails; `--max-memory` sets it.
 *
 * Returns: the budget in bytes.
 */
gsize fsim_memory_budget(void);

/**
 * fsim_set_memory_budget:
 * @bytes: the new budget; 0 restores the default.
 *
 * Sets the budget fsim_memory_budget() returns, for the whole process.
 */
void fsim_set_memory_budget(gsize bytes);

/**
 * fsim_input_open:
 * @path: a file, or `-` for standard input.
 * @error: FSIM_ERROR_IO naming @path.
 *
 * Opens @path for reading, decompressing gzip transparently (detected by its magic, not its
 * name).  For formats that stream.
 *
 * Returns: (transfer full): a buffered input stream.
 */
GInputStream *fsim_input_open(const char *path, GError **error);

/**
 * fsim_input_read_all:
 * @path: a file (gzip-compressed or not).
 * @max_bytes: refuse larger (decompressed) contents with FSIM_TRACE_ERROR_LIMIT; 0 = no limit.
 * @out: (out) (transfer full): the decompressed contents.
 *
 * Holds the whole input: for formats that need it at once and bound it with @max_bytes.  The
 * pickle reader streams instead (fsim_pickle_load_stream()).
 *
 * Returns: %FALSE with FSIM_ERROR_IO or a decompression error naming @path.
 */
gboolean fsim_input_read_all(const char *path, gsize max_bytes, GBytes **out, GError **error);

/**
 * FsimTraceWriter:
 *
 * Writes the native text format (`fragsim-trace v1`), gzip-compressed when the path ends in
 * `.gz`, or the binary format (`fragsim-trace binary v1`, never compressed; comments are not
 * kept).  Output goes to a temporary file renamed into place by a successful
 * fsim_trace_writer_close(), so an interrupted or failed write never leaves a partial trace that
 * looks complete.
 */
typedef struct FsimTraceWriter FsimTraceWriter;

/**
 * FsimTraceWriteFormat:
 * @FSIM_TRACE_WRITE_AUTO: binary when the path ends in `.fsb` (%FSIM_TRACE_BINARY_SUFFIX), text
 *     otherwise.
 * @FSIM_TRACE_WRITE_TEXT: `fragsim-trace v1`.
 * @FSIM_TRACE_WRITE_BINARY: `fragsim-trace binary v1`; the output must be a regular file (the
 *     header is written last).
 */
typedef enum {
    FSIM_TRACE_WRITE_AUTO,
    FSIM_TRACE_WRITE_TEXT,
    FSIM_TRACE_WRITE_BINARY,
} FsimTraceWriteFormat;

#define FSIM_TRACE_BINARY_SUFFIX ".fsb"

/* Text or binary by the path's suffix (%FSIM_TRACE_WRITE_AUTO). */
FsimTraceWriter *fsim_trace_writer_open(const char *path, GError **error);
FsimTraceWriter *fsim_trace_writer_open_format(const char *path, FsimTraceWriteFormat format,
                                               GError **error);
gboolean fsim_trace_writer_comment(FsimTraceWriter *writer, const char *text, GError **error);
gboolean fsim_trace_writer_write(FsimTraceWriter *writer, const FsimEvent *ev, GError **error);
/* Finish and rename into place.  Returns FALSE (and removes the temporary file) on failure. */
gboolean fsim_trace_writer_close(FsimTraceWriter *writer, GError **error);
/* Abandon: remove the temporary file.  NULL-safe. */
void fsim_trace_writer_abort(FsimTraceWriter *writer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimTraceWriter, fsim_trace_writer_abort)

G_END_DECLS
