//go:build amd64 && !purego

#include "textflag.h"
#include "avx512_amd64.h"
#include "hsum_amd64.h"
#include "row4_amd64.h"

// The AVX-512 tile kernel of MatMulT. dot.go defines every output element
// by eight lane sums, so a 16-lane ZMM register cannot run one dot product
// sixteen wide without changing its bits. It holds two instead: the lane
// sums of row r in its low half and those of row r+1 in its high half,
// against the same eight weights broadcast to both halves. Each half then
// does, lane for lane, exactly what one YMM accumulator of dots3x4AVX2
// does, and REDUCE8 reduces both halves with the same tree as HSUM.

// COL1 does one weight row's FMA for a single row pair (Z24): its eight
// values broadcast to both halves of ZW (Z27 or Z28). COL does them for
// the three row pairs Z24..Z26.
#define COL1(M, ZW, A0) \
	VBROADCASTF32X8 M, ZW; \
	VFMADD231PS     ZW, Z24, A0

#define COL(M, ZW, A0, A1, A2) \
	COL1(M, ZW, A0); \
	VFMADD231PS ZW, Z25, A1; \
	VFMADD231PS ZW, Z26, A2

// COLH1 and COLH are COL1 and COL for bf16 weights: the eight bf16 values
// at M, loaded into every 128-bit quarter of ZW, are widened by one byte
// shuffle (Z31, widenBF16) into float32 in both halves: zero low bytes,
// the bf16 on top.
#define COLH1(M, ZW, A0) \
	VBROADCASTI32X4 M, ZW; \
	VPSHUFB         Z31, ZW, ZW; \
	VFMADD231PS     ZW, Z24, A0

#define COLH(M, ZW, A0, A1, A2) \
	COLH1(M, ZW, A0); \
	VFMADD231PS ZW, Z25, A1; \
	VFMADD231PS ZW, Z26, A2

// widenBF16 is the VPSHUFB control of COLH: in quarters 0 and 2, bf16
// values 0..3 go to the top halves of float32 lanes 0..3; in quarters 1
// and 3, values 4..7 (0x80 writes a zero byte).
DATA widenBF16<>+0(SB)/8, $0x0302808001008080
DATA widenBF16<>+8(SB)/8, $0x0706808005048080
DATA widenBF16<>+16(SB)/8, $0x0b0a808009088080
DATA widenBF16<>+24(SB)/8, $0x0f0e80800d0c8080
DATA widenBF16<>+32(SB)/8, $0x0302808001008080
DATA widenBF16<>+40(SB)/8, $0x0706808005048080
DATA widenBF16<>+48(SB)/8, $0x0b0a808009088080
DATA widenBF16<>+56(SB)/8, $0x0f0e80800d0c8080
GLOBL widenBF16<>(SB), RODATA|NOPTR, $64

// The tiles' loop bodies, one step of eight elements of every row: BODY6X8
// for three row pairs, BODY2X8 for one; C is the weight row's macro (COL
// and COL1 for float32, COLH and COLH1 for bf16) and WSTEP the bytes of
// eight weights.
#define BODY6X8(C, WSTEP) \
	PAIR((SI), (SI)(R8*1), Y24, Z24); \
	PAIR((SI)(R8*2), (SI)(R12*1), Y25, Z25); \
	PAIR((R13), (R13)(R8*1), Y26, Z26); \
	C((DI), Z27, Z0, Z8, Z16); \
	C((DI)(R9*1), Z28, Z1, Z9, Z17); \
	C((DI)(R9*2), Z27, Z2, Z10, Z18); \
	C((DI)(R10*1), Z28, Z3, Z11, Z19); \
	C((BX), Z27, Z4, Z12, Z20); \
	C((BX)(R9*1), Z28, Z5, Z13, Z21); \
	C((BX)(R9*2), Z27, Z6, Z14, Z22); \
	C((BX)(R10*1), Z28, Z7, Z15, Z23); \
	ADDQ $32, SI; \
	ADDQ $32, R13; \
	ADDQ WSTEP, DI; \
	ADDQ WSTEP, BX

