//go:build !purego

#include "textflag.h"

// NEON kernels: the arm64 counterparts of dot_amd64.s, in the same order of
// operations (dot.go, attnkern.go, exp.go), so they give the same bits as
// the Go kernels and the AVX2 ones.
//
// A NEON register holds four float32 lanes, so the eight lane sums of one
// dot product (step 1 of dot.go) live in two registers: lanes 0..3 in one
// ("lo"), lanes 4..7 in the other ("hi"), each lane updated by FMLA, a
// fused multiply-add rounded once. Step 2's tree
// ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7)) is then lo+hi = t, followed by
// (t0+t2) + (t1+t3): see REDUCE1 and REDUCE4.
//
// Loads are unaligned (VLD1), so where a row starts in memory never changes
// the arithmetic.

// Instructions Go's arm64 assembler has no mnemonic for, encoded by hand.
// The arguments are register numbers, in the order of the Arm syntax in
// each comment (destination first); all are on four float32 lanes.

// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4S(d, n, m) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))

// FADDP Vd.4S, Vn.4S, Vm.4S: d = [n0+n1, n2+n3, m0+m1, m2+m3]
#define FADDP4S(d, n, m) WORD $(0x6E20D400 | ((m)<<16) | ((n)<<5) | (d))

// FADDP Sd, Vn.2S: the scalar d = n0+n1
#define FADDP2S(d, n) WORD $(0x7E30D800 | ((n)<<5) | (d))

// FMUL Vd.4S, Vn.4S, Vm.4S
#define FMUL4S(d, n, m) WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d))

// FDIV Vd.4S, Vn.4S, Vm.4S: d = n/m
#define FDIV4S(d, n, m) WORD $(0x6E20FC00 | ((m)<<16) | ((n)<<5) | (d))

// FMAX Vd.4S, Vn.4S, Vm.4S
#define FMAX4S(d, n, m) WORD $(0x4E20F400 | ((m)<<16) | ((n)<<5) | (d))

// FCMGT Vd.4S, Vn.4S, Vm.4S: all ones where n > m, else zero
#define FCMGT4S(d, n, m) WORD $(0x6EA0E400 | ((m)<<16) | ((n)<<5) | (d))

// FRINTN Vd.4S, Vn.4S: round to the nearest integer, ties to even
#define FRINTN4S(d, n) WORD $(0x4E218800 | ((n)<<5) | (d))

// FCVTZS Vd.4S, Vn.4S: to int32, toward zero
#define FCVTZS4S(d, n) WORD $(0x4EA1B800 | ((n)<<5) | (d))

// SHLL Vd.4S, Vn.4H, #16 and SHLL2 Vd.4S, Vn.8H, #16: the low (high) four
// 16-bit lanes of n, each shifted into the top half of a 32-bit lane
#define SHLL16(d, n) WORD $(0x2E613800 | ((n)<<5) | (d))
#define SHLL216(d, n) WORD $(0x6E613800 | ((n)<<5) | (d))

// FCVTL Vd.4S, Vn.4H and FCVTL2 Vd.4S, Vn.8H: the low (high) four float16
// lanes of n converted to float32 (exact)
#define FCVTL16(d, n) WORD $(0x0E217800 | ((n)<<5) | (d))
#define FCVTL216(d, n) WORD $(0x4E217800 | ((n)<<5) | (d))

// WIDEN turns eight bf16 values, loaded into V(lo), into float32: lanes
// 0..3 in V(lo), 4..7 in V(hi). A bf16 is the top half of a float32, so
// this is exact. SHLL2 goes first: SHLL overwrites its own source.
#define WIDEN(lo, hi) \
	SHLL216(hi, lo); \
	SHLL16(lo, lo)

// WIDENH is WIDEN for eight IEEE float16 values (a 16-bit KV cache).
#define WIDENH(lo, hi) \
	FCVTL216(hi, lo); \
	FCVTL16(lo, lo)

// REDUCE1 sets F0 to step 2 of dot.go over the lane sums in V(lo), V(hi):
// t = lo+hi = [s0+s4, s1+s5, s2+s6, s3+s7]; u = t + (t's halves swapped)
// = [t0+t2, t1+t3, ...]; F0 = u0+u1. V1 is scratch.
#define REDUCE1(lo, hi) \
	FADD4S(0, lo, hi); \
	VEXT   $8, V0.B16, V0.B16, V1.B16; \
	FADD4S(0, 0, 1); \
	FADDP2S(0, 0)

// REDUCE4 sets V(d) to step 2 of dot.go for four dot products at once,
// product j's lane sums being in V(lj), V(hj): with tj = lj+hj,
// X01 = [t0_0, t0_1, t1_0, t1_1] and Y01 = [t0_2, t0_3, t1_2, t1_3], so
// that P01 = X01+Y01 holds (tj_0+tj_2, tj_1+tj_3) for j = 0, 1 (P23 the
// same for 2, 3), and the pairwise sum of P01 and P23 is the four results.
// V0..V5 are scratch.
#define REDUCE4(d, l0, h0, l1, h1, l2, h2, l3, h3) \
	FADD4S(0, l0, h0); \
	FADD4S(1, l1, h1); \
	FADD4S(2, l2, h2); \
	FADD4S(3, l3, h3); \
	VZIP1  V1.D2, V0.D2, V4.D2; \
	VZIP2  V1.D2, V0.D2, V5.D2; \
	VZIP1  V3.D2, V2.D2, V0.D2; \
	VZIP2  V3.D2, V2.D2, V1.D2; \
	FADD4S(4, 4, 5); \
	FADD4S(0, 0, 1); \
	FADDP4S(d, 4, 0)

#define ZERO8(a, b, c, d, e, f, g, h) \
	VEOR a.B16, a.B16, a.B16; \
	VEOR b.B16, b.B16, b.B16; \
	VEOR c.B16, c.B16, c.B16; \
	VEOR d.B16, d.B16, d.B16; \
	VEOR e.B16, e.B16, e.B16; \
	VEOR f.B16, f.B16, f.B16; \
	VEOR g.B16, g.B16, g.B16; \
	VEOR h.B16, h.B16, h.B16

