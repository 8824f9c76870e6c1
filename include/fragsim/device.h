/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the device, the policies' upstream.
 *
 * A modelled GPU: usable capacity, physical memory in pages of `granularity` bytes (2 MiB), a
 * virtual address space, and a cost per driver call.  Policies obtain device memory only through
 * the wrappers below (fsim_device_mem_alloc() and friends, src/core/device.c), which count
 * every call, charge its modelled cost, keep the reserved-bytes counter and tell the observer, so
 * no policy can forget to.  There are two implementations of #FsimDeviceOps: the simulated device
 * (fsim_device_sim_new()) and, when built with CUDA, a real GPU.
 *
 * Two families of calls, as in CUDA:
 *   - mem_alloc / mem_free: cudaMalloc / cudaFree.  Address space and physical pages together;
 *     sizes are rounded up to the granularity for accounting; cudaFree synchronises the device.
 *   - va_reserve / va_release + map / unmap: the VMM API (cuMemAddressReserve, cuMemCreate +
 *     cuMemMap + cuMemSetAccess, cuMemUnmap + cuMemRelease), used by expandable and paged
 *     policies.  A reservation costs no physical memory; each mapped page does.
 *
 * Physical memory is fungible at page granularity (the driver maps any free pages), so a call
 * fails only when free pages run out: fragmentation lives in the allocator above.
 */
#pragma once

#include <glib.h>

#include "fragsim/types.h"

G_BEGIN_DECLS

typedef struct FsimDevice FsimDevice;
typedef struct FsimDeviceOps FsimDeviceOps;

/**
 * FsimDeviceCosts:
 *
 * The cost model, in nanoseconds.  The defaults (fsim_device_costs_default()) were measured on
 * an NVIDIA H200 with CUDA 13 by `fragsim cuda calibrate`, but for the synchronisation, an
 * estimate for a busy device (see docs/device-model.md); a calibration profile of another GPU
 * replaces them (`-d PROFILE`).  A call of @size bytes costs `base + per_gib * size / GiB`; map
 * and unmap pay their base per handle (page).
 */
typedef struct {
    uint64_t malloc_ns;         /* cudaMalloc, fixed part */
    uint64_t malloc_per_gib_ns; /* cudaMalloc, per GiB */
    uint64_t free_ns;           /* cudaFree, fixed part (without the sync) */
    uint64_t free_per_gib_ns;   /* cudaFree, per GiB */
    uint64_t sync_ns;           /* the device synchronisation cudaFree and unmap imply */
    uint64_t reserve_ns;        /* cuMemAddressReserve or cuMemAddressFree */
    uint64_t map_ns;            /* cuMemCreate + cuMemMap + cuMemSetAccess, per handle */
    uint64_t map_per_gib_ns;    /* per GiB mapped */
    uint64_t unmap_ns;          /* cuMemUnmap + cuMemRelease, per handle (sync charged once) */
    uint64_t unmap_per_gib_ns;  /* per GiB unmapped */
} FsimDeviceCosts;

/**
 * FsimDeviceSpec:
 * @name: preset name (`h100-80gb`) or a description of a custom size (`80GiB`).
 * @description: a human description (`NVIDIA H100 80GB HBM3`).
 * @total_bytes: memory of the card as sold.
 * @capacity_bytes: usable by the simulated process: total minus the CUDA context and driver
 *     reservations.  Allocations beyond it fail.
 * @granularity: physical page size, 2 MiB on current NVIDIA GPUs.
 * @costs: the cost model.
 */
typedef struct {
    char name[64];
    char description[96];
    uint64_t total_bytes;
    uint64_t capacity_bytes;
    uint64_t granularity;
    FsimDeviceCosts costs;
} FsimDeviceSpec;

/**
 * FsimDeviceCall:
 *
 * The driver calls the device counts and reports to its observer.
 */
typedef enum {
    FSIM_CALL_MEM_ALLOC = 0,
    FSIM_CALL_MEM_FREE,
    FSIM_CALL_VA_RESERVE,
    FSIM_CALL_VA_RELEASE,
    FSIM_CALL_MAP,
    FSIM_CALL_UNMAP,
    FSIM_CALL_COUNT,
} FsimDeviceCall;

const char *fsim_device_call_name(FsimDeviceCall call);

/**
 * FsimDeviceObserverFunc:
 * @data: the observer's data.
 * @call: which call succeeded.
 * @addr: start of the range.
 * @size: bytes as the policy passed them (not rounded).
 *
 * Called after each successful call (never for failed ones, never while seeding).
 */
typedef void (*FsimDeviceObserverFunc)(gpointer data, FsimDeviceCall call, FsimAddr addr,
                                       uint64_t size);

