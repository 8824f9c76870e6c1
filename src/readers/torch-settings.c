/* SPDX-License-Identifier: MIT */
/*
 * PyTorch snapshots: `allocator_settings`, written back as the PYTORCH_CUDA_ALLOC_CONF string that
 * sets them (replay and validate parse it with fragsim/alloc-conf.h).
 */
#include <glib.h>

#include "torch-reader.h"

/* The shortest text that reads back as @value, as Python's repr() writes floats. */
static void
append_double(GString *out, double value)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    for (int precision = 1; precision <= 17; precision++) {
        char format[8];

        g_snprintf(format, sizeof(format), "%%.%dg", precision);
        g_ascii_formatd(buf, sizeof(buf), format, value);
        if (precision == 17 || g_ascii_strtod(buf, NULL) == value)
            break;
    }
    g_string_append(out, buf);
    if (strpbrk(buf, ".eninf") == NULL)
        g_string_append(out, ".0");
}

/* @v as Python would print it (top-level strings unquoted).  The depth is bounded by the
 * unpickler; every value visited costs budget, so shared containers cannot blow the walk up. */
static gboolean
append_value(TorchLoader *ld, GString *out, const FsimPickleValue *v, gboolean nested,
             GError **error)
{
    int64_t i;
    uint64_t u;
    double d;
    gboolean b;
    gsize n = fsim_pickle_len(v);
    gboolean ok = TRUE;

    if (!fsim_torch_charge(ld, v, 1, error))
        return FALSE;
    switch (fsim_pickle_type(v)) {
    case FSIM_PICKLE_NONE:
        g_string_append(out, "None");
        break;
    case FSIM_PICKLE_BOOL:
        fsim_pickle_get_bool(v, &b);
        g_string_append(out, b ? "True" : "False");
        break;
    case FSIM_PICKLE_INT:
        if (fsim_pickle_get_int(v, &i))
            g_string_append_printf(out, "%" G_GINT64_FORMAT, i);
        else if (fsim_pickle_get_uint(v, &u))
            g_string_append_printf(out, "%" G_GUINT64_FORMAT, u);
        break;
    case FSIM_PICKLE_BIGINT:
    case FSIM_PICKLE_FLOAT:
        fsim_pickle_get_double(v, &d);
        append_double(out, d);
        break;
    case FSIM_PICKLE_STR:
        if (nested)
            g_string_append_printf(out, "'%s'", fsim_pickle_get_str(v, NULL));
        else
            g_string_append(out, fsim_pickle_get_str(v, NULL));
        break;
    case FSIM_PICKLE_BYTES:
        g_string_append_printf(out, "<%" G_GSIZE_FORMAT " bytes>", n);
        break;
    case FSIM_PICKLE_LIST:
    case FSIM_PICKLE_TUPLE:
        g_string_append_c(out, fsim_pickle_type(v) == FSIM_PICKLE_LIST ? '[' : '(');
        for (gsize k = 0; ok && k < n; k++) {
            if (k > 0)
                g_string_append(out, ", ");
            ok = append_value(ld, out, fsim_pickle_item(v, k), TRUE, error);
        }
        g_string_append_c(out, fsim_pickle_type(v) == FSIM_PICKLE_LIST ? ']' : ')');
        break;
    case FSIM_PICKLE_DICT:
        g_string_append_c(out, '{');
        for (gsize k = 0; ok && k < n; k++) {
            if (k > 0)
                g_string_append(out, ", ");
            ok = append_value(ld, out, fsim_pickle_dict_key(v, k), TRUE, error) &&
                 (g_string_append(out, ": "),
                  append_value(ld, out, fsim_pickle_dict_value(v, k), TRUE, error));
        }
        g_string_append_c(out, '}');
        break;
    default:
        g_string_append_c(out, '?');
        break;
    }
    return ok;
}

typedef struct {
    uint64_t interval_mb; /* first: fsim_u64_compare() orders them */
    int64_t divisions;
} TorchRoundup;

/* roundup_power2_divisions as PYTORCH_CUDA_ALLOC_CONF writes it: the scalar form, or the list
 * form `[1:4,2:4,...]` with every interval the snapshot lists (PyTorch leaves unlisted intervals
 * between listed ones at 0, so all of them are written).  Nothing when all are 0. */
