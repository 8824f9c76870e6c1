/* SPDX-License-Identifier: MIT */
/*
 * The binary format (`fragsim-trace binary v1`): text traces written as binary read back as the
 * same events; damaged files (cut short, a wrong checksum, a record out of range) fail with a
 * known code and a message naming the record; the writer refuses what it cannot write; and the
 * CLI writes the format (`convert --format binary`, `synth -o X.fsb`) and reads it back.
 */
#define _DEFAULT_SOURCE /* truncate() */

#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>
#include <unistd.h>

#include "fragsim/fragsim.h"

#include "readers/binary-format.h"
#include "test-util.h"

/* One line per event, without the index (a text trace counts lines, a binary one records). */
static char *
render(const char *path, GError **error)
{
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, error);
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(GString) out = g_string_new(NULL);
    GError *local_error = NULL;
    FsimEvent ev;

    if (trace == NULL)
        return NULL;
    stream = fsim_trace_stream_open(trace, 0, error);
    if (stream == NULL)
        return NULL;
    while (fsim_trace_stream_next(stream, &ev, &local_error)) {
        g_string_append_printf(out,
                               "%" G_GUINT64_FORMAT " %s id=%" G_GUINT64_FORMAT
                               " size=%" G_GUINT64_FORMAT " stream=%" G_GUINT64_FORMAT
                               " flags=%u label=%s\n",
                               ev.time, fsim_event_kind_name(ev.kind), ev.id, ev.size, ev.stream,
                               ev.flags, ev.label != NULL ? ev.label : "-");
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return NULL;
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* Copy every event of @in to @out in @format. */
static void
copy_trace(const char *in, const char *out, FsimTraceWriteFormat format)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(in, &error);
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(FsimTraceWriter) writer = NULL;
    FsimEvent ev;

    g_assert_no_error(error);
    stream = fsim_trace_stream_open(trace, 0, &error);
    g_assert_no_error(error);
    writer = fsim_trace_writer_open_format(out, format, &error);
    g_assert_no_error(error);
    g_assert_true(fsim_trace_writer_comment(writer, "kept by text only", &error));
    while (fsim_trace_stream_next(stream, &ev, &error))
        g_assert_true(fsim_trace_writer_write(writer, &ev, &error));
    g_assert_no_error(error);
    g_assert_true(fsim_trace_writer_close(g_steal_pointer(&writer), &error));
    g_assert_no_error(error);
}

/* @bytes compressed with gzip. */
static GByteArray *
gzip_bytes(const guint8 *data, gsize len)
{
    g_autoptr(GZlibCompressor) compressor = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 1);
    GByteArray *out = g_byte_array_sized_new((guint)(len + len / 100 + 1024));
    g_autoptr(GError) error = NULL;
    gsize read = 0;
    gsize written = 0;

    g_byte_array_set_size(out, (guint)(len + len / 100 + 1024));
    g_assert_cmpint(g_converter_convert(G_CONVERTER(compressor), data, len, out->data, out->len,
                                        G_CONVERTER_INPUT_AT_END, &read, &written, &error),
                    ==, G_CONVERTER_FINISHED);
    g_assert_no_error(error);
    g_assert_cmpuint(read, ==, len);
    g_byte_array_set_size(out, (guint)written);
    return out;
}

