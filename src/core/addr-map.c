/* SPDX-License-Identifier: MIT */
#include "addr-map.h"

#include <glib.h>

#define ADDR_MAP_MIN_BITS 6

void
fsim_addr_map_init(FsimAddrMap *map, guint bits)
{
    map->bits = bits != 0 ? bits : ADDR_MAP_MIN_BITS;
    map->count = 0;
    map->slots = g_new0(FsimAddrSlot, (gsize)1 << map->bits);
}

void
fsim_addr_map_clear(FsimAddrMap *map)
{
    g_clear_pointer(&map->slots, g_free);
    map->count = 0;
}

void
fsim_addr_map_grow(FsimAddrMap *map)
{
    FsimAddrSlot *old = map->slots;
    gsize old_n = (gsize)1 << map->bits;

    g_assert(map->bits < 40);
    map->bits++;
    map->count = 0;
    map->slots = g_new0(FsimAddrSlot, (gsize)1 << map->bits);
    /* at most half the old size: no insert grows again */
    for (gsize i = 0; i < old_n; i++) {
        if (old[i].value != 0) {
            *fsim_addr_map_slot(map, old[i].key) = old[i];
            map->count++;
        }
    }
    g_free(old);
}
