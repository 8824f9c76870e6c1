/* SPDX-License-Identifier: MIT */
/*
 * The table of allocation stacks a trace keeps (trace.h: fsim_trace_add_stack()).
 */
#pragma once

#include <glib.h>

#include "fragsim/trace.h"

/* Free a trace's stack table (NULL is a no-op). */
void fsim_stack_table_free(FsimStackTable *table);
