package trie

import "slices"

// Insert caches the KV of tokens, held in pages (the sequence's page
// table), for every whole block not cached yet. The part of tokens that is
// already cached is left as it is, even when seq computed it again in
// pages of its own; a trailing partial block is never cached.
//
// Insert increfs the blocks of the nodes it creates (the trie's own
// reference) and adopts nothing: seq keeps its references and the pool
// releases them, so Insert returns lent unchanged. Calling it again with a
// longer sequence (prompt, then prompt and output) extends the path.
func (t *Trie) Insert(seq int, tokens, pages []int32, lent int) (newLent int) {
	t.clock++
	end := alignDown(len(tokens), t.bs)
	n, done := t.root, 0
	for done < end {
		rest := tokens[done:end]
		child, k := t.step(n, rest)
		if child == nil {
			t.addLeaf(n, rest, pages[done/t.bs:end/t.bs])
			break
		}
		if k == 0 {
			break // a different first block with the same key is cached
		}
		if k < len(child.tokens) && k < len(rest) {
			t.split(child, k) // the tail keeps child's lastUse: this insert did not reach it
		}
		child.lastUse = t.clock
		n, done = child, done+k // if rest ends inside child, all of it was cached
	}
	return lent
}

// addLeaf hangs a new leaf holding tokens and blocks (copies of both) under
// parent, taking the trie's reference on each block.
func (t *Trie) addLeaf(parent *node, tokens, blocks []int32) {
	leaf := &node{
		tokens:  slices.Clone(tokens), // the caller may reuse its slice
		blocks:  slices.Clone(blocks),
		parent:  parent,
		lastUse: t.clock,
	}
	t.take(leaf.blocks)
	t.blocks += len(leaf.blocks)
	if parent.children == nil {
		parent.children = make(map[uint64]*node)
	}
	parent.children[keyOf(leaf.tokens[:t.bs])] = leaf
}

// split cuts n after k tokens, a whole number of blocks inside n. n keeps
// the head, so its entry in its parent's map (keyed by the same first
// block) and every pointer to it stay valid; a new tail node takes the
// rest of the tokens and blocks and all of n's children.
func (t *Trie) split(n *node, k int) {
	kb := k / t.bs
	tail := &node{
		tokens:   n.tokens[k:],
		blocks:   n.blocks[kb:],
		children: n.children,
		parent:   n,
		lastUse:  n.lastUse,
	}
	for _, c := range tail.children {
		c.parent = tail // they moved: eviction walks up through parent
	}
	// The head's slices are capped so that growing one could never write
	// into the tail's tokens, which share the array.
	n.tokens, n.blocks = n.tokens[:k:k], n.blocks[:kb:kb]
	// A fresh map: giving the head the old one would make the tail its
	// own child.
	n.children = map[uint64]*node{keyOf(tail.tokens[:t.bs]): tail}
}
