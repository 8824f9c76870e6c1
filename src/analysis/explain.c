/* SPDX-License-Identifier: MIT */
/*
 * fragsim explain: the replays.  See explain.h.
 *
 * Two passes over the same events, since a peak is known only once the run is over: the first
 * finds the moments (the first event after which reserved memory is at its maximum, each
 * simulated or recorded OOM, the --at events) and, under --paranoid, checks the breakdown after
 * every event; the second replays again and captures the state at those moments.  Replays are
 * deterministic, so the n-th event of both passes is the same event in the same state.  Moments
 * are found by their position in the event stream, not by trace index, because a recorded OOM's
 * allocation and its free share one index.
 *
 * Events are fed as `replay` feeds them: inferred releases that look like PyTorch's retry before
 * an OOM are skipped (fsim_release_is_retry(), needed.h).
 */
#include "fragsim/explain.h"

#include <glib.h>

#include <string.h>

#include "fragsim/alloc-conf.h"
#include "fragsim/device.h"
#include "fragsim/engine.h"
#include "fragsim/owned.h"

#include "explain-private.h"
#include "feed.h"
#include "needed.h"

/* One target of the second pass: the state after the @ordinal-th event. */
typedef struct {
    uint64_t ordinal; /* 0: the state at trace start */
    FsimMomentKind kind;
    gboolean recorded_oom;
    uint64_t size; /* the request of a recorded OOM */
    uint64_t stream;
} Target;

/* What the first pass finds. */
typedef struct {
    const FsimExplainOptions *options;
    FsimEngine *engine;
    uint64_t ordinal;
    uint64_t peak_reserved;
    uint64_t peak_ordinal;
    GArray *targets;     /* Target: OOMs, recorded OOMs, --at */
    GHashTable *at_seen; /* --at indices met (uint64_t*) */
    GError *error;       /* a breakdown that did not add up (--paranoid) */
} Scan;

typedef struct {
    FsimEngine *engine;
    ExplainSites *sites;
    GArray *targets; /* sorted by ordinal */
    guint next;
    uint64_t ordinal;
    GPtrArray *moments;
    GArray *ordinals; /* uint64_t per moment */
    GError *error;
} Capture;

void
fsim_explain_options_init(FsimExplainOptions *options)
{
    memset(options, 0, sizeof(*options));
    options->trace_device = -1;
}

const char *
fsim_moment_kind_name(FsimMomentKind kind)
{
    switch (kind) {
    case FSIM_MOMENT_PEAK:
        return "peak";
    case FSIM_MOMENT_OOM:
        return "oom";
    case FSIM_MOMENT_AT:
    default:
        return "at";
    }
}

void
fsim_explanation_free(FsimExplanation *explanation)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimExplanation, trace, g_free),
                                      FSIM_OWNED(FsimExplanation, policy, g_free),
                                      FSIM_OWNED(FsimExplanation, config, g_free),
                                      FSIM_OWNED(FsimExplanation, device, g_free),
                                      FSIM_OWNED(FsimExplanation, moments, g_ptr_array_unref),
                                      FSIM_OWNED(FsimExplanation, pool_needs, g_array_unref)};

    fsim_owned_free(explanation, owned, G_N_ELEMENTS(owned));
}

/* ---- the run: policy, settings, device ------------------------------------------------------- */

void
explain_run_free(ExplainRun *run)
{
    static const FsimOwned owned[] = {FSIM_OWNED(ExplainRun, policy, g_free),
                                      FSIM_OWNED(ExplainRun, conf, g_free),
                                      FSIM_OWNED(ExplainRun, config, g_key_file_unref)};

    fsim_owned_free(run, owned, G_N_ELEMENTS(owned));
}

static gboolean
setup_device(const FsimTrace *trace, const FsimExplainOptions *options, ExplainRun *setup,
             GError **error)
{
    uint64_t capacity;
    g_autofree char *text = NULL;

    if (options->device != NULL)
        return fsim_device_spec_parse(options->device, &setup->device, error);
    capacity = fsim_trace_recorded_capacity(trace, setup->trace_device, NULL);
    if (capacity == 0)
        return fsim_device_spec_parse(FSIM_DEVICE_DEFAULT, &setup->device, error);
    text = g_strdup_printf("%" G_GUINT64_FORMAT, MAX(capacity, 2 * FSIM_MiB));
    if (!fsim_device_spec_parse(text, &setup->device, error))
        return FALSE;
    g_strlcpy(setup->device.name, "recorded", sizeof(setup->device.name));
    return TRUE;
}

