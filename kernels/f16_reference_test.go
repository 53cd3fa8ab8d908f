package kernels

import (
	"math"
	"math/big"
	"sort"
	"testing"
)

// pythonF16 holds binary16 results recorded from CPython's struct module,
// an implementation independent of this package (PyFloat_Pack2, round to
// nearest, ties to even), for float32 values given by their bits. Each
// float32 is exact as a Python float, so nothing is rounded on the way in.
// Python raises OverflowError instead of returning Inf; those entries are
// 0x7c00, the IEEE 754 default result of overflow under ties-to-even.
// Recorded with:
//
//	python3 -c "import struct
//	for b in BITS:
//	  v = struct.unpack('<f', struct.pack('<I', b))[0]
//	  try: print(hex(b), hex(struct.unpack('<H', struct.pack('<e', v))[0]))
//	  except OverflowError: print(hex(b), 'overflow')"
var pythonF16 = []struct {
	bits uint32 // the float32 input
	want uint16 // 0x7c00 where Python raised OverflowError
}{
	{0x477fe000, 0x7bff}, // 65504, the largest half
	{0x477fef00, 0x7bff}, // 65519
	{0x477fefff, 0x7bff}, // 65519.996, one float32 ulp below the midpoint
	{0x477ff000, 0x7c00}, // 65520, the midpoint to 2¹⁶: a tie, to the even Inf
	{0x477ff001, 0x7c00}, // 65520.004
	{0x477fffff, 0x7c00}, // 65535.996
	{0x47800000, 0x7c00}, // 65536
	{0x4788b800, 0x7c00}, // 70000
	{0x47c35000, 0x7c00}, // 100000
	{0x47ffffff, 0x7c00}, // 131071.99, the top of the binade above 65536
	{0x48000000, 0x7c00}, // 131072
	{0x7f7fffff, 0x7c00}, // the largest float32
	{0x3f800000, 0x3c00}, // 1
	{0x38800000, 0x0400}, // 2⁻¹⁴, the smallest normal
	{0x387fffff, 0x0400}, // just below it: rounds up into the normals
	{0x387fe000, 0x0400}, // 1023.5 × 2⁻²⁴: a tie, to the even 0x400
	{0x387fc000, 0x03ff}, // 1023 × 2⁻²⁴, the largest subnormal
	{0x387fa000, 0x03fe}, // 1022.5 × 2⁻²⁴: a tie, to the even 0x3fe
	{0x34600000, 0x0004}, // 3.5 × 2⁻²⁴: a tie, to the even 4
	{0x34200000, 0x0002}, // 2.5 × 2⁻²⁴: a tie, to the even 2
	{0x33c00000, 0x0002}, // 1.5 × 2⁻²⁴: a tie, to the even 2
	{0x33800000, 0x0001}, // 2⁻²⁴, the smallest subnormal
	{0x33400000, 0x0001}, // 0.75 × 2⁻²⁴
	{0x33000001, 0x0001}, // just above 2⁻²⁵
	{0x33000000, 0x0000}, // 2⁻²⁵: a tie, to the even 0
	{0x32ffffff, 0x0000}, // just below 2⁻²⁵
	{0x32800000, 0x0000}, // 2⁻²⁶
	{0x00000001, 0x0000}, // the smallest float32 subnormal
}

// TestF32ToF16MatchesPython checks F32ToF16 against the values recorded from
// Python, for both signs (and refF32ToF16 against them): overflow at and past 65520 is ±Inf, never a NaN,
// and the subnormals round to nearest, ties to even.
func TestF32ToF16MatchesPython(t *testing.T) {
	halves := halfValues()
	for _, c := range pythonF16 {
		f := math.Float32frombits(c.bits)
		if ref := refF32ToF16(halves, f); ref != c.want { // the two references agree
			t.Errorf("refF32ToF16(%v): %#04x; Python %#04x", f, ref, c.want)
		}
		for _, sign := range []uint32{0, 1 << 31} {
			f := math.Float32frombits(c.bits | sign)
			want := c.want | uint16(sign>>16)
			if have := F32ToF16(f); have != want {
				t.Errorf("F32ToF16(%v) (bits %#08x): have %#04x; want %#04x", f, c.bits|sign, have, want)
			}
		}
	}
}

