/* SPDX-License-Identifier: MIT */
/*
 * fragsim command line: the subcommand table and what subcommands share (exit codes, option
 * parsing, JSON output, tables, progress).
 *
 * Each subcommand is one file `cmd-<name>.c` exporting `int fsim_cmd_<name>(int argc, char
 * **argv)`, where argv[0] is the subcommand name, and one line in the table of cli.c.  A command
 * prints results with g_print() (stdout), messages with g_printerr() (stderr), and returns the
 * exit status.  With --json it prints one JSON object on stdout and nothing else there.
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"
#include "fragsim/json-writer.h"

G_BEGIN_DECLS

/* Exit statuses (DESIGN.md). */
enum {
    FSIM_EXIT_OK = 0,
    FSIM_EXIT_ERROR = 1, /* bad input or runtime error */
    FSIM_EXIT_USAGE = 2,
    FSIM_EXIT_OOM = 3,       /* simulated OOM under --fail-on-oom */
    FSIM_EXIT_DIVERGED = 4,  /* validate found a divergence */
    FSIM_EXIT_NOTHING = 5,   /* validate had nothing to check (no recorded decisions) */
    FSIM_EXIT_RUN_ERROR = 6, /* some runs of a comparison ended in error, the others completed */
};

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} FsimCommand;

/* Returns: (transfer none): the command table, terminated by a {NULL} entry. */
const FsimCommand *fsim_cli_commands(void);

/* Print a command table's names and summaries, one per line, as the help shows them. */
void fsim_cli_print_commands(const FsimCommand *table);

/**
 * fsim_cli_dispatch:
 * @table: the commands, terminated by a {NULL} entry.
 * @print_help: prints the usage, with the table.
 *
 * What `fragsim` and `fragsim cuda` do with their first argument: without one, print the help
 * (a usage error); with `--help`, `-h` or `help`, print it; with a command's name, run the
 * command on the arguments from there on.
 *
 * Returns: the exit status, or -1 when argv[1] names no command (the caller says so).
 */
int fsim_cli_dispatch(const FsimCommand *table, void (*print_help)(void), int argc, char **argv);

/* Run the command line (argv[0] is the program).  Used by main() and by tests. */
int fsim_cli_main(int argc, char **argv);

/**
 * fsim_cli_parse:
 * @context: a context with the command's entries; its summary and help are set by the caller.
 * @argc, @argv: in/out, as g_option_context_parse() takes them.
 *
 * Parses; on a usage error prints `fragsim CMD: MESSAGE` and a hint to --help on stderr.
 *
 * Returns: %FALSE on a usage error (the command then returns %FSIM_EXIT_USAGE).
 */
gboolean fsim_cli_parse(GOptionContext *context, const char *command, int *argc, char ***argv);

/* The @operand of fsim_cli_parse_command() for a command that checks its operands itself. */
#define FSIM_CLI_OPERANDS ""

/**
 * fsim_cli_parse_command:
 * @entries: (nullable): the command's options, added to @context's main group.
 * @description: (nullable): the text after the options in --help.
 * @operand: (nullable): the name of the command's one positional argument (`TRACE`), %NULL for
 *     a command that takes none, or %FSIM_CLI_OPERANDS for any number of operands.
 *
 * What every command does with its arguments: its options and help text into @context, then
 * fsim_cli_parse() and a check of the positional arguments: exactly one when @operand names one
 * (`missing the TRACE argument`, `expected exactly one TRACE`), none for %NULL (`unexpected
 * argument 'X'`).
 *
 * Returns: %FSIM_EXIT_OK, or %FSIM_EXIT_USAGE after printing the usage error.
 */
int fsim_cli_parse_command(GOptionContext *context, const GOptionEntry *entries,
                           const char *description, const char *command, int *argc, char ***argv,
                           const char *operand);

/**
 * fsim_cli_parse_args:
 * @command: the command's name, for messages (`cuda info`).
 * @parameter: the usage line's parameter text (`TRACE - describe a trace`).
 * @entries: (nullable): the command's options.
 * @description: (nullable): the text after the options in --help.
 * @operand: as for fsim_cli_parse_command().
 *
 * What a command that adds no option group does with its arguments: fsim_cli_parse_command() in
 * a context of its own, freed before this returns (the options' values are the caller's).
 *
 * Returns: %FALSE after printing a usage error (the command then returns %FSIM_EXIT_USAGE).
 */
