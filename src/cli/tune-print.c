/* SPDX-License-Identifier: MIT */
/*
 * `fragsim tune`'s output: the default's figures, the best settings with what each changes, and
 * the line to paste (or "keep the default"); as text or as one JSON object.
 */
#include "tune-print.h"

#include <glib.h>

#include <string.h>

#include "cli.h"

char *
tune_env_line(const TuneJob *job, const char *config, gboolean shell)
{
    g_autofree char *word = shell ? fsim_format_shell_word(config) : g_strdup(config);

    return g_strdup_printf("%s=%s", fsim_platform_alloc_conf_env(job->platform), word);
}

static const FsimTuneRank *
job_rank(const TuneJob *job, guint index)
{
    return &g_array_index(job->ranks, FsimTuneRank, index);
}

/* `TRACE device N` of a rank. */
static char *
rank_name(const TuneJob *job, guint index)
{
    const FsimTuneRank *rank = job_rank(job, index);

    return g_strdup_printf("%s device %u", rank->trace, rank->trace_device);
}

/* The default's saving over @c (0 when @c needs as much or more). */
static uint64_t
saving(const FsimTuneResult *result, const FsimTuneCandidate *c)
{
    uint64_t base = result->default_candidate->needed_bytes;

    return base > c->needed_bytes ? base - c->needed_bytes : 0;
}

/* ---- text ------------------------------------------------------------------------------------ */

static void
print_header(const TuneJob *job, const FsimTuneResult *result)
{
    g_autofree char *capacity = fsim_format_size(job->device.capacity_bytes);
    g_autofree char *granularity = fsim_format_size(result->granularity);

    if (job->ranks->len == 1)
        g_print("%s, trace device %u, ", job_rank(job, 0)->trace, job_rank(job, 0)->trace_device);
    else
        g_print("a job of %u ranks (%u trace%s), ", job->ranks->len, job->paths->len,
                job->paths->len == 1 ? "" : "s");
    g_print("costs on %s (%s usable), to %s\n", job->device.name, capacity, granularity);
    g_print("%u settings searched in full, %u more ruled out by one replay each%s, in %.2f s\n",
            result->candidates->len, result->screened_out,
            result->failed > 0 ? " (some could not be searched)" : "", result->seconds);
    if (result->budget_exhausted)
        g_print("The time budget ran out: these are the best settings found so far.\n");
}

/* "@verb X (decided by RANK; the ranks spread over Y)" (the rest for a job of several ranks). */
static char *
describe_need(const TuneJob *job, const FsimTuneCandidate *c, const char *verb)
{
    g_autofree char *needs = fsim_format_size(c->needed_bytes);
    g_autofree char *worst = NULL;
    g_autofree char *spread = NULL;

    if (job->ranks->len == 1)
        return g_strdup_printf("%s %s", verb, needs);
    worst = rank_name(job, c->worst);
    spread = fsim_format_size(c->spread_bytes);
    return g_strdup_printf("%s %s (decided by %s; the ranks spread over %s)", verb, needs, worst,
                           spread);
}

static void
print_baseline(const TuneJob *job, const FsimTuneResult *result)
{
    const FsimTuneCandidate *d = result->default_candidate;
    const FsimMetrics *m = &d->ranks[d->worst].metrics;
    g_autofree char *need = describe_need(job, d, "needs");
    g_autofree char *requested = fsim_format_size(m->peak_requested_bytes);
    g_autofree char *time = fsim_cli_format_time_ns(d->cost_ns);

    g_print("\nPyTorch's default %s: its peak of live requests is %s; on %s it spends %s in "
            "%" G_GUINT64_FORMAT " driver calls.\n",
            need, requested, job->device.name, time, d->driver_calls);
    if (result->recorded != NULL) {
        g_autofree char *rec = describe_need(job, result->recorded, "need");

        g_print("The recorded settings (%s) %s.\n", result->recorded->config, rec);
    }
}

/* Whether @c's figures (capacity, per-rank needs, cost) equal those of a setting listed before it
 * in @list: its other knobs change nothing the search measures. */
static gboolean
same_outcome(const GPtrArray *list, guint n, const FsimTuneCandidate *c, guint n_ranks)
{
    for (guint i = 0; i < n; i++) {
        const FsimTuneCandidate *o = g_ptr_array_index(list, i);
        gboolean same = o->needed_bytes == c->needed_bytes && o->cost_ns == c->cost_ns &&
                        o->driver_calls == c->driver_calls;

        for (guint r = 0; r < n_ranks && same; r++)
            same = o->ranks[r].needed_bytes == c->ranks[r].needed_bytes;
        if (same)
            return TRUE;
    }
    return FALSE;
}

