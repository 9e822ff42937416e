/* replications.c — mean ± CI over seeds and paired differences; see replications.h. */
#include "results/replications.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "results/metric.h"
#include "results/report.h"
#include "sim/base/stats.h"

/* the replications' metrics: the metric table's METRIC_REPL rows in headline order (table.md's
 * columns, then the restore throughput) */
static const Metric *repl_metric(int m)
{
    int k = 0, nh = metric_headline_count();
    for (int h = 1; h <= nh; h++) {
        const Metric *x = metric_headline(h, METRIC_REPL);
        if (x && k++ == m) return x;
    }
    return NULL;
}

int repl_metric_count(void)
{
    int n = 0;
    while (repl_metric(n)) n++;
    return n;
}

const char *repl_metric_key(int m)
{
    const Metric *x = repl_metric(m);
    return x ? x->key : NULL;
}

double repl_metric_value(const SimResult *r, int m)
{
    const Metric *x = repl_metric(m);
    return x ? metric_value(x, r) : NAN;
}

int repl_run_reduce(ReplRun *out, const SimResult *r, const double *pct, int n_pct, KvErr *e)
{
    memset(out, 0, sizeof *out);
    int n = repl_metric_count();
    if (n > REPL_MAX_METRICS) return kv_err(e, "replications: %d metrics, more than the %d a reduced run holds", n, REPL_MAX_METRICS);
    if (n_pct > REPL_MAX_PCT) return kv_err(e, "replications: %d percentiles, more than the %d a reduced run holds", n_pct, REPL_MAX_PCT);
    for (int m = 0; m < n; m++) out->v[m] = repl_metric_value(r, m);
    if (!(out->all = malloc((size_t)metric_count() * sizeof *out->all))) return kv_err(e, "replications: out of memory");
    for (int i = 0; i < metric_count(); i++) out->all[i] = metric_value(metric_at(i), r);
    const Hist *h[3] = {&r->ttft, &r->e2e, &r->tbt};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n_pct; i++) out->q[k][i] = h[k]->n ? hist_percentile(h[k], pct[i] / 100) / 1e9 : NAN;
    out->overloaded = r->load.overloaded != 0;
    out->nothing = report_restored_nothing(r);
    out->extrapolations = r->extrapolations;
    out->prefix_block_tokens = r->prefix_block_tokens;
    out->prefix_named = r->prefix_named;
    out->prefix_hit_requests = r->prefix_hit_requests;
    out->prefix_hit_tokens = r->prefix_hit_tokens;
    out->prefix_tier_asked = r->prefix_tier_asked;
    memcpy(out->prefix_tier_found, r->prefix_tier_found, sizeof out->prefix_tier_found);
    memcpy(out->prefix_tier_dedup, r->prefix_tier_dedup, sizeof out->prefix_tier_dedup);
    if (out->overloaded) {
        char ev[640] = "";
        report_load_warning(ev, sizeof ev, r);
        if (!(out->load_warning = strdup(ev))) return kv_err(e, "replications: out of memory");
    }
    return 0;
}

void repl_run_free(ReplRun *run)
{
    free(run->load_warning);
    free(run->all);
    run->load_warning = NULL;
    run->all = NULL;
}

/* run i (= s * n_policies + p): its value of metric m, its flags and counts, from runs or from res */
static double run_value(const Replications *r, int i, int m) { return r->runs ? r->runs[i].v[m] : repl_metric_value(&r->res[i], m); }
static int run_overloaded(const Replications *r, int i) { return r->runs ? r->runs[i].overloaded : r->res[i].load.overloaded != 0; }
static int run_nothing(const Replications *r, int i) { return r->runs ? r->runs[i].nothing : report_restored_nothing(&r->res[i]); }
static uint64_t run_extrapolations(const Replications *r, int i) { return r->runs ? r->runs[i].extrapolations : r->res[i].extrapolations; }
static void run_warning(const Replications *r, int i, char *b, size_t n)
{
    if (!r->runs) report_load_warning(b, n, &r->res[i]);
    else snprintf(b, n, "%s", r->runs[i].load_warning ? r->runs[i].load_warning : "");
}
static void run_prefix(const Replications *r, int i, int64_t *block_tokens, uint64_t *named, uint64_t *hit_req, uint64_t *hit_tok)
{
    if (r->runs) {
        const ReplRun *x = &r->runs[i];
        *block_tokens = x->prefix_block_tokens, *named = x->prefix_named, *hit_req = x->prefix_hit_requests, *hit_tok = x->prefix_hit_tokens;
    } else {
        const SimResult *x = &r->res[i];
        *block_tokens = x->prefix_block_tokens, *named = x->prefix_named, *hit_req = x->prefix_hit_requests, *hit_tok = x->prefix_hit_tokens;
    }
}

