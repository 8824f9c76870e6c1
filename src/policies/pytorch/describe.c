/* SPDX-License-Identifier: MIT */
/*
 * describe() for PyTorch's caching allocator: its segments, their blocks, and what
 * release_cached_blocks (empty_cache, and the last resort before an OOM) would give back now.
 *
 * A cudaMalloc'd segment is one segment; an expandable segment is reported as its contiguous
 * mapped ranges (as PyTorch's snapshots show it), its unmapped blocks left out.  A free block is
 * releasable as release_blocks() treats it: whole when it is a whole cudaMalloc'd segment (an
 * unsplit block); for an expandable segment, the whole pages inside it (unmap_block); nothing
 * otherwise, nor in a private pool that still has references.
 */
#include <glib.h>

#include "model.h"

static gint
segment_by_addr(gconstpointer a, gconstpointer b)
{
    const Segment *x = *(Segment *const *)a;
    const Segment *y = *(Segment *const *)b;

    return x->addr < y->addr ? -1 : x->addr > y->addr ? 1 : 0;
}

static inline gboolean
block_is_free(const Block *block)
{
    return (block->flags & (BLOCK_ALLOCATED | BLOCK_PENDING | BLOCK_UNMAPPED)) == 0;
}

/* The bytes of free @block that release_blocks() would give back. */
static uint64_t
block_releasable(const Block *block)
{
    const Segment *segment = block->segment;
    uint64_t begin, end;

    /* a private pool still referenced (a live CUDA graph, a MemPool) keeps everything */
    if (segment->pool->owner != NULL && segment->pool->owner->use_count > 0)
        return 0;
    if (!segment->expandable)
        return block_is_split(block) ? 0 : block->size;
    begin = (block->addr - segment->addr + segment->page - 1) / segment->page * segment->page;
    end = (block->addr + block->size - segment->addr) / segment->page * segment->page;
    return end > begin ? end - begin : 0;
}

static void
describe_segment(const Segment *segment, const FsimPolicyVisitor *visitor, gpointer data)
{
    FsimSegmentView view = {
        .stream = segment->set->stream,
        .pool = segment->pool->small ? FSIM_POOL_SMALL : FSIM_POOL_LARGE,
        .expandable = segment->expandable,
        .page_size = segment->expandable ? segment->page : 0,
        .private_pool = segment->pool->owner != NULL,
        .private_pool_id = segment->pool->owner != NULL ? segment->pool->owner->id : 0,
    };

    for (const Block *b = segment->head; b != NULL;) {
        const Block *end;

        if (block_unmapped(b)) {
            b = b->next;
            continue;
        }
        /* a mapped range: the blocks up to the next unmapped one */
        view.addr = b->addr;
        view.size = 0;
        for (end = b; end != NULL && !block_unmapped(end); end = end->next)
            view.size += end->size;
        visitor->segment(data, &view);
        for (; b != end; b = b->next) {
            FsimBlockView block = {.addr = b->addr, .size = b->size, .free = block_is_free(b)};

            block.releasable = block.free ? block_releasable(b) : 0;
            visitor->block(data, &block);
        }
    }
}

void
fsim_pytorch_describe(const FsimPolicy *self, const FsimPolicyVisitor *visitor, gpointer data)
{
    const Pytorch *pt = pytorch_from_const_policy(self);
    g_autoptr(GPtrArray) segments = g_ptr_array_sized_new(pt->n_segments);

    for (Segment *s = pt->segments; s != NULL; s = s->next_segment)
        g_ptr_array_add(segments, s);
    g_ptr_array_sort(segments, segment_by_addr);
    for (guint i = 0; i < segments->len; i++)
        describe_segment(g_ptr_array_index(segments, i), visitor, data);
}
