/* probe_cuda.c — the cuda backend of probe.h: kgpu kernels (kernels/gpu.h) on device buffers of
 * fp16 or bf16, timed with the context's CUDA events.
 *
 * Responsible for: finding the device (a clear "no CUDA device: ..." when there is none, also in a
 * build without CUDA, where gpu_stub.c answers), device buffers filled with small random values
 * (one block converted on the host and uploaded, then doubled with device-to-device copies), the
 * ProbeDevOps table over kgpu_*, and the cold-L2 flush: a memset of a 256 MiB buffer (more than
 * twice the L2 of any catalogued GPU: A100 40 MB, H100/H200 50–60 MB, B200 126 MB) enqueued
 * before the start event, so it is not timed.
 * Also the cuda replay pieces of probe.h (kvcal execute --backend cuda): streams of their own,
 * events, stream waits, copies on a given stream, pinned host memory aligned for O_DIRECT.
 * Not responsible for: shapes, repetitions, statistics (calib_run.c, timing.c), the link probes'
 * copies between host and device (probe_io.c).
 * Invariants: everything is enqueued on the one stream of the context, so the start event is
 * recorded after the flush and the stop event after the timed kernels; timer_stop waits for the
 * stop event. This file is plain C and compiles with or without CUDA.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gpu.h"
#include "calibrate/probe.h"

#define CUDA_FLUSH_BYTES ((size_t)256 << 20)
#define CUDA_FILL_BLOCK ((size_t)1 << 20) /* bytes of random values uploaded before doubling */

typedef struct CudaImpl {
    KgpuCtx *ctx;
    KgpuDtype dt;
    void *flush;
    ProbeBufs bl;
} CudaImpl;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Fill `bytes` of a device buffer: a host block of random values, then doubling d2d copies. */
static int fill_device(CudaImpl *c, void *dbuf, size_t bytes, ProbeFill fill, KvErr *e)
{
    if (bytes == 0) return 0;
    size_t first = bytes < CUDA_FILL_BLOCK ? bytes : CUDA_FILL_BLOCK;
    unsigned char *h = malloc(first);
    float *tmp = malloc(first / 2 * sizeof(float) + sizeof(float));
    if (!h || !tmp) {
        free(h);
        free(tmp);
        return kv_err(e, "cuda probe: out of host memory for the fill block");
    }
    uint64_t s = 0x9E3779B97F4A7C15ULL ^ (uint64_t)bytes ^ ((uint64_t)fill << 40);
    if (fill == PROBE_FILL_I8) {
        for (size_t i = 0; i < first; i++) h[i] = (unsigned char)(int8_t)((int)(rng_next(&s) % 255) - 127);
    } else if (fill == PROBE_FILL_SCALE) {
        memset(h, 0, first);
        float *f = (float *)(void *)h;
        for (size_t i = 0; i < first / 4; i++) f[i] = 0.001f + 0.001f * (float)((rng_next(&s) >> 40) * (1.0 / 16777216.0));
    } else {
        memset(h, 0, first);
        size_t n = first / 2;
        for (size_t i = 0; i < n; i++) tmp[i] = -0.05f + 0.1f * (float)((rng_next(&s) >> 40) * (1.0 / 16777216.0));
        kref_f32_to_half_n(tmp, (uint16_t *)(void *)h, n, c->dt == KGPU_BF16);
    }
    int rc = kgpu_copy_h2d(c->ctx, dbuf, h, first, e);
    if (rc == 0) rc = kgpu_sync(c->ctx, e); /* pageable source: wait before freeing it */
    free(h);
    free(tmp);
    if (rc != 0) return -1;
    unsigned char *d = dbuf;
    for (size_t done = first; done < bytes;) {
        size_t len = bytes - done < done ? bytes - done : done;
        if (kgpu_copy_d2d(c->ctx, d + done, d, len, e) != 0) return -1;
        done += len;
    }
    return kgpu_sync(c->ctx, e);
}

