/* SPDX-License-Identifier: MIT */
/*
 * A small streaming pickle writer (pickle.h): the opcode subset that MemoryViz.js
 * (pytorch.org/memory_viz) and CPython both read, so that simulated runs can be exported as
 * snapshots the viewer opens.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/types.h"

#include "readers/pickle.h"

#define WRITER_BUFFER_SIZE  ((size_t)64 * 1024)
#define WRITER_BATCH        1000 /* items per APPENDS/SETITEMS, as CPython's pickler */
#define WRITER_MEMO_MAX_STR ((size_t)1024)
#define WRITER_MEMO_MAX     ((guint)1 << 20)

typedef struct {
    FsimPickleType kind;  /* FSIM_PICKLE_LIST, _DICT or _TUPLE */
    guint batch;          /* items (dict: entries) since the batch's MARK */
    gboolean pending_key; /* dict: a key was written, its value not yet */
} Frame;

typedef struct {
    size_t len;
    const char *data;
} MemoKey;

struct FsimPickleWriter {
    GOutputStream *out; /* borrowed */
    guint8 *buffer;
    size_t len;
    GError *error;    /* the first write error or misuse */
    GArray *frames;   /* of Frame */
    GHashTable *memo; /* MemoKey* (owned, data after it) -> memo index + 1 */
    guint memo_next;
    gboolean root_done;
};

static guint
memo_key_hash(gconstpointer p)
{
    const MemoKey *k = p;
    guint h = 5381;
    for (size_t i = 0; i < k->len; i++)
        h = h * 33 + (guint8)k->data[i];
    return h;
}

static gboolean
memo_key_equal(gconstpointer a, gconstpointer b)
{
    const MemoKey *x = a;
    const MemoKey *y = b;
    return x->len == y->len && memcmp(x->data, y->data, x->len) == 0;
}

static void
writer_flush(FsimPickleWriter *w)
{
    if (w->len > 0 && w->error == NULL)
        g_output_stream_write_all(w->out, w->buffer, w->len, NULL, NULL, &w->error);
    w->len = 0;
}

static void
writer_put(FsimPickleWriter *w, const void *bytes, size_t n)
{
    if (w->error != NULL)
        return;
    if (WRITER_BUFFER_SIZE - w->len < n) {
        writer_flush(w);
        if (n >= WRITER_BUFFER_SIZE) {
            if (w->error == NULL)
                g_output_stream_write_all(w->out, bytes, n, NULL, NULL, &w->error);
            return;
        }
    }
    memcpy(w->buffer + w->len, bytes, n);
    w->len += n;
}

static inline void
writer_byte(FsimPickleWriter *w, guint8 b)
{
    writer_put(w, &b, 1);
}

static void
writer_le32(FsimPickleWriter *w, guint8 op, uint32_t x)
{
    guint8 b[5] = {op, (guint8)x, (guint8)(x >> 8), (guint8)(x >> 16), (guint8)(x >> 24)};
    writer_put(w, b, sizeof(b));
}

static void writer_misuse(FsimPickleWriter *w, const char *format, ...) G_GNUC_PRINTF(2, 3);

static void
writer_misuse(FsimPickleWriter *w, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    g_autofree char *message = g_strdup_vprintf(format, args);
    va_end(args);
    g_critical("pickle writer: %s", message);
    if (w->error == NULL)
        g_set_error(&w->error, FSIM_ERROR, FSIM_ERROR_FAILED, "pickle writer misused: %s", message);
}

static Frame *
writer_top(FsimPickleWriter *w)
{
    return w->frames->len > 0 ? &g_array_index(w->frames, Frame, w->frames->len - 1) : NULL;
}

/* Called before every value: opens a batch where one is due. */
static gboolean
writer_before_value(FsimPickleWriter *w)
{
    Frame *f = writer_top(w);
    if (f == NULL) {
        if (w->root_done) {
            writer_misuse(w, "a second value at the top level");
            return FALSE;
        }
        return TRUE;
    }
    if (f->batch == 0 &&
        (f->kind == FSIM_PICKLE_LIST || (f->kind == FSIM_PICKLE_DICT && !f->pending_key)))
        writer_byte(w, '(');
    return TRUE;
}

