/* SPDX-License-Identifier: MIT */
/*
 * A simulated run written as a PyTorch memory snapshot.  See memviz.h for the format.
 *
 * The pickle is streamed: the root dict is written with `device_traces` first (a dict's order
 * means nothing to PyTorch, MemoryViz or fragsim's reader), so trace entries go out as events
 * happen and memory does not grow with the trace; `segments` and `allocator_settings` follow at
 * the end, from the final state.
 *
 * Ordering entries as PyTorch does.  The engine reports a driver call while the policy serves an
 * event, before it knows the event's stream, and before the block exists: calls are held back
 * and written (with the event's stream) just before the `alloc` that caused them, just after the
 * `free_completed` whose release caused them, or at the end of the event (empty_cache, an OOM).
 * A free written as `free_requested` immediately followed by its `free_completed` is an ordinary
 * free; a deferred one (stream-ordered, or --free-delay) has its `free_completed` later.
 */
#include "fragsim/memviz.h"

#include <glib.h>
#include <glib/gstdio.h>

#include <errno.h>
#include <gio/gunixoutputstream.h>
#include <string.h>
#include <sys/stat.h>

#include "fragsim/alloc-conf.h"
#include "fragsim/device.h"
#include "fragsim/policy.h"

#include "readers/pickle.h"

typedef struct {
    FsimDeviceCall call;
    FsimAddr addr;
    uint64_t size;
} PendingCall;

typedef struct {
    FsimAddr addr;
    uint64_t size;
    uint64_t requested;
    uint64_t stream;
    uint32_t stack;          /* the allocation's stack, 0 = none */
    gboolean free_requested; /* written; the memory is not yet reusable */
} LiveBlock;

typedef struct {
    FsimAddr start, end;
    uint64_t stream;
    gboolean expandable;
    FsimPool pool;
} Segment;

/* A block of the final state, from the engine's live table. */
typedef struct {
    uint64_t id;
    FsimAddr addr;
    uint64_t size;
    uint64_t requested;
    gboolean pending;
    uint32_t stack;
} FinalBlock;

/* The snapshot's file: written as a temporary file beside @path, renamed to @path once complete
 * (memviz_file_commit()), removed when the export ends otherwise (memviz_file_clear()). */
typedef struct {
    char *path;
    char *tmp_path; /* NULL once renamed or removed */
    GOutputStream *stream;
    FsimPickleWriter *writer;
} MemvizFile;

struct FsimMemvizExport {
    MemvizFile file;
    FsimEngine *engine;
    uint32_t device_index;
    gboolean done;
    GArray *pending;        /* PendingCall */
    GHashTable *live;       /* uint64_t id -> LiveBlock */
    GTree *segments;        /* cudaMalloc'd segments by start: Segment */
    GTree *mapped;          /* mapped ranges by start, disjoint and coalesced: Segment */
    GArray *seeds;          /* Segment: the trace's segments at its start, until checked */
    const FsimTrace *trace; /* (nullable) the replayed trace: allocation stacks */
    uint32_t stack;         /* the stack of the allocation being served (segment actions) */
    gboolean seeds_checked;
    FsimTime now;
};

static Segment *
segment_new(FsimAddr start, FsimAddr end, uint64_t stream, gboolean expandable, FsimPool pool)
{
    Segment *s = g_new0(Segment, 1);

    s->start = start;
    s->end = end;
    s->stream = stream;
    s->expandable = expandable;
    s->pool = pool;
    return s;
}

/* Add [start, end) to the mapped ranges, merging with overlapping and adjacent ones. */
static void
mapped_add(GTree *mapped, FsimAddr start, FsimAddr end, uint64_t stream, FsimPool pool)
{
    GTreeNode *node = g_tree_lower_bound(mapped, &start);
    GTreeNode *prev = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(mapped);
    g_autoptr(GPtrArray) absorbed = g_ptr_array_new();

    if (prev != NULL && ((Segment *)g_tree_node_value(prev))->end >= start)
        g_ptr_array_add(absorbed, g_tree_node_value(prev));
    for (; node != NULL && ((Segment *)g_tree_node_value(node))->start <= end;
         node = g_tree_node_next(node))
        g_ptr_array_add(absorbed, g_tree_node_value(node));
    for (guint i = 0; i < absorbed->len; i++) {
        const Segment *s = absorbed->pdata[i];

        start = MIN(start, s->start);
        end = MAX(end, s->end);
        if (i == 0) {
            stream = s->stream;
            pool = s->pool != FSIM_POOL_UNKNOWN ? s->pool : pool;
        }
    }
    for (guint i = 0; i < absorbed->len; i++) {
        FsimAddr key = ((Segment *)absorbed->pdata[i])->start;

        g_tree_remove(mapped, &key);
    }
    {
        Segment *s = segment_new(start, end, stream, TRUE, pool);

        g_tree_insert(mapped, &s->start, s);
    }
}

