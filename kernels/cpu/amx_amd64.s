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






// TILELOADD tmm4, [R11+AX]
#define LOAD_A0_R11 BYTE $0xC4; BYTE $0xC2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x03
// TILESTORED [BX+R15], tmm0
#define STORE_0_BX_R15 BYTE $0xC4; BYTE $0xA2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x3B

// COPYLINE copies the next 64 bytes of the weights (SI, read in order) to
// their place in the next band's tiles (DI): line l of row i goes to
// l·1024 + i·64. R8 counts the lines left in the row; R14 = kb·1024.
#define COPYLINE \
	VMOVDQU64 (SI), Z0; \
	VMOVDQU64 Z0, (DI); \
	ADDQ      $64, SI; \
	ADDQ      $1024, DI; \
	DECQ      R8; \
	JNZ       4(PC); \
	SUBQ      R14, DI; \
	ADDQ      $64, DI; \
	MOVQ      CX, R8

// func tileBandsAMX(cfg *tileConfig, w *uint16, bands int, xp *uint16, kb int, c *float32, cstride, cstep int, buf *uint16)
//
// Bands of sixteen weight rows, one after another in memory (w, rows of
// kb·64 bytes), against one block of few rows of x (xp): band b's 16×n
// outputs go to c + b·cstep, its rows cstride bytes apart. For a decode
// step, whose weights come from memory: tile loads straight from memory
// read sixteen rows side by side and stream about half as fast as vector
// loads in order (BenchmarkMatMulTFewRows). So the weights are copied in
// the order they lie, a band ahead, into the tile layout in buf (two
// buffers of kb·1024 bytes taking turns), and the tiles load from there
// while the next band is copied. The sums are tile2x1AMX's.
TEXT ·tileBandsAMX(SB), NOSPLIT, $0-72
	MOVQ cfg+0(FP), AX
	LDTILECFG_AX
	MOVQ w+8(FP), SI
	MOVQ bands+16(FP), R10
	MOVQ xp+24(FP), DX
	MOVQ kb+32(FP), CX
	MOVQ c+40(FP), BX
	MOVQ cstride+48(FP), R15
	MOVQ buf+64(FP), R11
	MOVQ CX, R14
	SHLQ $10, R14
	LEAQ (R11)(R14*1), R12
	MOVQ $64, AX
	// The first band, copied before anything else.
	MOVQ R11, DI
	MOVQ CX, R8
	MOVQ CX, R13
	SHLQ $4, R13
first:
	COPYLINE
	DECQ R13
	JNZ  first
band:
	MOVQ R12, DI
	MOVQ CX, R8
	TILEZERO_0
	MOVQ CX, R9
	CMPQ R10, $1
	JEQ  last
step:
	LOAD_A0_R11
	LOAD_B0
	DP_00
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	COPYLINE
	ADDQ $1024, R11
	ADDQ $1024, DX
	DECQ R9
	JNZ  step
	JMP  done
last:
	LOAD_A0_R11
	LOAD_B0
	DP_00
	ADDQ $1024, R11
	ADDQ $1024, DX
	DECQ R9
	JNZ  last
done:
	STORE_0_BX_R15
	ADDQ cstep+56(FP), BX
	// Back to the start of x; the buffers change places.
	SUBQ R14, DX
	SUBQ R14, R11
	XCHGQ R11, R12
	DECQ R10
	JNZ  band
	TILERELEASE
	VZEROUPPER
	RET

// TILELOADD tmm4, [R11+AX+1024·q]; tmm5, [R11+AX+1024·q]
#define LOAD_G0 BYTE $0xC4; BYTE $0xC2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x03
#define LOAD_G1 BYTE $0xC4; BYTE $0xC2; BYTE $0x7B; BYTE $0x4B; BYTE $0xAC; BYTE $0x03; BYTE $0x00; BYTE $0x04; BYTE $0x00; BYTE $0x00
#define LOAD_G2 BYTE $0xC4; BYTE $0xC2; BYTE $0x7B; BYTE $0x4B; BYTE $0xA4; BYTE $0x03; BYTE $0x00; BYTE $0x08; BYTE $0x00; BYTE $0x00
#define LOAD_G3 BYTE $0xC4; BYTE $0xC2; BYTE $0x7B; BYTE $0x4B; BYTE $0xAC; BYTE $0x03; BYTE $0x00; BYTE $0x0C; BYTE $0x00; BYTE $0x00
// TDPBF16PS tmm1, tmm5, tmm6; tmm2, tmm4, tmm6; tmm3, tmm5, tmm6
#define DP_1B BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xCD
#define DP_2A BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xD4
#define DP_3B BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xDD
// TILESTORED [BX+R15], tmm1 … tmm3
#define STORE_1_BX_R15 BYTE $0xC4; BYTE $0xA2; BYTE $0x7A; BYTE $0x4B; BYTE $0x0C; BYTE $0x3B
#define STORE_2_BX_R15 BYTE $0xC4; BYTE $0xA2; BYTE $0x7A; BYTE $0x4B; BYTE $0x14; BYTE $0x3B
#define STORE_3_BX_R15 BYTE $0xC4; BYTE $0xA2; BYTE $0x7A; BYTE $0x4B; BYTE $0x1C; BYTE $0x3B

