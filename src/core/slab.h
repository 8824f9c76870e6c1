/* SPDX-License-Identifier: MIT */
/*
 * A slab of fixed-size records (a policy's blocks or chunks): records come from pages of many at
 * a time and go back to a free list chained through their first word, so a split or a merge on
 * the replay's hot path allocates nothing once the slab is warm, and a policy frees all its
 * records at once without walking its lists.  Records never move; the slab does not know which
 * are in use.
 */
#pragma once

#include <glib.h>

#include <string.h>

G_BEGIN_DECLS

typedef struct {
    gpointer spare;   /* the free list, chained through each record's first word */
    GPtrArray *pages; /* of per_page records each */
    gsize record_size;
    guint per_page;
} FsimSlab;

/* A slab of @record_size-byte records (at least a pointer's size), @per_page to a page. */
void fsim_slab_init(FsimSlab *slab, gsize record_size, guint per_page);
/* Free every record, in use or not. */
void fsim_slab_clear(FsimSlab *slab);
/* Add a page to the free list (out of line: once per per_page records). */
void fsim_slab_grow(FsimSlab *slab);

/* A record, its contents undefined. */
static inline gpointer
fsim_slab_alloc(FsimSlab *slab)
{
    gpointer record;

    if (G_UNLIKELY(slab->spare == NULL))
        fsim_slab_grow(slab);
    record = slab->spare;
    memcpy(&slab->spare, record, sizeof(gpointer));
    return record;
}

/* A zeroed record. */
static inline gpointer
fsim_slab_alloc0(FsimSlab *slab)
{
    gpointer record = fsim_slab_alloc(slab);

    memset(record, 0, slab->record_size);
    return record;
}

/* Give @record back for reuse. */
static inline void
fsim_slab_free(FsimSlab *slab, gpointer record)
{
    memcpy(record, &slab->spare, sizeof(gpointer));
    slab->spare = record;
}

G_END_DECLS
