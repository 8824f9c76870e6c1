/* SPDX-License-Identifier: MIT */
/*
 * The text format reader and writer: a corpus of good files that must parse to known events, and
 * of bad files that must fail with a known code on a known line (json-glib style); the writer's
 * round trip, gzip included; and the writer never leaving a partial file behind.
 */
/* symlink() */
#define _XOPEN_SOURCE 700

#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fragsim/fragsim.h"

#include "readers/id-set.h"
#include "readers/readers.h"
#include "test-util.h"

/* Render a whole trace as one line per event, for comparison. */
static char *
render_trace(const char *path, GError **error)
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
        g_string_append_printf(out, "%" G_GUINT64_FORMAT "@%" G_GUINT64_FORMAT " %s", ev.index,
                               ev.time, fsim_event_kind_name(ev.kind));
        if (ev.kind == FSIM_EV_ALLOC)
            g_string_append_printf(
                out, " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " s%" G_GUINT64_FORMAT, ev.id,
                ev.size, ev.stream);
        else if (ev.kind == FSIM_EV_FREE || ev.kind == FSIM_EV_FREE_COMPLETED)
            g_string_append_printf(out, " %" G_GUINT64_FORMAT " s%" G_GUINT64_FORMAT "%s", ev.id,
                                   ev.stream, (ev.flags & FSIM_EVF_DEFERRED) ? " deferred" : "");
        else if (ev.kind == FSIM_EV_MARK)
            g_string_append_printf(out, " [%s]", ev.label);
        else if (ev.kind == FSIM_EV_POOL_BEGIN || ev.kind == FSIM_EV_POOL_END)
            g_string_append_printf(out, " %" G_GUINT64_FORMAT " s%" G_GUINT64_FORMAT, ev.id,
                                   ev.stream);
        else if (ev.kind == FSIM_EV_POOL_RELEASE)
            g_string_append_printf(out, " %" G_GUINT64_FORMAT, ev.id);
        if (ev.flags & FSIM_EVF_RECORDED_OOM)
            g_string_append(out, " recorded-oom");
        if (ev.flags & FSIM_EVF_INFERRED)
            g_string_append(out, " inferred");
        g_string_append_c(out, '\n');
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return NULL;
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

typedef struct {
    const char *file;
    const char *expected;
} OkCase;

static const OkCase ok_cases[] = {
    {"ok-design-example.trace", "3@0 alloc 1 1048576 s0\n"
                                "4@1500 alloc 2 20971520 s0\n"
                                "5@2000 free 1 s0\n"
                                "6@2000 free_completed 1 s0\n"
                                "7@9000 mark [step-1]\n"
                                "8@9100 empty_cache\n"},
    {"ok-comments-crlf.trace", "4@0 alloc 7 4096 s3\n"
                               "6@10 free 7 s3\n"
                               "7@20 mark [phase two # kept in the label]\n"},
    {"ok-deferred.trace", "2@0 alloc 1 1000 s0\n"
                          "3@1 alloc 2 2000 s5\n"
                          "4@2 free 1 s0 deferred\n"
                          "5@3 alloc 3 3000 s5\n"
                          "6@4 free_completed 1 s0\n"
                          "7@5 free 2 s5\n"
                          "8@6 free 3 s5\n"
                          "9@7 free 99 s0\n"},
    {"ok-gzip.trace.gz", "2@0 alloc 1 100 s0\n"},
    {"ok-pools.trace", "3@0 pool_begin 7 s3\n"
                       "4@1 alloc 1 4096 s3\n"
                       "5@2 pool_end 7 s3\n"
                       "6@3 pool_begin 8 s0\n"
                       "7@4 pool_end 8 s0\n"
                       "8@5 pool_release 7\n"},
};

static void
test_ok(gconstpointer data)
{
    const OkCase *c = data;
    g_autofree char *path = fsim_test_trace_path(c->file);
    g_autoptr(GError) error = NULL;
    g_autofree char *rendered = render_trace(path, &error);

    g_assert_no_error(error);
    g_assert_cmpstr(rendered, ==, c->expected);
}

