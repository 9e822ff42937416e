/* report.c — summary.json, requests.csv and the Markdown table; see report.h.
 *
 * Metric definitions (also in the README):
 *  - ttft = first token time − release time; split queue (release → admission), restore
 *    (admission → the last restored state is in place), prefill (the rest: new input + overhead).
 *  - tbt = gap between consecutive output tokens of a request (all gaps of all requests).
 *  - restore throughput = restored history tokens / summed restoration time of the requests that
 *    restored anything.
 *  - lower-bound ratio = a request's restoration time / its bound with all compute and IO used
 *    perfectly (T_comp·T_io/(T_comp+T_io); T_comp alone when nothing was saved).
 *  - slo attainment = share of requests with ttft <= slo_ttft and mean tbt <= slo_tbt.
 */
#include "results/report.h"

#include <cJSON.h>
#include <math.h>
#include <string.h>

int report_csv_open(ReqCsv *c, const char *path, KvErr *e)
{
    memset(c, 0, sizeof *c);
    if (kv_atomic_open(&c->af, path, e) != 0) return -1;
    fputs("policy,request,session,session_id,turn,replica,arrival_s,history_tokens,new_tokens,output_tokens,restore_from,"
          "recomputed_tokens,loaded_tokens,queue_s,restore_s,prefill_s,ttft_s,tbt_mean_s,tbt_max_s,done_s,"
          "restore_lower_bound_s\n",
          c->af.f);
    return 0;
}

