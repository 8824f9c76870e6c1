/* SPDX-License-Identifier: MIT */
/*
 * The red-black tree of unmapped blocks (see unmapped-tree.h).
 */
#include "unmapped-tree.h"

#include <glib.h>

static inline gboolean
tree_less(const Block *a, const Block *b)
{
    return a->addr < b->addr;
}

static inline gboolean
is_red(const Block *block)
{
    return block != NULL && (block->flags & BLOCK_RED) != 0;
}

static inline void
set_red(Block *block, gboolean red)
{
    if (red)
        block->flags |= BLOCK_RED;
    else
        block->flags &= ~(uint32_t)BLOCK_RED;
}

static void
tree_replace_child(Tree *tree, Block *parent, Block *old, Block *new_child)
{
    if (parent == NULL)
        tree->root = new_child;
    else if (block_links(parent)->child[TREE_LEFT] == old)
        block_links(parent)->child[TREE_LEFT] = new_child;
    else
        block_links(parent)->child[TREE_RIGHT] = new_child;
}

/* Rotate @x down to its @side (TREE_LEFT: a left rotation); its other child takes its place. */
static void
tree_rotate(Tree *tree, Block *x, int side)
{
    Block *y = block_links(x)->child[!side];

    block_links(x)->child[!side] = block_links(y)->child[side];
    if (block_links(y)->child[side] != NULL)
        block_links(block_links(y)->child[side])->parent = x;
    block_links(y)->parent = block_links(x)->parent;
    tree_replace_child(tree, block_links(x)->parent, x, y);
    block_links(y)->child[side] = x;
    block_links(x)->parent = y;
}

void
fsim_pytorch_tree_insert(Tree *tree, Block *z)
{
    Block *parent = NULL;
    Block **link = &tree->root;

    g_assert((z->flags & BLOCK_IN_TREE) == 0);
    while (*link != NULL) {
        parent = *link;
        link = &block_links(parent)->child[tree_less(z, parent) ? TREE_LEFT : TREE_RIGHT];
    }
    block_links(z)->parent = parent;
    block_links(z)->child[TREE_LEFT] = block_links(z)->child[TREE_RIGHT] = NULL;
    z->flags |= BLOCK_RED | BLOCK_IN_TREE;
    *link = z;
    tree->count++;
    while (is_red(block_links(z)->parent)) {
        Block *p = block_links(z)->parent;
        Block *g = block_links(p)->parent; /* exists: a red node is never the root */
        int side =
            p == block_links(g)->child[TREE_LEFT] ? TREE_LEFT : TREE_RIGHT; /* p's side of g */
        Block *uncle = block_links(g)->child[!side];

        if (is_red(uncle)) {
            set_red(p, FALSE);
            set_red(uncle, FALSE);
            set_red(g, TRUE);
            z = g;
            continue;
        }
        if (z == block_links(p)->child[!side]) {
            z = p;
            tree_rotate(tree, z, side);
            p = block_links(z)->parent;
        }
        set_red(p, FALSE);
        set_red(g, TRUE);
        tree_rotate(tree, g, !side);
    }
    set_red(tree->root, FALSE);
}

static Block *
tree_min(Block *node)
{
    while (block_links(node)->child[TREE_LEFT] != NULL)
        node = block_links(node)->child[TREE_LEFT];
    return node;
}

static void
tree_transplant(Tree *tree, Block *u, Block *v)
{
    tree_replace_child(tree, block_links(u)->parent, u, v);
    if (v != NULL)
        block_links(v)->parent = block_links(u)->parent;
}

static void
tree_erase_fixup(Tree *tree, Block *x, Block *parent)
{
    while (x != tree->root && !is_red(x)) {
        /* x may be NULL; its sibling is not (the removed black node left a black debt). */
        int side =
            x == block_links(parent)->child[TREE_LEFT] ? TREE_LEFT : TREE_RIGHT; /* x's side */
        Block *w = block_links(parent)->child[!side];

        if (is_red(w)) {
            set_red(w, FALSE);
            set_red(parent, TRUE);
            tree_rotate(tree, parent, side);
            w = block_links(parent)->child[!side];
        }
        if (!is_red(block_links(w)->child[TREE_LEFT]) &&
            !is_red(block_links(w)->child[TREE_RIGHT])) {
            set_red(w, TRUE);
            x = parent;
            parent = block_links(x)->parent;
        } else {
            if (!is_red(block_links(w)->child[!side])) {
                set_red(block_links(w)->child[side], FALSE);
                set_red(w, TRUE);
                tree_rotate(tree, w, !side);
                w = block_links(parent)->child[!side];
            }
            set_red(w, is_red(parent));
            set_red(parent, FALSE);
            if (block_links(w)->child[!side] != NULL)
                set_red(block_links(w)->child[!side], FALSE);
            tree_rotate(tree, parent, side);
            x = tree->root;
            parent = NULL;
        }
    }
    if (x != NULL)
        set_red(x, FALSE);
}

