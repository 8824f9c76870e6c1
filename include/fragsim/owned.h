/* SPDX-License-Identifier: MIT */
/*
 * fragsim: freeing a struct by a table of the members it owns.
 *
 * Most of fragsim's structs own a few heap members (strings, arrays, hash tables) and their
 * destructor is the same walk: nothing for NULL, each owned member with its own free function,
 * then the struct.  Such a struct lists its owned members once, and its destructor is one call:
 *
 *     void
 *     fsim_thing_free(FsimThing *thing)
 *     {
 *         static const FsimOwned owned[] = {FSIM_OWNED(FsimThing, name, g_free),
 *                                           FSIM_OWNED(FsimThing, items, g_array_unref)};
 *
 *         fsim_owned_free(thing, owned, G_N_ELEMENTS(owned));
 *     }
 *
 * A member the struct may hold as NULL is skipped, as g_clear_pointer() would.
 */
#pragma once

#include <glib.h>

#include <stddef.h>

G_BEGIN_DECLS

/* One owned pointer member: where it is in the struct and what frees it. */
typedef struct {
    gsize offset;
    GDestroyNotify destroy;
} FsimOwned;

/* The #FsimOwned of @member (a pointer, or a nested member path `a.b`) of @type, freed with the
 * function @destroy (g_free, g_array_unref, g_ptr_array_unref, g_hash_table_unref, ...). */
/* clang-format off */
#define FSIM_OWNED(type, member, destroy) {offsetof(type, member), (GDestroyNotify)(destroy)}
/* clang-format on */

/**
 * fsim_owned_clear:
 * @item: (nullable): a struct.
 * @owned: the @n members of it that it owns, freed in this order.
 *
 * Frees each non-NULL owned member of @item and sets it to NULL; @item itself stays.
 */
void fsim_owned_clear(gpointer item, const FsimOwned *owned, gsize n);

/**
 * fsim_owned_free:
 * @item: (nullable): a struct allocated with g_new() or g_new0().
 * @owned: the @n members of it that it owns, freed in this order.
 *
 * fsim_owned_clear(), then g_free(@item).  Nothing for NULL.
 */
void fsim_owned_free(gpointer item, const FsimOwned *owned, gsize n);

G_END_DECLS
