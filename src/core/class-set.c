/* SPDX-License-Identifier: MIT */
/*
 * The rare parts of a class set (the hot path is inline in class-set.h): growing a class's
 * array, draining the set, its checks.
 */
#include "class-set.h"

#include <glib.h>

#include <string.h>

FsimClassSet *
fsim_class_set_new(void)
{
    return g_new0(FsimClassSet, 1);
}

void
fsim_class_set_free(FsimClassSet *set)
{
    if (set == NULL)
        return;
    for (guint c = 0; c < FSIM_CLASS_COUNT; c++)
        g_aligned_free(set->classes[c]);
    g_free(set);
}

gboolean
fsim_class_set_grow(FsimClassSet *set, guint cls)
{
    FsimClassArray *array = set->classes[cls];
    uint32_t capacity = array == NULL ? FSIM_CLASS_MIN_CAP : array->capacity * 2;
    uint32_t old_slots = array == NULL ? 0 : array->capacity + FSIM_CLASS_SLACK;
    gsize bytes = sizeof(FsimClassArray) + (capacity + FSIM_CLASS_SLACK) * sizeof(FsimClassEntry);
    FsimClassArray *grown;

    if (array != NULL && array->len >= FSIM_CLASS_MAX_LEN)
        return FALSE;
    /* on a cache line: a short class's search reads its first line or two */
    grown = g_aligned_alloc(1, (bytes + 63) & ~(gsize)63, 64);
    if (array == NULL) {
        grown->len = 0;
    } else {
        memcpy(grown, array, sizeof(FsimClassArray) + old_slots * sizeof(FsimClassEntry));
        g_aligned_free(array);
    }
    /* the new slots are past the entries (the old ones past them hold sentinels already) */
    for (uint32_t i = old_slots; i < capacity + FSIM_CLASS_SLACK; i++) {
        grown->entries[i].key = FSIM_CLASS_SENTINEL;
        grown->entries[i].item = NULL;
    }
    grown->capacity = capacity;
    set->classes[cls] = grown;
    return TRUE;
}

void
fsim_class_set_drain(FsimClassSet *set,
                     void (*each)(uint64_t size, uint64_t key, gpointer item, gpointer data),
                     gpointer data)
{
    for (guint c = 0; c < FSIM_CLASS_COUNT; c++) {
        FsimClassArray *array = set->classes[c];

        if (array == NULL)
            continue;
        for (uint32_t i = 0; i < array->len; i++) {
            each(fsim_class_size(c), array->entries[i].key, array->entries[i].item, data);
            array->entries[i].key = FSIM_CLASS_SENTINEL;
        }
        array->len = 0;
    }
    memset(set->words, 0, sizeof(set->words));
    set->top = 0;
    set->count = 0;
}

const char *
fsim_class_set_check(const FsimClassSet *set)
{
    gsize count = 0;

    for (guint w = 0; w < FSIM_CLASS_WORDS; w++) {
        if (((set->top >> w) & 1) != (set->words[w] != 0))
            return "a bit of the top bitmap is wrong";
    }
    for (guint c = 0; c < FSIM_CLASS_COUNT; c++) {
        const FsimClassArray *array = set->classes[c];
        gboolean bit = (set->words[c >> 6] >> (c & 63)) & 1;
        uint32_t len = array != NULL ? array->len : 0;

        if (bit != (len != 0))
            return "a bit of the class bitmap is wrong";
        if (array == NULL)
            continue;
        if (array->len > array->capacity || array->capacity > FSIM_CLASS_MAX_LEN * 2)
            return "a class is overfull";
        for (uint32_t i = 0; i < array->len; i++) {
            if (i > 0 && array->entries[i - 1].key >= array->entries[i].key)
                return "a class's keys are out of order";
        }
        for (uint32_t i = array->len; i < array->capacity + FSIM_CLASS_SLACK; i++) {
            if (array->entries[i].key != FSIM_CLASS_SENTINEL)
                return "a slot past a class's entries is not a sentinel";
        }
        count += array->len;
    }
    if (count != set->count)
        return "the count is wrong";
    return NULL;
}
