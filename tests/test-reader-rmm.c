/* SPDX-License-Identifier: MIT */
/*
 * The RMM log reader (src/readers/rmm-csv.c): hand-written logs in tests/data/traces/
 * (ok-rmm-*, bad-rmm-*), checked event by event; bad logs fail with the expected code and line.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <json-glib/json-glib.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "test-util.h"

typedef struct {
    FsimTime time;
    uint64_t index;
    FsimEventKind kind;
    uint64_t id;
    uint64_t size;
    uint64_t stream;
    FsimAddr addr;
} Expected;

static void
check_events(FsimTrace *trace, const Expected *expected, gsize n)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTraceStream) stream = fsim_trace_stream_open(trace, 0, &error);
    FsimEvent ev;
    gsize i = 0;

    g_assert_no_error(error);
    while (fsim_trace_stream_next(stream, &ev, &error)) {
        g_test_message("event %" G_GSIZE_FORMAT, i);
        g_assert_cmpuint(i, <, n);
        g_assert_cmpuint(ev.time, ==, expected[i].time);
        g_assert_cmpuint(ev.index, ==, expected[i].index);
        g_assert_cmpint(ev.kind, ==, expected[i].kind);
        g_assert_cmpuint(ev.id, ==, expected[i].id);
        g_assert_cmpuint(ev.size, ==, expected[i].size);
        g_assert_cmpuint(ev.stream, ==, expected[i].stream);
        g_assert_cmpuint(ev.addr, ==, expected[i].addr);
        g_assert_cmpuint(ev.device, ==, 0);
        g_assert_cmpuint(ev.flags, ==, 0);
        i++;
    }
    g_assert_no_error(error);
    g_assert_cmpuint(i, ==, n);
}

static void
check_basic(const char *name)
{
    static const Expected expected[] = {
        {0, 2, FSIM_EV_ALLOC, 1, 1024, 0, 0x7f8a40000000},
        {500000, 3, FSIM_EV_ALLOC, 2, 2048, 0x7f8a38001020, 0x7f8a40000400},
        /* past midnight: a day is added */
        {1100000, 4, FSIM_EV_FREE, 1, 0, 0, 0},
        /* the pointer is reused: a fresh id */
        {1200000, 5, FSIM_EV_ALLOC, 3, 512, 0, 0x7f8a40000000},
        /* line 6, an allocate failure, is an outcome (and its time went backwards) */
        {1300000, 7, FSIM_EV_FREE, 2, 0, 0x7f8a38001020, 0},
        /* an unknown pointer: a fresh id, counted by the engine as unmatched */
        {1400000, 8, FSIM_EV_FREE, 4, 0, 0, 0},
        /* line 9 (unknown action), 10 (zero bytes) and 11 (free of (nil)): skipped */
    };
    g_autofree char *path = fsim_test_trace_path(name);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);
    g_autoptr(FsimTraceInfo) info = NULL;
    const FsimTraceDeviceInfo *dev;
    const FsimOutcome *outcomes;
    gsize n;

    g_assert_no_error(error);
    g_assert_cmpstr(fsim_trace_format_name(trace), ==, "rmm");
    fsim_trace_devices(trace, &n);
    g_assert_cmpuint(n, ==, 1);
    check_events(trace, expected, G_N_ELEMENTS(expected));
    outcomes = fsim_trace_outcomes(trace, 0, &n);
    g_assert_cmpuint(n, ==, 1);
    g_assert_cmpint(outcomes[0].kind, ==, FSIM_OUTCOME_OOM);
    g_assert_cmpuint(outcomes[0].index, ==, 6);
    g_assert_cmpuint(outcomes[0].size, ==, G_GUINT64_CONSTANT(8589934592));
    g_assert_cmpuint(outcomes[0].addr, ==, 0);
    g_assert_null(fsim_trace_initial_state(trace, 0));

    info = fsim_trace_describe(trace, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(info->devices->len, ==, 1);
    dev = &g_array_index(info->devices, FsimTraceDeviceInfo, 0);
    g_assert_cmpuint(dev->events, ==, 10);
    g_assert_cmpuint(dev->actions->len, ==, 4);
    g_assert_cmpuint(fsim_test_action_count(dev, "allocate"), ==, 4);
    g_assert_cmpuint(fsim_test_action_count(dev, "free"), ==, 4);
    g_assert_cmpuint(fsim_test_action_count(dev, "allocate failure"), ==, 1);
    g_assert_cmpuint(fsim_test_action_count(dev, "reallocate"), ==, 1);
    g_assert_cmpuint(dev->streams, ==, 2);
    g_assert_cmpuint(dev->allocs, ==, 3);
    g_assert_cmpuint(dev->segments, ==, 0);
    g_assert_null(info->alloc_conf);
}

