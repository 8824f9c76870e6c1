/* SPDX-License-Identifier: MIT */
/*
 * The state at one moment of a replay: segments, blocks, the breakdown of reserved memory, the
 * pins by site, and at an OOM why no free block could serve the request.
 *
 * Sources, all public: the policy's describe() (segments, blocks, releasable bytes), the engine's
 * live table (what each live block asked for, its id and stream), the device's reserved counter.
 * A policy without describe() is described by its live blocks, each its own segment; whatever
 * else the device holds is free memory that cannot be told apart, counted as pinned.
 *
 * THE ATTRIBUTION RULE (docs/explain.md).  The pinned bytes of a free block are charged to the
 * live blocks beside it in its segment, which are what keeps them: in a segment with pages (an
 * expandable segment), the part below the block's first whole page goes to the block before it
 * and the rest to the block after it (each shares a page with that part); in a cudaMalloc'd
 * segment, or when the free block holds no whole page, half to each (the block before gets the
 * odd byte).  A side without a live neighbour passes its share to the other side; a free block
 * with neither (a policy that never releases) is charged to no site.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/device.h"
#include "fragsim/engine.h"
#include "fragsim/owned.h"

#include "explain-private.h"

typedef struct {
    uint64_t id;
    FsimAddr addr;
    uint64_t size;
    uint64_t requested;
    uint64_t stream;
} LiveItem;

typedef struct {
    GArray *segments;   /* FsimSegmentView */
    GArray *blocks;     /* FsimExplainBlock */
    GArray *live_addrs; /* FsimAddr per block: FsimBlockView.live_addr */
} Walk;

static void
walk_segment(gpointer data, const FsimSegmentView *segment)
{
    Walk *walk = data;

    g_array_append_val(walk->segments, *segment);
}

static void
walk_block(gpointer data, const FsimBlockView *view)
{
    Walk *walk = data;
    FsimExplainBlock block = {
        .addr = view->addr,
        .size = view->size,
        .free = view->free,
        .releasable = view->free ? MIN(view->releasable, view->size) : 0,
        .segment = walk->segments->len - 1,
        .site = -1,
    };

    g_assert(walk->segments->len > 0);
    g_array_append_val(walk->blocks, block);
    g_array_append_val(walk->live_addrs, view->live_addr);
}

static const FsimPolicyVisitor walk_visitor = {walk_segment, walk_block};

static void
collect_live(gpointer data, uint64_t id, const FsimBlock *block, uint64_t requested,
             uint64_t stream)
{
    GArray *live = data;
    LiveItem item = {id, block->addr, block->size, requested, stream};

    g_array_append_val(live, item);
}

/* A segment the policy reported with its free blocks only: its blocks in use are the live
 * allocations inside it.  Rebuilds @walk's blocks with them, in address order. */
static void
walk_add_engine_blocks(Walk *walk, const GArray *live)
{
    g_autoptr(GArray) blocks = g_array_new(FALSE, FALSE, sizeof(FsimExplainBlock));
    guint b = 0, j = 0;

    for (guint s = 0; s < walk->segments->len; s++) {
        const FsimSegmentView *seg = &g_array_index(walk->segments, FsimSegmentView, s);
        FsimAddr end = seg->addr + seg->size;

        while (j < live->len && g_array_index(live, LiveItem, j).addr < seg->addr)
            j++;
        while (b < walk->blocks->len &&
               g_array_index(walk->blocks, FsimExplainBlock, b).segment == s) {
            const FsimExplainBlock *reported = &g_array_index(walk->blocks, FsimExplainBlock, b);

            while (seg->free_blocks_only && j < live->len &&
                   g_array_index(live, LiveItem, j).addr < reported->addr) {
                const LiveItem *item = &g_array_index(live, LiveItem, j++);
                FsimExplainBlock block = {
                    .addr = item->addr, .size = item->size, .segment = s, .site = -1};

                g_array_append_val(blocks, block);
            }
            g_array_append_val(blocks, *reported);
            b++;
        }
        while (seg->free_blocks_only && j < live->len &&
               g_array_index(live, LiveItem, j).addr < end) {
            const LiveItem *item = &g_array_index(live, LiveItem, j++);
            FsimExplainBlock block = {
                .addr = item->addr, .size = item->size, .segment = s, .site = -1};

            g_array_append_val(blocks, block);
        }
    }
    g_array_set_size(walk->blocks, 0);
    g_array_append_vals(walk->blocks, blocks->data, blocks->len);
    g_array_set_size(walk->live_addrs, blocks->len);
    memset(walk->live_addrs->data, 0, blocks->len * sizeof(FsimAddr));
}

