// Package blockhash is a prefix cache for the paged KV pool: an index from
// a chained hash of each full block of a prompt to the KV block that holds
// it, with the sharing counted in the allocator's reference counts and
// copy-on-write left to the pool.
//
// A prompt is cut into blocks of BlockSize tokens. Block i's key is
// hash(key of block i-1, tokens of block i), so a key names a whole prefix.
// Match walks a new prompt block by block, looks each key up, and takes a
// reference on every block it reuses; the first miss ends the walk. A key
// is only a hint: every hit is verified against the block's stored tokens
// and against the identity of the block matched before it, so neither a
// hash collision nor a block recycled since it was indexed can hand out the
// wrong KV.
//
// A request's cache salt keeps tenants apart in one index: the salt is
// mixed into the key of a prompt's first block only (SaltRoot), and later
// blocks inherit it through the chain, as vLLM's block hashes do. The key
// is again only a hint: a first block also records its salt, and the check
// every hit passes compares it, so neither a collision nor a chain from
// another salt can reach a block another tenant cached
// (docs/phase08_hashcow.md, "Tenants").
//
// Ownership is the allocator's count: the index holds one reference on each
// block it caches and every sequence using a block holds one more. A block
// only the index holds (count 1) is reclaimable; the cache keeps those in a
// queue, in the order they became reclaimable (vLLM's free queue), and
// gives them back from its front when the pool runs short (Evict).
package blockhash

import "kvlab/common/kvcache"

// Cache is the hash index. It implements kvcache.PrefixCache and, like the
// pool that calls it, is not safe for concurrent use.
type Cache struct {
	alloc *kvcache.Allocator
	bs    int
	// hash keys blocks; nil means MapHash, called directly (and inlined)
	// rather than through a function value.
	hash HashFunc
	// vllm, when not nil, keys blocks by vLLM's block hash instead of hash
	// (WithVLLMHash).
	vllm *vllmHashes

	// index maps a key to the block cached under it. A cached block whose
	// key was since taken by a newer block is not in it (see Insert).
	index table
	// blocks describes every allocator block, cached or not.
	blocks []blockInfo
	// tokens[b*bs:(b+1)*bs] are the tokens of block b while it is cached.
	tokens []int32

	// Every cached block is in exactly one of lru and pinned. lru holds
	// blocks only the index holds; pinned holds the rest, and blocks whose
	// last user let go since the cache last looked (see settle). joining
	// is settle's scratch list.
	lru     lru
	pinned  []int32
	joining []joiner

	// salts holds the cache salt of every cached first block that was
	// cached under one. Later blocks have none (their parent's serial
	// carries it), and most first blocks have none either, so a map beside
	// blocks costs less than a string in every block's record (16 bytes).
	salts map[int32]string

	// users lists the blocks each sequence took in Match, to give back in
	// Release; spare recycles those lists.
	users map[int][]int32
	spare [][]int32
	// moreUsers counts, for a block matched by more than usersMax live
	// sequences at once, the ones its record has no room for.
	moreUsers map[int32]int

	clock   int64  // ticks once per Match or Insert
	serial  uint64 // last serial handed out; 0 means "not cached"
	cached  int    // blocks the index holds
	evicted int
}

var _ kvcache.PrefixCache = (*Cache)(nil)

// blockInfo is what the cache knows about one allocator block.
type blockInfo struct {
	// serial names this caching of the block; 0 while it is not cached. It
	// is never reused, so a child that records its parent's serial can
	// tell its parent from a block recycled since.
	serial uint64
	// parent is the serial of the block before this one in its prompt; 0
	// for a first block.
	parent uint64
	key    uint64 // the key it was cached under
	// ord is its place in the eviction order: a clock and its index in the
	// prompt (in blocks), packed by order (see pack) so that one
	// comparison of two integers orders two blocks. While it is pinned,
	// the clock is that of the last Match or Insert that went through it;
	// while it is queued, the one settle gave it when it joined the queue
	// (0 if no walk can reach it, see forget).
	ord uint64
	// link holds its neighbours in lru and the number of sequences holding
	// it through Match, packed (see linkBits; Cache.usersOf).
	link uint64
}

// depthBits is how many low bits of ord hold a block's depth, inverted so
// that, among blocks queued at the same clock, the deepest sorts first. A
// depth of 1<<depthBits − 1 or more (16M tokens and more at 16 tokens a
// block) counts as that depth; the clock has the other 44 bits.
const (
	depthBits = 20
	depthMask = 1<<depthBits - 1
)

