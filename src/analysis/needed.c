/* SPDX-License-Identifier: MIT */
/*
 * needed_bytes: the least capacity on which a run fits, and on every larger one.  See needed.h
 * for the definition and the search.
 *
 * The proof a fitting replay gives: the device answers a mem_alloc or map "no" exactly when the
 * reservation would pass the capacity.  On capacity X the run's successful calls took the
 * reservation to at most its peak P, and its refused calls would have taken it to R or more
 * (R = the device's least_refused_demand).  On any capacity in [P, R - 1] every call gets the same
 * answer, so (policies deciding by nothing else that depends on the capacity) the run makes the
 * same decisions, has the same metrics, and fits.  A run with no refusal proves [P, infinity).
 */
#include "analysis/needed.h"

#include <glib.h>

#include <string.h>

#include "fragsim/owned.h"

#include "analysis/feed.h"
#include "core/event-core.h"

/* One decoded event: what engines read of an FsimEvent, without the mark label. */
typedef struct {
    FsimEventCore core;
    uint32_t flags;
    uint32_t kind;
} LogEvent;

struct FsimEventLog {
    uint32_t device;
    GArray *events; /* LogEvent */
};

FsimEventLog *
fsim_event_log_new(uint32_t device)
{
    FsimEventLog *log = g_new0(FsimEventLog, 1);

    log->device = device;
    log->events = g_array_new(FALSE, FALSE, sizeof(LogEvent));
    return log;
}

void
fsim_event_log_free(FsimEventLog *log)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimEventLog, events, g_array_unref)};

    fsim_owned_free(log, owned, G_N_ELEMENTS(owned));
}

void
fsim_event_log_append(FsimEventLog *log, const FsimEvent *ev)
{
    LogEvent e = {.core = fsim_event_core_of(ev), .flags = ev->flags, .kind = ev->kind};

    if (ev->kind != FSIM_EV_MARK)
        g_array_append_val(log->events, e);
}

gsize
fsim_event_log_length(const FsimEventLog *log)
{
    return log->events->len;
}

void
fsim_event_log_get(const FsimEventLog *log, gsize i, FsimEvent *ev)
{
    const LogEvent *e = &g_array_index(log->events, LogEvent, i);

    memset(ev, 0, sizeof(*ev));
    fsim_event_core_get(&e->core, ev);
    ev->device = log->device;
    ev->flags = e->flags;
    ev->kind = (FsimEventKind)e->kind;
}

void
fsim_event_log_foreach_alloc(const FsimEventLog *log, void (*func)(uint64_t size, gpointer data),
                             gpointer data)
{
    const LogEvent *events = (const LogEvent *)(const void *)log->events->data;

    for (guint i = 0; i < log->events->len; i++) {
        if (events[i].kind == FSIM_EV_ALLOC)
            func(events[i].core.size, data);
    }
}

gboolean
fsim_event_log_replay(const FsimEventLog *log, FsimEngine *engine, GError **error)
{
    FsimEvent batch[256];

    for (guint i = 0; i < log->events->len;) {
        gsize n = 0;

        for (; n < G_N_ELEMENTS(batch) && i < log->events->len; n++, i++)
            fsim_event_log_get(log, i, &batch[n]);
        if (!fsim_engine_process_batch(engine, batch, n, error)) {
            (void)fsim_engine_finish(engine, NULL);
            return FALSE;
        }
    }
    return fsim_engine_finish(engine, error);
}

/* Whether the recorded release burst that starts at entry @index (an empty_cache the reader
 * inferred) is followed at once by a segment allocation: the signature of PyTorch's retry after a
 * failed cudaMalloc, which a policy on another device does on its own if it needs to.  A burst
 * followed by anything else can only be an explicit torch.cuda.empty_cache(). */
