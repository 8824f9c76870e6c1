/* SPDX-License-Identifier: MIT */
/*
 * fragsim: why reserved memory exceeds live memory, and which allocations cause it.
 *
 * `fragsim explain` replays one device of a trace through one policy and stops at the moments
 * that matter: the peak of reserved memory (the first event after which it reaches its maximum),
 * every OOM (simulated, and those the recording itself hit), and any event the user names.  At
 * each it breaks the reserved bytes down exactly (#FsimBreakdown), finds the largest free block,
 * says at an OOM why no free block could serve the request, and groups the live blocks that keep
 * free memory from going back to the device by allocation site (#FsimPinSite).  docs/explain.md
 * defines every term.
 *
 * The policy is seen only through its public interface: its describe() operation (policy.h)
 * lists segments, blocks and what is releasable; the engine's live table gives what each live
 * block asked for; the trace gives each allocation's stack.
 */
#pragma once

#include <glib.h>

#include "fragsim/json-writer.h"
#include "fragsim/policy.h"
#include "fragsim/trace.h"
#include "fragsim/types.h"

G_BEGIN_DECLS

/**
 * FsimBreakdown:
 * @live_requested_bytes: what the live allocations asked for (frees still pending on a stream
 *     included: their memory is not reusable yet).
 * @rounding_bytes: what the policy added to them: block rounding, page rounding.
 * @free_releasable_bytes: free memory the policy could give back to the device now (whole free
 *     segments; whole free pages of an expandable segment).
 * @free_pinned_bytes: free memory it cannot give back, because a live block shares its segment
 *     or page.
 *
 * The four add up to the reserved bytes exactly.
 */
typedef struct {
    uint64_t live_requested_bytes;
    uint64_t rounding_bytes;
    uint64_t free_releasable_bytes;
    uint64_t free_pinned_bytes;
} FsimBreakdown;

/* The sum of the four parts. */
uint64_t fsim_breakdown_total(const FsimBreakdown *breakdown);

/**
 * FsimPinSite:
 * @site: where the pinning blocks were allocated: `file.py:LINE:function` (the first frame of the
 *     program's own code), or `SIZE on stream S after mark M` when the trace has no stacks.
 * @count: live blocks of this site that pin free memory.
 * @sizes: (element-type uint64_t): their distinct block sizes in bytes, ascending.
 * @live_bytes: what those blocks asked for.
 * @pinned_bytes: free bytes attributed to them (docs/explain.md: the attribution rule).
 */
typedef struct {
    char *site;
    uint64_t count;
    GArray *sizes;
    uint64_t live_bytes;
    uint64_t pinned_bytes;
} FsimPinSite;

/**
 * FsimExplainBlock:
 *
 * A block at a moment, for pictures: @segment indexes the moment's segments; @site indexes its
 * pins when the block pins free memory (else -1); @requested is 0 for free blocks.
 */
typedef struct {
    FsimAddr addr;
    uint64_t size;
    uint64_t requested;
    uint64_t releasable;
    uint64_t pinned; /* free block: its pinned bytes; live block: the pinned bytes it holds */
    guint segment;
    gint site;
    gboolean free;
} FsimExplainBlock;

/**
 * FsimExplainRequest:
 *
 * The allocation at an OOM moment.  @simulated: the policy failed it here; @recorded: the
 * recording failed it.  The counts classify the free blocks the policy held then: smaller than
 * the request, on another stream, in PyTorch's other pool, or large enough but refused by the
 * policy's own rules (max_split_size_mb's oversize rule).  @reason says it in a sentence.
 */
typedef struct {
    uint64_t size;
    uint64_t stream;
    gboolean simulated;
    gboolean recorded;
    uint64_t device_free_bytes;
    uint64_t free_blocks_too_small;
    uint64_t free_blocks_other_stream;
    uint64_t free_blocks_other_pool;
    uint64_t free_blocks_refused;
    uint64_t largest_free_same_stream_bytes;
    char *reason;
} FsimExplainRequest;

typedef enum {
    FSIM_MOMENT_PEAK = 0,
    FSIM_MOMENT_OOM,
    FSIM_MOMENT_AT,
} FsimMomentKind;

/* `peak`, `oom`, `at`: the JSON names. */
const char *fsim_moment_kind_name(FsimMomentKind kind);

/**
 * FsimAlternative:
 *
 * The same moment under another policy or setting ("what would change it").
 */
typedef struct {
    char *policy;
    char *config;        /* PYTORCH_CUDA_ALLOC_CONF string, "" for the defaults */
    gboolean has_moment; /* the alternative reached this event */
    FsimBreakdown breakdown;
    uint64_t reserved_bytes;
    gboolean oom;         /* it ran out of memory at this event too */
    int64_t needed_bytes; /* the least capacity without an OOM; -1 when not computed */
    char *advice;         /* one sentence a user can act on */
} FsimAlternative;

/**
 * FsimPoolNeed:
 * @pool: 0 for the default pools, else a private pool's id (a CUDA graph's, a MemPool's).
 * @needed_bytes: the pool's share of the run's needed_bytes: what it reserves at the peak of a
 *     replay on a device of needed_bytes (the first event after which that replay's reservation
 *     is at its maximum).  The shares add up to that peak, at most needed_bytes.
 * @peak_reserved_bytes: the pool's own peak in that replay (the pools need not peak together).
 *
 * The capacity one pool needs (src/analysis/needed.h computes it; docs/policies.md).
 */
