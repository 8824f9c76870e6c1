/* SPDX-License-Identifier: MIT */
/*
 * Tests of the safe unpickler and the pickle writer (src/readers/pickle/): every accepted
 * opcode from hand-written bytes, CPython's own output for protocols 0 to 5
 * (tests/data/pickle/gen-fixtures.py), every refused opcode, truncation at every offset, the
 * safety limits, refusal of recursive structures, writer round trips (through CPython too when
 * python3 is on PATH), and the shared real snapshots when FRAGSIM_SHARED_TRACES names their
 * directory.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <gio/gio.h>
#include <math.h>
#include <string.h>

#include "fragsim/types.h"

#include "readers/pickle.h"
#include "test-util.h"

/* ---- Helpers ------------------------------------------------------------------------------- */

#define B(literal) (const guint8 *)(literal), sizeof(literal) - 1

/* @data through fsim_pickle_load_stream(), gzip-compressed when @gzip. */
static FsimPickle *
load_stream(const guint8 *data, gsize len, gboolean gzip, const FsimPickleLimits *limits,
            GError **error)
{
    g_autoptr(GInputStream) in = g_memory_input_stream_new_from_data(data, (gssize)len, NULL);
    if (gzip) {
        g_autoptr(GZlibCompressor) compressor =
            g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 1);
        g_autoptr(GInputStream) compressed =
            g_converter_input_stream_new(in, G_CONVERTER(compressor));
        g_autoptr(GZlibDecompressor) decompressor =
            g_zlib_decompressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP);
        g_autoptr(GInputStream) plain =
            g_converter_input_stream_new(compressed, G_CONVERTER(decompressor));
        return fsim_pickle_load_stream(plain, limits, error);
    }
    return fsim_pickle_load_stream(in, limits, error);
}

/* Loads @data from memory, and as a stream too: both must succeed with the same walk. */
static FsimPickle *
load_ok(const guint8 *data, gsize len)
{
    g_autoptr(GError) error = NULL;
    FsimPickle *pickle = fsim_pickle_load(data, len, NULL, &error);
    g_assert_no_error(error);
    g_assert_nonnull(pickle);
    g_autoptr(FsimPickle) streamed = load_stream(data, len, FALSE, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(fsim_pickle_nodes(fsim_pickle_root(streamed)), ==,
                     fsim_pickle_nodes(fsim_pickle_root(pickle)));
    g_assert_cmpint(fsim_pickle_type(fsim_pickle_root(streamed)), ==,
                    fsim_pickle_type(fsim_pickle_root(pickle)));
    return pickle;
}

/* Loads @data expecting error @code whose message starts with "byte @offset: " and contains
 * @needle (when not NULL). */
static void
load_bad_limits(const guint8 *data, gsize len, const FsimPickleLimits *limits, int code,
                gsize offset, const char *needle)
{
    g_autoptr(GError) error = NULL;
    /* A stream fails too (where, it may find later: a declared length is checked as read), but
     * for a FRAME too long, which only a loader holding the whole input can see. */
    g_autoptr(FsimPickle) streamed = load_stream(data, len, FALSE, limits, &error);
    if (needle == NULL || strcmp(needle, "FRAME") != 0) {
        g_assert_null(streamed);
        g_assert_nonnull(error);
    }
    g_clear_error(&error);
    g_autoptr(FsimPickle) pickle = fsim_pickle_load(data, len, limits, &error);
    g_assert_null(pickle);
    g_assert_error(error, FSIM_TRACE_ERROR, code);
    g_autofree char *prefix = g_strdup_printf("byte %" G_GSIZE_FORMAT ": ", offset);
    if (!g_str_has_prefix(error->message, prefix) ||
        (needle != NULL && strstr(error->message, needle) == NULL))
        g_error("message \"%s\" lacks \"%s\" or \"%s\"", error->message, prefix,
                needle != NULL ? needle : "");
}

static void
load_bad(const guint8 *data, gsize len, int code, gsize offset, const char *needle)
{
    load_bad_limits(data, len, NULL, code, offset, needle);
}

static int64_t
int_of(const FsimPickleValue *v)
{
    int64_t i = 0;
    g_assert_nonnull(v);
    g_assert_true(fsim_pickle_get_int(v, &i));
    return i;
}

static const char *
str_of(const FsimPickleValue *v)
{
    g_assert_nonnull(v);
    const char *s = fsim_pickle_get_str(v, NULL);
    g_assert_nonnull(s);
    return s;
}

static double
double_of(const FsimPickleValue *v)
{
    double d = 0;
    g_assert_nonnull(v);
    g_assert_true(fsim_pickle_get_double(v, &d));
    return d;
}

static gboolean
bool_of(const FsimPickleValue *v)
{
    gboolean b = FALSE;
    g_assert_nonnull(v);
    g_assert_true(fsim_pickle_get_bool(v, &b));
    return b;
}

static void
assert_type(const FsimPickleValue *v, FsimPickleType type)
{
    g_assert_nonnull(v);
    g_assert_cmpstr(fsim_pickle_type_name(fsim_pickle_type(v)), ==, fsim_pickle_type_name(type));
    g_assert_cmpint(fsim_pickle_type(v), ==, type);
}

static GBytes *
read_fixture(const char *name)
{
    g_autofree char *path = g_test_build_filename(G_TEST_DIST, "data", "pickle", name, NULL);
    g_autoptr(GError) error = NULL;
    char *contents = NULL;
    gsize len = 0;
    g_file_get_contents(path, &contents, &len, &error);
    g_assert_no_error(error);
    return g_bytes_new_take(contents, len);
}

/* ---- Accepted opcodes ---------------------------------------------------------------------- */

static void
test_load_scalars(void)
{
    /* A tuple of every scalar opcode, in a list built by APPENDS. */
    static const char bytes[] = "\x80\x02]("
                                "N"                                 /* NONE */
                                "\x88\x89"                          /* NEWTRUE, NEWFALSE */
                                "K\xff"                             /* BININT1 255 */
                                "M\x01\x01"                         /* BININT2 257 */
                                "J\xfe\xff\xff\xff"                 /* BININT -2 */
                                "\x8a\x00"                          /* LONG1 0 */
                                "\x8a\x03\x00\x80\x00"              /* LONG1 32768 */
                                "\x8a\x01\x80"                      /* LONG1 -128 */
                                "\x8b\x03\x00\x00\x00\xff\xff\x7f"  /* LONG4 0x7fffff */
                                "G\x3f\xf8\x00\x00\x00\x00\x00\x00" /* BINFLOAT 1.5 */
                                "F-2.25\n"                          /* FLOAT */
                                "I01\nI00\nI-17\n"                  /* INT True, False, -17 */
                                "L123L\nL-9223372036854775808\n"    /* LONG */
                                "e.";
    g_autoptr(FsimPickle) pickle = load_ok(B(bytes));
    const FsimPickleValue *l = fsim_pickle_root(pickle);
    assert_type(l, FSIM_PICKLE_LIST);
    g_assert_cmpuint(fsim_pickle_len(l), ==, 17);
    assert_type(fsim_pickle_item(l, 0), FSIM_PICKLE_NONE);
    g_assert_true(bool_of(fsim_pickle_item(l, 1)));
    g_assert_false(bool_of(fsim_pickle_item(l, 2)));
    g_assert_cmpint(int_of(fsim_pickle_item(l, 3)), ==, 255);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 4)), ==, 257);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 5)), ==, -2);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 6)), ==, 0);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 7)), ==, 32768);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 8)), ==, -128);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 9)), ==, 0x7fffff);
    g_assert_cmpfloat(double_of(fsim_pickle_item(l, 10)), ==, 1.5);
    g_assert_cmpfloat(double_of(fsim_pickle_item(l, 11)), ==, -2.25);
    g_assert_true(bool_of(fsim_pickle_item(l, 12)));
    g_assert_false(bool_of(fsim_pickle_item(l, 13)));
    g_assert_cmpint(int_of(fsim_pickle_item(l, 14)), ==, -17);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 15)), ==, 123);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 16)), ==, INT64_MIN);

    /* A bool is not an int; an int converts to double; offsets point at the opcode. */
    int64_t i = 0;
    g_assert_false(fsim_pickle_get_int(fsim_pickle_item(l, 1), &i));
    g_assert_cmpfloat(double_of(fsim_pickle_item(l, 4)), ==, 257.0);
    g_assert_cmpuint(fsim_pickle_offset(l), ==, 2);
    g_assert_cmpuint(fsim_pickle_offset(fsim_pickle_item(l, 0)), ==, 4);
    g_assert_cmpuint(fsim_pickle_offset(fsim_pickle_item(l, 3)), ==, 7);
}

static void
test_load_ints(void)
{
    static const char bytes[] =
        "\x80\x02]("
        "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f"         /* 2^63 - 1 */
        "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"         /* -2^63 */
        "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00"     /* 2^63: unsigned */
        "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00"     /* 2^64 - 1: unsigned */
        "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01"     /* 2^64: big */
        "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\xfe"     /* -2^64 - 1: big */
        "\x8a\x0a\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00" /* 5, padded */
        "\x8a\x0a\xfb\xff\xff\xff\xff\xff\xff\xff\xff\xff" /* -5, padded */
        "L18446744073709551615\n"                          /* 2^64 - 1 as text */
        "L-18446744073709551617L\n"                        /* -2^64 - 1 as text */
        "I100000000000000000000000000000000000000000\n"    /* 10^41 */
        "e.";
    g_autoptr(FsimPickle) pickle = load_ok(B(bytes));
    const FsimPickleValue *l = fsim_pickle_root(pickle);
    g_assert_cmpuint(fsim_pickle_len(l), ==, 11);
    int64_t i = 0;
    uint64_t u = 0;
    g_assert_cmpint(int_of(fsim_pickle_item(l, 0)), ==, INT64_MAX);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 1)), ==, INT64_MIN);
    g_assert_false(fsim_pickle_get_uint(fsim_pickle_item(l, 1), &u));
    g_assert_false(fsim_pickle_get_int(fsim_pickle_item(l, 2), &i));
    g_assert_true(fsim_pickle_get_uint(fsim_pickle_item(l, 2), &u));
    g_assert_cmpuint(u, ==, (uint64_t)1 << 63);
    g_assert_true(fsim_pickle_get_uint(fsim_pickle_item(l, 3), &u));
    g_assert_cmpuint(u, ==, UINT64_MAX);
    assert_type(fsim_pickle_item(l, 3), FSIM_PICKLE_INT);
    g_assert_cmpfloat(double_of(fsim_pickle_item(l, 3)), ==, 18446744073709551615.0);

    const FsimPickleValue *big = fsim_pickle_item(l, 4);
    assert_type(big, FSIM_PICKLE_BIGINT);
    g_assert_false(fsim_pickle_get_uint(big, &u));
    gsize n = 0;
    const guint8 *b = fsim_pickle_get_bigint(big, &n);
    g_assert_cmpuint(n, ==, 9);
    g_assert_cmpmem(b, n, "\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9);
    g_assert_cmpfloat(double_of(big), ==, 18446744073709551616.0);
    g_assert_cmpuint(fsim_pickle_len(big), ==, 9);

    big = fsim_pickle_item(l, 5);
    assert_type(big, FSIM_PICKLE_BIGINT);
    g_assert_cmpfloat(double_of(big), ==, -18446744073709551617.0);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 6)), ==, 5);
    g_assert_cmpint(int_of(fsim_pickle_item(l, 7)), ==, -5);
    g_assert_true(fsim_pickle_get_uint(fsim_pickle_item(l, 8), &u));
    g_assert_cmpuint(u, ==, UINT64_MAX);
    b = fsim_pickle_get_bigint(fsim_pickle_item(l, 9), &n);
    g_assert_nonnull(b);
    g_assert_cmpmem(b, n, "\xff\xff\xff\xff\xff\xff\xff\xff\xfe", 9);
    g_assert_cmpfloat(double_of(fsim_pickle_item(l, 10)), ==, 1e41);
}

