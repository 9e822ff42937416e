/* experiment.c — run/compare as jobs of the process pool, merged into one result set; see
 * experiment.h.
 *
 * A job's file: its requests.csv rows (no header; with the seed column under replications), then
 * its SimResult record (results/resfile.h), then a trailer: "KVJOBEND" and the record's offset
 * (u64). The parent copies the rows into requests.csv and reads the record, job after job. A job
 * the parent ran itself (serially) writes no record: its result is handed over in memory.
 */
#include "sim/cli/experiment.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "results/html.h"
#include "results/plot.h"
#include "results/plot_history.h"
#include "results/plot_timeline.h"
#include "results/plot_trace.h"
#include "results/plot_util.h"
#include "results/replications.h"
#include "results/report.h"
#include "results/resfile.h"
#include "results/resultset.h"
#include "results/verdict.h"
#include "sim/base/opt.h"
#include "sim/cli/procpool.h"

static const char k_trailer[8] = {'K', 'V', 'J', 'O', 'B', 'E', 'N', 'D'};

typedef struct Progress {
    int tty;
    double last_line;
    const char *policy;
    int printed;
} Progress;

static void progress(void *ctx, double frac, uint64_t done, int64_t sim_ns)
{
    Progress *p = ctx;
    if (p->tty) {
        if (frac >= 0) fprintf(stderr, "\r  %-12s %5.1f%%  %llu requests  %.0f s simulated   ", p->policy, 100 * frac,
                               (unsigned long long)done, (double)sim_ns / 1e9);
        else fprintf(stderr, "\r  %-12s %llu requests  %.0f s simulated   ", p->policy, (unsigned long long)done, (double)sim_ns / 1e9);
        p->printed = 1;
    } else if (p->last_line++ >= 4) { /* every ~5 s when not a terminal */
        p->last_line = 0;
        fprintf(stderr, "  %s: %llu requests, %.0f s simulated\n", p->policy, (unsigned long long)done, (double)sim_ns / 1e9);
    }
}

typedef struct Exp {
    const ExpSpec *x;
    pid_t parent;
    /* the parent's merge of each finished job (job_done), in job order while later jobs run */
    const char *dir;        /* the result set's temporary directory: the jobs' files */
    FILE *csv, *ucsv, *tcsv; /* requests.csv (NULL with --no-csv), utilisation.csv, timeline.csv (NULL without) */
    PlotHistSamples *hist;
    SimResult *res;         /* a run's or compare's results; under replications the first seed's only */
    char (*tparts)[4500];   /* the Chrome trace's parts (NULL without --trace-out) */
    int merged;             /* jobs merged so far */
    /* replications, each job reduced as it is merged: its scalars (runs[k]), its TTFT-split histograms
     * added to its policy's (pooled), its summary.json object appended to spill */
    ReplRun *runs;
    SimResult *pooled;
    FILE *spill;
    FILE *ucsv0;            /* the first seed's utilisation rows, all utilisation.svg draws */
    /* a job run in this process (serial) leaves its result here for its merge instead of writing its
     * record to its file and reading it back (held_k: its job, -1 when none) */
    SimResult held;
    int held_k;
} Exp;

static uint64_t job_seed(const ExpSpec *x, int k) { return x->n_seeds ? x->seed_base + (uint64_t)(k / x->np) : x->cfg->seed; }

static void job_label(void *ctx, int k, char *buf, size_t cap)
{
    const ExpSpec *x = ((Exp *)ctx)->x;
    if (x->n_seeds) snprintf(buf, cap, "seed %llu, %s", (unsigned long long)job_seed(x, k), x->names[k % x->np]);
    else snprintf(buf, cap, "%s", x->names[k % x->np]);
}

/* The file beside job k's file for one of its recordings: job-<k>.tmp.<pid> → job-<k>-<kind>.tmp.<pid>
 * (a temporary of the result set, like the job's file). */
static void aside_path(const char *path, const char *kind, char *buf, size_t cap)
{
    const char *base = strrchr(path, '/'), *t = strstr(base ? base : path, ".tmp.");
    if (!t) t = path + strlen(path);
    snprintf(buf, cap, "%.*s-%s%s", (int)(t - path), path, kind, t);
}

/* Close a job's file, failing on any write that failed in it (ferror: an earlier fwrite, which
 * fclose alone does not report) with the file and the cause. */
static int close_checked(FILE *f, const char *path, KvErr *e)
{
    int er = fflush(f) != 0 ? errno : 0, bad = ferror(f);
    if (fclose(f) != 0 && !er) er = errno;
    if (er) return kv_err(e, "%s: write failed: %s", path, strerror(er));
    if (bad) return kv_err(e, "%s: write failed (disk full?)", path);
    return 0;
}

/* The recordings of one job written beside its file (before the trailer is written, so that a job
 * file that counts as complete has its recordings complete too). */