static void
test_round_trip(gconstpointer data)
{
    g_autofree char *text = fsim_test_trace_path(data);
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *binary = g_build_filename(dir, "t.bin", NULL);
    g_autofree char *back = g_build_filename(dir, "back.trace", NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *expected = render(text, &error);
    g_autofree char *got = NULL;
    g_autofree char *got_back = NULL;
    g_autoptr(FsimTrace) trace = NULL;

    g_assert_no_error(error);
    copy_trace(text, binary, FSIM_TRACE_WRITE_BINARY);
    trace = fsim_trace_open(binary, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(fsim_trace_format_name(trace), ==, "binary");
    got = render(binary, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(got, ==, expected);
    copy_trace(binary, back, FSIM_TRACE_WRITE_TEXT);
    got_back = render(back, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(got_back, ==, expected);
    /* The same events through windows of one, three and 128 records, mapped and compressed. */
    {
        g_autofree char *gz = g_build_filename(dir, "t.bin.gz", NULL);
        g_autofree char *contents = NULL;
        gsize len = 0;
        g_autoptr(GByteArray) packed = NULL;
        static const gsize windows[] = {32, 96, 4096};

        g_assert_true(g_file_get_contents(binary, &contents, &len, NULL));
        packed = gzip_bytes((const guint8 *)contents, len);
        g_assert_true(g_file_set_contents(gz, (const char *)packed->data, packed->len, NULL));
        for (gsize w = 0; w < G_N_ELEMENTS(windows); w++) {
            g_autofree char *mapped = NULL;
            g_autofree char *unzipped = NULL;

            fsim_binary_set_window(windows[w]);
            mapped = render(binary, &error);
            g_assert_no_error(error);
            unzipped = render(gz, &error);
            g_assert_no_error(error);
            fsim_binary_set_window(0);
            g_assert_cmpstr(mapped, ==, expected);
            g_assert_cmpstr(unzipped, ==, expected);
        }
    }
    fsim_test_remove_tree(dir);
}

/* A file cut short while a stream reads it (another process rewriting it) is an error naming
 * the record, never a SIGBUS from a mapped page past the end, and never events from a window
 * the file no longer holds. */
static void
test_shrunk_while_read(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "long.fsb", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceStream) stream = NULL;
    guint events = 0;
    FsimEvent ev;

    {
        g_autoptr(FsimTraceWriter) writer = fsim_trace_writer_open(path, &error);

        g_assert_no_error(error);
        for (guint i = 0; i < 1000; i++) {
            FsimEvent a = {.time = i, .kind = FSIM_EV_ALLOC, .id = i + 1, .size = 512};

            g_assert_true(fsim_trace_writer_write(writer, &a, &error));
        }
        g_assert_true(fsim_trace_writer_close(g_steal_pointer(&writer), &error));
    }
    fsim_binary_set_window(4096); /* 128 records */
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    stream = fsim_trace_stream_open(trace, 0, &error);
    g_assert_no_error(error);
    g_assert_true(fsim_trace_stream_next(stream, &ev, &error));
    events++;
    g_assert_cmpint(truncate(path, FSIM_BINARY_HEADER_BYTES + 300 * FSIM_BINARY_RECORD_BYTES), ==,
                    0);
    while (fsim_trace_stream_next(stream, &ev, &error))
        events++;
    fsim_binary_set_window(0);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_TRUNCATED);
    g_assert_nonnull(strstr(error->message, "record 257 of 1000 is cut short"));
    g_assert_cmpuint(events, ==, 256);
    fsim_test_remove_tree(dir);
}

/* A small valid binary trace in memory: an alloc on stream 7, a mark, a deferred free and its
 * completion, an empty_cache. */
static GByteArray *
sample_bytes(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "s.fsb", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTraceWriter) writer = fsim_trace_writer_open(path, &error);
    FsimEvent evs[] = {
        {.time = 10, .kind = FSIM_EV_ALLOC, .id = 1, .size = 4096, .stream = 7},
        {.time = 20, .kind = FSIM_EV_MARK, .label = "step 1"},
        {.time = 30, .kind = FSIM_EV_FREE, .id = 1, .stream = 7, .flags = FSIM_EVF_DEFERRED},
        {.time = 40, .kind = FSIM_EV_FREE_COMPLETED, .id = 1, .stream = 7},
        {.time = 50, .kind = FSIM_EV_EMPTY_CACHE},
    };
    char *contents;
    gsize len;
    GByteArray *bytes;

    g_assert_no_error(error);
    for (gsize i = 0; i < G_N_ELEMENTS(evs); i++)
        g_assert_true(fsim_trace_writer_write(writer, &evs[i], &error));
    g_assert_true(fsim_trace_writer_close(g_steal_pointer(&writer), &error));
    g_assert_true(g_file_get_contents(path, &contents, &len, &error));
    bytes = g_byte_array_new_take((guint8 *)contents, len);
    fsim_test_remove_tree(dir);
    return bytes;
}

/* Recompute the checksum of @bytes after an edit, so that the record checks are reached. */
static void
reseal(GByteArray *bytes)
{
    FsimBinarySum sum = {0};

    fsim_binary_sum_bytes(&sum, bytes->data + FSIM_BINARY_HEADER_BYTES,
                          bytes->len - FSIM_BINARY_HEADER_BYTES);
    fsim_binary_store64(bytes->data + FSIM_BINARY_OFF_CHECKSUM, fsim_binary_sum_value(&sum));
}

/* How read_bytes() stores and reads a trace: every check holds for each. */
typedef enum {
    READ_PLAIN,       /* mapped, one window */
    READ_PLAIN_SMALL, /* mapped, a window of two records */
    READ_GZIP,        /* decompressed, one buffer */
    READ_GZIP_SMALL,  /* decompressed, a buffer of two records */
    READ_WAYS,
} ReadWay;

/* Read all of @bytes as a trace, stored and read @way; the error of the open or of the
 * stream. */
static GError *
read_bytes_way(const GByteArray *bytes, ReadWay way)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "bad.fsb", NULL);
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceStream) stream = NULL;
    GError *error = NULL;
    FsimEvent ev;

    if (way == READ_GZIP || way == READ_GZIP_SMALL) {
        g_autoptr(GByteArray) gz = gzip_bytes(bytes->data, bytes->len);

        g_assert_true(g_file_set_contents(path, (const char *)gz->data, gz->len, NULL));
    } else {
        g_assert_true(g_file_set_contents(path, (const char *)bytes->data, bytes->len, NULL));
    }
    fsim_binary_set_window(way == READ_PLAIN_SMALL || way == READ_GZIP_SMALL ? 64 : 0);
    trace = fsim_trace_open(path, &error);
    if (trace != NULL) {
        stream = fsim_trace_stream_open(trace, 0, &error);
        g_assert_no_error(error);
        while (fsim_trace_stream_next(stream, &ev, &error))
            ;
    }
    fsim_binary_set_window(0);
    fsim_test_remove_tree(dir);
    return error;
}

