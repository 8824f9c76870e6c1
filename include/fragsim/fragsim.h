/* SPDX-License-Identifier: MIT */
/*
 * fragsim: umbrella header.  A discrete-event simulator of GPU memory allocators.
 */
#pragma once

#include "fragsim/alloc-conf.h"
#include "fragsim/device.h"
#include "fragsim/engine.h"
#include "fragsim/event.h"
#include "fragsim/explain.h"
#include "fragsim/memviz.h"
#include "fragsim/metrics.h"
#include "fragsim/owned.h"
#include "fragsim/plan.h"
#include "fragsim/plot.h"
#include "fragsim/policy.h"
#include "fragsim/state.h"
#include "fragsim/store.h"
#include "fragsim/trace.h"
#include "fragsim/types.h"
#include "fragsim/validate.h"
