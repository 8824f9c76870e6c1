/* SPDX-License-Identifier: MIT */
/*
 * A block of PyTorch's caching allocator (Block in CUDACachingAllocator.cpp): a range of one
 * segment, chained to its neighbours by address, and a node of the structure that caches it
 * (the free-block set of its stream, or the unmapped tree of an expandable segment).  The links
 * are intrusive, so caching a block allocates nothing.
 */
#pragma once

#include <glib.h>

#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

enum {
    BLOCK_RED = 1u << 0,        /* red node of the tree it is in */
    BLOCK_ALLOCATED = 1u << 1,  /* handed out (or pending free): not mergeable, not in a tree */
    BLOCK_UNMAPPED = 1u << 2,   /* address space of an expandable segment without pages */
    BLOCK_PENDING = 1u << 3,    /* seeded active_pending_free: active but no longer allocated */
    BLOCK_IN_TREE = 1u << 4,    /* in its stream's free set or unmapped tree */
    BLOCK_EXPANDABLE = 1u << 5, /* of an expandable segment: segment->expandable, kept here so
                                 * that the best-fit search does not read the segment */
};

/* The two children of a tree node, by index: the loops of the tree work for either side. */
enum {
    TREE_LEFT = 0,
    TREE_RIGHT = 1,
};

typedef struct Block Block;
typedef struct Segment Segment;
typedef struct StreamSet StreamSet;

/* A block is one cache line, 64 bytes and aligned: what a free, a split and a best fit read
 * (links, segment, place, request, set, flags) in one line, not across two as a 96-byte block
 * did for half of them.  The tree links, which only the unmapped blocks of expandable segments
 * use, are kept apart in the slab (block_links()). */
struct Block {
    Block *prev; /* neighbours in the segment, by address */
    Block *next;
    Segment *segment;
    uint64_t size; /* before @addr, as the free set's (size, key) pairs: one 16-byte copy */
    uint64_t addr;
    uint64_t requested; /* the request an allocated block serves */
    StreamSet *set;     /* segment->set, kept here: a free and a split need not read the segment */
    uint32_t flags;
    /* the pool's GC clock when the block was last cached, its low 32 bits: PyTorch's age is the
     * int of the difference, which they give exactly */
    uint32_t gc_count_base;
};

/* The links of a block in an unmapped tree. */
typedef struct {
    Block *child[2]; /* child[TREE_LEFT] (lower addresses), child[TREE_RIGHT] */
    Block *parent;
} BlockLinks;

/* The slab's blocks come in runs of BLOCK_SLAB_RUN, aligned to BLOCK_SLAB_ALIGN, their links
 * after them in the same order: a block's links are found from its address. */
#define BLOCK_SLAB_RUN   1024u
#define BLOCK_SLAB_ALIGN (2u * BLOCK_SLAB_RUN * 64u)
#define BLOCK_SLAB_BYTES (BLOCK_SLAB_RUN * (64u + sizeof(BlockLinks)))

G_STATIC_ASSERT(sizeof(Block) == 64);
G_STATIC_ASSERT(BLOCK_SLAB_BYTES <= BLOCK_SLAB_ALIGN);

/* The tree links of @block, a block of the model's slab (block-pool.c). */
static inline BlockLinks *
block_links(const Block *block)
{
    uintptr_t run = (uintptr_t)block & ~(uintptr_t)(BLOCK_SLAB_ALIGN - 1);
    uintptr_t i = ((uintptr_t)block - run) / sizeof(Block);

    return (BlockLinks *)(run + BLOCK_SLAB_RUN * sizeof(Block)) + i;
}

/* @a when @cond, else @b, by a mask rather than a branch: for the choices that follow whether a
 * block has neighbours, as random as the trace (gcc keeps a branch for a plain ?: whose arms
 * load). */
static inline gpointer
block_select(gboolean cond, gpointer a, gpointer b)
{
    uintptr_t mask = -(uintptr_t)(cond != 0);

    return (gpointer)(((uintptr_t)a & mask) | ((uintptr_t)b & ~mask));
}

static inline gboolean
block_unmapped(const Block *block)
{
    return (block->flags & BLOCK_UNMAPPED) != 0;
}

static inline gboolean
block_allocated(const Block *block)
{
    return (block->flags & BLOCK_ALLOCATED) != 0;
}

static inline gboolean
block_is_split(const Block *block)
{
    return (block->prev != NULL) | (block->next != NULL); /* no branch */
}

G_END_DECLS
