/* plan.c — `kvsim plan`'s library: the targets (parsing, the names), the verdicts on replications
 * and the two searches (the cheapest configuration meeting an SLO, the highest sustainable load);
 * see plan.h for the rules and docs/planning.md for the guide.
 *
 * How: the searches see only an evaluator callback (PlanEvalFn) and a space of coordinates,
 * costs and amounts, so tests/test_plan.c drives them with a synthetic evaluator. The command
 * (plan_cmd.c) gives them simulations; the report (plan_report.c) prints what they found.
 * Complexity: see plan.h.
 */
#include "sim/cli/plan.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/metric.h"
#include "sim/base/stats.h"
#include "sim/base/units.h"
#include "sim/cli/plan_int.h"

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

const char *plan_op_text(PlanOp op) { return op == PLAN_LE ? "<=" : op == PLAN_LT ? "<" : op == PLAN_GE ? ">=" : ">"; }

/* a metric value in its display unit (ms, %, as is) */
double plan_shown(int unit, double v) { return unit == 1 ? v * 1e3 : unit == 2 ? v * 100 : v; }
const char *plan_unit_text(int unit) { return unit == 1 ? " ms" : unit == 2 ? " %" : ""; }

void plan_fmt_num(char *buf, size_t n, double v)
{
    double a = fabs(v);
    if (!isfinite(v)) snprintf(buf, n, "–");
    else if (a >= 100) snprintf(buf, n, "%.0f", v);
    else if (a >= 10) snprintf(buf, n, "%.1f", v);
    else if (a >= 0.01 || a == 0) snprintf(buf, n, "%.2f", v);
    else snprintf(buf, n, "%.3g", v);
}

/* "612 ± 20" in the target's display unit (no unit) */
void plan_fmt_stat(char *buf, size_t n, int unit, double mean, double ci, int n_seeds)
{
    char m[32], c[32];
    plan_fmt_num(m, sizeof m, plan_shown(unit, mean));
    if (n_seeds < 2 || !isfinite(ci)) {
        snprintf(buf, n, "%s", m);
        return;
    }
    double am = fabs(plan_shown(unit, mean));
    double cc = plan_shown(unit, ci);
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
    if (!value[0]) return kv_err(e, "--target: '%s': no value after %s", term, plan_op_text(t->op));
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
                          plan_op_text(t->op), value, value);
        if (kv_parse_duration(value, &ns, &pe) != 0) return kv_err(e, "--target: '%s': %s", term, pe.msg);
        t->limit = (double)ns / 1e9;
        snprintf(t->text, sizeof t->text, "%s%s%s", name, plan_op_text(t->op), value);
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
        snprintf(t->text, sizeof t->text, "%s%s%s", name, plan_op_text(t->op), value);
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
                return kv_err(e, "--target: '%s': %s %s is given twice", term, t[i].name, plan_op_text(t[i].op));
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

void plan_add_why(char *why, size_t cap, const char *fmt, ...)
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
            plan_add_why(ev->why, sizeof ev->why, "the run of seed %llu failed: %s", (unsigned long long)ev->s[s].seed, ev->s[s].error);
            failed = 1;
        }
        ev->n_overloaded += ev->s[s].overloaded != 0;
    }
    /* no metric from no measurement: a run that measured no request fails its point */
    for (int s = 0; s < n && !failed; s++)
        if (ev->s[s].unmeasured) {
            plan_add_why(ev->why, sizeof ev->why, "%s (seed %llu)", ev->s[s].absent[0] ? ev->s[s].absent : "no request was measured",
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
                plan_add_why(ev->why, sizeof ev->why, "%s has no value (seed %llu: %s)", t[i].name, (unsigned long long)ev->s[bad].seed,
                        ev->s[bad].absent);
            else plan_add_why(ev->why, sizeof ev->why, "%s has no value", t[i].name);
            failed = 1;
            continue;
        }
        double mean = x[0], hw = 0;
        KvErr e;
        if (n >= 2 && stats_mean_ci(x, (size_t)n, 0.95, &mean, &hw, &e) != 0) {
            plan_add_why(ev->why, sizeof ev->why, "%s: %s", t[i].name, e.msg);
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
        plan_fmt_stat(st, sizeof st, t[i].unit, mean, hw, n);
        plan_fmt_num(lim, sizeof lim, plan_shown(t[i].unit, L));
        if (fail) {
            static const char *const neg[] = {">", ">=", "<", "<="};
            plan_add_why(ev->why, sizeof ev->why, "%s %s%s %s %s%s", t[i].name, st, plan_unit_text(t[i].unit), neg[t[i].op], lim,
                    plan_unit_text(t[i].unit));
            failed = 1;
        } else if (!met) {
            plan_add_why(ev->why, sizeof ev->why, "%s %s%s straddles %s %s%s", t[i].name, st, plan_unit_text(t[i].unit),
                    plan_op_text(t[i].op), lim, plan_unit_text(t[i].unit));
            uncertain = 1;
        }
    }
    if (ev->n_overloaded == n) {
        if (n > 1) plan_add_why(ev->why, sizeof ev->why, "overloaded in every seed (%d of %d)", n, n);
        else plan_add_why(ev->why, sizeof ev->why, "overloaded (its one seed)");
        failed = 1;
    } else if (ev->n_overloaded > 0) {
        plan_add_why(ev->why, sizeof ev->why, "overloaded in %d of %d seeds", ev->n_overloaded, n);
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

int plan_failing(PlanVerdict v) { return v == PLAN_FAILED || v == PLAN_PRUNED; }

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
            if (plan_failing(c->st[chain[i]].v)) lo = i; /* known failures bound the bisection from below */
        if (lo == hi) break;
        if ((rc = visit(p, sp, c, chain[hi], 1, e)) != 0) break;
        if (plan_failing(c->st[chain[hi]].v)) break; /* the group's top fails: every member is pruned */
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if ((rc = visit(p, sp, c, chain[mid], 1, e)) != 0) break;
            if (plan_failing(c->st[chain[mid]].v)) lo = mid;
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
