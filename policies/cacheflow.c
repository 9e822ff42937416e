/* cacheflow.c — CacheFlow (v1, arXiv April 2026): three axes of restoration plus a batch-aware IO
 * scheduler, each switchable for ablations: knobs cacheflow.token, .layer, .gpu, .batch (--set
 * cacheflow.gpu=0; the older spellings cf_token=0 etc. are aliases).
 *
 *  token axis  — token-wise two pointers with 512-token chunks (FlashAttention blocks): compute
 *                forward, load KV backward, meet at run time.
 *  layer axis  — layer-wise two pointers: the first ℓ layers are recomputed for all N tokens while
 *                the KV of the others is loaded. With uniform per-layer costs the best split is
 *                ℓ* = L·T_io/(T_comp+T_io) and the time T* = T_comp·T_io/(T_comp+T_io) (harmonic
 *                bound); here ℓ is the integer argmin of max(ℓ·t_re, (L−ℓ)·t_kv) from the cost model.
 *  choice      — layer-wise for prefixes shorter than L_Δ, token-wise from L_Δ on; L_Δ is where the
 *                two estimated restoration times cross, computed once per run from the cost model
 *                (token-wise pays the engine's per-iteration overhead on every compute chunk;
 *                layer-wise moves whole layers and is limited to integer splits).
 *  GPU axis    — with S pipeline stages CacheFlow stores the activation entering each stage (S−1
 *                hidden-state vectors per token, saved and accounted) so that every stage restores
 *                its own layers at once: layer-wise two pointers inside each stage (its first layers
 *                recomputed from its boundary activation, the others' KV loaded over the stage's own
 *                links), ideally T* / S. With S > 1 and this axis on, restoration is layer-wise per
 *                stage. Shared links (one NIC or SSD array per node) keep the IO part from scaling.
 *  batch axis  — the shared IO channel is given, unit by unit, to the pending request with the most
 *                history left to restore (re-ranked at every unit); cf_batch=0 falls back to FIFO.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policies/split.h"

#define CF_CHUNK 512

typedef struct CfState {
    int token, layer, gpu, batch;
    int64_t l_delta; /* token-wise from this many history tokens on; INT64_MAX: never */
    Tier tier;
    int L, S;
    uint64_t n_layerwise, n_tokenwise;
} CfState;

/* estimated layer-wise restoration time of N tokens at the best integer split; *ell receives it */
static double cf_layer_ns(const PolicyEnv *env, Tier tier, int64_t N, int *ell)
{
    LayerCosts c;
    split_layer_costs(env, tier, N, &c);
    double ns;
    int best = split_layerwise(env->ly->m->layers, c.t_re, c.t_kv, &ns);
    if (ell) *ell = best;
    return ns;
}

/* estimated token-wise restoration time: chunks of C tokens computed forward (each an iteration with
 * its overhead), KV of the rest loaded; the best meet point m on chunk boundaries */
static double cf_token_ns(const PolicyEnv *env, Tier tier, int64_t N)
{
    LayerCosts c;
    split_layer_costs(env, tier, N, &c);
    int L = env->ly->m->layers;
    double io_per_token = N > 0 ? L * c.t_kv / (double)N : 0;
    double comp = 0, best = L * c.t_kv; /* m = 0: load everything */
    for (int64_t m = 0; m < N;) {
        int64_t ch = N - m < CF_CHUNK ? N - m : CF_CHUNK;
        comp += (double)env->iter_overhead_ns + L * env->est_layer_ns(env->core, ch, m);
        m += ch;
        double io = io_per_token * (double)(N - m), v = comp > io ? comp : io;
        if (v < best) best = v;
        if (comp > best) break;
    }
    return best;
}

static int cf_init(const PolicyEnv *env, void **state, KvErr *e)
{
    CfState *cf = calloc(1, sizeof *cf);
    if (!cf) return kv_err(e, "out of memory");
    cf->token = policy_knob(env, "token") != 0;
    cf->layer = policy_knob(env, "layer") != 0;
    cf->gpu = policy_knob(env, "gpu") != 0;
    cf->batch = policy_knob(env, "batch") != 0;
    cf->L = env->ly->m->layers;
    cf->S = env->ly->pp;
    cf->tier = split_primary_tier(env);
    cf->l_delta = INT64_MAX;
    if (cf->token && cf->layer) {
        for (int64_t N = 128; N <= 262144; N *= 2)
            if (cf_token_ns(env, cf->tier, N) < cf_layer_ns(env, cf->tier, N, NULL)) {
                cf->l_delta = N;
                break;
            }
    } else if (cf->token) {
        cf->l_delta = 0;
    }
    *state = cf;
    return 0;
}

