// attention.cu: causal attention over a paged KV cache, for decode steps and
// chunked prefill mixed freely in one launch, with grouped-query attention;
// and the same kernel for AttendLocal, which reads keys and values from the
// step's own k/v rows instead of the cache.
//
// Computes: for every query row of every sequence (query i of sequence s
//           sits at position pos0 + i, pos0 = CtxLen - QLen) and every query
//           head h (reading key/value head h / group, group = NumHeads /
//           NumKVHeads):
//             out = softmax(cap(scale · q·Kᵀ)) · V over key positions
//             lo..pos0+i, where lo = 0, or with a sliding window W > 0
//             lo = max(0, pos0+i-W+1) (the query itself and the W-1 keys
//             before it, kernels.Visible), and cap(s) = C·tanh(s/C) when a
//             soft cap C > 0 is given (Gemma's attn_logit_softcapping),
//             else s.
//           Attend: key position t lives in cache row
//             pages[t / block_size] * block_size + t % block_size
//           of the sequence's page table, so a cached prefix is visible like
//           any other context and a prefill chunk is causal inside itself.
//           AttendLocal (local != 0): pos0 = 0 and key t is row qstart + t
//           of k and v: each sequence sees only its own chunk.
//
// Work split: the host lists work items; an item is up to ATT_ROWS (query,
//           head) "rows" of one sequence that share a key/value head:
//           row ρ is query ρ / group and head ρ % group of that group, so a
//           decode step of a GQA model reads each key once for all the query
//           heads that use it, and a prefill chunk puts several queries in
//           one item. Flash-decoding: rows that see more than ATT_CHUNK keys
//           are split into one item per ATT_CHUNK-key chunk, so a single
//           long decode context runs on many blocks rather than NumKVHeads;
//           such an item writes its rows' maximum, normaliser and
//           unnormalised output to a partial slot, and attention_merge
//           combines a row's chunks in chunk order and normalises. The split
//           depends on the rows' own context only, so a sequence's result
//           does not depend on its batch. With a window the chunks stay
//           on the same absolute ATT_CHUNK grid, but the host plans only
//           those that reach the window of the item's first row, and the
//           first starts at the 32-key tile holding that row's first
//           visible key: keys before that row's window are never read,
//           neither their K nor their V, not merely masked. The item's keys are cut into
//           tiles of 32 positions, dealt round-robin to the block's 4 warps. In a tile, lane j owns
//           key j: it reads that key's head slice once (float4s through L1)
//           and scores it against every row's query, which sits in shared
//           memory; a key outside a row's window scores -inf for that
//           row. Each warp then updates, per row, a running maximum m,
//           a per-lane partial normaliser l and an output accumulator (lane
//           owns dims lane, lane+32, ...): the online softmax of flash
//           attention, so keys are read exactly once and no score matrix is
//           ever stored. The K loop has no per-row guards: query rows past
//           the item's are zero in shared memory and see no key. For the
//           P·V product the lanes take turns broadcasting their key's slot
//           and weight, four keys at a time with all their value loads
//           issued before the first is used. At the end the 4 warps'
//           (m, l, acc) are merged through shared memory in warp order.
//
// Launch:   grid = (work items, NumKVHeads), 128 threads (4 warps);
//           entry paged_attention_dN is the instantiation for head_dim <= N
//           (N = 32, 64, 128, 256: N/32 accumulator values per lane and row),
//           so head_dim is at most 256. Static shared memory:
//           ATT_ROWS*N floats of queries plus 4*ATT_ROWS*N floats of partial
//           results, 40 KB at N = 256.
//           seqs holds 4 ints per sequence: qstart, qlen, pos0, offset of its
//           page table in pages. items holds 4 ints per item: sequence, first
//           row, first key, partial slot (-1: write out). part holds
//           ATT_ROWS × (head_dim + 2) floats per (slot, KV head).
//           window (0: none) and softcap (0: none) are AttnShape's.
//           attention_merge: grid = (split row groups, NumKVHeads), 128
//           threads.
//
// Checked:  TestAttendMatchesCPU against the CPU backend: block sizes 1, 2
//           and 16, ragged context lengths, decode and prefill rows mixed in
//           one call, cached prefixes, a sequence with no rows, GQA groups 1,
//           2, 4, 8 and 16 (the last splitting one query's heads over two
//           items), head dims 7 (the scalar path), 8, 32, 64, 128 and 256.
//           TestAttendDecodeAfterWrite chains WriteKV and Attend;
//           TestAttendLocal compares with the CPU's AttendLocal;
//           TestAttendFlashDecoding covers contexts 1 to 8192 in batches of
//           1 to 64, split and not. Tolerance 1e-5 (relative above 1,
//           absolute below). window_test.go: TestAttendWindow (windows
//           below, at and above the block size and ATT_CHUNK, contexts up
//           to 2048, batches 1 to 16, with and without a soft cap, Attend
//           and AttendLocal), TestAttendWindowSkipsChunks (the plan reads
//           no chunk before the window) and TestAttendWindowOffByOne (a
//           window one wider differs from the CPU's).
//
// A cache held in 16 bits: paged_attention_bf16_dN and
//           paged_attention_f16_dN are the same kernel over caches of
//           bfloat16 or float16 bit patterns (kernels.KVDType), which
//           widen each key and value as they load it (four keys' features
//           from one 8-byte load where float32 takes a float4), then do
//           the float32 kernel's arithmetic. Checked: TestAttend16 (against
//           the CPU backend over the same 16-bit cache).
#include "common.cuh"