static GError *
read_bytes(const GByteArray *bytes)
{
    return read_bytes_way(bytes, READ_PLAIN);
}

/* @bytes are refused with @code and a message saying @fragment, however they are stored and
 * read: the same error from a plain file and a compressed one, in one window or many. */
static void
assert_refused(const GByteArray *bytes, int code, const char *fragment)
{
    for (int way = 0; way < READ_WAYS; way++) {
        g_autoptr(GError) error = read_bytes_way(bytes, way);

        g_assert_error(error, FSIM_TRACE_ERROR, code);
        if (strstr(error->message, fragment) == NULL)
            g_error("read way %d: '%s' does not say '%s'", way, error->message, fragment);
        g_assert_true(strstr(error->message, "bad.fsb: ") != NULL);
    }
}

static void
test_sample(void)
{
    g_autoptr(GByteArray) bytes = sample_bytes();
    g_autoptr(GError) error = read_bytes(bytes);

    g_assert_no_error(error);
    g_assert_cmpuint(bytes->len, ==, 64 + 5 * 32 + 8 + 8);
    g_assert_cmpmem(bytes->data, FSIM_BINARY_MAGIC_LEN, FSIM_BINARY_MAGIC, FSIM_BINARY_MAGIC_LEN);
    g_assert_cmpuint(fsim_binary_load64(bytes->data + FSIM_BINARY_OFF_RECORDS), ==, 5);
    g_assert_cmpuint(fsim_binary_load32(bytes->data + FSIM_BINARY_OFF_STREAMS), ==, 1);
    g_assert_cmpuint(fsim_binary_load64(bytes->data + FSIM_BINARY_OFF_STRINGS_BYTES), ==, 7);
    /* The third record: delta 10, id 1, no size, stream index 0, FREE, DEFERRED. */
    g_assert_cmpuint(fsim_binary_load64(bytes->data + 64 + 2 * 32), ==, 10);
    g_assert_cmpuint(fsim_binary_load64(bytes->data + 64 + 2 * 32 + 24), ==,
                     FSIM_BINARY_WORD3(0, FSIM_EV_FREE, FSIM_EVF_DEFERRED));
    /* The stream table holds 7. */
    g_assert_cmpuint(fsim_binary_load64(bytes->data + 64 + 5 * 32), ==, 7);
}

