//go:build amd64 && !purego

#include "textflag.h"
#include "avx512_amd64.h"

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

// As in dot_avx512_amd64.s, with the value rows' stride in 2-byte units
// (AXPYARGS($1), avx512_amd64.h).
#define AXPY6X64(W) \
	AXPYARGS($1); \
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
	AXPYARGS($1); \
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
	AXPYARGS($1); \
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
// ZW and copies them to its high half, then the same FMAs, with the
// macros of avx512_amd64.h.
#define COLF(M, YW, ZW, A0, A1, A2) \
	VCVTPH2PS    M, YW; \
	VINSERTF32X8 $1, YW, ZW, ZW; \
	VFMADD231PS  ZW, Z24, A0; \
	VFMADD231PS  ZW, Z25, A1; \
	VFMADD231PS  ZW, Z26, A2

// BODY6X8F is dot_avx512_amd64.s's BODY6X8 with COLF: a step reads eight
// halves (16 bytes) of each weight row.
#define BODY6X8F \
	PAIR((SI), (SI)(R8*1), Y24, Z24); \
	PAIR((SI)(R8*2), (SI)(R12*1), Y25, Z25); \
	PAIR((R13), (R13)(R8*1), Y26, Z26); \
	COLF((DI), Y27, Z27, Z0, Z8, Z16); \
	COLF((DI)(R9*1), Y28, Z28, Z1, Z9, Z17); \
	COLF((DI)(R9*2), Y27, Z27, Z2, Z10, Z18); \
	COLF((DI)(R10*1), Y28, Z28, Z3, Z11, Z19); \
	COLF((BX), Y27, Z27, Z4, Z12, Z20); \
	COLF((BX)(R9*1), Y28, Z28, Z5, Z13, Z21); \
	COLF((BX)(R9*2), Y27, Z27, Z6, Z14, Z22); \
	COLF((BX)(R10*1), Y28, Z28, Z7, Z15, Z23); \
	ADDQ $32, SI; \
	ADDQ $32, R13; \
	ADDQ $16, DI; \
	ADDQ $16, BX

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
	TILE($1, NONE, ZERO24, NONE, BODY6X8F, REDUCE6X8)
