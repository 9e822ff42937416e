/* metric.c — the metric table and its readers; see metric.h.
 *
 * The rows are in the sweep CSV's column order (the sweep metrics first, then the figures only
 * summary.json and table.md carry); table.md and the CI tables take theirs by headline position.
 * Every value is computed with the same operations in the same order as summary.json writes it
 * (a time: the histogram's nanoseconds ÷ 1e9), so every output gives the same bits.
 */
#include "results/metric.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "results/report.h"

static double restore_throughput(const SimResult *r)
{
    return r->restore_busy_ns > 0 ? (double)r->restored_tokens / (r->restore_busy_ns / 1e9) : NAN;
}

static double requests_per_sim_s(const SimResult *r)
{
    double sim_s = (double)r->sim_end_ns / 1e9;
    return sim_s > 0 ? (double)r->requests / sim_s : NAN;
}

static double nothing_restored(const SimResult *r) { return report_restored_nothing(r) != 0; }
static double output_tokens_per_s(const SimResult *r) { return report_per_s(r->load.output_tokens, &r->load); }
static double goodput_per_s(const SimResult *r) { return report_per_s((double)r->load.good, &r->load); }

#define OFF(f) offsetof(SimResult, f)
#define ALL_POINT (METRIC_SUMMARY | METRIC_SWEEP)
/* a count field */
#define COUNT(n, f, out) {.name = n, .unit = "count", .read = MR_U64, .off = OFF(f), .outputs = out, .show = MS_COUNT}
/* a time distribution's statistic (Hist of nanoseconds) */
#define T_MEAN(n, h) .name = n, .unit = "s", .read = MR_HIST_MEAN, .off = OFF(h), .div = 1e9, .show = MS_MS, .samples = MN_HIST
#define T_Q(n, h, qq) .name = n, .unit = "s", .read = MR_HIST_Q, .off = OFF(h), .q = qq, .div = 1e9, .show = MS_MS, .samples = MN_HIST
#define T_MAX(n, h) .name = n, .unit = "s", .read = MR_HIST_MAX, .off = OFF(h), .div = 1e9, .show = MS_MS, .samples = MN_HIST
#define SHARE_H(n, f) {.name = n, .unit = "share", .read = MR_SHARE, .off = OFF(f), .denom = MD_WITH_HISTORY, \
                       .outputs = ALL_POINT | METRIC_CHECK, .samples = MN_WITH_HISTORY, .tol_abs = 0.01}
#define DBL(n, u, f) {.name = n, .unit = u, .read = MR_DOUBLE, .off = OFF(f), .outputs = ALL_POINT}
#define U64(n, u, f) {.name = n, .unit = u, .read = MR_U64, .off = OFF(f), .outputs = ALL_POINT}

