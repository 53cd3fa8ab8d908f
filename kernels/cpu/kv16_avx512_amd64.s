//go:build amd64 && !purego

#include "textflag.h"

// Attention's six-row axpy (dot_avx512_amd64.s's axpy6x*AVX512) over a
// 16-bit KV cache: each value row is widened as it is loaded, sixteen
// values into a ZMM register (WIDENB: zero-extend and shift, bfloat16;
// WIDENH: VCVTPH2PS, float16; both exact), then the same fused
// multiply-adds in the same order as over float32.

#define WIDENB(M, Z) \
	VPMOVZXWD M, Z; \
	VPSLLD    $16, Z, Z

#define WIDENH(M, Z) \
	VCVTPH2PS M, Z

// As in dot_avx512_amd64.s, with the value rows' stride in 2-byte units:
// DI acc, R8 step in bytes (R11 3·step, R12 row 4's slot), SI p, DX v,
// BX rows, CX n, R9 ld in bytes.
#define AXPYARGS \
	MOVQ acc+0(FP), DI; \
	MOVQ step+8(FP), R8; \
	MOVQ p+16(FP), SI; \
	MOVQ v+24(FP), DX; \
	MOVQ rows+32(FP), BX; \
	MOVQ n+40(FP), CX; \
	MOVQ ld+48(FP), R9; \
	SHLQ $2, R8; \
	SHLQ $1, R9; \
	LEAQ (R8)(R8*2), R11; \
	LEAQ (DI)(R8*4), R12

#define VROW \
	MOVLQSX (BX), AX; \
	IMULQ   R9, AX; \
	ADDQ    DX, AX; \
	ADDQ    $4, BX

#define LOAD6(OFF, A0, A1, A2, A3, A4, A5) \
	VMOVUPS OFF(DI), A0; \
	VMOVUPS OFF(DI)(R8*1), A1; \
	VMOVUPS OFF(DI)(R8*2), A2; \
	VMOVUPS OFF(DI)(R11*1), A3; \
	VMOVUPS OFF(R12), A4; \
	VMOVUPS OFF(R12)(R8*1), A5

#define STORE6(OFF, A0, A1, A2, A3, A4, A5) \
	VMOVUPS A0, OFF(DI); \
	VMOVUPS A1, OFF(DI)(R8*1); \
	VMOVUPS A2, OFF(DI)(R8*2); \
	VMOVUPS A3, OFF(DI)(R11*1); \
	VMOVUPS A4, OFF(R12); \
	VMOVUPS A5, OFF(R12)(R8*1)

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

#define AXPY6X64(W) \
	AXPYARGS; \
	LOAD6(0, Z0, Z4, Z8, Z12, Z16, Z20); \
	LOAD6(64, Z1, Z5, Z9, Z13, Z17, Z21); \
	LOAD6(128, Z2, Z6, Z10, Z14, Z18, Z22); \
	LOAD6(192, Z3, Z7, Z11, Z15, Z19, Z23); \
	TESTQ CX, CX; \
	JZ    done; \
loop: \
	VROW; \
	W((AX), Z24); \
	W(32(AX), Z25); \
	W(64(AX), Z26); \
	W(96(AX), Z27); \
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

#define AXPY6X32(W) \
	AXPYARGS; \
	LOAD6(0, Z0, Z2, Z4, Z6, Z8, Z10); \
	LOAD6(64, Z1, Z3, Z5, Z7, Z9, Z11); \
	TESTQ CX, CX; \
	JZ    done; \
loop: \
	VROW; \
	W((AX), Z24); \
	W(32(AX), Z25); \
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

#define AXPY6X16(W) \
	AXPYARGS; \
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

// The 6×8 tile of dot_avx512_amd64.s (dots6x8AVX512, which says how two
// rows share a ZMM register and how REDUCE8 sums them) over float16
// weights: COLF widens the eight halves of a key row into the low half of
// ZW and copies them to its high half, then the same FMAs. Its macros are
// repeated here: a .s file sees only its own.
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

