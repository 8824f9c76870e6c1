/* SPDX-License-Identifier: MIT */
/*
 * `explain --plot`: the segments at one moment as horizontal bars (plots/explain.gp).
 *
 * One bar per segment, offsets in MiB from its start: live bytes, rounding, free releasable and
 * free pinned bytes in four colours, the live blocks that pin free memory outlined, and at an OOM
 * the request drawn to scale on a bar of its own at the top.  A free block of an expandable
 * segment is drawn as it is made: the partial pages at its ends pinned, its whole pages
 * releasable.  Beyond MAX_BARS segments, those with the most free memory are drawn (pinned
 * first) and the title says how many are left out.  The data file and a copy of the template are
 * written beside the image, so the picture can be redrawn by hand.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>

#include "fragsim/explain.h"
#include "fragsim/plot.h"

#define MAX_BARS 48

enum {
    COLOUR_LIVE,
    COLOUR_ROUNDING,
    COLOUR_RELEASABLE,
    COLOUR_PINNED
};

typedef struct {
    guint segment;
    uint64_t pinned;
    uint64_t free;
} Bar;

static gint
bar_compare(gconstpointer a, gconstpointer b)
{
    const Bar *x = a;
    const Bar *y = b;
    int order = fsim_compare_u64(y->pinned, x->pinned); /* the most pinned first */

    if (order == 0)
        order = fsim_compare_u64(y->free, x->free); /* then the most free */
    return order != 0 ? order : fsim_compare_u64(x->segment, y->segment);
}

static void
rect(GString *out, uint64_t x0, uint64_t x1, double y, int colour)
{
    if (x1 <= x0)
        return;
    g_string_append_printf(out, "%.6f %.6f %.3f %.3f %d\n", (double)x0 / (double)FSIM_MiB,
                           (double)x1 / (double)FSIM_MiB, y - 0.38, y + 0.38, colour);
}

/* The rectangles of one segment drawn at height @y: fills into @fills, outlines into @lines. */
static void
draw_segment(const FsimMoment *m, guint s, double y, GString *fills, GString *lines)
{
    const FsimSegmentView *seg = &g_array_index(m->segments, FsimSegmentView, s);
    uint64_t covered = 0;

    for (guint i = 0; i < m->blocks->len; i++) {
        const FsimExplainBlock *b = &g_array_index(m->blocks, FsimExplainBlock, i);
        uint64_t x = b->addr - seg->addr;

        if (b->segment != s)
            continue;
        rect(fills, covered, x, y, COLOUR_ROUNDING); /* a gap: bytes in no block */
        covered = x + b->size;
        if (!b->free) {
            rect(fills, x, x + b->requested, y, COLOUR_LIVE);
            rect(fills, x + b->requested, x + b->size, y, COLOUR_ROUNDING);
            if (b->pinned > 0)
                rect(lines, x, x + b->size, y, 0);
        } else if (b->releasable == 0) {
            rect(fills, x, x + b->size, y, COLOUR_PINNED);
        } else if (b->releasable == b->size || seg->page_size == 0) {
            rect(fills, x, x + b->size, y, COLOUR_RELEASABLE);
        } else {
            uint64_t head = (seg->page_size - x % seg->page_size) % seg->page_size;

            head = MIN(head, b->size - b->releasable);
            rect(fills, x, x + head, y, COLOUR_PINNED);
            rect(fills, x + head, x + head + b->releasable, y, COLOUR_RELEASABLE);
            rect(fills, x + head + b->releasable, x + b->size, y, COLOUR_PINNED);
        }
    }
    rect(fills, covered, seg->size, y, COLOUR_ROUNDING);
}

static GArray *
choose_bars(const FsimMoment *m)
{
    GArray *bars = g_array_new(FALSE, TRUE, sizeof(Bar));

    g_array_set_size(bars, m->segments->len);
    for (guint s = 0; s < m->segments->len; s++)
        g_array_index(bars, Bar, s).segment = s;
    for (guint i = 0; i < m->blocks->len; i++) {
        const FsimExplainBlock *b = &g_array_index(m->blocks, FsimExplainBlock, i);
        Bar *bar = &g_array_index(bars, Bar, b->segment);

        if (b->free) {
            bar->free += b->size;
            bar->pinned += b->size - b->releasable;
        }
    }
    if (bars->len > MAX_BARS) {
        g_array_sort(bars, bar_compare);
        g_array_set_size(bars, MAX_BARS);
    }
    return bars;
}

static gboolean
plot_write(const char *path, const char *contents, GError **error)
{
    g_autoptr(GError) local_error = NULL;

    if (!g_file_set_contents(path, contents, -1, &local_error)) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_IO, "%s", local_error->message);
        return FALSE;
    }
    return TRUE;
}

