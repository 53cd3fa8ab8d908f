package model

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/kernels/cpu"
)

// requireSameLogits runs the same prompts through a and b and checks that
// the last-position logits agree bit for bit.
func requireSameLogits(t *testing.T, a, b *Model, vocab int) {
	t.Helper()
	prompts := append(testPrompts(vocab, 1, 6, 17), []int32{int32(vocab - 1), 0, int32(vocab - 1)})
	chunks := []int{1, 2, 5, 3}
	want := lastLogitsChunked(a, prompts, chunks, newPagedKV(a, 16, 4))
	have := lastLogitsChunked(b, prompts, chunks, newPagedKV(b, 16, 4))
	for i := range want {
		for j := range want[i] {
			if math.Float32bits(have[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("prompt %d logit %d: %v vs %v", i, j, have[i][j], want[i][j])
			}
		}
	}
}

// mappedFiles returns the lines of /proc/self/maps that map a file under
// dir: what the kernel says this process has mapped, whatever the model
// believes. It skips the test where there is no /proc.
func mappedFiles(t *testing.T, dir string) []string {
	t.Helper()
	lines := mappedFilesOrNil(dir)
	if lines == nil {
		t.Skip("no /proc/self/maps here")
	}
	return lines
}

// mappedFilesOrNil is mappedFiles, nil where there is no /proc.
func mappedFilesOrNil(dir string) []string {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	out := []string{}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, dir) {
			out = append(out, line)
		}
	}
	return out
}

// inMapping reports whether the weight's float32 values lie inside one of
// the model's mapped files: a view, not a copy.
func inMapping(m *Model, name string) bool {
	d := cpu.Data(m.weights[name])
	p := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
	for _, st := range m.ck.files {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(st.mm)))
		if p >= lo && p+4*uintptr(len(d)) <= lo+uintptr(len(st.mm)) {
			return true
		}
	}
	return false
}

// TestMappedLoadMatchesRead loads each checkpoint mapped and read and
// checks that the two models compute the same bits, that the mapped one
// keeps views of the file where the CPU backend computes with the dtype on
// disk, and that it copies only what it must convert.
func TestMappedLoadMatchesRead(t *testing.T) {
	if !mapSupported {
		t.Skip("this OS does not map files")
	}
	for _, arch := range []string{ArchLlama, ArchQwen3, ArchGemma3} {
		for _, dtype := range []string{"f32", "bf16", "f16"} {
			for _, shards := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/%s/shards=%d", arch, dtype, shards), func(t *testing.T) {
					o := tinySynth(arch, 5)
					if arch == ArchGemma3 {
						o = gemma3Tiny(5)
					}
					o.DType, o.Shards, o.Tied = dtype, shards, shards == 1
					dir := t.TempDir()
					require.NoError(t, WriteSynthetic(dir, o))
					read, err := LoadWith(dir, cpu.New(), LoadOptions{NoMmap: true})
					require.NoError(t, err)
					defer read.Close()
					mapped, err := Load(dir, cpu.New())
					require.NoError(t, err)
					defer mapped.Close()

					assert.Zero(t, read.MappedBytes())
					assert.Nil(t, read.ck)
					requireSameLogits(t, read, mapped, o.Vocab)
					if arch != ArchGemma3 { // whose norms are held as 1+weight
						requireWeightsEqual(t, mapped, o)
					}

					switch dtype {
					case "f16":
						// Nothing the CPU computes with is f16: every weight
						// is converted, and the files are let go at once.
						assert.Zero(t, mapped.MappedBytes())
						assert.Empty(t, mappedFiles(t, dir))
					case "f32":
						require.Positive(t, mapped.MappedBytes())
						for _, s := range weightSpecs(&mapped.Config) {
							// Gemma's norms are stored as weight-1: those
							// are the converted ones.
							assert.Equal(t, s.Kind != kindNormOffset, inMapping(mapped, s.Name), s.Name)
						}
					case "bf16":
						// Only the matrices can be views; the norms are
						// widened, so a kept file proves a bf16 view.
						require.Positive(t, mapped.MappedBytes())
						for name, w := range mapped.weights {
							assert.Equal(t, w.Rows() > 1, cpu.IsBF16(w), name)
						}
					}
				})
			}
		}
	}
}

