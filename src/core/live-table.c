/* SPDX-License-Identifier: MIT */
#include "live-table.h"

#include <glib.h>

#include <string.h>

#define LIVE_MIN_SLOT_BITS 10

/* Fibonacci hashing: ids are often dense and sequential, which this spreads well.  The high
 * half is kept in the slot; its top slot_bits bits are the home slot. */
static inline uint32_t
live_hash(uint64_t id)
{
    return (uint32_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 32);
}

static inline gsize
live_home(const FsimLiveTable *table, uint32_t hash)
{
    return (gsize)(hash >> (32 - table->slot_bits));
}

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

/* The slot holding @id, or the empty slot that ends its probe run. */
static inline FsimLiveSlot *
live_probe(const FsimLiveTable *table, uint64_t id, uint32_t hash)
{
    gsize mask = ((gsize)1 << table->slot_bits) - 1;

    for (gsize i = live_home(table, hash);; i = (i + 1) & mask) {
        FsimLiveSlot *slot = &table->slots[i];

        if (slot->entry == 0)
            return slot;
        if (slot->hash == hash && fsim_live_table_nth(table, slot->entry - 1)->id == id)
            return slot;
    }
}

FsimLiveEntry *
fsim_live_table_lookup(FsimLiveTable *table, uint64_t id)
{
    FsimLiveSlot *slot = live_probe(table, id, live_hash(id));

    if (slot->entry == 0)
        return NULL;
    table->last_slot = (gsize)(slot - table->slots);
    return fsim_live_table_nth(table, slot->entry - 1);
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
            gsize j = live_home(table, old[i].hash);

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
fsim_live_table_insert_or_find(FsimLiveTable *table, uint64_t id, gboolean *inserted)
{
    uint32_t hash = live_hash(id);
    FsimLiveSlot *slot = live_probe(table, id, hash);
    FsimLiveEntry *entry;
    uint32_t n;

    if (slot->entry != 0) {
        *inserted = FALSE;
        return fsim_live_table_nth(table, slot->entry - 1);
    }
    if ((table->count + 1) * 2 > ((gsize)1 << table->slot_bits)) {
        live_grow_slots(table);
        slot = live_probe(table, id, hash);
    }
    n = live_take_entry(table);
    slot->entry = n + 1;
    slot->hash = hash;
    table->count++;
    entry = fsim_live_table_nth(table, n);
    memset(entry, 0, sizeof(*entry));
    entry->id = id;
    entry->state = FSIM_LIVE_ALLOCATED;
    *inserted = TRUE;
    return entry;
}

FsimLiveEntry *
fsim_live_table_insert(FsimLiveTable *table, uint64_t id)
{
    gboolean inserted;
    FsimLiveEntry *entry = fsim_live_table_insert_or_find(table, id, &inserted);

    g_assert(inserted);
    return entry;
}

void
fsim_live_table_remove(FsimLiveTable *table, FsimLiveEntry *entry)
{
    gsize mask = ((gsize)1 << table->slot_bits) - 1;
    FsimLiveSlot *slot = &table->slots[table->last_slot & mask];
    gsize hole;
    gsize i;
    uint32_t n;

    /* most removes follow the lookup of the same id */
    if (slot->entry == 0 || fsim_live_table_nth(table, slot->entry - 1) != entry)
        slot = live_probe(table, entry->id, live_hash(entry->id));
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
        home = live_home(table, table->slots[i].hash);
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            table->slots[hole] = table->slots[i];
            hole = i;
        }
    }
    table->slots[hole].entry = 0;
    table->count--;
}
