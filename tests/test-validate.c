/* SPDX-License-Identifier: MIT */
/*
 * The validator: how recorded outcomes are attributed to events, what counts as a divergence
 * (on hand-built traces held in memory), the command's JSON and exit status (on two tiny
 * snapshots in tests/data/validate), and the results on the real snapshots of the shared trace
 * collection, pinned.  The last need FRAGSIM_SHARED_TRACES (the directory of the collection):
 * skipped when it is unset, failed when it is set and a snapshot is missing.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>

#include "fragsim/fragsim.h"
#include "fragsim/validate.h"

#include "test-util.h"

#define MIB FSIM_MiB

/* ---- an in-memory trace ---------------------------------------------------------------------- */

typedef struct {
    FsimTrace base;
    GArray *events; /* of FsimEvent, device 0 */
} MemTrace;

typedef struct {
    FsimTraceStream base;
    guint pos;
} MemStream;

static gboolean
mem_probe(const guint8 *head, gsize len)
{
    (void)head;
    (void)len;
    return FALSE;
}

static void
mem_close(FsimTrace *trace)
{
    MemTrace *mem = (MemTrace *)trace;

    g_array_unref(mem->events);
    g_free(mem);
}

static FsimTraceStream *
mem_stream_open(FsimTrace *trace, uint32_t device, GError **error)
{
    MemStream *stream = g_new0(MemStream, 1);

    (void)trace;
    (void)device;
    (void)error;
    return &stream->base;
}

static gboolean
mem_stream_next(FsimTraceStream *stream, FsimEvent *ev, GError **error)
{
    MemStream *s = (MemStream *)stream;
    MemTrace *mem = (MemTrace *)stream->trace;

    (void)error;
    if (s->pos >= mem->events->len)
        return FALSE;
    *ev = g_array_index(mem->events, FsimEvent, s->pos++);
    return TRUE;
}

static void
mem_stream_close(FsimTraceStream *stream)
{
    g_free(stream);
}

static const FsimTraceFormat mem_format = {
    .name = "memory",
    .summary = "events held by the test",
    .probe = mem_probe,
    .close = mem_close,
    .stream_open = mem_stream_open,
    .stream_next = mem_stream_next,
    .stream_close = mem_stream_close,
};

typedef struct {
    MemTrace *trace;
    GArray *outcomes;
    uint64_t index; /* the next entry's position */
} Builder;

static void
builder_init(Builder *b, const char *alloc_conf)
{
    b->trace = g_new0(MemTrace, 1);
    fsim_trace_init(&b->trace->base, &mem_format, "memory");
    fsim_trace_add_device(&b->trace->base, 0);
    b->trace->events = g_array_new(FALSE, TRUE, sizeof(FsimEvent));
    b->trace->base.alloc_conf = g_strdup(alloc_conf);
    b->outcomes = g_array_new(FALSE, TRUE, sizeof(FsimOutcome));
    b->index = 0;
}

static void
builder_event(Builder *b, FsimEventKind kind, uint64_t id, uint64_t size, FsimAddr addr,
              uint32_t flags)
{
    FsimEvent ev = {.time = b->index * 1000,
                    .index = b->index,
                    .id = id,
                    .size = size,
                    .addr = addr,
                    .flags = flags,
                    .kind = kind};

    g_array_append_val(b->trace->events, ev);
    b->index++;
}

static void
builder_alloc(Builder *b, uint64_t id, uint64_t size, FsimAddr addr)
{
    builder_event(b, FSIM_EV_ALLOC, id, size, addr, 0);
}

static void
builder_free(Builder *b, uint64_t id)
{
    builder_event(b, FSIM_EV_FREE, id, 0, 0, 0);
}

/* An outcome entry; @with_event adds the inferred empty_cache a release burst starts with. */
static void
builder_outcome(Builder *b, FsimOutcomeKind kind, FsimAddr addr, uint64_t size,
                uint64_t device_free)
{
    FsimOutcome outcome = {
        .index = b->index, .addr = addr, .size = size, .device_free = device_free, .kind = kind};

    g_array_append_val(b->outcomes, outcome);
    b->index++;
}

static void
builder_release_burst(Builder *b, const FsimAddr *addrs, const uint64_t *sizes, guint n)
{
    FsimEvent ev = {.time = b->index * 1000,
                    .index = b->index,
                    .flags = FSIM_EVF_INFERRED,
                    .kind = FSIM_EV_EMPTY_CACHE};

    g_array_append_val(b->trace->events, ev);
    for (guint i = 0; i < n; i++)
        builder_outcome(b, FSIM_OUTCOME_SEGMENT_FREE, addrs[i], sizes[i], 0);
}

