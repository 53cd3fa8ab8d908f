package metrics

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteGroupedBarsNamesEveryGroupSeriesAndLabel(t *testing.T) {
	var b bytes.Buffer
	err := WriteGroupedBars(&b, "prefill", "prompt tokens", []string{"block size 1", "block size 16"}, []BarSeries{
		{Name: "computed", Values: []float64{2321, 2441}, Labels: []string{"2321", "2441"}},
		{Name: "token-level optimum", Values: []float64{2321, 2321}, Labels: []string{"", "2321"}},
	})
	require.NoError(t, err)
	svg := b.String()
	for _, s := range []string{">block size 1<", ">block size 16<", ">computed<", ">token-level optimum<", ">2441<", ">prefill<"} {
		require.Contains(t, svg, s)
	}
	require.Error(t, WriteGroupedBars(&b, "t", "y", []string{"a"}, []BarSeries{{Name: "x", Values: []float64{1, 2}}}), "one value per group")
}

func TestWriteBarsNamesEveryBar(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteBars(&b, "hits", "hit %", []string{"trie, LRU", "trie, deepest first"}, []float64{64.4, 75.7}, []string{"64.4 %", "75.7 %"}))
	svg := b.String()
	for _, s := range []string{">trie, LRU<", ">trie, deepest first<", ">75.7 %<", ">hits<"} {
		require.Contains(t, svg, s)
	}
	require.Equal(t, 1, strings.Count(svg, "<svg"))
	require.Error(t, WriteBars(&b, "t", "x", []string{"a"}, []float64{1, 2}, []string{"a"}))
}
