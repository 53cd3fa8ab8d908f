package trie

import (
	"bytes"
	"fmt"
	"unsafe"
)

// Match finds the longest block-aligned prefix of tokens cached under salt
// (in salt's trie), lends its
// blocks to sequence seq (one allocator reference each, dropped by
// Release) and marks every node it reached as used now. matched is
// len(blocks) × block size. A match may end inside a node: the node's
// leading blocks are lent, the rest stay where they are.
//
// The returned slice is the trie's own record for Release; the caller
// copies it (the pool appends it to the page table) and must not keep it.
func (t *Trie) Match(seq int, salt string, tokens []int32) (blocks []int32, matched int) {
	if _, ok := t.lent[seq]; ok {
		panic(fmt.Sprintf("trie: sequence %d matched twice without a Release", seq))
	}
	t.clock++
	t.queried += len(tokens)
	blocks = t.spareList()
	for n := t.rootOf(salt, false); n != nil; {
		child, k := t.step(n, tokens[matched:])
		if k == 0 {
			break
		}
		child.lastUse = t.clock
		child.refs++
		t.reached = append(t.reached, child)
		blocks = append(blocks, child.blocks[:k/t.bs]...)
		matched += k
		if k < len(child.tokens) {
			break // the prompt leaves this node in its middle
		}
		n = child
	}
	t.take(blocks)
	t.restate(t.reached) // their keys changed, and they gained a holder
	t.reached = t.reached[:0]
	if len(blocks) == 0 {
		if cap(blocks) > 0 {
			t.spare = append(t.spare, blocks)
		}
		return nil, 0
	}
	t.lent[seq] = blocks
	t.found += matched
	return blocks, matched
}

// MatchLen returns the matched count Match would return for tokens, without
// lending anything or touching recency.
func (t *Trie) MatchLen(salt string, tokens []int32) int {
	matched := 0
	for n := t.rootOf(salt, false); n != nil; {
		child, k := t.step(n, tokens[matched:])
		matched += k
		if k == 0 || k < len(child.tokens) {
			return matched
		}
		n = child
	}
	return 0 // salt has no trie
}

// Release drops the references Match took for seq. Releasing a sequence
// that matched nothing is a no-op.
func (t *Trie) Release(seq int) {
	blocks, ok := t.lent[seq]
	if !ok {
		return
	}
	t.drop(blocks)
	delete(t.lent, seq)
	t.spare = append(t.spare, blocks[:0])
}

// spareList returns an empty slice, reusing one Release gave back.
func (t *Trie) spareList() []int32 {
	if n := len(t.spare); n > 0 {
		s := t.spare[n-1]
		t.spare = t.spare[:n-1]
		return s
	}
	return nil
}

// step is one descent: the child of n that rest continues into, and how
// many of the child's tokens rest shares, rounded down to whole blocks.
// It costs one map lookup and one comparison, whatever the number of
// siblings. k is 0 when no child continues rest by a whole block.
func (t *Trie) step(n *node, rest []int32) (child *node, k int) {
	if len(rest) < t.bs {
		return nil, 0
	}
	child = n.children[keyOf(rest[:t.bs])]
	if child == nil {
		return nil, 0
	}
	k, compares := commonBlocks(child.tokens, rest, t.bs)
	t.compares += compares
	return child, k
}

// keyOf hashes a block of tokens (FNV-1a) into a child key. Two different
// first blocks may collide; the comparison in step then finds k == 0, which
// costs a miss but never lends the wrong KV.
func keyOf(block []int32) uint64 {
	h := uint64(14695981039346656037)
	for _, tok := range block {
		h ^= uint64(uint32(tok))
		h *= 1099511628211
	}
	return h
}

// commonBlocks returns how many leading tokens a and b share, counting
// whole blocks of bs only: their common prefix rounded DOWN to a block
// boundary. Rounding up would claim tokens that diverged inside the last
// block.
//
// The first comparison covers everything a and b could share, which is the
// answer for every node a match passes through; only the node where the
// match ends needs the binary search for the first block that differs.
//
// compares is the number of slice comparisons it made (Trie.Comparisons).
func commonBlocks(a, b []int32, bs int) (k, compares int) {
	n := min(len(a), len(b)) / bs
	if equal(a[:n*bs], b[:n*bs]) {
		return n * bs, 1
	}
	compares = 1
	lo, hi := 0, n // the first lo blocks agree, the first hi do not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		compares++
		if equal(a[lo*bs:mid*bs], b[lo*bs:mid*bs]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo * bs, compares
}

// equal reports whether a and b hold the same tokens. It compares their
// bytes, which the runtime does with vector instructions, many tokens to
// an instruction, where a loop over the tokens takes one a step.
func equal(a, b []int32) bool { return bytes.Equal(asBytes(a), asBytes(b)) }

// asBytes views s as its underlying bytes, without copying.
func asBytes(s []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}

// alignDown rounds n down to a multiple of bs.
func alignDown(n, bs int) int { return n / bs * bs }
