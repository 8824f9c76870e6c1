/* SPDX-License-Identifier: MIT */
/*
 * The command table, dispatch, and what subcommands share: exit codes, the options of several
 * commands (--set, -p, the runs of --db), JSON output, aligned tables and the progress bar.
 */
#include "cli.h"

#include <glib.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* clang-format off */
static const FsimCommand commands[] = {
    {"replay", "replay a trace through allocator policies and compare them", fsim_cmd_replay},
    {"validate", "check the PyTorch allocator model against a recorded snapshot", fsim_cmd_validate},
    {"explain", "why reserved memory exceeds live memory, and which allocations pin it",
     fsim_cmd_explain},
    {"info", "describe a trace: format, devices, events per action, final state", fsim_cmd_info},
    {"convert", "convert a trace to fragsim's text or binary format", fsim_cmd_convert},
    {"synth", "write a synthetic trace: training steps, an inference server, random", fsim_cmd_synth},
    {"estimate", "closed-form training memory of a model, and whether it fits a GPU", fsim_cmd_estimate},
    {"fit", "smallest device for a trace; largest batch or sequence for a model", fsim_cmd_fit},
    {"tune", "the PYTORCH_CUDA_ALLOC_CONF on which a job needs the least memory", fsim_cmd_tune},
    {"sweep", "run a grid of replays from a spec, in parallel or as one shard of many", fsim_cmd_sweep},
    {"merge", "merge results databases (the shards of a sweep) into one", fsim_cmd_merge},
    {"plot", "plot stored runs with gnuplot: timelines, fragmentation, address maps", fsim_cmd_plot},
    {"report", "write an HTML report of stored runs: plots, metrics, traces, devices", fsim_cmd_report},
    {"export", "write the results database's views as CSV files (pandas, R)", fsim_cmd_export},
    {"policies", "list the allocator policies and their knobs", fsim_cmd_policies},
    {"devices", "list the device presets", fsim_cmd_devices},
    {"cuda", "run policies on a real GPU, replay natively, calibrate the device model", fsim_cmd_cuda},
    {NULL, NULL, NULL},
};
/* clang-format on */

const FsimCommand *
fsim_cli_commands(void)
{
    return commands;
}

void
fsim_cli_print_commands(const FsimCommand *table)
{
    for (const FsimCommand *c = table; c->name != NULL; c++)
        g_print("  %-10s %s\n", c->name, c->summary);
}

int
fsim_cli_dispatch(const FsimCommand *table, void (*print_help)(void), int argc, char **argv)
{
    if (argc < 2) {
        print_help();
        return FSIM_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        print_help();
        return FSIM_EXIT_OK;
    }
    for (const FsimCommand *c = table; c->name != NULL; c++) {
        if (strcmp(argv[1], c->name) == 0)
            return c->run(argc - 1, argv + 1);
    }
    return -1;
}

static void
print_main_help(void)
{
    g_print("Usage: fragsim COMMAND [OPTIONS...]\n\n"
            "A discrete-event simulator of GPU memory allocators: replays PyTorch memory\n"
            "snapshots, RMM logs and its own traces through allocator policies on a modelled\n"
            "GPU, and measures fragmentation.\n\nCommands:\n");
    fsim_cli_print_commands(commands);
    g_print("\nRun 'fragsim COMMAND --help' for the options of a command.\n"
            "Exit status: 0 success, 1 bad input or runtime error, 2 usage error,\n"
            "3 simulated OOM under --fail-on-oom, 4 validation divergence,\n"
            "5 nothing to validate, 6 some runs ended in error while the others completed.\n");
}

int
fsim_cli_main(int argc, char **argv)
{
    int status;

    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        g_print("fragsim %s\n", FSIM_VERSION);
        return FSIM_EXIT_OK;
    }
    status = fsim_cli_dispatch(commands, print_main_help, argc, argv);
    if (status >= 0)
        return status;
    g_printerr("fragsim: unknown command '%s' (run 'fragsim --help' for the list)\n", argv[1]);
    return FSIM_EXIT_USAGE;
}

/* --max-memory SIZE, which every command takes: the readers' memory budget (0: the default). */
static gboolean
apply_max_memory(const char *text, GError **error)
{
    uint64_t bytes = 0;

    if (text == NULL) {
        fsim_set_memory_budget(0);
        return TRUE;
    }
    if (!fsim_parse_size(text, &bytes, error))
        return FALSE;
    if (bytes == 0 || bytes > G_MAXSIZE) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "--max-memory: %s is not a memory size",
                    text);
        return FALSE;
    }
    fsim_set_memory_budget((gsize)bytes);
    return TRUE;
}

