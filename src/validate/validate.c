/* SPDX-License-Identifier: MIT */
/*
 * The validator: replays a recorded trace through the PyTorch allocator model and compares every
 * recorded decision with the model's.  See validate.h for what is compared and how outcomes are
 * attributed to input events; docs/validate.md has the user's view.
 *
 * One engine per device, fed event by event.  Before each event the device is told the address of
 * the first segment_alloc / segment_map recorded for it, so a new cudaMalloc'd segment or a new
 * expandable reservation (whose first page is mapped at its start) lands where the driver put it;
 * the hint is withdrawn after the event, so it can never leak to a later one.  The model's driver
 * calls reach the validator through the engine's device_call observer, its OOMs through `oom`, its
 * blocks through `alloc`.
 *
 * The model is seen only through the public interfaces: the engine's observers (the blocks it
 * hands out, the driver calls it makes, its OOMs) and the allocator settings the trace recorded
 * (fragsim/alloc-conf.h), which choose the policy (`caching` or `expandable`) and give the
 * rounded size PyTorch writes into an `oom` entry.
 */
#include "fragsim/validate.h"

#include <glib.h>

#include <string.h>

#include "fragsim/alloc-conf.h"
#include "fragsim/engine.h"

/* clang-format off */
static const struct {
    const char *name;
    const char *action;
} kinds[FSIM_VALIDATE_KIND_COUNT] = {
    [FSIM_VALIDATE_ALLOC] = {"allocs", "alloc"},
    [FSIM_VALIDATE_SEGMENT_ALLOC] = {"segment_allocs", "segment_alloc"},
    [FSIM_VALIDATE_SEGMENT_FREE] = {"segment_frees", "segment_free"},
    [FSIM_VALIDATE_SEGMENT_MAP] = {"segment_maps", "segment_map"},
    [FSIM_VALIDATE_SEGMENT_UNMAP] = {"segment_unmaps", "segment_unmap"},
    [FSIM_VALIDATE_OOM] = {"ooms", "oom"},
};
/* clang-format on */

const char *
fsim_validate_kind_name(FsimValidateKind kind)
{
    return (unsigned)kind < FSIM_VALIDATE_KIND_COUNT ? kinds[kind].name : "?";
}

const char *
fsim_validate_kind_action(FsimValidateKind kind)
{
    return (unsigned)kind < FSIM_VALIDATE_KIND_COUNT ? kinds[kind].action : "?";
}

/* Ids of the allocations replayed for `oom` entries: far above any reader's. */
#define SYNTHETIC_ID_BASE (G_MAXUINT64 - ((uint64_t)1 << 32))

typedef struct {
    FsimValidateKind kind;
    uint64_t index; /* recorded entries only */
    FsimAddr addr;
    uint64_t size;
} Item;

typedef struct {
    FsimEngine *engine;
    FsimDevice *device; /* the engine's */
    FsimAllocConf conf; /* the recorded allocator settings */
    Item *model;        /* what the model did during the current event: n_model of room_model */
    guint n_model;
    guint room_model;
    gboolean allocated;
    FsimBlock block;
    FsimValidateDevice *out;
} Validator;

static FsimValidateKind
kind_of_outcome(FsimOutcomeKind kind)
{
    switch (kind) {
    case FSIM_OUTCOME_SEGMENT_ALLOC:
        return FSIM_VALIDATE_SEGMENT_ALLOC;
    case FSIM_OUTCOME_SEGMENT_FREE:
        return FSIM_VALIDATE_SEGMENT_FREE;
    case FSIM_OUTCOME_SEGMENT_MAP:
        return FSIM_VALIDATE_SEGMENT_MAP;
    case FSIM_OUTCOME_SEGMENT_UNMAP:
        return FSIM_VALIDATE_SEGMENT_UNMAP;
    case FSIM_OUTCOME_OOM:
    default:
        return FSIM_VALIDATE_OOM;
    }
}

/* ---- observers ------------------------------------------------------------------------------- */

/* Note @item among what the model did during the current event. */
static void
model_add(Validator *v, const Item *item)
{
    if (G_UNLIKELY(v->n_model == v->room_model)) {
        v->room_model = MAX(2 * v->room_model, 8u);
        v->model = g_renew(Item, v->model, v->room_model);
    }
    v->model[v->n_model++] = *item;
}

