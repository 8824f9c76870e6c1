/* SPDX-License-Identifier: MIT */
/*
 * The free-block set's rare paths (the hot ones are inline in free-set.h): the first small
 * block, turning a set mixed, the checks, clearing.
 */
#include "free-set.h"

#include <glib.h>

static void
move_to_big(uint64_t size, uint64_t key, gpointer item, gpointer data)
{
    fsim_size_set_insert(data, size, key, item);
}

void
fsim_pytorch_freeset_mix(FreeSet *set)
{
    if (set->small != NULL) {
        fsim_class_set_drain(set->small, move_to_big, &set->big);
        fsim_class_set_free(set->small);
        set->small = NULL;
    }
    set->small_below = 0;
    set->mixed = G_MAXUINT64;
}

void
fsim_pytorch_freeset_insert_slow(FreeSet *set, Block *block)
{
    /* not mixed, 1 <= size <= FSIM_CLASS_MAX_SIZE: either the set has no class set yet, or the
     * class set refused the block */
    if ((block->size & (FSIM_CLASS_UNIT - 1)) == 0 && set->small == NULL) {
        set->small = fsim_class_set_new();
        set->small_below = FSIM_CLASS_MAX_SIZE;
        if (fsim_class_set_insert(set->small, block->size, block->addr, block))
            return;
    }
    fsim_pytorch_freeset_mix(set);
    fsim_size_set_insert(&set->big, block->size, block->addr, block);
}

const char *
fsim_pytorch_freeset_check(const FreeSet *set)
{
    const char *broken = fsim_size_set_check(&set->big);
    FsimSizeCursor cursor;

    if (broken != NULL)
        return broken;
    if (set->small != NULL && (broken = fsim_class_set_check(set->small)) != NULL)
        return broken;
    if ((set->small != NULL) != (set->small_below != 0) || (set->mixed != 0 && set->small != NULL))
        return "the small and mixed marks disagree";
    if (set->mixed == 0 && fsim_size_set_first(&set->big, &cursor) != NULL &&
        fsim_size_set_entry(&cursor)->size <= FSIM_CLASS_MAX_SIZE)
        return "a block of at most 2 MiB is in the size set of a set not mixed";
    return NULL;
}

void
fsim_pytorch_freeset_clear(FreeSet *set)
{
    fsim_size_set_clear(&set->big);
    fsim_class_set_free(set->small);
    set->small = NULL;
    set->small_below = 0;
    set->mixed = 0;
}
