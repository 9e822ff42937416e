/* reproduce.c — kvsim reproduce; see reproduce.h. The claim format is in docs/formats.md
 * ("Claims"). */
#include "sim/cli/reproduce.h"

#include <cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "results/resultset.h"
#include "sim/base/opt.h"
#include "sim/cost/layer_cost.h"
#include "sim/engine/sim.h"

const char *kv_embedded(const char *name, size_t *len);

static const OptSpec k_opts[] = {
    {"--claims", "PATH", 0, "a claim file or a directory of them (default: the configs/claims/*.json built in)"},
    {"--fast", NULL, 0, "only the claims marked \"fast\" (the subset make test runs)"},
    {"--only", "TEXT", 0, "only the claims whose id contains TEXT"},
    {"--out", "DIR", 0, "where report.md and report.json go (default results/reproduce)"},
    {"--quiet", NULL, 0, "no table on stdout"},
};
static const OptCmd k_cmd = {"kvsim reproduce",
                             "Run every published claim of configs/claims/ in the paper's setup and load mode; print paper "
                             "vs kvsim vs verdict (met, missed, skipped with the reason) and write DIR/report.md and "
                             "DIR/report.json. Exit status 1 when a claim file is broken or a claim cannot run.",
                             k_opts, (int)KV_ARRAY_LEN(k_opts), NULL, 0, 0};

typedef enum { V_MET, V_MISSED, V_SKIPPED, V_ERROR } Verdict;
static const char *const k_verdict[] = {"met", "missed", "skipped", "skipped"};

typedef struct Outcome {
    Verdict v;
    char value[160];  /* kvsim's value as text */
    double x;         /* numeric value, NAN for none */
    char band[96];    /* the accepted band as text */
    char reason[1200];
} Outcome;

/* ---- claim files ---- */

typedef struct ClaimFile {
    char origin[600];
    char *text;
} ClaimFile;

static int by_origin(const void *a, const void *b) { return strcmp(((const ClaimFile *)a)->origin, ((const ClaimFile *)b)->origin); }

static int load_files(const char *path, ClaimFile **out, int *n, KvErr *e)
{
    *out = NULL;
    *n = 0;
    int cap = 0;
    ClaimFile *f = NULL;
#define PUSH(orig, txt)                                                                  \
    do {                                                                                 \
        if (*n == cap) {                                                                 \
            cap = cap ? 2 * cap : 8;                                                     \
            ClaimFile *g = realloc(f, sizeof *f * (size_t)cap);                          \
            if (!g) return free(txt), *out = f, kv_err(e, "claims: out of memory");      \
            f = g;                                                                       \
        }                                                                                \
        snprintf(f[*n].origin, sizeof f[*n].origin, "%s", orig);                         \
        f[(*n)++].text = txt;                                                            \
    } while (0)
    struct stat st;
    if (!path) {
        for (int i = 0; i < kv_embedded_count(); i++) {
            const char *nm = kv_embedded_name(i);
            if (strncmp(nm, "configs/claims/", 15) != 0) continue;
            size_t len = 0;
            const char *t = kv_embedded(nm, &len);
            char *copy = t ? strdup(t) : NULL;
            if (!copy) return *out = f, kv_err(e, "%s: out of memory", nm);
            PUSH(nm, copy);
        }
    } else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return kv_err(e, "%s: cannot read the directory", path);
        struct dirent *de;
        while ((de = readdir(d))) {
            size_t l = strlen(de->d_name);
            if (l < 6 || strcmp(de->d_name + l - 5, ".json") != 0 || de->d_name[0] == '.') continue;
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", path, de->d_name);
            char *t = kv_read_file(p, NULL, e);
            if (!t) {
                closedir(d);
                *out = f;
                return -1;
            }
            PUSH(p, t);
        }
        closedir(d);
    } else {
        char *t = kv_read_file(path, NULL, e);
        if (!t) return -1;
        PUSH(path, t);
    }
#undef PUSH
    if (*n > 1) qsort(f, (size_t)*n, sizeof *f, by_origin);
    *out = f;
    if (*n == 0) return kv_err(e, "%s: no claim files (*.json)", path ? path : "configs/claims (built in)");
    return 0;
}