static int job_recordings(const ExpSpec *x, const char *path, const char *name, uint64_t seed, const SimUtilSeries *u,
                          const SimTimeline *tl, KvErr *e)
{
    char ap[4500];
    aside_path(path, "util", ap, sizeof ap);
    FILE *f = fopen(ap, "w");
    if (!f) return kv_err(e, "%s: cannot create: %s", ap, strerror(errno));
    plot_util_csv_rows(f, u, name, x->n_seeds > 0, seed);
    if (close_checked(f, ap, e) != 0) return -1;
    if (!x->timeline) return 0;
    aside_path(path, "timeline", ap, sizeof ap);
    if (!(f = fopen(ap, "w"))) return kv_err(e, "%s: cannot create: %s", ap, strerror(errno));
    plot_timeline_csv_rows(f, tl, name, x->n_seeds > 0, seed);
    return close_checked(f, ap, e);
}

/* A job's rows: requests.csv's, and beside them each request's (history tokens, TTFT ns) as two
 * int64s for ttft_history.svg (the parent draws it from these instead of reading the CSV back). */
typedef struct JobRows {
    ReqCsv csv;
    FILE *hist;
    char hist_path[4500];
} JobRows;

static int job_row(void *ctx, const SimRequestRow *row, KvErr *e)
{
    JobRows *j = ctx;
    if (report_csv_row(&j->csv, row, e) != 0) return -1;
    const int64_t v[2] = {row->history_tokens, row->ttft_ns};
    if (fwrite(v, sizeof v, 1, j->hist) != 1) return kv_err(e, "%s: write failed: %s", j->hist_path, strerror(errno));
    return 0;
}

/* The TTFT the figure reads from requests.csv's ttft_s: the nine decimals report_app_seconds9
 * writes, read back (for 0 <= ns < 8e15 the text is exactly ns / 10^9 and both ns and 10^9 are
 * exact doubles, so the one division is what strtod returns; otherwise through the text). */
static double csv_seconds(int64_t ns)
{
    if (ns >= 0 && ns < 8000000000000000LL) return (double)ns / 1e9;
    char b[64];
    *report_app_seconds9(b, ns) = '\0';
    return strtod(b, NULL);
}

/* Job k's samples for ttft_history.svg appended to hs (its policy registered at its first row, as
 * in requests.csv's order); the file removed. */
static int merge_history(const char *jpath, const char *policy, PlotHistSamples *hs, KvErr *e)
{
    char ap[4500];
    aside_path(jpath, "hist", ap, sizeof ap);
    FILE *in = fopen(ap, "rb");
    if (!in) return kv_err(e, "%s: a job's history samples are missing", ap);
    int64_t v[2];
    int rc = 0, pi = -2;
    while (rc == 0 && fread(v, sizeof v, 1, in) == 1) {
        if (pi == -2) pi = phist_policy(hs, policy);
        if (pi >= 0 && phist_push(hs, pi, (double)v[0], csv_seconds(v[1])) != 0) rc = kv_err(e, "%s: out of memory", ap);
    }
    if (rc == 0 && ferror(in)) rc = kv_err(e, "%s: read failed", ap);
    fclose(in);
    unlink(ap);
    return rc;
}

