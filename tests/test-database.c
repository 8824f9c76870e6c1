/* SPDX-License-Identifier: MIT */
/*
 * The results database as users read it: the breakdown of reserved memory at each run's peak
 * (`run_breakdown`, exact to the byte), compact samples that keep every peak, the phases between
 * marks (warm-up and steady state), the `recorded` run of a snapshot, the stable views and
 * `fragsim export --csv`.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <sqlite3.h>
#include <string.h>

#include "fragsim/fragsim.h"

#include "test-util.h"

#define MiB ((uint64_t)1 << 20)

/* The first column of the first row of @sql as an integer (-1 for NULL or no row). */
static int64_t
sql_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    int64_t value = -1;

    g_assert_cmpint(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), ==, SQLITE_OK);
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_type(stmt, 0) != SQLITE_NULL)
        value = sqlite3_column_int64(stmt, 0);
    g_assert_cmpint(sqlite3_finalize(stmt), ==, SQLITE_OK);
    return value;
}

static sqlite3 *
db_open(const char *path)
{
    sqlite3 *db = NULL;

    g_assert_cmpint(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), ==, SQLITE_OK);
    return db;
}

static void
replay_into(const char *db, const char *trace, const char *const *extra)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
    g_auto(FsimTestRun) r = {0};

    g_ptr_array_add(args, g_strdup("replay"));
    g_ptr_array_add(args, g_strdup(trace));
    for (gsize i = 0; extra[i] != NULL; i++)
        g_ptr_array_add(args, g_strdup(extra[i]));
    g_ptr_array_add(args, g_strdup("--db"));
    g_ptr_array_add(args, g_strdup(db));
    g_ptr_array_add(args, NULL);
    r = fsim_test_run_argv(NULL, (const char *const *)args->pdata);
    if (r.status != 0 && r.status != 3)
        g_test_message("fragsim replay: %s", r.err);
    g_assert_true(r.status == 0 || r.status == 3);
}

static char *
write_trace(const char *dir, const char *name, const char *text)
{
    char *path = g_build_filename(dir, name, NULL);

    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    return path;
}

/* PyTorch's devlog case: 8 x 16 MiB allocated and freed, then 4 x 32 MiB.  Under caching the peak
 * holds 256 MiB: the 128 MiB live and the eight empty 16 MiB segments, all releasable. */
static void
test_breakdown_worked_case(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "r.db", NULL);
    g_autoptr(GString) text = g_string_new("fragsim-trace v1\n");
    g_autofree char *trace = NULL;
    sqlite3 *s;

    for (int i = 1; i <= 8; i++)
        g_string_append_printf(text, "%d alloc %d %" G_GUINT64_FORMAT " 0\n", i * 10, i, 16 * MiB);
    for (int i = 1; i <= 8; i++)
        g_string_append_printf(text, "%d free %d 0\n", 100 + i, i);
    for (int i = 9; i <= 12; i++)
        g_string_append_printf(text, "%d alloc %d %" G_GUINT64_FORMAT " 0\n", 200 + i, i, 32 * MiB);
    trace = write_trace(dir, "devlog.trace", text->str);
    replay_into(db, trace, (const char *const[]){"-p", "caching,direct", "--no-needed", NULL});
    s = db_open(db);
    g_assert_cmpint(sql_int(s, "SELECT reserved_bytes FROM run_breakdown WHERE run_id = 1"), ==,
                    256 * MiB);
    g_assert_cmpint(sql_int(s, "SELECT live_requested_bytes FROM run_breakdown WHERE run_id = 1"),
                    ==, 128 * MiB);
    g_assert_cmpint(sql_int(s, "SELECT rounding_bytes FROM run_breakdown WHERE run_id = 1"), ==, 0);
    g_assert_cmpint(sql_int(s, "SELECT free_releasable_bytes FROM run_breakdown WHERE run_id = 1"),
                    ==, 128 * MiB);
    g_assert_cmpint(sql_int(s, "SELECT free_pinned_bytes FROM run_breakdown WHERE run_id = 1"), ==,
                    0);
    /* the last allocation is the peak: trace line 21 */
    g_assert_cmpint(sql_int(s, "SELECT peak_event_index FROM run_results WHERE run_id = 1"), ==,
                    sql_int(s, "SELECT max(event_index_last) FROM samples WHERE run_id = 1"));
    /* direct cannot describe its memory, but holds nothing free: its breakdown is exact too */
    g_assert_cmpint(sql_int(s, "SELECT live_requested_bytes + rounding_bytes FROM run_breakdown "
                               "WHERE run_id = 2"),
                    ==, sql_int(s, "SELECT reserved_bytes FROM run_breakdown WHERE run_id = 2"));
    g_assert_cmpint(sql_int(s, "SELECT free_pinned_bytes FROM run_breakdown WHERE run_id = 2"), ==,
                    0);
    g_assert_cmpint(sqlite3_close(s), ==, SQLITE_OK);
    fsim_test_remove_tree(dir);
}

