//go:build amd64 && !purego

#include "textflag.h"

// Attention's kernels over a 16-bit KV cache (kv16.go): those of
// dot_amd64.s with every key and value widened to float32 as it is loaded,
// then the same FMAs in the same order. WIDENB widens eight bfloat16 (a
// shift into the top half), WIDENH eight float16 (F16C's VCVTPH2PS); both
// are exact. The kernels take the widening as a macro argument, so the two
// dtypes share one text.

#define WIDENB(M, Y) \
	VPMOVZXWD M, Y; \
	VPSLLD    $16, Y, Y

#define WIDENH(M, Y) \
	VCVTPH2PS M, Y

// HSUM reduces the eight lanes of Y into the low lane of X in dot.go's
// order, as in dot_amd64.s.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VMOVHLPS     X, T, T; \
	VADDPS       T, X, X; \
	VMOVSHDUP    X, T; \
	VADDSS       T, X, X

// ROWPTR sets R to base AX + rows[i]*stride CX, for an int32 rows[i] at M.
#define ROWPTR(M, R) \
	MOVLQSX M, R; \
	IMULQ   CX, R; \
	ADDQ    AX, R

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
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
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
	HSUM(Y0, X0, X15); \
	VMOVSS X0, (DX); \
	HSUM(Y1, X1, X15); \
	VMOVSS X1, 4(DX); \
	HSUM(Y2, X2, X15); \
	VMOVSS X2, 8(DX); \
	HSUM(Y3, X3, X15); \
	VMOVSS X3, 12(DX); \
	HSUM(Y4, X4, X15); \
	VMOVSS X4, 16(DX); \
	HSUM(Y5, X5, X15); \
	VMOVSS X5, 20(DX); \
	HSUM(Y6, X6, X15); \
	VMOVSS X6, 24(DX); \
	HSUM(Y7, X7, X15); \
	VMOVSS X7, 28(DX); \
	VZEROUPPER; \
	RET

// The axpy kernels: acc[0:8n] += p[t] * widen(v[rows[t]*ld:][0:8n]) for
// t < n keys, one FMA per element per key, keys in order, as
// axpyRowsNAVX2. DI acc, SI p, AX v, DX rows, R8 n, CX ld in bytes.
#define AXPYARGS \
	MOVQ acc+0(FP), DI; \
	MOVQ p+8(FP), SI; \
	MOVQ v+16(FP), AX; \
	MOVQ rows+24(FP), DX; \
	MOVQ n+32(FP), R8; \
	MOVQ ld+40(FP), CX; \
	SHLQ $1, CX

#define AXPYKEY \
	VBROADCASTSS (SI), Y8; \
	ROWPTR((DX), BX)

#define AXPYNEXT \
	ADDQ $4, SI; \
	ADDQ $4, DX; \
	DECQ R8

// FMA1(W, i, Y) adds p[t] times widened columns 8i..8i+7 of the key's
// row into accumulator Y.
#define FMA1(W, OFF, T, Y) \
	W(OFF(BX), T); \
	VFMADD231PS T, Y8, Y

#define AXPY1(W) \
	AXPYARGS; \
	VMOVUPS 0(DI), Y0; \
	TESTQ R8, R8; \
	JZ    store; \
loop: \
	AXPYKEY; \
	FMA1(W, 0, Y9, Y0); \
	AXPYNEXT; \
	JNZ   loop; \
store: \
	VMOVUPS Y0, 0(DI); \
	VZEROUPPER; \
	RET

#define AXPY2(W) \
	AXPYARGS; \
	VMOVUPS 0(DI), Y0; \
	VMOVUPS 32(DI), Y1; \
	TESTQ R8, R8; \
	JZ    store; \
loop: \
	AXPYKEY; \
	FMA1(W, 0, Y9, Y0); \
	FMA1(W, 16, Y10, Y1); \
	AXPYNEXT; \
	JNZ   loop; \
store: \
	VMOVUPS Y0, 0(DI); \
	VMOVUPS Y1, 32(DI); \
	VZEROUPPER; \
	RET

#define AXPY4(W) \
	AXPYARGS; \
	VMOVUPS 0(DI), Y0; \
	VMOVUPS 32(DI), Y1; \
	VMOVUPS 64(DI), Y2; \
	VMOVUPS 96(DI), Y3; \
	TESTQ R8, R8; \
	JZ    store; \
loop: \
	AXPYKEY; \
	FMA1(W, 0, Y9, Y0); \
	FMA1(W, 16, Y10, Y1); \
	FMA1(W, 32, Y11, Y2); \
	FMA1(W, 48, Y12, Y3); \
	AXPYNEXT; \
	JNZ   loop; \
store: \
	VMOVUPS Y0, 0(DI); \
	VMOVUPS Y1, 32(DI); \
	VMOVUPS Y2, 64(DI); \
	VMOVUPS Y3, 96(DI); \
	VZEROUPPER; \
	RET

