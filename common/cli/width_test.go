package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// phase08Variants are phase08's three designs under the names phase08
// gives them (phase08/main.go): the names are what makes its lines long.
var phase08Variants = []Variant{
	{Name: "radix tree (prefix)", PrefixCache: radix.PrefixCache},
	{Name: "hash + CoW (hashcow)", PrefixCache: blockhash.PrefixCache},
	{Name: "compressed trie", PrefixCache: func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return trie.New(a, bs, trie.DeepestFirst) }},
}

// requireFits fails for every line of out longer than 120 columns, the
// width a terminal or log viewer shows without wrapping.
func requireFits(t *testing.T, what, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 120, "%s: %q", what, l)
	}
}

// TestPhase08OutputFits120Columns renders what make phase08 and make
// phase08-align print, with phase08's design names and their default plot
// paths, and holds every line, stdout and stderr, to 120 columns; the list
// of designs that generated the baseline's tokens is one name a line.
func TestPhase08OutputFits120Columns(t *testing.T) {
	dir := smallModel(t, "llama")
	t.Chdir(t.TempDir()) // the plots go to their default paths, out/…
	small := []string{"-model", dir, "-requests", "3", "-prefix-len", "32", "-suffix-min", "4", "-suffix-max", "8",
		"-min-tokens", "2", "-max-tokens", "3", "-rps", "1000", "-quiet"}

	var out, errOut bytes.Buffer
	require.Equal(t, 0, Compare(phase08Variants, small, &out, &errOut), errOut.String())
	requireFits(t, "phase08", out.String())
	requireFits(t, "phase08 (stderr)", errOut.String())
	assert.Contains(t, out.String(), "outputs: generated exactly the baseline's tokens for all 3 requests:\n"+
		"  radix tree (prefix)\n  hash + CoW (hashcow)\n  compressed trie\n")

	out.Reset()
	errOut.Reset()
	align := append([]string{"-clock", "step:50ms", "-block-sizes", "1,16"}, small...)
	require.Equal(t, 0, Alignment(phase08Variants, align, &out, &errOut), errOut.String())
	requireFits(t, "phase08 align", out.String())
	requireFits(t, "phase08 align (stderr)", errOut.String())
	assert.Contains(t, out.String(), "every row: computed the same prompt tokens and generated the same tokens:\n  radix tree (prefix)\n")
}

// TestPlotsNamedByWhatRan: phase08's default plots carry the model and the
// workload (or the experiment) in their names, so a run with another
// MODEL= or WORKLOAD= writes its own files instead of overwriting the
// last run's; -plot still names the file outright.
func TestPlotsNamedByWhatRan(t *testing.T) {
	for _, c := range []struct {
		rf   runtimeFlags
		want string
	}{
		{runtimeFlags{}, "out/phase08-llama-prefix_caching.svg"},
		{runtimeFlags{arch: "gemma3"}, "out/phase08-gemma3-prefix_caching.svg"},
		{runtimeFlags{modelDir: "ckpt/qwen3-0.6b/", device: "cpu"}, "out/phase08-qwen3-0.6b-prefix_caching.svg"},
		{runtimeFlags{arch: "qwen3", device: "cuda"}, "out/phase08-qwen3-cuda-prefix_caching.svg"},
	} {
		assert.Equal(t, filepath.FromSlash(c.want), plotName("phase08", &c.rf, "prefix_caching"))
	}

	dir := smallModel(t, "llama")
	t.Chdir(t.TempDir())
	small := []string{"-model", dir, "-requests", "2", "-prefix-len", "16", "-suffix-min", "4", "-suffix-max", "8",
		"-min-tokens", "2", "-max-tokens", "2", "-rps", "1000", "-quiet", "-clock", "step:50ms"}
	var out, errOut bytes.Buffer
	require.Equal(t, 0, Compare(phase08Variants[:1], append([]string{"-workload", "multi_turn", "-conversations", "1", "-turns", "2"}, small...), &out, &errOut), errOut.String())
	require.Equal(t, 0, Alignment(phase08Variants[:1], append([]string{"-block-sizes", "16"}, small...), &out, &errOut), errOut.String())
	require.Equal(t, 0, Compare(phase08Variants[:1], append([]string{"-plot", "mine.svg"}, small...), &out, &errOut), errOut.String())
	for _, f := range []string{
		"out/phase08-llama-multi_turn.svg", "out/phase08-llama-multi_turn-cdf.svg", "out/phase08-llama-multi_turn-prefill.svg",
		"out/phase08-llama-align.svg", "mine.svg",
	} {
		_, err := os.Stat(f)
		assert.NoError(t, err, "%s not written", f)
		assert.Contains(t, out.String(), f)
	}
	_, err := os.Stat("out/phase08-llama-prefix_caching.svg")
	assert.True(t, os.IsNotExist(err), "-plot mine.svg wrote the default plot too")
}
