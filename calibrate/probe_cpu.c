/* probe_cpu.c — the cpu backend of probe.h: kcpu kernels (kernels/cpu.h) on host buffers, timed
 * with CLOCK_MONOTONIC.
 *
 * Responsible for: host buffers (64-byte aligned, filled with small random values by writing one
 * block and replicating it, so every page is touched before timing), the ProbeDevOps table over
 * kcpu_*, the device description (CPU model from /proc/cpuinfo, attention threads, the library
 * behind kcpu_gemm).
 * Also holds probe_close, which closes either backend through its ops table.
 * Not responsible for: shapes, repetitions, statistics (calib_run.c, timing.c).
 * Invariants: every buffer handed out is in the backend's list until released or closed; the
 * kernels are synchronous, so timer_stop needs no wait. No cache flush: a flush sweep woke
 * OpenBLAS's workers late and cost 6x the run; a small model's weights that fit the LLC are made
 * cold instead by rotating over copies of them (kvcal run --cold-weights, calib_recipe.h), and
 * the small elementwise ops run on the previous kernel's hot output in a real layer too.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu.h"
#include "calibrate/probe.h"

typedef struct CpuImpl {
    ProbeBufs bl;
    int64_t t0_ns;
    int timing;
} CpuImpl;

/* xorshift64*: deterministic fill values */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Fill `bytes` of buf: one block of random values, then copies of it. */
static void fill_host(void *buf, size_t bytes, ProbeFill fill, size_t elem_bytes)
{
    enum { BLOCK = 1 << 16 };
    uint64_t s = 0x9E3779B97F4A7C15ULL ^ (uint64_t)bytes ^ ((uint64_t)fill << 40);
    size_t first = bytes < BLOCK ? bytes : BLOCK;
    unsigned char *p = buf;
    if (fill == PROBE_FILL_I8) {
        for (size_t i = 0; i < first; i++) p[i] = (unsigned char)(int8_t)((int)(rng_next(&s) % 255) - 127);
    } else if (fill == PROBE_FILL_SCALE || elem_bytes == 4) {
        float lo = fill == PROBE_FILL_SCALE ? 0.001f : -0.05f, span = fill == PROBE_FILL_SCALE ? 0.001f : 0.1f;
        float *f = buf;
        for (size_t i = 0; i < first / 4; i++) f[i] = lo + span * (float)((rng_next(&s) >> 40) * (1.0 / 16777216.0));
        memset(p + first / 4 * 4, 0, first % 4);
    }
    for (size_t off = first; off < bytes; off += first) {
        size_t len = bytes - off < first ? bytes - off : first;
        memcpy(p + off, p, len);
    }
}

static int cpu_alloc(ProbeDev *d, size_t bytes, ProbeFill fill, void **buf, KvErr *e)
{
    CpuImpl *c = d->impl;
    *buf = NULL;
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0 || !p)
        return kv_err(e, "cpu probe: cannot allocate %zu bytes of host memory", bytes);
    fill_host(p, rounded ? rounded : 64, fill, d->elem_bytes);
    if (probe_bufs_add(&c->bl, p, bytes, e) != 0) {
        free(p);
        return -1;
    }
    d->bytes_in_use += bytes;
    *buf = p;
    return 0;
}

static void cpu_release(ProbeDev *d, void *buf)
{
    CpuImpl *c = d->impl;
    if (!buf || !c) return;
    size_t bytes;
    if (probe_bufs_remove(&c->bl, buf, &bytes)) {
        d->bytes_in_use -= bytes;
        free(buf);
    }
}

static int cpu_gemm(ProbeDev *d, int m, int n, int k, const void *a, const void *b, void *c, KvErr *e)
{
    return kcpu_gemm(a, b, c, m, n, k, e);
}

static int cpu_attn_prefill(ProbeDev *d, const void *q, const void *k, const void *v, void *out, int n_new,
                            int n_ctx, int h, int h_kv, int dh, KvErr *e)
{
    return kcpu_attn_prefill(q, k, v, out, n_new, n_ctx, h, h_kv, dh, e);
}

static int cpu_attn_decode(ProbeDev *d, const void *q, const void *k, const void *v, void *out, int batch,
                           const int *ctx_off, int h, int h_kv, int dh, KvErr *e)
{
    return kcpu_attn_decode(q, k, v, out, batch, ctx_off, h, h_kv, dh, e);
}

