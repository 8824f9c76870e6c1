/* SPDX-License-Identifier: MIT */
/*
 * Plots of stored runs, drawn by gnuplot.  See plot.h for the contract and docs/plots.md for
 * what each plot shows.
 *
 * The division of labour: this file reads the database, turns bytes and nanoseconds into the
 * units of the axes (GiB or MiB, s/ms/µs or event index), lays out address maps, and writes one
 * plain data file per plot; the templates in plots/ only draw.  gnuplot runs in the output
 * directory with relative paths, so `plots.sh` there can run the very same commands again.
 *
 * User text (trace names, device names given as sizes) reaches gnuplot only as `-c` argument
 * values, escaped for enhanced text (fsim_plot_escape()), or in data files drawn `noenhanced`;
 * it is never part of a script, so it cannot inject gnuplot commands.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <string.h>

#include "fragsim/plot.h"

#ifndef FSIM_PLOTS_SOURCE_DIR
#define FSIM_PLOTS_SOURCE_DIR ""
#endif
#ifndef FSIM_PLOTS_INSTALL_DIR
#define FSIM_PLOTS_INSTALL_DIR ""
#endif

GQuark
fsim_plot_error_quark(void)
{
    return g_quark_from_static_string("fsim-plot-error-quark");
}

const char *
fsim_plot_format_name(FsimPlotFormat format)
{
    return format == FSIM_PLOT_SVG ? "svg" : "png";
}

gboolean
fsim_plot_format_from_name(const char *name, FsimPlotFormat *out)
{
    if (strcmp(name, "png") == 0)
        *out = FSIM_PLOT_PNG;
    else if (strcmp(name, "svg") == 0)
        *out = FSIM_PLOT_SVG;
    else
        return FALSE;
    return TRUE;
}

char *
fsim_plot_escape(const char *text)
{
    GString *out = g_string_sized_new(strlen(text) + 8);

    for (const char *p = text; *p != '\0'; p++) {
        if (strchr("\\^_@&~{}", *p) != NULL)
            g_string_append_c(out, '\\');
        g_string_append_c(out, *p);
    }
    return g_string_free(out, FALSE);
}

/* ---- finding gnuplot and the templates ----------------------------------------------------- */

char *
fsim_plot_find_gnuplot(const char *override, GError **error)
{
    char *path;

    if (override != NULL && *override != '\0') {
        if (strchr(override, G_DIR_SEPARATOR) != NULL) {
            if (g_file_test(override, G_FILE_TEST_IS_EXECUTABLE) &&
                !g_file_test(override, G_FILE_TEST_IS_DIR))
                return g_strdup(override);
            path = NULL;
        } else {
            path = g_find_program_in_path(override);
        }
        if (path == NULL)
            g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_GNUPLOT,
                        "--gnuplot '%s': no such program", override);
        return path;
    }
    path = g_find_program_in_path("gnuplot");
    if (path == NULL)
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_GNUPLOT,
                    "gnuplot is not installed (Debian: apt-get install gnuplot-nox), or not in "
                    "PATH; name it with --gnuplot PATH");
    return path;
}

static gboolean
templates_in(const char *dir)
{
    g_autofree char *probe = NULL;

    if (dir == NULL || *dir == '\0')
        return FALSE;
    probe = g_build_filename(dir, "timeline.gp", NULL);
    return g_file_test(probe, G_FILE_TEST_IS_REGULAR);
}

char *
fsim_plot_find_templates(const char *override, GError **error)
{
    g_autoptr(GPtrArray) tried = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    g_autofree char *joined = NULL;
    const char *env = g_getenv("FRAGSIM_PLOTS_DIR");

    if (override != NULL) {
        if (templates_in(override))
            return g_strdup(override);
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_TEMPLATES,
                    "%s: no gnuplot templates there (timeline.gp...)", override);
        return NULL;
    }
    if (env != NULL && *env != '\0') {
        if (templates_in(env))
            return g_strdup(env);
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_TEMPLATES,
                    "FRAGSIM_PLOTS_DIR=%s: no gnuplot templates there (timeline.gp...)", env);
        return NULL;
    }
    if (exe != NULL) {
        g_autofree char *bin = g_path_get_dirname(exe);

        g_ptr_array_add(tried, g_build_filename(bin, "..", "share", "fragsim", "plots", NULL));
    }
    g_ptr_array_add(tried, g_strdup(FSIM_PLOTS_INSTALL_DIR));
    g_ptr_array_add(tried, g_strdup(FSIM_PLOTS_SOURCE_DIR));
    for (guint i = 0; i < tried->len; i++) {
        if (templates_in(tried->pdata[i]))
            return g_strdup(tried->pdata[i]);
    }
    g_ptr_array_add(tried, NULL);
    joined = g_strjoinv(", ", (char **)tried->pdata);
    g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_TEMPLATES,
                "cannot find the gnuplot templates (timeline.gp...) in %s; set FRAGSIM_PLOTS_DIR",
                joined);
    return NULL;
}

/* ---- runs and groups ----------------------------------------------------------------------- */

void
fsim_plot_group_free(FsimPlotGroup *group)
{
    if (group == NULL)
        return;
    g_ptr_array_unref(group->runs);
    g_free(group);
}

void
fsim_plot_file_free(FsimPlotFile *file)
{
    if (file == NULL)
        return;
    g_free(file->kind);
    g_free(file->image);
    g_free(file->data);
    g_free(file->title);
    g_free(file);
}

