/* gpu.cu — CUDA kernels, their launchers and the C API of gpu.h (cuBLAS GEMM, attention, norms,
 * activations, RoPE, quantization, copies, event timing).
 *
 * Responsible for: device code computing exactly the formulas and layouts of ref.h on fp16/bf16
 * data (fp32 loads, fp32 math, one rounding on store), and the host API around it.
 * Not responsible for: shapes and repetitions (calibrate/), the reference semantics (ref.c).
 *
 * Build: the Makefile compiles this file with nvcc when nvcc and cuBLAS are found
 * (`make`, `make CUDA_ARCH=90` for sm_90 code), links -lcublas -lcudart, and defines KV_HAVE_CUDA
 * for the C files; `make NO_CUDA=1` uses gpu_stub.c instead. Tests: `build/kvtest kernels_gpu`
 * compares every kernel with its twin on random inputs (skipped without a device).
 *
 * The file has three parts:
 *   A. device helpers and kernels (templated on the element type T = __half | __nv_bfloat16);
 *   B. launchers: grid/block/shared-memory choices, returning cudaError_t (no other runtime calls
 *      besides cudaFuncSetAttribute and cudaGetLastError), so the kernels plus launchers can be
 *      compiled on their own (KGPU_KERNELS_ONLY) by the host-side emulator in kernels/emu/, which
 *      checks them against the twins on machines without a GPU;
 *   C. the C API: context, memory, copies, timing, events and stream waits, cuBLAS, argument checks.
 *
 * Attention (flash-style, CUDA cores): a block of 128 threads (4 warps) owns up to 16 query rows
 * that share one KV head and one key range, 4 rows per warp. It walks the keys in tiles of 32
 * staged in shared memory as fp32 (K with a padded row so that lane j reading key j's column c is
 * conflict-free); lane j scores key j for the warp's 4 rows (Q read as 16-byte broadcasts when
 * d % 4 == 0), the warp keeps a running max m, per-lane partial sums l and an fp32 accumulator o
 * (lane owns columns lane + 32·i), rescales them when the max grows (online softmax), and adds
 * p·V reading each V value once for its 4 rows. CUDA cores only, no tensor cores: expect well
 * under FlashAttention's throughput; the calibrator times this kernel as it is. Prefill rows are 16 consecutive new tokens of one
 * query head (causal limit n_ctx + t per row, key tiles stop at the block's last row's limit);
 * decode rows are the query heads of one sequence that share a KV head (GQA reuse of every K/V
 * tile). When the grid has fewer than two waves of blocks, the keys are split across gridDim.z
 * blocks that write unnormalised partials (o, m, l) to a workspace; a combine kernel merges them
 * (flash-decoding). Invariants: every warp executes every shuffle and every __syncthreads (row
 * validity only masks scores and stores); masked scores are -inf and never reach expf.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <stdlib.h>
#include <string.h>

#ifndef KGPU_KERNELS_ONLY
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/gpu.h"

/* ================================================================ A. device code */

#ifndef KGPU_DYN_SMEM
#define KGPU_DYN_SMEM(T, name)                                  \
    extern __shared__ __align__(16) unsigned char kgpu_smem_[]; \
    T *name = reinterpret_cast<T *>(kgpu_smem_)
#endif

#define KGPU_FULL_MASK 0xffffffffu

