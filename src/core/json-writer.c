/* SPDX-License-Identifier: MIT */
/*
 * JSON text written as it is built (fragsim/json-writer.h has the format).
 */
#include "fragsim/json-writer.h"

#include <glib.h>

#include <string.h>

/* An open container: an object or an array, and whether anything is in it yet. */
typedef struct {
    gboolean object;
    gboolean filled;
} Level;

struct _FsimJsonWriter {
    GString *text;
    GArray *levels; /* of Level, the innermost last */
    gboolean pretty;
};

FsimJsonWriter *
fsim_json_writer_new(gboolean pretty)
{
    FsimJsonWriter *w = g_new0(FsimJsonWriter, 1);

    w->text = g_string_sized_new(256);
    w->levels = g_array_sized_new(FALSE, FALSE, sizeof(Level), 8);
    w->pretty = pretty;
    return w;
}

void
fsim_json_writer_free(FsimJsonWriter *w)
{
    if (w == NULL)
        return;
    g_string_free(w->text, TRUE);
    g_array_unref(w->levels);
    g_free(w);
}

const char *
fsim_json_writer_text(const FsimJsonWriter *w)
{
    return w->text->str;
}

char *
fsim_json_writer_free_to_text(FsimJsonWriter *w)
{
    char *text = g_string_free(w->text, FALSE);

    g_array_unref(w->levels);
    g_free(w);
    return text;
}

static Level *
innermost(FsimJsonWriter *w)
{
    return w->levels->len > 0 ? &g_array_index(w->levels, Level, w->levels->len - 1) : NULL;
}

/* Two spaces per level, when pretty. */
static void
indent(FsimJsonWriter *w, guint levels)
{
    if (w->pretty) {
        gsize at = w->text->len;

        g_string_set_size(w->text, at + 2 * (gsize)levels);
        memset(w->text->str + at, ' ', 2 * (gsize)levels);
    }
}

/* What goes before an item of the innermost container: its separator and indentation. */
static void
open_item(FsimJsonWriter *w, Level *level)
{
    if (level->filled)
        g_string_append_c(w->text, ',');
    if (w->pretty) {
        g_string_append_c(w->text, '\n');
        indent(w, w->levels->len);
    }
    level->filled = TRUE;
}

/* Before a value: in an array it is an element (in an object its name went first). */
static void
open_value(FsimJsonWriter *w)
{
    Level *level = innermost(w);

    if (level != NULL && !level->object)
        open_item(w, level);
}

/* The quoted, escaped @s (json-glib's escaping: 0x1f is not escaped, 0x7f is). */
static void
append_string(GString *out, const char *s)
{
    const char *run = s;
    const char *p = s;

    g_string_append_c(out, '"');
    for (; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        const char *named = NULL;
        char code[8];

        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        if (c == 0x1f)
            continue;
        g_string_append_len(out, run, p - run);
        run = p + 1;
        switch (c) {
        case '"':
            named = "\\\"";
            break;
        case '\\':
            named = "\\\\";
            break;
        case '\b':
            named = "\\b";
            break;
        case '\f':
            named = "\\f";
            break;
        case '\n':
            named = "\\n";
            break;
        case '\r':
            named = "\\r";
            break;
        case '\t':
            named = "\\t";
            break;
        default:
            g_snprintf(code, sizeof(code), "\\u%04x", c);
            named = code;
            break;
        }
        g_string_append(out, named);
    }
    g_string_append_len(out, run, p - run);
    g_string_append_c(out, '"');
}

static void
begin(FsimJsonWriter *w, gboolean object)
{
    Level level = {object, FALSE};

    open_value(w);
    g_string_append_c(w->text, object ? '{' : '[');
    g_array_append_val(w->levels, level);
}

/* Closes the innermost container, an object if @object; json-glib writes an empty object's
 * indentation between its braces, and nothing between an empty array's brackets. */
static void
end(FsimJsonWriter *w, gboolean object)
{
    Level *innermost_level = innermost(w);
    Level level;

    g_return_if_fail(innermost_level != NULL && innermost_level->object == object);
    level = *innermost_level;
    g_array_set_size(w->levels, w->levels->len - 1);
    if (level.filled || object) {
        if (level.filled && w->pretty)
            g_string_append_c(w->text, '\n');
        indent(w, w->levels->len);
    }
    g_string_append_c(w->text, object ? '}' : ']');
}

void
fsim_json_begin_object(FsimJsonWriter *w)
{
    begin(w, TRUE);
}

void
fsim_json_end_object(FsimJsonWriter *w)
{
    end(w, TRUE);
}

void
fsim_json_begin_array(FsimJsonWriter *w)
{
    begin(w, FALSE);
}

void
fsim_json_end_array(FsimJsonWriter *w)
{
    end(w, FALSE);
}

void
fsim_json_set_member_name(FsimJsonWriter *w, const char *name)
{
    Level *level = innermost(w);

    g_return_if_fail(level != NULL && level->object);
    open_item(w, level);
    append_string(w->text, name);
    g_string_append(w->text, w->pretty ? " : " : ":");
}

void
fsim_json_add_int_value(FsimJsonWriter *w, int64_t value)
{
    char digits[24];
    char *p = digits + sizeof(digits);
    /* the magnitude as unsigned, so that INT64_MIN has one */
    uint64_t magnitude = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;

    open_value(w);
    do {
        *--p = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude > 0);
    if (value < 0)
        *--p = '-';
    g_string_append_len(w->text, p, digits + sizeof(digits) - p);
}

void
fsim_json_add_double_value(FsimJsonWriter *w, double value)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    open_value(w);
    g_ascii_dtostr(buf, sizeof(buf), value);
    g_string_append(w->text, buf);
    /* json-glib's mark of a double: ".0" wherever %.17g wrote no point, exponents included */
    if (strchr(buf, '.') == NULL)
        g_string_append(w->text, ".0");
}

void
fsim_json_add_boolean_value(FsimJsonWriter *w, gboolean value)
{
    open_value(w);
    g_string_append(w->text, value ? "true" : "false");
}

void
fsim_json_add_string_value(FsimJsonWriter *w, const char *value)
{
    if (value == NULL) {
        fsim_json_add_null_value(w);
        return;
    }
    open_value(w);
    append_string(w->text, value);
}

void
fsim_json_add_null_value(FsimJsonWriter *w)
{
    open_value(w);
    g_string_append(w->text, "null");
}
