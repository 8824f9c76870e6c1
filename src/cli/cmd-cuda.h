/* SPDX-License-Identifier: MIT */
/*
 * `fragsim cuda`: what its files share.  cmd-cuda.c dispatches and holds `info`; `replay`,
 * `native` and `calibrate` have a file each (cmd-cuda-replay.c, cmd-cuda-native.c,
 * cmd-cuda-calibrate.c).
 */
#pragma once

#include <glib.h>

#include "fragsim/json-writer.h"

#include "cli.h"
#include "cuda/cuda-backend.h"

G_BEGIN_DECLS

/* A latency as {count, total_ns, min_ns, mean_ns, p50_ns, p99_ns, max_ns, histogram}, where the
 * histogram lists [floor_ns, count] of the non-empty power-of-two buckets. */
void fsim_cmd_cuda_json_add_latency(FsimJsonWriter *builder, const char *name,
                                    const FsimLatency *latency, gint64 modelled_ns);

/* The GPU as {name, ...} under "gpu". */
void fsim_cmd_cuda_json_add_gpu(FsimJsonWriter *builder, const FsimCudaDriverInfo *info);

/* "+1.50 GiB", "-20.0 MiB", "0 B" */
/* Prints the JSON of `cuda native` and `cuda replay`: {"trace", "gpu", "runs": [...]}, where
 * @add_run adds the object of run @i (0 <= @i < @n). */
void fsim_cmd_cuda_print_runs(const FsimTrace *trace, const FsimCudaDriverInfo *info, guint n,
                              void (*add_run)(FsimJsonWriter *builder, guint i, gpointer data),
                              gpointer data);

char *fsim_cmd_cuda_format_size_delta(uint64_t value, uint64_t reference);

/* The members of `cuda native`'s runs (#FsimCudaNativeResult, after the mode), of `cuda
 * replay`'s measurements (#FsimCudaMeasurements, before the latencies) and of `cuda calibrate`'s
 * steps (#FsimCudaUsageStep); json-members.c. */
extern const FsimCliMember fsim_cmd_cuda_native_members[];
extern const FsimCliMember fsim_cmd_cuda_measured_members[];
extern const FsimCliMember fsim_cmd_cuda_usage_step_members[];

/* "@name": @value. */
void fsim_cmd_cuda_json_add_u64(FsimJsonWriter *builder, const char *name, uint64_t value);

/* A duration for people: "850 ns", "12.5 us", "3.20 ms", "1.50 s". */
char *fsim_cmd_cuda_format_ns(double ns);

/* What `cuda replay` and `cuda native` open after the trace: the devices of @trace to replay
 * (all, or @trace_device) in *@devices, then GPU @gpu (fsim_cuda_driver_open()); NULL, with
 * *@status set and the message printed, when either fails. */
FsimCudaDriver *fsim_cmd_cuda_open_trace(const char *command, FsimTrace *trace, gint trace_device,
                                         gint gpu, GArray **devices, int *status);

/* The subcommands, argv[0] being their name. */
int fsim_cmd_cuda_replay(int argc, char **argv);
int fsim_cmd_cuda_native(int argc, char **argv);
int fsim_cmd_cuda_calibrate(int argc, char **argv);

G_END_DECLS