__device__ __forceinline__ float kg_ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ float kg_ld(const __nv_bfloat16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ void kg_st(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void kg_st(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(KGPU_FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(KGPU_FULL_MASK, v, o));
    return v;
}

/* Block-wide reductions (blockDim.x a multiple of 32, at most 1024); every thread of the block
 * must call; `red` is >= 32 floats of shared memory, free again on return. */
__device__ float block_sum(float v, float *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = 0.0f;
    for (int i = 0; i < nw; i++) r += red[i];
    __syncthreads();
    return r;
}

__device__ float block_max(float v, float *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = red[0];
    for (int i = 1; i < nw; i++) r = fmaxf(r, red[i]);
    __syncthreads();
    return r;
}

/* ---------------------------------------------------------------- norms (one block per row) */

template <typename T>
__global__ void rmsnorm_kernel(const T *x, const T *w, T *y, int dim, float eps)
{
    __shared__ float red[32];
    const T *xr = x + (size_t)blockIdx.x * dim;
    T *yr = y + (size_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
        float v = kg_ld(xr + c);
        ss += v * v;
    }
    ss = block_sum(ss, red);
    const float inv = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int c = threadIdx.x; c < dim; c += blockDim.x) kg_st(yr + c, kg_ld(xr + c) * inv * kg_ld(w + c));
}

template <typename T>
__global__ void layernorm_kernel(const T *x, const T *w, const T *b, T *y, int dim, float eps)
{
    __shared__ float red[32];
    const T *xr = x + (size_t)blockIdx.x * dim;
    T *yr = y + (size_t)blockIdx.x * dim;
    float s = 0.0f;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) s += kg_ld(xr + c);
    const float mean = block_sum(s, red) / (float)dim;
    float s2 = 0.0f;
    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
        float dv = kg_ld(xr + c) - mean;
        s2 += dv * dv;
    }
    const float inv = 1.0f / sqrtf(block_sum(s2, red) / (float)dim + eps);
    for (int c = threadIdx.x; c < dim; c += blockDim.x)
        kg_st(yr + c, (kg_ld(xr + c) - mean) * inv * kg_ld(w + c) + kg_ld(b + c));
}

/* ---------------------------------------------------------------- elementwise (grid-stride) */

template <typename T>
__global__ void gated_act_kernel(const T *gu, T *out, int rows, int f, int act)
{
    const size_t n = (size_t)rows * f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t r = i / f, j = i - r * f;
        const float g = kg_ld(gu + r * 2 * f + j), u = kg_ld(gu + r * 2 * f + f + j);
        float a;
        if (act == KACT_SILU) {
            a = g / (1.0f + expf(-g));
        } else {
            const float k0 = 0.7978845608028654f; /* sqrt(2/pi) */
            a = 0.5f * g * (1.0f + tanhf(k0 * (g + 0.044715f * g * g * g)));
        }
        kg_st(out + i, a * u);
    }
}

template <typename T>
__global__ void rope_kernel(T *x, int n_tokens, int n_heads, int d, int pos0, float theta)
{
    const int half = d / 2;
    const size_t n = (size_t)n_tokens * n_heads * half;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t th = i / half; /* token·n_heads + head */
        const int ip = (int)(i - th * half);
        const int t = (int)(th / n_heads);
        const float inv_freq = powf(theta, -(float)(2 * ip) / (float)d);
        const float ang = (float)(pos0 + t) * inv_freq;
        float sn, cs;
        sincosf(ang, &sn, &cs);
        T *xr = x + th * d;
        const float x1 = kg_ld(xr + ip), x2 = kg_ld(xr + ip + half);
        kg_st(xr + ip, x1 * cs - x2 * sn);
        kg_st(xr + ip + half, x2 * cs + x1 * sn);
    }
}

/* ---------------------------------------------------------------- quantization */

/* One block per row: amax, then quantize. qmax 127 (int8) or 7 (int4, packed pairs). */
template <typename T>
__global__ void quant_kernel(const T *x, void *q, float *scale, int group, int int4)
{
    __shared__ float red[32];
    const size_t row = blockIdx.x;
    const T *xr = x + row * group;
    float amax = 0.0f;
    for (int c = threadIdx.x; c < group; c += blockDim.x) amax = fmaxf(amax, fabsf(kg_ld(xr + c)));
    amax = block_max(amax, red);
    const float qmax = int4 ? 7.0f : 127.0f;
    const float inv = amax > 0.0f ? qmax / amax : 0.0f;
    if (!int4) {
        int8_t *qr = (int8_t *)q + row * group;
        for (int c = threadIdx.x; c < group; c += blockDim.x) {
            float r = rintf(kg_ld(xr + c) * inv);
            qr[c] = (int8_t)fminf(fmaxf(r, -qmax), qmax);
        }
    } else {
        uint8_t *qr = (uint8_t *)q + row * (group / 2);
        for (int j = threadIdx.x; j < group / 2; j += blockDim.x) {
            const int lo = (int)fminf(fmaxf(rintf(kg_ld(xr + 2 * j) * inv), -qmax), qmax);
            const int hi = (int)fminf(fmaxf(rintf(kg_ld(xr + 2 * j + 1) * inv), -qmax), qmax);
            qr[j] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
        }
    }
    if (threadIdx.x == 0) scale[row] = amax / qmax;
}

