/* hist.c — log-linear histogram; see hist.h. */
#include "sim/base/hist.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>

static inline void bucket_range(int b, uint64_t *lo, uint64_t *hi)
{
    if (b < (1 << HIST_SUB)) {
        *lo = *hi = (uint64_t)b;
        return;
    }
    int shift = (b >> HIST_SUB) - 1;
    uint64_t sub = (uint64_t)(b & ((1 << HIST_SUB) - 1));
    *lo = ((1ULL << HIST_SUB) | sub) << shift;
    *hi = *lo + (1ULL << shift) - 1;
}

/* hist_add's first sample: the buckets, then the sample (out of memory: dropped, n stays consistent) */
void hist_add_first(Hist *h, uint64_t v)
{
    h->b = calloc(HIST_BUCKETS, sizeof *h->b);
    if (!h->b) return;
    hist_add(h, v);
}

/* the running sum after n samples of v, as hist_add_n adds them: the sum is a double of integers,
 * added in insertion order; while every partial sum stays below 2^53 each addition is exact, so one
 * addition of n·v gives the same double */
static inline void sum_add_n(Hist *h, uint64_t v, uint64_t n)
{
    const double exact = 9007199254740992.0; /* 2^53 */
    if (v <= (1ULL << 53) / n && h->sum + (double)(v * n) < exact) {
        h->sum += (double)(v * n);
    } else {
        for (uint64_t i = 0; i < n; i++) h->sum += (double)v;
    }
}

void hist_add_n(Hist *h, uint64_t v, uint64_t n)
{
    if (n == 0) return;
    if (!h->b) {
        h->b = calloc(HIST_BUCKETS, sizeof *h->b);
        if (!h->b) return;
    }
    h->b[hist_bucket_of(v)] += n;
    if (h->n == 0 || v < h->min) h->min = v;
    if (h->n == 0 || v > h->max) h->max = v;
    h->n += n;
    sum_add_n(h, v, n);
}

void hist_add_each_n(Hist *h, const uint64_t *v, size_t k, uint64_t n)
{
    if (k == 0 || n == 0) return;
    if (!h->b) {
        h->b = calloc(HIST_BUCKETS, sizeof *h->b);
        if (!h->b) return;
    }
    /* counts, min and max do not depend on the order. The sum: when it is an integer below 2^53
     * now and stays below 2^53 with all k·n samples added, every addition hist_add_n would make is
     * exact (integers below 2^53), so the one addition of n·Σv gives the same double; otherwise the
     * values are added one by one as hist_add_n adds them. */
    const uint64_t lim = 1ULL << 53;
    int exact = h->sum >= 0 && h->sum < (double)lim && h->sum == (double)(uint64_t)h->sum;
    uint64_t room = exact ? (lim - (uint64_t)h->sum) / n : 0, s = 0; /* Σv < room ⇒ sum + n·Σv < 2^53 */
    uint64_t lo = h->n ? h->min : v[0], hi = h->n ? h->max : v[0];
    int ovf = 0;
    for (size_t i = 0; i < k; i++) {
        uint64_t x = v[i];
        h->b[hist_bucket_of(x)] += n;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        s += x;
        ovf |= s < x; /* Σv wrapped */
    }
    exact = exact && !ovf && s < room;
    h->min = lo;
    h->max = hi;
    h->n += (uint64_t)k * n;
    if (exact) {
        h->sum += (double)(s * n);
    } else {
        for (size_t i = 0; i < k; i++) sum_add_n(h, v[i], n);
    }
}

void hist_merge(Hist *dst, const Hist *src)
{
    if (!src->n) return;
    if (!dst->b) {
        dst->b = calloc(HIST_BUCKETS, sizeof *dst->b);
        if (!dst->b) return;
    }
    for (int i = 0; i < HIST_BUCKETS; i++) dst->b[i] += src->b[i];
    if (dst->n == 0 || src->min < dst->min) dst->min = src->min;
    if (dst->n == 0 || src->max > dst->max) dst->max = src->max;
    dst->n += src->n;
    dst->sum += src->sum;
}

/* Every count lies in the buckets of [min, max] and the counts sum to n (hist_add, hist_add_n,
 * hist_add_each_n and hist_merge keep both; hist_valid checks them for a histogram read from a
 * file), so the scan visits only the buckets from min's to max's: upwards from min's for a low rank,
 * downwards from max's for a high one (the same smallest bucket whose running count reaches rank). */
/* a percentile's value: the middle of bucket i, within [min, max] */
static double bucket_mid(const Hist *h, int i)
{
    uint64_t lo, hi;
    bucket_range(i, &lo, &hi);
    double mid = ((double)lo + (double)hi) / 2;
    if (mid < (double)h->min) mid = (double)h->min;
    if (mid > (double)h->max) mid = (double)h->max;
    return mid;
}

double hist_percentile(const Hist *h, double p)
{
    if (!h->n || !h->b) return NAN;
    if (p <= 0) return (double)h->min;
    if (p >= 1) return (double)h->max;
    uint64_t rank = hist_rank(h->n, p);
    int lo_b = hist_bucket_of(h->min), hi_b = hist_bucket_of(h->max), i;
    if (rank > h->n / 2) {
        /* the counts above bucket i are n − (its running count): step down while bucket i − 1's
         * running count still reaches rank */
        uint64_t above = 0, room = h->n - (rank < h->n ? rank : h->n);
        for (i = hi_b; i > lo_b && above + h->b[i] <= room; i--) above += h->b[i];
    } else {
        uint64_t seen = 0;
        for (i = lo_b; i < hi_b; i++) {
            seen += h->b[i];
            if (seen >= rank) break;
        }
    }
    return bucket_mid(h, i);
}

void hist_percentiles(const Hist *h, const double *p, int k, double *out)
{
    if (!h->n || !h->b) {
        for (int j = 0; j < k; j++) out[j] = NAN;
        return;
    }
    int lo_b = hist_bucket_of(h->min), hi_b = hist_bucket_of(h->max), i = lo_b;
    uint64_t cum = h->b[lo_b], last = 0; /* cum: the samples in buckets lo_b..i */
    for (int j = 0; j < k; j++) {
        if (p[j] <= 0 || p[j] >= 1) {
            out[j] = p[j] <= 0 ? (double)h->min : (double)h->max;
            continue;
        }
        uint64_t rank = hist_rank(h->n, p[j]);
        if (rank < last) i = lo_b, cum = h->b[lo_b]; /* a smaller rank than the one before: from the start */
        last = rank;
        while (i < hi_b && cum < rank) cum += h->b[++i];
        out[j] = bucket_mid(h, i);
    }
}

int hist_valid(const Hist *h)
{
    if (!h->b) return 1; /* no buckets (none non-zero in a file): percentiles read 0, as for an empty one */
    if (h->n == 0) {
        for (int i = 0; i < HIST_BUCKETS; i++)
            if (h->b[i]) return 0;
        return 1;
    }
    if (h->min > h->max) return 0;
    int lo_b = hist_bucket_of(h->min), hi_b = hist_bucket_of(h->max);
    uint64_t total = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        if (h->b[i] && (i < lo_b || i > hi_b)) return 0;
        if (total + h->b[i] < total) return 0; /* wraps */
        total += h->b[i];
    }
    return total == h->n && h->b[lo_b] > 0 && h->b[hi_b] > 0;
}

double hist_mean(const Hist *h) { return h->n ? h->sum / (double)h->n : NAN; }
double hist_max(const Hist *h) { return h->n ? (double)h->max : NAN; }

void hist_free(Hist *h)
{
    free(h->b);
    memset(h, 0, sizeof *h);
}
