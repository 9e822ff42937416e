/* kv_offload.c — AttentionStore / LMCache style KV offload: after each turn the session's KV is
 * written out asynchronously (D2H, then DRAM, spilling to SSD or a remote store); at its next turn
 * it is loaded back layer by layer, pipelined with the prefill of the new tokens.
 *
 * Early start: with per-layer load time t_io and per-layer compute t_c of the iteration that
 * prefills the new tokens, loading k = ceil(L·(1 − t_c/t_io)) layers before the iteration starts
 * lets the remaining loads hide behind the compute of all L layers (k = 0 when t_io <= t_c), so the
 * shared iteration is not stalled layer after layer. The finishing time of an isolated restoration
 * is the two-stage pipeline bound: max(L·t_io + t_c, t_io + L·t_c) after admission.
 *
 * Whole-request onboarding (layerwise=false): the history is loaded completely, in chunks of
 * chunk_size tokens of every layer, before its new input is prefilled — what vLLM's
 * OffloadingConnector and LMCache (use_layerwise false, chunk_size 256) do. An isolated
 * restoration then finishes at load + prefill: N·L bytes at the bottleneck hop plus one transfer
 * latency per chunk, then the iteration of the new tokens. kv-quant loads its quantized KV the same
 * two ways (kv_load.h). */
#include <math.h>
#include <stdlib.h>

#include "policies/kv_load.h"

int kv_offload_plan_scaled(const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, double scale)
{
    int L = env->ly->m->layers;
    int64_t N = q->history_tokens;
    for (int l = 0; l < L; l++) plan->layer_mode[l] = LM_LOAD_KV;
    plan->kv_bytes_scale = scale;
    double per_layer = (double)model_kv_bytes_per_token_layer(env->ly) * scale;
    double per_gpu = (double)model_kv_bytes_per_token_layer_gpu(env->ly) * scale;
    double t_io = env->est_load_layer_ns(env->core, q->saved_tier, N, per_layer, per_gpu);
    double t_c = env->est_layer_ns(env->core, q->new_tokens, N);
    if (scale < 1 && cost_has(env->cost, OP_DEQUANT)) t_c += cost_lookup_ns(env->cost, OP_DEQUANT, N, 0, 0);
    int k = 0;
    if (t_io > t_c && t_io > 0) k = (int)ceil((double)L * (1.0 - t_c / t_io) - 1e-9);
    if (k < 0) k = 0;
    if (k > L) k = L;
    plan->early_layers = k;
    return 0;
}

int kv_load_init(const PolicyEnv *env, const char *policy, KvLoad *ld, KvErr *e)
{
    ld->layerwise = policy_knob(env, "layerwise") != 0;
    ld->chunk = (int64_t)policy_knob(env, "chunk_size");
    if (ld->layerwise && ld->chunk != 256)
        return kv_err(e, "%s.chunk_size=%lld: the chunk of whole-request loading; set %s.layerwise=false with it", policy,
                      (long long)ld->chunk, policy);
    return 0;
}

int kv_load_plan(const KvLoad *ld, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, double scale)
{
    if (ld->layerwise) return kv_offload_plan_scaled(env, q, plan, scale);
    plan->tokenwise = 1;
    plan->whole = 1;
    plan->io_chunk_tokens = ld->chunk;
    plan->kv_bytes_scale = scale;
    return 0;
}

static int offload_init(const PolicyEnv *env, void **state, KvErr *e)
{
    KvLoad *o = malloc(sizeof *o);
    if (!o) return kv_err(e, "kv-offload: out of memory");
    if (kv_load_init(env, "kv-offload", o, e) != 0) {
        free(o);
        return -1;
    }
    *state = o;
    return 0;
}

static void offload_fini(void *state) { free(state); }

static int offload_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    return kv_load_plan(state, env, q, plan, 1.0);
}

static double offload_saved(void *state, const PolicyEnv *env)
{
    return (double)model_kv_bytes_per_token(env->ly);
}

static const PolicyKnob g_offload_knobs[] = {KV_LOAD_KNOBS};

const KvPolicyOps policy_kv_offload = {
    .name = "kv-offload",
    .summary = "save KV after each turn (DRAM, then SSD/remote); load it back layer by layer, pipelined",
    .init = offload_init,
    .fini = offload_fini,
    .plan_restore = offload_plan,
    .saved_bytes_per_token = offload_saved,
    .knobs = g_offload_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_offload_knobs),
};
