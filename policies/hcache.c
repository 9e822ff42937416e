/* hcache.c — HCache (EuroSys'25) and its two ablations.
 *
 * hcache: save each layer's input hidden state instead of its KV; restore = load the hidden states
 * and project K and V (+RoPE) with a GEMM, pipelined layer by layer. IO and compute rarely balance,
 * so a bubble-free scheduler splits the layers (POLICIES.md; the paper's statement reconstructed):
 *   IO-bound (hidden-state load slower than projection): the first L_O layers are recomputed from
 *     tokens (no IO; their compute overlaps the hidden-state loads of the other layers);
 *   compute-bound: the last L_O layers load KV directly (IO, no compute).
 * The split is solved per request, for its history length N, the tier its state is actually on and
 * the new input that shares the layer walk: every candidate L_O of both directions is costed as the
 * engine will run it (split_walk_ns: loads in layer order through the tier's channel and H2D, the
 * walk starting after the iteration's overhead, each layer costing the new input's compute plus its
 * restoration work) and the fastest wins, ties to the smaller L_O. L_O = 0 is hcache-noschd's plan,
 * so on an isolated request the split can only remove bubbles. Solutions are memoised per
 * (tier, N, new-input chunk) in a direct-mapped table (a cache: the result does not depend on it).
 *
 * Stored form: recomputed layers need nothing saved, but which layers are recomputed now depends on
 * the request, so hidden states are saved for every layer (HCache's storage: half the KV bytes of
 * an MHA model). The compute-bound direction needs the KV of the last layers as well: knob
 * hcache.kv_layers = N saves it for the last N layers besides their hidden states, -1 for as many
 * as the solver picks on the save tier for any length 1K–64K (fast links for the GPU: DRAM over
 * PCIe, a link per pipeline stage); 0 (default) saves hidden states only, so compute-bound requests
 * stay on the IO-bound direction's plans (at worst hcache-noschd's). Its storage manager cuts each layer's states into 64-token chunks placed
 * round-robin over the SSDs, so a layer's read keeps min(n_ssd, N/64) drives busy. Saving is
 * two-stage by default (per-iteration D2H snapshot, then a background flush); --set
 * save_mode=direct models writes from the critical path. Under TP each GPU reads a token shard of
 * the hidden states and an all-gather rebuilds them per layer; under PP each stage reads its own
 * layers (both in the engine).
 *
 * hcache-noschd: hidden states for every layer, no split.
 * hcache-quant: hcache (IO-bound direction only, hidden states only) with the hidden states stored
 *   quantized per token at hcache-quant.bits (8 or 4) with one fp16 scale per d_h elements: bytes
 *   bits/16 + 1/d_h of fp16; each hidden-state layer pays a dequantize (the cost model's dequant op
 *   scaled to D/T elements per token) before its projection; the split is solved with both.
 * naive-hybrid: the same per-request scheduler mixing recompute (first layers) and KV loads, no
 *   hidden states; it saves the KV of every layer (any layer may be loaded for some request).
 *
 * Complexity: a plan is O(L) arithmetic (split_prefix_best; O(L) per KV suffix candidate of the
 * compute-bound direction) plus a handful of cost lookups, O(1) on a memo hit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/split.h"

#define HCACHE_REF_TOKENS 4096
#define HCACHE_MEMO 1024
#define HCACHE_MAXL 256

enum { V_HCACHE = 0, V_NOSCHD, V_NAIVE, V_QUANT };
enum { DIR_NONE = 0, DIR_IO, DIR_COMPUTE };

typedef struct Memo {
    int64_t N, n;
    int tier, valid;
    int dir, k;
    double est_ns;
} Memo;

typedef struct HState {
    int variant;
    int L, kv_suffix; /* layers whose KV is saved too (hcache, compute-bound platforms) */
    double saved_bpt, hid_l, kv_l, hid_over_kv;
    int hid_bits;     /* hcache-quant: bits per stored hidden-state element (16: plain) */
    double hid_share; /* stored hidden bytes / fp16 bytes (1: plain) */
    int stage_of[HCACHE_MAXL];
    Memo memo[HCACHE_MEMO];
    /* the reference plan (notes): HCACHE_REF_TOKENS on the save tier, 64 new tokens */
    Tier ref_tier;
    int ref_dir, ref_k;
    double ref_ns;
    LayerCosts ref_lc;
    /* per-request plans so far */
    uint64_t plans, memo_hits, n_dir[3];
    int k_min, k_max;
    double k_sum;
} HState;

