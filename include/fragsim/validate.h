/* SPDX-License-Identifier: MIT */
/*
 * fragsim: validation of the PyTorch allocator models against recorded traces.
 *
 * `fragsim validate SNAPSHOT` is the proof that the `caching` and `expandable` policies are
 * PyTorch's allocator and not a look-alike.  For each device of a trace it rebuilds the allocator
 * state at trace start, replays the recorded inputs through the policy the snapshot's
 * allocator_settings select (with their knobs), gives each new segment the address the driver
 * gave it (the recorded segment_alloc / segment_map), and checks that every recorded `alloc`
 * address, `segment_alloc`, `segment_free`, `segment_map`, `segment_unmap` and `oom` happens
 * where the model says, and nothing else does.
 *
 * WHERE A RECORDED OUTCOME BELONGS.  PyTorch records a decision before the entry that caused it
 * (segment_alloc, then the alloc it was for), so an outcome belongs to the next input event at or
 * after its index.  A burst of segment_free / segment_unmap entries belongs to the empty_cache
 * event the reader inferred at the burst's first index (FSIM_EVF_INFERRED): the validator runs
 * those events, so the recorded releases happen where recorded.  An `oom` entry has no `alloc`
 * entry of its own (the allocation failed); the validator replays it as an allocation of the
 * recorded (rounded) size at the entry's index, and expects the model to fail it.
 *
 * THE DEVICE.  The trace does not say how large the GPU was.  The model runs on a device whose
 * capacity is the recorded reserved memory at the first `oom` plus the free memory PyTorch saw
 * there (`device_free`), so it runs out exactly where the recording did; without an OOM, the
 * peak of the recorded reserved memory, so it never runs out where the recording did not.  The
 * device's total memory (which sizes expandable reservations) is that capacity too.
 */
#pragma once

#include <glib.h>

#include "fragsim/trace.h"
#include "fragsim/types.h"

G_BEGIN_DECLS

/**
 * FsimValidateKind:
 *
 * What is checked.  The names (fsim_validate_kind_name()) are the JSON keys of `validate --json`.
 */
typedef enum {
    FSIM_VALIDATE_ALLOC = 0,     /* "allocs": the address of every recorded alloc */
    FSIM_VALIDATE_SEGMENT_ALLOC, /* "segment_allocs" */
    FSIM_VALIDATE_SEGMENT_FREE,  /* "segment_frees" */
    FSIM_VALIDATE_SEGMENT_MAP,   /* "segment_maps" */
    FSIM_VALIDATE_SEGMENT_UNMAP, /* "segment_unmaps" */
    FSIM_VALIDATE_OOM,           /* "ooms" (text output and first_divergence only) */
    FSIM_VALIDATE_KIND_COUNT,
} FsimValidateKind;

/* Returns: the JSON key of @kind (`allocs`, `segment_allocs`, ...). */
const char *fsim_validate_kind_name(FsimValidateKind kind);

/* Returns: the recorded action @kind checks (`alloc`, `segment_alloc`, ..., `oom`). */
const char *fsim_validate_kind_action(FsimValidateKind kind);

/**
 * FsimValidateSide:
 * @present: whether this side did it at all.
 * @index: the recorded side: the entry's index in the trace (0 for the model side).
 * @addr, @size: the block or range (OOM: address 0, size the rounded request).
 */
typedef struct {
    gboolean present;
    uint64_t index;
    FsimAddr addr;
    uint64_t size;
} FsimValidateSide;

/**
 * FsimDivergence:
 * @found: whether there was a divergence (the other fields are meaningless otherwise).
 * @event_index: the index of the input event being replayed.
 * @kind: what differed.
 * @recorded: what the trace has (absent: the model did something the trace does not have).
 * @model: what the model did (absent: the model did not do what the trace has).
 */
typedef struct {
    gboolean found;
    uint64_t event_index;
    FsimValidateKind kind;
    FsimValidateSide recorded;
    FsimValidateSide model;
} FsimDivergence;

typedef struct {
    uint64_t matched;
    uint64_t total; /* recorded entries of the kind */
} FsimValidateCount;