#define BODY2X8(C, WSTEP) \
	PAIR((SI), (SI)(R8*1), Y24, Z24); \
	C((DI), Z27, Z0); \
	C((DI)(R9*1), Z28, Z1); \
	C((DI)(R9*2), Z27, Z2); \
	C((DI)(R10*1), Z28, Z3); \
	C((BX), Z27, Z4); \
	C((BX)(R9*1), Z28, Z5); \
	C((BX)(R9*2), Z27, Z6); \
	C((BX)(R10*1), Z28, Z7); \
	ADDQ $32, SI; \
	ADDQ WSTEP, DI; \
	ADDQ WSTEP, BX

// NEXT sets AX to the weight rows after the tile's eight (rows 8..15 when
// ldw is the row length), and PREFETCH256 / PREFETCH128 fetch the next
// 256 / 128 bytes of them, what one step of float32 / bf16 weights reads
// of eight rows. The ...Next tiles run them in their loops: MatMulT calls
// those for one band of each group of eight weight rows (matMulBands says
// which), whose successor reads the next eight. A product of a few rows
// streams its weights from memory once, and a tile's arithmetic does not
// hide eight cold streams; prefetching in every band instead would only
// crowd L1 with lines a product of many rows reads much later. The hint
// is T1 (to L2), not T0: on the AMD EPYC of docs/benchmarks/real-models.md
// it took eight rows from 19.7–21.3 to 24.6–26.2 GB/s of weights and six
// from 22.6–25.2 to 31.3–32.1 (BenchmarkMatMulTFewRows, bf16 products,
// old and new binaries alternating), the lines no longer filling L1's miss
// buffers and pushing out the group the tile is reading; a tile reads
// its rows from L2 as fast as it multiplies them.
#define NEXT LEAQ (DI)(R9*8), AX

#define PREFETCH256 \
	PREFETCHT1 (AX); \
	PREFETCHT1 64(AX); \
	PREFETCHT1 128(AX); \
	PREFETCHT1 192(AX); \
	ADDQ       $256, AX

#define PREFETCH128 \
	PREFETCHT1 (AX); \
	PREFETCHT1 64(AX); \
	ADDQ       $128, AX

#define WIDENCTL VMOVDQU32 widenBF16<>(SB), Z31
#define WIDENCTL_NEXT WIDENCTL; NEXT

// func dots6x8AVX512(x *float32, ldx int, w *float32, ldw int, nb int, dst *float32, ldd int)
// dst[i*ldd+j] = dot(x[i*ldx:], w[j*ldw:]) over 8*nb elements, i < 6, j < 8.
// Z(8p+j) accumulates rows 2p and 2p+1 against weight row j: 24
// accumulators, 48 outputs, for 6 loads of x and 8 of w per 24 FMAs.
TEXT ·dots6x8AVX512(SB), NOSPLIT, $0-56
	TILE($2, NONE, ZERO24, NONE, BODY6X8(COL, $32), REDUCE6X8)

// func dots6x8NextAVX512(x *float32, ldx int, w *float32, ldw int, nb int, dst *float32, ldd int)
// dots6x8AVX512, prefetching the next eight weight rows (NEXT).
TEXT ·dots6x8NextAVX512(SB), NOSPLIT, $0-56
	TILE($2, NEXT, ZERO24, PREFETCH256, BODY6X8(COL, $32), REDUCE6X8)

// func dots6x8BF16AVX512(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
// dots6x8AVX512 with bf16 weights, widened by COLH: the same FMAs in the
// same order, so the same bits as with the widened float32 weights.
TEXT ·dots6x8BF16AVX512(SB), NOSPLIT, $0-56
	TILE($1, WIDENCTL, ZERO24, NONE, BODY6X8(COLH, $16), REDUCE6X8)

// func dots6x8NextBF16AVX512(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots6x8NextBF16AVX512(SB), NOSPLIT, $0-56
	TILE($1, WIDENCTL_NEXT, ZERO24, PREFETCH128, BODY6X8(COLH, $16), REDUCE6X8)

// func dots2x8AVX512(x *float32, ldx int, w *float32, ldw int, nb int, dst *float32, ldd int)
// dots6x8AVX512 for one row pair: the rows a six-row band leaves, two at a
// time, each weight loaded once for both, where the one-row kernel would
// read the weights once per row. The same FMAs per half, so the same bits.
TEXT ·dots2x8AVX512(SB), NOSPLIT, $0-56
	TILE($2, NONE, ZERO8, NONE, BODY2X8(COL1, $32), REDUCE2X8)

