/* SPDX-License-Identifier: MIT */
/*
 * fragsim synth train [MODEL OPTIONS] -o TRACE
 * fragsim synth serve [--model NAME] [SERVING OPTIONS] -o TRACE [--json]
 * fragsim synth random [--events N] [--seed S] [...] -o TRACE
 *
 * Writes a synthetic trace in the text format (gzip-compressed when TRACE ends in .gz),
 * streaming: the generator never holds the trace in memory.  docs/synth.md describes the models.
 */
#include <glib.h>

#include <string.h>

#include "cli.h"
#include "synth/synth.h"

/* Write @synth to @path (or only generate it when @path is NULL: --dry-run); print the count and
 * the speed on stderr unless @quiet. */
/* The distributions parsed from the options are cleared however a command returns. */
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(FsimDist, fsim_dist_clear)

static gboolean
synth_write(FsimSynth *synth, const char *path, const char *comment, gboolean quiet, GError **error)
{
    uint64_t events = 0;
    gint64 start = g_get_monotonic_time();
    if (path == NULL) {
        FsimEvent ev;
        g_autoptr(GError) local_error = NULL;
        while (fsim_synth_next(synth, &ev, &local_error))
            events++;
        if (local_error) {
            g_propagate_error(error, g_steal_pointer(&local_error));
            return FALSE;
        }
        path = "(dry run)";
    } else if (!fsim_synth_write(synth, path, comment, &events, error)) {
        return FALSE;
    }
    double seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    if (!quiet)
        g_printerr("%s: %" G_GUINT64_FORMAT " events in %.2f s (%.3g events/s)\n", path, events,
                   seconds, seconds > 0 ? (double)events / seconds : 0.0);
    return TRUE;
}

/* The options every kind has, first in its table: where the trace goes, or --dry-run; --quiet. */
typedef struct {
    char *output;
    gboolean quiet;
    gboolean dry_run;
} SynthOutput;

/* clang-format off */
#define SYNTH_OUTPUT_ENTRIES(out)                                                          \
    {"output", 'o', 0, G_OPTION_ARG_FILENAME, &(out)->output,                              \
     "Write the trace here (.gz: compressed)", "TRACE"},                                   \
    {"quiet", 'q', 0, G_OPTION_ARG_NONE, &(out)->quiet,                                    \
     "Print nothing on stderr on success", NULL},                                          \
    {"dry-run", 0, 0, G_OPTION_ARG_NONE, &(out)->dry_run,                                  \
     "Generate without writing: print the event count and the generator's speed", NULL}
/* clang-format on */

