package trie

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
)

// unmergedTrie is the trie without its optimisation: Evict is evict, and
// no chain is ever merged. It is the plain trie the docs read first, and it
// must pass everything the shipped one does.
type unmergedTrie struct{ *Trie }

func (u unmergedTrie) Evict(n int) int {
	freed := u.evict(n)
	clear(u.chains)
	u.chains = u.chains[:0]
	return freed
}

// unmergedTries builds unmergedTrie caches evicting by p.
func unmergedTries(p Policy) cachetest.Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return unmergedTrie{New(a, bs, p)} }
}

// mergeCheckedTrie is the shipped trie with every merge checked: each
// Evict runs evict, looks at everything a caller or the eviction policy
// could see, merges (mergeChains) and looks again, and fails the test
// unless nothing changed but the number of nodes. (The harnesses audit
// the trie's bookkeeping after every Evict.) merges counts the
// merges, so a test can tell that it saw some.
type mergeCheckedTrie struct {
	*Trie
	t      testing.TB
	merges *int
}

func mergeCheckedTries(t testing.TB, p Policy, merges *int) cachetest.Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return mergeCheckedTrie{New(a, bs, p), t, merges}
	}
}

func (m mergeCheckedTrie) Evict(n int) int {
	m.t.Helper()
	freed := m.evict(n)
	before, nodes := seenOf(m.Trie), nodeCount(m.Trie)
	m.mergeChains()
	after := seenOf(m.Trie)
	if diff := cmp.Diff(before, after); diff != "" {
		m.t.Fatalf("Evict(%d): merging changed what the trie shows (-before +after):\n%s", n, diff)
	}
	*m.merges += nodes - nodeCount(m.Trie)
	return freed
}

// seen is everything about a trie that a merge must leave as it is: its
// segments (every node cut at its joins, so a merged node reads as the
// nodes it was), the references it holds on every block, the blocks it
// lists and has evicted, and what Evict could free.
type seen struct {
	Roots     map[string]segment
	Holds     []int32
	Stats     kvcache.CacheStats
	Evictable int
}

// segment is one node of a trie cut at its joins.
type segment struct {
	Tokens, Blocks []int32
	Children       []segment
}

func seenOf(t *Trie) seen {
	s := seen{Roots: map[string]segment{}, Holds: slices.Clone(t.holds), Stats: t.Stats(), Evictable: t.Evictable()}
	for _, r := range t.roots() {
		s.Roots[r.salt] = segmentsOf(r, t.bs)
	}
	return s
}

// segmentsOf returns n as the chain of segments its joins cut it into,
// with n's children below the last.
func segmentsOf(n *node, bs int) segment {
	var kids []segment
	for _, c := range n.children {
		kids = append(kids, segmentsOf(c, bs))
	}
	sort.Slice(kids, func(i, j int) bool { return slices.Compare(kids[i].Tokens, kids[j].Tokens) < 0 })
	cuts := append(append([]int{0}, n.joins...), len(n.blocks))
	var s segment
	for i := len(cuts) - 2; i >= 0; i-- {
		from, to := cuts[i], cuts[i+1]
		s = segment{Tokens: slices.Clone(n.tokens[from*bs : to*bs]), Blocks: slices.Clone(n.blocks[from:to]), Children: kids}
		kids = []segment{s}
	}
	return s
}

// nodeCount returns the number of nodes under every root.
func nodeCount(t *Trie) int {
	count := 0
	var walk func(n *node)
	walk = func(n *node) {
		count++
		for _, c := range n.children {
			walk(c)
		}
	}
	for _, r := range t.roots() {
		walk(r)
	}
	return count
}

