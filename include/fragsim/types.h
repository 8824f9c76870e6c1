/* SPDX-License-Identifier: MIT */
/*
 * fragsim: basic types shared by every module: simulated time and addresses, the status of a
 * simulated allocation, the counter triple, and the error domains.
 */
#pragma once

#include <glib.h>

#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

/* Simulated nanoseconds since the start of the trace.  Never a double: replays are exact. */
typedef uint64_t FsimTime;

/* A simulated device address.  Never a host pointer.  With the CUDA backend it is the device
 * pointer as an integer. */
typedef uint64_t FsimAddr;

/* The outcome of a simulated allocation.  An OOM is a result of the simulation, not an error of
 * the program: it is reported through this value and counted, never through a GError. */
typedef enum {
    FSIM_OK = 0,
    FSIM_OOM, /* cannot be satisfied even after reclaiming cached memory */
} FsimStatus;

/* The triple that mimalloc and RMM both arrived at.  @current may go down; @peak is the maximum
 * @current ever reached; @total is the sum of all increments. */
typedef struct {
    int64_t current;
    int64_t peak;
    int64_t total;
} FsimCounter;

static inline void
fsim_counter_add(FsimCounter *counter, int64_t delta)
{
    counter->current += delta;
    if (delta > 0)
        counter->total += delta;
    if (counter->current > counter->peak)
        counter->peak = counter->current;
}

/* Largest size, in bytes, that any trace may ask for.  Sizes above it are rejected as absurd by
 * every reader: no device comes near 2^60 bytes, and the limit leaves room for sums. */
#define FSIM_MAX_SIZE ((uint64_t)1 << 60)

/* Units. */
#define FSIM_KiB ((uint64_t)1024)
#define FSIM_MiB ((uint64_t)1024 * 1024)
#define FSIM_GiB ((uint64_t)1024 * 1024 * 1024)

/**
 * FSIM_ERROR:
 *
 * The general error domain.  Codes are #FsimError.
 */
#define FSIM_ERROR (fsim_error_quark())
GQuark fsim_error_quark(void);

/**
 * FsimError:
 * @FSIM_ERROR_FAILED: catch-all; the message says what went wrong.
 * @FSIM_ERROR_USAGE: a bad argument on the command line or in a config (unknown policy or knob,
 *     bad value).  The CLI exits with status 2 for it.
 * @FSIM_ERROR_IO: a file could not be opened, read or written.
 * @FSIM_ERROR_OOM: a simulated OOM stopped the run (`--fail-on-oom`).  The CLI exits with 3.
 * @FSIM_ERROR_UNSUPPORTED: the input uses something fragsim does not model.
 * @FSIM_ERROR_DIVERGED: validation found a divergence from the recorded trace (exit 4).
 */
typedef enum {
    FSIM_ERROR_FAILED,
    FSIM_ERROR_USAGE,
    FSIM_ERROR_IO,
    FSIM_ERROR_OOM,
    FSIM_ERROR_UNSUPPORTED,
    FSIM_ERROR_DIVERGED,
} FsimError;

/**
 * FSIM_TRACE_ERROR:
 *
 * Errors of trace readers.  Messages start with `FILE:LINE: ` for line-oriented formats and with
 * `FILE: byte OFFSET: ` for binary ones, so tests and users can find the place.
 */
#define FSIM_TRACE_ERROR (fsim_trace_error_quark())
GQuark fsim_trace_error_quark(void);

/**
 * FsimTraceError:
 * @FSIM_TRACE_ERROR_FAILED: catch-all.
 * @FSIM_TRACE_ERROR_EMPTY: the file is empty.
 * @FSIM_TRACE_ERROR_HEADER: wrong or missing header / magic; unknown format.
 * @FSIM_TRACE_ERROR_SYNTAX: a malformed line or record (missing or extra field).
 * @FSIM_TRACE_ERROR_NUMBER: a malformed, negative or out-of-range number.
 * @FSIM_TRACE_ERROR_SIZE: a size of zero or above %FSIM_MAX_SIZE.
 * @FSIM_TRACE_ERROR_KIND: an unknown event kind (in formats where that is fatal).
 * @FSIM_TRACE_ERROR_TIME: time went backwards.
 * @FSIM_TRACE_ERROR_DUPLICATE: an id that is still live was allocated again.
 * @FSIM_TRACE_ERROR_TRUNCATED: the input ends in the middle of a record.
 * @FSIM_TRACE_ERROR_FORBIDDEN: the input asks for something refused on principle (a pickle
 *     opcode that would import or call).
 * @FSIM_TRACE_ERROR_LIMIT: a declared length, nesting depth or count exceeds a safety limit.
 * @FSIM_TRACE_ERROR_TYPE: a value has the wrong type for where it appears.
 * @FSIM_TRACE_ERROR_CHECKSUM: the contents do not match the checksum the file records.
 */
