package ghost

import "fmt"

// none is the index of no node: the parent of a first block, an empty
// link, an empty heap slot.
const none int32 = -1

// noOwner is node.owner when no live sequence holds the block's page.
const noOwner = -1

// node is one block a ghost caches: no KV, no allocator block, only where it
// sits in its prefix chain and what the policies need to rank it.
//
// Nodes live in one slice and name each other by index, so the garbage
// collector has nothing to follow however many there are; an evicted
// node's slot goes to the free list for the next one.
type node struct {
	key    uint64 // the salted chain key of the prefix this block completes
	parent int32  // none for a prompt's first block
	depth  int32  // blocks from the root: this block is page depth-1
	kids   int32
	// users counts the live sequences this block is lent to; a user of a
	// node uses its ancestors too, so users > 0 pins the node.
	users int32
	// owner is the live sequence whose own page holds the block when the
	// ghost cached it without adopting it (a block computed after a
	// duplicate, see Insert), else noOwner. Evicting such a node frees
	// nothing until the owner is released, as in the radix tree.
	owner int
	live  bool

	// What the policies keep. Each ghost has one policy, so one set of
	// fields serves them all.
	prev, next int32 // a policy's linked list (LRU's ring, SLRU's protected list)
	hidx       int32 // 1 + the place in a candidate heap; 0: in none
	xidx       int32 // 1 + the place in the priority policy's expiry heap; 0: in none
	stamp      int64 // the ghost's clock at the last release (or creation, or hit)
	freq       int32 // LFU: hits since the block was cached, plus one
	seg        uint8 // SLRU: probation or protected; ARC: T1 or T2
	prio       int8  // priority policy: 0..100
	dur        int64 // priority policy: nanoseconds the priority lasts once idle; 0: for ever
	when       int64 // priority policy: wall-clock order key (release or expiry), nanoseconds
	expires    int64 // priority policy: when the priority lapses; 0: never
}

// cache is one ghost: a block-aligned prefix tree over salted chain keys
// with the radix tree's bookkeeping (users per node, lent prefixes, blocks
// cached without adoption) and its own eviction policy. It mirrors the
// radix tree's Match, Insert, Release and Evict step for step, so that
// with the LRU policy it makes the radix tree's every decision.
type cache struct {
	name  string
	bs    int
	nodes []node
	free  []int32
	// index maps a chain key to its node. A key names a whole salted
	// prefix, so there is no per-salt root: the salt is in every key.
	index table
	// held maps each sequence to the deepest node it uses; the nodes it
	// uses are that node's path from the root.
	held map[int]int32
	// owned lists, per live sequence, the nodes it cached without the
	// ghost adopting its page (node.owner); Release clears them.
	owned map[int][]int32
	ev    evictor
	tick  int64 // a logical clock, one tick per event that orders blocks

	cached  int
	evicted int64 // nodes dropped, whether or not that freed a block
	// unadopted counts the nodes cached without adoption, over the
	// ghost's life: how often the duplicate case arose.
	unadopted int64

	// What the ghost's pool would hold besides its cache (see fit):
	// lent sums the depth of every live sequence's held node (the pages
	// the ghost lends), shared counts the cached nodes whose writer still
	// holds the page (cached and private at once).
	lent, shared int
}

func newCache(name string, bs int) *cache {
	return &cache{name: name, bs: bs, index: newTable(), held: map[int]int32{}, owned: map[int][]int32{}}
}

// now advances the logical clock and returns it.
func (c *cache) now() int64 {
	c.tick++
	return c.tick
}

// child returns the node under parent keyed key, or none. The parent check
// guards against a key collision joining two chains.
func (c *cache) child(parent int32, key uint64) int32 {
	n := c.index.get(key)
	if n == none || c.nodes[n].parent != parent {
		return none
	}
	return n
}

// depthOf returns n's depth, 0 for the root (none).
func (c *cache) depthOf(n int32) int {
	if n == none {
		return 0
	}
	return int(c.nodes[n].depth)
}