// TestMergingChangesNothingAWalkSees evicts from tries built so that
// eviction leaves chains to merge: a system prompt left with one of its
// continuations, a chain of them, one salt's, a merged node that a later
// prompt splits at its join or between joins, and one trimmed segment by
// segment. Every merge is checked to change nothing but the number of
// nodes (mergeCheckedTrie), each case sees the merges it expects, and
// the queries find what the case expects, as the unmerged trie finds.
func TestMergingChangesNothingAWalkSees(t *testing.T) {
	x, a, b, c, w := toks(0, 8), toks(100, 8), toks(200, 4), toks(300, 8), toks(900, 8)
	type step struct {
		commit []int32 // commit these tokens (unsalted unless salt), or
		salt   string
		evict  int // evict this many blocks
	}
	type query struct {
		salt   string
		tokens []int32
	}
	for _, tc := range []struct {
		name    string
		steps   []step
		merges  int
		queries map[string]query
		want    map[string]int
	}{
		{"a prompt left with one continuation",
			[]step{{commit: cat(x, a)}, {commit: cat(x, b)}, {evict: 2}}, 1,
			map[string]query{"X A": {"", cat(x, a)}, "X B": {"", cat(x, b)}}, map[string]int{"X A": 8, "X B": 12}},
		{"merged twice",
			[]step{{commit: cat(x, a, c)}, {commit: cat(x, a, b)}, {commit: cat(x, w)}, {evict: 2}, {evict: 3}}, 2,
			map[string]query{"X A B": {"", cat(x, a, b)}, "X W": {"", cat(x, w)}}, map[string]int{"X A B": 8, "X W": 16}},
		{"one salt's prompt",
			[]step{{commit: cat(x, a), salt: "s"}, {commit: cat(x, b), salt: "s"}, {commit: cat(x, a)}, {evict: 2}}, 1,
			map[string]query{"s: X B": {"s", cat(x, b)}, "s: X A": {"s", cat(x, a)}, "X A": {"", cat(x, a)}},
			map[string]int{"s: X B": 12, "s: X A": 8, "X A": 16}},
		{"split at the join",
			[]step{{commit: cat(x, a)}, {commit: cat(x, b)}, {evict: 2}, {commit: cat(x, c)}}, 1,
			map[string]query{"X B": {"", cat(x, b)}, "X C": {"", cat(x, c)}}, map[string]int{"X B": 12, "X C": 16}},
		{"split between joins",
			[]step{{commit: cat(x, a)}, {commit: cat(x, b)}, {evict: 2}, {commit: cat(x[:4], c)}}, 1,
			map[string]query{"X B": {"", cat(x, b)}, "X[:4] C": {"", cat(x[:4], c)}}, map[string]int{"X B": 12, "X[:4] C": 12}},
		{"trimmed segment by segment",
			[]step{{commit: w}, {commit: cat(x, a)}, {commit: cat(x, b)}, {evict: 2}, {evict: 3}}, 1,
			map[string]query{"X B": {"", cat(x, b)}, "W": {"", w}}, map[string]int{"X B": 8, "W": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, form := range []struct {
				name string
				f    cachetest.Factory
			}{{"merged", nil}, {"unmerged", unmergedTries(DeepestFirst)}} {
				merges := 0
				f := form.f
				if f == nil {
					f = mergeCheckedTries(t, DeepestFirst, &merges)
				}
				h := cachetest.NewHarness(t, f, 16, 4)
				for i, s := range tc.steps {
					if s.commit == nil {
						h.Cache.Evict(s.evict)
						h.Audit(fmt.Sprintf("after step %d", i))
						continue
					}
					if h.StartSalted(i, s.salt, s.commit) < 0 {
						t.Fatalf("%s: step %d: the pool could not hold the prompt", form.name, i)
					}
					h.Finish(i)
				}
				have := map[string]int{}
				for name, q := range tc.queries {
					have[name] = h.Pool.MatchLen(q.salt, q.tokens)
				}
				if diff := cmp.Diff(tc.want, have); diff != "" {
					t.Fatalf("%s: cached tokens (-want +have):\n%s", form.name, diff)
				}
				if form.f == nil && merges != tc.merges {
					t.Fatalf("merged: %d merges; want %d", merges, tc.merges)
				}
			}
		})
	}
}

// TestUnmergedTriePassesTheConformanceSuite runs the shared suite on the
// plain trie, which never merges, under every policy.
func TestUnmergedTriePassesTheConformanceSuite(t *testing.T) {
	for _, tc := range policies {
		t.Run(tc.name, func(t *testing.T) { cachetest.Run(t, unmergedTries(tc.policy)) })
	}
}

// TestMergesAreCheckedThroughTheSuite runs the shared suite with every
// merge checked (mergeCheckedTrie), under every policy, and requires that
// it merged at all.
func TestMergesAreCheckedThroughTheSuite(t *testing.T) {
	for _, tc := range policies {
		t.Run(tc.name, func(t *testing.T) {
			merges := 0
			cachetest.Run(t, mergeCheckedTries(t, tc.policy, &merges))
			if merges == 0 {
				t.Fatal("the suite merged nothing: the check saw no merge")
			}
		})
	}
}

// FuzzMergingIsInvisible checks every merge on random inputs: the
// operations of cachetest.Ops (admissions, prefill chunks and commits,
// decode, finishes, evictions and forks over a three-token alphabet)
// through mergeCheckedTrie and through the unmerged trie, under the policy
// the first byte picks.
// `go test -run '^$' -fuzz FuzzMergingIsInvisible ./phase08_compressed/trie/`
// explores.
func FuzzMergingIsInvisible(f *testing.F) {
	for i, seed := range cachetest.OpsSeeds() {
		f.Add(append([]byte{byte(i)}, seed...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		p := policies[int(data[0])%len(policies)].policy
		merges := 0
		cachetest.Ops(t, mergeCheckedTries(t, p, &merges), data[1:])
		cachetest.Ops(t, unmergedTries(p), data[1:])
	})
}