typedef struct {
    uint64_t pool;
    uint64_t needed_bytes;
    uint64_t peak_reserved_bytes;
} FsimPoolNeed;

/**
 * FsimPoolBreakdown:
 * @private_pool: a CUDA graph's or MemPool's pool, named @pool_id; %FALSE for the default pools.
 *
 * The part of a moment's reserved memory one pool holds, broken down the same way.
 */
typedef struct {
    gboolean private_pool;
    uint64_t pool_id;
    uint64_t reserved_bytes;
    FsimBreakdown breakdown;
} FsimPoolBreakdown;

/**
 * FsimMoment:
 * @event: the event's index in the trace (a PyTorch trace entry, a text trace line); -1 for the
 *     state at trace start.
 * @segments: (element-type FsimSegmentView): the segments then, by address.
 * @blocks: (element-type FsimExplainBlock): their blocks, by address.
 * @pins: (element-type FsimPinSite*): by pinned bytes, largest first.
 * @alternatives: (element-type FsimAlternative*) (nullable).
 * @pools: (element-type FsimPoolBreakdown): per pool, the default pools first, then the private
 *     ones by id; empty when the policy has no private pool then.
 */
typedef struct {
    FsimMomentKind kind;
    int64_t event;
    FsimTime time_ns;
    uint64_t reserved_bytes;
    FsimBreakdown breakdown;
    uint64_t largest_free_bytes;
    gboolean has_request;
    FsimExplainRequest request;
    GArray *segments;
    GArray *blocks;
    GPtrArray *pins;
    GPtrArray *alternatives;
    GArray *pools;
} FsimMoment;

/**
 * FsimExplainOptions:
 * @policy: (nullable): the policy; NULL: the recorded settings of a snapshot (`caching`, or
 *     `expandable` under expandable_segments), `caching` otherwise.
 * @alloc_conf: (nullable): PYTORCH_CUDA_ALLOC_CONF for caching and expandable; NULL: the
 *     snapshot's recorded settings (none for other traces).
 * @device: (nullable): a device as fsim_device_spec_parse() takes it; NULL: for a snapshot, the
 *     recording GPU as far as the trace tells (validate.h), else the default device.
 * @trace_device: the trace device to replay; -1: the first with events.
 * @at: (element-type uint64_t) (nullable): event indices to explain as well.
 * @paranoid: check after every event that the breakdown adds up to the reserved bytes (and run
 *     the policy's own checks).
 * @alternatives: also replay the other policies and settings at each moment.
 */
typedef struct {
    const char *policy;
    const char *alloc_conf;
    const char *device;
    int64_t trace_device;
    GArray *at;
    gboolean paranoid;
    gboolean alternatives;
} FsimExplainOptions;

void fsim_explain_options_init(FsimExplainOptions *options);

/**
 * FsimExplanation:
 * @described: the policy describes its segments (else free memory cannot be split and counts as
 *     pinned, with no pins named).
 * @needed_bytes: the capacity this run needs (`needed_bytes`, as `replay` reports it); -1 when
 *     the alternatives were not asked for or the search failed.
 * @pool_needs: (element-type FsimPoolNeed) (nullable): with private pools and @needed_bytes,
 *     each pool's share of it (as `replay` reports it), and @pool_needs_peak what the shares add
 *     up to.
 * @moments: (element-type FsimMoment*): in event order.
 */
typedef struct {
    char *trace;
    char *policy;
    char *config;
    char *device;
    uint64_t capacity_bytes;
    uint32_t trace_device;
    gboolean described;
    int64_t needed_bytes;
    GArray *pool_needs;
    uint64_t pool_needs_peak;
    GPtrArray *moments;
} FsimExplanation;

void fsim_explanation_free(FsimExplanation *explanation);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimExplanation, fsim_explanation_free)

/**
 * fsim_explain_trace:
 * @trace: an opened trace.
 * @options: what to explain.
 * @error: FSIM_ERROR_USAGE for a bad policy, setting, device or --at event (an event the trace
 *     does not have); the trace's own errors; FSIM_ERROR_FAILED when a breakdown does not add up
 *     (a bug of the policy's describe()).
 *
 * Returns: (transfer full) (nullable): the explanation.
 */
FsimExplanation *fsim_explain_trace(FsimTrace *trace, const FsimExplainOptions *options,
                                    GError **error);

/* The members of the `explain --json` object (the schema of docs/explain.md), written into the
 * object @writer has open. */
void fsim_explanation_write_json(const FsimExplanation *explanation, FsimJsonWriter *writer);

/**
 * fsim_explain_plot:
 * @explanation: the explanation.
 * @moment: which of its moments.
 * @path: the picture (`.png` or `.svg`); the gnuplot script and data are written beside it.
 * @gnuplot: (nullable): the gnuplot program; NULL looks it up in PATH.
 * @error: FSIM_PLOT_ERROR when gnuplot is missing or fails; FSIM_ERROR_IO.
 *
 * Draws the moment's segments as horizontal bars: live, rounding, releasable and pinned bytes in
 * four colours, the pinning blocks outlined, and at an OOM the request to scale.
 */
gboolean fsim_explain_plot(const FsimExplanation *explanation, guint moment, const char *path,
                           const char *gnuplot, GError **error);

G_END_DECLS