static void
synth_output_clear(SynthOutput *out)
{
    g_clear_pointer(&out->output, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SynthOutput, synth_output_clear)

/* What every kind checks after parsing: no argument left, and either -o TRACE or --dry-run.
 * Returns: %FALSE after printing a usage error. */
static gboolean
synth_check_args(const char *command, int argc, char **argv, const SynthOutput *out)
{
    if (argc > 1)
        fsim_cli_usage_error(command, "unexpected argument '%s'", argv[1]);
    else if (out->output == NULL && !out->dry_run)
        fsim_cli_usage_error(command, "missing -o TRACE (or --dry-run)");
    else if (out->output != NULL && out->dry_run)
        fsim_cli_usage_error(command, "--dry-run writes nothing: drop -o");
    else
        return TRUE;
    return FALSE;
}

/* What synth train and synth serve do with their arguments: the training options parsed
 * (fsim_cli_parse_train()) and resolved into @config, then the operands checked.  FALSE when
 * the command is done, with its exit status in *@status. */
static gboolean
synth_parse_train(const char *command, const char *parameter, const GOptionEntry *entries,
                  guint flags, const char *description, const SynthOutput *out, int *argc,
                  char ***argv, FsimTrainConfig *config, int *status)
{
    FsimTrainOptions options;
    GError *error = NULL;
    gboolean ok;

    if (!fsim_cli_parse_train(command, parameter, entries, flags, description, &options, NULL, argc,
                              argv, status))
        return FALSE;
    ok = fsim_train_options_resolve(&options, NULL, config, &error);
    fsim_train_options_clear(&options);
    if (!ok) {
        *status = fsim_cli_fail(command, error);
        return FALSE;
    }
    if (!synth_check_args(command, *argc, *argv, out)) {
        *status = FSIM_EXIT_USAGE;
        return FALSE;
    }
    return TRUE;
}

static int
synth_train(int argc, char **argv)
{
    g_auto(SynthOutput) out = {0};
    GOptionEntry entries[] = {
        SYNTH_OUTPUT_ENTRIES(&out),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autofree char *description = g_strconcat(fsim_train_options_help(),
                                               "\n\nExample: fragsim synth train --model "
                                               "gpt2-small --seq 1024 --batch 8 -o gpt2.trace.gz\n",
                                               NULL);
    GError *error = NULL;
    FsimTrainConfig config;
    FsimEstimate est;
    int status;

    if (!synth_parse_train("synth train", "- the allocation trace of transformer training steps",
                           entries, 0, description, &out, &argc, &argv, &config, &status))
        return status;
    if (!fsim_estimate_train(&config, &est, &error))
        return fsim_cli_fail("synth train", error);

    g_autofree char *about = fsim_train_config_describe(&config);
    g_autofree char *comment = g_strdup_printf(
        "synthetic training trace (fragsim synth train)\n%s"
        "steps %" G_GUINT64_FORMAT "; estimated peak %" G_GUINT64_FORMAT " bytes (estimate)",
        about, config.steps, est.total_bytes);
    g_autoptr(FsimSynth) synth = fsim_synth_train_new(&config, &error);
    if (synth == NULL || !synth_write(synth, out.output, comment, out.quiet, &error))
        return fsim_cli_fail("synth train", error);
    return FSIM_EXIT_OK;
}

static gboolean
synth_parse_dist(const char *flag, const char *text, const char *fallback, gboolean sizes,
                 FsimDist *out, GError **error)
{
    if (!fsim_dist_parse(text ? text : fallback, sizes, out, error)) {
        g_prefix_error(error, "--%s: ", flag);
        return FALSE;
    }
    return TRUE;
}

/* --cuda-graphs: batch sizes separated by commas, in capture order. */
static gboolean
synth_parse_batches(const char *text, GArray *out, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(text, ",", -1);

    for (guint i = 0; parts[i] != NULL; i++) {
        guint64 value;
        g_autofree char *word = g_strstrip(g_strdup(parts[i]));

        if (!g_ascii_string_to_unsigned(word, 10, 1, 1000000, &value, NULL)) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "--cuda-graphs: '%s' is not a batch size from 1 to 1000000 (expected "
                        "sizes separated by commas, in capture order, e.g. 32,16,8,4,2,1)",
                        word);
            return FALSE;
        }
        g_array_append_val(out, value);
    }
    return TRUE;
}

/* synth serve's flags, and what their texts parse into.  g_auto() clears it. */
typedef struct {
    SynthOutput out;
    gint requests;
    double rate;
    char *prompt;
    char *out_lengths;
    gint max_len;
    gint max_batch;
    char *budget;
    char *layout;
    gint block_tokens;
    char *graphs;
    gint64 seed;
    gboolean json;
    FsimDist prompt_dist;
    FsimDist output_dist;
    GArray *graph_batches; /* of uint64_t: --cuda-graphs */
} ServeArgs;

/* The option table of synth serve, pointing into @a; its end mark is entry SERVE_N_ENTRIES - 1. */
#define SERVE_N_ENTRIES 16

