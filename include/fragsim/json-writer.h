/* SPDX-License-Identifier: MIT */
/*
 * fragsim: writing JSON text, one value after another.
 *
 * A writer appends to a string as it is called, in the order of the output: begin an object,
 * name a member and add its value, end the object.  Nothing is kept but the open containers, so
 * a writer costs no tree and no library beyond GLib.  The text is that of json-glib's generator,
 * which fragsim used before, byte for byte:
 *
 *   - compact: no white space at all; pretty: two spaces of indentation per level, one member or
 *     element per line, `"name" : value`, an empty array `[]` and an empty object `{` and `}`
 *     around the indentation of its level;
 *   - strings: `"` and `\` escaped with a backslash, \b \t \n \f \r by name, the other control
 *     characters below 0x1f and 0x7f as \u00XX (0x1f itself is written as it is, as json-glib
 *     does), every other byte (UTF-8 included) as it is;
 *   - doubles: printf's %.17g in the C locale, with ".0" appended where that has no point
 *     (so 1e+20.0, nan.0 and inf.0 too); integers in decimal.
 *
 *     g_autoptr(FsimJsonWriter) w = fsim_json_writer_new(FALSE);
 *
 *     fsim_json_begin_object(w);
 *     fsim_json_set_member_name(w, "events");
 *     fsim_json_add_int_value(w, 42);
 *     fsim_json_end_object(w);
 *     puts(fsim_json_writer_text(w));          // {"events":42}
 *
 * Each member of an object is named once, before its value; names are not checked for
 * repetition.
 */
#pragma once

#include <glib.h>

#include <stdint.h>

G_BEGIN_DECLS

typedef struct _FsimJsonWriter FsimJsonWriter;

/* A writer with nothing written; @pretty: indented over lines, else compact. */
FsimJsonWriter *fsim_json_writer_new(gboolean pretty);
void fsim_json_writer_free(FsimJsonWriter *writer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimJsonWriter, fsim_json_writer_free)

/* The text written so far, owned by @writer (complete once every container has ended). */
const char *fsim_json_writer_text(const FsimJsonWriter *writer);
/* Frees @writer and returns its text, which the caller frees with g_free(). */
char *fsim_json_writer_free_to_text(FsimJsonWriter *writer);

void fsim_json_begin_object(FsimJsonWriter *writer);
void fsim_json_end_object(FsimJsonWriter *writer);
void fsim_json_begin_array(FsimJsonWriter *writer);
void fsim_json_end_array(FsimJsonWriter *writer);

/* Names the next member of the innermost open object; its value is added next. */
void fsim_json_set_member_name(FsimJsonWriter *writer, const char *name);

void fsim_json_add_int_value(FsimJsonWriter *writer, int64_t value);
void fsim_json_add_double_value(FsimJsonWriter *writer, double value);
void fsim_json_add_boolean_value(FsimJsonWriter *writer, gboolean value);
/* @value: (nullable): NULL adds null. */
void fsim_json_add_string_value(FsimJsonWriter *writer, const char *value);
void fsim_json_add_null_value(FsimJsonWriter *writer);

G_END_DECLS
