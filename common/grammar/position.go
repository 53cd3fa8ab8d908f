package grammar

import (
	"math/bits"
	"sync"
)

// Position masks: what a stack's top frames decide on their own.
//
// A stack is its top frames (the rule alternatives being matched right
// now, a character position on top) over the rest, the frames of the
// rules that called them. A token that stays inside the top frames is
// accepted or refused whatever the rest is; only a token that pops out of
// them needs the rest. So for the top keyFrames positions of a stack (its
// key) Allowed can find once, for every vocabulary token:
//
//   - W, the tokens accepted without popping out of the key (or popping
//     with their very last character, which every rest accepts: popping
//     expands the rest, and an expansion is never empty);
//   - U, the tokens that pop out of the key before their end: the rest
//     decides them, so what is kept is where they are in the trie, the
//     nodes below which a token has popped;
//   - and every other token is refused, for every rest.
//
// (When the key is the whole stack there is no rest: popMark stands for
// the empty stack, the end of the sentence, which takes no byte more,
// like popMark's empty class, so the walk is the plain one and U empty.)
//
// One walk of the whole trie finds both, from the key's frames over
// popMark, a hidden position that stands for the rest: a trie node whose
// state holds the stack popMark has popped, its own tokens go to W and its
// whole subtree to U, unwalked. The mask of a state (a set of stacks, and
// a token is allowed when some stack accepts it) is then the union, over
// its stacks s, of W(key s), and one walk of the whole state over the
// union of the U(key s) only (stacks that pop into one rest, as a
// number's digit loop, fraction and exponent do, share that walk).
// Inside a JSON string the key is the string's own frames, the same for
// the first key of the first record as for any string value later, so
// the walk that took every one of 262144 tokens is paid once per grammar,
// and a new string context walks only the few thousand tokens that hold a
// closing quote.
//
// Exactness. The union is the plain answer as long as no token's bytes
// need more than MaxStacks stacks at once (past it Accept refuses the
// token, whichever stack would have taken it). A token of U is walked
// from the whole state, so the walk meets the bound where Accept would,
// and then the state falls back. A token outside every U never pops out
// of a key before its last byte, and allowedByPosition bounds its stacks
// per byte: each stack s gives at most max(key s) (the most any state of
// the key's walk held), plus the expansion of its rest at the byte that
// pops. When that sum could pass MaxStacks, or the walk met the bound, or
// the state has more than maxPositionStacks stacks or a UTF-8 sequence
// half read, or the grammar's cache is full, Allowed walks the whole trie
// as before.

// keyFrames is how many top frames a position key holds. One is too few:
// inside a JSON string the top frame is one character class, which pops
// after every character; three are the class, the char* loop and the
// closing quote, the whole string.
const keyFrames = 3

// maxPositionStacks bounds the stacks of a state whose mask is put
// together from position masks: each costs an OR of its W and a walk of
// its U, so past a few dozen the one walk of the whole trie is cheaper.
const maxPositionStacks = 16

// maxPositionBytes bounds the memory of one Grammar's position masks, over
// all vocabularies. An entry holds W (vocab/8 bytes as a bitset, 32 KiB at
// 262144 tokens, or 4 bytes a token when W is sparse) and U (12 bytes and
// a few of path for each trie node where tokens pop out of the key, U at
// most vocab/4 tokens). A new entry is made only while the entries so far
// and a whole bitset more fit (its marks may go a little past); after
// that, states whose keys are new walk the whole trie, and the entries
// made stay. Parse keeps maxRecentGrammars grammars, so 64 MiB at most
// are held by grammars no request is using.
var maxPositionBytes = 8 << 20 // a variable so a test can make it tiny

// posKey names one entry: a vocabulary and the top n positions of a
// stack; whole when they are the whole stack, and then what pops out of
// them is the end of the sentence, after which nothing is accepted.
type posKey struct {
	v     *Vocab
	n     int32
	pos   [keyFrames]int32
	whole bool
}

// posEntry is what the top frames of posKey decide over its vocabulary.
type posEntry struct {
	once  sync.Once
	wBits []uint64 // W as a bitset, or
	wIDs  []int32  // W as ids, when that is smaller
	// U as the trie nodes (in order) where a token pops out of the key:
	// U is their subtrees.
	u   marks
	max int // the most stacks of a state of the key's walk
	// unusable: the walk met MaxStacks, or U was too wide to keep.
	unusable bool
	bytes    int
}

// positionCache holds a Grammar's position masks for every Matcher of it,
// on any goroutine: an entry is made once (sync.Once, outside the lock, so
// one slow walk does not hold up the others) and read-only afterwards.
type positionCache struct {
	mu      sync.Mutex
	entries map[posKey]*posEntry
	bytes   int // memory of the entries, reserved in full before a walk
	walks   int // entries computed, for tests and benchmarks
}

// keyOf returns s's key over v and the rest of s below it.
func keyOf(v *Vocab, s *node) (posKey, *node) {
	k := posKey{v: v}
	for s != nil && k.n < keyFrames {
		k.pos[k.n] = s.pos
		k.n++
		s = s.next
	}
	k.whole = s == nil
	return k, s
}

// entry returns the entry of k, walking for it the first time; nil when
// the cache has no room for a new one.
func (g *Grammar) entry(k posKey) *posEntry {
	c := &g.positions
	reserve := k.v.Len()/8 + 64
	c.mu.Lock()
	e, ok := c.entries[k]
	if !ok {
		if c.bytes+reserve > maxPositionBytes {
			c.mu.Unlock()
			return nil
		}
		if c.entries == nil {
			c.entries = make(map[posKey]*posEntry)
		}
		e = &posEntry{}
		c.entries[k] = e
		c.bytes += reserve
	}
	c.mu.Unlock()
	e.once.Do(func() {
		g.fillEntry(k, e)
		c.mu.Lock()
		c.bytes += e.bytes - reserve
		c.walks++
		c.mu.Unlock()
	})
	return e
}

