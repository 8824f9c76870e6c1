/* SPDX-License-Identifier: MIT */
/*
 * The memory_viz export: a simulated run written as a PyTorch snapshot reads back with
 * fragsim's own `torch` reader with one trace entry per simulated action, and replays through the
 * same policy to the same figures (so its trace and final state agree, as MemoryViz needs them
 * to); CPython's restricted unpickler loads it with only MemoryViz's opcodes; a failed or
 * abandoned export leaves no file.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>

#include "fragsim/fragsim.h"
#include "fragsim/memviz.h"

#include "test-util.h"

static guint
count_files(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    guint n = 0;

    while (d != NULL && g_dir_read_name(d) != NULL)
        n++;
    return n;
}

/*
 * A workload with every kind of input: allocations of mixed sizes on two streams, ordinary frees,
 * deferred (stream-ordered) frees completed later, empty_cache calls and marks.
 */
typedef struct {
    GRand *rand;
    GArray *live;     /* uint64_t */
    GArray *deferred; /* uint64_t ids freed but not completed */
    uint64_t next_id;
    uint64_t index;
    uint64_t n_events;
} Workload;

static void
workload_init(Workload *w, uint64_t n_events)
{
    w->rand = g_rand_new_with_seed(17);
    w->live = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    w->deferred = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    w->next_id = 1;
    w->index = 0;
    w->n_events = n_events;
}

static void
workload_clear(Workload *w)
{
    g_rand_free(w->rand);
    g_array_unref(w->live);
    g_array_unref(w->deferred);
}

static gboolean
workload_next(gpointer data, FsimEvent *ev, GError **error)
{
    static const uint64_t sizes[] = {512, 8192, 600 << 10, 3 << 20, 12 << 20, 40 << 20};
    Workload *w = data;

    (void)error;
    if (w->index >= w->n_events)
        return FALSE;
    memset(ev, 0, sizeof(*ev));
    ev->index = w->index;
    ev->time = 5000 + w->index * 3000;
    w->index++;
    if (ev->index % 500 == 250) {
        ev->kind = FSIM_EV_EMPTY_CACHE;
    } else if (ev->index % 200 == 100) {
        ev->kind = FSIM_EV_MARK;
        ev->label = "step";
    } else if (w->deferred->len > 0 && g_rand_int_range(w->rand, 0, 4) == 0) {
        ev->kind = FSIM_EV_FREE_COMPLETED;
        ev->id = g_array_index(w->deferred, uint64_t, 0);
        ev->stream = 7;
        g_array_remove_index(w->deferred, 0);
    } else if (w->live->len < 15 || (w->live->len < 50 && g_rand_boolean(w->rand))) {
        ev->kind = FSIM_EV_ALLOC;
        ev->id = w->next_id++;
        ev->size = sizes[g_rand_int_range(w->rand, 0, G_N_ELEMENTS(sizes))] +
                   (uint64_t)g_rand_int_range(w->rand, 0, 2048);
        ev->stream = ev->id % 5 == 0 ? 7 : 0;
        g_array_append_val(w->live, ev->id);
    } else {
        guint i = (guint)g_rand_int_range(w->rand, 0, (gint32)w->live->len);

        ev->kind = FSIM_EV_FREE;
        ev->id = g_array_index(w->live, uint64_t, i);
        ev->stream = ev->id % 5 == 0 ? 7 : 0;
        g_array_remove_index_fast(w->live, i);
        if (ev->stream == 7) {
            ev->flags = FSIM_EVF_DEFERRED;
            g_array_append_val(w->deferred, ev->id);
        }
    }
    return TRUE;
}

static FsimEngine *
new_engine(const char *policy, const char *device, const FsimInitialState *state)
{
    g_autoptr(GError) error = NULL;
    FsimRunConfig config;
    FsimEngine *engine;

    fsim_run_config_init(&config);
    config.policy = policy;
    config.initial_state = state;
    g_assert_true(fsim_device_spec_parse(device, &config.device, &error));
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    return engine;
}

static gboolean
stream_next(gpointer data, FsimEvent *ev, GError **error)
{
    return fsim_trace_stream_next(data, ev, error);
}

