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
