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
	require.GreaterOrEqual(t, len(rows), len(phase08Variants), lines)
	rows = rows[:len(phase08Variants)] // the miss reasons and the ghosts follow
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

// TestPhase08PrintsTheMissReasonsAndGhosts: on the same pressured run,
// phase08 prints under the bound each design's miss reasons and the ghost
// policies' hit rates. The reasons sum to the prompt tokens less the cached
// ones, which agree with the table's hit %; the small pool evicted, so
// evicted is positive; the LRU ghost, which makes the radix tree's every
// decision, hits exactly what the radix tree hit.
func TestPhase08PrintsTheMissReasonsAndGhosts(t *testing.T) {
	dir := smallModel(t, "llama")
	t.Chdir(t.TempDir())
	args := []string{"-model", dir, "-workload", "system_prompts", "-requests", "36", "-prefix-len", "32", "-suffix-min", "4", "-suffix-max", "8",
		"-min-tokens", "2", "-max-tokens", "3", "-blocks", "40", "-block-size", "4",
		"-clock", "step:50ms", "-quiet"}
	var out, errOut bytes.Buffer
	require.Equal(t, 0, Compare(phase08Variants, args, &out, &errOut), errOut.String())
	text := out.String()
	hit := map[string]float64{} // the table's hit % per design
	table, _, _ := strings.Cut(text, "\ntimes:")
	for _, line := range strings.Split(table, "\n") {
		for _, v := range phase08Variants {
			if rest, ok := strings.CutPrefix(line, v.Name+" "); ok {
				f := strings.Fields(rest)
				h, err := strconv.ParseFloat(f[len(f)-1], 64)
				require.NoError(t, err, line)
				hit[v.Name] = h
			}
		}
	}
	require.Len(t, hit, len(phase08Variants), text)
	// section returns the rows of the table under head, its header
	// skipped, one per design: name, then n numbers.
	section := func(head string, n int) (names []string, nums [][]float64) {
		_, lines, ok := strings.Cut(text, head)
		require.True(t, ok, "no %q in\n%s", head, text)
		_, lines, _ = strings.Cut(lines, "\nname ")
		rows := strings.Split(lines, "\n")[1:]
		require.GreaterOrEqual(t, len(rows), len(phase08Variants), text)
		for _, row := range rows[:len(phase08Variants)] {
			f := strings.Fields(row)
			require.Greater(t, len(f), n, row)
			var v []float64
			for _, c := range f[len(f)-n:] {
				x, err := strconv.ParseFloat(c, 64)
				require.NoError(t, err, row)
				v = append(v, x)
			}
			names = append(names, strings.Join(f[:len(f)-n], " "))
			nums = append(nums, v)
		}
		return names, nums
	}
	names, counts := section("missed prompt tokens by reason", 7)
	for i, c := range counts {
		name := names[i]
		require.Equal(t, phase08Variants[i].Name, name)
		cold, evicted, salt, partial, prompt, cached := c[0], c[1], c[2], c[3], c[5], c[6]
		assert.Equal(t, prompt-cached, cold+evicted+salt+partial, "%s: the reasons cover every computed prompt token", name)
		assert.InDelta(t, hit[name], 100*cached/prompt, 0.05, "%s: cached agrees with the table's hit %%", name)
		assert.Positive(t, evicted, "%s: the small pool evicted", name)
		assert.Positive(t, cold, name)
	}
	assert.Contains(t, text, "\nname                  real   LRU   LFU  SLRU 80%   ARC  priority\n", "the ghosts, in ghost.Standard's order")
	names, rates := section("ghost hit % on the same traffic", 6)
	for i, r := range rates {
		require.Equal(t, phase08Variants[i].Name, names[i])
		if i == 0 { // the radix tree
			assert.Equal(t, r[0], r[1], "%s: the LRU ghost is the radix tree", names[i])
			assert.InDelta(t, hit[names[i]], r[0], 0.05, "no preemption here: the real cache's lookups are the table's")
		}
	}
}
