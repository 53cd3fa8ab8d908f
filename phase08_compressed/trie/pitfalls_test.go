package trie

import (
	"errors"
	"kvlab/common/kvcache/cachetest"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/engine"
	"kvlab/common/kvcache"
)

// The tests below reproduce each entry of PITFALLS.md: a subtest with the
// mistake (see bugs_test.go) shows the symptom, a subtest with the library
// shows it gone.

func TestPitfallRoundUpClaimsDivergedTokens(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// Cached [1,2,3,5] in blocks 0 and 1, block size 2; the query
	// [1,2,3,99] shares 3 tokens. Rounded up, that claims block 1, which
	// holds the KV of token 5 where the query has 99.
	tests := []struct {
		name    string
		wrap    func(*Trie) kvcache.PrefixCache
		blocks  []int32
		matched int
	}{
		{"rounded up", with(roundUp), []int32{0, 1}, 4},
		{"rounded down", nil, []int32{0}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, _ := newPool(t, 8, 2, DeepestFirst, tc.wrap)
			run(t, pool, 1, []int32{1, 2, 3, 5})
			blocks, matched := pool.Cache().Match(2, "", []int32{1, 2, 3, 99})
			sy.Add(tc.name, "cached [1 2 3 5], block size 2: Match([1 2 3 99]) = (%v, %d)", blocks, matched)
			if matched != tc.matched || !slices.Equal(blocks, tc.blocks) {
				t.Fatalf("Match([1 2 3 99]): have (%v, %d); want (%v, %d)", blocks, matched, tc.blocks, tc.matched)
			}
			pool.Cache().Release(2)
		})
	}
}

func TestPitfallRoundUpEndToEnd(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// B agrees with A on 7 tokens (block size 4). Rounded up, B takes
	// A's second block and attends to A's token 7 instead of its own.
	a := toks(40, 12)
	b := cat(a[:7], toks(300, 7))
	waves := [][]engine.Request{{{ID: 1, Prompt: a, MaxTokens: 3}}, {{ID: 2, Prompt: b, MaxTokens: 6}}}
	base, _ := serve(t, engineConfig(4, 64, nil), waves...)

	t.Run("rounded up", func(t *testing.T) {
		have, _ := serve(t, engineConfig(4, 64, buggyCache(roundUp)), waves...)
		g, w := outGap(have, base)
		sy.Add("rounded up", "B, agreeing with A on 7 tokens, reuses %d; %d requests generate other tokens, logits differ by up to %.3g", have[2].Cached, w, g)
		require.Equal(t, 8, have[2].Cached, "cached tokens of B")
		require.NotEqual(t, base[2].Logits, have[2].Logits, "B's logits should differ from the uncached run")
	})
	t.Run("rounded down", func(t *testing.T) {
		have, _ := serve(t, engineConfig(4, 64, trieCache(DeepestFirst)), waves...)
		g, w := outGap(have, base)
		sy.Add("rounded down", "B reuses %d; %d requests differ, logits by %.3g", have[2].Cached, w, g)
		require.Equal(t, 4, have[2].Cached, "cached tokens of B")
		sameOutput(t, base, have)
	})
}

// splitFixture caches A = 0..5 (blocks 0 1 2, block size 2) with a child
// C = 50 51 (block 3) below it, then B = 0 1 90 91, which splits A after
// its first block: head 0 1, tail 2..5 with C below it, and B's leaf.
// wrap is as for newPool.
func splitFixture(t *testing.T, wrap func(*Trie) kvcache.PrefixCache) (*kvcache.Pool, *Trie) {
	t.Helper()
	pool, tr := newPool(t, 16, 2, DeepestFirst, wrap)
	run(t, pool, 1, toks(0, 6))
	run(t, pool, 2, cat(toks(0, 6), []int32{50, 51}))
	run(t, pool, 3, []int32{0, 1, 90, 91})
	return pool, tr
}

