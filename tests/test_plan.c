/* test_plan.c — kvsim plan without simulating: target expressions (accepted forms, refusals naming
 * the term), the verdict of a point from its samples (interval within / past / straddling the
 * limit; overload), and both searches driven by a synthetic evaluator whose truth is known: the
 * cheapest point found in cost order, pruning sound under monotonicity and switchable, each
 * (point, seed) run at most once, more seeds only while uncertain, and the load search bracketing
 * a known threshold to the asked precision. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cli/plan.h"
#include "sim/cli/plan_cost.h"
#include "tests/harness.h"

TEST(plan_targets_parse_forms)
{
    PlanTarget tg[PLAN_MAX_TARGETS];
    int n = 0;
    KvErr e;
    CHECK_MSG(plan_targets_parse("ttft_p99<=500ms, tbt_p99 < 0.06 s,slo_attainment>=90%,requests_per_s>2", tg, PLAN_MAX_TARGETS,
                                 &n, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(n, 4);
    CHECK_STR(tg[0].metric, "ttft_s.p99");
    CHECK(tg[0].op == PLAN_LE);
    CHECK_NEAR(tg[0].limit, 0.5, 1e-12, 0);
    CHECK_EQ_I(tg[0].unit, 1);
    CHECK_STR(tg[1].metric, "tbt_s.p99");
    CHECK(tg[1].op == PLAN_LT);
    CHECK_NEAR(tg[1].limit, 0.06, 1e-12, 0);
    CHECK(tg[2].op == PLAN_GE);
    CHECK_NEAR(tg[2].limit, 0.9, 1e-12, 0);
    CHECK_EQ_I(tg[2].unit, 2);
    CHECK(tg[3].op == PLAN_GT);
    CHECK_NEAR(tg[3].limit, 2, 1e-12, 0);
    /* a metric of the sweep CSV by its own name */
    CHECK_MSG(plan_targets_parse("by_history_class.long.ttft_s.p99<=2s", tg, PLAN_MAX_TARGETS, &n, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(n, 1);
    CHECK_EQ_I(tg[0].unit, 1);
    CHECK_NEAR(tg[0].limit, 2, 1e-12, 0);
}

TEST(plan_targets_parse_refusals)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"ttft_p99=500ms", "'ttft_p99=500ms': unknown comparison"},
        {"ttft_p99<<500ms", "unknown comparison"},
        {"ttfp_p99<=500ms", "unknown metric 'ttfp_p99' (known: ttft_mean"},
        {"ttft_p99<=500", "is a time: give its unit"},
        {"ttft_p99<=500 parsecs", "'ttft_p99<=500 parsecs'"},
        {"ttft_p99<=", "no value after <="},
        {"<=500ms", "expected METRIC<=VALUE"},
        {"ttft_p99<=500ms,", "an empty term"},
        {"slo_attainment>=120%", "a share in [0, 1]"},
        {"requests_per_s>=5%", "is not a share"},
        {"requests_per_s>=fast", "expected a number, got 'fast'"},
        {"ttft_p99<=1s,ttft_p99<=2s", "given twice"},
        {"", "empty"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        PlanTarget tg[PLAN_MAX_TARGETS];
        int n = 0;
        KvErr e = {{0}};
        CHECK_MSG(plan_targets_parse(cases[i].text, tg, PLAN_MAX_TARGETS, &n, &e) == -1, "accepted: %s", cases[i].text);
        CHECK_CONTAINS(e.msg, cases[i].want);
    }
    PlanTarget tg[2];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=1s,tbt_p99<=1s,ttft_p50<=1s", tg, 2, &n, &e) == -1);
    CHECK_CONTAINS(e.msg, "at most 2 targets");
}

static PlanEval judged(const PlanTarget *tg, int nt, const double *v, const int *ovl, int n)
{
    static PlanSample s[16];
    PlanEval ev;
    memset(&ev, 0, sizeof ev);
    memset(s, 0, sizeof s);
    for (int i = 0; i < n; i++) {
        s[i].v[0] = v[i];
        s[i].overloaded = ovl ? ovl[i] : 0;
    }
    ev.s = s;
    ev.n_seeds = n;
    plan_judge(tg, nt, &ev);
    return ev;
}