/* ---- setting up a claim's experiment ---- */

/* Apply an object of settings; an unknown key → 1 with *missing = the key (skipped claim). */
static int apply_settings(SimConfig *c, const cJSON *obj, const char *origin, char *missing, size_t mlen, KvErr *e)
{
    if (!obj) return 0;
    SimJsonOut out = {NULL, 0, NULL, 0, missing, mlen};
    return sim_config_apply_json(c, obj, origin, &out, e);
}

static int claim_config(const cJSON *cl, const char *origin, SimConfig *c, char *missing, size_t mlen, KvErr *e)
{
    sim_config_defaults(c);
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(cl, "scenario");
    if (cJSON_IsString(sc)) {
        char rel[512], orig[700];
        snprintf(rel, sizeof rel, "configs/scenarios/%s.json", sc->valuestring);
        char *text = kv_catalog_text(rel, NULL, orig, sizeof orig, e);
        if (!text) return kv_err(e, "%s: unknown scenario '%s'", origin, sc->valuestring);
        cJSON *o = cJSON_Parse(text);
        free(text);
        if (!cJSON_IsObject(o)) {
            cJSON_Delete(o);
            return kv_err(e, "%s: not a JSON object", orig);
        }
        int rc = apply_settings(c, o, orig, missing, mlen, e);
        cJSON_Delete(o);
        if (rc) return rc;
    }
    int rc = apply_settings(c, cJSON_GetObjectItemCaseSensitive(cl, "set"), origin, missing, mlen, e);
    if (rc) return rc;
    c->quiet = 1;
    if (sim_config_check(c, e) != 0) return kv_err_prefix(e, "%s: ", origin);
    return 0;
}

/* ---- metrics ---- */

typedef struct RowFilter {
    int64_t hmin, hmax; /* history tokens in [hmin, hmax) */
    double ttft_ns, restore_ns;
    uint64_t n;
} RowFilter;

static int filter_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    RowFilter *f = ctx;
    if (r->history_tokens < f->hmin || r->history_tokens >= f->hmax) return 0;
    f->ttft_ns += (double)r->ttft_ns;
    f->restore_ns += (double)r->restore_ns;
    f->n++;
    return 0;
}

static double num_or(const cJSON *o, const char *k, double def)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : def;
}

static const char *str_or(const cJSON *o, const char *k, const char *def)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : def;
}

/* One policy's statistic under the claim's filter. */
static int policy_stat(SimWorld *w, const char *policy, const cJSON *m, double *out, KvErr *e)
{
    const char *stat = str_or(m, "stat", "");
    RowFilter f = {(int64_t)num_or(m, "history_min", 0), (int64_t)num_or(m, "history_max", 1e18), 0, 0, 0};
    SimResult r;
    memset(&r, 0, sizeof r);
    if (sim_run(w, policy, filter_row, &f, NULL, NULL, &r, e) != 0) return kv_err_prefix(e, "%s: ", policy);
    int rc = 0;
    if (!strcmp(stat, "ttft_mean") || !strcmp(stat, "restore_mean")) {
        if (f.n == 0)
            rc = kv_err(e, "%s: no request with history in [%lld, %lld) tokens", policy, (long long)f.hmin, (long long)f.hmax);
        else *out = (!strcmp(stat, "ttft_mean") ? f.ttft_ns : f.restore_ns) / (double)f.n / 1e9;
    } else if (!strcmp(stat, "tbt_mean")) {
        if (r.tbt.n == 0) rc = kv_err(e, "%s: no time between tokens was measured (every request had one output token)", policy);
        else *out = hist_mean(&r.tbt) / 1e9;
    } else if (!strcmp(stat, "saved_bytes_per_token")) {
        *out = r.saved_bytes_per_token;
    } else {
        rc = kv_err(e, "metric.stat '%s': expected ttft_mean, restore_mean, tbt_mean or saved_bytes_per_token", stat);
    }
    sim_result_free(&r);
    return rc;
}

/* HCache's split from its policy notes, as the paper states it (Table 3: layers restored per form
 * and whether the platform is IO- or compute-bound): the notes' "reference" plan (the solver's
 * choice for a reference request on the save tier) gives the direction and L_O, its per-layer times
 * the bound (IO-bound: loading a layer's hidden states takes longer than projecting them). counts:
 * layers per restoration form {none, kv, hidden, recompute}; why: the per-layer times in words. */