static int job_run(void *ctx, int k, const char *path, KvErr *e)
{
    Exp *xp = ctx;
    const ExpSpec *x = xp->x;
    const char *name = x->names[k % x->np];
    uint64_t seed = job_seed(x, k);
    SimWorld own, *w = x->w;
    int opened = 0;
    if (seed != x->w->cfg->seed) { /* another replication: the same settings under its own seed */
        SimConfig c = *x->cfg;
        c.seed = seed;
        if (sim_world_open(&own, &c, e) != 0) return -1;
        w = &own;
        opened = 1;
    }
    int rc = -1;
    FILE *f = fopen(path, "wb");
    if (!f) {
        kv_err(e, "%s: cannot create the job's file", path);
        goto out;
    }
    JobRows rows;
    memset(&rows, 0, sizeof rows);
    ReqCsv *csv = &rows.csv;
    csv->af.f = f;
    snprintf(csv->af.path, sizeof csv->af.path, "%s", path);
    csv->policy = name;
    csv->seed_col = x->n_seeds > 0;
    csv->seed = seed;
    csv->load_columns = report_csv_load_columns(w->cfg);
    aside_path(path, "hist", rows.hist_path, sizeof rows.hist_path);
    if (!x->no_csv && !(rows.hist = fopen(rows.hist_path, "wb"))) {
        kv_err(e, "%s: cannot create", rows.hist_path);
        fclose(f);
        goto out;
    }
    /* progress only where someone sees it as it happens: not in a worker (its stderr is replayed later) */
    int show = !x->cfg->quiet && getpid() == xp->parent;
    Progress pg = {isatty(2), 0, name, 0};
    SimResult r;
    memset(&r, 0, sizeof r);
    SimUtilSeries util;
    SimTimeline tl;
    memset(&util, 0, sizeof util);
    memset(&tl, 0, sizeof tl);
    SimRunOpts ro = {x->no_csv ? NULL : job_row, &rows, show ? progress : NULL, &pg, &util, x->util_window_ns,
                     x->timeline ? &tl : NULL, x->timeline_request, NULL};
    PlotTrace tr;
    SimEventSink sink;
    int n_jobs = (x->n_seeds ? x->n_seeds : 1) * x->np;
    if (x->trace_out) {
        char tp[4500], label[96];
        aside_path(path, "trace", tp, sizeof tp);
        job_label(ctx, k, label, sizeof label);
        uint64_t cap = x->trace_max_events / (uint64_t)n_jobs;
        if (ptrace_open(&tr, tp, k, label, cap > 0 ? cap : 1, e) != 0) {
            fclose(f);
            if (rows.hist) fclose(rows.hist);
            goto out;
        }
        ptrace_sink(&tr, &sink);
        ro.sink = &sink;
    }
    int run_rc = sim_run_ex(w, name, &ro, &r, e);
    if (rows.hist) {
        KvErr he;
        if (close_checked(rows.hist, rows.hist_path, &he) != 0 && run_rc == 0) run_rc = kv_err(e, "%s", he.msg);
    }
    if (run_rc == 0 && x->trace_out) run_rc = ptrace_close(&tr, e);
    else if (x->trace_out) ptrace_abort(&tr);
    if (run_rc == 0) run_rc = job_recordings(x, path, name, seed, &util, &tl, e);
    sim_util_free(&util);
    sim_timeline_free(&tl);
    if (run_rc != 0) {
        if (pg.printed) fputc('\n', stderr);
        fclose(f);
        sim_result_free(&r);
        goto out;
    }
    if (pg.printed) fputc('\n', stderr);
    char who[64] = "";
    if (x->n_seeds) snprintf(who, sizeof who, " (seed %llu)", (unsigned long long)seed);
    if (!x->cfg->quiet)
        fprintf(stderr, "  %-12s%s %llu requests, %.1f s simulated in %.2f s (%.0f× real time, %llu events)\n", name, who,
                (unsigned long long)r.requests, (double)r.sim_end_ns / 1e9, r.wall_s,
                r.wall_s > 0 ? (double)r.sim_end_ns / 1e9 / r.wall_s : 0, (unsigned long long)r.events);
    if (x->stats) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        /* one machine-readable line for tests/bench.sh */
        fprintf(stderr, "stats policy=%s requests=%llu events=%llu sim_s=%.3f wall_s=%.3f maxrss_kib=%ld queue_events=%llu "
                "waiting_peak_bytes=%llu decode_steps=%llu cancelled_timers=%llu\n",
                name, (unsigned long long)r.requests, (unsigned long long)r.events, (double)r.sim_end_ns / 1e9, r.wall_s,
                ru.ru_maxrss, (unsigned long long)r.queue_events, (unsigned long long)r.waiting_peak_bytes,
                (unsigned long long)r.decode_steps, (unsigned long long)r.cancelled_timers);
    }
    uint64_t off = (uint64_t)ftello(f);
    int wr = 0;
    if (getpid() == xp->parent) { /* merged by this process: the record stays in memory */
        xp->held = r;
        xp->held_k = k;
    } else {
        wr = resfile_write(f, &r, e);
        sim_result_free(&r);
        if (wr != 0) kv_err_prefix(e, "%s: ", path);
    }
    if (wr == 0 && (fwrite(k_trailer, 1, sizeof k_trailer, f) != sizeof k_trailer || fwrite(&off, sizeof off, 1, f) != 1))
        wr = kv_err(e, "%s: write failed: %s", path, strerror(errno));
    KvErr ce;
    if (close_checked(f, path, &ce) != 0 && wr == 0) wr = kv_err(e, "%s", ce.msg);
    rc = wr;
out:
    if (opened) sim_world_close(&own);
    return rc;
}

/* Job k's file: rows appended to csv (when given), the record read into *r (or taken from xp->held,
 * where the job ran in this process); the file removed. */
static int job_merge(Exp *xp, int k, const char *path, FILE *csv, SimResult *r, KvErr *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return kv_err(e, "%s: a job's file is missing", path);
    int rc = -1;
    char tr[8];
    uint64_t off = 0;
    if (fseeko(f, -16, SEEK_END) != 0 || fread(tr, 1, 8, f) != 8 || memcmp(tr, k_trailer, 8) != 0 ||
        fread(&off, sizeof off, 1, f) != 1) {
        kv_err(e, "%s: a job's file without its trailer", path);
        goto done;
    }
    const char *what = "writing requests.csv";
    if (csv) {
        /* the rows in the kernel (copy_file_range), else through a buffer */
        if (fflush(csv) != 0) goto io;
        off_t in = 0;
        uint64_t left = off;
        while (left > 0) {
            ssize_t n = copy_file_range(fileno(f), &in, fileno(csv), NULL, left, 0);
            if (n <= 0) break;
            left -= (uint64_t)n;
        }
        if (fseeko(csv, 0, SEEK_END) != 0 || fseeko(f, in, SEEK_SET) != 0) goto io;
        char buf[65536];
        while (left > 0) {
            size_t want = left < sizeof buf ? (size_t)left : sizeof buf;
            if (fread(buf, 1, want, f) != want) {
                what = "reading the job's rows";
                goto io;
            }
            if (fwrite(buf, 1, want, csv) != want) goto io;
            left -= want;
        }
    }
    if (fseeko(f, (off_t)off, SEEK_SET) != 0) {
        what = "reading the job's record";
        goto io;
    }
    if (xp->held_k == k) {
        *r = xp->held;
        xp->held_k = -1;
        rc = 0;
    } else {
        rc = resfile_read(f, path, r, e);
    }
    goto done;
io:
    kv_err(e, "%s: merging it: %s failed: %s", path, what, strerror(errno));
done:
    fclose(f);
    unlink(path);
    return rc;
}

