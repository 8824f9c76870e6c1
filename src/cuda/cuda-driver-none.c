/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver of a fragsim built without the CUDA toolkit: there is none.  `fragsim cuda`
 * then says how to get one; everything else about the backend (the device over a driver, replay,
 * calibration maths) is still built and tested.
 */
#include <glib.h>

#include "cuda-backend.h"

gboolean
fsim_cuda_backend_built(void)
{
    return FALSE;
}

FsimCudaDriver *
fsim_cuda_driver_open(int ordinal, GError **error)
{
    (void)ordinal;
    g_set_error_literal(error, FSIM_CUDA_ERROR, FSIM_CUDA_ERROR_UNSUPPORTED,
                        "this fragsim was built without the CUDA backend: the CUDA toolkit was "
                        "not found when it was configured (see docs/cuda.md)");
    return NULL;
}
