/* SPDX-License-Identifier: MIT */
/*
 * The simulated device: presets, the cost model, the accounting wrappers' out-of-line half, fault
 * injection, and the simulated address space.
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

#include "range-set.h"

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
    return (unsigned)call < FSIM_CALL_COUNT ? call_names[call] : "?";
}

/*
 * Default costs, measured by `fragsim cuda calibrate` on an NVIDIA H200 (driver and runtime 13.0,
 * 2026-11-29; least-squares fits over 2 MiB to 4 GiB, docs/device-model.md): cudaMalloc 60 us +
 * 154 us/GiB, cudaFree 46 us + 688 us/GiB, address reserve/free 2 us, cuMemCreate + cuMemMap +
 * cuMemSetAccess 52 us per handle + 69 us/GiB, cuMemUnmap + cuMemRelease 23 us per handle +
 * 727 us/GiB.  The synchronisation cudaFree and unmap imply costs under 1 us on an idle device but
 * means waiting for queued kernels in a training loop: 100 us is an estimate of that, not a
 * measurement.
 */
FsimDeviceCosts
fsim_device_costs_default(void)
{
    FsimDeviceCosts costs = {
        .malloc_ns = 60000,
        .malloc_per_gib_ns = 154000,
        .free_ns = 46000,
        .free_per_gib_ns = 688000,
        .sync_ns = 100000,
        .reserve_ns = 2000,
        .map_ns = 52000,
        .map_per_gib_ns = 69000,
        .unmap_ns = 23000,
        .unmap_per_gib_ns = 727000,
    };
    return costs;
}

/* Usable capacity = memory as sold minus what the CUDA context and driver keep (about 500 MiB
 * on recent data-centre parts, as `cudaMemGetInfo` right after context creation shows). */
#define PRESET(n, d, total_, context)                                       \
    {                                                                       \
        .name = n, .description = d, .total_bytes = (total_),               \
        .capacity_bytes = (total_) - (context), .granularity = 2 * FSIM_MiB \
    }

static FsimDeviceSpec presets[] = {
    PRESET("t4-16gb", "NVIDIA T4 16GB", 15360 * FSIM_MiB, 400 * FSIM_MiB),
    PRESET("l4-24gb", "NVIDIA L4 24GB", 23034 * FSIM_MiB, 450 * FSIM_MiB),
    PRESET("rtx4090-24gb", "NVIDIA GeForce RTX 4090 24GB", 24564 * FSIM_MiB, 500 * FSIM_MiB),
    PRESET("a100-40gb", "NVIDIA A100 40GB", 40960 * FSIM_MiB, 500 * FSIM_MiB),
    PRESET("a100-80gb", "NVIDIA A100 80GB", 81920 * FSIM_MiB, 500 * FSIM_MiB),
    PRESET("h100-80gb", "NVIDIA H100 80GB HBM3", 81559 * FSIM_MiB, 530 * FSIM_MiB),
    PRESET("h200-141gb", "NVIDIA H200 141GB HBM3e", 143771 * FSIM_MiB, 530 * FSIM_MiB),
    PRESET("b200-192gb", "NVIDIA B200 192GB HBM3e", 183359 * FSIM_MiB, 600 * FSIM_MiB),
    PRESET("mi300x-192gb", "AMD Instinct MI300X 192GB", 196592 * FSIM_MiB, 600 * FSIM_MiB),
};

static void
presets_init_costs(void)
{
    static gsize initialised = 0;

    if (g_once_init_enter(&initialised)) {
        for (gsize i = 0; i < G_N_ELEMENTS(presets); i++)
            presets[i].costs = fsim_device_costs_default();
        g_once_init_leave(&initialised, 1);
    }
}

const FsimDeviceSpec *
fsim_device_presets(gsize *n)
{
    presets_init_costs();
    *n = G_N_ELEMENTS(presets);
    return presets;
}

/* A calibration profile: a key file with a [device] group (name, description, total_bytes,
 * capacity_bytes, granularity) and a [costs] group with the FsimDeviceCosts fields. */
