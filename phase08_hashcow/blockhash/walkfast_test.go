package blockhash

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/common/kvcache/cachetest"
)

// checkedWalk is the Cache with every Match and MatchLen run twice: once
// by walk, the plain walk the docs read, and once by walkFast, the walk in
// chunks that Match and MatchLen run. It fails the test unless the two
// find the same blocks and, for Match, leave the cache's records, queue,
// clock and the allocator's counts exactly alike. What it returns is the
// shipped Match's, so a suite run through it tests both walks.
type checkedWalk struct {
	*Cache
	t testing.TB
}

// checkedWalks builds checkedWalk caches with opts (not WithVLLMHash,
// whose walk is walkVLLM, not walk).
func checkedWalks(t testing.TB, opts ...Option) cachetest.Factory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return checkedWalk{New(a, bs, opts...), t}
	}
}

func (w checkedWalk) MatchLen(salt string, tokens []int32) int {
	w.t.Helper()
	plain := w.walk(salt, tokens, nil, false)
	if fast := w.walkFast(salt, tokens, nil, false); !slices.Equal(plain, fast) {
		w.t.Fatalf("MatchLen(%q, %d tokens): walk finds blocks %v, walkFast %v", salt, len(tokens), plain, fast)
	}
	return w.Cache.MatchLen(salt, tokens)
}

func (w checkedWalk) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	w.t.Helper()
	c := w.Cache
	before := walkStateOf(c)
	c.clock++ // as Match does before it walks
	plain := c.walk(salt, tokens, nil, true)
	want := walkStateOf(c)
	before.restore(c)
	for _, b := range plain {
		c.alloc.Decref(b) // the reference walk took for seq
	}
	blocks, n := c.Match(seq, salt, tokens)
	if !slices.Equal(blocks, plain) {
		w.t.Fatalf("Match(%d, %q, %d tokens): walk takes blocks %v, walkFast %v", seq, salt, len(tokens), plain, blocks)
	}
	if diff := want.diff(walkStateOf(c)); diff != "" {
		w.t.Fatalf("Match(%d, %q, %d tokens) of blocks %v: walk and walkFast leave the cache apart: %s", seq, salt, len(tokens), blocks, diff)
	}
	return blocks, n
}

// walkState is what a walk that takes its blocks may change: the block
// records (order, users, queue links), the pinned list, the queue's ends,
// the users beyond a record's room, the clock, and the allocator's counts.
type walkState struct {
	blocks     []blockInfo
	pinned     []int32
	head, tail int32
	queued     int
	moreUsers  map[int32]int
	clock      int64
	refs       []int
}

func walkStateOf(c *Cache) walkState {
	s := walkState{
		blocks: slices.Clone(c.blocks), pinned: slices.Clone(c.pinned),
		head: c.lru.head, tail: c.lru.tail, queued: c.lru.n,
		moreUsers: maps.Clone(c.moreUsers), clock: c.clock,
	}
	for b := range c.blocks {
		s.refs = append(s.refs, c.alloc.Refs(int32(b)))
	}
	return s
}

// restore puts s back into c, but for the allocator's counts.
func (s walkState) restore(c *Cache) {
	copy(c.blocks, s.blocks) // in place: the queue reads the same slice
	c.pinned = append(c.pinned[:0], s.pinned...)
	c.lru.head, c.lru.tail, c.lru.n = s.head, s.tail, s.queued
	c.moreUsers = maps.Clone(s.moreUsers)
	c.clock = s.clock
}

// diff describes the first difference between s and o, or is "".
func (s walkState) diff(o walkState) string {
	for b := range s.blocks {
		if s.blocks[b] != o.blocks[b] {
			return fmt.Sprintf("block %d's record is %+v after walk, %+v after walkFast", b, s.blocks[b], o.blocks[b])
		}
		if s.refs[b] != o.refs[b] {
			return fmt.Sprintf("block %d has %d references after walk, %d after walkFast", b, s.refs[b], o.refs[b])
		}
	}
	switch {
	case !slices.Equal(s.pinned, o.pinned):
		return fmt.Sprintf("pinned is %v after walk, %v after walkFast", s.pinned, o.pinned)
	case s.head != o.head || s.tail != o.tail || s.queued != o.queued:
		return fmt.Sprintf("the queue runs %d…%d (%d) after walk, %d…%d (%d) after walkFast", s.head, s.tail, s.queued, o.head, o.tail, o.queued)
	case !reflect.DeepEqual(s.moreUsers, o.moreUsers):
		return fmt.Sprintf("moreUsers is %v after walk, %v after walkFast", s.moreUsers, o.moreUsers)
	case s.clock != o.clock:
		return fmt.Sprintf("the clock is %d after walk, %d after walkFast", s.clock, o.clock)
	}
	return ""
}

// Hashes that collide, so that the checks of walk and verify decide: a
// 3-bit hash (nearly every key collides), one that forgets the tokens
// (every block under one parent has one key) and one that forgets the
// prefix (equal blocks have one key wherever they are).
func threeBits(parent uint64, tokens []int32) uint64  { return XXHash(parent, tokens) & 7 }
func parentOnly(parent uint64, tokens []int32) uint64 { return parent*0x9e3779b97f4a7c15 + 1 }
func tokensOnly(parent uint64, tokens []int32) uint64 { return XXHash(Root, tokens) }

