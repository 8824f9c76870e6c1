/* SPDX-License-Identifier: MIT */
/*
 * PYTORCH_CUDA_ALLOC_CONF: the settings of PyTorch's CUDA caching allocator, parsed as PyTorch
 * parses them (c10/core/AllocatorConfig.cpp and c10/cuda/CUDAAllocatorConfig.cpp), shared by the
 * `caching` and `expandable` policies, by `replay -c` and by `validate` (which reads a snapshot's
 * allocator_settings).
 *
 * The syntax is PyTorch's: the text is cut into tokens at `,` `:` `[` `]` (each separator is a
 * token of its own, whitespace is dropped), then read as `key:value` pairs separated by commas;
 * `roundup_power2_divisions` also takes a bracketed list `[256:1,512:2,>:8]`.  An unknown key or
 * an invalid value is an error naming it.  Keys that do not change where memory goes
 * (`release_lock_on_cudamalloc`, `pinned_*`, `backend:native`, ...) are checked and ignored.
 *
 * In a run's GKeyFile the policies' knobs are these same keys with the same value syntax
 * (`[caching] max_split_size_mb=128`), so `--set caching.max_split_size_mb=128` and
 * `-c max_split_size_mb:128` mean the same.
 *
 * Also here, because a recording is read with them: the sizes these settings give a request
 * (PyTorch's round_size and get_allocation_size).  The parser is src/policies/pytorch/alloc-conf.c,
 * the sizes src/policies/pytorch/alloc.c.
 */
#pragma once

#include <glib.h>

#include <stdint.h>

G_BEGIN_DECLS

/* PyTorch's constants (unchanged from 1.13 to main). */
#define FSIM_PYTORCH_MIN_BLOCK       ((uint64_t)512)      /* kMinBlockSize */
#define FSIM_PYTORCH_SMALL_SIZE      ((uint64_t)1 << 20)  /* kSmallSize: 1 MiB */
#define FSIM_PYTORCH_SMALL_BUFFER    ((uint64_t)2 << 20)  /* kSmallBuffer: 2 MiB */
#define FSIM_PYTORCH_MIN_LARGE_ALLOC ((uint64_t)10 << 20) /* kMinLargeAlloc: 10 MiB */
#define FSIM_PYTORCH_ROUND_LARGE     ((uint64_t)2 << 20)  /* kRoundLarge: 2 MiB */

/* roundup_power2_divisions has one entry per power-of-two interval from 1 MiB to 64 GiB. */
#define FSIM_ALLOC_CONF_INTERVALS 16

/**
 * FsimAllocConf:
 * @max_split_size: bytes; blocks this large or larger are never split.  G_MAXUINT64 = unlimited
 *     (PyTorch's default; snapshots write it as -1).
 * @max_non_split_rounding: bytes an oversize cached block may exceed an oversize request by
 *     (default 20 MiB).
 * @large_segment_size: bytes of the segment made for 1-10 MiB requests, and of a large-pool page
 *     of an expandable segment (default 20 MiB).
 * @roundup_bypass_threshold: PyTorch 1.13/2.0 only: sizes above it skip the power-of-two
 *     rounding.  G_MAXUINT64 = never.
 * @garbage_collection_threshold: fraction of the allowed memory above which cached blocks are
 *     garbage collected; 0 = off.  Active only with a memory fraction.
 * @per_process_memory_fraction: the fraction of the device's memory the process may hold,
 *     meaningful when @has_memory_fraction.
 * @has_memory_fraction: a fraction was set (PyTorch's `set_fraction`).
 * @expandable_segments: expandable segments instead of cudaMalloc'd ones.
 * @roundup_power2_divisions: divisions per interval [2^(20+i), 2^(21+i)) bytes, 0 or 1 = off.
 * @platform: whose fork of the allocator: PyTorch's CUDA one or torch_npu's (Ascend), which pads
 *     every request by %FSIM_NPU_REQUEST_PAD bytes before rounding.  A knob of the policies'
 *     groups (`caching.platform=npu`), not a PYTORCH_CUDA_ALLOC_CONF key.
 * @npu_base_addr_aligned: torch_npu's `base_addr_aligned_kb` in bytes (default 16 KiB, 0 = off):
 *     under expandable segments a request of 2 MiB or more starts on this boundary.
 * @npu_page_1g: torch_npu's `page_size:1g`: large-pool segments are whole GiB, and so are the
 *     large-pool pages of expandable segments.
 * @npu_segment_size: torch_npu's `segment_size_mb` in bytes (20-512 MiB; 0 = unset): the
 *     large-pool page of expandable segments.
 *
 * The three npu_ fields are PYTORCH_NPU_ALLOC_CONF keys: accepted by the parser, refused by
 * fsim_alloc_conf_load() unless the platform is npu.
 */