// fillEntry walks the whole trie of k.v from k's frames over popMark (a
// dfa of its own, dropped afterwards) and sorts every token into W, U or
// refused.
func (g *Grammar) fillEntry(k posKey, e *posEntry) {
	v := k.v
	top := push(g.popMark, nil)
	for i := k.n - 1; i >= 0; i-- {
		top = push(k.pos[i], top)
	}
	d := newDFA(g)
	st := state{stacks: []*node{top}}
	ids := make([]int32, v.max+1)
	raw := make([]state, v.max+1)
	ids[0] = d.intern(st, true)
	raw[0] = st
	var popped []bool // by state id, filled as states are interned
	hasPopped := func(depth int32) bool {
		id := ids[depth]
		if id < 0 {
			return g.holdsPopMark(&raw[depth])
		}
		for len(popped) <= int(id) {
			popped = append(popped, g.holdsPopMark(&d.states[len(popped)]))
		}
		return popped[id]
	}
	wBits := make([]uint64, (v.Len()+63)/64)
	nw := 0
	var u marks
	wide := 0 // tokens in U
	nodes := v.nodes
	trans := d.trans
	for i := int32(1); i < int32(len(nodes)-1); {
		n := &nodes[i]
		var t int32 // as in walk: a transition in the table inline
		if p := ids[n.depth-1]; p >= 0 {
			t = trans[int(p)<<8|int(n.edge)]
		}
		switch {
		case t > 0:
			ids[n.depth] = t - 1
		case t == 0:
			if !d.next(ids, raw, n.depth, n.edge) {
				t = -1
			}
			trans = d.trans
		case t == tooMany:
			d.overflow = true
		}
		if t < 0 {
			i = n.skip
			continue
		}
		for _, id := range v.ids[n.tok:nodes[i+1].tok] {
			wBits[id>>6] |= 1 << (id & 63)
			nw++
		}
		if !k.whole && hasPopped(n.depth) {
			if below := int(nodes[n.skip].tok - nodes[i+1].tok); below > 0 {
				u.add(v, i)
				wide += below
			}
			i = n.skip
			continue
		}
		i++
	}
	e.max = d.widest
	if d.overflow || wide > v.Len()/4 {
		e.unusable = true
		return
	}
	if 32*nw < v.Len() {
		e.wIDs = make([]int32, 0, nw)
		for w, x := range wBits {
			for ; x != 0; x &= x - 1 {
				e.wIDs = append(e.wIDs, int32(w*64+bits.TrailingZeros64(x)))
			}
		}
		e.bytes = 4 * nw
	} else {
		e.wBits = wBits
		e.bytes = 8 * len(wBits)
	}
	e.u = u
	e.bytes += u.size()
}

// holdsPopMark reports whether some stack of st has popped out of its key
// (the walk of fillEntry is the only place popMark is ever pushed).
func (g *Grammar) holdsPopMark(st *state) bool {
	for _, n := range st.stacks {
		if n != nil && n.pos == g.popMark {
			return true
		}
	}
	return false
}

// orW sets W's tokens in dst.
func (e *posEntry) orW(dst []uint64) {
	if e.wBits != nil {
		for i, w := range e.wBits {
			dst[i] |= w
		}
		return
	}
	for _, id := range e.wIDs {
		dst[id>>6] |= 1 << (id & 63)
	}
}

// allowedByPosition writes m's mask over v into dst (cleared) from the
// position masks of its stacks, walking with d; false when it cannot
// prove the result exact (see the comment at the top of this file), and
// then dst holds nothing the caller may use.
func (m *Matcher) allowedByPosition(v *Vocab, d *dfa, dst []uint64) bool {
	if m.st.npend != 0 || len(m.st.stacks) > maxPositionStacks {
		return false
	}
	type part struct {
		s *node
		e *posEntry
	}
	var parts [maxPositionStacks]part
	np := 0
	bound := 0
	var ss stackSet
	for _, s := range m.st.stacks {
		if s == nil {
			continue // the empty stack takes no byte
		}
		k, rest := keyOf(v, s)
		e := m.g.entry(k)
		if e == nil || e.unusable {
			return false
		}
		popped := 1 // the empty stack, when the key is the whole stack
		if rest != nil {
			ss.s, ss.err, ss.index = ss.s[:0], nil, nil
			m.g.expand(rest, &ss)
			if ss.err != nil {
				return false
			}
			popped = len(ss.s)
		}
		bound += e.max + popped
		parts[np] = part{s, e}
		np++
	}
	var lists [maxPositionStacks][]markPath
	var buf []byte
	for i, p := range parts[:np] {
		p.e.orW(dst)
		lists[i], buf = p.e.u.paths(nil, buf)
	}
	// U of every stack in trie order, walked once from the whole state:
	// the stacks that share a rest share the walk below it too.
	var merged []markPath
	for {
		best := -1
		for i := range lists[:np] {
			if len(lists[i]) > 0 && (best < 0 || lists[i][0].node < lists[best][0].node) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		merged = append(merged, lists[best][0])
		lists[best] = lists[best][1:]
	}
	d.overflow = false
	if len(merged) > 0 {
		root := d.intern(m.st, false)
		d.walkUnder(v, merged, root, m.st, dst)
	}
	if d.overflow || bound > MaxStacks {
		return false
	}
	d.positioned++
	return true
}
