/* SPDX-License-Identifier: MIT */
/*
 * Checking private-pool events: see pool-scopes.h.  A pool is a small record (its reference count
 * and the streams its scope is open on); traces have a handful of pools, so the streams are a
 * plain array.
 */
#include "pool-scopes.h"

#include "fragsim/owned.h"
#include "fragsim/types.h"

typedef struct {
    uint64_t use_count;
    GArray *streams; /* uint64_t: the streams a scope of the pool is open on */
} ScopePool;

static void
scope_pool_free(gpointer data)
{
    static const FsimOwned owned[] = {FSIM_OWNED(ScopePool, streams, g_array_unref)};

    fsim_owned_free(data, owned, G_N_ELEMENTS(owned));
}

void
fsim_pool_scopes_init(FsimPoolScopes *scopes)
{
    scopes->pools = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, scope_pool_free);
}

void
fsim_pool_scopes_clear(FsimPoolScopes *scopes)
{
    g_clear_pointer(&scopes->pools, g_hash_table_unref);
}

static ScopePool *
scopes_lookup(const FsimPoolScopes *scopes, uint64_t pool)
{
    return g_hash_table_lookup(scopes->pools, &pool);
}

static ScopePool *
scopes_add(FsimPoolScopes *scopes, uint64_t pool)
{
    ScopePool *p = g_new0(ScopePool, 1);

    p->streams = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_hash_table_insert(scopes->pools, g_memdup2(&pool, sizeof(pool)), p);
    return p;
}

void
fsim_pool_scopes_seed(FsimPoolScopes *scopes, uint64_t pool)
{
    if (pool != 0 && scopes_lookup(scopes, pool) == NULL)
        scopes_add(scopes, pool)->use_count = 1;
}

uint64_t
fsim_pool_scopes_use_count(const FsimPoolScopes *scopes, uint64_t pool)
{
    const ScopePool *p = scopes_lookup(scopes, pool);

    return p != NULL ? p->use_count : 0;
}

/* The position of @stream among @p's open scopes, or -1. */
static gint
scope_find(const ScopePool *p, uint64_t stream)
{
    for (guint i = 0; p != NULL && i < p->streams->len; i++) {
        if (g_array_index(p->streams, uint64_t, i) == stream)
            return (gint)i;
    }
    return -1;
}

static gboolean G_GNUC_PRINTF(3, 4)
    scopes_error(const FsimEvent *ev, GError **error, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_SYNTAX,
                "event %" G_GUINT64_FORMAT ": %s %" G_GUINT64_FORMAT ": %s", ev->index,
                fsim_event_kind_name(ev->kind), ev->id, message);
    return FALSE;
}

gboolean
fsim_pool_scopes_apply(FsimPoolScopes *scopes, const FsimEvent *ev, GError **error)
{
    ScopePool *p = scopes_lookup(scopes, ev->id);
    gint at = scope_find(p, ev->stream);

    if (ev->id == 0)
        return scopes_error(ev, error, "pool 0 is the default pool, not a private one");
    switch (ev->kind) {
    case FSIM_EV_POOL_BEGIN:
        if (at >= 0)
            return scopes_error(ev, error,
                                "a scope of this pool is already open on stream %" G_GUINT64_FORMAT,
                                ev->stream);
        if (p == NULL)
            p = scopes_add(scopes, ev->id);
        /* A scope already open on another stream is the same capture joined by a side stream. */
        if (p->streams->len == 0)
            p->use_count++;
        g_array_append_val(p->streams, ev->stream);
        return TRUE;
    case FSIM_EV_POOL_END:
        if (at < 0)
            return scopes_error(ev, error,
                                "no scope of this pool is open on stream %" G_GUINT64_FORMAT,
                                ev->stream);
        g_array_remove_index(p->streams, (guint)at);
        return TRUE;
    case FSIM_EV_POOL_RELEASE:
        if (p == NULL || p->use_count == 0)
            return scopes_error(ev, error, "the pool holds no reference to release");
        if (p->use_count == 1 && p->streams->len > 0)
            return scopes_error(ev, error,
                                "the last reference is released while a scope of the pool is "
                                "open on stream %" G_GUINT64_FORMAT,
                                g_array_index(p->streams, uint64_t, 0));
        p->use_count--;
        return TRUE;
    default:
        return scopes_error(ev, error, "not a pool event");
    }
}