/* Remove [start, end) from the mapped ranges, splitting those it cuts. */
static void
mapped_remove(GTree *mapped, FsimAddr start, FsimAddr end)
{
    GTreeNode *node = g_tree_lower_bound(mapped, &start);
    GTreeNode *prev = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(mapped);
    g_autoptr(GArray) hit = g_array_new(FALSE, FALSE, sizeof(Segment));

    if (prev != NULL && ((Segment *)g_tree_node_value(prev))->end > start)
        g_array_append_val(hit, *(Segment *)g_tree_node_value(prev));
    for (; node != NULL && ((Segment *)g_tree_node_value(node))->start < end;
         node = g_tree_node_next(node))
        g_array_append_val(hit, *(Segment *)g_tree_node_value(node));
    for (guint i = 0; i < hit->len; i++) {
        const Segment *s = &g_array_index(hit, Segment, i);

        g_tree_remove(mapped, &s->start);
        if (s->start < start) {
            Segment *left = segment_new(s->start, start, s->stream, TRUE, s->pool);

            g_tree_insert(mapped, &left->start, left);
        }
        if (s->end > end) {
            Segment *right = segment_new(end, s->end, s->stream, TRUE, s->pool);

            g_tree_insert(mapped, &right->start, right);
        }
    }
}

/* ---- trace entries ------------------------------------------------------------------------- */

/* `frames`: the allocation's stack as PyTorch records it, innermost first ([] without one). */
static void
write_frames(FsimMemvizExport *x, uint32_t stack)
{
    FsimPickleWriter *w = x->file.writer;
    gsize n = 0;
    const FsimFrame *frames = x->trace != NULL ? fsim_trace_stack(x->trace, stack, &n) : NULL;

    fsim_pickle_writer_str(w, "frames");
    fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
    for (gsize i = 0; i < n; i++) {
        fsim_pickle_writer_begin(w, FSIM_PICKLE_DICT);
        fsim_pickle_writer_str(w, "filename");
        fsim_pickle_writer_str(w, frames[i].filename);
        fsim_pickle_writer_str(w, "line");
        fsim_pickle_writer_uint(w, frames[i].line);
        fsim_pickle_writer_str(w, "name");
        fsim_pickle_writer_str(w, frames[i].name);
        fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
    }
    fsim_pickle_writer_end(w, FSIM_PICKLE_LIST);
}

static void
write_entry(FsimMemvizExport *x, const char *action, gboolean has_addr, FsimAddr addr,
            uint64_t size, uint64_t stream, gboolean has_device_free, uint64_t device_free,
            uint32_t stack)
{
    FsimPickleWriter *w = x->file.writer;

    fsim_pickle_writer_begin(w, FSIM_PICKLE_DICT);
    fsim_pickle_writer_str(w, "action");
    fsim_pickle_writer_str(w, action);
    if (has_addr) {
        fsim_pickle_writer_str(w, "addr");
        fsim_pickle_writer_uint(w, addr);
    }
    fsim_pickle_writer_str(w, "size");
    fsim_pickle_writer_uint(w, size);
    fsim_pickle_writer_str(w, "stream");
    fsim_pickle_writer_uint(w, stream);
    if (has_device_free) {
        fsim_pickle_writer_str(w, "device_free");
        fsim_pickle_writer_uint(w, device_free);
    }
    fsim_pickle_writer_str(w, "time_us");
    fsim_pickle_writer_uint(w, x->now / 1000);
    write_frames(x, stack);
    fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
}

