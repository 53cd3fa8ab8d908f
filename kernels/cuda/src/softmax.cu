// softmax.cu: softmax of every row, in place.
//
// Computes: x[r][c] = e^(x[r][c] - m) / sum_c' e^(x[r][c'] - m), m the row's
//           maximum, so exp cannot overflow. Each exponential is rounded to
//           float and stored, and the normaliser sums those stored values
//           in double: vocabulary rows exceed 100k entries, and a float
//           running sum would drop the small tail probabilities (the CPU
//           backend sums in double for the same reason).
// Launch:   one 512-thread block per row (grid = rows); three passes over
//           the row (max, exp and sum, scale), the row staying in L2 between
//           them.
// Checked:  TestSoftmaxRows against the CPU backend on rows of 1 to 128256
//           columns; tolerance 1e-5 relative.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(512)
softmax_rows(float* __restrict__ x, long long cols) {
    __shared__ float fscratch[32];
    __shared__ double dscratch[32];
    float* xr = x + (long long)blockIdx.x * cols;

    float m = -CUDART_INF_F;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_max(m, fscratch);

    double sum = 0.0;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        const float e = expf(xr[c] - m);
        xr[c] = e;
        sum += (double)e;
    }
    sum = block_sum_d(sum, dscratch);

    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
        xr[c] = (float)((double)xr[c] / sum);
    }
}
