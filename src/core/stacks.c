/* SPDX-License-Identifier: MIT */
/*
 * Allocation stacks: the frames PyTorch records with each allocation, interned per trace.
 *
 * A snapshot repeats the same few hundred stacks thousands of times (every step allocates from
 * the same lines), each of dozens of frames, so both the strings and the stacks are interned:
 * strings copied once into a GStringChunk and found again through an open-addressed table of
 * their own (a hash of their bytes read a word at a time, kept with each slot with the length,
 * so that a probe compares bytes only where both match), stacks as runs of frames in one array,
 * found again by a hash of their interned string pointers.  Id 0 is the empty stack.
 *
 * The first user frame.  A stack runs from the allocator (C++) out to the program; the frame that
 * names the program's own line is the first Python frame (innermost first) that is not inside
 * torch or Python itself.  Library frames of other packages count as the program's: they are
 * what the program called.
 */
#include "core/stacks.h"

#include <glib.h>

#include <stdint.h>
#include <string.h>

#include "fragsim/owned.h"
#include "fragsim/trace.h"

typedef struct {
    guint start; /* first frame in frames */
    guint n;
} StackRange;

/* A slot of the strings' table: an interned string (NULL: empty), its length and hash. */
typedef struct {
    const char *str;
    gsize len;
    uint64_t hash;
} StringSlot;

struct FsimStackTable {
    GStringChunk *strings; /* the interned strings' bytes */
    StringSlot *slots;     /* open-addressed, a power of two, at most half full */
    gsize n_slots;
    gsize n_strings;
    GArray *frames;  /* FsimFrame, interned strings */
    GArray *stacks;  /* StackRange; [0] is the empty stack */
    GHashTable *ids; /* StackKey* -> id */
};

typedef struct {
    const FsimStackTable *table;
    guint start;
    guint n;
    guint hash; /* stack_hash() of the frames */
} StackKey;

static guint
stack_hash(const FsimFrame *frames, guint n)
{
    guint h = 5381 + n;

    for (guint i = 0; i < n; i++) {
        h = h * 33 + GPOINTER_TO_UINT(frames[i].filename);
        h = h * 33 + GPOINTER_TO_UINT(frames[i].name);
        h = h * 33 + frames[i].line;
    }
    return h;
}

static guint
key_hash(gconstpointer p)
{
    const StackKey *key = p;

    return key->hash;
}

static gboolean
key_equal(gconstpointer a, gconstpointer b)
{
    const StackKey *x = a;
    const StackKey *y = b;
    const FsimFrame *fx = &g_array_index(x->table->frames, FsimFrame, x->start);
    const FsimFrame *fy = &g_array_index(y->table->frames, FsimFrame, y->start);

    if (x->n != y->n)
        return FALSE;
    /* field by field: a frame's padding is whatever its maker left there */
    for (guint i = 0; i < x->n; i++) {
        if (fx[i].filename != fy[i].filename || fx[i].name != fy[i].name ||
            fx[i].line != fy[i].line)
            return FALSE;
    }
    return TRUE;
}

static FsimStackTable *
stack_table_new(void)
{
    FsimStackTable *table = g_new0(FsimStackTable, 1);
    StackRange empty = {0, 0};

    table->strings = g_string_chunk_new(64 * 1024);
    table->n_slots = 1024;
    table->slots = g_new0(StringSlot, table->n_slots);
    table->frames = g_array_new(FALSE, FALSE, sizeof(FsimFrame));
    table->stacks = g_array_new(FALSE, FALSE, sizeof(StackRange));
    g_array_append_val(table->stacks, empty);
    table->ids = g_hash_table_new_full(key_hash, key_equal, g_free, NULL);
    return table;
}

void
fsim_stack_table_free(FsimStackTable *table)
{
    static const FsimOwned owned[] = {FSIM_OWNED(FsimStackTable, ids, g_hash_table_unref),
                                      FSIM_OWNED(FsimStackTable, stacks, g_array_unref),
                                      FSIM_OWNED(FsimStackTable, frames, g_array_unref),
                                      FSIM_OWNED(FsimStackTable, slots, g_free),
                                      FSIM_OWNED(FsimStackTable, strings, g_string_chunk_free)};

    fsim_owned_free(table, owned, G_N_ELEMENTS(owned));
}

