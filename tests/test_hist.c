/* test_hist.c — percentiles within the stated relative error against exact sorted samples. */
#include <stdlib.h>
#include <string.h>

#include <math.h>

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
    /* no sample, no statistic: absent (NAN), never 0 */
    CHECK(isnan(hist_percentile(&empty, 0.5)));
    CHECK(isnan(hist_mean(&empty)));
    CHECK(isnan(hist_max(&empty)));
    double pc[2];
    hist_percentiles(&empty, (const double[]){0.5, 0.99}, 2, pc);
    CHECK(isnan(pc[0]) && isnan(pc[1]));
    hist_free(&a);
    hist_free(&b);
}

/* hist_add_n(v, n) leaves exactly what n hist_add(v) leave: counts, min, max and the running sum's
 * bits, both where one addition is exact and past 2^53 where it is not */
TEST(hist_add_n_equals_repeated_adds)
{
    static const uint64_t start[] = {0, 123456789, 9007199254740000ULL, 1ULL << 60};
    static const uint64_t vals[] = {0, 1, 255, 256, 33554433, 3000000001ULL, 1ULL << 52};
    static const uint64_t ns[] = {1, 2, 7, 1000};
    for (size_t a = 0; a < sizeof start / sizeof start[0]; a++)
        for (size_t b = 0; b < sizeof vals / sizeof vals[0]; b++)
            for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
                Hist x = {0}, y = {0};
                hist_add(&x, start[a]);
                hist_add(&y, start[a]);
                for (uint64_t i = 0; i < ns[c]; i++) hist_add(&x, vals[b]);
                hist_add_n(&y, vals[b], ns[c]);
                CHECK_EQ_U(x.n, y.n);
                CHECK_EQ_U(x.min, y.min);
                CHECK_EQ_U(x.max, y.max);
                CHECK_MSG(memcmp(&x.sum, &y.sum, sizeof x.sum) == 0, "sum %.17g vs %.17g (start %llu, v %llu, n %llu)", x.sum,
                          y.sum, (unsigned long long)start[a], (unsigned long long)vals[b], (unsigned long long)ns[c]);
                CHECK(memcmp(x.b, y.b, HIST_BUCKETS * sizeof *x.b) == 0);
                hist_free(&x);
                hist_free(&y);
            }
}

/* hist_add_each_n(v[0..k-1], n) leaves exactly what hist_add_n(v[i], n) in order leave: counts,
 * min, max and the running sum's bits — where the one addition is exact, where a partial sum
 * crosses 2^53 (one by one), from a sum that is not an integer, and from an empty histogram */
TEST(hist_add_each_n_equals_hist_add_n_in_order)
{
    static const double start[] = {-1, 0, 123456789, 9007199254000000.0, 9007199254740990.0, 0.5, 1e300};
    static const uint64_t vals[][5] = {{5, 5, 5, 5, 5},
                                       {30000001, 29999999, 30000002, 1, 0},
                                       {1ULL << 40, 3, 1ULL << 41, 7, 255},
                                       {1ULL << 52, 1, 2, 3, 4},
                                       {3000000001ULL, 3000000001ULL, 2999999999ULL, 17, 1ULL << 50}};
    static const uint64_t ns[] = {1, 3, 64, 4096};
    int fast = 0, slow = 0;
    for (size_t a = 0; a < sizeof start / sizeof start[0]; a++)
        for (size_t b = 0; b < sizeof vals / sizeof vals[0]; b++)
            for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++)
                for (size_t k = 0; k <= 5; k++) {
                    Hist x = {0}, y = {0};
                    if (start[a] >= 0) { /* a histogram holding one sample, its sum set to start[a] */
                        hist_add(&x, 77);
                        hist_add(&y, 77);
                        x.sum = y.sum = start[a];
                    }
                    for (size_t i = 0; i < k; i++) hist_add_n(&x, vals[b][i], ns[c]);
                    hist_add_each_n(&y, vals[b], k, ns[c]);
                    CHECK_EQ_U(x.n, y.n);
                    CHECK_EQ_U(x.min, y.min);
                    CHECK_EQ_U(x.max, y.max);
                    CHECK_MSG(memcmp(&x.sum, &y.sum, sizeof x.sum) == 0, "sum %.17g vs %.17g (start %.17g, row %zu, n %llu, k %zu)",
                              x.sum, y.sum, start[a], b, (unsigned long long)ns[c], k);
                    CHECK((!x.b && !y.b) || (x.b && y.b && memcmp(x.b, y.b, HIST_BUCKETS * sizeof *x.b) == 0));
                    if (k > 0 && x.sum < 9007199254740992.0) fast++;
                    else if (k > 0) slow++;
                    hist_free(&x);
                    hist_free(&y);
                }
    CHECK(fast > 0 && slow > 0);
}

