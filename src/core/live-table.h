/* SPDX-License-Identifier: MIT */
/*
 * The engine's table of live allocations, keyed by trace id: an open-addressing hash table with
 * linear probing and backward-shift deletion, entries stored inline (no allocation per entry),
 * grown at half load.  Lookups cost one or two cache misses on the replay hot path.
 */
#pragma once

#include <glib.h>

#include "fragsim/policy.h"

typedef enum {
    FSIM_LIVE_ALLOCATED = 1, /* handed out, not freed */
    FSIM_LIVE_PENDING,       /* freed by the program, memory not yet reusable */
    FSIM_LIVE_FAILED,        /* its allocation failed (OOM): the free is ignored */
} FsimLiveState;

typedef struct {
    uint64_t id;
    FsimBlock block;
    uint64_t requested;
    uint64_t stream;
    int64_t alloc_event; /* the engine's: index of the ALLOC event, -1 for the initial state */
    FsimTime alloc_time; /* the engine's: its time */
    FsimLiveState state; /* 0 = empty slot */
} FsimLiveEntry;

typedef struct {
    FsimLiveEntry *slots;
    gsize capacity; /* a power of two */
    gsize count;
} FsimLiveTable;

void fsim_live_table_init(FsimLiveTable *table);
void fsim_live_table_clear(FsimLiveTable *table);
/* The entry for @id, or NULL.  The pointer is valid until the next insert or remove. */
FsimLiveEntry *fsim_live_table_lookup(FsimLiveTable *table, uint64_t id);
/* Insert a new entry for @id (which must be absent) and return it, zeroed but for the id. */
FsimLiveEntry *fsim_live_table_insert(FsimLiveTable *table, uint64_t id);
/* Remove @entry, a pointer returned by lookup or insert. */
void fsim_live_table_remove(FsimLiveTable *table, FsimLiveEntry *entry);