static int cuda_alloc(ProbeDev *d, size_t bytes, ProbeFill fill, void **buf, KvErr *e)
{
    CudaImpl *c = d->impl;
    *buf = NULL;
    size_t rounded = (bytes + 255) / 256 * 256;
    if (rounded == 0) rounded = 256;
    void *p = NULL;
    if (kgpu_malloc(c->ctx, rounded, &p, e) != 0)
        return kv_err_prefix(e, "cuda probe: %zu bytes (%zu MiB already in use): ", bytes, d->bytes_in_use >> 20);
    if (fill_device(c, p, rounded, fill, e) != 0) {
        KvErr e2;
        kgpu_free(c->ctx, p, &e2);
        return -1;
    }
    if (probe_bufs_add(&c->bl, p, bytes, e) != 0) {
        KvErr e2;
        kgpu_free(c->ctx, p, &e2);
        return -1;
    }
    d->bytes_in_use += bytes;
    *buf = p;
    return 0;
}

static void cuda_release(ProbeDev *d, void *buf)
{
    CudaImpl *c = d->impl;
    if (!buf || !c) return;
    size_t bytes;
    if (probe_bufs_remove(&c->bl, buf, &bytes)) {
        KvErr e2;
        kgpu_free(c->ctx, buf, &e2);
        d->bytes_in_use -= bytes;
    }
}

static int cuda_gemm(ProbeDev *d, int m, int n, int k, const void *a, const void *b, void *out, KvErr *e)
{
    CudaImpl *c = d->impl;
    return kgpu_gemm(c->ctx, c->dt, m, n, k, a, b, out, e);
}

static int cuda_attn_prefill(ProbeDev *d, const void *q, const void *k, const void *v, void *out, int n_new,
                             int n_ctx, int h, int h_kv, int dh, KvErr *e)
{
    CudaImpl *c = d->impl;
    return kgpu_attn_prefill(c->ctx, c->dt, q, k, v, out, n_new, n_ctx, h, h_kv, dh, e);
}

static int cuda_attn_decode(ProbeDev *d, const void *q, const void *k, const void *v, void *out, int batch,
                            const int *ctx_off, int h, int h_kv, int dh, KvErr *e)
{
    CudaImpl *c = d->impl;
    return kgpu_attn_decode(c->ctx, c->dt, q, k, v, out, batch, ctx_off, h, h_kv, dh, e);
}

static int cuda_norm(ProbeDev *d, int layernorm, const void *x, const void *w, const void *b, void *y, int rows,
                     int dim, KvErr *e)
{
    CudaImpl *c = d->impl;
    if (layernorm) return kgpu_layernorm(c->ctx, c->dt, x, w, b, y, rows, dim, 1e-5f, e);
    return kgpu_rmsnorm(c->ctx, c->dt, x, w, y, rows, dim, 1e-6f, e);
}

static int cuda_act(ProbeDev *d, KActKind act, const void *gu, void *out, int rows, int f, KvErr *e)
{
    CudaImpl *c = d->impl;
    return kgpu_gated_act(c->ctx, c->dt, act, gu, out, rows, f, e);
}

static int cuda_rope(ProbeDev *d, void *x, int n_tokens, int n_heads, int dh, KvErr *e)
{
    CudaImpl *c = d->impl;
    return kgpu_rope(c->ctx, c->dt, x, n_tokens, n_heads, dh, 0, 10000.0f, e);
}

static int cuda_quant(ProbeDev *d, const void *x, void *q, void *scale, int rows, int group, KvErr *e)
{
    CudaImpl *c = d->impl;
    return kgpu_quant_i8(c->ctx, c->dt, x, q, scale, rows, group, e);
}

static int cuda_dequant(ProbeDev *d, const void *q, const void *scale, void *x, int rows, int group, KvErr *e)
{
    CudaImpl *c = d->impl;
    return kgpu_dequant_i8(c->ctx, c->dt, q, scale, x, rows, group, e);
}

static int cuda_timer_start(ProbeDev *d, KvErr *e)
{
    CudaImpl *c = d->impl;
    return kgpu_timer_start(c->ctx, e);
}

static int cuda_timer_stop(ProbeDev *d, double *ns, KvErr *e)
{
    CudaImpl *c = d->impl;
    float ms = 0;
    if (kgpu_timer_stop(c->ctx, &ms, e) != 0) return -1;
    *ns = (double)ms * 1e6;
    return 0;
}

