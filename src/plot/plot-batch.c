/* SPDX-License-Identifier: MIT */
/*
 * Plots: the queue of plots and how it is drawn.
 *
 * Starting gnuplot costs more than drawing most plots, so the queued plots are drawn by a few
 * gnuplot processes, each running a script of `call 'KIND.gp' ARGS...` lines (a batch), on as
 * many threads as the machine has processors (at most 8).  Each template begins with `reset`, so
 * a plot drawn in a batch is the plot `gnuplot -c KIND.gp ARGS...` draws alone, the command
 * plots.sh keeps for it.
 *
 * User text (titles, labels) reaches a batch only as the value of a variable set from
 * single-quoted strings, in which gnuplot expands nothing (no backslash escapes, no macros, no
 * backquotes); newlines are concatenated in as "\n".  It is never a command.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <string.h>

#include "fragsim/json-writer.h"
#include "fragsim/plot.h"

#include "plotter.h"

#define MAX_WORKERS 8
#define MAX_BATCH   12

void
fsim_plot_job_clear(gpointer data)
{
    PlotJob *job = data;

    g_clear_pointer(&job->file, fsim_plot_file_free);
    g_clear_pointer(&job->args, g_strfreev);
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

void
fsim_plot_progress(const Plotter *p, guint done, guint total)
{
    if (p->options != NULL && p->options->progress != NULL && total > 0)
        p->options->progress(p->options->progress_data, done, total);
}

gboolean
fsim_plot_run_gnuplot(Plotter *p, const char *kind, const char *data, const char *image,
                      const char *title, const GroupData *g, int64_t run, const char *const *args,
                      GError **error)
{
    PlotJob *job;
    g_autofree char *image_path = g_build_filename(p->out_dir, image, NULL);

    if (!copy_template(p, kind, error))
        return FALSE;
    (void)g_unlink(image_path);
    g_array_set_size(p->jobs, p->jobs->len + 1);
    job = &g_array_index(p->jobs, PlotJob, p->jobs->len - 1);
    job->file = g_new0(FsimPlotFile, 1);
    job->file->kind = g_strdup(kind);
    job->file->data = g_strdup(data);
    job->file->image = g_strdup(image);
    {
        g_auto(GStrv) lines = g_strsplit(title, "\n", -1);

        job->file->title = g_strjoinv(" · ", lines);
    }
    {
        GPtrArray *copy = g_ptr_array_new();

        for (gsize i = 0; args[i] != NULL; i++)
            g_ptr_array_add(copy, g_strdup(args[i]));
        g_ptr_array_add(copy, NULL);
        job->args = (char **)g_ptr_array_free(copy, FALSE);
    }
    job->file->group = g->group->number;
    job->file->run = run;
    job->file->runs = g_array_new(FALSE, FALSE, sizeof(int64_t));
    if (run >= 0) {
        g_array_append_val(job->file->runs, run);
    } else {
        for (guint i = 0; i < g->group->runs->len; i++)
            g_array_append_val(job->file->runs,
                               ((const FsimStoredRun *)g->group->runs->pdata[i])->id);
    }
    return TRUE;
}

/* The job's argument vector after `gnuplot -c KIND.gp`. */
static GPtrArray *
job_argv(const Plotter *p, const PlotJob *job)
{
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);

    g_ptr_array_add(argv, g_strdup(job->file->data));
    g_ptr_array_add(argv, g_strdup(job->file->image));
    g_ptr_array_add(argv, g_strdup(fsim_plot_format_name(p->format)));
    for (gsize i = 0; job->args[i] != NULL; i++)
        g_ptr_array_add(argv, g_strdup(job->args[i]));
    return argv;
}

/* `gnuplot -c KIND.gp ARGS...`, as a shell command. */
static char *
job_command(const Plotter *p, const PlotJob *job)
{
    g_autoptr(GPtrArray) argv = job_argv(p, job);
    GString *out = g_string_new("gnuplot -c ");

    g_string_append_printf(out, "%s.gp", job->file->kind);
    for (guint i = 0; i < argv->len; i++) {
        g_autofree char *word = fsim_format_shell_word(argv->pdata[i]);

        g_string_append_printf(out, " %s", word);
    }
    return g_string_free(out, FALSE);
}

