/* SPDX-License-Identifier: MIT */
/*
 * What each comparison of the report leads with: the answer.  One sentence says which setting
 * to use and why; a table gives the capacity each run needs (needed_bytes) against the lower
 * bound and what the recording itself reserved, and where each run's memory goes at its peak
 * (live, rounding, free releasable, free pinned: `fragsim explain`'s breakdown, stored by
 * `replay --db`); for traces with marks, the first step (warm-up) against the steady state.
 *
 * The sentence recommends a PyTorch setting (a run of `caching` or `expandable`: what a user can
 * set with PYTORCH_CUDA_ALLOC_CONF), compared with PyTorch's default settings; other allocators
 * are named when they would need less, as allocators one would have to adopt.  When `tune` wrote
 * a recommendation for the same trace and device, that one is given.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/alloc-conf.h"

#include "report-private.h"

typedef struct {
    const FsimStoredRun *best;     /* the PyTorch setting that needs the least */
    const FsimStoredRun *baseline; /* PyTorch's default settings */
    const FsimStoredRun *other;    /* another allocator needing less than @best */
    const FsimStoredRun *recorded; /* the recording itself */
    const FsimStoredRecommendation *tune;
    uint64_t lower; /* the trace's lower bound */
} Answer;

static gboolean
is_pytorch(const FsimStoredRun *run)
{
    return strcmp(run->policy, "caching") == 0 || strcmp(run->policy, "expandable") == 0;
}

static gboolean
has_needed(const FsimStoredRun *run)
{
    return run->metrics.needed_bytes >= 0 && !report_is_recorded(run);
}

static const FsimStoredRecommendation *
find_tune(const ReportContext *ctx, const FsimPlotGroup *group)
{
    const FsimStoredRecommendation *found = NULL;

    for (guint i = 0; ctx->recommendations != NULL && i < ctx->recommendations->len; i++) {
        const FsimStoredRecommendation *r =
            &g_array_index(ctx->recommendations, FsimStoredRecommendation, i);

        /* the latest one for this trace device on this device */
        if (g_strcmp0(r->trace, group->trace) == 0 && r->trace_device == group->trace_device &&
            g_strcmp0(r->device, group->device) == 0)
            found = r;
    }
    return found;
}

static void
answer_find(const ReportContext *ctx, const FsimPlotGroup *group, Answer *a)
{
    memset(a, 0, sizeof(*a));
    a->tune = find_tune(ctx, group);
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        uint64_t key = report_run_key(run);

        a->lower = MAX(a->lower, run->metrics.lower_bound_bytes);
        if (report_is_recorded(run)) {
            a->recorded = run;
            continue;
        }
        if (is_pytorch(run) && strcmp(run->policy, "caching") == 0 && *run->config == '\0' &&
            a->baseline == NULL)
            a->baseline = run;
        if (!has_needed(run))
            continue;
        if (is_pytorch(run)) {
            if (a->best == NULL || key < report_run_key(a->best))
                a->best = run;
        } else if (a->other == NULL || key < report_run_key(a->other)) {
            a->other = run;
        }
    }
    /* A tie with the default settings: nothing to change. */
    if (a->best != NULL && a->baseline != NULL && has_needed(a->baseline) &&
        report_run_key(a->baseline) <= report_run_key(a->best))
        a->best = a->baseline;
    /* Another allocator is worth naming only when it needs clearly less (1%). */
    if (a->other != NULL && a->best != NULL &&
        (double)report_run_key(a->other) > 0.99 * (double)report_run_key(a->best))
        a->other = NULL;
}

/* How a user sets @run's configuration: PYTORCH_CUDA_ALLOC_CONF=..., or torch_npu's
 * PYTORCH_NPU_ALLOC_CONF for a run of the model's npu platform (its stored knobs say
 * `POLICY.platform=npu`); the `expandable` policy is PyTorch's expandable_segments:True. */