/**
 * FsimDeviceOps:
 *
 * An implementation of the device.  Every function receives sizes that the wrappers have already
 * checked (non-zero, below %FSIM_MAX_SIZE).  mem_alloc, va_reserve and map return %FSIM_OOM
 * without side effects when they cannot be satisfied.  mem_free, va_release and unmap receive
 * exactly a range obtained earlier; anything else is a bug of the caller, caught by assertions.
 * The table lives in static storage and is never modified.
 */
struct FsimDeviceOps {
    const char *name; /* "sim", "cuda" */
    FsimStatus (*mem_alloc)(FsimDevice *self, uint64_t size, FsimAddr *out);
    void (*mem_free)(FsimDevice *self, FsimAddr addr, uint64_t size);
    FsimStatus (*va_reserve)(FsimDevice *self, uint64_t size, uint64_t alignment, FsimAddr *out);
    void (*va_release)(FsimDevice *self, FsimAddr addr, uint64_t size);
    /* map [addr, addr+size) inside a reservation, in handles of @handle_size bytes */
    FsimStatus (*map)(FsimDevice *self, FsimAddr addr, uint64_t size, uint64_t handle_size);
    void (*unmap)(FsimDevice *self, FsimAddr addr, uint64_t size, uint64_t handle_size);
    void (*destroy)(FsimDevice *self);
};

/* Fault injection: fail the Nth call (1-based) of a kind, or every call from the Nth on. */
typedef struct {
    uint64_t fail_at[FSIM_CALL_COUNT];   /* 0 = never */
    uint64_t fail_from[FSIM_CALL_COUNT]; /* 0 = never */
} FsimDeviceFaults;

/**
 * FsimDevice:
 *
 * The base every implementation embeds first.  Fields other than @ops and @spec are maintained by
 * the wrappers; implementations only read them.
 *
 * @reserved: physical bytes held (cudaMalloc'd or mapped), rounded to the granularity.
 * @calls: successful calls per #FsimDeviceCall.
 * @attempts: attempted calls per #FsimDeviceCall, failed ones included.
 * @modelled_time_ns: the cost model's charge for all calls so far.
 * @seeding: while TRUE (the engine sets it while rebuilding a trace's initial state), calls
 *     change memory but are neither counted, nor charged, nor observed: they happened before the
 *     trace began.
 * @least_refused_demand: the smallest `reserved + size` (rounded to the granularity) of a
 *     mem_alloc or map the device refused, 0 when none was (injected faults and seeding aside).
 *     A replay on any capacity from its peak reserved up to this figure less one byte sees every
 *     call answered the same way; src/analysis/needed.c relies on it.
 */
struct FsimDevice {
    const FsimDeviceOps *ops;
    FsimDeviceSpec spec;
    FsimCounter reserved;
    uint64_t calls[FSIM_CALL_COUNT];
    uint64_t attempts[FSIM_CALL_COUNT];
    uint64_t modelled_time_ns;
    gboolean seeding;
    uint64_t least_refused_demand;
    FsimDeviceFaults faults;
    FsimDeviceObserverFunc observer;
    gpointer observer_data;
    /* one-shot address for the next mem_alloc or va_reserve (validation replays the recorded
     * driver choices); see fsim_device_set_next_address() */
    FsimAddr next_address;
    gboolean has_next_address;
};

/**
 * fsim_device_costs_default:
 *
 * Returns: the documented default cost model.
 */
FsimDeviceCosts fsim_device_costs_default(void);

/**
 * fsim_device_presets:
 * @n: (out): number of presets.
 *
 * Returns: (transfer none): the preset table (`t4-16gb` … `mi300x-192gb`), in static storage.
 */
const FsimDeviceSpec *fsim_device_presets(gsize *n);

/**
 * fsim_device_spec_parse:
 * @text: a preset name (`h100-80gb`), a size (`80GiB`, `24GB`, `25769803776`), or the path of a
 *     calibration profile written by `fragsim cuda calibrate` (a key file with a [device] group).
 * @out: (out): the spec.  For a size, capacity = total = the size.
 * @error: FSIM_ERROR_USAGE naming the valid presets when @text is none of these.
 *
 * Returns: %TRUE on success.
 */
gboolean fsim_device_spec_parse(const char *text, FsimDeviceSpec *out, GError **error);

/* The default device, `h100-80gb`. */
#define FSIM_DEVICE_DEFAULT "h100-80gb"

/**
 * fsim_device_sim_new:
 * @spec: the modelled GPU.
 * @config: (nullable): key file whose `[device]` group may set fault injection:
 *     `fail_<call>_at=N`, `fail_<call>_from=N` with <call> one of mem_alloc, mem_free,
 *     va_reserve, va_release, map, unmap (only the allocating calls can fail).
 * @error: FSIM_ERROR_USAGE for a bad key or value.
 *
 * Returns: (transfer full): a simulated device; free with fsim_device_free().
 */
