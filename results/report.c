/* report.c — summary.json and the Markdown table; see report.h. The table's columns are the metric
 * table's (results/metric.c); requests.csv is report_csv.c's (its column table k_req_cols).
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
 *  - under the table: per policy the requests truncated and dropped, sessions whose saved state was
 *    lost, restorations that waited for a save or fell back to recompute, preemptions; a warning naming the
 *    setting behind it when more than 5 % of the requests were truncated, dropped or fell back.
 *  - load (per policy, docs/load-modes.md): over the kept requests (after warmup/cooldown trimming), the
 *    window from the first arrival to the last completion; request throughput = kept / window, token
 *    throughputs = tokens / window (input = history + new: the whole prompt, as vLLM's benchmark
 *    counts it), goodput = kept requests within the SLO / window (vLLM's "request goodput");
 *    offered = (kept − 1) / arrival span; the steady-state test and the overloaded flag (metrics.c).
 */
#include "results/report.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "results/digest.h"
#include "sim/cost/store.h"
#include "results/metric.h"
#include "results/replications.h"

const char *kv_embedded(const char *name, size_t *len); /* the build's embedded files (build/gen/embedded.c) */


/* compare --percentiles: the ones summary.json's distributions carry beside p50, p90, p99 */
static double g_pct[8];
static int g_n_pct;

void report_set_percentiles(const double *pct, int n)
{
    g_n_pct = 0;
    for (int i = 0; i < n && g_n_pct < (int)KV_ARRAY_LEN(g_pct); i++)
        if (pct[i] != 50 && pct[i] != 90 && pct[i] != 99) g_pct[g_n_pct++] = pct[i];
}

/* busy shares into o: an array per stage for the GPUs and each per-stage channel ("gpu_stage",
 * "h2d_stage"), then one number per host channel ("ssd"); stages < 0: as many stages as the GPU or
 * a per-stage link was busy in (at least one). Returns the stages written. */
static int utilisation_add(cJSON *o, const double *gpu, const double (*ch)[SIM_MAX_STAGES], int stages)
{
    if (stages < 0) {
        stages = 1;
        for (int s = 1; s < SIM_MAX_STAGES; s++) {
            int busy = gpu[s] > 0;
            for (int k = 0; k < CH_COUNT; k++) busy |= sim_channel_rows[k].per_stage && ch[k][s] > 0;
            if (!busy) break;
            stages = s + 1;
        }
    }
    cJSON *arr[CH_COUNT + 1];
    arr[CH_COUNT] = cJSON_AddArrayToObject(o, "gpu_stage");
    for (int k = 0; k < CH_COUNT; k++) {
        char key[48];
        snprintf(key, sizeof key, "%s_stage", sim_channel_rows[k].name);
        arr[k] = sim_channel_rows[k].per_stage ? cJSON_AddArrayToObject(o, key) : NULL;
    }
    for (int s = 0; s < stages; s++) {
        cJSON_AddItemToArray(arr[CH_COUNT], cJSON_CreateNumber(gpu[s]));
        for (int k = 0; k < CH_COUNT; k++)
            if (arr[k]) cJSON_AddItemToArray(arr[k], cJSON_CreateNumber(ch[k][s]));
    }
    for (int k = 0; k < CH_COUNT; k++)
        if (!sim_channel_rows[k].per_stage) cJSON_AddNumberToObject(o, sim_channel_rows[k].name, ch[k][0]);
    return stages;
}

static SimOracle g_oracle;
static int g_have_oracle;

void report_set_oracle(const SimOracle *o)
{
    g_have_oracle = o && isfinite(o->ttft_mean_s) && isfinite(o->ttft_p99_s);
    if (g_have_oracle) g_oracle = *o;
}

static cJSON *oracle_json(const SimOracle *o)
{
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "ttft_mean_s", o->ttft_mean_s);
    cJSON_AddNumberToObject(x, "ttft_p99_s", o->ttft_p99_s);
    cJSON_AddNumberToObject(x, "requests", (double)o->requests);
    cJSON_AddNumberToObject(x, "dropped", (double)o->dropped);
    cJSON_AddNumberToObject(x, "keep_candidates", (double)o->candidates);
    cJSON_AddNumberToObject(x, "kept", (double)o->kept);
    cJSON *np = cJSON_AddObjectToObject(x, "without_prefetch");
    cJSON_AddNumberToObject(np, "ttft_mean_s", o->noprefetch_mean_s);
    cJSON_AddNumberToObject(np, "ttft_p99_s", o->noprefetch_p99_s);
    cJSON_AddStringToObject(x, "basis", o->basis);
    return x;
}

static cJSON *dist_s(const Hist *h)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "mean", hist_mean(h) / 1e9);
    cJSON_AddNumberToObject(o, "p50", hist_percentile(h, 0.50) / 1e9);
    cJSON_AddNumberToObject(o, "p90", hist_percentile(h, 0.90) / 1e9);
    cJSON_AddNumberToObject(o, "p99", hist_percentile(h, 0.99) / 1e9);
    for (int i = 0; i < g_n_pct; i++) { /* "p99_9" for 99.9: a dot would read as a path in metric names */
        char key[32], *d;
        snprintf(key, sizeof key, "p%g", g_pct[i]);
        if ((d = strchr(key, '.'))) *d = '_';
        cJSON_AddNumberToObject(o, key, hist_percentile(h, g_pct[i] / 100) / 1e9);
    }
    cJSON_AddNumberToObject(o, "max", hist_max(h) / 1e9);
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

/* x per second of the run; NAN (absent) when no request was measured */
double report_per_s(double x, const SimLoad *ld)
{
    double w = (double)(ld->last_done_ns - ld->first_arrival_ns) / 1e9;
    return w > 0 && ld->kept ? x / w : NAN;
}

/* a policy's "load": throughput and goodput as vLLM's benchmark prints them, the session wait,
 * trimming, the steady-state test and the overloaded flag with its evidence */
