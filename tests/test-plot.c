/* SPDX-License-Identifier: MIT */
/*
 * Plots and the HTML report: gnuplot runs on real stored runs and writes every image with its
 * data file, template and command; user text is escaped for enhanced text; a missing gnuplot,
 * a run that does not exist or has no data are clear errors; the report references only files
 * it wrote, and renders in headless Chromium where it is installed.  Cases that need gnuplot
 * are skipped without it.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <math.h>
#include <string.h>

#include "fragsim/fragsim.h"
#include "fragsim/plot.h"
#include "fragsim/store.h"

#include "test-util.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static gboolean
have_gnuplot(void)
{
    g_autofree char *path = g_find_program_in_path("gnuplot");

    return path != NULL;
}

/* Deterministic allocations and frees of mixed sizes. */
static gboolean
workload_next(gpointer data, FsimEvent *ev, GError **error)
{
    static const uint64_t sizes[] = {512, 4096, 1 << 20, 3 << 20, 20 << 20, 50 << 20};
    gpointer *state = data;
    GRand *rand = state[0];
    GArray *live = state[1];
    uint64_t *index = state[2];
    uint64_t *next_id = state[3];

    (void)error;
    if (*index >= 4000)
        return FALSE;
    memset(ev, 0, sizeof(*ev));
    ev->index = *index;
    ev->time = *index * 2000;
    (*index)++;
    if (live->len < 20 || (live->len < 60 && g_rand_boolean(rand))) {
        ev->kind = FSIM_EV_ALLOC;
        ev->id = (*next_id)++;
        ev->size = sizes[g_rand_int_range(rand, 0, G_N_ELEMENTS(sizes))] +
                   (uint64_t)g_rand_int_range(rand, 0, 4096);
        g_array_append_val(live, ev->id);
    } else {
        guint i = (guint)g_rand_int_range(rand, 0, (gint32)live->len);

        ev->kind = FSIM_EV_FREE;
        ev->id = g_array_index(live, uint64_t, i);
        g_array_remove_index_fast(live, i);
    }
    return TRUE;
}

static int64_t
add_run(FsimStore *store, const char *trace, const char *policy, const char *device)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(FsimStoreRun) run = NULL;
    g_autoptr(GRand) rand = g_rand_new_with_seed(9);
    g_autoptr(GArray) live = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    uint64_t index = 0, next_id = 1;
    gpointer state[4] = {rand, live, &index, &next_id};
    FsimStoreRunInfo info = {.trace = trace, .trace_format = "text", .policy = policy, .seed = -1};
    FsimRunConfig config;

    fsim_run_config_init(&config);
    config.policy = policy;
    config.paranoid = FALSE;
    g_assert_true(fsim_device_spec_parse(device, &config.device, &error));
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    run = fsim_store_attach(store, engine, &info, &error);
    g_assert_no_error(error);
    g_assert_true(fsim_engine_run(engine, workload_next, state, &error));
    g_assert_no_error(error);
    g_assert_true(fsim_store_run_finish(run, FSIM_STORE_COMPLETE, &error));
    g_assert_no_error(error);
    return fsim_store_run_id(run);
}

/* A database with two groups (one with OOMs on a small device), a run left incomplete, and a
 * trace name full of enhanced-text markup. */
static char *
make_database(const char *dir)
{
    g_autoptr(GError) error = NULL;
    char *path = g_build_filename(dir, "results.db", NULL);
    g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_WRITE, NULL, &error);

    g_assert_no_error(error);
    g_assert_cmpint(add_run(store, "traces/we_ird^{name}@x.trace", "bestfit", "h100-80gb"), ==, 1);
    g_assert_cmpint(add_run(store, "traces/we_ird^{name}@x.trace", "paged", "h100-80gb"), ==, 2);
    g_assert_cmpint(add_run(store, "traces/we_ird^{name}@x.trace", "direct", "h100-80gb"), ==, 3);
    g_assert_cmpint(add_run(store, "other.trace", "bestfit", "256MiB"), ==, 4);
    g_assert_cmpint(add_run(store, "other.trace", "paged", "256MiB"), ==, 5);
    {
        /* Attached and dropped: marked failed, no data. */
        g_autoptr(FsimEngine) engine = NULL;
        FsimStoreRunInfo info = {.trace = "other.trace", .policy = "direct", .seed = -1};
        FsimRunConfig config;
        FsimStoreRun *run;

        fsim_run_config_init(&config);
        config.policy = "direct";
        engine = fsim_engine_new(&config, &error);
        g_assert_no_error(error);
        run = fsim_store_attach(store, engine, &info, &error);
        g_assert_no_error(error);
        fsim_store_run_free(run);
    }
    return path;
}

