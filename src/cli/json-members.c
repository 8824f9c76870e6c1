/* SPDX-License-Identifier: MIT */
/*
 * The structs the commands print with --json as tables of members: each lists, in the order of
 * the output, a struct's integer members with their JSON keys, and fsim_cli_json_members()
 * writes any of them, as fsim_cli_json_add_metrics() writes the metrics.  A command adds what
 * is not a plain integer (names, nested objects, latencies) around them.
 */
#include <glib.h>

#include <stddef.h>
#include <string.h>

#include "cli.h"
#include "cmd-cuda.h"

/* `info`: a trace device's counts, after its events per action */
const FsimCliMember fsim_cli_trace_device_members[] = {
    {"streams", FSIM_CLI_MEMBER_U64, offsetof(FsimTraceDeviceInfo, streams)},
    {"segments", FSIM_CLI_MEMBER_U64, offsetof(FsimTraceDeviceInfo, segments)},
    {"reserved_bytes", FSIM_CLI_MEMBER_U64, offsetof(FsimTraceDeviceInfo, reserved_bytes)},
    {"allocs", FSIM_CLI_MEMBER_U64, offsetof(FsimTraceDeviceInfo, allocs)},
    {"peak_requested_bytes", FSIM_CLI_MEMBER_U64,
     offsetof(FsimTraceDeviceInfo, peak_requested_bytes)},
    {"duration_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimTraceDeviceInfo, duration_ns)},
    {NULL, 0, 0},
};
G_STATIC_ASSERT(sizeof(FsimTime) == sizeof(uint64_t));

/* `devices` and `cuda calibrate`: a device's costs, as a profile's [costs] names them */
const FsimCliMember fsim_cli_device_costs_members[] = {
    {"malloc_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, malloc_ns)},
    {"malloc_per_gib_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, malloc_per_gib_ns)},
    {"free_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, free_ns)},
    {"free_per_gib_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, free_per_gib_ns)},
    {"sync_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, sync_ns)},
    {"reserve_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, reserve_ns)},
    {"map_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, map_ns)},
    {"map_per_gib_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, map_per_gib_ns)},
    {"unmap_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, unmap_ns)},
    {"unmap_per_gib_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimDeviceCosts, unmap_per_gib_ns)},
    {NULL, 0, 0},
};

/* `cuda native`: a run, after its mode */
const FsimCliMember fsim_cmd_cuda_native_members[] = {
    {"trace_device", FSIM_CLI_MEMBER_U32, offsetof(FsimCudaNativeResult, trace_device)},
    {"events", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaNativeResult, events)},
    {"allocs", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaNativeResult, allocs)},
    {"frees", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaNativeResult, frees)},
    {"ooms", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaNativeResult, ooms)},
    {"first_oom_event", FSIM_CLI_MEMBER_OPT_I64, offsetof(FsimCudaNativeResult, first_oom_event)},
    {"unmatched_frees", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaNativeResult, unmatched_frees)},
    {"empty_caches", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaNativeResult, empty_caches)},
    {"peak_requested_bytes", FSIM_CLI_MEMBER_U64,
     offsetof(FsimCudaNativeResult, peak_requested_bytes)},
    {"peak_used_bytes", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaNativeResult, peak_used_bytes)},
    {"peak_reserved_bytes", FSIM_CLI_MEMBER_U64,
     offsetof(FsimCudaNativeResult, peak_reserved_bytes)},
    {"pool_used_high_bytes", FSIM_CLI_MEMBER_U64,
     offsetof(FsimCudaNativeResult, pool_used_high_bytes)},
    {NULL, 0, 0},
};

/* `cuda replay`: what was measured on the GPU, before the calls' latencies */
const FsimCliMember fsim_cmd_cuda_measured_members[] = {
    {"alloc_time_ns", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaMeasurements, measured_time_ns)},
    {"peak_used_bytes", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaMeasurements, peak_used_bytes)},
    {"baseline_used_bytes", FSIM_CLI_MEMBER_U64,
     offsetof(FsimCudaMeasurements, baseline_used_bytes)},
    {"usage_samples", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaMeasurements, usage_samples)},
    {"handles_created", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaMeasurements, handles_created)},
    {"peak_handles", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaMeasurements, peak_handles)},
    {NULL, 0, 0},
};