// CHUNKROW copies four lines (256 bytes) of one weight row (SI) to their
// places in a chunk's tiles (DI): line l of row r of the group goes to
// l·4096 + r·64, so each L1 set takes a row's four lines, not a row's kb.
#define CHUNKROW \
	VMOVDQU64 (SI), Z0; \
	VMOVDQU64 64(SI), Z1; \
	VMOVDQU64 128(SI), Z2; \
	VMOVDQU64 192(SI), Z3; \
	VMOVDQU64 Z0, (DI); \
	VMOVDQU64 Z1, 4096(DI); \
	VMOVDQU64 Z2, 8192(DI); \
	VMOVDQU64 Z3, 12288(DI); \
	ADDQ      CX, SI; \
	ADDQ      $64, DI

#define CHUNKROWS16 \
	CHUNKROW; CHUNKROW; CHUNKROW; CHUNKROW; \
	CHUNKROW; CHUNKROW; CHUNKROW; CHUNKROW; \
	CHUNKROW; CHUNKROW; CHUNKROW; CHUNKROW; \
	CHUNKROW; CHUNKROW; CHUNKROW; CHUNKROW

// NEXTCHUNK moves R13, the first row of the chunk to copy, 256 bytes on,
// or after a group's last chunk to the first of the next group (64 rows
// on). R8 counts the chunks left in the group, R9 = kb/4, CX = ldw.
#define NEXTCHUNK \
	ADDQ $256, R13; \
	DECQ R8; \
	JNZ  6(PC); \
	MOVQ R9, R8; \
	MOVQ CX, R14; \
	SUBQ R14, R13; \
	SHLQ $6, R14; \
	ADDQ R14, R13

// GBLOCK runs one block of the four bands from the chunk at R11 against
// the block of x at DX, and moves both on.
#define GBLOCK \
	LOAD_B0; \
	LOAD_G0; \
	DP_00; \
	LOAD_G1; \
	DP_1B; \
	LOAD_G2; \
	DP_2A; \
	LOAD_G3; \
	DP_3B; \
	ADDQ $4096, R11; \
	ADDQ $1024, DX

// func tileGroupsAMX(cfg *tileConfig, w *uint16, groups int, xp *uint16, kb int, c *float32, cstride, cstep int, buf *uint16)
//
// tileBandsAMX four bands at a time (a group, 64 weight rows), for a
// decode step: four output tiles, each a chain of products waiting on the
// one before, keep the tile unit busy where one tile leaves it idle. The
// weights go through buf (32 KB) in chunks of four blocks, 64 rows × 256
// bytes, two chunks taking turns: while the tiles run on one, the next is
// copied in with vector loads. Band q of group g goes to c + (4g+q)·cstep,
// its rows cstride bytes apart. kb is a multiple of 4.
TEXT ·tileGroupsAMX(SB), NOSPLIT, $16-72
	MOVQ cfg+0(FP), AX
	LDTILECFG_AX
	MOVQ w+8(FP), R13
	MOVQ groups+16(FP), R10
	MOVQ xp+24(FP), DX
	MOVQ kb+32(FP), CX
	MOVQ c+40(FP), BX
	MOVQ cstride+48(FP), R15
	MOVQ buf+64(FP), R11
	LEAQ 16384(R11), R12
	MOVQ CX, R9
	SHRQ $2, R9
	SHLQ $6, CX
	MOVQ R9, R8
	MOVQ $64, AX
	// copies left: every chunk but the first, copied now.
	MOVQ R9, R14
	IMULQ R10, R14
	DECQ R14
	MOVQ R14, left-8(SP)
	MOVQ R13, SI
	MOVQ R11, DI
	CHUNKROWS16
	CHUNKROWS16
	CHUNKROWS16
	CHUNKROWS16
	NEXTCHUNK
group:
	TILEZERO_0
	TILEZERO_1
	TILEZERO_2
	TILEZERO_3
	MOVQ R9, chunks-16(SP)
chunk:
	CMPQ left-8(SP), $0
	JEQ  nocopy
	MOVQ R13, SI
	MOVQ R12, DI
	GBLOCK
	CHUNKROWS16
	GBLOCK
	CHUNKROWS16
	GBLOCK
	CHUNKROWS16
	GBLOCK
	CHUNKROWS16
	NEXTCHUNK
	DECQ left-8(SP)
	JMP  swap
nocopy:
	GBLOCK
	GBLOCK
	GBLOCK
	GBLOCK
swap:
	SUBQ  $16384, R11
	XCHGQ R11, R12
	DECQ  chunks-16(SP)
	JNZ   chunk
	MOVQ cstep+56(FP), R14
	STORE_0_BX_R15
	ADDQ R14, BX
	STORE_1_BX_R15
	ADDQ R14, BX
	STORE_2_BX_R15
	ADDQ R14, BX
	STORE_3_BX_R15
	ADDQ R14, BX
	// Back to the start of x for the next group.
	MOVQ CX, R14
	SHLQ $4, R14
	SUBQ R14, DX
	DECQ R10
	JNZ  group
	TILERELEASE
	VZEROUPPER
	RET