/* Write the driver calls held back, as segment actions on @stream, and track the segments. */
static void
flush_calls(FsimMemvizExport *x, uint64_t stream)
{
    for (guint i = 0; i < x->pending->len; i++) {
        const PendingCall *c = &g_array_index(x->pending, PendingCall, i);

        switch (c->call) {
        case FSIM_CALL_MEM_ALLOC: {
            Segment *s = segment_new(c->addr, c->addr + c->size, stream, FALSE, FSIM_POOL_UNKNOWN);

            g_tree_replace(x->segments, &s->start, s);
            write_entry(x, "segment_alloc", TRUE, c->addr, c->size, stream, FALSE, 0, x->stack);
            break;
        }
        case FSIM_CALL_MEM_FREE: {
            FsimAddr key = c->addr;

            g_tree_remove(x->segments, &key);
            write_entry(x, "segment_free", TRUE, c->addr, c->size, stream, FALSE, 0, x->stack);
            break;
        }
        case FSIM_CALL_MAP:
            mapped_add(x->mapped, c->addr, c->addr + c->size, stream, FSIM_POOL_UNKNOWN);
            write_entry(x, "segment_map", TRUE, c->addr, c->size, stream, FALSE, 0, x->stack);
            break;
        case FSIM_CALL_UNMAP:
            mapped_remove(x->mapped, c->addr, c->addr + c->size);
            write_entry(x, "segment_unmap", TRUE, c->addr, c->size, stream, FALSE, 0, x->stack);
            break;
        default:
            /* Address reservations are no memory and PyTorch does not record them. */
            break;
        }
    }
    g_array_set_size(x->pending, 0);
}

static void
observe_seed_segment(gpointer data, const FsimEngine *engine, const FsimSeedSegment *seed)
{
    FsimMemvizExport *x = data;
    Segment s = {seed->addr, seed->addr + seed->size, seed->stream, seed->expandable, seed->pool};

    (void)engine;
    g_array_append_val(x->seeds, s);
}

static gboolean
seed_covers(const GArray *seeds, FsimAddr start, FsimAddr end)
{
    for (guint i = 0; i < seeds->len; i++) {
        const Segment *s = &g_array_index(seeds, Segment, i);

        if (s->start <= start && end <= s->end)
            return TRUE;
    }
    return FALSE;
}

/*
 * Once seeding is over (before anything else is recorded): take the trace's segments at its
 * start as the memory the policy holds, if the policy placed every block alive then inside them
 * (policies with a seed operation rebuild the recorded segments, at the recorded addresses when
 * the device has them free).  Otherwise the policy holds that memory elsewhere, which the device
 * does not report while seeding; it is then found from the blocks at the end
 * (finish_uncovered()).
 */
static void
check_seeds(FsimMemvizExport *x)
{
    GHashTableIter iter;
    gpointer value;
    gboolean all_inside = TRUE;

    const FsimInitialState *state = fsim_engine_config(x->engine)->initial_state;

    if (x->seeds_checked)
        return;
    x->seeds_checked = TRUE;
    /* Blocks freed before the trace began but not yet reusable: their free_requested is not
     * part of this run, only their free_completed. */
    for (gsize i = 0; state != NULL && i < state->n_blocks; i++) {
        LiveBlock *b = g_hash_table_lookup(x->live, &state->blocks[i].id);

        if (b != NULL && state->blocks[i].pending_free)
            b->free_requested = TRUE;
    }
    g_hash_table_iter_init(&iter, x->live);
    while (all_inside && g_hash_table_iter_next(&iter, NULL, &value)) {
        const LiveBlock *b = value;

        all_inside = seed_covers(x->seeds, b->addr, b->addr + b->size);
    }
    if (!all_inside || fsim_engine_policy(x->engine)->ops->seed == NULL) {
        if (x->seeds->len > 0)
            g_debug("memviz: the policy did not keep the trace's initial segments");
        g_array_set_size(x->seeds, 0);
        return;
    }
    for (guint i = 0; i < x->seeds->len; i++) {
        const Segment *s = &g_array_index(x->seeds, Segment, i);

        if (s->expandable) {
            mapped_add(x->mapped, s->start, s->end, s->stream, s->pool);
        } else {
            Segment *copy = g_memdup2(s, sizeof(*s));

            g_tree_replace(x->segments, &copy->start, copy);
        }
    }
    g_array_set_size(x->seeds, 0);
}

/* An observer of the replay starts so: nothing once the export is done; else the seeded state
 * written first (check_seeds()) and the clock set to @engine's (the time of the event it
 * handles).  Returns: the export, NULL when done. */
static FsimMemvizExport *
memviz_active(gpointer data, const FsimEngine *engine)
{
    FsimMemvizExport *x = data;

    if (x->done)
        return NULL;
    check_seeds(x);
    x->now = fsim_engine_counters(engine)->now;
    return x;
}