static int split_metric(SimWorld *w, const char *policy, int counts[4], char *bound, size_t blen, char *why, size_t wlen,
                        KvErr *e)
{
    SimResult r;
    memset(&r, 0, sizeof r);
    if (sim_run(w, policy, NULL, NULL, NULL, NULL, &r, e) != 0) return kv_err_prefix(e, "%s: ", policy);
    cJSON *n = cJSON_Parse(r.policy_notes);
    sim_result_free(&r);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(n, "reference");
    const cJSON *sf = cJSON_GetObjectItemCaseSensitive(n, "stored_form");
    if (!cJSON_IsObject(ref) || !cJSON_IsArray(sf)) {
        cJSON_Delete(n);
        return kv_err(e, "%s: its notes have no reference plan and stored_form (not a split policy)", policy);
    }
    int L = 0; /* the model's layers: the stored form covers each once */
    const cJSON *run;
    cJSON_ArrayForEach(run, sf)
    {
        int a = 0, b = -1;
        if (sscanf(str_or(run, "layers", ""), "%d-%d", &a, &b) == 2 && b >= a) L += b - a + 1;
    }
    int k = (int)num_or(ref, "split_layers_other", 0);
    const char *dir = str_or(ref, "direction", "none");
    if (k < 0 || k > L) k = 0;
    memset(counts, 0, 4 * sizeof *counts);
    counts[2] = L - k;                                    /* hidden */
    if (!strcmp(dir, "compute")) counts[1] = k;           /* the last k layers load KV */
    else if (!strcmp(dir, "io")) counts[3] = k;           /* the first k layers are recomputed */
    else counts[2] = L;
    snprintf(bound, blen, "%s", str_or(ref, "bound", "?"));
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(ref, "per_layer_ms");
    snprintf(why, wlen, "per layer at the %d-token reference on the %s tier: projecting K,V %.3f ms, loading hidden states %.3f ms, loading KV %.3f ms",
             (int)num_or(ref, "tokens", 0), str_or(ref, "tier", "?"), num_or(pl, "project", NAN), num_or(pl, "load_hidden", NAN),
             num_or(pl, "load_kv", NAN));
    cJSON_Delete(n);
    return 0;
}

/* The band the value must lie in: the published value or band widened by the tolerance. */
static void accepted_band(const cJSON *pub, const cJSON *tol, double *lo, double *hi)
{
    double rel = num_or(tol, "relative", 0), ab = num_or(tol, "absolute", 0);
    double l, h;
    if (cJSON_GetObjectItemCaseSensitive(pub, "value")) l = h = num_or(pub, "value", 0);
    else if (cJSON_GetObjectItemCaseSensitive(pub, "at_most")) l = -INFINITY, h = num_or(pub, "at_most", 0);
    else if (cJSON_GetObjectItemCaseSensitive(pub, "at_least")) l = num_or(pub, "at_least", 0), h = INFINITY;
    else l = num_or(pub, "low", NAN), h = num_or(pub, "high", NAN);
    *lo = isfinite(l) ? l - ab - fabs(l) * rel : l;
    *hi = isfinite(h) ? h + ab + fabs(h) * rel : h;
}

static void fmt_num(char *b, size_t n, double v)
{
    if (isinf(v)) snprintf(b, n, "%s", v < 0 ? "-inf" : "inf");
    else snprintf(b, n, "%.4g", v);
}

static void judge(Outcome *o, const cJSON *pub, const cJSON *tol)
{
    double lo, hi;
    accepted_band(pub, tol, &lo, &hi);
    char a[32], b[32];
    fmt_num(a, sizeof a, lo);
    fmt_num(b, sizeof b, hi);
    snprintf(o->band, sizeof o->band, "[%s, %s]", a, b);
    if (!(lo <= hi)) {
        o->v = V_ERROR;
        snprintf(o->reason, sizeof o->reason, "the claim's published value/band is malformed");
        return;
    }
    if (o->x >= lo && o->x <= hi) {
        o->v = V_MET;
        snprintf(o->reason, sizeof o->reason, "within the accepted band");
    } else {
        o->v = V_MISSED;
        snprintf(o->reason, sizeof o->reason, "kvsim %s is %s the accepted band %s", o->value, o->x < lo ? "below" : "above", o->band);
    }
}