#define AXPY6(W) \
	AXPYARGS; \
	VMOVUPS 0(DI), Y0; \
	VMOVUPS 32(DI), Y1; \
	VMOVUPS 64(DI), Y2; \
	VMOVUPS 96(DI), Y3; \
	VMOVUPS 128(DI), Y4; \
	VMOVUPS 160(DI), Y5; \
	TESTQ R8, R8; \
	JZ    store; \
loop: \
	AXPYKEY; \
	FMA1(W, 0, Y9, Y0); \
	FMA1(W, 16, Y10, Y1); \
	FMA1(W, 32, Y11, Y2); \
	FMA1(W, 48, Y12, Y3); \
	FMA1(W, 64, Y9, Y4); \
	FMA1(W, 80, Y10, Y5); \
	AXPYNEXT; \
	JNZ   loop; \
store: \
	VMOVUPS Y0, 0(DI); \
	VMOVUPS Y1, 32(DI); \
	VMOVUPS Y2, 64(DI); \
	VMOVUPS Y3, 96(DI); \
	VMOVUPS Y4, 128(DI); \
	VMOVUPS Y5, 160(DI); \
	VZEROUPPER; \
	RET

#define AXPY8(W) \
	AXPYARGS; \
	VMOVUPS 0(DI), Y0; \
	VMOVUPS 32(DI), Y1; \
	VMOVUPS 64(DI), Y2; \
	VMOVUPS 96(DI), Y3; \
	VMOVUPS 128(DI), Y4; \
	VMOVUPS 160(DI), Y5; \
	VMOVUPS 192(DI), Y6; \
	VMOVUPS 224(DI), Y7; \
	TESTQ R8, R8; \
	JZ    store; \
loop: \
	AXPYKEY; \
	FMA1(W, 0, Y9, Y0); \
	FMA1(W, 16, Y10, Y1); \
	FMA1(W, 32, Y11, Y2); \
	FMA1(W, 48, Y12, Y3); \
	FMA1(W, 64, Y9, Y4); \
	FMA1(W, 80, Y10, Y5); \
	FMA1(W, 96, Y11, Y6); \
	FMA1(W, 112, Y12, Y7); \
	AXPYNEXT; \
	JNZ   loop; \
store: \
	VMOVUPS Y0, 0(DI); \
	VMOVUPS Y1, 32(DI); \
	VMOVUPS Y2, 64(DI); \
	VMOVUPS Y3, 96(DI); \
	VMOVUPS Y4, 128(DI); \
	VMOVUPS Y5, 160(DI); \
	VMOVUPS Y6, 192(DI); \
	VMOVUPS Y7, 224(DI); \
	VZEROUPPER; \
	RET

// DOTS3X4 and DOTS1X8 are dot_amd64.s's dots3x4BF16AVX2 and
// dots1x8BF16AVX2 with the widening W as a parameter: the tiles scoresRows
// runs over eight keys in consecutive cache rows (attnrows.go).
#define DOTS3X4(W) \
	MOVQ x+0(FP), SI; \
	MOVQ ldx+8(FP), R8; \
	MOVQ w+16(FP), DI; \
	MOVQ ldw+24(FP), R9; \
	MOVQ nb+32(FP), CX; \
	MOVQ dst+40(FP), DX; \
	MOVQ ldd+48(FP), R11; \
	SHLQ $2, R8; \
	SHLQ $1, R9; \
	SHLQ $2, R11; \
	LEAQ (R9)(R9*2), R10; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
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
	ADDQ        $16, DI; \
	DECQ        CX; \
	JNZ         loop; \
reduce: \
	HSUM(Y0, X0, X15); \
	VMOVSS X0, (DX); \
	HSUM(Y1, X1, X15); \
	VMOVSS X1, 4(DX); \
	HSUM(Y2, X2, X15); \
	VMOVSS X2, 8(DX); \
	HSUM(Y3, X3, X15); \
	VMOVSS X3, 12(DX); \
	ADDQ   R11, DX; \
	HSUM(Y4, X4, X15); \
	VMOVSS X4, (DX); \
	HSUM(Y5, X5, X15); \
	VMOVSS X5, 4(DX); \
	HSUM(Y6, X6, X15); \
	VMOVSS X6, 8(DX); \
	HSUM(Y7, X7, X15); \
	VMOVSS X7, 12(DX); \
	ADDQ   R11, DX; \
	HSUM(Y8, X8, X15); \
	VMOVSS X8, (DX); \
	HSUM(Y9, X9, X15); \
	VMOVSS X9, 4(DX); \
	HSUM(Y10, X10, X15); \
	VMOVSS X10, 8(DX); \
	HSUM(Y11, X11, X15); \
	VMOVSS X11, 12(DX); \
	VZEROUPPER; \
	RET

