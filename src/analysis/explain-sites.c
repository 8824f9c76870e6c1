/* SPDX-License-Identifier: MIT */
/*
 * Where each live allocation was made, for naming the blocks that pin free memory.
 *
 * An engine observer remembers, per live allocation id, the stack of its ALLOC event and the
 * label of the last mark before it.  A site is named by the first user frame of the stack
 * (stacks.c) as `file.py:LINE:function`, with the path cut after `site-packages/` (or to its
 * file name for the program's own files); without one, by size, stream and that mark.
 */
#include <glib.h>

#include "fragsim/owned.h"
#include "fragsim/types.h"

#include "explain-private.h"

#define MARK_NONE  0u          /* before any mark */
#define MARK_START G_MAXUINT32 /* alive at trace start */

typedef struct {
    uint32_t stack;
    uint32_t mark;
} Site;

struct ExplainSites {
    const FsimTrace *trace;
    GHashTable *by_id; /* uint64_t* id -> Site (packed in the value) */
    GPtrArray *marks;  /* labels; [0] unused */
};

static gpointer
site_pack(Site site)
{
    return GSIZE_TO_POINTER(((gsize)site.stack << 32) | site.mark);
}

static Site
site_unpack(gconstpointer p)
{
    gsize v = GPOINTER_TO_SIZE(p);
    Site site = {(uint32_t)(v >> 32), (uint32_t)(v & 0xffffffffu)};

    return site;
}

static void
sites_put(ExplainSites *sites, uint64_t id, Site site)
{
    uint64_t *key = g_new(uint64_t, 1);

    *key = id;
    g_hash_table_replace(sites->by_id, key, site_pack(site));
}

ExplainSites *
explain_sites_new(const FsimTrace *trace, uint32_t device)
{
    ExplainSites *sites = g_new0(ExplainSites, 1);
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);

    G_STATIC_ASSERT(sizeof(gsize) >= 8);
    sites->trace = trace;
    sites->by_id = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    sites->marks = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(sites->marks, NULL);
    for (gsize i = 0; state != NULL && i < state->n_blocks; i++) {
        Site site = {state->blocks[i].stack, MARK_START};

        sites_put(sites, state->blocks[i].id, site);
    }
    return sites;
}

void
explain_sites_free(ExplainSites *sites)
{
    static const FsimOwned owned[] = {FSIM_OWNED(ExplainSites, by_id, g_hash_table_unref),
                                      FSIM_OWNED(ExplainSites, marks, g_ptr_array_unref)};

    fsim_owned_free(sites, owned, G_N_ELEMENTS(owned));
}

static void
sites_on_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    ExplainSites *sites = data;
    const char *last = g_ptr_array_index(sites->marks, sites->marks->len - 1);

    (void)engine;
    if (ev->kind != FSIM_EV_MARK || ev->label == NULL)
        return;
    if (last == NULL || g_strcmp0(last, ev->label) != 0)
        g_ptr_array_add(sites->marks, g_strdup(ev->label));
}

static void
sites_on_alloc(gpointer data, const FsimEngine *engine, const FsimEvent *ev, uint64_t id,
               const FsimBlock *block, uint64_t requested)
{
    ExplainSites *sites = data;
    Site site;

    (void)engine;
    (void)block;
    (void)requested;
    if (ev == NULL)
        return; /* seeded: known from the initial state */
    site.stack = ev->stack;
    site.mark = sites->marks->len - 1;
    sites_put(sites, id, site);
}

static void
sites_on_release(gpointer data, const FsimEngine *engine, uint64_t id, const FsimBlock *block,
                 uint64_t requested)
{
    ExplainSites *sites = data;

    (void)engine;
    (void)block;
    (void)requested;
    g_hash_table_remove(sites->by_id, &id);
}

static const FsimObserver sites_observer = {
    .event = sites_on_event,
    .alloc = sites_on_alloc,
    .release = sites_on_release,
};

void
explain_sites_attach(ExplainSites *sites, FsimEngine *engine)
{
    fsim_engine_add_observer(engine, &sites_observer, sites);
}

char *
explain_sites_name(const ExplainSites *sites, uint64_t id, uint64_t size, uint64_t stream)
{
    gpointer value = NULL;
    Site site = {0, MARK_NONE};
    g_autofree char *size_text = fsim_format_size(size);

    if (g_hash_table_lookup_extended(sites->by_id, &id, NULL, &value))
        site = site_unpack(value);
    if (site.stack != 0) {
        char *name = fsim_trace_stack_site(sites->trace, site.stack);

        if (name != NULL)
            return name;
    }
    if (site.mark == MARK_START)
        return g_strdup_printf("%s on stream %" G_GUINT64_FORMAT ", alive at trace start",
                               size_text, stream);
    if (site.mark == MARK_NONE)
        return g_strdup_printf("%s on stream %" G_GUINT64_FORMAT ", before any mark", size_text,
                               stream);
    return g_strdup_printf("%s on stream %" G_GUINT64_FORMAT " after mark %s", size_text, stream,
                           (const char *)g_ptr_array_index(sites->marks, site.mark));
}
