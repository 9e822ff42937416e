/* recompute.c — restore by prefilling the whole history again, chunked by the engine's token
 * budget (vLLM / DeepSpeed-MII default). Saves nothing. Cost grows quadratically with history
 * through the attention term. Closed form (isolated request): the sum over chunks j of one
 * iteration prefilling C tokens after j·C cached ones, then the new input's iteration(s). */
#include "policies/policy.h"

static int recompute_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    (void)state;
    (void)env;
    (void)e;
    plan->recompute_tokens = q->history_tokens;
    return 0;
}

static double recompute_saved(void *state, const PolicyEnv *env)
{
    (void)state;
    (void)env;
    return 0;
}

const KvPolicyOps policy_recompute = {
    .name = "recompute",
    .summary = "prefill the whole history again in token-budget chunks; saves nothing",
    .plan_restore = recompute_plan,
    .saved_bytes_per_token = recompute_saved,
};
