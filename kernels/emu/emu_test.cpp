/* emu_test.cpp — runs kernels/gpu_kernels.cuh's kernels through their launchers on the CPU (emu.hpp)
 * and compares every output with the C twins of ref.c, for fp16 and bf16, with the same bounds as
 * tests/test_kernels.c (fp16 rtol 1e-2 atol 2e-3, bf16 rtol 2e-2 atol 1e-2; quantized codes and
 * scales must be identical). A check of the kernels' indexing, masking, split/combine logic and
 * shared-memory use for machines without a GPU; it is no substitute for the GPU tests (no cuBLAS,
 * no real scheduling, no timing).
 *
 * Build and run from the repository root (about 3 minutes on 2 cores; `quick` skips one case):
 *   make build/libkvsim.a
 *   g++ -std=c++20 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
 *       -I/usr/local/cuda/include -Ikernels -Isim -Wno-unknown-pragmas \
 *       kernels/emu/emu_test.cpp build/libkvsim.a -lcjson -lpthread -o build/kgpu_emu_test
 *   build/kgpu_emu_test [quick]
 * Output: one line per comparison ("ok"/"FAIL", worst error), then PASSED/FAILED; exit code 1
 * on any failure.
 */
#include "emu.hpp"
#define KGPU_KERNELS_ONLY
#include "../gpu_kernels.cuh"
#include <string>

static uint64_t g_seed = 1;
static float frand01() { uint64_t z = (g_seed += 0x9e3779b97f4a7c15ULL); z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL; z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL; z ^= z >> 31; return (float)((z >> 40) * (1.0 / 16777216.0)); }
static std::vector<float> rnd(size_t n, float lo, float hi, bool bf16) { std::vector<float> v(n); for (auto &x : v) x = lo + (hi - lo) * frand01(); kref_round_half_n(v.data(), n, bf16); return v; }
static uint16_t *to_dev(const std::vector<float> &v, bool bf16) { uint16_t *p = (uint16_t *)malloc(v.size() * 2 + (v.empty() ? 2 : 0)); kref_f32_to_half_n(v.data(), p, v.size(), bf16); return p; }
static uint16_t *nan_buf(size_t n) { uint16_t *p = (uint16_t *)malloc(n * 2 + (n ? 0 : 2)); for (size_t i = 0; i < n; i++) p[i] = 0xFFFF; return p; }
static std::vector<float> from_dev(const uint16_t *p, size_t n, bool bf16) { std::vector<float> v(n); kref_half_to_f32_n(p, v.data(), n, bf16); return v; }

static int g_fail;
static void cmp(const std::string &what, const std::vector<float> &g, const std::vector<float> &r, bool bf16)
{
    double rtol = bf16 ? 2e-2 : 1e-2, atol = bf16 ? 1e-2 : 2e-3, worst = 0, wr = 0; size_t bad = 0, wi = 0;
    for (size_t i = 0; i < r.size(); i++) {
        double err = fabs((double)g[i] - r[i]), b = atol + rtol * fabs(r[i]);
        if (!(err <= b)) { if (bad < 3) printf("   MISMATCH %s[%zu] got %g ref %g\n", what.c_str(), i, g[i], r[i]); bad++; }
        double ra = std::isnan(err) ? 1e30 : err / b; if (ra > wr) { wr = ra; worst = err; wi = i; }
    }
    printf("%-4s %-50s n=%zu worst %.3g at %zu (%.2f of bound)\n", bad ? "FAIL" : "ok", what.c_str(), r.size(), worst, wi, wr);
    if (bad) g_fail++;
}

template <class F> static void launch_dt(bool bf16, F f) { (void)bf16; f(); }

static void t_prefill(bool bf16, int n_new, int n_ctx, int h, int h_kv, int d, int forced, int sms)
{
    size_t nq = (size_t)n_new * h * d, nk = (size_t)(n_ctx + n_new) * h_kv * d;
    auto q = rnd(nq, -1, 1, bf16), k = rnd(nk, -1, 1, bf16), v = rnd(nk, -1, 1, bf16);
    std::vector<float> r(nq);
    if (kref_attn_prefill(q.data(), k.data(), v.data(), r.data(), n_new, n_ctx, h, h_kv, d, NULL) != 0) abort();
    uint16_t *dq = to_dev(q, bf16), *dk = to_dev(k, bf16), *dv = to_dev(v, bf16), *dout = nan_buf(nq);
    AttnArgs a; dim3 grid; size_t n_rows; int max_keys;
    attn_args_prefill(&a, &grid, &n_rows, &max_keys, dq, dk, dv, dout, n_new, n_ctx, h, h_kv, d);
    attn_plan((long long)grid.x * grid.y, max_keys, forced, sms, &a.n_split, &a.split_keys);
    size_t wsf = attn_ws_floats(&a, n_rows);
    float *ws = wsf ? (float *)malloc(wsf * sizeof(float)) : nullptr;
    if (ws) { for (size_t i = 0; i < wsf; i++) ws[i] = NAN; attn_ws_set(&a, ws, n_rows); }
    cudaError_t err = KGPU_DISPATCH(bf16, launch_attn_t)(a, grid, n_rows, nullptr);
    if (err != cudaSuccess) abort();
    char w[160]; snprintf(w, sizeof w, "prefill %s new=%d ctx=%d h=%d/%d d=%d S=%d/%d", bf16 ? "bf16" : "fp16", n_new, n_ctx, h, h_kv, d, a.n_split, a.split_keys);
    cmp(w, from_dev(dout, nq, bf16), r, bf16);
    free(dq); free(dk); free(dv); free(dout); free(ws);
}

