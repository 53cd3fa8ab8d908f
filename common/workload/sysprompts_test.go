package workload

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSystemPrompts(t *testing.T) {
	p := DefaultParams("system_prompts")
	p.Requests, p.Vocab = 600, 4096
	reqs, err := SystemPrompts(p, 4)
	require.NoError(t, err)
	require.Len(t, reqs, 600)

	// Every prompt is one of four system prompts and a suffix; count each.
	var systems [][]int32
	count := map[int]int{}
	firstSuffix := map[int32]bool{}
	for _, r := range reqs {
		sys := r.Prompt[:p.PrefixLen]
		k := slices.IndexFunc(systems, func(s []int32) bool { return slices.Equal(s, sys) })
		if k < 0 {
			k = len(systems)
			systems = append(systems, slices.Clone(sys))
		}
		count[k]++
		suffix := r.Prompt[p.PrefixLen:]
		require.GreaterOrEqual(t, len(suffix), p.SuffixMin)
		require.LessOrEqual(t, len(suffix), p.SuffixMax)
		require.False(t, firstSuffix[suffix[0]], "request %d: two suffixes start alike", r.ID)
		firstSuffix[suffix[0]] = true
	}
	require.Len(t, systems, 4)
	for i := range systems {
		for j := range i {
			require.NotEqual(t, systems[i][0], systems[j][0], "system prompts %d and %d share a first token", i, j)
		}
	}
	// Weights 1, 1/2, 1/3, 1/4: of 600 requests about 288, 144, 96, 72.
	// The most popular is asked for most, the least popular least.
	var counts []int
	for _, n := range count {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	require.Greater(t, counts[3], 2*counts[0], "counts %v: want a skew", counts)
}
