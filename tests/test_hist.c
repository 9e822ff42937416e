/* test_hist.c — percentiles within the stated relative error against exact sorted samples. */
#include <stdlib.h>

#include "tests/harness.h"
#include "sim/base/hist.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

TEST(hist_percentiles_within_relative_error)
{
    enum { N = 20000 };
    uint64_t *v = malloc(N * sizeof *v);
    Hist h = {0};
    uint64_t x = 7;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = 1000 + (x % 50000000); /* 1 µs .. 50 ms in ns */
        hist_add(&h, v[i]);
    }
    qsort(v, N, sizeof *v, cmp_u64);
    double ps[] = {0.5, 0.9, 0.99, 0.999};
    for (size_t k = 0; k < 4; k++) {
        uint64_t rank = (uint64_t)(ps[k] * N + 0.999999);
        double exact = (double)v[rank - 1];
        CHECK_NEAR(hist_percentile(&h, ps[k]), exact, 1.0 / 256, 0);
    }
    CHECK_EQ_U(h.n, N);
    CHECK_EQ_U(h.min, v[0]);
    CHECK_EQ_U(h.max, v[N - 1]);
    double s = 0;
    for (int i = 0; i < N; i++) s += (double)v[i];
    CHECK_NEAR(hist_mean(&h), s / N, 1e-12, 0);
    free(v);
    hist_free(&h);
}

TEST(hist_small_values_exact_and_merge)
{
    Hist a = {0}, b = {0};
    for (uint64_t i = 1; i <= 100; i++) hist_add(i <= 50 ? &a : &b, i);
    hist_merge(&a, &b);
    CHECK_EQ_U(a.n, 100);
    CHECK_NEAR(hist_percentile(&a, 0.5), 50, 0, 0);
    CHECK_NEAR(hist_percentile(&a, 0.99), 99, 0, 0);
    CHECK_NEAR(hist_percentile(&a, 1.0), 100, 0, 0);
    Hist empty = {0};
    CHECK_NEAR(hist_percentile(&empty, 0.5), 0, 0, 0);
    hist_free(&a);
    hist_free(&b);
}