/* The live item at @addr, or -1. */
static gint
live_find(const GArray *live, FsimAddr addr)
{
    gsize lo = FSIM_LOWER_BOUND(live->data, live->len, LiveItem, addr, addr);

    return lo < live->len && g_array_index(live, LiveItem, lo).addr == addr ? (gint)lo : -1;
}

/* A block in use that is a piece of the live allocation at @live_addr (a stitched block): its
 * share of what that allocation asked for, the pieces in address order taking it first. */
static gboolean
walk_piece(const FsimPolicy *policy, const GArray *live, uint64_t *left, FsimExplainBlock *block,
           FsimAddr live_addr, gint *owner, GError **error)
{
    gint j = live_find(live, live_addr);

    if (j < 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "policy '%s' describes a piece at 0x%" G_GINT64_MODIFIER
                    "x of a live block at 0x%" G_GINT64_MODIFIER "x that the engine does not know",
                    policy->ops->name, block->addr, live_addr);
        return FALSE;
    }
    block->requested = MIN(left[j], block->size);
    left[j] -= block->requested;
    *owner = j;
    return TRUE;
}

/* Segments and blocks from the policy, or from the live table; @owner[i]: the live item of
 * block i (-1 for free blocks). */
static gboolean
state_walk(const FsimEngine *engine, GArray *live, Walk *walk, GArray *owner, gboolean *described,
           GError **error)
{
    const FsimPolicy *policy = fsim_engine_policy(engine);
    guint j = 0;
    g_autofree uint64_t *left = NULL; /* per live item: requested bytes no piece took yet */

    fsim_engine_foreach_live(engine, collect_live, live);
    *described = policy->ops->describe != NULL;
    if (!*described) {
        for (guint i = 0; i < live->len; i++) {
            const LiveItem *item = &g_array_index(live, LiveItem, i);
            FsimSegmentView segment = {
                .addr = item->addr, .size = item->size, .stream = item->stream};
            FsimBlockView view = {.addr = item->addr, .size = item->size};

            walk_segment(walk, &segment);
            walk_block(walk, &view);
        }
    } else {
        gboolean free_only = FALSE;

        policy->ops->describe(policy, &walk_visitor, walk);
        for (guint i = 0; i < walk->segments->len; i++)
            free_only |= g_array_index(walk->segments, FsimSegmentView, i).free_blocks_only;
        if (free_only)
            walk_add_engine_blocks(walk, live);
    }
    g_array_set_size(owner, walk->blocks->len);
    for (guint i = 0; i < walk->blocks->len; i++) {
        FsimExplainBlock *block = &g_array_index(walk->blocks, FsimExplainBlock, i);

        FsimAddr live_addr = g_array_index(walk->live_addrs, FsimAddr, i);

        g_array_index(owner, gint, i) = -1;
        if (block->free)
            continue;
        if (live_addr != 0) {
            if (left == NULL) {
                left = g_new(uint64_t, MAX(live->len, 1));
                for (guint k = 0; k < live->len; k++)
                    left[k] = g_array_index(live, LiveItem, k).requested;
            }
            if (!walk_piece(policy, live, left, block, live_addr, &g_array_index(owner, gint, i),
                            error))
                return FALSE;
            continue;
        }
        while (j < live->len && g_array_index(live, LiveItem, j).addr < block->addr)
            j++;
        if (j == live->len || g_array_index(live, LiveItem, j).addr != block->addr) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "policy '%s' describes a live block at 0x%" G_GINT64_MODIFIER
                        "x that the engine does not know",
                        policy->ops->name, block->addr);
            return FALSE;
        }
        block->requested = g_array_index(live, LiveItem, j).requested;
        g_array_index(owner, gint, i) = (gint)j;
        j++;
    }
    return TRUE;
}

