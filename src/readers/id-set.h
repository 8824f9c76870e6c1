/* SPDX-License-Identifier: MIT */
/*
 * The set of live ids a reader keeps to refuse an id allocated twice: an id, and whether its
 * free is pending (`free_requested` read, `free_completed` not yet).  The engine's live table
 * (core/live-table.h) holds a whole allocation per id, 90 bytes and more; a reader only asks
 * whether an id is live, and paid for the rest on every line.
 *
 * Open addressing in groups of eight slots: eight control bytes (empty, or seven bits of the
 * id's hash), a bit per slot for a pending free, the group's overflow count (how many ids
 * whose probe started at or before this group went on past it, full at the time) and the eight
 * ids.  A lookup compares the eight control bytes of the id's home group at once (SWAR) and
 * reads the id of a matching byte only; it goes on to the next group only while the overflow
 * count is not zero, which at the set's load (at most half the slots) is rare.  A removal
 * empties its slot and takes its id off the overflow counts of the groups it passed.  So no
 * lookup, insertion or removal runs a loop whose length depends on the data in the common case,
 * which the processor would mispredict (linear probing did, once per line).  80 bytes a group:
 * 20 to 40 bytes per live id.
 */
#pragma once

#include <glib.h>

#include <stdint.h>
#include <string.h>

#include "core/live-table.h" /* the hash and the SWAR match of its groups */

typedef enum {
    FSIM_ID_ABSENT = 0,
    FSIM_ID_LIVE,    /* allocated, not freed */
    FSIM_ID_PENDING, /* freed by a `free_requested`, its `free_completed` not read yet */
} FsimIdState;

#define FSIM_ID_GROUP 8u              /* slots per group */
#define FSIM_ID_EMPTY FSIM_LIVE_EMPTY /* control byte of an empty slot, else a hash tag */
#define FSIM_ID_NONE  G_MAXSIZE

typedef struct {
    uint8_t ctrl[FSIM_ID_GROUP]; /* slot i's control byte */
    uint32_t overflow;           /* ids that probed past this group */
    uint8_t pending;             /* bit i: slot i's free is pending */
    uint8_t spare[3];
    uint64_t ids[FSIM_ID_GROUP];
} FsimIdGroup;

typedef struct {
    FsimIdGroup *groups;
    guint group_bits; /* log2 of the number of groups */
    guint shift;      /* 64 - group_bits: a hash's top group_bits bits are its home group */
    gsize count;
} FsimIdSet;

void fsim_id_set_init(FsimIdSet *set);
void fsim_id_set_clear(FsimIdSet *set);

/* The home group of @id, and in *@tag its control byte: the live table's hash
 * (fsim_live_hash()), whose top group_bits bits are the home group, the seven below them the
 * tag. */
static inline gsize
fsim_id_home(const FsimIdSet *set, uint64_t id, uint32_t *tag)
{
    uint64_t hash = fsim_live_hash(id);

    *tag = (uint32_t)(hash >> (set->shift - 7)) & 0x7fu;
    return (gsize)(hash >> set->shift);
}

/* The eight control bytes as one word, byte i in bits 8i to 8i + 7. */
static inline uint64_t
fsim_id_ctrl(const FsimIdGroup *group)
{
    uint64_t ctrl;

    memcpy(&ctrl, group->ctrl, sizeof(ctrl));
    return GUINT64_FROM_LE(ctrl);
}

/* The slot of @id (group x 8 + slot), or FSIM_ID_NONE when it is not in the set. */
static inline gsize
fsim_id_set_find(const FsimIdSet *set, uint64_t id)
{
    uint32_t tag;
    gsize home = fsim_id_home(set, id, &tag);
    gsize mask = ((gsize)1 << set->group_bits) - 1;

    for (gsize g = home;; g = (g + 1) & mask) {
        const FsimIdGroup *group = &set->groups[g];

        for (uint64_t m = fsim_live_match(fsim_id_ctrl(group), tag); m != 0; m &= m - 1) {
            guint i = (guint)__builtin_ctzll(m) >> 3;

            if (G_LIKELY(group->ids[i] == id))
                return g * FSIM_ID_GROUP + i;
        }
        /* every group once at most: the overflow counts could all be set at once */
        if (G_LIKELY(group->overflow == 0) || ((g + 1) & mask) == home)
            return FSIM_ID_NONE;
    }
}

static inline FsimIdState
fsim_id_set_state(const FsimIdSet *set, gsize slot)
{
    if (slot == FSIM_ID_NONE)
        return FSIM_ID_ABSENT;
    return (set->groups[slot / FSIM_ID_GROUP].pending >> (slot % FSIM_ID_GROUP)) & 1u
               ? FSIM_ID_PENDING
               : FSIM_ID_LIVE;
}

static inline void
fsim_id_set_set_pending(FsimIdSet *set, gsize slot)
{
    set->groups[slot / FSIM_ID_GROUP].pending |= (uint8_t)(1u << (slot % FSIM_ID_GROUP));
}

/* add()'s rare case: no empty slot in the home group, or the groups to grow. */
void fsim_id_set_add_slow(FsimIdSet *set, uint64_t id);

/* Adds @id, which must be absent, as FSIM_ID_LIVE. */
static inline void
fsim_id_set_add(FsimIdSet *set, uint64_t id)
{
    uint32_t tag;
    FsimIdGroup *group = &set->groups[fsim_id_home(set, id, &tag)];
    uint64_t room = fsim_id_ctrl(group) & FSIM_LIVE_MSB; /* the home group's empty slots */
    guint i;

    /* at most half the slots used */
    if (G_UNLIKELY(room == 0 || (set->count + 1) * 2 > ((gsize)FSIM_ID_GROUP << set->group_bits))) {
        fsim_id_set_add_slow(set, id);
        return;
    }
    i = (guint)__builtin_ctzll(room) >> 3;
    group->ctrl[i] = (uint8_t)tag;
    group->ids[i] = id;
    set->count++;
}

/* remove()'s rare case: the id at @slot probed past its home group. */
void fsim_id_set_unoverflow(FsimIdSet *set, gsize home, gsize group);

/* Removes the id at @slot (from fsim_id_set_find()). */
static inline void
fsim_id_set_remove(FsimIdSet *set, gsize slot)
{
    gsize g = slot / FSIM_ID_GROUP;
    FsimIdGroup *group = &set->groups[g];
    guint i = (guint)(slot % FSIM_ID_GROUP);
    uint32_t tag;
    gsize home = fsim_id_home(set, group->ids[i], &tag);

    group->ctrl[i] = FSIM_ID_EMPTY;
    group->pending &= (uint8_t) ~(1u << i);
    if (G_UNLIKELY(home != g))
        fsim_id_set_unoverflow(set, home, g);
    set->count--;
}