static void t_decode(bool bf16, std::vector<int> lens, int h, int h_kv, int d, int forced, int sms)
{
    int batch = (int)lens.size();
    std::vector<int> off(batch + 1, 0);
    for (int b = 0; b < batch; b++) off[b + 1] = off[b] + lens[b];
    size_t nq = (size_t)batch * h * d, nk = (size_t)off[batch] * h_kv * d;
    auto q = rnd(nq, -1, 1, bf16), k = rnd(nk, -1, 1, bf16), v = rnd(nk, -1, 1, bf16);
    std::vector<float> r(nq);
    if (kref_attn_decode(q.data(), k.data(), v.data(), r.data(), batch, off.data(), h, h_kv, d, NULL) != 0) abort();
    uint16_t *dq = to_dev(q, bf16), *dk = to_dev(k, bf16), *dv = to_dev(v, bf16), *dout = nan_buf(nq);
    int *doff = (int *)malloc((batch + 1) * sizeof(int)); memcpy(doff, off.data(), (batch + 1) * sizeof(int));
    AttnArgs a; dim3 grid; size_t n_rows; int max_keys;
    attn_args_decode(&a, &grid, &n_rows, &max_keys, dq, dk, dv, dout, batch, doff, off.data(), h, h_kv, d);
    attn_plan((long long)grid.x * grid.y, max_keys, forced, sms, &a.n_split, &a.split_keys);
    size_t wsf = attn_ws_floats(&a, n_rows);
    float *ws = wsf ? (float *)malloc(wsf * sizeof(float)) : nullptr;
    if (ws) { for (size_t i = 0; i < wsf; i++) ws[i] = NAN; attn_ws_set(&a, ws, n_rows); }
    cudaError_t err = KGPU_DISPATCH(bf16, launch_attn_t)(a, grid, n_rows, nullptr);
    if (err != cudaSuccess) abort();
    char w[160]; snprintf(w, sizeof w, "decode %s b=%d h=%d/%d d=%d S=%d/%d", bf16 ? "bf16" : "fp16", batch, h, h_kv, d, a.n_split, a.split_keys);
    cmp(w, from_dev(dout, nq, bf16), r, bf16);
    free(dq); free(dk); free(dv); free(dout); free(ws); free(doff);
}

static void t_rows(bool bf16, int rows, int dim)
{
    size_t n = (size_t)rows * dim;
    auto x = rnd(2 * n, -2, 2, bf16), w = rnd(dim, 0.5f, 1.5f, bf16), b = rnd(dim, -1, 1, bf16);
    uint16_t *dx = to_dev(x, bf16), *dw = to_dev(w, bf16), *db = to_dev(b, bf16), *dy = nan_buf(n);
    std::vector<float> r(n);
    char what[96];
    kref_rmsnorm(x.data(), w.data(), r.data(), rows, dim, 1e-5f, NULL);
    if (KGPU_DISPATCH(bf16, launch_rmsnorm_t)(dx, dw, dy, rows, dim, 1e-5f, nullptr) != cudaSuccess) abort();
    snprintf(what, sizeof what, "rmsnorm %s %dx%d", bf16 ? "bf16" : "fp16", rows, dim); cmp(what, from_dev(dy, n, bf16), r, bf16);
    kref_layernorm(x.data(), w.data(), b.data(), r.data(), rows, dim, 1e-5f, NULL);
    if (KGPU_DISPATCH(bf16, launch_layernorm_t)(dx, dw, db, dy, rows, dim, 1e-5f, nullptr) != cudaSuccess) abort();
    snprintf(what, sizeof what, "layernorm %s %dx%d", bf16 ? "bf16" : "fp16", rows, dim); cmp(what, from_dev(dy, n, bf16), r, bf16);
    for (int act = 0; act < 2; act++) {
        kref_gated_act((KActKind)act, x.data(), r.data(), rows, dim, NULL);
        if (KGPU_DISPATCH(bf16, launch_gated_t)(act, dx, dy, rows, dim, nullptr) != cudaSuccess) abort();
        snprintf(what, sizeof what, "gated%d %s %dx%d", act, bf16 ? "bf16" : "fp16", rows, dim); cmp(what, from_dev(dy, n, bf16), r, bf16);
    }
    free(dx); free(dw); free(db); free(dy);
}

