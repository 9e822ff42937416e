/* procpool.c — K jobs in at most J forked workers; see procpool.h.
 *
 * The parent keeps one slot per job (pending → running → ok | failed | stopped) and starts J
 * workers, each with a pipe of job indices in and a pipe of status bytes out. It hands the next
 * job to every idle worker while nothing failed, waits (poll) for a status (a failed job's comes
 * with its message, so the cause is known even when its stderr capture could not be written) or for
 * the end of a worker's pipe (the worker died in its job: waitpid says how), and after every status replays
 * the captured stderr of the finished jobs that follow, in job order, up to the first one still
 * running, calling the done callback of each. A failure stops further hand-outs and SIGTERMs the
 * workers still running a job (those jobs are "stopped by the pool" and never reported as the
 * failure); idle workers leave at the end of their pipe.
 */
#include "sim/cli/procpool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

enum { JOB_PENDING = 0, JOB_RUNNING, JOB_OK, JOB_FAILED, JOB_STOPPED };

typedef struct Slot {
    int state;
    int status; /* waitpid's form: exit(1) for a job that failed, the worker's status if it died */
    char *msg;  /* a failed job's message as its worker sent it (NULL: none came) */
} Slot;

/* The workers of the pool in progress, for procpool_stop_on_signal: pids > 0 are running (an
 * entry is cleared before the pool reaps it); owner: the process whose pool it is. */
static volatile pid_t g_workers[1024];
static volatile sig_atomic_t g_n_workers;
static volatile pid_t g_pool_owner;

void procpool_stop_on_signal(void)
{
    if (g_pool_owner != getpid()) return;
    int n = g_n_workers;
    for (int i = 0; i < n; i++)
        if (g_workers[i] > 0) kill(g_workers[i], SIGKILL);
    for (int i = 0; i < n; i++) {
        pid_t pid = g_workers[i];
        g_workers[i] = 0;
        if (pid > 0)
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    }
    g_n_workers = 0;
}

/* A worker's answer: the status byte (0 ok, 1 failed) and, when failed, the job's message as a u16
 * length and its bytes, all in one write (under PIPE_BUF, so it arrives whole), so that the cause
 * reaches the parent even when the job's stderr capture cannot be written (a full disk). */
static int send_status(int fd, const char *failed_msg)
{
    unsigned char buf[3 + 2048];
    size_t n = failed_msg ? strlen(failed_msg) : 0;
    if (n > sizeof buf - 3) n = sizeof buf - 3;
    buf[0] = failed_msg != NULL;
    buf[1] = (unsigned char)(n & 0xff);
    buf[2] = (unsigned char)(n >> 8);
    if (n) memcpy(buf + 3, failed_msg, n);
    size_t len = failed_msg ? n + 3 : 1;
    ssize_t w;
    do w = write(fd, buf, len);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)len ? 0 : -1;
}

