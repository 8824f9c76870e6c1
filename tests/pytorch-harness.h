/* SPDX-License-Identifier: MIT */
/*
 * A white-box harness for the tests of the PyTorch allocator policies (test-caching.c,
 * test-expandable.c): a policy on a simulated device whose driver calls are recorded, with
 * check() after every operation.
 */
#pragma once

#include <glib.h>

#include <string.h>

#include "fragsim/fragsim.h"

typedef struct {
    FsimDeviceCall call;
    FsimAddr addr;
    uint64_t size;
} Call;

typedef struct {
    FsimDevice *device;
    FsimPolicy *policy;
    GArray *calls; /* of Call */
} Harness;

static inline void
harness_observer(gpointer data, FsimDeviceCall call, FsimAddr addr, uint64_t size)
{
    Harness *h = data;
    Call c;

    /* Zeroed first: the padding after the enum must not hold stack garbage. */
    memset(&c, 0, sizeof(c));
    c.call = call;
    c.addr = addr;
    c.size = size;
    g_array_append_val(h->calls, c);
}

/* A policy on a device of @capacity (a size, e.g. "1GiB") with PYTORCH_CUDA_ALLOC_CONF @conf. */
static inline void
harness_init(Harness *h, const char *policy, const char *capacity, const char *conf)
{
    FsimDeviceSpec spec;
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) error = NULL;

    memset(h, 0, sizeof(*h));
    g_assert_true(fsim_device_spec_parse(capacity, &spec, &error));
    h->device = fsim_device_sim_new(&spec, NULL, &error);
    g_assert_no_error(error);
    h->device->observer = harness_observer;
    h->device->observer_data = h;
    h->calls = g_array_new(FALSE, FALSE, sizeof(Call));
    if (conf != NULL)
        g_assert_true(fsim_alloc_conf_apply(config, conf, &error));
    g_assert_no_error(error);
    h->policy = fsim_policy_new(policy, h->device, config, &error);
    g_assert_no_error(error);
}

static inline void
harness_clear(Harness *h)
{
    fsim_policy_free(h->policy);
    fsim_device_free(h->device);
    g_array_unref(h->calls);
}

static inline void
harness_check(Harness *h)
{
    g_autoptr(GError) error = NULL;

    if (!h->policy->ops->check(h->policy, &error))
        g_error("check() failed: %s", error->message);
}

static inline gboolean
harness_try_alloc(Harness *h, uint64_t size, uint64_t stream, FsimBlock *out)
{
    FsimAllocRequest req = {.size = size, .stream = stream};
    FsimStatus status = h->policy->ops->alloc(h->policy, &req, out);

    harness_check(h);
    if (status == FSIM_OK)
        g_assert_cmpuint(out->size, >=, size);
    return status == FSIM_OK;
}

static inline FsimBlock
harness_alloc(Harness *h, uint64_t size, uint64_t stream)
{
    FsimBlock block;

    if (!harness_try_alloc(h, size, stream, &block))
        g_error("alloc of %" G_GUINT64_FORMAT " bytes failed", size);
    return block;
}

static inline void
harness_free(Harness *h, const FsimBlock *block)
{
    h->policy->ops->dealloc(h->policy, block, 0);
    harness_check(h);
}

static inline void
harness_empty_cache(Harness *h)
{
    h->policy->ops->empty_cache(h->policy, 0);
    harness_check(h);
}

static inline guint
harness_count(const Harness *h, FsimDeviceCall call)
{
    guint n = 0;

    for (guint i = 0; i < h->calls->len; i++)
        n += g_array_index(h->calls, Call, i).call == call;
    return n;
}

/* Asserts that two recorded call sequences are the same, field by field (never byte by byte:
 * Call has padding). */
static inline void
harness_assert_calls_equal(const GArray *a, const GArray *b)
{
    g_assert_cmpuint(a->len, ==, b->len);
    for (guint i = 0; i < a->len; i++) {
        const Call *x = &g_array_index(a, Call, i);
        const Call *y = &g_array_index(b, Call, i);

        g_assert_cmpint(x->call, ==, y->call);
        g_assert_cmpuint(x->addr, ==, y->addr);
        g_assert_cmpuint(x->size, ==, y->size);
    }
}

/* The @n-th call (0-based) of kind @call. */
static inline const Call *
harness_nth(const Harness *h, FsimDeviceCall call, guint n)
{
    for (guint i = 0; i < h->calls->len; i++) {
        const Call *c = &g_array_index(h->calls, Call, i);

        if (c->call == call && n-- == 0)
            return c;
    }
    g_error("no call %u of kind %s", n, fsim_device_call_name(call));
    return NULL;
}

static inline uint64_t
harness_stat(const Harness *h, const char *name)
{
    FsimPolicyStats stats;

    memset(&stats, 0, sizeof(stats));
    h->policy->ops->get_stats(h->policy, &stats);
    for (guint i = 0; i < stats.n_extra; i++) {
        if (strcmp(stats.extra[i].name, name) == 0)
            return stats.extra[i].value;
    }
    g_error("no statistic %s", name);
    return 0;
}

static inline FsimPolicyStats
harness_stats(const Harness *h)
{
    FsimPolicyStats stats;

    memset(&stats, 0, sizeof(stats));
    h->policy->ops->get_stats(h->policy, &stats);
    return stats;
}
