/* SPDX-License-Identifier: MIT */
/*
 * The HTML report rendered in a real browser: headless Chromium loads a copy of the page with a
 * small check script added around it, which writes what it finds into the page; Chromium prints
 * the page's DOM after loading (--dump-dom) and the test reads the findings back.  A report
 * fails on a broken image, a broken link or anchor, a script error (the report has no script,
 * but any that appeared would be checked), a table without rows, or a page wider than the window
 * (with every <details> opened, so nothing hides).  A deliberately broken page checks the
 * checker: each fault must be found.
 *
 * CTest label `browser`.  Without Chromium the binary exits 77 (CTest: skipped), except where a
 * skip is not acceptable (CI=true or FRAGSIM_REQUIRE_LABELLED=1): it fails there.
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <string.h>

#include "fragsim/fragsim.h"

#include "test-util.h"

/* Installed first in <head>: records every error (script errors, resources that fail). */
static const char check_head[] =
    "<script>window.__fsimErrors=[];window.addEventListener('error',function(e){"
    "var t=e.target;if(t&&t!==window&&(t.src||t.href)){return;}"
    "window.__fsimErrors.push(String(e.message||e.type));},true);</script>\n";

/* Run once the page and its images have loaded; writes <pre id="fsim-check">. */
static const char check_tail[] =
    "<script>window.addEventListener('load',function(){var out=[];"
    "window.__fsimErrors.forEach(function(e){out.push('script error: '+e);});"
    "Array.prototype.forEach.call(document.querySelectorAll('details'),function(d){d.open=true;});"
    "Array.prototype.forEach.call(document.images,function(i){"
    "if(!i.complete||i.naturalWidth===0){out.push('broken image: '+i.getAttribute('src'));}});"
    "Array.prototype.forEach.call(document.querySelectorAll('a[href]'),function(a){"
    "var h=a.getAttribute('href');if(h.charAt(0)==='#'){"
    "if(!document.getElementById(decodeURIComponent(h.slice(1)))){out.push('broken anchor: '+h);}"
    "return;}if(/^[a-z]+:/i.test(h)){out.push('link off the page: '+h);return;}"
    "try{var x=new XMLHttpRequest();x.open('GET',h,false);x.send();"
    "if(x.status!==0&&x.status!==200){out.push('broken link: '+h);}}"
    "catch(err){out.push('broken link: '+h);}});"
    "Array.prototype.forEach.call(document.querySelectorAll('table'),function(t,k){"
    "if(t.querySelectorAll('tbody tr').length===0){out.push('table without rows: '+k);}});"
    "var w=document.documentElement.scrollWidth;if(w>window.innerWidth){"
    "out.push('page wider than the window: '+w+' > '+window.innerWidth);}"
    "var p=document.createElement('pre');p.id='fsim-check';p.textContent='FSIM-BEGIN\\n'+"
    "out.join('\\n')+'\\nFSIM-END images='+document.images.length+' tables='+"
    "document.querySelectorAll('table').length;document.body.appendChild(p);});</script>\n";

typedef struct {
    GPtrArray *problems; /* char* */
    guint images;
    guint tables;
} PageCheck;