static char *
setting_text(const FsimStoredRun *run)
{
    const char *config = run->config != NULL ? run->config : "";
    g_autofree char *npu_knob = g_strdup_printf("%s.platform=npu", run->policy);
    const char *env = fsim_platform_alloc_conf_env(
        run->knobs != NULL && strstr(run->knobs, npu_knob) != NULL ? FSIM_PLATFORM_NPU
                                                                   : FSIM_PLATFORM_CUDA);

    if (strcmp(run->policy, "expandable") == 0 && strstr(config, "expandable_segments") == NULL)
        return g_strdup_printf("%s=expandable_segments:True%s%s", env, *config != '\0' ? "," : "",
                               config);
    return g_strdup_printf("%s=%s", env, config);
}

/* Why @best needs less than @baseline, from their breakdowns at the peak ("" when they do not
 * say). */
static char *
answer_why(const ReportContext *ctx, const FsimStoredRun *best, const FsimStoredRun *baseline)
{
    FsimStoredBreakdown b, d;
    g_autofree char *pinned = NULL;
    g_autofree char *best_pinned = NULL;

    if (!fsim_store_breakdown(ctx->store, baseline->id, &d, NULL) || !d.present ||
        !fsim_store_breakdown(ctx->store, best->id, &b, NULL) || !b.present)
        return g_strdup("");
    if (d.free_pinned_bytes <= b.free_pinned_bytes)
        return g_strdup("");
    pinned = fsim_format_size(d.free_pinned_bytes);
    best_pinned = fsim_format_size(b.free_pinned_bytes);
    return g_strdup_printf(": at its peak the default settings hold %s of free memory that "
                           "live blocks pin (they share its segments, so it cannot be returned), "
                           "%s does %s",
                           pinned, best->label, best_pinned);
}

/* The sentence's lead: the setting to use and what it saves (tune's recommendation, else the
 * best PyTorch setting tried, else the best other allocator); @a->other is cleared when it
 * is the lead, so that it is not named twice. */
static void
answer_lead(const ReportContext *ctx, Answer *a, GString *s)
{
    if (a->tune != NULL && a->tune->needed_bytes >= 0) {
        g_autofree char *needed = fsim_format_size((uint64_t)a->tune->needed_bytes);
        g_autofree char *saving =
            fsim_format_size(a->tune->saving_bytes > 0 ? (uint64_t)a->tune->saving_bytes : 0);

        g_string_append_printf(s,
                               "Set %s (fragsim tune's recommendation): it needs %s, %s less "
                               "than PyTorch's default settings",
                               a->tune->env != NULL && *a->tune->env != '\0' ? a->tune->env
                                                                             : a->tune->config,
                               needed, saving);
    } else if (a->best != NULL && a->best == a->baseline) {
        g_autofree char *needed = fsim_format_size(report_run_key(a->best));

        g_string_append_printf(s,
                               "Keep PyTorch's default settings: they need %s, and no other "
                               "setting tried needs less",
                               needed);
    } else if (a->best != NULL && a->baseline != NULL && has_needed(a->baseline)) {
        uint64_t base = report_run_key(a->baseline);
        uint64_t best = report_run_key(a->best);
        g_autofree char *needed = fsim_format_size(best);
        g_autofree char *saving = fsim_format_size(base - best);
        g_autofree char *base_size = fsim_format_size(base);
        g_autofree char *why = answer_why(ctx, a->best, a->baseline);
        g_autofree char *setting = setting_text(a->best);

        g_string_append_printf(s,
                               "Set %s (run %s): it needs %s, %s (%.0f%%) less than PyTorch's "
                               "default settings (%s)%s",
                               setting, a->best->label, needed, saving,
                               100.0 * (double)(base - best) / (double)base, base_size, why);
    } else if (a->best != NULL) {
        g_autofree char *needed = fsim_format_size(report_run_key(a->best));

        g_string_append_printf(s, "Of the PyTorch settings tried, %s needs the least: %s",
                               a->best->label, needed);
    } else if (a->other != NULL) {
        g_autofree char *needed = fsim_format_size(report_run_key(a->other));

        g_string_append_printf(s, "%s needs the least: %s", a->other->label, needed);
        a->other = NULL;
    } else {
        g_string_append(s, "No run has a needed capacity (replayed with --no-needed, or every "
                           "run failed)");
    }
}