static FsimValidateReport *
builder_validate(Builder *b)
{
    g_autoptr(FsimTrace) trace = &b->trace->base;
    g_autoptr(GError) error = NULL;
    FsimValidateReport *report;

    fsim_trace_set_outcomes(trace, 0, b->outcomes);
    report = fsim_validate_trace(trace, &error);
    g_assert_no_error(error);
    g_assert_nonnull(report);
    return report;
}

static const FsimValidateDevice *
report_device(const FsimValidateReport *report)
{
    g_assert_cmpuint(report->devices->len, ==, 1);
    return &g_array_index(report->devices, FsimValidateDevice, 0);
}

#define S  ((FsimAddr)0x7f5000000000)
#define S2 ((FsimAddr)0x7f5010000000)

/* ---- attribution and divergences ------------------------------------------------------------- */

/* segment_alloc before the alloc it served; the new segment lands at the recorded address. */
static void
test_exact(void)
{
    Builder b;
    g_autoptr(FsimValidateReport) report = NULL;
    const FsimValidateDevice *d;

    builder_init(&b, "");
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_ALLOC, S, 20 * MIB, 0);
    builder_alloc(&b, 1, 3 * MIB, S);
    builder_alloc(&b, 2, 5 * MIB, S + 3 * MIB);
    builder_free(&b, 1);
    builder_alloc(&b, 3, 1 * MIB + 1, S); /* the freed 3 MiB block, split: about 2 MiB are left */
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_ALLOC, S2, 30 * MIB, 0);
    builder_alloc(&b, 4, 30 * MIB, S2);
    report = builder_validate(&b);
    d = report_device(report);
    g_assert_true(report->exact);
    g_assert_true(d->exact);
    g_assert_cmpstr(d->policy, ==, "caching");
    g_assert_false(d->first_divergence.found);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_ALLOC].matched, ==, 4);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_ALLOC].total, ==, 4);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_SEGMENT_ALLOC].matched, ==, 2);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_SEGMENT_ALLOC].total, ==, 2);
    /* no OOM: the device is as large as the recorded peak */
    g_assert_false(d->capacity_from_oom);
    g_assert_cmpuint(d->capacity_bytes, ==, 50 * MIB);
}

static void
test_alloc_divergence(void)
{
    Builder b;
    g_autoptr(FsimValidateReport) report = NULL;
    const FsimValidateDevice *d;

    builder_init(&b, "");
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_ALLOC, S, 20 * MIB, 0);
    builder_alloc(&b, 1, 3 * MIB, S);
    builder_alloc(&b, 2, 5 * MIB, S + 4 * MIB); /* PyTorch would have put it at S + 3 MiB */
    report = builder_validate(&b);
    d = report_device(report);
    g_assert_false(report->exact);
    g_assert_false(d->exact);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_ALLOC].matched, ==, 1);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_ALLOC].total, ==, 2);
    g_assert_true(d->first_divergence.found);
    g_assert_cmpint(d->first_divergence.kind, ==, FSIM_VALIDATE_ALLOC);
    g_assert_cmpuint(d->first_divergence.event_index, ==, 2);
    g_assert_true(d->first_divergence.recorded.present);
    g_assert_cmpuint(d->first_divergence.recorded.addr, ==, S + 4 * MIB);
    g_assert_cmpuint(d->first_divergence.recorded.size, ==, 5 * MIB);
    g_assert_true(d->first_divergence.model.present);
    g_assert_cmpuint(d->first_divergence.model.addr, ==, S + 3 * MIB);
}

/* A cudaMalloc the trace does not have: the recorded side is absent. */
static void
test_unrecorded_segment(void)
{
    Builder b;
    g_autoptr(FsimValidateReport) report = NULL;
    const FsimValidateDevice *d;

    builder_init(&b, "");
    builder_alloc(&b, 1, 3 * MIB, S);
    report = builder_validate(&b);
    d = report_device(report);
    g_assert_false(d->exact);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_SEGMENT_ALLOC].total, ==, 0);
    /* the alloc comes first in the event, but its address could not match either */
    g_assert_cmpint(d->first_divergence.kind, ==, FSIM_VALIDATE_ALLOC);
    g_assert_true(d->first_divergence.model.present);
}

/* A burst of segment_free belongs to the empty_cache inferred at its first entry, and must come
 * in release_cached_blocks' order. */
