/* SPDX-License-Identifier: MIT */
/*
 * Freeing a struct by a table of the members it owns: see include/fragsim/owned.h.
 */
#include "fragsim/owned.h"

void
fsim_owned_clear(gpointer item, const FsimOwned *owned, gsize n)
{
    if (item == NULL)
        return;
    for (gsize i = 0; i < n; i++) {
        gpointer *member = (gpointer *)(void *)((guint8 *)item + owned[i].offset);

        if (*member != NULL)
            owned[i].destroy(g_steal_pointer(member));
    }
}

void
fsim_owned_free(gpointer item, const FsimOwned *owned, gsize n)
{
    fsim_owned_clear(item, owned, n);
    g_free(item);
}
