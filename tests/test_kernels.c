/* test_kernels.c — kernels/: the fp32 twins against hand-computed cases, the CPU fast paths
 * against the twins, and every CUDA kernel against its twin (skipped without a device).
 *
 * Run: make build/kvtest && KVSIM_ROOT=$PWD build/kvtest kernels_
 * Comparisons use |got - ref| <= atol + rtol·|ref| per value; each prints the worst error and the
 * first mismatches. GPU inputs are rounded to the dtype on the host first, so the twin sees
 * exactly what the kernel sees and the bounds only cover the kernel's own rounding: fp16 rtol 1e-2,
 * bf16 rtol 2e-2; quantized values must match the twin to ±1 step (rint ties may differ only if
 * the products differ) and round trips stay within scale/2.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu.h"
#include "kernels/gpu.h"
#include "tests/harness.h"
#include "kernels/ref.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static void rng_fill(float *x, size_t n, uint64_t *s, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)((rng_next(s) >> 40) * (1.0 / 16777216.0));
}

static float *fbuf(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) abort(); /* tests only: sizes are small */
    return p;
}

static float *frand(size_t n, uint64_t seed, float lo, float hi)
{
    float *p = fbuf(n);
    uint64_t s = seed;
    rng_fill(p, n, &s, lo, hi);
    return p;
}

/* Per-value bound check; prints the worst error; returns the number of values out of bounds. */
static size_t cmp_arrays(TestCtx *t, const char *what, const float *got, const float *ref, size_t n, double rtol,
                         double atol)
{
    size_t bad = 0, worst_i = 0;
    double worst = 0.0, worst_ratio = 0.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - (double)ref[i]);
        double bound = atol + rtol * fabs((double)ref[i]);
        if (!(err <= bound)) {
            if (bad < 5)
                harness_fail(t, __FILE__, __LINE__, "%s[%zu]: got %.8g, ref %.8g (|err| %.3g > bound %.3g)", what, i,
                             (double)got[i], (double)ref[i], err, bound);
            bad++;
        }
        double ratio = isnan(err) ? INFINITY : err / bound;
        if (ratio > worst_ratio || i == 0) {
            worst_ratio = ratio;
            worst = err;
            worst_i = i;
        }
    }
    printf("    %-36s %7zu values, worst |err| %.3g at [%zu] (%.2f of bound), %zu out of bounds\n", what, n, worst,
           worst_i, worst_ratio, bad);
    return bad;
}

/* ---------------------------------------------------------------- twins vs hand-computed cases */

TEST(kernels_twin_gemm_by_hand)
{
    KvErr e = {{0}};
    /* A = [[1,2],[3,4]], B (rows = outputs) = [[5,6],[7,8]]: C = A·Bᵀ = [[17,23],[39,53]]. */
    const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
    float c[4] = {0};
    CHECK(kref_gemm(a, b, c, 2, 2, 2, &e) == 0);
    CHECK(c[0] == 17 && c[1] == 23 && c[2] == 39 && c[3] == 53);
    /* 1×3 from k=2: row [1,-1] against outputs [2,1], [0,3], [-1,-1] -> [1, -3, 0]. */
    const float a2[] = {1, -1}, b2[] = {2, 1, 0, 3, -1, -1};
    float c2[3] = {9, 9, 9};
    CHECK(kref_gemm(a2, b2, c2, 1, 3, 2, &e) == 0);
    CHECK(c2[0] == 1 && c2[1] == -3 && c2[2] == 0);
    /* k = 0: an empty sum is 0. */
    CHECK(kref_gemm(a2, b2, c2, 1, 3, 0, &e) == 0);
    CHECK(c2[0] == 0 && c2[1] == 0 && c2[2] == 0);
}

/* One head, d = 2, q = [√2, 0]: score(key) = q·k/√2 = k[0]. Keys k[0] = 0, ln2, ln4 give
 * softmax weights 1/7, 2/7, 4/7; values [1,0], [0,1], [1,1] give [5/7, 6/7]. */
TEST(kernels_twin_attention_by_hand)
{
    KvErr e = {{0}};
    const float r2 = sqrtf(2.0f), l2 = logf(2.0f), l4 = logf(4.0f);
    const float k[] = {0, 0, l2, 0, l4, 0, 5, 0};
    const float v[] = {1, 0, 0, 1, 1, 1, -3, 2};
    const float q3[] = {r2, 0, r2, 0, r2, 0};
    float out[6];

    /* Prefill of 1 new token over a 2-token context: sees all three keys. */
    CHECK(kref_attn_prefill(q3, k, v, out, 1, 2, 1, 1, 2, &e) == 0);
    CHECK_NEAR(out[0], 5.0 / 7.0, 1e-6, 1e-6);
    CHECK_NEAR(out[1], 6.0 / 7.0, 1e-6, 1e-6);

    /* Prefill of 3 new tokens, no context: causal. Token 0 sees key 0 only, token 1 keys 0-1
     * (weights 1/3, 2/3), token 2 all three. */
    CHECK(kref_attn_prefill(q3, k, v, out, 3, 0, 1, 1, 2, &e) == 0);
    CHECK_NEAR(out[0], 1.0, 1e-6, 1e-6);
    CHECK_NEAR(out[1], 0.0, 1e-6, 1e-6);
    CHECK_NEAR(out[2], 1.0 / 3.0, 1e-6, 1e-6);
    CHECK_NEAR(out[3], 2.0 / 3.0, 1e-6, 1e-6);
    CHECK_NEAR(out[4], 5.0 / 7.0, 1e-6, 1e-6);
    CHECK_NEAR(out[5], 6.0 / 7.0, 1e-6, 1e-6);

    /* Decode: sequence 0 owns keys 0..2, sequence 1 is empty (zeros), sequence 2 owns key 3. */
    const int off[] = {0, 3, 3, 4};
    for (int i = 0; i < 6; i++) out[i] = 42.0f;
    CHECK(kref_attn_decode(q3, k, v, out, 3, off, 1, 1, 2, &e) == 0);
    CHECK_NEAR(out[0], 5.0 / 7.0, 1e-6, 1e-6);
    CHECK_NEAR(out[1], 6.0 / 7.0, 1e-6, 1e-6);
    CHECK(out[2] == 0.0f && out[3] == 0.0f);
    CHECK_NEAR(out[4], -3.0, 1e-6, 1e-6);
    CHECK_NEAR(out[5], 2.0, 1e-6, 1e-6);
}

/* GQA: 2 query heads sharing 1 KV head must equal two MHA runs against the same keys. */
TEST(kernels_twin_attention_gqa_shares_kv_head)
{
    KvErr e = {{0}};
    const int n_new = 3, n_ctx = 4, d = 8, nk = n_ctx + n_new;
    float *q = frand((size_t)n_new * 2 * d, 11, -1, 1), *k = frand((size_t)nk * d, 12, -1, 1);
    float *v = frand((size_t)nk * d, 13, -1, 1), *out = fbuf((size_t)n_new * 2 * d);
    float *q1 = fbuf((size_t)n_new * d), *o1 = fbuf((size_t)n_new * d);
    CHECK(kref_attn_prefill(q, k, v, out, n_new, n_ctx, 2, 1, d, &e) == 0);
    for (int head = 0; head < 2; head++) {
        for (int i = 0; i < n_new; i++) memcpy(q1 + i * d, q + ((size_t)i * 2 + head) * d, d * sizeof *q);
        CHECK(kref_attn_prefill(q1, k, v, o1, n_new, n_ctx, 1, 1, d, &e) == 0);
        for (int i = 0; i < n_new; i++)
            for (int c = 0; c < d; c++) CHECK(o1[i * d + c] == out[((size_t)i * 2 + head) * d + c]);
    }
    free(q), free(k), free(v), free(out), free(q1), free(o1);
}

