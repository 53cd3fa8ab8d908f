//go:build amd64 && !purego

#include "textflag.h"

// The AMX tile kernels of bf16 products (amxdot.go). The Go assembler has
// no AMX mnemonics, so each instruction is spelled in bytes: a three-byte
// VEX prefix (C4, E2 for map 0F38 with no extended registers, then W0,
// the inverted vvvv, L0 and pp), the opcode, ModRM and, for memory, SIB.
// Every operand is a fixed register, so the macros below take only tile
// numbers that are fixed too.
//
// Tiles: 0–3 hold the 32×32 block of outputs (transposed: a tile row is
// one weight row, its columns sixteen rows of x), 4 and 5 the two
// sixteen-row bands of weights (A), 6 and 7 two blocks of packed x (B).
// Registers: SI and DI point at the two weight bands, CX is their row
// stride in bytes, DX and BX at the two x blocks, AX = 64 their row
// stride (and the stride of the outputs), R9 counts the 32-element
// blocks left.

// LDTILECFG [AX]
#define LDTILECFG_AX BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x00
// TILERELEASE
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
// TILEZERO tmm0, tmm1, tmm2, tmm3
#define TILEZERO_0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0
#define TILEZERO_1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8
#define TILEZERO_2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD0
#define TILEZERO_3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD8
// TILELOADD tmm4, [SI+CX]; tmm5, [DI+CX]; tmm6, [DX+AX]; tmm7, [BX+AX]
#define LOAD_A0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x0E
#define LOAD_A1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x2C; BYTE $0x0F
#define LOAD_B0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x34; BYTE $0x02
#define LOAD_B1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x3C; BYTE $0x03
// TDPBF16PS tmm0, tmm4, tmm6; tmm1, tmm4, tmm7; tmm2, tmm5, tmm6; tmm3, tmm5, tmm7
#define DP_00 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xC4
#define DP_01 BYTE $0xC4; BYTE $0xE2; BYTE $0x42; BYTE $0x5C; BYTE $0xCC
#define DP_10 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xD5
#define DP_11 BYTE $0xC4; BYTE $0xE2; BYTE $0x42; BYTE $0x5C; BYTE $0xDD
// TILESTORED [SI+AX], tmm0 … tmm3
#define STORE_0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x06
#define STORE_1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x0C; BYTE $0x06
#define STORE_2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x14; BYTE $0x06
#define STORE_3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x1C; BYTE $0x06

// SETUP loads the tile configuration and the pointers both kernels share.
#define SETUP \
	MOVQ cfg+0(FP), AX; \
	LDTILECFG_AX; \
	MOVQ w+8(FP), SI; \
	MOVQ ldw+16(FP), CX; \
	MOVQ CX, DI; \
	SHLQ $4, DI; \
	ADDQ SI, DI; \
	MOVQ xp+24(FP), DX; \
	MOVQ kb+32(FP), R9; \
	MOVQ R9, BX; \
	SHLQ $10, BX; \
	ADDQ DX, BX; \
	MOVQ $64, AX

// func tile2x2AMX(cfg *tileConfig, w *uint16, ldw int, xp *uint16, kb int, c *float32)
//
// c[0:1024] = the four 16×16 output tiles of 32 weight rows (w, ldw
// bytes apart) against two packed blocks of x (xp, the second kb·1024
// bytes after the first), over kb blocks of 32 elements; kb ≥ 1.
TEXT ·tile2x2AMX(SB), NOSPLIT, $0-48
	SETUP
	TILEZERO_0
	TILEZERO_1
	TILEZERO_2
	TILEZERO_3
loop:
	LOAD_A0
	LOAD_A1
	LOAD_B0
	LOAD_B1
	DP_00
	DP_01
	DP_10
	DP_11
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $1024, DX
	ADDQ $1024, BX
	DECQ R9
	JNZ  loop
	MOVQ c+40(FP), SI
	STORE_0
	ADDQ $1024, SI
	STORE_1
	ADDQ $1024, SI
	STORE_2
	ADDQ $1024, SI
	STORE_3
	TILERELEASE
	RET

