/* SPDX-License-Identifier: MIT */
/*
 * bench-replay: replay speed, measured in one run against its own harness limit.
 *
 *   bench-replay --generate N TRACE     write a random text trace of N events (seeded)
 *   bench-replay TRACE [POLICY...]      events per second for the reader alone, then for the
 *                                       reader plus each policy (default: every policy)
 *
 * Each figure is the best of --repeat runs (default 3) of wall-clock time, with the resident
 * memory high-water mark after each phase, so a reader that stopped streaming would show.
 * This is a benchmark, never a test: nothing here asserts a time.
 */
#include <glib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fragsim/fragsim.h"

static long
max_rss_kib(void)
{
    struct rusage usage;

    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss;
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

typedef struct {
    double seconds;
    uint64_t events;
    FsimMetrics metrics;
} Measure;

/* One pass: the reader alone when @policy is NULL, else reader + engine. */
static gboolean
measure(FsimTrace *trace, const char *policy, Measure *out, GError **error)
{
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, 0, error);
    g_autoptr(FsimEngine) engine = NULL;
    GError *local_error = NULL;
    FsimEvent ev;
    gint64 start;

    if (stream == NULL)
        return FALSE;
    if (policy != NULL) {
        FsimRunConfig config;

        fsim_run_config_init(&config);
        config.policy = policy;
        config.paranoid = FALSE;
        config.initial_state = fsim_trace_initial_state(trace, 0);
        engine = fsim_engine_new(&config, error);
        if (engine == NULL)
            return FALSE;
    }
    memset(out, 0, sizeof(*out));
    start = g_get_monotonic_time();
    while (fsim_trace_stream_next(stream, &ev, &local_error)) {
        out->events++;
        if (engine != NULL && !fsim_engine_process(engine, &ev, error))
            return FALSE;
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    if (engine != NULL) {
        if (!fsim_engine_finish(engine, error))
            return FALSE;
        out->metrics = *fsim_engine_metrics(engine);
    }
    out->seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    return TRUE;
}

int
main(int argc, char **argv)
{
    gint repeat = 3;
    gint64 generate_events = 0;
    GOptionEntry entries[] = {
        {"generate", 0, 0, G_OPTION_ARG_INT64, &generate_events,
         "Write a random trace of N events to TRACE and exit", "N"},
        {"repeat", 0, 0, G_OPTION_ARG_INT, &repeat, "Best of R runs (default 3)", "R"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context = g_option_context_new("TRACE [POLICY...]");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GPtrArray) policies = g_ptr_array_new_with_free_func(g_free);
    double reader_rate = 0;

    g_option_context_add_main_entries(context, entries, NULL);
    if (!g_option_context_parse(context, &argc, &argv, &error) || argc < 2) {
        g_printerr("usage: bench-replay [--generate N] TRACE [POLICY...]\n");
        return 2;
    }
    if (generate_events > 0)
        return generate((uint64_t)generate_events, argv[1]);
    trace = fsim_trace_open(argv[1], &error);
    if (trace == NULL) {
        g_printerr("%s\n", error->message);
        return 1;
    }
    g_ptr_array_add(policies, NULL); /* the reader alone */
    if (argc > 2) {
        for (int i = 2; i < argc; i++)
            g_ptr_array_add(policies, g_strdup(argv[i]));
    } else {
        gsize n;
        const FsimPolicyOps *const *all = fsim_policy_list(&n);

        for (gsize i = 0; i < n; i++)
            g_ptr_array_add(policies, g_strdup(all[i]->name));
    }
    g_print("%-12s %12s %10s %14s %12s %12s\n", "phase", "events", "seconds", "events/s",
            "vs reader", "max RSS");
    for (guint p = 0; p < policies->len; p++) {
        const char *policy = g_ptr_array_index(policies, p);
        Measure best = {0};

        for (gint r = 0; r < MAX(repeat, 1); r++) {
            Measure m;

            if (!measure(trace, policy, &m, &error)) {
                g_printerr("%s: %s\n", policy ? policy : "reader", error->message);
                return 1;
            }
            if (r == 0 || m.seconds < best.seconds)
                best = m;
        }
        {
            double rate = best.seconds > 0 ? (double)best.events / best.seconds : 0;

            if (policy == NULL)
                reader_rate = rate;
            g_print("%-12s %12" G_GUINT64_FORMAT " %10.3f %14.0f %11.2fx %9ld KiB\n",
                    policy ? policy : "reader", best.events, best.seconds, rate,
                    reader_rate > 0 ? rate / reader_rate : 0, max_rss_kib());
        }
    }
    return 0;
}
