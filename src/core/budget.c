/* SPDX-License-Identifier: MIT */
/*
 * The readers' memory budget (fsim_memory_budget() in trace.h): a process-wide number, by
 * default half the physical memory and half the address-space limit when there is one.
 */
/* sysconf(), getrlimit() */
#define _XOPEN_SOURCE 700

#include <glib.h>

#include <sys/resource.h>
#include <unistd.h>

#include "fragsim/trace.h"

/* Below this the default is not lowered: a machine this small reads nothing big anyway. */
#define BUDGET_FLOOR ((gsize)64 << 20)

static gsize budget_set;

static gsize
budget_default(void)
{
    gsize budget = G_MAXSIZE / 4;
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    struct rlimit limit;

    if (pages > 0 && page_size > 0)
        budget = MIN(budget, (gsize)pages / 2 * (gsize)page_size);
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
        budget = MIN(budget, (gsize)(limit.rlim_cur / 2));
    return MAX(budget, BUDGET_FLOOR);
}

gsize
fsim_memory_budget(void)
{
    static gsize once;

    if (budget_set != 0)
        return budget_set;
    if (g_once_init_enter(&once))
        g_once_init_leave(&once, budget_default());
    return once;
}

void
fsim_set_memory_budget(gsize bytes)
{
    budget_set = bytes;
}