static void evaluate(const cJSON *cl, const char *origin, Outcome *o)
{
    KvErr e;
    memset(o, 0, sizeof *o);
    o->x = NAN;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cl, "metric");
    const cJSON *pub = cJSON_GetObjectItemCaseSensitive(cl, "published");
    const cJSON *tol = cJSON_GetObjectItemCaseSensitive(cl, "tolerance");
    const char *kind = str_or(m, "kind", "");
    SimConfig cfg;
    char missing[128] = "";
    int rc = claim_config(cl, origin, &cfg, missing, sizeof missing, &e);
    if (rc == 1) {
        o->v = V_SKIPPED;
        snprintf(o->value, sizeof o->value, "–");
        snprintf(o->reason, sizeof o->reason, "needs setting %s (the paper's load mode), which this kvsim does not have", missing);
        return;
    }
    SimWorld w;
    if (rc != 0 || sim_world_open(&w, &cfg, &e) != 0) {
        o->v = V_ERROR;
        snprintf(o->value, sizeof o->value, "–");
        snprintf(o->reason, sizeof o->reason, "cannot run: %s", e.msg);
        return;
    }
    rc = 0;
    if (!strcmp(kind, "ratio") || !strcmp(kind, "overhead")) {
        double a = 0, b = 0;
        const char *num = str_or(m, "num", ""), *den = str_or(m, "den", "");
        rc = policy_stat(&w, num, m, &a, &e);
        if (rc == 0) rc = policy_stat(&w, den, m, &b, &e);
        if (rc == 0 && !(b > 0)) rc = kv_err(&e, "%s's %s is %g: no ratio", den, str_or(m, "stat", ""), b);
        if (rc == 0) {
            o->x = !strcmp(kind, "ratio") ? a / b : a / b - 1;
            snprintf(o->value, sizeof o->value, "%.3g%s (%s %.4g / %s %.4g)", !strcmp(kind, "ratio") ? o->x : 100 * o->x,
                     !strcmp(kind, "ratio") ? "×" : " %", num, a, den, b);
        }
    } else if (!strcmp(kind, "split")) {
        int counts[4] = {0, 0, 0, 0};
        char bound[32] = "", why[400] = "";
        rc = split_metric(&w, str_or(m, "policy", "hcache"), counts, bound, sizeof bound, why, sizeof why, &e);
        if (rc == 0) {
            snprintf(o->value, sizeof o->value, "%s-bound: %d hidden + %d kv + %d recompute", bound, counts[2], counts[1], counts[3]);
            const cJSON *eq = cJSON_GetObjectItemCaseSensitive(pub, "equals");
            int ok = !strcmp(str_or(eq, "bound", ""), bound) && (int)num_or(eq, "hidden", -1) == counts[2] &&
                     (int)num_or(eq, "kv", -1) == counts[1] && (int)num_or(eq, "recompute", 0) == counts[3];
            snprintf(o->band, sizeof o->band, "%s-bound: %d hidden + %d kv + %d recompute", str_or(eq, "bound", "?"),
                     (int)num_or(eq, "hidden", -1), (int)num_or(eq, "kv", -1), (int)num_or(eq, "recompute", 0));
            o->v = ok ? V_MET : V_MISSED;
            snprintf(o->reason, sizeof o->reason, "%s (%s)", ok ? "the same split" : "kvsim splits differently", why);
            sim_world_close(&w);
            return;
        }
    } else if (!strcmp(kind, "chunk_recompute")) {
        int64_t ct = (int64_t)num_or(m, "chunk_tokens", 512), k = (int64_t)num_or(m, "chunk", 1);
        if (ct < 1 || k < 1) {
            rc = kv_err(&e, "metric: chunk_tokens and chunk must be >= 1");
        } else {
            /* A chunk as the paper timed it: one engine step of a chunked prefill (Cake §3 ran vLLM 0.6
             * with chunked prefill, a chunk per step), so the step's host overhead (the engine profile's
             * iter_overhead: scheduling, input preparation) is part of it, as in kvsim's iterations. */
            LayerOps ops = layer_ops_of_model(&w.cost);
            double layers_ns = layer_cost_prefill_ns(&ops, &w.ly, ct, (k - 1) * ct, NULL) * w.model->layers;
            double step_ns = (double)w.cfg->iter_overhead_ns;
            o->x = (layers_ns + step_ns) / 1e6;
            snprintf(o->value, sizeof o->value, "%.1f ms (chunk %lld of %lld tokens after %lld: layers %.1f + engine step %.1f)",
                     o->x, (long long)k, (long long)ct, (long long)((k - 1) * ct), layers_ns / 1e6, step_ns / 1e6);
        }
    } else {
        rc = kv_err(&e, "metric.kind '%s': expected ratio, overhead, split or chunk_recompute", kind);
    }
    sim_world_close(&w);
    if (rc != 0) {
        o->v = V_ERROR;
        snprintf(o->value, sizeof o->value, "–");
        snprintf(o->reason, sizeof o->reason, "cannot run: %s", e.msg);
        return;
    }
    judge(o, pub, tol);
}

