package blockhash_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
	"kvlab/common/kvevents"
	"kvlab/phase08_hashcow/blockhash"
)

// weak keeps 3 bits of a good hash: nearly every key collides, so only the
// cache's own checks keep it correct.
func weak(parent uint64, tokens []int32) uint64 { return blockhash.XXHash(parent, tokens) & 7 }

func factory(opts ...blockhash.Option) cachetest.Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return blockhash.New(a, bs, opts...) }
}

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  blockhash.Option
	}{
		{"default (MapHash)", nil}, // what New builds without options: the path every runnable takes
		{"wordhash", blockhash.WithHash(blockhash.WordHash)},
		{"xxhash", blockhash.WithHash(blockhash.XXHash)},
		{"fnv1a", blockhash.WithHash(blockhash.FNV1a)},
		{"vllm", blockhash.WithVLLMHash(kvevents.DefaultHashSeed)},
	} {
		var opts []blockhash.Option
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		t.Run(tc.name, func(t *testing.T) { cachetest.Run(t, factory(opts...)) })
	}
	// Once more without the cache's own audit, which settles the eviction
	// queue after every operation and would hide a method that forgot to.
	t.Run("default without AuditCache", func(t *testing.T) { cachetest.RunWithoutCacheAudit(t, factory()) })
}

// TestMatchNeverReturnsAnotherPrefixsKV is the property the whole design
// rests on, tried with a hash so weak that almost every lookup lands on a
// block of some other prefix: whatever Match lends must hold the KV of the
// query's own prefix. The harness checks every lent position's KV against
// a fingerprint of the query's prefix, and block ownership after every
// operation; this test adds that a match is never longer than the longest
// block-aligned prefix some committed sequence really had.
func TestMatchNeverReturnsAnotherPrefixsKV(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bs     int
		blocks int
	}{
		{"block=1", 1, 64},
		{"block=2", 2, 48},
		{"block=2/pressure", 2, 16},
		{"block=4", 4, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admitted, reused := 0, 0
			for seed := range uint64(6) {
				rng := rand.New(rand.NewPCG(seed, 99))
				h := cachetest.NewHarness(t, factory(blockhash.WithHash(weak)), tc.blocks, tc.bs)
				var committed [][]int32
				for id := range 150 {
					// Three token values: the same blocks recur at many
					// positions and after many different prefixes.
					prompt := make([]int32, 1+rng.IntN(12))
					for i := range prompt {
						prompt[i] = int32(rng.IntN(3))
					}
					longest := 0
					for _, c := range committed {
						longest = max(longest, commonPrefix(c, prompt)/tc.bs*tc.bs)
					}
					got := h.Start(id, prompt) // checks the KV of what it reused
					if got < 0 {
						continue // pool full of live sequences
					}
					if got > longest {
						t.Fatalf("seed %d, prompt %v: matched %d tokens; no committed prompt shares more than %d", seed, prompt, got, longest)
					}
					admitted, reused = admitted+1, reused+got
					if rng.IntN(3) > 0 {
						h.Commit(id)
						committed = append(committed, prompt)
					}
					h.Release(id)
				}
			}
			t.Logf("with the weak test hash (8 keys): %d admissions reused %d tokens, none beyond what a committed prompt shares, each lent block's KV checked", admitted, reused)
		})
	}
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestEvictionTakesTheTailFirst(t *testing.T) {
	// Blocks used at the same moment go deepest first, so what stays is
	// still a reachable prefix.
	h := cachetest.NewHarness(t, factory(), 16, 2)
	prompt := cachetest.Tokens(10, 6)
	h.Start(1, prompt)
	h.Finish(1)
	for _, want := range []int{4, 2, 0} {
		if n := h.Cache.Evict(1); n != 1 {
			t.Fatalf("Evict(1): have %d; want 1", n)
		}
		h.Audit("after evicting one block")
		if have := h.Pool.MatchLen("", prompt); have != want {
			t.Fatalf("MatchLen after eviction: have %d; want %d", have, want)
		}
	}
}