static int cuda_flush(ProbeDev *d, KvErr *e)
{
    CudaImpl *c = d->impl;
    return kgpu_memset0(c->ctx, c->flush, CUDA_FLUSH_BYTES, e);
}

static void cuda_close(ProbeDev *d)
{
    CudaImpl *c = d->impl;
    if (!c) return;
    KvErr e2;
    for (int i = 0; i < c->bl.n; i++) kgpu_free(c->ctx, c->bl.bufs[i], &e2);
    if (c->flush) kgpu_free(c->ctx, c->flush, &e2);
    kgpu_ctx_destroy(c->ctx);
    probe_bufs_free(&c->bl);
    free(c);
    d->impl = NULL;
    d->bytes_in_use = 0;
}

static const ProbeDevOps g_cuda_ops = {
    .alloc = cuda_alloc,
    .release = cuda_release,
    .gemm = cuda_gemm,
    .attn_prefill = cuda_attn_prefill,
    .attn_decode = cuda_attn_decode,
    .norm = cuda_norm,
    .act = cuda_act,
    .rope = cuda_rope,
    .quant = cuda_quant,
    .dequant = cuda_dequant,
    .timer_start = cuda_timer_start,
    .timer_stop = cuda_timer_stop,
    .flush_cache = cuda_flush,
    .close = cuda_close,
};

/* ---- cuda replay pieces (probe.h): a ProbeStream is a KgpuCtx (its stream; a stream of its own
 * is a context of its own, its cuBLAS handle unused), a ProbeEvent a KgpuEvent */

static KgpuCtx *ctx_of(ProbeStream *s) { return (KgpuCtx *)(void *)s; }
static KgpuEvent *kev_of(ProbeEvent *ev) { return (KgpuEvent *)(void *)ev; }

/* d's context, or NULL with a message when d is not an open cuda ProbeDev */
static KgpuCtx *dev_ctx(ProbeDev *d, const char *fn, KvErr *e)
{
    if (!d || d->ops != &g_cuda_ops || !d->impl) {
        kv_err(e, "%s: not an open cuda device", fn);
        return NULL;
    }
    return ((CudaImpl *)d->impl)->ctx;
}

ProbeStream *probe_cuda_stream(ProbeDev *d)
{
    KvErr e2;
    return (ProbeStream *)(void *)dev_ctx(d, "probe_cuda_stream", &e2);
}

ProbeStream *probe_cuda_stream_open(ProbeDev *d, KvErr *e)
{
    if (!dev_ctx(d, "probe_cuda_stream_open", e)) return NULL;
    KgpuCtx *c = kgpu_ctx_create(d->cuda_device, e);
    if (!c) kv_err_prefix(e, "cuda probe: a copy stream: ");
    return (ProbeStream *)(void *)c;
}

void probe_cuda_stream_close(ProbeStream *s) { kgpu_ctx_destroy(ctx_of(s)); }

int probe_cuda_bind(ProbeDev *d, KvErr *e)
{
    KgpuCtx *c = dev_ctx(d, "probe_cuda_bind", e);
    return c ? kgpu_ctx_bind(c, e) : -1;
}

int probe_cuda_copy(ProbeStream *s, void *dst, const void *src, size_t bytes, int h2d, KvErr *e)
{
    return h2d ? kgpu_copy_h2d(ctx_of(s), dst, src, bytes, e) : kgpu_copy_d2d(ctx_of(s), dst, src, bytes, e);
}

int probe_cuda_sync(ProbeStream *s, KvErr *e) { return kgpu_sync(ctx_of(s), e); }

ProbeEvent *probe_cuda_event_new(ProbeDev *d, KvErr *e)
{
    KgpuCtx *c = dev_ctx(d, "probe_cuda_event_new", e);
    KgpuEvent *ev = NULL;
    if (!c || kgpu_event_create(c, &ev, e) != 0) return NULL;
    return (ProbeEvent *)(void *)ev;
}

void probe_cuda_event_free(ProbeEvent *ev) { kgpu_event_destroy(kev_of(ev)); }
int probe_cuda_record(ProbeStream *s, ProbeEvent *ev, KvErr *e) { return kgpu_event_record(ctx_of(s), kev_of(ev), e); }
int probe_cuda_wait(ProbeStream *s, ProbeEvent *ev, KvErr *e) { return kgpu_stream_wait_event(ctx_of(s), kev_of(ev), e); }
int probe_cuda_event_sync(ProbeEvent *ev, KvErr *e) { return kgpu_event_sync(kev_of(ev), e); }