// The 3×4 tile: x rows in V0..V5 (two registers each), a weight row in
// V6, V7, and the lane sums of output (i, j) in V(8+8i+2j), V(9+8i+2j).
// TILECOL adds weight row j's products with the three x rows.
#define TILECOL(l0, h0, l1, h1, l2, h2) \
	VFMLA V6.S4, V0.S4, l0; \
	VFMLA V7.S4, V1.S4, h0; \
	VFMLA V6.S4, V2.S4, l1; \
	VFMLA V7.S4, V3.S4, h1; \
	VFMLA V6.S4, V4.S4, l2; \
	VFMLA V7.S4, V5.S4, h2

#define TILECOL0 TILECOL(V8.S4, V9.S4, V16.S4, V17.S4, V24.S4, V25.S4)
#define TILECOL1 TILECOL(V10.S4, V11.S4, V18.S4, V19.S4, V26.S4, V27.S4)
#define TILECOL2 TILECOL(V12.S4, V13.S4, V20.S4, V21.S4, V28.S4, V29.S4)
#define TILECOL3 TILECOL(V14.S4, V15.S4, V22.S4, V23.S4, V30.S4, V31.S4)

// TILEARGS loads the tile kernels' arguments: x rows at R0, R7, R8; weight
// rows at R2, R9, R10, R11; R4 nb; R5 dst, R6 its row stride in bytes. S
// is the log2 of a weight's size.
#define TILEARGS(S) \
	MOVD x+0(FP), R0; \
	MOVD ldx+8(FP), R1; \
	MOVD w+16(FP), R2; \
	MOVD ldw+24(FP), R3; \
	MOVD nb+32(FP), R4; \
	MOVD dst+40(FP), R5; \
	MOVD ldd+48(FP), R6; \
	LSL  $2, R1; \
	LSL  $S, R3; \
	LSL  $2, R6; \
	ADD  R1, R0, R7; \
	ADD  R1, R7, R8; \
	ADD  R3, R2, R9; \
	ADD  R3, R9, R10; \
	ADD  R3, R10, R11; \
	ZERO8(V8, V9, V10, V11, V12, V13, V14, V15); \
	ZERO8(V16, V17, V18, V19, V20, V21, V22, V23); \
	ZERO8(V24, V25, V26, V27, V28, V29, V30, V31)

// TILESTORE reduces the twelve outputs and stores them, a row of four at
// a time.
#define TILESTORE \
	REDUCE4(6, 8, 9, 10, 11, 12, 13, 14, 15); \
	VST1   [V6.S4], (R5); \
	ADD    R6, R5; \
	REDUCE4(6, 16, 17, 18, 19, 20, 21, 22, 23); \
	VST1   [V6.S4], (R5); \
	ADD    R6, R5; \
	REDUCE4(6, 24, 25, 26, 27, 28, 29, 30, 31); \
	VST1   [V6.S4], (R5)

// ARGS1X8 loads dots1x8's arguments: x at R0, weight rows at R1, R5..R11,
// R3 nb, R4 dst, R12 the row after the eight (for prefetching). S is the
// log2 of a weight's size.
#define ARGS1X8(S) \
	MOVD x+0(FP), R0; \
	MOVD w+8(FP), R1; \
	MOVD ldw+16(FP), R2; \
	MOVD nb+24(FP), R3; \
	MOVD dst+32(FP), R4; \
	LSL  $S, R2; \
	ADD  R2, R1, R5; \
	ADD  R2, R5, R6; \
	ADD  R2, R6, R7; \
	ADD  R2, R7, R8; \
	ADD  R2, R8, R9; \
	ADD  R2, R9, R10; \
	ADD  R2, R10, R11; \
	ADD  R2, R11, R12; \
	ZERO16

// The axpy kernels: acc[0:4k] += p[t] * v[rows[t]*ld:][0:4k] for t < n,
// one fused multiply-add per element per key, keys in order; acc lives in
// V0..V(k-1), p[t] is broadcast into V16, the value row is read into
// V20..V23. R0 acc, R1 p, R2 v, R3 rows, R4 n, R5 ld in bytes (S is the
// log2 of a value's size), R6 acc for loading, R7 the value row.
#define AXPYARGS(S) \
	MOVD acc+0(FP), R0; \
	MOVD p+8(FP), R1; \
	MOVD v+16(FP), R2; \
	MOVD rows+24(FP), R3; \
	MOVD n+32(FP), R4; \
	MOVD ld+40(FP), R5; \
	LSL  $S, R5; \
	MOVD R0, R6

// DOTSROWS8ARGS loads dotsRows8's arguments and points R6..R13 at the
// eight cache rows: R0 x, R1 w, R2 rows, R3 ld in bytes (S as above), R4
// nb, R5 dst.
#define DOTSROWS8ARGS(S) \
	MOVD x+0(FP), R0; \
	MOVD w+8(FP), R1; \
	MOVD rows+16(FP), R2; \
	MOVD ld+24(FP), R3; \
	MOVD nb+32(FP), R4; \
	MOVD dst+40(FP), R5; \
	LSL  $S, R3; \
	ROWPTR(0(R2), R6); \
	ROWPTR(4(R2), R7); \
	ROWPTR(8(R2), R8); \
	ROWPTR(12(R2), R9); \
	ROWPTR(16(R2), R10); \
	ROWPTR(20(R2), R11); \
	ROWPTR(24(R2), R12); \
	ROWPTR(28(R2), R13); \
	ZERO16

// ROWPTR sets R to R1 + rows[i]*R3, for the int32 rows[i] at M.
#define ROWPTR(M, R) \
	MOVW M, R; \
	MUL  R3, R, R; \
	ADD  R1, R, R

#define ZERO16 \
	ZERO8(V16, V17, V18, V19, V20, V21, V22, V23); \
	ZERO8(V24, V25, V26, V27, V28, V29, V30, V31)

// AXPY6ARGS loads the six-row axpy kernels' arguments: acc rows at R0,
// R7..R11 (step floats apart), R2 p, R3 v, R4 rows, R5 n, R6 ld in bytes
// (S is the log2 of a value's size), R15 the bytes from one row's weights
// in p to the next (attnBlock floats).
#define AXPY6ARGS(S) \
	MOVD acc+0(FP), R0; \
	MOVD step+8(FP), R1; \
	MOVD p+16(FP), R2; \
	MOVD v+24(FP), R3; \
	MOVD rows+32(FP), R4; \
	MOVD n+40(FP), R5; \
	MOVD ld+48(FP), R6; \
	LSL  $2, R1; \
	LSL  $S, R6; \
	ADD  R1, R0, R7; \
	ADD  R1, R7, R8; \
	ADD  R1, R8, R9; \
	ADD  R1, R9, R10; \
	ADD  R1, R10, R11; \
	MOVD $256, R15

