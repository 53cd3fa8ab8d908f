package cli

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model/gguf"
)

func TestExportGGUF(t *testing.T) {
	dir := smallModel(t, "llama")
	out := filepath.Join(t.TempDir(), "m.gguf")
	code, stdout, stderr := run("export-gguf", "-model", dir, "-out", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "wrote "+out+": llama, 21 tensors (21 F32, 0 BF16, 0 F16), vocab 300 (pre-tokenizer llama-bpe)")

	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	arch, _ := f.Value("general.architecture")
	assert.Equal(t, "llama", arch)
	_, tied := f.Tensor("output.weight")
	assert.False(t, tied, "tied embeddings: llama.cpp reuses token_embd")
}

func TestExportGGUFUsage(t *testing.T) {
	code, _, stderr := run("export-gguf")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "-out: required")

	code, _, stderr = run("export-gguf", "-model", t.TempDir(), "-out", filepath.Join(t.TempDir(), "x.gguf"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "config.json")
}
