/* SPDX-License-Identifier: MIT */
/*
 * The set of live ids of a reader: see id-set.h.  Here the rare cases: growing, an insertion
 * whose home group is full, a removal of an id that probed past its home group.
 */
#include "id-set.h"

#define ID_SET_FIRST_BITS 7 /* 128 groups, 1,024 slots, 10 KiB, to begin with */

static void
id_set_alloc(FsimIdSet *set, guint group_bits)
{
    gsize n = (gsize)1 << group_bits;

    set->groups = g_new0(FsimIdGroup, n);
    for (gsize g = 0; g < n; g++)
        memset(set->groups[g].ctrl, FSIM_ID_EMPTY, FSIM_ID_GROUP);
    set->group_bits = group_bits;
    set->shift = 64 - group_bits;
    set->count = 0;
}

void
fsim_id_set_init(FsimIdSet *set)
{
    id_set_alloc(set, ID_SET_FIRST_BITS);
}

void
fsim_id_set_clear(FsimIdSet *set)
{
    g_clear_pointer(&set->groups, g_free);
    set->count = 0;
}

/* Puts @id in the first group with room from its home on, counting it on the overflow of each
 * full group it passes; returns its slot.  The set has room (at most half full). */
static gsize
id_set_place(FsimIdSet *set, uint64_t id)
{
    uint32_t tag;
    gsize mask = ((gsize)1 << set->group_bits) - 1;

    for (gsize g = fsim_id_home(set, id, &tag);; g = (g + 1) & mask) {
        FsimIdGroup *group = &set->groups[g];
        uint64_t room = fsim_id_ctrl(group) & FSIM_LIVE_MSB;

        if (room != 0) {
            guint i = (guint)__builtin_ctzll(room) >> 3;

            group->ctrl[i] = (uint8_t)tag;
            group->ids[i] = id;
            set->count++;
            return g * FSIM_ID_GROUP + i;
        }
        group->overflow++;
    }
}

void
fsim_id_set_add_slow(FsimIdSet *set, uint64_t id)
{
    if ((set->count + 1) * 2 > ((gsize)FSIM_ID_GROUP << set->group_bits)) {
        FsimIdSet old = *set;

        id_set_alloc(set, old.group_bits + 1);
        for (gsize g = 0; g < ((gsize)1 << old.group_bits); g++) {
            const FsimIdGroup *group = &old.groups[g];

            for (guint i = 0; i < FSIM_ID_GROUP; i++) {
                if (group->ctrl[i] != FSIM_ID_EMPTY && ((group->pending >> i) & 1u) != 0)
                    fsim_id_set_set_pending(set, id_set_place(set, group->ids[i]));
                else if (group->ctrl[i] != FSIM_ID_EMPTY)
                    (void)id_set_place(set, group->ids[i]);
            }
        }
        fsim_id_set_clear(&old);
    }
    (void)id_set_place(set, id);
}

void
fsim_id_set_unoverflow(FsimIdSet *set, gsize home, gsize group)
{
    gsize mask = ((gsize)1 << set->group_bits) - 1;

    for (gsize g = home; g != group; g = (g + 1) & mask)
        set->groups[g].overflow--;
}