// func dots3x4NEON(x *float32, ldx int, w *float32, ldw int, nb int, dst *float32, ldd int)
// dst[i*ldd+j] = dot(x[i*ldx:], w[j*ldw:]) over 8*nb elements, i < 3, j < 4.
// The 24 accumulators and six x registers leave two for a weight row.
TEXT ·dots3x4NEON(SB), NOSPLIT, $0-56
	TILEARGS(2)
	CBZ R4, reduce3x4

loop3x4:
	VLD1.P 32(R0), [V0.S4, V1.S4]
	VLD1.P 32(R7), [V2.S4, V3.S4]
	VLD1.P 32(R8), [V4.S4, V5.S4]
	VLD1.P 32(R2), [V6.S4, V7.S4]
	TILECOL0
	VLD1.P 32(R9), [V6.S4, V7.S4]
	TILECOL1
	VLD1.P 32(R10), [V6.S4, V7.S4]
	TILECOL2
	VLD1.P 32(R11), [V6.S4, V7.S4]
	TILECOL3
	SUBS   $1, R4, R4
	BNE    loop3x4

reduce3x4:
	TILESTORE
	RET

// func dots3x4BF16NEON(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
// dots3x4NEON with bf16 weights, widened as they are loaded.
TEXT ·dots3x4BF16NEON(SB), NOSPLIT, $0-56
	TILEARGS(1)
	CBZ R4, reduce3x4h

loop3x4h:
	VLD1.P 32(R0), [V0.S4, V1.S4]
	VLD1.P 32(R7), [V2.S4, V3.S4]
	VLD1.P 32(R8), [V4.S4, V5.S4]
	VLD1.P 16(R2), [V6.H8]
	WIDEN(6, 7)
	TILECOL0
	VLD1.P 16(R9), [V6.H8]
	WIDEN(6, 7)
	TILECOL1
	VLD1.P 16(R10), [V6.H8]
	WIDEN(6, 7)
	TILECOL2
	VLD1.P 16(R11), [V6.H8]
	WIDEN(6, 7)
	TILECOL3
	SUBS   $1, R4, R4
	BNE    loop3x4h

reduce3x4h:
	TILESTORE
	RET

// The eight-row kernels (dots1x8, dotsRows8): the row of x in V0, V1, the
// lane sums of output j in V(16+2j), V(17+2j), weight rows in V2..V15.

// ROWFMA adds the products of x with a weight row in lo, hi into the lane
// sums of one output.
#define ROWFMA(lo, hi, alo, ahi) \
	VFMLA lo, V0.S4, alo; \
	VFMLA hi, V1.S4, ahi

// ROWS8F32 is one step of the eight products: eight floats of x and of
// each weight row at a..h. ROWS8H is the same for 16-bit rows, which W
// (WIDEN or WIDENH) widens.
#define ROWS8F32(a, b, c, d, e, f, g, h) \
	VLD1.P 32(R0), [V0.S4, V1.S4]; \
	VLD1.P 32(a), [V2.S4, V3.S4]; \
	VLD1.P 32(b), [V4.S4, V5.S4]; \
	VLD1.P 32(c), [V6.S4, V7.S4]; \
	VLD1.P 32(d), [V8.S4, V9.S4]; \
	ROWFMA(V2.S4, V3.S4, V16.S4, V17.S4); \
	ROWFMA(V4.S4, V5.S4, V18.S4, V19.S4); \
	ROWFMA(V6.S4, V7.S4, V20.S4, V21.S4); \
	ROWFMA(V8.S4, V9.S4, V22.S4, V23.S4); \
	VLD1.P 32(e), [V10.S4, V11.S4]; \
	VLD1.P 32(f), [V12.S4, V13.S4]; \
	VLD1.P 32(g), [V14.S4, V15.S4]; \
	VLD1.P 32(h), [V2.S4, V3.S4]; \
	ROWFMA(V10.S4, V11.S4, V24.S4, V25.S4); \
	ROWFMA(V12.S4, V13.S4, V26.S4, V27.S4); \
	ROWFMA(V14.S4, V15.S4, V28.S4, V29.S4); \
	ROWFMA(V2.S4, V3.S4, V30.S4, V31.S4)

#define ROWS8H(W, a, b, c, d, e, f, g, h) \
	VLD1.P 32(R0), [V0.S4, V1.S4]; \
	VLD1.P 16(a), [V2.H8]; \
	VLD1.P 16(b), [V4.H8]; \
	VLD1.P 16(c), [V6.H8]; \
	VLD1.P 16(d), [V8.H8]; \
	W(2, 3); \
	W(4, 5); \
	W(6, 7); \
	W(8, 9); \
	ROWFMA(V2.S4, V3.S4, V16.S4, V17.S4); \
	ROWFMA(V4.S4, V5.S4, V18.S4, V19.S4); \
	ROWFMA(V6.S4, V7.S4, V20.S4, V21.S4); \
	ROWFMA(V8.S4, V9.S4, V22.S4, V23.S4); \
	VLD1.P 16(e), [V10.H8]; \
	VLD1.P 16(f), [V12.H8]; \
	VLD1.P 16(g), [V14.H8]; \
	VLD1.P 16(h), [V2.H8]; \
	W(10, 11); \
	W(12, 13); \
	W(14, 15); \
	W(2, 3); \
	ROWFMA(V10.S4, V11.S4, V24.S4, V25.S4); \
	ROWFMA(V12.S4, V13.S4, V26.S4, V27.S4); \
	ROWFMA(V14.S4, V15.S4, V28.S4, V29.S4); \
	ROWFMA(V2.S4, V3.S4, V30.S4, V31.S4)

// STORE8 reduces the eight outputs into V6, V7 and stores them at (R).
#define STORE8(R) \
	REDUCE4(6, 16, 17, 18, 19, 20, 21, 22, 23); \
	REDUCE4(7, 24, 25, 26, 27, 28, 29, 30, 31); \
	VST1   [V6.S4, V7.S4], (R)