static cJSON *load_json(const SimResult *r)
{
    const SimLoad *ld = &r->load;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "overloaded", ld->overloaded);
    cJSON_AddBoolToObject(o, "steady_state", ld->steady);
    cJSON_AddNumberToObject(o, "requests", (double)ld->kept);
    cJSON_AddNumberToObject(o, "duration_s", (double)(ld->last_done_ns - ld->first_arrival_ns) / 1e9);
    cJSON_AddNumberToObject(o, "first_arrival_s", (double)ld->first_arrival_ns / 1e9);
    cJSON_AddNumberToObject(o, "last_arrival_s", (double)ld->last_arrival_ns / 1e9);
    cJSON_AddNumberToObject(o, "last_done_s", (double)ld->last_done_ns / 1e9);
    cJSON_AddNumberToObject(o, "request_throughput_per_s", ld->throughput_per_s);
    cJSON_AddNumberToObject(o, "input_tokens", ld->input_tokens);
    cJSON_AddNumberToObject(o, "new_input_tokens", ld->new_input_tokens);
    cJSON_AddNumberToObject(o, "output_tokens", ld->output_tokens);
    cJSON_AddNumberToObject(o, "input_tokens_per_s", report_per_s(ld->input_tokens, ld));
    cJSON_AddNumberToObject(o, "new_input_tokens_per_s", report_per_s(ld->new_input_tokens, ld));
    cJSON_AddNumberToObject(o, "output_tokens_per_s", report_per_s(ld->output_tokens, ld));
    cJSON_AddNumberToObject(o, "total_tokens_per_s", report_per_s(ld->input_tokens + ld->output_tokens, ld));
    cJSON_AddNumberToObject(o, "goodput_requests", (double)ld->good);
    cJSON_AddNumberToObject(o, "request_goodput_per_s", report_per_s((double)ld->good, ld));
    cJSON *w = cJSON_AddObjectToObject(o, "session_wait");
    cJSON_AddNumberToObject(w, "requests", (double)ld->waited);
    cJSON_AddNumberToObject(w, "mean_s", ld->kept ? ld->wait_sum_ns / (double)ld->kept / 1e9 : NAN);
    cJSON_AddNumberToObject(w, "max_s", (double)ld->wait_max_ns / 1e9);
    cJSON *t = cJSON_AddObjectToObject(o, "trimmed");
    cJSON_AddNumberToObject(t, "warmup", (double)ld->trimmed_warmup);
    cJSON_AddNumberToObject(t, "cooldown", (double)ld->trimmed_cooldown);
    cJSON *ev = cJSON_AddObjectToObject(o, "evidence");
    cJSON_AddNumberToObject(ev, "window_start_s", (double)ld->window_start_ns / 1e9);
    cJSON_AddNumberToObject(ev, "window_end_s", (double)ld->window_end_ns / 1e9);
    cJSON_AddNumberToObject(ev, "window_requests", (double)ld->window_requests);
    cJSON_AddNumberToObject(ev, "offered_requests_per_s", ld->offered_per_s);
    cJSON_AddNumberToObject(ev, "served_requests_per_s", ld->served_per_s);
    cJSON_AddNumberToObject(ev, "served_over_offered", ld->offered_per_s > 0 ? ld->served_per_s / ld->offered_per_s : 0);
    cJSON_AddNumberToObject(ev, "delay_first_half_mean_s", ld->delay_first_half_s);
    cJSON_AddNumberToObject(ev, "delay_last_half_mean_s", ld->delay_last_half_s);
    cJSON_AddNumberToObject(ev, "last_half_requests", (double)ld->half_n);
    cJSON_AddNumberToObject(ev, "last_half_batches", ld->batches);
    cJSON_AddNumberToObject(ev, "delay_slope_s_per_s", ld->slope);
    cJSON_AddNumberToObject(ev, "delay_slope_t", ld->slope_t);
    cJSON_AddNumberToObject(ev, "t_critical_99_5", ld->t_crit);
    cJSON_AddNumberToObject(ev, "delay_growth_last_half_s", ld->growth_s);
    cJSON_AddNumberToObject(ev, "growth_threshold_s", ld->threshold_s);
    cJSON_AddNumberToObject(ev, "overload_growth_s", ld->overload_growth_s);
    cJSON_AddNumberToObject(ev, "requests_after_window", (double)ld->after_n);
    cJSON_AddNumberToObject(ev, "delay_after_window_mean_s", ld->delay_after_s);
    cJSON_AddNumberToObject(ev, "backlog_after_window_s", ld->backlog_s);
    return o;
}

/* A metric of the metric table (METRIC_SUMMARY) that the blocks above do not write goes in at its
 * path, objects created as needed, so that a new metric is one row of that table. A path through
 * an array (by_history_class.long..., utilisation.gpu_stage0: element 0 of gpu_stage) is one of
 * the blocks' own and is left to them. */
