/* SPDX-License-Identifier: MIT */
/*
 * The engine's table of live allocations, keyed by trace id.  Two parts:
 *
 *   entries  stored densely in pages of FSIM_LIVE_PAGE entries that never move (an entry's
 *            address is stable until it is removed), removed ones chained on a free list for
 *            reuse, so memory follows the largest live set, not the trace;
 *   slots    an open-addressing index over them: linear probing, backward-shift deletion,
 *            grown at half load; a slot is 8 bytes, the entry's number and the hash's high
 *            half, which gives the home slot back without touching the entry and turns away
 *            most other ids in a probe run unread.
 *
 * A live allocation costs sizeof(FsimLiveEntry) (72 bytes) plus 16 to 32 bytes of slots.  A
 * lookup reads one slot line and one entry line; on the replay hot path both are hot.
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
    uint64_t id; /* on the free list (state 0): the number of the next free entry, + 1 */
    FsimBlock block;
    uint64_t requested;
    uint64_t stream;
    int64_t alloc_event; /* the engine's: index of the ALLOC event, -1 for the initial state */
    FsimTime alloc_time; /* the engine's: its time */
    FsimLiveState state; /* 0 = not in use */
} FsimLiveEntry;

typedef struct {
    uint32_t entry; /* the entry's number + 1; 0 = empty slot */
    uint32_t hash;  /* the high half of the id's hash */
} FsimLiveSlot;

#define FSIM_LIVE_PAGE_LOG2 12
#define FSIM_LIVE_PAGE      (1u << FSIM_LIVE_PAGE_LOG2) /* entries per page */

typedef struct {
    FsimLiveSlot *slots;
    guint slot_bits; /* log2 of the number of slots */
    gsize count;     /* entries in use */
    FsimLiveEntry **pages;
    gsize n_pages;
    gsize used;      /* entries ever handed out: numbers below it are in use or free */
    uint32_t free;   /* the first free entry's number + 1, 0 if none */
    gsize last_slot; /* the slot the last lookup found: a remove after it probes no more */
} FsimLiveTable;

void fsim_live_table_init(FsimLiveTable *table);
void fsim_live_table_clear(FsimLiveTable *table);
/* The entry for @id, or NULL.  The pointer is valid until the entry is removed. */
FsimLiveEntry *fsim_live_table_lookup(FsimLiveTable *table, uint64_t id);
/* Insert a new entry for @id (which must be absent) and return it, zeroed but for the id and
 * state FSIM_LIVE_ALLOCATED. */
FsimLiveEntry *fsim_live_table_insert(FsimLiveTable *table, uint64_t id);
/* As insert when @id is absent (*@inserted TRUE); else its entry, unchanged (*@inserted FALSE). */
FsimLiveEntry *fsim_live_table_insert_or_find(FsimLiveTable *table, uint64_t id,
                                              gboolean *inserted);
/* Remove @entry, a pointer returned by lookup or insert. */
void fsim_live_table_remove(FsimLiveTable *table, FsimLiveEntry *entry);

/* Entry numbers run below fsim_live_table_extent(); those with state 0 are not in use. */
static inline gsize
fsim_live_table_extent(const FsimLiveTable *table)
{
    return table->used;
}

static inline FsimLiveEntry *
fsim_live_table_nth(const FsimLiveTable *table, gsize n)
{
    return &table->pages[n >> FSIM_LIVE_PAGE_LOG2][n & (FSIM_LIVE_PAGE - 1)];
}

/* Bytes the table holds now: pages, page list and slots. */
gsize fsim_live_table_bytes(const FsimLiveTable *table);