TEST(plan_judge_interval_decides)
{
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=500ms", tg, 1, &n, &e) == 0);
    double lowv[] = {0.40, 0.41, 0.42}, highv[] = {0.60, 0.61, 0.62}, wide[] = {0.30, 0.50, 0.70};
    PlanEval ev = judged(tg, 1, lowv, NULL, 3);
    CHECK_EQ_I(ev.verdict, PLAN_MET);
    CHECK_NEAR(ev.mean[0], 0.41, 1e-9, 0);
    CHECK(ev.ci95[0] > 0);
    ev = judged(tg, 1, highv, NULL, 3);
    CHECK_EQ_I(ev.verdict, PLAN_FAILED);
    CHECK_CONTAINS(ev.why, "ttft_p99 610 ± ");
    CHECK_CONTAINS(ev.why, "ms > 500 ms");
    ev = judged(tg, 1, wide, NULL, 3); /* mean 500 ms, interval straddling */
    CHECK_EQ_I(ev.verdict, PLAN_UNCERTAIN);
    CHECK_CONTAINS(ev.why, "straddles <= 500 ms");
    /* one sample: no interval, the value decides */
    double one[] = {0.499};
    CHECK_EQ_I(judged(tg, 1, one, NULL, 1).verdict, PLAN_MET);
    /* >= : the lower end must hold */
    CHECK(plan_targets_parse("slo_attainment>=0.9", tg, 1, &n, &e) == 0);
    double good[] = {0.95, 0.96, 0.95}, bad[] = {0.5, 0.6, 0.55};
    CHECK_EQ_I(judged(tg, 1, good, NULL, 3).verdict, PLAN_MET);
    CHECK_EQ_I(judged(tg, 1, bad, NULL, 3).verdict, PLAN_FAILED);
    /* overload: in every seed fails; in some is uncertain, whatever the targets say */
    CHECK(plan_targets_parse("ttft_p99<=500ms", tg, 1, &n, &e) == 0);
    int all[] = {1, 1, 1}, some[] = {0, 1, 0};
    ev = judged(tg, 1, lowv, all, 3);
    CHECK_EQ_I(ev.verdict, PLAN_FAILED);
    CHECK_CONTAINS(ev.why, "overloaded in every seed (3 of 3)");
    ev = judged(tg, 1, lowv, some, 3);
    CHECK_EQ_I(ev.verdict, PLAN_UNCERTAIN);
    CHECK_CONTAINS(ev.why, "overloaded in 1 of 3 seeds");
    /* a value that is not finite fails, naming the target */
    double nanv[] = {0.4, NAN, 0.4};
    ev = judged(tg, 1, nanv, NULL, 3);
    CHECK_EQ_I(ev.verdict, PLAN_FAILED);
    CHECK_CONTAINS(ev.why, "ttft_p99 has no value");
}

/* ---- a synthetic space: n_ssd in {1, 2, 4, 8} (monotone) × gpu in {A, B}; gpu B costs more.
 * Truth: ttft_p99 = base(gpu) / n_ssd seconds (+ a small seed wobble); met when <= 0.5 s. */

#define NS 4
#define NG 2
#define NP (NS * NG)

typedef struct Synth {
    int calls[NP][64]; /* runs per (point, seed) */
    double base[NG];
    int non_monotone;  /* point (n_ssd=2, gpu A) passes although n_ssd=4 and 8 fail */
    double noise;
    int64_t total;
} Synth;

static const int k_ssd[NS] = {1, 2, 4, 8};

static int synth_eval(void *ctx, const PlanJob *jobs, int n, PlanSample *out, KvErr *e)
{
    Synth *s = ctx;
    for (int i = 0; i < n; i++) {
        const PlanJob *j = &jobs[i];
        if (j->point < 0 || j->point >= NP || j->seed >= 64) return kv_err(e, "bad job");
        s->calls[j->point][j->seed]++;
        s->total++;
        int si = j->point / NG, g = j->point % NG;
        double v = s->base[g] / k_ssd[si];
        if (s->non_monotone && g == 0) v = si == 1 ? 0.3 : 0.9;
        v += s->noise * ((double)(j->seed % 3) - 1);
        memset(&out[i], 0, sizeof out[i]);
        out[i].v[0] = v;
    }
    return 0;
}

