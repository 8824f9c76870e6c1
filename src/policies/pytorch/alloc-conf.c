/* SPDX-License-Identifier: MIT */
/*
 * PYTORCH_CUDA_ALLOC_CONF, parsed as PyTorch parses it.  See fragsim/alloc-conf.h.
 *
 * The behaviour follows PyTorch's parser (c10/core/AllocatorConfig.cpp on main, which took over
 * the common keys from c10/cuda/CUDAAllocatorConfig.cpp), including its less obvious rules:
 *
 *   - the tokenizer keeps each of `,` `:` `[` `]` as a token and drops spaces, so
 *     `max_split_size_mb : 128` is fine and a trailing comma is accepted;
 *   - `max_split_size_mb` and `max_non_split_rounding_mb` must be >= 20 (kLargeBuffer in MiB);
 *   - `garbage_collection_threshold` must lie strictly between 0 and 1;
 *   - `roundup_power2_divisions:N` sets every interval; the list form keys intervals by their
 *     start in MiB (a power of two; interval index floor(log2(key)), clamped to 0..15).  The first
 *     listed key also fills every interval below it, and `>` fills from the last listed interval
 *     (that one included, as PyTorch's std::fill does) to the end.  Divisions are 0 (off) or a
 *     power of two;
 *   - `expandable_segments` takes exactly `True` or `False`;
 *   - repeated keys apply in order, the later winning.
 *
 * Where PyTorch is lax we are strict: numbers must be whole tokens (PyTorch's stoi reads `12x` as
 * 12), and `backend:cudaMallocAsync`, which replaces the whole allocator, is refused because
 * neither policy models it.
 */
#include "fragsim/alloc-conf.h"

#include <glib.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "fragsim/types.h"

#define MIB                  FSIM_MiB
#define LARGE_BUFFER_MB      20  /* kLargeBuffer / 1 MiB: the floor of the two oversize knobs */
#define MAX_REGISTER_THREADS 128 /* pinned_max_register_threads() */

/* The knobs written into a run's key file, one bit each in a "mentioned" mask. */
enum {
    KEY_MAX_SPLIT = 1u << 0,
    KEY_MAX_NON_SPLIT = 1u << 1,
    KEY_LARGE_SEGMENT = 1u << 2,
    KEY_BYPASS = 1u << 3,
    KEY_GC = 1u << 4,
    KEY_FRACTION = 1u << 5,
    KEY_EXPANDABLE = 1u << 6,
    KEY_ROUNDUP = 1u << 7,
    KEY_NPU_ALIGN = 1u << 8,
    KEY_NPU_PAGE = 1u << 9,
    KEY_NPU_SEGMENT = 1u << 10,
};

#define NPU_SEGMENT_MIN_MB 20 /* torch_npu's k20MB and k512MB: the range of segment_size_mb */
#define NPU_SEGMENT_MAX_MB 512

typedef struct {
    GPtrArray *tokens; /* of char* */
    guint pos;         /* the token being read */
    const char *where; /* message prefix: "PYTORCH_CUDA_ALLOC_CONF" or "caching" */
    gboolean lenient;  /* key-file values: booleans may be lower case */
    guint mentioned;   /* KEY_* seen */
} Parser;

void
fsim_alloc_conf_init(FsimAllocConf *conf)
{
    memset(conf, 0, sizeof(*conf));
    conf->max_split_size = G_MAXUINT64;
    conf->max_non_split_rounding = 20 * MIB;
    conf->large_segment_size = 20 * MIB;
    conf->roundup_bypass_threshold = G_MAXUINT64;
    conf->per_process_memory_fraction = 1.0;
    conf->npu_base_addr_aligned = FSIM_NPU_ADDR_ALIGN;
}

const char *
fsim_platform_name(FsimPlatform platform)
{
    return platform == FSIM_PLATFORM_NPU ? "npu" : "cuda";
}

const char *
fsim_platform_alloc_conf_env(FsimPlatform platform)
{
    return platform == FSIM_PLATFORM_NPU ? "PYTORCH_NPU_ALLOC_CONF" : "PYTORCH_CUDA_ALLOC_CONF";
}

gboolean
fsim_platform_from_name(const char *name, FsimPlatform *out)
{
    if (g_ascii_strcasecmp(name, "cuda") == 0)
        *out = FSIM_PLATFORM_CUDA;
    else if (g_ascii_strcasecmp(name, "npu") == 0)
        *out = FSIM_PLATFORM_NPU;
    else
        return FALSE;
    return TRUE;
}