/* the modes of candidate (dir, k): DIR_IO: [0,k) recompute, then hidden (naive: KV); DIR_COMPUTE:
 * hidden, the last k layers KV */
static void modes_of(const HState *h, int dir, int k, uint8_t *mode)
{
    for (int l = 0; l < h->L; l++) {
        if (dir == DIR_IO || dir == DIR_NONE) mode[l] = l < k ? LM_RECOMPUTE : h->variant == V_NAIVE ? LM_LOAD_KV : LM_LOAD_HIDDEN;
        else mode[l] = l >= h->L - k ? LM_LOAD_KV : LM_LOAD_HIDDEN;
    }
}

typedef struct Cand {
    double comp[4];          /* per mode: LM_NONE unused, KV, hidden, recompute */
    double hop[4], h2d[4];   /* per mode's load */
    double start_ns;
} Cand;

static double cand_ns(const HState *h, const Cand *c, const uint8_t *mode)
{
    double comp[HCACHE_MAXL], arrive[HCACHE_MAXL];
    IoFlow f;
    memset(&f, 0, sizeof f);
    for (int l = 0; l < h->L; l++) {
        int m = mode[l];
        comp[l] = c->comp[m];
        arrive[l] = m == LM_LOAD_KV || m == LM_LOAD_HIDDEN ? split_flow_load(&f, h->stage_of[l], c->hop[m], c->h2d[m]) : -1;
    }
    return split_walk_ns(h->L, comp, arrive, c->start_ns);
}

static void cand_costs(const PolicyEnv *env, const HState *h, Tier tier, int64_t N, int64_t n, Cand *c)
{
    IterCosts ic;
    split_iter_costs(env, N, n, &ic);
    memset(c, 0, sizeof *c);
    c->comp[LM_LOAD_KV] = ic.plain;
    c->comp[LM_LOAD_HIDDEN] = ic.hid;
    c->comp[LM_RECOMPUTE] = ic.rec;
    double T = env->ly->tp;
    split_load_hops(env, tier, N, h->kv_l, (double)model_kv_bytes_per_token_layer_gpu(env->ly), 64, &c->hop[LM_LOAD_KV],
                    &c->h2d[LM_LOAD_KV]);
    if (h->hid_share < 1) { /* hcache-quant: fewer bytes, a dequantize before the projection */
        split_load_hops(env, tier, N, h->hid_l * h->hid_share, h->hid_l / T * h->hid_share, 64, &c->hop[LM_LOAD_HIDDEN],
                        &c->h2d[LM_LOAD_HIDDEN]);
        c->comp[LM_LOAD_HIDDEN] += split_dequant_ns(env, N, 1);
    } else {
        split_load_hops(env, tier, N, h->hid_l, h->hid_l / T, 64, &c->hop[LM_LOAD_HIDDEN], &c->h2d[LM_LOAD_HIDDEN]);
    }
    c->start_ns = (double)env->iter_overhead_ns;
}