// func dots2x8NextAVX512(x *float32, ldx int, w *float32, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots2x8NextAVX512(SB), NOSPLIT, $0-56
	TILE($2, NEXT, ZERO8, PREFETCH256, BODY2X8(COL1, $32), REDUCE2X8)

// func dots2x8BF16AVX512(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots2x8BF16AVX512(SB), NOSPLIT, $0-56
	TILE($1, WIDENCTL, ZERO8, NONE, BODY2X8(COLH1, $16), REDUCE2X8)

// func dots2x8NextBF16AVX512(x *float32, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots2x8NextBF16AVX512(SB), NOSPLIT, $0-56
	TILE($1, WIDENCTL_NEXT, ZERO8, PREFETCH128, BODY2X8(COLH1, $16), REDUCE2X8)

// func axpy6x64AVX512(acc *float32, step int, p, v *float32, rows *int32, n, ld int)
TEXT ·axpy6x64AVX512(SB), NOSPLIT, $0-56
	AXPY6X64($2, LOADZ, 64, 128, 192)

// func axpy6x32AVX512(acc *float32, step int, p, v *float32, rows *int32, n, ld int)
TEXT ·axpy6x32AVX512(SB), NOSPLIT, $0-56
	AXPY6X32($2, LOADZ, 64)

// func axpy6x16AVX512(acc *float32, step int, p, v *float32, rows *int32, n, ld int)
TEXT ·axpy6x16AVX512(SB), NOSPLIT, $0-56
	AXPY6X16($2, LOADZ)

// The tiles of bf16 products (bf16dot.go): x is bf16 too, and each
// VDPBF16PS lane takes a pair of elements, so a step covers sixteen
// elements of every row in the 32 bytes a float32 tile reads for eight.
// The row pairs sit in the halves of Z24..Z26 as in dots6x8AVX512, the
// sixteen weights of a row are broadcast to both halves, and REDUCE8
// reduces the eight lane sums of each half by the same tree.
#include "bf16dot_amd64.h"

// XBF16 halves the x strides TILEARGS computed for float32 rows: R8 ldx and
// R12 3*ldx in bytes of bf16, R13 x's row 4.
#define XBF16 \
	SHRQ $1, R8; \
	SHRQ $1, R12; \
	LEAQ (SI)(R8*4), R13

#define XBF16_NEXT XBF16; NEXT

#define DPBODY6X8 \
	PAIR((SI), (SI)(R8*1), Y24, Z24); \
	PAIR((SI)(R8*2), (SI)(R12*1), Y25, Z25); \
	PAIR((R13), (R13)(R8*1), Y26, Z26); \
	DPCOL6_0((DI)); \
	DPCOL6_1((DI)(R9*1)); \
	DPCOL6_2((DI)(R9*2)); \
	DPCOL6_3((DI)(R10*1)); \
	DPCOL6_4((BX)); \
	DPCOL6_5((BX)(R9*1)); \
	DPCOL6_6((BX)(R9*2)); \
	DPCOL6_7((BX)(R10*1)); \
	ADDQ $32, SI; \
	ADDQ $32, R13; \
	ADDQ $32, DI; \
	ADDQ $32, BX

#define DPBODY2X8 \
	PAIR((SI), (SI)(R8*1), Y24, Z24); \
	DPCOL2_0((DI)); \
	DPCOL2_1((DI)(R9*1)); \
	DPCOL2_2((DI)(R9*2)); \
	DPCOL2_3((DI)(R10*1)); \
	DPCOL2_4((BX)); \
	DPCOL2_5((BX)(R9*1)); \
	DPCOL2_6((BX)(R9*2)); \
	DPCOL2_7((BX)(R10*1)); \
	ADDQ $32, SI; \
	ADDQ $32, DI; \
	ADDQ $32, BX

// func dots6x8DPAVX512(x *uint16, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
// dst[i*ldd+j] = the bf16 product of x[i*ldx:] and w[j*ldw:] over 16*nb
// elements, i < 6, j < 8: 24 VDPBF16PS, 768 multiply-adds, a step.
TEXT ·dots6x8DPAVX512(SB), NOSPLIT, $0-56
	TILE($1, XBF16, ZERO24, NONE, DPBODY6X8, REDUCE6X8)

