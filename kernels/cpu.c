/* cpu.c — CPU fast paths of the twins (see cpu.h for the contract, ref.h for semantics).
 *
 * Attention: every work item is a set of up to KCPU_ROWS query rows that share one KV head and one
 * key range (prefill: 16 consecutive new tokens of one query head; decode: the query heads of one
 * sequence that share a KV head). An item walks its keys in blocks of KCPU_KEYS, computes the
 * block's scores with the key row hot in cache for all its query rows, and folds them into running
 * (max, sum, accumulator) per row — the online softmax — so memory is O(rows · d) whatever the
 * context length. Items are handed to threads through an atomic counter, heaviest (latest query
 * blocks) first, so the causal triangle balances.
 * Invariants: an item writes only its own output rows; a failed allocation in a worker makes the
 * call return -1 after all workers joined.
 * Build: part of libkvsim; with OpenBLAS (pkg-config openblas) the Makefile defines KV_HAVE_BLAS.
 */
#include "kernels/cpu.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef KV_HAVE_BLAS
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#endif

enum { KCPU_ROWS = 16, KCPU_KEYS = 64, KCPU_MAX_THREADS = 256 };

static atomic_int g_threads; /* 0 = one per online CPU */

void kcpu_set_threads(int n) { atomic_store(&g_threads, n > 0 ? (n < KCPU_MAX_THREADS ? n : KCPU_MAX_THREADS) : 0); }

int kcpu_threads(void)
{
    int n = atomic_load(&g_threads);
    if (n > 0) return n;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : (c > KCPU_MAX_THREADS ? KCPU_MAX_THREADS : (int)c);
}

/* ---------------------------------------------------------------- GEMM */

const char *kcpu_gemm_backend(void)
{
#ifdef KV_HAVE_BLAS
    /* Name the library that actually provides cblas_sgemm at run time: another CBLAS linked
     * earlier (GSL's reference libgslcblas) would silently win the symbol. */
    static char name[256];
    Dl_info info;
    if (dladdr((void *)cblas_sgemm, &info) == 0 || !info.dli_fname) return "cblas (unknown library)";
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (strstr(base, "openblas")) return "openblas";
    snprintf(name, sizeof name, "cblas from %s", base);
    return name;
#else
    return "c";
#endif
}

int kcpu_gemm(const float *a, const float *b, float *c, int m, int n, int k, KvErr *e)
{
#ifdef KV_HAVE_BLAS
    if (kref_gemm_check(m, n, k, e) != 0) return -1;
    if (m == 0 || n == 0) return 0;
    if (k == 0) {
        memset(c, 0, (size_t)m * n * sizeof *c);
        return 0;
    }
    /* Row-major C[m][n] = A[m][k] · B[n][k]ᵀ. */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
    return 0;
#else
    return kref_gemm(a, b, c, m, n, k, e);
#endif
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    const float *q[KCPU_ROWS];
    float *o[KCPU_ROWS];
    int limit[KCPU_ROWS]; /* last key index this row may see */
    int nr;
} RowSet;

typedef struct {
    float *acc;    /* [KCPU_ROWS][d] */
    float *sc;     /* [KCPU_ROWS][KCPU_KEYS] */
    float m[KCPU_ROWS], l[KCPU_ROWS];
} Scratch;

/* Dot product with 8 independent partial sums (the compiler turns the fixed 8-wide inner loops
 * into SIMD without reassociating anything), then a scalar tail. */
static inline float dot8(const float *a, const float *b, int d)
{
    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int c = 0;
    for (; c + 8 <= d; c += 8)
        for (int u = 0; u < 8; u++) part[u] += a[c + u] * b[c + u];
    float s = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
    for (; c < d; c++) s += a[c] * b[c];
    return s;
}

/* acc[0..d) += p · v[0..d), 8 wide. */
static inline void axpy8(float *acc, float p, const float *v, int d)
{
    int c = 0;
    for (; c + 8 <= d; c += 8)
        for (int u = 0; u < 8; u++) acc[c + u] += p * v[c + u];
    for (; c < d; c++) acc[c] += p * v[c];
}

