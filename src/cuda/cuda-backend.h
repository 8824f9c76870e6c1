/* SPDX-License-Identifier: MIT */
/*
 * The CUDA backend: the same policies on a real GPU, the trace replayed through the driver's own
 * allocators, and the calibration of the device cost model.  Private to fragsim (the CLI and the
 * tests include it); docs/cuda.md is the user's side.
 *
 * LAYERS
 *
 *   FsimCudaDriver   the few runtime and driver calls the backend makes, as a table of function
 *                    pointers.  cuda-driver.c implements it on the real GPU (built only with the
 *                    CUDA toolkit; it links the static runtime and reaches the driver API through
 *                    cudaGetDriverEntryPoint, so the program starts where no driver is
 *                    installed); cuda-driver-none.c stands in when the toolkit is absent.  Tests
 *                    implement it on the CPU with a clock that advances by known costs, so every
 *                    layer above it runs without a GPU.
 *   cuda device      an #FsimDeviceOps over a driver (fsim_cuda_device_new()): what policies call.
 *                    It keeps the handles of mapped pages, times every call and samples the
 *                    memory the GPU reports in use.
 *   replay, native, calibrate
 *                    the work of `fragsim cuda replay|native|calibrate`, over a driver.
 *   latency, fit     histograms and least squares (cuda-stats.c).
 *
 * ERRORS: every driver failure is a GError in the %FSIM_CUDA_ERROR domain whose message names the
 * call and the CUDA error (`cuMemCreate(20971520 bytes): CUDA_ERROR_OUT_OF_MEMORY: out of
 * memory`).  A lack of memory is %FSIM_CUDA_ERROR_OUT_OF_MEMORY, which the device turns into
 * %FSIM_OOM for the policy (it is a result of the run, not a failure); anything else stops the
 * run.
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

G_BEGIN_DECLS

/* ---- errors -------------------------------------------------------------------------------- */

#define FSIM_CUDA_ERROR (fsim_cuda_error_quark())
GQuark fsim_cuda_error_quark(void);

/**
 * FsimCudaError:
 * @FSIM_CUDA_ERROR_FAILED: a call failed; the message names it and the CUDA error.
 * @FSIM_CUDA_ERROR_NO_DEVICE: no NVIDIA driver, no CUDA device, or no device of that ordinal.
 * @FSIM_CUDA_ERROR_OUT_OF_MEMORY: the call could not obtain device memory.
 * @FSIM_CUDA_ERROR_UNSUPPORTED: fragsim was built without the backend, or the GPU lacks a
 *     feature (virtual memory management, memory pools, a handle size it cannot map).
 */
typedef enum {
    FSIM_CUDA_ERROR_FAILED,
    FSIM_CUDA_ERROR_NO_DEVICE,
    FSIM_CUDA_ERROR_OUT_OF_MEMORY,
    FSIM_CUDA_ERROR_UNSUPPORTED,
} FsimCudaError;

/* ---- the driver ---------------------------------------------------------------------------- */

typedef struct FsimCudaDriver FsimCudaDriver;
typedef struct FsimCudaDriverOps FsimCudaDriverOps;

/**
 * FsimCudaDriverInfo:
 * @name: the GPU's name (cudaDeviceProp.name), which names runs on it.
 * @ordinal: the CUDA device ordinal.
 * @total_bytes: device memory (cudaMemGetInfo total).
 * @granularity: minimum allocation granularity of device memory (cuMemGetAllocationGranularity,
 *     MINIMUM): sizes, offsets and addresses of mappings are multiples of it.
 * @recommended_granularity: the RECOMMENDED granularity.
 * @driver_version, @runtime_version: 1000 * major + 10 * minor (13000 = CUDA 13.0).
 * @compute_major, @compute_minor: compute capability.
 * @vmm_supported: the virtual memory management API works on this device.
 * @pools_supported: cudaMallocAsync and memory pools work on this device.
 */
