/* SPDX-License-Identifier: MIT */
/*
 * fragsim: a safe unpickler for plain data, and a small streaming pickle writer.
 *
 * The unpickler reads Python pickles of protocols 0 to 5 that hold only plain data: None, bool,
 * int, float, str, bytes, list, tuple and dict, shared or not.  It never imports or calls
 * anything: every opcode that would (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
 * NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID, NEXT_BUFFER, READONLY_BUFFER) is refused.  It knows
 * nothing about PyTorch; src/readers/torch.c reads snapshots on top of it.  The code is in
 * src/readers/pickle/: machine.c (the opcodes), text.c (protocol 0 text opcodes), lists.c
 * (repeated lists), records.c (records: fsim_pickle_record()), value.c and heap.c (values,
 * reference counts, memory), input.c (the input window), writer.c.
 *
 * The writer emits the opcode subset that MemoryViz.js (pytorch.org/memory_viz) and CPython both
 * read, so simulated runs can be exported as snapshots the viewer opens.
 */
#pragma once

#include <glib.h>

#include <gio/gio.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

/**
 * FsimPickleType:
 * @FSIM_PICKLE_NONE: `None`.
 * @FSIM_PICKLE_BOOL: `True` or `False` (the text opcode `I01`/`I00` too).
 * @FSIM_PICKLE_INT: an integer that fits `int64_t`, or a non-negative one that fits `uint64_t`.
 * @FSIM_PICKLE_BIGINT: an integer that fits neither; its little-endian two's-complement bytes
 *     are kept (fsim_pickle_get_bigint()).
 * @FSIM_PICKLE_FLOAT: a double.
 * @FSIM_PICKLE_STR: a str: UTF-8 bytes, as the pickle holds them (not validated), may contain
 *     NUL bytes.  Python 2 `str` opcodes (STRING, BINSTRING, SHORT_BINSTRING) read as str too,
 *     as CPython's default `encoding="ASCII"` would, but without the ASCII check.
 * @FSIM_PICKLE_BYTES: bytes; BYTEARRAY8 reads as bytes too.
 * @FSIM_PICKLE_LIST: a list.
 * @FSIM_PICKLE_TUPLE: a tuple.
 * @FSIM_PICKLE_DICT: a dict, its entries in the order the pickle set them.
 *
 * Sets (EMPTY_SET, ADDITEMS, FROZENSET) are refused with %FSIM_TRACE_ERROR_TYPE: they never
 * occur in the data fragsim reads, and reading them as lists would hide their semantics.
 */
typedef enum {
    FSIM_PICKLE_NONE,
    FSIM_PICKLE_BOOL,
    FSIM_PICKLE_INT,
    FSIM_PICKLE_BIGINT,
    FSIM_PICKLE_FLOAT,
    FSIM_PICKLE_STR,
    FSIM_PICKLE_BYTES,
    FSIM_PICKLE_LIST,
    FSIM_PICKLE_TUPLE,
    FSIM_PICKLE_DICT,
} FsimPickleType;

/* One value of a loaded pickle.  Opaque: read it with the accessors below.  Values are owned
 * by their #FsimPickle and are valid until fsim_pickle_free(). */
typedef struct FsimPickleValue FsimPickleValue;

/* A loaded pickle: the root value and every value under it, in one arena. */
typedef struct FsimPickle FsimPickle;

