/* plan.c — `kvsim plan`: the cheapest configuration meeting an SLO, and the highest sustainable
 * load, decided by replications; see plan.h for the rules and docs/planning.md for the guide.
 *
 * How: the searches see only an evaluator callback (PlanEvalFn) and a space of coordinates,
 * costs and amounts, so tests/test_plan.c drives them with a synthetic evaluator. The command
 * builds the space with sim/engine/sweepspec (the --config/--set base and the --vary axes, values
 * checked by kvsim sweep's checker), resolves every point once (sim_world_open: the parts, the
 * DRAM, the SSD count, the store; a point refused there is invalid), prices it (plan_cost.c), and
 * evaluates jobs as simulations through point_config + sim_run in procpool workers (each job's
 * PlanSample comes back in its own file). The report is built once as text and printed / written
 * unchanged.
 * Complexity: see plan.h.
 */
#include "sim/cli/plan.h"

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
#include "sim/base/stats.h"
#include "sim/base/units.h"
#include "sim/cli/plan_cost.h"
#include "sim/cli/point.h"
#include "sim/cli/procpool.h"
#include "sim/cli/sweep.h"
#include "sim/engine/sim.h"
#include "sim/engine/sweepspec.h"

/* ---------------------------------------------------------------- targets */

/* the target names: the metric table's short names (results/metric.h), the times first */
const char *plan_target_names(void)
{
    static char buf[600];
    if (!buf[0]) {
        size_t n = 0;
        for (int time = 1; time >= 0; time--)
            for (int i = 0; metric_at(i); i++) {
                const Metric *m = metric_at(i);
                if (m->target && (m->show == MS_MS) == time)
                    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? ", " : "", m->target);
            }
        snprintf(buf + n, sizeof buf - n, "; or any metric of kvsim sweep's CSV, e.g. by_history_class.long.ttft_s.p99");
    }
    return buf;
}

/* how a target's metric is shown: 1 a time (in ms; its limit needs a unit), 2 a share (in %), 0 as is */
static int target_unit(const Metric *m) { return m->show == MS_MS ? 1 : m->show == MS_PCT ? 2 : 0; }

static const char *op_text(PlanOp op) { return op == PLAN_LE ? "<=" : op == PLAN_LT ? "<" : op == PLAN_GE ? ">=" : ">"; }

/* a metric value in its display unit (ms, %, as is) */
static double shown(int unit, double v) { return unit == 1 ? v * 1e3 : unit == 2 ? v * 100 : v; }
static const char *unit_text(int unit) { return unit == 1 ? " ms" : unit == 2 ? " %" : ""; }

static void fmt_num(char *buf, size_t n, double v)
{
    double a = fabs(v);
    if (!isfinite(v)) snprintf(buf, n, "–");
    else if (a >= 100) snprintf(buf, n, "%.0f", v);
    else if (a >= 10) snprintf(buf, n, "%.1f", v);
    else if (a >= 0.01 || a == 0) snprintf(buf, n, "%.2f", v);
    else snprintf(buf, n, "%.3g", v);
}

/* "612 ± 20" in the target's display unit (no unit) */
static void fmt_stat(char *buf, size_t n, int unit, double mean, double ci, int n_seeds)
{
    char m[32], c[32];
    fmt_num(m, sizeof m, shown(unit, mean));
    if (n_seeds < 2 || !isfinite(ci)) {
        snprintf(buf, n, "%s", m);
        return;
    }
    double am = fabs(shown(unit, mean));
    double cc = shown(unit, ci);
    /* the interval with the mean's decimals */
    if (am >= 100) snprintf(c, sizeof c, "%.0f", cc);
    else if (am >= 10) snprintf(c, sizeof c, "%.1f", cc);
    else if (am >= 0.01 || am == 0) snprintf(c, sizeof c, "%.2f", cc);
    else snprintf(c, sizeof c, "%.3g", cc);
    snprintf(buf, n, "%s ± %s", m, c);
}

static void trim(char *s)
{
    size_t a = strspn(s, " \t"), n = strlen(s);
    while (n > a && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    memmove(s, s + a, n - a);
    s[n - a] = '\0';
}

static int parse_term(const char *term, PlanTarget *t, KvErr *e)
{
    memset(t, 0, sizeof *t);
    const char *o = strpbrk(term, "<>=!");
    if (!o || o == term)
        return kv_err(e, "--target: '%s': expected METRIC<=VALUE, METRIC<VALUE, METRIC>=VALUE or METRIC>VALUE (e.g. ttft_p99<=500ms)",
                      term);
    char name[64], value[96];
    size_t nl = (size_t)(o - term);
    if (nl >= sizeof name) return kv_err(e, "--target: '%s': metric name too long", term);
    memcpy(name, term, nl);
    name[nl] = '\0';
    trim(name);
    int ol;
    if (o[0] == '<' && o[1] == '=') t->op = PLAN_LE, ol = 2;
    else if (o[0] == '>' && o[1] == '=') t->op = PLAN_GE, ol = 2;
    else if (o[0] == '<' && o[1] != '<' && o[1] != '>') t->op = PLAN_LT, ol = 1;
    else if (o[0] == '>' && o[1] != '>' && o[1] != '<') t->op = PLAN_GT, ol = 1;
    else
        return kv_err(e, "--target: '%s': unknown comparison '%.2s' (expected <=, <, >= or >)", term, o);
    snprintf(value, sizeof value, "%s", o + ol);
    trim(value);
    if (!value[0]) return kv_err(e, "--target: '%s': no value after %s", term, op_text(t->op));
    const Metric *tm = metric_by_target(name);
    if (!tm) tm = metric_find(name);
    if (!tm || !(tm->outputs & METRIC_SWEEP)) return kv_err(e, "--target: unknown metric '%s' (known: %s)", name, plan_target_names());
    int unit = target_unit(tm);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->metric, sizeof t->metric, "%s", tm->name);
    t->unit = unit;
    KvErr pe;
    if (unit == 1) {
        int64_t ns;
        char *end;
        strtod(value, &end);
        if (*end == '\0')
            return kv_err(e, "--target: '%s': %s is a time: give its unit (e.g. %s%s%s ms or %s s)", term, name, name,
                          op_text(t->op), value, value);
        if (kv_parse_duration(value, &ns, &pe) != 0) return kv_err(e, "--target: '%s': %s", term, pe.msg);
        t->limit = (double)ns / 1e9;
        snprintf(t->text, sizeof t->text, "%s%s%s", name, op_text(t->op), value);
    } else {
        char num[96];
        snprintf(num, sizeof num, "%s", value);
        size_t vl = strlen(num);
        int pct = vl > 0 && num[vl - 1] == '%';
        if (pct) {
            num[vl - 1] = '\0';
            trim(num);
        }
        double v;
        if (kv_parse_double(num, &v, &pe) != 0 || !isfinite(v))
            return kv_err(e, "--target: '%s': expected a number%s, got '%s'", term, unit == 2 ? " (a share: 0.9 or 90%)" : "", value);
        if (pct && unit != 2) return kv_err(e, "--target: '%s': %s is not a share; '%%' is for slo_attainment", term, name);
        if (pct) v /= 100;
        if (unit == 2 && (v < 0 || v > 1)) return kv_err(e, "--target: '%s': a share in [0, 1] (or 0%%..100%%), got %s", term, value);
        t->limit = v;
        snprintf(t->text, sizeof t->text, "%s%s%s", name, op_text(t->op), value);
    }
    return 0;
}