/* The breakdown from the walk; checks that it adds up to the device's reserved bytes. */
static gboolean
state_breakdown(const FsimEngine *engine, const Walk *walk, gboolean described, FsimBreakdown *out,
                uint64_t *largest_free, GError **error)
{
    const FsimDevice *device = fsim_engine_device(engine);
    uint64_t reserved = (uint64_t)device->reserved.current;
    uint64_t segments = 0;
    uint64_t blocks = 0;

    memset(out, 0, sizeof(*out));
    *largest_free = 0;
    for (guint i = 0; i < walk->segments->len; i++)
        segments += g_array_index(walk->segments, FsimSegmentView, i).size;
    for (guint i = 0; i < walk->blocks->len; i++) {
        const FsimExplainBlock *b = &g_array_index(walk->blocks, FsimExplainBlock, i);

        blocks += b->size;
        if (b->free) {
            out->free_releasable_bytes += b->releasable;
            out->free_pinned_bytes += b->size - b->releasable;
            *largest_free = MAX(*largest_free, b->size);
        } else {
            out->live_requested_bytes += b->requested;
            out->rounding_bytes += b->size - b->requested;
        }
    }
    if (!described) {
        /* Whatever the device holds beyond the live blocks is free, and cannot be told apart. */
        if (reserved < blocks) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "live blocks of %" G_GUINT64_FORMAT " bytes but %" G_GUINT64_FORMAT
                        " reserved",
                        blocks, reserved);
            return FALSE;
        }
        out->free_pinned_bytes += reserved - blocks;
        return TRUE;
    }
    if (segments != reserved || blocks > segments) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                    "policy '%s' describes segments of %" G_GUINT64_FORMAT
                    " bytes holding blocks of %" G_GUINT64_FORMAT
                    " bytes, but the device has %" G_GUINT64_FORMAT " reserved",
                    fsim_engine_policy(engine)->ops->name, segments, blocks, reserved);
        return FALSE;
    }
    out->rounding_bytes += segments - blocks; /* page tails in no block */
    return TRUE;
}

uint64_t
fsim_breakdown_total(const FsimBreakdown *b)
{
    return b->live_requested_bytes + b->rounding_bytes + b->free_releasable_bytes +
           b->free_pinned_bytes;
}

gboolean
explain_breakdown(const FsimEngine *engine, FsimBreakdown *out, uint64_t *largest_free,
                  GError **error)
{
    g_autoptr(GArray) live = g_array_new(FALSE, FALSE, sizeof(LiveItem));
    g_autoptr(GArray) owner = g_array_new(FALSE, FALSE, sizeof(gint));
    g_autoptr(GArray) segments = g_array_new(FALSE, FALSE, sizeof(FsimSegmentView));
    g_autoptr(GArray) blocks = g_array_new(FALSE, FALSE, sizeof(FsimExplainBlock));
    g_autoptr(GArray) live_addrs = g_array_new(FALSE, FALSE, sizeof(FsimAddr));
    Walk walk = {segments, blocks, live_addrs};
    gboolean described;

    return state_walk(engine, live, &walk, owner, &described, error) &&
           state_breakdown(engine, &walk, described, out, largest_free, error);
}

/* ---- pins ------------------------------------------------------------------------------------ */

/* The live neighbour of block @i in direction @step (-1, +1) inside its segment, or -1. */
static gint
live_neighbour(const GArray *blocks, guint i, gint step)
{
    const FsimExplainBlock *b = &g_array_index(blocks, FsimExplainBlock, i);
    gint k = (gint)i + step;
    const FsimExplainBlock *n;

    if (k < 0 || (guint)k >= blocks->len)
        return -1;
    n = &g_array_index(blocks, FsimExplainBlock, k);
    return n->segment == b->segment && !n->free ? k : -1;
}

/* Charge the pinned bytes of every free block to its live neighbours (the rule above). */
static void
pins_attribute(GArray *segments, GArray *blocks)
{
    for (guint i = 0; i < blocks->len; i++) {
        FsimExplainBlock *b = &g_array_index(blocks, FsimExplainBlock, i);
        const FsimSegmentView *seg = &g_array_index(segments, FsimSegmentView, b->segment);
        uint64_t pinned = b->size - b->releasable;
        uint64_t below;
        gint prev, next;

        b->pinned = b->free ? pinned : b->pinned;
        if (!b->free || pinned == 0)
            continue;
        if (seg->page_size != 0 && b->releasable != 0) {
            uint64_t offset = (b->addr - seg->addr) % seg->page_size;

            below = MIN(pinned, offset == 0 ? 0 : seg->page_size - offset);
        } else {
            below = pinned - pinned / 2;
        }
        prev = live_neighbour(blocks, i, -1);
        next = live_neighbour(blocks, i, +1);
        if (prev < 0 && next < 0)
            continue;
        if (prev < 0)
            below = 0;
        else if (next < 0)
            below = pinned;
        if (prev >= 0)
            g_array_index(blocks, FsimExplainBlock, prev).pinned += below;
        if (next >= 0)
            g_array_index(blocks, FsimExplainBlock, next).pinned += pinned - below;
    }
}

