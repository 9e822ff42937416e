/* timing.c — warm-up + repetitions until count, time and budget rules are met; median/p10/p90.
 * See timing.h for the stopping rule and the quantile definition.
 * Complexity: timing_stats is O(n log n) (a sorted copy); the loop keeps at most max_reps samples.
 */
#include "calibrate/timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t timing_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t cfg_clock(const TimingCfg *cfg)
{
    return cfg->clock_ns ? cfg->clock_ns(cfg->clock_ctx) : timing_now_ns();
}

int timing_cfg_check(const TimingCfg *cfg, KvErr *e)
{
    if (cfg->warmup < 0) return kv_err(e, "timing: warmup %d: expected >= 0", cfg->warmup);
    if (cfg->min_reps < 1) return kv_err(e, "timing: min_reps %d: expected >= 1", cfg->min_reps);
    if (cfg->max_reps < cfg->min_reps || cfg->max_reps > TIMING_MAX_SAMPLES)
        return kv_err(e, "timing: max_reps %d: expected %d..%d (>= min_reps)", cfg->max_reps, cfg->min_reps,
                      TIMING_MAX_SAMPLES);
    if (cfg->min_time_ns < 0 || cfg->budget_ns < 0 || cfg->warmup_max_ns < 0)
        return kv_err(e, "timing: times must be >= 0 (min_time %lld, budget %lld, warmup_max %lld ns)",
                      (long long)cfg->min_time_ns, (long long)cfg->budget_ns, (long long)cfg->warmup_max_ns);
    return 0;
}

double timing_quantile_sorted(const double *sorted, int n, double q)
{
    if (n <= 0) return 0;
    if (q <= 0) return sorted[0];
    if (q >= 1) return sorted[n - 1];
    double r = q * (double)(n - 1);
    int lo = (int)floor(r);
    if (lo >= n - 1) return sorted[n - 1];
    double w = r - (double)lo;
    return sorted[lo] + w * (sorted[lo + 1] - sorted[lo]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int timing_stats(const double *samples, int n, TimingStats *st)
{
    memset(st, 0, sizeof *st);
    if (n < 1 || n > TIMING_MAX_SAMPLES) return -1;
    double sorted[TIMING_MAX_SAMPLES];
    memcpy(sorted, samples, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += sorted[i];
    st->n = n;
    st->min_ns = sorted[0];
    st->max_ns = sorted[n - 1];
    st->mean_ns = sum / n;
    st->median_ns = timing_quantile_sorted(sorted, n, 0.5);
    st->p10_ns = timing_quantile_sorted(sorted, n, 0.1);
    st->p90_ns = timing_quantile_sorted(sorted, n, 0.9);
    return 0;
}

static int interrupted(const TimingCfg *cfg) { return cfg->stop && *cfg->stop; }

int timing_run(const TimingCfg *cfg, TimingFn fn, void *ctx, TimingStats *st, KvErr *e)
{
    memset(st, 0, sizeof *st);
    if (timing_cfg_check(cfg, e) != 0) return -1;
    double *samples = malloc((size_t)cfg->max_reps * sizeof *samples);
    if (!samples) return kv_err(e, "timing: out of memory");
    int64_t t0 = cfg_clock(cfg);
    int warm = 0;
    for (; warm < cfg->warmup; warm++) {
        if (warm > 0 && cfg->warmup_max_ns > 0 && cfg_clock(cfg) - t0 >= cfg->warmup_max_ns) break;
        if (interrupted(cfg)) goto stopped;
        double ns = 0;
        if (fn(ctx, 0, &ns, e) != 0) {
            free(samples);
            return kv_err_prefix(e, "warm-up iteration %d: ", warm + 1);
        }
    }
    int n = 0;
    double sum_ns = 0;
    for (;;) {
        if (interrupted(cfg)) goto stopped;
        double ns = 0;
        if (fn(ctx, 1, &ns, e) != 0) {
            free(samples);
            return kv_err_prefix(e, "repetition %d: ", n + 1);
        }
        if (!isfinite(ns) || ns < 0) {
            free(samples);
            return kv_err(e, "repetition %d: the workload reported %g ns (expected a finite time >= 0)", n + 1, ns);
        }
        samples[n++] = ns;
        sum_ns += ns;
        if (n >= cfg->max_reps) break;
        if (n >= cfg->min_reps && sum_ns >= (double)cfg->min_time_ns) break;
        if (cfg->budget_ns > 0 && cfg_clock(cfg) - t0 >= cfg->budget_ns) break;
    }
    timing_stats(samples, n, st);
    st->warmup = warm;
    st->elapsed_ns = (double)(cfg_clock(cfg) - t0);
    free(samples);
    return 0;
stopped:
    free(samples);
    return kv_err(e, "interrupted");
}