/**
 * FsimPickleLimits:
 * @max_depth: the deepest nesting of containers accepted, and the most MARKs open at once.
 *     A container holding only scalars has depth 1.  0 means the default, 256.
 * @max_memo: the largest memo index accepted, plus one.  The bound actually used is the smaller
 *     of this and the input length (a pickler numbers its memo entries 0, 1, 2, ... and each
 *     one costs at least a byte), so a memo never costs more than a pointer per input byte.
 *     0 means the default, 2^24.
 * @max_stack: the most values on the unpickling stack at once (an unbatched list of N items,
 *     as torch::jit::Pickler writes them, needs N).  0 means the default, 2^24.
 * @max_long_bytes: the longest LONG1/LONG4 integer accepted, in bytes (and LONG/INT text of
 *     as many digits as that holds).  0 means the default, 1024 (an 8192-bit integer).
 * @max_nodes: the most values a full walk of the result may visit, a shared value counting once
 *     per reference (fsim_pickle_nodes() of the root).  Memo sharing lets a few hundred bytes
 *     describe 2^256 values ([x, x] nested), which would hang any walker that does not track
 *     shared values itself; this bounds the walk.  0 means the default, 2^20 + 64 per input
 *     byte read so far (up to the opcode being executed) (real snapshots need 2 to 4 per byte).
 * @max_memory: the most bytes the loader may hold at once: values, the stack, the memo and the
 *     input window.  0 means the process's budget, fsim_memory_budget().
 * @max_input: fsim_pickle_load_stream() only: the most bytes it reads.  0 means no limit.
 * @expect_memory: fsim_pickle_load() only: a hint, the bytes the caller expects the loader to
 *     hold at its peak.  The first chunk of memory is then taken that large (up to a 2 MiB huge
 *     page, and only where @max_memory holds 16 of those) instead of growing to it from 16 KiB,
 *     so that fresh memory costs one page fault where it would cost hundreds.  Only for inputs
 *     whose values all stay alive (a snapshot that memoizes everything): the peak then depends
 *     on the hint as well as on the live graph.  With a hint, the values that only the memo
 *     still holds at STOP are not released one by one but with the pickle (fsim_pickle_free()),
 *     which saves a walk over the memo.  0: no hint.
 * @record_keys: (nullable) (array zero-terminated=1): fsim_pickle_load() only: read the dicts
 *     whose first key is @record_keys[0] as *records* (see fsim_pickle_record()).  At most
 *     %FSIM_PICKLE_RECORD_KEYS keys.  %NULL: no records.
 * @shared_record_lists: with @record_keys: a record's list of memo references (a snapshot
 *     entry's `frames`) whose bytes repeat a list's read before, with the same memo entries, is
 *     one value shared by all the records that repeat it, rather than a copy each (a twin:
 *     fsim_pickle_list_twin()): the same items, length, height, node count and twin number,
 *     the offset of the first copy.  The memo entries of the copies refer to it, and it is
 *     never pushed: a pickle that refers to one of them (a memo get) fails to load as for a
 *     record referred to twice (the message says "a record"), and so must be loaded again
 *     without records, as for records.
 * @watch_str: (nullable): a string to look for in every str the input
 *     holds (binary str opcodes: strs from text opcodes are fsim_pickle_text_strings()'s); found
 *     or not is fsim_pickle_watched_str_seen().  The strs are a fraction of a snapshot's bytes,
 *     and are looked at as they are read.
 *
 * Safety limits of fsim_pickle_load() and fsim_pickle_load_stream().  Exceeding one is a
 * %FSIM_TRACE_ERROR_LIMIT error.
 *
 * Memory.  Values are reference counted and freed as soon as nothing refers to them (POP,
 * POP_MARK, a memo entry replaced, a container dropped), so what the loader holds is the *live*
 * object graph: the values on the stack and in the memo and what they contain.  Each value
 * takes 40 bytes plus its bytes (str, bytes) or 8 bytes per item (containers, whose arrays at
 * most double), rounded to 8 bytes; freed memory is reused, never returned before the end, so
 * the peak is what counts: at most about 2.5 times the peak live graph, plus 8 bytes per memo
 * index up to the highest used and a 256 KiB input window; fsim_pickle_load() also keeps the
 * last 2,048 lists of memo references it built (120 KiB, and the lists, 5.2 MiB at most, alive
 * until it returns) to copy them when the same bytes come again.  None of it depends on the input's
 * length: `(NONE POP)` repeated a billion times costs one value.  Loading takes time linear in
 * the input.
 */
typedef struct {
    guint max_depth;
    gsize max_memo;
    gsize max_stack;
    gsize max_long_bytes;
    uint64_t max_nodes;
    gsize max_memory;
    uint64_t max_input;
    gsize expect_memory;
    const char *const *record_keys;
    gboolean shared_record_lists;
    const char *watch_str;
} FsimPickleLimits;