static gboolean
has_png_magic(const char *path)
{
    g_autofree char *contents = NULL;
    gsize length = 0;

    return g_file_get_contents(path, &contents, &length, NULL) && length > 8 &&
           memcmp(contents, "\x89PNG\r\n\x1a\n", 8) == 0;
}

/* ---- cases --------------------------------------------------------------------------------- */

static void
test_escape(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain name.trace", "plain name.trace"},
        {"select_n", "select\\_n"},
        {"a^b_c{d}@e&f~g", "a\\^b\\_c\\{d\\}\\@e\\&f\\~g"},
        {"back\\slash", "back\\\\slash"},
        {"", ""},
        {"µs é", "µs é"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *escaped = fsim_plot_escape(cases[i].in);

        g_assert_cmpstr(escaped, ==, cases[i].out);
    }
}

static void
test_find(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *found = NULL;
    char *missing;

    /* The build tree finds the templates of its source tree without any setting. */
    found = fsim_plot_find_templates(NULL, &error);
    g_assert_no_error(error);
    g_assert_true(g_str_has_suffix(found, "plots"));
    g_clear_pointer(&found, g_free);
    missing = fsim_plot_find_templates(dir, &error);
    g_assert_null(missing);
    g_assert_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_TEMPLATES);
    g_clear_error(&error);

    missing = fsim_plot_find_gnuplot("/nonexistent/bin/gnuplot", &error);
    g_assert_null(missing);
    g_assert_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_GNUPLOT);
    g_assert_nonnull(strstr(error->message, "/nonexistent/bin/gnuplot"));
    g_clear_error(&error);
    missing = fsim_plot_find_gnuplot("no-such-gnuplot-program", &error);
    g_assert_null(missing);
    g_assert_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_GNUPLOT);
    fsim_test_remove_tree(dir);
}

static void
test_select(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = make_database(dir);
    g_autoptr(FsimStore) store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) groups = NULL;
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int64_t));
    int64_t id;

    g_assert_no_error(error);
    runs = fsim_plot_select_runs(store, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(runs->len, ==, 5);
    groups = fsim_plot_group_runs(runs);
    g_assert_cmpuint(groups->len, ==, 2);
    g_assert_cmpuint(((FsimPlotGroup *)groups->pdata[0])->runs->len, ==, 3);
    g_assert_cmpstr(((FsimPlotGroup *)groups->pdata[1])->device, ==, "256MiB");
    g_clear_pointer(&runs, g_ptr_array_unref);

    id = 42;
    g_array_append_val(ids, id);
    g_assert_null(fsim_plot_select_runs(store, ids, &error));
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NO_RUN);
    g_clear_error(&error);
    g_array_index(ids, int64_t, 0) = 6;
    g_assert_null(fsim_plot_select_runs(store, ids, &error));
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_INCOMPLETE);
    g_assert_nonnull(strstr(error->message, "run 6 has no data"));
    g_clear_error(&error);
    fsim_test_remove_tree(dir);
}

