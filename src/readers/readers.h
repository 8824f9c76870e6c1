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
 * fragsim is built with it, GLib's zlib one otherwise. */
GConverter *fsim_gzip_decompressor_new(void);