static void fill_metrics(cJSON *o, const SimResult *r)
{
    for (int i = 0; metric_at(i); i++) {
        const Metric *m = metric_at(i);
        if (!(m->outputs & METRIC_SUMMARY)) continue;
        char path[128], *seg = path, *dot;
        snprintf(path, sizeof path, "%s", m->name);
        cJSON *at = o;
        while (at && (dot = strchr(seg, '.'))) {
            *dot = '\0';
            cJSON *x = cJSON_GetObjectItemCaseSensitive(at, seg);
            if (!x) x = cJSON_AddObjectToObject(at, seg);
            at = cJSON_IsObject(x) ? x : NULL;
            seg = dot + 1;
        }
        if (!at || cJSON_GetObjectItemCaseSensitive(at, seg)) continue;
        size_t l = strlen(seg);
        while (l > 0 && seg[l - 1] >= '0' && seg[l - 1] <= '9') l--;
        char base[128];
        snprintf(base, sizeof base, "%.*s", (int)l, seg);
        if (l < strlen(seg) && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(at, base))) continue;
        cJSON_AddNumberToObject(at, seg, metric_value(m, r));
    }
}

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
    cJSON_AddItemToObject(o, "e2e_s", dist_s(&r->e2e));
    cJSON_AddItemToObject(o, "restore_s", dist_s(&r->restore));
    cJSON *split = cJSON_AddObjectToObject(o, "ttft_split_mean_s");
    cJSON_AddNumberToObject(split, "queue", hist_mean(&r->queue) / 1e9);
    cJSON_AddNumberToObject(split, "restore", hist_mean(&r->restore) / 1e9);
    cJSON_AddNumberToObject(split, "prefill", hist_mean(&r->prefill) / 1e9);
    cJSON_AddItemToObject(o, "queue_s", dist_s(&r->queue));
    cJSON_AddItemToObject(o, "prefill_s", dist_s(&r->prefill));
    cJSON_AddNumberToObject(o, "saved_bytes_per_token", r->saved_bytes_per_token);
    cJSON_AddNumberToObject(o, "restored_tokens", (double)r->restored_tokens);
    /* the computed ones by the metric table's definitions */
    cJSON_AddNumberToObject(o, "restore_throughput_tokens_per_s", metric_value(metric_find("restore_throughput_tokens_per_s"), r));
    cJSON_AddNumberToObject(o, "slo_attainment", metric_value(metric_find("slo_attainment"), r));
    cJSON *lb = cJSON_AddObjectToObject(o, "restore_over_lower_bound");
    cJSON_AddNumberToObject(lb, "mean", hist_mean(&r->lb_ratio) / 1000);
    cJSON_AddNumberToObject(lb, "p50", hist_percentile(&r->lb_ratio, 0.5) / 1000);
    cJSON_AddNumberToObject(lb, "p90", hist_percentile(&r->lb_ratio, 0.9) / 1000);
    cJSON_AddNumberToObject(lb, "n", (double)r->lb_ratio.n);
    cJSON *hits = cJSON_AddObjectToObject(o, "restore_from");
    cJSON_AddNumberToObject(hits, "resident", (double)r->hits_resident);
    for (int t = TIER_DRAM; t < SIM_TIERS; t++) cJSON_AddNumberToObject(hits, tier_name((Tier)t), (double)r->hits_tier[t]);
    cJSON_AddNumberToObject(hits, "mixed", (double)r->hits_mixed);
    cJSON_AddNumberToObject(hits, "recompute", (double)r->misses);
    cJSON_AddNumberToObject(hits, "no_history", (double)r->no_history);
    /* every request with a history found it in HBM (or none had one): the policy restored nothing */
    cJSON_AddBoolToObject(o, "nothing_restored", report_restored_nothing(r) != 0);
    /* hit rates: the share of requests restored from each place (no_history excluded) */
    double with_hist = (double)(r->requests - r->no_history);
    cJSON *rate = cJSON_AddObjectToObject(o, "restore_from_share");
    cJSON_AddNumberToObject(rate, "resident", metric_value(metric_find("restore_from_share.resident"), r));
    for (int t = TIER_DRAM; t < SIM_TIERS; t++) {
        char name[64];
        snprintf(name, sizeof name, "restore_from_share.%s", tier_name((Tier)t));
        cJSON_AddNumberToObject(rate, tier_name((Tier)t), metric_value(metric_find(name), r));
    }
    cJSON_AddNumberToObject(rate, "mixed", with_hist > 0 ? (double)r->hits_mixed / with_hist : NAN);
    cJSON_AddNumberToObject(rate, "recompute", metric_value(metric_find("restore_from_share.recompute"), r));
    /* saved state in flight and lost: restorations that waited for a save to cross D2H (and how
     * long, the longest wait of one of their loads), those of a saving policy that recomputed
     * everything (and why), sessions whose saved state was dropped */
    cJSON *sv = cJSON_AddObjectToObject(o, "saved_state");
    cJSON_AddNumberToObject(sv, "waited_for_save", (double)r->restore_waits);
    cJSON_AddNumberToObject(sv, "wait_total_s", r->restore_wait_ns / 1e9);
    cJSON_AddNumberToObject(sv, "wait_mean_s", r->restore_waits ? r->restore_wait_ns / 1e9 / (double)r->restore_waits : 0);
    cJSON_AddNumberToObject(sv, "fallback_recompute", (double)r->fallbacks);
    cJSON_AddNumberToObject(sv, "fallback_no_state", (double)r->fallback_uncovered);
    cJSON_AddNumberToObject(sv, "fallback_wait_slower", (double)r->fallback_slower);
    cJSON_AddNumberToObject(sv, "state_lost_ttl", (double)r->state_lost_ttl);
    cJSON_AddNumberToObject(sv, "state_lost_capacity", (double)r->state_lost_capacity);
    /* the HBM prefix cache: only when the trace named blocks and the cache was on (else absent) */
    if (r->prefix_block_tokens > 0) {
        cJSON_AddNumberToObject(hits, "prefix", (double)r->hits_prefix);
        cJSON_AddNumberToObject(rate, "prefix", with_hist > 0 ? (double)r->hits_prefix / with_hist : NAN);
        cJSON *pc = cJSON_AddObjectToObject(o, "prefix_cache");
        cJSON_AddNumberToObject(pc, "block_tokens", (double)r->prefix_block_tokens);
        cJSON_AddNumberToObject(pc, "requests_named", (double)r->prefix_named);
        cJSON_AddNumberToObject(pc, "requests_hit", (double)r->prefix_hit_requests);
        cJSON_AddNumberToObject(pc, "request_hit_share", r->prefix_named ? (double)r->prefix_hit_requests / (double)r->prefix_named : NAN);
        cJSON_AddNumberToObject(pc, "hit_tokens", (double)r->prefix_hit_tokens);
        cJSON_AddNumberToObject(pc, "restored_from_another_session", (double)r->prefix_borrowed);
        cJSON_AddNumberToObject(pc, "blocks_looked_up", (double)r->prefix_lookups);
        cJSON_AddNumberToObject(pc, "blocks_hit", (double)r->prefix_hits);
        cJSON_AddNumberToObject(pc, "block_hit_share", r->prefix_lookups ? (double)r->prefix_hits / (double)r->prefix_lookups : NAN);
        cJSON_AddNumberToObject(pc, "blocks_inserted", (double)r->prefix_inserted);
        cJSON_AddNumberToObject(pc, "blocks_deduplicated", (double)r->prefix_deduplicated);
        cJSON_AddNumberToObject(pc, "blocks_evicted", (double)r->prefix_evicted);
        /* the tiers' block stores, for a policy that saved named blocks or looked for them below HBM */
        uint64_t any = r->prefix_tier_asked;
        for (int t = TIER_DRAM; t < SIM_TIERS; t++) any += r->prefix_tier_stored[t] + r->prefix_tier_dedup[t];
        if (any) {
            cJSON *tt = cJSON_AddObjectToObject(pc, "tiers");
            cJSON_AddNumberToObject(tt, "history_blocks_looked_up", (double)r->prefix_tier_asked);
            for (int t = TIER_DRAM; t < SIM_TIERS; t++) {
                if (!r->prefix_tier_stored[t] && !r->prefix_tier_dedup[t] && !r->prefix_tier_found[t]) continue;
                cJSON *x = cJSON_AddObjectToObject(tt, tier_name((Tier)t));
                cJSON_AddNumberToObject(x, "blocks_stored", (double)r->prefix_tier_stored[t]);
                cJSON_AddNumberToObject(x, "blocks_deduplicated", (double)r->prefix_tier_dedup[t]);
                cJSON_AddNumberToObject(x, "bytes_not_written", r->prefix_tier_unwritten[t]);
                cJSON_AddNumberToObject(x, "blocks_dropped", (double)r->prefix_tier_dropped[t]);
                cJSON_AddNumberToObject(x, "blocks_moved", (double)r->prefix_tier_moved[t]);
                cJSON_AddNumberToObject(x, "history_blocks_found", (double)r->prefix_tier_found[t]);
                cJSON_AddNumberToObject(x, "history_block_hit_share",
                                        r->prefix_tier_asked ? (double)r->prefix_tier_found[t] / (double)r->prefix_tier_asked : NAN);
            }
        }
        if (cfg->replicas > 1) { /* per replica: the share of the blocks looked up that were cached */
            cJSON *pr = cJSON_AddArrayToObject(pc, "replica_block_hit_share");
            for (int i = 0; i < cfg->replicas && i < 64; i++)
                cJSON_AddItemToArray(pr, cJSON_CreateNumber(r->prefix_rep_lookups[i] ? (double)r->prefix_rep_hits[i] /
                                                                                     (double)r->prefix_rep_lookups[i] : NAN));
        }
    }
    /* KV blocks (alloc=ondemand): decode steps that found no free block preempted a request */
    cJSON *pe = cJSON_AddObjectToObject(o, "preemption");
    cJSON_AddNumberToObject(pe, "preemptions", (double)r->preemptions);
    cJSON_AddNumberToObject(pe, "requests_preempted", (double)r->preempted_requests);
    cJSON_AddNumberToObject(pe, "recomputed_tokens", (double)r->preempt_recomputed_tokens);
    cJSON_AddNumberToObject(pe, "swap_out_bytes", r->swap_out_bytes);
    cJSON_AddNumberToObject(pe, "swap_in_bytes", r->swap_in_bytes);
    cJSON *b = cJSON_AddObjectToObject(o, "bytes");
    for (int k = 0; k < CH_COUNT; k++) {
        cJSON_AddNumberToObject(b, sim_channel_rows[k].bytes_key, r->ch_bytes[k][CH_READ]);
        if (sim_channel_rows[k].write_key) cJSON_AddNumberToObject(b, sim_channel_rows[k].write_key, r->ch_bytes[k][CH_WRITE]);
    }
    cJSON *pk = cJSON_AddObjectToObject(o, "peak_occupancy");
    cJSON_AddNumberToObject(pk, "hbm_kv_tokens", (double)r->hbm_peak_tokens);
    cJSON_AddNumberToObject(pk, "hbm_pool_tokens", (double)r->pool_tokens);
    for (int t = TIER_DRAM; t < SIM_TIERS; t++) {
        char key[48];
        snprintf(key, sizeof key, "%s_bytes", tier_name((Tier)t));
        cJSON_AddNumberToObject(pk, key, (double)r->tier_peak_bytes[t]);
    }
    cJSON *u = cJSON_AddObjectToObject(o, "utilisation");
    int stages = utilisation_add(u, r->util_gpu, r->util_ch, -1);
    /* the same shares inside restoration windows (>= 1 restoration in progress) */
    cJSON *rw = cJSON_AddObjectToObject(o, "restore_window");
    cJSON_AddNumberToObject(rw, "time_s", r->win_ns / 1e9);
    cJSON_AddNumberToObject(rw, "share_of_time", r->sim_end_ns > 0 ? r->win_ns / (double)r->sim_end_ns : 0);
    utilisation_add(cJSON_AddObjectToObject(rw, "utilisation"), r->win_util_gpu, r->win_util_ch, stages);
    cJSON *cls = cJSON_AddArrayToObject(o, "by_history_class");
    for (int c = 0; c < SIM_CLASSES; c++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "class", g_class_names[c]);
        cJSON_AddNumberToObject(x, "requests", (double)r->cls[c].n);
        cJSON_AddItemToObject(x, "ttft_s", dist_s(&r->cls[c].ttft));
        cJSON_AddItemToObject(x, "restore_s", dist_s(&r->cls[c].restore));
        cJSON_AddNumberToObject(x, "slo_attainment", r->cls[c].n ? (double)r->cls[c].slo_met / (double)r->cls[c].n : NAN);
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
    cJSON_AddItemToObject(o, "load", load_json(r));
    fill_metrics(o, r);
    return o;
}

