/* SPDX-License-Identifier: MIT */
/*
 * Which allocator recorded a snapshot: PyTorch's CUDA caching allocator or torch_npu's fork of it
 * (Ascend NPUs), told from the recorded addresses and blocks (see fragsim/validate.h).
 *
 * torch_npu pads every request by 32 bytes before rounding it to 512 (npu-allocator.md rule 1),
 * which shows wherever the two roundings differ (a request whose size mod 512 is 0 or above 480):
 * a block of the initial state has the padded size, and two allocations placed one after the
 * other in a segment are the padded size apart.  Each such place counts for one platform or the
 * other; the platform with more places wins, CUDA on a tie (no evidence).  Before the addresses,
 * the frames: a stack that passes through torch_npu's own Python code was recorded by torch_npu.
 */
#include <glib.h>

#include "fragsim/trace.h"
#include "fragsim/validate.h"

#define PLATFORM_PAD  32
#define PLATFORM_UNIT 512

static uint64_t
platform_round(uint64_t size)
{
    return size < PLATFORM_UNIT ? PLATFORM_UNIT
                                : (size + PLATFORM_UNIT - 1) / PLATFORM_UNIT * PLATFORM_UNIT;
}

/* One observation: @size bytes requested took @span bytes. */
static void
platform_vote(uint64_t size, uint64_t span, uint64_t *npu, uint64_t *cuda)
{
    uint64_t padded = platform_round(size + PLATFORM_PAD);
    uint64_t plain = platform_round(size);

    if (padded == plain)
        return;
    if (span == padded)
        (*npu)++;
    else if (span == plain)
        (*cuda)++;
}

static gboolean
platform_scan_device(FsimTrace *trace, uint32_t device, uint64_t *npu, uint64_t *cuda,
                     GError **error)
{
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    g_autoptr(FsimTraceStream) stream = NULL;
    GError *local_error = NULL;
    FsimAddr last_addr = 0;
    uint64_t last_size = 0;
    const FsimEvent *evs;
    gsize n;

    for (gsize i = 0; state != NULL && i < state->n_blocks; i++)
        platform_vote(state->blocks[i].requested, state->blocks[i].size, npu, cuda);
    stream = fsim_trace_stream_open(trace, device, error);
    if (stream == NULL)
        return FALSE;
    /* In place, in the stream's batches: only allocations are looked at. */
    while ((n = fsim_trace_stream_batch(stream, &evs, &local_error)) > 0) {
        for (gsize i = 0; i < n; i++) {
            const FsimEvent *ev = &evs[i];

            if (ev->kind != FSIM_EV_ALLOC || ev->addr == 0 ||
                (ev->flags & FSIM_EVF_RECORDED_OOM) != 0)
                continue;
            if (last_addr != 0 && ev->addr > last_addr)
                platform_vote(last_size, ev->addr - last_addr, npu, cuda);
            last_addr = ev->addr;
            last_size = ev->size;
        }
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    return TRUE;
}

const char *
fsim_trace_detect_platform_why(FsimTrace *trace, const char **why, GError **error)
{
    gsize n_devices;
    const uint32_t *devices = fsim_trace_devices(trace, &n_devices);
    uint64_t npu = 0;
    uint64_t cuda = 0;

    *why = "no sign of torch_npu";
    for (gsize d = 0; d < n_devices; d++) {
        if (!platform_scan_device(trace, devices[d], &npu, &cuda, error))
            return NULL;
    }
    if (trace->frames_name_torch_npu) {
        *why = "its frames name torch_npu";
        return "npu";
    }
    if (npu > cuda) {
        *why = "its addresses show torch_npu's 32-byte padding";
        return "npu";
    }
    return "cuda";
}

const char *
fsim_trace_detect_platform(FsimTrace *trace, GError **error)
{
    const char *why;

    return fsim_trace_detect_platform_why(trace, &why, error);
}
