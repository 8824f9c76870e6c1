/* SPDX-License-Identifier: MIT */
/*
 * The policy registry, the policy lifecycle and knob parsing.
 */
#include <glib.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "fragsim/policy.h"

#include "policies/policies.h"

/* The registry.  Order is the default order of `replay -p` listings and of tables. */
/* clang-format off */
static const FsimPolicyOps *const all_policies[] = {
    &fsim_policy_direct,
    &fsim_policy_best_fit,
    &fsim_policy_caching,
    &fsim_policy_expandable,
    &fsim_policy_paged,
    &fsim_policy_bfc,
    &fsim_policy_buddy,
    &fsim_policy_async,
    &fsim_policy_gmlake,
    &fsim_policy_planner,
};
/* clang-format on */

const FsimPolicyOps *const *
fsim_policy_list(gsize *n)
{
    *n = G_N_ELEMENTS(all_policies);
    return all_policies;
}

gboolean
fsim_policy_takes_alloc_conf(const char *name)
{
    return strcmp(name, "caching") == 0 || strcmp(name, "expandable") == 0;
}

gboolean
fsim_policy_is_offline(const char *name)
{
    const FsimPolicyOps *ops = fsim_policy_lookup(name);

    return ops != NULL && ops->plan != NULL;
}

const FsimPolicyOps *
fsim_policy_lookup(const char *name)
{
    g_return_val_if_fail(name != NULL, NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(all_policies); i++) {
        if (strcmp(all_policies[i]->name, name) == 0)
            return all_policies[i];
    }
    return NULL;
}

char *
fsim_policy_names(void)
{
    GString *names = g_string_new(NULL);

    for (gsize i = 0; i < G_N_ELEMENTS(all_policies); i++)
        g_string_append_printf(names, "%s%s", i ? ", " : "", all_policies[i]->name);
    return g_string_free(names, FALSE);
}

GPtrArray *
fsim_policy_select(const char *const *names, gboolean unique, GError **error)
{
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func(g_free);

    for (gsize i = 0; names == NULL && i < G_N_ELEMENTS(all_policies); i++)
        g_ptr_array_add(out, g_strdup(all_policies[i]->name));
    for (gsize i = 0; names != NULL && names[i] != NULL; i++) {
        if (*names[i] == '\0' ||
            (unique && g_ptr_array_find_with_equal_func(out, names[i], g_str_equal, NULL)))
            continue;
        if (fsim_policy_lookup(names[i]) == NULL) {
            g_autofree char *valid = fsim_policy_names();

            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "unknown policy '%s' (valid: %s)",
                        names[i], valid);
            return NULL;
        }
        g_ptr_array_add(out, g_strdup(names[i]));
    }
    return g_steal_pointer(&out);
}

gboolean
fsim_policy_check_config(const FsimPolicyOps *ops, GKeyFile *config, GError **error)
{
    g_auto(GStrv) keys = NULL;

    if (config == NULL || !g_key_file_has_group(config, ops->name))
        return TRUE;
    keys = g_key_file_get_keys(config, ops->name, NULL, NULL);
    for (gsize k = 0; keys != NULL && keys[k] != NULL; k++) {
        gboolean known = FALSE;

        for (const FsimKnob *knob = ops->knobs; knob != NULL && knob->name != NULL; knob++) {
            if (strcmp(knob->name, keys[k]) == 0) {
                known = TRUE;
                break;
            }
        }
        if (!known) {
            g_autoptr(GString) valid = g_string_new(NULL);

            for (const FsimKnob *knob = ops->knobs; knob != NULL && knob->name != NULL; knob++)
                g_string_append_printf(valid, "%s%s", valid->len ? ", " : "", knob->name);
            g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                        "policy '%s' has no knob '%s' (valid: %s)", ops->name, keys[k],
                        valid->len ? valid->str : "none");
            return FALSE;
        }
    }
    return TRUE;
}

