/* SPDX-License-Identifier: MIT */
/*
 * `tune`: the search for the PYTORCH_CUDA_ALLOC_CONF on which a job needs the least capacity.
 * See tune.h for the method and docs/tune.md for its reasons.
 */
#include "analysis/tune.h"

#include <glib.h>

#include <string.h>

#include "fragsim/alloc-conf.h"
#include "fragsim/owned.h"

#define MIB FSIM_MiB

/* Rounds of coordinate descent at most (each changes one knob at a time, every knob in turn). */
#define TUNE_MAX_ROUNDS 4

/* What `seen` maps a setting's text to when it was not searched in full. */
#define TUNE_SCREENED ((gpointer)1)
#define TUNE_FAILED   ((gpointer)2)

typedef struct {
    const FsimTuneRank *ranks;
    guint n_ranks;
    const FsimTuneOptions *options;
    uint64_t g;
    GTimer *timer;
    GHashTable *seen; /* config text -> FsimTuneCandidate *, TUNE_SCREENED or TUNE_FAILED */
    FsimTuneResult *result;
    const FsimTuneCandidate *best;
    gboolean forced; /* search the next setting in full, whatever the budget and the screen */
} Tune;

/* The knobs the descent changes, in the order it changes them. */
typedef enum {
    KNOB_EXPANDABLE,
    KNOB_MAX_SPLIT,
    KNOB_MAX_NON_SPLIT,
    KNOB_DIVISIONS,
    KNOB_INTERVAL, /* one per interval of FsimTuneValues */
    KNOB_GC,
} Knob;

static void
candidate_free(gpointer data)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimTuneCandidate, config, g_free),
                                      FSIM_OWNED(FsimTuneCandidate, ranks, g_free)};

    fsim_owned_free(data, owned, G_N_ELEMENTS(owned));
}

void
fsim_tune_result_free(FsimTuneResult *result)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimTuneResult, candidates, g_ptr_array_unref)};

    fsim_owned_free(result, owned, G_N_ELEMENTS(owned));
}

GKeyFile *
fsim_tune_knobs(const char *config, FsimPlatform platform, GError **error)
{
    g_autoptr(GKeyFile) knobs = g_key_file_new();

    if (!fsim_alloc_conf_apply(knobs, config, error))
        return NULL;
    if (platform != FSIM_PLATFORM_CUDA) {
        g_key_file_set_string(knobs, "caching", "platform", fsim_platform_name(platform));
        g_key_file_set_string(knobs, "expandable", "platform", fsim_platform_name(platform));
    }
    return g_steal_pointer(&knobs);
}

/* Settings ordered: less capacity, then less modelled cost, then the shorter text, then the text.
 */
static int
candidate_compare(const FsimTuneCandidate *a, const FsimTuneCandidate *b)
{
    size_t la = strlen(a->config), lb = strlen(b->config);

    if (a->needed_bytes != b->needed_bytes)
        return a->needed_bytes < b->needed_bytes ? -1 : 1;
    if (a->cost_ns != b->cost_ns)
        return a->cost_ns < b->cost_ns ? -1 : 1;
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(a->config, b->config);
}

static gint
candidate_sort(gconstpointer a, gconstpointer b)
{
    return candidate_compare(*(const FsimTuneCandidate *const *)a,
                             *(const FsimTuneCandidate *const *)b);
}

/* Replay @rank under @knobs on a device like the chosen one with @capacity bytes, stopping at the
 * first OOM.  TRUE with *fits (and *out when it fits). */
static gboolean
tune_replay(const Tune *t, const FsimTuneRank *rank, GKeyFile *knobs, uint64_t capacity,
            gboolean *fits, FsimMetrics *out, GError **error)
{
    FsimRunConfig rc;
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(GError) local_error = NULL;

    fsim_run_config_init(&rc);
    rc.policy = "caching";
    rc.config = knobs;
    rc.device = fsim_needed_device(&t->options->device, capacity);
    rc.initial_state = rank->initial_state;
    rc.fail_on_oom = TRUE;
    engine = fsim_engine_new(&rc, error);
    if (engine == NULL)
        return FALSE;
    *fits =
        fsim_engine_start(engine, NULL) && fsim_event_log_replay(rank->log, engine, &local_error);
    if (local_error != NULL && !g_error_matches(local_error, FSIM_ERROR, FSIM_ERROR_OOM)) {
        g_propagate_error(error, g_steal_pointer(&local_error));
        return FALSE;
    }
    if (*fits && out != NULL)
        *out = *fsim_engine_metrics(engine);
    return TRUE;
}

