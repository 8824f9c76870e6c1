/* SPDX-License-Identifier: MIT */
/*
 * The fake GPU of the CUDA backend's tests; see cuda-fake.h.
 */
#include "cuda-fake.h"

#include <glib.h>

#include <string.h>

FakeDriver *
fake_from(FsimCudaDriver *driver)
{
    return (FakeDriver *)driver;
}

static GHashTable *
u64_table(void)
{
    return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
}

static void
u64_insert(GHashTable *table, uint64_t key, uint64_t value)
{
    g_hash_table_insert(table, g_memdup2(&key, sizeof(key)), g_memdup2(&value, sizeof(value)));
}

static gboolean
u64_lookup(GHashTable *table, uint64_t key, uint64_t *value)
{
    uint64_t *found = g_hash_table_lookup(table, &key);

    if (found == NULL)
        return FALSE;
    if (value != NULL)
        *value = *found;
    return TRUE;
}

static uint64_t
round_2mib(uint64_t size)
{
    return (size + 2 * FSIM_MiB - 1) / (2 * FSIM_MiB) * (2 * FSIM_MiB);
}

/* Charge @op on @size and decide whether it fails by injection. */
static gboolean
fake_call(FakeDriver *fake, FakeOp op, uint64_t size, const char *name, GError **error)
{
    const FakeCost *cost = &fake->cost[op];

    fake->calls[op]++;
    fake->clock_ns += cost->base_ns + cost->per_gib_ns * (size >> 20) / 1024;
    if ((int)op == fake->fail_op && fake->calls[op] == fake->fail_at) {
        g_set_error(error, FSIM_CUDA_ERROR, fake->fail_code, "%s: injected failure", name);
        return FALSE;
    }
    return TRUE;
}

static gboolean
fake_take(FakeDriver *fake, uint64_t bytes, const char *name, GError **error)
{
    if (fake->used + bytes > fake->capacity) {
        g_set_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory",
                    name);
        return FALSE;
    }
    fake->used += bytes;
    return TRUE;
}

static uint64_t
fake_now_ns(FsimCudaDriver *driver)
{
    return fake_from(driver)->clock_ns;
}

static gboolean
fake_mem_get_info(FsimCudaDriver *driver, uint64_t *free_bytes, uint64_t *total_bytes,
                  GError **error)
{
    FakeDriver *fake = fake_from(driver);

    (void)error;
    *total_bytes = fake->capacity + fake->context_bytes;
    *free_bytes = fake->capacity - fake->used;
    return TRUE;
}

static gboolean
fake_synchronize(FsimCudaDriver *driver, GError **error)
{
    return fake_call(fake_from(driver), OP_SYNC, 0, "cudaDeviceSynchronize", error);
}

static gboolean
fake_mem_alloc(FsimCudaDriver *driver, uint64_t size, FsimAddr *out, GError **error)
{
    FakeDriver *fake = fake_from(driver);
    uint64_t rounded = round_2mib(size) + fake->malloc_overhead;

    if (!fake_call(fake, OP_MEM_ALLOC, size, "cudaMalloc", error) ||
        !fake_take(fake, rounded, "cudaMalloc", error))
        return FALSE;
    *out = fake->next_va;
    fake->next_va += round_2mib(size) + 2 * FSIM_MiB; /* a guard page between ranges */
    u64_insert(fake->mallocs, *out, rounded);
    return TRUE;
}

static gboolean
fake_mem_free(FsimCudaDriver *driver, FsimAddr addr, GError **error)
{
    FakeDriver *fake = fake_from(driver);
    uint64_t size = 0;

    g_assert_true(u64_lookup(fake->mallocs, addr, &size));
    if (!fake_call(fake, OP_MEM_FREE, size, "cudaFree", error))
        return FALSE;
    fake->used -= size;
    g_hash_table_remove(fake->mallocs, &addr);
    return TRUE;
}

static gboolean
fake_touch(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, GError **error)
{
    (void)addr;
    return fake_call(fake_from(driver), OP_TOUCH, size, "cudaMemset", error);
}