gboolean
fsim_release_is_retry(const FsimOutcome *outcomes, gsize n, uint64_t index)
{
    gsize lo = FSIM_LOWER_BOUND(outcomes, n, FsimOutcome, index, index);

    while (lo < n && outcomes[lo].index == index &&
           (outcomes[lo].kind == FSIM_OUTCOME_SEGMENT_FREE ||
            outcomes[lo].kind == FSIM_OUTCOME_SEGMENT_UNMAP)) {
        lo++;
        index++;
    }
    return lo < n && outcomes[lo].index == index &&
           (outcomes[lo].kind == FSIM_OUTCOME_SEGMENT_ALLOC ||
            outcomes[lo].kind == FSIM_OUTCOME_SEGMENT_MAP);
}

gboolean
fsim_event_log_read(FsimEventLog *log, FsimTrace *trace, gboolean inferred_releases, GError **error)
{
    g_auto(FsimReplayFeed) feed = {0};
    GError *local_error = NULL;
    FsimEvent ev;

    if (!fsim_replay_feed_open(&feed, trace, log->device, inferred_releases, error))
        return FALSE;
    feed.log = log;
    while (fsim_replay_feed_next(&feed, &ev, &local_error))
        ;
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    return TRUE;
}

FsimDeviceSpec
fsim_needed_device(const FsimDeviceSpec *spec, uint64_t capacity)
{
    FsimDeviceSpec s = *spec;
    g_autofree char *size = fsim_format_size(capacity);

    s.capacity_bytes = capacity;
    s.total_bytes = capacity;
    g_snprintf(s.name, sizeof(s.name), "%" G_GUINT64_FORMAT, capacity);
    g_snprintf(s.description, sizeof(s.description), "%s (%s)", spec->description, size);
    return s;
}

/* ---- the search ---------------------------------------------------------------------------- */

/* A capacity interval [lo, hi] (multiples of the granularity, hi = G_MAXUINT64 for no end) on
 * which the run provably fits, and the metrics of its replays there. */
typedef struct {
    uint64_t lo;
    uint64_t hi;
    FsimMetrics metrics;
} Proven;

typedef struct {
    const FsimEventLog *log;
    const FsimNeededQuery *query;
    uint64_t g;
    gboolean blind; /* decisions depend on the capacity only through refusals */
    GArray *proven; /* Proven */
    uint64_t replays;
} Search;

static uint64_t
round_down(uint64_t value, uint64_t g)
{
    return value / g * g;
}

static uint64_t
round_up(uint64_t value, uint64_t g)
{
    return (value + g - 1) / g * g;
}

/* Whether the policy's decisions depend on the capacity through refusals only.  Not so for
 * PyTorch's memory fraction (and the garbage collection threshold, active only with it), which are
 * fractions of the card's memory, nor for expandable segments, whose address space is 1 1/8 of
 * the card's memory: a segment can run out of it, and then a new one is made; nor for TF's BFC,
 * whose regions are cut to the memory limit (without allow_growth, one region of all of it). */
static gboolean
needed_blind(const FsimNeededQuery *query)
{
    g_autofree char *expandable = NULL;

    if (strcmp(query->policy, "expandable") == 0 || strcmp(query->policy, "bfc") == 0)
        return FALSE;
    if (query->config == NULL)
        return TRUE;
    expandable = g_key_file_get_value(query->config, query->policy, "expandable_segments", NULL);
    return !g_key_file_has_key(query->config, query->policy, "per_process_memory_fraction", NULL) &&
           (expandable == NULL || g_ascii_strcasecmp(expandable, "true") != 0);
}

/* The run of @q on a device of @capacity, stopping at its first OOM.  The search replays many
 * times: its checks run only when asked. */
static void
needed_run_config(const FsimNeededQuery *q, uint64_t capacity, FsimRunConfig *rc)
{
    fsim_run_config_init(rc);
    rc->policy = q->policy;
    rc->config = q->config;
    rc->device = fsim_needed_device(&q->device, capacity);
    rc->initial_state = q->initial_state;
    rc->lifetimes = q->lifetimes;
    rc->fail_on_oom = TRUE;
    rc->paranoid = q->paranoid;
    rc->free_delay_ns = q->free_delay_ns;
}

