/* map.c — `kvsim map`; the contract is in map.h, the guide in docs/reference.md "Decision maps".
 *
 * How: every cell (history × resource value × load) runs `seeds` replications and `draws`
 * perturbed replications of every policy on its own isolated-request trace (map_trace_text, a CSV
 * in the pool's directory), each job in a procpool worker writing the per-policy mean TTFT of the
 * restoring turns as text; one job per resource value scans the grid's histories with one request
 * and bisects every sign change of the TTFT difference of two families. The parent reads the jobs'
 * files in job order, so the output does not depend on --jobs.
 * The flip probability: draw d scales each cost class (compute, host link, NIC, SSD) by a factor
 * drawn from seed d (the same K factor sets in every cell); the decision flips when draw d's
 * fastest policy is not among the unperturbed run's fastest at the same seed (policies whose runs
 * are identical tie).
 * Complexity: see map.h.
 */
#include "sim/cli/map.h"
#include "sim/cli/map_int.h"

#include <cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "results/plot_svg.h"
#include "sim/base/opt.h"
#include "sim/base/stats.h"
#include "sim/cli/point.h"
#include "sim/cli/procpool.h"
#include "sim/cost/store.h"


/* ---------------------------------------------------------------- library */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double unit_draw(uint64_t *s) { return (double)(splitmix(s) >> 11) / 9007199254740992.0; }

char *map_trace_text(int64_t H, int n, int64_t new_tokens, uint64_t seed, double gap_s)
{
    size_t cap = 128 + (size_t)n * 160;
    char *t = malloc(cap);
    if (!t) return NULL;
    size_t len = (size_t)snprintf(t, cap, "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n");
    uint64_t st = seed * 0x2545F4914F6CDD1DULL + 1;
    for (int k = 0; k < n; k++) {
        int64_t q = new_tokens;
        if (seed) { /* uniform in [new/2, 3·new/2] */
            int64_t lo = new_tokens / 2 > 1 ? new_tokens / 2 : 1, span = new_tokens + 1;
            q = lo + (int64_t)(unit_draw(&st) * (double)span);
        }
        char at[48] = "";
        if (gap_s > 0) snprintf(at, sizeof at, "%.17g", gap_s * k);
        len += (size_t)snprintf(t + len, cap - len, "m%d,0,%s,%lld,1,0\nm%d,1,,%lld,16,%lld\n", k, at, (long long)(H - 1), k,
                                (long long)q, (long long)H);
    }
    return t;
}

void map_perturb_world(SimWorld *w, const MapPerturb *p)
{
    for (int op = 0; op < OP_COUNT; op++) {
        CostCurve *cc = &w->cost.c[op];
        if (!cc->present) continue;
        double f = 1;
        if (!cost_op_is_io((CostOp)op)) f = p->compute;
        else if (op == OP_H2D || op == OP_D2H || op == OP_H2D_BIDIR || op == OP_D2H_BIDIR) f = p->link;
        else if (op == OP_SSD_READ || op == OP_SSD_WRITE) f = p->ssd;
        else if (op == OP_NET) f = p->nic;
        size_t m = 1;
        for (int d = 0; d < cc->ndim; d++) m *= (size_t)cc->n[d];
        for (size_t i = 0; i < m; i++) cc->y[i] *= f;
    }
    /* the transfers run at the catalog's rates (spec) or the curves' (measured host links): a rate
     * divided by the time factor */
    for (int i = 0; i < w->hw.n_links; i++) {
        LinkSpec *l = &w->hw.links[i];
        l->h2d_bytes_per_s /= p->link;
        l->d2h_bytes_per_s /= p->link;
        l->h2d_bidir_bytes_per_s /= p->link;
        l->d2h_bidir_bytes_per_s /= p->link;
    }
    for (int i = 0; i < w->hw.n_nics; i++) w->hw.nics[i].bytes_per_s /= p->nic;
    for (int i = 0; i < w->hw.n_ssds; i++) {
        w->hw.ssds[i].read_bytes_per_s /= p->ssd;
        w->hw.ssds[i].write_bytes_per_s /= p->ssd;
    }
}

typedef struct {
    double sum;
    int64_t n;
} TtftAcc;

static int acc_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    (void)e;
    TtftAcc *a = ctx;
    if (r->turn >= 1 && r->ttft_ns >= 0) a->sum += (double)r->ttft_ns / 1e9, a->n++;
    return 0;
}

int map_restoring_ttft(const SimConfig *c, const char *policies, const MapPerturb *p, double *ttft, KvErr *e)
{
    SimWorld w;
    if (sim_world_open(&w, c, e) != 0) return -1;
    if (p) map_perturb_world(&w, p);
    int rc = 0, i = 0;
    for (const char *tok = policies; *tok && rc == 0; i++) {
        size_t len = strcspn(tok, ",");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, tok);
        SimResult res;
        memset(&res, 0, sizeof res);
        TtftAcc a = {0, 0};
        if (sim_run(&w, name, acc_row, &a, NULL, NULL, &res, e) != 0) rc = kv_err_prefix(e, "%s: ", name);
        else if (a.n == 0) rc = kv_err(e, "%s: no restoring turn finished (dropped?)", name);
        else ttft[i] = a.sum / (double)a.n;
        sim_result_free(&res);
        tok += len;
        if (*tok == ',') tok++;
    }
    sim_world_close(&w);
    return rc;
}

