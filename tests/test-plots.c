/* SPDX-License-Identifier: MIT */
/*
 * Plots that read well: the address map's classification (live, rounding, releasable, pinned,
 * and the pins) from stored segments and blocks, exactly; the maps of a replayed hand-made trace
 * at its peak and at its OOM; plots.json listing every image with its kind, runs and title;
 * titles naming the trace, the trace device, the device and the run's label; SVG output; and
 * plots.sh drawing the images again.  Cases that need gnuplot are skipped without it.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <json-glib/json-glib.h>
#include <string.h>

#include "fragsim/fragsim.h"
#include "fragsim/plot.h"
#include "fragsim/store.h"

#include "plot/plotter.h"
#include "test-util.h"

#define MiB ((uint64_t)FSIM_MiB)

static gboolean
have_gnuplot(void)
{
    g_autofree char *path = g_find_program_in_path("gnuplot");

    return path != NULL;
}

static void
add_action(GArray *actions, int64_t event, guint action, FsimAddr addr, uint64_t size)
{
    FsimStoredSegment s = {event, event * 1000, action, addr, size};

    g_array_append_val(actions, s);
}

static void
add_block(GArray *blocks, uint64_t id, FsimAddr addr, uint64_t size, uint64_t requested,
          int64_t alloc_event, int64_t free_event)
{
    FsimStoredBlock b = {id, addr, size, requested, 0, alloc_event, 0, free_event, 0};

    g_array_append_val(blocks, b);
}

static const FsimMapRow *
row_at(const FsimPlotMoment *m, guint i)
{
    g_assert_cmpuint(i, <, m->rows->len);
    return &g_array_index(m->rows, FsimMapRow, i);
}

/*
 * A cudaMalloc'd segment of 20 MiB at 0x10000000 holding a live block of 6 MiB (asked 5 MiB) at
 * its offset 8 MiB, a free segment of 4 MiB, a segment freed before the moment, and an
 * expandable reservation of 100 MiB with three 20 MiB pages mapped: block X [0, 16) and block Y
 * [24, 36) live, page 2 [40, 60) wholly free.
 */
