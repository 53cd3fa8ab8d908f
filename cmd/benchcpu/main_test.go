package main

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/kernels/cpu"
)

// TestHeaderNamesTheKernelSet: the first line of the output says which
// kernels ran, so figures from different machines are not compared blind.
func TestHeaderNamesTheKernelSet(t *testing.T) {
	h := header(2)
	assert.Equal(t, "kernels "+cpu.KernelSet()+", 2 threads, "+runtime.GOOS+"/"+runtime.GOARCH+"\n\n", h)
	assert.Contains(t, []string{"avx512", "avx2", "neon", "go"}, cpu.KernelSet())
}

// A trimmed llama-bench -o json output: flash_attn is printed as an
// integer (1 on, 0 off), rates as avg_ts.
const llamaBenchJSON = `[
  {"n_prompt": 1000, "n_gen": 0, "flash_attn": 1, "avg_ts": 3100.5, "samples_ts": [3100.5]},
  {"n_prompt": 0, "n_gen": 128, "flash_attn": 1, "avg_ts": 319.25, "samples_ts": [319.25]},
  {"n_prompt": 1000, "n_gen": 0, "flash_attn": 0, "avg_ts": 2300, "samples_ts": [2300]},
  {"n_prompt": 0, "n_gen": 128, "flash_attn": 0, "avg_ts": 285, "samples_ts": [285]}
]`

func TestParseLlamaBench(t *testing.T) {
	r, err := parseLlamaBench([]byte(llamaBenchJSON))
	require.NoError(t, err)
	assert.Equal(t, llamaRates{tgFA: 319.25, tg: 285, ppFA: 3100.5, pp: 2300}, r)

	_, err = parseLlamaBench([]byte(`[{"n_prompt": 1000, "n_gen": 0, "flash_attn": 1, "avg_ts": 1}]`))
	assert.ErrorContains(t, err, "four tests")
	_, err = parseLlamaBench([]byte(`not json`))
	assert.Error(t, err)
}

func TestFindLlamaBench(t *testing.T) {
	dir := t.TempDir()
	_, err := findLlamaBench(dir)
	assert.ErrorContains(t, err, "no llama-bench")
	bin := filepath.Join(dir, "build", "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "llama-bench"), nil, 0o755))
	got, err := findLlamaBench(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(bin, "llama-bench"), got)
}