int map_bisect(MapDiffFn f, void *ctx, int64_t lo, double fl, int64_t hi, double fh, double rel_tol, int64_t *at, int *evals,
               KvErr *e)
{
    if (evals) *evals = 0;
    if (!(lo < hi) || !((fl < 0 && fh > 0) || (fl > 0 && fh < 0)))
        return kv_err(e, "break-even search: no sign change between %lld (%g) and %lld (%g)", (long long)lo, fl, (long long)hi, fh);
    while ((double)(hi - lo) > fmax(1, rel_tol * (double)lo)) {
        int64_t mid = (int64_t)llround(sqrt((double)lo * (double)hi)); /* the log scale's middle */
        if (mid <= lo) mid = lo + 1;
        if (mid >= hi) mid = hi - 1;
        double fm;
        if (f(ctx, mid, &fm, e) != 0) return -1;
        if (evals) (*evals)++;
        if (fm == 0) {
            *at = mid;
            return 0;
        }
        if ((fm < 0) == (fl < 0)) lo = mid, fl = fm;
        else hi = mid, fh = fm;
    }
    *at = lo + (int64_t)llround((double)(hi - lo) * fl / (fl - fh));
    return 0;
}

void map_fmt_tokens(char *buf, size_t n, int64_t t)
{
    if (t < 1024) snprintf(buf, n, "%lld", (long long)t);
    else if (t % 1024 == 0) snprintf(buf, n, "%lldK", (long long)(t / 1024));
    else if (t < 100 * 1024) snprintf(buf, n, "%.1fK", (double)t / 1024);
    else snprintf(buf, n, "%.0fK", (double)t / 1024);
}

static const char *const k_family[MAP_FAMILIES] = {"recompute", "kv-offload", "cake/cacheflow", "hcache"};

int map_family(const char *p)
{
    if (!strcmp(p, "recompute")) return 0;
    if (!strcmp(p, "kv-offload")) return 1;
    if (!strcmp(p, "cake") || !strcmp(p, "cacheflow")) return 2;
    if (!strcmp(p, "hcache")) return 3;
    return -1;
}

const char *map_family_name(int f) { return f >= 0 && f < MAP_FAMILIES ? k_family[f] : "?"; }

/* ---------------------------------------------------------------- the command's state */



static void draw_factors(const MapCtx *x, int d, MapPerturb *p)
{
    uint64_t s = (x->seed_base + 1) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)(d + 1) * 0xD1B54A32D192ED03ULL;
    double u[4];
    for (int i = 0; i < 4; i++) u[i] = unit_draw(&s);
    if (x->spread_store) {
        p->compute = x->spread_lo[0] + u[0] * (x->spread_hi[0] - x->spread_lo[0]);
        p->link = x->spread_lo[1] + u[1] * (x->spread_hi[1] - x->spread_lo[1]);
        p->nic = p->ssd = 1; /* no measured spread: nominal */
        return;
    }
    double b = x->band;
    p->compute = 1 - b + 2 * b * u[0];
    p->link = 1 - b + 2 * b * u[1];
    p->nic = 1 - b + 2 * b * u[2];
    p->ssd = 1 - b + 2 * b * u[3];
}

static void set_key(cJSON *o, const char *key, cJSON *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    cJSON_AddItemToObject(o, key, v);
}

/* the settings of one run: the user's, then the map's trace and load, the resource value, the store */
static cJSON *run_settings(const MapCtx *x, int vi, double load, uint64_t seed, const char *trace)
{
    cJSON *o = cJSON_Duplicate(x->base, 1);
    if (!o) return NULL;
    set_key(o, "trace", cJSON_CreateString(trace));
    set_key(o, "trace_format", cJSON_CreateString("csv"));
    set_key(o, "requests", cJSON_CreateNumber(0));
    set_key(o, "think", cJSON_CreateString("60 s"));
    set_key(o, "evict_each_turn", cJSON_CreateBool(1));
    set_key(o, "arrivals", cJSON_CreateString("session"));
    set_key(o, "request_rate", cJSON_CreateNumber(0));
    set_key(o, "concurrency", cJSON_CreateNumber(0));
    set_key(o, "warmup", cJSON_CreateNumber(0));
    set_key(o, "cooldown", cJSON_CreateNumber(0));
    set_key(o, "session_rate", cJSON_CreateNumber(load));
    set_key(o, "seed", cJSON_CreateNumber((double)seed));
    if (vi >= 0) set_key(o, x->key, cJSON_CreateString(x->res[vi]));
    if (x->store[0]) set_key(o, "store", cJSON_CreateString(x->store));
    cJSON_DeleteItemFromObjectCaseSensitive(o, "policies");
    return o;
}

/* one run of every policy at history H: its trace written beside path, then removed */
static int run_point(const MapCtx *x, int vi, double load, int64_t H, int n, uint64_t seed, int single, const MapPerturb *p,
                     const char *path, double *ttft, KvErr *e)
{
    char trace[4200];
    snprintf(trace, sizeof trace, "%s.csv", path);
    /* isolated: sessions 1000 s apart (a restoring turn's think time is 60 s); under load: Poisson */
    char *text = map_trace_text(H, n, x->new_tokens, single ? 0 : seed, load > 0 ? 0 : 1000);
    if (!text) return kv_err(e, "out of memory");
    FILE *tf = fopen(trace, "wb");
    int rc = !tf || fputs(text, tf) < 0 ? -1 : 0;
    if (tf && fclose(tf) != 0) rc = -1;
    free(text);
    if (rc != 0) return kv_err(e, "%s: cannot write the map's trace (disk full?)", trace);
    cJSON *o = run_settings(x, vi, load, seed, trace);
    SimConfig c;
    char pol[600];
    rc = !o ? kv_err(e, "out of memory") : point_config(&c, o, "the map's settings", pol, sizeof pol, e);
    cJSON_Delete(o);
    if (rc == 0) rc = map_restoring_ttft(&c, x->policies, p, ttft, e);
    unlink(trace);
    return rc;
}

/* ---------------------------------------------------------------- jobs */

typedef struct BeCtx {
    const MapCtx *x;
    int vi, fa, fb;
    const char *path;
} BeCtx;