typedef struct {
    char name[256];
    int ordinal;
    uint64_t total_bytes;
    uint64_t granularity;
    uint64_t recommended_granularity;
    int driver_version;
    int runtime_version;
    int compute_major;
    int compute_minor;
    gboolean vmm_supported;
    gboolean pools_supported;
} FsimCudaDriverInfo;

/**
 * FsimCudaDriverOps:
 *
 * The calls the backend makes.  Every function returning gboolean returns %FALSE with @error set
 * (%FSIM_CUDA_ERROR_OUT_OF_MEMORY for a lack of memory, else %FSIM_CUDA_ERROR_FAILED) and leaves
 * nothing allocated behind; the error's message names the call.  Addresses are device pointers
 * as integers; handles are CUmemGenericAllocationHandle values.
 *
 * @now_ns: a monotonic clock in nanoseconds (the backend times calls with it).
 * @mem_get_info: cudaMemGetInfo.
 * @synchronize: cudaDeviceSynchronize.
 * @mem_alloc, @mem_free: cudaMalloc, cudaFree.
 * @touch: write zeroes over [addr, addr+size) and wait (cudaMemset, cudaDeviceSynchronize), so the
 *     memory is committed.
 * @address_reserve, @address_free: cuMemAddressReserve (@alignment a power of two),
 * cuMemAddressFree.
 * @create, @release: cuMemCreate of one physical allocation of @size bytes, cuMemRelease.
 * @map, @unmap: cuMemMap of a whole handle at @addr, cuMemUnmap of a mapped range.
 * @set_access: cuMemSetAccess, read-write for this device, over mapped [addr, addr+size).
 * @pool_open: create a memory pool on this device with its release threshold at the maximum and
 *     one stream for it (cudaMemPoolCreate, cudaMemPoolSetAttribute, cudaStreamCreate).
 * @pool_alloc, @pool_free: cudaMallocFromPoolAsync, cudaFreeAsync on the pool's stream.
 * @pool_trim: synchronise the stream, then cudaMemPoolTrimTo(0).
 * @pool_usage: the pool's reserved memory now and its high-water marks of reserved and used
 *     memory (cudaMemPoolGetAttribute).
 * @pool_close: synchronise, destroy the pool and the stream (the pool's memory goes back).
 * @destroy: free the driver object (the context stays: the runtime owns it).
 */
struct FsimCudaDriverOps {
    const char *name; /* "cuda", "none", "fake" */
    uint64_t (*now_ns)(FsimCudaDriver *self);
    gboolean (*mem_get_info)(FsimCudaDriver *self, uint64_t *free_bytes, uint64_t *total_bytes,
                             GError **error);
    gboolean (*synchronize)(FsimCudaDriver *self, GError **error);
    gboolean (*mem_alloc)(FsimCudaDriver *self, uint64_t size, FsimAddr *out, GError **error);
    gboolean (*mem_free)(FsimCudaDriver *self, FsimAddr addr, GError **error);
    gboolean (*touch)(FsimCudaDriver *self, FsimAddr addr, uint64_t size, GError **error);
    gboolean (*address_reserve)(FsimCudaDriver *self, uint64_t size, uint64_t alignment,
                                FsimAddr *out, GError **error);
    gboolean (*address_free)(FsimCudaDriver *self, FsimAddr addr, uint64_t size, GError **error);
    gboolean (*create)(FsimCudaDriver *self, uint64_t size, uint64_t *handle, GError **error);
    gboolean (*release)(FsimCudaDriver *self, uint64_t handle, GError **error);
    gboolean (*map)(FsimCudaDriver *self, FsimAddr addr, uint64_t size, uint64_t handle,
                    GError **error);
    gboolean (*unmap)(FsimCudaDriver *self, FsimAddr addr, uint64_t size, GError **error);
    gboolean (*set_access)(FsimCudaDriver *self, FsimAddr addr, uint64_t size, GError **error);
    gboolean (*pool_open)(FsimCudaDriver *self, GError **error);
    gboolean (*pool_alloc)(FsimCudaDriver *self, uint64_t size, FsimAddr *out, GError **error);
    gboolean (*pool_free)(FsimCudaDriver *self, FsimAddr addr, GError **error);
    gboolean (*pool_trim)(FsimCudaDriver *self, GError **error);
    gboolean (*pool_usage)(FsimCudaDriver *self, uint64_t *reserved, uint64_t *reserved_high,
                           uint64_t *used_high, GError **error);
    void (*pool_close)(FsimCudaDriver *self);
    void (*destroy)(FsimCudaDriver *self);
};

