/* SPDX-License-Identifier: MIT */
/*
 * The unpickler's protocol 0 opcodes: the ones whose argument is a line of text (INT, LONG,
 * FLOAT, STRING, UNICODE, GET, PUT).  Decoding follows CPython's Modules/_pickle.c.
 */
#include <glib.h>

#include <string.h>

#include "machine.h"

/* Reads the text argument of a protocol 0 opcode: the bytes up to the next newline, which is
 * consumed but not returned.  The line stays valid until the input is read again. */
static gboolean
read_line(Loader *l, const char **line, size_t *len)
{
    InputStatus s = input_line(&l->in, len);
    if (s == INPUT_EOF)
        return load_fail(l, FSIM_TRACE_ERROR_TRUNCATED, "%s: the input ends before its newline",
                         op_name(l));
    if (s != INPUT_OK)
        return input_fail(l, s, 0);
    *line = (const char *)l->in.p;
    l->in.p += *len + 1;
    return TRUE;
}

/* Parses a protocol 0 decimal integer (optional sign, digits, nothing else). */
static gboolean
parse_decimal(const char *s, size_t len, int64_t *i, uint64_t *u, gboolean *is_unsigned)
{
    gboolean negative = FALSE;
    size_t k = 0;
    if (k < len && (s[k] == '-' || s[k] == '+')) {
        negative = s[k] == '-';
        k++;
    }
    if (k == len)
        return FALSE;
    uint64_t value = 0;
    for (; k < len; k++) {
        if (s[k] < '0' || s[k] > '9')
            return FALSE;
        unsigned digit = (unsigned)(s[k] - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return FALSE;
        value = value * 10 + digit;
    }
    if (negative) {
        if (value > (uint64_t)INT64_MAX + 1)
            return FALSE;
        *i = value == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)value;
        *is_unsigned = FALSE;
    } else if (value > (uint64_t)INT64_MAX) {
        *u = value;
        *is_unsigned = TRUE;
    } else {
        *i = (int64_t)value;
        *is_unsigned = FALSE;
    }
    return TRUE;
}

/* LONG1, LONG4, and LONG text beyond 64 bits: @n little-endian two's-complement bytes. */
FsimPickleValue *
new_long(Loader *l, const guint8 *bytes, size_t n)
{
    if (n == 0) {
        FsimPickleValue *v = new_value(l, FSIM_PICKLE_INT);
        if (v != NULL)
            v->u.i = 0;
        return v;
    }
    gboolean negative = (bytes[n - 1] & 0x80) != 0;
    if (n <= 8) {
        /* (LONG1 of an address or a time: the sign-extended bytes are the value) */
        uint64_t u = 0;
        for (size_t i = n; i-- > 0;)
            u = u << 8 | bytes[i];
        if (n < 8 && negative)
            u |= ~(uint64_t)0 << (8 * n);
        FsimPickleValue *v = new_value(l, FSIM_PICKLE_INT);
        if (v != NULL)
            v->u.u = u;
        return v;
    }
    /* Drop redundant sign bytes to find the significant length. */
    size_t sig = n;
    guint8 fill = negative ? 0xff : 0x00;
    while (sig > 1 && bytes[sig - 1] == fill && ((bytes[sig - 2] & 0x80) != 0) == negative)
        sig--;
    /* A non-negative value may need a ninth byte (0x00) only to keep its sign bit clear. */
    if (sig <= 8 || (!negative && sig == 9 && bytes[8] == 0)) {
        uint64_t u = 0;
        for (size_t i = 0; i < MIN(sig, (size_t)8); i++)
            u |= (uint64_t)bytes[i] << (8 * i);
        if (sig < 8 && negative)
            u |= ~(uint64_t)0 << (8 * sig);
        FsimPickleValue *v = new_value(l, FSIM_PICKLE_INT);
        if (v == NULL)
            return NULL;
        v->u.u = u;
        if (sig == 9)
            v->flags |= VALUE_UNSIGNED;
        return v;
    }
    return value_new_blob(l->heap, FSIM_PICKLE_BIGINT, l->op_offset, bytes, sig);
}

/* A decimal integer of more than 64 bits (digits only, already checked) as a LONG1-style value:
 * the magnitude is built base 256 by multiply-and-add, then negated in two's complement. */
