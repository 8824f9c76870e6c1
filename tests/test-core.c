/* SPDX-License-Identifier: MIT */
/*
 * The small core modules: sizes, the range set, the live table, the event queue, and the
 * simulated device (presets, address space, faults, costs, hints), the interning of stacks.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>

#include "fragsim/fragsim.h"

#include "core/addr-map.h"
#include "core/event-queue.h"
#include "core/live-table.h"
#include "core/range-set.h"
#include "core/size-set.h"

static void
test_parse_size(void)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"0", 0},
        {"4096", 4096},
        {"80GiB", 80 * FSIM_GiB},
        {"24GB", 24000000000ull},
        {"1.5 GiB", 3 * FSIM_GiB / 2},
        {"512MiB", 512 * FSIM_MiB},
        {"64KiB", 64 * FSIM_KiB},
        {"2m", 2 * FSIM_MiB},
        {"2MB", 2000000},
        {"1TiB", 1024 * FSIM_GiB},
        {"7b", 7},
    };
    static const char *const bad[] = {"",
                                      "GiB",
                                      "-1",
                                      "1.5",
                                      "abc",
                                      "1..5GiB",
                                      "12XB",
                                      "1e9",
                                      "0x10",
                                      "99999999999999999999",
                                      "18446744073709551615GiB"};

    for (gsize i = 0; i < G_N_ELEMENTS(good); i++) {
        uint64_t out = 1;
        g_autoptr(GError) error = NULL;

        g_assert_true(fsim_parse_size(good[i].text, &out, &error));
        g_assert_no_error(error);
        g_assert_cmpuint(out, ==, good[i].bytes);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        uint64_t out = 0;
        g_autoptr(GError) error = NULL;

        g_assert_false(fsim_parse_size(bad[i], &out, &error));
        g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    }
}

/* Names indexed by value, with a value that has none. */
static void
test_enum_names(void)
{
    static const char *const names[] = {[0] = "zero", [2] = "two"};
    int value = -1;

    g_assert_cmpstr(fsim_enum_name(names, G_N_ELEMENTS(names), 2), ==, "two");
    g_assert_cmpstr(fsim_enum_name(names, G_N_ELEMENTS(names), 1), ==, "?");
    g_assert_cmpstr(fsim_enum_name(names, G_N_ELEMENTS(names), 3), ==, "?");
    g_assert_cmpstr(fsim_enum_name(names, G_N_ELEMENTS(names), -1), ==, "?");
    g_assert_true(fsim_enum_from_name(names, G_N_ELEMENTS(names), "TWO", &value));
    g_assert_cmpint(value, ==, 2);
    g_assert_false(fsim_enum_from_name(names, G_N_ELEMENTS(names), "one", &value));
    g_assert_false(fsim_enum_from_name(names, G_N_ELEMENTS(names), NULL, &value));
    g_assert_cmpint(value, ==, 2);
}

/* The first item at or above a key, over structs sorted by a member that is not the first. */
static void
test_lower_bound(void)
{
    typedef struct {
        uint32_t other;
        uint64_t key;
    } Item;
    static const Item items[] = {{9, 10}, {8, 20}, {7, 20}, {6, 30}};
    static const struct {
        uint64_t key;
        gsize index;
    } cases[] = {{0, 0}, {10, 0}, {11, 1}, {20, 1}, {21, 3}, {30, 3}, {31, 4}};

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++)
        g_assert_cmpuint(FSIM_LOWER_BOUND(items, G_N_ELEMENTS(items), Item, key, cases[i].key), ==,
                         cases[i].index);
    g_assert_cmpuint(FSIM_LOWER_BOUND(items, 0, Item, key, 5), ==, 0);
    /* an empty array may be NULL (no offset from it: clang's UBSan checks) */
    g_assert_cmpuint(FSIM_LOWER_BOUND((const Item *)NULL, 0, Item, key, 5), ==, 0);
}

