/* SPDX-License-Identifier: MIT */
/*
 * Freeing a struct by a table of the members it owns: see include/fragsim/owned.h.
 */
#include "fragsim/owned.h"

#include <string.h>

void
fsim_owned_clear(gpointer item, const FsimOwned *owned, gsize n)
{
    if (item == NULL)
        return;
    for (gsize i = 0; i < n; i++) {
        guint8 *member = (guint8 *)item + owned[i].offset;
        gpointer value;

        /* Copied, not read through a gpointer lvalue: the member is a char *, a GArray *... */
        memcpy(&value, member, sizeof(value));
        if (value == NULL)
            continue;
        memcpy(member, &(gpointer){NULL}, sizeof(value));
        owned[i].destroy(value);
    }
}

void
fsim_owned_free(gpointer item, const FsimOwned *owned, gsize n)
{
    fsim_owned_clear(item, owned, n);
    g_free(item);
}
