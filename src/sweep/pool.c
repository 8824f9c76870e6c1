/* SPDX-License-Identifier: MIT */
/*
 * Running a sweep's jobs: one worker process per job (fork), at most N at a time.
 *
 * Why processes: a crash, an abort or the kernel's OOM killer in one job costs that job only;
 * each worker has its own address space, so nothing a policy does can corrupt another job's
 * figures; and the engine need not be thread-safe.  Why fork without exec: the worker already
 * has the parsed spec, so a job starts in well under a millisecond.  The parent holds no
 * database connection and has started no thread when it forks (it hashes traces with plain
 * stdio), which is what makes a fork without exec safe with GLib and SQLite.
 *
 * The database: every worker opens it itself and writes each run in its own transaction
 * (sqlite.c allows any number of concurrent writers), so writes never serialise the replays,
 * which take the time.  The parent opens it only to create it before the first fork and to record
 * an error run for a worker that died (signal, or an exit without its own error record).
 */
/* fork(), waitpid(), kill() */
#define _XOPEN_SOURCE 700

#include <glib.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fragsim/store.h"

#include "sweep.h"

/* A worker's exit status: done, done with runs in error (recorded), could not write. */
#define WORKER_OK     0
#define WORKER_FAILED 6
#define WORKER_BROKEN 1

/* The job a worker runs, in the worker.  FRAGSIM_SWEEP_KILL_JOB=INDEX makes the worker of that
 * job kill itself (SIGKILL) before it writes anything: how the tests check that a dying worker
 * costs only its job and is recorded as an error. */
static int
sweep_worker(const FsimSweepSpec *spec, const FsimSweepJob *job, const char *sha256,
             const char *db_path)
{
    g_autoptr(GError) error = NULL;
    FsimStore *store = fsim_store_open(db_path, FSIM_STORE_WRITE, NULL, &error);
    const char *kill_job = g_getenv("FRAGSIM_SWEEP_KILL_JOB");
    guint failed = 0;
    gboolean ok;

    if (store == NULL) {
        g_printerr("fragsim sweep: job %u: %s\n", job->index + 1, error->message);
        return WORKER_BROKEN;
    }
    if (kill_job != NULL && g_ascii_strtoull(kill_job, NULL, 10) == job->index)
        (void)kill(getpid(), SIGKILL);
    ok = fsim_sweep_run_job(store, spec, job, sha256, &failed, &error);
    fsim_store_close(store);
    if (!ok) {
        g_printerr("fragsim sweep: job %u: %s\n", job->index + 1, error->message);
        return WORKER_BROKEN;
    }
    return failed > 0 ? WORKER_FAILED : WORKER_OK;
}

/* Why a worker failed without recording it, as a message for its error run. */
static char *
worker_death(int status)
{
    if (WIFSIGNALED(status))
        return g_strdup_printf("the worker process running this job died: signal %d (%s)",
                               WTERMSIG(status), g_strsignal(WTERMSIG(status)));
    return g_strdup_printf("the worker process running this job exited with status %d",
                           WEXITSTATUS(status));
}

/* Records @job as an error run: its worker died before it could.  Runs it left `running` become
 * the error (fsim_store_record_error_run()). */
static gboolean
sweep_record_death(const FsimSweepSpec *spec, const FsimSweepJob *job, const char *sha256,
                   const char *db_path, int status, GError **error)
{
    g_autoptr(FsimStore) store = fsim_store_open(db_path, FSIM_STORE_WRITE, NULL, error);
    g_autofree char *message = worker_death(status);
    g_autofree char *label = NULL;
    const char *config = job->config != NULL ? job->config->text : "";
    FsimStoreRunInfo info = {
        .trace = job->trace->path,
        .trace_device = spec->trace_device >= 0 ? (uint32_t)spec->trace_device : 0,
        .policy = job->policy,
        .config = config,
        .seed = -1,
        .trace_sha256 = sha256,
        .job = job->trace->job,
    };

    if (store == NULL)
        return FALSE;
    label = fsim_run_label(job->policy, config);
    info.label = label;
    g_printerr("fragsim sweep: %s: %s on %s: %s\n", job->trace->path, label, job->device->name,
               message);
    return fsim_store_record_error_run(store, &info, job->device, message, error);
}

