/* check.c — `kvsim check`: re-run the canonical scenarios and compare key metrics with the
 * committed reference results; see check.h.
 *
 * Responsible for: the canonical set (k_canon) or the user's own experiment (--scenario outside the
 * set, --config FILE: its settings recorded in the reference), the replications (--update --seeds N records every
 * seed; the check re-runs the seeds the reference names), the decision (check.h: beyond the tolerance AND outside the 95 % interval
 * of the paired per-seed difference), reading and writing the reference files, the tables of what
 * moved and of what differs only inside the replication interval (values in readable units: ms,
 * MiB, %), or the same as JSON (--json, in the metrics' own units).
 * Not responsible for: running a point and naming its metrics (point.c), the metrics compared and
 * their tolerances (the metric table's METRIC_CHECK rows, results/metric.c).
 * Invariants: the simulator is deterministic, so on the machine that wrote the references every
 * value is equal; the tolerances absorb floating-point differences between compilers and CPUs
 * (a few ulps that can move a histogram bucket: percentiles by < 0.4 %), not model changes.
 * Complexity: the canonical runs (8 scenarios × 300 requests × their policies: about a second).
 */
#include "sim/cli/check.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/metric.h"
#include "results/report.h"
#include "sim/base/opt.h"
#include "sim/base/stats.h"
#include "sim/cli/point.h"

#define CHECK_MAX_SEEDS 20

static const struct {
    const char *scenario;
    int requests;
} k_canon[] = {
    {"hcache-sharegpt4-llama2-7b", 300},         /* HCache's box: DRAM + 4 SSDs, six policies */
    {"cake-a100-llama2-13b", 300},               /* Cake: bidirectional restoration on one A100 */
    {"cacheflow-h100-10g-llama31-8b-chat", 300}, /* CacheFlow: a remote store over 10 GbE */
    /* results/findings.md's headline scenarios (tools/findings.sh) */
    {"findings-mha-hcache-a100", 300}, /* MHA on HCache's box: hcache ahead of kv-offload; adaptive, quantized */
    {"findings-gqa-h200", 300},        /* GQA-4 on a Gen5 box: the advantage flips; adaptive keeps KV */
    {"findings-fairness-edf", 300},    /* CacheFlow's EDF IO order under sustained load */
    {"findings-scaling-perstage", 300}, /* S = 8 stages, a NIC per stage: cacheflow and one-tier hcache-cf */
    {"findings-kvquant-adaptive", 300}, /* CacheGen's per-chunk level over 10 GbE */
};

/* the metric compared under this name (the metric table's METRIC_CHECK rows, with their
 * tolerances), NULL when the check does not compare it */
static const Metric *checked(const char *name)
{
    const Metric *m = metric_find(name);
    return m && (m->outputs & METRIC_CHECK) ? m : NULL;
}

static const OptSpec k_check_opts[] = {
    {"--baseline", "DIR", 0, "the reference results (default results/reference)"},
    {"--update", NULL, 0, "write the reference results of this build into DIR instead of comparing"},
    {"--seeds", "N", 0, "with --update: replications recorded per scenario (default 3; 1 records one run, compared by tolerance alone)"},
    {"--scenario", "NAME", 0, "only this scenario: one of the canonical set, or any other (kvsim list scenarios, or a path) to guard your own experiment"},
    {"--config", "FILE", 0, "guard your own experiment: the settings (and policies) of FILE, as compare --config reads them (over --scenario when both)"},
    {"--requests", "N", 0, "with --scenario outside the canonical set or --config: the requests run (default: the config's, else 300)"},
    {"--json", NULL, 0, "print the result as JSON (values in the metrics' units: s, bytes, shares) instead of the tables"},
    {"--quiet", NULL, 0, "print only regressions"},
};
static const OptCmd k_check = {
    "kvsim check",
    "Re-run the canonical scenarios (listed below, 300 requests each, each with its own policies, every seed the reference "
    "recorded), or your own experiment (--scenario, --config), and compare key metrics with the reference results "
    "(DIR/NAME.json, written by --update): a value moved when its difference is beyond the "
    "tolerance below AND outside the 95 % interval of the paired per-seed difference (inside the replication interval "
    "is not a regression); exit 1 with a table of what moved.",
    k_check_opts, (int)KV_ARRAY_LEN(k_check_opts), NULL, 0, 0};

