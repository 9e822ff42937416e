/* split.c — the hybrid policies' shared per-layer estimates and layer walks; see split.h. */
#include "policies/split.h"

#include <float.h>
#include <math.h>
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

double split_prefix_walk_ns(const SplitPrefix *p, int k)
{
    /* split_walk_ns over split_flow_load's arrivals, fused: the same operations in the same order */
    double cur = p->start;
    int l = 0;
    for (; l < k && l < p->L; l++) {
        if (-1.0 > cur) cur = -1.0; /* a recomputed layer's "arrival" in the array form */
        cur += p->rec;
    }
    IoFlow f;
    memset(&f, 0, sizeof f);
    f.hop_per_stage = p->hop_per_stage;
    for (; l < p->L; l++) {
        double a = split_flow_load(&f, p->stage_of[l], p->hop, p->h2d);
        if (a > cur) cur = a;
        cur += p->load;
    }
    return cur;
}

double split_prefix_best_exhaustive(const SplitPrefix *p, int kmax, int *k_out)
{
    double best = split_prefix_walk_ns(p, 0);
    int bk = 0;
    for (int k = 1; k <= kmax; k++) {
        double v = split_prefix_walk_ns(p, k);
        if (v < best) best = v, bk = k;
    }
    *k_out = bk;
    return best;
}

static int finite_nonneg(double x) { return x >= 0 && x <= DBL_MAX; }

/* candidate k's walk in exact arithmetic (evaluated in doubles: a few operations per term). The
 * loads are issued at t = 0: the j-th (j = l − k) is ready from the tier channel at (j+1)·hop (the
 * channel's i-th of the stage with a channel per stage), and a stage's H2D chain starting at its
 * first loaded layer delivers layer l at max of the two linear pieces below (channel-bound or
 * H2D-bound). The walk ends at the latest of start + k·rec + (L−k)·load and, for every loaded layer,
 * its arrival plus (L−l)·load: linear pieces in l, so their maximum is at a stage run's ends. */
static double prefix_closed_ns(const SplitPrefix *p, int k, const int *run_first, const int *run_end, int runs)
{
    double v = p->start + k * p->rec + (p->L - k) * p->load;
    for (int r = 0; r < runs; r++) {
        int a = run_first[r] > k ? run_first[r] : k, b = run_end[r] - 1;
        if (a > b) continue;
        int ends[2] = {a, b};
        for (int e = 0; e < 2; e++) {
            int l = ends[e], i = l - a; /* i: the layer's place in its stage's loads */
            double tail = (p->L - l) * p->load, t1, t2;
            if (p->hop_per_stage) {
                t1 = (i + 1) * p->hop + p->h2d;
                t2 = p->hop + (i + 1) * p->h2d;
            } else {
                int j = l - k, j0 = a - k;
                t1 = (j + 1) * p->hop + p->h2d;
                t2 = (j0 + 1) * p->hop + (i + 1) * p->h2d;
            }
            double t = (t1 > t2 ? t1 : t2) + tail;
            if (t > v) v = t;
        }
    }
    return v;
}

double split_prefix_best(const SplitPrefix *p, int kmax, int *k_out, int *walked)
{
    int run_first[KV_MAX_STAGES], run_end[KV_MAX_STAGES], runs = 0, ok = p->L >= 1 && p->L <= KV_MAX_LAYERS;
    ok = ok && finite_nonneg(p->start) && finite_nonneg(p->rec) && finite_nonneg(p->load) && finite_nonneg(p->hop) &&
         finite_nonneg(p->h2d);
    for (int l = 0; ok && l < p->L; l++) {
        if (l > 0 && p->stage_of[l] == p->stage_of[l - 1]) continue;
        for (int r = 0; r < runs; r++) ok = ok && p->stage_of[run_first[r]] != p->stage_of[l];
        if (!ok || runs == KV_MAX_STAGES) {
            ok = 0;
            break;
        }
        if (runs) run_end[runs - 1] = l;
        run_first[runs++] = l;
    }
    if (!ok || kmax > p->L) {
        if (walked) *walked = kmax + 1;
        return split_prefix_best_exhaustive(p, kmax, k_out);
    }
    run_end[runs - 1] = p->L;
    /* Every walk is additions and maxima of non-negative numbers, at most 3L + 3 additions deep (a
     * load's channel and H2D chains, then the walk), each off by a factor within 1 ± eps/2, and the
     * closed form a few more: both lie within rel of the exact value, so a candidate walks to within
     * [v(1 − rel), v(1 + rel)] of its closed form v (rel about twice the bound, for margin). */
    double rel = 2.0 * (3.0 * p->L + 16.0) * DBL_EPSILON;
    double closed[KV_MAX_LAYERS + 1], bound = INFINITY;
    for (int k = 0; k <= kmax; k++) {
        closed[k] = prefix_closed_ns(p, k, run_first, run_end, runs);
        double hi = closed[k] * (1 + rel);
        if (hi < bound) bound = hi;
    }
    /* the exhaustive search's winner walks to at most `bound`, as does every candidate tied with it:
     * walking the candidates whose lower bound reaches it, in order, finds the same first minimum */
    double best = INFINITY;
    int bk = 0, n = 0;
    for (int k = 0; k <= kmax; k++) {
        if (closed[k] * (1 - rel) > bound) continue;
        double v = split_prefix_walk_ns(p, k);
        n++;
        if (v < best) best = v, bk = k;
    }
    if (walked) *walked = n;
    *k_out = bk;
    return best;
}