DATA kvPermRows<>+0(SB)/4, $0
DATA kvPermRows<>+4(SB)/4, $8
DATA kvPermRows<>+8(SB)/4, $1
DATA kvPermRows<>+12(SB)/4, $9
DATA kvPermRows<>+16(SB)/4, $2
DATA kvPermRows<>+20(SB)/4, $10
DATA kvPermRows<>+24(SB)/4, $3
DATA kvPermRows<>+28(SB)/4, $11
DATA kvPermRows<>+32(SB)/4, $4
DATA kvPermRows<>+36(SB)/4, $12
DATA kvPermRows<>+40(SB)/4, $5
DATA kvPermRows<>+44(SB)/4, $13
DATA kvPermRows<>+48(SB)/4, $6
DATA kvPermRows<>+52(SB)/4, $14
DATA kvPermRows<>+56(SB)/4, $7
DATA kvPermRows<>+60(SB)/4, $15
GLOBL kvPermRows<>(SB), RODATA|NOPTR, $64

#define PAIR(A, B, Y, Z) \
	VMOVUPS      A, Y; \
	VINSERTF32X8 $1, B, Z, Z

#define COLF(M, YW, ZW, A0, A1, A2) \
	VCVTPH2PS    M, YW; \
	VINSERTF32X8 $1, YW, ZW, ZW; \
	VFMADD231PS  ZW, Z24, A0; \
	VFMADD231PS  ZW, Z25, A1; \
	VFMADD231PS  ZW, Z26, A2

#define TILEARGS \
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
	LEAQ (R8)(R8*2), R12; \
	LEAQ (SI)(R8*4), R13; \
	LEAQ (R9)(R9*2), R10; \
	LEAQ (DI)(R9*4), BX

#define ZERO24 \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
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

// func axpy6x64BF16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x64BF16AVX512(SB), NOSPLIT, $0-56
	AXPY6X64(WIDENB)

// func axpy6x64F16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x64F16AVX512(SB), NOSPLIT, $0-56
	AXPY6X64(WIDENH)

// func axpy6x32BF16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x32BF16AVX512(SB), NOSPLIT, $0-56
	AXPY6X32(WIDENB)

// func axpy6x32F16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x32F16AVX512(SB), NOSPLIT, $0-56
	AXPY6X32(WIDENH)

// func axpy6x16BF16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x16BF16AVX512(SB), NOSPLIT, $0-56
	AXPY6X16(WIDENB)

// func axpy6x16F16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x16F16AVX512(SB), NOSPLIT, $0-56
	AXPY6X16(WIDENH)

// func dots6x8F16AVX512(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots6x8F16AVX512(SB), NOSPLIT, $0-56
	TILEARGS
	ZERO24
	TESTQ CX, CX
	JZ    reduce

loop:
	PAIR((SI), (SI)(R8*1), Y24, Z24)
	PAIR((SI)(R8*2), (SI)(R12*1), Y25, Z25)
	PAIR((R13), (R13)(R8*1), Y26, Z26)
	COLF((DI), Y27, Z27, Z0, Z8, Z16)
	COLF((DI)(R9*1), Y28, Z28, Z1, Z9, Z17)
	COLF((DI)(R9*2), Y27, Z27, Z2, Z10, Z18)
	COLF((DI)(R10*1), Y28, Z28, Z3, Z11, Z19)
	COLF((BX), Y27, Z27, Z4, Z12, Z20)
	COLF((BX)(R9*1), Y28, Z28, Z5, Z13, Z21)
	COLF((BX)(R9*2), Y27, Z27, Z6, Z14, Z22)
	COLF((BX)(R10*1), Y28, Z28, Z7, Z15, Z23)
	ADDQ $32, SI
	ADDQ $32, R13
	ADDQ $16, DI
	ADDQ $16, BX
	DECQ CX
	JNZ  loop

reduce:
	VMOVDQU32 kvPermRows<>(SB), Z29
	REDUCE8(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Y0)
	LEAQ      (DX)(R11*2), DX
	REDUCE8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Y8)
	LEAQ      (DX)(R11*2), DX
	REDUCE8(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Y16)
	VZEROUPPER
	RET