// func dots1x8NEON(x *float32, w *float32, ldw int, nb int, dst *float32)
// dst[j] = dot(x, w[j*ldw:]) over 8*nb elements, j < 8: eight independent
// FMA chains while the weights stream in (the decode case).
TEXT ·dots1x8NEON(SB), NOSPLIT, $0-40
	ARGS1X8(2)
	CBZ R3, reduce1x8

loop1x8:
	// Each step reads 32 bytes of each of eight rows, so 256 bytes of the
	// next eight (contiguous) rows per step prefetch exactly them by the
	// end. Prefetches change no result.
	PRFM (R12), PLDL1KEEP
	PRFM 64(R12), PLDL1KEEP
	PRFM 128(R12), PLDL1KEEP
	PRFM 192(R12), PLDL1KEEP
	ADD  $256, R12
	ROWS8F32(R1, R5, R6, R7, R8, R9, R10, R11)
	SUBS $1, R3, R3
	BNE  loop1x8

reduce1x8:
	STORE8(R4)
	RET

// func dots1x8BF16NEON(x *float32, w *uint16, ldw int, nb int, dst *float32)
TEXT ·dots1x8BF16NEON(SB), NOSPLIT, $0-40
	ARGS1X8(1)
	CBZ R3, reduce1x8h

loop1x8h:
	PRFM (R12), PLDL1KEEP
	PRFM 64(R12), PLDL1KEEP
	ADD  $128, R12
	ROWS8H(WIDEN, R1, R5, R6, R7, R8, R9, R10, R11)
	SUBS $1, R3, R3
	BNE  loop1x8h

reduce1x8h:
	STORE8(R4)
	RET

// func dots1x1NEON(x *float32, w *float32, nb int) float32
TEXT ·dots1x1NEON(SB), NOSPLIT, $0-28
	MOVD x+0(FP), R0
	MOVD w+8(FP), R1
	MOVD nb+16(FP), R2
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	CBZ  R2, reduce1x1

loop1x1:
	VLD1.P 32(R0), [V2.S4, V3.S4]
	VLD1.P 32(R1), [V4.S4, V5.S4]
	VFMLA  V4.S4, V2.S4, V16.S4
	VFMLA  V5.S4, V3.S4, V17.S4
	SUBS   $1, R2, R2
	BNE    loop1x1

reduce1x1:
	REDUCE1(16, 17)
	FMOVS F0, ret+24(FP)
	RET

// func dots1x1BF16NEON(x *float32, w *uint16, nb int) float32
TEXT ·dots1x1BF16NEON(SB), NOSPLIT, $0-28
	MOVD x+0(FP), R0
	MOVD w+8(FP), R1
	MOVD nb+16(FP), R2
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	CBZ  R2, reduce1x1h

loop1x1h:
	VLD1.P 32(R0), [V2.S4, V3.S4]
	VLD1.P 16(R1), [V4.H8]
	WIDEN(4, 5)
	VFMLA  V4.S4, V2.S4, V16.S4
	VFMLA  V5.S4, V3.S4, V17.S4
	SUBS   $1, R2, R2
	BNE    loop1x1h

reduce1x1h:
	REDUCE1(16, 17)
	FMOVS F0, ret+24(FP)
	RET

// Attention kernels (see attnkern.go). Row j of the cache starts at
// w + rows[j]*ld*4 bytes; off is already added to w by the caller.

// func dotsRows8NEON(x *float32, w *float32, rows *int32, ld int, nb int, dst *float32)
TEXT ·dotsRows8NEON(SB), NOSPLIT, $0-48
	DOTSROWS8ARGS(2)
	CBZ R4, reduceRows8

loopRows8:
	ROWS8F32(R6, R7, R8, R9, R10, R11, R12, R13)
	SUBS $1, R4, R4
	BNE  loopRows8

reduceRows8:
	STORE8(R5)
	RET

// AXPYKEY broadcasts p[t] and points R7 at key t's value row.
#define AXPYKEY \
	VLD1R.P 4(R1), [V16.S4]; \
	MOVW.P  4(R3), R7; \
	MUL     R5, R7, R7; \
	ADD     R2, R7, R7

// FMA16F32 adds p[t] times the next 16 values of the row into a..d, FMA8F32
// the next 8 into a, b. The H forms read 16-bit values, which W widens
// (WIDEN for bf16, WIDENH for float16).
#define FMA16F32(a, b, c, d) \
	VLD1.P 64(R7), [V20.S4, V21.S4, V22.S4, V23.S4]; \
	VFMLA  V20.S4, V16.S4, a; \
	VFMLA  V21.S4, V16.S4, b; \
	VFMLA  V22.S4, V16.S4, c; \
	VFMLA  V23.S4, V16.S4, d

#define FMA8F32(a, b) \
	VLD1  (R7), [V20.S4, V21.S4]; \
	VFMLA V20.S4, V16.S4, a; \
	VFMLA V21.S4, V16.S4, b

#define FMA16H(W, a, b, c, d) \
	VLD1.P 32(R7), [V20.H8, V21.H8]; \
	W(20, 22); \
	W(21, 23); \
	VFMLA  V20.S4, V16.S4, a; \
	VFMLA  V22.S4, V16.S4, b; \
	VFMLA  V21.S4, V16.S4, c; \
	VFMLA  V23.S4, V16.S4, d

#define FMA8H(W, a, b) \
	VLD1  (R7), [V20.H8]; \
	W(20, 21); \
	VFMLA V20.S4, V16.S4, a; \
	VFMLA V21.S4, V16.S4, b

#define FMA16BF16(a, b, c, d) FMA16H(WIDEN, a, b, c, d)
#define FMA8BF16(a, b) FMA8H(WIDEN, a, b)
#define FMA16F16(a, b, c, d) FMA16H(WIDENH, a, b, c, d)
#define FMA8F16(a, b) FMA8H(WIDENH, a, b)

// acc[0:4k] lives in V0..V(k-1): LOADACCk loads it through R6, STOREACCk
// stores it through R0, and FMAROWk(K8, K16) adds one key's value row into
// it with a value type's FMA8 and FMA16 macros.
#define LOADACC2 VLD1 (R6), [V0.S4, V1.S4]
#define LOADACC4 VLD1 (R6), [V0.S4, V1.S4, V2.S4, V3.S4]
#define LOADACC8 \
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	VLD1   (R6), [V4.S4, V5.S4, V6.S4, V7.S4]
#define LOADACC12 \
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]; \
	VLD1   (R6), [V8.S4, V9.S4, V10.S4, V11.S4]
