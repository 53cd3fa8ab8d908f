package cpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/kernels"
	"kvlab/kernels/cpu"
)

func TestTensorMemory(t *testing.T) {
	be := cpu.New()

	z := be.New(2, 3)
	assert.Equal(t, make([]float32, 6), cpu.Data(z), "New must zero")

	src := []float32{1, 2, 3, 4, 5, 6}
	x := be.FromHost(3, 2, src)
	src[0] = 99
	assert.Equal(t, float32(1), cpu.Data(x)[0], "FromHost must copy")
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, be.ToHost(x, make([]float32, 6)))

	v := be.View(x, 1, 2)
	require.Equal(t, 2, v.Rows(), "view rows")
	require.Equal(t, 2, v.Cols(), "view cols")
	cpu.Data(v)[0] = 30
	assert.Equal(t, float32(30), cpu.Data(x)[2], "a View must share memory")
	assert.Len(t, cpu.Data(v), 4, "a View must not reach past its rows")

	assert.Panics(t, func() { be.View(x, 2, 2) })
	assert.Panics(t, func() { be.FromHost(2, 2, []float32{1}) })
	assert.Panics(t, func() { be.ToHost(x, make([]float32, 5)) })

	be.Free(x)
	assert.Panics(t, func() { be.Add(x, x) }, "using a freed tensor must panic")
	assert.Equal(t, "cpu", be.Name())
}

func TestAdd(t *testing.T) {
	be := cpu.New()
	d := be.FromHost(2, 2, []float32{1, 2, 3, 4})
	be.Add(d, be.FromHost(2, 2, []float32{10, 20, 30, 40}))
	assert.Equal(t, []float32{11, 22, 33, 44}, cpu.Data(d))
	assert.Panics(t, func() { be.Add(d, be.New(1, 4)) })
}

func refRMSNorm(x, w []float32, eps float32) []float64 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) * inv * float64(w[i])
	}
	return out
}

func TestRMSNorm(t *testing.T) {
	const rows, cols, eps = 37, 96, 1e-6
	be := cpu.New()
	rng := newRand(3)
	x, w := randTensor(be, rng, rows, cols), randTensor(be, rng, 1, cols)
	dst := be.New(rows, cols)
	be.RMSNorm(dst, x, w, eps)

	xd := cpu.Data(x)
	var want []float64
	for r := range rows {
		want = append(want, refRMSNorm(xd[r*cols:(r+1)*cols], cpu.Data(w), eps)...)
	}
	requireClose(t, cpu.Data(dst), want, 1e-6, "dst")

	t.Run("in-place", func(t *testing.T) {
		y := be.FromHost(rows, cols, xd)
		be.RMSNorm(y, y, w, eps)
		requireBitEqual(t, cpu.Data(y), cpu.Data(dst), "in place")
	})
	t.Run("batch-invariant", func(t *testing.T) {
		for _, r := range []int{0, 17, rows - 1} {
			one := be.New(1, cols)
			be.RMSNorm(one, be.View(x, r, 1), w, eps)
			requireBitEqual(t, cpu.Data(one), cpu.Data(dst)[r*cols:(r+1)*cols], fmt.Sprintf("row %d", r))
		}
	})
	t.Run("heads", func(t *testing.T) {
		// RMSNormHeads on rows×(4·24) is RMSNorm on (4·rows)×24.
		const hd = 24
		hw := randTensor(be, rng, 1, hd)
		heads := be.FromHost(rows, cols, xd)
		be.RMSNormHeads(heads, hw, hd, eps)
		flat := be.New(rows*cols/hd, hd)
		be.RMSNorm(flat, be.FromHost(rows*cols/hd, hd, xd), hw, eps)
		requireBitEqual(t, cpu.Data(heads), cpu.Data(flat), "per-head")
	})
}

