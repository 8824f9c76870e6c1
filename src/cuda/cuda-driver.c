/* SPDX-License-Identifier: MIT */
/*
 * The real GPU behind #FsimCudaDriverOps.  Built only when CMake finds the CUDA toolkit.
 *
 * Loading.  fragsim must start on machines without a GPU or an NVIDIA driver, so it never links
 * libcuda: it links the static CUDA runtime, which opens the driver library itself on the first
 * call and answers cudaErrorInsufficientDriver or cudaErrorNoDevice when there is none.  The
 * virtual memory management calls (cuMemAddressReserve, cuMemCreate, cuMemMap...) exist only in
 * the driver API; their addresses come from the runtime's cudaGetDriverEntryPointByVersion (or
 * cudaGetDriverEntryPoint before CUDA 12.5), asked for the ABI of CUDA 12.0, and are called
 * through the typedefs of <cudaTypedefs.h>.
 *
 * Errors.  Every failing call becomes a GError naming the call and the CUDA error by name and
 * description.  A lack of memory is FSIM_CUDA_ERROR_OUT_OF_MEMORY; the runtime's last error is
 * cleared after it so that the next call is not blamed.
 *
 * Physical allocations are made as PyTorch's expandable segments make them: pinned device memory
 * on this GPU, exportable as a POSIX file descriptor where the device supports it (the handle type
 * can change what cuMemCreate costs), read-write access for this device.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <glib.h>

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "cuda-backend.h"

#if CUDART_VERSION < 12000
#error "the CUDA backend needs the CUDA 12 toolkit or newer"
#endif

/* The driver ABI the function pointer typedefs below match. */
#define CUDA_ABI_VERSION 12000

typedef struct {
    FsimCudaDriver base;
    CUdevice device;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    PFN_cuGetErrorName_v6000 get_error_name;
    PFN_cuGetErrorString_v6000 get_error_string;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuDeviceGetAttribute_v2000 device_get_attribute;
    PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity;
    PFN_cuMemAddressReserve_v10020 mem_address_reserve;
    PFN_cuMemAddressFree_v10020 mem_address_free;
    PFN_cuMemCreate_v10020 mem_create;
    PFN_cuMemRelease_v10020 mem_release;
    PFN_cuMemMap_v10020 mem_map;
    PFN_cuMemUnmap_v10020 mem_unmap;
    PFN_cuMemSetAccess_v10020 mem_set_access;
    cudaMemPool_t pool;
    cudaStream_t stream;
} CudaDriver;

static CudaDriver *
driver_from_base(FsimCudaDriver *driver)
{
    return (CudaDriver *)driver;
}

static void *
device_pointer(FsimAddr addr)
{
    return (void *)(uintptr_t)addr;
}

/* ---- errors -------------------------------------------------------------------------------- */

static gboolean runtime_check(cudaError_t status, GError **error, const char *format, ...)
    G_GNUC_PRINTF(3, 4);

/* TRUE on success; else a GError "CALL: cudaErrorX: description". */
static gboolean
runtime_check(cudaError_t status, GError **error, const char *format, ...)
{
    va_list args;
    g_autofree char *call = NULL;

    if (status == cudaSuccess)
        return TRUE;
    (void)cudaGetLastError();
    va_start(args, format);
    call = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, FSIM_CUDA_ERROR,
                status == cudaErrorMemoryAllocation ? FSIM_CUDA_ERROR_OUT_OF_MEMORY
                                                    : FSIM_CUDA_ERROR_FAILED,
                "%s: %s: %s", call, cudaGetErrorName(status), cudaGetErrorString(status));
    return FALSE;
}

static gboolean driver_check(CudaDriver *self, CUresult status, GError **error, const char *format,
                             ...) G_GNUC_PRINTF(4, 5);