static void
test_classification(void)
{
    const FsimAddr seg = 0x10000000, free_seg = 0x20000000, gone = 0x30000000;
    const FsimAddr va = 0x40000000;
    g_autoptr(GArray) actions = g_array_new(FALSE, FALSE, sizeof(FsimStoredSegment));
    g_autoptr(GArray) blocks = g_array_new(FALSE, FALSE, sizeof(FsimStoredBlock));
    g_autoptr(FsimPlotMoment) m = NULL;
    g_autoptr(FsimPlotMoment) strict = NULL;
    g_autoptr(FsimPlotMoment) before = NULL;
    const FsimMapRow *r;

    add_action(actions, -1, FSIM_STORE_ACTION_SEED, seg, 20 * MiB);
    add_action(actions, 1, FSIM_CALL_MEM_ALLOC, free_seg, 4 * MiB);
    add_action(actions, 2, FSIM_CALL_MEM_ALLOC, gone, 2 * MiB);
    add_action(actions, 3, FSIM_CALL_VA_RESERVE, va, 100 * MiB);
    add_action(actions, 3, FSIM_CALL_MAP, va, 20 * MiB);
    add_action(actions, 4, FSIM_CALL_MAP, va + 20 * MiB, 40 * MiB);
    add_action(actions, 5, FSIM_CALL_MEM_FREE, gone, 2 * MiB);
    add_action(actions, 9, FSIM_CALL_MAP, va + 60 * MiB, 20 * MiB); /* after the moment */
    add_block(blocks, 1, seg + 8 * MiB, 6 * MiB, 5 * MiB, -1, -1);
    add_block(blocks, 2, free_seg, 4 * MiB, 4 * MiB, 1, 5); /* freed at 5: not live at 6 */
    add_block(blocks, 3, va, 16 * MiB, 16 * MiB, 3, -1);
    add_block(blocks, 4, va + 24 * MiB, 12 * MiB, 12 * MiB, 4, 8);
    add_block(blocks, 5, va + 40 * MiB, 2 * MiB, 2 * MiB, 9, -1); /* after the moment */

    m = fsim_plot_moment_new(actions, blocks, 6, 2 * MiB, FALSE);
    g_assert_cmpint(m->event, ==, 6);
    /* two segments, then the three pages (20 MiB: the maps' common divisor) */
    g_assert_cmpuint(m->rows->len, ==, 5);
    r = row_at(m, 0);
    g_assert_cmpuint(r->addr, ==, seg);
    g_assert_false(r->page);
    g_assert_cmpuint(r->live, ==, 5 * MiB);
    g_assert_cmpuint(r->rounding, ==, 1 * MiB);
    g_assert_cmpuint(r->pinned, ==, 14 * MiB);
    g_assert_cmpuint(r->releasable, ==, 0);
    r = row_at(m, 1);
    g_assert_cmpuint(r->addr, ==, free_seg);
    g_assert_cmpuint(r->releasable, ==, 4 * MiB);
    g_assert_cmpuint(r->pinned + r->live, ==, 0);
    r = row_at(m, 2);
    g_assert_true(r->page);
    g_assert_cmpuint(r->size, ==, 20 * MiB);
    g_assert_cmpuint(r->live, ==, 16 * MiB);
    g_assert_cmpuint(r->pinned, ==, 4 * MiB);
    r = row_at(m, 3);
    g_assert_cmpuint(r->addr, ==, va + 20 * MiB);
    g_assert_cmpuint(r->live, ==, 12 * MiB);
    g_assert_cmpuint(r->pinned, ==, 8 * MiB);
    r = row_at(m, 4);
    g_assert_cmpuint(r->releasable, ==, 20 * MiB);
    g_assert_cmpuint(r->live + r->pinned, ==, 0);
    g_assert_cmpuint(m->reserved, ==, 24 * MiB + 60 * MiB);
    g_assert_cmpuint(m->live + m->rounding + m->releasable + m->pinned, ==, m->reserved);
    g_assert_cmpuint(m->pinned, ==, 26 * MiB);
    g_assert_cmpuint(m->releasable, ==, 24 * MiB);
    /* The pieces of a row tile it, in offset order. */
    {
        uint64_t at = 0;

        r = row_at(m, 0);
        for (guint k = 0; k < r->n_pieces; k++) {
            const FsimMapPiece *p = &g_array_index(m->pieces, FsimMapPiece, r->first_piece + k);

            g_assert_cmpuint(p->offset, ==, at);
            at += p->size;
        }
        g_assert_cmpuint(at, ==, r->size);
    }
    /* Pins: the segment's block keeps 14 MiB (both sides); Y keeps 4 + 4 MiB; X 4 MiB. */
    g_assert_cmpuint(m->pins->len, ==, 3);
    g_assert_cmpuint(g_array_index(m->pins, FsimMapPin, 0).addr, ==, seg + 8 * MiB);
    g_assert_cmpuint(g_array_index(m->pins, FsimMapPin, 0).pinned, ==, 14 * MiB);
    g_assert_cmpuint(g_array_index(m->pins, FsimMapPin, 1).addr, ==, va + 24 * MiB);
    g_assert_cmpuint(g_array_index(m->pins, FsimMapPin, 1).pinned, ==, 8 * MiB);
    g_assert_cmpuint(g_array_index(m->pins, FsimMapPin, 2).pinned, ==, 4 * MiB);

    /* A policy that never gives memory back: nothing is releasable. */
    strict = fsim_plot_moment_new(actions, blocks, 6, 2 * MiB, TRUE);
    g_assert_cmpuint(strict->releasable, ==, 0);
    g_assert_cmpuint(strict->pinned, ==, 26 * MiB + 24 * MiB);
    /* Before the first event: the seeded segment and its block only. */
    before = fsim_plot_moment_new(actions, blocks, -1, 2 * MiB, FALSE);
    g_assert_cmpuint(before->rows->len, ==, 1);
    g_assert_cmpuint(before->reserved, ==, 20 * MiB);
    /* The peak: the event after which the most was held (9, when a fourth page is mapped). */
    g_assert_cmpint(fsim_plot_peak_event(actions, NULL), ==, 9);
}

