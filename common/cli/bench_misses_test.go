package cli

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tableUnder returns the rows, header skipped, of the table printed under
// the line starting with head: each row's name and its last n numbers.
func tableUnder(t *testing.T, text, head string, n int) (names []string, nums [][]float64) {
	t.Helper()
	_, rest, ok := strings.Cut(text, "\n"+head)
	require.True(t, ok, "no %q in\n%s", head, text)
	_, rest, _ = strings.Cut(rest, "\nname ")
	for _, row := range strings.Split(rest, "\n")[1:] {
		f := strings.Fields(row)
		if len(f) <= n {
			break
		}
		var v []float64
		for _, c := range f[len(f)-n:] {
			x, err := strconv.ParseFloat(c, 64)
			if err != nil {
				return names, nums // the table ended
			}
			v = append(v, x)
		}
		names = append(names, strings.Join(f[:len(f)-n], " "))
		nums = append(nums, v)
	}
	return names, nums
}

// TestBenchPrintsMissReasonsAndGhosts runs bench on the built-in model with
// a pool small enough to evict, baseline beside the radix tree: under the
// table come the cache's miss reasons, which sum to its prompt tokens less
// the cached ones and agree with its hit %, and with -ghosts the ghosts'
// hit rates, the LRU ghost's equal to the radix tree's own. The baseline,
// with no cache, has no miss row; without -ghosts there are no ghost rows,
// and the default table is the one bench always printed. With a
// host-memory tier the table gains the tokens the tier gave back.
func TestBenchPrintsMissReasonsAndGhosts(t *testing.T) {
	t.Chdir(t.TempDir())
	v := phase08Variants[0] // the radix tree
	args := []string{"bench", "-workload", "system_prompts", "-requests", "36", "-prefix-len", "32", "-suffix-min", "4", "-suffix-max", "8",
		"-min-tokens", "2", "-max-tokens", "3", "-blocks", "40", "-block-size", "4", "-clock", "step:50ms", "-quiet", "-compare"}
	var out, errOut bytes.Buffer
	require.Equal(t, 0, Main(v, append(args, "-ghosts"), &out, &errOut), errOut.String())
	text := out.String()
	first, _, _ := strings.Cut(text, "\n")
	require.Equal(t, "name failed TTFT p50 ms TTFT p99 ms ITL p50 ms out tok/s prefill tok of optimum % hit %", strings.Join(strings.Fields(first), " "), "the default table's columns")
	var hit float64
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, v.Name+" "); ok {
			f := strings.Fields(rest)
			h, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(t, err, line)
			hit = h
			break
		}
	}
	names, counts := tableUnder(t, text, "missed prompt tokens by reason", 7)
	require.Equal(t, []string{v.Name}, names, "one row, the cache's: the baseline could reuse nothing")
	c := counts[0]
	cold, evicted, salt, partial, prompt, cached := c[0], c[1], c[2], c[3], c[5], c[6]
	assert.Equal(t, prompt-cached, cold+evicted+salt+partial, "the reasons cover every computed prompt token: %v", c)
	assert.InDelta(t, hit, 100*cached/prompt, 0.05, "cached agrees with the table's hit %%")
	assert.Positive(t, evicted, "a pool of 40 blocks evicts the system prompts: %v", c)
	assert.Zero(t, salt, "one tenant")

	names, rates := tableUnder(t, text, "ghost hit % on the same traffic", 6)
	require.Equal(t, []string{v.Name}, names, text)
	assert.Contains(t, text, "  real   LRU   LFU  SLRU 80%   ARC  priority\n", "the ghosts, in ghost.Standard's order")
	assert.Equal(t, rates[0][0], rates[0][1], "the LRU ghost is the radix tree")
	assert.InDelta(t, hit, rates[0][0], 0.05, "no preemption: the real cache's lookups are the table's")

	out.Reset()
	require.Equal(t, 0, Main(v, args, &out, &errOut), errOut.String())
	assert.NotContains(t, out.String(), "ghost hit %", "no ghosts unless asked")
	assert.Contains(t, out.String(), "missed prompt tokens by reason")

	// A host-memory tier keeps what the pool evicts and gives it back:
	// those tokens are cached, promoted, and no longer missed.
	out.Reset()
	require.Equal(t, 0, Main(v, append(args[:len(args)-1], "-cache-ram", "16"), &out, &errOut), errOut.String())
	names, counts = tableUnder(t, out.String(), "missed prompt tokens by reason", 8)
	require.Equal(t, []string{v.Name}, names, out.String())
	c = counts[0]
	cold, evicted, salt, partial, prompt, cached, promoted := c[0], c[1], c[2], c[3], c[5], c[6], c[7]
	assert.Equal(t, prompt-cached, cold+evicted+salt+partial, "with a tier too: %v", c)
	assert.Positive(t, promoted, "the tier gave back evicted blocks: %v", c)
	assert.LessOrEqual(t, promoted, cached, "promoted tokens are cached tokens: %v", c)

	out.Reset()
	errOut.Reset()
	assert.NotEqual(t, 0, Main(v, []string{"bench", "-url", "http://127.0.0.1:1", "-ghosts", "-quiet"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-ghosts")
}
