// avx2_amd64.h: the macros that the AVX2+FMA kernels of dot_amd64.s
// (float32 and bf16 weights, float32 KV) and kv16_amd64.s (16-bit KV)
// share: the reduction, the weight loads and widenings, the 3×4 dot tile
// (float32, bf16, f16), the 1×8 and 1×1 tiles over 16-bit weights, and
// attention's axpy and row prefetch. The tiles take the load or widening
// as a macro argument, so the dtypes share one text; they hold labels, so
// each is used at most once per TEXT function.

#include "hsum_amd64.h"
#include "axpy6_amd64.h"

// STORE8 stores the sums of Y0..Y7 at (DX)..28(DX).
#define STORE8 \
	HSTORE(Y0, X0, 0); \
	HSTORE(Y1, X1, 4); \
	HSTORE(Y2, X2, 8); \
	HSTORE(Y3, X3, 12); \
	HSTORE(Y4, X4, 16); \
	HSTORE(Y5, X5, 20); \
	HSTORE(Y6, X6, 24); \
	HSTORE(Y7, X7, 28)

// ZERO8 clears the accumulators Y0..Y7, ZERO12 Y0..Y11.
#define ZERO8 \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7

#define ZERO12 \
	ZERO8; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11

// ROWPTR sets R to base AX + rows[i]*stride CX, for an int32 rows[i] at M.
#define ROWPTR(M, R) \
	MOVLQSX M, R; \
	IMULQ   CX, R; \
	ADDQ    AX, R

// The weight loads a tile takes as its argument W: eight weights at M into
// the float32 lanes of Y. LOADF loads float32; WIDENB widens bfloat16
// (zero-extended to 32 bits and shifted into the top half), WIDENH float16
// (F16C's VCVTPH2PS). Both widenings are exact, so a kernel over 16-bit
// weights runs the same FMAs in the same order as over float32.
#define LOADF(M, Y) \
	VMOVUPS M, Y

#define WIDENB(M, Y) \
	VPMOVZXWD M, Y; \
	VPSLLD    $16, Y, Y

#define WIDENH(M, Y) \
	VCVTPH2PS M, Y

// DOTS3X4 is the 3×4 tile: dst[i*ldd+j] = dot(x[i*ldx:], w[j*ldw:]) over
// 8*nb elements, i < 3, j < 4, with weights loaded by W; a weight is
// 1<<WSHIFT bytes and eight of them WSTEP bytes.
#define DOTS3X4(W, WSHIFT, WSTEP) \
	MOVQ x+0(FP), SI; \
	MOVQ ldx+8(FP), R8; \
	MOVQ w+16(FP), DI; \
	MOVQ ldw+24(FP), R9; \
	MOVQ nb+32(FP), CX; \
	MOVQ dst+40(FP), DX; \
	MOVQ ldd+48(FP), R11; \
	SHLQ $2, R8; \
	SHLQ WSHIFT, R9; \
	SHLQ $2, R11; \
	LEAQ (R9)(R9*2), R10; \
	ZERO12; \
	TESTQ  CX, CX; \
	JZ     reduce; \
loop: \
	VMOVUPS     (SI), Y12; \
	VMOVUPS     (SI)(R8*1), Y13; \
	VMOVUPS     (SI)(R8*2), Y14; \
	W((DI), Y15); \
	VFMADD231PS Y15, Y12, Y0; \
	VFMADD231PS Y15, Y13, Y4; \
	VFMADD231PS Y15, Y14, Y8; \
	W((DI)(R9*1), Y15); \
	VFMADD231PS Y15, Y12, Y1; \
	VFMADD231PS Y15, Y13, Y5; \
	VFMADD231PS Y15, Y14, Y9; \
	W((DI)(R9*2), Y15); \
	VFMADD231PS Y15, Y12, Y2; \
	VFMADD231PS Y15, Y13, Y6; \
	VFMADD231PS Y15, Y14, Y10; \
	W((DI)(R10*1), Y15); \
	VFMADD231PS Y15, Y12, Y3; \
	VFMADD231PS Y15, Y13, Y7; \
	VFMADD231PS Y15, Y14, Y11; \
	ADDQ        $32, SI; \
	ADDQ        WSTEP, DI; \
	DECQ        CX; \
	JNZ         loop; \
