/* hist.h — a log-linear histogram of non-negative values (nanoseconds, ratios) with bounded relative
 * error, for percentiles over streams of any length in constant memory.
 *
 * Buckets: values below 2^SUB are exact; above, each power of two is split into 2^SUB linear
 * sub-buckets, so a reported percentile is within 2^-SUB (≈0.4 % for SUB = 8) of a true sample value.
 * The mean, min and max are exact. Deterministic (no floating accumulation order issues beyond
 * the running sum, which is summed in insertion order).
 * Percentile definition: the smallest recorded value v such that at least p·n samples are <= v
 * (nearest-rank), reported as the midpoint of v's bucket clamped to [min, max].
 */
#ifndef KV_HIST_H
#define KV_HIST_H

#include <stddef.h>
#include <stdint.h>

#define HIST_SUB 8
#define HIST_BUCKETS ((64 - HIST_SUB + 1) << HIST_SUB)

typedef struct Hist {
    uint64_t *b;       /* HIST_BUCKETS counts, allocated on first add */
    uint64_t n;
    double sum;
    uint64_t min, max;
} Hist;

/* the bucket of v: v itself below 2^SUB, else (its power of two, its SUB bits below the top) */
static inline int hist_bucket_of(uint64_t v)
{
    if (v < (1ULL << HIST_SUB)) return (int)v;
    int msb = 63 - __builtin_clzll(v); /* >= HIST_SUB */
    int shift = msb - HIST_SUB;
    uint64_t sub = (v >> shift) & ((1ULL << HIST_SUB) - 1);
    return ((shift + 1) << HIST_SUB) + (int)sub;
}

void hist_add_first(Hist *h, uint64_t v); /* (hist_add without buckets yet: allocates them) */

/* one sample; inline (the per-token path): O(1) */
static inline void hist_add(Hist *h, uint64_t v)
{
    if (!h->b) {
        hist_add_first(h, v);
        return;
    }
    h->b[hist_bucket_of(v)]++;
    if (h->n == 0 || v < h->min) h->min = v;
    if (h->n == 0 || v > h->max) h->max = v;
    h->n++;
    h->sum += (double)v;
}
/* n samples of the value v: exactly what n calls hist_add(h, v) leave (the running sum gets n·v in
 * one addition when that is exact — integer sums below 2^53 — and n additions otherwise). O(1) then. */
void hist_add_n(Hist *h, uint64_t v, uint64_t n);
/* n samples of each of v[0..k-1], in that order: exactly what hist_add_n(h, v[i], n) for i = 0..k-1
 * leaves (the running sum gets n·Σv in one addition when every partial sum is an integer below
 * 2^53, and the k additions of hist_add_n otherwise). O(k). */
void hist_add_each_n(Hist *h, const uint64_t *v, size_t k, uint64_t n);
void hist_merge(Hist *dst, const Hist *src);
/* the 1-based rank of the p-quantile of n samples (0 < p < 1): ceil(p·n), at least 1 */
static inline uint64_t hist_rank(uint64_t n, double p)
{
    uint64_t rank = (uint64_t)(p * (double)n);
    if ((double)rank < p * (double)n) rank++;
    return rank < 1 ? 1 : rank;
}
/* p in [0, 1]; NAN when empty (no sample, no percentile: absent, never 0). O(buckets between min's and max's) */
double hist_percentile(const Hist *h, double p);
/* out[j] = hist_percentile(h, p[j]) for j < k, in one sweep of the buckets when p ascends (a
 * smaller p than the one before restarts it): a curve's points. O(buckets between min's and max's
 * + k) for an ascending p */
void hist_percentiles(const Hist *h, const double *p, int k, double *out);
/* 1 when h keeps the invariants the functions above rely on (its counts sum to n and lie in the
 * buckets of [min, max], both of which are non-empty), else 0: for a histogram read from a file.
 * O(HIST_BUCKETS) */
int hist_valid(const Hist *h);
/* the mean and the largest sample; NAN when empty */
double hist_mean(const Hist *h);
double hist_max(const Hist *h);
void hist_free(Hist *h);

#endif