/* Sum the widths of block 0 of an address map's data file by class (MiB). */
static void
map_totals(const char *path, double totals[4])
{
    g_autofree char *contents = NULL;
    g_auto(GStrv) lines = NULL;

    memset(totals, 0, 4 * sizeof(double));
    g_assert_true(g_file_get_contents(path, &contents, NULL, NULL));
    g_assert_nonnull(strstr(contents, "offset in the row in MiB"));
    lines = g_strsplit(contents, "\n", -1);
    for (guint l = 0; lines[l] != NULL; l++) {
        g_auto(GStrv) f = NULL;
        int cls;

        if (lines[l][0] == '#')
            continue;
        if (lines[l][0] == '\0')
            break; /* the end of block 0 */
        f = g_strsplit(lines[l], " ", -1);
        g_assert_cmpuint(g_strv_length(f), ==, 5);
        cls = atoi(f[4]);
        g_assert_cmpint(cls, >=, 0);
        g_assert_cmpint(cls, <=, 3);
        totals[cls] += g_ascii_strtod(f[1], NULL) - g_ascii_strtod(f[0], NULL);
    }
}

static JsonArray *
read_index(JsonParser *parser, const char *out)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = g_build_filename(out, "plots.json", NULL);
    JsonNode *root;

    g_assert_true(json_parser_load_from_file(parser, path, &error));
    g_assert_no_error(error);
    root = json_parser_get_root(parser);
    g_assert_true(JSON_NODE_HOLDS_ARRAY(root));
    return json_node_get_array(root);
}

/*
 * A hand-made trace through `caching` on a 40 MiB card: A and B (8 MiB) share a 20 MiB segment,
 * C (12 MiB) gets one of its own; the peak holds 28 MiB live and the 4 MiB tail of the first
 * segment pinned.  C and A freed, D (24 MiB) cannot fit: C's segment is released and D still
 * fails; at that OOM, B alone pins 12 MiB of its segment.
 */