static void
append_roundup(GString *conf, const FsimPickleValue *v)
{
    g_autoptr(GArray) entries = g_array_new(FALSE, FALSE, sizeof(TorchRoundup));
    gboolean any = FALSE;
    int64_t scalar;

    if (fsim_pickle_get_int(v, &scalar)) {
        if (scalar > 0)
            g_string_append_printf(conf, "%sroundup_power2_divisions:%" G_GINT64_FORMAT,
                                   conf->len > 0 ? "," : "", scalar);
        return;
    }
    for (gsize k = 0; k < fsim_pickle_len(v) && fsim_pickle_type(v) == FSIM_PICKLE_DICT; k++) {
        const char *key = fsim_pickle_get_str(fsim_pickle_dict_key(v, k), NULL);
        TorchRoundup entry;

        if (key == NULL || !fsim_parse_u64(key, &entry.interval_mb) ||
            !fsim_pickle_get_int(fsim_pickle_dict_value(v, k), &entry.divisions))
            continue;
        any |= entry.divisions != 0;
        g_array_append_val(entries, entry);
    }
    if (!any)
        return;
    g_array_sort(entries, fsim_u64_compare);
    g_string_append_printf(conf, "%sroundup_power2_divisions:[", conf->len > 0 ? "," : "");
    for (guint k = 0; k < entries->len; k++) {
        const TorchRoundup *entry = &g_array_index(entries, TorchRoundup, k);

        g_string_append_printf(conf, "%s%" G_GUINT64_FORMAT ":%" G_GINT64_FORMAT, k ? "," : "",
                               entry->interval_mb, entry->divisions);
    }
    g_string_append_c(conf, ']');
}

/* PYTORCH_CUDA_ALLOC_CONF rebuilt from the settings that change placement. */
static char *
torch_alloc_conf(const FsimPickleValue *settings)
{
    const FsimPickleValue *conf_v = fsim_pickle_dict_get(settings, "PYTORCH_CUDA_ALLOC_CONF");
    const char *recorded = fsim_pickle_get_str(conf_v, NULL);
    GString *conf;
    gboolean expandable;
    int64_t max_split;
    double threshold;
    const FsimPickleValue *roundup;

    if (recorded != NULL && *recorded != '\0')
        return g_strdup(recorded);
    conf = g_string_new(NULL);
    if (fsim_pickle_get_bool(fsim_pickle_dict_get(settings, "expandable_segments"), &expandable) &&
        expandable)
        g_string_append(conf, "expandable_segments:True");
    /* -1 (and SIZE_MAX, which does not fit int64_t) mean unset. */
    if (fsim_pickle_get_int(fsim_pickle_dict_get(settings, "max_split_size"), &max_split) &&
        max_split >= 0)
        g_string_append_printf(conf, "%smax_split_size_mb:%" G_GINT64_FORMAT,
                               conf->len > 0 ? "," : "", max_split / (int64_t)FSIM_MiB);
    if (fsim_pickle_get_double(fsim_pickle_dict_get(settings, "garbage_collection_threshold"),
                               &threshold) &&
        threshold > 0) {
        g_string_append_printf(conf, "%sgarbage_collection_threshold:", conf->len > 0 ? "," : "");
        append_double(conf, threshold);
    }
    roundup = fsim_pickle_dict_get(settings, "roundup_power2_divisions");
    if (roundup != NULL)
        append_roundup(conf, roundup);
    return g_string_free(conf, FALSE);
}

static int
key_compare(gconstpointer a, gconstpointer b, gpointer data)
{
    (void)data;
    return strcmp(a, b);
}

gboolean
fsim_torch_read_settings(TorchLoader *ld, const FsimPickleValue *settings, GError **error)
{
    TorchTrace *trace = ld->trace;
    g_autoptr(GTree) sorted = NULL;
    gsize n = fsim_pickle_len(settings);

    if (fsim_pickle_type(settings) != FSIM_PICKLE_DICT)
        return fsim_torch_fail(ld, error, FSIM_TRACE_ERROR_TYPE, settings,
                               "'allocator_settings' is %s, expected a dict",
                               fsim_torch_type_name(settings));
    if (!fsim_torch_charge(ld, settings, 1 + (uint64_t)n, error))
        return FALSE;
    /* Sorted by key; a key set twice keeps its last value, as in Python. */
    sorted = g_tree_new_full(key_compare, NULL, g_free, g_free);
    for (gsize k = 0; k < n; k++) {
        const char *key = fsim_pickle_get_str(fsim_pickle_dict_key(settings, k), NULL);
        GString *value;

        if (key == NULL)
            continue;
        value = g_string_new(NULL);
        if (!append_value(ld, value, fsim_pickle_dict_value(settings, k), FALSE, error)) {
            g_string_free(value, TRUE);
            return FALSE;
        }
        g_tree_replace(sorted, g_strdup(key), g_string_free(value, FALSE));
    }
    trace->base.settings = g_ptr_array_new_with_free_func(g_free);
    for (GTreeNode *node = g_tree_node_first(sorted); node != NULL; node = g_tree_node_next(node)) {
        g_ptr_array_add(trace->base.settings, g_strdup(g_tree_node_key(node)));
        g_ptr_array_add(trace->base.settings, g_strdup(g_tree_node_value(node)));
    }
    trace->base.alloc_conf = torch_alloc_conf(settings);
    return TRUE;
}
