/* gpu_kernels.cuh — CUDA kernels and their launchers (norms, activations, RoPE, quantization,
 * attention), included by gpu.cu (the C API of gpu.h) and, alone, by the host-side emulator.
 *
 * Responsible for: device code computing exactly the formulas and layouts of ref.h on fp16/bf16
 * data (fp32 loads, fp32 math, one rounding on store), and their launch shapes.
 * Not responsible for: the host API (gpu.cu), shapes and repetitions (calibrate/), the reference
 * semantics (ref.c).
 *
 * Tests: `build/kvtest kernels_gpu` compares every kernel with its twin on random inputs (skipped
 * without a device); kernels/emu/emu_test.cpp runs them on the CPU.
 *
 * Two parts:
 *   A. device helpers and kernels (templated on the element type T = __half | __nv_bfloat16);
 *   B. launchers: grid/block/shared-memory choices, returning cudaError_t (no other runtime calls
 *      besides cudaFuncSetAttribute and cudaGetLastError), so the kernels plus launchers can be
 *      compiled on their own (KGPU_KERNELS_ONLY) by the host-side emulator in kernels/emu/, which
 *      checks them against the twins on machines without a GPU.
 * The C API (context, memory, copies, timing, events and stream waits, cuBLAS, argument checks) is
 * gpu.cu, the one translation unit that includes this file in a build.
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
#ifndef KV_GPU_KERNELS_CUH
#define KV_GPU_KERNELS_CUH
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

#endif
