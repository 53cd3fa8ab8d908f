package grammar

import (
	"slices"
)

// maxDFAStates bounds the states a matcher's mask cache interns (each holds
// a 256-entry transition row, about 1 KiB): past it new states are followed
// uncached, and the next Allowed starts a fresh cache.
var maxDFAStates = 4096 // a variable so a test can make it tiny

// dfa interns the states Allowed reaches so that a byte from a state already
// seen is a table lookup instead of a step of every stack. A Matcher keeps
// its dfa between calls (states are compared by value, so an entry stays
// true for the grammar); Clone starts without one.
type dfa struct {
	g      *Grammar
	states []state
	// trans[id<<8|b] is the transition of state id on byte b: 0 not
	// computed yet, -1 refused, tooMany refused because the step would
	// have needed more than MaxStacks stacks, k > 0 the state with id k-1.
	trans []int32
	index map[uint64][]int32
	// base[id] is, for a state with bytes pending, the state with its
	// stacks and none (-1: not known); runes holds the transitions of
	// completed code points by runeKey (runes.go).
	base  []int32
	runes map[runeKey]int32
	ss    stackSet
	tmp   state
	masks maskCache // whole masks by state id
	// overflow is set by a walk that met a tooMany transition; widest is
	// the most stacks of any state met so far. The position masks need
	// both to prove that no token could reach MaxStacks (position.go).
	overflow bool
	widest   int
	// positioned counts the masks put together from position masks, for
	// tests.
	positioned int
	// runeHits counts transitions taken from runes, for tests.
	runeHits int
}

// tooMany marks a transition refused for MaxStacks, not by the grammar.
const tooMany = -2

func newDFA(g *Grammar) *dfa {
	return &dfa{g: g, index: make(map[uint64][]int32), runes: make(map[runeKey]int32)}
}

// stateKey hashes a state independently of the order of its stacks.
func stateKey(st *state) uint64 {
	var h uint64
	for _, n := range st.stacks {
		x := uint64(0x632be59bd9b4e019)
		if n != nil {
			x = n.hash
		}
		x ^= x >> 31
		x *= 0x9e3779b97f4a7c15
		h += x
	}
	h ^= uint64(st.npend)<<56 | uint64(st.need)<<48 | uint64(st.pend[0])<<24 | uint64(st.pend[1])<<16 | uint64(st.pend[2])<<8 | uint64(st.pend[3])
	return h * 0xff51afd7ed558ccd
}

func stackHash(n *node) uint64 {
	if n == nil {
		return 0
	}
	return n.hash
}

// intern returns the id of st (its stacks sorted by hash, a canonical
// order), or -1 when the cache is full and st is new. owned: st's slice may
// be sorted in place (stack slices are never written once built, so a
// slice that is already sorted is kept as it is).
func (d *dfa) intern(st state, owned bool) int32 {
	if !owned {
		st.stacks = slices.Clone(st.stacks)
	}
	slices.SortFunc(st.stacks, func(a, b *node) int {
		ha, hb := stackHash(a), stackHash(b)
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return 0
	})
	k := stateKey(&st)
	for _, id := range d.index[k] {
		if sameState(&d.states[id], &st) {
			return id
		}
	}
	if len(d.states) >= maxDFAStates {
		return -1
	}
	id := int32(len(d.states))
	d.states = append(d.states, st)
	d.base = append(d.base, -1)
	d.widest = max(d.widest, len(st.stacks))
	d.trans = append(d.trans, make([]int32, 256)...)
	d.index[k] = append(d.index[k], id)
	return id
}