static void
check_outputs(const char *out, GPtrArray *files, const char *ext)
{
    g_autofree char *script = g_build_filename(out, "plots.sh", NULL);
    g_autofree char *commands = NULL;
    static const char *const kinds[] = {"timeline", "fragmentation", "compare", "sizes",
                                        "address-map"};

    guint per_kind[G_N_ELEMENTS(kinds)] = {0};
    guint peaks = 0;

    /* Per group: timeline, fragmentation, compare, sizes; per run: an address map at its peak,
     * and one at each of its first OOMs. */
    for (guint i = 0; i < files->len; i++) {
        const FsimPlotFile *file = files->pdata[i];
        g_autofree char *image = g_build_filename(out, file->image, NULL);
        g_autofree char *data = g_build_filename(out, file->data, NULL);

        g_assert_true(g_str_has_suffix(file->image, ext));
        g_assert_true(g_file_test(image, G_FILE_TEST_IS_REGULAR));
        g_assert_true(g_file_test(data, G_FILE_TEST_IS_REGULAR));
        if (strcmp(ext, ".png") == 0)
            g_assert_true(has_png_magic(image));
        for (gsize k = 0; k < G_N_ELEMENTS(kinds); k++)
            per_kind[k] += strcmp(file->kind, kinds[k]) == 0;
        if (strcmp(file->kind, "address-map") == 0) {
            g_assert_cmpint(file->run, >, 0);
            g_assert_nonnull(file->moment);
            peaks += strcmp(file->moment, "peak") == 0;
        }
    }
    for (gsize k = 0; k < 4; k++)
        g_assert_cmpuint(per_kind[k], ==, 2);
    g_assert_cmpuint(peaks, ==, 5);
    g_assert_cmpuint(per_kind[4], >, 5); /* runs 4 and 5 ran out of memory */
    g_assert_cmpuint(files->len, ==, 8 + per_kind[4]);
    for (gsize k = 0; k < G_N_ELEMENTS(kinds); k++) {
        g_autofree char *name = g_strconcat(kinds[k], ".gp", NULL);
        g_autofree char *copy = g_build_filename(out, name, NULL);

        g_assert_true(g_file_test(copy, G_FILE_TEST_IS_REGULAR));
    }
    g_assert_true(g_file_test(script, G_FILE_TEST_IS_EXECUTABLE));
    g_assert_true(g_file_get_contents(script, &commands, NULL, NULL));
    g_assert_nonnull(strstr(commands, "gnuplot -c timeline.gp samples-1.dat timeline-1"));
    g_assert_nonnull(strstr(commands, "address-map.gp address-map-run5-peak.dat"));
    g_assert_nonnull(strstr(commands, "address-map.gp address-map-run5-oom-1.dat"));
}

/* A data file's value, printed with 7 significant digits. */
static void
assert_value(double printed, double exact)
{
    g_assert_cmpfloat(fabs(printed - exact), <=, 1e-6 * fabs(exact) + 1e-9);
}

static double
unit_divisor(uint64_t peak, const char **name)
{
    if (peak >= FSIM_GiB) {
        *name = "GiB";
        return (double)FSIM_GiB;
    }
    if (peak >= FSIM_MiB) {
        *name = "MiB";
        return (double)FSIM_MiB;
    }
    *name = "KiB";
    return (double)FSIM_KiB;
}

/* samples-N.dat: per run, a row per stored sample: x (ms: the workload spans 8 ms), reserved,
 * allocated and requested (the bucket's maxima), overhead (reserved - requested) and frag
 * (100 (1 - allocated / reserved)), memory in the unit of the group's peak. */
static void
check_samples_data(FsimStore *store, const char *out, const char *file, const int64_t *ids,
                   guint n_ids)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = g_build_filename(out, file, NULL);
    g_autofree char *contents = NULL;
    g_auto(GStrv) lines = NULL;
    g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    uint64_t peak = 0;
    const char *unit;
    double divisor;
    g_autofree char *header = NULL;
    GArray *samples = NULL;
    guint run = 0, row = 0, rows = 0;

    for (guint r = 0; r < n_ids; r++) {
        GArray *a = fsim_store_samples(store, ids[r], &error);

        g_assert_no_error(error);
        for (guint i = 0; i < a->len; i++)
            peak = MAX(peak, g_array_index(a, FsimStoredSample, i).reserved_max);
        g_ptr_array_add(all, a);
    }
    divisor = unit_divisor(peak, &unit);
    header = g_strdup_printf("# x: time from the trace's start (ms); memory in %s.", unit);
    g_assert_true(g_file_get_contents(path, &contents, NULL, NULL));
    g_assert_nonnull(strstr(contents, header));
    lines = g_strsplit(contents, "\n", -1);
    for (guint l = 0; lines[l] != NULL; l++) {
        const char *line = lines[l];
        g_auto(GStrv) fields = NULL;

        if (g_str_has_prefix(line, "# run ")) {
            g_assert_cmpuint(run, <, n_ids);
            g_assert_cmpint(g_ascii_strtoll(line + 6, NULL, 10), ==, ids[run]);
            g_assert_true(g_str_has_prefix(lines[l + 1], "x reserved allocated requested "
                                                         "overhead frag \""));
            if (samples != NULL)
                g_assert_cmpuint(row, ==, samples->len);
            samples = all->pdata[run++];
            row = 0;
            l++;
            continue;
        }
        if (*line == '#' || *line == '\0')
            continue;
        g_assert_nonnull(samples);
        fields = g_strsplit(line, " ", -1);
        g_assert_cmpuint(g_strv_length(fields), ==, 6);
        g_assert_cmpuint(row, <, samples->len);
        {
            const FsimStoredSample *x = &g_array_index(samples, FsimStoredSample, row);
            double v[6];

            for (guint f = 0; f < 6; f++)
                v[f] = g_ascii_strtod(fields[f], NULL);
            assert_value(v[0], (double)x->time_last / 1e6);
            assert_value(v[1], (double)x->reserved_max / divisor);
            assert_value(v[2], (double)x->allocated_max / divisor);
            assert_value(v[3], (double)x->requested_max / divisor);
            assert_value(v[4], (double)(x->reserved - x->requested) / divisor);
            assert_value(v[5], 100.0 * (1.0 - (double)x->allocated / (double)x->reserved));
            g_assert_cmpuint(x->reserved_max, >=, x->allocated_max);
        }
        row++;
        rows++;
    }
    g_assert_cmpuint(run, ==, n_ids);
    g_assert_cmpuint(row, ==, samples->len);
    g_assert_cmpuint(rows, >, 3 * n_ids);
}