reduce: \
	HSTORE(Y0, X0, 0); \
	HSTORE(Y1, X1, 4); \
	HSTORE(Y2, X2, 8); \
	HSTORE(Y3, X3, 12); \
	ADDQ   R11, DX; \
	HSTORE(Y4, X4, 0); \
	HSTORE(Y5, X5, 4); \
	HSTORE(Y6, X6, 8); \
	HSTORE(Y7, X7, 12); \
	ADDQ   R11, DX; \
	HSTORE(Y8, X8, 0); \
	HSTORE(Y9, X9, 4); \
	HSTORE(Y10, X10, 8); \
	HSTORE(Y11, X11, 12); \
	VZEROUPPER; \
	RET

// DOTS1X8 is the 1×8 tile over 16-bit weights widened by W: dst[j] =
// dot(x, w[j*ldw:]) over 8*nb elements, j < 8. PFINIT and PFSTEP are the
// prefetch of the next eight rows (PF16INIT, PF16STEP) or nothing (NOPF).
#define DOTS1X8(W, PFINIT, PFSTEP) \
	MOVQ x+0(FP), SI; \
	MOVQ w+8(FP), DI; \
	MOVQ ldw+16(FP), R9; \
	MOVQ nb+24(FP), CX; \
	MOVQ dst+32(FP), DX; \
	SHLQ $1, R9; \
	LEAQ (R9)(R9*2), R10; \
	LEAQ (DI)(R9*4), BX; \
	PFINIT; \
	ZERO8; \
	TESTQ  CX, CX; \
	JZ     reduce; \
loop: \
	PFSTEP; \
	VMOVUPS     (SI), Y8; \
	W((DI), Y9); \
	W((DI)(R9*1), Y10); \
	W((DI)(R9*2), Y11); \
	W((DI)(R10*1), Y12); \
	VFMADD231PS Y9, Y8, Y0; \
	VFMADD231PS Y10, Y8, Y1; \
	VFMADD231PS Y11, Y8, Y2; \
	VFMADD231PS Y12, Y8, Y3; \
	W((BX), Y9); \
	W((BX)(R9*1), Y10); \
	W((BX)(R9*2), Y11); \
	W((BX)(R10*1), Y12); \
	VFMADD231PS Y9, Y8, Y4; \
	VFMADD231PS Y10, Y8, Y5; \
	VFMADD231PS Y11, Y8, Y6; \
	VFMADD231PS Y12, Y8, Y7; \
	ADDQ        $32, SI; \
	ADDQ        $16, DI; \
	ADDQ        $16, BX; \
	DECQ        CX; \
	JNZ         loop; \
reduce: \
	STORE8; \
	VZEROUPPER; \
	RET

// ROW4STEP is one step of DOTS1X4: eight values of x at XOFF(SI) against
// eight weights of each of the four rows at WOFF(DI).
#define ROW4STEP(W, XOFF, WOFF) \
	VMOVUPS     XOFF(SI), Y8; \
	W(WOFF(DI), Y9); \
	W(WOFF(DI)(R9*1), Y10); \
	W(WOFF(DI)(R9*2), Y11); \
	W(WOFF(DI)(R10*1), Y12); \
	VFMADD231PS Y9, Y8, Y0; \
	VFMADD231PS Y10, Y8, Y1; \
	VFMADD231PS Y11, Y8, Y2; \
	VFMADD231PS Y12, Y8, Y3

// PASSF32 and PASSB16 are DOTS1X4's passes over a line of float32 (two
// steps) and of 16-bit weights (four), each ending on the next line.
#define PASSF32 \
	ROW4STEP(LOADF, 0, 0); \
	ROW4STEP(LOADF, 32, 32); \
	ADDQ $64, SI; \
	ADDQ $64, DI

#define PASSB16(W) \
	ROW4STEP(W, 0, 0); \
	ROW4STEP(W, 32, 16); \
	ROW4STEP(W, 64, 32); \
	ROW4STEP(W, 96, 48); \
	ADDQ $128, SI; \
	ADDQ $64, DI