/* The policy and its knobs: @policy, else the one @alloc_conf selects. */
static gboolean
setup_policy(ExplainRun *setup, const char *policy, const char *alloc_conf, GError **error)
{
    FsimAllocConf conf;

    fsim_alloc_conf_init(&conf);
    setup->config = g_key_file_new();
    if (alloc_conf != NULL && (!fsim_alloc_conf_parse(&conf, alloc_conf, error) ||
                               !fsim_alloc_conf_apply(setup->config, alloc_conf, error)))
        return FALSE;
    setup->conf = fsim_alloc_conf_to_string(&conf);
    setup->policy = g_strdup(policy != NULL             ? policy
                             : conf.expandable_segments ? "expandable"
                                                        : "caching");
    if (fsim_policy_lookup(setup->policy) == NULL) {
        g_autofree char *names = fsim_policy_names();

        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "unknown policy '%s' (one of: %s)",
                    setup->policy, names);
        return FALSE;
    }
    return TRUE;
}

ExplainRun *
explain_run_new(FsimTrace *trace, const ExplainRun *base, const char *policy,
                const char *alloc_conf, GError **error)
{
    g_autoptr(ExplainRun) run = g_new0(ExplainRun, 1);

    (void)trace;
    run->device = base->device;
    run->trace_device = base->trace_device;
    if (!setup_policy(run, policy, alloc_conf, error))
        return NULL;
    return g_steal_pointer(&run);
}

static gboolean
setup_run(FsimTrace *trace, const FsimExplainOptions *options, ExplainRun *setup, GError **error)
{
    const char *alloc_conf =
        options->alloc_conf != NULL ? options->alloc_conf : fsim_trace_alloc_conf(trace);
    gsize n_devices = 0;
    const uint32_t *devices = fsim_trace_devices(trace, &n_devices);
    gboolean found = FALSE;

    if (n_devices == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s: the trace has no events to explain",
                    fsim_trace_path(trace));
        return FALSE;
    }
    setup->trace_device = options->trace_device >= 0 ? (uint32_t)options->trace_device : devices[0];
    for (gsize i = 0; i < n_devices; i++)
        found = found || devices[i] == setup->trace_device;
    if (!found || options->trace_device > G_MAXUINT32) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "%s has no events on device %" G_GINT64_FORMAT, fsim_trace_path(trace),
                    options->trace_device);
        return FALSE;
    }
    return setup_policy(setup, options->policy, alloc_conf, error) &&
           setup_device(trace, options, setup, error);
}

FsimEngine *
explain_run_engine(FsimTrace *trace, const ExplainRun *setup, gboolean paranoid, GError **error)
{
    FsimRunConfig run;

    fsim_run_config_init(&run);
    run.policy = setup->policy;
    run.config = setup->config;
    run.device = setup->device;
    run.initial_state = fsim_trace_initial_state(trace, setup->trace_device);
    run.paranoid = run.paranoid || paranoid;
    return fsim_engine_new(&run, error);
}

gboolean
explain_run_feed(FsimTrace *trace, const ExplainRun *run, FsimEngine *engine, GError **error)
{
    return fsim_engine_start(engine, error) &&
           fsim_replay_feed_run(trace, run->trace_device, FALSE, engine, NULL, error);
}

/* explain_run_feed() to an engine whose observer keeps its first failure in *@observed: that
 * failure, if any, is the run's (when the feed itself fails, its error wins). */
static gboolean
feed_observed(FsimTrace *trace, const ExplainRun *run, FsimEngine *engine, GError **observed,
              GError **error)
{
    if (!explain_run_feed(trace, run, engine, error)) {
        g_clear_error(observed);
        return FALSE;
    }
    if (*observed != NULL) {
        g_propagate_error(error, g_steal_pointer(observed));
        return FALSE;
    }
    return TRUE;
}

/* ---- pass 1: find the moments ---------------------------------------------------------------- */

static void
target_add(GArray *targets, uint64_t ordinal, FsimMomentKind kind, const FsimEvent *ev)
{
    Target t = {.ordinal = ordinal, .kind = kind};

    if (ev != NULL && (ev->flags & FSIM_EVF_RECORDED_OOM) != 0 && ev->kind == FSIM_EV_ALLOC) {
        t.recorded_oom = TRUE;
        t.size = ev->size;
        t.stream = ev->stream;
    }
    g_array_append_val(targets, t);
}