/* ooms-N.dat: per OOM, x, the reserved memory when it failed, the run's colour. */
static void
check_ooms_data(FsimStore *store, const char *out, const char *file, const int64_t *ids,
                guint n_ids, const char *unit)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = g_build_filename(out, file, NULL);
    g_autofree char *contents = NULL;
    g_auto(GStrv) lines = NULL;
    guint l = 0, count = 0;
    double divisor = strcmp(unit, "GiB") == 0   ? (double)FSIM_GiB
                     : strcmp(unit, "MiB") == 0 ? (double)FSIM_MiB
                                                : (double)FSIM_KiB;

    g_assert_true(g_file_get_contents(path, &contents, NULL, NULL));
    lines = g_strsplit(contents, "\n", -1);
    for (guint r = 0; r < n_ids; r++) {
        g_autoptr(GArray) ooms = fsim_store_ooms(store, ids[r], &error);

        g_assert_no_error(error);
        for (guint i = 0; i < ooms->len; i++) {
            const FsimOomRecord *o = &g_array_index(ooms, FsimOomRecord, i);
            g_auto(GStrv) fields = NULL;

            while (lines[l] != NULL && lines[l][0] == '#')
                l++;
            g_assert_nonnull(lines[l]);
            fields = g_strsplit(lines[l++], " ", -1);
            g_assert_cmpuint(g_strv_length(fields), ==, 3);
            assert_value(g_ascii_strtod(fields[0], NULL), (double)o->time / 1e6);
            assert_value(g_ascii_strtod(fields[1], NULL), (double)o->reserved_bytes / divisor);
            count++;
        }
    }
    g_assert_cmpuint(count, >, 0);
    g_assert_true(lines[l] == NULL || lines[l][0] == '\0');
}

/* compare-N.dat: per run, the capacity it needs (needed_bytes); a run that ran out of memory
 * drawn failed (kind 1) at least as long as its device, never as a short bar; a run without
 * needed_bytes as its peak reserved (kind 4). */
