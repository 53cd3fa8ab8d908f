// add.cu: the residual connection, dst += x, element by element.
//
// Computes: dst[i] = dst[i] + x[i] for i in [0, n), n = rows*cols.
// Launch:   1-D grid of 256-thread blocks (at most 4096 blocks); the
//           grid-stride loop covers any n, so the block count only tunes
//           occupancy and never changes a result.
// Checked:  TestAdd (kernels/cuda, -tags cuda) against the CPU backend on
//           random inputs; tolerance 1e-5 (relative above 1, absolute
//           below), though one float addition is bit-identical in practice.
#include "common.cuh"

extern "C" __global__ void add(float* __restrict__ dst, const float* __restrict__ x, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        dst[i] += x[i];
    }
}
