package ghost

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/phase08_compressed/trie"
	"kvlab/phase08_hashcow/blockhash"
	"kvlab/phase08_prefix/radix"
)

// tapped returns a factory whose caches are f's in a Tap running every
// policy.
func tapped(f cachetest.Factory) cachetest.Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return NewTap(f(a, bs), bs, a.Total(), Config{Policies: Standard(tenantRetention)})
	}
}

// tenantRetention keeps tenant-a's first two blocks at priority 90 for a
// while and generated blocks at 20: some retention for the priority ghost
// to apply in every test that runs Standard.
func tenantRetention(salt string, _ []int32) Retention {
	if salt != "tenant-a" {
		return Retention{}
	}
	return Retention{Ranges: []TokenRange{{Start: 0, End: 8, Priority: 90, For: 1}}, Decode: &Level{Priority: 20}}
}

// TestTapPassesTheConformanceSuite runs the suite every prefix cache must
// pass on each design inside a Tap with every ghost: the Tap forwards
// every call and answer, so each design passes as it does alone, and the
// audit after every step (AuditCache) also recounts every ghost's books,
// under the suite's forks, tiers, salts and forced evictions.
func TestTapPassesTheConformanceSuite(t *testing.T) {
	for _, d := range []struct {
		name string
		f    cachetest.Factory
	}{{"radix", radix.New}, {"blockhash", blockhash.PrefixCache}, {"trie", trie.PrefixCache}} {
		t.Run(d.name, func(t *testing.T) { cachetest.Run(t, tapped(d.f)) })
	}
}

// TestGhostLRUIsTheRadixTree drives a radix tree in a Tap through random
// engine-like operations under pool pressure (admissions, prefill chunks
// each committed, decode steps, finishes, evictions the pool asks for and
// evictions forced, several sequences at once and prompts admitted twice
// before either commits, three salts) and checks after every operation
// that the LRU ghost found exactly what the tree found on every Match, and
// holds, has evicted and could evict exactly as many blocks as the tree.
// Forks are left out: their references bypass the seam (see the package
// comment).
func TestGhostLRUIsTheRadixTree(t *testing.T) {
	matches, dups := 0, 0
	for seed := range uint64(100) {
		m, d := lruAgainstRadix(t, seed)
		matches, dups = matches+m, dups+d
	}
	if matches < 2000 || dups < 50 {
		t.Fatalf("the random operations made %d matches and %d blocks cached without adoption; the check needs more", matches, dups)
	}
}

