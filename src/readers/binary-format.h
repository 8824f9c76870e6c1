/* SPDX-License-Identifier: MIT */
/*
 * The layout of fragsim's binary trace format, `fragsim-trace binary v1` (docs/trace-formats.md),
 * shared by its reader (binary.c) and its writer (binary-writer.c).  Every integer is
 * little-endian.
 *
 *     header    64 bytes   magic, sizes, counts, checksum
 *     records   32 bytes each, n_records of them
 *     streams   8 bytes each (the stream values; records hold an index), n_streams of them
 *     strings   strings_bytes of NUL-terminated mark labels, zero-padded to a multiple of 8
 *
 * The checksum covers everything after the header, read as little-endian 64-bit words w[1..n]:
 * A = sum of w[i], B = sum of the running values of A (a Fletcher sum, all modulo 2^64), and the
 * header stores A ^ rotl(B, 32).  A record's four words are added at once, so the reader folds
 * the sum into its decoding loop at a few cycles per record.
 */
#pragma once

#include <glib.h>

#include <stdint.h>
#include <string.h>

#include "fragsim/trace.h"

#define FSIM_BINARY_MAGIC        "fragsim-trace binary v1\n"
#define FSIM_BINARY_MAGIC_LEN    24
#define FSIM_BINARY_HEADER_BYTES 64
#define FSIM_BINARY_RECORD_BYTES 32
/* Offsets of the header's fields. */
#define FSIM_BINARY_OFF_HEADER_BYTES  24 /* u32 */
#define FSIM_BINARY_OFF_RECORD_BYTES  28 /* u32 */
#define FSIM_BINARY_OFF_RECORDS       32 /* u64 */
#define FSIM_BINARY_OFF_STREAMS       40 /* u32 */
#define FSIM_BINARY_OFF_RESERVED      44 /* u32, 0 */
#define FSIM_BINARY_OFF_STRINGS_BYTES 48 /* u64 */
#define FSIM_BINARY_OFF_CHECKSUM      56 /* u64 */

/* Record kinds are FsimEventKind's values, 1 (alloc) to 8 (pool_release); anything else is
 * refused.  The codes are the format's: never renumber them. */
G_STATIC_ASSERT(FSIM_EV_ALLOC == 1 && FSIM_EV_FREE == 2 && FSIM_EV_FREE_COMPLETED == 3 &&
                FSIM_EV_EMPTY_CACHE == 4 && FSIM_EV_MARK == 5 && FSIM_EV_POOL_BEGIN == 6 &&
                FSIM_EV_POOL_END == 7 && FSIM_EV_POOL_RELEASE == 8);
#define FSIM_BINARY_KIND_LAST FSIM_EV_POOL_RELEASE

/* Flag bits a record may carry: FsimEvent's flags. */
#define FSIM_BINARY_FLAGS_KNOWN (FSIM_EVF_DEFERRED | FSIM_EVF_INFERRED | FSIM_EVF_RECORDED_OOM)

/* A record, decoded: word 0 is the time delta, 1 the id (a mark's label offset), 2 the size,
 * 3 packs the stream index (bits 0-31), the kind (32-39), the flags (40-47) and 16 reserved
 * zero bits. */
#define FSIM_BINARY_WORD3(stream_index, kind, flags) \
    ((uint64_t)(stream_index) | ((uint64_t)(kind) << 32) | ((uint64_t)(flags) << 40))

typedef struct {
    uint64_t a;
    uint64_t b;
} FsimBinarySum;

static inline uint64_t
fsim_binary_load64(const guint8 *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return GUINT64_FROM_LE(v);
}

static inline uint32_t
fsim_binary_load32(const guint8 *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return GUINT32_FROM_LE(v);
}

static inline void
fsim_binary_store64(guint8 *p, uint64_t v)
{
    v = GUINT64_TO_LE(v);
    memcpy(p, &v, sizeof(v));
}

static inline void
fsim_binary_store32(guint8 *p, uint32_t v)
{
    v = GUINT32_TO_LE(v);
    memcpy(p, &v, sizeof(v));
}

/* Add four words (one record, or four words of a table) to the sum. */
static inline void
fsim_binary_sum4(FsimBinarySum *sum, uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3)
{
    sum->b += 4 * sum->a + 4 * w0 + 3 * w1 + 2 * w2 + w3;
    sum->a += w0 + w1 + w2 + w3;
}

static inline void
fsim_binary_sum1(FsimBinarySum *sum, uint64_t w)
{
    sum->a += w;
    sum->b += sum->a;
}

/* Add @len bytes (a multiple of 8) of a table. */
static inline void
fsim_binary_sum_bytes(FsimBinarySum *sum, const guint8 *p, gsize len)
{
    for (gsize i = 0; i < len; i += 8)
        fsim_binary_sum1(sum, fsim_binary_load64(p + i));
}

static inline uint64_t
fsim_binary_sum_value(const FsimBinarySum *sum)
{
    return sum->a ^ ((sum->b << 32) | (sum->b >> 32));
}

/* How many bytes of records a binary stream maps or buffers at once (rounded down to whole
 * records, at least one); 0 restores the default, 8 MiB.  For tests, which make it small so that
 * short traces cross many windows. */
void fsim_binary_set_window(gsize bytes);

/* The binary writer behind fsim_trace_writer_open_format(): it takes over @fd (a fresh regular
 * file, positioned at 0) and names @path in its messages. */
typedef struct FsimBinaryWriter FsimBinaryWriter;

FsimBinaryWriter *fsim_binary_writer_new(int fd, const char *path, GError **error);
gboolean fsim_binary_writer_write(FsimBinaryWriter *writer, const FsimEvent *ev, GError **error);
/* Write the tables and the header, and close the file. */
gboolean fsim_binary_writer_finish(FsimBinaryWriter *writer, GError **error);
/* Close the file (if still open) and free; NULL-safe. */
void fsim_binary_writer_free(FsimBinaryWriter *writer);
