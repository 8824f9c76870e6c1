/* SPDX-License-Identifier: MIT */
/*
 * A map from a 64-bit key (a device address, an allocation id) to a non-zero 64-bit value, for
 * the hot paths that find a record by its address or id: open addressing with 16-byte slots
 * holding the pair inline (value 0 marks an empty slot, so every key, 0 included, can be
 * mapped), linear probing from a Fibonacci hash, backward-shift deletion (no tombstones), grown
 * at half load.  A lookup reads one cache line in the common case; the engine's live table
 * (live-table.h) reads two, its entries being 64 bytes kept apart from its slots, which is right
 * for its stable entry pointers and wrong for a pair.  Users: the simulated address space's
 * taken ranges, the lifetimes pre-pass's live ids, the snapshot reader's live addresses.
 */
#pragma once

#include <glib.h>

#include <stdint.h>

G_BEGIN_DECLS

typedef struct {
    uint64_t key;
    uint64_t value; /* 0: empty */
} FsimAddrSlot;

typedef struct {
    FsimAddrSlot *slots;
    guint bits; /* log2 of the number of slots */
    gsize count;
} FsimAddrMap;

/* An empty map of 2^@bits slots to begin with (0: a small default). */
void fsim_addr_map_init(FsimAddrMap *map, guint bits);
void fsim_addr_map_clear(FsimAddrMap *map);
/* Double the slots (rare: out of line). */
void fsim_addr_map_grow(FsimAddrMap *map);

static inline gsize
fsim_addr_map_home(const FsimAddrMap *map, uint64_t key)
{
    return (gsize)((key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - map->bits));
}

/* The slot of @key: its own, or the empty one where it would go. */
static inline FsimAddrSlot *
fsim_addr_map_slot(const FsimAddrMap *map, uint64_t key)
{
    gsize mask = ((gsize)1 << map->bits) - 1;
    gsize i = fsim_addr_map_home(map, key);

    while (map->slots[i].value != 0 && map->slots[i].key != key)
        i = (i + 1) & mask;
    return &map->slots[i];
}

/* The slot of @key, or NULL.  Valid until the map next changes. */
static inline FsimAddrSlot *
fsim_addr_map_lookup(const FsimAddrMap *map, uint64_t key)
{
    FsimAddrSlot *slot = fsim_addr_map_slot(map, key);

    return slot->value != 0 ? slot : NULL;
}

/* The slot of @key, taken with value 0 when it had none: the caller then sets a non-zero value
 * before the map next changes. */
static inline FsimAddrSlot *
fsim_addr_map_insert_or_find(FsimAddrMap *map, uint64_t key)
{
    FsimAddrSlot *slot = fsim_addr_map_slot(map, key);

    if (slot->value != 0)
        return slot;
    if (G_UNLIKELY((map->count + 1) * 2 > ((gsize)1 << map->bits))) {
        fsim_addr_map_grow(map);
        slot = fsim_addr_map_slot(map, key);
    }
    slot->key = key;
    map->count++;
    return slot;
}

/* Map @key (absent) to @value (non-zero). */
static inline void
fsim_addr_map_insert(FsimAddrMap *map, uint64_t key, uint64_t value)
{
    FsimAddrSlot *slot = fsim_addr_map_insert_or_find(map, key);

    g_assert(slot->value == 0 && value != 0);
    slot->value = value;
}

/* Empty @slot, found by lookup: the entries after it in its probe run move back to fill the
 * hole when their home allows. */
static inline void
fsim_addr_map_remove(FsimAddrMap *map, FsimAddrSlot *slot)
{
    gsize mask = ((gsize)1 << map->bits) - 1;
    gsize hole = (gsize)(slot - map->slots);

    for (gsize i = (hole + 1) & mask; map->slots[i].value != 0; i = (i + 1) & mask) {
        gsize home = fsim_addr_map_home(map, map->slots[i].key);

        /* The entry may move to the hole when its home is not in (hole, i], cyclically. */
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            map->slots[hole] = map->slots[i];
            hole = i;
        }
    }
    map->slots[hole].value = 0;
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
