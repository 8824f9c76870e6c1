/* SPDX-License-Identifier: MIT */
/*
 * The `explain --json` object (docs/explain.md has the schema):
 *
 *   {"trace", "policy", "config", "device",
 *    "pool_needs": [{"pool": "default" | ID, "needed_bytes", "peak_reserved_bytes"}]
 *                  (with private pools and the alternatives: each pool's share of needed_bytes),
 *    "moments": [{"kind": "peak"|"oom"|"at", "event", "time_ns", "reserved_bytes",
 *                 "breakdown": {"live_requested_bytes", "rounding_bytes",
 *                               "free_releasable_bytes", "free_pinned_bytes"},
 *                 "largest_free_bytes", "request": {...} (OOM only),
 *                 "pins": [{"site", "count", "sizes", "live_bytes", "pinned_bytes"}],
 *                 "pools": [{"pool": "default" | ID, "reserved_bytes", "breakdown"}]
 *                          (when a private pool holds memory),
 *                 "alternatives": [...] (when asked for)}]}
 */
#include <glib.h>

#include "fragsim/explain.h"

static void
add_int(FsimJsonWriter *b, const char *name, int64_t value)
{
    fsim_json_set_member_name(b, name);
    fsim_json_add_int_value(b, value);
}

static void
add_u64(FsimJsonWriter *b, const char *name, uint64_t value)
{
    add_int(b, name, (int64_t)value);
}

static void
add_string(FsimJsonWriter *b, const char *name, const char *value)
{
    fsim_json_set_member_name(b, name);
    fsim_json_add_string_value(b, value != NULL ? value : "");
}

static void
add_bool(FsimJsonWriter *b, const char *name, gboolean value)
{
    fsim_json_set_member_name(b, name);
    fsim_json_add_boolean_value(b, value);
}

typedef void (*AddMembers)(FsimJsonWriter *b, gconstpointer item);

/* `"@name": [{...}, ...]`: one object per item, its members added by @add_members; @n items at
 * @items, @stride bytes apart, each a pointer to the item when @pointers. */
static void
add_objects_at(FsimJsonWriter *b, const char *name, const guint8 *items, guint n, gsize stride,
               gboolean pointers, AddMembers add_members)
{
    fsim_json_set_member_name(b, name);
    fsim_json_begin_array(b);
    for (guint i = 0; i < n; i++) {
        const guint8 *item = items + (gsize)i * stride;

        fsim_json_begin_object(b);
        add_members(b, pointers ? *(const gconstpointer *)(gconstpointer)item : item);
        fsim_json_end_object(b);
    }
    fsim_json_end_array(b);
}

/* The same for the items a pointer array points to. */
static void
add_objects(FsimJsonWriter *b, const char *name, const GPtrArray *items, AddMembers add_members)
{
    add_objects_at(b, name, (const guint8 *)items->pdata, items->len, sizeof(gpointer), TRUE,
                   add_members);
}

/* The same for the elements of an array. */
static void
add_elements(FsimJsonWriter *b, const char *name, GArray *items, AddMembers add_members)
{
    add_objects_at(b, name, (const guint8 *)items->data, items->len,
                   g_array_get_element_size(items), FALSE, add_members);
}

/* `"pool"`: a private pool's id, or "default". */
static void
add_pool_name(FsimJsonWriter *b, gboolean private_pool, uint64_t id)
{
    fsim_json_set_member_name(b, "pool");
    if (private_pool)
        fsim_json_add_int_value(b, (gint64)id);
    else
        fsim_json_add_string_value(b, "default");
}

/* `"@name": [@values[0], ...]`: an array of uint64_t. */
static void
add_u64_array(FsimJsonWriter *b, const char *name, const GArray *values)
{
    fsim_json_set_member_name(b, name);
    fsim_json_begin_array(b);
    for (guint k = 0; k < values->len; k++)
        fsim_json_add_int_value(b, (int64_t)g_array_index(values, uint64_t, k));
    fsim_json_end_array(b);
}

/* `"@name": {"@names[0]": @values[0], ...}`: an object of @n counts. */
static void
add_u64_object(FsimJsonWriter *b, const char *name, const char *const *names,
               const uint64_t *values, guint n)
{
    fsim_json_set_member_name(b, name);
    fsim_json_begin_object(b);
    for (guint i = 0; i < n; i++)
        add_u64(b, names[i], values[i]);
    fsim_json_end_object(b);
}