/* Whether a str came from a text opcode: only STRING and UNICODE say so. */
static void
test_load_text_strings(void)
{
    static const struct {
        const guint8 *bytes;
        gsize len;
        gboolean text;
    } cases[] = {
        {B("\x80\x04\x8c\x01"
           "a."),
         FALSE},
        {B("\x80\x02]q\x00(X\x01\x00\x00\x00"
           "bU\x01"
           "cT\x01\x00\x00\x00"
           "de."),
         FALSE},
        {B("(lp0\nI1\naL2L\na."), FALSE},
        {B("Vtorch\\u005fnpu\n."), TRUE},
        {B("S'x'\n."), TRUE},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(FsimPickle) pickle = load_ok(cases[i].bytes, cases[i].len);

        g_assert_cmpint(fsim_pickle_text_strings(pickle), ==, cases[i].text);
    }
}

/* FsimPickleLimits.watch_str: found in strs of every binary opcode, at either end, in memory
 * and through a stream; not in bytes, not split across two strs, not where only a prefix is. */
static void
test_load_watch_str(void)
{
    static const struct {
        const guint8 *bytes;
        gsize len;
        gboolean seen;
    } cases[] = {
        {B("\x80\x04\x8c\x0atorch_npu/."), TRUE},              /* the whole str */
        {B("\x80\x04\x8c\x11/a/torch_npu/b.py."), TRUE},       /* inside */
        {B("\x80\x04X\x0e\x00\x00\x00tttorch_npu/ab."), TRUE}, /* BINUNICODE */
        {B("\x80\x04\x8c\x0atorch_npu_."), FALSE},             /* not its last byte */
        {B("\x80\x04\x8c\x09torch_npu."), FALSE},              /* too short */
        {B("\x80\x04"
           "C\x0atorch_npu/."),
         FALSE},                                             /* bytes */
        {B("\x80\x04(\x8c\x05torch\x8c\x05_npu/l."), FALSE}, /* across two strs */
        {B("\x80\x04(\x8c\x01"
           "a\x8c\x0b_torch_npu/l."),
         TRUE}, /* the second str */
    };
    FsimPickleLimits limits = {.watch_str = "torch_npu/"};

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        const guint8 *bytes = cases[i].bytes;
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimPickle) mem = fsim_pickle_load(bytes, cases[i].len, &limits, &error);
        g_autoptr(FsimPickle) streamed = NULL;
        g_autoptr(FsimPickle) unwatched = NULL;

        g_assert_no_error(error);
        streamed = load_stream(bytes, cases[i].len, FALSE, &limits, &error);
        g_assert_no_error(error);
        unwatched = fsim_pickle_load(bytes, cases[i].len, NULL, &error);
        g_assert_no_error(error);
        g_assert_cmpint(fsim_pickle_watched_str_seen(mem), ==, cases[i].seen);
        g_assert_cmpint(fsim_pickle_watched_str_seen(streamed), ==, cases[i].seen);
        g_assert_false(fsim_pickle_watched_str_seen(unwatched));
    }
}

static void
test_load_strings(void)
{
    static const char bytes[] = "\x80\x04]("
                                "X\x03\x00\x00\x00"
                                "abc"                                    /* BINUNICODE */
                                "\x8c\x03\xc3\xa9\x00"                   /* é + NUL */
                                "\x8d\x02\x00\x00\x00\x00\x00\x00\x00hi" /* BINUNICODE8 */
                                "V\\u20ac \\\\u0041 \xe9\\U0001F600\n"   /* UNICODE */
                                "S'a\\'b\\n\\x41\\101\\q'\n"             /* STRING */
                                "T\x02\x00\x00\x00st"                    /* BINSTRING */
                                "U\x02uv"                                /* SHORT_BINSTRING */
                                "C\x02\x00\x01"                          /* SHORT_BINBYTES */
                                "B\x01\x00\x00\x00\xff"                  /* BINBYTES */
                                "\x8e\x00\x00\x00\x00\x00\x00\x00\x00"   /* BINBYTES8 */
                                "\x96\x01\x00\x00\x00\x00\x00\x00\x00z"  /* BYTEARRAY8 */
                                "\x8c\x00"                               /* "" */
                                "e.";
    g_autoptr(FsimPickle) pickle = load_ok(B(bytes));
    const FsimPickleValue *l = fsim_pickle_root(pickle);
    g_assert_cmpuint(fsim_pickle_len(l), ==, 12);
    g_assert_true(fsim_pickle_text_strings(pickle)); /* UNICODE and STRING */
    gsize n = 0;
    g_assert_cmpstr(str_of(fsim_pickle_item(l, 0)), ==, "abc");
    const char *s = fsim_pickle_get_str(fsim_pickle_item(l, 1), &n);
    g_assert_cmpmem(s, n + 1, "\xc3\xa9\x00\x00", 4); /* NUL inside, and the terminator */
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_item(l, 1)), ==, 3);
    g_assert_false(fsim_pickle_str_equal(fsim_pickle_item(l, 1), "\xc3\xa9"));
    g_assert_cmpstr(str_of(fsim_pickle_item(l, 2)), ==, "hi");
    /* raw-unicode-escape: \u20ac is an escape, \\u0041 is not, 0xe9 is Latin-1. */
    g_assert_cmpstr(str_of(fsim_pickle_item(l, 3)), ==,
                    "\xe2\x82\xac \\\\u0041 \xc3\xa9\xf0\x9f\x98\x80");
    g_assert_cmpstr(str_of(fsim_pickle_item(l, 4)), ==, "a'b\nAA\\q");
    g_assert_cmpstr(str_of(fsim_pickle_item(l, 5)), ==, "st");
    g_assert_true(fsim_pickle_str_equal(fsim_pickle_item(l, 6), "uv"));
    const guint8 *b = fsim_pickle_get_bytes(fsim_pickle_item(l, 7), &n);
    g_assert_cmpmem(b, n, "\x00\x01", 2);
    g_assert_null(fsim_pickle_get_str(fsim_pickle_item(l, 7), NULL));
    b = fsim_pickle_get_bytes(fsim_pickle_item(l, 8), &n);
    g_assert_cmpmem(b, n, "\xff", 1);
    b = fsim_pickle_get_bytes(fsim_pickle_item(l, 9), &n);
    g_assert_cmpuint(n, ==, 0);
    g_assert_cmpint(b[0], ==, 0);
    b = fsim_pickle_get_bytes(fsim_pickle_item(l, 10), &n);
    g_assert_cmpmem(b, n, "z", 1);
    g_assert_cmpstr(str_of(fsim_pickle_item(l, 11)), ==, "");
    g_assert_true(fsim_pickle_str_equal(fsim_pickle_item(l, 11), ""));
}

static void
test_load_containers(void)
{
    /* Hex escapes are split from the next character ("\x01" "d") so that C does not read
     * "\x01d" as one escape. */
    static const char bytes[] = "\x80\x02}("
                                "\x8c\x01"
                                "t)" /* "t": () */
                                "\x8c\x02"
                                "t1K\x01\x85" /* TUPLE1 */
                                "\x8c\x02"
                                "t2K\x01K\x02\x86" /* TUPLE2 */
                                "\x8c\x02"
                                "t3K\x01K\x02K\x03\x87" /* TUPLE3 */
                                "\x8c\x02"
                                "t4(K\x01K\x02K\x03K\x04t" /* TUPLE */
                                "\x8c\x01"
                                "l(K\x05K\x06l" /* LIST */
                                "\x8c\x01"
                                "d(\x8c\x01"
                                "kK\x07"
                                "d" /* DICT */
                                "\x8c\x01"
                                "e]" /* EMPTY_LIST */
                                "u"  /* SETITEMS */
                                "\x8c\x01"
                                "x}\x8c\x01"
                                "yNss" /* SETITEM twice */
                                "\x8c\x01"
                                "e]K\x09"
                                "as" /* the key "e" again */
                                ".";
    g_autoptr(FsimPickle) pickle = load_ok(B(bytes));
    const FsimPickleValue *d = fsim_pickle_root(pickle);
    assert_type(d, FSIM_PICKLE_DICT);
    g_assert_cmpuint(fsim_pickle_len(d), ==, 10);
    const FsimPickleValue *v = fsim_pickle_dict_get(d, "t");
    assert_type(v, FSIM_PICKLE_TUPLE);
    g_assert_cmpuint(fsim_pickle_len(v), ==, 0);
    g_assert_null(fsim_pickle_item(v, 0));
    for (gsize n = 1; n <= 4; n++) {
        g_autofree char *key = g_strdup_printf("t%" G_GSIZE_FORMAT, n);
        v = fsim_pickle_dict_get(d, key);
        assert_type(v, FSIM_PICKLE_TUPLE);
        g_assert_cmpuint(fsim_pickle_len(v), ==, n);
        for (gsize i = 0; i < n; i++)
            g_assert_cmpint(int_of(fsim_pickle_item(v, i)), ==, (int64_t)i + 1);
    }
    v = fsim_pickle_dict_get(d, "l");
    assert_type(v, FSIM_PICKLE_LIST);
    g_assert_cmpint(int_of(fsim_pickle_item(v, 1)), ==, 6);
    v = fsim_pickle_dict_get(d, "d");
    assert_type(v, FSIM_PICKLE_DICT);
    g_assert_cmpint(int_of(fsim_pickle_dict_get(v, "k")), ==, 7);
    v = fsim_pickle_dict_get(d, "x");
    assert_type(v, FSIM_PICKLE_DICT);
    assert_type(fsim_pickle_dict_get(v, "y"), FSIM_PICKLE_NONE);

    /* The key "e" was set twice: both entries are kept, lookup finds the later one. */
    g_assert_true(fsim_pickle_str_equal(fsim_pickle_dict_key(d, 7), "e"));
    g_assert_true(fsim_pickle_str_equal(fsim_pickle_dict_key(d, 9), "e"));
    v = fsim_pickle_dict_get(d, "e");
    assert_type(v, FSIM_PICKLE_LIST);
    g_assert_cmpuint(fsim_pickle_len(v), ==, 1);
    g_assert_cmpint(int_of(fsim_pickle_item(v, 0)), ==, 9);
    assert_type(fsim_pickle_dict_value(d, 7), FSIM_PICKLE_LIST);
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_dict_value(d, 7)), ==, 0);

    /* Accessors on the wrong type or index. */
    g_assert_null(fsim_pickle_dict_get(d, "absent"));
    g_assert_null(fsim_pickle_dict_get(NULL, "t"));
    g_assert_null(fsim_pickle_dict_get(fsim_pickle_dict_get(d, "l"), "t"));
    g_assert_null(fsim_pickle_dict_key(d, 10));
    g_assert_null(fsim_pickle_dict_value(d, 10));
    g_assert_null(fsim_pickle_item(d, 0));
    g_assert_null(fsim_pickle_dict_key(fsim_pickle_dict_get(d, "l"), 0));
}

static void
test_load_nested_dict(void)
{
    /* CPython's pickle.dumps({"a": {"b": {"c": [1, {"d": "e"}]}}}, 4). */
    static const char bytes[] = "\x80\x04\x95'\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01"
                                "a\x94}\x94"
                                "\x8c\x01"
                                "b\x94}\x94\x8c\x01"
                                "c\x94]\x94(K\x01}\x94\x8c\x01"
                                "d\x94\x8c\x01"
                                "e\x94sesss.";
    g_autoptr(FsimPickle) pickle = load_ok(B(bytes));
    const FsimPickleValue *v = fsim_pickle_root(pickle);
    v = fsim_pickle_dict_get(fsim_pickle_dict_get(fsim_pickle_dict_get(v, "a"), "b"), "c");
    assert_type(v, FSIM_PICKLE_LIST);
    g_assert_cmpint(int_of(fsim_pickle_item(v, 0)), ==, 1);
    g_assert_true(fsim_pickle_str_equal(fsim_pickle_dict_get(fsim_pickle_item(v, 1), "d"), "e"));
}

