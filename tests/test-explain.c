/* SPDX-License-Identifier: MIT */
/*
 * Tests of `fragsim explain`: the worked cases of PyTorch's notes on fragmentation, the exact
 * breakdown at every moment of every shared snapshot, pins named by Python source lines, the
 * JSON schema and the picture.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>
#include <sys/stat.h>

#include "fragsim/explain.h"
#include "fragsim/fragsim.h"

#include "test-util.h"

#define MiB ((uint64_t)1 << 20)

/* A text trace in a temporary directory; @dir receives the directory to remove. */
static char *
write_trace(const char *contents, char **dir)
{
    char *path;

    *dir = fsim_test_tmp_dir();
    path = g_build_filename(*dir, "case.trace", NULL);
    g_assert_true(g_file_set_contents(path, contents, -1, NULL));
    return path;
}

static FsimExplanation *
explain_text(const char *contents, const char *policy, gboolean paranoid)
{
    g_autofree char *dir = NULL;
    g_autofree char *path = write_trace(contents, &dir);
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GError) error = NULL;
    FsimExplanation *e;
    FsimExplainOptions options;

    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    fsim_explain_options_init(&options);
    options.policy = policy;
    options.paranoid = paranoid;
    e = fsim_explain_trace(trace, &options, &error);
    g_assert_no_error(error);
    g_assert_nonnull(e);
    fsim_test_remove_tree(dir);
    return e;
}

static const FsimMoment *
find_moment(const FsimExplanation *e, FsimMomentKind kind)
{
    for (guint i = 0; i < e->moments->len; i++) {
        const FsimMoment *m = g_ptr_array_index(e->moments, i);

        if (m->kind == kind)
            return m;
    }
    g_assert_not_reached();
    return NULL;
}

static void
assert_adds_up(const FsimExplanation *e)
{
    for (guint i = 0; i < e->moments->len; i++) {
        const FsimMoment *m = g_ptr_array_index(e->moments, i);
        uint64_t pinned = 0;

        g_assert_cmpuint(fsim_breakdown_total(&m->breakdown), ==, m->reserved_bytes);
        for (guint k = 0; k < m->pins->len; k++)
            pinned += ((const FsimPinSite *)g_ptr_array_index(m->pins, k))->pinned_bytes;
        g_assert_cmpuint(pinned, <=, m->breakdown.free_pinned_bytes);
    }
}

/* 8 x 16 MiB allocated and freed, then 4 x 32 MiB: eight empty 16 MiB segments are cached. */
static void
test_devlog_caching(void)
{
    g_autoptr(GString) text = g_string_new("fragsim-trace v1\n");
    g_autoptr(FsimExplanation) e = NULL;
    const FsimMoment *peak;
    uint64_t t = 0;

    for (int i = 1; i <= 8; i++)
        g_string_append_printf(text, "%" G_GUINT64_FORMAT " alloc %d 16777216 0\n", ++t, i);
    for (int i = 1; i <= 8; i++)
        g_string_append_printf(text, "%" G_GUINT64_FORMAT " free %d 0\n", ++t, i);
    for (int i = 11; i <= 14; i++)
        g_string_append_printf(text, "%" G_GUINT64_FORMAT " alloc %d 33554432 0\n", ++t, i);
    e = explain_text(text->str, NULL, TRUE);
    g_assert_cmpstr(e->policy, ==, "caching");
    g_assert_true(e->described);
    peak = find_moment(e, FSIM_MOMENT_PEAK);
    g_assert_cmpint(peak->event, ==, 21); /* the last line: the 4th 32 MiB alloc */
    g_assert_cmpuint(peak->reserved_bytes, ==, 256 * MiB);
    g_assert_cmpuint(peak->breakdown.live_requested_bytes, ==, 128 * MiB);
    g_assert_cmpuint(peak->breakdown.rounding_bytes, ==, 0);
    g_assert_cmpuint(peak->breakdown.free_releasable_bytes, ==, 128 * MiB);
    g_assert_cmpuint(peak->breakdown.free_pinned_bytes, ==, 0);
    g_assert_cmpuint(peak->largest_free_bytes, ==, 16 * MiB);
    g_assert_cmpuint(peak->segments->len, ==, 12);
    g_assert_cmpuint(peak->pins->len, ==, 0);
    assert_adds_up(e);
}