static gboolean
driver_check(CudaDriver *self, CUresult status, GError **error, const char *format, ...)
{
    va_list args;
    g_autofree char *call = NULL;
    const char *name = NULL;
    const char *description = NULL;

    if (status == CUDA_SUCCESS)
        return TRUE;
    va_start(args, format);
    call = g_strdup_vprintf(format, args);
    va_end(args);
    if (self->get_error_name == NULL || self->get_error_name(status, &name) != CUDA_SUCCESS)
        name = NULL;
    if (self->get_error_string == NULL ||
        self->get_error_string(status, &description) != CUDA_SUCCESS)
        description = NULL;
    g_set_error(error, FSIM_CUDA_ERROR,
                status == CUDA_ERROR_OUT_OF_MEMORY ? FSIM_CUDA_ERROR_OUT_OF_MEMORY
                                                   : FSIM_CUDA_ERROR_FAILED,
                "%s: %s (%d): %s", call, name != NULL ? name : "CUresult", (int)status,
                description != NULL ? description : "unknown error");
    return FALSE;
}

/* ---- entry points -------------------------------------------------------------------------- */

/* The address of driver function @symbol, copied into the function pointer at @out (ISO C has no
 * conversion from void * to a function pointer; the bytes are the same). */
static gboolean
driver_symbol(const char *symbol, void *out, gsize out_size, GError **error)
{
    enum cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    void *address = NULL;
    cudaError_t status;

    g_assert(out_size == sizeof(address));
#if CUDART_VERSION >= 12050
    status = cudaGetDriverEntryPointByVersion(symbol, &address, CUDA_ABI_VERSION, cudaEnableDefault,
                                              &query);
#else
    status = cudaGetDriverEntryPoint(symbol, &address, cudaEnableDefault, &query);
#endif
    if (!runtime_check(status, error, "cudaGetDriverEntryPoint(%s)", symbol))
        return FALSE;
    if (query != cudaDriverEntryPointSuccess || address == NULL) {
        g_set_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_UNSUPPORTED,
                    "cudaGetDriverEntryPoint(%s): %s", symbol,
                    query == cudaDriverEntryPointVersionNotSufficent
                        ? "the NVIDIA driver is older than CUDA 12.0"
                        : "the NVIDIA driver has no such function");
        return FALSE;
    }
    memcpy(out, &address, sizeof(address));
    return TRUE;
}

#define LOAD_SYMBOL(self, field, symbol, error) \
    driver_symbol(symbol, &(self)->field, sizeof((self)->field), error)

static gboolean
driver_load_symbols(CudaDriver *self, GError **error)
{
    return LOAD_SYMBOL(self, get_error_name, "cuGetErrorName", error) &&
           LOAD_SYMBOL(self, get_error_string, "cuGetErrorString", error) &&
           LOAD_SYMBOL(self, device_get, "cuDeviceGet", error) &&
           LOAD_SYMBOL(self, device_get_attribute, "cuDeviceGetAttribute", error) &&
           LOAD_SYMBOL(self, mem_get_allocation_granularity, "cuMemGetAllocationGranularity",
                       error) &&
           LOAD_SYMBOL(self, mem_address_reserve, "cuMemAddressReserve", error) &&
           LOAD_SYMBOL(self, mem_address_free, "cuMemAddressFree", error) &&
           LOAD_SYMBOL(self, mem_create, "cuMemCreate", error) &&
           LOAD_SYMBOL(self, mem_release, "cuMemRelease", error) &&
           LOAD_SYMBOL(self, mem_map, "cuMemMap", error) &&
           LOAD_SYMBOL(self, mem_unmap, "cuMemUnmap", error) &&
           LOAD_SYMBOL(self, mem_set_access, "cuMemSetAccess", error);
}

/* ---- the operations ------------------------------------------------------------------------ */

