/* SPDX-License-Identifier: MIT */
/*
 * fragsim: seeded random traces for stress tests.
 *
 * Each allocation draws a size and a lifetime (in events) from the configured distributions and
 * a stream uniformly; its free is scheduled in a heap at the event index where the lifetime
 * ends.  At every event the generator frees whatever is due, else allocates, unless the live
 * limit is reached (then the allocation expiring first is freed early) or the remaining events
 * are just enough to free everything live (then it drains).  The trace has exactly the requested
 * number of events and frees every allocation it makes (an odd count ends with a mark).  The
 * same seed gives the same trace: randomness comes only from a GRand seeded explicitly.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/event.h"
#include "fragsim/types.h"

#include "synth.h"

typedef struct {
    FsimSynth base;
    FsimRandomConfig config;
    FsimDist sizes, lifetimes;
    uint64_t next_id;
    /* base.heap: the live allocations by expiry (kind = stream, value = id) */
} Random;

/* Nominal spacing of events. */
#define RANDOM_EVENT_NS 1000

static gboolean
random_next(FsimSynth *synth, FsimEvent *ev, GError **error)
{
    Random *r = (Random *)synth;
    uint64_t step = synth->events;
    (void)error;

    if (step >= r->config.events)
        return FALSE;
    memset(ev, 0, sizeof *ev);
    ev->index = step + 1;
    ev->time = step * RANDOM_EVENT_NS;

    uint64_t remaining = r->config.events - step;
    uint64_t live = r->base.heap.items.len;
    const FsimSynthHeapItem *top = fsim_synth_heap_peek(&r->base.heap);
    gboolean room = remaining >= live + 2; /* an allocation and its free still fit */
    gboolean full = r->config.max_live && live >= r->config.max_live;

    if (top && (top->time <= step || !room || full)) {
        FsimSynthHeapItem item;
        fsim_synth_heap_pop(&r->base.heap, &item);
        ev->kind = FSIM_EV_FREE;
        ev->id = item.value;
        ev->stream = item.kind;
        return TRUE;
    }
    if (!room) {
        /* one event left and nothing live */
        ev->kind = FSIM_EV_MARK;
        ev->label = "end";
        return TRUE;
    }
    ev->kind = FSIM_EV_ALLOC;
    ev->id = ++r->next_id;
    ev->size = fsim_dist_sample(&r->sizes, r->base.rand, FSIM_MAX_SIZE);
    ev->stream = r->config.streams > 1
                     ? (uint64_t)g_rand_int_range(r->base.rand, 0, (gint32)r->config.streams)
                     : 0;
    uint64_t lifetime = fsim_dist_sample(&r->lifetimes, r->base.rand, G_MAXUINT32);
    fsim_synth_heap_push(&r->base.heap, step + lifetime, ev->stream, ev->id);
    return TRUE;
}

static const FsimSynthClass random_class = {
    .name = "random",
    .next = random_next,
};

void
fsim_random_config_init(FsimRandomConfig *config)
{
    *config = (FsimRandomConfig){.events = 100000, .seed = 1, .max_live = 0, .streams = 1};
}

FsimSynth *
fsim_synth_random_new(const FsimRandomConfig *config, GError **error)
{
    g_return_val_if_fail(config != NULL, NULL);
    if (config->sizes == NULL || config->lifetimes == NULL) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "the random generator needs size and lifetime distributions");
        return NULL;
    }
    if (config->streams == 0 || config->streams > 1024) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--streams must be between 1 and 1024");
        return NULL;
    }
    Random *r = g_new0(Random, 1);
    r->base.klass = &random_class;
    r->config = *config;
    r->sizes = *config->sizes;
    r->lifetimes = *config->lifetimes;
    r->config.sizes = &r->sizes;
    r->config.lifetimes = &r->lifetimes;
    fsim_synth_seed(&r->base, config->seed);
    return &r->base;
}
