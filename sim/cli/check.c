/* check.c — `kvsim check`: re-run the canonical scenarios and compare key metrics with the
 * committed reference results; see check.h.
 *
 * Responsible for: the canonical set (k_canon), the replications (--update --seeds N records every
 * seed; the check re-runs the seeds the reference names), the decision (check.h: beyond the tolerance AND outside the 95 % interval
 * of the paired per-seed difference), reading and writing the reference files, the tables of what
 * moved and of what differs only inside the replication interval.
 * Not responsible for: running a point and naming its metrics (point.c), the metrics compared and
 * their tolerances (the metric table's METRIC_CHECK rows, results/metric.c).
 * Invariants: the simulator is deterministic, so on the machine that wrote the references every
 * value is equal; the tolerances absorb floating-point differences between compilers and CPUs
 * (a few ulps that can move a histogram bucket: percentiles by < 0.4 %), not model changes.
 * Complexity: the canonical runs (6 scenarios × 300 requests × their policies: about a second).
 */
#include "sim/cli/check.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/metric.h"
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
    {"--scenario", "NAME", 0, "only this scenario of the canonical set"},
    {"--quiet", NULL, 0, "print only regressions"},
};
static const OptCmd k_check = {
    "kvsim check",
    "Re-run the canonical scenarios (6 scenarios × 300 requests, each with its own policies, every seed the reference "
    "recorded) and compare key metrics with the reference results: a value moved when its difference is beyond the "
    "tolerance below AND outside the 95 % interval of the paired per-seed difference (inside the replication interval "
    "is not a regression); exit 1 with a table of what moved.",
    k_check_opts, (int)KV_ARRAY_LEN(k_check_opts), NULL, 0, 0};

/* Run canonical scenario i with `seed` (0: the scenario's own); *seed_used gets the seed run. */
static int run_canon(size_t i, uint64_t seed, PointResult *pr, char *policies, size_t plen, uint64_t *seed_used, KvErr *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "scenario", k_canon[i].scenario);
    cJSON_AddNumberToObject(o, "requests", k_canon[i].requests);
    SimConfig c;
    int rc = point_config(&c, o, k_canon[i].scenario, policies, plen, e);
    cJSON_Delete(o);
    if (rc != 0) return -1;
    if (seed) c.seed = seed;
    if (seed_used) *seed_used = c.seed;
    if (point_run(&c, policies, pr, e) != 0) return kv_err_prefix(e, "%s: ", k_canon[i].scenario);
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