/* Replay on @capacity (stopping at the first OOM).  TRUE with *fits set; a fitting run adds its
 * proven interval. */
static gboolean
search_try(Search *s, uint64_t capacity, gboolean *fits, GError **error)
{
    const FsimNeededQuery *q = s->query;
    FsimRunConfig rc;
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(GError) local_error = NULL;
    Proven p;

    needed_run_config(q, capacity, &rc);
    engine = fsim_engine_new(&rc, error);
    if (engine == NULL)
        return FALSE;
    s->replays++;
    if (!fsim_engine_start(engine, &local_error)) {
        /* the memory alive at trace start does not fit (seeding has no OOM of its own) */
        if (capacity >= q->device.capacity_bytes) {
            g_propagate_error(error, g_steal_pointer(&local_error));
            return FALSE;
        }
        *fits = FALSE;
        return TRUE;
    }
    *fits = fsim_event_log_replay(s->log, engine, &local_error);
    if (!*fits) {
        if (!g_error_matches(local_error, FSIM_ERROR, FSIM_ERROR_OOM)) {
            g_propagate_error(error, g_steal_pointer(&local_error));
            return FALSE;
        }
        return TRUE;
    }
    p.metrics = *fsim_engine_metrics(engine);
    p.lo = round_up(p.metrics.peak_reserved_bytes, s->g);
    p.hi = G_MAXUINT64;
    if (fsim_engine_device(engine)->least_refused_demand != 0)
        p.hi = round_down(fsim_engine_device(engine)->least_refused_demand - 1, s->g);
    if (!s->blind || p.lo > capacity || p.hi < capacity)
        p.lo = p.hi = capacity;
    g_array_append_val(s->proven, p);
    return TRUE;
}

/* The lowest capacity at or above @from that no proven interval covers, or G_MAXUINT64. */
static uint64_t
search_uncovered(const Search *s, uint64_t from)
{
    gboolean moved = TRUE;

    while (moved && from != G_MAXUINT64) {
        moved = FALSE;
        for (guint i = 0; i < s->proven->len; i++) {
            const Proven *p = &g_array_index(s->proven, Proven, i);

            if (p->lo <= from && from <= p->hi) {
                from = p->hi == G_MAXUINT64 ? G_MAXUINT64 : p->hi + s->g;
                moved = TRUE;
            }
        }
    }
    return from;
}

/* The lowest capacity from which every capacity up to @from is proven (@from itself is). */
static uint64_t
search_covered_from(const Search *s, uint64_t from)
{
    gboolean moved = TRUE;

    while (moved) {
        moved = FALSE;
        for (guint i = 0; i < s->proven->len; i++) {
            const Proven *p = &g_array_index(s->proven, Proven, i);

            if (p->lo < from && from <= p->hi) {
                from = p->lo;
                moved = TRUE;
            }
        }
    }
    return from;
}

/* The interval the last fitting replay proved. */
static const Proven *
search_last(const Search *s)
{
    return &g_array_index(s->proven, Proven, s->proven->len - 1);
}

/* Step 1: a capacity that fits, from the chosen device up by doubling.  Sets *lower to the
 * trace's lower bound (rounded up): no capacity below it can fit. */