#define ATT_WARPS 4
#define ATT_THREADS (ATT_WARPS * 32)
#define ATT_ROWS 8 // (query, head) rows per work item
#define ATT_TILE 32 // keys per tile: one per lane
#define ATT_CHUNK 256 // keys per work item at most: the flash-decoding split

// Partial results of a split item, per (slot, KV head): ATT_ROWS×head_dim
// unnormalised outputs, then ATT_ROWS maxima, then ATT_ROWS normalisers.
__device__ __forceinline__ float* att_part(float* part, long long slot, int kvh, long long num_kv_heads, int hd) {
    return part + (slot * num_kv_heads + kvh) * (long long)ATT_ROWS * (hd + 2);
}

// The cache's element type, as the kernel loads it: kv_f32 reads floats;
// kv_load16 reads 16-bit patterns and widens them (kv_bf16, kv_f16).
struct kv_f32 {
    typedef float T;
    static __device__ __forceinline__ float at(const float* p, int i) { return p[i]; }
    static __device__ __forceinline__ float4 at4(const float* p, int i) {
        return *reinterpret_cast<const float4*>(p + i);
    }
};

template <class KV>
struct kv_load16 {
    typedef unsigned short T;
    static __device__ __forceinline__ float at(const unsigned short* p, int i) { return KV::widen(p[i]); }
    // Four features from one 8-byte load (i a multiple of 4, so aligned);
    // the first is the low half of the first word (little-endian).
    static __device__ __forceinline__ float4 at4(const unsigned short* p, int i) {
        const uint2 u = *reinterpret_cast<const uint2*>(p + i);
        return make_float4(KV::widen((unsigned short)(u.x & 0xffffu)), KV::widen((unsigned short)(u.x >> 16)),
                           KV::widen((unsigned short)(u.y & 0xffffu)), KV::widen((unsigned short)(u.y >> 16)));
    }
};