/* A CSV field: as is, or quoted (inner quotes doubled) when it holds a comma, quote or line break. */
static void csv_field(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")]) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* decimal digits of v at the end of buf (which has room for 20), returns the start */
static char *put_u64(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

static char *app_u64(char *p, uint64_t v)
{
    char tmp[24], *b = put_u64(tmp + sizeof tmp, v);
    size_t n = (size_t)(tmp + sizeof tmp - b);
    memcpy(p, b, n);
    return p + n;
}

static char *app_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return app_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return app_u64(p, (uint64_t)v);
}

/* ns as seconds with nine decimals: the text "%.9f" prints for (double)ns / 1e9. For 0 <= ns < 8e15
 * that is exactly ns / 10^9 and ns % 10^9 (the double is within 2^-31 s of the exact quotient, which
 * has nine decimals, so printf rounds back to it); other values go through printf. */
char *report_app_seconds9(char *p, int64_t ns)
{
    if (ns < 0 || ns >= 8000000000000000LL) return p + sprintf(p, "%.9f", (double)ns / 1e9);
    p = app_u64(p, (uint64_t)(ns / 1000000000));
    *p++ = '.';
    uint64_t frac = (uint64_t)(ns % 1000000000);
    for (int i = 8; i >= 0; i--) {
        p[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    return p + 9;
}

/* d (seconds, a double) with nine decimals: the text "%.9f" prints — d's exact binary value scaled
 * by 10^9 in 128-bit integers and rounded to nearest, ties to even, as glibc's printf rounds.
 * Negative (also -0), non-finite and huge values go through printf. */
char *report_app_fixed9(char *p, double d)
{
    if (!(d >= 0 && d < 1e9) || signbit(d)) return p + sprintf(p, "%.9f", d);
    int e;
    double fr = frexp(d, &e);                      /* d = fr · 2^e, fr in [0.5, 1) (or 0) */
    uint64_t m = (uint64_t)ldexp(fr, 53);          /* exact: d = m · 2^(e − 53) */
    e -= 53;
    unsigned __int128 x = (unsigned __int128)m * 1000000000u, q;
    if (e >= 0) {
        q = x << e;                                /* d < 1e9: e <= 0 here, kept for clarity */
    } else if (-e >= 120) {
        q = 0;                                     /* x < 2^83: below half a unit */
    } else {
        int sh = -e;
        q = x >> sh;
        unsigned __int128 rem = x - (q << sh), half = (unsigned __int128)1 << (sh - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
    }
    uint64_t v = (uint64_t)q;
    p = app_u64(p, v / 1000000000u);
    *p++ = '.';
    uint64_t frac = v % 1000000000u;
    for (int i = 8; i >= 0; i--) {
        p[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    return p + 9;
}

int report_csv_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    ReqCsv *c = ctx;
    FILE *f = c->af.f;
    /* the row's text is what the fprintf("%s,%llu,...,%.9f") of earlier versions printed, every
     * field formatted here (printf only for values out of the exact paths' ranges) */
    char buf[2048], *p = buf; /* the longest row fits: two %.9f doubles of at most 320 characters each */
    fputs(c->policy, f);
    *p++ = ',';
    p = app_u64(p, r->id);
    *p++ = ',';
    p = app_u64(p, r->session);
    *p++ = ',';
    fwrite(buf, 1, (size_t)(p - buf), f);
    csv_field(f, r->session_id ? r->session_id : "");
    p = buf;
    *p++ = ',';
    p = app_i64(p, r->turn);
    *p++ = ',';
    p = app_i64(p, r->replica);
    *p++ = ',';
    p = report_app_seconds9(p, r->arrival_ns);
    const int64_t tok[3] = {r->history_tokens, r->new_tokens, r->output_tokens};
    for (int i = 0; i < 3; i++) {
        *p++ = ',';
        p = app_i64(p, tok[i]);
    }
    *p++ = ',';
    size_t from_len = strlen(r->restore_from);
    if (from_len > 256) { /* the names are short; a long one goes out on its own */
        fwrite(buf, 1, (size_t)(p - buf), f);
        fputs(r->restore_from, f);
        p = buf;
    } else {
        memcpy(p, r->restore_from, from_len);
        p += from_len;
    }
    *p++ = ',';
    p = app_i64(p, r->recomputed_tokens);
    *p++ = ',';
    p = app_i64(p, r->loaded_tokens);
    const int64_t ns4[4] = {r->queue_ns, r->restore_ns, r->prefill_ns, r->ttft_ns};
    for (int i = 0; i < 4; i++) {
        *p++ = ',';
        p = report_app_seconds9(p, ns4[i]);
    }
    *p++ = ',';
    p = report_app_fixed9(p, r->tbt_mean_ns / 1e9);
    *p++ = ',';
    p = report_app_seconds9(p, r->tbt_max_ns);
    *p++ = ',';
    p = report_app_seconds9(p, r->done_ns);
    *p++ = ',';
    p = report_app_fixed9(p, r->lb_restore_ns / 1e9);
    *p++ = '\n';
    if (fwrite(buf, 1, (size_t)(p - buf), f) != (size_t)(p - buf) || ferror(f)) return kv_err(e, "%s: write failed", c->af.path);
    c->rows++;
    return 0;
}

int report_csv_commit(ReqCsv *c, KvErr *e) { return kv_atomic_commit(&c->af, e); }
void report_csv_abort(ReqCsv *c) { kv_atomic_abort(&c->af); }

static cJSON *dist_s(const Hist *h)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "mean", hist_mean(h) / 1e9);
    cJSON_AddNumberToObject(o, "p50", hist_percentile(h, 0.50) / 1e9);
    cJSON_AddNumberToObject(o, "p90", hist_percentile(h, 0.90) / 1e9);
    cJSON_AddNumberToObject(o, "p99", hist_percentile(h, 0.99) / 1e9);
    cJSON_AddNumberToObject(o, "max", (double)h->max / 1e9);
    cJSON_AddNumberToObject(o, "n", (double)h->n);
    return o;
}

/* inputs.config: the resolved settings under their --set names (sim_config_json), so that the
 * object fed back as --config re-runs the experiment; plus the policies run. save_mode "policy"
 * becomes the mode used when every policy run used the same one (each policy's own mode is in its
 * "knobs"). */
static cJSON *config_json(const SimConfig *c, const SimResult *res, int n)
{
    cJSON *o = sim_config_json(c);
    if (!o) return NULL;
    char list[512] = "";
    size_t len = 0;
    int same = 1;
    SaveMode mode = SAVE_TURN_END;
    for (int i = 0; i < n; i++) {
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? "," : "", res[i].policy);
        const KvPolicyOps *ops = policy_find(res[i].policy, NULL);
        SaveMode m = sim_config_save_mode(c, ops);
        if (i > 0 && m != mode) same = 0;
        mode = m;
    }
    if (n > 0 && same) cJSON_ReplaceItemInObject(o, "save_mode", cJSON_CreateString(sim_save_mode_name(mode)));
    cJSON_AddStringToObject(o, "policies", list);
    return o;
}

/* The settings a policy ran with: its save mode and its knobs (by knob name). */
static cJSON *knobs_json(const SimConfig *c, const char *policy)
{
    cJSON *o = cJSON_CreateObject();
    const KvPolicyOps *ops = policy_find(policy, NULL);
    if (!ops) return o;
    cJSON_AddStringToObject(o, "save_mode", sim_save_mode_name(sim_config_save_mode(c, ops)));
    const double *v = sim_config_knobs(c, ops);
    for (int j = 0; v && j < ops->n_knobs; j++) {
        if (ops->knobs[j].type == KNOB_BOOL) cJSON_AddBoolToObject(o, ops->knobs[j].name, v[j] != 0);
        else cJSON_AddNumberToObject(o, ops->knobs[j].name, v[j]);
    }
    return o;
}

static const char *g_class_names[SIM_CLASSES] = {"short", "medium", "long"};

static cJSON *policy_json(const SimConfig *cfg, const SimResult *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->policy);
    cJSON_AddItemToObject(o, "knobs", knobs_json(cfg, r->policy));
    cJSON_AddNumberToObject(o, "requests", (double)r->requests);
    cJSON_AddNumberToObject(o, "sessions", (double)r->sessions);
    cJSON_AddNumberToObject(o, "dropped", (double)r->dropped);
    cJSON_AddNumberToObject(o, "truncated", (double)r->truncated);
    cJSON_AddItemToObject(o, "ttft_s", dist_s(&r->ttft));
    cJSON_AddItemToObject(o, "tbt_s", dist_s(&r->tbt));
    cJSON_AddItemToObject(o, "restore_s", dist_s(&r->restore));
    cJSON *split = cJSON_AddObjectToObject(o, "ttft_split_mean_s");
    cJSON_AddNumberToObject(split, "queue", hist_mean(&r->queue) / 1e9);
    cJSON_AddNumberToObject(split, "restore", hist_mean(&r->restore) / 1e9);
    cJSON_AddNumberToObject(split, "prefill", hist_mean(&r->prefill) / 1e9);
    cJSON_AddItemToObject(o, "queue_s", dist_s(&r->queue));
    cJSON_AddItemToObject(o, "prefill_s", dist_s(&r->prefill));
    cJSON_AddNumberToObject(o, "saved_bytes_per_token", r->saved_bytes_per_token);
    cJSON_AddNumberToObject(o, "restored_tokens", (double)r->restored_tokens);
    cJSON_AddNumberToObject(o, "restore_throughput_tokens_per_s",
                            r->restore_busy_ns > 0 ? (double)r->restored_tokens / (r->restore_busy_ns / 1e9) : 0);
    cJSON_AddNumberToObject(o, "slo_attainment", r->requests ? (double)r->slo_met / (double)r->requests : 0);
    cJSON *lb = cJSON_AddObjectToObject(o, "restore_over_lower_bound");
    cJSON_AddNumberToObject(lb, "mean", hist_mean(&r->lb_ratio) / 1000);
    cJSON_AddNumberToObject(lb, "p50", hist_percentile(&r->lb_ratio, 0.5) / 1000);
    cJSON_AddNumberToObject(lb, "p90", hist_percentile(&r->lb_ratio, 0.9) / 1000);
    cJSON_AddNumberToObject(lb, "n", (double)r->lb_ratio.n);
    cJSON *hits = cJSON_AddObjectToObject(o, "restore_from");
    cJSON_AddNumberToObject(hits, "resident", (double)r->hits_resident);
    cJSON_AddNumberToObject(hits, "dram", (double)r->hits_dram);
    cJSON_AddNumberToObject(hits, "ssd", (double)r->hits_ssd);
    cJSON_AddNumberToObject(hits, "remote", (double)r->hits_remote);
    cJSON_AddNumberToObject(hits, "recompute", (double)r->misses);
    cJSON_AddNumberToObject(hits, "no_history", (double)r->no_history);
    /* hit rates: the share of requests restored from each place (no_history excluded) */
    double with_hist = (double)(r->requests - r->no_history);
    cJSON *rate = cJSON_AddObjectToObject(o, "restore_from_share");
    cJSON_AddNumberToObject(rate, "resident", with_hist > 0 ? (double)r->hits_resident / with_hist : 0);
    cJSON_AddNumberToObject(rate, "dram", with_hist > 0 ? (double)r->hits_dram / with_hist : 0);
    cJSON_AddNumberToObject(rate, "ssd", with_hist > 0 ? (double)r->hits_ssd / with_hist : 0);
    cJSON_AddNumberToObject(rate, "remote", with_hist > 0 ? (double)r->hits_remote / with_hist : 0);
    cJSON_AddNumberToObject(rate, "recompute", with_hist > 0 ? (double)r->misses / with_hist : 0);
    cJSON *b = cJSON_AddObjectToObject(o, "bytes");
    cJSON_AddNumberToObject(b, "h2d", r->bytes_h2d);
    cJSON_AddNumberToObject(b, "d2h", r->bytes_d2h);
    cJSON_AddNumberToObject(b, "ssd_read", r->bytes_ssd_read);
    cJSON_AddNumberToObject(b, "ssd_write", r->bytes_ssd_write);
    cJSON_AddNumberToObject(b, "net_in", r->bytes_net_in);
    cJSON_AddNumberToObject(b, "net_out", r->bytes_net_out);
    cJSON *pk = cJSON_AddObjectToObject(o, "peak_occupancy");
    cJSON_AddNumberToObject(pk, "hbm_kv_tokens", (double)r->hbm_peak_tokens);
    cJSON_AddNumberToObject(pk, "hbm_pool_tokens", (double)r->pool_tokens);
    cJSON_AddNumberToObject(pk, "dram_bytes", (double)r->dram_peak_bytes);
    cJSON_AddNumberToObject(pk, "ssd_bytes", (double)r->ssd_peak_bytes);
    cJSON_AddNumberToObject(pk, "remote_bytes", (double)r->remote_peak_bytes);
    cJSON *u = cJSON_AddObjectToObject(o, "utilisation");
    cJSON *ug = cJSON_AddArrayToObject(u, "gpu_stage");
    cJSON *uh = cJSON_AddArrayToObject(u, "h2d_stage");
    cJSON *ud = cJSON_AddArrayToObject(u, "d2h_stage");
    for (int s = 0; s < SIM_MAX_STAGES && (s == 0 || r->util_gpu[s] > 0 || r->util_h2d[s] > 0); s++) {
        cJSON_AddItemToArray(ug, cJSON_CreateNumber(r->util_gpu[s]));
        cJSON_AddItemToArray(uh, cJSON_CreateNumber(r->util_h2d[s]));
        cJSON_AddItemToArray(ud, cJSON_CreateNumber(r->util_d2h[s]));
    }
    cJSON_AddNumberToObject(u, "ssd", r->util_ssd);
    cJSON_AddNumberToObject(u, "nic_in", r->util_nic_in);
    cJSON_AddNumberToObject(u, "nic_out", r->util_nic_out);
    cJSON *cls = cJSON_AddArrayToObject(o, "by_history_class");
    for (int c = 0; c < SIM_CLASSES; c++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "class", g_class_names[c]);
        cJSON_AddNumberToObject(x, "requests", (double)r->cls[c].n);
        cJSON_AddItemToObject(x, "ttft_s", dist_s(&r->cls[c].ttft));
        cJSON_AddItemToObject(x, "restore_s", dist_s(&r->cls[c].restore));
        cJSON_AddNumberToObject(x, "slo_attainment", r->cls[c].n ? (double)r->cls[c].slo_met / (double)r->cls[c].n : 0);
        cJSON_AddItemToArray(cls, x);
    }
    cJSON_AddNumberToObject(o, "sim_time_s", (double)r->sim_end_ns / 1e9);
    cJSON_AddNumberToObject(o, "iterations", (double)r->iterations);
    cJSON_AddNumberToObject(o, "events", (double)r->events);
    cJSON *ex = cJSON_AddObjectToObject(o, "cost_extrapolations");
    cJSON_AddNumberToObject(ex, "total", (double)r->extrapolations);
    for (int op = 0; op < OP_COUNT; op++)
        if (r->extrapolations_op[op]) cJSON_AddNumberToObject(ex, cost_op_name((CostOp)op), (double)r->extrapolations_op[op]);
    if (r->policy_notes[0]) {
        cJSON *notes = cJSON_Parse(r->policy_notes);
        if (notes) cJSON_AddItemToObject(o, "policy_notes", notes);
        else cJSON_AddStringToObject(o, "policy_notes", r->policy_notes);
    }
    return o;
}

