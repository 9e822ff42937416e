/* verdict.c — the verdict lines and the compact table; see verdict.h. */
#include "results/verdict.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "policies/policy.h"
#include "sim/base/stats.h"

const Metric *verdict_metric(const char *name, KvErr *e)
{
    const Metric *m = metric_find(name);
    if (!m) {
        kv_err(e, "--metric %s: not a metric (examples: ttft_s.p99, ttft_s.mean, e2e_s.p99, tbt_s.p99, slo_attainment; "
                  "the sweep CSV's columns are the names)", name);
        return NULL;
    }
    if (!strcmp(m->unit, "flag") || !strcmp(m->unit, "count")) {
        kv_err(e, "--metric %s: a %s, not a measure of how well a policy did (a time, a share or a rate)", name, m->unit);
        return NULL;
    }
    return m;
}

int verdict_percentiles(const char *list, double *pct, int *n, KvErr *e)
{
    *n = 0;
    const char *s = list;
    for (;;) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || errno || !(v > 0 && v < 100) || (*end && *end != ','))
            return kv_err(e, "--percentiles %s: expected percentiles in (0, 100) separated by commas (50,90,99,99.9), "
                             "at '%.*s'", list, (int)strcspn(s, ","), s);
        if (*n == VERDICT_MAX_PCT) return kv_err(e, "--percentiles %s: at most %d percentiles", list, VERDICT_MAX_PCT);
        if (*n > 0 && v <= pct[*n - 1]) return kv_err(e, "--percentiles %s: expected ascending percentiles without repeats", list);
        pct[(*n)++] = v;
        if (!*end) return 0;
        s = end + 1;
    }
}

static const SimResult *run(const Verdict *v, int s, int p) { return &v->res[s * v->np + p]; }

/* seed s's value of metric m for policy p: from the reduced run, or from the result */
static double mval(const Verdict *v, int s, int p, const Metric *m)
{
    return v->runs ? v->runs[s * v->np + p].all[m - metric_at(0)] : metric_value(m, run(v, s, p));
}

static int run_overloaded(const Verdict *v, int s, int p)
{
    return v->runs ? v->runs[s * v->np + p].overloaded : run(v, s, p)->load.overloaded != 0;
}

static const KvPolicyOps *ops_of(const Verdict *v, int p) { return policy_find(v->res[p].policy, NULL); }

static PolicyRole role_of(const Verdict *v, int p)
{
    const KvPolicyOps *o = ops_of(v, p);
    return o ? o->role : PR_OWN;
}

int verdict_identical(const Verdict *v, int p, int q)
{
    for (int s = 0; s < v->n_seeds; s++) {
        for (int i = 0; metric_at(i); i++) {
            const Metric *m = metric_at(i);
            double x = mval(v, s, p, m), y = mval(v, s, q, m);
            if (!(x == y || (isnan(x) && isnan(y)))) return 0;
        }
    }
    return 1;
}

/* the earlier policy q is identical to, or -1 */
static int alias_of(const Verdict *v, int q)
{
    for (int p = 0; p < q; p++)
        if (verdict_identical(v, p, q)) return p;
    return -1;
}

static int overloaded_seeds(const Verdict *v, int p)
{
    int k = 0;
    for (int s = 0; s < v->n_seeds; s++) k += run_overloaded(v, s, p);
    return k;
}

/* mean of metric m over the seeds (NAN when some seed has none), and its interval's half-width */
static int mean_ci(const Verdict *v, double (*val)(const Verdict *, int, int, const void *), const void *arg, int p,
                   double *mean, double *hw, KvErr *e)
{
    double x[128];
    int n = v->n_seeds < 128 ? v->n_seeds : 128;
    *mean = *hw = NAN;
    for (int s = 0; s < n; s++) {
        x[s] = val(v, s, p, arg);
        if (!isfinite(x[s])) return 0;
    }
    if (n == 1) {
        *mean = x[0];
        return 0;
    }
    return stats_mean_ci(x, (size_t)n, v->level, mean, hw, e);
}

static double metric_of(const Verdict *v, int s, int p, const void *arg) { return mval(v, s, p, arg); }

/* how many times better policy w is than policy q in seed s (>= 1: w is better); NAN when undefined */
typedef struct Pair {
    int w, q;
} Pair;
static double ratio_of(const Verdict *v, int s, int unused, const void *arg)
{
    (void)unused;
    const Pair *pr = arg;
    double a = mval(v, s, pr->w, v->metric), b = mval(v, s, pr->q, v->metric);
    double num = v->metric->higher_better ? a : b, den = v->metric->higher_better ? b : a;
    return den > 0 && num >= 0 ? num / den : NAN;
}

