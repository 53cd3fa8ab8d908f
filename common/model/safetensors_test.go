package model

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// specials are values whose encoding is easy to get wrong.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65520, 1e-8, -3e-7, 1e-40,
	float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, math.SmallestNonzeroFloat32,
}

func testData(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := append([]float32(nil), specials...)
	for len(out) < n {
		out = append(out, float32(rng.NormFloat64()*math.Pow(10, rng.Float64()*8-4)))
	}
	return out[:n]
}

func TestSafetensorsRoundTrip(t *testing.T) {
	for _, dtype := range []string{DTypeF32, DTypeBF16, DTypeF16} {
		t.Run(dtype, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.safetensors")
			in := []*HostTensor{
				{Name: "a.weight", DType: dtype, Shape: []int{3, 17}, Data: testData(51, 1)},
				{Name: "b", DType: dtype, Shape: []int{5}, Data: testData(5, 2)},
				{Name: "empty", DType: dtype, Shape: []int{0, 4}, Data: []float32{}},
				// A dtype of its own in the same file: offsets must not
				// assume one element size.
				{Name: "c.f32", DType: DTypeF32, Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}},
			}
			require.NoError(t, WriteSafetensors(path, in, map[string]string{"format": "pt"}))

			st, err := OpenSafetensors(path)
			require.NoError(t, err)
			defer st.Close()
			assert.Equal(t, map[string]string{"format": "pt"}, st.Metadata)
			assert.Len(t, st.Infos(), len(in))
			for _, want := range in {
				have, err := st.Read(want.Name)
				require.NoError(t, err)
				assert.Equal(t, want.Shape, have.Shape, "%s shape: have %v; want %v", want.Name, have.Shape, want.Shape)
				assert.Equal(t, want.DType, have.DType)
				require.Len(t, have.Data, len(want.Data))
				for i, v := range want.Data {
					// F32 must be bit-exact; the half formats must hold
					// exactly the round-to-nearest-even value.
					w := RoundToDType(v, want.DType)
					assert.Equal(t, math.Float32bits(w), math.Float32bits(have.Data[i]),
						"%s[%d] (from %v): have %v; want %v", want.Name, i, v, have.Data[i], w)
				}
			}
		})
	}
}

func TestSafetensorsHeaderLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	require.NoError(t, WriteSafetensors(path, []*HostTensor{{Name: "w", DType: DTypeBF16, Shape: []int{3}, Data: []float32{1, 2, 3}}}, nil))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(raw)
	assert.Zero(t, (8+n)%8, "data offset %d; want 8-byte aligned", 8+n)
	assert.Equal(t, `{"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}}`, string(raw[8 : 8+n])[:55])
	assert.Equal(t, []byte{0x80, 0x3f, 0x00, 0x40, 0x40, 0x40}, raw[8+n:], "bf16 little-endian data")
}

// writeRaw writes a safetensors file with a hand-made header.
func writeRaw(t *testing.T, path, header string, data []byte) {
	t.Helper()
	buf := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	buf = append(buf, header...)
	buf = append(buf, data...)
	require.NoError(t, os.WriteFile(path, buf, 0o644))
}

func TestSafetensorsErrors(t *testing.T) {
	tests := []struct {
		name   string
		header string
		data   int // bytes of data after the header
		open   string
		read   string // tensor to read when open succeeds
		want   string
	}{
		{name: "bad JSON", header: `{"w": {"dtype": "F32",`, want: "x.safetensors: bad header JSON"},
		{name: "bad entry", header: `{"w": {"dtype": "F32", "shape": "big", "data_offsets": [0, 4]}}`, data: 4, want: `tensor "w"`},
		{name: "one offset", header: `{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}`, data: 4, want: `tensor "w": data_offsets has 1 entries`},
		{name: "offsets disagree with shape", header: `{"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}`, data: 8, want: `tensor "w": data_offsets [0 4] span 4 bytes; a F32 tensor of shape [2] needs 8`},
		{
			name:   "truncated data",
			header: `{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}`,
			data:   12,
			want:   `x.safetensors: truncated: tensor "b" has data_offsets [8, 16] but the data section holds only 12 bytes`,
		},
		{name: "unknown dtype", header: `{"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}`, data: 8, read: "w", want: `tensor "w" has dtype "I64"`},
		{name: "missing tensor", header: `{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}`, data: 4, read: "v", want: `tensor "v" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.safetensors")
			writeRaw(t, path, tt.header, make([]byte, tt.data))
			st, err := OpenSafetensors(path)
			if tt.read == "" {
				require.Error(t, err)
				assert.ErrorContains(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			defer st.Close()
			_, err = st.Read(tt.read)
			assert.ErrorContains(t, err, tt.want)
		})
	}

	t.Run("header length past the end", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.safetensors")
		buf := binary.LittleEndian.AppendUint64(nil, 1000)
		require.NoError(t, os.WriteFile(path, append(buf, "{}"...), 0o644))
		_, err := OpenSafetensors(path)
		assert.ErrorContains(t, err, "x.safetensors: truncated: header length 1000 but only 2 bytes follow")
	})
	t.Run("shorter than the length prefix", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.safetensors")
		require.NoError(t, os.WriteFile(path, []byte{1, 2, 3}, 0o644))
		_, err := OpenSafetensors(path)
		assert.ErrorContains(t, err, "x.safetensors: truncated")
	})
}

func TestWriteSafetensorsErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	err := WriteSafetensors(path, []*HostTensor{{Name: "w", DType: "F64", Shape: []int{1}, Data: []float32{1}}}, nil)
	assert.ErrorContains(t, err, `tensor "w": cannot write dtype "F64"`)
	err = WriteSafetensors(path, []*HostTensor{{Name: "w", DType: DTypeF32, Shape: []int{2, 2}, Data: []float32{1}}}, nil)
	assert.ErrorContains(t, err, `tensor "w": shape [2 2] holds 4 elements but data has 1`)
}