int plan_targets_parse(const char *text, PlanTarget *t, int max, int *n, KvErr *e)
{
    *n = 0;
    if (!text || !*text) return kv_err(e, "--target: empty (expected e.g. \"ttft_p99<=500ms,tbt_p99<=60ms\")");
    for (const char *tok = text;;) {
        size_t len = strcspn(tok, ",");
        char term[256];
        if (len >= sizeof term) return kv_err(e, "--target: a term longer than %zu characters", sizeof term - 1);
        memcpy(term, tok, len);
        term[len] = '\0';
        trim(term);
        if (!term[0]) return kv_err(e, "--target: '%s': an empty term", text);
        if (*n == max) return kv_err(e, "--target: at most %d targets", max);
        if (parse_term(term, &t[*n], e) != 0) return -1;
        for (int i = 0; i < *n; i++)
            if (!strcmp(t[i].metric, t[*n].metric) && t[i].op == t[*n].op)
                return kv_err(e, "--target: '%s': %s %s is given twice", term, t[i].name, op_text(t[i].op));
        (*n)++;
        if (!tok[len]) break;
        tok += len + 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- verdicts */

const char *plan_verdict_name(PlanVerdict v)
{
    static const char *const names[] = {"unknown", "met", "failed", "uncertain", "pruned", "skipped", "invalid"};
    return (int)v >= 0 && (int)v < (int)KV_ARRAY_LEN(names) ? names[v] : "?";
}

static void add_why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_why(char *why, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(why);
    if (n && n + 2 < cap) {
        memcpy(why + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    if (n < cap) vsnprintf(why + n, cap - n, fmt, ap);
    va_end(ap);
}

void plan_judge(const PlanTarget *t, int nt, PlanEval *ev)
{
    int n = ev->n_seeds, failed = 0, uncertain = 0;
    ev->why[0] = '\0';
    ev->n_overloaded = 0;
    for (int i = 0; i < PLAN_MAX_TARGETS; i++) ev->mean[i] = ev->ci95[i] = NAN;
    for (int s = 0; s < n; s++) {
        if (ev->s[s].error[0] && !failed) {
            add_why(ev->why, sizeof ev->why, "the run of seed %llu failed: %s", (unsigned long long)ev->s[s].seed, ev->s[s].error);
            failed = 1;
        }
        ev->n_overloaded += ev->s[s].overloaded != 0;
    }
    /* no metric from no measurement: a run that measured no request fails its point */
    for (int s = 0; s < n && !failed; s++)
        if (ev->s[s].unmeasured) {
            add_why(ev->why, sizeof ev->why, "%s (seed %llu)", ev->s[s].absent[0] ? ev->s[s].absent : "no request was measured",
                    (unsigned long long)ev->s[s].seed);
            failed = 1;
        }
    if (failed) {
        ev->verdict = PLAN_FAILED;
        return;
    }
    double x[256];
    for (int i = 0; i < nt; i++) {
        int ok = n <= (int)KV_ARRAY_LEN(x), bad = -1;
        for (int s = 0; s < n && ok; s++)
            if (!(ok = isfinite(x[s] = ev->s[s].v[i]))) bad = s;
        if (!ok) {
            if (bad >= 0 && ev->s[bad].absent[0])
                add_why(ev->why, sizeof ev->why, "%s has no value (seed %llu: %s)", t[i].name, (unsigned long long)ev->s[bad].seed,
                        ev->s[bad].absent);
            else add_why(ev->why, sizeof ev->why, "%s has no value", t[i].name);
            failed = 1;
            continue;
        }
        double mean = x[0], hw = 0;
        KvErr e;
        if (n >= 2 && stats_mean_ci(x, (size_t)n, 0.95, &mean, &hw, &e) != 0) {
            add_why(ev->why, sizeof ev->why, "%s: %s", t[i].name, e.msg);
            failed = 1;
            continue;
        }
        ev->mean[i] = mean;
        ev->ci95[i] = n >= 2 ? hw : NAN;
        double up = mean + hw, lo = mean - hw, L = t[i].limit;
        int met, fail;
        switch (t[i].op) {
        case PLAN_LE: met = up <= L, fail = lo > L; break;
        case PLAN_LT: met = up < L, fail = lo >= L; break;
        case PLAN_GE: met = lo >= L, fail = up < L; break;
        default: met = lo > L, fail = up <= L; break;
        }
        char st[64], lim[32];
        fmt_stat(st, sizeof st, t[i].unit, mean, hw, n);
        fmt_num(lim, sizeof lim, shown(t[i].unit, L));
        if (fail) {
            static const char *const neg[] = {">", ">=", "<", "<="};
            add_why(ev->why, sizeof ev->why, "%s %s%s %s %s%s", t[i].name, st, unit_text(t[i].unit), neg[t[i].op], lim,
                    unit_text(t[i].unit));
            failed = 1;
        } else if (!met) {
            add_why(ev->why, sizeof ev->why, "%s %s%s straddles %s %s%s", t[i].name, st, unit_text(t[i].unit),
                    op_text(t[i].op), lim, unit_text(t[i].unit));
            uncertain = 1;
        }
    }
    if (ev->n_overloaded == n) {
        if (n > 1) add_why(ev->why, sizeof ev->why, "overloaded in every seed (%d of %d)", n, n);
        else add_why(ev->why, sizeof ev->why, "overloaded (its one seed)");
        failed = 1;
    } else if (ev->n_overloaded > 0) {
        add_why(ev->why, sizeof ev->why, "overloaded in %d of %d seeds", ev->n_overloaded, n);
        uncertain = 1;
    }
    ev->verdict = failed ? PLAN_FAILED : uncertain ? PLAN_UNCERTAIN : PLAN_MET;
}

void plan_free(Planner *p)
{
    for (int i = 0; i < p->n_evals; i++) free(p->evals[i].s);
    free(p->evals);
    p->evals = NULL;
    p->n_evals = p->cap = 0;
}

static int run_seeds(Planner *p, PlanEval *ev, int from, int to, KvErr *e)
{
    PlanSample *s = realloc(ev->s, (size_t)to * sizeof *s);
    PlanJob *jobs = malloc((size_t)(to - from) * sizeof *jobs);
    if (!s || !jobs) {
        if (s) ev->s = s;
        free(jobs);
        return kv_err(e, "plan: out of memory");
    }
    ev->s = s;
    for (int k = from; k < to; k++) {
        jobs[k - from] = (PlanJob){ev->point, ev->policy, ev->load, p->seed_base + (uint64_t)k};
        memset(&s[k], 0, sizeof s[k]);
    }
    int rc = p->eval(p->ctx, jobs, to - from, s + from, e);
    for (int k = from; k < to; k++) s[k].seed = jobs[k - from].seed;
    free(jobs);
    p->runs += to - from;
    if (rc != 0) return -1;
    ev->n_seeds = to;
    return 0;
}

int plan_evaluate(Planner *p, int point, int policy, double load, KvErr *e)
{
    for (int i = 0; i < p->n_evals; i++)
        if (p->evals[i].point == point && p->evals[i].policy == policy &&
            (p->evals[i].load == load || (isnan(load) && isnan(p->evals[i].load))))
            return i;
    if (p->n_evals == p->cap) {
        int cap = p->cap ? 2 * p->cap : 32;
        PlanEval *ev = realloc(p->evals, (size_t)cap * sizeof *ev);
        if (!ev) return kv_err(e, "plan: out of memory");
        p->evals = ev;
        p->cap = cap;
    }
    PlanEval *ev = &p->evals[p->n_evals];
    memset(ev, 0, sizeof *ev);
    ev->point = point;
    ev->policy = policy;
    ev->load = load;
    int seeds = p->seeds < 1 ? 1 : p->seeds, cap = p->max_seeds < seeds ? seeds : p->max_seeds;
    if (run_seeds(p, ev, 0, seeds, e) != 0) {
        free(ev->s);
        return -1;
    }
    plan_judge(p->t, p->nt, ev);
    while (ev->verdict == PLAN_UNCERTAIN && ev->n_seeds < cap) {
        int to = ev->n_seeds * 2 < cap ? ev->n_seeds * 2 : cap;
        if (run_seeds(p, ev, ev->n_seeds, to, e) != 0) {
            free(ev->s);
            return -1;
        }
        plan_judge(p->t, p->nt, ev);
    }
    p->n_evals++;
    if (p->progress) p->progress(p->progress_ctx, p, ev);
    return p->n_evals - 1;
}

/* ---------------------------------------------------------------- search (a): the cheapest */

int plan_dominated(const PlanSpace *sp, int q, int r)
{
    if (q == r) return 0;
    if (sp->store && sp->store[q] != sp->store[r]) return 0; /* monotonicity holds within one store only */
    for (int a = 0; a < sp->n_axes; a++) {
        if (sp->monotone[a]) {
            if (!(sp->amount[q * sp->n_axes + a] <= sp->amount[r * sp->n_axes + a])) return 0;
        } else if (sp->coord[q * sp->n_axes + a] != sp->coord[r * sp->n_axes + a]) {
            return 0;
        }
    }
    return 1;
}

void plan_cheapest_free(PlanCheapest *c)
{
    free(c->st);
    free(c->order);
    memset(c, 0, sizeof *c);
}

static const PlanSpace *g_sort_space; /* qsort has no context: the space being ordered (one search at a time) */

static int cost_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    double cx = g_sort_space->cost[x], cy = g_sort_space->cost[y];
    int nx = isnan(cx), ny = isnan(cy);
    if (nx != ny) return nx - ny; /* invalid points last */
    if (!nx && cx != cy) return cx < cy ? -1 : 1;
    return (x > y) - (x < y);
}

static void prune_below(const PlanSpace *sp, PlanCheapest *c, int r)
{
    for (int q = 0; q < sp->n_points; q++)
        if (c->st[q].v == PLAN_UNKNOWN && plan_dominated(sp, q, r)) {
            c->st[q].v = PLAN_PRUNED;
            c->st[q].by = r;
        }
}

/* Evaluate point q for the search (memoised in st); its verdict. */
static int visit(Planner *p, const PlanSpace *sp, PlanCheapest *c, int q, int probe, KvErr *e)
{
    if (c->st[q].eval >= 0 || c->st[q].v == PLAN_PRUNED || c->st[q].v == PLAN_INVALID) return 0;
    int i = plan_evaluate(p, q, c->policy, NAN, e);
    if (i < 0) return -1;
    c->st[q].eval = i;
    c->st[q].v = p->evals[i].verdict;
    c->st[q].probe = probe;
    if (sp->prune && c->st[q].v == PLAN_FAILED) prune_below(sp, c, q);
    return 0;
}

static int failing(PlanVerdict v) { return v == PLAN_FAILED || v == PLAN_PRUNED; }

/* The probes of one group (points sharing every non-monotone value and the resolved store): along each monotone axis,
 * the others at the group's maximum, bisect for the least amount that does not fail. */
static int probe_group(Planner *p, const PlanSpace *sp, PlanCheapest *c, const int *members, int nm, KvErr *e)
{
    int na = sp->n_axes;
    int *chain = malloc((size_t)nm * sizeof *chain);
    if (!chain) return kv_err(e, "plan: out of memory");
    int rc = 0;
    for (int a = 0; a < na && rc == 0; a++) {
        if (!sp->monotone[a]) continue;
        /* the chain along a: members at the group's maximum of every other monotone axis */
        int m = 0;
        for (int k = 0; k < nm; k++) {
            int q = members[k], at_max = 1;
            for (int b = 0; b < na && at_max; b++) {
                if (b == a || !sp->monotone[b]) continue;
                for (int l = 0; l < nm && at_max; l++) at_max = sp->amount[members[l] * na + b] <= sp->amount[q * na + b];
            }
            if (at_max) chain[m++] = q;
        }
        /* by amount on a (insertion sort: chains are short), ties by cost order */
        for (int i = 1; i < m; i++)
            for (int j = i; j > 0 && sp->amount[chain[j - 1] * na + a] > sp->amount[chain[j] * na + a]; j--) {
                int t = chain[j];
                chain[j] = chain[j - 1];
                chain[j - 1] = t;
            }
        if (m == 0) continue;
        int lo = -1, hi = m - 1;
        for (int i = 0; i < m; i++)
            if (failing(c->st[chain[i]].v)) lo = i; /* known failures bound the bisection from below */
        if (lo == hi) break;
        if ((rc = visit(p, sp, c, chain[hi], 1, e)) != 0) break;
        if (failing(c->st[chain[hi]].v)) break; /* the group's top fails: every member is pruned */
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if ((rc = visit(p, sp, c, chain[mid], 1, e)) != 0) break;
            if (failing(c->st[chain[mid]].v)) lo = mid;
            else hi = mid;
        }
    }
    free(chain);
    return rc;
}

int plan_cheapest(Planner *p, const PlanSpace *sp, int policy, PlanCheapest *out, KvErr *e)
{
    memset(out, 0, sizeof *out);
    out->policy = policy;
    out->answer = -1;
    int n = sp->n_points, na = sp->n_axes;
    out->st = calloc((size_t)(n > 0 ? n : 1), sizeof *out->st);
    out->order = calloc((size_t)(n > 0 ? n : 1), sizeof *out->order);
    if (!out->st || !out->order) return kv_err(e, "plan: out of memory");
    for (int q = 0; q < n; q++) {
        out->st[q].eval = out->st[q].by = -1;
        out->st[q].v = isnan(sp->cost[q]) ? PLAN_INVALID : PLAN_UNKNOWN;
        out->order[q] = q;
    }
    g_sort_space = sp;
    qsort(out->order, (size_t)n, sizeof *out->order, cost_cmp);
    g_sort_space = NULL;
    int any_mono = 0;
    for (int a = 0; a < na; a++) any_mono |= sp->monotone[a];
    int *probed = calloc((size_t)(n > 0 ? n : 1), sizeof *probed), *members = malloc((size_t)(n > 0 ? n : 1) * sizeof *members);
    if (!probed || !members) {
        free(probed);
        free(members);
        return kv_err(e, "plan: out of memory");
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        int q = out->order[i];
        if (out->st[q].v == PLAN_INVALID || out->st[q].v == PLAN_PRUNED) continue;
        if ((rc = visit(p, sp, out, q, 0, e)) != 0) break;
        if (out->st[q].v == PLAN_MET) {
            out->answer = q;
            for (int k = i + 1; k < n; k++)
                if (out->st[out->order[k]].v == PLAN_UNKNOWN) out->st[out->order[k]].v = PLAN_SKIPPED;
            break;
        }
        /* a failure in a group not probed yet: probe it (its members share q's non-monotone values),
         * so that the failing points below its frontier are pruned before the walk reaches them */
        if (!sp->prune || !any_mono || out->st[q].v != PLAN_FAILED || probed[q]) continue;
        int nm = 0;
        for (int k = 0; k < n; k++) {
            int r = out->order[k], same = out->st[r].v != PLAN_INVALID && (!sp->store || sp->store[r] == sp->store[q]);
            for (int a = 0; a < na && same; a++)
                if (!sp->monotone[a]) same = sp->coord[r * na + a] == sp->coord[q * na + a];
            if (same) {
                probed[r] = 1;
                members[nm++] = r;
            }
        }
        if (nm > 1) rc = probe_group(p, sp, out, members, nm, e);
    }
    free(probed);
    free(members);
    if (rc != 0) return -1;
    for (int q = 0; q < n; q++) {
        out->evaluated += out->st[q].eval >= 0;
        out->probes += out->st[q].eval >= 0 && out->st[q].probe;
        out->pruned += out->st[q].v == PLAN_PRUNED;
        out->skipped += out->st[q].v == PLAN_SKIPPED;
    }
    return 0;
}

/* ---------------------------------------------------------------- search (b): the highest load */

void plan_max_load_free(PlanMaxLoad *m)
{
    free(m->evals);
    memset(m, 0, sizeof *m);
}

static int load_step(Planner *p, PlanMaxLoad *m, double load, int *met, KvErr *e)
{
    int i = plan_evaluate(p, m->point, m->policy, load, e);
    if (i < 0) return -1;
    int *ev = realloc(m->evals, (size_t)(m->n_evals + 1) * sizeof *ev);
    if (!ev) return kv_err(e, "plan: out of memory");
    m->evals = ev;
    m->evals[m->n_evals++] = i;
    m->n_steps++;
    *met = p->evals[i].verdict == PLAN_MET;
    return 0;
}

int plan_max_load(Planner *p, int policy, double start, double precision, double min_load, double max_load, PlanMaxLoad *out,
                  KvErr *e)
{
    return plan_max_load_at(p, -1, policy, start, precision, min_load, max_load, out, e);
}

int plan_max_load_at(Planner *p, int point, int policy, double start, double precision, double min_load, double max_load,
                     PlanMaxLoad *out, KvErr *e)
{
    memset(out, 0, sizeof *out);
    out->point = point;
    out->policy = policy;
    out->lo = 0;
    out->hi = NAN;
    if (!(start > 0) || !(precision > 0) || !(min_load > 0) || !(max_load >= min_load))
        return kv_err(e, "plan: load search needs start > 0, precision > 0 and 0 < min <= max");
    double r = start < min_load ? min_load : start > max_load ? max_load : start;
    int met = 0;
    if (load_step(p, out, r, &met, e) != 0) return -1;
    if (met) {
        out->lo = r;
        for (int k = 0; k < 64; k++) {
            if (out->lo >= max_load) {
                out->limited = 1;
                break;
            }
            double up = out->lo * 2 > max_load ? max_load : out->lo * 2;
            if (load_step(p, out, up, &met, e) != 0) return -1;
            if (met) out->lo = up;
            else {
                out->hi = up;
                break;
            }
        }
    } else {
        out->hi = r;
        for (int k = 0; k < 64; k++) {
            if (out->hi / 2 < min_load) {
                out->limited = 1;
                break;
            }
            double down = out->hi / 2;
            if (load_step(p, out, down, &met, e) != 0) return -1;
            if (met) {
                out->lo = down;
                break;
            }
            out->hi = down;
        }
    }
    while (out->lo > 0 && isfinite(out->hi) && (out->hi - out->lo) / out->lo > precision) {
        double mid = (out->lo + out->hi) / 2;
        if (load_step(p, out, mid, &met, e) != 0) return -1;
        if (met) out->lo = mid;
        else out->hi = mid;
    }
    return 0;
}

/* ---------------------------------------------------------------- the command: evaluation */

typedef struct Ctx {
    cJSON **points;
    int n_points;
    char (*policies)[32];
    int np;
    const PlanTarget *t;
    int nt;
    const char *knob; /* search (b): the setting the load is written to */
    int jobs;
    char tmpdir[512];
    const PlanJob *batch;
    /* the report */
    const SweepSpec *spec;
    PlanPoint *info;
    double *cost;
    const char *currency;
    int quiet;
    int with_store; /* the report shows each point's resolved store (a space, not one configuration) */
} Ctx;

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

static void run_one(const Ctx *x, const PlanJob *j, PlanSample *s)
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
    const Ctx *x = ctx;
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
    const Ctx *x = ctx;
    const PlanJob *j = &x->batch[k];
    if (j->point >= 0) snprintf(buf, cap, "point %d, %s, seed %llu", j->point + 1, x->policies[j->policy], (unsigned long long)j->seed);
    else snprintf(buf, cap, "%s %g, %s, seed %llu", x->knob, j->load, x->policies[j->policy], (unsigned long long)j->seed);
}

static int real_eval(void *ctx, const PlanJob *jobs, int n, PlanSample *out, KvErr *e)
{
    Ctx *x = ctx;
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

/* ---------------------------------------------------------------- the command: the report */

/* "n_ssd=2, gpu=H100-SXM": point q's axis values */
static void axes_label(const SweepSpec *spec, cJSON *const *points, int q, char *buf, size_t n)
{
    size_t l = 0;
    buf[0] = '\0';
    if (q < 0 || spec->n_axes == 0) {
        snprintf(buf, n, "the configuration");
        return;
    }
    for (int a = 0; a < spec->n_axes && l < n; a++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(points[q], spec->axes[a].key);
        l += (size_t)snprintf(buf + l, n - l, "%s%s=%s", a ? ", " : "", spec->axes[a].key, cJSON_GetStringValue(v));
    }
}

static void point_label(const Ctx *x, int q, char *buf, size_t n) { axes_label(x->spec, x->points, q, buf, n); }

/* the store in words: "dram+remote (the remote store over 100G)", "dram+ssd (4× PM9A3)", "dram" */
static void store_words(const PlanPoint *p, char *buf, size_t n)
{
    if (plan_store_uses_remote(p)) snprintf(buf, n, "%s (the remote store over %s%s)", p->store, p->n_nics > 1 ? "NICs " : "", p->nic);
    else if (plan_store_uses_ssd(p)) snprintf(buf, n, "%s (%d× %s)", p->store, p->n_ssd, p->ssd);
    else snprintf(buf, n, "%s", p->store);
}

static void progress_line(void *ctx, const Planner *p, const PlanEval *ev)
{
    const Ctx *x = ctx;
    if (x->quiet) return;
    char label[400];
    if (ev->point >= 0 && !isnan(ev->load)) { /* --max-load over a space: the configuration and the load */
        point_label(x, ev->point, label, sizeof label);
        fprintf(stderr, "plan: %s: %s: %s=%g: %s%s%s [%d seeds]\n", x->policies[ev->policy], label, x->knob, ev->load,
                plan_verdict_name(ev->verdict), ev->why[0] ? ": " : "", ev->why, ev->n_seeds);
    } else if (ev->point >= 0) {
        char money[48];
        point_label(x, ev->point, label, sizeof label);
        plan_fmt_money(money, sizeof money, x->cost[ev->point]);
        fprintf(stderr, "plan: %s: %s (%s %s): %s%s%s [%d seeds]\n", x->policies[ev->policy], label, money, x->currency,
                plan_verdict_name(ev->verdict), ev->why[0] ? ": " : "", ev->why, ev->n_seeds);
    } else {
        fprintf(stderr, "plan: %s: %s=%g: %s%s%s [%d seeds]\n", x->policies[ev->policy], x->knob, ev->load,
                plan_verdict_name(ev->verdict), ev->why[0] ? ": " : "", ev->why, ev->n_seeds);
    }
}

/* Every target of an evaluation against its limit, and the overload count: "ttft_p99 612 ± 20 ms
 * against <= 500 ms: failed; tbt_p99 40 ± 1 ms against <= 60 ms: met; overloaded in 0 of 3 seeds"
 * (a run that failed: its message). What a reader needs to see why a point does not do. */
static void eval_detail(const Ctx *x, const PlanEval *ev, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (ev->verdict == PLAN_FAILED && ev->n_seeds > 0)
        for (int s = 0; s < ev->n_seeds; s++)
            if (ev->s[s].error[0] || ev->s[s].unmeasured) {
                snprintf(buf, cap, "%s", ev->why);
                return;
            }
    for (int i = 0; i < x->nt; i++) {
        const PlanTarget *t = &x->t[i];
        char st[64], lim[32];
        const char *verdict = "no value";
        if (isfinite(ev->mean[i])) {
            double hw = isfinite(ev->ci95[i]) ? ev->ci95[i] : 0, up = ev->mean[i] + hw, lo = ev->mean[i] - hw, L = t->limit;
            int met, fail;
            switch (t->op) {
            case PLAN_LE: met = up <= L, fail = lo > L; break;
            case PLAN_LT: met = up < L, fail = lo >= L; break;
            case PLAN_GE: met = lo >= L, fail = up < L; break;
            default: met = lo > L, fail = up <= L; break;
            }
            verdict = fail ? "failed" : met ? "met" : "uncertain (the interval straddles the limit)";
        }
        fmt_stat(st, sizeof st, t->unit, ev->mean[i], ev->ci95[i], ev->n_seeds);
        fmt_num(lim, sizeof lim, shown(t->unit, t->limit));
        add_why(buf, cap, "%s %s%s%s against %s %s%s: %s", t->name, st, unit_text(t->unit),
                ev->n_seeds > 1 ? " (mean ± 95 % CI)" : " (one seed)", op_text(t->op), lim, unit_text(t->unit), verdict);
    }
    add_why(buf, cap, "overloaded in %d of %d seed%s%s", ev->n_overloaded, ev->n_seeds, ev->n_seeds == 1 ? "" : "s",
            ev->n_overloaded == ev->n_seeds && ev->n_seeds > 0 ? " (fails: arrivals outpace service, load.overloaded)" : "");
}

static void table_head(FILE *f, const Ctx *x, const char *first, int with_store, int with_cost)
{
    fprintf(f, "| %s |%s%s", first, with_store ? " store |" : "", with_cost ? " cost |" : "");
    for (int i = 0; i < x->nt; i++) fprintf(f, " %s%s |", x->t[i].name, unit_text(x->t[i].unit));
    fprintf(f, " overloaded | seeds | verdict | why |\n|---|%s%s", with_store ? "---|" : "", with_cost ? "--:|" : "");
    for (int i = 0; i < x->nt; i++) fprintf(f, "--:|");
    fprintf(f, "--:|--:|---|---|\n");
}

static void eval_cells(FILE *f, const Ctx *x, const PlanEval *ev)
{
    for (int i = 0; i < x->nt; i++) {
        char st[64];
        fmt_stat(st, sizeof st, x->t[i].unit, ev->mean[i], ev->ci95[i], ev->n_seeds);
        fprintf(f, " %s |", st);
    }
    fprintf(f, " %d/%d | %d | %s | %s |\n", ev->n_overloaded, ev->n_seeds, ev->n_seeds, plan_verdict_name(ev->verdict), ev->why);
}

static cJSON *eval_json(const Ctx *x, const PlanEval *ev)
{
    cJSON *o = cJSON_CreateObject();
    if (ev->point >= 0) cJSON_AddNumberToObject(o, "point", ev->point + 1);
    if (!isnan(ev->load)) cJSON_AddNumberToObject(o, "load", ev->load);
    cJSON_AddStringToObject(o, "verdict", plan_verdict_name(ev->verdict));
    cJSON_AddNumberToObject(o, "seeds", ev->n_seeds);
    cJSON_AddNumberToObject(o, "overloaded_seeds", ev->n_overloaded);
    cJSON *m = cJSON_AddObjectToObject(o, "metrics");
    for (int i = 0; i < x->nt; i++) {
        cJSON *t = cJSON_AddObjectToObject(m, x->t[i].name);
        if (isfinite(ev->mean[i])) cJSON_AddNumberToObject(t, "mean", ev->mean[i]);
        else cJSON_AddNullToObject(t, "mean");
        if (isfinite(ev->ci95[i])) cJSON_AddNumberToObject(t, "ci95", ev->ci95[i]);
        else cJSON_AddNullToObject(t, "ci95");
        cJSON *ps = cJSON_AddArrayToObject(t, "per_seed");
        for (int s = 0; s < ev->n_seeds; s++)
            cJSON_AddItemToArray(ps, isfinite(ev->s[s].v[i]) ? cJSON_CreateNumber(ev->s[s].v[i]) : cJSON_CreateNull());
    }
    cJSON_AddStringToObject(o, "why", ev->why);
    return o;
}

static int same_value(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* Did the varied settings change anything the targets read? Over the evaluations ev[0..n) of one
 * policy, every two of different points at the same load are compared seed by seed (the seeds they
 * share: every point runs seed_base, seed_base + 1, ...): each target's value, the overload flag,
 * whether a request was measured and whether the run failed. 1 when at least two points were
 * compared and nothing differed (note: the sentence for the report), 0 when something differed,
 * -1 when fewer than two points were compared (nothing is known). */
static int never_changed(const Ctx *x, const Planner *p, const int *ev, int n, int with_values, char *note, size_t cap)
{
    int compared = 0, points = 0;
    for (int i = 0; i < n; i++) {
        const PlanEval *A = &p->evals[ev[i]];
        int first = 1;
        for (int j = 0; j < i && first; j++) first = p->evals[ev[j]].point != A->point;
        points += first;
        for (int j = 0; j < i; j++) {
            const PlanEval *B = &p->evals[ev[j]];
            if (A->point == B->point || !same_value(A->load, B->load)) continue;
            compared = 1;
            int ns = A->n_seeds < B->n_seeds ? A->n_seeds : B->n_seeds;
            for (int k = 0; k < ns; k++) {
                const PlanSample *a = &A->s[k], *b = &B->s[k];
                if (a->overloaded != b->overloaded || a->unmeasured != b->unmeasured || !a->error[0] != !b->error[0]) return 0;
                for (int t = 0; t < x->nt; t++)
                    if (!same_value(a->v[t], b->v[t])) return 0;
            }
        }
    }
    if (!compared) return -1;
    const PlanEval *A = &p->evals[ev[0]];
    snprintf(note, cap, "the varied settings never changed a metric: the %d configurations evaluated gave the same values in every "
                        "seed", points);
    if (!with_values) return 1;
    kv_catf(note, cap, " (");
    for (int t = 0; t < x->nt; t++) {
        char st[64];
        fmt_stat(st, sizeof st, x->t[t].unit, A->mean[t], A->ci95[t], A->n_seeds);
        kv_catf(note, cap, "%s%s %s%s", t ? ", " : "", x->t[t].name, st, unit_text(x->t[t].unit));
    }
    kv_catf(note, cap, "%soverloaded in %d of %d seed%s)", x->nt ? "; " : "", A->n_overloaded, A->n_seeds, A->n_seeds == 1 ? "" : "s");
    return 1;
}

static void report_cheapest(FILE *f, cJSON *pj, const Ctx *x, const Planner *p, const PlanSpace *sp, const PlanCheapest *c,
                            int64_t runs)
{
    const char *pol = x->policies[c->policy];
    char label[400], money[48];
    fprintf(f, "## %s\n\n", pol);
    cJSON *jp = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(pj, "policies"), pol);
    if (c->answer >= 0) {
        const PlanEval *ev = &p->evals[c->st[c->answer].eval];
        point_label(x, c->answer, label, sizeof label);
        plan_fmt_money(money, sizeof money, x->cost[c->answer]);
        fprintf(f, "**cheapest meeting every target: %s — %s %s** (", label, money, x->currency);
        for (int i = 0; i < x->nt; i++) {
            char st[64];
            fmt_stat(st, sizeof st, x->t[i].unit, ev->mean[i], ev->ci95[i], ev->n_seeds);
            fprintf(f, "%s%s %s%s", i ? ", " : "", x->t[i].name, st, unit_text(x->t[i].unit));
        }
        fprintf(f, "%s%d seed%s)\n\n", x->nt ? "; " : "", ev->n_seeds, ev->n_seeds == 1 ? "" : "s");
        cJSON_AddNumberToObject(jp, "answer", c->answer + 1);
        cJSON_AddNumberToObject(jp, "answer_cost", x->cost[c->answer]);
    } else {
        fprintf(f, "**no point of the space meets every target**\n\n");
        cJSON_AddNullToObject(jp, "answer");
        cJSON_AddNullToObject(jp, "answer_cost");
    }
    /* next to the answer: whether the settings that were varied made any difference */
    int n_ev = 0, valid = 0, *evs = malloc((size_t)(sp->n_points > 0 ? sp->n_points : 1) * sizeof *evs);
    for (int q = 0; evs && q < sp->n_points; q++) {
        valid += c->st[q].v != PLAN_INVALID;
        if (c->st[q].eval >= 0) evs[n_ev++] = c->st[q].eval;
    }
    char note[1200] = "";
    int nc = evs && sp->n_axes > 0 ? never_changed(x, p, evs, n_ev, 1, note, sizeof note) : -1;
    free(evs);
    if (nc == 1) {
        fprintf(f, "**Note: %s%s.**\n\n", note,
                c->answer >= 0 ? "; the answer is the cheapest point by its price alone, not by what these settings do"
                               : "; no value of these settings makes a difference here");
        cJSON_AddTrueToObject(jp, "never_changed");
        cJSON_AddStringToObject(jp, "never_changed_note", note);
    } else {
        if (nc < 0 && c->answer >= 0 && valid > 1)
            fprintf(f, "Only the cheapest point was run (it meets every target), so nothing here shows what the varied settings "
                       "change.\n\n");
        if (nc < 0) cJSON_AddNullToObject(jp, "never_changed"); /* fewer than two points compared: not known */
        else cJSON_AddFalseToObject(jp, "never_changed");
    }
    int invalid = 0;
    for (int q = 0; q < sp->n_points; q++) invalid += c->st[q].v == PLAN_INVALID;
    fprintf(f, "Evaluated %d of %d points (%lld simulations", c->evaluated, sp->n_points, (long long)runs);
    if (c->probes) fprintf(f, "; %d of them probes for pruning", c->probes);
    fprintf(f, "); pruned %d; not run because they cost at least the answer: %d", c->pruned, c->skipped);
    if (invalid) fprintf(f, "; invalid: %d", invalid);
    fprintf(f, ".\n\n");
    cJSON_AddNumberToObject(jp, "points", sp->n_points);
    cJSON_AddNumberToObject(jp, "evaluated", c->evaluated);
    cJSON_AddNumberToObject(jp, "probes", c->probes);
    cJSON_AddNumberToObject(jp, "pruned", c->pruned);
    cJSON_AddNumberToObject(jp, "skipped", c->skipped);
    cJSON_AddNumberToObject(jp, "invalid", invalid);
    cJSON_AddNumberToObject(jp, "simulations", (double)runs);
    table_head(f, x, "point", x->with_store, 1);
    cJSON *rows = cJSON_AddArrayToObject(jp, "rows");
    for (int i = 0; i < sp->n_points; i++) {
        int q = c->order[i];
        const PlanPointState *st = &c->st[q];
        if (st->v == PLAN_SKIPPED || st->v == PLAN_UNKNOWN) continue;
        point_label(x, q, label, sizeof label);
        plan_fmt_money(money, sizeof money, x->cost[q]);
        fprintf(f, "| %s%s |", label, q == c->answer ? " **(answer)**" : "");
        if (x->with_store) fprintf(f, " %s |", x->info[q].invalid[0] ? "–" : x->info[q].store);
        fprintf(f, " %s |", money);
        cJSON *row = NULL;
        if (st->eval >= 0) {
            eval_cells(f, x, &p->evals[st->eval]);
            row = eval_json(x, &p->evals[st->eval]);
            cJSON_AddBoolToObject(row, "probe", st->probe);
        } else {
            for (int k = 0; k < x->nt; k++) fprintf(f, " |");
            char by[400] = "";
            if (st->v == PLAN_PRUNED) point_label(x, st->by, by, sizeof by);
            fprintf(f, " | | %s | %s%s%s |\n", plan_verdict_name(st->v),
                    st->v == PLAN_PRUNED ? "at most the resources of " : x->info[q].invalid, by,
                    st->v == PLAN_PRUNED ? " (failed)" : "");
            row = cJSON_CreateObject();
            cJSON_AddNumberToObject(row, "point", q + 1);
            cJSON_AddStringToObject(row, "verdict", plan_verdict_name(st->v));
            if (st->v == PLAN_PRUNED) cJSON_AddNumberToObject(row, "dominated_by", st->by + 1);
            else cJSON_AddStringToObject(row, "why", x->info[q].invalid);
        }
        if (isfinite(x->cost[q])) cJSON_AddNumberToObject(row, "cost", x->cost[q]);
        else cJSON_AddNullToObject(row, "cost");
        cJSON_AddItemToArray(rows, row);
    }
    fprintf(f, "\n");
    if (c->answer < 0 || sp->n_axes == 0) return;
    /* the cheaper neighbours: one step down (or up) on one axis, cheaper than the answer */
    int na = sp->n_axes, shown_any = 0;
    for (int q = 0; q < sp->n_points; q++) {
        int diff = -1, ndiff = 0;
        for (int a = 0; a < na; a++)
            if (sp->coord[q * na + a] != sp->coord[c->answer * na + a]) diff = a, ndiff++;
        if (ndiff != 1 || abs(sp->coord[q * na + diff] - sp->coord[c->answer * na + diff]) != 1) continue;
        if (!(x->cost[q] < x->cost[c->answer]) && c->st[q].v != PLAN_INVALID) continue;
        if (!shown_any) fprintf(f, "Why the cheaper neighbours (one value away on one axis) do not do:\n\n");
        shown_any = 1;
        const PlanPointState *st = &c->st[q];
        char by[400] = "", detail[1200] = "";
        if (st->v == PLAN_PRUNED) {
            point_label(x, st->by, by, sizeof by);
            if (c->st[st->by].eval >= 0) eval_detail(x, &p->evals[c->st[st->by].eval], detail, sizeof detail);
        } else if (st->eval >= 0) {
            eval_detail(x, &p->evals[st->eval], detail, sizeof detail);
        }
        plan_fmt_money(money, sizeof money, x->cost[q]);
        fprintf(f, "- %s=%s (%s %s): %s — %s%s%s%s%s\n", x->spec->axes[diff].key,
                cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x->points[q], x->spec->axes[diff].key)), money, x->currency,
                plan_verdict_name(st->v),
                st->eval >= 0 ? detail : st->v == PLAN_PRUNED ? "not run: it has at most the resources of " : x->info[q].invalid,
                by, st->v == PLAN_PRUNED ? ", which failed" : "", st->v == PLAN_PRUNED && detail[0] ? ": " : "",
                st->v == PLAN_PRUNED ? detail : "");
    }
    if (!shown_any) fprintf(f, "No cheaper neighbour: the answer is the cheapest point along every axis.\n");
    fprintf(f, "\n");
}