static void
check_compare_data(FsimStore *store, const char *out, const char *file, const int64_t *ids,
                   guint n_ids)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) runs = fsim_store_runs(store, ids, n_ids, &error);
    g_autofree char *path = g_build_filename(out, file, NULL);
    g_autofree char *contents = NULL;
    g_auto(GStrv) lines = NULL;
    uint64_t lower = 0, right = 0;
    const char *unit;
    double divisor;
    guint r = 0;

    g_assert_no_error(error);
    for (guint i = 0; i < runs->len; i++) {
        const FsimStoredRun *run = runs->pdata[i];

        lower = MAX(lower, run->metrics.lower_bound_bytes);
        right = MAX(right,
                    run->metrics.ooms > 0 ? run->capacity_bytes : run->metrics.peak_reserved_bytes);
        right = MAX(right, run->capacity_bytes / 4);
    }
    divisor = unit_divisor(MAX(right, lower), &unit);
    g_assert_true(g_file_get_contents(path, &contents, NULL, NULL));
    lines = g_strsplit(contents, "\n", -1);
    for (guint l = 0; lines[l] != NULL; l++) {
        const FsimStoredRun *run;
        const char *rest;
        double bar;
        guint64 kind;
        char *end;

        if (lines[l][0] == '#' || lines[l][0] == '\0')
            continue;
        g_assert_cmpuint(r, <, runs->len);
        run = runs->pdata[r];
        g_assert_cmpint(run->metrics.needed_bytes, ==, -1); /* not computed here */
        g_assert_cmpint(g_ascii_strtoll(lines[l], NULL, 10), ==, n_ids - 1 - r);
        /* after the quoted label */
        rest = strchr(lines[l], '"');
        g_assert_nonnull(rest);
        rest = strchr(rest + 1, '"');
        g_assert_nonnull(rest);
        bar = g_ascii_strtod(rest + 1, &end);
        kind = g_ascii_strtoull(end, &end, 10);
        if (run->metrics.ooms > 0) {
            g_assert_cmpuint(kind, ==, 1);
            assert_value(bar, (double)run->capacity_bytes / divisor);
            g_assert_nonnull(strstr(lines[l], "FAILED on 256 MiB: OOM at event "));
        } else {
            g_assert_cmpuint(kind, ==, 4);
            assert_value(bar, (double)run->metrics.peak_reserved_bytes / divisor);
        }
        r++;
    }
    g_assert_cmpuint(r, ==, n_ids);
}

/* sizes-N.dat: every power-of-two class from the smallest request's to the largest's, with the
 * first run's request count and its share of the requested bytes (empty classes as zeros). */
static void
check_sizes_data(FsimStore *store, const char *out, const char *file, int64_t id)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GArray) sizes = fsim_store_sizes(store, id, &error);
    g_autofree char *path = g_build_filename(out, file, NULL);
    g_autofree char *contents = NULL;
    g_auto(GStrv) lines = NULL;
    uint64_t total = 0, requests = 0;
    guint next = 0, k = 0, rows = 0;
    double percent = 0;

    g_assert_no_error(error);
    g_assert_cmpuint(sizes->len, >, 1);
    for (guint i = 0; i < sizes->len; i++)
        total += g_array_index(sizes, FsimStoredSizeBucket, i).bytes;
    g_assert_true(g_file_get_contents(path, &contents, NULL, NULL));
    lines = g_strsplit(contents, "\n", -1);
    k = g_array_index(sizes, FsimStoredSizeBucket, 0).log2;
    for (guint l = 0; lines[l] != NULL; l++) {
        const FsimStoredSizeBucket *b = &g_array_index(sizes, FsimStoredSizeBucket, next);
        const char *rest;
        char *end;
        uint64_t count;

        if (lines[l][0] == '#' || lines[l][0] == '\0')
            continue;
        g_assert_cmpuint(g_ascii_strtoull(lines[l], NULL, 10), ==, k);
        rest = strrchr(lines[l], '"');
        g_assert_nonnull(rest);
        count = g_ascii_strtoull(rest + 1, &end, 10);
        if (next < sizes->len && b->log2 == k) {
            g_assert_cmpuint(count, ==, b->count);
            assert_value(g_ascii_strtod(end, NULL), 100.0 * (double)b->bytes / (double)total);
            requests += count;
            percent += g_ascii_strtod(end, NULL);
            next++;
        } else {
            g_assert_cmpuint(count, ==, 0);
            assert_value(g_ascii_strtod(end, NULL), 0.0);
        }
        k++;
        rows++;
    }
    g_assert_cmpuint(next, ==, sizes->len);
    g_assert_cmpuint(rows, ==,
                     g_array_index(sizes, FsimStoredSizeBucket, sizes->len - 1).log2 -
                         g_array_index(sizes, FsimStoredSizeBucket, 0).log2 + 1);
    {
        g_autoptr(GPtrArray) runs = fsim_store_runs(store, &id, 1, &error);

        g_assert_no_error(error);
        g_assert_cmpuint(requests, ==, ((const FsimStoredRun *)runs->pdata[0])->metrics.allocs);
    }
    g_assert_cmpfloat(fabs(percent - 100.0), <, 1e-3);
}