/* The most keys FsimPickleLimits.record_keys may name. */
#define FSIM_PICKLE_RECORD_KEYS 8

/**
 * fsim_pickle_load:
 * @data: (array length=len): the pickle; borrowed, it may be freed once this returns.
 * @len: its length in bytes.
 * @limits: (nullable): safety limits; %NULL or 0 fields for the defaults.
 * @error: set on failure, in the %FSIM_TRACE_ERROR domain.
 *
 * Loads one pickle.  Every error message starts with `byte OFFSET: ` (the offset of the opcode
 * at fault; callers prefix the file name) and names the opcode as pickletools does.  Codes:
 * %FSIM_TRACE_ERROR_EMPTY (@len is 0); %FSIM_TRACE_ERROR_TRUNCATED (an argument runs past the
 * end, or no STOP); %FSIM_TRACE_ERROR_FORBIDDEN (an opcode that would import or call; a
 * container modified after it was shared or stored, see below); %FSIM_TRACE_ERROR_LIMIT (see
 * #FsimPickleLimits); %FSIM_TRACE_ERROR_SYNTAX (an unknown opcode, stack underflow, a missing
 * MARK, an unset memo entry, values left over at STOP); %FSIM_TRACE_ERROR_TYPE (APPEND to a
 * non-list, SETITEM to a non-dict, a list or dict as a dict key, sets);
 * %FSIM_TRACE_ERROR_NUMBER (a malformed text number, or a text integer beyond 64 bits);
 * %FSIM_TRACE_ERROR_HEADER (a protocol above 5).
 *
 * Cycles are refused, so that any walk of the result terminates.  The rule: a list or dict
 * becomes *sealed* when it is stored into another container, or pushed a second time (memo
 * GET, DUP); APPEND(S) or SETITEM(S) into a sealed container is %FSIM_TRACE_ERROR_FORBIDDEN
 * ("recursive structure").  CPython's pickler and torch::jit::Pickler always fill a container
 * completely before referring to it again, unless the data really is recursive, so every
 * acyclic pickle they write loads; shared (acyclic) values load, and are shared in the result.
 *
 * The result is a tree (a DAG where values are shared) no deeper than @max_depth, whose full walk
 * visits at most @max_nodes values: recursive walkers need no cycle or size checks of their own.
 *
 * Data after STOP is ignored, as CPython does; unlike CPython, values left on the stack under
 * the result, or MARKs left open, are an error.
 *
 * Returns: (transfer full) (nullable): the loaded pickle, or %NULL with @error set.
 */
FsimPickle *fsim_pickle_load(const guint8 *data, gsize len, const FsimPickleLimits *limits,
                             GError **error);

/**
 * fsim_pickle_load_stream:
 * @in: the stream to read the pickle from (a decompressing one, typically); borrowed.  It is
 *     read up to STOP, never closed.
 * @limits: (nullable): safety limits, as for fsim_pickle_load(); @max_input bounds the bytes read.
 * @error: set on failure: the errors of fsim_pickle_load(), and %FSIM_ERROR_IO when a read
 *     fails.
 *
 * Loads one pickle as fsim_pickle_load() does, reading @in through a window as the opcodes need
 * it: the input is never held whole.  A declared length cannot be checked against the input
 * that remains, so it is checked against the memory budget, and a truncated argument is found
 * when its bytes run out.
 *
 * Returns: (transfer full) (nullable): the loaded pickle, or %NULL with @error set.
 */
FsimPickle *fsim_pickle_load_stream(GInputStream *in, const FsimPickleLimits *limits,
                                    GError **error);

/**
 * fsim_pickle_free:
 * @pickle: (nullable) (transfer full): a pickle from fsim_pickle_load().
 *
 * Frees the pickle and every value in it.  %NULL is a no-op.
 */
void fsim_pickle_free(FsimPickle *pickle);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimPickle, fsim_pickle_free)

