/* calib_diff.h — stored calibration runs read back: the headline figures of one run (what kvcal
 * run prints at the end) and the comparison of two runs' medians (kvcal diff).
 *
 * Responsible for: calib_summary's text lines, the diff of every common point of two runs (per
 * curve: common points, points beyond the tolerance, the worst change, points in one run only),
 * parsing a tolerance ("5%", "0.05").
 * Not responsible for: measuring (calib_run.c), storage (store.c), printing (calibrate/cli).
 * Complexity: the diff sorts both runs' points, O(n log n); the summary is O(points × lookups).
 */
#ifndef KV_CALIB_DIFF_H
#define KV_CALIB_DIFF_H

#include <stdint.h>

#include "sim/base/ops.h"
#include "sim/catalog/model.h"
#include "sim/cost/store.h"

/* Headline figures of a stored run, as text lines: GEMM TFLOP/s by M (gemm_ffn_up), attention
 * TFLOP/s at a few shapes, decode attention GB/s, copy GB/s (h2d, d2h, largest size), SSD GB/s. */
int calib_summary(CostStore *st, int64_t run_id, const ModelSpec *m, char *buf, size_t len, KvErr *e);

/* ---- diff ---- */

typedef struct CalibDiffCurve {
    CostOp op;
    char model[64];
    char dtype[8];
    int tp;
    int64_t common, beyond, only_a, only_b;
    double worst_rel;           /* (b − a) / a of the point with the largest |change| (inf: a = 0 < b) */
    int64_t worst_p[3];
    double worst_a_ns, worst_b_ns;
} CalibDiffCurve;

typedef struct CalibDiff {
    CalibDiffCurve *curves;     /* every curve present in either run, sorted by op name, model, dtype, tp */
    int n_curves;
    int64_t common, beyond, only_a, only_b;
    int drifted;                /* curves with at least one point beyond the tolerance */
} CalibDiff;

/* Compare the medians of every common (op, model, dtype, tp, p1, p2, p3) point of two runs. A point
 * is beyond the tolerance when |b − a| > tolerance · a. */
int calib_diff(CostStore *st, int64_t run_a, int64_t run_b, double tolerance, CalibDiff *d, KvErr *e);
/* The same across two stores (two files: a committed cost model against a fresh one); the points
 * are matched by their key, so the run ids need not agree. */
int calib_diff_stores(CostStore *sa, int64_t run_a, CostStore *sb, int64_t run_b, double tolerance, CalibDiff *d, KvErr *e);
void calib_diff_free(CalibDiff *d);
/* "5%", "0.05" → 0.05; -1 with a message unless 0 <= value < 10 (1000 %). */
int calib_parse_tolerance(const char *s, double *out, KvErr *e);

#endif
