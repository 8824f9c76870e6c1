/* SPDX-License-Identifier: MIT */
#include "live-table.h"

#include <glib.h>

#include <string.h>

#define LIVE_MIN_SLOT_BITS 10

void
fsim_live_table_init(FsimLiveTable *table)
{
    memset(table, 0, sizeof(*table));
    table->slot_bits = LIVE_MIN_SLOT_BITS;
    table->slots = g_new0(FsimLiveSlot, (gsize)1 << table->slot_bits);
}

void
fsim_live_table_clear(FsimLiveTable *table)
{
    for (gsize p = 0; p < table->n_pages; p++)
        g_free(table->pages[p]);
    g_free(table->pages);
    g_free(table->slots);
    memset(table, 0, sizeof(*table));
}

gsize
fsim_live_table_bytes(const FsimLiveTable *table)
{
    return table->n_pages * (FSIM_LIVE_PAGE * sizeof(FsimLiveEntry) + sizeof(FsimLiveEntry *)) +
           (((gsize)1 << table->slot_bits) * sizeof(FsimLiveSlot));
}

static void
live_grow_slots(FsimLiveTable *table)
{
    FsimLiveSlot *old = table->slots;
    gsize old_n = (gsize)1 << table->slot_bits;
    gsize mask;

    g_assert(table->slot_bits < 32);
    table->slot_bits++;
    mask = ((gsize)1 << table->slot_bits) - 1;
    table->slots = g_new0(FsimLiveSlot, mask + 1);
    for (gsize i = 0; i < old_n; i++) {
        if (old[i].entry != 0) {
            gsize j = fsim_live_home(table, old[i].hash);

            while (table->slots[j].entry != 0)
                j = (j + 1) & mask;
            table->slots[j] = old[i];
        }
    }
    g_free(old);
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
        table->pages[table->n_pages++] = g_new(FsimLiveEntry, FSIM_LIVE_PAGE);
    }
    return (uint32_t)table->used++;
}

FsimLiveEntry *
fsim_live_table_insert_slow(FsimLiveTable *table, uint64_t id, uint32_t hash)
{
    FsimLiveSlot *slot;
    FsimLiveEntry *entry;
    uint32_t n;

    if ((table->count + 1) * 2 > ((gsize)1 << table->slot_bits))
        live_grow_slots(table);
    slot = fsim_live_probe(table, id, hash);
    n = live_take_entry(table);
    slot->entry = n + 1;
    slot->hash = hash;
    table->count++;
    entry = fsim_live_table_nth(table, n);
    memset(entry, 0, sizeof(*entry));
    entry->id = id;
    entry->state = FSIM_LIVE_ALLOCATED;
    return entry;
}
