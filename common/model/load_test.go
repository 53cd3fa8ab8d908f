package model

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/kernels/cpu"
)

// requireWeightsEqual checks that every tensor the synthetic writer produced
// for o is on the backend, bit for bit.
func requireWeightsEqual(t *testing.T, m *Model, o SynthOptions) {
	t.Helper()
	want, err := SynthTensors(o)
	require.NoError(t, err)
	require.Len(t, m.weights, len(want))
	for _, w := range want {
		have, ok := m.weights[w.Name]
		require.True(t, ok, "tensor %s not loaded", w.Name)
		rows, cols := 1, w.Shape[0]
		if len(w.Shape) == 2 {
			rows, cols = w.Shape[0], w.Shape[1]
		}
		require.Equal(t, [2]int{rows, cols}, [2]int{have.Rows(), have.Cols()}, "%s shape", w.Name)
		data := m.be.ToHost(have, make([]float32, rows*cols))
		for i := range data {
			if math.Float32bits(data[i]) != math.Float32bits(w.Data[i]) {
				t.Fatalf("%s[%d]: have %v; want %v", w.Name, i, data[i], w.Data[i])
			}
		}
	}
}

func TestWriteSyntheticLoadRoundTrip(t *testing.T) {
	for _, arch := range []string{ArchLlama, ArchQwen3} {
		for _, dtype := range []string{"f32", "bf16", "f16"} {
			for _, tied := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/tied=%v", arch, dtype, tied), func(t *testing.T) {
					o := tinySynth(arch, 3)
					o.DType, o.Tied = dtype, tied
					dir := t.TempDir()
					require.NoError(t, WriteSynthetic(dir, o))
					m, err := Load(dir, cpu.New())
					require.NoError(t, err)
					defer m.Close()
					requireWeightsEqual(t, m, o)
					if tied {
						assert.Same(t, m.embed, m.lmHead, "tied lm_head must be the embeddings")
					} else {
						assert.NotSame(t, m.embed, m.lmHead)
					}
					assert.Equal(t, arch == ArchQwen3, m.layers[0].qNorm != nil, "q_norm loaded only for Qwen3")
				})
			}
		}
	}
}

func TestLoadSharded(t *testing.T) {
	o := tinySynth(ArchQwen3, 4)
	o.Tied = false
	o.Shards = 3
	dir := t.TempDir()
	require.NoError(t, WriteSynthetic(dir, o))
	for _, f := range []string{"model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors", IndexFile} {
		assert.FileExists(t, filepath.Join(dir, f))
	}
	assert.NoFileExists(t, filepath.Join(dir, SingleFile))

	m, err := Load(dir, cpu.New())
	require.NoError(t, err)
	defer m.Close()
	requireWeightsEqual(t, m, o)

	ck, err := OpenCheckpoint(dir)
	require.NoError(t, err)
	defer ck.Close()
	assert.Len(t, ck.files, 3)
}

// editIndex rewrites a sharded checkpoint's weight_map.
func editIndex(t *testing.T, dir string, edit func(map[string]string)) {
	t.Helper()
	path := filepath.Join(dir, IndexFile)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var idx struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	require.NoError(t, json.Unmarshal(raw, &idx))
	edit(idx.WeightMap)
	raw, err = json.Marshal(idx)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
}