/* Cut @text into tokens: each separator alone, the runs between them, whitespace dropped. */
static GPtrArray *
conf_tokenize(const char *text)
{
    GPtrArray *tokens = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GString) word = g_string_new(NULL);

    for (const char *p = text; *p != '\0'; p++) {
        if (*p == ',' || *p == ':' || *p == '[' || *p == ']') {
            if (word->len > 0) {
                g_ptr_array_add(tokens, g_strdup(word->str));
                g_string_truncate(word, 0);
            }
            g_ptr_array_add(tokens, g_strndup(p, 1));
        } else if (!g_ascii_isspace(*p)) {
            g_string_append_c(word, *p);
        }
    }
    if (word->len > 0)
        g_ptr_array_add(tokens, g_strdup(word->str));
    return tokens;
}

static const char *
parser_peek(const Parser *p)
{
    return p->pos < p->tokens->len ? g_ptr_array_index(p->tokens, p->pos) : NULL;
}

static const char *
parser_next(Parser *p)
{
    const char *token = parser_peek(p);

    if (token != NULL)
        p->pos++;
    return token;
}

static gboolean G_GNUC_PRINTF(4, 5)
    parser_fail(const Parser *p, GError **error, const char *key, const char *format, ...)
{
    va_list args;
    g_autofree char *message = NULL;

    va_start(args, format);
    message = g_strdup_vprintf(format, args);
    va_end(args);
    if (key != NULL)
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s: %s: %s", p->where, key, message);
    else
        g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE, "%s: %s", p->where, message);
    return FALSE;
}

/* Consume the separator @c. */
static gboolean
parser_expect(Parser *p, const char *key, char c, GError **error)
{
    const char *token = parser_next(p);

    if (token == NULL || token[0] != c || token[1] != '\0')
        return parser_fail(p, error, key, "expected '%c' %s '%s'", c,
                           token != NULL ? "but found" : "at the end after", token ? token : key);
    return TRUE;
}

static gboolean
is_separator(const char *token)
{
    return token[1] == '\0' && strchr(",:[]", token[0]) != NULL;
}

/* The value token after `key:`. */
static gboolean
parser_value(Parser *p, const char *key, const char **out, GError **error)
{
    const char *token = NULL;

    if (!parser_expect(p, key, ':', error))
        return FALSE;
    token = parser_next(p);
    if (token == NULL || is_separator(token))
        return parser_fail(p, error, key, "missing value");
    *out = token;
    return TRUE;
}

static gboolean
parser_uint(Parser *p, const char *key, uint64_t *out, GError **error)
{
    const char *token = NULL;

    if (!parser_value(p, key, &token, error))
        return FALSE;
    if (!fsim_parse_u64(token, out))
        return parser_fail(p, error, key, "'%s' is not a non-negative integer", token);
    return TRUE;
}

static gboolean
parser_double(Parser *p, const char *key, double *out, GError **error)
{
    const char *token = NULL;
    char *end = NULL;

    if (!parser_value(p, key, &token, error))
        return FALSE;
    errno = 0;
    *out = g_ascii_strtod(token, &end);
    if (end == token || *end != '\0' || errno != 0 || !isfinite(*out))
        return parser_fail(p, error, key, "'%s' is not a number", token);
    return TRUE;
}

/* True or False; key files (lenient) may write them in any case. */
static gboolean
parser_bool(Parser *p, const char *key, gboolean *out, GError **error)
{
    static const char *const words[] = {[FALSE] = "False", [TRUE] = "True"};
    const char *token = NULL;

    if (!parser_value(p, key, &token, error))
        return FALSE;
    for (gboolean value = FALSE; value <= TRUE; value++) {
        const char *word = words[value];

        if (p->lenient ? g_ascii_strcasecmp(token, word) == 0 : strcmp(token, word) == 0) {
            *out = value;
            return TRUE;
        }
    }
    return parser_fail(p, error, key, "expected True or False, not '%s'", token);
}

static gboolean
is_power_of_two(uint64_t value)
{
    return value != 0 && (value & (value - 1)) == 0;
}

static guint
log2_floor(uint64_t value)
{
    return 63u - (guint)__builtin_clzll(value);
}

