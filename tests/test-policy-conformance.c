/* SPDX-License-Identifier: MIT */
/*
 * The conformance suite every registered policy runs (the RMM and ROSS pattern): it loops over
 * fsim_policy_list() and registers each generic case once per policy, so a new policy gets every
 * test for free.  The policies are driven directly, white-box, on a simulated device, and the
 * suite keeps its own table of live blocks to check the contract of policy.h:
 *
 *   - blocks never overlap, and size >= requested;
 *   - freeing everything returns the policy to no allocated bytes;
 *   - an OOM leaves *out untouched and no other live block disturbed;
 *   - check() holds after every operation, and fails on device memory the policy does not hold;
 *   - the same sequence gives the same blocks twice (determinism);
 *   - injected device faults end in clean OOMs;
 *   - property runs from fixed seeds 1..50, with the seed printed on failure.
 */
#include <glib.h>

#include <string.h>

#include "fragsim/fragsim.h"

typedef struct {
    FsimBlock block;
    uint64_t requested;
    uint64_t stream;
} Live;

typedef struct {
    const FsimPolicyOps *ops;
    FsimDevice *device;
    FsimPolicy *policy;
    GArray *live; /* of Live */
    GRand *rand;
    guint seed;
    uint64_t ooms;
    uint64_t allocs;
    GArray *history; /* of FsimBlock: every block handed out, for determinism */
} Harness;

static void
harness_init(Harness *h, const FsimPolicyOps *ops, uint64_t capacity, GKeyFile *config, guint seed)
{
    FsimDeviceSpec spec;
    g_autoptr(GError) error = NULL;
    g_autofree char *size = g_strdup_printf("%" G_GUINT64_FORMAT, capacity);

    memset(h, 0, sizeof(*h));
    g_assert_true(fsim_device_spec_parse(size, &spec, &error));
    g_assert_no_error(error);
    h->ops = ops;
    h->device = fsim_device_sim_new(&spec, config, &error);
    g_assert_no_error(error);
    h->policy = fsim_policy_new(ops->name, h->device, config, &error);
    g_assert_no_error(error);
    g_assert_nonnull(h->policy);
    h->live = g_array_new(FALSE, FALSE, sizeof(Live));
    h->history = g_array_new(FALSE, FALSE, sizeof(FsimBlock));
    h->rand = g_rand_new_with_seed(seed);
    h->seed = seed;
}

static void
harness_clear(Harness *h)
{
    fsim_policy_free(h->policy);
    fsim_device_free(h->device);
    g_array_unref(h->live);
    g_array_unref(h->history);
    g_rand_free(h->rand);
}

static void
harness_check(Harness *h, const char *after)
{
    g_autoptr(GError) error = NULL;

    if (h->ops->check == NULL)
        return;
    if (!h->ops->check(h->policy, &error))
        g_error("policy %s, seed %u: check() failed after %s: %s", h->ops->name, h->seed, after,
                error->message);
}

static void
harness_check_overlap(Harness *h, const FsimBlock *block)
{
    for (guint i = 0; i < h->live->len; i++) {
        const Live *other = &g_array_index(h->live, Live, i);

        if (block->addr < other->block.addr + other->block.size &&
            other->block.addr < block->addr + block->size)
            g_error("policy %s, seed %u: block [0x%" G_GINT64_MODIFIER "x, +%" G_GUINT64_FORMAT
                    ") overlaps live block [0x%" G_GINT64_MODIFIER "x, +%" G_GUINT64_FORMAT ")",
                    h->ops->name, h->seed, block->addr, block->size, other->block.addr,
                    other->block.size);
    }
}

