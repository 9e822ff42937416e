/* calib_run.h — a measured calibration run (kvcal run) and the comparison of two runs (kvcal diff).
 *
 * Responsible for:
 *  - the plan: per op of ops.h, the axes of its grid (every combination is measured, because the
 *    cost reader requires full grids; unused parameters are a single 0) and its timing rules;
 *    default plans per backend (cpu, cuda) and mode (quick, full), with the CPU caps below;
 *  - the recipe of each op: which kernels of probe.h run, at which per-GPU shapes
 *    (model_gemm_shape with the layout's TP; attention with h/T query heads and the KV heads one
 *    GPU holds), and which buffers they use;
 *  - the run: open the backend, write one store run (one transaction) with its metadata, stop
 *    cleanly (rollback) on an error or an interrupt flag checked between points and repetitions;
 *  - the estimate of a plan's duration from the spec backend (spec_op_ns) before measuring;
 *  - mapping a reported GPU name to the hardware catalog's key (so kvsim --platform finds it);
 *  - the diff of two runs' medians, and the two CLI commands (kvcal_cmd_run, kvcal_cmd_diff), the
 *    only functions here that print (CLI code, called by kvcal_main.c).
 * Not responsible for: kernels (kernels/), timing statistics (timing.c), storage (store.c).
 *
 * Op recipes (one layer, per GPU; tokens t, new tokens n, context c, batch b, total context C):
 *   gemm_qkv/o/ffn_up/ffn_down/kv_proj  GEMM (M×N×K from model_gemm_shape). MoE ffn_up: router GEMM
 *       (t×E×D) + shared experts at M = t + the experts t tokens touch on average,
 *       round(E·(1−(1−k/E)^t)), each at the per-expert M of model_gemm_shape, distinct weights per
 *       expert; ffn_down the same without the router. kv_proj adds RoPE on the K rows.
 *   attn_prefill  flash attention of n new tokens over c + n keys (h/T query heads, KV heads/GPU).
 *   attn_decode   b sequences sharing C keys evenly (cu_seqlens-style offsets), one query each.
 *   layer_prefill norm → qkv → RoPE(Q,K) → attention → o → norm → ffn_up → act → ffn_down (+ the
 *       model's extra norms), back to back in one timed region: the sum of the parts, measured.
 *   norm (one RMSNorm/LayerNorm of t×D), act (gated activation of the FFN width; MoE: t·(k+shared)
 *       rows; plain-FFN models are timed with the gated kernel over I/2 pairs), rope (Q and K of t
 *       tokens; skipped for learned positions), quant/dequant (int8, per token per KV head, the K
 *       and V of t tokens), h2d/d2h/_bidir, ssd_read/ssd_write (probe.h).
 *   Not measured (one device): allreduce, allgather, net — noted in the run.
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
 * Invariants: a run in the store is complete or absent; every op present has a full grid.
 */
#ifndef KV_CALIB_RUN_H
#define KV_CALIB_RUN_H

#include <signal.h>
#include <stdint.h>

#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/base/ops.h"
#include "calibrate/probe.h"
#include "sim/cost/spec.h"
#include "sim/cost/store.h"
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

/* Progress events: START once before measuring (device and estimate known), POINT after every
 * point, OP_DONE at the end of each op. */
typedef enum CalibEvent { CALIB_EV_START = 0, CALIB_EV_POINT, CALIB_EV_OP_DONE } CalibEvent;
typedef struct CalibProgress {
    CalibEvent ev;
    CostOp op;
    int64_t p1, p2, p3;
    int64_t index, total;           /* points done in the run, points planned */
    int64_t op_points;              /* points of this op (OP_DONE) */
    double op_seconds;              /* wall time of this op so far */
    const TimingStats *st;          /* the point's statistics (POINT) */
    const char *device;             /* the device name stored (START) */
    const CalibEstimate *estimate;  /* the plan's estimate (START; zeros on cpu) */
} CalibProgress;
typedef void (*CalibProgressFn)(void *ctx, const CalibProgress *pr);

typedef struct CalibOptions {
    const char *backend;         /* "cpu" | "cuda" */
    const ModelSpec *model;
    KvDtype dtype;               /* fp16 or bf16 (the cpu computes in fp32 and keeps this label) */
    int tp;                      /* >= 1: per-GPU shapes of a TP group, timed on one device */
    int quick;
    const char *device_name;     /* NULL/"": cuda → catalog key of the reported name, cpu → "cpu" */
    const char *scratch;         /* SSD scratch directories, comma-separated; NULL/"": no SSD probes */
    int cuda_device;
    const CalibPlan *plan;       /* NULL: calib_plan_default(backend, quick) */
    const HwCatalog *hw;         /* for device names and the estimate; NULL: loaded (embedded) */
    volatile sig_atomic_t *stop; /* non-zero: stop at the next point or repetition, roll back */
    CalibProgressFn progress;
    void *progress_ctx;
    int64_t fail_after_points;   /* tests: fail (and roll back) after this many points; 0: never */
    int ssd_threads;             /* use the threads engine for the SSD probes */
} CalibOptions;

typedef struct CalibResult {
    int64_t run_id;
    int64_t points;
    double wall_s;
    CalibEstimate estimate;      /* of the plan, before measuring (cuda: the device; cpu: zeros) */
    StoreRunMeta meta;           /* as stored */
    char warnings[1024];         /* probes skipped and why (e.g. scratch unusable), "" when none */
} CalibResult;

/* Measure the plan and store it as one run. On failure (including "no CUDA device: ...",
 * "interrupted", a probe's error) the store holds no trace of the run. */
int calib_run(CostStore *st, const CalibOptions *o, CalibResult *r, KvErr *e);

/* The hardware catalog's key for a reported device name ("NVIDIA H200" → "H200",
 * "NVIDIA H100 80GB HBM3" → "H100-SXM", "NVIDIA A100-SXM4-40GB" → "A100-40GB"); the reported name
 * itself when no catalogued GPU matches. Returns 1 when mapped, 0 otherwise. */
int calib_device_key(const HwCatalog *hw, const char *reported, char *out, size_t len);

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
void calib_diff_free(CalibDiff *d);
/* "5%", "0.05" → 0.05; -1 with a message unless 0 <= value < 10 (1000 %). */
int calib_parse_tolerance(const char *s, double *out, KvErr *e);

/* ---- CLI (print; return the exit code). argv[0] is the command name ("run", "diff"). ----
 *   kvcal run --backend cpu|cuda --model M --db FILE [--quick] [--tp N] [--dtype fp16|bf16]
 *             [--device-name NAME] [--scratch DIR[,DIR...]] [--device N] [--dry-run]
 *       0 done, 1 failure (no CUDA device, probe error), 2 usage error, 130 interrupted (SIGINT or
 *       SIGTERM; the run is rolled back).
 *   kvcal diff --db FILE RUN_A RUN_B [--tolerance 5%]
 *       0 no drift, 1 drift beyond the tolerance, 2 usage error or runs that cannot be read. */
int kvcal_cmd_run(int argc, char **argv);
int kvcal_cmd_diff(int argc, char **argv);

#endif
