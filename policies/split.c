/* split.c — per-layer estimates and the min–max split; see split.h. */
#include "policies/split.h"

void split_layer_costs(const PolicyEnv *env, Tier tier, int64_t N, LayerCosts *c)
{
    const ModelLayout *ly = env->ly;
    double T = ly->tp;
    double kv_l = (double)model_kv_bytes_per_token_layer(ly), kv_g = (double)model_kv_bytes_per_token_layer_gpu(ly);
    double hid_l = (double)model_hidden_bytes_per_token_layer(ly);
    c->t_re = env->est_layer_ns(env->core, N, 0);
    c->t_proj = cost_lookup_ns(env->cost, OP_GEMM_KV_PROJ, N, 0, 0);
    if (ly->tp > 1 && cost_has(env->cost, OP_ALLGATHER)) c->t_proj += cost_lookup_ns(env->cost, OP_ALLGATHER, N, 0, 0);
    c->t_kv = env->est_load_layer_ns(env->core, tier, N, kv_l, kv_g);
    c->t_hid = env->est_load_layer_ns(env->core, tier, N, hid_l, hid_l / T);
}

int split_argmin(int L, double (*f)(int k, const void *ctx), const void *ctx, double *best_ns)
{
    int best = 0;
    double bv = f(0, ctx);
    for (int k = 1; k <= L; k++) {
        double v = f(k, ctx);
        if (v < bv) {
            bv = v;
            best = k;
        }
    }
    if (best_ns) *best_ns = bv;
    return best;
}

typedef struct {
    int n;
    double t_re, t_kv;
} LwCtx;

static double lw_time(int k, const void *ctx)
{
    const LwCtx *c = ctx;
    double a = k * c->t_re, b = (c->n - k) * c->t_kv;
    return a > b ? a : b;
}

int split_layerwise(int n, double t_re, double t_kv, double *ns)
{
    LwCtx c = {n, t_re, t_kv};
    return split_argmin(n, lw_time, &c, ns);
}

Tier split_primary_tier(const PolicyEnv *env) { return env->save_tier != TIER_NONE ? env->save_tier : TIER_DRAM; }