// TestWalkFastAgreesWithWalk runs hand-picked cases through checkedWalk:
// misses on either side of a chunk of walkChunk blocks, a block that
// differs in its first or last token (verify compares 64 bytes at a time,
// then 4) under a key that does not see the difference, salts, and keys
// that collide. Each query's match length is the
// one the case expects, and both walks agree on it and on what Match
// leaves behind.
func TestWalkFastAgreesWithWalk(t *testing.T) {
	changed := func(p []int32, i int) []int32 {
		q := slices.Clone(p)
		q[i] += 1000
		return q
	}
	long := cachetest.Tokens(0, 40*16)
	// Under parentOnly a changed token leaves every key as it was, so the
	// hit is there and only the token compare can refuse it.
	sameKeys := []Option{WithHash(parentOnly)}
	for _, c := range []struct {
		name   string
		bs     int
		opts   []Option
		cached [][]int32 // committed in order, unsalted unless salts says
		salts  []string
		query  []int32
		salt   string
		want   int // tokens matched
	}{
		{"40 blocks, all cached", 16, nil, [][]int32{long}, nil, long, "", 640},
		{"a miss in the last block of the first chunk", 16, sameKeys, [][]int32{long}, nil, changed(long, 15*16+3), "", 240},
		{"a miss in the first block of the second chunk", 16, sameKeys, [][]int32{long}, nil, changed(long, 16*16), "", 256},
		{"a miss in the second block of the second chunk", 16, sameKeys, [][]int32{long}, nil, changed(long, 17*16+15), "", 272},
		{"a prompt ending inside a block", 16, nil, [][]int32{long}, nil, long[:16*20+7], "", 320},
		{"17-token blocks, the last token differs", 17, sameKeys, [][]int32{long[:17*20]}, nil, changed(long[:17*20], 17*3+16), "", 51},
		{"17-token blocks, the first token differs", 17, sameKeys, [][]int32{long[:17*20]}, nil, changed(long[:17*20], 17*5), "", 85},
		{"40-token blocks", 40, sameKeys, [][]int32{long[:40*10]}, nil, changed(long[:40*10], 40*7+39), "", 280},
		{"one-token blocks", 1, sameKeys, [][]int32{long[:50]}, nil, changed(long[:50], 33), "", 33},
		{"another salt finds nothing", 16, nil, [][]int32{long}, []string{"a"}, long, "b", 0},
		{"no salt finds nothing salted", 16, nil, [][]int32{long}, []string{"a"}, long, "", 0},
		{"the same salt finds it all", 16, nil, [][]int32{long}, []string{"a"}, long, "a", 640},
		// The second prompt's blocks take the keys of the first's: its
		// first block fails the token check, its second the parent check.
		{"the key names other tokens", 4, []Option{WithHash(parentOnly)},
			[][]int32{{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 5, 6, 7, 8}}, nil, []int32{1, 2, 3, 4, 5, 6, 7, 8}, "", 0},
		{"the key's new owner", 4, []Option{WithHash(parentOnly)},
			[][]int32{{1, 2, 3, 4, 5, 6, 7, 8}, {9, 10, 11, 12, 5, 6, 7, 8}}, nil, []int32{9, 10, 11, 12, 5, 6, 7, 8}, "", 8},
		// The second prompt's second block takes the key of the first's:
		// the first prompt's walk finds it under another parent.
		{"the key names another prefix", 4, []Option{WithHash(tokensOnly)},
			[][]int32{{1, 1, 1, 1, 2, 2, 2, 2}, {3, 3, 3, 3, 2, 2, 2, 2}}, nil, []int32{1, 1, 1, 1, 2, 2, 2, 2}, "", 4},
		{"the same tokens under their own parent", 4, []Option{WithHash(tokensOnly)},
			[][]int32{{1, 1, 1, 1, 2, 2, 2, 2}, {3, 3, 3, 3, 2, 2, 2, 2}}, nil, []int32{3, 3, 3, 3, 2, 2, 2, 2, 1}, "", 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := cachetest.NewHarness(t, checkedWalks(t, c.opts...), 4*len(long)/c.bs+8, c.bs)
			h.RequireFinds(c.cached, c.salts, c.salt, c.query, c.want)
		})
	}
}

// TestPlainWalkPassesTheConformanceSuite runs the shared suite through
// checkedWalk, so that walk meets every case the shipped walk does.
func TestPlainWalkPassesTheConformanceSuite(t *testing.T) {
	cachetest.Run(t, checkedWalks(t))
}

// FuzzWalkFast checks walkFast against walk on random inputs: the
// operations of cachetest.Ops (admissions, prefill chunks and commits,
// decode, finishes, evictions and forks over a three-token alphabet, in
// blocks of 1, 2 or 4 tokens), and longer prompts in blocks of up to 33
// tokens, which verify compares 64 bytes at a time, keyed by the default
// hash or by one that collides.
// `go test -run '^$' -fuzz FuzzWalkFast ./phase08_hashcow/blockhash/`
// explores.
func FuzzWalkFast(f *testing.F) {
	for _, seed := range cachetest.OpsSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cachetest.Ops(t, checkedWalks(t), data)
		longPrompts(t, data)
	})
}

// longPrompts commits prompts of up to 40 blocks drawn from data, each
// perhaps the start of an earlier one with a token changed and more
// tokens after it, asks for each under a random salt, and evicts now and
// then.
func longPrompts(t *testing.T, data []byte) {
	var seed [32]byte
	copy(seed[:], data)
	rng := rand.New(rand.NewChaCha8(seed))
	bs := []int{2, 4, 16, 17, 33}[rng.IntN(5)]
	hashes := []HashFunc{MapHash, threeBits, parentOnly, tokensOnly}
	opts := []Option{WithHash(hashes[rng.IntN(len(hashes))])}
	h := cachetest.NewHarness(t, checkedWalks(t, opts...), 4*40+8, bs)
	h.ServeRandomPrompts(rng, 6, func(r *rand.Rand) bool { return r.IntN(2) == 0 })
}