static gint
pin_compare(gconstpointer a, gconstpointer b)
{
    const FsimPinSite *x = *(FsimPinSite *const *)a;
    const FsimPinSite *y = *(FsimPinSite *const *)b;

    int most_pinned_first = fsim_compare_u64(y->pinned_bytes, x->pinned_bytes);

    return most_pinned_first != 0 ? most_pinned_first : g_strcmp0(x->site, y->site);
}

static void
pin_site_free(gpointer data)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimPinSite, site, g_free),
                                      FSIM_OWNED(FsimPinSite, sizes, g_array_unref)};

    fsim_owned_free(data, owned, G_N_ELEMENTS(owned));
}

/* Group the live blocks that pin memory by site, largest first. */
static GPtrArray *
pins_group(GArray *blocks, const GArray *owner, const GArray *live, const ExplainSites *sites)
{
    GPtrArray *pins = g_ptr_array_new_with_free_func(pin_site_free);
    g_autoptr(GHashTable) by_name = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) index = g_hash_table_new(g_direct_hash, g_direct_equal);

    for (guint i = 0; i < blocks->len; i++) {
        FsimExplainBlock *b = &g_array_index(blocks, FsimExplainBlock, i);
        const LiveItem *item;
        g_autofree char *name = NULL;
        FsimPinSite *site;

        if (b->free || b->pinned == 0 || g_array_index(owner, gint, i) < 0)
            continue;
        item = &g_array_index(live, LiveItem, g_array_index(owner, gint, i));
        name = explain_sites_name(sites, item->id, b->size, item->stream);
        site = g_hash_table_lookup(by_name, name);
        if (site == NULL) {
            site = g_new0(FsimPinSite, 1);
            site->site = g_steal_pointer(&name);
            site->sizes = g_array_new(FALSE, FALSE, sizeof(uint64_t));
            g_ptr_array_add(pins, site);
            g_hash_table_insert(by_name, site->site, site);
        }
        site->count++;
        site->live_bytes += b->requested;
        site->pinned_bytes += b->pinned;
        g_array_append_val(site->sizes, b->size);
    }
    for (guint i = 0; i < pins->len; i++) {
        FsimPinSite *site = g_ptr_array_index(pins, i);
        guint kept = 0;

        g_array_sort(site->sizes, fsim_u64_compare);
        for (guint k = 0; k < site->sizes->len; k++) {
            uint64_t size = g_array_index(site->sizes, uint64_t, k);

            if (kept == 0 || g_array_index(site->sizes, uint64_t, kept - 1) != size)
                g_array_index(site->sizes, uint64_t, kept++) = size;
        }
        g_array_set_size(site->sizes, kept);
    }
    g_ptr_array_sort(pins, pin_compare);
    for (guint i = 0; i < pins->len; i++)
        g_hash_table_insert(index, g_ptr_array_index(pins, i), GUINT_TO_POINTER(i));
    for (guint i = 0; i < blocks->len; i++) {
        FsimExplainBlock *b = &g_array_index(blocks, FsimExplainBlock, i);
        const LiveItem *item;
        g_autofree char *name = NULL;

        if (b->free || b->pinned == 0 || g_array_index(owner, gint, i) < 0)
            continue;
        item = &g_array_index(live, LiveItem, g_array_index(owner, gint, i));
        name = explain_sites_name(sites, item->id, b->size, item->stream);
        b->site =
            (gint)GPOINTER_TO_UINT(g_hash_table_lookup(index, g_hash_table_lookup(by_name, name)));
    }
    return pins;
}

/* ---- the request at an OOM ------------------------------------------------------------------- */