static FsimStackTable *
stack_table(FsimTrace *trace)
{
    if (trace->stacks == NULL)
        trace->stacks = stack_table_new();
    return trace->stacks;
}

/* A hash of @len bytes at @s, read eight at a time (the last word zero-padded, the length mixed
 * in), finished so that its low bits depend on every byte. */
static uint64_t
string_hash(const char *s, gsize len)
{
    const uint64_t k = UINT64_C(0x9E3779B97F4A7C15);
    uint64_t h = len * k;
    uint64_t w;
    gsize i = 0;

    for (; i + 8 <= len; i += 8) {
        memcpy(&w, s + i, 8);
        h = ((h << 5 | h >> 59) ^ w) * k;
    }
    if (i < len) {
        w = 0;
        memcpy(&w, s + i, len - i);
        h = ((h << 5 | h >> 59) ^ w) * k;
    }
    h ^= h >> 33;
    h *= UINT64_C(0xFF51AFD7ED558CCD);
    h ^= h >> 33;
    return h;
}

/* The slot of @s (@len bytes, hash @hash) in @slots: where it is, or the empty one where it
 * would go. */
static StringSlot *
string_slot(StringSlot *slots, gsize n_slots, const char *s, gsize len, uint64_t hash)
{
    gsize mask = n_slots - 1;
    gsize i = (gsize)hash & mask;

    while (slots[i].str != NULL &&
           (slots[i].hash != hash || slots[i].len != len || memcmp(slots[i].str, s, len) != 0))
        i = (i + 1) & mask;
    return &slots[i];
}

/* Doubles the strings' table. */
static void
strings_grow(FsimStackTable *table)
{
    StringSlot *old = table->slots;
    gsize n = table->n_slots;

    table->n_slots = 2 * n;
    table->slots = g_new0(StringSlot, table->n_slots);
    for (gsize i = 0; i < n; i++) {
        if (old[i].str != NULL)
            *string_slot(table->slots, table->n_slots, old[i].str, old[i].len, old[i].hash) =
                old[i];
    }
    g_free(old);
}

/* The interned copy of @s (NULL reads as ""), unique per content in @table. */
static const char *
string_intern(FsimStackTable *table, const char *s)
{
    gsize len;
    uint64_t hash;
    StringSlot *slot;

    if (s == NULL)
        s = "";
    len = strlen(s);
    hash = string_hash(s, len);
    slot = string_slot(table->slots, table->n_slots, s, len, hash);

    if (slot->str != NULL)
        return slot->str;
    if (2 * (table->n_strings + 1) > table->n_slots) {
        strings_grow(table);
        slot = string_slot(table->slots, table->n_slots, s, len, hash);
    }
    slot->str = g_string_chunk_insert_len(table->strings, s, (gssize)len);
    slot->len = len;
    slot->hash = hash;
    table->n_strings++;
    return slot->str;
}

void
fsim_trace_intern_frame(FsimTrace *trace, const FsimFrame *frame, FsimFrame *out)
{
    FsimStackTable *table = stack_table(trace);

    out->filename = string_intern(table, frame->filename);
    out->name = string_intern(table, frame->name);
    out->line = frame->line;
}

/* The id of the stack of frames[start..start + n) of the table, the frames just appended
 * (tentatively: dropped again when the stack is known). */
static uint32_t
stack_find_or_add(FsimStackTable *table, guint start, guint n)
{
    StackKey probe = {.table = table,
                      .start = start,
                      .n = n,
                      .hash = stack_hash(&g_array_index(table->frames, FsimFrame, start), n)};
    gpointer found = g_hash_table_lookup(table->ids, &probe);
    StackRange range = {.start = start, .n = n};

    if (found != NULL) {
        g_array_set_size(table->frames, start);
        return GPOINTER_TO_UINT(found);
    }
    g_array_append_val(table->stacks, range);
    g_hash_table_insert(table->ids, g_memdup2(&probe, sizeof(probe)),
                        GUINT_TO_POINTER(table->stacks->len - 1));
    return table->stacks->len - 1;
}

