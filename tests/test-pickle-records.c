/* SPDX-License-Identifier: MIT */
/*
 * Tests of records (FsimPickleLimits.record_keys, fsim_pickle_record()): dicts read straight
 * from the input into the values of a few keys.  Each pickle is loaded with and without records:
 * a record's values are those of the dict it stands for (types, values, offsets), its node count
 * is the dict's, a dict of another form is built as usual (and what a record read had made before
 * it found the form is undone), and a record referred to twice or added to fails the load.  The
 * snapshot reader's use of them (with its fallback to a load without records) is tested through
 * fsim_trace_open() on a snapshot that refers to an entry twice.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>

#include "fragsim/trace.h"
#include "fragsim/types.h"

#include "readers/pickle.h"
#include "test-util.h"

#define B(literal) (const guint8 *)(literal), sizeof(literal) - 1

static const char *const keys[] = {"action", "addr", "size", "stream", "frames", NULL};

/* Two entries, written as CPython writes them (protocol 4): memo 0 the list, 1 the first dict,
 * 2-6 the key and value strs, 7 its frames, 8 the second dict, 9 its frames. */
#define ENTRIES                                                             \
    "\x80\x04]\x94("                                                        \
    "}\x94(\x8c\x06"                                                        \
    "action\x94\x8c\x05"                                                    \
    "alloc\x94\x8c\x04"                                                     \
    "addr\x94\x8a\x05\x00\x00\x00\x00\x01\x8c\x04size\x94M\x00\x02\x8c\x06" \
    "frames\x94]\x94u"                                                      \
    "}\x94(h\x02h\x03h\x04J\xf0\xff\xff\xffh\x05K\x07h\x06]\x94(h\x03h\x05" \
    "eu"

static FsimPickle *
load(const guint8 *data, gsize len, gboolean records, GError **error)
{
    FsimPickleLimits limits = {.record_keys = records ? keys : NULL};
    return fsim_pickle_load(data, len, &limits, error);
}

/* @record (a record) holds what @dict (the same dict, built) does under the record keys. */
static void
assert_same_entry(const FsimPickleValue *record, const FsimPickleValue *dict)
{
    const FsimPickleValue *values[FSIM_PICKLE_RECORD_KEYS];
    FsimPickleFields fields;
    gsize pairs = 0;

    g_assert_true(fsim_pickle_record(record, &pairs, values));
    g_assert_false(fsim_pickle_record(dict, &pairs, values) && FALSE);
    g_assert_cmpuint(pairs, ==, fsim_pickle_len(dict));
    g_assert_cmpint(fsim_pickle_type(record), ==, FSIM_PICKLE_DICT);
    g_assert_cmpuint(fsim_pickle_len(record), ==, 0);
    g_assert_null(fsim_pickle_dict_get(record, "action"));
    g_assert_cmpuint(fsim_pickle_nodes(record), ==, fsim_pickle_nodes(dict));
    g_assert_cmpuint(fsim_pickle_offset(record), ==, fsim_pickle_offset(dict));
    g_assert_true(fsim_pickle_record_fields(record, &fields));
    g_assert_false(fsim_pickle_record_fields(dict, &fields) && FALSE);
    g_assert_cmpuint(fields.pairs, ==, pairs);
    for (gsize k = 0; k < FSIM_PICKLE_RECORD_KEYS; k++) {
        guint64 u = 0;
        gboolean is_uint = fsim_pickle_get_uint(values[k], &u);

        g_assert_true(fields.values[k] == values[k]);
        g_assert_cmpint(!!(fields.is_none & (1u << k)), ==,
                        values[k] == NULL || fsim_pickle_type(values[k]) == FSIM_PICKLE_NONE);
        g_assert_cmpint(!!(fields.is_uint & (1u << k)), ==, is_uint);
        if (is_uint)
            g_assert_cmpuint(fields.uints[k], ==, u);
    }
    for (gsize k = 0; keys[k] != NULL; k++) {
        const FsimPickleValue *want = fsim_pickle_dict_get(dict, keys[k]);
        const FsimPickleValue *got = values[k];
        int64_t a = 0;
        int64_t b = 0;

        if (want == NULL) {
            g_assert_null(got);
            continue;
        }
        g_assert_nonnull(got);
        g_assert_cmpint(fsim_pickle_type(got), ==, fsim_pickle_type(want));
        g_assert_cmpuint(fsim_pickle_offset(got), ==, fsim_pickle_offset(want));
        g_assert_cmpuint(fsim_pickle_len(got), ==, fsim_pickle_len(want));
        g_assert_cmpuint(fsim_pickle_nodes(got), ==, fsim_pickle_nodes(want));
        g_assert_cmpint(fsim_pickle_get_int(got, &a), ==, fsim_pickle_get_int(want, &b));
        g_assert_cmpint(a, ==, b);
        if (fsim_pickle_type(want) == FSIM_PICKLE_STR)
            g_assert_cmpstr(fsim_pickle_get_str(got, NULL), ==, fsim_pickle_get_str(want, NULL));
    }
}