typedef struct SynthSpace {
    int coord[NP * 2];
    double cost[NP], amount[NP * 2];
    int mono[2];
} SynthSpace;

static void synth_space(SynthSpace *ss, PlanSpace *sp, int prune)
{
    for (int q = 0; q < NP; q++) {
        int si = q / NG, g = q % NG;
        ss->coord[q * 2] = si;
        ss->coord[q * 2 + 1] = g;
        ss->amount[q * 2] = k_ssd[si];
        ss->amount[q * 2 + 1] = 0;
        ss->cost[q] = (g ? 30000 : 10000) + 500.0 * k_ssd[si];
    }
    ss->mono[0] = 1;
    ss->mono[1] = 0;
    *sp = (PlanSpace){NP, 2, ss->coord, ss->cost, ss->mono, ss->amount, prune, NULL};
}

static void planner_init(Planner *p, const PlanTarget *tg, Synth *s, int seeds, int max_seeds)
{
    memset(p, 0, sizeof *p);
    p->t = tg;
    p->nt = 1;
    p->seeds = seeds;
    p->max_seeds = max_seeds;
    p->seed_base = 1;
    p->eval = synth_eval;
    p->ctx = s;
}

TEST(plan_cheapest_in_cost_order_with_pruning)
{
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=500ms", tg, 1, &n, &e) == 0);
    for (int prune = 0; prune <= 1; prune++) {
        Synth s;
        memset(&s, 0, sizeof s);
        s.base[0] = 3.0; /* gpu A: needs 8 SSDs (3/8 = 0.375) */
        s.base[1] = 1.5; /* gpu B: needs 4 (0.375) */
        s.noise = 0.001;
        SynthSpace ss;
        PlanSpace sp;
        synth_space(&ss, &sp, prune);
        Planner p;
        planner_init(&p, tg, &s, 3, 3);
        PlanCheapest c;
        CHECK_MSG(plan_cheapest(&p, &sp, 0, &c, &e) == 0, "%s", e.msg);
        /* the cheapest passing point: gpu A with 8 SSDs (14,000) beats gpu B with 4 (32,000) */
        CHECK_EQ_I(c.answer, 3 * NG + 0);
        /* nothing costlier than the answer ran; every (point, seed) at most once */
        for (int q = 0; q < NP; q++) {
            for (int sd = 0; sd < 64; sd++) CHECK(s.calls[q][sd] <= 1);
            if (ss.cost[q] > ss.cost[c.answer]) CHECK_EQ_I(s.calls[q][1], 0);
        }
        if (prune) {
            /* the first failure (n_ssd=1, A) probes its group: the top (8, A) passes; bisection from
             * the known failure tries 2, then 4 (both fail): nothing left to prune, same count */
            CHECK_EQ_I(c.evaluated, 4);
            CHECK(c.probes >= 1);
        } else {
            CHECK_EQ_I(c.pruned, 0);
            CHECK_EQ_I(c.evaluated, 4); /* 1, 2, 4, 8 SSDs of gpu A, in cost order */
        }
        /* every pruned point really fails (the evaluator is monotone) */
        for (int q = 0; q < NP; q++)
            if (c.st[q].v == PLAN_PRUNED) CHECK(s.base[q % NG] / k_ssd[q / NG] > 0.5);
        CHECK_EQ_I(c.evaluated + c.pruned + c.skipped, NP);
        plan_cheapest_free(&c);
        plan_free(&p);
    }
}

TEST(plan_pruning_saves_runs)
{
    /* gpu A never passes, gpu B needs 4 SSDs. Without pruning: A's 4 points and B's 1, 2, 4 = 7.
     * With it: A's first failure probes A's top (fails: the group is pruned), B's first failure
     * probes B's top (8 passes), then 2 (fails), then 4 (passes): 6 evaluations, the same answer */
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=500ms", tg, 1, &n, &e) == 0);
    int evaluated[2], answer[2];
    for (int prune = 0; prune <= 1; prune++) {
        Synth s;
        memset(&s, 0, sizeof s);
        s.base[0] = 100;
        s.base[1] = 1.5;
        SynthSpace ss;
        PlanSpace sp;
        synth_space(&ss, &sp, prune);
        Planner p;
        planner_init(&p, tg, &s, 2, 2);
        PlanCheapest c;
        CHECK(plan_cheapest(&p, &sp, 0, &c, &e) == 0);
        evaluated[prune] = c.evaluated;
        answer[prune] = c.answer;
        if (prune) {
            CHECK_EQ_I(c.st[1 * NG + 0].v, PLAN_PRUNED); /* (2, A) below A's failing top */
            CHECK_EQ_I(c.st[1 * NG + 0].by, 3 * NG + 0);
            CHECK_EQ_I(c.st[0 * NG + 1].v, PLAN_FAILED);
        }
        plan_cheapest_free(&c);
        plan_free(&p);
    }
    CHECK_EQ_I(answer[0], 2 * NG + 1);
    CHECK_EQ_I(answer[1], 2 * NG + 1);
    CHECK_EQ_I(evaluated[0], 7);
    CHECK_EQ_I(evaluated[1], 6);
}

TEST(plan_cheapest_whole_group_pruned_and_none)
{
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=500ms", tg, 1, &n, &e) == 0);
    Synth s;
    memset(&s, 0, sizeof s);
    s.base[0] = 100; /* gpu A never passes */
    s.base[1] = 100; /* nor B */
    SynthSpace ss;
    PlanSpace sp;
    synth_space(&ss, &sp, 1);
    Planner p;
    planner_init(&p, tg, &s, 2, 2);
    PlanCheapest c;
    CHECK(plan_cheapest(&p, &sp, 0, &c, &e) == 0);
    CHECK_EQ_I(c.answer, -1);
    /* per group: the cheapest fails, the top fails, the rest are pruned: 2 evaluations per group */
    CHECK_EQ_I(c.evaluated, 4);
    CHECK_EQ_I(c.pruned, 4);
    plan_cheapest_free(&c);
    plan_free(&p);
}

TEST(plan_no_prune_when_monotonicity_is_false)
{
    /* gpu A passes with 2 SSDs only (a made-up non-monotone response); with pruning, the failure of 4
     * SSDs prunes 2 and the search answers gpu A with... nothing cheaper: --no-prune finds 2 */
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=500ms", tg, 1, &n, &e) == 0);
    int answers[2];
    for (int prune = 0; prune <= 1; prune++) {
        Synth s;
        memset(&s, 0, sizeof s);
        s.base[1] = 100;
        s.non_monotone = 1;
        SynthSpace ss;
        PlanSpace sp;
        synth_space(&ss, &sp, prune);
        Planner p;
        planner_init(&p, tg, &s, 1, 1);
        PlanCheapest c;
        CHECK(plan_cheapest(&p, &sp, 0, &c, &e) == 0);
        answers[prune] = c.answer;
        plan_cheapest_free(&c);
        plan_free(&p);
    }
    CHECK_EQ_I(answers[0], 1 * NG + 0);
    CHECK(answers[1] != 1 * NG + 0); /* the assumption was wrong, and it shows */
}

TEST(plan_more_seeds_only_while_uncertain)
{
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=500ms", tg, 1, &n, &e) == 0);
    Synth s;
    memset(&s, 0, sizeof s);
    s.base[0] = 0.49 * 8; /* n_ssd=8, gpu A: 0.49 ± 0.05: uncertain with 3 seeds, settled by more */
    s.base[1] = 0.1;
    s.noise = 0.05;
    Planner p;
    planner_init(&p, tg, &s, 3, 12);
    int i = plan_evaluate(&p, 3 * NG + 0, 0, NAN, &e);
    CHECK(i >= 0);
    CHECK(p.evals[i].n_seeds > 3);
    CHECK(p.evals[i].n_seeds <= 12);
    for (int sd = 1; sd <= 12; sd++) CHECK(s.calls[3 * NG][sd] <= 1);
    int j = plan_evaluate(&p, 3 * NG + 1, 0, NAN, &e); /* clear: 3 seeds only */
    CHECK(j >= 0);
    CHECK_EQ_I(p.evals[j].n_seeds, 3);
    CHECK_EQ_I(p.evals[j].verdict, PLAN_MET);
    CHECK_EQ_I(plan_evaluate(&p, 3 * NG + 1, 0, NAN, &e), j); /* memoised */
    CHECK_EQ_I((int)p.runs, p.evals[i].n_seeds + 3);
    plan_free(&p);
}