/* Replay device 0 of the trace at @path through @policy. */
static FsimMetrics
replay_file(const char *path, const char *policy, const char *device)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(FsimEngine) engine = NULL;

    g_assert_no_error(error);
    stream = fsim_trace_stream_open(trace, 0, &error);
    g_assert_no_error(error);
    engine = new_engine(policy, device, fsim_trace_initial_state(trace, 0));
    fsim_engine_run(engine, stream_next, stream, &error);
    g_assert_no_error(error);
    return *fsim_engine_metrics(engine);
}

static gboolean
have_torch_reader(void)
{
    gsize n;
    const FsimTraceFormat *const *formats = fsim_trace_formats(&n);

    for (gsize i = 0; i < n; i++)
        if (strcmp(formats[i]->name, "torch") == 0)
            return TRUE;
    return FALSE;
}

/* Export the workload run through @policy; check what the reader sees. */
static void
test_roundtrip(gconstpointer data)
{
    const char *policy = data;
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "run.pickle", NULL);
    g_autoptr(FsimEngine) engine = new_engine(policy, "h100-80gb", NULL);
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceInfo) info = NULL;
    const FsimTraceDeviceInfo *dev;
    FsimMetrics m, again;
    uint64_t matched_frees, still_pending;
    Workload w;

    if (!have_torch_reader()) {
        g_test_skip("the torch reader is not built");
        fsim_test_remove_tree(dir);
        return;
    }
    {
        g_autoptr(FsimMemvizExport) exporter = fsim_memviz_export_new(path, engine, 0, &error);

        g_assert_no_error(error);
        workload_init(&w, 6000);
        g_assert_true(fsim_engine_run(engine, workload_next, &w, &error));
        g_assert_no_error(error);
        still_pending = w.deferred->len;
        workload_clear(&w);
        g_assert_true(fsim_memviz_export_finish(exporter, &error));
        g_assert_no_error(error);
        g_assert_cmpstr(fsim_memviz_export_path(exporter), ==, path);
    }
    g_assert_cmpuint(count_files(dir), ==, 1);
    m = *fsim_engine_metrics(engine);
    g_assert_cmpuint(m.ooms, ==, 0);
    g_assert_cmpuint(m.unmatched_frees + m.double_frees, ==, 0);

    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(fsim_trace_format_name(trace), ==, "torch");
    info = fsim_trace_describe(trace, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(info->devices->len, ==, 1);
    dev = &g_array_index(info->devices, FsimTraceDeviceInfo, 0);
    /* One entry per simulated action. */
    matched_frees = m.frees;
    g_assert_cmpuint(fsim_test_action_count(dev, "alloc"), ==, m.allocs);
    g_assert_cmpuint(fsim_test_action_count(dev, "free_requested"), ==, matched_frees);
    /* Deferred frees not completed by the end have no free_completed. */
    g_assert_cmpuint(still_pending, >, 0);
    g_assert_cmpuint(fsim_test_action_count(dev, "free_completed"), ==,
                     matched_frees - still_pending);
    g_assert_cmpuint(fsim_test_action_count(dev, "segment_alloc"), ==, m.device_mallocs);
    g_assert_cmpuint(fsim_test_action_count(dev, "segment_free"), ==, m.device_frees);
    g_assert_cmpuint(fsim_test_action_count(dev, "segment_map"), ==, m.device_maps);
    g_assert_cmpuint(fsim_test_action_count(dev, "segment_unmap"), ==, m.device_unmaps);
    g_assert_cmpuint(fsim_test_action_count(dev, "oom"), ==, 0);
    /* The final state is the device memory the policy holds at the end. */
    g_assert_cmpuint(dev->reserved_bytes, ==,
                     (uint64_t)fsim_engine_device(engine)->reserved.current);
    /* The same policy on the exported snapshot: the same run. */
    again = replay_file(path, policy, "h100-80gb");
    g_assert_cmpuint(again.allocs, ==, m.allocs);
    g_assert_cmpuint(again.frees, ==, m.frees);
    g_assert_cmpuint(again.unmatched_frees, ==, 0);
    g_assert_cmpuint(again.peak_requested_bytes, ==, m.peak_requested_bytes);
    g_assert_cmpuint(again.peak_allocated_bytes, ==, m.peak_allocated_bytes);
    g_assert_cmpuint(again.peak_reserved_bytes, ==, m.peak_reserved_bytes);
    fsim_test_remove_tree(dir);
}

