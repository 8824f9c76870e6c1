/* SPDX-License-Identifier: MIT */
/*
 * The results database: the schema and its identity checks, a run's data read back (metrics
 * equal to the engine's, bounded samples that keep the exact peaks), runs in lock step, the bad
 * inputs (a file that is not fragsim's, a newer schema, a full disk, a read-only location, a run
 * that does not exist), and the crash guarantee: a real `fragsim replay --db` process killed with
 * SIGKILL half way leaves a readable database in which its run is marked incomplete.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <signal.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fragsim/fragsim.h"
#include "fragsim/store.h"

#include "test-util.h"

/* ---- helpers ------------------------------------------------------------------------------- */

/* A deterministic workload: allocations of mixed sizes, freed in random order, with marks. */
typedef struct {
    GRand *rand;
    GArray *live; /* uint64_t ids */
    uint64_t next_id;
    uint64_t index;
    uint64_t n_events;
} Workload;

static void
workload_init(Workload *w, uint32_t seed, uint64_t n_events)
{
    w->rand = g_rand_new_with_seed(seed);
    w->live = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    w->next_id = 1;
    w->index = 0;
    w->n_events = n_events;
}

static void
workload_clear(Workload *w)
{
    g_rand_free(w->rand);
    g_array_unref(w->live);
}

static gboolean
workload_next(gpointer data, FsimEvent *ev, GError **error)
{
    static const uint64_t sizes[] = {512, 4096, 1 << 20, 3 << 20, 20 << 20, 50 << 20};
    Workload *w = data;

    (void)error;
    if (w->index >= w->n_events)
        return FALSE;
    memset(ev, 0, sizeof(*ev));
    ev->index = w->index;
    ev->time = w->index * 1000;
    w->index++;
    if (ev->index % 1000 == 999) {
        ev->kind = FSIM_EV_MARK;
        ev->label = "step";
    } else if (w->live->len < 20 || (w->live->len < 60 && g_rand_boolean(w->rand))) {
        ev->kind = FSIM_EV_ALLOC;
        ev->id = w->next_id++;
        ev->size = sizes[g_rand_int_range(w->rand, 0, G_N_ELEMENTS(sizes))] +
                   (uint64_t)g_rand_int_range(w->rand, 0, 4096);
        g_array_append_val(w->live, ev->id);
    } else {
        guint i = (guint)g_rand_int_range(w->rand, 0, (gint32)w->live->len);

        ev->kind = FSIM_EV_FREE;
        ev->id = g_array_index(w->live, uint64_t, i);
        g_array_remove_index_fast(w->live, i);
    }
    return TRUE;
}

static FsimEngine *
new_engine(const char *policy, const char *device)
{
    g_autoptr(GError) error = NULL;
    FsimRunConfig config;
    FsimEngine *engine;

    fsim_run_config_init(&config);
    config.policy = policy;
    config.paranoid = FALSE;
    g_assert_true(fsim_device_spec_parse(device, &config.device, &error));
    g_assert_no_error(error);
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    return engine;
}

static FsimStoreRun *
attach(FsimStore *store, FsimEngine *engine, const char *policy, guint max_samples)
{
    g_autoptr(GError) error = NULL;
    FsimStoreLimits limits = {.max_samples = max_samples};
    FsimStoreRunInfo info = {
        .trace = "generated/workload_1.trace",
        .trace_format = "text",
        .trace_device = 0,
        .policy = policy,
        .knobs = "bestfit.alignment=256\n",
        .seed = 7,
        .limits = &limits,
    };
    FsimStoreRun *run = fsim_store_attach(store, engine, &info, &error);

    g_assert_no_error(error);
    g_assert_nonnull(run);
    return run;
}

/* Replay @n_events of the workload through @policy into @store; returns the run id. */
static int64_t
store_one_run(FsimStore *store, const char *policy, uint64_t n_events, guint max_samples,
              FsimMetrics *metrics_out)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimEngine) engine = new_engine(policy, "h100-80gb");
    g_autoptr(FsimStoreRun) run = attach(store, engine, policy, max_samples);
    Workload w;

    workload_init(&w, 42, n_events);
    g_assert_true(fsim_engine_run(engine, workload_next, &w, &error));
    g_assert_no_error(error);
    workload_clear(&w);
    g_assert_true(fsim_store_run_finish(run, FSIM_STORE_COMPLETE, &error));
    g_assert_no_error(error);
    if (metrics_out != NULL)
        *metrics_out = *fsim_engine_metrics(engine);
    return fsim_store_run_id(run);
}

static FsimStoredRun *
get_run(FsimStore *store, int64_t id)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) runs = fsim_store_runs(store, &id, 1, &error);

    g_assert_no_error(error);
    g_assert_cmpuint(runs->len, ==, 1);
    return g_ptr_array_steal_index(runs, 0);
}

/* ---- schema and identity ------------------------------------------------------------------- */

static void
test_schema(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "results.db", NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *version = NULL;
    g_autofree char *app = NULL;
    g_autofree char *mode = NULL;
    g_autofree char *columns = NULL;
    g_autofree char *expected = NULL;
    g_autoptr(GString) names = g_string_new(NULL);
    gsize n;
    const FsimMetricInfo *info = fsim_metrics_list(&n);

    {
        g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_WRITE, NULL, &error);

        g_assert_no_error(error);
        g_assert_nonnull(store);
    }
    version = fsim_test_sql_text(path, "PRAGMA user_version");
    g_assert_cmpstr(version, ==, G_STRINGIFY(FSIM_STORE_SCHEMA_VERSION));
    app = fsim_test_sql_text(path, "PRAGMA application_id");
    expected = g_strdup_printf("%d", FSIM_STORE_APPLICATION_ID);
    g_assert_cmpstr(app, ==, expected);
    mode = fsim_test_sql_text(path, "PRAGMA journal_mode");
    g_assert_cmpstr(mode, ==, "wal");
    /* run_metrics has exactly the FSIM_METRICS names after run_id, in order. */
    columns = fsim_test_sql_text(
        path, "SELECT group_concat(name, ',') FROM "
              "(SELECT name FROM pragma_table_info('run_metrics') ORDER BY cid)");
    g_string_append(names, "run_id");
    for (gsize i = 0; i < n; i++)
        g_string_append_printf(names, ",%s", info[i].name);
    g_assert_cmpstr(columns, ==, names->str);
    /* Reopening for writing and reading works and changes nothing. */
    {
        g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_WRITE, NULL, &error);

        g_assert_no_error(error);
        g_assert_nonnull(store);
    }
    {
        g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_READ, NULL, &error);
        g_autoptr(GPtrArray) runs = NULL;

        g_assert_no_error(error);
        runs = fsim_store_runs(store, NULL, 0, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(runs->len, ==, 0);
    }
    fsim_test_remove_tree(dir);
}