static gboolean
search_top(Search *s, uint64_t *lower, GError **error)
{
    const FsimNeededQuery *q = s->query;
    uint64_t capacity = MAX(round_down(q->device.capacity_bytes, s->g), s->g);
    uint64_t seeded = 0;
    gboolean fits = FALSE;

    if (q->known != NULL && q->known->ooms == 0 && s->blind && q->known_refused == 0 &&
        round_up(q->known->peak_reserved_bytes, s->g) <= capacity) {
        /* the caller's run on the chosen device proves [its peak, infinity) */
        Proven p = {.lo = round_up(q->known->peak_reserved_bytes, s->g),
                    .hi = G_MAXUINT64,
                    .metrics = *q->known};

        g_array_append_val(s->proven, p);
        fits = TRUE;
    }
    /* With proofs, the top must fit without a refusal, which proves everything above it. */
    while (!fits || (s->blind && search_last(s)->hi != G_MAXUINT64)) {
        if (fits && capacity >= FSIM_NEEDED_LIMIT)
            break;
        if (capacity >= FSIM_NEEDED_LIMIT) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "%s runs out of memory even on %" G_GUINT64_FORMAT " bytes", q->policy,
                        FSIM_NEEDED_LIMIT);
            return FALSE;
        }
        if (s->replays > 0 ||
            (s->blind && q->known != NULL && (q->known->ooms > 0 || q->known_refused != 0)))
            capacity = MIN(capacity * 2, FSIM_NEEDED_LIMIT);
        if (!search_try(s, capacity, &fits, error))
            return FALSE;
    }
    for (gsize i = 0; q->initial_state != NULL && i < q->initial_state->n_segments; i++)
        seeded += round_up(q->initial_state->segments[i].size, s->g);
    /* Every live requested byte sits in reserved memory, which comes in whole granules. */
    *lower = MAX(round_up(search_last(s)->metrics.peak_requested_bytes, s->g), seeded);
    return TRUE;
}

gboolean
fsim_needed_search(const FsimEventLog *log, const FsimNeededQuery *query, FsimNeededResult *out,
                   GError **error)
{
    g_autoptr(GArray) proven = g_array_new(FALSE, FALSE, sizeof(Proven));
    Search s = {
        .log = log,
        .query = query,
        .g = query->device.granularity > 0 ? query->device.granularity : 2 * FSIM_MiB,
        .blind = needed_blind(query),
        .proven = proven,
    };
    uint64_t lower, fail, candidate, first;
    gboolean fits;

    memset(out, 0, sizeof(*out));
    if (!search_top(&s, &lower, error))
        return FALSE;
    fail = fsim_sub_sat(lower, s.g);
    candidate = search_covered_from(&s, search_last(&s)->lo);
    /* Step 2: bisect (fail, candidate], trying just below the candidate first (where the device's
     * first refusal is an OOM, as for most policies, that settles it) and jumping down to each
     * fitting replay's proven interval. */
    first = s.blind ? candidate - s.g : round_up(search_last(&s)->metrics.peak_reserved_bytes, s.g);
    while (candidate > fail + s.g) {
        uint64_t mid = fail + (candidate - fail) / s.g / 2 * s.g;

        if (first > fail && first < candidate)
            mid = first;
        first = 0;
        if (!search_try(&s, mid, &fits, error))
            return FALSE;
        if (fits)
            candidate = search_covered_from(&s, mid);
        else
            fail = mid;
    }
    /* Step 3: prove the capacities from the candidate up, lowest first, within the budget; one
     * that fails raises the candidate past it. */
    while (s.blind && s.replays < FSIM_NEEDED_MAX_REPLAYS) {
        uint64_t gap = search_uncovered(&s, candidate);

        if (gap == G_MAXUINT64)
            break;
        if (!search_try(&s, gap, &fits, error))
            return FALSE;
        if (!fits)
            candidate = gap + s.g;
    }
    out->proven = search_uncovered(&s, candidate) == G_MAXUINT64;
    out->needed_bytes = candidate;
    out->replays = s.replays;
    for (guint i = 0; i < proven->len; i++) {
        const Proven *p = &g_array_index(proven, Proven, i);

        if (p->lo <= candidate && candidate <= p->hi) {
            out->metrics = p->metrics;
            break;
        }
    }
    return TRUE;
}

/* ---- per pool ------------------------------------------------------------------------------ */

typedef struct {
    uint64_t peak;   /* the largest reservation seen after an event */
    GArray *at_peak; /* FsimPoolStats then */
} PoolWatch;

