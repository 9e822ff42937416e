/* check.c — `kvsim check`: re-run the canonical scenarios and compare key metrics with the
 * committed reference results; see check.h.
 *
 * Responsible for: the canonical set (k_canon), the metrics compared and their tolerances
 * (k_tol: a value moved when |now − reference| > abs + rel × |reference|), reading and writing the
 * reference files, the table of what moved.
 * Not responsible for: running a point and naming its metrics (point.c).
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

#include "sim/base/opt.h"
#include "sim/cli/point.h"

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

static const struct {
    const char *name;
    double rel, abs;
} k_tol[] = {
    {"requests", 0, 0},
    {"ttft_s.mean", 0.02, 1e-4},
    {"ttft_s.p50", 0.02, 1e-4},
    {"ttft_s.p99", 0.02, 1e-4},
    {"restore_s.mean", 0.02, 1e-4},
    {"tbt_s.mean", 0.02, 1e-5},
    {"slo_attainment", 0, 0.01},
    {"restore_from_share.resident", 0, 0.01},
    {"restore_from_share.dram", 0, 0.01},
    {"restore_from_share.ssd", 0, 0.01},
    {"restore_from_share.remote", 0, 0.01},
    {"restore_from_share.recompute", 0, 0.01},
    {"bytes.h2d", 0.02, 1e6},
    {"sim_time_s", 0.01, 1e-3},
};

static int tol_index(const char *name)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(k_tol); i++)
        if (!strcmp(k_tol[i].name, name)) return (int)i;
    return -1;
}

static const OptSpec k_check_opts[] = {
    {"--baseline", "DIR", 0, "the reference results (default results/reference)"},
    {"--update", NULL, 0, "write the reference results of this build into DIR instead of comparing"},
    {"--scenario", "NAME", 0, "only this scenario of the canonical set"},
    {"--quiet", NULL, 0, "print only regressions"},
};
static const OptCmd k_check = {
    "kvsim check",
    "Re-run the canonical scenarios (6 scenarios × 300 requests, each with its own policies) and compare key "
    "metrics with the reference results within the tolerances below; exit 1 with a table of what moved.",
    k_check_opts, (int)KV_ARRAY_LEN(k_check_opts), NULL, 0, 0};

static int run_canon(size_t i, PointResult *pr, char *policies, size_t plen, KvErr *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "scenario", k_canon[i].scenario);
    cJSON_AddNumberToObject(o, "requests", k_canon[i].requests);
    SimConfig c;
    int rc = point_config(&c, o, k_canon[i].scenario, policies, plen, e);
    cJSON_Delete(o);
    if (rc != 0) return -1;
    if (point_run(&c, policies, pr, e) != 0) return kv_err_prefix(e, "%s: ", k_canon[i].scenario);
    return 0;
}

static int write_reference(const char *dir, size_t i, const PointResult *pr, const char *policies, KvErr *e)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "scenario", k_canon[i].scenario);
    cJSON_AddNumberToObject(root, "requests", k_canon[i].requests);
    cJSON_AddStringToObject(root, "policies", policies);
    cJSON *m = cJSON_AddObjectToObject(root, "metrics");
    for (int k = 0; k < pr->n; k++) {
        if (tol_index(pr->m[k].name) < 0) continue;
        cJSON *p = cJSON_GetObjectItemCaseSensitive(m, pr->m[k].policy);
        if (!p) p = cJSON_AddObjectToObject(m, pr->m[k].policy);
        cJSON_AddNumberToObject(p, pr->m[k].name, pr->m[k].value);
    }
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

/* Compare with DIR/SCENARIO.json; prints a table row per moved value into rows (appended). */
static int compare_reference(const char *dir, size_t i, const PointResult *pr, FILE *rows, int *moved, int *compared,
                             KvErr *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.json", dir, k_canon[i].scenario);
    char *text = kv_read_file(path, NULL, e);
    if (!text) return kv_err_prefix(e, "no reference for %s (kvsim check --update writes it): ", k_canon[i].scenario);
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "metrics");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "requests");
    if (!cJSON_IsObject(m) || !cJSON_IsNumber(req)) {
        cJSON_Delete(root);
        return kv_err(e, "%s: expected {\"scenario\", \"requests\", \"policies\", \"metrics\": {policy: {metric: value}}}", path);
    }
    if ((int)req->valuedouble != k_canon[i].requests) {
        cJSON_Delete(root);
        return kv_err(e, "%s: written for %d requests, the check runs %d (kvsim check --update)", path, (int)req->valuedouble,
                      k_canon[i].requests);
    }
    for (const cJSON *p = m->child; p; p = p->next) {
        for (const cJSON *v = p->child; v; v = v->next) {
            int t = tol_index(v->string), found;
            if (t < 0 || !cJSON_IsNumber(v)) continue;
            double ref = v->valuedouble, now = find_metric(pr, p->string, v->string, &found);
            (*compared)++;
            double lim = k_tol[t].abs + k_tol[t].rel * fabs(ref);
            if (found && fabs(now - ref) <= lim) continue;
            (*moved)++;
            char chg[32] = "missing", nowt[32] = "—";
            if (found) {
                snprintf(nowt, sizeof nowt, "%.6g", now);
                if (ref != 0) snprintf(chg, sizeof chg, "%+.2f%%", 100 * (now - ref) / fabs(ref));
                else snprintf(chg, sizeof chg, "%+.3g", now - ref);
            }
            char tol[48];
            if (k_tol[t].rel > 0) snprintf(tol, sizeof tol, "%g%% + %g", 100 * k_tol[t].rel, k_tol[t].abs);
            else snprintf(tol, sizeof tol, "%g", k_tol[t].abs);
            fprintf(rows, "| %s | %s | %s | %.6g | %s | %s | %s |\n", k_canon[i].scenario, p->string, v->string, ref, nowt, chg,
                    tol);
        }
    }
    /* a policy run now that the reference does not have is new, not a regression */
    cJSON_Delete(root);
    return 0;
}

