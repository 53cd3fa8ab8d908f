package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCommandsReleaseTheMappedWeights: a command that loads the model maps
// its safetensors, and when the command returns the mapping is gone (the
// model is closed), so commands run in one process do not pile mappings
// up.
func TestCommandsReleaseTheMappedWeights(t *testing.T) {
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("no /proc/self/maps here")
	}
	dir := smallModel(t, "llama")
	mapped := func() []string {
		raw, err := os.ReadFile("/proc/self/maps")
		require.NoError(t, err)
		var lines []string
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.Contains(l, dir) {
				lines = append(lines, l)
			}
		}
		return lines
	}
	for _, args := range [][]string{
		{"generate", "-model", dir, "-prompt", "1,2,3", "-max-tokens", "2"},
		{"bench", "-model", dir, "-requests", "2", "-prefix-len", "8", "-suffix-min", "2", "-suffix-max", "4", "-min-tokens", "1", "-max-tokens", "2", "-quiet"},
	} {
		code, _, stderr := run(args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		assert.Empty(t, mapped(), "%s: the weights are still mapped after the command returned", args[0])
	}
}