/* Append the recording `kind` of job k to out (when given) and to also (when given), and remove it. */
static int merge_aside(const char *jpath, const char *kind, FILE *out, FILE *also, KvErr *e)
{
    char ap[4500], buf[65536];
    aside_path(jpath, kind, ap, sizeof ap);
    FILE *in = fopen(ap, "rb");
    if (!in) return kv_err(e, "%s: a job's %s recording is missing", ap, kind);
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if ((out && fwrite(buf, 1, n, out) != n) || (also && fwrite(buf, 1, n, also) != n))
            rc = kv_err(e, "%s: merging it into the result's %s file failed: %s", ap, kind, strerror(errno));
    if (ferror(in)) rc = kv_err(e, "%s: read failed", ap);
    fclose(in);
    unlink(ap);
    return rc;
}

/* Job k's files into the experiment's: its recordings, its history samples, its rows and result. */
static int job_done(void *ctx, int k, KvErr *e)
{
    Exp *xp = ctx;
    const ExpSpec *x = xp->x;
    char jpath[4400];
    SimResult one, *r = x->n_seeds ? &one : &xp->res[k];
    if (procpool_job_path(xp->dir, k, jpath, sizeof jpath, e) != 0 ||
        merge_aside(jpath, "util", xp->ucsv, k < x->np ? xp->ucsv0 : NULL, e) != 0 ||
        (xp->tcsv && merge_aside(jpath, "timeline", xp->tcsv, NULL, e) != 0) ||
        (xp->csv && merge_history(jpath, x->names[k % x->np], xp->hist, e) != 0) || job_merge(xp, k, jpath, xp->csv, r, e) != 0)
        return -1;
    if (x->n_seeds) { /* reduced now: the seeds' runs are not kept (the first seed's are, for "policies") */
        int p = k % x->np, s = k / x->np;
        SimResult *pl = &xp->pooled[p];
        if (s == 0) snprintf(pl->policy, sizeof pl->policy, "%s", r->policy);
        hist_merge(&pl->ttft, &r->ttft);
        hist_merge(&pl->queue, &r->queue);
        hist_merge(&pl->restore, &r->restore);
        hist_merge(&pl->prefill, &r->prefill);
        int rc = repl_run_reduce(&xp->runs[k], r, x->pct, x->n_pct, e) != 0 || report_policy_json_spill(xp->spill, x->w->cfg, r, e) != 0 ? -1 : 0;
        if (s == 0) xp->res[p] = *r;
        else sim_result_free(r);
        if (rc != 0) return -1;
    }
    if (xp->tparts) aside_path(jpath, "trace", xp->tparts[k], sizeof xp->tparts[k]);
    xp->merged = k + 1;
    return 0;
}

/* The files drawn from the merged results, each an independent job of a pool (in parallel with
 * --jobs > 1; the longest first): summary.json and the figures — one curve per policy, under
 * replications every seed's requests pooled; a single run's in this process. */
enum { OUT_HISTORY, OUT_UTIL, OUT_SUMMARY, OUT_CURVES, OUT_TIMELINE, OUT_N };

typedef struct OutCtx {
    ResultSet *rs;
    const ExpSpec *x;
    const SimResult *res, *curves;
    const Replications *rep;
    const PlotHistSamples *hist;
    const char *title, *pooled_title;
    const char *util0;  /* replications: the first seed's utilisation rows (all the figure draws) */
    int kind[OUT_N], files[OUT_N]; /* job k's kind; the set's file count when it starts (as if one after another) */
} OutCtx;

static void out_label(void *ctx, int k, char *buf, size_t cap)
{
    static const char *const what[] = {"ttft_history.svg", "utilisation.svg", "summary.json", "the TTFT curves", "timeline.svg"};
    snprintf(buf, cap, "writing %s", what[((OutCtx *)ctx)->kind[k]]);
}

