//go:build amd64 && !purego

#include "textflag.h"

// AVX2+FMA dot-product kernels. Each YMM accumulator holds the eight lane
// sums of one output element (step 1 of the order in dot.go); HSUM is step
// 2. Loads are unaligned (VMOVUPS), so where a row starts in memory never
// changes the arithmetic.

// HSUM reduces the eight lanes of Y into the low lane of X:
// ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7)). T is a scratch register.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VMOVHLPS     X, T, T; \
	VADDPS       T, X, X; \
	VMOVSHDUP    X, T; \
	VADDSS       T, X, X

// The axpy kernels' pieces (attention's weighted sum of values, see
// attnkern.go). AXPYROWSARGS loads the arguments: DI acc, SI p, AX v, DX
// rows, R8 n, CX ld in bytes. LOADACCn and STOREACCn move acc's first 8n
// floats to and from Y0..Y(n-1); AXPYKEY broadcasts p[t] into Y8 and points
// BX at key t's value row; FMAROWn adds p[t] times that row into the
// accumulators; AXPYNEXT steps to the next key and counts down.
#define AXPYROWSARGS \
	MOVQ acc+0(FP), DI; \
	MOVQ p+8(FP), SI; \
	MOVQ v+16(FP), AX; \
	MOVQ rows+24(FP), DX; \
	MOVQ n+32(FP), R8; \
	MOVQ ld+40(FP), CX; \
	SHLQ $2, CX

#define AXPYKEY \
	VBROADCASTSS (SI), Y8; \
	ROWPTR((DX), BX)

#define AXPYNEXT \
	ADDQ $4, SI; \
	ADDQ $4, DX; \
	DECQ R8

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

#define FMAROW1 \
	VFMADD231PS (BX), Y8, Y0
#define FMAROW2 \
	FMAROW1; \
	VFMADD231PS 32(BX), Y8, Y1
#define FMAROW4 \
	FMAROW2; \
	VFMADD231PS 64(BX), Y8, Y2; \
	VFMADD231PS 96(BX), Y8, Y3
#define FMAROW6 \
	FMAROW4; \
	VFMADD231PS 128(BX), Y8, Y4; \
	VFMADD231PS 160(BX), Y8, Y5
#define FMAROW8 \
	FMAROW6; \
	VFMADD231PS 192(BX), Y8, Y6; \
	VFMADD231PS 224(BX), Y8, Y7

// func dots3x4AVX2(x *float32, ldx int, w *float32, ldw int, nb int, dst *float32, ldd int)
// dst[i*ldd+j] = dot(x[i*ldx:], w[j*ldw:]) over 8*nb elements, i < 3, j < 4.
TEXT ·dots3x4AVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ ldx+8(FP), R8
	MOVQ w+16(FP), DI
	MOVQ ldw+24(FP), R9
	MOVQ nb+32(FP), CX
	MOVQ dst+40(FP), DX
	MOVQ ldd+48(FP), R11
	SHLQ $2, R8              // strides in bytes
	SHLQ $2, R9
	SHLQ $2, R11
	LEAQ (R9)(R9*2), R10     // 3*ldw

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	TESTQ  CX, CX
	JZ     reduce3x4

loop3x4:
	VMOVUPS     (SI), Y12
	VMOVUPS     (SI)(R8*1), Y13
	VMOVUPS     (SI)(R8*2), Y14
	VMOVUPS     (DI), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS     (DI)(R9*1), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	VMOVUPS     (DI)(R9*2), Y15
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	VMOVUPS     (DI)(R10*1), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         loop3x4

reduce3x4:
	HSUM(Y0, X0, X15)
	VMOVSS X0, (DX)
	HSUM(Y1, X1, X15)
	VMOVSS X1, 4(DX)
	HSUM(Y2, X2, X15)
	VMOVSS X2, 8(DX)
	HSUM(Y3, X3, X15)
	VMOVSS X3, 12(DX)
	ADDQ   R11, DX
	HSUM(Y4, X4, X15)
	VMOVSS X4, (DX)
	HSUM(Y5, X5, X15)
	VMOVSS X5, 4(DX)
	HSUM(Y6, X6, X15)
	VMOVSS X6, 8(DX)
	HSUM(Y7, X7, X15)
	VMOVSS X7, 12(DX)
	ADDQ   R11, DX
	HSUM(Y8, X8, X15)
	VMOVSS X8, (DX)
	HSUM(Y9, X9, X15)
	VMOVSS X9, 4(DX)
	HSUM(Y10, X10, X15)
	VMOVSS X10, 8(DX)
	HSUM(Y11, X11, X15)
	VMOVSS X11, 12(DX)
	VZEROUPPER
	RET

