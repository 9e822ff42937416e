/* plan_report.c — `kvsim plan`'s report: the Markdown text and plan.json of an answer (the cheapest
 * configuration, the highest load, the grid of highest loads), the space, the prices and the points,
 * and the progress lines; see plan_int.h.
 *
 * How: every table and sentence is built from the Planner's evaluations and the PlanCtx the
 * command filled; the text is written once and printed / saved unchanged (plan_cmd.c).
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/base/units.h"
#include "sim/cli/plan.h"
#include "sim/cli/plan_cost.h"
#include "sim/cli/plan_int.h"
#include "sim/engine/sim.h"
#include "sim/engine/sweepspec.h"

/* "n_ssd=2, gpu=H100-SXM": point q's axis values */
void plan_axes_label(const SweepSpec *spec, cJSON *const *points, int q, char *buf, size_t n)
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

static void point_label(const PlanCtx *x, int q, char *buf, size_t n) { plan_axes_label(x->spec, x->points, q, buf, n); }

/* the store in words: "dram+remote (the remote store over 100G)", "dram+ssd (4× PM9A3)", "dram" */
void plan_store_words(const PlanPoint *p, char *buf, size_t n)
{
    char ssd[96] = "", nic[96] = "";
    if (plan_store_uses_ssd(p)) snprintf(ssd, sizeof ssd, "%d× %s", p->n_ssd, p->ssd);
    if (plan_store_uses_remote(p)) snprintf(nic, sizeof nic, "the remote store over %s%s", p->n_nics > 1 ? "NICs " : "", p->nic);
    if (ssd[0] || nic[0]) snprintf(buf, n, "%s (%s%s%s)", p->store, ssd, ssd[0] && nic[0] ? "; " : "", nic);
    else snprintf(buf, n, "%s", p->store);
}

void plan_progress_line(void *ctx, const Planner *p, const PlanEval *ev)
{
    const PlanCtx *x = ctx;
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
static void eval_detail(const PlanCtx *x, const PlanEval *ev, char *buf, size_t cap)
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
        plan_fmt_stat(st, sizeof st, t->unit, ev->mean[i], ev->ci95[i], ev->n_seeds);
        plan_fmt_num(lim, sizeof lim, plan_shown(t->unit, t->limit));
        plan_add_why(buf, cap, "%s %s%s%s against %s %s%s: %s", t->name, st, plan_unit_text(t->unit),
                ev->n_seeds > 1 ? " (mean ± 95 % CI)" : " (one seed)", plan_op_text(t->op), lim, plan_unit_text(t->unit), verdict);
    }
    plan_add_why(buf, cap, "overloaded in %d of %d seed%s%s", ev->n_overloaded, ev->n_seeds, ev->n_seeds == 1 ? "" : "s",
            ev->n_overloaded == ev->n_seeds && ev->n_seeds > 0 ? " (fails: arrivals outpace service, load.overloaded)" : "");
}

static void table_head(FILE *f, const PlanCtx *x, const char *first, int with_store, int with_cost)
{
    fprintf(f, "| %s |%s%s", first, with_store ? " store |" : "", with_cost ? " cost |" : "");
    for (int i = 0; i < x->nt; i++) fprintf(f, " %s%s |", x->t[i].name, plan_unit_text(x->t[i].unit));
    fprintf(f, " overloaded | seeds | verdict | why |\n|---|%s%s", with_store ? "---|" : "", with_cost ? "--:|" : "");
    for (int i = 0; i < x->nt; i++) fprintf(f, "--:|");
    fprintf(f, "--:|--:|---|---|\n");
}

static void eval_cells(FILE *f, const PlanCtx *x, const PlanEval *ev)
{
    for (int i = 0; i < x->nt; i++) {
        char st[64];
        plan_fmt_stat(st, sizeof st, x->t[i].unit, ev->mean[i], ev->ci95[i], ev->n_seeds);
        fprintf(f, " %s |", st);
    }
    fprintf(f, " %d/%d | %d | %s | %s |\n", ev->n_overloaded, ev->n_seeds, ev->n_seeds, plan_verdict_name(ev->verdict), ev->why);
}

static cJSON *eval_json(const PlanCtx *x, const PlanEval *ev)
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
static int never_changed(const PlanCtx *x, const Planner *p, const int *ev, int n, int with_values, char *note, size_t cap)
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
        plan_fmt_stat(st, sizeof st, x->t[t].unit, A->mean[t], A->ci95[t], A->n_seeds);
        kv_catf(note, cap, "%s%s %s%s", t ? ", " : "", x->t[t].name, st, plan_unit_text(x->t[t].unit));
    }
    kv_catf(note, cap, "%soverloaded in %d of %d seed%s)", x->nt ? "; " : "", A->n_overloaded, A->n_seeds, A->n_seeds == 1 ? "" : "s");
    return 1;
}

void plan_report_cheapest(FILE *f, cJSON *pj, const PlanCtx *x, const Planner *p, const PlanSpace *sp, const PlanCheapest *c,
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
            plan_fmt_stat(st, sizeof st, x->t[i].unit, ev->mean[i], ev->ci95[i], ev->n_seeds);
            fprintf(f, "%s%s %s%s", i ? ", " : "", x->t[i].name, st, plan_unit_text(x->t[i].unit));
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

void plan_report_max_load(FILE *f, cJSON *pj, const PlanCtx *x, const Planner *p, const PlanMaxLoad *m, double precision,
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
void plan_report_max_load_grid(FILE *f, cJSON *pj, const PlanCtx *x, const Planner *p, const PlanMaxLoad *ms, const int64_t *runs,
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
void plan_space_text(FILE *f, cJSON *pj, const SweepSpec *spec)
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
void plan_cost_line(FILE *f, cJSON *pj, const PlanCtx *x, const PlanPrices *pr, const PlanCosting *pc)
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
void plan_stores_line(FILE *f, const PlanPoint *info, int n)
{
    enum { MAX_K = 256 };
    int K = sim_store_count(); /* the resolved stores (every one but auto) */
    if (K > MAX_K) K = MAX_K;
    const char *names[MAX_K];
    int count[MAX_K] = {0}, kinds = 0;
    for (int k = 0; k < K; k++) names[k] = sim_store_name((SimStore)(k + 1));
    for (int q = 0; q < n; q++)
        for (int k = 0; k < K; k++)
            if (!info[q].invalid[0] && !strcmp(info[q].store, names[k])) kinds += count[k]++ == 0;
    if (kinds < 2) return;
    fprintf(f, "- stores (resolved per point; store auto is the SSDs if any, else the remote store over the NIC if any, else "
               "DRAM): ");
    for (int k = 0, shown_one = 0; k < K; k++)
        if (count[k]) {
            fprintf(f, "%s%s in %d point%s", shown_one ? ", " : "", names[k], count[k], count[k] == 1 ? "" : "s");
            shown_one = 1;
        }
    fprintf(f, "; points with different stores are never compared for pruning\n");
}

/* the points of the space into plan.json: settings, store, cost and priced parts (pr NULL: no --cost) */
void plan_points_json(cJSON *pj, cJSON **points, int n_points, const double *cost, const PlanPoint *info, const PlanPrices *pr,
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
void plan_points_table(FILE *f, const PlanCtx *x, const PlanPrices *pr, const PlanCosting *pc)
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
        plan_store_words(pi, store, sizeof store);
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
