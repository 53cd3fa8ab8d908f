// silu_mul.cu: the gated activation of a Llama-style MLP.
//
// Computes: dst[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g), the
//           form PyTorch uses; expf (not the fast __expf) keeps the error
//           within a few ulp of the CPU backend's (siluMulGo, in float32
//           from the attention exponential).
// Launch:   1-D grid of 256-thread blocks (at most 4096), grid-stride loop
//           over the rows*cols elements.
// Checked:  TestSiLUMul against the CPU backend, gates in [-12, 12);
//           tolerance 1e-5 (relative above 1, absolute below).
#include "common.cuh"

extern "C" __global__ void silu_mul(float* __restrict__ dst, const float* __restrict__ gate,
                                    const float* __restrict__ up, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float g = gate[i];
        dst[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
