// axpy6_amd64.h: the frame of attention's six-row axpy (attnkern.go:
// axpyRows6) that the AVX-512 kernels (avx512_amd64.h: AXPY6X64/32/16)
// and the AVX2 one (avx2_amd64.h: AXPY6X16Y) share: the arguments, the
// address of a key's value row, and the six rows' accumulators in and out.
// The registers A0..A5 are the caller's: ZMM or YMM.

// Each value row is loaded once and added, weighted, into the accumulators
// of six query rows. Every accumulator element is the same chain of fused
// multiply-adds over the keys in order as axpyRows's, so the width of the
// registers changes no bit. AXPYARGS loads the arguments: DI acc, R8 step (bytes), SI p (row r's
// weights 256 bytes = attnBlock floats apart), DX v at the head's column,
// BX rows, CX the number of keys, R9 ld (bytes; a value is 1<<VSHIFT
// bytes); R11 = 3*step and R12 = acc + 4*step address rows 3..5.
#define AXPYARGS(VSHIFT) \
	MOVQ acc+0(FP), DI; \
	MOVQ step+8(FP), R8; \
	MOVQ p+16(FP), SI; \
	MOVQ v+24(FP), DX; \
	MOVQ rows+32(FP), BX; \
	MOVQ n+40(FP), CX; \
	MOVQ ld+48(FP), R9; \
	SHLQ $2, R8; \
	SHLQ VSHIFT, R9; \
	LEAQ (R8)(R8*2), R11; \
	LEAQ (DI)(R8*4), R12

// VROW sets AX to the address of key t's value row and advances BX.
#define VROW \
	MOVLQSX (BX), AX; \
	IMULQ   R9, AX; \
	ADDQ    DX, AX; \
	ADDQ    $4, BX

// LOAD6 and STORE6 move the accumulators A0..A5 of the six rows, OFF
// bytes into each row's slot, from and to memory (rows step bytes apart).
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
