/* ref.c — the fp32 reference twins; semantics and layouts are documented in ref.h.
 *
 * Responsible for: obviously-correct loops that the CPU fast paths and the CUDA kernels are tested
 * against, the shared shape checks, and bit-exact fp16/bf16 conversion.
 * Not responsible for: speed. Every loop is the textbook formula, one row at a time.
 * Invariants: shapes are validated before any output is written; index arithmetic is done in
 * size_t so that rows · h · d may exceed INT_MAX.
 */
#include "kernels/ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- shape checks */

int kref_gemm_check(int m, int n, int k, KvErr *e)
{
    if (m < 0 || n < 0 || k < 0)
        return kv_err(e, "gemm: m=%d n=%d k=%d: expected non-negative sizes", m, n, k);
    return 0;
}

int kref_attn_check(int n_rows, int h, int h_kv, int d, KvErr *e)
{
    if (n_rows < 0) return kv_err(e, "attention: %d query rows: expected >= 0", n_rows);
    if (h < 1 || h_kv < 1) return kv_err(e, "attention: h=%d h_kv=%d: expected >= 1 heads", h, h_kv);
    if (h % h_kv != 0)
        return kv_err(e, "attention: h=%d query heads not a multiple of h_kv=%d KV heads", h, h_kv);
    if (d < 1) return kv_err(e, "attention: head dim d=%d: expected >= 1", d);
    return 0;
}

int kref_attn_decode_check(int batch, const int *ctx_off, int h, int h_kv, int d, KvErr *e)
{
    if (kref_attn_check(batch, h, h_kv, d, e) != 0) return -1;
    if (!ctx_off) return kv_err(e, "attention decode: ctx_off is NULL: expected batch+1 offsets");
    if (ctx_off[0] < 0) return kv_err(e, "attention decode: ctx_off[0]=%d: expected >= 0", ctx_off[0]);
    for (int b = 0; b < batch; b++)
        if (ctx_off[b + 1] < ctx_off[b])
            return kv_err(e, "attention decode: ctx_off[%d]=%d < ctx_off[%d]=%d: expected non-decreasing offsets",
                          b + 1, ctx_off[b + 1], b, ctx_off[b]);
    return 0;
}

int kref_rope_check(int n_tokens, int n_heads, int d, float theta, KvErr *e)
{
    if (n_tokens < 0 || n_heads < 0)
        return kv_err(e, "rope: n_tokens=%d n_heads=%d: expected >= 0", n_tokens, n_heads);
    if (d < 2 || d % 2 != 0) return kv_err(e, "rope: head dim d=%d: expected an even number >= 2", d);
    if (!(theta > 0.0f)) return kv_err(e, "rope: theta=%g: expected > 0", (double)theta);
    return 0;
}

int kref_quant_check(int rows, int group, int int4, KvErr *e)
{
    if (rows < 0) return kv_err(e, "quantize: rows=%d: expected >= 0", rows);
    if (group < 1) return kv_err(e, "quantize: group=%d: expected >= 1", group);
    if (int4 && group % 2 != 0)
        return kv_err(e, "quantize int4: group=%d: expected an even group (two values per byte)", group);
    return 0;
}

static int check_rows(const char *what, int rows, int dim, KvErr *e)
{
    if (rows < 0 || dim < 1) return kv_err(e, "%s: rows=%d dim=%d: expected rows >= 0, dim >= 1", what, rows, dim);
    return 0;
}

/* ---------------------------------------------------------------- GEMM */

