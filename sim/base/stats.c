/* stats.c — see stats.h. */
#include "sim/base/stats.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <math.h>

int stats_t_quantile(double df, double p, double *q, KvErr *e)
{
    if (!(df > 0) || !isfinite(df)) return kv_err(e, "t quantile: degrees of freedom %g: expected a finite number > 0", df);
    if (!(p > 0 && p < 1)) return kv_err(e, "t quantile: probability %g: expected a number strictly between 0 and 1", p);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    double v = gsl_cdf_tdist_Pinv(p, df);
    gsl_set_error_handler(old);
    if (!isfinite(v)) return kv_err(e, "t quantile: df %g, p %g: GSL returned %g", df, p, v);
    *q = v;
    return 0;
}

int stats_mean_ci(const double *x, size_t n, double level, double *mean, double *half_width, KvErr *e)
{
    if (n < 2) return kv_err(e, "confidence interval: %zu sample(s): expected at least 2", n);
    if (!(level > 0 && level < 1)) return kv_err(e, "confidence interval: level %g: expected a number strictly between 0 and 1 (0.95 for 95 %%)", level);
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return kv_err(e, "confidence interval: sample %zu is %g: expected a finite number", i, x[i]);
        m += x[i];
    }
    m /= (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    double t;
    if (stats_t_quantile((double)(n - 1), 0.5 + level / 2, &t, e) != 0) return -1;
    *mean = m;
    *half_width = t * sqrt(ss / (double)(n - 1)) / sqrt((double)n);
    return 0;
}
