/* SPDX-License-Identifier: MIT */
/*
 * Sizes as people write them (`80GiB`, `24GB`, `1.5 GiB`) and as fragsim prints them.
 */
#include <glib.h>

#include <math.h>
#include <string.h>

#include "fragsim/types.h"

gboolean
fsim_parse_u64(const char *text, uint64_t *out)
{
    uint64_t value = 0;

    if (text == NULL || *text == '\0')
        return FALSE;
    for (const char *p = text; *p != '\0'; p++) {
        unsigned digit;

        if (*p < '0' || *p > '9')
            return FALSE;
        digit = (unsigned)(*p - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return FALSE;
        value = value * 10 + digit;
    }
    *out = value;
    return TRUE;
}

typedef struct {
    const char *suffix;
    uint64_t multiplier;
} SizeUnit;

/* Longest suffixes first so that "GiB" is not read as "G" + "iB". */
static const SizeUnit size_units[] = {
    {"kib", FSIM_KiB},
    {"mib", FSIM_MiB},
    {"gib", FSIM_GiB},
    {"tib", FSIM_GiB * 1024},
    {"kb", 1000},
    {"mb", 1000 * 1000},
    {"gb", 1000 * 1000 * 1000},
    {"tb", (uint64_t)1000 * 1000 * 1000 * 1000},
    {"k", FSIM_KiB},
    {"m", FSIM_MiB},
    {"g", FSIM_GiB},
    {"t", FSIM_GiB * 1024},
    {"b", 1},
};

static gboolean
size_error(const char *text, GError **error)
{
    g_set_error(error, FSIM_ERROR, FSIM_ERROR_USAGE,
                "'%s' is not a size (examples: 80GiB, 24GB, 512MiB, 1048576)", text);
    return FALSE;
}

gboolean
fsim_parse_size(const char *text, uint64_t *out, GError **error)
{
    g_autofree char *number = NULL;
    g_autofree char *suffix = NULL;
    const char *p;
    uint64_t multiplier = 1;
    gboolean has_suffix = FALSE;

    if (text == NULL)
        text = "";
    p = text;
    while (*p == ' ')
        p++;
    {
        const char *start = p;

        while ((*p >= '0' && *p <= '9') || *p == '.')
            p++;
        number = g_strndup(start, (gsize)(p - start));
    }
    while (*p == ' ')
        p++;
    suffix = g_ascii_strdown(p, -1);
    g_strchomp(suffix);
    if (*suffix != '\0') {
        gboolean found = FALSE;

        for (gsize i = 0; i < G_N_ELEMENTS(size_units); i++) {
            if (strcmp(suffix, size_units[i].suffix) == 0) {
                multiplier = size_units[i].multiplier;
                found = TRUE;
                break;
            }
        }
        if (!found)
            return size_error(text, error);
        has_suffix = TRUE;
    }
    if (*number == '\0')
        return size_error(text, error);
    if (strchr(number, '.') == NULL) {
        uint64_t value;

        if (!fsim_parse_u64(number, &value))
            return size_error(text, error);
        if (value != 0 && multiplier > UINT64_MAX / value)
            return size_error(text, error);
        *out = value * multiplier;
        return TRUE;
    } else {
        char *end = NULL;
        double value;

        if (!has_suffix || strchr(strchr(number, '.') + 1, '.') != NULL)
            return size_error(text, error);
        value = g_ascii_strtod(number, &end);
        if (end == NULL || *end != '\0' || !isfinite(value) || value < 0)
            return size_error(text, error);
        value *= (double)multiplier;
        if (value >= 18446744073709551615.0)
            return size_error(text, error);
        *out = (uint64_t)value;
        return TRUE;
    }
}

gint
fsim_addr_compare(gconstpointer a, gconstpointer b, gpointer unused)
{
    (void)unused;
    return fsim_compare_u64(*(const FsimAddr *)a, *(const FsimAddr *)b);
}

gint
fsim_addr_ptr_compare(gconstpointer a, gconstpointer b)
{
    return fsim_compare_u64(**(const FsimAddr *const *)a, **(const FsimAddr *const *)b);
}

gint
fsim_u64_compare(gconstpointer a, gconstpointer b)
{
    return fsim_compare_u64(*(const uint64_t *)a, *(const uint64_t *)b);
}

const char *
fsim_enum_name(const char *const *names, gsize n, int value)
{
    return value >= 0 && (gsize)value < n && names[value] != NULL ? names[value] : "?";
}

gboolean
fsim_enum_from_name(const char *const *names, gsize n, const char *name, int *out)
{
    for (gsize i = 0; name != NULL && i < n; i++) {
        if (names[i] != NULL && g_ascii_strcasecmp(names[i], name) == 0) {
            *out = (int)i;
            return TRUE;
        }
    }
    return FALSE;
}

gsize
fsim_lower_bound_u64(gconstpointer items, gsize n, gsize stride, gsize key_offset, uint64_t key)
{
    const guint8 *base;
    gsize lo = 0;
    gsize hi = n;

    if (n == 0)
        return 0; /* @items may be NULL: no offset from it */
    base = (const guint8 *)items + key_offset;
    while (lo < hi) {
        gsize mid = lo + (hi - lo) / 2;
        uint64_t at;

        memcpy(&at, base + mid * stride, sizeof(at));
        if (at < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

char *
fsim_format_size(uint64_t bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double value = (double)bytes;
    guint unit = 0;

    if (bytes < 1024)
        return g_strdup_printf("%" G_GUINT64_FORMAT " B", bytes);
    while (value >= 1024.0 && unit + 1 < G_N_ELEMENTS(units)) {
        value /= 1024.0;
        unit++;
    }
    if (value >= 100.0)
        return g_strdup_printf("%.0f %s", value, units[unit]);
    if (value >= 10.0)
        return g_strdup_printf("%.1f %s", value, units[unit]);
    return g_strdup_printf("%.2f %s", value, units[unit]);
}

char *
fsim_format_count(uint64_t n)
{
    g_autofree char *digits = g_strdup_printf("%" G_GUINT64_FORMAT, n);
    GString *text = g_string_new(NULL);
    gsize len = strlen(digits);

    for (gsize i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            g_string_append_c(text, ',');
        g_string_append_c(text, digits[i]);
    }
    return g_string_free(text, FALSE);
}

char *
fsim_format_shell_word(const char *arg)
{
    gboolean plain = *arg != '\0';

    for (const char *p = arg; *p != '\0' && plain; p++)
        plain = g_ascii_isalnum(*p) || strchr("-_./=+,:%@", *p) != NULL;
    return plain ? g_strdup(arg) : g_shell_quote(arg);
}