static void
test_truncated(void)
{
    g_autoptr(GByteArray) bytes = sample_bytes();
    guint len = bytes->len;

    g_byte_array_set_size(bytes, 64 + 3 * 32 + 5);
    assert_refused(bytes, FSIM_TRACE_ERROR_TRUNCATED, "record 4 of 5 is cut short");
    g_byte_array_set_size(bytes, 40);
    assert_refused(bytes, FSIM_TRACE_ERROR_TRUNCATED, "the header is cut short");
    g_byte_array_unref(bytes);
    bytes = sample_bytes();
    g_byte_array_set_size(bytes, len - 4);
    assert_refused(bytes, FSIM_TRACE_ERROR_TRUNCATED, "tables after the last record");
    g_byte_array_set_size(bytes, len + 8);
    assert_refused(bytes, FSIM_TRACE_ERROR_SYNTAX, "tables after the last record");
}

static void
test_checksum(void)
{
    g_autoptr(GByteArray) bytes = sample_bytes();

    /* A size still in range: only the checksum can tell. */
    bytes->data[64 + 16] ^= 0x40;
    assert_refused(bytes, FSIM_TRACE_ERROR_CHECKSUM, "checksum mismatch");
    bytes->data[64 + 16] ^= 0x40;
    /* Two records swapped: the sum of the words is unchanged, the position-weighted one not. */
    {
        guint8 tmp[32];

        memcpy(tmp, bytes->data + 64 + 2 * 32, 32);
        memcpy(bytes->data + 64 + 2 * 32, bytes->data + 64 + 3 * 32, 32);
        memcpy(bytes->data + 64 + 3 * 32, tmp, 32);
    }
    assert_refused(bytes, FSIM_TRACE_ERROR_CHECKSUM, "checksum mismatch");
}

typedef struct {
    const char *name;
    guint record;   /* 1-based */
    guint word;     /* 0-3 */
    uint64_t value; /* the new word */
    int code;
    const char *fragment;
} BadRecord;

