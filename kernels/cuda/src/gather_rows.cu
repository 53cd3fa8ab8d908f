// gather_rows.cu: dst row r = src row idx[r]. Backs both Embed (src is the
// embedding table, idx the token ids) and GatherRows (src the hidden states,
// idx the rows whose logits are wanted): the two operations are the same
// copy, so they share one kernel.
//
// Computes: dst[r][c] = src[idx[r]][c]. The host checks every index against
//           src's row count before the launch, so the kernel trusts them.
// Launch:   one block per destination row (grid = len(idx)), 256 threads
//           striding over the columns: each row is one coalesced copy.
// Checked:  TestEmbedAndGatherRows against the CPU backend; exact.
#include "common.cuh"

extern "C" __global__ void gather_rows(float* __restrict__ dst, const float* __restrict__ src,
                                       const int* __restrict__ idx, long long cols) {
    const long long r = blockIdx.x;
    const float* s = src + (long long)idx[r] * cols;
    float* d = dst + r * cols;
    for (long long c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}
