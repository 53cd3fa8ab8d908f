package trie

import (
	"container/heap"

	"kvlab/common/kvcache"
)

// A bug names one known mistake in writing a trie like this one. The
// pitfall tests run a buggy Trie next to the real one and show what the
// mistake does; the library itself never contains them.
type bug int

const (
	roundUp          bug = iota + 1 // match rounds the common prefix up to a block
	noReparent                      // split leaves the moved children pointing at the head
	sharedChildren                  // split gives head and tail one children map
	headCopy                        // split assigns the head's children to a copy of the node
	rangeKeys                       // eviction filters the parent's children by ranging over keys
	blocksByTokens                  // split slices the block list by a token count
	noIncref                        // match lends blocks without taking references
	adoptDropsDups                  // insert adopts the caller's pages and drops the duplicates
	firstTokenKeys                  // children keyed by their first token, not their first block
	wholeLeaves                     // eviction frees whole leaves, however few blocks were asked for
	callersSlice                    // insert keeps the caller's token slice instead of a copy
	countAllUnpinned                // Evictable counts every block only the trie holds
	heapPointer                     // eviction keeps a pointer into the heap's slice across Pop
)

// buggy is the library's Trie with the operation a bug lives in replaced
// by a port of it that has the bug: a copy of the library's code with the
// lines marked BUG changed. Everything else is the library's own code, so
// whatever differs from the Trie's behaviour is the bug's doing.
type buggy struct {
	*Trie
	bug bug
}

// with returns a wrap function for newPool that installs bug b.
func with(b bug) func(*Trie) kvcache.PrefixCache {
	return func(t *Trie) kvcache.PrefixCache { return &buggy{t, b} }
}

// buggyCache returns an engine cache factory for bug b.
func buggyCache(b bug) cacheFactory {
	return func(a *kvcache.Allocator, bs int) kvcache.PrefixCache { return &buggy{New(a, bs, DeepestFirst), b} }
}

func (b *buggy) Match(seq int, salt string, tokens []int32) ([]int32, int) {
	if b.bug != roundUp && b.bug != noIncref && b.bug != firstTokenKeys {
		return b.Trie.Match(seq, salt, tokens)
	}
	var blocks []int32
	matched := 0
	b.clock++
	for n := b.root; ; {
		child, k := b.step(n, tokens[matched:])
		if k == 0 {
			break
		}
		child.lastUse = b.clock
		blocks = append(blocks, child.blocks[:k/b.bs]...)
		matched += k
		if k < len(child.tokens) {
			break
		}
		n = child
	}
	if b.bug == noIncref {
		return blocks, matched // BUG: no reference for the reader, nothing for Release
	}
	b.take(blocks)
	if len(blocks) > 0 {
		b.lent[seq] = blocks
	}
	return blocks, matched
}

func (b *buggy) MatchLen(salt string, tokens []int32) int {
	if b.bug != roundUp && b.bug != firstTokenKeys {
		return b.Trie.MatchLen(salt, tokens)
	}
	matched := 0
	for n := b.root; ; {
		child, k := b.step(n, tokens[matched:])
		matched += k
		if k == 0 || k < len(child.tokens) {
			return matched
		}
		n = child
	}
}

// step is Trie.step with the roundUp or firstTokenKeys bug.
func (b *buggy) step(n *node, rest []int32) (*node, int) {
	if b.bug != roundUp && b.bug != firstTokenKeys {
		return b.Trie.step(n, rest)
	}
	if len(rest) < b.bs {
		return nil, 0
	}
	child := n.children[b.key(rest)]
	if child == nil {
		return nil, 0
	}
	i := commonPrefix(child.tokens, rest)
	if b.bug == roundUp {
		return child, b.bs * ((i + 1) / b.bs) // BUG: rounds up when i is one short of a block boundary
	}
	return child, alignDown(i, b.bs)
}

// key is keyOf, or the first token alone with firstTokenKeys.
func (b *buggy) key(tokens []int32) uint64 {
	if b.bug == firstTokenKeys {
		return uint64(uint32(tokens[0])) // BUG: two first blocks may share a first token
	}
	return keyOf(tokens[:b.bs])
}

func (b *buggy) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	switch b.bug {
	case noReparent, sharedChildren, headCopy, blocksByTokens, adoptDropsDups, firstTokenKeys, callersSlice:
	default:
		return b.Trie.Insert(seq, salt, tokens, pages, lent)
	}
	b.clock++
	end := alignDown(len(tokens), b.bs)
	n, done := b.root, 0
	for done < end {
		rest := tokens[done:end]
		child, k := b.step(n, rest)
		if child == nil || (b.bug == firstTokenKeys && k == 0) {
			b.addLeaf(seq, n, rest, pages[done/b.bs:end/b.bs])
			break
		}
		if k == 0 {
			break
		}
		if k < len(child.tokens) && k < len(rest) {
			b.split(child, k)
		}
		child.lastUse = b.clock
		n, done = child, done+k
	}
	if b.bug == adoptDropsDups {
		return end / b.bs // BUG: claims every covered page, though it recorded only the new ones
	}
	return lent
}