func TestPitfallSplitWithoutReparent(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	ac := cat(toks(0, 6), []int32{50, 51})
	t.Run("not re-parented", func(t *testing.T) {
		pool, tr := splitFixture(t, with(noReparent))
		require.ErrorContains(t, checkStructure(tr), "parent link")
		// C is the deepest leaf. Evicting it frees its block but deletes
		// it from the head's map, where it is not: it stays in the tail's.
		require.Equal(t, 1, pool.Cache().Evict(1))
		require.Equal(t, 0, pool.Allocator().Refs(3), "C's block is free")
		require.Equal(t, 8, tr.MatchLen("", ac), "the trie still finds C")
		// The free block goes to the next sequence that needs one, and
		// the trie lends it as C's KV.
		open(t, pool, 4, toks(700, 2))
		require.Equal(t, []int32{3}, pool.Pages(4))
		blocks, _ := tr.Match(5, "", ac)
		sy.Add("not re-parented", "structure check: %v; after evicting C (block 3 freed, then reused by sequence 4), A+C still matches %d tokens and is lent blocks %v", checkStructure(tr), tr.MatchLen("", ac), blocks)
		require.Equal(t, []int32{0, 1, 2, 3}, blocks, "block 3 now holds sequence 4's KV")
	})
	t.Run("re-parented", func(t *testing.T) {
		pool, tr := splitFixture(t, nil)
		structure := checkStructure(tr)
		evicted := pool.Cache().Evict(1)
		sy.Add("re-parented", "structure check: %v; after evicting C (%d block), A+C matches %d tokens", structure, evicted, tr.MatchLen("", ac))
		require.NoError(t, structure)
		require.Equal(t, 1, evicted)
		require.Equal(t, 6, tr.MatchLen("", ac), "C is gone, its parent stays")
		audit(t, pool, "after evicting C")
	})
}

func TestPitfallSplitWithoutReparentEndToEnd(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// A, then A+C, cache A with C below it; B splits A after one block.
	// Evicting one block takes C. A later prompt A+C+D must not find it.
	a, c := toks(40, 12), toks(200, 4)
	waves := [][]engine.Request{
		{{ID: 1, Prompt: a, MaxTokens: 1}},
		{{ID: 2, Prompt: cat(a, c), MaxTokens: 1}},
		{{ID: 3, Prompt: cat(a[:4], toks(300, 8)), MaxTokens: 1}},
		{{ID: 4, Prompt: toks(400, 4), MaxTokens: 1}}, // gets the block evicted before this wave
		{{ID: 5, Prompt: cat(a, c, toks(500, 5)), MaxTokens: 6}},
	}
	evictBeforeWave4 := func(e *engine.Engine, wave int) {
		if c := e.Pool().Cache(); c != nil && wave == 3 {
			require.Equal(t, 1, c.Evict(1))
		}
	}
	base, _ := serveWith(t, engineConfig(4, 64, nil), evictBeforeWave4, waves...)

	t.Run("not re-parented", func(t *testing.T) {
		have, _ := serveWith(t, engineConfig(4, 64, buggyCache(noReparent)), evictBeforeWave4, waves...)
		g, w := outGap(have, base)
		sy.Add("not re-parented", "request 5 reuses %d tokens, C's evicted block among them; %d requests generate other tokens, logits differ by up to %.3g", have[5].Cached, w, g)
		require.Equal(t, 16, have[5].Cached, "the trie lent C's block, which request 4 wrote")
		require.NotEqual(t, base[5].Logits, have[5].Logits, "request 5's logits should differ from the uncached run")
	})
	t.Run("re-parented", func(t *testing.T) {
		have, _ := serveWith(t, engineConfig(4, 64, trieCache(DeepestFirst)), evictBeforeWave4, waves...)
		g, w := outGap(have, base)
		sy.Add("re-parented", "request 5 reuses %d; %d requests differ, logits by %.3g", have[5].Cached, w, g)
		require.Equal(t, 12, have[5].Cached)
		sameOutput(t, base, have)
	})
}

func TestPitfallSplitSharesChildrenMap(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// A query that skips the tail's tokens, 0 1 then C's 50 51, was never
	// cached: its second block must not be found.
	skipsTail := []int32{0, 1, 50, 51}
	t.Run("one map", func(t *testing.T) {
		_, tr := splitFixture(t, with(sharedChildren))
		head := tr.root.children[keyOf([]int32{0, 1})]
		tail := head.children[keyOf([]int32{2, 3})]
		sy.Add("one map", "the tail is its own child: %v; [0 1 50 51], never cached, matches %d tokens", tail == tail.children[keyOf([]int32{2, 3})], tr.MatchLen("", skipsTail))
		require.Same(t, tail, tail.children[keyOf([]int32{2, 3})], "the tail is its own child: a cycle")
		require.Equal(t, 4, tr.MatchLen("", skipsTail), "C is found right below the head")
	})
	t.Run("fresh map", func(t *testing.T) {
		_, tr := splitFixture(t, nil)
		sy.Add("fresh map", "structure check: %v; [0 1 50 51] matches %d", checkStructure(tr), tr.MatchLen("", skipsTail))
		require.NoError(t, checkStructure(tr))
		require.Equal(t, 2, tr.MatchLen("", skipsTail))
	})
}