/* One experiment checked: a canonical scenario, or the user's own (its settings kept in the reference). */
typedef struct CheckExp {
    char name[256];  /* the reference's file name without .json */
    cJSON *params;   /* point settings: {"scenario": ..., "requests": ..., ...} */
    int requests;    /* as resolved */
    int own;         /* not a canonical scenario */
} CheckExp;

/* Run experiment x with `seed` (0: its own); *seed_used gets the seed run. */
static int run_exp(const CheckExp *x, uint64_t seed, PointResult *pr, char *policies, size_t plen, uint64_t *seed_used, KvErr *e)
{
    SimConfig c;
    if (point_config(&c, x->params, x->name, policies, plen, e) != 0) return -1;
    if (seed) c.seed = seed;
    if (seed_used) *seed_used = c.seed;
    if (point_run(&c, policies, pr, e) != 0) return kv_err_prefix(e, "%s: ", x->name);
    return 0;
}

/* The replications block: {"seeds": [...], "per_seed": {policy: {metric: [v per seed]}}}. */
static cJSON *replications_json(const uint64_t *seeds, const PointResult *prs, int n)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *js = cJSON_AddArrayToObject(r, "seeds");
    for (int s = 0; s < n; s++) cJSON_AddItemToArray(js, cJSON_CreateNumber((double)seeds[s]));
    cJSON *ps = cJSON_AddObjectToObject(r, "per_seed");
    for (int k = 0; k < prs[0].n; k++) {
        if (!checked(prs[0].m[k].name)) continue;
        cJSON *p = cJSON_GetObjectItemCaseSensitive(ps, prs[0].m[k].policy);
        if (!p) p = cJSON_AddObjectToObject(ps, prs[0].m[k].policy);
        cJSON *arr = cJSON_AddArrayToObject(p, prs[0].m[k].name);
        for (int s = 0; s < n; s++) {
            int found = 0;
            double v = 0;
            for (int j = 0; j < prs[s].n && !found; j++)
                if (!strcmp(prs[s].m[j].policy, prs[0].m[k].policy) && !strcmp(prs[s].m[j].name, prs[0].m[k].name))
                    found = 1, v = prs[s].m[j].value;
            cJSON_AddItemToArray(arr, found && isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull());
        }
    }
    return r;
}

static int write_reference(const char *dir, const CheckExp *x, const PointResult *pr, const char *policies, const uint64_t *seeds,
                           int n_seeds, KvErr *e)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "scenario", x->name);
    cJSON_AddNumberToObject(root, "requests", x->requests);
    cJSON_AddStringToObject(root, "policies", policies);
    if (x->own) cJSON_AddItemToObject(root, "settings", cJSON_Duplicate(x->params, 1)); /* what was run, for a reader */
    cJSON *m = cJSON_AddObjectToObject(root, "metrics");
    for (int k = 0; k < pr->n; k++) {
        if (!checked(pr->m[k].name)) continue;
        cJSON *p = cJSON_GetObjectItemCaseSensitive(m, pr->m[k].policy);
        if (!p) p = cJSON_AddObjectToObject(m, pr->m[k].policy);
        cJSON_AddNumberToObject(p, pr->m[k].name, pr->m[k].value);
    }
    if (n_seeds > 1) cJSON_AddItemToObject(root, "replications", replications_json(seeds, pr, n_seeds));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return kv_err(e, "out of memory");
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.json", dir, x->name);
    size_t len = strlen(text);
    text[len] = '\n'; /* cJSON's buffer has room for the terminator we replace */
    int rc = kv_mkdirs(dir, e) == 0 ? kv_write_atomic(path, text, len + 1, e) : -1;
    cJSON_free(text);
    return rc;
}

static double find_metric(const PointResult *pr, const char *policy, const char *name, int *found)
{
    for (int k = 0; k < pr->n; k++)
        if (!strcmp(pr->m[k].policy, policy) && !strcmp(pr->m[k].name, name)) {
            *found = 1;
            return pr->m[k].value;
        }
    *found = 0;
    return 0;
}

/* DIR/SCENARIO.json parsed and its shape checked; the seeds it recorded (one: the scenario's own,
 * given as 0, when it has no replications block). NULL and e on error. */