/* Called after every value: counts it and closes a full batch. */
static void
writer_after_value(FsimPickleWriter *w)
{
    Frame *f = writer_top(w);
    if (f == NULL) {
        w->root_done = TRUE;
        return;
    }
    if (f->kind == FSIM_PICKLE_TUPLE)
        return;
    if (f->kind == FSIM_PICKLE_DICT) {
        /* A dict's entry is complete after its value. */
        f->pending_key = !f->pending_key;
        if (f->pending_key)
            return;
    }
    if (++f->batch == WRITER_BATCH) {
        writer_byte(w, f->kind == FSIM_PICKLE_LIST ? 'e' : 'u');
        f->batch = 0;
    }
}

FsimPickleWriter *
fsim_pickle_writer_new(GOutputStream *out)
{
    g_return_val_if_fail(G_IS_OUTPUT_STREAM(out), NULL);
    FsimPickleWriter *w = g_new0(FsimPickleWriter, 1);
    w->out = out;
    w->buffer = g_malloc(WRITER_BUFFER_SIZE);
    w->frames = g_array_new(FALSE, FALSE, sizeof(Frame));
    w->memo = g_hash_table_new_full(memo_key_hash, memo_key_equal, g_free, NULL);
    writer_put(w, "\x80\x02", 2);
    return w;
}

/* A scalar value: its opcode and argument, @n bytes. */
static void
writer_scalar(FsimPickleWriter *w, const guint8 *bytes, size_t n)
{
    if (!writer_before_value(w))
        return;
    writer_put(w, bytes, n);
    writer_after_value(w);
}

void
fsim_pickle_writer_free(FsimPickleWriter *w)
{
    if (w == NULL)
        return;
    g_clear_pointer(&w->buffer, g_free);
    g_clear_pointer(&w->frames, g_array_unref);
    g_clear_pointer(&w->memo, g_hash_table_unref);
    g_clear_error(&w->error);
    g_free(w);
}

void
fsim_pickle_writer_begin(FsimPickleWriter *w, FsimPickleType kind)
{
    g_return_if_fail(w != NULL);
    g_return_if_fail(kind == FSIM_PICKLE_DICT || kind == FSIM_PICKLE_LIST ||
                     kind == FSIM_PICKLE_TUPLE);
    if (!writer_before_value(w))
        return;
    /* A tuple is MARK ... TUPLE: the item count is not known in advance. */
    writer_byte(w, kind == FSIM_PICKLE_DICT ? '}' : kind == FSIM_PICKLE_LIST ? ']' : '(');
    Frame f = {.kind = kind};
    g_array_append_val(w->frames, f);
}

void
fsim_pickle_writer_end(FsimPickleWriter *w, FsimPickleType kind)
{
    g_return_if_fail(w != NULL);
    Frame *f = writer_top(w);
    if (f == NULL || f->kind != kind) {
        const char *what = fsim_pickle_type_name(kind);
        writer_misuse(w, "end_%s without a matching begin_%s", what, what);
        return;
    }
    if (f->kind == FSIM_PICKLE_DICT && f->pending_key) {
        writer_misuse(w, "end_dict after a key without its value");
        return;
    }
    if (f->kind == FSIM_PICKLE_TUPLE)
        writer_byte(w, 't');
    else if (f->batch > 0)
        writer_byte(w, f->kind == FSIM_PICKLE_LIST ? 'e' : 'u');
    g_array_set_size(w->frames, w->frames->len - 1);
    writer_after_value(w);
}

/* LONG1 with the fewest bytes that hold @u as two's complement (@negative: @u is an int64). */
static void
writer_long1(FsimPickleWriter *w, uint64_t u, gboolean negative)
{
    guint8 b[11] = {0x8a};
    size_t n = 0;
    for (; n < 8; n++)
        b[2 + n] = (guint8)(u >> (8 * n));
    /* Trim bytes that only repeat the sign. */
    guint8 fill = negative ? 0xff : 0x00;
    while (n > 1 && b[2 + n - 1] == fill && ((b[2 + n - 2] & 0x80) != 0) == negative)
        n--;
    if (!negative && (b[2 + n - 1] & 0x80))
        b[2 + n++] = 0x00;
    b[1] = (guint8)n;
    writer_put(w, b, 2 + n);
}