/* The data file: block 0 fills (x0 x1 y0 y1 colour), block 1 outlines, block 2 the request. */
static char *
plot_data(const FsimMoment *m, guint *n_bars, uint64_t *x_max)
{
    g_autoptr(GArray) bars = choose_bars(m);
    g_autoptr(GString) fills = g_string_new("# x0_MiB x1_MiB y0 y1 colour\n");
    g_autoptr(GString) lines = g_string_new(NULL);
    g_autoptr(GString) request = g_string_new(NULL);

    *x_max = m->has_request ? m->request.size : 0;
    for (guint i = 0; i < bars->len; i++) {
        guint s = g_array_index(bars, Bar, i).segment;

        draw_segment(m, s, (double)(bars->len - i), fills, lines);
        *x_max = MAX(*x_max, g_array_index(m->segments, FsimSegmentView, s).size);
    }
    if (m->has_request)
        rect(request, 0, m->request.size, (double)bars->len + 1.5, 0);
    if (lines->len == 0)
        g_string_append(lines, "NaN NaN NaN NaN 0\n");
    if (request->len == 0)
        g_string_append(request, "NaN NaN NaN NaN 0\n");
    if (fills->len == 0 || bars->len == 0)
        g_string_append(fills, "NaN NaN NaN NaN 0\n");
    *n_bars = bars->len;
    return g_strdup_printf("%s\n\n%s\n\n%s", fills->str, lines->str, request->str);
}

/* The image's data file and gnuplot script, DIR/@data_name and DIR/@script_name (a copy of
 * explain.gp from @templates); the number of bars drawn and the widest in *@n_bars, *@x_max. */
static gboolean
plot_files(const FsimMoment *m, const char *templates, const char *dir, const char *data_name,
           const char *script_name, guint *n_bars, uint64_t *x_max, GError **error)
{
    g_autofree char *template = g_build_filename(templates, "explain.gp", NULL);
    g_autofree char *data_path = g_build_filename(dir, data_name, NULL);
    g_autofree char *script_path = g_build_filename(dir, script_name, NULL);
    g_autofree char *script = NULL;
    g_autofree char *data = NULL;
    g_autoptr(GError) local_error = NULL;

    if (!g_file_get_contents(template, &script, NULL, &local_error)) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_NO_TEMPLATES, "%s",
                    local_error->message);
        return FALSE;
    }
    data = plot_data(m, n_bars, x_max);
    return plot_write(data_path, data, error) && plot_write(script_path, script, error);
}

/* The image's title: the trace, device, policy, moment and reserved memory. */
static char *
plot_title(const FsimExplanation *e, const FsimMoment *m, guint n_bars)
{
    g_autofree char *name = g_path_get_basename(e->trace);
    g_autofree char *trace_name = fsim_plot_escape(name);
    g_autofree char *reserved = fsim_format_size(m->reserved_bytes);

    return g_strdup_printf(
        "%s, device %u, %s: %s at event %" G_GINT64_FORMAT ", %s reserved%s", trace_name,
        e->trace_device, e->policy, fsim_moment_kind_name(m->kind), m->event, reserved,
        m->segments->len > n_bars ? " (segments with the most free memory)" : "");
}

/* Runs gnuplot's @argv in @dir; FALSE, with the reason, unless it draws the image @path. */
static gboolean
plot_run(char **argv, const char *dir, const char *path, GError **error)
{
    g_autofree char *err = NULL;
    g_autoptr(GError) local_error = NULL;
    int status = 0;

    (void)g_unlink(path);
    if (!g_spawn_sync(dir, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, &err, &status,
                      &local_error) ||
        !g_spawn_check_wait_status(status, &local_error) ||
        !g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, FSIM_PLOT_ERROR, FSIM_PLOT_ERROR_FAILED,
                    "gnuplot failed drawing %s (%s)%s%s", path,
                    local_error != NULL ? local_error->message : "no image written",
                    err != NULL && *err != '\0' ? ": " : "", err != NULL ? err : "");
        return FALSE;
    }
    return TRUE;
}

gboolean
fsim_explain_plot(const FsimExplanation *e, guint index, const char *path, const char *gnuplot,
                  GError **error)
{
    const FsimMoment *m;
    g_autofree char *program = NULL;
    g_autofree char *templates = NULL;
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *stem = g_strndup(base, strlen(base) - 4);
    g_autofree char *data_name = g_strconcat(stem, ".dat", NULL);
    g_autofree char *script_name = g_strconcat(stem, ".gp", NULL);
    g_autofree char *title = NULL;
    g_autofree char *bars_text = NULL;
    g_autofree char *x_text = NULL;
    guint n_bars;
    uint64_t x_max;

    g_return_val_if_fail(index < e->moments->len, FALSE);
    m = g_ptr_array_index(e->moments, index);
    program = fsim_plot_find_gnuplot(gnuplot, error);
    if (program == NULL)
        return FALSE;
    templates = fsim_plot_find_templates(NULL, error);
    if (templates == NULL ||
        !plot_files(m, templates, dir, data_name, script_name, &n_bars, &x_max, error))
        return FALSE;
    title = plot_title(e, m, n_bars);
    bars_text = g_strdup_printf("%u", n_bars);
    x_text = g_strdup_printf("%.6f", (double)MAX(x_max, 1) / (double)FSIM_MiB);
    {
        char format[4];
        char option[] = "-c";
        char request[2] = {m->has_request ? '1' : '0', '\0'};
        char *argv[] = {program, option,    script_name, data_name, base, format,
                        title,   bars_text, x_text,      request,   NULL};

        g_strlcpy(format, g_str_has_suffix(path, ".svg") ? "svg" : "png", sizeof(format));
        return plot_run(argv, dir, path, error);
    }
}