static void
request_classify(FsimExplainRequest *r, const GArray *segments, const GArray *blocks)
{
    FsimPool pool = r->size <= FSIM_MiB ? FSIM_POOL_SMALL : FSIM_POOL_LARGE;
    uint64_t other_bytes = 0;
    g_autofree char *size = fsim_format_size(r->size);
    g_autofree char *largest = NULL;
    g_autofree char *other = NULL;
    g_autofree char *device_free = fsim_format_size(r->device_free_bytes);
    g_autoptr(GString) text = g_string_new(NULL);

    for (guint i = 0; i < blocks->len; i++) {
        const FsimExplainBlock *b = &g_array_index(blocks, FsimExplainBlock, i);
        const FsimSegmentView *seg = &g_array_index(segments, FsimSegmentView, b->segment);

        if (!b->free)
            continue;
        if (seg->stream != r->stream) {
            r->free_blocks_other_stream++;
            other_bytes += b->size;
        } else if (seg->pool != FSIM_POOL_UNKNOWN && seg->pool != pool) {
            r->free_blocks_other_pool++;
        } else if (b->size < r->size) {
            r->free_blocks_too_small++;
            r->largest_free_same_stream_bytes = MAX(r->largest_free_same_stream_bytes, b->size);
        } else {
            r->free_blocks_refused++;
            r->largest_free_same_stream_bytes = MAX(r->largest_free_same_stream_bytes, b->size);
        }
    }
    largest = fsim_format_size(r->largest_free_same_stream_bytes);
    other = fsim_format_size(other_bytes);
    g_string_append_printf(text, "%s on stream %" G_GUINT64_FORMAT ": ", size, r->stream);
    if (r->free_blocks_refused > 0)
        g_string_append_printf(text,
                               "%" G_GUINT64_FORMAT " free block%s large enough but refused by "
                               "the policy's rules (max_split_size_mb keeps oversize blocks "
                               "for oversize requests)",
                               r->free_blocks_refused,
                               r->free_blocks_refused == 1 ? " was" : "s were");
    else if (r->free_blocks_too_small > 0)
        g_string_append_printf(text,
                               "every free block of its stream and pool is too small (the "
                               "largest is %s)",
                               largest);
    else
        g_string_append(text, "no free block in its stream and pool");
    if (r->free_blocks_other_stream > 0)
        g_string_append_printf(text, "; %s free on other streams cannot be used", other);
    if (r->free_blocks_other_pool > 0)
        g_string_append_printf(text,
                               "; %" G_GUINT64_FORMAT " free block%s in the %s pool cannot be used",
                               r->free_blocks_other_pool, r->free_blocks_other_pool == 1 ? "" : "s",
                               pool == FSIM_POOL_SMALL ? "large" : "small");
    if (r->simulated)
        g_string_append_printf(text, "; and the device had only %s free for a new segment",
                               device_free);
    else
        g_string_append(text, "; the model served it (from the device or a cached block)");
    r->reason = g_string_free(g_steal_pointer(&text), FALSE);
}

/* ---- one moment ------------------------------------------------------------------------------ */

static FsimPoolBreakdown *
pools_entry(GArray *pools, const FsimSegmentView *seg)
{
    FsimPoolBreakdown entry = {.private_pool = seg->private_pool,
                               .pool_id = seg->private_pool ? seg->private_pool_id : 0};
    guint i = 0;

    /* the default pools first, then the private ones by id */
    while (i < pools->len) {
        const FsimPoolBreakdown *p = &g_array_index(pools, FsimPoolBreakdown, i);

        if (p->private_pool == entry.private_pool && p->pool_id == entry.pool_id)
            return &g_array_index(pools, FsimPoolBreakdown, i);
        if (p->private_pool > entry.private_pool ||
            (p->private_pool == entry.private_pool && p->pool_id > entry.pool_id))
            break;
        i++;
    }
    g_array_insert_val(pools, i, entry);
    return &g_array_index(pools, FsimPoolBreakdown, i);
}

/* The moment's breakdown per pool, when some segment is a private pool's; each pool's parts add
 * up to its segments' bytes, as the moment's do to the reserved bytes. */
