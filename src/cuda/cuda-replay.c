/* SPDX-License-Identifier: MIT */
/*
 * Replay on the GPU: one device of a trace through one policy whose device is the real GPU
 * (fsim_cuda_device_new(), given to the engine through FsimRunConfig.device_factory), and, in lock
 * step, the same policy on the simulated device with the same spec, so every difference between
 * the two runs is the device's: the driver refusing memory the model had, addresses that change a
 * policy's choice among equal blocks, and the time the calls really take.
 *
 * The GPU run's spec is named after the GPU and charges the costs of `-d` (a calibration profile
 * makes its modelled time directly comparable with the measured one); the model run's is the same
 * spec named "<GPU> (model)".  A driver failure other than a lack of memory stops the replay with
 * that failure, naming the event.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/engine.h"
#include "fragsim/trace.h"

#include "cuda-backend.h"

typedef struct {
    FsimCudaDriver *driver;
    FsimCudaDeviceOptions options;
} Factory;

static FsimDevice *
replay_device_factory(gpointer data, const FsimDeviceSpec *spec, GKeyFile *config, GError **error)
{
    Factory *factory = data;

    return fsim_cuda_device_new(factory->driver, spec, config, &factory->options, error);
}

void
fsim_cuda_replay_options_init(FsimCudaReplayOptions *options)
{
    memset(options, 0, sizeof(*options));
    options->policy = "bestfit";
    options->with_model = TRUE;
    fsim_cuda_device_options_init(&options->device);
}

void
fsim_cuda_replay_result_clear(FsimCudaReplayResult *result)
{
    g_clear_pointer(&result->policy, g_free);
    g_clear_pointer(&result->oom_message, g_free);
    g_clear_pointer(&result->gpu_engine, fsim_engine_free);
    g_clear_pointer(&result->model_engine, fsim_engine_free);
}

/* One engine of the replay and whether it stopped at an OOM. */
typedef struct {
    FsimEngine *engine;
    gboolean stopped;
} Side;

/* The device's own failure, if any, as the replay's error. */
static gboolean
replay_check_device(FsimEngine *engine, FsimTrace *trace, uint64_t event_index, GError **error)
{
    const GError *failure = fsim_cuda_device_error(fsim_engine_device(engine));

    if (failure == NULL)
        return TRUE;
    g_set_error(error, failure->domain, failure->code, "%s: event %" G_GUINT64_FORMAT ": %s",
                fsim_trace_path(trace), event_index, failure->message);
    return FALSE;
}

/* Process @ev on one side.  An OOM under fail_on_oom stops that side only. */
static gboolean
replay_side_process(Side *side, FsimTrace *trace, const FsimEvent *ev, FsimCudaReplayResult *out,
                    GError **error)
{
    g_autoptr(GError) local_error = NULL;

    if (side->stopped)
        return TRUE;
    if (fsim_engine_process(side->engine, ev, &local_error))
        return TRUE;
    if (g_error_matches(local_error, FSIM_ERROR, FSIM_ERROR_OOM)) {
        side->stopped = TRUE;
        if (out->oom_message == NULL)
            out->oom_message = g_strdup(local_error->message);
        return TRUE;
    }
    g_set_error(error, local_error->domain, local_error->code, "%s: %s", fsim_trace_path(trace),
                local_error->message);
    return FALSE;
}

/* Finish a side; one stopped at an OOM is finished too, for its metrics up to there. */
static gboolean
replay_side_finish(Side *side, GError **error)
{
    if (fsim_engine_finish(side->engine, side->stopped ? NULL : error))
        return TRUE;
    return side->stopped;
}