static FsimPickleValue *
new_decimal_long(Loader *l, const char *digits, size_t n, gboolean negative)
{
    /* 10^n < 256^(n / 2 + 1), plus a byte for the sign. */
    size_t cap = n / 2 + 2;
    g_autofree guint8 *bytes = g_malloc0(cap);
    size_t used = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned carry = (unsigned)(digits[k] - '0');
        for (size_t i = 0; i < used; i++) {
            unsigned t = bytes[i] * 10u + carry;
            bytes[i] = (guint8)t;
            carry = t >> 8;
        }
        while (carry != 0) {
            bytes[used++] = (guint8)carry;
            carry >>= 8;
        }
    }
    used++; /* the sign byte, 0 */
    if (negative) {
        unsigned carry = 1;
        for (size_t i = 0; i < used; i++) {
            unsigned t = (guint8)~bytes[i] + carry;
            bytes[i] = (guint8)t;
            carry = t >> 8;
        }
    }
    return new_long(l, bytes, used);
}

/* INT and LONG: a decimal line; INT's "00" and "01" are False and True. */
static gboolean
text_int(Loader *l, const char *line, size_t len)
{
    gboolean is_long = l->op == 'L';
    if (!is_long && len == 2 && line[0] == '0' && (line[1] == '0' || line[1] == '1')) {
        FsimPickleValue *v = new_value(l, FSIM_PICKLE_BOOL);
        if (v != NULL)
            v->u.b = line[1] == '1';
        return push(l, v);
    }
    if (is_long && len > 0 && line[len - 1] == 'L')
        len--;
    int64_t i = 0;
    uint64_t u = 0;
    gboolean is_unsigned = FALSE;
    if (!parse_decimal(line, len, &i, &u, &is_unsigned)) {
        /* Too big, or malformed. */
        size_t sign = len > 0 && (line[0] == '-' || line[0] == '+') ? 1 : 0;
        size_t k = sign;
        while (k < len && line[k] >= '0' && line[k] <= '9')
            k++;
        if (k != len || k == sign)
            return load_fail(l, FSIM_TRACE_ERROR_NUMBER, "%s: not a decimal integer: \"%.*s\"",
                             op_name(l), (int)MIN(len, (size_t)40), line);
        /* 256^b > 10^(2.4 b): b bytes hold 2.4 b digits. */
        if ((len - sign) / 12 * 5 > l->max_long_bytes)
            return load_fail(l, FSIM_TRACE_ERROR_LIMIT,
                             "%s: a %" G_GSIZE_FORMAT
                             "-digit integer, above the limit of %" G_GSIZE_FORMAT " bytes",
                             op_name(l), (gsize)(len - sign), (gsize)l->max_long_bytes);
        return push(l, new_decimal_long(l, line + sign, len - sign, line[0] == '-'));
    }
    FsimPickleValue *v = new_value(l, FSIM_PICKLE_INT);
    if (v != NULL && is_unsigned) {
        v->u.u = u;
        v->flags |= VALUE_UNSIGNED;
    } else if (v != NULL) {
        v->u.i = i;
    }
    return push(l, v);
}

/* PUT, GET: a decimal memo index line. */
static gboolean
text_memo(Loader *l, const char *line, size_t len)
{
    int64_t i = 0;
    uint64_t u = 0;
    gboolean is_unsigned = FALSE;
    if (!parse_decimal(line, len, &i, &u, &is_unsigned) || (!is_unsigned && i < 0))
        return load_fail(l, FSIM_TRACE_ERROR_NUMBER, "%s: bad memo index \"%.*s\"", op_name(l),
                         (int)MIN(len, (size_t)40), line);
    return memo_access(l, is_unsigned ? u : (uint64_t)i);
}

static gboolean
text_float(Loader *l, const char *line, size_t len)
{
    char buffer[128];
    if (len == 0 || len >= sizeof(buffer))
        return load_fail(l, FSIM_TRACE_ERROR_NUMBER, "%s: bad float", op_name(l));
    memcpy(buffer, line, len);
    buffer[len] = '\0';
    char *end = NULL;
    double d = g_ascii_strtod(buffer, &end);
    if (end != buffer + len)
        return load_fail(l, FSIM_TRACE_ERROR_NUMBER, "%s: bad float \"%s\"", op_name(l), buffer);
    FsimPickleValue *v = new_value(l, FSIM_PICKLE_FLOAT);
    if (v != NULL)
        v->u.d = d;
    return push(l, v);
}

/* ---- Protocol 0 strings -------------------------------------------------------------------- */

