/* SPDX-License-Identifier: MIT */
/*
 * The registered trace formats: one `const FsimTraceFormat` per reader.  Adding a format means
 * one .c file, one line here, one line in all_formats[] (src/core/trace.c), one CMake entry.
 * Order matters: formats are probed in all_formats[] order.
 */
#pragma once

#include "fragsim/trace.h"

extern const FsimTraceFormat fsim_trace_format_binary;
extern const FsimTraceFormat fsim_trace_format_text;
extern const FsimTraceFormat fsim_trace_format_torch;
extern const FsimTraceFormat fsim_trace_format_rmm;

/* The gzip decompressor of compressed inputs (src/readers/gzip-input.c): ISA-L's inflate where
 * fragsim is built with it, zlib's otherwise. */
GConverter *fsim_gzip_decompressor_new(void);

/* zlib's gzip (src/readers/gzip-zlib.c): the compressor of written traces at @level (0-9), and the
 * decompressor behind fsim_gzip_decompressor_new() without ISA-L. */
GConverter *fsim_gzip_compressor_new(int level);
GConverter *fsim_zlib_gzip_decompressor_new(void);