static void
test_load_stack_ops(void)
{
    /* POP drops a value; POP on an empty frame drops the MARK instead (as CPython); POP_MARK
     * drops everything down to the MARK; DUP of a scalar. */
    static const char bytes[] = "\x80\x02]"
                                "K\x01"
                                "0" /* POP */
                                "("
                                "0" /* POP of a MARK */
                                "(K\x02K\x03"
                                "1" /* POP_MARK */
                                "(K\x04"
                                "2"
                                "e" /* DUP */
                                ".";
    g_autoptr(FsimPickle) pickle = load_ok(B(bytes));
    const FsimPickleValue *l = fsim_pickle_root(pickle);
    g_assert_cmpuint(fsim_pickle_len(l), ==, 2);
    g_assert_true(fsim_pickle_item(l, 0) == fsim_pickle_item(l, 1));
    g_assert_cmpint(int_of(fsim_pickle_item(l, 0)), ==, 4);
}

static void
test_load_memo(void)
{
    static const char bytes[] = "\x80\x02]("
                                "\x8c\x03"
                                "keyq\x00" /* BINPUT 0 */
                                "\x8c\x04"
                                "key2r\x04\x00\x00\x00" /* LONG_BINPUT 4 */
                                "\x8c\x04"
                                "key3p7\n" /* PUT 7 */
                                "\x8c\x04"
                                "key4\x94"                        /* MEMOIZE: 3 are set: 3 */
                                "h\x00j\x04\x00\x00\x00g7\nh\x03" /* BINGET, LONG_BINGET, GET */
                                "]q\x08K\x01"
                                "ah\x08" /* a shared list */
                                "e.";
    g_autoptr(FsimPickle) pickle = load_ok(B(bytes));
    const FsimPickleValue *l = fsim_pickle_root(pickle);
    g_assert_cmpuint(fsim_pickle_len(l), ==, 10);
    for (gsize i = 0; i < 4; i++)
        g_assert_true(fsim_pickle_item(l, i) == fsim_pickle_item(l, i + 4));
    g_assert_cmpstr(str_of(fsim_pickle_item(l, 3)), ==, "key4");
    g_assert_true(fsim_pickle_item(l, 8) == fsim_pickle_item(l, 9));
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_item(l, 9)), ==, 1);
}

/* Lists of memo references repeated byte for byte (a snapshot's frames) are built once and
 * copied: the copies must be distinct lists with the same items, and a memo entry replaced in
 * between must show in the next copy. */
static void
test_load_repeated_lists(void)
{
    static const char bytes[] = "\x80\x02]q\x00("
                                "K\x05q\x01" /* memo 1 = 5 */
                                "]q\x02(h\x01h\x01"
                                "e" /* A = [5, 5] */
                                "]q\x03(h\x01h\x01"
                                "e"          /* B = [5, 5], the same bytes */
                                "K\x06q\x01" /* memo 1 = 6 */
                                "]q\x04(h\x01h\x01"
                                "e"     /* C = [6, 6], the same bytes again */
                                "h\x03" /* B once more: shared */
                                "e.";
    g_autoptr(FsimPickle) pickle = load_ok(B(bytes));
    const FsimPickleValue *root = fsim_pickle_root(pickle);
    const FsimPickleValue *a = fsim_pickle_item(root, 1);
    const FsimPickleValue *b = fsim_pickle_item(root, 2);
    const FsimPickleValue *c = fsim_pickle_item(root, 4);

    g_assert_cmpuint(fsim_pickle_len(root), ==, 6);
    g_assert_true(a != b && b != c);
    g_assert_true(fsim_pickle_item(root, 5) == b);
    g_assert_cmpuint(fsim_pickle_len(a), ==, 2);
    g_assert_cmpuint(fsim_pickle_len(b), ==, 2);
    g_assert_cmpuint(fsim_pickle_len(c), ==, 2);
    g_assert_true(fsim_pickle_item(a, 0) == fsim_pickle_item(b, 1));
    g_assert_cmpint(int_of(fsim_pickle_item(b, 0)), ==, 5);
    g_assert_cmpint(int_of(fsim_pickle_item(c, 0)), ==, 6);
    g_assert_cmpint(int_of(fsim_pickle_item(c, 1)), ==, 6);
    g_assert_cmpuint(fsim_pickle_nodes(b), ==, 3);
    g_assert_cmpuint(fsim_pickle_nodes(root), ==, 1 + 1 + 3 + 3 + 1 + 3 + 3);

    /* An unset entry inside a run like a cached one is still an error, at its opcode. */
    load_bad(B("\x80\x02](K\x05q\x01]q\x02(h\x01h\x01"
               "e]q\x03(h\x01h\x09"
               "e."),
             FSIM_TRACE_ERROR_SYNTAX, 23, "memo entry 9 was never set");
    /* Appending more to a copied list works as to any list. */
    g_autoptr(FsimPickle) more = load_ok(B("\x80\x02](K\x05q\x01]q\x02(h\x01"
                                           "e]q\x03(h\x01"
                                           "eK\x07"
                                           "ae."));
    const FsimPickleValue *grown = fsim_pickle_item(fsim_pickle_root(more), 2);
    g_assert_cmpuint(fsim_pickle_len(grown), ==, 2);
    g_assert_cmpint(int_of(fsim_pickle_item(grown, 1)), ==, 7);
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_item(fsim_pickle_root(more), 1)), ==, 1);
    /* ... and a list that grew after it was built from a run is no model for the next one. */
    g_autoptr(FsimPickle) after = load_ok(B("\x80\x02](K\x05q\x01]q\x02(h\x01"
                                            "eK\x07"
                                            "a]q\x03(h\x01"
                                            "ee."));
    const FsimPickleValue *fresh = fsim_pickle_item(fsim_pickle_root(after), 2);
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_item(fsim_pickle_root(after), 1)), ==, 2);
    g_assert_cmpuint(fsim_pickle_len(fresh), ==, 1);
    g_assert_cmpint(int_of(fsim_pickle_item(fresh, 0)), ==, 5);
}

/* Long runs (found by their first bytes, without decoding them): runs that share those bytes, or
 * one that is another followed by more, are told apart. */
static void
test_load_repeated_long_lists(void)
{
    /* memo 1 = 5, memo 2 = 6; then [5] * 80, [5] * 79 + [6], [5] * 81, and each once more */
    static const int lengths[] = {80, 80, 81, 80, 80, 81};
    static const int last[] = {5, 6, 5, 5, 6, 5};
    g_autoptr(GString) s = g_string_new("\x80\x02](K\x05q\x01K\x06q\x02");
    g_autoptr(FsimPickle) pickle = NULL;
    const FsimPickleValue *root;

    for (int k = 0; k < 6; k++) {
        g_string_append(s, "]");
        for (int i = 0; i < lengths[k] - 1; i++)
            g_string_append(s, i == 0 ? "(h\x01" : "h\x01");
        g_string_append(s, last[k] == 5 ? "h\x01" : "h\x02");
        g_string_append_c(s, 'e');
    }
    g_string_append(s, "K\x07"
                       "ae."); /* 7 appended to the last copy */
    pickle = load_ok((const guint8 *)s->str, s->len);
    root = fsim_pickle_root(pickle);
    g_assert_cmpuint(fsim_pickle_len(root), ==, 2 + 6);
    /* The copy that grew has items of its own; its model and the others are unchanged. */
    const FsimPickleValue *grown = fsim_pickle_item(root, 2 + 5);
    g_assert_cmpuint(fsim_pickle_len(grown), ==, 82);
    g_assert_cmpint(int_of(fsim_pickle_item(grown, 80)), ==, 5);
    g_assert_cmpint(int_of(fsim_pickle_item(grown, 81)), ==, 7);
    g_assert_cmpuint(fsim_pickle_list_twin(grown), ==, 0);
    g_assert_cmpuint(fsim_pickle_nodes(grown), ==, 83);
    for (int k = 0; k < 5; k++) {
        const FsimPickleValue *list = fsim_pickle_item(root, 2 + (gsize)k);

        g_assert_cmpuint(fsim_pickle_len(list), ==, (gsize)lengths[k]);
        g_assert_cmpint(int_of(fsim_pickle_item(list, 0)), ==, 5);
        g_assert_cmpint(int_of(fsim_pickle_item(list, (gsize)lengths[k] - 1)), ==, last[k]);
        g_assert_cmpuint(fsim_pickle_nodes(list), ==, 1 + (uint64_t)lengths[k]);
        /* the copies are twins of their model, and of no other list */
        g_assert_cmpuint(fsim_pickle_list_twin(list), !=, 0);
        if (k >= 3)
            g_assert_cmpuint(fsim_pickle_list_twin(list), ==,
                             fsim_pickle_list_twin(fsim_pickle_item(root, 2 + (gsize)k - 3)));
        for (int j = 0; j < k; j++)
            if (j != k - 3 && j != 5)
                g_assert_cmpuint(fsim_pickle_list_twin(list), !=,
                                 fsim_pickle_list_twin(fsim_pickle_item(root, 2 + (gsize)j)));
    }
}

/* Inputs the fuzzer found (tests/fuzz/README.md). */
static void
test_load_fuzz_regressions(void)
{
    /* LIST and TUPLE on an empty stack: `stack + 0` with no stack allocated yet was undefined
     * behaviour (UBSan: "applying zero offset to null pointer"). */
    g_autoptr(FsimPickle) a = load_ok(B("(lp0\n."));
    assert_type(fsim_pickle_root(a), FSIM_PICKLE_LIST);
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_root(a)), ==, 0);
    g_autoptr(FsimPickle) b = load_ok(B("(t."));
    assert_type(fsim_pickle_root(b), FSIM_PICKLE_TUPLE);
}

static void
test_load_trailing(void)
{
    /* Bytes after STOP are ignored, as CPython does; protocols 0-5 are accepted. */
    g_autoptr(FsimPickle) a = load_ok(B("\x80\x05K\x07.garbage"));
    g_assert_cmpint(int_of(fsim_pickle_root(a)), ==, 7);
    g_autoptr(FsimPickle) b = load_ok(B("I7\n."));
    g_assert_cmpint(int_of(fsim_pickle_root(b)), ==, 7);
    load_bad(B("\x80\x06K\x07."), FSIM_TRACE_ERROR_HEADER, 0, "protocol 6");
}

/* ---- CPython fixtures ---------------------------------------------------------------------- */