static int
hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t
utf8_put(char *out, uint32_t cp)
{
    /* Lone surrogates are encoded like any other code point, as CPython's "surrogatepass". */
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* One backslash escape of a Python 2 str literal, the character after the backslash being @c;
 * *@s is after it.  Returns FALSE for a malformed \x escape. */
static gboolean
escape_decode(char c, const char **s, const char *end, char **out)
{
    static const char simple[][2] = {{'\\', '\\'}, {'\'', '\''}, {'"', '"'},  {'a', '\a'},
                                     {'b', '\b'},  {'f', '\f'},  {'n', '\n'}, {'r', '\r'},
                                     {'t', '\t'},  {'v', '\v'}};
    if (c == '\n')
        return TRUE; /* a line continuation */
    for (size_t k = 0; k < G_N_ELEMENTS(simple); k++) {
        if (c == simple[k][0]) {
            *(*out)++ = simple[k][1];
            return TRUE;
        }
    }
    if (c == 'x') {
        int hi = *s < end ? hex_value((*s)[0]) : -1;
        int lo = *s + 1 < end ? hex_value((*s)[1]) : -1;
        if (hi < 0 || lo < 0)
            return FALSE;
        *(*out)++ = (char)(hi * 16 + lo);
        *s += 2;
        return TRUE;
    }
    if (c >= '0' && c <= '7') {
        unsigned value = (unsigned)(c - '0');
        for (int k = 0; k < 2 && *s < end && **s >= '0' && **s <= '7'; k++)
            value = value * 8 + (unsigned)(*(*s)++ - '0');
        *(*out)++ = (char)(value & 0xff);
        return TRUE;
    }
    *(*out)++ = '\\';
    *(*out)++ = c;
    return TRUE;
}

/* STRING: a quoted Python 2 repr, decoded as codecs.escape_decode() does. */
static gboolean
text_string(Loader *l, const char *line, size_t len)
{
    if (len < 2 || (line[0] != '\'' && line[0] != '"') || line[len - 1] != line[0])
        return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: the argument must be quoted", op_name(l));
    const char *s = line + 1;
    const char *end = line + len - 1;
    l->text_strings = TRUE;
    g_autofree char *decoded = g_malloc((size_t)(end - s) + 1);
    char *out = decoded;
    while (s < end) {
        if (*s != '\\') {
            *out++ = *s++;
            continue;
        }
        if (s + 1 == end)
            return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: trailing \\ in string", op_name(l));
        s++;
        char c = *s++;
        if (!escape_decode(c, &s, end, &out))
            return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: invalid \\x escape", op_name(l));
    }
    return push(l, value_new_blob(l->heap, FSIM_PICKLE_STR, l->op_offset, decoded,
                                  (size_t)(out - decoded)));
}

/* UNICODE: raw-unicode-escape text.  Bytes are Latin-1 code points; \uXXXX and \UXXXXXXXX are
 * escapes only after an odd number of backslashes (CPython's rule). */
static gboolean
text_unicode(Loader *l, const char *line, size_t len)
{
    l->text_strings = TRUE;
    /* A byte becomes at most 2 UTF-8 bytes; an escape of 6 or 10 bytes at most 4. */
    g_autofree char *decoded = g_malloc(2 * len + 1);
    char *out = decoded;
    const char *s = line;
    const char *end = line + len;
    while (s < end) {
        if (*s != '\\') {
            out += utf8_put(out, (guint8)*s++);
            continue;
        }
        const char *run = s;
        while (s < end && *s == '\\')
            *out++ = *s++;
        if (((s - run) & 1) == 0 || s == end || (*s != 'u' && *s != 'U'))
            continue;
        out--;
        int count = *s == 'u' ? 4 : 8;
        s++;
        uint32_t cp = 0;
        for (int k = 0; k < count; k++) {
            int h = s < end ? hex_value(*s) : -1;
            if (h < 0)
                return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: truncated \\%c escape",
                                 op_name(l), count == 4 ? 'u' : 'U');
            cp = cp * 16 + (uint32_t)h;
            s++;
        }
        if (cp > 0x10ffff)
            return load_fail(l, FSIM_TRACE_ERROR_SYNTAX, "%s: \\U escape out of range", op_name(l));
        out += utf8_put(out, cp);
    }
    return push(l, value_new_blob(l->heap, FSIM_PICKLE_STR, l->op_offset, decoded,
                                  (size_t)(out - decoded)));
}

/* Reads the opcode's line, then decodes it as the opcode says. */
gboolean
load_text(Loader *l)
{
    const char *line = NULL;
    size_t len = 0;
    if (!read_line(l, &line, &len))
        return FALSE;
    switch (l->op) {
    case 'I':
    case 'L':
        return text_int(l, line, len);
    case 'g':
    case 'p':
        return text_memo(l, line, len);
    case 'F':
        return text_float(l, line, len);
    case 'S':
        return text_string(l, line, len);
    default: /* 'V' */
        return text_unicode(l, line, len);
    }
}
