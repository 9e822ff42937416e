/* calib_plan.h — what a measured calibration run (calib_run.h) measures, and what it will cost.
 *
 * Responsible for:
 *  - the plan: per op of ops.h, the axes of its grid (every combination is measured, because the
 *    cost reader requires full grids; unused parameters are a single 0) and its timing rules;
 *    default plans per backend (cpu, cuda) and mode (quick, full), with the CPU caps below;
 *  - the estimate of a plan's duration from the spec backend (spec_op_ns) before measuring,
 *    simulating the run's timing rules (below) with the recipes' kernel counts (calib_recipe.h).
 * Not responsible for: measuring (calib_run.c), the recipes (calib_recipe.c), storage (store.c).
 *
 * Timing: cold cache (CUDA: a 256 MiB memset, untimed) before every repetition of the GEMM,
 * attention and layer ops; hot for the elementwise ops (in a layer they read the previous kernel's
 * output). A point's warm-up is skipped when the previous point of the same op took more than
 * CALIB_SKIP_WARMUP_NS per repetition (kernels, threads and buffers are warm; a warm-up would only
 * double the cost). An op's time budget (op_budget_ns) is shared out over its remaining points: a
 * point gets budget = remaining / points left, and stops after fewer repetitions when it runs out.
 * CPU caps (the CPU is ~1000× slower than a GPU; the reader extrapolates linearly beyond the last
 * point and counts it): full — GEMM tokens ≤ 2048, elementwise tokens ≤ 16384, attention new ≤ 1024
 * over context ≤ 16384, decode batch ≤ 256 over total context ≤ 65536, layer new ≤ 1024 over context
 * ≤ 16384, copies ≤ 256 MiB; quick — GEMM tokens {1, 64, 512}, attention {1, 64, 256} × {0, 1K, 4K},
 * decode {1, 8, 32} × {1K, 8K, 32K}, layer {1, 64} × {0, 1K}, elementwise {1, 64, 512, 4096}.
 * The layer's axes are subsets of the GEMM/elementwise and attention axes in every default plan, so
 * calib_summary can set the measured layer against the sum of its measured parts.
 * Invariants: axes are ascending and distinct; an enabled op has at least one point.
 * Complexity: the estimate is O(points) with no device.
 */
#ifndef KV_CALIB_PLAN_H
#define KV_CALIB_PLAN_H

#include <stdint.h>

#include "sim/base/ops.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/cost/spec.h"
#include "calibrate/timing.h"

#define CALIB_MAX_AXIS 32
#define CALIB_SKIP_WARMUP_NS 100000000LL /* 100 ms */

typedef struct CalibAxis {
    int n;
    int64_t v[CALIB_MAX_AXIS]; /* ascending, distinct */
} CalibAxis;

typedef struct CalibOpPlan {
    int enabled;
    CalibAxis ax[3];       /* per parameter; parameters the op does not use: {0} */
    TimingCfg timing;      /* per point (clock and stop are set by the run) */
    int64_t op_budget_ns;  /* 0: none */
    int cold_cache;        /* flush the device cache before every repetition */
} CalibOpPlan;

typedef struct CalibPlan {
    CalibOpPlan op[OP_COUNT];
    char caps[160];        /* one line for the run notes ("cpu caps: ...") */
} CalibPlan;

/* The default plan of a backend ("cpu" | "cuda") and mode. SSD ops are enabled here; the run
 * drops them when no scratch directory is given. Fails on an unknown backend. */
int calib_plan_default(CalibPlan *p, const char *backend, int quick, KvErr *e);
/* The "small" point set (kvcal run --points small) added to a plan: GEMM and elementwise tokens
 * {2, 4, 8, 16, 32, 128, 256}, attention new tokens {16, 32, 128, 512} and contexts {256, 512}, decode
 * batches {2, 3, 4} and total contexts {128, 256, 512, 2048} — the shapes of small iterations (a short
 * prefill, a few decode sequences) that the quick grid would interpolate across 1..64 tokens, and a
 * full 512-token chunk's attention and decode steps over 128 keys, which it would extrapolate (a
 * causal attention grows as the square of its new tokens: a line from 256 puts 512 too low); SSD
 * reads of 64, 128, 256 and 512 KiB (one layer's saved state of a short history: what a restoration
 * reads, which a line from 1 MiB would extrapolate). Values merge into the enabled ops' axes (sorted, distinct, capped at CALIB_MAX_AXIS). */
int calib_plan_add_small(CalibPlan *p, KvErr *e);
/* The remote store's NIC (kvcal run --net loopback): net points at 64 KiB to 1 MiB (one layer's KV or
 * hidden states of a small model's history, as a restoration fetches them) and 16 MiB, each a fetch
 * from a server process over TCP on the loopback interface (probe.h ProbeNet). */
int calib_plan_add_net(CalibPlan *p, KvErr *e);
/* An empty plan (nothing enabled); set an op with calib_plan_set. */
void calib_plan_clear(CalibPlan *p);
/* Enable op with the given axes (n values each, ascending; NULL/0 for unused parameters) and
 * timing. Fails when the axes do not fit (count, order, a non-zero unused parameter). */
int calib_plan_set(CalibPlan *p, CostOp op, const int64_t *a1, int n1, const int64_t *a2, int n2, const int64_t *a3,
                   int n3, const TimingCfg *timing, int64_t op_budget_ns, KvErr *e);
/* Number of grid points of one op (0 when disabled) and of the plan. */
int64_t calib_plan_op_points(const CalibPlan *p, CostOp op);
int64_t calib_plan_points(const CalibPlan *p);

/* What the plan will cost: points, timed repetitions (each one timed region), kernel launches in
 * timed regions, warm-up iterations, and the expected duration, simulating the timing rules with
 * spec_op_ns as the kernel time plus per-repetition overheads (event sync, cache flush) and
 * per-op setup. `in` must have ly and gpu; link/ssd NULL use generic PCIe 5 / NVMe figures. */
typedef struct CalibEstimate {
    int64_t points, reps, launches, warmups;
    double seconds;
    double op_seconds[OP_COUNT];
} CalibEstimate;
void calib_estimate(const CalibPlan *p, const SpecInputs *in, int cuda, CalibEstimate *est);
#define CALIB_EST_SYNC_NS 15000.0 /* the estimate's event record + stream sync + launch, per repetition */

/* The spec inputs of the estimate: layout ly on GPU gpu_key (else H200, else the first GPU) and its
 * host link. */
void calib_spec_inputs(SpecInputs *in, const HwCatalog *hw, const ModelLayout *ly, const char *gpu_key);

#endif