/* One allocation; returns TRUE on success.  Checks the whole contract. */
static gboolean
harness_alloc(Harness *h, uint64_t size, uint64_t stream)
{
    FsimAllocRequest req = {.size = size, .stream = stream, .now = h->allocs};
    FsimBlock out;
    FsimBlock sentinel;
    guint live_before = h->live->len;

    memset(&out, 0xa5, sizeof(out));
    sentinel = out;
    h->allocs++;
    if (h->ops->alloc(h->policy, &req, &out) != FSIM_OK) {
        h->ooms++;
        /* *out untouched, nothing handed out disturbed */
        g_assert_cmpmem(&out, sizeof(out), &sentinel, sizeof(sentinel));
        g_assert_cmpuint(h->live->len, ==, live_before);
        harness_check(h, "an OOM");
        return FALSE;
    }
    if (out.size < size)
        g_error("policy %s, seed %u: block of %" G_GUINT64_FORMAT
                " bytes for a request of %" G_GUINT64_FORMAT,
                h->ops->name, h->seed, out.size, size);
    harness_check_overlap(h, &out);
    {
        Live live = {.block = out, .requested = size, .stream = stream};

        g_array_append_val(h->live, live);
        g_array_append_val(h->history, out);
    }
    harness_check(h, "an alloc");
    return TRUE;
}

static void
harness_free_at(Harness *h, guint i)
{
    Live live = g_array_index(h->live, Live, i);

    g_array_remove_index_fast(h->live, i);
    h->ops->dealloc(h->policy, &live.block, h->allocs);
    harness_check(h, "a dealloc");
}

static void
harness_free_all(Harness *h)
{
    while (h->live->len > 0)
        harness_free_at(h, h->live->len - 1);
}

/* Sizes spanning PyTorch's pools: tiny, small (<= 1 MiB), 1-10 MiB, large, and odd sizes. */
static uint64_t
random_size(GRand *rand)
{
    switch (g_rand_int_range(rand, 0, 6)) {
    case 0:
        return (uint64_t)g_rand_int_range(rand, 1, 4096);
    case 1:
        return (uint64_t)g_rand_int_range(rand, 4096, 1 << 20);
    case 2:
        return (uint64_t)g_rand_int_range(rand, 1 << 20, 10 << 20);
    case 3:
        return (uint64_t)g_rand_int_range(rand, 10 << 20, 64 << 20);
    case 4:
        return 1ull << g_rand_int_range(rand, 9, 27);
    default:
        return (uint64_t)g_rand_int_range(rand, 1, 200) * 512 + 1;
    }
}

static void
harness_random_ops(Harness *h, guint n_ops, guint streams)
{
    for (guint op = 0; op < n_ops; op++) {
        guint choice = (guint)g_rand_int_range(h->rand, 0, 100);

        if (choice < 55 || h->live->len == 0) {
            harness_alloc(h, random_size(h->rand),
                          (uint64_t)g_rand_int_range(h->rand, 0, (gint32)streams));
        } else if (choice < 97) {
            harness_free_at(h, (guint)g_rand_int_range(h->rand, 0, (gint32)h->live->len));
        } else if (choice < 99) {
            if (h->ops->empty_cache != NULL) {
                h->ops->empty_cache(h->policy, op);
                harness_check(h, "empty_cache");
            }
        } else if (h->ops->stream_sync != NULL) {
            h->ops->stream_sync(h->policy, (uint64_t)g_rand_int_range(h->rand, 0, (gint32)streams),
                                op);
            harness_check(h, "stream_sync");
        }
    }
}

static void
test_alloc_free_all(gconstpointer data)
{
    const FsimPolicyOps *ops = data;
    Harness h;

    harness_init(&h, ops, 4 * FSIM_GiB, NULL, 1);
    harness_random_ops(&h, 400, 2);
    harness_free_all(&h);
    /* After freeing everything, nothing is handed out: what is reserved is all cached. */
    if (ops->get_stats != NULL) {
        FsimPolicyStats stats = {0};

        ops->get_stats(h.policy, &stats);
        g_assert_cmpuint(stats.cached_bytes, ==, (uint64_t)h.device->reserved.current);
    }
    if (ops->empty_cache != NULL) {
        ops->empty_cache(h.policy, 0);
        harness_check(&h, "empty_cache");
    }
    harness_clear(&h);
}

