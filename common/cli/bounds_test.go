package cli

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPhase08PrintsTheBound: under memory pressure (a pool too small for
// the workload's system prompts), phase08 prints each design's hit rate
// beside the best any eviction could reach at that pool's size and an
// infinite cache's, in that order and never out of it: achieved ≤ optimal
// ≤ infinite, the first below the last (the pool evicted what a bigger
// one would have kept).
func TestPhase08PrintsTheBound(t *testing.T) {
	dir := smallModel(t, "llama")
	t.Chdir(t.TempDir())
	args := []string{"-model", dir, "-workload", "system_prompts", "-requests", "36", "-prefix-len", "32", "-suffix-min", "4", "-suffix-max", "8",
		"-min-tokens", "2", "-max-tokens", "3", "-blocks", "40", "-block-size", "4",
		"-clock", "step:50ms", "-quiet"}
	var out, errOut bytes.Buffer
	require.Equal(t, 0, Compare(phase08Variants, args, &out, &errOut), errOut.String())
	_, lines, ok := strings.Cut(out.String(), "hit % achieved / optimal / infinite")
	require.True(t, ok, out.String())
	rows := strings.Split(strings.TrimSpace(lines), "\n")[1:]
	require.Len(t, rows, len(phase08Variants), lines)
	for i, row := range rows {
		name, nums, ok := strings.Cut(strings.TrimSpace(row), ": ")
		require.True(t, ok, row)
		assert.Equal(t, phase08Variants[i].Name, name)
		parts := strings.Split(nums, " / ")
		require.Len(t, parts, 3, row)
		var v []float64
		for _, p := range parts {
			_, hi, _ := strings.Cut(p, "–") // a tree's range: its upper end is the optimum
			if hi == "" {
				hi = p
			}
			f, err := strconv.ParseFloat(hi, 64)
			require.NoError(t, err, row)
			v = append(v, f)
		}
		assert.LessOrEqual(t, v[0], v[1], "%s: achieved ≤ optimal", row)
		assert.LessOrEqual(t, v[1], v[2], "%s: optimal ≤ infinite", row)
		assert.Less(t, v[0], v[2], "%s: the small pool evicted what an infinite one keeps", row)
	}
}