static cJSON *read_reference(const char *dir, const CheckExp *x, uint64_t *seeds, int *n_seeds, KvErr *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.json", dir, x->name);
    char *text = kv_read_file(path, NULL, e);
    if (!text) {
        kv_err_prefix(e, "no reference for %s (kvsim check --update%s writes it): ", x->name, x->own ? " with the same options" : "");
        return NULL;
    }
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "metrics");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "requests");
    if (!cJSON_IsObject(m) || !cJSON_IsNumber(req)) {
        cJSON_Delete(root);
        kv_err(e, "%s: expected {\"scenario\", \"requests\", \"policies\", \"metrics\": {policy: {metric: value}}}", path);
        return NULL;
    }
    if ((int)req->valuedouble != x->requests) {
        cJSON_Delete(root);
        kv_err(e, "%s: written for %d requests, the check runs %d (kvsim check --update)", path, (int)req->valuedouble, x->requests);
        return NULL;
    }
    *n_seeds = 1;
    seeds[0] = 0;
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(root, "replications");
    if (!rep) return root;
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rep, "seeds");
    int n = cJSON_GetArraySize(js);
    if (!cJSON_IsArray(js) || n < 2 || n > CHECK_MAX_SEEDS || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(rep, "per_seed"))) {
        cJSON_Delete(root);
        kv_err(e, "%s: \"replications\": expected {\"seeds\": [2..%d seeds], \"per_seed\": {policy: {metric: [value per seed]}}}", path,
               CHECK_MAX_SEEDS);
        return NULL;
    }
    for (int s = 0; s < n; s++) {
        const cJSON *v = cJSON_GetArrayItem(js, s);
        if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble != (double)(uint64_t)v->valuedouble) {
            cJSON_Delete(root);
            kv_err(e, "%s: replications.seeds[%d]: expected a seed (an integer >= 1)", path, s);
            return NULL;
        }
        seeds[s] = (uint64_t)v->valuedouble;
    }
    /* "metrics" is the first seed's run, kept for reading: it must agree with per_seed[..][0] */
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(rep, "per_seed");
    for (const cJSON *p = m->child; p; p = p->next)
        for (const cJSON *v = p->child; v; v = v->next) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ps, p->string), v->string);
            const cJSON *first = cJSON_GetArrayItem(arr, 0);
            if (!checked(v->string) || !cJSON_IsNumber(v)) continue;
            if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n || !cJSON_IsNumber(first) || first->valuedouble != v->valuedouble) {
                kv_err(e, "%s: metrics.%s.%s (%.17g) is not replications.per_seed.%s.%s[0], the first seed's value, or that array "
                          "does not have %d values (edit both, or kvsim check --update)", path, p->string, v->string, v->valuedouble,
                       p->string, v->string, n);
                cJSON_Delete(root);
                return NULL;
            }
        }
    *n_seeds = n;
    return root;
}

/* A value beyond its tolerance: moved (significant) or inside the replication interval. */
typedef struct Row {
    int exp;            /* index into the experiments */
    char policy[32];
    const Metric *m;
    double ref, now;    /* means over the seeds, in the metric's unit */
    int missing;        /* no value now, or none in the reference */
    int n;              /* seeds */
    int exact;          /* a metric compared exactly */
    double dbar, hw;    /* the paired difference's mean and 95 % half-width (n > 1, not exact) */
    int significant;
} Row;

typedef struct Tally {
    int compared, moved, inside;
    Row *rows;
    int n_rows, cap;
} Tally;

/* Compare experiment k's runs (now[s]: the reference's seed s) with its reference. A value moved when
 * its difference is beyond the tolerance and, with replications, the 95 % interval of the paired
 * per-seed difference excludes 0; beyond the tolerance but inside that interval is listed apart. */