/* A recorded snapshot that starts mid-run: its initial state survives the export. */
static void
test_seeded(gconstpointer data)
{
    const char *policy = data;
    g_autoptr(GError) error = NULL;
    g_autofree char *source =
        g_test_build_filename(G_TEST_DIST, "data", "traces", "ok-torch-minimal.pickle", NULL);
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    FsimMetrics m, again;

    if (!have_torch_reader() || !g_file_test(source, G_FILE_TEST_EXISTS)) {
        g_test_skip("no torch reader or no ok-torch-minimal.pickle");
        return;
    }
    dir = fsim_test_tmp_dir();
    path = g_build_filename(dir, "seeded.pickle", NULL);
    trace = fsim_trace_open(source, &error);
    g_assert_no_error(error);
    stream = fsim_trace_stream_open(trace, 0, &error);
    g_assert_no_error(error);
    engine = new_engine(policy, "h100-80gb", fsim_trace_initial_state(trace, 0));
    {
        g_autoptr(FsimMemvizExport) exporter = fsim_memviz_export_new(path, engine, 0, &error);

        g_assert_no_error(error);
        g_assert_true(fsim_engine_run(engine, stream_next, stream, &error));
        g_assert_no_error(error);
        g_assert_true(fsim_memviz_export_finish(exporter, &error));
        g_assert_no_error(error);
    }
    m = *fsim_engine_metrics(engine);
    again = replay_file(path, policy, "h100-80gb");
    g_assert_cmpuint(again.allocs, ==, m.allocs);
    g_assert_cmpuint(again.peak_requested_bytes, ==, m.peak_requested_bytes);
    g_assert_cmpuint(again.peak_reserved_bytes, ==, m.peak_reserved_bytes);
    fsim_test_remove_tree(dir);
}

/* An OOM is an `oom` entry with the free device memory, no address. */
static void
test_oom(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "oom.pickle", NULL);
    g_autoptr(FsimEngine) engine = new_engine("bestfit", "256MiB", NULL);
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceInfo) info = NULL;
    Workload w;

    if (!have_torch_reader()) {
        g_test_skip("the torch reader is not built");
        fsim_test_remove_tree(dir);
        return;
    }
    {
        g_autoptr(FsimMemvizExport) exporter = fsim_memviz_export_new(path, engine, 2, &error);

        g_assert_no_error(error);
        workload_init(&w, 3000);
        g_assert_true(fsim_engine_run(engine, workload_next, &w, &error));
        workload_clear(&w);
        g_assert_true(fsim_memviz_export_finish(exporter, &error));
        g_assert_no_error(error);
    }
    g_assert_cmpuint(fsim_engine_metrics(engine)->ooms, >, 0);
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    info = fsim_trace_describe(trace, &error);
    g_assert_no_error(error);
    /* Recorded under device index 2, as asked. */
    g_assert_cmpuint(g_array_index(info->devices, FsimTraceDeviceInfo, 0).device, ==, 2);
    g_assert_cmpuint(
        fsim_test_action_count(&g_array_index(info->devices, FsimTraceDeviceInfo, 0), "oom"), ==,
        fsim_engine_metrics(engine)->ooms);
    fsim_test_remove_tree(dir);
}