/* Four 16 MiB under expandable segments, the 1st and 3rd freed, then 32 MiB: the holes are
 * pinned by the live 16 MiB blocks that share their 20 MiB pages. */
static void
test_devlog_expandable(void)
{
    static const char text[] = "fragsim-trace v1\n"
                               "1 alloc 1 16777216 0\n"
                               "2 alloc 2 16777216 0\n"
                               "3 alloc 3 16777216 0\n"
                               "4 alloc 4 16777216 0\n"
                               "5 free 1 0\n"
                               "6 free 3 0\n"
                               "7 mark step-2\n"
                               "8 alloc 5 33554432 0\n";
    g_autoptr(FsimExplanation) e = explain_text(text, "expandable", TRUE);
    const FsimMoment *peak = find_moment(e, FSIM_MOMENT_PEAK);
    const FsimPinSite *site;

    /* pages of 20 MiB mapped as the segment grows: [0, 100) MiB once the 32 MiB block sits at
     * [64, 96) */
    g_assert_cmpint(peak->event, ==, 9);
    g_assert_cmpuint(peak->reserved_bytes, ==, 100 * MiB);
    g_assert_cmpuint(peak->breakdown.live_requested_bytes, ==, 64 * MiB);
    g_assert_cmpuint(peak->breakdown.rounding_bytes, ==, 0);
    g_assert_cmpuint(peak->breakdown.free_releasable_bytes, ==, 0);
    g_assert_cmpuint(peak->breakdown.free_pinned_bytes, ==, 36 * MiB);
    g_assert_cmpuint(peak->largest_free_bytes, ==, 16 * MiB);
    /* [0,16) goes to block 2 alone; [32,48) is cut at the page boundary 40 between blocks 2 and
     * 4; the 4 MiB tail of the last page to the 32 MiB block */
    g_assert_cmpuint(peak->pins->len, ==, 2);
    site = g_ptr_array_index(peak->pins, 0);
    g_assert_cmpstr(site->site, ==, "16.0 MiB on stream 0, before any mark");
    g_assert_cmpuint(site->count, ==, 2);
    g_assert_cmpuint(site->sizes->len, ==, 1);
    g_assert_cmpuint(g_array_index(site->sizes, uint64_t, 0), ==, 16 * MiB);
    g_assert_cmpuint(site->live_bytes, ==, 32 * MiB);
    g_assert_cmpuint(site->pinned_bytes, ==, 32 * MiB);
    site = g_ptr_array_index(peak->pins, 1);
    g_assert_cmpstr(site->site, ==, "32.0 MiB on stream 0 after mark step-2");
    g_assert_cmpuint(site->count, ==, 1);
    g_assert_cmpuint(site->pinned_bytes, ==, 4 * MiB);
    assert_adds_up(e);
}

/* An OOM on a small device: the request, and why no free block served it. */
static void
test_oom_request(void)
{
    /* 8 MiB blocks share 20 MiB segments, one per stream; the device holds just those two */
    static const char text[] = "fragsim-trace v1\n"
                               "1 alloc 1 8388608 0\n"
                               "2 alloc 2 8388608 0\n"
                               "3 alloc 3 8388608 1\n"
                               "4 alloc 4 8388608 1\n"
                               "5 free 1 0\n"
                               "6 free 3 1\n"
                               "7 alloc 5 12582912 0\n";
    g_autofree char *dir = NULL;
    g_autofree char *path = write_trace(text, &dir);
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimExplanation) e = NULL;
    FsimExplainOptions options;
    const FsimMoment *oom;

    g_assert_nonnull(trace);
    fsim_explain_options_init(&options);
    options.device = "40MiB";
    e = fsim_explain_trace(trace, &options, &error);
    g_assert_no_error(error);
    oom = find_moment(e, FSIM_MOMENT_OOM);
    g_assert_cmpint(oom->event, ==, 8);
    g_assert_true(oom->has_request);
    g_assert_true(oom->request.simulated);
    g_assert_false(oom->request.recorded);
    g_assert_cmpuint(oom->request.size, ==, 12 * MiB);
    /* stream 0: id 1's 8 MiB hole and the 4 MiB tail; stream 1: the same two */
    g_assert_cmpuint(oom->request.free_blocks_too_small, ==, 2);
    g_assert_cmpuint(oom->request.free_blocks_other_stream, ==, 2);
    g_assert_cmpuint(oom->request.largest_free_same_stream_bytes, ==, 8 * MiB);
    g_assert_cmpuint(oom->breakdown.free_pinned_bytes, ==, 24 * MiB);
    g_assert_nonnull(strstr(oom->request.reason, "too small"));
    g_assert_nonnull(strstr(oom->request.reason, "other streams"));
    assert_adds_up(e);
    fsim_test_remove_tree(dir);
}

