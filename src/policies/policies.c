/* SPDX-License-Identifier: MIT */
/*
 * What the policies of this directory share: the destroy() of a policy that owns nothing but its
 * instance, and the last step of their check(), their counters against what the check counted
 * afresh and against the device's own count of reserved memory, in one wording for all.
 */
#include "policies.h"

#include <glib.h>

void
fsim_policy_destroy_instance(FsimPolicy *self)
{
    g_free(self);
}

gboolean
fsim_policy_check_accounts(const FsimPolicy *self, uint64_t reserved, const FsimTally *tallies,
                           gsize n, GError **error)
{
    uint64_t device = (uint64_t)self->device->reserved.current;
    gboolean agree = reserved == device;
    g_autoptr(GString) text = NULL;

    for (gsize i = 0; i < n; i++)
        agree &= tallies[i].counted == tallies[i].kept;
    if (agree)
        return TRUE;
    text = g_string_new("accounting mismatch:");
    for (gsize i = 0; i < n; i++)
        g_string_append_printf(text, " %s %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT ",",
                               tallies[i].what, tallies[i].counted, tallies[i].kept);
    g_string_append_printf(text, " reserved %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT, reserved,
                           device);
    g_set_error_literal(error, FSIM_ERROR, FSIM_ERROR_FAILED, text->str);
    return FALSE;
}