/* A size in MiB of at least @min_mb, as bytes (clamped like PyTorch's SIZE_MAX / kMB). */
static gboolean
parser_megabytes(Parser *p, const char *key, uint64_t min_mb, uint64_t *out, GError **error)
{
    uint64_t mb;

    if (!parser_uint(p, key, &mb, error))
        return FALSE;
    if (mb < min_mb)
        return parser_fail(p, error, key,
                           "%" G_GUINT64_FORMAT " is too small (must be >= %" G_GUINT64_FORMAT ")",
                           mb, min_mb);
    *out = mb >= G_MAXUINT64 / MIB ? G_MAXUINT64 / MIB * MIB : mb * MIB;
    return TRUE;
}

static gboolean
parser_divisions_value(Parser *p, const char *key, uint64_t *out, GError **error)
{
    if (!parser_uint(p, key, out, error))
        return FALSE;
    if (*out != 0 && !is_power_of_two(*out))
        return parser_fail(p, error, key,
                           "divisions must be 0 or a power of two, not %" G_GUINT64_FORMAT, *out);
    if (*out > G_MAXUINT32)
        return parser_fail(p, error, key, "%" G_GUINT64_FORMAT " divisions is absurd", *out);
    return TRUE;
}

/* roundup_power2_divisions: N, or [MIB:N, ..., >:N]. */
static gboolean
parser_roundup(Parser *p, FsimAllocConf *conf, const char *key, GError **error)
{
    const char *token = NULL;
    gboolean first = TRUE;
    guint last_index = 0;

    if (!parser_expect(p, key, ':', error))
        return FALSE;
    token = parser_peek(p);
    if (token == NULL)
        return parser_fail(p, error, key, "missing value");
    if (strcmp(token, "[") != 0) {
        uint64_t divisions;

        p->pos--; /* re-read the ':' through parser_uint */
        if (!parser_uint(p, key, &divisions, error))
            return FALSE;
        if (!is_power_of_two(divisions) || divisions > G_MAXUINT32)
            return parser_fail(p, error, key,
                               "divisions must be a power of two, not %" G_GUINT64_FORMAT,
                               divisions);
        for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++)
            conf->roundup_power2_divisions[i] = (uint32_t)divisions;
        return TRUE;
    }
    p->pos++; /* '[' */
    for (;;) {
        const char *interval = parser_next(p);
        uint64_t divisions;

        if (interval == NULL)
            return parser_fail(p, error, key, "missing ']'");
        if (strcmp(interval, "]") == 0)
            return TRUE;
        if (is_separator(interval))
            return parser_fail(p, error, key, "expected an interval in MiB or '>', not '%s'",
                               interval);
        if (!parser_divisions_value(p, key, &divisions, error))
            return FALSE;
        if (strcmp(interval, ">") == 0) {
            for (guint i = last_index; i < FSIM_ALLOC_CONF_INTERVALS; i++)
                conf->roundup_power2_divisions[i] = (uint32_t)divisions;
        } else {
            uint64_t start_mb;
            guint index;

            if (!fsim_parse_u64(interval, &start_mb) || !is_power_of_two(start_mb))
                return parser_fail(p, error, key, "interval '%s' is not a power of two (in MiB)",
                                   interval);
            index = MIN(log2_floor(start_mb), FSIM_ALLOC_CONF_INTERVALS - 1);
            if (first) {
                for (guint i = 0; i < index; i++)
                    conf->roundup_power2_divisions[i] = (uint32_t)divisions;
                first = FALSE;
            }
            conf->roundup_power2_divisions[index] = (uint32_t)divisions;
            last_index = index;
        }
        token = parser_peek(p);
        if (token != NULL && strcmp(token, "]") != 0 && !parser_expect(p, key, ',', error))
            return FALSE;
    }
}

/* The PYTORCH_NPU_ALLOC_CONF keys that move memory, checked as torch_npu's NPUAllocatorConfig
 * checks them: base_addr_aligned_kb in [0, 16], page_size only `1g` (and `2m`, the default),
 * segment_size_mb in [20, 512]. */