// lruAgainstRadix runs one seed's operations and returns how many Matches
// hit something and how many blocks the ghost cached without adopting.
func lruAgainstRadix(t *testing.T, seed uint64) (matched, dups int) {
	rng := rand.New(rand.NewPCG(seed, 11))
	bs := []int{1, 2, 4}[seed%3]
	blocks := 12 + rng.IntN(40)
	var tree *radix.Tree
	var tap *Tap
	fail := ""
	cfg := Config{Policies: []Policy{LRU()}, OnMatch: func(ev MatchEvent) {
		if ev.Ghosts[0] != ev.Real && fail == "" {
			fail = fmt.Sprintf("seed %d: Match of sequence %d (%d tokens, salt %q): the tree found %d, the LRU ghost %d",
				seed, ev.Seq, ev.Tokens, ev.Salt, ev.Real, ev.Ghosts[0])
		}
		if ev.Real > 0 {
			matched++
		}
	}}
	h := cachetest.NewHarness(t, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		tree = radix.NewTree(a, bs)
		tap = NewTap(tree, bs, a.Total(), cfg)
		return tap
	}, blocks, bs)
	g := tap.ghosts[0]
	bases := [][]int32{cachetest.Tokens(0, 40), cachetest.Tokens(5000, 17), cachetest.Tokens(9000, 6)}
	salts := []string{"", "tenant-a", "tenant-b"}
	live := []int{}
	prompts := map[int][]int32{} // each live sequence's prompt
	computed := map[int]int{}    // how much of it has KV
	next := 0
	check := func(after string) {
		t.Helper()
		if fail != "" {
			t.Fatal(fail)
		}
		s := tree.Stats()
		if g.cached != s.Blocks || int(g.evicted) != s.Evicted || g.evictable() != tree.Evictable() {
			t.Fatalf("seed %d, after %s: the tree holds %d blocks, evicted %d, could evict %d; the LRU ghost %d, %d, %d",
				seed, after, s.Blocks, s.Evicted, tree.Evictable(), g.cached, g.evicted, g.evictable())
		}
		if err := tap.AuditCache(); err != nil {
			t.Fatalf("seed %d, after %s: %v", seed, after, err)
		}
	}
	pick := func() (int, int, bool) {
		if len(live) == 0 {
			return 0, 0, false
		}
		i := rng.IntN(len(live))
		return i, live[i], true
	}
	for step := range 400 {
		switch op := rng.IntN(12); {
		case op < 4: // admit: a prompt from a shared base, or one a live sequence is computing (a duplicate)
			var p []int32
			if _, id, ok := pick(); ok && op == 0 {
				p = slices.Clone(prompts[id])
			} else {
				b := bases[rng.IntN(len(bases))]
				p = cachetest.Join(b[:rng.IntN(len(b)+1)], cachetest.Tokens(20000+rng.IntN(6)*50, 1+rng.IntN(12)))
			}
			salt := salts[rng.IntN(len(salts))]
			if got := h.AdmitSalted(next, salt, p); got >= 0 {
				live = append(live, next)
				prompts[next], computed[next] = p, got
			}
			next++
		case op < 7: // a prefill chunk, committed
			if _, id, ok := pick(); ok && computed[id] < len(prompts[id]) {
				computed[id] = min(len(prompts[id]), computed[id]+1+rng.IntN(2*bs+3))
				h.Prefill(id, computed[id])
				h.CommitPrefix(id, computed[id])
			}
		case op < 9: // decode a few tokens once the prompt is computed
			if _, id, ok := pick(); ok && computed[id] == len(prompts[id]) {
				h.Extend(id, cachetest.Tokens(30000+rng.IntN(4), 1+rng.IntN(3)))
			}
		case op < 11: // finish: commit what is computed, and release
			if i, id, ok := pick(); ok {
				if computed[id] == len(prompts[id]) {
					h.Commit(id)
				}
				h.Release(id)
				live = slices.Delete(live, i, i+1)
			}
		default: // an eviction the engine did not ask for
			h.Cache.Evict(rng.IntN(4))
		}
		check(fmt.Sprintf("step %d", step))
	}
	for _, id := range live {
		h.Release(id)
	}
	h.Cache.Evict(h.Cache.Evictable())
	check("draining")
	return matched, int(g.unadopted)
}

// TestGhostLRUIsTheHashIndexOneRequestAtATime checks that the hash index's
// eviction is the radix tree's LRU when requests come one at a time: on
// random prompts over shared prefixes, each matched, computed, committed
// and released before the next, the LRU ghost finds exactly what the hash
// index finds on every Match. With requests overlapping it is not the
// same (TestGhostLRUAgainstTheOtherDesigns logs by how much on engine
// traces): a block a running sequence computed twice stays its own, so
// the index never evicts it where the tree drops it freeing nothing, the
// index queues blocks in the order of their last use when it next looks,
// not the order they became idle, and it may evict a block that is not a
// leaf.
func TestGhostLRUIsTheHashIndexOneRequestAtATime(t *testing.T) {
	matches := 0
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 12))
		bs := []int{1, 2, 4}[seed%3]
		cfg := Config{Policies: []Policy{LRU()}, OnMatch: func(ev MatchEvent) {
			if ev.Ghosts[0] != ev.Real {
				t.Fatalf("seed %d: Match of sequence %d (%d tokens): the hash index found %d, the LRU ghost %d", seed, ev.Seq, ev.Tokens, ev.Real, ev.Ghosts[0])
			}
			if ev.Real > 0 {
				matches++
			}
		}}
		h := cachetest.NewHarness(t, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
			return NewTap(blockhash.PrefixCache(a, bs), bs, a.Total(), cfg)
		}, 12+rng.IntN(40), bs)
		bases := [][]int32{cachetest.Tokens(0, 40), cachetest.Tokens(5000, 17), cachetest.Tokens(9000, 6)}
		for id := range 200 {
			b := bases[rng.IntN(len(bases))]
			p := cachetest.Join(b[:rng.IntN(len(b)+1)], cachetest.Tokens(20000+rng.IntN(6)*50, 1+rng.IntN(12)))
			if h.StartSalted(id, cachetest.Salts[rng.IntN(len(cachetest.Salts))], p) >= 0 {
				h.Finish(id)
			}
		}
	}
	if matches < 2000 {
		t.Fatalf("only %d Matches found anything; the check needs more", matches)
	}
}