/* a value of the headline metric for a reader: "153.4 ms", "99.9 %", "52150 tokens/s" */
static void show(char *b, size_t n, const Metric *m, double x, double hw)
{
    if (!isfinite(x)) {
        snprintf(b, n, "–");
        return;
    }
    double k = 1;
    const char *u = m->unit;
    int dec = 3;
    if (m->show == MS_MS) k = 1e3, u = "ms", dec = 1;
    else if (m->show == MS_PCT || !strcmp(m->unit, "share")) k = 100, u = "%", dec = 1;
    else if (m->show == MS_RATIO) dec = 2, u = "";
    else if (m->show == MS_COUNT || m->show == MS_BYTES) dec = 0;
    if (isfinite(hw)) snprintf(b, n, "%.*f ± %.*f%s%s", dec, x * k, dec, hw * k, *u ? " " : "", u);
    else snprintf(b, n, "%.*f%s%s", dec, x * k, *u ? " " : "", u);
}

/* the metric's name for a reader: its table header without the unit, else its name */
static void metric_label(char *b, size_t n, const Metric *m)
{
    if (m->header) {
        snprintf(b, n, "%s", m->header);
        size_t l = strlen(b);
        if (l > 3 && !strcmp(b + l - 3, " ms")) b[l - 3] = '\0';
        return;
    }
    snprintf(b, n, "%s", m->name);
}

int verdict_write(FILE *out, const SimWorld *w, const Verdict *v, KvErr *e)
{
    const Metric *m = v->metric;
    int base = v->baseline >= 0 ? v->baseline : 0, multi = v->n_seeds > 1;
    char ml[96];
    metric_label(ml, sizeof ml, m);
    (void)w;
    fprintf(out, "\nVerdict on %s (%s is better; ", ml, m->higher_better ? "higher" : "lower");
    if (multi) fprintf(out, "%d seeds: mean ± %.0f %% interval, policies paired seed by seed):\n", v->n_seeds, v->level * 100);
    else fprintf(out, "one seed: no interval, --seeds N gives one):\n");
    double mean[64], hw[64];
    int cand[64], np = v->np < 64 ? v->np : 64, any_ok = 0;
    for (int p = 0; p < np; p++) {
        if (mean_ci(v, metric_of, m, p, &mean[p], &hw[p], e) != 0) return -1;
        cand[p] = role_of(v, p) != PR_REFERENCE && alias_of(v, p) < 0 && isfinite(mean[p]);
        any_ok |= cand[p] && !overloaded_seeds(v, p);
    }
    int win = -1;
    for (int p = 0; p < np; p++) {
        if (!cand[p] || (any_ok && overloaded_seeds(v, p))) continue;
        if (win < 0 || (m->higher_better ? mean[p] > mean[win] : mean[p] < mean[win])) win = p;
    }
    if (win < 0) {
        fprintf(out, "  no winner: no policy has a value of %s (every one a reference, or nothing measured)\n", m->name);
    } else {
        char a[96], b[96];
        show(a, sizeof a, m, mean[win], hw[win]);
        fprintf(out, "  winner: %s, %s", v->res[win].policy, a);
        if (win == base) {
            fprintf(out, " (it is the baseline)\n");
        } else {
            Pair pr = {win, base};
            double r, rh;
            if (mean_ci(v, ratio_of, &pr, 0, &r, &rh, e) != 0) return -1;
            show(b, sizeof b, m, mean[base], hw[base]);
            if (!isfinite(r)) fprintf(out, " against %s for the baseline %s (no ratio: a value is 0)\n", b, v->res[base].policy);
            else if (multi)
                fprintf(out, ": %.2f× %s than the baseline %s (%s); interval %.2f× to %.2f×%s\n", r,
                        m->higher_better ? "higher" : "lower", v->res[base].policy, b, r - rh, r + rh,
                        r - rh > 1 ? "" : ", which holds 1: not separable from the baseline");
            else
                fprintf(out, ": %.2f× %s than the baseline %s (%s)\n", r, m->higher_better ? "higher" : "lower",
                        v->res[base].policy, b);
        }
        /* the policies the winner cannot be told apart from (paired interval of the ratio holds 1) */
        char list[1024] = "";
        size_t len = 0;
        int second = -1;
        for (int q = 0; q < np; q++) {
            if (q == win || !cand[q]) continue;
            if (second < 0 || (m->higher_better ? mean[q] > mean[second] : mean[q] < mean[second])) second = q;
            if (!multi) continue;
            Pair pr = {win, q};
            double r, rh;
            if (mean_ci(v, ratio_of, &pr, 0, &r, &rh, e) != 0) return -1;
            if (isfinite(r) && r - rh <= 1 && len < sizeof list) { /* lines of at most about 110 characters */
                const char *brk = len && (len - (size_t)(strrchr(list, '\n') ? strrchr(list, '\n') - list : -60)) > 80 ? ",\n    " : ", ";
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s (%.2f× ± %.2f)", len ? brk : "", v->res[q].policy, r, rh);
            }
        }
        if (multi) fprintf(out, "  not separable from the winner (its paired ratio's interval holds 1): %s\n", len ? list : "none");
        else if (second >= 0) {
            Pair pr = {win, second};
            double r = ratio_of(v, 0, 0, &pr);
            if (r == 1) fprintf(out, "  runner-up: %s, the same value\n", v->res[second].policy);
            else
                fprintf(out, "  runner-up: %s, %.2f× %s; one seed cannot say whether that is more than chance (--seeds 5)\n",
                        v->res[second].policy, r, m->higher_better ? "lower" : "higher");
        }
    }
    char ov[1024] = "";
    size_t len = 0;
    for (int p = 0; p < np; p++) {
        int k = overloaded_seeds(v, p);
        if (!k || len >= sizeof ov) continue;
        if (multi) len += (size_t)snprintf(ov + len, sizeof ov - len, "%s%s (%d of %d seeds)", len ? ", " : "", v->res[p].policy, k, v->n_seeds);
        else len += (size_t)snprintf(ov + len, sizeof ov - len, "%s%s", len ? ", " : "", v->res[p].policy);
    }
    if (len)
        fprintf(out, "  overloaded (arrivals outran service: their numbers grow with the run's length, not a ranking): %s%s\n", ov,
                any_ok ? "" : "; every contender is, so the winner is only the least overloaded");
    else fprintf(out, "  overloaded: none\n");
    for (int p = 0; p < np; p++) {
        if (role_of(v, p) != PR_REFERENCE) continue;
        char a[96];
        show(a, sizeof a, m, mean[p], hw[p]);
        const char *why = ops_of(v, p)->summary;
        if (!strncmp(why, "reference: ", 11)) why += 11;
        fprintf(out, "  reference: %s, %s (%s: a reference, not a contender)\n", v->res[p].policy, a, why);
    }
    fprintf(out, "  full tables: %s/table.md (every metric%s; %s)\n", v->out, multi ? ", differences and ratios to the baseline" : "",
            v->full ? "below" : "--table full prints them");
    fprintf(out, "  every number: %s/summary.json; per request: requests.csv; figures: *.svg\n", v->out);
    return 0;
}

