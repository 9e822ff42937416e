/* cpu.h — the CPU kernels of the calibrator's cpu backend (docs/model.md "The cost contract"):
 * what kvcal times when it calibrates a host, and what a real CPU restoration runs.
 *
 * Responsible for: fast host versions of the twins in ref.h with the same signatures, layouts and
 * error messages — GEMM through OpenBLAS's cblas_sgemm when the build has it (KV_HAVE_BLAS; the C
 * twin otherwise), attention tiled (16 query rows × 64 keys, online softmax) and spread over
 * pthreads by (head, query block) for prefill and (sequence, KV head) for decode. The norms,
 * activations, RoPE and quantizers are memory-bound and call the twins.
 * Not responsible for: timing (calibrate/), choosing shapes, device code.
 * Invariants: results equal the twins' up to fp32 reassociation (tests bound the difference);
 * worker threads live only inside one call; the thread count is process-wide (kcpu_set_threads).
 * Thread-safety: calls may run concurrently; kcpu_set_threads should be called before them.
 */
#ifndef KV_KERNELS_CPU_H
#define KV_KERNELS_CPU_H

#include "kernels/ref.h"

/* Worker threads for attention: n >= 1, or 0 for one per online CPU (the default). */
void kcpu_set_threads(int n);
int kcpu_threads(void);
/* What kcpu_gemm runs on (record it with calibration runs): "c" (built without OpenBLAS),
 * "openblas", or "cblas from <library>" when another CBLAS (e.g. GSL's libgslcblas) provides
 * cblas_sgemm at run time because it was linked first — a build problem, not a choice. */
const char *kcpu_gemm_backend(void);

int kcpu_gemm(const float *a, const float *b, float *c, int m, int n, int k, KvErr *e);
int kcpu_attn_prefill(const float *q, const float *k, const float *v, float *out, int n_new,
                      int n_ctx, int h, int h_kv, int d, KvErr *e);
int kcpu_attn_decode(const float *q, const float *k, const float *v, float *out, int batch,
                     const int *ctx_off, int h, int h_kv, int d, KvErr *e);
int kcpu_rmsnorm(const float *x, const float *w, float *y, int rows, int dim, float eps, KvErr *e);
int kcpu_layernorm(const float *x, const float *w, const float *b, float *y, int rows, int dim,
                   float eps, KvErr *e);
int kcpu_gated_act(KActKind act, const float *gu, float *out, int rows, int f, KvErr *e);
int kcpu_rope(float *x, int n_tokens, int n_heads, int d, int pos0, float theta, KvErr *e);
int kcpu_quant_i8(const float *x, int8_t *q, float *scale, int rows, int group, KvErr *e);
int kcpu_dequant_i8(const int8_t *q, const float *scale, float *x, int rows, int group, KvErr *e);
int kcpu_quant_i4(const float *x, uint8_t *q, float *scale, int rows, int group, KvErr *e);
int kcpu_dequant_i4(const uint8_t *q, const float *scale, float *x, int rows, int group, KvErr *e);

#endif
