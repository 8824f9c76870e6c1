/* SPDX-License-Identifier: MIT */
/*
 * The caching model's free-block set (src/policies/pytorch/free-set.h: a class set for the
 * blocks of at most 2 MiB, a size set for the others) against a plain size set holding the same
 * blocks: random insertions, erasures, best fits taken out as get_free_block() takes them,
 * finds, and the ordered walks (both ways, and back from a lower bound as release does), in a
 * set that stays split and in sets that turn mixed (a size not a multiple of 512, a class that
 * outgrows FSIM_CLASS_MAX_LEN).
 */
#include <glib.h>

#include "core/size-set.h"
#include "policies/pytorch/free-set.h"

#define N_BLOCKS 12000

typedef enum {
    MIX_NEVER,     /* multiples of 512 from 512 B to 4 MiB: both structures */
    MIX_ODD_SIZE,  /* the same, and one block of 1000 bytes a third of the way */
    MIX_FULL_CLASS /* mostly one size of 1 MiB: a class outgrows its bound */
} Mix;

typedef struct {
    Block *blocks;
    gboolean *cached;
    FreeSet *set;
    FsimSizeSet *model;
    GRand *rand;
} Fixture;

static uint64_t
random_size(Fixture *f, Mix mix)
{
    if (mix == MIX_FULL_CLASS && g_rand_int_range(f->rand, 0, 10) != 0)
        return 1u << 20;
    /* mostly small, a quarter over 2 MiB, a few of exactly 2 MiB */
    switch (g_rand_int_range(f->rand, 0, 8)) {
    case 0:
        return 2u << 20;
    case 1:
    case 2:
        return (uint64_t)g_rand_int_range(f->rand, 4097, 8193) * 512;
    default:
        return (uint64_t)g_rand_int_range(f->rand, 1, 64) * 512 *
               (uint64_t)g_rand_int_range(f->rand, 1, 65);
    }
}

/* The set's walks, both ways, and its own checks, against the model. */
static void
check_walks(Fixture *f)
{
    FreeCursor cursor;
    FsimSizeCursor at;
    gpointer want;
    Block *got;
    gsize n = 0;

    g_assert_null(fsim_pytorch_freeset_check(f->set));
    g_assert_cmpuint(freeset_count(f->set), ==, f->model->count);
    for (got = freeset_first(f->set, &cursor), want = fsim_size_set_first(f->model, &at);
         want != NULL;
         got = freeset_next(f->set, &cursor), want = fsim_size_set_next(f->model, &at)) {
        uint64_t size;
        uint64_t key;

        g_assert_true(got == want);
        freeset_key(f->set, &cursor, &size, &key);
        g_assert_cmpuint(size, ==, got->size);
        g_assert_cmpuint(key, ==, got->addr);
        n++;
    }
    g_assert_null(got);
    g_assert_cmpuint(n, ==, f->model->count);
    for (got = freeset_last(f->set, &cursor), want = fsim_size_set_last(f->model, &at);
         want != NULL;
         got = freeset_prev(f->set, &cursor), want = fsim_size_set_prev(f->model, &at))
        g_assert_true(got == want);
    g_assert_null(got);
}

/* A lower bound of @size, as get_free_block() asks it, then (release's walk) the blocks before
 * it, down to the first, or the last ones when there is none. */
static Block *
check_lower_bound(Fixture *f, uint64_t size, FreeCursor *cursor, FsimSizeCursor *at)
{
    Block *got = freeset_lower_bound(f->set, size, cursor);
    gpointer want = fsim_size_set_lower_bound(f->model, size, 0, at);
    FreeCursor back = *cursor;
    FsimSizeCursor back_at = *at;
    Block *b = got != NULL ? freeset_prev(f->set, &back) : freeset_last(f->set, &back);
    gpointer w = want != NULL ? fsim_size_set_prev(f->model, &back_at)
                              : fsim_size_set_last(f->model, &back_at);

    g_assert_true(got == want);
    for (int i = 0; i < 3 && w != NULL; i++) {
        g_assert_true(b == w);
        b = freeset_prev(f->set, &back);
        w = fsim_size_set_prev(f->model, &back_at);
    }
    if (w == NULL)
        g_assert_null(b);
    return got;
}