static void
add_breakdown(FsimJsonWriter *b, const FsimBreakdown *breakdown)
{
    static const char *const names[] = {"live_requested_bytes", "rounding_bytes",
                                        "free_releasable_bytes", "free_pinned_bytes"};
    const uint64_t values[] = {breakdown->live_requested_bytes, breakdown->rounding_bytes,
                               breakdown->free_releasable_bytes, breakdown->free_pinned_bytes};

    add_u64_object(b, "breakdown", names, values, G_N_ELEMENTS(names));
}

static void
add_request(FsimJsonWriter *b, const FsimExplainRequest *r)
{
    static const char *const free_block_names[] = {"too_small", "other_stream", "other_pool",
                                                   "refused"};
    const uint64_t free_blocks[] = {r->free_blocks_too_small, r->free_blocks_other_stream,
                                    r->free_blocks_other_pool, r->free_blocks_refused};

    fsim_json_set_member_name(b, "request");
    fsim_json_begin_object(b);
    add_u64(b, "size", r->size);
    add_u64(b, "stream", r->stream);
    add_bool(b, "simulated", r->simulated);
    add_bool(b, "recorded", r->recorded);
    add_u64(b, "device_free_bytes", r->device_free_bytes);
    add_u64(b, "largest_free_same_stream_bytes", r->largest_free_same_stream_bytes);
    add_u64_object(b, "free_blocks", free_block_names, free_blocks, G_N_ELEMENTS(free_blocks));
    add_string(b, "reason", r->reason);
    fsim_json_end_object(b);
}

static void
add_pin(FsimJsonWriter *b, gconstpointer item)
{
    const FsimPinSite *site = item;

    add_string(b, "site", site->site);
    add_u64(b, "count", site->count);
    add_u64_array(b, "sizes", site->sizes);
    add_u64(b, "live_bytes", site->live_bytes);
    add_u64(b, "pinned_bytes", site->pinned_bytes);
}

static void
add_alternative(FsimJsonWriter *b, gconstpointer item)
{
    const FsimAlternative *a = item;

    add_string(b, "policy", a->policy);
    add_string(b, "config", a->config);
    fsim_json_set_member_name(b, "needed_bytes");
    if (a->needed_bytes >= 0)
        fsim_json_add_int_value(b, a->needed_bytes);
    else
        fsim_json_add_null_value(b);
    if (a->has_moment) {
        add_u64(b, "reserved_bytes", a->reserved_bytes);
        add_breakdown(b, &a->breakdown);
        add_bool(b, "oom", a->oom);
    }
    add_string(b, "advice", a->advice);
}

static void
add_pool_need(FsimJsonWriter *b, gconstpointer item)
{
    const FsimPoolNeed *p = item;

    add_pool_name(b, p->pool != 0, p->pool);
    add_u64(b, "needed_bytes", p->needed_bytes);
    add_u64(b, "peak_reserved_bytes", p->peak_reserved_bytes);
}

static void
add_pool(FsimJsonWriter *b, gconstpointer item)
{
    const FsimPoolBreakdown *p = item;

    add_pool_name(b, p->private_pool, p->pool_id);
    add_u64(b, "reserved_bytes", p->reserved_bytes);
    add_breakdown(b, &p->breakdown);
}

static void
add_moment(FsimJsonWriter *b, gconstpointer item)
{
    const FsimMoment *m = item;

    add_string(b, "kind", fsim_moment_kind_name(m->kind));
    add_int(b, "event", m->event);
    add_u64(b, "time_ns", m->time_ns);
    add_u64(b, "reserved_bytes", m->reserved_bytes);
    add_breakdown(b, &m->breakdown);
    add_u64(b, "largest_free_bytes", m->largest_free_bytes);
    if (m->has_request)
        add_request(b, &m->request);
    add_objects(b, "pins", m->pins, add_pin);
    if (m->pools != NULL && m->pools->len > 0)
        add_elements(b, "pools", m->pools, add_pool);
    if (m->alternatives != NULL)
        add_objects(b, "alternatives", m->alternatives, add_alternative);
}

void
fsim_explanation_write_json(const FsimExplanation *e, FsimJsonWriter *b)
{
    add_string(b, "trace", e->trace);
    add_string(b, "policy", e->policy);
    add_string(b, "config", e->config);
    add_string(b, "device", e->device);
    if (e->pool_needs != NULL)
        add_elements(b, "pool_needs", e->pool_needs, add_pool_need);
    add_objects(b, "moments", e->moments, add_moment);
}
