/* SPDX-License-Identifier: MIT */
/*
 * A fake GPU for the CUDA backend's tests: an #FsimCudaDriverOps on the CPU.  Memory is a byte
 * count with a capacity; cudaMalloc rounds to 2 MiB; handles, reservations and mappings are
 * checked as strictly as the device promises to use them (a mapping inside a reservation, an
 * unmap of exactly a mapping, nothing mapped when a reservation is freed); the clock advances by a
 * fixed cost per call (base + per GiB), so durations are exact and nothing depends on the wall
 * clock.  Failures can be injected per call.
 */
#pragma once

#include <glib.h>

#include "fragsim/fragsim.h"

#include "cuda/cuda-backend.h"

typedef enum {
    OP_MEM_ALLOC,
    OP_MEM_FREE,
    OP_TOUCH,
    OP_RESERVE,
    OP_ADDRESS_FREE,
    OP_CREATE,
    OP_RELEASE,
    OP_MAP,
    OP_UNMAP,
    OP_SET_ACCESS,
    OP_SYNC,
    OP_POOL_ALLOC,
    OP_POOL_FREE,
    OP_COUNT,
} FakeOp;

typedef struct {
    uint64_t base_ns;
    uint64_t per_gib_ns; /* a multiple of 512, so 2 MiB multiples cost whole nanoseconds */
} FakeCost;

typedef struct {
    FsimCudaDriver base;
    uint64_t clock_ns;
    uint64_t capacity;
    uint64_t context_bytes;   /* used before anything is allocated */
    uint64_t used;            /* physical bytes taken (mallocs, handles, pool) */
    uint64_t malloc_overhead; /* extra bytes each cudaMalloc takes (to make the driver refuse
                                 earlier than the model) */
    FsimAddr next_va;
    uint64_t next_handle;
    GHashTable *mallocs;      /* addr -> rounded size */
    GHashTable *reservations; /* addr -> size */
    GHashTable *handles;      /* handle -> size */
    GHashTable *mappings;     /* addr -> handle */
    GHashTable *pool_blocks;  /* addr -> rounded size */
    gboolean pool_open;
    uint64_t pool_reserved, pool_reserved_high, pool_used, pool_used_high;
    FakeCost cost[OP_COUNT];
    uint64_t calls[OP_COUNT];
    /* fail the fail_at-th call of fail_op (1-based) with fail_code */
    int fail_op;
    uint64_t fail_at;
    FsimCudaError fail_code;
} FakeDriver;

/* The costs calibration must recover (per GiB values are multiples of 512). */
#define FAKE_MALLOC_NS         20000
#define FAKE_MALLOC_PER_GIB_NS 153600
#define FAKE_SYNC_NS           10000
#define FAKE_FREE_NS           30000 /* includes the implicit synchronisation */
#define FAKE_FREE_PER_GIB_NS   51200
#define FAKE_RESERVE_NS        4000
#define FAKE_ADDRESS_FREE_NS   6000
#define FAKE_CREATE_NS         2000
#define FAKE_CREATE_PER_GIB_NS 102400
#define FAKE_MAP_NS            1000
#define FAKE_SET_ACCESS_NS     500
#define FAKE_UNMAP_NS          1500
#define FAKE_RELEASE_NS        500
#define FAKE_TOUCH_NS          700

/* A fake GPU of @capacity usable bytes (plus a 512 MiB context), named "Fake GPU 64GB". */
FakeDriver *fake_new(uint64_t capacity);
FakeDriver *fake_from(FsimCudaDriver *driver);
/* Asserts that everything was given back. */
void fake_assert_clean(FakeDriver *fake);
