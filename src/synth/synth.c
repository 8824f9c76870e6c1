/* SPDX-License-Identifier: MIT */
/*
 * fragsim: what the synthetic generators share: the iterator, writing a generator out as a text
 * trace, the heap of future events, and the length and size distributions.
 */
#include "synth.h"

#include <glib.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fragsim/trace.h"
#include "fragsim/types.h"

gboolean
fsim_synth_next(FsimSynth *synth, FsimEvent *ev, GError **error)
{
    const FsimSynthClass *klass;

    g_return_val_if_fail(synth != NULL && ev != NULL, FALSE);
    klass = synth->klass;
    if (klass->fill != NULL) {
        if (!fsim_synth_queue_next(&synth->queue, synth, klass->fill, ev))
            return FALSE;
        klass->stamp(synth, ev);
    } else if (!klass->next(synth, ev, error)) {
        return FALSE;
    }
    synth->events++;
    return TRUE;
}

uint64_t
fsim_synth_events(const FsimSynth *synth)
{
    return synth->events;
}

void
fsim_synth_free(FsimSynth *synth)
{
    if (synth == NULL)
        return;
    if (synth->klass->destroy != NULL)
        synth->klass->destroy(synth);
    fsim_synth_queue_clear(&synth->queue);
    g_clear_pointer(&synth->rand, g_rand_free);
    fsim_synth_heap_clear(&synth->heap);
    g_free(synth);
}

gboolean
fsim_synth_write(FsimSynth *synth, const char *path, const char *comment, uint64_t *events,
                 GError **error)
{
    g_autoptr(FsimTraceWriter) writer = fsim_trace_writer_open(path, error);
    g_autoptr(GError) local_error = NULL;
    uint64_t n = 0;
    FsimEvent ev;

    if (writer == NULL)
        return FALSE;
    if (comment) {
        g_auto(GStrv) lines = g_strsplit(comment, "\n", -1);
        for (char **line = lines; *line; line++) {
            if (!fsim_trace_writer_comment(writer, *line, error))
                return FALSE;
        }
    }
    while (fsim_synth_next(synth, &ev, &local_error)) {
        if (!fsim_trace_writer_write(writer, &ev, error))
            return FALSE;
        n++;
    }
    if (local_error) {
        g_propagate_error(error, g_steal_pointer(&local_error));
        return FALSE;
    }
    if (!fsim_trace_writer_close(g_steal_pointer(&writer), error))
        return FALSE;
    if (events)
        *events = n;
    return TRUE;
}

/* ---- Queue of events made ahead ------------------------------------------------------------- */

void
fsim_synth_queue_init(FsimSynthQueue *queue, guint reserve)
{
    queue->items = g_array_sized_new(FALSE, FALSE, sizeof(FsimSynthPending), reserve);
    queue->pos = 0;
}

void
fsim_synth_queue_clear(FsimSynthQueue *queue)
{
    g_clear_pointer(&queue->items, g_array_unref);
}

gboolean
fsim_synth_queue_next(FsimSynthQueue *queue, FsimSynth *synth, FsimSynthFill fill, FsimEvent *ev)
{
    while (queue->pos == queue->items->len) {
        g_array_set_size(queue->items, 0);
        queue->pos = 0;
        if (!fill(synth))
            return FALSE;
    }
    const FsimSynthPending *p = &g_array_index(queue->items, FsimSynthPending, queue->pos++);
    memset(ev, 0, sizeof *ev);
    ev->kind = p->kind;
    ev->id = p->id;
    ev->size = p->size;
    ev->label = p->label;
    ev->index = synth->events + 1;
    return TRUE;
}

/* ---- Heap of future events --------------------------------------------------------------- */

void
fsim_synth_seed(FsimSynth *synth, uint64_t seed)
{
    synth->rand = g_rand_new_with_seed((guint32)seed);
    fsim_synth_heap_init(&synth->heap);
}

void
fsim_synth_heap_init(FsimSynthHeap *heap)
{
    heap->items = (FsimSynthHeapItems){0};
    heap->next_seq = 0;
}

void
fsim_synth_heap_clear(FsimSynthHeap *heap)
{
    fsim_synth_heap_items_clear(&heap->items);
}

void
fsim_synth_heap_push(FsimSynthHeap *heap, FsimTime time, uint64_t kind, uint64_t value)
{
    FsimSynthHeapItem item = {.time = time, .seq = heap->next_seq++, .kind = kind, .value = value};

    fsim_synth_heap_items_push(&heap->items, &item);
}

const FsimSynthHeapItem *
fsim_synth_heap_peek(const FsimSynthHeap *heap)
{
    return fsim_synth_heap_items_top(&heap->items);
}

gboolean
fsim_synth_heap_pop(FsimSynthHeap *heap, FsimSynthHeapItem *out)
{
    return fsim_synth_heap_items_pop(&heap->items, out);
}

/* ---- Distributions ----------------------------------------------------------------------- */

/* A number, with size suffixes when @sizes; positive and finite. */
static gboolean
dist_number(const char *text, gboolean sizes, double *out, GError **error)
{
    if (sizes) {
        uint64_t v;
        if (fsim_parse_size(text, &v, NULL)) {
            *out = (double)v;
            return TRUE;
        }
    }
    char *end = NULL;
    errno = 0;
    double v = g_ascii_strtod(text, &end);
    if (end == text || *end != '\0' || errno != 0 || !isfinite(v) || v < 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "'%s' is not a %s", text,
                    sizes ? "size" : "non-negative number");
        return FALSE;
    }
    *out = v;
    return TRUE;
}