/* ---- the report ---- */

static void md_cell(FILE *f, const char *s)
{
    fputs(" ", f);
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else if (*s == '\n') fputc(' ', f);
        else fputc(*s, f);
    }
    fputs(" |", f);
}

static void published_text(char *b, size_t n, const cJSON *pub)
{
    const char *t = str_or(pub, "text", NULL);
    if (t) snprintf(b, n, "%s", t);
    else {
        char *j = cJSON_PrintUnformatted(pub);
        snprintf(b, n, "%s", j ? j : "?");
        cJSON_free(j);
    }
}

int reproduce_main(int argc, char **argv)
{
    OptArgs a;
    KvErr e;
    int begin = opt_begin(&k_cmd, argc, argv, &a);
    if (begin >= 0) return begin;
    int fast = opt_count(&a, "--fast") > 0, quiet = opt_count(&a, "--quiet") > 0;
    const char *only = opt_get(&a, "--only"), *out = opt_get(&a, "--out");
    if (!out) out = "results/reproduce";
    ClaimFile *files = NULL;
    int nf = 0, status = 0;
    if (load_files(opt_get(&a, "--claims"), &files, &nf, &e) != 0) {
        fprintf(stderr, "kvsim: %s\n", e.msg);
        for (int i = 0; i < nf; i++) free(files[i].text);
        free(files);
        return 1;
    }
    cJSON *rep = cJSON_CreateObject();
    cJSON *kv = cJSON_AddObjectToObject(rep, "kvsim");
    cJSON_AddStringToObject(kv, "git_rev", kv_git_rev());
    cJSON *arr = cJSON_AddArrayToObject(rep, "claims");
    char *md = NULL;
    size_t mdlen = 0;
    FILE *m = open_memstream(&md, &mdlen);
    int counts[3] = {0, 0, 0};
    fprintf(m, "| paper | where | claim | published | accepted | kvsim | verdict |\n|---|---|---|---|---|---|---|\n");
    char *details = NULL;
    size_t dlen = 0;
    FILE *d = open_memstream(&details, &dlen);
    for (int i = 0; i < nf; i++) {
        cJSON *root = cJSON_Parse(files[i].text);
        const cJSON *claims = cJSON_GetObjectItemCaseSensitive(root, "claims");
        const char *paper = str_or(root, "paper", NULL);
        if (!cJSON_IsObject(root) || !paper || !cJSON_IsArray(claims)) {
            fprintf(stderr, "kvsim: %s: expected {\"paper\": \"...\", \"claims\": [...]}\n", files[i].origin);
            status = 1;
            cJSON_Delete(root);
            continue;
        }
        const cJSON *cl;
        cJSON_ArrayForEach(cl, claims)
        {
            const char *id = str_or(cl, "id", "?");
            if (only && !strstr(id, only)) continue;
            int is_fast = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cl, "fast"));
            if (fast && !is_fast) continue;
            Outcome o;
            evaluate(cl, files[i].origin, &o);
            if (o.v == V_ERROR) status = 1;
            counts[o.v == V_MET ? 0 : o.v == V_MISSED ? 1 : 2]++;
            char pubt[400];
            published_text(pubt, sizeof pubt, cJSON_GetObjectItemCaseSensitive(cl, "published"));
            const cJSON *tol = cJSON_GetObjectItemCaseSensitive(cl, "tolerance");
            fputc('|', m);
            md_cell(m, paper);
            md_cell(m, str_or(cl, "where", ""));
            md_cell(m, str_or(cl, "claim", id));
            md_cell(m, pubt);
            md_cell(m, o.band[0] ? o.band : "–");
            md_cell(m, o.value);
            md_cell(m, k_verdict[o.v]);
            fputc('\n', m);
            fprintf(d, "- **%s** (%s): %s — %s.", id, k_verdict[o.v], str_or(cl, "claim", ""), o.reason);
            if (str_or(tol, "why", NULL)) fprintf(d, " Tolerance: %s.", str_or(tol, "why", ""));
            if (o.v == V_MISSED && str_or(cl, "known_gap", NULL)) fprintf(d, " Known gap: %s", str_or(cl, "known_gap", ""));
            fputc('\n', d);
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "id", id);
            cJSON_AddStringToObject(x, "paper", paper);
            cJSON_AddStringToObject(x, "file", files[i].origin);
            cJSON_AddStringToObject(x, "where", str_or(cl, "where", ""));
            cJSON_AddStringToObject(x, "claim", str_or(cl, "claim", ""));
            cJSON_AddItemToObject(x, "published", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(cl, "published"), 1));
            cJSON_AddItemToObject(x, "tolerance", cJSON_Duplicate(tol, 1));
            if (isfinite(o.x)) cJSON_AddNumberToObject(x, "kvsim", o.x);
            else cJSON_AddNullToObject(x, "kvsim");
            cJSON_AddStringToObject(x, "kvsim_text", o.value);
            cJSON_AddStringToObject(x, "accepted", o.band);
            cJSON_AddStringToObject(x, "verdict", k_verdict[o.v]);
            cJSON_AddStringToObject(x, "reason", o.reason);
            cJSON_AddItemToArray(arr, x);
        }
        cJSON_Delete(root);
    }
    fclose(d);
    fclose(m);
    cJSON *sum = cJSON_AddObjectToObject(rep, "counts");
    cJSON_AddNumberToObject(sum, "met", counts[0]);
    cJSON_AddNumberToObject(sum, "missed", counts[1]);
    cJSON_AddNumberToObject(sum, "skipped", counts[2]);
    char head[256];
    snprintf(head, sizeof head, "# kvsim reproduce: %d claims — %d met, %d missed, %d skipped\n\n", counts[0] + counts[1] + counts[2],
             counts[0], counts[1], counts[2]);
    if (!quiet) printf("%s%s\n%s", head, md, details);
    ResultSet rs;
    char path[4400];
    char *js = cJSON_Print(rep);
    size_t jl = js ? strlen(js) : 0;
    if (js) js[jl] = '\n'; /* cJSON_Print leaves room for the NUL: the newline replaces it */
    int rc = js ? rs_begin(&rs, out, &e) : kv_err(&e, "report.json: out of memory");
    if (rc == 0 && (rs_path(&rs, "report.json", path, sizeof path, &e) != 0 ||
                    kv_write_atomic(path, js, jl + 1, &e) != 0 || rs_path(&rs, "report.md", path, sizeof path, &e) != 0))
        rc = -1;
    if (rc == 0) {
        KvAtomicFile af;
        if (kv_atomic_open(&af, path, &e) != 0) rc = -1;
        else {
            fprintf(af.f, "%s%s\n%s", head, md, details);
            rc = kv_atomic_commit(&af, &e);
        }
    }
    if (rc == 0) rc = rs_commit(&rs, &e);
    rs_abort(&rs);
    if (rc != 0) {
        fprintf(stderr, "kvsim: %s\n", e.msg);
        status = 1;
    } else if (!quiet) {
        fprintf(stderr, "report in %s/ (report.md, report.json)\n", out);
    }
    cJSON_free(js);
    cJSON_Delete(rep);
    free(md);
    free(details);
    for (int i = 0; i < nf; i++) free(files[i].text);
    free(files);
    return status;
}
