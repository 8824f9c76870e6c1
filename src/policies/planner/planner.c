/* SPDX-License-Identifier: MIT */
/*
 * planner: an offline planner, the best contiguous placement found knowing every lifetime.
 *
 * Sources: TensorFlow Lite's arena planner and its greedy-by-size assignment
 * (tensorflow/lite/arena_planner.cc, simple_memory_arena.cc, delegates/gpu/common/
 * memory_management/greedy_by_size_assignment.cc; Pisarchyk & Lee, "Efficient Memory Management
 * for Deep Neural Net Inference", 2020) and XLA's heap simulator
 * (xla/service/heap_simulator/heap_simulator.cc, GlobalDecreasingSizeBestFitHeap with its spatial
 * and temporal orders; buffer_assignment.cc runs both and keeps the smaller heap).  Optimal
 * placement is NP-hard (dynamic storage allocation); like XLA this policy tries several orders
 * and keeps the best (plan.c):
 *
 *   time           allocation order, best fit: the placement `bestfit` makes online, so the
 *                  plan is never worse than bestfit on the same device;
 *   size           TFLite: allocations alive for the whole run first, then by size, descending,
 *                  then first use; each takes the smallest gap between placed allocations whose
 *                  lifetimes overlap its own (an exact fit ends the search), else goes above them;
 *   size-lifetime  XLA spatial: size descending, then longer lifetime, then allocation order;
 *   lifetime-size  XLA temporal: lifetime descending, then size.
 *
 * The plan with the fewest allocations left out (an allocation beyond the device is an OOM),
 * then the lowest high-water mark, is kept.  The engine hands the policy the run's lifetimes
 * before the first event (the `plan` operation; fragsim/plan.h says how they are counted), the
 * plan is checked by fsim_plan_check() (a broken plan is an error, never a silent result; the
 * time order's, whose places cannot overlap, only under --paranoid: plan.c says why), and
 * the run then replays it: each allocation is placed at its planned offset in one arena the size
 * of the device, whose pages are mapped as its top rises and never released, so every metric is
 * comparable with the online policies.  Its reserved memory is "the best contiguous plan found";
 * the lower bound (the peak of live bytes) is another figure, usually below it.
 *
 * Without lifetimes (the policy driven directly, or a run whose allocations differ from the
 * lifetimes it was given), an allocation that has no plan, or whose planned place is taken, is
 * placed by best fit in the same arena and counted in `unplanned_allocations`.
 *
 * Knobs:
 *   alignment   sizes and offsets are multiples of it (default 256 bytes, as bestfit)
 *   work_limit  the greedy orders give up after examining this many placed neighbours (default
 *               2^22); the time order always completes
 */
#include "planner.h"

#include <glib.h>

#include "../policies.h"

typedef struct {
    FsimPolicy base; /* must be first */
    uint64_t alignment;
    uint64_t work_limit;
    FsimArenaVa va; /* the arena's address space */
    uint64_t mapped_end;
    PlannerArena arena;
    PlannerPlan plan;
    gboolean has_plan;
    gsize next; /* the plan entry of the next alloc() */
    uint64_t planned;
    uint64_t unplanned;
} Planner;

static const FsimKnob planner_knobs[] = {
    {"alignment", "256", "block size and offset alignment in bytes (a power of two)"},
    {"work_limit", "4194304", "placed neighbours a greedy order may examine before giving up"},
    {NULL, NULL, NULL},
};

FSIM_POLICY_DEFINE_TYPE(Planner, planner)

static FsimPolicy *
planner_create(FsimDevice *device, GKeyFile *config, GError **error)
{
    g_autofree Planner *planner = planner_new(device);
    uint64_t alignment;
    /* bestfit's arena (best-fit.c) */
    uint64_t arena_size =
        fsim_chunk_arena_bytes(device->spec.capacity_bytes, device->spec.granularity);

    if (!fsim_knob_get_size(planner->base.ops, config, "alignment", &alignment, error) ||
        !fsim_knob_get_u64(planner->base.ops, config, "work_limit", &planner->work_limit, error))
        return NULL;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > 2 * FSIM_MiB) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "planner.alignment: %" G_GUINT64_FORMAT
                    " is not a power of two of at most 2MiB",
                    alignment);
        return NULL;
    }
    planner->va.size = arena_size;
    if (!fsim_arena_va_reserve(&planner->va, device, "planner", error))
        return NULL;
    planner->alignment = alignment;
    planner_arena_init(&planner->arena, arena_size);
    return &g_steal_pointer(&planner)->base;
}

static void
planner_destroy(FsimPolicy *self)
{
    Planner *planner = planner_from_policy(self);

    planner_arena_clear(&planner->arena);
    planner_plan_clear(&planner->plan);
    g_free(planner);
}

static gboolean
planner_plan(FsimPolicy *self, const FsimLifetimes *lifetimes, GError **error)
{
    Planner *planner = planner_from_policy(self);
    const FsimDeviceSpec *spec = &self->device->spec;

    planner_plan_clear(&planner->plan);
    planner_plan_build(lifetimes, planner->alignment, spec->capacity_bytes, spec->granularity,
                       planner->work_limit, &planner->plan);
    if (!planner_plan_check(lifetimes, &planner->plan, self->paranoid, error))
        return FALSE;
    /* The time order's plan is followed without an index of the free chunks (planner.h); a
     * paranoid run keeps it, for the checks. */
    if (planner->arena.unindexed)
        planner_arena_reindex(&planner->arena);
    if (planner->plan.order == PLANNER_ORDER_TIME && !self->paranoid)
        planner_arena_unindex(&planner->arena);
    planner->has_plan = TRUE;
    planner->next = 0;
    return TRUE;
}

