//go:build amd64 && !purego

#include "textflag.h"
#include "avx2_amd64.h"
#include "row4_amd64.h"

// AVX2+FMA dot-product kernels. Each YMM accumulator holds the eight lane
// sums of one output element (step 1 of the order in dot.go); HSUM
// (avx2_amd64.h) is step 2. Loads are unaligned (VMOVUPS), so where a row
// starts in memory never changes the arithmetic.

// FMAROWk adds p[t] times key t's float32 value row at BX into the
// accumulators Y0..Y(k-1), for the axpy kernels (AXPYROWS, avx2_amd64.h).
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
	DOTS3X4(LOADF, $2, $32)

// func dots1x4AVX2(x, w *float32, ls int, nb int, dst *float32, lds int)
// dst[k*lds] = dot(x, w[k*ls:]) over 8*nb elements, k < 4: a decode row
// against four weight rows, a whole line of each per pass (DOTS1X4).
TEXT ·dots1x4AVX2(SB), NOSPLIT, $0-48
	DOTS1X4($2, PASSF32, $1, ROW4STEP(LOADF, 0, 0), $32)

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

// The bf16 kernels are the float32 ones with each weight vector widened on
// load (WIDENB, avx2_amd64.h), then the same FMAs in the same order; the
// f16 ones in kv16_amd64.s are the same tiles with WIDENH.

// func dots3x4BF16AVX2(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots3x4BF16AVX2(SB), NOSPLIT, $0-56
	DOTS3X4(WIDENB, $1, $16)

// func dots1x4BF16AVX2(x *float32, w *uint16, ls int, nb int, dst *float32, lds int)
TEXT ·dots1x4BF16AVX2(SB), NOSPLIT, $0-48
	DOTS1X4($1, PASSB16(WIDENB), $2, ROW4STEP(WIDENB, 0, 0), $16)

// func dots1x1BF16AVX2(x *float32, w *uint16, nb int) float32
TEXT ·dots1x1BF16AVX2(SB), NOSPLIT, $0-28
	DOTS1X1(WIDENB)

// Attention kernels (see attnkern.go). Row i of the cache starts at
// w + rows[i]*ld*4 bytes (ROWPTR, avx2_amd64.h); off is already added to w
// by the caller.

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

	ZERO8
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
	STORE8
	VZEROUPPER
	RET

// func axpyRows8AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// acc[0:64] += p[t] * v[rows[t]*ld:][0:64] for t < n, one FMA per element
// per key, keys in order.
TEXT ·axpyRows8AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($2, LOADACC8, FMAROW8, STOREACC8)

// func axpyRows1AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:8].
TEXT ·axpyRows1AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($2, LOADACC1, FMAROW1, STOREACC1)

// func axpyRows6AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:48].
TEXT ·axpyRows6AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($2, LOADACC6, FMAROW6, STOREACC6)

// func axpyRows4AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:32].
TEXT ·axpyRows4AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($2, LOADACC4, FMAROW4, STOREACC4)

// func axpyRows2AVX2(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:16].
TEXT ·axpyRows2AVX2(SB), NOSPLIT, $0-48
	AXPYROWS($2, LOADACC2, FMAROW2, STOREACC2)

// func axpy6x16AVX2(acc *float32, step int, p, v *float32, rows *int32, n, ld int)
// acc[r*step+d] += p[r*attnBlock+t] * v[rows[t]*ld+d] for r < 6, d < 16,
// t < n, keys in order: six rows' accumulators against one read of each
// value row (AXPY6X16Y).
TEXT ·axpy6x16AVX2(SB), NOSPLIT, $0-56
	AXPY6X16Y($2, LOADF, 32)

// func prefetchRowsAVX2(w *float32, rows *int32, n, ld, lines int)
// Prefetches lines cache lines from w + rows[i]*ld*4 bytes on, for each
// of the n rows. Changes no result.
TEXT ·prefetchRowsAVX2(SB), NOSPLIT, $0-40
	PREFETCHROWS($2)

// BCAST loads the float32 bit pattern C into all eight lanes of Y.
#define BCAST(C, X, Y) \
	MOVL         C, AX; \
	VMOVD        AX, X; \
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

// GATEMUL is the loop of a gated product, dst[i] = g[i]·σ(z)·u[i] with z
// from ZLOAD (which sets Y0 from the g at (SI) and may use Y13 and Y15), in
// the order of sigmoid (exp.go): e = expNeg(-|z|), r = 1/(1+e), s = e·r
// where z's sign bit is set and r elsewhere, 0 where z < expLo, then
// (g·s)·u. The exponential takes every register, so z is reloaded after
// it from ZMEM: (SI) where z is g itself, a stack slot where ZLOAD stores
// z (not dst, which may be gate or up). DI is dst, SI gate, DX up and CX
// the groups of eight.
#define GATEMUL(ZLOAD, ZMEM) \
	EXPCONSTS; \
	BCAST($0x80000000, X1, Y1); \
	TESTQ CX, CX; \
	JZ    done; \
loop: \
	ZLOAD; \
	VORPS     Y1, Y0, Y0; \
	EXPNEG; \
	VADDPS    Y12, Y13, Y15; \
	VDIVPS    Y15, Y12, Y15; \
	VMULPS    Y15, Y13, Y13; \
	VMOVUPS   ZMEM, Y0; \
	VBLENDVPS Y0, Y13, Y15, Y15; \
	VCMPPS    $1, Y2, Y0, Y13; \
	VANDNPS   Y15, Y13, Y15; \
	VMULPS    (SI), Y15, Y0; \
	VMULPS    (DX), Y0, Y0; \
	VMOVUPS   Y0, (DI); \
	ADDQ      $32, SI; \
	ADDQ      $32, DX; \
	ADDQ      $32, DI; \
	DECQ      CX; \
	JNZ       loop; \
