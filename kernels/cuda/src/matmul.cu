// matmul.cu: dst = x · wᵀ on tensor cores (WMMA, bf16 inputs, f32
// accumulation).
//
// Computes: dst[i][j] = sum_k x[i][k] * w[j][k], x n×in, w out×in (the layout
//           of a HuggingFace Linear weight), dst n×out, all row-major f32.
//
// Precision choice: the backend's tensors are f32, and these kernels round
//           each tile of x and w to bf16 as they copy it from global into
//           shared memory ("convert on load"); products are exact in the
//           tensor core and sums are kept in f32. bf16 rather than f16
//           because it has f32's exponent range: activations with outliers
//           in the thousands cannot overflow. The price is 8 significant
//           bits, so every product carries a relative error up to 2^-8.
//           An f32 tensor stays the single source of truth (no bf16 copy
//           that could go stale); a weight that is bf16 to begin with (a
//           bf16 checkpoint's, see FromHostBF16) is held as bf16 on the
//           device and read by the matmul_bf16w_* kernels below: half the
//           bytes a decode step reads, the same results.
//
// Reduction order (batch invariance): every element of dst is summed in
//           one order that depends on in and out only, never on n or on the
//           kernel that runs, so a row's result is the same bits whatever
//           rows are computed with it. K is cut into 32-wide chunks, the
//           chunks into slices of cps chunks (the host picks cps from in and
//           out); a slice is summed in 16-wide MMA steps in K order,
//           starting from zero; the slices' sums are added in slice order,
//           ((p0 + p1) + p2) + ... Rows of an MMA tile do not mix: the
//           tensor core computes each output element from its own row of x
//           and column of w, so zero-filled rows past n change nothing.
//
// Kernels and launch shapes:
//   matmul_bf16_128 / matmul_bf16_64: the tiled kernel for n > 16, 256
//           threads. A block computes a BM×128 tile of dst (BM = 128 or 64;
//           the host takes 64 when 128-row tiles would leave SMs idle); grid
//           = (ceil(out/128), ceil(n/BM)). The 8 warps form a 2×4 grid, each
//           owning BM/2×32 outputs as (BM/32)×2 WMMA 16×16 accumulators. The
//           K loop steps one chunk at a time through a cp.async pipeline
//           (sm_80+): MM_STAGES f32 chunks of x and w are copied from global
//           into shared memory asynchronously, without passing through
//           registers; at each step every thread rounds the chunk it copied
//           to the bf16 tile the tensor cores read (rows padded by 8 to
//           spread banks) and at once reuses that f32 buffer for the copy of
//           the chunk MM_STAGES ahead, so MM_STAGES chunks are in flight
//           while the tensor cores work. At the end of each slice the
//           accumulators are written to dst (first slice) or added to it,
//           and restart from zero. Shared memory is dynamic (MM_SHARED
//           bytes: 84 KB for BM = 128, 63 KB for BM = 64, more than the
//           48 KB a static array may have), and __launch_bounds__(256, 2)
//           holds the kernel to 128 registers so that two blocks fit an SM
//           (an H100's 228 KB of shared memory holds two of either; an
//           A100's 164 KB two of BM = 64 and one of BM = 128).
//   matmul_bf16_skinny: n <= 16 (decode), 128 threads. A 128-row tile
//           would waste almost all of its work and launch too few blocks to
//           keep the memory system busy, and a decode matmul is bound by
//           reading w. Each warp owns one (16-column tile, slice) job,
//           a 16×16 WMMA product over the slice's chunks with rows >= n of
//           x zero-filled; jobs are numbered tile-major, 4 per block, grid
//           = ceil(tiles × slices / 4). With one slice the warp writes dst;
//           with several it writes its slice's partial tile to part
//           (slices × n × out floats) and matmul_sum_slices adds them.
//   matmul_bf16w_128 / matmul_bf16w_64 / matmul_bf16w_skinny: the same
//           kernels for a weight held as bf16 on the device (w is then
//           out×in bf16 bit patterns, see FromHostBF16): half the bytes of w
//           to read, and the same results bit for bit, since w's values are
//           already bf16 and the kernels round f32 weights to bf16 anyway.
// Any n, in, out are accepted: loads past an edge read zero and stores past
// an edge are dropped. Rows are read as float4 when in % 4 == 0 (every row
// then starts 16-byte aligned), else element by element.
//
// Checked:  TestMatMulT against the CPU backend on random matrices, odd
//           shapes included, with |dst - ref| <= 3e-2 * sqrt(sum_k (x_k w_k)^2)
//           per element (about 9 standard deviations of the bf16 rounding
//           error) and a normwise relative error <= 1e-2.
//           TestMatMulTBatchInvariant: every row bit-identical to the row
//           computed alone, for batch sizes 1 to 64 and every kernel.
#include <mma.h>
#include <cuda_bf16.h>