/* A database written when FSIM_METRICS had fewer names gains the new columns on open. */
static void
test_schema_new_metric(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "old.db", NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *present = NULL;

    {
        g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_WRITE, NULL, &error);

        g_assert_no_error(error);
        store_one_run(store, "bestfit", 300, 0, NULL);
    }
    /* As a version 1 database: no views (they would name the column), one metric less. */
    fsim_test_sql_exec(path,
                       "DROP VIEW run_results; DROP VIEW phase_results; DROP VIEW run_samples; "
                       "DROP VIEW run_ooms; DROP TABLE run_breakdown; DROP TABLE run_phases; "
                       "ALTER TABLE run_metrics DROP COLUMN double_frees; PRAGMA user_version = 1");
    {
        /* Read-only: the missing column reads as NULL (0). */
        g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_READ, NULL, &error);
        g_autoptr(FsimStoredRun) run = NULL;

        g_assert_no_error(error);
        run = get_run(store, 1);
        g_assert_cmpuint(run->metrics.double_frees, ==, 0);
        g_assert_cmpuint(run->metrics.events, ==, 300);
    }
    {
        g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_WRITE, NULL, &error);

        g_assert_no_error(error);
        g_assert_nonnull(store);
    }
    present = fsim_test_sql_text(path, "SELECT count(*) FROM pragma_table_info('run_metrics') "
                                       "WHERE name = 'double_frees'");
    g_assert_cmpstr(present, ==, "1");
    /* ... and the tables and views of schema version 2, which read it. */
    g_free(present);
    present = fsim_test_sql_text(
        path, "SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema "
              "WHERE name IN ('run_breakdown', 'run_phases', 'run_results', "
              "'run_samples', 'run_ooms', 'phase_results') ORDER BY name)");
    g_assert_cmpstr(present, ==,
                    "phase_results,run_breakdown,run_ooms,run_phases,run_results,run_samples");
    g_free(present);
    present = fsim_test_sql_text(
        path, "SELECT coalesce(double_frees, 'null') || '/' || events FROM run_results");
    g_assert_cmpstr(present, ==, "null/300");
    g_free(present);
    present = fsim_test_sql_text(path, "PRAGMA user_version");
    g_assert_cmpstr(present, ==, G_STRINGIFY(FSIM_STORE_SCHEMA_VERSION));
    fsim_test_remove_tree(dir);
}

static gboolean
files_equal(const char *a, const char *b)
{
    g_autofree char *x = NULL;
    g_autofree char *y = NULL;
    gsize nx, ny;

    g_assert_true(g_file_get_contents(a, &x, &nx, NULL));
    g_assert_true(g_file_get_contents(b, &y, &ny, NULL));
    return nx == ny && memcmp(x, y, nx) == 0;
}

static void
test_not_fragsim(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *text = g_build_filename(dir, "notes.txt", NULL);
    g_autofree char *other = g_build_filename(dir, "other.db", NULL);
    g_autofree char *copy = g_build_filename(dir, "other.copy", NULL);
    g_autofree char *contents = NULL;
    g_autofree char *wal = g_strconcat(other, "-wal", NULL);
    gsize length;
    g_autoptr(GError) error = NULL;
    FsimStore *store;

    g_assert_true(g_file_set_contents(text,
                                      "this is not a database, but long enough to look "
                                      "like a header of one hundred bytes or more............",
                                      -1, NULL));
    store = fsim_store_open(text, FSIM_STORE_WRITE, NULL, &error);
    g_assert_null(store);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NOT_FRAGSIM);
    g_assert_nonnull(strstr(error->message, "notes.txt"));
    g_assert_nonnull(strstr(error->message, "not a fragsim results database"));
    g_clear_error(&error);
    store = fsim_store_open(text, FSIM_STORE_READ, NULL, &error);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NOT_FRAGSIM);
    g_clear_error(&error);

    /* Another program's SQLite database: refused, and left byte for byte as it was. */
    fsim_test_sql_exec(other,
                       "CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('ada');");
    g_assert_true(g_file_get_contents(other, &contents, &length, NULL));
    g_assert_true(g_file_set_contents(copy, contents, (gssize)length, NULL));
    store = fsim_store_open(other, FSIM_STORE_WRITE, NULL, &error);
    g_assert_null(store);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NOT_FRAGSIM);
    g_assert_nonnull(strstr(error->message, "another program"));
    g_clear_error(&error);
    g_assert_true(files_equal(other, copy));
    g_assert_false(g_file_test(wal, G_FILE_TEST_EXISTS));

    /* An empty file is not a database to read. */
    g_assert_true(g_file_set_contents(copy, "", 0, NULL));
    store = fsim_store_open(copy, FSIM_STORE_READ, NULL, &error);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NOT_FRAGSIM);
    g_clear_error(&error);
    fsim_test_remove_tree(dir);
}

static void
test_newer(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "future.db", NULL);
    g_autoptr(GError) error = NULL;
    FsimStore *store;

    store = fsim_store_open(path, FSIM_STORE_WRITE, NULL, &error);
    g_assert_no_error(error);
    fsim_store_close(store);
    fsim_test_sql_exec(path, "PRAGMA user_version = 99");
    store = fsim_store_open(path, FSIM_STORE_WRITE, NULL, &error);
    g_assert_null(store);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NEWER);
    g_assert_nonnull(strstr(error->message, "newer fragsim"));
    g_assert_nonnull(strstr(error->message, "99"));
    g_clear_error(&error);
    store = fsim_store_open(path, FSIM_STORE_READ, NULL, &error);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NEWER);
    fsim_test_remove_tree(dir);
}

static void
test_open_errors(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *missing = g_build_filename(dir, "missing.db", NULL);
    g_autofree char *nested = g_build_filename(dir, "no", "such", "dir.db", NULL);
    g_autoptr(GError) error = NULL;
    FsimStore *store;

    store = fsim_store_open(missing, FSIM_STORE_READ, NULL, &error);
    g_assert_null(store);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN);
    g_assert_nonnull(strstr(error->message, "no such results database"));
    g_assert_false(g_file_test(missing, G_FILE_TEST_EXISTS));
    g_clear_error(&error);

    store = fsim_store_open(nested, FSIM_STORE_WRITE, NULL, &error);
    g_assert_null(store);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN);
    g_assert_nonnull(strstr(error->message, "dir.db"));
    g_clear_error(&error);

    store = fsim_store_open(dir, FSIM_STORE_WRITE, NULL, &error);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_OPEN);
    g_clear_error(&error);

    /* A store opened for reading refuses runs. */
    {
        g_autoptr(FsimStore) writer = fsim_store_open(missing, FSIM_STORE_WRITE, NULL, &error);
        g_autoptr(FsimStore) reader = NULL;
        g_autoptr(FsimEngine) engine = new_engine("bestfit", "h100-80gb");
        FsimStoreRunInfo info = {.trace = "t", .policy = "bestfit", .seed = -1};

        g_assert_no_error(error);
        g_assert_nonnull(writer);
        reader = fsim_store_open(missing, FSIM_STORE_READ, NULL, &error);
        g_assert_no_error(error);
        g_assert_null(fsim_store_attach(reader, engine, &info, &error));
        g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_READ_ONLY);
    }
    fsim_test_remove_tree(dir);
}

/* ---- a run's data -------------------------------------------------------------------------- */

static void
check_samples(FsimStore *store, int64_t id, const FsimMetrics *m, guint max_samples)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GArray) samples = fsim_store_samples(store, id, &error);
    uint64_t events = 0, req = 0, alloc = 0, res = 0;
    uint64_t next_index = 0;

    g_assert_no_error(error);
    g_assert_cmpuint(samples->len, <=, max_samples + 1);
    if (m->events >= max_samples)
        g_assert_cmpuint(samples->len, >=, max_samples / 2);
    for (guint i = 0; i < samples->len; i++) {
        const FsimStoredSample *s = &g_array_index(samples, FsimStoredSample, i);

        /* Buckets tile the events without gaps or overlaps. */
        g_assert_cmpuint(s->event_index, ==, next_index);
        g_assert_cmpuint(s->event_index_last - s->event_index + 1, ==, s->events);
        next_index = s->event_index_last + 1;
        g_assert_cmpuint(s->requested_min, <=, s->requested);
        g_assert_cmpuint(s->requested, <=, s->requested_max);
        g_assert_cmpuint(s->reserved_min, <=, s->reserved);
        g_assert_cmpuint(s->reserved, <=, s->reserved_max);
        g_assert_cmpuint(s->allocated_min, <=, s->allocated_max);
        events += s->events;
        req = MAX(req, s->requested_max);
        alloc = MAX(alloc, s->allocated_max);
        res = MAX(res, s->reserved_max);
    }
    g_assert_cmpuint(events, ==, m->events);
    /* The peaks survive the bucketing exactly. */
    g_assert_cmpuint(req, ==, m->peak_requested_bytes);
    g_assert_cmpuint(alloc, ==, m->peak_allocated_bytes);
    g_assert_cmpuint(res, ==, m->peak_reserved_bytes);
}