static const Metric k_rows[] = {
    {.name = "requests", .unit = "count", .read = MR_U64, .off = OFF(requests), .show = MS_COUNT,
     .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL | METRIC_CHECK, .headline = 1, .key = "requests", .header = "requests"},
    COUNT("sessions", sessions, ALL_POINT),
    {.name = "dropped", .unit = "count", .read = MR_U64, .off = OFF(dropped), .show = MS_COUNT, .outputs = ALL_POINT, .target = "dropped"},
    COUNT("truncated", truncated, ALL_POINT),
    {T_MEAN("ttft_s.mean", ttft), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL | METRIC_CHECK, .headline = 2,
     .key = "ttft_mean_s", .header = "TTFT mean ms", .target = "ttft_mean", .tol_rel = 0.02, .tol_abs = 1e-4},
    {T_Q("ttft_s.p50", ttft, 0.50), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL | METRIC_CHECK, .headline = 3,
     .key = "ttft_p50_s", .header = "TTFT p50 ms", .target = "ttft_p50", .tol_rel = 0.02, .tol_abs = 1e-4},
    {T_Q("ttft_s.p90", ttft, 0.90), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL, .headline = 4, .key = "ttft_p90_s",
     .header = "TTFT p90 ms", .target = "ttft_p90"},
    {T_Q("ttft_s.p99", ttft, 0.99), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL | METRIC_CHECK, .headline = 5,
     .key = "ttft_p99_s", .header = "TTFT p99 ms", .target = "ttft_p99", .tol_rel = 0.02, .tol_abs = 1e-4},
    {T_MAX("ttft_s.max", ttft), .outputs = ALL_POINT, .target = "ttft_max"},
    {T_MEAN("tbt_s.mean", tbt), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL | METRIC_CHECK, .headline = 8,
     .key = "tbt_mean_s", .header = "TBT mean ms", .target = "tbt_mean", .tol_rel = 0.02, .tol_abs = 1e-5},
    {T_Q("tbt_s.p50", tbt, 0.50), .outputs = ALL_POINT, .target = "tbt_p50"},
    {T_Q("tbt_s.p99", tbt, 0.99), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL, .headline = 9, .key = "tbt_p99_s",
     .header = "TBT p99 ms", .target = "tbt_p99"},
    {T_MEAN("restore_s.mean", restore), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL | METRIC_CHECK, .headline = 6,
     .key = "restore_mean_s", .header = "restore mean ms", .target = "restore_mean", .tol_rel = 0.02, .tol_abs = 1e-4},
    {T_Q("restore_s.p50", restore, 0.50), .outputs = ALL_POINT, .target = "restore_p50"},
    {T_Q("restore_s.p99", restore, 0.99), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL, .headline = 7,
     .key = "restore_p99_s", .header = "restore p99 ms", .target = "restore_p99"},
    {T_MEAN("queue_s.mean", queue), .outputs = ALL_POINT, .target = "queue_mean"},
    {T_Q("queue_s.p99", queue, 0.99), .outputs = ALL_POINT, .target = "queue_p99"},
    {T_MEAN("prefill_s.mean", prefill), .outputs = ALL_POINT, .target = "prefill_mean"},
    {T_Q("prefill_s.p99", prefill, 0.99), .outputs = ALL_POINT, .target = "prefill_p99"},
    {.name = "slo_attainment", .higher_better = 1, .unit = "share", .read = MR_SHARE, .off = OFF(slo_met), .denom = MD_REQUESTS,
     .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL | METRIC_CHECK, .headline = 10, .key = "slo_attainment", .header = "SLO %",
     .show = MS_PCT, .samples = MN_REQUESTS, .target = "slo_attainment", .tol_abs = 0.01},
    {.name = "restore_throughput_tokens_per_s", .higher_better = 1, .unit = "tokens/s", .read = MR_FN, .fn = restore_throughput,
     .outputs = ALL_POINT | METRIC_REPL, .headline = 13, .key = "restore_throughput_tokens_per_s", .header = "restore tokens/s",
     .show = MS_COUNT, .samples = MN_RESTORED, .target = "restore_throughput"},
    U64("restored_tokens", "tokens", restored_tokens),
#define COUNTER_ROW_(field, path, help) U64(path, "count", field),
    SIM_COUNTER_ROWS(COUNTER_ROW_)
    SHARE_H("restore_from_share.resident", hits_resident),
    {.name = "restore_from_share.%s", .each = METRIC_EACH_TIER, .unit = "share", .read = MR_SHARE, .off = OFF(hits_tier),
     .denom = MD_WITH_HISTORY, .outputs = ALL_POINT | METRIC_CHECK, .samples = MN_WITH_HISTORY, .tol_abs = 0.01},
    SHARE_H("restore_from_share.recompute", misses),
    {.name = "bytes.h2d", .unit = "bytes", .read = MR_DOUBLE, .off = OFF(ch_bytes[CH_H2D][CH_READ]), .outputs = ALL_POINT | METRIC_CHECK,
     .tol_rel = 0.02, .tol_abs = 1e6},
    DBL("bytes.d2h", "bytes", ch_bytes[CH_D2H][CH_READ]),
    {.name = "bytes.%s", .each = METRIC_EACH_HOST_BYTES, .unit = "bytes", .read = MR_DOUBLE, .off = OFF(ch_bytes), .outputs = ALL_POINT},
    U64("peak_occupancy.hbm_kv_tokens", "tokens", hbm_peak_tokens),
    U64("peak_occupancy.hbm_pool_tokens", "tokens", pool_tokens),
    {.name = "peak_occupancy.%s_bytes", .each = METRIC_EACH_TIER, .unit = "bytes", .read = MR_U64, .off = OFF(tier_peak_bytes),
     .outputs = ALL_POINT},
    /* absent without an SSD tier; the life also without a rated endurance or without writes */
    {.name = "ssd_wear.drive_writes_per_day", .unit = "1/day", .read = MR_DOUBLE, .off = OFF(ssd_dwpd), .outputs = ALL_POINT,
     .target = "ssd_dwpd"},
    {.name = "ssd_wear.life_years", .higher_better = 1, .unit = "years", .read = MR_DOUBLE, .off = OFF(ssd_life_years), .outputs = ALL_POINT,
     .target = "ssd_life_years"},
    /* bytes written into each tier (saves, demotions, write-through copies, promotions, prefetches) and each over the
     * bytes the policy saved (write amplification); absent for a tier that is off, the ratio also
     * when nothing was saved */
    DBL("tiers.saved_bytes", "bytes", policy_saved_bytes),
    {.name = "tiers.written_bytes.%s", .each = METRIC_EACH_TIER, .unit = "bytes", .read = MR_DOUBLE, .off = OFF(tier_written_bytes),
     .outputs = ALL_POINT},
    {.name = "tiers.write_amplification.%s", .each = METRIC_EACH_TIER, .unit = "ratio", .read = MR_DOUBLE, .off = OFF(write_amp),
     .outputs = ALL_POINT},
    DBL("utilisation.gpu_stage0", "busy share", util_gpu[0]),
    DBL("utilisation.h2d_stage0", "busy share", util_ch[CH_H2D][0]),
    DBL("utilisation.d2h_stage0", "busy share", util_ch[CH_D2H][0]),
    {.name = "utilisation.%s", .each = METRIC_EACH_HOST_UTIL, .unit = "busy share", .read = MR_DOUBLE, .off = OFF(util_ch),
     .outputs = ALL_POINT},
    {T_Q("by_history_class.short.ttft_s.p99", cls[0].ttft, 0.99), .outputs = ALL_POINT},
    {T_Q("by_history_class.medium.ttft_s.p99", cls[1].ttft, 0.99), .outputs = ALL_POINT},
    {T_Q("by_history_class.long.ttft_s.p99", cls[2].ttft, 0.99), .outputs = ALL_POINT},
    {.name = "sim_time_s", .unit = "s", .read = MR_I64, .off = OFF(sim_end_ns), .div = 1e9, .outputs = ALL_POINT | METRIC_CHECK,
     .show = MS_MS, .tol_rel = 0.01, .tol_abs = 1e-3},
    /* requests ÷ simulated time: not in summary.json (its load block has the rates over the load window) */
    {.name = "requests_per_s", .unit = "1/s", .read = MR_FN, .fn = requests_per_sim_s, .outputs = METRIC_SWEEP,
     .samples = MN_REQUESTS, .target = "requests_per_s"},
    U64("iterations", "count", iterations),
    U64("events", "count", events),
    /* how the engine reached those events (speed, not results): delivered by the queue, decode steps
     * of decode runs, timers re-armed before delivery; their sum is events */
    {.name = "queue_events", .unit = "count", .read = MR_U64, .off = OFF(queue_events), .outputs = METRIC_SUMMARY},
    {.name = "decode_steps", .unit = "count", .read = MR_U64, .off = OFF(decode_steps), .outputs = METRIC_SUMMARY},
    {.name = "cancelled_timers", .unit = "count", .read = MR_U64, .off = OFF(cancelled_timers), .outputs = METRIC_SUMMARY},
    {.name = "load.overloaded", .unit = "flag", .read = MR_INT_FLAG, .off = OFF(load.overloaded), .outputs = ALL_POINT},
    {.name = "load.steady_state", .unit = "flag", .read = MR_INT_FLAG, .off = OFF(load.steady), .outputs = ALL_POINT},
    {.name = "nothing_restored", .unit = "flag", .read = MR_FN, .fn = nothing_restored, .outputs = ALL_POINT},
    /* end to end: from the release (where TTFT starts) to the last output token */
    {T_MEAN("e2e_s.mean", e2e), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL, .headline = 17, .key = "e2e_mean_s",
     .header = "E2E mean ms", .target = "e2e_mean"},
    {T_Q("e2e_s.p50", e2e, 0.50), .outputs = ALL_POINT, .target = "e2e_p50"},
    {T_Q("e2e_s.p90", e2e, 0.90), .outputs = ALL_POINT, .target = "e2e_p90"},
    {T_Q("e2e_s.p99", e2e, 0.99), .outputs = ALL_POINT | METRIC_TABLE | METRIC_REPL, .headline = 18, .key = "e2e_p99_s",
     .header = "E2E p99 ms", .target = "e2e_p99"},
    {T_MAX("e2e_s.max", e2e), .outputs = ALL_POINT, .target = "e2e_max"},
    /* the figures of summary.json and table.md that no sweep column carries */
    {.name = "saved_bytes_per_token", .unit = "bytes/token", .read = MR_DOUBLE, .off = OFF(saved_bytes_per_token),
     .outputs = METRIC_SUMMARY | METRIC_TABLE | METRIC_REPL, .headline = 11, .key = "saved_bytes_per_token",
     .header = "saved per token", .show = MS_BYTES},
    {.name = "restore_over_lower_bound.mean", .unit = "ratio", .read = MR_HIST_MEAN, .off = OFF(lb_ratio), .div = 1000,
     .outputs = METRIC_SUMMARY | METRIC_TABLE | METRIC_REPL, .headline = 12, .key = "restore_over_lower_bound_mean",
     .header = "restore/bound", .show = MS_RATIO, .samples = MN_HIST},
    {.name = "load.request_throughput_per_s", .higher_better = 1, .unit = "requests/s", .read = MR_DOUBLE, .off = OFF(load.throughput_per_s),
     .outputs = METRIC_SUMMARY | METRIC_TABLE, .headline = 14, .header = "req/s", .show = MS_RATE3},
    {.name = "load.output_tokens_per_s", .higher_better = 1, .unit = "tokens/s", .read = MR_FN, .fn = output_tokens_per_s,
     .outputs = METRIC_SUMMARY | METRIC_TABLE, .headline = 15, .header = "out tok/s", .show = MS_RATE1},
    {.name = "load.request_goodput_per_s", .higher_better = 1, .unit = "requests/s", .read = MR_FN, .fn = goodput_per_s,
     .outputs = METRIC_SUMMARY | METRIC_TABLE, .headline = 16, .header = "goodput req/s", .show = MS_RATE3},
};

