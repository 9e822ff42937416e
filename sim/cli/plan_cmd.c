/* plan_cmd.c — `kvsim plan`, the command: its options, the space (sim/engine/sweepspec: the
 * --config/--set base and the --vary axes, values checked by kvsim sweep's checker), every point
 * resolved once (sim_world_open: the parts, the DRAM, the SSD count, the store; a point refused
 * there is invalid) and priced (plan_cost.c), the evaluation of jobs as simulations through
 * point_config + sim_run in procpool workers (each job's PlanSample comes back in its own file),
 * the searches (plan.c), the report (plan_report.c), and the cleanup when interrupted.
 */
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "results/metric.h"
#include "results/resultset.h"
#include "sim/base/opt.h"
#include "sim/base/units.h"
#include "sim/cli/plan.h"
#include "sim/cli/plan_cost.h"
#include "sim/cli/plan_int.h"
#include "sim/cli/point.h"
#include "sim/cli/procpool.h"
#include "sim/cli/sweep.h"
#include "sim/engine/sim.h"
#include "sim/engine/sweepspec.h"
#include "traces/trace.h"

/* ---------------------------------------------------------------- evaluation */

static void sample_error(PlanSample *s, const char *msg)
{
    snprintf(s->error, sizeof s->error, "%s", msg);
    for (char *c = s->error; *c; c++)
        if (*c == '\n' || *c == '\t') *c = ' ';
}

/* Why a run measured no request: "warm-up 100 >= requests 50", "all 40 dropped", "the trace gave no request". */
static void unmeasured_reason(const SimConfig *c, const SimResult *r, char *buf, size_t n)
{
    snprintf(buf, n, "no request was measured: ");
    size_t base = strlen(buf);
    if (!c->warmup.by_time && c->warmup.n > 0 && c->requests > 0 && c->warmup.n >= c->requests)
        kv_catf(buf, n, "warm-up %lld >= requests %lld", (long long)c->warmup.n, (long long)c->requests);
    else if (r->load.trimmed_warmup > 0)
        kv_catf(buf, n, "the warm-up left out %llu", (unsigned long long)r->load.trimmed_warmup);
    if (r->load.trimmed_cooldown > 0)
        kv_catf(buf, n, "%sthe cool-down left out %llu", strlen(buf) > base ? "; " : "", (unsigned long long)r->load.trimmed_cooldown);
    if (r->dropped > 0) kv_catf(buf, n, "%s%llu dropped", strlen(buf) > base ? "; " : "", (unsigned long long)r->dropped);
    if (strlen(buf) == base) kv_catf(buf, n, "the trace gave no request");
}

static void run_one(const PlanCtx *x, const PlanJob *j, PlanSample *s)
{
    memset(s, 0, sizeof *s);
    SimConfig c;
    char pol[600], origin[64];
    KvErr e;
    snprintf(origin, sizeof origin, "point %d", j->point + 1);
    if (point_config(&c, x->points[j->point < 0 ? 0 : j->point], origin, pol, sizeof pol, &e) != 0) {
        sample_error(s, e.msg);
        return;
    }
    c.seed = j->seed;
    if (x->knob) {
        char v[64];
        snprintf(v, sizeof v, "%.17g", j->load);
        if (sim_config_set(&c, x->knob, v, &e) != 0) {
            sample_error(s, e.msg);
            return;
        }
    }
    SimWorld w;
    if (sim_world_open(&w, &c, &e) != 0) {
        sample_error(s, e.msg);
        return;
    }
    SimResult r;
    memset(&r, 0, sizeof r);
    PointResult pr;
    memset(&pr, 0, sizeof pr);
    if (sim_run(&w, x->policies[j->policy], NULL, NULL, NULL, NULL, &r, &e) != 0 || point_add_metrics(&pr, &r, &e) != 0) {
        sample_error(s, e.msg);
    } else {
        s->unmeasured = r.requests == 0;
        if (s->unmeasured) unmeasured_reason(w.cfg, &r, s->absent, sizeof s->absent);
        for (int i = 0; i < x->nt; i++) {
            s->v[i] = NAN;
            for (int k = 0; k < pr.n; k++)
                if (!strcmp(pr.m[k].name, x->t[i].metric)) s->v[i] = pr.m[k].value;
            if (metric_samples(metric_find(x->t[i].metric), &r) == 0 || !isfinite(s->v[i])) {
                s->v[i] = NAN; /* absent, not the 0 an empty histogram may read as */
                if (!s->absent[0]) snprintf(s->absent, sizeof s->absent, "%s: no sample was measured", x->t[i].metric);
            }
        }
        s->overloaded = r.load.overloaded;
    }
    point_result_free(&pr);
    sim_result_free(&r);
    sim_world_close(&w);
}

static int pool_job(void *ctx, int k, const char *path, KvErr *e)
{
    const PlanCtx *x = ctx;
    PlanSample s;
    run_one(x, &x->batch[k], &s);
    FILE *f = fopen(path, "wb");
    if (!f) return kv_err(e, "%s: cannot create the job's file", path);
    int ok = fwrite(&s, sizeof s, 1, f) == 1;
    if (fclose(f) != 0) ok = 0;
    return ok ? 0 : kv_err(e, "%s: write failed (disk full?)", path);
}

static void pool_label(void *ctx, int k, char *buf, size_t cap)
{
    const PlanCtx *x = ctx;
    const PlanJob *j = &x->batch[k];
    if (j->point >= 0) snprintf(buf, cap, "point %d, %s, seed %llu", j->point + 1, x->policies[j->policy], (unsigned long long)j->seed);
    else snprintf(buf, cap, "%s %g, %s, seed %llu", x->knob, j->load, x->policies[j->policy], (unsigned long long)j->seed);
}