/* --at names an event; an event the trace lacks is a usage error. */
static void
test_at(void)
{
    static const char text[] = "fragsim-trace v1\n"
                               "1 alloc 1 1048576 0\n"
                               "2 alloc 2 4194304 0\n"
                               "3 free 1 0\n";
    g_autofree char *dir = NULL;
    g_autofree char *path = write_trace(text, &dir);
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, NULL);
    g_autoptr(GArray) at = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimExplanation) e = NULL;
    FsimExplainOptions options;
    uint64_t event = 4;
    const FsimMoment *m;

    fsim_explain_options_init(&options);
    options.at = at;
    g_array_append_val(at, event);
    e = fsim_explain_trace(trace, &options, &error);
    g_assert_no_error(error);
    m = find_moment(e, FSIM_MOMENT_AT);
    g_assert_cmpint(m->event, ==, 4);
    g_assert_cmpuint(m->breakdown.live_requested_bytes, ==, 4 * MiB);
    /* the small pool's 2 MiB segment holds only a free 1 MiB block now: releasable */
    g_assert_cmpuint(m->breakdown.free_releasable_bytes, ==, 2 * MiB);
    g_clear_pointer(&e, fsim_explanation_free);
    g_array_index(at, uint64_t, 0) = 99;
    e = fsim_explain_trace(trace, &options, &error);
    g_assert_null(e);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    fsim_test_remove_tree(dir);
}

/* Every shared snapshot: every moment adds up, and under --paranoid every event. */
static void
test_shared_snapshots(void)
{
    const char *dir = fsim_test_shared_dir();
    g_autoptr(GDir) d = NULL;
    const char *name;
    guint seen = 0;

    if (dir == NULL) {
        g_test_skip("FRAGSIM_SHARED_TRACES is not set");
        return;
    }
    d = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(d);
    while ((name = g_dir_read_name(d)) != NULL) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autoptr(FsimTrace) trace = NULL;
        g_autoptr(GError) error = NULL;
        gsize n = 0;
        const uint32_t *devices;
        GStatBuf st;

        if (!g_str_has_suffix(name, ".pickle") && !g_str_has_suffix(name, ".pkl"))
            continue;
        g_assert_cmpint(g_stat(path, &st), ==, 0);
        trace = fsim_trace_open(path, &error);
        g_assert_no_error(error);
        devices = fsim_trace_devices(trace, &n);
        for (gsize i = 0; i < n; i++) {
            g_autoptr(FsimExplanation) e = NULL;
            FsimExplainOptions options;

            fsim_explain_options_init(&options);
            options.trace_device = devices[i];
            /* every event of the smaller snapshots; the moments of all */
            options.paranoid = st.st_size < 1500000;
            e = fsim_explain_trace(trace, &options, &error);
            if (error != NULL)
                g_test_message("%s device %u: %s", name, devices[i], error->message);
            g_assert_no_error(error);
            g_assert_true(e->described);
            g_assert_cmpuint(e->moments->len, >, 0);
            assert_adds_up(e);
        }
        seen++;
    }
    g_assert_cmpuint(seen, >=, 9);
}

/* Every registered policy, on a trace that fragments: the breakdown adds up after every event
 * (--paranoid), with the policy's own description or without one. */
static void
test_every_policy(void)
{
    g_autoptr(GString) text = g_string_new("fragsim-trace v1\n");
    g_autoptr(GRand) rand = g_rand_new_with_seed(12);
    gsize n = 0;
    const FsimPolicyOps *const *policies = fsim_policy_list(&n);
    uint64_t t = 0;
    gboolean freed[401] = {FALSE};

    for (int i = 1; i <= 400; i++) {
        uint64_t size =
            (uint64_t)g_rand_int_range(rand, 1, 1 << 16) * (g_rand_boolean(rand) ? 512 : 1);

        g_string_append_printf(text, "%" G_GUINT64_FORMAT " alloc %d %" G_GUINT64_FORMAT " %d\n",
                               ++t, i, size, g_rand_int_range(rand, 0, 2));
        if (i > 8 && g_rand_boolean(rand)) {
            int victim = i - g_rand_int_range(rand, 1, 8);

            if (!freed[victim])
                g_string_append_printf(text, "%" G_GUINT64_FORMAT " free %d 0\n", ++t, victim);
            freed[victim] = TRUE;
        }
    }
    for (gsize p = 0; p < n; p++) {
        g_autoptr(FsimExplanation) e = explain_text(text->str, policies[p]->name, TRUE);

        g_assert_cmpuint(e->moments->len, >, 0);
        g_assert_cmpint(e->described, ==, policies[p]->describe != NULL);
        assert_adds_up(e);
    }
}

