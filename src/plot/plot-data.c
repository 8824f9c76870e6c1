/* SPDX-License-Identifier: MIT */
/*
 * Plots: the data behind every plot of a group: the x axis (time or event index) and the memory
 * unit, the runs' colours and labels, their samples and OOMs loaded from the store, and the
 * data files the templates draw (samples.dat, ooms.dat).
 */
#include <glib.h>

#include <string.h>

#include "plotter.h"

MemUnit
fsim_plot_mem_unit_for(uint64_t max_bytes)
{
    if (max_bytes >= FSIM_GiB)
        return (MemUnit){(double)FSIM_GiB, "GiB"};
    if (max_bytes >= FSIM_MiB)
        return (MemUnit){(double)FSIM_MiB, "MiB"};
    return (MemUnit){(double)FSIM_KiB, "KiB"};
}

double
fsim_plot_x_of(const XAxis *axis, FsimTime time, int64_t event_index)
{
    if (axis->use_time)
        return time <= axis->origin ? 0.0 : (double)(time - axis->origin) / axis->divisor;
    return (double)(event_index < 0 ? 0 : event_index);
}

void
fsim_plot_num(GString *out, double value)
{
    char buffer[G_ASCII_DTOSTR_BUF_SIZE];

    g_string_append(out, g_ascii_formatd(buffer, sizeof(buffer), "%.7g", value));
}

/* A string for a data file: double-quoted, with gnuplot's backslash escapes. */
void
fsim_plot_quoted(GString *out, const char *text)
{
    g_string_append_c(out, '"');
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            g_string_append_c(out, '\\');
        if (*p == '\n')
            g_string_append(out, "\\n");
        else if ((unsigned char)*p >= 0x20)
            g_string_append_c(out, *p);
    }
    g_string_append_c(out, '"');
}

/* ---- colours ------------------------------------------------------------------------------- */

static const struct {
    const char *policy;
    const char *colour;
} policy_colours[] = {
    {"direct", "#7f7f7f"},     {"bestfit", "#d62728"}, {"caching", "#1f77b4"},
    {"expandable", "#2ca02c"}, {"paged", "#9467bd"},
};

static const char *const spare_colours[] = {"#ff7f0e", "#8c564b", "#e377c2", "#17becf",
                                            "#bcbd22", "#393b79", "#637939", "#843c39"};

static void
group_run_clear(gpointer data)
{
    GroupRun *run = data;

    g_clear_pointer(&run->samples, g_array_unref);
    g_clear_pointer(&run->ooms, g_array_unref);
}

/* The runs of @group, each with its colour: its policy's, or a spare one when the policy is
 * unknown or appears twice; their data is loaded later. */
static GArray *
group_runs_new(const FsimPlotGroup *group)
{
    GArray *runs = g_array_sized_new(FALSE, TRUE, sizeof(GroupRun), group->runs->len);
    guint spare = 0;

    g_array_set_clear_func(runs, group_run_clear);
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        GroupRun added = {NULL, NULL, NULL};

        for (gsize c = 0; c < G_N_ELEMENTS(policy_colours); c++)
            if (strcmp(run->policy, policy_colours[c].policy) == 0)
                added.colour = policy_colours[c].colour;
        for (guint j = 0; added.colour != NULL && j < runs->len; j++)
            if (g_array_index(runs, GroupRun, j).colour == added.colour)
                added.colour = NULL;
        if (added.colour == NULL)
            added.colour = spare_colours[spare++ % G_N_ELEMENTS(spare_colours)];
        g_array_append_val(runs, added);
    }
    return runs;
}

guint32
fsim_plot_colour_value(const char *colour)
{
    return (guint32)g_ascii_strtoull(colour + 1, NULL, 16);
}

/* The legend label of @run: its label (policy and config), and its id when that repeats in the
 * group. */
char *
fsim_plot_run_label(const FsimPlotGroup *group, const FsimStoredRun *run)
{
    guint same = 0;

    for (guint i = 0; i < group->runs->len; i++)
        same += strcmp(((const FsimStoredRun *)group->runs->pdata[i])->label, run->label) == 0;
    if (same > 1)
        return g_strdup_printf("%s #%" G_GINT64_FORMAT, run->label, run->id);
    return g_strdup(run->label);
}
/* ---- per group ----------------------------------------------------------------------------- */

void
fsim_plot_group_data_clear(GroupData *g)
{
    g_clear_pointer(&g->runs, g_array_unref);
    g_clear_pointer(&g->where, g_free);
}

/* A snapshot without `time_us` is read on a clock of 1 µs per entry (docs/trace-formats.md):
 * such times say nothing, so the x axis is then the event index. */
#define TORCH_CLOCK_STEP 1000