func TestPitfallAssignToNodeCopy(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	skipsTail := []int32{0, 1, 50, 51}
	t.Run("copy", func(t *testing.T) {
		pool, tr := splitFixture(t, with(headCopy))
		skipped, a := tr.MatchLen("", skipsTail), tr.MatchLen("", toks(0, 6))
		require.Equal(t, 4, skipped, "C still hangs right below the shortened head")
		require.Equal(t, 2, tr.MatchLen("", toks(0, 6)), "A's tail tokens are found nowhere")
		// The tail's blocks (1 and 2) are listed by no reachable node:
		// nothing can ever evict them.
		tr.rebuild() // the buggy split keeps no eviction bookkeeping
		tr.Evict(tr.Evictable())
		sy.Add("copy", "[0 1 50 51], never cached, matches %d tokens, A matches %d of 6; after evicting all, %d blocks stay held and unreachable, %d of 16 free", skipped, a, tr.Stats().Blocks, pool.Allocator().NumFree())
		require.Equal(t, 2, tr.Stats().Blocks, "blocks the trie holds but can no longer reach")
		require.Less(t, pool.Allocator().NumFree(), 16)
	})
	t.Run("node", func(t *testing.T) {
		pool, tr := splitFixture(t, nil)
		require.Equal(t, 2, tr.MatchLen("", skipsTail))
		require.Equal(t, 6, tr.MatchLen("", toks(0, 6)))
		skipped, a := tr.MatchLen("", skipsTail), tr.MatchLen("", toks(0, 6))
		tr.Evict(tr.Evictable())
		sy.Add("node", "[0 1 50 51] matches %d, A matches %d of 6; after evicting all, %d of 16 free", skipped, a, pool.Allocator().NumFree())
		require.Equal(t, 16, pool.Allocator().NumFree())
	})
}

func TestPitfallRangeOverMapKeys(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	x := toks(0, 4)
	t.Run("keys", func(t *testing.T) {
		pool, tr := newPool(t, 8, 2, DeepestFirst, with(rangeKeys))
		run(t, pool, 1, x)
		require.Equal(t, 2, pool.Cache().Evict(2))
		require.Equal(t, 4, tr.MatchLen("", x), "the evicted node was never removed")
		open(t, pool, 2, toks(100, 4)) // takes the two freed blocks
		blocks, _ := tr.Match(3, "", x)
		sy.Add("keys", "after evicting x's 2 blocks, x still matches 4 tokens and is lent blocks %v, which sequence 2 now owns (%v)", blocks, pool.Pages(2))
		require.ElementsMatch(t, pool.Pages(2), blocks, "x's match lends sequence 2's blocks")
	})
	t.Run("nodes", func(t *testing.T) {
		pool, tr := newPool(t, 8, 2, DeepestFirst, nil)
		run(t, pool, 1, x)
		require.Equal(t, 2, pool.Cache().Evict(2))
		sy.Add("nodes", "after evicting x's 2 blocks, x matches %d tokens", tr.MatchLen("", x))
		require.Equal(t, 0, tr.MatchLen("", x))
		require.NoError(t, checkStructure(tr))
	})
}