/* the indices of m's evaluations in p->evals, in increasing load (insertion sort: a search evaluates
 * a few dozen loads at most); malloc'ed, NULL when out of memory */
static int *evals_by_load(const Planner *p, const PlanMaxLoad *m)
{
    int *ord = malloc((size_t)(m->n_evals > 0 ? m->n_evals : 1) * sizeof *ord);
    for (int i = 0; ord && i < m->n_evals; i++) ord[i] = m->evals[i];
    for (int i = 1; ord && i < m->n_evals; i++)
        for (int j = i; j > 0 && p->evals[ord[j - 1]].load > p->evals[ord[j]].load; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    return ord;
}

static void report_max_load(FILE *f, cJSON *pj, const Ctx *x, const Planner *p, const PlanMaxLoad *m, double precision,
                            int64_t runs)
{
    const char *pol = x->policies[m->policy];
    fprintf(f, "## %s\n\n", pol);
    cJSON *jp = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(pj, "policies"), pol);
    if (m->lo > 0) {
        fprintf(f, "**highest sustainable %s: %.4g /s**", x->knob, m->lo);
        if (isfinite(m->hi))
            fprintf(f, " — the limit lies in [%.4g, %.4g) (relative width %.1f %%, asked %.1f %%)", m->lo, m->hi,
                    100 * (m->hi - m->lo) / m->lo, 100 * precision);
        else fprintf(f, " — the search's upper bound, still met: the limit is higher");
        fprintf(f, "\n\n");
        cJSON_AddNumberToObject(jp, "sustainable", m->lo);
    } else {
        fprintf(f, "**no load met every target** (the lowest tried, %.4g /s, %s)\n\n", m->hi,
                m->limited ? "at the search's lower bound" : "failed");
        cJSON_AddNullToObject(jp, "sustainable");
    }
    if (isfinite(m->hi)) cJSON_AddNumberToObject(jp, "not_sustainable", m->hi);
    else cJSON_AddNullToObject(jp, "not_sustainable");
    cJSON_AddBoolToObject(jp, "at_bound", m->limited);
    cJSON_AddNumberToObject(jp, "evaluated", m->n_evals);
    cJSON_AddNumberToObject(jp, "simulations", (double)runs);
    fprintf(f, "Evaluated %d loads (%lld simulations), in order of the load:\n\n", m->n_evals, (long long)runs);
    char head[96];
    snprintf(head, sizeof head, "%s /s", x->knob);
    table_head(f, x, head, 0, 0);
    int *ord = evals_by_load(p, m); /* NULL when out of memory: no rows */
    cJSON *rows = cJSON_AddArrayToObject(jp, "rows");
    for (int i = 0; ord && i < m->n_evals; i++) {
        const PlanEval *ev = &p->evals[ord[i]];
        fprintf(f, "| %.4g |", ev->load);
        eval_cells(f, x, ev);
        cJSON_AddItemToArray(rows, eval_json(x, ev));
    }
    free(ord);
    fprintf(f, "\n");
}

