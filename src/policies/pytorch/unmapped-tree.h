/* SPDX-License-Identifier: MIT */
/*
 * The unmapped blocks of one (pool, stream) of expandable segments, by address
 * (BlockComparatorAddress): an intrusive red-black tree over the blocks' own links, so caching a
 * block allocates nothing.  Cormen et al., Introduction to Algorithms, ch. 13, with parent
 * pointers and NULL leaves.
 *
 * Why not GLib: bench/bench-structures times a walk of up to 8 blocks from the lowest, an
 * erasure and an insertion per operation on 16 to 4096 unmapped blocks; this tree took 71-166
 * ns, GTree 1.4-2.2x as long and GSequence 2.5-4.1x (thread CPU time, gcc -O3, GLib 2.74,
 * including the random draws all three share), and both allocate a node per insertion, where
 * this tree links the blocks themselves.
 */
#pragma once

#include <glib.h>

#include "block.h"

G_BEGIN_DECLS

/* A red-black tree of blocks by address. */
typedef struct {
    Block *root;
    gsize count;
} Tree;

/* Insert @block (not in a tree yet; its address not in @tree). */
void fsim_pytorch_tree_insert(Tree *tree, Block *block);

/* Remove @block, which is in @tree. */
void fsim_pytorch_tree_erase(Tree *tree, Block *block);

/* The lowest block, NULL when @tree is empty. */
Block *fsim_pytorch_tree_first(const Tree *tree);

/* The block after @node in address order, NULL after the last. */
Block *fsim_pytorch_tree_next(Block *node);

/* Whether @block is reachable in @tree by a search on its own address. */
gboolean fsim_pytorch_tree_contains(const Tree *tree, const Block *block);

/* Whether the red-black rules, the order and the parent links of @tree all hold. */
gboolean fsim_pytorch_tree_valid(const Tree *tree);

G_END_DECLS
