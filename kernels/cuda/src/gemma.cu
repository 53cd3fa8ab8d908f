// gemma.cu: the element-wise operations Gemma-3 adds (kernels.GemmaOps).
//
// Computes: gelu_tanh_mul: dst[i] = gelu_tanh(gate[i]) * up[i], with
//           gelu_tanh(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
//           (HuggingFace's gelu_pytorch_tanh), in float with tanhf.
//           soft_cap: t[i] = limit·tanh(t[i]/limit) in place, the same
//           float steps as the CPU backend (divide, tanh, multiply).
//           scale: t[i] *= s in place (Gemma's embedding scale; the
//           rounding to the embeddings' dtype, when there is one, is the
//           host's, see GemmaOps.Scale in gemma.go).
//           The CPU backend evaluates tanh in float64 and rounds once;
//           tanhf is within a couple of ulp of that.
// Launch:   1-D grid of 256-thread blocks (at most 4096), grid-stride loop
//           over the n elements. limit and s arrive as doubles (every
//           parameter is 8 bytes) and are narrowed to float.
// Checked:  gemma_test.go against the CPU backend: gates in [-12, 12),
//           soft caps 1.5, 30 and 50 of values in [-100, 100), scales with
//           and without a dtype rounding; tolerance 1e-5 (relative above
//           1, absolute below).
#include "common.cuh"

extern "C" __global__ void gelu_tanh_mul(float* __restrict__ dst, const float* __restrict__ gate,
                                         const float* __restrict__ up, long long n) {
    const float c = 0.7978845608028654f; // √(2/π)
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float x = gate[i];
        dst[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * up[i];
    }
}

extern "C" __global__ void soft_cap(float* __restrict__ t, long long n, double limit_d) {
    const float limit = (float)limit_d;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        t[i] = tanhf(t[i] / limit) * limit;
    }
}

extern "C" __global__ void scale(float* __restrict__ t, long long n, double s_d) {
    const float s = (float)s_d;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        t[i] *= s;
    }
}
