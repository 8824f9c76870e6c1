/* SPDX-License-Identifier: MIT */
/*
 * The device layer every implementation shares (device.h): the wrappers through which policies
 * call a device, which count every call, charge the cost model, keep the reserved-bytes counter,
 * tell the observer and inject faults; the address hint of the validator; the fault settings.
 * The simulated device is device-sim.c, the presets and cost model device-spec.c.
 */
#include "fragsim/device.h"

#include <glib.h>

#include <string.h>

/* clang-format off */
static const char *const call_names[FSIM_CALL_COUNT] = {
    [FSIM_CALL_MEM_ALLOC] = "mem_alloc",
    [FSIM_CALL_MEM_FREE] = "mem_free",
    [FSIM_CALL_VA_RESERVE] = "va_reserve",
    [FSIM_CALL_VA_RELEASE] = "va_release",
    [FSIM_CALL_MAP] = "map",
    [FSIM_CALL_UNMAP] = "unmap",
};
/* clang-format on */

const char *
fsim_device_call_name(FsimDeviceCall call)
{
    return fsim_enum_name(call_names, FSIM_CALL_COUNT, (int)call);
}

/* TRUE when the injected faults say this attempt of @call fails. */
static gboolean
fault_hit(FsimDevice *device, FsimDeviceCall call)
{
    uint64_t attempt = device->attempts[call];

    if (device->seeding)
        return FALSE;
    if (device->faults.fail_at[call] != 0 && attempt == device->faults.fail_at[call])
        return TRUE;
    return device->faults.fail_from[call] != 0 && attempt >= device->faults.fail_from[call];
}

/* Count an attempt of @call (seeding calls are not attempts). */
static void
count_attempt(FsimDevice *device, FsimDeviceCall call)
{
    if (!device->seeding)
        device->attempts[call]++;
}

/* Count an attempt of @call; TRUE when the injected faults say it fails. */
static gboolean
attempt_fails(FsimDevice *device, FsimDeviceCall call)
{
    count_attempt(device, call);
    return fault_hit(device, call);
}

static uint64_t
cost_per_gib(uint64_t per_gib_ns, uint64_t size)
{
    /* size / GiB * per_gib without overflow for sizes up to 2^60 */
    return (uint64_t)((double)per_gib_ns * ((double)size / (double)FSIM_GiB));
}

/* Count, charge and report a successful call. */
static void
account(FsimDevice *device, FsimDeviceCall call, FsimAddr addr, uint64_t size, uint64_t handle_size)
{
    const FsimDeviceCosts *costs = &device->spec.costs;
    uint64_t handles = handle_size != 0 ? (size + handle_size - 1) / handle_size : 1;
    uint64_t cost = 0;

    switch (call) {
    case FSIM_CALL_MEM_ALLOC:
        fsim_counter_add(&device->reserved, (int64_t)fsim_device_round(device, size));
        cost = costs->malloc_ns + cost_per_gib(costs->malloc_per_gib_ns, size);
        break;
    case FSIM_CALL_MEM_FREE:
        fsim_counter_add(&device->reserved, -(int64_t)fsim_device_round(device, size));
        cost = costs->free_ns + costs->sync_ns + cost_per_gib(costs->free_per_gib_ns, size);
        break;
    case FSIM_CALL_VA_RESERVE:
    case FSIM_CALL_VA_RELEASE:
        cost = costs->reserve_ns;
        break;
    case FSIM_CALL_MAP:
        fsim_counter_add(&device->reserved, (int64_t)size);
        cost = costs->map_ns * handles + cost_per_gib(costs->map_per_gib_ns, size);
        break;
    case FSIM_CALL_UNMAP:
        fsim_counter_add(&device->reserved, -(int64_t)size);
        cost = costs->sync_ns + costs->unmap_ns * handles +
               cost_per_gib(costs->unmap_per_gib_ns, size);
        break;
    case FSIM_CALL_COUNT:
    default:
        g_assert_not_reached();
    }
    if (device->seeding)
        return;
    device->calls[call]++;
    device->modelled_time_ns += cost;
    if (device->observer != NULL)
        device->observer(device->observer_data, call, addr, size);
}

