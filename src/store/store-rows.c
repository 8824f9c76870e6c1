/* SPDX-License-Identifier: MIT */
/*
 * The rows of a run's tables as tables of columns: each stored struct (a sample, an OOM, a mark,
 * a phase, the breakdown, a size class, a segment action, a block, a recommendation) is listed
 * once as its columns in the order of its INSERT and SELECT statements (sqlite.c), and that list
 * binds a row when store-run.c writes it and fills one when store-read.c reads it back, so a
 * column is never written one way and read another.
 */
#include <glib.h>

#include <stddef.h>
#include <string.h>

#include "fragsim/store.h"

#include "store-private.h"

#define COLUMN(kind, type, field)           \
    {                                       \
        STORE_##kind, offsetof(type, field) \
    }
#define LAYOUT(columns)                \
    {                                  \
        columns, G_N_ELEMENTS(columns) \
    }

/* the `runs` columns of the SELECTs of runs (sqlite.c); the metric columns follow them */
static const StoreColumn run_columns[] = {
    COLUMN(U64, FsimStoredRun, id),
    COLUMN(TEXT, FsimStoredRun, trace),
    COLUMN(TEXT, FsimStoredRun, trace_format),
    COLUMN(UINT, FsimStoredRun, trace_device),
    COLUMN(TEXT, FsimStoredRun, policy),
    COLUMN(TEXT, FsimStoredRun, device),
    COLUMN(TEXT, FsimStoredRun, device_description),
    COLUMN(U64, FsimStoredRun, capacity_bytes),
    COLUMN(U64, FsimStoredRun, total_bytes),
    COLUMN(U64, FsimStoredRun, granularity),
    COLUMN(TEXT, FsimStoredRun, knobs),
    COLUMN(OPT_I64, FsimStoredRun, seed),
    COLUMN(STATUS, FsimStoredRun, status),
    COLUMN(TEXT, FsimStoredRun, message),
    COLUMN(TEXT, FsimStoredRun, created_at),
    COLUMN(TEXT, FsimStoredRun, finished_at),
    COLUMN(TEXT, FsimStoredRun, fragsim_version),
    COLUMN(U64, FsimStoredRun, segment_actions),
    COLUMN(U64, FsimStoredRun, segment_actions_stored),
    COLUMN(U64, FsimStoredRun, blocks),
    COLUMN(U64, FsimStoredRun, blocks_stored),
    COLUMN(PRESENT, FsimStoredRun, has_metrics),
    COLUMN(TEXT, FsimStoredRun, config),
    COLUMN(TEXT, FsimStoredRun, label),
    COLUMN(TEXT, FsimStoredRun, trace_sha256),
    COLUMN(TEXT, FsimStoredRun, job),
};
G_STATIC_ASSERT(G_N_ELEMENTS(run_columns) == RUN_COLUMNS);
static const StoreColumn sample_columns[] = {
    COLUMN(U64, FsimStoredSample, event_index),   COLUMN(U64, FsimStoredSample, event_index_last),
    COLUMN(U64, FsimStoredSample, events),        COLUMN(U64, FsimStoredSample, time),
    COLUMN(U64, FsimStoredSample, time_last),     COLUMN(U64, FsimStoredSample, requested),
    COLUMN(U64, FsimStoredSample, allocated),     COLUMN(U64, FsimStoredSample, reserved),
    COLUMN(U64, FsimStoredSample, requested_min), COLUMN(U64, FsimStoredSample, requested_max),
    COLUMN(U64, FsimStoredSample, allocated_min), COLUMN(U64, FsimStoredSample, allocated_max),
    COLUMN(U64, FsimStoredSample, reserved_min),  COLUMN(U64, FsimStoredSample, reserved_max),
};
static const StoreColumn oom_columns[] = {
    COLUMN(U64, FsimOomRecord, event_index),
    COLUMN(U64, FsimOomRecord, time),
    COLUMN(U64, FsimOomRecord, id),
    COLUMN(U64, FsimOomRecord, size),
    COLUMN(U64, FsimOomRecord, stream),
    COLUMN(U64, FsimOomRecord, reserved_bytes),
    COLUMN(U64, FsimOomRecord, allocated_bytes),
    COLUMN(U64, FsimOomRecord, requested_bytes),
    COLUMN(U64, FsimOomRecord, largest_free_block),
    COLUMN(U64, FsimOomRecord, device_free_bytes),
};
static const StoreColumn mark_columns[] = {
    COLUMN(U64, FsimStoredMark, event_index),
    COLUMN(U64, FsimStoredMark, time),
    COLUMN(TEXT, FsimStoredMark, label),
};
static const StoreColumn phase_columns[] = {
    COLUMN(TEXT, FsimStoredPhase, label),
    COLUMN(U64, FsimStoredPhase, event_index),
    COLUMN(U64, FsimStoredPhase, event_index_last),
    COLUMN(U64, FsimStoredPhase, events),
    COLUMN(U64, FsimStoredPhase, time),
    COLUMN(U64, FsimStoredPhase, time_last),
    COLUMN(U64, FsimStoredPhase, peak_requested_bytes),
    COLUMN(U64, FsimStoredPhase, peak_allocated_bytes),
    COLUMN(U64, FsimStoredPhase, peak_reserved_bytes),
    COLUMN(U64, FsimStoredPhase, reserved_bytes_end),
    COLUMN(U64, FsimStoredPhase, driver_calls),
    COLUMN(U64, FsimStoredPhase, ooms),
};
static const StoreColumn breakdown_columns[] = {
    COLUMN(OPT_I64, FsimStoredBreakdown, event_index),
    COLUMN(U64, FsimStoredBreakdown, time),
    COLUMN(U64, FsimStoredBreakdown, reserved_bytes),
    COLUMN(U64, FsimStoredBreakdown, live_requested_bytes),
    COLUMN(U64, FsimStoredBreakdown, rounding_bytes),
    COLUMN(U64, FsimStoredBreakdown, free_releasable_bytes),
    COLUMN(U64, FsimStoredBreakdown, free_pinned_bytes),
};
static const StoreColumn size_columns[] = {
    COLUMN(UINT, FsimStoredSizeBucket, log2),
    COLUMN(U64, FsimStoredSizeBucket, count),
    COLUMN(U64, FsimStoredSizeBucket, bytes),
};
static const StoreColumn segment_columns[] = {
    COLUMN(OPT_I64, FsimStoredSegment, event_index),
    COLUMN(U64, FsimStoredSegment, time),
    COLUMN(ACTION, FsimStoredSegment, action),
    COLUMN(U64, FsimStoredSegment, addr),
    COLUMN(U64, FsimStoredSegment, size),
};
static const StoreColumn block_columns[] = {
    COLUMN(U64, FsimStoredBlock, id),         COLUMN(U64, FsimStoredBlock, addr),
    COLUMN(U64, FsimStoredBlock, size),       COLUMN(U64, FsimStoredBlock, requested),
    COLUMN(U64, FsimStoredBlock, stream),     COLUMN(OPT_I64, FsimStoredBlock, alloc_event),
    COLUMN(U64, FsimStoredBlock, alloc_time), COLUMN(OPT_I64, FsimStoredBlock, free_event),
    COLUMN(U64, FsimStoredBlock, free_time),
};