static const BadRecord bad_records[] = {
    {"stream-index", 1, 3, FSIM_BINARY_WORD3(1, FSIM_EV_ALLOC, 0), FSIM_TRACE_ERROR_NUMBER,
     "record 1: stream index 1 is outside the stream table (1 streams)"},
    {"kind", 3, 3, FSIM_BINARY_WORD3(0, 9, 0), FSIM_TRACE_ERROR_KIND, "record 3: unknown kind 9"},
    {"kind-zero", 3, 3, FSIM_BINARY_WORD3(0, 0, 0), FSIM_TRACE_ERROR_KIND,
     "record 3: unknown kind 0"},
    {"pool-zero", 5, 3, FSIM_BINARY_WORD3(0, FSIM_EV_POOL_RELEASE, 0), FSIM_TRACE_ERROR_NUMBER,
     "record 5: pool 0 is the default pool"},
    {"pool-release-stream", 5, 3, FSIM_BINARY_WORD3(1, FSIM_EV_POOL_RELEASE, 0),
     FSIM_TRACE_ERROR_SYNTAX, "record 5: a pool_release with a stream"},
    {"mark-stream", 2, 3, FSIM_BINARY_WORD3(1, FSIM_EV_MARK, 0), FSIM_TRACE_ERROR_SYNTAX,
     "record 2: a mark with a stream"},
    {"flags", 3, 3, FSIM_BINARY_WORD3(0, FSIM_EV_FREE, 0x80), FSIM_TRACE_ERROR_SYNTAX,
     "record 3: unknown flags 0x80"},
    {"deferred-alloc", 1, 3, FSIM_BINARY_WORD3(0, FSIM_EV_ALLOC, FSIM_EVF_DEFERRED),
     FSIM_TRACE_ERROR_SYNTAX, "record 1: flags 0x1 on a record of kind alloc"},
    {"inferred-free", 3, 3, FSIM_BINARY_WORD3(0, FSIM_EV_FREE, FSIM_EVF_INFERRED),
     FSIM_TRACE_ERROR_SYNTAX, "record 3: flags 0x2 on a record of kind free"},
    {"oom-mark", 2, 3, FSIM_BINARY_WORD3(0, FSIM_EV_MARK, FSIM_EVF_RECORDED_OOM),
     FSIM_TRACE_ERROR_SYNTAX, "record 2: flags 0x4 on a record of kind mark"},
    {"reserved", 3, 3, FSIM_BINARY_WORD3(0, FSIM_EV_FREE, 0) | ((uint64_t)1 << 50),
     FSIM_TRACE_ERROR_SYNTAX, "record 3: reserved bits are set"},
    {"size-zero", 1, 2, 0, FSIM_TRACE_ERROR_SIZE, "record 1: alloc of 0 bytes"},
    {"size-absurd", 1, 2, FSIM_MAX_SIZE + 1, FSIM_TRACE_ERROR_SIZE, "record 1: alloc of"},
    {"size-on-free", 3, 2, 5, FSIM_TRACE_ERROR_SYNTAX, "record 3: a free with a size"},
    {"label", 2, 1, 7, FSIM_TRACE_ERROR_NUMBER, "record 2: label offset 7 is outside"},
    {"empty-cache-id", 5, 1, 3, FSIM_TRACE_ERROR_SYNTAX, "record 5: an empty_cache with an id"},
    {"time", 4, 0, G_MAXUINT64, FSIM_TRACE_ERROR_TIME, "record 4: the time passes 2^64 ns"},
};

static void
test_bad_record(gconstpointer data)
{
    const BadRecord *bad = data;
    g_autoptr(GByteArray) bytes = sample_bytes();

    fsim_binary_store64(bytes->data + 64 + (bad->record - 1) * 32 + bad->word * 8, bad->value);
    reseal(bytes);
    assert_refused(bytes, bad->code, bad->fragment);
}

static void
test_bad_header(void)
{
    g_autoptr(GByteArray) bytes = sample_bytes();

    fsim_binary_store32(bytes->data + FSIM_BINARY_OFF_RECORD_BYTES, 40);
    assert_refused(bytes, FSIM_TRACE_ERROR_HEADER, "records of 40 bytes");
    g_byte_array_unref(bytes);
    bytes = sample_bytes();
    /* The string table must end with a NUL byte. */
    bytes->data[bytes->len - 2] = 'x';
    reseal(bytes);
    assert_refused(bytes, FSIM_TRACE_ERROR_SYNTAX, "does not end with a NUL byte");
}