/* The base every driver embeds first. */
struct FsimCudaDriver {
    const FsimCudaDriverOps *ops;
    FsimCudaDriverInfo info;
};

/* TRUE when this fragsim was built with the CUDA toolkit. */
gboolean fsim_cuda_backend_built(void);

/**
 * fsim_cuda_driver_open:
 * @ordinal: the CUDA device to use.
 * @error: %FSIM_CUDA_ERROR_NO_DEVICE when there is no driver or device (the message starts with
 *     "no CUDA device"); %FSIM_CUDA_ERROR_UNSUPPORTED when built without the toolkit.
 *
 * Selects the device, creates its context and looks up the driver entry points.
 *
 * Returns: (transfer full) (nullable): the driver; free with fsim_cuda_driver_free().
 */
FsimCudaDriver *fsim_cuda_driver_open(int ordinal, GError **error);
void fsim_cuda_driver_free(FsimCudaDriver *driver);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimCudaDriver, fsim_cuda_driver_free)

/* ---- latency statistics -------------------------------------------------------------------- */

/* Bucket i of a histogram counts durations in [2^i, 2^(i+1)) ns (bucket 0 also counts 0 ns); the
 * last bucket counts everything longer. */
#define FSIM_LATENCY_BUCKETS 40

/**
 * FsimLatency:
 *
 * Durations of one kind of call.  All zero is the empty value; @min_ns is meaningful only when
 * @count is non-zero.
 */
typedef struct {
    uint64_t count;
    uint64_t total_ns;
    uint64_t min_ns;
    uint64_t max_ns;
    uint64_t buckets[FSIM_LATENCY_BUCKETS];
} FsimLatency;

guint fsim_latency_bucket(uint64_t ns);
/* Lower bound of bucket @bucket in ns (0 for bucket 0). */
uint64_t fsim_latency_bucket_floor(guint bucket);
void fsim_latency_add(FsimLatency *latency, uint64_t ns);
void fsim_latency_merge(FsimLatency *into, const FsimLatency *from);
/* Mean duration, 0 when empty. */
double fsim_latency_mean(const FsimLatency *latency);
/* An upper estimate of quantile @q (0..1): the top of the bucket where it falls, clamped to
 * [min, max].  0 when empty. */
uint64_t fsim_latency_quantile(const FsimLatency *latency, double q);

/* ---- least squares ------------------------------------------------------------------------- */

/**
 * FsimLinearFit:
 *
 * y = @base + @slope * x fitted by ordinary least squares over @n points; @r2 is the coefficient
 * of determination (1 when every point is on the line or y is constant).
 */
typedef struct {
    double base;
    double slope;
    double r2;
    gsize n;
} FsimLinearFit;

/**
 * fsim_fit_linear:
 *
 * Fits @n points.  With fewer than two distinct x the slope cannot be told: then @base is the
 * mean of y, @slope 0, and the function returns %FALSE (as it does for @n = 0).
 *
 * Returns: %TRUE when both coefficients were determined.
 */
gboolean fsim_fit_linear(const double *x, const double *y, gsize n, FsimLinearFit *out);

/* ---- the device ---------------------------------------------------------------------------- */

/**
 * FsimCudaDeviceOptions:
 * @touch: write newly obtained memory (cudaMemset) so it is really committed; timed apart from
 *     the calls.
 * @sample_usage: read cudaMemGetInfo after every call that obtains memory, for the peak of used
 *     memory.
 */
typedef struct {
    gboolean touch;
    gboolean sample_usage;
} FsimCudaDeviceOptions;