// TestCloseUnmaps checks, through /proc/self/maps, that the checkpoint is
// mapped while the model lives and unmapped by Close, that a backend which
// copies every weight leaves nothing mapped, and that the closed model
// refuses to run instead of reading unmapped memory.
func TestCloseUnmaps(t *testing.T) {
	if !mapSupported {
		t.Skip("this OS does not map files")
	}
	dir := t.TempDir()
	o := tinySynth(ArchQwen3, 6)
	o.DType = "bf16"
	require.NoError(t, WriteSynthetic(dir, o))

	m, err := Load(dir, cpu.New())
	require.NoError(t, err)
	require.Len(t, mappedFiles(t, dir), 1, "one mapping of model.safetensors")
	size := fileSize(t, filepath.Join(dir, SingleFile))
	assert.Equal(t, size, m.MappedBytes())

	m.Close()
	assert.Empty(t, mappedFiles(t, dir), "Close must unmap the checkpoint")
	assert.Zero(t, m.MappedBytes())
	assert.PanicsWithValue(t, "model: Forward after Close", func() {
		m.Forward(&Step{Tokens: []int32{1}, Pos: []int32{0}, Seqs: nil, Local: true}, nil)
	})
	m.Close() // a second Close is harmless

	copied, err := Load(dir, plainBackend{cpu.New()})
	require.NoError(t, err)
	defer copied.Close()
	assert.Empty(t, mappedFiles(t, dir), "a backend that copies the weights needs no mapping after Load")
	assert.Zero(t, copied.MappedBytes())

	// A load that fails part way, after some weights became views,
	// releases what it mapped.
	o.Layers++
	cfg, err := o.Config()
	require.NoError(t, err)
	writeConfig(t, dir, cfg)
	_, err = Load(dir, cpu.New())
	require.ErrorContains(t, err, "model.layers.2")
	assert.Empty(t, mappedFiles(t, dir))
}

func writeConfig(t *testing.T, dir string, c *Config) {
	t.Helper()
	data, err := json.Marshal(hfConfigJSON(c))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), data, 0o644))
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// rewriteWithDataAt rewrites the safetensors file at path so that its data
// section starts at file offset dataOff, padding the header with spaces
// (which JSON allows) as a writer with another idea of alignment might.
func rewriteWithDataAt(t *testing.T, path string, dataOff func(minOff, dataLen int64) int64) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	n := int64(binary.LittleEndian.Uint64(raw))
	hdr := strings.TrimRight(string(raw[8:8+n]), " ")
	data := raw[8+n:]
	off := dataOff(8+int64(len(hdr)), int64(len(data)))
	require.GreaterOrEqual(t, off, 8+int64(len(hdr)))
	out := binary.LittleEndian.AppendUint64(nil, uint64(off-8))
	out = append(out, hdr...)
	for int64(len(out)) < off {
		out = append(out, ' ')
	}
	out = append(out, data...)
	require.NoError(t, os.WriteFile(path, out, 0o644))
}

// TestMisalignedTensorsLoad moves the data section of f32 and bf16
// checkpoints to offsets that leave the tensors misaligned for their
// dtype: such tensors must be copied, not viewed, and compute the same
// bits as the aligned file read into memory.
func TestMisalignedTensorsLoad(t *testing.T) {
	for _, dtype := range []string{"f32", "bf16"} {
		for _, shift := range []int64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/data at 8k+%d", dtype, shift), func(t *testing.T) {
				o := tinySynth(ArchLlama, 7)
				o.DType, o.Tied = dtype, false
				dir := t.TempDir()
				require.NoError(t, WriteSynthetic(dir, o))
				aligned, err := LoadWith(dir, cpu.New(), LoadOptions{NoMmap: true})
				require.NoError(t, err)
				defer aligned.Close()

				rewriteWithDataAt(t, filepath.Join(dir, SingleFile), func(minOff, _ int64) int64 {
					return (minOff+7)/8*8 + shift
				})
				for _, opts := range []LoadOptions{{}, {NoMmap: true}} {
					m, err := LoadWith(dir, cpu.New(), opts)
					require.NoError(t, err)
					requireSameLogits(t, aligned, m, o.Vocab)
					requireWeightsEqual(t, m, o)
					// bf16 data at an even offset is aligned for it; f32
					// data at 8k+2 is not.
					views := !opts.NoMmap && mapSupported && dtype == "bf16" && shift%2 == 0
					assert.Equal(t, views, m.MappedBytes() > 0, "kept the mapping (NoMmap=%v)", opts.NoMmap)
					m.Close()
				}
			})
		}
	}
}