static int out_run(void *ctx, int k, const char *job_path, KvErr *e)
{
    OutCtx *o = ctx;
    const ExpSpec *x = o->x;
    char path[4400], data[4400];
    o->rs->files = o->files[k]; /* the set's count of names handed out (KVSIM_FAULT_AFTER_FILES), in a worker too */
    switch (o->kind[k]) {
    case OUT_SUMMARY:
        if (rs_path(o->rs, "summary.json", path, sizeof path, e) != 0 ||
            report_summary_json_repl(path, x->w, x->trace_desc, o->res, x->np, o->rep, e) != 0)
            return -1;
        return 0;
    case OUT_CURVES:
        if (rs_path(o->rs, "ttft_cdf.svg", path, sizeof path, e) != 0 ||
            plot_ttft_cdf_svg(path, o->curves, x->np, o->pooled_title, x->cfg->slo_ttft_ns, e) != 0 ||
            rs_path(o->rs, "ttft_ccdf.svg", path, sizeof path, e) != 0 ||
            plot_ttft_ccdf_svg(path, o->curves, x->np, o->pooled_title, x->cfg->slo_ttft_ns, e) != 0 ||
            rs_path(o->rs, "ttft_split.svg", path, sizeof path, e) != 0 ||
            plot_ttft_split_svg(path, o->curves, x->np, o->pooled_title, e) != 0)
            return -1;
        return 0;
    case OUT_HISTORY: /* from the jobs' samples: the figure requests.csv gives */
        if (rs_path(o->rs, "ttft_history.svg", path, sizeof path, e) != 0 || plot_history_svg_of(path, o->hist, o->pooled_title, x->cfg->slo_ttft_ns, e) != 0)
            return -1;
        return 0;
    case OUT_UTIL: /* the figures drawn from the result files just written */
        if (rs_path(o->rs, "utilisation.csv", data, sizeof data, e) != 0 || rs_path(o->rs, "utilisation.svg", path, sizeof path, e) != 0 ||
            plot_util_svg(path, x->n_seeds ? o->util0 : data, o->title, e) != 0)
            return -1;
        return 0;
    default:
        if (rs_path(o->rs, "timeline.csv", data, sizeof data, e) != 0 || rs_path(o->rs, "timeline.svg", path, sizeof path, e) != 0 ||
            plot_timeline_svg(path, data, o->title, e) != 0)
            return -1;
        return 0;
    }
}

/* pooled: under replications, every seed's histograms per policy (the curves) */
static int write_outputs(ResultSet *rs, const ExpSpec *x, const SimWorld *w, SimResult *res, const SimResult *pooled,
                         const Replications *rep, const char *util0, const PlotHistSamples *hist, KvErr *e)
{
    const SimResult *curves = res;
    char title[320], pooled_title[360]; /* pooled: the figures drawn from every seed's requests */
    snprintf(title, sizeof title, "%s on %s, trace %s", w->model->name, w->platform->name, x->cfg->trace);
    snprintf(pooled_title, sizeof pooled_title, "%s", title);
    if (x->n_seeds) {
        curves = pooled;
        snprintf(pooled_title, sizeof pooled_title, "%s, %d seeds pooled", title, x->n_seeds);
    }
    OutCtx o = {rs, x, res, curves, rep, hist, title, pooled_title, util0, {0}, {0}};
    static const int names[OUT_N] = {1, 2, 1, 3, 2}; /* the rs_path calls of each kind */
    int n = 0, files = rs->files;
    if (!x->no_csv) o.kind[n++] = OUT_HISTORY;
    o.kind[n++] = OUT_UTIL;
    o.kind[n++] = OUT_SUMMARY;
    o.kind[n++] = OUT_CURVES;
    if (x->timeline) o.kind[n++] = OUT_TIMELINE;
    for (int k = 0; k < n; k++) o.files[k] = files, files += names[o.kind[k]];
    /* a single run writes its outputs in this process: no fork, a small run's fixed cost */
    int single = x->np == 1 && !x->n_seeds;
    ProcPool pool = {n, single ? 1 : x->jobs, rs->tmp, out_run, out_label, &o, NULL};
    int rc = procpool_run(&pool, e);
    if (rc == 0) rs->files = files;
    return rc;
}

static int write_table(FILE *out, const ExpSpec *x, const SimWorld *w, const SimResult *res, const Replications *rep, KvErr *e)
{
    if (!rep) {
        report_markdown(out, w, res, x->np);
        return 0;
    }
    return repl_markdown(out, w, rep, e);
}

/* the run's oracle bound (sim_oracle), computed once before the runs; NAN figures: none */
static SimOracle g_orc;

/* one or two lines under compare's table: the oracle bound and each policy's mean TTFT over it
 * (the first seed's runs under replications, the seed the bound was computed for); ideal ignores
 * the KV pool's capacity, so it may fall below the bound, and says so */
static void oracle_lines(FILE *out, const ExpSpec *x, const SimResult *res)
{
    if (!isfinite(g_orc.ttft_mean_s)) return;
    fprintf(out, "\noracle bound%s: mean %.1f ms, p99 %.1f ms (without prefetch: %.1f ms, %.1f ms); policy ÷ oracle (mean TTFT):",
            x->n_seeds ? " (first seed)" : "", g_orc.ttft_mean_s * 1e3, g_orc.ttft_p99_s * 1e3, g_orc.noprefetch_mean_s * 1e3,
            g_orc.noprefetch_p99_s * 1e3);
    for (int p = 0; p < x->np; p++) {
        double m = hist_mean(&res[p].ttft) / 1e9;
        if (!isfinite(m)) continue;
        fprintf(out, "%s %s ", p ? "," : "", res[p].policy);
        if (g_orc.ttft_mean_s > 0) fprintf(out, "%.2f×", m / g_orc.ttft_mean_s);
        else fputs("–", out);
        if (!strcmp(res[p].policy, "ideal")) fputs(" (ignores HBM capacity)", out);
    }
    fputc('\n', out);
}