static double family_best(const MapCtx *x, const double *t, int f)
{
    double best = INFINITY;
    for (int i = 0; i < x->np; i++)
        if (map_family(x->pol[i]) == f && t[i] < best) best = t[i];
    return best;
}

static int be_diff(void *ctx, int64_t H, double *diff, KvErr *e)
{
    BeCtx *b = ctx;
    double t[MAP_MAX_POL];
    if (run_point(b->x, b->vi, 0, H, 1, b->x->seed_base, 1, NULL, b->path, t, e) != 0) return -1;
    *diff = family_best(b->x, t, b->fa) - family_best(b->x, t, b->fb);
    return 0;
}

/* the histories the break-even search scans: powers of two from 64 tokens to the longest history
 * the context holds (and that length itself), whatever the grid's histories */
static int be_grid(const MapCtx *x, int64_t *h, int max)
{
    int n = 0;
    for (int64_t v = 64; v < x->be_max && n < max - 1; v *= 2) h[n++] = v;
    h[n++] = x->be_max;
    return n;
}

/* per resource value: the scan with one request, then every sign change of two families'
 * difference bisected (a stretch where they tie exactly: its first length); lines
 * "B\tfa\tfb\tH\tlower" (lower: the family faster below H) */
static int be_job(const MapCtx *x, int vi, FILE *out, const char *path, KvErr *e)
{
    int64_t hs[40];
    int nh = be_grid(x, hs, 40);
    double t[40][MAP_MAX_POL], fam[40][MAP_FAMILIES];
    for (int h = 0; h < nh; h++) {
        if (run_point(x, vi, 0, hs[h], 1, x->seed_base, 1, NULL, path, t[h], e) != 0) {
            /* a history longer than the KV pool holds is dropped: the scan ends at the last that fits */
            if (h == 0 || !strstr(e->msg, "no restoring turn finished")) return -1;
            fprintf(out, "R\t%lld\n", (long long)hs[h - 1]);
            nh = h;
            break;
        }
        for (int f = 0; f < MAP_FAMILIES; f++) fam[h][f] = family_best(x, t[h], f);
    }
    for (int fa = 0; fa < MAP_FAMILIES; fa++)
        for (int fb = fa + 1; fb < MAP_FAMILIES; fb++) {
            if (!isfinite(fam[0][fa]) || !isfinite(fam[0][fb])) continue;
            int prev = -1; /* the last length where they differ */
            for (int h = 0; h < nh; h++) {
                double d = fam[h][fa] - fam[h][fb];
                if (d == 0) continue;
                if (prev >= 0) {
                    double dp = fam[prev][fa] - fam[prev][fb];
                    if ((dp < 0) != (d < 0)) {
                        int64_t at = hs[prev + 1];
                        if (prev + 1 == h) {
                            BeCtx b = {x, vi, fa, fb, path};
                            if (map_bisect(be_diff, &b, hs[prev], dp, hs[h], d, 0.002, &at, NULL, e) != 0) return -1;
                        }
                        fprintf(out, "B\t%d\t%d\t%lld\t%d\n", fa, fb, (long long)at, dp < 0 ? fa : fb);
                    }
                }
                prev = h;
            }
        }
    return 0;
}

static int reps(const MapCtx *x) { return x->seeds + x->draws; }

static int map_job(void *ctx, int k, const char *path, KvErr *e)
{
    const MapCtx *x = ctx;
    FILE *f = fopen(path, "wb");
    if (!f) return kv_err(e, "%s: cannot create the job's file", path);
    int rc = 0, nc = n_cells(x) * reps(x);
    if (k < nc) {
        int cell = k / reps(x), r = k % reps(x);
        int vi = cell % x->nv, hi = cell / x->nv % x->nh, li = cell / x->nv / x->nh;
        MapPerturb p;
        uint64_t seed = x->seed_base + (uint64_t)(r < x->seeds ? r : (r - x->seeds) % x->seeds);
        if (r >= x->seeds) draw_factors(x, r - x->seeds, &p);
        double t[MAP_MAX_POL];
        int n = x->load[li] > 0 ? x->requests_load : x->requests;
        rc = run_point(x, vi, x->load[li], x->hist[hi], n, seed, 0, r >= x->seeds ? &p : NULL, path, t, e);
        for (int i = 0; rc == 0 && i < x->np; i++) fprintf(f, "%.17g\n", t[i]);
    } else {
        rc = be_job(x, k - nc, f, path, e);
    }
    if (fclose(f) != 0 && rc == 0) rc = kv_err(e, "%s: write failed (disk full?)", path);
    return rc;
}

static void map_label(void *ctx, int k, char *buf, size_t cap)
{
    const MapCtx *x = ctx;
    int nc = n_cells(x) * reps(x);
    if (k >= nc) {
        snprintf(buf, cap, "break-even lines at %s=%s", x->axis, x->val[k - nc]);
        return;
    }
    int cell = k / reps(x), r = k % reps(x);
    int vi = cell % x->nv, hi = cell / x->nv % x->nh;
    char h[32];
    map_fmt_tokens(h, sizeof h, x->hist[hi]);
    if (r < x->seeds) snprintf(buf, cap, "history %s, %s=%s, seed %llu", h, x->axis, x->val[vi], (unsigned long long)(x->seed_base + (uint64_t)r));
    else snprintf(buf, cap, "history %s, %s=%s, cost draw %d", h, x->axis, x->val[vi], r - x->seeds + 1);
}

/* ---------------------------------------------------------------- results */



static int argmin(const double *t, int n, int skip)
{
    int b = -1;
    for (int i = 0; i < n; i++)
        if (i != skip && (b < 0 || t[i] < t[b])) b = i;
    return b;
}

