/* layer_cost.h — the one composition of a transformer layer's prefill time from its ops.
 *
 * Responsible for: the per-layer sum used everywhere a layer is costed from parts — the engine's
 * iteration costs and policy estimates (sim/engine), the spec backend's layer_prefill curve
 * (spec.c) and kvcal validate's recompute prediction (calibrate/validate.c):
 *   linear(M)     = gemm_qkv(M) + gemm_o(M) + gemm_ffn_up(M) + gemm_ffn_down(M)
 *                   [+ norms_per_layer × norm(M)]  [+ act(M)]  [+ rope(M) when positions are RoPE]
 *                   [+ allreduce(M) when tp > 1]              (bracketed terms: when the op exists)
 *   prefill(n, c) = linear(n) + attn_prefill(n, c)
 * summed left to right in exactly that order (results are compared byte for byte, so the order of
 * the floating-point additions is part of the contract).
 * Not responsible for: where op times come from (a LayerOps source: cost-model lookups, or the spec
 * roofline while the spec backend builds its tables), decode attention, restoration extras
 * (hidden-state projections, dequantization, all-gathers) — the engine adds those itself.
 * Invariants: the same ops are looked up in the same order on every call (lookup and extrapolation
 * counters of a cost model stay what they were before this module existed); no allocation.
 * Complexity: at most 9 op lookups per call.
 */
#ifndef KV_LAYER_COST_H
#define KV_LAYER_COST_H

#include <stdint.h>

#include "sim/base/ops.h"
#include "sim/catalog/model.h"
#include "sim/cost/cost.h"

/* A source of op times: ns(ctx, op, p1, p2) and has(ctx, op) (an absent optional op is skipped). */
typedef struct LayerOps {
    double (*ns)(void *ctx, CostOp op, int64_t p1, int64_t p2);
    int (*has)(void *ctx, CostOp op);
    void *ctx;
} LayerOps;

/* Op times from cost-model lookups (cost_lookup_ns / cost_has on cm). */
LayerOps layer_ops_of_model(CostModel *cm);

/* Per-layer time of the token-proportional part for M tokens (see above). terms: NULL, or an
 * OP_COUNT array that receives each term as added (norm: × norms_per_layer; absent ops untouched). */
double layer_cost_linear_ns(const LayerOps *ops, const ModelLayout *ly, int64_t M, double *terms);

/* Per-layer prefill time of new_tokens after ctx_tokens of context: linear + attn_prefill. */
double layer_cost_prefill_ns(const LayerOps *ops, const ModelLayout *ly, int64_t new_tokens, int64_t ctx_tokens,
                             double *terms);

#endif
