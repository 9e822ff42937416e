/* ref.h — plain C fp32 reference twins of every kernel the calibrator times: the spec.
 *
 * Responsible for: the exact semantics and memory layouts that the CPU fast paths (cpu.h) and the
 * CUDA kernels (gpu.h) must reproduce, shape validation shared by all three, and the fp16/bf16
 * conversion helpers used to feed GPU kernels and to read their results.
 * Not responsible for: speed (these are straight loops, single-threaded), timing, devices.
 *
 * Layouts (all row-major, dense, no padding; "[a][b][c]" means index (i*b + j)*c + k):
 *   GEMM        C[m][n] = A[m][k] · Bᵀ, with B stored [n][k] — the nn.Linear weight layout
 *               (out_features × in_features). Accumulation in fp32, k ascending.
 *   attention   q, out: [rows][h][d]; k, v: [tokens][h_kv][d]. GQA: query head qh reads KV head
 *               qh / (h / h_kv) (h_kv == h is MHA, h_kv == 1 is MQA). Scores are scaled by
 *               1/sqrt(d); softmax in fp32.
 *     prefill   rows = n_new new tokens; k/v hold n_ctx context tokens followed by the n_new new
 *               tokens' own keys/values (n_ctx + n_new rows). New token i (0-based) sits at
 *               position n_ctx + i and attends to keys 0 .. n_ctx + i inclusive (all the context,
 *               causal over the new tokens).
 *     decode    rows = batch queries, one per sequence; k/v are the sequences' caches packed one
 *               after the other: sequence b owns k/v rows ctx_off[b] .. ctx_off[b+1]-1 (ctx_off
 *               has batch+1 non-decreasing entries, like cu_seqlens) and its query attends to all
 *               of them. A sequence with no keys gets an all-zero output row.
 *   RMSNorm     y = x / sqrt(mean(x²) + eps) · w, per row of dim values.
 *   LayerNorm   y = (x - mean) / sqrt(var + eps) · w + b, var the biased (1/dim) variance.
 *   gated act   gu: [rows][2f], gate = gu[r][0..f-1], up = gu[r][f..2f-1] (fused gate_up GEMM
 *               output, vLLM's SiluAndMul layout); out[r][j] = act(gate) · up, out: [rows][f].
 *               SiLU(x) = x / (1 + e^-x); GELU(tanh) = x/2 · (1 + tanh(√(2/π)(x + 0.044715x³))).
 *   RoPE        in place on x: [n_tokens][n_heads][d], d even; token t has position pos0 + t.
 *               NeoX/Llama half-rotation: element i pairs with i + d/2 (i < d/2), angle
 *               a = pos · theta^(-2i/d) (computed in fp32 as powf(theta, -(2i)/d)),
 *               x[i]' = x[i]·cos a - x[i+d/2]·sin a, x[i+d/2]' = x[i+d/2]·cos a + x[i]·sin a.
 *   quantize    symmetric, one fp32 scale per group of `group` consecutive values (a "row").
 *               Per token per head: rows = tokens·heads, group = head_dim. Per token: rows =
 *               tokens, group = heads·head_dim. amax = max|x| of the row;
 *               int8: scale = amax/127, q = clamp(rint(x · (127/amax)), -127, 127);
 *               int4: scale = amax/7,   q = clamp(rint(x · (7/amax)),   -7, 7),
 *               packed two per byte: value 2j in the low nibble of byte j, value 2j+1 in the high
 *               nibble, two's complement (group must be even; a row takes group/2 bytes).
 *               amax == 0 gives scale 0 and q = 0. rint rounds half to even. Dequantize: q·scale.
 *               Round trip error |x - deq| <= scale/2 per value.
 *   fp16/bf16   IEEE binary16 and bfloat16 bit patterns in uint16_t, fp32 -> 16-bit rounds to
 *               nearest even; overflow gives ±inf, NaN stays NaN (quiet).
 *
 * Error contract: functions that take shapes return 0, or -1 with a message naming the function
 * and the bad parameter (KvErr may be NULL). Invariant: on error nothing is written to outputs.
 * Complexity: GEMM O(mnk); prefill attention O(h · n_new · (n_ctx + n_new) · d); decode
 * O(h · total keys · d); the others linear in their input.
 */
#ifndef KV_KERNELS_REF_H
#define KV_KERNELS_REF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" { /* util.h has no C++ guard of its own */
#endif

#include "sim/base/util.h"

typedef enum KActKind { KACT_SILU = 0, KACT_GELU_TANH = 1 } KActKind;

/* Shape checks shared by the twins, the CPU paths and the GPU wrappers (same messages). */
int kref_gemm_check(int m, int n, int k, KvErr *e);
int kref_attn_check(int n_rows, int h, int h_kv, int d, KvErr *e);
int kref_attn_decode_check(int batch, const int *ctx_off, int h, int h_kv, int d, KvErr *e);
int kref_rope_check(int n_tokens, int n_heads, int d, float theta, KvErr *e);
int kref_quant_check(int rows, int group, int int4, KvErr *e);

int kref_gemm(const float *a, const float *b, float *c, int m, int n, int k, KvErr *e);
int kref_attn_prefill(const float *q, const float *k, const float *v, float *out, int n_new,
                      int n_ctx, int h, int h_kv, int d, KvErr *e);
int kref_attn_decode(const float *q, const float *k, const float *v, float *out, int batch,
                     const int *ctx_off, int h, int h_kv, int d, KvErr *e);
int kref_rmsnorm(const float *x, const float *w, float *y, int rows, int dim, float eps, KvErr *e);
int kref_layernorm(const float *x, const float *w, const float *b, float *y, int rows, int dim,
                   float eps, KvErr *e);
int kref_gated_act(KActKind act, const float *gu, float *out, int rows, int f, KvErr *e);
int kref_rope(float *x, int n_tokens, int n_heads, int d, int pos0, float theta, KvErr *e);
int kref_quant_i8(const float *x, int8_t *q, float *scale, int rows, int group, KvErr *e);
int kref_dequant_i8(const int8_t *q, const float *scale, float *x, int rows, int group, KvErr *e);
int kref_quant_i4(const float *x, uint8_t *q, float *scale, int rows, int group, KvErr *e);
int kref_dequant_i4(const uint8_t *q, const float *scale, float *x, int rows, int group, KvErr *e);

/* Scalar activations (exposed so tests and kernels agree on the formula). */
float kref_silu(float x);
float kref_gelu_tanh(float x);

/* fp32 <-> fp16 / bf16, round to nearest even. */
uint16_t kref_f32_to_f16(float f);
float kref_f16_to_f32(uint16_t h);
uint16_t kref_f32_to_bf16(float f);
float kref_bf16_to_f32(uint16_t b);
/* Array forms; `bf16` selects bfloat16 instead of fp16. */
void kref_f32_to_half_n(const float *src, uint16_t *dst, size_t n, int bf16);
void kref_half_to_f32_n(const uint16_t *src, float *dst, size_t n, int bf16);
/* Round every value through fp16/bf16 and back (in place): inputs a GPU kernel sees exactly. */
void kref_round_half_n(float *x, size_t n, int bf16);

#ifdef __cplusplus
}
#endif

#endif