static void
run_release_burst(gboolean in_order)
{
    Builder b;
    g_autoptr(FsimValidateReport) report = NULL;
    const FsimValidateDevice *d;
    FsimAddr addrs[2] = {S, S2};
    uint64_t sizes[2] = {12 * MIB, 14 * MIB};

    if (!in_order) {
        addrs[0] = S2;
        addrs[1] = S;
        sizes[0] = 14 * MIB;
        sizes[1] = 12 * MIB;
    }
    builder_init(&b, NULL);
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_ALLOC, S, 12 * MIB, 0);
    builder_alloc(&b, 1, 12 * MIB, S);
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_ALLOC, S2, 14 * MIB, 0);
    builder_alloc(&b, 2, 14 * MIB, S2);
    builder_free(&b, 1);
    builder_free(&b, 2);
    builder_release_burst(&b, addrs, sizes, 2);
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_ALLOC, S2, 16 * MIB, 0);
    builder_alloc(&b, 3, 16 * MIB, S2);
    report = builder_validate(&b);
    d = report_device(report);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_SEGMENT_FREE].total, ==, 2);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_SEGMENT_ALLOC].matched, ==, 3);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_ALLOC].matched, ==, 3);
    if (in_order) {
        g_assert_true(d->exact);
        g_assert_cmpuint(d->counts[FSIM_VALIDATE_SEGMENT_FREE].matched, ==, 2);
    } else {
        g_assert_false(d->exact);
        g_assert_cmpuint(d->counts[FSIM_VALIDATE_SEGMENT_FREE].matched, ==, 0);
        g_assert_cmpint(d->first_divergence.kind, ==, FSIM_VALIDATE_SEGMENT_FREE);
        g_assert_cmpuint(d->first_divergence.event_index, ==, 6);
        g_assert_cmpuint(d->first_divergence.recorded.index, ==, 6);
        g_assert_cmpuint(d->first_divergence.model.addr, ==, S);
    }
}

static void
test_release_burst(void)
{
    run_release_burst(TRUE);
    run_release_burst(FALSE);
}

/* An `oom` entry: the failed request is replayed there, on a device sized by what PyTorch saw
 * free, and must fail -- after the release the recording also made (here, none). */
static void
run_oom(uint64_t device_free, gboolean exact)
{
    Builder b;
    g_autoptr(FsimValidateReport) report = NULL;
    const FsimValidateDevice *d;

    builder_init(&b, "");
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_ALLOC, S, 30 * MIB, 0);
    builder_alloc(&b, 1, 30 * MIB, S);
    builder_outcome(&b, FSIM_OUTCOME_OOM, 0, 50 * MIB, device_free);
    builder_free(&b, 1);
    report = builder_validate(&b);
    d = report_device(report);
    g_assert_true(d->capacity_from_oom);
    g_assert_cmpuint(d->capacity_bytes, ==, 30 * MIB + device_free);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_OOM].total, ==, 1);
    g_assert_cmpint(d->exact, ==, exact);
    if (exact) {
        g_assert_cmpuint(d->counts[FSIM_VALIDATE_OOM].matched, ==, 1);
        g_assert_cmpuint(d->events, ==, 3);
    } else {
        /* the model found room and called cudaMalloc where PyTorch failed */
        g_assert_cmpint(d->first_divergence.kind, ==, FSIM_VALIDATE_SEGMENT_ALLOC);
        g_assert_false(d->first_divergence.recorded.present);
        g_assert_cmpuint(d->first_divergence.event_index, ==, 2);
    }
}

static void
test_oom(void)
{
    run_oom(40 * MIB, TRUE);
    run_oom(60 * MIB, FALSE);
}

/* Expandable segments: maps at the recorded reservation, unmaps attributed to their burst. */
static void
test_expandable(void)
{
    Builder b;
    g_autoptr(FsimValidateReport) report = NULL;
    const FsimValidateDevice *d;
    const FsimAddr base = 0x602000000;
    FsimAddr unmap_addr = base;
    uint64_t unmap_size = 60 * MIB;
    FsimEvent ev;

    builder_init(&b, "expandable_segments:True");
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_MAP, base, 40 * MIB, 0);
    builder_alloc(&b, 1, 30 * MIB, base);
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_MAP, base + 40 * MIB, 20 * MIB, 0);
    builder_alloc(&b, 2, 20 * MIB, base + 30 * MIB);
    builder_free(&b, 1);
    builder_free(&b, 2);
    /* a burst of unmaps, as the reader infers it */
    ev = (FsimEvent){.time = b.index * 1000,
                     .index = b.index,
                     .flags = FSIM_EVF_INFERRED,
                     .kind = FSIM_EV_EMPTY_CACHE};
    g_array_append_val(b.trace->events, ev);
    builder_outcome(&b, FSIM_OUTCOME_SEGMENT_UNMAP, unmap_addr, unmap_size, 0);
    report = builder_validate(&b);
    d = report_device(report);
    g_assert_cmpstr(d->policy, ==, "expandable");
    g_assert_true(d->exact);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_SEGMENT_MAP].matched, ==, 2);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_SEGMENT_UNMAP].matched, ==, 1);
    g_assert_cmpuint(d->counts[FSIM_VALIDATE_ALLOC].matched, ==, 2);
}