static gboolean
fake_address_reserve(FsimCudaDriver *driver, uint64_t size, uint64_t alignment, FsimAddr *out,
                     GError **error)
{
    FakeDriver *fake = fake_from(driver);

    g_assert_cmpuint(size % (2 * FSIM_MiB), ==, 0);
    g_assert_cmpuint(alignment & (alignment - 1), ==, 0);
    if (!fake_call(fake, OP_RESERVE, size, "cuMemAddressReserve", error))
        return FALSE;
    *out = (fake->next_va + alignment - 1) & ~(alignment - 1);
    fake->next_va = *out + size + 2 * FSIM_MiB;
    u64_insert(fake->reservations, *out, size);
    return TRUE;
}

static gboolean
fake_address_free(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, GError **error)
{
    FakeDriver *fake = fake_from(driver);
    uint64_t reserved = 0;
    GHashTableIter iter;
    gpointer key;

    g_assert_true(u64_lookup(fake->reservations, addr, &reserved));
    g_assert_cmpuint(reserved, ==, size);
    /* nothing may still be mapped inside */
    g_hash_table_iter_init(&iter, fake->mappings);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        uint64_t mapped = *(uint64_t *)key;

        g_assert_false(mapped >= addr && mapped < addr + size);
    }
    if (!fake_call(fake, OP_ADDRESS_FREE, size, "cuMemAddressFree", error))
        return FALSE;
    g_hash_table_remove(fake->reservations, &addr);
    return TRUE;
}

static gboolean
fake_create(FsimCudaDriver *driver, uint64_t size, uint64_t *handle, GError **error)
{
    FakeDriver *fake = fake_from(driver);

    g_assert_cmpuint(size % (2 * FSIM_MiB), ==, 0);
    if (!fake_call(fake, OP_CREATE, size, "cuMemCreate", error) ||
        !fake_take(fake, size, "cuMemCreate", error))
        return FALSE;
    *handle = ++fake->next_handle;
    u64_insert(fake->handles, *handle, size);
    return TRUE;
}

static gboolean
fake_release(FsimCudaDriver *driver, uint64_t handle, GError **error)
{
    FakeDriver *fake = fake_from(driver);
    uint64_t size = 0;
    GHashTableIter iter;
    gpointer value;

    g_assert_true(u64_lookup(fake->handles, handle, &size));
    g_hash_table_iter_init(&iter, fake->mappings);
    while (g_hash_table_iter_next(&iter, NULL, &value))
        g_assert_cmpuint(*(uint64_t *)value, !=, handle);
    if (!fake_call(fake, OP_RELEASE, size, "cuMemRelease", error))
        return FALSE;
    fake->used -= size;
    g_hash_table_remove(fake->handles, &handle);
    return TRUE;
}

static gboolean
fake_inside_reservation(FakeDriver *fake, FsimAddr addr, uint64_t size)
{
    GHashTableIter iter;
    gpointer key;
    gpointer value;

    g_hash_table_iter_init(&iter, fake->reservations);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        uint64_t start = *(uint64_t *)key;
        uint64_t length = *(uint64_t *)value;

        if (addr >= start && addr + size <= start + length)
            return TRUE;
    }
    return FALSE;
}

static gboolean
fake_map(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, uint64_t handle, GError **error)
{
    FakeDriver *fake = fake_from(driver);
    uint64_t handle_size = 0;

    g_assert_true(u64_lookup(fake->handles, handle, &handle_size));
    g_assert_cmpuint(handle_size, ==, size);
    g_assert_true(fake_inside_reservation(fake, addr, size));
    g_assert_false(u64_lookup(fake->mappings, addr, NULL));
    if (!fake_call(fake, OP_MAP, size, "cuMemMap", error))
        return FALSE;
    u64_insert(fake->mappings, addr, handle);
    return TRUE;
}

static gboolean
fake_unmap(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, GError **error)
{
    FakeDriver *fake = fake_from(driver);
    uint64_t handle = 0;
    uint64_t handle_size = 0;

    g_assert_true(u64_lookup(fake->mappings, addr, &handle));
    g_assert_true(u64_lookup(fake->handles, handle, &handle_size));
    g_assert_cmpuint(handle_size, ==, size);
    if (!fake_call(fake, OP_UNMAP, size, "cuMemUnmap", error))
        return FALSE;
    g_hash_table_remove(fake->mappings, &addr);
    return TRUE;
}