func TestPitfallBlocksSlicedByTokenCount(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// After the split at 2 tokens, 0 1 2 3 must be lent blocks 0 and 1.
	query := []int32{0, 1, 2, 3, 77, 77}
	t.Run("by tokens", func(t *testing.T) {
		_, tr := splitFixture(t, with(blocksByTokens))
		require.ErrorContains(t, checkStructure(tr), "2 tokens for 2 blocks")
		blocks, matched := tr.Match(9, "", query)
		sy.Add("by tokens", "structure check: %v; %d tokens matched, lent blocks %v (block 2 holds tokens 4 and 5)", checkStructure(tr), matched, blocks)
		require.Equal(t, 4, matched)
		require.Equal(t, []int32{0, 2}, blocks, "block 2 holds tokens 4 and 5, lent for 2 and 3")
	})
	t.Run("by blocks", func(t *testing.T) {
		_, tr := splitFixture(t, nil)
		blocks, matched := tr.Match(9, "", query)
		sy.Add("by blocks", "%d tokens matched, lent blocks %v", matched, blocks)
		require.Equal(t, 4, matched)
		require.Equal(t, []int32{0, 1}, blocks)
	})
}

func TestPitfallMissingIncref(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	x := toks(0, 4)
	tests := []struct {
		name            string
		wrap            func(*Trie) kvcache.PrefixCache
		refs, evictable int
	}{
		{"no incref", with(noIncref), 1, 2},
		{"incref", nil, 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, _ := newPool(t, 8, 2, DeepestFirst, tc.wrap)
			run(t, pool, 1, x)
			open(t, pool, 2, x) // sequence 2 reads blocks 0 and 1
			sy.Add(tc.name, "block 0, read by sequence 2, has %d references; %d blocks evictable under the reader", pool.Allocator().Refs(0), pool.Cache().Evictable())
			require.Equal(t, tc.refs, pool.Allocator().Refs(0), "references on a block sequence 2 reads")
			require.Equal(t, tc.evictable, pool.Cache().Evictable())
			require.Equal(t, tc.evictable, pool.Cache().Evict(2), "blocks freed under sequence 2")
		})
	}
}

func TestPitfallMissingIncrefEndToEnd(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// Request 2 finds request 1's 16-token prompt cached. Request 3,
	// admitted in the same step, needs more blocks than are free, so the
	// pool evicts. Without the references request 2 should hold, request
	// 1's blocks look idle: two are evicted and rewritten with request 3's
	// KV while request 2 attends to them.
	p := toks(40, 16)
	waves := [][]engine.Request{
		{{ID: 1, Prompt: p, MaxTokens: 1}},
		{{ID: 2, Prompt: cat(p, toks(100, 2)), MaxTokens: 2}, {ID: 3, Prompt: toks(200, 36), MaxTokens: 1}},
	}
	base, _ := serve(t, engineConfig(4, 12, nil), waves...)
	t.Run("no incref", func(t *testing.T) {
		have, stats := serve(t, engineConfig(4, 12, buggyCache(noIncref)), waves...)
		g, w := outGap(have, base)
		sy.Add("no incref", "%d blocks evicted while request 2 read them (%d tokens cached); %d requests generate other tokens, logits differ by up to %.3g", stats.Evicted, have[2].Cached, w, g)
		require.Positive(t, stats.Evicted)
		require.Equal(t, 16, have[2].Cached)
		require.NotEqual(t, base[2].Logits, have[2].Logits, "request 2's logits should differ from the uncached run")
	})
	t.Run("incref", func(t *testing.T) {
		have, stats := serve(t, engineConfig(4, 12, trieCache(DeepestFirst)), waves...)
		g, w := outGap(have, base)
		sy.Add("incref", "%d blocks evicted, %d tokens cached; %d requests differ, logits by %.3g", stats.Evicted, have[2].Cached, w, g)
		require.Equal(t, 16, have[2].Cached)
		sameOutput(t, base, have)
	})
}

func TestPitfallInsertDropsDuplicateBlocks(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// Two sequences compute one prompt at once and both commit it. The
	// second's pages duplicate what the trie holds.
	prompt := toks(0, 6)
	t.Run("adopts and drops", func(t *testing.T) {
		pool, _ := newPool(t, 16, 2, DeepestFirst, with(adoptDropsDups))
		open(t, pool, 1, prompt)
		open(t, pool, 2, prompt)
		pool.Commit(1, prompt)
		pool.Commit(2, prompt)
		dups := slices.Clone(pool.Pages(2))
		pool.Release(1)
		pool.Release(2)
		sy.Add("adopts and drops", "after both sequences release, the audit finds leaked blocks %v", pool.Audit().Leaked)
		require.Equal(t, dups, pool.Audit().Leaked, "the second sequence's pages leak")
	})
	t.Run("adopts nothing", func(t *testing.T) {
		pool, tr := newPool(t, 16, 2, DeepestFirst, nil)
		open(t, pool, 1, prompt)
		open(t, pool, 2, prompt)
		pool.Commit(1, prompt)
		pool.Commit(2, prompt)
		pool.Release(1)
		pool.Release(2)
		audit(t, pool, "after both releases")
		tr.Evict(tr.Evictable())
		sy.Add("adopts nothing", "audit: %v; after evicting all, %d of 16 free", pool.Audit().Err(), pool.Allocator().NumFree())
		require.Equal(t, 16, pool.Allocator().NumFree())
	})
}