/* the compact table's columns: a time distribution at a percentile, or a metric row */
typedef struct Col {
    char header[32];
    size_t hist_off; /* offsetof(SimResult, ttft / e2e / tbt); 0 with m */
    int h, k;        /* the same in a reduced run: q[h][k] (h 0 TTFT, 1 E2E, 2 TBT; k: the percentile's index) */
    double q;
    const Metric *m;
} Col;

static double col_of(const Verdict *v, int s, int p, const void *arg)
{
    const Col *c = arg;
    if (c->m) return mval(v, s, p, c->m);
    if (v->runs) return v->runs[s * v->np + p].q[c->h][c->k];
    const SimResult *r = run(v, s, p);
    const Hist *h = (const Hist *)((const char *)r + c->hist_off);
    return h->n ? hist_percentile(h, c->q) / 1e9 : NAN;
}

static void cell(char *b, size_t n, const Col *c, double x, double hw)
{
    if (!isfinite(x)) {
        snprintf(b, n, "–");
        return;
    }
    int pct = c->m && c->m->show == MS_PCT, ratio = c->m && c->m->show == MS_RATIO;
    double k = pct ? 100 : ratio ? 1 : 1e3;
    int dec = ratio ? 2 : 1;
    if (isfinite(hw)) snprintf(b, n, "%.*f ± %.*f", dec, x * k, dec, hw * k);
    else snprintf(b, n, "%.*f", dec, x * k);
}

static void pct_label(char *b, size_t n, double p) { snprintf(b, n, "p%g", p); }

static int row(FILE *out, const Verdict *v, const Col *cols, int nc, int p, const char *label, KvErr *e)
{
    fprintf(out, "| %s |", label);
    for (int c = 0; c < nc; c++) {
        double x, hw;
        if (mean_ci(v, col_of, &cols[c], p, &x, &hw, e) != 0) return -1;
        char b[64];
        cell(b, sizeof b, &cols[c], x, hw);
        fprintf(out, " %s |", b);
    }
    fputc('\n', out);
    return 0;
}