// func dots6x8NextDPAVX512(x *uint16, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
// dots6x8DPAVX512, prefetching the next eight weight rows (256 bytes a step).
TEXT ·dots6x8NextDPAVX512(SB), NOSPLIT, $0-56
	TILE($1, XBF16_NEXT, ZERO24, PREFETCH256, DPBODY6X8, REDUCE6X8)

// func dots2x8DPAVX512(x *uint16, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots2x8DPAVX512(SB), NOSPLIT, $0-56
	TILE($1, XBF16, ZERO8, NONE, DPBODY2X8, REDUCE2X8)

// func dots2x8NextDPAVX512(x *uint16, ldx int, w *uint16, ldw int, nb int, dst *float32, ldd int)
TEXT ·dots2x8NextDPAVX512(SB), NOSPLIT, $0-56
	TILE($1, XBF16_NEXT, ZERO8, PREFETCH256, DPBODY2X8, REDUCE2X8)

// DPPASS and DPSTEP are DOTS1X4's pass and single step for bf16 products:
// a row's eight lane sums fit one YMM register, so each of the four
// weight rows has its own and nothing is computed twice. A pass loads two
// steps of x (Y16, Y17) and a whole line of each row (Y20..Y27) and adds
// each row's two steps in order; a step, half a line of each.
#define DPPASS \
	VMOVDQU32 (SI), Y16; \
	VMOVDQU32 32(SI), Y17; \
	VMOVDQU32 (DI), Y20; \
	VMOVDQU32 32(DI), Y21; \
	VMOVDQU32 (DI)(R9*1), Y22; \
	VMOVDQU32 32(DI)(R9*1), Y23; \
	VMOVDQU32 (DI)(R9*2), Y24; \
	VMOVDQU32 32(DI)(R9*2), Y25; \
	VMOVDQU32 (DI)(R10*1), Y26; \
	VMOVDQU32 32(DI)(R10*1), Y27; \
	DPROW_0_0; \
	DPROW_1_0; \
	DPROW_2_0; \
	DPROW_3_0; \
	DPROW_0_1; \
	DPROW_1_1; \
	DPROW_2_1; \
	DPROW_3_1; \
	ADDQ      $64, SI; \
	ADDQ      $64, DI

#define DPSTEP \
	VMOVDQU32 (SI), Y16; \
	VMOVDQU32 (DI), Y20; \
	VMOVDQU32 (DI)(R9*1), Y22; \
	VMOVDQU32 (DI)(R9*2), Y24; \
	VMOVDQU32 (DI)(R10*1), Y26; \
	DPROW_0_0; \
	DPROW_1_0; \
	DPROW_2_0; \
	DPROW_3_0

// func dots4DPAVX512(x *uint16, w *uint16, ls int, nb int, dst *float32, lds int)
// dst[k*lds] = the bf16 product of x and w[k*ls:] over 16*nb elements,
// k < 4: one decode row against four weight rows, ls elements apart
// (DOTS1X4 with DPPASS and DPSTEP), in lanes (asmLanes) or on
// neighbouring rows (rowQuads).
TEXT ·dots4DPAVX512(SB), NOSPLIT, $0-48
	DOTS1X4($1, DPPASS, $1, DPSTEP, $32)

// func toBF16AVX512(dst *uint16, src *float32, n int)
// Rounds 16*n floats to bf16 (bf16dot.go's step 0), sixteen at a time.
TEXT ·toBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	TESTQ CX, CX
	JZ    cvtdone

cvtloop:
	VMOVUPS (SI), Z0
	CVT_Y1_Z0
	VMOVDQU Y1, (DI)
	ADDQ    $64, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     cvtloop

cvtdone:
	VZEROUPPER
	RET

// func vdpbf16psProbe(acc *float32, x, w *uint16)
// One VDPBF16PS for TestBF16DotInstruction: acc[0:16] += the pairs of
// x[0:32] times those of w[0:16], broadcast to both halves (DPCOL2_0).
TEXT ·vdpbf16psProbe(SB), NOSPLIT, $0-24
	MOVQ    acc+0(FP), DI
	MOVQ    x+8(FP), SI
	MOVQ    w+16(FP), DX
	VMOVUPS (DI), Z0
	VMOVDQU32 (SI), Z24
	DPCOL2_0((DX))
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET
