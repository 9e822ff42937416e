/* plan.h — `kvsim plan`: capacity-planning answers with their evidence, per policy:
 *  (a) the cheapest configuration of a space (--vary lists, priced by a --cost file) that meets
 *      every target of an SLO (--target "ttft_p99<=500ms,tbt_p99<=60ms"), and
 *  (b) the highest sustainable load (--max-load): bracket and bisect on the arrival rate; with
 *      --vary, one such search per configuration of the space (independent: each is the search
 *      --max-load runs alone on that configuration), reported as a table.
 * Replications decide (docs/planning.md): a point runs --seeds seeds; a target "ttft_p99<=500ms"
 * is met when the upper end of the metric's 95 % interval is within the limit, failed when the
 * lower end is past it, uncertain otherwise — then more seeds run, up to --max-seeds. A point
 * also fails when every seed's run is overloaded (sim.h SimLoad.overloaded); some but not all
 * overloaded is uncertain. Uncertain never counts as met. No metric from no measurement: a run that
 * measured no request, or a target metric with no sample behind it, fails its point with the reason.
 *
 * Responsible for: target expressions, the verdict of one point (plan_judge), the two searches
 * over an evaluator callback (so they are unit-tested without simulating: tests/test_plan.c), the
 * command (the space from sim/engine/sweepspec, each point resolved with its store, the real
 * evaluator: one simulation per (point, policy, seed) through sim/cli/point.c's settings, in worker
 * processes with -j, their temporary directory removed on SIGINT/SIGTERM and by the next plan after
 * a SIGKILL), the Markdown report (stdout, plan.md) and plan.json, written as a result set
 * (results/resultset), and --dry-run. Files: plan.c (targets, verdicts, the searches),
 * plan_report.c (the report), plan_cmd.c (the command, the evaluator, interruption); plan_int.h is
 * what they share.
 * Not responsible for: what a run computes (engine), the metric definitions and the target names
 * (results/metric.c), the spec syntax (sweepspec.c), prices (plan_cost.c).
 *
 * Search (a), per policy. Exact rule: points are visited in increasing cost (ties: enumeration
 * order); the first that meets every target is the answer, and no costlier point is evaluated.
 * Monotonicity (pruning, off with --no-prune): on the axes named by --monotone (default n_ssd and
 * dram: more SSDs or more DRAM never make a point fail that passed), a point Q is "dominated" by P
 * when Q has the same value as P on every other axis, the same resolved store (PlanSpace.store: with
 * no SSD the store switches to the remote one, and fewer SSDs can be faster) and at most P's amount
 * on every monotone axis; when P fails, Q is taken to fail without running (pruned). When a point of
 * the walk fails, its group (the points sharing its non-monotone values and its store) is probed once: along each monotone axis,
 * with the other monotone axes at their maximum, the search bisects for the least amount that
 * does not fail (the group's top first: if it fails, the whole group is pruned); everything below
 * is pruned. A group whose cheapest point passes is never probed. With --no-prune nothing is
 * assumed beyond the cost order.
 * Search (b): the verdict is assumed monotone in the load (a higher rate never turns a failing
 * point into a passing one): from --load-start (default the configuration's rate), doubling or
 * halving until the verdict changes, then bisection until (hi − lo) / lo <= --precision. The
 * answer is lo (met), the limit lies in [lo, hi) (hi failed or stayed uncertain).
 * Invariants: results depend only on the inputs (seeds fixed: seed_base, seed_base + 1, ...;
 * every point runs the same seeds: common random numbers), never on -j or timing; every
 * (point, policy, seed) is simulated at most once.
 * Complexity: a search costs its evaluations (each seeds × one simulation); the bookkeeping is
 * O(points² × axes) for pruning, O(points log points) for the order.
 */
#ifndef KV_PLAN_H
#define KV_PLAN_H

#include <stdint.h>

#include "sim/base/util.h"

#define PLAN_MAX_TARGETS 8

typedef enum { PLAN_LE, PLAN_LT, PLAN_GE, PLAN_GT } PlanOp;

typedef struct PlanTarget {
    char name[64];   /* as written: "ttft_p99" */
    char metric[64]; /* the point metric (results/metric.h): "ttft_s.p99" */
    PlanOp op;
    double limit;    /* in the metric's units (seconds for times, a share for slo_attainment) */
    int unit;        /* 0 plain, 1 time (shown in ms), 2 share (shown in %) */
    char text[128];  /* the term, normalised: "ttft_p99<=500 ms" */
} PlanTarget;

/* "ttft_p99<=500ms,tbt_p99<=60ms": terms METRIC OP VALUE joined by ',' (OP <=, <, >=, >; a time
 * metric takes a duration with its unit, slo_attainment a share 0.9 or 90%). At most max terms. */
int plan_targets_parse(const char *text, PlanTarget *t, int max, int *n, KvErr *e);
/* The target names accepted (a comma-separated list for messages and --help). */
const char *plan_target_names(void);

typedef enum {
    PLAN_UNKNOWN = 0, /* not looked at */
    PLAN_MET,
    PLAN_FAILED,
    PLAN_UNCERTAIN,   /* an interval straddles a limit (or some seeds overloaded) after --max-seeds */
    PLAN_PRUNED,      /* not run: dominated by a failing point (monotonicity) */
    PLAN_SKIPPED,     /* not run: costs at least as much as the answer */
    PLAN_INVALID      /* not runnable: its settings were refused (the model does not fit, ...) */
} PlanVerdict;
const char *plan_verdict_name(PlanVerdict v);

