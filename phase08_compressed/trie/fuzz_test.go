package trie

import (
	"math/rand/v2"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
)

// FuzzTrie drives a trie through a pool with random interleavings of
// starts (Match), decode steps, commits (Insert), releases and evictions,
// decoded from the input bytes. After every operation it checks:
//
//   - the trie's structure: parent links, child keys, block counts, and
//     its Holds accounts against its nodes and lent lists (checkStructure);
//   - block ownership: the pool's audit, which compares every allocator
//     count with page tables plus Holds (the harness audits each step);
//   - the KV of every lent block: the harness writes a fingerprint of each
//     token's whole prefix and checks it on every start, so a block lent
//     for the wrong prefix fails at once;
//   - the match length against a reference model, the list of everything
//     committed: until the first eviction a start must find exactly the
//     longest block-aligned prefix of any committed sequence, and never
//     more after it;
//   - the invariants of cachetest.Watch: a commit never lowers the match
//     length of an earlier commit, and a prefix lent to a live sequence
//     stays matchable.
//
// Plain `go test` runs the seed corpus; `go test -fuzz FuzzTrie` explores.
func FuzzTrie(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 12 {
		seed := make([]byte, 512)
		for i := range seed {
			seed[i] = byte(rng.IntN(256))
		}
		f.Add(seed)
	}
	f.Fuzz(replay)
}

// FuzzPool drives the trie, under each policy, through a small pool the way
// the engine does (cachetest.Ops): admissions, prefill chunks each followed
// by a commit, decode steps, finishes and evictions over a three-token
// alphabet. The first byte picks the policy.
func FuzzPool(f *testing.F) {
	for i, seed := range cachetest.OpsSeeds() {
		f.Add(append([]byte{byte(i)}, seed...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cachetest.Ops(t, checkedFactory(t, policies[int(data[0])%len(policies)].policy, new(int)), data[1:])
	})
}

// replay runs the operations data encodes; see FuzzTrie.
func replay(t *testing.T, data []byte) {
	// A few hundred operations find what a few thousand would, and keep
	// each run in the milliseconds the fuzzer needs.
	in := input(data[:min(len(data), 1024)])
	bs := 1 + in.next()%4
	policy := policies[in.next()%len(policies)].policy
	blocks := 512
	if in.next()%2 == 0 {
		blocks = 24 // memory pressure: Grow evicts
	}
	var tr *Trie
	h := cachetest.NewHarness(t, cachetest.Watch(t, func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		tr = New(a, bs, policy)
		return tr
	}), blocks, bs)

	// The bases share first tokens and first blocks in every way that
	// matters: base 1 agrees with base 0 on four tokens, base 2 on one.
	bases := [][]int32{toks(0, 16), cat(toks(0, 4), toks(50, 8)), cat(toks(0, 1), toks(60, 6))}
	var committed [][]int32
	tokens := map[int][]int32{} // what each live sequence holds
	var live []int
	next, starts, found := 0, 0, 0
	for !in.done() {
		switch op := in.next() % 8; {
		case op < 3: // start a sequence
			base := bases[in.next()%len(bases)]
			prompt := cat(base[:in.next()%(len(base)+1)], toks(1000+7*(in.next()%4), in.next()%6))
			if len(prompt) == 0 {
				continue
			}
			want := 0
			for _, c := range committed {
				want = max(want, alignDown(commonPrefix(c, prompt), bs))
			}
			evictedBefore := tr.Stats().Evicted > 0
			got := h.Start(next, prompt)
			starts, found = starts+1, found+max(got, 0)
			if got >= 0 {
				if got > want || (!evictedBefore && got != want) {
					t.Fatalf("start of %v: cached %d; reference says %d (evicted before: %v)", prompt, got, want, evictedBefore)
				}
				tokens[next] = prompt
				live = append(live, next)
			}
			next++
		case op < 4: // decode a few tokens
			if id, ok := pickLive(&in, live); ok {
				more := toks(2000+in.next()%3, 1+in.next()%4)
				if h.Extend(id, more) {
					tokens[id] = cat(tokens[id], more)
				}
			}
		case op < 6: // commit
			if id, ok := pickLive(&in, live); ok {
				h.Commit(id)
				committed = append(committed, tokens[id])
			}
		case op < 7: // release
			if id, ok := pickLive(&in, live); ok {
				h.Release(id)
				live = remove(live, id)
			}
		default: // evict
			n, can := in.next()%8, tr.Evictable()
			if have := tr.Evict(n); have != min(n, can) {
				t.Fatalf("Evict(%d) with %d evictable: have %d freed; want %d", n, can, have, min(n, can))
			}
			h.Audit("after evict")
		}
		if err := checkStructure(tr); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("block size %d, %d blocks: %d starts found %d cached tokens; %d commits; %d blocks evicted",
		bs, blocks, starts, found, len(committed), tr.Stats().Evicted)
	for _, id := range live {
		h.Release(id)
	}
	tr.Evict(tr.Evictable())
	h.Audit("after draining")
	if have := h.Pool.Allocator().NumFree(); have != blocks {
		t.Fatalf("free blocks after draining: have %d; want %d", have, blocks)
	}
}

// input hands out the fuzzer's bytes one at a time.
type input []byte

func (in *input) done() bool { return len(*in) == 0 }

// next returns the next byte, or 0 once the input is used up.
func (in *input) next() int {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return int(b)
}

func pickLive(in *input, live []int) (int, bool) {
	if len(live) == 0 {
		return 0, false
	}
	return live[in.next()%len(live)], true
}

func remove(ids []int, id int) []int {
	for i, x := range ids {
		if x == id {
			return append(ids[:i], ids[i+1:]...)
		}
	}
	return ids
}

// commonPrefix is the reference's plain token-by-token comparison.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
