//go:build amd64 && !purego

#include "textflag.h"
#include "avx512_amd64.h"

// Attention's six-row axpy (dot_avx512_amd64.s's axpy6x*AVX512, the same
// AXPY6X macros of avx512_amd64.h) over a 16-bit KV cache: each value row
// is widened as it is loaded, sixteen values into a ZMM register (WIDENB:
// zero-extend and shift, bfloat16; WIDENH: VCVTPH2PS, float16; both
// exact), then the same fused multiply-adds in the same order as over
// float32.

#define WIDENB(M, Z) \
	VPMOVZXWD M, Z; \
	VPSLLD    $16, Z, Z

#define WIDENH(M, Z) \
	VCVTPH2PS M, Z

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
	AXPY6X64($1, WIDENB, 32, 64, 96)

// func axpy6x64F16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x64F16AVX512(SB), NOSPLIT, $0-56
	AXPY6X64($1, WIDENH, 32, 64, 96)

// func axpy6x32BF16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x32BF16AVX512(SB), NOSPLIT, $0-56
	AXPY6X32($1, WIDENB, 32)

// func axpy6x32F16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x32F16AVX512(SB), NOSPLIT, $0-56
	AXPY6X32($1, WIDENH, 32)

// func axpy6x16BF16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x16BF16AVX512(SB), NOSPLIT, $0-56
	AXPY6X16($1, WIDENB)

// func axpy6x16F16AVX512(acc *float32, step int, p *float32, v *uint16, rows *int32, n, ld int)
TEXT ·axpy6x16F16AVX512(SB), NOSPLIT, $0-56
	AXPY6X16($1, WIDENH)

// func dots6x8F16AVX512(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots6x8F16AVX512(SB), NOSPLIT, $0-56
	TILE($1, NONE, ZERO24, NONE, BODY6X8F, REDUCE6X8)