// slotRequest ports the request state of a scheduler that keeps a flat list
// of KV slots per request.
type slotRequest struct {
	prompt []int32
	curLen int     // tokens whose KV is in the cache
	slots  []int32 // slot of each position, filled as blocks arrive
}

// admit ports that scheduler's admission: take the cached blocks, set
// curLen, then allocate blocks for the rest and append their slots. With
// populate false the cached blocks' slots are never added.
func admit(r *slotRequest, cached []int32, matched int, fresh []int32, bs int, populate bool) {
	r.curLen = matched
	if populate {
		for _, b := range cached {
			for i := range bs {
				r.slots = append(r.slots, b*int32(bs)+int32(i))
			}
		}
	}
	for _, b := range fresh {
		for i := range bs {
			r.slots = append(r.slots, b*int32(bs)+int32(i))
		}
	}
}

// prefillSlots ports the batch assembly: the slot of every position still
// to compute.
func prefillSlots(r *slotRequest) []int32 {
	var out []int32
	for p := r.curLen; p < len(r.prompt); p++ {
		out = append(out, r.slots[p])
	}
	return out
}

func TestPitfallCachedBlocksNotInSlotMap(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// 8 of 10 tokens are cached in blocks 0 and 1; block 2 is new.
	r := &slotRequest{prompt: toks(0, 10)}
	t.Run("not populated", func(t *testing.T) {
		admit(r, []int32{0, 1}, 8, []int32{2}, 4, false)
		func() {
			defer func() {
				sy.Add("not populated", "8 of 10 tokens cached, %d slots listed; the first prefill slot lookup panics: %v", len(r.slots), recover())
			}()
			prefillSlots(r)
		}()
		require.PanicsWithError(t, "runtime error: index out of range [8] with length 4", func() { prefillSlots(r) })
	})
	t.Run("populated", func(t *testing.T) {
		r := &slotRequest{prompt: toks(0, 10)}
		admit(r, []int32{0, 1}, 8, []int32{2}, 4, true)
		sy.Add("populated", "%d slots listed, prefill slots %v", len(r.slots), prefillSlots(r))
		require.Equal(t, []int32{8, 9}, prefillSlots(r))
	})
	t.Run("pool", func(t *testing.T) {
		// The pool builds one page table from the lent blocks and the
		// fresh ones, so a cached position can never miss its slot.
		pool, _ := newPool(t, 8, 4, DeepestFirst, nil)
		run(t, pool, 1, toks(0, 8))
		require.Equal(t, 8, open(t, pool, 2, toks(0, 10)))
		require.Equal(t, []int32{0, 1, 2}, pool.Pages(2))
		sy.Add("pool", "page table %v, prefill slots %v", pool.Pages(2), pool.Slots(nil, 2, 8, 2))
		require.Equal(t, []int32{8, 9}, pool.Slots(nil, 2, 8, 2))
	})
}

// promptOnly is a trie whose commits after a sequence's first one (the
// prompt, at the end of prefill) are cut back to that first length: the
// output is never cached.
type promptOnly struct {
	*Trie
	first map[int]int
}

func (p *promptOnly) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	if n, ok := p.first[seq]; ok {
		tokens = tokens[:n] // BUG: the finish commit keeps only the prompt
	} else {
		p.first[seq] = len(tokens)
	}
	return p.Trie.Insert(seq, salt, tokens, pages, lent)
}

