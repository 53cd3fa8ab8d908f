package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleKV has one value of every type the format knows.
var sampleKV = []KV{
	{"u8", uint8(200)}, {"i8", int8(-3)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
	{"u32", uint32(4000000000)}, {"i32", int32(-2000000000)}, {"f32", float32(1e-5)},
	{"b", true}, {"s", "héllo"}, {"u64", uint64(1) << 60}, {"i64", int64(-1) << 60}, {"f64", 0.1},
	{"a.u8", []uint8{1, 2}}, {"a.i8", []int8{-1}}, {"a.u16", []uint16{7}}, {"a.i16", []int16{-7}},
	{"a.u32", []uint32{1, 2, 3}}, {"a.i32", []int32{1, -5}}, {"a.f32", []float32{0.5, -2}},
	{"a.b", []bool{true, false}}, {"a.s", []string{"Ġt", "", "<|eot_id|>"}}, {"a.u64", []uint64{9}},
	{"a.i64", []int64{-9}}, {"a.f64", []float64{math.Pi}}, {"a.empty", []string{}},
}

func sampleTensors() ([]TensorInfo, [][]byte) {
	infos := []TensorInfo{
		{Name: "a", Dims: []uint64{3, 5}, Type: F32},
		{Name: "b", Dims: []uint64{7}, Type: BF16},
		{Name: "c", Dims: []uint64{2, 3, 1}, Type: F16},
	}
	var data [][]byte
	for i, ti := range infos {
		b := make([]byte, ti.Size())
		for j := range b {
			b[j] = byte(31*i + j)
		}
		data = append(data, b)
	}
	return infos, data
}

func writeSample(t *testing.T) []byte {
	t.Helper()
	infos, data := sampleTensors()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, sampleKV, infos)
	require.NoError(t, err)
	for i, ti := range infos {
		require.NoError(t, w.WriteTensor(ti.Name, data[i]))
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	file := writeSample(t)
	assert.Equal(t, "GGUF", string(file[:4]))
	assert.Equal(t, uint32(3), binary.LittleEndian.Uint32(file[4:]))
	assert.Equal(t, uint64(3), binary.LittleEndian.Uint64(file[8:]), "tensor count")
	assert.Equal(t, uint64(len(sampleKV)), binary.LittleEndian.Uint64(file[16:]), "key-value count")

	f, err := Parse(bytes.NewReader(file), int64(len(file)))
	require.NoError(t, err)
	assert.Equal(t, sampleKV, f.KV)
	assert.Zero(t, f.DataOffset%DefaultAlignment)
	infos, data := sampleTensors()
	require.Len(t, f.Tensors, len(infos))
	for i, ti := range f.Tensors {
		assert.Equal(t, infos[i].Name, ti.Name)
		assert.Equal(t, infos[i].Dims, ti.Dims)
		assert.Equal(t, infos[i].Type, ti.Type)
		assert.Zero(t, ti.Offset%DefaultAlignment, ti.Name)
		got, err := f.ReadTensor(ti.Name)
		require.NoError(t, err)
		assert.Equal(t, data[i], got, ti.Name)
	}
	// Every tensor is padded to the alignment, the last one too.
	last := f.Tensors[len(f.Tensors)-1]
	assert.Equal(t, f.DataOffset+int64(pad(last.Offset+last.Size(), DefaultAlignment)), int64(len(file)))
	v, ok := f.Value("a.s")
	assert.True(t, ok)
	assert.Equal(t, []string{"Ġt", "", "<|eot_id|>"}, v)
}

func TestAlignmentKey(t *testing.T) {
	infos, data := sampleTensors()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, []KV{{"general.alignment", uint32(64)}}, infos)
	require.NoError(t, err)
	for i, ti := range infos {
		require.NoError(t, w.WriteTensor(ti.Name, data[i]))
	}
	require.NoError(t, w.Close())
	f, err := Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	assert.Equal(t, uint64(64), f.Alignment)
	assert.Zero(t, f.DataOffset%64)
	for _, ti := range f.Tensors {
		assert.Zero(t, ti.Offset%64)
	}
}

