/* SPDX-License-Identifier: MIT */
/*
 * The simulated device: an implementation of FsimDeviceOps over a simulated address space and a
 * page count (the wrappers that count and charge every call are device.c's, the presets and costs
 * device-spec.c's).
 *
 * Address space.  Device addresses start at 0x7f0000000000 (where CUDA puts them on x86-64
 * Linux) and are handed out at granularity alignment from a free list searched best-fit by
 * (size, address): like the driver, a freed range of the right size is reused first (the real
 * traces show 70-85% of new segments at a previously freed address).  PyTorch's policy never
 * depends on absolute addresses, only on order within a segment, so any deterministic choice is
 * faithful; the validator overrides it with the recorded addresses anyway.
 *
 * Physical memory is a page count: cudaMalloc takes fsim_device_round(size) bytes, map takes
 * exactly the mapped bytes (handles may be smaller than 2 MiB to model small-page systems).  A
 * call fails when the pages run out.  In paranoid builds the device also checks that frees and
 * unmaps name exactly what was allocated or mapped, the mem5.c idea: a policy that returns a
 * range twice is caught at once.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/device.h"

#include "addr-map.h"
#include "chunk-list.h"
#include "range-set.h"

/* ---- the simulated address space ----------------------------------------------------------- */

#define SIM_VA_BASE ((FsimAddr)0x7f0000000000)
#define SIM_VA_SIZE ((uint64_t)1 << 46) /* 64 TiB of address space */
/* Below the base: address space only a hint reaches (recorded traces put segments anywhere, e.g.
 * 0x602000000 with expandable segments).  One granule short of the base, so it never coalesces
 * with the main range and best fit keeps choosing the main range, the smaller one, first. */
#define SIM_VA_LOW ((FsimAddr)0x200000)

/* The address space is a chunk list (chunk-list.h) of two runs, the low range and the main one:
 * its free ranges indexed by (size, start) for best fit, and the ranges handed out found by
 * their start in @taken, so a range given back merges with its free neighbours through its
 * links. */
typedef struct {
    FsimDevice base;
    FsimChunkList ranges;
    FsimAddrMap taken; /* start -> FsimChunk* of each range handed out */
    /* paranoid bookkeeping: live cudaMalloc ranges and reservations (addr -> size) and mapped
     * pages */
    GHashTable *allocations;
    GHashTable *reservations;
    FsimRangeSet *mapped;
    gboolean paranoid;
} SimDevice;

/* Hand out [start, start+size) from the free range @range found at @cursor. */
static void
va_carve(SimDevice *sim, FsimChunk *range, const FsimSizeCursor *cursor, FsimAddr start,
         uint64_t size)
{
    FsimChunk *taken = fsim_chunk_list_take_at(&sim->ranges, range, cursor, start, size);

    fsim_addr_map_insert(&sim->taken, start, (uint64_t)(uintptr_t)taken);
}

/* The free range containing [start, start+size), and its @cursor; NULL if none.  A walk over the
 * ranges large enough: hints come from validation, once per segment, not per block. */
static FsimChunk *
free_range_containing(SimDevice *sim, FsimAddr start, uint64_t size, FsimSizeCursor *cursor)
{
    for (FsimChunk *range = fsim_chunk_list_best_fit(&sim->ranges, size, cursor); range != NULL;
         range = fsim_size_set_next(&sim->ranges.free, cursor)) {
        if (range->start <= start && start + size <= range->start + range->size)
            return range;
    }
    return NULL;
}

static gboolean
va_take(SimDevice *sim, uint64_t size, uint64_t alignment, FsimAddr *out)
{
    FsimDevice *device = &sim->base;
    FsimSizeCursor cursor;

    if (device->has_next_address) {
        FsimAddr want = device->next_address;
        FsimChunk *range;

        device->has_next_address = FALSE;
        range = free_range_containing(sim, want, size, &cursor);
        if (range != NULL) {
            va_carve(sim, range, &cursor, want, size);
            *out = want;
            return TRUE;
        }
        g_debug("device: hinted address 0x%" G_GINT64_MODIFIER "x is not free", want);
    }
    /* Best fit by (size, address), skipping ranges too small once aligned. */
    for (FsimChunk *range = fsim_chunk_list_best_fit(&sim->ranges, size, &cursor); range != NULL;
         range = fsim_size_set_next(&sim->ranges.free, &cursor)) {
        FsimAddr start = (range->start + alignment - 1) & ~(alignment - 1);

        if (start - range->start + size <= range->size) {
            va_carve(sim, range, &cursor, start, size);
            *out = start;
            return TRUE;
        }
    }
    return FALSE;
}