int report_summary_json(const char *path, const SimWorld *w, const char *trace_desc, const SimResult *res, int n,
                        KvErr *e)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *k = cJSON_AddObjectToObject(root, "kvsim");
    cJSON_AddStringToObject(k, "git_rev", kv_git_rev());
    cJSON_AddNumberToObject(k, "summary_version", 1);
    cJSON *in = cJSON_AddObjectToObject(root, "inputs");
    cJSON_AddItemToObject(in, "config", config_json(w->cfg, res, n));
    cJSON_AddStringToObject(in, "trace", trace_desc ? trace_desc : "");
    cJSON_AddStringToObject(in, "model_catalog", w->models.origin);
    cJSON_AddStringToObject(in, "hardware_catalog", w->hw.origin);
    cJSON_AddStringToObject(in, "cost_model", w->cost_source);
    cJSON *pl = cJSON_AddObjectToObject(in, "platform");
    cJSON_AddStringToObject(pl, "name", w->platform->name);
    cJSON_AddStringToObject(pl, "description", w->platform->description);
    cJSON_AddStringToObject(pl, "gpu", w->hw.gpus[w->platform->gpu].name);
    cJSON *md = cJSON_AddObjectToObject(in, "model");
    cJSON_AddStringToObject(md, "name", w->model->name);
    cJSON_AddNumberToObject(md, "kv_bytes_per_token", (double)model_kv_bytes_per_token(&w->ly));
    cJSON_AddNumberToObject(md, "hidden_bytes_per_token", (double)model_hidden_bytes_per_token(&w->ly));
    cJSON_AddNumberToObject(md, "weight_bytes_per_gpu", (double)model_weight_bytes_per_gpu(&w->ly));
    cJSON *arr = cJSON_AddArrayToObject(root, "policies");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, policy_json(w->cfg, &res[i]));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return kv_err(e, "%s: out of memory formatting JSON", path);
    size_t len = strlen(text);
    text[len] = '\n';
    int rc = kv_write_atomic(path, text, len + 1, e);
    cJSON_free(text);
    return rc;
}