template <typename T>
__global__ void dequant_i8_kernel(const int8_t *q, const float *scale, T *x, int rows, int group)
{
    const size_t n = (size_t)rows * group;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        kg_st(x + i, (float)q[i] * scale[i / group]);
}

__device__ __forceinline__ int nibble_value(unsigned v)
{
    const int n = (int)(v & 0xFu);
    return (n & 8) ? n - 16 : n;
}

/* One thread per byte (pair of values); byte i of the whole array holds values 2i and 2i+1. */
template <typename T>
__global__ void dequant_i4_kernel(const uint8_t *q, const float *scale, T *x, int rows, int group)
{
    const int half = group / 2;
    const size_t n = (size_t)rows * half;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float s = scale[i / half];
        const unsigned b = q[i];
        kg_st(x + 2 * i, (float)nibble_value(b) * s);
        kg_st(x + 2 * i + 1, (float)nibble_value(b >> 4) * s);
    }
}

/* ---------------------------------------------------------------- attention */

enum { ATT_WARPS = 4, ATT_RPW = 4, ATT_ROWS = ATT_WARPS * ATT_RPW, ATT_BK = 32, ATT_THREADS = 32 * ATT_WARPS };

typedef struct AttnArgs {
    const void *q, *k, *v;
    void *out;
    float *ws_o;        /* [rows][n_split][d] unnormalised partial outputs (n_split > 1) */
    float *ws_ml;       /* [rows][n_split][2] running max and sum */
    const int *ctx_off; /* decode: device offsets [batch+1]; NULL: prefill */
    int n_new, n_ctx;   /* prefill */
    int h, h_kv, d, group, gchunks;
    int n_split, split_keys;
    float scale;
} AttnArgs;

/* Shared memory of one attention block: Q [16][d], K [32][d+1], V [32][d], fp32. */
static inline size_t attn_smem_bytes(int d)
{
    return sizeof(float) * ((size_t)ATT_ROWS * d + (size_t)ATT_BK * (d + 1) + (size_t)ATT_BK * d);
}

typedef struct RowDesc {
    long long id; /* output row (token·h + query head, or sequence·h + query head); -1: none */
    int limit;    /* last key index the row may attend to (-1: none) */
} RowDesc;

/* Row r (0..ATT_ROWS-1) of this block. */
__device__ __forceinline__ RowDesc attn_row(const AttnArgs &a, int r, int n_keys)
{
    RowDesc rd;
    rd.id = -1;
    rd.limit = -1;
    if (a.ctx_off) {
        const int gi = (int)(blockIdx.y % a.gchunks) * ATT_ROWS + r;
        const int hk = (int)(blockIdx.y / a.gchunks);
        if (gi < a.group) {
            rd.id = (long long)blockIdx.x * a.h + (long long)hk * a.group + gi;
            rd.limit = n_keys - 1;
        }
    } else {
        const int t = (int)blockIdx.x * ATT_ROWS + r;
        if (t < a.n_new) {
            rd.id = (long long)t * a.h + blockIdx.y;
            rd.limit = a.n_ctx + t;
        }
    }
    return rd;
}

/* DC = column chunks of 32 per lane: d <= 32·DC. Grid: x = query block (prefill) or sequence
 * (decode), y = query head (prefill) or KV head · gchunks + chunk (decode), z = key split. */