/* The timeline template draws what the data file's header says its columns are. */
static void
check_timeline_template(const char *out)
{
    g_autofree char *path = g_build_filename(out, "timeline.gp", NULL);
    g_autofree char *script = g_build_filename(out, "plots.sh", NULL);
    g_autofree char *text = NULL;
    g_autofree char *commands = NULL;

    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    g_assert_nonnull(strstr(text, "columns: x reserved allocated requested overhead frag"));
    g_assert_nonnull(strstr(text, "DATA index 0 using 1:4 with lines lw 1 lc rgb \"#9a9a9a\" "
                                  "title \"requested by the program\""));
    g_assert_nonnull(strstr(text, "DATA index i using 1:2 with lines lw 2.5"));
    g_assert_nonnull(strstr(text, "title columnheader(7)"));
    g_assert_nonnull(strstr(text, "DATA index i using 1:3 with lines lw 1 dt 3"));
    g_assert_nonnull(strstr(text, "title \"reserved (solid)\""));
    g_assert_nonnull(strstr(text, "using 1:2:3 with points"));
    g_assert_true(g_file_get_contents(script, &commands, NULL, NULL));
    /* group 2: two runs, bestfit red and paged purple, with OOMs */
    g_assert_nonnull(strstr(commands, "gnuplot -c timeline.gp samples-2.dat timeline-2.png png "
                                      "'Memory over time\nother.trace on 256MiB (256 MiB)\nruns: "
                                      "bestfit, paged' 'time from the trace'\\''s start (ms)' "
                                      "MiB 2 "));
    g_assert_nonnull(strstr(commands, " ooms-2.dat\n"));
}

static void
test_render_png(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autofree char *out = NULL;
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) files = NULL;
    g_autofree char *compare = NULL;

    if (!have_gnuplot()) {
        g_test_skip("gnuplot not found");
        return;
    }
    dir = fsim_test_tmp_dir();
    db = make_database(dir);
    out = g_build_filename(dir, "plots", "nested", NULL);
    store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_assert_no_error(error);
    runs = fsim_plot_select_runs(store, NULL, &error);
    g_assert_no_error(error);
    files = fsim_plot_render(store, runs, out, NULL, &error);
    g_assert_no_error(error);
    check_outputs(out, files, ".png");
    check_samples_data(store, out, "samples-1.dat", (const int64_t[]){1, 2, 3}, 3);
    check_samples_data(store, out, "samples-2.dat", (const int64_t[]){4, 5}, 2);
    check_ooms_data(store, out, "ooms-2.dat", (const int64_t[]){4, 5}, 2, "MiB");
    check_compare_data(store, out, "compare-1.dat", (const int64_t[]){1, 2, 3}, 3);
    check_compare_data(store, out, "compare-2.dat", (const int64_t[]){4, 5}, 2);
    check_sizes_data(store, out, "sizes-1.dat", 1);
    check_timeline_template(out);
    /* The OOMs of the small device reach the compare data. */
    {
        g_autofree char *path = g_build_filename(out, "compare-2.dat", NULL);

        g_assert_true(g_file_get_contents(path, &compare, NULL, NULL));
        g_assert_nonnull(strstr(compare, "FAILED on "));
    }
    fsim_test_remove_tree(dir);
}

/* In SVG the title is text: the markup characters of the trace name print as written. */
static void
test_render_svg_escaped(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autofree char *out = NULL;
    g_autofree char *svg = NULL;
    g_autofree char *path = NULL;
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) files = NULL;
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
    files = fsim_plot_render(store, runs, out, &options, &error);
    g_assert_no_error(error);
    check_outputs(out, files, ".svg");
    path = g_build_filename(out, "timeline-1.svg", NULL);
    g_assert_true(g_file_get_contents(path, &svg, NULL, NULL));
    g_assert_nonnull(strstr(svg, "we_ird^{name}@x.trace"));
    fsim_test_remove_tree(dir);
}

