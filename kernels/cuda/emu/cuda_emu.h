// cuda_emu.h: just enough of CUDA C++ to compile this directory's .cu
// kernels with an ordinary C++20 compiler and run them on the CPU.
//
// Why: the kernels cannot be run on a machine without a GPU, yet their index
// arithmetic, masking, reductions and tiling can be checked anywhere. The
// emulator (emulator.cc, build tag cudaemu) compiles the very same .cu files
// against this header and runs every CUDA thread of a block as an OS thread:
//
//   - each CUDA thread of a block is a coroutine (a ucontext with its own
//     stack), all of them on one OS thread: a thread runs until it reaches
//     a barrier, then the next one runs. Blocks run one after another, so a
//     __shared__ variable becomes a function-level static (one per kernel
//     instantiation, reused by each block in turn);
//   - __syncthreads and __syncwarp are barriers over the block's or the
//     warp's live threads; shuffles exchange values through a per-warp
//     array between two warp barriers;
//   - WMMA fragments hold a whole 16×16 tile in every lane, and every lane
//     computes the full product (wasteful, but simple and exact);
//   - bf16 rounding is done bit for bit (round to nearest even);
//   - a cp.async copy is performed at the wait that covers it, the latest
//     moment a GPU may, so a read before its wait sees stale bytes.
//
// What it cannot show: anything about the real hardware. Fragment layouts,
// memory coalescing, bank conflicts, timing, and the few numerical details
// where the GPU differs from the host (expf's last ulp, the tensor cores'
// internal summation order) are outside its reach.
#pragma once

// The GPU code rounds products where the kernels say so (__fmul_rn), and the
// CPU reference never fuses; keep the host compiler from contracting a*b+c
// into an FMA on targets that have one.
#pragma GCC optimize("fp-contract=off")

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

using std::max;
using std::min;

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

struct alignas(16) float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

struct alignas(8) uint2 {
    unsigned x, y;
};

// Coordinates of the running CUDA thread, set by the emulator's scheduler
// each time it resumes one (all of a block's threads share one OS thread).
extern dim3 threadIdx;
extern dim3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

// Barriers and the exchange slots of shuffles, implemented by emulator.cc.
void emu_sync_block();
void emu_sync_warp();
uint64_t* emu_warp_slots(); // 32 slots of the calling thread's warp

inline void __syncthreads() { emu_sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_sync_warp(); }

// emu_shfl returns v as held by lane src of the calling thread's warp. Every
// lane of the warp must call it, as the kernels here always do.
template <class T>
inline T emu_shfl(T v, unsigned src) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    uint64_t* slot = emu_warp_slots();
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    slot[threadIdx.x % 32] = bits;
    emu_sync_warp();
    const uint64_t got = slot[src % 32];
    emu_sync_warp(); // nobody overwrites a slot before everyone has read it
    T out;
    std::memcpy(&out, &got, sizeof(T));
    return out;
}

template <class T>
inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, (unsigned)src); }
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask) { return emu_shfl(v, (threadIdx.x % 32) ^ (unsigned)mask); }

// cp.async (see common.cuh). The emulator queues each copy on the issuing
// thread and performs it, zero fill included, only when that thread waits
// for its group (cp_async_wait<N> performs every group but the newest N):
// the latest moment a GPU may. So a kernel that reads shared memory before
// the wait that covers it, or waits for too few groups, reads stale bytes
// here as it could on a GPU, and a thread that exits with copies not
// waited for aborts the run. What it cannot show is a copy landing early.
#define KVLAB_EMU 1

void emu_cp_async(void* dst, const void* src, int src_bytes, int size);
void emu_cp_async_commit();
void emu_cp_async_wait(int newest_pending);

inline void cp_async16(void* dst, const void* src, int src_bytes) { emu_cp_async(dst, src, src_bytes, 16); }
inline void cp_async8(void* dst, const void* src, int src_bytes) { emu_cp_async(dst, src, src_bytes, 8); }
inline void cp_async4(void* dst, const void* src, int src_bytes) { emu_cp_async(dst, src, src_bytes, 4); }
inline void cp_async_commit() { emu_cp_async_commit(); }

template <int N>
inline void cp_async_wait() {
    emu_cp_async_wait(N);
}

// Dynamic shared memory is one buffer per launch, of the size the launch
// asked for, shared by the blocks as they run one after another;
// emu_dynamic_shared aborts when a kernel needs more than it was given.
unsigned char* emu_dynamic_shared(size_t bytes);
#define DYNAMIC_SHARED(name, bytes) unsigned char* name = emu_dynamic_shared(bytes)

inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}

// Correctly rounded arithmetic without contraction (see the pragma above),
// so plain operators already behave this way.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