GPtrArray *
fsim_plot_group_runs(GPtrArray *runs)
{
    GPtrArray *groups = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_plot_group_free);
    g_autoptr(GHashTable) index = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    for (guint i = 0; i < runs->len; i++) {
        FsimStoredRun *run = runs->pdata[i];
        /* Lengths first, so that no trace or device name can collide with another pair. */
        g_autofree char *printable =
            g_strdup_printf("%" G_GSIZE_FORMAT ":%s|%u|%" G_GSIZE_FORMAT ":%s|%" G_GUINT64_FORMAT,
                            strlen(run->trace), run->trace, run->trace_device, strlen(run->device),
                            run->device, run->capacity_bytes);
        gpointer found;
        FsimPlotGroup *group;

        if (g_hash_table_lookup_extended(index, printable, NULL, &found)) {
            group = groups->pdata[GPOINTER_TO_UINT(found)];
        } else {
            group = g_new0(FsimPlotGroup, 1);
            group->number = groups->len + 1;
            group->trace = run->trace;
            group->trace_format = run->trace_format;
            group->trace_device = run->trace_device;
            group->device = run->device;
            group->capacity_bytes = run->capacity_bytes;
            group->runs = g_ptr_array_new();
            g_hash_table_insert(index, g_steal_pointer(&printable), GUINT_TO_POINTER(groups->len));
            g_ptr_array_add(groups, group);
        }
        g_ptr_array_add(group->runs, run);
    }
    return groups;
}

GPtrArray *
fsim_plot_select_runs(FsimStore *store, GArray *ids, GError **error)
{
    g_autoptr(GPtrArray) runs = NULL;
    g_autoptr(GPtrArray) selected = NULL;

    runs = fsim_store_runs(store, ids != NULL ? (const int64_t *)(void *)ids->data : NULL,
                           ids != NULL ? ids->len : 0, error);
    if (runs == NULL)
        return NULL;
    selected = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_stored_run_free);
    for (guint i = 0; i < runs->len; i++) {
        FsimStoredRun *run = runs->pdata[i];

        if (fsim_stored_run_has_data(run)) {
            g_ptr_array_add(selected, g_ptr_array_steal_index(runs, i));
            i--;
            continue;
        }
        if (ids != NULL) {
            g_set_error(error, FSIM_STORE_ERROR, FSIM_STORE_ERROR_INCOMPLETE,
                        "%s: run %" G_GINT64_FORMAT " has no data: its status is '%s' (%s)",
                        fsim_store_path(store), run->id, fsim_store_status_name(run->status),
                        run->status == FSIM_STORE_RUNNING
                            ? "still being written, or its process was killed"
                            : (run->message != NULL ? run->message : "it failed"));
            return NULL;
        }
    }
    if (selected->len == 0) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_RUNS,
                    "%s: no complete run to plot (%u runs, none complete); write some with "
                    "'fragsim replay TRACE --db %s'",
                    fsim_store_path(store), runs->len, fsim_store_path(store));
        return NULL;
    }
    return g_steal_pointer(&selected);
}

/* ---- units --------------------------------------------------------------------------------- */

typedef struct {
    gboolean use_time; /* else event index */
    double divisor;    /* ns per unit */
    const char *label;
    double start, end; /* in axis units */
} XAxis;

typedef struct {
    double divisor;
    const char *name;
} MemUnit;

static MemUnit
mem_unit_for(uint64_t max_bytes)
{
    if (max_bytes >= FSIM_GiB)
        return (MemUnit){(double)FSIM_GiB, "GiB"};
    if (max_bytes >= FSIM_MiB)
        return (MemUnit){(double)FSIM_MiB, "MiB"};
    return (MemUnit){(double)FSIM_KiB, "KiB"};
}

static double
x_of(const XAxis *axis, FsimTime time, int64_t event_index)
{
    if (axis->use_time)
        return (double)time / axis->divisor;
    return (double)(event_index < 0 ? 0 : event_index);
}

static void
num(GString *out, double value)
{
    char buffer[G_ASCII_DTOSTR_BUF_SIZE];

    g_string_append(out, g_ascii_formatd(buffer, sizeof(buffer), "%.7g", value));
}

/* A string for a data file: double-quoted, with gnuplot's backslash escapes. */
static void
quoted(GString *out, const char *text)
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

/* The colour of each run of @group: its policy's, or a spare one when the policy is unknown or
 * appears twice. */
static GArray *
group_colours(const FsimPlotGroup *group)
{
    GArray *colours = g_array_new(FALSE, FALSE, sizeof(const char *));
    guint spare = 0;

    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        const char *colour = NULL;

        for (gsize c = 0; c < G_N_ELEMENTS(policy_colours); c++)
            if (strcmp(run->policy, policy_colours[c].policy) == 0)
                colour = policy_colours[c].colour;
        for (guint j = 0; colour != NULL && j < colours->len; j++)
            if (g_array_index(colours, const char *, j) == colour)
                colour = NULL;
        if (colour == NULL)
            colour = spare_colours[spare++ % G_N_ELEMENTS(spare_colours)];
        g_array_append_val(colours, colour);
    }
    return colours;
}

#define RUN_COLOUR(g, r) g_array_index((g)->colours, const char *, (r))

static guint32
colour_value(const char *colour)
{
    return (guint32)g_ascii_strtoull(colour + 1, NULL, 16);
}

/* The legend label of @run: its label (policy and config), and its id when that repeats in the
 * group. */
static char *
run_label(const FsimPlotGroup *group, const FsimStoredRun *run)
{
    guint same = 0;

    for (guint i = 0; i < group->runs->len; i++)
        same += strcmp(((const FsimStoredRun *)group->runs->pdata[i])->label, run->label) == 0;
    if (same > 1)
        return g_strdup_printf("%s #%" G_GINT64_FORMAT, run->label, run->id);
    return g_strdup(run->label);
}

/* ---- the plotter --------------------------------------------------------------------------- */

