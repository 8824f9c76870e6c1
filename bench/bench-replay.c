/* SPDX-License-Identifier: MIT */
/*
 * bench-replay: replay speed, each figure measured in one run against its own baseline.
 *
 *   bench-replay --generate N TRACE     write a random trace of N events (seeded); binary when
 *                                       TRACE ends in .fsb, text otherwise
 *   bench-replay --generate-live N TRACE  a trace whose live set peaks at N allocations: N
 *                                       allocs of 512 B to 64 KiB, then their N frees
 *   bench-replay TRACE [POLICY...]      the phases below, on TRACE (default: every policy)
 *
 * Phases, in order, each --repeat times (default 5), reporting the minimum and the median:
 *
 *   memory     a plain sum of the file's 64-bit words through a mapping: the memory bandwidth
 *              baseline of the reader
 *   reader     the reader alone, events taken a batch at a time (fsim_trace_stream_batch())
 *   POLICY     the reader plus an engine with that policy (the replay loop of `fragsim replay`),
 *              the engine's creation included; for an offline policy (the planner) also the
 *              pass that reads every lifetime first and the plan made from them
 *   POLICY+db  the same with a results database attached (--db; the database goes to a
 *              temporary directory), for the first policy only, against POLICY
 *
 * Times are this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall-clock time: on a shared
 * machine the other processes then inflate a figure through caches and memory bandwidth only,
 * not through the time slices they take.  Each ratio divides two minima (or two medians) of the
 * same run.  This is a benchmark, never a test: nothing here asserts a time.
 */
#define _DEFAULT_SOURCE /* clock_gettime(), MAP_POPULATE */

#include <glib.h>
#include <glib/gstdio.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fragsim/fragsim.h"

static long
max_rss_kib(void)
{
    struct rusage usage;

    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss;
}

static double
cpu_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A PyTorch-like size mix: mostly small tensors, some 1-10 MiB, a few large ones. */
static uint64_t
bench_size(GRand *rand)
{
    int r = g_rand_int_range(rand, 0, 100);

    if (r < 60)
        return (uint64_t)g_rand_int_range(rand, 1, 1 << 20);
    if (r < 90)
        return (uint64_t)g_rand_int_range(rand, 1 << 20, 10 << 20);
    return (uint64_t)g_rand_int_range(rand, 10 << 20, 200 << 20);
}

static int
generate(uint64_t n_events, const char *path)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTraceWriter) writer = fsim_trace_writer_open(path, &error);
    g_autoptr(GRand) rand = g_rand_new_with_seed(20261129);
    g_autoptr(GArray) live = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    uint64_t next_id = 1;
    const guint max_live = 2000;

    if (writer == NULL) {
        g_printerr("%s\n", error->message);
        return 1;
    }
    for (uint64_t i = 0; i < n_events; i++) {
        FsimEvent ev = {.time = i * 100};
        guint n_live = live->len;

        if (n_live == 0 || (n_live < max_live && g_rand_boolean(rand))) {
            ev.kind = FSIM_EV_ALLOC;
            ev.id = next_id++;
            ev.size = bench_size(rand);
            ev.stream = g_rand_int_range(rand, 0, 8) == 0 ? 1 : 0;
            g_array_append_val(live, ev.id);
        } else {
            /* Free mostly recent allocations (temporaries), sometimes old ones. */
            guint k = g_rand_int_range(rand, 0, 4) != 0
                          ? n_live - 1 - (guint)g_rand_int_range(rand, 0, (gint32)MIN(n_live, 8))
                          : (guint)g_rand_int_range(rand, 0, (gint32)n_live);

            ev.kind = FSIM_EV_FREE;
            ev.id = g_array_index(live, uint64_t, k);
            g_array_remove_index_fast(live, k);
        }
        if (!fsim_trace_writer_write(writer, &ev, &error)) {
            g_printerr("%s\n", error->message);
            return 1;
        }
    }
    if (!fsim_trace_writer_close(g_steal_pointer(&writer), &error)) {
        g_printerr("%s\n", error->message);
        return 1;
    }
    return 0;
}

/* A large live set: @n allocations, all alive at once, then freed in a shuffled order. */
static int
generate_live(uint64_t n, const char *path)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTraceWriter) writer = fsim_trace_writer_open(path, &error);
    g_autoptr(GRand) rand = g_rand_new_with_seed(14);
    uint64_t time = 0;
    gboolean ok = writer != NULL;

    for (uint64_t i = 0; ok && i < n; i++) {
        FsimEvent ev = {.time = time++, .kind = FSIM_EV_ALLOC, .id = i + 1};

        ev.size = (uint64_t)g_rand_int_range(rand, 512, 64 << 10);
        ok = fsim_trace_writer_write(writer, &ev, &error);
    }
    /* Frees in a strided order (a permutation when the stride is odd and n a power of two or
     * prime to it): neither LIFO nor FIFO. */
    for (uint64_t i = 0; ok && i < n; i++) {
        FsimEvent ev = {.time = time++, .kind = FSIM_EV_FREE};

        ev.id = (i * UINT64_C(7919)) % n + 1;
        ok = fsim_trace_writer_write(writer, &ev, &error);
    }
    if (!ok || !fsim_trace_writer_close(g_steal_pointer(&writer), &error)) {
        g_printerr("%s\n", error->message);
        return 1;
    }
    return 0;
}

