/* SPDX-License-Identifier: MIT */
/*
 * fragsim estimate [MODEL OPTIONS] [--activations SIZE] [-d DEVICE] [--json]
 *
 * The closed-form memory of a training configuration, per component, and whether it fits a
 * device.  The conventions (bytes per parameter, activation formulas, what "GB" means) are in
 * docs/synth.md.
 */
#include <glib.h>

#include <stddef.h>

#include "cli.h"
#include "synth/synth.h"

/* A model's dimensions as --list-models prints them: the JSON member (a uint32_t of
 * #FsimModelShape) and the column of the table (NULL: not in it). */
static const struct {
    FsimCliMember member;
    const char *column;
} model_dims[] = {
    {{"layers", FSIM_CLI_MEMBER_U32, offsetof(FsimModelShape, layers)}, "layers"},
    {{"hidden", FSIM_CLI_MEMBER_U32, offsetof(FsimModelShape, hidden)}, "hidden"},
    {{"heads", FSIM_CLI_MEMBER_U32, offsetof(FsimModelShape, heads)}, "heads"},
    {{"kv_heads", FSIM_CLI_MEMBER_U32, offsetof(FsimModelShape, kv_heads)}, "KV"},
    {{"head_dim", FSIM_CLI_MEMBER_U32, offsetof(FsimModelShape, head_dim)}, NULL},
    {{"ffn", FSIM_CLI_MEMBER_U32, offsetof(FsimModelShape, ffn)}, "FFN"},
    {{"vocab", FSIM_CLI_MEMBER_U32, offsetof(FsimModelShape, vocab)}, "vocab"},
};

static void
print_models_json(const FsimModelShape *presets, gsize n)
{
    g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
    fsim_cli_json_begin_array(builder, "models");
    for (gsize i = 0; i < n; i++) {
        const FsimModelShape *m = &presets[i];
        fsim_json_begin_object(builder);
        fsim_cli_json_string(builder, "name", m->name);
        fsim_cli_json_string(builder, "description", m->description);
        fsim_cli_json_int(builder, "params", (gint64)fsim_model_params(m));
        for (gsize d = 0; d < G_N_ELEMENTS(model_dims); d++)
            fsim_cli_json_member(builder, &model_dims[d].member, m);
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
    fsim_cli_json_print(builder);
}

void
fsim_cli_print_models(gboolean json)
{
    gsize n;
    const FsimModelShape *presets = fsim_model_presets(&n);
    const char *headers[G_N_ELEMENTS(model_dims) + 3] = {"name", "parameters"};
    guint n_columns = 2;

    if (json) {
        print_models_json(presets, n);
        return;
    }
    for (gsize d = 0; d < G_N_ELEMENTS(model_dims); d++) {
        if (model_dims[d].column != NULL)
            headers[n_columns++] = model_dims[d].column;
    }
    headers[n_columns++] = "description";
    g_autoptr(FsimTable) table = fsim_table_new(n_columns, headers);
    for (gsize i = 0; i < n; i++) {
        const FsimModelShape *m = &presets[i];
        g_autofree char *params = fsim_format_count(fsim_model_params(m));
        fsim_table_add(table, m->name);
        fsim_table_add(table, params);
        for (gsize d = 0; d < G_N_ELEMENTS(model_dims); d++) {
            if (model_dims[d].column != NULL)
                fsim_table_addf(table, "%" G_GUINT64_FORMAT,
                                fsim_cli_member_u64(&model_dims[d].member, m));
        }
        fsim_table_add(table, m->description);
    }
    fsim_table_print(table);
}

gboolean
fsim_cli_parse_train(const char *command, const char *parameter, const GOptionEntry *entries,
                     guint flags, const char *description, FsimTrainOptions *options,
                     const gboolean *json, int *argc, char ***argv, int *status)
{
    /* the options' values are the caller's: the context can go once it has parsed */
    g_autoptr(GOptionContext) context = g_option_context_new(parameter);

    fsim_train_options_init(options);
    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_add_group(context, fsim_train_options_group(options, flags));
    g_option_context_set_description(context, description);
    if (!fsim_cli_parse(context, command, argc, argv)) {
        fsim_train_options_clear(options);
        *status = FSIM_EXIT_USAGE;
        return FALSE;
    }
    if (options->list_models) {
        fsim_train_options_clear(options);
        fsim_cli_print_models(json != NULL && *json);
        *status = FSIM_EXIT_OK;
        return FALSE;
    }
    return TRUE;
}

static void
estimate_row(FsimTable *table, const char *name, uint64_t bytes, uint64_t params, const char *note)
{
    g_autofree char *exact = fsim_format_count(bytes);
    fsim_table_add(table, name);
    fsim_table_add(table, exact);
    fsim_table_addf(table, "%.2f", (double)bytes / 1e9);
    fsim_table_addf(table, "%.2f", (double)bytes / (double)FSIM_GiB);
    if (params)
        fsim_table_addf(table, "%.2f", (double)bytes / (double)params);
    else
        fsim_table_add(table, "");
    fsim_table_add(table, note ? note : "");
}

/* The estimate (@est of @config) as one JSON object; with @spec (nullable), whether it fits. */
static void
estimate_print_json(const FsimTrainConfig *config, const FsimEstimate *est,
                    const FsimDeviceSpec *spec, gboolean fits)
{
    g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
    fsim_cli_json_string(builder, "model", config->model.name);
    fsim_cli_json_int(builder, "params", (gint64)est->params);
    fsim_cli_json_int(builder, "trainable_params", (gint64)est->trainable_params);
    fsim_cli_json_double(builder, "bytes_per_param", est->bytes_per_param);
    fsim_cli_json_int(builder, "weights_bytes", (gint64)est->weights_bytes);
    fsim_cli_json_int(builder, "gradients_bytes", (gint64)est->gradients_bytes);
    fsim_cli_json_int(builder, "optimizer_bytes", (gint64)est->optimizer_bytes);
    fsim_cli_json_int(builder, "master_weights_bytes", (gint64)est->master_bytes);
    fsim_cli_json_int(builder, "activations_bytes", (gint64)est->activations_bytes);
    fsim_cli_json_int(builder, "layer_activations_bytes", (gint64)est->layer_activations_bytes);
    fsim_cli_json_int(builder, "temporaries_bytes", (gint64)est->temporaries_bytes);
    fsim_cli_json_int(builder, "total_bytes", (gint64)est->total_bytes);
    fsim_cli_json_string(builder, "peak_phase", est->peak_phase);
    if (spec) {
        fsim_cli_json_string(builder, "device", spec->name);
        fsim_cli_json_int(builder, "capacity_bytes", (gint64)spec->capacity_bytes);
        fsim_cli_json_bool(builder, "fits", fits);
    }
    fsim_cli_json_print(builder);
}

/* The estimate (@est of @config) as a table, then the bytes per parameter and, with @spec
 * (nullable), whether it fits. */
static void
estimate_print_text(const FsimTrainConfig *config, const FsimEstimate *est,
                    const FsimDeviceSpec *spec, gboolean fits)
{
    g_autofree char *about = fsim_train_config_describe(config);
    g_print("%s\n", about);
    static const char *const headers[] = {"component", "bytes", "GB", "GiB", "per param", ""};
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(headers), headers);
    uint64_t p = est->rank_params;
    g_autofree char *opt_note = NULL;
    if (est->master_bytes)
        opt_note =
            g_strdup_printf("fp32 master weights %.2f GB + %s state %.2f GB",
                            (double)est->master_bytes / 1e9, fsim_optimizer_name(config->optimizer),
                            (double)(est->optimizer_bytes - est->master_bytes) / 1e9);
    g_autofree char *act_note = NULL;
    if (config->activations_bytes)
        act_note = g_strdup("measured figure (stands for temporaries too)");
    else
        act_note = g_strdup_printf("saved for backward: %.1f MB per layer",
                                   (double)est->layer_activations_bytes / 1e6);
    g_autofree char *tmp_note = g_strdup_printf("peak: %s", est->peak_phase);
    estimate_row(table, "weights", est->weights_bytes, p, NULL);
    estimate_row(table, "gradients", est->gradients_bytes, p, NULL);
    estimate_row(table, "optimizer", est->optimizer_bytes, p, opt_note);
    estimate_row(table, "activations", est->activations_bytes, 0, act_note);
    estimate_row(table, "temporaries", est->temporaries_bytes, 0,
                 config->activations_bytes ? NULL : tmp_note);
    estimate_row(table, "total", est->total_bytes, 0, NULL);
    fsim_table_print(table);
    g_print("\nModel state: %.2f bytes per parameter", est->bytes_per_param);
    if (config->lora)
        g_print(" (%" G_GUINT64_FORMAT " trainable adapter parameters)", est->trainable_params);
    g_print(".  GB = 10^9 bytes, GiB = 2^30.\n");
    if (spec) {
        g_print("%s: %.2f GB usable: %s (%.1f%% of it)\n", spec->name,
                (double)spec->capacity_bytes / 1e9, fits ? "fits" : "does not fit",
                100.0 * (double)est->total_bytes / (double)spec->capacity_bytes);
    }
}