// sameState compares two states whose stacks are sorted by hash. Stacks
// with equal hashes may come in either order, so those are matched as sets.
func sameState(a, b *state) bool {
	if a.npend != b.npend || a.need != b.need || a.pend != b.pend || len(a.stacks) != len(b.stacks) {
		return false
	}
	for i, x := range a.stacks {
		if sameStack(x, b.stacks[i]) {
			continue
		}
		found := false
		for j := range b.stacks {
			if stackHash(b.stacks[j]) == stackHash(x) && sameStack(x, b.stacks[j]) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// next sets ids[depth] (and raw[depth] when uncached) to the state after
// byte c from the state at depth-1; false: c is refused there.
func (d *dfa) next(ids []int32, raw []state, depth int32, c byte) bool {
	p := ids[depth-1]
	if p < 0 {
		ok, err := d.g.feed(&raw[depth-1], c, &raw[depth], &d.ss)
		ids[depth] = -1
		d.overflow = d.overflow || err != nil
		d.widest = max(d.widest, len(raw[depth].stacks))
		return ok
	}
	t := d.trans[int(p)<<8|int(c)]
	if t == 0 {
		rk, memo := d.completes(p, c)
		if memo {
			t = d.runes[rk]
			if t != 0 {
				d.runeHits++
			}
		}
		if t == 0 {
			ok, err := d.g.feed(&d.states[p], c, &d.tmp, &d.ss)
			switch {
			case err != nil:
				t = tooMany
			case !ok:
				t = -1
			default:
				id := d.intern(d.tmp, true)
				if id < 0 {
					ids[depth], raw[depth] = -1, d.tmp
					d.widest = max(d.widest, len(d.tmp.stacks))
					return true
				}
				d.setBase(p, id)
				t = id + 1
			}
			if memo {
				d.runes[rk] = t
			}
		}
		d.trans[int(p)<<8|int(c)] = t
	}
	if t < 0 {
		d.overflow = d.overflow || t == tooMany
		return false
	}
	ids[depth] = t - 1
	return true
}

// walk sets in dst (without clearing it) the bit of every token of v that
// the state st accepts, root being its interned id (-1: not interned). It
// is the trie walk of Allowed: one state per depth, a refused byte skips
// the subtree.
func (d *dfa) walk(v *Vocab, root int32, st state, dst []uint64) {
	ids := make([]int32, v.max+1)
	raw := make([]state, v.max+1) // for states past the cache's bound
	ids[0] = root
	raw[0] = st
	nodes := v.nodes
	trans := d.trans
	for i := int32(1); i < int32(len(nodes)-1); {
		n := &nodes[i]
		var t int32 // the common case inline: a transition in the table
		if p := ids[n.depth-1]; p >= 0 {
			t = trans[int(p)<<8|int(n.edge)]
		}
		switch {
		case t > 0:
			ids[n.depth] = t - 1
		case t == 0: // not computed yet, or the parent is past the cache
			if !d.next(ids, raw, n.depth, n.edge) {
				t = -1
			}
			trans = d.trans // next may have grown it
		case t == tooMany:
			d.overflow = true
		}
		if t < 0 {
			i = n.skip
			continue
		}
		for _, id := range v.ids[n.tok:nodes[i+1].tok] {
			dst[id>>6] |= 1 << (id & 63)
		}
		i++
	}
}

// marks is a set of trie nodes, none inside another's subtree, with the
// bytes of the path to each, front coded: node i shares lcp[i] bytes with
// the path of node i-1, and tail[off[i]:off[i+1]] follow.
type marks struct {
	nodes []int32
	lcp   []int32
	off   []int32
	tail  []byte
}

// add appends node i (after every node added before it, in trie order).
func (m *marks) add(v *Vocab, i int32) {
	n := &v.nodes[i]
	path := v.pieces[v.ids[n.tok]][:n.depth] // every token below starts so
	k := 0
	if len(m.nodes) > 0 {
		prev := &v.nodes[m.nodes[len(m.nodes)-1]]
		before := v.pieces[v.ids[prev.tok]][:prev.depth]
		for k < len(before) && k < len(path) && before[k] == path[k] {
			k++
		}
	}
	if len(m.off) == 0 {
		m.off = append(m.off, 0)
	}
	m.nodes = append(m.nodes, i)
	m.lcp = append(m.lcp, int32(k))
	m.tail = append(m.tail, path[k:]...)
	m.off = append(m.off, int32(len(m.tail)))
}

// size is the memory of m in bytes.
func (m *marks) size() int { return 12*len(m.nodes) + len(m.tail) }

// markPath is one marked node with the bytes of the path to it.
type markPath struct {
	node int32
	path []byte
}

// paths appends m's nodes with their paths (decoded into buf) to dst.
func (m *marks) paths(dst []markPath, buf []byte) ([]markPath, []byte) {
	var prev []byte
	for j, n := range m.nodes {
		start := len(buf)
		buf = append(buf, prev[:m.lcp[j]]...)
		buf = append(buf, m.tail[m.off[j]:m.off[j+1]]...)
		prev = buf[start:]
		dst = append(dst, markPath{n, prev})
	}
	return dst, buf
}

// walkUnder is walk restricted to the subtrees of the marked nodes (in
// trie order; one inside another's subtree adds nothing): it goes straight
// down each mark's path, keeping the states of the part it shares with the
// path before, so the cost is those paths and subtrees, not the siblings
// between them.
func (d *dfa) walkUnder(v *Vocab, under []markPath, root int32, st state, dst []uint64) {
	ids := make([]int32, v.max+1)
	raw := make([]state, v.max+1)
	ids[0] = root
	raw[0] = st
	nodes := v.nodes
	var prev []byte
	valid := int32(0) // ids[0..valid] are the states along prev
	end := int32(0)   // the end of the last subtree walked
	for _, mp := range under {
		u := mp.node
		if u < end {
			continue // inside the subtree walked before
		}
		top := &nodes[u]
		k := int32(0)
		for k < valid && int(k) < len(prev) && int(k) < len(mp.path) && prev[k] == mp.path[k] {
			k++
		}
		prev, valid = mp.path, k
		for valid < top.depth && d.next(ids, raw, valid+1, mp.path[valid]) {
			valid++
		}
		if valid < top.depth {
			continue // refused on the way: nothing below is allowed
		}
		end = top.skip
		for _, id := range v.ids[top.tok:nodes[u+1].tok] {
			dst[id>>6] |= 1 << (id & 63)
		}
		for i := u + 1; i < top.skip; {
			n := &nodes[i]
			if !d.next(ids, raw, n.depth, n.edge) {
				i = n.skip
				continue
			}
			for _, id := range v.ids[n.tok:nodes[i+1].tok] {
				dst[id>>6] |= 1 << (id & 63)
			}
			i++
		}
	}
}
