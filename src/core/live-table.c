/* SPDX-License-Identifier: MIT */
#include "live-table.h"

#include <glib.h>

#include <string.h>

#define LIVE_MIN_CAPACITY 1024

/* Fibonacci hashing: ids are often dense and sequential, which this spreads well. */
static inline gsize
live_hash(const FsimLiveTable *table, uint64_t id)
{
    return (gsize)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (table->capacity - 1);
}

void
fsim_live_table_init(FsimLiveTable *table)
{
    table->capacity = LIVE_MIN_CAPACITY;
    table->count = 0;
    table->slots = g_new0(FsimLiveEntry, table->capacity);
}

void
fsim_live_table_clear(FsimLiveTable *table)
{
    g_clear_pointer(&table->slots, g_free);
    table->capacity = 0;
    table->count = 0;
}

FsimLiveEntry *
fsim_live_table_lookup(FsimLiveTable *table, uint64_t id)
{
    gsize mask = table->capacity - 1;

    for (gsize i = live_hash(table, id);; i = (i + 1) & mask) {
        FsimLiveEntry *slot = &table->slots[i];

        if (slot->state == 0)
            return NULL;
        if (slot->id == id)
            return slot;
    }
}

static void
live_grow(FsimLiveTable *table)
{
    FsimLiveEntry *old = table->slots;
    gsize old_capacity = table->capacity;

    table->capacity *= 2;
    table->slots = g_new0(FsimLiveEntry, table->capacity);
    for (gsize i = 0; i < old_capacity; i++) {
        if (old[i].state != 0) {
            gsize mask = table->capacity - 1;
            gsize j = live_hash(table, old[i].id);

            while (table->slots[j].state != 0)
                j = (j + 1) & mask;
            table->slots[j] = old[i];
        }
    }
    g_free(old);
}

FsimLiveEntry *
fsim_live_table_insert(FsimLiveTable *table, uint64_t id)
{
    gsize mask;
    gsize i;

    if ((table->count + 1) * 2 > table->capacity)
        live_grow(table);
    mask = table->capacity - 1;
    for (i = live_hash(table, id); table->slots[i].state != 0; i = (i + 1) & mask)
        g_assert(table->slots[i].id != id);
    memset(&table->slots[i], 0, sizeof(table->slots[i]));
    table->slots[i].id = id;
    table->slots[i].state = FSIM_LIVE_ALLOCATED;
    table->count++;
    return &table->slots[i];
}

void
fsim_live_table_remove(FsimLiveTable *table, FsimLiveEntry *entry)
{
    gsize mask = table->capacity - 1;
    gsize hole = (gsize)(entry - table->slots);
    gsize i = hole;

    /* Backward-shift deletion: move later members of the probe run into the hole when their
     * home slot does not lie cyclically in (hole, i]. */
    for (;;) {
        gsize home;

        i = (i + 1) & mask;
        if (table->slots[i].state == 0)
            break;
        home = live_hash(table, table->slots[i].id);
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            table->slots[hole] = table->slots[i];
            hole = i;
        }
    }
    table->slots[hole].state = 0;
    table->count--;
}