/* The reader does not track ids: an id allocated twice is the replay's to refuse, naming it. */
static void
test_duplicate_refused_by_engine(void)
{
    g_autoptr(GByteArray) bytes = sample_bytes();
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "dup.fsb", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    FsimRunConfig config;
    FsimEvent ev;
    gboolean ok = TRUE;

    /* The mark becomes a second alloc of id 1. */
    fsim_binary_store64(bytes->data + 64 + 32 + 8, 1);
    fsim_binary_store64(bytes->data + 64 + 32 + 16, 100);
    fsim_binary_store64(bytes->data + 64 + 32 + 24, FSIM_BINARY_WORD3(0, FSIM_EV_ALLOC, 0));
    reseal(bytes);
    g_assert_true(g_file_set_contents(path, (const char *)bytes->data, bytes->len, NULL));
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    stream = fsim_trace_stream_open(trace, 0, &error);
    fsim_run_config_init(&config);
    config.policy = "bestfit";
    engine = fsim_engine_new(&config, &error);
    g_assert_no_error(error);
    while (ok && fsim_trace_stream_next(stream, &ev, &error))
        ok = fsim_engine_process(engine, &ev, &error);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_DUPLICATE);
    g_assert_nonnull(strstr(error->message, "event 2: id 1"));
    fsim_test_remove_tree(dir);
}

/* A gzip-compressed binary trace is read like any other. */
static void
test_gzip(void)
{
    g_autoptr(GByteArray) bytes = sample_bytes();
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "s.fsb", NULL);
    g_autofree char *gz = g_build_filename(dir, "s.fsb.gz", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(GZlibCompressor) compressor = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 1);
    guint8 out[4096];
    gsize read = 0;
    gsize written = 0;
    g_autofree char *plain = NULL;
    g_autofree char *unzipped = NULL;

    g_assert_true(g_file_set_contents(path, (const char *)bytes->data, bytes->len, NULL));
    g_assert_cmpint(g_converter_convert(G_CONVERTER(compressor), bytes->data, bytes->len, out,
                                        sizeof(out), G_CONVERTER_INPUT_AT_END, &read, &written,
                                        &error),
                    ==, G_CONVERTER_FINISHED);
    g_assert_true(g_file_set_contents(gz, (const char *)out, (gssize)written, NULL));
    plain = render(path, &error);
    g_assert_no_error(error);
    unzipped = render(gz, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(unzipped, ==, plain);
    g_assert_nonnull(strstr(plain, "label=step 1"));
    fsim_test_remove_tree(dir);
}

static void
test_writer_refuses(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *gz = g_build_filename(dir, "x.fsb.gz", NULL);
    FsimTraceWriter *writer;

    writer = fsim_trace_writer_open_format(gz, FSIM_TRACE_WRITE_BINARY, &error);
    g_assert_null(writer);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_clear_error(&error);
    writer = fsim_trace_writer_open_format("/dev/null", FSIM_TRACE_WRITE_BINARY, &error);
    g_assert_null(writer);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_clear_error(&error);
    /* Time going backwards cannot be written as a delta. */
    {
        g_autofree char *path = g_build_filename(dir, "back.fsb", NULL);
        g_autoptr(FsimTraceWriter) w = fsim_trace_writer_open(path, &error);
        FsimEvent a = {.time = 10, .kind = FSIM_EV_EMPTY_CACHE};
        FsimEvent b = {.time = 5, .kind = FSIM_EV_EMPTY_CACHE};

        g_assert_no_error(error);
        g_assert_true(fsim_trace_writer_write(w, &a, &error));
        g_assert_false(fsim_trace_writer_write(w, &b, &error));
        g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_TIME);
    }
    /* Nothing left behind. */
    {
        g_autoptr(GDir) handle = g_dir_open(dir, 0, NULL);

        g_assert_null(g_dir_read_name(handle));
    }
    fsim_test_remove_tree(dir);
}

/* Event @i of a trace that mixes every kind: common ones (alloc, free, free_completed) alone in
 * two batches of three, the rarer ones at many positions of the third; @label is the mark's. */