/* Map the pages below @end that are not mapped yet. */
static gboolean
planner_map_to(Planner *planner, uint64_t end)
{
    return fsim_chunk_arena_map_to(planner->base.device, planner->va.base, &planner->mapped_end,
                                   end);
}

/* The chunk at the planned offset of the next allocation, if it has one and it is free. */
static PlannerChunk *
planner_take_planned(Planner *planner, uint64_t size, uint64_t rounded, gboolean *oom)
{
    const PlannerPlan *plan = &planner->plan;
    gsize k = planner->next;
    PlannerChunk *chunk;
    uint64_t offset;

    *oom = FALSE;
    if (!planner->has_plan || k >= plan->n)
        return NULL;
    planner->next++;
    offset = plan->offsets[k];
    if (plan->sizes[k] != rounded || size > rounded)
        return NULL;
    if (offset == FSIM_PLAN_UNPLACED) {
        *oom = TRUE; /* the plan found no room for it on this device */
        return NULL;
    }
    chunk = planner_arena_carve(&planner->arena, offset, rounded);
    if (chunk != NULL && !planner_map_to(planner, offset + rounded)) {
        planner_arena_release(&planner->arena, chunk);
        *oom = TRUE;
        return NULL;
    }
    return chunk;
}

static FsimStatus
planner_alloc(FsimPolicy *self, const FsimAllocRequest *req, FsimBlock *out)
{
    Planner *planner = planner_from_policy(self);
    uint64_t size = (req->size + planner->alignment - 1) & ~(planner->alignment - 1);
    gboolean oom;
    PlannerChunk *chunk;

    /* a reservation an injected fault refused: this allocation is its OOM, or it tries again;
     * either way it uses up its entry of the plan */
    if (fsim_arena_va_ready(&planner->va, self->device) != FSIM_OK) {
        if (planner->has_plan && planner->next < planner->plan.n)
            planner->next++;
        return FSIM_OOM;
    }
    chunk = planner_take_planned(planner, req->size, size, &oom);
    if (oom)
        return FSIM_OOM;
    if (chunk != NULL) {
        planner->planned++;
    } else {
        FsimSizeCursor cursor;

        chunk = planner_arena_find(&planner->arena, size, &cursor);
        if (chunk == NULL || !planner_map_to(planner, chunk->start + size))
            return FSIM_OOM;
        chunk = planner_arena_take(&planner->arena, chunk, &cursor, size);
        planner->unplanned++;
    }
    fsim_chunk_hand_out(chunk, planner->va.base, out);
    return FSIM_OK;
}

static void
planner_dealloc(FsimPolicy *self, const FsimBlock *block, FsimTime now)
{
    Planner *planner = planner_from_policy(self);

    (void)now;
    planner_arena_release(&planner->arena, fsim_chunk_handed_back(block));
}

static void
planner_get_stats(const FsimPolicy *self, FsimPolicyStats *out)
{
    const Planner *planner = (const Planner *)self;

    fsim_chunk_list_arena_stats(&planner->arena.chunks, planner->mapped_end,
                                planner->arena.used_bytes, out);
    if (planner->arena.unindexed)
        out->largest_free_block = planner_arena_largest_below(&planner->arena, planner->mapped_end);
    fsim_policy_stats_extra(out, "planned_allocations", planner->planned);
    fsim_policy_stats_extra(out, "unplanned_allocations", planner->unplanned);
    fsim_policy_stats_extra(out, "plan_bytes", planner->plan.arena_bytes);
}

static gboolean
planner_check(const FsimPolicy *self, GError **error)
{
    const Planner *planner = (const Planner *)self;

    if (!planner_arena_check(&planner->arena, error))
        return FALSE;
    if (planner->arena.used_bytes > planner->mapped_end) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "planner: %" G_GUINT64_FORMAT " bytes in use, %" G_GUINT64_FORMAT " mapped",
                    planner->arena.used_bytes, planner->mapped_end);
        return FALSE;
    }
    return fsim_policy_check_accounts(self, planner->mapped_end, NULL, 0, error);
}

/* One segment, the mapped part of the arena (as bestfit's); the planner never unmaps, so no free
 * chunk is releasable.  Chunks are cut at the mapped end. */
static void
planner_describe(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data)
{
    const Planner *planner = (const Planner *)self;

    fsim_chunk_list_describe_arena(planner->arena.first, planner->va.base, planner->mapped_end,
                                   self->device->spec.granularity, visitor, data);
}

const FsimPolicyOps fsim_policy_planner = {
    .name = "planner",
    .summary = "offline: the best contiguous plan found knowing every lifetime (XLA, TFLite)",
    .knobs = planner_knobs,
    .create = planner_create,
    .destroy = planner_destroy,
    .alloc = planner_alloc,
    .dealloc = planner_dealloc,
    .get_stats = planner_get_stats,
    .check = planner_check,
    .describe = planner_describe,
    .plan = planner_plan,
};