static int read_full(int fd, void *p, size_t n)
{
    unsigned char *b = p;
    while (n > 0) {
        ssize_t k = read(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static char *recv_msg(int fd)
{
    unsigned char len[2];
    if (read_full(fd, len, 2) != 0) return NULL;
    size_t n = (size_t)len[0] | (size_t)len[1] << 8;
    char *m = malloc(n + 1);
    if (!m) return NULL;
    if (read_full(fd, m, n) != 0) {
        free(m);
        return NULL;
    }
    m[n] = '\0';
    return m;
}

int procpool_default_procs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (int)(n > 1024 ? 1024 : n) : 1;
}

static int job_path_of(const char *dir, int k, pid_t owner, char *buf, size_t cap, KvErr *e)
{
    if (snprintf(buf, cap, "%s/job-%d.tmp.%ld", dir, k, (long)owner) >= (int)cap)
        return kv_err(e, "%s: path too long for a job file", dir);
    return 0;
}

int procpool_job_path(const char *dir, int k, char *buf, size_t cap, KvErr *e) { return job_path_of(dir, k, getpid(), buf, cap, e); }

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

/* A worker: one process for many jobs, so that each job finds the heap its predecessors warmed
 * (as in the serial run) instead of a fresh fork's page faults. It reads a job index from cmd
 * (a negative one, or the end of the pipe: leave), runs the job with stdout and stderr in the
 * job's capture, and answers on res (send_status: 0 ok, or 1 and the job's message). */
static void worker_main(const ProcPool *p, int cmd, int res, pid_t owner) __attribute__((noreturn));
static void worker_main(const ProcPool *p, int cmd, int res, pid_t owner)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    struct sigaction hup; /* the parent's SIGHUP handler cleans up the parent's files: not a worker's to run */
    if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN) signal(SIGHUP, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != owner) _exit(1); /* the parent is already gone */
    int k;
    while (read(cmd, &k, sizeof k) == (ssize_t)sizeof k && k >= 0) {
        char path[4400], errf[4400];
        KvErr pe;
        int bad_path = job_path_of(p->dir, k, owner, path, sizeof path, &pe) != 0 ||
                       (err_path(p->dir, k, owner, errf, sizeof errf) != 0 && kv_err(&pe, "%s: path too long for a job's capture", p->dir));
        if (!bad_path) {
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
            if (send_status(res, rc != 0 ? e.msg : NULL) != 0) _exit(1);
        } else if (send_status(res, pe.msg) != 0) {
            _exit(1);
        }
    }
    _exit(0);
}

typedef struct Worker {
    pid_t pid;
    int cmd, res; /* the parent's ends: job indices out, status bytes in (-1: closed) */
    int job;      /* the job it runs, or -1 */
    int stopped;  /* SIGTERMed by the pool after another job failed */
} Worker;

/* SIGTERM every worker running a job (after a failure); their jobs are "stopped", never reported. */
static void stop_running(Worker *w, int nw)
{
    for (int i = 0; i < nw; i++)
        if (w[i].job >= 0 && !w[i].stopped) {
            kill(w[i].pid, SIGTERM);
            w[i].stopped = 1;
        }
}