/* Both options on. */
void fsim_cuda_device_options_init(FsimCudaDeviceOptions *options);

/**
 * FsimCudaMeasurements:
 * @calls: the measured duration of every successful call, per #FsimDeviceCall, timed the way the
 *     cost model charges it: mem_alloc = cudaMalloc; mem_free = cudaFree (with its implicit
 *     synchronisation); va_reserve / va_release = cuMemAddressReserve / cuMemAddressFree; map =
 *     cuMemCreate + cuMemMap per handle, then one cuMemSetAccess; unmap = cudaDeviceSynchronize,
 *     then cuMemUnmap + cuMemRelease per handle.
 * @failed: calls that failed for want of memory (the policy saw an OOM).
 * @touch: the cudaMemset and synchronisation of new memory (not in @calls).
 * @modelled_ns: the cost model's charge for those calls, per #FsimDeviceCall (the device's
 *     modelled_time_ns split by kind), to set against @calls.
 * @measured_time_ns: the sum of @calls' totals, to set against the modelled time.
 * @baseline_used_bytes: memory in use on the GPU (total - free) when the device was created.
 * @peak_used_bytes: the highest (total - free) - baseline seen after a call that obtains memory.
 * @usage_samples: cudaMemGetInfo readings taken.
 * @handles_created: cuMemCreate calls.
 * @peak_handles: most physical handles held at once.
 */
typedef struct {
    FsimLatency calls[FSIM_CALL_COUNT];
    uint64_t modelled_ns[FSIM_CALL_COUNT];
    FsimLatency failed;
    FsimLatency touch;
    uint64_t measured_time_ns;
    uint64_t baseline_used_bytes;
    uint64_t peak_used_bytes;
    uint64_t usage_samples;
    uint64_t handles_created;
    uint64_t peak_handles;
} FsimCudaMeasurements;

/**
 * fsim_cuda_device_new:
 * @driver: borrowed; must outlive the device.
 * @spec: the spec to present to policies (fsim_cuda_spec_for_gpu()); its granularity must be a
 *     multiple of the driver's.
 * @config: (nullable): `[device]` fault injection, as for the simulated device.
 * @options: (nullable): NULL = fsim_cuda_device_options_init().
 * @error: a bad fault setting; the first cudaMemGetInfo's failure.
 *
 * An #FsimDevice on the GPU.  Calls beyond @spec's capacity fail as on the simulated device
 * before the driver is asked; the driver may refuse earlier.  Freeing the device gives back
 * whatever is still allocated, mapped or reserved.
 *
 * Returns: (transfer full) (nullable): the device; free with fsim_device_free().
 */
FsimDevice *fsim_cuda_device_new(FsimCudaDriver *driver, const FsimDeviceSpec *spec,
                                 GKeyFile *config, const FsimCudaDeviceOptions *options,
                                 GError **error);

/* Returns: (nullable) (transfer none): the measurements of a CUDA device so far; NULL for
 * another device. */
const FsimCudaMeasurements *fsim_cuda_device_measurements(FsimDevice *device);

/**
 * fsim_cuda_device_error:
 *
 * Device operations cannot return errors, so a CUDA device keeps the first driver failure other
 * than a lack of memory (answering %FSIM_OOM or ignoring it meanwhile); callers check after every
 * event and stop the run.
 *
 * Returns: (nullable) (transfer none): that failure, or NULL.
 */
const GError *fsim_cuda_device_error(const FsimDevice *device);

/* Physical handles held now. */
guint fsim_cuda_device_handles(const FsimDevice *device);

/**
 * fsim_cuda_device_close:
 *
 * Gives back, untimed, everything the device still holds (a trace need not free everything) and
 * closes it: later allocating calls answer %FSIM_OOM without asking the driver and later freeing
 * calls do nothing.  The engine stays readable, so a run's results can be stored after the GPU
 * has moved on to the next run.  A failure while giving back is the device's error
 * (fsim_cuda_device_error()).  fsim_device_free() closes an open device (and logs such a failure
 * with g_warning()).
 */
