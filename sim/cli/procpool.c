/* procpool.c — K jobs in at most J forked workers; see procpool.h.
 *
 * The parent keeps one slot per job (pending → running → ok | failed | stopped). It launches
 * while fewer than J run and nothing failed, reaps children with waitpid, and after every reap
 * replays the captured stderr of the finished jobs that follow, in job order, up to the first
 * one still running. A failure stops further launches and SIGTERMs the running children (those
 * are marked "stopped by the pool" and never reported as the failure).
 */
#include "sim/cli/procpool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

enum { JOB_PENDING = 0, JOB_RUNNING, JOB_OK, JOB_FAILED, JOB_STOPPED };

typedef struct Slot {
    pid_t pid;
    int state;
    int status;  /* waitpid's */
    int stopped; /* SIGTERMed by the pool after another job failed */
} Slot;

int procpool_default_procs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)(n > 1024 ? 1024 : n) : 1;
}

int procpool_job_path(const char *dir, int k, char *buf, size_t cap, KvErr *e)
{
    if (snprintf(buf, cap, "%s/job-%d.tmp.%ld", dir, k, (long)getpid()) >= (int)cap)
        return kv_err(e, "%s: path too long for a job file", dir);
    return 0;
}

static int err_path(const char *dir, int k, pid_t owner, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%s/job-%d.err.tmp.%ld", dir, k, (long)owner) >= (int)cap ? -1 : 0;
}

static void label_of(const ProcPool *p, int k, char *buf, size_t cap)
{
    if (p->label) p->label(p->ctx, k, buf, cap);
    else snprintf(buf, cap, "job %d", k);
}

/* Copy the captured stderr of a job to ours, then remove the capture. */
static void replay(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f) {
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stderr);
        fclose(f);
        fflush(stderr);
    }
    unlink(path);
}

/* The last bytes of a capture, trailing blank lines dropped. */
static void tail_of(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        long from = len > (long)cap - 1 ? len - ((long)cap - 1) : 0;
        if (fseek(f, from, SEEK_SET) == 0) {
            size_t n = fread(buf, 1, cap - 1, f);
            buf[n] = '\0';
        }
    }
    fclose(f);
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
}

static void child_main(const ProcPool *p, int k, const char *path, const char *errf) __attribute__((noreturn));
static void child_main(const ProcPool *p, int k, const char *path, const char *errf)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        dup2(fd, 2);
        dup2(fd, 1); /* a job should not print results; whatever it prints is kept with its stderr */
        close(fd);
    }
    KvErr e;
    int rc = p->run(p->ctx, k, path, &e);
    if (rc != 0) fprintf(stderr, "%s\n", e.msg);
    fflush(stdout);
    fflush(stderr);
    _exit(rc != 0 ? 1 : 0);
}

/* SIGTERM every running child (after a failure); they are reaped as "stopped", never reported. */
static void stop_running(Slot *s, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i].state == JOB_RUNNING && !s[i].stopped) {
            kill(s[i].pid, SIGTERM);
            s[i].stopped = 1;
        }
}

static int run_serial(const ProcPool *p, KvErr *e)
{
    char path[4400], label[256];
    for (int k = 0; k < p->n_jobs; k++) {
        if (procpool_job_path(p->dir, k, path, sizeof path, e) != 0) return -1;
        if (p->run(p->ctx, k, path, e) != 0) {
            label_of(p, k, label, sizeof label);
            return kv_err_prefix(e, "%s: ", label);
        }
        if (p->done && p->done(p->ctx, k, e) != 0) return -1;
    }
    return 0;
}

int procpool_run(const ProcPool *p, KvErr *e)
{
    if (p->n_jobs < 0 || p->max_procs < 1) return kv_err(e, "process pool: %d jobs in %d processes: expected >= 0 jobs, >= 1 process", p->n_jobs, p->max_procs);
    if (p->n_jobs == 0) return 0;
    if (p->max_procs == 1 || p->n_jobs == 1) return run_serial(p, e);
    Slot *s = calloc((size_t)p->n_jobs, sizeof *s);
    if (!s) return kv_err(e, "process pool: out of memory for %d jobs", p->n_jobs);
    pid_t self = getpid();
    int next = 0, running = 0, failed = 0, reported = 0, rc = 0;
    char path[4400], errf[4400];
    while (next < p->n_jobs || running > 0) {
        while (!failed && running < p->max_procs && next < p->n_jobs) {
            int k = next++;
            if (procpool_job_path(p->dir, k, path, sizeof path, e) != 0 ||
                (err_path(p->dir, k, self, errf, sizeof errf) != 0 && kv_err(e, "%s: path too long", p->dir))) {
                failed = 1, rc = -1;
                stop_running(s, p->n_jobs);
                break;
            }
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid < 0) {
                kv_err(e, "process pool: fork for job %d: %s", k, strerror(errno));
                failed = 1, rc = -1;
                stop_running(s, p->n_jobs);
                break;
            }
            if (pid == 0) child_main(p, k, path, errf);
            s[k].pid = pid;
            s[k].state = JOB_RUNNING;
            running++;
        }
        if (running == 0) break;
        int st;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            kv_err(e, "process pool: waitpid: %s", strerror(errno));
            rc = -1;
            break;
        }
        int k = -1;
        for (int i = 0; i < p->n_jobs; i++)
            if (s[i].state == JOB_RUNNING && s[i].pid == pid) k = i;
        if (k < 0) continue; /* not one of ours */
        running--;
        s[k].status = st;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) s[k].state = JOB_OK;
        else s[k].state = s[k].stopped ? JOB_STOPPED : JOB_FAILED;
        if (s[k].state == JOB_FAILED && !failed) {
            failed = 1;
            stop_running(s, p->n_jobs);
        }
        /* replay the finished jobs in order, up to the first one that is not done; each one's
         * done callback after its replay */
        while (reported < p->n_jobs && s[reported].state == JOB_OK) {
            if (err_path(p->dir, reported, self, errf, sizeof errf) == 0) replay(errf);
            reported++;
            if (!failed && p->done && p->done(p->ctx, reported - 1, e) != 0) { /* its message stands */
                failed = 1, rc = -1;
                stop_running(s, p->n_jobs);
            }
        }
    }
    if (failed && rc == 0) {
        int k = 0;
        while (k < p->n_jobs && s[k].state != JOB_FAILED) k++;
        char label[256], tail[700];
        label_of(p, k < p->n_jobs ? k : 0, label, sizeof label);
        if (k < p->n_jobs) {
            err_path(p->dir, k, self, errf, sizeof errf);
            tail_of(errf, tail, sizeof tail);
            int st = s[k].status;
            if (WIFSIGNALED(st))
                kv_err(e, "%s: killed by signal %d (%s)%s%s", label, WTERMSIG(st), strsignal(WTERMSIG(st)), tail[0] ? ": " : "", tail);
            else if (tail[0])
                kv_err(e, "%s: %s", label, tail);
            else
                kv_err(e, "%s: exit status %d", label, WEXITSTATUS(st));
        }
        rc = -1;
    }
    for (int k = 0; k < p->n_jobs; k++) /* captures not replayed (after a failure) */
        if (s[k].state != JOB_PENDING && err_path(p->dir, k, self, errf, sizeof errf) == 0) unlink(errf);
    free(s);
    return rc;
}