static void
on_device_call(gpointer data, const FsimEngine *engine, FsimDeviceCall call, FsimAddr addr,
               uint64_t size)
{
    Validator *v = data;
    Item item = {.addr = addr, .size = size};

    (void)engine;
    switch (call) {
    case FSIM_CALL_MEM_ALLOC:
        item.kind = FSIM_VALIDATE_SEGMENT_ALLOC;
        break;
    case FSIM_CALL_MEM_FREE:
        item.kind = FSIM_VALIDATE_SEGMENT_FREE;
        break;
    case FSIM_CALL_MAP:
        item.kind = FSIM_VALIDATE_SEGMENT_MAP;
        break;
    case FSIM_CALL_UNMAP:
        item.kind = FSIM_VALIDATE_SEGMENT_UNMAP;
        break;
    default:
        return; /* address reservations leave no trace entry */
    }
    model_add(v, &item);
}

static void
on_alloc(gpointer data, const FsimEngine *engine, const FsimEvent *ev, uint64_t id,
         const FsimBlock *block, uint64_t requested)
{
    Validator *v = data;

    (void)engine;
    (void)id;
    (void)requested;
    if (ev == NULL)
        return; /* a seeded block */
    v->allocated = TRUE;
    v->block = *block;
}

static void
on_oom(gpointer data, const FsimEngine *engine, const FsimOomRecord *oom)
{
    Validator *v = data;
    /* PyTorch records the rounded request */
    Item item = {.kind = FSIM_VALIDATE_OOM, .size = fsim_pytorch_round_size(&v->conf, oom->size)};

    (void)engine;
    model_add(v, &item);
}

static const FsimObserver validator_observer = {
    .alloc = on_alloc,
    .oom = on_oom,
    .device_call = on_device_call,
};

/* ---- comparison ------------------------------------------------------------------------------ */

static void
diverge(Validator *v, uint64_t event_index, FsimValidateKind kind, const Item *recorded,
        const Item *model)
{
    FsimDivergence *d = &v->out->first_divergence;

    v->out->exact = FALSE;
    if (d->found)
        return;
    d->found = TRUE;
    d->event_index = event_index;
    d->kind = kind;
    if (recorded != NULL) {
        d->recorded.present = TRUE;
        d->recorded.index = recorded->index;
        d->recorded.addr = recorded->addr;
        d->recorded.size = recorded->size;
    }
    if (model != NULL) {
        d->model.present = TRUE;
        d->model.addr = model->addr;
        d->model.size = model->size;
    }
}

static gboolean
items_equal(const Item *a, const Item *b)
{
    return a->addr == b->addr && a->size == b->size;
}

/* The next item of kind @k at or after *@i among @n recorded outcomes (advancing *@i past it), in
 * @out; FALSE when there is none. */
static gboolean
next_recorded(const FsimOutcome *recorded, gsize n, gsize *i, int k, Item *out)
{
    for (; *i < n; (*i)++) {
        const FsimOutcome *o = &recorded[*i];

        if ((int)kind_of_outcome(o->kind) == k) {
            *out = (Item){.kind = kind_of_outcome(o->kind),
                          .index = o->index,
                          .addr = o->kind == FSIM_OUTCOME_OOM ? 0 : o->addr,
                          .size = o->size};
            (*i)++;
            return TRUE;
        }
    }
    return FALSE;
}

/* The next item of the model's of kind @k at or after *@i (advancing *@i past it), or NULL. */
static const Item *
next_model(const Validator *v, guint *i, int k)
{
    for (; *i < v->n_model; (*i)++) {
        const Item *item = &v->model[*i];

        if ((int)item->kind == k) {
            (*i)++;
            return item;
        }
    }
    return NULL;
}

/* Compare what the trace recorded for one event with what the model did, kind by kind, in order:
 * the n-th recorded outcome of a kind against the model's n-th of that kind. */
static void
compare_outcomes(Validator *v, uint64_t event_index, const FsimOutcome *recorded, gsize n_recorded)
{
    if (n_recorded == 0 && v->n_model == 0)
        return; /* most events: nothing recorded, nothing done */
    for (int k = FSIM_VALIDATE_SEGMENT_ALLOC; k < FSIM_VALIDATE_KIND_COUNT; k++) {
        gsize r = 0;
        guint m = 0;

        for (;;) {
            Item rec;
            const Item *r_item = next_recorded(recorded, n_recorded, &r, k, &rec) ? &rec : NULL;
            const Item *m_item = next_model(v, &m, k);

            if (r_item == NULL && m_item == NULL)
                break;
            if (r_item != NULL)
                v->out->counts[k].total++;
            if (r_item != NULL && m_item != NULL && items_equal(r_item, m_item))
                v->out->counts[k].matched++;
            else
                diverge(v, event_index, (FsimValidateKind)k, r_item, m_item);
        }
    }
}