static void
scan_on_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    Scan *scan = data;
    uint64_t reserved = (uint64_t)fsim_engine_device(engine)->reserved.current;

    scan->ordinal++;
    if (reserved > scan->peak_reserved) {
        scan->peak_reserved = reserved;
        scan->peak_ordinal = scan->ordinal;
    }
    /* A recorded OOM the policy served (a simulated one is added by scan_on_oom). */
    if (ev->kind == FSIM_EV_ALLOC && (ev->flags & FSIM_EVF_RECORDED_OOM) != 0) {
        const Target *last = scan->targets->len > 0
                                 ? &g_array_index(scan->targets, Target, scan->targets->len - 1)
                                 : NULL;

        if (last != NULL && last->ordinal == scan->ordinal && last->kind == FSIM_MOMENT_OOM)
            g_array_index(scan->targets, Target, scan->targets->len - 1).recorded_oom = TRUE;
        else
            target_add(scan->targets, scan->ordinal, FSIM_MOMENT_OOM, ev);
    }
    if (scan->options->at != NULL) {
        for (guint i = 0; i < scan->options->at->len; i++) {
            uint64_t at = g_array_index(scan->options->at, uint64_t, i);

            if (at == ev->index && !g_hash_table_contains(scan->at_seen, &at)) {
                g_hash_table_add(scan->at_seen, g_memdup2(&at, sizeof(at)));
                target_add(scan->targets, scan->ordinal, FSIM_MOMENT_AT, NULL);
            }
        }
    }
    if (scan->options->paranoid && scan->error == NULL) {
        FsimBreakdown b;
        uint64_t largest;

        if (explain_breakdown(engine, &b, &largest, &scan->error) &&
            fsim_breakdown_total(&b) != reserved)
            g_set_error(&scan->error, FSIM_ERROR, FSIM_ERROR_FAILED,
                        "event %" G_GUINT64_FORMAT ": the breakdown adds up to %" G_GUINT64_FORMAT
                        " bytes, not the %" G_GUINT64_FORMAT " reserved",
                        ev->index, fsim_breakdown_total(&b), reserved);
        if (scan->error != NULL)
            g_prefix_error(&scan->error, "event %" G_GUINT64_FORMAT ": ", ev->index);
    }
}

static void
scan_on_oom(gpointer data, const FsimEngine *engine, const FsimOomRecord *oom)
{
    Scan *scan = data;
    Target t = {.ordinal = scan->ordinal + 1, .kind = FSIM_MOMENT_OOM};

    (void)engine;
    t.size = oom->size;
    t.stream = oom->stream;
    g_array_append_val(scan->targets, t);
}

static const FsimObserver scan_observer = {.event = scan_on_event, .oom = scan_on_oom};

static gboolean
pass_scan(FsimTrace *trace, const ExplainRun *setup, const FsimExplainOptions *options,
          GArray *targets, GError **error)
{
    g_autoptr(FsimEngine) engine = explain_run_engine(trace, setup, options->paranoid, error);
    g_autoptr(GHashTable) at_seen =
        g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    Scan scan = {.options = options, .targets = targets, .at_seen = at_seen};
    Target peak = {.kind = FSIM_MOMENT_PEAK};

    if (engine == NULL)
        return FALSE;
    scan.engine = engine;
    fsim_engine_add_observer(engine, &scan_observer, &scan);
    if (!fsim_engine_start(engine, error))
        return FALSE;
    scan.peak_reserved = (uint64_t)fsim_engine_device(engine)->reserved.current;
    if (!feed_observed(trace, setup, engine, &scan.error, error))
        return FALSE;
    for (guint i = 0; options->at != NULL && i < options->at->len; i++) {
        uint64_t at = g_array_index(options->at, uint64_t, i);

        if (!g_hash_table_contains(at_seen, &at)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "%s: device %u has no event %" G_GUINT64_FORMAT, fsim_trace_path(trace),
                        setup->trace_device, at);
            return FALSE;
        }
    }
    peak.ordinal = scan.peak_ordinal;
    g_array_append_val(targets, peak);
    return TRUE;
}

/* ---- pass 2: capture ------------------------------------------------------------------------- */

static gint
target_compare(gconstpointer a, gconstpointer b)
{
    const Target *x = a;
    const Target *y = b;
    int order = fsim_compare_u64(x->ordinal, y->ordinal);

    return order != 0 ? order : (int)x->kind - (int)y->kind;
}

static void
capture_at(Capture *cap, const Target *t, int64_t event, const ExplainRequest *request)
{
    FsimMoment *moment;

    if (cap->error != NULL)
        return;
    moment = explain_capture(cap->engine, cap->sites, request, &cap->error);
    if (moment == NULL)
        return;
    moment->kind = t->kind;
    moment->event = event;
    g_ptr_array_add(cap->moments, moment);
    g_array_append_val(cap->ordinals, t->ordinal);
}