static gboolean
parser_npu_key(Parser *p, FsimAllocConf *conf, const char *key, GError **error)
{
    const char *token = NULL;
    uint64_t number;

    if (strcmp(key, "page_size") == 0) {
        p->mentioned |= KEY_NPU_PAGE;
        if (!parser_value(p, key, &token, error))
            return FALSE;
        /* torch_npu takes only 1g; 2m, its default, is fragsim's name to set it back */
        if (g_ascii_strcasecmp(token, "1g") != 0 && g_ascii_strcasecmp(token, "2m") != 0)
            return parser_fail(p, error, key, "'%s' is not a page size torch_npu takes (1g)",
                               token);
        conf->npu_page_1g = g_ascii_strcasecmp(token, "1g") == 0;
        return TRUE;
    }
    if (!parser_uint(p, key, &number, error))
        return FALSE;
    if (strcmp(key, "base_addr_aligned_kb") == 0) {
        p->mentioned |= KEY_NPU_ALIGN;
        if (number > FSIM_NPU_ADDR_ALIGN >> 10)
            return parser_fail(p, error, key, "%" G_GUINT64_FORMAT " is outside [0, 16]", number);
        conf->npu_base_addr_aligned = number << 10;
        return TRUE;
    }
    p->mentioned |= KEY_NPU_SEGMENT;
    if (number < NPU_SEGMENT_MIN_MB || number > NPU_SEGMENT_MAX_MB)
        return parser_fail(p, error, key, "%" G_GUINT64_FORMAT " is outside [%d, %d]", number,
                           NPU_SEGMENT_MIN_MB, NPU_SEGMENT_MAX_MB);
    conf->npu_segment_size = number * MIB;
    return TRUE;
}

/* One `key:value`; p->pos is on the key.
 *
 * Longer than ~80 lines: one branch per PYTORCH_CUDA_ALLOC_CONF key, in the order of PyTorch's
 * own parser, so the two can be read side by side. */
static gboolean
parser_key(Parser *p, FsimAllocConf *conf, GError **error)
{
    const char *key = parser_next(p);
    gboolean flag;
    uint64_t number;
    double real;
    const char *token = NULL;

    if (strcmp(key, "max_split_size_mb") == 0) {
        p->mentioned |= KEY_MAX_SPLIT;
        return parser_megabytes(p, key, LARGE_BUFFER_MB, &conf->max_split_size, error);
    }
    if (strcmp(key, "max_non_split_rounding_mb") == 0) {
        p->mentioned |= KEY_MAX_NON_SPLIT;
        return parser_megabytes(p, key, LARGE_BUFFER_MB, &conf->max_non_split_rounding, error);
    }
    if (strcmp(key, "large_segment_size_mb") == 0) {
        p->mentioned |= KEY_LARGE_SEGMENT;
        return parser_megabytes(p, key, 2, &conf->large_segment_size, error);
    }
    if (strcmp(key, "roundup_bypass_threshold_mb") == 0) {
        p->mentioned |= KEY_BYPASS;
        return parser_megabytes(p, key, 0, &conf->roundup_bypass_threshold, error);
    }
    if (strcmp(key, "garbage_collection_threshold") == 0) {
        p->mentioned |= KEY_GC;
        if (!parser_double(p, key, &real, error))
            return FALSE;
        if (!(real > 0.0 && real < 1.0))
            return parser_fail(p, error, key, "%g is outside (0, 1)", real);
        conf->garbage_collection_threshold = real;
        return TRUE;
    }
    if (strcmp(key, "per_process_memory_fraction") == 0) {
        p->mentioned |= KEY_FRACTION;
        if (!parser_double(p, key, &real, error))
            return FALSE;
        if (!(real >= 0.0 && real <= 1.0))
            return parser_fail(p, error, key, "%g is outside [0, 1]", real);
        conf->per_process_memory_fraction = real;
        conf->has_memory_fraction = TRUE;
        return TRUE;
    }
    if (strcmp(key, "expandable_segments") == 0) {
        p->mentioned |= KEY_EXPANDABLE;
        return parser_bool(p, key, &conf->expandable_segments, error);
    }
    if (strcmp(key, "roundup_power2_divisions") == 0) {
        p->mentioned |= KEY_ROUNDUP;
        return parser_roundup(p, conf, key, error);
    }
    if (strcmp(key, "base_addr_aligned_kb") == 0 || strcmp(key, "page_size") == 0 ||
        strcmp(key, "segment_size_mb") == 0)
        return parser_npu_key(p, conf, key, error);
    /* Accepted and checked, but without effect on where memory goes. */
    if (strcmp(key, "release_lock_on_cudamalloc") == 0 ||
        strcmp(key, "release_lock_on_hipmalloc") == 0 ||
        strcmp(key, "pinned_use_cuda_host_register") == 0 ||
        strcmp(key, "pinned_use_hip_host_register") == 0 ||
        strcmp(key, "pinned_use_background_threads") == 0 ||
        strcmp(key, "graph_capture_record_stream_reuse") == 0)
        return parser_bool(p, key, &flag, error);
    if (strcmp(key, "pinned_num_register_threads") == 0) {
        if (!parser_uint(p, key, &number, error))
            return FALSE;
        if (!is_power_of_two(number) || number > MAX_REGISTER_THREADS)
            return parser_fail(p, error, key,
                               "%" G_GUINT64_FORMAT " is not a power of two of at most %d", number,
                               MAX_REGISTER_THREADS);
        return TRUE;
    }
    if (strcmp(key, "pinned_reserve_segment_size_mb") == 0) {
        if (!parser_uint(p, key, &number, error))
            return FALSE;
        if (number == 0)
            return parser_fail(p, error, key, "must be greater than 0");
        return TRUE;
    }
    if (strcmp(key, "expandable_segments_handle_type") == 0)
        return parser_value(p, key, &token, error);
    if (strcmp(key, "backend") == 0) {
        if (!parser_value(p, key, &token, error))
            return FALSE;
        if (strcmp(token, "native") == 0)
            return TRUE;
        if (strcmp(token, "cudaMallocAsync") == 0 || strcmp(token, "hipMallocAsync") == 0)
            return parser_fail(
                p, error, key,
                "the %s backend replaces the caching allocator, which fragsim does not model",
                token);
        return parser_fail(p, error, key,
                           "unknown backend '%s' (options are native and cudaMallocAsync)", token);
    }
    if (is_separator(key))
        return parser_fail(p, error, NULL, "expected a key, found '%s'", key);
    return parser_fail(p, error, NULL, "unknown key '%s'", key);
}