/* ---- the wrappers ------------------------------------------------------------------------- */

/* Remember a call of @size bytes refused for want of memory (see least_refused_demand). */
static void
note_refusal(FsimDevice *device, uint64_t size)
{
    uint64_t demand = (uint64_t)device->reserved.current + fsim_device_round(device, size);

    if (!device->seeding &&
        (device->least_refused_demand == 0 || demand < device->least_refused_demand))
        device->least_refused_demand = demand;
}

/*
 * Every wrapper is this one call: count the attempt, refuse it when a fault is injected (only a
 * call that takes memory or address space can fail), hand it to the implementation, remember a
 * refusal of pages (mem_alloc, map), and account for a success.  @addr is in for a release or a
 * map and out for mem_alloc and va_reserve; @arg is va_reserve's alignment or the handle size of
 * a map or unmap.  Inlined, so that each wrapper keeps only its own case.
 */
static inline G_ALWAYS_INLINE FsimStatus
device_call(FsimDevice *device, FsimDeviceCall call, FsimAddr *addr, uint64_t size, uint64_t arg)
{
    const FsimDeviceOps *ops = device->ops;
    FsimStatus status = FSIM_OK;
    uint64_t handle_size = 0;

    switch (call) {
    case FSIM_CALL_MEM_ALLOC:
    case FSIM_CALL_VA_RESERVE:
    case FSIM_CALL_MAP:
        if (attempt_fails(device, call))
            return FSIM_OOM;
        break;
    default:
        count_attempt(device, call);
        break;
    }
    switch (call) {
    case FSIM_CALL_MEM_ALLOC:
        status = ops->mem_alloc(device, size, addr);
        break;
    case FSIM_CALL_MEM_FREE:
        ops->mem_free(device, *addr, size);
        break;
    case FSIM_CALL_VA_RESERVE:
        status = ops->va_reserve(device, size, arg, addr);
        break;
    case FSIM_CALL_VA_RELEASE:
        ops->va_release(device, *addr, size);
        break;
    case FSIM_CALL_MAP:
        handle_size = arg;
        status = ops->map(device, *addr, size, handle_size);
        break;
    case FSIM_CALL_UNMAP:
        handle_size = arg;
        ops->unmap(device, *addr, size, handle_size);
        break;
    case FSIM_CALL_COUNT:
    default:
        g_assert_not_reached();
    }
    if (status != FSIM_OK) {
        if (call != FSIM_CALL_VA_RESERVE)
            note_refusal(device, size);
        return FSIM_OOM;
    }
    account(device, call, *addr, size, handle_size);
    return FSIM_OK;
}

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
FsimStatus
fsim_device_mem_alloc(FsimDevice *device, uint64_t size, FsimAddr *out)
{
    return device_call(device, FSIM_CALL_MEM_ALLOC, out, size, 0);
}

/* cudaFree of a range returned by fsim_device_mem_alloc() with the same @size. */
void
fsim_device_mem_free(FsimDevice *device, FsimAddr addr, uint64_t size)
{
    device_call(device, FSIM_CALL_MEM_FREE, &addr, size, 0);
}

/* cuMemAddressReserve: @size bytes of address space aligned to @alignment (a power of two, at
 * least the granularity).  No physical memory. */
FsimStatus
fsim_device_va_reserve(FsimDevice *device, uint64_t size, uint64_t alignment, FsimAddr *out)
{
    return device_call(device, FSIM_CALL_VA_RESERVE, out, size, alignment);
}