/* ---- the load search: TTFT grows without bound past a threshold load */

typedef struct LoadSynth {
    double limit;
    int calls;
} LoadSynth;

static int load_eval(void *ctx, const PlanJob *jobs, int n, PlanSample *out, KvErr *e)
{
    LoadSynth *s = ctx;
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        double x = jobs[i].load / s->limit;
        out[i].v[0] = x < 1 ? 0.1 / (1 - x) : 1e3;
        out[i].overloaded = x >= 1;
        s->calls++;
    }
    return 0;
}

TEST(plan_max_load_brackets_and_bisects)
{
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=1s", tg, 1, &n, &e) == 0); /* met while load < 0.9 × limit */
    const double starts[] = {0.05, 1, 40};
    for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
        LoadSynth s = {3.7, 0};
        Planner p;
        memset(&p, 0, sizeof p);
        p.t = tg;
        p.nt = 1;
        p.seeds = p.max_seeds = 2;
        p.seed_base = 1;
        p.eval = load_eval;
        p.ctx = &s;
        PlanMaxLoad m;
        CHECK_MSG(plan_max_load(&p, 0, starts[k], 0.02, 1e-6, 1e6, &m, &e) == 0, "%s", e.msg);
        double truth = 0.9 * 3.7;
        CHECK_MSG(m.lo <= truth && truth <= m.hi, "start %g: [%g, %g) vs %g", starts[k], m.lo, m.hi, truth);
        CHECK((m.hi - m.lo) / m.lo <= 0.02);
        CHECK_EQ_I(s.calls, 2 * m.n_evals);
        CHECK(m.n_evals < 20);
        plan_max_load_free(&m);
        plan_free(&p);
    }
    /* nothing sustainable: halving stops at the lower bound */
    LoadSynth s = {1e-9, 0};
    Planner p;
    memset(&p, 0, sizeof p);
    p.t = tg;
    p.nt = 1;
    p.seeds = p.max_seeds = 1;
    p.eval = load_eval;
    p.ctx = &s;
    PlanMaxLoad m;
    CHECK(plan_max_load(&p, 0, 1, 0.05, 1e-3, 1e6, &m, &e) == 0);
    CHECK(m.lo == 0);
    CHECK(m.limited);
    plan_max_load_free(&m);
    plan_free(&p);
}

/* --max-load over a space: each point's search is its own (the evaluator sees the point), the
 * same loads and answer as the search alone; one point's evaluations are not reused for another */
typedef struct PointLoadSynth {
    double limit[3];
    int calls[3];
} PointLoadSynth;

static int point_load_eval(void *ctx, const PlanJob *jobs, int n, PlanSample *out, KvErr *e)
{
    PointLoadSynth *s = ctx;
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        if (jobs[i].point < 0 || jobs[i].point > 2) return kv_err(e, "point %d out of range", jobs[i].point);
        double x = jobs[i].load / s->limit[jobs[i].point];
        out[i].v[0] = x < 1 ? 0.1 / (1 - x) : 1e3;
        out[i].overloaded = x >= 1;
        s->calls[jobs[i].point]++;
    }
    return 0;
}