/* Settings the model does not understand are an error, not a divergence. */
static void
test_bad_settings(void)
{
    Builder b;
    g_autoptr(FsimTrace) trace = NULL;
    g_autoptr(GError) error = NULL;
    FsimValidateReport *report;

    builder_init(&b, "no_such_knob:1");
    trace = &b.trace->base;
    fsim_trace_set_outcomes(trace, 0, b.outcomes);
    report = fsim_validate_trace(trace, &error);
    g_assert_null(report);
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_UNSUPPORTED);
}

/* A trace that fails while its platform is being detected (its first event is bad): an error
 * naming the line, no report, nothing freed that was never made. */
static void
test_bad_trace(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    int fd = g_file_open_tmp("fragsim-validate-XXXXXX.txt", &path, &error);

    g_assert_no_error(error);
    close(fd);
    g_assert_true(g_file_set_contents(path, "fragsim-trace v1\nalloc 1 0\n", -1, &error));
    g_assert_null(fsim_validate_file(path, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, ":2"));
    g_unlink(path);
}

/* ---- the command ----------------------------------------------------------------------------- */

/* Run `fragsim validate tests/data/validate/PATH [--json]` in this process. */
static FsimTestRun
run_validate(const char *path, gboolean json)
{
    g_autofree char *full = g_test_build_filename(G_TEST_DIST, "data", "validate", path, NULL);

    return fsim_test_run_main("validate", full, json ? "--json" : NULL, NULL);
}

static void
test_command(void)
{
    g_auto(FsimTestRun) text = {0};
    g_auto(FsimTestRun) json = {0};
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *root;
    JsonObject *device;
    JsonObject *divergence;
    g_autoptr(GList) members = NULL;
    static const char *const keys[] = {"device",       "policy",         "exact",
                                       "allocs",       "segment_allocs", "segment_frees",
                                       "segment_maps", "segment_unmaps", "first_divergence"};

    text = run_validate("validate-exact.pickle", FALSE);
    g_assert_cmpint(text.status, ==, 0);
    g_assert_nonnull(strstr(text.out, "exact"));
    json = run_validate("validate-diverged.pickle", TRUE);
    g_assert_cmpint(json.status, ==, 4);
    root = fsim_test_parse_object(parser, json.out);
    g_assert_false(json_object_get_boolean_member(root, "exact"));
    g_assert_cmpuint(json_object_get_size(root), ==, 3);
    g_assert_true(json_object_has_member(root, "trace"));
    device = json_array_get_object_element(json_object_get_array_member(root, "devices"), 0);
    members = json_object_get_members(device);
    g_assert_cmpuint(g_list_length(members), ==, G_N_ELEMENTS(keys));
    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++)
        g_assert_true(json_object_has_member(device, keys[i]));
    g_assert_cmpint(
        json_object_get_int_member(json_object_get_object_member(device, "allocs"), "matched"), ==,
        3);
    g_assert_cmpint(
        json_object_get_int_member(json_object_get_object_member(device, "allocs"), "total"), ==,
        4);
    divergence = json_object_get_object_member(device, "first_divergence");
    g_assert_cmpint(json_object_get_int_member(divergence, "event_index"), ==, 5);
    g_assert_cmpstr(json_object_get_string_member(divergence, "kind"), ==, "alloc");
    g_assert_cmpint(
        json_object_get_int_member(json_object_get_object_member(divergence, "recorded"), "addr"),
        ==, (gint64)0x7f3a00800000);
    g_assert_cmpint(
        json_object_get_int_member(json_object_get_object_member(divergence, "model"), "addr"), ==,
        (gint64)0x7f3a00000000);
}

/* ---- the shared snapshots -------------------------------------------------------------------- */

typedef struct {
    const char *file;
    uint32_t device;
    const char *policy;
    uint64_t allocs, segment_allocs, segment_frees, segment_maps, segment_unmaps, ooms;
} Pinned;