static uint64_t
driver_now_ns(FsimCudaDriver *driver)
{
    struct timespec ts;

    (void)driver;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static gboolean
driver_mem_get_info(FsimCudaDriver *driver, uint64_t *free_bytes, uint64_t *total_bytes,
                    GError **error)
{
    size_t free_size = 0;
    size_t total_size = 0;

    (void)driver;
    if (!runtime_check(cudaMemGetInfo(&free_size, &total_size), error, "cudaMemGetInfo"))
        return FALSE;
    *free_bytes = free_size;
    *total_bytes = total_size;
    return TRUE;
}

static gboolean
driver_synchronize(FsimCudaDriver *driver, GError **error)
{
    (void)driver;
    return runtime_check(cudaDeviceSynchronize(), error, "cudaDeviceSynchronize");
}

static gboolean
driver_mem_alloc(FsimCudaDriver *driver, uint64_t size, FsimAddr *out, GError **error)
{
    void *pointer = NULL;

    (void)driver;
    if (!runtime_check(cudaMalloc(&pointer, size), error, "cudaMalloc(%" G_GUINT64_FORMAT " bytes)",
                       size))
        return FALSE;
    *out = (FsimAddr)(uintptr_t)pointer;
    return TRUE;
}

static gboolean
driver_mem_free(FsimCudaDriver *driver, FsimAddr addr, GError **error)
{
    (void)driver;
    return runtime_check(cudaFree(device_pointer(addr)), error,
                         "cudaFree(0x%" G_GINT64_MODIFIER "x)", addr);
}

static gboolean
driver_touch(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, GError **error)
{
    (void)driver;
    return runtime_check(cudaMemset(device_pointer(addr), 0, size), error,
                         "cudaMemset(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT " bytes)", addr,
                         size) &&
           runtime_check(cudaDeviceSynchronize(), error, "cudaDeviceSynchronize after cudaMemset");
}

static gboolean
driver_address_reserve(FsimCudaDriver *driver, uint64_t size, uint64_t alignment, FsimAddr *out,
                       GError **error)
{
    CudaDriver *self = driver_from_base(driver);
    CUdeviceptr pointer = 0;

    if (!driver_check(self, self->mem_address_reserve(&pointer, size, alignment, 0, 0), error,
                      "cuMemAddressReserve(%" G_GUINT64_FORMAT " bytes)", size))
        return FALSE;
    *out = (FsimAddr)pointer;
    return TRUE;
}

static gboolean
driver_address_free(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, GError **error)
{
    CudaDriver *self = driver_from_base(driver);

    return driver_check(self, self->mem_address_free((CUdeviceptr)addr, size), error,
                        "cuMemAddressFree(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT " bytes)",
                        addr, size);
}

static gboolean
driver_create(FsimCudaDriver *driver, uint64_t size, uint64_t *handle, GError **error)
{
    CudaDriver *self = driver_from_base(driver);
    CUmemGenericAllocationHandle created = 0;

    if (!driver_check(self, self->mem_create(&created, size, &self->prop, 0), error,
                      "cuMemCreate(%" G_GUINT64_FORMAT " bytes)", size))
        return FALSE;
    *handle = (uint64_t)created;
    return TRUE;
}

static gboolean
driver_release(FsimCudaDriver *driver, uint64_t handle, GError **error)
{
    CudaDriver *self = driver_from_base(driver);

    return driver_check(self, self->mem_release((CUmemGenericAllocationHandle)handle), error,
                        "cuMemRelease");
}

static gboolean
driver_map(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, uint64_t handle, GError **error)
{
    CudaDriver *self = driver_from_base(driver);

    return driver_check(
        self, self->mem_map((CUdeviceptr)addr, size, 0, (CUmemGenericAllocationHandle)handle, 0),
        error, "cuMemMap(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT " bytes)", addr, size);
}

static gboolean
driver_unmap(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, GError **error)
{
    CudaDriver *self = driver_from_base(driver);

    return driver_check(self, self->mem_unmap((CUdeviceptr)addr, size), error,
                        "cuMemUnmap(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT " bytes)", addr,
                        size);
}

static gboolean
driver_set_access(FsimCudaDriver *driver, FsimAddr addr, uint64_t size, GError **error)
{
    CudaDriver *self = driver_from_base(driver);

    return driver_check(
        self, self->mem_set_access((CUdeviceptr)addr, size, &self->access, 1), error,
        "cuMemSetAccess(0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT " bytes)", addr, size);
}

static gboolean
driver_pool_open(FsimCudaDriver *driver, GError **error)
{
    CudaDriver *self = driver_from_base(driver);
    struct cudaMemPoolProps props;
    uint64_t threshold = G_MAXUINT64;

    g_return_val_if_fail(self->pool == NULL, FALSE);
    memset(&props, 0, sizeof(props));
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = driver->info.ordinal;
    if (!runtime_check(cudaMemPoolCreate(&self->pool, &props), error, "cudaMemPoolCreate"))
        return FALSE;
    /* A blocking stream: cudaMemset on the legacy default stream then waits for the
     * stream-ordered allocations before it. */
    if (!runtime_check(
            cudaMemPoolSetAttribute(self->pool, cudaMemPoolAttrReleaseThreshold, &threshold), error,
            "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)") ||
        !runtime_check(cudaStreamCreate(&self->stream), error, "cudaStreamCreate")) {
        cudaMemPoolDestroy(self->pool);
        self->pool = NULL;
        return FALSE;
    }
    return TRUE;
}