/* Rows of rs over keys 0..n_keys-1 (key j at k + j*stride), each row capped by its limit. */
static void attn_rows(const RowSet *rs, const float *k, const float *v, size_t stride, int n_keys,
                      int d, float scale, Scratch *s)
{
    int kend = 0;
    for (int r = 0; r < rs->nr; r++) {
        int lim = rs->limit[r] + 1 < n_keys ? rs->limit[r] + 1 : n_keys;
        if (lim > kend) kend = lim;
        s->m[r] = -INFINITY;
        s->l[r] = 0.0f;
    }
    memset(s->acc, 0, (size_t)rs->nr * d * sizeof *s->acc);
    for (int kb = 0; kb < kend; kb += KCPU_KEYS) {
        int nk = kend - kb < KCPU_KEYS ? kend - kb : KCPU_KEYS;
        for (int j = 0; j < nk; j++) {
            const float *kr = k + (size_t)(kb + j) * stride;
            for (int r = 0; r < rs->nr; r++) {
                float *sr = s->sc + (size_t)r * KCPU_KEYS;
                if (kb + j > rs->limit[r]) {
                    sr[j] = -INFINITY;
                    continue;
                }
                sr[j] = dot8(rs->q[r], kr, d) * scale;
            }
        }
        for (int r = 0; r < rs->nr; r++) {
            float *sr = s->sc + (size_t)r * KCPU_KEYS;
            float mx = -INFINITY;
            for (int j = 0; j < nk; j++) mx = sr[j] > mx ? sr[j] : mx;
            if (mx == -INFINITY) continue; /* the whole block is masked for this row */
            float mnew = mx > s->m[r] ? mx : s->m[r];
            float alpha = s->m[r] == -INFINITY ? 0.0f : expf(s->m[r] - mnew);
            float *acc = s->acc + (size_t)r * d;
            if (alpha != 1.0f)
                for (int c = 0; c < d; c++) acc[c] *= alpha;
            float l = s->l[r] * alpha;
            for (int j = 0; j < nk; j++) {
                if (sr[j] == -INFINITY) continue;
                float p = expf(sr[j] - mnew);
                l += p;
                axpy8(acc, p, v + (size_t)(kb + j) * stride, d);
            }
            s->l[r] = l;
            s->m[r] = mnew;
        }
    }
    for (int r = 0; r < rs->nr; r++) {
        float inv = s->l[r] > 0.0f ? 1.0f / s->l[r] : 0.0f;
        const float *acc = s->acc + (size_t)r * d;
        for (int c = 0; c < d; c++) rs->o[r][c] = acc[c] * inv;
    }
}

typedef struct {
    const float *q, *k, *v;
    float *out;
    int decode;
    int n_new, n_ctx;    /* prefill */
    const int *ctx_off;  /* decode */
    int h, h_kv, d, group, n_qb, n_gc;
    float scale;
    int n_items;
    atomic_int next;
    atomic_int failed;
} AttnJob;

/* Fill the rows of item `it` and run them. */
static void attn_item(const AttnJob *jb, int it, Scratch *s)
{
    RowSet rs;
    rs.nr = 0;
    const size_t stride = (size_t)jb->h_kv * jb->d;
    const float *k, *v;
    int n_keys;
    if (!jb->decode) {
        int qb = jb->n_qb - 1 - it / jb->h; /* heaviest query blocks first */
        int qh = it % jb->h;
        size_t kv0 = (size_t)(qh / jb->group) * jb->d;
        k = jb->k + kv0;
        v = jb->v + kv0;
        n_keys = jb->n_ctx + jb->n_new;
        for (int t = qb * KCPU_ROWS; t < jb->n_new && rs.nr < KCPU_ROWS; t++, rs.nr++) {
            size_t row = ((size_t)t * jb->h + qh) * jb->d;
            rs.q[rs.nr] = jb->q + row;
            rs.o[rs.nr] = jb->out + row;
            rs.limit[rs.nr] = jb->n_ctx + t;
        }
    } else {
        int per_seq = jb->h_kv * jb->n_gc;
        int b = it / per_seq, hk = (it % per_seq) / jb->n_gc, gc = it % jb->n_gc;
        size_t kv0 = (size_t)jb->ctx_off[b] * stride + (size_t)hk * jb->d;
        k = jb->k + kv0;
        v = jb->v + kv0;
        n_keys = jb->ctx_off[b + 1] - jb->ctx_off[b];
        for (int g = gc * KCPU_ROWS; g < jb->group && rs.nr < KCPU_ROWS; g++, rs.nr++) {
            size_t row = ((size_t)b * jb->h + hk * jb->group + g) * jb->d;
            rs.q[rs.nr] = jb->q + row;
            rs.o[rs.nr] = jb->out + row;
            rs.limit[rs.nr] = n_keys - 1;
        }
    }
    attn_rows(&rs, k, v, stride, n_keys, jb->d, jb->scale, s);
}