static FsimEvent
mixed_event(guint i, char *label, gsize label_len)
{
    FsimEvent ev = {.time = 1000 + 7 * (uint64_t)i, .stream = 0};
    uint64_t id = i / 2 + 1;
    gboolean rare = i / 128 % 3 == 0;

    if (rare && i % 61 == 5) {
        ev.kind = FSIM_EV_MARK;
        g_snprintf(label, label_len, "mark %u", i);
        ev.label = label;
    } else if (rare && i % 23 == 11) {
        ev.kind = FSIM_EV_EMPTY_CACHE;
        ev.flags = i % 2 != 0 ? FSIM_EVF_INFERRED : 0;
    } else if (rare && i % 29 == 17) {
        ev.kind = FSIM_EV_POOL_BEGIN + i % 3;
        ev.id = 1 + i % 5;
        ev.stream = ev.kind == FSIM_EV_POOL_RELEASE ? 0 : 7;
    } else if (i % 2 == 0) {
        ev.kind = FSIM_EV_ALLOC;
        ev.id = id;
        ev.size = 512 * (uint64_t)(i % 9 + 1);
        ev.stream = i % 3 == 0 ? 0 : 7;
        ev.flags = i % 10 == 4 ? FSIM_EVF_RECORDED_OOM : 0;
    } else {
        ev.kind = i % 7 == 3 ? FSIM_EV_FREE_COMPLETED : FSIM_EV_FREE;
        ev.id = id;
        ev.stream = i % 3 == 0 ? 0 : 7;
        ev.flags = ev.kind == FSIM_EV_FREE && i % 5 == 1 ? FSIM_EVF_DEFERRED : 0;
    }
    return ev;
}

/* Every field of every event, through fsim_trace_stream_batch() and fsim_trace_stream_next():
 * batches of common records after batches that held marks (a label left behind would show), the
 * index counted from 1, no address, device or stack. */