/* Loads @data with and without records: both succeed, with the same node count, and the items
 * of the root (a list) are records where @records says so ('r') and the same dicts otherwise. */
static void
assert_records(const guint8 *data, gsize len, const char *records)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimPickle) plain = load(data, len, FALSE, &error);
    g_assert_no_error(error);
    g_autoptr(FsimPickle) fast = load(data, len, TRUE, &error);
    g_assert_no_error(error);
    const FsimPickleValue *a = fsim_pickle_root(plain);
    const FsimPickleValue *b = fsim_pickle_root(fast);
    guint64 n = 0;

    g_assert_cmpuint(fsim_pickle_nodes(a), ==, fsim_pickle_nodes(b));
    g_assert_cmpuint(fsim_pickle_len(a), ==, fsim_pickle_len(b));
    g_assert_cmpuint(fsim_pickle_records(plain), ==, 0);
    for (gsize i = 0; i < fsim_pickle_len(a); i++) {
        const FsimPickleValue *dict = fsim_pickle_item(a, i);
        const FsimPickleValue *item = fsim_pickle_item(b, i);
        const FsimPickleValue *values[FSIM_PICKLE_RECORD_KEYS];

        if (records[i] == 'r') {
            assert_same_entry(item, dict);
            n++;
        } else {
            g_assert_false(fsim_pickle_record(item, NULL, values));
            g_assert_cmpuint(fsim_pickle_len(item), ==, fsim_pickle_len(dict));
        }
    }
    g_assert_cmpuint(fsim_pickle_records(fast), ==, n);
}

static void
test_records_entries(void)
{
    assert_records(B(ENTRIES "e."), "rr");
    /* a dict whose first key is not the record key, or without the form, is built */
    assert_records(B("\x80\x04]\x94(}\x94(\x8c\x04size\x94K\x01\x8c\x06"
                     "action\x94\x8c\x05"
                     "alloc\x94u}\x94(h\x03h\x04h\x02K\x02ue."),
                   "-r");
    /* a value of another form (a float, a tuple, a list of more than memo gets) */
    assert_records(B(ENTRIES "}\x94(h\x02h\x03h\x04G?\xf0\x00\x00\x00\x00\x00\x00u"
                             "}\x94(h\x02h\x03h\x06K\x01K\x02\x86\x94u"
                             "}\x94(h\x02h\x03h\x06]\x94K\x01\x61ue."),
                   "rr---");
}

/* What a record read makes before it finds another form is undone: the memo entries it set are
 * set again, at the same indices, by the generic path. */
static void
test_records_rollback(void)
{
    /* memo 10: the dict, 11: "other" (a new key), 12: "x", then a list holding an int */
    static const char bytes[] = ENTRIES "}\x94(h\x02h\x03\x8c\x05other\x94\x8c\x01x\x94"
                                        "h\x06]\x94K\x05\x61u"
                                        "h\x0bh\x0c"
                                        "e.";
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimPickle) fast = load(B(bytes), TRUE, &error);
    const FsimPickleValue *root;

    assert_records(B(bytes), "rr---");
    g_assert_no_error(error);
    root = fsim_pickle_root(fast);
    g_assert_cmpstr(fsim_pickle_get_str(fsim_pickle_item(root, 3), NULL), ==, "other");
    g_assert_cmpstr(fsim_pickle_get_str(fsim_pickle_item(root, 4), NULL), ==, "x");
    g_assert_cmpuint(fsim_pickle_len(fsim_pickle_dict_get(fsim_pickle_item(root, 2), "frames")), ==,
                     1);
}

/* A record's ints are the dict's: LONG1 of 0 to 8 bytes, negative and not, BININT, BININT1,
 * BININT2 (each record followed by more than the 16 bytes the loop over common pairs needs). */