void fsim_cuda_device_close(FsimDevice *device);

/**
 * fsim_cuda_spec_for_gpu:
 * @driver: the GPU.
 * @model: (nullable): the modelled device of `-d`: its costs are charged, and its capacity caps
 *     the GPU's.  NULL = the default costs and the GPU's free memory.
 * @out: (out): the spec: name and description of the GPU, total memory, capacity = the free
 *     memory now (capped by @model's), the GPU's minimum granularity, @model's costs.
 *
 * Returns: %FALSE when cudaMemGetInfo fails.
 */
gboolean fsim_cuda_spec_for_gpu(FsimCudaDriver *driver, const FsimDeviceSpec *model,
                                FsimDeviceSpec *out, GError **error);

/* ---- replay on the GPU --------------------------------------------------------------------- */

/**
 * FsimCudaReplayOptions:
 * @policy: a registered policy.
 * @config: (nullable): knobs and `[device]` fault injection (applied to both devices).
 * @model: (nullable): see fsim_cuda_spec_for_gpu().
 * @fail_on_oom, @paranoid: as in #FsimRunConfig.
 * @with_model: also run the policy on the simulated device with the same spec, in lock step.
 * @device: the GPU device's options.
 * @attach: (nullable): called with each engine (GPU, then model) before its first event, to add
 *     observers such as the results store; FALSE with @error stops the replay.
 * @attach_data: for @attach.
 */
typedef struct {
    const char *policy;
    GKeyFile *config;
    const FsimDeviceSpec *model;
    gboolean fail_on_oom;
    gboolean paranoid;
    gboolean with_model;
    FsimCudaDeviceOptions device;
    gboolean (*attach)(gpointer data, FsimEngine *engine, gboolean on_gpu, GError **error);
    gpointer attach_data;
} FsimCudaReplayOptions;

void fsim_cuda_replay_options_init(FsimCudaReplayOptions *options);

/**
 * FsimCudaReplayResult:
 * @policy: the policy (copied).
 * @trace_device: the device index of the trace.
 * @gpu_spec: the spec of the run on the GPU (named after the GPU).
 * @gpu: its metrics: the engine's accounting of what the policy held (peak_reserved_bytes is the
 *     memory the policy obtained, rounded to the granularity), the driver calls it made and the
 *     modelled time of those calls under @gpu_spec's costs.
 * @measured: what the GPU itself said: durations, used memory, handles.
 * @gpu_oom_stopped: the run stopped at its first OOM (@fail_on_oom).
 * @model_spec, @model, @model_oom_stopped: the same for the simulated run (when @has_model).
 * @oom_message: (nullable): the message of the OOM that stopped a run.
 * @gpu_engine, @model_engine: (nullable): the finished engines, kept for whoever stores the runs
 *     (the GPU's device is closed: its memory is back); freed by the clear function.
 */
typedef struct {
    char *policy;
    uint32_t trace_device;
    FsimDeviceSpec gpu_spec;
    FsimMetrics gpu;
    FsimCudaMeasurements measured;
    gboolean gpu_oom_stopped;
    gboolean has_model;
    FsimDeviceSpec model_spec;
    FsimMetrics model;
    gboolean model_oom_stopped;
    char *oom_message;
    FsimEngine *gpu_engine;
    FsimEngine *model_engine;
} FsimCudaReplayResult;

void fsim_cuda_replay_result_clear(FsimCudaReplayResult *result);

/**
 * fsim_cuda_replay:
 * @driver: the GPU.
 * @trace: an opened trace.
 * @trace_device: one of fsim_trace_devices().
 * @options: the run.
 * @out: (out caller-allocates): the result; clear with fsim_cuda_replay_result_clear() (also
 *     after a failure).
 * @error: broken input, an unknown policy, or a driver failure other than a lack of memory.
 *
 * Runs the trace through the policy on a CUDA device (and, with @with_model, through the same
 * policy on the simulated device), then gives back everything the GPU run still held
 * (fsim_cuda_device_close()).
 *
 * Returns: %TRUE when the run completed or stopped at an OOM under @fail_on_oom.
 */