/* The x axis of the group: time from the trace's start in s, ms or µs, else event indices. */
static void
choose_x_axis(GroupData *g, FsimTime first_time, FsimTime last_time, uint64_t last_index)
{
    FsimTime span = last_time > first_time ? last_time - first_time : 0;

    g->x.use_time = last_time > 0 && span > 0;
    g->x.origin = g->x.use_time ? first_time : 0;
    if (!g->x.use_time) {
        g->x.divisor = 1;
        g->x.label = "event index";
        g->x.unit = "";
        g->x.end = (double)last_index;
    } else {
        if (span >= 2 * (FsimTime)1000000000) {
            g->x.divisor = 1e9;
            g->x.label = "time from the trace's start (s)";
            g->x.unit = "s";
        } else if (span >= 2000000) {
            g->x.divisor = 1e6;
            g->x.label = "time from the trace's start (ms)";
            g->x.unit = "ms";
        } else {
            g->x.divisor = 1e3;
            g->x.label = "time from the trace's start (µs)";
            g->x.unit = "µs";
        }
        g->x.end = (double)span / g->x.divisor;
    }
    g->x.start = 0;
}

gboolean
fsim_plot_group_data_load(Plotter *p, const FsimPlotGroup *group, GroupData *g, GError **error)
{
    FsimTime first_time = G_MAXINT64, last_time = 0;
    uint64_t last_index = 0, peak = 0;
    gboolean synthetic = TRUE; /* times that are only a count of events (untimed snapshots) */
    g_autofree char *base = g_path_get_basename(group->trace);
    g_autofree char *capacity = fsim_format_size(group->capacity_bytes);
    g_autofree char *device = g_strdup_printf("%s (%s)", group->device, capacity);

    g->group = group;
    g->runs = group_runs_new(group);
    if (g->multi_device || group->trace_device != 0)
        g->where = g_strdup_printf("%s, trace device %u, on %s", base, group->trace_device, device);
    else
        g->where = g_strdup_printf("%s on %s", base, device);
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        GroupRun *data = GROUP_RUN(g, i);

        data->samples = fsim_store_samples(p->store, run->id, error);
        if (data->samples == NULL)
            return FALSE;
        data->ooms = fsim_store_ooms(p->store, run->id, error);
        if (data->ooms == NULL)
            return FALSE;
        for (guint s = 0; s < data->samples->len; s++) {
            const FsimStoredSample *sample = &g_array_index(data->samples, FsimStoredSample, s);

            synthetic &= sample->time == (FsimTime)sample->event_index * TORCH_CLOCK_STEP &&
                         sample->time_last == (FsimTime)sample->event_index_last * TORCH_CLOCK_STEP;
            first_time = MIN(first_time, sample->time);
            last_time = MAX(last_time, sample->time_last);
            last_index = MAX(last_index, sample->event_index_last);
            peak = MAX(peak, sample->reserved_max);
        }
    }
    if (synthetic)
        last_time = 0;
    choose_x_axis(g, first_time == G_MAXINT64 ? 0 : first_time, last_time, last_index);
    g->unit = fsim_plot_mem_unit_for(peak);
    return TRUE;
}

char *
fsim_plot_wrap(const char *text, guint width)
{
    GString *out = g_string_new(NULL);
    const char *line = text;

    width = MAX(width, 16);
    while (g_utf8_strlen(line, -1) > (glong)width) {
        const char *cut = NULL;
        const char *c = line;

        /* The last space (or the space after a comma) within the width. */
        for (guint n = 0; *c != '\0' && n <= width; n++, c += g_utf8_skip[*(const guchar *)c])
            if (*c == ' ' && n > width / 3)
                cut = c;
        if (cut == NULL) {
            /* One long word (a file name): cut it at the width, after a '_' or '-' if any. */
            c = line;
            for (guint n = 0; n < width; n++, c += g_utf8_skip[*(const guchar *)c])
                if ((*c == '_' || *c == '-' || *c == ',') && n > width / 2)
                    cut = c + 1;
            if (cut == NULL)
                cut = c;
            g_string_append_len(out, line, cut - line);
            g_string_append_c(out, '\n');
            line = cut;
            continue;
        }
        g_string_append_len(out, line, cut - line);
        g_string_append_c(out, '\n');
        line = cut + 1;
    }
    g_string_append(out, line);
    return g_string_free(out, FALSE);
}

