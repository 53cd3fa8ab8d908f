// common.cuh: helpers shared by the kernels in this directory.
//
// Every kernel is declared extern "C" so that its PTX entry keeps the plain
// name the Go side looks up, and every parameter is 8 bytes wide (a pointer,
// a long long or a double): the Go side hands the driver one 8-byte value
// per argument (backend.go's Backend.launch), so a 4-byte float parameter
// would be fed the wrong bytes.
#pragma once

#include <math_constants.h>

// Asynchronous copies from global to shared memory (cp.async, sm_80+), for
// kernels that keep the next tiles' loads in flight while they compute.
// cp_async16 copies 16 bytes (both addresses 16-byte aligned), cp_async8
// 8 and cp_async4 4; only the first src_bytes are read and the rest of the
// destination is zero-filled, so src_bytes = 0 reads nothing and writes
// zeros (src must still be a valid address). cp_async_commit closes the
// group of copies this thread issued since the last commit;
// cp_async_wait<N>() waits until at most N of this thread's groups are
// still in flight. A copy is visible to the thread that issued it after the
// wait, and to the other threads of the block after a __syncthreads that
// follows the wait. The CPU emulator (emu/cuda_emu.h, which defines
// KVLAB_EMU) performs each copy only at the wait that covers it.
#ifndef KVLAB_EMU
__device__ __forceinline__ void cp_async16(void* dst_shared, const void* src, int src_bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst_shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async4(void* dst_shared, const void* src, int src_bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst_shared);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async8(void* dst_shared, const void* src, int src_bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst_shared);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// DYNAMIC_SHARED declares name as the block's dynamic shared memory, of
// which the kernel uses bytes (the launch must give at least that many).
#define DYNAMIC_SHARED(name, bytes) extern __shared__ __align__(16) unsigned char name[]
#endif

// bf16_to_float widens a bfloat16 bit pattern (a weight held as bf16, see
// FromHostBF16) to float, exactly: bf16 is the top half of a float.
__device__ __forceinline__ float bf16_to_float(unsigned short h) { return __uint_as_float((unsigned)h << 16); }

// f16_to_float widens an IEEE binary16 bit pattern (a KV cache held in
// float16, see NewKV) to float, exactly, subnormals included: the GPU's
// conversion instruction, or the same function in integer steps on the
// emulator.
__device__ __forceinline__ float f16_to_float(unsigned short h) {
#ifndef KVLAB_EMU
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#else
    const unsigned sign = (unsigned)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) return __uint_as_float(sign | __float_as_uint((float)mant * (1.0f / 16777216.0f)));
    return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

// float_to_bf16 and float_to_f16 round f to the nearest bfloat16 or
// binary16, ties to even, in integer steps, so that the GPU, the emulator
// and the CPU backend (kernels.F32ToBF16, kernels.F32ToF16) store the very
// same bits: float16 goes to ±Inf past 65520 and to subnormals below 2⁻¹⁴,
// a NaN stays a quiet NaN.
__device__ __forceinline__ unsigned short float_to_bf16(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

// round_shift returns v >> shift (shift ≥ 1) rounded to nearest, ties to
// even.
__device__ __forceinline__ unsigned round_shift(unsigned v, unsigned shift) {
    const unsigned q = v >> shift, rem = v & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

__device__ __forceinline__ unsigned short float_to_f16(float f) {
    const unsigned b = __float_as_uint(f);
    const unsigned short sign = (unsigned short)((b >> 16) & 0x8000u);
    const int exp = (int)((b >> 23) & 0xffu);
    const unsigned mant = b & 0x7fffffu;
    if (exp == 0xff) return mant == 0 ? (unsigned short)(sign | 0x7c00u) : (unsigned short)(sign | 0x7e00u | (mant >> 13));
    const int e = exp - 127 + 15;
    if (e >= 0x1f) return (unsigned short)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return sign;
        return (unsigned short)(sign | round_shift(mant | 0x800000u, (unsigned)(14 - e)));
    }
    return (unsigned short)(sign | (((unsigned)e << 10) + round_shift(mant, 13)));
}

// warp_sum returns the sum of v over the 32 lanes of a warp, in every lane.
// The butterfly order is fixed, so the result does not depend on timing.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// warp_sum_d is warp_sum in double precision.
__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// warp_max returns the maximum of v over the warp, in every lane.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// block_sum_d returns the sum of v over the whole block (blockDim.x a
// multiple of 32, at most 1024) in every thread. scratch must hold 32
// doubles. It ends with a barrier, so scratch may be reused right after.
__device__ __forceinline__ double block_sum_d(double v, double* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    v = warp_sum_d(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    double t = lane < warps ? scratch[lane] : 0.0;
    t = warp_sum_d(t);
    __syncthreads();
    return t;
}

// block_max returns the maximum of v over the whole block in every thread;
// the same rules as block_sum_d apply, with 32 floats of scratch.
__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float t = lane < warps ? scratch[lane] : -CUDART_INF_F;
    t = warp_max(t);
    __syncthreads();
    return t;
}

// kv_bf16 and kv_f16 name a 16-bit KV cache's element type for the
// kernels templated on it: how a cached bit pattern widens to float and how
// a float rounds to one.
struct kv_bf16 {
    static __device__ __forceinline__ float widen(unsigned short h) { return bf16_to_float(h); }
    static __device__ __forceinline__ unsigned short narrow(float f) { return float_to_bf16(f); }
};

struct kv_f16 {
    static __device__ __forceinline__ float widen(unsigned short h) { return f16_to_float(h); }
    static __device__ __forceinline__ unsigned short narrow(float f) { return float_to_f16(f); }
};