int probe_cuda_elapsed_ns(ProbeEvent *from, ProbeEvent *to, int64_t *ns, KvErr *e)
{
    float ms = 0;
    if (kgpu_event_elapsed_ms(kev_of(from), kev_of(to), &ms, e) != 0) return -1;
    *ns = (int64_t)llround((double)ms * 1e6);
    return 0;
}

int probe_cuda_pinned_alloc(ProbePinned *b, size_t bytes, size_t align, KvErr *e)
{
    memset(b, 0, sizeof *b);
    if (bytes == 0) bytes = 1;
    if (align == 0 || (align & (align - 1)))
        return kv_err(e, "cuda probe: pinned alignment %zu: expected a power of two", align);
    void *p = NULL;
    /* cudaMallocHost is cudaHostAlloc(cudaHostAllocDefault) */
    if (kgpu_host_alloc(bytes, 1, &p, e) != 0) return kv_err_prefix(e, "cuda probe: %zu bytes of pinned memory: ", bytes);
    if (((uintptr_t)p & (align - 1)) == 0) {
        *b = (ProbePinned){p, bytes, 0};
        return 0;
    }
    kgpu_host_free(p, 1); /* not aligned as O_DIRECT needs: an aligned allocation, page-locked */
    p = NULL;
    if (posix_memalign(&p, align, bytes) != 0) return kv_err(e, "cuda probe: out of host memory for %zu bytes", bytes);
    if (kgpu_host_register(p, bytes, e) != 0) {
        free(p);
        return kv_err_prefix(e, "cuda probe: %zu bytes of pinned memory: ", bytes);
    }
    *b = (ProbePinned){p, bytes, 1};
    return 0;
}

void probe_cuda_pinned_free(ProbePinned *b)
{
    if (!b->p) return;
    if (b->registered) {
        kgpu_host_unregister(b->p);
        free(b->p);
    } else {
        kgpu_host_free(b->p, 1);
    }
    memset(b, 0, sizeof *b);
}

int probe_cuda_open(ProbeDev *d, int device, KvDtype dtype, KvErr *e)
{
    memset(d, 0, sizeof *d);
    if (dtype != KV_DT_FP16 && dtype != KV_DT_BF16)
        return kv_err(e, "cuda probe: dtype %s: expected fp16 or bf16", kv_dtype_name(dtype));
    KvErr ce = {{0}};
    int n = kgpu_device_count(&ce);
    if (n == 0) return kv_err(e, "%s", ce.msg); /* already "no CUDA device: <reason>" */
    if (n < 0) return kv_err(e, "no CUDA device: %s", ce.msg);
    if (device < 0 || device >= n) return kv_err(e, "cuda probe: device %d: expected 0..%d", device, n - 1);
    CudaImpl *c = calloc(1, sizeof *c);
    if (!c) return kv_err(e, "cuda probe: out of memory");
    c->dt = dtype == KV_DT_BF16 ? KGPU_BF16 : KGPU_F16;
    if (!(c->ctx = kgpu_ctx_create(device, e))) {
        free(c);
        return -1;
    }
    d->ops = &g_cuda_ops;
    d->impl = c;
    snprintf(d->backend, sizeof d->backend, "cuda");
    d->elem_bytes = 2;
    d->cuda_device = device;
    if (kgpu_device_info(d->device, sizeof d->device, d->driver, sizeof d->driver, d->cuda, sizeof d->cuda, e) != 0 ||
        kgpu_malloc(c->ctx, CUDA_FLUSH_BYTES, &c->flush, e) != 0 || kgpu_memset0(c->ctx, c->flush, CUDA_FLUSH_BYTES, e) != 0 ||
        kgpu_sync(c->ctx, e) != 0) {
        probe_close(d);
        return -1;
    }
    snprintf(d->info, sizeof d->info, "%s, %d SMs; cuBLAS GEMM + own attention kernels, %s; cold L2 before GEMM/attention/layer reps",
             d->device, kgpu_sm_count(c->ctx), kgpu_dtype_name(c->dt));
    return 0;
}