static void
observe_device_call(gpointer data, const FsimEngine *engine, FsimDeviceCall call, FsimAddr addr,
                    uint64_t size)
{
    FsimMemvizExport *x = memviz_active(data, engine);
    PendingCall c = {call, addr, size};

    if (x == NULL)
        return;
    /* A cudaMalloc holds whole pages: the segment is as large as the memory it takes. */
    if (call == FSIM_CALL_MEM_ALLOC || call == FSIM_CALL_MEM_FREE)
        c.size = fsim_device_round(fsim_engine_device(engine), size);
    g_array_append_val(x->pending, c);
}

/* The stack of block @id of the trace's initial state, 0 when unknown. */
static uint32_t
seed_stack(const FsimMemvizExport *x, uint64_t id)
{
    const FsimInitialState *state =
        x->trace != NULL ? fsim_trace_initial_state(x->trace, x->device_index) : NULL;

    for (gsize i = 0; state != NULL && i < state->n_blocks; i++) {
        if (state->blocks[i].id == id)
            return state->blocks[i].stack;
    }
    return 0;
}

static void
observe_alloc(gpointer data, const FsimEngine *engine, const FsimEvent *ev, uint64_t id,
              const FsimBlock *block, uint64_t requested)
{
    FsimMemvizExport *x = data;
    LiveBlock *live = g_new0(LiveBlock, 1);
    uint64_t *key = g_new(uint64_t, 1);

    (void)engine;
    if (x->done) {
        g_free(live);
        g_free(key);
        return;
    }
    if (ev != NULL)
        check_seeds(x);
    live->addr = block->addr;
    live->size = block->size;
    live->requested = requested;
    live->stream = ev != NULL ? ev->stream : 0;
    live->stack = ev != NULL ? ev->stack : seed_stack(x, id);
    *key = id;
    g_hash_table_replace(x->live, key, live);
    /* A seeded block (ev NULL) predates the trace: it is in the final state only. */
    if (ev == NULL)
        return;
    x->now = ev->time;
    x->stack = ev->stack;
    flush_calls(x, ev->stream);
    write_entry(x, "alloc", TRUE, block->addr, requested, ev->stream, FALSE, 0, ev->stack);
}

static void
observe_release(gpointer data, const FsimEngine *engine, uint64_t id, const FsimBlock *block,
                uint64_t requested)
{
    FsimMemvizExport *x = memviz_active(data, engine);
    LiveBlock *live;

    if (x == NULL)
        return;
    live = g_hash_table_lookup(x->live, &id);
    if (live == NULL)
        return;
    if (!live->free_requested)
        write_entry(x, "free_requested", TRUE, block->addr, requested, live->stream, FALSE, 0,
                    live->stack);
    write_entry(x, "free_completed", TRUE, block->addr, requested, live->stream, FALSE, 0,
                live->stack);
    x->stack = live->stack;
    flush_calls(x, live->stream);
    g_hash_table_remove(x->live, &id);
}

static void
observe_oom(gpointer data, const FsimEngine *engine, const FsimOomRecord *oom)
{
    FsimMemvizExport *x = memviz_active(data, engine);

    if (x == NULL)
        return;
    /* What the policy released trying to make room comes first, as in PyTorch. */
    flush_calls(x, oom->stream);
    write_entry(x, "oom", FALSE, 0, oom->size, oom->stream, TRUE, oom->device_free_bytes,
                oom->stack);
}

static void
observe_event(gpointer data, const FsimEngine *engine, const FsimEvent *ev)
{
    FsimMemvizExport *x = memviz_active(data, engine);

    if (x == NULL)
        return;
    if (ev->kind == FSIM_EV_FREE) {
        /* Not released at once (deferred): the program's free comes now, the completion later.
         * A free released at once was written by observe_release(). */
        LiveBlock *live = g_hash_table_lookup(x->live, &ev->id);

        if (live != NULL && !live->free_requested) {
            live->free_requested = TRUE;
            write_entry(x, "free_requested", TRUE, live->addr, live->requested, live->stream, FALSE,
                        0, live->stack);
        }
    }
    x->stack = 0;
    flush_calls(x, ev->stream);
}

static const FsimObserver memviz_observer = {
    .event = observe_event,
    .alloc = observe_alloc,
    .release = observe_release,
    .oom = observe_oom,
    .device_call = observe_device_call,
    .seed_segment = observe_seed_segment,
};

/* ---- lifecycle ----------------------------------------------------------------------------- */

/* The process's umask (umask() can only be read by setting it). */
static mode_t
current_umask(void)
{
    mode_t mask = umask(0022);

    umask(mask);
    return mask;
}