/* Give [start, start+size), handed out, back: merged with the free ranges beside it. */
static void
va_give_back(SimDevice *sim, FsimAddr start, uint64_t size)
{
    FsimAddrSlot *slot = fsim_addr_map_lookup(&sim->taken, start);
    FsimChunk *range;

    /* a range given back twice: paranoid builds catch it (sim_untrack) before this */
    g_assert(slot != NULL);
    range = (FsimChunk *)(uintptr_t)slot->value;
    g_assert(range->size == size);
    fsim_addr_map_remove(&sim->taken, slot);
    fsim_chunk_list_release(&sim->ranges, range);
}

/* A policy broke the device contract: a bug, reported loudly in paranoid builds. */
#define sim_bug(...)             \
    do {                         \
        g_critical(__VA_ARGS__); \
        g_assert_not_reached();  \
    } while (0)

static SimDevice *
sim_from_device(FsimDevice *device)
{
    return (SimDevice *)device;
}

/* Paranoid builds remember each range handed out (@table: address -> rounded size)... */
static void
sim_track(SimDevice *sim, GHashTable *table, FsimAddr addr, uint64_t rounded)
{
    if (sim->paranoid)
        g_hash_table_insert(table, g_memdup2(&addr, sizeof(addr)), GSIZE_TO_POINTER(rounded));
}

/* ... and check that one given back was handed out with that size, forgetting it.  TRUE when
 * not paranoid. */
static gboolean
sim_untrack(SimDevice *sim, GHashTable *table, FsimAddr addr, uint64_t rounded)
{
    gpointer value = NULL;

    if (!sim->paranoid)
        return TRUE;
    if (!g_hash_table_lookup_extended(table, &addr, NULL, &value) ||
        GPOINTER_TO_SIZE(value) != rounded)
        return FALSE;
    g_hash_table_remove(table, &addr);
    return TRUE;
}

/* Hand out @rounded bytes at @alignment, remembered in @table (paranoid builds). */
static FsimStatus
sim_take(SimDevice *sim, GHashTable *table, uint64_t rounded, uint64_t alignment, FsimAddr *out)
{
    if (!va_take(sim, rounded, alignment, out))
        return FSIM_OOM;
    sim_track(sim, table, *out, rounded);
    return FSIM_OK;
}

/* Take back [addr, addr + rounded), which @giver handed out and @table remembers (paranoid
 * builds check that it did). */
static void
sim_give_back(SimDevice *sim, GHashTable *table, FsimAddr addr, uint64_t rounded, const char *call,
              const char *giver)
{
    if (!sim_untrack(sim, table, addr, rounded))
        sim_bug("device: %s of 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT
                " bytes), which %s did not return",
                call, addr, rounded, giver);
    va_give_back(sim, addr, rounded);
}

static FsimStatus
sim_mem_alloc(FsimDevice *device, uint64_t size, FsimAddr *out)
{
    SimDevice *sim = sim_from_device(device);
    uint64_t rounded = fsim_device_round(device, size);

    if (rounded > fsim_device_free_bytes(device))
        return FSIM_OOM;
    return sim_take(sim, sim->allocations, rounded, device->spec.granularity, out);
}

static void
sim_mem_free(FsimDevice *device, FsimAddr addr, uint64_t size)
{
    SimDevice *sim = sim_from_device(device);

    sim_give_back(sim, sim->allocations, addr, fsim_device_round(device, size), "mem_free",
                  "mem_alloc");
}

