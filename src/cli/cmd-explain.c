/* SPDX-License-Identifier: MIT */
/*
 * fragsim explain TRACE [-p POLICY] [-c ALLOC_CONF] [-d DEVICE] [--trace-device N] [--at EVENT]...
 *                       [--plot FILE] [--json] [--paranoid]
 *
 * Why reserved memory exceeds live memory at the moments that matter, and which allocations
 * cause it (explain.h, docs/explain.md).
 */
#include <glib.h>

#include <errno.h>
#include <stdlib.h>

#include "fragsim/explain.h"

#include "cli.h"

static char *
percent(uint64_t part, uint64_t whole)
{
    return whole == 0 ? g_strdup("")
                      : g_strdup_printf("%.1f%%", 100.0 * (double)part / (double)whole);
}

static void
print_breakdown(const FsimBreakdown *b, uint64_t reserved, uint64_t largest_free)
{
    static const char *const headers[] = {"part", "bytes", "size", "share"};
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(headers), headers);
    const struct {
        const char *name;
        uint64_t value;
    } rows[] = {
        {"live requested", b->live_requested_bytes},
        {"rounding", b->rounding_bytes},
        {"free, releasable", b->free_releasable_bytes},
        {"free, pinned", b->free_pinned_bytes},
        {"reserved", reserved},
        {"largest free block", largest_free},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(rows); i++) {
        g_autofree char *size = fsim_format_size(rows[i].value);
        g_autofree char *share = i < 4 ? percent(rows[i].value, reserved) : g_strdup("");

        fsim_table_add(table, rows[i].name);
        fsim_table_addf(table, "%" G_GUINT64_FORMAT, rows[i].value);
        fsim_table_add(table, size);
        fsim_table_add(table, share);
    }
    fsim_table_print(table);
}

/* The pins, one line each: pinned and live bytes, blocks, the site, then the block sizes.  Not a
 * FsimTable: sites and size lists are text that may start with a digit. */
static void
print_pins(const GPtrArray *pins)
{
    guint shown = MIN(pins->len, 10);

    if (pins->len == 0)
        return;
    g_print("pins: live blocks that keep free memory from going back to the device, by site\n");
    g_print("  %10s  %10s  %6s  %s\n", "pinned", "live", "blocks", "site (block sizes)");
    for (guint i = 0; i < shown; i++) {
        const FsimPinSite *site = g_ptr_array_index(pins, i);
        g_autofree char *pinned = fsim_format_size(site->pinned_bytes);
        g_autofree char *live = fsim_format_size(site->live_bytes);
        g_autoptr(GString) sizes = g_string_new(NULL);

        for (guint k = 0; k < site->sizes->len && k < 4; k++) {
            g_autofree char *size = fsim_format_size(g_array_index(site->sizes, uint64_t, k));

            g_string_append_printf(sizes, "%s%s", k > 0 ? ", " : "", size);
        }
        if (site->sizes->len > 4)
            g_string_append_printf(sizes, " and %u more", site->sizes->len - 4);
        g_print("  %10s  %10s  %6" G_GUINT64_FORMAT "  %s (%s)\n", pinned, live, site->count,
                site->site, sizes->str);
    }
    if (pins->len > shown)
        g_print("  ... and %u more sites (--json lists them all)\n", pins->len - shown);
}

static void
print_alternatives(const GPtrArray *alternatives)
{
    static const char *const headers[] = {"policy", "config", "reserved here", "pinned here",
                                          "needed"};
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(headers), headers);

    if (alternatives == NULL || alternatives->len == 0)
        return;
    g_print("what would change it:\n");
    for (guint i = 0; i < alternatives->len; i++) {
        const FsimAlternative *a = g_ptr_array_index(alternatives, i);
        g_autofree char *reserved =
            a->has_moment ? fsim_format_size(a->reserved_bytes) : g_strdup("(not reached)");
        g_autofree char *pinned =
            a->has_moment ? fsim_format_size(a->breakdown.free_pinned_bytes) : g_strdup("");
        g_autofree char *needed =
            a->needed_bytes >= 0 ? fsim_format_size((uint64_t)a->needed_bytes) : g_strdup("?");

        fsim_table_add(table, a->policy);
        fsim_table_add(table, *a->config != '\0' ? a->config : "(defaults)");
        fsim_table_addf(table, "%s%s", reserved, a->has_moment && a->oom ? " (OOM)" : "");
        fsim_table_add(table, pinned);
        fsim_table_add(table, needed);
    }
    fsim_table_print(table);
    for (guint i = 0; i < alternatives->len; i++) {
        const FsimAlternative *a = g_ptr_array_index(alternatives, i);

        if (a->advice != NULL && *a->advice != '\0')
            g_print("  * %s\n", a->advice);
    }
}

/* Per pool when a private pool (a CUDA graph's, a MemPool's) holds memory, and the one whose
 * free memory is most pinned named: the pool that fragments. */
