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
    else if (parent->left == old)
        parent->left = new_child;
    else
        parent->right = new_child;
}

static void
tree_rotate_left(Tree *tree, Block *x)
{
    Block *y = x->right;

    x->right = y->left;
    if (y->left != NULL)
        y->left->parent = x;
    y->parent = x->parent;
    tree_replace_child(tree, x->parent, x, y);
    y->left = x;
    x->parent = y;
}

static void
tree_rotate_right(Tree *tree, Block *x)
{
    Block *y = x->left;

    x->left = y->right;
    if (y->right != NULL)
        y->right->parent = x;
    y->parent = x->parent;
    tree_replace_child(tree, x->parent, x, y);
    y->right = x;
    x->parent = y;
}

void
fsim_pytorch_tree_insert(Tree *tree, Block *z)
{
    Block *parent = NULL;
    Block **link = &tree->root;

    g_assert((z->flags & BLOCK_IN_TREE) == 0);
    while (*link != NULL) {
        parent = *link;
        link = tree_less(z, parent) ? &parent->left : &parent->right;
    }
    z->parent = parent;
    z->left = z->right = NULL;
    z->flags |= BLOCK_RED | BLOCK_IN_TREE;
    *link = z;
    tree->count++;
    while (is_red(z->parent)) {
        Block *p = z->parent;
        Block *g = p->parent; /* exists: a red node is never the root */

        if (p == g->left) {
            Block *uncle = g->right;

            if (is_red(uncle)) {
                set_red(p, FALSE);
                set_red(uncle, FALSE);
                set_red(g, TRUE);
                z = g;
                continue;
            }
            if (z == p->right) {
                z = p;
                tree_rotate_left(tree, z);
                p = z->parent;
            }
            set_red(p, FALSE);
            set_red(g, TRUE);
            tree_rotate_right(tree, g);
        } else {
            Block *uncle = g->left;

            if (is_red(uncle)) {
                set_red(p, FALSE);
                set_red(uncle, FALSE);
                set_red(g, TRUE);
                z = g;
                continue;
            }
            if (z == p->left) {
                z = p;
                tree_rotate_right(tree, z);
                p = z->parent;
            }
            set_red(p, FALSE);
            set_red(g, TRUE);
            tree_rotate_left(tree, g);
        }
    }
    set_red(tree->root, FALSE);
}

static Block *
tree_min(Block *node)
{
    while (node->left != NULL)
        node = node->left;
    return node;
}

static void
tree_transplant(Tree *tree, Block *u, Block *v)
{
    tree_replace_child(tree, u->parent, u, v);
    if (v != NULL)
        v->parent = u->parent;
}

static void
tree_erase_fixup(Tree *tree, Block *x, Block *parent)
{
    while (x != tree->root && !is_red(x)) {
        /* x may be NULL; its sibling is not (the removed black node left a black debt). */
        if (x == parent->left) {
            Block *w = parent->right;

            if (is_red(w)) {
                set_red(w, FALSE);
                set_red(parent, TRUE);
                tree_rotate_left(tree, parent);
                w = parent->right;
            }
            if (!is_red(w->left) && !is_red(w->right)) {
                set_red(w, TRUE);
                x = parent;
                parent = x->parent;
            } else {
                if (!is_red(w->right)) {
                    set_red(w->left, FALSE);
                    set_red(w, TRUE);
                    tree_rotate_right(tree, w);
                    w = parent->right;
                }
                set_red(w, is_red(parent));
                set_red(parent, FALSE);
                if (w->right != NULL)
                    set_red(w->right, FALSE);
                tree_rotate_left(tree, parent);
                x = tree->root;
                parent = NULL;
            }
        } else {
            Block *w = parent->left;

            if (is_red(w)) {
                set_red(w, FALSE);
                set_red(parent, TRUE);
                tree_rotate_right(tree, parent);
                w = parent->left;
            }
            if (!is_red(w->left) && !is_red(w->right)) {
                set_red(w, TRUE);
                x = parent;
                parent = x->parent;
            } else {
                if (!is_red(w->left)) {
                    set_red(w->right, FALSE);
                    set_red(w, TRUE);
                    tree_rotate_left(tree, w);
                    w = parent->left;
                }
                set_red(w, is_red(parent));
                set_red(parent, FALSE);
                if (w->left != NULL)
                    set_red(w->left, FALSE);
                tree_rotate_right(tree, parent);
                x = tree->root;
                parent = NULL;
            }
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
    if (z->left == NULL) {
        x = z->right;
        x_parent = z->parent;
        tree_transplant(tree, z, z->right);
    } else if (z->right == NULL) {
        x = z->left;
        x_parent = z->parent;
        tree_transplant(tree, z, z->left);
    } else {
        y = tree_min(z->right);
        removed_red = is_red(y);
        x = y->right;
        if (y->parent == z) {
            x_parent = y;
        } else {
            x_parent = y->parent;
            tree_transplant(tree, y, y->right);
            y->right = z->right;
            y->right->parent = y;
        }
        tree_transplant(tree, z, y);
        y->left = z->left;
        y->left->parent = y;
        set_red(y, is_red(z));
    }
    if (!removed_red)
        tree_erase_fixup(tree, x, x_parent);
    z->flags &= ~(uint32_t)(BLOCK_IN_TREE | BLOCK_RED);
    z->left = z->right = z->parent = NULL;
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

    if (node->right != NULL)
        return tree_min(node->right);
    parent = node->parent;
    while (parent != NULL && node == parent->right) {
        node = parent;
        parent = parent->parent;
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
    if (node->parent != parent || (node->flags & BLOCK_IN_TREE) == 0)
        return -1;
    if ((low != NULL && !tree_less(low, node)) || (high != NULL && !tree_less(node, high)))
        return -1;
    if (is_red(node) && (is_red(node->left) || is_red(node->right)))
        return -1;
    left = tree_check_subtree(node->left, node, low, node);
    right = tree_check_subtree(node->right, node, node, high);
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
        node = tree_less(block, node) ? node->left : node->right;
    return node == block;
}
