/* ideal.c — the reference every policy is measured against (the papers' "Ideal"): the state is
 * already on the GPU, nothing is restored, nothing is saved. TTFT is then queueing + the new input's
 * prefill over the full context. */
#include "policies/policy.h"

static int ideal_plan(void *state, const PolicyEnv *env, const RestoreQuery *q, RestorePlan *plan, KvErr *e)
{
    plan->no_restore = 1;
    return 0;
}

static double ideal_saved(void *state, const PolicyEnv *env)
{
    return 0;
}

const KvPolicyOps policy_ideal = {
    .name = "ideal",
    .role = PR_REFERENCE,
    .summary = "reference: the state is already on the GPU, nothing to restore",
    .plan_restore = ideal_plan,
    .saved_bytes_per_token = ideal_saved,
};
