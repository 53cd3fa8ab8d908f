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
// Everything goes into salt's trie, the one seq matched in.
func (t *Trie) Insert(seq int, salt string, tokens, pages []int32, lent int) (newLent int) {
	t.clock++
	end := alignDown(len(tokens), t.bs)
	if end == 0 {
		return lent // no whole block: make no root for nothing
	}
	n, done := t.rootOf(salt, true), 0
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
		t.sync(child)           // its policy key changed
		n, done = child, done+k // if rest ends inside child, all of it was cached
	}
	return lent
}

// addLeaf hangs a new leaf holding tokens and blocks (copies of both, cut
// from the trie's arenas) under parent, taking the trie's reference on each block.
func (t *Trie) addLeaf(parent *node, tokens, blocks []int32) {
	leaf := &node{
		tokens:  t.tokens.concat(t.blocks*t.bs, tokens), // a copy: the caller may reuse its slice
		blocks:  t.runs.concat(t.blocks, blocks),
		parent:  parent,
		lastUse: t.clock,
		refs:    1, // the sequence inserting it
		key:     keyOf(tokens[:t.bs]),
		end:     parent.end + len(blocks),
	}
	t.take(leaf.blocks)
	t.blocks += len(leaf.blocks)
	if parent.children == nil {
		parent.children = make(map[uint64]*node)
	}
	parent.children[leaf.key] = leaf
	t.measure(leaf)
	t.sync(leaf)
	t.sync(parent) // no longer a leaf
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
		// Which of n's users reached past the cut is not recorded: the
		// tail keeps n's count, at most its true one.
		refs:     n.refs,
		key:      keyOf(n.tokens[k : k+t.bs]),
		end:      n.end,
		busyKids: n.busyKids, // n's children are the tail's
	}
	for _, c := range tail.children {
		c.parent = tail // they moved: eviction walks up through parent
	}
	// The head's slices are capped so that growing one could never write
	// into the tail's tokens, which share the array.
	n.tokens, n.blocks = n.tokens[:k:k], n.blocks[:kb:kb]
	n.joins, tail.joins = splitJoins(n.joins, kb) // a merged node's segments (see merge)
	// A fresh map: giving the head the old one would make the tail its
	// own child.
	n.children = map[uint64]*node{tail.key: tail}
	n.end -= len(tail.blocks)
	n.busyKids = 0
	t.measure(n)
	t.measure(tail)
	t.sync(tail)
	t.sync(n)
}

// Merging single-child chains. What follows keeps fewer nodes, and so
// fewer map lookups per match, where eviction leaves a node with one
// child: it is an optimisation, and a trie that never merges (Trie.evict
// without mergeChains) caches, matches and evicts correctly. The rest of
// the trie meets it in three places: split hands a merged node's segments
// to head and tail (splitJoins), eviction trims one segment at a time
// (trimSegment), and Evict merges what its eviction left (mergeChains).
// TestMergingChangesNothingAWalkSees and FuzzMergingIsInvisible check
// that a merge changes no match, no count and no segment.

// merge folds n's only child c into n (see mergeable): n's tokens and
// blocks run on with c's, and c's children become n's. A join records where
// c's blocks begin, so that eviction still frees c's blocks before n's and
// asks the policy again between them, as it did when they were two nodes.
// n keeps its place in its parent's children (its first block is
// unchanged), and keeps its own lastUse and refs: every use of c passed
// through n, so n's are the larger, and they describe the merged node's
// head, the prefix most worth keeping. Taking c's instead would make a
// shared prefix look as little used as one tail (PITFALLS.md, "Merging a
// node with its only child and taking the child's count").
// No allocator count changes: the same blocks, listed by one node.
func (t *Trie) merge(n *node) {
	var c *node
	for _, only := range n.children {
		c = only
	}
	joins := append(slices.Clone(n.joins), len(n.blocks))
	for _, j := range c.joins {
		joins = append(joins, len(n.blocks)+j)
	}
	n.joins = joins
	n.tokens = t.tokens.concat(t.blocks*t.bs, n.tokens, c.tokens) // a new run: nodes' tokens are never written
	n.blocks = t.runs.concat(t.blocks, n.blocks, c.blocks)
	n.children = c.children
	for _, g := range n.children {
		g.parent = n
	}
	// c leaves the trie; n takes its place in the bookkeeping.
	t.leaves.remove(c)
	t.evictable -= c.counted
	c.counted, c.dead = 0, true
	n.busyKids, n.end = c.busyKids, c.end
	t.measure(n)
	t.sync(n)
}

// mergeable reports whether n can absorb its only child: n is not a
// root (merging a root into a child would join two salts' tries), has exactly one child, and has no holders of its own — each of its
// blocks has as many references as the child's first block, so every
// sequence reading n reads on into the child. That is the classic
// rule (merge a node nobody references on its own). The joins would keep the
// trie correct without it; with it, the users of a merged node all went
// the whole way, so its one count and last use describe all of it.
func (t *Trie) mergeable(n *node) bool {
	if n.parent == nil || len(n.children) != 1 {
		return false
	}
	var c *node
	for _, only := range n.children {
		c = only
	}
	want := t.alloc.Refs(c.blocks[0])
	for _, b := range n.blocks {
		if t.alloc.Refs(b) != want {
			return false
		}
	}
	return true
}

// mergeChains merges every node eviction left with one child (chains,
// noted by detach) that is still in the trie with its only child, as long
// as the result can absorb its next only child.
func (t *Trie) mergeChains() {
	for _, n := range t.chains {
		if !t.attached(n) {
			continue // evicted, or absorbed by an earlier merge
		}
		for t.mergeable(n) {
			t.merge(n)
		}
	}
	clear(t.chains)
	t.chains = t.chains[:0]
}

// attached reports whether n is still in the trie.
func (t *Trie) attached(n *node) bool {
	return n.parent != nil && len(n.tokens) > 0 && n.parent.children[n.key] == n
}

// splitJoins cuts the joins of a node split after block kb: those before
// the cut stay with the head, those after it move to the tail (counted
// from the tail's first block), and one at the cut is the new node
// boundary. A node that never merged has none on either side.
func splitJoins(joins []int, kb int) (head, tail []int) {
	for _, j := range joins {
		switch {
		case j < kb:
			head = append(head, j)
		case j > kb:
			tail = append(tail, j-kb)
		}
	}
	return head, tail
}

// lastSegment returns the index in n.blocks where n's last segment starts:
// 0, all of n, unless n was merged.
func (n *node) lastSegment() int {
	if len(n.joins) == 0 {
		return 0
	}
	return n.joins[len(n.joins)-1]
}

// trimSegment is trim within leaf n's last segment: it frees up to m of
// that segment's blocks and no others, and forgets the segment's join once
// they are all gone, so that the segment before it is asked about again
// as the node it was (docs/phase08_compressed.md, "Merging single-child
// chains"). On a node that never merged it is trim.
func (t *Trie) trimSegment(n *node, m int) int {
	if k := len(n.joins); k > 0 {
		if from := n.joins[k-1]; m >= len(n.blocks)-from {
			m = len(n.blocks) - from
			n.joins = n.joins[:k-1]
		}
	}
	return t.trim(n, m)
}
