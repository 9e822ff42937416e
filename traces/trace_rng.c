/* trace_rng.c — deterministic random numbers for the trace generators and arrival processes.
 *
 * Responsible for: xoshiro256** (seeded through splitmix64), uniform, normal, exponential,
 * lognormal and gamma samplers, the Poisson and gamma renewal processes, and ln/exp written with + - * / and exact library operations only (frexp,
 * ldexp, floor, sqrt are exact or correctly rounded under IEEE 754), so that a seed gives the same
 * bits on every machine and libm version. The build uses -std=c11, which keeps GCC from contracting
 * a*b+c into FMA, so the arithmetic below is evaluated exactly as written.
 * Not responsible for: which distribution a generator uses (gen.c).
 * Accuracy: trace_ln and trace_exp are within a few ulp of the true value over their whole domain
 * (tests/test_trace.c compares them with libm); that is far below any statistical effect.
 */
#include <math.h>

#include "traces/trace_int.h"

static uint64_t rng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void trace_rng_seed(TraceRng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix64(&x);
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0) r->s[0] = 1; /* all-zero state is a fixed point */
    r->has_spare = 0;
    r->spare = 0.0;
}

static inline uint64_t rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t trace_rng_u64(TraceRng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl(s[3], 45);
    return result;
}

double trace_rng_uniform(TraceRng *r)
{
    /* (k + 0.5) / 2^53 for a 53-bit k: never 0 or 1 */
    return ((double)(trace_rng_u64(r) >> 11) + 0.5) * 0x1.0p-53;
}

double trace_rng_normal(TraceRng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    for (;;) {
        double u = 2.0 * trace_rng_uniform(r) - 1.0;
        double v = 2.0 * trace_rng_uniform(r) - 1.0;
        double s = u * u + v * v;
        if (s >= 1.0 || s == 0.0) continue;
        double f = sqrt(-2.0 * trace_ln(s) / s);
        r->spare = v * f;
        r->has_spare = 1;
        return u * f;
    }
}

double trace_rng_exponential(TraceRng *r, double rate) { return -trace_ln(trace_rng_uniform(r)) / rate; }

double trace_rng_lognormal(TraceRng *r, double mu, double sigma)
{
    return trace_exp(mu + sigma * trace_rng_normal(r));
}

/* ln 2 split so that k·LN2_HI is exact for |k| < 2^11 (fdlibm's constants). */
static const double LN2_HI = 6.93147180369123816490e-01;
static const double LN2_LO = 1.90821492927058770002e-10;
static const double INV_LN2 = 1.44269504088896338700e+00;

double trace_ln(double x)
{
    if (x != x || x < 0.0) return NAN;
    if (x == 0.0) return -INFINITY;
    if (x == INFINITY) return INFINITY;
    int k;
    double m = frexp(x, &k); /* x = m·2^k, m in [0.5, 1) */
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        k -= 1;
    }
    /* ln m = 2·atanh(s), s = (m-1)/(m+1), |s| <= 0.1716: the odd series to s^23 is below 1e-17 */
    double s = (m - 1.0) / (m + 1.0);
    double s2 = s * s;
    double p = 1.0 / 23.0;
    for (int j = 21; j >= 1; j -= 2) p = 1.0 / j + s2 * p;
    double lnm = 2.0 * s * p;
    return (double)k * LN2_HI + (lnm + (double)k * LN2_LO);
}

double trace_exp(double x)
{
    if (x != x) return x;
    if (x > 709.78) return INFINITY;
    if (x < -745.2) return 0.0;
    double kd = floor(x * INV_LN2 + 0.5);
    int k = (int)kd;
    double r = (x - kd * LN2_HI) - kd * LN2_LO; /* |r| <= 0.35 */
    /* Taylor series to r^14/14! (< 1e-17 relative) by Horner */
    double p = 1.0;
    for (int j = 14; j >= 1; j--) p = 1.0 + p * r / (double)j;
    return ldexp(p, k);
}

int64_t trace_tokens(double x, int64_t lo, int64_t hi)
{
    if (!(x >= (double)lo)) return lo; /* also NaN */
    if (x >= (double)hi) return hi;
    int64_t v = (int64_t)floor(x + 0.5);
    return v < lo ? lo : v > hi ? hi : v;
}

int64_t trace_ns_from_s(double s, double time_scale)
{
    double ns = s * 1e9 * time_scale;
    if (!(ns >= 0.0) || ns > (double)TRACE_MAX_TIME_NS) return -1;
    return (int64_t)floor(ns + 0.5);
}

int64_t trace_scale_ns(int64_t ns, double time_scale)
{
    if (time_scale == 1.0) return ns;
    double v = (double)ns * time_scale;
    if (!(v >= 0.0) || v > (double)TRACE_MAX_TIME_NS) return -1;
    return (int64_t)floor(v + 0.5);
}

void trace_poisson_init(TracePoisson *p, uint64_t seed, double rate_per_s)
{
    trace_rng_seed(&p->rng, seed, 0x5E55);
    p->rate_per_s = rate_per_s;
    p->t_s = 0.0;
}

double trace_poisson_next_s(TracePoisson *p)
{
    p->t_s += trace_rng_exponential(&p->rng, p->rate_per_s);
    return p->t_s;
}

double trace_rng_gamma(TraceRng *r, double shape)
{
    if (shape < 1.0) {
        /* Gamma(k) = Gamma(k + 1) · U^(1/k) */
        double g = trace_rng_gamma(r, shape + 1.0);
        return g * trace_exp(trace_ln(trace_rng_uniform(r)) / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = trace_rng_normal(r), v = 1.0 + c * x;
        if (v <= 0.0) continue;
        v = v * v * v;
        double u = trace_rng_uniform(r);
        if (u < 1.0 - 0.0331 * (x * x) * (x * x)) return d * v;
        if (trace_ln(u) < 0.5 * x * x + d * (1.0 - v + trace_ln(v))) return d * v;
    }
}

void trace_gamma_init(TraceGamma *g, uint64_t seed, double rate_per_s, double shape)
{
    trace_rng_seed(&g->rng, seed, 0xA55A); /* its own stream: token counts and session arrivals unchanged */
    g->rate_per_s = rate_per_s;
    g->shape = shape > 0 ? shape : 1.0;
    g->t_s = 0.0;
}

double trace_gamma_next_s(TraceGamma *g)
{
    if (g->shape == 1.0) g->t_s += trace_rng_exponential(&g->rng, g->rate_per_s);
    else g->t_s += trace_rng_gamma(&g->rng, g->shape) / (g->rate_per_s * g->shape);
    return g->t_s;
}
