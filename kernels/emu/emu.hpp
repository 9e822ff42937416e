/* emu.hpp — a host-side emulation of just enough of the CUDA execution model to run
 * kernels/gpu_kernels.cuh's kernels and launchers on a machine without a GPU (see emu_test.cpp).
 *
 * Responsible for: one std::thread per CUDA thread of a block (blocks run one after another),
 * __syncthreads as a block barrier, __shfl_sync/__shfl_xor_sync as a per-warp exchange between
 * two barriers (full mask only), static __shared__ arrays as function statics, dynamic shared
 * memory as an exactly-sized heap buffer filled with NaN before every block (so AddressSanitizer
 * sees overruns and reads of unwritten shared memory poison the results), and launch checks
 * (block a multiple of 32, grid limits, <= 227 KiB dynamic shared memory).
 * Not responsible for: timing, memory spaces (device pointers are host pointers), warp
 * divergence semantics beyond "every lane reaches every shuffle" (a lane that skips one
 * deadlocks, as a real full-mask shuffle would misbehave), tensor-core or other intrinsics.
 * Invariant: must be included before gpu_kernels.cuh, which is compiled with KGPU_KERNELS_ONLY.
 */
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <barrier>
#include <thread>
#include <vector>
#include <memory>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <cmath>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#undef __align__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline thread_local int emu_tid;
inline unsigned char *emu_dyn_ptr; /* exactly the launch's dynamic smem: ASan sees overflows */
inline size_t emu_dyn_bytes;
#define KGPU_DYN_SMEM(T, name) T *name = reinterpret_cast<T *>(emu_dyn_ptr)

struct EmuWarp {
    std::unique_ptr<std::barrier<>> bar;
    alignas(8) unsigned char buf[32][8];
};
inline std::vector<EmuWarp> emu_warps;
inline std::unique_ptr<std::barrier<>> emu_block_bar;

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }

template <class T> T emu_shfl(T v, int src)
{
    EmuWarp &w = emu_warps[emu_tid / 32];
    int lane = emu_tid & 31;
    std::memcpy(w.buf[lane], &v, sizeof v);
    w.bar->arrive_and_wait();
    T r;
    std::memcpy(&r, w.buf[src & 31], sizeof r);
    w.bar->arrive_and_wait();
    return r;
}
template <class T> T __shfl_sync(unsigned mask, T v, int src) { if (mask != 0xffffffffu) abort(); return emu_shfl(v, src); }
template <class T> T __shfl_xor_sync(unsigned mask, T v, int m) { if (mask != 0xffffffffu) abort(); return emu_shfl(v, (emu_tid & 31) ^ m); }

inline cudaError_t emu_last_error = cudaSuccess;
#define cudaGetLastError() (emu_last_error)
template <class F> cudaError_t emu_func_set_attribute(F, int, int v)
{
    if (v > 227 * 1024) return cudaErrorInvalidValue;
    return cudaSuccess;
}
#define cudaFuncSetAttribute(f, attr, v) emu_func_set_attribute(f, (int)(attr), v)

inline long emu_launches, emu_blocks_run;

template <class F> void emu_launch(dim3 grid, dim3 block, size_t smem, F fn)
{
    if (block.y != 1 || block.z != 1 || block.x % 32 || block.x > 1024) { fprintf(stderr, "emu: bad block\n"); abort(); }
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535) { fprintf(stderr, "emu: bad grid %u %u %u\n", grid.x, grid.y, grid.z); abort(); }
    if (smem > 227 * 1024) { fprintf(stderr, "emu: smem %zu too big\n", smem); abort(); }
    emu_dyn_bytes = smem;
    std::unique_ptr<unsigned char[]> dyn(smem ? new unsigned char[smem] : nullptr);
    emu_dyn_ptr = dyn.get();
    emu_launches++;
    blockDim = block;
    gridDim = grid;
    const int nt = (int)block.x;
    emu_block_bar = std::make_unique<std::barrier<>>(nt);
    emu_warps.clear();
    emu_warps.resize(nt / 32);
    for (auto &w : emu_warps) w.bar = std::make_unique<std::barrier<>>(32);
    std::vector<std::thread> th;
    for (int t = 0; t < nt; t++)
        th.emplace_back([&, t]() {
            emu_tid = t;
            threadIdx = dim3((unsigned)t, 0, 0);
            for (unsigned z = 0; z < grid.z; z++)
                for (unsigned y = 0; y < grid.y; y++)
                    for (unsigned x = 0; x < grid.x; x++) {
                        blockIdx = dim3(x, y, z);
                        if (t == 0) {
                            if (emu_dyn_bytes) memset(emu_dyn_ptr, 0xff, emu_dyn_bytes); /* NaN garbage */
                            emu_blocks_run++;
                        }
                        emu_block_bar->arrive_and_wait();
                        fn();
                        emu_block_bar->arrive_and_wait();
                    }
        });
    for (auto &x : th) x.join();
}
#define KGPU_LAUNCH(fn, grid, block, smem, stream, ...) emu_launch((grid), (block), (smem), [&]() { fn(__VA_ARGS__); })