/**
 * fsim_pickle_scratch_take:
 * @bytes: the bytes wanted.
 * @room: (out): the bytes usable at the result, at least @bytes.
 *
 * Memory that a freed pickle's heap left in the loader's cache of chunks, for an array a reader
 * fills right after freeing its pickle: its pages were faulted in by the load, where fresh ones
 * would cost a fault each.  Its contents are undefined.
 *
 * Returns: (nullable): at least @bytes, or %NULL where the cache holds no chunk as large; give
 * it back with fsim_pickle_scratch_give().
 */
void *fsim_pickle_scratch_take(gsize bytes, gsize *room);

/**
 * fsim_pickle_scratch_give:
 * @p: (transfer full): memory from fsim_pickle_scratch_take().
 *
 * Puts @p back in the loader's cache of chunks (or frees it where the cache is full).
 */
void fsim_pickle_scratch_give(void *p);

/**
 * fsim_pickle_root:
 * @pickle: a loaded pickle.
 *
 * Returns: (transfer none): the value the pickle holds; never %NULL.
 */
const FsimPickleValue *fsim_pickle_root(const FsimPickle *pickle);

/**
 * fsim_pickle_arena_bytes:
 * @pickle: a loaded pickle.
 *
 * Returns: the most bytes of memory the loader held at once while loading (values, stack, memo,
 * input window), which #FsimPickleLimits' @max_memory bounds (for benchmarks and limits tests).
 */
gsize fsim_pickle_arena_bytes(const FsimPickle *pickle);

/**
 * fsim_pickle_input_bytes:
 * @pickle: a loaded pickle.
 *
 * Returns: the bytes of input read, up to and including STOP (after decompression).
 */
guint64 fsim_pickle_input_bytes(const FsimPickle *pickle);

/**
 * fsim_pickle_text_strings:
 * @pickle: a loaded pickle.
 *
 * Whether some str was read from a protocol 0 text opcode (STRING, UNICODE), whose escapes can
 * spell bytes the input does not hold as such.  When not, the bytes of every str are in the
 * input as they are (binary opcodes copy them), so a reader can rule a string out of every value
 * by searching the input's bytes for it.
 *
 * Returns: %TRUE when a text string opcode ran.
 */
gboolean fsim_pickle_text_strings(const FsimPickle *pickle);

/**
 * fsim_pickle_watched_str_seen:
 * @pickle: a loaded pickle.
 *
 * Returns: %TRUE when a str read by a binary opcode holds FsimPickleLimits.watch_str.
 */
gboolean fsim_pickle_watched_str_seen(const FsimPickle *pickle);

/**
 * fsim_pickle_records:
 * @pickle: a loaded pickle.
 *
 * Returns: how many records (FsimPickleLimits.record_keys) the pickle holds.
 */
guint64 fsim_pickle_records(const FsimPickle *pickle);

/**
 * fsim_pickle_record:
 * @v: (nullable): a value.
 * @pairs: (out) (optional): the entries the dict had.
 * @values: (out caller-allocates) (array fixed-size=8): the value of each of the record keys,
 *     in the order of FsimPickleLimits.record_keys, %NULL where the dict had no such key.
 *
 * A record is a dict of plain values, written as CPython's pickler writes a small dict (its
 * entries' keys str, their values scalars, strs, memo references or lists of memo references),
 * whose first key was FsimPickleLimits.record_keys[0].  The loader reads it straight from the
 * input into the values of the record keys (the others are dropped) instead of building the
 * dict: to every other accessor it is an *empty* dict, with the height and node count of the
 * dict it stands for.  A record is never shared nor modified: a pickle that refers to one (or to
 * a container holding one) a second time, or adds to it, fails to load (with a message that says
 * "a record"), and so must be loaded again without records.  A
 * dict in another form is built as usual, even where records are asked for.
 *
 * Returns: %TRUE when @v is a record.
 */
gboolean fsim_pickle_record(const FsimPickleValue *v, gsize *pairs, const FsimPickleValue **values);

/**
 * FsimPickleFields:
 * @values: the value of each record key (as fsim_pickle_record() gives them), %NULL if absent.
 * @uints: the value of each key in @is_uint.
 * @is_uint: (bit k: record key k) the keys whose value is an int from 0 to 2^64 - 1.
 * @is_none: the keys absent, or whose value is None.
 * @pairs: the entries the dict had.
 *
 * A record's values with its plain ints decoded: what a reader checks of each field without a
 * call per field (fsim_pickle_record_fields()).
 */