static void
check_fixture(const FsimPickleValue *root, int protocol)
{
    assert_type(root, FSIM_PICKLE_DICT);
    g_assert_cmpuint(fsim_pickle_len(root), ==, protocol >= 5 ? 10 : protocol >= 3 ? 9 : 8);

    const FsimPickleValue *segs = fsim_pickle_dict_get(root, "segments");
    assert_type(segs, FSIM_PICKLE_LIST);
    const FsimPickleValue *seg = fsim_pickle_item(segs, 0);
    uint64_t u = 0;
    g_assert_true(fsim_pickle_get_uint(fsim_pickle_dict_get(seg, "address"), &u));
    g_assert_cmpuint(u, ==, 139637976727552u);
    g_assert_cmpint(int_of(fsim_pickle_dict_get(seg, "total_size")), ==, 20971520);
    g_assert_true(fsim_pickle_str_equal(fsim_pickle_dict_get(seg, "segment_type"), "large"));
    const FsimPickleValue *blocks = fsim_pickle_dict_get(seg, "blocks");
    g_assert_cmpuint(fsim_pickle_len(blocks), ==, 2);
    g_assert_true(fsim_pickle_item(blocks, 0) == fsim_pickle_item(blocks, 1)); /* shared */
    g_assert_cmpint(int_of(fsim_pickle_dict_get(fsim_pickle_item(blocks, 0), "size")), ==, 512);

    const FsimPickleValue *traces = fsim_pickle_dict_get(root, "device_traces");
    const FsimPickleValue *trace = fsim_pickle_item(traces, 0);
    g_assert_cmpuint(fsim_pickle_len(trace), ==, 2);
    const FsimPickleValue *e0 = fsim_pickle_item(trace, 0);
    const FsimPickleValue *e1 = fsim_pickle_item(trace, 1);
    g_assert_true(fsim_pickle_str_equal(fsim_pickle_dict_get(e0, "action"), "alloc"));
    g_assert_true(fsim_pickle_str_equal(fsim_pickle_dict_get(e1, "action"), "free_requested"));
    g_assert_cmpint(int_of(fsim_pickle_dict_get(e1, "time_us")), ==, 1700000000123999);
    g_assert_true(fsim_pickle_dict_get(e0, "frames") == fsim_pickle_dict_get(e1, "frames"));
    const FsimPickleValue *frame = fsim_pickle_item(fsim_pickle_dict_get(e0, "frames"), 1);
    g_assert_cmpstr(str_of(fsim_pickle_dict_get(frame, "name")), ==, "<module>");
    g_assert_cmpint(int_of(fsim_pickle_dict_get(frame, "line")), ==, 7);

    const FsimPickleValue *s = fsim_pickle_dict_get(root, "scalars");
    g_assert_cmpuint(fsim_pickle_len(s), ==, 26);
    assert_type(fsim_pickle_item(s, 0), FSIM_PICKLE_NONE);
    g_assert_true(bool_of(fsim_pickle_item(s, 1)));
    g_assert_false(bool_of(fsim_pickle_item(s, 2)));
    g_assert_cmpfloat(double_of(fsim_pickle_item(s, 3)), ==, 1.5);
    g_assert_cmpfloat(double_of(fsim_pickle_item(s, 4)), ==, -2.25);
    static const int64_t ints[] = {0,           -1,         255,        256,       65535,    65536,
                                   -2147483648, 2147483647, 2147483648, INT64_MAX, INT64_MIN};
    for (gsize i = 0; i < G_N_ELEMENTS(ints); i++)
        g_assert_cmpint(int_of(fsim_pickle_item(s, 5 + i)), ==, ints[i]);
    g_assert_true(fsim_pickle_get_uint(fsim_pickle_item(s, 16), &u));
    g_assert_cmpuint(u, ==, (uint64_t)1 << 63);
    g_assert_true(fsim_pickle_get_uint(fsim_pickle_item(s, 17), &u));
    g_assert_cmpuint(u, ==, UINT64_MAX);
    assert_type(fsim_pickle_item(s, 18), FSIM_PICKLE_BIGINT);
    g_assert_cmpfloat(double_of(fsim_pickle_item(s, 18)), ==, 18446744073709551616.0);
    g_assert_cmpfloat(double_of(fsim_pickle_item(s, 19)), ==, -18446744073709551617.0);
    g_assert_cmpfloat(fabs(double_of(fsim_pickle_item(s, 20)) / 1e40 - 1), <, 1e-15);
    g_assert_cmpfloat(fabs(double_of(fsim_pickle_item(s, 21)) / -1e40 - 1), <, 1e-15);
    g_assert_cmpstr(str_of(fsim_pickle_item(s, 22)), ==, "");
    g_assert_cmpstr(str_of(fsim_pickle_item(s, 23)), ==, "ascii");
    g_assert_cmpstr(str_of(fsim_pickle_item(s, 24)), ==,
                    "\xc3\xbc"
                    "n\xc3\xaf"
                    "c\xc3\xb8"
                    "d\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    gsize n = 0;
    const char *nul = fsim_pickle_get_str(fsim_pickle_item(s, 25), &n);
    g_assert_cmpmem(nul, n, "nul\0inside", 10);

    const FsimPickleValue *t = fsim_pickle_dict_get(root, "tuples");
    for (gsize i = 0; i < 5; i++) {
        assert_type(fsim_pickle_item(t, i), FSIM_PICKLE_TUPLE);
        g_assert_cmpuint(fsim_pickle_len(fsim_pickle_item(t, i)), ==, i == 4 ? 4 : i);
    }
    g_assert_cmpstr(str_of(fsim_pickle_item(fsim_pickle_item(t, 3), 1)), ==, "two");
    g_assert_cmpfloat(double_of(fsim_pickle_item(fsim_pickle_item(t, 3), 2)), ==, 3.0);

    const FsimPickleValue *shared = fsim_pickle_dict_get(root, "shared");
    g_assert_true(fsim_pickle_item(shared, 0) == fsim_pickle_item(shared, 1));
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_item(shared, 0)), ==, 3);
    g_assert_true(fsim_pickle_item(shared, 2) == fsim_pickle_item(shared, 3));

    const FsimPickleValue *big = fsim_pickle_dict_get(root, "big_list");
    g_assert_cmpuint(fsim_pickle_len(big), ==, 1100);
    for (gsize i = 0; i < 1100; i++)
        g_assert_cmpint(int_of(fsim_pickle_item(big, i)), ==, (int64_t)i);

    /* Non-str keys: 1 and (1, 2). */
    gboolean int_key = FALSE, tuple_key = FALSE;
    for (gsize i = 0; i < fsim_pickle_len(root); i++) {
        const FsimPickleValue *k = fsim_pickle_dict_key(root, i);
        int64_t x;
        if (fsim_pickle_get_int(k, &x) && x == 1) {
            int_key = TRUE;
            g_assert_cmpstr(str_of(fsim_pickle_dict_value(root, i)), ==, "int key");
        }
        if (fsim_pickle_type(k) == FSIM_PICKLE_TUPLE) {
            tuple_key = TRUE;
            g_assert_cmpint(int_of(fsim_pickle_item(k, 1)), ==, 2);
        }
    }
    g_assert_true(int_key && tuple_key);

    if (protocol >= 3) {
        const guint8 *b = fsim_pickle_get_bytes(fsim_pickle_dict_get(root, "bytes"), &n);
        g_assert_cmpmem(b, n, "by\0tes", 6);
    }
    if (protocol >= 5) {
        const guint8 *b = fsim_pickle_get_bytes(fsim_pickle_dict_get(root, "bytearray"), &n);
        g_assert_cmpmem(b, n, "ba", 2);
    }
}

static void
test_load_cpython(gconstpointer data)
{
    int protocol = GPOINTER_TO_INT(data);
    g_autofree char *name = g_strdup_printf("proto%d.pickle", protocol);
    g_autoptr(GBytes) bytes = read_fixture(name);
    gsize len = 0;
    const guint8 *p = g_bytes_get_data(bytes, &len);
    g_autoptr(FsimPickle) pickle = load_ok(p, len);
    check_fixture(fsim_pickle_root(pickle), protocol);
}

/* ---- Refused input ------------------------------------------------------------------------- */

static void
test_bad_global(void)
{
    load_bad(B("cos\nsystem\n(S'echo hi'\ntR."), FSIM_TRACE_ERROR_FORBIDDEN, 0, "GLOBAL");
    load_bad(B("\x80\x04\x8c\x02os\x8c\x06system\x93."), FSIM_TRACE_ERROR_FORBIDDEN, 14,
             "STACK_GLOBAL");
}

static void
test_bad_forbidden(void)
{
    static const struct {
        guint8 op;
        const char *name;
    } ops[] = {
        {'c', "GLOBAL"},    {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},
        {'b', "BUILD"},     {'i', "INST"},          {'o', "OBJ"},
        {0x81, "NEWOBJ"},   {0x92, "NEWOBJ_EX"},    {0x82, "EXT1"},
        {0x83, "EXT2"},     {0x84, "EXT4"},         {'P', "PERSID"},
        {'Q', "BINPERSID"}, {0x97, "NEXT_BUFFER"},  {0x98, "READONLY_BUFFER"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(ops); i++) {
        /* Arguments follow, so that only the refusal can stop the load. */
        guint8 bytes[] = {0x80, 0x05, 'N', 'N', ops[i].op, 'a', '\n', 'b', '\n', 0, 0, 0, 0, '.'};
        g_autofree char *needle = g_strdup_printf("%s: opcode refused", ops[i].name);
        load_bad(bytes, sizeof(bytes), FSIM_TRACE_ERROR_FORBIDDEN, 4, needle);
    }
    load_bad(B("\x80\x04\x8f."), FSIM_TRACE_ERROR_TYPE, 2, "EMPTY_SET");
    load_bad(B("\x80\x04(\x91."), FSIM_TRACE_ERROR_TYPE, 3, "FROZENSET");
    load_bad(B("\x80\x04]\x90."), FSIM_TRACE_ERROR_TYPE, 3, "ADDITEMS");
}

static void
test_bad_unknown(void)
{
    load_bad(B("\x80\x02N\xff."), FSIM_TRACE_ERROR_SYNTAX, 3, "unknown opcode 0xff");
    load_bad(B("{\"json\": 1}"), FSIM_TRACE_ERROR_SYNTAX, 0, "unknown opcode 0x7b");
    load_bad(B("\x80\x02N\x99."), FSIM_TRACE_ERROR_SYNTAX, 3, "unknown opcode 0x99");
}

/* Every proper prefix of a valid pickle fails cleanly: EMPTY for no bytes, TRUNCATED else. */
static void
check_every_prefix(const guint8 *data, gsize len)
{
    for (gsize k = 0; k < len; k++) {
        /* A fresh copy of exactly k bytes, so ASan sees any read past the end. */
        g_autofree guint8 *copy = g_memdup2(data, k);
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimPickle) pickle =
            fsim_pickle_load(k > 0 ? copy : (const guint8 *)"", k, NULL, &error);
        g_assert_null(pickle);
        if (k == 0)
            g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_EMPTY);
        else if (!g_error_matches(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_TRUNCATED))
            g_error("prefix of %" G_GSIZE_FORMAT " bytes: %s", k, error->message);
        g_assert_true(g_str_has_prefix(error->message, "byte "));
    }
}

static void
test_bad_truncated(void)
{
    /* Every opcode the loader accepts, at least once. */
    static const char handmade[] =
        "\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01"
        "a\x94]\x94("
        "K\x01M\x02\x01J\x03\x00\x00\x00\x8a\x01\x05\x8b\x01\x00\x00\x00\x06"
        "G\x3f\xf0\x00\x00\x00\x00\x00\x00X\x01\x00\x00\x00x\x8d\x01\x00\x00\x00\x00\x00\x00\x00y"
        "C\x01zB\x01\x00\x00\x00w\x8e\x01\x00\x00\x00\x00\x00\x00\x00v"
        "\x96\x01\x00\x00\x00\x00\x00\x00\x00u"
        "h\x01j\x01\x00\x00\x00q\x05r\x06\x00\x00\x00g5\np8\nI12\nL13\nF1.5\nV\xe9\nS'q'\n"
        "T\x01\x00\x00\x00tU\x01s\x88\x89N)"
        "(K\x01K\x02t(K\x01l(\x8c\x01kK\x01"
        "dK\x01K\x02\x86K\x01K\x02K\x03\x87"
        "]K\x01"
        "a}\x8c\x01kK\x02sK\x09"
        "0(K\x09"
        "1K\x04"
        "2"
        "e\x8c\x01"
        "bK\x01\x85u.";
    g_autoptr(FsimPickle) pickle = load_ok(B(handmade));
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_dict_get(fsim_pickle_root(pickle), "a")), ==, 35);
    check_every_prefix(B(handmade));
    for (int protocol = 0; protocol <= 5; protocol++) {
        g_autofree char *name = g_strdup_printf("proto%d.pickle", protocol);
        g_autoptr(GBytes) bytes = read_fixture(name);
        gsize len = 0;
        const guint8 *p = g_bytes_get_data(bytes, &len);
        check_every_prefix(p, len);
    }
}