FsimPolicy *
fsim_policy_new(const char *name, FsimDevice *device, GKeyFile *config, GError **error)
{
    const FsimPolicyOps *ops;
    FsimPolicy *policy;

    g_return_val_if_fail(name != NULL, NULL);
    g_return_val_if_fail(device != NULL, NULL);
    ops = fsim_policy_lookup(name);
    if (ops == NULL) {
        g_autofree char *names = fsim_policy_names();

        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "unknown policy '%s' (valid: %s)", name,
                    names);
        return NULL;
    }
    if (!fsim_policy_check_config(ops, config, error))
        return NULL;
    policy = ops->create(device, config, error);
    if (policy == NULL)
        return NULL;
    g_assert(policy->ops == ops);
    g_assert(policy->device == device);
    return policy;
}

void
fsim_policy_free(FsimPolicy *policy)
{
    if (policy == NULL)
        return;
    policy->ops->destroy(policy);
}

GArray *
fsim_policy_pool_stats(const FsimPolicy *policy)
{
    GArray *out;
    gsize n;

    if (policy->ops->pool_stats == NULL)
        return NULL;
    n = policy->ops->pool_stats(policy, NULL, 0);
    if (n <= 1)
        return NULL; /* the default pools alone */
    out = g_array_sized_new(FALSE, TRUE, sizeof(FsimPoolStats), (guint)n);
    g_array_set_size(out, (guint)n);
    policy->ops->pool_stats(policy, (FsimPoolStats *)(void *)out->data, n);
    return out;
}

/* ---- knobs --------------------------------------------------------------------------------- */

/* @key's value in @ops's group of @config, stripped, else its default from @ops's knob table. */
static char *
knob_value(const FsimPolicyOps *ops, GKeyFile *config, const char *key)
{
    char *value = config != NULL ? g_key_file_get_value(config, ops->name, key, NULL) : NULL;

    if (value != NULL)
        return g_strstrip(value);
    for (const FsimKnob *knob = ops->knobs; knob != NULL && knob->name != NULL; knob++) {
        if (strcmp(knob->name, key) == 0)
            return g_strdup(knob->default_value);
    }
    g_error("policy %s has no knob %s", ops->name, key);
    return NULL;
}

/* A whole-number knob: a size with units (2MiB) when @size, else a plain non-negative integer. */
static gboolean
knob_get_whole(const FsimPolicyOps *ops, GKeyFile *config, const char *key, gboolean size,
               uint64_t *out, GError **error)
{
    g_autofree char *value = knob_value(ops, config, key);

    if (size ? !fsim_parse_size(value, out, NULL) : !fsim_parse_u64(value, out)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s.%s: '%s' is not %s", ops->name, key,
                    value,
                    size ? "a size (examples: 2MiB, 64KiB, 1048576)" : "a non-negative integer");
        return FALSE;
    }
    return TRUE;
}

gboolean
fsim_knob_get_size(const FsimPolicyOps *ops, GKeyFile *config, const char *key, uint64_t *out,
                   GError **error)
{
    return knob_get_whole(ops, config, key, TRUE, out, error);
}

gboolean
fsim_knob_get_u64(const FsimPolicyOps *ops, GKeyFile *config, const char *key, uint64_t *out,
                  GError **error)
{
    return knob_get_whole(ops, config, key, FALSE, out, error);
}

gboolean
fsim_knob_get_double(const FsimPolicyOps *ops, GKeyFile *config, const char *key, double *out,
                     GError **error)
{
    g_autofree char *value = knob_value(ops, config, key);
    char *end = NULL;
    double parsed;

    errno = 0;
    parsed = g_ascii_strtod(value, &end);
    if (*value == '\0' || end == NULL || *end != '\0' || errno != 0 || !isfinite(parsed)) {
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s.%s: '%s' is not a number", ops->name,
                    key, value);
        return FALSE;
    }
    *out = parsed;
    return TRUE;
}

gboolean
fsim_knob_get_bool(const FsimPolicyOps *ops, GKeyFile *config, const char *key, gboolean *out,
                   GError **error)
{
    g_autofree char *value = knob_value(ops, config, key);
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};

    for (gsize i = 0; i < G_N_ELEMENTS(yes); i++) {
        if (g_ascii_strcasecmp(value, yes[i]) == 0) {
            *out = TRUE;
            return TRUE;
        }
        if (g_ascii_strcasecmp(value, no[i]) == 0) {
            *out = FALSE;
            return TRUE;
        }
    }
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s.%s: '%s' is not a boolean (true/false)",
                ops->name, key, value);
    return FALSE;
}