gboolean fsim_cuda_replay(FsimCudaDriver *driver, FsimTrace *trace, uint32_t trace_device,
                          const FsimCudaReplayOptions *options, FsimCudaReplayResult *out,
                          GError **error);

/* ---- native replay ------------------------------------------------------------------------- */

/**
 * FsimCudaNativeMode:
 * @FSIM_CUDA_NATIVE_MALLOC: cudaMalloc and cudaFree per tensor: no caching at all.
 * @FSIM_CUDA_NATIVE_ASYNC: cudaMallocFromPoolAsync / cudaFreeAsync on one stream, from a pool
 *     whose release threshold is the maximum (it keeps what it reserved), trimmed on empty_cache.
 */
typedef enum {
    FSIM_CUDA_NATIVE_MALLOC,
    FSIM_CUDA_NATIVE_ASYNC,
} FsimCudaNativeMode;

/* "cudaMalloc", "cudaMallocAsync". */
const char *fsim_cuda_native_mode_name(FsimCudaNativeMode mode);

/**
 * FsimCudaNativeResult:
 * @peak_used_bytes: highest cudaMemGetInfo used memory over the baseline, sampled after every
 *     allocation.
 * @peak_reserved_bytes: ASYNC: the pool's reserved high-water mark; MALLOC: @peak_used_bytes.
 * @pool_used_high_bytes: ASYNC: the pool's high-water mark of memory handed out.
 * @alloc, @dealloc: durations of the allocating and freeing calls; @touch: of the memsets.
 */
typedef struct {
    FsimCudaNativeMode mode;
    uint32_t trace_device;
    uint64_t events;
    uint64_t allocs;
    uint64_t frees;
    uint64_t ooms;
    int64_t first_oom_event; /* -1 = none */
    uint64_t unmatched_frees;
    uint64_t empty_caches;
    uint64_t peak_requested_bytes;
    uint64_t peak_used_bytes;
    uint64_t peak_reserved_bytes;
    uint64_t pool_used_high_bytes;
    FsimLatency alloc;
    FsimLatency dealloc;
    FsimLatency touch;
} FsimCudaNativeResult;

/**
 * fsim_cuda_native:
 * @touch: memset every allocation (ASYNC: cudaMemsetAsync order is kept by the stream).
 *
 * Replays one device of @trace through the driver's allocator: allocations alive at trace start
 * first, then every event (all streams on one).  An allocation the driver refuses is an OOM: it
 * is counted and its later free ignored.  Everything still allocated is freed at the end.
 *
 * Returns: %FALSE on broken input or a driver failure other than a lack of memory.
 */
gboolean fsim_cuda_native(FsimCudaDriver *driver, FsimTrace *trace, uint32_t trace_device,
                          FsimCudaNativeMode mode, gboolean touch, FsimCudaNativeResult *out,
                          GError **error);

/* ---- calibration --------------------------------------------------------------------------- */

/**
 * FsimCudaCalibrateOptions:
 * @max_size: the largest size probed; capped at a quarter of the free memory.
 * @repeat: timed samples per size (after one untimed warm-up).
 */
typedef struct {
    uint64_t max_size;
    guint repeat;
} FsimCudaCalibrateOptions;

/* 4 GiB, 5 samples. */
void fsim_cuda_calibrate_options_init(FsimCudaCalibrateOptions *options);

/**
 * FsimCudaSeries:
 * @name: what was timed (`cudaMalloc`, `map`...).
 * @sizes: (element-type guint64): the probed sizes in bytes, ascending.
 * @median_ns: (element-type gdouble): the median duration at each size.
 * @fit: median_ns = base + slope * size_in_GiB.
 */
typedef struct {
    const char *name;
    GArray *sizes;
    GArray *median_ns;
    FsimLinearFit fit;
} FsimCudaSeries;