/* the best (dir, k) for N history tokens on `tier` with n new tokens; *ns its estimate */
static void solve(const PolicyEnv *env, const HState *h, Tier tier, int64_t N, int64_t n, int *dir, int *k, double *ns)
{
    Cand c;
    cand_costs(env, h, tier, N, n, &c);
    /* the IO-bound direction: recompute [0, k), load the rest (k = 0: no split) */
    int lm = h->variant == V_NAIVE ? LM_LOAD_KV : LM_LOAD_HIDDEN;
    SplitPrefix sp = {.L = h->L, .stage_of = h->stage_of, .rec = c.comp[LM_RECOMPUTE], .load = c.comp[lm],
                      .hop = c.hop[lm], .h2d = c.h2d[lm], .start = c.start_ns};
    int bk = 0;
    double best = h->variant == V_NOSCHD ? split_prefix_walk_ns(&sp, 0) : split_prefix_best(&sp, h->L, &bk, NULL);
    int bd = bk > 0 ? DIR_IO : DIR_NONE;
    if (h->variant != V_NOSCHD) {
        uint8_t mode[HCACHE_MAXL];
        for (int kk = 1; kk <= h->kv_suffix; kk++) {
            modes_of(h, DIR_COMPUTE, kk, mode);
            double v = cand_ns(h, &c, mode);
            if (v < best) best = v, bd = DIR_COMPUTE, bk = kk;
        }
    }
    *dir = bd;
    *k = bk;
    *ns = best;
}

/* compute-bound split for the stored form: the largest KV suffix the solver picks for any length
 * 1K..64K (doubling) on the save tier (where the state lives once spilled), with a small new input */
static int storage_kv_suffix(const PolicyEnv *env, HState *h)
{
    int best = 0;
    h->kv_suffix = h->L; /* let solve consider every suffix */
    for (int64_t N = 1024; N <= 65536; N *= 2) {
        int d, k;
        double ns;
        solve(env, h, split_primary_tier(env), N, 64, &d, &k, &ns);
        if (d == DIR_COMPUTE && k > best) best = k;
    }
    return best;
}

static int h_init_variant(const PolicyEnv *env, void **state, int variant, KvErr *e)
{
    HState *h = calloc(1, sizeof *h);
    if (!h) return kv_err(e, "out of memory");
    const ModelLayout *ly = env->ly;
    h->variant = variant;
    h->L = ly->m->layers;
    if (h->L > HCACHE_MAXL) {
        free(h);
        return kv_err(e, "hcache: %d layers (at most %d)", ly->m->layers, HCACHE_MAXL);
    }
    for (int st = 0; st < ly->pp; st++) {
        int first, count;
        model_stage_layers(ly, st, &first, &count);
        for (int l = first; l < first + count; l++) h->stage_of[l] = st;
    }
    h->kv_l = (double)model_kv_bytes_per_token_layer(ly);
    h->hid_l = (double)model_hidden_bytes_per_token_layer(ly);
    h->hid_over_kv = h->hid_l / h->kv_l;
    h->hid_bits = variant == V_QUANT ? (int)policy_knob(env, "bits") : 16;
    h->hid_share = split_quant_share(h->hid_bits, ly->m->head_dim);
    h->kv_suffix = 0;
    if (variant == V_HCACHE) {
        double kl = policy_knob(env, "kv_layers");
        h->kv_suffix = kl < 0 ? storage_kv_suffix(env, h) : kl > h->L ? h->L : (int)kl;
    }
    if (variant == V_NAIVE) h->saved_bpt = h->L * h->kv_l;
    else if (variant == V_QUANT) h->saved_bpt = h->L * h->hid_l * h->hid_share;
    else h->saved_bpt = h->L * h->hid_l + h->kv_suffix * h->kv_l;
    h->ref_tier = split_primary_tier(env);
    split_layer_costs(env, h->ref_tier, HCACHE_REF_TOKENS, &h->ref_lc);
    solve(env, h, h->ref_tier, HCACHE_REF_TOKENS, 64, &h->ref_dir, &h->ref_k, &h->ref_ns);
    h->k_min = h->L;
    *state = h;
    return 0;
}

static int hcache_init(const PolicyEnv *env, void **state, KvErr *e) { return h_init_variant(env, state, V_HCACHE, e); }
static int noschd_init(const PolicyEnv *env, void **state, KvErr *e) { return h_init_variant(env, state, V_NOSCHD, e); }
static int naive_init(const PolicyEnv *env, void **state, KvErr *e) { return h_init_variant(env, state, V_NAIVE, e); }
static int quant_init(const PolicyEnv *env, void **state, KvErr *e) { return h_init_variant(env, state, V_QUANT, e); }

