/* SPDX-License-Identifier: MIT */
/*
 * The engine's table of live allocations, keyed by trace id.  Two parts:
 *
 *   entries  stored densely in pages of FSIM_LIVE_PAGE entries that never move (an entry's
 *            address is stable until it is removed), removed ones chained on a free list for
 *            reuse, so memory follows the largest live set, not the trace;
 *   groups   an open-addressing index over them in groups of eight slots, one cache line
 *            each: a control byte per slot (empty, or seven bits of the id's hash), the slot's
 *            entry number, and the group's overflow count: how many ids whose probe started at
 *            or before this group went on past it, full at the time.  A lookup compares the
 *            eight control bytes of the id's home group at once (SWAR) and reads the entry of
 *            a matching byte only; it goes on to the next group only while the overflow count
 *            is not zero, which at the table's load (at most half the slots) is rare.  A
 *            removal empties its slot and takes its id off the overflow counts of the groups
 *            it passed (none, mostly), so there are no deleted marks.  No lookup, insertion or
 *            removal runs a loop whose length depends on the data in the common case, which
 *            the processor would mispredict (the linear probing with backward-shift deletion
 *            this replaced had 0.85 mispredicted branches per replayed event).
 *
 * A live allocation costs sizeof(FsimLiveEntry) (64 bytes) plus 16 to 32 bytes of slots.  A
 * lookup reads one group line and one entry line; on the replay hot path both are hot.
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

/* One cache line, 64 bytes in pages aligned to it: a lookup's entry is one line (72 bytes always
 * took two), so the event index and the state share a word. */
typedef struct {
    uint64_t id; /* on the free list (state 0): the number of the next free entry, + 1 */
    FsimBlock block;
    uint64_t requested;
    uint64_t stream;
    FsimTime alloc_time; /* the engine's: its time */
    /* the engine's: index of the ALLOC event, -1 for the initial state */
    __extension__ int64_t alloc_event : 56;
    __extension__ uint64_t state : 8; /* an FsimLiveState, 0 = not in use */
} FsimLiveEntry;

G_STATIC_ASSERT(sizeof(FsimLiveEntry) == 64);

#define FSIM_LIVE_GROUP 8u    /* slots per group */
#define FSIM_LIVE_EMPTY 0x80u /* control byte of an empty slot; a used one holds a hash tag */

typedef struct {
    uint8_t ctrl[FSIM_LIVE_GROUP];   /* slot i's control byte */
    uint32_t entry[FSIM_LIVE_GROUP]; /* slot i's entry number, where its byte is a tag */
    uint32_t overflow;               /* ids that probed past this group */
    uint32_t spare[5];               /* to 64 bytes: a group is one cache line */
} FsimLiveGroup;

G_STATIC_ASSERT(sizeof(FsimLiveGroup) == 64);

#define FSIM_LIVE_PAGE_LOG2 12
#define FSIM_LIVE_PAGE      (1u << FSIM_LIVE_PAGE_LOG2) /* entries per page */

typedef struct {
    FsimLiveGroup *groups;
    guint group_bits; /* log2 of the number of groups */
    guint shift;      /* 64 - group_bits: a hash's top group_bits bits are its home group */
    gsize count;      /* entries in use */
    gsize max_count;  /* at most half the slots: FSIM_LIVE_GROUP << group_bits >> 1 */
    FsimLiveEntry **pages;
    gsize n_pages;
    gsize used;    /* entries ever handed out: numbers below it are in use or free */
    uint32_t free; /* the first free entry's number + 1, 0 if none */
    /* the entry the last lookup found and its slot (group x 8 + slot): a remove of it probes
     * no more */
    const FsimLiveEntry *last_entry;
    gsize last_slot;
    gsize last_home; /* the home group of its id */
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
 * new page of entries, rebuilding the groups) is out of line. */

#define FSIM_LIVE_LSB UINT64_C(0x0101010101010101)
#define FSIM_LIVE_MSB UINT64_C(0x8080808080808080)

/* Fibonacci hashing: ids are often dense and sequential, which this spreads well.  The top
 * group_bits bits are the home group, the seven below them the tag. */
static inline uint64_t
fsim_live_hash(uint64_t id)
{
    return id * UINT64_C(0x9E3779B97F4A7C15);
}

static inline gsize
fsim_live_home(const FsimLiveTable *table, uint64_t hash)
{
    return (gsize)(hash >> table->shift);
}

static inline uint32_t
fsim_live_tag(const FsimLiveTable *table, uint64_t hash)
{
    return (uint32_t)(hash >> (table->shift - 7)) & 0x7fu;
}

/* The high bit of each control byte equal to @tag (a few false matches above a true one, which
 * the id comparison turns away). */
static inline uint64_t
fsim_live_match(uint64_t ctrl, uint32_t tag)
{
    uint64_t x = ctrl ^ (FSIM_LIVE_LSB * tag);

    return (x - FSIM_LIVE_LSB) & ~x & FSIM_LIVE_MSB;
}

/* The eight control bytes as one word, byte i in bits 8i to 8i + 7. */
static inline uint64_t
fsim_live_ctrl(const FsimLiveGroup *group)
{
    uint64_t ctrl;

    memcpy(&ctrl, group->ctrl, sizeof(ctrl));
    return GUINT64_FROM_LE(ctrl);
}