static gboolean
spec_load_profile(const char *path, FsimDeviceSpec *out, GError **error)
{
    g_autoptr(GKeyFile) key_file = g_key_file_new();
    g_autoptr(GError) local_error = NULL;
    g_autofree char *name = NULL;
    g_autofree char *description = NULL;
    struct {
        const char *key;
        uint64_t *field;
    } costs[] = {
        {"malloc_ns", &out->costs.malloc_ns}, {"malloc_per_gib_ns", &out->costs.malloc_per_gib_ns},
        {"free_ns", &out->costs.free_ns},     {"free_per_gib_ns", &out->costs.free_per_gib_ns},
        {"sync_ns", &out->costs.sync_ns},     {"reserve_ns", &out->costs.reserve_ns},
        {"map_ns", &out->costs.map_ns},       {"map_per_gib_ns", &out->costs.map_per_gib_ns},
        {"unmap_ns", &out->costs.unmap_ns},   {"unmap_per_gib_ns", &out->costs.unmap_per_gib_ns},
    };

    memset(out, 0, sizeof(*out));
    out->costs = fsim_device_costs_default();
    if (!g_key_file_load_from_file(key_file, path, G_KEY_FILE_NONE, &local_error)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s: not a device profile: %s", path,
                    local_error->message);
        return FALSE;
    }
    name = g_key_file_get_string(key_file, "device", "name", NULL);
    description = g_key_file_get_string(key_file, "device", "description", NULL);
    out->total_bytes = g_key_file_get_uint64(key_file, "device", "total_bytes", NULL);
    out->capacity_bytes = g_key_file_get_uint64(key_file, "device", "capacity_bytes", NULL);
    out->granularity = g_key_file_get_uint64(key_file, "device", "granularity", NULL);
    if (name == NULL || out->capacity_bytes == 0 || out->capacity_bytes > FSIM_MAX_SIZE ||
        out->granularity == 0 || (out->granularity & (out->granularity - 1)) != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "%s: a device profile needs [device] name, capacity_bytes and a power-of-two "
                    "granularity",
                    path);
        return FALSE;
    }
    if (out->total_bytes < out->capacity_bytes)
        out->total_bytes = out->capacity_bytes;
    g_strlcpy(out->name, name, sizeof(out->name));
    g_strlcpy(out->description, description != NULL ? description : name, sizeof(out->description));
    for (gsize i = 0; i < G_N_ELEMENTS(costs); i++) {
        if (g_key_file_has_key(key_file, "costs", costs[i].key, NULL))
            *costs[i].field = g_key_file_get_uint64(key_file, "costs", costs[i].key, NULL);
    }
    return TRUE;
}

gboolean
fsim_device_spec_parse(const char *text, FsimDeviceSpec *out, GError **error)
{
    gsize n;
    const FsimDeviceSpec *table = fsim_device_presets(&n);
    uint64_t bytes;
    g_autoptr(GString) names = g_string_new(NULL);

    g_return_val_if_fail(text != NULL, FALSE);
    for (gsize i = 0; i < n; i++) {
        if (g_ascii_strcasecmp(text, table[i].name) == 0) {
            *out = table[i];
            return TRUE;
        }
    }
    if (fsim_parse_size(text, &bytes, NULL)) {
        if (bytes < 2 * FSIM_MiB || bytes > FSIM_MAX_SIZE) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "device size '%s' is out of range (2 MiB to 2^60 bytes)", text);
            return FALSE;
        }
        memset(out, 0, sizeof(*out));
        g_snprintf(out->name, sizeof(out->name), "%s", text);
        g_snprintf(out->description, sizeof(out->description), "custom device of %s", text);
        out->total_bytes = bytes;
        out->capacity_bytes = bytes;
        out->granularity = 2 * FSIM_MiB;
        out->costs = fsim_device_costs_default();
        return TRUE;
    }
    if (g_file_test(text, G_FILE_TEST_IS_REGULAR))
        return spec_load_profile(text, out, error);
    for (gsize i = 0; i < n; i++)
        g_string_append_printf(names, "%s%s", i ? ", " : "", table[i].name);
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                "unknown device '%s': use a preset (%s), a size such as 80GiB or 24GB, or a "
                "profile written by 'fragsim cuda calibrate'",
                text, names->str);
    return FALSE;
}

/* ---- accounting (the out-of-line half of the inline wrappers) ------------------------------ */

gboolean
fsim_device_fault_hit(FsimDevice *device, FsimDeviceCall call)
{
    uint64_t attempt = device->attempts[call];

    if (device->seeding)
        return FALSE;
    if (device->faults.fail_at[call] != 0 && attempt == device->faults.fail_at[call])
        return TRUE;
    return device->faults.fail_from[call] != 0 && attempt >= device->faults.fail_from[call];
}