static void cf_fini(void *state) { free(state); }

static int cf_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    (void)e;
    CfState *cf = state;
    if (!cf->token && !cf->layer) { /* both axes off: plain KV load, layer by layer */
        for (int l = 0; l < cf->L; l++) plan->layer_mode[l] = LM_LOAD_KV;
        plan->early_layers = 0;
        return 0;
    }
    if (cf->gpu && cf->S > 1 && cf->layer) { /* each stage splits its own layers */
        cf->n_layerwise++;
        plan->stage_parallel = 1;
        plan->early_layers = 0;
        LayerCosts c;
        split_layer_costs(env, q->saved_tier, q->history_tokens, &c);
        for (int st = 0; st < cf->S; st++) {
            int first, count;
            model_stage_layers(env->ly, st, &first, &count);
            int best = split_layerwise(count, c.t_re, c.t_kv, NULL);
            for (int l = first; l < first + count; l++) plan->layer_mode[l] = l < first + best ? LM_RECOMPUTE : LM_LOAD_KV;
        }
        return 0;
    }
    if (q->history_tokens >= cf->l_delta) {
        cf->n_tokenwise++;
        plan->tokenwise = 1;
        plan->io_chunk_tokens = CF_CHUNK;
        plan->comp_chunk_tokens = CF_CHUNK;
        return 0;
    }
    cf->n_layerwise++;
    int ell = 0;
    cf_layer_ns(env, q->saved_tier, q->history_tokens, &ell);
    for (int l = 0; l < cf->L; l++) plan->layer_mode[l] = l < ell ? LM_RECOMPUTE : LM_LOAD_KV;
    plan->early_layers = 0;
    return 0;
}

static double cf_saved(void *state, const PolicyEnv *env)
{
    CfState *cf = state;
    double b = (double)model_kv_bytes_per_token(env->ly);
    if (cf->gpu && cf->S > 1) b += (cf->S - 1) * (double)model_boundary_bytes_per_token(env->ly);
    return b;
}

/* most remaining history first; ties keep arrival order */
static int cf_pick(void *state, const IoChoice *u, int n)
{
    CfState *cf = state;
    if (!cf->batch) return 0;
    int best = 0;
    for (int i = 1; i < n; i++)
        if (u[i].remaining_restore_tokens > u[best].remaining_restore_tokens) best = i;
    return best;
}

static void cf_notes(void *state, char *buf, int len)
{
    CfState *cf = state;
    snprintf(buf, (size_t)len,
             "{\"axes\": {\"token\": %d, \"layer\": %d, \"gpu\": %d, \"batch\": %d}, \"l_delta_tokens\": %lld, "
             "\"layerwise_restores\": %llu, \"tokenwise_restores\": %llu, \"boundary_activations_saved\": %d, "
             "\"stage_parallel\": %d}",
             cf->token, cf->layer, cf->gpu, cf->batch, cf->l_delta == INT64_MAX ? -1LL : (long long)cf->l_delta,
             (unsigned long long)cf->n_layerwise, (unsigned long long)cf->n_tokenwise, cf->gpu && cf->S > 1 ? cf->S - 1 : 0,
             cf->gpu && cf->S > 1 && cf->layer);
}

static const PolicyKnob g_cf_knobs[] = {
    {.name = "token", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "cf_token",
     .help = "token axis: token-wise two pointers for long prefixes"},
    {.name = "layer", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "cf_layer",
     .help = "layer axis: layer-wise two pointers for short prefixes"},
    {.name = "gpu", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "cf_gpu",
     .help = "GPU axis: boundary activations, every pipeline stage restores its own layers"},
    {.name = "batch", .type = KNOB_BOOL, .def = 1, .min = 0, .max = 1, .alias = "cf_batch",
     .help = "batch axis: most-remaining-first IO order (0: FIFO)"},
};

const KvPolicyOps policy_cacheflow = {
    .name = "cacheflow",
    .summary = "token- or layer-wise two pointers (threshold from the cost model), boundary activations, most-remaining-first IO",
    .init = cf_init,
    .fini = cf_fini,
    .plan_restore = cf_plan,
    .saved_bytes_per_token = cf_saved,
    .io_pick = cf_pick,
    .notes = cf_notes,
    .knobs = g_cf_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_cf_knobs),
};
