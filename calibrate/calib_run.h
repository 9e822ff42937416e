/* calib_run.h — a measured calibration run (kvcal run): measure a plan (calib_plan.h) on this
 * machine with the op recipes (calib_recipe.h) and store it as one run.
 *
 * Responsible for:
 *  - the run: open the backend, write one store run (one transaction) with its metadata, stop
 *    cleanly (rollback) on an error or an interrupt flag checked between points and repetitions;
 *    IO ops: h2d/d2h/_bidir, ssd_read/ssd_write (probe.h); not measured (one device): allreduce,
 *    allgather, net — noted in the run;
 *  - mapping a reported GPU name to the hardware catalog's key (so kvsim --platform finds it).
 * Not responsible for: plans and estimates (calib_plan.c), recipes (calib_recipe.c), kernels
 * (kernels/), timing statistics (timing.c), storage (store.c), reading runs back (calib_diff.h),
 * the command line (calibrate/cli/calib_cmds.c). Never prints.
 * Invariants: a run in the store is complete or absent; every op present has a full grid.
 * Complexity: a run is O(points × repetitions) kernel launches; buffers are allocated once per op
 * at the op's largest point and reused by its other points.
 */
#ifndef KV_CALIB_RUN_H
#define KV_CALIB_RUN_H

#include <signal.h>
#include <stdint.h>

#include "calibrate/calib_plan.h"
#include "calibrate/probe.h"
#include "sim/catalog/hw.h"
#include "sim/catalog/model.h"
#include "sim/base/ops.h"
#include "sim/cost/store.h"
#include "calibrate/timing.h"

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
    int64_t cold_weights_bytes;  /* > 0: GEMM and layer ops rotate over copies of their weights, enough
                                  * that one rotation exceeds this many bytes (kvcal run --cold-weights:
                                  * 3 x the LLC), so weights come from memory as in a model's layer
                                  * sequence; 0: one copy (the default recipe, hot in cache) */
    int in_sequence;             /* cpu: time qkv, o, ffn_up, ffn_down, norm, act, rope and both
                                  * attentions inside a layer sequence (calib_recipe.h "In-sequence
                                  * timing"; kvcal run --in-sequence), rotating over layer copies
                                  * beyond cold_weights_bytes (0: 3 x the LLC); the other compute
                                  * ops, and elementwise points past the GEMMs' largest token
                                  * count (a layer there would cost more than the plan's GEMMs),
                                  * as without it */
    int io_beside_compute;       /* cpu: time the link and SSD points while another thread runs layers
                                  * (calib_run.c "IO beside compute"; kvcal run --io-beside-compute): the
                                  * IO as it runs beside a replay's compute thread on the same CPUs and
                                  * memory (kvcal execute), not alone; the calling thread is pinned to
                                  * the last CPU meanwhile when there are >= 2, as the replay's IO threads */
} CalibOptions;

typedef struct CalibResult {
    int64_t run_id;
    int64_t points;
    double wall_s;
    CalibEstimate estimate;      /* of the plan, before measuring (cuda: the device; cpu: zeros) */
    StoreRunMeta meta;           /* as stored */
    char warnings[1024];         /* probes skipped and why (e.g. scratch unusable), "" when none */
    int64_t beside_layers;       /* io_beside_compute: layers the compute thread ran while the IO was timed */
} CalibResult;

/* Measure the plan and store it as one run. On failure (including "no CUDA device: ...",
 * "interrupted", a probe's error) the store holds no trace of the run. */
int calib_run(CostStore *st, const CalibOptions *o, CalibResult *r, KvErr *e);

/* The hardware catalog's key for a reported device name ("NVIDIA H200" → "H200",
 * "NVIDIA H100 80GB HBM3" → "H100-SXM", "NVIDIA A100-SXM4-40GB" → "A100-40GB"); the reported name
 * itself when no catalogued GPU matches. Returns 1 when mapped, 0 otherwise. */
int calib_device_key(const HwCatalog *hw, const char *reported, char *out, size_t len);

#endif
