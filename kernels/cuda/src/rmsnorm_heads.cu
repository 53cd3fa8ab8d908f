// rmsnorm_heads.cu: per-head RMSNorm in place (Qwen3's q/k norm).
//
// Computes: for every head_dim-wide slice h of every row of x (slices are
//           contiguous, so the tensor is simply n_slices = rows*cols/head_dim
//           slices in a row), h[i] = w[i] * (h[i] * inv), inv as in
//           rmsnorm.cu, with the sum of squares accumulated in double.
// Launch:   256-thread blocks of 8 warps, one warp per slice
//           (grid = ceil(n_slices / 8)); a head is at most a few hundred
//           values, so a warp reduction is all it needs.
// Checked:  TestRMSNormHeads against the CPU backend; tolerance 1e-5
//           (relative above 1, absolute below).
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
rmsnorm_heads(float* x, const float* __restrict__ w, long long n_slices, long long head_dim, double eps_d) {
    const long long slice = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (slice >= n_slices) return; // warp-uniform, so no shuffle loses a partner
    float* h = x + slice * head_dim;

    double ss = 0.0;
    for (long long i = lane; i < head_dim; i += 32) {
        const double v = h[i];
        ss += v * v;
    }
    ss = warp_sum_d(ss);

    const float mean = (float)(ss / (double)head_dim);
    const float inv = (float)(1.0 / sqrt((double)(mean + (float)eps_d)));
    for (long long i = lane; i < head_dim; i += 32) {
        h[i] = w[i] * (h[i] * inv);
    }
}
