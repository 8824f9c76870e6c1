/* SPDX-License-Identifier: MIT */
/*
 * The recording's own figures (see recorded.h).
 */
#include "analysis/recorded.h"

#include <glib.h>

#include <string.h>

/* The device calls of @m that count the segment action @kind. */
static uint64_t *
segment_calls(FsimMetrics *m, FsimOutcomeKind kind)
{
    switch (kind) {
    case FSIM_OUTCOME_SEGMENT_ALLOC:
        return &m->device_mallocs;
    case FSIM_OUTCOME_SEGMENT_FREE:
        return &m->device_frees;
    case FSIM_OUTCOME_SEGMENT_MAP:
        return &m->device_maps;
    default:
        return &m->device_unmaps;
    }
}

/* Reserved bytes over the recorded segment actions, from the seeded state. */
static void
recorded_segments(const FsimInitialState *state, const FsimOutcome *outcomes, gsize n,
                  FsimRecorded *out)
{
    FsimMetrics *m = &out->metrics;
    uint64_t reserved = 0;

    for (gsize i = 0; state != NULL && i < state->n_segments; i++)
        reserved += state->segments[i].size;
    m->peak_reserved_bytes = reserved;
    for (gsize i = 0; i < n; i++) {
        const FsimOutcome *o = &outcomes[i];

        switch (o->kind) {
        case FSIM_OUTCOME_SEGMENT_ALLOC:
        case FSIM_OUTCOME_SEGMENT_MAP:
        case FSIM_OUTCOME_SEGMENT_FREE:
        case FSIM_OUTCOME_SEGMENT_UNMAP:
            if (o->kind == FSIM_OUTCOME_SEGMENT_ALLOC || o->kind == FSIM_OUTCOME_SEGMENT_MAP)
                reserved += o->size;
            else
                reserved = fsim_sub_sat(reserved, o->size);
            (*segment_calls(m, o->kind))++;
            out->has_segments = TRUE;
            break;
        case FSIM_OUTCOME_OOM:
            if (m->ooms++ == 0) {
                m->first_oom_event = (int64_t)o->index;
                out->capacity_bytes = reserved + o->device_free;
            }
            break;
        default:
            break;
        }
        m->peak_reserved_bytes = MAX(m->peak_reserved_bytes, reserved);
    }
}

gboolean
fsim_recorded_summary(FsimTrace *trace, uint32_t device, FsimRecorded *out, GError **error)
{
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(GHashTable) live = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    FsimMetrics *m = &out->metrics;
    const FsimOutcome *outcomes;
    GError *local_error = NULL;
    uint64_t allocated = 0;
    gsize n = 0;
    FsimEvent ev;

    memset(out, 0, sizeof(*out));
    m->needed_bytes = -1;
    m->first_oom_event = -1;
    outcomes = fsim_trace_outcomes(trace, device, &n);
    recorded_segments(state, outcomes, n, out);
    if (!out->has_segments)
        return TRUE;
    stream = fsim_trace_stream_open(trace, device, error);
    if (stream == NULL)
        return FALSE;
    /* id -> size of the live blocks; the seeded ones first */
    for (gsize i = 0; state != NULL && i < state->n_blocks; i++) {
        if (state->blocks[i].pending_free)
            continue;
        g_hash_table_insert(live, g_memdup2(&state->blocks[i].id, sizeof(uint64_t)),
                            GSIZE_TO_POINTER(state->blocks[i].size));
        allocated += state->blocks[i].size;
    }
    m->peak_allocated_bytes = allocated;
    while (fsim_trace_stream_next(stream, &ev, &local_error)) {
        gpointer size;

        m->events++;
        if (ev.kind == FSIM_EV_ALLOC && (ev.flags & FSIM_EVF_RECORDED_OOM) == 0) {
            m->allocs++;
            allocated += ev.size;
            g_hash_table_insert(live, g_memdup2(&ev.id, sizeof(uint64_t)),
                                GSIZE_TO_POINTER(ev.size));
            m->peak_allocated_bytes = MAX(m->peak_allocated_bytes, allocated);
        } else if (ev.kind == FSIM_EV_FREE &&
                   g_hash_table_lookup_extended(live, &ev.id, NULL, &size)) {
            m->frees++;
            allocated -= GPOINTER_TO_SIZE(size);
            g_hash_table_remove(live, &ev.id);
        }
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    m->peak_requested_bytes = m->peak_allocated_bytes;
    return TRUE;
}