int kref_gemm(const float *a, const float *b, float *c, int m, int n, int k, KvErr *e)
{
    if (kref_gemm_check(m, n, k, e) != 0) return -1;
    for (int i = 0; i < m; i++) {
        const float *ar = a + (size_t)i * k;
        for (int j = 0; j < n; j++) {
            const float *br = b + (size_t)j * k;
            float acc = 0.0f;
            for (int p = 0; p < k; p++) acc += ar[p] * br[p];
            c[(size_t)i * n + j] = acc;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- attention */

/* One query row over keys 0 .. n_keys-1 (key j at k + j*stride): two-pass softmax. */
static void attn_row(const float *q, const float *k, const float *v, size_t stride, int n_keys,
                     int d, float scale, float *scores, float *out)
{
    if (n_keys <= 0) {
        memset(out, 0, (size_t)d * sizeof *out);
        return;
    }
    float mx = -INFINITY;
    for (int j = 0; j < n_keys; j++) {
        const float *kr = k + (size_t)j * stride;
        float s = 0.0f;
        for (int c = 0; c < d; c++) s += q[c] * kr[c];
        scores[j] = s * scale;
        if (scores[j] > mx) mx = scores[j];
    }
    float sum = 0.0f;
    for (int j = 0; j < n_keys; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    for (int c = 0; c < d; c++) out[c] = 0.0f;
    for (int j = 0; j < n_keys; j++) {
        const float *vr = v + (size_t)j * stride;
        float p = scores[j] / sum;
        for (int c = 0; c < d; c++) out[c] += p * vr[c];
    }
}

int kref_attn_prefill(const float *q, const float *k, const float *v, float *out, int n_new,
                      int n_ctx, int h, int h_kv, int d, KvErr *e)
{
    if (kref_attn_check(n_new, h, h_kv, d, e) != 0) return -1;
    if (n_ctx < 0) return kv_err(e, "attention prefill: n_ctx=%d: expected >= 0", n_ctx);
    size_t n_keys = (size_t)n_ctx + (size_t)n_new;
    float *scores = malloc((n_keys ? n_keys : 1) * sizeof *scores);
    if (!scores) return kv_err(e, "attention prefill: out of memory for %zu scores", n_keys);
    const int group = h / h_kv;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t stride = (size_t)h_kv * d;
    for (int i = 0; i < n_new; i++)
        for (int qh = 0; qh < h; qh++) {
            size_t row = ((size_t)i * h + qh) * d;
            size_t kv0 = (size_t)(qh / group) * d;
            attn_row(q + row, k + kv0, v + kv0, stride, n_ctx + i + 1, d, scale, scores, out + row);
        }
    free(scores);
    return 0;
}

int kref_attn_decode(const float *q, const float *k, const float *v, float *out, int batch,
                     const int *ctx_off, int h, int h_kv, int d, KvErr *e)
{
    if (kref_attn_decode_check(batch, ctx_off, h, h_kv, d, e) != 0) return -1;
    int max_len = 1;
    for (int b = 0; b < batch; b++)
        if (ctx_off[b + 1] - ctx_off[b] > max_len) max_len = ctx_off[b + 1] - ctx_off[b];
    float *scores = malloc((size_t)max_len * sizeof *scores);
    if (!scores) return kv_err(e, "attention decode: out of memory for %d scores", max_len);
    const int group = h / h_kv;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t stride = (size_t)h_kv * d;
    for (int b = 0; b < batch; b++)
        for (int qh = 0; qh < h; qh++) {
            size_t row = ((size_t)b * h + qh) * d;
            size_t kv0 = (size_t)ctx_off[b] * stride + (size_t)(qh / group) * d;
            attn_row(q + row, k + kv0, v + kv0, stride, ctx_off[b + 1] - ctx_off[b], d, scale,
                     scores, out + row);
        }
    free(scores);
    return 0;
}

/* ---------------------------------------------------------------- norms, activations, RoPE */

int kref_rmsnorm(const float *x, const float *w, float *y, int rows, int dim, float eps, KvErr *e)
{
    if (check_rows("rmsnorm", rows, dim, e) != 0) return -1;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float ss = 0.0f;
        for (int c = 0; c < dim; c++) ss += xr[c] * xr[c];
        float inv = 1.0f / sqrtf(ss / (float)dim + eps);
        for (int c = 0; c < dim; c++) y[(size_t)r * dim + c] = xr[c] * inv * w[c];
    }
    return 0;
}

int kref_layernorm(const float *x, const float *w, const float *b, float *y, int rows, int dim,
                   float eps, KvErr *e)
{
    if (check_rows("layernorm", rows, dim, e) != 0) return -1;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        float sum = 0.0f;
        for (int c = 0; c < dim; c++) sum += xr[c];
        float mean = sum / (float)dim;
        float var = 0.0f;
        for (int c = 0; c < dim; c++) var += (xr[c] - mean) * (xr[c] - mean);
        float inv = 1.0f / sqrtf(var / (float)dim + eps);
        for (int c = 0; c < dim; c++) y[(size_t)r * dim + c] = (xr[c] - mean) * inv * w[c] + b[c];
    }
    return 0;
}

float kref_silu(float x) { return x / (1.0f + expf(-x)); }

float kref_gelu_tanh(float x)
{
    const float k0 = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k0 * (x + 0.044715f * x * x * x)));
}

int kref_gated_act(KActKind act, const float *gu, float *out, int rows, int f, KvErr *e)
{
    if (check_rows("gated activation", rows, f, e) != 0) return -1;
    if (act != KACT_SILU && act != KACT_GELU_TANH)
        return kv_err(e, "gated activation: kind %d: expected KACT_SILU or KACT_GELU_TANH", (int)act);
    for (int r = 0; r < rows; r++) {
        const float *g = gu + (size_t)r * 2 * f, *u = g + f;
        float *o = out + (size_t)r * f;
        for (int j = 0; j < f; j++) o[j] = (act == KACT_SILU ? kref_silu(g[j]) : kref_gelu_tanh(g[j])) * u[j];
    }
    return 0;
}