/* Every stored breakdown adds up to the reserved bytes at its moment, which is the run's peak. */
static void
check_breakdowns(const char *db, guint expected_at_least)
{
    sqlite3 *s = db_open(db);

    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_breakdown"), >=, expected_at_least);
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_breakdown WHERE live_requested_bytes + "
                               "rounding_bytes + free_releasable_bytes + free_pinned_bytes != "
                               "reserved_bytes"),
                    ==, 0);
    /* the moment is the peak: no sample holds more after an event, and none reaches it sooner */
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_breakdown b JOIN run_metrics m ON "
                               "m.run_id = b.run_id WHERE b.reserved_bytes > m.peak_reserved_bytes"
                               " OR b.reserved_bytes < (SELECT max(reserved) FROM samples s "
                               "WHERE s.run_id = b.run_id)"),
                    ==, 0);
    g_assert_cmpint(sqlite3_close(s), ==, SQLITE_OK);
}

static void
test_breakdown_sample_traces(void)
{
    static const char *const traces[] = {"fragmenting.trace", "multi-stream.trace",
                                         "small-device-oom.trace"};
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "r.db", NULL);
    const char *source = g_getenv("FRAGSIM_SOURCE_DIR");

    g_assert_nonnull(source);
    for (gsize i = 0; i < G_N_ELEMENTS(traces); i++) {
        g_autofree char *trace = g_build_filename(source, "traces", traces[i], NULL);

        replay_into(db, trace,
                    (const char *const[]){"-p", "caching,expandable,bestfit", "-d", "t4-16gb",
                                          "--no-needed", NULL});
    }
    check_breakdowns(db, 9);
    fsim_test_remove_tree(dir);
}

static void
test_breakdown_snapshots(void)
{
    static const char *const names[] = {
        "Constructor-Sun__code_location__memory_snapshot.pickle",
        "Muduard__LayoutEditing__memory_snapshot.pkl",
        "Yiyi-philosophy__LLM-inference__oom_snapshot.pickle",
    };
    g_autofree char *dir = NULL;
    g_autofree char *db = NULL;

    if (fsim_test_shared_dir() == NULL)
        return;
    dir = fsim_test_tmp_dir();
    db = g_build_filename(dir, "r.db", NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *trace = fsim_test_shared_trace(names[i]);

        replay_into(db, trace,
                    (const char *const[]){"-p", "caching,expandable", "--no-needed", NULL});
    }
    /* every model run of the five trace devices has one */
    check_breakdowns(db, 10);
    {
        sqlite3 *s = db_open(db);

        /* the recording itself is stored beside the models, known by its metrics (the three
         * devices of the snapshot with segment events) */
        g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_results WHERE policy = 'recorded' "
                                   "AND status = 'complete' AND peak_reserved_bytes > 0"),
                        ==, 3);
        g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_breakdown b JOIN runs r ON r.id = "
                                   "b.run_id WHERE r.policy IN ('caching', 'expandable')"),
                        ==,
                        sql_int(s, "SELECT count(*) FROM runs WHERE policy IN ('caching', "
                                   "'expandable')"));
        g_assert_cmpint(sqlite3_close(s), ==, SQLITE_OK);
    }
    fsim_test_remove_tree(dir);
}

