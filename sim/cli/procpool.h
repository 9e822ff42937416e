/* procpool.h — run K independent jobs in at most J worker processes (fork), each job a callback
 * that writes its whole result to its own file; the parent waits for them and reports failures.
 *
 * Responsible for: forking min(J, K) workers that run the jobs one after another as the parent
 * hands them out (the job callback runs in a worker and writes to the path the pool gives it; a
 * worker keeps its heap from job to job, as the serial run does), capturing each job's stderr in
 * a file of its own, replaying the stderr of finished jobs on the parent's stderr in job order (so
 * the parent's output does not depend on the scheduling), calling the done callback of each
 * finished job in job order, stopping the workers still running jobs (SIGTERM) as soon as one job
 * fails, and reporting the first failure in job order with the job's label and its message (sent
 * back over the worker's pipe, so it is known even when the capture could not be written: a full
 * disk), or its signal and the end of its stderr; killing and reaping the workers from a signal
 * handler (procpool_stop_on_signal). With J == 1 or K == 1 the jobs run in the calling process, one
 * after another, with no fork (same files, same order).
 * Not responsible for: what a job computes or writes, merging the jobs' files (the caller does, in
 * the done callback or in job order once procpool_run returns 0), removing those files
 * (procpool_job_path names them; the caller removes them).
 *
 * Invariants: the files the caller reads are complete (a job's file counts only after its worker
 * said it succeeded); a worker never returns into the caller's code: it leaves with _exit at the
 * end of its pipe of jobs, with SIGINT/SIGTERM at their defaults and PR_SET_PDEATHSIG so it dies
 * with the parent; a job must leave no state behind that changes a later job's result (a worker
 * runs several, like the serial run); stdout and stderr are flushed before every fork. Temporary
 * stderr files are named <dir>/job-<k>.err.tmp.<pid> and removed by the pool; job files
 * <dir>/job-<k>.tmp.<pid> (pid: the caller's; the ".tmp.<pid>" suffix marks them as temporaries to
 * result sets).
 * Complexity: min(J, K) forks (none when serial), two pipe operations and a poll per job; memory O(K).
 */
#ifndef KV_PROCPOOL_H
#define KV_PROCPOOL_H

#include <stddef.h>

#include "sim/base/util.h"

/* A job: write job k's result to path. 0 on success; -1 with the message in e. In a child, the
 * message goes to the child's stderr (captured) and the child exits 1. */
typedef int (*PoolJobFn)(void *ctx, int k, const char *path, KvErr *e);
/* A job's name for messages ("seed 3, hcache"). */
typedef void (*PoolLabelFn)(void *ctx, int k, char *buf, size_t cap);

typedef struct ProcPool {
    int n_jobs;        /* K >= 0 */
    int max_procs;     /* J >= 1 */
    const char *dir;   /* where the job files and stderr captures live (an existing directory) */
    PoolJobFn run;
    PoolLabelFn label; /* may be NULL: "job k" */
    void *ctx;
    /* may be NULL: called in the caller's process for each job in job order, as soon as it and
     * every job before it have succeeded (while later jobs still run), e.g. to merge its file;
     * -1 (message in e) stops the pool like a failed job, and the message is returned as it is */
    int (*done)(void *ctx, int k, KvErr *e);
} ProcPool;

/* The path of job k's file in dir (what run receives): <dir>/job-<k>.tmp.<pid of the caller>. */
int procpool_job_path(const char *dir, int k, char *buf, size_t cap, KvErr *e);

/* Run every job. 0 when all succeeded; else -1 and e: "<label>: <its message>" ("<label>: killed
 * by signal 9 (Killed): <its stderr tail>" ...), for the lowest-numbered job that failed. */
int procpool_run(const ProcPool *p, KvErr *e);

/* The number of online cores (the default J), at least 1. */
int procpool_default_procs(void);

/* SIGKILL the workers of the pool running in this process, if any, and reap them (async-signal-safe:
 * kill and waitpid only); for a SIGINT/SIGTERM handler, before it removes the files the workers were
 * writing, so none is created after. A worker process does nothing here. */
void procpool_stop_on_signal(void);

#endif