/* the evaluation of load `load` in search m, or NULL */
static const PlanEval *eval_at(const Planner *p, const PlanMaxLoad *m, double load)
{
    for (int i = 0; i < m->n_evals; i++)
        if (p->evals[m->evals[i]].load == load) return &p->evals[m->evals[i]];
    return NULL;
}

/* --max-load with --vary: a table of every configuration's answer, then each one's evidence. */
static void report_max_load_grid(FILE *f, cJSON *pj, const Ctx *x, const Planner *p, const PlanMaxLoad *ms, const int64_t *runs,
                                 int policy, double precision, int64_t all_runs)
{
    const char *pol = x->policies[policy];
    int n = x->n_points, best = -1, evals = 0;
    char label[400], money[48];
    fprintf(f, "## %s\n\n", pol);
    cJSON *jp = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(pj, "policies"), pol);
    int with_cost = cJSON_GetObjectItemCaseSensitive(pj, "prices") != NULL;
    for (int q = 0; q < n; q++) {
        if (x->info[q].invalid[0]) continue;
        evals += ms[q].n_evals;
        if (ms[q].lo > 0 && (best < 0 || ms[q].lo > ms[best].lo || (ms[q].lo == ms[best].lo && x->cost[q] < x->cost[best])))
            best = q; /* ties: the cheaper (with --cost), else the first */
    }
    if (best >= 0) {
        point_label(x, best, label, sizeof label);
        int ties = 0;
        for (int q = 0; q < n; q++) ties += q != best && !x->info[q].invalid[0] && ms[q].lo == ms[best].lo;
        fprintf(f, "**highest sustainable %s: %s — %.4g /s**", x->knob, label, ms[best].lo);
        if (ties) fprintf(f, " (%d other configuration%s reach%s it too%s)", ties, ties == 1 ? "" : "s", ties == 1 ? "es" : "",
                          with_cost ? "; this is the cheapest of them" : "");
        if (isfinite(ms[best].hi)) fprintf(f, " (the limit lies in [%.4g, %.4g))", ms[best].lo, ms[best].hi);
        else fprintf(f, " (the search's upper bound, still met)");
        fprintf(f, "\n\n");
        cJSON_AddNumberToObject(jp, "best", best + 1);
    } else {
        fprintf(f, "**no configuration met every target at any load tried**\n\n");
        cJSON_AddNullToObject(jp, "best");
    }
    int n_ev = 0, *evs = malloc((size_t)(evals > 0 ? evals : 1) * sizeof *evs);
    for (int q = 0; evs && q < n; q++)
        for (int i = 0; !x->info[q].invalid[0] && i < ms[q].n_evals; i++) evs[n_ev++] = ms[q].evals[i];
    char note[1200] = "";
    int nc = evs ? never_changed(x, p, evs, n_ev, 0, note, sizeof note) : -1;
    free(evs);
    if (nc == 1) {
        fprintf(f, "**Note: %s, at every load that two of them share; the configurations differ only in price.**\n\n", note);
        cJSON_AddTrueToObject(jp, "never_changed");
        cJSON_AddStringToObject(jp, "never_changed_note", note);
    } else if (nc == 0) {
        cJSON_AddFalseToObject(jp, "never_changed");
    } else {
        cJSON_AddNullToObject(jp, "never_changed");
    }
    fprintf(f, "Evaluated %d loads over %d configurations (%lld simulations); a relative precision of %.1f %% each:\n\n", evals, n,
            (long long)all_runs, 100 * precision);
    fprintf(f, "| configuration |%s%s highest sustainable %s /s | the limit lies in | loads evaluated | why the next load up fails |\n",
            x->with_store ? " store |" : "", with_cost ? " cost |" : "", x->knob);
    fprintf(f, "|---|%s%s--:|---|--:|---|\n", x->with_store ? "---|" : "", with_cost ? "--:|" : "");
    cJSON *jc = cJSON_AddArrayToObject(jp, "configurations");
    for (int q = 0; q < n; q++) {
        const PlanMaxLoad *m = &ms[q];
        point_label(x, q, label, sizeof label);
        plan_fmt_money(money, sizeof money, x->cost[q]);
        fprintf(f, "| %s |", label);
        if (x->with_store) fprintf(f, " %s |", x->info[q].invalid[0] ? "–" : x->info[q].store);
        if (with_cost) fprintf(f, " %s |", money);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "point", q + 1);
        if (x->info[q].invalid[0]) {
            fprintf(f, " invalid | | 0 | %s |\n", x->info[q].invalid);
            cJSON_AddStringToObject(o, "invalid", x->info[q].invalid);
            cJSON_AddItemToArray(jc, o);
            continue;
        }
        char lo[32] = "none", range[96] = "";
        if (m->lo > 0) snprintf(lo, sizeof lo, "%.4g", m->lo);
        if (m->lo > 0 && isfinite(m->hi)) snprintf(range, sizeof range, "[%.4g, %.4g)", m->lo, m->hi);
        else if (m->lo > 0) snprintf(range, sizeof range, "≥ %.4g (the search's upper bound)", m->lo);
        else snprintf(range, sizeof range, "below %.4g%s", m->hi, m->limited ? " (the search's lower bound)" : "");
        const PlanEval *up = isfinite(m->hi) ? eval_at(p, m, m->hi) : NULL;
        char detail[1200] = "";
        if (up) {
            char d[1100];
            eval_detail(x, up, d, sizeof d);
            snprintf(detail, sizeof detail, "%.4g: %s — %s", up->load, plan_verdict_name(up->verdict), d);
        }
        fprintf(f, " %s | %s | %d | %s |\n", lo, range, m->n_evals, detail);
        if (m->lo > 0) cJSON_AddNumberToObject(o, "sustainable", m->lo);
        else cJSON_AddNullToObject(o, "sustainable");
        if (isfinite(m->hi)) cJSON_AddNumberToObject(o, "not_sustainable", m->hi);
        else cJSON_AddNullToObject(o, "not_sustainable");
        cJSON_AddBoolToObject(o, "at_bound", m->limited);
        cJSON_AddNumberToObject(o, "evaluated", m->n_evals);
        cJSON_AddNumberToObject(o, "simulations", (double)runs[q]);
        cJSON *rows = cJSON_AddArrayToObject(o, "rows");
        int *ord = evals_by_load(p, m); /* NULL when out of memory: no rows */
        for (int i = 0; ord && i < m->n_evals; i++) cJSON_AddItemToArray(rows, eval_json(x, &p->evals[ord[i]]));
        free(ord);
        cJSON_AddItemToArray(jc, o);
    }
    fprintf(f, "\n");
    /* the evidence: every load evaluated, per configuration, in order of the load */
    char head[96];
    snprintf(head, sizeof head, "%s /s", x->knob);
    for (int q = 0; q < n; q++) {
        const PlanMaxLoad *m = &ms[q];
        if (x->info[q].invalid[0]) continue;
        point_label(x, q, label, sizeof label);
        fprintf(f, "### %s: %s\n\n", pol, label);
        table_head(f, x, head, 0, 0);
        int *ord = evals_by_load(p, m); /* NULL when out of memory: no rows */
        for (int i = 0; ord && i < m->n_evals; i++) {
            fprintf(f, "| %.4g |", p->evals[ord[i]].load);
            eval_cells(f, x, &p->evals[ord[i]]);
        }
        free(ord);
        fprintf(f, "\n");
    }
}

