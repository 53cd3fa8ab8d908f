package cpu

import "math"

// expNeg is attention's exponential: a float32 approximation of e^x for
// x ≤ 0 (scores minus their running maximum), the same bits in Go and in
// assembly (expShiftAVX2). x is first raised to expLo (below it the true
// value is under 2^-126, and the softmax weight negligible); then, with n
// = x·log2(e) rounded to the nearest integer (ties to even) and r = x -
// n·ln2 in two fused steps, e^r is a degree-7 Horner polynomial of fused
// multiply-adds and the result is that times 2^n. TestExpNeg bounds its
// error against math.Exp.
func expNeg(x float32) float32 {
	x = max(x, expLo)
	n := float32(math.RoundToEven(float64(float32(x * expLog2e))))
	r := fmaf(n, expNegLn2Hi, x)
	r = fmaf(n, expNegLn2Lo, r)
	p := fmaf(expC0, r, expC1)
	p = fmaf(p, r, expC2)
	p = fmaf(p, r, expC3)
	p = fmaf(p, r, expC4)
	p = fmaf(p, r, expC5)
	p = fmaf(p, r, 1)
	p = fmaf(p, r, 1)
	scale := math.Float32frombits(uint32(int32(n+127)) << 23)
	return float32(p * scale)
}

// The constants of expNeg, as float32 bit patterns (the assembly loads the
// same patterns).
var (
	expLo       = math.Float32frombits(0xc2aeac4f) // -87.33654
	expLog2e    = math.Float32frombits(0x3fb8aa3b)
	expNegLn2Hi = math.Float32frombits(0xbf318000) // -0.693359375
	expNegLn2Lo = math.Float32frombits(0x395e8083) // ln2 - 0.693359375 ≈ -2.1219444e-4, negated
	expC0       = math.Float32frombits(0x39506967)
	expC1       = math.Float32frombits(0x3ab743ce)
	expC2       = math.Float32frombits(0x3c088908)
	expC3       = math.Float32frombits(0x3d2aa9c1)
	expC4       = math.Float32frombits(0x3e2aaaaa)
	expC5       = math.Float32frombits(0x3f000000) // 0.5
)

// expShiftGo sets x[i] = expNeg(x[i] - m) for every i.
func expShiftGo(x []float32, m float32) {
	for i, v := range x {
		x[i] = expNeg(v - m)
	}
}

// siluMulGo sets dst[i] = silu(g[i])·u[i], silu(g) = g·σ(g), with σ from
// sigmoid. The assembly (siluMulAVX2) does the same operations, eight at
// a time.
func siluMulGo(dst, g, u []float32) {
	u, dst = u[:len(g)], dst[:len(g)]
	for i, gv := range g {
		dst[i] = gv * sigmoid(gv) * u[i]
	}
}

// sigmoid is the logistic σ(z) from expNeg: e = e^-|z| (never above 1, so
// never overflows), σ(|z|) = 1/(1+e), and σ(-|z|) = e·σ(|z|), or 0 below
// expLo.
func sigmoid(z float32) float32 {
	e := expNeg(math.Float32frombits(math.Float32bits(z) | 1<<31))
	s := 1 / (1 + e)
	if math.Signbit(float64(z)) {
		s = e * s
	}
	if z < expLo {
		s = 0 // e^z < 2^-126: e, held at expNeg's floor, would be too large
	}
	return s
}

// geluMulGo sets dst[i] = gelu(g[i])·u[i] with GELU's tanh approximation,
// 0.5·x·(1 + tanh(c·(x + 0.044715·x³))), c = √(2/π), written as
// x·σ(geluZ(x)) (1 + tanh(y) = 2σ(2y)): siluMulGo's operations with
// another argument of σ. The assembly (geluMulAVX2) does the same, eight
// at a time.
func geluMulGo(dst, g, u []float32) {
	u, dst = u[:len(g)], dst[:len(g)]
	for i, gv := range g {
		dst[i] = gv * sigmoid(geluZ(gv)) * u[i]
	}
}

// geluZ is 2c·x·(1 + 0.044715·x²), each operation rounded to float32 in
// this order: a = x·x, b = 1 + 0.044715·a, then (2c·x)·b. The explicit
// conversion keeps Go from fusing the multiply and add (it may on arm64).
func geluZ(x float32) float32 {
	b := 1 + float32(geluK1*float32(x*x))
	return float32(x*geluK2) * b
}

// The constants of geluZ, as float32 bit patterns (the assembly loads the
// same patterns).
var (
	geluK1 = math.Float32frombits(0x3d372713) // 0.044715
	geluK2 = math.Float32frombits(0x3fcc422a) // 2·√(2/π) ≈ 1.5957692
)
