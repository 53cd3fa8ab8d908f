package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_compressed/trie"
)

// sharedBases is the workload where eviction policies part ways: a few
// shared system prompts ("bases"), requests taking turns among them, each
// with a tail of its own that no later request reuses, and a pool too small
// to keep every tail. It returns each request's prompt.
func sharedBases(requests int) [][]int32 {
	const bases, baseLen = 4, 32
	rng := rand.New(rand.NewPCG(1, 2))
	prompts := make([][]int32, requests)
	for i := range prompts {
		base := cachetest.Tokens(10_000*(i%bases), baseLen)
		tail := cachetest.Tokens(1_000_000+1000*i, 8+rng.IntN(17))
		prompts[i] = cachetest.Join(base, tail)
	}
	return prompts
}

// replayed is what one replay of a workload found.
type replayed struct {
	cached  []int // tokens each request found cached
	found   int   // cached tokens, over every request
	total   int   // prompt tokens, over every request
	evicted int   // blocks evicted
}

// hitRate is the fraction of prompt tokens found cached.
func (r replayed) hitRate() float64 { return float64(r.found) / float64(r.total) }

// replay runs prompts one after another through a 40-block pool (block
// size 4) with the trie and policy p.
func replay(tb testing.TB, prompts [][]int32, p trie.Policy) replayed {
	h := cachetest.NewHarness(tb, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return trie.New(a, bs, p)
	}, 40, 4)
	var r replayed
	for i, prompt := range prompts {
		n := h.Start(i, prompt)
		if n < 0 {
			tb.Fatalf("request %d does not fit", i)
		}
		h.Finish(i)
		r.cached = append(r.cached, n)
		r.found += n
		r.total += len(prompt)
	}
	r.evicted = h.Cache.Stats().Evicted
	return r
}

func TestDeepestFirstKeepsSharedBases(t *testing.T) {
	// Every base is 32 tokens, whole blocks. A base becomes a node of its
	// own once a second prompt shares it; from the third round on,
	// deepest-first evicts only the one-off tails, and every request finds
	// its whole base. Plain LRU evicts a base whenever it is the oldest
	// leaf, and loses hits.
	prompts := sharedBases(200)
	deepest := replay(t, prompts, trie.DeepestFirst)
	for i, n := range deepest.cached[8:] {
		if n != 32 {
			t.Fatalf("deepest-first, request %d: cached %d tokens; want 32", 8+i, n)
		}
	}
	lru := replay(t, prompts, trie.LRU)
	if lru.hitRate() >= deepest.hitRate() {
		t.Fatalf("hit rate: have lru %.3f, deepest-first %.3f; want lru below deepest-first", lru.hitRate(), deepest.hitRate())
	}
	t.Logf("hit rate: deepest-first %.3f, lru %.3f", deepest.hitRate(), lru.hitRate())
}

// nodeLevels is DeepestFirst with depth counted in nodes instead of blocks.
type nodeLevels struct{}

func (nodeLevels) Before(a, b trie.Leaf) bool {
	if a.Level != b.Level {
		return a.Level > b.Level
	}
	return a.LastUse < b.LastUse
}

func TestPitfallLevelsCountedInNodes(t *testing.T) {
	// Until a second prompt shares it, a base and the first prompt's tail
	// are one node, at the same level as every tail: counted in nodes,
	// "deepest first" eats into that base as readily as into a tail, and
	// the bases of the first rounds keep losing their ends. Counted in
	// blocks, the tail ends are always deeper than the bases.
	prompts := sharedBases(200)
	nodes := replay(t, prompts, nodeLevels{})
	short := 0
	for _, n := range nodes.cached[8:] {
		if n < 32 {
			short++
		}
	}
	if short == 0 {
		t.Fatalf("levels in nodes: every request after the warm-up found its whole base; want some short")
	}
	byNodes, byBlocks := nodes.hitRate(), replay(t, prompts, trie.DeepestFirst).hitRate()
	if byNodes >= byBlocks {
		t.Fatalf("hit rate: have %.3f with levels in nodes, %.3f in blocks; want nodes below blocks", byNodes, byBlocks)
	}
	t.Logf("with the bug (levels counted in nodes): hit rate %.3f, %d of %d requests short of their base; fixed (levels in blocks): hit rate %.3f", byNodes, short, len(nodes.cached)-8, byBlocks)
}

// policyRows are the policies docs/phase08_compressed.md compares on the
// shared-bases workload, in the order of its table.
var policyRows = []struct {
	name   string
	policy trie.Policy
}{
	{"deepest-first", trie.DeepestFirst},
	{"lru", trie.LRU},
	{"priority", trie.Priority},
	{"size-aware", trie.SizeAware},
	{"deepest-first with levels in nodes", nodeLevels{}},
}

// policyTable replays sharedBases(400) under every policy of policyRows
// and renders the rows of the doc's table.
func policyTable(tb testing.TB) []string {
	prompts := sharedBases(400)
	var rows []string
	for _, p := range policyRows {
		r := replay(tb, prompts, p.policy)
		rows = append(rows, fmt.Sprintf("| %s | %d / %d | %.3f | %d |", p.name, r.found, r.total, r.hitRate(), r.evicted))
	}
	return rows
}

func TestPolicyComparisonInTheDoc(t *testing.T) {
	// The replay is deterministic: the same rows every run, on every
	// machine. They must be the ones docs/phase08_compressed.md shows.
	rows := policyTable(t)
	want := []string{
		"| deepest-first | 12612 / 19283 | 0.654 | 1490 |",
		"| lru | 6572 / 19283 | 0.341 | 3000 |",
		"| priority | 12484 / 19283 | 0.647 | 1522 |",
		"| size-aware | 5312 / 19283 | 0.275 | 3315 |",
		"| deepest-first with levels in nodes | 8804 / 19283 | 0.457 | 2442 |",
	}
	require.Equal(t, want, rows, "policy comparison (update the table in docs/phase08_compressed.md too)")
	doc, err := os.ReadFile("../docs/phase08_compressed.md")
	require.NoError(t, err)
	require.Contains(t, string(doc), strings.Join(rows, "\n"), "the policy table in docs/phase08_compressed.md")
}