static void t_rope(bool bf16, int nt, int nh, int d, int pos0, float theta)
{
    size_t n = (size_t)nt * nh * d;
    auto x = rnd(n, -1, 1, bf16);
    uint16_t *dx = to_dev(x, bf16);
    kref_rope(x.data(), nt, nh, d, pos0, theta, NULL);
    if (KGPU_DISPATCH(bf16, launch_rope_t)(dx, nt, nh, d, pos0, theta, nullptr) != cudaSuccess) abort();
    char what[96]; snprintf(what, sizeof what, "rope %s %dx%dx%d pos0=%d theta=%g", bf16 ? "bf16" : "fp16", nt, nh, d, pos0, theta);
    cmp(what, from_dev(dx, n, bf16), x, bf16);
    free(dx);
}

static void t_quant(bool bf16, int rows, int group, int int4)
{
    size_t n = (size_t)rows * group, qb = int4 ? n / 2 : n;
    auto x = rnd(n, -4, 4, bf16);
    if (rows > 1) for (int c = 0; c < group; c++) x[c] = 0; /* a zero row */
    std::vector<unsigned char> rq(qb); std::vector<float> rs(rows), r(n);
    if (int4) { kref_quant_i4(x.data(), rq.data(), rs.data(), rows, group, NULL); kref_dequant_i4(rq.data(), rs.data(), r.data(), rows, group, NULL); }
    else { kref_quant_i8(x.data(), (int8_t *)rq.data(), rs.data(), rows, group, NULL); kref_dequant_i8((int8_t *)rq.data(), rs.data(), r.data(), rows, group, NULL); }
    uint16_t *dx = to_dev(x, bf16), *dy = nan_buf(n);
    unsigned char *dq = (unsigned char *)malloc(qb); memset(dq, 0x55, qb);
    float *ds = (float *)malloc(rows * sizeof(float));
    if (KGPU_DISPATCH(bf16, launch_quant_t)(dx, dq, ds, rows, group, int4, nullptr) != cudaSuccess) abort();
    size_t qdiff = memcmp(dq, rq.data(), qb) ? 1 : 0, sdiff = memcmp(ds, rs.data(), rows * sizeof(float)) ? 1 : 0;
    printf("%-4s quant%d %s %dx%d codes %s, scales %s\n", (qdiff || sdiff) ? "FAIL" : "ok", int4 ? 4 : 8, bf16 ? "bf16" : "fp16", rows, group, qdiff ? "DIFFER" : "identical", sdiff ? "DIFFER" : "identical");
    if (qdiff || sdiff) g_fail++;
    if (KGPU_DISPATCH(bf16, launch_dequant_t)(dq, ds, dy, rows, group, int4, nullptr) != cudaSuccess) abort();
    char what[96]; snprintf(what, sizeof what, "dequant%d %s %dx%d", int4 ? 4 : 8, bf16 ? "bf16" : "fp16", rows, group);
    cmp(what, from_dev(dy, n, bf16), r, bf16);
    free(dx); free(dy); free(dq); free(ds);
}

int main(int argc, char **argv)
{
    int quick = argc > 1;
    for (int bf = 0; bf <= 1; bf++) {
        bool b = bf;
        t_rows(b, 7, 300);
        t_rows(b, 2, 33);
        t_rope(b, 9, 3, 64, 1000, 10000.0f);
        t_rope(b, 5, 2, 6, 0, 500000.0f);
        t_quant(b, 12, 128, 0); t_quant(b, 3, 1024, 0); t_quant(b, 12, 128, 1); t_quant(b, 3, 1024, 1); t_quant(b, 2, 2, 1);
        t_prefill(b, 37, 50, 8, 2, 64, 0, 132);
        t_prefill(b, 37, 50, 8, 2, 64, 1, 132);
        t_prefill(b, 5, 300, 4, 4, 128, 3, 132);
        t_prefill(b, 17, 0, 2, 1, 256, 0, 132);
        t_prefill(b, 20, 9, 4, 4, 80, 2, 132);
        t_prefill(b, 1, 0, 1, 1, 16, 0, 132);
        t_prefill(b, 16, 16, 2, 2, 32, 0, 132);
        t_prefill(b, 3, 1000, 2, 1, 64, 0, 132);
        if (!quick) t_prefill(b, 70, 40, 2, 2, 128, 5, 4);
        t_decode(b, {1, 0, 33, 200, 64, 513}, 8, 2, 128, 0, 132);
        t_decode(b, {1, 0, 33, 200, 64, 513}, 32, 1, 64, 4, 132);
        t_decode(b, {300, 2, 0, 100, 400, 10}, 4, 4, 96, 1, 132);
        t_decode(b, {0, 0}, 4, 2, 64, 0, 132);
        t_decode(b, {5}, 20, 4, 256, 0, 132);
        t_decode(b, {31, 32, 33}, 6, 3, 17, 0, 8);
    }
    printf("%s: %d failures, %ld launches, %ld blocks\n", g_fail ? "FAILED" : "PASSED", g_fail, emu_launches, emu_blocks_run);
    return g_fail != 0;
}