static gboolean
fake_set_access(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, GError **error)
{
    FakeDriver *fake = fake_from(driver);

    /* the range is a run of whole mapped handles */
    for (FsimAddr a = addr; a < addr + size;) {
        uint64_t handle = 0;
        uint64_t handle_size = 0;

        g_assert_true(u64_lookup(fake->mappings, a, &handle));
        g_assert_true(u64_lookup(fake->handles, handle, &handle_size));
        a += handle_size;
        g_assert_cmpuint(a, <=, addr + size);
    }
    return fake_call(fake, OP_SET_ACCESS, size, "cuMemSetAccess", error);
}

static gboolean
fake_pool_open(FsimCudaDriver *driver, GError **error)
{
    FakeDriver *fake = fake_from(driver);

    (void)error;
    g_assert_false(fake->pool_open);
    fake->pool_open = TRUE;
    fake->pool_reserved = fake->pool_reserved_high = fake->pool_used = fake->pool_used_high = 0;
    return TRUE;
}

static gboolean
fake_pool_alloc(FsimCudaDriver *driver, uint64_t size, FsimAddr *out, GError **error)
{
    FakeDriver *fake = fake_from(driver);
    uint64_t rounded = round_2mib(size);

    g_assert_true(fake->pool_open);
    if (!fake_call(fake, OP_POOL_ALLOC, size, "cudaMallocFromPoolAsync", error))
        return FALSE;
    if (fake->pool_used + rounded > fake->pool_reserved) {
        uint64_t grow = fake->pool_used + rounded - fake->pool_reserved;

        if (!fake_take(fake, grow, "cudaMallocFromPoolAsync", error))
            return FALSE;
        fake->pool_reserved += grow;
    }
    fake->pool_used += rounded;
    fake->pool_used_high = MAX(fake->pool_used_high, fake->pool_used);
    fake->pool_reserved_high = MAX(fake->pool_reserved_high, fake->pool_reserved);
    *out = fake->next_va;
    fake->next_va += rounded + 2 * FSIM_MiB;
    u64_insert(fake->pool_blocks, *out, rounded);
    return TRUE;
}

static gboolean
fake_pool_free(FsimCudaDriver *driver, FsimAddr addr, GError **error)
{
    FakeDriver *fake = fake_from(driver);
    uint64_t rounded = 0;

    g_assert_true(u64_lookup(fake->pool_blocks, addr, &rounded));
    if (!fake_call(fake, OP_POOL_FREE, rounded, "cudaFreeAsync", error))
        return FALSE;
    fake->pool_used -= rounded;
    g_hash_table_remove(fake->pool_blocks, &addr);
    return TRUE;
}

static gboolean
fake_pool_trim(FsimCudaDriver *driver, GError **error)
{
    FakeDriver *fake = fake_from(driver);

    (void)error;
    fake->used -= fake->pool_reserved - fake->pool_used;
    fake->pool_reserved = fake->pool_used;
    return TRUE;
}

static gboolean
fake_pool_usage(FsimCudaDriver *driver, uint64_t *reserved, uint64_t *reserved_high,
                uint64_t *used_high, GError **error)
{
    FakeDriver *fake = fake_from(driver);

    (void)error;
    *reserved = fake->pool_reserved;
    *reserved_high = fake->pool_reserved_high;
    *used_high = fake->pool_used_high;
    return TRUE;
}

static void
fake_pool_close(FsimCudaDriver *driver)
{
    FakeDriver *fake = fake_from(driver);

    g_assert_true(fake->pool_open);
    g_assert_cmpuint(g_hash_table_size(fake->pool_blocks), ==, 0);
    fake->used -= fake->pool_reserved;
    fake->pool_reserved = 0;
    fake->pool_open = FALSE;
}

static void
fake_destroy(FsimCudaDriver *driver)
{
    FakeDriver *fake = fake_from(driver);

    g_hash_table_unref(fake->mallocs);
    g_hash_table_unref(fake->reservations);
    g_hash_table_unref(fake->handles);
    g_hash_table_unref(fake->mappings);
    g_hash_table_unref(fake->pool_blocks);
    g_free(fake);
}