/* The cross-key rule main checks once everything is read. */
static gboolean
conf_check(const Parser *p, const FsimAllocConf *conf, GError **error)
{
    if (conf->large_segment_size > conf->max_split_size)
        return parser_fail(p, error, "large_segment_size_mb",
                           "%" G_GUINT64_FORMAT " MiB exceeds max_split_size_mb (%" G_GUINT64_FORMAT
                           ")",
                           conf->large_segment_size / MIB, conf->max_split_size / MIB);
    return TRUE;
}

/* The rules that depend on the platform, known once a group is read: torch_npu's own keys need
 * platform=npu, and torch_npu lacks max_non_split_rounding_mb (its near-fit tolerance is fixed at
 * 20 MiB) and wants max_split_size_mb above 20. */
static gboolean
conf_check_platform(const Parser *p, const FsimAllocConf *conf, GError **error)
{
    FsimAllocConf defaults;

    fsim_alloc_conf_init(&defaults);
    if (conf->platform != FSIM_PLATFORM_NPU) {
        const char *key = conf->npu_base_addr_aligned != defaults.npu_base_addr_aligned
                              ? "base_addr_aligned_kb"
                          : conf->npu_page_1g      ? "page_size"
                          : conf->npu_segment_size ? "segment_size_mb"
                                                   : NULL;

        if (key != NULL)
            return parser_fail(p, error, key, "a torch_npu setting: it needs platform=npu");
        return TRUE;
    }
    if (conf->max_non_split_rounding != defaults.max_non_split_rounding)
        return parser_fail(p, error, "max_non_split_rounding_mb",
                           "torch_npu has no such setting (its near-fit tolerance is 20 MiB)");
    if (conf->max_split_size == (uint64_t)LARGE_BUFFER_MB * MIB)
        return parser_fail(p, error, "max_split_size_mb", "torch_npu wants more than 20");
    return TRUE;
}

static gboolean
conf_parse_tokens(Parser *p, FsimAllocConf *conf, GError **error)
{
    while (parser_peek(p) != NULL) {
        const char *key = parser_peek(p);
        const char *token;

        if (!parser_key(p, conf, error))
            return FALSE;
        token = parser_next(p);
        if (token != NULL && strcmp(token, ",") != 0)
            return parser_fail(p, error, key, "expected ',' after the value, found '%s'", token);
    }
    return conf_check(p, conf, error);
}

