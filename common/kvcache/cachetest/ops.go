package cachetest

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Ops drives the caches f builds through a small pool the way an engine
// does, with the operations data encodes: admissions (Match and Grow, no
// compute yet), prefill chunks, commits of what a sequence has computed so
// far (Insert, again and again with longer prefixes), decode steps,
// finishes, evictions and forks (the samples of one prompt, whose writes
// copy shared blocks). Prompts are short runs over a three-token alphabet,
// so the same blocks recur after many different prefixes, and the first
// input byte picks block size 2 unless it says 1 or 4. Each admission
// draws its cache salt from Salts, so equal prompts of different tenants
// meet all the time.
//
// It checks, after every operation: block ownership (the pool's audit), the
// KV of every lent block (salted: a block lent across salts holds the
// wrong fingerprint), the properties Watch checks (one of them that no
// block crosses salts), and the match length against the list of
// everything committed under the same salt — exactly the longest
// block-aligned prefix any such commit had until the first eviction, never
// more after it. Every design's fuzz target calls it; the conformance suite
// runs it on OpsSeeds.
func Ops(t *testing.T, f Factory, data []byte) {
	in := opsInput(data[:min(len(data), 512)])
	bs := []int{2, 1, 4}[in.next()%3]
	blocks := 6 + in.next()%19
	h := NewHarness(t, Watch(t, f), blocks, bs)
	var prompts [][]int32
	var committed []salted
	var live []int
	next := 0
	pick := func() (int, bool) {
		if len(live) == 0 {
			return 0, false
		}
		return live[in.next()%len(live)], true
	}
	for !in.done() {
		switch in.next() % 9 {
		case 0, 1: // admit a new prompt, or one that starts like an earlier one
			var prompt []int32
			if in.next()%2 == 1 && len(prompts) > 0 {
				p := prompts[in.next()%len(prompts)]
				prompt = slices.Clone(p[:in.next()%(len(p)+1)])
				for range in.next() % 4 {
					prompt = append(prompt, int32(1+in.next()%3))
				}
			} else {
				for range 1 + in.next()%8 {
					prompt = append(prompt, int32(1+in.next()%3))
				}
			}
			salt := Salts[in.next()%len(Salts)]
			if len(prompt) == 0 {
				continue
			}
			prompts = append(prompts, prompt)
			want := 0
			for _, c := range committed {
				if c.salt == salt {
					want = max(want, floorBlocks(commonPrefix(c.tokens, prompt), bs))
				}
			}
			before, evicted := h.Pool.MatchLen(salt, prompt), h.Cache.Stats().Evicted
			got := h.AdmitSalted(next, salt, prompt)
			if got >= 0 {
				if got != before {
					t.Fatalf("admission of %v (salt %q): cached %d; MatchLen said %d just before", prompt, salt, got, before)
				}
				if got > want || (evicted == 0 && got != want) {
					t.Fatalf("admission of %v (salt %q): cached %d; the commits under that salt so far share %d with it (blocks evicted before: %d)", prompt, salt, got, want, evicted)
				}
				live = append(live, next)
			}
			next++
		case 2: // a prefill chunk
			if id, ok := pick(); ok {
				n := len(h.prompts[id])
				h.Prefill(id, min(n, h.written[id]+1+in.next()%n))
			}
		case 3: // commit what is computed
			if id, ok := pick(); ok && h.written[id] > 0 {
				committed = append(committed, salted{h.salts[id], slices.Clone(h.prompts[id][:h.written[id]])})
				h.CommitPrefix(id, h.written[id])
			}
		case 4: // decode one token
			if id, ok := pick(); ok && h.written[id] == len(h.prompts[id]) {
				h.Extend(id, []int32{int32(1 + in.next()%3)})
			}
		case 5: // finish: a computed sequence commits first
			if id, ok := pick(); ok {
				if h.written[id] == len(h.prompts[id]) {
					committed = append(committed, salted{h.salts[id], slices.Clone(h.prompts[id])})
					h.Commit(id)
				}
				h.Release(id)
				live = slices.DeleteFunc(live, func(x int) bool { return x == id })
			}
		case 8: // fork a computed sequence: the child shares its pages and salt
			if id, ok := pick(); ok && h.written[id] == len(h.prompts[id]) {
				h.Fork(id, next)
				live = append(live, next)
				next++
			}
		default: // evict
			n := in.next() % 4
			if freed := h.Cache.Evict(n); freed < 0 || freed > n {
				t.Fatalf("Evict(%d) freed %d blocks", n, freed)
			}
			h.Audit("after evict")
		}
	}
	for _, id := range live {
		h.Release(id)
	}
	h.Cache.Evict(h.Cache.Evictable())
	h.Audit("after draining")
	requireInt(t, "free blocks after draining", h.Pool.Allocator().NumFree(), blocks)
}

// Salts are the cache salts Ops draws from: no salt, and two tenants.
var Salts = []string{"", "tenant-a", "tenant-b"}

// OpsSeeds returns inputs for Ops: a seed corpus for fuzz targets and the
// cases the conformance suite runs.
func OpsSeeds() [][]byte {
	rng := rand.New(rand.NewPCG(13, 8))
	seeds := [][]byte{{}, {0, 0}, orphanSeed}
	for range 64 {
		seed := make([]byte, 64+rng.IntN(320))
		for i := range seed {
			seed[i] = byte(rng.IntN(256))
		}
		seeds = append(seeds, seed)
	}
	return seeds
}

// orphanSeed is the sequence of the suite's
// CommitAfterAnEvictedCopyKeepsEveryHit in Ops's encoding: block size 2,
// 16 blocks; A admits [1 3 3 1 1 2]; B admits [1 3], computes and commits
// it; A computes 5 tokens and commits them; B finishes; one block is
// evicted; C admits A's prompt, computes and commits it; A computes its
// last token and commits. Every admission is unsalted (the last byte of
// each is the salt).
var orphanSeed = []byte{
	0, 10,
	0, 0, 5, 0, 2, 2, 0, 0, 1, 0, // admit A (sequence 0)
	0, 1, 0, 2, 0, 0, // admit B (1): A's first 2 tokens
	2, 1, 1, 3, 1, // B computes 2 tokens and commits
	2, 0, 4, 3, 0, // A computes 5 tokens and commits
	5, 1, // B finishes
	6, 1, // evict 1 block
	0, 1, 0, 6, 0, 0, // admit C (2): A's prompt
	2, 1, 5, 3, 1, // C computes 6 tokens and commits
	2, 0, 0, 3, 0, // A computes its sixth and commits
}

// opsInput hands out the fuzzer's bytes one at a time.
type opsInput []byte

func (in *opsInput) done() bool { return len(*in) == 0 }

// next returns the next byte, or 0 once the input is used up.
func (in *opsInput) next() int {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return int(b)
}
