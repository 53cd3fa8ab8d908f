package radix

import (
	"kvlab/common/kvcache/cachetest"
	"testing"

	"github.com/stretchr/testify/require"

	"kvlab/common/kvcache"
)

// The tests here reproduce the tree's own pitfalls (PITFALLS.md) with small
// ports of the buggy code, wrapped around a real Tree, and show that Tree
// does not have them.

// recounting is a tree whose Insert walks the prompt from the root and
// counts the sequence as a user of every node it passes — the blocks it got
// from Match included.
type recounting struct{ *Tree }

func (r recounting) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	t := r.Tree
	n, bs := t.root, t.blockSize
	for i := 0; i < len(pages) && (i+1)*bs <= len(tokens); i++ {
		block := tokens[i*bs : (i+1)*bs]
		if c := t.child(n, block); c != none {
			t.use(c) // the bug: for i < lent, seq already is a user of c
			n = c
			continue
		}
		if lent == i {
			lent++
		} else {
			t.alloc.Incref(pages[i])
		}
		n = t.newNode(n, block, pages[i])
		t.nodes[n].users = 1
	}
	if n != t.root {
		t.held[seq] = n
	}
	return lent
}

func TestPitfallInsertRecountsMatchedNodes(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	prompt := seq(0, 12)
	for _, tt := range []struct {
		name      string
		wrap      func(*Tree) kvcache.PrefixCache
		evictable int
	}{
		{"recounting insert", func(t *Tree) kvcache.PrefixCache { return recounting{t} }, 0},
		{"Tree.Insert", func(t *Tree) kvcache.PrefixCache { return t }, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, tree := newPoolWith(t, 8, 4, tt.wrap)
			serve(t, p, 1, prompt)
			serve(t, p, 2, prompt) // matches all three blocks, then commits them
			evictable, cached := tree.Evictable(), tree.Cached()
			tree.Evict(8)
			sy.Add(tt.name, "after two finished sequences, %d of %d cached blocks evictable; after evicting all it can, %d of 8 blocks free", evictable, cached, p.Allocator().NumFree())
			if have := evictable; have != tt.evictable {
				t.Fatalf("evictable after both sequences finished: have %d of %d cached; want %d", have, tree.Cached(), tt.evictable)
			}
			// The symptom: the pool can never be whole again.
			if have := p.Allocator().NumFree(); have != 5+tt.evictable {
				t.Fatalf("blocks free after evicting all it can: have %d; want %d", have, 5+tt.evictable)
			}
		})
	}
}

// stopping is a tree whose Insert gives up at the first block another
// sequence cached first, instead of caching the blocks after it.
type stopping struct{ *Tree }

func (s stopping) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	t := s.Tree
	n, bs := t.root, t.blockSize
	if h, ok := t.held[seq]; ok {
		n = h
	}
	for i := int(t.nodes[n].depth); i < len(pages) && (i+1)*bs <= len(tokens); i++ {
		block := tokens[i*bs : (i+1)*bs]
		if t.child(n, block) != none {
			break // the bug: nothing after a duplicate is cached
		}
		n = t.newNode(n, block, pages[i])
		t.nodes[n].users = 1
		lent++
	}
	if n != t.root {
		t.held[seq] = n
	}
	return lent
}

func TestPitfallInsertStopsAtADuplicateBlock(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	shared := seq(0, 8)
	a, b := join(shared, seq(100, 4)), join(shared, seq(200, 8))
	for _, tt := range []struct {
		name string
		wrap func(*Tree) kvcache.PrefixCache
		want int
	}{
		{"insert that stops", func(t *Tree) kvcache.PrefixCache { return stopping{t} }, 8},
		{"Tree.Insert", func(t *Tree) kvcache.PrefixCache { return t }, 16},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, tree := newPoolWith(t, 32, 4, tt.wrap)
			start(t, p, 1, a) // a and b prefill the shared blocks at the same time
			start(t, p, 2, b)
			p.Commit(1, a)
			p.Commit(2, b) // finds the shared blocks cached by a
			p.Release(1)
			p.Release(2)
			requireClean(t, p)
			sy.Add(tt.name, "b, which shares its first 8 tokens with a, matches %d of its 16 after it finished", tree.MatchLen("", b))
			if have := tree.MatchLen("", b); have != tt.want {
				t.Fatalf("MatchLen(b) after b finished: have %d; want %d", have, tt.want)
			}
		})
	}
}

// aliasing is a tree whose nodes keep the caller's token slice as their
// label instead of a copy of it. The compact tree has no field that could
// hold such a view, so the port plays one: views remembers the caller's
// slices, and every lookup first copies what they hold now into the nodes'
// tokens, which is what a view would read.
type aliasing struct {
	*Tree
	views map[int32][]int32
}

func (a aliasing) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	n := a.Tree.Insert(seq, salt, tokens, pages, lent)
	for c := a.held[seq]; c != a.root; c = a.nodes[c].parent {
		i := int(a.nodes[c].depth) - 1
		a.views[c] = tokens[i*a.blockSize : (i+1)*a.blockSize] // the bug: the label now shares the caller's memory
	}
	return n
}

func (a aliasing) MatchLen(salt string, tokens []int32) int {
	for c, view := range a.views {
		copy(a.tokensOf(c), view)
	}
	return a.Tree.MatchLen(salt, tokens)
}

