/* gpu.h — C API of the CUDA kernels and cuBLAS wrappers that kvcal's cuda backend times.
 *
 * Responsible for: device discovery, a context (device, stream, cuBLAS handle, event timer,
 * scratch), events and stream waits, device and host buffers (pinned, pageable, registered),
 * H2D/D2H copies (pinned or pageable), and the kernels of
 * ref.h on fp16/bf16 data with fp32 accumulation: GEMM (cublasGemmEx, CUBLAS_COMPUTE_32F),
 * attention prefill and decode (our own flash-style kernels: key tiles in shared memory, online
 * softmax, split-KV with a combine pass when there are too few blocks to fill the GPU),
 * RMSNorm/LayerNorm, gated activations, RoPE, int8/int4 quantize/dequantize.
 * Not responsible for: choosing shapes or repetitions (calibrate/), fp32 reference semantics
 * (ref.h is the spec: same layouts, same formulas; these kernels only change precision).
 *
 * Built from kernels/gpu.cu when nvcc and cuBLAS are found (the Makefile then defines
 * KV_HAVE_CUDA for C files); otherwise kernels/gpu_stub.c provides every function, returning -1
 * (NULL, 0) with "built without CUDA".
 *
 * Conventions:
 *   - every function taking KvErr* returns 0 (or a count/pointer) on success and -1 (NULL) with a
 *     message on failure; CUDA/cuBLAS errors carry file:line, the call and the library's text.
 *     Nothing prints, nothing exits.
 *   - pointers to tensors are device pointers unless the name says host; kernel calls are
 *     asynchronous on the context's stream (kgpu_sync waits). Tensors are of the call's dtype
 *     (fp16 or bf16) except quantized values (int8, packed int4 bytes) and scales (fp32).
 *   - launch errors are reported by the call that launched; faults during execution surface at
 *     the next synchronising call (kgpu_sync, kgpu_timer_stop, downloads).
 *   - sizes follow ref.h; attention needs d <= KGPU_MAX_HEAD_DIM.
 * A context is used by one host thread at a time.
 */
#ifndef KV_KERNELS_GPU_H
#define KV_KERNELS_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ref.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KGPU_MAX_HEAD_DIM 256

typedef enum KgpuDtype { KGPU_F16 = 0, KGPU_BF16 = 1 } KgpuDtype;

typedef struct KgpuCtx KgpuCtx;

/* "fp16" / "bf16" (NULL for an unknown value). */
const char *kgpu_dtype_name(KgpuDtype dt);

/* Number of CUDA devices: > 0; 0 with "no CUDA device: <reason>" when there is none (no driver,
 * no GPU); -1 with "built without CUDA" in a build without CUDA. */
int kgpu_device_count(KvErr *e);

/* Current device's name, the driver's CUDA version ("13.0") and the runtime's ("13.0"). */
int kgpu_device_info(char *name, int len, char *driver, int dlen, char *cuda, int clen, KvErr *e);

/* A context on `device`: sets it current, creates a non-blocking stream, a cuBLAS handle bound
 * to the stream, two timing events. NULL with a message on failure. */
KgpuCtx *kgpu_ctx_create(int device, KvErr *e);
void kgpu_ctx_destroy(KgpuCtx *ctx);   /* NULL is fine; waits for the stream first */
int kgpu_sync(KgpuCtx *ctx, KvErr *e);  /* wait for all work on the stream */
int kgpu_sm_count(const KgpuCtx *ctx);  /* multiprocessors of the context's device */

/* Attention split-KV: n > 0 forces n key splits (clamped to the keys available; for tests),
 * 0 chooses automatically (enough blocks for two waves of the multiprocessors). */
void kgpu_set_attn_splits(KgpuCtx *ctx, int n);

/* Device memory. */
int kgpu_malloc(KgpuCtx *ctx, size_t bytes, void **dptr, KvErr *e);
int kgpu_free(KgpuCtx *ctx, void *dptr, KvErr *e);  /* NULL is fine */
int kgpu_memset0(KgpuCtx *ctx, void *dptr, size_t bytes, KvErr *e);  /* async */

/* Host memory: pinned (cudaMallocHost) or pageable (malloc). */
int kgpu_host_alloc(size_t bytes, int pinned, void **hptr, KvErr *e);
void kgpu_host_free(void *hptr, int pinned);

/* Copies on the context's stream. Asynchronous for pinned host memory; with pageable memory the
 * driver stages the copy and the call may return before (H2D) or only after (D2H) it is done —
 * use kgpu_sync or the timer before reading a D2H result. */
int kgpu_copy_h2d(KgpuCtx *ctx, void *dst_dev, const void *src_host, size_t bytes, KvErr *e);
int kgpu_copy_d2h(KgpuCtx *ctx, void *dst_host, const void *src_dev, size_t bytes, KvErr *e);
int kgpu_copy_d2d(KgpuCtx *ctx, void *dst_dev, const void *src_dev, size_t bytes, KvErr *e);

/* fp32 host arrays to/from dtype device arrays (converted on the host with ref.h's round to
 * nearest even); both wait for the copy to finish. */
