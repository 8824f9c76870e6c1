/* SPDX-License-Identifier: MIT */
/*
 * "What would change it": the moments of an explanation replayed under the other policies and
 * the obvious settings of PyTorch's allocator.
 *
 * The alternatives are every other registered policy (with the same settings where they apply)
 * and, for PyTorch's allocator, expandable_segments:True, max_split_size_mb just above the first
 * OOM's request (at an OOM) and garbage_collection_threshold (0.75, with a memory fraction of 1 so
 * that it is active).  Each is one replay of the same events on the same device; the state is
 * read after the same n-th event as the explained moment (the input stream is the same, so the
 * n-th event is the same event), with whether the alternative ran out of memory there.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/alloc-conf.h"
#include "fragsim/device.h"
#include "fragsim/engine.h"

#include "explain-private.h"
#include "needed.h"

typedef struct {
    FsimEngine *engine;
    const GArray *ordinals; /* uint64_t, ascending, one per moment */
    GPtrArray *results;     /* FsimAlternative* per moment */
    guint next;
    uint64_t ordinal;
    GError *error;
} AltScan;

static void
alt_on_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    AltScan *scan = data;

    (void)ev;
    scan->ordinal++;
    while (scan->next < scan->ordinals->len &&
           g_array_index(scan->ordinals, uint64_t, scan->next) == scan->ordinal) {
        FsimAlternative *a = g_ptr_array_index(scan->results, scan->next);
        uint64_t largest;

        a->has_moment = TRUE;
        a->reserved_bytes = (uint64_t)fsim_engine_device(engine)->reserved.current;
        if (scan->error == NULL)
            explain_breakdown(engine, &a->breakdown, &largest, &scan->error);
        scan->next++;
    }
}

static void
alt_on_oom(gpointer data, const FsimEngine *engine, const FsimOomRecord *oom)
{
    AltScan *scan = data;

    (void)engine;
    (void)oom;
    for (guint i = scan->next; i < scan->ordinals->len; i++) {
        if (g_array_index(scan->ordinals, uint64_t, i) != scan->ordinal + 1)
            break;
        ((FsimAlternative *)g_ptr_array_index(scan->results, i))->oom = TRUE;
    }
}

static const FsimObserver alt_observer = {.event = alt_on_event, .oom = alt_on_oom};

/* The capacity @run needs (needed.h), or -1 when the search fails; with @e (the explained run's
 * explanation) and private pools at some moment, each pool's share of it too. */
static int64_t
alt_needed(FsimTrace *trace, const FsimEventLog *log, const ExplainRun *run, FsimExplanation *e)
{
    FsimNeededQuery query = {
        .policy = run->policy,
        .config = run->config,
        .device = run->device,
        .initial_state = fsim_trace_initial_state(trace, run->trace_device),
    };
    FsimNeededResult result;
    g_autoptr(GError) error = NULL;
    gboolean pools = FALSE;

    if (!fsim_needed_search(log, &query, &result, &error)) {
        g_debug("explain: no needed_bytes for %s %s: %s", run->policy, run->conf, error->message);
        return -1;
    }
    for (guint i = 0; e != NULL && i < e->moments->len; i++) {
        const FsimMoment *m = g_ptr_array_index(e->moments, i);

        pools |= m->pools != NULL && m->pools->len > 0;
    }
    if (pools) {
        e->pool_needs =
            fsim_needed_pools(log, &query, result.needed_bytes, &e->pool_needs_peak, &error);
        if (error != NULL)
            g_debug("explain: no needs by pool: %s", error->message);
    }
    return (int64_t)result.needed_bytes;
}

/* One alternative's replay; @results gets one FsimAlternative per moment. */
static gboolean
alt_replay(FsimTrace *trace, const FsimEventLog *log, const ExplainRun *base, const char *policy,
           const char *conf, const GArray *ordinals, GPtrArray *results, GError **error)
{
    int64_t needed;

    g_autoptr(ExplainRun) run = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    AltScan scan = {.ordinals = ordinals, .results = results};

    for (guint i = 0; i < ordinals->len; i++) {
        FsimAlternative *a = g_new0(FsimAlternative, 1);

        a->policy = g_strdup(policy);
        a->needed_bytes = -1;
        g_ptr_array_add(results, a);
    }
    run = explain_run_new(trace, base, policy, conf, error);
    if (run == NULL)
        return FALSE;
    needed = alt_needed(trace, log, run, NULL);
    for (guint i = 0; i < results->len; i++) {
        FsimAlternative *a = g_ptr_array_index(results, i);

        a->config = g_strdup(run->conf);
        a->needed_bytes = needed;
    }
    engine = explain_run_engine(trace, run, FALSE, error);
    if (engine == NULL)
        return FALSE;
    scan.engine = engine;
    fsim_engine_add_observer(engine, &alt_observer, &scan);
    if (!explain_run_feed(trace, run, engine, error))
        return FALSE;
    if (scan.error != NULL) {
        g_propagate_prefixed_error(error, scan.error, "policy '%s': ", policy);
        return FALSE;
    }
    return TRUE;
}