func TestPitfallLabelAliasesTheCallersPrompt(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	alias := func(t *Tree) kvcache.PrefixCache { return aliasing{t, map[int32][]int32{}} }
	tree := func(t *Tree) kvcache.PrefixCache { return t }
	for _, tt := range []struct {
		name   string
		bs     int
		wrap   func(*Tree) kvcache.PrefixCache
		served int // MatchLen of the served prompt, after its buffer changed
		reused int // MatchLen of the buffer's new contents, never served
	}{
		// The served prompt's lookup lands on the stored edge, whose tokens
		// no longer match. The new contents match the root's recent child,
		// compared without hashing: the tree finds KV it never had.
		{"aliasing labels at block size 4", 4, alias, 0, 64},
		{"aliasing labels at block size 32", 32, alias, 0, 64},
		{"Tree at block size 4", 4, tree, 64, 0},
		{"Tree at block size 32", 32, tree, 64, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newPoolWith(t, 16, tt.bs, tt.wrap)
			buf := seq(0, 64)
			serve(t, p, 1, buf)
			buf[0] = 99 // the caller reuses its buffer for another prompt
			served, reused := p.Cache().MatchLen("", seq(0, 64)), p.Cache().MatchLen("", buf)
			if tt.reused > 0 {
				sy.Bug(tt.name, "the served prompt matches %d of 64 tokens, the never-served new contents of the caller's buffer %d", served, reused)
			} else {
				sy.Add(tt.name, "served %d, never served %d", served, reused)
			}
			if have := p.Cache().MatchLen("", seq(0, 64)); have != tt.served {
				t.Fatalf("MatchLen of the served prompt: have %d; want %d", have, tt.served)
			}
			if have := p.Cache().MatchLen("", buf); have != tt.reused {
				t.Fatalf("MatchLen of a prompt never served: have %d; want %d", have, tt.reused)
			}
		})
	}
}

// pinning is a tree whose Insert makes the sequence a user of every node on
// the path of its blocks, the ones it does not read included: the blocks
// another sequence cached first, and those cached after them.
type pinning struct{ *Tree }

func (p pinning) Insert(seq int, salt string, tokens, pages []int32, lent int) int {
	t := p.Tree
	n, bs := t.root, t.blockSize
	if h, ok := t.held[seq]; ok {
		n = h
	}
	for i := int(t.nodes[n].depth); i < len(pages) && (i+1)*bs <= len(tokens); i++ {
		block := tokens[i*bs : (i+1)*bs]
		if c := t.child(n, block); c != none {
			t.use(c) // the bug: seq reads its own copy, yet pins this one
			n = c
			continue
		}
		if lent == i {
			lent++
		} else {
			t.alloc.Incref(pages[i])
		}
		n = t.newNode(n, block, pages[i])
		t.nodes[n].users = 1
	}
	if n != t.root {
		t.held[seq] = n
	}
	return lent
}

func TestPitfallDuplicateBlocksPinnedWhileTheirCopyRuns(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	shared := seq(0, 8)
	a, b := join(shared, seq(100, 4)), join(shared, seq(200, 8))
	for _, tt := range []struct {
		name string
		wrap func(*Tree) kvcache.PrefixCache
		fits bool
	}{
		{"pinning insert", func(t *Tree) kvcache.PrefixCache { return pinning{t} }, false},
		{"Tree.Insert", func(t *Tree) kvcache.PrefixCache { return t }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newPoolWith(t, 8, 4, tt.wrap)
			start(t, p, 1, a) // a and b prefill the shared blocks at the same time
			start(t, p, 2, b)
			p.Commit(1, a)
			p.Commit(2, b) // b's first two blocks duplicate a's
			p.Release(1)
			// b runs alone and grows to 7 of the pool's 8 blocks, as it could
			// without a cache; a's copy of the shared blocks must give way.
			err := p.Grow(2, 28)
			sy.Add(tt.name, "growing the only live sequence to 7 of 8 blocks: %v", err)
			if (err == nil) != tt.fits {
				t.Fatalf("growing the only sequence to 7 of 8 blocks: have error %v; want success %v", err, tt.fits)
			}
			requireClean(t, p)
		})
	}
}

// countingNodes is a tree whose Evict counts the nodes it removes as the
// blocks it freed.
type countingNodes struct{ *Tree }

func (c countingNodes) Evict(n int) int {
	t := c.Tree
	removed := 0
	for ; removed < n && t.idle > 0; removed++ {
		v := t.nodes[t.ring].next
		t.unlink(v)
		t.removeLeaf(v) // the bug: ignores whether that freed the block
		t.evicted++
	}
	return removed
}

func TestPitfallEvictCountsNodesAsFreedBlocks(t *testing.T) {
	sy := cachetest.LogSymptoms(t)
	shared := seq(0, 8)
	a, b := join(shared, seq(100, 4)), join(shared, seq(200, 4))
	for _, tt := range []struct {
		name string
		wrap func(*Tree) kvcache.PrefixCache
		fits bool
	}{
		{"counting nodes", func(t *Tree) kvcache.PrefixCache { return countingNodes{t} }, false},
		{"Tree.Evict", func(t *Tree) kvcache.PrefixCache { return t }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, tree := newPoolWith(t, 8, 4, tt.wrap)
			start(t, p, 1, a)
			start(t, p, 2, b)
			p.Commit(1, a)
			p.Commit(2, b) // b's last block is cached, but b still owns it
			p.Release(1)
			// 2 blocks free, 4 evictable of which 3 would free memory.
			_, err := p.Open(3, "", seq(500, 20))
			require.NoError(t, err)
			err = p.Grow(3, 20) // 5 blocks
			sy.Add(tt.name, "growing by 5 blocks with 2 free and 3 freeable: %v; %d nodes left in the tree", err, tree.Cached())
			if (err == nil) != tt.fits {
				t.Fatalf("Grow by 5 blocks with 2 free and 3 freeable: have error %v; want success %v", err, tt.fits)
			}
			require.Equal(t, map[bool]int{true: 0, false: 1}[tt.fits], tree.Cached(), "nodes left in the tree")
			requireClean(t, p)
		})
	}
}