void
fsim_pickle_writer_int(FsimPickleWriter *w, int64_t value)
{
    g_return_if_fail(w != NULL);
    if (!writer_before_value(w))
        return;
    if (value >= 0 && value <= 0xff) {
        guint8 b[2] = {'K', (guint8)value};
        writer_put(w, b, 2);
    } else if (value >= 0 && value <= 0xffff) {
        guint8 b[3] = {'M', (guint8)value, (guint8)(value >> 8)};
        writer_put(w, b, 3);
    } else if (value >= INT32_MIN && value <= INT32_MAX) {
        writer_le32(w, 'J', (uint32_t)(int32_t)value);
    } else {
        writer_long1(w, (uint64_t)value, value < 0);
    }
    writer_after_value(w);
}

void
fsim_pickle_writer_uint(FsimPickleWriter *w, uint64_t value)
{
    g_return_if_fail(w != NULL);
    if (value <= (uint64_t)INT64_MAX) {
        fsim_pickle_writer_int(w, (int64_t)value);
        return;
    }
    if (!writer_before_value(w))
        return;
    writer_long1(w, value, FALSE);
    writer_after_value(w);
}

void
fsim_pickle_writer_double(FsimPickleWriter *w, double value)
{
    g_return_if_fail(w != NULL);
    uint64_t bits;
    memcpy(&bits, &value, sizeof(bits));
    guint8 b[9] = {'G'};
    for (int k = 0; k < 8; k++)
        b[1 + k] = (guint8)(bits >> (56 - 8 * k));
    writer_scalar(w, b, sizeof(b));
}

void
fsim_pickle_writer_bool(FsimPickleWriter *w, gboolean value)
{
    guint8 op = value ? 0x88 : 0x89;
    g_return_if_fail(w != NULL);
    writer_scalar(w, &op, 1);
}

void
fsim_pickle_writer_none(FsimPickleWriter *w)
{
    g_return_if_fail(w != NULL);
    writer_scalar(w, (const guint8 *)"N", 1);
}

void
fsim_pickle_writer_str_len(FsimPickleWriter *w, const char *s, gsize len)
{
    g_return_if_fail(w != NULL);
    g_return_if_fail(s != NULL || len == 0);
    if (!writer_before_value(w))
        return;
    gboolean memoize = len <= WRITER_MEMO_MAX_STR;
    if (memoize) {
        MemoKey key = {.len = len, .data = s};
        guint index = GPOINTER_TO_UINT(g_hash_table_lookup(w->memo, &key));
        if (index != 0) {
            index--;
            if (index < 256) {
                guint8 b[2] = {'h', (guint8)index};
                writer_put(w, b, 2);
            } else {
                writer_le32(w, 'j', index);
            }
            writer_after_value(w);
            return;
        }
        memoize = w->memo_next < WRITER_MEMO_MAX;
    }
    if (len < 256) {
        guint8 b[2] = {0x8c, (guint8)len};
        writer_put(w, b, 2);
    } else if (len <= UINT32_MAX) {
        writer_le32(w, 'X', (uint32_t)len);
    } else {
        writer_misuse(w, "a str of %" G_GSIZE_FORMAT " bytes does not fit BINUNICODE", len);
        return;
    }
    writer_put(w, s, len);
    if (memoize) {
        guint index = w->memo_next++;
        if (index < 256) {
            guint8 b[2] = {'q', (guint8)index};
            writer_put(w, b, 2);
        } else {
            writer_le32(w, 'r', index);
        }
        MemoKey *key = g_malloc(sizeof(MemoKey) + len);
        memcpy(key + 1, s, len);
        key->len = len;
        key->data = (const char *)(key + 1);
        g_hash_table_insert(w->memo, key, GUINT_TO_POINTER(index + 1));
    }
    writer_after_value(w);
}

void
fsim_pickle_writer_str(FsimPickleWriter *w, const char *s)
{
    g_return_if_fail(s != NULL);
    fsim_pickle_writer_str_len(w, s, strlen(s));
}

gboolean
fsim_pickle_writer_finish(FsimPickleWriter *w, GError **error)
{
    g_return_val_if_fail(w != NULL, FALSE);
    if (w->error == NULL && (w->frames->len > 0 || !w->root_done))
        writer_misuse(w, w->frames->len > 0 ? "finish with a container still open"
                                            : "finish before any value");
    writer_byte(w, '.');
    writer_flush(w);
    if (w->error == NULL)
        g_output_stream_flush(w->out, NULL, &w->error);
    if (w->error != NULL) {
        g_propagate_error(error, g_steal_pointer(&w->error));
        return FALSE;
    }
    return TRUE;
}