static const char python_check[] =
    "import collections, io, json, pickle, pickletools, sys\n"
    "ALLOWED = set(b'}](eaasltdsuqrhjJKMNGX).') | {0x80, 0x8c, 0x8a, 0x94, 0x95, 0x85, 0x86,"
    " 0x87, 0x88, 0x89}\n"
    "class Restricted(pickle.Unpickler):\n"
    "    def find_class(self, module, name):\n"
    "        raise pickle.UnpicklingError('global ' + module + '.' + name)\n"
    "data = open(sys.argv[1], 'rb').read()\n"
    "for op, arg, pos in pickletools.genops(data):\n"
    "    if ord(op.code) not in ALLOWED:\n"
    "        sys.exit('opcode %s at %d is not one MemoryViz reads' % (op.name, pos))\n"
    "    if op.name == 'PROTO' and arg > 4:\n"
    "        sys.exit('protocol %d' % arg)\n"
    "snap = Restricted(io.BytesIO(data)).load()\n"
    "assert sorted(snap) == ['allocator_settings', 'device_traces', 'segments'], sorted(snap)\n"
    "actions = collections.Counter(e['action'] for e in snap['device_traces'][0])\n"
    "for e in snap['device_traces'][0]:\n"
    "    assert set(e) >= {'action', 'size', 'stream', 'time_us', 'frames'}, e\n"
    "for s in snap['segments']:\n"
    "    assert sum(b['size'] for b in s['blocks']) == s['total_size'], s['address']\n"
    "print(json.dumps({'actions': actions, 'segments': len(snap['segments'])}))\n";

/* CPython's unpickler, refusing any global, reads the snapshot; only MemoryViz's opcodes. */
static void
test_python(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *python = g_find_program_in_path("python3");
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autofree char *expected = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    int status = 0;
    Workload w;

    if (python == NULL) {
        g_test_skip("python3 not found");
        return;
    }
    dir = fsim_test_tmp_dir();
    path = g_build_filename(dir, "run.pickle", NULL);
    engine = new_engine("caching", "h100-80gb", NULL);
    {
        g_autoptr(FsimMemvizExport) exporter = fsim_memviz_export_new(path, engine, 0, &error);

        g_assert_no_error(error);
        workload_init(&w, 4000);
        g_assert_true(fsim_engine_run(engine, workload_next, &w, &error));
        workload_clear(&w);
        g_assert_true(fsim_memviz_export_finish(exporter, &error));
        g_assert_no_error(error);
    }
    {
        const char *argv[] = {python, "-c", python_check, path, NULL};
        g_auto(GStrv) copy = g_strdupv((char **)(void *)argv);

        g_assert_true(g_spawn_sync(NULL, copy, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                                   &status, &error));
        g_assert_no_error(error);
    }
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("python3 refused the snapshot: %s", err);
    expected =
        g_strdup_printf("\"alloc\": %" G_GUINT64_FORMAT, fsim_engine_metrics(engine)->allocs);
    g_assert_nonnull(strstr(out, expected));
    fsim_test_remove_tree(dir);
}

static void
test_abandon(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "run.pickle", NULL);
    g_autofree char *bad = g_build_filename(dir, "missing", "run.pickle", NULL);
    g_autoptr(FsimEngine) engine = new_engine("paged", "h100-80gb", NULL);
    FsimMemvizExport *exporter;
    Workload w;

    exporter = fsim_memviz_export_new(path, engine, 0, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(count_files(dir), ==, 1); /* the temporary file */
    workload_init(&w, 500);
    g_assert_true(fsim_engine_run(engine, workload_next, &w, &error));
    workload_clear(&w);
    fsim_memviz_export_free(exporter);
    g_assert_cmpuint(count_files(dir), ==, 0);

    exporter = fsim_memviz_export_new(bad, engine, 0, &error);
    g_assert_null(exporter);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "missing"));
    fsim_test_remove_tree(dir);
}

static void
test_cli(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "run.pickle", NULL);
    g_autofree char *trace = g_build_filename(dir, "t.trace", NULL);
    g_auto(FsimTestRun) run = {0};

    g_assert_true(g_file_set_contents(trace,
                                      "fragsim-trace v1\n0 alloc 1 4096 0\n10 alloc 2 "
                                      "3000000 0\n20 free 1 0\n30 mark done\n",
                                      -1, NULL));
    run = fsim_test_run("replay", trace, "-p", "bestfit,paged", "--export-snapshot", path, NULL);
    g_assert_cmpint(run.status, ==, 2);
    g_assert_nonnull(strstr(run.err, "--export-snapshot writes one run"));
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
    fsim_test_run_clear(&run);
    run = fsim_test_run("replay", trace, "-p", "paged", "--export-snapshot", path, NULL);
    g_assert_cmpint(run.status, ==, 0);
    g_assert_nonnull(strstr(run.out, "snapshot written to"));
    g_assert_true(g_file_test(path, G_FILE_TEST_IS_REGULAR));
    g_assert_cmpuint(count_files(dir), ==, 2);
    fsim_test_remove_tree(dir);
}

