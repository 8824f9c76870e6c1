/* SPDX-License-Identifier: MIT */
/*
 * Bounded memory on hostile input, through the real binary: the NONE/POP bomb (a gzip-compressed
 * pickle of `PROTO 2, (NONE POP) x N, EMPTY_DICT, STOP`, scaled down from the 1.9 MB file that
 * once decompressed to 1.9 GiB and drove fragsim past 24 GB) read under `ulimit -v`, and a live
 * graph beyond --max-memory.  Each must end cleanly: exit 0 or 1 with a message, never a signal
 * (the kernel's OOM killer, an abort on a failed malloc, or SIGXCPU from the hang guard).
 */
#include <glib.h>
#include <glib/gstdio.h>

#include <gio/gio.h>
#include <string.h>
#include <sys/wait.h>

#include "test-util.h"

/* AddressSanitizer reserves terabytes of address space: no `ulimit -v` under it. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* Writes "\x80\x02" + @unit x @n + @tail, gzip-compressed, to @path. */
static void
write_gz_pickle(const char *path, const char *unit, gsize n, const char *tail)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GFile) file = g_file_new_for_path(path);
    g_autoptr(GFileOutputStream) raw =
        g_file_replace(file, NULL, FALSE, G_FILE_CREATE_NONE, NULL, &error);
    g_autoptr(GZlibCompressor) compressor = g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, 9);
    g_autoptr(GOutputStream) out = NULL;
    g_autoptr(GString) block = g_string_new(NULL);

    g_assert_no_error(error);
    out = g_converter_output_stream_new(G_OUTPUT_STREAM(raw), G_CONVERTER(compressor));
    g_assert_true(g_output_stream_write_all(out, "\x80\x02", 2, NULL, NULL, &error));
    for (gsize i = 0; i < 65536; i++)
        g_string_append(block, unit);
    for (gsize done = 0; done < n; done += 65536) {
        gsize k = MIN((gsize)65536, n - done);

        g_assert_true(
            g_output_stream_write_all(out, block->str, k * strlen(unit), NULL, NULL, &error));
    }
    g_assert_true(g_output_stream_write_all(out, tail, strlen(tail), NULL, NULL, &error));
    g_assert_true(g_output_stream_close(out, NULL, &error));
    g_assert_no_error(error);
}

/* Runs `fragsim ARGS` in a shell under @limits (e.g. "ulimit -v 1048576"); asserts that it
 * exited 0 or 1, never by a signal.  Returns the exit status; *@err gets stderr. */
static int
run_limited(const char *limits, const char *args, char **err)
{
    g_autofree char *script =
        g_strdup_printf("%s; exec '%s' %s >/dev/null", limits, fsim_test_binary(), args);
    g_autofree char *sh = g_strdup("/bin/sh");
    g_autofree char *c = g_strdup("-c");
    char *argv[] = {sh, c, script, NULL};
    g_autoptr(GError) error = NULL;
    int status = 0;

    g_assert_true(
        g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, err, &status, &error));
    g_assert_no_error(error);
    if (!WIFEXITED(status))
        g_error("fragsim %s (%s) ended by signal %d; stderr: %s", args, limits,
                WIFSIGNALED(status) ? WTERMSIG(status) : -1, *err);
    g_assert_cmpint(WEXITSTATUS(status), <=, 1);
    return WEXITSTATUS(status);
}

/* 64 MiB of (NONE POP) once decompressed: it took 1.38 GB before values were freed. */
static void
test_none_pop_bomb(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    g_autofree char *args = NULL;
    g_autofree char *err = NULL;
    int status;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    path = g_build_filename(dir, "bomb.pickle.gz", NULL);
    write_gz_pickle(path, "N0", 32 * 1024 * 1024, "}.");
    args = g_strdup_printf("info '%s'", path);
#if defined(UNDER_ASAN)
    status = run_limited("ulimit -t 120", args, &err);
#else
    status = run_limited("ulimit -t 120; ulimit -v 393216", args, &err);
#endif
    /* An empty dict is a snapshot with nothing in it: read, or refused with a message. */
    if (status == 1)
        g_assert_nonnull(strstr(err, "bomb.pickle.gz"));
    fsim_test_remove_tree(dir);
}

/* A live graph beyond the budget: 8 million values on the stack at once. */
static void
test_budget_exceeded(void)
{
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    g_autofree char *args = NULL;
    g_autofree char *err = NULL;

    if (!fsim_test_have_binary())
        return;
    dir = fsim_test_tmp_dir();
    path = g_build_filename(dir, "wide.pickle.gz", NULL);
    write_gz_pickle(path, "N", 8 * 1024 * 1024, "}.");
    args = g_strdup_printf("info --max-memory 64MiB '%s'", path);
    g_assert_cmpint(run_limited("ulimit -t 120", args, &err), ==, 1);
    g_assert_nonnull(strstr(err, "wide.pickle.gz"));
    g_assert_nonnull(strstr(err, "memory budget of 64 MiB"));
    fsim_test_remove_tree(dir);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/limits/none-pop-bomb", test_none_pop_bomb);
    g_test_add_func("/limits/budget-exceeded", test_budget_exceeded);
    return g_test_run();
}
