/* gpu_stub.c — gpu.h for builds without CUDA (make NO_CUDA=1, or no nvcc/cuBLAS found).
 *
 * Responsible for: every gpu.h function, each failing with "built without CUDA" (count -1, NULL
 * context), so that callers and tests link and report the GPU as unavailable.
 * Not responsible for: anything else. Compiled to an empty unit when KV_HAVE_CUDA is defined
 * (gpu.cu provides the real functions then).
 */
#include "kernels/gpu.h"

#ifndef KV_HAVE_CUDA

#include <stdlib.h>

#define KGPU_STUB_MSG "built without CUDA (rebuild with nvcc and cuBLAS available, without NO_CUDA=1)"

static int no_cuda(KvErr *e, const char *fn) { return kv_err(e, "%s: " KGPU_STUB_MSG, fn); }

const char *kgpu_dtype_name(KgpuDtype dt) { return dt == KGPU_F16 ? "fp16" : dt == KGPU_BF16 ? "bf16" : NULL; }

int kgpu_device_count(KvErr *e) { return no_cuda(e, "kgpu_device_count"); }

int kgpu_device_info(char *name, int len, char *driver, int dlen, char *cuda, int clen, KvErr *e)
{
    return no_cuda(e, "kgpu_device_info");
}

KgpuCtx *kgpu_ctx_create(int device, KvErr *e)
{
    no_cuda(e, "kgpu_ctx_create");
    return NULL;
}

void kgpu_ctx_destroy(KgpuCtx *ctx) {}
int kgpu_sync(KgpuCtx *ctx, KvErr *e) { return no_cuda(e, "kgpu_sync"); }
int kgpu_sm_count(const KgpuCtx *ctx) { return 0; }
void kgpu_set_attn_splits(KgpuCtx *ctx, int n) {}

int kgpu_malloc(KgpuCtx *ctx, size_t bytes, void **dptr, KvErr *e)
{
    if (dptr) *dptr = NULL;
    return no_cuda(e, "kgpu_malloc");
}

int kgpu_free(KgpuCtx *ctx, void *dptr, KvErr *e) { return no_cuda(e, "kgpu_free"); }
int kgpu_memset0(KgpuCtx *ctx, void *dptr, size_t bytes, KvErr *e) { return no_cuda(e, "kgpu_memset0"); }

int kgpu_host_alloc(size_t bytes, int pinned, void **hptr, KvErr *e)
{
    if (hptr) *hptr = NULL;
    return no_cuda(e, "kgpu_host_alloc");
}

void kgpu_host_free(void *hptr, int pinned) {}

int kgpu_copy_h2d(KgpuCtx *ctx, void *dst_dev, const void *src_host, size_t bytes, KvErr *e)
{
    return no_cuda(e, "kgpu_copy_h2d");
}

int kgpu_copy_d2h(KgpuCtx *ctx, void *dst_host, const void *src_dev, size_t bytes, KvErr *e)
{
    return no_cuda(e, "kgpu_copy_d2h");
}

int kgpu_copy_d2d(KgpuCtx *ctx, void *dst_dev, const void *src_dev, size_t bytes, KvErr *e)
{
    return no_cuda(e, "kgpu_copy_d2d");
}

int kgpu_upload_f32(KgpuCtx *ctx, KgpuDtype dt, void *dst_dev, const float *src_host, size_t n, KvErr *e)
{
    return no_cuda(e, "kgpu_upload_f32");
}

int kgpu_download_f32(KgpuCtx *ctx, KgpuDtype dt, float *dst_host, const void *src_dev, size_t n, KvErr *e)
{
    return no_cuda(e, "kgpu_download_f32");
}

int kgpu_timer_start(KgpuCtx *ctx, KvErr *e) { return no_cuda(e, "kgpu_timer_start"); }
int kgpu_timer_stop(KgpuCtx *ctx, float *ms, KvErr *e) { return no_cuda(e, "kgpu_timer_stop"); }

int kgpu_ctx_bind(KgpuCtx *ctx, KvErr *e) { return no_cuda(e, "kgpu_ctx_bind"); }

