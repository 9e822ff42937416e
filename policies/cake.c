/* cake.c — Cake ("Compute Or Load KV Cache? Why Not Both?", ICML'25): token-wise, bidirectional,
 * per request. The GPU prefills the history forward in chunks of the engine's token budget, each
 * chunk attending to the chunks before it, while an IO worker loads KV chunks of 128 tokens backward
 * from the end; when the compute pointer reaches loaded tokens both stop, the new input is prefilled
 * and decoding starts. The meet point is found at run time, with no cost model. Restoration compute
 * gets the token budget last: decode > ordinary prefill > restoration.
 * Closed form (isolated request, uniform per-token costs): the pointers meet at m where
 * compute(m) = io(N − m), i.e. m ≈ N·r_c/(r_c + r_io) for compute and IO rates in tokens/s,
 * within one chunk (the last compute chunk or IO chunk in flight). */
#include "policies/policy.h"

#define CAKE_IO_CHUNK 128

static int cake_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    plan->tokenwise = 1;
    plan->io_chunk_tokens = CAKE_IO_CHUNK;
    plan->comp_chunk_tokens = 0; /* the token budget */
    plan->low_priority = 1;
    return 0;
}

static double cake_saved(void *state, const PolicyEnv *env)
{
    return (double)model_kv_bytes_per_token(env->ly);
}

const KvPolicyOps policy_cake = {
    .name = "cake",
    .summary = "token-wise two pointers per request: recompute forward, load 128-token KV chunks backward, meet at run time",
    .plan_restore = cake_plan,
    .saved_bytes_per_token = cake_saved,
};