/* A run with a private pool exports its segments with their `segment_pool_id`: read back, each
 * allocation is assigned to the pool of the segment that held it, so the export validates
 * exactly (in the default pool, the 8 MiB request would reuse the freed 16 MiB block instead of
 * a new segment) and replay reports the pool's memory. */
static void
test_private_pool(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "run.pickle", NULL);
    g_autofree char *trace = g_build_filename(dir, "t.trace", NULL);

    g_assert_true(g_file_set_contents(
        trace,
        "fragsim-trace v1\n0 pool_begin 7 0\n1 alloc 1 16777216 0\n2 alloc 2 16777216 0\n"
        "3 pool_end 7 0\n4 free 1 0\n5 alloc 3 8388608 0\n",
        -1, NULL));
    g_auto(FsimTestRun) run = fsim_test_run("replay", trace, "-p", "caching", "--no-needed",
                                            "--export-snapshot", path, NULL);
    g_assert_cmpint(run.status, ==, 0);
    {
        g_auto(FsimTestRun) check = fsim_test_run("validate", path, NULL);
        g_auto(FsimTestRun) again = fsim_test_run("replay", path, "-p", "caching", NULL);

        g_assert_cmpint(check.status, ==, 0);
        g_assert_cmpint(again.status, ==, 0);
        /* the pool table: private pool 7 peaks at 32 MiB */
        g_assert_true(
            g_regex_match_simple("^private 7 .* 32\\.0 MiB ", again.out, G_REGEX_MULTILINE, 0));
    }
    fsim_test_remove_tree(dir);
}

/* The export records the run's configuration as PyTorch would (PYTORCH_CUDA_ALLOC_CONF,
 * max_split_size), so it validates under it: with max_split_size_mb:32 the 8 MiB request may not
 * split the cached 64 MiB block and gets a segment of its own; under the defaults it would split
 * it. */
static void
test_config(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "run.pickle", NULL);
    g_autofree char *trace = g_build_filename(dir, "t.trace", NULL);

    g_assert_true(g_file_set_contents(trace,
                                      "fragsim-trace v1\n0 alloc 1 67108864 0\n1 free 1 0\n"
                                      "2 alloc 2 8388608 0\n",
                                      -1, NULL));
    g_auto(FsimTestRun) run =
        fsim_test_run("replay", trace, "-p", "caching", "-c", "max_split_size_mb:32", "--no-needed",
                      "--export-snapshot", path, NULL);
    g_assert_cmpint(run.status, ==, 0);
    {
        g_auto(FsimTestRun) check = fsim_test_run("validate", path, NULL);
        g_auto(FsimTestRun) defaults = fsim_test_run("validate", path, "-c", "", NULL);

        g_assert_cmpint(check.status, ==, 0);
        g_assert_nonnull(strstr(check.out, "caching with max_split_size_mb:32 "));
        g_assert_nonnull(strstr(check.out, "2/2"));
        /* the recorded decisions are not the defaults' */
        g_assert_cmpint(defaults.status, ==, 4);
    }
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    gsize n;
    const FsimPolicyOps *const *policies;

    g_test_init(&argc, &argv, NULL);
    policies = fsim_policy_list(&n);
    for (gsize i = 0; i < n; i++) {
        g_autofree char *name = g_strdup_printf("/memviz/roundtrip/%s", policies[i]->name);
        g_autofree char *seeded = g_strdup_printf("/memviz/seeded/%s", policies[i]->name);

        g_test_add_data_func(name, policies[i]->name, test_roundtrip);
        g_test_add_data_func(seeded, policies[i]->name, test_seeded);
    }
    g_test_add_func("/memviz/oom", test_oom);
    g_test_add_func("/memviz/python", test_python);
    g_test_add_func("/memviz/abandon", test_abandon);
    g_test_add_func("/memviz/cli", test_cli);
    g_test_add_func("/memviz/private-pool", test_private_pool);
    g_test_add_func("/memviz/config", test_config);
    return g_test_run();
}