static void worker_close(Worker *w)
{
    if (w->cmd >= 0) close(w->cmd);
    if (w->res >= 0) close(w->res);
    w->cmd = w->res = -1;
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
    int nw = p->max_procs < p->n_jobs ? p->max_procs : p->n_jobs;
    if (nw > 1024) nw = 1024; /* procpool_default_procs' bound; the poll set below holds them all */
    Worker *w = calloc((size_t)nw, sizeof *w);
    if (!s || !w) {
        free(s);
        free(w);
        return kv_err(e, "process pool: out of memory for %d jobs", p->n_jobs);
    }
    pid_t self = getpid();
    int next = 0, failed = 0, reported = 0, rc = 0, started = 0;
    g_n_workers = 0;
    g_pool_owner = self;
    /* a worker gone while idle: telling it its next job fails with EPIPE instead of killing us */
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
    char errf[4400];
    for (int i = 0; i < nw; i++) w[i].cmd = w[i].res = w[i].job = -1;
    /* the workers, each with its two pipes */
    for (; started < nw; started++) {
        int c[2], r[2];
        if (pipe2(c, O_CLOEXEC) != 0) break;
        if (pipe2(r, O_CLOEXEC) != 0) {
            close(c[0]), close(c[1]);
            break;
        }
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            close(c[0]), close(c[1]), close(r[0]), close(r[1]);
            break;
        }
        if (pid == 0) {
            for (int i = 0; i < started; i++) worker_close(&w[i]); /* the other workers' pipes */
            close(c[1]);
            close(r[0]);
            worker_main(p, c[0], r[1], self);
        }
        close(c[0]);
        close(r[1]);
        w[started] = (Worker){pid, c[1], r[0], -1, 0};
        g_workers[started] = pid;
        g_n_workers = started + 1;
    }
    if (started == 0) {
        kv_err(e, "process pool: cannot start a worker: %s", strerror(errno));
        failed = 1, rc = -1;
    }
    for (;;) {
        /* hand out jobs to the idle workers; with none left (or after a failure) let them go */
        int busy = 0;
        for (int i = 0; i < started; i++) {
            if (w[i].job < 0 && w[i].cmd >= 0) {
                if (!failed && next < p->n_jobs) {
                    int k = next;
                    if (write(w[i].cmd, &k, sizeof k) == (ssize_t)sizeof k) {
                        next++;
                        w[i].job = k;
                        s[k].state = JOB_RUNNING;
                    } else { /* a worker that cannot be told: gone; its end is read below */
                        close(w[i].cmd);
                        w[i].cmd = -1;
                    }
                } else {
                    close(w[i].cmd); /* the end of its pipe: it leaves */
                    w[i].cmd = -1;
                }
            }
            if (w[i].job >= 0) busy++;
        }
        if (busy == 0) break;
        struct pollfd pf[1024];
        int idx[1024], np = 0;
        for (int i = 0; i < started && np < 1024; i++)
            if (w[i].job >= 0) pf[np] = (struct pollfd){w[i].res, POLLIN, 0}, idx[np++] = i;
        if (poll(pf, (nfds_t)np, -1) < 0) {
            if (errno == EINTR) continue;
            kv_err(e, "process pool: poll: %s", strerror(errno));
            stop_running(w, started);
            failed = 1, rc = -1;
            for (int i = 0; i < started; i++) w[i].job = -1;
            break;
        }
        for (int j = 0; j < np; j++) {
            if (!pf[j].revents) continue;
            Worker *x = &w[idx[j]];
            int k = x->job;
            unsigned char st;
            ssize_t got = read(x->res, &st, 1);
            if (got < 0 && errno == EINTR) continue;
            x->job = -1;
            if (got == 1) {
                s[k].status = st ? 1 << 8 : 0; /* as waitpid reports exit(1) / exit(0) */
                s[k].state = st ? (x->stopped ? JOB_STOPPED : JOB_FAILED) : JOB_OK;
                if (st) s[k].msg = recv_msg(x->res);
            } else { /* the worker died in job k: its status tells how */
                int ws = 0;
                g_workers[x - w] = 0;
                while (waitpid(x->pid, &ws, 0) < 0 && errno == EINTR) {}
                x->pid = -1;
                worker_close(x);
                s[k].status = ws;
                s[k].state = x->stopped ? JOB_STOPPED : JOB_FAILED;
            }
            if (s[k].state == JOB_FAILED && !failed) {
                failed = 1;
                stop_running(w, started);
            }
        }
        /* replay the finished jobs in order, up to the first one that is not done; each one's
         * done callback after its replay */
        while (reported < p->n_jobs && s[reported].state == JOB_OK) {
            if (err_path(p->dir, reported, self, errf, sizeof errf) == 0) replay(errf);
            reported++;
            if (!failed && p->done && p->done(p->ctx, reported - 1, e) != 0) { /* its message stands */
                failed = 1, rc = -1;
                stop_running(w, started);
            }
        }
    }
    for (int i = 0; i < started; i++) { /* every worker leaves (the idle ones at the end of their pipe) */
        worker_close(&w[i]);
        g_workers[i] = 0;
        if (w[i].pid > 0)
            while (waitpid(w[i].pid, NULL, 0) < 0 && errno == EINTR) {}
    }
    g_n_workers = 0;
    free(w);
    signal(SIGPIPE, old_pipe);
    if (!failed && reported < p->n_jobs) { /* the workers left (killed while idle) before every job ran */
        kv_err(e, "process pool: the workers were gone with %d of %d jobs not run", p->n_jobs - reported, p->n_jobs);
        failed = 1, rc = -1;
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
            else if (s[k].msg && s[k].msg[0]) /* the job's own message, not the capture's last lines (warnings, or nothing on a full disk) */
                kv_err(e, "%s: %s", label, s[k].msg);
            else if (tail[0])
                kv_err(e, "%s: %s", label, tail);
            else
                kv_err(e, "%s: exit status %d", label, WEXITSTATUS(st));
        }
        rc = -1;
    }
    for (int k = 0; k < p->n_jobs; k++) { /* captures not replayed (after a failure) */
        if (s[k].state != JOB_PENDING && err_path(p->dir, k, self, errf, sizeof errf) == 0) unlink(errf);
        free(s[k].msg);
    }
    free(s);
    return rc;
}
