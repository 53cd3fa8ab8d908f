// avx512_amd64.h: the macros and tables that the AVX-512 kernels of
// dot_avx512_amd64.s (float32 and bf16 weights, float32 KV) and
// kv16_avx512_amd64.s (16-bit KV) share: the 6×8 tile's arguments, pairs,
// zeroing, reduction and frame (TILE), and the six-row attention axpy
// (AXPY6X64/32/16, which take the value row's load as an argument).

// REDUCE8 reduces the eight accumulators A0..A7 of one row pair (weight
// rows 0..7) and stores the sixteen sums: row 2p's eight at (DX), row
// 2p+1's at (DX)(R11*1). Each sum follows the tree of dot.go,
// ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7)), but eight accumulators go
// through each level together: the first level adds the 128-bit quarters
// s0..s3 and s4..s7 of two accumulators at once, the second adds lanes 0,1
// to lanes 2,3 of four, the third adds lane 0 to lane 1 of eight, and a
// final permutation (Z29, permRows) puts the sums in column order.
// Y0 is A0's low half. Z24 and Z25 are scratch; A0..A3 end up holding
// partial results.
#define REDUCE8(A0, A1, A2, A3, A4, A5, A6, A7, Y0) \
	VSHUFF32X4 $0x88, A1, A0, Z24; \
	VSHUFF32X4 $0xDD, A1, A0, Z25; \
	VADDPS     Z25, Z24, A0; \
	VSHUFF32X4 $0x88, A3, A2, Z24; \
	VSHUFF32X4 $0xDD, A3, A2, Z25; \
	VADDPS     Z25, Z24, A1; \
	VSHUFF32X4 $0x88, A5, A4, Z24; \
	VSHUFF32X4 $0xDD, A5, A4, Z25; \
	VADDPS     Z25, Z24, A2; \
	VSHUFF32X4 $0x88, A7, A6, Z24; \
	VSHUFF32X4 $0xDD, A7, A6, Z25; \
	VADDPS     Z25, Z24, A3; \
	VSHUFPS    $0x44, A1, A0, Z24; \
	VSHUFPS    $0xEE, A1, A0, Z25; \
	VADDPS     Z25, Z24, A0; \
	VSHUFPS    $0x44, A3, A2, Z24; \
	VSHUFPS    $0xEE, A3, A2, Z25; \
	VADDPS     Z25, Z24, A1; \
	VSHUFPS    $0x88, A1, A0, Z24; \
	VSHUFPS    $0xDD, A1, A0, Z25; \
	VADDPS     Z25, Z24, A0; \
	VPERMPS    A0, Z29, A0; \
	VMOVUPS    Y0, (DX); \
	VEXTRACTF32X8 $1, A0, (DX)(R11*1)

// permRows maps the reduced sums to column order. After REDUCE8's third
// level, quarter 0 holds row 2p's sums for weight rows 0, 2, 4, 6, quarter
// 1 row 2p+1's for the same, quarters 2 and 3 those for rows 1, 3, 5, 7.
DATA permRows<>+0(SB)/4, $0
DATA permRows<>+4(SB)/4, $8
DATA permRows<>+8(SB)/4, $1
DATA permRows<>+12(SB)/4, $9
DATA permRows<>+16(SB)/4, $2
DATA permRows<>+20(SB)/4, $10
DATA permRows<>+24(SB)/4, $3
DATA permRows<>+28(SB)/4, $11
DATA permRows<>+32(SB)/4, $4
DATA permRows<>+36(SB)/4, $12
DATA permRows<>+40(SB)/4, $5
DATA permRows<>+44(SB)/4, $13
DATA permRows<>+48(SB)/4, $6
DATA permRows<>+52(SB)/4, $14
DATA permRows<>+56(SB)/4, $7
DATA permRows<>+60(SB)/4, $15
GLOBL permRows<>(SB), RODATA|NOPTR, $64

// PAIR loads eight floats of row A into the low half of Z and eight of row
// B into its high half.
#define PAIR(A, B, Y, Z) \
	VMOVUPS      A, Y; \
	VINSERTF32X8 $1, B, Z, Z

// TILEARGS loads a 6×8 tile kernel's arguments: SI x, R8 ldx, DI w, R9
// ldw, CX nb, DX dst, R11 ldd, strides in bytes (a weight is 1<<WSHIFT
// bytes); R12 = 3*ldx, R13 = x's row 4, R10 = 3*ldw, BX = w's row 4.
#define TILEARGS(WSHIFT) \
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
	LEAQ (R8)(R8*2), R12; \
	LEAQ (SI)(R8*4), R13; \
	LEAQ (R9)(R9*2), R10; \
	LEAQ (DI)(R9*4), BX

// ZERO8 clears the accumulators Z0..Z7 (one row pair), ZERO24 Z0..Z23.
#define ZERO8 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7

#define ZERO24 \
	ZERO8; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17; \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

// REDUCE2X8 reduces one row pair's accumulators and stores its 2×8 sums;
// REDUCE6X8 reduces three row pairs' and stores the 6×8 sums at DX, rows
// R11 bytes apart.
#define REDUCE2X8 \
	VMOVDQU32 permRows<>(SB), Z29; \
	REDUCE8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Y0)

#define REDUCE6X8 \
	REDUCE2X8; \
	LEAQ (DX)(R11*2), DX; \
	REDUCE8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Y8); \
	LEAQ (DX)(R11*2), DX; \
	REDUCE8(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Y16)