static void
test_run_roundtrip(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(":memory:", FSIM_STORE_WRITE, NULL, &error);
    g_autoptr(FsimStoredRun) run = NULL;
    g_autoptr(GArray) segments = NULL;
    g_autoptr(GArray) blocks = NULL;
    g_autoptr(GArray) marks = NULL;
    g_autoptr(GArray) sizes = NULL;
    g_autoptr(GArray) ooms = NULL;
    FsimMetrics m;
    int64_t id;
    uint64_t count = 0;
    gsize n;
    const FsimMetricInfo *info = fsim_metrics_list(&n);

    g_assert_no_error(error);
    id = store_one_run(store, "direct", 5000, 100, &m);
    g_assert_cmpint(id, ==, 1);
    run = get_run(store, id);
    g_assert_cmpstr(run->trace, ==, "generated/workload_1.trace");
    g_assert_cmpstr(run->trace_format, ==, "text");
    g_assert_cmpstr(run->policy, ==, "direct");
    g_assert_cmpstr(run->device, ==, "h100-80gb");
    g_assert_cmpstr(run->knobs, ==, "bestfit.alignment=256\n");
    g_assert_cmpint(run->seed, ==, 7);
    g_assert_cmpint(run->status, ==, FSIM_STORE_COMPLETE);
    g_assert_true(fsim_stored_run_has_data(run));
    g_assert_nonnull(run->finished_at);
    g_assert_cmpuint(strlen(run->fragsim_version), >, 0);
    g_assert_true(run->has_metrics);
    /* Every metric reads back as the engine computed it. */
    for (gsize i = 0; i < n; i++) {
        double a = fsim_metric_get_double(&m, &info[i]);
        double b = fsim_metric_get_double(&run->metrics, &info[i]);

        g_assert_cmpfloat(a, ==, b);
    }
    check_samples(store, id, &m, 100);

    segments = fsim_store_segments(store, id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(segments->len, ==, m.device_mallocs + m.device_frees);
    g_assert_cmpuint(run->segment_actions, ==, segments->len);
    g_assert_cmpuint(run->segment_actions_stored, ==, segments->len);
    for (guint i = 0; i < segments->len; i++) {
        const FsimStoredSegment *s = &g_array_index(segments, FsimStoredSegment, i);

        g_assert_true(s->action == FSIM_CALL_MEM_ALLOC || s->action == FSIM_CALL_MEM_FREE);
        g_assert_cmpuint(s->size % (2 * FSIM_MiB), ==, 0);
    }

    blocks = fsim_store_blocks(store, id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(blocks->len, ==, m.allocs - m.ooms);
    g_assert_cmpuint(run->blocks, ==, blocks->len);
    for (guint i = 0; i < blocks->len; i++) {
        const FsimStoredBlock *b = &g_array_index(blocks, FsimStoredBlock, i);

        g_assert_cmpuint(b->size, >=, b->requested);
        g_assert_cmpint(b->alloc_event, >=, 0);
        if (b->free_event >= 0)
            g_assert_cmpint(b->free_event, >, b->alloc_event);
        if (i > 0)
            g_assert_cmpint(g_array_index(blocks, FsimStoredBlock, i - 1).alloc_event, <=,
                            b->alloc_event);
    }

    marks = fsim_store_marks(store, id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(marks->len, ==, 5);
    g_assert_cmpstr(g_array_index(marks, FsimStoredMark, 0).label, ==, "step");
    g_assert_cmpuint(g_array_index(marks, FsimStoredMark, 0).event_index, ==, 999);

    sizes = fsim_store_sizes(store, id, &error);
    g_assert_no_error(error);
    for (guint i = 0; i < sizes->len; i++)
        count += g_array_index(sizes, FsimStoredSizeBucket, i).count;
    g_assert_cmpuint(count, ==, m.allocs);
    g_assert_cmpuint(g_array_index(sizes, FsimStoredSizeBucket, 0).log2, ==, 9); /* 512 B */

    ooms = fsim_store_ooms(store, id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(ooms->len, ==, 0);
}

/* ---- every column, on a run worked out by hand ---------------------------------------------- */

/* What the engine told its observers, to compare the stored rows with. */
typedef struct {
    GArray *blocks;   /* FsimStoredBlock, in allocation order */
    GArray *segments; /* FsimStoredSegment */
} Seen;

static void
seen_alloc(gpointer data, const FsimEngine *engine, const FsimEvent *ev, uint64_t id,
           const FsimBlock *block, uint64_t requested)
{
    Seen *seen = data;
    FsimStoredBlock b = {
        id, block->addr, block->size, requested, ev->stream, (int64_t)ev->index, ev->time, -1, 0};

    (void)engine;
    g_array_append_val(seen->blocks, b);
}

static void
seen_release(gpointer data, const FsimEngine *engine, uint64_t id, const FsimBlock *block,
             uint64_t requested)
{
    Seen *seen = data;
    const FsimEngineCounters *c = fsim_engine_counters(engine);

    for (guint i = 0; i < seen->blocks->len; i++) {
        FsimStoredBlock *b = &g_array_index(seen->blocks, FsimStoredBlock, i);

        if (b->id == id && b->free_event < 0) {
            g_assert_cmpuint(b->addr, ==, block->addr);
            g_assert_cmpuint(b->requested, ==, requested);
            b->free_event = (int64_t)c->event_index;
            b->free_time = c->now;
        }
    }
}

static void
seen_device_call(gpointer data, const FsimEngine *engine, FsimDeviceCall call, FsimAddr addr,
                 uint64_t size)
{
    Seen *seen = data;
    const FsimEngineCounters *c = fsim_engine_counters(engine);
    FsimStoredSegment segment = {(int64_t)c->event_index, c->now, call, addr, size};

    g_array_append_val(seen->segments, segment);
}

static const FsimObserver seen_observer = {
    .alloc = seen_alloc,
    .release = seen_release,
    .device_call = seen_device_call,
};

/*
 * caching on a 64 MiB device (2 MiB pages), one sample per event:
 *   0 t=100  alloc #1 1000 B, stream 0: a 2 MiB small segment, a 1024-byte block
 *   1 t=200  mark "phase"
 *   2 t=300  alloc #2 3 MiB, stream 7: a 20 MiB large segment
 *   3 t=400  free #1
 *   4 t=500  alloc #3 100 MiB: the cached small segment is released, still an OOM
 *   5 t=600  alloc #4 1 B: a new small segment, a 512-byte block
 */
static void
test_run_every_column(void)
{
    static const uint64_t sizes[] = {1000, 0, 3 * FSIM_MiB, 0, 100 * FSIM_MiB, 1};
    static const uint64_t ids[] = {1, 0, 2, 1, 3, 4};
    static const FsimEventKind kinds[] = {FSIM_EV_ALLOC, FSIM_EV_MARK,  FSIM_EV_ALLOC,
                                          FSIM_EV_FREE,  FSIM_EV_ALLOC, FSIM_EV_ALLOC};
    /* requested, allocated and reserved after each event */
    static const uint64_t after[6][3] = {
        {1000, 1024, 2 * FSIM_MiB},
        {1000, 1024, 2 * FSIM_MiB},
        {1000 + 3 * FSIM_MiB, 1024 + 3 * FSIM_MiB, 22 * FSIM_MiB},
        {3 * FSIM_MiB, 3 * FSIM_MiB, 22 * FSIM_MiB},
        {3 * FSIM_MiB, 3 * FSIM_MiB, 20 * FSIM_MiB},
        {3 * FSIM_MiB + 1, 3 * FSIM_MiB + 512, 22 * FSIM_MiB},
    };
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(":memory:", FSIM_STORE_WRITE, NULL, &error);
    g_autoptr(FsimEngine) engine = new_engine("caching", "64MiB");
    g_autoptr(FsimStoreRun) handle = NULL;
    g_autoptr(FsimStoredRun) run = NULL;
    g_autoptr(GArray) samples = NULL, segments = NULL, blocks = NULL, marks = NULL;
    g_autoptr(GArray) buckets = NULL, ooms = NULL;
    Seen seen = {g_array_new(FALSE, FALSE, sizeof(FsimStoredBlock)),
                 g_array_new(FALSE, FALSE, sizeof(FsimStoredSegment))};
    FsimStoreLimits limits = {.max_samples = 100};
    FsimStoreRunInfo info = {.trace = "hand.trace",
                             .trace_format = "pytorch",
                             .trace_device = 3,
                             .policy = "caching",
                             .knobs = "caching.x=1\n",
                             .seed = -1,
                             .limits = &limits};
    gsize n_ooms;
    const FsimOomRecord *oom;
    FsimMetrics m;
    gsize n;
    const FsimMetricInfo *info_list = fsim_metrics_list(&n);

    g_assert_no_error(error);
    fsim_engine_add_observer(engine, &seen_observer, &seen);
    handle = fsim_store_attach(store, engine, &info, &error);
    g_assert_no_error(error);
    for (guint i = 0; i < G_N_ELEMENTS(kinds); i++) {
        FsimEvent ev = {.index = i,
                        .time = 100 * (i + 1),
                        .kind = kinds[i],
                        .id = ids[i],
                        .size = sizes[i],
                        .stream = i == 2 ? 7 : 0,
                        .label = kinds[i] == FSIM_EV_MARK ? "phase" : NULL};

        g_assert_true(fsim_engine_process(engine, &ev, &error));
        g_assert_no_error(error);
    }
    g_assert_true(fsim_engine_finish(engine, &error));
    g_assert_true(fsim_store_run_finish(handle, FSIM_STORE_OOM, &error));
    g_assert_no_error(error);
    m = *fsim_engine_metrics(engine);
    oom = fsim_engine_ooms(engine, &n_ooms);
    g_assert_cmpuint(n_ooms, ==, 1);

    /* runs */
    run = get_run(store, fsim_store_run_id(handle));
    g_assert_cmpint(run->id, ==, 1);
    g_assert_cmpstr(run->trace, ==, "hand.trace");
    g_assert_cmpstr(run->trace_format, ==, "pytorch");
    g_assert_cmpuint(run->trace_device, ==, 3);
    g_assert_cmpstr(run->policy, ==, "caching");
    g_assert_cmpstr(run->device, ==, "64MiB");
    g_assert_nonnull(run->device_description);
    g_assert_cmpuint(run->capacity_bytes, ==, 64 * FSIM_MiB);
    g_assert_cmpuint(run->total_bytes, >=, run->capacity_bytes);
    g_assert_cmpuint(run->granularity, ==, 2 * FSIM_MiB);
    g_assert_cmpstr(run->knobs, ==, "caching.x=1\n");
    g_assert_cmpint(run->seed, ==, -1);
    g_assert_cmpint(run->status, ==, FSIM_STORE_OOM);
    g_assert_null(run->message);
    g_assert_nonnull(run->created_at);
    g_assert_nonnull(run->finished_at);
    g_assert_cmpstr(run->created_at, <=, run->finished_at);
    g_assert_cmpuint(strlen(run->fragsim_version), >, 0);
    g_assert_cmpuint(run->segment_actions, ==, 4);
    g_assert_cmpuint(run->segment_actions_stored, ==, 4);
    g_assert_cmpuint(run->blocks, ==, 3);
    g_assert_cmpuint(run->blocks_stored, ==, 3);
    g_assert_true(run->has_metrics);
    for (gsize i = 0; i < n; i++)
        g_assert_cmpfloat(fsim_metric_get_double(&m, &info_list[i]), ==,
                          fsim_metric_get_double(&run->metrics, &info_list[i]));
    g_assert_cmpuint(run->metrics.ooms, ==, 1);
    g_assert_cmpuint(run->metrics.peak_reserved_bytes, ==, 22 * FSIM_MiB);

    /* samples: one an event */
    samples = fsim_store_samples(store, run->id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(samples->len, ==, 6);
    for (guint i = 0; i < samples->len; i++) {
        const FsimStoredSample *x = &g_array_index(samples, FsimStoredSample, i);

        g_assert_cmpuint(x->event_index, ==, i);
        g_assert_cmpuint(x->event_index_last, ==, i);
        g_assert_cmpuint(x->events, ==, 1);
        g_assert_cmpuint(x->time, ==, 100 * (i + 1));
        g_assert_cmpuint(x->time_last, ==, 100 * (i + 1));
        g_assert_cmpuint(x->requested, ==, after[i][0]);
        g_assert_cmpuint(x->requested_min, ==, after[i][0]);
        g_assert_cmpuint(x->requested_max, ==, after[i][0]);
        g_assert_cmpuint(x->allocated, ==, after[i][1]);
        g_assert_cmpuint(x->allocated_min, ==, after[i][1]);
        g_assert_cmpuint(x->allocated_max, ==, after[i][1]);
        g_assert_cmpuint(x->reserved, ==, after[i][2]);
        g_assert_cmpuint(x->reserved_min, ==, after[i][2]);
        g_assert_cmpuint(x->reserved_max, ==, after[i][2]);
    }

    /* segments: cudaMalloc 2 MiB, cudaMalloc 20 MiB, cudaFree 2 MiB (the OOM's release),
     * cudaMalloc 2 MiB; as the engine called them */
    segments = fsim_store_segments(store, run->id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(segments->len, ==, seen.segments->len);
    g_assert_cmpuint(segments->len, ==, 4);
    {
        static const guint actions[] = {FSIM_CALL_MEM_ALLOC, FSIM_CALL_MEM_ALLOC,
                                        FSIM_CALL_MEM_FREE, FSIM_CALL_MEM_ALLOC};
        static const int64_t events[] = {0, 2, 4, 5};
        static const uint64_t bytes[] = {2 * FSIM_MiB, 20 * FSIM_MiB, 2 * FSIM_MiB, 2 * FSIM_MiB};

        for (guint i = 0; i < segments->len; i++) {
            const FsimStoredSegment *a = &g_array_index(segments, FsimStoredSegment, i);
            const FsimStoredSegment *b = &g_array_index(seen.segments, FsimStoredSegment, i);

            g_assert_cmpuint(a->action, ==, actions[i]);
            g_assert_cmpint(a->event_index, ==, events[i]);
            g_assert_cmpuint(a->time, ==, 100 * (uint64_t)(events[i] + 1));
            g_assert_cmpuint(a->size, ==, bytes[i]);
            g_assert_cmpuint(a->addr, ==, b->addr);
            g_assert_cmpuint(a->size, ==, b->size);
        }
        /* the OOM released the first segment */
        g_assert_cmpuint(g_array_index(segments, FsimStoredSegment, 2).addr, ==,
                         g_array_index(segments, FsimStoredSegment, 0).addr);
    }

    /* blocks: #1 freed, #2 and #4 alive at the end (freed "at" the run's last time) */
    blocks = fsim_store_blocks(store, run->id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(blocks->len, ==, 3);
    g_assert_cmpuint(seen.blocks->len, ==, 3);
    {
        static const uint64_t want[3][8] = {
            /* id, size, requested, stream, alloc event, alloc time, free event + 1, free time */
            {1, 1024, 1000, 0, 0, 100, 4, 400},
            {2, 3 * FSIM_MiB, 3 * FSIM_MiB, 7, 2, 300, 0, 600},
            {4, 512, 1, 0, 5, 600, 0, 600},
        };

        for (guint i = 0; i < blocks->len; i++) {
            const FsimStoredBlock *b = &g_array_index(blocks, FsimStoredBlock, i);
            const FsimStoredBlock *e = &g_array_index(seen.blocks, FsimStoredBlock, i);

            g_assert_cmpuint(b->id, ==, want[i][0]);
            g_assert_cmpuint(b->size, ==, want[i][1]);
            g_assert_cmpuint(b->requested, ==, want[i][2]);
            g_assert_cmpuint(b->stream, ==, want[i][3]);
            g_assert_cmpint(b->alloc_event, ==, (int64_t)want[i][4]);
            g_assert_cmpuint(b->alloc_time, ==, want[i][5]);
            g_assert_cmpint(b->free_event, ==, (int64_t)want[i][6] - 1);
            g_assert_cmpuint(b->free_time, ==, want[i][7]);
            g_assert_cmpuint(b->addr, ==, e->addr);
            g_assert_cmpuint(b->id, ==, e->id);
            g_assert_cmpuint(b->size, ==, e->size);
            g_assert_cmpuint(b->requested, ==, e->requested);
            g_assert_cmpint(b->free_event, ==, e->free_event);
        }
        /* #1 sat at the start of the first segment */
        g_assert_cmpuint(g_array_index(blocks, FsimStoredBlock, 0).addr, ==,
                         g_array_index(segments, FsimStoredSegment, 0).addr);
    }

    /* marks */
    marks = fsim_store_marks(store, run->id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(marks->len, ==, 1);
    g_assert_cmpuint(g_array_index(marks, FsimStoredMark, 0).event_index, ==, 1);
    g_assert_cmpuint(g_array_index(marks, FsimStoredMark, 0).time, ==, 200);
    g_assert_cmpstr(g_array_index(marks, FsimStoredMark, 0).label, ==, "phase");

    /* sizes: 1 B, 1000 B, 3 MiB and 100 MiB (the OOM's request counts too) */
    buckets = fsim_store_sizes(store, run->id, &error);
    g_assert_no_error(error);
    {
        static const uint64_t want[4][2] = {
            {0, 1}, {9, 1000}, {21, 3 * FSIM_MiB}, {26, 100 * FSIM_MiB}};

        g_assert_cmpuint(buckets->len, ==, 4);
        for (guint i = 0; i < buckets->len; i++) {
            const FsimStoredSizeBucket *b = &g_array_index(buckets, FsimStoredSizeBucket, i);

            g_assert_cmpuint(b->log2, ==, want[i][0]);
            g_assert_cmpuint(b->count, ==, 1);
            g_assert_cmpuint(b->bytes, ==, want[i][1]);
        }
    }

    /* ooms: the engine's record, field by field */
    ooms = fsim_store_ooms(store, run->id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(ooms->len, ==, 1);
    {
        const FsimOomRecord *o = &g_array_index(ooms, FsimOomRecord, 0);

        g_assert_cmpuint(o->event_index, ==, 4);
        g_assert_cmpuint(o->time, ==, 500);
        g_assert_cmpuint(o->id, ==, 3);
        g_assert_cmpuint(o->size, ==, 100 * FSIM_MiB);
        g_assert_cmpuint(o->stream, ==, 0);
        g_assert_cmpuint(o->reserved_bytes, ==, oom->reserved_bytes);
        g_assert_cmpuint(o->allocated_bytes, ==, 3 * FSIM_MiB);
        g_assert_cmpuint(o->requested_bytes, ==, 3 * FSIM_MiB);
        g_assert_cmpuint(o->largest_free_block, ==, oom->largest_free_block);
        g_assert_cmpuint(o->device_free_bytes, ==, oom->device_free_bytes);
        g_assert_cmpuint(o->reserved_bytes, ==, 20 * FSIM_MiB);
        g_assert_cmpuint(o->largest_free_block, ==, 17 * FSIM_MiB);
        g_assert_cmpuint(o->device_free_bytes, ==, 44 * FSIM_MiB);
    }
    g_array_unref(seen.blocks);
    g_array_unref(seen.segments);
}

/* Few samples: buckets merge many times, the peaks still survive. */
static void
test_samples_bounded(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(":memory:", FSIM_STORE_WRITE, NULL, &error);
    static const guint limits[] = {2, 7, 64, 1000};

    g_assert_no_error(error);
    for (gsize i = 0; i < G_N_ELEMENTS(limits); i++) {
        FsimMetrics m;
        int64_t id = store_one_run(store, "bestfit", 20000, limits[i], &m);

        check_samples(store, id, &m, limits[i] + (limits[i] & 1));
    }
}

/* Keeping only the largest blocks (by size x lifetime) for address maps. */
static void
test_blocks_bounded(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(":memory:", FSIM_STORE_WRITE, NULL, &error);
    g_autoptr(FsimEngine) engine = new_engine("bestfit", "h100-80gb");
    FsimStoreLimits limits = {.max_blocks = 3, .max_segment_actions = 2};
    FsimStoreRunInfo info = {
        .trace = "t", .trace_format = "text", .policy = "bestfit", .seed = -1, .limits = &limits};
    g_autoptr(FsimStoreRun) run = fsim_store_attach(store, engine, &info, &error);
    g_autoptr(GArray) blocks = NULL;
    g_autoptr(FsimStoredRun) stored = NULL;
    /* id, size, lifetime: the big long-lived ones 2, 4 and 6 must be kept */
    static const struct {
        uint64_t id, size;
        gboolean free;
    } steps[] = {
        {1, 1 << 20, TRUE},   {2, 64 << 20, FALSE}, {3, 2 << 20, TRUE},
        {4, 32 << 20, FALSE}, {5, 1 << 10, TRUE},   {6, 16 << 20, FALSE},
    };
    uint64_t index = 0;

    g_assert_no_error(error);
    for (gsize i = 0; i < G_N_ELEMENTS(steps); i++) {
        FsimEvent ev = {.index = index,
                        .time = index,
                        .kind = FSIM_EV_ALLOC,
                        .id = steps[i].id,
                        .size = steps[i].size};

        g_assert_true(fsim_engine_process(engine, &ev, &error));
        index++;
        if (steps[i].free) {
            FsimEvent fr = {.index = index, .time = index, .kind = FSIM_EV_FREE, .id = steps[i].id};

            g_assert_true(fsim_engine_process(engine, &fr, &error));
            index++;
        }
    }
    g_assert_true(fsim_engine_finish(engine, &error));
    g_assert_true(fsim_store_run_finish(run, FSIM_STORE_COMPLETE, &error));
    g_assert_no_error(error);
    blocks = fsim_store_blocks(store, fsim_store_run_id(run), &error);
    g_assert_no_error(error);
    g_assert_cmpuint(blocks->len, ==, 3);
    g_assert_cmpuint(g_array_index(blocks, FsimStoredBlock, 0).id, ==, 2);
    g_assert_cmpuint(g_array_index(blocks, FsimStoredBlock, 1).id, ==, 4);
    g_assert_cmpuint(g_array_index(blocks, FsimStoredBlock, 2).id, ==, 6);
    g_assert_cmpint(g_array_index(blocks, FsimStoredBlock, 2).free_event, ==, -1);
    stored = get_run(store, fsim_store_run_id(run));
    g_assert_cmpuint(stored->blocks, ==, 6);
    g_assert_cmpuint(stored->blocks_stored, ==, 3);
    g_assert_cmpuint(stored->segment_actions_stored, <=, 2);
    g_assert_cmpuint(stored->segment_actions, >=, stored->segment_actions_stored);
}

typedef struct {
    uint64_t id, size;
    int64_t alloc_event, end_event;
    double area;
} KeptBlock;

/* The store's order of blocks to keep: larger area first, then the earlier allocation. */
static gint
kept_greater_first(gconstpointer a, gconstpointer b)
{
    const KeptBlock *x = a;
    const KeptBlock *y = b;

    if (x->area != y->area)
        return x->area > y->area ? -1 : 1;
    if (x->alloc_event != y->alloc_event)
        return x->alloc_event < y->alloc_event ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : 0;
}

static gint
kept_by_alloc(gconstpointer a, gconstpointer b)
{
    const KeptBlock *x = a;
    const KeptBlock *y = b;

    return x->alloc_event < y->alloc_event ? -1 : x->alloc_event > y->alloc_event ? 1 : 0;
}

/* Many more blocks than are kept (the candidates are cut down by selections): the kept ones are
 * exactly the max_blocks largest by size x lifetime, ties to the earlier allocation. */
static void
test_blocks_bounded_many(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(":memory:", FSIM_STORE_WRITE, NULL, &error);
    g_autoptr(FsimEngine) engine = new_engine("bestfit", "h100-80gb");
    FsimStoreLimits limits = {.max_blocks = 7};
    FsimStoreRunInfo info = {
        .trace = "t", .trace_format = "text", .policy = "bestfit", .seed = -1, .limits = &limits};
    g_autoptr(FsimStoreRun) run = fsim_store_attach(store, engine, &info, &error);
    g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(KeptBlock));
    g_autoptr(GArray) live = g_array_new(FALSE, FALSE, sizeof(guint));
    g_autoptr(GArray) blocks = NULL;
    g_autoptr(GRand) rand = g_rand_new_with_seed(77);
    int64_t index = 0;

    g_assert_no_error(error);
    for (uint64_t id = 1; id <= 600; id++) {
        /* few sizes, so that areas tie and the tie-break counts */
        KeptBlock b = {id, (uint64_t)g_rand_int_range(rand, 1, 4) << 20, index, -1, 0};
        FsimEvent ev = {.index = (uint64_t)index,
                        .time = (uint64_t)index,
                        .kind = FSIM_EV_ALLOC,
                        .id = id,
                        .size = b.size};
        guint at = all->len;

        g_assert_true(fsim_engine_process(engine, &ev, &error));
        index++;
        g_array_append_val(all, b);
        g_array_append_val(live, at);
        while (live->len > 0 && g_rand_int_range(rand, 0, 3) == 0) {
            guint k = (guint)g_rand_int_range(rand, 0, (gint32)live->len);
            KeptBlock *f = &g_array_index(all, KeptBlock, g_array_index(live, guint, k));
            FsimEvent fr = {.index = (uint64_t)index,
                            .time = (uint64_t)index,
                            .kind = FSIM_EV_FREE,
                            .id = f->id};

            g_assert_true(fsim_engine_process(engine, &fr, &error));
            f->end_event = index++;
            g_array_remove_index_fast(live, k);
        }
    }
    g_assert_true(fsim_engine_finish(engine, &error));
    g_assert_true(fsim_store_run_finish(run, FSIM_STORE_COMPLETE, &error));
    g_assert_no_error(error);
    for (guint i = 0; i < all->len; i++) {
        KeptBlock *b = &g_array_index(all, KeptBlock, i);
        int64_t end = b->end_event >= 0 ? b->end_event : index - 1;

        b->area = (double)b->size * (double)(end - b->alloc_event + 1);
    }
    g_array_sort(all, kept_greater_first);
    g_array_set_size(all, 7);
    g_array_sort(all, kept_by_alloc);
    blocks = fsim_store_blocks(store, fsim_store_run_id(run), &error);
    g_assert_no_error(error);
    g_assert_cmpuint(blocks->len, ==, 7);
    for (guint i = 0; i < 7; i++)
        g_assert_cmpuint(g_array_index(blocks, FsimStoredBlock, i).id, ==,
                         g_array_index(all, KeptBlock, i).id);
}

/* Several runs in lock step on one connection: each is written at its own finish. */
static void
test_lock_step(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(":memory:", FSIM_STORE_WRITE, NULL, &error);
    static const char *const policies[] = {"direct", "bestfit", "paged"};
    FsimEngine *engines[3];
    FsimStoreRun *runs[3];
    Workload w;
    FsimEvent ev;
    g_autoptr(GPtrArray) stored = NULL;

    g_assert_no_error(error);
    for (int i = 0; i < 3; i++) {
        engines[i] = new_engine(policies[i], "h100-80gb");
        runs[i] = attach(store, engines[i], policies[i], 0);
    }
    workload_init(&w, 3, 3000);
    while (workload_next(&w, &ev, NULL))
        for (int i = 0; i < 3; i++)
            g_assert_true(fsim_engine_process(engines[i], &ev, &error));
    workload_clear(&w);
    /* The middle one finishes first, the first one fails: the others are unaffected. */
    g_assert_true(fsim_engine_finish(engines[1], &error));
    g_assert_true(fsim_store_run_finish(runs[1], FSIM_STORE_COMPLETE, &error));
    fsim_store_run_fail(runs[0], "broken on purpose");
    g_assert_true(fsim_engine_finish(engines[2], &error));
    g_assert_true(fsim_store_run_finish(runs[2], FSIM_STORE_COMPLETE, &error));
    g_assert_no_error(error);
    stored = fsim_store_runs(store, NULL, 0, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(stored->len, ==, 3);
    g_assert_cmpint(((FsimStoredRun *)stored->pdata[0])->status, ==, FSIM_STORE_FAILED);
    g_assert_cmpstr(((FsimStoredRun *)stored->pdata[0])->message, ==, "broken on purpose");
    g_assert_false(((FsimStoredRun *)stored->pdata[0])->has_metrics);
    g_assert_cmpint(((FsimStoredRun *)stored->pdata[1])->status, ==, FSIM_STORE_COMPLETE);
    g_assert_cmpint(((FsimStoredRun *)stored->pdata[2])->status, ==, FSIM_STORE_COMPLETE);
    g_assert_cmpstr(((FsimStoredRun *)stored->pdata[2])->policy, ==, "paged");
    for (int i = 0; i < 3; i++) {
        fsim_store_run_free(runs[i]);
        fsim_engine_free(engines[i]);
    }
}

/* A run dropped without finishing (the replay failed) is marked failed and has no data. */
static void
test_abandoned(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(":memory:", FSIM_STORE_WRITE, NULL, &error);
    g_autoptr(FsimStoredRun) run = NULL;
    g_autoptr(GArray) samples = NULL;
    int64_t id;

    g_assert_no_error(error);
    {
        g_autoptr(FsimEngine) engine = new_engine("bestfit", "h100-80gb");
        g_autoptr(FsimStoreRun) r = attach(store, engine, "bestfit", 0);
        Workload w;
        FsimEvent ev;

        workload_init(&w, 1, 100);
        while (workload_next(&w, &ev, NULL))
            g_assert_true(fsim_engine_process(engine, &ev, &error));
        workload_clear(&w);
        id = fsim_store_run_id(r);
    }
    run = get_run(store, id);
    g_assert_cmpint(run->status, ==, FSIM_STORE_FAILED);
    g_assert_false(fsim_stored_run_has_data(run));
    samples = fsim_store_samples(store, id, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(samples->len, ==, 0);
}

static void
test_no_such_run(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(":memory:", FSIM_STORE_WRITE, NULL, &error);
    int64_t ids[] = {1, 42};
    GPtrArray *runs;

    g_assert_no_error(error);
    store_one_run(store, "bestfit", 100, 0, NULL);
    runs = fsim_store_runs(store, ids, 2, &error);
    g_assert_null(runs);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_NO_RUN);
    g_assert_nonnull(strstr(error->message, "no run 42"));
}

static void
test_parse_run_ids(void)
{
    static const struct {
        const char *text;
        const char *expected; /* NULL: a usage error */
    } cases[] = {
        {"3", "3"},
        {"1,4,7", "1 4 7"},
        {"2-5,9", "2 3 4 5 9"},
        {" 7 , 2-3 ", "7 2 3"},
        {"4,4,3-4", "4 3"},
        {"", NULL},
        {"0", NULL},
        {"5-2", NULL},
        {"a", NULL},
        {"1,,2", NULL},
        {"-3", NULL},
        {"1-", NULL},
        {"1-99999999", NULL},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(GArray) ids = NULL;
        g_autoptr(GString) text = g_string_new(NULL);
        gboolean ok = fsim_store_parse_run_ids(cases[i].text, &ids, &error);

        if (cases[i].expected == NULL) {
            g_assert_false(ok);
            g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
            continue;
        }
        g_assert_no_error(error);
        for (guint j = 0; j < ids->len; j++)
            g_string_append_printf(text, "%s%" G_GINT64_FORMAT, j ? " " : "",
                                   g_array_index(ids, int64_t, j));
        g_assert_cmpstr(text->str, ==, cases[i].expected);
    }
}

/* A full disk, simulated by a page limit: the failing write is an error, and the run in the
 * database is marked failed (or left running), never complete. */
static void
test_full_disk(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "full.db", NULL);
    g_autoptr(GError) error = NULL;
    int64_t id;

    {
        g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_WRITE, NULL, &error);

        g_assert_no_error(error);
        g_assert_nonnull(store);
    }
    {
        /* The schema fits in a few pages; the run's data does not fit in a few more. */
        g_autofree char *pages = fsim_test_sql_text(path, "PRAGMA page_count");
        FsimStoreOptions options = {.max_page_count = g_ascii_strtoull(pages, NULL, 10) + 2};
        g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_WRITE, &options, &error);
        g_autoptr(FsimEngine) engine = new_engine("direct", "h100-80gb");
        g_autoptr(FsimStoreRun) run = NULL;
        Workload w;

        g_assert_no_error(error);
        run = attach(store, engine, "direct", 0);
        id = fsim_store_run_id(run);
        workload_init(&w, 5, 20000);
        g_assert_true(fsim_engine_run(engine, workload_next, &w, &error));
        workload_clear(&w);
        g_assert_false(fsim_store_run_finish(run, FSIM_STORE_COMPLETE, &error));
        g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_FULL);
        g_assert_nonnull(strstr(error->message, "full.db"));
        g_assert_nonnull(strstr(error->message, "full"));
        g_clear_error(&error);
    }
    {
        g_autoptr(FsimStore) store = fsim_store_open(path, FSIM_STORE_READ, NULL, &error);
        g_autoptr(FsimStoredRun) run = NULL;
        g_autoptr(GArray) samples = NULL;
        g_autofree char *check = fsim_test_sql_text(path, "PRAGMA integrity_check");

        g_assert_no_error(error);
        g_assert_cmpstr(check, ==, "ok");
        run = get_run(store, id);
        g_assert_cmpint(run->status, !=, FSIM_STORE_COMPLETE);
        g_assert_false(run->has_metrics);
        samples = fsim_store_samples(store, id, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(samples->len, ==, 0);
    }
    fsim_test_remove_tree(dir);
}

/* A new database that cannot even get its schema is removed again. */
static void
test_full_disk_new_file(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "tiny.db", NULL);
    g_autoptr(GError) error = NULL;
    FsimStoreOptions options = {.max_page_count = 2};
    FsimStore *store = fsim_store_open(path, FSIM_STORE_WRITE, &options, &error);

    g_assert_null(store);
    g_assert_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_FULL);
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
    fsim_test_remove_tree(dir);
}

/* ---- through the command line -------------------------------------------------------------- */

/* Write a text trace of @n_events: allocations and frees of a few hundred live blocks. */
static void
write_trace(const char *path, uint64_t n_events)
{
    g_autoptr(GString) text = g_string_new("fragsim-trace v1\n");
    Workload w;
    FsimEvent ev;

    workload_init(&w, 11, n_events);
    while (workload_next(&w, &ev, NULL)) {
        if (ev.kind == FSIM_EV_ALLOC)
            g_string_append_printf(
                text, "%" G_GUINT64_FORMAT " alloc %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " 0\n",
                ev.time, ev.id, ev.size);
        else if (ev.kind == FSIM_EV_FREE)
            g_string_append_printf(text, "%" G_GUINT64_FORMAT " free %" G_GUINT64_FORMAT " 0\n",
                                   ev.time, ev.id);
        else
            g_string_append_printf(text, "%" G_GUINT64_FORMAT " mark %s\n", ev.time, ev.label);
    }
    workload_clear(&w);
    g_assert_true(g_file_set_contents(path, text->str, (gssize)text->len, NULL));
}

static void
test_cli_append(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "results.db", NULL);
    g_autofree char *trace = g_build_filename(dir, "small.trace", NULL);
    g_autofree char *count = NULL;
    g_autofree char *devices = NULL;
    FsimTestRun r;

    write_trace(trace, 2000);
    r = fsim_test_run("replay", trace, "-p", "bestfit,paged", "--db", db, "--samples", "50", NULL);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_nonnull(strstr(r.out, "runs 1-2 written to"));
    fsim_test_run_clear(&r);
    /* Another device, appended; --json keeps stdout pure JSON. */
    r = fsim_test_run("replay", trace, "-p", "direct", "-d", "t4-16gb", "--db", db, "--json", NULL);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_true(r.out[0] == '{');
    g_assert_nonnull(strstr(r.err, "run 3 written to"));
    fsim_test_run_clear(&r);
    count = fsim_test_sql_text(db, "SELECT count(*) FROM runs WHERE status = 'complete'");
    g_assert_cmpstr(count, ==, "3");
    devices = fsim_test_sql_text(db, "SELECT group_concat(device, ',') FROM runs");
    g_assert_cmpstr(devices, ==, "h100-80gb,h100-80gb,t4-16gb");
    g_free(count);
    count = fsim_test_sql_text(db, "SELECT max(seq) + 1 FROM samples WHERE run_id = 1");
    g_assert_cmpuint(g_ascii_strtoull(count, NULL, 10), <=, 51);

    r = fsim_test_run("replay", trace, "--samples", "10", NULL);
    g_assert_cmpint(r.status, ==, 2);
    g_assert_nonnull(strstr(r.err, "--samples needs --db"));
    fsim_test_run_clear(&r);
    fsim_test_remove_tree(dir);
}

static void
test_cli_bad_databases(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *trace = g_build_filename(dir, "small.trace", NULL);
    g_autofree char *notdb = g_build_filename(dir, "notes.db", NULL);
    g_autofree char *fresh = g_build_filename(dir, "fresh.db", NULL);
    g_autofree char *status = NULL;
    /* A location nobody may write to, not even root. */
    const char *readonly = geteuid() == 0 ? "/proc/fragsim-results.db" : "/fragsim-results.db";
    const char *const full_env[] = {"FRAGSIM_DB_MAX_PAGES", "12", NULL};
    FsimTestRun r;

    write_trace(trace, 3000);
    g_assert_true(g_file_set_contents(notdb, "name,size\nada,12\n", -1, NULL));
    r = fsim_test_run("replay", trace, "--db", notdb, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "not a fragsim results database"));
    g_assert_nonnull(strstr(r.err, "notes.db"));
    fsim_test_run_clear(&r);

    r = fsim_test_run("replay", trace, "--db", readonly, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "cannot create the results database"));
    g_assert_false(g_file_test(readonly, G_FILE_TEST_EXISTS));
    fsim_test_run_clear(&r);

    /* A full disk while the runs are written: exit 1, and no run looks complete. */
    r = fsim_test_run_env(full_env, "replay", trace, "-p", "direct", "--db", fresh, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "disk is full"));
    g_assert_null(strstr(r.out, "written to"));
    fsim_test_run_clear(&r);
    if (g_file_test(fresh, G_FILE_TEST_EXISTS)) {
        status = fsim_test_sql_text(fresh, "SELECT group_concat(status) FROM runs");
        g_assert_cmpstr(status, ==, "failed");
    }
    fsim_test_remove_tree(dir);
}

