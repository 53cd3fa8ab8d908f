// gather_rows.cu: dst row r = src row idx[r]. Backs both Embed (src is the
// embedding table, idx the token ids) and GatherRows (src the hidden states,
// idx the rows whose logits are wanted): the two operations are the same
// copy, so they share one kernel.
//
// Computes: dst[r][c] = src[idx[r]][c]. The host checks every index against
//           src's row count before the launch, so the kernel trusts them.
// Launch:   one block per destination row (grid = len(idx)), 256 threads
//           striding over the columns: each row is one coalesced copy.
// gather_rows_bf16 is the same copy from a table held as bf16 (a bf16
// checkpoint's embeddings, see FromHostBF16), widened to f32 exactly.
//
// Checked:  TestEmbedAndGatherRows against the CPU backend; exact.
//           TestBF16Weights: Embed from a bf16 table; exact.
#include "common.cuh"

extern "C" __global__ void gather_rows(float* __restrict__ dst, const float* __restrict__ src,
                                       const int* __restrict__ idx, long long cols) {
    const long long r = blockIdx.x;
    const float* s = src + (long long)idx[r] * cols;
    float* d = dst + r * cols;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}

extern "C" __global__ void gather_rows_bf16(float* __restrict__ dst, const unsigned short* __restrict__ src,
                                            const int* __restrict__ idx, long long cols) {
    const long long r = blockIdx.x;
    const unsigned short* s = src + (long long)idx[r] * cols;
    float* d = dst + r * cols;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) d[c] = bf16_to_float(s[c]);
}