static int cpu_norm(ProbeDev *d, int layernorm, const void *x, const void *w, const void *b, void *y, int rows,
                    int dim, KvErr *e)
{
    if (layernorm) return kcpu_layernorm(x, w, b, y, rows, dim, 1e-5f, e);
    return kcpu_rmsnorm(x, w, y, rows, dim, 1e-6f, e);
}

static int cpu_act(ProbeDev *d, KActKind act, const void *gu, void *out, int rows, int f, KvErr *e)
{
    return kcpu_gated_act(act, gu, out, rows, f, e);
}

static int cpu_rope(ProbeDev *d, void *x, int n_tokens, int n_heads, int dh, KvErr *e)
{
    return kcpu_rope(x, n_tokens, n_heads, dh, 0, 10000.0f, e);
}

static int cpu_quant(ProbeDev *d, const void *x, void *q, void *scale, int rows, int group, KvErr *e)
{
    return kcpu_quant_i8(x, q, scale, rows, group, e);
}

static int cpu_dequant(ProbeDev *d, const void *q, const void *scale, void *x, int rows, int group, KvErr *e)
{
    return kcpu_dequant_i8(q, scale, x, rows, group, e);
}

static int cpu_timer_start(ProbeDev *d, KvErr *e)
{
    CpuImpl *c = d->impl;
    c->timing = 1;
    c->t0_ns = timing_now_ns();
    return 0;
}

static int cpu_timer_stop(ProbeDev *d, double *ns, KvErr *e)
{
    CpuImpl *c = d->impl;
    int64_t t1 = timing_now_ns();
    if (!c->timing) return kv_err(e, "cpu probe: timer_stop without timer_start");
    c->timing = 0;
    *ns = (double)(t1 - c->t0_ns);
    return 0;
}

static void cpu_close(ProbeDev *d)
{
    CpuImpl *c = d->impl;
    if (!c) return;
    for (int i = 0; i < c->bl.n; i++) free(c->bl.bufs[i]);
    probe_bufs_free(&c->bl);
    free(c);
    d->impl = NULL;
    d->bytes_in_use = 0;
}

static const ProbeDevOps g_cpu_ops = {
    .alloc = cpu_alloc,
    .release = cpu_release,
    .gemm = cpu_gemm,
    .attn_prefill = cpu_attn_prefill,
    .attn_decode = cpu_attn_decode,
    .norm = cpu_norm,
    .act = cpu_act,
    .rope = cpu_rope,
    .quant = cpu_quant,
    .dequant = cpu_dequant,
    .timer_start = cpu_timer_start,
    .timer_stop = cpu_timer_stop,
    .flush_cache = NULL,
    .close = cpu_close,
};

/* "model name : AMD EPYC 9454" → "AMD EPYC 9454"; "" when unknown. */
static void cpu_model_name(char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        snprintf(out, len, "%s", v);
        size_t n = strlen(out);
        while (n && (out[n - 1] == '\n' || out[n - 1] == ' ')) out[--n] = '\0';
        break;
    }
    fclose(f);
}

int probe_cpu_open(ProbeDev *d, KvErr *e)
{
    memset(d, 0, sizeof *d);
    CpuImpl *c = calloc(1, sizeof *c);
    if (!c) return kv_err(e, "cpu probe: out of memory");
    d->ops = &g_cpu_ops;
    d->impl = c;
    snprintf(d->backend, sizeof d->backend, "cpu");
    d->elem_bytes = 4;
    cpu_model_name(d->device, sizeof d->device);
    if (!d->device[0]) snprintf(d->device, sizeof d->device, "cpu");
    snprintf(d->info, sizeof d->info, "%s; %d attention threads; gemm %s; fp32 arithmetic", d->device, kcpu_threads(),
             kcpu_gemm_backend());
    return 0;
}

int64_t probe_cpu_llc_bytes(void)
{
    int64_t fallback = (int64_t)32 << 20, v = 0;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (!f) return fallback;
    char buf[64] = "";
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok) return fallback;
    char *end;
    long long n = strtoll(buf, &end, 10);
    if (n <= 0) return fallback;
    v = *end == 'K' ? n << 10 : *end == 'M' ? n << 20 : *end == 'G' ? n << 30 : n;
    return v > 0 ? v : fallback;
}

void probe_close(ProbeDev *d)
{
    if (d && d->ops && d->ops->close) d->ops->close(d);
    if (d) d->ops = NULL;
}
