/* adaptive.c — a GQA-aware restoration policy beyond the papers: per layer and per request it brings
 * each layer's state back in whichever stored form restores fastest, or recomputes it.
 *
 * Forms of one layer's state for N history tokens (POLICIES.md "Shared arithmetic"):
 *   kv16 / kv8 / kv4   the layer's KV, fp16 or quantized per token (one fp16 scale per token, head and
 *                      K/V: bits/16 + 1/d_h of the fp16 bytes); a dequantize per layer when quantized
 *   h16 / h8 / h4      the layer's input hidden state (D per token: half the KV of an MHA model, 2x a
 *                      GQA-4 model's, 4x a GQA-8 model's), quantized the same way (a scale per d_h
 *                      elements), then K,V projected (+RoPE; all-gathered under TP), dequantized first
 *   rec                recompute the layer from the tokens (nothing stored; a prefix of the layers)
 *
 * Stored layout (decided once per run, at init): a primary form P on every layer and optionally a
 * secondary form Q on the last j layers (j on a grid of L/8 steps), within the storage budget
 *   L·bytes(P) + j·bytes(Q) <= adaptive.storage_budget × the model's fp16 KV bytes per token
 * (the budget is stored bytes per token, as a multiple of what kv-offload stores: 1 = as much as
 * kv-offload, 0.5 = half). Forms narrower than adaptive.min_bits are not considered (the accuracy
 * side is an input: 16 = lossless only, the default). Each layout is scored by the mean of its
 * best per-request plan over reference histories 1K..16K (doubling) on the save tier with 64 new
 * tokens (an isolated request, the engine's walk); the lowest score wins, ties to the smaller
 * storage, then to the wider form (enumeration order kv16, h16, kv8, h8, kv4, h4).
 *
 * Per request (plan_restore): candidates recompute the first k layers (k = 0..L), then each other
 * layer comes back in its primary form except the last jq (jq on the same grid up to j) in the
 * secondary form; each is costed as the engine runs it (split_forms_ns: loads in layer order through
 * the tier's channel and the stage's H2D link, the walk after the iteration's overhead, each layer
 * the new input's compute plus its restoration work) and the fastest wins (ties: smaller k, then
 * smaller jq). "Under the current load": with adaptive.load_aware (default on) the tier channel's
 * time is multiplied by 1 + the restorations admitted before it and still in progress (capped at
 * 16) — its fair share of a channel those requests also use — which moves busy-period requests
 * toward recompute and the smaller forms; an isolated request is planned unloaded. Plans are
 * memoised per (tier, N, new-input chunk, load) in a direct-mapped cache (results do not depend on
 * it).
 *
 * Not responsible for: accuracy (quantization loss is not simulated), moving bytes (the engine).
 * Complexity: init O(forms² · grid · refs · L²); a plan O(grid · L²), O(1) on a memo hit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/split.h"

#define AD_MAXL 256
#define AD_MEMO 1024
#define AD_GRID 8 /* j and jq in steps of L/AD_GRID */

enum { F_REC = 0, F_KV16, F_H16, F_KV8, F_H8, F_KV4, F_H4, F_N };
static const char *g_form_names[F_N] = {"rec", "kv16", "h16", "kv8", "h8", "kv4", "h4"};
static const int g_form_bits[F_N] = {0, 16, 16, 8, 8, 4, 4};
static const int g_form_hidden[F_N] = {0, 0, 1, 0, 1, 0, 1};

typedef struct AdMemo {
    int64_t N, n;
    int tier, load, valid;
    int k, jq;
    double est_ns;
} AdMemo;

typedef struct AdState {
    int L, load_aware, min_bits;
    int stage_of[AD_MAXL];
    double kv_l, hid_l, share[F_N], bytes_l[F_N]; /* per form: share of fp16, stored bytes per token and layer */
    double budget_bpt;
    int P, Q, j;       /* the stored layout: P everywhere, Q on the last j layers (F_REC: none) */
    double saved_bpt, layout_score_ns;
    AdMemo memo[AD_MEMO];
    uint64_t plans, memo_hits, loaded_plans, layers_of[F_N];
    int k_min, k_max;
} AdState;

