/* SPDX-License-Identifier: MIT */
/*
 * PYTORCH_CUDA_ALLOC_CONF as PyTorch parses it (c10/core/AllocatorConfig.cpp): the tokenizer,
 * each key's rules, the errors that name the key, and the way `replay -c` and `--set` reach the
 * `caching` and `expandable` groups of a run's key file.
 */
#include <glib.h>

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "policies/pytorch.h"
#include "test-util.h"

#define MIB FSIM_MiB

static FsimAllocConf
parse_ok(const char *text)
{
    FsimAllocConf conf;
    g_autoptr(GError) error = NULL;

    fsim_alloc_conf_init(&conf);
    g_assert_true(fsim_alloc_conf_parse(&conf, text, &error));
    g_assert_no_error(error);
    return conf;
}

/* Parsing fails with FSIM_ERROR_USAGE and a message containing @needle. */
static void
parse_fails(const char *text, const char *needle)
{
    FsimAllocConf conf;
    g_autoptr(GError) error = NULL;

    fsim_alloc_conf_init(&conf);
    g_assert_false(fsim_alloc_conf_parse(&conf, text, &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    if (strstr(error->message, needle) == NULL)
        g_error("'%s': message '%s' does not name '%s'", text, error->message, needle);
}

static void
test_defaults(void)
{
    FsimAllocConf conf = parse_ok("");
    g_autofree char *text = fsim_alloc_conf_to_string(&conf);

    g_assert_cmpuint(conf.max_split_size, ==, G_MAXUINT64);
    g_assert_cmpuint(conf.max_non_split_rounding, ==, 20 * MIB);
    g_assert_cmpuint(conf.large_segment_size, ==, 20 * MIB);
    g_assert_cmpuint(conf.roundup_bypass_threshold, ==, G_MAXUINT64);
    g_assert_cmpfloat(conf.garbage_collection_threshold, ==, 0.0);
    g_assert_false(conf.has_memory_fraction);
    g_assert_false(conf.expandable_segments);
    for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++)
        g_assert_cmpuint(conf.roundup_power2_divisions[i], ==, 0);
    g_assert_cmpstr(text, ==, "");
}

/* `,` `:` `[` `]` are tokens of their own and spaces vanish, so spacing is free; a trailing comma
 * is accepted, as PyTorch's loop accepts it. */
static void
test_tokenizer(void)
{
    FsimAllocConf conf = parse_ok("  max_split_size_mb : 128 ,expandable_segments:True,\t");

    g_assert_cmpuint(conf.max_split_size, ==, 128 * MIB);
    g_assert_true(conf.expandable_segments);
    conf = parse_ok("roundup_power2_divisions: [ 1 : 2 , > : 4 ] ,");
    g_assert_cmpuint(conf.roundup_power2_divisions[0], ==, 4);
    parse_fails(",max_split_size_mb:128", "expected a key");
    /* spaces vanish inside tokens too: "128 expandable_segments" is one token */
    parse_fails("max_split_size_mb:128 expandable_segments:True", "'128expandable_segments'");
    parse_fails("max_split_size_mb:128:expandable_segments:True", "expected ',' after the value");
    parse_fails("max_split_size_mb", "expected ':'");
    parse_fails("max_split_size_mb:", "missing value");
    parse_fails("max_split_size_mb:,", "missing value");
}

static void
test_unknown_key(void)
{
    parse_fails("max_split_size_mb:128,fancy_knob:3", "unknown key 'fancy_knob'");
    /* keys are case-sensitive, as in PyTorch */
    parse_fails("Expandable_Segments:True", "unknown key 'Expandable_Segments'");
}

static void
test_max_split_size(void)
{
    FsimAllocConf conf = parse_ok("max_split_size_mb:20");

    /* PyTorch >= 2.1: at least kLargeBuffer (20 MiB) */
    g_assert_cmpuint(conf.max_split_size, ==, 20 * MIB);
    parse_fails("max_split_size_mb:19", "max_split_size_mb");
    parse_fails("max_split_size_mb:-5", "not a non-negative integer");
    parse_fails("max_split_size_mb:12x", "not a non-negative integer");
    conf = parse_ok("max_non_split_rounding_mb:64");
    g_assert_cmpuint(conf.max_non_split_rounding, ==, 64 * MIB);
    parse_fails("max_non_split_rounding_mb:10", "max_non_split_rounding_mb");
    /* the later value wins */
    conf = parse_ok("max_split_size_mb:100,max_split_size_mb:200");
    g_assert_cmpuint(conf.max_split_size, ==, 200 * MIB);
}

static void
test_garbage_collection(void)
{
    FsimAllocConf conf = parse_ok("garbage_collection_threshold:0.6");

    g_assert_cmpfloat_with_epsilon(conf.garbage_collection_threshold, 0.6, 1e-12);
    parse_fails("garbage_collection_threshold:0", "outside (0, 1)");
    parse_fails("garbage_collection_threshold:1.0", "outside (0, 1)");
    parse_fails("garbage_collection_threshold:1.5", "garbage_collection_threshold");
    parse_fails("garbage_collection_threshold:half", "not a number");
    conf = parse_ok("per_process_memory_fraction:0.5");
    g_assert_true(conf.has_memory_fraction);
    g_assert_cmpfloat(conf.per_process_memory_fraction, ==, 0.5);
    parse_fails("per_process_memory_fraction:1.5", "outside [0, 1]");
}

static void
test_expandable_segments(void)
{
    g_assert_true(parse_ok("expandable_segments:True").expandable_segments);
    g_assert_false(
        parse_ok("expandable_segments:True,expandable_segments:False").expandable_segments);
    /* exactly True or False */
    parse_fails("expandable_segments:true", "expected True or False");
    parse_fails("expandable_segments:1", "expandable_segments");
}

static void
test_roundup_scalar(void)
{
    FsimAllocConf conf = parse_ok("roundup_power2_divisions:4");

    for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++)
        g_assert_cmpuint(conf.roundup_power2_divisions[i], ==, 4);
    parse_fails("roundup_power2_divisions:3", "power of two");
    parse_fails("roundup_power2_divisions:0", "power of two");
}