/* inputs.load: the resolved load mode and the settings that make it */
static cJSON *load_inputs_json(const SimConfig *c)
{
    cJSON *o = cJSON_CreateObject();
    SimLoadMode m = sim_load_mode(c);
    char b[64];
    cJSON_AddStringToObject(o, "mode", sim_load_mode_name(m));
    cJSON_AddStringToObject(o, "loop", m == SIM_LOAD_TRACE ? "open" : "closed");
    if (m == SIM_LOAD_CONCURRENCY) cJSON_AddNumberToObject(o, "clients", c->concurrency);
    if (c->request_rate > 0) {
        cJSON_AddNumberToObject(o, "request_rate_per_s", c->request_rate);
        cJSON_AddNumberToObject(o, "burstiness", c->burstiness);
    }
    const char *what = m == SIM_LOAD_CONCURRENCY
                           ? "each client sends a session's turns one after another (think time after the previous turn ended), then takes the next session; trace timestamps unused"
                       : c->request_rate > 0
                           ? "every request arrives by a gamma process of request_rate (open loop, the same times for every policy); a turn waits for its previous turn"
                       : m == SIM_LOAD_TRACE
                           ? "timestamps or Poisson session starts; a later turn without a timestamp arrives its think time after the previous turn's arrival (the same times for every policy) and waits for that turn to end"
                           : "timestamps or Poisson session starts; a later turn without a timestamp is sent its think time after the previous turn ended (each session a closed loop)";
    cJSON_AddStringToObject(o, "description", what);
    const SimTrim *tr[2] = {&c->warmup, &c->cooldown};
    const char *names[2] = {"warmup", "cooldown"};
    for (int i = 0; i < 2; i++) {
        if (tr[i]->by_time) snprintf(b, sizeof b, "%.9g s", (double)tr[i]->n / 1e9);
        else snprintf(b, sizeof b, "%lld requests", (long long)tr[i]->n);
        cJSON_AddStringToObject(o, names[i], tr[i]->n ? b : "none");
    }
    return o;
}