/* Appends @frames to the table (interning their strings unless @interned) and finds or adds
 * the stack. */
static uint32_t
stack_add(FsimTrace *trace, const FsimFrame *frames, gsize n, gboolean interned)
{
    FsimStackTable *table;
    guint start;

    g_return_val_if_fail(trace != NULL, 0);
    if (n == 0)
        return 0;
    table = stack_table(trace);
    start = table->frames->len;
    if (interned) {
        g_array_append_vals(table->frames, frames, (guint)n);
    } else {
        for (gsize i = 0; i < n; i++) {
            FsimFrame frame;

            fsim_trace_intern_frame(trace, &frames[i], &frame);
            g_array_append_val(table->frames, frame);
        }
    }
    return stack_find_or_add(table, start, (guint)n);
}

uint32_t
fsim_trace_add_stack(FsimTrace *trace, const FsimFrame *frames, gsize n)
{
    return stack_add(trace, frames, n, FALSE);
}

uint32_t
fsim_trace_add_interned_stack(FsimTrace *trace, const FsimFrame *frames, gsize n)
{
    return stack_add(trace, frames, n, TRUE);
}

const FsimFrame *
fsim_trace_stack(const FsimTrace *trace, uint32_t stack, gsize *n)
{
    const StackRange *range;

    *n = 0;
    if (trace == NULL || trace->stacks == NULL || stack == 0 || stack >= trace->stacks->stacks->len)
        return NULL;
    range = &g_array_index(trace->stacks->stacks, StackRange, stack);
    *n = range->n;
    return &g_array_index(trace->stacks->frames, FsimFrame, range->start);
}

/* Whether @path has the directory component @dir (`/torch/`, or `torch/` at its start). */
static gboolean
path_has_dir(const char *path, const char *dir)
{
    gsize len = strlen(dir);

    if (strncmp(path, dir, len) == 0 && path[len] == '/')
        return TRUE;
    for (const char *p = strchr(path, '/'); p != NULL; p = strchr(p + 1, '/')) {
        if (strncmp(p + 1, dir, len) == 0 && p[1 + len] == '/')
            return TRUE;
    }
    return FALSE;
}

/* Python's own library: lib/pythonX.Y/ outside site-packages and dist-packages. */
static gboolean
path_in_python_lib(const char *path)
{
    const char *lib = strstr(path, "/lib/python");

    if (lib == NULL)
        lib = strstr(path, "/Lib/"); /* Windows */
    if (lib == NULL)
        return FALSE;
    return strstr(lib, "/site-packages/") == NULL && strstr(lib, "/dist-packages/") == NULL;
}

static gboolean
frame_is_user(const FsimFrame *frame)
{
    const char *file = frame->filename;

    if (file == NULL || !g_str_has_suffix(file, ".py") || file[0] == '<')
        return FALSE;
    return !path_has_dir(file, "torch") && !path_has_dir(file, "torch_npu") &&
           !path_in_python_lib(file);
}

const FsimFrame *
fsim_frames_first_user(const FsimFrame *frames, gsize n)
{
    for (gsize i = 0; i < n; i++) {
        if (frame_is_user(&frames[i]))
            return &frames[i];
    }
    return NULL;
}

/* The path as shown: after site-packages/ (or dist-packages/), else the file name. */
static const char *
short_path(const char *path)
{
    const char *packages = g_strrstr(path, "-packages/");
    const char *slash;

    if (packages != NULL)
        return packages + strlen("-packages/");
    slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

char *
fsim_frame_format(const FsimFrame *frame)
{
    return g_strdup_printf("%s:%u:%s", short_path(frame->filename), frame->line, frame->name);
}

char *
fsim_trace_stack_site(const FsimTrace *trace, uint32_t stack)
{
    gsize n = 0;
    const FsimFrame *frames = fsim_trace_stack(trace, stack, &n);
    const FsimFrame *user = fsim_frames_first_user(frames, n);

    return user != NULL ? fsim_frame_format(user) : NULL;
}