gboolean fsim_cli_parse_args(const char *command, const char *parameter,
                             const GOptionEntry *entries, const char *description,
                             const char *operand, int *argc, char ***argv);

/**
 * fsim_cli_parse_json_only:
 * @json: (out): whether --json was given.
 *
 * fsim_cli_parse_args() for a command whose one option is --json.
 *
 * Returns: %FALSE after printing a usage error (the command then returns %FSIM_EXIT_USAGE).
 */
gboolean fsim_cli_parse_json_only(const char *command, const char *parameter,
                                  const char *description, const char *operand, int *argc,
                                  char ***argv, gboolean *json);

/* The options several commands share, each spelt once: `--paranoid` (the policy's invariant
 * checks) and `--trace-device N` of the commands that replay every device by default. */
#define FSIM_CLI_PARANOID_ENTRY(flag)                                          \
    {                                                                          \
        "paranoid", 0, 0, G_OPTION_ARG_NONE, (flag),                           \
            "Check the policy's invariants after every operation (slow)", NULL \
    }
#define FSIM_CLI_REPLAY_DEVICE_ENTRY(device)                                                    \
    {                                                                                           \
        "trace-device", 0, 0, G_OPTION_ARG_INT, (device),                                       \
            "Replay only this device of a multi-GPU trace (default: every device with events)", \
            "N"                                                                                 \
    }
/* The --json option of a command: sets *@flag. */
#define FSIM_CLI_JSON_ENTRY(flag)                                                        \
    {                                                                                    \
        "json", 0, 0, G_OPTION_ARG_NONE, (flag), "Print one JSON object on stdout", NULL \
    }

/* The run options of the commands that compare policies (replay, cuda replay, fit): `-p LIST`,
 * `-c STRING` (repeatable: each is a run) and `--set POLICY.KEY=VALUE` (repeatable). */
#define FSIM_CLI_POLICIES_ENTRY(list)                                                 \
    {                                                                                 \
        "policies", 'p', 0, G_OPTION_ARG_STRING, (list),                              \
            "Comma-separated policies (default: all; see 'fragsim policies')", "LIST" \
    }
#define FSIM_CLI_ALLOC_CONFS_ENTRY(strv)                                                        \
    {                                                                                           \
        "alloc-conf", 'c', 0, G_OPTION_ARG_STRING_ARRAY, (strv),                                \
            "A PYTORCH_CUDA_ALLOC_CONF for caching and expandable (repeatable: each is a run)", \
            "STRING"                                                                            \
    }
#define FSIM_CLI_SET_ENTRY(strv)                                                          \
    {                                                                                     \
        "set", 0, 0, G_OPTION_ARG_STRING_ARRAY, (strv), "Set a policy knob (repeatable)", \
            "POLICY.KEY=VALUE"                                                            \
    }

/**
 * fsim_cli_fail:
 * @command: the subcommand name, for the message prefix.
 * @error: the error (consumed: freed).
 *
 * Prints `fragsim COMMAND: MESSAGE` on stderr.
 *
 * Returns: the exit status for @error: 2 for FSIM_ERROR_USAGE, 3 for FSIM_ERROR_OOM, 4 for
 * FSIM_ERROR_DIVERGED, 1 otherwise.
 */
int fsim_cli_fail(const char *command, GError *error);

/* Print a usage error (printf-style) and return FSIM_EXIT_USAGE. */
int fsim_cli_usage_error(const char *command, const char *format, ...) G_GNUC_PRINTF(2, 3);

/**
 * fsim_cli_apply_sets:
 * @config: the run configuration the values go into (group POLICY, key KEY).
 * @sets: (nullable): the `--set` arguments, NULL-terminated: each `POLICY.KEY=VALUE`, or
 *   `device.KEY=VALUE` for the simulated device's fault injection.
 * @example: a well-formed argument, quoted in the message for a malformed one.
 * @device_note: what the message for an unknown POLICY says besides the policy names, e.g.
 *   "device".
 *
 * Sets each value in turn and checks it as the policy (or the device) reads it.
 *
 * Returns: %FALSE at the first argument that is malformed, names an unknown policy (both
 * %FSIM_ERROR_USAGE) or holds a value the policy or the device refuses.
 */