/* @trace explained under @policy (paranoid) with the moments after its lines @lines. */
static FsimExplanation *
explain_lines(const char *trace, const char *policy, const uint64_t *lines, gsize n)
{
    g_autofree char *dir = NULL;
    g_autofree char *path = write_trace(trace, &dir);
    g_autoptr(FsimTrace) t = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GArray) at = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    FsimExplanation *e;
    FsimExplainOptions options;

    g_array_append_vals(at, lines, (guint)n);
    t = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    fsim_explain_options_init(&options);
    options.policy = policy;
    options.at = at;
    options.paranoid = TRUE;
    e = fsim_explain_trace(t, &options, &error);
    g_assert_no_error(error);
    g_assert_true(e->described);
    fsim_test_remove_tree(dir);
    return e;
}

/* The other policies' own descriptions, worked out by hand on two 1 MiB tensors, the first freed
 * (line 4), then the second (line 5): with one still live the freed one's memory is pinned (it
 * shares bfc's region, buddy's region, async's 2 MiB page, gmlake's 2 MiB small-pool segment, the
 * arena of planner and bestfit); with both freed, the allocators that give memory back (a whole
 * free region for bfc and buddy, whole unused pages for async, a whole free segment for gmlake)
 * could release it all, the arena policies nothing. */
static void
test_other_descriptions(void)
{
    static const struct {
        const char *policy;
        gboolean releases;
    } cases[] = {{"bfc", TRUE},    {"buddy", TRUE},    {"async", TRUE},
                 {"gmlake", TRUE}, {"planner", FALSE}, {"bestfit", FALSE}};
    static const char trace[] = "fragsim-trace v1\n1 alloc 1 1048576 0\n2 alloc 2 1048576 0\n"
                                "3 free 1 0\n4 free 2 0\n";

    for (gsize c = 0; c < G_N_ELEMENTS(cases); c++) {
        const uint64_t lines[] = {4, 5};
        g_autoptr(FsimExplanation) e =
            explain_lines(trace, cases[c].policy, lines, G_N_ELEMENTS(lines));
        const FsimMoment *one = NULL, *none = NULL;

        for (guint i = 0; i < e->moments->len; i++) {
            const FsimMoment *m = g_ptr_array_index(e->moments, i);

            if (m->kind == FSIM_MOMENT_AT && m->event == 4)
                one = m;
            if (m->kind == FSIM_MOMENT_AT && m->event == 5)
                none = m;
        }
        g_assert_nonnull(one);
        g_assert_nonnull(none);
        g_test_message("%s", cases[c].policy);
        g_assert_cmpuint(one->breakdown.live_requested_bytes, ==, FSIM_MiB);
        g_assert_cmpuint(one->breakdown.free_releasable_bytes, ==, 0);
        g_assert_cmpuint(one->breakdown.free_pinned_bytes, >=, FSIM_MiB);
        g_assert_cmpuint(none->breakdown.live_requested_bytes, ==, 0);
        g_assert_cmpuint(none->breakdown.free_pinned_bytes, ==,
                         cases[c].releases ? 0 : none->reserved_bytes);
        g_assert_cmpuint(none->breakdown.free_releasable_bytes + none->breakdown.rounding_bytes, ==,
                         cases[c].releases ? none->reserved_bytes : 0);
    }
}

static const FsimMoment *
moment_at(const FsimExplanation *e, int64_t event)
{
    for (guint i = 0; i < e->moments->len; i++) {
        const FsimMoment *m = g_ptr_array_index(e->moments, i);

        if (m->kind == FSIM_MOMENT_AT && m->event == event)
            return m;
    }
    g_error("no moment at event %" G_GINT64_FORMAT, event);
    return NULL;
}