static void
print_pools(const GArray *pools)
{
    const FsimPoolBreakdown *worst = NULL;

    if (pools == NULL || pools->len == 0)
        return;
    g_print("pools:\n");
    for (guint i = 0; i < pools->len; i++) {
        const FsimPoolBreakdown *p = &g_array_index(pools, FsimPoolBreakdown, i);
        g_autofree char *name = p->private_pool
                                    ? g_strdup_printf("private pool %" G_GUINT64_FORMAT, p->pool_id)
                                    : g_strdup("default pools");
        g_autofree char *reserved = fsim_format_size(p->reserved_bytes);
        g_autofree char *live = fsim_format_size(p->breakdown.live_requested_bytes);
        g_autofree char *releasable = fsim_format_size(p->breakdown.free_releasable_bytes);
        g_autofree char *pinned = fsim_format_size(p->breakdown.free_pinned_bytes);

        g_print("  %-20s %10s reserved: %s live, %s releasable, %s pinned\n", name, reserved, live,
                releasable, pinned);
        if (p->breakdown.free_pinned_bytes > 0 &&
            (worst == NULL || p->breakdown.free_pinned_bytes > worst->breakdown.free_pinned_bytes))
            worst = p;
    }
    if (worst != NULL) {
        g_autofree char *pinned = fsim_format_size(worst->breakdown.free_pinned_bytes);

        if (worst->private_pool)
            g_print("private pool %" G_GUINT64_FORMAT " fragments most: %s of its free memory is "
                    "pinned (a pool's memory goes back only once its graphs or MemPool are gone)\n",
                    worst->pool_id, pinned);
        else
            g_print("the default pools fragment most: %s pinned\n", pinned);
    }
}

static void
print_moment(const FsimMoment *m)
{
    g_autofree char *reserved = fsim_format_size(m->reserved_bytes);
    g_autofree char *at = m->event >= 0 ? g_strdup_printf("event %" G_GINT64_FORMAT, m->event)
                                        : g_strdup("trace start");
    const char *what = m->kind == FSIM_MOMENT_PEAK ? "peak of reserved memory"
                       : m->kind == FSIM_MOMENT_OOM
                           ? (m->request.simulated ? "out of memory" : "recorded out of memory")
                           : "requested moment";

    g_print("\n%s at %s (time %" G_GUINT64_FORMAT " ns): %s reserved\n", what, at, m->time_ns,
            reserved);
    print_breakdown(&m->breakdown, m->reserved_bytes, m->largest_free_bytes);
    if (m->has_request)
        g_print("request: %s\n", m->request.reason);
    print_pools(m->pools);
    print_pins(m->pins);
    print_alternatives(m->alternatives);
}

/* Each pool's share of the needed capacity, when the run has private pools. */
static void
print_pool_needs(const FsimExplanation *e)
{
    g_autofree char *peak = fsim_format_size(e->pool_needs_peak);

    if (e->pool_needs == NULL)
        return;
    g_print("needed by pool (shares of the peak, %s, of a replay on the needed capacity):\n", peak);
    for (guint i = 0; i < e->pool_needs->len; i++) {
        const FsimPoolNeed *p = &g_array_index(e->pool_needs, FsimPoolNeed, i);
        g_autofree char *needed = fsim_format_size(p->needed_bytes);
        g_autofree char *own = fsim_format_size(p->peak_reserved_bytes);
        g_autofree char *name = p->pool != 0
                                    ? g_strdup_printf("private pool %" G_GUINT64_FORMAT, p->pool)
                                    : g_strdup("default pools");

        g_print("  %s: %s (its own peak %s)\n", name, needed, own);
    }
}

static void
print_text(const FsimExplanation *e)
{
    g_autofree char *capacity = fsim_format_size(e->capacity_bytes);

    g_print("%s, trace device %u: %s%s%s on %s (%s usable)\n", e->trace, e->trace_device, e->policy,
            *e->config != '\0' ? " with " : "", e->config, e->device, capacity);
    if (e->needed_bytes >= 0) {
        g_autofree char *needed = fsim_format_size((uint64_t)e->needed_bytes);

        g_print("needed capacity (no OOM on this card or any larger): %s\n", needed);
    }
    print_pool_needs(e);
    if (!e->described)
        g_print("note: policy '%s' does not describe its segments: its free memory is counted "
                "as pinned and no pins are named\n",
                e->policy);
    for (guint i = 0; i < e->moments->len; i++)
        print_moment(g_ptr_array_index(e->moments, i));
}

static gboolean
parse_events(char **texts, GArray **out, GError **error)
{
    *out = NULL;
    if (texts == NULL)
        return TRUE;
    *out = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    for (guint i = 0; texts[i] != NULL; i++) {
        guint64 value;

        if (!g_ascii_string_to_unsigned(texts[i], 10, 0, G_MAXINT64, &value, NULL)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "--at: '%s' is not an event index (a non-negative integer)", texts[i]);
            return FALSE;
        }
        g_array_append_val(*out, value);
    }
    return TRUE;
}