static void
test_cli(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = make_database(dir);
    g_autofree char *out = g_build_filename(dir, "out", NULL);
    g_autofree char *notdb = g_build_filename(dir, "notes.txt", NULL);
    FsimTestRun r;

    r = fsim_test_run("plot", "--db", db, "--run", "42", "-o", out, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "no run 42"));
    fsim_test_run_clear(&r);
    r = fsim_test_run("plot", "--db", db, "--run", "6", "-o", out, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "run 6 has no data"));
    fsim_test_run_clear(&r);
    r = fsim_test_run("plot", "--db", db, "--run", "x", "-o", out, NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run("plot", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, "missing -o DIR"));
    fsim_test_run_clear(&r);
    r = fsim_test_run("plot", "--db", db, "-o", out, "--format", "gif", NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    g_assert_true(g_file_set_contents(notdb, "hello", -1, NULL));
    r = fsim_test_run("report", "--db", notdb, "-o", out, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "not a fragsim results database"));
    fsim_test_run_clear(&r);
    /* No gnuplot: a clear error naming the fix, never a crash. */
    r = fsim_test_run_env((const char *const[]){"PATH", "/nonexistent", NULL}, "plot", "--db", db,
                          "-o", out, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "gnuplot is not installed"));
    fsim_test_run_clear(&r);
    r = fsim_test_run("plot", "--db", db, "-o", out, "--gnuplot", "/nonexistent/gnuplot", NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "--gnuplot '/nonexistent/gnuplot': no such program"));
    fsim_test_run_clear(&r);
    if (have_gnuplot()) {
        g_autofree char *image = g_build_filename(out, "compare.png", NULL);

        r = fsim_test_run("plot", "--db", db, "--run", "4-5", "-o", out, NULL);
        g_assert_cmpint(r.status, ==, 0);
        g_assert_nonnull(strstr(r.out, " plots of 2 runs"));
        g_assert_true(has_png_magic(image));
        fsim_test_run_clear(&r);
    }
    fsim_test_remove_tree(dir);
}

/* Every src= and href= of the page is a file the report wrote beside it, or an anchor. */
static void
check_references(const char *out, const char *html, guint *n_images)
{
    static const char *const attributes[] = {"src=\"", "href=\""};

    *n_images = 0;
    for (gsize a = 0; a < G_N_ELEMENTS(attributes); a++) {
        for (const char *p = strstr(html, attributes[a]); p != NULL;
             p = strstr(p + 1, attributes[a])) {
            const char *start = p + strlen(attributes[a]);
            const char *end = strchr(start, '"');
            g_autofree char *target = g_strndup(start, (gsize)(end - start));
            g_autofree char *path = NULL;

            g_assert_nonnull(end);
            if (target[0] == '#')
                continue;
            g_assert_null(strchr(target, ':'));
            g_assert_null(strchr(target, '/'));
            g_assert_cmpstr(target, !=, "");
            path = g_build_filename(out, target, NULL);
            g_assert_true(g_file_test(path, G_FILE_TEST_IS_REGULAR));
            *n_images += a == 0;
        }
    }
    g_assert_null(strstr(html, "<script"));
    g_assert_null(strstr(html, "<link"));
    g_assert_null(strstr(html, "@import"));
    g_assert_null(strstr(html, "url("));
    g_assert_null(strstr(html, "http"));
}

static void
test_report(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autofree char *out = NULL;
    g_autofree char *index = NULL;
    g_autofree char *html = NULL;
    g_autofree char *warning = NULL;
    g_autoptr(FsimStore) store = NULL;
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) all = NULL;
    guint n_images;

    if (!have_gnuplot()) {
        g_test_skip("gnuplot not found");
        return;
    }
    dir = fsim_test_tmp_dir();
    db = make_database(dir);
    out = g_build_filename(dir, "report", NULL);
    store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_assert_no_error(error);
    runs = fsim_plot_select_runs(store, NULL, &error);
    all = fsim_store_runs(store, NULL, 0, &error);
    g_assert_no_error(error);
    g_assert_true(fsim_report_write(store, runs, all, out, NULL, &warning, &error));
    g_assert_no_error(error);
    g_assert_null(warning);
    index = g_build_filename(out, "index.html", NULL);
    g_assert_true(g_file_get_contents(index, &html, NULL, NULL));
    check_references(out, html, &n_images);
    g_assert_cmpuint(n_images, ==, 13);
    /* The content: names escaped for HTML, the policies, the incomplete run. */
    g_assert_nonnull(strstr(html, "we_ird^{name}@x.trace"));
    g_assert_nonnull(strstr(html, "<style>"));
    g_assert_nonnull(strstr(html, "peak_reserved_bytes"));
    g_assert_nonnull(strstr(html, "Runs without results"));
    g_assert_nonnull(strstr(html, "NVIDIA H100"));
    fsim_test_remove_tree(dir);
}

