/* test_stats.c — sim/base/stats: Student-t quantiles against published table values, symmetry and
 * the normal limit; the mean's confidence interval on a hand-computed case; bad input refused. */
#include <math.h>

#include "tests/harness.h"
#include "sim/base/stats.h"

TEST(stats_t_quantile_matches_tables)
{
    /* two-sided 95 % critical values (p = 0.975) and one 99 % value, from standard t tables */
    struct { double df, p, q; } k[] = {
        {1, 0.975, 12.706205}, {2, 0.975, 4.302653}, {4, 0.975, 2.776445}, {9, 0.975, 2.262157},
        {29, 0.975, 2.045230}, {10, 0.995, 3.169273}, {5, 0.95, 2.015048}, {1, 0.75, 1.0},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(k); i++) {
        double q = 0;
        KvErr e;
        CHECK_MSG(stats_t_quantile(k[i].df, k[i].p, &q, &e) == 0, "%s", e.msg);
        CHECK_NEAR(q, k[i].q, 2e-6, 0);
        double lo = 0;
        CHECK(stats_t_quantile(k[i].df, 1 - k[i].p, &lo, &e) == 0);
        CHECK_NEAR(lo, -k[i].q, 2e-6, 0);
    }
    double q, z = 1.959964;
    KvErr e;
    CHECK(stats_t_quantile(1e7, 0.975, &q, &e) == 0);
    CHECK_NEAR(q, z, 1e-5, 0);
    CHECK(stats_t_quantile(3, 0.5, &q, &e) == 0);
    CHECK_NEAR(q, 0, 0, 1e-12);
}

TEST(stats_t_quantile_refuses_bad_input)
{
    double q = 42;
    KvErr e;
    CHECK(stats_t_quantile(0, 0.975, &q, &e) != 0);
    CHECK_CONTAINS(e.msg, "degrees of freedom 0");
    CHECK(stats_t_quantile(-3, 0.975, &q, &e) != 0);
    CHECK(stats_t_quantile(NAN, 0.975, &q, &e) != 0);
    CHECK(stats_t_quantile(5, 1, &q, &e) != 0);
    CHECK_CONTAINS(e.msg, "probability 1");
    CHECK(stats_t_quantile(5, 0, &q, &e) != 0);
    CHECK(stats_t_quantile(5, NAN, &q, &e) != 0);
    CHECK_NEAR(q, 42, 0, 0); /* untouched on failure */
}

TEST(stats_mean_ci_by_hand)
{
    /* x = 1..5: mean 3, s = sqrt(2.5), t(4, 0.975) = 2.776445 → half width 2.776445·1.5811388/√5 */
    double x[] = {1, 2, 3, 4, 5}, m, h;
    KvErr e;
    CHECK_MSG(stats_mean_ci(x, 5, 0.95, &m, &h, &e) == 0, "%s", e.msg);
    CHECK_NEAR(m, 3, 1e-15, 0);
    CHECK_NEAR(h, 2.776445 * sqrt(2.5) / sqrt(5), 2e-6, 0);
    double same[] = {7, 7, 7};
    CHECK(stats_mean_ci(same, 3, 0.9, &m, &h, &e) == 0);
    CHECK_NEAR(h, 0, 0, 0);
    CHECK(stats_mean_ci(x, 1, 0.95, &m, &h, &e) != 0);
    CHECK_CONTAINS(e.msg, "1 sample(s)");
    CHECK(stats_mean_ci(x, 5, 95, &m, &h, &e) != 0);
    CHECK_CONTAINS(e.msg, "level 95");
    double bad[] = {1, INFINITY};
    CHECK(stats_mean_ci(bad, 2, 0.95, &m, &h, &e) != 0);
    CHECK_CONTAINS(e.msg, "sample 1");
}