static void *attn_worker(void *arg)
{
    AttnJob *jb = arg;
    Scratch s;
    s.acc = malloc((size_t)KCPU_ROWS * jb->d * sizeof *s.acc);
    s.sc = malloc((size_t)KCPU_ROWS * KCPU_KEYS * sizeof *s.sc);
    if (!s.acc || !s.sc) {
        atomic_store(&jb->failed, 1);
    } else {
        for (;;) {
            int it = atomic_fetch_add(&jb->next, 1);
            if (it >= jb->n_items) break;
            attn_item(jb, it, &s);
        }
    }
    free(s.acc);
    free(s.sc);
    return NULL;
}

/* Run all items on up to kcpu_threads() threads (the caller is one of them). If a thread cannot be
 * created the remaining work simply runs on fewer threads. */
static int attn_run(AttnJob *jb, const char *what, KvErr *e)
{
    atomic_init(&jb->next, 0);
    atomic_init(&jb->failed, 0);
    int nt = kcpu_threads();
    if (nt > jb->n_items) nt = jb->n_items;
    pthread_t tid[KCPU_MAX_THREADS];
    int started = 0;
    for (int i = 1; i < nt; i++) {
        if (pthread_create(&tid[started], NULL, attn_worker, jb) != 0) break;
        started++;
    }
    attn_worker(jb);
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    if (atomic_load(&jb->failed)) return kv_err(e, "%s: out of memory for per-thread scratch (d=%d)", what, jb->d);
    return 0;
}

int kcpu_attn_prefill(const float *q, const float *k, const float *v, float *out, int n_new,
                      int n_ctx, int h, int h_kv, int d, KvErr *e)
{
    if (kref_attn_check(n_new, h, h_kv, d, e) != 0) return -1;
    if (n_ctx < 0) return kv_err(e, "attention prefill: n_ctx=%d: expected >= 0", n_ctx);
    AttnJob jb = {.q = q, .k = k, .v = v, .out = out, .decode = 0, .n_new = n_new, .n_ctx = n_ctx,
                  .h = h, .h_kv = h_kv, .d = d, .group = h / h_kv,
                  .n_qb = (n_new + KCPU_ROWS - 1) / KCPU_ROWS, .n_gc = 1,
                  .scale = 1.0f / sqrtf((float)d)};
    jb.n_items = jb.n_qb * h;
    if (jb.n_items == 0) return 0;
    return attn_run(&jb, "attention prefill", e);
}

int kcpu_attn_decode(const float *q, const float *k, const float *v, float *out, int batch,
                     const int *ctx_off, int h, int h_kv, int d, KvErr *e)
{
    if (kref_attn_decode_check(batch, ctx_off, h, h_kv, d, e) != 0) return -1;
    int group = h / h_kv;
    AttnJob jb = {.q = q, .k = k, .v = v, .out = out, .decode = 1, .ctx_off = ctx_off, .h = h,
                  .h_kv = h_kv, .d = d, .group = group,
                  .n_gc = (group + KCPU_ROWS - 1) / KCPU_ROWS, .scale = 1.0f / sqrtf((float)d)};
    jb.n_items = batch * h_kv * jb.n_gc;
    if (jb.n_items == 0) return 0;
    return attn_run(&jb, "attention decode", e);
}

/* ---------------------------------------------------------------- memory-bound ops: the twins */

int kcpu_rmsnorm(const float *x, const float *w, float *y, int rows, int dim, float eps, KvErr *e)
{
    return kref_rmsnorm(x, w, y, rows, dim, eps, e);
}

int kcpu_layernorm(const float *x, const float *w, const float *b, float *y, int rows, int dim,
                   float eps, KvErr *e)
{
    return kref_layernorm(x, w, b, y, rows, dim, eps, e);
}

int kcpu_gated_act(KActKind act, const float *gu, float *out, int rows, int f, KvErr *e)
{
    return kref_gated_act(act, gu, out, rows, f, e);
}

int kcpu_rope(float *x, int n_tokens, int n_heads, int d, int pos0, float theta, KvErr *e)
{
    return kref_rope(x, n_tokens, n_heads, d, pos0, theta, e);
}

int kcpu_quant_i8(const float *x, int8_t *q, float *scale, int rows, int group, KvErr *e)
{
    return kref_quant_i8(x, q, scale, rows, group, e);
}

int kcpu_dequant_i8(const int8_t *q, const float *scale, float *x, int rows, int group, KvErr *e)
{
    return kref_dequant_i8(q, scale, x, rows, group, e);
}

int kcpu_quant_i4(const float *x, uint8_t *q, float *scale, int rows, int group, KvErr *e)
{
    return kref_quant_i4(x, q, scale, rows, group, e);
}

int kcpu_dequant_i4(const uint8_t *q, const float *scale, float *x, int rows, int group, KvErr *e)
{
    return kref_dequant_i4(q, scale, x, rows, group, e);
}