static void
test_basic(void)
{
    check_basic("ok-rmm-basic.csv");
}

static void
test_gzip(void)
{
    check_basic("ok-rmm-basic.csv.gz");
}

/* Columns in another order, padded with spaces, CRLF, a blank line, times in epoch seconds. */
static void
test_epoch(void)
{
    static const Expected expected[] = {
        {0, 2, FSIM_EV_ALLOC, 1, 4096, 2, 0x1000},
        {0, 4, FSIM_EV_ALLOC, 2, 100, 2, 0x3000}, /* back in time: clamped */
        {500001000, 5, FSIM_EV_FREE, 1, 0, 2, 0},
    };
    g_autofree char *path = fsim_test_trace_path("ok-rmm-epoch.csv");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);

    g_assert_no_error(error);
    g_assert_cmpstr(fsim_trace_format_name(trace), ==, "rmm");
    check_events(trace, expected, G_N_ELEMENTS(expected));
}

static void
test_empty(void)
{
    g_autofree char *path = fsim_test_trace_path("ok-rmm-empty.csv");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);
    gsize n;

    g_assert_no_error(error);
    check_events(trace, NULL, 0);
    fsim_trace_outcomes(trace, 0, &n);
    g_assert_cmpuint(n, ==, 0);
}

typedef struct {
    const char *name;
    FsimTraceError code;
    guint line;
} Bad;

static const Bad bad_logs[] = {
    {"bad-rmm-missing-column.csv", FSIM_TRACE_ERROR_HEADER, 1},
    {"bad-rmm-hex.csv", FSIM_TRACE_ERROR_NUMBER, 3},
    {"bad-rmm-stream.csv", FSIM_TRACE_ERROR_NUMBER, 2},
    {"bad-rmm-size.csv", FSIM_TRACE_ERROR_NUMBER, 3},
    {"bad-rmm-fields.csv", FSIM_TRACE_ERROR_SYNTAX, 4},
    {"bad-rmm-time.csv", FSIM_TRACE_ERROR_NUMBER, 2},
    {"bad-rmm-absurd.csv", FSIM_TRACE_ERROR_SIZE, 2},
};

static void
test_bad(gconstpointer data)
{
    const Bad *bad = data;
    g_autofree char *path = fsim_test_trace_path(bad->name);
    g_autofree char *prefix = g_strdup_printf("%s:%u: ", path, bad->line);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTrace) trace = fsim_trace_open(path, &error);

    g_assert_null(trace);
    g_assert_error(error, FSIM_TRACE_ERROR, (int)bad->code);
    g_test_message("%s", error->message);
    g_assert_true(g_str_has_prefix(error->message, prefix));
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

/* Blank rows are skipped in bulk (eight newlines at a time), across buffer refills, plain and
 * compressed: the line numbers of what follows them stay exact.  @pattern is the kind of run:
 * 0 mixes LF and CRLF, 1 is LF only with an odd count, 2 ends runs of 7 LFs with a space row. */
static void
test_blank_runs(gconstpointer pattern)
{
    static const char *const names[] = {"blank.csv", "blank.csv.gz"};
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-rmm-XXXXXX", &error);
    g_autoptr(GString) text =
        g_string_new("Thread,Time,Action,Pointer,Size,Stream\n"
                     "1,13:05:42.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\n");
    int runs = GPOINTER_TO_INT(pattern);
    int n = runs == 1 ? 400001 : 400000;

    for (int i = 0; i < n; i++)
        g_string_append(text, runs == 0 && i % 4 == 0   ? "\r\n"
                              : runs == 2 && i % 8 == 7 ? " \n"
                                                        : "\n");
    g_string_append(text, "  \n1,13:05:42.123502,free,0x7f8a4zz,1024,0x7f8a38001020\n");
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *path = g_build_filename(dir, names[i], NULL);
        g_autofree char *where = g_strdup_printf("%s:%d: ", path, n + 4);
        g_autoptr(FsimTrace) trace = NULL;

        write_maybe_gz(path, text);
        trace = fsim_trace_open(path, &error);
        g_assert_null(trace);
        g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_NUMBER);
        if (!g_str_has_prefix(error->message, where))
            g_error("expected '%s...', got '%s'", where, error->message);
        g_clear_error(&error);
        g_unlink(path);
    }
    g_rmdir(dir);
}