/* the table: k_rows with each METRIC_EACH_* row repeated in place */
#define MAX_METRICS ((int)KV_ARRAY_LEN(k_rows) + 4 * (SIM_TIERS + 2 * CH_COUNT))
static Metric k_metrics[MAX_METRICS];
static char k_names[MAX_METRICS][80];
static int N_METRICS;

static void add_row(const Metric *m, const char *arg, size_t off)
{
    Metric *x = &k_metrics[N_METRICS];
    *x = *m;
    if (arg) {
        snprintf(k_names[N_METRICS], sizeof k_names[N_METRICS], m->name, arg);
        x->name = k_names[N_METRICS];
        x->off = off;
        x->each = METRIC_EACH_NONE;
    }
    N_METRICS++;
}

static void expand_rows(void)
{
    for (size_t i = 0; i < KV_ARRAY_LEN(k_rows); i++) {
        const Metric *m = &k_rows[i];
        size_t elem = m->read == MR_DOUBLE ? sizeof(double) : sizeof(uint64_t);
        switch (m->each) {
        case METRIC_EACH_TIER:
            for (int t = TIER_DRAM; t < SIM_TIERS; t++) add_row(m, tier_name((Tier)t), m->off + (size_t)t * elem);
            break;
        case METRIC_EACH_HOST_BYTES:
            for (int k = 0; k < CH_COUNT; k++) {
                if (sim_channel_rows[k].per_stage) continue;
                add_row(m, sim_channel_rows[k].bytes_key, m->off + (size_t)(2 * k + CH_READ) * elem);
                if (sim_channel_rows[k].write_key)
                    add_row(m, sim_channel_rows[k].write_key, m->off + (size_t)(2 * k + CH_WRITE) * elem);
            }
            break;
        case METRIC_EACH_HOST_UTIL:
            for (int k = 0; k < CH_COUNT; k++)
                if (!sim_channel_rows[k].per_stage) add_row(m, sim_channel_rows[k].name, m->off + (size_t)k * SIM_MAX_STAGES * elem);
            break;
        default: add_row(m, NULL, 0);
        }
    }
}

