/* gpu.cu — the C API of gpu.h: context, memory, copies, timing, events and stream waits, cuBLAS
 * GEMMs, argument checks, and the calls that launch gpu_kernels.cuh's kernels.
 *
 * Responsible for: the host side around the kernels (errors as KvErr messages naming the call,
 * workspaces, the decode offsets on the device, the attention split plan applied).
 * Not responsible for: the kernels and their launch shapes (gpu_kernels.cuh), shapes and
 * repetitions (calibrate/), the reference semantics (ref.c).
 *
 * Build: the Makefile compiles this file with nvcc when nvcc and cuBLAS are found
 * (`make`, `make CUDA_ARCH=90` for sm_90 code), links -lcublas -lcudart, and defines KV_HAVE_CUDA
 * for the C files; `make NO_CUDA=1` uses gpu_stub.c instead. Tests: `build/kvtest kernels_gpu`
 * compares every kernel with its twin on random inputs (skipped without a device).
 */
#include "kernels/gpu_kernels.cuh"


struct KgpuCtx {
    int device;
    int sm_count;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaEvent_t ev_start, ev_stop;
    int timer_started;
    int forced_splits;
    float *ws;          /* attention split workspace */
    size_t ws_floats;
    int *d_off;         /* decode offsets on the device */
    int *h_off;         /* host copy of what d_off holds */
    int off_n, off_cap;
};

#define KG_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess)                                                                   \
            return kv_err(e, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call,                      \
                          cudaGetErrorString(err_), cudaGetErrorName(err_));                       \
    } while (0)

#define KG_BLAS(call)                                                                              \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                          \
            return kv_err(e, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cublasGetStatusString(st_)); \
    } while (0)

#define KG_NEED_CTX(fn)                                                                            \
    do {                                                                                           \
        if (!ctx) return kv_err(e, "%s: NULL context", fn);                                        \
    } while (0)

#define KG_NEED_DTYPE(fn, dt)                                                                      \
    do {                                                                                           \
        if ((dt) != KGPU_F16 && (dt) != KGPU_BF16)                                                 \
            return kv_err(e, "%s: dtype %d: expected KGPU_F16 or KGPU_BF16", fn, (int)(dt));       \
    } while (0)

extern "C" {

const char *kgpu_dtype_name(KgpuDtype dt)
{
    return dt == KGPU_F16 ? "fp16" : dt == KGPU_BF16 ? "bf16" : NULL;
}

int kgpu_device_count(KvErr *e)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        kv_err(e, "no CUDA device: %s (%s)", cudaGetErrorString(err), cudaGetErrorName(err));
        return 0;
    }
    if (n <= 0) {
        kv_err(e, "no CUDA device: cudaGetDeviceCount found none");
        return 0;
    }
    return n;
}

static void fmt_version(char *buf, int len, int v)
{
    if (buf && len > 0) snprintf(buf, (size_t)len, "%d.%d", v / 1000, (v % 1000) / 10);
}

int kgpu_device_info(char *name, int len, char *driver, int dlen, char *cuda, int clen, KvErr *e)
{
    int dev = 0, dv = 0, rv = 0;
    KG_CUDA(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    KG_CUDA(cudaGetDeviceProperties(&prop, dev));
    KG_CUDA(cudaDriverGetVersion(&dv));
    KG_CUDA(cudaRuntimeGetVersion(&rv));
    if (name && len > 0) snprintf(name, (size_t)len, "%s", prop.name);
    fmt_version(driver, dlen, dv);
    fmt_version(cuda, clen, rv);
    return 0;
}

static int ctx_init(KgpuCtx *c, int device, KvErr *e)
{
    int n = kgpu_device_count(e);
    if (n <= 0) return -1;
    if (device < 0 || device >= n)
        return kv_err(e, "kgpu_ctx_create: device %d: expected 0..%d", device, n - 1);
    c->device = device;
    KG_CUDA(cudaSetDevice(device));
    KG_CUDA(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, device));
    KG_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    KG_CUDA(cudaEventCreate(&c->ev_start));
    KG_CUDA(cudaEventCreate(&c->ev_stop));
    KG_BLAS(cublasCreate(&c->blas));
    KG_BLAS(cublasSetStream(c->blas, c->stream));
    return 0;
}