int kref_rope(float *x, int n_tokens, int n_heads, int d, int pos0, float theta, KvErr *e)
{
    if (kref_rope_check(n_tokens, n_heads, d, theta, e) != 0) return -1;
    const int half = d / 2;
    for (int t = 0; t < n_tokens; t++)
        for (int hh = 0; hh < n_heads; hh++) {
            float *xr = x + ((size_t)t * n_heads + hh) * d;
            for (int i = 0; i < half; i++) {
                float inv_freq = powf(theta, -(float)(2 * i) / (float)d);
                float ang = (float)(pos0 + t) * inv_freq;
                float cs = cosf(ang), sn = sinf(ang);
                float x1 = xr[i], x2 = xr[i + half];
                xr[i] = x1 * cs - x2 * sn;
                xr[i + half] = x2 * cs + x1 * sn;
            }
        }
    return 0;
}

/* ---------------------------------------------------------------- quantization */

static float row_amax(const float *x, int group)
{
    float amax = 0.0f;
    for (int c = 0; c < group; c++) amax = fmaxf(amax, fabsf(x[c]));
    return amax;
}

static int quant_value(float x, float inv, int qmax)
{
    float r = rintf(x * inv);
    if (r > (float)qmax) r = (float)qmax;
    if (r < (float)-qmax) r = (float)-qmax;
    return (int)r;
}

int kref_quant_i8(const float *x, int8_t *q, float *scale, int rows, int group, KvErr *e)
{
    if (kref_quant_check(rows, group, 0, e) != 0) return -1;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * group;
        float amax = row_amax(xr, group);
        float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        scale[r] = amax / 127.0f;
        for (int c = 0; c < group; c++) q[(size_t)r * group + c] = (int8_t)quant_value(xr[c], inv, 127);
    }
    return 0;
}

int kref_dequant_i8(const int8_t *q, const float *scale, float *x, int rows, int group, KvErr *e)
{
    if (kref_quant_check(rows, group, 0, e) != 0) return -1;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < group; c++) x[(size_t)r * group + c] = (float)q[(size_t)r * group + c] * scale[r];
    return 0;
}

int kref_quant_i4(const float *x, uint8_t *q, float *scale, int rows, int group, KvErr *e)
{
    if (kref_quant_check(rows, group, 1, e) != 0) return -1;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * group;
        float amax = row_amax(xr, group);
        float inv = amax > 0.0f ? 7.0f / amax : 0.0f;
        scale[r] = amax / 7.0f;
        uint8_t *qr = q + (size_t)r * (group / 2);
        for (int j = 0; j < group / 2; j++) {
            int lo = quant_value(xr[2 * j], inv, 7), hi = quant_value(xr[2 * j + 1], inv, 7);
            qr[j] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
        }
    }
    return 0;
}

/* Sign-extend a 4-bit two's complement nibble. */
static int nibble_value(unsigned v) { return (int)(v & 0xF) - ((v & 0x8) ? 16 : 0); }

int kref_dequant_i4(const uint8_t *q, const float *scale, float *x, int rows, int group, KvErr *e)
{
    if (kref_quant_check(rows, group, 1, e) != 0) return -1;
    for (int r = 0; r < rows; r++) {
        const uint8_t *qr = q + (size_t)r * (group / 2);
        float *xr = x + (size_t)r * group;
        for (int j = 0; j < group / 2; j++) {
            xr[2 * j] = (float)nibble_value(qr[j]) * scale[r];
            xr[2 * j + 1] = (float)nibble_value(qr[j] >> 4) * scale[r];
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- fp16 / bf16 */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t kref_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or NaN (keep NaN quiet and non-zero) */
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u | ((ax >> 13) & 0x3ffu) : 0x7c00u));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {
        /* below 2^-14: fp16 subnormal (or zero); value/2^-24 rounded to nearest even. 1024 (the
         * smallest normal) is the correct encoding when it rounds up. */
        float v = bits_f32(ax) * 16777216.0f;
        return (uint16_t)(sign | (uint16_t)rintf(v));
    }
    uint32_t r = ax - 0x38000000u; /* rebias the exponent from 127 to 15 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (uint16_t)(r >> 13));
}

float kref_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (ex == 0) {
        float v = (float)man * (1.0f / 16777216.0f); /* man · 2^-24, exact */
        return sign ? -v : v;
    }
    if (ex == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((ex + 112u) << 23) | (man << 13));
}

uint16_t kref_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float kref_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

void kref_f32_to_half_n(const float *src, uint16_t *dst, size_t n, int bf16)
{
    for (size_t i = 0; i < n; i++) dst[i] = bf16 ? kref_f32_to_bf16(src[i]) : kref_f32_to_f16(src[i]);
}

void kref_half_to_f32_n(const uint16_t *src, float *dst, size_t n, int bf16)
{
    for (size_t i = 0; i < n; i++) dst[i] = bf16 ? kref_bf16_to_f32(src[i]) : kref_f16_to_f32(src[i]);
}

void kref_round_half_n(float *x, size_t n, int bf16)
{
    for (size_t i = 0; i < n; i++)
        x[i] = bf16 ? kref_bf16_to_f32(kref_f32_to_bf16(x[i])) : kref_f16_to_f32(kref_f32_to_f16(x[i]));
}