static void
test_every_field(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *path = g_build_filename(dir, "mixed.fsb", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = NULL;
    const guint n = 2000;
    char label[32];

    {
        g_autoptr(FsimTraceWriter) writer =
            fsim_trace_writer_open_format(path, FSIM_TRACE_WRITE_BINARY, &error);

        g_assert_no_error(error);
        for (guint i = 0; i < n; i++) {
            FsimEvent ev = mixed_event(i, label, sizeof(label));

            g_assert_true(fsim_trace_writer_write(writer, &ev, &error));
        }
        g_assert_true(fsim_trace_writer_close(g_steal_pointer(&writer), &error));
        g_assert_no_error(error);
    }
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    /* Batches of 128, then of at most 5 (a window of 5 records), event by event and in batches. */
    for (int pass = 0; pass < 4; pass++) {
        gboolean by_batch = pass % 2 != 0;
        g_autoptr(FsimTraceStream) stream = NULL;
        guint i = 0;
        const FsimEvent *evs;
        FsimEvent one;
        gsize got;

        fsim_binary_set_window(pass < 2 ? 0 : 5 * FSIM_BINARY_RECORD_BYTES);
        stream = fsim_trace_stream_open(trace, 0, &error);
        g_assert_no_error(error);
        while (by_batch ? (got = fsim_trace_stream_batch(stream, &evs, &error)) > 0
                        : (got = fsim_trace_stream_next(stream, &one, &error)) > 0) {
            if (!by_batch)
                evs = &one;
            for (gsize k = 0; k < got; k++, i++) {
                FsimEvent want = mixed_event(i, label, sizeof(label));
                const FsimEvent *ev = &evs[k];

                g_assert_cmpuint(ev->time, ==, want.time);
                g_assert_cmpuint(ev->index, ==, i + 1);
                g_assert_cmpint(ev->kind, ==, want.kind);
                g_assert_cmpuint(ev->id, ==, want.kind == FSIM_EV_MARK ? 0 : want.id);
                g_assert_cmpuint(ev->size, ==, want.size);
                g_assert_cmpuint(ev->stream, ==, want.stream);
                g_assert_cmpuint(ev->flags, ==, want.flags);
                g_assert_cmpuint(ev->addr, ==, 0);
                g_assert_cmpuint(ev->device, ==, 0);
                g_assert_cmpuint(ev->stack, ==, 0);
                g_assert_cmpstr(ev->label, ==, want.label);
            }
        }
        fsim_binary_set_window(0);
        g_assert_no_error(error);
        g_assert_cmpuint(i, ==, n);
    }
    fsim_test_remove_tree(dir);
}

/* The CLI: convert --format binary, synth to a .fsb path, and info/replay reading them. */
static void
test_cli(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *text = fsim_test_trace_path("ok-design-example.trace");
    g_autofree char *binary = NULL;
    g_autofree char *synth = NULL;
    g_autofree char *back = NULL;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    binary = g_build_filename(dir, "design.bin", NULL);
    synth = g_build_filename(dir, "random.fsb", NULL);
    back = g_build_filename(dir, "back.trace", NULL);
    {
        g_auto(FsimTestRun) run =
            fsim_test_run("convert", text, binary, "--format", "binary", NULL);

        g_assert_cmpint(run.status, ==, 0);
    }
    {
        g_auto(FsimTestRun) run = fsim_test_run("info", binary, NULL);

        g_assert_cmpint(run.status, ==, 0);
        g_assert_nonnull(strstr(run.out, "binary trace"));
    }
    {
        g_auto(FsimTestRun) run = fsim_test_run("convert", binary, back, NULL);
        g_autoptr(GError) error = NULL;
        g_autofree char *want = render(text, &error);
        g_autofree char *got = render(back, &error);

        g_assert_cmpint(run.status, ==, 0);
        g_assert_cmpstr(got, ==, want);
    }
    {
        g_auto(FsimTestRun) run = fsim_test_run("convert", text, binary, "--format", "pdf", NULL);

        g_assert_cmpint(run.status, ==, 2);
    }
    {
        g_auto(FsimTestRun) run =
            fsim_test_run("synth", "random", "--events", "2000", "-o", synth, "--quiet", NULL);
        g_autoptr(FsimTrace) trace = NULL;
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimTraceInfo) info = NULL;

        g_assert_cmpint(run.status, ==, 0);
        trace = fsim_trace_open(synth, &error);
        g_assert_no_error(error);
        g_assert_cmpstr(fsim_trace_format_name(trace), ==, "binary");
        info = fsim_trace_describe(trace, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(g_array_index(info->devices, FsimTraceDeviceInfo, 0).events, ==, 2000);
    }
    {
        g_auto(FsimTestRun) run = fsim_test_run("replay", synth, "-p", "caching", "--json", NULL);

        g_assert_cmpint(run.status, ==, 0);
    }
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    static const char *const round_trips[] = {
        "ok-design-example.trace", "ok-comments-crlf.trace", "ok-deferred.trace",
        "ok-pools.trace",          "ok-gzip.trace.gz",
    };

    g_test_init(&argc, &argv, NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(round_trips); i++) {
        g_autofree char *name = g_strdup_printf("/reader/binary/round-trip/%s", round_trips[i]);

        g_test_add_data_func(name, round_trips[i], test_round_trip);
    }
    g_test_add_func("/reader/binary/sample", test_sample);
    g_test_add_func("/reader/binary/every-field", test_every_field);
    g_test_add_func("/reader/binary/bad/truncated", test_truncated);
    g_test_add_func("/reader/binary/bad/checksum", test_checksum);
    for (gsize i = 0; i < G_N_ELEMENTS(bad_records); i++) {
        g_autofree char *name = g_strdup_printf("/reader/binary/bad/%s", bad_records[i].name);

        g_test_add_data_func(name, &bad_records[i], test_bad_record);
    }
    g_test_add_func("/reader/binary/bad/header", test_bad_header);
    g_test_add_func("/reader/binary/duplicate-refused-by-engine", test_duplicate_refused_by_engine);
    g_test_add_func("/reader/binary/gzip", test_gzip);
    g_test_add_func("/reader/binary/shrunk-while-read", test_shrunk_while_read);
    g_test_add_func("/writer/binary/refuses", test_writer_refuses);
    g_test_add_func("/cli/binary", test_cli);
    return g_test_run();
}
