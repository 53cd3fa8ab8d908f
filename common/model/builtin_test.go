package model

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuiltinDirPerArch: each architecture's built-in model gets its own
// directory (the cache key holds the architecture), the config written
// there is that architecture's, and the built-in Gemma-3 has the default
// model's size with a window shorter than the workloads' shared prefix.
func TestBuiltinDirPerArch(t *testing.T) {
	t.Setenv("KVLAB_CACHE", t.TempDir())
	want := map[string]string{"llama": ArchLlama, "qwen3": ArchQwen3, "gemma3": ArchGemma3}
	seen := map[string]string{}
	for _, arch := range BuiltinArchs {
		dir, err := BuiltinDirFor(arch)
		require.NoError(t, err, arch)
		for other, d := range seen {
			assert.NotEqual(t, d, dir, "%s and %s share a directory", arch, other)
		}
		seen[arch] = dir
		cfg, err := LoadConfig(dir)
		require.NoError(t, err)
		assert.Equal(t, want[arch], cfg.Arch)
		again, err := BuiltinDirFor(want[arch])
		require.NoError(t, err)
		assert.Equal(t, dir, again, "the long name finds the same model")
	}
	legacy, err := BuiltinDir()
	require.NoError(t, err)
	assert.Equal(t, seen["llama"], legacy)
	assert.Regexp(t, `^default-[0-9a-f]{12}$`, filepath.Base(legacy), "Llama keeps its directory name")

	cfg, err := LoadConfig(seen["gemma3"])
	require.NoError(t, err)
	assert.Equal(t, 256, cfg.HiddenSize)
	assert.Equal(t, 4, cfg.NumHiddenLayers)
	assert.Equal(t, []string{LayerSliding, LayerSliding, LayerSliding, LayerFull}, cfg.LayerTypes)
	assert.Equal(t, BuiltinWindow, cfg.SlidingWindow)
	assert.Less(t, BuiltinWindow, 1024)

	_, err = BuiltinDirFor("mistral")
	assert.ErrorContains(t, err, "mistral")
}
