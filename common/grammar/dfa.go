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
	// computed yet, -1 refused, k > 0 the state with id k-1.
	trans []int32
	index map[uint64][]int32
	ss    stackSet
	tmp   state
	masks maskCache // whole masks by state id
}

func newDFA(g *Grammar) *dfa {
	return &dfa{g: g, index: make(map[uint64][]int32)}
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
		ok, _ := d.g.feed(&raw[depth-1], c, &raw[depth], &d.ss)
		ids[depth] = -1
		return ok
	}
	t := d.trans[int(p)<<8|int(c)]
	if t == 0 {
		ok, _ := d.g.feed(&d.states[p], c, &d.tmp, &d.ss)
		if !ok {
			t = -1
		} else if id := d.intern(d.tmp, true); id >= 0 {
			t = id + 1
		} else {
			ids[depth], raw[depth] = -1, d.tmp
			return true
		}
		d.trans[int(p)<<8|int(c)] = t
	}
	if t < 0 {
		return false
	}
	ids[depth] = t - 1
	return true
}