// TestF32ToF16NaNStaysNaN checks that every kind of float32 NaN, quiet or
// signalling, with its payload only in the bits binary16 drops or not,
// narrows to a NaN of the same sign: never to an infinity, which would
// turn a poisoned value into a plausible one.
func TestF32ToF16NaNStaysNaN(t *testing.T) {
	for _, b := range []uint32{0x7fc00000, 0x7f800001, 0x7f801fff, 0x7f802000, 0x7fa00000, 0x7fffffff} {
		for _, sign := range []uint32{0, 1 << 31} {
			h := F32ToF16(math.Float32frombits(b | sign))
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 || h&0x8000 != uint16(sign>>16) {
				t.Errorf("F32ToF16(NaN %#08x): have %#04x; want a NaN with sign bit %d", b|sign, h, sign>>31)
			}
		}
	}
}

// halfValues lists the value of every finite positive binary16 in bit order,
// built from the format's definition rather than from F16ToF32: bits h =
// e<<10 | m hold m × 2⁻²⁴ when e is 0 and (1024 + m) × 2^(e−25) otherwise.
// One more entry, 2¹⁶ at index 0x7c00, is where the next half would lie
// with an unbounded exponent: IEEE 754 rounds as if it existed and then
// delivers Inf for it, so a value at or past 65520, the midpoint, rounds to
// 0x7c00 (even, so the tie at 65520 goes there too).
func halfValues() []float64 {
	v := make([]float64, 0x7c01)
	for h := range 0x7c00 {
		e, m := h>>10, h&0x3ff
		if e == 0 {
			v[h] = math.Ldexp(float64(m), -24)
		} else {
			v[h] = math.Ldexp(float64(1024+m), e-25)
		}
	}
	v[0x7c00] = 65536
	return v
}

// refF32ToF16 rounds a finite non-negative float32 to binary16 from first
// principles: the nearest entry of halves by exact rational distance, the
// even one on a tie, Inf beyond the last.
func refF32ToF16(halves []float64, f float32) uint16 {
	x := float64(f) // exact
	i := sort.SearchFloat64s(halves, x)
	switch {
	case i == len(halves):
		return 0x7c00
	case halves[i] == x || i == 0:
		return uint16(i)
	}
	xr := new(big.Rat).SetFloat64(x)
	below := new(big.Rat).Sub(xr, new(big.Rat).SetFloat64(halves[i-1]))
	above := new(big.Rat).Sub(new(big.Rat).SetFloat64(halves[i]), xr)
	switch below.Cmp(above) {
	case -1:
		return uint16(i - 1)
	case 1:
		return uint16(i)
	}
	if i&1 == 0 {
		return uint16(i)
	}
	return uint16(i - 1)
}

// TestF32ToF16MatchesReference sweeps float32 values from below half the
// smallest subnormal (2⁻²⁶) to 2¹⁸, every binade including the two past the
// largest half, for both signs, against refF32ToF16. The stride is odd and
// not a power of two, so the mantissas it visits vary from binade to binade.
func TestF32ToF16MatchesReference(t *testing.T) {
	halves := halfValues()
	const lo, hi, stride = 0x32800000, 0x48800000, 3001 // 2⁻²⁶ .. 2¹⁸
	n := 0
	for b := uint32(lo); b <= hi; b += stride {
		f := math.Float32frombits(b)
		want := refF32ToF16(halves, f)
		if have := F32ToF16(f); have != want {
			t.Fatalf("F32ToF16(%v) (bits %#08x): have %#04x; want %#04x", f, b, have, want)
		}
		if have := F32ToF16(-f); have != 0x8000|want {
			t.Fatalf("F32ToF16(%v) (bits %#08x): have %#04x; want %#04x", -f, b|1<<31, have, 0x8000|want)
		}
		n++
	}
	if n < 100000 {
		t.Fatalf("swept only %d values", n)
	}
}
