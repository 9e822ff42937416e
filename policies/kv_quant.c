/* kv_quant.c — KV offload of quantized KV (CacheGen-like, without its arithmetic coding): after each
 * turn the KV is saved with `kv-quant.bits` bits per element (8 or 4; alias quant_bits) and one fp16
 * scale per token, head and K/V, so the bytes shrink to bits/16 + 1/d_h of fp16; on restore it is
 * loaded layer by layer like kv-offload and every layer pays a dequantize of its tokens in the
 * iteration (the cost model's `dequant` op). The quantization at save time runs off the critical
 * path and is not charged. Lossy: the simulator models its cost, not its accuracy.
 *
 * kv-quant.layerwise=false (kv-offload's whole-request onboarding, kv_load.h): the quantized history
 * is loaded completely, in chunk_size-token chunks of every layer, before the new input is
 * prefilled; its dequantize then rides in that prefill's iteration, at the head of every layer (as
 * the layer-wise load's), the state already in place. This is LMCache's CacheGen path: its serde
 * encodes and decodes a chunk of all layers at once (naive_serde/cachegen_encoder.py takes the
 * KV_2LTD format, [2, layers, tokens, hidden]), so its loads are whole chunks, not layers. An
 * isolated request's TTFT is the load of its bytes × (bits/16 + 1/d_h) + the iteration with L
 * dequantizes of its history.
 *
 * kv-quant.adaptive (default off: the fixed level above, numbers unchanged): CacheGen's per-chunk
 * choice of level, with a chunk = one layer of the history (the engine restores layer by layer).
 * Both levels are stored (8 bit and the coarser 4 bit; with bits = 4 only 4 bit), so the saved
 * bytes are the sum of their shares. Per request, in layer order, a layer keeps the configured
 * level when its load arrives by its deadline — the instant the layer walk reaches it, at the
 * bandwidth it gets now (the tier channel's time × (1 + r), r the restorations admitted before it
 * and still running, capped at 16) — else it falls back to the coarser level (whichever arrives
 * first when neither meets it). A prefix of layers may fall back to recompute: every prefix on a
 * grid of L/8 layers is tried with the per-layer levels chosen behind it, and the plan the engine's
 * walk finishes first wins (ties: fewer recomputed layers). On an isolated request a coarser layer
 * only moves every later arrival earlier, so the plan is never slower than the fixed level (k = 0,
 * all layers at `bits`) as the walk estimates it.
 * Adaptive needs layer-wise loading: a whole-request load has one deadline for every chunk, the end
 * of its last one, which the coarser level always brings sooner, so the choice would be 4 bit
 * throughout (kv-quant.bits=4); the combination is refused.
 * Complexity: O(L · 9) walk steps and a handful of cost lookups per plan.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/kv_load.h"
#include "policies/split.h"

#define KVQ_MAXL 256

typedef struct KvqState {
    int adaptive, bits, L;
    KvLoad ld;
    double share_fine, share_coarse;
    int stage_of[KVQ_MAXL];
    uint64_t plans, layers_fine, layers_coarse, layers_rec; /* notes (adaptive) */
} KvqState;

static double kvq_scale(const PolicyEnv *env)
{
    int bits = (int)policy_knob(env, "bits");
    return bits / 16.0 + 1.0 / env->ly->m->head_dim;
}

static int kvq_init(const PolicyEnv *env, void **state, KvErr *e)
{
    KvqState *k = calloc(1, sizeof *k);
    if (!k) return kv_err(e, "out of memory");
    k->adaptive = policy_knob(env, "adaptive") != 0;
    k->bits = (int)policy_knob(env, "bits");
    k->L = env->ly->m->layers;
    if (kv_load_init(env, "kv-quant", &k->ld, e) != 0) {
        free(k);
        return -1;
    }
    if (k->adaptive && !k->ld.layerwise) {
        free(k);
        return kv_err(e, "kv-quant.adaptive=true with kv-quant.layerwise=false: the adaptive level is chosen per layer against "
                         "the moment the layer walk needs it; a whole-request load has one such moment, the end of its last "
                         "chunk, which the coarser level always brings sooner (that is kv-quant.bits=4): drop one of the two");
    }
    if (k->adaptive && k->L > KVQ_MAXL) {
        free(k);
        return kv_err(e, "kv-quant: %d layers (at most %d with adaptive)", env->ly->m->layers, KVQ_MAXL);
    }
    k->share_fine = kvq_scale(env);
    k->share_coarse = split_quant_share(4, env->ly->m->head_dim);
    for (int st = 0; st < env->ly->pp && k->adaptive; st++) {
        int first, count;
        model_stage_layers(env->ly, st, &first, &count);
        for (int l = first; l < first + count; l++) k->stage_of[l] = st;
    }
    *state = k;
    return 0;
}

static void kvq_fini(void *state) { free(state); }

