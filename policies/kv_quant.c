/* kv_quant.c — KV offload of quantized KV (CacheGen-like, without its arithmetic coding and per-chunk
 * level adaptation): after each turn the KV is saved with `kv-quant.bits` bits per element (8 or 4;
 * alias quant_bits)
 * and one fp16 scale per token, head and K/V, so the bytes shrink to bits/16 + 1/d_h of fp16; on
 * restore it is loaded layer by layer like kv-offload and every layer pays a dequantize of its tokens
 * in the iteration (the cost model's `dequant` op). The quantization at save time runs off the
 * critical path and is not charged. Lossy: the simulator models its cost, not its accuracy. */
#include "policies/policy.h"

int kv_offload_plan_scaled(const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, double scale);

static double kvq_scale(const PolicyEnv *env)
{
    int bits = (int)policy_knob(env, "bits");
    return bits / 16.0 + 1.0 / env->ly->m->head_dim;
}

static int kvq_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    (void)state;
    (void)e;
    return kv_offload_plan_scaled(env, q, plan, kvq_scale(env));
}

static double kvq_saved(void *state, const PolicyEnv *env)
{
    (void)state;
    return (double)model_kv_bytes_per_token(env->ly) * kvq_scale(env);
}

static const PolicyKnob g_kvq_knobs[] = {
    {.name = "bits", .type = KNOB_INT, .def = 8, .min = 4, .max = 8, .n_choices = 2, .choices = {4, 8}, .alias = "quant_bits",
     .help = "bits per stored KV element"},
};

const KvPolicyOps policy_kv_quant = {
    .name = "kv-quant",
    .summary = "KV offload of int8/int4-quantized KV (CacheGen-like): fewer bytes to load, a dequantize per layer",
    .plan_restore = kvq_plan,
    .saved_bytes_per_token = kvq_saved,
    .knobs = g_kvq_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_kvq_knobs),
};
