/* SPDX-License-Identifier: MIT */
/*
 * fragsim validate SNAPSHOT [--json]
 *
 * Replays a recorded trace through PyTorch's allocator model (`caching`, or `expandable` when the
 * snapshot says expandable_segments) and checks every recorded allocation address and driver call
 * against the model (validate.h, docs/validate.md).  Exit status 4 when anything diverges.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/validate.h"

#include "cli.h"

static void
json_add_side(FsimJsonWriter *builder, const char *name, const FsimValidateSide *side,
              gboolean recorded)
{
    fsim_json_set_member_name(builder, name);
    if (!side->present) {
        fsim_json_add_null_value(builder);
        return;
    }
    fsim_json_begin_object(builder);
    if (recorded) {
        fsim_cli_json_int(builder, "index", (gint64)side->index);
    }
    fsim_cli_json_int(builder, "addr", (gint64)side->addr);
    fsim_cli_json_int(builder, "size", (gint64)side->size);
    fsim_json_end_object(builder);
}

static void
validate_print_json(const FsimValidateReport *report)
{
    g_autoptr(FsimJsonWriter) builder = fsim_cli_json_new();
    fsim_cli_json_string(builder, "trace", report->path);
    fsim_cli_json_bool(builder, "exact", report->exact);
    fsim_cli_json_begin_array(builder, "devices");
    for (guint i = 0; i < report->devices->len; i++) {
        const FsimValidateDevice *d = &g_array_index(report->devices, FsimValidateDevice, i);
        const FsimDivergence *div = &d->first_divergence;

        fsim_json_begin_object(builder);
        fsim_cli_json_int(builder, "device", d->device);
        fsim_cli_json_string(builder, "policy", d->policy);
        fsim_cli_json_bool(builder, "exact", d->exact);
        /* the kinds of DESIGN.md; OOMs show in `exact` and `first_divergence` */
        for (int k = FSIM_VALIDATE_ALLOC; k <= FSIM_VALIDATE_SEGMENT_UNMAP; k++) {
            fsim_cli_json_begin_object(builder, fsim_validate_kind_name((FsimValidateKind)k));
            fsim_cli_json_int(builder, "matched", (gint64)d->counts[k].matched);
            fsim_cli_json_int(builder, "total", (gint64)d->counts[k].total);
            fsim_json_end_object(builder);
        }
        fsim_json_set_member_name(builder, "first_divergence");
        if (!div->found) {
            fsim_json_add_null_value(builder);
        } else {
            fsim_json_begin_object(builder);
            fsim_cli_json_int(builder, "event_index", (gint64)div->event_index);
            fsim_cli_json_string(builder, "kind", fsim_validate_kind_action(div->kind));
            json_add_side(builder, "recorded", &div->recorded, TRUE);
            json_add_side(builder, "model", &div->model, FALSE);
            fsim_json_end_object(builder);
        }
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
    fsim_cli_json_print(builder);
}

/* One side of a divergence: for allocs the recorded size is the request, the model's the block. */
static char *
side_text(const FsimValidateSide *side, FsimValidateKind kind, gboolean recorded)
{
    g_autofree char *size = NULL;

    if (!side->present)
        return g_strdup("nothing");
    size = fsim_format_size(side->size);
    if (kind == FSIM_VALIDATE_OOM)
        return g_strdup_printf("OOM for %" G_GUINT64_FORMAT " bytes (%s)", side->size, size);
    return g_strdup_printf("0x%" G_GINT64_MODIFIER "x, %s%" G_GUINT64_FORMAT " bytes (%s)",
                           side->addr,
                           kind != FSIM_VALIDATE_ALLOC ? ""
                           : recorded                  ? "request of "
                                                       : "block of ",
                           side->size, size);
}

static void
validate_print_text(const FsimValidateReport *report)
{
    static const char *const headers[] = {"device",         "policy",        "allocs",
                                          "segment_allocs", "segment_frees", "segment_maps",
                                          "segment_unmaps", "ooms",          "result"};
    g_autoptr(FsimTable) table = fsim_table_new(G_N_ELEMENTS(headers), headers);

    g_print("%s: %s\n", report->path,
            report->devices->len == 0 ? "nothing to replay"
            : report->exact           ? "exact: the model did everything PyTorch did"
                                      : "DIVERGED");
    if (report->devices->len == 0)
        return;
    for (guint i = 0; i < report->devices->len; i++) {
        const FsimValidateDevice *d = &g_array_index(report->devices, FsimValidateDevice, i);

        fsim_table_addf(table, "%u", d->device);
        fsim_table_add(table, d->policy);
        for (int k = 0; k < FSIM_VALIDATE_KIND_COUNT; k++)
            fsim_table_addf(table, "%" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT, d->counts[k].matched,
                            d->counts[k].total);
        fsim_table_add(table, d->exact ? "exact" : "diverged");
    }
    fsim_table_print(table);
    for (guint i = 0; i < report->devices->len; i++) {
        const FsimValidateDevice *d = &g_array_index(report->devices, FsimValidateDevice, i);
        const FsimDivergence *div = &d->first_divergence;
        g_autofree char *capacity = fsim_format_size(d->capacity_bytes);
        g_autofree char *npu =
            strcmp(report->platform, "npu") != 0 ? g_strdup("")
            : report->platform_detected
                ? g_strdup_printf(" (torch_npu's allocator: %s)", report->platform_why)
                : g_strdup(" (torch_npu's allocator)");

        g_print("device %u: %s%s%s%s%s on %s (%s)\n", d->device, d->policy, npu,
                *d->alloc_conf != '\0' ? " with " : "", d->alloc_conf,
                report->alloc_conf_given ? " (given with -c, not the recorded settings)" : "",
                capacity,
                d->capacity_from_oom ? "reserved at the first OOM + the free memory it reported"
                                     : "the peak of the recorded reserved memory");
        if (div->found) {
            g_autofree char *recorded = side_text(&div->recorded, div->kind, TRUE);
            g_autofree char *model = side_text(&div->model, div->kind, FALSE);
            g_autofree char *entry =
                div->recorded.present
                    ? g_strdup_printf(" (entry %" G_GUINT64_FORMAT ")", div->recorded.index)
                    : g_strdup("");

            g_print("  first divergence at event %" G_GUINT64_FORMAT ": %s\n"
                    "    recorded%s: %s\n    model: %s\n",
                    div->event_index, fsim_validate_kind_action(div->kind), entry, recorded, model);
        }
    }
}

