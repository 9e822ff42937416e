/* calib_recipe.h — the recipe of each op a calibration run measures: which kernels of probe.h
 * run, at which per-GPU shapes, on which buffers (internal to calibrate/: calib_run.c measures
 * with it, calib_plan.c counts its kernels for the estimate).
 *
 * Responsible for: the per-GPU shapes of a layout (model_gemm_shape with the layout's TP;
 * attention with h/T query heads and the KV heads one GPU holds), the GEMMs of each projection op
 * (MoE included), allocating an op's buffers once at its largest point, and one timed repetition.
 * Not responsible for: the grid of points and the timing rules (calib_plan.h, timing.h), storing.
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
 *       and V of t tokens).
 * In-sequence timing (kvcal run --in-sequence, cpu): one repetition runs a whole layer — norm →
 *   qkv → RoPE(Q,K) → attention (prefill of n new tokens over c, a decode step of a batch b over C
 *   keys, or none) → o → norm → ffn_up → act → ffn_down (+ the extra norms) — on the next copy of
 *   the layer's weights and of its K and V, and reads the clock between the kernels: each op's time
 *   as it runs between the others in a model's layer sequence (its weights and the layer's KV come
 *   from memory, the kernel before it has just run; what a loop of the op alone does not see).
 *   norm's sample is the mean of the layer's norm calls (the engine multiplies by norms_per_layer).
 * Invariants: a CalibWork's buffers fit its largest point; calib_work_free releases all of them.
 * Complexity: one repetition launches calib_recipe_launches kernels (in sequence: a layer's).
 */
#ifndef KV_CALIB_RECIPE_H
#define KV_CALIB_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "calibrate/probe.h"
#include "sim/base/ops.h"
#include "sim/catalog/model.h"

typedef struct CalibShapes {
    const ModelLayout *ly;
    int64_t D, hq, hk, dh;
    int64_t I;          /* FFN width per GPU (MoE: one expert's) */
    int64_t gate;       /* 2 gated, 1 plain */
    int64_t E, topk, shared;
    int moe, layernorm, rope, norms;
} CalibShapes;

#define CALIB_MAX_COPIES 256 /* cold weights: the most copies of an op's weights */

/* One GEMM of a recipe: rows m of A start at a_row, rows of C at c_row; w: weight index (-1: the
 * MoE router, whose output goes to its own buffer). */
typedef struct CalibGemm {
    int64_t m, n, k;
    int w;
    int64_t a_row, c_row;
} CalibGemm;

/* The buffers of one op (NULL when unused), sized for its largest point. */
typedef struct CalibWork {
    ProbeDev *d;
    const CalibShapes *s;
    CostOp op;
    int cold;
    int64_t p1, p2;                 /* the current point */
    int64_t p1_max, p2_max;
    CalibGemm *calls;                /* scratch for gemm_recipe */
    int max_calls;
    /* activations [rows][width] */
    void *x, *xn, *h, *hn, *qkv, *gu, *a, *dn, *kvp, *router_out;
    /* attention */
    void *q, *k, *v, *ao;
    int *ctx_off;                   /* decode: batch + 1 host offsets */
    /* weights */
    void *w_qkv, *w_o, *w_kv, *w_router, *nw, *nb;
    void **w_up, **w_down;          /* per expert (dense: one) */
    int n_w;                        /* distinct FFN weight sets */
    /* quantization */
    void *xq, *qi8, *scale;
    int launches;                   /* kernels launched by the last launch() */
    /* cold weights (kvcal run --cold-weights): every weight buffer holds `copies` copies, and each
     * repetition's GEMMs read the next one, so that the op's weights come from memory, as a real
     * model's layers do (set cold_bytes before calib_work_alloc; 0: one copy, hot) */
    int64_t cold_bytes;             /* the rotation's working set to exceed (e.g. 3 x the LLC) */
    int copies, copy;               /* copies allocated (>= 1) and the current one */
    /* in-sequence work (calib_seq_alloc): K and V rotated with the weights, decode offsets; the
     * current shape (calib_seq_set) */
    int seq, seq_attn;
    int64_t seq_batch_max;
} CalibWork;

/* In-sequence attention of a repetition's layer: none, prefill (p1 new over p2 context), decode
 * (a batch of p1 over p2 keys) */
enum { CALIB_SEQ_NONE, CALIB_SEQ_PREFILL, CALIB_SEQ_DECODE };

/* The per-GPU shapes of a layout. */
void calib_shapes_of(CalibShapes *s, const ModelLayout *ly);
/* The most GEMMs one recipe launches (the size of a CalibGemm scratch array). */
int calib_gemm_recipe_max(const CalibShapes *s);
/* Kernels per repetition of op at p1 (for the estimate), without a device; scratch: max entries. */
int calib_recipe_launches(const CalibShapes *s, CostOp op, int64_t p1, CalibGemm *scratch, int max);
/* The memory cap on distinct MoE expert weight sets (8 GiB on cuda, 4 GiB on cpu). */
size_t calib_expert_cap_bytes(const ProbeDev *d);

/* Allocate what w->op needs at its largest point (w->p1_max, w->p2_max); w->d, s, op, cold set. */
int calib_work_alloc(CalibWork *w, KvErr *e);
void calib_work_free(CalibWork *w);
/* The point the next repetitions time. */
void calib_work_set_point(CalibWork *w, int64_t p1, int64_t p2);
/* One repetition (a timing.h workload: ctx is the CalibWork): flush when cold, launch, time. */
int calib_work_rep(void *ctx, int timed, double *ns, KvErr *e);

/* In-sequence work for layers of up to t_max tokens, contexts of up to ctx_max keys (prefill
 * context or decode keys) and decode batches up to batch_max; w->d, s, cold_bytes set. */
int calib_seq_alloc(CalibWork *w, int64_t t_max, int64_t ctx_max, int64_t batch_max, KvErr *e);
/* The shape of the next repetitions: attn (CALIB_SEQ_*), p1 tokens, p2 context or keys. */
void calib_seq_set(CalibWork *w, int attn, int64_t p1, int64_t p2);
/* One layer on the next weight copy; op_ns[op] = the op's time in it (0 for ops it does not run;
 * OP_NORM: per norm call), *layer_ns = their sum. */
int calib_seq_rep(CalibWork *w, double op_ns[OP_COUNT], double *layer_ns, KvErr *e);

#endif