TEST(plan_max_load_at_searches_each_point_on_its_own)
{
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=1s", tg, 1, &n, &e) == 0);
    PointLoadSynth s = {{2.0, 8.0, 2.0}, {0, 0, 0}};
    Planner p;
    memset(&p, 0, sizeof p);
    p.t = tg;
    p.nt = 1;
    p.seeds = p.max_seeds = 2;
    p.seed_base = 1;
    p.eval = point_load_eval;
    p.ctx = &s;
    PlanMaxLoad m[3];
    for (int q = 0; q < 3; q++) {
        CHECK_MSG(plan_max_load_at(&p, q, 0, 1, 0.05, 1e-6, 1e6, &m[q], &e) == 0, "%s", e.msg);
        CHECK_EQ_I(m[q].point, q);
        double truth = 0.9 * s.limit[q];
        CHECK_MSG(m[q].lo <= truth && truth <= m[q].hi, "point %d: [%g, %g) vs %g", q, m[q].lo, m[q].hi, truth);
        for (int i = 0; i < m[q].n_evals; i++) CHECK_EQ_I(p.evals[m[q].evals[i]].point, q);
        CHECK_EQ_I(s.calls[q], 2 * m[q].n_evals); /* nothing borrowed from another point */
    }
    /* points 0 and 2 are alike: the same loads, the same answer */
    CHECK_EQ_I(m[0].n_evals, m[2].n_evals);
    CHECK(m[0].lo == m[2].lo && m[0].hi == m[2].hi);
    CHECK(m[1].lo > m[0].lo);
    /* and the same as the search on one configuration (point -1 is the only one) */
    Planner p1 = p;
    p1.evals = NULL;
    p1.n_evals = p1.cap = 0;
    PointLoadSynth s1 = {{2.0, 2.0, 2.0}, {0, 0, 0}};
    p1.ctx = &s1;
    PlanMaxLoad m1;
    CHECK(plan_max_load_at(&p1, 0, 0, 1, 0.05, 1e-6, 1e6, &m1, &e) == 0);
    CHECK(m1.lo == m[0].lo && m1.hi == m[0].hi && m1.n_evals == m[0].n_evals);
    plan_max_load_free(&m1);
    plan_free(&p1);
    for (int q = 0; q < 3; q++) plan_max_load_free(&m[q]);
    plan_free(&p);
}

/* ---- the resolved store: with no SSD the store switches to the remote one over the NIC, so fewer
 * SSDs can be faster. A space n_ssd {0, 1, 2, 4} × dram {4, 16} (both monotone); the truth: n_ssd 0
 * (the remote store) passes with 16 GB of DRAM, n_ssd 1 never passes, 2 and 4 always do; n_ssd 0
 * is the cheapest. Pruning across the stores (store NULL) lets the failure of (1, 16) prune the
 * passing (0, 16); with the stores given, the two are never compared and the cheapest passing point
 * is found, the same as --no-prune's. */

#define SS_N 8
static const int k_ss_ssd[4] = {0, 1, 2, 4};

static int store_eval(void *ctx, const PlanJob *jobs, int n, PlanSample *out, KvErr *e)
{
    int *calls = ctx;
    for (int i = 0; i < n; i++) {
        int q = jobs[i].point;
        if (q < 0 || q >= SS_N) return kv_err(e, "bad job");
        calls[q]++;
        int si = q / 2, big = q % 2;
        double v = si == 0 ? (big ? 0.3 : 0.6) : si == 1 ? 0.9 : 0.2;
        memset(&out[i], 0, sizeof out[i]);
        out[i].v[0] = v;
    }
    return 0;
}