GPtrArray *
tune_shown(const FsimTuneResult *result)
{
    GPtrArray *shown = g_ptr_array_new();

    if (result->recommended != NULL)
        g_ptr_array_add(shown, (gpointer)(guintptr)result->recommended);
    for (guint i = 0; i < result->candidates->len && shown->len < TUNE_TOP; i++) {
        const FsimTuneCandidate *c = g_ptr_array_index(result->candidates, i);

        if (c != result->recommended && !same_outcome(shown, shown->len, c, result->n_ranks))
            g_ptr_array_add(shown, (gpointer)(guintptr)c);
    }
    return shown;
}

static void
print_candidates(const FsimTuneResult *result)
{
    static const char *const headers[] = {
        "#", "setting", "needs", "saves", "modelled time", "driver calls", "found by"};
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(headers), headers);
    g_autoptr(GPtrArray) shown = tune_shown(result);

    g_print("\nThe best settings (least capacity, then least modelled time on the card; one of "
            "each outcome):\n");
    for (guint i = 0; i < shown->len; i++) {
        const FsimTuneCandidate *c = g_ptr_array_index(shown, i);
        g_autofree char *needs = fsim_format_size(c->needed_bytes);
        g_autofree char *saves = fsim_format_size(saving(result, c));
        g_autofree char *time = fsim_cli_format_time_ns(c->cost_ns);

        fsim_table_addf(table, "%u", i + 1);
        fsim_table_add(table, c->config[0] != '\0' ? c->config : "(PyTorch's default)");
        fsim_table_add(table, needs);
        fsim_table_add(table, saving(result, c) > 0 ? saves : "-");
        fsim_table_add(table, time);
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, c->driver_calls);
        fsim_table_add(table, c->origin);
    }
    fsim_table_print(table);
    for (guint i = 0; i < shown->len; i++) {
        const FsimTuneCandidate *c = g_ptr_array_index(shown, i);
        g_autofree char *changes = fsim_tune_describe(&c->conf);

        if (changes[0] != '\0')
            g_print("  %u: %s\n", i + 1, changes);
    }
}

static void
print_ranks(const TuneJob *job, const FsimTuneResult *result)
{
    static const char *const headers[] = {"rank", "trace", "device", "default needs",
                                          "recommended needs"};
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(headers), headers);
    const FsimTuneCandidate *d = result->default_candidate;
    const FsimTuneCandidate *r = result->recommended != NULL ? result->recommended : d;

    g_print("\nPer rank:\n");
    for (guint i = 0; i < job->ranks->len; i++) {
        g_autofree char *before = fsim_format_size(d->ranks[i].needed_bytes);
        g_autofree char *after = fsim_format_size(r->ranks[i].needed_bytes);

        fsim_table_addf(table, "%u", i);
        fsim_table_add(table, job_rank(job, i)->trace);
        fsim_table_addf(table, "%u", job_rank(job, i)->trace_device);
        fsim_table_addf(table, "%s%s", before, i == d->worst ? " (worst)" : "");
        fsim_table_addf(table, "%s%s", after, i == r->worst ? " (worst)" : "");
    }
    fsim_table_print(table);
}