static gboolean
driver_pool_alloc(FsimCudaDriver *driver, uint64_t size, FsimAddr *out, GError **error)
{
    CudaDriver *self = driver_from_base(driver);
    void *pointer = NULL;

    if (!runtime_check(cudaMallocFromPoolAsync(&pointer, size, self->pool, self->stream), error,
                       "cudaMallocFromPoolAsync(%" G_GUINT64_FORMAT " bytes)", size))
        return FALSE;
    *out = (FsimAddr)(uintptr_t)pointer;
    return TRUE;
}

static gboolean
driver_pool_free(FsimCudaDriver *driver, FsimAddr addr, GError **error)
{
    CudaDriver *self = driver_from_base(driver);

    return runtime_check(cudaFreeAsync(device_pointer(addr), self->stream), error,
                         "cudaFreeAsync(0x%" G_GINT64_MODIFIER "x)", addr);
}

static gboolean
driver_pool_trim(FsimCudaDriver *driver, GError **error)
{
    CudaDriver *self = driver_from_base(driver);

    return runtime_check(cudaStreamSynchronize(self->stream), error, "cudaStreamSynchronize") &&
           runtime_check(cudaMemPoolTrimTo(self->pool, 0), error, "cudaMemPoolTrimTo(0)");
}

static gboolean
driver_pool_usage(FsimCudaDriver *driver, uint64_t *reserved, uint64_t *reserved_high,
                  uint64_t *used_high, GError **error)
{
    CudaDriver *self = driver_from_base(driver);

    return runtime_check(
               cudaMemPoolGetAttribute(self->pool, cudaMemPoolAttrReservedMemCurrent, reserved),
               error, "cudaMemPoolGetAttribute(cudaMemPoolAttrReservedMemCurrent)") &&
           runtime_check(
               cudaMemPoolGetAttribute(self->pool, cudaMemPoolAttrReservedMemHigh, reserved_high),
               error, "cudaMemPoolGetAttribute(cudaMemPoolAttrReservedMemHigh)") &&
           runtime_check(cudaMemPoolGetAttribute(self->pool, cudaMemPoolAttrUsedMemHigh, used_high),
                         error, "cudaMemPoolGetAttribute(cudaMemPoolAttrUsedMemHigh)");
}

static void
driver_pool_close(FsimCudaDriver *driver)
{
    CudaDriver *self = driver_from_base(driver);

    if (self->pool == NULL)
        return;
    /* Failures here leave memory the process exit gives back; nothing to tell the run. */
    (void)cudaStreamSynchronize(self->stream);
    (void)cudaMemPoolDestroy(self->pool);
    (void)cudaStreamDestroy(self->stream);
    (void)cudaGetLastError();
    self->pool = NULL;
    self->stream = NULL;
}

static void
driver_destroy(FsimCudaDriver *driver)
{
    driver_pool_close(driver);
    g_free(driver_from_base(driver));
}

static const FsimCudaDriverOps driver_ops = {
    .name = "cuda",
    .now_ns = driver_now_ns,
    .mem_get_info = driver_mem_get_info,
    .synchronize = driver_synchronize,
    .mem_alloc = driver_mem_alloc,
    .mem_free = driver_mem_free,
    .touch = driver_touch,
    .address_reserve = driver_address_reserve,
    .address_free = driver_address_free,
    .create = driver_create,
    .release = driver_release,
    .map = driver_map,
    .unmap = driver_unmap,
    .set_access = driver_set_access,
    .pool_open = driver_pool_open,
    .pool_alloc = driver_pool_alloc,
    .pool_free = driver_pool_free,
    .pool_trim = driver_pool_trim,
    .pool_usage = driver_pool_usage,
    .pool_close = driver_pool_close,
    .destroy = driver_destroy,
};