static void
test_bad_declared_length(void)
{
    /* Declared lengths far beyond the input fail before any allocation. */
    load_bad(B("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\x7f."), FSIM_TRACE_ERROR_TRUNCATED, 2,
             "BINUNICODE8: declares 9223372036854775807 bytes");
    load_bad(B("\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\xff."), FSIM_TRACE_ERROR_TRUNCATED, 2,
             "BINBYTES8");
    load_bad(B("\x80\x04\x96\x00\x00\x00\x00\x01\x00\x00\x00."), FSIM_TRACE_ERROR_TRUNCATED, 2,
             "BYTEARRAY8");
    load_bad(B("\x80\x04X\xff\xff\xff\xff."), FSIM_TRACE_ERROR_TRUNCATED, 2, "BINUNICODE");
    load_bad(B("\x80\x04"
               "B\x00\x00\x00\x10."),
             FSIM_TRACE_ERROR_TRUNCATED, 2, "BINBYTES");
    load_bad(B("\x80\x04\x8c\x05"
               "abc."),
             FSIM_TRACE_ERROR_TRUNCATED, 2, "SHORT_BINUNICODE");
    load_bad(B("\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x01N."), FSIM_TRACE_ERROR_TRUNCATED, 2,
             "FRAME");
    load_bad(B("\x80\x04\x8b\xff\xff\xff\x7f."), FSIM_TRACE_ERROR_TRUNCATED, 2, "LONG4");
    load_bad(B("\x80\x04\x8b\xff\xff\xff\xff."), FSIM_TRACE_ERROR_SYNTAX, 2, "negative");
    load_bad(B("\x80\x02T\xff\xff\xff\xff."), FSIM_TRACE_ERROR_SYNTAX, 2, "negative");
    load_bad(B("\x80\x02N"), FSIM_TRACE_ERROR_TRUNCATED, 3, "without STOP");
    load_bad(B("I12"), FSIM_TRACE_ERROR_TRUNCATED, 0, "INT");
}

static void
test_bad_deep_nesting(void)
{
    /* 100k EMPTY_LIST, then APPEND each into the one below it: refused at depth 257. */
    const gsize n = 100000;
    GByteArray *a = g_byte_array_new();
    g_byte_array_append(a, (const guint8 *)"\x80\x02", 2);
    for (gsize i = 0; i < n; i++)
        g_byte_array_append(a, (const guint8 *)"]", 1);
    for (gsize i = 0; i + 1 < n; i++)
        g_byte_array_append(a, (const guint8 *)"a", 1);
    g_byte_array_append(a, (const guint8 *)".", 1);
    /* The 256th APPEND makes a list of depth 257. */
    load_bad(a->data, a->len, FSIM_TRACE_ERROR_LIMIT, 2 + n + 255, "nested deeper than 256");
    g_byte_array_unref(a);

    /* Depth 256 is accepted; 257 is not, nor with a lower limit. */
    for (gsize depth = 255; depth <= 257; depth++) {
        g_autoptr(GString) s = g_string_new("\x80\x02");
        for (gsize i = 0; i < depth; i++)
            g_string_append_c(s, ']');
        for (gsize i = 0; i + 1 < depth; i++)
            g_string_append_c(s, 'a');
        g_string_append_c(s, '.');
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimPickle) p = fsim_pickle_load((const guint8 *)s->str, s->len, NULL, &error);
        if (depth <= 256) {
            g_assert_no_error(error);
            g_assert_cmpuint(fsim_pickle_len(fsim_pickle_root(p)), ==, 1);
        } else {
            g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT);
        }
        FsimPickleLimits limits = {.max_depth = 10};
        load_bad_limits((const guint8 *)s->str, s->len, &limits, FSIM_TRACE_ERROR_LIMIT,
                        2 + depth + 9, "deeper than 10");
    }

    /* Tuples, and dicts (through their values and keys), count too. */
    g_autoptr(GString) t = g_string_new("\x80\x02");
    for (int i = 0; i < 300; i++)
        g_string_append(t, "K\x01");
    for (int i = 0; i < 299; i++)
        g_string_append(t, "\x86");
    g_string_append(t, ".");
    load_bad((const guint8 *)t->str, t->len, FSIM_TRACE_ERROR_LIMIT, 2 + 600 + 256, "TUPLE2");

    /* 100k MARKs. */
    g_autoptr(GString) m = g_string_new("\x80\x02");
    for (int i = 0; i < 100000; i++)
        g_string_append_c(m, '(');
    load_bad((const guint8 *)m->str, m->len, FSIM_TRACE_ERROR_LIMIT, 2 + 256, "MARKs open");

    /* 100k dicts, each the value of the previous one's key "k". */
    g_autoptr(GString) d = g_string_new("\x80\x02");
    for (int i = 0; i < 100000; i++)
        g_string_append(d, "}\x8c\x01k");
    g_string_append(d, "}");
    for (int i = 0; i < 100000; i++)
        g_string_append_c(d, 's');
    g_string_append(d, ".");
    load_bad((const guint8 *)d->str, d->len, FSIM_TRACE_ERROR_LIMIT, 2 + 400000 + 1 + 255,
             "SETITEM: containers nested deeper than 256");
    FsimPickleLimits limits = {.max_depth = 3};
    load_bad_limits((const guint8 *)d->str, d->len, &limits, FSIM_TRACE_ERROR_LIMIT,
                    2 + 400000 + 1 + 2, "deeper than 3");
}

static void
test_bad_recursive(void)
{
    /* CPython's pickles of l = []; l.append(l), d = {}; d["self"] = d and t = ([],);
     * t[0].append(t). */
    load_bad(B("\x80\x02]q\x00h\x00"
               "a."),
             FSIM_TRACE_ERROR_FORBIDDEN, 7, "recursive structure");
    load_bad(B("\x80\x04\x95\r\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x04self\x94h\x00s."),
             FSIM_TRACE_ERROR_FORBIDDEN, 22, "recursive structure");
    load_bad(B("\x80\x02]q\x00h\x00\x85q\x01"
               "a0h\x01."),
             FSIM_TRACE_ERROR_FORBIDDEN, 10, "recursive structure");
    /* By DUP, and through another list. */
    load_bad(B("\x80\x02]2a."), FSIM_TRACE_ERROR_FORBIDDEN, 4, "APPEND: recursive");
    load_bad(B("\x80\x02]q\x00]h\x00"
               "aa."),
             FSIM_TRACE_ERROR_FORBIDDEN, 9, "recursive");
    load_bad(B("\x80\x02]q\x00](h\x00"
               "ea."),
             FSIM_TRACE_ERROR_FORBIDDEN, 10, "recursive");
    /* Stricter than needed, and documented: modifying a list after it was shared. */ load_bad(
        B("\x80\x02]q\x00"
          "0h\x00K\x01"
          "a."),
        FSIM_TRACE_ERROR_FORBIDDEN, 10, "recursive");
    load_bad(B("\x80\x02]q\x00\x85h\x00K\x01"
               "a."),
             FSIM_TRACE_ERROR_FORBIDDEN, 10, "recursive");
    /* Sharing a finished list is fine: [x, x] with x = [1]. */
    g_autoptr(FsimPickle) p = load_ok(B("\x80\x02]q\x00(]q\x01K\x01"
                                        "ah\x01"
                                        "e."));
    const FsimPickleValue *l = fsim_pickle_root(p);
    g_assert_true(fsim_pickle_item(l, 0) == fsim_pickle_item(l, 1));
}

static void
test_bad_nodes(void)
{
    /* x = 1, then x = (x, x) a hundred times: 2^101 - 1 values for a walker. */
    g_autoptr(GString) s = g_string_new("\x80\x02K\x01");
    for (int i = 0; i < 100; i++)
        g_string_append(s, "2\x86");
    g_string_append(s, ".");
    /* The default bound is 2^20 + 64 per byte read, the TUPLE2 at byte 43 included: 2^20 +
     * 64 * 44; level 20 has 2^21 - 1 values. */
    load_bad((const guint8 *)s->str, s->len, FSIM_TRACE_ERROR_LIMIT, 5 + 2 * 19,
             "TUPLE2: a full walk would visit more than 1051392 values");
    FsimPickleLimits limits = {.max_nodes = 7};
    load_bad_limits((const guint8 *)s->str, s->len, &limits, FSIM_TRACE_ERROR_LIMIT, 9,
                    "more than 7 values");

    /* Up to the bound it loads, and fsim_pickle_nodes() says how far a walk goes. */
    g_string_truncate(s, 4 + 2 * 19);
    g_string_append(s, ".");
    g_autoptr(FsimPickle) p = load_ok((const guint8 *)s->str, s->len);
    const FsimPickleValue *root = fsim_pickle_root(p);
    g_assert_cmpuint(fsim_pickle_nodes(root), ==, ((uint64_t)1 << 20) - 1);
    g_assert_cmpuint(fsim_pickle_nodes(fsim_pickle_item(root, 0)), ==, ((uint64_t)1 << 19) - 1);
    g_assert_true(fsim_pickle_item(root, 0) == fsim_pickle_item(root, 1));
    g_assert_cmpuint(fsim_pickle_nodes(fsim_pickle_item(fsim_pickle_item(root, 0), 0)), ==,
                     (1 << 18) - 1);
}

static void
test_bad_memo(void)
{
    load_bad(B("\x80\x02h\x00."), FSIM_TRACE_ERROR_SYNTAX, 2, "memo entry 0 was never set");
    load_bad(B("\x80\x02Nq\x00h\x01."), FSIM_TRACE_ERROR_SYNTAX, 5, "entry 1");
    load_bad(B("\x80\x02j\xff\xff\xff\xff."), FSIM_TRACE_ERROR_SYNTAX, 2, "LONG_BINGET");
    load_bad(B("\x80\x02g12345678901234567890123\n."), FSIM_TRACE_ERROR_NUMBER, 2, "GET");
    load_bad(B("\x80\x02g-1\n."), FSIM_TRACE_ERROR_NUMBER, 2, "memo index");
    /* Indices are bounded by the input length: no 32 GiB memo for a 9-byte input. */
    load_bad(B("\x80\x02Nr\xff\xff\xff\xff."), FSIM_TRACE_ERROR_LIMIT, 3,
             "LONG_BINPUT: memo index");
    load_bad(B("\x80\x02Np99999999999\n."), FSIM_TRACE_ERROR_LIMIT, 3, "PUT");
    FsimPickleLimits limits = {.max_memo = 2};
    load_bad_limits(B("\x80\x04N\x94\x94\x94."), &limits, FSIM_TRACE_ERROR_LIMIT, 5, "MEMOIZE");
    load_bad(B("\x80\x02q\x00."), FSIM_TRACE_ERROR_SYNTAX, 2, "underflow");
}

static void
test_bad_stack(void)
{
    load_bad(B("\x80\x02."), FSIM_TRACE_ERROR_SYNTAX, 2, "STOP: unpickling stack underflow");
    load_bad(B("\x80\x02NN."), FSIM_TRACE_ERROR_SYNTAX, 4, "1 values and 0 MARKs");
    load_bad(B("\x80\x02N(."), FSIM_TRACE_ERROR_SYNTAX, 4, "0 values and 1 MARKs");
    load_bad(B("\x80\x02K"), FSIM_TRACE_ERROR_TRUNCATED, 2, "BININT1");
    load_bad(B("\x80\x02Na."), FSIM_TRACE_ERROR_SYNTAX, 3, "APPEND: unpickling stack underflow");
    load_bad(B("\x80\x02](Na."), FSIM_TRACE_ERROR_SYNTAX, 5, "APPEND: unpickling stack");
    load_bad(B("\x80\x02}Ns."), FSIM_TRACE_ERROR_SYNTAX, 4, "SETITEM: unpickling stack");
    load_bad(B("\x80\x02}(Nu."), FSIM_TRACE_ERROR_SYNTAX, 5, "SETITEMS: odd number");
    load_bad(B("\x80\x02(Nu."), FSIM_TRACE_ERROR_SYNTAX, 4, "SETITEMS: unpickling stack");
    load_bad(B("\x80\x02]Ne."), FSIM_TRACE_ERROR_SYNTAX, 4, "APPENDS: could not find MARK");
    load_bad(B("\x80\x02N\x86."), FSIM_TRACE_ERROR_SYNTAX, 3, "TUPLE2: unpickling");
    load_bad(B("\x80\x02N(\x85."), FSIM_TRACE_ERROR_SYNTAX, 4, "TUPLE1: unpickling");
    load_bad(B("\x80\x02"
               "0."),
             FSIM_TRACE_ERROR_SYNTAX, 2, "POP: unpickling");
    load_bad(B("\x80\x02N(2."), FSIM_TRACE_ERROR_SYNTAX, 4, "DUP: unpickling");
    load_bad(B("\x80\x02N1."), FSIM_TRACE_ERROR_SYNTAX, 3, "POP_MARK: could not find MARK");
    load_bad(B("\x80\x02Nt."), FSIM_TRACE_ERROR_SYNTAX, 3, "TUPLE: could not find MARK");
    FsimPickleLimits limits = {.max_stack = 3};
    load_bad_limits(B("\x80\x02NNNN."), &limits, FSIM_TRACE_ERROR_LIMIT, 5, "3 values");
}