typedef struct {
    const FsimPickleValue *values[FSIM_PICKLE_RECORD_KEYS];
    guint64 uints[FSIM_PICKLE_RECORD_KEYS];
    guint is_uint;
    guint is_none;
    gsize pairs;
} FsimPickleFields;

/**
 * fsim_pickle_record_fields:
 * @v: (nullable): a value.
 * @fields: (out caller-allocates): its fields, filled only when @v is a record.
 *
 * fsim_pickle_record() with the record's non-negative ints and its Nones found in one call.
 *
 * Returns: %TRUE when @v is a record.
 */
gboolean fsim_pickle_record_fields(const FsimPickleValue *v, FsimPickleFields *fields);

/**
 * fsim_pickle_type:
 * @v: a value.
 *
 * Returns: its type.
 */
FsimPickleType fsim_pickle_type(const FsimPickleValue *v);

/**
 * fsim_pickle_type_name:
 * @type: a type.
 *
 * Returns: (transfer none): its Python name (`"NoneType"`, `"bool"`, `"int"`, `"int"` for
 * %FSIM_PICKLE_BIGINT, `"float"`, `"str"`, `"bytes"`, `"list"`, `"tuple"`, `"dict"`), for
 * error messages.
 */
const char *fsim_pickle_type_name(FsimPickleType type);

/**
 * fsim_pickle_len:
 * @v: a value.
 *
 * Returns: the number of items of a list or tuple, of entries of a dict, of bytes of a str or
 * bytes (without the terminating NUL) or of a big integer; 0 for other types.
 */
gsize fsim_pickle_len(const FsimPickleValue *v);

/**
 * fsim_pickle_item:
 * @v: a list or tuple.
 * @i: an index below fsim_pickle_len().
 *
 * Returns: (transfer none) (nullable): the item, or %NULL when @v is no list or tuple or @i is
 * out of range.
 */
const FsimPickleValue *fsim_pickle_item(const FsimPickleValue *v, gsize i);

/**
 * fsim_pickle_items:
 * @v: (nullable): a list or tuple.
 * @n: (out): the number of items; 0 when @v is no list or tuple.
 *
 * The items at once, for walks that look at all of them (or compare two lists item by item:
 * a value shared through the memo is the same pointer wherever it is referred to).
 *
 * Returns: (transfer none) (array length=n) (nullable): the items, or %NULL when there are none.
 */
const FsimPickleValue *const *fsim_pickle_items(const FsimPickleValue *v, gsize *n);

/**
 * fsim_pickle_dict_items:
 * @v: (nullable): a dict.
 * @n: (out): the number of entries; 0 when @v is no dict.
 *
 * The entries at once, for walks over all of them: key 0, value 0, key 1, value 1, ...
 *
 * Returns: (transfer none) (array) (nullable): 2 * @n values, or %NULL when there are none.
 */
const FsimPickleValue *const *fsim_pickle_dict_items(const FsimPickleValue *v, gsize *n);

/**
 * fsim_pickle_prefetch_items:
 * @v: (nullable): a value.
 *
 * Asks the processor to fetch the item array of a container, for walks over many containers
 * built long before (which are out of the caches): call it a few containers ahead.
 */
void fsim_pickle_prefetch_items(const FsimPickleValue *v);

/**
 * fsim_pickle_list_twin:
 * @v: (nullable): a value.
 *
 * Lists of memo references written byte for byte alike (a snapshot's `frames`, repeated for
 * every allocation from the same line) are built once and copied; the copies and their model
 * share a twin number.  Two lists with the same nonzero twin number have the same items (the same
 * pointers), so a reader can recognise a list it has seen without comparing its items.  Lists
 * differ in number when they differ in items, and may differ when they do not.
 *
 * Returns: the list's twin number, or 0 when it has none (not such a list, or not a list).
 */
uint64_t fsim_pickle_list_twin(const FsimPickleValue *v);

