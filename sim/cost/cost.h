/* cost.h — the simulator's view of a cost model: per op, a dense table over the op's shape
 * parameters, loaded once (from a SQLite store or straight from the spec generator) and queried on
 * the hot path.
 *
 * Reading rules (docs/model.md "The cost contract"):
 *  - Points of one op must form a full grid (every combination of the axis values); a hole is an
 *    error naming the op and the missing coordinates.
 *  - Values are made non-decreasing along every work axis (tokens, context, batch, bytes: a running
 *    maximum, more work never costs less; not queue depth or drive count, see ops.h);
 *    each value raised is counted in monotone_fixes and reported.
 *  - Between points: multilinear interpolation in the parameters' own scale (not log).
 *  - Outside the sampled range: linear extrapolation from the two edge points of that axis (an axis
 *    with one point is constant), clamped at >= 0; every lookup that extrapolates on any axis is
 *    counted per op, and results report the counts.
 * Complexity: lookup O(sum over axes of log n_axis) with no allocation; O(1) (no search) with a
 * CostHint whose remembered segment still brackets the argument, and a direct two-point sum for
 * one-parameter ops; along a CostLine (p1 fixed) one division and the corner sum per lookup.
 * Not responsible for: producing costs (spec.c, kvcal probes) or storing them (store.c).
 */
#ifndef KV_COST_H
#define KV_COST_H

#include <stddef.h>
#include <stdint.h>

#include "sim/base/ops.h"
#include "sim/base/util.h"

#define COST_MAX_DIM 3

typedef struct CostPoint {
    CostOp op;
    int64_t p[COST_MAX_DIM]; /* unused parameters are 0 */
    double median_ns;
} CostPoint;

typedef struct CostCurve {
    int present;
    int ndim;                     /* the op's parameter count */
    int n[COST_MAX_DIM];          /* axis lengths */
    int64_t *axis[COST_MAX_DIM];  /* sorted unique values */
    double *y;                    /* n[0]·n[1]·n[2] values, last axis fastest */
    int64_t run_id;               /* store run it came from (0 for in-memory spec) */
    char backend[16];
} CostCurve;

typedef struct CostModel {
    char device[128];
    char model[64];
    char dtype[8];
    int tp;
    char source[512];             /* "spec (in-memory) H100-SXM ..." or "costs.db run 3, 5" */
    CostCurve c[OP_COUNT];
    uint64_t lookups[OP_COUNT];
    uint64_t extrapolations[OP_COUNT];
    uint64_t monotone_fixes;
} CostModel;

void cost_model_init(CostModel *cm, const char *device, const char *model, const char *dtype, int tp);
/* Add the points of one op (replacing what that op had). Validates the grid. */
int cost_model_set_op(CostModel *cm, CostOp op, const CostPoint *pts, size_t n, int64_t run_id,
                      const char *backend, KvErr *e);
/* Load every op available for the key from a store file (store_pick_run per op). IO ops are looked
 * up with model '' and tp 1. Ops without points stay absent. Fails if no compute op is found for the model, with
 * a message listing the runs (devices, models) the store has. */
int cost_model_load_db(CostModel *cm, const char *db_path, const char *device, const char *model,
                       const char *dtype, int tp, KvErr *e);
void cost_model_free(CostModel *cm);

static inline int cost_has(const CostModel *cm, CostOp op) { return cm->c[op].present; }
/* Time in ns; p2/p3 ignored for ops with fewer parameters. The op must be present. */
double cost_lookup_ns(CostModel *cm, CostOp op, int64_t p1, int64_t p2, int64_t p3);
/* cost_lookup_ns's value for a probe of the curve itself (the engine reading a link's streaming
 * rate off its curve at setup), counted in neither lookups nor extrapolations: those count the
 * lookups of the simulated work, and a probe past the sampled range is no fault of the run's. */
double cost_probe_ns(CostModel *cm, CostOp op, int64_t p1, int64_t p2, int64_t p3);

/* A caller's memory of the grid segment its last lookup of one op fell in, per axis (start zeroed).
 * Lookups of nearby arguments then skip the search. Purely a speed hint: any value gives the same
 * result as cost_lookup_ns (bit for bit); one hint per op and caller (not shared between threads). */
typedef struct CostHint {
    int lo[COST_MAX_DIM];
} CostHint;
/* cost_lookup_ns with a hint (NULL: none); counts lookups and extrapolations the same way */
double cost_lookup_hint_ns(CostModel *cm, CostOp op, CostHint *h, int64_t p1, int64_t p2, int64_t p3);
/* The four corners of a two-parameter lookup in the grid cell at y (y[0] its lower corner, n1 the
 * second axis's length), with weights w0, w1 on axes with more than one point (m0, m1): the one sum
 * cost_lookup_hint_ns and CostLine both evaluate, so that they make the same floating-point
 * operations in the same order (corners added low to high, zero weights skipped, clamped at 0). */
