package main

import (
	"bytes"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/cli"
	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// TestCompareGemma3 runs the experiment on a small Gemma-3 whose local
// layers' window (modeltest.GemmaWindow, 8 tokens) is far shorter than the
// shared prefix: on prefix_caching and multi_turn, every design must
// generate exactly the uncached baseline's tokens (Compare fails
// otherwise), with blocks smaller than and larger than the window.
func TestCompareGemma3(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, model.WriteSynthetic(filepath.Join(dir, "model"), modeltest.Gemma3Options(1)))
	for _, w := range []string{"prefix_caching", "multi_turn"} {
		for _, bs := range []int{4, 16} {
			t.Run(w+"/block"+strconv.Itoa(bs), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := cli.Compare(Variants, []string{"-model", filepath.Join(dir, "model"), "-workload", w,
					"-requests", "6", "-prefix-len", "40", "-suffix-min", "3", "-suffix-max", "9",
					"-min-tokens", "2", "-max-tokens", "4", "-rps", "500", "-conversations", "2", "-turns", "3", "-think", "0s",
					"-block-size", strconv.Itoa(bs), "-audit", "-plot", filepath.Join(dir, w+".svg"), "-quiet"}, &stdout, &stderr)
				require.Equal(t, 0, code, "stderr: %s\nstdout: %s", stderr.String(), stdout.String())
				assert.Contains(t, stdout.String(), "generated exactly the baseline's tokens")
			})
		}
	}
}

// TestCompareArchGemma3 runs the experiment on the built-in Gemma-3
// (-arch gemma3, as `make phase08 MODEL=gemma3` does) at a tiny size.
func TestCompareArchGemma3(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and runs the built-in Gemma-3")
	}
	t.Setenv("KVLAB_CACHE", t.TempDir())
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := cli.Compare(Variants, []string{"-arch", "gemma3", "-workload", "prefix_caching",
		"-requests", "3", "-prefix-len", "24", "-suffix-min", "3", "-suffix-max", "5",
		"-min-tokens", "2", "-max-tokens", "3", "-rps", "500",
		"-block-size", "8", "-plot", filepath.Join(dir, "p.svg"), "-quiet"}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", stderr.String(), stdout.String())
	assert.Contains(t, stdout.String(), "generated exactly the baseline's tokens")
}