/* A catalog's bytes hashed: the file it was read from, or the embedded copy ("NAME (embedded)");
 * a catalog with overlays ("BASE + OVERLAY", as hw.c and model.c name it): the SHA-256 of the parts'
 * hex digests joined by '+' (each part hashed as above). */
static int catalog_hash(const char *name, const char *origin, char hex[DIGEST_HEX_LEN], KvErr *e)
{
    const char *plus = strstr(origin, " + ");
    if (plus) {
        char base[4096], parts[2 * DIGEST_HEX_LEN + 2], rest[DIGEST_HEX_LEN];
        snprintf(base, sizeof base, "%.*s", (int)(plus - origin), origin);
        if (catalog_hash(name, base, hex, e) != 0 || catalog_hash(name, plus + 3, rest, e) != 0) return -1;
        snprintf(parts, sizeof parts, "%s+%s", hex, rest);
        return digest_sha256_hex(parts, strlen(parts), hex, e);
    }
    size_t ol = strlen(origin), sl = strlen(" (embedded)");
    if (ol > sl && !strcmp(origin + ol - sl, " (embedded)")) {
        const char *sum = kv_embedded_sha256(name); /* (hashed when the binary was built) */
        if (!sum) return kv_err(e, "%s: no embedded copy to hash", name);
        snprintf(hex, DIGEST_HEX_LEN, "%s", sum);
        return 0;
    }
    return digest_sha256_file_hex(origin, hex, e);
}

static int is_regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

cJSON *report_input_hashes(const SimWorld *w, KvErr *e)
{
    cJSON *o = cJSON_CreateObject();
    char hex[DIGEST_HEX_LEN];
    const SimConfig *c = w->cfg;
    /* a trace that is a file is hashed; a generator's name is not a file (null) */
    if (is_regular_file(c->trace)) {
        if (digest_sha256_file_hex(c->trace, hex, e) != 0) goto fail;
        cJSON_AddStringToObject(o, "trace", hex);
    } else {
        cJSON_AddNullToObject(o, "trace");
    }
    if (catalog_hash("configs/models.json", w->models.origin, hex, e) != 0) goto fail;
    cJSON_AddStringToObject(o, "model_catalog", hex);
    if (catalog_hash("configs/hardware.json", w->hw.origin, hex, e) != 0) goto fail;
    cJSON_AddStringToObject(o, "hardware_catalog", hex);
    char dump[512];
    size_t dump_len = 0;
    const char *dump_text = store_committed_dump(c->costs, dump, sizeof dump, &dump_len);
    if (dump_text) { /* a committed store: the dump it was loaded from */
        if (digest_sha256_hex(dump_text, dump_len, hex, e) != 0) goto fail;
        cJSON_AddStringToObject(o, "cost_store", hex);
    } else if (strcmp(c->costs, "spec") != 0) {
        if (digest_sha256_file_hex(c->costs, hex, e) != 0) goto fail;
        cJSON_AddStringToObject(o, "cost_store", hex);
    } else {
        cJSON_AddNullToObject(o, "cost_store");
    }
    return o;
fail:
    cJSON_Delete(o);
    return NULL;
}

int report_summary_json(const char *path, const SimWorld *w, const char *trace_desc, const SimResult *res, int n,
                        KvErr *e)
{
    return report_summary_json_repl(path, w, trace_desc, res, n, NULL, e);
}

int report_policy_json_spill(FILE *f, const SimConfig *cfg, const SimResult *r, KvErr *e)
{
    cJSON *o = policy_json(cfg, r);
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) return kv_err(e, "%s: out of memory formatting JSON", r->policy);
    uint64_t len = strlen(text);
    int ok = fwrite(&len, sizeof len, 1, f) == 1 && fwrite(text, 1, (size_t)len, f) == (size_t)len;
    cJSON_free(text);
    return ok ? 0 : kv_err(e, "%s: writing a run's summary aside failed: %s", r->policy, strerror(errno));
}

/* "replications.per_seed" in the printed tree: a raw value standing for the array copied from the
 * spilled runs (a control byte: inside any JSON string cJSON escapes it) */
static const char k_per_seed_mark[] = "\x01";

/* n bytes of s, each line break followed by depth tabs: text cJSON printed for a value alone, as it
 * prints it nested depth levels deep */
static void put_indented(FILE *out, const char *s, size_t n, int depth)
{
    static const char tabs[] = "\t\t\t\t\t\t\t\t";
    const char *end = s + n;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t k = nl ? (size_t)(nl - s) + 1 : (size_t)(end - s);
        fwrite(s, 1, k, out);
        if (nl) fwrite(tabs, 1, (size_t)depth, out);
        s += k;
    }
}

/* The per_seed array, as cJSON prints it in the tree: [{"seed": S, "policies": [{...}, ...]}, ...], its
 * objects at depth 3 (root, replications, per_seed), each policy at depth 5; one seed in memory at a time */