/* gmlake's stitched block, worked by hand (default frag_limit, 512 MiB): four 512 MiB tensors
 * (four 512 MiB pBlocks), the 1st and 3rd freed (line 7: 1 GiB releasable, two wholly free
 * segments), then 1 GiB - 1 MiB + 1 B, rounded to 1 GiB: no pBlock fits and it is at least the
 * limit, so the two free pBlocks are stitched into a new 1 GiB range outside every segment
 * (line 8): no new memory, 2 GiB reserved = 2 GiB - 1 MiB + 1 live + 1 MiB - 1 rounding, nothing
 * free, and the stitched tensor's pieces are blocks in use of the 1st and 3rd segments.  The 2nd
 * freed (line 9): its segment is releasable, 512 MiB.  The stitched tensor freed (line 10): its
 * pieces are whole free segments again, 1.5 GiB releasable; only the 4th is live. */
static void
test_gmlake_stitched(void)
{
    static const char trace[] = "fragsim-trace v1\n1 alloc 1 536870912 0\n2 alloc 2 536870912 0\n"
                                "3 alloc 3 536870912 0\n4 alloc 4 536870912 0\n5 free 1 0\n"
                                "6 free 3 0\n7 alloc 5 1072693249 0\n8 free 2 0\n9 free 5 0\n";
    const uint64_t lines[] = {7, 8, 9, 10};
    g_autoptr(FsimExplanation) e = explain_lines(trace, "gmlake", lines, G_N_ELEMENTS(lines));
    const uint64_t half = 512 * MiB;
    const FsimMoment *m;

    m = moment_at(e, 7);
    g_assert_cmpuint(m->reserved_bytes, ==, 4 * half);
    g_assert_cmpuint(m->breakdown.live_requested_bytes, ==, 2 * half);
    g_assert_cmpuint(m->breakdown.free_releasable_bytes, ==, 2 * half);
    g_assert_cmpuint(m->breakdown.free_pinned_bytes, ==, 0);
    m = moment_at(e, 8);
    g_assert_cmpuint(m->reserved_bytes, ==, 4 * half);
    g_assert_cmpuint(m->segments->len, ==, 4);
    g_assert_cmpuint(m->breakdown.live_requested_bytes, ==, 4 * half - MiB + 1);
    g_assert_cmpuint(m->breakdown.rounding_bytes, ==, MiB - 1);
    g_assert_cmpuint(m->breakdown.free_releasable_bytes + m->breakdown.free_pinned_bytes, ==, 0);
    m = moment_at(e, 9);
    g_assert_cmpuint(m->breakdown.live_requested_bytes, ==, 3 * half - MiB + 1);
    g_assert_cmpuint(m->breakdown.free_releasable_bytes, ==, half);
    g_assert_cmpuint(m->breakdown.free_pinned_bytes, ==, 0);
    m = moment_at(e, 10);
    g_assert_cmpuint(m->breakdown.live_requested_bytes, ==, half);
    g_assert_cmpuint(m->breakdown.rounding_bytes, ==, 0);
    g_assert_cmpuint(m->breakdown.free_releasable_bytes, ==, 3 * half);
    assert_adds_up(e);
}

/* A private pool's memory is broken down apart (worked by hand): three 16 MiB blocks captured
 * into pool 7 (three 16 MiB segments), the first and third freed after the capture: they stay
 * the pool's, pinned by its reference, 32 MiB; an 8 MiB block outside takes a 20 MiB segment of
 * the default large pool, 12 MiB of it free and pinned.  The parts of each pool add up to it. */