static int read_values(const char *path, double *v, int n, KvErr *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return kv_err(e, "%s: a job's result is missing", path);
    int ok = 1;
    for (int i = 0; i < n && ok; i++) ok = fscanf(f, "%lf", &v[i]) == 1;
    fclose(f);
    return ok ? 0 : kv_err(e, "%s: a job's result is malformed", path);
}

static int read_be(const char *path, BeLine *b, KvErr *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return kv_err(e, "%s: a job's result is missing", path);
    char line[256];
    b->n = 0;
    b->reach = 0;
    while (fgets(line, sizeof line, f)) {
        BePoint p;
        long long at;
        if (line[0] == 'R' && sscanf(line, "R\t%lld", &at) == 1) b->reach = at;
        if (line[0] == 'B' && sscanf(line, "B\t%d\t%d\t%lld\t%d", &p.fa, &p.fb, &at, &p.lower) == 4 && b->n < MAP_MAX_BE) {
            p.at = at;
            b->p[b->n++] = p;
        }
    }
    fclose(f);
    return 0;
}

/* ---------------------------------------------------------------- the store's spread */

/* the median over points of p10/median and p90/median of one op class of a store's runs that the
 * world's curves came from; 0 when the store has no spread there (every p10 = p90 = median) */
static int class_spread(const char *db, const SimWorld *w, int io, double *lo, double *hi, KvErr *e)
{
    CostStore s;
    if (store_open_costs(&s, db, e) != 0) return -1;
    size_t cap = 0, n = 0;
    double *a = NULL, *b = NULL;
    int rc = 0;
    for (int op = 0; op < OP_COUNT && rc == 0; op++) {
        const CostCurve *cc = &w->cost.c[op];
        int is_link = op == OP_H2D || op == OP_D2H || op == OP_H2D_BIDIR || op == OP_D2H_BIDIR;
        if (!cc->present || cc->run_id <= 0 || (io ? !is_link : cost_op_is_io((CostOp)op))) continue;
        StorePointList pl = {0};
        if (store_points_all(&s, cc->run_id, op, &pl, e) != 0) {
            rc = -1;
            break;
        }
        for (size_t i = 0; i < pl.n; i++) {
            const StorePoint *p = &pl.v[i];
            if (!(p->median_ns > 0) || !(p->p10_ns > 0) || !(p->p90_ns > 0)) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                double *na = realloc(a, cap * sizeof *a), *nb = na ? realloc(b, cap * sizeof *b) : NULL;
                if (!na || !nb) {
                    free(na ? na : a);
                    free(nb ? nb : b);
                    free(pl.v);
                    store_close(&s);
                    return kv_err(e, "out of memory");
                }
                a = na, b = nb;
            }
            a[n] = p->p10_ns / p->median_ns;
            b[n] = p->p90_ns / p->median_ns;
            n++;
        }
        free(pl.v);
    }
    store_close(&s);
    if (rc != 0) {
        free(a), free(b);
        return -1;
    }
    int found = 0;
    if (n > 0) {
        /* medians by sorting (n is small: the points of a few curves) */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && a[j] < a[j - 1]; j--) {
                double t = a[j];
                a[j] = a[j - 1], a[j - 1] = t;
            }
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && b[j] < b[j - 1]; j--) {
                double t = b[j];
                b[j] = b[j - 1], b[j - 1] = t;
            }
        *lo = a[n / 2];
        *hi = b[n / 2];
        found = *lo < 1 || *hi > 1;
    }
    free(a), free(b);
    return found;
}

/* ---------------------------------------------------------------- interruption
 *
 * The workers' files (results and traces) live in <TMPDIR>/kvsim-map.XXXXXX. SIGINT/SIGTERM/SIGHUP
 * while the pool runs: stop and reap the workers, remove the directory's files and the directory,
 * then die of the signal. Async-signal-safe: kill, waitpid, open, getdents64, unlinkat, rmdir. */

static char g_tmpdir[512];
static volatile sig_atomic_t g_tmpdir_set;
static pid_t g_owner;

struct map_dirent64 { /* the kernel's linux_dirent64 */
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static void remove_dir_files(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return;
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            const struct map_dirent64 *d = (const struct map_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (d->d_name[0] == '.' && (d->d_name[1] == '\0' || (d->d_name[1] == '.' && d->d_name[2] == '\0'))) continue;
            unlinkat(fd, d->d_name, 0);
        }
    }
    close(fd);
    rmdir(dir);
}