/* ---- the kill test ------------------------------------------------------------------------- */

/* Whether the child has run far enough to be killed. */
typedef gboolean (*KillPoint)(const char *db);

/* Both runs of the child (ids 2 and 3) are recorded as started: its replay is under way. */
static gboolean
runs_started(const char *db)
{
    sqlite3 *handle = NULL;
    sqlite3_stmt *stmt = NULL;
    int64_t value = 0;

    if (!g_file_test(db, G_FILE_TEST_EXISTS))
        return FALSE;
    if (sqlite3_open_v2(db, &handle, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_busy_timeout(handle, 1000) == SQLITE_OK &&
        sqlite3_prepare_v2(handle, "SELECT count(*) FROM runs WHERE id >= 2", -1, &stmt, NULL) ==
            SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
        value = sqlite3_column_int64(stmt, 0);
    /* Failures here (no schema yet) just mean: poll again. */
    (void)sqlite3_finalize(stmt);
    (void)sqlite3_close(handle);
    return value >= 2;
}

/* The child is writing its runs' data: its uncommitted transaction has spilled more than a
 * megabyte of pages into the write-ahead log (the run rows alone take a few kilobytes). */
static gboolean
data_being_written(const char *db)
{
    g_autofree char *wal = g_strconcat(db, "-wal", NULL);
    GStatBuf st;

    return g_stat(wal, &st) == 0 && st.st_size > 1024 * 1024;
}

/* Spawn `fragsim replay TRACE -p POLICIES --db DB`, wait for @point, SIGKILL it.  Returns FALSE
 * when the child finished before the point was seen. */
static gboolean
kill_replay(const char *db, const char *trace, const char *policies, KillPoint point)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GStrvBuilder) builder = g_strv_builder_new();
    g_auto(GStrv) argv = NULL;
    GPid pid;
    int wait_status = 0;
    gboolean reached;

    g_strv_builder_add_many(builder, fsim_test_binary(), "replay", trace, "-p", policies, "--db",
                            db, NULL);
    argv = g_strv_builder_end(builder);
    g_assert_true(g_spawn_async(NULL, argv, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                                &pid, &error));
    g_assert_no_error(error);
    for (;;) {
        reached = point(db);
        if (reached || waitpid(pid, &wait_status, WNOHANG) == pid)
            break;
        g_usleep(1000);
    }
    if (reached) {
        g_assert_cmpint(kill(pid, SIGKILL), ==, 0);
        g_assert_cmpint(waitpid(pid, &wait_status, 0), ==, pid);
        g_assert_true(WIFSIGNALED(wait_status));
        g_assert_cmpint(WTERMSIG(wait_status), ==, SIGKILL);
    }
    g_spawn_close_pid(pid);
    return reached;
}