/* How many recorded decisions the report checked, over every device and kind. */
static uint64_t
validate_checked(const FsimValidateReport *report)
{
    uint64_t total = 0;

    for (guint i = 0; i < report->devices->len; i++) {
        const FsimValidateDevice *d = &g_array_index(report->devices, FsimValidateDevice, i);

        for (int k = 0; k < FSIM_VALIDATE_KIND_COUNT; k++)
            total += d->counts[k].total;
    }
    return total;
}

/* What parsing leaves unchecked of --platform and -c: FSIM_EXIT_OK, or the usage error's
 * status. */
static int
validate_check_flags(const char *platform, char **alloc_confs)
{
    GError *error = NULL;

    if (platform != NULL && g_ascii_strcasecmp(platform, "cuda") != 0 &&
        g_ascii_strcasecmp(platform, "npu") != 0)
        return fsim_cli_usage_error("validate", "--platform: '%s' is neither cuda nor npu",
                                    platform);
    if (alloc_confs != NULL) {
        FsimAllocConf conf;

        /* one configuration: validate checks whether the model makes the recorded decisions */
        if (g_strv_length(alloc_confs) > 1)
            return fsim_cli_usage_error("validate", "-c: give one configuration (validate "
                                                    "checks the recording against one)");
        fsim_alloc_conf_init(&conf);
        if (!fsim_alloc_conf_parse(&conf, alloc_confs[0], &error)) {
            g_autofree char *message = g_strdup(error->message);

            g_clear_error(&error);
            return fsim_cli_usage_error("validate", "-c: %s", message);
        }
    }
    return FSIM_EXIT_OK;
}

/* Say that @path has no recorded allocator decisions to check. */
static int
validate_nothing(const char *path)
{
    g_printerr("fragsim validate: nothing to validate: %s has no recorded allocator decisions\n",
               path);
    return FSIM_EXIT_NOTHING;
}

int
fsim_cmd_validate(int argc, char **argv)
{
    gboolean json = FALSE;
    g_autofree char *platform = NULL;
    g_auto(GStrv) alloc_confs = NULL;
    GOptionEntry entries[] = {
        {"alloc-conf", 'c', 0, G_OPTION_ARG_STRING_ARRAY, &alloc_confs,
         "Validate with this PYTORCH_CUDA_ALLOC_CONF instead of the settings the snapshot "
         "recorded (for snapshots that did not record them)",
         "STRING"},
        FSIM_CLI_JSON_ENTRY(&json),
        {"platform", 0, 0, G_OPTION_ARG_STRING, &platform,
         "cuda or npu: whose allocator recorded the snapshot (default: told from its addresses)",
         "PLATFORM"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(FsimValidateReport) report = NULL;
    GError *error = NULL;
    int status;

    if (!fsim_cli_parse_args(
            "validate", "SNAPSHOT - check the PyTorch allocator model against a recorded trace",
            entries,
            "Replays the snapshot through 'caching' (or 'expandable' when its allocator settings\n"
            "say expandable_segments) from the state at trace start, with each new segment at the\n"
            "address the driver gave it, and checks every alloc address, segment_alloc,\n"
            "segment_free, segment_map, segment_unmap and oom.\n"
            "-c replaces the recorded settings (a snapshot that did not record them).\n"
            "Exit status: 0 exact, 1 bad input, 2 usage error, 4 divergence, 5 nothing to "
            "validate\n"
            "(the file has no recorded allocator decisions: a snapshot of state only, a text "
            "trace,\n"
            "an RMM log).",
            "SNAPSHOT", &argc, &argv))
        return FSIM_EXIT_USAGE;
    status = validate_check_flags(platform, alloc_confs);
    if (status != FSIM_EXIT_OK)
        return status;
    {
        g_autoptr(FsimTrace) trace = fsim_trace_open_without_stacks(argv[1], &error);

        report = trace != NULL
                     ? fsim_validate_trace_with(trace, platform,
                                                alloc_confs != NULL ? alloc_confs[0] : NULL, &error)
                     : NULL;
    }
    if (report == NULL && g_error_matches(error, FSIM_ERROR, FSIM_ERROR_USAGE)) {
        /* not a snapshot at all: a text trace or an RMM log */
        g_clear_error(&error);
        return validate_nothing(argv[1]);
    }
    if (report == NULL)
        return fsim_cli_fail("validate", error);
    if (validate_checked(report) == 0) {
        /* "exact" must mean that at least one decision was checked */
        return validate_nothing(argv[1]);
    }
    if (json)
        validate_print_json(report);
    else
        validate_print_text(report);
    return report->exact ? FSIM_EXIT_OK : FSIM_EXIT_DIVERGED;
}