int
fsim_cmd_estimate(int argc, char **argv)
{
    FsimTrainOptions options;
    g_autofree char *device_name = NULL;
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        {"device", 'd', 0, G_OPTION_ARG_STRING, &device_name,
         "Say whether it fits this GPU: a preset or a size (80GB, 24GiB)", "DEVICE"},
        FSIM_CLI_JSON_ENTRY(&json),
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autofree char *description =
        g_strconcat(fsim_train_options_help(),
                    "\n\nExamples: fragsim estimate --model llama2-7b -d h100-80gb\n"
                    "          fragsim estimate --params 7e9 --activations 20GB -d 80GB\n",
                    NULL);
    GError *error = NULL;
    FsimTrainConfig config;
    FsimEstimate est;
    FsimDeviceSpec spec;
    int status;

    if (!fsim_cli_parse_train("estimate", "- closed-form training memory of a model", entries,
                              FSIM_TRAIN_OPTIONS_ACTIVATIONS, description, &options, &json, &argc,
                              &argv, &status))
        return status;
    if (argc > 2) {
        fsim_train_options_clear(&options);
        return fsim_cli_usage_error("estimate", "unexpected argument '%s'", argv[2]);
    }
    gboolean ok =
        fsim_train_options_resolve(&options, argc == 2 ? argv[1] : NULL, &config, &error) &&
        fsim_estimate_train(&config, &est, &error) &&
        (device_name == NULL || fsim_device_spec_parse(device_name, &spec, &error));
    fsim_train_options_clear(&options);
    if (!ok)
        return fsim_cli_fail("estimate", error);
    gboolean fits = device_name != NULL && est.total_bytes <= spec.capacity_bytes;

    if (json)
        estimate_print_json(&config, &est, device_name ? &spec : NULL, fits);
    else
        estimate_print_text(&config, &est, device_name ? &spec : NULL, fits);
    return FSIM_EXIT_OK;
}