typedef struct {
    FsimStore *store;
    const char *out_dir;
    char *gnuplot;
    char *templates;
    FsimPlotFormat format;
    GString *script; /* plots.sh */
    GHashTable *copied;
    GPtrArray *files;
} Plotter;

static gboolean
write_file(const Plotter *p, const char *name, const GString *contents, GError **error)
{
    g_autofree char *path = g_build_filename(p->out_dir, name, NULL);
    g_autoptr(GError) local_error = NULL;

    if (!g_file_set_contents(path, contents->str, (gssize)contents->len, &local_error)) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO, "%s", local_error->message);
        return FALSE;
    }
    return TRUE;
}

/* Copy plots/<kind>.gp next to the images (once). */
static gboolean
copy_template(Plotter *p, const char *kind, GError **error)
{
    g_autofree char *name = g_strconcat(kind, ".gp", NULL);
    g_autofree char *from = g_build_filename(p->templates, name, NULL);
    g_autofree char *to = g_build_filename(p->out_dir, name, NULL);
    g_autofree char *contents = NULL;
    g_autoptr(GError) local_error = NULL;
    gsize length;

    if (g_hash_table_contains(p->copied, kind))
        return TRUE;
    if (!g_file_get_contents(from, &contents, &length, &local_error) ||
        !g_file_set_contents(to, contents, (gssize)length, &local_error)) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO, "%s", local_error->message);
        return FALSE;
    }
    g_hash_table_add(p->copied, g_strdup(kind));
    return TRUE;
}

/* The last lines of gnuplot's stderr, for the error message. */
static char *
tail_lines(const char *text, guint n)
{
    g_auto(GStrv) lines = g_strsplit(text != NULL ? text : "", "\n", -1);
    g_autoptr(GPtrArray) kept = g_ptr_array_new();
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = g_strv_length(lines); i > 0 && kept->len < n; i--)
        if (*g_strstrip(lines[i - 1]) != '\0')
            g_ptr_array_add(kept, lines[i - 1]);
    for (guint i = kept->len; i > 0; i--)
        g_string_append_printf(out, "%s%s", (const char *)kept->pdata[i - 1], i > 1 ? "\n" : "");
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/*
 * Run `gnuplot -c KIND.gp DATA IMAGE FORMAT ARGS...` in the output directory and record the
 * command in plots.sh and the image in the result.
 */
static gboolean
run_gnuplot(Plotter *p, const char *kind, const char *data, const char *image, const char *title,
            guint group, int64_t run, const char *const *args, GError **error)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GString) command = g_string_new(NULL);
    g_autofree char *template = g_strconcat(kind, ".gp", NULL);
    g_autofree char *image_path = g_build_filename(p->out_dir, image, NULL);
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autoptr(GError) local_error = NULL;
    int status = 0;
    FsimPlotFile *file;

    if (!copy_template(p, kind, error))
        return FALSE;
    g_ptr_array_add(argv, g_strdup(p->gnuplot));
    g_ptr_array_add(argv, g_strdup("-c"));
    g_ptr_array_add(argv, g_strdup(template));
    g_ptr_array_add(argv, g_strdup(data));
    g_ptr_array_add(argv, g_strdup(image));
    g_ptr_array_add(argv, g_strdup(fsim_plot_format_name(p->format)));
    for (gsize i = 0; args[i] != NULL; i++)
        g_ptr_array_add(argv, g_strdup(args[i]));
    for (guint i = 0; i < argv->len; i++) {
        g_autofree char *q = fsim_format_shell_word(i == 0 ? "gnuplot" : argv->pdata[i]);

        g_string_append_printf(command, "%s%s", i > 0 ? " " : "", q);
    }
    g_ptr_array_add(argv, NULL);
    g_string_append_printf(p->script, "%s\n", command->str);
    (void)g_unlink(image_path);
    if (!g_spawn_sync(p->out_dir, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                      &err, &status, &local_error) ||
        !g_spawn_check_wait_status(status, &local_error) ||
        !g_file_test(image_path, G_FILE_TEST_IS_REGULAR)) {
        g_autofree char *tail = tail_lines(err, 6);

        (void)g_unlink(image_path);
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_FAILED,
                    "gnuplot failed drawing %s/%s (%s)%s%s\nto retry: cd %s && %s", p->out_dir,
                    image, local_error != NULL ? local_error->message : "no image written",
                    *tail != '\0' ? ":\n" : "", tail, p->out_dir, command->str);
        return FALSE;
    }
    if (err != NULL && *err != '\0')
        g_debug("gnuplot %s: %s", kind, err);
    file = g_new0(FsimPlotFile, 1);
    file->kind = g_strdup(kind);
    file->image = g_strdup(image);
    file->data = g_strdup(data);
    file->title = g_strdup(title);
    file->group = group;
    file->run = run;
    g_ptr_array_add(p->files, file);
    return TRUE;
}

/* ---- per group ----------------------------------------------------------------------------- */

typedef struct {
    const FsimPlotGroup *group;
    const char *suffix; /* "" or "-N" */
    GPtrArray *samples; /* GArray of FsimStoredSample per run */
    GPtrArray *ooms;    /* GArray of FsimOomRecord per run */
    GArray *colours;    /* const char * per run */
    XAxis x;
    MemUnit unit;
    char *trace_name;  /* basename, escaped */
    char *device_name; /* escaped */
} GroupData;

static void
group_data_clear(GroupData *g)
{
    g_clear_pointer(&g->samples, g_ptr_array_unref);
    g_clear_pointer(&g->ooms, g_ptr_array_unref);
    g_clear_pointer(&g->colours, g_array_unref);
    g_clear_pointer(&g->trace_name, g_free);
    g_clear_pointer(&g->device_name, g_free);
}

