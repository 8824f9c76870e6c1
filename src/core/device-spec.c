/* SPDX-License-Identifier: MIT */
/*
 * Device specifications: the presets of common GPUs, the default cost model, calibration
 * profiles written by `fragsim cuda calibrate`, and the parser of `--device` (a preset, a size,
 * or a profile).
 */
#include <glib.h>

#include <string.h>

#include "fragsim/device.h"

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
