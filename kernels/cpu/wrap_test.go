package cpu_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

// TestWrappedWeights checks that WrapHost and WrapBF16 use the caller's
// memory as it is (no copy), give MatMulT and Embed the bits the copying
// constructors give, and are dropped by Free.
func TestWrappedWeights(t *testing.T) {
	b := cpu.New()
	rng := newRand(21)
	const out, in = 19, 37 // odd sizes: tiles, the eight-column kernel and the tail all run
	vals := kernels.F32sToBF16(randFloats(rng, out*in))
	wide := make([]float32, len(vals))
	for i, h := range vals {
		wide[i] = kernels.BF16ToF32(h)
	}
	x := randTensor(b, rng, 5, in)

	bf := b.WrapBF16(out, in, vals)
	f32 := b.WrapHost(out, in, wide)
	assert.True(t, cpu.IsBF16(bf))
	assert.Same(t, &wide[0], &cpu.Data(f32)[0], "WrapHost must not copy")
	for name, w := range map[string]kernels.Tensor{"WrapBF16": bf, "WrapHost": f32, "FromHostBF16": b.FromHostBF16(out, in, wide)} {
		have := b.New(5, out)
		b.MatMulT(have, x, w)
		want := b.New(5, out)
		b.MatMulT(want, x, b.FromHost(out, in, wide))
		for i, v := range cpu.Data(want) {
			require.Equal(t, math.Float32bits(v), math.Float32bits(cpu.Data(have)[i]), "%s: element %d", name, i)
		}
		emb := b.New(2, in)
		b.Embed(emb, w, []int32{3, out - 1})
		assert.Equal(t, wide[3*in:4*in], cpu.Data(emb)[:in], name)
		assert.Equal(t, wide[(out-1)*in:], cpu.Data(emb)[in:], name)
	}
	// The bf16 tensor reads vals itself: a change shows through.
	vals[0] = kernels.F32ToBF16(2)
	dst := b.New(1, in)
	b.Embed(dst, bf, []int32{0})
	assert.Equal(t, float32(2), cpu.Data(dst)[0])

	b.Free(bf)
	assert.PanicsWithValue(t, "cpu: use of a freed tensor", func() { b.Embed(dst, bf, []int32{0}) })
}