// func dots1x8AVX2(x *float32, w *float32, ldw int, nb int, dst *float32)
// dst[j] = dot(x, w[j*ldw:]) over 8*nb elements, j < 8. One row against
// eight gives eight independent FMA chains, enough to hide FMA latency
// while the weights stream in (the decode case).
TEXT ·dots1x8AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ldw+16(FP), R9
	MOVQ nb+24(FP), CX
	MOVQ dst+32(FP), DX
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10     // 3*ldw
	LEAQ (DI)(R9*4), BX      // rows 4..7
	LEAQ (DI)(R9*8), R11     // rows 8..15: the next call's, when ldw is the row length

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ  CX, CX
	JZ     reduce1x8

loop1x8:
	// Each step reads 32 bytes of each of eight rows, so 256 bytes of the
	// next eight (contiguous) rows per step prefetch exactly them by the
	// end: the next call starts on warm lines instead of eight cold
	// streams. Prefetches change no result.
	PREFETCHT0  (R11)
	PREFETCHT0  64(R11)
	PREFETCHT0  128(R11)
	PREFETCHT0  192(R11)
	ADDQ        $256, R11
	VMOVUPS     (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS (DI)(R9*1), Y8, Y1
	VFMADD231PS (DI)(R9*2), Y8, Y2
	VFMADD231PS (DI)(R10*1), Y8, Y3
	VFMADD231PS (BX), Y8, Y4
	VFMADD231PS (BX)(R9*1), Y8, Y5
	VFMADD231PS (BX)(R9*2), Y8, Y6
	VFMADD231PS (BX)(R10*1), Y8, Y7
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $32, BX
	DECQ        CX
	JNZ         loop1x8

reduce1x8:
	HSUM(Y0, X0, X15)
	VMOVSS X0, (DX)
	HSUM(Y1, X1, X15)
	VMOVSS X1, 4(DX)
	HSUM(Y2, X2, X15)
	VMOVSS X2, 8(DX)
	HSUM(Y3, X3, X15)
	VMOVSS X3, 12(DX)
	HSUM(Y4, X4, X15)
	VMOVSS X4, 16(DX)
	HSUM(Y5, X5, X15)
	VMOVSS X5, 20(DX)
	HSUM(Y6, X6, X15)
	VMOVSS X6, 24(DX)
	HSUM(Y7, X7, X15)
	VMOVSS X7, 28(DX)
	VZEROUPPER
	RET

// func dots1x1AVX2(x *float32, w *float32, nb int) float32
TEXT ·dots1x1AVX2(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   w+8(FP), DI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	TESTQ  CX, CX
	JZ     reduce1x1

loop1x1:
	VMOVUPS     (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         loop1x1

reduce1x1:
	HSUM(Y0, X0, X15)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func cpuid(eaxIn, ecxIn uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxIn+0(FP), AX
	MOVL ecxIn+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv0() (eax uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	RET

// The bf16 kernels below are the float32 ones with each weight vector
// widened on load: eight bf16 values zero-extended to 32 bits and shifted
// into the top half (exact), then the same FMAs in the same order.

// WIDEN loads eight bf16 weights at M into the float32 lanes of Y.
#define WIDEN(M, Y) \
	VPMOVZXWD M, Y; \
	VPSLLD    $16, Y, Y

// func dots3x4BF16AVX2(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots3x4BF16AVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ ldx+8(FP), R8
	MOVQ w+16(FP), DI
	MOVQ ldw+24(FP), R9
	MOVQ nb+32(FP), CX
	MOVQ dst+40(FP), DX
	MOVQ ldd+48(FP), R11
	SHLQ $2, R8              // x and dst strides in bytes (float32)
	SHLQ $1, R9              // w stride in bytes (bf16)
	SHLQ $2, R11
	LEAQ (R9)(R9*2), R10     // 3*ldw

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	TESTQ  CX, CX
	JZ     reduce3x4h

loop3x4h:
	VMOVUPS     (SI), Y12
	VMOVUPS     (SI)(R8*1), Y13
	VMOVUPS     (SI)(R8*2), Y14
	WIDEN((DI), Y15)
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	WIDEN((DI)(R9*1), Y15)
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	WIDEN((DI)(R9*2), Y15)
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	WIDEN((DI)(R10*1), Y15)
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	ADDQ        $32, SI
	ADDQ        $16, DI
	DECQ        CX
	JNZ         loop3x4h

reduce3x4h:
	HSUM(Y0, X0, X15)
	VMOVSS X0, (DX)
	HSUM(Y1, X1, X15)
	VMOVSS X1, 4(DX)
	HSUM(Y2, X2, X15)
	VMOVSS X2, 8(DX)
	HSUM(Y3, X3, X15)
	VMOVSS X3, 12(DX)
	ADDQ   R11, DX
	HSUM(Y4, X4, X15)
	VMOVSS X4, (DX)
	HSUM(Y5, X5, X15)
	VMOVSS X5, 4(DX)
	HSUM(Y6, X6, X15)
	VMOVSS X6, 8(DX)
	HSUM(Y7, X7, X15)
	VMOVSS X7, 12(DX)
	ADDQ   R11, DX
	HSUM(Y8, X8, X15)
	VMOVSS X8, (DX)
	HSUM(Y9, X9, X15)
	VMOVSS X9, 4(DX)
	HSUM(Y10, X10, X15)
	VMOVSS X10, 8(DX)
	HSUM(Y11, X11, X15)
	VMOVSS X11, 12(DX)
	VZEROUPPER
	RET

// func dots1x8BF16AVX2(x *float32, w *uint16, ldw int, nb int, dst *float32)
TEXT ·dots1x8BF16AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ldw+16(FP), R9
	MOVQ nb+24(FP), CX
	MOVQ dst+32(FP), DX
	SHLQ $1, R9
	LEAQ (R9)(R9*2), R10     // 3*ldw
	LEAQ (DI)(R9*4), BX      // rows 4..7
	LEAQ (DI)(R9*8), R11     // rows 8..15: the next call's, when ldw is the row length

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ  CX, CX
	JZ     reduce1x8h

loop1x8h:
	// 16 bytes of each of eight rows per step: prefetch the next eight
	// rows' 128 (as in dots1x8AVX2).
	PREFETCHT0  (R11)
	PREFETCHT0  64(R11)
	ADDQ        $128, R11
	VMOVUPS     (SI), Y8
	WIDEN((DI), Y9)
	WIDEN((DI)(R9*1), Y10)
	WIDEN((DI)(R9*2), Y11)
	WIDEN((DI)(R10*1), Y12)
	VFMADD231PS Y9, Y8, Y0
	VFMADD231PS Y10, Y8, Y1
	VFMADD231PS Y11, Y8, Y2
	VFMADD231PS Y12, Y8, Y3
	WIDEN((BX), Y9)
	WIDEN((BX)(R9*1), Y10)
	WIDEN((BX)(R9*2), Y11)
	WIDEN((BX)(R10*1), Y12)
	VFMADD231PS Y9, Y8, Y4
	VFMADD231PS Y10, Y8, Y5
	VFMADD231PS Y11, Y8, Y6
	VFMADD231PS Y12, Y8, Y7
	ADDQ        $32, SI
	ADDQ        $16, DI
	ADDQ        $16, BX
	DECQ        CX
	JNZ         loop1x8h

reduce1x8h:
	HSUM(Y0, X0, X15)
	VMOVSS X0, (DX)
	HSUM(Y1, X1, X15)
	VMOVSS X1, 4(DX)
	HSUM(Y2, X2, X15)
	VMOVSS X2, 8(DX)
	HSUM(Y3, X3, X15)
	VMOVSS X3, 12(DX)
	HSUM(Y4, X4, X15)
	VMOVSS X4, 16(DX)
	HSUM(Y5, X5, X15)
	VMOVSS X5, 20(DX)
	HSUM(Y6, X6, X15)
	VMOVSS X6, 24(DX)
	HSUM(Y7, X7, X15)
	VMOVSS X7, 28(DX)
	VZEROUPPER
	RET

// func dots1x1BF16AVX2(x *float32, w *uint16, nb int) float32
TEXT ·dots1x1BF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   x+0(FP), SI
	MOVQ   w+8(FP), DI
	MOVQ   nb+16(FP), CX
	VXORPS Y0, Y0, Y0
	TESTQ  CX, CX
	JZ     reduce1x1h

loop1x1h:
	VMOVUPS     (SI), Y8
	WIDEN((DI), Y9)
	VFMADD231PS Y9, Y8, Y0
	ADDQ        $32, SI
	ADDQ        $16, DI
	DECQ        CX
	JNZ         loop1x1h

reduce1x1h:
	HSUM(Y0, X0, X15)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// Attention kernels (see attnkern.go). Row j of the cache starts at
// w + rows[j]*ld*4 bytes; off is already added to w by the caller.

// ROWPTR sets R to base + rows[i]*stride, for an int32 rows[i] at M.
#define ROWPTR(M, R) \
	MOVLQSX M, R; \
	IMULQ   CX, R; \
	ADDQ    AX, R

// func dotsRows8AVX2(x *float32, w *float32, rows *int32, ld int, nb int, dst *float32)
TEXT ·dotsRows8AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), AX
	MOVQ rows+16(FP), DX
	MOVQ ld+24(FP), CX
	SHLQ $2, CX
	ROWPTR(0(DX), DI)
	ROWPTR(4(DX), BX)
	ROWPTR(8(DX), R8)
	ROWPTR(12(DX), R9)
	ROWPTR(16(DX), R10)
	ROWPTR(20(DX), R11)
	ROWPTR(24(DX), R12)
	ROWPTR(28(DX), R13)
	MOVQ nb+32(FP), CX
	MOVQ dst+40(FP), DX
	XORQ AX, AX             // byte offset into every row

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ  CX, CX
	JZ     reduceRows8

loopRows8:
	VMOVUPS     (SI)(AX*1), Y8
	VFMADD231PS (DI)(AX*1), Y8, Y0
	VFMADD231PS (BX)(AX*1), Y8, Y1
	VFMADD231PS (R8)(AX*1), Y8, Y2
	VFMADD231PS (R9)(AX*1), Y8, Y3
	VFMADD231PS (R10)(AX*1), Y8, Y4
	VFMADD231PS (R11)(AX*1), Y8, Y5
	VFMADD231PS (R12)(AX*1), Y8, Y6
	VFMADD231PS (R13)(AX*1), Y8, Y7
	ADDQ        $32, AX
	DECQ        CX
	JNZ         loopRows8

reduceRows8:
	HSUM(Y0, X0, X15)
	VMOVSS X0, (DX)
	HSUM(Y1, X1, X15)
	VMOVSS X1, 4(DX)
	HSUM(Y2, X2, X15)
	VMOVSS X2, 8(DX)
	HSUM(Y3, X3, X15)
	VMOVSS X3, 12(DX)
	HSUM(Y4, X4, X15)
	VMOVSS X4, 16(DX)
	HSUM(Y5, X5, X15)
	VMOVSS X5, 20(DX)
	HSUM(Y6, X6, X15)
	VMOVSS X6, 24(DX)
	HSUM(Y7, X7, X15)
	VMOVSS X7, 28(DX)
	VZEROUPPER
	RET

// func axpyRows8AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// acc[0:64] += p[t] * v[rows[t]*ld:][0:64] for t < n, one FMA per element
// per key, keys in order.
TEXT ·axpyRows8AVX2(SB), NOSPLIT, $0-48
	AXPYROWSARGS
	LOADACC8
	TESTQ R8, R8
	JZ    storeAxpy8

loopAxpy8:
	AXPYKEY
	FMAROW8
	AXPYNEXT
	JNZ   loopAxpy8

storeAxpy8:
	STOREACC8
	VZEROUPPER
	RET

// func axpyRows1AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:8].
TEXT ·axpyRows1AVX2(SB), NOSPLIT, $0-48
	AXPYROWSARGS
	LOADACC1
	TESTQ R8, R8
	JZ    storeAxpy1

loopAxpy1:
	AXPYKEY
	FMAROW1
	AXPYNEXT
	JNZ   loopAxpy1

storeAxpy1:
	STOREACC1
	VZEROUPPER
	RET

// func axpyRows6AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:48].
TEXT ·axpyRows6AVX2(SB), NOSPLIT, $0-48
	AXPYROWSARGS
	LOADACC6
	TESTQ R8, R8
	JZ    storeAxpy6

loopAxpy6:
	AXPYKEY
	FMAROW6
	AXPYNEXT
	JNZ   loopAxpy6

storeAxpy6:
	STOREACC6
	VZEROUPPER
	RET

// func axpyRows4AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:32].
TEXT ·axpyRows4AVX2(SB), NOSPLIT, $0-48
	AXPYROWSARGS
	LOADACC4
	TESTQ R8, R8
	JZ    storeAxpy4

loopAxpy4:
	AXPYKEY
	FMAROW4
	AXPYNEXT
	JNZ   loopAxpy4

storeAxpy4:
	STOREACC4
	VZEROUPPER
	RET

// func axpyRows2AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:16].
TEXT ·axpyRows2AVX2(SB), NOSPLIT, $0-48
	AXPYROWSARGS
	LOADACC2
	TESTQ R8, R8
	JZ    storeAxpy2

loopAxpy2:
	AXPYKEY
	FMAROW2
	AXPYNEXT
	JNZ   loopAxpy2

storeAxpy2:
	STOREACC2
	VZEROUPPER
	RET

// func prefetchRowsAVX2(w *float32, rows *int32, n, ld, lines int)
// Prefetches lines cache lines from w + rows[i]*ld*4 bytes on, for each
// of the n rows. Changes no result.
TEXT ·prefetchRowsAVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), AX
	MOVQ rows+8(FP), DX
	MOVQ n+16(FP), BX
	MOVQ ld+24(FP), CX
	MOVQ lines+32(FP), R8
	SHLQ $2, CX
	TESTQ BX, BX
	JZ    prefetchDone

prefetchRow:
	ROWPTR(0(DX), DI)
	MOVQ R8, R9

prefetchLine:
	PREFETCHT0 (DI)
	ADDQ       $64, DI
	DECQ       R9
	JNZ        prefetchLine
	ADDQ       $4, DX
	DECQ       BX
	JNZ        prefetchRow

prefetchDone:
	RET

// BCAST loads the float32 bit pattern C into all eight lanes of Y.
#define BCAST(C, X, Y) \
	MOVL         C, AX; \
	MOVL         AX, X; \
	VPBROADCASTD X, Y

// EXPCONSTS loads expNeg's constants (exp.go) into Y2..Y12 and Y14, the
// registers EXPNEG reads.
#define EXPCONSTS \
	BCAST($0xc2aeac4f, X2, Y2); \
	BCAST($0x3f000000, X3, Y3); \
	BCAST($0x3fb8aa3b, X4, Y4); \
	BCAST($0xbf318000, X5, Y5); \
	BCAST($0x395e8083, X6, Y6); \
	BCAST($0x39506967, X7, Y7); \
	BCAST($0x3ab743ce, X8, Y8); \
	BCAST($0x3c088908, X9, Y9); \
	BCAST($0x3d2aa9c1, X10, Y10); \
	BCAST($0x3e2aaaaa, X11, Y11); \
	BCAST($0x3f800000, X12, Y12); \
	BCAST($0x42fe0000, X14, Y14)

// EXPNEG sets Y13 = expNeg(Y0) in eight lanes, in expNeg's order of
// operations: Y2 expLo, Y3 c5, Y4 log2 e, Y5 -ln2 hi, Y6 -ln2 lo, Y7..Y11
// c0..c4, Y12 1, Y14 127. Y0 and Y15 are overwritten.
#define EXPNEG \
	VMAXPS      Y2, Y0, Y0; \
	VMULPS      Y4, Y0, Y15; \
	VROUNDPS    $0, Y15, Y15; \
	VFMADD231PS Y5, Y15, Y0; \
	VFMADD231PS Y6, Y15, Y0; \
	VMOVAPS     Y7, Y13; \
	VFMADD213PS Y8, Y0, Y13; \
	VFMADD213PS Y9, Y0, Y13; \
	VFMADD213PS Y10, Y0, Y13; \
	VFMADD213PS Y11, Y0, Y13; \
	VFMADD213PS Y3, Y0, Y13; \
	VFMADD213PS Y12, Y0, Y13; \
	VFMADD213PS Y12, Y0, Y13; \
	VADDPS      Y14, Y15, Y15; \
	VCVTPS2DQ   Y15, Y15; \
	VPSLLD      $23, Y15, Y15; \
	VMULPS      Y15, Y13, Y13

// func expShiftAVX2(x *float32, n int, m float32)
// x[i] = expNeg(x[i] - m) for i < 8*n, eight at a time, in the order of
// operations of expNeg (exp.go): r = n*(-ln2 hi) + x, then n*(-ln2 lo) + r,
// the polynomial by Horner, and the power of two n+127 (exact) shifted
// into the exponent.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y1
	EXPCONSTS
	TESTQ        CX, CX
	JZ           expDone

expLoop:
	VMOVUPS (SI), Y0
	VSUBPS  Y1, Y0, Y0
	EXPNEG
	VMOVUPS Y13, (SI)
	ADDQ    $32, SI
	DECQ    CX
	JNZ     expLoop

expDone:
	VZEROUPPER
	RET

// func siluMulAVX2(dst, gate, up *float32, n int)
// dst[i] = silu(g[i])·u[i] for i < 8*n, eight at a time, in the order of
// siluMulGo (exp.go): e = expNeg(-|g|), r = 1/(1+e), s = e·r where g's
// sign bit is set and r elsewhere, 0 where g < expLo, then (g·s)·u.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	EXPCONSTS
	BCAST($0x80000000, X1, Y1) // the sign bit
	TESTQ CX, CX
	JZ    siluDone

siluLoop:
	VMOVUPS   (SI), Y0
	VORPS     Y1, Y0, Y0 // -|g|
	EXPNEG
	VADDPS    Y12, Y13, Y15
	VDIVPS    Y15, Y12, Y15 // r = 1/(1+e)
	VMULPS    Y15, Y13, Y13 // e·r
	VMOVUPS   (SI), Y0
	VBLENDVPS Y0, Y13, Y15, Y15 // s: e·r where g's sign bit is set
	VCMPPS    $1, Y2, Y0, Y13   // g < expLo
	VANDNPS   Y15, Y13, Y15     // s = 0 there
	VMULPS    Y15, Y0, Y0
	VMULPS    (DX), Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       siluLoop

siluDone:
	VZEROUPPER
	RET

// func scaleMaxAVX2(x *float32, n int, s float32) float32
// x[i] *= s for i < 8*n, eight at a time, and returns the largest product
// (a maximum is exact, so the order it is taken in does not matter).
TEXT ·scaleMaxAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Y1
	MOVL         $0xff800000, AX // -Inf
	MOVL         AX, X2
	VPBROADCASTD X2, Y2
	TESTQ        CX, CX
	JZ           scaleMaxDone

scaleMaxLoop:
	VMULPS  (SI), Y1, Y0
	VMOVUPS Y0, (SI)
	VMAXPS  Y2, Y0, Y2
	ADDQ    $32, SI
	DECQ    CX
	JNZ     scaleMaxLoop

scaleMaxDone:
	VEXTRACTF128 $1, Y2, X3
	VMAXPS       X3, X2, X2
	VMOVHLPS     X2, X3, X3
	VMAXPS       X3, X2, X2
	VMOVSHDUP    X2, X3
	VMAXSS       X3, X2, X2
	VMOVSS       X2, ret+24(FP)
	VZEROUPPER
	RET