/* Create the temporary file beside @path and a pickle writer on it. */
static gboolean
memviz_file_open(MemvizFile *f, const char *path, GError **error)
{
    int fd;

    f->path = g_strdup(path);
    f->tmp_path = g_strdup_printf("%s.tmp-XXXXXX", path);
    fd = g_mkstemp(f->tmp_path);
    if (fd < 0) {
        int saved = errno;

        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: cannot create the snapshot: %s", path,
                    g_strerror(saved));
        g_clear_pointer(&f->tmp_path, g_free);
        return FALSE;
    }
    /* g_mkstemp() creates the file 0600; the snapshot is an output like any other. */
    if (fchmod(fd, 0666 & ~current_umask()) != 0)
        g_debug("memviz: %s: fchmod: %s", f->tmp_path, g_strerror(errno));
    f->stream = g_unix_output_stream_new(fd, TRUE);
    f->writer = fsim_pickle_writer_new(f->stream);
    return TRUE;
}

static void
memviz_file_remove_tmp(MemvizFile *f)
{
    if (f->tmp_path != NULL) {
        (void)g_unlink(f->tmp_path);
        g_clear_pointer(&f->tmp_path, g_free);
    }
}

/* Flush the complete snapshot and rename it to its path; on failure remove it. */
static gboolean
memviz_file_commit(MemvizFile *f, GError **error)
{
    g_autoptr(GError) local_error = NULL;

    if (!fsim_pickle_writer_finish(f->writer, &local_error) ||
        !g_output_stream_close(f->stream, NULL, &local_error) ||
        g_rename(f->tmp_path, f->path) != 0) {
        int saved = errno;

        g_set_error(error, FSIM_ERROR, FSIM_ERROR_IO, "%s: cannot write the snapshot: %s", f->path,
                    local_error != NULL ? local_error->message : g_strerror(saved));
        memviz_file_remove_tmp(f);
        return FALSE;
    }
    g_clear_pointer(&f->tmp_path, g_free);
    return TRUE;
}

/* Close the file, removing it unless it was committed. */
static void
memviz_file_clear(MemvizFile *f)
{
    g_clear_pointer(&f->writer, fsim_pickle_writer_free);
    if (f->stream != NULL) {
        (void)g_output_stream_close(f->stream, NULL, NULL);
        g_clear_object(&f->stream);
    }
    memviz_file_remove_tmp(f);
    g_clear_pointer(&f->path, g_free);
}

void
fsim_memviz_export_set_trace(FsimMemvizExport *exporter, const FsimTrace *trace)
{
    g_return_if_fail(exporter != NULL);
    exporter->trace = trace;
}

FsimMemvizExport *
fsim_memviz_export_new(const char *path, FsimEngine *engine, uint32_t device_index, GError **error)
{
    g_autoptr(FsimMemvizExport) x = NULL;

    g_return_val_if_fail(path != NULL && engine != NULL, NULL);
    x = g_new0(FsimMemvizExport, 1);
    if (!memviz_file_open(&x->file, path, error))
        return NULL;
    x->engine = engine;
    x->device_index = device_index;
    x->pending = g_array_new(FALSE, FALSE, sizeof(PendingCall));
    x->live = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    x->segments = g_tree_new_full(fsim_addr_compare, NULL, NULL, g_free);
    x->mapped = g_tree_new_full(fsim_addr_compare, NULL, NULL, g_free);
    x->seeds = g_array_new(FALSE, FALSE, sizeof(Segment));
    fsim_pickle_writer_begin(x->file.writer, FSIM_PICKLE_DICT);
    fsim_pickle_writer_str(x->file.writer, "device_traces");
    fsim_pickle_writer_begin(x->file.writer, FSIM_PICKLE_LIST);
    for (uint32_t d = 0; d < device_index; d++) {
        fsim_pickle_writer_begin(x->file.writer, FSIM_PICKLE_LIST);
        fsim_pickle_writer_end(x->file.writer, FSIM_PICKLE_LIST);
    }
    fsim_pickle_writer_begin(x->file.writer, FSIM_PICKLE_LIST);
    fsim_engine_add_observer(engine, &memviz_observer, x);
    return g_steal_pointer(&x);
}

const char *
fsim_memviz_export_path(const FsimMemvizExport *exporter)
{
    return exporter->file.path;
}