#define LOADACC16 \
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]; \
	VLD1.P 64(R6), [V8.S4, V9.S4, V10.S4, V11.S4]; \
	VLD1   (R6), [V12.S4, V13.S4, V14.S4, V15.S4]

#define STOREACC2 VST1 [V0.S4, V1.S4], (R0)
#define STOREACC4 VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R0)
#define STOREACC8 \
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0); \
	VST1   [V4.S4, V5.S4, V6.S4, V7.S4], (R0)
#define STOREACC12 \
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0); \
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0); \
	VST1   [V8.S4, V9.S4, V10.S4, V11.S4], (R0)
#define STOREACC16 \
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0); \
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0); \
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R0); \
	VST1   [V12.S4, V13.S4, V14.S4, V15.S4], (R0)

#define FMAROW2(K8, K16) K8(V0.S4, V1.S4)
#define FMAROW4(K8, K16) K16(V0.S4, V1.S4, V2.S4, V3.S4)
#define FMAROW8(K8, K16) \
	FMAROW4(K8, K16); \
	K16(V4.S4, V5.S4, V6.S4, V7.S4)
#define FMAROW12(K8, K16) \
	FMAROW8(K8, K16); \
	K16(V8.S4, V9.S4, V10.S4, V11.S4)
#define FMAROW16(K8, K16) \
	FMAROW12(K8, K16); \
	K16(V12.S4, V13.S4, V14.S4, V15.S4)

// func axpyRows16NEON(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The axpy kernel for acc[0:64].
TEXT ·axpyRows16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(2)
	LOADACC16
	CBZ R4, storeAxpy16

loopAxpy16:
	AXPYKEY
	FMAROW16(FMA8F32, FMA16F32)
	SUBS $1, R4, R4
	BNE  loopAxpy16

storeAxpy16:
	STOREACC16
	RET

// func axpyRows12NEON(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:48].
TEXT ·axpyRows12NEON(SB), NOSPLIT, $0-48
	AXPYARGS(2)
	LOADACC12
	CBZ R4, storeAxpy12

loopAxpy12:
	AXPYKEY
	FMAROW12(FMA8F32, FMA16F32)
	SUBS $1, R4, R4
	BNE  loopAxpy12

storeAxpy12:
	STOREACC12
	RET

// func axpyRows8NEON(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:32].
TEXT ·axpyRows8NEON(SB), NOSPLIT, $0-48
	AXPYARGS(2)
	LOADACC8
	CBZ R4, storeAxpy8

loopAxpy8:
	AXPYKEY
	FMAROW8(FMA8F32, FMA16F32)
	SUBS $1, R4, R4
	BNE  loopAxpy8

storeAxpy8:
	STOREACC8
	RET

// func axpyRows4NEON(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:16].
TEXT ·axpyRows4NEON(SB), NOSPLIT, $0-48
	AXPYARGS(2)
	LOADACC4
	CBZ R4, storeAxpy4

loopAxpy4:
	AXPYKEY
	FMAROW4(FMA8F32, FMA16F32)
	SUBS $1, R4, R4
	BNE  loopAxpy4

storeAxpy4:
	STOREACC4
	RET

// func axpyRows2NEON(acc *float32, p *float32, v *float32, rows *int32, n int, ld int)
// The same for acc[0:8].
TEXT ·axpyRows2NEON(SB), NOSPLIT, $0-48
	AXPYARGS(2)
	LOADACC2
	CBZ R4, storeAxpy2

loopAxpy2:
	AXPYKEY
	FMAROW2(FMA8F32, FMA16F32)
	SUBS $1, R4, R4
	BNE  loopAxpy2

storeAxpy2:
	STOREACC2
	RET

// The axpy kernels over a bf16 cache (a 16-bit KV cache, kv16.go).

// func axpyRows16BF16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:64], bf16 values.
TEXT ·axpyRows16BF16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC16
	CBZ R4, storeAxpy16BF16

loopAxpy16BF16:
	AXPYKEY
	FMAROW16(FMA8BF16, FMA16BF16)
	SUBS $1, R4, R4
	BNE  loopAxpy16BF16

storeAxpy16BF16:
	STOREACC16
	RET

// func axpyRows12BF16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:48], bf16 values.
TEXT ·axpyRows12BF16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC12
	CBZ R4, storeAxpy12BF16

loopAxpy12BF16:
	AXPYKEY
	FMAROW12(FMA8BF16, FMA16BF16)
	SUBS $1, R4, R4
	BNE  loopAxpy12BF16

storeAxpy12BF16:
	STOREACC12
	RET

// func axpyRows8BF16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:32], bf16 values.
TEXT ·axpyRows8BF16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC8
	CBZ R4, storeAxpy8BF16

loopAxpy8BF16:
	AXPYKEY
	FMAROW8(FMA8BF16, FMA16BF16)
	SUBS $1, R4, R4
	BNE  loopAxpy8BF16

storeAxpy8BF16:
	STOREACC8
	RET

// func axpyRows4BF16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:16], bf16 values.
TEXT ·axpyRows4BF16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC4
	CBZ R4, storeAxpy4BF16

loopAxpy4BF16:
	AXPYKEY
	FMAROW4(FMA8BF16, FMA16BF16)
	SUBS $1, R4, R4
	BNE  loopAxpy4BF16

storeAxpy4BF16:
	STOREACC4
	RET

// func axpyRows2BF16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:8], bf16 values.
TEXT ·axpyRows2BF16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC2
	CBZ R4, storeAxpy2BF16

loopAxpy2BF16:
	AXPYKEY
	FMAROW2(FMA8BF16, FMA16BF16)
	SUBS $1, R4, R4
	BNE  loopAxpy2BF16

storeAxpy2BF16:
	STOREACC2
	RET

// The axpy kernels over a float16 cache (a 16-bit KV cache, kv16.go).

// func axpyRows16F16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:64], float16 values.
TEXT ·axpyRows16F16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC16
	CBZ R4, storeAxpy16F16

loopAxpy16F16:
	AXPYKEY
	FMAROW16(FMA8F16, FMA16F16)
	SUBS $1, R4, R4
	BNE  loopAxpy16F16