template <int DPL, class L> // head dims per lane: head_dim <= 32*DPL; L loads the cache
__device__ __forceinline__ void attention(float* __restrict__ out, const float* __restrict__ q,
                                          const typename L::T* __restrict__ kc,
                                          const typename L::T* __restrict__ vc,
                                          const int* __restrict__ seqs, const int* __restrict__ items,
                                          const int* __restrict__ pages, long long num_heads,
                                          long long num_kv_heads, long long head_dim, long long block_size,
                                          double scale_d, long long local, float* __restrict__ part,
                                          long long window, double softcap_d) {
    constexpr int MAXD = 32 * DPL;
    __shared__ __align__(16) float qs[ATT_ROWS][MAXD];
    __shared__ float part_acc[ATT_WARPS][ATT_ROWS][MAXD];
    __shared__ float part_m[ATT_WARPS][ATT_ROWS], part_l[ATT_WARPS][ATT_ROWS];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int* item = items + 4 * blockIdx.x;
    const int s = item[0], row0 = item[1], key0 = item[2], pslot = item[3];
    const int kvh = blockIdx.y;
    const int qstart = seqs[4 * s], qlen = seqs[4 * s + 1], pos0 = seqs[4 * s + 2], poff = seqs[4 * s + 3];
    const int hd = (int)head_dim, group = (int)(num_heads / num_kv_heads), bs = (int)block_size;
    const int nrows = min(ATT_ROWS, qlen * group - row0);
    const long long qcols = num_heads * head_dim, kvcols = num_kv_heads * head_dim;
    const float scale = (float)scale_d, softcap = (float)softcap_d;

    // Stage the item's query vectors; rows past nrows are zero, so the K
    // loop below needs no per-row guard.
    for (int e = tid; e < ATT_ROWS * MAXD; e += ATT_THREADS) {
        const int r = e / MAXD, d = e % MAXD;
        float val = 0.0f;
        if (r < nrows && d < hd) {
            const int rr = row0 + r;
            const long long qrow = qstart + rr / group;
            const int head = kvh * group + rr % group;
            val = q[qrow * qcols + (long long)head * hd + d];
        }
        qs[r][d] = val;
    }
    __syncthreads();

    int limit[ATT_ROWS], first[ATT_ROWS]; // the keys each row may see: first..limit
#pragma unroll
    for (int r = 0; r < ATT_ROWS; ++r) {
        limit[r] = r < nrows ? pos0 + (row0 + r) / group : -1;
        first[r] = window > 0 ? max(0, limit[r] - (int)window + 1) : 0;
    }
    // This item's keys: [key0, kend), within one ATT_CHUNK chunk of the
    // keys its rows see; key0 is a multiple of ATT_TILE.
    const int kend = min((key0 / ATT_CHUNK + 1) * ATT_CHUNK, pos0 + (row0 + nrows - 1) / group + 1);

    float m[ATT_ROWS], l[ATT_ROWS], acc[ATT_ROWS][DPL];
#pragma unroll
    for (int r = 0; r < ATT_ROWS; ++r) {
        m[r] = -CUDART_INF_F;
        l[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; ++i) acc[r][i] = 0.0f;
    }

    const bool vec = (hd & 3) == 0; // then every key slice is 16-byte aligned
    const int t0 = key0 / ATT_TILE, tend = (kend + ATT_TILE - 1) / ATT_TILE;
    for (int tile = t0 + warp; tile < tend; tile += ATT_WARPS) {
        const int key = tile * ATT_TILE + lane;
        // Row 0 has the item's earliest window: a key before its first is
        // seen by no row and is not read at all.
        const bool valid = key >= first[0] && key < kend;
        long long slot = 0;
        if (valid) {
            slot = local ? (long long)qstart + key
                         : (long long)pages[poff + key / bs] * bs + key % bs;
        }

        float sc[ATT_ROWS];
#pragma unroll
        for (int r = 0; r < ATT_ROWS; ++r) sc[r] = 0.0f;
        if (valid) {
            const typename L::T* kp = kc + slot * kvcols + (long long)kvh * hd;
            if (vec) {
#pragma unroll 4
                for (int d = 0; d < hd; d += 4) {
                    const float4 k4 = L::at4(kp, d);
#pragma unroll
                    for (int r = 0; r < ATT_ROWS; ++r) {
                        const float4 q4 = *reinterpret_cast<const float4*>(&qs[r][d]);
                        sc[r] += k4.x * q4.x + k4.y * q4.y + k4.z * q4.z + k4.w * q4.w;
                    }
                }
            } else {
                for (int d = 0; d < hd; ++d) {
                    const float kd = L::at(kp, d);
#pragma unroll
                    for (int r = 0; r < ATT_ROWS; ++r) sc[r] += kd * qs[r][d];
                }
            }
        }

        // Online softmax update, row by row. Everything that decides control
        // flow here (tmax) is the same in all lanes; a row past nrows sees no
        // key (its limit is -1) and keeps p = 0.
        float p[ATT_ROWS];
#pragma unroll
        for (int r = 0; r < ATT_ROWS; ++r) {
            p[r] = 0.0f;
            float sv = -CUDART_INF_F;
            if (valid && key >= first[r] && key <= limit[r]) {
                sv = sc[r] * scale;
                if (softcap > 0.0f) sv = tanhf(sv / softcap) * softcap;
            }
            const float tmax = warp_max(sv);
            if (tmax != -CUDART_INF_F) {
                const float mnew = fmaxf(m[r], tmax);
                const float alpha = expf(m[r] - mnew); // 0 while m is still -inf
                p[r] = sv == -CUDART_INF_F ? 0.0f : expf(sv - mnew);
                l[r] = l[r] * alpha + p[r];
#pragma unroll
                for (int i = 0; i < DPL; ++i) acc[r][i] *= alpha;
                m[r] = mnew;
            }
        }

        // P·V: lane j's key is broadcast in turn; each lane accumulates its
        // own head dims, so every value row is read once, coalesced. Four
        // keys at a time: their value loads are all issued before the first
        // is used.
        const int kn = min(ATT_TILE, kend - tile * ATT_TILE);
        int j = max(0, first[0] - tile * ATT_TILE);
        for (; j + 4 <= kn; j += 4) {
            float vv[4][DPL];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const long long sj = __shfl_sync(0xffffffffu, slot, j + u);
                const typename L::T* vp = vc + sj * kvcols + (long long)kvh * hd;
#pragma unroll
                for (int i = 0; i < DPL; ++i) {
                    const int d = lane + 32 * i;
                    vv[u][i] = d < hd ? L::at(vp, d) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
#pragma unroll
                for (int r = 0; r < ATT_ROWS; ++r) {
                    const float pj = __shfl_sync(0xffffffffu, p[r], j + u);
#pragma unroll
                    for (int i = 0; i < DPL; ++i) acc[r][i] += pj * vv[u][i];
                }
            }
        }
        for (; j < kn; ++j) {
            const long long sj = __shfl_sync(0xffffffffu, slot, j);
            const typename L::T* vp = vc + sj * kvcols + (long long)kvh * hd;
            float vv[DPL];
#pragma unroll
            for (int i = 0; i < DPL; ++i) {
                const int d = lane + 32 * i;
                vv[i] = d < hd ? L::at(vp, d) : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < ATT_ROWS; ++r) {
                const float pj = __shfl_sync(0xffffffffu, p[r], j);
#pragma unroll
                for (int i = 0; i < DPL; ++i) acc[r][i] += pj * vv[i];
            }
        }
    }

    // Merge the warps' partial results.
#pragma unroll
    for (int r = 0; r < ATT_ROWS; ++r) {
        if (r < nrows) {
            const float lsum = warp_sum(l[r]);
            if (lane == 0) {
                part_m[warp][r] = m[r];
                part_l[warp][r] = lsum;
            }
#pragma unroll
            for (int i = 0; i < DPL; ++i) {
                const int d = lane + 32 * i;
                if (d < hd) part_acc[warp][r][d] = acc[r][i];
            }
        }
    }
    __syncthreads();
    float* pp = pslot >= 0 ? att_part(part, pslot, kvh, num_kv_heads, hd) : nullptr;
    for (int e = tid; e < nrows * hd; e += ATT_THREADS) {
        const int r = e / hd, d = e % hd;
        float mx = -CUDART_INF_F;
#pragma unroll
        for (int w = 0; w < ATT_WARPS; ++w) mx = fmaxf(mx, part_m[w][r]);
        float sum = 0.0f, o = 0.0f;
#pragma unroll
        for (int w = 0; w < ATT_WARPS; ++w) {
            if (part_m[w][r] != -CUDART_INF_F) { // a warp that saw no key adds nothing
                const float f = expf(part_m[w][r] - mx);
                sum += part_l[w][r] * f;
                o += part_acc[w][r][d] * f;
            }
        }
        if (pp != nullptr) { // one chunk of several: attention_merge finishes
            pp[r * hd + d] = o;
            if (d == 0) {
                pp[ATT_ROWS * hd + r] = mx;
                pp[ATT_ROWS * hd + ATT_ROWS + r] = sum;
            }
            continue;
        }
        const int rr = row0 + r;
        const long long orow = qstart + rr / group;
        const int head = kvh * group + rr % group;
        out[orow * qcols + (long long)head * hd + d] = sum > 0.0f ? o / sum : 0.0f;
    }
}