/* Whether some rank runs out of memory on the best figure so far plus one granule: then the
 * setting needs more than that (a fit needs every larger capacity to work) and cannot win. */
static gboolean
tune_screen(const Tune *t, GKeyFile *knobs, gboolean *out, GError **error)
{
    uint64_t capacity = t->best->needed_bytes + t->g;

    *out = FALSE;
    for (guint i = 0; i < t->n_ranks && !*out; i++) {
        /* the rank that decided the best first: the likeliest to fail */
        guint r = (t->best->worst + i) % t->n_ranks;
        gboolean fits;

        if (!tune_replay(t, &t->ranks[r], knobs, capacity, &fits, NULL, error))
            return FALSE;
        *out = !fits;
    }
    return TRUE;
}

/* The full figures of a setting: each rank's needed capacity (as `fit` finds it) and its cost on
 * the chosen device. */
static gboolean
tune_measure(const Tune *t, FsimTuneCandidate *c, GKeyFile *knobs, GError **error)
{
    const FsimDeviceSpec *device = &t->options->device;

    c->ranks = g_new0(FsimTuneRankResult, t->n_ranks);
    for (guint r = 0; r < t->n_ranks; r++) {
        FsimTuneRankResult *rr = &c->ranks[r];
        FsimNeededQuery query = {0};
        FsimNeededResult found;
        gboolean fits = FALSE;

        query.policy = "caching";
        query.config = knobs;
        query.device = *device;
        query.initial_state = t->ranks[r].initial_state;
        if (!fsim_needed_search(t->ranks[r].log, &query, &found, error))
            return FALSE;
        rr->needed_bytes = found.needed_bytes;
        rr->metrics = found.metrics;
        rr->proven = found.proven;
        rr->replays = found.replays;
        if (found.needed_bytes <= device->capacity_bytes &&
            !tune_replay(t, &t->ranks[r], knobs, device->capacity_bytes, &fits, &rr->cost, error))
            return FALSE;
        if (!fits)
            rr->cost = found.metrics;
    }
    for (guint r = 0; r < t->n_ranks; r++) {
        const FsimTuneRankResult *rr = &c->ranks[r];
        const FsimMetrics *m = &rr->cost;
        uint64_t least = c->ranks[0].needed_bytes;

        for (guint k = 1; k < t->n_ranks; k++)
            least = MIN(least, c->ranks[k].needed_bytes);
        if (rr->needed_bytes > c->needed_bytes || r == 0) {
            c->needed_bytes = rr->needed_bytes;
            c->worst = r;
        }
        c->spread_bytes = c->needed_bytes - least;
        if (m->modelled_alloc_time_ns >= c->cost_ns) {
            c->cost_ns = m->modelled_alloc_time_ns;
            c->driver_calls =
                m->device_mallocs + m->device_frees + m->device_maps + m->device_unmaps;
        }
    }
    return TRUE;
}

static gboolean
tune_out_of_time(Tune *t)
{
    double budget = t->options->budget_seconds;

    if (t->forced || t->best == NULL)
        return FALSE;
    if (budget > 0 && g_timer_elapsed(t->timer, NULL) >= budget)
        t->result->budget_exhausted = TRUE;
    return t->result->budget_exhausted;
}

/**
 * tune_evaluate:
 * @origin: how the search came to @conf (static string).
 *
 * Searches @conf in full unless it was seen, screened out or the budget is spent.
 *
 * Returns: FALSE only for an error of the default's search; *out (nullable) the setting's figures,
 * NULL when it was screened out, failed or not tried.
 */
