/* SPDX-License-Identifier: MIT */
/*
 * fragsim: umbrella header.  A discrete-event simulator of GPU memory allocators.
 */
#pragma once

#include "fragsim/device.h"
#include "fragsim/engine.h"
#include "fragsim/event.h"
#include "fragsim/metrics.h"
#include "fragsim/policy.h"
#include "fragsim/state.h"
#include "fragsim/trace.h"
#include "fragsim/types.h"
