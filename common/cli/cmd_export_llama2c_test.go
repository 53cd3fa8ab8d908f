package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/llama2c"
)

func TestExportLlama2c(t *testing.T) {
	o := model.DefaultSynth(model.ArchLlama)
	o.Vocab, o.Hidden, o.Intermediate, o.Layers, o.Heads, o.KVHeads, o.HeadDim = 300, 64, 128, 2, 4, 2, 16
	o.RopeTheta, o.RopeScaling = 10000, nil // what run.c computes
	dir := filepath.Join(t.TempDir(), "m")
	require.NoError(t, model.WriteSynthetic(dir, o))
	out := filepath.Join(t.TempDir(), "m.bin")
	tok := filepath.Join(t.TempDir(), "tokenizer.bin")
	code, stdout, stderr := run("export-llama2c", "-model", dir, "-out", out, "-seq-len", "64", "-tokenizer", tok)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "wrote "+out+": dim 64, hidden_dim 128, 2 layers, 4 heads, 2 KV heads, vocab 300 (shared classifier true), seq_len 64")
	assert.Contains(t, stdout, "wrote "+tok+": 300 tokens")

	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	h, err := llama2c.ReadHeader(f)
	require.NoError(t, err)
	fi, err := f.Stat()
	require.NoError(t, err)
	assert.Equal(t, h.Size(), fi.Size())
}

func TestExportLlama2cUsage(t *testing.T) {
	code, _, stderr := run("export-llama2c")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "-out: required")

	// The built-in model has Llama 3.2's RoPE, which run.c does not compute.
	code, _, stderr = run("export-llama2c", "-model", smallModel(t, "llama"), "-out", filepath.Join(t.TempDir(), "x.bin"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "theta 10000")
}