#define DOTS1X8(W) \
	MOVQ x+0(FP), SI; \
	MOVQ w+8(FP), DI; \
	MOVQ ldw+16(FP), R9; \
	MOVQ nb+24(FP), CX; \
	MOVQ dst+32(FP), DX; \
	SHLQ $1, R9; \
	LEAQ (R9)(R9*2), R10; \
	LEAQ (DI)(R9*4), BX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	TESTQ  CX, CX; \
	JZ     reduce; \
loop: \
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
	HSUM(Y0, X0, X15); \
	VMOVSS X0, (DX); \
	HSUM(Y1, X1, X15); \
	VMOVSS X1, 4(DX); \
	HSUM(Y2, X2, X15); \
	VMOVSS X2, 8(DX); \
	HSUM(Y3, X3, X15); \
	VMOVSS X3, 12(DX); \
	HSUM(Y4, X4, X15); \
	VMOVSS X4, 16(DX); \
	HSUM(Y5, X5, X15); \
	VMOVSS X5, 20(DX); \
	HSUM(Y6, X6, X15); \
	VMOVSS X6, 24(DX); \
	HSUM(Y7, X7, X15); \
	VMOVSS X7, 28(DX); \
	VZEROUPPER; \
	RET

// func dotsRows8BF16AVX2(x *float32, w *uint16, rows *int32, ld int, nb int, dst *float32)
TEXT ·dotsRows8BF16AVX2(SB), NOSPLIT, $0-48
	DOTSROWS8(WIDENB)

// func dotsRows8F16AVX2(x *float32, w *uint16, rows *int32, ld int, nb int, dst *float32)
TEXT ·dotsRows8F16AVX2(SB), NOSPLIT, $0-48
	DOTSROWS8(WIDENH)

// func dots1x1F16AVX2(x *float32, w *uint16, nb int) float32
TEXT ·dots1x1F16AVX2(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   w+8(FP), DI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	TESTQ  CX, CX
	JZ     reduce

loop:
	VMOVUPS     (SI), Y8
	WIDENH((DI), Y9)
	VFMADD231PS Y9, Y8, Y0
	ADDQ        $32, SI
	ADDQ        $16, DI
	DECQ        CX
	JNZ         loop

reduce:
	HSUM(Y0, X0, X15)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyRows1BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows1BF16AVX2(SB), NOSPLIT, $0-48
	AXPY1(WIDENB)

// func axpyRows1F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows1F16AVX2(SB), NOSPLIT, $0-48
	AXPY1(WIDENH)

// func axpyRows2BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows2BF16AVX2(SB), NOSPLIT, $0-48
	AXPY2(WIDENB)

// func axpyRows2F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows2F16AVX2(SB), NOSPLIT, $0-48
	AXPY2(WIDENH)

// func axpyRows4BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows4BF16AVX2(SB), NOSPLIT, $0-48
	AXPY4(WIDENB)

// func axpyRows4F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows4F16AVX2(SB), NOSPLIT, $0-48
	AXPY4(WIDENH)

// func axpyRows6BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows6BF16AVX2(SB), NOSPLIT, $0-48
	AXPY6(WIDENB)

// func axpyRows6F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows6F16AVX2(SB), NOSPLIT, $0-48
	AXPY6(WIDENH)

// func axpyRows8BF16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows8BF16AVX2(SB), NOSPLIT, $0-48
	AXPY8(WIDENB)

// func axpyRows8F16AVX2(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpyRows8F16AVX2(SB), NOSPLIT, $0-48
	AXPY8(WIDENH)

// func prefetchRows16AVX2(w *uint16, rows *int32, n, ld, lines int)
// prefetchRowsAVX2 for rows of 16-bit values: lines cache lines from
// w + rows[i]*ld*2 bytes on, for each of the n rows. Changes no result.
TEXT ·prefetchRows16AVX2(SB), NOSPLIT, $0-40
	MOVQ  w+0(FP), AX
	MOVQ  rows+8(FP), DX
	MOVQ  n+16(FP), BX
	MOVQ  ld+24(FP), CX
	MOVQ  lines+32(FP), R8
	SHLQ  $1, CX
	TESTQ BX, BX
	JZ    done

row:
	ROWPTR(0(DX), DI)
	MOVQ R8, R9

line:
	PREFETCHT0 (DI)
	ADDQ       $64, DI
	DECQ       R9
	JNZ        line
	ADDQ       $4, DX
	DECQ       BX
	JNZ        row

done:
	RET

// func dots3x4F16AVX2(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots3x4F16AVX2(SB), NOSPLIT, $0-56
	DOTS3X4(WIDENH)

// func dots1x8F16AVX2(x *float32, w *uint16, ldw int, nb int, dst *float32)
TEXT ·dots1x8F16AVX2(SB), NOSPLIT, $0-40
	DOTS1X8(WIDENH)