// addLeaf is Trie.addLeaf with the adoptDropsDups, firstTokenKeys or
// callersSlice bug.
func (b *buggy) addLeaf(seq int, parent *node, tokens, blocks []int32) {
	leaf := &node{tokens: append([]int32(nil), tokens...), blocks: append([]int32(nil), blocks...), parent: parent, lastUse: b.clock}
	if b.bug == callersSlice {
		leaf.tokens = tokens // BUG: the caller may write to its slice later
	}
	for _, x := range leaf.blocks {
		b.take([]int32{x})
		if b.bug == adoptDropsDups {
			// The adopted page: the sequence's pool reference becomes a
			// reference the trie drops at Release. Pages of the part that
			// was cached already are not recorded anywhere.
			b.holds[x]++
			b.lent[seq] = append(b.lent[seq], x)
		}
	}
	b.blocks += len(leaf.blocks)
	if parent.children == nil {
		parent.children = make(map[uint64]*node)
	}
	parent.children[b.key(leaf.tokens)] = leaf
}

// split is Trie.split with one of the split bugs.
func (b *buggy) split(n *node, k int) {
	kb := k / b.bs
	if b.bug == blocksByTokens {
		kb = k // BUG: k counts tokens, the block list counts blocks
	}
	tail := &node{tokens: n.tokens[k:], blocks: n.blocks[kb:], children: n.children, parent: n, lastUse: n.lastUse}
	if b.bug != noReparent {
		for _, c := range tail.children {
			c.parent = tail
		}
	} // BUG (noReparent): the moved children still point at the head
	n.tokens, n.blocks = n.tokens[:k:k], n.blocks[:kb:kb]
	switch b.bug {
	case sharedChildren:
		if n.children == nil {
			n.children = make(map[uint64]*node)
			tail.children = n.children
		}
		n.children[b.key(tail.tokens)] = tail // BUG: the head's map is the tail's map too
	case headCopy:
		n.adopt(b.key(tail.tokens), tail) // BUG: a value receiver: the assignment lands on a copy
	default:
		n.children = map[uint64]*node{b.key(tail.tokens): tail}
	}
}

// adopt makes tail n's only child. It has a value receiver, so it sets
// the children of a copy of n, and n keeps its old ones.
func (n node) adopt(key uint64, tail *node) {
	n.children = map[uint64]*node{key: tail}
}

func (b *buggy) Evict(n int) int {
	if b.bug == heapPointer {
		return b.evictThroughPointer(n)
	}
	if b.bug != rangeKeys && b.bug != wholeLeaves && b.bug != noReparent {
		b.rebuild() // the buggy methods keep no eviction bookkeeping
		return b.Trie.Evict(n)
	}
	// The eviction loop of the design these bugs were found in: free a
	// whole victim, then take it out of its parent's children. (The
	// library trims victims instead, which turns a stale node into an
	// empty one rather than one listing freed blocks.)
	freed := 0
	q := b.victims()
	for freed < n && q.Len() > 0 {
		v := heap.Pop(q).(victim)
		b.drop(v.n.blocks)
		freed += len(v.n.blocks)
		b.blocks -= len(v.n.blocks)
		parent := v.n.parent
		if b.bug == rangeKeys {
			for c := range parent.children { // BUG: ranging over a map yields its keys
				if any(c) == any(v.n) { // a key is never the node: nothing is removed
					delete(parent.children, c)
				}
			}
		} else {
			delete(parent.children, v.key)
		}
		if parent != b.root && len(parent.children) == 0 && b.unpinned(parent) {
			heap.Push(q, victim{parent, keyOf(parent.tokens[:b.bs]), v.level - 1, v.start - len(parent.blocks)})
		}
	}
	b.evicted += freed
	return freed
}

// evictThroughPointer is an eviction loop that frees one block at a time
// from the first victim, fixing the heap in place, and pops it once empty.
func (b *buggy) evictThroughPointer(n int) int {
	freed := 0
	q := b.victims()
	for freed < n && q.Len() > 0 {
		v := &q.items[0] // BUG: after heap.Pop, items[0] is another victim
		freed += b.trim(v.n, 1)
		if len(v.n.blocks) > 0 {
			heap.Fix(q, 0)
			continue
		}
		heap.Pop(q)
		delete(v.n.parent.children, v.key) // removes the other victim
	}
	b.evicted += freed
	return freed
}

func (b *buggy) Evictable() int {
	if b.bug != countAllUnpinned {
		b.rebuild()
		return b.Trie.Evictable()
	}
	count := 0
	var walk func(n *node)
	walk = func(n *node) {
		for _, c := range n.children {
			walk(c)
		}
		if n != b.root && b.unpinned(n) { // BUG: ignores whether n's children can go first
			count += len(n.blocks)
		}
	}
	walk(b.root)
	return count
}