static void
test_bad_type(void)
{
    load_bad(B("\x80\x02}Na."), FSIM_TRACE_ERROR_TYPE, 4, "APPEND: the target is a dict");
    load_bad(B("\x80\x02)(Ne."), FSIM_TRACE_ERROR_TYPE, 5, "tuple, not a list");
    load_bad(B("\x80\x02]NNs."), FSIM_TRACE_ERROR_TYPE, 5, "SETITEM: the target is a list");
    load_bad(B("\x80\x02}]Ns."), FSIM_TRACE_ERROR_TYPE, 5, "unhashable dict key of type list");
    load_bad(B("\x80\x02(}Nd."), FSIM_TRACE_ERROR_TYPE, 5, "DICT: unhashable");
}

static void
test_bad_number(void)
{
    load_bad(B("Iabc\n."), FSIM_TRACE_ERROR_NUMBER, 0, "INT: not a decimal integer");
    load_bad(B("I\n."), FSIM_TRACE_ERROR_NUMBER, 0, "INT");
    load_bad(B("L12x3L\n."), FSIM_TRACE_ERROR_NUMBER, 0, "LONG");
    load_bad(B("F1.5x\n."), FSIM_TRACE_ERROR_NUMBER, 0, "FLOAT: bad float");
    load_bad(B("F\n."), FSIM_TRACE_ERROR_NUMBER, 0, "FLOAT");
    load_bad(B("S'abc\n."), FSIM_TRACE_ERROR_SYNTAX, 0, "STRING: the argument must be quoted");
    load_bad(B("S'ab\\'\n."), FSIM_TRACE_ERROR_SYNTAX, 0, "STRING: trailing");
    load_bad(B("S'\\x4'\n."), FSIM_TRACE_ERROR_SYNTAX, 0, "\\x escape");
    load_bad(B("V\\u12\n."), FSIM_TRACE_ERROR_SYNTAX, 0, "truncated \\u");
    load_bad(B("V\\U00110000\n."), FSIM_TRACE_ERROR_SYNTAX, 0, "out of range");

    /* Integers beyond max_long_bytes. */
    FsimPickleLimits limits = {.max_long_bytes = 8};
    load_bad_limits(B("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."), &limits,
                    FSIM_TRACE_ERROR_LIMIT, 2, "LONG1: a 9-byte integer");
    g_autoptr(GString) digits = g_string_new("L");
    for (int i = 0; i < 5000; i++)
        g_string_append_c(digits, '9');
    g_string_append(digits, "\n.");
    load_bad((const guint8 *)digits->str, digits->len, FSIM_TRACE_ERROR_LIMIT, 0,
             "5000-digit integer");
}

static void
test_memory_bound(void)
{
    /* Adversarial shapes: one-item APPENDS, many GETs of one list, tiny strings, small tuples,
     * dict entries; arena bytes stay within a constant times the input. */
    static const struct {
        const char *head, *unit, *tail;
    } shapes[] = {
        {"\x80\x04]",
         "(K\x01"
         "e",
         "."},
        {"\x80\x04]q\x01"
         "0(",
         "h\x01", "t."}, /* no NUL: these are C strings */
        {"\x80\x04](",
         "\x8c\x01"
         "a",
         "e."},
        {"\x80\x04](", "(K\x01K\x02K\x03t", "e."},
        {"\x80\x04}(", "K\x01]", "u."},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
        g_autoptr(GString) s = g_string_new(shapes[i].head);
        for (int k = 0; k < 100000; k++)
            g_string_append(s, shapes[i].unit);
        g_string_append(s, shapes[i].tail);
        g_autoptr(FsimPickle) p = load_ok((const guint8 *)s->str, s->len);
        g_assert_cmpuint(fsim_pickle_len(fsim_pickle_root(p)), ==, 100000);
        g_assert_cmpuint(fsim_pickle_arena_bytes(p), <, 64 * s->len + 64 * 1024);
    }

    g_autoptr(GString) s = g_string_new("\x80\x04](");
    for (int i = 0; i < 200000; i++)
        g_string_append(s, "K\x01");
    g_string_append(s, "e]q\x01");
    for (int i = 0; i < 100000; i++)
        g_string_append(s, "(K\x01"
                           "e");
    g_string_append(s, "a.");
    g_autoptr(FsimPickle) p = load_ok((const guint8 *)s->str, s->len);
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_root(p)), ==, 200001);
    g_assert_cmpuint(fsim_pickle_arena_bytes(p), <, 64 * s->len + 64 * 1024);
}

/* What POP, POP_MARK and replaced memo entries drop is freed: 200,000 dropped values cost what
 * one does (they took 8 MB when nothing was freed), from memory and from a stream. */
static void
test_memory_live(void)
{
    static const char *const units[] = {
        "N0",
        "]0",
        ")0",
        "}0",
        "K\x01"
        "0",
        "\x8c\x03"
        "abc0",
        "(K\x01K\x02]1",
        "(]K\x01"
        "a"
        "1",
        "]q\x01"
        "0",
        "K\x07q\x01"
        "0",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(units); i++) {
        g_autoptr(GString) s = g_string_new("\x80\x02");
        for (int k = 0; k < 200000; k++)
            g_string_append(s, units[i]);
        g_string_append(s, "}.");
        g_autoptr(FsimPickle) p = load_ok((const guint8 *)s->str, s->len);
        if (fsim_pickle_arena_bytes(p) > 256 * 1024)
            g_error("unit %" G_GSIZE_FORMAT ": %" G_GSIZE_FORMAT " bytes for %" G_GSIZE_FORMAT
                    " of input",
                    i, fsim_pickle_arena_bytes(p), s->len);
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimPickle) z = load_stream((const guint8 *)s->str, s->len, TRUE, NULL, &error);
        g_assert_no_error(error);
        /* The 256 KiB input window, and little else. */
        g_assert_cmpuint(fsim_pickle_arena_bytes(z), <, 2 * 1024 * 1024);
        g_assert_cmpuint(fsim_pickle_input_bytes(z), ==, s->len);
    }
}

/* expect_memory: the first chunk is taken as large as the hint says (up to a huge page), where
 * the budget has room for it; without the hint memory follows the live graph. */
static void
test_memory_expect(void)
{
    static const char bytes[] = "\x80\x02]q\x00K\x01"
                                "a.";
    FsimPickleLimits hinted = {.expect_memory = 8 << 20};
    FsimPickleLimits tight = {.expect_memory = 8 << 20, .max_memory = 1 << 20};
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimPickle) plain = load_ok(B(bytes));
    g_autoptr(FsimPickle) big = fsim_pickle_load(B(bytes), &hinted, &error);
    g_autoptr(FsimPickle) small = NULL;

    g_assert_no_error(error);
    small = fsim_pickle_load(B(bytes), &tight, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(fsim_pickle_arena_bytes(plain), <, 64 * 1024);
    g_assert_cmpuint(fsim_pickle_arena_bytes(big), >=, 2 * 1024 * 1024);
    g_assert_cmpuint(fsim_pickle_arena_bytes(small), <, 64 * 1024);
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_root(big)), ==, 1);
}

/* A budget: crossing it is a clean error that names it. */
static void
test_memory_budget(void)
{
    g_autoptr(GString) s = g_string_new("\x80\x02](");
    for (int k = 0; k < 200000; k++)
        g_string_append(s, "K\x01");
    g_string_append(s, "e.");
    FsimPickleLimits limits = {.max_memory = 1024 * 1024};
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimPickle) p = fsim_pickle_load((const guint8 *)s->str, s->len, &limits, &error);
    g_assert_null(p);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT);
    g_assert_nonnull(strstr(error->message, "BININT1: needs more than the memory budget of 1 MiB"));
    g_clear_error(&error);
    g_autoptr(FsimPickle) z = load_stream((const guint8 *)s->str, s->len, TRUE, &limits, &error);
    g_assert_null(z);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT);
    g_clear_error(&error);
    /* A declared length beyond the budget is refused before anything is read. */
    g_autoptr(FsimPickle) big =
        load_stream(B("\x80\x04\x8e\x00\x00\x00\x00\x00\x01\x00\x00xyz"), FALSE, &limits, &error);
    g_assert_null(big);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT);
    g_clear_error(&error);
    /* Within the budget but truncated: found as the bytes run out. */
    limits.max_memory = 0;
    g_autoptr(FsimPickle) cut =
        load_stream(B("\x80\x04\x8e\x00\x00\x10\x00\x00\x00\x00\x00xyz"), FALSE, &limits, &error);
    g_assert_null(cut);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_TRUNCATED);
    g_assert_nonnull(strstr(error->message, "the input has 3"));
    g_clear_error(&error);
    /* max_input bounds what a stream may read. */
    limits.max_input = 100;
    g_autoptr(FsimPickle) longer =
        load_stream((const guint8 *)s->str, s->len, FALSE, &limits, &error);
    g_assert_null(longer);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_LIMIT);
    g_assert_nonnull(strstr(error->message, "larger than 100 bytes"));
}

/* Strings longer than the input window go through it in pieces. */
static void
test_stream_long_str(void)
{
    gsize n = 3 * 1024 * 1024 + 17;
    g_autoptr(GString) s = g_string_new("\x80\x04\x8d");
    for (int k = 0; k < 8; k++)
        g_string_append_c(s, (char)((guint64)n >> (8 * k)));
    for (gsize k = 0; k < n; k++)
        g_string_append_c(s, (char)('a' + k % 26));
    g_string_append(s, ".");
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimPickle) p = load_stream((const guint8 *)s->str, s->len, TRUE, NULL, &error);
    g_assert_no_error(error);
    gsize len = 0;
    const char *str = fsim_pickle_get_str(fsim_pickle_root(p), &len);
    g_assert_cmpuint(len, ==, n);
    g_assert_cmpint(str[n - 1], ==, 'a' + (n - 1) % 26);
    g_assert_cmpmem(str, n, s->str + 11, n);
}

/* ---- Writer -------------------------------------------------------------------------------- */