static gboolean
replay_run(FsimCudaDriver *driver, FsimTrace *trace, uint32_t trace_device,
           const FsimCudaReplayOptions *options, FsimCudaReplayResult *out, Side *gpu, Side *model,
           GError **error)
{
    g_autoptr(FsimTraceStream) stream = NULL;
    GError *local_error = NULL;
    Factory factory = {driver, options->device};
    FsimRunConfig config;
    FsimEvent ev;
    uint64_t last_index = 0;

    if (!fsim_cuda_spec_for_gpu(driver, options->model, &out->gpu_spec, error))
        return FALSE;
    fsim_run_config_init(&config);
    config.policy = options->policy;
    config.config = options->config;
    config.device = out->gpu_spec;
    config.initial_state = fsim_trace_initial_state(trace, trace_device);
    config.fail_on_oom = options->fail_on_oom;
    config.paranoid = config.paranoid || options->paranoid;
    if (options->with_model) {
        FsimRunConfig model_config = config;

        out->has_model = TRUE;
        out->model_spec = out->gpu_spec;
        g_snprintf(out->model_spec.name, sizeof(out->model_spec.name), "%.55s (model)",
                   out->gpu_spec.name);
        model_config.device = out->model_spec;
        model->engine = fsim_engine_new(&model_config, error);
        if (model->engine == NULL)
            return FALSE;
    }
    config.device_factory = replay_device_factory;
    config.device_factory_data = &factory;
    gpu->engine = fsim_engine_new(&config, error);
    if (gpu->engine == NULL)
        return FALSE;
    if (options->attach != NULL) {
        if (!options->attach(options->attach_data, gpu->engine, TRUE, error))
            return FALSE;
        if (model->engine != NULL &&
            !options->attach(options->attach_data, model->engine, FALSE, error))
            return FALSE;
    }

    stream = fsim_trace_stream_open(trace, trace_device, error);
    if (stream == NULL)
        return FALSE;
    while ((!gpu->stopped || (model->engine != NULL && !model->stopped)) &&
           fsim_trace_stream_next(stream, &ev, &local_error)) {
        last_index = ev.index;
        if (!replay_side_process(gpu, trace, &ev, out, error) ||
            !replay_check_device(gpu->engine, trace, ev.index, error))
            return FALSE;
        if (model->engine != NULL && !replay_side_process(model, trace, &ev, out, error))
            return FALSE;
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    if (!replay_side_finish(gpu, error) ||
        !replay_check_device(gpu->engine, trace, last_index, error))
        return FALSE;
    return model->engine == NULL || replay_side_finish(model, error);
}

gboolean
fsim_cuda_replay(FsimCudaDriver *driver, FsimTrace *trace, uint32_t trace_device,
                 const FsimCudaReplayOptions *options, FsimCudaReplayResult *out, GError **error)
{
    Side gpu = {NULL, FALSE};
    Side model = {NULL, FALSE};
    gboolean ok;

    memset(out, 0, sizeof(*out));
    out->policy = g_strdup(options->policy);
    out->trace_device = trace_device;
    out->gpu.first_oom_event = -1;
    out->model.first_oom_event = -1;
    ok = replay_run(driver, trace, trace_device, options, out, &gpu, &model, error);
    if (gpu.engine != NULL) {
        FsimDevice *device = fsim_engine_device(gpu.engine);
        const FsimCudaMeasurements *measured = fsim_cuda_device_measurements(device);

        /* The GPU's memory goes back now, before the next run; the engine stays readable. */
        fsim_cuda_device_close(device);
        if (ok && !replay_check_device(gpu.engine, trace,
                                       fsim_engine_counters(gpu.engine)->event_index, error))
            ok = FALSE;
        out->gpu = *fsim_engine_metrics(gpu.engine);
        out->gpu_oom_stopped = gpu.stopped;
        if (measured != NULL)
            out->measured = *measured;
        out->gpu_engine = g_steal_pointer(&gpu.engine);
    }
    if (model.engine != NULL) {
        out->model = *fsim_engine_metrics(model.engine);
        out->model_oom_stopped = model.stopped;
        out->model_engine = g_steal_pointer(&model.engine);
    }
    return ok;
}
