/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the safe unpickler (src/readers/pickle/): loads the input, checks the
 * error contract when it fails, and otherwise walks the whole value tree through every accessor,
 * checking that the depth and walk-size limits hold, then frees it.  Build with
 * -DFRAGSIM_FUZZ=ON and clang; tests/fuzz/README.md says how to run it.
 */
#include <glib.h>

#include <gio/gio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fragsim/types.h"

#include "readers/pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_DEPTH 64

static void
check(gboolean ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-pickle: check failed: %s\n", what);
        abort();
    }
}

/* Walks @v through every accessor; returns the values visited, which must match
 * fsim_pickle_nodes(). */
static uint64_t
walk(const FsimPickleValue *v, guint depth)
{
    check(v != NULL, "non-NULL value");
    check(depth <= FUZZ_MAX_DEPTH + 1, "depth limit");
    FsimPickleType type = fsim_pickle_type(v);
    gsize len = fsim_pickle_len(v);
    int64_t i64;
    uint64_t u64;
    double d;
    gboolean b;
    gsize n = 0;
    (void)fsim_pickle_offset(v);
    check(fsim_pickle_type_name(type) != NULL, "type name");
    check(fsim_pickle_get_bool(v, &b) == (type == FSIM_PICKLE_BOOL), "get_bool");
    gboolean is_int = fsim_pickle_get_int(v, &i64);
    gboolean is_uint = fsim_pickle_get_uint(v, &u64);
    check(!(is_int || is_uint) || type == FSIM_PICKLE_INT, "get_int on an int");
    check(type != FSIM_PICKLE_INT || is_int || is_uint, "an int is int64 or uint64");
    if (is_int && is_uint)
        check((uint64_t)i64 == u64, "int and uint agree");
    gboolean is_number =
        type == FSIM_PICKLE_INT || type == FSIM_PICKLE_BIGINT || type == FSIM_PICKLE_FLOAT;
    check(fsim_pickle_get_double(v, &d) == is_number, "get_double");
    const char *s = fsim_pickle_get_str(v, &n);
    check((s != NULL) == (type == FSIM_PICKLE_STR), "get_str");
    if (s != NULL) {
        check(n == len && s[n] == '\0', "str length and NUL");
        check(fsim_pickle_str_equal(v, s) == (strlen(s) == n), "str_equal");
    }
    const guint8 *bytes = fsim_pickle_get_bytes(v, &n);
    check((bytes != NULL) == (type == FSIM_PICKLE_BYTES), "get_bytes");
    if (bytes != NULL)
        check(n == len && bytes[n] == 0, "bytes length and NUL");
    const guint8 *big = fsim_pickle_get_bigint(v, &n);
    check((big != NULL) == (type == FSIM_PICKLE_BIGINT), "get_bigint");
    if (big != NULL)
        check(n == len && n >= 9, "bigint length");

    uint64_t visited = 1;
    const FsimPickleValue *fields[FSIM_PICKLE_RECORD_KEYS];
    gsize pairs = 0;
    if (fsim_pickle_record(v, &pairs, fields)) {
        /* a record: an empty dict to the accessors; its values, not its other keys, walked */
        check(type == FSIM_PICKLE_DICT && len == 0 && pairs > 0, "a record is an empty dict");
        check(fsim_pickle_dict_key(v, 0) == NULL && fsim_pickle_dict_get(v, "action") == NULL,
              "a record's accessors");
        FsimPickleFields view;
        check(fsim_pickle_record_fields(v, &view) && view.pairs == pairs, "record_fields");
        for (gsize k = 0; k < FSIM_PICKLE_RECORD_KEYS; k++) {
            uint64_t u = 0;
            gboolean field_is_uint = fsim_pickle_get_uint(fields[k], &u);
            check(view.values[k] == fields[k], "record_fields' values");
            check(!!(view.is_none & (1u << k)) ==
                      (fields[k] == NULL || fsim_pickle_type(fields[k]) == FSIM_PICKLE_NONE),
                  "record_fields' Nones");
            check(!!(view.is_uint & (1u << k)) == field_is_uint &&
                      (!field_is_uint || view.uints[k] == u),
                  "record_fields' ints");
            if (fields[k] != NULL)
                visited += walk(fields[k], depth + 1);
        }
        check(visited <= fsim_pickle_nodes(v), "a record's values within its node count");
        return fsim_pickle_nodes(v);
    }
    switch (type) {
    case FSIM_PICKLE_LIST:
    case FSIM_PICKLE_TUPLE:
        for (gsize k = 0; k < len; k++)
            visited += walk(fsim_pickle_item(v, k), depth + 1);
        check(fsim_pickle_item(v, len) == NULL, "item past the end");
        check(fsim_pickle_dict_key(v, 0) == NULL, "dict_key on a sequence");
        break;
    case FSIM_PICKLE_DICT:
        for (gsize k = 0; k < len; k++) {
            const FsimPickleValue *key = fsim_pickle_dict_key(v, k);
            visited += walk(key, depth + 1);
            visited += walk(fsim_pickle_dict_value(v, k), depth + 1);
            gsize name_len = 0;
            const char *name = fsim_pickle_get_str(key, &name_len);
            /* A key with a NUL inside cannot be looked up by a C string. */
            if (name != NULL && strlen(name) == name_len)
                check(fsim_pickle_dict_get(v, name) != NULL, "dict_get finds a str key");
        }
        check(fsim_pickle_dict_key(v, len) == NULL, "dict_key past the end");
        check(fsim_pickle_dict_value(v, len) == NULL, "dict_value past the end");
        check(fsim_pickle_item(v, 0) == NULL, "item on a dict");
        (void)fsim_pickle_dict_get(v, "address");
        break;
    default:
        check(fsim_pickle_item(v, 0) == NULL && fsim_pickle_dict_get(v, "x") == NULL,
              "container accessors on a scalar");
        break;
    }
    check(visited == fsim_pickle_nodes(v), "fsim_pickle_nodes counts the walk");
    return visited;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Tight limits keep each run short; the defaults are exercised by the unit tests. */
    FsimPickleLimits limits = {
        .max_depth = FUZZ_MAX_DEPTH,
        .max_nodes = 16 * (uint64_t)size + 4096,
        .max_stack = 1 << 16,
        /* half the inputs as a snapshot reader loads them: the memo's garbage goes at the end */
        .expect_memory = (size & 1) ? 2 * size : 0,
    };
    GError *error = NULL;
    FsimPickle *pickle = fsim_pickle_load(data, size, &limits, &error);
    if (pickle == NULL) {
        /* With records, it fails too. */
        static const char *const keys[] = {"action", "addr", "size", "frames", NULL};
        FsimPickleLimits with = limits;
        GError *again = NULL;
        with.record_keys = keys;
        FsimPickle *records = fsim_pickle_load(data, size, &with, &again);
        check(records == NULL && again != NULL, "records: fails where a load without fails");
        g_error_free(again);
        check(error != NULL && error->domain == FSIM_TRACE_ERROR, "an error in the domain");
        check(g_str_has_prefix(error->message, "byte "), "message starts with the offset");
        g_error_free(error);
        return 0;
    }
    check(error == NULL, "no error on success");
    const FsimPickleValue *root = fsim_pickle_root(pickle);
    check(walk(root, 1) <= limits.max_nodes, "walk within max_nodes");
    /* (the 96 KiB of the repeated lists' cache, lists.c, and a little more) */
    check(fsim_pickle_arena_bytes(pickle) <= 256 * (gsize)size + 160 * 1024, "arena bounded");
    /* The stream loader, through a window of a few bytes (FSIM_PICKLE_INPUT_BLOCK), reads the
     * same values.  (The converse does not hold: only a loader holding the whole input checks a
     * FRAME's length, or bounds memo indices by the input length.) */
    GInputStream *in = g_memory_input_stream_new_from_data(data, (gssize)size, NULL);
    FsimPickle *streamed = fsim_pickle_load_stream(in, &limits, &error);
    check(streamed != NULL, "a stream loads what memory loads");
    check(fsim_pickle_nodes(fsim_pickle_root(streamed)) == fsim_pickle_nodes(root),
          "the stream's values match");
    check(fsim_pickle_input_bytes(streamed) == fsim_pickle_input_bytes(pickle),
          "the stream stops at STOP");
    fsim_pickle_free(streamed);
    g_object_unref(in);
    /* With records (as the snapshot reader loads): the same node count, or a failure for a
     * record referred to twice. */
    static const char *const record_keys[] = {"action",  "addr",   "size", "stream",
                                              "time_us", "frames", NULL};
    limits.record_keys = record_keys;
    limits.shared_record_lists = TRUE;
    FsimPickle *records = fsim_pickle_load(data, size, &limits, &error);
    if (records == NULL) {
        check(error != NULL && strstr(error->message, ": a record") != NULL,
              "records fail only for a record referred to twice or modified");
        g_clear_error(&error);
    } else {
        check(walk(fsim_pickle_root(records), 1) == fsim_pickle_nodes(root),
              "records: the same node count");
        check(fsim_pickle_input_bytes(records) == fsim_pickle_input_bytes(pickle),
              "records: the same end");
        fsim_pickle_free(records);
    }
    fsim_pickle_free(pickle);
    return 0;
}
