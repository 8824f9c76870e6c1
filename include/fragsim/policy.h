/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the allocator policy interface and its registry.
 *
 * A policy is one C file exporting one `const FsimPolicyOps` table, registered by name in
 * src/core/registry.c.  It sees sizes and streams only: the engine keeps the table of live
 * allocations, hands back the exact #FsimBlock on dealloc (as RMM and jemalloc pass the size
 * back), and counts requested and allocated bytes; the device counts reserved bytes and driver
 * calls.  A policy reports only what it alone knows, through get_stats().
 *
 * THE CONTRACT
 *
 * - create() receives the device (borrowed: it outlives the policy) and a key file whose group
 *   named after the policy holds its knobs; unknown knobs were already rejected by the registry.
 * - alloc() either fills *out and returns FSIM_OK, or leaves *out untouched and returns FSIM_OOM.
 *   On FSIM_OK, out->size >= req->size and the block overlaps no live block.  Before returning
 *   FSIM_OOM a policy tries whatever reclaiming it models (freeing cached segments and retrying),
 *   and an OOM leaves no other side effect on the allocations the policy hands out.
 * - dealloc() receives exactly a block that alloc() (or seed()) returned and that was not
 *   deallocated since.  A policy never sees trace addresses or ids.
 * - stream_sync(), empty_cache(), get_stats(), check(), seed(), plan() are optional: NULL means
 *   nothing to do (seed: the engine allocates the seeded blocks through alloc() instead).
 * - plan() is how an offline policy learns the future without seeing the trace: a list of
 *   (size, stream, start, end) per allocation, nothing else.
 * - pool_begin(), pool_end(), pool_release() are optional too: a policy without them has no
 *   private pools and serves every allocation from its one pool, whatever scope is open.  The
 *   engine calls them for the trace's POOL_* events (event.h says what they mean) after checking
 *   them: a pool_end always closes a scope that pool_begin opened on that stream, and a
 *   pool_release never drops a pool's reference count below zero nor to zero while a scope of
 *   the pool is open.  Pools of the initial state (FsimSeedSegment.pool_id) exist with one
 *   reference before the first event.
 * - describe() reports the device memory the policy holds, segment by segment, and which of its
 *   free bytes the policy could give back to the device now (see #FsimPolicyVisitor).  `explain`
 *   breaks reserved memory down with it; a policy without it is described by its live blocks.
 * - get_stats() is called whenever the engine meets a new tightest moment of the run (see
 *   metrics.h), which can be once per allocation while memory grows: keep it O(1) or O(log n).
 * - check() walks the policy's invariants and returns FALSE with a message when one is broken.
 *   The conformance tests call it after every operation, and so does the engine in paranoid mode.
 * - There is no reset: the engine destroys the policy and creates it again.
 * - The ops table lives in static storage and is never modified.
 */
#pragma once

#include <glib.h>

#include "fragsim/device.h"
#include "fragsim/plan.h"
#include "fragsim/state.h"
#include "fragsim/types.h"

G_BEGIN_DECLS

typedef struct FsimPolicy FsimPolicy;
typedef struct FsimPolicyOps FsimPolicyOps;

typedef struct {
    uint64_t size;   /* requested bytes, 1 <= size <= FSIM_MAX_SIZE */
    uint64_t stream; /* stream the block will be used on */
    FsimTime now;
} FsimAllocRequest;

typedef struct {
    FsimAddr addr;   /* start of the block handed out */
    uint64_t size;   /* bytes set aside for it, >= requested */
    uint64_t cookie; /* policy-private; handed back unchanged on dealloc */
} FsimBlock;

/**
 * FsimPolicyStats:
 * @cached_bytes: device memory the policy holds but has not handed out (free bytes inside its
 *     segments or arena), or 0.
 * @largest_free_block: the largest block it could hand out without asking the device, 0 if none
 *     or unknown.
 * @num_splits, @num_merges: block splits and coalescings so far.
 * @num_alloc_retries: times it released cached memory and retried a device allocation.
 * @extra: policy-specific counters (name, value), e.g. PyTorch's `oversize_allocations`;
 *     @n_extra of them.  Names are stable (they become JSON keys and columns).
 */
typedef struct {
    uint64_t cached_bytes;
    uint64_t largest_free_block;
    uint64_t num_splits;
    uint64_t num_merges;
    uint64_t num_alloc_retries;
    struct {
        const char *name;
        uint64_t value;
    } extra[16];
    guint n_extra;
} FsimPolicyStats;

/* Adds the counter @name = @value to @out's extra ones (get_stats() receives @out zeroed). */
static inline void
fsim_policy_stats_extra(FsimPolicyStats *out, const char *name, uint64_t value)
{
    g_assert(out->n_extra < G_N_ELEMENTS(out->extra));
    out->extra[out->n_extra].name = name;
    out->extra[out->n_extra].value = value;
    out->n_extra++;
}

/**
 * FsimPoolStats:
 * @pool: the pool: 0 for the default pools, else a private pool's id (as POOL_* events name it).
 * @reserved_bytes: device memory its segments hold now.
 * @peak_reserved_bytes: the most they held at once.
 * @use_count: references on a private pool now (0: freeable, or released and gone).
 */
typedef struct {
    uint64_t pool;
    uint64_t reserved_bytes;
    uint64_t peak_reserved_bytes;
    uint64_t use_count;
} FsimPoolStats;

/**
 * FsimKnob:
 * @name: key in the policy's group (`page_size`), as `--set POLICY.KEY=VALUE` takes it.
 * @default_value: the default, as text (`2MiB`).
 * @summary: one line for `fragsim policies`.
 */
typedef struct {
    const char *name;
    const char *default_value;
    const char *summary;
} FsimKnob;

/**
 * FsimSegmentView:
 * @addr: start of the segment: one cudaMalloc'd range, or one contiguous mapped range of a
 *     reservation (an expandable segment, an arena).
 * @size: bytes of device memory it holds (mapped or cudaMalloc'd), a multiple of the device
 *     granularity.  The sizes of all segments add up to the device's reserved bytes.
 * @stream: the stream it serves (0 when the policy does not tell streams apart).
 * @pool: PyTorch's pool, or %FSIM_POOL_UNKNOWN.
 * @expandable: a mapped range of a reservation rather than a cudaMalloc'd segment.
 * @page_size: the unit in which the policy maps and unmaps it (an expandable segment's page:
 *     2 MiB small pool, 20 MiB large pool), 0 for a cudaMalloc'd segment.
 * @private_pool: the segment belongs to a private pool (a CUDA graph's or a MemPool's), the one
 *     @private_pool_id names (the id of the trace's POOL_* events); %FALSE for the default pools.
 * @free_blocks_only: the policy reports only the free blocks of this segment (it does not keep
 *     its blocks in use, as a buddy system does not); its blocks in use are the run's live
 *     allocations inside it, which the caller takes from the engine.
 */
typedef struct {
    FsimAddr addr;
    uint64_t size;
    uint64_t stream;
    FsimPool pool;
    gboolean expandable;
    uint64_t page_size;
    gboolean private_pool;
    uint64_t private_pool_id;
    gboolean free_blocks_only;
} FsimSegmentView;

/**
 * FsimBlockView:
 * @addr, @size: the block, inside the segment reported last.
 * @free: %FALSE for a block handed out (or freed but not yet reusable: a pending stream free),
 *     %TRUE for a cached block the policy can hand out again.
 * @releasable: free blocks only: how many of its bytes the policy would give back to the device
 *     if it emptied its cache now (the whole block when it is a whole cudaMalloc'd segment; the
 *     whole pages inside it for an expandable segment; 0 when the policy never releases).
 * @live_addr: blocks in use only: 0 when the block is a live allocation itself; else the address
 *     of the live allocation it is a piece of, which lies elsewhere (GMLake's stitched blocks map
 *     pieces of several segments into a virtual range of their own).
 */
typedef struct {
    FsimAddr addr;
    uint64_t size;
    gboolean free;
    uint64_t releasable;
    FsimAddr live_addr;
} FsimBlockView;

/**
 * FsimPolicyVisitor:
 * @segment: called for each segment, in increasing address order.
 * @block: called after its segment for each of its blocks, in increasing address order.  Blocks
 *     never overlap; bytes of a segment in no block are rounding the policy added (a page's
 *     tail), neither live nor reusable.
 */
typedef struct {
    void (*segment)(gpointer data, const FsimSegmentView *segment);
    void (*block)(gpointer data, const FsimBlockView *block);
} FsimPolicyVisitor;

struct FsimPolicyOps {
    const char *name;      /* stable id: CLI, JSON, database, plot legends */
    const char *summary;   /* one line for `fragsim policies` */
    const FsimKnob *knobs; /* terminated by a {NULL} entry; NULL when there are none */

    /* required */
    FsimPolicy *(*create)(FsimDevice *device, GKeyFile *config, GError **error);
    void (*destroy)(FsimPolicy *self);
    FsimStatus (*alloc)(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out);
    void (*dealloc)(FsimPolicy *self, const FsimBlock *block, FsimTime now);

    /* optional: NULL means "nothing to do" */
    void (*stream_sync)(FsimPolicy *self, uint64_t stream, FsimTime now);
    void (*empty_cache)(FsimPolicy *self, FsimTime now);
    void (*get_stats)(const FsimPolicy *self, FsimPolicyStats *out);
    gboolean (*check)(const FsimPolicy *self, GError **error);
    /* Rebuild @state (segments through the device, which is in seeding mode) and return in
     * @blocks[i] the block standing for state->blocks[i].  FALSE with @error when the state
     * cannot be represented. */
    gboolean (*seed)(FsimPolicy *self, const FsimInitialState *state, FsimBlock *blocks,
                     GError **error);
    /* Private pools (PyTorch's CUDA graphs and MemPool): a scope of @pool opens or closes on
     * @stream; one reference on @pool is dropped. */
    void (*pool_begin)(FsimPolicy *self, uint64_t pool, uint64_t stream, FsimTime now);
    void (*pool_end)(FsimPolicy *self, uint64_t pool, uint64_t stream, FsimTime now);
    void (*pool_release)(FsimPolicy *self, uint64_t pool, FsimTime now);
    /* Walk the segments and blocks the policy holds now (see #FsimPolicyVisitor). */
    void (*describe)(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data);
    /* Reserved memory per pool: the default pools first, then every private pool seen, by id.
     * Fills at most @max entries and returns how many there are. */
    gsize (*pool_stats)(const FsimPolicy *self, FsimPoolStats *out, gsize max);
    /* Offline policies only: before the first event, the lifetimes of every allocation the run
     * will make, in the order alloc() will receive them (fragsim/plan.h).  Called only when the
     * run has them (FsimRunConfig.lifetimes).  FALSE with @error when they cannot be used. */
    gboolean (*plan)(FsimPolicy *self, const FsimLifetimes *lifetimes, GError **error);
};

struct FsimPolicy {
    const FsimPolicyOps *ops; /* always first; set by create() */
    FsimDevice *device;       /* borrowed; outlives the policy */
    /* The run checks every invariant (FsimRunConfig.paranoid), set by the engine before plan():
     * a policy then also checks what it otherwise holds true by construction. */
    gboolean paranoid;
};

/**
 * fsim_policy_list:
 * @n: (out): number of registered policies.
 *
 * Returns: (transfer none): the registry, in a stable order.
 */
const FsimPolicyOps *const *fsim_policy_list(gsize *n);

/* Returns: (nullable) (transfer none): the policy named @name. */
const FsimPolicyOps *fsim_policy_lookup(const char *name);

/**
 * fsim_policy_new:
 * @name: a registered policy.
 * @device: borrowed; must outlive the policy.
 * @config: (nullable): knobs, in the group named after the policy.
 * @error: FSIM_ERROR_USAGE for an unknown policy or knob (the message lists the valid ones) or a
 *     bad value.
 *
 * Returns: (transfer full) (nullable): the policy; free with fsim_policy_free().
 */
FsimPolicy *fsim_policy_new(const char *name, FsimDevice *device, GKeyFile *config, GError **error);
void fsim_policy_free(FsimPolicy *policy);

/**
 * fsim_policy_pool_stats:
 *
 * Reserved memory per pool (see FsimPolicyOps.pool_stats).
 *
 * Returns: (transfer full) (nullable): an array of #FsimPoolStats, or %NULL when the policy has
 * no private pools or has seen none.
 */
GArray *fsim_policy_pool_stats(const FsimPolicy *policy);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimPolicy, fsim_policy_free)

