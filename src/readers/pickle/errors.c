/* SPDX-License-Identifier: MIT */
/*
 * fragsim's safe unpickler: how the opcode machine reports a failure.  Every message starts with
 * the byte offset of the opcode that failed and its name as Lib/pickletools.py spells it; these
 * run only on the way out, so they live apart from the opcode loop (machine.c).
 */
#include <glib.h>

#include <stdarg.h>

#include "fragsim/trace.h"

#include "machine.h"

/* clang-format off */
static const char *const opcode_names[256] = {
    ['('] = "MARK", ['.'] = "STOP", ['0'] = "POP", ['1'] = "POP_MARK", ['2'] = "DUP",
    ['F'] = "FLOAT", ['I'] = "INT", ['J'] = "BININT", ['K'] = "BININT1", ['L'] = "LONG",
    ['M'] = "BININT2", ['N'] = "NONE", ['P'] = "PERSID", ['Q'] = "BINPERSID", ['R'] = "REDUCE",
    ['S'] = "STRING", ['T'] = "BINSTRING", ['U'] = "SHORT_BINSTRING", ['V'] = "UNICODE",
    ['X'] = "BINUNICODE", ['a'] = "APPEND", ['b'] = "BUILD", ['c'] = "GLOBAL", ['d'] = "DICT",
    ['}'] = "EMPTY_DICT", ['e'] = "APPENDS", ['g'] = "GET", ['h'] = "BINGET", ['i'] = "INST",
    ['j'] = "LONG_BINGET", ['l'] = "LIST", [']'] = "EMPTY_LIST", ['o'] = "OBJ", ['p'] = "PUT",
    ['q'] = "BINPUT", ['r'] = "LONG_BINPUT", ['s'] = "SETITEM", ['t'] = "TUPLE",
    [')'] = "EMPTY_TUPLE", ['u'] = "SETITEMS", ['G'] = "BINFLOAT", ['B'] = "BINBYTES",
    ['C'] = "SHORT_BINBYTES",
    [0x80] = "PROTO", [0x81] = "NEWOBJ", [0x82] = "EXT1", [0x83] = "EXT2", [0x84] = "EXT4",
    [0x85] = "TUPLE1", [0x86] = "TUPLE2", [0x87] = "TUPLE3", [0x88] = "NEWTRUE",
    [0x89] = "NEWFALSE", [0x8a] = "LONG1", [0x8b] = "LONG4", [0x8c] = "SHORT_BINUNICODE",
    [0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8", [0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS",
    [0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX", [0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE",
    [0x95] = "FRAME", [0x96] = "BYTEARRAY8", [0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};
/* clang-format on */

gboolean
load_fail(Loader *l, FsimTraceError code, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    g_autofree char *message = g_strdup_vprintf(format, args);
    va_end(args);
    g_set_error(l->error, FSIM_TRACE_ERROR, code, "byte %" G_GUINT64_FORMAT ": %s", l->op_offset,
                message);
    return FALSE;
}

const char *
op_name(const Loader *l)
{
    const char *name = opcode_names[l->op];
    return name != NULL ? name : "?";
}

/* A record (records.c) pushed a second time, or a container holding one: each record has one
 * place in the result. */
gboolean
record_shared(Loader *l)
{
    return load_fail(l, FSIM_TRACE_ERROR_SYNTAX,
                     "%s: a record, or a container holding one, is referred to twice", op_name(l));
}

/* SETITEMS into a record. */
gboolean
record_modified(Loader *l)
{
    return load_fail(l, FSIM_TRACE_ERROR_FORBIDDEN, "%s: a record is modified after it was read",
                     op_name(l));
}
