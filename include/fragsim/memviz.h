/* SPDX-License-Identifier: MIT */
/*
 * fragsim: a simulated run exported as a PyTorch memory snapshot, for pytorch.org/memory_viz.
 *
 * The exporter is an observer of one engine.  It writes what PyTorch's
 * torch.cuda.memory._dump_snapshot() writes (reference notes §3.2), from the simulation instead
 * of a real GPU:
 *
 *   {"device_traces": [[entry, ...]],     one list per device index; the run's at its index
 *    "segments": [segment, ...],          the device memory held at the end, with its blocks
 *    "allocator_settings": {...}}         PyTorch's keys, plus fragsim_policy and fragsim_device
 *
 * Trace entries are dicts {action, addr, size, stream, time_us, frames} with the actions
 * `segment_alloc` / `segment_free` (cudaMalloc / cudaFree of a segment, size rounded to the
 * device's pages), `segment_map` / `segment_unmap` (pages mapped into or out of a reservation),
 * `alloc`, `free_requested`, `free_completed` (size: the bytes requested) and `oom` (no addr;
 * size and device_free instead).  Segment actions come before the alloc that needed them and after
 * the free that released them, as PyTorch records them.  time_us is simulated time.  Segments
 * are sorted by address: a cudaMalloc'd segment each, and one expandable segment per contiguous
 * mapped range; their blocks cover them, with `inactive` blocks for the free gaps.  The state of
 * a trace's start (a snapshot that began mid-run) is included as PyTorch would show it: those
 * segments and blocks are in `segments` without trace entries.
 *
 * The pickle uses only the opcodes MemoryViz.js reads (protocol 2; see src/readers/pickle.h), so
 * the viewer opens it; fragsim reads it back as a `torch` trace.  It is written to a temporary
 * file beside @path and renamed into place by fsim_memviz_export_finish(): a failed or abandoned
 * export leaves no file.  The file gets the permissions the process's umask gives new files.
 */
#pragma once

#include <glib.h>

#include "fragsim/engine.h"
#include "fragsim/trace.h"

G_BEGIN_DECLS

typedef struct FsimMemvizExport FsimMemvizExport;

/**
 * fsim_memviz_export_new:
 * @path: the snapshot file to write (conventionally `*.pickle`).
 * @engine: a new engine that has not processed any event; borrowed until finish or free.
 * @device_index: the device index to record the run under (the trace device it replays).
 * @error: FSIM_ERROR_IO when the file cannot be created.
 *
 * Creates the temporary file and attaches the exporter to @engine.
 *
 * Returns: (transfer full) (nullable): the exporter; free with fsim_memviz_export_free().
 */
FsimMemvizExport *fsim_memviz_export_new(const char *path, FsimEngine *engine,
                                         uint32_t device_index, GError **error);

/**
 * fsim_memviz_export_finish:
 * @exporter: an exporter whose engine has processed its events (finished or stopped at an OOM).
 * @error: FSIM_ERROR_IO (a write or the rename failed).
 *
 * Writes the final state and renames the file into place.  Call it once.
 *
 * Returns: %FALSE with @error set on failure; the temporary file is then removed.
 */
gboolean fsim_memviz_export_finish(FsimMemvizExport *exporter, GError **error);

/**
 * fsim_memviz_export_set_trace:
 * @trace: (nullable): the trace being replayed (borrowed until finish or free).
 *
 * Gives the exporter the trace's allocation stacks: entries and blocks then carry the `frames`
 * of the allocation they belong to (segment actions those of the allocation that caused them),
 * as PyTorch records them, so memory_viz shows the code.  Without it `frames` are empty.
 */
void fsim_memviz_export_set_trace(FsimMemvizExport *exporter, const FsimTrace *trace);

/* Returns: (transfer none): the path the snapshot is (or will be) written to. */
const char *fsim_memviz_export_path(const FsimMemvizExport *exporter);

/* Free (NULL is a no-op); an unfinished export's temporary file is removed. */
void fsim_memviz_export_free(FsimMemvizExport *exporter);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimMemvizExport, fsim_memviz_export_free)

G_END_DECLS