static int per_seed_copy(FILE *out, const Replications *rep, KvErr *e)
{
    FILE *in = fopen(rep->per_seed_json, "rb");
    if (!in) return kv_err(e, "%s: cannot read the runs' summaries: %s", rep->per_seed_json, strerror(errno));
    int rc = 0;
    fputc('[', out);
    for (int s = 0; rc == 0 && s < rep->n_seeds; s++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "seed", (double)rep->seeds[s]);
        cJSON_AddItemToObject(x, "policies", cJSON_CreateRaw("\x02"));
        char *t = cJSON_Print(x);
        cJSON_Delete(x);
        char *mk = t ? strchr(t, '\x02') : NULL;
        if (!mk) {
            cJSON_free(t);
            rc = kv_err(e, "out of memory formatting JSON");
            break;
        }
        if (s) fputs(", ", out);
        put_indented(out, t, (size_t)(mk - t), 3);
        fputc('[', out);
        for (int p = 0; rc == 0 && p < rep->n_policies; p++) {
            uint64_t len;
            char *text = NULL;
            if (fread(&len, sizeof len, 1, in) != 1 || len > ((uint64_t)1 << 30) || !(text = malloc((size_t)len)) ||
                fread(text, 1, (size_t)len, in) != (size_t)len) {
                rc = kv_err(e, "%s: seed %llu, policy %d: the run's summary is missing or cut short", rep->per_seed_json,
                            (unsigned long long)rep->seeds[s], p);
            } else {
                if (p) fputs(", ", out);
                put_indented(out, text, (size_t)len, 5);
            }
            free(text);
        }
        fputc(']', out);
        put_indented(out, mk + 1, strlen(mk + 1), 3);
        cJSON_free(t);
    }
    fputc(']', out);
    fclose(in);
    return rc;
}

int report_summary_json_repl(const char *path, const SimWorld *w, const char *trace_desc, const SimResult *res, int n,
                             const Replications *rep, KvErr *e)
{
    int spliced = rep && rep->runs && rep->per_seed_json;
    cJSON *root = cJSON_CreateObject();
    cJSON *k = cJSON_AddObjectToObject(root, "kvsim");
    cJSON_AddStringToObject(k, "git_rev", kv_git_rev());
    cJSON_AddNumberToObject(k, "summary_version", 1);
    cJSON *in = cJSON_AddObjectToObject(root, "inputs");
    cJSON_AddItemToObject(in, "config", config_json(w->cfg, res, n));
    cJSON_AddStringToObject(in, "trace", trace_desc ? trace_desc : "");
    cJSON_AddItemToObject(in, "load", load_inputs_json(w->cfg));
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
    cJSON *hashes = report_input_hashes(w, e);
    if (!hashes) {
        cJSON_Delete(root);
        return kv_err_prefix(e, "%s: inputs.sha256: ", path);
    }
    cJSON_AddItemToObject(in, "sha256", hashes);
    cJSON *arr = cJSON_AddArrayToObject(root, "policies");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, policy_json(w->cfg, &res[i]));
    if (g_have_oracle) cJSON_AddItemToObject(root, "oracle", oracle_json(&g_oracle));
    if (rep) {
        cJSON *rj = repl_json(rep, e);
        if (!rj) {
            cJSON_Delete(root);
            return kv_err_prefix(e, "%s: replications: ", path);
        }
        cJSON *ps = spliced ? NULL : cJSON_AddArrayToObject(rj, "per_seed");
        if (spliced) cJSON_AddItemToObject(rj, "per_seed", cJSON_CreateRaw(k_per_seed_mark));
        for (int s = 0; ps && s < rep->n_seeds; s++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "seed", (double)rep->seeds[s]);
            cJSON *pa = cJSON_AddArrayToObject(x, "policies");
            for (int p = 0; p < rep->n_policies; p++)
                cJSON_AddItemToArray(pa, policy_json(w->cfg, &rep->res[s * rep->n_policies + p]));
            cJSON_AddItemToArray(ps, x);
        }
        cJSON_AddItemToObject(root, "replications", rj);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return kv_err(e, "%s: out of memory formatting JSON", path);
    size_t len = strlen(text);
    text[len] = '\n';
    int rc;
    char *mark = spliced ? memchr(text, k_per_seed_mark[0], len) : NULL;
    if (!mark) {
        rc = kv_write_atomic(path, text, len + 1, e);
    } else { /* the tree before the mark, the spilled runs, the tree after it */
        KvAtomicFile af;
        rc = kv_atomic_open(&af, path, e);
        if (rc == 0) {
            fwrite(text, 1, (size_t)(mark - text), af.f);
            if (per_seed_copy(af.f, rep, e) != 0) {
                kv_atomic_abort(&af);
                rc = kv_err_prefix(e, "%s: ", path);
            } else {
                fwrite(mark + 1, 1, len - (size_t)(mark - text), af.f);
                rc = kv_atomic_commit(&af, e);
            }
        }
    }
    cJSON_free(text);
    return rc;
}

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
    int nh = metric_headline_count();
    fputs("| policy |", out);
    for (int h = 1; h <= nh; h++) {
        const Metric *m = metric_headline(h, METRIC_TABLE);
        if (m) fprintf(out, " %s |", m->header);
    }
    fputs("\n|---|", out);
    for (int h = 1; h <= nh; h++)
        if (metric_headline(h, METRIC_TABLE)) fputs("---:|", out);
    fputc('\n', out);
    for (int i = 0; i < n; i++) {
        fprintf(out, "| %s |", res[i].policy);
        for (int h = 1; h <= nh; h++) {
            const Metric *m = metric_headline(h, METRIC_TABLE);
            if (!m) continue;
            char cell[32];
            metric_cell(cell, sizeof cell, m, &res[i]);
            fprintf(out, " %s |", cell);
        }
        fputc('\n', out);
    }
    report_markdown_footer(out, w, res, n);
}

