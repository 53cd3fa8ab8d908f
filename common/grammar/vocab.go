package grammar

import (
	"bytes"
	"sort"
)

// Vocab is a vocabulary prepared for masks: token id -> the bytes it emits,
// arranged as a trie so tokens that share a prefix are matched once. A nil
// or empty piece (special and control tokens) is never allowed.
type Vocab struct {
	pieces [][]byte
	// The trie in depth-first preorder, one small struct per node so a walk
	// reads memory in order. Node i (i >= 1; 0 is the root) consumes edge
	// at depth; its subtree ends just before skip; the tokens whose bytes
	// end there are ids[nodes[i].tok:nodes[i+1].tok].
	nodes []trieNode
	ids   []int32
	max   int32 // deepest node
}

type trieNode struct {
	skip  int32
	tok   int32
	depth int32
	edge  byte
}

// NewVocab builds the trie. pieces[id] is what token id emits.
func NewVocab(pieces [][]byte) *Vocab {
	order := make([]int32, 0, len(pieces))
	for id, p := range pieces {
		if len(p) > 0 {
			order = append(order, int32(id))
		}
	}
	sort.Slice(order, func(i, j int) bool {
		if c := bytes.Compare(pieces[order[i]], pieces[order[j]]); c != 0 {
			return c < 0
		}
		return order[i] < order[j]
	})
	return buildTrie(pieces, order)
}

// buildTrie arranges the tokens order names (non-empty pieces, sorted by
// their bytes, then by id) as a trie over the whole id space of pieces, so
// a trie of a few tokens still sets their bits where the full one would.
func buildTrie(pieces [][]byte, order []int32) *Vocab {
	v := &Vocab{pieces: pieces}
	// Root node.
	v.nodes = []trieNode{{}}
	var path []int32 // node index at each depth (path[0] = root)
	path = append(path, 0)
	var prev []byte
	for _, id := range order {
		p := pieces[id]
		lcp := 0
		for lcp < len(p) && lcp < len(prev) && p[lcp] == prev[lcp] {
			lcp++
		}
		if lcp == len(p) && len(p) == len(prev) {
			// Same bytes as the previous token: it ends at the same node.
			v.ids = append(v.ids, id)
			continue
		}
		// Close the nodes of prev below the common prefix.
		for d := len(path) - 1; d > lcp; d-- {
			v.nodes[path[d]].skip = int32(len(v.nodes))
		}
		path = path[:lcp+1]
		for d := lcp; d < len(p); d++ {
			n := int32(len(v.nodes))
			v.nodes = append(v.nodes, trieNode{edge: p[d], depth: int32(d + 1), tok: int32(len(v.ids))})
			path = append(path, n)
			if int32(d+1) > v.max {
				v.max = int32(d + 1)
			}
		}
		v.ids = append(v.ids, id)
		prev = p
	}
	for d := len(path) - 1; d >= 0; d-- {
		v.nodes[path[d]].skip = int32(len(v.nodes))
	}
	v.nodes = append(v.nodes, trieNode{tok: int32(len(v.ids))}) // sentinel
	return v
}

// Len is the number of token ids (the bitset needs (Len()+63)/64 words).
func (v *Vocab) Len() int { return len(v.pieces) }

func words(v *Vocab, dst []uint64) []uint64 {
	n := (len(v.pieces) + 63) / 64
	if cap(dst) < n {
		dst = make([]uint64, n)
	}
	dst = dst[:n]
	clear(dst)
	return dst
}

// allowedPlain is the reference mask: every token on its own, by Clone and
// Accept. Allowed must agree with it.
func (m *Matcher) allowedPlain(v *Vocab, dst []uint64) []uint64 {
	dst = words(v, dst)
	for id, p := range v.pieces {
		if len(p) > 0 && m.Clone().Accept(p) {
			dst[id>>6] |= 1 << (id & 63)
		}
	}
	return dst
}

// Allowed sets bit id of dst (reallocated if shorter than (n+63)/64 words,
// cleared first) for every token whose bytes m accepts from its current
// state; a token of zero bytes never, nor one whose bytes would need more
// than MaxStacks stacks. It walks the vocabulary trie with one state per
// depth, so a shared prefix is matched once and a rejected byte prunes the
// whole subtree under it; states met on the way are interned with their
// byte transitions (a lazy DFA), so the many trie edges that lead from a
// state to one already seen (every plain character inside a JSON string)
// cost an array lookup. The table is kept in m for the next call (at most
// maxDFAStates states, about 4 MiB), and so is the whole mask of m's
// state (the last maxMasks of them, least recently used out): when m
// comes back to a state whose mask it has computed, over the same Vocab,
// Allowed is a copy of that bitset, no walk at all. A state it has not
// seen is put together from the grammar's position masks where it can
// (allowedByPosition: what each stack's top frames decide, kept on the
// Grammar for every matcher of it), and walks the whole trie only where
// it cannot. Otherwise m is not changed, but like every method it must
// not run concurrently with another on the same Matcher.
func (m *Matcher) Allowed(v *Vocab, dst []uint64) []uint64 {
	dst = words(v, dst)
	d := m.dfa
	if d == nil || len(d.states) >= maxDFAStates {
		d = newDFA(m.g)
		m.dfa = d
	}
	root := d.intern(m.st, false)
	if root >= 0 && d.masks.get(v, root, dst) {
		return dst
	}
	if !m.allowedByPosition(v, d, dst) {
		clear(dst)
		d.walk(v, root, m.st, dst)
	}
	if root >= 0 {
		d.masks.put(v, root, dst)
	}
	return dst
}