/* "n_ssd (1, 2) × gpu (A100-40GB, H100-SXM)", and the axes into plan.json */
static void space_text(FILE *f, cJSON *pj, const SweepSpec *spec)
{
    cJSON *ja = cJSON_AddObjectToObject(pj, "axes");
    for (int ax = 0; ax < spec->n_axes; ax++) {
        fprintf(f, "%s%s (", ax ? " × " : "", spec->axes[ax].key);
        cJSON *arr = cJSON_AddArrayToObject(ja, spec->axes[ax].key);
        for (int k = 0; k < spec->axes[ax].n; k++) {
            fprintf(f, "%s%s", k ? ", " : "", spec->axes[ax].values[k]);
            cJSON_AddItemToArray(arr, cJSON_CreateString(spec->axes[ax].values[k]));
        }
        fprintf(f, ")");
    }
}

/* the cost formula's line of the report header */
static void cost_line(FILE *f, cJSON *pj, const Ctx *x, const PlanPrices *pr, const PlanCosting *pc)
{
    fprintf(f, "- cost (%s, from %s): replicas × (", x->currency, pr->path);
    static const char *const term[PLAN_N_PARTS] = {"GPUs × GPU", "n_ssd × SSD", "DRAM GB × dram_per_gb", "NICs × NIC", "remote store",
                                                   "host link", "platform"};
    int first = 1;
    for (int k = 0; k < PLAN_N_PARTS; k++)
        if (pc->counted[k]) {
            fprintf(f, "%s%s", first ? "" : " + ", term[k]);
            first = 0;
        }
    fprintf(f, "); the SSDs, the DRAM, the NIC and the remote store count where the point's store uses them%s%s\n",
            pc->excluded[0] ? "; not priced, the same in every point, left out: " : "", pc->excluded);
    cJSON_AddStringToObject(pj, "currency", x->currency);
    cJSON_AddStringToObject(pj, "prices", pr->path);
    cJSON_AddStringToObject(pj, "not_priced", pc->excluded);
}