// PF16INIT points R11 at rows 8..15 (the next call's, when ldw is the row
// length); PF16STEP prefetches their 128 bytes per step, as each step reads
// 16 bytes of each of eight rows (as in dots1x8AVX2). Prefetches change no
// result.
#define PF16INIT \
	LEAQ (DI)(R9*8), R11

#define PF16STEP \
	PREFETCHT0 (R11); \
	PREFETCHT0 64(R11); \
	ADDQ       $128, R11

#define NOPF

// DOTS1X1 is dot(x, w) over 8*nb elements, 16-bit weights widened by W.
#define DOTS1X1(W) \
	MOVQ   x+0(FP), SI; \
	MOVQ   w+8(FP), DI; \
	MOVQ   nb+16(FP), CX; \
	VXORPS Y0, Y0, Y0; \
	TESTQ  CX, CX; \
	JZ     reduce; \
loop: \
	VMOVUPS     (SI), Y8; \
	W((DI), Y9); \
	VFMADD231PS Y9, Y8, Y0; \
	ADDQ        $32, SI; \
	ADDQ        $16, DI; \
	DECQ        CX; \
	JNZ         loop; \
reduce: \
	HSUM(Y0, X0, X15); \
	VMOVSS X0, ret+24(FP); \
	VZEROUPPER; \
	RET

// The axpy kernels (attention's weighted sum of values, see attnkern.go):
// acc[0:8k] += p[t] * v[rows[t]*ld:][0:8k] for t < n keys, one FMA per
// element per key, keys in order. AXPYROWS is the whole kernel: LOAD and
// STORE move acc to and from the accumulators (LOADACCk, STOREACCk), FMAS
// adds one key's row into them.
//
// AXPYROWSARGS loads the arguments: DI acc, SI p, AX v, DX rows, R8 n, CX
// ld in bytes (a value is 1<<VSHIFT bytes). AXPYKEY broadcasts p[t] into
// Y8 and points BX at key t's value row; AXPYNEXT steps to the next key
// and counts down.
#define AXPYROWS(VSHIFT, LOAD, FMAS, STORE) \
	AXPYROWSARGS(VSHIFT); \
	LOAD; \
	TESTQ R8, R8; \
	JZ    store; \
loop: \
	AXPYKEY; \
	FMAS; \
	AXPYNEXT; \
	JNZ   loop; \
store: \
	STORE; \
	VZEROUPPER; \
	RET

#define AXPYROWSARGS(VSHIFT) \
	MOVQ acc+0(FP), DI; \
	MOVQ p+8(FP), SI; \
	MOVQ v+16(FP), AX; \
	MOVQ rows+24(FP), DX; \
	MOVQ n+32(FP), R8; \
	MOVQ ld+40(FP), CX; \
	SHLQ VSHIFT, CX

#define AXPYKEY \
	VBROADCASTSS (SI), Y8; \
	ROWPTR((DX), BX)

#define AXPYNEXT \
	ADDQ $4, SI; \
	ADDQ $4, DX; \
	DECQ R8

// LOADACCk and STOREACCk move acc's first 8k floats to and from
// Y0..Y(k-1).
#define LOADACC1 \
	VMOVUPS (DI), Y0
#define LOADACC2 \
	LOADACC1; \
	VMOVUPS 32(DI), Y1
#define LOADACC4 \
	LOADACC2; \
	VMOVUPS 64(DI), Y2; \
	VMOVUPS 96(DI), Y3
#define LOADACC6 \
	LOADACC4; \
	VMOVUPS 128(DI), Y4; \
	VMOVUPS 160(DI), Y5
#define LOADACC8 \
	LOADACC6; \
	VMOVUPS 192(DI), Y6; \
	VMOVUPS 224(DI), Y7

#define STOREACC1 \
	VMOVUPS Y0, (DI)
#define STOREACC2 \
	STOREACC1; \
	VMOVUPS Y1, 32(DI)
#define STOREACC4 \
	STOREACC2; \
	VMOVUPS Y2, 64(DI); \
	VMOVUPS Y3, 96(DI)