func TestPitfallPromptOnlyInsertAtFinish(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	const bs = 4
	reqs := multiTurn(t)
	promptOnlyCache := func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return &promptOnly{New(a, bs, DeepestFirst), map[int]int{}}
	}
	base := converse(t, engineConfig(bs, 256, nil), reqs)
	t.Run("prompt only", func(t *testing.T) {
		conv := converse(t, engineConfig(bs, 256, promptOnlyCache), reqs)
		sameOutput(t, base.outs, conv.outs) // a loss of work, not of correctness
		lost := 0
		for _, r := range reqs {
			if r.FollowUp == nil {
				continue
			}
			prev := r.FollowUp.Prev
			require.Equal(t, alignDown(len(conv.prompts[prev]), bs), conv.outs[r.ID].Cached, "request %d finds only the previous prompt", r.ID)
			lost += alignDown(len(conv.prompts[prev])+len(conv.outs[prev].Tokens)-1, bs) - conv.outs[r.ID].Cached
		}
		sy.Add("prompt only", "follow-up turns recompute %d tokens of earlier answers", lost)
		require.Positive(t, lost, "tokens of previous outputs recomputed")
	})
	t.Run("prompt and output", func(t *testing.T) {
		conv := converse(t, engineConfig(bs, 256, trieCache(DeepestFirst)), reqs)
		lost := 0
		for _, r := range reqs {
			if r.FollowUp != nil {
				prev := r.FollowUp.Prev
				lost += alignDown(len(conv.prompts[prev])+len(conv.outs[prev].Tokens)-1, bs) - conv.outs[r.ID].Cached
				require.Equal(t, alignDown(len(conv.prompts[prev])+len(conv.outs[prev].Tokens)-1, bs), conv.outs[r.ID].Cached)
			}
		}
		sy.Add("prompt and output", "follow-up turns recompute %d tokens of earlier answers", lost)
	})
}

func TestPitfallFirstTokenKeysCollide(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// Block size 2: x and y share their first token only, so neither can
	// hold the other's first block, and both must be cached side by side.
	x, y := []int32{7, 1, 2, 3}, []int32{7, 9, 8, 8}
	t.Run("first token", func(t *testing.T) {
		pool, tr := newPool(t, 8, 2, DeepestFirst, with(firstTokenKeys))
		run(t, pool, 1, x)
		run(t, pool, 2, y)
		xm, held, reach := pool.Cache().MatchLen("", x), tr.Stats().Blocks, reachableBlocks(tr.Shape())
		require.Equal(t, 4, pool.Cache().MatchLen("", y))
		require.Equal(t, 0, pool.Cache().MatchLen("", x), "y replaced x in the root's map")
		require.Equal(t, 4, tr.Stats().Blocks, "blocks the trie holds")
		require.Equal(t, 2, reachableBlocks(tr.Shape()), "blocks of nodes it can reach")
		pool.Cache().Evict(pool.Cache().Evictable())
		sy.Add("first token", "x matches %d of 4 tokens after y; the trie holds %d blocks and reaches %d; after evicting all, %d of 8 free", xm, held, reach, pool.Allocator().NumFree())
		require.Equal(t, 6, pool.Allocator().NumFree(), "x's two blocks can never be freed")
	})
	t.Run("first block", func(t *testing.T) {
		pool, tr := newPool(t, 8, 2, DeepestFirst, nil)
		run(t, pool, 1, x)
		run(t, pool, 2, y)
		require.Equal(t, 4, tr.MatchLen("", x))
		require.Equal(t, 4, tr.MatchLen("", y))
		xm := tr.MatchLen("", x)
		tr.Evict(tr.Evictable())
		sy.Add("first block", "x matches %d of 4 tokens after y; after evicting all, %d of 8 free", xm, pool.Allocator().NumFree())
		require.Equal(t, 8, pool.Allocator().NumFree())
	})
}

// reachableBlocks counts the blocks of every node in s.
func reachableBlocks(s Shape) int {
	n := len(s.Blocks)
	for _, c := range s.Children {
		n += reachableBlocks(c)
	}
	return n
}

func TestPitfallWholeNodeEvictionOvershoots(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// One cached 64-token system prompt (16 blocks); the pool is one block
	// short.
	system := toks(0, 64)
	tests := []struct {
		name          string
		wrap          func(*Trie) kvcache.PrefixCache
		freed, cached int
	}{
		{"whole leaves", with(wholeLeaves), 16, 0},
		{"trimmed leaves", nil, 1, 60},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, _ := newPool(t, 16, 4, DeepestFirst, tc.wrap)
			run(t, pool, 1, system)
			freed := pool.Cache().Evict(1)
			sy.Add(tc.name, "asked to free 1 block, freed %d; %d of 64 system prompt tokens still cached", freed, pool.Cache().MatchLen("", system))
			require.Equal(t, tc.freed, freed, "blocks freed when one was asked for")
			require.Equal(t, tc.cached, pool.Cache().MatchLen("", system), "system prompt tokens still cached")
		})
	}
}