void report_markdown_footer(FILE *out, const SimWorld *w, const SimResult *res, int n)
{
    report_load_footer(out, w->cfg, res, n);
    uint64_t ex = 0;
    for (int i = 0; i < n; i++) ex += res[i].extrapolations;
    if (ex) fprintf(out, "\nwarning: %llu cost lookups fell outside the sampled range and were extrapolated\n", (unsigned long long)ex);
    report_footer(out, w, res, n);
}

int report_restored_nothing(const SimResult *r)
{
    uint64_t with_hist = r->requests - r->no_history;
    if (r->requests == 0) return 0;
    if (with_hist == 0) return 2;
    return r->hits_resident + r->hits_prefix == with_hist ? 1 : 0;
}

void report_restored_nothing_note(FILE *out, const SimResult *res, int n)
{
    int why = n > 0 ? report_restored_nothing(&res[0]) : 0;
    for (int i = 1; i < n && why; i++)
        if (report_restored_nothing(&res[i]) != why) why = 0;
    if (why == 2)
        fprintf(out, "note: nothing was restored: no request had a history (every request is its session's first turn), so "
                     "the policies' rows differ only in what they save\n");
    else if (why == 1 && n > 0 && res[0].hits_prefix > 0)
        fprintf(out, "note: nothing was restored: every request with a history found it in HBM, in the prefix cache of the "
                     "blocks the trace names (the KV pool never had to evict them), so the policies' rows differ only in what "
                     "they save; set prefix_cache=false, a smaller mem_util or more load to compare restorations\n");
    else if (why == 1)
        fprintf(out, "note: nothing was restored: every request found its history still in HBM (the KV pool never had to "
                     "evict it; evict_each_turn=false), so the policies' rows differ only in what they save; set "
                     "evict_each_turn=true, a smaller mem_util or more load to compare restorations\n");
}

/* the share of a run's requests (done or dropped) */
static double req_share(const SimResult *r, uint64_t k)
{
    uint64_t all = r->requests + r->dropped;
    return all ? (double)k / (double)all : 0;
}

/* The warning lines: more than REPORT_WARN_SHARE of the requests truncated (once: the trace's),
 * dropped, or restored by recomputing although the policy saves state — each naming the setting
 * behind it. Returns the number of lines written. */
int report_warnings(FILE *out, const SimWorld *w, const SimResult *res, int n)
{
    int lines = 0;
    const SimResult *tr = NULL;
    for (int i = 0; i < n; i++)
        if (!tr || res[i].truncated > tr->truncated) tr = &res[i];
    if (tr && req_share(tr, tr->truncated) > REPORT_WARN_SHARE) {
        fprintf(out, "warning: %.1f%% of the requests were truncated to max_context (%lld tokens): raise max_context to keep their context\n",
                100 * req_share(tr, tr->truncated), (long long)w->cfg->max_context);
        lines++;
    }
    for (int i = 0; i < n; i++) {
        const SimResult *r = &res[i];
        if (r->requests == 0) { /* every latency is absent ("–", null), never 0 */
            fprintf(out, "warning: %s: no request was measured (%llu left out as warm-up, %llu as cool-down, %llu dropped): "
                         "its latencies are absent\n",
                    r->policy, (unsigned long long)r->load.trimmed_warmup, (unsigned long long)r->load.trimmed_cooldown,
                    (unsigned long long)r->dropped);
            lines++;
        }
        if (req_share(r, r->dropped) > REPORT_WARN_SHARE) {
            fprintf(out, "warning: %s: %.1f%% of the requests were dropped, larger than the KV pool (%llu tokens per replica: "
                         "set by mem_util %.2f and the model's weights)\n",
                    r->policy, 100 * req_share(r, r->dropped), (unsigned long long)r->pool_tokens, w->cfg->mem_util);
            lines++;
        }
        uint64_t with_hist = r->requests - r->no_history;
        double fb = with_hist ? (double)r->fallbacks / (double)with_hist : 0;
        if (fb <= REPORT_WARN_SHARE) continue;
        const char *why;
        char buf[160];
        if (r->fallback_slower > r->fallback_uncovered) {
            why = "waiting for saves still crossing D2H was estimated slower than recomputing";
        } else if (r->state_lost_ttl + r->state_lost_capacity == 0) {
            why = "no saved state covered the history (the trace's history exceeds what this run saved)";
        } else if (r->state_lost_ttl >= r->state_lost_capacity) {
            snprintf(buf, sizeof buf, "saved state expired after state_ttl (%.0f s; %llu sessions lost their state)",
                     (double)w->cfg->state_ttl_ns / 1e9, (unsigned long long)r->state_lost_ttl);
            why = buf;
        } else {
            snprintf(buf, sizeof buf, "the tiers were full: tier capacity (dram, n_ssd; %llu sessions lost their state)",
                     (unsigned long long)r->state_lost_capacity);
            why = buf;
        }
        fprintf(out, "warning: %s: %.1f%% of the restorations fell back to recompute: %s\n", r->policy, 100 * fb, why);
        lines++;
    }
    return lines;
}

/* Under the table: per policy what was lost or waited for (only policies with any), then the
 * warnings. */