#define STOREACC6 \
	STOREACC4; \
	VMOVUPS Y4, 128(DI); \
	VMOVUPS Y5, 160(DI)
#define STOREACC8 \
	STOREACC6; \
	VMOVUPS Y6, 192(DI); \
	VMOVUPS Y7, 224(DI)

// PREFETCHROWS is a whole prefetch kernel (prefetchRowsAVX2,
// prefetchRows16AVX2): lines cache lines from w + rows[i]*ld<<VSHIFT bytes
// on, for each of the n rows. It changes no result. The lines go to L2
// (PREFETCHT1), not L1: a block's keys and values for one KV head are
// 64 rows of up to eight lines each, far more misses than L1 can hold in
// flight, and asking L1 for them stalled the head being computed; to L2
// they took a decode row's attention at Qwen3-0.6B's shape and a
// 1,000-token context from 16.4–16.7 to 18.4–19.2 GB/s of keys and values
// (BenchmarkAttendDecodeLayers), and 16 rows at 512 tokens from 1.87–1.92
// to 1.03–1.09 ms (BenchmarkAttendDecode; old and new binaries alternating
// three times, AMD EPYC Zen 4).
#define PREFETCHROWS(VSHIFT) \
	MOVQ  w+0(FP), AX; \
	MOVQ  rows+8(FP), DX; \
	MOVQ  n+16(FP), BX; \
	MOVQ  ld+24(FP), CX; \
	MOVQ  lines+32(FP), R8; \
	SHLQ  VSHIFT, CX; \
	TESTQ BX, BX; \
	JZ    done; \
row: \
	ROWPTR(0(DX), DI); \
	MOVQ R8, R9; \
line: \
	PREFETCHT1 (DI); \
	ADDQ       $64, DI; \
	DECQ       R9; \
	JNZ        line; \
	ADDQ       $4, DX; \
	DECQ       BX; \
	JNZ        row; \
done: \
	RET

// AXPY6X16Y is a whole six-row axpy kernel over 16 value columns, for a
// CPU with 16 YMM registers: attention's accumulateRows for six query
// rows at once (axpyRows6), so that each key's value row is read once for
// the six rows rather than once per row. The accumulators of the six rows
// (two registers each, Y0..Y11) are loaded; then for each key its value
// row is loaded by W (LOADF for float32, WIDENB or WIDENH for 16-bit
// values) into Y12 and Y13, the second O1 bytes after the first, and each
// row's weight for the key, broadcast into Y14 or Y15, times it is added.
// Each accumulator element is the chain of fused multiply-adds over the
// keys in order that axpyRows computes, so the bits are its. The frame
// (AXPYARGS, VROW, LOAD6, STORE6) is AVX-512's, in axpy6_amd64.h.
#define AXPY6X16Y(VSHIFT, W, O1) \
	AXPYARGS(VSHIFT); \
	LOAD6(0, Y0, Y2, Y4, Y6, Y8, Y10); \
	LOAD6(32, Y1, Y3, Y5, Y7, Y9, Y11); \
	TESTQ CX, CX; \
	JZ    done; \
loop: \
	VROW; \
	W((AX), Y12); \
	W(O1(AX), Y13); \
	PROWY(0, Y14, Y0, Y1); \
	PROWY(256, Y15, Y2, Y3); \
	PROWY(512, Y14, Y4, Y5); \
	PROWY(768, Y15, Y6, Y7); \
	PROWY(1024, Y14, Y8, Y9); \
	PROWY(1280, Y15, Y10, Y11); \
	ADDQ  $4, SI; \
	DECQ  CX; \
	JNZ   loop; \
done: \
	STORE6(0, Y0, Y2, Y4, Y6, Y8, Y10); \
	STORE6(32, Y1, Y3, Y5, Y7, Y9, Y11); \
	VZEROUPPER; \
	RET

// PROWY adds one row's weight for the key (at OFF(SI), broadcast into YB)
// times the value row in Y12 and Y13 to that row's two accumulators.
#define PROWY(OFF, YB, A0, A1) \
	VBROADCASTSS OFF(SI), YB; \
	VFMADD231PS  Y12, YB, A0; \
	VFMADD231PS  Y13, YB, A1