/* "- stores: dram+ssd (6 points), dram+remote (2 points: ...)": the header line when a space's
 * points resolve to more than one store */
static void stores_line(FILE *f, const PlanPoint *info, int n)
{
    static const char *const names[] = {"dram", "dram+ssd", "dram+remote", "remote"};
    int count[4] = {0}, kinds = 0;
    for (int q = 0; q < n; q++)
        for (int k = 0; k < 4; k++)
            if (!info[q].invalid[0] && !strcmp(info[q].store, names[k])) kinds += count[k]++ == 0;
    if (kinds < 2) return;
    fprintf(f, "- stores (resolved per point; store auto is the SSDs if any, else the remote store over the NIC if any, else "
               "DRAM): ");
    for (int k = 0, shown_one = 0; k < 4; k++)
        if (count[k]) {
            fprintf(f, "%s%s in %d point%s", shown_one ? ", " : "", names[k], count[k], count[k] == 1 ? "" : "s");
            shown_one = 1;
        }
    fprintf(f, "; points with different stores are never compared for pruning\n");
}

/* the points of the space into plan.json: settings, store, cost and priced parts (pr NULL: no --cost) */
static void points_json(cJSON *pj, cJSON **points, int n_points, const double *cost, const PlanPoint *info, const PlanPrices *pr,
                        const PlanCosting *pc)
{
    cJSON *jpts = cJSON_AddArrayToObject(pj, "points");
    for (int q = 0; q < n_points; q++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "point", q + 1);
        cJSON_AddItemToObject(o, "params", cJSON_Duplicate(points[q], 1));
        if (isfinite(cost[q])) cJSON_AddNumberToObject(o, "cost", cost[q]);
        else cJSON_AddNullToObject(o, "cost");
        if (info[q].invalid[0]) {
            cJSON_AddStringToObject(o, "invalid", info[q].invalid);
        } else {
            cJSON_AddStringToObject(o, "store", info[q].store);
            cJSON_AddNumberToObject(o, "replicas", info[q].replicas);
            if (pr) cJSON_AddItemToObject(o, "parts", plan_parts_json(pr, pc, &info[q]));
            cJSON_AddItemToObject(o, "unused", plan_unused_json(&info[q]));
        }
        cJSON_AddItemToArray(jpts, o);
    }
}