static void ms(char *b, size_t n, double ns) { snprintf(b, n, "%.1f", ns / 1e6); }

/* Bytes for a person: 0 B, 512 B, 512 KiB, 1.5 MiB, 12.5 GiB (binary units, three significant digits). */
void report_human_bytes(char *b, size_t n, double bytes)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024 && u < (int)KV_ARRAY_LEN(unit) - 1) bytes /= 1024, u++;
    if (u == 0) {
        snprintf(b, n, "%.0f B", bytes);
        return;
    }
    snprintf(b, n, bytes >= 100 ? "%.0f %s" : bytes >= 10 ? "%.1f %s" : "%.2f %s", bytes, unit[u]);
    /* drop a zero fraction: "248.0 KiB" → "248 KiB", "1.50 MiB" → "1.5 MiB" */
    char *sp = strchr(b, ' '), *dot = strchr(b, '.');
    if (sp && dot && dot < sp) {
        char *end = sp;
        while (end > dot + 1 && end[-1] == '0') end--;
        if (end == dot + 1) end = dot;
        memmove(end, sp, strlen(sp) + 1);
    }
}

void report_markdown(FILE *out, const SimWorld *w, const SimResult *res, int n)
{
    fprintf(out, "\n%s on %s (%s, tp %d, pp %d), trace %s, %s\n\n", w->model->name, w->platform->name,
            w->hw.gpus[w->platform->gpu].name, w->cfg->tp, w->cfg->pp, w->cfg->trace, w->cost_source);
    /* every header unique (a table reader keys columns by them); units in the header */
    fprintf(out, "| policy | requests | TTFT mean ms | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | restore mean ms | "
                 "restore p99 ms | TBT mean ms | TBT p99 ms | SLO %% | saved per token | restore/bound |\n");
    fprintf(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; i++) {
        const SimResult *r = &res[i];
        char a[8][32], saved[32], lb[32];
        ms(a[0], 32, hist_mean(&r->ttft));
        ms(a[1], 32, hist_percentile(&r->ttft, 0.5));
        ms(a[2], 32, hist_percentile(&r->ttft, 0.9));
        ms(a[3], 32, hist_percentile(&r->ttft, 0.99));
        ms(a[4], 32, hist_mean(&r->restore));
        ms(a[5], 32, hist_percentile(&r->restore, 0.99));
        ms(a[6], 32, hist_mean(&r->tbt));
        ms(a[7], 32, hist_percentile(&r->tbt, 0.99));
        report_human_bytes(saved, sizeof saved, r->saved_bytes_per_token);
        /* the ratio applies only to requests that restored something (none under ideal) */
        if (r->lb_ratio.n) snprintf(lb, sizeof lb, "%.2f", hist_mean(&r->lb_ratio) / 1000);
        else snprintf(lb, sizeof lb, "–");
        fprintf(out, "| %s | %llu | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s | %s |\n", r->policy,
                (unsigned long long)r->requests, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                r->requests ? 100.0 * (double)r->slo_met / (double)r->requests : 0, saved, lb);
    }
    uint64_t ex = 0;
    for (int i = 0; i < n; i++) ex += res[i].extrapolations;
    if (ex) fprintf(out, "\nwarning: %llu cost lookups fell outside the sampled range and were extrapolated\n", (unsigned long long)ex);
}