static void
page_check_clear(PageCheck *check)
{
    g_clear_pointer(&check->problems, g_ptr_array_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(PageCheck, page_check_clear)

static char *
find_chromium(void)
{
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome"};
    const char *forced = g_getenv("FRAGSIM_CHROMIUM");

    if (forced != NULL && *forced != '\0')
        return g_find_program_in_path(forced);
    for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
        char *path = g_find_program_in_path(names[i]);

        if (path != NULL)
            return path;
    }
    return NULL;
}

/* The text of the <pre id="fsim-check"> element of a dumped DOM, entities decoded. */
static char *
extract_findings(const char *dom)
{
    static const char *const entities[][2] = {
        {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}};
    const char *start = strstr(dom, "<pre id=\"fsim-check\">");
    const char *end;
    g_autofree char *text = NULL;

    if (start == NULL)
        return NULL;
    start += strlen("<pre id=\"fsim-check\">");
    end = strstr(start, "</pre>");
    g_assert_nonnull(end);
    text = g_strndup(start, (gsize)(end - start));
    for (gsize i = 0; i < G_N_ELEMENTS(entities); i++) {
        g_auto(GStrv) parts = g_strsplit(text, entities[i][0], -1);

        g_free(text);
        text = g_strjoinv(entities[i][1], parts);
    }
    return g_steal_pointer(&text);
}

/* Load @page (an HTML file) in headless Chromium with the checks added; fills @check. */
static void
check_page(const char *page, PageCheck *check)
{
    g_autofree char *chromium = find_chromium();
    g_autofree char *timeout = g_find_program_in_path("timeout");
    g_autofree char *dir = g_path_get_dirname(page);
    g_autofree char *copy = g_build_filename(dir, "fsim-browser-check.html", NULL);
    g_autofree char *profile = fsim_test_tmp_dir();
    g_autofree char *profile_arg = g_strconcat("--user-data-dir=", profile, NULL);
    g_autofree char *html = NULL;
    g_autofree char *url = NULL;
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autofree char *findings = NULL;
    g_autoptr(GString) page_text = NULL;
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) lines = NULL;
    const char *head;
    int status = 0;

    g_assert_nonnull(chromium);
    g_assert_true(g_file_get_contents(page, &html, NULL, NULL));
    page_text = g_string_new(html);
    head = strstr(page_text->str, "<head>");
    g_assert_nonnull(head);
    g_string_insert(page_text, head - page_text->str + (gssize)strlen("<head>"), check_head);
    g_assert_nonnull(strstr(page_text->str, "</body>"));
    g_string_insert(page_text, strstr(page_text->str, "</body>") - page_text->str, check_tail);
    g_assert_true(g_file_set_contents(copy, page_text->str, (gssize)page_text->len, NULL));
    url = g_filename_to_uri(copy, NULL, &error);
    g_assert_no_error(error);
    if (timeout != NULL) {
        g_ptr_array_add(argv, g_strdup(timeout));
        g_ptr_array_add(argv, g_strdup("120"));
    }
    g_ptr_array_add(argv, g_strdup(chromium));
    g_ptr_array_add(argv, g_strdup("--headless"));
    g_ptr_array_add(argv, g_strdup("--no-sandbox"));
    g_ptr_array_add(argv, g_strdup("--disable-gpu"));
    g_ptr_array_add(argv, g_strdup("--allow-file-access-from-files"));
    g_ptr_array_add(argv, g_strdup("--disable-background-networking"));
    g_ptr_array_add(argv, g_strdup("--disable-component-update"));
    g_ptr_array_add(argv, g_strdup("--disable-sync"));
    g_ptr_array_add(argv, g_strdup("--no-first-run"));
    g_ptr_array_add(argv, g_strdup(profile_arg));
    g_ptr_array_add(argv, g_strdup("--window-size=1280,900"));
    g_ptr_array_add(argv, g_strdup("--virtual-time-budget=10000"));
    g_ptr_array_add(argv, g_strdup("--dump-dom"));
    g_ptr_array_add(argv, g_strdup(url));
    g_ptr_array_add(argv, NULL);
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                               &err, &status, &error));
    g_assert_no_error(error);
    findings = extract_findings(out);
    if (findings == NULL) {
        g_test_message("chromium (status %d): %s", status, err);
        g_assert_not_reached();
    }
    check->problems = g_ptr_array_new_with_free_func(g_free);
    lines = g_strsplit(findings, "\n", -1);
    for (gsize i = 0; lines[i] != NULL; i++) {
        if (strcmp(lines[i], "FSIM-BEGIN") == 0 || *lines[i] == '\0')
            continue;
        if (sscanf(lines[i], "FSIM-END images=%u tables=%u", &check->images, &check->tables) == 2)
            continue;
        g_test_message("%s: %s", page, lines[i]);
        g_ptr_array_add(check->problems, g_strdup(lines[i]));
    }
    (void)g_unlink(copy);
    fsim_test_remove_tree(profile);
}

static gboolean
has_problem(const PageCheck *check, const char *prefix)
{
    for (guint i = 0; i < check->problems->len; i++)
        if (g_str_has_prefix(check->problems->pdata[i], prefix))
            return TRUE;
    return FALSE;
}