/* The list form, keyed by interval start in MiB: the first key also fills every interval below
 * it, and `>` fills from the last listed interval (itself included, as PyTorch's std::fill
 * does) to the end. */
static void
test_roundup_list(void)
{
    FsimAllocConf conf = parse_ok("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
    static const uint32_t expected[FSIM_ALLOC_CONF_INTERVALS] = {1, 1, 1, 1, 1, 1, 1, 1,
                                                                 1, 2, 8, 8, 8, 8, 8, 8};

    for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++)
        g_assert_cmpuint(conf.roundup_power2_divisions[i], ==, expected[i]);
    /* 0 disables an interval; keys beyond 32 GiB clamp to the last one */
    conf = parse_ok("roundup_power2_divisions:[2:4,4:0,65536:16]");
    g_assert_cmpuint(conf.roundup_power2_divisions[0], ==, 4);
    g_assert_cmpuint(conf.roundup_power2_divisions[1], ==, 4);
    g_assert_cmpuint(conf.roundup_power2_divisions[2], ==, 0);
    g_assert_cmpuint(conf.roundup_power2_divisions[3], ==, 0);
    g_assert_cmpuint(conf.roundup_power2_divisions[15], ==, 16);
    parse_fails("roundup_power2_divisions:[3:4]", "interval '3'");
    parse_fails("roundup_power2_divisions:[4:3]", "power of two");
    parse_fails("roundup_power2_divisions:[4:4", "missing ']'");
    parse_fails("roundup_power2_divisions:[4:4;8:8]", "roundup_power2_divisions");
}

static void
test_divisions_lookup(void)
{
    FsimAllocConf conf = parse_ok("roundup_power2_divisions:[1:2,2:4,>:8]");

    /* interval floor(log2(size)) - 20, clamped: below 1 MiB uses the first */
    g_assert_cmpuint(fsim_alloc_conf_divisions(&conf, 4096), ==, 2);
    g_assert_cmpuint(fsim_alloc_conf_divisions(&conf, MIB + MIB / 2), ==, 2);
    g_assert_cmpuint(fsim_alloc_conf_divisions(&conf, 2 * MIB), ==, 8);
    g_assert_cmpuint(fsim_alloc_conf_divisions(&conf, (uint64_t)1 << 40), ==, 8);
}

static void
test_other_keys(void)
{
    FsimAllocConf conf = parse_ok("large_segment_size_mb:40,roundup_bypass_threshold_mb:256");

    g_assert_cmpuint(conf.large_segment_size, ==, 40 * MIB);
    g_assert_cmpuint(conf.roundup_bypass_threshold, ==, 256 * MIB);
    parse_fails("large_segment_size_mb:1", "large_segment_size_mb");
    /* main: the large segment may not exceed max_split_size */
    parse_fails("max_split_size_mb:30,large_segment_size_mb:40", "exceeds max_split_size_mb");
    /* accepted, checked, and without effect on placement */
    conf = parse_ok("backend:native,release_lock_on_cudamalloc:True,"
                    "pinned_use_cuda_host_register:False,pinned_num_register_threads:8,"
                    "pinned_use_background_threads:True,graph_capture_record_stream_reuse:False");
    g_assert_cmpuint(conf.max_split_size, ==, G_MAXUINT64);
    parse_fails("pinned_num_register_threads:3", "pinned_num_register_threads");
    parse_fails("release_lock_on_cudamalloc:yes", "release_lock_on_cudamalloc");
    parse_fails("backend:cudaMallocAsync", "does not model");
    parse_fails("backend:magic", "unknown backend");
}