int kgpu_event_create(KgpuCtx *ctx, KgpuEvent **ev, KvErr *e)
{
    if (ev) *ev = NULL;
    return no_cuda(e, "kgpu_event_create");
}

void kgpu_event_destroy(KgpuEvent *ev) {}
int kgpu_event_record(KgpuCtx *ctx, KgpuEvent *ev, KvErr *e) { return no_cuda(e, "kgpu_event_record"); }
int kgpu_stream_wait_event(KgpuCtx *ctx, KgpuEvent *ev, KvErr *e) { return no_cuda(e, "kgpu_stream_wait_event"); }
int kgpu_event_sync(KgpuEvent *ev, KvErr *e) { return no_cuda(e, "kgpu_event_sync"); }
int kgpu_event_elapsed_ms(KgpuEvent *from, KgpuEvent *to, float *ms, KvErr *e) { return no_cuda(e, "kgpu_event_elapsed_ms"); }
int kgpu_host_register(void *hptr, size_t bytes, KvErr *e) { return no_cuda(e, "kgpu_host_register"); }
void kgpu_host_unregister(void *hptr) {}

int kgpu_gemm(KgpuCtx *ctx, KgpuDtype dt, int m, int n, int k, const void *a, const void *b, void *c, KvErr *e)
{
    return no_cuda(e, "kgpu_gemm");
}

int kgpu_attn_prefill(KgpuCtx *ctx, KgpuDtype dt, const void *q, const void *k, const void *v, void *out, int n_new,
                      int n_ctx, int h, int h_kv, int d, KvErr *e)
{
    return no_cuda(e, "kgpu_attn_prefill");
}

int kgpu_attn_decode(KgpuCtx *ctx, KgpuDtype dt, const void *q, const void *k, const void *v, void *out, int batch,
                     const int *ctx_off_host, int h, int h_kv, int d, KvErr *e)
{
    return no_cuda(e, "kgpu_attn_decode");
}

int kgpu_rmsnorm(KgpuCtx *ctx, KgpuDtype dt, const void *x, const void *w, void *y, int rows, int dim, float eps,
                 KvErr *e)
{
    return no_cuda(e, "kgpu_rmsnorm");
}

int kgpu_layernorm(KgpuCtx *ctx, KgpuDtype dt, const void *x, const void *w, const void *b, void *y, int rows,
                   int dim, float eps, KvErr *e)
{
    return no_cuda(e, "kgpu_layernorm");
}

int kgpu_gated_act(KgpuCtx *ctx, KgpuDtype dt, KActKind act, const void *gu, void *out, int rows, int f, KvErr *e)
{
    return no_cuda(e, "kgpu_gated_act");
}

int kgpu_rope(KgpuCtx *ctx, KgpuDtype dt, void *x, int n_tokens, int n_heads, int d, int pos0, float theta,
              KvErr *e)
{
    return no_cuda(e, "kgpu_rope");
}

int kgpu_quant_i8(KgpuCtx *ctx, KgpuDtype dt, const void *x, int8_t *q, float *scale, int rows, int group, KvErr *e)
{
    return no_cuda(e, "kgpu_quant_i8");
}

int kgpu_dequant_i8(KgpuCtx *ctx, KgpuDtype dt, const int8_t *q, const float *scale, void *x, int rows, int group,
                    KvErr *e)
{
    return no_cuda(e, "kgpu_dequant_i8");
}

int kgpu_quant_i4(KgpuCtx *ctx, KgpuDtype dt, const void *x, uint8_t *q, float *scale, int rows, int group,
                  KvErr *e)
{
    return no_cuda(e, "kgpu_quant_i4");
}

int kgpu_dequant_i4(KgpuCtx *ctx, KgpuDtype dt, const uint8_t *q, const float *scale, void *x, int rows, int group,
                    KvErr *e)
{
    return no_cuda(e, "kgpu_dequant_i4");
}

#else
typedef int kgpu_stub_unused_; /* gpu.cu provides the API; keep this unit non-empty */
#endif