TEST(plan_prune_never_across_stores)
{
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=500ms", tg, 1, &n, &e) == 0);
    int coord[SS_N * 2], mono[2] = {1, 1}, store[SS_N];
    double cost[SS_N], amount[SS_N * 2];
    for (int q = 0; q < SS_N; q++) {
        int si = q / 2, big = q % 2;
        coord[q * 2] = si, coord[q * 2 + 1] = big;
        amount[q * 2] = k_ss_ssd[si], amount[q * 2 + 1] = big ? 16e9 : 4e9;
        cost[q] = 100 + 10.0 * k_ss_ssd[si] + big;
        store[q] = si == 0; /* 1: dram+remote, 0: dram+ssd */
    }
    int answers[3];
    for (int mode = 0; mode < 3; mode++) { /* 0: --no-prune, 1: pruning across stores (no store ids), 2: per store */
        int calls[SS_N] = {0};
        PlanSpace sp = {SS_N, 2, coord, cost, mono, amount, mode > 0, mode == 2 ? store : NULL};
        Planner p;
        memset(&p, 0, sizeof p);
        p.t = tg;
        p.nt = 1;
        p.seeds = p.max_seeds = 1;
        p.seed_base = 1;
        p.eval = store_eval;
        p.ctx = calls;
        PlanCheapest c;
        CHECK_MSG(plan_cheapest(&p, &sp, 0, &c, &e) == 0, "%s", e.msg);
        answers[mode] = c.answer;
        if (mode == 2) {
            /* (1, 16) failed, but the point with no SSD and 16 GB is never taken to fail because of it */
            CHECK(!plan_dominated(&sp, 1, 3));
            for (int q = 0; q < SS_N; q++)
                if (c.st[q].v == PLAN_PRUNED) CHECK_EQ_I(store[q], store[c.st[q].by]);
        }
        plan_cheapest_free(&c);
        plan_free(&p);
    }
    CHECK_EQ_I(answers[0], 1);          /* the truth: n_ssd 0, dram 16 */
    CHECK_MSG(answers[1] != 1, "%d", answers[1]); /* the broken assumption shows without the stores */
    CHECK_EQ_I(answers[2], 1);
}

/* ---- no metric from no measurement: a run that measured no request fails its point with the
 * reason, whatever value stands for its metrics (0 from an empty histogram, or NAN) */
TEST(plan_judge_no_request_measured_fails)
{
    PlanTarget tg[1];
    int n;
    KvErr e;
    CHECK(plan_targets_parse("ttft_p99<=500ms", tg, 1, &n, &e) == 0);
    PlanSample s[2];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 2; i++) {
        s[i].v[0] = 0; /* what an empty histogram read as */
        s[i].unmeasured = 1;
        s[i].seed = 7 + (uint64_t)i;
        snprintf(s[i].absent, sizeof s[i].absent, "no request was measured: warm-up 100 >= requests 50");
    }
    PlanEval ev;
    memset(&ev, 0, sizeof ev);
    ev.s = s;
    ev.n_seeds = 2;
    plan_judge(tg, 1, &ev);
    CHECK_EQ_I(ev.verdict, PLAN_FAILED);
    CHECK_CONTAINS(ev.why, "no request was measured: warm-up 100 >= requests 50 (seed 7)");
    CHECK(!isfinite(ev.mean[0]));
    /* a target metric that is absent (NAN) fails, and says why */
    s[0].unmeasured = s[1].unmeasured = 0;
    s[0].v[0] = 0.1;
    s[1].v[0] = NAN;
    snprintf(s[1].absent, sizeof s[1].absent, "ttft_s.p99: no sample was measured");
    plan_judge(tg, 1, &ev);
    CHECK_EQ_I(ev.verdict, PLAN_FAILED);
    CHECK_CONTAINS(ev.why, "ttft_p99 has no value (seed 8: ttft_s.p99: no sample was measured)");
}

/* ---- prices: every part a point's store uses is priced, the others are not, and a store part with
 * no price refuses the space naming the point and the part */
static PlanPoint pt_of(const char *store, int n_ssd, const char *nic, uint64_t dram)
{
    PlanPoint p;
    memset(&p, 0, sizeof p);
    snprintf(p.gpu, sizeof p.gpu, "A100-40GB");
    snprintf(p.ssd, sizeof p.ssd, "PM9A3");
    snprintf(p.nic, sizeof p.nic, "%s", nic);
    snprintf(p.link, sizeof p.link, "pcie4");
    snprintf(p.platform, sizeof p.platform, "box");
    snprintf(p.store, sizeof p.store, "%s", store);
    p.n_gpus = 2;
    p.n_ssd = n_ssd;
    p.n_nics = strcmp(nic, "none") ? 1 : 0;
    p.replicas = 2;
    p.dram_bytes = dram;
    return p;
}

