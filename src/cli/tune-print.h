/* SPDX-License-Identifier: MIT */
/*
 * What `fragsim tune` prints: a text report or one JSON object (tune-print.c), shared with
 * cmd-tune.c, which runs the search.
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

#include "analysis/tune.h"

G_BEGIN_DECLS

/* The settings `tune` lists besides the default (and the recorded ones). */
#define TUNE_TOP 5

/**
 * TuneJob:
 * @paths: (element-type utf8): the traces as named, in order.
 * @ranks: (element-type FsimTuneRank): the job's ranks.
 * @device: the chosen device.
 * @platform: the platform the traces were recorded on (it names the settings' variable).
 * @run_ids: with --db: the stored runs of the default and of the recommendation (-1 otherwise).
 */
typedef struct {
    GPtrArray *paths;
    GArray *ranks;
    FsimDeviceSpec device;
    FsimPlatform platform;
    int64_t default_run_id;
    int64_t run_id;
} TuneJob;

/* `PYTORCH_CUDA_ALLOC_CONF=CONFIG` (torch_npu's variable for an NPU job), the value quoted for a
 * shell where it must be when @shell is set. */
char *tune_env_line(const TuneJob *job, const char *config, gboolean shell);

/* Returns: (transfer container): the settings to list: the recommended one first, then the best
 * others, one for each distinct outcome (at most TUNE_TOP in all). */
GPtrArray *tune_shown(const FsimTuneResult *result);

void tune_print_text(const TuneJob *job, const FsimTuneResult *result);
void tune_print_json(const TuneJob *job, const FsimTuneResult *result);

G_END_DECLS