// TestMappedWeightsEndAtPageEnd places the last weight (lm_head) so that it
// ends exactly at the end of the file and of its last page: a kernel that
// read a byte past a weight would fault here instead of reading slack.
func TestMappedWeightsEndAtPageEnd(t *testing.T) {
	if !mapSupported {
		t.Skip("this OS does not map files")
	}
	page := int64(os.Getpagesize())
	for _, dtype := range []string{"f32", "bf16"} {
		t.Run(dtype, func(t *testing.T) {
			o := tinySynth(ArchQwen3, 8)
			o.DType, o.Tied = dtype, false
			dir := t.TempDir()
			require.NoError(t, WriteSynthetic(dir, o))
			read, err := LoadWith(dir, cpu.New(), LoadOptions{NoMmap: true})
			require.NoError(t, err)
			defer read.Close()

			path := filepath.Join(dir, SingleFile)
			rewriteWithDataAt(t, path, func(minOff, dataLen int64) int64 {
				return (minOff+dataLen+page-1)/page*page - dataLen
			})
			require.Zero(t, fileSize(t, path)%page)
			m, err := Load(dir, cpu.New())
			require.NoError(t, err)
			defer m.Close()
			require.Positive(t, m.MappedBytes())
			if dtype == "f32" {
				require.True(t, inMapping(m, nameLMHead), "lm_head must be a view of the file for this test to mean anything")
			}
			requireSameLogits(t, read, m, o.Vocab)
		})
	}
}

// TestMlock locks a small model's mapped weights, refuses to lock what was
// read, and explains a refusal by the limit.
func TestMlock(t *testing.T) {
	if !mapSupported {
		t.Skip("this OS does not map files")
	}
	dir := t.TempDir()
	o := tinySynth(ArchLlama, 9)
	require.NoError(t, WriteSynthetic(dir, o))

	_, err := LoadWith(dir, cpu.New(), LoadOptions{NoMmap: true, Mlock: true})
	require.ErrorContains(t, err, "NoMmap")

	m, err := LoadWith(dir, cpu.New(), LoadOptions{Mlock: true})
	if err != nil {
		// A machine whose limit is below even this model's few hundred
		// kilobytes still shows the explanation.
		require.ErrorContains(t, err, "RLIMIT_MEMLOCK")
		t.Skipf("cannot lock a small model here: %v", err)
	}
	assert.True(t, m.Locked())
	assert.Equal(t, fileSize(t, filepath.Join(dir, SingleFile)), m.MappedBytes())
	m.Close()
	assert.False(t, m.Locked())
	if runtime.GOOS == "linux" {
		assert.Empty(t, mappedFiles(t, dir))
	}
}

func TestLockErrorExplainsTheLimit(t *testing.T) {
	var err error = &LockError{Size: 1_200_000_000, Limit: 8 << 20, ByLimit: true, Err: os.ErrPermission}
	assert.ErrorIs(t, err, os.ErrPermission)
	assert.Contains(t, err.Error(), "locking 1.2 GB of mapped weights")
	assert.Contains(t, err.Error(), "RLIMIT_MEMLOCK allows this process to lock 8.4 MB")
	assert.Contains(t, err.Error(), "ulimit -l")
	err = &LockError{Size: 1_200_000_000, Limit: -1, Err: os.ErrInvalid}
	assert.NotContains(t, err.Error(), "RLIMIT_MEMLOCK")
}

// TestRewriteUnderLoadedModel writes a different checkpoint over the files
// a loaded model maps: the model must go on computing with the weights it
// loaded (the writer replaces files rather than truncating them, which
// would fault the mapping's reads).
func TestRewriteUnderLoadedModel(t *testing.T) {
	dir := t.TempDir()
	o := tinySynth(ArchLlama, 10)
	o.DType = "bf16"
	require.NoError(t, WriteSynthetic(dir, o))
	m, err := Load(dir, cpu.New())
	require.NoError(t, err)
	defer m.Close()
	before, err := LoadWith(dir, cpu.New(), LoadOptions{NoMmap: true})
	require.NoError(t, err)
	defer before.Close()

	o.Seed = 11
	require.NoError(t, WriteSynthetic(dir, o))
	requireSameLogits(t, before, m, o.Vocab)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasSuffix(e.Name(), ".tmp"), "left %s behind", e.Name())
	}
}