static void
random_step(Fixture *f, Mix mix, int step)
{
    guint i = (guint)g_rand_int_range(f->rand, 0, N_BLOCKS);
    Block *block = &f->blocks[i];
    FreeCursor cursor;
    FsimSizeCursor at;
    int op = g_rand_int_range(f->rand, 0, 100);

    if (!f->cached[i] && op < (step < 30000 ? 70 : 40)) {
        block->size = random_size(f, mix);
        block->addr = ((uint64_t)g_rand_int_range(f->rand, 0, 1 << 20) << 20) | i;
        freeset_insert(f->set, block);
        fsim_size_set_insert(f->model, block->size, block->addr, block);
        f->cached[i] = TRUE;
    } else if (f->cached[i] && op < 80) {
        g_assert_true(freeset_find(f->set, block, &cursor));
        g_assert_true(freeset_item(f->set, &cursor) == block);
        freeset_erase(f->set, block);
        fsim_size_set_erase(f->model, block->size, block->addr, block);
        f->cached[i] = FALSE;
        g_assert_false(freeset_find(f->set, block, &cursor));
    } else {
        /* a best fit taken out */
        Block *found = check_lower_bound(f, random_size(f, MIX_NEVER), &cursor, &at);

        if (found != NULL) {
            freeset_erase_at(f->set, &cursor);
            fsim_size_set_erase_at(f->model, &at);
            f->cached[found - f->blocks] = FALSE;
            g_assert_cmpuint(found->flags & BLOCK_IN_TREE, ==, 0);
        }
    }
}

static void
test_free_set_against_size_set(gconstpointer data)
{
    Mix mix = GPOINTER_TO_INT(data);
    Fixture f = {
        .blocks = g_new0(Block, N_BLOCKS),
        .cached = g_new0(gboolean, N_BLOCKS),
        .set = g_new0(FreeSet, 1),
        .model = g_new0(FsimSizeSet, 1),
        .rand = g_rand_new_with_seed(7 + (guint32)mix),
    };
    gboolean was_split = FALSE;

    for (int step = 0; step < 60000; step++) {
        if (mix == MIX_ODD_SIZE && step == 20000) {
            guint i = 0;

            while (f.cached[i])
                i++;
            f.blocks[i].size = 1000;
            f.blocks[i].addr = i;
            freeset_insert(f.set, &f.blocks[i]);
            fsim_size_set_insert(f.model, 1000, i, &f.blocks[i]);
            f.cached[i] = TRUE;
        }
        random_step(&f, mix, step);
        was_split |= f.set->small != NULL && f.set->big.count > 0;
        if (step % 3000 == 0)
            check_walks(&f);
    }
    check_walks(&f);
    g_assert_true(was_split);
    /* mixed sets keep everything in the size set, the others stay split */
    g_assert_cmpint(f.set->mixed != 0, ==, mix != MIX_NEVER);
    g_assert_cmpint(f.set->small == NULL, ==, mix != MIX_NEVER);
    freeset_clear(f.set);
    g_assert_cmpuint(freeset_count(f.set), ==, 0);
    g_assert_true(f.set->small == NULL && f.set->mixed == 0);
    fsim_size_set_clear(f.model);
    g_free(f.model);
    g_free(f.set);
    g_free(f.cached);
    g_free(f.blocks);
    g_rand_free(f.rand);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_data_func("/free-set/split", GINT_TO_POINTER(MIX_NEVER),
                         test_free_set_against_size_set);
    g_test_add_data_func("/free-set/mixed-by-odd-size", GINT_TO_POINTER(MIX_ODD_SIZE),
                         test_free_set_against_size_set);
    g_test_add_data_func("/free-set/mixed-by-full-class", GINT_TO_POINTER(MIX_FULL_CLASS),
                         test_free_set_against_size_set);
    return g_test_run();
}