static void metrics_ready(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, expand_rows);
}

int metric_count(void)
{
    metrics_ready();
    return N_METRICS;
}
const Metric *metric_at(int i) { return i >= 0 && i < metric_count() ? &k_metrics[i] : NULL; }

const Metric *metric_find(const char *name)
{
    metrics_ready();
    for (int i = 0; i < N_METRICS; i++)
        if (!strcmp(k_metrics[i].name, name)) return &k_metrics[i];
    return NULL;
}

const Metric *metric_headline(int pos, unsigned outputs)
{
    metrics_ready();
    for (int i = 0; i < N_METRICS; i++)
        if (k_metrics[i].headline == pos && (k_metrics[i].outputs & outputs)) return &k_metrics[i];
    return NULL;
}

int metric_headline_count(void)
{
    metrics_ready();
    int n = 0;
    for (int i = 0; i < N_METRICS; i++)
        if (k_metrics[i].headline > n) n = k_metrics[i].headline;
    return n;
}

const Metric *metric_by_target(const char *target)
{
    metrics_ready();
    for (int i = 0; i < N_METRICS; i++)
        if (k_metrics[i].target && !strcmp(k_metrics[i].target, target)) return &k_metrics[i];
    return NULL;
}

static const void *field(const Metric *m, const SimResult *r) { return (const char *)r + m->off; }
static const Hist *hist(const Metric *m, const SimResult *r) { return field(m, r); }

