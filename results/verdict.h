/* verdict.h — the answer of a comparison at a glance: which policy wins on one headline metric and
 * by how much, which it cannot be told apart from, which runs were overloaded, and a compact table;
 * compare prints them before (or instead of) the full tables and writes them to verdict.md.
 *
 * Responsible for: the verdict lines (winner, its ratio to the baseline with the paired interval
 * over seeds, the policies within that interval of the winner, overloaded policies, references,
 * where the full tables are), the compact table (policy, TTFT at the chosen percentiles, E2E and
 * TBT at the highest, SLO %, restore/bound; ablations and variants under the policy they change,
 * policies identical to an earlier one in every metric folded into a note), parsing --metric and
 * --percentiles.
 * Not responsible for: the full tables and their footers (report.c, replications.c), running.
 * Invariants: a reference (policies/policy.h PR_REFERENCE) never wins; an overloaded policy wins only
 * when every contender is overloaded (and the verdict says so); a single run says it has no
 * interval instead of calling a difference significant; output depends only on the results.
 * Complexity: O(policies² × seeds × metrics) for the identity test; the rest O(policies × seeds).
 */
#ifndef KV_VERDICT_H
#define KV_VERDICT_H

#include <stdint.h>
#include <stdio.h>

#include "results/metric.h"
#include "results/replications.h"
#include "sim/engine/sim.h"

#define VERDICT_MAX_PCT 8

typedef struct Verdict {
    const SimResult *res;   /* [s * np + p]: seed s, policy p */
    int n_seeds;            /* 1: a single run (no interval) */
    int np;
    int baseline;           /* index of the baseline policy; -1: the first */
    const Metric *metric;   /* the headline metric */
    double pct[VERDICT_MAX_PCT]; /* the compact table's percentiles, in percent, ascending */
    int n_pct;
    double level;           /* 0.95 */
    const char *out;        /* the result directory (where the full tables are) */
    int full;               /* the full tables follow the verdict (compare --table full) */
    const ReplRun *runs;    /* NULL, or [s * np + p] reduced (res then holds the first seed's only), with
                               its TTFT, E2E and TBT at pct */
} Verdict;

/* --metric NAME: a row of the metric table with a value per run (not a flag); NULL + e otherwise. */
const Metric *verdict_metric(const char *name, KvErr *e);
/* --percentiles "50,90,99,99.9": 1..VERDICT_MAX_PCT values in (0, 100), ascending, no repeats. */
int verdict_percentiles(const char *list, double *pct, int *n, KvErr *e);
/* The verdict lines, a title line naming the experiment first. */
int verdict_write(FILE *out, const SimWorld *w, const Verdict *v, KvErr *e);
/* The compact table (a blank line and the experiment's line first), then its notes (folded
 * policies, the overload mark). */
int verdict_table(FILE *out, const SimWorld *w, const Verdict *v, KvErr *e);
/* 1 when policy q's results equal policy p's in every metric of every seed */
int verdict_identical(const Verdict *v, int p, int q);

#endif