template <typename T, int DC>
__global__ void __launch_bounds__(ATT_THREADS) attn_kernel(AttnArgs a)
{
    KGPU_DYN_SMEM(float, sm);
    const int d = a.d, dk = d + 1;
    float *qs = sm;
    float *ks = qs + ATT_ROWS * d;
    float *vs = ks + ATT_BK * dk;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const T *Q = (const T *)a.q, *K = (const T *)a.k, *V = (const T *)a.v;

    int hk, n_keys, kend;
    size_t key_base;
    if (a.ctx_off) {
        hk = (int)(blockIdx.y / a.gchunks);
        key_base = (size_t)a.ctx_off[blockIdx.x];
        n_keys = a.ctx_off[blockIdx.x + 1] - a.ctx_off[blockIdx.x];
        kend = n_keys;
    } else {
        hk = (int)blockIdx.y / a.group;
        key_base = 0;
        n_keys = a.n_ctx + a.n_new;
        const int last = a.n_ctx + (int)blockIdx.x * ATT_ROWS + ATT_ROWS; /* one past the last row's limit */
        kend = last < n_keys ? last : n_keys;
    }
    const int kb = (int)blockIdx.z * a.split_keys;
    const int ke = kb + a.split_keys < kend ? kb + a.split_keys : kend;

    for (int i = tid; i < ATT_ROWS * d; i += ATT_THREADS) {
        const int r = i / d, c = i - r * d;
        const RowDesc rd = attn_row(a, r, n_keys);
        qs[i] = rd.id >= 0 ? kg_ld(Q + (size_t)rd.id * d + c) * a.scale : 0.0f;
    }

    float m[ATT_RPW], l[ATT_RPW], o[ATT_RPW][DC];
    int lim[ATT_RPW];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        lim[r] = attn_row(a, warp * ATT_RPW + r, n_keys).limit;
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int cc = 0; cc < DC; cc++) o[r][cc] = 0.0f;
    }
    const float *qw = qs + warp * ATT_RPW * d;

    for (int kt = kb; kt < ke; kt += ATT_BK) {
        __syncthreads(); /* Q is loaded / the previous tile is consumed */
        for (int i = tid; i < ATT_BK * d; i += ATT_THREADS) {
            const int j = i / d, c = i - j * d, key = kt + j;
            float kv = 0.0f, vv = 0.0f;
            if (key < ke) {
                const size_t off = ((key_base + (size_t)key) * a.h_kv + hk) * d + c;
                kv = kg_ld(K + off);
                vv = kg_ld(V + off);
            }
            ks[j * dk + c] = kv;
            vs[j * d + c] = vv;
        }
        __syncthreads();

        float s[ATT_RPW];
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) s[r] = 0.0f;
        const float *kr = ks + lane * dk;
        if ((d & 3) == 0) { /* Q rows as 16-byte broadcasts: 8 shared loads per 16 FMAs */
            for (int c = 0; c < d; c += 4) {
                const float k0 = kr[c], k1 = kr[c + 1], k2 = kr[c + 2], k3 = kr[c + 3];
#pragma unroll
                for (int r = 0; r < ATT_RPW; r++) {
                    const float4 qv = *reinterpret_cast<const float4 *>(qw + r * d + c);
                    s[r] += qv.x * k0 + qv.y * k1 + qv.z * k2 + qv.w * k3;
                }
            }
        } else {
            for (int c = 0; c < d; c++) {
                const float kc = kr[c];
#pragma unroll
                for (int r = 0; r < ATT_RPW; r++) s[r] += qw[r * d + c] * kc;
            }
        }
        const int key = kt + lane;
        float p[ATT_RPW];
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            const bool ok = key < ke && key <= lim[r];
            const float sr = ok ? s[r] : -INFINITY;
            const float mnew = fmaxf(m[r], warp_max(sr));
            p[r] = ok ? expf(sr - mnew) : 0.0f;
            const float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - mnew);
            l[r] = l[r] * alpha + p[r];
            m[r] = mnew;