/**
 * fsim_pickle_dict_key:
 * @v: a dict.
 * @i: an entry index below fsim_pickle_len().
 *
 * Entries are in the order the pickle set them.  A key set twice (no real pickler writes that)
 * keeps both entries.
 *
 * Returns: (transfer none) (nullable): the key of entry @i, or %NULL when @v is no dict or @i is
 * out of range.
 */
const FsimPickleValue *fsim_pickle_dict_key(const FsimPickleValue *v, gsize i);

/**
 * fsim_pickle_dict_value:
 * @v: a dict.
 * @i: an entry index below fsim_pickle_len().
 *
 * Returns: (transfer none) (nullable): the value of entry @i, or %NULL when @v is no dict or @i
 * is out of range.
 */
const FsimPickleValue *fsim_pickle_dict_value(const FsimPickleValue *v, gsize i);

/**
 * fsim_pickle_dict_get:
 * @dict: (nullable): a dict.
 * @key: a NUL-terminated str key.
 *
 * Looks @key up among the str keys of @dict by a linear scan (snapshot dicts have a dozen keys).
 * When a key was set twice, the value set last is found, as in Python.
 *
 * Returns: (transfer none) (nullable): the value, or %NULL when @dict is %NULL, no dict, or has
 * no such key.
 */
const FsimPickleValue *fsim_pickle_dict_get(const FsimPickleValue *dict, const char *key);

/**
 * fsim_pickle_get_int:
 * @v: (nullable): a value.
 * @out: (out): its value.
 *
 * Returns: %TRUE when @v is an int that fits `int64_t`.  A bool is not an int here.  @out is left
 * alone on %FALSE.
 */
gboolean fsim_pickle_get_int(const FsimPickleValue *v, int64_t *out);

/**
 * fsim_pickle_get_uint:
 * @v: (nullable): a value.
 * @out: (out): its value.
 *
 * Returns: %TRUE when @v is a non-negative int that fits `uint64_t` (device addresses may exceed
 * 2^63).  @out is left alone on %FALSE.
 */
gboolean fsim_pickle_get_uint(const FsimPickleValue *v, uint64_t *out);

/**
 * fsim_pickle_get_double:
 * @v: (nullable): a value.
 * @out: (out): its value.
 *
 * Returns: %TRUE when @v is a float, or an int or big int (converted, rounding to nearest).
 */
gboolean fsim_pickle_get_double(const FsimPickleValue *v, double *out);

/**
 * fsim_pickle_get_bool:
 * @v: (nullable): a value.
 * @out: (out): its value.
 *
 * Returns: %TRUE when @v is a bool.
 */
gboolean fsim_pickle_get_bool(const FsimPickleValue *v, gboolean *out);

/**
 * fsim_pickle_get_str:
 * @v: (nullable): a value.
 * @len: (out) (optional): its length in bytes, NUL bytes inside included.
 *
 * Returns: (transfer none) (nullable): the NUL-terminated UTF-8 bytes of a str, or %NULL when
 * @v is no str.
 */
const char *fsim_pickle_get_str(const FsimPickleValue *v, gsize *len);

/**
 * fsim_pickle_get_bytes:
 * @v: (nullable): a value.
 * @len: (out) (optional): its length in bytes.
 *
 * Returns: (transfer none) (nullable): the bytes (followed by a NUL for convenience), or %NULL
 * when @v is no bytes.
 */
const guint8 *fsim_pickle_get_bytes(const FsimPickleValue *v, gsize *len);

/**
 * fsim_pickle_get_bigint:
 * @v: (nullable): a value.
 * @len: (out) (optional): the number of bytes.
 *
 * Returns: (transfer none) (nullable): the little-endian two's-complement bytes of a
 * %FSIM_PICKLE_BIGINT (at least 9 of them), or %NULL when @v is none.
 */
const guint8 *fsim_pickle_get_bigint(const FsimPickleValue *v, gsize *len);

/**
 * fsim_pickle_str_equal:
 * @v: (nullable): a value.
 * @s: a NUL-terminated string.
 *
 * Returns: %TRUE when @v is a str with exactly the bytes of @s.
 */
gboolean fsim_pickle_str_equal(const FsimPickleValue *v, const char *s);