/* One replication's outcome: each target's metric value and the overload flag, or a failed run.
 * Absent is not zero: a value with no measurement behind it (an empty histogram) is NAN, and a run
 * that measured no request at all fails its point, whatever its values say. */
typedef struct PlanSample {
    double v[PLAN_MAX_TARGETS]; /* NAN: absent (nothing measured behind it; `absent` says why) */
    int overloaded;
    int unmeasured;    /* 1: the run measured no request (the point fails; `absent` says why) */
    char error[200];   /* "" or why the run failed (the point fails) */
    char absent[200];  /* "" or why values are absent: "no request was measured: warm-up 100 >= requests 50" */
    uint64_t seed;     /* set by the planner */
} PlanSample;

/* What the evaluator runs: point (search a) or load (search b; point -1), one policy, one seed. */
typedef struct PlanJob {
    int point;
    int policy;
    double load;
    uint64_t seed;
} PlanJob;
/* Run n jobs, fill out[0..n). -1 and e stops the search (a run that fails is a sample with error). */
typedef int (*PlanEvalFn)(void *ctx, const PlanJob *jobs, int n, PlanSample *out, KvErr *e);

/* One evaluated (point or load, policy): its samples and verdict. */
typedef struct PlanEval {
    int point, policy;
    double load;
    int n_seeds;
    PlanSample *s;
    PlanVerdict verdict;
    double mean[PLAN_MAX_TARGETS], ci95[PLAN_MAX_TARGETS]; /* NAN when a seed has no value */
    int n_overloaded;
    char why[400]; /* "ttft_p99 612 ± 20 ms > 500 ms; ..." (failed, uncertain), or "" */
} PlanEval;

/* The verdict of n samples (n >= 1; with one sample the interval is the value itself). */
void plan_judge(const PlanTarget *t, int nt, PlanEval *ev);

typedef struct Planner {
    const PlanTarget *t;
    int nt;
    int seeds, max_seeds;  /* 1 <= seeds <= max_seeds */
    uint64_t seed_base;
    PlanEvalFn eval;
    void *ctx;
    /* bookkeeping, owned */
    PlanEval *evals;       /* in evaluation order */
    int n_evals, cap;
    int64_t runs;          /* simulations asked of the evaluator */
    void (*progress)(void *ctx, const struct Planner *p, const PlanEval *ev); /* after each evaluation, or NULL */
    void *progress_ctx;
} Planner;

void plan_free(Planner *p);
/* Evaluate (point or load, policy) with escalation: seeds, then more (doubling, up to max_seeds)
 * while uncertain. Returns the index into p->evals, or -1 and e. */
int plan_evaluate(Planner *p, int point, int policy, double load, KvErr *e);

/* The space of search (a). */
typedef struct PlanSpace {
    int n_points, n_axes;
    const int *coord;     /* [q * n_axes + a]: the index of point q's value on axis a */
    const double *cost;   /* per point; NAN: invalid (not runnable) */
    const int *monotone;  /* per axis: 1 when more of it never makes a passing point fail */
    const double *amount; /* [q * n_axes + a]: the amount on monotone axis a at q */
    int prune;            /* use monotonicity */
    const int *store;     /* per point: its resolved store (an id), or NULL: one store for all. Points whose
                             stores differ are never compared: with no SSD the store switches to the remote
                             one, so fewer SSDs can be faster, and monotonicity holds only within a store */
} PlanSpace;

typedef struct PlanPointState {
    PlanVerdict v;
    int eval;   /* index into Planner.evals, or -1 */
    int by;     /* PLAN_PRUNED: the failing point that dominates it */
    int probe;  /* evaluated as a probe (before the cost walk) */
} PlanPointState;

typedef struct PlanCheapest {
    int policy;
    int answer;          /* point, or -1: none meets every target */
    PlanPointState *st;  /* n_points, owned */
    int evaluated, pruned, skipped, probes;
    int *order;          /* the points in cost order (n_points), owned */
} PlanCheapest;

void plan_cheapest_free(PlanCheapest *c);
/* Search (a) for one policy (see the header comment). */
int plan_cheapest(Planner *p, const PlanSpace *sp, int policy, PlanCheapest *out, KvErr *e);
/* Does point q have at most point r's amounts on every monotone axis, the same values elsewhere and
 * the same resolved store? */
int plan_dominated(const PlanSpace *sp, int q, int r);

typedef struct PlanMaxLoad {
    int point;           /* the configuration searched (a point of the space), or -1: the only one */
    int policy;
    double lo, hi;       /* lo: highest load met (0: none found); hi: lowest not met (NAN: none found) */
    int n_steps;
    int *evals;          /* the evaluations of this search, in order (indices into Planner.evals), owned */
    int n_evals;
    int limited;         /* 1: bracketing stopped at the search's bounds */
} PlanMaxLoad;

void plan_max_load_free(PlanMaxLoad *m);
/* Search (b) for one policy from load start (> 0) to relative precision (> 0), loads within
 * [min_load, max_load]. */
int plan_max_load(Planner *p, int policy, double start, double precision, double min_load, double max_load, PlanMaxLoad *out,
                  KvErr *e);
/* The same search on point `point` of a space (--max-load with --vary: one search per point and
 * policy, each the search --max-load runs alone on that point's settings). */
int plan_max_load_at(Planner *p, int point, int policy, double start, double precision, double min_load, double max_load,
                     PlanMaxLoad *out, KvErr *e);

/* `kvsim plan ARGS` (argv[0] is "plan"): the exit status (0 answered, 1 failure, 2 usage). */
int plan_main(int argc, char **argv);

#endif
