/* SPDX-License-Identifier: MIT */
/*
 * A set of disjoint half-open uint64 ranges [start, end), coalesced on insertion.  Used for the
 * ids an engine has seen (dense id spaces collapse to a few ranges, so memory grows with the gaps,
 * not with the trace) and for the device's paranoid page bookkeeping.
 */
#pragma once

#include <glib.h>

#include <stdint.h>

typedef struct FsimRangeSet FsimRangeSet;

FsimRangeSet *fsim_range_set_new(void);
void fsim_range_set_free(FsimRangeSet *set);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimRangeSet, fsim_range_set_free)

/* Add [start, end); overlapping or adjacent ranges merge.  start < end. */
void fsim_range_set_add(FsimRangeSet *set, uint64_t start, uint64_t end);
/* Remove [start, end) (parts not in the set are ignored). */
void fsim_range_set_remove(FsimRangeSet *set, uint64_t start, uint64_t end);
/* TRUE when every point of [start, end) is in the set. */
gboolean fsim_range_set_covers(const FsimRangeSet *set, uint64_t start, uint64_t end);
/* TRUE when some point of [start, end) is in the set. */
gboolean fsim_range_set_overlaps(const FsimRangeSet *set, uint64_t start, uint64_t end);
/* TRUE when @value is in the set. */
gboolean fsim_range_set_contains(const FsimRangeSet *set, uint64_t value);
/* Number of disjoint ranges. */
guint fsim_range_set_count(const FsimRangeSet *set);