typedef struct {
    const char *file;
    GQuark (*domain)(void);
    int code;
    int line; /* 0: the message names no line */
} BadCase;

static const BadCase bad_cases[] = {
    {"bad-empty.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_EMPTY, 0},
    {"bad-not-a-trace.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_HEADER, 1},
    {"bad-version.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_HEADER, 1},
    {"bad-header-trailing.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_HEADER, 1},
    {"bad-number.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_NUMBER, 3},
    {"bad-negative.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_NUMBER, 2},
    {"bad-zero-size.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_SIZE, 3},
    {"bad-absurd-size.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_SIZE, 2},
    {"bad-overflow.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_NUMBER, 2},
    {"bad-duplicate.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_DUPLICATE, 4},
    {"bad-time-backwards.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_TIME, 3},
    {"bad-time.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_NUMBER, 2},
    {"bad-kind.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_KIND, 3},
    {"bad-missing-size.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_SYNTAX, 2},
    {"bad-missing-kind.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_SYNTAX, 2},
    {"bad-extra-field.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_SYNTAX, 2},
    {"bad-stream.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_NUMBER, 2},
    {"bad-nul.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_SYNTAX, 2},
    {"bad-pool-zero.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_NUMBER, 2},
    {"bad-pool-release-stream.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_SYNTAX, 2},
    {"bad-pool-missing.trace", fsim_trace_error_quark, FSIM_TRACE_ERROR_SYNTAX, 2},
};

static void
test_bad(gconstpointer data)
{
    const BadCase *c = data;
    g_autofree char *path = fsim_test_trace_path(c->file);
    g_autoptr(GError) error = NULL;
    g_autofree char *rendered = render_trace(path, &error);

    g_assert_null(rendered);
    g_assert_error(error, c->domain(), c->code);
    /* Every message names the file, and the line where there is one. */
    g_assert_true(g_str_has_prefix(error->message, path));
    if (c->line > 0) {
        g_autofree char *where = g_strdup_printf("%s:%d: ", path, c->line);

        if (!g_str_has_prefix(error->message, where))
            g_error("expected '%s' at the start of '%s'", where, error->message);
    }
}

static void
test_missing_file(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open("/nonexistent/dir/x.trace", &error);

    g_assert_null(trace);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "/nonexistent/dir/x.trace"));
}

static void
test_directory(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_test_build_filename(G_TEST_DIST, "data", NULL);
    g_autoptr(FsimTrace) trace = fsim_trace_open(dir, &error);

    g_assert_null(trace);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_IO);
}

/* A pipe (cat t | fragsim replay /dev/stdin): refused by name before anything is read, since
 * the first pass would consume what the next needs (it used to fail as "not a trace" or on some
 * later line, depending on how much the probe read). */
static void
test_pipe(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-pipe-XXXXXX", &error);
    g_autofree char *fifo = NULL;
    g_autoptr(FsimTrace) trace = NULL;

    g_assert_no_error(error);
    fifo = g_build_filename(dir, "trace", NULL);
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    trace = fsim_trace_open(fifo, &error);
    g_assert_null(trace);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_assert_nonnull(strstr(error->message, fifo));
    g_assert_nonnull(strstr(error->message, "pipe"));
    g_unlink(fifo);
    g_rmdir(dir);
}

static void
write_events(FsimTraceWriter *writer, GError **error)
{
    FsimEvent events[] = {
        {.time = 0, .kind = FSIM_EV_ALLOC, .id = 1, .size = 100, .stream = 0},
        {.time = 5, .kind = FSIM_EV_ALLOC, .id = 2, .size = FSIM_MAX_SIZE, .stream = 7},
        {.time = 6, .kind = FSIM_EV_FREE, .id = 1, .flags = FSIM_EVF_DEFERRED},
        {.time = 7, .kind = FSIM_EV_FREE_COMPLETED, .id = 1},
        {.time = 8, .kind = FSIM_EV_MARK, .label = "iteration 1\nwith a newline"},
        {.time = 9, .kind = FSIM_EV_EMPTY_CACHE},
        {.time = 9, .kind = FSIM_EV_EMPTY_CACHE, .flags = FSIM_EVF_INFERRED},
        {.time = 9, .kind = FSIM_EV_ALLOC, .id = 3, .size = 7, .flags = FSIM_EVF_RECORDED_OOM},
        {.time = 9, .kind = FSIM_EV_FREE, .id = 3, .flags = FSIM_EVF_RECORDED_OOM},
        {.time = 10, .kind = FSIM_EV_POOL_BEGIN, .id = 4, .stream = 7},
        {.time = 10, .kind = FSIM_EV_POOL_END, .id = 4, .stream = 7},
        {.time = 11, .kind = FSIM_EV_POOL_RELEASE, .id = G_MAXUINT64},
        {.time = G_MAXUINT64, .kind = FSIM_EV_FREE, .id = 2, .stream = 7},
    };

    g_assert_true(fsim_trace_writer_comment(writer, "a comment\nover two lines", error));
    for (gsize i = 0; i < G_N_ELEMENTS(events); i++)
        g_assert_true(fsim_trace_writer_write(writer, &events[i], error));
}

static void
test_writer_round_trip(gconstpointer data)
{
    const char *suffix = data;
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-XXXXXX", &error);
    g_autofree char *path = g_strdup_printf("%s/out.trace%s", dir, suffix);
    g_autoptr(FsimTraceWriter) writer = fsim_trace_writer_open(path, &error);
    g_autofree char *rendered = NULL;

    g_assert_no_error(error);
    write_events(writer, &error);
    g_assert_no_error(error);
    /* Nothing at the final path until close succeeds. */
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
    g_assert_true(fsim_trace_writer_close(g_steal_pointer(&writer), &error));
    g_assert_no_error(error);
    rendered = render_trace(path, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(rendered, ==,
                    "4@0 alloc 1 100 s0\n"
                    "5@5 alloc 2 1152921504606846976 s7\n"
                    "6@6 free 1 s0 deferred\n"
                    "7@7 free_completed 1 s0\n"
                    "8@8 mark [iteration 1 with a newline]\n"
                    "9@9 empty_cache\n"
                    "10@9 empty_cache inferred\n"
                    "11@9 alloc 3 7 s0 recorded-oom\n"
                    "12@9 free 3 s0 recorded-oom\n"
                    "13@10 pool_begin 4 s7\n"
                    "14@10 pool_end 4 s7\n"
                    "15@11 pool_release 18446744073709551615\n"
                    "16@18446744073709551615 free 2 s7\n");
    g_unlink(path);
    g_rmdir(dir);
}

static void
test_writer_abort_leaves_nothing(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-XXXXXX", &error);
    g_autofree char *path = g_build_filename(dir, "out.trace", NULL);
    FsimTraceWriter *writer = fsim_trace_writer_open(path, &error);
    g_autoptr(GDir) listing = NULL;

    g_assert_no_error(error);
    write_events(writer, &error);
    fsim_trace_writer_abort(writer);
    listing = g_dir_open(dir, 0, &error);
    g_assert_no_error(error);
    g_assert_null(g_dir_read_name(listing));
    g_rmdir(dir);
}

/* Writing through a symbolic link replaces the file it names and keeps the link. */
static void
test_writer_symlink(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-XXXXXX", &error);
    g_autofree char *real = g_build_filename(dir, "real.trace", NULL);
    g_autofree char *link = g_build_filename(dir, "link.trace", NULL);
    g_autoptr(FsimTraceWriter) writer = NULL;
    g_autofree char *rendered = NULL;

    g_assert_true(g_file_set_contents(real, "old", -1, &error));
    g_assert_cmpint(symlink("real.trace", link), ==, 0);
    writer = fsim_trace_writer_open(link, &error);
    g_assert_no_error(error);
    write_events(writer, &error);
    g_assert_true(fsim_trace_writer_close(g_steal_pointer(&writer), &error));
    g_assert_no_error(error);
    g_assert_true(g_file_test(link, G_FILE_TEST_IS_SYMLINK));
    rendered = render_trace(real, &error);
    g_assert_no_error(error);
    g_assert_true(g_str_has_prefix(rendered, "4@0 alloc 1 100 s0\n"));
    g_unlink(link);
    g_unlink(real);
    g_rmdir(dir);
}

/* Render @path, or its error with the path taken out. */
static char *
render_or_error(const char *path)
{
    g_autoptr(GError) error = NULL;
    char *rendered = render_trace(path, &error);

    if (rendered != NULL)
        return rendered;
    g_assert_true(g_str_has_prefix(error->message, path));
    return g_strdup_printf("error %d: %s", error->code, error->message + strlen(path));
}

/* gzip @data into @path. */
static void
write_gzip(const char *path, const char *data, gsize len)
{
    g_autoptr(GZlibCompressor) compressor = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 1);
    g_autoptr(GError) error = NULL;
    gsize out_len = len + len / 2 + 1024;
    g_autofree guint8 *out = g_malloc(out_len);
    gsize read = 0;
    gsize written = 0;

    g_assert_cmpint(g_converter_convert(G_CONVERTER(compressor), data, len, out, out_len,
                                        G_CONVERTER_INPUT_AT_END, &read, &written, &error),
                    ==, G_CONVERTER_FINISHED);
    g_assert_true(g_file_set_contents(path, (const char *)out, (gssize)written, &error));
}

/* A plain file is mapped and its common lines scanned by the fast path; a gzip-compressed one is
 * streamed through the general parser.  Both must give the same events and the same errors. */
static void
assert_mapped_equals_streamed(const char *contents, gsize len)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *plain = g_build_filename(dir, "t.trace", NULL);
    g_autofree char *gz = g_build_filename(dir, "t.trace.gz", NULL);
    g_autofree char *from_plain = NULL;
    g_autofree char *from_gz = NULL;

    g_assert_true(g_file_set_contents(plain, contents, (gssize)len, NULL));
    write_gzip(gz, contents, len);
    from_plain = render_or_error(plain);
    from_gz = render_or_error(gz);
    g_assert_cmpstr(from_plain, ==, from_gz);
    fsim_test_remove_tree(dir);
}

static void
test_mapped_equals_streamed(void)
{
    static const char *const lines[] = {
        "alloc 1 4096",
        "alloc 2 4096 3",
        "free 1",
        "free 2 3",
        "free_requested 1 0",
        "free_completed 1 0",
        "alloc 1 1152921504606846976 0",
        "alloc 1 1152921504606846977 0",
        "alloc 1 0 0",
        "alloc\t1\t100\t\t7  ",
        "free 1 0 recorded_oom",
        "alloc 5 10 0 # c",
        "mark step",
        "empty_cache",
        "freeze 1",
        "free_x 1",
        "alloc 99999999999999999999 1",
        "alloc 9999999999999999999 1",
        "alloc 1 2 3 4",
        "alloc 18446744073709551615 1 0",
        "free 00000000000000000001",
        "alloc -1 5",
        "alloc 1 5\r",
        "alloc 1 5 x",
    };
    g_autoptr(GRand) rand = g_rand_new_with_seed(14);

    /* Each fixture, as it is. */
    for (gsize i = 0; i < G_N_ELEMENTS(ok_cases) + G_N_ELEMENTS(bad_cases); i++) {
        const char *file = i < G_N_ELEMENTS(ok_cases) ? ok_cases[i].file
                                                      : bad_cases[i - G_N_ELEMENTS(ok_cases)].file;
        g_autofree char *path = fsim_test_trace_path(file);
        g_autofree char *contents = NULL;
        gsize len = 0;

        if (g_str_has_suffix(file, ".gz"))
            continue;
        g_assert_true(g_file_get_contents(path, &contents, &len, NULL));
        assert_mapped_equals_streamed(contents, len);
    }
    /* Random mixes of common and odd lines, with and without a last newline. */
    for (int round = 0; round < 200; round++) {
        g_autoptr(GString) text = g_string_new("fragsim-trace v1\n");
        int n = g_rand_int_range(rand, 1, 12);
        uint64_t time = 0;

        for (int i = 0; i < n; i++) {
            time += (uint64_t)g_rand_int_range(rand, 0, 3);
            if (g_rand_int_range(rand, 0, 8) == 0 && time > 0)
                time--; /* sometimes backwards */
            g_string_append_printf(text, "%" G_GUINT64_FORMAT " %s", time,
                                   lines[g_rand_int_range(rand, 0, G_N_ELEMENTS(lines))]);
            if (i + 1 < n || g_rand_boolean(rand))
                g_string_append_c(text, '\n');
        }
        assert_mapped_equals_streamed(text->str, text->len);
    }
}

static void
test_writer_unwritable(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTraceWriter) writer =
        fsim_trace_writer_open("/nonexistent/dir/out.trace", &error);

    g_assert_null(writer);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_IO);
    g_assert_nonnull(strstr(error->message, "/nonexistent/dir/out.trace"));
}

/* Every prefix of a valid trace is either valid or fails cleanly: never a crash or a hang. */
static void
test_truncated_prefixes(void)
{
    g_autofree char *source = fsim_test_trace_path("ok-design-example.trace");
    g_autofree char *contents = NULL;
    gsize length = 0;
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-XXXXXX", &error);
    g_autofree char *path = g_build_filename(dir, "prefix.trace", NULL);

    g_assert_true(g_file_get_contents(source, &contents, &length, &error));
    for (gsize n = 0; n <= length; n++) {
        g_autoptr(GError) local_error = NULL;
        g_autofree char *rendered = NULL;

        g_assert_true(g_file_set_contents(path, contents, (gssize)n, &error));
        rendered = render_trace(path, &local_error);
        g_assert_true((rendered == NULL) != (local_error == NULL));
    }
    g_unlink(path);
    g_rmdir(dir);
}

/* Writes @text to @path, gzip-compressed when @path ends in .gz. */
static void
write_maybe_gz(const char *path, const GString *text)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GFile) file = g_file_new_for_path(path);
    g_autoptr(GFileOutputStream) raw =
        g_file_replace(file, NULL, FALSE, G_FILE_CREATE_NONE, NULL, &error);
    g_autoptr(GOutputStream) out = NULL;

    g_assert_no_error(error);
    if (g_str_has_suffix(path, ".gz")) {
        g_autoptr(GZlibCompressor) z = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 1);

        out = g_converter_output_stream_new(G_OUTPUT_STREAM(raw), G_CONVERTER(z));
    } else {
        out = g_object_ref(G_OUTPUT_STREAM(raw));
    }
    g_assert_true(g_output_stream_write_all(out, text->str, text->len, NULL, NULL, &error));
    g_assert_true(g_output_stream_close(out, NULL, &error));
    g_assert_no_error(error);
}

/* Comment and blank lines are skipped in bulk, across buffer refills, plain and compressed: the
 * line numbers of what follows them stay exact. */
static void
test_blank_and_comment_runs(void)
{
    static const char *const names[] = {"runs.trace", "runs.trace.gz"};
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-XXXXXX", &error);
    g_autoptr(GString) text = g_string_new("fragsim-trace v1\n0 alloc 1 4096 0\n");

    for (int i = 0; i < 100000; i++)
        g_string_append(text, "# a comment\n");
    for (int i = 0; i < 200000; i++)
        g_string_append(text, i % 2 == 0 ? "\n" : "\r\n");
    g_string_append(text, "#\n \n\t# indented\n10 free 1 0\n20 bogus\n");
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *path = g_build_filename(dir, names[i], NULL);
        g_autofree char *rendered = NULL;
        g_autofree char *where = g_strdup_printf("%s:300007: ", path);

        write_maybe_gz(path, text);
        rendered = render_trace(path, &error);
        g_assert_null(rendered);
        g_assert_nonnull(error);
        if (!g_str_has_prefix(error->message, where))
            g_error("expected '%s...', got '%s'", where, error->message);
        g_clear_error(&error);
        g_unlink(path);
    }
    g_rmdir(dir);
}

/* A long line is refused with a limit error, not read into unbounded memory. */
static void
test_long_line(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-XXXXXX", &error);
    g_autofree char *path = g_build_filename(dir, "long.trace", NULL);
    g_autoptr(GString) text = g_string_new("fragsim-trace v1\n0 mark ");
    g_autofree char *rendered = NULL;

    for (int i = 0; i < 2 * 1024 * 1024; i++)
        g_string_append_c(text, 'x');
    g_assert_true(g_file_set_contents(path, text->str, (gssize)text->len, &error));
    rendered = render_trace(path, &error);
    g_assert_null(rendered);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT);
    g_unlink(path);
    g_rmdir(dir);
}

/* @len bytes of @data through @converter, called until it finishes, as a converter stream would:
 * the bytes written, or NULL with @error. */
static GBytes *
convert_all(GConverter *converter, const guint8 *data, gsize len, GError **error)
{
    gsize out_len = len * 4 + 1024;
    g_autofree guint8 *out = g_malloc(out_len);
    gsize in_at = 0;
    gsize out_at = 0;
    GConverterResult result;

    do {
        gsize read = 0;
        gsize written = 0;

        result =
            g_converter_convert(converter, data + in_at, len - in_at, out + out_at,
                                out_len - out_at, G_CONVERTER_INPUT_AT_END, &read, &written, error);
        in_at += read;
        out_at += written;
    } while (result == G_CONVERTER_CONVERTED);
    return result == G_CONVERTER_FINISHED ? g_bytes_new(out, out_at) : NULL;
}

/* fragsim's zlib converters (src/readers/gzip-zlib.c) against GIO's: the same compressed bytes,
 * the round trip, and the same failures on truncated and corrupt input. */
static void
test_zlib_converters(void)
{
    g_autoptr(GString) text = g_string_new(NULL);
    g_autoptr(GZlibCompressor) gio = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 6);
    g_autoptr(GConverter) ours = fsim_gzip_compressor_new(6);
    g_autoptr(GConverter) inflater = fsim_zlib_gzip_decompressor_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) expected = NULL;
    g_autoptr(GBytes) compressed = NULL;
    g_autoptr(GBytes) plain = NULL;
    g_autoptr(GBytes) truncated = NULL;
    g_autofree guint8 *corrupt = NULL;
    const guint8 *data;
    gsize len;

    for (guint i = 0; i < 20000; i++)
        g_string_append_printf(text, "a %u 0x%x %u\n", i, i * 4096, (i * 7919) % 1000);
    expected = convert_all(G_CONVERTER(gio), (const guint8 *)text->str, text->len, &error);
    g_assert_no_error(error);
    compressed = convert_all(ours, (const guint8 *)text->str, text->len, &error);
    g_assert_no_error(error);
    g_assert_true(g_bytes_equal(compressed, expected));

    data = g_bytes_get_data(compressed, &len);
    plain = convert_all(inflater, data, len, &error);
    g_assert_no_error(error);
    g_assert_cmpmem(g_bytes_get_data(plain, NULL), g_bytes_get_size(plain), text->str, text->len);

    g_converter_reset(inflater);
    truncated = convert_all(inflater, data, len / 2, &error);
    g_assert_null(truncated);
    g_assert_error(error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT);
    g_assert_cmpstr(error->message, ==, "Need more input");
    g_clear_error(&error);

    g_converter_reset(inflater);
    corrupt = g_memdup2(data, len);
    memset(corrupt + 12, 0xff, 64);
    g_assert_null(convert_all(inflater, corrupt, len, &error));
    g_assert_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
    g_assert_cmpstr(error->message, ==, "Invalid compressed data");
}

/* The reader's set of live ids against a hash table: random adds, pending marks and removals
 * over ids that share a home group (so that groups fill and ids probe past them) and ids spread
 * out, through several growths. */
static void
test_id_set(void)
{
    FsimIdSet set;
    g_autoptr(GHashTable) model = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    GRand *rand = g_rand_new_with_seed(14);

    /* ids whose hash's top 7 bits are 0: one home group while the set has 128 groups */
    for (uint64_t id = 0; ids->len < 200; id++) {
        if ((id * UINT64_C(0x9E3779B97F4A7C15)) >> 57 == 0)
            g_array_append_val(ids, id);
    }
    for (guint i = 0; i < 3000; i++) {
        uint64_t id = ((uint64_t)g_rand_int(rand) << 32 | g_rand_int(rand)) >> (i % 64);

        g_array_append_val(ids, id);
    }
    fsim_id_set_init(&set);
    for (guint step = 0; step < 200000; step++) {
        guint limit = step < 100000 ? 200 : ids->len; /* the colliding ids alone, then all */
        uint64_t id = g_array_index(ids, uint64_t, g_rand_int_range(rand, 0, (gint32)limit));
        gpointer state = g_hash_table_lookup(model, &id);
        gsize slot = fsim_id_set_find(&set, id);

        g_assert_cmpint(fsim_id_set_state(&set, slot), ==, GPOINTER_TO_INT(state));
        if (state == NULL) {
            fsim_id_set_add(&set, id);
            g_hash_table_insert(model, g_memdup2(&id, sizeof(id)), GINT_TO_POINTER(FSIM_ID_LIVE));
        } else if (GPOINTER_TO_INT(state) == FSIM_ID_LIVE && g_rand_boolean(rand)) {
            fsim_id_set_set_pending(&set, slot);
            g_hash_table_insert(model, g_memdup2(&id, sizeof(id)),
                                GINT_TO_POINTER(FSIM_ID_PENDING));
        } else {
            fsim_id_set_remove(&set, slot);
            g_hash_table_remove(model, &id);
        }
        g_assert_cmpuint(set.count, ==, g_hash_table_size(model));
    }
    for (guint i = 0; i < ids->len; i++) {
        uint64_t id = g_array_index(ids, uint64_t, i);

        g_assert_cmpint(fsim_id_set_state(&set, fsim_id_set_find(&set, id)), ==,
                        GPOINTER_TO_INT(g_hash_table_lookup(model, &id)));
    }
    fsim_id_set_clear(&set);
    g_rand_free(rand);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/reader/gzip/zlib-converters", test_zlib_converters);
    for (gsize i = 0; i < G_N_ELEMENTS(ok_cases); i++) {
        g_autofree char *name = g_strdup_printf("/reader/text/ok/%s", ok_cases[i].file);

        g_test_add_data_func(name, &ok_cases[i], test_ok);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
        g_autofree char *name = g_strdup_printf("/reader/text/bad/%s", bad_cases[i].file);

        g_test_add_data_func(name, &bad_cases[i], test_bad);
    }
    g_test_add_func("/reader/text/bad/missing-file", test_missing_file);
    g_test_add_func("/reader/text/bad/directory", test_directory);
    g_test_add_func("/reader/text/pipe", test_pipe);
    g_test_add_func("/reader/text/bad/truncated-prefixes", test_truncated_prefixes);
    g_test_add_func("/reader/text/blank-and-comment-runs", test_blank_and_comment_runs);
    g_test_add_func("/reader/text/bad/long-line", test_long_line);
    g_test_add_func("/reader/text/mapped-equals-streamed", test_mapped_equals_streamed);
    g_test_add_func("/reader/text/id-set", test_id_set);
    g_test_add_data_func("/writer/text/round-trip", "", test_writer_round_trip);
    g_test_add_data_func("/writer/text/round-trip-gzip", ".gz", test_writer_round_trip);
    g_test_add_func("/writer/text/abort-leaves-nothing", test_writer_abort_leaves_nothing);
    g_test_add_func("/writer/text/unwritable", test_writer_unwritable);
    g_test_add_func("/writer/text/symlink", test_writer_symlink);
    return g_test_run();
}