static void on_map_signal(int sig)
{
    if (getpid() == g_owner) { /* not a worker that inherited the handler */
        procpool_stop_on_signal();
        if (g_tmpdir_set) remove_dir_files(g_tmpdir);
        kv_atomic_cleanup_on_signal();
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---------------------------------------------------------------- the command */

static const OptSpec k_map_opts[] = {
    {"--model", "NAME", 0, "the model (kvsim list models; default: the configuration's)"},
    {"--platform", "NAME", 0, "the platform (kvsim list platforms; default: the configuration's)"},
    {"--config", "FILE", 0, "JSON object of settings (as kvsim run --config), applied first"},
    {"--scenario", "NAME", 0, "a published setup (kvsim list scenarios), applied before --config"},
    {"--set", "KEY=VALUE", OPT_REPEAT, "a setting for every run, after --config (any key of kvsim run --help)"},
    {"--vary", "KEY=V1,V2,...", OPT_REQUIRED, "the resource axis: nic, host_link (or link), n_ssd, gpu, dram or any setting (nic also by line rate: 100GbE)"},
    {"--history", "H1,H2,...", 0, "history lengths in tokens, 1K = 1024 (default 512,1K,2K,4K,8K,16K,32K, capped by the context and the KV pool)"},
    {"--load", "L1,...", 0, "loads: isolated (one restoring request at a time) or sessions/s (Poisson) (default isolated)"},
    {"--policies", "a,b,c|all", 0, "the contenders (default: every policy but ideal, the reference)"},
    {"--seeds", "N", 0, "replications per cell (default 3; 1..100): seeds S..S+N-1"},
    {"--seed", "S", 0, "the first seed (default 1)"},
    {"--draws", "K", 0, "cost-model draws per cell for the flip probability (default 16; 0: none)"},
    {"--band", "B", 0, "spec cost model: each cost class scaled by a factor uniform in [1-B, 1+B] (default 0.15)"},
    {"--requests", "N", 0, "restoring requests per cell (default 4 isolated, 8x that under load)"},
    {"--new", "N", 0, "new input tokens of a restoring turn (default 128; drawn in [N/2, 3N/2] per seed)"},
    {"--out", "DIR", 0, "also write map.json, map.csv, map.md and map.svg to DIR"},
    {"--jobs", "N", 0, "-j N: simulations at once (default: the online cores); the answer is the same for any N"},
};
static const OptCmd k_map = {
    "kvsim map",
    "A decision map: for each history length, resource value (--vary) and load, the fastest restoration policy by the "
    "mean TTFT of the restoring turns, the runner-up, the margin with its 95 % interval over seeds and the probability "
    "that the decision flips under the cost model's uncertainty; then the break-even history lengths between "
    "recompute, kv-offload, cake/cacheflow and hcache (docs/reference.md \"Decision maps\").",
    k_map_opts, (int)KV_ARRAY_LEN(k_map_opts), NULL, 0, 0};

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = opt_vusage_error(&k_map, stderr, fmt, ap);
    va_end(ap);
    return rc;
}

static int parse_tokens(const char *s, int64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v)) return -1;
    if (*end == 'K' || *end == 'k') v *= 1024, end++;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024, end++;
    if (*end || v < 1 || v > 1e9 || v != floor(v)) return -1;
    *out = (int64_t)v;
    return 0;
}

static int split_list(const char *s, char (*out)[96], int max)
{
    int n = 0;
    for (const char *t = s;; ) {
        size_t len = strcspn(t, ",");
        if (len == 0 || len >= 96 || n == max) return -1;
        snprintf(out[n++], 96, "%.*s", (int)len, t);
        t += len;
        if (!*t) break;
        t++;
    }
    return n;
}