static FsimStatus
sim_va_reserve(FsimDevice *device, uint64_t size, uint64_t alignment, FsimAddr *out)
{
    SimDevice *sim = sim_from_device(device);
    uint64_t rounded = fsim_device_round(device, size);

    if (alignment < device->spec.granularity)
        alignment = device->spec.granularity;
    g_return_val_if_fail((alignment & (alignment - 1)) == 0, FSIM_OOM);
    return sim_take(sim, sim->reservations, rounded, alignment, out);
}

static void
sim_va_release(FsimDevice *device, FsimAddr addr, uint64_t size)
{
    SimDevice *sim = sim_from_device(device);
    uint64_t rounded = fsim_device_round(device, size);

    if (sim->paranoid && fsim_range_set_overlaps(sim->mapped, addr, addr + rounded))
        sim_bug("device: va_release of 0x%" G_GINT64_MODIFIER "x with pages still mapped", addr);
    sim_give_back(sim, sim->reservations, addr, rounded, "va_release", "va_reserve");
}

static FsimStatus
sim_map(FsimDevice *device, FsimAddr addr, uint64_t size, uint64_t handle_size)
{
    SimDevice *sim = sim_from_device(device);

    g_return_val_if_fail(handle_size != 0 && size % handle_size == 0, FSIM_OOM);
    if (size > fsim_device_free_bytes(device))
        return FSIM_OOM;
    if (sim->paranoid) {
        if (fsim_range_set_overlaps(sim->mapped, addr, addr + size))
            sim_bug("device: map of 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT
                    " bytes) overlaps mapped pages",
                    addr, size);
        fsim_range_set_add(sim->mapped, addr, addr + size);
    }
    return FSIM_OK;
}

static void
sim_unmap(FsimDevice *device, FsimAddr addr, uint64_t size, uint64_t handle_size)
{
    SimDevice *sim = sim_from_device(device);

    (void)handle_size;
    if (sim->paranoid) {
        if (!fsim_range_set_covers(sim->mapped, addr, addr + size))
            sim_bug("device: unmap of 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT
                    " bytes), which is not mapped",
                    addr, size);
        fsim_range_set_remove(sim->mapped, addr, addr + size);
    }
}

static void
sim_destroy(FsimDevice *device)
{
    SimDevice *sim = sim_from_device(device);

    fsim_chunk_list_clear(&sim->ranges);
    fsim_addr_map_clear(&sim->taken);
    g_clear_pointer(&sim->allocations, g_hash_table_unref);
    g_clear_pointer(&sim->reservations, g_hash_table_unref);
    g_clear_pointer(&sim->mapped, fsim_range_set_free);
    g_free(sim);
}

static const FsimDeviceOps sim_ops = {
    .name = "sim",
    .mem_alloc = sim_mem_alloc,
    .mem_free = sim_mem_free,
    .va_reserve = sim_va_reserve,
    .va_release = sim_va_release,
    .map = sim_map,
    .unmap = sim_unmap,
    .destroy = sim_destroy,
};

FsimDevice *
fsim_device_sim_new(const FsimDeviceSpec *spec, GKeyFile *config, GError **error)
{
    SimDevice *sim;
    FsimDeviceFaults faults;

    g_return_val_if_fail(spec != NULL, NULL);
    g_return_val_if_fail(
        spec->granularity != 0 && (spec->granularity & (spec->granularity - 1)) == 0, NULL);
    if (!fsim_device_faults_parse(config, &faults, error))
        return NULL;
    sim = g_new0(SimDevice, 1);
    sim->base.ops = &sim_ops;
    sim->base.spec = *spec;
    sim->base.faults = faults;
    fsim_chunk_list_init(&sim->ranges, sizeof(FsimChunk));
    fsim_addr_map_init(&sim->taken, 0);
    fsim_chunk_list_add_run(&sim->ranges, SIM_VA_BASE, SIM_VA_SIZE);
    fsim_chunk_list_add_run(&sim->ranges, SIM_VA_LOW, SIM_VA_BASE - spec->granularity - SIM_VA_LOW);
#ifdef FSIM_PARANOID
    sim->paranoid = TRUE;
#endif
    if (sim->paranoid) {
        sim->allocations = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
        sim->reservations = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
        sim->mapped = fsim_range_set_new();
    }
    return &sim->base;
}
