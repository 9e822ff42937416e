/* recompute.c — restore by prefilling the whole history again, chunked by the engine's token
 * budget (vLLM / DeepSpeed-MII default). Saves nothing. Cost grows quadratically with history
 * through the attention term. Closed form (isolated request): the sum over chunks j of one
 * iteration prefilling C tokens after j·C cached ones, then the new input's iteration(s).
 *
 * Knob recompute.token_budget: the chunk the history is prefilled in, as the paper's baseline ran
 * it: -1 (default) the engine's token_budget (chunked prefill); 0 one unchunked prefill of the
 * history and the new input in a single iteration (vLLM without chunked prefill, as HCache's and
 * Cake's baselines ran); N > 0 chunks of at most N tokens (and at most the iteration's budget). */
#include "policies/policy.h"

static int recompute_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    plan->recompute_tokens = q->history_tokens;
    double tb = policy_knob(env, "token_budget");
    plan->recompute_chunk_tokens = tb < 0 ? 0 : tb == 0 ? -1 : (int64_t)tb;
    return 0;
}

static double recompute_saved(void *state, const PolicyEnv *env)
{
    return 0;
}

static const PolicyKnob g_recompute_knobs[] = {
    {.name = "token_budget", .type = KNOB_INT, .def = -1, .min = -1, .max = 1048576,
     .help = "history tokens per iteration: -1 the engine's token_budget, 0 one unchunked prefill (vLLM without chunked prefill)"},
};

const KvPolicyOps policy_recompute = {
    .name = "recompute",
    .summary = "prefill the whole history again in token-budget chunks (recompute.token_budget=0: unchunked); saves nothing",
    .plan_restore = recompute_plan,
    .saved_bytes_per_token = recompute_saved,
    .knobs = g_recompute_knobs,
    .n_knobs = (int)KV_ARRAY_LEN(g_recompute_knobs),
};