done: \
	VZEROUPPER; \
	RET

// SILUZ: silu's argument of σ is g itself.
#define SILUZ VMOVUPS (SI), Y0

// GELUZ is geluZ (exp.go): a = g·g, b = 1 + 0.044715·a, z = (2c·g)·b,
// with the constants from geluConsts; it leaves z in the frame's slot z
// for GATEMUL's reload.
#define GELUZ \
	VMOVUPS      (SI), Y0; \
	VMULPS       Y0, Y0, Y13; \
	VBROADCASTSS geluConsts<>+0(SB), Y15; \
	VMULPS       Y15, Y13, Y13; \
	VADDPS       Y12, Y13, Y13; \
	VBROADCASTSS geluConsts<>+4(SB), Y15; \
	VMULPS       Y15, Y0, Y0; \
	VMULPS       Y13, Y0, Y0; \
	VMOVUPS      Y0, z-32(SP)

// geluConsts holds GELUZ's float32 constants: 0.044715 and 2c.
DATA geluConsts<>+0(SB)/4, $0x3d372713
DATA geluConsts<>+4(SB)/4, $0x3fcc422a
GLOBL geluConsts<>(SB), RODATA|NOPTR, $8

// func sumSquaresAVX2(x *float32, n int) float64
// The sum of x[i]² over i < 8*n in sumSquaresGo's order (ops.go): lanes
// 0..3 in Y0 and 4..7 in Y1, each a chain of float64 fused multiply-adds
// (a float32's square is exact in float64, so each is the lane's one
// rounding, as in Go), then the tree ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)).
TEXT ·sumSquaresAVX2(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	TESTQ  CX, CX
	JZ     sumSquaresDone

sumSquaresLoop:
	VCVTPS2PD   (SI), Y2
	VCVTPS2PD   16(SI), Y3
	VFMADD231PD Y2, Y2, Y0
	VFMADD231PD Y3, Y3, Y1
	ADDQ        $32, SI
	DECQ        CX
	JNZ         sumSquaresLoop

sumSquaresDone:
	VADDPD       Y1, Y0, Y0 // s0+s4, s1+s5, s2+s6, s3+s7
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0 // (s0+s4)+(s2+s6), (s1+s5)+(s3+s7)
	VUNPCKHPD    X0, X0, X1
	VADDSD       X1, X0, X0
	VMOVSD       X0, ret+16(FP)
	VZEROUPPER
	RET

// func normScaleAVX2(dst, x, w *float32, n int, s float32)
// dst[i] = w[i]·(x[i]·s) for i < 8*n, each product rounded, as normScaleGo.
TEXT ·normScaleAVX2(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS s+32(FP), Y1
	TESTQ        CX, CX
	JZ           normScaleDone

normScaleLoop:
	VMULPS  (SI), Y1, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     normScaleLoop

normScaleDone:
	VZEROUPPER
	RET

// func ropeAVX2(row, cs *float32, heads, half8 int)
// Rotates each of the heads (2*half8*8 floats each) of row by cs, as
// ropeGo: for the pair (a, c) = (lo[i], hi[i]), lo[i] = a·cos − c·sin and
// hi[i] = c·cos + a·sin, every product rounded before the sum (no FMA),
// eight pairs at a time.
TEXT ·ropeAVX2(SB), NOSPLIT, $0-32
	MOVQ  row+0(FP), DI
	MOVQ  cs+8(FP), SI
	MOVQ  heads+16(FP), BX
	MOVQ  half8+24(FP), R8
	MOVQ  R8, R9
	SHLQ  $5, R9 // half, in bytes: hi and sin are R9 after lo and cos
	TESTQ BX, BX
	JZ    ropeDone
	TESTQ R8, R8
	JZ    ropeDone

ropeHead:
	MOVQ R8, CX
	MOVQ DI, AX
	MOVQ SI, DX

ropeGroup:
	VMOVUPS (AX), Y0       // a
	VMOVUPS (AX)(R9*1), Y1 // c
	VMOVUPS (DX), Y2       // cos
	VMOVUPS (DX)(R9*1), Y3 // sin
	VMULPS  Y2, Y0, Y4     // a·cos
	VMULPS  Y3, Y1, Y5     // c·sin
	VSUBPS  Y5, Y4, Y4     // a·cos − c·sin
	VMULPS  Y2, Y1, Y6     // c·cos
	VMULPS  Y3, Y0, Y7     // a·sin
	VADDPS  Y7, Y6, Y6     // c·cos + a·sin
	VMOVUPS Y4, (AX)
	VMOVUPS Y6, (AX)(R9*1)
	ADDQ    $32, AX
	ADDQ    $32, DX
	DECQ    CX
	JNZ     ropeGroup
	LEAQ    (DI)(R9*2), DI
	DECQ    BX
	JNZ     ropeHead

ropeDone:
	VZEROUPPER
	RET

// func siluMulAVX2(dst, gate, up *float32, n int)
// dst[i] = silu(g[i])·u[i] for i < 8*n, eight at a time, as siluMulGo.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	GATEMUL(SILUZ, (SI))

// func geluMulAVX2(dst, gate, up *float32, n int)
// dst[i] = gelu(g[i])·u[i] for i < 8*n, eight at a time, as geluMulGo.
TEXT ·geluMulAVX2(SB), NOSPLIT, $32-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	GATEMUL(GELUZ, z-32(SP))

// func scaleMaxAVX2(x *float32, n int, s float32) float32
// x[i] *= s for i < 8*n, eight at a time, and returns the largest product
// (a maximum is exact, so the order it is taken in does not matter).
TEXT ·scaleMaxAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Y1
	BCAST($0xff800000, X2, Y2) // -Inf
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