void
tune_print_text(const TuneJob *job, const FsimTuneResult *result)
{
    const FsimTuneCandidate *r = result->recommended;
    g_autofree char *granularity = fsim_format_size(result->granularity);

    print_header(job, result);
    print_baseline(job, result);
    print_candidates(result);
    if (job->ranks->len > 1)
        print_ranks(job, result);
    if (r == NULL) {
        g_print("\nKeep the default: no setting needs more than %s less than PyTorch's default.\n",
                granularity);
        return;
    }
    g_autofree char *needs = fsim_format_size(r->needed_bytes);
    g_autofree char *saves = fsim_format_size(saving(result, r));
    g_autofree char *line = tune_env_line(job, r->config, TRUE);
    g_print("\nRecommended: it needs %s, %s (%.1f%%) less than PyTorch's default:\n", needs, saves,
            100.0 * (double)saving(result, r) / (double)result->default_candidate->needed_bytes);
    g_print("%s\n", line);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

/* The members of a setting's object. */
static void
json_candidate_members(FsimJsonWriter *b, const TuneJob *job, const FsimTuneResult *result,
                       const FsimTuneCandidate *c)
{
    const FsimMetrics *m = &c->ranks[c->worst].metrics;
    g_autofree char *label = fsim_run_label("caching", c->config);
    g_autofree char *changes = fsim_tune_describe(&c->conf);
    g_autofree char *env = tune_env_line(job, c->config, FALSE);
    gboolean proven = TRUE;

    for (guint i = 0; i < job->ranks->len; i++)
        proven = proven && c->ranks[i].proven;
    fsim_cli_json_string(b, "config", c->config);
    fsim_cli_json_string(b, "label", label);
    fsim_cli_json_string(b, "env", env);
    fsim_cli_json_string(b, "changes", changes);
    fsim_cli_json_string(b, "origin", c->origin);
    fsim_cli_json_int(b, "needed_bytes", (int64_t)c->needed_bytes);
    fsim_cli_json_int(b, "saving_bytes", (int64_t)saving(result, c));
    fsim_cli_json_bool(b, "proven", proven);
    fsim_cli_json_int(b, "worst_rank", c->worst);
    fsim_cli_json_int(b, "spread_bytes", (int64_t)c->spread_bytes);
    fsim_cli_json_int(b, "peak_requested_bytes", (int64_t)m->peak_requested_bytes);
    fsim_cli_json_int(b, "modelled_alloc_time_ns", (int64_t)c->cost_ns);
    fsim_cli_json_int(b, "driver_calls", (int64_t)c->driver_calls);
    fsim_cli_json_begin_array(b, "ranks");
    for (guint i = 0; i < job->ranks->len; i++) {
        fsim_json_begin_object(b);
        fsim_cli_json_string(b, "trace", job_rank(job, i)->trace);
        fsim_cli_json_int(b, "trace_device", job_rank(job, i)->trace_device);
        fsim_cli_json_int(b, "needed_bytes", (int64_t)c->ranks[i].needed_bytes);
        fsim_cli_json_bool(b, "proven", c->ranks[i].proven);
        fsim_cli_json_int(b, "modelled_alloc_time_ns",
                          (int64_t)c->ranks[i].cost.modelled_alloc_time_ns);
        fsim_json_end_object(b);
    }
    fsim_json_end_array(b);
}

static void
json_candidate(FsimJsonWriter *b, const TuneJob *job, const FsimTuneResult *result,
               const FsimTuneCandidate *c)
{
    fsim_json_begin_object(b);
    json_candidate_members(b, job, result, c);
    fsim_json_end_object(b);
}

static void
json_recommended(FsimJsonWriter *b, const TuneJob *job, const FsimTuneResult *result)
{
    const FsimTuneCandidate *r =
        result->recommended != NULL ? result->recommended : result->default_candidate;

    fsim_cli_json_begin_object(b, "recommended");
    json_candidate_members(b, job, result, r);
    fsim_cli_json_bool(b, "keep_default", result->recommended == NULL);
    if (job->run_id >= 0) {
        fsim_cli_json_int(b, "default_run_id", job->default_run_id);
        fsim_cli_json_int(b, "run_id", job->run_id);
    }
    fsim_json_end_object(b);
}

void
tune_print_json(const TuneJob *job, const FsimTuneResult *result)
{
    g_autoptr(FsimJsonWriter) b = fsim_cli_json_new();
    g_autoptr(GPtrArray) shown = tune_shown(result);

    fsim_cli_json_string(b, "trace", g_ptr_array_index(job->paths, 0));
    fsim_cli_json_begin_array(b, "traces");
    for (guint i = 0; i < job->paths->len; i++)
        fsim_json_add_string_value(b, g_ptr_array_index(job->paths, i));
    fsim_json_end_array(b);
    fsim_cli_json_string(b, "device", job->device.name);
    fsim_cli_json_int(b, "capacity_bytes", (int64_t)job->device.capacity_bytes);
    fsim_cli_json_int(b, "granularity_bytes", (int64_t)result->granularity);
    fsim_cli_json_int(b, "searched", result->candidates->len);
    fsim_cli_json_int(b, "screened_out", result->screened_out);
    fsim_cli_json_int(b, "failed", result->failed);
    fsim_cli_json_bool(b, "budget_exhausted", result->budget_exhausted);
    fsim_cli_json_double(b, "seconds", result->seconds);
    fsim_json_set_member_name(b, "default");
    json_candidate(b, job, result, result->default_candidate);
    fsim_json_set_member_name(b, "recorded");
    if (result->recorded != NULL)
        json_candidate(b, job, result, result->recorded);
    else
        fsim_json_add_null_value(b);
    fsim_cli_json_begin_array(b, "candidates");
    for (guint i = 0; i < shown->len; i++)
        json_candidate(b, job, result, g_ptr_array_index(shown, i));
    fsim_json_end_array(b);
    json_recommended(b, job, result);
    fsim_cli_json_print(b);
}