/* A chosen setting that needs more than the card has: say so, or the sentence reads as a fit. */
static void
answer_fit(const Answer *a, GString *s)
{
    const FsimStoredRun *chosen = a->tune == NULL && a->best != NULL ? a->best : NULL;

    if (chosen != NULL && has_needed(chosen) &&
        (uint64_t)chosen->metrics.needed_bytes > chosen->capacity_bytes) {
        g_autofree char *capacity = fsim_format_size(chosen->capacity_bytes);

        g_string_append_printf(s,
                               ". Even so it does not fit the %s (%s usable): no setting "
                               "tried fits this card",
                               chosen->device, capacity);
    }
}

char *
report_answer_sentence(const ReportContext *ctx, const FsimPlotGroup *group, GError **error)
{
    Answer a;
    g_autoptr(GString) s = g_string_new(NULL);
    g_autofree char *lower = NULL;

    (void)error;
    answer_find(ctx, group, &a);
    lower = fsim_format_size(a.lower);
    answer_lead(ctx, &a, s);
    if (a.other != NULL) {
        g_autofree char *needed = fsim_format_size(report_run_key(a.other));

        g_string_append_printf(s, "; another allocator, %s, would need %s", a.other->label, needed);
    }
    answer_fit(&a, s);
    g_string_append_printf(s,
                           ". No allocator can do with less than %s (the most memory the "
                           "program ever had live)",
                           lower);
    if (a.recorded != NULL) {
        g_autofree char *rec = fsim_format_size(a.recorded->metrics.peak_reserved_bytes);

        g_string_append_printf(s, "; the recording itself reserved %s", rec);
    }
    g_string_append_c(s, '.');
    return g_string_free(g_steal_pointer(&s), FALSE);
}

/* ---- the table: needs, and the breakdown at the peak --------------------------------------- */

static const char *const part_class[] = {"live", "round", "free", "pin"};
static const char *const part_name[] = {"live", "rounding", "free releasable", "free pinned"};

static void
write_bar(GString *out, const FsimStoredBreakdown *b, uint64_t reserved, uint64_t scale)
{
    const uint64_t parts[] = {b->live_requested_bytes, b->rounding_bytes, b->free_releasable_bytes,
                              b->free_pinned_bytes};
    double width = scale > 0 ? 100.0 * (double)reserved / (double)scale : 0.0;

    g_string_append_printf(out, "<div class=\"bar\" style=\"width:%.1f%%\">", width);
    if (!b->present) {
        g_string_append(out, "<span class=\"none\" style=\"width:100%\"></span></div>");
        return;
    }
    for (gsize k = 0; k < G_N_ELEMENTS(parts); k++) {
        g_autofree char *size = fsim_format_size(parts[k]);

        if (parts[k] == 0 || reserved == 0)
            continue;
        g_string_append_printf(
            out, "<span class=\"%s\" style=\"width:%.2f%%\" title=\"%s: ", part_class[k],
            100.0 * (double)parts[k] / (double)reserved, part_name[k]);
        report_esc(out, size);
        g_string_append(out, "\"></span>");
    }
    g_string_append(out, "</div>");
}

/* The parts beyond what the tensors asked for: rounding, free releasable, free pinned. */
static void
write_parts(GString *out, const FsimStoredBreakdown *b)
{
    const uint64_t parts[] = {b->rounding_bytes, b->free_releasable_bytes, b->free_pinned_bytes};

    for (gsize k = 0; k < G_N_ELEMENTS(parts); k++) {
        g_autofree char *size = b->present ? fsim_format_size(parts[k]) : g_strdup("-");

        report_td_num(out, size);
    }
}

