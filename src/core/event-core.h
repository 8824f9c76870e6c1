/* SPDX-License-Identifier: MIT */
/*
 * The numbers of an event (time, index, id, size, stream) as arrays of events keep them: a
 * reader's decoded events, an event log.  Each array adds what else it keeps of an FsimEvent.
 */
#pragma once

#include <glib.h>

#include "fragsim/event.h"

G_BEGIN_DECLS

typedef struct {
    FsimTime time;
    uint64_t index;
    uint64_t id;
    uint64_t size;
    uint64_t stream;
} FsimEventCore;

/* The numbers of @ev. */
static inline FsimEventCore
fsim_event_core_of(const FsimEvent *ev)
{
    FsimEventCore core = {ev->time, ev->index, ev->id, ev->size, ev->stream};

    return core;
}

/* Sets the numbers of @ev from @core; its other members stay. */
static inline void
fsim_event_core_get(const FsimEventCore *core, FsimEvent *ev)
{
    ev->time = core->time;
    ev->index = core->index;
    ev->id = core->id;
    ev->size = core->size;
    ev->stream = core->stream;
}

G_END_DECLS
