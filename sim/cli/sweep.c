/* sweep.c — `kvsim sweep`: grids of settings run in parallel into one SQLite results database;
 * the spec, the database schema and the resume rule are in sweep.h.
 *
 * Responsible for: checking the spec's values (scenarios loaded, policies by name; the spec itself
 * is parsed and enumerated by sim/engine/sweepspec.c), checking that --db and --csv are none of the
 * files the points read, the executors behind
 * SweepExec (a fork-based pool; MPI ranks when compiled with KVSIM_MPI), the progress line.
 * Not responsible for: what a point computes (point.c), the settings' syntax (config.c), the database
 * (sweep_db.c: its identity, schema, registration, one transaction per finished point, the CSV export).
 *
 * Executors. SweepExec.job runs in a worker and returns the point's result as text (point.h's
 * text form); SweepExec.done runs in the coordinator, the only process that writes the database.
 *  - local: fork one child per running point (at most -j N), the result comes back through a
 *    pipe; a child that dies without its END line is a failed point ("killed by signal 9"). The
 *    children die with the coordinator (PR_SET_PDEATHSIG). SIGINT/SIGTERM: the coordinator kills
 *    the running children and returns; their points stay pending.
 *  - MPI (bin/kvsim-mpi under mpirun, more than one rank): every rank parses the same command
 *    line and enumerates the same points; rank 0 opens the database and deals the points to do,
 *    one at a time, to whichever worker asks (a worker's request carries its last result); other
 *    ranks only simulate. With a single rank (no mpirun) the local pool runs.
 * Invariants: points get their ids in enumeration order when first registered, so the same sweep
 * gives the same database content for any -j or rank count; a done point has all its metric rows.
 * Complexity: one simulation per point to do; the database work is
 * O(metrics) per point.
 */
#include "sim/cli/sweep.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/base/opt.h"
#include "sim/cli/point.h"
#include "sim/cli/sweep_db.h"
#include "sim/cost/store.h"
#include "sim/engine/sim.h"

#ifdef KVSIM_MPI
#include <mpi.h>
#endif

/* ---------------------------------------------------------------- spec */
/* ---------------------------------------------------------------- spec values */

int sweep_check_value(void *ctx, const char *key, const char *value, const char *where, KvErr *e)
{
    SimConfig c;
    sim_config_defaults(&c);
    if (!strcmp(key, "policies")) {
        cJSON *o = cJSON_CreateObject();
        char pol[600];
        cJSON_AddStringToObject(o, "policies", value);
        int rc = point_config(&c, o, where, pol, sizeof pol, e);
        cJSON_Delete(o);
        return rc != 0 && strncmp(e->msg, where, strlen(where)) ? kv_err_prefix(e, "%s: ", where) : rc;
    }
    if (!strcmp(key, "scenario")) {
        cJSON *o = cJSON_CreateObject();
        char pol[600];
        cJSON_AddStringToObject(o, "scenario", value);
        int rc = point_apply(&c, o, where, pol, sizeof pol, e);
        cJSON_Delete(o);
        return rc;
    }
    if (sim_config_set(&c, key, value, e) != 0) return kv_err_prefix(e, "%s: ", where);
    return 0;
}


/* ---------------------------------------------------------------- the executors */

typedef struct SweepExec {
    /* in a worker: the point's result as text (malloc'd); never fails (a failed point is a result) */
    char *(*job)(void *ctx, int job, size_t *len);
    /* in the coordinator: the job's result text, or crash = why its worker died; -1 stops the sweep */
    int (*done)(void *ctx, int job, const char *text, size_t len, const char *crash, KvErr *e);
    void *ctx;
} SweepExec;

static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
    g_stop = 1;
}

typedef struct Slot {
    pid_t pid;
    int fd;
    int job;
    char *buf;
    size_t len, cap;
} Slot;

static int slot_read(Slot *s)
{
    if (s->cap - s->len < 4096) {
        size_t cap = s->cap ? 2 * s->cap : 16384;
        char *b = realloc(s->buf, cap);
        if (!b) return -1;
        s->buf = b;
        s->cap = cap;
    }
    ssize_t k = read(s->fd, s->buf + s->len, s->cap - s->len - 1);
    if (k < 0) return errno == EINTR ? 1 : -1;
    s->len += (size_t)k;
    return k == 0 ? 0 : 1;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return;
        p += k;
        n -= (size_t)k;
    }
}