static gboolean
tune_evaluate(Tune *t, const FsimAllocConf *conf, const char *origin, const FsimTuneCandidate **out,
              GError **error)
{
    g_autofree char *text = fsim_alloc_conf_to_string(conf);
    g_autoptr(GKeyFile) knobs = NULL;
    g_autoptr(GError) local_error = NULL;
    FsimTuneCandidate *c;
    gpointer seen;
    gboolean screened = FALSE;

    *out = NULL;
    if (g_hash_table_lookup_extended(t->seen, text, NULL, &seen)) {
        *out = seen == TUNE_SCREENED || seen == TUNE_FAILED ? NULL : seen;
        return TRUE;
    }
    if (tune_out_of_time(t))
        return TRUE;
    knobs = fsim_tune_knobs(text, t->options->platform, &local_error);
    if (knobs != NULL && t->best != NULL && !t->forced &&
        tune_screen(t, knobs, &screened, &local_error) && screened) {
        t->result->screened_out++;
        g_hash_table_insert(t->seen, g_steal_pointer(&text), TUNE_SCREENED);
        return TRUE;
    }
    c = g_new0(FsimTuneCandidate, 1);
    c->config = g_strdup(text);
    c->conf = *conf;
    c->origin = origin;
    if (local_error != NULL || !tune_measure(t, c, knobs, &local_error)) {
        candidate_free(c);
        if (t->best == NULL) { /* the default's: nothing to compare with */
            g_propagate_error(error, g_steal_pointer(&local_error));
            return FALSE;
        }
        t->result->failed++;
        g_hash_table_insert(t->seen, g_steal_pointer(&text), TUNE_FAILED);
        return TRUE;
    }
    g_ptr_array_add(t->result->candidates, c);
    g_hash_table_insert(t->seen, g_steal_pointer(&text), c);
    if (t->best == NULL || candidate_compare(c, t->best) < 0)
        t->best = c;
    if (t->options->progress != NULL)
        t->options->progress(t->options->progress_data, t->result->candidates->len);
    *out = c;
    return TRUE;
}

/* The number of values of @knob (@interval: which interval for KNOB_INTERVAL), "off" first. */
static guint
knob_count(const FsimTuneValues *v, Knob knob, guint interval)
{
    switch (knob) {
    case KNOB_EXPANDABLE:
        return 2;
    case KNOB_MAX_SPLIT:
        return 1 + v->max_split->len;
    case KNOB_MAX_NON_SPLIT:
        return 1 + v->max_non_split->len;
    case KNOB_DIVISIONS:
        return 1 + v->divisions->len;
    case KNOB_INTERVAL:
        return 1 + v->interval_divisions[interval]->len;
    case KNOB_GC:
    default:
        return 1 + v->gc->len;
    }
}

/* @base with @knob set to its @index-th value (0: PyTorch's default).  FALSE when the knob has no
 * effect in @base (max_non_split_rounding without max_split_size). */
static gboolean
knob_apply(const FsimTuneValues *v, Knob knob, guint interval, guint index,
           const FsimAllocConf *base, FsimAllocConf *out)
{
    FsimAllocConf defaults;

    fsim_alloc_conf_init(&defaults);
    *out = *base;
    switch (knob) {
    case KNOB_EXPANDABLE:
        out->expandable_segments = index == 1;
        return TRUE;
    case KNOB_MAX_SPLIT:
        out->max_split_size =
            index == 0 ? defaults.max_split_size : g_array_index(v->max_split, uint64_t, index - 1);
        return TRUE;
    case KNOB_MAX_NON_SPLIT:
        out->max_non_split_rounding = index == 0
                                          ? defaults.max_non_split_rounding
                                          : g_array_index(v->max_non_split, uint64_t, index - 1);
        return base->max_split_size != defaults.max_split_size;
    case KNOB_DIVISIONS:
        for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++)
            out->roundup_power2_divisions[i] =
                index == 0 ? 0 : g_array_index(v->divisions, uint32_t, index - 1);
        return TRUE;
    case KNOB_INTERVAL:
        out->roundup_power2_divisions[v->intervals[interval]] =
            index == 0 ? 0 : g_array_index(v->interval_divisions[interval], uint32_t, index - 1);
        return TRUE;
    case KNOB_GC:
    default:
        out->garbage_collection_threshold =
            index == 0 ? 0.0 : g_array_index(v->gc, double, index - 1);
        out->has_memory_fraction = index != 0 || base->per_process_memory_fraction < 1.0;
        if (index != 0)
            out->per_process_memory_fraction = MAX(base->per_process_memory_fraction, 1.0);
        if (!base->has_memory_fraction && index == 0)
            out->has_memory_fraction = FALSE;
        return TRUE;
    }
}