static void
test_report_without_gnuplot(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = make_database(dir);
    g_autofree char *out = g_build_filename(dir, "report", NULL);
    g_autofree char *index = g_build_filename(out, "index.html", NULL);
    g_autofree char *html = NULL;
    g_autofree char *warning = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_autoptr(GPtrArray) runs = NULL;
    FsimPlotOptions options = {.gnuplot = "/nonexistent/gnuplot"};
    guint n_images;

    g_assert_no_error(error);
    runs = fsim_plot_select_runs(store, NULL, &error);
    g_assert_no_error(error);
    g_assert_true(fsim_report_write(store, runs, NULL, out, &options, &warning, &error));
    g_assert_no_error(error);
    g_assert_nonnull(warning);
    g_assert_true(g_file_get_contents(index, &html, NULL, NULL));
    check_references(out, html, &n_images);
    g_assert_cmpuint(n_images, ==, 0);
    g_assert_nonnull(strstr(html, "No plots"));
    fsim_test_remove_tree(dir);
}

/* Render the page in headless Chromium, as a user's browser would, where it is installed. */
static void
test_report_renders(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *chromium = g_find_program_in_path("chromium");
    g_autofree char *timeout = g_find_program_in_path("timeout");
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;
    g_autofree char *out = NULL;
    g_autofree char *profile = NULL;
    g_autofree char *shot = NULL;
    g_autofree char *url = NULL;
    g_autofree char *screenshot_arg = NULL;
    g_autofree char *profile_arg = NULL;
    g_autofree char *child_out = NULL;
    g_autofree char *child_err = NULL;
    FsimTestRun r;
    int wait_status = 0;
    GStatBuf st;

    if (chromium == NULL || timeout == NULL || !have_gnuplot()) {
        g_test_skip("chromium, timeout or gnuplot not found");
        return;
    }
    dir = fsim_test_tmp_dir();
    db = make_database(dir);
    out = g_build_filename(dir, "report", NULL);
    profile = g_build_filename(dir, "profile", NULL);
    shot = g_build_filename(dir, "shot.png", NULL);
    r = fsim_test_run("report", "--db", db, "-o", out, NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);
    {
        g_autofree char *index = g_build_filename(out, "index.html", NULL);

        url = g_filename_to_uri(index, NULL, &error);
        g_assert_no_error(error);
    }
    screenshot_arg = g_strconcat("--screenshot=", shot, NULL);
    profile_arg = g_strconcat("--user-data-dir=", profile, NULL);
    {
        const char *argv[] = {timeout,
                              "120",
                              chromium,
                              "--headless",
                              "--no-sandbox",
                              "--disable-gpu",
                              "--disable-background-networking",
                              "--disable-component-update",
                              "--disable-sync",
                              "--no-first-run",
                              profile_arg,
                              screenshot_arg,
                              "--window-size=1280,2000",
                              url,
                              NULL};
        g_auto(GStrv) copy = g_strdupv((char **)(void *)argv);

        g_assert_true(g_spawn_sync(NULL, copy, NULL, G_SPAWN_DEFAULT, NULL, NULL, &child_out,
                                   &child_err, &wait_status, &error));
        g_assert_no_error(error);
    }
    if (!g_spawn_check_wait_status(wait_status, NULL) || !g_file_test(shot, G_FILE_TEST_EXISTS)) {
        g_test_message("chromium: %s", child_err);
        g_test_skip("chromium could not take a screenshot here");
        fsim_test_remove_tree(dir);
        return;
    }
    g_assert_true(has_png_magic(shot));
    g_assert_cmpint(g_stat(shot, &st), ==, 0);
    /* A blank page compresses to a few kilobytes; the report's plots and tables do not. */
    g_assert_cmpint(st.st_size, >, 50000);
    g_test_message("screenshot of the report: %" G_GINT64_FORMAT " bytes", (gint64)st.st_size);
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/plot/escape", test_escape);
    g_test_add_func("/plot/find", test_find);
    g_test_add_func("/plot/select", test_select);
    g_test_add_func("/plot/render/png", test_render_png);
    g_test_add_func("/plot/render/svg-escaped", test_render_svg_escaped);
    g_test_add_func("/plot/cli", test_cli);
    g_test_add_func("/report/self-contained", test_report);
    g_test_add_func("/report/without-gnuplot", test_report_without_gnuplot);
    g_test_add_func("/report/renders-in-chromium", test_report_renders);
    return g_test_run();
}