typedef enum {
    FSIM_PLATFORM_CUDA = 0,
    FSIM_PLATFORM_NPU,
} FsimPlatform;

/* torch_npu's round_size() adds this many bytes to a request before rounding it. */
#define FSIM_NPU_REQUEST_PAD 32

/* "cuda" or "npu". */
const char *fsim_platform_name(FsimPlatform platform);
/* The environment variable that carries the allocator's settings on @platform:
 * "PYTORCH_CUDA_ALLOC_CONF", or torch_npu's "PYTORCH_NPU_ALLOC_CONF". */
const char *fsim_platform_alloc_conf_env(FsimPlatform platform);
/* FALSE when @name is neither "cuda" nor "npu" (case-insensitive). */
gboolean fsim_platform_from_name(const char *name, FsimPlatform *out);

typedef struct {
    uint64_t max_split_size;
    uint64_t max_non_split_rounding;
    uint64_t large_segment_size;
    uint64_t roundup_bypass_threshold;
    double garbage_collection_threshold;
    double per_process_memory_fraction;
    gboolean has_memory_fraction;
    gboolean expandable_segments;
    uint32_t roundup_power2_divisions[FSIM_ALLOC_CONF_INTERVALS];
    FsimPlatform platform;
    uint64_t npu_base_addr_aligned;
    gboolean npu_page_1g;
    uint64_t npu_segment_size;
} FsimAllocConf;

/* torch_npu's kAlignRoundLarge: the default and the largest `base_addr_aligned_kb`, in bytes. */
#define FSIM_NPU_ADDR_ALIGN ((uint64_t)16 << 10)
/* torch_npu's kExtraLargeBuffer: the segment and page unit of `page_size:1g`. */
#define FSIM_NPU_PAGE_1G ((uint64_t)1 << 30)

/* Fill @conf with PyTorch's defaults. */
void fsim_alloc_conf_init(FsimAllocConf *conf);

/**
 * fsim_alloc_conf_parse:
 * @conf: the settings to update (start from fsim_alloc_conf_init()).
 * @text: a PYTORCH_CUDA_ALLOC_CONF string; empty means no change.
 * @error: FSIM_ERROR_USAGE naming the unknown key or the invalid value.
 *
 * Applies @text on top of @conf, key after key, as PyTorch does.  On failure @conf may be
 * partly updated.
 *
 * Returns: %TRUE on success.
 */
gboolean fsim_alloc_conf_parse(FsimAllocConf *conf, const char *text, GError **error);

/**
 * fsim_alloc_conf_apply:
 * @config: a run's key file.
 * @text: a PYTORCH_CUDA_ALLOC_CONF string.
 * @error: FSIM_ERROR_USAGE as fsim_alloc_conf_parse().
 *
 * Checks @text and writes the knobs it sets into the groups `caching` and `expandable` of
 * @config (values normalised, later keys winning).  `expandable_segments` goes to `caching` only:
 * the `expandable` policy always uses expandable segments.  Keys without effect on placement are
 * not written.
 *
 * Returns: %TRUE on success; on failure @config is unchanged.
 */
gboolean fsim_alloc_conf_apply(GKeyFile *config, const char *text, GError **error);

/**
 * fsim_alloc_conf_load:
 * @conf: (out): the settings.
 * @config: (nullable): a run's key file.
 * @group: the policy's group.
 * @error: FSIM_ERROR_USAGE naming `group.key` and the invalid value.
 *
 * Reads the knobs of @group (PyTorch keys, PyTorch value syntax; booleans may also be written in
 * lower case) on top of the defaults.
 */
gboolean fsim_alloc_conf_load(FsimAllocConf *conf, GKeyFile *config, const char *group,
                              GError **error);

/* The number of divisions roundup_power2_divisions gives to a request of @size bytes. */
uint32_t fsim_alloc_conf_divisions(const FsimAllocConf *conf, uint64_t size);

/**
 * fsim_alloc_conf_to_string:
 *
 * Returns: (transfer full): @conf as a PYTORCH_CUDA_ALLOC_CONF string listing the settings that
 *     differ from the defaults (empty when none).
 */
char *fsim_alloc_conf_to_string(const FsimAllocConf *conf);

/* PyTorch's round_size(): the block size a request of @size bytes gets (what PyTorch records as
 * the size of an `oom` entry, too). */
uint64_t fsim_pytorch_round_size(const FsimAllocConf *conf, uint64_t size);

/* PyTorch's get_allocation_size(): the segment cudaMalloc'd for a block of @size (rounded)
 * bytes.  torch_npu with `page_size:1g`: whole GiB for the large pool. */
uint64_t fsim_pytorch_allocation_size(const FsimAllocConf *conf, uint64_t size);

G_END_DECLS