typedef struct {
    double seconds;
    uint64_t events;
} Measure;

/* The memory baseline: sum the file's words through a mapping (paged in beforehand). */
static gboolean
measure_memory(const char *path, Measure *out, GError **error)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    const uint64_t *words;
    gsize n;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    double start;

    if (fd < 0 || fstat(fd, &st) != 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: cannot open", path);
        if (fd >= 0)
            close(fd);
        return FALSE;
    }
    words = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (words == MAP_FAILED) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: cannot map", path);
        return FALSE;
    }
    n = (gsize)st.st_size / 8;
    start = cpu_seconds();
    for (gsize i = 0; i + 4 <= n; i += 4) {
        a += words[i];
        b += words[i + 1];
        c += words[i + 2];
        d += words[i + 3];
    }
    out->seconds = cpu_seconds() - start;
    out->events = (a ^ b ^ c ^ d) == 42 ? 1 : 0; /* keeps the sum alive */
    munmap((void *)(uintptr_t)words, (size_t)st.st_size);
    return TRUE;
}

/* One pass: the reader alone when @policy is NULL, else reader + engine (+ a database). */
static gboolean
measure(FsimTrace *trace, const char *policy, FsimStore *store, Measure *out, GError **error)
{
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, 0, error);
    g_autoptr(FsimLifetimes) lifetimes = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    FsimStoreRun *run = NULL;
    GError *local_error = NULL;
    const FsimEvent *evs;
    gsize n;
    double start;

    if (stream == NULL)
        return FALSE;
    memset(out, 0, sizeof(*out));
    start = cpu_seconds();
    if (policy != NULL) {
        FsimRunConfig config;

        fsim_run_config_init(&config);
        config.policy = policy;
        config.paranoid = FALSE;
        config.initial_state = fsim_trace_initial_state(trace, 0);
        if (fsim_policy_is_offline(policy)) {
            /* as `fragsim replay` does: the lifetimes' pass over the trace, then the plan (in
             * fsim_engine_new()), both part of the run's cost */
            lifetimes = fsim_lifetimes_from_trace(trace, 0, error);
            if (lifetimes == NULL)
                return FALSE;
            config.lifetimes = lifetimes;
        }
        engine = fsim_engine_new(&config, error);
        if (engine == NULL)
            return FALSE;
    }
    if (store != NULL) {
        FsimStoreRunInfo info = {.trace = fsim_trace_path(trace),
                                 .trace_format = fsim_trace_format_name(trace),
                                 .policy = policy,
                                 .seed = -1};

        run = fsim_store_attach(store, engine, &info, error);
        if (run == NULL)
            return FALSE;
    }
    while ((n = fsim_trace_stream_batch(stream, &evs, &local_error)) > 0) {
        out->events += n;
        if (engine != NULL && !fsim_engine_process_batch(engine, evs, n, error)) {
            fsim_store_run_free(run);
            return FALSE;
        }
    }
    if (local_error == NULL && engine != NULL && !fsim_engine_finish(engine, &local_error))
        g_prefix_error(&local_error, "%s: ", policy);
    if (local_error == NULL && run != NULL &&
        !fsim_store_run_finish(run, FSIM_STORE_COMPLETE, &local_error))
        g_prefix_error(&local_error, "database: ");
    fsim_store_run_free(run);
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    out->seconds = cpu_seconds() - start;
    return TRUE;
}

static int
compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

typedef struct {
    double min;
    double median;
    uint64_t events;
} Phase;

static void
print_phase(const char *name, const Phase *phase, const Phase *baseline, const char *against)
{
    double events = (double)phase->events;

    if (phase->events <= 1) /* the memory phase: bytes, not events */
        g_print("%-16s %10.4f %10.4f %14s %14s %23s %9ld KiB\n", name, phase->min, phase->median,
                "-", "-", "-", max_rss_kib());
    else
        g_print("%-16s %10.4f %10.4f %14.0f %14.0f %8.2fx %5.2fx %-8s %9ld KiB\n", name, phase->min,
                phase->median, events / phase->min, events / phase->median,
                baseline->min / phase->min, baseline->median / phase->median, against,
                max_rss_kib());
}

/* Run one phase @repeat times: the minimum and the median of the CPU times. */
static gboolean
run_phase(FsimTrace *trace, const char *path, const char *policy, gboolean memory, FsimStore *store,
          int repeat, Phase *out, GError **error)
{
    g_autofree double *seconds = g_new(double, repeat);

    for (int r = 0; r < repeat; r++) {
        Measure m;

        if (memory ? !measure_memory(path, &m, error) : !measure(trace, policy, store, &m, error))
            return FALSE;
        seconds[r] = m.seconds;
        out->events = m.events;
    }
    qsort(seconds, (size_t)repeat, sizeof(double), compare_doubles);
    out->min = seconds[0];
    out->median =
        repeat % 2 == 1 ? seconds[repeat / 2] : (seconds[repeat / 2 - 1] + seconds[repeat / 2]) / 2;
    return TRUE;
}