/* per-form costs of one layer for N history tokens on tier with n new tokens; load factor f */
static void form_costs(const PolicyEnv *env, const AdState *a, Tier tier, int64_t N, int64_t n, double f, FormCosts *fc)
{
    IterCosts ic;
    split_iter_costs(env, N, n, &ic);
    memset(fc, 0, sizeof *fc);
    double T = env->ly->tp, kv_g = (double)model_kv_bytes_per_token_layer_gpu(env->ly);
    fc->comp[F_REC] = ic.rec;
    for (int m = F_KV16; m < F_N; m++) {
        int hid = g_form_hidden[m];
        double sc = a->share[m];
        fc->comp[m] = hid ? ic.hid : ic.plain;
        if (sc < 1) fc->comp[m] += split_dequant_ns(env, N, hid);
        double bl = (hid ? a->hid_l : a->kv_l) * sc, bg = (hid ? a->hid_l / T : kv_g) * sc;
        split_load_hops(env, tier, N, bl, bg, 64, &fc->hop[m], &fc->h2d[m]);
        fc->hop[m] *= f;
        fc->loads[m] = 1;
    }
    fc->start_ns = (double)env->iter_overhead_ns;
}

static void modes_of(const AdState *a, int P, int Q, int k, int jq, uint8_t *form)
{
    for (int l = 0; l < a->L; l++) form[l] = (uint8_t)(l < k ? F_REC : l >= a->L - jq && Q != F_REC ? Q : P);
}

/* the best (k, jq) for layout (P, Q, j) under fc; kstep > 1: a coarse scan (layout scoring) */
static double best_plan(const AdState *a, const FormCosts *fc, int P, int Q, int j, int kstep, int *bk, int *bj)
{
    uint8_t form[AD_MAXL];
    double best = -1;
    int step = a->L / AD_GRID > 0 ? a->L / AD_GRID : 1;
    *bk = a->L;
    *bj = 0;
    for (int jq = 0;; jq += step) {
        if (jq > j) jq = j;
        int kmax = P == F_REC ? 0 : a->L - jq; /* nothing stored: only k = L (below) */
        for (int k = 0; k <= kmax; k += kstep) {
            modes_of(a, P, Q, k, jq, form);
            double v = split_forms_ns(a->L, a->stage_of, form, fc);
            if (best < 0 || v < best) best = v, *bk = k, *bj = jq;
        }
        if (Q == F_REC || jq >= j) break;
    }
    modes_of(a, P, Q, a->L, 0, form); /* all recomputed: always possible */
    double v = split_forms_ns(a->L, a->stage_of, form, fc);
    if (best < 0 || v < best) best = v, *bk = a->L, *bj = 0;
    return best;
}

static int form_allowed(const AdState *a, int m) { return m == F_REC || g_form_bits[m] >= a->min_bits; }