/* A gzip-compressed log cut short, or whose checksum does not match, is refused with an I/O
 * error naming the file, whichever decompressor fragsim is built with. */
static void
test_gzip_damaged(void)
{
    g_autofree char *source = fsim_test_trace_path("ok-rmm-basic.csv.gz");
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-rmm-XXXXXX", &error);
    g_autofree char *path = g_build_filename(dir, "damaged.csv.gz", NULL);
    g_autofree char *prefix = g_strdup_printf("%s: ", path);
    g_autofree char *data = NULL;
    gsize len;

    g_assert_true(g_file_get_contents(source, &data, &len, &error));
    g_assert_cmpuint(len, >, 24);
    for (int damage = 0; damage < 3; damage++) {
        g_autoptr(FsimTrace) trace = NULL;

        if (damage == 1)
            data[len - 6] ^= 0x55; /* the CRC-32 of the trailer */
        else if (damage == 2)
            data[len - 2] ^= 0x01; /* the length of the trailer */
        g_assert_true(
            g_file_set_contents(path, data, damage == 0 ? (gssize)len - 12 : (gssize)len, &error));
        trace = fsim_trace_open(path, &error);
        g_assert_null(trace);
        g_assert_error(error, FSIM_ERROR, FSIM_ERROR_IO);
        g_test_message("%s", error->message);
        g_assert_true(g_str_has_prefix(error->message, prefix));
        g_clear_error(&error);
        if (damage == 1)
            data[len - 6] ^= 0x55;
    }
    g_unlink(path);
    g_rmdir(dir);
}

static void
test_cli(void)
{
    g_autofree char *path = fsim_test_trace_path("ok-rmm-basic.csv");
    g_autofree char *bad = fsim_test_trace_path("bad-rmm-hex.csv");
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-rmm-XXXXXX", &error);
    g_autofree char *text = g_build_filename(dir, "basic.trace", NULL);
    g_auto(FsimTestRun) run = {0};
    g_autofree char *converted = NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *dev;
    JsonObject *actions;

    g_assert_no_error(error);
    if (!fsim_test_have_binary())
        return;
    run = fsim_test_run("info", "--json", path, NULL);
    g_assert_cmpint(run.status, ==, 0);
    dev = json_array_get_object_element(
        json_object_get_array_member(fsim_test_parse_object(parser, run.out), "devices"), 0);
    actions = json_object_get_object_member(dev, "actions");
    g_assert_cmpint(json_object_get_int_member(dev, "events"), ==, 10);
    g_assert_cmpint(json_object_get_int_member(actions, "allocate failure"), ==, 1);
    g_assert_cmpint(json_object_get_int_member(actions, "allocate"), ==, 4);

    fsim_test_run_clear(&run);
    run = fsim_test_run("convert", path, text, NULL);
    g_assert_cmpint(run.status, ==, 0);
    g_file_get_contents(text, &converted, NULL, &error);
    g_assert_no_error(error);
    g_assert_nonnull(strstr(converted, "\n0 alloc 1 1024 0\n"));
    g_assert_nonnull(strstr(converted, "\n1100000 free 1 0\n"));
    g_assert_nonnull(strstr(converted, "\n1300000 free 2 140231621742624\n"));
    g_unlink(text);
    g_rmdir(dir);

    /* Bad input: exit status 1, nothing on stdout. */
    fsim_test_run_clear(&run);
    run = fsim_test_run("info", "--json", bad, NULL);
    g_assert_cmpint(run.status, ==, 1);
    g_assert_cmpstr(run.out, ==, "");
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/reader/rmm/basic", test_basic);
    g_test_add_func("/reader/rmm/gzip", test_gzip);
    g_test_add_func("/reader/rmm/epoch", test_epoch);
    g_test_add_func("/reader/rmm/empty", test_empty);
    for (gsize i = 0; i < G_N_ELEMENTS(bad_logs); i++) {
        g_autofree char *name = g_strdup_printf("/reader/rmm/bad/%s", bad_logs[i].name);

        g_test_add_data_func(name, &bad_logs[i], test_bad);
    }
    g_test_add_data_func("/reader/rmm/blank-runs/mixed", GINT_TO_POINTER(0), test_blank_runs);
    g_test_add_data_func("/reader/rmm/blank-runs/lf", GINT_TO_POINTER(1), test_blank_runs);
    g_test_add_data_func("/reader/rmm/blank-runs/space", GINT_TO_POINTER(2), test_blank_runs);
    g_test_add_func("/reader/rmm/gzip-damaged", test_gzip_damaged);
    g_test_add_func("/reader/rmm/cli", test_cli);
    return g_test_run();
}