static void
test_records_ints(void)
{
    static const char bytes[] =
        ENTRIES "}\x94(h\x02h\x03h\x04\x8a\x00h\x05\x8a\x01\x7fu"
                "}\x94(h\x02h\x03h\x04\x8a\x01\x80h\x05\x8a\x02\xff\x7fu"
                "}\x94(h\x02h\x03h\x04\x8a\x03\x00\x00\x80h\x05J\x00\x00\x00\x80u"
                "}\x94(h\x02h\x03h\x04\x8a\x07\x01\x02\x03\x04\x05\x06\xf7"
                "h\x05\x8a\x08\x01\x02\x03\x04\x05\x06\x07\x88u"
                "}\x94(h\x02h\x03h\x04\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f"
                "h\x05K\xffu"
                "}\x94(h\x02h\x03h\x04M\xff\xffh\x05\x8a\x04\x00\x00\x00\x80u"
                "}\x94(h\x02h\x03h\x04K\x00h\x05K\x01u"
                "}\x94(h\x02h\x03h\x04K\x00h\x05K\x01u"
                "}\x94(h\x02h\x03h\x04K\x00h\x05K\x01u"
                "e.";

    assert_records(B(bytes), "rrrrrrrrrrr");
}

/* Records whose keys are the same memo gets as the records before them have the same keys, until
 * a memo entry is replaced: then the same bytes may name another key (here memo 4, "addr", becomes
 * "size", so that the fourth dict sets "size" twice and is not a record). */
static void
test_records_template(void)
{
    static const char bytes[] = ENTRIES "}\x94(h\x02h\x03h\x04K\x01h\x05K\x02u"
                                        "\x8c\x04sizeq\x04" /* memo 4 replaced, popped */
                                        "0"
                                        "}\x94(h\x02h\x03h\x04K\x01h\x05K\x02u"
                                        "}\x94(h\x02h\x03h\x04K\x03u"
                                        "}\x94(h\x02h\x03h\x04K\x04u"
                                        "e.";
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimPickle) fast = load(B(bytes), TRUE, &error);
    const FsimPickleValue *values[FSIM_PICKLE_RECORD_KEYS];
    guint64 size = 0;

    assert_records(B(bytes), "rrr-rr");
    g_assert_no_error(error);
    g_assert_true(fsim_pickle_record(fsim_pickle_item(fsim_pickle_root(fast), 5), NULL, values));
    g_assert_null(values[1]);
    g_assert_true(fsim_pickle_get_uint(values[2], &size));
    g_assert_cmpuint(size, ==, 4);
}

/* A record, or a container that holds one, referred to twice, or a record added to, fails the
 * load with records; the pickle loads without them. */
static void
test_records_shared(void)
{
#define CASE(literal)                  \
    {                                  \
        (literal), sizeof(literal) - 1 \
    }
    static const struct {
        const char *bytes;
        gsize len;
    } shared[] = {
        CASE(ENTRIES "h\x01"
                     "e."),             /* the first record again */
        CASE(ENTRIES "eh\x00\x86."),    /* the list of records, in a tuple twice */
        CASE(ENTRIES "2e."),            /* DUP of the second record */
        CASE(ENTRIES "(h\x04K\x01ue."), /* more entries set in the second record */
    };
#undef CASE

    for (gsize i = 0; i < G_N_ELEMENTS(shared); i++) {
        const guint8 *data = (const guint8 *)shared[i].bytes;
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimPickle) plain = load(data, shared[i].len, FALSE, &error);
        g_assert_no_error(error);
        g_assert_nonnull(plain);
        g_autoptr(FsimPickle) fast = load(data, shared[i].len, TRUE, &error);
        g_assert_null(fast);
        g_assert_nonnull(error);
        g_assert_true(error->domain == FSIM_TRACE_ERROR);
        g_assert_nonnull(strstr(error->message, ": a record"));
    }
}

/* Every prefix of a pickle of records fails as it does without records, or loads alike. */
static void
test_records_truncated(void)
{
    static const char bytes[] = ENTRIES "e.";

    for (gsize n = 0; n < sizeof(bytes) - 1; n++) {
        /* (each prefix in a block of its size, for AddressSanitizer to see a read past it) */
        g_autofree guint8 *prefix = g_memdup2(bytes, MAX(n, (gsize)1));
        g_autoptr(GError) plain_error = NULL;
        g_autoptr(GError) fast_error = NULL;
        g_autoptr(FsimPickle) plain = load(prefix, n, FALSE, &plain_error);
        g_autoptr(FsimPickle) fast = load(prefix, n, TRUE, &fast_error);

        g_assert_true((plain == NULL) == (fast == NULL));
        if (plain == NULL)
            g_assert_cmpstr(plain_error->message, ==, fast_error->message);
    }
}