/* Writes the writer test value; also returns Python's repr() of it in @repr. */
static void
write_sample(FsimPickleWriter *w, GString *repr, gsize n_big)
{
    fsim_pickle_writer_begin(w, FSIM_PICKLE_DICT);
    g_string_append(repr, "{");

    fsim_pickle_writer_str(w, "ints");
    fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
    static const int64_t ints[] = {0,
                                   1,
                                   255,
                                   256,
                                   65535,
                                   65536,
                                   -1,
                                   -256,
                                   INT32_MIN,
                                   INT32_MAX,
                                   (int64_t)INT32_MAX + 1,
                                   (int64_t)INT32_MIN - 1,
                                   INT64_MAX,
                                   INT64_MIN,
                                   -129,
                                   128,
                                   32768};
    g_string_append(repr, "'ints': [");
    for (gsize i = 0; i < G_N_ELEMENTS(ints); i++) {
        fsim_pickle_writer_int(w, ints[i]);
        g_string_append_printf(repr, "%s%" G_GINT64_FORMAT, i ? ", " : "", ints[i]);
    }
    fsim_pickle_writer_uint(w, UINT64_MAX);
    fsim_pickle_writer_uint(w, (uint64_t)1 << 63);
    fsim_pickle_writer_uint(w, 7);
    g_string_append(repr, ", 18446744073709551615, 9223372036854775808, 7]");
    fsim_pickle_writer_end(w, FSIM_PICKLE_LIST);

    fsim_pickle_writer_str(w, "scalars");
    fsim_pickle_writer_begin(w, FSIM_PICKLE_TUPLE);
    fsim_pickle_writer_double(w, 1.5);
    fsim_pickle_writer_double(w, -0.25);
    fsim_pickle_writer_bool(w, TRUE);
    fsim_pickle_writer_bool(w, FALSE);
    fsim_pickle_writer_none(w);
    fsim_pickle_writer_str(w, "h\xc3\xa9llo \xe2\x82\xac");
    fsim_pickle_writer_str_len(w, "a\0b", 3);
    fsim_pickle_writer_str(w, "");
    fsim_pickle_writer_end(w, FSIM_PICKLE_TUPLE);
    g_string_append(repr,
                    ", 'scalars': (1.5, -0.25, True, False, None, 'h\xc3\xa9llo \xe2\x82\xac', "
                    "'a\\x00b', '')");

    fsim_pickle_writer_str(w, "tuples");
    fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
    fsim_pickle_writer_begin(w, FSIM_PICKLE_TUPLE);
    fsim_pickle_writer_end(w, FSIM_PICKLE_TUPLE);
    fsim_pickle_writer_begin(w, FSIM_PICKLE_TUPLE);
    fsim_pickle_writer_int(w, 1);
    fsim_pickle_writer_end(w, FSIM_PICKLE_TUPLE);
    fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
    fsim_pickle_writer_end(w, FSIM_PICKLE_LIST);
    fsim_pickle_writer_begin(w, FSIM_PICKLE_DICT);
    fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
    fsim_pickle_writer_end(w, FSIM_PICKLE_LIST);
    g_string_append(repr, ", 'tuples': [(), (1,), [], {}]");

    /* Batching past 1000 items, and memo indices past 255 (LONG_BINPUT/LONG_BINGET). */
    fsim_pickle_writer_str(w, "big");
    fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
    g_string_append(repr, ", 'big': [");
    for (gsize i = 0; i < n_big; i++) {
        fsim_pickle_writer_begin(w, FSIM_PICKLE_DICT);
        g_autofree char *key = g_strdup_printf("k%" G_GSIZE_FORMAT, i % 400);
        fsim_pickle_writer_str(w, key);
        fsim_pickle_writer_int(w, (int64_t)i);
        fsim_pickle_writer_str(w, "frames");
        fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
        fsim_pickle_writer_end(w, FSIM_PICKLE_LIST);
        fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
        g_string_append_printf(repr, "%s{'%s': %" G_GSIZE_FORMAT ", 'frames': []}", i ? ", " : "",
                               key, i);
    }
    fsim_pickle_writer_end(w, FSIM_PICKLE_LIST);
    g_string_append(repr, "]");

    fsim_pickle_writer_str(w, "wide");
    fsim_pickle_writer_begin(w, FSIM_PICKLE_DICT);
    g_string_append(repr, ", 'wide': {");
    for (gsize i = 0; i < 2500; i++) {
        g_autofree char *key = g_strdup_printf("w%" G_GSIZE_FORMAT, i);
        fsim_pickle_writer_str(w, key);
        fsim_pickle_writer_int(w, -(int64_t)i);
        g_string_append_printf(repr, "%s'%s': %" G_GINT64_FORMAT, i ? ", " : "", key, -(int64_t)i);
    }
    fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
    g_string_append(repr, "}");

    g_autoptr(GString) lng = g_string_new(NULL);
    for (int i = 0; i < 300; i++)
        g_string_append_c(lng, (char)('a' + i % 26));
    fsim_pickle_writer_str(w, "long");
    fsim_pickle_writer_str(w, lng->str);
    g_string_append_printf(repr, ", 'long': '%s'", lng->str);

    fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
    g_string_append(repr, "}");
}

static GBytes *
write_to_bytes(gsize n_big, GString *repr)
{
    g_autoptr(GOutputStream) out = g_memory_output_stream_new_resizable();
    g_autoptr(FsimPickleWriter) w = fsim_pickle_writer_new(out);
    write_sample(w, repr, n_big);
    g_autoptr(GError) error = NULL;
    g_assert_true(fsim_pickle_writer_finish(w, &error));
    g_assert_no_error(error);
    g_output_stream_close(out, NULL, NULL);
    return g_memory_output_stream_steal_as_bytes(G_MEMORY_OUTPUT_STREAM(out));
}

static void
test_writer_roundtrip(void)
{
    g_autoptr(GString) repr = g_string_new(NULL);
    g_autoptr(GBytes) bytes = write_to_bytes(2100, repr);
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(bytes, &len);
    g_assert_cmpmem(data, 2, "\x80\x02", 2);
    g_autoptr(FsimPickle) p = load_ok(data, len);
    const FsimPickleValue *root = fsim_pickle_root(p);
    g_assert_cmpuint(fsim_pickle_len(root), ==, 6);

    const FsimPickleValue *ints = fsim_pickle_dict_get(root, "ints");
    g_assert_cmpuint(fsim_pickle_len(ints), ==, 20);
    g_assert_cmpint(int_of(fsim_pickle_item(ints, 8)), ==, INT32_MIN);
    g_assert_cmpint(int_of(fsim_pickle_item(ints, 10)), ==, (int64_t)INT32_MAX + 1);
    g_assert_cmpint(int_of(fsim_pickle_item(ints, 11)), ==, (int64_t)INT32_MIN - 1);
    g_assert_cmpint(int_of(fsim_pickle_item(ints, 12)), ==, INT64_MAX);
    g_assert_cmpint(int_of(fsim_pickle_item(ints, 13)), ==, INT64_MIN);
    g_assert_cmpint(int_of(fsim_pickle_item(ints, 14)), ==, -129);
    uint64_t u = 0;
    g_assert_true(fsim_pickle_get_uint(fsim_pickle_item(ints, 17), &u));
    g_assert_cmpuint(u, ==, UINT64_MAX);
    g_assert_true(fsim_pickle_get_uint(fsim_pickle_item(ints, 18), &u));
    g_assert_cmpuint(u, ==, (uint64_t)1 << 63);

    const FsimPickleValue *s = fsim_pickle_dict_get(root, "scalars");
    assert_type(s, FSIM_PICKLE_TUPLE);
    g_assert_cmpuint(fsim_pickle_len(s), ==, 8);
    g_assert_cmpfloat(double_of(fsim_pickle_item(s, 0)), ==, 1.5);
    g_assert_cmpfloat(double_of(fsim_pickle_item(s, 1)), ==, -0.25);
    g_assert_true(bool_of(fsim_pickle_item(s, 2)));
    g_assert_false(bool_of(fsim_pickle_item(s, 3)));
    assert_type(fsim_pickle_item(s, 4), FSIM_PICKLE_NONE);
    g_assert_cmpstr(str_of(fsim_pickle_item(s, 5)), ==, "h\xc3\xa9llo \xe2\x82\xac");
    gsize n = 0;
    const char *nul = fsim_pickle_get_str(fsim_pickle_item(s, 6), &n);
    g_assert_cmpmem(nul, n, "a\0b", 3);

    const FsimPickleValue *big = fsim_pickle_dict_get(root, "big");
    g_assert_cmpuint(fsim_pickle_len(big), ==, 2100);
    for (gsize i = 0; i < 2100; i++) {
        g_autofree char *key = g_strdup_printf("k%" G_GSIZE_FORMAT, i % 400);
        const FsimPickleValue *e = fsim_pickle_item(big, i);
        g_assert_cmpint(int_of(fsim_pickle_dict_get(e, key)), ==, (int64_t)i);
        g_assert_cmpuint(fsim_pickle_len(fsim_pickle_dict_get(e, "frames")), ==, 0);
        /* Memoized keys are shared. */
        g_assert_true(fsim_pickle_dict_key(e, 1) ==
                      fsim_pickle_dict_key(fsim_pickle_item(big, 0), 1));
    }
    const FsimPickleValue *wide = fsim_pickle_dict_get(root, "wide");
    g_assert_cmpuint(fsim_pickle_len(wide), ==, 2500);
    g_assert_cmpint(int_of(fsim_pickle_dict_get(wide, "w2499")), ==, -2499);
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_dict_get(root, "long")), ==, 300);
}

static void
test_writer_python(void)
{
    g_autofree char *python = g_find_program_in_path("python3");
    if (python == NULL) {
        g_test_skip("python3 not found");
        return;
    }
    g_autoptr(GString) repr = g_string_new(NULL);
    g_autoptr(GBytes) bytes = write_to_bytes(1500, repr);
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("test-pickle-XXXXXX", &error);
    g_assert_no_error(error);
    g_autofree char *path = g_build_filename(dir, "out.pickle", NULL);
    g_file_set_contents(path, g_bytes_get_data(bytes, NULL), (gssize)g_bytes_get_size(bytes),
                        &error);
    g_assert_no_error(error);

    /* A restricted Unpickler (no globals), the opcodes checked against MemoryViz.js's subset,
     * and the SHA-256 of repr(). */
    static const char script[] =
        "import hashlib, pickle, pickletools, sys\n"
        "class R(pickle.Unpickler):\n"
        "    def find_class(self, module, name):\n"
        "        raise pickle.UnpicklingError('global ' + module + '.' + name)\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "ok = set('} ] ( e a l t d s u q r h j J K M N G X . )'.split()) | "
        "{chr(c) for c in (0x80, 0x8c, 0x8a, 0x94, 0x95, 0x85, 0x86, 0x87, 0x88, 0x89)}\n"
        "bad = {op.name for op, arg, pos in pickletools.genops(data) if op.code not in ok}\n"
        "assert not bad, bad\n"
        "assert data[:2] == b'\\x80\\x02'\n"
        "import io\n"
        "v = R(io.BytesIO(data)).load()\n"
        "print(hashlib.sha256(repr(v).encode('utf-8')).hexdigest())\n";
    g_autofree char *script_copy = g_strdup(script);
    g_autofree char *dash_c = g_strdup("-c");
    char *argv[] = {python, dash_c, script_copy, path, NULL};
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    int status = 0;
    g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error);
    g_assert_no_error(error);
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("python3 failed: %s", err);
    g_autofree char *want = g_compute_checksum_for_string(G_CHECKSUM_SHA256, repr->str, -1);
    g_strstrip(out);
    g_assert_cmpstr(out, ==, want);
    g_unlink(path);
    g_rmdir(dir);
}

static void
test_writer_error(void)
{
    /* A fixed 16-byte buffer: the write fails at the flush in finish(). */
    guint8 buffer[16];
    g_autoptr(GOutputStream) out = g_memory_output_stream_new(buffer, sizeof(buffer), NULL, NULL);
    g_autoptr(FsimPickleWriter) w = fsim_pickle_writer_new(out);
    fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
    for (int i = 0; i < 100; i++)
        fsim_pickle_writer_int(w, i);
    fsim_pickle_writer_end(w, FSIM_PICKLE_LIST);
    g_autoptr(GError) error = NULL;
    g_assert_false(fsim_pickle_writer_finish(w, &error));
    g_assert_error(error, G_IO_ERROR, G_IO_ERROR_NO_SPACE);
    g_clear_error(&error);

    /* Strings longer than the buffer are written straight through. */
    g_autoptr(GOutputStream) out2 = g_memory_output_stream_new_resizable();
    g_autoptr(FsimPickleWriter) w2 = fsim_pickle_writer_new(out2);
    g_autofree char *huge = g_malloc(200000);
    memset(huge, 'x', 199999);
    huge[199999] = '\0';
    fsim_pickle_writer_begin(w2, FSIM_PICKLE_LIST);
    fsim_pickle_writer_str(w2, huge);
    fsim_pickle_writer_str(w2, "after");
    fsim_pickle_writer_end(w2, FSIM_PICKLE_LIST);
    g_assert_true(fsim_pickle_writer_finish(w2, &error));
    g_assert_no_error(error);
    g_output_stream_close(out2, NULL, NULL);
    g_autoptr(GBytes) bytes = g_memory_output_stream_steal_as_bytes(G_MEMORY_OUTPUT_STREAM(out2));
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(bytes, &len);
    g_autoptr(FsimPickle) p = load_ok(data, len);
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_item(fsim_pickle_root(p), 0)), ==, 199999);
    g_assert_cmpstr(str_of(fsim_pickle_item(fsim_pickle_root(p), 1)), ==, "after");
}