/* Start jobs[*next] in a forked child on slot s. */
static int slot_start(Slot *s, const SweepExec *x, int job, KvErr *e)
{
    int fds[2];
    if (pipe(fds) != 0) return kv_err(e, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return kv_err(e, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        struct sigaction hup; /* the coordinator's SIGHUP handler is for its own files */
        if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN) signal(SIGHUP, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(fds[0]);
        size_t len = 0;
        char *text = x->job(x->ctx, job, &len);
        if (text) write_all(fds[1], text, len);
        _exit(text ? 0 : 3);
    }
    close(fds[1]);
    s->pid = pid;
    s->fd = fds[0];
    s->job = job;
    s->len = 0;
    return 0;
}

static void crash_text(int status, char *buf, size_t n)
{
    if (WIFSIGNALED(status)) snprintf(buf, n, "the worker was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(buf, n, "the worker exited with status %d before writing the whole result", WEXITSTATUS(status));
}

/* The local pool: every job of jobs[0..n) in a child, at most `workers` at once. */
static int exec_local(const SweepExec *x, const int *jobs, int n, int workers, KvErr *e)
{
    if (workers < 1) workers = 1;
    if (workers > 256) workers = 256;
    if (workers > n) workers = n;
    Slot *slots = calloc((size_t)(workers > 0 ? workers : 1), sizeof *slots);
    struct pollfd *pfd = calloc((size_t)(workers > 0 ? workers : 1), sizeof *pfd);
    if (!slots || !pfd) {
        free(slots);
        free(pfd);
        return kv_err(e, "out of memory");
    }
    for (int i = 0; i < workers; i++) slots[i].pid = -1;
    int next = 0, running = 0, rc = 0;
    while (rc == 0 && (next < n || running > 0)) {
        for (int i = 0; i < workers && next < n && !g_stop; i++)
            if (slots[i].pid < 0) {
                if (slot_start(&slots[i], x, jobs[next], e) != 0) {
                    rc = -1;
                    break;
                }
                next++;
                running++;
            }
        if (rc || g_stop) break;
        int np = 0;
        int map[256];
        for (int i = 0; i < workers && np < 256; i++)
            if (slots[i].pid >= 0) {
                pfd[np] = (struct pollfd){.fd = slots[i].fd, .events = POLLIN};
                map[np++] = i;
            }
        if (poll(pfd, (nfds_t)np, -1) < 0) {
            if (errno == EINTR) continue;
            rc = kv_err(e, "poll: %s", strerror(errno));
            break;
        }
        for (int k = 0; k < np && rc == 0; k++) {
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            Slot *s = &slots[map[k]];
            int r = slot_read(s);
            if (r > 0) continue;
            close(s->fd);
            int status = 0;
            while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
            }
            s->pid = -1;
            running--;
            char crash[160] = "";
            if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) crash_text(status, crash, sizeof crash);
            if (x->done(x->ctx, s->job, s->buf ? s->buf : "", s->len, crash[0] ? crash : NULL, e) != 0) rc = -1;
        }
    }
    for (int i = 0; i < workers; i++) { /* interrupted or failed: the running points stay pending */
        if (slots[i].pid >= 0) {
            kill(slots[i].pid, SIGKILL);
            close(slots[i].fd);
            while (waitpid(slots[i].pid, NULL, 0) < 0 && errno == EINTR) {
            }
        }
        free(slots[i].buf);
    }
    free(slots);
    free(pfd);
    if (rc == 0 && g_stop) rc = kv_err(e, "interrupted");
    return rc;
}

#ifdef KVSIM_MPI
enum { TAG_ASK = 1, TAG_WORK = 2, TAG_STOP = 3 };