/* Whether [start, end) lies inside one segment of @tree. */
static gboolean
covered_by(GTree *tree, FsimAddr start, FsimAddr end)
{
    FsimAddr key = start + 1;
    GTreeNode *node = g_tree_lower_bound(tree, &key);
    GTreeNode *prev = node != NULL ? g_tree_node_previous(node) : g_tree_node_last(tree);
    const Segment *s = prev != NULL ? g_tree_node_value(prev) : NULL;

    return s != NULL && s->start <= start && end <= s->end;
}

/*
 * Blocks alive at trace start that a policy without a seed operation placed in memory taken
 * while seeding (which the device does not report): their pages are memory held since before
 * the trace.  They are added as mapped ranges, rounded to the device's pages and coalesced, so
 * that every block is in a segment and the snapshot reads back with the same initial state.
 */
static void
finish_uncovered(FsimMemvizExport *x, GArray *blocks)
{
    const FsimDevice *device = fsim_engine_device(x->engine);
    uint64_t page = device->spec.granularity;

    for (guint i = 0; i < blocks->len; i++) {
        const FinalBlock *b = &g_array_index(blocks, FinalBlock, i);
        const LiveBlock *live = g_hash_table_lookup(x->live, &b->id);

        if (covered_by(x->segments, b->addr, b->addr + b->size) ||
            covered_by(x->mapped, b->addr, b->addr + b->size))
            continue;
        g_debug("memviz: block 0x%" G_GINT64_MODIFIER "x (%" G_GUINT64_FORMAT
                " bytes) is in no segment the device reported",
                b->addr, b->size);
        mapped_add(x->mapped, b->addr / page * page, (b->addr + b->size + page - 1) / page * page,
                   live != NULL ? live->stream : 0, FSIM_POOL_UNKNOWN);
    }
}

static gboolean
collect_segment(gpointer key, gpointer value, gpointer data)
{
    (void)key;
    g_ptr_array_add(data, value);
    return FALSE;
}

static gint
segment_by_start(gconstpointer a, gconstpointer b)
{
    return fsim_compare_u64((*(const Segment *const *)a)->start,
                            (*(const Segment *const *)b)->start);
}

static void
collect_block(gpointer data, uint64_t id, const FsimBlock *block, uint64_t requested,
              uint64_t stream)
{
    gpointer *state = data;
    GArray *blocks = state[0];
    GHashTable *live = state[1];
    const LiveBlock *info = g_hash_table_lookup(live, &id);
    FinalBlock b = {id,
                    block->addr,
                    block->size,
                    requested,
                    info != NULL && info->free_requested,
                    info != NULL ? info->stack : 0};

    (void)stream;
    g_array_append_val(blocks, b);
}

static void
write_block(FsimMemvizExport *x, FsimAddr addr, uint64_t size, uint64_t requested,
            const char *state, uint32_t stack)
{
    FsimPickleWriter *w = x->file.writer;

    fsim_pickle_writer_begin(w, FSIM_PICKLE_DICT);
    fsim_pickle_writer_str(w, "address");
    fsim_pickle_writer_uint(w, addr);
    fsim_pickle_writer_str(w, "size");
    fsim_pickle_writer_uint(w, size);
    fsim_pickle_writer_str(w, "requested_size");
    fsim_pickle_writer_uint(w, requested);
    fsim_pickle_writer_str(w, "state");
    fsim_pickle_writer_str(w, state);
    write_frames(x, stack);
    fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
}

/*
 * PyTorch's pool of a segment whose pool the simulation does not say: small-pool segments are
 * 2 MiB cudaMallocs, and expandable small-pool ranges are made of 2 MiB pages where large ones
 * are made of 20 MiB pages.
 */
static gboolean
segment_is_small(const Segment *s)
{
    uint64_t size = s->end - s->start;

    if (s->pool != FSIM_POOL_UNKNOWN)
        return s->pool == FSIM_POOL_SMALL;
    if (s->expandable)
        return size % (20 * FSIM_MiB) != 0;
    return size <= 2 * FSIM_MiB;
}

/* A range of a private pool's memory at the end (describe()), for `segment_pool_id`. */
typedef struct {
    FsimAddr start, end;
    uint64_t pool_id;
} PoolRange;

static void
pools_segment(gpointer data, const FsimSegmentView *view)
{
    GArray *ranges = data;
    PoolRange r = {view->addr, view->addr + view->size, view->private_pool_id};

    if (view->private_pool)
        g_array_append_val(ranges, r);
}

static void
pools_block(gpointer data, const FsimBlockView *view)
{
    (void)data;
    (void)view;
}