storeAxpy16F16:
	STOREACC16
	RET

// func axpyRows12F16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:48], float16 values.
TEXT ·axpyRows12F16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC12
	CBZ R4, storeAxpy12F16

loopAxpy12F16:
	AXPYKEY
	FMAROW12(FMA8F16, FMA16F16)
	SUBS $1, R4, R4
	BNE  loopAxpy12F16

storeAxpy12F16:
	STOREACC12
	RET

// func axpyRows8F16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:32], float16 values.
TEXT ·axpyRows8F16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC8
	CBZ R4, storeAxpy8F16

loopAxpy8F16:
	AXPYKEY
	FMAROW8(FMA8F16, FMA16F16)
	SUBS $1, R4, R4
	BNE  loopAxpy8F16

storeAxpy8F16:
	STOREACC8
	RET

// func axpyRows4F16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:16], float16 values.
TEXT ·axpyRows4F16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC4
	CBZ R4, storeAxpy4F16

loopAxpy4F16:
	AXPYKEY
	FMAROW4(FMA8F16, FMA16F16)
	SUBS $1, R4, R4
	BNE  loopAxpy4F16

storeAxpy4F16:
	STOREACC4
	RET

// func axpyRows2F16NEON(acc *float32, p *float32, v *uint16, rows *int32, n int, ld int)
// The same for acc[0:8], float16 values.
TEXT ·axpyRows2F16NEON(SB), NOSPLIT, $0-48
	AXPYARGS(1)
	LOADACC2
	CBZ R4, storeAxpy2F16

loopAxpy2F16:
	AXPYKEY
	FMAROW2(FMA8F16, FMA16F16)
	SUBS $1, R4, R4
	BNE  loopAxpy2F16

storeAxpy2F16:
	STOREACC2
	RET

// func dotsRows8BF16NEON(x *float32, w *uint16, rows *int32, ld int, nb int, dst *float32)
// dotsRows8NEON over a bf16 cache.
TEXT ·dotsRows8BF16NEON(SB), NOSPLIT, $0-48
	DOTSROWS8ARGS(1)
	CBZ R4, reduceRows8BF16

loopRows8BF16:
	ROWS8H(WIDEN, R6, R7, R8, R9, R10, R11, R12, R13)
	SUBS $1, R4, R4
	BNE  loopRows8BF16

reduceRows8BF16:
	STORE8(R5)
	RET

// func dotsRows8F16NEON(x *float32, w *uint16, rows *int32, ld int, nb int, dst *float32)
// dotsRows8NEON over a float16 cache.
TEXT ·dotsRows8F16NEON(SB), NOSPLIT, $0-48
	DOTSROWS8ARGS(1)
	CBZ R4, reduceRows8F16

loopRows8F16:
	ROWS8H(WIDENH, R6, R7, R8, R9, R10, R11, R12, R13)
	SUBS $1, R4, R4
	BNE  loopRows8F16

reduceRows8F16:
	STORE8(R5)
	RET

// The six-row axpy kernels (attnkern.go's axpyRows6) for 16 columns: for
// r < 6, acc[r*step+d] = fma(p[r*attnBlock+t], v[rows[t]*ld+d],
// acc[r*step+d]) for d < 16, keys t in order, each value row read once for
// the six rows. The six accumulators of 16 floats fill V0..V23; the value
// row is in V24..V27 (VROW*, widened where it is 16-bit), and p's weights
// are broadcast into V28, V29 in turn.
#define LOAD6 \
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]; \
	VLD1 (R7), [V4.S4, V5.S4, V6.S4, V7.S4]; \
	VLD1 (R8), [V8.S4, V9.S4, V10.S4, V11.S4]; \
	VLD1 (R9), [V12.S4, V13.S4, V14.S4, V15.S4]; \
	VLD1 (R10), [V16.S4, V17.S4, V18.S4, V19.S4]; \
	VLD1 (R11), [V20.S4, V21.S4, V22.S4, V23.S4]

#define STORE6 \
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R0); \
	VST1 [V4.S4, V5.S4, V6.S4, V7.S4], (R7); \
	VST1 [V8.S4, V9.S4, V10.S4, V11.S4], (R8); \
	VST1 [V12.S4, V13.S4, V14.S4, V15.S4], (R9); \
	VST1 [V16.S4, V17.S4, V18.S4, V19.S4], (R10); \
	VST1 [V20.S4, V21.S4, V22.S4, V23.S4], (R11)

#define VROWF32 \
	VLD1 (R13), [V24.S4, V25.S4, V26.S4, V27.S4]

#define VROWBF16 \
	VLD1 (R13), [V30.H8, V31.H8]; \
	SHLL16(24, 30); \
	SHLL216(25, 30); \
	SHLL16(26, 31); \
	SHLL216(27, 31)

#define VROWF16 \
	VLD1 (R13), [V30.H8, V31.H8]; \
	FCVTL16(24, 30); \
	FCVTL216(25, 30); \
	FCVTL16(26, 31); \
	FCVTL216(27, 31)

// PROW broadcasts the next row's weight for this key (R14 walks p's rows)
// into register bc and adds it times the value row into a..d.
#define PROW(bc, a, b, c, d) \
	VLD1R.P (R14)(R15), [bc.S4]; \
	VFMLA   V24.S4, bc.S4, a; \
	VFMLA   V25.S4, bc.S4, b; \
	VFMLA   V26.S4, bc.S4, c; \
	VFMLA   V27.S4, bc.S4, d

// AXPY6KEY points R13 at key t's value row, loads it with VROW, and adds
// it into the six accumulators.
#define AXPY6KEY(VROW) \
	MOVW.P 4(R4), R13; \
	MUL    R6, R13, R13; \
	ADD    R3, R13, R13; \
	VROW; \
	MOVD   R2, R14; \
	PROW(V28, V0.S4, V1.S4, V2.S4, V3.S4); \
	PROW(V29, V4.S4, V5.S4, V6.S4, V7.S4); \
	PROW(V28, V8.S4, V9.S4, V10.S4, V11.S4); \
	PROW(V29, V12.S4, V13.S4, V14.S4, V15.S4); \
	PROW(V28, V16.S4, V17.S4, V18.S4, V19.S4); \
	PROW(V29, V20.S4, V21.S4, V22.S4, V23.S4); \
	ADD    $4, R2

