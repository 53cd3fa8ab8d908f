// argmax.cu: the column of each row's largest value (greedy sampling).
//
// Computes: out[r] = the smallest c with x[r][c] == max over the row,
//           skipping NaNs; 0 when the row holds nothing but NaNs (or is
//           empty). "Smallest column on ties" makes greedy decoding
//           reproducible, and it is the CPU backend's rule.
// Launch:   one 256-thread block per row (grid = rows). Each thread scans
//           columns tid, tid+256, ... in increasing order, keeping a strict
//           maximum, so it holds its smallest best column; the block then
//           combines (value, column) pairs with the same tie rule.
// Checked:  TestArgmaxRows against the CPU backend, with planted ties and
//           NaNs; exact.
#include "common.cuh"

// better reports whether candidate (v, i) beats (bv, bi); i < 0 means "none".
__device__ __forceinline__ bool better(float v, long long i, float bv, long long bi) {
    if (i < 0) return false;
    if (bi < 0) return true;
    return v > bv || (v == bv && i < bi);
}

extern "C" __global__ void __launch_bounds__(256)
argmax_rows(int* __restrict__ out, const float* __restrict__ x, long long cols) {
    __shared__ float sv[32];
    __shared__ long long si[32];
    const long long row = blockIdx.x;
    const float* xr = x + row * cols;
    float bv = 0.0f;
    long long bi = -1;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = xr[c];
        if (v != v) continue; // NaN
        if (bi < 0 || v > bv) { bv = v; bi = c; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, bv, o);
        const long long i = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(v, i, bv, bi)) { bv = v; bi = i; }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x >> 5;
        bv = lane < warps ? sv[lane] : 0.0f;
        bi = lane < warps ? si[lane] : -1;
        for (int o = 16; o > 0; o >>= 1) {
            const float v = __shfl_xor_sync(0xffffffffu, bv, o);
            const long long i = __shfl_xor_sync(0xffffffffu, bi, o);
            if (better(v, i, bv, bi)) { bv = v; bi = i; }
        }
        if (lane == 0) out[row] = bi < 0 ? 0 : (int)bi;
    }
}