typedef enum {
    FSIM_TRACE_ERROR_FAILED,
    FSIM_TRACE_ERROR_EMPTY,
    FSIM_TRACE_ERROR_HEADER,
    FSIM_TRACE_ERROR_SYNTAX,
    FSIM_TRACE_ERROR_NUMBER,
    FSIM_TRACE_ERROR_SIZE,
    FSIM_TRACE_ERROR_KIND,
    FSIM_TRACE_ERROR_TIME,
    FSIM_TRACE_ERROR_DUPLICATE,
    FSIM_TRACE_ERROR_TRUNCATED,
    FSIM_TRACE_ERROR_FORBIDDEN,
    FSIM_TRACE_ERROR_LIMIT,
    FSIM_TRACE_ERROR_TYPE,
    FSIM_TRACE_ERROR_CHECKSUM,
} FsimTraceError;

/**
 * fsim_parse_size:
 * @text: a size such as `80GiB`, `24GB`, `1.5 GiB`, `512MiB`, `4096` (plain bytes).
 * @out: (out): the size in bytes.
 * @error: set when @text is not a size.
 *
 * Binary suffixes (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (KB, MB, GB, TB) powers
 * of 1000; `K`, `M`, `G`, `T` alone are binary, as in `nvidia-smi` and PyTorch messages.  The
 * suffix is case-insensitive.  Fractions are allowed with a suffix and rounded down to a byte.
 *
 * Returns: %TRUE on success.
 */
gboolean fsim_parse_size(const char *text, uint64_t *out, GError **error);

/**
 * fsim_parse_u64:
 * @text: a decimal unsigned 64-bit integer, with nothing before or after it.
 * @out: (out): its value.
 *
 * Returns: %FALSE when @text is empty, has a sign, a non-digit, or overflows.
 */
gboolean fsim_parse_u64(const char *text, uint64_t *out);

/* -1, 0 or 1 as @a is below, equal to or above @b: the body of a comparison function. */
static inline int
fsim_compare_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

/* @a - @b, or 0 when @b is larger: what is left of @a after @b. */
static inline uint64_t
fsim_sub_sat(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* @num / @den, or 0 for a zero @den. */
static inline double
fsim_ratio(uint64_t num, uint64_t den)
{
    return den != 0 ? (double)num / (double)den : 0.0;
}

/* A GCompareDataFunc for keys that point to #FsimAddr values (a GTree of ranges by start). */
gint fsim_addr_compare(gconstpointer a, gconstpointer b, gpointer unused);

/* A GCompareFunc for g_ptr_array_sort() of records that begin with an #FsimAddr (segments,
 * regions): by that address. */
gint fsim_addr_ptr_compare(gconstpointer a, gconstpointer b);

/* A GCompareFunc for pointers to uint64_t values (g_array_sort() of a uint64_t array). */
gint fsim_u64_compare(gconstpointer a, gconstpointer b);

/**
 * fsim_enum_name:
 * @names: the names of an enum's values, indexed by value (NULL where a value has none).
 * @n: how many @names there are.
 * @value: a value.
 *
 * Returns: (transfer none): the name of @value, or "?" when it has none.
 */
const char *fsim_enum_name(const char *const *names, gsize n, int value);

/**
 * fsim_enum_from_name:
 * @names: as for fsim_enum_name().
 * @n: how many @names there are.
 * @name: (nullable): a name, matched ignoring ASCII case.
 * @out: (out): the value named @name.
 *
 * Returns: FALSE when @name is NULL or no value has it (@out unchanged).
 */
gboolean fsim_enum_from_name(const char *const *names, gsize n, const char *name, int *out);

/**
 * fsim_lower_bound_u64:
 * @items: @n structs, @stride bytes apart, sorted by the uint64_t member at @key_offset.
 * @key: the key looked for.
 *
 * A binary search: FSIM_LOWER_BOUND() gives @stride and @key_offset from a type and a member.
 *
 * Returns: the index of the first item whose key is at or above @key, or @n when none is.
 */
gsize fsim_lower_bound_u64(gconstpointer items, gsize n, gsize stride, gsize key_offset,
                           uint64_t key);
#define FSIM_LOWER_BOUND(items, n, type, member, key) \
    fsim_lower_bound_u64((items), (n), sizeof(type), G_STRUCT_OFFSET(type, member), (key))

/**
 * fsim_format_size:
 * @bytes: a size.
 *
 * Formats with binary units and three significant digits: `1.50 GiB`, `20.0 MiB`, `512 B`.
 *
 * Returns: (transfer full): the text; free with g_free().
 */
char *fsim_format_size(uint64_t bytes);

/**
 * fsim_format_count:
 * @n: a count.
 *
 * Formats in decimal with a comma between groups of three digits: `6,738,415,616`.
 *
 * Returns: (transfer full): the text; free with g_free().
 */
char *fsim_format_count(uint64_t n);

/**
 * fsim_format_shell_word:
 * @arg: one argument of a command line.
 *
 * Formats @arg for a command line a user may paste into a shell: as it is when it is plainly safe
 * (letters, digits and `-_./=+,:%@`), else quoted (g_shell_quote()).
 *
 * Returns: (transfer full): the text; free with g_free().
 */
char *fsim_format_shell_word(const char *arg);

G_END_DECLS