/* run i's named history blocks looked for below HBM, and those found in and stored once by tier t */
static void run_tier_blocks(const Replications *r, int i, Tier t, uint64_t *asked, uint64_t *found, uint64_t *dedup)
{
    if (r->runs) {
        const ReplRun *x = &r->runs[i];
        *asked = x->prefix_tier_asked, *found = x->prefix_tier_found[t], *dedup = x->prefix_tier_dedup[t];
    } else {
        const SimResult *x = &r->res[i];
        *asked = x->prefix_tier_asked, *found = x->prefix_tier_found[t], *dedup = x->prefix_tier_dedup[t];
    }
}

/* seed s's value of metric m for policy p: as is (diff 0), minus the baseline's (1), or the
 * baseline's divided by it (2: how many times lower p's value is; NaN when p's is 0) */
static double seed_value(const Replications *r, int s, int p, int m, int diff)
{
    double v = run_value(r, s * r->n_policies + p, m);
    if (diff == 0) return v;
    double b = run_value(r, s * r->n_policies + r->baseline, m);
    if (diff == 1) return v - b;
    return v != 0 ? b / v : NAN;
}

int repl_stat(const Replications *r, int p, int m, int diff, ReplStat *out, KvErr *e)
{
    memset(out, 0, sizeof *out);
    out->n = r->n_seeds;
    out->mean = out->ci95 = NAN;
    if (diff && (r->baseline < 0 || r->baseline >= r->n_policies)) return kv_err(e, "paired difference without a baseline");
    double *x = malloc(sizeof *x * (size_t)(r->n_seeds > 0 ? r->n_seeds : 1));
    if (!x) return kv_err(e, "replications: out of memory");
    int ok = 1;
    for (int s = 0; s < r->n_seeds; s++) {
        double v = seed_value(r, s, p, m, diff);
        if (!isfinite(v)) ok = 0;
        x[s] = v;
    }
    int rc = 0;
    if (ok && r->n_seeds >= 2) {
        double mean, hw;
        rc = stats_mean_ci(x, (size_t)r->n_seeds, r->level, &mean, &hw, e);
        if (rc == 0) {
            out->mean = mean;
            out->ci95 = hw;
            /* the interval [mean - hw, mean + hw] excludes 0 (differences) or 1 (ratios) */
            out->significant = fabs(diff == 2 ? mean - 1 : mean) > hw;
        }
    }
    free(x);
    return rc;
}

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static cJSON *stat_json(const Replications *r, int p, int m, int diff, KvErr *e)
{
    ReplStat st;
    if (repl_stat(r, p, m, diff, &st, e) != 0) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "mean", num_or_null(st.mean));
    cJSON_AddItemToObject(o, "ci95", num_or_null(st.ci95));
    cJSON_AddNumberToObject(o, "n", st.n);
    if (diff) {
        if (isfinite(st.mean)) cJSON_AddBoolToObject(o, "significant", st.significant);
        else cJSON_AddNullToObject(o, "significant");
    }
    cJSON *vals = cJSON_AddArrayToObject(o, "per_seed");
    for (int s = 0; s < r->n_seeds; s++) {
        cJSON_AddItemToArray(vals, num_or_null(seed_value(r, s, p, m, diff)));
    }
    return o;
}

static cJSON *policy_stats(const Replications *r, int p, int diff, KvErr *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "policy", r->res[p].policy);
    for (int m = 0; repl_metric(m); m++) {
        if (diff == 2 && repl_metric(m)->show != MS_MS) continue; /* ratios: of times only */
        cJSON *x = stat_json(r, p, m, diff, e);
        if (!x) {
            cJSON_Delete(o);
            return NULL;
        }
        cJSON_AddItemToObject(o, repl_metric(m)->key, x);
    }
    return o;
}