void report_footer(FILE *out, const SimWorld *w, const SimResult *res, int n)
{
    int head = 0;
    for (int i = 0; i < n; i++) {
        const SimResult *r = &res[i];
        if (!r->truncated && !r->dropped && !r->state_lost_ttl && !r->state_lost_capacity && !r->restore_waits && !r->fallbacks &&
            !r->preemptions)
            continue;
        if (!head++) fputc('\n', out);
        fprintf(out, "%s: %llu truncated, %llu dropped, %llu state lost (%llu state_ttl, %llu capacity), %llu waited for a save",
                r->policy, (unsigned long long)r->truncated, (unsigned long long)r->dropped,
                (unsigned long long)(r->state_lost_ttl + r->state_lost_capacity), (unsigned long long)r->state_lost_ttl,
                (unsigned long long)r->state_lost_capacity, (unsigned long long)r->restore_waits);
        if (r->restore_waits) fprintf(out, " (mean %.1f ms)", r->restore_wait_ns / 1e6 / (double)r->restore_waits);
        fprintf(out, ", %llu fell back to recompute", (unsigned long long)r->fallbacks);
        if (r->preemptions)
            fprintf(out, ", %llu preemptions (%llu requests; preempt=%s)", (unsigned long long)r->preemptions,
                    (unsigned long long)r->preempted_requests, w->cfg->preempt == SIM_PREEMPT_SWAP ? "swap" : "recompute");
        fputc('\n', out);
    }
    int named = 0;
    for (int i = 0; i < n; i++) {
        const SimResult *r = &res[i];
        if (r->prefix_block_tokens <= 0) continue;
        if (!head++) fputc('\n', out);
        named = 1;
        fprintf(out,
                "%s: prefix cache: %llu of %llu requests took a cached prefix (%llu tokens not computed; %.1f%% of the %llu "
                "blocks looked up were cached), %llu blocks inserted, %llu restored or computed again although cached (kept once: the block of a prompt's last token, or blocks another request cached while this one restored or computed them), %llu evicted; "
                "%llu histories restored from another session's saved copy\n",
                r->policy, (unsigned long long)r->prefix_hit_requests, (unsigned long long)r->prefix_named,
                (unsigned long long)r->prefix_hit_tokens, r->prefix_lookups ? 100.0 * (double)r->prefix_hits / (double)r->prefix_lookups : 0,
                (unsigned long long)r->prefix_lookups, (unsigned long long)r->prefix_inserted,
                (unsigned long long)r->prefix_deduplicated, (unsigned long long)r->prefix_evicted, (unsigned long long)r->prefix_borrowed);
    }
    for (int i = 0; i < n; i++) { /* the tiers' block stores: what was stored once, dropped, found */
        const SimResult *r = &res[i];
        if (r->prefix_block_tokens <= 0) continue;
        char line[768], hits[256];
        size_t o = 0, h = 0;
        for (int t = TIER_DRAM; t < SIM_TIERS && o < sizeof line && h < sizeof hits; t++) {
            if (!r->prefix_tier_stored[t] && !r->prefix_tier_dedup[t] && !r->prefix_tier_found[t]) continue;
            o += (size_t)snprintf(line + o, sizeof line - o, "%s%s %llu blocks stored, %llu stored once for several states "
                                  "(%.2f GB not written), %llu dropped", o ? "; " : "", tier_name((Tier)t),
                                  (unsigned long long)r->prefix_tier_stored[t], (unsigned long long)r->prefix_tier_dedup[t],
                                  r->prefix_tier_unwritten[t] / 1e9, (unsigned long long)r->prefix_tier_dropped[t]);
            if (r->prefix_tier_asked)
                h += (size_t)snprintf(hits + h, sizeof hits - h, "%s%.1f%% in %s", h ? ", " : "",
                                      100.0 * (double)r->prefix_tier_found[t] / (double)r->prefix_tier_asked, tier_name((Tier)t));
        }
        if (!o) continue;
        if (r->prefix_tier_asked)
            fprintf(out, "%s: tier block stores: %s; of the %llu named history blocks restorations looked for below HBM, found %s\n",
                    r->policy, line, (unsigned long long)r->prefix_tier_asked, h ? hits : "none");
        else
            fprintf(out, "%s: tier block stores: %s; no restoration looked for a named history block below HBM\n", r->policy, line);
    }
    if (named && w->cfg->evict_each_turn)
        fprintf(out, "note: evict_each_turn drops each session's own KV when its turn ends; the blocks the trace names stay in "
                     "the prefix cache until the pool needs the room (prefix_cache=false: no cache)\n");
    int any = 0, none = 1;
    for (int i = 0; i < n; i++) {
        any |= res[i].truncated || res[i].dropped || res[i].fallbacks || !res[i].requests;
        none &= report_restored_nothing(&res[i]) != 0;
    }
    if (!any && !none) return;
    /* the warnings go under the counts (a blank line first when there were none) */
    if (!head) fputc('\n', out);
    if (any) report_warnings(out, w, res, n);
    if (none) report_restored_nothing_note(out, res, n);
}

int report_load_warning(char *b, size_t n, const SimResult *r)
{
    const SimLoad *ld = &r->load;
    b[0] = '\0';
    if (!ld->overloaded && ld->steady) return 0;
    size_t len = (size_t)snprintf(b, n, "%s: %s: %.3g requests/s arrived, %.3g requests/s done while the load ran (%.4g s to %.4g s)",
                                  r->policy, ld->overloaded ? "overloaded" : "not in steady state", ld->offered_per_s,
                                  ld->served_per_s, (double)ld->window_start_ns / 1e9, (double)ld->window_end_ns / 1e9);
    if (ld->backlog_s > ld->overload_growth_s && len < n)
        len += (size_t)snprintf(b + len, n - len, "; the requests after it waited %.3g s longer (backlog)", ld->backlog_s);
    if (!ld->steady && len < n)
        snprintf(b + len, n - len,
                 "; arrival-to-first-token time grew %.3g s over its last half (%.3g -> %.3g s mean, slope t = %.3g > %.3g)%s",
                 ld->growth_s, ld->delay_first_half_s, ld->delay_last_half_s, ld->slope_t, ld->t_crit,
                 ld->overloaded ? "" : "; the means depend on the run length (warmup=, cooldown=, or a longer run)");
    return ld->overloaded ? 2 : 1;
}

void report_load_footer(FILE *out, const SimConfig *cfg, const SimResult *res, int n)
{
    int first = 1;
    for (int i = 0; i < n; i++) {
        char b[640];
        int lv = report_load_warning(b, sizeof b, &res[i]);
        if (!lv) continue;
        fprintf(out, "%s%s: %s\n", first ? "\n" : "", lv == 2 ? "warning" : "note", b);
        first = 0;
    }
    if (cfg->warmup.n > 0 || cfg->cooldown.n > 0)
        for (int i = 0; i < n; i++)
            fprintf(out, "%strimmed: %s: %llu warm-up and %llu cool-down requests left out of the metrics (%llu kept)\n",
                    i ? "" : "\n", res[i].policy, (unsigned long long)res[i].load.trimmed_warmup,
                    (unsigned long long)res[i].load.trimmed_cooldown, (unsigned long long)res[i].load.kept);
}
