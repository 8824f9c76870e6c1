/* SPDX-License-Identifier: MIT */
/*
 * The engine's check of a trace's private-pool events (event.h, FSIM_EV_POOL_*): which scopes are
 * open on which stream and how many references each pool holds, so that every policy sees only
 * well-formed sequences and a broken trace fails with a message naming the event.
 */
#pragma once

#include <glib.h>

#include "fragsim/event.h"

typedef struct {
    GHashTable *pools; /* uint64_t* pool id -> its record (pool-scopes.c) */
} FsimPoolScopes;

void fsim_pool_scopes_init(FsimPoolScopes *scopes);
void fsim_pool_scopes_clear(FsimPoolScopes *scopes);

/* A pool of the initial state: it exists with one reference (a no-op if it already does). */
void fsim_pool_scopes_seed(FsimPoolScopes *scopes, uint64_t pool);

/**
 * fsim_pool_scopes_apply:
 * @ev: a POOL_BEGIN, POOL_END or POOL_RELEASE event.
 * @error: FSIM_TRACE_ERROR_SYNTAX naming the event's index: pool 0, a scope opened twice on one
 *     stream, an end without its begin, a release of a pool that has no reference left or that
 *     would drop the last one while a scope of it is open.
 *
 * Returns: %FALSE (and changes nothing) when @ev is not allowed now.
 */
gboolean fsim_pool_scopes_apply(FsimPoolScopes *scopes, const FsimEvent *ev, GError **error);

/* The number of references @pool holds now (0 for a pool never seen). */
uint64_t fsim_pool_scopes_use_count(const FsimPoolScopes *scopes, uint64_t pool);