static void
test_pools(void)
{
    static const char trace[] =
        "fragsim-trace v1\n0 pool_begin 7 0\n1 alloc 1 16777216 0\n2 alloc 2 16777216 0\n"
        "3 alloc 3 16777216 0\n4 pool_end 7 0\n5 free 1 0\n6 free 3 0\n7 alloc 4 8388608 0\n"
        "8 free 4 0\n";
    g_autoptr(FsimExplanation) e = explain_text(trace, "caching", TRUE);
    const FsimMoment *peak = find_moment(e, FSIM_MOMENT_PEAK);
    const FsimPoolBreakdown *def, *graph;
    uint64_t total = 0;

    g_assert_cmpuint(peak->pools->len, ==, 2);
    def = &g_array_index(peak->pools, FsimPoolBreakdown, 0);
    graph = &g_array_index(peak->pools, FsimPoolBreakdown, 1);
    g_assert_false(def->private_pool);
    g_assert_true(graph->private_pool);
    g_assert_cmpuint(graph->pool_id, ==, 7);
    g_assert_cmpuint(graph->reserved_bytes, ==, 48 * FSIM_MiB);
    g_assert_cmpuint(graph->breakdown.live_requested_bytes, ==, 16 * FSIM_MiB);
    g_assert_cmpuint(graph->breakdown.free_pinned_bytes, ==, 32 * FSIM_MiB);
    g_assert_cmpuint(graph->breakdown.free_releasable_bytes, ==, 0);
    g_assert_cmpuint(def->reserved_bytes, ==, 20 * FSIM_MiB);
    g_assert_cmpuint(def->breakdown.live_requested_bytes, ==, 8 * FSIM_MiB);
    g_assert_cmpuint(def->breakdown.free_pinned_bytes, ==, 12 * FSIM_MiB);
    for (guint i = 0; i < peak->pools->len; i++) {
        const FsimPoolBreakdown *p = &g_array_index(peak->pools, FsimPoolBreakdown, i);

        g_assert_cmpuint(fsim_breakdown_total(&p->breakdown), ==, p->reserved_bytes);
        total += p->reserved_bytes;
    }
    g_assert_cmpuint(total, ==, peak->reserved_bytes);
    g_assert_null(e->pool_needs); /* no alternatives asked for: no needed capacity */

    /* with the alternatives, each pool's share of the needed capacity: 68 MiB (on less, the
     * 8 MiB request finds nothing to release: pool 7 is still referenced), 20 MiB of it the
     * default pools' and 48 MiB pool 7's */
    {
        g_autofree char *dir = NULL;
        g_autofree char *path = write_trace(trace, &dir);
        g_autoptr(FsimTrace) t = fsim_trace_open(path, NULL);
        g_autoptr(FsimExplanation) with = NULL;
        g_autoptr(GError) error = NULL;
        FsimExplainOptions options;

        fsim_explain_options_init(&options);
        options.policy = "caching";
        options.alternatives = TRUE;
        with = fsim_explain_trace(t, &options, &error);
        g_assert_no_error(error);
        g_assert_cmpint(with->needed_bytes, ==, 68 * FSIM_MiB);
        g_assert_nonnull(with->pool_needs);
        g_assert_cmpuint(with->pool_needs->len, ==, 2);
        g_assert_cmpuint(with->pool_needs_peak, ==, 68 * FSIM_MiB);
        g_assert_cmpuint(g_array_index(with->pool_needs, FsimPoolNeed, 0).pool, ==, 0);
        g_assert_cmpuint(g_array_index(with->pool_needs, FsimPoolNeed, 0).needed_bytes, ==,
                         20 * FSIM_MiB);
        g_assert_cmpuint(g_array_index(with->pool_needs, FsimPoolNeed, 1).pool, ==, 7);
        g_assert_cmpuint(g_array_index(with->pool_needs, FsimPoolNeed, 1).needed_bytes, ==,
                         48 * FSIM_MiB);
        fsim_test_remove_tree(dir);
    }

    /* without a private pool, no per-pool lines */
    {
        g_autoptr(FsimExplanation) plain =
            explain_text("fragsim-trace v1\n1 alloc 1 16777216 0\n2 free 1 0\n", "caching", FALSE);

        g_assert_cmpuint(find_moment(plain, FSIM_MOMENT_PEAK)->pools->len, ==, 0);
    }
}

/* Constructor-Sun device 1 ran out of memory under expandable segments: on the recording GPU the
 * model fails the same request, and the pins name the Python lines that allocated them. */
static void
test_constructor_sun_oom(void)
{
    g_autofree char *path =
        fsim_test_shared_trace("Constructor-Sun__code_location__memory_snapshot.pickle");
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimExplanation) e = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GRegex) python_line = g_regex_new("\\.py:[0-9]+:[^ ]+$", 0, 0, NULL);
    FsimExplainOptions options;
    const FsimMoment *oom;
    guint named = 0;

    if (path == NULL) {
        g_test_skip("FRAGSIM_SHARED_TRACES is not set");
        return;
    }
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    fsim_explain_options_init(&options);
    options.trace_device = 1;
    e = fsim_explain_trace(trace, &options, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(e->policy, ==, "expandable");
    g_assert_cmpstr(e->device, ==, "recorded");
    oom = find_moment(e, FSIM_MOMENT_OOM);
    g_assert_true(oom->has_request);
    g_assert_true(oom->request.recorded);
    g_assert_true(oom->request.simulated);
    g_assert_cmpuint(oom->breakdown.free_pinned_bytes, >, 0);
    g_assert_cmpuint(oom->pins->len, >, 0);
    for (guint i = 0; i < oom->pins->len; i++) {
        const FsimPinSite *site = g_ptr_array_index(oom->pins, i);

        if (g_regex_match(python_line, site->site, 0, NULL))
            named++;
        else
            g_test_message("pin without a Python line: %s", site->site);
    }
    /* the largest pins are allocations of the program, named by their Python line */
    g_assert_true(g_regex_match(
        python_line, ((const FsimPinSite *)g_ptr_array_index(oom->pins, 0))->site, 0, NULL));
    g_assert_cmpuint(named, >=, oom->pins->len / 2);
    assert_adds_up(e);
}