int plan_real_eval(void *ctx, const PlanJob *jobs, int n, PlanSample *out, KvErr *e)
{
    PlanCtx *x = ctx;
    if (x->jobs <= 1 || n == 1) {
        for (int i = 0; i < n; i++) run_one(x, &jobs[i], &out[i]);
        return 0;
    }
    x->batch = jobs;
    ProcPool pool = {n, x->jobs, x->tmpdir, pool_job, pool_label, x, NULL};
    fflush(stdout);
    fflush(stderr);
    int rc = procpool_run(&pool, e);
    for (int i = 0; i < n; i++) {
        char path[700];
        if (procpool_job_path(x->tmpdir, i, path, sizeof path, e) != 0) return -1;
        if (rc == 0) {
            FILE *f = fopen(path, "rb");
            if (!f || fread(&out[i], sizeof out[i], 1, f) != 1) rc = kv_err(e, "%s: a job's result is missing", path);
            if (f) fclose(f);
        }
        unlink(path);
    }
    x->batch = NULL;
    return rc;
}

/* ---------------------------------------------------------------- the command */

static const OptSpec k_plan_opts[] = {
    {"--config", "FILE", 0, "JSON object of settings (as kvsim run --config): the base of every point"},
    {"--scenario", "NAME", 0, "a published setup (kvsim list scenarios), applied first"},
    {"--set", "KEY=VALUE", OPT_REPEAT, "a setting for every point, after --config (any key of kvsim run --help)"},
    {"--vary", "KEY=V1,V2,...", OPT_REPEAT, "an axis of the space: gpu, n_ssd, ssd, nic, dram, host_link, tp, replicas or any setting"},
    {"--target", "EXPR", 0, "the SLO, e.g. \"ttft_p99<=500ms,tbt_p99<=60ms\" (metrics: kvsim plan --help)"},
    {"--cost", "FILE", 0, "prices per part (JSON, docs/formats.md; configs/examples/prices.json); needed with --vary (optional with --max-load)"},
    {"--policies", "a,b,c|all", 0, "the policies, each answered on its own (default: --config's, else recompute,kv-offload)"},
    {"--seeds", "N", 0, "replications per point (default 3; 1..100): every point runs seeds S..S+N-1"},
    {"--max-seeds", "N", 0, "while a point is uncertain, double its seeds up to N (default 10)"},
    {"--seed-base", "S", 0, "the first seed (default: the seed setting)"},
    {"--no-prune", NULL, 0, "assume no monotonicity: only the cost order ends the search"},
    {"--monotone", "KEY,...", 0, "axes where more never makes a passing point fail (default n_ssd,dram; none)"},
    {"--max-load", NULL, 0, "find the highest sustainable load instead (with --vary: per configuration, a table)"},
    {"--load-knob", "KNOB", 0, "the load searched: session_rate or request_rate (default: request_rate when set, else session_rate)"},
    {"--load-start", "RATE", 0, "the first load tried (default: the knob's setting, else 1)"},
    {"--precision", "P", 0, "stop the load search when (hi - lo) / lo <= P (default 0.05)"},
    {"--out", "DIR", 0, "also write plan.md and plan.json to DIR (a result set)"},
    {"--dry-run", NULL, 0, "list every point with its resolved store, cost and priced parts; simulate nothing"},
    {"--jobs", "N", 0, "-j N: simulations at once (default: the online cores); the answer is the same for any N"},
    {"--hardware", "FILE", 0, "hardware overlay for every point"},
    {"--models", "FILE", 0, "models overlay for every point"},
    {"--quiet", NULL, 0, "no progress lines"},
};
static const OptCmd k_plan = {
    "kvsim plan",
    "Capacity planning, per policy, with replications deciding: the cheapest configuration of a space (--vary, --cost) "
    "that meets every --target, or (--max-load) the highest load that meets them without overload. Prints a Markdown "
    "report with the evidence (docs/planning.md).",
    k_plan_opts, (int)KV_ARRAY_LEN(k_plan_opts), NULL, 0, 0};

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = opt_vusage_error(&k_plan, stderr, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---------------------------------------------------------------- interruption
 *
 * A plan keeps its workers' files in a temporary directory <TMPDIR>/kvsim-plan.<pid>.<host>.XXXXXX.
 * SIGINT/SIGTERM: the handler kills and reaps the workers (procpool_stop_on_signal), removes the
 * directory and any result set being written, then dies of the signal (status 128 + sig).
 * Everything it calls is async-signal-safe (open, close, kill, waitpid, unlinkat, rmdir; getdents64
 * as a raw system call). After a
 * SIGKILL nothing can run: the workers die with their parent (PR_SET_PDEATHSIG), and the next plan
 * on this host removes the directories whose owner pid is gone (plan_clean_stale). */

static char g_tmpdir[512];            /* the run's temporary directory while it exists, else "" */
static volatile sig_atomic_t g_tmpdir_set;
static pid_t g_owner;                 /* the plan's own process (the handler does nothing else in a worker) */

struct plan_dirent64 { /* the kernel's linux_dirent64 */
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Remove the files of dir (not its subdirectories: it has none of ours), then dir. */
static int remove_dir_files(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            const struct plan_dirent64 *d = (const struct plan_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (d->d_name[0] == '.' && (d->d_name[1] == '\0' || (d->d_name[1] == '.' && d->d_name[2] == '\0'))) continue;
            unlinkat(fd, d->d_name, 0);
        }
    }
    close(fd);
    return rmdir(dir);
}

/* the decimal number at s up to the first byte of stop (or the end); -1 when there is none */
static long parse_num(const char *s, char stop)
{
    long v = 0;
    int any = 0;
    for (; *s && *s != stop; s++) {
        if (*s < '0' || *s > '9' || v > 100000000L) return -1;
        v = v * 10 + (*s - '0');
        any = 1;
    }
    return any ? v : -1;
}

/* the run's temporary directory is no longer needed: forget it (for the handler), then remove it */
static void tmpdir_done(const char *dir)
{
    g_tmpdir_set = 0;
    remove_dir_files(dir);
}

static void on_stop_signal(int sig)
{
    if (getpid() == g_owner) { /* not in a worker that inherited the handler (procpool resets only some signals) */
        procpool_stop_on_signal(); /* the pool's workers killed and reaped */
        if (g_tmpdir_set) remove_dir_files(g_tmpdir);
        rs_cleanup_on_signal();
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Catch sig with sa, unless it was ignored when we started (nohup's SIGHUP, a background job's
 * SIGINT): that choice is the caller's, and it stays. old: what to restore. */
static void catch_unless_ignored(int sig, const struct sigaction *sa, struct sigaction *old)
{
    if (sigaction(sig, NULL, old) == 0 && old->sa_handler == SIG_IGN) return;
    sigaction(sig, sa, old);
}

static void restore_handlers(const struct sigaction *i, const struct sigaction *t, const struct sigaction *h, const struct sigaction *p)
{
    sigaction(SIGINT, i, NULL);
    sigaction(SIGTERM, t, NULL);
    sigaction(SIGHUP, h, NULL);
    sigaction(SIGPIPE, p, NULL);
}

/* "<host>" of the temporary directories' names: the host name with anything but [A-Za-z0-9-] as '-' */
static void host_tag(char *buf, size_t n)
{
    if (gethostname(buf, n) != 0) snprintf(buf, n, "host");
    buf[n - 1] = '\0';
    for (char *c = buf; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-')) *c = '-';
    if (!buf[0]) snprintf(buf, n, "host");
}

/* Remove the temporary directories of earlier plans on this host whose process is gone (killed with
 * SIGKILL, or a crash): <tmp>/kvsim-plan.<pid>.<host>.* owned by this user, <pid> dead. Others are
 * left alone: another user's, another host's, a live plan's. The number removed. */
static int plan_clean_stale(const char *tmp, int quiet)
{
    char host[72], prefix[128];
    host_tag(host, sizeof host);
    DIR *d = opendir(tmp);
    if (!d) return 0;
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (strncmp(name, "kvsim-plan.", 11)) continue;
        long pid = parse_num(name + 11, '.');
        if (pid <= 0 || pid == (long)getpid()) continue;
        snprintf(prefix, sizeof prefix, "kvsim-plan.%ld.%s.", pid, host);
        if (strncmp(name, prefix, strlen(prefix))) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to probe) */
        char path[1200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", tmp, name);
        if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid()) continue;
        if (remove_dir_files(path) == 0) {
            removed++;
            if (!quiet) fprintf(stderr, "kvsim plan: removed %s, left by plan process %ld, which is gone\n", path, pid);
        } else if (!quiet) {
            fprintf(stderr, "kvsim plan: warning: %s, left by plan process %ld (gone), could not be removed: %s\n", path, pid,
                    strerror(errno));
        }
    }
    closedir(d);
    return removed;
}

/* The first request of c's trace that is a later turn of its session (1, and its session's name and
 * turn in why), 0 when every session has one turn, -1 + e when the trace cannot be read. Under
 * request_rate such a turn still waits for its session's previous one, so the rate of requests the
 * load process offers is not the rate served: --max-load searches the sessions' arrival rate. */
static int trace_multi_turn(const SimConfig *c, const SimWorld *w, char *why, size_t n, KvErr *e)
{
    TraceOptions to;
    sim_trace_options(c, c->max_context > 0 ? c->max_context : w->model->max_pos, &to);
    TraceSource *ts = trace_open(&to, e);
    if (!ts) return -1;
    TraceRequest r;
    int got, multi = 0;
    while (!multi && (got = trace_next(ts, &r, e)) == 1)
        if (r.turn > 0) {
            multi = 1;
            snprintf(why, n, "session %s has turn %d", r.session_id ? r.session_id : "?", (int)r.turn);
        }
    trace_close(ts);
    return multi ? 1 : got < 0 ? -1 : 0;
}

/* --config FILE into the spec's base, key by key through sweep's checker (where: "FILE: key"). */
static int base_from_config(SweepSpec *s, const char *path, KvErr *e)
{
    char *text = kv_read_file(path, NULL, e);
    if (!text) return 1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        kv_err(e, "%s: expected a JSON object of settings", path);
        return 1;
    }
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    const cJSON *obj = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(in, "config")) ? cJSON_GetObjectItemCaseSensitive(in, "config") : root;
    int rc = 0;
    for (const cJSON *it = obj->child; it && rc == 0; it = it->next) {
        char val[4200], where[700];
        if (!strcmp(it->string, "description") || !strcmp(it->string, "measures")) continue;
        snprintf(where, sizeof where, "%s: %s", path, it->string);
        if (sweep_spec_scalar_text(it, val, sizeof val) != 0) rc = kv_err(e, "%s: expected a string, number or boolean", where) ? 2 : 2;
        else if (sweep_check_value(NULL, it->string, val, where, e) != 0 || sweep_spec_set_base(s, it->string, val, e) != 0) rc = 2;
    }
    cJSON_Delete(root);
    return rc;
}