static void
test_trace_maps(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *trace = NULL;
    g_autofree char *db = NULL;
    g_autofree char *out = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *index;
    double totals[4];
    FsimTestRun r;
    guint maps = 0;

    if (!have_gnuplot()) {
        g_test_skip("gnuplot not found");
        return;
    }
    dir = fsim_test_tmp_dir();
    trace = g_build_filename(dir, "hand made.trace", NULL);
    db = g_build_filename(dir, "r.db", NULL);
    out = g_build_filename(dir, "plots", NULL);
    g_assert_true(g_file_set_contents(trace,
                                      "fragsim-trace v1\n"
                                      "1000 alloc 1 8388608 0\n"
                                      "2000 alloc 2 8388608 0\n"
                                      "3000 alloc 3 12582912 0\n"
                                      "4000 free 3 0\n"
                                      "5000 free 1 0\n"
                                      "6000 alloc 4 25165824 0\n",
                                      -1, NULL));
    r = fsim_test_run("replay", trace, "-p", "caching", "-d", "40MiB", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
    r = fsim_test_run("plot", "--db", db, "-o", out, NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
    {
        g_autofree char *peak = g_build_filename(out, "address-map-run1-peak.dat", NULL);
        g_autofree char *oom = g_build_filename(out, "address-map-run1-oom-1.dat", NULL);

        map_totals(peak, totals);
        g_assert_cmpfloat(totals[0], ==, 28.0);
        g_assert_cmpfloat(totals[1], ==, 0.0);
        g_assert_cmpfloat(totals[2], ==, 0.0);
        g_assert_cmpfloat(totals[3], ==, 4.0);
        map_totals(oom, totals);
        g_assert_cmpfloat(totals[0], ==, 8.0);
        g_assert_cmpfloat(totals[2], ==, 0.0);
        g_assert_cmpfloat(totals[3], ==, 12.0);
    }
    index = read_index(parser, out);
    for (guint i = 0; i < json_array_get_length(index); i++) {
        JsonObject *e = json_array_get_object_element(index, i);

        if (strcmp(json_object_get_string_member(e, "kind"), "address-map") != 0)
            continue;
        maps++;
        g_assert_nonnull(strstr(json_object_get_string_member(e, "title"),
                                maps == 1 ? "at the peak" : "at OOM 1 of 1"));
    }
    g_assert_cmpuint(maps, ==, 2);
    fsim_test_remove_tree(dir);
}

/* Two devices of one trace, two runs each (one with a configuration), and a run in error. */
static char *
make_database(const char *dir)
{
    char *db = g_build_filename(dir, "multi.db", NULL);
    g_autofree char *trace = g_build_filename(dir, "two_gpus.trace", NULL);
    FsimTestRun r;

    g_assert_true(g_file_set_contents(trace,
                                      "fragsim-trace v1\n"
                                      "1000 alloc 1 8388608 0\n"
                                      "2000 alloc 2 3145728 0\n"
                                      "3000 free 1 0\n"
                                      "9000000 alloc 3 16777216 0\n",
                                      -1, NULL));
    r = fsim_test_run("replay", trace, "-p", "caching", "-c", "", "-c", "expandable_segments:True",
                      "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
    r = fsim_test_run("replay", trace, "-p", "bestfit", "-d", "16MiB", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
    return db;
}

/* Every image is listed once in plots.json, with its kind, its runs and a title naming the trace,
 * the device and (per run) the run's label; plots.sh draws every image again. */
static void
test_index_and_titles(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autofree char *out = NULL;
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) files = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    static const char *const kinds[] = {"timeline", "fragmentation", "compare", "sizes",
                                        "address-map"};
    JsonArray *index;
    FsimPlotOptions options = {.format = FSIM_PLOT_SVG};

    if (!have_gnuplot()) {
        g_test_skip("gnuplot not found");
        return;
    }
    dir = fsim_test_tmp_dir();
    db = make_database(dir);
    out = g_build_filename(dir, "svg", NULL);
    store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_assert_no_error(error);
    runs = fsim_plot_select_runs(store, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(runs->len, ==, 3);
    /* An output directory relative to the current one (gnuplot runs inside it). */
    {
        g_autofree char *cwd = g_get_current_dir();

        g_assert_cmpint(g_chdir(dir), ==, 0);
        files = fsim_plot_render(store, runs, "svg", &options, &error);
        g_assert_cmpint(g_chdir(cwd), ==, 0);
    }
    g_assert_no_error(error);
    index = read_index(parser, out);
    g_assert_cmpuint(json_array_get_length(index), ==, files->len);
    for (guint i = 0; i < files->len; i++) {
        const FsimPlotFile *file = files->pdata[i];
        JsonObject *e = json_array_get_object_element(index, i);
        JsonArray *ids = json_object_get_array_member(e, "runs");
        const char *title = json_object_get_string_member(e, "title");
        g_autofree char *image = g_build_filename(out, file->image, NULL);
        g_autofree char *svg = NULL;
        gboolean known = FALSE;

        g_assert_cmpstr(json_object_get_string_member(e, "file"), ==, file->image);
        g_assert_cmpstr(json_object_get_string_member(e, "kind"), ==, file->kind);
        for (gsize k = 0; k < G_N_ELEMENTS(kinds); k++)
            known |= strcmp(file->kind, kinds[k]) == 0;
        g_assert_true(known);
        g_assert_true(g_str_has_suffix(file->image, ".svg"));
        g_assert_true(g_file_get_contents(image, &svg, NULL, NULL));
        g_assert_nonnull(strstr(svg, "<svg"));
        g_assert_nonnull(strstr(svg, "</svg>"));
        g_assert_cmpuint(json_array_get_length(ids), >=, 1);
        g_assert_cmpuint(json_array_get_length(ids), ==, file->runs->len);
        g_assert_nonnull(strstr(title, "two_gpus.trace"));
        g_assert_nonnull(strstr(title, file->group == 1 ? "h100-80gb" : "16MiB"));
        if (strcmp(file->kind, "address-map") == 0) {
            g_assert_cmpuint(json_array_get_length(ids), ==, 1);
            g_assert_cmpint(json_array_get_int_element(ids, 0), ==, file->run);
            if (file->run == 2)
                g_assert_nonnull(strstr(title, "run 2: caching expandable_segments:True"));
        } else {
            g_assert_cmpint(file->run, ==, -1);
            if (file->group == 1)
                g_assert_nonnull(strstr(title, "runs: caching, caching expandable_segments:True"));
        }
        /* The title in the image, escaped for enhanced text: the name prints as written. */
        g_assert_nonnull(strstr(svg, "two_gpus.trace"));
    }
    /* plots.sh draws every image again, from the files beside it. */
    {
        const FsimPlotFile *first = files->pdata[0];
        const FsimPlotFile *last = files->pdata[files->len - 1];
        g_autofree char *a = g_build_filename(out, first->image, NULL);
        g_autofree char *b = g_build_filename(out, last->image, NULL);
        g_autofree char *script = g_build_filename(out, "plots.sh", NULL);
        g_autofree char *before = NULL, *after = NULL;
        g_autofree char *shell = g_strdup("/bin/sh");
        char *argv[] = {shell, script, NULL};
        int status = 0;

        g_assert_true(g_file_get_contents(b, &before, NULL, NULL));
        g_assert_cmpint(g_unlink(a), ==, 0);
        g_assert_cmpint(g_unlink(b), ==, 0);
        g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL,
                                   &status, &error));
        g_assert_no_error(error);
        g_assert_true(g_spawn_check_wait_status(status, &error));
        g_assert_true(g_file_test(a, G_FILE_TEST_IS_REGULAR));
        g_assert_true(g_file_get_contents(b, &after, NULL, NULL));
        g_assert_cmpstr(after, ==, before);
    }
    fsim_test_remove_tree(dir);
}

/* Runs of two devices of one trace: each title says which device of the trace it is. */
static void
test_trace_device_titles(void)
{
    g_autofree char *snapshot =
        fsim_test_shared_trace("Constructor-Sun__code_location__memory_snapshot.pickle");
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autofree char *out = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *index;
    guint seen[3] = {0};
    FsimTestRun r;

    if (snapshot == NULL || !have_gnuplot()) {
        if (snapshot != NULL)
            g_test_skip("gnuplot not found");
        return;
    }
    dir = fsim_test_tmp_dir();
    db = g_build_filename(dir, "r.db", NULL);
    out = g_build_filename(dir, "plots", NULL);
    r = fsim_test_run("replay", snapshot, "-p", "caching", "--no-needed", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
    r = fsim_test_run("plot", "--db", db, "-o", out, NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
    index = read_index(parser, out);
    for (guint i = 0; i < json_array_get_length(index); i++) {
        const char *title =
            json_object_get_string_member(json_array_get_object_element(index, i), "title");

        for (guint d = 0; d < 3; d++) {
            g_autofree char *device = g_strdup_printf("trace device %u,", d);

            seen[d] += strstr(title, device) != NULL;
        }
    }
    for (guint d = 0; d < 3; d++)
        g_assert_cmpuint(seen[d], >=, 5);
    /* The recorded run of each device is drawn as such (kind 3); device 1's ran out of memory. */
    {
        guint recorded = 0, recorded_oom = 0;

        for (guint n = 1; n <= 3; n++) {
            g_autofree char *name = g_strdup_printf("compare-%u.dat", n);
            g_autofree char *path = g_build_filename(out, name, NULL);
            g_autofree char *text = NULL;
            g_auto(GStrv) lines = NULL;

            g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
            lines = g_strsplit(text, "\n", -1);
            for (guint l = 0; lines[l] != NULL; l++) {
                if (strstr(lines[l], "\"recorded\" ") == NULL)
                    continue;
                g_assert_nonnull(strstr(lines[l], " 3 "));
                recorded++;
                recorded_oom += strstr(lines[l], "the recording ran out of memory") != NULL;
            }
        }
        g_assert_cmpuint(recorded, ==, 3);
        g_assert_cmpuint(recorded_oom, ==, 1);
    }
    fsim_test_remove_tree(dir);
}

static void
test_wrap(void)
{
    g_autofree char *short_line = fsim_plot_wrap("a short title", 40);
    g_autofree char *long_name = fsim_plot_wrap(
        "codeasier__MemSnapDump__tests__test_data__snapshot_with_empty_cache.pkl on h100", 30);
    g_auto(GStrv) lines = g_strsplit(long_name, "\n", -1);

    g_assert_cmpstr(short_line, ==, "a short title");
    g_assert_cmpuint(g_strv_length(lines), >, 2);
    for (guint i = 0; lines[i] != NULL; i++)
        g_assert_cmpuint(strlen(lines[i]), <=, 30);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/plots/classification", test_classification);
    g_test_add_func("/plots/wrap", test_wrap);
    g_test_add_func("/plots/trace-maps", test_trace_maps);
    g_test_add_func("/plots/index-and-titles", test_index_and_titles);
    g_test_add_func("/plots/trace-device-titles", test_trace_device_titles);
    return g_test_run();
}