static void choose_layout(const PolicyEnv *env, AdState *a)
{
    enum { NREF = 5 };
    FormCosts fc[NREF];
    Tier tier = split_primary_tier(env);
    for (int i = 0; i < NREF; i++) form_costs(env, a, tier, (int64_t)1024 << i, 64, 1.0, &fc[i]);
    int step = a->L / AD_GRID > 0 ? a->L / AD_GRID : 1, kstep = a->L / 16 > 0 ? a->L / 16 : 1;
    double best = -1, best_bytes = 0;
    a->P = F_REC, a->Q = F_REC, a->j = 0;
    for (int P = F_REC; P < F_N; P++) {
        if (!form_allowed(a, P)) continue;
        for (int Q = F_REC; Q < F_N; Q++) {
            if (!form_allowed(a, Q) || (Q != F_REC && (Q == P || P == F_REC))) continue;
            for (int j = Q == F_REC ? 0 : step;; j += step) {
                if (j > a->L) j = a->L;
                double bytes = a->L * a->bytes_l[P] + j * a->bytes_l[Q];
                if (bytes <= a->budget_bpt * (1 + 1e-12)) {
                    double s = 0;
                    int k, jq;
                    for (int i = 0; i < NREF; i++) s += best_plan(a, &fc[i], P, Q, j, kstep, &k, &jq);
                    s /= NREF;
                    if (best < 0 || s < best * (1 - 1e-9) || (s <= best * (1 + 1e-9) && bytes < best_bytes)) {
                        best = s, best_bytes = bytes;
                        a->P = P, a->Q = Q, a->j = j;
                    }
                }
                if (Q == F_REC || j >= a->L) break;
            }
        }
    }
    a->saved_bpt = best_bytes;
    a->layout_score_ns = best;
}

static int ad_init(const PolicyEnv *env, void **state, KvErr *e)
{
    AdState *a = calloc(1, sizeof *a);
    if (!a) return kv_err(e, "out of memory");
    const ModelLayout *ly = env->ly;
    a->L = ly->m->layers;
    if (a->L > AD_MAXL) {
        free(a);
        return kv_err(e, "adaptive: %d layers (at most %d)", ly->m->layers, AD_MAXL);
    }
    for (int st = 0; st < ly->pp; st++) {
        int first, count;
        model_stage_layers(ly, st, &first, &count);
        for (int l = first; l < first + count; l++) a->stage_of[l] = st;
    }
    a->load_aware = policy_knob(env, "load_aware") != 0;
    a->min_bits = (int)policy_knob(env, "min_bits");
    a->kv_l = (double)model_kv_bytes_per_token_layer(ly);
    a->hid_l = (double)model_hidden_bytes_per_token_layer(ly);
    for (int m = F_KV16; m < F_N; m++) {
        a->share[m] = split_quant_share(g_form_bits[m], ly->m->head_dim);
        a->bytes_l[m] = (g_form_hidden[m] ? a->hid_l : a->kv_l) * a->share[m];
    }
    a->budget_bpt = policy_knob(env, "storage_budget") * (double)model_kv_bytes_per_token(ly);
    choose_layout(env, a);
    a->k_min = a->L;
    *state = a;
    return 0;
}

static void ad_fini(void *state) { free(state); }

static int ad_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    AdState *a = state;
    Tier tier = q->saved_tier != TIER_NONE ? q->saved_tier : split_primary_tier(env);
    int64_t N = q->history_tokens, n = q->new_tokens < 1 ? 1 : q->new_tokens;
    if (env->token_budget > 0 && n > env->token_budget) n = env->token_budget;
    int load = a->load_aware ? (q->restoring_before < 16 ? q->restoring_before : 16) : 0;
    uint64_t key = (uint64_t)N * 0x9E3779B97F4A7C15ULL ^ (uint64_t)n * 0xC2B2AE3D27D4EB4FULL ^ (uint64_t)tier ^
                   (uint64_t)load * 0x165667B19E3779F9ULL;
    AdMemo *m = &a->memo[(key >> 20) % AD_MEMO];
    if (m->valid && m->N == N && m->n == n && m->tier == (int)tier && m->load == load) {
        a->memo_hits++;
    } else {
        FormCosts fc;
        form_costs(env, a, tier, N, n, 1.0 + load, &fc);
        m->valid = 1, m->N = N, m->n = n, m->tier = (int)tier, m->load = load;
        m->est_ns = best_plan(a, &fc, a->P, a->Q, a->j, 1, &m->k, &m->jq);
    }
    uint8_t form[AD_MAXL];
    modes_of(a, a->P, a->Q, m->k, m->jq, form);
    int loaded = 0;
    for (int l = 0; l < a->L; l++) {
        int f = form[l];
        a->layers_of[f]++;
        plan->layer_mode[l] = f == F_REC ? LM_RECOMPUTE : g_form_hidden[f] ? LM_LOAD_HIDDEN : LM_LOAD_KV;
        plan->layer_bytes_scale[l] = f != F_REC && a->share[f] < 1 ? (float)a->share[f] : 0.0f;
        loaded |= f != F_REC;
    }
    a->plans++;
    a->loaded_plans += (uint64_t)loaded;
    if (m->k < a->k_min) a->k_min = m->k;
    if (m->k > a->k_max) a->k_max = m->k;
    plan->early_layers = 0; /* the walk waits for each layer's state: start at once */
    plan->chunk_tokens = 64; /* HCache's storage manager: 64-token chunks round-robin over the SSDs */
    return 0;
}