#pragma unroll
            for (int cc = 0; cc < DC; cc++) o[r][cc] *= alpha;
        }
        /* o[r] += Σ_j p_j(r) · V[j]: each V value is read once for the warp's 4 rows. */
        for (int jj = 0; jj < ATT_BK; jj++) {
            const float *vr = vs + jj * d;
            float vv[DC];
#pragma unroll
            for (int cc = 0; cc < DC; cc++) {
                const int c = lane + 32 * cc;
                vv[cc] = c < d ? vr[c] : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < ATT_RPW; r++) {
                const float pj = __shfl_sync(KGPU_FULL_MASK, p[r], jj);
#pragma unroll
                for (int cc = 0; cc < DC; cc++) o[r][cc] += pj * vv[cc];
            }
        }
    }

#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const float lt = warp_sum(l[r]);
        const RowDesc rd = attn_row(a, warp * ATT_RPW + r, n_keys);
        if (rd.id < 0) continue;
        if (a.n_split == 1) {
            T *out = (T *)a.out + (size_t)rd.id * d;
            const float inv = lt > 0.0f ? 1.0f / lt : 0.0f;
#pragma unroll
            for (int cc = 0; cc < DC; cc++) {
                const int c = lane + 32 * cc;
                if (c < d) kg_st(out + c, o[r][cc] * inv);
            }
        } else {
            const size_t w = (size_t)rd.id * a.n_split + blockIdx.z;
#pragma unroll
            for (int cc = 0; cc < DC; cc++) {
                const int c = lane + 32 * cc;
                if (c < d) a.ws_o[w * d + c] = o[r][cc];
            }
            if (lane == 0) {
                a.ws_ml[2 * w] = m[r];
                a.ws_ml[2 * w + 1] = lt;
            }
        }
    }
}

/* One block per output row: merge the n_split partials of that row. */
template <typename T>
__global__ void attn_combine_kernel(const float *ws_o, const float *ws_ml, T *out, int n_split, int d)
{
    const size_t row = blockIdx.x;
    const float *ml = ws_ml + row * n_split * 2;
    float mx = -INFINITY;
    for (int s = 0; s < n_split; s++) mx = fmaxf(mx, ml[2 * s]);
    float lsum = 0.0f;
    for (int s = 0; s < n_split; s++)
        if (ml[2 * s] != -INFINITY) lsum += ml[2 * s + 1] * expf(ml[2 * s] - mx);
    const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < n_split; s++)
            if (ml[2 * s] != -INFINITY) acc += ws_o[(row * n_split + s) * d + c] * expf(ml[2 * s] - mx);
        kg_st(out + row * d + c, acc * inv);
    }
}

/* ================================================================ B. launchers */

#ifndef KGPU_LAUNCH
#define KGPU_LAUNCH(fn, grid, block, smem, stream, ...) fn<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#endif

enum { EW_THREADS = 256, ROW_THREADS = 256, QUANT_THREADS = 128 };

/* Blocks for a grid-stride elementwise kernel over n items. */
static unsigned ew_blocks(size_t n)
{
    size_t b = (n + EW_THREADS - 1) / EW_THREADS;
    return (unsigned)(b < 1 ? 1 : (b > 65535u * 16 ? 65535u * 16 : b));
}

template <typename T>
static cudaError_t launch_rmsnorm_t(const void *x, const void *w, void *y, int rows, int dim, float eps, cudaStream_t st)
{
    void (*fn)(const T *, const T *, T *, int, float) = rmsnorm_kernel<T>;
    KGPU_LAUNCH(fn, dim3((unsigned)rows), dim3(ROW_THREADS), 0, st, (const T *)x, (const T *)w, (T *)y, dim, eps);
    return cudaGetLastError();
}

template <typename T>
static cudaError_t launch_layernorm_t(const void *x, const void *w, const void *b, void *y, int rows, int dim,
                                      float eps, cudaStream_t st)
{
    void (*fn)(const T *, const T *, const T *, T *, int, float) = layernorm_kernel<T>;
    KGPU_LAUNCH(fn, dim3((unsigned)rows), dim3(ROW_THREADS), 0, st, (const T *)x, (const T *)w, (const T *)b,
                (T *)y, dim, eps);
    return cudaGetLastError();
}