cJSON *repl_json(const Replications *r, KvErr *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *seeds = cJSON_AddArrayToObject(o, "seeds");
    for (int s = 0; s < r->n_seeds; s++) cJSON_AddItemToArray(seeds, cJSON_CreateNumber((double)r->seeds[s]));
    cJSON_AddNumberToObject(o, "level", r->level);
    cJSON_AddStringToObject(o, "method", "mean over seeds ± Student-t half-width t(1-(1-level)/2, n-1) · s/sqrt(n); "
                                         "common random numbers: every policy replays the same trace per seed");
    cJSON *arr = cJSON_AddArrayToObject(o, "metrics");
    for (int p = 0; p < r->n_policies; p++) {
        cJSON *x = policy_stats(r, p, 0, e);
        if (!x) goto fail;
        cJSON_AddItemToArray(arr, x);
    }
    if (r->baseline >= 0) {
        cJSON *d = cJSON_AddObjectToObject(o, "paired_differences");
        cJSON_AddStringToObject(d, "baseline", r->res[r->baseline].policy);
        cJSON_AddStringToObject(d, "definition", "policy − baseline per seed; significant: the interval excludes 0");
        cJSON *pa = cJSON_AddArrayToObject(d, "policies");
        for (int p = 0; p < r->n_policies; p++) {
            if (p == r->baseline) continue;
            cJSON *x = policy_stats(r, p, 1, e);
            if (!x) goto fail;
            cJSON_AddItemToArray(pa, x);
        }
        cJSON *q = cJSON_AddObjectToObject(o, "ratios_to_baseline");
        cJSON_AddStringToObject(q, "baseline", r->res[r->baseline].policy);
        cJSON_AddStringToObject(q, "definition",
                                "baseline ÷ policy per seed, times only (how many times lower the policy's time is); "
                                "significant: the interval excludes 1");
        cJSON *qa = cJSON_AddArrayToObject(q, "policies");
        for (int p = 0; p < r->n_policies; p++) {
            if (p == r->baseline) continue;
            cJSON *x = policy_stats(r, p, 2, e);
            if (!x) goto fail;
            cJSON_AddItemToArray(qa, x);
        }
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

/* "mean ± ci" in the column's units; diff: signed, " n.s." when the interval holds 0 */
static void cell(char *b, size_t n, MetricShow k, const ReplStat *st, int diff)
{
    if (!isfinite(st->mean) || !isfinite(st->ci95)) {
        snprintf(b, n, "–");
        return;
    }
    double m = st->mean, c = st->ci95;
    char mb[48], cb[48];
    if (diff == 2) { /* a ratio of times */
        snprintf(b, n, "%.2f× ± %.2f%s", m, c, st->significant ? "" : " n.s.");
        return;
    }
    switch (k) {
    case MS_MS: snprintf(b, n, diff ? "%+.1f ± %.1f" : "%.1f ± %.1f", m * 1e3, c * 1e3); break;
    case MS_PCT: snprintf(b, n, diff ? "%+.1f ± %.1f" : "%.1f ± %.1f", m * 100, c * 100); break;
    case MS_RATIO: snprintf(b, n, diff ? "%+.2f ± %.2f" : "%.2f ± %.2f", m, c); break;
    case MS_BYTES:
        report_human_bytes(mb, sizeof mb, fabs(m));
        report_human_bytes(cb, sizeof cb, c);
        snprintf(b, n, "%s%s ± %s", diff ? (m < 0 ? "-" : "+") : "", mb, cb);
        break;
    default: snprintf(b, n, diff ? "%+.0f ± %.0f" : "%.0f ± %.0f", m, c); break; /* counts and rates */
    }
    if (diff && !st->significant) {
        size_t l = strlen(b);
        snprintf(b + l, n - l, " n.s.");
    }
}

/* the seeds in which policy p's run was overloaded (summary.json load.overloaded) */
static int overloaded_seeds(const Replications *r, int p)
{
    int k = 0;
    for (int s = 0; s < r->n_seeds; s++) k += run_overloaded(r, s * r->n_policies + p);
    return k;
}

static int table(FILE *out, const Replications *r, int diff, KvErr *e)
{
    fprintf(out, "| policy | seeds |");
    for (int m = 0; repl_metric(m); m++)
        if (diff != 2 || repl_metric(m)->show == MS_MS)
            fprintf(out, " %s%s |", diff == 1 ? "Δ " : diff ? "÷ " : "", repl_metric(m)->header);
    if (!diff) fprintf(out, " overloaded seeds |"); /* the mark of each row: its means are of a queue that kept growing */
    fprintf(out, "\n|---|---:|");
    for (int m = 0; repl_metric(m); m++)
        if (diff != 2 || repl_metric(m)->show == MS_MS) fprintf(out, "---:|");
    if (!diff) fprintf(out, "---:|");
    fputc('\n', out);
    for (int p = 0; p < r->n_policies; p++) {
        if (diff && p == r->baseline) continue;
        if (diff == 2) fprintf(out, "| %s ÷ %s | %d |", r->res[r->baseline].policy, r->res[p].policy, r->n_seeds);
        else if (diff) fprintf(out, "| %s − %s | %d |", r->res[p].policy, r->res[r->baseline].policy, r->n_seeds);
        else fprintf(out, "| %s | %d |", r->res[p].policy, r->n_seeds);
        for (int m = 0; repl_metric(m); m++) {
            if (diff == 2 && repl_metric(m)->show != MS_MS) continue;
            ReplStat st;
            if (repl_stat(r, p, m, diff, &st, e) != 0) return -1;
            char b[128];
            cell(b, sizeof b, repl_metric(m)->show, &st, diff);
            fprintf(out, " %s |", b);
        }
        if (!diff) {
            int k = overloaded_seeds(r, p);
            fprintf(out, k ? " %d of %d ⚠ |" : " %d of %d |", k, r->n_seeds);
        }
        fputc('\n', out);
    }
    return 0;
}

int repl_markdown(FILE *out, const SimWorld *w, const Replications *r, KvErr *e)
{
    fprintf(out, "\n%s on %s (%s, tp %d, pp %d), trace %s, %s\n", w->model->name, w->platform->name,
            w->hw.gpus[w->platform->gpu].name, w->cfg->tp, w->cfg->pp, w->cfg->trace, w->cost_source);
    fprintf(out, "%d seeds (%llu..%llu), mean ± %.0f %% confidence interval (Student t); every policy replays the same "
                 "trace per seed\n\n",
            r->n_seeds, (unsigned long long)r->seeds[0], (unsigned long long)r->seeds[r->n_seeds - 1], r->level * 100);
    if (table(out, r, 0, e) != 0) return -1;
    if (r->baseline >= 0) {
        fprintf(out, "\nPaired differences to %s (policy − %s, seed by seed; n.s.: the %.0f %% interval contains 0)\n\n",
                r->res[r->baseline].policy, r->res[r->baseline].policy, r->level * 100);
        if (table(out, r, 1, e) != 0) return -1;
        fprintf(out, "\nRatios to %s (%s ÷ policy, seed by seed: how many times lower the policy's time is; n.s.: the %.0f %% "
                     "interval contains 1)\n\n",
                r->res[r->baseline].policy, r->res[r->baseline].policy, r->level * 100);
        if (table(out, r, 2, e) != 0) return -1;
    }
    repl_footer(out, r);
    return 0;
}

void repl_footer(FILE *out, const Replications *r)
{
    uint64_t ex = 0;
    for (int i = 0; i < r->n_seeds * r->n_policies; i++) ex += run_extrapolations(r, i);
    int first = 1;
    for (int p = 0; p < r->n_policies; p++) { /* the overloaded rows, with the seeds and the first one's evidence */
        int k = overloaded_seeds(r, p);
        if (!k) continue;
        char seeds[256] = "", ev[640] = "";
        size_t len = 0;
        uint64_t first_seed = 0;
        for (int s = 0; s < r->n_seeds; s++) {
            int i = s * r->n_policies + p;
            if (!run_overloaded(r, i)) continue;
            if (len < sizeof seeds) len += (size_t)snprintf(seeds + len, sizeof seeds - len, "%s%llu", len ? ", " : "", (unsigned long long)r->seeds[s]);
            if (!ev[0]) run_warning(r, i, ev, sizeof ev), first_seed = r->seeds[s];
        }
        const char *why = strstr(ev, "overloaded: "); /* the evidence without its "policy: overloaded: " */
        fprintf(out, "%swarning: %s: overloaded in %d of %d seeds (%s): its means and percentiles depend on the run's length; "
                     "seed %llu: %s\n",
                first ? "\n" : "", r->res[p].policy, k, r->n_seeds, seeds, (unsigned long long)first_seed,
                why ? why + strlen("overloaded: ") : ev);
        first = 0;
    }
    /* the prefix cache, where the trace named blocks: the share of requests that took a cached prefix */
    first = 1;
    for (int p = 0; p < r->n_policies; p++) {
        double sum = 0, lo = 1, hi = 0, tok = 0, req = 0;
        int k = 0;
        for (int s = 0; s < r->n_seeds; s++) {
            int64_t bt;
            uint64_t named, hit_req, hit_tok;
            run_prefix(r, s * r->n_policies + p, &bt, &named, &hit_req, &hit_tok);
            if (bt <= 0 || !named) continue;
            double sh = (double)hit_req / (double)named;
            sum += sh, lo = sh < lo ? sh : lo, hi = sh > hi ? sh : hi, k++;
            tok += (double)hit_tok, req += (double)hit_req;
        }
        if (!k) continue;
        fprintf(out, "%s%s: prefix cache: %.1f %% of the requests took a cached prefix (mean of %d seeds, %.1f–%.1f %%), "
                     "%.0f tokens each on average\n",
                first ? "\n" : "", r->res[p].policy, 100 * sum / k, k, 100 * lo, 100 * hi, req > 0 ? tok / req : 0);
        first = 0;
        /* below HBM: the share of the named history blocks looked for there that each tier held */
        char line[512];
        size_t o = 0;
        for (int t = TIER_DRAM; t < SIM_TIERS && o < sizeof line; t++) {
            double fs = 0, flo = 1, fhi = 0, dd = 0;
            int kt = 0, any = 0;
            for (int s = 0; s < r->n_seeds; s++) {
                uint64_t asked, found, dedup;
                run_tier_blocks(r, s * r->n_policies + p, (Tier)t, &asked, &found, &dedup);
                any |= found || dedup;
                dd += (double)dedup;
                if (!asked) continue;
                double sh = (double)found / (double)asked;
                fs += sh, flo = sh < flo ? sh : flo, fhi = sh > fhi ? sh : fhi, kt++;
            }
            if (!any) continue;
            char hit[96] = "none looked for below HBM";
            if (kt) snprintf(hit, sizeof hit, "%.1f %% found (%.1f–%.1f %%)", 100 * fs / kt, 100 * flo, 100 * fhi);
            o += (size_t)snprintf(line + o, sizeof line - o, "%s%s %s, %.0f blocks stored once for several states", o ? "; " : "",
                                  tier_name((Tier)t), hit, dd / r->n_seeds);
        }
        if (o)
            fprintf(out, "%s: tier block stores (named history blocks looked for below HBM; mean of %d seeds): %s\n", r->res[p].policy,
                    r->n_seeds, line);
    }
    if (ex) fprintf(out, "\nwarning: %llu cost lookups fell outside the sampled range and were extrapolated\n", (unsigned long long)ex);
    /* nothing restored in any seed by any policy: the rows differ only in what the policies save */
    int none = 1, why = run_nothing(r, 0);
    for (int i = 0; i < r->n_seeds * r->n_policies && none; i++) none = run_nothing(r, i) != 0;
    if (none) {
        fputc('\n', out);
        /* the note says why when every run has the same reason, as the first seed's runs then show */
        for (int i = 1; i < r->n_seeds * r->n_policies && why; i++)
            if (run_nothing(r, i) != why) why = 0;
        if (why) report_restored_nothing_note(out, r->res, r->n_policies);
    }
}