#include "common.cuh"

using namespace nvcuda;

#define MM_THREADS 256
#define MM_BN 128       // output columns per block (tiled kernel)
#define MM_BK 32        // K step
#define MM_LD (MM_BK + 8) // shared-memory row length in bf16: padding spreads banks
#define MM_STAGES 2     // f32 chunks in flight in the tiled kernel's pipeline

// MM_SHARED(BM, WB) is the tiled kernel's dynamic shared memory in bytes:
// the MM_STAGES chunks of x (BM rows of f32) and w (MM_BN rows of WB-byte
// elements: 4 for f32, 2 for bf16), then the bf16 tiles. The Go side's
// matmulShared must agree (TestMatMulT runs every kernel on the emulator,
// which checks the size).
#define MM_CHUNK(BM, WB) ((BM) * MM_BK * 4 + MM_BN * MM_BK * (WB))
#define MM_SHARED(BM, WB) (MM_STAGES * MM_CHUNK(BM, WB) + ((BM) + MM_BN) * MM_LD * 2)

// bf16w is a weight element held as bf16: its bit pattern.
typedef unsigned short bf16w;

// copy4_async of a bf16 weight: one 8-byte copy with vec; else the row
// starts are only 2-byte aligned, below cp.async's 4-byte minimum, so the
// four elements are loaded and stored by the thread itself (it reads them
// back only after its wait, like the copied ones).
__device__ __forceinline__ void copy4_async(bf16w* s, const bf16w* __restrict__ a, long long rows,
                                            long long cols, long long r, long long c, bool vec) {
    if (vec) {
        const bool in = r < rows && c < cols;
        cp_async8(s, in ? a + r * cols + c : a, in ? 8 : 0);
        return;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) s[e] = r < rows && c + e < cols ? a[r * cols + c + e] : (bf16w)0;
}

// copy4_async starts the copy of x[r][c..c+3] of a rows×cols row-major
// matrix into the 16-byte-aligned s, with zeros for elements outside it.
// With vec (cols % 4 == 0, so every row starts 16-byte aligned) it is one
// 16-byte copy, else four 4-byte ones.
__device__ __forceinline__ void copy4_async(float* s, const float* __restrict__ a, long long rows,
                                            long long cols, long long r, long long c, bool vec) {
    if (vec) {
        const bool in = r < rows && c < cols; // c + 4 <= cols follows
        cp_async16(s, in ? a + r * cols + c : a, in ? 16 : 0);
        return;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const bool in = r < rows && c + e < cols;
        cp_async4(s + e, in ? a + r * cols + c + e : a, in ? 4 : 0);
    }
}

// load4 returns x[r][c..c+3] of a rows×cols row-major matrix, with zeros for
// elements outside it.
__device__ __forceinline__ float4 load4(const float* __restrict__ a, long long rows, long long cols,
                                        long long r, long long c, bool vec) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r >= rows || c >= cols) return v;
    const float* p = a + r * cols + c;
    if (vec && c + 4 <= cols) return *reinterpret_cast<const float4*>(p);
    v.x = p[0];
    if (c + 1 < cols) v.y = p[1];
    if (c + 2 < cols) v.z = p[2];
    if (c + 3 < cols) v.w = p[3];
    return v;
}

// stage4 reads 4 staged elements (16-byte aligned f32, 8-byte aligned bf16)
// as f32.
__device__ __forceinline__ float4 stage4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 stage4(const bf16w* p) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    return make_float4(bf16_to_float(u.x & 0xffffu), bf16_to_float(u.x >> 16), bf16_to_float(u.y & 0xffffu),
                       bf16_to_float(u.y >> 16));
}

// store4 rounds v to bf16 and writes the 4 values at s as one 8-byte store
// (s is 8-byte aligned: columns come in fours, rows are 80 bytes apart).
__device__ __forceinline__ void store4(__nv_bfloat16* s, float4 v) {
    union {
        __nv_bfloat162 h[2];
        uint2 u;
    } pack;
    pack.h[0] = __floats2bfloat162_rn(v.x, v.y);
    pack.h[1] = __floats2bfloat162_rn(v.z, v.w);
    *reinterpret_cast<uint2*>(s) = pack.u;
}