template <typename T>
static cudaError_t launch_gated_t(int act, const void *gu, void *out, int rows, int f, cudaStream_t st)
{
    void (*fn)(const T *, T *, int, int, int) = gated_act_kernel<T>;
    KGPU_LAUNCH(fn, dim3(ew_blocks((size_t)rows * f)), dim3(EW_THREADS), 0, st, (const T *)gu, (T *)out, rows, f, act);
    return cudaGetLastError();
}

template <typename T>
static cudaError_t launch_rope_t(void *x, int n_tokens, int n_heads, int d, int pos0, float theta, cudaStream_t st)
{
    void (*fn)(T *, int, int, int, int, float) = rope_kernel<T>;
    KGPU_LAUNCH(fn, dim3(ew_blocks((size_t)n_tokens * n_heads * (d / 2))), dim3(EW_THREADS), 0, st, (T *)x,
                n_tokens, n_heads, d, pos0, theta);
    return cudaGetLastError();
}

template <typename T>
static cudaError_t launch_quant_t(const void *x, void *q, float *scale, int rows, int group, int int4, cudaStream_t st)
{
    void (*fn)(const T *, void *, float *, int, int) = quant_kernel<T>;
    KGPU_LAUNCH(fn, dim3((unsigned)rows), dim3(QUANT_THREADS), 0, st, (const T *)x, q, scale, group, int4);
    return cudaGetLastError();
}

template <typename T>
static cudaError_t launch_dequant_t(const void *q, const float *scale, void *x, int rows, int group, int int4,
                                    cudaStream_t st)
{
    if (!int4) {
        void (*fn)(const int8_t *, const float *, T *, int, int) = dequant_i8_kernel<T>;
        KGPU_LAUNCH(fn, dim3(ew_blocks((size_t)rows * group)), dim3(EW_THREADS), 0, st, (const int8_t *)q, scale,
                    (T *)x, rows, group);
    } else {
        void (*fn)(const uint8_t *, const float *, T *, int, int) = dequant_i4_kernel<T>;
        KGPU_LAUNCH(fn, dim3(ew_blocks((size_t)rows * (group / 2))), dim3(EW_THREADS), 0, st, (const uint8_t *)q,
                    scale, (T *)x, rows, group);
    }
    return cudaGetLastError();
}

/* Key splits for an attention grid of `blocks` blocks over at most max_keys keys: forced > 0
 * asks for that many; otherwise enough for two waves of sm_count multiprocessors, at least 256
 * keys per split, at most 64 splits. split_keys is a multiple of the key tile. */
static void attn_plan(long long blocks, int max_keys, int forced, int sm_count, int *n_split, int *split_keys)
{
    int s = 1;
    if (forced > 0) {
        s = forced;
    } else if (blocks > 0 && blocks < 2LL * sm_count) {
        s = (int)((2LL * sm_count + blocks - 1) / blocks);
        const int by_keys = (max_keys + 255) / 256;
        if (s > by_keys) s = by_keys;
    }
    if (s > 64) s = 64;
    if (s < 1) s = 1;
    int per = max_keys > 0 ? (max_keys + s - 1) / s : 1;
    per = (per + ATT_BK - 1) / ATT_BK * ATT_BK;
    *split_keys = per;
    *n_split = max_keys > 0 ? (max_keys + per - 1) / per : 1;
}

template <typename T, int DC>
static cudaError_t launch_attn_dc(const AttnArgs &a, dim3 grid, size_t n_rows, cudaStream_t st)
{
    void (*fn)(AttnArgs) = attn_kernel<T, DC>;
    const size_t smem = attn_smem_bytes(a.d);
    if (smem > 48 * 1024) {
        cudaError_t err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return err;
    }
    grid.z = (unsigned)a.n_split;
    KGPU_LAUNCH(fn, grid, dim3(ATT_THREADS), smem, st, a);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess || a.n_split == 1) return err;
    void (*cfn)(const float *, const float *, T *, int, int) = attn_combine_kernel<T>;
    KGPU_LAUNCH(cfn, dim3((unsigned)n_rows), dim3(128), 0, st, (const float *)a.ws_o, (const float *)a.ws_ml,
                (T *)a.out, a.n_split, a.d);
    return cudaGetLastError();
}