static void
pool_watch_take(PoolWatch *w, const FsimEngine *engine)
{
    uint64_t reserved = (uint64_t)fsim_engine_device(engine)->reserved.current;

    if (reserved <= w->peak && w->at_peak != NULL)
        return;
    w->peak = reserved;
    if (w->at_peak != NULL)
        g_array_unref(w->at_peak);
    w->at_peak = fsim_policy_pool_stats(fsim_engine_policy(engine));
    if (w->at_peak == NULL)
        w->at_peak = g_array_new(FALSE, FALSE, sizeof(FsimPoolStats));
}

static void
pool_watch_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    (void)ev;
    pool_watch_take(data, engine);
}

/* The share of pool @pool in @at_peak (0 when it had no memory yet). */
static uint64_t
pool_share(const GArray *at_peak, uint64_t pool)
{
    for (guint i = 0; i < at_peak->len; i++)
        if (g_array_index(at_peak, FsimPoolStats, i).pool == pool)
            return g_array_index(at_peak, FsimPoolStats, i).reserved_bytes;
    return 0;
}

/* Each pool of @final (the run's pools at its end) with its share of the peak, @at_peak. */
static GArray *
pool_needs(const GArray *final, const GArray *at_peak)
{
    GArray *out = g_array_sized_new(FALSE, FALSE, sizeof(FsimPoolNeed), final->len);

    for (guint i = 0; i < final->len; i++) {
        const FsimPoolStats *s = &g_array_index(final, FsimPoolStats, i);
        FsimPoolNeed need = {
            .pool = s->pool,
            .needed_bytes = pool_share(at_peak, s->pool),
            .peak_reserved_bytes = s->peak_reserved_bytes,
        };

        g_array_append_val(out, need);
    }
    return out;
}

GArray *
fsim_needed_pools(const FsimEventLog *log, const FsimNeededQuery *query, uint64_t needed_bytes,
                  uint64_t *peak, GError **error)
{
    static const FsimObserver observer = {.event = pool_watch_event};
    PoolWatch watch = {0};
    FsimRunConfig rc;
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(GArray) final = NULL;
    GArray *out = NULL;
    gboolean ok;

    *peak = 0;
    needed_run_config(query, needed_bytes, &rc);
    engine = fsim_engine_new(&rc, error);
    if (engine == NULL)
        return NULL;
    fsim_engine_add_observer(engine, &observer, &watch);
    ok = fsim_engine_start(engine, error);
    if (ok) {
        pool_watch_take(&watch, engine); /* the state at trace start */
        ok = fsim_event_log_replay(log, engine, error);
    }
    if (ok)
        final = fsim_policy_pool_stats(fsim_engine_policy(engine));
    if (final != NULL) {
        out = pool_needs(final, watch.at_peak);
        *peak = watch.peak;
    }
    g_clear_pointer(&watch.at_peak, g_array_unref);
    return out;
}

GArray *
fsim_needed_stored_pools(const FsimPolicy *policy, const GArray *needs)
{
    g_autoptr(GArray) stats = fsim_policy_pool_stats(policy);
    GArray *out;

    if (stats == NULL)
        return NULL;
    out = g_array_sized_new(FALSE, FALSE, sizeof(FsimStoredPool), stats->len);
    for (guint i = 0; i < stats->len; i++) {
        const FsimPoolStats *s = &g_array_index(stats, FsimPoolStats, i);
        FsimStoredPool p = {
            .pool = s->pool,
            .needed_bytes = -1,
            .peak_reserved_bytes = s->peak_reserved_bytes,
            .reserved_bytes = s->reserved_bytes,
            .use_count = s->use_count,
        };

        for (guint k = 0; needs != NULL && k < needs->len; k++)
            if (g_array_index(needs, FsimPoolNeed, k).pool == s->pool)
                p.needed_bytes = (int64_t)g_array_index(needs, FsimPoolNeed, k).needed_bytes;
        g_array_append_val(out, p);
    }
    return out;
}