/* compare's answer: the verdict, then the compact table and the warnings under it (verdict.md), or
 * with full the full tables with theirs (table.md); then the oracle bound */
static int write_verdict(FILE *out, const ExpSpec *x, const SimWorld *w, const SimResult *res, const Replications *rep, int full,
                         KvErr *e)
{
    Verdict v = {res, x->n_seeds ? x->n_seeds : 1, x->np, x->baseline, x->metric, {0}, x->n_pct, 0.95, x->out, full,
                 rep ? rep->runs : NULL};
    memcpy(v.pct, x->pct, sizeof v.pct);
    if (verdict_write(out, w, &v, e) != 0) return -1;
    if (full) {
        if (write_table(out, x, w, res, rep, e) != 0) return -1;
        oracle_lines(out, x, res);
        return 0;
    }
    if (verdict_table(out, w, &v, e) != 0) return -1;
    if (rep) repl_footer(out, rep);
    else report_markdown_footer(out, w, res, x->np);
    oracle_lines(out, x, res);
    return 0;
}

int experiment_run(const ExpSpec *x)
{
    KvErr e;
    int n_jobs = (x->n_seeds ? x->n_seeds : 1) * x->np;
    int n_res = x->n_seeds ? x->np : n_jobs; /* replications keep the first seed's results, the rest reduced */
    SimResult *res = calloc((size_t)n_res, sizeof *res);
    SimResult *pooled = x->n_seeds ? calloc((size_t)x->np, sizeof *pooled) : NULL;
    ReplRun *runs = x->n_seeds ? calloc((size_t)n_jobs, sizeof *runs) : NULL;
    uint64_t *seeds = calloc((size_t)(x->n_seeds ? x->n_seeds : 1), sizeof *seeds);
    ResultSet rset;
    const char *fail = NULL; /* what stopped it before the runs */
    if (!res || !seeds || (x->n_seeds && (!pooled || !runs))) fail = "out of memory for the runs";
    report_set_percentiles(x->pct, x->n_pct);
    if (!fail && sim_oracle(x->w, &g_orc, &e) != 0) fail = "oracle bound";
    if (!fail) report_set_oracle(&g_orc);
    /* every file of the result is written into a set beside --out and swapped in at the end */
    if (!fail && rs_begin(&rset, x->out, &e) != 0) fail = "";
    if (fail) {
        if (!strcmp(fail, "out of memory for the runs")) fprintf(stderr, "kvsim: out of memory for %d runs\n", n_jobs);
        else fprintf(stderr, "kvsim: %s%s%s\n", fail, *fail ? ": " : "", e.msg);
        free(res);
        free(pooled);
        free(runs);
        free(seeds);
        return 1;
    }
    char path[4400], jpath[4400];
    KvAtomicFile csv, ucsv, tcsv;
    memset(&csv, 0, sizeof csv);
    memset(&ucsv, 0, sizeof ucsv);
    memset(&tcsv, 0, sizeof tcsv);
    PlotHistSamples hsamples; /* ttft_history.svg's, gathered from the jobs in job order */
    memset(&hsamples, 0, sizeof hsamples);
    int rc = 0, csv_open = 0, u_open = 0, t_open = 0;
    char (*tparts)[4500] = x->trace_out ? calloc((size_t)n_jobs, sizeof *tparts) : NULL;
    Exp ctx = {.x = x, .parent = getpid(), .dir = rset.tmp, .hist = &hsamples, .res = res, .tparts = tparts, .runs = runs,
               .pooled = pooled, .held_k = -1};
    /* replications: the runs' summary.json objects and the first seed's utilisation rows, temporaries
     * of the set (so that the outputs need not hold every seed's) */
    char spill_path[4500] = "", util0_path[4500] = "";
    if (x->n_seeds) {
        snprintf(spill_path, sizeof spill_path, "%s/per_seed.tmp.%ld", rset.tmp, (long)getpid());
        snprintf(util0_path, sizeof util0_path, "%s/util_first_seed.tmp.%ld", rset.tmp, (long)getpid());
        if (!(ctx.spill = fopen(spill_path, "wb"))) {
            kv_err(&e, "%s: cannot create: %s", spill_path, strerror(errno));
            rc = 1;
        } else if (!(ctx.ucsv0 = fopen(util0_path, "wb"))) {
            kv_err(&e, "%s: cannot create: %s", util0_path, strerror(errno));
            rc = 1;
        } else {
            plot_util_csv_header(ctx.ucsv0, 1);
        }
    }
    ProcPool pool = {n_jobs, x->jobs, rset.tmp, job_run, job_label, &ctx, job_done};
    if (rc) { /* the spill file could not be created: e says why */
    } else if (x->trace_out && !tparts) {
        kv_err(&e, "out of memory");
        rc = 1;
    } else if (!x->no_csv && (rs_path(&rset, "requests.csv", path, sizeof path, &e) != 0 || kv_atomic_open(&csv, path, &e) != 0)) {
        rc = 1;
    } else if (!(csv_open = !x->no_csv, 1) || rs_path(&rset, "utilisation.csv", path, sizeof path, &e) != 0 ||
               kv_atomic_open(&ucsv, path, &e) != 0) {
        rc = 1;
    } else if (!(u_open = 1) || (x->timeline && (rs_path(&rset, "timeline.csv", path, sizeof path, &e) != 0 ||
                                                 kv_atomic_open(&tcsv, path, &e) != 0))) {
        rc = 1;
    } else {
        t_open = x->timeline;
        if (csv_open) report_csv_header(csv.f, x->n_seeds > 0, report_csv_load_columns(x->w->cfg));
        plot_util_csv_header(ucsv.f, x->n_seeds > 0);
        if (t_open) plot_timeline_csv_header(tcsv.f, x->n_seeds > 0);
        ctx.csv = csv_open ? csv.f : NULL, ctx.ucsv = ucsv.f, ctx.tcsv = t_open ? tcsv.f : NULL;
        if (procpool_run(&pool, &e) != 0) rc = 1; /* the jobs, each merged as soon as it and those before it are done */
    }
    int merged = ctx.merged;
    if (ctx.held_k >= 0) sim_result_free(&ctx.held); /* a job that ran here but was not merged */
    for (int k = merged; k < n_jobs; k++) /* files a failure left behind (the rest go with the set) */
        if (procpool_job_path(rset.tmp, k, jpath, sizeof jpath, &e) == 0) unlink(jpath);
    if (rc == 0 && csv_open) {
        csv_open = 0;
        if (kv_atomic_commit(&csv, &e) != 0) rc = 1;
    }
    if (rc == 0 && u_open) {
        u_open = 0;
        if (kv_atomic_commit(&ucsv, &e) != 0) rc = 1;
    }
    if (rc == 0 && t_open) {
        t_open = 0;
        if (kv_atomic_commit(&tcsv, &e) != 0) rc = 1;
    }
    if (csv_open) kv_atomic_abort(&csv);
    if (u_open) kv_atomic_abort(&ucsv);
    if (t_open) kv_atomic_abort(&tcsv);
    if (tparts) { /* the Chrome trace, outside the result set; its parts removed from the set */
        const char **pp = calloc((size_t)n_jobs, sizeof *pp);
        for (int k = 0; pp && k < n_jobs; k++) pp[k] = tparts[k];
        if (rc == 0 && (!pp || ptrace_merge(x->trace_out, pp, n_jobs, x->trace_max_events, &e) != 0)) {
            if (!pp) kv_err(&e, "out of memory");
            rc = 1;
        }
        for (int k = 0; k < n_jobs; k++) unlink(tparts[k]);
        free(pp);
        free(tparts);
    }
    FILE **aside[2] = {&ctx.spill, &ctx.ucsv0};
    const char *aside_paths[2] = {spill_path, util0_path};
    for (int i = 0; i < 2; i++) {
        KvErr ce;
        if (*aside[i] && close_checked(*aside[i], aside_paths[i], &ce) != 0 && rc == 0) {
            e = ce;
            rc = 1;
        }
        *aside[i] = NULL;
    }
    for (int s = 0; s < x->n_seeds; s++) seeds[s] = x->seed_base + (uint64_t)s;
    Replications rep = {x->n_seeds, x->np, seeds, res, x->baseline, 0.95, runs, spill_path};
    const Replications *rp = x->n_seeds ? &rep : NULL;
    if (rc == 0 && write_outputs(&rset, x, x->w, res, pooled, rp, util0_path, &hsamples, &e) != 0) rc = 1;
    if (spill_path[0]) unlink(spill_path); /* not part of the set */
    if (util0_path[0]) unlink(util0_path);
    if (rc == 0) { /* the warnings are said once, with the table on stdout (and in the files), not again on stderr */
        KvAtomicFile af;
        int printed = x->compare ? write_verdict(stdout, x, x->w, res, rp, x->full_table, &e) : write_table(stdout, x, x->w, res, rp, &e);
        if (printed != 0 || rs_path(&rset, "table.md", path, sizeof path, &e) != 0 || kv_atomic_open(&af, path, &e) != 0)
            rc = 1;
        else if (write_table(af.f, x, x->w, res, rp, &e) != 0) {
            kv_atomic_abort(&af);
            rc = 1;
        } else if (kv_atomic_commit(&af, &e) != 0)
            rc = 1;
        if (rc == 0 && x->compare) {
            if (rs_path(&rset, "verdict.md", path, sizeof path, &e) != 0 || kv_atomic_open(&af, path, &e) != 0)
                rc = 1;
            else if (write_verdict(af.f, x, x->w, res, rp, 0, &e) != 0) {
                kv_atomic_abort(&af);
                rc = 1;
            } else if (kv_atomic_commit(&af, &e) != 0)
                rc = 1;
        }
    }
    /* the page of it all, drawn from the files just written */
    if (rc == 0 && (rs_path(&rset, "report.html", path, sizeof path, &e) != 0 || html_report_file(path, rset.tmp, x->out, &e) != 0)) rc = 1;
    if (rc == 0 && rs_commit(&rset, &e) != 0) rc = 1;
    if (rc) fprintf(stderr, "kvsim: %s\n", e.msg);
    else if (!x->cfg->quiet)
        fprintf(stderr, "results in %s/ (report.html, summary.json, %stable.md, %sutilisation.csv, %s%s%s, utilisation.svg%s)%s%s\n", x->out,
                x->no_csv ? "" : "requests.csv, ", x->compare ? "verdict.md, " : "", x->timeline ? "timeline.csv, " : "", plot_file_list(),
                x->no_csv ? "" : ", ttft_history.svg", x->timeline ? ", timeline.svg" : "", x->trace_out ? "; trace in " : "",
                x->trace_out ? x->trace_out : "");
    rs_abort(&rset); /* a failed set leaves nothing; after a commit this does nothing */
    for (int k = 0; k < n_res; k++) sim_result_free(&res[k]);
    for (int p = 0; pooled && p < x->np; p++) sim_result_free(&pooled[p]);
    for (int k = 0; runs && k < n_jobs; k++) repl_run_free(&runs[k]);
    phist_free(&hsamples);
    free(res);
    free(pooled);
    free(runs);
    free(seeds);
    return rc;
}

