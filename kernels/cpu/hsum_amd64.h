// hsum_amd64.h: the reduction of eight float32 lane sums in the order dot.go
// fixes, for the AVX2 kernels (avx2_amd64.h) and the AVX-512 one-row bf16
// tile (dot_avx512_amd64.s), which both keep a row's lanes in one YMM
// register.

// HSUM reduces the eight lanes of Y into the low lane of X:
// ((s0+s4) + (s2+s6)) + ((s1+s5) + (s3+s7)). T is a scratch register.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VMOVHLPS     X, T, T; \
	VADDPS       T, X, X; \
	VMOVSHDUP    X, T; \
	VADDSS       T, X, X

// HSTORE reduces accumulator Y (with X its low half) and stores the sum at
// OFF(DX). X15 is the scratch register.
#define HSTORE(Y, X, OFF) \
	HSUM(Y, X, X15); \
	VMOVSS X, OFF(DX)