static void
test_writer_misuse(void)
{
    g_autoptr(GOutputStream) out = g_memory_output_stream_new_resizable();
    g_autoptr(FsimPickleWriter) w = fsim_pickle_writer_new(out);
    fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
    g_test_expect_message("fragsim", G_LOG_LEVEL_CRITICAL, "*end_dict without*");
    fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
    g_test_assert_expected_messages();
    g_autoptr(GError) error = NULL;
    g_assert_false(fsim_pickle_writer_finish(w, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_FAILED);
}

/* ---- The shared real snapshots ------------------------------------------------------------- */

typedef struct {
    uint64_t nodes, dicts, lists, tuples, strs, str_bytes, bools, ints, int_sum, floats, nones;
} Counts;

/* Counts like Python's walk in the comment below: shared values once per reference. */
static void
count_values(const FsimPickleValue *v, Counts *c)
{
    c->nodes++;
    int64_t i;
    uint64_t u;
    switch (fsim_pickle_type(v)) {
    case FSIM_PICKLE_DICT:
        c->dicts++;
        for (gsize k = 0; k < fsim_pickle_len(v); k++) {
            count_values(fsim_pickle_dict_key(v, k), c);
            count_values(fsim_pickle_dict_value(v, k), c);
        }
        break;
    case FSIM_PICKLE_LIST:
    case FSIM_PICKLE_TUPLE:
        if (fsim_pickle_type(v) == FSIM_PICKLE_LIST)
            c->lists++;
        else
            c->tuples++;
        for (gsize k = 0; k < fsim_pickle_len(v); k++)
            count_values(fsim_pickle_item(v, k), c);
        break;
    case FSIM_PICKLE_STR:
        c->strs++;
        c->str_bytes += fsim_pickle_len(v);
        break;
    case FSIM_PICKLE_BOOL:
        c->bools++;
        break;
    case FSIM_PICKLE_INT:
        c->ints++;
        if (fsim_pickle_get_int(v, &i))
            c->int_sum += (uint64_t)i;
        else if (fsim_pickle_get_uint(v, &u))
            c->int_sum += u;
        break;
    case FSIM_PICKLE_FLOAT:
        c->floats++;
        break;
    case FSIM_PICKLE_NONE:
        c->nones++;
        break;
    default:
        g_assert_not_reached();
    }
}

/*
 * Pinned from CPython 3.11: a pickle.Unpickler whose find_class raises, then a walk counting
 * every reference (dict keys included); int_sum is the sum of all ints modulo 2^64:
 *
 *   def walk(v, c):
 *       c['nodes'] += 1
 *       if type(v) is dict: c['dicts'] += 1; [walk(k, c) or walk(x, c) for k, x in v.items()]
 *       elif type(v) in (list, tuple): c[type(v).__name__ + 's'] += 1; [walk(x, c) for x in v]
 *       elif type(v) is str: c['strs'] += 1; c['str_bytes'] += len(v.encode('utf-8'))
 *       elif type(v) is int: c['ints'] += 1; c['int_sum'] = (c['int_sum'] + v) % 2**64
 *       ...
 */
static const struct {
    const char *name;
    FsimPickleType root;
    gsize root_len;
    gsize segments;
    Counts c;
} shared_traces[] = {
    {"Constructor-Sun__code_location__memory_snapshot.pickle",
     FSIM_PICKLE_DICT,
     4,
     12,
     {4095038, 575458, 8744, 12, 2909886, 44467784, 15, 600922, 13930890962154500571u, 1, 0}},
    {"Maphsge4__select_n__snapshot.ec5be11.pickle",
     FSIM_PICKLE_DICT,
     2,
     136,
     {8146181, 1157499, 10230, 136, 5798532, 76762038, 136, 1179648, 1492991857399525401u, 0, 0}},
    {"MercuryB1__SQAttn__cuda_memory_snapshot.pickle",
     FSIM_PICKLE_DICT,
     4,
     4,
     {4783001, 675055, 9601, 4, 3394483, 75359893, 7, 703850, 18083676805749967279u, 1, 0}},
    {"Muduard__LayoutEditing__memory_snapshot.pkl",
     FSIM_PICKLE_LIST,
     255,
     0,
     {137113, 17636, 2651, 255, 92360, 1928435, 255, 23956, 335277032721091826u, 0, 0}},
    {"Yiyi-philosophy__LLM-inference__oom_snapshot.pickle",
     FSIM_PICKLE_DICT,
     2,
     176,
     {42940, 5701, 1099, 0, 28459, 388298, 0, 7681, 89069294477127284u, 0, 0}},
    {"albi2__thesis-text-to-SQL__dump_snapshot.27df9f5.pickle",
     FSIM_PICKLE_DICT,
     4,
     3,
     {250, 16, 21, 3, 128, 1187, 6, 75, 440389793418u, 1, 0}},
    {"bcrafton__assignment2-systems__memory_snapshot.06f51ae.pickle",
     FSIM_PICKLE_DICT,
     4,
     96,
     {2147428, 296915, 7232, 96, 1524826, 23437351, 100, 318258, 12410535399636687783u, 1, 0}},
    {"kkaitlyn111__cs336-a2-systems__memory_files__memory_ctx128_forward.pickle",
     FSIM_PICKLE_DICT,
     4,
     516,
     {2977411, 419144, 6969, 516, 2110452, 36261854, 519, 439810, 9045519615040114643u, 1, 0}},
    {"silmont2000__assignment2-systems__mem_snapshot.pickle",
     FSIM_PICKLE_DICT,
     4,
     9,
     {25407, 3504, 139, 9, 17820, 477093, 12, 3922, 189563076593871518u, 1, 0}},
};

static void
test_shared_traces(void)
{
    const char *dir = fsim_test_shared_dir();
    if (dir == NULL)
        return;
    g_autoptr(GError) error = NULL;
    g_autoptr(GDir) d = g_dir_open(dir, 0, &error);
    g_assert_no_error(error);
    guint pinned = 0;
    const char *name;
    while ((name = g_dir_read_name(d)) != NULL) {
        if (!g_str_has_suffix(name, ".pickle") && !g_str_has_suffix(name, ".pkl"))
            continue;
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autofree char *contents = NULL;
        gsize len = 0;
        g_file_get_contents(path, &contents, &len, &error);
        g_assert_no_error(error);
        g_autoptr(FsimPickle) p = fsim_pickle_load((const guint8 *)contents, len, NULL, &error);
        if (error != NULL)
            g_error("%s: %s", name, error->message);
        /* Compressed, through the window of the stream loader: the same values. */
        g_autoptr(FsimPickle) z = load_stream((const guint8 *)contents, len, TRUE, NULL, &error);
        if (error != NULL)
            g_error("%s (gzip): %s", name, error->message);
        g_assert_cmpuint(fsim_pickle_nodes(fsim_pickle_root(z)), ==,
                         fsim_pickle_nodes(fsim_pickle_root(p)));
        g_assert_cmpuint(fsim_pickle_input_bytes(z), <=, len);
        const FsimPickleValue *root = fsim_pickle_root(p);
        for (gsize i = 0; i < G_N_ELEMENTS(shared_traces); i++) {
            if (strcmp(shared_traces[i].name, name) != 0)
                continue;
            pinned++;
            assert_type(root, shared_traces[i].root);
            g_assert_cmpuint(fsim_pickle_len(root), ==, shared_traces[i].root_len);
            if (shared_traces[i].root == FSIM_PICKLE_DICT)
                g_assert_cmpuint(fsim_pickle_len(fsim_pickle_dict_get(root, "segments")), ==,
                                 shared_traces[i].segments);
            Counts c = {0};
            count_values(root, &c);
            const Counts *w = &shared_traces[i].c;
            g_assert_cmpuint(c.nodes, ==, w->nodes);
            g_assert_cmpuint(fsim_pickle_nodes(root), ==, w->nodes);
            g_assert_cmpuint(c.dicts, ==, w->dicts);
            g_assert_cmpuint(c.lists, ==, w->lists);
            g_assert_cmpuint(c.tuples, ==, w->tuples);
            g_assert_cmpuint(c.strs, ==, w->strs);
            g_assert_cmpuint(c.str_bytes, ==, w->str_bytes);
            g_assert_cmpuint(c.bools, ==, w->bools);
            g_assert_cmpuint(c.ints, ==, w->ints);
            g_assert_cmpuint(c.int_sum, ==, w->int_sum);
            g_assert_cmpuint(c.floats, ==, w->floats);
            g_assert_cmpuint(c.nones, ==, w->nones);
        }
    }
    if (pinned != G_N_ELEMENTS(shared_traces)) {
        for (gsize i = 0; i < G_N_ELEMENTS(shared_traces); i++) {
            g_autofree char *path = g_build_filename(dir, shared_traces[i].name, NULL);
            if (!g_file_test(path, G_FILE_TEST_EXISTS))
                g_test_message("missing: %s", path);
        }
        g_test_fail_printf("%u of %u pinned snapshots found in %s", pinned,
                           (guint)G_N_ELEMENTS(shared_traces), dir);
    }
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pickle/load/scalars", test_load_scalars);
    g_test_add_func("/pickle/load/ints", test_load_ints);
    g_test_add_func("/pickle/load/strings", test_load_strings);
    g_test_add_func("/pickle/load/text-strings", test_load_text_strings);
    g_test_add_func("/pickle/load/watch-str", test_load_watch_str);
    g_test_add_func("/pickle/load/containers", test_load_containers);
    g_test_add_func("/pickle/load/nested-dict", test_load_nested_dict);
    g_test_add_func("/pickle/load/stack-ops", test_load_stack_ops);
    g_test_add_func("/pickle/load/memo", test_load_memo);
    g_test_add_func("/pickle/load/repeated-lists", test_load_repeated_lists);
    g_test_add_func("/pickle/load/repeated-long-lists", test_load_repeated_long_lists);
    g_test_add_func("/pickle/load/trailing", test_load_trailing);
    g_test_add_func("/pickle/load/fuzz-regressions", test_load_fuzz_regressions);
    for (int protocol = 0; protocol <= 5; protocol++) {
        g_autofree char *path = g_strdup_printf("/pickle/load/cpython-proto%d", protocol);
        g_test_add_data_func(path, GINT_TO_POINTER(protocol), test_load_cpython);
    }
    g_test_add_func("/pickle/load/memory-bound", test_memory_bound);
    g_test_add_func("/pickle/load/memory-live", test_memory_live);
    g_test_add_func("/pickle/load/memory-budget", test_memory_budget);
    g_test_add_func("/pickle/load/memory-expect", test_memory_expect);
    g_test_add_func("/pickle/load/stream-long-str", test_stream_long_str);
    g_test_add_func("/pickle/bad/global", test_bad_global);
    g_test_add_func("/pickle/bad/forbidden", test_bad_forbidden);
    g_test_add_func("/pickle/bad/unknown-opcode", test_bad_unknown);
    g_test_add_func("/pickle/bad/truncated", test_bad_truncated);
    g_test_add_func("/pickle/bad/declared-length", test_bad_declared_length);
    g_test_add_func("/pickle/bad/deep-nesting", test_bad_deep_nesting);
    g_test_add_func("/pickle/bad/recursive", test_bad_recursive);
    g_test_add_func("/pickle/bad/memo", test_bad_memo);
    g_test_add_func("/pickle/bad/nodes", test_bad_nodes);
    g_test_add_func("/pickle/bad/stack", test_bad_stack);
    g_test_add_func("/pickle/bad/type", test_bad_type);
    g_test_add_func("/pickle/bad/number", test_bad_number);
    g_test_add_func("/pickle/writer/roundtrip", test_writer_roundtrip);
    g_test_add_func("/pickle/writer/python", test_writer_python);
    g_test_add_func("/pickle/writer/write-error", test_writer_error);
    g_test_add_func("/pickle/writer/misuse", test_writer_misuse);
    g_test_add_func("/pickle/shared-traces", test_shared_traces);
    return g_test_run();
}