TEST(kernels_twin_rope_known_vector)
{
    KvErr e = {{0}};
    /* d = 4, theta = 10000: pair (0,2) turns by pos·1, pair (1,3) by pos·10000^(-1/2) = pos·0.01. */
    float x[4] = {1, 2, 3, 4};
    CHECK(kref_rope(x, 1, 1, 4, 1, 10000.0f, &e) == 0);
    CHECK_NEAR(x[0], 1 * cos(1.0) - 3 * sin(1.0), 1e-5, 1e-6);
    CHECK_NEAR(x[2], 3 * cos(1.0) + 1 * sin(1.0), 1e-5, 1e-6);
    CHECK_NEAR(x[1], 2 * cos(0.01) - 4 * sin(0.01), 1e-5, 1e-6);
    CHECK_NEAR(x[3], 4 * cos(0.01) + 2 * sin(0.01), 1e-5, 1e-6);
    /* Position 0 is the identity; token t of a call with pos0 = p is at position p + t. */
    float y[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    CHECK(kref_rope(y, 2, 1, 4, 0, 10000.0f, &e) == 0);
    CHECK(y[0] == 1 && y[1] == 2 && y[2] == 3 && y[3] == 4);
    for (int i = 0; i < 4; i++) CHECK_NEAR(y[4 + i], x[i], 1e-6, 1e-7);
    /* Rotations keep each pair's norm. */
    float *z = frand(3 * 2 * 16, 5, -1, 1), *z0 = fbuf(3 * 2 * 16);
    memcpy(z0, z, 3 * 2 * 16 * sizeof *z);
    CHECK(kref_rope(z, 3, 2, 16, 77, 500000.0f, &e) == 0);
    for (int r = 0; r < 6; r++)
        for (int i = 0; i < 8; i++) {
            const float *a = z + r * 16, *b = z0 + r * 16;
            CHECK_NEAR(a[i] * a[i] + a[i + 8] * a[i + 8], b[i] * b[i] + b[i + 8] * b[i + 8], 1e-5, 1e-6);
        }
    free(z), free(z0);
}

TEST(kernels_twin_norms_and_activations_by_hand)
{
    KvErr e = {{0}};
    /* RMSNorm [3,4]: mean square 12.5, rms 3.5355339; w = [1,2]. */
    const float x[] = {3, 4}, w[] = {1, 2};
    float y[3];
    CHECK(kref_rmsnorm(x, w, y, 1, 2, 0.0f, &e) == 0);
    CHECK_NEAR(y[0], 3 / sqrt(12.5), 1e-6, 1e-7);
    CHECK_NEAR(y[1], 8 / sqrt(12.5), 1e-6, 1e-7);
    /* LayerNorm [1,2,3]: mean 2, variance 2/3; b = [0,0,1]. */
    const float x3[] = {1, 2, 3}, w3[] = {1, 1, 1}, b3[] = {0, 0, 1};
    CHECK(kref_layernorm(x3, w3, b3, y, 1, 3, 0.0f, &e) == 0);
    CHECK_NEAR(y[0], -1 / sqrt(2.0 / 3.0), 1e-6, 1e-7);
    CHECK_NEAR(y[1], 0.0, 1e-6, 1e-7);
    CHECK_NEAR(y[2], 1 + 1 / sqrt(2.0 / 3.0), 1e-6, 1e-7);
    /* SiLU(1) = 1/(1+e^-1) = 0.7310586; GELU-tanh(1) = 0.8411920; SiLU(0) = 0. */
    CHECK_NEAR(kref_silu(1.0f), 0.7310585786, 1e-6, 1e-7);
    CHECK(kref_silu(0.0f) == 0.0f);
    CHECK_NEAR(kref_gelu_tanh(1.0f), 0.8411919906, 1e-6, 1e-7);
    CHECK_NEAR(kref_gelu_tanh(-3.0f), -0.0036373920, 1e-4, 1e-7);
    /* Gated: row [gate 1, gate -2 | up 2, up 3] -> [SiLU(1)·2, SiLU(-2)·3]. */
    const float gu[] = {1, -2, 2, 3};
    float o[2];
    CHECK(kref_gated_act(KACT_SILU, gu, o, 1, 2, &e) == 0);
    CHECK_NEAR(o[0], 2 * 0.7310585786, 1e-6, 1e-7);
    CHECK_NEAR(o[1], 3 * (-2 / (1 + exp(2.0))), 1e-6, 1e-7);
    CHECK(kref_gated_act(KACT_GELU_TANH, gu, o, 1, 2, &e) == 0);
    CHECK_NEAR(o[0], 2 * 0.8411919906, 1e-6, 1e-7);
}

TEST(kernels_twin_quant_by_hand_and_round_trip)
{
    KvErr e = {{0}};
    /* int8, amax 1: scale 1/127; -0.5·127 = -63.5 rounds half to even -> -64; 0.25·127 = 31.75 -> 32. */
    const float x[] = {1, -0.5f, 0.25f, 0, 0, 0, 0, 0};
    int8_t q[8];
    float sc[2];
    CHECK(kref_quant_i8(x, q, sc, 2, 4, &e) == 0);
    CHECK_NEAR(sc[0], 1.0 / 127.0, 1e-7, 0);
    CHECK_EQ_I(q[0], 127);
    CHECK_EQ_I(q[1], -64);
    CHECK_EQ_I(q[2], 32);
    CHECK_EQ_I(q[3], 0);
    CHECK(sc[1] == 0.0f); /* an all-zero row */
    for (int i = 4; i < 8; i++) CHECK_EQ_I(q[i], 0);
    float back[8];
    CHECK(kref_dequant_i8(q, sc, back, 2, 4, &e) == 0);
    CHECK_NEAR(back[1], -64.0 / 127.0, 1e-6, 0);
    CHECK(back[5] == 0.0f);

    /* int4, amax 1: scale 1/7; 0.5·7 = 3.5 -> 4 (even), -1 -> -7, -0.75·7 = -5.25 -> -5, 0.25·7 = 1.75 -> 2.
     * Bytes: low nibble first: (4, -7) -> 0x94, (-5, 2) -> 0x2B. */
    const float x4[] = {0.5f, -1.0f, -0.75f, 0.25f};
    uint8_t q4[2];
    float s4;
    CHECK(kref_quant_i4(x4, q4, &s4, 1, 4, &e) == 0);
    CHECK_NEAR(s4, 1.0 / 7.0, 1e-7, 0);
    CHECK_EQ_U(q4[0], 0x94);
    CHECK_EQ_U(q4[1], 0x2B);
    float b4[4];
    CHECK(kref_dequant_i4(q4, &s4, b4, 1, 4, &e) == 0);
    CHECK_NEAR(b4[0], 4.0 / 7.0, 1e-6, 0);
    CHECK_NEAR(b4[1], -1.0, 1e-6, 0);
    CHECK_NEAR(b4[2], -5.0 / 7.0, 1e-6, 0);
    CHECK_NEAR(b4[3], 2.0 / 7.0, 1e-6, 0);

    /* Random round trips stay within half a step of the row's scale. */
    const int rows = 16, group = 64;
    float *xr = frand((size_t)rows * group, 21, -3, 3), *dq = fbuf((size_t)rows * group), scale[16];
    int8_t *qq = malloc((size_t)rows * group);
    uint8_t *qq4 = malloc((size_t)rows * group / 2);
    CHECK(kref_quant_i8(xr, qq, scale, rows, group, &e) == 0);
    CHECK(kref_dequant_i8(qq, scale, dq, rows, group, &e) == 0);
    size_t bad = 0;
    for (int i = 0; i < rows * group; i++)
        if (fabsf(xr[i] - dq[i]) > scale[i / group] * 0.5f * (1 + 1e-5f)) bad++;
    CHECK_EQ_U(bad, 0);
    CHECK(kref_quant_i4(xr, qq4, scale, rows, group, &e) == 0);
    CHECK(kref_dequant_i4(qq4, scale, dq, rows, group, &e) == 0);
    for (int i = 0; i < rows * group; i++)
        if (fabsf(xr[i] - dq[i]) > scale[i / group] * 0.5f * (1 + 1e-5f)) bad++;
    CHECK_EQ_U(bad, 0);
    free(xr), free(dq), free(qq), free(qq4);
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

TEST(kernels_half_conversions_round_to_nearest_even)
{
    CHECK_EQ_U(kref_f32_to_f16(1.0f), 0x3c00);
    CHECK_EQ_U(kref_f32_to_f16(-2.0f), 0xc000);
    CHECK_EQ_U(kref_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_U(kref_f32_to_f16(65519.0f), 0x7bff);
    CHECK_EQ_U(kref_f32_to_f16(65520.0f), 0x7c00);  /* ties to even -> overflow to inf */
    CHECK_EQ_U(kref_f32_to_f16(-1e10f), 0xfc00);
    CHECK_EQ_U(kref_f32_to_f16(ldexpf(1, -24)), 0x0001); /* smallest subnormal */
    CHECK_EQ_U(kref_f32_to_f16(ldexpf(1, -25)), 0x0000); /* tie -> even (0) */
    CHECK_EQ_U(kref_f32_to_f16(ldexpf(3, -25)), 0x0002); /* 1.5 ulp tie -> 2 */
    CHECK_EQ_U(kref_f32_to_f16(ldexpf(1, -14)), 0x0400); /* smallest normal */
    CHECK_EQ_U(kref_f32_to_f16(ldexpf(1023, -24) + ldexpf(1, -25)), 0x0400); /* subnormal rounding up into normal */
    CHECK_EQ_U(kref_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00);      /* tie, even stays */
    CHECK_EQ_U(kref_f32_to_f16(1.0f + ldexpf(3, -11)), 0x3c02);      /* tie, odd rounds up */
    CHECK_EQ_U(kref_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3c01); /* above the tie */
    CHECK(isnan(kref_f16_to_f32(kref_f32_to_f16(NAN))));
    CHECK(isinf(kref_f16_to_f32(0x7c00)) && kref_f16_to_f32(0xfc00) < 0);
    CHECK(kref_f16_to_f32(0x0001) == ldexpf(1, -24));
    CHECK(kref_f16_to_f32(0x3555) == 0.333251953125f);

    CHECK_EQ_U(kref_f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_U(kref_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);  /* tie, even stays */
    CHECK_EQ_U(kref_f32_to_bf16(1.0f + ldexpf(3, -8)), 0x3f82);  /* tie, odd rounds up */
    CHECK_EQ_U(kref_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to inf */
    CHECK(isnan(kref_bf16_to_f32(kref_f32_to_bf16(NAN))));
    CHECK(kref_bf16_to_f32(0xc040) == -3.0f);

    /* Every finite 16-bit pattern survives a round trip through fp32. */
    size_t bad16 = 0, badbf = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        uint16_t h = (uint16_t)u;
        if ((h & 0x7c00u) != 0x7c00u && kref_f32_to_f16(kref_f16_to_f32(h)) != h) bad16++;
        if ((h & 0x7f80u) != 0x7f80u && kref_f32_to_bf16(kref_bf16_to_f32(h)) != h) badbf++;
    }
    CHECK_EQ_U(bad16, 0);
    CHECK_EQ_U(badbf, 0);
    /* Rounding is monotone and within half an ulp on random values (fp16 normal range). */
    uint64_t s = 99;
    size_t far = 0;
    for (int i = 0; i < 20000; i++) {
        float f;
        rng_fill(&f, 1, &s, -1000, 1000);
        float r = kref_f16_to_f32(kref_f32_to_f16(f));
        float ulp = ldexpf(1, (int)floorf(log2f(fabsf(f))) - 10);
        if (fabsf(f) >= ldexpf(1, -14) && fabsf(r - f) > ulp * 0.5f) far++;
    }
    CHECK_EQ_U(far, 0);
    float arr[3] = {1.0f, 1.0f + ldexpf(3, -11), -0.1f};
    uint16_t hb[3];
    kref_f32_to_half_n(arr, hb, 3, 0);
    CHECK(hb[0] == 0x3c00 && hb[1] == 0x3c02);
    kref_round_half_n(arr, 3, 1);
    CHECK(arr[0] == 1.0f && arr[2] == kref_bf16_to_f32(kref_f32_to_bf16(-0.1f)));
}

TEST(kernels_shape_errors_name_the_parameter)
{
    KvErr e = {{0}};
    float buf[64] = {0}, sentinel[8];
    for (int i = 0; i < 8; i++) sentinel[i] = 7.0f;
    CHECK(kref_gemm(buf, buf, sentinel, -1, 2, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "m=-1");
    CHECK(sentinel[0] == 7.0f);
    CHECK(kcpu_gemm(buf, buf, sentinel, 2, -3, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "n=-3");
    CHECK(kref_attn_prefill(buf, buf, buf, sentinel, 1, 0, 6, 4, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "h=6 query heads not a multiple of h_kv=4");
    CHECK(sentinel[0] == 7.0f);
    CHECK(kcpu_attn_prefill(buf, buf, buf, sentinel, 1, 0, 2, 0, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "h_kv=0");
    CHECK(kref_attn_prefill(buf, buf, buf, sentinel, 1, 0, 2, 2, 0, &e) == -1);
    CHECK_CONTAINS(e.msg, "head dim d=0");
    CHECK(kref_attn_prefill(buf, buf, buf, sentinel, 1, -2, 2, 2, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "n_ctx=-2");
    CHECK(kcpu_attn_prefill(buf, buf, buf, sentinel, -1, 0, 2, 2, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "-1 query rows");
    const int bad_off[] = {0, 5, 3};
    CHECK(kref_attn_decode(buf, buf, buf, sentinel, 2, bad_off, 1, 1, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "ctx_off[2]=3 < ctx_off[1]=5");
    CHECK(kcpu_attn_decode(buf, buf, buf, sentinel, 2, bad_off, 1, 1, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "non-decreasing");
    CHECK(kref_attn_decode(buf, buf, buf, sentinel, 1, NULL, 1, 1, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "ctx_off is NULL");
    const int neg_off[] = {-1, 2};
    CHECK(kcpu_attn_decode(buf, buf, buf, sentinel, 1, neg_off, 1, 1, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "ctx_off[0]=-1");
    CHECK(sentinel[0] == 7.0f);
    CHECK(kref_rope(sentinel, 1, 1, 3, 0, 10000.0f, &e) == -1);
    CHECK_CONTAINS(e.msg, "d=3");
    CHECK(kcpu_rope(sentinel, 1, 1, 4, 0, 0.0f, &e) == -1);
    CHECK_CONTAINS(e.msg, "theta=0");
    CHECK(kref_rope(sentinel, -1, 1, 4, 0, 1.0f, &e) == -1);
    CHECK_CONTAINS(e.msg, "n_tokens=-1");
    CHECK(sentinel[0] == 7.0f);
    int8_t q8[8];
    uint8_t q4[8];
    CHECK(kref_quant_i4(buf, q4, sentinel, 1, 5, &e) == -1);
    CHECK_CONTAINS(e.msg, "group=5");
    CHECK(kcpu_dequant_i4(q4, buf, sentinel, 1, 3, &e) == -1);
    CHECK_CONTAINS(e.msg, "even group");
    CHECK(kref_quant_i8(buf, q8, sentinel, 1, 0, &e) == -1);
    CHECK_CONTAINS(e.msg, "group=0");
    CHECK(kcpu_dequant_i8(q8, buf, sentinel, -2, 4, &e) == -1);
    CHECK_CONTAINS(e.msg, "rows=-2");
    CHECK(kcpu_quant_i8(buf, q8, sentinel, 1, -1, &e) == -1);
    CHECK(kcpu_quant_i4(buf, q4, sentinel, 1, 1, &e) == -1);
    CHECK(kref_dequant_i4(q4, buf, sentinel, 1, 1, &e) == -1);
    CHECK(kref_dequant_i8(q8, buf, sentinel, 1, 0, &e) == -1);
    CHECK(sentinel[0] == 7.0f);
    CHECK(kref_rmsnorm(buf, buf, sentinel, 1, 0, 1e-5f, &e) == -1);
    CHECK_CONTAINS(e.msg, "rmsnorm: rows=1 dim=0");
    CHECK(kcpu_layernorm(buf, buf, buf, sentinel, -1, 4, 1e-5f, &e) == -1);
    CHECK_CONTAINS(e.msg, "layernorm");
    CHECK(kcpu_rmsnorm(buf, buf, sentinel, -1, 4, 1e-5f, &e) == -1);
    CHECK(kcpu_gated_act(KACT_SILU, buf, sentinel, 1, 0, &e) == -1);
    CHECK_CONTAINS(e.msg, "gated activation");
    CHECK(kref_gated_act((KActKind)7, buf, sentinel, 1, 2, &e) == -1);
    CHECK_CONTAINS(e.msg, "kind 7");
    CHECK(sentinel[0] == 7.0f);
}

/* ---------------------------------------------------------------- CPU fast paths vs twins */

TEST(kernels_cpu_gemm_matches_twin)
{
    KvErr e = {{0}};
    const int shapes[][3] = {{37, 29, 67}, {1, 128, 256}, {64, 3, 5}};
    for (size_t i = 0; i < KV_ARRAY_LEN(shapes); i++) {
        int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        float *a = frand((size_t)m * k, 100 + i, -1, 1), *b = frand((size_t)n * k, 200 + i, -1, 1);
        float *c = fbuf((size_t)m * n), *r = fbuf((size_t)m * n);
        CHECK(kref_gemm(a, b, r, m, n, k, &e) == 0);
        CHECK(kcpu_gemm(a, b, c, m, n, k, &e) == 0);
        char what[64];
        snprintf(what, sizeof what, "cpu gemm %dx%dx%d (%s)", m, n, k, kcpu_gemm_backend());
        CHECK_EQ_U(cmp_arrays(t, what, c, r, (size_t)m * n, 1e-4, 1e-5), 0);
        free(a), free(b), free(c), free(r);
    }
#ifdef KV_HAVE_BLAS
    /* The build found OpenBLAS: cblas_sgemm must come from it, not from another CBLAS. */
    CHECK_STR(kcpu_gemm_backend(), "openblas");
#else
    CHECK_STR(kcpu_gemm_backend(), "c");
#endif
    float a[4] = {1, 2, 3, 4}, c[4] = {9, 9, 9, 9};
    CHECK(kcpu_gemm(a, a, c, 2, 2, 0, &e) == 0); /* k = 0 clears C */
    CHECK(c[0] == 0 && c[3] == 0);
    CHECK(kcpu_gemm(a, a, c, 0, 2, 2, &e) == 0);
}

typedef struct {
    int n_new, n_ctx, h, h_kv, d, threads;
} PrefillCase;

TEST(kernels_cpu_attn_prefill_matches_twin)
{
    KvErr e = {{0}};
    const PrefillCase cases[] = {
        {1, 0, 1, 1, 4, 1},       /* one token, nothing before it */
        {37, 100, 8, 2, 64, 3},   /* GQA, context + causal block straddling 16-row blocks */
        {20, 0, 4, 4, 80, 0},     /* MHA, pure causal, d not a power of two */
        {5, 70, 4, 1, 32, 2},     /* MQA */
        {0, 10, 2, 2, 8, 2},      /* nothing to do */
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        const PrefillCase *pc = &cases[i];
        size_t nq = (size_t)pc->n_new * pc->h * pc->d, nk = (size_t)(pc->n_ctx + pc->n_new) * pc->h_kv * pc->d;
        float *q = frand(nq, 300 + i, -1, 1), *k = frand(nk, 400 + i, -1, 1), *v = frand(nk, 500 + i, -1, 1);
        float *o = fbuf(nq), *r = fbuf(nq);
        kcpu_set_threads(pc->threads);
        CHECK(kref_attn_prefill(q, k, v, r, pc->n_new, pc->n_ctx, pc->h, pc->h_kv, pc->d, &e) == 0);
        CHECK(kcpu_attn_prefill(q, k, v, o, pc->n_new, pc->n_ctx, pc->h, pc->h_kv, pc->d, &e) == 0);
        char what[96];
        snprintf(what, sizeof what, "cpu prefill new=%d ctx=%d h=%d/%d d=%d", pc->n_new, pc->n_ctx, pc->h, pc->h_kv,
                 pc->d);
        CHECK_EQ_U(cmp_arrays(t, what, o, r, nq, 1e-4, 1e-5), 0);
        free(q), free(k), free(v), free(o), free(r);
    }
    kcpu_set_threads(0);
    CHECK(kcpu_threads() >= 1);
    kcpu_set_threads(3);
    CHECK_EQ_I(kcpu_threads(), 3);
    kcpu_set_threads(0);
}

TEST(kernels_cpu_attn_decode_matches_twin)
{
    KvErr e = {{0}};
    const int lens[] = {1, 0, 70, 129, 3};
    const int batch = (int)KV_ARRAY_LEN(lens);
    int off[KV_ARRAY_LEN(lens) + 1];
    off[0] = 0;
    for (int b = 0; b < batch; b++) off[b + 1] = off[b] + lens[b];
    const int shapes[][3] = {{8, 2, 128}, {32, 1, 64}, {4, 4, 16}}; /* h, h_kv, d; 32/1: two 16-head chunks */
    for (size_t i = 0; i < KV_ARRAY_LEN(shapes); i++) {
        int h = shapes[i][0], h_kv = shapes[i][1], d = shapes[i][2];
        size_t nq = (size_t)batch * h * d, nk = (size_t)off[batch] * h_kv * d;
        float *q = frand(nq, 600 + i, -1, 1), *k = frand(nk, 700 + i, -1, 1), *v = frand(nk, 800 + i, -1, 1);
        float *o = fbuf(nq), *r = fbuf(nq);
        kcpu_set_threads((int)i + 1);
        CHECK(kref_attn_decode(q, k, v, r, batch, off, h, h_kv, d, &e) == 0);
        CHECK(kcpu_attn_decode(q, k, v, o, batch, off, h, h_kv, d, &e) == 0);
        char what[96];
        snprintf(what, sizeof what, "cpu decode b=%d h=%d/%d d=%d", batch, h, h_kv, d);
        CHECK_EQ_U(cmp_arrays(t, what, o, r, nq, 1e-4, 1e-5), 0);
        for (int c = 0; c < h * d; c++) CHECK(o[(size_t)1 * h * d + c] == 0.0f); /* the empty sequence */
        free(q), free(k), free(v), free(o), free(r);
    }
    kcpu_set_threads(0);
}

TEST(kernels_cpu_memory_bound_ops_equal_twins)
{
    KvErr e = {{0}};
    const int rows = 5, dim = 48;
    float *x = frand((size_t)rows * dim * 2, 900, -2, 2), *w = frand(dim, 901, 0.5f, 1.5f), *b = frand(dim, 902, -1, 1);
    float *y1 = fbuf((size_t)rows * dim * 2), *y2 = fbuf((size_t)rows * dim * 2);
    CHECK(kref_rmsnorm(x, w, y1, rows, dim, 1e-6f, &e) == 0 && kcpu_rmsnorm(x, w, y2, rows, dim, 1e-6f, &e) == 0);
    CHECK(memcmp(y1, y2, (size_t)rows * dim * sizeof *y1) == 0);
    CHECK(kref_layernorm(x, w, b, y1, rows, dim, 1e-5f, &e) == 0 &&
          kcpu_layernorm(x, w, b, y2, rows, dim, 1e-5f, &e) == 0);
    CHECK(memcmp(y1, y2, (size_t)rows * dim * sizeof *y1) == 0);
    CHECK(kref_gated_act(KACT_GELU_TANH, x, y1, rows, dim, &e) == 0 &&
          kcpu_gated_act(KACT_GELU_TANH, x, y2, rows, dim, &e) == 0);
    CHECK(memcmp(y1, y2, (size_t)rows * dim * sizeof *y1) == 0);
    memcpy(y1, x, (size_t)rows * dim * sizeof *x);
    memcpy(y2, x, (size_t)rows * dim * sizeof *x);
    CHECK(kref_rope(y1, rows, 2, dim / 2, 3, 10000.0f, &e) == 0 && kcpu_rope(y2, rows, 2, dim / 2, 3, 10000.0f, &e) == 0);
    CHECK(memcmp(y1, y2, (size_t)rows * dim * sizeof *y1) == 0);
    int8_t q8[5 * 48];
    uint8_t q4[5 * 24];
    float s1[5], s2[5];
    CHECK(kcpu_quant_i8(x, q8, s1, rows, dim, &e) == 0 && kcpu_dequant_i8(q8, s1, y2, rows, dim, &e) == 0);
    CHECK(kref_quant_i8(x, q8, s2, rows, dim, &e) == 0 && kref_dequant_i8(q8, s2, y1, rows, dim, &e) == 0);
    CHECK(memcmp(y1, y2, (size_t)rows * dim * sizeof *y1) == 0);
    CHECK(kcpu_quant_i4(x, q4, s1, rows, dim, &e) == 0 && kcpu_dequant_i4(q4, s1, y2, rows, dim, &e) == 0);
    CHECK(kref_quant_i4(x, q4, s2, rows, dim, &e) == 0 && kref_dequant_i4(q4, s2, y1, rows, dim, &e) == 0);
    CHECK(memcmp(y1, y2, (size_t)rows * dim * sizeof *y1) == 0);
    free(x), free(w), free(b), free(y1), free(y2);
}

/* ---------------------------------------------------------------- GPU */

TEST(kernels_gpu_unavailable_is_reported_cleanly)
{
    KvErr e = {{0}};
    int n = kgpu_device_count(&e);
    if (n > 0) {
        KgpuCtx *bad = kgpu_ctx_create(n, &e); /* one past the last device */
        CHECK(bad == NULL);
        CHECK_CONTAINS(e.msg, "device");
        return;
    }
#ifdef KV_HAVE_CUDA
    CHECK_EQ_I(n, 0);
    CHECK_CONTAINS(e.msg, "no CUDA device: ");
    e.msg[0] = '\0';
    CHECK(kgpu_ctx_create(0, &e) == NULL);
    CHECK_CONTAINS(e.msg, "no CUDA device");
    /* Without a context, calls fail with a message, never a crash; shapes are checked first. */
    CHECK(kgpu_sync(NULL, &e) == -1);
    CHECK_CONTAINS(e.msg, "kgpu_sync: NULL context");
    CHECK(kgpu_attn_prefill(NULL, KGPU_F16, NULL, NULL, NULL, NULL, 4, 0, 3, 2, 64, &e) == -1);
    CHECK_CONTAINS(e.msg, "not a multiple");
    CHECK(kgpu_attn_prefill(NULL, KGPU_F16, NULL, NULL, NULL, NULL, 4, 0, 4, 2, 64, &e) == -1);
    CHECK_CONTAINS(e.msg, "NULL context");
    CHECK(kgpu_gemm(NULL, KGPU_BF16, 2, 2, 2, NULL, NULL, NULL, &e) == -1);
    CHECK_CONTAINS(e.msg, "kgpu_gemm: NULL context");
    CHECK(kgpu_rope(NULL, KGPU_F16, NULL, 1, 1, 5, 0, 1e4f, &e) == -1);
    CHECK_CONTAINS(e.msg, "d=5");
    CHECK(kgpu_quant_i4(NULL, KGPU_F16, NULL, NULL, NULL, 1, 3, &e) == -1);
    CHECK_CONTAINS(e.msg, "even group");
    float ms = 0;
    CHECK(kgpu_timer_stop(NULL, &ms, &e) == -1);
    CHECK_CONTAINS(e.msg, "NULL context");
#else
    CHECK_EQ_I(n, -1);
    CHECK_CONTAINS(e.msg, "built without CUDA");
    CHECK(kgpu_ctx_create(0, &e) == NULL);
    CHECK_CONTAINS(e.msg, "kgpu_ctx_create: built without CUDA");
    CHECK(kgpu_gemm(NULL, KGPU_F16, 2, 2, 2, NULL, NULL, NULL, &e) == -1);
    CHECK_CONTAINS(e.msg, "built without CUDA");
    CHECK(kgpu_device_info(NULL, 0, NULL, 0, NULL, 0, &e) == -1);
#endif
    CHECK_STR(kgpu_dtype_name(KGPU_BF16), "bf16");
    CHECK_STR(kgpu_dtype_name(KGPU_F16), "fp16");
    CHECK(kgpu_dtype_name((KgpuDtype)9) == NULL);
    kgpu_ctx_destroy(NULL);
}

/* A context on device 0, or SKIP when there is no device / no CUDA build. */
#define GPU_SETUP(ctx)                                                            \
    KvErr e = {{0}};                                                              \
    int ndev_ = kgpu_device_count(&e);                                            \
    if (ndev_ == 0) SKIP("%s", e.msg);                                            \
    if (ndev_ < 0) SKIP("no CUDA device: %s", e.msg);                             \
    KgpuCtx *ctx = kgpu_ctx_create(0, &e);                                        \
    if (!ctx) {                                                                   \
        CHECK_MSG(0, "kgpu_ctx_create: %s", e.msg);                               \
        return;                                                                   \
    }

/* Tolerances per dtype (the kernel's fp32 math plus one rounding of the output). */
static double dt_rtol(KgpuDtype dt) { return dt == KGPU_BF16 ? 2e-2 : 1e-2; }
static double dt_atol(KgpuDtype dt) { return dt == KGPU_BF16 ? 1e-2 : 2e-3; }

/* Device copy of host floats in dtype dt (NULL + failed check on error). */
static void *dev_upload(TestCtx *t, KgpuCtx *ctx, KgpuDtype dt, const float *h, size_t n)
{
    KvErr e = {{0}};
    void *d = NULL;
    if (kgpu_malloc(ctx, n * 2, &d, &e) != 0 || kgpu_upload_f32(ctx, dt, d, h, n, &e) != 0) {
        harness_fail(t, __FILE__, __LINE__, "upload of %zu values: %s", n, e.msg);
        kgpu_free(ctx, d, &e);
        return NULL;
    }
    return d;
}

static void *dev_raw(TestCtx *t, KgpuCtx *ctx, const void *h, size_t bytes)
{
    KvErr e = {{0}};
    void *d = NULL;
    if (kgpu_malloc(ctx, bytes, &d, &e) != 0 || (h && kgpu_copy_h2d(ctx, d, h, bytes, &e) != 0) ||
        kgpu_sync(ctx, &e) != 0) {
        harness_fail(t, __FILE__, __LINE__, "device buffer of %zu bytes: %s", bytes, e.msg);
        kgpu_free(ctx, d, &e);
        return NULL;
    }
    return d;
}

/* Random values already rounded to dt (what the kernel will see). */
static float *frand_dt(size_t n, uint64_t seed, float lo, float hi, KgpuDtype dt)
{
    float *p = frand(n, seed, lo, hi);
    kref_round_half_n(p, n, dt == KGPU_BF16);
    return p;
}

static const KgpuDtype k_dtypes[] = {KGPU_F16, KGPU_BF16};

TEST(kernels_gpu_device_info_copies_and_timer)
{
    GPU_SETUP(ctx);
    char name[128] = "", drv[32] = "", rt[32] = "";
    CHECK(kgpu_device_info(name, sizeof name, drv, sizeof drv, rt, sizeof rt, &e) == 0);
    CHECK(name[0] != '\0');
    CHECK(strchr(drv, '.') != NULL && strchr(rt, '.') != NULL);
    printf("    device: %s, driver CUDA %s, runtime %s, %d SMs\n", name, drv, rt, kgpu_sm_count(ctx));
    CHECK(kgpu_sm_count(ctx) > 0);

    const size_t bytes = (size_t)1 << 20;
    for (int pinned = 0; pinned <= 1; pinned++) {
        void *src = NULL, *dst = NULL, *d1 = NULL, *d2 = NULL;
        CHECK(kgpu_host_alloc(bytes, pinned, &src, &e) == 0);
        CHECK(kgpu_host_alloc(bytes, pinned, &dst, &e) == 0);
        CHECK(kgpu_malloc(ctx, bytes, &d1, &e) == 0);
        CHECK(kgpu_malloc(ctx, bytes, &d2, &e) == 0);
        if (!src || !dst || !d1 || !d2) {
            CHECK_MSG(0, "allocation failed: %s", e.msg);
            break;
        }
        for (size_t i = 0; i < bytes; i++) ((unsigned char *)src)[i] = (unsigned char)(i * 131 + pinned);
        memset(dst, 0, bytes);
        float ms = -1;
        CHECK(kgpu_timer_start(ctx, &e) == 0);
        CHECK(kgpu_copy_h2d(ctx, d1, src, bytes, &e) == 0);
        CHECK(kgpu_copy_d2d(ctx, d2, d1, bytes, &e) == 0);
        CHECK(kgpu_copy_d2h(ctx, dst, d2, bytes, &e) == 0);
        CHECK(kgpu_timer_stop(ctx, &ms, &e) == 0);
        CHECK(kgpu_sync(ctx, &e) == 0);
        CHECK(memcmp(src, dst, bytes) == 0);
        CHECK(ms > 0.0f && isfinite(ms)); /* (measured: no upper bound a busy device keeps) */
        printf("    1 MiB h2d+d2d+d2h (%s): %.3f ms\n", pinned ? "pinned" : "pageable", (double)ms);
        CHECK(kgpu_memset0(ctx, d2, bytes, &e) == 0);
        CHECK(kgpu_copy_d2h(ctx, dst, d2, bytes, &e) == 0 && kgpu_sync(ctx, &e) == 0);
        CHECK(((unsigned char *)dst)[12345] == 0);
        kgpu_free(ctx, d1, &e);
        kgpu_free(ctx, d2, &e);
        kgpu_host_free(src, pinned);
        kgpu_host_free(dst, pinned);
    }
    float ms;
    CHECK(kgpu_timer_stop(ctx, &ms, &e) == -1); /* not started */
    CHECK_CONTAINS(e.msg, "kgpu_timer_start was not called");
    CHECK(kgpu_attn_prefill(ctx, KGPU_F16, NULL, NULL, NULL, NULL, 1, 0, 1, 1, 300, &e) == -1);
    CHECK_CONTAINS(e.msg, "d=300");
    CHECK(kgpu_gemm(ctx, (KgpuDtype)5, 1, 1, 1, NULL, NULL, NULL, &e) == -1);
    CHECK_CONTAINS(e.msg, "dtype 5");
    kgpu_ctx_destroy(ctx);
}

TEST(kernels_gpu_gemm_matches_twin)
{
    GPU_SETUP(ctx);
    const int shapes[][3] = {{33, 70, 96}, {1, 256, 128}, {128, 64, 7}};
    for (size_t di = 0; di < KV_ARRAY_LEN(k_dtypes); di++)
        for (size_t i = 0; i < KV_ARRAY_LEN(shapes); i++) {
            KgpuDtype dt = k_dtypes[di];
            int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
            float *a = frand_dt((size_t)m * k, 1000 + i, -1, 1, dt), *b = frand_dt((size_t)n * k, 1100 + i, -1, 1, dt);
            float *r = fbuf((size_t)m * n), *g = fbuf((size_t)m * n);
            CHECK(kref_gemm(a, b, r, m, n, k, &e) == 0);
            void *da = dev_upload(t, ctx, dt, a, (size_t)m * k), *db = dev_upload(t, ctx, dt, b, (size_t)n * k), *dc = NULL;
            CHECK(kgpu_malloc(ctx, (size_t)m * n * 2, &dc, &e) == 0);
            if (da && db && dc) {
                CHECK_MSG(kgpu_gemm(ctx, dt, m, n, k, da, db, dc, &e) == 0, "kgpu_gemm: %s", e.msg);
                CHECK_MSG(kgpu_download_f32(ctx, dt, g, dc, (size_t)m * n, &e) == 0, "download: %s", e.msg);
                char what[64];
                snprintf(what, sizeof what, "gpu gemm %s %dx%dx%d", kgpu_dtype_name(dt), m, n, k);
                CHECK_EQ_U(cmp_arrays(t, what, g, r, (size_t)m * n, dt_rtol(dt), dt_atol(dt)), 0);
            }
            kgpu_free(ctx, da, &e), kgpu_free(ctx, db, &e), kgpu_free(ctx, dc, &e);
            free(a), free(b), free(r), free(g);
        }
    kgpu_ctx_destroy(ctx);
}

typedef struct {
    int n_new, n_ctx, h, h_kv, d, splits;
} GpuPrefillCase;

TEST(kernels_gpu_attn_prefill_matches_twin)
{
    GPU_SETUP(ctx);
    const GpuPrefillCase cases[] = {
        {37, 50, 8, 2, 64, 0},   /* GQA, automatic splits */
        {37, 50, 8, 2, 64, 1},   /* same, one pass */
        {5, 300, 4, 4, 128, 3},  /* short new input over a long context, 3 key splits */
        {17, 0, 2, 1, 256, 0},   /* MQA, d = 256 (opt-in shared memory) */
        {20, 9, 4, 4, 80, 2},    /* d not a multiple of 32 */
        {1, 0, 1, 1, 16, 0},     /* a single token */
    };
    for (size_t di = 0; di < KV_ARRAY_LEN(k_dtypes); di++)
        for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
            KgpuDtype dt = k_dtypes[di];
            const GpuPrefillCase *pc = &cases[i];
            size_t nq = (size_t)pc->n_new * pc->h * pc->d, nk = (size_t)(pc->n_ctx + pc->n_new) * pc->h_kv * pc->d;
            float *q = frand_dt(nq, 1200 + i, -1, 1, dt), *k = frand_dt(nk, 1300 + i, -1, 1, dt);
            float *v = frand_dt(nk, 1400 + i, -1, 1, dt), *r = fbuf(nq), *g = fbuf(nq);
            CHECK(kref_attn_prefill(q, k, v, r, pc->n_new, pc->n_ctx, pc->h, pc->h_kv, pc->d, &e) == 0);
            void *dq = dev_upload(t, ctx, dt, q, nq), *dk = dev_upload(t, ctx, dt, k, nk), *dv = dev_upload(t, ctx, dt, v, nk);
            void *dout = dev_raw(t, ctx, NULL, nq * 2);
            if (dq && dk && dv && dout) {
                kgpu_set_attn_splits(ctx, pc->splits);
                CHECK_MSG(kgpu_attn_prefill(ctx, dt, dq, dk, dv, dout, pc->n_new, pc->n_ctx, pc->h, pc->h_kv, pc->d,
                                            &e) == 0, "kgpu_attn_prefill: %s", e.msg);
                CHECK_MSG(kgpu_download_f32(ctx, dt, g, dout, nq, &e) == 0, "download: %s", e.msg);
                char what[96];
                snprintf(what, sizeof what, "gpu prefill %s new=%d ctx=%d h=%d/%d d=%d s=%d", kgpu_dtype_name(dt),
                         pc->n_new, pc->n_ctx, pc->h, pc->h_kv, pc->d, pc->splits);
                CHECK_EQ_U(cmp_arrays(t, what, g, r, nq, dt_rtol(dt), dt_atol(dt)), 0);
            }
            kgpu_free(ctx, dq, &e), kgpu_free(ctx, dk, &e), kgpu_free(ctx, dv, &e), kgpu_free(ctx, dout, &e);
            free(q), free(k), free(v), free(r), free(g);
        }
    kgpu_set_attn_splits(ctx, 0);
    kgpu_ctx_destroy(ctx);
}

TEST(kernels_gpu_attn_decode_matches_twin)
{
    GPU_SETUP(ctx);
    /* Two offset sets over one packed cache: A, then B, then A again (offset re-upload path). */
    const int lens_a[] = {1, 0, 33, 200, 64, 513};
    const int lens_b[] = {300, 2, 0, 100, 400, 10};
    const int batch = (int)KV_ARRAY_LEN(lens_a);
    int off_a[7], off_b[7];
    off_a[0] = off_b[0] = 0;
    for (int b = 0; b < batch; b++) {
        off_a[b + 1] = off_a[b] + lens_a[b];
        off_b[b + 1] = off_b[b] + lens_b[b];
    }
    const int total = off_a[batch] > off_b[batch] ? off_a[batch] : off_b[batch];
    const int shapes[][4] = {{8, 2, 128, 0}, {32, 1, 64, 4}, {4, 4, 96, 1}}; /* h, h_kv, d, splits */
    for (size_t di = 0; di < KV_ARRAY_LEN(k_dtypes); di++)
        for (size_t i = 0; i < KV_ARRAY_LEN(shapes); i++) {
            KgpuDtype dt = k_dtypes[di];
            int h = shapes[i][0], h_kv = shapes[i][1], d = shapes[i][2];
            size_t nq = (size_t)batch * h * d, nk = (size_t)total * h_kv * d;
            float *q = frand_dt(nq, 1500 + i, -1, 1, dt), *k = frand_dt(nk, 1600 + i, -1, 1, dt);
            float *v = frand_dt(nk, 1700 + i, -1, 1, dt), *r = fbuf(nq), *g = fbuf(nq);
            void *dq = dev_upload(t, ctx, dt, q, nq), *dk = dev_upload(t, ctx, dt, k, nk), *dv = dev_upload(t, ctx, dt, v, nk);
            void *dout = dev_raw(t, ctx, NULL, nq * 2);
            kgpu_set_attn_splits(ctx, shapes[i][3]);
            for (int pass = 0; pass < 3 && dq && dk && dv && dout; pass++) {
                const int *off = pass == 1 ? off_b : off_a;
                CHECK(kref_attn_decode(q, k, v, r, batch, off, h, h_kv, d, &e) == 0);
                CHECK_MSG(kgpu_attn_decode(ctx, dt, dq, dk, dv, dout, batch, off, h, h_kv, d, &e) == 0,
                          "kgpu_attn_decode: %s", e.msg);
                CHECK_MSG(kgpu_download_f32(ctx, dt, g, dout, nq, &e) == 0, "download: %s", e.msg);
                char what[96];
                snprintf(what, sizeof what, "gpu decode %s %c h=%d/%d d=%d s=%d", kgpu_dtype_name(dt),
                         pass == 1 ? 'B' : 'A', h, h_kv, d, shapes[i][3]);
                CHECK_EQ_U(cmp_arrays(t, what, g, r, nq, dt_rtol(dt), dt_atol(dt)), 0);
            }
            kgpu_free(ctx, dq, &e), kgpu_free(ctx, dk, &e), kgpu_free(ctx, dv, &e), kgpu_free(ctx, dout, &e);
            free(q), free(k), free(v), free(r), free(g);
        }
    kgpu_set_attn_splits(ctx, 0);
    kgpu_ctx_destroy(ctx);
}

TEST(kernels_gpu_norms_activations_rope_match_twins)
{
    GPU_SETUP(ctx);
    const int rows = 7, dim = 300;
    const size_t n = (size_t)rows * dim;
    for (size_t di = 0; di < KV_ARRAY_LEN(k_dtypes); di++) {
        KgpuDtype dt = k_dtypes[di];
        double rt = dt_rtol(dt), at = dt_atol(dt);
        float *x = frand_dt(2 * n, 1800, -2, 2, dt), *w = frand_dt(dim, 1801, 0.5f, 1.5f, dt);
        float *b = frand_dt(dim, 1802, -1, 1, dt), *r = fbuf(2 * n), *g = fbuf(2 * n);
        void *dx = dev_upload(t, ctx, dt, x, 2 * n), *dw = dev_upload(t, ctx, dt, w, dim);
        void *db = dev_upload(t, ctx, dt, b, dim), *dy = dev_raw(t, ctx, NULL, 2 * n * 2);
        if (dx && dw && db && dy) {
            char what[64];
            CHECK(kref_rmsnorm(x, w, r, rows, dim, 1e-5f, &e) == 0);
            CHECK_MSG(kgpu_rmsnorm(ctx, dt, dx, dw, dy, rows, dim, 1e-5f, &e) == 0, "%s", e.msg);
            CHECK(kgpu_download_f32(ctx, dt, g, dy, n, &e) == 0);
            snprintf(what, sizeof what, "gpu rmsnorm %s", kgpu_dtype_name(dt));
            CHECK_EQ_U(cmp_arrays(t, what, g, r, n, rt, at), 0);

            CHECK(kref_layernorm(x, w, b, r, rows, dim, 1e-5f, &e) == 0);
            CHECK_MSG(kgpu_layernorm(ctx, dt, dx, dw, db, dy, rows, dim, 1e-5f, &e) == 0, "%s", e.msg);
            CHECK(kgpu_download_f32(ctx, dt, g, dy, n, &e) == 0);
            snprintf(what, sizeof what, "gpu layernorm %s", kgpu_dtype_name(dt));
            CHECK_EQ_U(cmp_arrays(t, what, g, r, n, rt, at), 0);

            for (int act = 0; act < 2; act++) { /* gu = x as [rows][2·dim] */
                CHECK(kref_gated_act((KActKind)act, x, r, rows, dim, &e) == 0);
                CHECK_MSG(kgpu_gated_act(ctx, dt, (KActKind)act, dx, dy, rows, dim, &e) == 0, "%s", e.msg);
                CHECK(kgpu_download_f32(ctx, dt, g, dy, n, &e) == 0);
                snprintf(what, sizeof what, "gpu gated %s %s", act ? "gelu" : "silu", kgpu_dtype_name(dt));
                CHECK_EQ_U(cmp_arrays(t, what, g, r, n, rt, at), 0);
            }

            /* RoPE in place on [9 tokens][3 heads][64], positions 1000.., two thetas. */
            const int nt = 9, nh = 3, d = 64;
            const size_t nr = (size_t)nt * nh * d;
            const float thetas[] = {10000.0f, 500000.0f};
            for (int ti = 0; ti < 2; ti++) {
                memcpy(r, x, nr * sizeof *r);
                CHECK(kref_rope(r, nt, nh, d, 1000, thetas[ti], &e) == 0);
                CHECK(kgpu_copy_d2d(ctx, dy, dx, nr * 2, &e) == 0);
                CHECK_MSG(kgpu_rope(ctx, dt, dy, nt, nh, d, 1000, thetas[ti], &e) == 0, "%s", e.msg);
                CHECK(kgpu_download_f32(ctx, dt, g, dy, nr, &e) == 0);
                snprintf(what, sizeof what, "gpu rope %s theta=%g", kgpu_dtype_name(dt), (double)thetas[ti]);
                CHECK_EQ_U(cmp_arrays(t, what, g, r, nr, rt, at), 0);
            }
        }
        kgpu_free(ctx, dx, &e), kgpu_free(ctx, dw, &e), kgpu_free(ctx, db, &e), kgpu_free(ctx, dy, &e);
        free(x), free(w), free(b), free(r), free(g);
    }
    kgpu_ctx_destroy(ctx);
}

TEST(kernels_gpu_quantize_matches_twin)
{
    GPU_SETUP(ctx);
    const int shapes[][2] = {{12, 128}, {3, 1024}}; /* per token per head, per token */
    for (size_t di = 0; di < KV_ARRAY_LEN(k_dtypes); di++)
        for (size_t i = 0; i < KV_ARRAY_LEN(shapes); i++)
            for (int int4 = 0; int4 <= 1; int4++) {
                KgpuDtype dt = k_dtypes[di];
                const int rows = shapes[i][0], group = shapes[i][1];
                const size_t n = (size_t)rows * group, qbytes = int4 ? n / 2 : n;
                float *x = frand_dt(n, 1900 + i, -4, 4, dt), *r = fbuf(n), *g = fbuf(n);
                float *rs = fbuf(rows), *gs = fbuf(rows);
                unsigned char *rq = malloc(qbytes), *gq = malloc(qbytes);
                if (int4)
                    CHECK(kref_quant_i4(x, rq, rs, rows, group, &e) == 0 && kref_dequant_i4(rq, rs, r, rows, group, &e) == 0);
                else
                    CHECK(kref_quant_i8(x, (int8_t *)rq, rs, rows, group, &e) == 0 &&
                          kref_dequant_i8((int8_t *)rq, rs, r, rows, group, &e) == 0);
                void *dx = dev_upload(t, ctx, dt, x, n), *dq = dev_raw(t, ctx, NULL, qbytes);
                void *ds = dev_raw(t, ctx, NULL, rows * sizeof(float)), *dy = dev_raw(t, ctx, NULL, n * 2);
                if (dx && dq && ds && dy) {
                    int rc = int4 ? kgpu_quant_i4(ctx, dt, dx, dq, ds, rows, group, &e)
                                  : kgpu_quant_i8(ctx, dt, dx, dq, ds, rows, group, &e);
                    CHECK_MSG(rc == 0, "quantize: %s", e.msg);
                    CHECK(kgpu_copy_d2h(ctx, gq, dq, qbytes, &e) == 0);
                    CHECK(kgpu_copy_d2h(ctx, gs, ds, rows * sizeof(float), &e) == 0);
                    CHECK(kgpu_sync(ctx, &e) == 0);
                    char what[64];
                    snprintf(what, sizeof what, "gpu quant%s %s scales %dx%d", int4 ? "4" : "8", kgpu_dtype_name(dt),
                             rows, group);
                    CHECK_EQ_U(cmp_arrays(t, what, gs, rs, rows, 1e-6, 0), 0);
                    size_t off_by_one = 0, worse = 0;
                    for (size_t j = 0; j < n; j++) {
                        int a, bq;
                        if (int4) {
                            a = ((gq[j / 2] >> (4 * (j % 2))) & 0xF), bq = ((rq[j / 2] >> (4 * (j % 2))) & 0xF);
                            a -= a & 8 ? 16 : 0, bq -= bq & 8 ? 16 : 0;
                        } else {
                            a = ((int8_t *)gq)[j], bq = ((int8_t *)rq)[j];
                        }
                        if (abs(a - bq) == 1) off_by_one++;
                        if (abs(a - bq) > 1) worse++;
                    }
                    printf("    %-36s %zu values off by one step, %zu worse\n", what, off_by_one, worse);
                    CHECK_EQ_U(worse, 0);
                    CHECK(off_by_one * 100 <= n); /* ties only */
                    /* Dequantize the twin's codes on the GPU. */
                    CHECK(kgpu_copy_h2d(ctx, dq, rq, qbytes, &e) == 0 &&
                          kgpu_copy_h2d(ctx, ds, rs, rows * sizeof(float), &e) == 0);
                    rc = int4 ? kgpu_dequant_i4(ctx, dt, dq, ds, dy, rows, group, &e)
                              : kgpu_dequant_i8(ctx, dt, dq, ds, dy, rows, group, &e);
                    CHECK_MSG(rc == 0, "dequantize: %s", e.msg);
                    CHECK(kgpu_download_f32(ctx, dt, g, dy, n, &e) == 0);
                    snprintf(what, sizeof what, "gpu dequant%s %s %dx%d", int4 ? "4" : "8", kgpu_dtype_name(dt), rows,
                             group);
                    CHECK_EQ_U(cmp_arrays(t, what, g, r, n, dt_rtol(dt), dt_atol(dt)), 0);
                    /* Round trip bound: half a step plus the output's own rounding. */
                    size_t far = 0;
                    for (size_t j = 0; j < n; j++)
                        if (fabsf(g[j] - x[j]) > rs[j / group] * 0.5f + (float)dt_rtol(dt) * fabsf(x[j]) + 1e-6f) far++;
                    CHECK_EQ_U(far, 0);
                }
                kgpu_free(ctx, dx, &e), kgpu_free(ctx, dq, &e), kgpu_free(ctx, ds, &e), kgpu_free(ctx, dy, &e);
                free(x), free(r), free(g), free(rs), free(gs), free(rq), free(gq);
            }
    kgpu_ctx_destroy(ctx);
}