/* check() sees device memory the policy does not account for: a cudaMalloc behind its back. */
static void
test_check_sees_foreign_memory(gconstpointer data)
{
    const FsimPolicyOps *ops = data;
    g_autoptr(GError) error = NULL;
    FsimAddr addr;
    Harness h;

    if (ops->check == NULL)
        return;
    harness_init(&h, ops, 16 * FSIM_GiB, NULL, 1);
    harness_random_ops(&h, 100, 2);
    if (fsim_device_mem_alloc(h.device, 2 * FSIM_MiB, &addr) != FSIM_OK) {
        g_test_skip("the policy holds the whole device");
        harness_clear(&h);
        return;
    }
    g_assert_false(ops->check(h.policy, &error));
    g_assert_nonnull(error);
    g_test_message("%s: %s", ops->name, error->message);
    fsim_device_mem_free(h.device, addr, 2 * FSIM_MiB);
    harness_check(&h, "a foreign cudaFree");
    harness_free_all(&h);
    harness_clear(&h);
}

static void
test_sizes_and_overlap(gconstpointer data)
{
    const FsimPolicyOps *ops = data;
    Harness h;
    static const uint64_t sizes[] = {1,        511,           512,         513,      4096,
                                     1 << 20,  (1 << 20) + 1, 3 << 20,     10 << 20, (10 << 20) + 1,
                                     20 << 20, 100 << 20,     FSIM_GiB + 7};

    harness_init(&h, ops, 8 * FSIM_GiB, NULL, 2);
    for (gsize r = 0; r < 3; r++) {
        for (gsize i = 0; i < G_N_ELEMENTS(sizes); i++)
            g_assert_true(harness_alloc(&h, sizes[i], r % 2));
    }
    harness_free_all(&h);
    harness_clear(&h);
}

static void
test_oom_no_side_effect(gconstpointer data)
{
    const FsimPolicyOps *ops = data;
    Harness h;
    guint ooms_seen = 0;

    /* A 256 MiB device fills quickly. */
    harness_init(&h, ops, 256 * FSIM_MiB, NULL, 3);
    for (guint i = 0; i < 200; i++) {
        if (!harness_alloc(&h, (uint64_t)(1 + i % 7) * 9 * FSIM_MiB + 12345, 0))
            ooms_seen++;
        if (i % 5 == 4 && h.live->len > 0)
            harness_free_at(&h, 0);
    }
    g_assert_cmpuint(ooms_seen, >, 0);
    /* A request larger than the device always fails, and cleanly. */
    g_assert_false(harness_alloc(&h, 512 * FSIM_MiB, 0));
    harness_free_all(&h);
    /* Once everything is freed, what failed before fits again. */
    g_assert_true(harness_alloc(&h, 100 * FSIM_MiB, 0));
    harness_free_all(&h);
    harness_clear(&h);
}

static void
test_determinism(gconstpointer data)
{
    const FsimPolicyOps *ops = data;
    Harness a;
    Harness b;

    harness_init(&a, ops, 2 * FSIM_GiB, NULL, 7);
    harness_init(&b, ops, 2 * FSIM_GiB, NULL, 7);
    harness_random_ops(&a, 600, 3);
    harness_random_ops(&b, 600, 3);
    g_assert_cmpuint(a.history->len, ==, b.history->len);
    /* Addresses and sizes; cookies are policy-private (they may be host pointers). */
    for (guint i = 0; i < a.history->len; i++) {
        g_assert_cmpuint(g_array_index(a.history, FsimBlock, i).addr, ==,
                         g_array_index(b.history, FsimBlock, i).addr);
        g_assert_cmpuint(g_array_index(a.history, FsimBlock, i).size, ==,
                         g_array_index(b.history, FsimBlock, i).size);
    }
    g_assert_cmpint(a.device->reserved.peak, ==, b.device->reserved.peak);
    for (int c = 0; c < FSIM_CALL_COUNT; c++)
        g_assert_cmpuint(a.device->calls[c], ==, b.device->calls[c]);
    harness_free_all(&a);
    harness_free_all(&b);
    harness_clear(&a);
    harness_clear(&b);
}

/* Every allocating device call fails, at the Nth attempt only or from the Nth on: the policy must
 * start all the same, answer FSIM_OOM cleanly, keep its invariants, and give everything back. */
