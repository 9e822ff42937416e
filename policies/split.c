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

/* 0, or a normal positive number: the rounding bounds below are relative (a subnormal cost's
 * rounding is not) */
static int finite_nonneg(double x) { return x == 0 || (x >= DBL_MIN && x <= DBL_MAX); }

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

double split_stages_walk_ns(const SplitStages *p, const int *ell)
{
    IoFlow f;
    memset(&f, 0, sizeof f);
    f.hop_per_stage = p->hop_per_stage;
    double lane_end[KV_MAX_STAGES];
    for (int s = 0; s < p->S; s++) {
        double lane = ell[s] * p->rec_lane, from = p->start;
        if (s > 0 && ell[s] > 0) {
            double a = split_flow_load(&f, s, p->bnd_hop, p->bnd_h2d);
            if (a > from) from = a;
            lane += p->ag;
        }
        lane_end[s] = lane > 0 ? from + lane : -1;
    }
    double cur = p->start;
    for (int l = 0; l < p->L; l++) {
        int s = p->stage_of[l];
        int rec = l < p->first[s] + ell[s];
        double arr = rec ? -1 : split_flow_load(&f, s, p->hop, p->h2d);
        if (l == p->first[s] && lane_end[s] > arr) arr = lane_end[s];
        if (arr > cur) cur = arr;
        cur += rec ? p->plain : p->load;
    }
    return cur;
}

/* the search's candidate sequence: scan -1 is the same split e in every stage, scan s >= 0 stage s's
 * split e with the others at base */
static void stages_cand(const SplitStages *p, int scan, const int *base, int e, int *ell)
{
    for (int s = 0; s < p->S; s++) ell[s] = scan < 0 ? (e < p->count[s] ? e : p->count[s]) : base[s];
    if (scan >= 0) ell[scan] = e;
}

static int stages_scan_len(const SplitStages *p, int scan)
{
    int n = 0;
    if (scan >= 0) return p->count[scan] + 1;
    for (int s = 0; s < p->S; s++)
        if (p->count[s] > n) n = p->count[s];
    return n + 1;
}

double split_stages_best_exhaustive(const SplitStages *p, int *ell)
{
    int cur[KV_MAX_STAGES];
    double best = INFINITY;
    for (int e = 0; e < stages_scan_len(p, -1); e++) {
        stages_cand(p, -1, ell, e, cur);
        double v = split_stages_walk_ns(p, cur);
        if (v < best) best = v, memcpy(ell, cur, sizeof(int) * (size_t)p->S);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < p->S; s++)
            for (int e = 0; e <= p->count[s]; e++) {
                stages_cand(p, s, ell, e, cur);
                double v = split_stages_walk_ns(p, cur);
                if (v < best) best = v, ell[s] = e;
            }
    return best;
}

/* candidate ell's walk in exact arithmetic, as prefix_closed_ns: the boundaries go first (the
 * b-th ready from a shared channel at (b+1)·bnd_hop), then the KV loads; a stage's H2D chain is
 * its boundary then its loads, so a loaded layer arrives at the latest of three linear pieces (the
 * chain from the boundary, from the stage's first load, and its own channel time); the walk ends at
 * the latest of start + every layer's cost and each arrival (lanes included) plus the cost of the
 * layers from it on */