/* Capture every target at @ordinal except simulated OOMs (captured as they happen). */
static void
capture_targets(Capture *cap, int64_t event)
{
    while (cap->next < cap->targets->len) {
        const Target *t = &g_array_index(cap->targets, Target, cap->next);

        if (t->ordinal != cap->ordinal)
            break;
        cap->next++;
        if (t->kind == FSIM_MOMENT_OOM && t->recorded_oom) {
            ExplainRequest r = {t->size, t->stream, FALSE, TRUE};

            capture_at(cap, t, event, &r);
        } else if (t->kind != FSIM_MOMENT_OOM) {
            capture_at(cap, t, event, NULL);
        }
    }
}

static void
capture_on_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    Capture *cap = data;

    (void)engine;
    cap->ordinal++;
    capture_targets(cap, (int64_t)ev->index);
}

static void
capture_on_oom(gpointer data, const FsimEngine *engine, const FsimOomRecord *oom)
{
    Capture *cap = data;

    (void)engine;
    for (guint i = cap->next; i < cap->targets->len; i++) {
        Target *t = &g_array_index(cap->targets, Target, i);

        if (t->ordinal != cap->ordinal + 1)
            break;
        if (t->kind == FSIM_MOMENT_OOM) {
            ExplainRequest r = {oom->size, oom->stream, TRUE, t->recorded_oom};

            capture_at(cap, t, (int64_t)oom->event_index, &r);
            t->recorded_oom = FALSE; /* captured: capture_targets skips it */
            return;
        }
    }
}

static const FsimObserver capture_observer = {.event = capture_on_event, .oom = capture_on_oom};

/* Merge a recorded OOM into the simulated OOM of the same event (one moment, both flags). */
static void
targets_merge(GArray *targets)
{
    guint kept = 0;

    g_array_sort(targets, target_compare);
    for (guint i = 0; i < targets->len; i++) {
        Target *t = &g_array_index(targets, Target, i);

        if (kept > 0) {
            Target *last = &g_array_index(targets, Target, kept - 1);

            if (last->ordinal == t->ordinal && last->kind == t->kind) {
                last->recorded_oom = last->recorded_oom || t->recorded_oom;
                continue;
            }
        }
        g_array_index(targets, Target, kept++) = *t;
    }
    g_array_set_size(targets, kept);
}

static gboolean
pass_capture(FsimTrace *trace, const ExplainRun *setup, GArray *targets, GPtrArray *moments,
             GArray *ordinals, GError **error)
{
    g_autoptr(FsimEngine) engine = explain_run_engine(trace, setup, FALSE, error);
    g_autoptr(ExplainSites) sites = explain_sites_new(trace, setup->trace_device);
    Capture cap = {.targets = targets, .moments = moments, .ordinals = ordinals, .sites = sites};

    if (engine == NULL)
        return FALSE;
    cap.engine = engine;
    explain_sites_attach(sites, engine);
    fsim_engine_add_observer(engine, &capture_observer, &cap);
    if (!fsim_engine_start(engine, error))
        return FALSE;
    capture_targets(&cap, -1);
    return feed_observed(trace, setup, engine, &cap.error, error);
}

FsimExplanation *
fsim_explain_trace(FsimTrace *trace, const FsimExplainOptions *options, GError **error)
{
    g_autoptr(ExplainRun) setup = g_new0(ExplainRun, 1);
    g_autoptr(GArray) targets = g_array_new(FALSE, FALSE, sizeof(Target));
    g_autoptr(GArray) ordinals = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autoptr(FsimExplanation) out = g_new0(FsimExplanation, 1);

    out->moments = g_ptr_array_new_with_free_func((GDestroyNotify)explain_moment_free);
    out->needed_bytes = -1;
    if (!setup_run(trace, options, setup, error) ||
        !pass_scan(trace, setup, options, targets, error))
        return NULL;
    targets_merge(targets);
    if (!pass_capture(trace, setup, targets, out->moments, ordinals, error))
        return NULL;
    out->trace = g_strdup(fsim_trace_path(trace));
    out->policy = g_strdup(setup->policy);
    out->config = g_strdup(setup->conf);
    out->device = g_strdup(setup->device.name);
    out->capacity_bytes = setup->device.capacity_bytes;
    out->trace_device = setup->trace_device;
    out->described = fsim_policy_lookup(out->policy)->describe != NULL;
    if (options->alternatives && !explain_alternatives(trace, setup, out, ordinals, error))
        return NULL;
    return g_steal_pointer(&out);
}