/* The entry of @id, or NULL; *@slot: its slot (group x 8 + slot). */
static inline FsimLiveEntry *
fsim_live_find_from(const FsimLiveTable *table, uint64_t id, gsize *slot, gsize *home_out)
{
    uint64_t hash = fsim_live_hash(id);
    uint32_t tag = fsim_live_tag(table, hash);
    gsize mask = ((gsize)1 << table->group_bits) - 1;

    gsize home = fsim_live_home(table, hash);

    *home_out = home;
    for (gsize g = home;; g = (g + 1) & mask) {
        const FsimLiveGroup *group = &table->groups[g];

        for (uint64_t m = fsim_live_match(fsim_live_ctrl(group), tag); m != 0; m &= m - 1) {
            guint i = (guint)__builtin_ctzll(m) >> 3;
            FsimLiveEntry *entry = fsim_live_table_nth(table, group->entry[i]);

            if (G_LIKELY(entry->id == id)) {
                *slot = g * FSIM_LIVE_GROUP + i;
                return entry;
            }
        }
        /* every group once at most: the overflow counts could all be set at once */
        if (G_LIKELY(group->overflow == 0) || ((g + 1) & mask) == home)
            return NULL;
    }
}

static inline FsimLiveEntry *
fsim_live_find(const FsimLiveTable *table, uint64_t id, gsize *slot)
{
    gsize home;

    return fsim_live_find_from(table, id, slot, &home);
}

/* The entry for @id, or NULL.  The pointer is valid until the entry is removed. */
static inline FsimLiveEntry *
fsim_live_table_lookup(FsimLiveTable *table, uint64_t id)
{
    gsize slot = 0;
    gsize home = 0;
    FsimLiveEntry *entry = fsim_live_find_from(table, id, &slot, &home);

    table->last_entry = entry;
    table->last_slot = slot;
    table->last_home = home;
    return entry;
}

/* insert_or_find()'s rare case: no free entry to reuse, no empty slot in the home group, or
 * the groups to grow. */
FsimLiveEntry *fsim_live_table_insert_slow(FsimLiveTable *table, uint64_t id);

/* Insert @id, which the caller knows to be absent (no lookup first), and return its entry: its
 * id set and its state FSIM_LIVE_ALLOCATED, the other fields left for the caller to set (the
 * engine sets them all). */
static inline FsimLiveEntry *
fsim_live_table_insert_absent(FsimLiveTable *table, uint64_t id)
{
    uint64_t hash = fsim_live_hash(id);
    FsimLiveGroup *group = &table->groups[fsim_live_home(table, hash)];
    uint64_t room = fsim_live_ctrl(group) & FSIM_LIVE_MSB; /* the home group's empty slots */
    FsimLiveEntry *entry;
    guint i;
    uint32_t n;

    /* at most half the slots used */
    if (G_UNLIKELY(room == 0 || table->free == 0 || table->count >= table->max_count))
        return fsim_live_table_insert_slow(table, id);
    /* the free list's head: the entry freed last, likely still in the cache */
    n = table->free - 1;
    entry = fsim_live_table_nth(table, n);
    table->free = (uint32_t)entry->id;
    i = (guint)__builtin_ctzll(room) >> 3;
    group->ctrl[i] = (uint8_t)fsim_live_tag(table, hash);
    group->entry[i] = n;
    table->count++;
    entry->id = id;
    entry->state = FSIM_LIVE_ALLOCATED;
    return entry;
}

/* As insert when @id is absent (*@inserted TRUE); else its entry, unchanged (*@inserted FALSE). */
static inline FsimLiveEntry *
fsim_live_table_insert_or_find(FsimLiveTable *table, uint64_t id, gboolean *inserted)
{
    gsize slot;
    FsimLiveEntry *entry = fsim_live_find(table, id, &slot);

    *inserted = entry == NULL;
    if (entry != NULL)
        return entry;
    entry = fsim_live_table_insert_absent(table, id);
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

/* remove()'s rare case: the entry's id probed past its home group. */
void fsim_live_table_unoverflow(FsimLiveTable *table, gsize home, gsize group);

/* Remove @entry, a pointer returned by lookup or insert. */
static inline void
fsim_live_table_remove(FsimLiveTable *table, FsimLiveEntry *entry)
{
    gsize slot = table->last_slot;
    gsize home = table->last_home;
    gsize g;
    uint32_t n;

    /* most removes follow the lookup of the same id, which found its slot and home group */
    if (G_UNLIKELY(table->last_entry != entry)) {
        FsimLiveEntry *found = fsim_live_find_from(table, entry->id, &slot, &home);

        g_assert(found == entry);
    }
    g = slot / FSIM_LIVE_GROUP;
    n = table->groups[g].entry[slot % FSIM_LIVE_GROUP];
    table->groups[g].ctrl[slot % FSIM_LIVE_GROUP] = FSIM_LIVE_EMPTY;
    if (G_UNLIKELY(home != g))
        fsim_live_table_unoverflow(table, home, g);
    table->last_entry = NULL;
    table->count--;
    entry->state = 0;
    entry->id = table->free;
    table->free = n + 1;
}

/* Bytes the table holds now: pages, page list and slots. */
gsize fsim_live_table_bytes(const FsimLiveTable *table);
