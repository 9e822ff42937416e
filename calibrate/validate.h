/* validate.h — rung 3 of the validation ladder (docs/model.md "How the numbers are checked"): run
 * an actual restoration of a small slice of a model on this CPU and set its measured time against
 * what the cpu cost model predicts.
 *
 * Responsible for:
 *  - building K layers of a dense model's real per-layer shapes (model_gemm_shape, tp 1) with
 *    random fp32 weights (one layer's weights shared by all K layers) and N history tokens;
 *  - measuring, with CLOCK_MONOTONIC, one warm-up then the median of `reps` repetitions, three ways
 *    of restoring those K layers × N tokens:
 *      recompute    the full forward: per layer RMSNorm/LayerNorm, QKV GEMM, split into Q,K,V, RoPE
 *                   on Q and K, causal prefill attention (N new over 0 context), O GEMM, residual,
 *                   norm, gate/up GEMM, activation, down GEMM, residual (+ the model's extra norms);
 *      kv_load      the K layers' K and V (fp32, [layer][K|V][token][kv head][d]) read back from a
 *                   file in the scratch directory into memory;
 *      hidden_load  the K layers' hidden states (fp32, [layer][token][D]) read back the same way,
 *                   then per layer the K/V projection GEMM (gemm_kv_proj shape), the split of its
 *                   output into K and V, and RoPE on K;
 *    files are read with O_DIRECT when the filesystem allows it, else with buffered reads after
 *    posix_fadvise(DONTNEED) (said in ValidateResult.io_note);
 *  - predicting the same three from a CostModel (validate_predict): recompute = K × one layer as
 *    sim/cost/layer_cost composes it for the simulator (gemm_qkv +
 *    gemm_o + gemm_ffn_up + gemm_ffn_down at N + attn_prefill(N, 0) + norms_per_layer × norm(N) +
 *    act(N) + rope(N)); kv_load = read time of its bytes; hidden_load = read time of its bytes +
 *    K × gemm_kv_proj(N) (the calibrated kv_proj already includes RoPE on K, so rope is not added
 *    again). The read time is bytes / a read rate measured in the same run (a calibration read of
 *    calib_read_bytes through the same path) unless the cost model has an ssd_read curve, which is
 *    then looked up at (bytes, queue depth 1, 1 drive).
 * Not responsible for: filling cost stores (calib_run.c), the simulator's own prediction
 * (kvsim runs the same arithmetic through its policies), GPUs, MoE models (refused).
 * Not modelled by the prediction (so part of the measured/predicted ratio): residual adds, the
 * Q/K/V splits, file open/close.
 * Invariants: library functions never print or exit (the CLI, calibrate/cli/validate_cmd.c, does); files
 * created in the scratch directory (and the directory itself when validate made it) are removed
 * before returning, on success and on failure.
 */
#ifndef KV_VALIDATE_H
#define KV_VALIDATE_H

#include <stdint.h>

#include "sim/cost/cost.h"
#include "sim/catalog/model.h"
#include "sim/base/util.h"

typedef enum ValidateWhat {
    VALIDATE_RECOMPUTE = 0,
    VALIDATE_KV_LOAD,
    VALIDATE_HIDDEN_LOAD,
    VALIDATE_HIDDEN_READ,   /* detail of hidden_load: the read alone */
    VALIDATE_HIDDEN_PROJ,   /* detail of hidden_load: kv_proj GEMM + split + RoPE */
    VALIDATE_N_ROWS
} ValidateWhat;
/* The rows checked against a tolerance: the first three. */
#define VALIDATE_N_MAIN 3

/* "recompute", "kv_load", "hidden_load", "  hidden read", "  kv_proj+rope"; NULL out of range. */
const char *validate_what_name(ValidateWhat w);

typedef struct ValidateOptions {
    const ModelSpec *model;   /* dense (MoE refused) */
    int layers;               /* K >= 1; 0: 2 */
    int64_t tokens;           /* N >= 1; 0: 512 */
    const char *scratch_dir;  /* NULL/"": a fresh directory under $TMPDIR (or /tmp), removed after */
    int reps;                 /* timed repetitions after one warm-up; 0: 3 */
    int64_t calib_read_bytes; /* calibration read; 0: 64 MiB; rounded up to 4 KiB */
    uint64_t seed;            /* weights and inputs; 0: 1 */
} ValidateOptions;

/* The prediction of the three main rows and of the two detail rows, in ns. */
typedef struct ValidatePrediction {
    double ns[VALIDATE_N_ROWS];
    double layer_ns;             /* one layer's recompute: the sum of its lookups */
    double layer_op_ns[OP_COUNT]; /* its terms: gemms, attn_prefill, norm (× norms), act, rope */
    double kv_read_ns, hidden_read_ns;
    uint64_t extrapolations;     /* lookups of this prediction that extrapolated */
} ValidatePrediction;

typedef struct ValidateResult {
    double measured_ns[VALIDATE_N_ROWS];
    /* recompute split by op, all K layers, median over the repetitions of each op's total (the
     * norm entry covers every norm); recompute_other_ns: Q/K/V splits and residual adds */
    double recompute_op_ns[OP_COUNT];
    double recompute_other_ns;
    ValidatePrediction pred;
    uint64_t kv_bytes, hidden_bytes; /* payload bytes of the two files */
    double read_bytes_per_s;         /* the calibration read's rate (0 when not measured) */
    int o_direct;                    /* 1: reads used O_DIRECT */
    char read_source[160];           /* how the read time is predicted */
    char io_note[320];               /* scratch directory, O_DIRECT or buffered */
    int layers;
    int64_t tokens;
} ValidateResult;

/* Bytes of the two files: K·N·2·h_kv·d_h·4 and K·N·D·4 (fp32, what the CPU computes in). */
uint64_t validate_kv_bytes(const ModelSpec *m, int layers, int64_t tokens);
uint64_t validate_hidden_bytes(const ModelSpec *m, int layers, int64_t tokens);

/* Load the cost model of (device, model, fp16, tp 1) from db_path. A missing file gives
 * "<db>: no such cost store (fill it with: kvcal run --backend cpu --quick --model M --db <db>)";
 * a store without that model gives cost_model_load_db's message (it lists the store's runs). */
int validate_load_cost_model(CostModel *cm, const char *db_path, const char *device, const char *model, KvErr *e);

/* The prediction arithmetic (see the header comment). read_bytes_per_s > 0: reads cost bytes / rate;
 * <= 0: the ssd_read curve at (bytes, 1, 1), an error when the model has none. Fails naming the
 * first missing compute op (rope is only required for RoPE models). */
int validate_predict(CostModel *cm, const ModelSpec *m, int layers, int64_t tokens, double read_bytes_per_s,
                     ValidatePrediction *p, KvErr *e);

/* Measure and predict. Fails on bad options, an unusable scratch directory (message naming it), an
 * MoE model, out of memory, a kernel or IO error, or a cost model missing an op. */
int validate_run(CostModel *cm, const ValidateOptions *o, ValidateResult *r, KvErr *e);

/* measured / predicted within [1/(1+tol), 1+tol]; 0 when predicted <= 0 or measured is not finite. */
int validate_ratio_ok(double measured_ns, double predicted_ns, double tol);

#endif