KgpuCtx *kgpu_ctx_create(int device, KvErr *e)
{
    KgpuCtx *c = (KgpuCtx *)calloc(1, sizeof *c);
    if (!c) {
        kv_err(e, "kgpu_ctx_create: out of memory");
        return NULL;
    }
    if (ctx_init(c, device, e) != 0) {
        kgpu_ctx_destroy(c);
        return NULL;
    }
    return c;
}

void kgpu_ctx_destroy(KgpuCtx *c)
{
    if (!c) return;
    if (c->stream) (void)cudaStreamSynchronize(c->stream);
    if (c->blas) (void)cublasDestroy(c->blas);
    if (c->ev_start) (void)cudaEventDestroy(c->ev_start);
    if (c->ev_stop) (void)cudaEventDestroy(c->ev_stop);
    if (c->ws) (void)cudaFree(c->ws);
    if (c->d_off) (void)cudaFree(c->d_off);
    if (c->stream) (void)cudaStreamDestroy(c->stream);
    free(c->h_off);
    free(c);
}

int kgpu_sync(KgpuCtx *ctx, KvErr *e)
{
    KG_NEED_CTX("kgpu_sync");
    KG_CUDA(cudaStreamSynchronize(ctx->stream));
    return 0;
}

int kgpu_sm_count(const KgpuCtx *ctx) { return ctx ? ctx->sm_count : 0; }

void kgpu_set_attn_splits(KgpuCtx *ctx, int n)
{
    if (ctx) ctx->forced_splits = n > 0 ? n : 0;
}

int kgpu_malloc(KgpuCtx *ctx, size_t bytes, void **dptr, KvErr *e)
{
    KG_NEED_CTX("kgpu_malloc");
    *dptr = NULL;
    KG_CUDA(cudaSetDevice(ctx->device));
    KG_CUDA(cudaMalloc(dptr, bytes ? bytes : 1));
    return 0;
}

int kgpu_free(KgpuCtx *ctx, void *dptr, KvErr *e)
{
    KG_NEED_CTX("kgpu_free");
    if (dptr) KG_CUDA(cudaFree(dptr));
    return 0;
}

int kgpu_memset0(KgpuCtx *ctx, void *dptr, size_t bytes, KvErr *e)
{
    KG_NEED_CTX("kgpu_memset0");
    if (bytes) KG_CUDA(cudaMemsetAsync(dptr, 0, bytes, ctx->stream));
    return 0;
}

int kgpu_host_alloc(size_t bytes, int pinned, void **hptr, KvErr *e)
{
    *hptr = NULL;
    if (pinned) {
        KG_CUDA(cudaMallocHost(hptr, bytes ? bytes : 1));
        return 0;
    }
    *hptr = malloc(bytes ? bytes : 1);
    if (!*hptr) return kv_err(e, "kgpu_host_alloc: out of memory for %zu bytes", bytes);
    return 0;
}

void kgpu_host_free(void *hptr, int pinned)
{
    if (!hptr) return;
    if (pinned)
        (void)cudaFreeHost(hptr);
    else
        free(hptr);
}

int kgpu_copy_h2d(KgpuCtx *ctx, void *dst_dev, const void *src_host, size_t bytes, KvErr *e)
{
    KG_NEED_CTX("kgpu_copy_h2d");
    if (bytes) KG_CUDA(cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, ctx->stream));
    return 0;
}

int kgpu_copy_d2h(KgpuCtx *ctx, void *dst_host, const void *src_dev, size_t bytes, KvErr *e)
{
    KG_NEED_CTX("kgpu_copy_d2h");
    if (bytes) KG_CUDA(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, ctx->stream));
    return 0;
}