// TestEvictionFollowsWhenBlocksBecameEvictable pins the queue's order down
// where it differs from one by last use: p is matched before q, but q's
// sequence ends first, so q's blocks, evictable first, go first (the order
// of vLLM's free queue). The sequences end without a commit, which would
// count as a use of every block: ordered by last Match or Insert, p's
// blocks would go first.
func TestEvictionFollowsWhenBlocksBecameEvictable(t *testing.T) {
	h := cachetest.NewHarness(t, factory(), 32, 2)
	p, q := cachetest.Tokens(10, 4), cachetest.Tokens(100, 4)
	h.Start(1, p)
	h.Finish(1)
	h.Start(2, q)
	h.Finish(2)
	h.Start(3, p) // p's blocks matched first
	h.Start(4, q)
	h.Release(4)
	if have := h.Cache.Evictable(); have != 2 {
		t.Fatalf("evictable once q's sequence ended: have %d; want 2", have)
	}
	h.Release(3)
	for _, want := range []struct{ p, q int }{{4, 2}, {4, 0}, {2, 0}, {0, 0}} {
		if n := h.Cache.Evict(1); n != 1 {
			t.Fatalf("Evict(1): have %d; want 1", n)
		}
		h.Audit("after evicting one block")
		if hp, hq := h.Pool.MatchLen("", p), h.Pool.MatchLen("", q); hp != want.p || hq != want.q {
			t.Fatalf("MatchLen after eviction: p %d, q %d; want p %d, q %d", hp, hq, want.p, want.q)
		}
	}
}

func TestReleasedForksBecomeEvictable(t *testing.T) {
	// The pool's references on cached blocks (here a fork's) go away
	// without a call into the cache; Evictable must still see them go.
	h := cachetest.NewHarness(t, factory(), 16, 2)
	prompt := cachetest.Tokens(10, 6)
	h.Start(1, prompt)
	h.Commit(1)
	if err := h.Pool.Fork(1, 2); err != nil {
		t.Fatal(err)
	}
	h.Release(1)
	if have := h.Cache.Evictable(); have != 0 {
		t.Fatalf("evictable while the fork holds every block: have %d; want 0", have)
	}
	h.Pool.Release(2)
	h.Audit("after releasing the fork")
	if have := h.Cache.Evictable(); have != 3 {
		t.Fatalf("evictable after the fork is gone: have %d; want 3", have)
	}
}

func TestHoldsCountsTheIndexAndEveryMatch(t *testing.T) {
	h := cachetest.NewHarness(t, factory(), 16, 2)
	prompt := cachetest.Tokens(10, 4)
	h.Start(1, prompt)
	h.Finish(1)
	h.Start(2, prompt)
	h.Start(3, prompt)
	blocks := h.Pool.Pages(2)
	for _, b := range blocks {
		if have := h.Cache.Holds(b); have != 3 {
			t.Fatalf("Holds(%d) with the index and two sequences: have %d; want 3", b, have)
		}
		if have := h.Pool.Allocator().Refs(b); have != 3 {
			t.Fatalf("allocator refs of %d: have %d; want 3", b, have)
		}
	}
	h.Release(2)
	h.Release(3)
	for _, b := range blocks {
		if have := h.Cache.Holds(b); have != 1 {
			t.Fatalf("Holds(%d) with the index alone: have %d; want 1", b, have)
		}
	}
}

func TestComputedTwiceCachesOneCopy(t *testing.T) {
	// Two requests with one prompt, both admitted before either commits:
	// both compute it. The first commit is cached; the second sequence's
	// copy stays its own and is freed with it.
	h := cachetest.NewHarness(t, factory(), 16, 2)
	prompt := cachetest.Tokens(10, 6)
	h.Start(1, prompt)
	h.Start(2, prompt)
	h.Commit(1)
	h.Commit(2)
	if have := h.Cache.Stats().Blocks; have != 3 {
		t.Fatalf("cached blocks: have %d; want 3", have)
	}
	h.Release(1)
	h.Release(2)
	if have, want := h.Pool.Allocator().NumFree(), 16-3; have != want {
		t.Fatalf("free blocks once both finished: have %d; want %d (only one copy cached)", have, want)
	}
	if have := h.Start(3, prompt); have != 6 {
		t.Fatalf("cached tokens for a third request: have %d; want 6", have)
	}
	h.Release(3)
}

