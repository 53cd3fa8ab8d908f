// row4_amd64.h: the frame of the one-row kernels over four weight rows,
// for dot_amd64.s and dot_avx512_amd64.s (after hsum_amd64.h, whose HSTORE
// it uses).

// DOTS1X4 is one row against four weight rows: dst[k*lds] = the row's
// dot product with w[k*ls:] over nb steps, k < 4, weights of 1<<WSHIFT
// bytes. Each pass (PASS) reads one whole 64-byte line of every row,
// 1<<SHIFT steps, and prefetches the line 1 KiB further on in each; the
// steps left over go one at a time (STEP), 32 bytes of x and WSTEP of
// each row. Y0..Y3 accumulate, one row each, and Y8..Y12, Y16..Y27 are
// the steps' to use: the float32 and widened-bf16 steps of avx2_amd64.h
// (ROW4STEP, PASSF32, PASSB16) and the bf16 products' of
// dot_avx512_amd64.s (DPPASS, DPSTEP) share this frame. A row's steps
// stay in order in its own accumulator, so the bits are those of the one
// definition each kernel follows (dot.go, bf16dot.go). With ls the row
// length the rows are neighbours (asmwrap.go's rowQuads); with ls a
// quarter of a job's rows they are four lanes, each going down its own
// quarter (asmLanes).
#define DOTS1X4(WSHIFT, PASS, SHIFT, STEP, WSTEP) \
	MOVQ   x+0(FP), SI; \
	MOVQ   w+8(FP), DI; \
	MOVQ   ls+16(FP), R9; \
	MOVQ   nb+24(FP), CX; \
	MOVQ   dst+32(FP), DX; \
	MOVQ   lds+40(FP), R11; \
	SHLQ   WSHIFT, R9; \
	SHLQ   $2, R11; \
	LEAQ   (R9)(R9*2), R10; \
	LEAQ   1024(DI), AX; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	MOVQ   CX, BX; \
	SHRQ   SHIFT, BX; \
	JZ     steps; \
pass: \
	PREFETCHT0 (AX); \
	PREFETCHT0 (AX)(R9*1); \
	PREFETCHT0 (AX)(R9*2); \
	PREFETCHT0 (AX)(R10*1); \
	ADDQ       $64, AX; \
	PASS; \
	DECQ       BX; \
	JNZ        pass; \
steps: \
	MOVQ  CX, BX; \
	SHRQ  SHIFT, BX; \
	SHLQ  SHIFT, BX; \
	SUBQ  BX, CX; \
	JZ    reduce; \
step: \
	STEP; \
	ADDQ  $32, SI; \
	ADDQ  WSTEP, DI; \
	DECQ  CX; \
	JNZ   step; \
reduce: \
	HSTORE(Y0, X0, 0); \
	ADDQ  R11, DX; \
	HSTORE(Y1, X1, 0); \
	ADDQ  R11, DX; \
	HSTORE(Y2, X2, 0); \
	ADDQ  R11, DX; \
	HSTORE(Y3, X3, 0); \
	VZEROUPPER; \
	RET