/* the percentile as the full scan from bucket 0 finds it (the definition in hist.h; what
 * hist_percentile computed before it scanned only [min, max]'s buckets, from either end) */
static double pct_full_scan(const Hist *h, double p)
{
    if (!h->n || !h->b) return 0;
    if (p <= 0) return (double)h->min;
    if (p >= 1) return (double)h->max;
    uint64_t rank = hist_rank(h->n, p);
    uint64_t seen = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t lo, hi;
            if (i < (1 << HIST_SUB)) {
                lo = hi = (uint64_t)i;
            } else {
                int shift = (i >> HIST_SUB) - 1;
                lo = ((1ULL << HIST_SUB) | (uint64_t)(i & ((1 << HIST_SUB) - 1))) << shift;
                hi = lo + (1ULL << shift) - 1;
            }
            double mid = ((double)lo + (double)hi) / 2;
            if (mid < (double)h->min) mid = (double)h->min;
            if (mid > (double)h->max) mid = (double)h->max;
            return mid;
        }
    }
    return (double)h->max;
}

TEST(hist_percentile_scan_of_min_to_max_equals_the_full_scan)
{
    uint64_t x = 12345;
    const double ps[] = {1e-9, 0.001, 0.1, 0.25, 0.4999, 0.5, 0.5001, 0.75, 0.9, 0.99, 0.999, 0.999999, 1 - 1e-12};
    for (int trial = 0; trial < 300; trial++) {
        Hist h = {0};
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int n = 1 + (int)(x % (trial < 50 ? 5 : 3000)); /* tiny ones too: 1..5 samples */
        int spread = (int)((x >> 20) % 40);
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t v = (x >> 3) % ((1ULL << spread) + 1);
            if (trial % 3 == 0) v += 1ULL << 30;             /* all far from bucket 0 */
            if (trial % 7 == 0) hist_add_n(&h, v, 1 + x % 9); /* runs of one value */
            else hist_add(&h, v);
        }
        CHECK(hist_valid(&h));
        for (int k = 0; k < 13 + 199; k++) {
            double p = k < 13 ? ps[k] : (k - 12) / 200.0, got = hist_percentile(&h, p), want = pct_full_scan(&h, p);
            CHECK_MSG(got == want, "trial %d, n %llu, p %.12g: %.17g, the full scan %.17g", trial, (unsigned long long)h.n, p, got, want);
        }
        /* hist_percentiles: the same values in one sweep (ascending p, with 0 and 1 among them),
         * and from the start again where p steps back (the scattered list) */
        double asc[203], many[203], scat[13], one[13];
        for (int k = 0; k < 203; k++) asc[k] = k == 0 ? 0 : k == 202 ? 1 : k < 13 ? ps[k - 1] * 0.005 : (k - 12) / 190.0;
        hist_percentiles(&h, asc, 203, many);
        for (int k = 0; k < 203; k++)
            CHECK_MSG(many[k] == pct_full_scan(&h, asc[k]), "trial %d, p %.12g: %.17g, the full scan %.17g", trial, asc[k], many[k],
                      pct_full_scan(&h, asc[k]));
        for (int k = 0; k < 13; k++) scat[k] = ps[(k * 5) % 13];
        hist_percentiles(&h, scat, 13, one);
        for (int k = 0; k < 13; k++) CHECK(one[k] == pct_full_scan(&h, scat[k]));
        /* hist_valid: a count moved below min's bucket or above max's, or n changed, is caught */
        Hist bad = h;
        bad.b = malloc(HIST_BUCKETS * sizeof *bad.b);
        memcpy(bad.b, h.b, HIST_BUCKETS * sizeof *bad.b);
        bad.n++;
        CHECK(!hist_valid(&bad));
        bad.n--;
        CHECK(hist_valid(&bad));
        if (h.min > 0) {
            bad.b[0]++;
            bad.n++;
            CHECK(!hist_valid(&bad));
        }
        free(bad.b);
        hist_free(&h);
    }
}