static double denom(const Metric *m, const SimResult *r)
{
    return m->denom == MD_REQUESTS ? (double)r->requests : (double)(r->requests - r->no_history);
}

/* the value before the division by m->div (nanoseconds for a time) */
static double raw(const Metric *m, const SimResult *r)
{
    switch (m->read) {
    case MR_U64: return (double)*(const uint64_t *)field(m, r);
    case MR_I64: return (double)*(const int64_t *)field(m, r);
    case MR_INT_FLAG: return *(const int *)field(m, r) != 0;
    case MR_DOUBLE: return *(const double *)field(m, r);
    case MR_HIST_MEAN: return hist_mean(hist(m, r));
    case MR_HIST_Q: return hist_percentile(hist(m, r), m->q);
    case MR_HIST_MAX: return hist_max(hist(m, r));
    case MR_SHARE: {
        double d = denom(m, r);
        return d > 0 ? (double)*(const uint64_t *)field(m, r) / d : NAN;
    }
    case MR_FN: return m->fn(r);
    }
    return NAN;
}

double metric_value(const Metric *m, const SimResult *r)
{
    double v = raw(m, r);
    return m->div > 0 ? v / m->div : v;
}

int64_t metric_samples(const Metric *m, const SimResult *r)
{
    switch (m->samples) {
    case MN_NONE: return -1;
    case MN_HIST: return (int64_t)hist(m, r)->n;
    case MN_REQUESTS: return (int64_t)r->requests;
    case MN_WITH_HISTORY: return (int64_t)(r->requests - r->no_history);
    case MN_RESTORED: return r->restore_busy_ns > 0 ? (int64_t)r->restored_tokens : 0;
    }
    return -1;
}

void metric_cell(char *b, size_t n, const Metric *m, const SimResult *r)
{
    double v = metric_value(m, r);
    switch (m->show) {
    case MS_COUNT:
        if (m->read == MR_U64) {
            snprintf(b, n, "%llu", (unsigned long long)*(const uint64_t *)field(m, r));
            return;
        }
        if (isfinite(v)) snprintf(b, n, "%.0f", v);
        else snprintf(b, n, "–");
        return;
    case MS_MS: { /* from the nanoseconds, as table.md has always divided them */
        double ns = m->div == 1e9 ? raw(m, r) : v * 1e9;
        if (isfinite(ns)) snprintf(b, n, "%.1f", ns / 1e6);
        else snprintf(b, n, "–");
        return;
    }
    case MS_PCT:
        if (m->read == MR_SHARE) { /* percent of the count, then divided */
            double d = denom(m, r);
            if (d > 0) snprintf(b, n, "%.1f", 100.0 * (double)*(const uint64_t *)field(m, r) / d);
            else snprintf(b, n, "–");
            return;
        }
        if (isfinite(v)) snprintf(b, n, "%.1f", 100 * v);
        else snprintf(b, n, "–");
        return;
    case MS_BYTES: report_human_bytes(b, n, v); return;
    case MS_RATIO:
        if (isfinite(v)) snprintf(b, n, "%.2f", v);
        else snprintf(b, n, "–");
        return;
    case MS_RATE1:
    case MS_RATE3:
        if (isfinite(v)) snprintf(b, n, "%.*f", m->show == MS_RATE1 ? 1 : 3, v);
        else snprintf(b, n, "–");
        return;
    case MS_PLAIN: break;
    }
    if (isfinite(v)) snprintf(b, n, "%.17g", v);
    else snprintf(b, n, "–");
}