gboolean
fsim_cli_parse(GOptionContext *context, const char *command, int *argc, char ***argv)
{
    g_autofree char *max_memory = NULL;
    const GOptionEntry common[] = {
        {"max-memory", 0, 0, G_OPTION_ARG_STRING, &max_memory,
         "The most memory a trace reader may hold (default: half the RAM); beyond it, exit 1",
         "SIZE"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GError) error = NULL;

    g_option_context_add_main_entries(context, common, NULL);
    if (!g_option_context_parse(context, argc, argv, &error) ||
        !apply_max_memory(max_memory, &error)) {
        g_printerr("fragsim %s: %s\nRun 'fragsim %s --help' for usage.\n", command, error->message,
                   command);
        return FALSE;
    }
    return TRUE;
}

/* fsim_cli_parse(), then the check of the positional arguments (fsim_cli_parse_command()). */
static int
cli_parse_operand(GOptionContext *context, const char *command, int *argc, char ***argv,
                  const char *operand)
{
    if (!fsim_cli_parse(context, command, argc, argv))
        return FSIM_EXIT_USAGE;
    if (operand == NULL && *argc > 1)
        return fsim_cli_usage_error(command, "unexpected argument '%s'", (*argv)[1]);
    if (operand != NULL && *argc < 2)
        return fsim_cli_usage_error(command, "missing the %s argument", operand);
    if (operand != NULL && *argc > 2)
        return fsim_cli_usage_error(command, "expected exactly one %s", operand);
    return FSIM_EXIT_OK;
}

int
fsim_cli_parse_command(GOptionContext *context, const GOptionEntry *entries,
                       const char *description, const char *command, int *argc, char ***argv,
                       const char *operand)
{
    if (entries != NULL)
        g_option_context_add_main_entries(context, entries, NULL);
    if (description != NULL)
        g_option_context_set_description(context, description);
    if (g_strcmp0(operand, FSIM_CLI_OPERANDS) == 0)
        return fsim_cli_parse(context, command, argc, argv) ? FSIM_EXIT_OK : FSIM_EXIT_USAGE;
    return cli_parse_operand(context, command, argc, argv, operand);
}

gboolean
fsim_cli_parse_args(const char *command, const char *parameter, const GOptionEntry *entries,
                    const char *description, const char *operand, int *argc, char ***argv)
{
    /* the options' values are the caller's: the context can go once it has parsed */
    g_autoptr(GOptionContext) context = g_option_context_new(parameter);

    return fsim_cli_parse_command(context, entries, description, command, argc, argv, operand) ==
           FSIM_EXIT_OK;
}

gboolean
fsim_cli_parse_json_only(const char *command, const char *parameter, const char *description,
                         const char *operand, int *argc, char ***argv, gboolean *json)
{
    GOptionEntry entries[] = {
        FSIM_CLI_JSON_ENTRY(json),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };

    *json = FALSE;
    return fsim_cli_parse_args(command, parameter, entries, description, operand, argc, argv);
}

int
fsim_cli_fail(const char *command, GError *error)
{
    int status = FSIM_EXIT_ERROR;

    if (error == NULL)
        return FSIM_EXIT_ERROR;
    if (error->domain == FSIM_ERROR) {
        switch (error->code) {
        case FSIM_ERROR_USAGE:
            status = FSIM_EXIT_USAGE;
            break;
        case FSIM_ERROR_OOM:
            status = FSIM_EXIT_OOM;
            break;
        case FSIM_ERROR_DIVERGED:
            status = FSIM_EXIT_DIVERGED;
            break;
        default:
            break;
        }
    }
    g_printerr("fragsim %s: %s\n", command, error->message);
    g_error_free(error);
    return status;
}

int
fsim_cli_usage_error(const char *command, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    g_printerr("fragsim %s: %s\nRun 'fragsim %s --help' for usage.\n", command, message, command);
    return FSIM_EXIT_USAGE;
}

/* Parse one `POLICY.KEY=VALUE` into @config. */
static gboolean
cli_parse_set(GKeyFile *config, const char *text, const char *example, const char *device_note,
              GError **error)
{
    const char *eq = strchr(text, '=');
    const char *dot = strchr(text, '.');
    g_autofree char *group = NULL;
    g_autofree char *key = NULL;

    if (eq == NULL || dot == NULL || dot > eq || dot == text || dot + 1 == eq) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--set '%s': expected POLICY.KEY=VALUE (e.g. %s)", text, example);
        return FALSE;
    }
    group = g_strndup(text, (gsize)(dot - text));
    key = g_strndup(dot + 1, (gsize)(eq - dot - 1));
    if (strcmp(group, "device") != 0 && fsim_policy_lookup(group) == NULL) {
        g_autofree char *names = fsim_policy_names();

        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "--set '%s': unknown policy '%s' (valid: %s, or %s)", text, group, names,
                    device_note);
        return FALSE;
    }
    g_key_file_set_value(config, group, key, eq + 1);
    if (strcmp(group, "device") == 0) {
        FsimDeviceFaults faults;

        return fsim_device_faults_parse(config, &faults, error);
    }
    return fsim_policy_check_config(fsim_policy_lookup(group), config, error);
}

