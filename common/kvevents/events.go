package kvevents

// The event types, as vLLM names them (its msgspec tag).
const (
	BlockStored      = "BlockStored"
	BlockRemoved     = "BlockRemoved"
	AllBlocksCleared = "AllBlocksCleared"
)

// Event is one change to an engine's prefix cache, with vLLM's fields.
//
// BlockStored: BlockHashes are consecutive blocks of one chain that entered
// the cache, TokenIDs their tokens (BlockSize per hash, in order), and
// ParentBlockHash the hash of the block before the first one, nil when the
// first one starts the chain. BlockRemoved: BlockHashes left the cache (in
// any order). AllBlocksCleared: forget everything this engine announced.
type Event struct {
	Type            string  `json:"type"`
	BlockHashes     []Hash  `json:"block_hashes,omitempty"`
	ParentBlockHash *Hash   `json:"parent_block_hash,omitempty"`
	TokenIDs        []int32 `json:"token_ids,omitempty"`
	BlockSize       int     `json:"block_size,omitempty"`
	// Medium is where the block lives: "" for the engine's KV pool (vLLM's
	// "GPU", Medium), or a cache tier's name ("CPU", "DISK").
	Medium string `json:"medium,omitempty"`
}

// Batch is the events of one publication, in order, stamped with the Unix
// time (seconds) at which it was made.
type Batch struct {
	TS     float64 `json:"ts"`
	Events []Event `json:"events"`
}