template <int BM, class TW>
__device__ __forceinline__ void matmul_tiled(float* __restrict__ dst, const float* __restrict__ x,
                                             const TW* __restrict__ w, long long n, long long in,
                                             long long out, long long cps) {
    constexpr int WB = sizeof(TW);
    constexpr int WM = BM / 2;       // rows per warp
    constexpr int WN = MM_BN / 4;    // columns per warp
    constexpr int FM = WM / 16, FN = WN / 16;
    constexpr int A_LOADS = BM * MM_BK / 4 / MM_THREADS;
    constexpr int B_LOADS = MM_BN * MM_BK / 4 / MM_THREADS;
    // Dynamic shared memory: f32 chunks [stage][A rows | B rows][MM_BK],
    // then the bf16 tiles As and Bs. The per-warp 16×16 f32 tiles that
    // emit stages results through reuse the bf16 tiles, which no warp reads
    // while emit runs.
    DYNAMIC_SHARED(smem, MM_SHARED(BM, WB));
    __nv_bfloat16* const As = reinterpret_cast<__nv_bfloat16*>(smem + MM_STAGES * MM_CHUNK(BM, WB));
    __nv_bfloat16* const Bs = As + BM * MM_LD;
    static_assert((BM + MM_BN) * MM_LD * 2 >= MM_THREADS / 32 * 16 * 16 * 4, "emit's tiles fit the bf16 tiles");

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int wm = warp >> 2, wn = warp & 3;
    const long long m0 = (long long)blockIdx.y * BM, n0 = (long long)blockIdx.x * MM_BN;
    const bool vec = (in & 3) == 0;
    // Each thread moves float4s at rows lr + 32*i, columns lc..lc+3 of a tile.
    const int lr = tid >> 3, lc = (tid & 7) * 4;
    const long long ktiles = (in + MM_BK - 1) / MM_BK;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    // issue starts the copies of chunk kt into f32 buffer kt % MM_STAGES,
    // and closes them as one group (an empty group past the last chunk, so
    // that every step waits for the same count); convert rounds chunk kt to
    // the bf16 tiles. A thread converts exactly the elements it copied, so
    // its own wait suffices before convert.
    auto issue = [&](long long kt) {
        if (kt < ktiles) {
            float* fa = reinterpret_cast<float*>(smem + (kt % MM_STAGES) * MM_CHUNK(BM, WB));
            TW* fb = reinterpret_cast<TW*>(fa + BM * MM_BK);
            const long long k0 = kt * MM_BK;
#pragma unroll
            for (int i = 0; i < A_LOADS; ++i)
                copy4_async(&fa[(lr + 32 * i) * MM_BK + lc], x, n, in, m0 + lr + 32 * i, k0 + lc, vec);
#pragma unroll
            for (int i = 0; i < B_LOADS; ++i)
                copy4_async(&fb[(lr + 32 * i) * MM_BK + lc], w, out, in, n0 + lr + 32 * i, k0 + lc, vec);
        }
        cp_async_commit();
    };
    auto convert = [&](long long kt) {
        const float* fa = reinterpret_cast<const float*>(smem + (kt % MM_STAGES) * MM_CHUNK(BM, WB));
        const TW* fb = reinterpret_cast<const TW*>(fa + BM * MM_BK);
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) store4(&As[(lr + 32 * i) * MM_LD + lc], stage4(&fa[(lr + 32 * i) * MM_BK + lc]));
#pragma unroll
        for (int i = 0; i < B_LOADS; ++i) store4(&Bs[(lr + 32 * i) * MM_LD + lc], stage4(&fb[(lr + 32 * i) * MM_BK + lc]));
    };

    // emit writes the accumulators to dst (first slice) or adds them to what
    // dst holds (later slices), through a per-warp 16×16 staging tile so that
    // the edges of dst can be clipped element by element. Each element is
    // read and written by the same thread every time.
    float* st = reinterpret_cast<float*>(As) + warp * 256;
    auto emit = [&](bool first) {
#pragma unroll
        for (int i = 0; i < FM; ++i) {
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_row_major);
                __syncwarp();
                for (int e = lane; e < 256; e += 32) {
                    const long long r = m0 + wm * WM + i * 16 + e / 16;
                    const long long c = n0 + wn * WN + j * 16 + e % 16;
                    if (r < n && c < out) dst[r * out + c] = first ? st[e] : dst[r * out + c] + st[e];
                }
                __syncwarp();
                wmma::fill_fragment(acc[i][j], 0.0f);
            }
        }
    };