static GArray *
pools_breakdown(const GArray *segments, const GArray *blocks)
{
    GArray *pools = g_array_new(FALSE, TRUE, sizeof(FsimPoolBreakdown));
    gboolean any = FALSE;

    for (guint s = 0; s < segments->len; s++)
        any |= g_array_index(segments, FsimSegmentView, s).private_pool;
    if (!any)
        return pools;
    for (guint s = 0; s < segments->len; s++) {
        const FsimSegmentView *seg = &g_array_index(segments, FsimSegmentView, s);
        FsimPoolBreakdown *p = pools_entry(pools, seg);

        p->reserved_bytes += seg->size;
        p->breakdown.rounding_bytes += seg->size; /* less its blocks, below */
    }
    for (guint i = 0; i < blocks->len; i++) {
        const FsimExplainBlock *b = &g_array_index(blocks, FsimExplainBlock, i);
        FsimPoolBreakdown *p =
            pools_entry(pools, &g_array_index(segments, FsimSegmentView, b->segment));

        p->breakdown.rounding_bytes -= b->size;
        if (b->free) {
            p->breakdown.free_releasable_bytes += b->releasable;
            p->breakdown.free_pinned_bytes += b->size - b->releasable;
        } else {
            p->breakdown.live_requested_bytes += b->requested;
            p->breakdown.rounding_bytes += b->size - b->requested;
        }
    }
    return pools;
}

void
explain_moment_free(FsimMoment *moment)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimMoment, segments, g_array_unref),
                                      FSIM_OWNED(FsimMoment, blocks, g_array_unref),
                                      FSIM_OWNED(FsimMoment, pins, g_ptr_array_unref),
                                      FSIM_OWNED(FsimMoment, alternatives, g_ptr_array_unref),
                                      FSIM_OWNED(FsimMoment, pools, g_array_unref),
                                      FSIM_OWNED(FsimMoment, request.reason, g_free)};

    fsim_owned_free(moment, owned, G_N_ELEMENTS(owned));
}

FsimMoment *
explain_capture(const FsimEngine *engine, const ExplainSites *sites, const ExplainRequest *request,
                GError **error)
{
    g_autoptr(GArray) live = g_array_new(FALSE, FALSE, sizeof(LiveItem));
    g_autoptr(GArray) owner = g_array_new(FALSE, FALSE, sizeof(gint));
    g_autoptr(GArray) live_addrs = g_array_new(FALSE, FALSE, sizeof(FsimAddr));
    FsimMoment *moment = g_new0(FsimMoment, 1);
    Walk walk;
    gboolean described;
    const FsimEngineCounters *c = fsim_engine_counters(engine);

    moment->segments = g_array_new(FALSE, FALSE, sizeof(FsimSegmentView));
    moment->blocks = g_array_new(FALSE, FALSE, sizeof(FsimExplainBlock));
    walk.segments = moment->segments;
    walk.blocks = moment->blocks;
    walk.live_addrs = live_addrs;
    moment->reserved_bytes = (uint64_t)fsim_engine_device(engine)->reserved.current;
    moment->time_ns = c->now;
    if (!state_walk(engine, live, &walk, owner, &described, error) ||
        !state_breakdown(engine, &walk, described, &moment->breakdown, &moment->largest_free_bytes,
                         error)) {
        explain_moment_free(moment);
        return NULL;
    }
    if (!described) {
        FsimPolicyStats stats;

        fsim_engine_policy_stats(engine, &stats);
        moment->largest_free_bytes = stats.largest_free_block;
    }
    pins_attribute(moment->segments, moment->blocks);
    moment->pools = pools_breakdown(moment->segments, moment->blocks);
    moment->pins = sites != NULL ? pins_group(moment->blocks, owner, live, sites)
                                 : g_ptr_array_new_with_free_func(pin_site_free);
    if (request != NULL) {
        moment->has_request = TRUE;
        moment->request.size = request->size;
        moment->request.stream = request->stream;
        moment->request.simulated = request->simulated;
        moment->request.recorded = request->recorded;
        moment->request.device_free_bytes = fsim_device_free_bytes(fsim_engine_device(engine));
        request_classify(&moment->request, moment->segments, moment->blocks);
    }
    return moment;
}

void
explain_alternative_free(FsimAlternative *alternative)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimAlternative, policy, g_free),
                                      FSIM_OWNED(FsimAlternative, config, g_free),
                                      FSIM_OWNED(FsimAlternative, advice, g_free)};

    fsim_owned_free(alternative, owned, G_N_ELEMENTS(owned));
}