func TestPitfallInsertKeepsCallersSlice(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// The caller reuses its token slice for the next prompt, changing a
	// token in its second block (as the shared Insert benchmark does with
	// the first). The new prompt was never computed: only its first block
	// is cached.
	tests := []struct {
		name string
		wrap func(*Trie) kvcache.PrefixCache
		want int
	}{
		{"kept", with(callersSlice), 8},
		{"copied", nil, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, _ := newPool(t, 8, 4, DeepestFirst, tc.wrap)
			prompt := toks(0, 8)
			run(t, pool, 1, prompt)
			prompt[5] = 99
			sy.Add(tc.name, "after the caller changes token 5 of its slice, the never-computed prompt matches %d of 8 tokens", pool.Cache().MatchLen("", prompt))
			require.Equal(t, tc.want, pool.Cache().MatchLen("", prompt))
		})
	}
}

func TestPitfallEvictableCountsPinnedAncestors(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// Prompt P is cached by sequence 1's commit; sequence 2 computed P
	// itself and hangs its own tail below it, and is still live. P's
	// blocks have no other holder, but P is not a leaf: nothing can go.
	setup := func(t *testing.T, wrap func(*Trie) kvcache.PrefixCache) *kvcache.Pool {
		pool, _ := newPool(t, 6, 2, DeepestFirst, wrap)
		p := toks(0, 4)
		open(t, pool, 1, p)
		open(t, pool, 2, cat(p, toks(100, 2)))
		pool.Commit(1, p)
		pool.Commit(2, cat(p, toks(100, 2)))
		pool.Release(1)
		return pool
	}
	t.Run("every idle block", func(t *testing.T) {
		pool := setup(t, with(countAllUnpinned))
		told := pool.FreeTokens()
		require.Equal(t, 3*2, told, "one free block and P's two, the pool is told")
		_, err := pool.Open(3, "", toks(300, 6))
		require.NoError(t, err)
		grow := pool.Grow(3, 6)
		sy.Add("every idle block", "the pool is told %d tokens fit; growing a 6-token prompt fails: %v", told, grow)
		var oob *kvcache.OutOfBlocksError
		require.True(t, errors.As(grow, &oob), "a 3-block prompt the pool was told fits cannot grow")
	})
	t.Run("whole subtrees", func(t *testing.T) {
		pool := setup(t, nil)
		told := pool.FreeTokens()
		require.Equal(t, 1*2, told, "one free block")
		_, err := pool.Open(3, "", toks(300, 2))
		require.NoError(t, err)
		grow := pool.Grow(3, 2)
		sy.Add("whole subtrees", "the pool is told %d tokens fit; growing a 2-token prompt: %v", told, grow)
		require.NoError(t, grow)
	})
}

func TestPitfallPointerIntoHeapSlice(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	// Two idle leaves, x older than y (block size 2). Evicting x's two
	// blocks must remove x and leave y whole.
	x, y := toks(0, 4), toks(100, 4)
	tests := []struct {
		name       string
		wrap       func(*Trie) kvcache.PrefixCache
		yCached    int
		freeBlocks int // after draining
	}{
		{"pointer", with(heapPointer), 0, 6},
		{"copy", nil, 4, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, tr := newPool(t, 8, 2, LRU, tc.wrap)
			run(t, pool, 1, x)
			run(t, pool, 2, y)
			require.Equal(t, 2, pool.Cache().Evict(2))
			ym := tr.MatchLen("", y)
			require.Equal(t, tc.yCached, ym, "y's tokens still cached")
			pool.Cache().Evict(100)
			sy.Add(tc.name, "after evicting the older leaf's 2 blocks, the newer one matches %d of 4 tokens; after evicting all, %d of 8 blocks free", ym, pool.Allocator().NumFree())
			require.Equal(t, tc.freeBlocks, pool.Allocator().NumFree(), "free blocks after evicting all")
		})
	}
}