void
fsim_pytorch_tree_erase(Tree *tree, Block *z)
{
    Block *y = z;
    Block *x;
    Block *x_parent;
    gboolean removed_red = is_red(y);

    g_assert((z->flags & BLOCK_IN_TREE) != 0);
    if (block_links(z)->child[TREE_LEFT] == NULL || block_links(z)->child[TREE_RIGHT] == NULL) {
        /* z's only child, or NULL, takes its place. */
        x = block_links(z)->child[TREE_LEFT] != NULL ? block_links(z)->child[TREE_LEFT]
                                                     : block_links(z)->child[TREE_RIGHT];
        x_parent = block_links(z)->parent;
        tree_transplant(tree, z, x);
    } else {
        y = tree_min(block_links(z)->child[TREE_RIGHT]);
        removed_red = is_red(y);
        x = block_links(y)->child[TREE_RIGHT];
        if (block_links(y)->parent == z) {
            x_parent = y;
        } else {
            x_parent = block_links(y)->parent;
            tree_transplant(tree, y, block_links(y)->child[TREE_RIGHT]);
            block_links(y)->child[TREE_RIGHT] = block_links(z)->child[TREE_RIGHT];
            block_links(block_links(y)->child[TREE_RIGHT])->parent = y;
        }
        tree_transplant(tree, z, y);
        block_links(y)->child[TREE_LEFT] = block_links(z)->child[TREE_LEFT];
        block_links(block_links(y)->child[TREE_LEFT])->parent = y;
        set_red(y, is_red(z));
    }
    if (!removed_red)
        tree_erase_fixup(tree, x, x_parent);
    z->flags &= ~(uint32_t)(BLOCK_IN_TREE | BLOCK_RED);
    block_links(z)->child[TREE_LEFT] = block_links(z)->child[TREE_RIGHT] = block_links(z)->parent =
        NULL;
    tree->count--;
}

Block *
fsim_pytorch_tree_first(const Tree *tree)
{
    return tree->root != NULL ? tree_min(tree->root) : NULL;
}

Block *
fsim_pytorch_tree_next(Block *node)
{
    Block *parent;

    if (block_links(node)->child[TREE_RIGHT] != NULL)
        return tree_min(block_links(node)->child[TREE_RIGHT]);
    parent = block_links(node)->parent;
    while (parent != NULL && node == block_links(parent)->child[TREE_RIGHT]) {
        node = parent;
        parent = block_links(parent)->parent;
    }
    return parent;
}

/* Red-black rules, order and parent links of a subtree; returns its black height, -1 if broken. */
static int
tree_check_subtree(const Block *node, const Block *parent, const Block *low, const Block *high)
{
    int left;
    int right;

    if (node == NULL)
        return 1;
    if (block_links(node)->parent != parent || (node->flags & BLOCK_IN_TREE) == 0)
        return -1;
    if ((low != NULL && !tree_less(low, node)) || (high != NULL && !tree_less(node, high)))
        return -1;
    if (is_red(node) && (is_red(block_links(node)->child[TREE_LEFT]) ||
                         is_red(block_links(node)->child[TREE_RIGHT])))
        return -1;
    left = tree_check_subtree(block_links(node)->child[TREE_LEFT], node, low, node);
    right = tree_check_subtree(block_links(node)->child[TREE_RIGHT], node, node, high);
    if (left < 0 || left != right)
        return -1;
    return left + (is_red(node) ? 0 : 1);
}

gboolean
fsim_pytorch_tree_valid(const Tree *tree)
{
    return !is_red(tree->root) && tree_check_subtree(tree->root, NULL, NULL, NULL) >= 0;
}

/* Whether @block is reachable in @tree (by a search on its own key). */
gboolean
fsim_pytorch_tree_contains(const Tree *tree, const Block *block)
{
    const Block *node = tree->root;

    while (node != NULL && node != block)
        node = block_links(node)->child[tree_less(block, node) ? TREE_LEFT : TREE_RIGHT];
    return node == block;
}