/* --plot: draw the segments at the first OOM of @e, else at its peak, into @path. */
static gboolean
explain_plot(const FsimExplanation *e, const char *path, const char *gnuplot, GError **error)
{
    guint chosen = 0;

    for (guint i = e->moments->len; i-- > 0;) {
        const FsimMoment *m = g_ptr_array_index(e->moments, i);
        const FsimMoment *best = g_ptr_array_index(e->moments, chosen);

        if (m->kind == FSIM_MOMENT_OOM ||
            (m->kind == FSIM_MOMENT_PEAK && best->kind != FSIM_MOMENT_OOM))
            chosen = i;
    }
    return e->moments->len == 0 || fsim_explain_plot(e, chosen, path, gnuplot, error);
}

/* The explanation @e as one JSON object on stdout with --json (@json), else as text. */
static void
explain_print(const FsimExplanation *e, gboolean json)
{
    if (json) {
        g_autoptr(FsimJsonWriter) writer = fsim_cli_json_new();

        fsim_explanation_write_json(e, writer);
        fsim_cli_json_print(writer);
    } else
        print_text(e);
}

int
fsim_cmd_explain(int argc, char **argv)
{
    g_autofree char *policy = NULL;
    g_autofree char *alloc_conf = NULL;
    g_autofree char *device = NULL;
    g_autofree char *plot = NULL;
    g_autofree char *gnuplot = NULL;
    g_auto(GStrv) at_texts = NULL;
    gint64 trace_device = -1;
    gboolean json = FALSE;
    gboolean paranoid = FALSE;
    gboolean no_alternatives = FALSE;
    GOptionEntry entries[] = {
        {"policy", 'p', 0, G_OPTION_ARG_STRING, &policy,
         "The policy (default: the snapshot's recorded settings, else caching)", "POLICY"},
        {"alloc-conf", 'c', 0, G_OPTION_ARG_STRING, &alloc_conf,
         "PYTORCH_CUDA_ALLOC_CONF (default: the snapshot's recorded settings)", "STRING"},
        {"device", 'd', 0, G_OPTION_ARG_STRING, &device,
         "Modelled GPU (default: the recording GPU as far as a snapshot tells, "
         "else " FSIM_DEVICE_DEFAULT ")",
         "DEVICE"},
        {"trace-device", 0, 0, G_OPTION_ARG_INT64, &trace_device,
         "The device of a multi-GPU trace (default: the first with events)", "N"},
        {"at", 0, 0, G_OPTION_ARG_STRING_ARRAY, &at_texts, "Also explain this event (repeatable)",
         "EVENT"},
        {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot,
         "Draw the segments at the first OOM (else the peak) with gnuplot", "FILE.png|svg"},
        {"gnuplot", 0, 0, G_OPTION_ARG_FILENAME, &gnuplot, "The gnuplot program", "PATH"},
        {"no-alternatives", 0, 0, G_OPTION_ARG_NONE, &no_alternatives,
         "Do not replay other policies and settings", NULL},
        FSIM_CLI_JSON_ENTRY(&json),
        {"paranoid", 0, 0, G_OPTION_ARG_NONE, &paranoid,
         "Check after every event that the breakdown adds up to the reserved bytes", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimExplanation) explanation = NULL;
    g_autoptr(GArray) at = NULL;
    FsimExplainOptions options;
    GError *error = NULL;

    if (!fsim_cli_parse_args(
            "explain", "TRACE - explain why reserved memory exceeds live memory, and what pins it",
            entries,
            "Explains the peak of reserved memory, every OOM (simulated or recorded) and each "
            "--at\n"
            "event: reserved = live requested + rounding + free releasable + free pinned, the\n"
            "largest free block, the request at an OOM, and the allocation sites whose live "
            "blocks\n"
            "pin free memory.  docs/explain.md defines each term.\n"
            "Exit status: 0 success, 1 bad input, 2 usage error.",
            "TRACE", &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (!parse_events(at_texts, &at, &error))
        return fsim_cli_fail("explain", error);
    if (plot != NULL && !g_str_has_suffix(plot, ".png") && !g_str_has_suffix(plot, ".svg"))
        return fsim_cli_usage_error("explain", "--plot: '%s' must end in .png or .svg", plot);
    trace = fsim_trace_open(argv[1], &error);
    if (trace == NULL)
        return fsim_cli_fail("explain", error);
    fsim_explain_options_init(&options);
    options.policy = policy;
    options.alloc_conf = alloc_conf;
    options.device = device;
    options.trace_device = trace_device;
    options.at = at;
    options.paranoid = paranoid;
    options.alternatives = !no_alternatives;
    explanation = fsim_explain_trace(trace, &options, &error);
    if (explanation == NULL)
        return fsim_cli_fail("explain", error);
    if (plot != NULL && !explain_plot(explanation, plot, gnuplot, &error))
        return fsim_cli_fail("explain", error);
    explain_print(explanation, json);
    return FSIM_EXIT_OK;
}