typedef enum {
    FSIM_CUDA_SERIES_MALLOC,  /* cudaMalloc(size) */
    FSIM_CUDA_SERIES_FREE,    /* cudaFree of it */
    FSIM_CUDA_SERIES_RESERVE, /* cuMemAddressReserve(size) */
    FSIM_CUDA_SERIES_RELEASE, /* cuMemAddressFree */
    FSIM_CUDA_SERIES_MAP,     /* cuMemCreate + cuMemMap + cuMemSetAccess of one handle of size */
    FSIM_CUDA_SERIES_UNMAP,   /* cuMemUnmap + cuMemRelease of it */
    FSIM_CUDA_SERIES_SYNC,    /* cudaDeviceSynchronize of an idle device (size 0) */
    FSIM_CUDA_SERIES_COUNT,
} FsimCudaSeriesKind;

/**
 * FsimCudaUsageStep:
 * @size: bytes per cudaMalloc.
 * @count: allocations made at once.
 * @used_bytes: growth of cudaMemGetInfo used memory for all of them.
 */
typedef struct {
    uint64_t size;
    uint64_t count;
    uint64_t used_bytes;
} FsimCudaUsageStep;

/**
 * FsimCudaCalibration:
 * @info: the GPU.
 * @free_bytes: free memory when calibration began (after the context was created).
 * @steps: (element-type FsimCudaUsageStep): the used-memory probes.
 * @observed_step: the largest power of two dividing every non-zero used-memory growth: the
 *     granularity at which cudaMalloc really takes memory (0 when nothing grew).
 * @series: the timings.
 * @costs: the cost model derived from them (fsim_cuda_calibration_costs()).
 */
typedef struct {
    FsimCudaDriverInfo info;
    uint64_t free_bytes;
    GArray *steps;
    uint64_t observed_step;
    FsimCudaSeries series[FSIM_CUDA_SERIES_COUNT];
    FsimDeviceCosts costs;
} FsimCudaCalibration;

void fsim_cuda_calibration_clear(FsimCudaCalibration *calibration);

/**
 * fsim_cuda_calibrate:
 * @out: (out caller-allocates): the measurements; clear with fsim_cuda_calibration_clear() (also
 *     after a failure).
 *
 * Measures granularity, the used-memory step of cudaMalloc and the cost of every call across
 * sizes, and derives the cost model.  Everything allocated is freed again.
 *
 * Returns: %FALSE on a driver failure.
 */
gboolean fsim_cuda_calibrate(FsimCudaDriver *driver, const FsimCudaCalibrateOptions *options,
                             FsimCudaCalibration *out, GError **error);

/**
 * fsim_cuda_calibration_costs:
 *
 * The cost model from the fitted series: malloc = the cudaMalloc fit; free = the cudaFree fit less
 * the idle synchronisation, which @sync_ns carries; reserve = the mean median of reserve and
 * release; map = the fit of one handle (the model charges map_ns per handle plus map_per_gib_ns
 * per GiB, which is that fit summed over handles); unmap = the mean median per handle.  Series
 * without samples keep the defaults.
 */
FsimDeviceCosts fsim_cuda_calibration_costs(const FsimCudaCalibration *calibration);

/* The device spec a profile describes: the GPU's name, total memory, the free memory as capacity,
 * the minimum granularity and @calibration's costs. */
void fsim_cuda_calibration_spec(const FsimCudaCalibration *calibration, FsimDeviceSpec *out);

/**
 * fsim_cuda_profile_to_data:
 * @spec: the device ([device] and [costs] groups).
 * @calibration: (nullable): the measurements, written as comments and a [calibration] group.
 *
 * Returns: (transfer full): a key file that fsim_device_spec_parse() reads back as @spec.
 */
char *fsim_cuda_profile_to_data(const FsimDeviceSpec *spec, const FsimCudaCalibration *calibration);

/* Write fsim_cuda_profile_to_data() to @path atomically.  FALSE with FSIM_ERROR_IO. */
gboolean fsim_cuda_profile_write(const char *path, const FsimDeviceSpec *spec,
                                 const FsimCudaCalibration *calibration, GError **error);

G_END_DECLS