/* Samples are few (at most 1,001 per run by default) and keep every peak exactly. */
static void
test_samples_compact(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "r.db", NULL);
    const char *source = g_getenv("FRAGSIM_SOURCE_DIR");
    g_autofree char *trace = g_build_filename(source, "traces", "fragmenting.trace", NULL);
    sqlite3 *s;

    replay_into(db, trace, (const char *const[]){"-p", "caching,paged", "--no-needed", NULL});
    s = db_open(db);
    g_assert_cmpint(sql_int(s, "SELECT max(n) FROM (SELECT count(*) AS n FROM samples GROUP BY "
                               "run_id)"),
                    <=, FSIM_STORE_DEFAULT_SAMPLES + 1);
    g_assert_cmpint(sql_int(s, "SELECT max(n) FROM (SELECT count(*) AS n FROM samples GROUP BY "
                               "run_id)"),
                    >=, FSIM_STORE_DEFAULT_SAMPLES / 2);
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_metrics m WHERE m.peak_reserved_bytes "
                               "!= (SELECT max(reserved_max) FROM samples s WHERE s.run_id = "
                               "m.run_id) OR m.peak_allocated_bytes != (SELECT max(allocated_max) "
                               "FROM samples s WHERE s.run_id = m.run_id) OR "
                               "m.peak_requested_bytes != (SELECT max(requested_max) FROM "
                               "samples s WHERE s.run_id = m.run_id)"),
                    ==, 0);
    /* the buckets follow each other without overlap */
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM samples a JOIN samples b ON b.run_id = "
                               "a.run_id AND b.seq = a.seq + 1 WHERE b.event_index <= "
                               "a.event_index_last OR a.event_index_last < a.event_index"),
                    ==, 0);
    g_assert_cmpint(sqlite3_close(s), ==, SQLITE_OK);
    fsim_test_remove_tree(dir);
}

/* The marks cut a run into phases whose figures add up to the run's. */
static void
test_phases(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "r.db", NULL);
    const char *source = g_getenv("FRAGSIM_SOURCE_DIR");
    g_autofree char *trace = g_build_filename(source, "traces", "fragmenting.trace", NULL);
    g_autofree char *plain =
        write_trace(dir, "plain.trace", "fragsim-trace v1\n0 alloc 1 1000 0\n1 free 1 0\n");
    sqlite3 *s;

    replay_into(db, trace, (const char *const[]){"-p", "caching,expandable", "--no-needed", NULL});
    replay_into(db, plain, (const char *const[]){"-p", "caching", "--no-needed", NULL});
    s = db_open(db);
    /* fragmenting.trace: `prefill`, then a mark every 32 tokens */
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM phase_results WHERE run_id = 1 AND "
                               "stage = 'warm-up' AND mark = 'prefill'"),
                    ==, 1);
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM phase_results WHERE run_id = 1 AND "
                               "stage = 'steady'"),
                    >=, 5);
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_metrics m WHERE m.run_id <= 2 AND ("
                               "m.peak_reserved_bytes != (SELECT max(peak_reserved_bytes) FROM "
                               "run_phases p WHERE p.run_id = m.run_id) OR m.device_mallocs + "
                               "m.device_frees + m.device_maps + m.device_unmaps != (SELECT "
                               "sum(driver_calls) FROM run_phases p WHERE p.run_id = m.run_id))"),
                    ==, 0);
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_results WHERE run_id <= 2 AND "
                               "warmup_peak_reserved_bytes > 0 AND steady_peak_reserved_bytes > "
                               "0 AND phases >= 6"),
                    ==, 2);
    /* without marks: no phases */
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_phases WHERE run_id = 3"), ==, 0);
    g_assert_cmpint(sql_int(s, "SELECT phases FROM run_results WHERE run_id = 3"), ==, 0);
    g_assert_cmpint(sqlite3_close(s), ==, SQLITE_OK);
    fsim_test_remove_tree(dir);
}