/* The recorded outcomes that belong to @ev, from *cursor on (validate.h says which). */
static gsize
outcome_window(const FsimEvent *ev, const FsimOutcome *outcomes, gsize n, gsize cursor)
{
    gsize end = cursor;

    if (ev->kind == FSIM_EV_EMPTY_CACHE && (ev->flags & FSIM_EVF_INFERRED) != 0) {
        while (end < n && outcomes[end].index < ev->index)
            end++;
        /* the burst of releases starting at the event's own index */
        while (end < n && outcomes[end].index == ev->index + (end - cursor) &&
               (outcomes[end].kind == FSIM_OUTCOME_SEGMENT_FREE ||
                outcomes[end].kind == FSIM_OUTCOME_SEGMENT_UNMAP))
            end++;
        return end;
    }
    if (ev->kind != FSIM_EV_ALLOC && ev->kind != FSIM_EV_EMPTY_CACHE)
        return end; /* frees and marks never allocate or release device memory */
    while (end < n && outcomes[end].index <= ev->index)
        end++;
    return end;
}

/* Replay one event and compare. */
static gboolean
validate_event(Validator *v, const FsimEvent *ev, const FsimOutcome *outcomes, gsize n,
               gsize *cursor, GError **error)
{
    gsize end = outcome_window(ev, outcomes, n, *cursor);
    gboolean hinted = FALSE;
    gboolean ok;

    /* The device holds no address between events: it is withdrawn after each that has one. */
    for (gsize i = *cursor; i < end; i++) {
        if (outcomes[i].kind == FSIM_OUTCOME_SEGMENT_ALLOC ||
            outcomes[i].kind == FSIM_OUTCOME_SEGMENT_MAP) {
            fsim_device_set_next_address(v->device, outcomes[i].addr);
            hinted = TRUE;
            break;
        }
    }
    v->n_model = 0;
    v->allocated = FALSE;
    ok = fsim_engine_process(v->engine, ev, error);
    if (hinted)
        fsim_device_clear_next_address(v->device);
    if (!ok)
        return FALSE;
    v->out->events++;
    if (ev->kind == FSIM_EV_ALLOC && ev->addr != 0) {
        v->out->counts[FSIM_VALIDATE_ALLOC].total++;
        if (v->allocated && v->block.addr == ev->addr) {
            v->out->counts[FSIM_VALIDATE_ALLOC].matched++;
        } else {
            Item recorded = {.kind = FSIM_VALIDATE_ALLOC,
                             .index = ev->index,
                             .addr = ev->addr,
                             .size = ev->size};
            Item model = {
                .kind = FSIM_VALIDATE_ALLOC, .addr = v->block.addr, .size = v->block.size};

            diverge(v, ev->index, FSIM_VALIDATE_ALLOC, &recorded, v->allocated ? &model : NULL);
        }
    }
    /* A device without outcomes has none at all (NULL, and NULL + 0 is undefined). */
    if (end != *cursor || v->n_model != 0)
        compare_outcomes(v, ev->index, outcomes != NULL ? outcomes + *cursor : NULL, end - *cursor);
    *cursor = end;
    return TRUE;
}

/* ---- the device the model runs on ------------------------------------------------------------ */

static gboolean
validate_spec(uint64_t capacity, FsimDeviceSpec *spec, GError **error)
{
    g_autofree char *text = NULL;

    if (capacity == 0)
        return fsim_device_spec_parse(FSIM_DEVICE_DEFAULT, spec, error);
    capacity = MAX(capacity, 2 * FSIM_MiB);
    text = g_strdup_printf("%" G_GUINT64_FORMAT, capacity);
    if (!fsim_device_spec_parse(text, spec, error))
        return FALSE;
    g_strlcpy(spec->name, "recorded", sizeof(spec->name));
    g_snprintf(spec->description, sizeof(spec->description),
               "the recording GPU, as far as the trace tells (%" G_GUINT64_FORMAT " bytes)",
               capacity);
    return TRUE;
}

/* ---- one device ------------------------------------------------------------------------------ */