/* Inputs the fuzzer found (tests/fuzz/fuzz-pickle.c loads every input with records too). */
static void
test_records_fuzz_regressions(void)
{
    /* a record's key read one byte past the input, where it ends right after a key */
    static const char ends[] =
        "\x80\x03]q\x00(]N\x88\x89K\x00J\xff\xff\xff\xffK\xffJ\x00\x00\x01\x00"
        "X\x05\x00\x00\x00s\x94]\x94+]\x94(}\x94(\x8c\x06"
        "action\x94\x8c\x0dsegtKuMN\xf4Mee.";
    g_autofree guint8 *data = g_memdup2(ends, sizeof(ends) - 1);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimPickle) fast = load(data, sizeof(ends) - 1, TRUE, &error);

    g_assert_null(fast);
    g_assert_error(error, FSIM_TRACE_ERROR, FSIM_TRACE_ERROR_TRUNCATED);

    /* an empty dict (no first key) was read as a record of no pairs */
    assert_records(B("\x80\x04]\x94(}\x94(u}\x94"
                     "e."),
                   "--");
    assert_records(B("\x80\x04]\x94(}\x94(u}\x94(\x8c\x06"
                     "action\x94\x8c\x05"
                     "alloc\x94ue."),
                   "-r");
}

/* With shared_record_lists, the records whose frames repeat a list read before (the same memo
 * gets) share one list, with the items, length, node count and twin number of the copies a load
 * without makes and the offset of the first; a memo get of one of them elsewhere pushes it. */
static void
test_records_shared_lists(void)
{
    /* [e0, e1, e2, e3, e2['frames'], 'x' * 150]: e0's frames hold the frame dicts, e1's to e3's
     * the same memo gets of them (e1's built and cached, e2's and e3's found in the cache) */
    static const char bytes[] =
        "\x80\x04\x95\x91\x01\x00\x00\x00\x00\x00\x00]\x94(}\x94(\x8c\x06"
        "action\x94\x8c\x05"
        "alloc\x94\x8c\x04"
        "addr\x94M\x00\x10\x8c\x04size\x94M\x00\x02\x8c\x06stream\x94K\x00\x8c\x06"
        "frames\x94]\x94(}\x94(\x8c\x08"
        "filename\x94\x8c\x04"
        "a.py\x94\x8c\x04line\x94K\x00\x8c\x04name\x94\x8c\x01"
        "f\x94u}\x94(h\x0ah\x0bh\x0cK\x01h\x0dh\x0eu}\x94(h\x0ah\x0bh\x0cK\x02h\x0dh\x0eue"
        "u}\x94(h\x02h\x03h\x04M\x00 h\x05M\x00\x02h\x06K\x00h\x07]\x94(h\x09h\x0fh\x10"
        "eu}\x94(h\x02h\x03h\x04M\x00"
        "0h\x05M\x00\x02h\x06K\x00h\x07]\x94(h\x09h\x0fh\x10"
        "eu}\x94(h\x02h\x03h\x04M\x00@h\x05M\x00\x02h\x06K\x00h\x07]\x94(h\x09h\x0fh\x10"
        "euh\x14\x8c\x96xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxx\x94"
        "e.";
    FsimPickleLimits limits = {.record_keys = keys, .shared_record_lists = TRUE};
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimPickle) plain = load((const guint8 *)bytes, sizeof(bytes) - 1, FALSE, &error);
    g_assert_no_error(error);
    g_autoptr(FsimPickle) shared =
        fsim_pickle_load((const guint8 *)bytes, sizeof(bytes) - 1, &limits, &error);
    g_assert_no_error(error);
    const FsimPickleValue *a = fsim_pickle_root(plain);
    const FsimPickleValue *b = fsim_pickle_root(shared);
    const FsimPickleValue *frames[4] = {NULL};

    g_assert_cmpuint(fsim_pickle_nodes(a), ==, fsim_pickle_nodes(b));
    g_assert_cmpuint(fsim_pickle_records(shared), ==, 3);
    for (gsize i = 1; i < 4; i++) {
        const FsimPickleValue *values[FSIM_PICKLE_RECORD_KEYS];
        const FsimPickleValue *want = fsim_pickle_dict_get(fsim_pickle_item(a, i), "frames");

        if (i < 3) /* (e3's frames have e2's offset) */
            assert_same_entry(fsim_pickle_item(b, i), fsim_pickle_item(a, i));
        g_assert_true(fsim_pickle_record(fsim_pickle_item(b, i), NULL, values));
        frames[i] = values[4];
        g_assert_cmpuint(fsim_pickle_len(frames[i]), ==, 3);
        g_assert_cmpuint(fsim_pickle_nodes(frames[i]), ==, fsim_pickle_nodes(want));
        g_assert_cmpuint(fsim_pickle_list_twin(frames[i]), ==, fsim_pickle_list_twin(want));
        g_assert_cmpuint(fsim_pickle_list_twin(frames[i]), !=, 0);
        for (gsize j = 0; j < 3; j++)
            g_assert_true(fsim_pickle_item(frames[i], j) == fsim_pickle_item(frames[1], j));
    }
    g_assert_true(frames[1] != frames[2]); /* the cached list itself */
    g_assert_true(frames[2] == frames[3]); /* one list for the repeats */
    g_assert_cmpuint(fsim_pickle_offset(frames[2]), ==,
                     fsim_pickle_offset(fsim_pickle_dict_get(fsim_pickle_item(a, 2), "frames")));
    /* the memo get of e2's frames (a list of the root) */
    g_assert_true(fsim_pickle_item(b, 4) == frames[2]);
    g_assert_true(fsim_pickle_item(a, 4) == fsim_pickle_dict_get(fsim_pickle_item(a, 2), "frames"));
}