static void h_fini(void *state) { free(state); }

static int h_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    HState *h = state;
    Tier tier = q->saved_tier != TIER_NONE ? q->saved_tier : h->ref_tier;
    int64_t N = q->history_tokens, n = q->new_tokens < 1 ? 1 : q->new_tokens;
    if (env->token_budget > 0 && n > env->token_budget) n = env->token_budget;
    uint64_t key = (uint64_t)N * 0x9E3779B97F4A7C15ULL ^ (uint64_t)n * 0xC2B2AE3D27D4EB4FULL ^ (uint64_t)tier;
    Memo *m = &h->memo[(key >> 20) % HCACHE_MEMO];
    if (m->valid && m->N == N && m->n == n && m->tier == (int)tier) {
        h->memo_hits++;
    } else {
        m->valid = 1;
        m->N = N;
        m->n = n;
        m->tier = (int)tier;
        solve(env, h, tier, N, n, &m->dir, &m->k, &m->est_ns);
    }
    modes_of(h, m->dir, m->k, plan->layer_mode);
    if (h->hid_share < 1)
        for (int l = 0; l < h->L; l++)
            if (plan->layer_mode[l] == LM_LOAD_HIDDEN) plan->layer_bytes_scale[l] = (float)h->hid_share;
    h->plans++;
    h->n_dir[m->dir]++;
    if (m->k < h->k_min) h->k_min = m->k;
    if (m->k > h->k_max) h->k_max = m->k;
    h->k_sum += m->k;
    plan->early_layers = 0; /* the split keeps both streams busy: start at once */
    plan->chunk_tokens = 64; /* the storage manager's 64-token chunks, round-robin over the SSDs */
    return 0;
}

static double h_saved(void *state, const PolicyEnv *env)
{
    return ((HState *)state)->saved_bpt;
}

static const char *g_mode_names[] = {"none", "kv", "hidden", "recompute"};
static const char *g_dir_names[] = {"none", "io", "compute"};

static void h_notes(void *state, char *buf, int len)
{
    HState *h = state;
    const LayerCosts *lc = &h->ref_lc;
    int n = snprintf(buf, (size_t)len,
                     "{\"per_request_split\": true, \"reference\": {\"tokens\": %d, \"new_tokens\": 64, \"tier\": \"%s\", "
                     "\"bound\": \"%s\", \"split_layers_other\": %d, \"direction\": \"%s\", \"per_layer_ms\": {\"recompute\": %.4f, "
                     "\"project\": %.4f, \"load_kv\": %.4f, \"load_hidden\": %.4f}, \"estimated_ms\": %.3f}, "
                     "\"plans\": {\"requests\": %llu, \"memo_hits\": %llu, \"none\": %llu, \"io\": %llu, \"compute\": %llu, "
                     "\"split_min\": %d, \"split_max\": %d, \"split_mean\": %.3f}, \"stored_form\": [",
                     HCACHE_REF_TOKENS, tier_name(h->ref_tier == TIER_NONE ? TIER_DRAM : h->ref_tier),
                     h->variant == V_NAIVE ? "naive" : lc->t_hid > lc->t_proj ? "io" : "compute", h->ref_k,
                     g_dir_names[h->ref_dir], lc->t_re / 1e6, lc->t_proj / 1e6, lc->t_kv / 1e6, lc->t_hid / 1e6,
                     h->ref_ns / 1e6, (unsigned long long)h->plans, (unsigned long long)h->memo_hits,
                     (unsigned long long)h->n_dir[DIR_NONE], (unsigned long long)h->n_dir[DIR_IO],
                     (unsigned long long)h->n_dir[DIR_COMPUTE], h->plans ? h->k_min : 0, h->k_max,
                     h->plans ? h->k_sum / (double)h->plans : 0.0);
    /* runs of equal stored forms: {"layers": "0-31", "form": "hidden"} */
    uint8_t form[HCACHE_MAXL];
    for (int l = 0; l < h->L; l++) form[l] = h->variant == V_NAIVE ? LM_LOAD_KV : LM_LOAD_HIDDEN;
    for (int l = 0; l < h->L && n < len - 64;) {
        int md = form[l], a = l, both = l >= h->L - h->kv_suffix;
        while (l < h->L && form[l] == md && (l >= h->L - h->kv_suffix) == both) l++;
        n += snprintf(buf + n, (size_t)(len - n), "%s{\"layers\": \"%d-%d\", \"form\": \"%s%s\"}", a ? ", " : "", a, l - 1,
                      g_mode_names[md], both ? "+kv" : "");
    }
    n += snprintf(buf + n, (size_t)(len - n), "], \"hidden_over_kv_bytes\": %.4f", h->hid_over_kv);
    if (h->variant == V_QUANT)
        n += snprintf(buf + n, (size_t)(len - n), ", \"hidden_bits\": %d, \"stored_share_of_fp16\": %.5f, "
                      "\"stored_over_kv_bytes\": %.4f", h->hid_bits, h->hid_share, h->hid_over_kv * h->hid_share);
    if (h->hid_over_kv > 1 && h->variant != V_NAIVE)
        n += snprintf(buf + n, (size_t)(len - n), ", \"warning\": \"hidden states are %.2fx the KV cache of this "
                      "GQA model: loading them moves more bytes than loading KV\"", h->hid_over_kv);
    if (n < len - 2) snprintf(buf + n, (size_t)(len - n), "}");
}