/* ---- views and CSV ------------------------------------------------------------------------- */

/* Split one CSV record at @p (RFC 4180); *@end: past its line break. */
static GPtrArray *
csv_record(const char *p, const char **end)
{
    GPtrArray *fields = g_ptr_array_new_with_free_func(g_free);
    GString *field = g_string_new(NULL);

    for (;;) {
        if (*p == '"') {
            for (p++;; p++) {
                g_assert_true(*p != '\0');
                if (*p == '"' && p[1] == '"') {
                    g_string_append_c(field, '"');
                    p++;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    g_string_append_c(field, *p);
                }
            }
        } else {
            while (*p != ',' && *p != '\r' && *p != '\n' && *p != '\0')
                g_string_append_c(field, *p++);
        }
        g_ptr_array_add(fields, g_string_free(field, FALSE));
        field = g_string_new(NULL);
        if (*p == ',') {
            p++;
            continue;
        }
        /* every record ends in CRLF */
        g_assert_cmpint(p[0], ==, '\r');
        g_assert_cmpint(p[1], ==, '\n');
        *end = p + 2;
        break;
    }
    g_string_free(field, TRUE);
    return fields;
}

static gint
field_index(GPtrArray *header, const char *name)
{
    for (guint i = 0; i < header->len; i++)
        if (strcmp(header->pdata[i], name) == 0)
            return (gint)i;
    return -1;
}

static void
test_export(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "r.db", NULL);
    g_autofree char *csv = g_build_filename(dir, "csv", NULL);
    g_autofree char *file = g_build_filename(csv, "run_results.csv", NULL);
    const char *source = g_getenv("FRAGSIM_SOURCE_DIR");
    g_autofree char *oom = g_build_filename(source, "traces", "small-device-oom.trace", NULL);
    g_autofree char *body = NULL;
    g_autofree char *odd = NULL;
    g_autoptr(GPtrArray) header = NULL;
    g_auto(FsimTestRun) r = {0};
    const char *p;
    gsize n;
    const FsimMetricInfo *info = fsim_metrics_list(&n);
    guint rows = 0;

    {
        g_autofree char *text = NULL;

        g_assert_true(g_file_get_contents(oom, &text, NULL, NULL));
        /* a name with a comma, a quote and a line break must survive CSV */
        odd = write_trace(dir, "we,i\"rd\nname.trace", text);
    }
    replay_into(db, odd,
                (const char *const[]){"-p", "bestfit,paged", "-d", "t4-16gb", "--no-needed", NULL});
    r = fsim_test_run("export", "--db", db, "--csv", csv, NULL);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_nonnull(strstr(r.out, "run_results.csv  2 rows"));
    g_assert_true(g_file_get_contents(file, &body, NULL, NULL));
    header = csv_record(body, &p);
    /* one column per metric, with the run's identity */
    for (gsize i = 0; i < n; i++)
        g_assert_cmpint(field_index(header, info[i].name), >=, 0);
    g_assert_cmpint(field_index(header, "label"), >=, 0);
    g_assert_cmpint(field_index(header, "config"), >=, 0);
    g_assert_cmpint(field_index(header, "status"), >=, 0);
    g_assert_cmpint(field_index(header, "free_pinned_bytes_at_peak"), >=, 0);
    while (*p != '\0') {
        g_autoptr(GPtrArray) row = csv_record(p, &p);

        g_assert_cmpuint(row->len, ==, header->len);
        g_assert_cmpstr(row->pdata[field_index(header, "trace")], ==, odd);
        g_assert_cmpstr(row->pdata[field_index(header, "status")], ==, "complete");
        rows++;
    }
    g_assert_cmpuint(rows, ==, 2);
    /* OOMs: bestfit runs out on the T4 (README), one line per OOM */
    {
        g_autofree char *ooms_path = g_build_filename(csv, "run_ooms.csv", NULL);
        g_autofree char *ooms = NULL;
        g_autoptr(GPtrArray) h = NULL;
        g_autoptr(GPtrArray) first = NULL;

        g_assert_true(g_file_get_contents(ooms_path, &ooms, NULL, NULL));
        h = csv_record(ooms, &p);
        g_assert_cmpint(field_index(h, "size_bytes"), >=, 0);
        first = csv_record(p, &p);
        g_assert_cmpstr(first->pdata[field_index(h, "run_label")], ==, "bestfit");
    }
    /* every view has its file, samples included */
    {
        gsize nv;
        const char *const *views = fsim_store_view_names(&nv);

        g_assert_cmpuint(nv, ==, 5);
        for (gsize i = 0; i < nv; i++) {
            g_autofree char *name = g_strconcat(views[i], ".csv", NULL);
            g_autofree char *path = g_build_filename(csv, name, NULL);

            g_assert_true(g_file_test(path, G_FILE_TEST_IS_REGULAR));
        }
    }
    /* the pools' view: its columns, and no row for runs without private pools */
    {
        g_autofree char *pools_path = g_build_filename(csv, "pool_results.csv", NULL);
        g_autofree char *pools = NULL;
        g_autoptr(GPtrArray) h = NULL;

        g_assert_true(g_file_get_contents(pools_path, &pools, NULL, NULL));
        h = csv_record(pools, &p);
        g_assert_cmpint(field_index(h, "run_label"), >=, 0);
        g_assert_cmpint(field_index(h, "needed_bytes"), >=, 0);
        g_assert_cmpint(field_index(h, "use_count"), >=, 0);
        g_assert_cmpstr(p, ==, "");
    }
    fsim_test_run_clear(&r);
    r = fsim_test_run("export", "--db", db, NULL);
    g_assert_cmpint(r.status, ==, 2);
    fsim_test_run_clear(&r);
    r = fsim_test_run("export", "--db", "/nonexistent/x.db", "--csv", csv, NULL);
    g_assert_cmpint(r.status, ==, 1);
    g_assert_nonnull(strstr(r.err, "no such results database"));
    fsim_test_remove_tree(dir);
}

