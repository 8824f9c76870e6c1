/* SPDX-License-Identifier: MIT */
/*
 * The JSON writer (fragsim/json-writer.h): its text is json-glib's generator's, byte for byte,
 * which these expectations were taken from.
 */
#include <glib.h>

#include <math.h>
#include <string.h>

#include "fragsim/json-writer.h"

/* One of everything: nested and empty containers, each kind of value. */
static void
write_sample(FsimJsonWriter *w)
{
    fsim_json_begin_object(w);
    fsim_json_set_member_name(w, "name");
    fsim_json_add_string_value(w, "caching");
    fsim_json_set_member_name(w, "empty_array");
    fsim_json_begin_array(w);
    fsim_json_end_array(w);
    fsim_json_set_member_name(w, "empty_object");
    fsim_json_begin_object(w);
    fsim_json_end_object(w);
    fsim_json_set_member_name(w, "values");
    fsim_json_begin_array(w);
    fsim_json_add_int_value(w, -7);
    fsim_json_add_double_value(w, 0.5);
    fsim_json_add_boolean_value(w, TRUE);
    fsim_json_add_boolean_value(w, FALSE);
    fsim_json_add_null_value(w);
    fsim_json_add_string_value(w, NULL);
    fsim_json_begin_object(w);
    fsim_json_set_member_name(w, "inner");
    fsim_json_begin_object(w);
    fsim_json_end_object(w);
    fsim_json_set_member_name(w, "");
    fsim_json_add_int_value(w, 1);
    fsim_json_end_object(w);
    fsim_json_begin_array(w);
    fsim_json_begin_array(w);
    fsim_json_end_array(w);
    fsim_json_end_array(w);
    fsim_json_end_array(w);
    fsim_json_end_object(w);
}

static void
test_compact(void)
{
    g_autoptr(FsimJsonWriter) w = fsim_json_writer_new(FALSE);

    write_sample(w);
    g_assert_cmpstr(fsim_json_writer_text(w), ==,
                    "{\"name\":\"caching\",\"empty_array\":[],\"empty_object\":{},"
                    "\"values\":[-7,0.5,true,false,null,null,{\"inner\":{},\"\":1},[[]]]}");
}

static void
test_pretty(void)
{
    FsimJsonWriter *w = fsim_json_writer_new(TRUE);
    g_autofree char *text = NULL;

    write_sample(w);
    text = fsim_json_writer_free_to_text(w);
    g_assert_cmpstr(text, ==,
                    "{\n"
                    "  \"name\" : \"caching\",\n"
                    "  \"empty_array\" : [],\n"
                    "  \"empty_object\" : {  },\n"
                    "  \"values\" : [\n"
                    "    -7,\n"
                    "    0.5,\n"
                    "    true,\n"
                    "    false,\n"
                    "    null,\n"
                    "    null,\n"
                    "    {\n"
                    "      \"inner\" : {      },\n"
                    "      \"\" : 1\n"
                    "    },\n"
                    "    [\n"
                    "      []\n"
                    "    ]\n"
                    "  ]\n"
                    "}");
}

/* A root that is an empty object or array, or a lone value. */
static void
test_roots(void)
{
    for (int pretty = 0; pretty <= 1; pretty++) {
        g_autoptr(FsimJsonWriter) object = fsim_json_writer_new(pretty);
        g_autoptr(FsimJsonWriter) array = fsim_json_writer_new(pretty);
        g_autoptr(FsimJsonWriter) value = fsim_json_writer_new(pretty);

        fsim_json_begin_object(object);
        fsim_json_end_object(object);
        g_assert_cmpstr(fsim_json_writer_text(object), ==, "{}");
        fsim_json_begin_array(array);
        fsim_json_end_array(array);
        g_assert_cmpstr(fsim_json_writer_text(array), ==, "[]");
        fsim_json_add_int_value(value, 3);
        g_assert_cmpstr(fsim_json_writer_text(value), ==, "3");
    }
}

/* Each byte in a string, and in a member name, which is escaped the same way. */
static void
test_escaping(void)
{
    for (int c = 1; c < 256; c++) {
        char s[2] = {(char)c, '\0'};
        g_autoptr(FsimJsonWriter) w = fsim_json_writer_new(FALSE);
        g_autofree char *expected = NULL;
        const char *named = strchr("\bb\tt\nn\ff\rr\"\"\\\\", c);

        if (named != NULL && c != 'b' && c != 't' && c != 'n' && c != 'f' && c != 'r')
            expected = g_strdup_printf("\\%c", named[1]);
        else if ((c < 0x1f) || c == 0x7f)
            expected = g_strdup_printf("\\u%04x", (unsigned)c);
        else
            expected = g_strdup(s);
        fsim_json_begin_object(w);
        fsim_json_set_member_name(w, s);
        fsim_json_add_string_value(w, s);
        fsim_json_end_object(w);
        {
            g_autofree char *want = g_strdup_printf("{\"%s\":\"%s\"}", expected, expected);

            g_assert_cmpstr(fsim_json_writer_text(w), ==, want);
        }
    }
}

static void
test_utf8(void)
{
    g_autoptr(FsimJsonWriter) w = fsim_json_writer_new(FALSE);

    fsim_json_begin_array(w);
    fsim_json_add_string_value(w, "caf\xc3\xa9 \xe2\x82\xac a/b \xff");
    fsim_json_end_array(w);
    g_assert_cmpstr(fsim_json_writer_text(w), ==, "[\"caf\xc3\xa9 \xe2\x82\xac a/b \xff\"]");
}

static void
test_numbers(void)
{
    static const struct {
        double value;
        const char *text;
    } doubles[] = {
        {0, "0.0"},
        {1, "1.0"},
        {-1, "-1.0"},
        {0.1, "0.10000000000000001"},
        {1.0 / 3, "0.33333333333333331"},
        {3.14159, "3.1415899999999999"},
        {-0.0, "-0.0"},
        {1e20, "1e+20.0"},
        {1e21, "1e+21.0"},
        {1e-7, "9.9999999999999995e-08"},
        {123456789012345678.0, "1.2345678901234568e+17"},
        {2.5e-300, "2.5e-300"},
        {NAN, "nan.0"},
        {INFINITY, "inf.0"},
    };
    static const struct {
        int64_t value;
        const char *text;
    } ints[] = {
        {0, "0"},
        {9, "9"},
        {-10, "-10"},
        {INT64_MAX, "9223372036854775807"},
        {INT64_MIN, "-9223372036854775808"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(doubles); i++) {
        g_autoptr(FsimJsonWriter) w = fsim_json_writer_new(FALSE);

        fsim_json_add_double_value(w, doubles[i].value);
        g_assert_cmpstr(fsim_json_writer_text(w), ==, doubles[i].text);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(ints); i++) {
        g_autoptr(FsimJsonWriter) w = fsim_json_writer_new(TRUE);

        fsim_json_add_int_value(w, ints[i].value);
        g_assert_cmpstr(fsim_json_writer_text(w), ==, ints[i].text);
    }
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/json-writer/compact", test_compact);
    g_test_add_func("/json-writer/pretty", test_pretty);
    g_test_add_func("/json-writer/roots", test_roots);
    g_test_add_func("/json-writer/escaping", test_escaping);
    g_test_add_func("/json-writer/utf8", test_utf8);
    g_test_add_func("/json-writer/numbers", test_numbers);
    return g_test_run();
}