static void
write_needs_row(GString *out, const FsimStoredRun *run, const Answer *a,
                const FsimStoredBreakdown *b, uint64_t scale)
{
    const FsimMetrics *m = &run->metrics;
    gboolean recommended = run == a->best && a->tune == NULL;
    g_autofree char *name = report_run_name(run);
    g_autofree char *size = has_needed(run) ? fsim_format_size((uint64_t)m->needed_bytes)
                                            : g_strdup(report_is_recorded(run) ? "" : "-");
    g_autofree char *needed =
        has_needed(run) && a->lower > 0
            ? g_strdup_printf("%s (%+.1f%%)", size,
                              100.0 * ((double)m->needed_bytes - (double)a->lower) /
                                  (double)a->lower)
            : g_strdup(size);
    g_autofree char *reserved = fsim_format_size(m->peak_reserved_bytes);
    g_autofree char *ooms = fsim_format_count(m->ooms);

    g_string_append_printf(out, "<tr%s><td>",
                           recommended   ? " class=\"best\""
                           : m->ooms > 0 ? " class=\"oom\""
                                         : "");
    report_esc(out, name);
    g_string_append_printf(out, " <span class=\"tag\">run %" G_GINT64_FORMAT "</span>", run->id);
    if (recommended)
        g_string_append(out, " <span class=\"tag good\">use this</span>");
    if (run == a->baseline)
        g_string_append(out, " <span class=\"tag\">PyTorch default</span>");
    if (report_is_recorded(run))
        g_string_append(out, " <span class=\"tag\">what the recording did</span>");
    if (a->tune != NULL && a->tune->run_id == run->id)
        g_string_append(out, " <span class=\"tag good\">tune recommends</span>");
    g_string_append(out, "</td>");
    report_td_num(out, needed);
    report_td_num(out, reserved);
    g_string_append(out, "<td class=\"barcell\">");
    write_bar(out, b, b->present ? b->reserved_bytes : m->peak_reserved_bytes, scale);
    g_string_append(out, "</td>");
    write_parts(out, b);
    report_td_num(out, ooms);
    g_string_append(out, "</tr>\n");
}

static gboolean
write_needs_table(GString *out, const ReportContext *ctx, const FsimPlotGroup *group,
                  const Answer *a, GError **error)
{
    g_autoptr(GArray) breakdowns = g_array_new(FALSE, TRUE, sizeof(FsimStoredBreakdown));
    g_autofree char *lower = fsim_format_size(a->lower);
    uint64_t scale = 0;

    g_array_set_size(breakdowns, group->runs->len);
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        FsimStoredBreakdown *b = &g_array_index(breakdowns, FsimStoredBreakdown, i);

        if (!fsim_store_breakdown(ctx->store, run->id, b, error))
            return FALSE;
        scale = MAX(scale, b->present ? b->reserved_bytes : run->metrics.peak_reserved_bytes);
    }
    g_string_append(out, "<div class=\"scroll\"><table class=\"needs\">\n<thead><tr><th>run "
                         "(policy and settings)</th><th class=\"n\">needs (over the lower "
                         "bound)</th><th class=\"n\">peak reserved here</th><th>at the peak: "
                         "<span class=\"key live\"></span>live <span class=\"key round\"></span>"
                         "rounding <span class=\"key free\"></span>free releasable <span "
                         "class=\"key pin\"></span>free pinned</th><th class=\"n\">rounding</th>"
                         "<th class=\"n\">free releasable</th><th class=\"n\">free pinned</th>"
                         "<th class=\"n\">OOMs here</th></tr></thead>\n<tbody>\n");
    /* the recording last: it is the reference, not a candidate */
    for (int pass = 0; pass < 2; pass++)
        for (guint i = 0; i < group->runs->len; i++) {
            const FsimStoredRun *run = group->runs->pdata[i];

            if (report_is_recorded(run) == (pass == 1))
                write_needs_row(out, run, a, &g_array_index(breakdowns, FsimStoredBreakdown, i),
                                scale);
        }
    g_string_append(out, "</tbody></table></div>\n<p class=\"note\"><strong>needs</strong>: the "
                         "least GPU memory on which the run has no out-of-memory error (any card "
                         "with at least this much works). <strong>Lower bound</strong>: ");
    report_esc(out, lower);
    g_string_append(out, ", the most memory the program ever had live; no allocator needs less. "
                         "At the peak of reserved memory, <strong>live</strong> is what the "
                         "tensors asked for, <strong>rounding</strong> what the allocator added "
                         "to them, <strong>free releasable</strong> cached memory it can give "
                         "back when the card is full, <strong>free pinned</strong> free memory "
                         "it cannot give back because a live block shares its segment: the "
                         "fragmentation that costs capacity.</p>\n");
    return TRUE;
}