static gboolean
dist_read_histogram(const char *path, gboolean sizes, FsimDist *out, GError **error)
{
    g_autofree char *contents = NULL;
    g_autoptr(GError) local_error = NULL;
    if (!g_file_get_contents(path, &contents, NULL, &local_error)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s", local_error->message);
        return FALSE;
    }
    g_auto(GStrv) lines = g_strsplit(contents, "\n", -1);
    double total = 0;
    out->values = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    out->weights = g_array_new(FALSE, FALSE, sizeof(double));
    for (guint i = 0; lines[i]; i++) {
        char *hash = strchr(lines[i], '#');
        if (hash)
            *hash = '\0';
        g_auto(GStrv) fields = g_strsplit_set(g_strstrip(lines[i]), " \t", -1);
        GPtrArray *words = g_ptr_array_new();
        for (char **f = fields; *f; f++) {
            if (**f)
                g_ptr_array_add(words, *f);
        }
        guint n_words = words->len;
        double value = 0, weight = 0;
        gboolean ok = TRUE;
        if (n_words == 2) {
            ok = dist_number(g_ptr_array_index(words, 0), sizes, &value, NULL) &&
                 dist_number(g_ptr_array_index(words, 1), FALSE, &weight, NULL) && value >= 1;
        }
        g_ptr_array_free(words, TRUE);
        if (n_words == 0)
            continue;
        if (n_words != 2 || !ok) {
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "%s:%u: expected 'VALUE WEIGHT' (a positive value, a non-negative weight)",
                        path, i + 1);
            return FALSE;
        }
        uint64_t v = (uint64_t)value;
        total += weight;
        g_array_append_val(out->values, v);
        g_array_append_val(out->weights, total);
    }
    if (total <= 0) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s: the histogram has no weight", path);
        return FALSE;
    }
    return TRUE;
}

gboolean
fsim_dist_parse(const char *text, gboolean sizes, FsimDist *out, GError **error)
{
    memset(out, 0, sizeof *out);
    if (g_str_has_prefix(text, "hist:")) {
        out->kind = FSIM_DIST_HISTOGRAM;
        if (!dist_read_histogram(text + 5, sizes, out, error)) {
            fsim_dist_clear(out);
            return FALSE;
        }
        return TRUE;
    }
    g_auto(GStrv) parts = g_strsplit(text, ":", -1);
    guint n = g_strv_length(parts);
    const char *kind = parts[0] ? parts[0] : "";
    guint want;
    if (g_ascii_strcasecmp(kind, "fixed") == 0) {
        out->kind = FSIM_DIST_FIXED;
        want = 2;
    } else if (g_ascii_strcasecmp(kind, "uniform") == 0) {
        out->kind = FSIM_DIST_UNIFORM;
        want = 3;
    } else if (g_ascii_strcasecmp(kind, "lognormal") == 0) {
        out->kind = FSIM_DIST_LOGNORMAL;
        want = 3;
    } else {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "unknown distribution '%s' (valid: fixed:N, uniform:MIN:MAX, "
                    "lognormal:MEDIAN:SIGMA, hist:FILE)",
                    text);
        return FALSE;
    }
    if (n != want) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "distribution '%s' needs %u parameter%s",
                    text, want - 1, want == 2 ? "" : "s");
        return FALSE;
    }
    if (!dist_number(parts[1], sizes, &out->a, error))
        return FALSE;
    if (want == 3 &&
        !dist_number(parts[2], sizes && out->kind == FSIM_DIST_UNIFORM, &out->b, error))
        return FALSE;
    if (out->a < 1 || (out->kind == FSIM_DIST_UNIFORM && out->b < out->a) || out->a > 1e18 ||
        out->b > 1e18 || (out->kind == FSIM_DIST_LOGNORMAL && out->b > 20)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                    "distribution '%s' is out of range (values at least 1, MIN <= MAX, sigma at "
                    "most 20)",
                    text);
        return FALSE;
    }
    return TRUE;
}

void
fsim_dist_clear(FsimDist *dist)
{
    g_clear_pointer(&dist->values, g_array_unref);
    g_clear_pointer(&dist->weights, g_array_unref);
}

/* A standard normal deviate (Box-Muller; uses two draws, so the sequence stays reproducible). */
static double
dist_normal(GRand *rand)
{
    double u1 = g_rand_double(rand);
    double u2 = g_rand_double(rand);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * G_PI * u2);
}

uint64_t
fsim_dist_sample(const FsimDist *dist, GRand *rand, uint64_t max)
{
    double v = 1;
    switch (dist->kind) {
    case FSIM_DIST_FIXED:
        v = dist->a;
        break;
    case FSIM_DIST_UNIFORM:
        /* integers in [a, b]: floor(a + u · (b − a + 1)) */
        v = floor(dist->a + g_rand_double(rand) * (floor(dist->b) - floor(dist->a) + 1));
        break;
    case FSIM_DIST_LOGNORMAL:
        v = round(dist->a * exp(dist->b * dist_normal(rand)));
        break;
    case FSIM_DIST_HISTOGRAM: {
        guint n = dist->weights->len;
        double total = g_array_index(dist->weights, double, n - 1);
        double u = g_rand_double(rand) * total;
        guint lo = 0, hi = n - 1;
        while (lo < hi) { /* first cumulative weight above u */
            guint mid = (lo + hi) / 2;
            if (g_array_index(dist->weights, double, mid) > u)
                hi = mid;
            else
                lo = mid + 1;
        }
        v = (double)g_array_index(dist->values, uint64_t, lo);
        break;
    }
    }
    if (!(v >= 1))
        v = 1;
    if (v > 1e18)
        v = 1e18;
    uint64_t n = (uint64_t)v;
    if (max && n > max)
        n = max;
    return n;
}