func TestRoPE(t *testing.T) {
	const hd, heads = 8, 3
	invFreq := make([]float32, hd/2)
	for i := range invFreq {
		invFreq[i] = float32(1 / math.Pow(10000, float64(2*i)/hd))
	}
	pos := []int32{0, 1, 5, 17, 4095}
	be := cpu.New()
	rng := newRand(5)
	x := randTensor(be, rng, len(pos), heads*hd)
	orig := append([]float32(nil), cpu.Data(x)...)
	be.RoPE(x, pos, hd, invFreq)

	want := make([]float64, len(orig))
	for r, p := range pos {
		for h := range heads {
			base := r*heads*hd + h*hd
			for i := range hd / 2 {
				angle := float64(float32(p) * invFreq[i]) // HF rounds the angle to float32
				c, s := math.Cos(angle), math.Sin(angle)
				a, b := float64(orig[base+i]), float64(orig[base+i+hd/2])
				want[base+i] = a*c - b*s
				want[base+i+hd/2] = b*c + a*s
			}
		}
	}
	requireClose(t, cpu.Data(x), want, 1e-6, "x")
	requireBitEqual(t, cpu.Data(x)[:heads*hd], orig[:heads*hd], "position 0 is the identity")

	t.Run("each product rounded", func(t *testing.T) {
		// The rotation in float32 with every product rounded before the
		// sum, bit for bit: what a fused multiply-add (arm64) would break.
		want := make([]float32, len(orig))
		for r, p := range pos {
			for h := range heads {
				base := r*heads*hd + h*hd
				for i := range hd / 2 {
					sn, cn := math.Sincos(float64(float32(p) * invFreq[i]))
					c, s := float32(cn), float32(sn)
					a, b := orig[base+i], orig[base+i+hd/2]
					want[base+i] = float32(a*c) - float32(b*s)
					want[base+i+hd/2] = float32(b*c) + float32(a*s)
				}
			}
		}
		requireBitEqual(t, cpu.Data(x), want, "x")
	})

	t.Run("batch-invariant", func(t *testing.T) {
		for r, p := range pos {
			one := be.FromHost(1, heads*hd, orig[r*heads*hd:(r+1)*heads*hd])
			be.RoPE(one, []int32{p}, hd, invFreq)
			requireBitEqual(t, cpu.Data(one), cpu.Data(x)[r*heads*hd:(r+1)*heads*hd], fmt.Sprintf("row %d", r))
		}
	})
	assert.Panics(t, func() { be.RoPE(x, pos[:2], hd, invFreq) })
}

func TestSiLUMul(t *testing.T) {
	// Large enough to be split across goroutines.
	const rows, cols = 300, 517
	be := cpu.New()
	rng := newRand(9)
	g, u := randTensor(be, rng, rows, cols), randTensor(be, rng, rows, cols)
	for i := range cpu.Data(g) {
		cpu.Data(g)[i] *= 8
	}
	dst := be.New(rows, cols)
	be.SiLUMul(dst, g, u)

	want := make([]float64, rows*cols)
	for i, gv := range cpu.Data(g) {
		want[i] = float64(gv) / (1 + math.Exp(-float64(gv))) * float64(cpu.Data(u)[i])
	}
	requireClose(t, cpu.Data(dst), want, 1e-6, "dst")

	serial := cpu.NewWithWorkers(1)
	one := serial.New(rows, cols)
	serial.SiLUMul(one, g, u)
	requireBitEqual(t, cpu.Data(dst), cpu.Data(one), "parallel vs serial")
}

func TestEmbedAndGatherRows(t *testing.T) {
	be := cpu.New()
	table := be.FromHost(4, 2, []float32{0, 1, 10, 11, 20, 21, 30, 31})
	tests := []struct {
		name string
		run  func(dst kernels.Tensor, ids []int32)
	}{
		{"Embed", func(dst kernels.Tensor, ids []int32) { be.Embed(dst, table, ids) }},
		{"GatherRows", func(dst kernels.Tensor, ids []int32) { be.GatherRows(dst, table, ids) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := be.New(3, 2)
			tc.run(dst, []int32{3, 0, 3})
			assert.Equal(t, []float32{30, 31, 0, 1, 30, 31}, cpu.Data(dst))
			assert.Panics(t, func() { tc.run(be.New(1, 2), []int32{4}) })
			assert.Panics(t, func() { tc.run(be.New(2, 2), []int32{1}) })
		})
	}
}