int kgpu_upload_f32(KgpuCtx *ctx, KgpuDtype dt, void *dst_dev, const float *src_host, size_t n, KvErr *e);
int kgpu_download_f32(KgpuCtx *ctx, KgpuDtype dt, float *dst_host, const void *src_dev, size_t n, KvErr *e);

/* Event timer on the context's stream: start records the start event; stop records the end
 * event, waits for it and returns the elapsed device time in milliseconds (resolution about
 * 0.5 µs). Everything enqueued in between is timed. */
int kgpu_timer_start(KgpuCtx *ctx, KvErr *e);
int kgpu_timer_stop(KgpuCtx *ctx, float *ms, KvErr *e);

/* ---- streams and events beyond the context's timer (kvcal execute --backend cuda) ---- */

/* Make the context's device current on the calling thread (cudaSetDevice; each host thread has its
 * own current device, 0 until set). */
int kgpu_ctx_bind(KgpuCtx *ctx, KvErr *e);

/* A timing event (cudaEventCreateWithFlags(cudaEventDefault)) on the context's device. */
typedef struct KgpuEvent KgpuEvent;
int kgpu_event_create(KgpuCtx *ctx, KgpuEvent **ev, KvErr *e);
void kgpu_event_destroy(KgpuEvent *ev); /* NULL is fine; the caller makes sure nothing waits on it */
/* Record ev on the context's stream: it completes when the work enqueued before it has. */
int kgpu_event_record(KgpuCtx *ctx, KgpuEvent *ev, KvErr *e);
/* The context's stream waits (on the device, the host does not) for ev's most recent record as
 * recorded when this is called (cudaStreamWaitEvent; a never-recorded event is no wait at all). */
int kgpu_stream_wait_event(KgpuCtx *ctx, KgpuEvent *ev, KvErr *e);
/* Wait on the host until ev completed (cudaEventSynchronize). */
int kgpu_event_sync(KgpuEvent *ev, KvErr *e);
/* Milliseconds from `from` to `to`, both recorded and completed (cudaEventElapsedTime; about
 * 0.5 us resolution; negative when `to` completed first). */
int kgpu_event_elapsed_ms(KgpuEvent *from, KgpuEvent *to, float *ms, KvErr *e);

/* Page-lock an existing host range (cudaHostRegister, cudaHostRegisterDefault) / undo it. */
int kgpu_host_register(void *hptr, size_t bytes, KvErr *e);
void kgpu_host_unregister(void *hptr);

/* ---- kernels (device pointers, asynchronous; layouts as in ref.h) ---- */

/* C[m][n] = A[m][k] · B[n][k]ᵀ, all of dtype dt, fp32 accumulation (cublasGemmEx). */
int kgpu_gemm(KgpuCtx *ctx, KgpuDtype dt, int m, int n, int k, const void *a, const void *b,
              void *c, KvErr *e);
int kgpu_attn_prefill(KgpuCtx *ctx, KgpuDtype dt, const void *q, const void *k, const void *v,
                      void *out, int n_new, int n_ctx, int h, int h_kv, int d, KvErr *e);
/* ctx_off_host: batch+1 HOST offsets (as in ref.h); uploaded to the context's scratch only when
 * they differ from the previous call's, so repeated timed calls enqueue no copy. */
int kgpu_attn_decode(KgpuCtx *ctx, KgpuDtype dt, const void *q, const void *k, const void *v,
                     void *out, int batch, const int *ctx_off_host, int h, int h_kv, int d, KvErr *e);
int kgpu_rmsnorm(KgpuCtx *ctx, KgpuDtype dt, const void *x, const void *w, void *y, int rows,
                 int dim, float eps, KvErr *e);
int kgpu_layernorm(KgpuCtx *ctx, KgpuDtype dt, const void *x, const void *w, const void *b,
                   void *y, int rows, int dim, float eps, KvErr *e);
int kgpu_gated_act(KgpuCtx *ctx, KgpuDtype dt, KActKind act, const void *gu, void *out, int rows,
                   int f, KvErr *e);
int kgpu_rope(KgpuCtx *ctx, KgpuDtype dt, void *x, int n_tokens, int n_heads, int d, int pos0,
              float theta, KvErr *e);
/* q: int8 [rows][group] (int4: uint8 [rows][group/2]); scale: float [rows]. */
int kgpu_quant_i8(KgpuCtx *ctx, KgpuDtype dt, const void *x, int8_t *q, float *scale, int rows,
                  int group, KvErr *e);
int kgpu_dequant_i8(KgpuCtx *ctx, KgpuDtype dt, const int8_t *q, const float *scale, void *x,
                    int rows, int group, KvErr *e);
int kgpu_quant_i4(KgpuCtx *ctx, KgpuDtype dt, const void *x, uint8_t *q, float *scale, int rows,
                  int group, KvErr *e);
int kgpu_dequant_i4(KgpuCtx *ctx, KgpuDtype dt, const uint8_t *q, const float *scale, void *x,
                    int rows, int group, KvErr *e);

#ifdef __cplusplus
}
#endif

#endif