int experiment_opt_is(const char *o)
{
    return !strcmp(o, "--seeds") || !strcmp(o, "--seed-base") || !strcmp(o, "--jobs") || !strcmp(o, "--baseline") ||
           !strcmp(o, "--metric") || !strcmp(o, "--table") || !strcmp(o, "--percentiles");
}

int experiment_opts_read(const OptArgs *a, SimConfig *cfg, const char (*names)[32], int np, ExpOpts *xo, KvErr *e)
{
    memset(xo, 0, sizeof *xo);
    xo->baseline = -1;
    xo->jobs = procpool_default_procs();
    int64_t v;
    const char *s;
    if ((s = opt_get(a, "--jobs"))) {
        if (opt_int("--jobs", s, 1, 1024, &v, e) != 0) return -1;
        xo->jobs = (int)v;
    }
    if ((s = opt_get(a, "--seeds"))) {
        if (opt_int("--seeds", s, 2, EXP_MAX_SEEDS, &v, e) != 0)
            return kv_err_prefix(e, "%s", "a confidence interval needs at least 2 seeds: ");
        xo->n_seeds = (int)v;
    }
    xo->seed_base = cfg->seed;
    if ((s = opt_get(a, "--seed-base"))) {
        if (!xo->n_seeds) return kv_err(e, "--seed-base %s: only with --seeds N (a single run takes --seed)", s);
        char *end;
        errno = 0;
        unsigned long long b = strtoull(s, &end, 10);
        if (*end || errno || s[0] == '-') return kv_err(e, "--seed-base: expected a non-negative integer, got '%s'", s);
        if (b > UINT64_MAX - (uint64_t)xo->n_seeds) return kv_err(e, "--seed-base %s: the last seed would overflow", s);
        xo->seed_base = b;
    }
    if (xo->n_seeds) {
        if (xo->seed_base > UINT64_MAX - (uint64_t)xo->n_seeds) return kv_err(e, "seed %llu: the last seed would overflow", (unsigned long long)xo->seed_base);
        cfg->seed = xo->seed_base;
    }
    xo->metric = metric_find("ttft_s.p99");
    if ((s = opt_get(a, "--metric")) && !(xo->metric = verdict_metric(s, e))) return -1;
    if ((s = opt_get(a, "--table"))) {
        if (strcmp(s, "compact") && strcmp(s, "full")) return kv_err(e, "--table %s: expected compact or full", s);
        xo->full_table = !strcmp(s, "full");
    }
    xo->pct[0] = 50, xo->pct[1] = 99, xo->n_pct = 2;
    if ((s = opt_get(a, "--percentiles")) && verdict_percentiles(s, xo->pct, &xo->n_pct, e) != 0) return -1;
    if ((s = opt_get(a, "--baseline"))) {
        for (int i = 0; i < np && xo->baseline < 0; i++)
            if (!strcmp(names[i], s)) xo->baseline = i;
        if (xo->baseline < 0) {
            char list[600] = "";
            size_t len = 0;
            for (int i = 0; i < np; i++) len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%s%s", i ? ", " : "", names[i]);
            return kv_err(e, "--baseline %s: not one of the policies compared (%s)", s, list);
        }
    }
    return 0;
}