gboolean
fsim_arena_va_reserve(FsimArenaVa *arena, FsimDevice *device, const char *policy, GError **error)
{
    arena->reserved = fsim_device_va_reserve(device, arena->size, device->spec.granularity,
                                             &arena->base) == FSIM_OK;
    /* fault_hit() looks at the attempt just counted: was the refusal injected? */
    if (!arena->reserved && !fault_hit(device, FSIM_CALL_VA_RESERVE)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "%s: cannot reserve %" G_GUINT64_FORMAT " bytes of address space", policy,
                    arena->size);
        return FALSE;
    }
    arena->pending_oom = !arena->reserved;
    return TRUE;
}

FsimStatus
fsim_arena_va_ready(FsimArenaVa *arena, FsimDevice *device)
{
    if (arena->reserved)
        return FSIM_OK;
    if (arena->pending_oom) {
        arena->pending_oom = FALSE;
        return FSIM_OOM;
    }
    if (fsim_device_va_reserve(device, arena->size, device->spec.granularity, &arena->base) !=
        FSIM_OK)
        return FSIM_OOM;
    arena->reserved = TRUE;
    return FSIM_OK;
}

/* cuMemAddressFree of a whole reservation; every page in it must be unmapped first. */
void
fsim_device_va_release(FsimDevice *device, FsimAddr addr, uint64_t size)
{
    device_call(device, FSIM_CALL_VA_RELEASE, &addr, size, 0);
}

/* cuMemCreate + cuMemMap + cuMemSetAccess of [addr, addr+size) inside a reservation, in handles
 * of @handle_size bytes (a multiple of the granularity dividing @size).  All or nothing. */
FsimStatus
fsim_device_map(FsimDevice *device, FsimAddr addr, uint64_t size, uint64_t handle_size)
{
    return device_call(device, FSIM_CALL_MAP, &addr, size, handle_size);
}

/* cuMemUnmap + cuMemRelease of a mapped range (after a stream synchronisation). */
void
fsim_device_unmap(FsimDevice *device, FsimAddr addr, uint64_t size, uint64_t handle_size)
{
    device_call(device, FSIM_CALL_UNMAP, &addr, size, handle_size);
}

void
fsim_device_set_next_address(FsimDevice *device, FsimAddr addr)
{
    device->next_address = addr;
    device->has_next_address = TRUE;
}

void
fsim_device_clear_next_address(FsimDevice *device)
{
    device->has_next_address = FALSE;
}

void
fsim_device_free(FsimDevice *device)
{
    if (device == NULL)
        return;
    device->ops->destroy(device);
}

gboolean
fsim_device_faults_parse(GKeyFile *config, FsimDeviceFaults *faults, GError **error)
{
    g_auto(GStrv) keys = NULL;

    memset(faults, 0, sizeof(*faults));
    if (config == NULL || !g_key_file_has_group(config, "device"))
        return TRUE;
    keys = g_key_file_get_keys(config, "device", NULL, NULL);
    for (gsize k = 0; keys != NULL && keys[k] != NULL; k++) {
        gboolean found = FALSE;

        for (int c = 0; c < FSIM_CALL_COUNT && !found; c++) {
            g_autofree char *at = g_strdup_printf("fail_%s_at", call_names[c]);
            g_autofree char *from = g_strdup_printf("fail_%s_from", call_names[c]);
            uint64_t *field = NULL;

            if (strcmp(keys[k], at) == 0)
                field = &faults->fail_at[c];
            else if (strcmp(keys[k], from) == 0)
                field = &faults->fail_from[c];
            if (field != NULL) {
                g_autofree char *value = g_key_file_get_value(config, "device", keys[k], NULL);

                found = TRUE;
                if (value == NULL || !fsim_parse_u64(g_strstrip(value), field)) {
                    g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                                "device.%s: '%s' is not a call number", keys[k],
                                value ? value : "");
                    return FALSE;
                }
            }
        }
        if (!found) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "unknown device setting '%s' (valid: fail_<call>_at, fail_<call>_from "
                        "with <call> one of mem_alloc, va_reserve, map)",
                        keys[k]);
            return FALSE;
        }
    }
    return TRUE;
}