int map_main(int argc, char **argv)
{
    opt_short_jobs(argc, argv);
    OptArgs a;
    KvErr e;
    int begin = opt_begin(&k_map, argc, argv, &a);
    if (begin >= 0) return begin;
    static MapCtx x;
    memset(&x, 0, sizeof x);
    x.seeds = 3, x.draws = 16, x.band = 0.15, x.new_tokens = 128, x.seed_base = 1, x.requests = 4;
    x.jobs = procpool_default_procs();
    int64_t v64;
    const char *v;
    if ((v = opt_get(&a, "--seeds")) && opt_int("--seeds", v, 1, 100, &v64, &e) == 0) x.seeds = (int)v64;
    else if (v) return usage("%s", e.msg);
    if ((v = opt_get(&a, "--seed")) && opt_int("--seed", v, 0, INT64_MAX / 2, &v64, &e) == 0) x.seed_base = (uint64_t)v64;
    else if (v) return usage("%s", e.msg);
    if ((v = opt_get(&a, "--draws")) && opt_int("--draws", v, 0, 1000, &v64, &e) == 0) x.draws = (int)v64;
    else if (v) return usage("%s", e.msg);
    if ((v = opt_get(&a, "--requests")) && opt_int("--requests", v, 1, 10000, &v64, &e) == 0) x.requests = (int)v64;
    else if (v) return usage("%s", e.msg);
    if ((v = opt_get(&a, "--new")) && opt_int("--new", v, 1, 1 << 20, &v64, &e) == 0) x.new_tokens = v64;
    else if (v) return usage("%s", e.msg);
    if ((v = opt_get(&a, "--jobs")) && opt_int("--jobs", v, 1, 1024, &v64, &e) == 0) x.jobs = (int)v64;
    else if (v) return usage("%s", e.msg);
    x.requests_load = 8 * x.requests;
    if ((v = opt_get(&a, "--band")) && (kv_parse_double(v, &x.band, &e) != 0 || !(x.band >= 0) || !(x.band < 1)))
        return usage("--band: expected a fraction in [0, 1), e.g. 0.15, got '%s'", v);

    /* the user's settings, in the order they apply */
    x.base = cJSON_CreateObject();
    if ((v = opt_get(&a, "--scenario"))) cJSON_AddStringToObject(x.base, "scenario", v);
    int user_store = 0;
    if ((v = opt_get(&a, "--config"))) {
        char *text = kv_read_file(v, NULL, &e);
        if (!text) return fprintf(stderr, "kvsim map: %s\n", e.msg), 2;
        cJSON *root = cJSON_Parse(text);
        free(text);
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
        const cJSON *obj = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(in, "config")) ? cJSON_GetObjectItemCaseSensitive(in, "config") : root;
        if (!cJSON_IsObject(obj)) {
            cJSON_Delete(root);
            return fprintf(stderr, "kvsim map: %s: expected a JSON object of settings\n", v), 2;
        }
        for (const cJSON *it = obj->child; it; it = it->next) {
            if (!strcmp(it->string, "description") || !strcmp(it->string, "measures")) continue;
            if (!strcmp(it->string, "store")) user_store = 1;
            set_key(x.base, it->string, cJSON_Duplicate(it, 1));
        }
        cJSON_Delete(root);
    }
    if ((v = opt_get(&a, "--model"))) set_key(x.base, "model", cJSON_CreateString(v));
    if ((v = opt_get(&a, "--platform"))) set_key(x.base, "platform", cJSON_CreateString(v));
    const char *vary = NULL;
    for (int i = 0; i < a.n_hits; i++) {
        const char *o = opt_hit_name(&a, i), *kv = a.hits[i].value;
        if (!strcmp(o, "--vary")) {
            if (vary) return usage("--vary: one resource axis per map (got a second: %s)", kv);
            vary = kv;
        }
        if (strcmp(o, "--set")) continue;
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv || eq - kv >= 64) return usage("--set %s: expected KEY=VALUE", kv);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
        static const char *const own[] = {"trace", "trace_format", "requests", "think", "evict_each_turn", "arrivals",
                                          "request_rate", "concurrency", "session_rate", "seed", "policies"};
        for (size_t k = 0; k < KV_ARRAY_LEN(own); k++)
            if (!strcmp(key, own[k]))
                return usage("--set %s: kvsim map sets it itself (its trace of isolated restoring requests; --load, --seed, --policies)", key);
        if (!strcmp(key, "store")) user_store = 1;
        set_key(x.base, key, cJSON_CreateString(eq + 1));
    }
    if (cJSON_GetObjectItemCaseSensitive(x.base, "scenario") && !user_store) {
        char rel[600], origin[700];
        snprintf(rel, sizeof rel, "configs/scenarios/%s.json", opt_get(&a, "--scenario"));
        char *text = kv_catalog_text(rel, strchr(opt_get(&a, "--scenario"), '/') ? opt_get(&a, "--scenario") : NULL, origin, sizeof origin, &e);
        if (text && strstr(text, "\"store\"")) user_store = 1;
        free(text);
    }

    /* the base must resolve (names the bad setting; exit 2): with the axis's first value, which may be
     * what makes it valid (n_ssd for an SSD store); a NIC's value is resolved by the catalog first */
    SimConfig c;
    char pol[600];
    cJSON *probe = cJSON_Duplicate(x.base, 1);
    const char *veq = strchr(vary, '=');
    if (veq && veq > vary && veq - vary < 64 && strncmp(vary, "nic=", 4)) {
        char key[64], first[96];
        snprintf(key, sizeof key, "%.*s", (int)(veq - vary), vary);
        if (!strcmp(key, "link")) snprintf(key, sizeof key, "host_link");
        snprintf(first, sizeof first, "%.*s", (int)strcspn(veq + 1, ","), veq + 1);
        if (first[0]) set_key(probe, key, cJSON_CreateString(first));
    }
    int bad = point_config(&c, probe, "the settings", pol, sizeof pol, &e) != 0;
    cJSON_Delete(probe);
    if (bad) {
        fprintf(stderr, "kvsim map: %s\n", e.msg);
        cJSON_Delete(x.base);
        return 2;
    }
    SimWorld w;
    if (sim_world_open(&w, &c, &e) != 0) {
        fprintf(stderr, "kvsim map: %s\n", e.msg);
        cJSON_Delete(x.base);
        return 2;
    }
    char model[128], platform[128];
    snprintf(model, sizeof model, "%s", w.model->name);
    snprintf(platform, sizeof platform, "%s", w.platform->name);
    int rc = 0;

    /* the axis */
    const char *eq = strchr(vary, '=');
    if (!eq || eq == vary || eq - vary >= (long)sizeof x.axis || !eq[1]) rc = usage("--vary %s: expected KEY=V1,V2,...", vary);
    if (rc == 0) {
        snprintf(x.axis, sizeof x.axis, "%.*s", (int)(eq - vary), vary);
        snprintf(x.key, sizeof x.key, "%s", strcmp(x.axis, "link") ? x.axis : "host_link");
        if (!strcmp(x.axis, "policies") || !strcmp(x.axis, "seed") || !strcmp(x.axis, "trace"))
            rc = usage("--vary %s: not a resource axis (policies: --policies; seeds: --seeds; the trace is the map's own)", x.axis);
    }
    if (rc == 0 && (x.nv = split_list(eq + 1, x.val, MAP_MAX_V)) < 1)
        rc = usage("--vary %s: expected 1 to %d comma-separated values, none empty", vary, MAP_MAX_V);
    /* where the saved state lives: the tier the varied resource serves, unless the user chose */
    x.store = "";
    if (!user_store) x.store = !strcmp(x.axis, "nic") ? "remote" : !strcmp(x.axis, "n_ssd") || !strcmp(x.axis, "ssd") ? "ssd" : "";
    for (int i = 0; rc == 0 && i < x.nv; i++) {
        snprintf(x.res[i], sizeof x.res[i], "%s", x.val[i]);
        const NicSpec *nic = !strcmp(x.axis, "nic") ? hw_find_nic(&w.hw, x.val[i], &e) : NULL;
        if (nic) snprintf(x.res[i], sizeof x.res[i], "%s", nic->name);
        if (!strcmp(x.axis, "nic") && !nic) {
            char known[600] = "";
            for (int k = 0; k < w.hw.n_nics; k++) kv_catf(known, sizeof known, "%s%s", k ? ", " : "", w.hw.nics[k].name);
            rc = usage("--vary nic: unknown NIC '%s' (known: %s; or a line rate such as 100GbE)", x.val[i], known);
            break;
        }
        cJSON *o = run_settings(&x, i, 0, x.seed_base, "map.csv"); /* as the runs set it (the trace is theirs) */
        SimConfig c2;
        char where[200];
        snprintf(where, sizeof where, "--vary %s=%s", x.axis, x.val[i]);
        SimWorld w2;
        if (point_config(&c2, o, where, pol, sizeof pol, &e) != 0) rc = usage("%s", e.msg);
        else if (sim_world_open(&w2, &c2, &e) != 0) rc = usage("%s: %s", where, e.msg); /* catalog names resolve here */
        else sim_world_close(&w2);
        cJSON_Delete(o);
    }

    /* histories */
    int64_t maxctx = c.max_context > 0 ? c.max_context : w.model->max_pos;
    /* a restoring request holds its history and new input in the KV pool: a longer one is dropped */
    SimCapacity cap;
    sim_world_capacity(&w, &cap);
    const char *limit = "context";
    if (cap.pool_tokens > 0 && cap.pool_tokens < maxctx) maxctx = cap.pool_tokens, limit = "KV pool";
    if (rc == 0 && (v = opt_get(&a, "--history"))) {
        char items[MAP_MAX_H][96];
        int n = split_list(v, items, MAP_MAX_H);
        if (n < 1) rc = usage("--history: expected 1 to %d comma-separated lengths, e.g. 1K,4K,16K", MAP_MAX_H);
        for (int i = 0; rc == 0 && i < n; i++) {
            if (parse_tokens(items[i], &x.hist[i]) != 0)
                rc = usage("--history: '%s': expected a token count (512, 4K = 4096, 1M)", items[i]);
            else if (i && x.hist[i] <= x.hist[i - 1])
                rc = usage("--history: '%s': expected increasing lengths", items[i]);
            else if (x.hist[i] < 2 || x.hist[i] + 3 * x.new_tokens / 2 + 16 > maxctx)
                rc = usage("--history: '%s': expected 2 to %lld tokens (the %s of %s is %lld tokens, less the new input and output)", items[i],
                           (long long)(maxctx - 3 * x.new_tokens / 2 - 16), limit, model, (long long)maxctx);
        }
        x.nh = n;
    } else if (rc == 0) {
        for (int64_t h = 512; h <= 32768 && h + 3 * x.new_tokens / 2 + 16 <= maxctx; h *= 2) x.hist[x.nh++] = h;
        if (x.nh == 0) rc = usage("the %s of %s (%lld tokens) holds no default history length: give --history", limit, model, (long long)maxctx);
    }
    x.be_max = maxctx - 16 - x.new_tokens;
    /* loads */
    x.nl = 1;
    if (rc == 0 && (v = opt_get(&a, "--load"))) {
        char items[MAP_MAX_L][96];
        int n = split_list(v, items, MAP_MAX_L);
        if (n < 1) rc = usage("--load: expected 1 to %d comma-separated loads (isolated or sessions/s)", MAP_MAX_L);
        for (int i = 0; rc == 0 && i < n; i++) {
            if (!strcmp(items[i], "isolated")) x.load[i] = 0;
            else if (kv_parse_double(items[i], &x.load[i], &e) != 0 || !(x.load[i] > 0) || x.load[i] > 1e6)
                rc = usage("--load: '%s': expected isolated or a session rate in (0, 1e6] per second", items[i]);
        }
        x.nl = n;
    }
    /* policies */
    if (rc == 0) {
        const char *pv = opt_get(&a, "--policies");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "policies", pv ? pv : "all");
        SimConfig c3;
        if (point_config(&c3, o, "--policies", x.policies, sizeof x.policies, &e) != 0) rc = usage("%s", e.msg);
        cJSON_Delete(o);
        char keep[600] = "";
        for (const char *t = x.policies; rc == 0 && *t;) {
            size_t len = strcspn(t, ",");
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)len, t);
            if (!(pv == NULL && !strcmp(name, "ideal"))) {
                for (int i = 0; i < x.np; i++)
                    if (!strcmp(x.pol[i], name)) rc = usage("--policies: '%s' twice", name);
                if (rc == 0 && x.np < MAP_MAX_POL) {
                    snprintf(x.pol[x.np++], 32, "%s", name);
                    kv_catf(keep, sizeof keep, "%s%s", keep[0] ? "," : "", name);
                }
            }
            t += len;
            if (*t == ',') t++;
        }
        snprintf(x.policies, sizeof x.policies, "%s", keep);
        if (rc == 0 && x.np < 2) rc = usage("--policies: a map needs at least two contenders");
    }
    /* the cost model's uncertainty */
    char spread[400];
    if (rc == 0) {
        if (c.costs[0] && strcmp(c.costs, "spec")) {
            double lo, hi;
            int got = class_spread(c.costs, &w, 0, &lo, &hi, &e);
            if (got < 0) rc = fprintf(stderr, "kvsim map: %s\n", e.msg) ? 1 : 1;
            else if (got) {
                x.spread_store = 1;
                x.spread_lo[0] = lo, x.spread_hi[0] = hi;
                x.spread_lo[1] = x.spread_hi[1] = 1;
                double l2, h2;
                if (class_spread(c.costs, &w, 1, &l2, &h2, &e) == 1) x.spread_lo[1] = l2, x.spread_hi[1] = h2;
                snprintf(spread, sizeof spread,
                         "the store's spread: compute ×[%.3f, %.3f], host link ×[%.3f, %.3f] (median p10/p50 and p90/p50 of its points); "
                         "NIC and SSD at nominal (no measured spread)",
                         x.spread_lo[0], x.spread_hi[0], x.spread_lo[1], x.spread_hi[1]);
            } else {
                snprintf(spread, sizeof spread, "the store records no p10/p90 spread: ±%.0f %% band instead (compute, host link, NIC, SSD)",
                         100 * x.band);
            }
        } else {
            snprintf(spread, sizeof spread, "spec cost model: compute, host link, NIC and SSD times each × uniform [%.2f, %.2f]",
                     1 - x.band, 1 + x.band);
        }
    }
    sim_world_close(&w);
    if (rc != 0) {
        cJSON_Delete(x.base);
        return rc;
    }
    const char *out = opt_get(&a, "--out");
    if (out && kv_mkdirs(out, &e) != 0) {
        fprintf(stderr, "kvsim map: %s\n", e.msg);
        cJSON_Delete(x.base);
        return 1;
    }

    /* run */
    const char *tmp = getenv("TMPDIR");
    snprintf(x.tmpdir, sizeof x.tmpdir, "%s/kvsim-map.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(x.tmpdir)) {
        fprintf(stderr, "kvsim map: %s: cannot create a temporary directory\n", x.tmpdir);
        cJSON_Delete(x.base);
        return 1;
    }
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s", x.tmpdir);
    g_owner = getpid();
    g_tmpdir_set = 1;
    struct sigaction sa, old_int, old_term, old_hup;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_map_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    if (sigaction(SIGHUP, NULL, &old_hup) == 0 && old_hup.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL);
    int nc = n_cells(&x), nj = nc * reps(&x) + x.nv;
    ProcPool pool = {nj, x.jobs, x.tmpdir, map_job, map_label, &x, NULL};
    fflush(stdout);
    fflush(stderr);
    rc = procpool_run(&pool, &e);
    Cell *cells = calloc((size_t)nc, sizeof *cells);
    BeLine *be = calloc((size_t)x.nv, sizeof *be);
    double *t = calloc((size_t)reps(&x) * MAP_MAX_POL, sizeof *t);
    if (rc == 0 && (!cells || !be || !t)) rc = kv_err(&e, "out of memory");
    for (int k = 0; k < nj; k++) {
        char path[700];
        if (procpool_job_path(x.tmpdir, k, path, sizeof path, &e) != 0) break;
        if (rc == 0) {
            int cell = k / reps(&x), r = k % reps(&x);
            if (k < nc * reps(&x)) rc = read_values(path, t + (size_t)r * MAP_MAX_POL, x.np, &e);
            else rc = read_be(path, &be[k - nc * reps(&x)], &e);
            if (rc == 0 && k < nc * reps(&x) && r == reps(&x) - 1) {
                Cell *cc = &cells[cell];
                for (int i = 0; i < x.np; i++) {
                    double s = 0;
                    for (int q = 0; q < x.seeds; q++) s += t[q * MAP_MAX_POL + i];
                    cc->mean[i] = s / x.seeds;
                }
                cc->win = argmin(cc->mean, x.np, -1);
                cc->ntied = 0;
                cc->run = -1;
                for (int i = 0; i < x.np; i++) {
                    if (cc->mean[i] == cc->mean[cc->win]) cc->tied[cc->ntied++] = i;
                    else if (cc->run < 0 || cc->mean[i] < cc->mean[cc->run]) cc->run = i;
                }
                if (cc->run < 0) cc->run = cc->tied[1]; /* every policy tied */
                double d[100];
                for (int q = 0; q < x.seeds; q++) d[q] = t[q * MAP_MAX_POL + cc->run] - t[q * MAP_MAX_POL + cc->win];
                double mean, hw;
                if (x.seeds >= 2 && stats_mean_ci(d, (size_t)x.seeds, 0.95, &mean, &hw, &e) == 0) cc->margin = mean, cc->ci = hw;
                else cc->margin = cc->mean[cc->run] - cc->mean[cc->win], cc->ci = NAN;
                cc->flip = NAN;
                if (x.draws > 0) {
                    int flips = 0;
                    for (int dd = 0; dd < x.draws; dd++) {
                        int q = dd % x.seeds;
                        const double *t0 = t + (size_t)q * MAP_MAX_POL;
                        int w0 = argmin(t0, x.np, -1);
                        int w1 = argmin(t + (size_t)(x.seeds + dd) * MAP_MAX_POL, x.np, -1);
                        flips += t0[w1] != t0[w0]; /* not one of that seed's fastest (identical runs tie) */
                    }
                    cc->flip = (double)flips / x.draws;
                }
            }
        }
        unlink(path);
    }
    g_tmpdir_set = 0;
    remove_dir_files(x.tmpdir); /* the traces of failed jobs too */
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    free(t);
    if (rc != 0) {
        fprintf(stderr, "kvsim map: %s\n", e.msg);
        free(cells), free(be);
        cJSON_Delete(x.base);
        return 1;
    }

    /* report */
    char head[2000], h0[32], h1[32];
    map_fmt_tokens(h0, sizeof h0, x.hist[0]);
    map_fmt_tokens(h1, sizeof h1, x.hist[x.nh - 1]);
    snprintf(head, sizeof head,
             "%s on %s, %s=%s; history %s..%s; saved state: %s; policies %s\n"
             "a cell: the fastest policy by the mean TTFT of %d restoring requests (new input ~%lld tokens), over %d seed%s; "
             "margin = runner-up − fastest (ms) ± its 95 %% interval; flip = share of %d cost draws (%s) whose fastest policy differs\n",
             model, platform, x.axis, eq + 1, h0, h1,
             x.store[0] ? (!strcmp(x.store, "remote") ? "store=remote (the tier the NIC serves; --set store=... to change)"
                                                      : "store=ssd (the tier the SSDs serve; --set store=... to change)")
                        : "the configuration's store",
             x.policies, x.requests, (long long)x.new_tokens, x.seeds, x.seeds == 1 ? "" : "s", x.draws, spread);
    printf("%s", head);
    map_print_table(stdout, &x, cells, 0);
    map_print_be(stdout, &x, be, 0);
    fflush(stdout);
    if (out) {
        char title[300];
        snprintf(title, sizeof title, "Decision map: %s on %s, fastest restoration by history and %s", model, platform, x.axis);
        if (map_write_json(out, &x, cells, be, model, platform, spread, &e) != 0 || map_write_csv(out, &x, cells, &e) != 0 ||
            map_write_md(out, &x, cells, be, head, &e) != 0 || map_write_svg(out, &x, cells, be, title, &e) != 0) {
            fprintf(stderr, "kvsim map: %s\n", e.msg);
            rc = 1;
        } else {
            fprintf(stderr, "map in %s/ (map.json, map.csv, map.md, map.svg; kvsim report %s renders it)\n", out, out);
        }
    }
    free(cells), free(be);
    cJSON_Delete(x.base);
    return rc;
}