gboolean fsim_cli_apply_sets(GKeyFile *config, const char *const *sets, const char *example,
                             const char *device_note, GError **error);

/**
 * fsim_cli_policies:
 * @list: (nullable): the `-p` argument: comma-separated policy names, blanks ignored.
 *
 * Returns: (transfer full) (nullable): the names of @list, each checked against the registry, or
 * every registered policy when @list is NULL; NULL with %FSIM_ERROR_USAGE when a name is unknown
 * or @list names none.
 */
GPtrArray *fsim_cli_policies(const char *list, GError **error);

/* Whether @trace has something to replay on @device (one of fsim_trace_devices()). */
gboolean fsim_cli_trace_has_device(const FsimTrace *trace, uint32_t device);

/* A modelled time as the tables show it: "4.1 ms", "2.69 s", "250.2 us" (caller frees). */
char *fsim_cli_format_time_ns(uint64_t ns);

/* A unit of fsim_cli_format_duration(): used from @from_ns nanoseconds up, the value in units of
 * @ns nanoseconds with @decimals decimals, then @name. */
typedef struct {
    double from_ns;
    double ns;
    int decimals;
    const char *name;
} FsimCliTimeUnit;

/* @ns in the first of @units (largest first, ended by a NULL @name) it reaches, or in the last
 * (caller frees). */
char *fsim_cli_format_duration(double ns, const FsimCliTimeUnit *units);

/* The one object a command prints with --json: fsim_cli_json_new() begins it in a new writer
 * (pretty when stdout is a terminal), fsim_cli_json_print() ends it and prints it on stdout,
 * newline ended. */
FsimJsonWriter *fsim_cli_json_new(void);
void fsim_cli_json_print(FsimJsonWriter *builder);

/* Add a member (a name and its value) to the JSON object being built; a %NULL string is null. */
void fsim_cli_json_int(FsimJsonWriter *builder, const char *name, int64_t value);
void fsim_cli_json_double(FsimJsonWriter *builder, const char *name, double value);
void fsim_cli_json_bool(FsimJsonWriter *builder, const char *name, gboolean value);
void fsim_cli_json_string(FsimJsonWriter *builder, const char *name, const char *value);
/* Begin an array or an object that is the value of member @name (end it as usual). */
void fsim_cli_json_begin_array(FsimJsonWriter *builder, const char *name);
void fsim_cli_json_begin_object(FsimJsonWriter *builder, const char *name);

/**
 * FsimCliMember:
 *
 * A member of a struct that fsim_cli_json_members() writes: its JSON key, its type and its
 * offset in the struct.  json-members.c lists those of the structs the commands print, each
 * list ended by a member whose @name is NULL.
 */
typedef enum {
    FSIM_CLI_MEMBER_U32,     /* uint32_t */
    FSIM_CLI_MEMBER_U64,     /* uint64_t */
    FSIM_CLI_MEMBER_DOUBLE,  /* double */
    FSIM_CLI_MEMBER_OPT_I64, /* int64_t; null when negative */
} FsimCliMemberKind;

typedef struct {
    const char *name;
    FsimCliMemberKind kind;
    gsize offset;
} FsimCliMember;

/* `info`: a trace device's streams, segments, reserved_bytes, allocs, peak_requested_bytes and
 * duration_ns (#FsimTraceDeviceInfo). */
extern const FsimCliMember fsim_cli_trace_device_members[];

/* `devices` and `cuda calibrate`: the costs of a device (#FsimDeviceCosts, every member, named as
 * a profile's [costs] group names them). */
extern const FsimCliMember fsim_cli_device_costs_members[];

/* The value of a %FSIM_CLI_MEMBER_U64 or %FSIM_CLI_MEMBER_U32 @member of @object. */
uint64_t fsim_cli_member_u64(const FsimCliMember *member, const void *object);
/* Add @member of @object to the JSON object being built. */
void fsim_cli_json_member(FsimJsonWriter *builder, const FsimCliMember *member, const void *object);
/* Add @members of @object (a struct they describe) to the JSON object being built, in order. */
void fsim_cli_json_members(FsimJsonWriter *builder, const FsimCliMember *members,
                           const void *object);