/* The trace's SHA-256, computed once per trace (NULL when it cannot be read: the worker then
 * records the error). */
static const char *
sweep_hash(GHashTable *hashes, const FsimSweepTrace *trace)
{
    char *sha256;

    if (g_hash_table_contains(hashes, trace->path))
        return g_hash_table_lookup(hashes, trace->path);
    sha256 = fsim_sweep_file_sha256(trace->path, NULL);
    g_hash_table_insert(hashes, g_strdup(trace->path), sha256);
    return sha256;
}

/* Starts the worker of @job, the @position-th of the list; @workers maps its pid to
 * @position + 1. */
static gboolean
sweep_start(const FsimSweepSpec *spec, const FsimSweepJob *job, guint position, const char *sha256,
            const char *db_path, GHashTable *workers, GError **error)
{
    pid_t pid;

    /* what stdio holds must not be written twice, by the parent and by the child */
    (void)fflush(stdout);
    (void)fflush(stderr);
    pid = fork();
    if (pid < 0) {
        int saved = errno;

        g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "cannot start a worker process: %s",
                    g_strerror(saved));
        return FALSE;
    }
    if (pid == 0) {
        int status = sweep_worker(spec, job, sha256, db_path);

        (void)fflush(stdout);
        (void)fflush(stderr);
        _exit(status);
    }
    g_hash_table_insert(workers, GINT_TO_POINTER(pid), GUINT_TO_POINTER(position + 1));
    return TRUE;
}

/* Waits for any worker; *@job is its job in @jobs and *@status its wait status. */
static gboolean
sweep_wait(GHashTable *workers, GPtrArray *jobs, const FsimSweepJob **job, int *status,
           GError **error)
{
    for (;;) {
        pid_t pid = waitpid(-1, status, 0);
        guint position;

        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0) {
            int saved = errno;

            g_set_error(error, FSIM_ERROR, FSIM_ERROR_FAILED, "waiting for the workers: %s",
                        g_strerror(saved));
            return FALSE;
        }
        position = GPOINTER_TO_UINT(g_hash_table_lookup(workers, GINT_TO_POINTER(pid)));
        if (position == 0)
            continue; /* not one of ours (an embedding program's child) */
        *job = g_ptr_array_index(jobs, position - 1);
        g_hash_table_remove(workers, GINT_TO_POINTER(pid));
        return TRUE;
    }
}

gboolean
fsim_sweep_run(const FsimSweepSpec *spec, GPtrArray *jobs, const char *db_path, guint parallel,
               FsimSweepProgressFunc progress, gpointer data, guint *failed, GError **error)
{
    g_autoptr(GHashTable) hashes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr(GHashTable) workers = g_hash_table_new(NULL, NULL);
    FsimSweepProgress state = {.total = jobs->len};
    g_autoptr(GError) start_error = NULL;
    FsimStore *store;
    guint next = 0;

    *failed = 0;
    /* create or check the database once, before any worker races to */
    store = fsim_store_open(db_path, FSIM_STORE_WRITE, NULL, error);
    if (store == NULL)
        return FALSE;
    fsim_store_close(store);
    parallel = MAX(parallel, 1);
    while ((next < jobs->len && start_error == NULL) || state.running > 0) {
        const FsimSweepJob *job;
        int status;

        while (start_error == NULL && state.running < parallel && next < jobs->len) {
            job = g_ptr_array_index(jobs, next);
            if (!sweep_start(spec, job, next++, sweep_hash(hashes, job->trace), db_path, workers,
                             &start_error))
                break;
            state.running++;
            if (progress != NULL)
                progress(&state, data);
        }
        if (state.running == 0)
            break;
        if (!sweep_wait(workers, jobs, &job, &status, error))
            return FALSE;
        state.running--;
        state.done++;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != WORKER_OK)
            state.failed++;
        if ((!WIFEXITED(status) || WEXITSTATUS(status) == WORKER_BROKEN) &&
            !sweep_record_death(spec, job, g_hash_table_lookup(hashes, job->trace->path), db_path,
                                status, error))
            return FALSE;
        if (progress != NULL)
            progress(&state, data);
    }
    if (start_error != NULL) {
        g_propagate_error(error, g_steal_pointer(&start_error));
        return FALSE;
    }
    *failed = state.failed;
    return TRUE;
}
