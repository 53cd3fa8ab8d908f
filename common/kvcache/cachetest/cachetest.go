// Package cachetest is the conformance suite every prefix cache must pass,
// and the benchmark set every variant runs under the same names so that
// `go test -bench` output compares across variants with benchstat.
//
// The suite drives a cache only through a kvcache.Pool, the way the engine
// does: Open (match), Grow, a simulated prefill that writes a fingerprint
// of each token's prefix into its KV slot, Commit (insert) and Release.
// After every operation it checks the pool's ownership audit, and whenever a
// sequence reuses cached blocks it checks their contents: a cached block must
// hold exactly the KV that computing the new prompt would have written.
// That one check catches every way of sharing the wrong block. A sequence
// may carry a cache salt (StartSalted, AdmitSalted); the fingerprints then
// start from the salt, so a block committed under one salt and lent under
// another fails the same check: tenants' caches must never meet.
//
// Watch wraps a cache with checks of what no commit may do to what is
// already cached, and Ops drives a cache the way an engine does from a
// fuzzer's bytes: every design's fuzz target runs one or both.
package cachetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"kvlab/common/kvcache"
	"kvlab/kernels/cpu"
)

// Factory builds a fresh prefix cache over an allocator.
type Factory func(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache

// Harness is a pool with a cache under test, plus helpers to run sequences
// through it the way the engine would.
type Harness struct {
	// noCacheAudit skips the cache's own AuditCache after each operation
	// (RunWithoutCacheAudit); the pool's ownership audit still runs.
	noCacheAudit bool

	T         testing.TB
	Pool      *kvcache.Pool
	Cache     kvcache.PrefixCache
	BlockSize int
	// prompts holds each open sequence's tokens.
	prompts map[int][]int32
	// written is how many leading positions of each open sequence hold KV.
	written map[int]int
	// salts holds each open sequence's cache salt ("" for none).
	salts map[int]string
}

// NewHarness returns a pool of blocks×blockSize slots using the cache f builds.
func NewHarness(t testing.TB, f Factory, blocks, blockSize int) *Harness {
	t.Helper()
	p, err := kvcache.NewPool(cpu.New(), kvcache.Config{Layers: 1, KVDim: 1, Blocks: blocks, BlockSize: blockSize, NewCache: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &Harness{noCacheAudit: skipCacheAudit, T: t, Pool: p, Cache: p.Cache(), BlockSize: blockSize, prompts: map[int][]int32{}, written: map[int]int{}, salts: map[int]string{}}
}

// Fingerprint is the value the simulated prefill writes for the token at
// position len(prefix)-1: a function of the whole prefix, as real KV is.
// Two different prefixes collide with probability about 2⁻²⁴.
func Fingerprint(prefix []int32) float32 { return fingerprintOf(fold(fnvOffset, prefix)) }

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fold extends an FNV-1a state with tokens, so that the fingerprints of
// consecutive positions cost O(1) each.
func fold(h uint64, tokens []int32) uint64 {
	for _, t := range tokens {
		h ^= uint64(uint32(t))
		h *= fnvPrime
	}
	return h
}

func fingerprintOf(h uint64) float32 { return float32(h>>40) + 1 } // never 0, the value of an unwritten slot

// saltState is the FNV-1a state a sequence's fingerprints start from: the
// plain offset basis without a salt (so Fingerprint holds for unsalted
// sequences), else the basis folded with the salt's bytes and their
// count. Real KV does not depend on the salt; the simulated KV does so that
// a block lent across salts holds the wrong fingerprint, and CheckKV
// reports the leak like any other wrong block.
func saltState(salt string) uint64 {
	h := uint64(fnvOffset)
	if salt == "" {
		return h
	}
	for i := 0; i < len(salt); i++ {
		h ^= uint64(salt[i])
		h *= fnvPrime
	}
	return fold(h, []int32{int32(len(salt))})
}

// Auditor is implemented by a cache that can check its own bookkeeping
// against a slow recount (its Evictable counter, its eviction heap).
type Auditor interface {
	AuditCache() error
}

// Audit fails the test if block ownership is broken, or if the cache is an
// Auditor and its audit fails.
func (h *Harness) Audit(when string) {
	h.T.Helper()
	if err := h.Pool.Audit().Err(); err != nil {
		h.T.Fatalf("%s: %v", when, err)
	}
	if a, ok := h.Cache.(Auditor); ok && !h.noCacheAudit {
		if err := a.AuditCache(); err != nil {
			h.T.Fatalf("%s: %v", when, err)
		}
	}
}

// Start opens sequence id for prompt, grows it to hold the prompt, checks
// the contents of the blocks the cache lent, and writes the KV of every
// position past the cached ones. It returns the cached token count, or -1
// when the pool cannot hold the prompt (nothing is left open then).
func (h *Harness) Start(id int, prompt []int32) int {
	h.T.Helper()
	return h.StartSalted(id, "", prompt)
}

// StartSalted is Start for a request that carries cache salt salt.
func (h *Harness) StartSalted(id int, salt string, prompt []int32) int {
	h.T.Helper()
	cached := h.AdmitSalted(id, salt, prompt)
	if cached >= 0 {
		h.Prefill(id, len(prompt))
	}
	return cached
}

// Admit is the first half of Start, as an engine admits a request: it opens
// sequence id for prompt, grows it to hold the prompt and checks the
// contents of the blocks the cache lent, but computes nothing. Prefill
// writes the rest, chunk by chunk. It returns the cached token count, or -1
// when the pool cannot hold the prompt (nothing is left open then).
func (h *Harness) Admit(id int, prompt []int32) int {
	h.T.Helper()
	return h.AdmitSalted(id, "", prompt)
}

// AdmitSalted is Admit for a request that carries cache salt salt: the
// cache may lend it only blocks committed under the same salt.
func (h *Harness) AdmitSalted(id int, salt string, prompt []int32) int {
	h.T.Helper()
	cached, err := h.Pool.Open(id, salt, prompt)
	if err != nil {
		h.T.Fatalf("open %d: %v", id, err)
	}
	h.Audit(fmt.Sprintf("after open %d", id))
	if cached < 0 || cached > len(prompt) || cached%h.BlockSize != 0 {
		h.T.Fatalf("sequence %d: cached %d tokens of a %d-token prompt; want a multiple of the block size %d within the prompt",
			id, cached, len(prompt), h.BlockSize)
	}
	if err := h.Pool.Grow(id, len(prompt)); err != nil {
		h.Pool.Release(id)
		h.Audit(fmt.Sprintf("after failed grow of %d", id))
		return -1
	}
	h.prompts[id] = prompt
	h.written[id] = cached
	h.salts[id] = salt
	h.CheckKV(id, cached)
	return cached
}

// Fork opens sequence child as a copy of parent, as an engine does for the
// samples of one prompt: the pool shares every page (Pool.Fork), and the
// child's first write into a shared page copies it. The child keeps the
// parent's salt. The parent's KV must be written.
func (h *Harness) Fork(parent, child int) {
	h.T.Helper()
	if h.written[parent] < len(h.prompts[parent]) {
		h.T.Fatalf("fork of sequence %d with KV for %d of its %d tokens: prefill it first", parent, h.written[parent], len(h.prompts[parent]))
	}
	if err := h.Pool.Fork(parent, child); err != nil {
		h.T.Fatalf("fork %d → %d: %v", parent, child, err)
	}
	h.prompts[child] = slices.Clone(h.prompts[parent])
	h.written[child] = h.written[parent]
	h.salts[child] = h.salts[parent]
	h.Audit(fmt.Sprintf("after fork %d → %d", parent, child))
}

// Prefill computes sequence id's positions up to to (a prefill chunk): it
// writes the KV of every position between the last one written and to.
func (h *Harness) Prefill(id, to int) {
	h.T.Helper()
	from := h.written[id]
	if to <= from {
		return
	}
	h.Write(id, from, to)
	h.written[id] = to
	h.Audit(fmt.Sprintf("after prefill of %d up to %d", id, to))
}

// Write simulates computing positions [from, to) of sequence id: it makes
// the blocks private (copy-on-write) and writes each position's fingerprint.
func (h *Harness) Write(id, from, to int) {
	h.T.Helper()
	if from >= to {
		return
	}
	if err := h.Pool.PrepareWrite(id, from, to-from); err != nil {
		h.T.Fatalf("prepare write %d [%d,%d): %v", id, from, to, err)
	}
	k, _ := h.Pool.Layer(0)
	kd := cpu.Data(k)
	tokens := h.prompts[id]
	state := fold(saltState(h.salts[id]), tokens[:from])
	for i, slot := range h.Pool.Slots(nil, id, from, to-from) {
		state = fold(state, tokens[from+i:from+i+1])
		kd[slot] = fingerprintOf(state)
	}
}

// Extend appends tokens to sequence id as decoding would, writing their KV.
func (h *Harness) Extend(id int, more []int32) bool {
	h.T.Helper()
	old := len(h.prompts[id])
	if h.written[id] < old {
		h.T.Fatalf("extend of sequence %d with KV for %d of its %d tokens: prefill it first", id, h.written[id], old)
	}
	next := append(append([]int32(nil), h.prompts[id]...), more...)
	if err := h.Pool.Grow(id, len(next)); err != nil {
		return false
	}
	// A fork's first write into a shared block copies it, which may find
	// the pool full, as Grow may.
	var full *kvcache.OutOfBlocksError
	if err := h.Pool.PrepareWrite(id, old, len(next)-old); errors.As(err, &full) {
		return false
	}
	h.prompts[id] = next
	h.Write(id, old, len(next))
	h.written[id] = len(next)
	h.Audit(fmt.Sprintf("after extending %d", id))
	return true
}

// CheckKV fails the test unless the first n positions of sequence id hold
// the fingerprints of its own prefix under its own salt.
func (h *Harness) CheckKV(id, n int) {
	h.T.Helper()
	k, _ := h.Pool.Layer(0)
	kd := cpu.Data(k)
	tokens := h.prompts[id]
	state := saltState(h.salts[id])
	for p, slot := range h.Pool.Slots(nil, id, 0, n) {
		state = fold(state, tokens[p:p+1])
		if have, want := kd[slot], fingerprintOf(state); have != want {
			h.T.Fatalf("sequence %d (salt %q) position %d (slot %d): have KV %v; want %v — a cached block holds another prefix's KV, or another salt's",
				id, h.salts[id], p, slot, have, want)
		}
	}
}

// Commit offers sequence id's tokens to the cache.
func (h *Harness) Commit(id int) {
	h.T.Helper()
	h.CommitPrefix(id, len(h.prompts[id]))
}

// CommitPrefix offers the first n of sequence id's tokens to the cache, as
// an engine does after each prefill chunk. Their KV must be written.
func (h *Harness) CommitPrefix(id, n int) {
	h.T.Helper()
	if n > h.written[id] {
		h.T.Fatalf("commit of %d tokens of sequence %d, which has KV for %d", n, id, h.written[id])
	}
	h.Pool.Commit(id, h.prompts[id][:n])
	h.Audit(fmt.Sprintf("after commit of %d tokens of %d", n, id))
}

// Finish commits and releases sequence id.
func (h *Harness) Finish(id int) {
	h.T.Helper()
	h.Commit(id)
	h.Release(id)
}

// Release ends sequence id without committing.
func (h *Harness) Release(id int) {
	h.T.Helper()
	h.Pool.Release(id)
	delete(h.prompts, id)
	delete(h.written, id)
	delete(h.salts, id)
	h.Audit(fmt.Sprintf("after release of %d", id))
}

// Tokens returns n tokens base, base+1, ...: distinct runs for distinct bases.
func Tokens(base, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(base + i)
	}
	return out
}

// Join concatenates token slices into a new slice.
func Join(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// floorBlocks rounds n down to a multiple of bs.
func floorBlocks(n, bs int) int { return n / bs * bs }

// RequireFinds serves each of cached to its end, under salts[i] (no salt
// past the end of salts), then checks that MatchLen and a Match of query
// under salt both find want tokens. Table tests of a design's lookup, its
// plain and fast forms alike, state their cases this way.
func (h *Harness) RequireFinds(cached [][]int32, salts []string, salt string, query []int32, want int) {
	h.T.Helper()
	for i, p := range cached {
		s := ""
		if i < len(salts) {
			s = salts[i]
		}
		if h.StartSalted(i, s, p) < 0 {
			h.T.Fatalf("the pool could not hold prompt %d", i)
		}
		h.Finish(i)
	}
	if got := h.Pool.MatchLen(salt, query); got != want {
		h.T.Fatalf("MatchLen: %d tokens; want %d", got, want)
	}
	id := len(cached) + 100
	if got := h.AdmitSalted(id, salt, query); got != want {
		h.T.Fatalf("Match: %d tokens; want %d", got, want)
	}
	h.Release(id)
}

// ServeRandomPrompts serves n prompts drawn from rng, as the designs' fuzz
// targets of their fast paths do: each a random run of three token values,
// often a prefix of an earlier prompt (when reuse says so), at most 40
// blocks, with one token perhaps changed; each under one of two salts, a
// MatchLen under one of three, served to its end, and now and then a few
// blocks evicted. Whatever checks the cache carries (a wrapper comparing
// its plain and fast forms) run on every call. It returns the prompts
// served, in order.
func (h *Harness) ServeRandomPrompts(rng *rand.Rand, n int, reuse func(*rand.Rand) bool) [][]int32 {
	h.T.Helper()
	bs := h.BlockSize
	var prompts [][]int32
	for id := range n {
		var p []int32
		if len(prompts) > 0 && reuse(rng) {
			p = slices.Clone(prompts[rng.IntN(len(prompts))])
			p = p[:rng.IntN(len(p)+1)]
		}
		for range rng.IntN(20 * bs) {
			p = append(p, int32(1+rng.IntN(3)))
		}
		p = p[:min(len(p), 40*bs)]
		if len(p) == 0 {
			continue
		}
		if i := rng.IntN(len(p)); rng.IntN(2) == 0 {
			p[i] = int32(1 + rng.IntN(3)) // perhaps a change, perhaps not
		}
		salt := Salts[rng.IntN(2)]
		if h.StartSalted(id, salt, p) < 0 {
			continue // the pool is full of live sequences' blocks
		}
		h.Pool.MatchLen(Salts[rng.IntN(3)], p)
		h.Finish(id)
		prompts = append(prompts, p)
		if rng.IntN(3) == 0 {
			h.Cache.Evict(rng.IntN(8))
		}
	}
	return prompts
}