/* Add member @name: an array of one object (fsim_cli_json_members()) per element of @objects. */
void fsim_cli_json_member_array(FsimJsonWriter *builder, const char *name,
                                const FsimCliMember *members, GArray *objects);

/* Add a metric set to a JSON object being built (every FSIM_METRICS key). */
void fsim_cli_json_add_metrics(FsimJsonWriter *builder, const FsimMetrics *metrics);

/* pool-answers.c: a run's memory per pool (default, each private pool: #FsimStoredPool, from
 * fsim_needed_stored_pools()) as a table under a line naming @label (@needs_peak: what the
 * shares of needed_bytes add up to), or as a "pools" member; nothing for NULL. */
void fsim_cli_print_pools(const char *label, const GArray *pools, uint64_t needs_peak);
void fsim_cli_json_add_pools(FsimJsonWriter *builder, const GArray *pools);

/**
 * FsimTable:
 *
 * A text table printed with aligned columns: cells are added row by row, numbers right-aligned.
 */
typedef struct FsimTable FsimTable;
FsimTable *fsim_table_new(guint n_columns, const char *const *headers);
/* Add a cell (copied) to the current row; a row ends after n_columns cells. */
void fsim_table_add(FsimTable *table, const char *text);
void fsim_table_addf(FsimTable *table, const char *format, ...) G_GNUC_PRINTF(2, 3);
void fsim_table_print(FsimTable *table);
void fsim_table_free(FsimTable *table);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimTable, fsim_table_free)

/**
 * FsimProgress:
 *
 * A progress bar on stderr, drawn only when stderr is a terminal and at most a few times per
 * second; silent otherwise.
 */
typedef struct FsimProgress FsimProgress;
/* @total: units of work (0 when unknown: shows a counter). */
FsimProgress *fsim_progress_new(const char *label, uint64_t total);
void fsim_progress_update(FsimProgress *progress, uint64_t done);
/* Erase the bar and free (NULL-safe). */
void fsim_progress_free(FsimProgress *progress);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimProgress, fsim_progress_free)

/* Subcommands. */
int fsim_cmd_replay(int argc, char **argv);
int fsim_cmd_info(int argc, char **argv);
int fsim_cmd_convert(int argc, char **argv);
int fsim_cmd_policies(int argc, char **argv);
int fsim_cmd_devices(int argc, char **argv);
int fsim_cmd_validate(int argc, char **argv);
int fsim_cmd_explain(int argc, char **argv);
int fsim_cmd_cuda(int argc, char **argv);
int fsim_cmd_synth(int argc, char **argv);
int fsim_cmd_estimate(int argc, char **argv);
int fsim_cmd_fit(int argc, char **argv);
int fsim_cmd_plot(int argc, char **argv);
int fsim_cmd_report(int argc, char **argv);
int fsim_cmd_export(int argc, char **argv);
int fsim_cmd_tune(int argc, char **argv);
int fsim_cmd_sweep(int argc, char **argv);
int fsim_cmd_merge(int argc, char **argv);

/* Print the model presets (`--list-models`) as a table, or one JSON object. */
void fsim_cli_print_models(gboolean json);

/* synth/synth.h */
typedef struct FsimTrainOptions FsimTrainOptions;

/**
 * fsim_cli_parse_train:
 * @command, @parameter, @entries, @description: as for fsim_cli_parse_args().
 * @flags: what fsim_train_options_group() takes: the training options follow @entries.
 * @options: what they fill (fsim_train_options_init() is called here).
 * @json: (nullable): the command's --json, read once parsed: --list-models then prints JSON.
 * @argc, @argv: in/out, as fsim_cli_parse() takes them.
 * @status: (out): the exit status, when this returns %FALSE.
 *
 * fsim_cli_parse_args() for the commands that take the training options (estimate, fit, synth
 * train and synth serve), which also answers --list-models; any number of operands.
 *
 * Returns: %FALSE when the command is done (a usage error, or the models listed), with @options
 * cleared.
 */
gboolean fsim_cli_parse_train(const char *command, const char *parameter,
                              const GOptionEntry *entries, guint flags, const char *description,
                              FsimTrainOptions *options, const gboolean *json, int *argc,
                              char ***argv, int *status);

G_END_DECLS