#pragma unroll
    for (int s = 0; s < MM_STAGES; ++s) issue(s);
    for (long long kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<MM_STAGES - 1>(); // this thread's copies of chunk kt have landed
        convert(kt);
        __syncthreads();    // the bf16 tiles are whole
        issue(kt + MM_STAGES); // into the buffer just converted: in flight while the tensor cores run
        // Not unrolled: fewer live fragments under the 128-register cap
        // (ptxas, CUDA 11.8: no spills then).
#pragma unroll 1
        for (int kk = 0; kk < MM_BK; kk += 16) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[FN];
            // w's rows are dst's columns: read as a col-major K×N matrix, Bs
            // is exactly the B operand, with no transpose anywhere.
#pragma unroll
            for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(b[j], &Bs[(wn * WN + j * 16) * MM_LD + kk], MM_LD);
            // One A fragment at a time: fewer live registers, so that the
            // kernel fits the 128 that two blocks per SM leave it.
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
                wmma::load_matrix_sync(a, &As[(wm * WM + i * 16) * MM_LD + kk], MM_LD);
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a, b[j], acc[i][j]);
            }
        }
        __syncthreads(); // every warp is done with the bf16 tiles
        if ((kt + 1) % cps == 0 || kt + 1 == ktiles) { // a slice ends
            emit(kt < cps);
            __syncthreads(); // emit's tiles live in the bf16 tiles convert writes next
        }
    }
    cp_async_wait<0>(); // nothing may still be writing shared memory when the block exits
}

extern "C" __global__ void __launch_bounds__(MM_THREADS, 2)
matmul_bf16_128(float* dst, const float* x, const float* w, long long n, long long in, long long out,
                long long cps) {
    matmul_tiled<128>(dst, x, w, n, in, out, cps);
}

extern "C" __global__ void __launch_bounds__(MM_THREADS, 2)
matmul_bf16w_128(float* dst, const float* x, const bf16w* w, long long n, long long in, long long out,
                 long long cps) {
    matmul_tiled<128>(dst, x, w, n, in, out, cps);
}

extern "C" __global__ void __launch_bounds__(MM_THREADS, 2)
matmul_bf16_64(float* dst, const float* x, const float* w, long long n, long long in, long long out,
                long long cps) {
    matmul_tiled<64>(dst, x, w, n, in, out, cps);
}

extern "C" __global__ void __launch_bounds__(MM_THREADS, 2)
matmul_bf16w_64(float* dst, const float* x, const bf16w* w, long long n, long long in, long long out,
                long long cps) {
    matmul_tiled<64>(dst, x, w, n, in, out, cps);
}

#define SK_WARPS 4
#define SK_THREADS (SK_WARPS * 32)

// wraw carries four elements of w from global memory to the skinny
// kernel's bf16 tile: an f32 weight as a float4, rounded to bf16 on the
// way in (store4); a bf16 weight as its 8 bytes of bit patterns, copied
// as they are. Rounding a bf16 value to bf16 is the identity, so the copy
// gives the tile the same bits as widening and rounding would, with half
// the registers held across the loop and no conversions.
template <class TW>
struct wraw;
template <>
struct wraw<float> {
    typedef float4 T;
    static __device__ __forceinline__ float4 load(const float* __restrict__ a, long long rows, long long cols,
                                                  long long r, long long c, bool vec) {
        return load4(a, rows, cols, r, c, vec);
    }
    static __device__ __forceinline__ void store(__nv_bfloat16* s, float4 v) { store4(s, v); }
};
template <>
struct wraw<bf16w> {
    typedef uint2 T;
    static __device__ __forceinline__ uint2 load(const bf16w* __restrict__ a, long long rows, long long cols,
                                                 long long r, long long c, bool vec) {
        uint2 u;
        u.x = 0;
        u.y = 0;
        if (r >= rows || c >= cols) return u;
        const bf16w* p = a + r * cols + c;
        if (vec && c + 4 <= cols) return *reinterpret_cast<const uint2*>(p);
        u.x = p[0];
        if (c + 1 < cols) u.x |= (unsigned)p[1] << 16;
        if (c + 2 < cols) u.y = p[2];
        if (c + 3 < cols) u.y |= (unsigned)p[3] << 16;
        return u;
    }
    static __device__ __forceinline__ void store(__nv_bfloat16* s, uint2 v) { *reinterpret_cast<uint2*>(s) = v; }
};