func TestPitfallCommitContinuesFromAnOrphanedBlock(t *testing.T) {
	// The sequence an outside fuzzer found, through the pool as the engine
	// drives it (block size 2):
	//   - A admits [1 3 3 1 1 2]; B admits [1 3], computes and commits it;
	//     A computes 5 tokens, [1 3] again among them, and commits them:
	//     B's [1 3] stands, and A's [3 1] is cached under it;
	//   - B finishes and its [1 3] is evicted: A's [3 1] is orphaned;
	//   - C admits the whole prompt, finds nothing, computes and commits
	//     it: C's three blocks take the three keys;
	//   - A computes its sixth token and commits 6 tokens.
	// Continuing A's chain from its orphaned [3 1] reaches C's [1 2] with
	// the wrong parent and replaces it with A's own, unreachable one: the
	// prompt's MatchLen drops from 6 to 4 and the index holds a fifth,
	// dead block. A commit must continue from the reachable entry.
	h := cachetest.NewHarness(t, factory(), 16, 2)
	prompt := []int32{1, 3, 3, 1, 1, 2}
	h.Admit(1, prompt)
	h.Admit(2, prompt[:2])
	h.Prefill(2, 2)
	h.CommitPrefix(2, 2)
	h.Prefill(1, 5)
	h.CommitPrefix(1, 5)
	h.Finish(2)
	require.Equal(t, 1, h.Cache.Evict(1))
	require.Equal(t, 0, h.Pool.MatchLen("", prompt), "B's [1 3] was the block evicted")
	require.Equal(t, 0, h.Start(3, prompt))
	h.Commit(3)
	require.Equal(t, 6, h.Pool.MatchLen("", prompt), "after C's commit")
	h.Prefill(1, 6)
	h.CommitPrefix(1, 6)
	matched, blocks := h.Pool.MatchLen("", prompt), h.Cache.Stats().Blocks
	t.Logf("after A commits on from its orphaned [3 1]: the prompt matches %d of 6 tokens and the index holds %d blocks (a commit that continued from the orphan would leave 4 tokens and a fifth, dead block)", matched, blocks)
	require.Equal(t, 6, matched, "after A's commit")
	require.Equal(t, 4, blocks, "cached blocks: C's three and A's orphaned [3 1]")
	h.Release(1)
	h.Release(3)
	require.Equal(t, 1, h.Cache.Evict(1))
	require.Equal(t, 6, h.Pool.MatchLen("", prompt), "the orphaned block goes first")
}

// TestMatchComparesEveryToken changes one token of a cached prompt at a
// time and requires the match to end at the block holding it: the walk's
// token compare, which reads a block as 8-byte words, 64 bytes at a time,
// then 4 bytes at a time, must see every bit of every token, for block
// sizes with and without a tail, and across the walk's chunks of blocks.
// The token-blind hash keys every block by its position alone, so only the
// compare can tell the prompts apart.
func TestMatchComparesEveryToken(t *testing.T) {
	blind := func(parent uint64, _ []int32) uint64 { return parent*31 + 7 }
	for _, hash := range []struct {
		name string
		opts []blockhash.Option
	}{{"maphash", nil}, {"blind", []blockhash.Option{blockhash.WithHash(blind)}}} {
		for _, bs := range []int{1, 2, 3, 16, 17, 40} {
			const blocks = 37 // more than two of the walk's chunks
			h := cachetest.NewHarness(t, factory(hash.opts...), blocks+8, bs)
			prompt := cachetest.Tokens(1000, blocks*bs)
			h.Start(0, prompt)
			h.Finish(0)
			for p := range prompt {
				for _, bit := range []int32{1, 1 << 16, -1 << 31} {
					q := append([]int32(nil), prompt...)
					q[p] ^= bit
					if got, want := h.Cache.MatchLen("", q), p/bs*bs; got != want {
						t.Fatalf("%s, block size %d, token %d changed by %#x: matched %d tokens; want %d", hash.name, bs, p, bit, got, want)
					}
				}
			}
			if got := h.Cache.MatchLen("", prompt); got != len(prompt) {
				t.Fatalf("%s, block size %d: the prompt itself matched %d of %d tokens", hash.name, bs, got, len(prompt))
			}
		}
	}
}

// TestHoldsCountsPastTheRecordsRoom matches one block from more sequences
// than its record counts (usersMax, 65535) and requires Holds to count
// every one, and Release to give every one back.
func TestHoldsCountsPastTheRecordsRoom(t *testing.T) {
	h := cachetest.NewHarness(t, factory(), 8, 2)
	prompt := cachetest.Tokens(10, 2)
	h.Start(1, prompt)
	h.Finish(1)
	const seqs = 1<<16 + 10
	for seq := range seqs {
		if _, n := h.Cache.Match(100+seq, "", prompt); n != 2 {
			t.Fatalf("match %d: %d tokens; want 2", seq, n)
		}
	}
	blocks, _ := h.Cache.Match(99, "", prompt)
	b := blocks[0]
	if have, want := h.Cache.Holds(b), seqs+2; have != want {
		t.Fatalf("Holds with %d sequences: have %d; want %d", seqs+1, have, want)
	}
	for seq := range seqs {
		h.Cache.Release(100 + seq)
	}
	h.Cache.Release(99)
	if have := h.Cache.Holds(b); have != 1 {
		t.Fatalf("Holds after every release: have %d; want 1", have)
	}
	h.Audit("after every release")
}