/* The snapshot replay --export-snapshot writes keeps the frames of every allocation, and has
 * the permissions the umask gives. */
static void
test_export_frames(void)
{
    g_autofree char *path =
        fsim_test_shared_trace("Constructor-Sun__code_location__memory_snapshot.pickle");
    g_autofree char *dir = NULL;
    g_autofree char *out = NULL;
    g_autoptr(FsimTrace) back = NULL;
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(GError) error = NULL;
    GStatBuf st;
    FsimEvent ev;
    guint allocs = 0, with_frames = 0;

    if (path == NULL) {
        g_test_skip("FRAGSIM_SHARED_TRACES is not set");
        return;
    }
    dir = fsim_test_tmp_dir();
    out = g_build_filename(dir, "export.pickle", NULL);
    {
        mode_t old = umask(022);
        g_auto(FsimTestRun) run =
            fsim_test_run("replay", path, "-p", "expandable", "--trace-device", "0",
                          "--export-snapshot", out, NULL);

        umask(old);
        g_assert_cmpint(run.status, ==, 0);
    }
    g_assert_cmpint(g_stat(out, &st), ==, 0);
    g_assert_cmpuint(st.st_mode & 0777, ==, 0644);
    back = fsim_trace_open(out, &error);
    g_assert_no_error(error);
    stream = fsim_trace_stream_open(back, 0, &error);
    g_assert_no_error(error);
    while (fsim_trace_stream_next(stream, &ev, &error)) {
        gsize n = 0;

        if (ev.kind != FSIM_EV_ALLOC)
            continue;
        allocs++;
        if (fsim_trace_stack(back, ev.stack, &n) != NULL && n > 0)
            with_frames++;
    }
    g_assert_no_error(error);
    g_assert_cmpuint(allocs, >, 1000);
    g_assert_cmpuint(with_frames, ==, allocs);
    fsim_test_remove_tree(dir);
}

