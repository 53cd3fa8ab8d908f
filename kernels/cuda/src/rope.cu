// rope.cu: rotary position embedding in place, HuggingFace's rotate_half
// convention.
//
// Computes: for row r at position pos[r], every head of the row, and every
//           i < half = head_dim/2, with angle = (float)pos[r] * inv_freq[i]:
//             lo = x[i],  hi = x[i + half]
//             x[i]        = lo*cos(angle) - hi*sin(angle)
//             x[i + half] = hi*cos(angle) + lo*sin(angle)
//           The angle is rounded to float as HuggingFace does; sin and cos
//           are evaluated in double and rounded, like the CPU backend. The
//           products use __fmul_rn/__fadd_rn/__fsub_rn so that nvcc cannot
//           fuse them into FMAs: the CPU backend rounds each product, and
//           this keeps the two bit-identical whenever sin/cos agree.
// Launch:   one block per row (grid = rows), blockDim = min(128, half rounded
//           up to a warp); each thread owns one frequency i and walks every
//           head, so sin/cos are computed once per (row, i).
// Checked:  TestRoPE against the CPU backend on random positions up to
//           100000; tolerance 1e-5 (relative above 1, absolute below).
#include "common.cuh"

extern "C" __global__ void rope(float* __restrict__ x, const int* __restrict__ pos,
                                const float* __restrict__ inv_freq, long long cols, long long head_dim) {
    const long long row = blockIdx.x;
    const long long half = head_dim / 2;
    float* xr = x + row * cols;
    const float p = (float)pos[row];
    for (long long i = threadIdx.x; i < half; i += blockDim.x) {
        const float angle = __fmul_rn(p, inv_freq[i]);
        double sd, cd;
        sincos((double)angle, &sd, &cd);
        const float s = (float)sd, c = (float)cd;
        for (long long h = 0; h < cols; h += head_dim) {
            const float lo = xr[h + i], hi = xr[h + i + half];
            xr[h + i] = __fsub_rn(__fmul_rn(lo, c), __fmul_rn(hi, s));
            xr[h + i + half] = __fadd_rn(__fmul_rn(hi, c), __fmul_rn(lo, s));
        }
    }
}