gboolean
fsim_cli_apply_sets(GKeyFile *config, const char *const *sets, const char *example,
                    const char *device_note, GError **error)
{
    for (gsize i = 0; sets != NULL && sets[i] != NULL; i++) {
        if (!cli_parse_set(config, sets[i], example, device_note, error))
            return FALSE;
    }
    return TRUE;
}

GPtrArray *
fsim_cli_policies(const char *list, GError **error)
{
    g_auto(GStrv) parts = list != NULL ? g_strsplit(list, ",", -1) : NULL;
    g_autoptr(GPtrArray) names = NULL;

    for (gsize i = 0; parts != NULL && parts[i] != NULL; i++)
        g_strstrip(parts[i]);
    names = fsim_policy_select((const char *const *)parts, FALSE, error);
    if (names != NULL && names->len == 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "-p names no policy");
        return NULL;
    }
    return g_steal_pointer(&names);
}

gboolean
fsim_cli_trace_has_device(const FsimTrace *trace, uint32_t device)
{
    gsize n;
    const uint32_t *devices = fsim_trace_devices(trace, &n);

    for (gsize i = 0; i < n; i++) {
        if (devices[i] == device)
            return TRUE;
    }
    return FALSE;
}

char *
fsim_cli_format_duration(double ns, const FsimCliTimeUnit *units)
{
    const FsimCliTimeUnit *unit = units;

    /* not "ns < from_ns": NaN goes to the last unit */
    while (!(ns >= unit->from_ns) && unit[1].name != NULL)
        unit++;
    return g_strdup_printf("%.*f %s", unit->decimals, ns / unit->ns, unit->name);
}

/* A modelled time: s, ms or us, as the comparison tables show it. */
char *
fsim_cli_format_time_ns(uint64_t ns)
{
    static const FsimCliTimeUnit units[] = {
        {1e9, 1e9, 2, "s"},
        {1e6, 1e6, 1, "ms"},
        {0, 1e3, 1, "us"},
        {0, 0, 0, NULL},
    };

    return fsim_cli_format_duration((double)ns, units);
}

FsimJsonWriter *
fsim_cli_json_new(void)
{
    FsimJsonWriter *builder = fsim_json_writer_new(isatty(STDOUT_FILENO));

    fsim_json_begin_object(builder);
    return builder;
}

void
fsim_cli_json_print(FsimJsonWriter *builder)
{
    fsim_json_end_object(builder);
    g_print("%s\n", fsim_json_writer_text(builder));
}

void
fsim_cli_json_int(FsimJsonWriter *builder, const char *name, int64_t value)
{
    fsim_json_set_member_name(builder, name);
    fsim_json_add_int_value(builder, value);
}

void
fsim_cli_json_double(FsimJsonWriter *builder, const char *name, double value)
{
    fsim_json_set_member_name(builder, name);
    fsim_json_add_double_value(builder, value);
}

void
fsim_cli_json_bool(FsimJsonWriter *builder, const char *name, gboolean value)
{
    fsim_json_set_member_name(builder, name);
    fsim_json_add_boolean_value(builder, value);
}

void
fsim_cli_json_string(FsimJsonWriter *builder, const char *name, const char *value)
{
    fsim_json_set_member_name(builder, name);
    if (value != NULL)
        fsim_json_add_string_value(builder, value);
    else
        fsim_json_add_null_value(builder);
}

void
fsim_cli_json_begin_array(FsimJsonWriter *builder, const char *name)
{
    fsim_json_set_member_name(builder, name);
    fsim_json_begin_array(builder);
}