/* Rank 0: deal jobs to the workers that ask (their request carries the previous job's result). */
static int exec_mpi_coordinate(const SweepExec *x, const int *jobs, int n, int size, KvErr *e)
{
    int next = 0, stopped = 0, rc = 0;
    char *buf = NULL;
    while (stopped < size - 1) {
        MPI_Status st;
        int len;
        MPI_Probe(MPI_ANY_SOURCE, TAG_ASK, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_CHAR, &len);
        char *b = realloc(buf, (size_t)len + 1);
        if (!b) {
            rc = kv_err(e, "out of memory");
            break;
        }
        buf = b;
        MPI_Recv(buf, len, MPI_CHAR, st.MPI_SOURCE, TAG_ASK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* an ask with a result: "<job>\n<text>" */
        if (len > 0 && rc == 0) {
            buf[len] = '\0';
            int job = atoi(buf);
            const char *text = strchr(buf, '\n');
            text = text ? text + 1 : buf + len;
            if (x->done(x->ctx, job, text, (size_t)(buf + len - text), NULL, e) != 0) rc = -1;
        }
        if (rc == 0 && !g_stop && next < n) {
            MPI_Send(&jobs[next], 1, MPI_INT, st.MPI_SOURCE, TAG_WORK, MPI_COMM_WORLD);
            next++;
        } else {
            int zero = 0;
            MPI_Send(&zero, 1, MPI_INT, st.MPI_SOURCE, TAG_STOP, MPI_COMM_WORLD);
            stopped++;
        }
    }
    free(buf);
    if (rc == 0 && g_stop) rc = kv_err(e, "interrupted");
    return rc;
}

/* Ranks > 0: ask, simulate, answer with the result, until told to stop. */
static void exec_mpi_work(const SweepExec *x)
{
    char *msg = NULL;
    int len = 0;
    for (;;) {
        MPI_Send(msg ? msg : "", len, MPI_CHAR, 0, TAG_ASK, MPI_COMM_WORLD);
        free(msg);
        msg = NULL;
        MPI_Status st;
        int job;
        MPI_Recv(&job, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_STOP) break;
        size_t tl = 0;
        char *text = x->job(x->ctx, job, &tl);
        char head[32];
        int hl = snprintf(head, sizeof head, "%d\n", job);
        msg = malloc((size_t)hl + tl + 1);
        if (!msg) abort();
        memcpy(msg, head, (size_t)hl);
        if (text) memcpy(msg + hl, text, tl);
        len = hl + (int)tl;
        free(text);
    }
}

/* Launched by mpirun/srun (so MPI_Init will not start a singleton)? */
static int launched_by_mpi(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}
#endif

/* ---------------------------------------------------------------- the command */

typedef struct Run {
    cJSON **points;
    char **params; /* JSON text of each point */
    int n;
    int64_t *ids;
    int *status;
    sqlite3 *db;
    const char *db_path;
    int quiet, tty;
    int todo, done, failed;
    double t0, last_line;
    char **warnings;
    int n_warnings;
} Run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static char *run_job(void *ctx, int job, size_t *len)
{
    Run *r = ctx;
    SimConfig c;
    char policies[600], origin[64];
    KvErr e;
    PointResult pr;
    memset(&pr, 0, sizeof pr);
    /* ids exist on the coordinator only (MPI workers never open the database) */
    if (r->ids && r->ids[job] > 0) snprintf(origin, sizeof origin, "point %lld", (long long)r->ids[job]);
    else snprintf(origin, sizeof origin, "point %d of the sweep", job + 1);
    if (point_config(&c, r->points[job], origin, policies, sizeof policies, &e) != 0)
        snprintf(pr.error, sizeof pr.error, "%s", e.msg);
    else
        point_run(&c, policies, &pr, &e);
    char *text = point_result_text(&pr, len);
    point_result_free(&pr);
    return text;
}

static void progress_line(Run *r, int final)
{
    if (r->quiet) return;
    double t = now_s();
    if (!final && !r->tty && t - r->last_line < 2) return;
    r->last_line = t;
    int fin = r->done + r->failed;
    double rate = t > r->t0 ? fin / (t - r->t0) : 0;
    double eta = rate > 0 ? (r->todo - fin) / rate : 0;
    fprintf(stderr, "%ssweep: %d/%d points%s%.0d%s, %.2f points/s, ETA %.0f s%s", r->tty ? "\r" : "", fin, r->todo,
            r->failed ? " (" : "", r->failed, r->failed ? " failed)" : "", rate, eta, r->tty && !final ? "   " : "\n");
}

static int run_done(void *ctx, int job, const char *text, size_t len, const char *crash, KvErr *e)
{
    Run *r = ctx;
    PointResult pr;
    KvErr pe;
    if (crash) {
        memset(&pr, 0, sizeof pr);
        snprintf(pr.error, sizeof pr.error, "%s", crash);
    } else if (point_result_parse(&pr, text, len, &pe) != 0) {
        memset(&pr, 0, sizeof pr);
        snprintf(pr.error, sizeof pr.error, "%s", pe.msg);
    }
    if (pr.warning[0]) {
        int seen = 0;
        for (int i = 0; i < r->n_warnings && !seen; i++) seen = !strcmp(r->warnings[i], pr.warning);
        char **w2 = seen ? NULL : realloc(r->warnings, (size_t)(r->n_warnings + 1) * sizeof *w2);
        if (w2) {
            r->warnings = w2;
            r->warnings[r->n_warnings++] = strdup(pr.warning);
            if (!r->quiet) fprintf(stderr, "%skvsim: warning: %s\n", r->tty ? "\n" : "", pr.warning);
        }
    }
    int rc = db_store(r->db, r->db_path, r->ids[job], &pr, e);
    if (rc == 0) {
        if (pr.error[0]) {
            r->failed++;
            if (!r->quiet) fprintf(stderr, "%ssweep: point %lld failed: %s\n", r->tty ? "\n" : "", (long long)r->ids[job], pr.error);
        } else {
            r->done++;
        }
        progress_line(r, 0);
    }
    point_result_free(&pr);
    return rc;
}

static const OptSpec k_sweep_opts[] = {
    {"--db", "FILE", OPT_REQUIRED, "the SQLite results database (created; a second run resumes it)"},
    {"--spec", "FILE", 0, "the sweep: {\"base\": {settings}, \"axes\": {setting: [values]}} (sim/cli/sweep.h)"},
    {"--set", "KEY=V1,V2,...", OPT_REPEAT, "an axis (a list) or a base setting (one value); after --spec"},
    {"--scenario", "NAME", 0, "base scenario (kvsim list scenarios)"},
    {"--policies", "a,b,c|all", 0, "the policies every point runs (default: the scenario's, else recompute,kv-offload)"},
    {"--hardware", "FILE", 0, "hardware overlay for every point"},
    {"--models", "FILE", 0, "models overlay for every point"},
    {"--jobs", "N", 0, "points at once on this machine, also -j N (default: every online core)"},
    {"--csv", "FILE", 0, "write the tidy CSV export (a row per point × policy × metric) when done"},
    {"--retry-failed", NULL, 0, "run the failed points of the database again"},
    {"--dry-run", NULL, 0, "list the points and whether each is done; run nothing"},
    {"--quiet", NULL, 0, "no progress line"},
};
static const OptCmd k_sweep = {
    "kvsim sweep",
    "Run every point of a grid of settings (its own simulation per point, in parallel worker processes, or as MPI "
    "ranks with bin/kvsim-mpi under mpirun/srun) into one SQLite results database; done points of an earlier run "
    "are skipped. Without --spec and --set: export (--csv) or show the database's state.",
    k_sweep_opts, (int)KV_ARRAY_LEN(k_sweep_opts), NULL, 0, 0};

/* The files a sweep reads (--spec, the overlays, and each point's trace, cost store, overlays and
 * scenario file, each distinct one once) against those it writes (--db, --csv): none may be
 * another, and --csv is not --db. */
static int sweep_check_paths(const OptArgs *a, cJSON **points, int n, KvErr *e)
{
    static const char *const keys[] = {"the setting trace", "the setting costs", "the setting hardware_overlay",
                                       "the setting models_overlay", "the scenario file"};
    KvPathArg *in = calloc((size_t)n * KV_ARRAY_LEN(keys) + 3, sizeof *in);
    char **owned = calloc((size_t)n * KV_ARRAY_LEN(keys) + 1, sizeof *owned);
    int n_in = 0, n_owned = 0, rc = 0;
    if (!in || !owned) {
        free(in);
        free(owned);
        return kv_err(e, "out of memory");
    }
    in[n_in++] = (KvPathArg){"--spec", opt_get(a, "--spec"), 0};
    in[n_in++] = (KvPathArg){"--hardware", opt_get(a, "--hardware"), 0};
    in[n_in++] = (KvPathArg){"--models", opt_get(a, "--models"), 0};
    for (int i = 0; i < n && rc == 0; i++) {
        SimConfig c;
        char pol[600];
        KvErr pe;
        if (point_config(&c, points[i], "point", pol, sizeof pol, &pe) != 0) continue; /* refused before this */
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(points[i], "scenario");
        const char *vals[] = {c.trace, c.costs, c.hardware_overlay, c.models_overlay,
                              cJSON_IsString(sc) && strchr(sc->valuestring, '/') ? sc->valuestring : ""};
        for (size_t k = 0; k < KV_ARRAY_LEN(keys); k++) {
            if (!vals[k][0]) continue;
            int seen = 0;
            for (int j = 3; j < n_in && !seen; j++) seen = !strcmp(in[j].path, vals[k]) && !strcmp(in[j].opt, keys[k]);
            if (seen) continue;
            if (!(owned[n_owned] = strdup(vals[k]))) {
                rc = kv_err(e, "out of memory");
                break;
            }
            in[n_in++] = (KvPathArg){keys[k], owned[n_owned++], 0};
        }
    }
    KvPathArg out[] = {{"--db", opt_get(a, "--db"), 0}, {"--csv", opt_get(a, "--csv"), 0}};
    if (rc == 0) rc = kv_paths_check(in, n_in, out, (int)KV_ARRAY_LEN(out), e);
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    free(owned);
    free(in);
    return rc;
}

static int cmd_fail(const char *msg)
{
    fprintf(stderr, "kvsim sweep: %s\n", msg);
    return 1;
}

int sweep_main(int argc, char **argv)
{
    opt_short_jobs(argc, argv); /* -j N / -jN as --jobs */
    OptArgs a;
    KvErr e;
    int begin = opt_begin(&k_sweep, argc, argv, &a);
    if (begin == OPT_USAGE_EXIT) return begin;
    if (begin == 0) { /* --help: the options, then more */
        printf("\nsettings (base, axes and --set take every key of `kvsim run --help`, plus scenario and policies)\n");
#ifdef KVSIM_MPI
        printf("MPI: built in (run under mpirun or srun; rank 0 deals points and writes the database)\n");
#else
        printf("MPI: not in this build (make builds bin/kvsim-mpi when mpicc is found)\n");
#endif
        return 0;
    }
    int rank = 0, size = 1;
#ifdef KVSIM_MPI
    int use_mpi = launched_by_mpi();
    if (use_mpi) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
#define MPI_END() ((void)(use_mpi ? MPI_Finalize() : 0))
#else
    const char *ranks = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
    if (ranks && atoi(ranks) > 1) {
        fprintf(stderr, "kvsim sweep: started as one of %s MPI ranks, but this kvsim is built without MPI (every rank would "
                        "run the whole sweep); use bin/kvsim-mpi (make builds it when mpicc is found)\n", ranks);
        return 2;
    }
#define MPI_END() ((void)0)
#endif
    int quiet = opt_count(&a, "--quiet") > 0 || rank != 0;
    const char *db_path = opt_get(&a, "--db");
    int64_t jobs_n = sysconf(_SC_NPROCESSORS_ONLN);
    if (jobs_n < 1) jobs_n = 1;
    if (opt_get(&a, "--jobs") && opt_int("--jobs", opt_get(&a, "--jobs"), 1, 4096, &jobs_n, &e) != 0) {
        opt_print_error(&k_sweep, e.msg, stderr);
        MPI_END();
        return 2;
    }
    SweepSpec spec;
    sweep_spec_init(&spec);
    spec.check = sweep_check_value;
    int has_grid = opt_get(&a, "--spec") || opt_count(&a, "--set") > 0;
    int rc = 0;
    /* the grid: --spec, then the base options, then --set in order */
    if (opt_get(&a, "--spec")) {
        char *text = kv_read_file(opt_get(&a, "--spec"), NULL, &e);
        if (!text || sweep_spec_parse(&spec, text, opt_get(&a, "--spec"), &e) != 0) rc = 2;
        free(text);
    }
    static const struct {
        const char *opt, *key;
    } base_opts[] = {{"--scenario", "scenario"}, {"--policies", "policies"}, {"--hardware", "hardware_overlay"},
                     {"--models", "models_overlay"}};
    for (size_t i = 0; rc == 0 && i < KV_ARRAY_LEN(base_opts); i++) {
        const char *v = opt_get(&a, base_opts[i].opt);
        if (v && (sweep_check_value(NULL, base_opts[i].key, v, base_opts[i].opt, &e) != 0 || sweep_spec_set_base(&spec, base_opts[i].key, v, &e) != 0))
            rc = 2;
    }
    for (int i = 0; rc == 0 && i < a.n_hits; i++)
        if (!strcmp(opt_hit_name(&a, i), "--set") && sweep_spec_set(&spec, a.hits[i].value, &e) != 0) rc = 2;
    if (rc) {
        if (rank == 0) fprintf(stderr, "kvsim sweep: %s\n", e.msg);
        sweep_spec_free(&spec);
        MPI_END();
        return rc;
    }
    Run r;
    memset(&r, 0, sizeof r);
    r.db_path = db_path;
    r.quiet = quiet;
    r.tty = isatty(2);
    if (has_grid && sweep_points(&spec, &r.points, &r.n, &e) != 0) rc = 2;
    r.params = rc == 0 ? calloc((size_t)r.n + 1, sizeof *r.params) : NULL;
    r.ids = rc == 0 ? calloc((size_t)r.n + 1, sizeof *r.ids) : NULL;
    r.status = rc == 0 ? calloc((size_t)r.n + 1, sizeof *r.status) : NULL;
    if (rc == 0 && (!r.params || !r.ids || !r.status)) rc = kv_err(&e, "out of memory") ? 1 : 0;
    for (int i = 0; rc == 0 && i < r.n; i++)
        if (!(r.params[i] = cJSON_PrintUnformatted(r.points[i]))) rc = kv_err(&e, "out of memory") ? 1 : 0;
    /* every point's settings pass the checks that need no catalog before anything runs */
    char last_hw[4096] = "", last_models[4096] = "";
    for (int i = 0; rc == 0 && i < r.n; i++) {
        SimConfig c;
        char pol[600];
        if (point_config(&c, r.points[i], r.params[i], pol, sizeof pol, &e) != 0) {
            rc = 2;
            break;
        }
        /* the overlays too (each distinct pair once in a row), so that a bad file fails the sweep, not every point */
        if ((c.hardware_overlay[0] || c.models_overlay[0]) &&
            (strcmp(c.hardware_overlay, last_hw) || strcmp(c.models_overlay, last_models))) {
            ModelCatalog mc;
            HwCatalog hw;
            if (sim_catalogs_open(&c, &mc, &hw, &e) != 0) {
                rc = 2;
                break;
            }
            model_catalog_free(&mc);
            hw_catalog_free(&hw);
            snprintf(last_hw, sizeof last_hw, "%s", c.hardware_overlay);
            snprintf(last_models, sizeof last_models, "%s", c.models_overlay);
        }
    }
    if (rc == 0 && sweep_check_paths(&a, r.points, r.n, &e) != 0) rc = 2; /* before the database is opened */
    int *todo = rc == 0 ? calloc((size_t)r.n + 1, sizeof *todo) : NULL;
    SweepExec x = {run_job, run_done, &r};
    if (rank == 0 && rc == 0) {
        if (db_open(&r.db, db_path, has_grid, &e) != 0 ||
            (has_grid && db_register(r.db, db_path, r.params, r.n, r.ids, r.status, &e) != 0))
            rc = 1;
        int skipped_done = 0, skipped_failed = 0;
        for (int i = 0; rc == 0 && i < r.n; i++) {
            if (r.status[i] == 1) skipped_done++;
            else if (r.status[i] == 2 && !opt_count(&a, "--retry-failed")) skipped_failed++;
            else todo[r.todo++] = i;
        }
        if (rc == 0 && opt_count(&a, "--dry-run")) {
            for (int i = 0; i < r.n; i++)
                printf("point %lld %-7s %s\n", (long long)r.ids[i], r.status[i] == 1 ? "done" : r.status[i] == 2 ? "failed" : "pending",
                       r.params[i]);
            r.todo = 0;
        }
        if (rc == 0 && has_grid && !quiet) {
            char how[96] = "nothing to run";
            if (r.todo > 0 && size > 1) snprintf(how, sizeof how, "%d to run on %d MPI worker ranks", r.todo, size - 1);
            else if (r.todo > 0)
                snprintf(how, sizeof how, "%d to run in %lld worker processes", r.todo, (long long)(jobs_n < r.todo ? jobs_n : r.todo));
            char failed[96] = "";
            if (skipped_failed) snprintf(failed, sizeof failed, ", %d failed before (--retry-failed runs them)", skipped_failed);
            fprintf(stderr, "sweep: %d points, %d already done%s; %s\n", r.n, skipped_done, failed, how);
        }
    }
    if (rc == 0 && rank == 0) {
        struct sigaction sa, old_int, old_term;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop;
        sigemptyset(&sa.sa_mask);
        g_stop = 0;
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        r.t0 = r.last_line = now_s();
        int xrc;
#ifdef KVSIM_MPI
        if (size > 1) xrc = exec_mpi_coordinate(&x, todo, r.todo, size, &e);
        else
#endif
            xrc = r.todo > 0 ? exec_local(&x, todo, r.todo, (int)jobs_n, &e) : 0;
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        if (r.todo > 0) progress_line(&r, 1);
        if (xrc != 0) {
            int left = r.todo - r.done - r.failed;
            if (g_stop) fprintf(stderr, "kvsim sweep: interrupted: %d points done in this run, %d left pending in %s; run the "
                                        "same command again to finish them\n", r.done + r.failed, left, db_path);
            else fprintf(stderr, "kvsim sweep: %s\n", e.msg);
            rc = g_stop ? 130 : 1;
        }
    }
#ifdef KVSIM_MPI
    else if (size > 1 && rank == 0) {
        /* a failure on rank 0 before dealing: still release every worker */
        exec_mpi_coordinate(&x, todo, 0, size, &e);
    }
    if (size > 1 && rank > 0) {
        if (rc == 0) exec_mpi_work(&x);
        else { /* the same failure on every rank: ask once, get STOP */
            int job;
            MPI_Send("", 0, MPI_CHAR, 0, TAG_ASK, MPI_COMM_WORLD);
            MPI_Recv(&job, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
#endif
    if (rank == 0 && r.db) {
        int64_t cnt[3];
        if (rc == 0 && opt_get(&a, "--csv") && db_export_csv(r.db, db_path, opt_get(&a, "--csv"), &e) != 0) rc = cmd_fail(e.msg);
        if (db_counts(r.db, db_path, cnt, &e) == 0 && (!quiet || !has_grid))
            fprintf(has_grid ? stderr : stdout, "%s: %lld points done, %lld failed, %lld pending%s%s\n", db_path,
                    (long long)cnt[1], (long long)cnt[2], (long long)cnt[0], opt_get(&a, "--csv") && rc == 0 ? "; CSV in " : "",
                    opt_get(&a, "--csv") && rc == 0 ? opt_get(&a, "--csv") : "");
        if (rc == 0 && r.failed > 0) rc = 1;
        sqlite3_close(r.db);
    } else if (rank == 0 && rc != 0 && rc != 130) {
        fprintf(stderr, "kvsim sweep: %s\n", e.msg);
    }
    free(todo);
    for (int i = 0; i < r.n_warnings; i++) free(r.warnings[i]);
    free(r.warnings);
    for (int i = 0; r.params && i < r.n; i++) cJSON_free(r.params[i]);
    free(r.params);
    free(r.ids);
    free(r.status);
    sweep_points_free(r.points, r.n);
    sweep_spec_free(&spec);
    MPI_END();
    return rc;
}