/* ---- opening ------------------------------------------------------------------------------- */

gboolean
fsim_cuda_backend_built(void)
{
    return TRUE;
}

static gboolean
driver_init(CudaDriver *self, int ordinal, GError **error)
{
    FsimCudaDriverInfo *info = &self->base.info;
    struct cudaDeviceProp properties;
    size_t granularity = 0;
    int vmm = 0;
    int fd_handles = 0;
    int pools = 0;
    uint64_t free_bytes;

    info->ordinal = ordinal;
    if (!runtime_check(cudaSetDevice(ordinal), error, "cudaSetDevice(%d)", ordinal) ||
        !runtime_check(cudaFree(NULL), error, "cudaFree(NULL), creating the context") ||
        !runtime_check(cudaGetDeviceProperties(&properties, ordinal), error,
                       "cudaGetDeviceProperties(%d)", ordinal) ||
        !runtime_check(cudaDriverGetVersion(&info->driver_version), error,
                       "cudaDriverGetVersion") ||
        !runtime_check(cudaRuntimeGetVersion(&info->runtime_version), error,
                       "cudaRuntimeGetVersion") ||
        !runtime_check(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ordinal),
                       error, "cudaDeviceGetAttribute(cudaDevAttrMemoryPoolsSupported)"))
        return FALSE;
    g_strlcpy(info->name, properties.name, sizeof(info->name));
    info->compute_major = properties.major;
    info->compute_minor = properties.minor;
    info->total_bytes = properties.totalGlobalMem;
    info->pools_supported = pools != 0;
    if (!driver_load_symbols(self, error))
        return FALSE;
    if (!driver_check(self, self->device_get(&self->device, ordinal), error, "cuDeviceGet(%d)",
                      ordinal) ||
        !driver_check(
            self,
            self->device_get_attribute(
                &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, self->device),
            error, "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)") ||
        !driver_check(self,
                      self->device_get_attribute(
                          &fd_handles,
                          CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                          self->device),
                      error, "cuDeviceGetAttribute(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)"))
        return FALSE;
    info->vmm_supported = vmm != 0;
    memset(&self->prop, 0, sizeof(self->prop));
    self->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    self->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    self->prop.location.id = self->device;
    self->prop.requestedHandleTypes =
        fd_handles != 0 ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    memset(&self->access, 0, sizeof(self->access));
    self->access.location = self->prop.location;
    self->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    /* cudaMalloc takes 2 MiB pages on every NVIDIA GPU with VMM; without it, assume as much. */
    info->granularity = 2 * FSIM_MiB;
    info->recommended_granularity = info->granularity;
    if (info->vmm_supported) {
        if (!driver_check(self,
                          self->mem_get_allocation_granularity(&granularity, &self->prop,
                                                               CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                          error, "cuMemGetAllocationGranularity(MINIMUM)"))
            return FALSE;
        info->granularity = granularity;
        if (!driver_check(self,
                          self->mem_get_allocation_granularity(
                              &granularity, &self->prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                          error, "cuMemGetAllocationGranularity(RECOMMENDED)"))
            return FALSE;
        info->recommended_granularity = granularity;
    }
    return driver_mem_get_info(&self->base, &free_bytes, &info->total_bytes, error);
}

FsimCudaDriver *
fsim_cuda_driver_open(int ordinal, GError **error)
{
    CudaDriver *self;
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);

    if (status != cudaSuccess) {
        (void)cudaGetLastError();
        g_set_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_NO_DEVICE,
                    "no CUDA device: cudaGetDeviceCount: %s: %s%s", cudaGetErrorName(status),
                    cudaGetErrorString(status),
                    status == cudaErrorInsufficientDriver
                        ? " (no NVIDIA driver is loaded, or it is older than this CUDA runtime)"
                        : "");
        return NULL;
    }
    if (count == 0 || ordinal < 0 || ordinal >= count) {
        g_set_error(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_NO_DEVICE,
                    "no CUDA device %d: cudaGetDeviceCount found %d", ordinal, count);
        return NULL;
    }
    self = g_new0(CudaDriver, 1);
    self->base.ops = &driver_ops;
    if (!driver_init(self, ordinal, error)) {
        g_free(self);
        return NULL;
    }
    return &self->base;
}