func TestWriteKVAndCopyBlock(t *testing.T) {
	const bs, cols = 2, 3
	be := cpu.New()
	kc, vc := be.New(4*bs, cols), be.New(4*bs, cols)
	k := be.FromHost(3, cols, []float32{1, 1, 1, 2, 2, 2, 3, 3, 3})
	v := be.FromHost(3, cols, []float32{-1, -1, -1, -2, -2, -2, -3, -3, -3})
	be.WriteKV(kc, vc, k, v, []int32{5, 0, 2})

	wantK := make([]float32, 4*bs*cols)
	wantV := make([]float32, 4*bs*cols)
	for r, slot := range []int{5, 0, 2} {
		for c := range cols {
			wantK[slot*cols+c] = float32(r + 1)
			wantV[slot*cols+c] = -float32(r + 1)
		}
	}
	require.Equal(t, wantK, cpu.Data(kc), "kc after WriteKV")
	require.Equal(t, wantV, cpu.Data(vc), "vc after WriteKV")

	be.CopyBlock(kc, vc, 2, 3, bs) // block 2 holds slots 4 and 5
	copy(wantK[3*bs*cols:4*bs*cols], wantK[2*bs*cols:3*bs*cols])
	copy(wantV[3*bs*cols:4*bs*cols], wantV[2*bs*cols:3*bs*cols])
	require.Equal(t, wantK, cpu.Data(kc), "kc after CopyBlock")
	require.Equal(t, wantV, cpu.Data(vc), "vc after CopyBlock")

	// A negative slot leaves the cache untouched for that row.
	be.WriteKV(kc, vc, k, v, []int32{-1, -1, -1})
	require.Equal(t, wantK, cpu.Data(kc), "kc after WriteKV with skipped rows")

	assert.Panics(t, func() { be.WriteKV(kc, vc, k, v, []int32{0, 1, 8}) })
	assert.Panics(t, func() { be.CopyBlock(kc, vc, 0, 4, bs) })
}

func TestSoftmaxRows(t *testing.T) {
	be := cpu.New()
	rows := [][]float32{
		{1, 2, 3},
		{1000, 1000, -1000}, // would overflow without subtracting the max
		{-5},
	}
	for i, row := range rows {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			x := be.FromHost(1, len(row), row)
			be.SoftmaxRows(x)
			m := math.Inf(-1)
			for _, v := range row {
				m = math.Max(m, float64(v))
			}
			var sum float64
			want := make([]float64, len(row))
			for j, v := range row {
				want[j] = math.Exp(float64(v) - m)
				sum += want[j]
			}
			for j := range want {
				want[j] /= sum
			}
			requireClose(t, cpu.Data(x), want, 1e-6, "softmax")
		})
	}
}

func TestArgmaxRows(t *testing.T) {
	be := cpu.New()
	nan := float32(math.NaN())
	tests := []struct {
		name string
		row  []float32
		want int32
	}{
		{"plain", []float32{0.1, 0.7, 0.2}, 1},
		{"tie picks smallest", []float32{3, 1, 3, 3}, 0},
		{"late tie", []float32{-1, 2, 5, 5}, 2},
		{"negative", []float32{-3, -2, -9}, 1},
		{"skips NaN", []float32{nan, 1, nan, 2}, 3},
		{"all NaN", []float32{nan, nan}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			have := be.ArgmaxRows(be.FromHost(1, len(tc.row), tc.row))
			assert.Equal(t, []int32{tc.want}, have, "have %v; want %v", have, tc.want)
		})
	}
}

// TestElementwiseSplitKeepsBits checks that RMSNorm, RMSNormHeads, RoPE
// and Add give the same bits on four workers as on one, on a tensor big
// enough (a prefill chunk's) that they split its rows across goroutines.
func TestElementwiseSplitKeepsBits(t *testing.T) {
	const rows, cols, hd = 300, 256, 64 // 76,800 elements: split
	rng := newRand(21)
	x0, w, hw := randFloats(rng, rows*cols), randFloats(rng, cols), randFloats(rng, hd)
	pos := make([]int32, rows)
	for i := range pos {
		pos[i] = int32(rng.IntN(4096))
	}
	invFreq := make([]float32, hd/2)
	for i := range invFreq {
		invFreq[i] = float32(math.Pow(10000, -float64(2*i)/hd))
	}
	run := func(be *cpu.Backend) [][]float32 {
		x := be.FromHost(rows, cols, x0)
		d := be.New(rows, cols)
		be.RMSNorm(d, x, be.FromHost(1, cols, w), 1e-6)
		be.RMSNormHeads(x, be.FromHost(1, hd, hw), hd, 1e-6)
		be.RoPE(x, pos, hd, invFreq)
		be.Add(d, x)
		return [][]float32{be.ToHost(x, make([]float32, rows*cols)), be.ToHost(d, make([]float32, rows*cols))}
	}
	one, four := run(cpu.NewWithWorkers(1)), run(cpu.NewWithWorkers(4))
	requireBitEqual(t, four[0], one[0], "RMSNormHeads, RoPE on 4 workers")
	requireBitEqual(t, four[1], one[1], "RMSNorm, Add on 4 workers")
}