/* tune's recommendations (store-recommend.c), as fsim_store_recommendations() selects them */
static const StoreColumn recommendation_columns[] = {
    COLUMN(U64, FsimStoredRecommendation, id),
    COLUMN(TEXT, FsimStoredRecommendation, trace),
    COLUMN(UINT, FsimStoredRecommendation, trace_device),
    COLUMN(TEXT, FsimStoredRecommendation, device),
    COLUMN(OPT_I64, FsimStoredRecommendation, default_run_id),
    COLUMN(OPT_I64, FsimStoredRecommendation, run_id),
    COLUMN(TEXT, FsimStoredRecommendation, config),
    COLUMN(TEXT, FsimStoredRecommendation, env),
    COLUMN(OPT_I64, FsimStoredRecommendation, needed_bytes),
    COLUMN(OPT_I64, FsimStoredRecommendation, saving_bytes),
    COLUMN(OPT_I64, FsimStoredRecommendation, candidates),
    COLUMN(TEXT, FsimStoredRecommendation, created_at),
};
/* what fsim_store_add_recommendation() writes (store-recommend.c), before its created_at */
static const StoreColumn recommendation_info_columns[] = {
    COLUMN(TEXT, FsimStoreRecommendationInfo, trace),
    COLUMN(UINT, FsimStoreRecommendationInfo, trace_device),
    COLUMN(TEXT, FsimStoreRecommendationInfo, device),
    COLUMN(OPT_I64, FsimStoreRecommendationInfo, default_run_id),
    COLUMN(OPT_I64, FsimStoreRecommendationInfo, run_id),
    COLUMN(TEXT, FsimStoreRecommendationInfo, config),
    COLUMN(TEXT, FsimStoreRecommendationInfo, env),
    COLUMN(U64, FsimStoreRecommendationInfo, needed_bytes),
    COLUMN(U64, FsimStoreRecommendationInfo, saving_bytes),
    COLUMN(U64, FsimStoreRecommendationInfo, candidates),
};
G_STATIC_ASSERT(sizeof(uint32_t) == sizeof(guint)); /* trace_device, bound as UINT */

