package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/model"
	"kvlab/common/model/modeltest"
)

// TestWindowFreeFlags checks -window-free on the runnables: with a prefix
// cache it is refused on one line that names the flags to change; without
// one (-no-cache) it generates the same tokens as keeping every block; on
// a model without sliding-window layers, and -local-blocks without it, are
// refused.
func TestWindowFreeFlags(t *testing.T) {
	gemma := filepath.Join(t.TempDir(), "gemma3")
	require.NoError(t, model.WriteSynthetic(gemma, modeltest.Gemma3Options(1))) // window 8
	main := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := Main(cachedVariant, args, &o, &e)
		return code, o.String(), e.String()
	}
	prompt := "5,9,13,2,7,11,3,8,1,4,6,10,12,14,15,16,17,18,19,20,21,22,23,24"
	code, _, stderr := main("generate", "-model", gemma, "-window-free", "-prompt", prompt)
	assert.Equal(t, 1, code)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	for _, flag := range []string{"-window-free", "-no-cache"} {
		assert.Contains(t, stderr, flag)
	}

	code, keep, stderr := main("generate", "-model", gemma, "-no-cache", "-block-size", "2", "-max-tokens", "40", "-prompt", prompt)
	require.Equal(t, 0, code, stderr)
	code, free, stderr := main("generate", "-model", gemma, "-no-cache", "-window-free", "-local-blocks", "32", "-block-size", "2", "-max-tokens", "40", "-prompt", prompt)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, keep, free)

	code, _, stderr = main("generate", "-model", smallModel(t, "llama"), "-no-cache", "-window-free", "-prompt", "1,2")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "sliding window")
	code, _, stderr = main("generate", "-model", gemma, "-no-cache", "-local-blocks", "8", "-prompt", "1,2")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "-local-blocks")
}