// match walks keys from the root as far as the ghost caches them, lends
// every node on the way to seq until its release, and returns the tokens
// they hold: what Match would have found had this ghost been the cache.
func (c *cache) match(seq int, keys []uint64) int {
	if _, ok := c.held[seq]; ok {
		c.release(seq) // the real cache refuses this; never let a ghost's books drift
	}
	n := none
	for _, k := range keys {
		ch := c.child(n, k)
		if ch == none {
			break
		}
		c.use(ch)
		c.ev.hit(ch, seq)
		n = ch
	}
	if n != none {
		c.held[seq] = n
	}
	c.lent += c.depthOf(n)
	return c.depthOf(n) * c.bs
}

// use records one more user of n.
func (c *cache) use(n int32) {
	nd := &c.nodes[n]
	if nd.users == 0 {
		if nd.kids == 0 {
			c.ev.leave(n)
		}
		c.ev.busy(n)
	}
	nd.users++
}

// insert caches the blocks keys name, as the radix tree's Insert does:
// from the deepest node seq uses, each block already cached is skipped;
// each new block is adopted (seq uses it) as long as every block before it
// was seq's own, and after the first block another sequence cached first,
// new blocks are cached with no user, their pages still seq's (owner).
// pages bounds the blocks as the page table does.
func (c *cache) insert(seq int, keys []uint64, pages int) {
	n, ok := c.held[seq]
	if !ok {
		n = none
	}
	lent := c.depthOf(n)
	for i := lent; i < pages && i < len(keys); i++ {
		if ch := c.child(n, keys[i]); ch != none {
			n = ch // cached by another sequence: seq keeps its own copy
			continue
		}
		adopt := lent == i
		n = c.add(n, keys[i], seq, adopt)
		if adopt {
			c.held[seq] = n
			lent++
			c.lent++
		}
	}
}

// add makes a node under parent keyed key, written by seq: adopted (seq
// is its first user) or not (no user; seq's page holds it until seq goes).
func (c *cache) add(parent int32, key uint64, seq int, adopt bool) int32 {
	var n int32
	if k := len(c.free); k > 0 {
		n, c.free = c.free[k-1], c.free[:k-1]
	} else {
		n = int32(len(c.nodes))
		c.nodes = append(c.nodes, node{})
	}
	depth := int32(1)
	if parent != none {
		p := &c.nodes[parent]
		if p.kids == 0 && p.users == 0 {
			c.ev.leave(parent) // no longer a leaf
		}
		p.kids++
		depth = p.depth + 1
	}
	c.nodes[n] = node{key: key, parent: parent, depth: depth, owner: noOwner, live: true, prev: none, next: none}
	c.index.put(key, n)
	c.cached++
	c.ev.created(n, seq)
	if adopt {
		c.nodes[n].users = 1
		return n
	}
	c.nodes[n].owner = seq
	c.owned[seq] = append(c.owned[seq], n)
	c.unadopted++
	c.shared++
	c.ev.idle(n)
	c.ev.enter(n)
	return n
}

// release ends seq's use of its nodes, deepest first (so a prompt's tail
// becomes evictable before its head), and hands the pages seq kept back
// to the ghost.
func (c *cache) release(seq int) {
	if n, ok := c.held[seq]; ok {
		delete(c.held, seq)
		c.lent -= c.depthOf(n)
		for ; n != none; n = c.nodes[n].parent {
			nd := &c.nodes[n]
			nd.users--
			switch {
			case nd.users < 0:
				panic(fmt.Sprintf("ghost %s: node released more often than used", c.name))
			case nd.users == 0:
				c.ev.idle(n)
				if nd.kids == 0 {
					c.ev.enter(n)
				}
			}
		}
	}
	if owned, ok := c.owned[seq]; ok {
		for _, n := range owned {
			if nd := &c.nodes[n]; nd.live && nd.owner == seq {
				nd.owner = noOwner
				c.shared--
			}
		}
		delete(c.owned, seq)
	}
	c.ev.released(seq)
}

// evict drops nodes in the policy's order until want blocks are freed or
// nothing is evictable, and returns how many it freed. A node whose page
// its writer still holds is dropped but frees nothing, as in the radix
// tree, so the ghost keeps evicting.
func (c *cache) evict(want int) int {
	freed := 0
	for freed < want {
		v := c.ev.victim()
		if v == none {
			break
		}
		if c.drop(v) {
			freed++
		}
	}
	return freed
}