const StoreRowLayout store_run_row = LAYOUT(run_columns);
const StoreRowLayout store_sample_row = LAYOUT(sample_columns);
const StoreRowLayout store_oom_row = LAYOUT(oom_columns);
const StoreRowLayout store_mark_row = LAYOUT(mark_columns);
const StoreRowLayout store_phase_row = LAYOUT(phase_columns);
const StoreRowLayout store_breakdown_row = LAYOUT(breakdown_columns);
const StoreRowLayout store_size_row = LAYOUT(size_columns);
const StoreRowLayout store_segment_row = LAYOUT(segment_columns);
const StoreRowLayout store_block_row = LAYOUT(block_columns);
const StoreRowLayout store_recommendation_row = LAYOUT(recommendation_columns);
const StoreRowLayout store_recommendation_info_row = LAYOUT(recommendation_info_columns);

void
store_bind_row(sqlite3_stmt *stmt, int first, const StoreRowLayout *layout, const void *row,
               int *rc)
{
    for (guint i = 0; i < layout->n_columns; i++) {
        const void *field = (const char *)row + layout->columns[i].offset;
        int index = first + (int)i;

        switch (layout->columns[i].kind) {
        case STORE_U64:
            bind_u64(stmt, index, *(const uint64_t *)field, rc);
            break;
        case STORE_OPT_I64:
            bind_opt_i64(stmt, index, *(const int64_t *)field, rc);
            break;
        case STORE_UINT:
            bind_i64(stmt, index, *(const guint *)field, rc);
            break;
        case STORE_TEXT:
            bind_text(stmt, index, *(char *const *)field, rc);
            break;
        case STORE_ACTION:
            bind_text(stmt, index, fsim_store_action_name(*(const guint *)field), rc);
            break;
        case STORE_STATUS:
            bind_text(stmt, index, fsim_store_status_name(*(const FsimStoreStatus *)field), rc);
            break;
        case STORE_PRESENT:
            g_return_if_reached();
        }
    }
}

void
store_read_row(sqlite3_stmt *stmt, const StoreRowLayout *layout, void *row)
{
    for (guint i = 0; i < layout->n_columns; i++) {
        void *field = (char *)row + layout->columns[i].offset;
        int column = (int)i;

        switch (layout->columns[i].kind) {
        case STORE_U64:
            *(uint64_t *)field = (uint64_t)sqlite3_column_int64(stmt, column);
            break;
        case STORE_OPT_I64:
            *(int64_t *)field = store_column_opt_i64(stmt, column);
            break;
        case STORE_UINT:
            *(guint *)field = (guint)sqlite3_column_int64(stmt, column);
            break;
        case STORE_TEXT:
            *(char **)field = store_column_strdup(stmt, column);
            break;
        case STORE_ACTION:
            *(guint *)field =
                store_action_from_name((const char *)sqlite3_column_text(stmt, column));
            break;
        case STORE_STATUS:
            *(FsimStoreStatus *)field =
                store_status_from_name((const char *)sqlite3_column_text(stmt, column));
            break;
        case STORE_PRESENT:
            *(gboolean *)field = sqlite3_column_type(stmt, column) != SQLITE_NULL;
            break;
        }
    }
}

void
store_row_clear(const StoreRowLayout *layout, void *row)
{
    for (guint i = 0; i < layout->n_columns; i++) {
        if (layout->columns[i].kind == STORE_TEXT)
            g_clear_pointer((char **)((char *)row + layout->columns[i].offset), g_free);
    }
}