/* @text as a gnuplot string expression that expands nothing. */
static void
append_literal(GString *out, const char *text)
{
    g_string_append_c(out, '\'');
    for (const char *c = text; *c != '\0'; c++) {
        if (*c == '\'')
            g_string_append(out, "''");
        else if (*c == '\n')
            g_string_append(out, "' . \"\\n\" . '");
        else if ((unsigned char)*c >= 0x20)
            g_string_append_c(out, *c);
    }
    g_string_append_c(out, '\'');
}

static void
append_call(GString *out, const Plotter *p, const PlotJob *job)
{
    g_autoptr(GPtrArray) argv = job_argv(p, job);

    for (guint i = 0; i < argv->len; i++) {
        g_string_append_printf(out, "FSIM_ARG%u = ", i + 1);
        append_literal(out, argv->pdata[i]);
        g_string_append_c(out, '\n');
    }
    g_string_append_printf(out, "call '%s.gp'", job->file->kind);
    for (guint i = 0; i < argv->len; i++)
        g_string_append_printf(out, " FSIM_ARG%u", i + 1);
    g_string_append_c(out, '\n');
}

typedef struct {
    char *script; /* path */
    char *name;   /* in the output directory, where gnuplot runs */
    guint plots;
    gboolean ok;
} Batch;

typedef struct {
    GAsyncQueue *done;
    char *gnuplot;
    const char *out_dir;
} Workers;

static void
batch_run(gpointer data, gpointer user_data)
{
    Batch *batch = data;
    Workers *w = user_data;
    char *argv[] = {w->gnuplot, batch->name, NULL};
    g_autofree char *err = NULL;
    int status = 0;

    batch->ok = g_spawn_sync(w->out_dir, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                             &err, &status, NULL) &&
                g_spawn_check_wait_status(status, NULL);
    if (err != NULL && *err != '\0')
        g_debug("gnuplot %s: %s", batch->script, err);
    g_async_queue_push(w->done, batch);
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

/* A plot whose image is missing: draw it alone, for gnuplot's own message. */
static void
job_failed(const Plotter *p, const PlotJob *job, GError **error)
{
    g_autoptr(GPtrArray) argv = job_argv(p, job);
    g_autofree char *command = job_command(p, job);
    g_autofree char *err = NULL;
    g_autofree char *tail = NULL;
    g_autoptr(GError) local_error = NULL;
    int status = 0;

    g_ptr_array_insert(argv, 0, g_strconcat(job->file->kind, ".gp", NULL));
    g_ptr_array_insert(argv, 0, g_strdup("-c"));
    g_ptr_array_insert(argv, 0, g_strdup(p->gnuplot));
    g_ptr_array_add(argv, NULL);
    if (g_spawn_sync(p->out_dir, (char **)argv->pdata, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL,
                     NULL, &err, &status, &local_error))
        (void)g_spawn_check_wait_status(status, &local_error);
    tail = tail_lines(err, 6);
    g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_FAILED,
                "gnuplot failed drawing %s/%s (%s)%s%s\nto retry: cd %s && %s", p->out_dir,
                job->file->image, local_error != NULL ? local_error->message : "no image written",
                *tail != '\0' ? ":\n" : "", tail, p->out_dir, command);
}

/* Write the batches' scripts: jobs dealt out in order, a few per batch. */
static GPtrArray *
write_batches(const Plotter *p, guint workers, GError **error)
{
    GPtrArray *batches = g_ptr_array_new_with_free_func(g_free);
    guint n = p->jobs->len;
    guint per = CLAMP((n + workers * 3 - 1) / (workers * 3), 1, MAX_BATCH);

    for (guint first = 0, k = 0; first < n; first += per, k++) {
        g_autoptr(GString) script = g_string_new("# fragsim: a batch of plots.sh, drawn in one "
                                                 "gnuplot process\n");
        g_autofree char *name = g_strdup_printf(".plots-batch-%u.gp", k + 1);
        Batch *batch = g_new0(Batch, 1);

        batch->plots = MIN(first + per, n) - first;
        batch->script = g_build_filename(p->out_dir, name, NULL);
        batch->name = g_strdup(name);
        g_ptr_array_add(batches, batch);
        for (guint j = first; j < MIN(first + per, n); j++)
            append_call(script, p, &g_array_index(p->jobs, PlotJob, j));
        if (!fsim_plot_write_file(p, name, script, error)) {
            g_ptr_array_unref(batches);
            return NULL;
        }
    }
    return batches;
}