/* Every run before @killed_from complete with data; those from it on (the killed process's)
 * still `running` without any data.  The file passes SQLite's integrity check. */
static void
check_after_kill(const char *db, int64_t killed_from, int64_t killed_to)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimStore) store = fsim_store_open(db, FSIM_STORE_READ, NULL, &error);
    g_autoptr(GPtrArray) runs = NULL;
    g_autofree char *check = fsim_test_sql_text(db, "PRAGMA integrity_check");

    g_assert_cmpstr(check, ==, "ok");
    g_assert_no_error(error);
    runs = fsim_store_runs(store, NULL, 0, &error);
    g_assert_no_error(error);
    for (guint i = 0; i < runs->len; i++) {
        const FsimStoredRun *run = runs->pdata[i];
        g_autoptr(GArray) samples = fsim_store_samples(store, run->id, &error);
        g_autoptr(GArray) segments = fsim_store_segments(store, run->id, &error);

        g_assert_no_error(error);
        g_test_message("run %" G_GINT64_FORMAT ": %s, %u samples, %u segment actions", run->id,
                       fsim_store_status_name(run->status), samples->len, segments->len);
        if (run->id < killed_from || run->id > killed_to) {
            g_assert_cmpint(run->status, ==, FSIM_STORE_COMPLETE);
            g_assert_true(run->has_metrics);
            g_assert_cmpuint(samples->len, >, 0);
            continue;
        }
        g_assert_cmpint(run->status, ==, FSIM_STORE_RUNNING);
        g_assert_false(fsim_stored_run_has_data(run));
        g_assert_false(run->has_metrics);
        g_assert_null(run->finished_at);
        g_assert_cmpuint(samples->len, ==, 0);
        g_assert_cmpuint(segments->len, ==, 0);
    }
}