static void
serve_entries(ServeArgs *a, GOptionEntry out[SERVE_N_ENTRIES])
{
    const GOptionEntry entries[SERVE_N_ENTRIES] = {
        SYNTH_OUTPUT_ENTRIES(&a->out),
        {"requests", 'n', 0, G_OPTION_ARG_INT, &a->requests, "Requests to serve (default 200)",
         "N"},
        {"rate", 0, 0, G_OPTION_ARG_DOUBLE, &a->rate,
         "Poisson arrival rate, requests/s (default 5)", "R"},
        {"prompt", 0, 0, G_OPTION_ARG_STRING, &a->prompt,
         "Prompt lengths: fixed:N, uniform:A:B, lognormal:MEDIAN:SIGMA or hist:FILE (default "
         "lognormal:100:1.0)",
         "DIST"},
        {"output-len", 0, 0, G_OPTION_ARG_STRING, &a->out_lengths,
         "Output lengths, as --prompt (default lognormal:250:0.8)", "DIST"},
        {"max-len", 0, 0, G_OPTION_ARG_INT, &a->max_len,
         "Context limit (prompt + output); contiguous-max reserves it (default 2048)", "N"},
        {"max-batch", 0, 0, G_OPTION_ARG_INT, &a->max_batch,
         "Most requests per iteration (default 32)", "N"},
        {"kv-budget", 0, 0, G_OPTION_ARG_STRING, &a->budget,
         "Admit only while the KV reservation fits in this size (default: no limit)", "SIZE"},
        {"kv-layout", 0, 0, G_OPTION_ARG_STRING, &a->layout,
         "contiguous-max, contiguous-grow or paged (default)", "LAYOUT"},
        {"block-tokens", 0, 0, G_OPTION_ARG_INT, &a->block_tokens,
         "Tokens per paged block, or the growth granule (default 16)", "N"},
        {"cuda-graphs", 0, 0, G_OPTION_ARG_STRING, &a->graphs,
         "Capture one CUDA graph per batch size, in this order, into one shared private pool "
         "(e.g. 32,16,8,4,2,1)",
         "BATCHES"},
        {"seed", 0, 0, G_OPTION_ARG_INT64, &a->seed, "Random seed (default 1)", "S"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &a->json,
         "Print the KV statistics as one JSON object on stdout", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };

    memcpy(out, entries, sizeof(entries));
}

/* Free the texts of the string flags of @a (the output's among them), then what they parsed
 * into. */
static void
serve_args_clear(ServeArgs *a)
{
    GOptionEntry entries[SERVE_N_ENTRIES];

    serve_entries(a, entries);
    for (guint i = 0; entries[i].long_name != NULL; i++) {
        if (entries[i].arg == G_OPTION_ARG_STRING || entries[i].arg == G_OPTION_ARG_FILENAME)
            g_clear_pointer((char **)entries[i].arg_data, g_free);
    }
    fsim_dist_clear(&a->prompt_dist);
    fsim_dist_clear(&a->output_dist);
    g_clear_pointer(&a->graph_batches, g_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ServeArgs, serve_args_clear)

/* Parse the command line into @a and the model into @train; FALSE when the command is done, with
 * its exit status in *@status. */
static gboolean
serve_parse(ServeArgs *a, int *argc, char ***argv, FsimTrainConfig *train, int *status)
{
    GOptionEntry entries[SERVE_N_ENTRIES];

    serve_entries(a, entries);
    a->graph_batches = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    a->requests = a->max_len = a->max_batch = a->block_tokens = -1;
    a->seed = 1;
    a->rate = -1;
    return synth_parse_train(
        "synth serve", "- the allocation trace of an LLM inference server", entries,
        FSIM_TRAIN_OPTIONS_MODEL_ONLY,
        "KV cache per token: 2 x layers x KV heads x head dim x 2 bytes.  KV waste (reserved\n"
        "token slots holding no token, over time) is printed on stderr, or with --json.\n"
        "Example: fragsim synth serve --model llama2-7b --rate 4 --kv-layout paged -o "
        "serve.trace\n",
        &a->out, argc, argv, train, status);
}

/* The server's @config from @a's flags (its distributions and batches point into @a); FALSE with
 * *@status the exit status on an error. */
static gboolean
serve_configure(ServeArgs *a, const FsimTrainConfig *train, FsimServeConfig *config, int *status)
{
    GError *error = NULL;

    fsim_serve_config_init(config);
    config->model = train->model;
    if (a->requests != -1) {
        if (a->requests < 0) {
            *status = fsim_cli_usage_error("synth serve", "--requests must not be negative");
            return FALSE;
        }
        config->requests = (uint64_t)a->requests;
    }
    if (a->rate != -1)
        config->rate = a->rate;
    if (a->max_len != -1)
        config->max_len = a->max_len > 0 ? (uint64_t)a->max_len : 0;
    if (a->max_batch != -1)
        config->max_batch = a->max_batch > 0 ? (uint64_t)a->max_batch : 0;
    if (a->block_tokens != -1)
        config->block_tokens = a->block_tokens > 0 ? (uint64_t)a->block_tokens : 0;
    if (a->seed < 0 || a->seed > G_MAXUINT32) {
        *status =
            fsim_cli_usage_error("synth serve", "--seed must be between 0 and %u", G_MAXUINT32);
        return FALSE;
    }
    config->seed = (uint64_t)a->seed;
    if (a->layout && !fsim_kv_layout_from_name(a->layout, &config->layout)) {
        *status = fsim_cli_usage_error("synth serve",
                                       "--kv-layout '%s' is unknown (valid: contiguous-max, "
                                       "contiguous-grow, paged)",
                                       a->layout);
        return FALSE;
    }
    if ((a->budget && !fsim_parse_size(a->budget, &config->kv_budget_bytes, &error)) ||
        (a->graphs != NULL && !synth_parse_batches(a->graphs, a->graph_batches, &error)) ||
        !synth_parse_dist("prompt", a->prompt, "lognormal:100:1.0", FALSE, &a->prompt_dist,
                          &error) ||
        !synth_parse_dist("output-len", a->out_lengths, "lognormal:250:0.8", FALSE, &a->output_dist,
                          &error)) {
        *status = fsim_cli_fail("synth serve", error);
        return FALSE;
    }
    config->graph_batches = (const uint64_t *)(const void *)a->graph_batches->data;
    config->n_graph_batches = a->graph_batches->len;
    config->prompt = &a->prompt_dist;
    config->output = &a->output_dist;
    return TRUE;
}

/* The KV statistics of the trace written: one JSON object on stdout with --json, else a line on
 * stderr unless --quiet. */
static void
serve_print_stats(const ServeArgs *a, const FsimServeConfig *config, const FsimServeStats *stats)
{
    if (a->json) {
        g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
        fsim_cli_json_string(builder, "trace", a->out.output);
        fsim_cli_json_string(builder, "kv_layout", fsim_kv_layout_name(config->layout));
        fsim_cli_json_int(builder, "kv_bytes_per_token", (gint64)stats->kv_bytes_per_token);
        fsim_cli_json_double(builder, "kv_waste", stats->kv_waste);
        fsim_cli_json_int(builder, "peak_kv_reserved_bytes", (gint64)stats->peak_kv_reserved_bytes);
        fsim_cli_json_double(builder, "kv_waste_at_peak", stats->kv_waste_at_peak);
        fsim_cli_json_int(builder, "requests_done", (gint64)stats->requests_done);
        fsim_cli_json_int(builder, "peak_batch", (gint64)stats->peak_batch);
        fsim_cli_json_int(builder, "duration_ns", (gint64)stats->duration_ns);
        fsim_cli_json_print(builder);
    } else if (!a->out.quiet) {
        g_autofree char *peak = fsim_format_size(stats->peak_kv_reserved_bytes);
        g_printerr(
            "KV cache (%s, %" G_GUINT64_FORMAT " bytes per token): %.1f%% of reserved "
            "token slots unused over time, %.1f%% at the peak reservation (%s); %" G_GUINT64_FORMAT
            " requests in %.1f s, batch up to %" G_GUINT64_FORMAT "\n",
            fsim_kv_layout_name(config->layout), stats->kv_bytes_per_token, 100 * stats->kv_waste,
            100 * stats->kv_waste_at_peak, peak, stats->requests_done,
            (double)stats->duration_ns / 1e9, stats->peak_batch);
    }
}

static int
synth_serve(int argc, char **argv)
{
    g_auto(ServeArgs) a = {0};
    GError *error = NULL;
    FsimServeConfig config;
    FsimTrainConfig train;
    FsimServeStats stats;
    int status;

    if (!serve_parse(&a, &argc, &argv, &train, &status) ||
        !serve_configure(&a, &train, &config, &status))
        return status;

    g_autofree char *comment = g_strdup_printf(
        "synthetic serving trace (fragsim synth serve)\nmodel %s; %" G_GUINT64_FORMAT
        " requests at %g/s; max-len %" G_GUINT64_FORMAT ", max-batch %" G_GUINT64_FORMAT
        "; KV %s, block %" G_GUINT64_FORMAT " tokens; seed %" G_GUINT64_FORMAT "%s%s",
        config.model.name, config.requests, config.rate, config.max_len, config.max_batch,
        fsim_kv_layout_name(config.layout), config.block_tokens, config.seed,
        a.graphs != NULL ? "; CUDA graphs captured for batches " : "",
        a.graphs != NULL ? a.graphs : "");
    FsimSynth *synth = fsim_synth_serve_new(&config, &error);
    gboolean ok =
        synth != NULL && synth_write(synth, a.out.output, comment, a.out.quiet || a.json, &error);
    if (ok)
        fsim_synth_serve_stats(synth, &stats);
    fsim_synth_free(synth);
    if (!ok)
        return fsim_cli_fail("synth serve", error);
    serve_print_stats(&a, &config, &stats);
    return FSIM_EXIT_OK;
}

static int
synth_random(int argc, char **argv)
{
    g_auto(SynthOutput) out = {0};
    g_autofree char *sizes = NULL;
    g_autofree char *lifetimes = NULL;
    gint64 events = 100000, seed = 1, max_live = 0;
    gint streams = 1;
    GOptionEntry entries[] = {
        SYNTH_OUTPUT_ENTRIES(&out),
        {"events", 'n', 0, G_OPTION_ARG_INT64, &events,
         "Events in all, frees included (default 100000)", "N"},
        {"seed", 0, 0, G_OPTION_ARG_INT64, &seed, "Random seed (default 1)", "S"},
        {"size-dist", 0, 0, G_OPTION_ARG_STRING, &sizes,
         "Sizes: fixed:SIZE, uniform:MIN:MAX, lognormal:MEDIAN:SIGMA or hist:FILE (default "
         "lognormal:1MiB:2)",
         "DIST"},
        {"lifetime-dist", 0, 0, G_OPTION_ARG_STRING, &lifetimes,
         "Lifetimes in events, same forms (default lognormal:100:1.5)", "DIST"},
        {"max-live", 0, 0, G_OPTION_ARG_INT64, &max_live,
         "Most live allocations; the first to expire is freed early (default: no limit)", "N"},
        {"streams", 0, 0, G_OPTION_ARG_INT, &streams, "Spread allocations over N streams", "N"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    GError *error = NULL;
    FsimRandomConfig config;
    g_auto(FsimDist) size_dist = {0};
    g_auto(FsimDist) life_dist = {0};

    if (!fsim_cli_parse_args("synth random", "- a seeded random trace for stress tests", entries,
                             "Example: fragsim synth random --events 1000000 --seed 7 --size-dist "
                             "uniform:512:64MiB --max-live 1000 -o stress.trace\n",
                             FSIM_CLI_OPERANDS, &argc, &argv))
        return FSIM_EXIT_USAGE;
    if (!synth_check_args("synth random", argc, argv, &out))
        return FSIM_EXIT_USAGE;
    if (events < 0 || seed < 0 || seed > G_MAXUINT32 || max_live < 0 || streams < 1)
        return fsim_cli_usage_error("synth random",
                                    "--events and --max-live must not be negative, --seed must "
                                    "be between 0 and %u, --streams positive",
                                    G_MAXUINT32);
    fsim_random_config_init(&config);
    config.events = (uint64_t)events;
    config.seed = (uint64_t)seed;
    config.max_live = (uint64_t)max_live;
    config.streams = (uint32_t)streams;
    if (!synth_parse_dist("size-dist", sizes, "lognormal:1MiB:2", TRUE, &size_dist, &error))
        return fsim_cli_fail("synth random", error);
    if (!synth_parse_dist("lifetime-dist", lifetimes, "lognormal:100:1.5", FALSE, &life_dist,
                          &error))
        return fsim_cli_fail("synth random", error);
    config.sizes = &size_dist;
    config.lifetimes = &life_dist;
    g_autofree char *comment =
        g_strdup_printf("synthetic random trace (fragsim synth random)\nseed %" G_GUINT64_FORMAT
                        "; sizes %s; lifetimes %s events; max live %" G_GUINT64_FORMAT,
                        config.seed, sizes ? sizes : "lognormal:1MiB:2",
                        lifetimes ? lifetimes : "lognormal:100:1.5", config.max_live);
    FsimSynth *synth = fsim_synth_random_new(&config, &error);
    gboolean ok = synth != NULL && synth_write(synth, out.output, comment, out.quiet, &error);
    fsim_synth_free(synth);
    if (!ok)
        return fsim_cli_fail("synth random", error);
    return FSIM_EXIT_OK;
}

int
fsim_cmd_synth(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
    } kinds[] = {
        {"train", synth_train, "transformer training steps from a model and a training setup"},
        {"serve", synth_serve, "an LLM inference server's weights and KV cache"},
        {"random", synth_random, "seeded random sizes and lifetimes, for stress tests"},
    };

    if (argc >= 2) {
        for (gsize i = 0; i < G_N_ELEMENTS(kinds); i++) {
            if (strcmp(argv[1], kinds[i].name) == 0) {
                /* argv[0] becomes "synth KIND" for messages */
                return kinds[i].run(argc - 1, argv + 1);
            }
        }
    }
    gboolean help = argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
    GString *usage = g_string_new("Usage: fragsim synth KIND [OPTIONS...] -o TRACE\n\nKinds:\n");
    for (gsize i = 0; i < G_N_ELEMENTS(kinds); i++)
        g_string_append_printf(usage, "  %-8s %s\n", kinds[i].name, kinds[i].summary);
    g_string_append(usage, "\nRun 'fragsim synth KIND --help' for the options of a kind.\n");
    if (help) {
        g_print("%s", usage->str);
        g_string_free(usage, TRUE);
        return FSIM_EXIT_OK;
    }
    if (argc >= 2)
        g_printerr("fragsim synth: unknown kind '%s'\n", argv[1]);
    g_printerr("%s", usage->str);
    g_string_free(usage, TRUE);
    return FSIM_EXIT_USAGE;
}
