//go:build amd64 && !purego

#include "textflag.h"
#include "avx2_amd64.h"

// Attention's kernels over a 16-bit KV cache (kv16.go): those of
// dot_amd64.s with every key and value widened to float32 as it is loaded,
// then the same FMAs in the same order. WIDENB widens eight bfloat16 (a
// shift into the top half), WIDENH eight float16 (F16C's VCVTPH2PS); both
// are exact. The kernels take the widening as a macro argument, so the two
// dtypes share one text; the tiles, reduction and axpy pieces are
// avx2_amd64.h's, shared with dot_amd64.s.

// DOTSROWS8 is dotsRows8AVX2 over 16-bit rows: dst[j] = dot(x, row j)
// over 8*nb elements for eight rows. AX is the byte offset into the rows;
// x, float32, is at twice that offset.
#define DOTSROWS8(W) \
	MOVQ x+0(FP), SI; \
	MOVQ w+8(FP), AX; \
	MOVQ rows+16(FP), DX; \
	MOVQ ld+24(FP), CX; \
	SHLQ $1, CX; \
	ROWPTR(0(DX), DI); \
	ROWPTR(4(DX), BX); \
	ROWPTR(8(DX), R8); \
	ROWPTR(12(DX), R9); \
	ROWPTR(16(DX), R10); \
	ROWPTR(20(DX), R11); \
	ROWPTR(24(DX), R12); \
	ROWPTR(28(DX), R13); \
	MOVQ nb+32(FP), CX; \
	MOVQ dst+40(FP), DX; \
	XORQ AX, AX; \
	ZERO8; \
	TESTQ  CX, CX; \
	JZ     reduce; \
loop: \
	VMOVUPS     (SI)(AX*2), Y8; \
	W((DI)(AX*1), Y9); \
	W((BX)(AX*1), Y10); \
	W((R8)(AX*1), Y11); \
	W((R9)(AX*1), Y12); \
	VFMADD231PS Y9, Y8, Y0; \
	VFMADD231PS Y10, Y8, Y1; \
	VFMADD231PS Y11, Y8, Y2; \
	VFMADD231PS Y12, Y8, Y3; \
	W((R10)(AX*1), Y9); \
	W((R11)(AX*1), Y10); \
	W((R12)(AX*1), Y11); \
	W((R13)(AX*1), Y12); \
	VFMADD231PS Y9, Y8, Y4; \
	VFMADD231PS Y10, Y8, Y5; \
	VFMADD231PS Y11, Y8, Y6; \
	VFMADD231PS Y12, Y8, Y7; \
	ADDQ        $16, AX; \
	DECQ        CX; \
	JNZ         loop; \
reduce: \
	STORE8; \
	VZEROUPPER; \
	RET

// The axpy kernels: AXPYROWS (avx2_amd64.h) over 16-bit value rows, each
// widened by W as it is loaded: FMAWk(W) adds p[t] times the key's widened
// row into Y0..Y(k-1), as FMAROWk of dot_amd64.s over float32.

// FMA1 adds p[t] times the widened columns at byte OFF of the key's row
// (in T) into accumulator Y.
#define FMA1(W, OFF, T, Y) \
	W(OFF(BX), T); \
	VFMADD231PS T, Y8, Y

#define FMAW1(W) \
	FMA1(W, 0, Y9, Y0)
#define FMAW2(W) \
	FMAW1(W); \
	FMA1(W, 16, Y10, Y1)
#define FMAW4(W) \
	FMAW2(W); \
	FMA1(W, 32, Y11, Y2); \
	FMA1(W, 48, Y12, Y3)
#define FMAW6(W) \
	FMAW4(W); \
	FMA1(W, 64, Y9, Y4); \
	FMA1(W, 80, Y10, Y5)
#define FMAW8(W) \
	FMAW6(W); \
	FMA1(W, 96, Y11, Y6); \
	FMA1(W, 112, Y12, Y7)

// func dotsRows8BF16AVX2(x *float32, w *uint16, rows *int32, ld int, nb int, dst *float32)
TEXT ·dotsRows8BF16AVX2(SB), NOSPLIT, $0-48
	DOTSROWS8(WIDENB)

// func dotsRows8F16AVX2(x *float32, w *uint16, rows *int32, ld int, nb int, dst *float32)
TEXT ·dotsRows8F16AVX2(SB), NOSPLIT, $0-48
	DOTSROWS8(WIDENH)

// func dots1x1F16AVX2(x *float32, w *uint16, nb int) float32
TEXT ·dots1x1F16AVX2(SB), NOSPLIT, $0-28
	DOTS1X1(WIDENH)

// func axpyRows1BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows1BF16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC1, FMAW1(WIDENB), STOREACC1)

// func axpyRows1F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows1F16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC1, FMAW1(WIDENH), STOREACC1)

// func axpyRows2BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows2BF16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC2, FMAW2(WIDENB), STOREACC2)

// func axpyRows2F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows2F16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC2, FMAW2(WIDENH), STOREACC2)

// func axpyRows4BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows4BF16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC4, FMAW4(WIDENB), STOREACC4)

// func axpyRows4F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows4F16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC4, FMAW4(WIDENH), STOREACC4)

// func axpyRows6BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows6BF16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC6, FMAW6(WIDENB), STOREACC6)

// func axpyRows6F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows6F16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC6, FMAW6(WIDENH), STOREACC6)

// func axpyRows8BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows8BF16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC8, FMAW8(WIDENB), STOREACC8)

// func axpyRows8F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows8F16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($1, LOADACC8, FMAW8(WIDENH), STOREACC8)

// func axpy6x16BF16AVX2(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
// axpy6x16AVX2 over bf16 values, each widened exactly: the same bits.
TEXT ·axpy6x16BF16AVX2(SB), NOSPLIT, $0-56
	AXPY6X16Y($1, WIDENB, 16)

// func axpy6x16F16AVX2(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x16F16AVX2(SB), NOSPLIT, $0-56
	AXPY6X16Y($1, WIDENH, 16)

// func prefetchRows16AVX2(w *uint16, rows *int32, n, ld, lines int)
// prefetchRowsAVX2 for rows of 16-bit values: lines cache lines from
// w + rows[i]*ld*2 bytes on, for each of the n rows. Changes no result.
TEXT ·prefetchRows16AVX2(SB), NOSPLIT, $0-40
	PREFETCHROWS($1)

// func dots3x4F16AVX2(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots3x4F16AVX2(SB), NOSPLIT, $0-56
	DOTS3X4(WIDENH, $1, $16)

// func dots1x8F16AVX2(x *float32, w *uint16, ldw int, nb int, dst *float32)
TEXT ·dots1x8F16AVX2(SB), NOSPLIT, $0-40
	DOTS1X8(WIDENH, NOPF, NOPF)