/* Every device exact: matched = total = the numbers below. */
/* clang-format off */
static const Pinned pinned[] = {
    {"Constructor-Sun__code_location__memory_snapshot.pickle", 0, "expandable", 2434, 0, 0, 175, 0, 0},
    {"Constructor-Sun__code_location__memory_snapshot.pickle", 1, "expandable", 199, 0, 0, 40, 6, 1},
    {"Constructor-Sun__code_location__memory_snapshot.pickle", 2, "expandable", 392, 0, 0, 78, 0, 0},
    {"Maphsge4__select_n__snapshot.ec5be11.pickle", 0, "caching", 3058, 584, 579, 0, 0, 0},
    {"MercuryB1__SQAttn__cuda_memory_snapshot.pickle", 0, "caching", 2912, 420, 420, 0, 0, 0},
    {"Muduard__LayoutEditing__memory_snapshot.pkl", 1, "caching", 0, 0, 0, 0, 0, 0},
    {"Yiyi-philosophy__LLM-inference__oom_snapshot.pickle", 0, "caching", 0, 0, 0, 0, 0, 0},
    {"albi2__thesis-text-to-SQL__dump_snapshot.27df9f5.pickle", 0, "expandable", 0, 0, 0, 0, 0, 0},
    {"albi2__thesis-text-to-SQL__dump_snapshot.27df9f5.pickle", 1, "expandable", 0, 0, 0, 0, 0, 0},
    {"bcrafton__assignment2-systems__memory_snapshot.06f51ae.pickle", 0, "caching", 2162, 0, 0, 0, 0, 0},
    {"kkaitlyn111__cs336-a2-systems__memory_files__memory_ctx128_forward.pickle", 0, "caching", 2058, 289, 0, 0, 0, 0},
    {"silmont2000__assignment2-systems__mem_snapshot.pickle", 0, "caching", 36, 9, 0, 0, 0, 0},
};
/* clang-format on */

static void
test_shared_traces(void)
{
    const char *last = NULL;
    g_autoptr(FsimValidateReport) report = NULL;

    if (fsim_test_shared_dir() == NULL)
        return;
    for (gsize i = 0; i < G_N_ELEMENTS(pinned); i++) {
        const Pinned *p = &pinned[i];
        const FsimValidateDevice *d = NULL;
        const uint64_t expected[FSIM_VALIDATE_KIND_COUNT] = {p->allocs,         p->segment_allocs,
                                                             p->segment_frees,  p->segment_maps,
                                                             p->segment_unmaps, p->ooms};
        guint devices_of_file = 0;

        if (last == NULL || strcmp(last, p->file) != 0) {
            g_autofree char *path = fsim_test_shared_trace(p->file);
            g_autoptr(GError) error = NULL;

            g_clear_pointer(&report, fsim_validate_report_free);
            report = fsim_validate_file(path, &error);
            g_assert_no_error(error);
            g_assert_true(report->exact);
            last = p->file;
        }
        for (gsize j = 0; j < G_N_ELEMENTS(pinned); j++)
            devices_of_file += strcmp(pinned[j].file, p->file) == 0;
        g_assert_cmpuint(report->devices->len, ==, devices_of_file);
        for (guint k = 0; k < report->devices->len; k++) {
            if (g_array_index(report->devices, FsimValidateDevice, k).device == p->device)
                d = &g_array_index(report->devices, FsimValidateDevice, k);
        }
        g_assert_nonnull(d);
        g_assert_cmpstr(d->policy, ==, p->policy);
        g_assert_true(d->exact);
        for (int k = 0; k < FSIM_VALIDATE_KIND_COUNT; k++) {
            g_assert_cmpuint(d->counts[k].total, ==, expected[k]);
            g_assert_cmpuint(d->counts[k].matched, ==, expected[k]);
        }
    }
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* GIO logs a debug line when its default VFS first loads; let it happen before any output is
     * captured. */
    (void)g_vfs_get_default();
    g_test_add_func("/validate/exact", test_exact);
    g_test_add_func("/validate/alloc-divergence", test_alloc_divergence);
    g_test_add_func("/validate/unrecorded-segment", test_unrecorded_segment);
    g_test_add_func("/validate/release-burst", test_release_burst);
    g_test_add_func("/validate/oom", test_oom);
    g_test_add_func("/validate/expandable", test_expandable);
    g_test_add_func("/validate/bad-settings", test_bad_settings);
    g_test_add_func("/validate/bad-trace", test_bad_trace);
    g_test_add_func("/validate/command", test_command);
    g_test_add_func("/validate/shared-traces", test_shared_traces);
    return g_test_run();
}