static double stages_closed_ns(const SplitStages *p, const int *ell)
{
    double tail[KV_MAX_STAGES + 1], v;
    tail[p->S] = 0;
    for (int s = p->S - 1; s >= 0; s--) tail[s] = tail[s + 1] + ell[s] * p->plain + (p->count[s] - ell[s]) * p->load;
    v = p->start + tail[0];
    int nb = 0, j0 = 0; /* boundaries issued; KV loads issued before stage s's */
    double bnd_at[KV_MAX_STAGES];
    for (int s = 0; s < p->S; s++) {
        bnd_at[s] = -1;
        double lane = ell[s] * p->rec_lane, from = p->start;
        if (s > 0 && ell[s] > 0) {
            bnd_at[s] = (p->hop_per_stage ? p->bnd_hop : (nb + 1) * p->bnd_hop) + p->bnd_h2d;
            nb++;
            if (bnd_at[s] > from) from = bnd_at[s];
            lane += p->ag;
        }
        if (lane > 0 && from + lane + tail[s] > v) v = from + lane + tail[s];
    }
    for (int s = 0; s < p->S; s++) {
        int nl = p->count[s] - ell[s]; /* loaded layers of the stage: the run's last nl */
        if (nl <= 0) continue;
        /* the channel's time before the stage's loads (split_flow_load: a unit without a hop is
         * ready at once, whatever the channel carries) */
        double chan0 = p->hop <= 0 ? 0 : p->hop_per_stage ? (bnd_at[s] >= 0 ? p->bnd_hop : 0) : nb * p->bnd_hop;
        int ends[2] = {0, nl - 1};
        for (int e = 0; e < 2; e++) {
            int i = ends[e], jj = p->hop_per_stage ? i : j0 + i; /* in-stage and channel index */
            int jf = p->hop_per_stage ? 0 : j0;
            double t = chan0 + (jj + 1) * p->hop + p->h2d;                       /* its own channel time */
            double t1 = chan0 + (jf + 1) * p->hop + (i + 1) * p->h2d;          /* chained from the first load */
            if (t1 > t) t = t1;
            if (bnd_at[s] >= 0 && bnd_at[s] + (i + 1) * p->h2d > t) t = bnd_at[s] + (i + 1) * p->h2d;
            t += tail[s + 1] + (nl - i) * p->load;
            if (t > v) v = t;
        }
        j0 += nl;
    }
    return v;
}

double split_stages_best(const SplitStages *p, int *ell, int *walked)
{
    int ok = p->S >= 1 && p->S <= KV_MAX_STAGES && p->L >= 1 && p->L <= KV_MAX_LAYERS;
    ok = ok && finite_nonneg(p->plain) && finite_nonneg(p->load) && finite_nonneg(p->rec_lane) && finite_nonneg(p->ag) &&
         finite_nonneg(p->hop) && finite_nonneg(p->h2d) && finite_nonneg(p->bnd_hop) && finite_nonneg(p->bnd_h2d) &&
         finite_nonneg(p->start);
    for (int s = 0, at = 0; ok && s < p->S; at += p->count[s], s++) ok = p->first[s] == at && p->count[s] >= 0;
    for (int l = 0; ok && l < p->L; l++) ok = p->stage_of[l] >= 0 && p->stage_of[l] < p->S && l >= p->first[p->stage_of[l]] &&
                                         l < p->first[p->stage_of[l]] + p->count[p->stage_of[l]];
    if (!ok) {
        int n = stages_scan_len(p, -1);
        for (int s = 0; s < p->S; s++) n += 2 * (p->count[s] + 1);
        if (walked) *walked = n;
        return split_stages_best_exhaustive(p, ell);
    }
    /* additions at most L (channel) + L (H2D) + L (walk) + 2S + a few deep, as in split_prefix_best */
    double rel = 2.0 * (3.0 * p->L + 2.0 * p->S + 24.0) * DBL_EPSILON;
    double closed[KV_MAX_LAYERS + 1], best = INFINITY;
    int cur[KV_MAX_STAGES], n = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int s = pass ? 0 : -1; s < (pass ? p->S : 0); s++) {
            /* one scan: a candidate replaces the running best when it walks strictly below it; the
             * ones that can are those whose bound reaches min(best, every upper bound) */
            int len = stages_scan_len(p, s);
            double bound = best;
            for (int e = 0; e < len; e++) {
                stages_cand(p, s, ell, e, cur);
                closed[e] = stages_closed_ns(p, cur);
                if (closed[e] * (1 + rel) < bound) bound = closed[e] * (1 + rel);
            }
            int pick = -1;
            for (int e = 0; e < len; e++) {
                if (closed[e] * (1 - rel) > bound) continue;
                if (s >= 0 && e == ell[s]) continue; /* the best itself: walks to best, not below it */
                stages_cand(p, s, ell, e, cur);
                double v = split_stages_walk_ns(p, cur);
                n++;
                if (v < best) best = v, pick = e;
            }
            if (pick >= 0) {
                stages_cand(p, s, ell, pick, cur);
                memcpy(ell, cur, sizeof(int) * (size_t)p->S);
            }
        }
    if (walked) *walked = n;
    return best;
}