FsimDevice *fsim_device_sim_new(const FsimDeviceSpec *spec, GKeyFile *config, GError **error);

/* Free a device (NULL is a no-op).  Every range must have been released first, or not: the
 * simulated device simply forgets them. */
void fsim_device_free(FsimDevice *device);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimDevice, fsim_device_free)

/* Parse the [device] fault-injection keys of @config into @faults. */
gboolean fsim_device_faults_parse(GKeyFile *config, FsimDeviceFaults *faults, GError **error);

/* Round @size up to the device granularity. */
static inline uint64_t
fsim_device_round(const FsimDevice *device, uint64_t size)
{
    uint64_t g = device->spec.granularity; /* a power of two: both devices check it */

    return (size + g - 1) & ~(g - 1);
}

/* Bytes of physical memory still free. */
static inline uint64_t
fsim_device_free_bytes(const FsimDevice *device)
{
    uint64_t used = (uint64_t)device->reserved.current;
    return used >= device->spec.capacity_bytes ? 0 : device->spec.capacity_bytes - used;
}

/**
 * fsim_device_set_next_address:
 *
 * The next successful mem_alloc or va_reserve returns @addr when the range starting there is free
 * (otherwise the device chooses as usual).  The validator uses it to replay the driver's recorded
 * choices; the hint is forgotten by fsim_device_clear_next_address() or when consumed.
 */
void fsim_device_set_next_address(FsimDevice *device, FsimAddr addr);
void fsim_device_clear_next_address(FsimDevice *device);

/**
 * fsim_device_mem_alloc:
 * @device: the device.
 * @size: bytes, > 0.
 * @out: (out): the address, aligned to the granularity.
 *
 * cudaMalloc.  Reserves fsim_device_round(@size) physical bytes.
 *
 * Returns: %FSIM_OK, or %FSIM_OOM when free pages run out or a fault was injected; then nothing
 * changed except the attempt counter.
 */
FsimStatus fsim_device_mem_alloc(FsimDevice *device, uint64_t size, FsimAddr *out);

/* cudaFree of a range returned by fsim_device_mem_alloc() with the same @size. */
void fsim_device_mem_free(FsimDevice *device, FsimAddr addr, uint64_t size);

/* cuMemAddressReserve: @size bytes of address space aligned to @alignment (a power of two, at
 * least the granularity).  No physical memory. */
FsimStatus fsim_device_va_reserve(FsimDevice *device, uint64_t size, uint64_t alignment,
                                  FsimAddr *out);

/**
 * FsimArenaVa:
 *
 * The one address-space reservation a policy makes when it is created (bestfit, async, planner).
 * A device too small for it is an error of the run; a reservation refused by an injected fault
 * (device.fail_va_reserve_at or _from) is not: like any refused driver call it ends as an OOM,
 * of the next allocation, after which the reservation is tried again at each allocation until
 * it succeeds.
 */
typedef struct {
    FsimAddr base;        /* valid once @reserved */
    uint64_t size;        /* bytes of address space */
    gboolean reserved;    /* the address space is held */
    gboolean pending_oom; /* an injected fault refused it: the next allocation is its OOM */
} FsimArenaVa;

/* Reserve @arena->size bytes for @policy (its name, for the message), aligned to the
 * granularity.  FALSE with @error set only when the device cannot hold them. */
gboolean fsim_arena_va_reserve(FsimArenaVa *arena, FsimDevice *device, const char *policy,
                               GError **error);

/* Before an allocation: FSIM_OK when the arena is reserved (reserving it again if a fault
 * refused it), FSIM_OOM when this allocation is the OOM of a refused reservation. */
FsimStatus fsim_arena_va_ready(FsimArenaVa *arena, FsimDevice *device);

/* cuMemAddressFree of a whole reservation; every page in it must be unmapped first. */
void fsim_device_va_release(FsimDevice *device, FsimAddr addr, uint64_t size);

/* cuMemCreate + cuMemMap + cuMemSetAccess of [addr, addr+size) inside a reservation, in handles
 * of @handle_size bytes (a multiple of the granularity dividing @size).  All or nothing. */
FsimStatus fsim_device_map(FsimDevice *device, FsimAddr addr, uint64_t size, uint64_t handle_size);

/* cuMemUnmap + cuMemRelease of a mapped range (after a stream synchronisation). */
void fsim_device_unmap(FsimDevice *device, FsimAddr addr, uint64_t size, uint64_t handle_size);