static void
replay_ok(const char *const *args)
{
    g_auto(FsimTestRun) r = fsim_test_run_argv(NULL, args);

    if (r.status != 0 && r.status != 3)
        g_test_message("fragsim %s: %s", args[0], r.err);
    g_assert_true(r.status == 0 || r.status == 3);
}

/* The report of the sample traces (and of a real snapshot, where they are at hand). */
static void
test_report(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *db = g_build_filename(dir, "results.db", NULL);
    g_autofree char *out = g_build_filename(dir, "report", NULL);
    g_autofree char *index = g_build_filename(out, "index.html", NULL);
    const char *source = g_getenv("FRAGSIM_SOURCE_DIR");
    g_autofree char *fragmenting = g_build_filename(source, "traces", "fragmenting.trace", NULL);
    g_autofree char *oom = g_build_filename(source, "traces", "small-device-oom.trace", NULL);
    g_autofree char *gnuplot = g_find_program_in_path("gnuplot");
    g_autofree char *snapshot = NULL;
    g_auto(PageCheck) check = {0};

    replay_ok((const char *const[]){"replay", fragmenting, "-p", "caching,bestfit,paged", "-c", "",
                                    "-c", "expandable_segments:True", "--db", db, NULL});
    replay_ok((const char *const[]){"replay", oom, "-p", "bestfit,caching", "-d", "t4-16gb", "--db",
                                    db, NULL});
    if (g_getenv("FRAGSIM_SHARED_TRACES") != NULL && *g_getenv("FRAGSIM_SHARED_TRACES") != '\0') {
        snapshot = g_build_filename(g_getenv("FRAGSIM_SHARED_TRACES"),
                                    "Constructor-Sun__code_location__memory_snapshot.pickle", NULL);
        replay_ok((const char *const[]){"replay", snapshot, "-p", "caching,expandable", "--db", db,
                                        NULL});
    }
    replay_ok((const char *const[]){"report", "--db", db, "-o", out, NULL});
    check_page(index, &check);
    g_assert_cmpuint(check.problems->len, ==, 0);
    g_assert_cmpuint(check.tables, >=, 3);
    /* with gnuplot, every plot of the page was loaded and decoded by the browser */
    if (gnuplot != NULL)
        g_assert_cmpuint(check.images, >=, 8);
    fsim_test_remove_tree(dir);
}

/* The checker finds each fault it is there to find. */
static void
test_checker_catches(void)
{
    g_autofree char *dir = fsim_test_tmp_dir();
    g_autofree char *page = g_build_filename(dir, "bad.html", NULL);
    g_auto(PageCheck) check = {0};

    g_assert_true(g_file_set_contents(
        page,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>bad</title></head><body>\n"
        "<img src=\"missing.png\" alt=\"missing\">\n<a href=\"#nowhere\">anchor</a>\n"
        "<a href=\"missing.html\">file</a>\n<table><thead><tr><th>x</th></tr></thead><tbody>"
        "</tbody></table>\n<details><summary>more</summary><div style=\"width:3000px\">wide"
        "</div></details>\n<script>undefined_function();</script>\n</body></html>\n",
        -1, NULL));
    check_page(page, &check);
    g_assert_true(has_problem(&check, "broken image: missing.png"));
    g_assert_true(has_problem(&check, "broken anchor: #nowhere"));
    g_assert_true(has_problem(&check, "broken link: missing.html"));
    g_assert_true(has_problem(&check, "table without rows: 0"));
    g_assert_true(has_problem(&check, "page wider than the window"));
    g_assert_true(has_problem(&check, "script error:"));
    g_assert_cmpuint(check.problems->len, ==, 6);
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_autofree char *chromium = find_chromium();

    g_test_init(&argc, &argv, NULL);
    if (chromium == NULL) {
        gboolean required = g_strcmp0(g_getenv("CI"), "true") == 0 ||
                            g_strcmp0(g_getenv("FRAGSIM_REQUIRE_LABELLED"), "1") == 0;

        g_printerr("test-report-browser: chromium not found (Debian: apt-get install chromium)%s\n",
                   required ? "; required here (CI=true or FRAGSIM_REQUIRE_LABELLED=1)" : "");
        return required ? 1 : 77;
    }
    g_test_add_func("/browser/checker-catches", test_checker_catches);
    g_test_add_func("/browser/report", test_report);
    return g_test_run();
}