/* the adaptive plan (see the header); writes layer_mode / layer_bytes_scale */
static void kvq_adaptive_plan(KvqState *k, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan)
{
    int L = k->L;
    int64_t N = q->history_tokens, n = q->new_tokens < 1 ? 1 : q->new_tokens;
    if (env->token_budget > 0 && n > env->token_budget) n = env->token_budget;
    Tier tier = q->saved_tier != TIER_NONE ? q->saved_tier : split_primary_tier(env);
    double load = 1.0 + (q->restoring_before < 16 ? q->restoring_before : 16);
    IterCosts ic;
    split_iter_costs(env, N, n, &ic);
    double kv_l = (double)model_kv_bytes_per_token_layer(env->ly), kv_g = (double)model_kv_bytes_per_token_layer_gpu(env->ly);
    double hop[2], h2d[2], share[2] = {k->share_fine, k->share_coarse};
    for (int v = 0; v < 2; v++) {
        split_load_hops(env, tier, N, kv_l * share[v], kv_g * share[v], 0, &hop[v], &h2d[v]);
        hop[v] *= load;
    }
    double comp_load = ic.plain + split_dequant_ns(env, N, 0), start = (double)env->iter_overhead_ns;
    int levels = k->bits > 4 ? 2 : 1, step = L / 8 > 0 ? L / 8 : 1;
    double best = -1;
    int best_k = 0;
    uint8_t lvl[KVQ_MAXL], best_lvl[KVQ_MAXL];
    for (int kk = 0;; kk = kk + step < L ? kk + step : L) {
        IoFlow f;
        memset(&f, 0, sizeof f);
        double cur = start;
        for (int l = 0; l < L; l++) {
            if (l < kk) {
                cur += ic.rec;
                continue;
            }
            /* the deadline: the walk reaches layer l at `cur`; keep the finest level that arrives by
             * then, else the one arriving first */
            int pick = -1;
            double arr = 0;
            IoFlow keep = f;
            for (int v = 0; v < levels; v++) {
                IoFlow t = keep;
                double a = split_flow_load(&t, k->stage_of[l], hop[v], h2d[v]);
                if (pick < 0 || a < arr) pick = v, arr = a, f = t; /* none meets it: the first to arrive */
                if (a <= cur) { /* the finest level meeting the deadline */
                    pick = v, arr = a, f = t;
                    break;
                }
            }
            lvl[l] = (uint8_t)pick;
            if (arr > cur) cur = arr;
            cur += comp_load;
        }
        if (best < 0 || cur < best) {
            best = cur;
            best_k = kk;
            memcpy(best_lvl, lvl, (size_t)L);
        }
        if (kk == L) break;
    }
    for (int l = 0; l < L; l++) {
        if (l < best_k) {
            plan->layer_mode[l] = LM_RECOMPUTE;
            k->layers_rec++;
        } else {
            plan->layer_mode[l] = LM_LOAD_KV;
            plan->layer_bytes_scale[l] = (float)share[best_lvl[l]];
            if (best_lvl[l]) k->layers_coarse++;
            else k->layers_fine++;
        }
    }
    plan->kv_bytes_scale = k->share_fine;
    plan->early_layers = 0; /* the walk waits for each layer's state: start at once */
    k->plans++;
}

static int kvq_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    KvqState *k = state;
    if (k->adaptive) {
        kvq_adaptive_plan(k, env, q, plan);
        return 0;
    }
    return kv_load_plan(&k->ld, env, q, plan, kvq_scale(env));
}

static double kvq_saved(void *state, const PolicyEnv *env)
{
    KvqState *k = state;
    double share = kvq_scale(env);
    if (k->adaptive && k->bits > 4) share += k->share_coarse; /* both levels stored */
    return (double)model_kv_bytes_per_token(env->ly) * share;
}

static void kvq_notes(void *state, char *buf, int len)
{
    KvqState *k = state;
    if (!k->adaptive) { /* the fixed level: no notes (as before the adaptive choice existed) */
        buf[0] = 0;
        return;
    }
    double tot = (double)(k->layers_fine + k->layers_coarse + k->layers_rec);
    snprintf(buf, (size_t)len,
             "{\"adaptive\": true, \"levels_bits\": [%d%s], \"plans\": %llu, \"layer_share\": {\"bits_%d\": %.4f, "
             "\"bits_4\": %.4f, \"recompute\": %.4f}}",
             k->bits, k->bits > 4 ? ", 4" : "", (unsigned long long)k->plans, k->bits,
             tot > 0 ? (double)k->layers_fine / tot : 0.0, tot > 0 && k->bits > 4 ? (double)k->layers_coarse / tot : 0.0,
             tot > 0 ? (double)k->layers_rec / tot : 0.0);
}

static const PolicyKnob g_kvq_knobs[] = {
    {.name = "bits", .type = KNOB_INT, .def = 8, .min = 4, .max = 8, .n_choices = 2, .choices = {4, 8}, .alias = "quant_bits",
     .help = "bits per stored KV element"},
    {.name = "adaptive", .type = KNOB_BOOL, .def = 0, .min = 0, .max = 1,
     .help = "CacheGen's per-chunk level: a layer falls back to 4 bit (both stored) or a prefix to recompute when its deadline is missed at the current bandwidth (layer-wise loading only)"},
    KV_LOAD_KNOBS,
};

const KvPolicyOps policy_kv_quant = {
    .name = "kv-quant",
    .summary = "KV offload of int8/int4-quantized KV (CacheGen-like): fewer bytes to load, a dequantize per layer",
    .init = kvq_init,
    .fini = kvq_fini,
    .plan_restore = kvq_plan,
    .saved_bytes_per_token = kvq_saved,
    .notes = kvq_notes,
    .knobs = g_kvq_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_kvq_knobs),
};