// func axpy6x16NEON(acc *float32, step int, p *float32, v *float32, rows *int32, n int, ld int)
TEXT ·axpy6x16NEON(SB), NOSPLIT, $0-56
	AXPY6ARGS(2)
	LOAD6
	CBZ R5, store6x16

loop6x16:
	AXPY6KEY(VROWF32)
	SUBS $1, R5, R5
	BNE  loop6x16

store6x16:
	STORE6
	RET

// func axpy6x16BF16NEON(acc *float32, step int, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpy6x16BF16NEON(SB), NOSPLIT, $0-56
	AXPY6ARGS(1)
	LOAD6
	CBZ R5, store6x16BF16

loop6x16BF16:
	AXPY6KEY(VROWBF16)
	SUBS $1, R5, R5
	BNE  loop6x16BF16

store6x16BF16:
	STORE6
	RET

// func axpy6x16F16NEON(acc *float32, step int, p *float32, v *uint16, rows *int32, n int, ld int)
TEXT ·axpy6x16F16NEON(SB), NOSPLIT, $0-56
	AXPY6ARGS(1)
	LOAD6
	CBZ R5, store6x16F16

loop6x16F16:
	AXPY6KEY(VROWF16)
	SUBS $1, R5, R5
	BNE  loop6x16F16

store6x16F16:
	STORE6
	RET

// func dots1x1F16NEON(x *float32, w *uint16, nb int) float32
// dots1x1NEON over float16 values (one key of a float16 cache).
TEXT ·dots1x1F16NEON(SB), NOSPLIT, $0-28
	MOVD x+0(FP), R0
	MOVD w+8(FP), R1
	MOVD nb+16(FP), R2
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	CBZ  R2, reduce1x1f16

loop1x1f16:
	VLD1.P 32(R0), [V2.S4, V3.S4]
	VLD1.P 16(R1), [V4.H8]
	WIDENH(4, 5)
	VFMLA  V4.S4, V2.S4, V16.S4
	VFMLA  V5.S4, V3.S4, V17.S4
	SUBS   $1, R2, R2
	BNE    loop1x1f16

reduce1x1f16:
	REDUCE1(16, 17)
	FMOVS F0, ret+24(FP)
	RET

// func prefetchRowsNEON(w unsafe.Pointer, rows *int32, n, stride, lines int)
// Prefetches lines 64-byte lines from w + rows[i]*stride bytes on, for
// each of the n rows. Changes no result.
TEXT ·prefetchRowsNEON(SB), NOSPLIT, $0-40
	MOVD w+0(FP), R1
	MOVD rows+8(FP), R2
	MOVD n+16(FP), R4
	MOVD stride+24(FP), R3
	MOVD lines+32(FP), R5
	CBZ  R4, prefetchDone

prefetchRow:
	MOVW.P 4(R2), R6
	MUL    R3, R6, R6
	ADD    R1, R6, R6
	MOVD   R5, R7

prefetchLine:
	PRFM (R6), PLDL1KEEP
	ADD  $64, R6
	SUBS $1, R7, R7
	BNE  prefetchLine
	SUBS $1, R4, R4
	BNE  prefetchRow

prefetchDone:
	RET

// BCAST sets the four lanes of V to the float32 bit pattern C.
#define BCAST(C, V) \
	MOVW $C, R9; \
	VDUP R9, V.S4

// FSUB Vd.4S, Vn.4S, Vm.4S: d = n-m
#define FSUB4S(d, n, m) WORD $(0x4EA0D400 | ((m)<<16) | ((n)<<5) | (d))

// EXPCONSTS loads expNeg's constants (exp.go) into V16..V27, the registers
// EXPNEG8 reads.
#define EXPCONSTS \
	BCAST(0xc2aeac4f, V16); \
	BCAST(0x3fb8aa3b, V17); \
	BCAST(0xbf318000, V18); \
	BCAST(0x395e8083, V19); \
	BCAST(0x39506967, V20); \
	BCAST(0x3ab743ce, V21); \
	BCAST(0x3c088908, V22); \
	BCAST(0x3d2aa9c1, V23); \
	BCAST(0x3e2aaaaa, V24); \
	BCAST(0x3f000000, V25); \
	BCAST(0x3f800000, V26); \
	BCAST(0x42fe0000, V27)

// HORNER is one Horner step of expNeg on both halves: the step's constant
// c is copied into the registers that receive the step (FMLA adds into its
// destination), then dA = fma(sA, rA, c), dB = fma(sB, rB, c), with r in
// V0, V1.
#define HORNER(c, sA, sB, dA, dB) \
	VMOV  c.B16, dA.B16; \
	VMOV  c.B16, dB.B16; \
	VFMLA sA.S4, V0.S4, dA.S4; \
	VFMLA sB.S4, V1.S4, dB.S4

// EXPNEG8 sets V4, V5 = expNeg(V0, V1), eight lanes, in expNeg's order of
// operations: x = max(x, expLo); n = x·log2 e rounded to the nearest
// integer, ties to even; r = fma(n, -ln2 hi, x), then fma(n, -ln2 lo, r);
// the polynomial by Horner from c0, alternating between V4, V5 and V6, V7;
// and the power of two n+127 (exact) shifted into the exponent. The
// constants are those of EXPCONSTS: V16 expLo, V17 log2 e, V18 -ln2 hi,
// V19 -ln2 lo, V20..V25 c0..c5, V26 1, V27 127. V0..V3, V6, V7 are
// overwritten.
#define EXPNEG8 \
	FMAX4S(0, 0, 16); \
	FMAX4S(1, 1, 16); \
	FMUL4S(2, 0, 17); \
	FMUL4S(3, 1, 17); \
	FRINTN4S(2, 2); \
	FRINTN4S(3, 3); \
	VFMLA  V18.S4, V2.S4, V0.S4; \
	VFMLA  V18.S4, V3.S4, V1.S4; \
	VFMLA  V19.S4, V2.S4, V0.S4; \
	VFMLA  V19.S4, V3.S4, V1.S4; \
	HORNER(V21, V20, V20, V4, V5); \
	HORNER(V22, V4, V5, V6, V7); \
	HORNER(V23, V6, V7, V4, V5); \
	HORNER(V24, V4, V5, V6, V7); \
	HORNER(V25, V6, V7, V4, V5); \
	HORNER(V26, V4, V5, V6, V7); \
	HORNER(V26, V6, V7, V4, V5); \
	FADD4S(2, 2, 27); \
	FADD4S(3, 3, 27); \
	FCVTZS4S(2, 2); \
	FCVTZS4S(3, 3); \
	VSHL   $23, V2.S4, V2.S4; \
	VSHL   $23, V3.S4, V3.S4; \
	FMUL4S(4, 4, 2); \
	FMUL4S(5, 5, 3)

