package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestArchFlag: -arch picks the built-in model's architecture for the
// runnables' commands, and is refused when unknown or next to -model.
func TestArchFlag(t *testing.T) {
	t.Setenv("KVLAB_CACHE", t.TempDir())
	v := Variant{Name: "test"}
	logits := func(args ...string) (int, string, []float32) {
		var stdout, stderr bytes.Buffer
		code := Main(v, append([]string{"logits", "-prompt", "2,5,9"}, args...), &stdout, &stderr)
		var out logitsOutput
		if code == 0 {
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &out))
		}
		return code, stderr.String(), out.Logits
	}
	code, stderr, llama := logits()
	require.Equal(t, 0, code, stderr)
	code, stderr, gemma := logits("-arch", "gemma3")
	require.Equal(t, 0, code, stderr)
	require.Len(t, gemma, len(llama), "both built-ins have vocabulary 4096")
	assert.NotEqual(t, llama, gemma, "-arch gemma3 runs another model")

	code, stderr, _ = logits("-arch", "mistral")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `-arch: unknown architecture "mistral"`)
	code, stderr, _ = logits("-arch", "gemma3", "-model", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "give one")
}