/* The snapshot reader reads entries from records, and a snapshot that refers to an entry twice
 * (so that records fail) is read again without them, to the same result. */
static void
test_records_snapshot(void)
{
    /* {'device_traces': [[e, e]]} with e an OOM entry (memo 4), its dict referred to again */
    static const char bytes[] = "\x80\x04}\x94(\x8c\x0d"
                                "device_traces\x94]\x94]\x94("
                                "}\x94(\x8c\x06"
                                "action\x94\x8c\x03oom\x94\x8c\x04size\x94M\x00\x02u"
                                "h\x04"
                                "eau.";
    g_autofree char *dir = g_dir_make_tmp("fsim-records-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "shared.pickle", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(FsimTraceInfo) info = NULL;
    FsimTrace *trace;

    g_assert_true(g_file_set_contents(path, bytes, sizeof(bytes) - 1, &error));
    trace = fsim_trace_open(path, &error);
    g_assert_no_error(error);
    g_assert_nonnull(trace);
    info = fsim_trace_describe(trace, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(g_array_index(info->devices, FsimTraceDeviceInfo, 0).events, ==, 2);
    fsim_trace_close(trace);
    g_unlink(path);
    g_rmdir(dir);
}

/* A freed pickle's heap chunk is lent as scratch memory (the snapshot reader's events array),
 * writable whole, and taken back; none is lent larger than the cache holds. */
static void
test_records_scratch(void)
{
    static const char bytes[] = "\x80\x02]q\x00(K\x01K\x02K\x03"
                                "e.";
    g_autoptr(GError) error = NULL;
    FsimPickleLimits limits = {0};
    FsimPickle *pickle;
    gsize room = 0;
    guint8 *p;

    pickle = fsim_pickle_load((const guint8 *)bytes, sizeof(bytes) - 1, &limits, &error);
    g_assert_no_error(error);
    fsim_pickle_free(pickle);
    p = fsim_pickle_scratch_take(64, &room);
    g_assert_nonnull(p);
    g_assert_cmpuint(room, >=, 64);
    memset(p, 0xa5, room);
    fsim_pickle_scratch_give(p);
    g_assert_null(fsim_pickle_scratch_take(G_MAXSIZE / 2, &room));
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pickle-records/entries", test_records_entries);
    g_test_add_func("/pickle-records/rollback", test_records_rollback);
    g_test_add_func("/pickle-records/ints", test_records_ints);
    g_test_add_func("/pickle-records/template", test_records_template);
    g_test_add_func("/pickle-records/shared", test_records_shared);
    g_test_add_func("/pickle-records/shared-lists", test_records_shared_lists);
    g_test_add_func("/pickle-records/truncated", test_records_truncated);
    g_test_add_func("/pickle-records/fuzz-regressions", test_records_fuzz_regressions);
    g_test_add_func("/pickle-records/snapshot", test_records_snapshot);
    g_test_add_func("/pickle-records/scratch", test_records_scratch);
    return g_test_run();
}