/**
 * fsim_pickle_nodes:
 * @v: a value.
 *
 * Returns: the number of values a full walk of @v visits, @v included, a shared value counting
 * once per reference: 1 for a scalar.
 */
uint64_t fsim_pickle_nodes(const FsimPickleValue *v);

/**
 * fsim_pickle_offset:
 * @v: a value.
 *
 * Returns: the byte offset, in the input, of the opcode that created @v, for error messages.
 */
gsize fsim_pickle_offset(const FsimPickleValue *v);

/* A streaming pickle writer.  Opaque. */
typedef struct FsimPickleWriter FsimPickleWriter;

/**
 * fsim_pickle_writer_new:
 * @out: the stream to write to; borrowed, it must outlive the writer.  It is never closed.
 *
 * Starts a pickle: writes the protocol 2 header (`\x80\x02`).  The writer emits only opcodes
 * that MemoryViz.js reads (`} ] ( e a l t d s u q r h j J K M N G X`, PROTO, SHORT_BINUNICODE,
 * LONG1, MEMOIZE, FRAME, TUPLE1-3, NEWTRUE, NEWFALSE, `)` and `.`), which CPython reads too.
 *
 * Write exactly one value, then call fsim_pickle_writer_finish().  A value is a scalar, or
 * begin_X, the items, end_X; a dict's items are key, value, key, value, ...  Items are written
 * in batches of 1000 (MARK ... APPENDS/SETITEMS) as CPython does.  Str values up to 1 KiB are
 * memoized, so repeated keys cost two bytes.  Writes are buffered; the first write error is kept
 * and reported by fsim_pickle_writer_finish(), and later writes are skipped.  Calls out of order
 * (end_list in a dict, a second root value, a dict ending after a key) are programming errors:
 * they log a critical warning and make fsim_pickle_writer_finish() fail.
 *
 * Returns: (transfer full): the writer; free with fsim_pickle_writer_free().
 */
FsimPickleWriter *fsim_pickle_writer_new(GOutputStream *out);

/**
 * fsim_pickle_writer_free:
 * @w: (nullable) (transfer full): a writer.
 *
 * Frees the writer without finishing the pickle.  %NULL is a no-op.
 */
void fsim_pickle_writer_free(FsimPickleWriter *w);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(FsimPickleWriter, fsim_pickle_writer_free)

/* A container (@kind: %FSIM_PICKLE_DICT, %FSIM_PICKLE_LIST or %FSIM_PICKLE_TUPLE): begin, its
 * items (a dict's: key, value, key, value, ...), end with the same @kind. */
void fsim_pickle_writer_begin(FsimPickleWriter *w, FsimPickleType kind);
void fsim_pickle_writer_end(FsimPickleWriter *w, FsimPickleType kind);

/* Integers: BININT1/BININT2/BININT when they fit 32 bits, LONG1 otherwise. */
void fsim_pickle_writer_int(FsimPickleWriter *w, int64_t value);
void fsim_pickle_writer_uint(FsimPickleWriter *w, uint64_t value);
/* BINFLOAT (big-endian IEEE 754 double). */
void fsim_pickle_writer_double(FsimPickleWriter *w, double value);
void fsim_pickle_writer_bool(FsimPickleWriter *w, gboolean value);
void fsim_pickle_writer_none(FsimPickleWriter *w);
/* A str from NUL-terminated UTF-8 @s (not validated). */
void fsim_pickle_writer_str(FsimPickleWriter *w, const char *s);
/* A str from @len bytes of UTF-8 at @s, which may contain NUL bytes. */
void fsim_pickle_writer_str_len(FsimPickleWriter *w, const char *s, gsize len);

/**
 * fsim_pickle_writer_finish:
 * @w: a writer that has written exactly one complete value.
 * @error: set on failure.
 *
 * Writes STOP and flushes the buffer and the stream (which stays open).  Call it once.
 *
 * Returns: %FALSE with @error set when any write failed (the stream's own error) or the writer
 * was misused (%FSIM_ERROR_FAILED).
 */
gboolean fsim_pickle_writer_finish(FsimPickleWriter *w, GError **error);

G_END_DECLS