// MINB is the launch bound's blocks per SM. Unbounded, ptxas gives the
// d64 kernel 128 registers and the driver fits three blocks on an SM, 12
// warps of 64: too few loads in flight to cover HBM's latency. Bounded to
// six (85 registers, 80 used) it spills 132 bytes (180 with CUDA 13's
// ptxas), which stay in L1, and wins where bandwidth matters: on an
// H200, 256 sequences of 2048 keys went
// from 1803 to 2144 GB/s, one sequence of 4096 keys from 580 to 544 GB/s
// (BenchmarkAttendDecode; bounds of 3, 4, 6 and 8 blocks compared in
// docs/gpu.md). Head dims 128 and 256 stay unbounded: their shared memory
// already caps them near there, and the bound would spill 0.4 and 2.4 KB,
// unmeasured on hardware.
// The 16-bit caches' entries take the same bounds: untuned on hardware.
#define ATT_ENTRY_KV(NAME, L, N, MINB)                                                               \
    extern "C" __global__ void __launch_bounds__(ATT_THREADS, MINB) NAME##N(                         \
        float* out, const float* q, const L::T* kc, const L::T* vc, const int* seqs,                 \
        const int* items, const int* pages, long long num_heads, long long num_kv_heads,             \
        long long head_dim, long long block_size, double scale, long long local, float* part,        \
        long long window, double softcap) {                                                          \
        attention<N / 32, L>(out, q, kc, vc, seqs, items, pages, num_heads, num_kv_heads, head_dim,  \
                             block_size, scale, local, part, window, softcap);                       \
    }