/* a fully filled except n_split/split_keys/ws (set by the caller from attn_plan). */
template <typename T>
static cudaError_t launch_attn_t(const AttnArgs &a, dim3 grid, size_t n_rows, cudaStream_t st)
{
    if (a.d <= 64) return launch_attn_dc<T, 2>(a, grid, n_rows, st);
    if (a.d <= 128) return launch_attn_dc<T, 4>(a, grid, n_rows, st);
    return launch_attn_dc<T, 8>(a, grid, n_rows, st);
}

/* The attention work of a prefill call: grid (query blocks of 16, query heads), n_rows output
 * rows, max_keys keys per sequence at most. n_split and the workspace are set later. */
static void attn_args_prefill(AttnArgs *a, dim3 *grid, size_t *n_rows, int *max_keys, const void *q, const void *k,
                              const void *v, void *out, int n_new, int n_ctx, int h, int h_kv, int d)
{
    memset(a, 0, sizeof *a);
    a->q = q;
    a->k = k;
    a->v = v;
    a->out = out;
    a->n_new = n_new;
    a->n_ctx = n_ctx;
    a->h = h;
    a->h_kv = h_kv;
    a->d = d;
    a->group = h / h_kv;
    a->gchunks = 1;
    a->n_split = 1;
    a->scale = 1.0f / sqrtf((float)d);
    *grid = dim3((unsigned)((n_new + ATT_ROWS - 1) / ATT_ROWS), (unsigned)h);
    *n_rows = (size_t)n_new * h;
    *max_keys = n_ctx + n_new;
}

/* Decode: grid (sequences, KV heads · chunks of 16 query heads); ctx_off_dev is read by the
 * kernel, ctx_off_host gives the longest sequence. */
static void attn_args_decode(AttnArgs *a, dim3 *grid, size_t *n_rows, int *max_keys, const void *q, const void *k,
                             const void *v, void *out, int batch, const int *ctx_off_dev, const int *ctx_off_host,
                             int h, int h_kv, int d)
{
    memset(a, 0, sizeof *a);
    a->q = q;
    a->k = k;
    a->v = v;
    a->out = out;
    a->ctx_off = ctx_off_dev;
    a->h = h;
    a->h_kv = h_kv;
    a->d = d;
    a->group = h / h_kv;
    a->gchunks = (a->group + ATT_ROWS - 1) / ATT_ROWS;
    a->n_split = 1;
    a->scale = 1.0f / sqrtf((float)d);
    *grid = dim3((unsigned)batch, (unsigned)(h_kv * a->gchunks));
    *n_rows = (size_t)batch * h;
    int mx = 0;
    for (int b = 0; b < batch; b++)
        if (ctx_off_host[b + 1] - ctx_off_host[b] > mx) mx = ctx_off_host[b + 1] - ctx_off_host[b];
    *max_keys = mx;
}

/* Floats of split workspace for n_rows rows (0 without splits); ws_set points the args into it. */
static size_t attn_ws_floats(const AttnArgs *a, size_t n_rows)
{
    return a->n_split > 1 ? n_rows * (size_t)a->n_split * ((size_t)a->d + 2) : 0;
}

static void attn_ws_set(AttnArgs *a, float *ws, size_t n_rows)
{
    a->ws_o = ws;
    a->ws_ml = ws + n_rows * (size_t)a->n_split * a->d;
}

#define KGPU_DISPATCH(bf16, call_t) ((bf16) ? call_t<__nv_bfloat16> : call_t<__half>)

/* ================================================================ C. the C API */
#ifndef KGPU_KERNELS_ONLY

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

#endif /* KGPU_KERNELS_ONLY */
