package trie

import (
	"errors"
	"fmt"
)

// Eviction bookkeeping. The trie keeps, as it changes, what Evict and
// Evictable need, so that neither walks the trie:
//
//   - per node, tail: how many of its trailing blocks, whole segments
//     from the last, nobody but the trie holds (what Evict could take
//     from it once everything below it has gone), and full, whether that
//     is all of its blocks;
//   - per node, busyKids: how many of its children have a subtree Evict
//     could not empty;
//   - the total of tail over the nodes with no such child (evictable);
//   - a heap of the evictable leaves (childless nodes whose last segment
//     nobody else holds), first in policy order (victims).
//
// The trie sees the references it takes and gives back itself, but not
// the pool's: when a sequence frees its own pages (which Insert cached
// without adopting), a fork ends or a copy-on-write drops an original,
// nobody tells the trie. A node found held by someone else is therefore
// kept in pinned and measured again whenever Evict or Evictable asks
// (settle). The other direction needs no check: a block only the trie
// holds is in no page table, so only Match can give it a holder, and Match
// measures the nodes it lends from. So settle costs O(blocks of pinned
// nodes), which is bounded by what live sequences hold, not by the size of
// the cache; with no sequence running, Evictable is a field read.

// Evict frees up to n blocks that nothing but the trie holds and reports
// how many it freed: min(n, Evictable()). It takes the leaf the policy
// puts first and frees its blocks from the end, until n is reached or the
// leaf is empty; a long leaf thus loses only what is asked for and keeps
// its head cached. A parent that became an idle leaf when its last child
// went becomes a candidate in turn (evict). A parent left with one child
// and no holders of its own is then merged with that child (mergeChains).
//
// The candidates are kept in a heap as the trie changes, so Evict costs
// O(log n) per leaf it takes from, plus the blocks it frees.
func (t *Trie) Evict(n int) int {
	freed := t.evict(n)
	t.mergeChains() // an optimisation: see merge (insert.go)
	return freed
}

// evict is Evict without the merging: the eviction itself.
func (t *Trie) evict(n int) int {
	if n <= 0 {
		return 0
	}
	t.settle()
	freed := 0
	for freed < n && len(t.leaves.items) > 0 {
		v := t.leaves.items[0]
		if t.pick != nil {
			t.pick(v)
		}
		// trim, but no further than v's last segment if v was merged:
		// each segment is asked about as the node it was (insert.go).
		freed += t.trimSegment(v, n-freed) // re-sorts or removes v
		if len(v.blocks) > 0 {
			continue // n is reached inside v (or v, merged, lost a segment)
		}
		parent := v.parent
		t.detach(v)
		if parent.parent == nil {
			t.dropIfEmpty(parent) // a salt's last block is gone
		}
		t.sync(parent) // it may be a candidate now
	}
	t.evicted += freed
	return freed
}

// trim frees up to m blocks from the end of leaf n and returns how many.
// Its tokens shrink with them, so it stays block-aligned.
func (t *Trie) trim(n *node, m int) int {
	m = min(m, len(n.blocks))
	keep := len(n.blocks) - m
	t.drop(n.blocks[keep:])
	n.blocks, n.tokens = n.blocks[:keep], n.tokens[:keep*t.bs]
	t.blocks -= m
	n.end -= m
	t.measure(n)
	t.sync(n)
	return m
}

// detach takes the emptied leaf n out of its parent's children, and notes
// a parent left with one child for mergeChains.
func (t *Trie) detach(n *node) {
	t.leaves.remove(n)
	t.evictable -= n.counted
	n.counted = 0
	p := n.parent
	if n.inBusy {
		p.busyKids--
		n.inBusy = false
	}
	delete(p.children, n.key)
	n.dead = true
	if len(p.children) == 1 {
		t.chains = append(t.chains, p)
	}
}

// Evictable returns how many blocks Evict could free now: the blocks of
// every node whose whole subtree nothing but the trie holds, and of a
// node whose subtree below it is idle, its idle trailing segments. It is
// a counter the trie keeps, after settling the nodes live sequences held.
func (t *Trie) Evictable() int {
	t.settle()
	return t.evictable
}

// settle measures again every node some sequence held when last measured.
func (t *Trie) settle() {
	keep := t.pinned[:0]
	for _, n := range t.pinned {
		if n.dead {
			n.pinned = false
			continue
		}
		t.measure(n)
		t.sync(n)
		if n.full {
			n.pinned = false
			continue
		}
		keep = append(keep, n)
	}
	clear(t.pinned[len(keep):])
	t.pinned = keep
}