template <class TW>
__device__ __forceinline__ void matmul_skinny(float* __restrict__ dst, const float* __restrict__ x,
                                              const TW* __restrict__ w, long long n, long long in, long long out,
                                              long long cps, float* __restrict__ part) {
    __shared__ __align__(32) __nv_bfloat16 As[SK_WARPS][16 * MM_LD];
    __shared__ __align__(32) __nv_bfloat16 Bs[SK_WARPS][16 * MM_LD];
    __shared__ __align__(32) float st[SK_WARPS][16 * 16];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long chunks = (in + MM_BK - 1) / MM_BK;
    const long long slices = (chunks + cps - 1) / cps;
    const long long tiles = (out + 15) / 16;
    // Warp → (tile, slice), slices of one tile side by side; a warp past the
    // end leaves at once (the kernel has no block-wide barrier).
    const long long job = (long long)blockIdx.x * SK_WARPS + warp;
    if (job >= tiles * slices) return;
    const long long tile = job / slices, slice = job % slices;
    const long long j0 = tile * 16;
    const TW* wb = w + j0 * in; // this warp's 16 rows of w
    const long long wrows = out - j0;
    const bool vec = (in & 3) == 0;
    // Each lane moves float4s at rows lr + 4*i, columns lc..lc+3 of a chunk:
    // 8 lanes read one row's 128 contiguous bytes.
    const int lr = lane >> 3, lc = (lane & 7) * 4;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);

    const long long c0 = slice * cps, c1 = min(c0 + cps, chunks);
    float4 ra[4];
    typename wraw<TW>::T rb[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        ra[i] = load4(x, n, in, lr + 4 * i, c0 * MM_BK + lc, vec);
        rb[i] = wraw<TW>::load(wb, wrows, in, lr + 4 * i, c0 * MM_BK + lc, vec);
    }
    for (long long c = c0; c < c1; ++c) {
        __syncwarp(); // the previous chunk's fragments are loaded
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            store4(&As[warp][(lr + 4 * i) * MM_LD + lc], ra[i]);
            wraw<TW>::store(&Bs[warp][(lr + 4 * i) * MM_LD + lc], rb[i]);
        }
        __syncwarp();
        if (c + 1 < c1) { // in flight while the tensor cores run
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                ra[i] = load4(x, n, in, lr + 4 * i, (c + 1) * MM_BK + lc, vec);
                rb[i] = wraw<TW>::load(wb, wrows, in, lr + 4 * i, (c + 1) * MM_BK + lc, vec);
            }
        }
#pragma unroll
        for (int kk = 0; kk < MM_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
            wmma::load_matrix_sync(a, &As[warp][kk], MM_LD);
            wmma::load_matrix_sync(b, &Bs[warp][kk], MM_LD);
            wmma::mma_sync(acc, a, b, acc);
        }
    }

    // One slice: the result itself. Several: this slice's partial sum, for
    // matmul_sum_slices to add in slice order.
    wmma::store_matrix_sync(st[warp], acc, 16, wmma::mem_row_major);
    __syncwarp();
    float* to = slices == 1 ? dst : part + slice * n * out;
    for (int e = lane; e < 256; e += 32) {
        const long long r = e / 16, col = j0 + e % 16;
        if (r < n && col < out) to[r * out + col] = st[warp][e];
    }
}

extern "C" __global__ void __launch_bounds__(SK_THREADS)
matmul_bf16_skinny(float* __restrict__ dst, const float* __restrict__ x, const float* __restrict__ w,
                   long long n, long long in, long long out, long long cps, float* __restrict__ part) {
    matmul_skinny(dst, x, w, n, in, out, cps, part);
}

extern "C" __global__ void __launch_bounds__(SK_THREADS)
matmul_bf16w_skinny(float* __restrict__ dst, const float* __restrict__ x, const bf16w* __restrict__ w,
                    long long n, long long in, long long out, long long cps, float* __restrict__ part) {
    matmul_skinny(dst, x, w, n, in, out, cps, part);
}

// matmul_sum_slices: dst[e] = ((part[0][e] + part[1][e]) + part[2][e]) + ...
// for e in [0, count), part holding slices arrays of count floats: the last
// step of a split skinny product, in the same slice order as the tiled
// kernels' folding. Grid-stride, 256 threads; the grid size changes no result.
extern "C" __global__ void __launch_bounds__(256)
matmul_sum_slices(float* __restrict__ dst, const float* __restrict__ part, long long count, long long slices) {
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < count;
         e += (long long)gridDim.x * blockDim.x) {
        float s = part[e];
        for (long long k = 1; k < slices; ++k) s += part[k * count + e];
        dst[e] = s;
    }
}