static int compare_reference(int k, const cJSON *root, const PointResult *now, int n, Tally *t, KvErr *e)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "metrics");
    const cJSON *ps = n > 1 ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "replications"), "per_seed") : NULL;
    for (const cJSON *p = (ps ? ps : m)->child; p; p = p->next) {
        for (const cJSON *v = p->child; v; v = v->next) {
            const Metric *tm = checked(v->string);
            if (!tm || (ps ? !cJSON_IsArray(v) : !cJSON_IsNumber(v))) continue;
            double ref[CHECK_MAX_SEEDS], cur[CHECK_MAX_SEEDS], d[CHECK_MAX_SEEDS];
            int missing = 0, exact_diff = 0;
            double ref_mean = 0, cur_mean = 0;
            for (int s = 0; s < n; s++) {
                const cJSON *rv = ps ? cJSON_GetArrayItem(v, s) : v;
                int found;
                ref[s] = cJSON_IsNumber(rv) ? rv->valuedouble : NAN;
                cur[s] = find_metric(&now[s], p->string, v->string, &found);
                if (!found || !isfinite(cur[s]) || !isfinite(ref[s])) missing |= !(isnan(ref[s]) && found && isnan(cur[s]));
                d[s] = cur[s] - ref[s];
                exact_diff |= cur[s] != ref[s];
                ref_mean += ref[s] / n;
                cur_mean += cur[s] / n;
            }
            t->compared++;
            double lim = tm->tol_abs + tm->tol_rel * fabs(ref_mean), dbar = 0, hw = NAN;
            int beyond, significant = 1, exact = tm->tol_rel == 0 && tm->tol_abs == 0;
            if (missing) beyond = 1;
            else if (exact) beyond = exact_diff; /* exact metrics: every seed */
            else {
                for (int s = 0; s < n; s++) dbar += d[s] / n;
                beyond = fabs(dbar) > lim;
                KvErr se;
                if (beyond && n > 1 && stats_mean_ci(d, (size_t)n, 0.95, &dbar, &hw, &se) == 0) significant = fabs(dbar) > hw;
            }
            if (!beyond) continue;
            if (significant) t->moved++;
            else t->inside++;
            if (t->n_rows == t->cap) {
                int cap = t->cap ? 2 * t->cap : 32;
                Row *r = realloc(t->rows, (size_t)cap * sizeof *r);
                if (!r) return kv_err(e, "out of memory");
                t->rows = r, t->cap = cap;
            }
            Row *r = &t->rows[t->n_rows++];
            memset(r, 0, sizeof *r);
            r->exp = k;
            snprintf(r->policy, sizeof r->policy, "%s", p->string);
            r->m = tm, r->ref = ref_mean, r->now = missing ? NAN : cur_mean, r->missing = missing, r->n = n, r->exact = exact;
            r->dbar = dbar, r->hw = hw, r->significant = significant;
        }
    }
    /* a policy run now that the reference does not have is new, not a regression */
    return 0;
}

/* a value in the unit a person reads: a time in ms, bytes in binary units, a share in % */
static void readable(char *b, size_t n, const Metric *m, double v, int sign)
{
    if (!isfinite(v)) {
        snprintf(b, n, "—");
        return;
    }
    const char *sg = sign && v > 0 ? "+" : "";
    if (!strcmp(m->unit, "s")) snprintf(b, n, "%s%.4g ms", sg, v * 1e3);
    else if (!strcmp(m->unit, "share")) snprintf(b, n, "%s%.4g %%", sg, v * 100);
    else if (!strcmp(m->unit, "bytes")) {
        char h[48];
        report_human_bytes(h, sizeof h, fabs(v));
        snprintf(b, n, "%s%s", v < 0 ? "-" : sg, h);
    } else if (!strcmp(m->unit, "count")) snprintf(b, n, "%s%.0f", sg, v);
    else snprintf(b, n, "%s%.6g %s", sg, v, m->unit);
}