static void
test_kill(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "results.db", NULL);
    g_autofree char *small = g_build_filename(dir, "small.trace", NULL);
    g_autofree char *big = g_build_filename(dir, "big.trace", NULL);
    g_autofree char *status = NULL;
    FsimTestRun r;

    write_trace(small, 1000);
    write_trace(big, 1500000);
    /* One complete run first: the kills must not hurt it. */
    r = fsim_test_run("replay", small, "-p", "bestfit", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 0);
    fsim_test_run_clear(&r);

    /* Killed while replaying, as soon as its two runs (2 and 3) are recorded as started. */
    g_assert_true(kill_replay(db, big, "direct,paged", runs_started));
    check_after_kill(db, 2, 3);
    status = fsim_test_sql_text(db, "SELECT group_concat(status) FROM runs WHERE id >= 2");
    g_assert_cmpstr(status, ==, "running,running");

    /* Killed while writing its run's data (run 4): the transaction is rolled back on the next
     * open.  Should the child finish first on a very fast machine, run 4 is complete; either
     * way the checks below hold. */
    if (kill_replay(db, big, "direct", data_being_written)) {
        check_after_kill(db, 2, 4);
    } else {
        g_test_message("the replay finished before it was caught writing; run 4 complete");
        check_after_kill(db, 2, 3);
    }

    /* The database takes new runs after the crashes. */
    r = fsim_test_run("replay", small, "-p", "paged", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_nonnull(strstr(r.out, "run 5 written to"));
    fsim_test_run_clear(&r);
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/store/schema", test_schema);
    g_test_add_func("/store/schema/new-metric", test_schema_new_metric);
    g_test_add_func("/store/bad/not-fragsim", test_not_fragsim);
    g_test_add_func("/store/bad/newer", test_newer);
    g_test_add_func("/store/bad/open", test_open_errors);
    g_test_add_func("/store/bad/no-such-run", test_no_such_run);
    g_test_add_func("/store/bad/full-disk", test_full_disk);
    g_test_add_func("/store/bad/full-disk-new-file", test_full_disk_new_file);
    g_test_add_func("/store/run/roundtrip", test_run_roundtrip);
    g_test_add_func("/store/run/every-column", test_run_every_column);
    g_test_add_func("/store/run/samples-bounded", test_samples_bounded);
    g_test_add_func("/store/run/blocks-bounded", test_blocks_bounded);
    g_test_add_func("/store/run/blocks-bounded-many", test_blocks_bounded_many);
    g_test_add_func("/store/run/lock-step", test_lock_step);
    g_test_add_func("/store/run/abandoned", test_abandoned);
    g_test_add_func("/store/parse-run-ids", test_parse_run_ids);
    g_test_add_func("/store/cli/append", test_cli_append);
    g_test_add_func("/store/cli/bad-databases", test_cli_bad_databases);
    g_test_add_func("/store/kill", test_kill);
    return g_test_run();
}