// Every file cut short of its last tensor's data is an error, never a
// panic or a huge allocation. (The padding after the last tensor may be
// missing: nothing is read from it.)
func TestTruncatedFilesAreErrors(t *testing.T) {
	file := writeSample(t)
	f, err := Parse(bytes.NewReader(file), int64(len(file)))
	require.NoError(t, err)
	last := f.Tensors[len(f.Tensors)-1]
	end := f.DataOffset + int64(last.Offset+last.Size())
	for n := range end {
		_, err := Parse(bytes.NewReader(file[:n]), int64(n))
		require.Error(t, err, "cut at %d of %d bytes", n, len(file))
	}
}

func TestCorruptHeadersAreErrors(t *testing.T) {
	file := writeSample(t)
	for name, mutate := range map[string]func(b []byte){
		"magic":       func(b []byte) { copy(b, "GGML") },
		"version":     func(b []byte) { binary.LittleEndian.PutUint32(b[4:], 2) },
		"huge count":  func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 1<<62) },
		"huge string": func(b []byte) { binary.LittleEndian.PutUint64(b[24:], 1<<62) },
		"bad type":    func(b []byte) { binary.LittleEndian.PutUint32(b[24+8+2:], 99) },
	} {
		b := bytes.Clone(file)
		mutate(b)
		_, err := Parse(bytes.NewReader(b), int64(len(b)))
		assert.Error(t, err, name)
	}
}

func TestWriterChecksItsInput(t *testing.T) {
	infos, data := sampleTensors()
	var buf bytes.Buffer
	_, err := NewWriter(&buf, []KV{{"k", 1}}, nil) // int has no GGUF type
	assert.ErrorContains(t, err, "unsupported metadata value")
	_, err = NewWriter(&buf, []KV{{"k", uint8(1)}, {"k", uint8(2)}}, nil)
	assert.ErrorContains(t, err, "twice")
	_, err = NewWriter(&buf, nil, []TensorInfo{{Name: "q", Dims: []uint64{32}, Type: 2}})
	assert.ErrorContains(t, err, "not supported")

	w, err := NewWriter(&buf, nil, infos)
	require.NoError(t, err)
	assert.ErrorContains(t, w.WriteTensor("b", data[1]), "next tensor is \"a\"")
	assert.ErrorContains(t, w.WriteTensor("a", data[0][1:]), "bytes")
	require.NoError(t, w.WriteTensor("a", data[0]))
	assert.ErrorContains(t, w.Close(), "1 of 3")
}

func TestPermuteRoPE(t *testing.T) {
	// Two heads of four rows, one column: rows 0..7 hold their own index.
	w := []float32{0, 1, 2, 3, 4, 5, 6, 7}
	assert.Equal(t, []float32{0, 2, 1, 3, 4, 6, 5, 7}, PermuteRoPE(w, 2, 4, 1))

	// The point of the permutation: rotating pairs (i, i+d/2) of W·x, as
	// HuggingFace does, gives the same numbers as rotating pairs (2i, 2i+1)
	// of W'·x, as llama.cpp does, in the permuted order.
	const heads, d, cols = 3, 8, 5
	wq := make([]float32, heads*d*cols)
	x := make([]float32, cols)
	for i := range wq {
		wq[i] = float32(math.Sin(float64(i)))
	}
	for i := range x {
		x[i] = float32(i) - 2
	}
	matvec := func(w []float32) []float64 {
		out := make([]float64, len(w)/cols)
		for r := range out {
			for c := range cols {
				out[r] += float64(w[r*cols+c]) * float64(x[c])
			}
		}
		return out
	}
	theta := func(i int) float64 { return 7 * math.Pow(10000, -2*float64(i)/d) }
	hf, cpp := matvec(wq), matvec(PermuteRoPE(wq, heads, d, cols))
	for h := range heads {
		for i := range d / 2 {
			s, c := math.Sincos(theta(i))
			a, b := hf[h*d+i], hf[h*d+i+d/2]
			hfA, hfB := a*c-b*s, b*c+a*s
			p, q := cpp[h*d+2*i], cpp[h*d+2*i+1]
			cppP, cppQ := p*c-q*s, q*c+p*s
			assert.InDelta(t, hfA, cppP, 1e-12)
			assert.InDelta(t, hfB, cppQ, 1e-12)
		}
	}
}

func TestBF16Bits(t *testing.T) {
	h, ok := BF16Bits(1.5)
	assert.True(t, ok)
	assert.Equal(t, uint16(0x3fc0), h)
	_, ok = BF16Bits(1 + 1.0/1024)
	assert.False(t, ok)
	assert.True(t, strings.HasPrefix(BF16.String(), "BF16"))
}