/* The replay of one device's events: the state of the loop that merges the recorded OOMs with
 * the reader's events. */
typedef struct {
    Validator *v;
    uint32_t device;
    const FsimOutcome *outcomes;
    gsize n_outcomes;
    gsize cursor;     /* the first recorded outcome no event has claimed yet */
    GArray *ooms;     /* gsize: the indices of the recorded OOMs among the outcomes */
    guint next_oom;   /* the first of them not replayed yet */
    uint64_t next_id; /* for the allocations replayed for OOMs */
    FsimTime time;    /* of the last event */
} Replay;

/* The allocations that failed: replayed where their `oom` entries are, before @ev (NULL: at the
 * end). */
static gboolean
replay_ooms(Replay *r, const FsimEvent *ev, GError **error)
{
    while (r->next_oom < r->ooms->len) {
        const FsimOutcome *oom = &r->outcomes[g_array_index(r->ooms, gsize, r->next_oom)];
        uint64_t id = r->next_id++; /* (one for each look at an OOM, as ever) */

        if (ev != NULL && oom->index > ev->index)
            break;
        r->next_oom++;
        if (ev != NULL && oom->index == ev->index && ev->kind == FSIM_EV_ALLOC)
            break; /* the reader made an event of it: nothing to add */

        FsimEvent failed = {.time = r->time,
                            .index = oom->index,
                            .id = id,
                            .size = oom->size,
                            .stream = oom->stream,
                            .device = r->device,
                            .kind = FSIM_EV_ALLOC};

        if (!validate_event(r->v, &failed, r->outcomes, r->n_outcomes, &r->cursor, error))
            return FALSE;
    }
    return TRUE;
}

/* Every event of @stream, then the OOMs after the last and the outcomes no event explains. */
static gboolean
replay_events(Replay *r, FsimTraceStream *stream, GError **error)
{
    const FsimEvent *evs;
    gsize n;
    GError *local_error = NULL;

    while ((n = fsim_trace_stream_batch(stream, &evs, &local_error)) > 0) {
        for (gsize i = 0; i < n; i++) {
            if (r->next_oom < r->ooms->len && !replay_ooms(r, &evs[i], error))
                return FALSE;
            r->time = evs[i].time;
            if (!validate_event(r->v, &evs[i], r->outcomes, r->n_outcomes, &r->cursor, error))
                return FALSE;
        }
    }
    if (local_error != NULL) {
        g_propagate_error(error, local_error);
        return FALSE;
    }
    if (!replay_ooms(r, NULL, error))
        return FALSE;
    /* Recorded outcomes no event explains (none in a well-formed trace). */
    if (r->cursor < r->n_outcomes) {
        r->v->n_model = 0;
        compare_outcomes(r->v, r->outcomes[r->cursor].index, r->outcomes + r->cursor,
                         r->n_outcomes - r->cursor);
    }
    return TRUE;
}

