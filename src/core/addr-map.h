/* SPDX-License-Identifier: MIT */
/*
 * A map from a non-zero 64-bit key (a device address) to a 64-bit value, for the hot paths
 * that find a neighbour by its address: open addressing with 16-byte slots holding the pair
 * inline (key 0 marks an empty slot), linear probing from a Fibonacci hash, backward-shift
 * deletion (no tombstones), grown at half load.  A lookup reads one cache line in the common
 * case; the engine's live table (live-table.h) reads two, its entries being 72 bytes kept apart
 * from its slots, which is right for its stable entry pointers and wrong for a pair.
 */
#pragma once

#include <glib.h>

#include <stdint.h>

G_BEGIN_DECLS

typedef struct {
    uint64_t key; /* 0: empty */
    uint64_t value;
} FsimAddrSlot;

typedef struct {
    FsimAddrSlot *slots;
    guint bits; /* log2 of the number of slots */
    gsize count;
} FsimAddrMap;

void fsim_addr_map_init(FsimAddrMap *map);
void fsim_addr_map_clear(FsimAddrMap *map);
/* Double the slots (rare: out of line). */
void fsim_addr_map_grow(FsimAddrMap *map);

static inline gsize
fsim_addr_map_home(const FsimAddrMap *map, uint64_t key)
{
    return (gsize)((key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - map->bits));
}

/* The slot of @key, or NULL.  Valid until the map next changes. */
static inline FsimAddrSlot *
fsim_addr_map_lookup(const FsimAddrMap *map, uint64_t key)
{
    gsize mask = ((gsize)1 << map->bits) - 1;

    for (gsize i = fsim_addr_map_home(map, key);; i = (i + 1) & mask) {
        FsimAddrSlot *slot = &map->slots[i];

        if (slot->key == key)
            return slot;
        if (slot->key == 0)
            return NULL;
    }
}

/* Map @key (non-zero, absent) to @value. */
static inline void
fsim_addr_map_insert(FsimAddrMap *map, uint64_t key, uint64_t value)
{
    gsize mask;
    gsize i;

    if (G_UNLIKELY((map->count + 1) * 2 > ((gsize)1 << map->bits)))
        fsim_addr_map_grow(map);
    mask = ((gsize)1 << map->bits) - 1;
    for (i = fsim_addr_map_home(map, key); map->slots[i].key != 0; i = (i + 1) & mask)
        ;
    map->slots[i].key = key;
    map->slots[i].value = value;
    map->count++;
}

/* Empty @slot, found by lookup: the entries after it in its probe run move back to fill the
 * hole when their home allows. */
static inline void
fsim_addr_map_remove(FsimAddrMap *map, FsimAddrSlot *slot)
{
    gsize mask = ((gsize)1 << map->bits) - 1;
    gsize hole = (gsize)(slot - map->slots);

    for (gsize i = (hole + 1) & mask; map->slots[i].key != 0; i = (i + 1) & mask) {
        gsize home = fsim_addr_map_home(map, map->slots[i].key);

        /* The entry may move to the hole when its home is not in (hole, i], cyclically. */
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            map->slots[hole] = map->slots[i];
            hole = i;
        }
    }
    map->slots[hole].key = 0;
    map->count--;
}

/* Remove @key, which must be present. */
static inline void
fsim_addr_map_erase(FsimAddrMap *map, uint64_t key)
{
    FsimAddrSlot *slot = fsim_addr_map_lookup(map, key);

    g_assert(slot != NULL);
    fsim_addr_map_remove(map, slot);
}

G_END_DECLS