// func expShiftNEON(x *float32, n int, m float32)
// x[i] = expNeg(x[i] - m) for i < 8*n, eight at a time.
TEXT ·expShiftNEON(SB), NOSPLIT, $0-20
	MOVD  x+0(FP), R0
	MOVD  n+8(FP), R1
	FMOVS m+16(FP), F28
	VDUP  V28.S[0], V28.S4
	EXPCONSTS
	CBZ   R1, expDone

expLoop:
	VLD1   (R0), [V0.S4, V1.S4]
	FSUB4S(0, 0, 28)
	FSUB4S(1, 1, 28)
	EXPNEG8
	VST1.P [V4.S4, V5.S4], 32(R0)
	SUBS   $1, R1, R1
	BNE    expLoop

expDone:
	RET

// GATEMUL is the loop of a gated product, dst[i] = g[i]·σ(z)·u[i], eight
// at a time: g in V8, V9, z from ZLOAD in V14, V15 (ZLOAD may use V12,
// V13), then in the order of sigmoid (exp.go): e = expNeg(-|z|),
// r = 1/(1+e), s = e·r where z's sign bit is set and r elsewhere, 0 where
// z < expLo, then (g·s)·u. R0 is dst, R1 gate, R2 up, R3 the groups of
// eight.
#define GATEMUL(ZLOAD) \
	EXPCONSTS; \
	BCAST(0x80000000, V28); \
	VEOR V29.B16, V29.B16, V29.B16; \
	CBZ  R3, done; \
loop: \
	VLD1.P 32(R1), [V8.S4, V9.S4]; \
	ZLOAD; \
	VORR   V28.B16, V14.B16, V0.B16; \
	VORR   V28.B16, V15.B16, V1.B16; \
	EXPNEG8; \
	FADD4S(10, 4, 26); \
	FADD4S(11, 5, 26); \
	FDIV4S(10, 26, 10); \
	FDIV4S(11, 26, 11); \
	FMUL4S(4, 4, 10); \
	FMUL4S(5, 5, 11); \
	VCMTST V28.S4, V14.S4, V12.S4; \
	VCMTST V28.S4, V15.S4, V13.S4; \
	VBIT   V12.B16, V4.B16, V10.B16; \
	VBIT   V13.B16, V5.B16, V11.B16; \
	FCMGT4S(12, 16, 14); \
	FCMGT4S(13, 16, 15); \
	VBIT   V12.B16, V29.B16, V10.B16; \
	VBIT   V13.B16, V29.B16, V11.B16; \
	FMUL4S(10, 8, 10); \
	FMUL4S(11, 9, 11); \
	VLD1.P 32(R2), [V14.S4, V15.S4]; \
	FMUL4S(10, 10, 14); \
	FMUL4S(11, 11, 15); \
	VST1.P [V10.S4, V11.S4], 32(R0); \
	SUBS   $1, R3, R3; \
	BNE    loop; \
done: \
	RET

// SILUZ: silu's argument of σ is g itself.
#define SILUZ \
	VMOV V8.B16, V14.B16; \
	VMOV V9.B16, V15.B16

// GELUZ is geluZ (exp.go), with V30 = 0.044715 and V31 = 2c: a = g·g,
// b = 1 + 0.044715·a, z = (2c·g)·b.
#define GELUZ \
	FMUL4S(14, 8, 8); \
	FMUL4S(15, 9, 9); \
	FMUL4S(14, 14, 30); \
	FMUL4S(15, 15, 30); \
	FADD4S(14, 14, 26); \
	FADD4S(15, 15, 26); \
	FMUL4S(12, 8, 31); \
	FMUL4S(13, 9, 31); \
	FMUL4S(14, 12, 14); \
	FMUL4S(15, 13, 15)

// func siluMulNEON(dst, gate, up *float32, n int)
// dst[i] = silu(g[i])·u[i] for i < 8*n, eight at a time, as siluMulGo.
TEXT ·siluMulNEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD gate+8(FP), R1
	MOVD up+16(FP), R2
	MOVD n+24(FP), R3
	GATEMUL(SILUZ)

// func geluMulNEON(dst, gate, up *float32, n int)
// dst[i] = gelu(g[i])·u[i] for i < 8*n, eight at a time, as geluMulGo.
TEXT ·geluMulNEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	MOVD gate+8(FP), R1
	MOVD up+16(FP), R2
	MOVD n+24(FP), R3
	BCAST(0x3d372713, V30)
	BCAST(0x3fcc422a, V31)
	GATEMUL(GELUZ)

// func scaleMaxNEON(x *float32, n int, s float32) float32
// x[i] *= s for i < 8*n, eight at a time, and returns the largest product
// (a maximum is exact, so the order it is taken in does not matter).
TEXT ·scaleMaxNEON(SB), NOSPLIT, $0-28
	MOVD  x+0(FP), R0
	MOVD  n+8(FP), R1
	FMOVS s+16(FP), F1
	VDUP  V1.S[0], V1.S4
	BCAST(0xff800000, V2) // -Inf
	VMOV  V2.B16, V3.B16
	CBZ   R1, scaleMaxDone

scaleMaxLoop:
	VLD1   (R0), [V4.S4, V5.S4]
	FMUL4S(4, 4, 1)
	FMUL4S(5, 5, 1)
	VST1.P [V4.S4, V5.S4], 32(R0)
	FMAX4S(2, 2, 4)
	FMAX4S(3, 3, 5)
	SUBS   $1, R1, R1
	BNE    scaleMaxLoop

scaleMaxDone:
	FMAX4S(2, 2, 3)
	VEXT  $8, V2.B16, V2.B16, V3.B16
	FMAX4S(2, 2, 3)
	VDUP  V2.S[1], V3
	FMAXS F3, F2, F2
	FMOVS F2, ret+24(FP)
	RET
