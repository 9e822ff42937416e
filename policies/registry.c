/* registry.c — the table of built-in restoration policies; see policy.h. */
#include <string.h>

#include "policies/policy.h"

extern const KvPolicyOps policy_recompute;
extern const KvPolicyOps policy_kv_offload;
extern const KvPolicyOps policy_hcache;
extern const KvPolicyOps policy_hcache_noschd;
extern const KvPolicyOps policy_naive_hybrid;
extern const KvPolicyOps policy_cake;
extern const KvPolicyOps policy_cacheflow;
extern const KvPolicyOps policy_ideal;
extern const KvPolicyOps policy_kv_quant;

static const KvPolicyOps *const g_policies[] = {
    &policy_recompute, &policy_kv_offload, &policy_hcache, &policy_hcache_noschd,
    &policy_naive_hybrid, &policy_cake, &policy_cacheflow, &policy_kv_quant, &policy_ideal,
};

int policy_count(void) { return (int)KV_ARRAY_LEN(g_policies); }
const KvPolicyOps *policy_at(int i) { return i >= 0 && i < policy_count() ? g_policies[i] : NULL; }

const KvPolicyOps *policy_find(const char *name, KvErr *e)
{
    for (int i = 0; i < policy_count(); i++)
        if (strcmp(g_policies[i]->name, name) == 0) return g_policies[i];
    char list[512] = "";
    size_t len = 0;
    for (int i = 0; i < policy_count(); i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", g_policies[i]->name);
    kv_err(e, "unknown policy '%s' (known: %s)", name, list);
    return NULL;
}

int policy_registry_check(const KvPolicyOps *const *ops, int n, KvErr *e)
{
    for (int i = 0; i < n; i++) {
        const KvPolicyOps *p = ops[i];
        if (!p) return kv_err(e, "policy table entry %d is NULL", i);
        if (!p->name || !*p->name) return kv_err(e, "policy table entry %d has no name", i);
        if (!p->summary) return kv_err(e, "policy '%s': missing required slot 'summary'", p->name);
        if (!p->plan_restore) return kv_err(e, "policy '%s': missing required slot 'plan_restore'", p->name);
        if (!p->saved_bytes_per_token)
            return kv_err(e, "policy '%s': missing required slot 'saved_bytes_per_token'", p->name);
        for (int j = 0; j < i; j++)
            if (strcmp(ops[j]->name, p->name) == 0) return kv_err(e, "policy '%s' is registered twice", p->name);
    }
    return 0;
}