/* TRUE when the policy named @name reads PYTORCH_CUDA_ALLOC_CONF (caching, expandable): other
 * policies make one run, with config "", whatever the configurations asked for. */
gboolean fsim_policy_takes_alloc_conf(const char *name);

/* TRUE when the policy named @name is offline: it needs the run's lifetimes (see plan()). */
gboolean fsim_policy_is_offline(const char *name);

/**
 * fsim_policy_check_config:
 *
 * Checks that every key of @ops's group in @config is one of its knobs.
 *
 * Returns: %FALSE with FSIM_ERROR_USAGE naming the unknown knob and the valid ones.
 */
gboolean fsim_policy_check_config(const FsimPolicyOps *ops, GKeyFile *config, GError **error);

/**
 * fsim_policy_select:
 * @names: (nullable): policy names, NULL-terminated, each stripped; empty ones are skipped.
 * @unique: drop a name given again.
 *
 * Returns: (transfer full) (nullable): the names (copies), in the order given, or every
 * registered policy when @names is NULL; NULL with %FSIM_ERROR_USAGE `unknown policy 'X' (valid:
 * ...)` at the first unknown name.  An empty result is the caller's to refuse.
 */
GPtrArray *fsim_policy_select(const char *const *names, gboolean unique, GError **error);

/**
 * fsim_policy_names:
 *
 * Returns: (transfer full): the registered names joined by ", ", for messages.
 */
char *fsim_policy_names(void);

/**
 * fsim_knob_get_size:
 * @ops: the policy: its name is the group of its knobs, and its knob table holds @key with the
 *     default (as text) used when @config lacks it.
 * @config: (nullable): the run's key file.
 * @key: one of the policy's knobs.
 * @out: (out): the value in bytes (fsim_parse_size() syntax).
 * @error: FSIM_ERROR_USAGE naming `group.key` for a bad value.
 */
gboolean fsim_knob_get_size(const FsimPolicyOps *ops, GKeyFile *config, const char *key,
                            uint64_t *out, GError **error);
/* The same for unsigned integers, doubles and booleans (`true/false/1/0/yes/no`). */
gboolean fsim_knob_get_u64(const FsimPolicyOps *ops, GKeyFile *config, const char *key,
                           uint64_t *out, GError **error);
gboolean fsim_knob_get_double(const FsimPolicyOps *ops, GKeyFile *config, const char *key,
                              double *out, GError **error);
gboolean fsim_knob_get_bool(const FsimPolicyOps *ops, GKeyFile *config, const char *key,
                            gboolean *out, GError **error);

G_END_DECLS