static void
test_fault_injection(gconstpointer data)
{
    const FsimPolicyOps *ops = data;
    static const char *const calls[] = {"mem_alloc", "va_reserve", "map"};
    static const char *const modes[] = {"at", "from"};

    for (gsize c = 0; c < G_N_ELEMENTS(calls); c++) {
        for (gsize m = 0; m < G_N_ELEMENTS(modes); m++) {
            g_autofree char *key = g_strdup_printf("fail_%s_%s", calls[c], modes[m]);

            for (guint n = 1; n <= 12; n += 3) {
                g_autoptr(GKeyFile) config = g_key_file_new();
                Harness h;

                g_key_file_set_uint64(config, "device", key, n);
                /* Never an error at creation: a fault is an OOM of an allocation. */
                harness_init(&h, ops, 4 * FSIM_GiB, config, 100 + n);
                harness_random_ops(&h, 150, 2);
                harness_free_all(&h);
                harness_clear(&h);
            }
        }
    }
}

static void
test_property(gconstpointer data)
{
    const FsimPolicyOps *ops = data;

    for (guint seed = 1; seed <= 50; seed++) {
        Harness h;
        /* Alternate roomy and tight devices so both the cache and the OOM paths are walked. */
        uint64_t capacity = seed % 3 == 0 ? 192 * FSIM_MiB : 2 * FSIM_GiB;

        harness_init(&h, ops, capacity, NULL, seed);
        harness_random_ops(&h, 300, 1 + seed % 4);
        harness_free_all(&h);
        harness_clear(&h);
    }
}

/* The same trace through the engine twice gives identical metrics (wall time aside). */
static void
test_engine_determinism(gconstpointer data)
{
    const FsimPolicyOps *ops = data;
    FsimMetrics results[2];

    for (int r = 0; r < 2; r++) {
        FsimRunConfig config;
        g_autoptr(FsimEngine) engine = NULL;
        g_autoptr(GError) error = NULL;
        g_autoptr(GRand) rand = g_rand_new_with_seed(42);
        g_autoptr(GArray) live = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        uint64_t next_id = 1;

        fsim_run_config_init(&config);
        config.policy = ops->name;
        g_assert_true(fsim_device_spec_parse("1GiB", &config.device, &error));
        engine = fsim_engine_new(&config, &error);
        g_assert_no_error(error);
        for (uint64_t i = 0; i < 2000; i++) {
            FsimEvent ev = {.time = i * 10, .index = i + 1};

            if (live->len == 0 || g_rand_int_range(rand, 0, 100) < 55) {
                ev.kind = FSIM_EV_ALLOC;
                ev.id = next_id++;
                ev.size = random_size(rand);
                ev.stream = (uint64_t)g_rand_int_range(rand, 0, 2);
                g_array_append_val(live, ev.id);
            } else {
                guint k = (guint)g_rand_int_range(rand, 0, (gint32)live->len);

                ev.kind = FSIM_EV_FREE;
                ev.id = g_array_index(live, uint64_t, k);
                g_array_remove_index_fast(live, k);
            }
            g_assert_true(fsim_engine_process(engine, &ev, &error));
            g_assert_no_error(error);
        }
        g_assert_true(fsim_engine_finish(engine, &error));
        g_assert_no_error(error);
        results[r] = *fsim_engine_metrics(engine);
        results[r].wall_seconds = 0;
        results[r].events_per_second = 0;
    }
    g_assert_cmpmem(&results[0], sizeof(FsimMetrics), &results[1], sizeof(FsimMetrics));
}

int
main(int argc, char **argv)
{
    gsize n;
    const FsimPolicyOps *const *policies;

    g_test_init(&argc, &argv, NULL);
    policies = fsim_policy_list(&n);
    for (gsize i = 0; i < n; i++) {
        static const struct {
            const char *name;
            GTestDataFunc func;
        } cases[] = {
            {"alloc-free-all", test_alloc_free_all},
            {"check-sees-foreign-memory", test_check_sees_foreign_memory},
            {"sizes-and-overlap", test_sizes_and_overlap},
            {"oom-no-side-effect", test_oom_no_side_effect},
            {"determinism", test_determinism},
            {"fault-injection", test_fault_injection},
            {"property-seeds-1-50", test_property},
            {"engine-determinism", test_engine_determinism},
        };

        for (gsize c = 0; c < G_N_ELEMENTS(cases); c++) {
            g_autofree char *path =
                g_strdup_printf("/policy/%s/%s", policies[i]->name, cases[c].name);

            g_test_add_data_func(path, policies[i], cases[c].func);
        }
    }
    return g_test_run();
}
