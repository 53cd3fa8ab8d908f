package main

import (
	"slices"

	"kvlab/common/kvcache"
	"kvlab/phase08_hashcow/blockhash"
)

// trustingIndex is the hash index as it is usually first written, ported for
// the pitfall tests: a map from a block's hash to the block, consulted block
// by block, and trusted. Its fields pick the flaws: with a key that ignores
// the parent, equal blocks after different prefixes meet; without check it
// believes every hash hit; with check it compares the found block's own
// tokens, but never its parent.
//
// Ownership follows the same contract as blockhash (the index holds one
// reference per indexed block, Match one per user), so the engine's audit
// stays clean: only the outputs show the bugs.
type trustingIndex struct {
	a     *kvcache.Allocator
	bs    int
	key   blockhash.HashFunc
	check bool

	byKey   map[uint64]int32
	keyOf   map[int32]uint64
	tokens  map[int32][]int32
	users   map[int][]int32
	holds   map[int32]int
	evicted int
}

// unchained keys a block by its own tokens, nothing before them.
func unchained(_ uint64, tokens []int32) uint64 { return blockhash.FNV1a(blockhash.Root, tokens) }

// weak keeps the top 4 bits of the chained FNV-1a key, so collisions are
// easy to find (1 in 16) instead of taking 2³² blocks. (FNV's low bits would
// not do: a product's low bits depend only on its factors' low bits, so two
// chains that differ there never meet.)
func weak(parent uint64, tokens []int32) uint64 { return blockhash.FNV1a(parent, tokens) >> 60 }

func newTrustingIndex(key blockhash.HashFunc, check bool) func(*kvcache.Allocator, int) kvcache.PrefixCache {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache {
		return &trustingIndex{a: a, bs: bs, key: key, check: check, byKey: map[uint64]int32{}, keyOf: map[int32]uint64{},
			tokens: map[int32][]int32{}, users: map[int][]int32{}, holds: map[int32]int{}}
	}
}

func (s *trustingIndex) walk(tokens []int32) []int32 {
	var blocks []int32
	key := blockhash.Root
	for end := s.bs; end <= len(tokens); end += s.bs {
		block := tokens[end-s.bs : end]
		key = s.key(key, block)
		b, ok := s.byKey[key]
		if !ok || (s.check && !slices.Equal(s.tokens[b], block)) {
			break
		}
		blocks = append(blocks, b)
	}
	return blocks
}

func (s *trustingIndex) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	blocks := s.walk(tokens)
	for _, b := range blocks {
		s.a.Incref(b)
		s.holds[b]++
	}
	s.users[seq] = blocks
	return blocks, len(blocks) * s.bs
}

func (s *trustingIndex) MatchLen(salt string, tokens []int32) int { return len(s.walk(tokens)) * s.bs }

func (s *trustingIndex) Insert(seq int, salt string, tokens []int32, pages []int32, lent int) int {
	key := blockhash.Root
	for i := 0; (i+1)*s.bs <= len(tokens); i++ {
		block := tokens[i*s.bs : (i+1)*s.bs]
		key = s.key(key, block)
		if _, taken := s.byKey[key]; taken {
			continue
		}
		if _, indexed := s.keyOf[pages[i]]; indexed {
			continue
		}
		s.a.Incref(pages[i])
		s.holds[pages[i]]++
		s.byKey[key], s.keyOf[pages[i]], s.tokens[pages[i]] = pages[i], key, slices.Clone(block)
	}
	return lent
}

func (s *trustingIndex) Release(seq int) {
	for _, b := range s.users[seq] {
		s.a.Decref(b)
		s.holds[b]--
	}
	delete(s.users, seq)
}

func (s *trustingIndex) Evict(n int) int {
	freed := 0
	for _, b := range s.idle() {
		if freed == n {
			break
		}
		if s.byKey[s.keyOf[b]] == b {
			delete(s.byKey, s.keyOf[b])
		}
		delete(s.keyOf, b)
		delete(s.tokens, b)
		s.holds[b]--
		s.a.Decref(b)
		s.evicted++
		freed++
	}
	return freed
}

// idle returns the indexed blocks only the index holds, in id order.
func (s *trustingIndex) idle() []int32 {
	var out []int32
	for b := range s.keyOf {
		if s.a.Refs(b) == 1 {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

func (s *trustingIndex) Evictable() int    { return len(s.idle()) }
func (s *trustingIndex) Holds(b int32) int { return s.holds[b] }
func (s *trustingIndex) Stats() kvcache.CacheStats {
	return kvcache.CacheStats{Blocks: len(s.keyOf), Evicted: s.evicted}
}
