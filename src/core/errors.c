/* SPDX-License-Identifier: MIT */
/*
 * Error domains.  The quark functions are written by hand: clang-format 14 rewrites the argument
 * of G_DEFINE_QUARK(fsim-error-quark, ...) into `fsim - error - quark`.
 */
#include <glib.h>

#include "fragsim/types.h"

GQuark
fsim_error_quark(void)
{
    return g_quark_from_static_string("fsim-error-quark");
}

GQuark
fsim_trace_error_quark(void)
{
    return g_quark_from_static_string("fsim-trace-error-quark");
}