void
fsim_cli_json_begin_object(FsimJsonWriter *builder, const char *name)
{
    fsim_json_set_member_name(builder, name);
    fsim_json_begin_object(builder);
}

/* ---- tables -------------------------------------------------------------------------------- */

struct FsimTable {
    guint n_columns;
    GPtrArray *cells; /* row-major, headers first */
};

FsimTable *
fsim_table_new(guint n_columns, const char *const *headers)
{
    FsimTable *table = g_new0(FsimTable, 1);

    table->n_columns = n_columns;
    table->cells = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < n_columns; i++)
        g_ptr_array_add(table->cells, g_strdup(headers[i]));
    return table;
}

void
fsim_table_add(FsimTable *table, const char *text)
{
    g_ptr_array_add(table->cells, g_strdup(text != NULL ? text : ""));
}

void
fsim_table_addf(FsimTable *table, const char *format, ...)
{
    va_list args;

    va_start(args, format);
    g_ptr_array_add(table->cells, g_strdup_vprintf(format, args));
    va_end(args);
}

static gboolean
cell_is_numeric(const char *text)
{
    return (text[0] >= '0' && text[0] <= '9') || (text[0] == '-' && text[1] == '\0');
}

void
fsim_table_print(FsimTable *table)
{
    g_autofree guint *widths = g_new0(guint, table->n_columns);
    guint n_rows = table->cells->len / table->n_columns;

    for (guint i = 0; i < table->cells->len; i++) {
        guint width = (guint)g_utf8_strlen(g_ptr_array_index(table->cells, i), -1);

        widths[i % table->n_columns] = MAX(widths[i % table->n_columns], width);
    }
    for (guint r = 0; r < n_rows; r++) {
        g_autoptr(GString) line = g_string_new(NULL);

        for (guint c = 0; c < table->n_columns; c++) {
            const char *text = g_ptr_array_index(table->cells, r * table->n_columns + c);
            guint pad = widths[c] - (guint)g_utf8_strlen(text, -1);
            gboolean right = r > 0 && c > 0 && cell_is_numeric(text);

            if (c > 0)
                g_string_append(line, "  ");
            if (right)
                for (guint p = 0; p < pad; p++)
                    g_string_append_c(line, ' ');
            g_string_append(line, text);
            if (!right && c + 1 < table->n_columns)
                for (guint p = 0; p < pad; p++)
                    g_string_append_c(line, ' ');
        }
        g_print("%s\n", line->str);
    }
}

void
fsim_table_free(FsimTable *table)
{
    if (table == NULL)
        return;
    g_ptr_array_unref(table->cells);
    g_free(table);
}

/* ---- progress ------------------------------------------------------------------------------ */

struct FsimProgress {
    char *label;
    uint64_t total;
    gint64 last_draw_us;
    gboolean enabled;
    gboolean drawn;
};

FsimProgress *
fsim_progress_new(const char *label, uint64_t total)
{
    FsimProgress *progress = g_new0(FsimProgress, 1);

    progress->label = g_strdup(label);
    progress->total = total;
    progress->enabled = isatty(STDERR_FILENO) && g_getenv("FRAGSIM_NO_PROGRESS") == NULL;
    progress->last_draw_us = g_get_monotonic_time();
    return progress;
}

void
fsim_progress_update(FsimProgress *progress, uint64_t done)
{
    gint64 now;

    if (progress == NULL || !progress->enabled)
        return;
    now = g_get_monotonic_time();
    /* Nothing for the first half second (short work stays silent), then 5 times a second. */
    if (now - progress->last_draw_us < (progress->drawn ? 200000 : 500000))
        return;
    progress->last_draw_us = now;
    progress->drawn = TRUE;
    if (progress->total != 0) {
        double fraction = MIN(1.0, (double)done / (double)progress->total);
        int width = 30;
        int filled = (int)(fraction * width);

        fprintf(stderr, "\r%s [%.*s%*s] %3.0f%%", progress->label, filled,
                "##############################", width - filled, "", fraction * 100.0);
    } else {
        fprintf(stderr, "\r%s %" G_GUINT64_FORMAT " events", progress->label, done);
    }
    fflush(stderr);
}

void
fsim_progress_free(FsimProgress *progress)
{
    if (progress == NULL)
        return;
    if (progress->drawn) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
    g_free(progress->label);
    g_free(progress);
}