static const FsimCudaDriverOps fake_ops = {
    .name = "fake",
    .now_ns = fake_now_ns,
    .mem_get_info = fake_mem_get_info,
    .synchronize = fake_synchronize,
    .mem_alloc = fake_mem_alloc,
    .mem_free = fake_mem_free,
    .touch = fake_touch,
    .address_reserve = fake_address_reserve,
    .address_free = fake_address_free,
    .create = fake_create,
    .release = fake_release,
    .map = fake_map,
    .unmap = fake_unmap,
    .set_access = fake_set_access,
    .pool_open = fake_pool_open,
    .pool_alloc = fake_pool_alloc,
    .pool_free = fake_pool_free,
    .pool_trim = fake_pool_trim,
    .pool_usage = fake_pool_usage,
    .pool_close = fake_pool_close,
    .destroy = fake_destroy,
};

FakeDriver *
fake_new(uint64_t capacity)
{
    FakeDriver *fake = g_new0(FakeDriver, 1);

    fake->base.ops = &fake_ops;
    g_strlcpy(fake->base.info.name, "Fake GPU 64GB", sizeof(fake->base.info.name));
    fake->base.info.ordinal = 0;
    fake->base.info.granularity = 2 * FSIM_MiB;
    fake->base.info.recommended_granularity = 2 * FSIM_MiB;
    fake->base.info.driver_version = 13000;
    fake->base.info.runtime_version = 13000;
    fake->base.info.compute_major = 9;
    fake->base.info.vmm_supported = TRUE;
    fake->base.info.pools_supported = TRUE;
    fake->capacity = capacity;
    fake->context_bytes = 512 * FSIM_MiB;
    fake->base.info.total_bytes = capacity + fake->context_bytes;
    fake->next_va = 0x7f0000000000;
    fake->mallocs = u64_table();
    fake->reservations = u64_table();
    fake->handles = u64_table();
    fake->mappings = u64_table();
    fake->pool_blocks = u64_table();
    fake->fail_op = -1;
    fake->cost[OP_MEM_ALLOC] = (FakeCost){FAKE_MALLOC_NS, FAKE_MALLOC_PER_GIB_NS};
    fake->cost[OP_MEM_FREE] = (FakeCost){FAKE_FREE_NS, FAKE_FREE_PER_GIB_NS};
    fake->cost[OP_TOUCH] = (FakeCost){FAKE_TOUCH_NS, 0};
    fake->cost[OP_RESERVE] = (FakeCost){FAKE_RESERVE_NS, 0};
    fake->cost[OP_ADDRESS_FREE] = (FakeCost){FAKE_ADDRESS_FREE_NS, 0};
    fake->cost[OP_CREATE] = (FakeCost){FAKE_CREATE_NS, FAKE_CREATE_PER_GIB_NS};
    fake->cost[OP_RELEASE] = (FakeCost){FAKE_RELEASE_NS, 0};
    fake->cost[OP_MAP] = (FakeCost){FAKE_MAP_NS, 0};
    fake->cost[OP_UNMAP] = (FakeCost){FAKE_UNMAP_NS, 0};
    fake->cost[OP_SET_ACCESS] = (FakeCost){FAKE_SET_ACCESS_NS, 0};
    fake->cost[OP_SYNC] = (FakeCost){FAKE_SYNC_NS, 0};
    fake->cost[OP_POOL_ALLOC] = (FakeCost){300, 0};
    fake->cost[OP_POOL_FREE] = (FakeCost){200, 0};
    return fake;
}

void
fake_assert_clean(FakeDriver *fake)
{
    g_assert_cmpuint(g_hash_table_size(fake->mallocs), ==, 0);
    g_assert_cmpuint(g_hash_table_size(fake->reservations), ==, 0);
    g_assert_cmpuint(g_hash_table_size(fake->handles), ==, 0);
    g_assert_cmpuint(g_hash_table_size(fake->mappings), ==, 0);
    g_assert_cmpuint(g_hash_table_size(fake->pool_blocks), ==, 0);
    g_assert_cmpuint(fake->used, ==, 0);
}
