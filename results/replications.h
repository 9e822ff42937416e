/* replications.h — N independent seeds of the same experiment summarised: every headline metric of
 * every policy as mean ± 95 % confidence interval over the seeds (Student t), and optionally each
 * policy's paired difference to a baseline policy.
 *
 * Responsible for: the headline metrics' per-seed values (the metric table's METRIC_REPL rows,
 * results/metric.h: table.md's columns and the restore throughput, in summary.json's units), mean,
 * CI half-width and n (the "replications" block of summary.json, less the
 * per-seed "policies" copies that report.c adds), paired differences (policy − baseline, seed by
 * seed: the same trace for both, common random numbers) marked significant only when the
 * interval excludes 0, and the Markdown tables "mean ± ci" and "Δ vs baseline".
 * Not responsible for: running the seeds (sim/cli/experiment.c), requests.csv, summary.json's
 * other blocks (report.c).
 * Invariants: output depends only on the results and their order (seeds ascending, policies in
 * command-line order); a metric that does not apply in some seed (restore/bound when nothing was
 * restored) has mean, ci95 and difference null (JSON) / "–" (Markdown), never a made-up number.
 * Complexity: O(policies × seeds × metrics); memory with runs: O(policies × seeds) scalars, one run's
 * histograms at a time (the caller reduces each run as it arrives).
 */
#ifndef KV_REPLICATIONS_H
#define KV_REPLICATIONS_H

#include <stdint.h>
#include <stdio.h>

#include "sim/engine/sim.h"

/* One policy's run under one seed reduced to what the tables and intervals read: a few scalars
 * (repl_run_reduce), so that the runs' histograms need not be kept for every seed. */
#define REPL_MAX_METRICS 32
#define REPL_MAX_PCT 8
typedef struct ReplRun {
    double v[REPL_MAX_METRICS];  /* repl_metric_value of each metric */
    int overloaded;              /* load.overloaded */
    int nothing;                 /* report_restored_nothing */
    uint64_t extrapolations;
    int64_t prefix_block_tokens;
    uint64_t prefix_named, prefix_hit_requests, prefix_hit_tokens;
    uint64_t prefix_tier_asked, prefix_tier_found[SIM_TIERS], prefix_tier_dedup[SIM_TIERS]; /* the tiers' block stores */
    char *load_warning;          /* report_load_warning's text when overloaded (malloc'd), else NULL */
    /* what compare's verdict reads of each run: every metric of the metric table (metric_at order,
     * malloc'd) and the TTFT, E2E and TBT percentiles asked for (seconds; NAN without a sample) */
    double *all;
    double q[3][REPL_MAX_PCT];
} ReplRun;
/* r reduced, with its TTFT, E2E and TBT at the n_pct percentiles pct (in percent). 0, or -1 with e
 * (out of memory; more metrics than REPL_MAX_METRICS; more percentiles than REPL_MAX_PCT). */
int repl_run_reduce(ReplRun *out, const SimResult *r, const double *pct, int n_pct, KvErr *e);
void repl_run_free(ReplRun *run);

typedef struct Replications {
    int n_seeds, n_policies;
    const uint64_t *seeds;  /* n_seeds, ascending */
    const SimResult *res;   /* [s * n_policies + p]: seed s, policy p; with runs, only the first seed's
                               n_policies results (the names, summary.json's "policies") */
    int baseline;           /* index of the baseline policy, or -1 */
    double level;           /* 0.95 */
    const ReplRun *runs;    /* NULL, or [s * n_policies + p] reduced: what the tables read instead of res */
    const char *per_seed_json; /* with runs: a file of every run's summary.json policy object in the same
                                  order (report_policy_json_spill), for "replications.per_seed" */
} Replications;

int repl_metric_count(void);
const char *repl_metric_key(int m);        /* JSON name: "ttft_mean_s" */
/* The metric of one run in JSON units; NAN when it does not apply. */
double repl_metric_value(const SimResult *r, int m);

typedef struct ReplStat {
    double mean, ci95; /* NAN when some seed has no value */
    int n;
    int significant;   /* differences: the interval excludes 0 */
} ReplStat;
/* mean ± ci of metric m of policy p over the seeds; diff 1: of (p − baseline) seed by seed; diff 2:
 * of baseline ÷ p seed by seed (significant: the interval excludes 1). */
int repl_stat(const Replications *r, int p, int m, int diff, ReplStat *out, KvErr *e);

/* {"seeds": [...], "level": 0.95, "method": ..., "metrics": {policy: {metric: {...}}},
 *  "paired_differences": {...} (with a baseline)}; NULL + e on failure. */
struct cJSON *repl_json(const Replications *r, KvErr *e);
/* The tables (title line, mean ± ci per policy; with a baseline, the differences). */
int repl_markdown(FILE *out, const SimWorld *w, const Replications *r, KvErr *e);
/* What repl_markdown writes under its tables: the overloaded policies (seeds and evidence), the
 * prefix cache, extrapolated cost lookups, the note when nothing was restored. */
void repl_footer(FILE *out, const Replications *r);

#endif
