/* SPDX-License-Identifier: MIT */
/*
 * Read-only views of an engine (engine.h): its configuration, counters, metrics, OOMs, device,
 * policy and live allocations, for observers and reports.  The event path is engine.c.
 */
#include <glib.h>

#include "fragsim/engine.h"

#include "engine-private.h"

const FsimLiveAlloc *
fsim_engine_releasing(const FsimEngine *engine)
{
    return engine->releasing;
}

void
fsim_engine_foreach_live_alloc(const FsimEngine *engine,
                               void (*func)(gpointer data, const FsimLiveAlloc *alloc),
                               gpointer data)
{
    for (gsize i = 0; i < fsim_live_table_extent(&engine->live); i++) {
        const FsimLiveEntry *entry = fsim_live_table_nth(&engine->live, i);

        if (entry->state == FSIM_LIVE_ALLOCATED || entry->state == FSIM_LIVE_PENDING) {
            FsimLiveAlloc alloc = {entry->id,     entry->block,       entry->requested,
                                   entry->stream, entry->alloc_event, entry->alloc_time};

            func(data, &alloc);
        }
    }
}

const FsimRunConfig *
fsim_engine_config(const FsimEngine *engine)
{
    return &engine->config;
}

const FsimEngineCounters *
fsim_engine_counters(const FsimEngine *engine)
{
    return &engine->counters;
}

const FsimMetrics *
fsim_engine_metrics(const FsimEngine *engine)
{
    return &engine->metrics;
}

const FsimOomRecord *
fsim_engine_ooms(const FsimEngine *engine, gsize *n)
{
    *n = engine->ooms->len;
    return (const FsimOomRecord *)(void *)engine->ooms->data;
}

FsimDevice *
fsim_engine_device(const FsimEngine *engine)
{
    return engine->device;
}

FsimPolicy *
fsim_engine_policy(const FsimEngine *engine)
{
    return engine->policy;
}

static gint
live_by_addr(gconstpointer a, gconstpointer b)
{
    const FsimLiveEntry *const *x = a;
    const FsimLiveEntry *const *y = b;

    if ((*x)->block.addr != (*y)->block.addr)
        return (*x)->block.addr < (*y)->block.addr ? -1 : 1;
    return (*x)->id < (*y)->id ? -1 : (*x)->id > (*y)->id ? 1 : 0;
}

void
fsim_engine_foreach_live(const FsimEngine *engine,
                         void (*func)(gpointer data, uint64_t id, const FsimBlock *block,
                                      uint64_t requested, uint64_t stream),
                         gpointer data)
{
    g_autoptr(GPtrArray) entries = g_ptr_array_new();

    for (gsize i = 0; i < fsim_live_table_extent(&engine->live); i++) {
        FsimLiveEntry *entry = fsim_live_table_nth(&engine->live, i);

        if (entry->state == FSIM_LIVE_ALLOCATED || entry->state == FSIM_LIVE_PENDING)
            g_ptr_array_add(entries, entry);
    }
    g_ptr_array_sort(entries, live_by_addr);
    for (guint i = 0; i < entries->len; i++) {
        const FsimLiveEntry *entry = g_ptr_array_index(entries, i);

        func(data, entry->id, &entry->block, entry->requested, entry->stream);
    }
}