/* The knobs in descent order: (knob, interval) pairs. */
static guint
knob_list(const FsimTuneValues *v, Knob *knobs, guint *intervals)
{
    static const Knob order[] = {KNOB_EXPANDABLE, KNOB_MAX_SPLIT, KNOB_MAX_NON_SPLIT,
                                 KNOB_DIVISIONS};
    guint n = 0;

    for (gsize i = 0; i < G_N_ELEMENTS(order); i++) {
        knobs[n] = order[i];
        intervals[n++] = 0;
    }
    for (guint i = 0; i < v->n_intervals; i++) {
        knobs[n] = KNOB_INTERVAL;
        intervals[n++] = i;
    }
    knobs[n] = KNOB_GC;
    intervals[n++] = 0;
    return n;
}

/* Each value of each knob alone (the interval knobs and max_non_split_rounding come in the
 * descent, where they can act), then the best value of every knob together. */
static gboolean
tune_singles(Tune *t, const FsimTuneValues *v, const FsimAllocConf *defaults, GError **error)
{
    static const Knob singles[] = {KNOB_EXPANDABLE, KNOB_MAX_SPLIT, KNOB_DIVISIONS, KNOB_GC};
    const FsimTuneCandidate *base = t->best;
    FsimAllocConf combined = *defaults;
    guint improved = 0;

    for (gsize k = 0; k < G_N_ELEMENTS(singles); k++) {
        const FsimTuneCandidate *knob_best = base;
        guint best_index = 0;

        for (guint i = 1; i < knob_count(v, singles[k], 0); i++) {
            FsimAllocConf conf;
            const FsimTuneCandidate *c;

            (void)knob_apply(v, singles[k], 0, i, defaults, &conf);
            if (!tune_evaluate(t, &conf, "single", &c, error))
                return FALSE;
            if (c != NULL && candidate_compare(c, knob_best) < 0) {
                knob_best = c;
                best_index = i;
            }
        }
        if (best_index != 0) {
            (void)knob_apply(v, singles[k], 0, best_index, &combined, &combined);
            improved++;
        }
    }
    if (improved >= 2) {
        const FsimTuneCandidate *c;

        return tune_evaluate(t, &combined, "combined", &c, error);
    }
    return TRUE;
}

/* Coordinate descent from the best setting: each knob in turn moves to its best value with the
 * others held, until a whole round changes nothing. */
static gboolean
tune_descend(Tune *t, const FsimTuneValues *v, GError **error)
{
    Knob knobs[8 + FSIM_TUNE_INTERVALS];
    guint intervals[8 + FSIM_TUNE_INTERVALS];
    guint n = knob_list(v, knobs, intervals);

    for (guint round = 0; round < TUNE_MAX_ROUNDS; round++) {
        const FsimTuneCandidate *start = t->best;

        for (guint k = 0; k < n; k++) {
            FsimAllocConf base = t->best->conf;

            for (guint i = 0; i < knob_count(v, knobs[k], intervals[k]); i++) {
                FsimAllocConf conf;
                const FsimTuneCandidate *c;

                if (!knob_apply(v, knobs[k], intervals[k], i, &base, &conf))
                    continue;
                if (!tune_evaluate(t, &conf, "descent", &c, error))
                    return FALSE;
            }
        }
        if (t->best == start || t->result->budget_exhausted)
            break;
    }
    return TRUE;
}

/* The cheapest of the settings within one granule of the least capacity that save more than one
 * granule over the default; NULL: keep the default. */
static const FsimTuneCandidate *
tune_recommend(const FsimTuneResult *result)
{
    const FsimTuneCandidate *best = g_ptr_array_index(result->candidates, 0);
    const FsimTuneCandidate *chosen = NULL;
    uint64_t g = result->granularity;

    for (guint i = 0; i < result->candidates->len; i++) {
        const FsimTuneCandidate *c = g_ptr_array_index(result->candidates, i);

        if (c->needed_bytes > best->needed_bytes + g ||
            c->needed_bytes + g >= result->default_candidate->needed_bytes)
            continue;
        if (chosen == NULL || c->cost_ns < chosen->cost_ns)
            chosen = c; /* candidates are sorted: equal costs keep the lower capacity */
    }
    return chosen;
}

