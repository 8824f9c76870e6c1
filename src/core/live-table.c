/* SPDX-License-Identifier: MIT */
#include "live-table.h"

#include <glib.h>

#include <string.h>

#define LIVE_MIN_GROUP_BITS 7 /* 1,024 slots */

static FsimLiveGroup *
live_groups_new(guint group_bits)
{
    gsize n = (gsize)1 << group_bits;
    FsimLiveGroup *groups = g_aligned_alloc0(n, sizeof(FsimLiveGroup), sizeof(FsimLiveGroup));

    for (gsize g = 0; g < n; g++)
        memset(groups[g].ctrl, FSIM_LIVE_EMPTY, sizeof(groups[g].ctrl));
    return groups;
}

void
fsim_live_table_init(FsimLiveTable *table)
{
    memset(table, 0, sizeof(*table));
    table->group_bits = LIVE_MIN_GROUP_BITS;
    table->shift = 64 - LIVE_MIN_GROUP_BITS;
    table->max_count = ((gsize)FSIM_LIVE_GROUP << LIVE_MIN_GROUP_BITS) / 2;
    table->groups = live_groups_new(table->group_bits);
}

void
fsim_live_table_clear(FsimLiveTable *table)
{
    for (gsize p = 0; p < table->n_pages; p++)
        g_aligned_free(table->pages[p]);
    g_free(table->pages);
    g_aligned_free(table->groups);
    memset(table, 0, sizeof(*table));
}

gsize
fsim_live_table_bytes(const FsimLiveTable *table)
{
    return table->n_pages * (FSIM_LIVE_PAGE * sizeof(FsimLiveEntry) + sizeof(FsimLiveEntry *)) +
           (((gsize)1 << table->group_bits) * sizeof(FsimLiveGroup));
}

/* Put entry @n of @id in the first empty slot from its home group on; every group passed on
 * the way counts one overflow more. */
static void
live_place(FsimLiveTable *table, uint64_t id, uint32_t n)
{
    uint64_t hash = fsim_live_hash(id);
    gsize mask = ((gsize)1 << table->group_bits) - 1;

    for (gsize g = fsim_live_home(table, hash);; g = (g + 1) & mask) {
        FsimLiveGroup *group = &table->groups[g];
        uint64_t room = fsim_live_ctrl(group) & FSIM_LIVE_MSB;

        if (room != 0) {
            guint i = (guint)__builtin_ctzll(room) >> 3;

            group->ctrl[i] = (uint8_t)fsim_live_tag(table, hash);
            group->entry[i] = n;
            return;
        }
        group->overflow++;
    }
}

void
fsim_live_table_unoverflow(FsimLiveTable *table, gsize home, gsize group)
{
    gsize mask = ((gsize)1 << table->group_bits) - 1;

    for (gsize g = home; g != group; g = (g + 1) & mask)
        table->groups[g].overflow--;
}

/* Grow the groups to 2^@group_bits: every live entry placed again. */
static void
live_rebuild(FsimLiveTable *table, guint group_bits)
{
    FsimLiveGroup *old = table->groups;
    gsize old_n = (gsize)1 << table->group_bits;

    g_assert(group_bits <= 29);
    table->group_bits = group_bits;
    table->shift = 64 - group_bits;
    table->max_count = ((gsize)FSIM_LIVE_GROUP << group_bits) / 2;
    table->groups = live_groups_new(group_bits);
    table->last_entry = NULL;
    for (gsize g = 0; g < old_n; g++) {
        for (guint i = 0; i < FSIM_LIVE_GROUP; i++) {
            if ((old[g].ctrl[i] & FSIM_LIVE_EMPTY) == 0)
                live_place(table, fsim_live_table_nth(table, old[g].entry[i])->id, old[g].entry[i]);
        }
    }
    g_aligned_free(old);
}

/* A fresh entry's number: the free list's head, else the next one (a new page every
 * FSIM_LIVE_PAGE entries). */
static uint32_t
live_take_entry(FsimLiveTable *table)
{
    uint32_t n;

    if (table->free != 0) {
        n = table->free - 1;
        table->free = (uint32_t)fsim_live_table_nth(table, n)->id;
        return n;
    }
    if (table->used >= G_MAXUINT32 - 1)
        g_error("live table: more than %u live allocations", G_MAXUINT32 - 1);
    if ((table->used & (FSIM_LIVE_PAGE - 1)) == 0) {
        table->pages = g_renew(FsimLiveEntry *, table->pages, table->n_pages + 1);
        table->pages[table->n_pages++] =
            g_aligned_alloc(FSIM_LIVE_PAGE, sizeof(FsimLiveEntry), sizeof(FsimLiveEntry));
    }
    return (uint32_t)table->used++;
}

FsimLiveEntry *
fsim_live_table_insert_slow(FsimLiveTable *table, uint64_t id)
{
    FsimLiveEntry *entry;
    uint32_t n;

    if (table->count >= table->max_count)
        live_rebuild(table, table->group_bits + 1);
    n = live_take_entry(table);
    live_place(table, id, n);
    table->count++;
    entry = fsim_live_table_nth(table, n);
    memset(entry, 0, sizeof(*entry));
    entry->id = id;
    entry->state = FSIM_LIVE_ALLOCATED;
    return entry;
}