int check_main(int argc, char **argv)
{
    OptArgs a;
    KvErr e;
    if (opt_parse(&k_check, argc, argv, &a, &e) != 0) {
        opt_print_error(&k_check, e.msg, stderr);
        return 2;
    }
    if (a.help) {
        opt_help(&k_check, stdout);
        printf("\ncanonical scenarios:\n");
        for (size_t i = 0; i < KV_ARRAY_LEN(k_canon); i++) printf("  %s, %d requests\n", k_canon[i].scenario, k_canon[i].requests);
        printf("\nmetrics and tolerances (a value moved when |now - reference| > abs + rel × |reference|):\n");
        for (size_t i = 0; i < KV_ARRAY_LEN(k_tol); i++)
            printf("  %-30s rel %-5g abs %g\n", k_tol[i].name, k_tol[i].rel, k_tol[i].abs);
        return 0;
    }
    const char *dir = opt_get(&a, "--baseline") ? opt_get(&a, "--baseline") : "results/reference";
    const char *only = opt_get(&a, "--scenario");
    int update = opt_count(&a, "--update") > 0, quiet = opt_count(&a, "--quiet") > 0;
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
    char *rows_buf = NULL;
    size_t rows_len = 0;
    FILE *rows = open_memstream(&rows_buf, &rows_len);
    if (!rows) {
        fprintf(stderr, "kvsim check: out of memory\n");
        return 1;
    }
    int rc = 0, moved = 0, compared = 0;
    for (size_t i = 0; i < KV_ARRAY_LEN(k_canon) && rc == 0; i++) {
        if (only && strcmp(only, k_canon[i].scenario)) continue;
        PointResult pr;
        char policies[600];
        memset(&pr, 0, sizeof pr);
        if (run_canon(i, &pr, policies, sizeof policies, &e) != 0) {
            fprintf(stderr, "kvsim check: %s\n", e.msg);
            rc = 1;
        } else if (update) {
            if (write_reference(dir, i, &pr, policies, &e) != 0) {
                fprintf(stderr, "kvsim check: %s\n", e.msg);
                rc = 1;
            } else if (!quiet) {
                printf("check: wrote %s/%s.json (%s, %d requests)\n", dir, k_canon[i].scenario, policies, k_canon[i].requests);
            }
        } else {
            int before = moved, n_before = compared;
            if (compare_reference(dir, i, &pr, rows, &moved, &compared, &e) != 0) {
                fprintf(stderr, "kvsim check: %s\n", e.msg);
                rc = 1;
            } else if (!quiet) {
                printf("check: %-40s %3d values of %s: %s\n", k_canon[i].scenario, compared - n_before, policies,
                       moved == before ? "ok" : "MOVED");
            }
        }
        point_result_free(&pr);
    }
    fclose(rows);
    if (rc == 0 && moved > 0) {
        printf("\ncheck: %d of %d values moved beyond their tolerance against %s/:\n\n", moved, compared, dir);
        printf("| scenario | policy | metric | reference | now | change | tolerance |\n|---|---|---|---:|---:|---:|---|\n");
        fwrite(rows_buf, 1, rows_len, stdout);
        printf("\n(if the change is intended: kvsim check --update, and commit %s/)\n", dir);
        rc = 1;
    } else if (rc == 0 && !update && !quiet) {
        printf("check: all %d values within tolerance of %s/\n", compared, dir);
    }
    free(rows_buf);
    return rc;
}