/* -c writes the knobs into both groups; the policies read them back identically. */
static void
test_apply_and_load(void)
{
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *value = NULL;
    FsimAllocConf caching;
    FsimAllocConf expandable;
    FsimAllocConf direct = parse_ok("max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4],"
                                    "garbage_collection_threshold:0.5,expandable_segments:True");

    g_assert_true(
        fsim_alloc_conf_apply(config,
                              "max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4],"
                              "garbage_collection_threshold:0.5,expandable_segments:True,"
                              "release_lock_on_cudamalloc:True",
                              &error));
    g_assert_no_error(error);
    value = g_key_file_get_value(config, "caching", "max_split_size_mb", NULL);
    g_assert_cmpstr(value, ==, "128");
    g_clear_pointer(&value, g_free);
    value = g_key_file_get_value(config, "caching", "expandable_segments", NULL);
    g_assert_cmpstr(value, ==, "True");
    /* the expandable policy is expandable by definition; keys without effect are not written */
    g_assert_false(g_key_file_has_key(config, "expandable", "expandable_segments", NULL));
    g_assert_false(g_key_file_has_key(config, "caching", "release_lock_on_cudamalloc", NULL));
    g_assert_true(fsim_alloc_conf_load(&caching, config, "caching", &error));
    g_assert_no_error(error);
    g_assert_true(fsim_alloc_conf_load(&expandable, config, "expandable", &error));
    g_assert_no_error(error);
    g_assert_cmpmem(caching.roundup_power2_divisions, sizeof(caching.roundup_power2_divisions),
                    direct.roundup_power2_divisions, sizeof(direct.roundup_power2_divisions));
    g_assert_cmpuint(caching.max_split_size, ==, direct.max_split_size);
    g_assert_cmpfloat(caching.garbage_collection_threshold, ==, 0.5);
    g_assert_true(caching.expandable_segments);
    g_assert_false(expandable.expandable_segments);
    g_assert_cmpuint(expandable.max_split_size, ==, 128 * MIB);
    /* a bad -c leaves the key file alone */
    g_assert_false(fsim_alloc_conf_apply(config, "max_split_size_mb:64,nope:1", &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_clear_error(&error);
    g_clear_pointer(&value, g_free);
    value = g_key_file_get_value(config, "caching", "max_split_size_mb", NULL);
    g_assert_cmpstr(value, ==, "128");
}

/* Knobs set with --set use the same value syntax; booleans may be lower case there. */
static void
test_load_knobs(void)
{
    g_autoptr(GKeyFile) config = g_key_file_new();
    g_autoptr(GError) error = NULL;
    FsimAllocConf conf;

    g_key_file_set_value(config, "caching", "expandable_segments", "true");
    g_key_file_set_value(config, "caching", "roundup_power2_divisions", "[1:4, 1024:8]");
    g_assert_true(fsim_alloc_conf_load(&conf, config, "caching", &error));
    g_assert_no_error(error);
    g_assert_true(conf.expandable_segments);
    g_assert_cmpuint(conf.roundup_power2_divisions[0], ==, 4);
    g_assert_cmpuint(conf.roundup_power2_divisions[10], ==, 8);
    g_key_file_set_value(config, "caching", "max_split_size_mb", "12");
    g_assert_false(fsim_alloc_conf_load(&conf, config, "caching", &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
    g_assert_nonnull(strstr(error->message, "caching.max_split_size_mb"));
    g_clear_error(&error);
    g_key_file_set_value(config, "caching", "max_split_size_mb", "64:32");
    g_assert_false(fsim_alloc_conf_load(&conf, config, "caching", &error));
    g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
}

/* Unknown knobs and bad values stop policy creation with a usage error. */
static void
test_policy_knobs(void)
{
    static const char *const names[] = {"caching", "expandable"};
    FsimDeviceSpec spec;

    g_assert_true(fsim_device_spec_parse("8GiB", &spec, NULL));
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autoptr(FsimDevice) device = fsim_device_sim_new(&spec, NULL, NULL);
        g_autoptr(GKeyFile) config = g_key_file_new();
        g_autoptr(GError) error = NULL;
        g_autoptr(FsimPolicy) policy = NULL;

        g_key_file_set_value(config, names[i], "max_split_size_mb", "10");
        policy = fsim_policy_new(names[i], device, config, &error);
        g_assert_null(policy);
        g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
        g_clear_error(&error);
        g_key_file_remove_key(config, names[i], "max_split_size_mb", NULL);
        g_key_file_set_value(config, names[i], "bogus", "1");
        policy = fsim_policy_new(names[i], device, config, &error);
        g_assert_null(policy);
        g_assert_error(error, FSIM_ERROR, FSIM_ERROR_USAGE);
        g_assert_nonnull(strstr(error->message, "bogus"));
        g_clear_error(&error);
        g_key_file_remove_key(config, names[i], "bogus", NULL);
        g_key_file_set_value(config, names[i], "max_split_size_mb", "128");
        policy = fsim_policy_new(names[i], device, config, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(fsim_pytorch_conf(policy)->max_split_size, ==, 128 * MIB);
        g_assert_cmpint(fsim_pytorch_conf(policy)->expandable_segments, ==, i == 1);
    }
}

static void
test_to_string(void)
{
    FsimAllocConf conf =
        parse_ok("expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:4");
    g_autofree char *text = fsim_alloc_conf_to_string(&conf);
    FsimAllocConf again = parse_ok(text);

    g_assert_cmpstr(text, ==,
                    "max_split_size_mb:128,expandable_segments:True,roundup_power2_divisions:4");
    g_assert_cmpmem(&conf, sizeof(conf), &again, sizeof(again));
}

/* `fragsim replay -p caching -c CONF --json SNAPSHOT`, in this process. */
static FsimTestRun
run_replay(const char *conf)
{
    g_autofree char *trace =
        g_test_build_filename(G_TEST_DIST, "data", "validate", "validate-exact.pickle", NULL);

    return fsim_test_run_main("replay", "-p", "caching", "-c", conf, "--json", trace, NULL);
}

/* replay -c: a bad string is a usage error (exit 2); a good one reaches the policy. */
static void
test_replay_option(void)
{
    g_auto(FsimTestRun) unknown = run_replay("nope:1");
    g_auto(FsimTestRun) invalid = run_replay("max_split_size_mb:5");
    g_auto(FsimTestRun) plain = run_replay("max_split_size_mb:128");
    g_auto(FsimTestRun) expandable = run_replay("expandable_segments:True");
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonObject *run;

    g_assert_cmpint(unknown.status, ==, 2);
    g_assert_cmpint(invalid.status, ==, 2);
    g_assert_cmpint(plain.status, ==, 0);
    g_assert_cmpint(expandable.status, ==, 0);
    /* runs[0] is the recording itself (policy "recorded"), runs[1] the model */
    run = json_array_get_object_element(
        json_object_get_array_member(fsim_test_parse_object(parser, plain.out), "runs"), 1);
    g_assert_cmpstr(json_object_get_string_member(run, "policy"), ==, "caching");
    g_assert_cmpint(json_object_get_int_member(run, "device_mallocs"), ==, 2);
    g_assert_cmpint(json_object_get_int_member(run, "device_maps"), ==, 0);
    run = json_array_get_object_element(
        json_object_get_array_member(fsim_test_parse_object(parser, expandable.out), "runs"), 1);
    g_assert_cmpstr(json_object_get_string_member(run, "label"), ==,
                    "caching expandable_segments:True");
    g_assert_cmpint(json_object_get_int_member(run, "device_mallocs"), ==, 0);
    g_assert_cmpint(json_object_get_int_member(run, "device_maps"), >, 0);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* GIO logs a debug line when its default VFS first loads; let it happen before any output is
     * captured. */
    (void)g_vfs_get_default();
    g_test_add_func("/alloc-conf/defaults", test_defaults);
    g_test_add_func("/alloc-conf/tokenizer", test_tokenizer);
    g_test_add_func("/alloc-conf/unknown-key", test_unknown_key);
    g_test_add_func("/alloc-conf/max-split-size", test_max_split_size);
    g_test_add_func("/alloc-conf/garbage-collection", test_garbage_collection);
    g_test_add_func("/alloc-conf/expandable-segments", test_expandable_segments);
    g_test_add_func("/alloc-conf/roundup/scalar", test_roundup_scalar);
    g_test_add_func("/alloc-conf/roundup/list", test_roundup_list);
    g_test_add_func("/alloc-conf/roundup/lookup", test_divisions_lookup);
    g_test_add_func("/alloc-conf/other-keys", test_other_keys);
    g_test_add_func("/alloc-conf/apply-and-load", test_apply_and_load);
    g_test_add_func("/alloc-conf/load-knobs", test_load_knobs);
    g_test_add_func("/alloc-conf/policy-knobs", test_policy_knobs);
    g_test_add_func("/alloc-conf/to-string", test_to_string);
    g_test_add_func("/alloc-conf/replay-option", test_replay_option);
    return g_test_run();
}