static double ad_saved(void *state, const PolicyEnv *env)
{
    return ((AdState *)state)->saved_bpt;
}

static void ad_notes(void *state, char *buf, int len)
{
    AdState *a = state;
    int n = snprintf(buf, (size_t)len,
                     "{\"stored_layout\": {\"primary\": \"%s\", \"secondary\": \"%s\", \"secondary_last_layers\": %d, "
                     "\"bytes_per_token\": %.0f, \"budget_bytes_per_token\": %.0f, \"over_kv_bytes\": %.4f, "
                     "\"reference_mean_ms\": %.4f}, \"hidden_over_kv_bytes\": %.4f, \"min_bits\": %d, \"load_aware\": %d, "
                     "\"plans\": {\"requests\": %llu, \"memo_hits\": %llu, \"with_loads\": %llu, \"recompute_prefix_min\": %d, "
                     "\"recompute_prefix_max\": %d}, \"layers_by_form\": {",
                     g_form_names[a->P], g_form_names[a->Q], a->Q == F_REC ? 0 : a->j, a->saved_bpt, a->budget_bpt,
                     a->saved_bpt / (a->L * a->kv_l), a->layout_score_ns / 1e6, a->hid_l / a->kv_l, a->min_bits,
                     a->load_aware, (unsigned long long)a->plans, (unsigned long long)a->memo_hits,
                     (unsigned long long)a->loaded_plans, a->plans ? a->k_min : 0, a->k_max);
    for (int f = 0; f < F_N && n < len - 40; f++)
        n += snprintf(buf + n, (size_t)(len - n), "%s\"%s\": %llu", f ? ", " : "", g_form_names[f],
                      (unsigned long long)a->layers_of[f]);
    if (n < len - 3) snprintf(buf + n, (size_t)(len - n), "}}");
}

static const PolicyKnob g_ad_knobs[] = {
    {.name = "storage_budget", .type = KNOB_REAL, .def = 1.0, .min = 0, .max = 16,
     .help = "stored bytes per token as a multiple of the model's fp16 KV bytes per token (1 = what kv-offload stores)"},
    {.name = "min_bits", .type = KNOB_INT, .def = 16, .min = 4, .max = 16, .n_choices = 3, .choices = {4, 8, 16},
     .help = "narrowest stored element width allowed (16: lossless forms only; 8 or 4 admit quantized KV and hidden states)"},
    {.name = "load_aware", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1,
     .help = "plan with the tier channel shared by the restorations admitted before (1 + their count)"},
};

const KvPolicyOps policy_adaptive = {
    .name = "adaptive",
    .summary = "per layer and request the fastest stored form (KV or hidden state, fp16 or quantized) or recompute, within a storage budget",
    .init = ad_init,
    .fini = ad_fini,
    .plan_restore = ad_plan,
    .saved_bytes_per_token = ad_saved,
    .notes = ad_notes,
    .save_mode = SAVE_PER_ITERATION,
    .knobs = g_ad_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_ad_knobs),
};