/* The labels of the group's runs, joined by ", ". */
static char *
group_labels(const GroupData *g)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; i < g->group->runs->len; i++) {
        g_autofree char *label = fsim_plot_run_label(g->group, g->group->runs->pdata[i]);

        g_string_append_printf(out, "%s%s", i > 0 ? ", " : "", label);
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

char *
fsim_plot_title(const GroupData *g, const char *what, const FsimStoredRun *run)
{
    if (run != NULL) {
        g_autofree char *label = fsim_plot_run_label(g->group, run);

        return g_strdup_printf("%s\n%s\nrun %" G_GINT64_FORMAT ": %s", what, g->where, run->id,
                               label);
    } else {
        g_autofree char *labels = group_labels(g);

        if (g_utf8_strlen(labels, -1) + 6 <= 2 * FSIM_PLOT_TITLE_WIDTH)
            return g_strdup_printf("%s\n%s\nruns: %s", what, g->where, labels);
        return g_strdup_printf("%s\n%s\n%u runs (see the legend)", what, g->where,
                               g->group->runs->len);
    }
}

char *
fsim_plot_shown_title(const char *title, guint width)
{
    g_auto(GStrv) lines = g_strsplit(title, "\n", -1);
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; lines[i] != NULL; i++) {
        g_autofree char *wrapped = fsim_plot_wrap(lines[i], width);
        g_autofree char *escaped = fsim_plot_escape(wrapped);

        g_string_append_printf(out, "%s%s", i > 0 ? "\n" : "", escaped);
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

char *
fsim_plot_group_file(const GroupData *g, const char *stem, const char *ext)
{
    return g_strdup_printf("%s%s.%s", stem, g->suffix, ext);
}

char *
fsim_plot_image_name(const Plotter *p, const GroupData *g, const char *stem)
{
    return fsim_plot_group_file(g, stem, fsim_plot_format_name(p->format));
}

char *
fsim_plot_colour_list(const GroupData *g)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; i < g->runs->len; i++)
        g_string_append_printf(out, "%s%s", i ? " " : "", GROUP_RUN(g, i)->colour);
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* samples.dat: one block per run, used by the timeline and the fragmentation plots. */
gboolean
fsim_plot_write_samples(const Plotter *p, const GroupData *g, const char *name, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);

    g_string_append_printf(out,
                           "# fragsim plot data: memory over time, one block (gnuplot index) per "
                           "run.\n# x: %s; memory in %s.\n# reserved, allocated and requested: "
                           "maximum over the bucket of events ending at x;\n# overhead = reserved "
                           "- requested, frag = 100 (1 - allocated / reserved) after its last "
                           "event.\n",
                           g->x.label, g->unit.name);
    for (guint r = 0; r < g->group->runs->len; r++) {
        const FsimStoredRun *run = g->group->runs->pdata[r];
        GArray *samples = GROUP_RUN(g, r)->samples;
        g_autofree char *label = fsim_plot_run_label(g->group, run);

        if (r > 0)
            g_string_append(out, "\n\n");
        g_string_append_printf(out,
                               "# run %" G_GINT64_FORMAT "\nx reserved allocated requested "
                               "overhead frag ",
                               run->id);
        /* A run without samples (a recording's own row) has no line: no legend entry either. */
        fsim_plot_quoted(out, samples->len > 0 ? label : "");
        g_string_append_c(out, '\n');
        for (guint s = 0; s < samples->len; s++) {
            const FsimStoredSample *x = &g_array_index(samples, FsimStoredSample, s);
            double frag =
                x->reserved > 0
                    ? 100.0 * (1.0 - (double)MIN(x->allocated, x->reserved) / (double)x->reserved)
                    : 0.0;

            fsim_plot_num(out, fsim_plot_x_of(&g->x, x->time_last, (int64_t)x->event_index_last));
            g_string_append_c(out, ' ');
            fsim_plot_num(out, (double)x->reserved_max / g->unit.divisor);
            g_string_append_c(out, ' ');
            fsim_plot_num(out, (double)x->allocated_max / g->unit.divisor);
            g_string_append_c(out, ' ');
            fsim_plot_num(out, (double)x->requested_max / g->unit.divisor);
            g_string_append_c(out, ' ');
            fsim_plot_num(out,
                          (double)(x->reserved > x->requested ? x->reserved - x->requested : 0) /
                              g->unit.divisor);
            g_string_append_c(out, ' ');
            fsim_plot_num(out, frag);
            g_string_append_c(out, '\n');
        }
        if (samples->len == 0)
            g_string_append(out, "0 0 0 0 0 0\n");
    }
    return fsim_plot_write_file(p, name, out, error);
}

/* ooms.dat: x, reserved at the OOM, the run's colour; "" when there is none. */
gboolean
fsim_plot_write_ooms(const Plotter *p, const GroupData *g, const char *name, guint *count,
                     GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);

    *count = 0;
    g_string_append_printf(out,
                           "# fragsim plot data: simulated OOMs.\n# x (%s), reserved (%s) "
                           "when the allocation failed, colour of the run\n",
                           g->x.label, g->unit.name);
    for (guint r = 0; r < g->group->runs->len; r++) {
        GArray *ooms = GROUP_RUN(g, r)->ooms;

        for (guint i = 0; i < ooms->len; i++) {
            const FsimOomRecord *o = &g_array_index(ooms, FsimOomRecord, i);

            fsim_plot_num(out, fsim_plot_x_of(&g->x, o->time, (int64_t)o->event_index));
            g_string_append_c(out, ' ');
            fsim_plot_num(out, (double)o->reserved_bytes / g->unit.divisor);
            g_string_append_printf(out, " %u\n", fsim_plot_colour_value(GROUP_RUN(g, r)->colour));
            (*count)++;
        }
    }
    return fsim_plot_write_file(p, name, out, error);
}