static int write_reference(const char *dir, size_t i, const PointResult *pr, const char *policies, const uint64_t *seeds, int n_seeds,
                           KvErr *e)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "scenario", k_canon[i].scenario);
    cJSON_AddNumberToObject(root, "requests", k_canon[i].requests);
    cJSON_AddStringToObject(root, "policies", policies);
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
    snprintf(path, sizeof path, "%s/%s.json", dir, k_canon[i].scenario);
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
static cJSON *read_reference(const char *dir, size_t i, uint64_t *seeds, int *n_seeds, KvErr *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.json", dir, k_canon[i].scenario);
    char *text = kv_read_file(path, NULL, e);
    if (!text) {
        kv_err_prefix(e, "no reference for %s (kvsim check --update writes it): ", k_canon[i].scenario);
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
    if ((int)req->valuedouble != k_canon[i].requests) {
        cJSON_Delete(root);
        kv_err(e, "%s: written for %d requests, the check runs %d (kvsim check --update)", path, (int)req->valuedouble,
               k_canon[i].requests);
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

typedef struct Tally {
    int compared, moved, inside;
    FILE *moved_rows, *inside_rows;
} Tally;

/* Compare scenario i's runs (now[s]: the reference's seed s) with its reference. A value moved when
 * its difference is beyond the tolerance and, with replications, the 95 % interval of the paired
 * per-seed difference excludes 0; beyond the tolerance but inside that interval is listed apart. */
static void compare_reference(size_t i, const cJSON *root, const PointResult *now, int n, Tally *t)
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
            double lim = tm->tol_abs + tm->tol_rel * fabs(ref_mean), dbar = 0, hw = 0;
            int beyond, significant = 1;
            if (missing) beyond = 1;
            else if (tm->tol_rel == 0 && tm->tol_abs == 0) beyond = exact_diff; /* exact metrics: every seed */
            else {
                for (int s = 0; s < n; s++) dbar += d[s] / n;
                beyond = fabs(dbar) > lim;
                KvErr e;
                if (beyond && n > 1 && stats_mean_ci(d, (size_t)n, 0.95, &dbar, &hw, &e) == 0) significant = fabs(dbar) > hw;
            }
            if (!beyond) continue;
            FILE *rows = significant ? t->moved_rows : t->inside_rows;
            if (significant) t->moved++;
            else t->inside++;
            char chg[32] = "missing", nowt[32] = "—", reft[32], tol[48], dt[64];
            snprintf(reft, sizeof reft, "%.6g", ref_mean);
            if (!missing) {
                snprintf(nowt, sizeof nowt, "%.6g", cur_mean);
                if (ref_mean != 0) snprintf(chg, sizeof chg, "%+.2f%%", 100 * (cur_mean - ref_mean) / fabs(ref_mean));
                else snprintf(chg, sizeof chg, "%+.3g", cur_mean - ref_mean);
            }
            if (tm->tol_rel > 0) snprintf(tol, sizeof tol, "%g%% + %g", 100 * tm->tol_rel, tm->tol_abs);
            else snprintf(tol, sizeof tol, "%g", tm->tol_abs);
            if (missing) snprintf(dt, sizeof dt, "—");
            else if (n > 1 && !(tm->tol_rel == 0 && tm->tol_abs == 0)) snprintf(dt, sizeof dt, "%+.4g ± %.4g", dbar, hw);
            else if (n > 1) snprintf(dt, sizeof dt, "exact: every seed");
            else snprintf(dt, sizeof dt, "one seed: no interval");
            fprintf(rows, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", k_canon[i].scenario, p->string, v->string, reft, nowt, chg,
                    tol, dt);
        }
    }
    /* a policy run now that the reference does not have is new, not a regression */
}