/* The private pool holding @addr at the end (in @pools: PoolRange), 0 for the default pools. */
static uint64_t
pool_of(const GArray *pools, FsimAddr addr)
{
    for (guint i = 0; i < pools->len; i++) {
        const PoolRange *r = &g_array_index(pools, PoolRange, i);

        if (addr >= r->start && addr < r->end)
            return r->pool_id;
    }
    return 0;
}

/* One segment with its blocks; @next is the first block not yet placed (blocks by address);
 * @pools: the private pools' memory (PoolRange). */
static void
write_segment(FsimMemvizExport *x, const Segment *s, GArray *blocks, guint *next,
              const GArray *pools)
{
    FsimPickleWriter *w = x->file.writer;
    uint64_t allocated = 0, active = 0, requested = 0;
    guint first = *next, last;
    FsimAddr cursor = s->start;

    while (*next < blocks->len && g_array_index(blocks, FinalBlock, *next).addr < s->end) {
        const FinalBlock *b = &g_array_index(blocks, FinalBlock, *next);

        if (!b->pending)
            allocated += b->size;
        active += b->size;
        requested += b->requested;
        (*next)++;
    }
    last = *next;
    fsim_pickle_writer_begin(w, FSIM_PICKLE_DICT);
    fsim_pickle_writer_str(w, "device");
    fsim_pickle_writer_uint(w, x->device_index);
    fsim_pickle_writer_str(w, "address");
    fsim_pickle_writer_uint(w, s->start);
    fsim_pickle_writer_str(w, "total_size");
    fsim_pickle_writer_uint(w, s->end - s->start);
    fsim_pickle_writer_str(w, "allocated_size");
    fsim_pickle_writer_uint(w, allocated);
    fsim_pickle_writer_str(w, "active_size");
    fsim_pickle_writer_uint(w, active);
    fsim_pickle_writer_str(w, "requested_size");
    fsim_pickle_writer_uint(w, requested);
    fsim_pickle_writer_str(w, "stream");
    fsim_pickle_writer_uint(w, s->stream);
    fsim_pickle_writer_str(w, "segment_type");
    fsim_pickle_writer_str(w, segment_is_small(s) ? "small" : "large");
    /* PyTorch's MempoolId_t pair, as the reader folds it (first << 32 | second) */
    fsim_pickle_writer_str(w, "segment_pool_id");
    fsim_pickle_writer_begin(w, FSIM_PICKLE_TUPLE);
    fsim_pickle_writer_int(w, (int64_t)(pool_of(pools, s->start) >> 32));
    fsim_pickle_writer_int(w, (int64_t)(pool_of(pools, s->start) & 0xffffffffu));
    fsim_pickle_writer_end(w, FSIM_PICKLE_TUPLE);
    fsim_pickle_writer_str(w, "is_expandable");
    fsim_pickle_writer_bool(w, s->expandable);
    fsim_pickle_writer_str(w, "frames");
    fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
    fsim_pickle_writer_end(w, FSIM_PICKLE_LIST);
    fsim_pickle_writer_str(w, "blocks");
    fsim_pickle_writer_begin(w, FSIM_PICKLE_LIST);
    for (guint i = first; i < last; i++) {
        const FinalBlock *b = &g_array_index(blocks, FinalBlock, i);
        FsimAddr start = MAX(b->addr, s->start);

        if (start > cursor)
            write_block(x, cursor, start - cursor, 0, "inactive", 0);
        write_block(x, b->addr, b->size, b->requested,
                    b->pending ? "active_pending_free" : "active_allocated", b->stack);
        cursor = MAX(cursor, b->addr + b->size);
    }
    if (cursor < s->end)
        write_block(x, cursor, s->end - cursor, 0, "inactive", 0);
    fsim_pickle_writer_end(w, FSIM_PICKLE_LIST);
    fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
}

/* The settings PyTorch would have recorded for the run: its caching or expandable policy's
 * PYTORCH_CUDA_ALLOC_CONF (what the reader applies when the export is replayed or validated),
 * and the defaults for the other policies, which have none. */
