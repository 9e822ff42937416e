/* stats.h — small-sample statistics for experiment summaries: Student-t quantiles and the confidence
 * interval of a mean over repeated runs (seeds).
 *
 * Responsible for: the t quantile (GSL's gsl_cdf_tdist_Pinv, the one place kvsim uses GSL) and a
 * two-sided confidence interval of the mean of n samples. Input is validated (df > 0, 0 < p < 1,
 * n >= 2, 0 < level < 1) and a failure leaves a message naming the argument and its value.
 * Not responsible for: percentiles of long streams (hist.h) or anything that prints.
 * Invariants: GSL's error handler is switched off for the duration of a call and restored after,
 * so a GSL domain error can never abort the process; results are deterministic.
 * Complexity: stats_t_quantile O(1) (GSL's series/inversion), stats_mean_ci O(n).
 */
#ifndef KV_STATS_H
#define KV_STATS_H

#include <stddef.h>

#include "sim/base/util.h"

/* The p-quantile of Student's t distribution with df degrees of freedom (df may be fractional):
 * the q with P(T <= q) = p. 0 and the value in *q on success, -1 + message on bad input. */
int stats_t_quantile(double df, double p, double *q, KvErr *e);

/* The two-sided level confidence interval of the mean of x[0..n-1] (level 0.95 for 95 %):
 * mean ± t_{(1+level)/2, n-1} · s / sqrt(n), s the sample standard deviation. */
int stats_mean_ci(const double *x, size_t n, double level, double *mean, double *half_width, KvErr *e);

#endif