static gboolean
group_data_load(Plotter *p, const FsimPlotGroup *group, GroupData *g, GError **error)
{
    FsimTime last_time = 0;
    uint64_t last_index = 0, peak = 0;
    g_autofree char *base = g_path_get_basename(group->trace);
    g_autofree char *capacity = fsim_format_size(group->capacity_bytes);
    g_autofree char *device = g_strdup_printf("%s (%s)", group->device, capacity);

    g->group = group;
    g->samples = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    g->ooms = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    g->colours = group_colours(group);
    g->trace_name = fsim_plot_escape(base);
    g->device_name = fsim_plot_escape(device);
    for (guint i = 0; i < group->runs->len; i++) {
        const FsimStoredRun *run = group->runs->pdata[i];
        GArray *samples = fsim_store_samples(p->store, run->id, error);
        GArray *ooms;

        if (samples == NULL)
            return FALSE;
        g_ptr_array_add(g->samples, samples);
        ooms = fsim_store_ooms(p->store, run->id, error);
        if (ooms == NULL)
            return FALSE;
        g_ptr_array_add(g->ooms, ooms);
        for (guint s = 0; s < samples->len; s++) {
            const FsimStoredSample *sample = &g_array_index(samples, FsimStoredSample, s);

            last_time = MAX(last_time, sample->time_last);
            last_index = MAX(last_index, sample->event_index_last);
            peak = MAX(peak, sample->reserved_max);
        }
    }
    g->x.use_time = last_time > 0;
    if (!g->x.use_time) {
        g->x.divisor = 1;
        g->x.label = "event index";
        g->x.end = (double)last_index;
    } else {
        if (last_time >= 1000000000) {
            g->x.divisor = 1e9;
            g->x.label = "time (s)";
        } else if (last_time >= 1000000) {
            g->x.divisor = 1e6;
            g->x.label = "time (ms)";
        } else {
            g->x.divisor = 1e3;
            g->x.label = "time (µs)";
        }
        g->x.end = (double)last_time / g->x.divisor;
    }
    g->x.start = 0;
    g->unit = mem_unit_for(peak);
    return TRUE;
}

static char *
group_file(const GroupData *g, const char *stem, const char *ext)
{
    return g_strdup_printf("%s%s.%s", stem, g->suffix, ext);
}

static char *
image_name(const Plotter *p, const GroupData *g, const char *stem)
{
    return group_file(g, stem, fsim_plot_format_name(p->format));
}

static char *
colour_list(const GroupData *g)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; i < g->colours->len; i++)
        g_string_append_printf(out, "%s%s", i ? " " : "", RUN_COLOUR(g, i));
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* samples.dat: one block per run, used by the timeline and the fragmentation plots. */
static gboolean
write_samples(const Plotter *p, const GroupData *g, const char *name, GError **error)
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
        GArray *samples = g->samples->pdata[r];
        g_autofree char *label = run_label(g->group, run);

        if (r > 0)
            g_string_append(out, "\n\n");
        g_string_append_printf(out,
                               "# run %" G_GINT64_FORMAT "\nx reserved allocated requested "
                               "overhead frag ",
                               run->id);
        quoted(out, label);
        g_string_append_c(out, '\n');
        for (guint s = 0; s < samples->len; s++) {
            const FsimStoredSample *x = &g_array_index(samples, FsimStoredSample, s);
            double frag =
                x->reserved > 0
                    ? 100.0 * (1.0 - (double)MIN(x->allocated, x->reserved) / (double)x->reserved)
                    : 0.0;

            num(out, x_of(&g->x, x->time_last, (int64_t)x->event_index_last));
            g_string_append_c(out, ' ');
            num(out, (double)x->reserved_max / g->unit.divisor);
            g_string_append_c(out, ' ');
            num(out, (double)x->allocated_max / g->unit.divisor);
            g_string_append_c(out, ' ');
            num(out, (double)x->requested_max / g->unit.divisor);
            g_string_append_c(out, ' ');
            num(out, (double)(x->reserved > x->requested ? x->reserved - x->requested : 0) /
                         g->unit.divisor);
            g_string_append_c(out, ' ');
            num(out, frag);
            g_string_append_c(out, '\n');
        }
        if (samples->len == 0)
            g_string_append(out, "0 0 0 0 0 0\n");
    }
    return write_file(p, name, out, error);
}

/* ooms.dat: x, reserved at the OOM, the run's colour; "" when there is none. */
static gboolean
write_ooms(const Plotter *p, const GroupData *g, const char *name, guint *count, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);

    *count = 0;
    g_string_append_printf(out,
                           "# fragsim plot data: simulated OOMs.\n# x (%s), reserved (%s) "
                           "when the allocation failed, colour of the run\n",
                           g->x.label, g->unit.name);
    for (guint r = 0; r < g->group->runs->len; r++) {
        GArray *ooms = g->ooms->pdata[r];

        for (guint i = 0; i < ooms->len; i++) {
            const FsimOomRecord *o = &g_array_index(ooms, FsimOomRecord, i);

            num(out, x_of(&g->x, o->time, (int64_t)o->event_index));
            g_string_append_c(out, ' ');
            num(out, (double)o->reserved_bytes / g->unit.divisor);
            g_string_append_printf(out, " %u\n", colour_value(RUN_COLOUR(g, r)));
            (*count)++;
        }
    }
    return write_file(p, name, out, error);
}