static void
write_settings(FsimMemvizExport *x)
{
    FsimPickleWriter *w = x->file.writer;
    const FsimRunConfig *config = fsim_engine_config(x->engine);
    const char *policy = fsim_engine_policy(x->engine)->ops->name;
    gboolean expandable = strcmp(policy, "expandable") == 0;
    g_autofree char *text = NULL;
    FsimAllocConf conf;

    fsim_alloc_conf_init(&conf);
    /* The engine has already loaded this group without error when the policy started. */
    if ((expandable || strcmp(policy, "caching") == 0) &&
        !fsim_alloc_conf_load(&conf, config->config, policy, NULL))
        fsim_alloc_conf_init(&conf);
    conf.expandable_segments = conf.expandable_segments || expandable;
    text = fsim_alloc_conf_to_string(&conf);
    fsim_pickle_writer_begin(w, FSIM_PICKLE_DICT);
    fsim_pickle_writer_str(w, "PYTORCH_CUDA_ALLOC_CONF");
    fsim_pickle_writer_str(w, text);
    fsim_pickle_writer_str(w, "max_split_size");
    fsim_pickle_writer_int(
        w, conf.max_split_size > (uint64_t)G_MAXINT64 ? -1 : (int64_t)conf.max_split_size);
    fsim_pickle_writer_str(w, "garbage_collection_threshold");
    fsim_pickle_writer_double(w, conf.garbage_collection_threshold);
    fsim_pickle_writer_str(w, "expandable_segments");
    fsim_pickle_writer_bool(w, conf.expandable_segments);
    fsim_pickle_writer_str(w, "fragsim_policy");
    fsim_pickle_writer_str(w, policy);
    fsim_pickle_writer_str(w, "fragsim_device");
    fsim_pickle_writer_str(w, config->device.name);
    fsim_pickle_writer_end(w, FSIM_PICKLE_DICT);
}

gboolean
fsim_memviz_export_finish(FsimMemvizExport *x, GError **error)
{
    g_autoptr(GPtrArray) segments = g_ptr_array_new();
    g_autoptr(GArray) blocks = g_array_new(FALSE, FALSE, sizeof(FinalBlock));
    g_autoptr(GArray) pools = g_array_new(FALSE, FALSE, sizeof(PoolRange));
    gpointer state[2] = {blocks, x->live};
    guint next = 0;

    g_return_val_if_fail(x != NULL && !x->done, FALSE);
    check_seeds(x);
    x->done = TRUE;
    flush_calls(x, 0);
    fsim_pickle_writer_end(x->file.writer, FSIM_PICKLE_LIST); /* this device's entries */
    fsim_pickle_writer_end(x->file.writer, FSIM_PICKLE_LIST); /* device_traces */
    fsim_engine_foreach_live(x->engine, collect_block, state);
    finish_uncovered(x, blocks);
    if (fsim_engine_policy(x->engine)->ops->describe != NULL) {
        const FsimPolicy *policy = fsim_engine_policy(x->engine);
        const FsimPolicyVisitor visitor = {pools_segment, pools_block};

        policy->ops->describe(policy, &visitor, pools);
    }
    g_tree_foreach(x->segments, collect_segment, segments);
    g_tree_foreach(x->mapped, collect_segment, segments);
    g_ptr_array_sort(segments, segment_by_start);
    fsim_pickle_writer_str(x->file.writer, "segments");
    fsim_pickle_writer_begin(x->file.writer, FSIM_PICKLE_LIST);
    for (guint i = 0; i < segments->len; i++) {
        const Segment *s = segments->pdata[i];

        /* Blocks below this segment belong to none (never the case with the built-in
         * policies): they are left out rather than put in the wrong segment. */
        while (next < blocks->len && g_array_index(blocks, FinalBlock, next).addr < s->start) {
            g_debug("memviz: block at 0x%" G_GINT64_MODIFIER "x is in no segment",
                    g_array_index(blocks, FinalBlock, next).addr);
            next++;
        }
        write_segment(x, s, blocks, &next, pools);
    }
    fsim_pickle_writer_end(x->file.writer, FSIM_PICKLE_LIST);
    fsim_pickle_writer_str(x->file.writer, "allocator_settings");
    write_settings(x);
    fsim_pickle_writer_end(x->file.writer, FSIM_PICKLE_DICT);
    return memviz_file_commit(&x->file, error);
}

void
fsim_memviz_export_free(FsimMemvizExport *x)
{
    if (x == NULL)
        return;
    memviz_file_clear(&x->file);
    g_clear_pointer(&x->pending, g_array_unref);
    g_clear_pointer(&x->live, g_hash_table_unref);
    g_clear_pointer(&x->segments, g_tree_unref);
    g_clear_pointer(&x->mapped, g_tree_unref);
    g_clear_pointer(&x->seeds, g_array_unref);
    g_free(x);
}
