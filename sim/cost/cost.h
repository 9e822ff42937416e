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
 * one-parameter ops.
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

/* A caller's memory of the grid segment its last lookup of one op fell in, per axis (start zeroed).
 * Lookups of nearby arguments then skip the search. Purely a speed hint: any value gives the same
 * result as cost_lookup_ns (bit for bit); one hint per op and caller (not shared between threads). */
typedef struct CostHint {
    int lo[COST_MAX_DIM];
} CostHint;
/* cost_lookup_ns with a hint (NULL: none); counts lookups and extrapolations the same way */
double cost_lookup_hint_ns(CostModel *cm, CostOp op, CostHint *h, int64_t p1, int64_t p2, int64_t p3);
/* the reference implementation (binary search and the generic corner loop), for tests: returns
 * exactly what cost_lookup_ns returns, and counts the same */
double cost_lookup_ref_ns(CostModel *cm, CostOp op, int64_t p1, int64_t p2, int64_t p3);
uint64_t cost_extrapolations_total(const CostModel *cm);

#endif