int kgpu_copy_d2d(KgpuCtx *ctx, void *dst_dev, const void *src_dev, size_t bytes, KvErr *e)
{
    KG_NEED_CTX("kgpu_copy_d2d");
    if (bytes) KG_CUDA(cudaMemcpyAsync(dst_dev, src_dev, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    return 0;
}

int kgpu_upload_f32(KgpuCtx *ctx, KgpuDtype dt, void *dst_dev, const float *src_host, size_t n, KvErr *e)
{
    KG_NEED_CTX("kgpu_upload_f32");
    KG_NEED_DTYPE("kgpu_upload_f32", dt);
    if (n == 0) return 0;
    uint16_t *tmp = (uint16_t *)malloc(n * sizeof *tmp);
    if (!tmp) return kv_err(e, "kgpu_upload_f32: out of memory for %zu values", n);
    kref_f32_to_half_n(src_host, tmp, n, dt == KGPU_BF16);
    cudaError_t err = cudaMemcpyAsync(dst_dev, tmp, n * sizeof *tmp, cudaMemcpyHostToDevice, ctx->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(ctx->stream);
    free(tmp);
    KG_CUDA(err);
    return 0;
}

int kgpu_download_f32(KgpuCtx *ctx, KgpuDtype dt, float *dst_host, const void *src_dev, size_t n, KvErr *e)
{
    KG_NEED_CTX("kgpu_download_f32");
    KG_NEED_DTYPE("kgpu_download_f32", dt);
    if (n == 0) return 0;
    uint16_t *tmp = (uint16_t *)malloc(n * sizeof *tmp);
    if (!tmp) return kv_err(e, "kgpu_download_f32: out of memory for %zu values", n);
    cudaError_t err = cudaMemcpyAsync(tmp, src_dev, n * sizeof *tmp, cudaMemcpyDeviceToHost, ctx->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(ctx->stream);
    if (err == cudaSuccess) kref_half_to_f32_n(tmp, dst_host, n, dt == KGPU_BF16);
    free(tmp);
    KG_CUDA(err);
    return 0;
}

int kgpu_timer_start(KgpuCtx *ctx, KvErr *e)
{
    KG_NEED_CTX("kgpu_timer_start");
    KG_CUDA(cudaEventRecord(ctx->ev_start, ctx->stream));
    ctx->timer_started = 1;
    return 0;
}

int kgpu_timer_stop(KgpuCtx *ctx, float *ms, KvErr *e)
{
    KG_NEED_CTX("kgpu_timer_stop");
    if (!ctx->timer_started) return kv_err(e, "kgpu_timer_stop: kgpu_timer_start was not called");
    ctx->timer_started = 0;
    KG_CUDA(cudaEventRecord(ctx->ev_stop, ctx->stream));
    KG_CUDA(cudaEventSynchronize(ctx->ev_stop));
    KG_CUDA(cudaEventElapsedTime(ms, ctx->ev_start, ctx->ev_stop));
    return 0;
}

int kgpu_ctx_bind(KgpuCtx *ctx, KvErr *e)
{
    KG_NEED_CTX("kgpu_ctx_bind");
    KG_CUDA(cudaSetDevice(ctx->device));
    return 0;
}

/* a KgpuEvent is a cudaEvent_t (an opaque pointer) under another name */
static cudaEvent_t ev_of(KgpuEvent *ev) { return reinterpret_cast<cudaEvent_t>(ev); }

int kgpu_event_create(KgpuCtx *ctx, KgpuEvent **ev, KvErr *e)
{
    *ev = NULL;
    KG_NEED_CTX("kgpu_event_create");
    KG_CUDA(cudaSetDevice(ctx->device));
    cudaEvent_t ce = NULL;
    KG_CUDA(cudaEventCreateWithFlags(&ce, cudaEventDefault));
    *ev = reinterpret_cast<KgpuEvent *>(ce);
    return 0;
}

void kgpu_event_destroy(KgpuEvent *ev)
{
    if (ev) (void)cudaEventDestroy(ev_of(ev));
}

int kgpu_event_record(KgpuCtx *ctx, KgpuEvent *ev, KvErr *e)
{
    KG_NEED_CTX("kgpu_event_record");
    if (!ev) return kv_err(e, "kgpu_event_record: NULL event");
    KG_CUDA(cudaEventRecord(ev_of(ev), ctx->stream));
    return 0;
}

int kgpu_stream_wait_event(KgpuCtx *ctx, KgpuEvent *ev, KvErr *e)
{
    KG_NEED_CTX("kgpu_stream_wait_event");
    if (!ev) return kv_err(e, "kgpu_stream_wait_event: NULL event");
    KG_CUDA(cudaStreamWaitEvent(ctx->stream, ev_of(ev), 0));
    return 0;
}

int kgpu_event_sync(KgpuEvent *ev, KvErr *e)
{
    if (!ev) return kv_err(e, "kgpu_event_sync: NULL event");
    KG_CUDA(cudaEventSynchronize(ev_of(ev)));
    return 0;
}

int kgpu_event_elapsed_ms(KgpuEvent *from, KgpuEvent *to, float *ms, KvErr *e)
{
    if (!from || !to) return kv_err(e, "kgpu_event_elapsed_ms: NULL event");
    KG_CUDA(cudaEventElapsedTime(ms, ev_of(from), ev_of(to)));
    return 0;
}

int kgpu_host_register(void *hptr, size_t bytes, KvErr *e)
{
    if (!hptr || !bytes) return kv_err(e, "kgpu_host_register: %s", !hptr ? "NULL pointer" : "0 bytes");
    KG_CUDA(cudaHostRegister(hptr, bytes, cudaHostRegisterDefault));
    return 0;
}

void kgpu_host_unregister(void *hptr)
{
    if (hptr) (void)cudaHostUnregister(hptr);
}

int kgpu_gemm(KgpuCtx *ctx, KgpuDtype dt, int m, int n, int k, const void *a, const void *b, void *c, KvErr *e)
{
    KG_NEED_CTX("kgpu_gemm");
    KG_NEED_DTYPE("kgpu_gemm", dt);
    if (kref_gemm_check(m, n, k, e) != 0) return -1;
    if (m == 0 || n == 0) return 0;
    if (k == 0) return kgpu_memset0(ctx, c, (size_t)m * n * 2, e);
    const cudaDataType ty = dt == KGPU_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float alpha = 1.0f, beta = 0.0f;
    /* Row-major C[m][n] = A[m][k]·B[n][k]ᵀ is column-major Cᵀ[n][m] = op(B)·A with B read as a
     * column-major k×n matrix (ld k) transposed and A as a column-major k×m matrix (ld k). */
    KG_BLAS(cublasGemmEx(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, ty, k, a, ty, k, &beta, c, ty, n,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

/* Grow the split workspace to at least `floats`. */
static int ensure_ws(KgpuCtx *ctx, size_t floats, KvErr *e)
{
    if (floats <= ctx->ws_floats) return 0;
    if (ctx->ws) {
        KG_CUDA(cudaStreamSynchronize(ctx->stream));
        KG_CUDA(cudaFree(ctx->ws));
        ctx->ws = NULL;
        ctx->ws_floats = 0;
    }
    KG_CUDA(cudaMalloc((void **)&ctx->ws, floats * sizeof(float)));
    ctx->ws_floats = floats;
    return 0;
}

static int attn_go(KgpuCtx *ctx, KgpuDtype dt, AttnArgs *a, dim3 grid, size_t n_rows, int max_keys, KvErr *e)
{
    attn_plan((long long)grid.x * grid.y, max_keys, ctx->forced_splits, ctx->sm_count, &a->n_split, &a->split_keys);
    const size_t ws = attn_ws_floats(a, n_rows);
    if (ws > 0) {
        if (ensure_ws(ctx, ws, e) != 0) return -1;
        attn_ws_set(a, ctx->ws, n_rows);
    }
    KG_CUDA(KGPU_DISPATCH(dt == KGPU_BF16, launch_attn_t)(*a, grid, n_rows, ctx->stream));
    return 0;
}

static int attn_common_check(const char *fn, KgpuCtx *ctx, KgpuDtype dt, int d, KvErr *e)
{
    KG_NEED_CTX(fn);
    KG_NEED_DTYPE(fn, dt);
    if (d > KGPU_MAX_HEAD_DIM) return kv_err(e, "%s: head dim d=%d: expected <= %d", fn, d, KGPU_MAX_HEAD_DIM);
    return 0;
}

int kgpu_attn_prefill(KgpuCtx *ctx, KgpuDtype dt, const void *q, const void *k, const void *v, void *out, int n_new,
                      int n_ctx, int h, int h_kv, int d, KvErr *e)
{
    if (kref_attn_check(n_new, h, h_kv, d, e) != 0) return -1;
    if (n_ctx < 0) return kv_err(e, "attention prefill: n_ctx=%d: expected >= 0", n_ctx);
    if (attn_common_check("kgpu_attn_prefill", ctx, dt, d, e) != 0) return -1;
    if (n_new == 0) return 0;
    AttnArgs a;
    dim3 grid;
    size_t n_rows;
    int max_keys;
    attn_args_prefill(&a, &grid, &n_rows, &max_keys, q, k, v, out, n_new, n_ctx, h, h_kv, d);
    return attn_go(ctx, dt, &a, grid, n_rows, max_keys, e);
}

/* Make the device copy of the decode offsets equal ctx_off_host (skipped when it already is). */
static int sync_offsets(KgpuCtx *ctx, const int *ctx_off_host, int n_off, KvErr *e)
{
    if (ctx->off_n == n_off && memcmp(ctx->h_off, ctx_off_host, (size_t)n_off * sizeof(int)) == 0) return 0;
    /* A previous upload was staged from h_off: let it finish before h_off changes. */
    KG_CUDA(cudaStreamSynchronize(ctx->stream));
    ctx->off_n = 0;
    if (n_off > ctx->off_cap) {
        int *nh = (int *)realloc(ctx->h_off, (size_t)n_off * sizeof(int));
        if (!nh) return kv_err(e, "kgpu_attn_decode: out of memory for %d offsets", n_off);
        ctx->h_off = nh;
        if (ctx->d_off) KG_CUDA(cudaFree(ctx->d_off));
        ctx->d_off = NULL;
        ctx->off_cap = 0;
        KG_CUDA(cudaMalloc((void **)&ctx->d_off, (size_t)n_off * sizeof(int)));
        ctx->off_cap = n_off;
    }
    memcpy(ctx->h_off, ctx_off_host, (size_t)n_off * sizeof(int));
    KG_CUDA(cudaMemcpyAsync(ctx->d_off, ctx->h_off, (size_t)n_off * sizeof(int), cudaMemcpyHostToDevice,
                            ctx->stream));
    ctx->off_n = n_off;
    return 0;
}

int kgpu_attn_decode(KgpuCtx *ctx, KgpuDtype dt, const void *q, const void *k, const void *v, void *out, int batch,
                     const int *ctx_off_host, int h, int h_kv, int d, KvErr *e)
{
    if (kref_attn_decode_check(batch, ctx_off_host, h, h_kv, d, e) != 0) return -1;
    if (attn_common_check("kgpu_attn_decode", ctx, dt, d, e) != 0) return -1;
    if (batch == 0) return 0;
    if (sync_offsets(ctx, ctx_off_host, batch + 1, e) != 0) return -1;
    AttnArgs a;
    dim3 grid;
    size_t n_rows;
    int max_keys;
    attn_args_decode(&a, &grid, &n_rows, &max_keys, q, k, v, out, batch, ctx->d_off, ctx_off_host, h, h_kv, d);
    return attn_go(ctx, dt, &a, grid, n_rows, max_keys, e);
}

static int rows_check(const char *fn, KgpuCtx *ctx, KgpuDtype dt, int rows, int dim, KvErr *e)
{
    KG_NEED_CTX(fn);
    KG_NEED_DTYPE(fn, dt);
    if (rows < 0 || dim < 1) return kv_err(e, "%s: rows=%d dim=%d: expected rows >= 0, dim >= 1", fn, rows, dim);
    return 0;
}

int kgpu_rmsnorm(KgpuCtx *ctx, KgpuDtype dt, const void *x, const void *w, void *y, int rows, int dim, float eps,
                 KvErr *e)
{
    if (rows_check("kgpu_rmsnorm", ctx, dt, rows, dim, e) != 0) return -1;
    if (rows == 0) return 0;
    KG_CUDA(KGPU_DISPATCH(dt == KGPU_BF16, launch_rmsnorm_t)(x, w, y, rows, dim, eps, ctx->stream));
    return 0;
}

int kgpu_layernorm(KgpuCtx *ctx, KgpuDtype dt, const void *x, const void *w, const void *b, void *y, int rows,
                   int dim, float eps, KvErr *e)
{
    if (rows_check("kgpu_layernorm", ctx, dt, rows, dim, e) != 0) return -1;
    if (rows == 0) return 0;
    KG_CUDA(KGPU_DISPATCH(dt == KGPU_BF16, launch_layernorm_t)(x, w, b, y, rows, dim, eps, ctx->stream));
    return 0;
}

int kgpu_gated_act(KgpuCtx *ctx, KgpuDtype dt, KActKind act, const void *gu, void *out, int rows, int f, KvErr *e)
{
    if (rows_check("kgpu_gated_act", ctx, dt, rows, f, e) != 0) return -1;
    if (act != KACT_SILU && act != KACT_GELU_TANH)
        return kv_err(e, "gated activation: kind %d: expected KACT_SILU or KACT_GELU_TANH", (int)act);
    if (rows == 0) return 0;
    KG_CUDA(KGPU_DISPATCH(dt == KGPU_BF16, launch_gated_t)((int)act, gu, out, rows, f, ctx->stream));
    return 0;
}

int kgpu_rope(KgpuCtx *ctx, KgpuDtype dt, void *x, int n_tokens, int n_heads, int d, int pos0, float theta,
              KvErr *e)
{
    if (kref_rope_check(n_tokens, n_heads, d, theta, e) != 0) return -1;
    KG_NEED_CTX("kgpu_rope");
    KG_NEED_DTYPE("kgpu_rope", dt);
    if (n_tokens == 0 || n_heads == 0) return 0;
    KG_CUDA(KGPU_DISPATCH(dt == KGPU_BF16, launch_rope_t)(x, n_tokens, n_heads, d, pos0, theta, ctx->stream));
    return 0;
}

static int quant_go(const char *fn, KgpuCtx *ctx, KgpuDtype dt, const void *x, void *q, float *scale, int rows,
                    int group, int int4, KvErr *e)
{
    if (kref_quant_check(rows, group, int4, e) != 0) return -1;
    KG_NEED_CTX(fn);
    KG_NEED_DTYPE(fn, dt);
    if (rows == 0) return 0;
    KG_CUDA(KGPU_DISPATCH(dt == KGPU_BF16, launch_quant_t)(x, q, scale, rows, group, int4, ctx->stream));
    return 0;
}

static int dequant_go(const char *fn, KgpuCtx *ctx, KgpuDtype dt, const void *q, const float *scale, void *x,
                      int rows, int group, int int4, KvErr *e)
{
    if (kref_quant_check(rows, group, int4, e) != 0) return -1;
    KG_NEED_CTX(fn);
    KG_NEED_DTYPE(fn, dt);
    if (rows == 0) return 0;
    KG_CUDA(KGPU_DISPATCH(dt == KGPU_BF16, launch_dequant_t)(q, scale, x, rows, group, int4, ctx->stream));
    return 0;
}

int kgpu_quant_i8(KgpuCtx *ctx, KgpuDtype dt, const void *x, int8_t *q, float *scale, int rows, int group, KvErr *e)
{
    return quant_go("kgpu_quant_i8", ctx, dt, x, q, scale, rows, group, 0, e);
}

int kgpu_dequant_i8(KgpuCtx *ctx, KgpuDtype dt, const int8_t *q, const float *scale, void *x, int rows, int group,
                    KvErr *e)
{
    return dequant_go("kgpu_dequant_i8", ctx, dt, q, scale, x, rows, group, 0, e);
}

int kgpu_quant_i4(KgpuCtx *ctx, KgpuDtype dt, const void *x, uint8_t *q, float *scale, int rows, int group,
                  KvErr *e)
{
    return quant_go("kgpu_quant_i4", ctx, dt, x, q, scale, rows, group, 1, e);
}

int kgpu_dequant_i4(KgpuCtx *ctx, KgpuDtype dt, const uint8_t *q, const float *scale, void *x, int rows, int group,
                    KvErr *e)
{
    return dequant_go("kgpu_dequant_i4", ctx, dt, q, scale, x, rows, group, 1, e);
}

} /* extern "C" */