/* ---- warm-up against steady state ---------------------------------------------------------- */

/* Max peak reserved, and the driver calls, of the warm-up (first marked phase) and the steady
 * phases after it.  FALSE when the run has no marked phase. */
static gboolean
phase_figures(GArray *phases, uint64_t fig[4], guint *steady)
{
    gint warm = -1;

    memset(fig, 0, 4 * sizeof(uint64_t));
    *steady = 0;
    for (guint i = 0; i < phases->len; i++) {
        const FsimStoredPhase *p = &g_array_index(phases, FsimStoredPhase, i);

        if (p->label == NULL)
            continue;
        if (warm < 0) {
            warm = (gint)i;
            fig[0] = p->peak_reserved_bytes;
            fig[2] = p->driver_calls;
            continue;
        }
        fig[1] = MAX(fig[1], p->peak_reserved_bytes);
        fig[3] += p->driver_calls;
        (*steady)++;
    }
    return warm >= 0;
}

static gboolean
write_phases(GString *out, const ReportContext *ctx, const FsimPlotGroup *group, GError **error)
{
    g_autoptr(GString) rows = g_string_new(NULL);

    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        g_autoptr(GArray) phases = fsim_store_phases(ctx->store, run->id, error);
        g_autofree char *name = report_run_name(run);
        uint64_t fig[4];
        guint steady;

        if (phases == NULL)
            return FALSE;
        if (!phase_figures(phases, fig, &steady))
            continue;
        {
            g_autofree char *warm = fsim_format_size(fig[0]);
            g_autofree char *rest = steady > 0 ? fsim_format_size(fig[1]) : g_strdup("-");
            g_autofree char *calls = fsim_format_count(fig[2]);
            g_autofree char *per =
                steady > 0 ? g_strdup_printf("%.1f", (double)fig[3] / steady) : g_strdup("-");
            g_autofree char *count = g_strdup_printf("%u", steady);

            g_string_append(rows, "<tr><td>");
            report_esc(rows, name);
            g_string_append(rows, "</td>");
            report_td_num(rows, warm);
            report_td_num(rows, rest);
            report_td_num(rows, calls);
            report_td_num(rows, per);
            report_td_num(rows, count);
            g_string_append(rows, "</tr>\n");
        }
    }
    if (rows->len == 0)
        return TRUE;
    g_string_append(out, "<h3>Warm-up and steady state</h3>\n<p class=\"note\">The trace's marks "
                         "cut it into phases (training steps, requests). The first marked phase "
                         "is the warm-up, where the allocator fills its cache; the later ones are "
                         "the steady state. Peaks are of reserved memory.</p>\n<div "
                         "class=\"scroll\"><table>\n<thead><tr><th>run</th><th class=\"n\">"
                         "warm-up peak</th><th class=\"n\">steady-state peak</th><th class=\"n\">"
                         "warm-up driver calls</th><th class=\"n\">steady driver calls per "
                         "phase</th><th class=\"n\">steady phases</th></tr></thead>\n<tbody>\n");
    g_string_append(out, rows->str);
    g_string_append(out, "</tbody></table></div>\n");
    return TRUE;
}

gboolean
report_write_answer(GString *out, const ReportContext *ctx, const FsimPlotGroup *group,
                    GError **error)
{
    Answer a;
    g_autofree char *sentence = report_answer_sentence(ctx, group, error);

    if (sentence == NULL)
        return FALSE;
    answer_find(ctx, group, &a);
    g_string_append(out, "<p class=\"verdict\">");
    report_esc(out, sentence);
    g_string_append(out, "</p>\n<h3>What each run needs</h3>\n");
    if (!write_needs_table(out, ctx, group, &a, error))
        return FALSE;
    report_write_figure(out, report_find_plot(ctx->files, group->number, "compare", -1),
                        "The capacity each run needs (needed_bytes); the dashed line is the lower "
                        "bound (the peak of requested memory), which no allocator can beat; runs "
                        "that ran out of memory are hatched.");
    return report_write_pools(out, ctx, group, error) && write_phases(out, ctx, group, error);
}