/* What pins most at @m, as a clause: ` the 1.3 GiB pinned by 48 blocks of 20 MiB from X` ("" when
 * nothing is pinned by a named site). */
static char *
top_pin(const FsimMoment *m)
{
    const FsimPinSite *top;
    g_autofree char *pinned = NULL;
    g_autofree char *size = NULL;

    if (m->pins->len == 0)
        return g_strdup("");
    top = g_ptr_array_index(m->pins, 0);
    pinned = fsim_format_size(top->pinned_bytes);
    size = fsim_format_size(g_array_index(top->sizes, uint64_t, 0));
    return g_strdup_printf("the %s pinned by %" G_GUINT64_FORMAT " block%s of %s%s from %s", pinned,
                           top->count, top->count == 1 ? "" : "s", size,
                           top->sizes->len > 1 ? " and more" : "", top->site);
}

/* The one sentence: what the alternative needs and does at this moment, against the explained
 * run. */
static char *
alt_advice(const FsimAlternative *a, const FsimExplanation *e, const FsimMoment *m)
{
    g_autofree char *label = *a->config != '\0'
                                 ? g_strdup_printf("%s with %s", a->policy, a->config)
                                 : g_strdup(a->policy);
    g_autofree char *here = fsim_format_size(a->reserved_bytes);
    g_autofree char *base = fsim_format_size(m->reserved_bytes);
    g_autofree char *pin = top_pin(m);
    gboolean base_oom = m->kind == FSIM_MOMENT_OOM && m->request.simulated;
    gboolean unpins = a->has_moment &&
                      a->breakdown.free_pinned_bytes < m->breakdown.free_pinned_bytes &&
                      *pin != '\0';

    if (a->needed_bytes >= 0 && e->needed_bytes >= 0) {
        g_autofree char *needed = fsim_format_size((uint64_t)a->needed_bytes);
        g_autofree char *now = fsim_format_size((uint64_t)e->needed_bytes);

        g_autofree char *diff = fsim_format_size(
            a->needed_bytes < e->needed_bytes ? (uint64_t)(e->needed_bytes - a->needed_bytes)
                                              : (uint64_t)(a->needed_bytes - e->needed_bytes));

        if (a->needed_bytes == e->needed_bytes)
            return g_strdup_printf("%s would need the same %s.", label, needed);
        if (a->needed_bytes < e->needed_bytes)
            return g_strdup_printf("%s would need %s instead of %s (%s less)%s%s%s.", label, needed,
                                   now, diff, unpins ? ": " : "", unpins ? pin : "",
                                   unpins ? " would no longer be pinned" : "");
        return g_strdup_printf("%s would need %s, %s more than the %s needed now.", label, needed,
                               diff, now);
    }
    if (!a->has_moment)
        return g_strdup_printf("%s stops before this event.", label);
    if (base_oom && !a->oom)
        return g_strdup_printf("%s would not run out of memory here: it holds %s where %s is "
                               "reserved%s%s.",
                               label, here, base, unpins ? ", and " : "", unpins ? pin : "");
    if (a->oom)
        return g_strdup_printf("%s runs out of memory here too (%s reserved).", label, here);
    if (a->reserved_bytes < m->reserved_bytes)
        return g_strdup_printf("%s would hold %s here instead of %s%s%s%s.", label, here, base,
                               unpins ? ": " : "", unpins ? pin : "",
                               unpins ? " would no longer be pinned" : "");
    return g_strdup_printf("%s would hold %s here, no less than the %s reserved now.", label, here,
                           base);
}

/* @conf (a canonical PYTORCH_CUDA_ALLOC_CONF) with expandable segments on or off. */
static char *
conf_with_expandable(const char *conf, gboolean expandable)
{
    FsimAllocConf parsed;

    fsim_alloc_conf_init(&parsed);
    if (!fsim_alloc_conf_parse(&parsed, conf, NULL))
        return g_strdup(conf);
    parsed.expandable_segments = expandable;
    return fsim_alloc_conf_to_string(&parsed);
}

