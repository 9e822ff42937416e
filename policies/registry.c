/* registry.c — the table of built-in restoration policies, its consistency check and the knob
 * accessors; see policy.h. Lookups are linear (a dozen policies, a few knobs each). */
#include <math.h>
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
extern const KvPolicyOps policy_adaptive;
extern const KvPolicyOps policy_hcache_quant;
extern const KvPolicyOps policy_hcache_cf;

static const KvPolicyOps *const g_policies[] = {
    &policy_recompute, &policy_kv_offload, &policy_hcache, &policy_hcache_noschd,
    &policy_naive_hybrid, &policy_cake, &policy_cacheflow, &policy_kv_quant, &policy_ideal,
    &policy_hcache_quant, &policy_adaptive, &policy_hcache_cf, /* beyond the papers (docs/findings-method.md) */
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

static int knob_name_ok(const char *s)
{
    if (!s || !*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
    return 1;
}

static int knob_table_check(const KvPolicyOps *p, KvErr *e)
{
    if (p->n_knobs < 0 || p->n_knobs > POLICY_MAX_KNOBS)
        return kv_err(e, "policy '%s': %d knobs (at most %d)", p->name, p->n_knobs, POLICY_MAX_KNOBS);
    if (p->n_knobs > 0 && !p->knobs) return kv_err(e, "policy '%s': n_knobs %d but no knob table", p->name, p->n_knobs);
    for (int i = 0; i < p->n_knobs; i++) {
        const PolicyKnob *k = &p->knobs[i];
        if (!knob_name_ok(k->name)) return kv_err(e, "policy '%s': knob %d: name must be [a-z0-9_]+", p->name, i);
        if (!k->help || !*k->help) return kv_err(e, "policy '%s': knob '%s' has no help text", p->name, k->name);
        if (k->type != KNOB_BOOL && k->type != KNOB_INT && k->type != KNOB_REAL)
            return kv_err(e, "policy '%s': knob '%s': unknown type %d", p->name, k->name, (int)k->type);
        if (!isfinite(k->min) || !isfinite(k->max) || k->min > k->max)
            return kv_err(e, "policy '%s': knob '%s': range [%g, %g] is not a finite interval", p->name, k->name, k->min, k->max);
        if (k->type == KNOB_BOOL && (k->min != 0 || k->max != 1))
            return kv_err(e, "policy '%s': knob '%s': a bool's range must be [0, 1]", p->name, k->name);
        if (k->type != KNOB_REAL && (k->min != floor(k->min) || k->max != floor(k->max)))
            return kv_err(e, "policy '%s': knob '%s': integer range with fractional bounds", p->name, k->name);
        if (k->n_choices < 0 || k->n_choices > POLICY_KNOB_MAX_CHOICES)
            return kv_err(e, "policy '%s': knob '%s': %d choices (at most %d)", p->name, k->name, k->n_choices,
                          POLICY_KNOB_MAX_CHOICES);
        for (int c = 0; c < k->n_choices; c++)
            if (!(k->choices[c] >= k->min && k->choices[c] <= k->max))
                return kv_err(e, "policy '%s': knob '%s': choice %g outside [%g, %g]", p->name, k->name, k->choices[c],
                              k->min, k->max);
        if (policy_knob_check(p, k, k->def, e) != 0) return kv_err_prefix(e, "policy '%s': bad default: ", p->name);
        for (int j = 0; j < i; j++)
            if (!strcmp(p->knobs[j].name, k->name)) return kv_err(e, "policy '%s': knob '%s' is listed twice", p->name, k->name);
        if (k->alias && !knob_name_ok(k->alias))
            return kv_err(e, "policy '%s': knob '%s': alias must be [a-z0-9_]+", p->name, k->name);
    }
    return 0;
}

int policy_registry_check(const KvPolicyOps *const *ops, int n, KvErr *e)
{
    if (n > POLICY_MAX_REGISTERED) return kv_err(e, "%d policies registered (at most %d)", n, POLICY_MAX_REGISTERED);
    for (int i = 0; i < n; i++) {
        const KvPolicyOps *p = ops[i];
        if (!p) return kv_err(e, "policy table entry %d is NULL", i);
        if (!p->name || !*p->name) return kv_err(e, "policy table entry %d has no name", i);
        if (!p->summary) return kv_err(e, "policy '%s': missing required slot 'summary'", p->name);
        if (!p->plan_restore) return kv_err(e, "policy '%s': missing required slot 'plan_restore'", p->name);
        if (!p->saved_bytes_per_token)
            return kv_err(e, "policy '%s': missing required slot 'saved_bytes_per_token'", p->name);
        if (strchr(p->name, '.')) return kv_err(e, "policy '%s': a name may not contain '.' (knob keys are <policy>.<knob>)", p->name);
        for (int j = 0; j < i; j++)
            if (strcmp(ops[j]->name, p->name) == 0) return kv_err(e, "policy '%s' is registered twice", p->name);
        if (knob_table_check(p, e) != 0) return -1;
        int grouped = p->role == PR_ABLATION || p->role == PR_VARIANT, found = 0;
        for (int j = 0; grouped && p->varies && j < n; j++) found |= j != i && ops[j] && ops[j]->name && !strcmp(ops[j]->name, p->varies);
        if (grouped && !found)
            return kv_err(e, "policy '%s': an ablation or variant names the registered policy it changes (varies: %s)", p->name,
                          p->varies ? p->varies : "none");
        if (!grouped && p->varies) return kv_err(e, "policy '%s': varies '%s' but is no ablation or variant", p->name, p->varies);
        /* an alias is a global --set key: it must not name two knobs */
        for (int k = 0; k < p->n_knobs; k++) {
            const char *a = p->knobs[k].alias;
            if (!a) continue;
            for (int j = 0; j <= i; j++)
                for (int m = 0; m < ops[j]->n_knobs; m++) {
                    if ((j == i && m == k) || !ops[j]->knobs[m].alias || strcmp(ops[j]->knobs[m].alias, a)) continue;
                    if (j < i || m < k)
                        return kv_err(e, "policy '%s': knob alias '%s' is also used by %s.%s", p->name, a, ops[j]->name,
                                      ops[j]->knobs[m].name);
                }
        }
    }
    return 0;
}

int policy_knob_index(const KvPolicyOps *ops, const char *name)
{
    for (int i = 0; ops && i < ops->n_knobs; i++)
        if (!strcmp(ops->knobs[i].name, name)) return i;
    return -1;
}

int policy_knob_check(const KvPolicyOps *ops, const PolicyKnob *k, double v, KvErr *e)
{
    if (!isfinite(v)) return kv_err(e, "%s.%s: %g is not a finite number (allowed %g..%g)", ops->name, k->name, v, k->min, k->max);
    if (k->type == KNOB_BOOL && v != 0 && v != 1) return kv_err(e, "%s.%s: expected true or false, got %g", ops->name, k->name, v);
    if (k->type == KNOB_INT && v != floor(v)) return kv_err(e, "%s.%s: expected an integer, got %g", ops->name, k->name, v);
    if (v < k->min || v > k->max)
        return kv_err(e, "%s.%s: %g is out of range (allowed %g..%g)", ops->name, k->name, v, k->min, k->max);
    if (k->n_choices > 0) {
        char list[128] = "";
        size_t len = 0;
        for (int c = 0; c < k->n_choices; c++) {
            if (v == k->choices[c]) return 0;
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%g", c ? ", " : "", k->choices[c]);
        }
        return kv_err(e, "%s.%s: %g is not allowed (allowed: %s)", ops->name, k->name, v, list);
    }
    return 0;
}

double policy_knob(const PolicyEnv *env, const char *name)
{
    int i = policy_knob_index(env->ops, name);
    return i >= 0 && env->knobs ? env->knobs[i] : NAN;
}

int policy_registry_check_builtin(KvErr *e)
{
    return policy_registry_check(g_policies, policy_count(), e);
}
