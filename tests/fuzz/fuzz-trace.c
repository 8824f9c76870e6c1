/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for every trace reader: writes the input to an in-memory file, opens it with
 * fsim_trace_open() (format detection and gzip included), describes it and streams every device
 * through real engines, checking what the readers promise (fuzz-trace-check.c).  Each input is
 * replayed through one policy, bestfit or direct, chosen by a hash of the input so that a
 * finding reproduces.  Build with -DFRAGSIM_FUZZ=ON and clang; tests/fuzz/README.md says how to
 * run it.
 */
#define _GNU_SOURCE 1 /* memfd_create */

#include <glib.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fragsim/fragsim.h"

#include "fuzz-trace-check.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Events fed to each engine: its paranoid check costs as much as the live blocks. */
#define FUZZ_MAX_ENGINE_EVENTS 20000

static int memfd = -1;
static char memfd_path[64];

/* A GLib critical or warning is a bug, as under G_DEBUG=fatal-warnings in the tests; abort()
 * rather than GLib's fatal breakpoint, whose SIGTRAP libFuzzer would not catch and save.  Debug
 * and info messages (readers' notes on odd inputs) are dropped. */
static void
log_handler(const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
    (void)data;
    if ((level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING)) == 0)
        return;
    fprintf(stderr, "fuzz-trace: %s: %s\n", domain != NULL ? domain : "(no domain)", message);
    abort();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_log_set_default_handler(log_handler, NULL);
    memfd = memfd_create("fuzz-trace", MFD_CLOEXEC);
    if (memfd < 0) {
        perror("fuzz-trace: memfd_create");
        abort();
    }
    g_snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
    return 0;
}

/* FNV-1a over the input, to pick a policy deterministically. */
static uint32_t
input_hash(const uint8_t *data, size_t size)
{
    uint32_t hash = 2166136261u;

    for (size_t i = 0; i < size; i++)
        hash = (hash ^ data[i]) * 16777619u;
    return hash;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzTraceOptions options = {
        .policies = (input_hash(data, size) & 1) != 0 ? FUZZ_TRACE_DIRECT : FUZZ_TRACE_BESTFIT,
        .max_engine_events = FUZZ_MAX_ENGINE_EVENTS,
    };
    g_autoptr(GError) error = NULL;
    size_t done = 0;

    if (ftruncate(memfd, 0) != 0) {
        perror("fuzz-trace: ftruncate");
        abort();
    }
    while (done < size) {
        ssize_t n = pwrite(memfd, data + done, size - done, (off_t)done);

        if (n <= 0) {
            perror("fuzz-trace: pwrite");
            abort();
        }
        done += (size_t)n;
    }
    if (!fuzz_trace_check(memfd_path, &options, NULL, &error)) {
        fprintf(stderr, "fuzz-trace: %s\n", error->message);
        abort();
    }
    return 0;
}