static void print_rows(const Tally *t, const CheckExp *xs, int significant)
{
    printf("| experiment | policy | metric | reference | now | change | tolerance | paired difference now − reference (95 %% CI) |\n"
           "|---|---|---|---:|---:|---:|---|---|\n");
    for (int i = 0; i < t->n_rows; i++) {
        const Row *r = &t->rows[i];
        if (r->significant != significant) continue;
        char reft[48], nowt[48], chg[32] = "missing", tol[64], ab[48], dt[96];
        readable(reft, sizeof reft, r->m, r->ref, 0);
        readable(nowt, sizeof nowt, r->m, r->now, 0);
        if (!r->missing) {
            if (r->ref != 0) snprintf(chg, sizeof chg, "%+.2f%%", 100 * (r->now - r->ref) / fabs(r->ref));
            else readable(chg, sizeof chg, r->m, r->now - r->ref, 1);
        }
        readable(ab, sizeof ab, r->m, r->m->tol_abs, 0);
        if (r->exact) snprintf(tol, sizeof tol, "exact");
        else if (r->m->tol_rel > 0) snprintf(tol, sizeof tol, "%g%% + %s", 100 * r->m->tol_rel, ab);
        else snprintf(tol, sizeof tol, "%s", ab);
        if (r->missing) snprintf(dt, sizeof dt, "—");
        else if (r->n > 1 && !r->exact) {
            char a[48], h[48];
            readable(a, sizeof a, r->m, r->dbar, 1);
            readable(h, sizeof h, r->m, r->hw, 0);
            snprintf(dt, sizeof dt, "%s ± %s", a, h);
        } else if (r->n > 1) snprintf(dt, sizeof dt, "exact: every seed");
        else snprintf(dt, sizeof dt, "one seed: no interval");
        printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", xs[r->exp].name, r->policy, r->m->name, reft, nowt, chg, tol, dt);
    }
}

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static cJSON *rows_json(const Tally *t, const CheckExp *xs, int significant)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < t->n_rows; i++) {
        const Row *r = &t->rows[i];
        if (r->significant != significant) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "experiment", xs[r->exp].name);
        cJSON_AddStringToObject(o, "policy", r->policy);
        cJSON_AddStringToObject(o, "metric", r->m->name);
        cJSON_AddStringToObject(o, "unit", r->m->unit);
        cJSON_AddItemToObject(o, "reference", num_or_null(r->ref));
        cJSON_AddItemToObject(o, "now", num_or_null(r->now));
        cJSON_AddItemToObject(o, "change_relative", num_or_null(r->missing || r->ref == 0 ? NAN : (r->now - r->ref) / fabs(r->ref)));
        cJSON *tol = cJSON_AddObjectToObject(o, "tolerance");
        cJSON_AddNumberToObject(tol, "relative", r->m->tol_rel);
        cJSON_AddNumberToObject(tol, "absolute", r->m->tol_abs);
        cJSON_AddNumberToObject(o, "seeds", r->n);
        if (r->missing || r->exact || r->n < 2) cJSON_AddNullToObject(o, "paired_difference");
        else {
            cJSON *d = cJSON_AddObjectToObject(o, "paired_difference");
            cJSON_AddNumberToObject(d, "mean", r->dbar);
            cJSON_AddItemToObject(d, "ci95", num_or_null(r->hw));
        }
        cJSON_AddBoolToObject(o, "missing", r->missing);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* The experiments: the canonical set (or one of it), or the user's own (--scenario outside the set,
 * --config). A usage error: 2 with the message printed. */