// drop removes the idle leaf v and reports whether that freed a block.
func (c *cache) drop(v int32) bool {
	nd := &c.nodes[v]
	if !nd.live || nd.users != 0 || nd.kids != 0 {
		panic(fmt.Sprintf("ghost %s: the policy chose node %d, which is not an idle leaf", c.name, v))
	}
	c.ev.leave(v)
	c.ev.evicted(v)
	freed := nd.owner == noOwner
	if !freed {
		c.shared-- // the page stays its writer's, no longer cached
	}
	c.index.delete(nd.key)
	p := nd.parent
	*nd = node{parent: none, owner: noOwner, prev: none, next: none}
	c.free = append(c.free, v)
	c.cached--
	c.evicted++
	if p != none {
		pn := &c.nodes[p]
		pn.kids--
		if pn.kids == 0 && pn.users == 0 {
			c.ev.enter(p)
		}
	}
	return freed
}

// fit evicts, by the policy, what the ghost's pool could not hold: the
// pool has capacity blocks, and besides the ghost's cache its live
// sequences hold pages blocks in their page tables (as the last Insert of
// each showed them), of which the ghost lends lent and shares the pages
// of its unadopted blocks. The real cache's pressure reaches a ghost
// through Evict; this is the rest of it, for a ghost that missed where the
// real cache hit and so cached blocks the real pool never had to find
// room for. The page counts lag behind decode steps, so fit never evicts
// more than the ghost's pool would: a ghost in the real cache's state
// never evicts here at all. capacity <= 0 turns it off.
func (c *cache) fit(capacity, pages int) {
	if capacity <= 0 {
		return
	}
	if over := c.cached + pages - c.lent - c.shared - capacity; over > 0 {
		c.evict(over)
	}
}

// evictable returns how many nodes no sequence uses: what the real
// design's Evictable counts for the radix tree.
func (c *cache) evictable() int {
	n := 0
	for i := range c.nodes {
		if nd := &c.nodes[i]; nd.live && nd.users == 0 {
			n++
		}
	}
	return n
}

// audit checks the ghost's books against a recount: kids, users along the
// held paths, the index. Tests call it; it costs O(nodes).
func (c *cache) audit() error {
	kids := make([]int32, len(c.nodes))
	users := make([]int32, len(c.nodes))
	live := 0
	for i := range c.nodes {
		nd := &c.nodes[i]
		if !nd.live {
			continue
		}
		live++
		if c.index.get(nd.key) != int32(i) {
			return fmt.Errorf("ghost %s: node %d is not indexed under its key", c.name, i)
		}
		if nd.parent != none {
			if !c.nodes[nd.parent].live {
				return fmt.Errorf("ghost %s: node %d hangs under a dropped node %d", c.name, i, nd.parent)
			}
			kids[nd.parent]++
		}
	}
	if live != c.cached || live != c.index.len() {
		return fmt.Errorf("ghost %s: %d live nodes, %d counted, %d indexed", c.name, live, c.cached, c.index.len())
	}
	lent, shared := 0, 0
	for _, n := range c.held {
		lent += c.depthOf(n)
		for ; n != none; n = c.nodes[n].parent {
			users[n]++
		}
	}
	for i := range c.nodes {
		if nd := &c.nodes[i]; nd.live && nd.owner != noOwner {
			shared++
		}
	}
	if lent != c.lent || shared != c.shared {
		return fmt.Errorf("ghost %s: lends %d pages and shares %d, a recount finds %d and %d", c.name, c.lent, c.shared, lent, shared)
	}
	for i := range c.nodes {
		nd := &c.nodes[i]
		if !nd.live {
			continue
		}
		if nd.kids != kids[i] || nd.users != users[i] {
			return fmt.Errorf("ghost %s: node %d counts %d children and %d users, a recount finds %d and %d",
				c.name, i, nd.kids, nd.users, kids[i], users[i])
		}
	}
	if a, ok := c.ev.(auditor); ok {
		return a.audit()
	}
	return nil
}