static int in_list(const char *list, const char *key)
{
    size_t kl = strlen(key);
    for (const char *t = list; *t;) {
        size_t len = strcspn(t, ",");
        if (len == kl && !strncmp(t, key, kl)) return 1;
        t += len;
        if (*t == ',') t++;
    }
    return 0;
}

int plan_main(int argc, char **argv)
{
    opt_short_jobs(argc, argv); /* -j N / -jN as --jobs */
    OptArgs a;
    KvErr e;
    int begin = opt_begin(&k_plan, argc, argv, &a);
    if (begin == OPT_USAGE_EXIT) return begin;
    if (begin == 0) { /* --help: the options, then more */
        printf("\ntarget metrics: %s\n", plan_target_names());
        printf("settings: every key of `kvsim run --help`\n");
        return 0;
    }
    int max_load = opt_count(&a, "--max-load") > 0, quiet = opt_count(&a, "--quiet") > 0, dry_run = opt_count(&a, "--dry-run") > 0;
    PlanTarget t[PLAN_MAX_TARGETS];
    int nt = 0;
    if (opt_get(&a, "--target") && plan_targets_parse(opt_get(&a, "--target"), t, PLAN_MAX_TARGETS, &nt, &e) != 0)
        return usage("%s", e.msg);
    if (!max_load && !dry_run && nt == 0) return usage("--target is required (e.g. --target \"ttft_p99<=500ms\"), or --max-load");
    if (dry_run && opt_get(&a, "--out")) return usage("--dry-run writes nothing: drop --out");
    int64_t seeds = 3, max_seeds = 10, jobs = procpool_default_procs(), seed_base = -1;
    if ((opt_get(&a, "--seeds") && opt_int("--seeds", opt_get(&a, "--seeds"), 1, 100, &seeds, &e) != 0) ||
        (opt_get(&a, "--max-seeds") && opt_int("--max-seeds", opt_get(&a, "--max-seeds"), 1, 100, &max_seeds, &e) != 0) ||
        (opt_get(&a, "--jobs") && opt_int("--jobs", opt_get(&a, "--jobs"), 1, 1024, &jobs, &e) != 0) ||
        (opt_get(&a, "--seed-base") && opt_int("--seed-base", opt_get(&a, "--seed-base"), 0, INT64_MAX, &seed_base, &e) != 0))
        return usage("%s", e.msg);
    if (!opt_get(&a, "--max-seeds") && max_seeds < seeds) max_seeds = seeds;
    if (max_seeds < seeds) return usage("--max-seeds %lld is below --seeds %lld", (long long)max_seeds, (long long)seeds);
    double precision = 0.05, load_start = NAN;
    if (opt_get(&a, "--precision") && (kv_parse_double(opt_get(&a, "--precision"), &precision, &e) != 0 || !(precision > 0) || precision > 1))
        return usage("--precision: expected a relative precision in (0, 1], e.g. 0.05, got '%s'", opt_get(&a, "--precision"));
    if (opt_get(&a, "--load-start") &&
        (kv_parse_double(opt_get(&a, "--load-start"), &load_start, &e) != 0 || !(load_start > 0) || load_start > 1e6))
        return usage("--load-start: expected a rate in (0, 1e6] per second, got '%s'", opt_get(&a, "--load-start"));
    const char *knob = opt_get(&a, "--load-knob");
    if (knob && strcmp(knob, "session_rate") && strcmp(knob, "request_rate"))
        return usage("--load-knob '%s': expected session_rate or request_rate", knob);
    if (!max_load && (knob || opt_get(&a, "--load-start") || opt_get(&a, "--precision")))
        return usage("--load-knob, --load-start and --precision belong to --max-load");
    const char *monotone = opt_get(&a, "--monotone") ? opt_get(&a, "--monotone") : "n_ssd,dram";
    if (!strcmp(monotone, "none")) monotone = "";
    for (const char *tk = monotone; *tk;) {
        size_t len = strcspn(tk, ",");
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)len, tk);
        if (!sim_config_known(key)) return usage("--monotone: '%s' is not a setting (expected setting names such as n_ssd,dram, or none)", key);
        tk += len;
        if (*tk == ',') tk++;
    }

    /* the space: the base, then the axes */
    SweepSpec spec;
    sweep_spec_init(&spec);
    spec.check = sweep_check_value;
    int rc = 0;
    const char *v;
    if ((v = opt_get(&a, "--scenario")) && (sweep_check_value(NULL, "scenario", v, "--scenario", &e) != 0 ||
                                             sweep_spec_set_base(&spec, "scenario", v, &e) != 0))
        rc = 2;
    if (rc == 0 && (v = opt_get(&a, "--config"))) rc = base_from_config(&spec, v, &e);
    static const struct {
        const char *opt, *key;
    } base_opts[] = {{"--hardware", "hardware_overlay"}, {"--models", "models_overlay"}};
    for (size_t i = 0; rc == 0 && i < KV_ARRAY_LEN(base_opts); i++)
        if ((v = opt_get(&a, base_opts[i].opt)) &&
            (sweep_check_value(NULL, base_opts[i].key, v, base_opts[i].opt, &e) != 0 || sweep_spec_set_base(&spec, base_opts[i].key, v, &e) != 0))
            rc = 2;
    for (int i = 0; rc == 0 && i < a.n_hits; i++) {
        const char *o = opt_hit_name(&a, i), *kv = a.hits[i].value;
        if (!strcmp(o, "--set")) {
            const char *eq = strchr(kv, '=');
            char key[64], where[128];
            if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key) {
                rc = kv_err(&e, "--set %s: expected KEY=VALUE", kv) ? 2 : 2;
                break;
            }
            snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
            snprintf(where, sizeof where, "--set %s", key);
            if (sweep_check_value(NULL, key, eq + 1, where, &e) != 0 || sweep_spec_set_base(&spec, key, eq + 1, &e) != 0) rc = 2;
        } else if (!strcmp(o, "--vary")) {
            if (max_load && (!strncmp(kv, "session_rate=", 13) || !strncmp(kv, "request_rate=", 13))) {
                rc = kv_err(&e, "--vary %.*s with --max-load: the load is what the search finds (use --load-knob)", (int)strcspn(kv, "="),
                            kv) ? 2 : 2;
                break;
            }
            if (!strncmp(kv, "policies=", 9) || !strncmp(kv, "seed=", 5)) {
                rc = kv_err(&e, "--vary %.*s: not an axis of a plan (policies: --policies, each answered on its own; seeds: --seeds)",
                            (int)strcspn(kv, "="), kv) ? 2 : 2;
                break;
            }
            if (sweep_spec_set(&spec, kv, &e) != 0) rc = 2;
        }
    }
    if (rc == 0 && (v = opt_get(&a, "--policies")) &&
        (sweep_check_value(NULL, "policies", v, "--policies", &e) != 0 || sweep_spec_set_base(&spec, "policies", v, &e) != 0))
        rc = 2;
    if (rc == 0 && spec.n_axes > 0 && !max_load && !opt_get(&a, "--cost"))
        rc = kv_err(&e, "--vary needs --cost FILE.json, the prices that rank the points (e.g. configs/examples/prices.json)") ? 2 : 2;
    cJSON **points = NULL;
    int n_points = 0;
    if (rc == 0 && sweep_points(&spec, &points, &n_points, &e) != 0) rc = 2;
    if (rc) {
        fprintf(stderr, "kvsim plan: %s\n", e.msg);
        sweep_points_free(points, n_points);
        sweep_spec_free(&spec);
        return rc;
    }

    /* every point resolved once: its parts, or why it cannot run */
    PlanPoint *info = calloc((size_t)n_points, sizeof *info);
    double *cost = calloc((size_t)n_points, sizeof *cost);
    int *coord = calloc((size_t)n_points * (size_t)(spec.n_axes + 1), sizeof *coord);
    double *amount = calloc((size_t)n_points * (size_t)(spec.n_axes + 1), sizeof *amount);
    int *mono = calloc((size_t)spec.n_axes + 1, sizeof *mono);
    int *store_id = calloc((size_t)n_points + 1, sizeof *store_id);
    char **labels = calloc((size_t)n_points + 1, sizeof *labels);
    char names[16][32];
    int np = 0;
    uint64_t cfg_seed = 1;
    double knob_value = 0;
    int turns_checked = 0;
    char warning[512] = "";
    PlanPrices pr;
    memset(&pr, 0, sizeof pr);
    PlanCosting pc;
    memset(&pc, 0, sizeof pc);
    if (!info || !cost || !coord || !amount || !mono || !store_id || !labels) rc = kv_err(&e, "out of memory") ? 1 : 1;
    for (int q = 0; rc == 0 && q < n_points; q++) {
        SimConfig c;
        char pol[600], origin[64];
        snprintf(origin, sizeof origin, "point %d", q + 1);
        if (point_config(&c, points[q], origin, pol, sizeof pol, &e) != 0) {
            snprintf(info[q].invalid, sizeof info[q].invalid, "%s", e.msg);
            continue;
        }
        if (np == 0) { /* the policies (the same for every point: not an axis) */
            for (const char *tk = pol; *tk && np < 16;) {
                size_t len = strcspn(tk, ",");
                snprintf(names[np++], sizeof names[0], "%.*s", (int)len, tk);
                tk += len;
                if (*tk == ',') tk++;
            }
            cfg_seed = c.seed;
            knob = knob ? knob : c.request_rate > 0 ? "request_rate" : "session_rate";
            knob_value = !strcmp(knob, "request_rate") ? c.request_rate : c.session_rate;
        }
        SimWorld w;
        if (sim_world_open(&w, &c, &e) != 0) {
            snprintf(info[q].invalid, sizeof info[q].invalid, "%s", e.msg);
            continue;
        }
        if (!warning[0]) point_spec_warning(&w, warning, sizeof warning);
        if (max_load && !strcmp(knob, "request_rate") && !turns_checked) {
            char why[256] = "";
            int mt = trace_multi_turn(&c, &w, why, sizeof why, &e);
            turns_checked = 1;
            if (mt != 0) {
                if (mt > 0)
                    kv_err(&e, "--max-load --load-knob request_rate: trace %s has sessions of several turns (%s); a turn waits "
                               "for its session's previous one, so the requests released per second do not follow request_rate "
                               "and the search would report the sessions' pace as the limit. The load of a multi-turn trace is "
                               "the arrival rate of its sessions: --load-knob session_rate (a configuration that sets "
                               "request_rate: drop it)", c.trace, why);
                rc = mt > 0 ? 2 : 1;
                sim_world_close(&w);
                break;
            }
        }
        const SimConfig *r = w.cfg;
        PlanPoint *pi = &info[q];
        snprintf(pi->gpu, sizeof pi->gpu, "%s", r->gpu);
        snprintf(pi->ssd, sizeof pi->ssd, "%s", r->ssd);
        snprintf(pi->nic, sizeof pi->nic, "%s", r->nic);
        snprintf(pi->link, sizeof pi->link, "%s", r->host_link);
        snprintf(pi->platform, sizeof pi->platform, "%s", w.platform->name);
        pi->n_gpus = r->tp * r->pp;
        pi->n_ssd = r->n_ssd;
        pi->n_nics = w.nic ? (r->nic_per_stage ? r->pp : 1) : 0;
        pi->replicas = r->replicas;
        pi->dram_bytes = r->dram_bytes;
        /* the store as resolved (store auto: the SSDs, else the remote store over the NIC, else DRAM),
         * read from the resolved settings so that its name is the one summary.json records */
        cJSON *rj = sim_config_json(r);
        const char *sn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rj, "store"));
        snprintf(pi->store, sizeof pi->store, "%s", sn ? sn : "?");
        cJSON_Delete(rj);
        sim_world_close(&w);
        if (!sn) rc = kv_err(&e, "point %d: the resolved settings have no store (a bug)", q + 1) ? 1 : 1;
    }
    /* the stores as ids for the search: points whose stores differ are never compared */
    for (int q = 0; rc == 0 && q < n_points; q++) {
        store_id[q] = q;
        for (int r = 0; r < q; r++)
            if (!strcmp(info[r].store, info[q].store)) {
                store_id[q] = store_id[r];
                break;
            }
    }
    for (int q = 0; rc == 0 && q < n_points; q++) {
        char lab[400], full[440];
        plan_axes_label(&spec, points, q, lab, sizeof lab);
        snprintf(full, sizeof full, "point %d (%s)", q + 1, lab);
        if (!(labels[q] = strdup(full))) rc = kv_err(&e, "out of memory") ? 1 : 1;
    }
    for (int ax = 0; rc == 0 && ax < spec.n_axes; ax++) {
        const SweepAxis *A = &spec.axes[ax];
        mono[ax] = in_list(monotone, A->key);
        for (int q = 0; q < n_points && rc == 0; q++) {
            const char *val = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(points[q], A->key));
            for (int k = 0; k < A->n; k++)
                if (!strcmp(A->values[k], val)) coord[q * spec.n_axes + ax] = k;
            if (!mono[ax]) continue;
            double amt = NAN;
            uint64_t bytes;
            KvErr pe;
            if (!strcmp(A->key, "n_ssd")) amt = info[q].invalid[0] ? NAN : info[q].n_ssd;
            else if (!strcmp(A->key, "dram")) amt = info[q].invalid[0] ? NAN : (double)info[q].dram_bytes;
            else if (kv_parse_double(val, &amt, &pe) != 0 && kv_parse_size(val, &bytes, &pe) == 0) amt = (double)bytes;
            else if (!isfinite(amt)) {
                rc = kv_err(&e, "--monotone %s: the value '%s' is not an amount (a number or a size)", A->key, val) ? 2 : 2;
            }
            amount[q * spec.n_axes + ax] = amt;
        }
    }
    if (rc == 0 && np == 0) rc = kv_err(&e, "no point of the space has valid settings: %s", info[0].invalid) ? 1 : 1;
    if (rc == 0 && max_load && spec.n_axes == 0 && info[0].invalid[0]) rc = kv_err(&e, "%s", info[0].invalid) ? 1 : 1;
    if (rc == 0 && opt_get(&a, "--cost")) {
        if (plan_prices_load(&pr, opt_get(&a, "--cost"), &e) != 0) rc = 1;
        else if (plan_price_points(&pr, info, n_points, (const char *const *)labels, cost, &pc, &e) != 0) rc = 2;
    } else {
        for (int q = 0; q < n_points; q++) cost[q] = info[q].invalid[0] ? NAN : 0;
    }
    if (rc) {
        fprintf(stderr, "kvsim plan: %s\n", e.msg);
        goto out;
    }
    if (warning[0] && !quiet) fprintf(stderr, "kvsim: warning: %s\n", warning);

    PlanCtx x;
    memset(&x, 0, sizeof x);
    x.points = points;
    x.n_points = n_points;
    x.policies = names;
    x.np = np;
    x.t = t;
    x.nt = nt;
    x.knob = max_load ? knob : NULL;
    x.jobs = (int)jobs;
    x.spec = &spec;
    x.info = info;
    x.cost = cost;
    x.currency = pr.currency[0] ? pr.currency : "USD";
    x.quiet = quiet;
    x.with_store = spec.n_axes > 0;
    const char *basename = opt_get(&a, "--config") ? opt_get(&a, "--config") : opt_get(&a, "--scenario") ? opt_get(&a, "--scenario") : "the defaults";
    if (dry_run) { /* the space as it would be searched: every point's store, cost and parts; nothing run */
        printf("# kvsim plan --dry-run: %d point%s, nothing simulated\n\n- base: %s; space: ", n_points, n_points == 1 ? "" : "s",
               basename);
        cJSON *scratch = cJSON_CreateObject();
        plan_space_text(stdout, scratch, &spec);
        printf("%s= %d point%s\n", spec.n_axes ? " " : "one configuration ", n_points, n_points == 1 ? "" : "s");
        if (opt_get(&a, "--cost")) plan_cost_line(stdout, scratch, &x, &pr, &pc);
        cJSON_Delete(scratch);
        plan_stores_line(stdout, info, n_points);
        printf("- policies: ");
        for (int k = 0; k < np; k++) printf("%s%s", k ? ", " : "", names[k]);
        printf("\n\n");
        plan_points_table(stdout, &x, opt_get(&a, "--cost") ? &pr : NULL, &pc);
        fflush(stdout);
        goto out;
    }
    /* the workers' files: a directory named after this process, removed on SIGINT/SIGTERM; the ones
     * that plans killed with SIGKILL left on this host are removed first */
    const char *tmp = getenv("TMPDIR");
    tmp = tmp && *tmp ? tmp : "/tmp";
    plan_clean_stale(tmp, quiet);
    char host[72];
    host_tag(host, sizeof host);
    struct sigaction sa, old_int, old_term, old_hup, old_pipe;
    memset(&sa, 0, sizeof sa);
    g_owner = getpid();
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaddset(&sa.sa_mask, SIGPIPE);
    catch_unless_ignored(SIGINT, &sa, &old_int);
    catch_unless_ignored(SIGTERM, &sa, &old_term);
    catch_unless_ignored(SIGHUP, &sa, &old_hup);
    catch_unless_ignored(SIGPIPE, &sa, &old_pipe); /* `kvsim plan ... | head`: stdout or stderr closed under us */
    int tl = snprintf(x.tmpdir, sizeof x.tmpdir, "%s/kvsim-plan.%ld.%s.XXXXXX", tmp, (long)getpid(), host);
    if (tl >= (int)sizeof x.tmpdir || tl >= (int)sizeof g_tmpdir) {
        fprintf(stderr, "kvsim plan: TMPDIR %s: too long for the temporary directory's path (at most %zu characters)\n", tmp,
                sizeof g_tmpdir - 40 - strlen(host));
        restore_handlers(&old_int, &old_term, &old_hup, &old_pipe);
        rc = 1;
        goto out;
    }
    if (!mkdtemp(x.tmpdir)) {
        fprintf(stderr, "kvsim plan: %s: cannot create a temporary directory: %s\n", x.tmpdir, strerror(errno));
        restore_handlers(&old_int, &old_term, &old_hup, &old_pipe);
        rc = 1;
        goto out;
    }
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s", x.tmpdir);
    g_tmpdir_set = 1;
    Planner p;
    memset(&p, 0, sizeof p);
    p.t = t;
    p.nt = nt;
    p.seeds = (int)seeds;
    p.max_seeds = (int)max_seeds;
    p.seed_base = seed_base >= 0 ? (uint64_t)seed_base : cfg_seed;
    p.eval = plan_real_eval;
    p.ctx = &x;
    p.progress = plan_progress_line;
    p.progress_ctx = &x;

    char *rep = NULL;
    size_t rep_len = 0;
    FILE *f = open_memstream(&rep, &rep_len);
    cJSON *pj = cJSON_CreateObject();
    if (!f || !pj) {
        fprintf(stderr, "kvsim plan: out of memory\n");
        rc = 1;
        if (f) fclose(f);
        free(rep);
        cJSON_Delete(pj);
        tmpdir_done(x.tmpdir);
        restore_handlers(&old_int, &old_term, &old_hup, &old_pipe);
        goto out;
    }
    /* the header: what was asked, how it is decided */
    char tgt[1200] = "";
    for (int i = 0; i < nt; i++) {
        size_t l = strlen(tgt);
        snprintf(tgt + l, sizeof tgt - l, "%s%s", i ? ", " : "", t[i].text);
    }
    cJSON_AddStringToObject(pj, "kind", max_load ? "max_load" : "cheapest");
    cJSON_AddStringToObject(pj, "base", basename);
    cJSON *jt = cJSON_AddArrayToObject(pj, "targets");
    for (int i = 0; i < nt; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t[i].name);
        cJSON_AddStringToObject(o, "metric", t[i].metric);
        cJSON_AddStringToObject(o, "op", plan_op_text(t[i].op));
        cJSON_AddNumberToObject(o, "limit", t[i].limit);
        cJSON_AddItemToArray(jt, o);
    }
    cJSON_AddNumberToObject(pj, "seeds", (double)seeds);
    cJSON_AddNumberToObject(pj, "max_seeds", (double)max_seeds);
    cJSON_AddNumberToObject(pj, "seed_base", (double)p.seed_base);
    cJSON_AddNumberToObject(pj, "level", 0.95);
    if (max_load) {
        fprintf(f, "# kvsim plan: the highest sustainable %s%s%s%s\n\n", knob, nt ? " meeting " : "", tgt,
                spec.n_axes ? ", per configuration" : "");
        fprintf(f, "- base: %s; the load: %s (per second), from %.4g, to a relative precision of %.1f %%\n", basename, knob,
                isfinite(load_start) ? load_start : knob_value > 0 ? knob_value : 1.0, 100 * precision);
        fprintf(f, "- assumed: the verdict is monotone in the load (a higher rate never turns a failing point into a passing "
                   "one): doubling or halving brackets the limit, bisection narrows it\n");
        cJSON_AddStringToObject(pj, "knob", knob);
        cJSON_AddNumberToObject(pj, "precision", precision);
        if (spec.n_axes) {
            fprintf(f, "- space: ");
            plan_space_text(f, pj, &spec);
            fprintf(f, " = %d configuration%s, each searched on its own (the search --max-load runs with its values as --set)\n",
                    n_points, n_points == 1 ? "" : "s");
            if (opt_get(&a, "--cost")) plan_cost_line(f, pj, &x, &pr, &pc);
            plan_stores_line(f, info, n_points);
            plan_points_json(pj, points, n_points, cost, info, opt_get(&a, "--cost") ? &pr : NULL, &pc);
        } else {
            char sw[160];
            plan_store_words(&info[0], sw, sizeof sw);
            fprintf(f, "- store: %s\n", sw);
        }
    } else {
        fprintf(f, "# kvsim plan: the cheapest configuration meeting %s\n\n", tgt);
        fprintf(f, "- base: %s; space: ", basename);
        plan_space_text(f, pj, &spec);
        fprintf(f, "%s= %d point%s\n", spec.n_axes ? " " : "one configuration ", n_points, n_points == 1 ? "" : "s");
        if (opt_get(&a, "--cost")) plan_cost_line(f, pj, &x, &pr, &pc);
        if (spec.n_axes) {
            plan_stores_line(f, info, n_points);
        } else if (!info[0].invalid[0]) {
            char sw[160];
            plan_store_words(&info[0], sw, sizeof sw);
            fprintf(f, "- store: %s\n", sw);
        }
        if (spec.n_axes && opt_count(&a, "--no-prune") == 0) {
            char ml[512] = "";
            for (int ax = 0; ax < spec.n_axes; ax++)
                if (mono[ax]) {
                    size_t l = strlen(ml);
                    snprintf(ml + l, sizeof ml - l, "%s%s", l ? ", " : "", spec.axes[ax].key);
                }
            if (ml[0])
                fprintf(f, "- pruning: assumed monotone in %s (more never makes a passing point fail): a point with at most "
                           "a failing point's amounts there and the same other values is taken to fail, not run "
                           "(--no-prune: no assumption)\n", ml);
            else fprintf(f, "- pruning: no monotone axis in the space (--monotone): the cost order alone ends the search\n");
        } else if (spec.n_axes) {
            fprintf(f, "- pruning: off (--no-prune): no monotonicity assumed; the cost order alone ends the search\n");
        }
        cJSON *jm = cJSON_AddArrayToObject(pj, "monotone");
        for (int ax = 0; ax < spec.n_axes; ax++)
            if (mono[ax] && !opt_count(&a, "--no-prune")) cJSON_AddItemToArray(jm, cJSON_CreateString(spec.axes[ax].key));
        plan_points_json(pj, points, n_points, cost, info, opt_get(&a, "--cost") ? &pr : NULL, &pc);
    }
    fprintf(f, "- decision: per point %lld seed%s from seed %llu, up to %lld while uncertain; a target holds when the 95 %% interval of "
               "its mean lies within the limit, fails when it lies past it, else uncertain; overloaded in every seed fails, in "
               "some: uncertain; uncertain never counts as met\n\n",
            (long long)seeds, seeds == 1 ? ", no interval" : "s", (unsigned long long)p.seed_base, (long long)max_seeds);
    cJSON_AddObjectToObject(pj, "policies");
    int64_t total_runs = 0, total_evals = 0;
    for (int k = 0; k < np && rc == 0; k++) {
        int64_t before = p.runs;
        if (max_load && spec.n_axes) {
            double start = isfinite(load_start) ? load_start : knob_value > 0 ? knob_value : 1.0;
            PlanMaxLoad *ms = calloc((size_t)n_points, sizeof *ms);
            int64_t *runs = calloc((size_t)n_points, sizeof *runs);
            if (!ms || !runs) rc = kv_err(&e, "plan: out of memory") ? 1 : 1;
            for (int q = 0; rc == 0 && q < n_points; q++) {
                int64_t b = p.runs;
                if (info[q].invalid[0]) ms[q].point = -1;
                else if (plan_max_load_at(&p, q, k, start, precision, 1e-6, 1e6, &ms[q], &e) != 0) rc = 1;
                else total_evals += ms[q].n_evals;
                runs[q] = p.runs - b;
            }
            if (rc == 0) plan_report_max_load_grid(f, pj, &x, &p, ms, runs, k, precision, p.runs - before);
            for (int q = 0; ms && q < n_points; q++) plan_max_load_free(&ms[q]);
            free(ms);
            free(runs);
        } else if (max_load) {
            PlanMaxLoad m;
            double start = isfinite(load_start) ? load_start : knob_value > 0 ? knob_value : 1.0;
            if (plan_max_load(&p, k, start, precision, 1e-6, 1e6, &m, &e) != 0) rc = 1;
            else {
                plan_report_max_load(f, pj, &x, &p, &m, precision, p.runs - before);
                total_evals += m.n_evals;
            }
            plan_max_load_free(&m);
        } else {
            PlanSpace sp = {n_points, spec.n_axes, coord, cost, mono, amount, opt_count(&a, "--no-prune") == 0, store_id};
            PlanCheapest c;
            if (plan_cheapest(&p, &sp, k, &c, &e) != 0) rc = 1;
            else {
                plan_report_cheapest(f, pj, &x, &p, &sp, &c, p.runs - before);
                total_evals += c.evaluated;
            }
            plan_cheapest_free(&c);
        }
        total_runs += p.runs - before;
    }
    if (rc == 0 && spec.n_axes > 0 && (!max_load || opt_get(&a, "--cost"))) {
        fprintf(f, "## The points: store, cost and priced parts\n\n");
        plan_points_table(f, &x, opt_get(&a, "--cost") ? &pr : NULL, &pc);
        fprintf(f, "\n");
    }
    fclose(f);
    tmpdir_done(x.tmpdir);
    if (rc == 0) {
        fwrite(rep, 1, rep_len, stdout);
        fflush(stdout);
        if (!quiet) {
            if (max_load && spec.n_axes)
                fprintf(stderr, "plan: %lld evaluations over %d configurations × %d policies, %lld simulations\n", (long long)total_evals,
                        n_points, np, (long long)total_runs);
            else if (max_load) fprintf(stderr, "plan: %lld evaluations, %lld simulations\n", (long long)total_evals, (long long)total_runs);
            else fprintf(stderr, "plan: %lld evaluations of a grid of %d points × %d policies (%lld simulations; the full grid: %lld)\n",
                         (long long)total_evals, n_points, np, (long long)total_runs, (long long)n_points * np * seeds);
        }
    } else {
        fprintf(stderr, "kvsim plan: %s\n", e.msg);
    }
    if (rc == 0 && opt_get(&a, "--out")) {
        ResultSet rs;
        char path[4400];
        char *js = cJSON_Print(pj); /* SIGINT/SIGTERM while writing: on_stop_signal removes the set's temporaries */
        if (!js || rs_begin(&rs, opt_get(&a, "--out"), &e) != 0) rc = 1;
        else {
            if (rs_path(&rs, "plan.md", path, sizeof path, &e) != 0 || kv_write_atomic(path, rep, rep_len, &e) != 0 ||
                rs_path(&rs, "plan.json", path, sizeof path, &e) != 0 || kv_write_atomic(path, js, strlen(js), &e) != 0 ||
                rs_commit(&rs, &e) != 0)
                rc = 1;
            if (rc) rs_abort(&rs);
        }
        if (rc) fprintf(stderr, "kvsim plan: %s\n", js ? e.msg : "out of memory");
        cJSON_free(js);
    }
    restore_handlers(&old_int, &old_term, &old_hup, &old_pipe);
    free(rep);
    cJSON_Delete(pj);
    plan_free(&p);
out:
    plan_prices_free(&pr);
    for (int q = 0; labels && q < n_points; q++) free(labels[q]);
    free(labels);
    free(store_id);
    free(info);
    free(cost);
    free(coord);
    free(amount);
    free(mono);
    sweep_points_free(points, n_points);
    sweep_spec_free(&spec);
    return rc;
}
