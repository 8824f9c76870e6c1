/* SPDX-License-Identifier: MIT */
/*
 * Device faults through the command line: every injected fault (mem_alloc, va_reserve, map; at
 * the Nth call or from it on) must end as an OOM of the run it hits, for every policy, with
 * several policies in one command and with or without --fail-on-oom; never an error, never a run
 * that does not happen.  The policy-level matrix is in test-policy-conformance.c.
 */
#include <glib.h>

#include <json-glib/json-glib.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "test-util.h"

static const char *const fault_calls[] = {"mem_alloc", "va_reserve", "map"};
static const char *const fault_modes[] = {"at", "from"};

/* Every registered policy, comma-separated. */
static char *
all_policies(void)
{
    gsize n = 0;
    const FsimPolicyOps *const *ops = fsim_policy_list(&n);
    g_autoptr(GString) list = g_string_new(NULL);

    for (gsize i = 0; i < n; i++)
        g_string_append_printf(list, "%s%s", i > 0 ? "," : "", ops[i]->name);
    return g_string_free(g_steal_pointer(&list), FALSE);
}

/* Runs @policies on the sample trace with one fault; returns how many runs had an OOM. */
static guint
run_with_fault(const char *policies, const char *setting, gboolean fail_on_oom)
{
    g_autofree char *dir = g_strdup(g_getenv("FRAGSIM_SOURCE_DIR"));
    g_autofree char *trace = g_build_filename(dir, "traces", "fragmenting.trace", NULL);
    /* --no-needed: the faults hit the replay itself; the capacity searches would only repeat it */
    const char *args[] = {"replay", trace,         "-p",
                          policies, "--no-needed", "--set",
                          setting,  "--json",      fail_on_oom ? "--fail-on-oom" : NULL,
                          NULL};
    g_auto(FsimTestRun) r = fsim_test_run_argv(NULL, args);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_auto(GStrv) names = g_strsplit(policies, ",", -1);
    JsonArray *runs;
    guint ooms = 0;

    if (r.status != 0 && r.status != 3)
        g_error("%s%s: exit %d: %s", setting, fail_on_oom ? " --fail-on-oom" : "", r.status, r.err);
    runs = json_object_get_array_member(fsim_test_parse_object(parser, r.out), "runs");
    /* Every policy ran, the one hit first included. */
    g_assert_cmpuint(json_array_get_length(runs), ==, g_strv_length(names));
    for (guint i = 0; i < json_array_get_length(runs); i++) {
        JsonObject *run = json_array_get_object_element(runs, i);
        const char *status = json_object_get_string_member(run, "status");

        /* "oom": stopped by --fail-on-oom; "complete": ran to the end, OOMs counted. */
        if (strcmp(status, "oom") != 0 && strcmp(status, "complete") != 0)
            g_error("%s: policy %s ended '%s': %s", setting,
                    json_object_get_string_member(run, "policy"), status,
                    json_object_has_member(run, "error")
                        ? json_object_get_string_member(run, "error")
                        : "");
        if (json_object_get_int_member(run, "ooms") > 0)
            ooms++;
        else
            g_assert_cmpstr(status, ==, "complete");
        if (fail_on_oom && json_object_get_int_member(run, "ooms") > 0)
            g_assert_cmpstr(status, ==, "oom");
    }
    /* Exit 3 exactly when --fail-on-oom was given and some run ran out of memory. */
    g_assert_cmpint(r.status, ==, fail_on_oom && ooms > 0 ? 3 : 0);
    return ooms;
}

static void
test_fault_matrix(void)
{
    g_autofree char *policies = all_policies();

    if (!fsim_test_have_binary())
        return;
    for (gsize c = 0; c < G_N_ELEMENTS(fault_calls); c++) {
        guint ooms = 0;

        for (gsize m = 0; m < G_N_ELEMENTS(fault_modes); m++) {
            for (guint n = 1; n <= 4; n += 3) {
                g_autofree char *setting =
                    g_strdup_printf("device.fail_%s_%s=%u", fault_calls[c], fault_modes[m], n);

                ooms += run_with_fault(policies, setting, FALSE);
                ooms += run_with_fault(policies, setting, TRUE);
            }
        }
        /* Each kind of call is used by some policy, so each kind of fault is felt somewhere. */
        if (ooms == 0)
            g_error("no policy ran out of memory with %s faults", fault_calls[c]);
    }
}

/* The reproducer: bestfit's address-space reservation refused, next to another policy. */
static void
test_bestfit_va_reserve(void)
{
    if (!fsim_test_have_binary())
        return;
    g_assert_cmpuint(run_with_fault("bestfit,caching", "device.fail_va_reserve_at=1", FALSE), ==,
                     1);
    g_assert_cmpuint(run_with_fault("bestfit,caching", "device.fail_va_reserve_from=1", TRUE), ==,
                     1);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/faults/matrix", test_fault_matrix);
    g_test_add_func("/faults/bestfit-va-reserve", test_bestfit_va_reserve);
    return g_test_run();
}
