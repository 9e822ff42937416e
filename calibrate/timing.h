/* timing.h — the calibrator's timing loop and its statistics (STYLE.md "The calibrator measures
 * honestly").
 *
 * Responsible for: running one measured workload as warm-up iterations followed by timed
 * repetitions until both a minimum count and a minimum time are reached (bounded by a maximum count
 * and a time budget), checking an interrupt flag between repetitions, and summarising the samples
 * (median, p10, p90, n) with pure functions.
 * Not responsible for: what is timed or how. The workload callback does its own untimed preparation
 * (e.g. writing a buffer larger than the GPU's L2 so every repetition starts cold) and returns the
 * duration of the timed part, measured with CUDA events for device work or CLOCK_MONOTONIC
 * (timing_now_ns) for host work.
 *
 * Stopping rule (elapsed = clock time since the first warm-up began, all work included):
 *   warm-up: at least 1 iteration when cfg.warmup >= 1, at most cfg.warmup, and no new warm-up
 *            iteration once warmup_max_ns (when > 0) has elapsed;
 *   timed:   at least 1 repetition; stop after a repetition when n >= max_reps, or when
 *            n >= min_reps and the timed samples sum to >= min_time_ns, or when budget_ns (when
 *            > 0) has elapsed. So n may fall below min_reps only because of the budget; the
 *            stored n says how many samples the point has.
 * Quantiles: linear interpolation between order statistics (rank q·(n−1), the "type 7" rule), so
 * p10 <= median <= p90 always, and the median of an even count is the mean of the middle two.
 * Invariants: samples are >= 0 (a negative sample is an error of the workload); the stats of n
 * samples are computed on a sorted copy, the caller's array is not reordered.
 */
#ifndef KV_TIMING_H
#define KV_TIMING_H

#include <signal.h>
#include <stdint.h>

#include "sim/base/util.h"

#define TIMING_MAX_SAMPLES 4096

typedef struct TimingCfg {
    int warmup;              /* warm-up iterations (0: none) */
    int64_t warmup_max_ns;   /* stop warming up past this much elapsed time (0: no limit) */
    int min_reps;            /* >= 1 */
    int max_reps;            /* >= min_reps, <= TIMING_MAX_SAMPLES */
    int64_t min_time_ns;     /* the timed samples must sum to at least this (with min_reps) */
    int64_t budget_ns;       /* wall budget of the whole point, warm-up included (0: none) */
    /* Clock for the stopping rule; NULL: CLOCK_MONOTONIC. Tests inject a fake clock. */
    int64_t (*clock_ns)(void *clock_ctx);
    void *clock_ctx;
    /* Checked before every iteration; non-zero stops the loop with "interrupted". May be NULL. */
    volatile sig_atomic_t *stop;
} TimingCfg;

typedef struct TimingStats {
    int n;               /* timed repetitions */
    int warmup;          /* warm-up iterations run */
    double median_ns, p10_ns, p90_ns, min_ns, max_ns, mean_ns;
    double elapsed_ns;   /* clock time of the whole point (warm-up and untimed preparation included) */
} TimingStats;

/* One iteration of the workload: do the untimed preparation, run the timed part, put its duration
 * in *ns. `timed` is 0 for warm-up iterations, 1 for repetitions. Return 0, or -1 with a message. */
typedef int (*TimingFn)(void *ctx, int timed, double *ns, KvErr *e);

/* Monotonic host clock in nanoseconds (CLOCK_MONOTONIC). */
int64_t timing_now_ns(void);

/* Check a configuration: warmup >= 0, 1 <= min_reps <= max_reps <= TIMING_MAX_SAMPLES, times >= 0. */
int timing_cfg_check(const TimingCfg *cfg, KvErr *e);

/* Run the loop; fills *st. Errors: a bad configuration, the workload's own error (prefixed with the
 * iteration), a negative or non-finite sample, or "interrupted" when *cfg->stop became non-zero. */
int timing_run(const TimingCfg *cfg, TimingFn fn, void *ctx, TimingStats *st, KvErr *e);

/* The q-quantile (0 <= q <= 1) of n >= 1 ascending values, type 7 (see above). */
double timing_quantile_sorted(const double *sorted, int n, double q);

/* Summary of n >= 1 samples (not reordered): n, median, p10, p90, min, max, mean; elapsed and
 * warmup are left 0. Returns -1 when n < 1 or n > TIMING_MAX_SAMPLES. */
int timing_stats(const double *samples, int n, TimingStats *st);

#endif