// TILE is a whole tile kernel: the arguments (TILEARGS, weights of
// 1<<WSHIFT bytes), INIT (WIDENCTL, the bf16 shuffle control; XBF16, the
// bf16 x strides; either followed by NEXT, as WIDENCTL_NEXT and
// XBF16_NEXT; NEXT alone; or NONE), ZERO accumulators, nb steps of PF (a
// prefetch, or NONE) and BODY, then REDUCE.
#define TILE(WSHIFT, INIT, ZERO, PF, BODY, REDUCE) \
	TILEARGS(WSHIFT); \
	INIT; \
	ZERO; \
	TESTQ CX, CX; \
	JZ    reduce; \
loop: \
	PF; \
	BODY; \
	DECQ CX; \
	JNZ  loop; \
reduce: \
	REDUCE; \
	VZEROUPPER; \
	RET

// NONE is an empty INIT or PF of TILE.
#define NONE

// The six-row axpy of attention (attnkern.go): AXPYARGS, VROW, LOAD6 and
// STORE6, which the AVX2 kernel shares, are in axpy6_amd64.h.
#include "axpy6_amd64.h"

// PROWk adds one row's weight for key t (at OFF(SI), broadcast into ZB)
// times the value row held in Z24..Z(23+k) to that row's k accumulators.
#define PROW1(OFF, ZB, A0) \
	VBROADCASTSS OFF(SI), ZB; \
	VFMADD231PS  Z24, ZB, A0

#define PROW2(OFF, ZB, A0, A1) \
	PROW1(OFF, ZB, A0); \
	VFMADD231PS Z25, ZB, A1

#define PROW4(OFF, ZB, A0, A1, A2, A3) \
	PROW2(OFF, ZB, A0, A1); \
	VFMADD231PS Z26, ZB, A2; \
	VFMADD231PS Z27, ZB, A3

// LOADZ is the float32 W of the AXPY6X kernels.
#define LOADZ(M, Z) VMOVUPS M, Z

// AXPY6X64, AXPY6X32 and AXPY6X16 are whole six-row axpy kernels over 64,
// 32 and 16 columns: the accumulators of the six rows are loaded, then for
// each key its value row is loaded by W (LOADZ for float32, a widening for
// 16-bit values; sixteen values per register, the registers O1, O2, O3
// bytes after the first) and the six rows' weights times it are added.
// VSHIFT is AXPYARGS's: $2 for float32 values, $1 for 16-bit.
#define AXPY6X64(VSHIFT, W, O1, O2, O3) \
	AXPYARGS(VSHIFT); \
	LOAD6(0, Z0, Z4, Z8, Z12, Z16, Z20); \
	LOAD6(64, Z1, Z5, Z9, Z13, Z17, Z21); \
	LOAD6(128, Z2, Z6, Z10, Z14, Z18, Z22); \
	LOAD6(192, Z3, Z7, Z11, Z15, Z19, Z23); \
	TESTQ CX, CX; \
	JZ    done; \
loop: \
	VROW; \
	W((AX), Z24); \
	W(O1(AX), Z25); \
	W(O2(AX), Z26); \
	W(O3(AX), Z27); \
	PROW4(0, Z28, Z0, Z1, Z2, Z3); \
	PROW4(256, Z29, Z4, Z5, Z6, Z7); \
	PROW4(512, Z28, Z8, Z9, Z10, Z11); \
	PROW4(768, Z29, Z12, Z13, Z14, Z15); \
	PROW4(1024, Z28, Z16, Z17, Z18, Z19); \
	PROW4(1280, Z29, Z20, Z21, Z22, Z23); \
	ADDQ  $4, SI; \
	DECQ  CX; \
	JNZ   loop; \
done: \
	STORE6(0, Z0, Z4, Z8, Z12, Z16, Z20); \
	STORE6(64, Z1, Z5, Z9, Z13, Z17, Z21); \
	STORE6(128, Z2, Z6, Z10, Z14, Z18, Z22); \
	STORE6(192, Z3, Z7, Z11, Z15, Z19, Z23); \
	VZEROUPPER; \
	RET

#define AXPY6X32(VSHIFT, W, O1) \
	AXPYARGS(VSHIFT); \
	LOAD6(0, Z0, Z2, Z4, Z6, Z8, Z10); \
	LOAD6(64, Z1, Z3, Z5, Z7, Z9, Z11); \
	TESTQ CX, CX; \
	JZ    done; \
loop: \
	VROW; \
	W((AX), Z24); \
	W(O1(AX), Z25); \
	PROW2(0, Z28, Z0, Z1); \
	PROW2(256, Z29, Z2, Z3); \
	PROW2(512, Z28, Z4, Z5); \
	PROW2(768, Z29, Z6, Z7); \
	PROW2(1024, Z28, Z8, Z9); \
	PROW2(1280, Z29, Z10, Z11); \
	ADDQ  $4, SI; \
	DECQ  CX; \
	JNZ   loop; \
done: \
	STORE6(0, Z0, Z2, Z4, Z6, Z8, Z10); \
	STORE6(64, Z1, Z3, Z5, Z7, Z9, Z11); \
	VZEROUPPER; \
	RET

#define AXPY6X16(VSHIFT, W) \
	AXPYARGS(VSHIFT); \
	LOAD6(0, Z0, Z1, Z2, Z3, Z4, Z5); \
	TESTQ CX, CX; \
	JZ    done; \
loop: \
	VROW; \
	W((AX), Z24); \
	PROW1(0, Z28, Z0); \
	PROW1(256, Z29, Z1); \
	PROW1(512, Z28, Z2); \
	PROW1(768, Z29, Z3); \
	PROW1(1024, Z28, Z4); \
	PROW1(1280, Z29, Z5); \
	ADDQ  $4, SI; \
	DECQ  CX; \
	JNZ   loop; \
done: \
	STORE6(0, Z0, Z1, Z2, Z3, Z4, Z5); \
	VZEROUPPER; \
	RET
