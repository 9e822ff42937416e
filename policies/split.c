/* split.c — the hybrid policies' shared per-layer estimates and layer walks; see split.h. */
#include "policies/split.h"

#include <string.h>

#include "sim/cost/layer_cost.h"

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

Tier split_primary_tier(const PolicyEnv *env) { return env->save_tier != TIER_NONE ? env->save_tier : TIER_DRAM; }

void split_iter_costs(const PolicyEnv *env, int64_t N, int64_t new_tokens, IterCosts *c)
{
    int64_t n = new_tokens < 1 ? 1 : new_tokens;
    if (env->token_budget > 0 && n > env->token_budget) n = env->token_budget;
    LayerOps ops = layer_ops_of_model(env->cost);
    double lin_n = layer_cost_linear_ns(&ops, env->ly, n, NULL);
    double attn_n = cost_lookup_ns(env->cost, OP_ATTN_PREFILL, n, N, 0);
    double attn_hist = cost_lookup_ns(env->cost, OP_ATTN_PREFILL, N, 0, 0);
    double proj = cost_lookup_ns(env->cost, OP_GEMM_KV_PROJ, N, 0, 0);
    if (env->ly->tp > 1 && cost_has(env->cost, OP_ALLGATHER)) proj += cost_lookup_ns(env->cost, OP_ALLGATHER, N, 0, 0);
    c->plain = lin_n + attn_n;
    c->rec = layer_cost_linear_ns(&ops, env->ly, n + N, NULL) + attn_n + attn_hist;
    c->hid = lin_n + attn_n + proj;
    c->rec_lane = env->est_layer_ns(env->core, N, 0);
}

void split_load_hops(const PolicyEnv *env, Tier tier, int64_t tokens, double bpt_layer, double bpt_layer_gpu,
                     int64_t chunk_tokens, double *hop_ns, double *h2d_ns)
{
    if (env->est_load_hops_ns) {
        env->est_load_hops_ns(env->core, tier, tokens, bpt_layer, bpt_layer_gpu, chunk_tokens, hop_ns, h2d_ns);
        return;
    }
    *hop_ns = env->est_load_layer_ns(env->core, tier, tokens, bpt_layer, bpt_layer_gpu);
    *h2d_ns = 0;
}

double split_flow_load(IoFlow *f, int stage, double hop_ns, double h2d_ns)
{
    double ready = 0;
    if (hop_ns > 0) {
        double *hf = f->hop_per_stage ? &f->hop_free_st[stage] : &f->hop_free;
        *hf += hop_ns;
        ready = *hf;
    }
    double *h = &f->h2d_free[stage];
    *h = (*h > ready ? *h : ready) + h2d_ns;
    return *h;
}

double split_walk_ns(int L, const double *comp, const double *arrive, double start_ns)
{
    double cur = start_ns;
    for (int l = 0; l < L; l++) {
        if (arrive && arrive[l] > cur) cur = arrive[l];
        cur += comp[l];
    }
    return cur;
}

double split_forms_ns(int L, const int *stage_of, const uint8_t *form_of, const FormCosts *fc)
{
    double comp[KV_MAX_LAYERS], arrive[KV_MAX_LAYERS];
    IoFlow f;
    memset(&f, 0, sizeof f);
    for (int l = 0; l < L; l++) {
        int m = form_of[l] & 7;
        comp[l] = fc->comp[m];
        arrive[l] = fc->loads[m] ? split_flow_load(&f, stage_of[l], fc->hop[m], fc->h2d[m]) : -1;
    }
    return split_walk_ns(L, comp, arrive, fc->start_ns);
}

double split_quant_share(int bits, int group)
{
    if (bits >= 16) return 1.0;
    return bits / 16.0 + 1.0 / (group > 0 ? group : 1);
}

double split_dequant_ns(const PolicyEnv *env, int64_t N, int hidden)
{
    if (!cost_has(env->cost, OP_DEQUANT)) return 0;
    if (!hidden) return cost_lookup_ns(env->cost, OP_DEQUANT, N, 0, 0);
    double hid_g = (double)model_hidden_bytes_per_token_layer(env->ly) / env->ly->tp;
    double kv_g = (double)model_kv_bytes_per_token_layer_gpu(env->ly);
    return cost_lookup_ns(env->cost, OP_DEQUANT, policy_dequant_hidden_tokens(N, hid_g, kv_g), 0, 0);
}
