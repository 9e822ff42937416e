/* layer_cost.c — the per-layer composition (formula and order in layer_cost.h).
 *
 * Responsible for: the sum itself and the cost-model op source. Not responsible for: op times.
 * Invariants: additions left to right in the documented order; one lookup per op of the layer.
 * Complexity: O(1) (at most 9 lookups).
 */
#include "sim/cost/layer_cost.h"

static double model_ns(void *ctx, CostOp op, int64_t p1, int64_t p2) { return cost_lookup_ns(ctx, op, p1, p2, 0); }
static int model_has(void *ctx, CostOp op) { return cost_has(ctx, op); }

LayerOps layer_ops_of_model(CostModel *cm) { return (LayerOps){model_ns, model_has, cm}; }

static double term(const LayerOps *o, double *terms, CostOp op, int64_t p1, int64_t p2, int times)
{
    double v = times * o->ns(o->ctx, op, p1, p2);
    if (terms) terms[op] = v;
    return v;
}

double layer_cost_linear_ns(const LayerOps *o, const ModelLayout *ly, int64_t M, double *terms)
{
    const ModelSpec *m = ly->m;
    /* four GEMMs first, as one expression (left to right), then the optional terms one by one */
    double q = o->ns(o->ctx, OP_GEMM_QKV, M, 0), w_o = o->ns(o->ctx, OP_GEMM_O, M, 0);
    double up = o->ns(o->ctx, OP_GEMM_FFN_UP, M, 0), down = o->ns(o->ctx, OP_GEMM_FFN_DOWN, M, 0);
    if (terms) {
        terms[OP_GEMM_QKV] = q;
        terms[OP_GEMM_O] = w_o;
        terms[OP_GEMM_FFN_UP] = up;
        terms[OP_GEMM_FFN_DOWN] = down;
    }
    double t = q + w_o + up + down;
    if (o->has(o->ctx, OP_NORM)) t += term(o, terms, OP_NORM, M, 0, m->norms_per_layer);
    if (o->has(o->ctx, OP_ACT)) t += term(o, terms, OP_ACT, M, 0, 1);
    if (m->pos == POS_ROPE && o->has(o->ctx, OP_ROPE)) t += term(o, terms, OP_ROPE, M, 0, 1);
    if (ly->tp > 1 && o->has(o->ctx, OP_ALLREDUCE)) t += term(o, terms, OP_ALLREDUCE, M, 0, 1);
    return t;
}

double layer_cost_prefill_ns(const LayerOps *o, const ModelLayout *ly, int64_t new_tokens, int64_t ctx_tokens,
                             double *terms)
{
    double lin = layer_cost_linear_ns(o, ly, new_tokens, terms);
    double attn = o->ns(o->ctx, OP_ATTN_PREFILL, new_tokens, ctx_tokens);
    if (terms) terms[OP_ATTN_PREFILL] = attn;
    return lin + attn;
}