static inline double cost_corners2(const double *y, size_t n1, int m0, int m1, double w0, double w1)
{
    double f00 = m0 ? 1 - w0 : 1, f10 = m1 ? 1 - w1 : 1;
    double sum = 0, wt = f00 * f10;
    if (wt != 0) sum += wt * y[0];
    if (m0 && (wt = w0 * f10) != 0) sum += wt * y[n1];
    if (m1 && (wt = f00 * w1) != 0) sum += wt * y[1];
    if (m0 && m1 && (wt = w0 * w1) != 0) sum += wt * y[n1 + 1];
    return sum > 0 ? sum : 0;
}

/* Lookups of one op along a line: p1 fixed, p2 moving (a decode run: the batch fixed, the context
 * growing each step). cost_line_ns(ln, p2) returns exactly cost_lookup_hint_ns(cm, op, h, p1, p2, 0)
 * — for a present two-parameter op by the same bracket arithmetic and cost_corners2 — but keeps the
 * first axis's bracket and the second axis's segment (the p2 range it holds for, its lower corner,
 * its extrapolation flag) between calls, so a call inside the segment costs one division and the
 * corner sum. Its lookups and extrapolations are counted in the line and added to the model's
 * counters by cost_line_end (which also leaves the hint at the last segment): nothing may read those
 * counters between cost_line_begin and cost_line_end. Other ops take cost_lookup_hint_ns per call
 * (their p2 range is empty, so every call goes to cost_line_slow_ns). The per-segment arithmetic
 * is exact because it is the lookup's own: p2 in [x_lo, x_hi] gives bracket() the same lower index
 * and extrapolation flag, and the weight (p2 − a1) / den1 is the expression bracket() evaluates. */
typedef struct CostLine {
    CostModel *cm;
    CostOp op;
    CostHint *h;
    int mode;                 /* 0: absent op (0 ns), 1: two-parameter op, 2: any other (generic lookup) */
    int64_t p1;
    int m0, m1, out0, out;    /* axes with more than one point; extrapolating on axis 0; on either */
    double w0, den1;          /* axis 0's weight; axis 1's segment width (m1) */
    int64_t a1;               /* the segment's lower axis value */
    int64_t x_lo, x_hi;       /* the p2 range (inclusive) the segment holds for */
    const double *row, *y;    /* axis 0's row of the grid (at its bracket); the segment's lower corner */
    size_t n1;
    uint64_t lookups, extrapolations;
    int fast;                 /* both axes with several points and the segment's four corners finite */
    double f00, c00, c10, c01, c11; /* then: 1 − w0 and the corners y[0], y[n1], y[1], y[n1 + 1] */
} CostLine;

void cost_line_begin(CostLine *ln, CostModel *cm, CostOp op, CostHint *h, int64_t p1);
/* a lookup outside the current segment's range (every lookup of modes 0 and 2: their range is empty) */
double cost_line_slow_ns(CostLine *ln, int64_t p2);
/* inside the segment: the bracket's weight on axis 1 and the corner sum (mode 1) */
static inline double cost_line_seg_ns(CostLine *ln, int64_t p2)
{
    ln->lookups++;
    ln->extrapolations += (uint64_t)ln->out;
    double w1 = ln->m1 ? (double)(p2 - ln->a1) / ln->den1 : 0; /* = bracket's weight on axis 1 */
    if (ln->fast) {
        /* cost_corners2 with m0 = m1 = 1 without its zero-weight tests: the same products added in
         * the same order; a skipped term is wt·y = ±0 (y finite), and x + ±0 = x for x ≠ 0, so the
         * partial sums agree but for the sign of a zero, which the clamp below maps to 0 either way */
        double f10 = 1 - w1;
        double sum = ln->f00 * f10 * ln->c00;
        sum += ln->w0 * f10 * ln->c10;
        sum += ln->f00 * w1 * ln->c01;
        sum += ln->w0 * w1 * ln->c11;
        return sum > 0 ? sum : 0;
    }
    return cost_corners2(ln->y, ln->n1, ln->m0, ln->m1, ln->w0, w1);
}
static inline double cost_line_ns(CostLine *ln, int64_t p2)
{
    if (p2 < ln->x_lo || p2 > ln->x_hi) return cost_line_slow_ns(ln, p2);
    return cost_line_seg_ns(ln, p2);
}
void cost_line_end(CostLine *ln);

/* the reference implementation (binary search and the generic corner loop), for tests: returns
 * exactly what cost_lookup_ns returns, and counts the same */
double cost_lookup_ref_ns(CostModel *cm, CostOp op, int64_t p1, int64_t p2, int64_t p3);
uint64_t cost_extrapolations_total(const CostModel *cm);

#endif
