/* plan_int.h — what the files of `kvsim plan` share among themselves (plan.c: targets, verdicts,
 * searches; plan_report.c: the report; plan_cmd.c: the command); not for use elsewhere.
 */
#ifndef KV_PLAN_INT_H
#define KV_PLAN_INT_H

#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/cli/plan.h"
#include "sim/cli/plan_cost.h"
#include "sim/engine/sweepspec.h"

/* the command's state: the space and policies the searches run over, and what the report shows */
typedef struct PlanCtx {
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
} PlanCtx;

/* ---- targets and verdicts (plan.c) */
const char *plan_op_text(PlanOp op);                   /* "<=", "<", ">=", ">" */
double plan_shown(int unit, double v);                 /* a metric value in its display unit (ms, %, as is) */
const char *plan_unit_text(int unit);                  /* " ms", " %", "" */
void plan_fmt_num(char *buf, size_t n, double v);      /* 3 significant figures or so; "–" when absent */
/* "612 ± 20" in the target's display unit (no unit) */
void plan_fmt_stat(char *buf, size_t n, int unit, double mean, double ci, int n_seeds);
/* append "; "-separated text to why (cap bytes) */
void plan_add_why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int plan_failing(PlanVerdict v);                       /* failed or pruned */

/* ---- evaluation (plan_cmd.c): the PlanEvalFn of the command (ctx: a PlanCtx) */
int plan_real_eval(void *ctx, const PlanJob *jobs, int n, PlanSample *out, KvErr *e);

/* ---- the report (plan_report.c) */
/* "n_ssd=2, gpu=H100-SXM": point q's axis values ("the configuration" without axes) */
void plan_axes_label(const SweepSpec *spec, cJSON *const *points, int q, char *buf, size_t n);
void plan_store_words(const PlanPoint *p, char *buf, size_t n);
/* the Planner's progress callback (ctx: a PlanCtx) */
void plan_progress_line(void *ctx, const Planner *p, const PlanEval *ev);
void plan_report_cheapest(FILE *f, cJSON *pj, const PlanCtx *x, const Planner *p, const PlanSpace *sp, const PlanCheapest *c,
                          int64_t runs);
void plan_report_max_load(FILE *f, cJSON *pj, const PlanCtx *x, const Planner *p, const PlanMaxLoad *m, double precision,
                          int64_t runs);
void plan_report_max_load_grid(FILE *f, cJSON *pj, const PlanCtx *x, const Planner *p, const PlanMaxLoad *ms, const int64_t *runs,
                               int policy, double precision, int64_t all_runs);
void plan_space_text(FILE *f, cJSON *pj, const SweepSpec *spec);
void plan_cost_line(FILE *f, cJSON *pj, const PlanCtx *x, const PlanPrices *pr, const PlanCosting *pc);
void plan_stores_line(FILE *f, const PlanPoint *info, int n);
void plan_points_json(cJSON *pj, cJSON **points, int n_points, const double *cost, const PlanPoint *info, const PlanPrices *pr,
                      const PlanCosting *pc);
void plan_points_table(FILE *f, const PlanCtx *x, const PlanPrices *pr, const PlanCosting *pc);

#endif