FsimTuneResult *
fsim_tune_search(const FsimTuneRank *ranks, guint n_ranks, const FsimTuneOptions *options,
                 GError **error)
{
    g_autoptr(FsimTuneResult) result = g_new0(FsimTuneResult, 1);
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GTimer) timer = g_timer_new();
    g_autoptr(FsimTuneValues) values = NULL;
    Tune t = {.ranks = ranks,
              .n_ranks = n_ranks,
              .options = options,
              .timer = timer,
              .seen = seen,
              .result = result};
    FsimAllocConf defaults;
    const FsimTuneCandidate *c;

    g_return_val_if_fail(n_ranks > 0, NULL);
    t.g = options->device.granularity > 0 ? options->device.granularity : 2 * MIB;
    result->candidates = g_ptr_array_new_with_free_func(candidate_free);
    result->n_ranks = n_ranks;
    result->granularity = t.g;
    fsim_alloc_conf_init(&defaults);
    defaults.platform = options->platform;
    if (!tune_evaluate(&t, &defaults, "default", &result->default_candidate, error))
        return NULL;
    if (options->recorded != NULL && options->recorded[0] != '\0') {
        FsimAllocConf recorded = defaults;

        /* searched in full like the default, whatever the budget and the screen: the user runs
         * it today */
        if (!fsim_alloc_conf_parse(&recorded, options->recorded, error))
            return NULL;
        t.forced = TRUE;
        if (!tune_evaluate(&t, &recorded, "recorded", &c, error))
            return NULL;
        t.forced = FALSE;
        result->recorded = c != result->default_candidate ? c : NULL;
    }
    values = fsim_tune_values_new(ranks, n_ranks, options->platform);
    if (!tune_singles(&t, values, &defaults, error) || !tune_descend(&t, values, error))
        return NULL;
    g_ptr_array_sort(result->candidates, candidate_sort);
    result->recommended = tune_recommend(result);
    result->seconds = g_timer_elapsed(timer, NULL);
    return g_steal_pointer(&result);
}

/* ---- words ----------------------------------------------------------------------------------- */

static void
describe_divisions(GString *text, const FsimAllocConf *conf)
{
    for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS;) {
        uint32_t value = conf->roundup_power2_divisions[i];
        guint end = i + 1;

        while (end < FSIM_ALLOC_CONF_INTERVALS && conf->roundup_power2_divisions[end] == value)
            end++;
        if (value > 1) {
            g_autofree char *from = fsim_format_size(MIB << i);
            g_autofree char *to = fsim_format_size(MIB << end);

            if (i == 0 && end == FSIM_ALLOC_CONF_INTERVALS)
                g_string_append_printf(text, "; sizes rounded up to 1/%u of their power of two",
                                       value);
            else if (end == FSIM_ALLOC_CONF_INTERVALS)
                g_string_append_printf(
                    text, "; sizes from %s up rounded to 1/%u of their power of two", from, value);
            else if (i == 0)
                g_string_append_printf(
                    text, "; sizes below %s rounded to 1/%u of their power of two", to, value);
            else
                g_string_append_printf(
                    text, "; sizes from %s below %s rounded to 1/%u of their power of two", from,
                    to, value);
        }
        i = end;
    }
}

char *
fsim_tune_describe(const FsimAllocConf *conf)
{
    g_autoptr(GString) text = g_string_new(NULL);
    FsimAllocConf defaults;

    fsim_alloc_conf_init(&defaults);
    if (conf->expandable_segments)
        g_string_append(text, "; expandable segments: one growing mapped segment per stream "
                              "instead of cudaMalloc'd ones");
    if (conf->max_split_size != defaults.max_split_size)
        g_string_append_printf(text, "; blocks of %" G_GUINT64_FORMAT " MiB or more never split",
                               conf->max_split_size / MIB);
    if (conf->max_split_size != defaults.max_split_size &&
        conf->max_non_split_rounding != defaults.max_non_split_rounding)
        g_string_append_printf(
            text,
            "; a request that large may take a cached block up to %" G_GUINT64_FORMAT " MiB larger",
            conf->max_non_split_rounding / MIB);
    describe_divisions(text, conf);
    if (conf->garbage_collection_threshold > 0 && conf->has_memory_fraction)
        g_string_append_printf(text,
                               "; unused cached blocks freed, oldest first, once %.0f%% of the "
                               "allowed memory is allocated",
                               100.0 * conf->garbage_collection_threshold);
    if (conf->has_memory_fraction && conf->per_process_memory_fraction < 1.0)
        g_string_append_printf(text, "; at most %.0f%% of the card's memory",
                               100.0 * conf->per_process_memory_fraction);
    if (conf->large_segment_size != defaults.large_segment_size)
        g_string_append_printf(text, "; %" G_GUINT64_FORMAT " MiB segments for 1-10 MiB requests",
                               conf->large_segment_size / MIB);
    return g_strdup(text->len > 2 ? text->str + 2 : "");
}