// measure sets n's tail and full from the allocator's counts, and pins n
// if someone but the trie holds one of its blocks.
func (t *Trie) measure(n *node) {
	// Segments from the last: each goes once those after it have gone.
	end, tail, full := len(n.blocks), 0, true
	for i := len(n.joins); i >= 0; i-- {
		from := 0
		if i > 0 {
			from = n.joins[i-1]
		}
		if !t.idle(n.blocks[from:end]) {
			full = false
			break
		}
		tail += end - from
		end = from
	}
	n.tail, n.full = tail, full
	if !full && !n.pinned {
		n.pinned = true
		t.pinned = append(t.pinned, n)
	}
}

// sync brings the counters and the heap up to date with n's tail, full,
// children and policy key, and carries a change of whether n's subtree
// can be emptied up to its ancestors.
func (t *Trie) sync(n *node) {
	for n != nil {
		c := 0
		if n.busyKids == 0 {
			c = n.tail
		}
		t.evictable += c - n.counted
		n.counted = c
		if n.parent != nil && len(n.children) == 0 && n.tail > 0 {
			t.leaves.update(n)
		} else {
			t.leaves.remove(n)
		}
		busy := !n.full || n.busyKids > 0
		if n.parent == nil || busy == n.inBusy {
			return
		}
		n.inBusy = busy
		if busy {
			n.parent.busyKids++
		} else {
			n.parent.busyKids--
		}
		n = n.parent
	}
}

// idle reports whether the trie's reference is the only one on every block.
func (t *Trie) idle(blocks []int32) bool {
	for _, b := range blocks {
		if t.alloc.Refs(b) != 1 {
			return false
		}
	}
	return true
}

// unpinned reports whether the trie's reference is the only one on every
// block of n: no live sequence reads any of them.
func (t *Trie) unpinned(n *node) bool { return t.idle(n.blocks) }

// lastSegmentIdle reports whether nobody but the trie holds a block of n's
// last segment: whether n, as a leaf, can lose blocks.
func (t *Trie) lastSegmentIdle(n *node) bool {
	return len(n.blocks) > 0 && t.idle(n.blocks[n.lastSegment():])
}

// restate measures each of nodes again and brings the bookkeeping up to
// date: Match calls it for the nodes it lent from.
func (t *Trie) restate(nodes []*node) {
	for _, n := range nodes {
		t.measure(n)
		t.sync(n)
	}
}

// AuditCache checks the eviction bookkeeping against a walk of the whole
// trie: Evictable against a recount, every node's measures and busy
// children, and the heap against the evictable leaves. The conformance
// suite calls it after every operation (cachetest's Harness.Audit); it
// costs O(cached blocks) and changes nothing a caller could see.
func (t *Trie) AuditCache() error {
	t.settle()
	total, leaves := 0, 0
	var errs []error
	var walk func(n *node) (blocks int, all bool)
	walk = func(n *node) (blocks int, all bool) {
		all = true
		busy := 0
		for key, c := range n.children {
			if c.key != key || c.parent != n {
				errs = append(errs, fmt.Errorf("trie: node at depth %d is under key %x, records %x", c.end, key, c.key))
			}
			b, ok := walk(c)
			blocks += b
			if !ok {
				busy++
			}
			all = all && ok
		}
		if busy != n.busyKids {
			errs = append(errs, fmt.Errorf("trie: node at depth %d counts %d busy children, has %d", n.end, n.busyKids, busy))
		}
		tail, full := n.tail, n.full
		t.measure(n)
		if n.tail != tail || n.full != full {
			errs = append(errs, fmt.Errorf("trie: node at depth %d recorded tail %d full %v, is %d %v", n.end, tail, full, n.tail, n.full))
		}
		leaf := n.parent != nil && len(n.children) == 0 && t.lastSegmentIdle(n)
		if leaf != (n.hidx > 0) {
			errs = append(errs, fmt.Errorf("trie: node at depth %d evictable leaf %v, in heap %v", n.end, leaf, n.hidx > 0))
		}
		if leaf {
			leaves++
		}
		if !all {
			return blocks, false
		}
		return blocks + n.tail, n.full
	}
	for _, r := range t.roots() {
		b, _ := walk(r)
		total += b
	}
	if total != t.evictable {
		errs = append(errs, fmt.Errorf("trie: Evictable is %d, a recount finds %d", t.evictable, total))
	}
	if leaves != len(t.leaves.items) {
		errs = append(errs, fmt.Errorf("trie: %d evictable leaves, %d in the heap", leaves, len(t.leaves.items)))
	}
	for i := 1; i < len(t.leaves.items); i++ {
		if t.leaves.less(i, (i-1)/2) {
			errs = append(errs, fmt.Errorf("trie: heap out of order at %d", i))
			break
		}
	}
	return errors.Join(errs...)
}
