/* SPDX-License-Identifier: MIT */
#include "slab.h"

#include <glib.h>

void
fsim_slab_init(FsimSlab *slab, gsize record_size, guint per_page)
{
    g_return_if_fail(record_size >= sizeof(gpointer) && per_page > 0);
    *slab = (FsimSlab){.pages = g_ptr_array_new_with_free_func(g_free),
                       .record_size = record_size,
                       .per_page = per_page};
}

void
fsim_slab_clear(FsimSlab *slab)
{
    g_clear_pointer(&slab->pages, g_ptr_array_unref);
    slab->spare = NULL;
}

void
fsim_slab_grow(FsimSlab *slab)
{
    char *page = g_malloc_n(slab->per_page, slab->record_size);

    g_ptr_array_add(slab->pages, page);
    /* chained in address order, the first record first */
    for (guint i = slab->per_page; i-- > 0;) {
        gpointer record = page + (gsize)i * slab->record_size;

        memcpy(record, &slab->spare, sizeof(gpointer));
        slab->spare = record;
    }
}
