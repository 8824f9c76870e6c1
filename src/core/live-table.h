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

#include <string.h>

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

/* The lookup, the insertion and the removal are inline: the engine makes one of them or two
 * per event, and a call's prologue and epilogue weighed as much as a probe.  What is rare (a
 * new page of entries, growing the slots) is out of line. */

/* Fibonacci hashing: ids are often dense and sequential, which this spreads well.  The high
 * half is kept in the slot; its top slot_bits bits are the home slot. */
static inline uint32_t
fsim_live_hash(uint64_t id)
{
    return (uint32_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 32);
}

static inline gsize
fsim_live_home(const FsimLiveTable *table, uint32_t hash)
{
    return (gsize)(hash >> (32 - table->slot_bits));
}

/* The slot holding @id, or the empty slot that ends its probe run. */
static inline FsimLiveSlot *
fsim_live_probe(const FsimLiveTable *table, uint64_t id, uint32_t hash)
{
    gsize mask = ((gsize)1 << table->slot_bits) - 1;

    for (gsize i = fsim_live_home(table, hash);; i = (i + 1) & mask) {
        FsimLiveSlot *slot = &table->slots[i];

        if (slot->entry == 0)
            return slot;
        if (slot->hash == hash && fsim_live_table_nth(table, slot->entry - 1)->id == id)
            return slot;
    }
}

/* The entry for @id, or NULL.  The pointer is valid until the entry is removed. */
static inline FsimLiveEntry *
fsim_live_table_lookup(FsimLiveTable *table, uint64_t id)
{
    FsimLiveSlot *slot = fsim_live_probe(table, id, fsim_live_hash(id));

    if (slot->entry == 0)
        return NULL;
    table->last_slot = (gsize)(slot - table->slots);
    return fsim_live_table_nth(table, slot->entry - 1);
}

/* insert_or_find()'s rare case: no free entry to reuse, or the slots at half load. */
FsimLiveEntry *fsim_live_table_insert_slow(FsimLiveTable *table, uint64_t id, uint32_t hash);

/* As insert when @id is absent (*@inserted TRUE); else its entry, unchanged (*@inserted FALSE). */
static inline FsimLiveEntry *
fsim_live_table_insert_or_find(FsimLiveTable *table, uint64_t id, gboolean *inserted)
{
    uint32_t hash = fsim_live_hash(id);
    FsimLiveSlot *slot = fsim_live_probe(table, id, hash);
    FsimLiveEntry *entry;
    uint32_t n;

    if (slot->entry != 0) {
        *inserted = FALSE;
        return fsim_live_table_nth(table, slot->entry - 1);
    }
    *inserted = TRUE;
    if (G_UNLIKELY(table->free == 0 || (table->count + 1) * 2 > ((gsize)1 << table->slot_bits)))
        return fsim_live_table_insert_slow(table, id, hash);
    /* the free list's head: the entry freed last, likely still in the cache */
    n = table->free - 1;
    entry = fsim_live_table_nth(table, n);
    table->free = (uint32_t)entry->id;
    slot->entry = n + 1;
    slot->hash = hash;
    table->count++;
    memset(entry, 0, sizeof(*entry));
    entry->id = id;
    entry->state = FSIM_LIVE_ALLOCATED;
    return entry;
}

/* Insert a new entry for @id (which must be absent) and return it, zeroed but for the id and
 * state FSIM_LIVE_ALLOCATED. */
static inline FsimLiveEntry *
fsim_live_table_insert(FsimLiveTable *table, uint64_t id)
{
    gboolean inserted;
    FsimLiveEntry *entry = fsim_live_table_insert_or_find(table, id, &inserted);

    g_assert(inserted);
    return entry;
}

/* Remove @entry, a pointer returned by lookup or insert. */
static inline void
fsim_live_table_remove(FsimLiveTable *table, FsimLiveEntry *entry)
{
    gsize mask = ((gsize)1 << table->slot_bits) - 1;
    FsimLiveSlot *slot = &table->slots[table->last_slot & mask];
    gsize hole;
    gsize i;
    uint32_t n;

    /* most removes follow the lookup of the same id */
    if (G_UNLIKELY(slot->entry == 0 || fsim_live_table_nth(table, slot->entry - 1) != entry))
        slot = fsim_live_probe(table, entry->id, fsim_live_hash(entry->id));
    hole = (gsize)(slot - table->slots);
    i = hole;
    n = slot->entry - 1;

    g_assert(slot->entry != 0 && fsim_live_table_nth(table, n) == entry);
    entry->state = 0;
    entry->id = table->free;
    table->free = n + 1;
    /* Backward-shift deletion: move later members of the probe run into the hole when their
     * home slot does not lie cyclically in (hole, i]. */
    for (;;) {
        gsize home;

        i = (i + 1) & mask;
        if (table->slots[i].entry == 0)
            break;
        home = fsim_live_home(table, table->slots[i].hash);
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            table->slots[hole] = table->slots[i];
            hole = i;
        }
    }
    table->slots[hole].entry = 0;
    table->count--;
}

/* Bytes the table holds now: pages, page list and slots. */
gsize fsim_live_table_bytes(const FsimLiveTable *table);