gboolean
fsim_alloc_conf_parse(FsimAllocConf *conf, const char *text, GError **error)
{
    g_autoptr(GPtrArray) tokens = conf_tokenize(text != NULL ? text : "");
    Parser p = {.tokens = tokens, .where = "PYTORCH_CUDA_ALLOC_CONF"};

    return conf_parse_tokens(&p, conf, error);
}

uint32_t
fsim_alloc_conf_divisions(const FsimAllocConf *conf, uint64_t size)
{
    int index = size == 0 ? 0 : (int)log2_floor(size) - 20;

    index = CLAMP(index, 0, FSIM_ALLOC_CONF_INTERVALS - 1);
    return conf->roundup_power2_divisions[index];
}

/* The list form of the divisions, or the scalar form when they are all equal. */
static char *
conf_roundup_string(const FsimAllocConf *conf)
{
    GString *text = g_string_new(NULL);
    gboolean uniform = TRUE;

    for (guint i = 1; i < FSIM_ALLOC_CONF_INTERVALS; i++)
        uniform &= conf->roundup_power2_divisions[i] == conf->roundup_power2_divisions[0];
    if (uniform && conf->roundup_power2_divisions[0] != 0) {
        g_string_append_printf(text, "%u", conf->roundup_power2_divisions[0]);
        return g_string_free(text, FALSE);
    }
    g_string_append_c(text, '[');
    for (guint i = 0; i < FSIM_ALLOC_CONF_INTERVALS; i++)
        g_string_append_printf(text, "%s%" G_GUINT64_FORMAT ":%u", i ? "," : "", (uint64_t)1 << i,
                               conf->roundup_power2_divisions[i]);
    g_string_append_c(text, ']');
    return g_string_free(text, FALSE);
}

/* The shortest text that reads back as @value: `0.6`, never `0.59999999999999998`. */
static char *
conf_double_string(double value)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    for (int digits = 1; digits < 17; digits++) {
        char format[8];

        g_snprintf(format, sizeof(format), "%%.%dg", digits);
        g_ascii_formatd(buf, sizeof(buf), format, value);
        if (g_ascii_strtod(buf, NULL) == value)
            return g_strdup(buf);
    }
    return g_strdup(g_ascii_dtostr(buf, sizeof(buf), value));
}

/* The normalised value of the knob @bit. */
static char *
conf_value_string(const FsimAllocConf *conf, guint bit)
{
    switch (bit) {
    case KEY_MAX_SPLIT:
        return g_strdup_printf("%" G_GUINT64_FORMAT, conf->max_split_size / MIB);
    case KEY_MAX_NON_SPLIT:
        return g_strdup_printf("%" G_GUINT64_FORMAT, conf->max_non_split_rounding / MIB);
    case KEY_LARGE_SEGMENT:
        return g_strdup_printf("%" G_GUINT64_FORMAT, conf->large_segment_size / MIB);
    case KEY_BYPASS:
        return g_strdup_printf("%" G_GUINT64_FORMAT, conf->roundup_bypass_threshold / MIB);
    case KEY_GC:
        return conf_double_string(conf->garbage_collection_threshold);
    case KEY_FRACTION:
        return conf_double_string(conf->per_process_memory_fraction);
    case KEY_EXPANDABLE:
        return g_strdup(conf->expandable_segments ? "True" : "False");
    case KEY_NPU_ALIGN:
        return g_strdup_printf("%" G_GUINT64_FORMAT, conf->npu_base_addr_aligned >> 10);
    case KEY_NPU_PAGE:
        return g_strdup(conf->npu_page_1g ? "1g" : "2m");
    case KEY_NPU_SEGMENT:
        return g_strdup_printf("%" G_GUINT64_FORMAT, conf->npu_segment_size / MIB);
    case KEY_ROUNDUP:
    default:
        return conf_roundup_string(conf);
    }
}