static const PolicyKnob g_hcache_knobs[] = {
    {.name = "kv_layers", .type = KNOB_INT, .def = 0, .min = -1, .max = 256,
     .help = "last layers whose KV is saved besides their hidden state: 0 hidden states only (default), -1 as the solver needs (compute-bound)"},
};

const KvPolicyOps policy_hcache = {
    .name = "hcache",
    .summary = "load hidden states and re-project K,V per layer; per-request min-max split with recompute (IO-bound) or KV (compute-bound)",
    .init = hcache_init,
    .fini = h_fini,
    .plan_restore = h_plan,
    .saved_bytes_per_token = h_saved,
    .notes = h_notes,
    .save_mode = SAVE_PER_ITERATION,
    .knobs = g_hcache_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_hcache_knobs),
};

const KvPolicyOps policy_hcache_noschd = {
    .name = "hcache-noschd",
    .role = PR_ABLATION,
    .varies = "hcache",
    .summary = "ablation: hidden states for every layer, no split scheduler",
    .init = noschd_init,
    .fini = h_fini,
    .plan_restore = h_plan,
    .saved_bytes_per_token = h_saved,
    .notes = h_notes,
    .save_mode = SAVE_PER_ITERATION,
};

static const PolicyKnob g_hquant_knobs[] = {
    {.name = "bits", .type = KNOB_INT, .def = 8, .min = 4, .max = 8, .n_choices = 2, .choices = {4, 8},
     .help = "bits per stored hidden-state element (one fp16 scale per d_h elements of a token)"},
};

const KvPolicyOps policy_hcache_quant = {
    .name = "hcache-quant",
    .role = PR_VARIANT,
    .varies = "hcache",
    .summary = "hcache with hidden states quantized per token (int8/int4): fewer bytes, a dequantize before each projection",
    .init = quant_init,
    .fini = h_fini,
    .plan_restore = h_plan,
    .saved_bytes_per_token = h_saved,
    .notes = h_notes,
    .save_mode = SAVE_PER_ITERATION,
    .knobs = g_hquant_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_hquant_knobs),
};

const KvPolicyOps policy_naive_hybrid = {
    .name = "naive-hybrid",
    .role = PR_ABLATION,
    .varies = "hcache",
    .summary = "ablation: HCache's per-request split scheduler mixing recompute and KV loads, no hidden states",
    .init = naive_init,
    .fini = h_fini,
    .plan_restore = h_plan,
    .saved_bytes_per_token = h_saved,
    .notes = h_notes,
    .save_mode = SAVE_PER_ITERATION,
};