static void
batch_free(gpointer data)
{
    Batch *batch = data;

    (void)g_unlink(batch->script);
    g_free(batch->script);
    g_free(batch->name);
    g_free(batch);
}

static gboolean
run_batches(const Plotter *p, GError **error)
{
    guint workers = CLAMP(g_get_num_processors(), 1, MAX_WORKERS);
    g_autoptr(GPtrArray) batches = write_batches(p, workers, error);
    g_autoptr(GAsyncQueue) done = g_async_queue_new();
    Workers w = {done, p->gnuplot, p->out_dir};
    GThreadPool *pool;
    guint drawn = 0;

    if (batches == NULL)
        return FALSE;
    g_ptr_array_set_free_func(batches, batch_free);
    pool = g_thread_pool_new(batch_run, &w, (gint)workers, FALSE, NULL);
    for (guint i = 0; i < batches->len; i++)
        g_thread_pool_push(pool, batches->pdata[i], NULL);
    for (guint i = 0; i < batches->len; i++) {
        const Batch *batch = g_async_queue_pop(done);

        drawn += batch->plots;
        /* The second half of the work: drawing (the first is preparing the data). */
        fsim_plot_progress(p, p->jobs->len + drawn, 2 * p->jobs->len);
    }
    g_thread_pool_free(pool, FALSE, TRUE);
    for (guint i = 0; i < p->jobs->len; i++) {
        const PlotJob *job = &g_array_index(p->jobs, PlotJob, i);
        g_autofree char *path = g_build_filename(p->out_dir, job->file->image, NULL);

        if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
            job_failed(p, job, error);
            return FALSE;
        }
    }
    return TRUE;
}

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
    for (guint i = 0; i < p->jobs->len; i++) {
        g_autofree char *command = job_command(p, &g_array_index(p->jobs, PlotJob, i));

        g_string_append_printf(out, "%s\n", command);
    }
    if (!fsim_plot_write_file(p, "plots.sh", out, error))
        return FALSE;
    if (g_chmod(path, 0755) != 0) {
        int saved = errno;

        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO, "%s: %s", path, g_strerror(saved));
        return FALSE;
    }
    return TRUE;
}

static gboolean
write_index(const Plotter *p, GError **error)
{
    g_autoptr(FsimJsonWriter) builder = fsim_json_writer_new(TRUE);
    g_autoptr(GString) out = g_string_new(NULL);

    fsim_json_begin_array(builder);
    for (guint i = 0; i < p->jobs->len; i++) {
        const PlotJob *job = &g_array_index(p->jobs, PlotJob, i);

        fsim_json_begin_object(builder);
        fsim_json_set_member_name(builder, "file");
        fsim_json_add_string_value(builder, job->file->image);
        fsim_json_set_member_name(builder, "kind");
        fsim_json_add_string_value(builder, job->file->kind);
        fsim_json_set_member_name(builder, "runs");
        fsim_json_begin_array(builder);
        for (guint r = 0; r < job->file->runs->len; r++)
            fsim_json_add_int_value(builder, g_array_index(job->file->runs, int64_t, r));
        fsim_json_end_array(builder);
        fsim_json_set_member_name(builder, "title");
        fsim_json_add_string_value(builder, job->file->title);
        if (job->file->moment != NULL) {
            fsim_json_set_member_name(builder, "moment");
            fsim_json_add_string_value(builder, job->file->moment);
        }
        fsim_json_end_object(builder);
    }
    fsim_json_end_array(builder);
    g_string_append_printf(out, "%s\n", fsim_json_writer_text(builder));
    return fsim_plot_write_file(p, "plots.json", out, error);
}

GPtrArray *
fsim_plot_draw(Plotter *p, GError **error)
{
    GPtrArray *files;

    /* plots.sh first: when gnuplot fails, the command to retry is there. */
    if (!write_script(p, error))
        return NULL;
    if (p->jobs->len > 0 && !run_batches(p, error))
        return NULL;
    if (!write_index(p, error))
        return NULL;
    files = g_ptr_array_new_with_free_func((GDestroyNotify)fsim_plot_file_free);
    for (guint i = 0; i < p->jobs->len; i++) {
        PlotJob *job = &g_array_index(p->jobs, PlotJob, i);

        g_ptr_array_add(files, g_steal_pointer(&job->file));
    }
    return files;
}