static void
add_pair(GPtrArray *pairs, const char *policy, char *conf)
{
    g_ptr_array_add(pairs, g_strdup(policy));
    g_ptr_array_add(pairs, conf);
}

/* The alternatives as (policy, conf) pairs: the other policies (PyTorch's with the same settings,
 * `caching` with cudaMalloc'd segments, `expandable` with expandable ones; the others take none),
 * then PyTorch's settings worth trying. */
static void
alt_candidates(const FsimExplanation *e, GPtrArray *pairs)
{
    gsize n = 0;
    const FsimPolicyOps *const *policies = fsim_policy_list(&n);
    gboolean pytorch = strcmp(e->policy, "caching") == 0 || strcmp(e->policy, "expandable") == 0;
    const char *base = pytorch ? e->config : "";
    const char *settings_policy = pytorch ? e->policy : "caching";
    uint64_t request = 0;

    for (guint i = 0; i < e->moments->len; i++) {
        const FsimMoment *m = g_ptr_array_index(e->moments, i);

        if (request == 0 && m->has_request)
            request = m->request.size;
    }
    for (gsize i = 0; i < n; i++) {
        const char *name = policies[i]->name;

        if (strcmp(name, e->policy) == 0)
            continue;
        if (strcmp(name, "caching") == 0)
            add_pair(pairs, name, conf_with_expandable(base, FALSE));
        else if (strcmp(name, "expandable") == 0)
            add_pair(pairs, name, conf_with_expandable(base, FALSE));
        else
            add_pair(pairs, name, g_strdup(""));
    }
    /* max_split_size_mb just above the request an OOM failed (PyTorch wants more than 20) */
    if (request > 20 * FSIM_MiB && strstr(base, "max_split_size_mb") == NULL)
        add_pair(pairs, settings_policy,
                 g_strdup_printf("%s%smax_split_size_mb:%" G_GUINT64_FORMAT, base,
                                 *base != '\0' ? "," : "", request / FSIM_MiB + 1));
    /* garbage collection is active only with a memory fraction */
    if (strstr(base, "garbage_collection_threshold") == NULL)
        add_pair(pairs, settings_policy,
                 g_strdup_printf("%s%sgarbage_collection_threshold:0.75,"
                                 "per_process_memory_fraction:1.0",
                                 base, *base != '\0' ? "," : ""));
}

gboolean
explain_alternatives(FsimTrace *trace, const ExplainRun *base, FsimExplanation *e,
                     const GArray *ordinals, GError **error)
{
    g_autoptr(GPtrArray) pairs = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(FsimEventLog) log = fsim_event_log_new(base->trace_device);

    if (!fsim_event_log_read(log, trace, FALSE, error))
        return FALSE;
    e->needed_bytes = alt_needed(trace, log, base, e);
    alt_candidates(e, pairs);
    for (guint i = 0; i < e->moments->len; i++) {
        FsimMoment *m = g_ptr_array_index(e->moments, i);

        m->alternatives = g_ptr_array_new_with_free_func((GDestroyNotify)explain_alternative_free);
    }
    for (guint p = 0; p + 1 < pairs->len; p += 2) {
        g_autoptr(GPtrArray) results = g_ptr_array_new();
        g_autoptr(GError) local_error = NULL;

        if (!alt_replay(trace, log, base, pairs->pdata[p], pairs->pdata[p + 1], ordinals, results,
                        &local_error)) {
            /* A policy that cannot take this trace (its initial state, a knob) is left out. */
            g_debug("explain: alternative %s %s left out: %s", (const char *)pairs->pdata[p],
                    (const char *)pairs->pdata[p + 1], local_error->message);
            for (guint i = 0; i < results->len; i++)
                explain_alternative_free(g_ptr_array_index(results, i));
            if (g_error_matches(local_error, FSIM_ERROR, FSIM_ERROR_FAILED) &&
                strstr(local_error->message, "describes") != NULL) {
                g_propagate_error(error, g_steal_pointer(&local_error));
                return FALSE;
            }
            continue;
        }
        for (guint i = 0; i < e->moments->len; i++) {
            FsimMoment *m = g_ptr_array_index(e->moments, i);
            FsimAlternative *a = g_ptr_array_index(results, i);

            a->advice = alt_advice(a, e, m);
            g_ptr_array_add(m->alternatives, a);
        }
    }
    return TRUE;
}