/* clang-format off */
static const struct {
    guint bit;
    const char *key;
} conf_knobs[] = {
    {KEY_MAX_SPLIT, "max_split_size_mb"},
    {KEY_MAX_NON_SPLIT, "max_non_split_rounding_mb"},
    {KEY_LARGE_SEGMENT, "large_segment_size_mb"},
    {KEY_BYPASS, "roundup_bypass_threshold_mb"},
    {KEY_GC, "garbage_collection_threshold"},
    {KEY_FRACTION, "per_process_memory_fraction"},
    {KEY_EXPANDABLE, "expandable_segments"},
    {KEY_ROUNDUP, "roundup_power2_divisions"},
    {KEY_NPU_ALIGN, "base_addr_aligned_kb"},
    {KEY_NPU_PAGE, "page_size"},
    {KEY_NPU_SEGMENT, "segment_size_mb"},
};
/* clang-format on */

gboolean
fsim_alloc_conf_apply(GKeyFile *config, const char *text, GError **error)
{
    g_autoptr(GPtrArray) tokens = conf_tokenize(text != NULL ? text : "");
    Parser p = {.tokens = tokens, .where = "PYTORCH_CUDA_ALLOC_CONF"};
    FsimAllocConf conf;

    fsim_alloc_conf_init(&conf);
    if (!conf_parse_tokens(&p, &conf, error))
        return FALSE;
    for (gsize i = 0; i < G_N_ELEMENTS(conf_knobs); i++) {
        g_autofree char *value = NULL;

        if ((p.mentioned & conf_knobs[i].bit) == 0)
            continue;
        value = conf_value_string(&conf, conf_knobs[i].bit);
        g_key_file_set_value(config, "caching", conf_knobs[i].key, value);
        if (conf_knobs[i].bit != KEY_EXPANDABLE)
            g_key_file_set_value(config, "expandable", conf_knobs[i].key, value);
    }
    return TRUE;
}

gboolean
fsim_alloc_conf_load(FsimAllocConf *conf, GKeyFile *config, const char *group, GError **error)
{
    g_auto(GStrv) keys = NULL;
    Parser last = {.where = group};

    fsim_alloc_conf_init(conf);
    if (config == NULL || !g_key_file_has_group(config, group))
        return TRUE;
    keys = g_key_file_get_keys(config, group, NULL, NULL);
    for (gsize k = 0; keys != NULL && keys[k] != NULL; k++) {
        g_autofree char *value = g_key_file_get_value(config, group, keys[k], NULL);
        g_autoptr(GPtrArray) tokens = conf_tokenize(value != NULL ? value : "");
        g_autofree char *where = g_strdup_printf("%s.%s", group, keys[k]);
        Parser p = {.tokens = tokens, .where = where, .lenient = TRUE};

        if (g_str_has_prefix(keys[k], "mempool_"))
            continue; /* private-pool knobs, not PYTORCH_CUDA_ALLOC_CONF ones: the model's */
        if (strcmp(keys[k], "platform") == 0) {
            /* fragsim's own knob: which fork of the allocator, not an allocator setting */
            if (value == NULL || !fsim_platform_from_name(g_strstrip(value), &conf->platform)) {
                g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                            "%s: '%s' is not a platform (cuda or npu)", where, value);
                return FALSE;
            }
            continue;
        }

        /* `key : value-tokens`, read by the same code as the environment string. */
        g_ptr_array_insert(tokens, 0, g_strdup(":"));
        g_ptr_array_insert(tokens, 0, g_strdup(keys[k]));
        if (!parser_key(&p, conf, error))
            return FALSE;
        if (parser_peek(&p) != NULL)
            return parser_fail(&p, error, NULL, "unexpected '%s' after the value", parser_peek(&p));
    }
    return conf_check(&last, conf, error) && conf_check_platform(&last, conf, error);
}

char *
fsim_alloc_conf_to_string(const FsimAllocConf *conf)
{
    FsimAllocConf defaults;
    GString *text = g_string_new(NULL);

    fsim_alloc_conf_init(&defaults);
    for (gsize i = 0; i < G_N_ELEMENTS(conf_knobs); i++) {
        g_autofree char *value = conf_value_string(conf, conf_knobs[i].bit);
        g_autofree char *default_value = conf_value_string(&defaults, conf_knobs[i].bit);

        if (conf_knobs[i].bit == KEY_FRACTION && !conf->has_memory_fraction)
            continue;
        if (conf_knobs[i].bit != KEY_FRACTION && strcmp(value, default_value) == 0)
            continue;
        g_string_append_printf(text, "%s%s:%s", text->len ? "," : "", conf_knobs[i].key, value);
    }
    return g_string_free(text, FALSE);
}