int
main(int argc, char **argv)
{
    gint repeat = 5;
    gint64 generate_events = 0;
    gint64 generate_live_n = 0;
    gboolean no_db = FALSE;
    GOptionEntry entries[] = {
        {"generate", 0, 0, G_OPTION_ARG_INT64, &generate_events,
         "Write a random trace of N events to TRACE (binary when it ends in .fsb) and exit", "N"},
        {"generate-live", 0, 0, G_OPTION_ARG_INT64, &generate_live_n,
         "Write a trace whose live set peaks at N allocations to TRACE and exit", "N"},
        {"repeat", 0, 0, G_OPTION_ARG_INT, &repeat, "Runs of each phase (default 5)", "R"},
        {"no-db", 0, 0, G_OPTION_ARG_NONE, &no_db, "Skip the database phase", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context = g_option_context_new("TRACE [POLICY...]");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GPtrArray) policies = g_ptr_array_new_with_free_func(g_free);
    Phase memory = {0};
    Phase reader = {0};
    Phase first = {0};
    struct stat st;

    g_option_context_add_main_entries(context, entries, NULL);
    if (!g_option_context_parse(context, &argc, &argv, &error) || argc < 2 || repeat < 1) {
        g_printerr("usage: bench-replay [--generate N] [--repeat R] [--no-db] TRACE [POLICY...]\n");
        return 2;
    }
    if (generate_events > 0)
        return generate((uint64_t)generate_events, argv[1]);
    if (generate_live_n > 0)
        return generate_live((uint64_t)generate_live_n, argv[1]);
    trace = fsim_trace_open(argv[1], &error);
    if (trace == NULL || stat(argv[1], &st) != 0) {
        g_printerr("%s\n", error != NULL ? error->message : argv[1]);
        return 1;
    }
    if (argc > 2) {
        for (int i = 2; i < argc; i++)
            g_ptr_array_add(policies, g_strdup(argv[i]));
    } else {
        gsize n;
        const FsimPolicyOps *const *all = fsim_policy_list(&n);

        for (gsize i = 0; i < n; i++)
            g_ptr_array_add(policies, g_strdup(all[i]->name));
    }
    g_print("%s: %s trace, %.1f MiB; %d runs per phase, thread CPU seconds\n", argv[1],
            fsim_trace_format_name(trace), (double)st.st_size / (1 << 20), repeat);
    g_print("%-16s %10s %10s %14s %14s %15s %-8s %9s\n", "phase", "min s", "median s",
            "events/s (min)", "events/s (med)", "ratio min  med", "against", "max RSS");
    if (!run_phase(trace, argv[1], NULL, TRUE, NULL, repeat, &memory, &error) ||
        !run_phase(trace, argv[1], NULL, FALSE, NULL, repeat, &reader, &error)) {
        g_printerr("%s\n", error->message);
        return 1;
    }
    print_phase("memory", &memory, NULL, NULL);
    g_print("%-16s %10.4f %10.4f %14.0f %14.0f %8.2fx %5.2fx %-8s   (%.1f GB/s vs %.1f GB/s)\n",
            "reader", reader.min, reader.median, (double)reader.events / reader.min,
            (double)reader.events / reader.median, memory.min / reader.min,
            memory.median / reader.median, "memory", (double)st.st_size / reader.min / 1e9,
            (double)st.st_size / memory.min / 1e9);
    for (guint p = 0; p < policies->len; p++) {
        const char *policy = g_ptr_array_index(policies, p);
        Phase phase = {0};

        if (!run_phase(trace, argv[1], policy, FALSE, NULL, repeat, &phase, &error)) {
            g_printerr("%s: %s\n", policy, error->message);
            return 1;
        }
        print_phase(policy, &phase, &reader, "reader");
        if (p == 0)
            first = phase;
    }
    if (!no_db && policies->len > 0) {
        const char *policy = g_ptr_array_index(policies, 0);
        g_autofree char *dir = g_dir_make_tmp("bench-replay-XXXXXX", &error);
        g_autofree char *db = dir != NULL ? g_build_filename(dir, "bench.db", NULL) : NULL;
        g_autofree char *name = g_strdup_printf("%s+db", policy);
        g_autofree char *wal = g_strdup_printf("%s-wal", db != NULL ? db : "");
        g_autofree char *shm = g_strdup_printf("%s-shm", db != NULL ? db : "");
        FsimStore *store = db != NULL ? fsim_store_open(db, FSIM_STORE_WRITE, NULL, &error) : NULL;
        Phase phase = {0};
        gboolean ok = store != NULL &&
                      run_phase(trace, argv[1], policy, FALSE, store, repeat, &phase, &error);

        fsim_store_close(store);
        if (db != NULL) {
            g_unlink(db);
            g_unlink(wal);
            g_unlink(shm);
            g_rmdir(dir);
        }
        if (!ok) {
            g_printerr("%s: %s\n", name, error->message);
            return 1;
        }
        print_phase(name, &phase, &first, policy);
    }
    return 0;
}