// func tile2x1AMX(cfg *tileConfig, w *uint16, ldw int, xp *uint16, kb int, c *float32)
//
// tile2x2AMX for one block of x: c[0:256] and c[512:768] (tiles 0 and 2).
TEXT ·tile2x1AMX(SB), NOSPLIT, $0-48
	SETUP
	TILEZERO_0
	TILEZERO_2
loop1:
	LOAD_A0
	LOAD_A1
	LOAD_B0
	DP_00
	DP_10
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $1024, DX
	DECQ R9
	JNZ  loop1
	MOVQ c+40(FP), SI
	STORE_0
	ADDQ $2048, SI
	STORE_2
	TILERELEASE
	RET





// TILELOADD tmm4, [SP+AX]; tmm5, [BX+AX]
#define LOAD_A0_SP BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x04
#define LOAD_A1_BX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x2C; BYTE $0x03

// COPY4 copies 64 bytes of four weight rows (B, B+CX, B+2·CX, B+R8 with
// R8 = 3·CX) to O(SP) and on, through A, C, D, E.
#define COPY4(B, A, C, D, E, O) \
	VMOVDQU64 (B), A; \
	VMOVDQU64 (B)(CX*1), C; \
	VMOVDQU64 (B)(CX*2), D; \
	VMOVDQU64 (B)(R8*1), E; \
	VMOVDQU64 A, (O+0)(SP); \
	VMOVDQU64 C, (O+64)(SP); \
	VMOVDQU64 D, (O+128)(SP); \
	VMOVDQU64 E, (O+192)(SP)

// func tile2x1sAMX(cfg *tileConfig, w *uint16, ldw int, xp *uint16, kb int, c *float32)
//
// tile2x1AMX with the weights staged, for a block of few rows of x (a
// decode step), whose weights come from memory: each step copies the 64
// bytes of the 32 rows with vector loads to 2 KB on the stack, and the
// tiles load from there. Tile loads straight from memory stream the
// weights at about two thirds of that rate (BenchmarkMatMulTFewRows,
// docs/benchmarks/cpu-kernels.md); the sums are the same, in the same
// order.
TEXT ·tile2x1sAMX(SB), 0, $2048-48
	SETUP
	LEAQ (CX)(CX*2), R8
	LEAQ (SI)(CX*4), R10
	LEAQ (R10)(CX*4), R11
	LEAQ (R11)(CX*4), R12
	LEAQ (DI)(CX*4), R13
	LEAQ (R13)(CX*4), R14
	LEAQ (R14)(CX*4), R15
	LEAQ 1024(SP), BX
	TILEZERO_0
	TILEZERO_2
loops:
	COPY4(SI, Z0, Z1, Z2, Z3, 0)
	COPY4(R10, Z4, Z5, Z6, Z7, 256)
	COPY4(R11, Z8, Z9, Z10, Z11, 512)
	COPY4(R12, Z12, Z13, Z14, Z15, 768)
	COPY4(DI, Z16, Z17, Z18, Z19, 1024)
	COPY4(R13, Z20, Z21, Z22, Z23, 1280)
	COPY4(R14, Z24, Z25, Z26, Z27, 1536)
	COPY4(R15, Z28, Z29, Z30, Z31, 1792)
	LOAD_A0_SP
	LOAD_A1_BX
	LOAD_B0
	DP_00
	DP_10
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, R12
	ADDQ $64, R13
	ADDQ $64, R14
	ADDQ $64, R15
	ADDQ $1024, DX
	DECQ R9
	JNZ  loops
	MOVQ c+40(FP), SI
	STORE_0
	ADDQ $2048, SI
	STORE_2
	TILERELEASE
	VZEROUPPER
	RET