static gboolean
plot_timelines(Plotter *p, const GroupData *g, GError **error)
{
    g_autofree char *data = group_file(g, "samples", "dat");
    g_autofree char *ooms = group_file(g, "ooms", "dat");
    g_autofree char *timeline = image_name(p, g, "timeline");
    g_autofree char *fragmentation = image_name(p, g, "fragmentation");
    g_autofree char *colours = colour_list(g);
    g_autofree char *n = g_strdup_printf("%u", g->group->runs->len);
    g_autofree char *title1 =
        g_strdup_printf("Memory over time: %s on %s", g->trace_name, g->device_name);
    g_autofree char *title2 =
        g_strdup_printf("Fragmentation over time: %s on %s", g->trace_name, g->device_name);
    guint n_ooms;

    if (!write_samples(p, g, data, error) || !write_ooms(p, g, ooms, &n_ooms, error))
        return FALSE;
    {
        const char *args[] = {title1, g->x.label, g->unit.name, n, colours, n_ooms > 0 ? ooms : "-",
                              NULL};

        if (!run_gnuplot(p, "timeline", data, timeline, "Allocated and reserved memory over time",
                         g->group->number, -1, args, error))
            return FALSE;
    }
    {
        const char *args[] = {title2, g->x.label, g->unit.name, n, colours, NULL};

        return run_gnuplot(p, "fragmentation", data, fragmentation, "Fragmentation over time",
                           g->group->number, -1, args, error);
    }
}

static gboolean
plot_compare(Plotter *p, const GroupData *g, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *data = group_file(g, "compare", "dat");
    g_autofree char *image = image_name(p, g, "compare");
    g_autofree char *title =
        g_strdup_printf("Peak reserved memory per policy: %s on %s", g->trace_name, g->device_name);
    guint n = g->group->runs->len;
    uint64_t lower = 0, peak = 0;
    char lower_text[G_ASCII_DTOSTR_BUF_SIZE];
    char capacity_text[G_ASCII_DTOSTR_BUF_SIZE];
    MemUnit unit;
    gboolean any_oom = FALSE;

    for (guint r = 0; r < n; r++) {
        const FsimStoredRun *run = g->group->runs->pdata[r];

        lower = MAX(lower, run->metrics.lower_bound_bytes);
        peak = MAX(peak, run->metrics.peak_reserved_bytes);
        any_oom |= run->metrics.ooms > 0;
    }
    unit = mem_unit_for(MAX(peak, lower));
    g_string_append_printf(out,
                           "# fragsim plot data: peak reserved memory per run (%s), as the lower "
                           "bound (the part no\n# allocator can avoid) plus the excess over it.\n"
                           "# y label up_to_lower_bound peak_reserved ooms colour value_label "
                           "oom_label\n",
                           unit.name);
    for (guint r = 0; r < n; r++) {
        const FsimStoredRun *run = g->group->runs->pdata[r];
        const FsimMetrics *m = &run->metrics;
        g_autofree char *label = run_label(g->group, run);
        g_autofree char *size = fsim_format_size(m->peak_reserved_bytes);
        g_autofree char *value = NULL;
        g_autofree char *oom = NULL;

        if (lower > 0)
            value = g_strdup_printf("%s (%+.1f%% over the trace's lower bound)", size,
                                    100.0 * ((double)m->peak_reserved_bytes - (double)lower) /
                                        (double)lower);
        else
            value = g_strdup(size);
        if (run->status == FSIM_STORE_OOM)
            oom = g_strdup("stopped at its first OOM");
        else if (m->ooms > 0)
            oom = g_strdup_printf("%" G_GUINT64_FORMAT " simulated OOM%s", m->ooms,
                                  m->ooms > 1 ? "s" : "");
        else
            oom = g_strdup("");
        /* The first run at the top. */
        g_string_append_printf(out, "%u ", n - 1 - r);
        quoted(out, label);
        g_string_append_c(out, ' ');
        num(out, (double)MIN(m->peak_reserved_bytes, lower) / unit.divisor);
        g_string_append_c(out, ' ');
        num(out, (double)m->peak_reserved_bytes / unit.divisor);
        g_string_append_printf(out, " %" G_GUINT64_FORMAT " %u ", m->ooms,
                               colour_value(RUN_COLOUR(g, r)));
        quoted(out, value);
        g_string_append_c(out, ' ');
        quoted(out, oom);
        g_string_append_c(out, '\n');
    }
    if (!write_file(p, data, out, error))
        return FALSE;
    g_ascii_formatd(lower_text, sizeof(lower_text), "%.7g", (double)lower / unit.divisor);
    /* The capacity line only when it matters: runs near it, or OOMs. */
    if (any_oom || (double)peak >= 0.5 * (double)g->group->capacity_bytes)
        g_ascii_formatd(capacity_text, sizeof(capacity_text), "%.7g",
                        (double)g->group->capacity_bytes / unit.divisor);
    else
        strcpy(capacity_text, "-");
    {
        const char *args[] = {title, unit.name, lower_text, capacity_text, NULL};

        return run_gnuplot(p, "compare", data, image,
                           "Peak reserved memory against the lower bound", g->group->number, -1,
                           args, error);
    }
}

static char *
size_label(guint log2)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

    return g_strdup_printf("%" G_GUINT64_FORMAT " %s", (uint64_t)1 << (log2 % 10),
                           units[MIN(log2 / 10, G_N_ELEMENTS(units) - 1)]);
}

static gboolean
plot_sizes(Plotter *p, const GroupData *g, GError **error)
{
    const FsimStoredRun *run = g->group->runs->pdata[0];
    g_autoptr(GArray) sizes = fsim_store_sizes(p->store, run->id, error);
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *data = group_file(g, "sizes", "dat");
    g_autofree char *image = image_name(p, g, "sizes");
    g_autofree char *title = g_strdup_printf("Request sizes: %s", g->trace_name);
    uint64_t total_bytes = 0;
    guint lo, hi;

    if (sizes == NULL)
        return FALSE;
    for (guint i = 0; i < sizes->len; i++)
        total_bytes += g_array_index(sizes, FsimStoredSizeBucket, i).bytes;
    g_string_append(out, "# fragsim plot data: requests per size class [2^k, 2^(k+1)) bytes.\n"
                         "# k label requests percent_of_bytes\n");
    /* Every class between the smallest and the largest, empty ones too: an honest x axis. */
    lo = sizes->len > 0 ? g_array_index(sizes, FsimStoredSizeBucket, 0).log2 : 0;
    hi = sizes->len > 0 ? g_array_index(sizes, FsimStoredSizeBucket, sizes->len - 1).log2 : 0;
    for (guint k = lo, i = 0; k <= hi; k++) {
        uint64_t count = 0, bytes = 0;
        g_autofree char *label = size_label(k);

        if (i < sizes->len && g_array_index(sizes, FsimStoredSizeBucket, i).log2 == k) {
            count = g_array_index(sizes, FsimStoredSizeBucket, i).count;
            bytes = g_array_index(sizes, FsimStoredSizeBucket, i).bytes;
            i++;
        }
        g_string_append_printf(out, "%u ", k);
        quoted(out, label);
        g_string_append_printf(out, " %" G_GUINT64_FORMAT " ", count);
        num(out, total_bytes > 0 ? 100.0 * (double)bytes / (double)total_bytes : 0.0);
        g_string_append_c(out, '\n');
    }
    {
        const char *args[] = {title, NULL};

        return write_file(p, data, out, error) &&
               run_gnuplot(p, "sizes", data, image, "Request size histogram", g->group->number, -1,
                           args, error);
    }
}

/* ---- address maps -------------------------------------------------------------------------- */

typedef struct {
    double x0, x1;
    FsimAddr a0, a1;
    guint32 colour;
} Rect;

typedef struct {
    FsimAddr start, end;
    double x0;
    guint32 mapped; /* a range mapped into a reservation, not a cudaMalloc segment */
} Piece;

static gint
addr_compare(gconstpointer a, gconstpointer b, gpointer unused)
{
    const FsimAddr *x = a;
    const FsimAddr *y = b;

    (void)unused;
    return *x < *y ? -1 : *x > *y ? 1 : 0;
}

static void
piece_open(GTree *pieces, FsimAddr start, FsimAddr end, double x0, guint32 mapped)
{
    Piece *piece = g_new(Piece, 1);

    piece->start = start;
    piece->end = end;
    piece->x0 = x0;
    piece->mapped = mapped;
    g_tree_replace(pieces, &piece->start, piece);
}

/* Close the parts of open pieces inside [start, end) at @x, as rectangles; remainders stay open
 * with their original start. */
static void
pieces_close(GTree *pieces, GArray *rects, FsimAddr start, FsimAddr end, double x)
{
    g_autoptr(GPtrArray) hit = g_ptr_array_new();
    GTreeNode *node = g_tree_lower_bound(pieces, &start);
    GTreeNode *prev = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(pieces);

    if (prev != NULL && ((Piece *)g_tree_node_value(prev))->end > start)
        g_ptr_array_add(hit, g_tree_node_value(prev));
    for (; node != NULL && ((Piece *)g_tree_node_value(node))->start < end;
         node = g_tree_node_next(node))
        g_ptr_array_add(hit, g_tree_node_value(node));
    for (guint i = 0; i < hit->len; i++) {
        Piece piece = *(Piece *)hit->pdata[i];
        Rect rect = {piece.x0, x, MAX(piece.start, start), MIN(piece.end, end), piece.mapped};

        g_array_append_val(rects, rect);
        g_tree_remove(pieces, &piece.start);
        if (piece.start < start)
            piece_open(pieces, piece.start, start, piece.x0, piece.mapped);
        if (piece.end > end)
            piece_open(pieces, end, piece.end, piece.x0, piece.mapped);
    }
}

static gboolean
collect_open_piece(gpointer key, gpointer value, gpointer data)
{
    const Piece *piece = value;
    GArray *rects = ((gpointer *)data)[0];
    const double *x_end = ((gpointer *)data)[1];
    Rect rect = {piece->x0, *x_end, piece->start, piece->end, piece->mapped};

    (void)key;
    g_array_append_val(rects, rect);
    return FALSE;
}

/* Segment lifetimes as rectangles, from the segment-level device actions; their colour field
 * says 1 for mapped ranges, 0 for cudaMalloc (and seeded) segments. */
static GArray *
segment_rects(GArray *actions, const XAxis *axis)
{
    GArray *rects = g_array_new(FALSE, FALSE, sizeof(Rect));
    g_autoptr(GTree) pieces = g_tree_new_full(addr_compare, NULL, NULL, g_free);
    double x_end = axis->end;
    gpointer data[2] = {rects, &x_end};

    for (guint i = 0; i < actions->len; i++) {
        const FsimStoredSegment *s = &g_array_index(actions, FsimStoredSegment, i);
        double x =
            s->action == FSIM_STORE_ACTION_SEED ? axis->start : x_of(axis, s->time, s->event_index);

        switch (s->action) {
        case FSIM_STORE_ACTION_SEED:
        case FSIM_CALL_MEM_ALLOC:
        case FSIM_CALL_MAP:
            pieces_close(pieces, rects, s->addr, s->addr + s->size, x);
            piece_open(pieces, s->addr, s->addr + s->size, x, s->action == FSIM_CALL_MAP);
            break;
        case FSIM_CALL_MEM_FREE:
        case FSIM_CALL_UNMAP:
            pieces_close(pieces, rects, s->addr, s->addr + s->size, x);
            break;
        default:
            /* Address reservations hold no memory. */
            break;
        }
    }
    g_tree_foreach(pieces, collect_open_piece, data);
    return rects;
}

typedef struct {
    FsimAddr start, end;
    uint64_t offset; /* of start in the compacted axis */
} Span;

static gint
rect_by_start(gconstpointer a, gconstpointer b)
{
    const Rect *x = a;
    const Rect *y = b;

    return x->a0 < y->a0 ? -1 : x->a0 > y->a0 ? 1 : 0;
}

/* The union of every range drawn, in address order, each placed right after the previous: the
 * y axis of an address map with the gaps between segments removed. */
static GArray *
compact_axis(GArray *segs, GArray *blocks, uint64_t *total)
{
    g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(Rect));
    GArray *spans = g_array_new(FALSE, FALSE, sizeof(Span));

    g_array_append_vals(all, segs->data, segs->len);
    g_array_append_vals(all, blocks->data, blocks->len);
    g_array_sort(all, rect_by_start);
    *total = 0;
    for (guint i = 0; i < all->len; i++) {
        const Rect *r = &g_array_index(all, Rect, i);
        Span *last = spans->len > 0 ? &g_array_index(spans, Span, spans->len - 1) : NULL;

        if (r->a1 <= r->a0)
            continue;
        if (last != NULL && r->a0 <= last->end) {
            if (r->a1 > last->end) {
                *total += r->a1 - last->end;
                last->end = r->a1;
            }
            continue;
        }
        {
            Span span = {r->a0, r->a1, *total};

            *total += r->a1 - r->a0;
            g_array_append_val(spans, span);
        }
    }
    return spans;
}

static uint64_t
compact(const GArray *spans, FsimAddr addr)
{
    guint lo = 0, hi = spans->len;

    /* The last span starting at or before addr. */
    while (lo + 1 < hi) {
        guint mid = (lo + hi) / 2;

        if (g_array_index(spans, Span, mid).start <= addr)
            lo = mid;
        else
            hi = mid;
    }
    if (spans->len == 0)
        return 0;
    {
        const Span *s = &g_array_index(spans, Span, lo);

        return s->offset + (addr > s->start ? MIN(addr, s->end) - s->start : 0);
    }
}

static const guint32 block_colours[] = {
    0x4e79a7, 0xf28e2b, 0x59a14f, 0xb07aa1, 0x76b7b2, 0xedc948,
    0xff9da7, 0x9c755f, 0xe15759, 0x86bcb6, 0x8cd17d, 0xbab0ac,
};

/* Write the rectangles (only those whose colour is @only, unless it is -1); returns how many. */
static guint
write_rects(GString *out, const GArray *rects, const GArray *spans, double unit, gint64 only)
{
    guint written = 0;

    for (guint i = 0; i < rects->len; i++) {
        const Rect *r = &g_array_index(rects, Rect, i);

        if (only >= 0 && r->colour != (guint32)only)
            continue;
        written++;
        num(out, r->x0);
        g_string_append_c(out, ' ');
        num(out, MAX(r->x1, r->x0));
        g_string_append_c(out, ' ');
        num(out, (double)compact(spans, r->a0) / unit);
        g_string_append_c(out, ' ');
        num(out, (double)(compact(spans, r->a0) + (r->a1 - r->a0)) / unit);
        g_string_append_printf(out, " %u\n", r->colour);
    }
    if (written == 0)
        g_string_append(out, "0 0 0 0 0\n");
    return written;
}

static gboolean
plot_address_map(Plotter *p, const GroupData *g, guint index, GError **error)
{
    const FsimStoredRun *run = g->group->runs->pdata[index];
    g_autoptr(GArray) actions = fsim_store_segments(p->store, run->id, error);
    g_autoptr(GArray) blocks = NULL;
    g_autoptr(GArray) segs = NULL;
    g_autoptr(GArray) block_rects = NULL;
    g_autoptr(GArray) spans = NULL;
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *stem = g_strdup_printf("address-map-run%" G_GINT64_FORMAT, run->id);
    g_autofree char *data = g_strconcat(stem, ".dat", NULL);
    g_autofree char *image = g_strdup_printf("%s.%s", stem, fsim_plot_format_name(p->format));
    g_autofree char *policy = fsim_plot_escape(run->policy);
    g_autofree char *title = NULL;
    g_autofree char *counts = NULL;
    g_autofree char *caption = NULL;
    char top[G_ASCII_DTOSTR_BUF_SIZE];
    GArray *ooms = g->ooms->pdata[index];
    uint64_t total;
    guint n_malloc, n_mapped;
    MemUnit unit;

    if (actions == NULL)
        return FALSE;
    blocks = fsim_store_blocks(p->store, run->id, error);
    if (blocks == NULL)
        return FALSE;
    segs = segment_rects(actions, &g->x);
    block_rects = g_array_new(FALSE, FALSE, sizeof(Rect));
    for (guint i = 0; i < blocks->len; i++) {
        const FsimStoredBlock *b = &g_array_index(blocks, FsimStoredBlock, i);
        Rect rect = {
            b->alloc_event < 0 ? g->x.start : x_of(&g->x, b->alloc_time, b->alloc_event),
            b->free_event < 0 ? g->x.end : x_of(&g->x, b->free_time, b->free_event),
            b->addr,
            b->addr + b->size,
            block_colours[b->id % G_N_ELEMENTS(block_colours)],
        };

        g_array_append_val(block_rects, rect);
    }
    spans = compact_axis(segs, block_rects, &total);
    unit = mem_unit_for(total);
    g_string_append_printf(
        out,
        "# fragsim plot data: address map of run %" G_GINT64_FORMAT " (%s).\n# x: %s; y: device "
        "address in %s, with the gaps between segments removed.\n# block 0: cudaMalloc "
        "segments (x0 x1 y0 y1 0); block 1: mapped ranges (x0 x1 y0 y1 1);\n# block 2: the "
        "%" G_GUINT64_FORMAT " largest of %" G_GUINT64_FORMAT " allocations (x0 x1 y0 y1 colour); "
        "block 3: OOMs (x).\n",
        run->id, run->policy, g->x.label, unit.name, run->blocks_stored, run->blocks);
    n_malloc = write_rects(out, segs, spans, unit.divisor, 0);
    g_string_append(out, "\n\n");
    n_mapped = write_rects(out, segs, spans, unit.divisor, 1);
    g_string_append(out, "\n\n");
    write_rects(out, block_rects, spans, unit.divisor, -1);
    g_string_append(out, "\n\n");
    for (guint i = 0; i < ooms->len; i++) {
        const FsimOomRecord *o = &g_array_index(ooms, FsimOomRecord, i);

        num(out, x_of(&g->x, o->time, (int64_t)o->event_index));
        g_string_append_c(out, '\n');
    }
    if (ooms->len == 0)
        g_string_append(out, "0\n");
    if (!write_file(p, data, out, error))
        return FALSE;
    if (run->blocks_stored < run->blocks)
        caption = g_strdup_printf("the %" G_GUINT64_FORMAT " largest of %" G_GUINT64_FORMAT
                                  " allocations; gaps between segments removed",
                                  run->blocks_stored, run->blocks);
    else
        caption = g_strdup_printf("%" G_GUINT64_FORMAT " allocations; gaps between segments "
                                  "removed",
                                  run->blocks);
    title = g_strdup_printf("Address map: run %" G_GINT64_FORMAT " (%s), %s on %s\n%s", run->id,
                            policy, g->trace_name, g->device_name, caption);
    counts = g_strdup_printf("%u %u %u %u", n_malloc, n_mapped, block_rects->len, ooms->len);
    g_ascii_formatd(top, sizeof(top), "%.7g", (double)total / unit.divisor);
    {
        const char *args[] = {title, g->x.label, unit.name, counts, top, NULL};
        g_autofree char *human =
            g_strdup_printf("Address map of run %" G_GINT64_FORMAT " (%s)", run->id, run->policy);

        return run_gnuplot(p, "address-map", data, image, human, g->group->number, run->id, args,
                           error);
    }
}