#define ATT_ENTRY(N, MINB)                                          \
    ATT_ENTRY_KV(paged_attention_d, kv_f32, N, MINB)                \
    ATT_ENTRY_KV(paged_attention_bf16_d, kv_load16<kv_bf16>, N, MINB) \
    ATT_ENTRY_KV(paged_attention_f16_d, kv_load16<kv_f16>, N, MINB)

ATT_ENTRY(32, 6)
ATT_ENTRY(64, 6)
ATT_ENTRY(128, 1)
ATT_ENTRY(256, 1)

// attention_merge finishes the split items: for each (query, head) row of a
// group of chunks (one item's rows, split over nchunks chunks whose partial
// results sit in consecutive slots), the chunks' (max, normaliser, output)
// are combined in chunk order, as the warps of one item are, and the row
// is normalised and stored. groups holds 4 ints per group: sequence, first
// row, first slot, number of chunks. grid = (groups, NumKVHeads), 128
// threads, one (row, dim) element per thread and step.
extern "C" __global__ void __launch_bounds__(ATT_THREADS)
attention_merge(float* __restrict__ out, float* __restrict__ part, const int* __restrict__ seqs,
                const int* __restrict__ groups, long long num_heads, long long num_kv_heads,
                long long head_dim) {
    const int* g = groups + 4 * blockIdx.x;
    const int s = g[0], row0 = g[1], slot0 = g[2], nchunks = g[3];
    const int kvh = blockIdx.y;
    const int qstart = seqs[4 * s], qlen = seqs[4 * s + 1];
    const int hd = (int)head_dim, group = (int)(num_heads / num_kv_heads);
    const int nrows = min(ATT_ROWS, qlen * group - row0);
    const long long qcols = num_heads * head_dim;
    for (int e = threadIdx.x; e < nrows * hd; e += ATT_THREADS) {
        const int r = e / hd, d = e % hd;
        float mx = -CUDART_INF_F;
        for (int c = 0; c < nchunks; ++c) {
            const float* pp = att_part(part, slot0 + c, kvh, num_kv_heads, hd);
            mx = fmaxf(mx, pp[ATT_ROWS * hd + r]);
        }
        float sum = 0.0f, o = 0.0f;
        for (int c = 0; c < nchunks; ++c) {
            const float* pp = att_part(part, slot0 + c, kvh, num_kv_heads, hd);
            const float mc = pp[ATT_ROWS * hd + r];
            if (mc != -CUDART_INF_F) { // a chunk this row sees no key of adds nothing
                const float f = expf(mc - mx);
                sum += pp[ATT_ROWS * hd + ATT_ROWS + r] * f;
                o += pp[r * hd + d] * f;
            }
        }
        const int rr = row0 + r;
        const long long orow = qstart + rr / group;
        const int head = kvh * group + rr % group;
        out[orow * qcols + (long long)head * hd + d] = sum > 0.0f ? o / sum : 0.0f;
    }
}