/* The table of every point's store, cost and priced parts (the report's end, and --dry-run). */
static void points_table(FILE *f, const Ctx *x, const PlanPrices *pr, const PlanCosting *pc)
{
    fprintf(f, "| point | store |%s parts (per replica) |\n|---|---|%s---|\n", pr ? " cost |" : "", pr ? "--:|" : "");
    for (int q = 0; q < x->n_points; q++) {
        char label[400], store[160], money[48], parts[1400];
        const PlanPoint *pi = &x->info[q];
        point_label(x, q, label, sizeof label);
        if (pi->invalid[0]) {
            fprintf(f, "| %s | invalid |%s %s |\n", label, pr ? " – |" : "", pi->invalid);
            continue;
        }
        store_words(pi, store, sizeof store);
        plan_fmt_money(money, sizeof money, x->cost[q]);
        if (pr) {
            plan_parts_text(pr, pc, pi, parts, sizeof parts);
            fprintf(f, "| %s | %s | %s | %s |\n", label, store, money, parts);
        } else {
            fprintf(f, "| %s | %s | %d× %s, %d replica%s |\n", label, store, pi->n_gpus, pi->gpu, pi->replicas,
                    pi->replicas == 1 ? "" : "s");
        }
    }
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
        axes_label(&spec, points, q, lab, sizeof lab);
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

    Ctx x;
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
        space_text(stdout, scratch, &spec);
        printf("%s= %d point%s\n", spec.n_axes ? " " : "one configuration ", n_points, n_points == 1 ? "" : "s");
        if (opt_get(&a, "--cost")) cost_line(stdout, scratch, &x, &pr, &pc);
        cJSON_Delete(scratch);
        stores_line(stdout, info, n_points);
        printf("- policies: ");
        for (int k = 0; k < np; k++) printf("%s%s", k ? ", " : "", names[k]);
        printf("\n\n");
        points_table(stdout, &x, opt_get(&a, "--cost") ? &pr : NULL, &pc);
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
    p.eval = real_eval;
    p.ctx = &x;
    p.progress = progress_line;
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
        cJSON_AddStringToObject(o, "op", op_text(t[i].op));
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
            space_text(f, pj, &spec);
            fprintf(f, " = %d configuration%s, each searched on its own (the search --max-load runs with its values as --set)\n",
                    n_points, n_points == 1 ? "" : "s");
            if (opt_get(&a, "--cost")) cost_line(f, pj, &x, &pr, &pc);
            stores_line(f, info, n_points);
            points_json(pj, points, n_points, cost, info, opt_get(&a, "--cost") ? &pr : NULL, &pc);
        } else {
            char sw[160];
            store_words(&info[0], sw, sizeof sw);
            fprintf(f, "- store: %s\n", sw);
        }
    } else {
        fprintf(f, "# kvsim plan: the cheapest configuration meeting %s\n\n", tgt);
        fprintf(f, "- base: %s; space: ", basename);
        space_text(f, pj, &spec);
        fprintf(f, "%s= %d point%s\n", spec.n_axes ? " " : "one configuration ", n_points, n_points == 1 ? "" : "s");
        if (opt_get(&a, "--cost")) cost_line(f, pj, &x, &pr, &pc);
        if (spec.n_axes) {
            stores_line(f, info, n_points);
        } else if (!info[0].invalid[0]) {
            char sw[160];
            store_words(&info[0], sw, sizeof sw);
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
        points_json(pj, points, n_points, cost, info, opt_get(&a, "--cost") ? &pr : NULL, &pc);
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
            if (rc == 0) report_max_load_grid(f, pj, &x, &p, ms, runs, k, precision, p.runs - before);
            for (int q = 0; ms && q < n_points; q++) plan_max_load_free(&ms[q]);
            free(ms);
            free(runs);
        } else if (max_load) {
            PlanMaxLoad m;
            double start = isfinite(load_start) ? load_start : knob_value > 0 ? knob_value : 1.0;
            if (plan_max_load(&p, k, start, precision, 1e-6, 1e6, &m, &e) != 0) rc = 1;
            else {
                report_max_load(f, pj, &x, &p, &m, precision, p.runs - before);
                total_evals += m.n_evals;
            }
            plan_max_load_free(&m);
        } else {
            PlanSpace sp = {n_points, spec.n_axes, coord, cost, mono, amount, opt_count(&a, "--no-prune") == 0, store_id};
            PlanCheapest c;
            if (plan_cheapest(&p, &sp, k, &c, &e) != 0) rc = 1;
            else {
                report_cheapest(f, pj, &x, &p, &sp, &c, p.runs - before);
                total_evals += c.evaluated;
            }
            plan_cheapest_free(&c);
        }
        total_runs += p.runs - before;
    }
    if (rc == 0 && spec.n_axes > 0 && (!max_load || opt_get(&a, "--cost"))) {
        fprintf(f, "## The points: store, cost and priced parts\n\n");
        points_table(f, &x, opt_get(&a, "--cost") ? &pr : NULL, &pc);
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