/* ---- entry point --------------------------------------------------------------------------- */

static void
plotter_clear(Plotter *p)
{
    g_clear_pointer(&p->gnuplot, g_free);
    g_clear_pointer(&p->templates, g_free);
    if (p->script != NULL)
        g_string_free(g_steal_pointer(&p->script), TRUE);
    g_clear_pointer(&p->copied, g_hash_table_unref);
    g_clear_pointer(&p->files, g_ptr_array_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Plotter, plotter_clear)

static gboolean
write_script(const Plotter *p, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *path = g_build_filename(p->out_dir, "plots.sh", NULL);

    g_string_append(out, "#!/bin/sh\n"
                         "# Draws the plots of this directory again from their data files "
                         "(*.dat) and templates (*.gp),\n"
                         "# written by 'fragsim plot'.  Edit either, then run this script.\n"
                         "cd \"$(dirname \"$0\")\" || exit 1\nset -e\n");
    g_string_append(out, p->script->str);
    if (!write_file(p, "plots.sh", out, error))
        return FALSE;
    if (g_chmod(path, 0755) != 0) {
        int saved = errno;

        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO, "%s: %s", path, g_strerror(saved));
        return FALSE;
    }
    return TRUE;
}

GPtrArray *
fsim_plot_render(FsimStore *store, GPtrArray *runs, const char *out_dir,
                 const FsimPlotOptions *options, GError **error)
{
    g_auto(Plotter) p = {0};
    g_autoptr(GPtrArray) groups = NULL;

    g_return_val_if_fail(store != NULL && runs != NULL && out_dir != NULL, NULL);
    if (runs->len == 0) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_RUNS, "no run to plot");
        return NULL;
    }
    p.store = store;
    p.out_dir = out_dir;
    p.format = options != NULL ? options->format : FSIM_PLOT_PNG;
    p.gnuplot = fsim_plot_find_gnuplot(options != NULL ? options->gnuplot : NULL, error);
    if (p.gnuplot == NULL)
        return NULL;
    p.templates = fsim_plot_find_templates(options != NULL ? options->templates_dir : NULL, error);
    if (p.templates == NULL)
        return NULL;
    if (g_mkdir_with_parents(out_dir, 0755) != 0) {
        int saved = errno;

        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO,
                    "%s: cannot create the output directory: %s", out_dir, g_strerror(saved));
        return NULL;
    }
    p.script = g_string_new(NULL);
    p.copied = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    p.files = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_plot_file_free);
    groups = fsim_plot_group_runs(runs);
    for (guint i = 0; i < groups->len; i++) {
        const FsimPlotGroup *group = groups->pdata[i];
        g_autofree char *suffix =
            groups->len > 1 ? g_strdup_printf("-%u", group->number) : g_strdup("");
        GroupData g = {0};
        gboolean ok;

        g.suffix = suffix;
        ok = group_data_load(&p, group, &g, error) && plot_timelines(&p, &g, error) &&
             plot_compare(&p, &g, error) && plot_sizes(&p, &g, error);
        for (guint r = 0; ok && r < group->runs->len; r++)
            ok = plot_address_map(&p, &g, r, error);
        group_data_clear(&g);
        if (!ok) {
            /* Keep the commands written so far, so the failing one can be retried by hand. */
            (void)write_script(&p, NULL);
            return NULL;
        }
    }
    if (!write_script(&p, error))
        return NULL;
    return g_steal_pointer(&p.files);
}