int check_main(int argc, char **argv)
{
    OptArgs a;
    KvErr e;
    int begin = opt_begin(&k_check, argc, argv, &a);
    if (begin == OPT_USAGE_EXIT) return begin;
    if (begin == 0) { /* --help: the options, then more */
        printf("\ncanonical scenarios:\n");
        for (size_t i = 0; i < KV_ARRAY_LEN(k_canon); i++) printf("  %s, %d requests\n", k_canon[i].scenario, k_canon[i].requests);
        printf("\nmetrics and tolerances (beyond the tolerance: |mean difference| > abs + rel × |reference mean|):\n");
        for (int i = 0; metric_at(i); i++) {
            const Metric *m = metric_at(i);
            if (m->outputs & METRIC_CHECK)
                printf("  %-30s rel %-5g abs %g%s\n", m->name, m->tol_rel, m->tol_abs,
                       m->tol_rel == 0 && m->tol_abs == 0 ? "  (exact, every seed)" : "");
        }
        printf("\na value moved (a regression) when it is beyond its tolerance and the 95 %% Student-t interval of the\n"
               "paired difference now − reference over the recorded seeds excludes 0; beyond the tolerance but\n"
               "inside that interval is reported, not a regression. A reference of one seed: the tolerance alone.\n");
        return 0;
    }
    const char *dir = opt_get(&a, "--baseline") ? opt_get(&a, "--baseline") : "results/reference";
    const char *only = opt_get(&a, "--scenario");
    int update = opt_count(&a, "--update") > 0, quiet = opt_count(&a, "--quiet") > 0;
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
    if (only) {
        size_t i = 0;
        while (i < KV_ARRAY_LEN(k_canon) && strcmp(k_canon[i].scenario, only)) i++;
        if (i == KV_ARRAY_LEN(k_canon)) {
            char names[512] = "";
            size_t len = 0;
            for (size_t k = 0; k < KV_ARRAY_LEN(k_canon); k++)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", k ? ", " : "", k_canon[k].scenario);
            opt_print_error(&k_check, "--scenario: not in the canonical set", stderr);
            fprintf(stderr, "  canonical scenarios: %s\n", names);
            return 2;
        }
    }
    char *moved_buf = NULL, *inside_buf = NULL;
    size_t moved_len = 0, inside_len = 0;
    Tally t = {0, 0, 0, open_memstream(&moved_buf, &moved_len), open_memstream(&inside_buf, &inside_len)};
    if (!t.moved_rows || !t.inside_rows) {
        fprintf(stderr, "kvsim check: out of memory\n");
        if (t.moved_rows) fclose(t.moved_rows);
        if (t.inside_rows) fclose(t.inside_rows);
        free(moved_buf);
        free(inside_buf);
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; i < KV_ARRAY_LEN(k_canon) && rc == 0; i++) {
        if (only && strcmp(only, k_canon[i].scenario)) continue;
        uint64_t seeds[CHECK_MAX_SEEDS];
        int n = (int)n_update;
        cJSON *root = NULL;
        seeds[0] = 0; /* the scenario's own seed; --update's others follow it */
        if (!update && !(root = read_reference(dir, i, seeds, &n, &e))) {
            fprintf(stderr, "kvsim check: %s\n", e.msg);
            rc = 1;
            break;
        }
        PointResult prs[CHECK_MAX_SEEDS];
        char policies[600];
        memset(prs, 0, sizeof prs);
        for (int s = 0; s < n && rc == 0; s++) {
            uint64_t used;
            if (run_canon(i, update && s > 0 ? seeds[0] + (uint64_t)s : seeds[s], &prs[s], policies, sizeof policies, &used, &e) != 0) {
                fprintf(stderr, "kvsim check: %s\n", e.msg);
                rc = 1;
            }
            seeds[s] = used;
        }
        if (rc == 0 && update) {
            if (write_reference(dir, i, prs, policies, seeds, n, &e) != 0) {
                fprintf(stderr, "kvsim check: %s\n", e.msg);
                rc = 1;
            } else if (!quiet) {
                printf("check: wrote %s/%s.json (%s, %d requests, %d seed%s)\n", dir, k_canon[i].scenario, policies, k_canon[i].requests,
                       n, n == 1 ? "" : "s");
            }
        } else if (rc == 0) {
            int before = t.moved, n_before = t.compared, in_before = t.inside;
            compare_reference(i, root, prs, n, &t);
            if (!quiet)
                printf("check: %-40s %3d values of %s, %d seed%s: %s\n", k_canon[i].scenario, t.compared - n_before, policies, n,
                       n == 1 ? "" : "s", t.moved != before ? "MOVED" : t.inside != in_before ? "ok (differences inside the replication interval)" : "ok");
        }
        for (int s = 0; s < n; s++) point_result_free(&prs[s]);
        cJSON_Delete(root);
    }
    fclose(t.moved_rows);
    fclose(t.inside_rows);
    static const char *const head = "| scenario | policy | metric | reference | now | change | tolerance | paired difference now − reference (95 % CI) |\n"
                                    "|---|---|---|---:|---:|---:|---|---|\n";
    if (rc == 0 && t.inside > 0 && !quiet) {
        printf("\ncheck: %d value%s beyond the tolerance but inside the replication interval (the paired difference's 95 %% "
               "interval contains 0): not regressions\n\n%s", t.inside, t.inside == 1 ? "" : "s", head);
        fwrite(inside_buf, 1, inside_len, stdout);
    }
    if (rc == 0 && t.moved > 0) {
        printf("\ncheck: %d of %d values moved beyond their tolerance and outside the replication interval against %s/:\n\n%s", t.moved,
               t.compared, dir, head);
        fwrite(moved_buf, 1, moved_len, stdout);
        printf("\n(if the change is intended: kvsim check --update, and commit %s/)\n", dir);
        rc = 1;
    } else if (rc == 0 && !update && !quiet) {
        printf("check: all %d values within tolerance of %s/%s\n", t.compared, dir,
               t.inside ? " or inside the replication interval" : "");
    }
    free(moved_buf);
    free(inside_buf);
    return rc;
}