TEST(plan_prices_every_resource_the_store_uses)
{
    const char *full = test_write_file(t, "prices.json",
                                       "{\"gpu\": {\"A100-40GB\": 8000}, \"ssd\": {\"PM9A3\": 750}, \"nic\": {\"100G\": 900},"
                                       " \"dram_per_gb\": 4, \"remote_store\": 3700, \"host_link\": {\"pcie4\": 0},"
                                       " \"platform\": {\"box\": 12000}}");
    PlanPrices pr;
    KvErr e;
    CHECK_MSG(plan_prices_load(&pr, full, &e) == 0, "%s", e.msg);
    PlanPoint pt[3] = {pt_of("dram+remote", 0, "100G", 16000000000ull), pt_of("dram+ssd", 2, "100G", 16000000000ull),
                       pt_of("dram", 0, "none", 16000000000ull)};
    double cost[3];
    PlanCosting pc;
    CHECK_MSG(plan_price_points(&pr, pt, 3, NULL, cost, &pc, &e) == 0, "%s", e.msg);
    /* per replica: 2 GPUs 16,000 + DRAM 64 + platform 12,000 = 28,064; then the store's own parts */
    CHECK_NEAR(cost[0], 2 * (28064 + 900 + 3700), 1e-9, 0); /* the NIC and the remote store */
    CHECK_NEAR(cost[1], 2 * (28064 + 1500), 1e-9, 0);       /* the SSDs; the NIC it does not use is not priced */
    CHECK_NEAR(cost[2], 2 * 28064, 1e-9, 0);
    char text[1400];
    plan_parts_text(&pr, &pc, &pt[0], text, sizeof text);
    CHECK_CONTAINS(text, "NIC 1× 100G 900 + remote store 3,700");
    plan_parts_text(&pr, &pc, &pt[1], text, sizeof text);
    CHECK_CONTAINS(text, "not used by the store dram+ssd, not priced: 1× NIC 100G");
    CHECK_CONTAINS(text, "(× 2 replicas)");
    plan_prices_free(&pr);
    /* no remote_store price: the point whose store uses it is refused, by name */
    const char *no_remote = test_write_file(t, "noremote.json",
                                            "{\"gpu\": {\"A100-40GB\": 8000}, \"ssd\": {\"PM9A3\": 750}, \"nic\": {\"100G\": 900},"
                                            " \"dram_per_gb\": 4, \"host_link\": {\"pcie4\": 0}, \"platform\": {\"box\": 12000}}");
    CHECK_MSG(plan_prices_load(&pr, no_remote, &e) == 0, "%s", e.msg);
    const char *labels[3] = {"point 1 (n_ssd=0)", "point 2 (n_ssd=2)", "point 3"};
    CHECK(plan_price_points(&pr, pt, 3, labels, cost, &pc, &e) == -1);
    CHECK_CONTAINS(e.msg, "no price for the remote store (remote_store), which point 1 (n_ssd=0) uses (its store is dram+remote)");
    /* without that point, nothing needs it */
    CHECK_MSG(plan_price_points(&pr, pt + 1, 2, labels + 1, cost, &pc, &e) == 0, "%s", e.msg);
    plan_prices_free(&pr);
    /* a NIC without a price, used by the remote store: refused too */
    const char *no_nic = test_write_file(t, "nonic.json",
                                         "{\"gpu\": {\"A100-40GB\": 8000}, \"dram_per_gb\": 4, \"remote_store\": 0,"
                                         " \"host_link\": {\"pcie4\": 0}, \"platform\": {\"box\": 12000}}");
    CHECK_MSG(plan_prices_load(&pr, no_nic, &e) == 0, "%s", e.msg);
    CHECK(plan_price_points(&pr, pt, 1, labels, cost, &pc, &e) == -1);
    CHECK_CONTAINS(e.msg, "no price for nic '100G', which point 1 (n_ssd=0) uses");
    plan_prices_free(&pr);
    /* unknown keys are still refused */
    const char *bad = test_write_file(t, "bad.json", "{\"remote\": 1}");
    CHECK(plan_prices_load(&pr, bad, &e) == -1);
    CHECK_CONTAINS(e.msg, "unknown key \"remote\"");
    plan_prices_free(&pr);
}
