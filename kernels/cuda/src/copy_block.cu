// copy_block.cu: copy one KV block onto another in both caches, the copy in
// copy-on-write.
//
// Computes: kc rows [dst*bs, dst*bs+bs) = kc rows [src*bs, src*bs+bs), and
//           the same for vc. A block's rows are contiguous, so this is two
//           flat copies of n = bs*cols floats. src != dst is not required;
//           an equal pair copies a block onto itself.
// Launch:   1-D grid of 256-thread blocks (at most 1024), grid-stride loop
//           over the n elements.
// Checked:  TestWriteKVAndCopyBlock against the CPU backend; exact.
// copy_block16 is the same over a cache held in 16 bits (TestWriteKV16).
#include "common.cuh"

extern "C" __global__ void copy_block(float* kc, float* vc, long long src_off, long long dst_off, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        kc[dst_off + i] = kc[src_off + i];
        vc[dst_off + i] = vc[src_off + i];
    }
}

extern "C" __global__ void copy_block16(unsigned short* kc, unsigned short* vc, long long src_off, long long dst_off,
                                        long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        kc[dst_off + i] = kc[src_off + i];
        vc[dst_off + i] = vc[src_off + i];
    }
}