func TestLoadShardedErrors(t *testing.T) {
	const q = "model.layers.0.self_attn.q_proj.weight"
	tests := []struct {
		name string
		edit func(t *testing.T, dir string)
		want string
	}{
		{"bad index JSON", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map": {`), 0o644))
		}, "model.safetensors.index.json: bad JSON"},
		{"empty weight_map", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"metadata": {}}`), 0o644))
		}, "weight_map is missing or empty"},
		{"missing shard", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors")))
		}, "model-00002-of-00002.safetensors"},
		{"tensor not in its shard", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]string) { m[q] = "model-00002-of-00002.safetensors" })
		}, `weight_map puts tensor "` + q + `" in model-00002-of-00002.safetensors, which does not hold it`},
		{"shard outside the directory", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]string) { m[q] = "../elsewhere.safetensors" })
		}, `weight_map["` + q + `"] is "../elsewhere.safetensors"`},
		{"tensor missing from the index", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]string) { delete(m, q) })
		}, `tensor "` + q + `" not found`},
		{"no weights at all", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, IndexFile)))
		}, "neither model.safetensors nor model.safetensors.index.json found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tinySynth(ArchLlama, 5)
			o.Shards = 2
			dir := t.TempDir()
			require.NoError(t, WriteSynthetic(dir, o))
			tt.edit(t, dir)
			_, err := Load(dir, cpu.New())
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// rewriteWeights writes model.safetensors from o's tensors after edit.
func rewriteWeights(t *testing.T, dir string, o SynthOptions, edit func([]*HostTensor) []*HostTensor) {
	t.Helper()
	ts, err := SynthTensors(o)
	require.NoError(t, err)
	require.NoError(t, WriteSafetensors(filepath.Join(dir, SingleFile), edit(ts), nil))
}

// TestLoadErrors checks that each kind of broken checkpoint is reported with
// the tensor or field a user would have to look at.
func TestLoadErrors(t *testing.T) {
	const q = "model.layers.1.self_attn.q_proj.weight"
	tests := []struct {
		name string
		edit func(t *testing.T, dir string, o SynthOptions)
		want string
	}{
		{"missing tensor", func(t *testing.T, dir string, o SynthOptions) {
			rewriteWeights(t, dir, o, func(ts []*HostTensor) []*HostTensor {
				return slices.DeleteFunc(ts, func(x *HostTensor) bool { return x.Name == q })
			})
		}, `tensor "` + q + `" not found`},
		{"missing lm_head when untied", func(t *testing.T, dir string, o SynthOptions) {
			o.Tied = true // writes no lm_head
			rewriteWeights(t, dir, o, func(ts []*HostTensor) []*HostTensor { return ts })
		}, `tensor "lm_head.weight" not found`},
		{"wrong shape", func(t *testing.T, dir string, o SynthOptions) {
			rewriteWeights(t, dir, o, func(ts []*HostTensor) []*HostTensor {
				for _, x := range ts {
					if x.Name == q {
						x.Shape = []int{x.Shape[0] / 2, x.Shape[1] * 2} // same size, so the file itself is valid
					}
				}
				return ts
			})
		}, `tensor "` + q + `" has shape [16 64]; want [32 32]`},
		{"truncated file", func(t *testing.T, dir string, o SynthOptions) {
			path := filepath.Join(dir, SingleFile)
			fi, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, fi.Size()-10))
		}, `model.safetensors: truncated: tensor "lm_head.weight" has data_offsets`},
		{"unknown dtype", func(t *testing.T, dir string, o SynthOptions) {
			path := filepath.Join(dir, SingleFile)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			// Same length, so the header stays valid and only the dtype changes.
			i := slices.Index(raw, byte('F'))
			require.Equal(t, `F32"`, string(raw[i:i+4]))
			copy(raw[i:], "I32")
			require.NoError(t, os.WriteFile(path, raw, 0o644))
		}, `has dtype "I32"`},
		{"bad header JSON", func(t *testing.T, dir string, o SynthOptions) {
			writeRaw(t, filepath.Join(dir, SingleFile), `{"model.embed_tokens.weight": `, nil)
		}, "model.safetensors: bad header JSON"},
		{"unknown architecture", func(t *testing.T, dir string, o SynthOptions) {
			editConfig(t, dir, func(m map[string]any) { m["architectures"] = []string{"GemmaForCausalLM"} })
		}, `config.json: architectures is ["GemmaForCausalLM"]`},
		{"bad config JSON", func(t *testing.T, dir string, o SynthOptions) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), []byte("{,}"), 0o644))
		}, "config.json: bad JSON"},
		{"config disagrees with weights", func(t *testing.T, dir string, o SynthOptions) {
			editConfig(t, dir, func(m map[string]any) { m["intermediate_size"] = 64 })
		}, `tensor "model.layers.0.mlp.gate_proj.weight" has shape [48 32]; want [64 32]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tinySynth(ArchLlama, 6)
			o.Tied = false
			dir := t.TempDir()
			require.NoError(t, WriteSynthetic(dir, o))
			tt.edit(t, dir, o)
			_, err := Load(dir, cpu.New())
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, ConfigFile)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	edit(m)
	raw, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
}

func TestCheckTokens(t *testing.T) {
	o := tinySynth(ArchLlama, 1)
	dir := t.TempDir()
	require.NoError(t, WriteSynthetic(dir, o))
	m, err := Load(dir, cpu.New())
	require.NoError(t, err)
	defer m.Close()
	tests := []struct {
		name string
		ids  []int32
		want string
	}{
		{"ok", []int32{0, 5, 95}, ""},
		{"empty", nil, ""},
		{"too large", []int32{1, 96}, "token 96 (at index 1) is outside the vocabulary [0, 96)"},
		{"negative", []int32{-1}, "token -1 (at index 0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.CheckTokens(tt.ids)
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