/**
 * FsimValidateDevice:
 * @device: the trace's device index.
 * @policy: `caching` or `expandable`.
 * @alloc_conf: the knobs, as a PYTORCH_CUDA_ALLOC_CONF string (empty for the defaults).
 * @exact: nothing diverged.
 * @counts: matched / total per kind.
 * @first_divergence: the first difference in trace order.
 * @events: input events replayed (the replayed OOM allocations included).
 * @capacity_bytes: the capacity the model ran with; @capacity_from_oom says how it was chosen.
 * @peak_reserved_bytes: what the model reserved at most (equal to the recording's when exact).
 */
typedef struct {
    uint32_t device;
    char *policy;
    char *alloc_conf;
    gboolean exact;
    FsimValidateCount counts[FSIM_VALIDATE_KIND_COUNT];
    FsimDivergence first_divergence;
    uint64_t events;
    uint64_t capacity_bytes;
    gboolean capacity_from_oom;
    uint64_t peak_reserved_bytes;
} FsimValidateDevice;

/**
 * FsimValidateReport:
 * @path: the trace.
 * @exact: every device is exact.
 * @devices: of #FsimValidateDevice, by device index.
 * @platform: `cuda` (PyTorch's allocator) or `npu` (torch_npu's), the model's variant.
 * @platform_detected: @platform was told from the trace (fsim_trace_detect_platform()), not
 *     given.
 * @platform_why: when detected, what told it (a static phrase).
 * @alloc_conf_given: the model ran with settings the user gave instead of the recorded ones.
 */
typedef struct {
    char *path;
    gboolean exact;
    GArray *devices;
    const char *platform;
    gboolean platform_detected;
    const char *platform_why;
    gboolean alloc_conf_given;
} FsimValidateReport;

void fsim_validate_report_free(FsimValidateReport *report);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimValidateReport, fsim_validate_report_free)

/**
 * fsim_validate_trace:
 * @trace: an opened trace (any format; only those with recorded outcomes say much).
 * @error: the trace's read errors; FSIM_ERROR_UNSUPPORTED when the recorded allocator settings
 *     are not understood or the state at trace start cannot be rebuilt.
 *
 * Replays every device of @trace and compares.  A divergence is a result, not an error.
 *
 * Returns: (transfer full) (nullable): the report; free with fsim_validate_report_free().
 */
FsimValidateReport *fsim_validate_trace(FsimTrace *trace, GError **error);

/* The same with the platform given (`cuda` or `npu`), or told from the trace when NULL. */
FsimValidateReport *fsim_validate_trace_on(FsimTrace *trace, const char *platform, GError **error);

/* The same with the allocator settings given as a PYTORCH_CUDA_ALLOC_CONF string instead of
 * the recorded ones (%NULL: the recorded ones), for a snapshot that did not record them. */
FsimValidateReport *fsim_validate_trace_with(FsimTrace *trace, const char *platform,
                                             const char *alloc_conf, GError **error);

/**
 * fsim_trace_detect_platform:
 * @trace: an opened trace.
 * @error: the trace's read errors.
 *
 * Which allocator recorded @trace: torch_npu's pads each request by 32 bytes before rounding,
 * which shows in the blocks of the initial state and between allocations recorded one after the
 * other; the platform the most such places agree with, `cuda` when none tells.  A stack whose
 * frames pass through torch_npu's package says `npu` before any address is counted.  Reads every
 * device's stream once.
 *
 * Returns: (nullable): `npu` or `cuda` (static strings), NULL on a read error.
 */
const char *fsim_trace_detect_platform(FsimTrace *trace, GError **error);

/* The same, with @why set to a static phrase saying what told (`its frames name torch_npu`,
 * `its addresses show torch_npu's 32-byte padding`). */
const char *fsim_trace_detect_platform_why(FsimTrace *trace, const char **why, GError **error);

/* fsim_trace_open() and fsim_validate_trace(). */
FsimValidateReport *fsim_validate_file(const char *path, GError **error);

G_END_DECLS