/* The views: one row per run with every metric; samples and OOMs as stored. */
static void
test_views(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "r.db", NULL);
    const char *source = g_getenv("FRAGSIM_SOURCE_DIR");
    g_autofree char *oom = g_build_filename(source, "traces", "small-device-oom.trace", NULL);
    sqlite3 *s;
    gsize n;
    const FsimMetricInfo *info = fsim_metrics_list(&n);

    replay_into(db, oom,
                (const char *const[]){"-p", "bestfit,caching", "-c", "", "-c",
                                      "max_split_size_mb:64", "-d", "t4-16gb", NULL});
    s = db_open(db);
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_results"), ==,
                    sql_int(s, "SELECT count(*) FROM runs"));
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_results WHERE label = 'caching "
                               "max_split_size_mb:64' AND config = 'max_split_size_mb:64'"),
                    ==, 1);
    for (gsize i = 0; i < n; i++) {
        g_autofree char *sql = g_strdup_printf(
            "SELECT count(*) FROM pragma_table_info('run_results') WHERE name = '%s'",
            info[i].name);

        g_assert_cmpint(sql_int(s, sql), ==, 1);
    }
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_samples"), ==,
                    sql_int(s, "SELECT count(*) FROM samples"));
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_ooms"), ==,
                    sql_int(s, "SELECT sum(min(ooms, 10000)) FROM run_metrics"));
    g_assert_cmpint(sql_int(s, "SELECT count(*) FROM run_ooms"), >, 0);
    g_assert_cmpint(sqlite3_close(s), ==, SQLITE_OK);
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/database/breakdown/worked-case", test_breakdown_worked_case);
    g_test_add_func("/database/breakdown/sample-traces", test_breakdown_sample_traces);
    g_test_add_func("/database/breakdown/snapshots", test_breakdown_snapshots);
    g_test_add_func("/database/samples/compact", test_samples_compact);
    g_test_add_func("/database/phases", test_phases);
    g_test_add_func("/database/views", test_views);
    g_test_add_func("/database/export", test_export);
    return g_test_run();
}