/* The names of @object's members, sorted and joined by spaces. */
static char *
member_names(JsonObject *object)
{
    g_autoptr(GList) names = g_list_sort(json_object_get_members(object), (GCompareFunc)g_strcmp0);
    g_autoptr(GString) out = g_string_new(NULL);

    for (GList *l = names; l != NULL; l = l->next)
        g_string_append_printf(out, "%s%s", out->len > 0 ? " " : "", (const char *)l->data);
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* explain --json: the schema of the issue and docs/explain.md, and --plot draws a picture. */
static void
test_cli_json_and_plot(void)
{
    static const char text[] = "fragsim-trace v1\n"
                               "1 alloc 1 8388608 0\n"
                               "2 alloc 2 8388608 0\n"
                               "3 alloc 3 8388608 1\n"
                               "4 alloc 4 8388608 1\n"
                               "5 free 1 0\n"
                               "6 free 3 1\n"
                               "7 alloc 5 12582912 0\n";
    g_autofree char *dir = NULL;
    g_autofree char *path = write_trace(text, &dir);
    g_autofree char *png = g_build_filename(dir, "oom.png", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
    g_auto(FsimTestRun) run = {0};
    JsonObject *root;
    JsonArray *moments;
    gboolean saw_oom = FALSE;

    if (gnuplot == NULL) {
        g_test_skip("gnuplot not found");
        fsim_test_remove_tree(dir);
        return;
    }
    run = fsim_test_run("explain", path, "-d", "40MiB", "--json", "--plot", png, NULL);
    g_assert_cmpint(run.status, ==, 0);
    root = fsim_test_parse_object(parser, run.out);
    {
        g_autofree char *names = member_names(root);

        g_assert_cmpstr(names, ==, "config device moments policy trace");
    }
    g_assert_cmpstr(json_object_get_string_member(root, "policy"), ==, "caching");
    moments = json_object_get_array_member(root, "moments");
    g_assert_cmpuint(json_array_get_length(moments), >=, 2);
    for (guint i = 0; i < json_array_get_length(moments); i++) {
        JsonObject *m = json_array_get_object_element(moments, i);
        JsonObject *b = json_object_get_object_member(m, "breakdown");
        g_autofree char *names = member_names(m);
        g_autofree char *parts = member_names(b);
        gboolean oom = g_strcmp0(json_object_get_string_member(m, "kind"), "oom") == 0;
        JsonArray *pins = json_object_get_array_member(m, "pins");

        g_assert_cmpstr(names, ==,
                        oom ? "alternatives breakdown event kind largest_free_bytes pins "
                              "request reserved_bytes time_ns"
                            : "alternatives breakdown event kind largest_free_bytes pins "
                              "reserved_bytes time_ns");
        g_assert_cmpstr(parts, ==,
                        "free_pinned_bytes free_releasable_bytes live_requested_bytes "
                        "rounding_bytes");
        g_assert_cmpint(json_object_get_int_member(b, "live_requested_bytes") +
                            json_object_get_int_member(b, "rounding_bytes") +
                            json_object_get_int_member(b, "free_releasable_bytes") +
                            json_object_get_int_member(b, "free_pinned_bytes"),
                        ==, json_object_get_int_member(m, "reserved_bytes"));
        for (guint k = 0; k < json_array_get_length(pins); k++) {
            JsonObject *pin = json_array_get_object_element(pins, k);
            g_autofree char *pin_names = member_names(pin);

            g_assert_cmpstr(pin_names, ==, "count live_bytes pinned_bytes site sizes");
        }
        saw_oom = saw_oom || oom;
    }
    g_assert_true(saw_oom);
    g_assert_true(g_file_test(png, G_FILE_TEST_IS_REGULAR));
    {
        g_autofree char *data = g_build_filename(dir, "oom.dat", NULL);
        g_autofree char *script = g_build_filename(dir, "oom.gp", NULL);

        g_assert_true(g_file_test(data, G_FILE_TEST_IS_REGULAR));
        g_assert_true(g_file_test(script, G_FILE_TEST_IS_REGULAR));
    }
    fsim_test_remove_tree(dir);
}

/* replay --fail-on-oom names the Python line of the allocation that failed. */
static void
test_replay_oom_site(void)
{
    g_autofree char *path =
        fsim_test_shared_trace("Constructor-Sun__code_location__memory_snapshot.pickle");
    g_autoptr(GRegex) site = g_regex_new("allocated at [^ ]+\\.py:[0-9]+:", 0, 0, NULL);
    g_auto(FsimTestRun) run = {0};

    if (path == NULL) {
        g_test_skip("FRAGSIM_SHARED_TRACES is not set");
        return;
    }
    run = fsim_test_run("replay", path, "-p", "expandable", "--trace-device", "1", "-d", "60GiB",
                        "--fail-on-oom", NULL);
    g_assert_cmpint(run.status, ==, 3);
    g_assert_true(g_regex_match(site, run.err, 0, NULL));
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/explain/caching/devlog-8x16-then-4x32", test_devlog_caching);
    g_test_add_func("/explain/expandable/devlog-holes", test_devlog_expandable);
    g_test_add_func("/explain/oom/request", test_oom_request);
    g_test_add_func("/explain/at", test_at);
    g_test_add_func("/explain/cli/json-and-plot", test_cli_json_and_plot);
    g_test_add_func("/explain/every-policy/adds-up", test_every_policy);
    g_test_add_func("/explain/other-policies/described", test_other_descriptions);
    g_test_add_func("/explain/pools", test_pools);
    g_test_add_func("/explain/gmlake/stitched", test_gmlake_stitched);
    g_test_add_func("/explain/shared-snapshots/adds-up", test_shared_snapshots);
    g_test_add_func("/explain/constructor-sun/oom-pins-name-python-lines",
                    test_constructor_sun_oom);
    g_test_add_func("/explain/export-snapshot/frames-and-umask", test_export_frames);
    g_test_add_func("/explain/replay/oom-names-the-python-line", test_replay_oom_site);
    return g_test_run();
}