// pack returns the ord of a block at clock used (see blockInfo.ord), depth
// blocks into its prompt.
func pack(used int64, depth int) uint64 {
	return uint64(used)<<depthBits | uint64(depthMask-min(depth, depthMask))
}

// used returns the clock in the block's ord (see blockInfo.ord).
func (i *blockInfo) used() int64 { return int64(i.ord >> depthBits) }

// depth returns the block's index in its prompt, in blocks.
func (i *blockInfo) depth() int { return depthMask - int(i.ord&depthMask) }

// Option configures a Cache.
type Option func(*Cache)

// WithHash makes the cache key blocks with h instead of MapHash: XXHash
// where keys must mean the same in another process, a deliberately weak
// hash in tests.
func WithHash(h HashFunc) Option { return func(c *Cache) { c.hash = h } }

// New returns an empty cache over the blocks of a, which are blockSize
// tokens each.
func New(a *kvcache.Allocator, blockSize int, opts ...Option) *Cache {
	n := a.Total()
	c := &Cache{
		alloc:  a,
		bs:     blockSize,
		index:  newTable(n),
		blocks: make([]blockInfo, n),
		tokens: make([]int32, n*blockSize),
		users:  make(map[int][]int32),
		salts:  make(map[int32]string),
	}
	c.lru = lru{head: -1, tail: -1, blocks: c.blocks}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Release gives back the references seq took in Match.
func (c *Cache) Release(seq int) {
	blocks, ok := c.users[seq]
	if !ok {
		return
	}
	for _, b := range blocks {
		info := &c.blocks[b]
		if info.link>>usersShift == usersMax && c.moreUsers[b] > 0 {
			c.moreUsers[b]--
			continue
		}
		info.link -= 1 << usersShift
	}
	c.alloc.DecrefAll(blocks)
	delete(c.users, seq)
	c.spare = append(c.spare, blocks[:0])
}

// Holds returns the references the cache accounts for on block b: the
// index's own, if b is cached, and one per sequence that matched it.
func (c *Cache) Holds(b int32) int {
	n := c.usersOf(b)
	if c.blocks[b].serial != 0 {
		n++
	}
	return n
}

// usersOf returns the number of sequences holding b through Match.
func (c *Cache) usersOf(b int32) int {
	n := int(c.blocks[b].link >> usersShift)
	if n == usersMax {
		n += c.moreUsers[b]
	}
	return n
}

// addUser gives b one more sequence holding it through Match.
func (c *Cache) addUser(info *blockInfo, b int32) {
	if info.link>>usersShift < usersMax {
		info.link += 1 << usersShift
		return
	}
	if c.moreUsers == nil {
		c.moreUsers = map[int32]int{}
	}
	c.moreUsers[b]++
}

// Stats reports the blocks cached now and evicted so far.
func (c *Cache) Stats() kvcache.CacheStats {
	return kvcache.CacheStats{Blocks: c.cached, Evicted: c.evicted}
}

// takeList returns an empty block list, recycled when possible.
func (c *Cache) takeList() []int32 {
	if n := len(c.spare); n > 0 {
		l := c.spare[n-1]
		c.spare = c.spare[:n-1]
		return l[:0]
	}
	return nil
}

// next returns the key of block under the block keyed parent.
func (c *Cache) next(parent uint64, block []int32) uint64 {
	if c.hash == nil {
		return MapHash(parent, block)
	}
	return c.hash(parent, block)
}

// saltOf returns the cache salt cached block b was cached under as a first
// block, or "".
func (c *Cache) saltOf(b int32) string {
	if len(c.salts) == 0 {
		return ""
	}
	return c.salts[b]
}

// setSalt records salt as cached block b's ("" for none).
func (c *Cache) setSalt(b int32, salt string) {
	if salt == "" {
		delete(c.salts, b)
		return
	}
	c.salts[b] = salt
}

// tokensOf returns the stored tokens of cached block b.
func (c *Cache) tokensOf(b int32) []int32 {
	return c.tokens[int(b)*c.bs : (int(b)+1)*c.bs]
}

// PrefixCache builds a hash index with the default (in-process) hash for
// an engine: it has the type of engine.Config.PrefixCache, as radix.New and
// trie.PrefixCache do, so a program picks a design with one assignment.
func PrefixCache(a *kvcache.Allocator, blockSize int) kvcache.PrefixCache { return New(a, blockSize) }