/* Longer than ~80 lines: the set-up of one device's replay, which shares a dozen locals. */
static gboolean
validate_device(FsimTrace *trace, uint32_t device, const char *platform, const char *given_conf,
                FsimValidateDevice *out, GError **error)
{
    const char *alloc_conf = given_conf != NULL ? given_conf : fsim_trace_alloc_conf(trace);
    const FsimInitialState *state = fsim_trace_initial_state(trace, device);
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) local_error = NULL;
    g_autoptr(FsimEngine) engine = NULL;
    g_autoptr(FsimTraceStream) stream = NULL;
    g_autoptr(GArray) ooms = g_array_new(FALSE, FALSE, sizeof(gsize));
    g_autofree Item *model = NULL;
    FsimRunConfig run;
    Validator v = {.out = out};
    Replay r = {.v = &v, .device = device, .ooms = ooms, .next_id = SYNTHETIC_ID_BASE};
    gboolean ok;

    r.outcomes = fsim_trace_outcomes(trace, device, &r.n_outcomes);
    out->device = device;
    out->exact = TRUE;
    fsim_alloc_conf_init(&v.conf);
    if (!fsim_alloc_conf_parse(&v.conf, alloc_conf, &local_error) ||
        !fsim_alloc_conf_apply(config, alloc_conf, &local_error)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_UNSUPPORTED,
                    "%s: the %s allocator settings are not understood: %s", fsim_trace_path(trace),
                    given_conf != NULL ? "given" : "recorded", local_error->message);
        return FALSE;
    }
    g_key_file_set_string(config, "caching", "platform", platform);
    g_key_file_set_string(config, "expandable", "platform", platform);
    if (!fsim_platform_from_name(platform, &v.conf.platform))
        g_assert_not_reached();
    out->policy = g_strdup(v.conf.expandable_segments ? "expandable" : "caching");
    out->alloc_conf = fsim_alloc_conf_to_string(&v.conf);
    fsim_run_config_init(&run);
    run.policy = out->policy;
    run.config = config;
    run.initial_state = state;
    out->capacity_bytes = fsim_trace_recorded_capacity(trace, device, &out->capacity_from_oom);
    if (!validate_spec(out->capacity_bytes, &run.device, error))
        return FALSE;
    out->capacity_bytes = run.device.capacity_bytes;
    engine = fsim_engine_new(&run, error);
    if (engine == NULL)
        return FALSE;
    v.engine = engine;
    v.device = fsim_engine_device(engine);
    fsim_engine_add_observer(engine, &validator_observer, &v);
    if (!fsim_engine_start(engine, error)) {
        g_prefix_error(error, "%s: device %u: ", fsim_trace_path(trace), device);
        return FALSE;
    }
    for (gsize i = 0; i < r.n_outcomes; i++) {
        if (r.outcomes[i].kind == FSIM_OUTCOME_OOM)
            g_array_append_val(ooms, i);
    }
    stream = fsim_trace_stream_open(trace, device, error);
    if (stream == NULL)
        return FALSE;
    ok = replay_events(&r, stream, error);
    model = v.model;
    if (!ok || !fsim_engine_finish(engine, error))
        return FALSE;
    out->peak_reserved_bytes = fsim_engine_metrics(engine)->peak_reserved_bytes;
    return TRUE;
}

void
fsim_validate_report_free(FsimValidateReport *report)
{
    if (report == NULL)
        return;
    /* devices is NULL when the trace failed before the first device (its platform unread) */
    for (guint i = 0; report->devices != NULL && i < report->devices->len; i++) {
        FsimValidateDevice *device = &g_array_index(report->devices, FsimValidateDevice, i);

        g_free(device->policy);
        g_free(device->alloc_conf);
    }
    g_clear_pointer(&report->devices, g_array_unref);
    g_free(report->path);
    g_free(report);
}

FsimValidateReport *
fsim_validate_trace(FsimTrace *trace, GError **error)
{
    return fsim_validate_trace_on(trace, NULL, error);
}

FsimValidateReport *
fsim_validate_trace_on(FsimTrace *trace, const char *platform, GError **error)
{
    return fsim_validate_trace_with(trace, platform, NULL, error);
}

FsimValidateReport *
fsim_validate_trace_with(FsimTrace *trace, const char *platform, const char *alloc_conf,
                         GError **error)
{
    g_autoptr(FsimValidateReport) report = g_new0(FsimValidateReport, 1);
    gsize n_devices;
    const uint32_t *devices = fsim_trace_devices(trace, &n_devices);

    g_return_val_if_fail(trace != NULL, NULL);
    report->path = g_strdup(fsim_trace_path(trace));
    report->alloc_conf_given = alloc_conf != NULL;
    report->platform_detected = platform == NULL;
    report->platform =
        platform != NULL && g_ascii_strcasecmp(platform, "npu") == 0 ? "npu" : "cuda";
    if (platform == NULL) {
        report->platform = fsim_trace_detect_platform_why(trace, &report->platform_why, error);
        if (report->platform == NULL)
            return NULL;
    }
    report->devices = g_array_new(FALSE, TRUE, sizeof(FsimValidateDevice));
    report->exact = TRUE;
    for (gsize d = 0; d < n_devices; d++) {
        FsimValidateDevice *device;

        g_array_set_size(report->devices, report->devices->len + 1);
        device = &g_array_index(report->devices, FsimValidateDevice, report->devices->len - 1);
        if (!validate_device(trace, devices[d], report->platform, alloc_conf, device, error))
            return NULL;
        report->exact &= device->exact;
    }
    return g_steal_pointer(&report);
}

FsimValidateReport *
fsim_validate_file(const char *path, GError **error)
{
    g_autoptr(FsimTrace) trace = fsim_trace_open_without_stacks(path, error);

    if (trace == NULL)
        return NULL;
    return fsim_validate_trace(trace, error);
}
