// mma.h: the subset of nvcuda::wmma the kernels use, for the emulator.
// A fragment holds its whole 16×16 tile in every lane; loads and products
// are computed by every lane alike, and a store is done by lane 0 only (the
// kernels synchronise the warp before reading what was stored).
#pragma once
#include "cuda_emu.h"
#include "cuda_bf16.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "only 16x16x16 tiles are emulated");
    float x[16 * 16]; // element (r, c) at x[r*16 + c], as a value
};

inline float emu_value(float v) { return v; }
inline float emu_value(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class Use, class T, class Layout>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, float v) {
    for (float& e : f.x) e = v;
}

// A is M×K: row-major element (r, k) at p[r*ldm + k].
template <class T>
inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, T, row_major>& f, const T* p, unsigned ldm) {
    for (int r = 0; r < 16; ++r)
        for (int k = 0; k < 16; ++k) f.x[r * 16 + k] = emu_value(p[r * ldm + k]);
}

// B is K×N: column-major element (k, n) at p[n*ldm + k].
template <class T>
inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, T, col_major>& f, const T* p, unsigned ldm) {
    for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 16; ++n) f.x[k * 16 + n] = emu_value(p[n * ldm + k]);
}

template <class TA, class TB, class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, TA, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, TB, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
    // One MMA is one operation per output element, as on the tensor core:
    // the 16 products (exact: bf16 × bf16 fits in f32) are summed, then
    // added to the accumulator with a single rounding to f32. The result
    // depends on where each 16-wide K step starts and on the accumulator it
    // continues, not merely on the order of the products, so a kernel that
    // regroups its K steps, starts a partial sum elsewhere or folds partial
    // sums in another order gets other bits here too (TestMatMulTBatchInvariant
    // relies on that). The hardware's internal rounding differs; its
    // dependence on exactly these inputs does not.
    float out[16 * 16];
    for (int r = 0; r < 16; ++r)
        for (int n = 0; n < 16; ++n) {
            double s = 0.0;
            for (int k = 0; k < 16; ++k) s += (double)a.x[r * 16 + k] * (double)b.x[k * 16 + n];
            out[r * 16 + n] = (float)((double)c.x[r * 16 + n] + s);
        }
    std::memcpy(d.x, out, sizeof out);
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm,
                              layout_t layout) {
    if (threadIdx.x % 32 != 0) return;
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) {
            if (layout == mem_row_major) p[r * ldm + c] = f.x[r * 16 + c];
            else p[c * ldm + r] = f.x[r * 16 + c];
        }
}

} // namespace wmma
} // namespace nvcuda