static int row_for(FILE *out, const Verdict *v, const Col *cols, int nc, int p, int child, int *marked, KvErr *e)
{
    char label[128];
    const KvPolicyOps *o = ops_of(v, p);
    int k = overloaded_seeds(v, p);
    const char *role = o && o->role == PR_ABLATION ? " (ablation)" : o && o->role == PR_VARIANT ? " (variant)"
                       : o && o->role == PR_REFERENCE ? " (reference)" : "";
    snprintf(label, sizeof label, "%s%s%s%s%s", child ? "└ " : "", v->res[p].policy, role,
             p == (v->baseline >= 0 ? v->baseline : 0) ? " (baseline)" : "", k ? " ⚠" : "");
    *marked |= k != 0;
    return row(out, v, cols, nc, p, label, e);
}

int verdict_table(FILE *out, const SimWorld *w, const Verdict *v, KvErr *e)
{
    Col cols[VERDICT_MAX_PCT + 4];
    int nc = 0;
    double top = v->n_pct ? v->pct[v->n_pct - 1] : 99;
    char pl[16];
    for (int i = 0; i < v->n_pct; i++) {
        pct_label(pl, sizeof pl, v->pct[i]);
        Col c = {"", offsetof(SimResult, ttft), 0, i, v->pct[i] / 100, NULL};
        snprintf(c.header, sizeof c.header, "TTFT %s ms", pl);
        cols[nc++] = c;
    }
    pct_label(pl, sizeof pl, top);
    int kt = v->n_pct ? v->n_pct - 1 : 0; /* (compare always gives percentiles: 50,99 by default) */
    Col e2e = {"", offsetof(SimResult, e2e), 1, kt, top / 100, NULL}, tbt = {"", offsetof(SimResult, tbt), 2, kt, top / 100, NULL};
    snprintf(e2e.header, sizeof e2e.header, "E2E %s ms", pl);
    snprintf(tbt.header, sizeof tbt.header, "TBT %s ms", pl);
    cols[nc++] = e2e;
    cols[nc++] = tbt;
    Col slo = {"SLO %", 0, 0, 0, 0, metric_find("slo_attainment")}, lb = {"restore/bound", 0, 0, 0, 0, metric_find("restore_over_lower_bound.mean")};
    cols[nc++] = slo;
    cols[nc++] = lb;
    fprintf(out, "\n%s on %s (%s, tp %d, pp %d), trace %s, %s\n", w->model->name, w->platform->name,
            w->hw.gpus[w->platform->gpu].name, w->cfg->tp, w->cfg->pp, w->cfg->trace, w->cost_source);
    if (v->n_seeds > 1) fprintf(out, "%d seeds: mean ± %.0f %% interval (Student t)\n", v->n_seeds, v->level * 100);
    fputs("\n| policy |", out);
    for (int c = 0; c < nc; c++) fprintf(out, " %s |", cols[c].header);
    fputs("\n|---|", out);
    for (int c = 0; c < nc; c++) fputs("---:|", out);
    fputc('\n', out);
    int marked = 0;
    for (int p = 0; p < v->np; p++) {
        const KvPolicyOps *o = ops_of(v, p);
        if (alias_of(v, p) >= 0) continue;
        int parent = -1;
        for (int q = 0; o && o->varies && q < v->np; q++)
            if (!strcmp(v->res[q].policy, o->varies)) parent = q;
        if (parent >= 0 && alias_of(v, parent) < 0) continue; /* under its parent */
        if (row_for(out, v, cols, nc, p, 0, &marked, e) != 0) return -1;
        for (int q = 0; q < v->np; q++) {
            const KvPolicyOps *c = ops_of(v, q);
            if (q == p || !c || !c->varies || strcmp(c->varies, v->res[p].policy) || alias_of(v, q) >= 0) continue;
            if (row_for(out, v, cols, nc, q, 1, &marked, e) != 0) return -1;
        }
    }
    int first = 1;
    for (int q = 0; q < v->np; q++) {
        int p = alias_of(v, q);
        if (p < 0) continue;
        fprintf(out, "%s%s: identical to %s in every metric%s, so left out here (table.md has its row)\n", first ? "\n" : "",
                v->res[q].policy, v->res[p].policy, v->n_seeds > 1 ? " of every seed" : "");
        first = 0;
    }
    if (marked)
        fprintf(out, "%s⚠ overloaded%s: its numbers grow with the run's length (see the warnings)\n", first ? "\n" : "",
                v->n_seeds > 1 ? " in some seed" : "");
    return 0;
}