static int experiments(const OptArgs *a, CheckExp **out, int *n, KvErr *e)
{
    const char *only = opt_get(a, "--scenario"), *config = opt_get(a, "--config"), *rq = opt_get(a, "--requests");
    size_t canon = KV_ARRAY_LEN(k_canon), i = 0;
    while (only && !config && i < canon && strcmp(k_canon[i].scenario, only)) i++;
    int own = config || (only && i == canon);
    if (rq && !own) return kv_err(e, "--requests belongs to your own experiment (--config, or --scenario outside the canonical set)");
    CheckExp *xs = calloc(own ? 1 : canon, sizeof *xs);
    if (!xs) return kv_err(e, "out of memory");
    *out = xs;
    *n = 0;
    if (!own) {
        for (size_t k = 0; k < canon; k++) {
            if (only && k != i) continue;
            CheckExp *x = &xs[(*n)++];
            snprintf(x->name, sizeof x->name, "%s", k_canon[k].scenario);
            x->params = cJSON_CreateObject();
            cJSON_AddStringToObject(x->params, "scenario", k_canon[k].scenario);
            cJSON_AddNumberToObject(x->params, "requests", k_canon[k].requests);
            x->requests = k_canon[k].requests;
        }
        return 0;
    }
    CheckExp *x = &xs[(*n)++];
    x->own = 1;
    if (config) {
        char *text = kv_read_file(config, NULL, e);
        if (!text) return -1;
        x->params = cJSON_Parse(text);
        free(text);
        if (!cJSON_IsObject(x->params)) return kv_err(e, "--config %s: expected a JSON object of settings (as compare --config reads)", config);
        const char *base = strrchr(config, '/') ? strrchr(config, '/') + 1 : config;
        size_t l = strlen(base);
        if (l > 5 && !strcmp(base + l - 5, ".json")) l -= 5;
        snprintf(x->name, sizeof x->name, "%.*s", (int)l, base);
    } else {
        x->params = cJSON_CreateObject();
        const char *base = strrchr(only, '/') ? strrchr(only, '/') + 1 : only;
        size_t l = strlen(base);
        if (l > 5 && !strcmp(base + l - 5, ".json")) l -= 5;
        snprintf(x->name, sizeof x->name, "%.*s", (int)l, base);
    }
    if (only) { /* the scenario first, the file's settings over it (point_apply applies "scenario" first) */
        cJSON_DeleteItemFromObjectCaseSensitive(x->params, "scenario");
        cJSON_AddStringToObject(x->params, "scenario", only);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(x->params, "description");
    int64_t r = 300;
    if (rq && opt_int("--requests", rq, 1, 100000000, &r, e) != 0) return -1;
    if (rq || !cJSON_GetObjectItemCaseSensitive(x->params, "requests")) {
        cJSON_DeleteItemFromObjectCaseSensitive(x->params, "requests");
        cJSON_AddNumberToObject(x->params, "requests", (double)r);
    }
    SimConfig c;
    char pol[600];
    if (point_config(&c, x->params, x->name, pol, sizeof pol, e) != 0) return -1;
    x->requests = (int)c.requests;
    return 0;
}

int check_main(int argc, char **argv)
{
    OptArgs a;
    KvErr e;
    int begin = opt_begin(&k_check, argc, argv, &a);
    if (begin == OPT_USAGE_EXIT) return begin;
    if (begin == 0) { /* --help: the options, then more */
        printf("\ncanonical scenarios (%d):\n", (int)KV_ARRAY_LEN(k_canon));
        for (size_t i = 0; i < KV_ARRAY_LEN(k_canon); i++) printf("  %s, %d requests\n", k_canon[i].scenario, k_canon[i].requests);
        printf("\nmetrics and tolerances (beyond the tolerance: |mean difference| > abs + rel × |reference mean|):\n");
        for (int i = 0; metric_at(i); i++) {
            const Metric *m = metric_at(i);
            if (!(m->outputs & METRIC_CHECK)) continue;
            char ab[48];
            readable(ab, sizeof ab, m, m->tol_abs, 0);
            if (m->tol_rel == 0 && m->tol_abs == 0) printf("  %-30s exact, every seed\n", m->name);
            else if (m->tol_rel > 0) printf("  %-30s %g %% + %s\n", m->name, 100 * m->tol_rel, ab);
            else printf("  %-30s ± %s\n", m->name, ab);
        }
        printf("\na value moved (a regression) when it is beyond its tolerance and the 95 %% Student-t interval of the\n"
               "paired difference now − reference over the recorded seeds excludes 0; beyond the tolerance but\n"
               "inside that interval is reported, not a regression. A reference of one seed: the tolerance alone.\n"
               "Your own experiment: kvsim check --update --config FILE --baseline DIR writes DIR/FILE.json;\n"
               "kvsim check --config FILE --baseline DIR compares against it (exit 1 when something moved).\n");
        return 0;
    }
    const char *dir = opt_get(&a, "--baseline") ? opt_get(&a, "--baseline") : "results/reference";
    int update = opt_count(&a, "--update") > 0, quiet = opt_count(&a, "--quiet") > 0, json = opt_count(&a, "--json") > 0;
    int64_t n_update = 3;
    if (opt_get(&a, "--seeds")) {
        if (!update) {
            opt_print_error(&k_check, "--seeds belongs to --update (the check runs the seeds the reference recorded)", stderr);
            return 2;
        }
        if (opt_int("--seeds", opt_get(&a, "--seeds"), 1, CHECK_MAX_SEEDS, &n_update, &e) != 0) {
            opt_print_error(&k_check, e.msg, stderr);
            return 2;
        }
    }
    CheckExp *xs = NULL;
    int nx = 0;
    if (experiments(&a, &xs, &nx, &e) != 0) {
        opt_print_error(&k_check, e.msg, stderr);
        for (int k = 0; xs && k < nx; k++) cJSON_Delete(xs[k].params);
        free(xs);
        return 2;
    }
    Tally t = {0, 0, 0, NULL, 0, 0};
    cJSON *jx = cJSON_CreateArray(); /* --json: each experiment's line */
    int rc = 0;
    for (int k = 0; k < nx && rc == 0; k++) {
        const CheckExp *x = &xs[k];
        uint64_t seeds[CHECK_MAX_SEEDS];
        int n = (int)n_update;
        cJSON *root = NULL;
        seeds[0] = 0; /* the scenario's own seed; --update's others follow it */
        if (!update && !(root = read_reference(dir, x, seeds, &n, &e))) {
            fprintf(stderr, "kvsim check: %s\n", e.msg);
            rc = 1;
            break;
        }
        PointResult prs[CHECK_MAX_SEEDS];
        char policies[600];
        memset(prs, 0, sizeof prs);
        for (int s = 0; s < n && rc == 0; s++) {
            uint64_t used;
            if (run_exp(x, update && s > 0 ? seeds[0] + (uint64_t)s : seeds[s], &prs[s], policies, sizeof policies, &used, &e) != 0) {
                fprintf(stderr, "kvsim check: %s\n", e.msg);
                rc = 1;
            }
            seeds[s] = used;
        }
        cJSON *jo = cJSON_CreateObject();
        cJSON_AddStringToObject(jo, "name", x->name);
        cJSON_AddNumberToObject(jo, "requests", x->requests);
        cJSON_AddStringToObject(jo, "policies", rc == 0 ? policies : "");
        cJSON_AddNumberToObject(jo, "seeds", n);
        cJSON_AddItemToArray(jx, jo);
        if (rc == 0 && update) {
            if (write_reference(dir, x, prs, policies, seeds, n, &e) != 0) {
                fprintf(stderr, "kvsim check: %s\n", e.msg);
                rc = 1;
            } else {
                cJSON_AddStringToObject(jo, "status", "written");
                if (!quiet && !json)
                    printf("check: wrote %s/%s.json (%s, %d requests, %d seed%s)\n", dir, x->name, policies, x->requests, n,
                           n == 1 ? "" : "s");
            }
        } else if (rc == 0) {
            int before = t.moved, n_before = t.compared, in_before = t.inside;
            if (compare_reference(k, root, prs, n, &t, &e) != 0) {
                fprintf(stderr, "kvsim check: %s\n", e.msg);
                rc = 1;
            }
            const char *st = t.moved != before ? "moved" : t.inside != in_before ? "inside" : "ok";
            cJSON_AddNumberToObject(jo, "values", t.compared - n_before);
            cJSON_AddStringToObject(jo, "status", st);
            if (!quiet && !json && rc == 0)
                printf("check: %-40s %3d values of %s, %d seed%s: %s\n", x->name, t.compared - n_before, policies, n, n == 1 ? "" : "s",
                       t.moved != before ? "MOVED" : t.inside != in_before ? "ok (differences inside the replication interval)" : "ok");
        }
        for (int s = 0; s < n; s++) point_result_free(&prs[s]);
        cJSON_Delete(root);
    }
    if (rc == 0 && json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "baseline", dir);
        cJSON_AddStringToObject(o, "result", update ? "written" : t.moved ? "moved" : "ok");
        cJSON_AddNumberToObject(o, "compared", t.compared);
        cJSON_AddNumberToObject(o, "moved_count", t.moved);
        cJSON_AddNumberToObject(o, "inside_count", t.inside);
        cJSON_AddItemToObject(o, "experiments", jx);
        jx = NULL;
        cJSON_AddItemToObject(o, "moved", rows_json(&t, xs, 1));
        cJSON_AddItemToObject(o, "inside_replication_interval", rows_json(&t, xs, 0));
        char *text = cJSON_Print(o);
        if (text) printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(o);
        if (t.moved) rc = 1;
    } else if (rc == 0) {
        if (t.inside > 0 && !quiet) {
            printf("\ncheck: %d value%s beyond the tolerance but inside the replication interval (the paired difference's 95 %% "
                   "interval contains 0): not regressions\n\n", t.inside, t.inside == 1 ? "" : "s");
            print_rows(&t, xs, 0);
        }
        if (t.moved > 0) {
            printf("\ncheck: %d of %d values moved beyond their tolerance and outside the replication interval against %s/:\n\n",
                   t.moved, t.compared, dir);
            print_rows(&t, xs, 1);
            printf("\n(if the change is intended: kvsim check --update, and commit %s/)\n", dir);
            rc = 1;
        } else if (!update && !quiet) {
            printf("check: all %d values within tolerance of %s/%s\n", t.compared, dir, t.inside ? " or inside the replication interval" : "");
        }
    }
    cJSON_Delete(jx);
    for (int k = 0; k < nx; k++) cJSON_Delete(xs[k].params);
    free(xs);
    free(t.rows);
    return rc;
}
