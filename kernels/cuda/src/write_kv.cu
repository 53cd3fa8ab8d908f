// write_kv.cu: store this step's key and value rows into the paged KV cache.
//
// Computes: for every row r with slots[r] >= 0,
//             kc[slots[r]] = k[r] and vc[slots[r]] = v[r];
//           a negative slot skips the row: its KV is already cached in a
//           block that other sequences may share, so it must not be written.
//           The host checks every slot against the cache's row count.
// Launch:   one block per row (grid = rows of k), 256 threads striding over
//           the NumKVHeads*HeadDim columns.
// Checked:  TestWriteKVAndCopyBlock against the CPU backend, including
//           skipped rows; exact.
//
// write_kv_bf16 and write_kv_f16 write into a cache held in 16 bits
// (kernels.KVDType): each value is rounded to nearest, ties to even
// (float_to_bf16, float_to_f16), and every row of k and v, skipped or not,
// is overwritten with its rounded values, so that AttendLocal over k and v
// sees what Attend over the cache sees. Same launch. Checked:
// TestWriteKV16 (the CPU backend's bits, the rounded k and v).
#include "common.cuh"

extern "C" __global__ void write_kv(float* __restrict__ kc, float* __restrict__ vc,
                                    const float* __restrict__ k, const float* __restrict__ v,
                                    const int* __restrict__ slots, long long cols) {
    const long long r = blockIdx.x;
    const int slot = slots[r];
    if (slot < 0) return;
    const long long dst = (long long)slot * cols, src = r * cols;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        kc[dst + c] = k[src + c];
        vc[dst + c] = v[src + c];
    }
}

template <class KV>
__device__ __forceinline__ void write_kv16(unsigned short* __restrict__ kc, unsigned short* __restrict__ vc,
                                           float* __restrict__ k, float* __restrict__ v,
                                           const int* __restrict__ slots, long long cols) {
    const long long r = blockIdx.x;
    const int slot = slots[r];
    const long long dst = (long long)slot * cols, src = r * cols;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        const unsigned short hk = KV::narrow(k[src + c]), hv = KV::narrow(v[src + c]);
        k[src + c] = KV::widen(hk);
        v[src + c] = KV::widen(hv);
        if (slot >= 0) {
            kc[dst + c] = hk;
            vc[dst + c] = hv;
        }
    }
}

extern "C" __global__ void write_kv_bf16(unsigned short* kc, unsigned short* vc, float* k, float* v,
                                         const int* slots, long long cols) {
    write_kv16<kv_bf16>(kc, vc, k, v, slots, cols);
}

extern "C" __global__ void write_kv_f16(unsigned short* kc, unsigned short* vc, float* k, float* v,
                                        const int* slots, long long cols) {
    write_kv16<kv_f16>(kc, vc, k, v, slots, cols);
}