static uint64_t
cost_per_gib(uint64_t per_gib_ns, uint64_t size)
{
    /* size / GiB * per_gib without overflow for sizes up to 2^60 */
    return (uint64_t)((double)per_gib_ns * ((double)size / (double)FSIM_GiB));
}

void
fsim_device_account(FsimDevice *device, FsimDeviceCall call, FsimAddr addr, uint64_t size,
                    uint64_t handle_size)
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

/* ---- the simulated address space ----------------------------------------------------------- */

#define SIM_VA_BASE ((FsimAddr)0x7f0000000000)
#define SIM_VA_SIZE ((uint64_t)1 << 46) /* 64 TiB of address space */
/* Below the base: address space only a hint reaches (recorded traces put segments anywhere, e.g.
 * 0x602000000 with expandable segments).  One granule short of the base, so it never coalesces
 * with the main range and best fit keeps choosing the main range, the smaller one, first. */
#define SIM_VA_LOW ((FsimAddr)0x200000)

typedef struct {
    FsimAddr start;
    uint64_t size;
} FreeRange;

typedef struct {
    FsimDevice base;
    GTree *by_addr; /* FreeRange* -> FreeRange*, ordered by start */
    GTree *by_size; /* FreeRange* -> FreeRange*, ordered by (size, start) */
    /* paranoid bookkeeping: live cudaMalloc ranges and reservations (addr -> size) and mapped
     * pages */
    GHashTable *allocations;
    GHashTable *reservations;
    FsimRangeSet *mapped;
    gboolean paranoid;
} SimDevice;

