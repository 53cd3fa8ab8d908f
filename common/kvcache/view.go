package kvcache

// Describer is what a prefix cache implements to show its structure as
// data: the nodes it keeps, their blocks, who holds them and what it would
// evict first. It is optional; serve's /debug/cache draws a design that
// implements it and answers 501 for one that does not. Describe is called
// on the engine's goroutine, like every other method of the cache, and
// must not change the cache (no LRU update, no eviction).
type Describer interface {
	// Describe returns at most max nodes (max <= 0: all of them), parents
	// before their children, and in View.Truncated how many it left out.
	Describe(max int) View
}

// View is a prefix cache's structure at one moment.
//
// A node is what the design keeps as one unit: a block-aligned tree's node
// (one block), a hash index's cached block (its parent is the block before
// it in its prompt), a compressed trie's node (a run of blocks). Nodes come
// parents first, so a reader can build the tree in one pass. Salted
// prefixes are separate roots, named by their salt.
type View struct {
	Design    string     `json:"design"`              // the design's name: "radix", "blockhash", "trie"
	BlockSize int        `json:"block_size"`          // tokens per block
	Nodes     []ViewNode `json:"nodes"`               // parents before their children
	Truncated int        `json:"truncated,omitempty"` // nodes past Describe's max, left out
	// Policy names the eviction order EvictRank follows ("lru", ...).
	Policy string `json:"policy,omitempty"`
}

// ViewNode is one node of a View.
type ViewNode struct {
	ID     int     `json:"id"`             // unique within the View; stable while the node lives where the design can keep it so
	Parent int     `json:"parent"`         // the parent's ID; -1 for a root
	Salt   string  `json:"salt,omitempty"` // the tenant's cache salt; "" for the shared cache
	Tokens []int32 `json:"tokens"`         // the tokens whose KV the node's blocks hold
	Blocks []int32 `json:"blocks"`         // pool block ids, in order
	// Refs is the allocator's count of each block of Blocks: the cache's
	// own reference(s), the live sequences it lent the block to, and the
	// sequences that own it.
	Refs []int `json:"refs"`
	// Users is how many live sequences the cache lent this node to: while
	// it is above 0 the node cannot be evicted.
	Users int `json:"users"`
	// EvictRank is the node's place in the eviction order: 0 goes first,
	// as Evict(1), called again and again, would free the nodes' blocks
	// (an idle inner node after its children). -1: Evict frees none of its
	// blocks now, however many it is asked for (in use, or above a node
	// in use).
	EvictRank int `json:"evict_rank"`
}