/* `cuda calibrate`: a step of the used-memory probe */
const FsimCliMember fsim_cmd_cuda_usage_step_members[] = {
    {"size", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaUsageStep, size)},
    {"count", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaUsageStep, count)},
    {"used_bytes", FSIM_CLI_MEMBER_U64, offsetof(FsimCudaUsageStep, used_bytes)},
    {NULL, 0, 0},
};

uint64_t
fsim_cli_member_u64(const FsimCliMember *member, const void *object)
{
    const void *field = (const char *)object + member->offset;

    g_return_val_if_fail(member->kind == FSIM_CLI_MEMBER_U64 || member->kind == FSIM_CLI_MEMBER_U32,
                         0);
    return member->kind == FSIM_CLI_MEMBER_U32 ? *(const uint32_t *)field
                                               : *(const uint64_t *)field;
}

/* Add the value of a @kind member at @field. */
static void
json_add_value(FsimJsonWriter *builder, FsimCliMemberKind kind, const void *field)
{
    switch (kind) {
    case FSIM_CLI_MEMBER_U32:
        fsim_json_add_int_value(builder, *(const uint32_t *)field);
        break;
    case FSIM_CLI_MEMBER_U64:
        fsim_json_add_int_value(builder, (gint64) * (const uint64_t *)field);
        break;
    case FSIM_CLI_MEMBER_DOUBLE:
        fsim_json_add_double_value(builder, *(const double *)field);
        break;
    case FSIM_CLI_MEMBER_OPT_I64:
        if (*(const int64_t *)field < 0)
            fsim_json_add_null_value(builder);
        else
            fsim_json_add_int_value(builder, *(const int64_t *)field);
        break;
    }
}

void
fsim_cli_json_member(FsimJsonWriter *builder, const FsimCliMember *member, const void *object)
{
    fsim_json_set_member_name(builder, member->name);
    json_add_value(builder, member->kind, (const char *)object + member->offset);
}

void
fsim_cli_json_members(FsimJsonWriter *builder, const FsimCliMember *members, const void *object)
{
    for (const FsimCliMember *member = members; member->name != NULL; member++)
        fsim_cli_json_member(builder, member, object);
}

void
fsim_cli_json_member_array(FsimJsonWriter *builder, const char *name, const FsimCliMember *members,
                           GArray *objects)
{
    fsim_cli_json_begin_array(builder, name);
    for (guint i = 0; i < objects->len; i++) {
        fsim_json_begin_object(builder);
        fsim_cli_json_members(builder, members,
                              objects->data +
                                  (gsize)i * g_array_get_element_size((GArray *)objects));
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
}

/* The metrics' own table (fragsim/metrics.h) walked the same way. */
void
fsim_cli_json_add_metrics(FsimJsonWriter *builder, const FsimMetrics *metrics)
{
    static const FsimCliMemberKind kinds[] = {
        [FSIM_METRIC_U64] = FSIM_CLI_MEMBER_U64,
        [FSIM_METRIC_DOUBLE] = FSIM_CLI_MEMBER_DOUBLE,
        [FSIM_METRIC_OPTIONAL_I64] = FSIM_CLI_MEMBER_OPT_I64,
    };
    gsize n;
    const FsimMetricInfo *info = fsim_metrics_list(&n);

    for (gsize i = 0; i < n; i++) {
        fsim_json_set_member_name(builder, info[i].name);
        json_add_value(builder, kinds[info[i].kind], (const char *)metrics + info[i].offset);
    }
}