static gint
range_by_addr(gconstpointer a, gconstpointer b, gpointer data)
{
    const FreeRange *x = a;
    const FreeRange *y = b;

    (void)data;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

static gint
range_by_size(gconstpointer a, gconstpointer b, gpointer data)
{
    const FreeRange *x = a;
    const FreeRange *y = b;

    (void)data;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start ? 1 : 0;
}

static void
free_range_insert(SimDevice *sim, FsimAddr start, uint64_t size)
{
    FreeRange *range = g_new(FreeRange, 1);

    range->start = start;
    range->size = size;
    g_tree_insert(sim->by_addr, range, range);
    g_tree_insert(sim->by_size, range, range);
}

static void
free_range_remove(SimDevice *sim, FreeRange *range)
{
    g_tree_remove(sim->by_size, range);
    g_tree_remove(sim->by_addr, range); /* frees it */
}

/* Take [start, start+size) out of the free range @range that contains it. */
static void
free_range_carve(SimDevice *sim, FreeRange *range, FsimAddr start, uint64_t size)
{
    FsimAddr range_start = range->start;
    FsimAddr range_end = range->start + range->size;

    free_range_remove(sim, range);
    if (start > range_start)
        free_range_insert(sim, range_start, start - range_start);
    if (start + size < range_end)
        free_range_insert(sim, start + size, range_end - (start + size));
}

/* The free range containing [start, start+size), or NULL. */
static FreeRange *
free_range_containing(SimDevice *sim, FsimAddr start, uint64_t size)
{
    FreeRange probe = {start, 0};
    GTreeNode *node = g_tree_upper_bound(sim->by_addr, &probe);
    FreeRange *range;

    node = node == NULL ? g_tree_node_last(sim->by_addr) : g_tree_node_previous(node);
    if (node == NULL)
        return NULL;
    range = g_tree_node_key(node);
    if (range->start <= start && start + size <= range->start + range->size)
        return range;
    return NULL;
}

static gboolean
va_take(SimDevice *sim, uint64_t size, uint64_t alignment, FsimAddr *out)
{
    FsimDevice *device = &sim->base;
    FreeRange probe = {0, size};
    GTreeNode *node;

    if (device->has_next_address) {
        FsimAddr want = device->next_address;
        FreeRange *range = free_range_containing(sim, want, size);

        device->has_next_address = FALSE;
        if (range != NULL) {
            free_range_carve(sim, range, want, size);
            *out = want;
            return TRUE;
        }
        g_debug("device: hinted address 0x%" G_GINT64_MODIFIER "x is not free", want);
    }
    /* Best fit by (size, address), skipping ranges too small once aligned. */
    for (node = g_tree_lower_bound(sim->by_size, &probe); node != NULL;
         node = g_tree_node_next(node)) {
        FreeRange *range = g_tree_node_key(node);
        FsimAddr start = (range->start + alignment - 1) & ~(alignment - 1);

        if (start - range->start + size <= range->size) {
            free_range_carve(sim, range, start, size);
            *out = start;
            return TRUE;
        }
    }
    return FALSE;
}

static void
va_give_back(SimDevice *sim, FsimAddr start, uint64_t size)
{
    FreeRange probe = {start, 0};
    GTreeNode *next_node = g_tree_lower_bound(sim->by_addr, &probe);
    GTreeNode *prev_node =
        next_node != NULL ? g_tree_node_previous(next_node) : g_tree_node_last(sim->by_addr);
    FsimAddr end = start + size;

    if (prev_node != NULL) {
        FreeRange *prev = g_tree_node_key(prev_node);

        g_assert(prev->start + prev->size <= start);
        if (prev->start + prev->size == start) {
            start = prev->start;
            free_range_remove(sim, prev);
        }
    }
    if (next_node != NULL) {
        FreeRange *next = g_tree_node_key(next_node);

        g_assert(next->start >= end);
        if (next->start == end) {
            end = next->start + next->size;
            free_range_remove(sim, next);
        }
    }
    free_range_insert(sim, start, end - start);
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

static FsimStatus
sim_mem_alloc(FsimDevice *device, uint64_t size, FsimAddr *out)
{
    SimDevice *sim = sim_from_device(device);
    uint64_t rounded = fsim_device_round(device, size);

    if (rounded > fsim_device_free_bytes(device))
        return FSIM_OOM;
    if (!va_take(sim, rounded, device->spec.granularity, out))
        return FSIM_OOM;
    if (sim->paranoid)
        g_hash_table_insert(sim->allocations, g_memdup2(out, sizeof(*out)),
                            GSIZE_TO_POINTER(rounded));
    return FSIM_OK;
}

static void
sim_mem_free(FsimDevice *device, FsimAddr addr, uint64_t size)
{
    SimDevice *sim = sim_from_device(device);
    uint64_t rounded = fsim_device_round(device, size);

    if (sim->paranoid) {
        gpointer value = NULL;

        if (!g_hash_table_lookup_extended(sim->allocations, &addr, NULL, &value) ||
            GPOINTER_TO_SIZE(value) != rounded)
            sim_bug("device: mem_free of 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT
                    " bytes), which mem_alloc did not return",
                    addr, size);
        g_hash_table_remove(sim->allocations, &addr);
    }
    va_give_back(sim, addr, rounded);
}

static FsimStatus
sim_va_reserve(FsimDevice *device, uint64_t size, uint64_t alignment, FsimAddr *out)
{
    SimDevice *sim = sim_from_device(device);
    uint64_t rounded = fsim_device_round(device, size);

    if (alignment < device->spec.granularity)
        alignment = device->spec.granularity;
    g_return_val_if_fail((alignment & (alignment - 1)) == 0, FSIM_OOM);
    if (!va_take(sim, rounded, alignment, out))
        return FSIM_OOM;
    if (sim->paranoid)
        g_hash_table_insert(sim->reservations, g_memdup2(out, sizeof(*out)),
                            GSIZE_TO_POINTER(rounded));
    return FSIM_OK;
}

static void
sim_va_release(FsimDevice *device, FsimAddr addr, uint64_t size)
{
    SimDevice *sim = sim_from_device(device);
    uint64_t rounded = fsim_device_round(device, size);

    if (sim->paranoid) {
        gpointer value = NULL;

        if (!g_hash_table_lookup_extended(sim->reservations, &addr, NULL, &value) ||
            GPOINTER_TO_SIZE(value) != rounded)
            sim_bug("device: va_release of 0x%" G_GINT64_MODIFIER "x, which was not reserved",
                    addr);
        if (fsim_range_set_overlaps(sim->mapped, addr, addr + rounded))
            sim_bug("device: va_release of 0x%" G_GINT64_MODIFIER "x with pages still mapped",
                    addr);
        g_hash_table_remove(sim->reservations, &addr);
    }
    va_give_back(sim, addr, rounded);
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

    g_tree_destroy(sim->by_size);
    g_tree_destroy(sim->by_addr);
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
    sim->by_addr = g_tree_new_full(range_by_addr, NULL, g_free, NULL);
    sim->by_size = g_tree_new_full(range_by_size, NULL, NULL, NULL);
    free_range_insert(sim, SIM_VA_BASE, SIM_VA_SIZE);
    free_range_insert(sim, SIM_VA_LOW, SIM_VA_BASE - spec->granularity - SIM_VA_LOW);
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