static void
test_format_size(void)
{
    static const struct {
        uint64_t bytes;
        const char *text;
    } cases[] = {
        {0, "0 B"},
        {512, "512 B"},
        {1536, "1.50 KiB"},
        {20 * FSIM_MiB, "20.0 MiB"},
        {80 * FSIM_GiB, "80.0 GiB"},
        {140 * FSIM_GiB, "140 GiB"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *text = fsim_format_size(cases[i].bytes);

        g_assert_cmpstr(text, ==, cases[i].text);
    }
}

static void
test_range_set(void)
{
    g_autoptr(FsimRangeSet) set = fsim_range_set_new();

    /* Dense increasing ids collapse into one range. */
    for (uint64_t i = 1; i <= 1000; i++)
        fsim_range_set_add(set, i, i + 1);
    g_assert_cmpuint(fsim_range_set_count(set), ==, 1);
    g_assert_true(fsim_range_set_contains(set, 1));
    g_assert_true(fsim_range_set_contains(set, 1000));
    g_assert_false(fsim_range_set_contains(set, 0));
    g_assert_false(fsim_range_set_contains(set, 1001));
    fsim_range_set_add(set, 2000, 3000);
    fsim_range_set_add(set, 1500, 1600);
    g_assert_cmpuint(fsim_range_set_count(set), ==, 3);
    g_assert_true(fsim_range_set_covers(set, 2000, 3000));
    g_assert_false(fsim_range_set_covers(set, 1999, 3000));
    g_assert_true(fsim_range_set_overlaps(set, 1550, 1700));
    g_assert_false(fsim_range_set_overlaps(set, 1600, 2000));
    /* Bridging merges. */
    fsim_range_set_add(set, 1001, 2500);
    g_assert_cmpuint(fsim_range_set_count(set), ==, 1);
    g_assert_true(fsim_range_set_covers(set, 1, 3000));
    /* Removing splits. */
    fsim_range_set_remove(set, 100, 200);
    g_assert_cmpuint(fsim_range_set_count(set), ==, 2);
    g_assert_false(fsim_range_set_contains(set, 150));
    g_assert_true(fsim_range_set_contains(set, 99));
    g_assert_true(fsim_range_set_contains(set, 200));
    fsim_range_set_remove(set, 0, 2000);
    g_assert_false(fsim_range_set_overlaps(set, 0, 2000));
    g_assert_true(fsim_range_set_covers(set, 2000, 3000));
    fsim_range_set_remove(set, 2500, 5000);
    g_assert_true(fsim_range_set_covers(set, 2000, 2500));
    g_assert_false(fsim_range_set_contains(set, 2500));
}

/* Compare the live table against GHashTable under random inserts and removes. */
static void
test_live_table(void)
{
    FsimLiveTable table;
    g_autoptr(GHashTable) model = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    g_autoptr(GRand) rand = g_rand_new_with_seed(11);

    fsim_live_table_init(&table);
    for (int i = 0; i < 200000; i++) {
        uint64_t id = (uint64_t)g_rand_int_range(rand, 0, 5000) * 7919;
        FsimLiveEntry *entry = fsim_live_table_lookup(&table, id);
        gboolean in_model = g_hash_table_contains(model, &id);

        g_assert_cmpint(entry != NULL, ==, in_model);
        if (entry != NULL) {
            g_assert_cmpuint(entry->requested, ==, id + 1);
            fsim_live_table_remove(&table, entry);
            g_hash_table_remove(model, &id);
        } else {
            entry = fsim_live_table_insert(&table, id);
            entry->requested = id + 1;
            g_hash_table_add(model, g_memdup2(&id, sizeof(id)));
        }
        g_assert_cmpuint(table.count, ==, g_hash_table_size(model));
    }
    fsim_live_table_clear(&table);
}

/* insert_or_find finds what is there; entries stay put while others come and go; the walk over
 * entry numbers sees exactly the live ones; memory follows the largest live set. */
static void
test_live_table_entries(void)
{
    FsimLiveTable table;
    FsimLiveEntry *first;
    gboolean inserted;
    gsize seen = 0;
    gsize bytes;

    fsim_live_table_init(&table);
    first = fsim_live_table_insert_or_find(&table, 42, &inserted);
    g_assert_true(inserted);
    first->requested = 7;
    for (uint64_t id = 100; id < 100 + 3 * FSIM_LIVE_PAGE; id++)
        fsim_live_table_insert(&table, id)->requested = id;
    g_assert_true(fsim_live_table_insert_or_find(&table, 42, &inserted) == first);
    g_assert_false(inserted);
    g_assert_cmpuint(first->requested, ==, 7);
    /* free half, then insert as many again: the freed entries are reused */
    for (uint64_t id = 100; id < 100 + 3 * FSIM_LIVE_PAGE; id += 2)
        fsim_live_table_remove(&table, fsim_live_table_lookup(&table, id));
    bytes = fsim_live_table_bytes(&table);
    for (uint64_t id = 0; id < 3 * FSIM_LIVE_PAGE / 2; id++)
        fsim_live_table_insert(&table, 1000000 + id)->requested = 1000000 + id;
    g_assert_cmpuint(fsim_live_table_bytes(&table), ==, bytes);
    g_assert_true(fsim_live_table_lookup(&table, 42) == first);
    for (gsize n = 0; n < fsim_live_table_extent(&table); n++) {
        const FsimLiveEntry *entry = fsim_live_table_nth(&table, n);

        if (entry->state == 0)
            continue;
        seen++;
        g_assert_true(fsim_live_table_lookup(&table, entry->id) == entry);
        g_assert_cmpuint(entry->requested, ==, entry->id == 42 ? 7 : entry->id);
    }
    g_assert_cmpuint(seen, ==, table.count);
    g_assert_cmpuint(seen, ==, 1 + 3 * FSIM_LIVE_PAGE);
    fsim_live_table_clear(&table);
}

/* Ids that share a home group overflow into the groups after it: lookups find them there,
 * absent ids are turned away, and removals in any order take every overflow count back to
 * zero. */
static void
test_live_table_overflow(void)
{
    FsimLiveTable table;
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autoptr(GRand) rand = g_rand_new_with_seed(5);
    uint64_t absent = 0;

    fsim_live_table_init(&table);
    for (uint64_t id = 1; ids->len < 5 * FSIM_LIVE_GROUP; id++) {
        if (fsim_live_home(&table, fsim_live_hash(id)) == 3)
            g_array_append_val(ids, id);
        else if (absent == 0 && fsim_live_home(&table, fsim_live_hash(id)) == 4)
            absent = id; /* its probe starts in a group the others overflow into */
    }
    for (int round = 0; round < 20; round++) {
        for (guint i = ids->len; i > 1; i--) {
            guint j = (guint)g_rand_int_range(rand, 0, (gint32)i);
            uint64_t swap = g_array_index(ids, uint64_t, i - 1);

            g_array_index(ids, uint64_t, i - 1) = g_array_index(ids, uint64_t, j);
            g_array_index(ids, uint64_t, j) = swap;
        }
        for (guint i = 0; i < ids->len; i++) {
            uint64_t id = g_array_index(ids, uint64_t, i);

            fsim_live_table_insert(&table, id)->requested = id;
        }
        g_assert_cmpuint(table.groups[3].overflow, >, 0);
        g_assert_null(fsim_live_table_lookup(&table, absent));
        /* removed in another order, the others still found after each removal */
        for (guint i = ids->len; i > 0; i--) {
            guint k = (guint)g_rand_int_range(rand, 0, (gint32)i);
            uint64_t id = g_array_index(ids, uint64_t, k);
            FsimLiveEntry *entry = fsim_live_table_lookup(&table, id);

            g_assert_nonnull(entry);
            g_assert_cmpuint(entry->requested, ==, id);
            /* a lookup of another id in between: the removal finds its slot again */
            if (i % 2 == 0)
                g_assert_null(fsim_live_table_lookup(&table, absent));
            fsim_live_table_remove(&table, entry);
            g_assert_null(fsim_live_table_lookup(&table, id));
            g_array_index(ids, uint64_t, k) = g_array_index(ids, uint64_t, i - 1);
            g_array_index(ids, uint64_t, i - 1) = id;
            for (guint j = 0; j < i - 1; j++) {
                uint64_t other = g_array_index(ids, uint64_t, j);

                g_assert_cmpuint(fsim_live_table_lookup(&table, other)->requested, ==, other);
            }
        }
        g_assert_cmpuint(table.count, ==, 0);
        for (gsize g = 0; g < ((gsize)1 << table.group_bits); g++)
            g_assert_cmpuint(table.groups[g].overflow, ==, 0);
    }
    fsim_live_table_clear(&table);
}

typedef struct {
    uint64_t size;
    uint64_t key;
} SizeKey;

static gint
size_key_compare(gconstpointer a, gconstpointer b, gpointer data)
{
    const SizeKey *x = a;
    const SizeKey *y = b;
    int c = fsim_compare_u64(x->size, y->size);

    (void)data;
    return c != 0 ? c : fsim_compare_u64(x->key, y->key);
}

/* The address map against a GHashTable: random inserts (by insert and by insert_or_find),
 * lookups and removals of aligned addresses, key 0 among them (value 0 marks an empty slot, so
 * every key can be mapped), with probe runs that wrap and shift back, through several doublings;
 * then a live set of a few dozen keys, so that removals fall inside long runs. */
static void
test_addr_map(void)
{
    FsimAddrMap map;
    g_autoptr(GHashTable) model = g_hash_table_new(g_int64_hash, g_int64_equal);
    g_autoptr(GArray) keys = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    g_autoptr(GRand) rand = g_rand_new_with_seed(7);

    fsim_addr_map_init(&map, 0);
    g_array_set_size(keys, 4096);
    for (guint i = 0; i < keys->len; i++)
        g_array_index(keys, uint64_t, i) =
            i == 0 ? 0 : (i % 7 == 0 ? 0x7f0000000000 : 0) + (uint64_t)i * 2 * 1024 * 1024;
    for (int i = 0; i < 300000; i++) {
        guint span = i < 200000 ? 4096 : 48;
        uint64_t *key = &g_array_index(keys, uint64_t, g_rand_int_range(rand, 0, (gint32)span));
        gpointer value = g_hash_table_lookup(model, key);
        FsimAddrSlot *slot = fsim_addr_map_lookup(&map, *key);

        g_assert_cmpint(slot != NULL, ==, value != NULL);
        if (slot != NULL)
            g_assert_cmpuint(slot->value, ==, GPOINTER_TO_SIZE(value));
        if (slot == NULL && g_rand_int_range(rand, 0, 100) < (i < 100000 ? 80 : 30)) {
            uint64_t v = (uint64_t)g_rand_int_range(rand, 1, 1 << 30);

            if (g_rand_boolean(rand)) {
                fsim_addr_map_insert(&map, *key, v);
            } else {
                slot = fsim_addr_map_insert_or_find(&map, *key);
                g_assert_cmpuint(slot->value, ==, 0);
                slot->value = v;
            }
            g_hash_table_insert(model, key, GSIZE_TO_POINTER(v));
        } else if (slot != NULL && g_rand_boolean(rand)) {
            fsim_addr_map_remove(&map, slot);
            g_hash_table_remove(model, key);
        } else if (slot != NULL) {
            g_assert_true(fsim_addr_map_insert_or_find(&map, *key) == slot);
        }
        g_assert_cmpuint(map.count, ==, g_hash_table_size(model));
    }
    for (guint i = 0; i < keys->len; i++) {
        uint64_t *key = &g_array_index(keys, uint64_t, i);
        FsimAddrSlot *slot = fsim_addr_map_lookup(&map, *key);

        g_assert_cmpuint(slot != NULL ? slot->value : 0, ==,
                         GPOINTER_TO_SIZE(g_hash_table_lookup(model, key)));
    }
    g_assert_cmpuint(map.bits, >, 6);
    fsim_addr_map_clear(&map);
}

/* The size set against a GTree: random inserts, erasures and lower bounds over few sizes (bins
 * of thousands: chunks split and merge) and many; full walks both ways; the invariants. */
static void
test_size_set_against_gtree(gconstpointer data)
{
    guint n_sizes = GPOINTER_TO_UINT(data);
    FsimSizeSet *set = g_new(FsimSizeSet, 1);
    g_autoptr(GTree) model = g_tree_new_full(size_key_compare, NULL, g_free, NULL);
    g_autoptr(GRand) rand = g_rand_new_with_seed(n_sizes);
    guint max_chunks = 0;
    guint last_chunks = 0;

    fsim_size_set_init(set);
    for (int i = 0; i < 60000; i++) {
        SizeKey probe = {(uint64_t)g_rand_int_range(rand, 0, (gint32)n_sizes) * 4096 + 100,
                         (uint64_t)g_rand_int_range(rand, 0, 20000) * 512};
        FsimSizeCursor cursor = {0};
        GTreeNode *node = g_tree_lower_bound(model, &probe);
        gpointer item = fsim_size_set_lower_bound(set, probe.size, probe.key, &cursor);

        g_assert_cmpint(node != NULL, ==, item != NULL);
        if (node != NULL)
            g_assert_true(item == g_tree_node_value(node));
        /* grow for the first half, then mostly shrink, so chunks split, then empty and merge */
        if (g_rand_int_range(rand, 0, 100) < (i < 30000 ? 70 : 25)) {
            if (g_tree_lookup(model, &probe) == NULL) {
                SizeKey *key = g_memdup2(&probe, sizeof(probe));

                g_tree_insert(model, key, key);
                fsim_size_set_insert(set, key->size, key->key, key);
            }
        } else if (node != NULL && g_rand_int_range(rand, 0, 4) == 0) {
            /* replace in place or move: a size a little off, often in the same bin */
            SizeKey *key = g_tree_node_key(node);
            SizeKey moved = {key->size + (uint64_t)g_rand_int_range(rand, 0, 3) * 4096 - 4096,
                             key->key + (uint64_t)g_rand_int_range(rand, 0, 3) * 512};

            if (moved.size > 4096 && g_tree_lookup(model, &moved) == NULL) {
                g_tree_steal(model, key);
                *key = moved;
                g_tree_insert(model, key, key);
                fsim_size_set_replace_at(set, &cursor, key->size, key->key, key);
            }
        } else if (node != NULL) {
            SizeKey *key = g_tree_node_key(node);

            fsim_size_set_erase_at(set, &cursor);
            g_tree_remove(model, key);
        }
        g_assert_cmpuint(set->count, ==, (guint)g_tree_nnodes(model));
        if (i % 5000 == 0 || i == 59999) {
            GTreeNode *n = g_tree_node_first(model);
            guint walked = 0;

            g_assert_null(fsim_size_set_check(set));
            last_chunks = 0;
            for (guint b = 0; b < FSIM_SIZE_BINS; b++)
                last_chunks = MAX(last_chunks, set->bins[b].n_chunks);
            max_chunks = MAX(max_chunks, last_chunks);
            for (item = fsim_size_set_first(set, &cursor); item != NULL;
                 item = fsim_size_set_next(set, &cursor), n = g_tree_node_next(n), walked++)
                g_assert_true(item == g_tree_node_key(n));
            g_assert_null(n);
            n = g_tree_node_last(model);
            for (item = fsim_size_set_last(set, &cursor); item != NULL;
                 item = fsim_size_set_prev(set, &cursor), n = g_tree_node_previous(n))
                g_assert_true(item == g_tree_node_key(n));
            g_assert_null(n);
            g_assert_cmpuint(walked, ==, set->count);
        }
    }
    /* with few sizes, bins grew to many chunks, then shrank (chunks emptied or merged) */
    if (n_sizes < 10)
        g_assert_cmpuint(last_chunks, <, max_chunks / 2);
    /* find tells present from absent */
    {
        GTreeNode *first = g_tree_node_first(model);
        FsimSizeCursor cursor;

        if (first != NULL) {
            const SizeKey *key = g_tree_node_key(first);

            g_assert_true(fsim_size_set_find(set, key->size, key->key, key, &cursor));
            g_assert_false(fsim_size_set_find(set, key->size, key->key + 1, key, &cursor));
        }
    }
    fsim_size_set_clear(set);
    g_free(set);
}

static void
test_event_queue(void)
{
    FsimEventQueue queue;
    FsimQueuedEvent item;
    g_autoptr(GRand) rand = g_rand_new_with_seed(3);
    uint64_t last_time = 0;
    uint64_t last_seq = 0;

    fsim_event_queue_init(&queue);
    g_assert_null(fsim_event_queue_peek(&queue));
    for (uint64_t seq = 0; seq < 5000; seq++) {
        FsimEvent ev = {.time = (uint64_t)g_rand_int_range(rand, 0, 100), .id = seq};

        fsim_event_queue_push(&queue, &ev, seq);
    }
    g_assert_cmpuint(fsim_event_queue_length(&queue), ==, 5000);
    /* Ordered by time, then first-in first-out. */
    while (fsim_event_queue_pop(&queue, &item)) {
        g_assert_cmpuint(item.event.time, >=, last_time);
        if (item.event.time == last_time)
            g_assert_cmpuint(item.seq, >=, last_seq);
        last_time = item.event.time;
        last_seq = item.seq;
    }
    g_assert_cmpuint(fsim_event_queue_length(&queue), ==, 0);
    fsim_event_queue_clear(&queue);
}

static void
test_device_presets(void)
{
    static const char *const names[] = {"t4-16gb",    "l4-24gb",    "rtx4090-24gb",
                                        "a100-40gb",  "a100-80gb",  "h100-80gb",
                                        "h200-141gb", "b200-192gb", "mi300x-192gb"};
    gsize n;
    const FsimDeviceSpec *presets = fsim_device_presets(&n);
    FsimDeviceSpec spec;
    g_autoptr(GError) error = NULL;

    g_assert_cmpuint(n, ==, G_N_ELEMENTS(names));
    for (gsize i = 0; i < n; i++) {
        g_assert_cmpstr(presets[i].name, ==, names[i]);
        g_assert_cmpuint(presets[i].capacity_bytes, <, presets[i].total_bytes);
        g_assert_cmpuint(presets[i].granularity, ==, 2 * FSIM_MiB);
        g_assert_cmpuint(presets[i].costs.malloc_ns, >, 0);
        g_assert_true(fsim_device_spec_parse(names[i], &spec, &error));
    }
    g_assert_true(fsim_device_spec_parse("H100-80GB", &spec, &error));
    g_assert_cmpstr(spec.name, ==, "h100-80gb");
    g_assert_true(fsim_device_spec_parse("24GB", &spec, &error));
    g_assert_cmpuint(spec.capacity_bytes, ==, 24000000000ull);
    g_assert_true(fsim_device_spec_parse("80GiB", &spec, &error));
    g_assert_cmpuint(spec.capacity_bytes, ==, 80 * FSIM_GiB);
    g_assert_true(fsim_device_spec_parse("25769803776", &spec, &error));
    g_assert_cmpuint(spec.capacity_bytes, ==, 24 * FSIM_GiB);
    g_assert_false(fsim_device_spec_parse("h100", &spec, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_assert_nonnull(strstr(error->message, "h100-80gb"));
    g_clear_error(&error);
    g_assert_false(fsim_device_spec_parse("1KiB", &spec, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
}

static void
test_device_profile(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("fragsim-XXXXXX", &error);
    g_autofree char *path = g_build_filename(dir, "gpu.profile", NULL);
    FsimDeviceSpec spec;
    static const char profile[] = "[device]\nname=my-gpu\ndescription=Measured\n"
                                  "total_bytes=1000000000\ncapacity_bytes=900000000\n"
                                  "granularity=2097152\n[costs]\nmalloc_ns=1234\n";

    g_assert_true(g_file_set_contents(path, profile, -1, &error));
    g_assert_true(fsim_device_spec_parse(path, &spec, &error));
    g_assert_no_error(error);
    g_assert_cmpstr(spec.name, ==, "my-gpu");
    g_assert_cmpuint(spec.capacity_bytes, ==, 900000000);
    g_assert_cmpuint(spec.costs.malloc_ns, ==, 1234);
    g_assert_cmpuint(spec.costs.map_ns, ==, fsim_device_costs_default().map_ns);
    g_assert_true(g_file_set_contents(path, "[device]\nname=x\n", -1, &error));
    g_assert_false(fsim_device_spec_parse(path, &spec, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_remove(path);
    g_rmdir(dir);
}

static FsimDevice *
small_device(GKeyFile *config)
{
    FsimDeviceSpec spec;
    g_autoptr(GError) error = NULL;
    FsimDevice *device;

    g_assert_true(fsim_device_spec_parse("64MiB", &spec, &error));
    device = fsim_device_sim_new(&spec, config, &error);
    g_assert_no_error(error);
    return device;
}

static void
test_device_memory(void)
{
    g_autoptr(FsimDevice) device = small_device(NULL);
    FsimAddr a, b, c, d;

    g_assert_cmpint(fsim_device_mem_alloc(device, 1, &a), ==, FSIM_OK);
    g_assert_cmpuint(a % (2 * FSIM_MiB), ==, 0);
    g_assert_cmpint(device->reserved.current, ==, 2 * FSIM_MiB);
    g_assert_cmpint(fsim_device_mem_alloc(device, 30 * FSIM_MiB, &b), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_mem_alloc(device, 32 * FSIM_MiB, &c), ==, FSIM_OK);
    /* Full: 64 MiB. */
    g_assert_cmpint(fsim_device_mem_alloc(device, 1, &d), ==, FSIM_OOM);
    g_assert_cmpuint(device->calls[FSIM_CALL_MEM_ALLOC], ==, 3);
    g_assert_cmpuint(device->attempts[FSIM_CALL_MEM_ALLOC], ==, 4);
    fsim_device_mem_free(device, b, 30 * FSIM_MiB);
    /* The freed range of the right size is reused first. */
    g_assert_cmpint(fsim_device_mem_alloc(device, 30 * FSIM_MiB, &d), ==, FSIM_OK);
    g_assert_cmpuint(d, ==, b);
    fsim_device_mem_free(device, a, 1);
    fsim_device_mem_free(device, c, 32 * FSIM_MiB);
    fsim_device_mem_free(device, d, 30 * FSIM_MiB);
    g_assert_cmpint(device->reserved.current, ==, 0);
    g_assert_cmpint(device->reserved.peak, ==, 64 * FSIM_MiB);
    g_assert_cmpuint(device->modelled_time_ns, >, 0);
}

static void
test_device_vmm(void)
{
    g_autoptr(FsimDevice) device = small_device(NULL);
    FsimAddr base;

    /* Address space is not memory: reserve far more than the device has. */
    g_assert_cmpint(fsim_device_va_reserve(device, 100 * FSIM_GiB, 64 * FSIM_MiB, &base), ==,
                    FSIM_OK);
    g_assert_cmpuint(base % (64 * FSIM_MiB), ==, 0);
    g_assert_cmpint(device->reserved.current, ==, 0);
    g_assert_cmpint(fsim_device_map(device, base, 40 * FSIM_MiB, 20 * FSIM_MiB), ==, FSIM_OK);
    g_assert_cmpint(device->reserved.current, ==, 40 * FSIM_MiB);
    g_assert_cmpint(fsim_device_map(device, base + 40 * FSIM_MiB, 40 * FSIM_MiB, 20 * FSIM_MiB), ==,
                    FSIM_OOM);
    g_assert_cmpint(fsim_device_map(device, base + 40 * FSIM_MiB, 20 * FSIM_MiB, 20 * FSIM_MiB), ==,
                    FSIM_OK);
    fsim_device_unmap(device, base, 60 * FSIM_MiB, 20 * FSIM_MiB);
    g_assert_cmpint(device->reserved.current, ==, 0);
    fsim_device_va_release(device, base, 100 * FSIM_GiB);
    g_assert_cmpuint(device->calls[FSIM_CALL_MAP], ==, 2);
    g_assert_cmpuint(device->calls[FSIM_CALL_UNMAP], ==, 1);
}

static void
test_device_faults(void)
{
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(FsimDevice) device = NULL;
    g_autoptr(GError) error = NULL;
    FsimDeviceSpec spec;
    FsimAddr a;

    g_key_file_set_value(config, "device", "fail_mem_alloc_at", "2");
    g_key_file_set_value(config, "device", "fail_map_from", "1");
    device = small_device(config);
    g_assert_cmpint(fsim_device_mem_alloc(device, 1, &a), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_mem_alloc(device, 1, &a), ==, FSIM_OOM);
    g_assert_cmpint(fsim_device_mem_alloc(device, 1, &a), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_va_reserve(device, FSIM_GiB, 0, &a), ==, FSIM_OK);
    g_assert_cmpint(fsim_device_map(device, a, 2 * FSIM_MiB, 2 * FSIM_MiB), ==, FSIM_OOM);
    g_assert_cmpint(fsim_device_map(device, a, 2 * FSIM_MiB, 2 * FSIM_MiB), ==, FSIM_OOM);
    /* Bad keys and values are usage errors. */
    g_key_file_set_value(config, "device", "fail_everything", "1");
    g_assert_true(fsim_device_spec_parse("1GiB", &spec, NULL));
    g_assert_null(fsim_device_sim_new(&spec, config, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_clear_error(&error);
    g_key_file_remove_key(config, "device", "fail_everything", NULL);
    g_key_file_set_value(config, "device", "fail_map_at", "x");
    g_assert_null(fsim_device_sim_new(&spec, config, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
}

static void
test_device_next_address(void)
{
    g_autoptr(FsimDevice) device = small_device(NULL);
    FsimAddr a, b, want = 0x7f0040000000;

    fsim_device_set_next_address(device, want);
    g_assert_cmpint(fsim_device_mem_alloc(device, 4 * FSIM_MiB, &a), ==, FSIM_OK);
    g_assert_cmpuint(a, ==, want);
    /* Consumed: the next call chooses by itself. */
    g_assert_cmpint(fsim_device_mem_alloc(device, 4 * FSIM_MiB, &b), ==, FSIM_OK);
    g_assert_cmpuint(b, !=, want);
    /* A hint inside a used range is ignored. */
    fsim_device_set_next_address(device, want);
    g_assert_cmpint(fsim_device_mem_alloc(device, 2 * FSIM_MiB, &b), ==, FSIM_OK);
    g_assert_cmpuint(b, !=, want);
}

static void
test_device_costs(void)
{
    g_autoptr(FsimDevice) device = small_device(NULL);
    FsimDeviceCosts costs = device->spec.costs;
    FsimAddr a;
    uint64_t before;

    g_assert_cmpint(fsim_device_mem_alloc(device, FSIM_GiB / 32, &a), ==, FSIM_OK);
    g_assert_cmpuint(device->modelled_time_ns, ==, costs.malloc_ns + costs.malloc_per_gib_ns / 32);
    before = device->modelled_time_ns;
    fsim_device_mem_free(device, a, FSIM_GiB / 32);
    /* cudaFree pays the device synchronisation. */
    g_assert_cmpuint(device->modelled_time_ns - before, ==,
                     costs.free_ns + costs.sync_ns + costs.free_per_gib_ns / 32);
    /* Seeding calls are neither counted nor charged. */
    before = device->modelled_time_ns;
    device->seeding = TRUE;
    g_assert_cmpint(fsim_device_mem_alloc(device, 2 * FSIM_MiB, &a), ==, FSIM_OK);
    device->seeding = FALSE;
    g_assert_cmpuint(device->modelled_time_ns, ==, before);
    g_assert_cmpuint(device->calls[FSIM_CALL_MEM_ALLOC], ==, 1);
    g_assert_cmpint(device->reserved.current, ==, 2 * FSIM_MiB);
}

/* The virtual-memory calls' costs, with the default figures written out (docs/device-model.md):
 * mapping pays per handle and per GiB; unmapping pays the device synchronisation, per handle and
 * per GiB. */
static void
test_device_vmm_costs(void)
{
    g_autoptr(FsimDevice) device = NULL;
    FsimDeviceSpec spec;
    g_autoptr(GError) error = NULL;
    FsimDeviceCosts costs = fsim_device_costs_default();
    FsimAddr va;
    uint64_t before;

    g_assert_cmpuint(costs.map_ns, ==, 52000);
    g_assert_cmpuint(costs.map_per_gib_ns, ==, 69000);
    g_assert_cmpuint(costs.unmap_ns, ==, 23000);
    g_assert_cmpuint(costs.unmap_per_gib_ns, ==, 727000);
    g_assert_cmpuint(costs.sync_ns, ==, 100000);
    g_assert_cmpuint(costs.reserve_ns, ==, 2000);
    g_assert_true(fsim_device_spec_parse("4GiB", &spec, &error));
    device = fsim_device_sim_new(&spec, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpint(fsim_device_va_reserve(device, 2 * FSIM_GiB, 2 * FSIM_MiB, &va), ==, FSIM_OK);
    g_assert_cmpuint(device->modelled_time_ns, ==, 2000);
    /* 1 GiB in 2 MiB handles: 512 of them */
    before = device->modelled_time_ns;
    g_assert_cmpint(fsim_device_map(device, va, FSIM_GiB, 2 * FSIM_MiB), ==, FSIM_OK);
    g_assert_cmpuint(device->modelled_time_ns - before, ==, 512 * 52000 + 69000);
    before = device->modelled_time_ns;
    fsim_device_unmap(device, va, FSIM_GiB, 2 * FSIM_MiB);
    g_assert_cmpuint(device->modelled_time_ns - before, ==, 100000 + 512 * 23000 + 727000);
    /* half a GiB in one handle: half the per-GiB cost */
    g_assert_cmpint(fsim_device_map(device, va, FSIM_GiB / 2, FSIM_GiB / 2), ==, FSIM_OK);
    before = device->modelled_time_ns;
    fsim_device_unmap(device, va, FSIM_GiB / 2, FSIM_GiB / 2);
    g_assert_cmpuint(device->modelled_time_ns - before, ==, 100000 + 23000 + 727000 / 2);
    fsim_device_va_release(device, va, 2 * FSIM_GiB);
    g_assert_cmpuint(device->calls[FSIM_CALL_UNMAP], ==, 2);
}

/* fsim_owned_clear()/fsim_owned_free(): each listed member freed once, in order, with its own
 * function, NULL ones skipped and left NULL; the struct itself only by _free. */
typedef struct {
    char *name;
    GArray *items;
    char *absent;
    struct {
        char *reason;
    } nested;
    char *not_owned;
} OwnedThing;

static GString *owned_log;

static void
owned_log_free(gpointer data)
{
    g_string_append_printf(owned_log, "%s;", (const char *)data);
    g_free(data);
}

static void
owned_log_array(gpointer data)
{
    g_string_append_printf(owned_log, "array %u;", ((GArray *)data)->len);
    g_array_unref(data);
}

static void
test_owned(void)
{
    static const FsimOwned owned[] = {FSIM_OWNED(OwnedThing, name, owned_log_free),
                                      FSIM_OWNED(OwnedThing, items, owned_log_array),
                                      FSIM_OWNED(OwnedThing, absent, owned_log_free),
                                      FSIM_OWNED(OwnedThing, nested.reason, owned_log_free)};
    char kept[] = "kept";
    OwnedThing local = {.not_owned = kept};
    OwnedThing *thing = g_new0(OwnedThing, 1);

    owned_log = g_string_new(NULL);
    local.name = g_strdup("a");
    local.items = g_array_new(FALSE, FALSE, sizeof(int));
    g_array_set_size(local.items, 3);
    local.nested.reason = g_strdup("b");
    fsim_owned_clear(&local, owned, G_N_ELEMENTS(owned));
    g_assert_cmpstr(owned_log->str, ==, "a;array 3;b;");
    g_assert_null(local.name);
    g_assert_null(local.items);
    g_assert_null(local.nested.reason);
    g_assert_true(local.not_owned == kept);
    fsim_owned_clear(&local, owned, G_N_ELEMENTS(owned)); /* twice: nothing more */
    g_assert_cmpstr(owned_log->str, ==, "a;array 3;b;");

    g_string_truncate(owned_log, 0);
    thing->absent = g_strdup("c");
    fsim_owned_free(thing, owned, G_N_ELEMENTS(owned)); /* the struct too: ASan sees a leak */
    fsim_owned_free(NULL, owned, G_N_ELEMENTS(owned));
    g_assert_cmpstr(owned_log->str, ==, "c;");
    g_string_free(owned_log, TRUE);
}

/* ---- allocation stacks: interned strings and stack ids --------------------------------------- */

static void
stacks_close(FsimTrace *trace)
{
    g_free(trace);
}

static const FsimTraceFormat stacks_format = {.name = "stacks", .close = stacks_close};

static void
test_stacks_intern(void)
{
    FsimTrace *trace = g_new0(FsimTrace, 1);
    const char **interned = g_new(const char *, 3000);
    FsimFrame a = {"model.py", "forward", 3};
    FsimFrame b = {"model.py", "backward", 7};
    FsimFrame out;
    FsimFrame stack[2];
    gsize n = 0;

    fsim_trace_init(trace, &stacks_format, "stacks");
    /* Distinct strings of every length over word boundaries, and enough of them to grow the
     * table; each found again, by content, after all were added. */
    for (guint i = 0; i < 3000; i++) {
        char *s = g_strdup_printf("%0*u", (int)(i % 40) + 1, i);
        FsimFrame f = {.filename = s, .name = NULL, .line = i};

        fsim_trace_intern_frame(trace, &f, &out);
        g_assert_cmpstr(out.filename, ==, s);
        g_assert_true(out.filename != s);
        g_assert_cmpstr(out.name, ==, "");
        g_assert_cmpuint(out.line, ==, i);
        interned[i] = out.filename;
        g_free(s);
    }
    for (guint i = 0; i < 3000; i++) {
        char *s = g_strdup_printf("%0*u", (int)(i % 40) + 1, i);
        FsimFrame f = {.filename = s, .name = "", .line = 0};

        fsim_trace_intern_frame(trace, &f, &out);
        g_assert_true(out.filename == interned[i]);
        g_free(s);
    }
    /* NULL and "" are the same string; a prefix and a string differing in its last byte are
     * others. */
    fsim_trace_intern_frame(trace, &(FsimFrame){NULL, "", 0}, &out);
    g_assert_true(out.filename == out.name);
    fsim_trace_intern_frame(trace, &(FsimFrame){"abcdefgh1", "abcdefgh", 0}, &out);
    g_assert_true(out.filename != out.name);
    fsim_trace_intern_frame(trace, &(FsimFrame){"abcdefgh2", "abcdefgh1", 0}, &out);
    g_assert_true(out.filename != out.name);
    g_assert_cmpstr(out.filename, ==, "abcdefgh2");

    /* Stack ids in the order of first appearance, the same for frames interned or not. */
    fsim_trace_intern_frame(trace, &a, &stack[0]);
    fsim_trace_intern_frame(trace, &b, &stack[1]);
    g_assert_cmpuint(fsim_trace_add_interned_stack(trace, stack, 2), ==, 1);
    g_assert_cmpuint(fsim_trace_add_interned_stack(trace, stack, 1), ==, 2);
    g_assert_cmpuint(fsim_trace_add_stack(trace, (FsimFrame[]){a, b}, 2), ==, 1);
    g_assert_cmpuint(fsim_trace_add_stack(trace, (FsimFrame[]){b, a}, 2), ==, 3);
    g_assert_cmpuint(fsim_trace_add_stack(trace, &a, 0), ==, 0);
    g_assert_true(fsim_trace_stack(trace, 1, &n)[1].name == stack[1].name);
    g_assert_cmpuint(n, ==, 2);
    g_free(interned);
    fsim_trace_close(trace);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/owned/clear-and-free", test_owned);
    g_test_add_func("/stacks/intern", test_stacks_intern);
    g_test_add_func("/units/parse-size", test_parse_size);
    g_test_add_func("/units/format-size", test_format_size);
    g_test_add_func("/units/lower-bound", test_lower_bound);
    g_test_add_func("/units/enum-names", test_enum_names);
    g_test_add_func("/range-set/basics", test_range_set);
    g_test_add_func("/live-table/against-ghashtable", test_live_table);
    g_test_add_func("/live-table/entries", test_live_table_entries);
    g_test_add_func("/live-table/overflow", test_live_table_overflow);
    g_test_add_func("/addr-map/against-ghashtable", test_addr_map);
    g_test_add_data_func("/size-set/few-sizes", GUINT_TO_POINTER(3), test_size_set_against_gtree);
    g_test_add_data_func("/size-set/many-sizes", GUINT_TO_POINTER(5000),
                         test_size_set_against_gtree);
    g_test_add_func("/event-queue/order", test_event_queue);
    g_test_add_func("/device/presets", test_device_presets);
    g_test_add_func("/device/profile", test_device_profile);
    g_test_add_func("/device/memory", test_device_memory);
    g_test_add_func("/device/vmm", test_device_vmm);
    g_test_add_func("/device/faults", test_device_faults);
    g_test_add_func("/device/next-address", test_device_next_address);
    g_test_add_func("/device/vmm-costs", test_device_vmm_costs);
    g_test_add_func("/device/costs", test_device_costs);
    return g_test_run();
}
