// rmsnorm.cu: RMSNorm of every row.
//
// Computes: dst[r][i] = w[i] * (x[r][i] * inv_r), where
//           inv_r = 1 / sqrt(mean_i(x[r][i]^2) + eps).
//           The sum of squares is accumulated in double and rounded once,
//           and the scaling follows HuggingFace's order, exactly as the CPU
//           backend does, so the two agree to the last bit or two. dst may
//           be x: each thread reads its elements before it writes them, and
//           only after the reduction.
// Launch:   one 256-thread block per row (grid = rows).
// Checked:  TestRMSNorm against the CPU backend (also with dst == x);
//           tolerance 1e-5 (relative above 1, absolute below).
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256)
rmsnorm(float* dst, const float* x, const float* __restrict__ w, long long cols, double eps_d) {
    __shared__ double scratch[32];
    const long long row = blockIdx.x;
    const float* xr = x + row * cols;
    float* dr = dst + row * cols;

    double ss = 0.0;
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) {
        const double v = xr[i];
        ss += v * v;
    }
    ss = block_sum_d(ss, scratch);

    const float mean = (float)(ss / (double)cols);
    const float inv = (float)(1.0 / sqrt((double)(mean + (float)eps_d)));
    for (long long i = threadIdx.x; i < cols; i += blockDim.x) {
        dr[i] = w[i] * (xr[i] * inv);
    }
}
